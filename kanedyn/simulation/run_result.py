"""The last stage of a run: the recorded outputs (:class:`~kanedyn.simulation.output.Recorder`)
written out as a :class:`~kanedyn.Trajectory`, streamed while the run goes
(:class:`Streamer`), and checked against the joints' limits (:func:`checked_limits`).

Under MSD the recorder holds the momentum states; :func:`output_speeds` solves each
output's speeds with the lock set of its instant.
"""

from __future__ import annotations

import time as _time
import warnings
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import KanedynError
from kanedyn.simulation import limits as limits_
from kanedyn.simulation import output as output_
from kanedyn.simulation.options import Formulation, Method
from kanedyn.simulation.stops import Stops
from kanedyn.simulation.system import System
from kanedyn.simulation.trajectory import Trajectory

__all__ = ["Streamer", "checked_limits", "engine_label", "output_speeds", "partial"]

Array = NDArray[np.float64]


def output_speeds(system: System, xs: Array, locks: list[NDArray[np.intp]]) -> Array:
    """The speeds (outputs, n) of the integrated states ``xs``, each with its lock set
    (the states themselves under Kane; a row that cannot be solved is NaN). Leaves
    ``system.locked`` at the last lock set: callers that go on put it back."""
    model = system.model
    if system.formulation is Formulation.KANE:
        return xs[:, model.nq_total :].copy()
    out = np.empty((len(xs), model.n_total))
    for i, (x, locked) in enumerate(zip(xs, locks, strict=True)):
        system.locked = locked
        try:  # a diverged state's speeds may not be computable: NaN for that row only
            with np.errstate(all="ignore"):
                out[i] = system.speeds(x[: model.nq_total], x[model.nq_total :])
        except (KanedynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
            out[i] = np.nan
    return out


class Streamer:
    """Sends each block of outputs to ``stream`` as ``(t (k,), q (k, nq), u (k, n))``
    (speeds from the momentum states under MSD, with the lock set of each output)."""

    def __init__(self, system: System, stream: Any) -> None:
        self.system, self.stream = system, stream

    def __call__(self, ts: list[float], xs: list[Any], locks: list[Any]) -> None:
        model = self.system.model
        was_locked = self.system.locked
        x = np.array(xs, dtype=float).reshape(len(ts), model.nq_total + model.n_total)
        u = output_speeds(self.system, x, locks)
        self.system.locked = was_locked
        self.stream(np.array(ts, dtype=float), x[:, : model.nq_total], u)


def engine_label(system: System) -> str:
    """``Trajectory.engine``: native, python (and why not native), or dense."""
    cm = system.cm
    if cm is None:
        return "dense"
    if cm.backend == "native":
        return "native"
    return f"{cm.backend} ({cm.backend_note})"


def checked_limits(
    traj: Any,
    mode: limits_.Limits,
    stops: Stops | None = None,
    *,
    warn: bool = True,
    stacklevel: int = 1,
) -> Any:
    """``traj`` with its ``limits`` mode and ``limit_crossings``: the crossings of its
    outputs (``"warn"``, with a JointLimitWarning ``stacklevel`` frames above the caller
    when ``warn``) or the first time each stop held its joint (``"stop"``)."""
    found: tuple[limits_.LimitCrossing, ...] = ()
    if mode is limits_.Limits.WARN:
        found = limits_.crossings(traj.model, traj.t, traj.q)
        if found and warn:
            warnings.warn(
                limits_.report(found), limits_.JointLimitWarning, stacklevel=stacklevel + 1
            )
    elif mode is limits_.Limits.STOP and stops is not None:
        found = stops.crossings()
    return attrs.evolve(traj, limits=mode.value, limit_crossings=found)


def trajectory(
    system: System,
    rec: output_.Recorder,
    integrator: Method,
    events: Sequence[Any],
    *,
    wall_time: float,
    steps: int,
    speeds: Array | None = None,
    status: str = "completed",
    loop_drift: float | None = None,
) -> Trajectory:
    """The Trajectory of the outputs in ``rec``; ``speeds`` at the outputs when the run
    loop gave them (MSD), else solved here (:func:`output_speeds`, ``system.locked``
    kept)."""
    model = system.model
    form = system.formulation
    xs = np.array(rec.xs, dtype=float).reshape(len(rec.ts), model.nq_total + model.n_total)
    if speeds is None:
        was_locked = system.locked
        speeds = output_speeds(system, xs, rec.locks[: len(rec.ts)])
        system.locked = was_locked
    extra: dict[str, Any] = (
        {"loop_drift": loop_drift, "repartitions": system.repartitions}
        if status == "completed"
        else {"status": status}
    )
    return Trajectory(
        model=model, t=np.array(rec.ts, dtype=float), q=xs[:, : model.nq_total], u=speeds,
        formulation=form.value, method=integrator.name, wall_time=wall_time, steps=steps,
        events=tuple(events),
        momenta=xs[:, model.nq_total :].copy() if form is Formulation.MSD else None,
        engine=engine_label(system), **extra,
    )  # fmt: skip


def partial(
    system: System,
    rec: output_.Recorder,
    integrator: Method,
    start: float,
    events: Sequence[Any],
    status: str,
) -> Trajectory:
    """The Trajectory of the outputs recorded before a run stopped early (``status``
    ``"diverged"`` or ``"interrupted"``)."""
    n = min(len(rec.ts), len(rec.xs), len(rec.locks))
    del rec.ts[n:], rec.xs[n:], rec.locks[n:]
    try:
        rec.drain()
    except (KanedynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
        pass  # the run already failed: keep what is recorded
    return trajectory(
        system, rec, integrator, events, wall_time=_time.perf_counter() - start,
        steps=rec.steps, status=status,
    )  # fmt: skip
