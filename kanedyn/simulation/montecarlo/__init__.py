"""Monte Carlo dispersion analysis: dispersions as data, reproducible members, statistics.

* :mod:`~kanedyn.simulation.montecarlo.dispersion`: :class:`Dispersion` and the sampler
  (member k's values depend only on the seed and k). The TOML form is read by
  :func:`kanedyn.io.read_dispersions`.
* :mod:`~kanedyn.simulation.montecarlo.runner`: :func:`monte_carlo`, in chunks, in
  process or on a Dask cluster, with a chunk store for resuming.
* :mod:`~kanedyn.simulation.montecarlo.result`: :class:`MonteCarloResult`: the members
  table, percentiles, envelopes, ``members.csv``, ``summary.json`` and the figure.
"""

from kanedyn.simulation.montecarlo.dispersion import Dispersion
from kanedyn.simulation.montecarlo.result import MonteCarloResult
from kanedyn.simulation.montecarlo.runner import monte_carlo

__all__ = ["Dispersion", "MonteCarloResult", "monte_carlo"]
