"""The native RK4 run loop: the steps run by the native RK4 loop of
:mod:`kanedyn.compiled.llvm`, re-entering Python only between blocks of steps (lock
events, controller samples, outputs streamed, interrupts handled)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.loads import joint_efforts
from kanedyn.dynamics.steppers import rk4_step
from kanedyn.errors import ModelError, SimulationError
from kanedyn.simulation import output as output_
from kanedyn.simulation.events import n_due
from kanedyn.simulation.monitor import Monitor, Progress
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.run_loops.rk4 import run_rk4
from kanedyn.simulation.run_state import Run, apply_events
from kanedyn.simulation.system import System, normalize_quaternions

__all__ = ["NATIVE_BLOCK", "python_steps", "run_rk4_native"]

Array = NDArray[np.float64]

_NEVER = 2**62  # an output stride no step reaches


def run_rk4_native(run: Run, x: Array) -> tuple[int, Array | None]:
    """:func:`~kanedyn.simulation.run_loops.rk4.run_rk4` with the steps run by the
    native RK4 loop (:mod:`kanedyn.compiled.llvm`: the same step, quaternions normalized,
    the state checked for finiteness, outputs written every ``stride`` steps),
    re-entering Python only after the steps where a lock event falls due or the
    controller is sampled, for the last step, and every :data:`NATIVE_BLOCK` steps (so
    outputs stream to ``run.rec`` and an interrupt is handled while the run goes). A
    controller's held commands enter the loop as constant generalized efforts when they
    are all :class:`~kanedyn.JointLoad` s; other commands are stepped in Python between
    samples (with the native right-hand side). Returns the number of steps and, under
    MSD, the speeds at the outputs.
    """
    plan, system, rec, sampler = run.plan, run.system, run.rec, run.sampler
    assert system is not None and rec is not None and sampler is not None
    assert plan.schedule is not None
    schedule, lock_events = plan.schedule, plan.lock_events
    model = system.model
    nx = model.nq_total + model.n_total
    N, stride, dt, t_final = schedule.n_steps, schedule.stride, schedule.dt, schedule.t_final
    # nothing here grows with the steps (a run of 1e9 steps holds its outputs only): the
    # times of step i (1-based) are computed as the Schedule computes them

    def t_at(i: int) -> float:  # the time after step i
        return t_final if i == N else i * dt

    def h_at(i: int) -> float:  # the size of step i
        return min(dt, t_final - (t_at(i - 1) if i > 1 else 0.0))

    def flagged(i: int) -> bool:  # an output after step i
        return i % stride == 0 or i == N

    def n_flagged(a: int, b: int) -> int:  # outputs after steps a + 1 ... b
        return b // stride - a // stride + int(a < N <= b and N % stride != 0)

    def first_step_at(t: float) -> int:  # the first step ending at or after t (N + 1: none)
        i = min(max(1, math.ceil(t / dt)), N + 1)
        while i > 1 and t_at(i - 1) >= t:
            i -= 1
        while i <= N and t_at(i) < t:
            i += 1
        return i

    if N > 1 and h_at(N - 1) != dt:  # a step shortened by round-off: the plain loop
        return run_rk4(run, x)
    out_steps = np.arange(stride, N + 1, stride)
    if N and (not out_steps.size or out_steps[-1] != N):
        out_steps = np.append(out_steps, N)
    ts: Array = np.concatenate(([0.0], out_steps * dt))
    if N:
        ts[-1] = t_final
    xs = np.empty((1 + out_steps.size, nx))
    bar = Progress(N, plan.options.progress and N > 2000, tick=rec.drain)
    applied = n_due(lock_events, 0.0)  # applied by Run.begin, before t = 0 was recorded
    x = np.array(x, dtype=float)
    xs[0] = x
    locks = [system.locked]
    monitor = Monitor(system, x)
    monitor.x = x
    row, s, sent = 1, 0, 1  # the next output row; the steps done; the rows recorded

    def record() -> None:  # the output rows written since the last call, to rec
        nonlocal sent
        for r in range(sent, row):
            rec.add(float(ts[r]), xs[r].copy(), locks[r])
        sent = row
        rec.steps = s

    def fail(bad: int, first: int) -> SimulationError:
        """The failure at step ``bad`` of a native call that began after step ``first``,
        its outputs before that step recorded."""
        nonlocal row, s
        done = (bad - 1) // stride - first // stride
        locks.extend([system.locked] * done)
        row += done
        s = bad - 1
        record()
        bad_values = ~np.isfinite(x)  # the state the loop stopped at
        which = ""
        if np.any(bad_values):
            i = int(np.argmax(bad_values))
            which = f" (first: {monitor.names[i]} = {x[i]})"
        return monitor.failure(t_at(bad), f"the state became non-finite{which}")

    try:
        while s < N:
            # b: the next step after which Python acts (an event, a sample, a block's
            # end, the last step)
            b = min(N, s + NATIVE_BLOCK)
            if applied < len(lock_events):
                b = min(b, first_step_at(lock_events[applied][0] - 1e-12))
            if sampler.controller is not None:
                b = min(b, first_step_at(sampler.next - 1e-9))
            b = max(b, s + 1)
            nc = system.cm.native  # type: ignore[union-attr]
            assert nc is not None  # the lock set's compiled model is native too
            tau = joint_efforts(model, system.held) if system.held else None
            if system.held and tau is None:
                row = python_steps(system, x, s, b - 1, t_at, h_at, flagged, xs, row, monitor, rec)
                locks += [system.locked] * n_flagged(s, b - 1)
            elif b - 1 > s:
                bad = nc.rk4(x, b - 1 - s, dt, s, stride, xs[row:], tau)
                if bad:
                    raise fail(bad, s)
                done = (b - 1) // stride - s // stride
                row += done
                locks += [system.locked] * done
            # step b, then Python's part
            if system.held and tau is None:
                python_steps(
                    system, x, b - 1, b, t_at, h_at, lambda i: False, xs, row, monitor, rec
                )
            else:
                bad = nc.rk4(x, 1, h_at(b), b - 1, _NEVER, xs[:1], tau)
                if bad:
                    raise fail(bad, b - 1)
            s = b
            due = n_due(lock_events, t_at(b))
            if due != applied:
                applied = due
                x = apply_events(system, x, plan, applied)
            if b < N:
                sampler.sample(system, t_at(b), x)
            if flagged(b):
                xs[row] = x
                row += 1
                locks.append(system.locked)
            record()
            bar.update(s)
    finally:
        bar.close()
    speeds = None
    if system.formulation is Formulation.MSD:
        nc = system.cm.native  # type: ignore[union-attr]
        if all(np.array_equal(lk, locks[0]) for lk in locks) and nc is not None:
            out, _ = nc.rhs_batch(xs)
            speeds = out[:, nx : nx + model.n_total].copy()
    return N, speeds


NATIVE_BLOCK = 1000  # steps per native call at most: outputs stream, interrupts land


def python_steps(
    system: System, x: Array, s: int, b: int, t_at: Callable[[int], float],
    h_at: Callable[[int], float], flagged: Callable[[int], bool], xs: Array, row: int,
    monitor: Monitor, rec: output_.Recorder,
) -> int:  # fmt: skip
    """Steps ``s + 1 ... b`` in Python (``rk4_step`` on ``system``), in place on ``x``,
    with outputs after the flagged steps from row ``row``; returns the next row. Step
    ``i`` ends at ``t_at(i)`` and has size ``h_at(i)``."""
    nq = system.model.nq_total
    for i in range(s + 1, b + 1):
        h = h_at(i)
        try:
            with np.errstate(all="ignore"):
                xn = rk4_step(system, t_at(i - 1) if i > 1 else 0.0, x, h)
        except (ModelError, np.linalg.LinAlgError) as exc:
            raise monitor.failure(t_at(i), str(exc)) from None
        xn[:nq] = normalize_quaternions(system.model, xn[:nq])
        monitor.check(t_at(i), xn)
        x[:] = xn
        rec.steps = i
        if flagged(i):
            xs[row] = x
            row += 1
    return row
