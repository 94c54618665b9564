"""The compiled RK4 run loop: classic RK4 on Python floats through the compiled kernel
(:mod:`kanedyn.compiled`), for runs without loads, controller, events or stops when the
native loop is not there."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.steppers import FLOATS, rk4_step
from kanedyn.simulation.monitor import Monitor, Progress
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.run_state import Run

__all__ = ["run_rk4_compiled"]

Array = NDArray[np.float64]


def run_rk4_compiled(run: Run, x: Array) -> tuple[int, Array | None]:
    """:func:`~kanedyn.simulation.run_loops.rk4.run_rk4` for the common case (either
    formulation, compiled, no loads, controller or events), on Python floats: the same
    step (quaternions normalized inside every right-hand side and after every step),
    without NumPy calls. Under MSD it also returns the speeds at the outputs (the
    kernel's last n outputs). The right-hand side is the compiled kernel when there is
    one (tcc; or native, for models the native RK4 loop does not take), else the
    generated Python.
    """
    plan, system, rec = run.plan, run.system, run.rec
    assert system is not None and rec is not None and plan.schedule is not None
    cm, schedule = system.cm, plan.schedule
    assert cm is not None
    model = system.model
    n, nq = model.n_total, model.nq_total
    kernel = cm._code.kernel
    if kernel is None:
        rhs = cm.scalar_fn
    else:

        def rhs(*xs: float) -> list[float]:
            if kernel.rhs_into(xs):
                return kernel.out.tolist()  # type: ignore[no-any-return]
            return cm.scalar_fn(*xs)  # a zero pivot or a non-finite value: fail as Python does

    msd = system.formulation is Formulation.MSD
    bar = Progress(
        schedule.n_steps, plan.options.progress and schedule.n_steps > 2000, tick=rec.drain
    )
    quats = [tuple(int(i) for i in row) for row in model.layout.quat_q]
    monitor = Monitor(system, x)
    gimbal3 = bool(model.layout.gimbal3.size)

    # the state is [q | y]; the kernel returns [ẏ | q̇] (Kane, y = ν) or [ẏ | q̇ | ν] (MSD)
    def xdot(t: float, xs: list[float]) -> list[float]:
        out = rhs(*xs)
        return out[n : n + nq] + out[:n]

    xs_l = x.tolist()  # t = 0 is recorded by simulate
    first = rhs(*xs_l)
    us = [first[n + nq :]] if msd else None
    k1: list[float] | None = first[n : n + nq] + first[:n]
    isfinite = math.isfinite
    try:
        for step, t, h, t_next, output in schedule:
            try:
                xs_l = rk4_step(xdot, t, last := xs_l, h, FLOATS, k1)
            except (ZeroDivisionError, ValueError, OverflowError) as exc:
                monitor.x = np.array(last)
                raise monitor.failure(t + h, f"the right-hand side failed ({exc})") from None
            k1 = None
            for i0, i1, i2, i3 in quats:
                qx, qy, qz, qw = xs_l[i0], xs_l[i1], xs_l[i2], xs_l[i3]
                s = 1.0 / math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
                xs_l[i0], xs_l[i1], xs_l[i2], xs_l[i3] = qx * s, qy * s, qz * s, qw * s
            if gimbal3 or not isfinite(sum(xs_l)):
                monitor.check(t_next, np.array(xs_l))
            rec.steps = step
            if output:
                if us is not None:  # the speeds at the output; k1 of the next step
                    try:
                        first = rhs(*xs_l)
                    except (ZeroDivisionError, ValueError, OverflowError) as exc:
                        raise monitor.failure(
                            t_next, f"the right-hand side failed ({exc})"
                        ) from None
                    us.append(first[n + nq :])
                    k1 = first[n : n + nq] + first[:n]
                rec.add(t_next, xs_l, system.locked)
            if step % 200 == 0:
                bar.update(step)
        bar.update(schedule.n_steps)
    finally:
        bar.close()
    return schedule.n_steps, None if us is None else np.array(us)
