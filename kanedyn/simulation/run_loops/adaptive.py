"""The adaptive run loop: a ``scipy.integrate.OdeSolver`` (``method="RK45"``,
``"DOP853"``, ``"Radau"``, ...) stepped as ``solve_ivp`` steps it, restarted at lock
events, controller samples and joint-limit stop events, with outputs from its dense
output."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError, SimulationError
from kanedyn.simulation.events import n_due
from kanedyn.simulation.monitor import Monitor, Progress
from kanedyn.simulation.run_state import Run, apply_events
from kanedyn.simulation.system import normalize_quaternions

__all__ = ["run_adaptive"]

Array = NDArray[np.float64]


def run_adaptive(run: Run, x: Array) -> tuple[int, Array | None]:
    """The plan's ``method`` (a ``scipy.integrate.OdeSolver``, stepped here as
    ``solve_ivp`` steps it) between the event and controller-sample times, with outputs
    every ``every`` seconds from its dense output; returns the number of right-hand
    sides evaluated (and no speeds: the caller solves them). With ``run.drift``,
    restarted from the state projected onto the loops' constraint manifold at every
    output time. With ``run.stops``, each step's dense output is searched for a stop
    event (:meth:`~kanedyn.simulation.stops.Stops.next_event`: a bound reached, or an
    engaged stop's release), and the solver restarts from the state after it."""
    plan, system, rec, sampler = run.plan, run.system, run.rec, run.sampler
    assert system is not None and rec is not None and sampler is not None
    o, lock_events, drift, stops = plan.options, plan.lock_events, run.drift, run.stops
    method, t_final, every, rtol, atol = o.method, o.t_final, o.every, o.rtol, o.atol
    assert method.solver is not None
    model = system.model
    t_out = np.arange(0.0, t_final + 0.5 * every, every)
    t_out = np.minimum(t_out[t_out <= t_final + 1e-9 * max(every, 1.0)], t_final)
    if t_out[-1] < t_final - 1e-12:
        t_out = np.append(t_out, t_final)
    bounds = sorted(
        {
            0.0,
            t_final,
            *[e[0] for e in lock_events if 0.0 < e[0] < t_final],
            *sampler.times(t_final),
            *(t_out if drift is not None else ()),
        }
    )
    ts = rec.ts
    nfev, applied = 0, n_due(lock_events, 0.0)  # t = 0's events: applied by Run.begin
    monitor = Monitor(system, x)
    bar = Progress(1000, o.progress, unit="", tick=rec.drain)

    def record(t: float, xk: Array) -> None:
        if ts and abs(t - ts[-1]) < 1e-12:
            return
        xk = np.array(xk, dtype=float)
        xk[: model.nq] = normalize_quaternions(model, xk[: model.nq])
        monitor.check(t, xk)
        rec.add(t, xk, system.locked)

    try:
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if n_due(lock_events, a) != applied:
                applied = n_due(lock_events, a)
                x = apply_events(system, x, plan, applied, stops)
            sampler.sample(system, a, x)
            record(a, x)
            inside = t_out[(t_out > a) & (t_out < b)]
            k, t0 = 0, a
            while b - t0 > 1e-12 * max(1.0, abs(b)):  # restarted at each stop event
                solver, event = None, None
                try:
                    solver = method.solver(system, t0, x, b, rtol=rtol, atol=atol)
                    while solver.status == "running" and event is None:
                        t_old = solver.t
                        message = solver.step()
                        if solver.status == "failed":
                            error = SimulationError(
                                f"t = {solver.t:.6g}: {method.name} failed: {message}"
                            )
                            error.diverged = True  # type: ignore[attr-defined]
                            raise error
                        sol = solver.dense_output() if solver.t > t_old else None
                        if stops is not None and sol is not None:
                            event = stops.next_event(system, sol, t_old, solver.t)
                        t_end = solver.t if event is None else event[0]
                        due = inside[k:][inside[k:] <= t_end]
                        if due.size and sol is not None:
                            for te in due:
                                record(float(te), sol(te))
                            k += due.size
                        rec.steps = nfev + solver.nfev
                        if solver.t > t_old:
                            bar.update(int(1000 * t_end / t_final))
                except (ModelError, np.linalg.LinAlgError) as exc:
                    raise monitor.failure(t0 if solver is None else solver.t, str(exc)) from None
                nfev += solver.nfev
                if event is None:
                    x = np.array(solver.y, dtype=float)
                    break
                assert stops is not None and sol is not None
                t0, x = event[0], np.array(sol(event[0]), dtype=float)
                x[: model.nq] = normalize_quaternions(model, x[: model.nq])
                x = stops.apply(system, event, x)
            if drift is not None:  # restart from the state projected onto the manifold
                x[: model.nq] = normalize_quaternions(model, x[: model.nq])
                x = drift(x)
            record(b, x)
        bar.update(1000)
    finally:
        bar.close()
    return nfev, None
