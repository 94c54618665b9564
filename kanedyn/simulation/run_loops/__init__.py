"""The run loops, one per engine kind; each is ``fn(run, x) -> (steps, speeds)``, stepping
a started :class:`~kanedyn.simulation.run_state.Run` from the integrated state ``x`` and
recording its outputs in ``run.rec`` (``speeds``: the speeds at the outputs when the loop
has them, under MSD, else None).

* :mod:`~kanedyn.simulation.run_loops.rk4`: dense RK4 on NumPy states (events,
  controllers, callable loads, stops, loops);
* :mod:`~kanedyn.simulation.run_loops.rk4_compiled`: RK4 on Python floats through the
  compiled kernel;
* :mod:`~kanedyn.simulation.run_loops.rk4_native`: the native RK4 loop;
* :mod:`~kanedyn.simulation.run_loops.adaptive`: a scipy ``OdeSolver``.

:data:`LOOPS` maps each :class:`~kanedyn.simulation.run_plan.Loop` of a plan to its loop.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from kanedyn.simulation.run_loops.adaptive import run_adaptive
from kanedyn.simulation.run_loops.rk4 import run_rk4
from kanedyn.simulation.run_loops.rk4_compiled import run_rk4_compiled
from kanedyn.simulation.run_loops.rk4_native import run_rk4_native
from kanedyn.simulation.run_plan import Loop
from kanedyn.simulation.run_state import Run

__all__ = ["LOOPS", "run_adaptive", "run_rk4", "run_rk4_compiled", "run_rk4_native"]

RunLoop = Callable[[Run, NDArray[np.float64]], tuple[int, NDArray[np.float64] | None]]

LOOPS: dict[Loop, RunLoop] = {
    Loop.RK4: run_rk4,
    Loop.RK4_COMPILED: run_rk4_compiled,
    Loop.RK4_NATIVE: run_rk4_native,
    Loop.ADAPTIVE: run_adaptive,
}
