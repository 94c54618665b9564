"""The dense RK4 run loop: classic RK4 on NumPy state vectors
(:func:`kanedyn.dynamics.steppers.rk4_step`), for every run the faster loops do not take:
lock events, controller samples, callable loads, joint-limit stops, models with loops."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.steppers import rk4_step
from kanedyn.errors import ModelError
from kanedyn.simulation.events import n_due
from kanedyn.simulation.monitor import Monitor, Progress
from kanedyn.simulation.run_state import Run, apply_events
from kanedyn.simulation.system import normalize_quaternions

__all__ = ["run_rk4"]

Array = NDArray[np.float64]


def run_rk4(run: Run, x: Array) -> tuple[int, Array | None]:
    """RK4 on NumPy state vectors, with lock events, controller samples and callable
    loads; quaternions normalized before every stage and after every step; with
    ``run.drift``, the state projected onto the loops' constraint manifold after every
    step; with ``run.stops``, the joint limits' stops applied after every step
    (:meth:`~kanedyn.simulation.stops.Stops.after_step`). The outputs go to
    ``run.rec``; returns the number of steps (and no speeds: the caller solves them)."""
    plan, system, rec, sampler = run.plan, run.system, run.rec, run.sampler
    assert system is not None and rec is not None and sampler is not None
    assert plan.schedule is not None
    schedule, lock_events = plan.schedule, plan.lock_events
    drift, stops = run.drift, run.stops
    model = system.model
    nq = model.nq
    bar = Progress(
        schedule.n_steps, plan.options.progress and schedule.n_steps > 2000, tick=rec.drain
    )
    applied = n_due(lock_events, 0.0)  # applied by Run.begin, before t = 0 was recorded
    monitor = Monitor(system, x)
    try:
        for step, t, h, t_next, output in schedule:
            try:
                with np.errstate(all="ignore"):
                    x = rk4_step(system, t, x, h)
            except (ModelError, np.linalg.LinAlgError) as exc:
                raise monitor.failure(t + h, str(exc)) from None
            x[:nq] = normalize_quaternions(model, x[:nq])
            if drift is not None:
                x = drift(x)
            monitor.check(t_next, x)
            if stops is not None:
                x = stops.after_step(system, t_next, x)
            rec.steps = step
            due = n_due(lock_events, t_next)
            if due != applied:
                applied = due
                x = apply_events(system, x, plan, applied, stops)
            if step < schedule.n_steps:
                sampler.sample(system, t_next, x)
            if output:
                rec.add(t_next, x.copy(), system.locked)
            if step % 200 == 0:
                bar.update(step)
        bar.update(schedule.n_steps)
    finally:
        bar.close()
    return schedule.n_steps, None
