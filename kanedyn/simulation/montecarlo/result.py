"""The result of a Monte Carlo run: the members table, envelopes, percentiles, files.

:class:`MonteCarloResult` is built by :func:`kanedyn.monte_carlo` from the chunks of
members. Its :attr:`~MonteCarloResult.members` table has one row per member: ``member``,
each dispersed parameter under its ``parameter`` name, each metric, ``status`` (``ok``,
``invalid``: not simulated, ``failed``: the simulation stopped) and ``error``.
Statistics are taken over the members whose status is ``ok``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import KanedynError, ModelError

__all__ = ["STATUS", "MonteCarloResult", "require_pandas"]

Array = NDArray[np.float64]

#: status code -> name, as in the ``status`` column
STATUS = ("ok", "invalid", "failed")
#: percentiles reported in summaries and tables
PERCENTILES = (1.0, 5.0, 50.0, 95.0, 99.0)


def require_pandas() -> Any:
    """The pandas module, or a KanedynError naming the extra that brings it."""
    try:
        import pandas
    except ImportError:
        raise KanedynError(
            "Monte Carlo results need pandas: kanedyn[dask] (in kanedyn's source tree: python -m pip install '.[dask]')"
        ) from None
    return pandas


@attrs.frozen(eq=False)
class MonteCarloResult:
    """Per-member metrics and dispersed values, and the chosen outputs' time histories.

    Attributes
    ----------
    members : pandas.DataFrame
        One row per member (the columns of ``members.csv``).
    t : ndarray (nt,)
        Output times [s].
    outputs : dict of str to ndarray (nt, N)
        Each chosen output's time history, one column per member (NaN for members that
        are not ``ok``).
    parameters, metrics : list of str
        The dispersed parameter names and the metric names (columns of ``members``).
    settings : dict
        ``n``, ``seed``, ``t_final``, ``dt``, ``output_every``, ``chunk_size``,
        ``scheduler``, ``engine``, and ``wall_time_s``, ``chunks_resumed``.
    store : pathlib.Path or None
        The chunk folder, when the run kept one.
    """

    members: Any
    t: Array
    outputs: dict[str, Array]
    parameters: list[str]
    metrics: list[str]
    settings: dict[str, Any]
    store: Path | None = None

    @property
    def ok(self) -> NDArray[np.bool_]:
        """(N,) True for the members that ran to the end."""
        return np.asarray(self.members["status"] == "ok")

    @property
    def failures(self) -> Any:
        """The rows of members that are ``invalid`` or ``failed``, with their error."""
        return self.members[~self.ok]

    def trajectory(self, member: int) -> tuple[Array, Array, Array]:
        """``(t, q, u)`` of ``member``, shapes (nt,), (nt, nq), (nt, n), read from the chunk
        store (a run with ``keep_trajectories=True``); NaN when the member is not ok."""
        if self.store is None or not self.settings.get("keep_trajectories"):
            raise ModelError("trajectories are kept only by runs with keep_trajectories=True")
        for path in sorted(self.store.glob("chunk-*.npz")):
            first, last = (int(x) for x in path.stem.split("-")[1:3])
            if first <= member <= last:
                with np.load(path) as z:
                    b = member - first
                    return z["t"], z["q"][:, b], z["u"][:, b]
        raise ModelError(f"member {member} is not in the store {self.store}")

    def envelope(self, output: str, percentiles: Sequence[float] = PERCENTILES) -> Array:
        """Percentiles over the ``ok`` members of ``output`` at every output time:
        an array (len(percentiles), nt) (``numpy.percentile``, linear interpolation)."""
        if output not in self.outputs:
            raise ModelError(f"no output {output!r}; outputs are {list(self.outputs)}")
        history = self.outputs[output][:, self.ok]
        if history.shape[1] == 0:
            return np.full((len(percentiles), self.t.size), np.nan)
        return np.percentile(history, list(percentiles), axis=1)

    def percentiles(self, percentiles: Sequence[float] = PERCENTILES) -> Any:
        """A table (pandas DataFrame) of each metric's percentiles, mean, standard deviation
        (ddof = 1), minimum and maximum over the ``ok`` members; one row per metric."""
        pd = require_pandas()
        rows = {}
        for name in self.metrics:
            x = np.asarray(self.members.loc[self.ok, name], dtype=float)
            rows[name] = _stats(x, percentiles)
        columns = [f"p{_pct(p)}" for p in percentiles] + ["mean", "std", "min", "max"]
        return pd.DataFrame.from_dict(rows, orient="index", columns=columns)

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` holds: settings, member counts by status, each metric's
        statistics (as :meth:`percentiles`), and the members that are not ``ok`` with
        their error. Non-finite numbers are ``null`` (strict JSON)."""
        status = self.members["status"]
        stats = self.percentiles()
        out = {
            **{k: v for k, v in self.settings.items()},
            "counts": {s: int((status == s).sum()) for s in STATUS},
            "parameters": list(self.parameters),
            "metrics": {
                name: {col: _json_number(stats.loc[name, col]) for col in stats.columns}
                for name in self.metrics
            },
            "not_ok": [
                {"member": int(row["member"]), "status": row["status"], "error": row["error"]}
                for _, row in self.failures.iterrows()
            ],
        }
        return out

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        """Write :attr:`members` (``members.csv``)."""
        self.members.to_csv(path, index=False)

    def write(self, folder: str | os.PathLike[str], *, plot: bool = True) -> list[str]:
        """Write ``members.csv``, ``summary.json`` and (with matplotlib, when ``plot``)
        ``montecarlo.png`` into ``folder``; returns the file names written."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self.to_csv(out / "members.csv")
        text = json.dumps(self.summary(), indent=2, allow_nan=False)
        (out / "summary.json").write_text(text + "\n")
        files = ["members.csv", "summary.json"]
        if plot:
            try:
                self.plot(out / "montecarlo.png")
                files.append("montecarlo.png")
            except ImportError:
                pass
        return files

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """Percentile envelopes of the outputs (1-99 %, 5-95 % bands and the median) and
        histograms of the metrics, in one figure; saved to ``path`` if given.

        Needs matplotlib (the ``plot`` extra); returns the Figure.
        """
        from kanedyn.plotting import montecarlo_figure

        return montecarlo_figure(self, None if path is None else Path(path))


def _pct(p: float) -> str:
    return f"{p:g}".replace(".", "_")


def _stats(x: Array, percentiles: Sequence[float]) -> list[float]:
    if x.size == 0:
        return [math.nan] * (len(percentiles) + 4)
    pct = np.percentile(x, list(percentiles)).tolist()
    std = float(np.std(x, ddof=1)) if x.size > 1 else math.nan
    return [*pct, float(np.mean(x)), std, float(np.min(x)), float(np.max(x))]


def _json_number(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None
