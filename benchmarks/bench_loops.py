"""Closed loops on the native engine: per-step cost of RK4 runs against peers.

``python -m benchmarks.bench_loops [--quick] [--t-final T]``

For the planar four-bar, the spatial slider-crank and the planar 3-RRR platform
(:mod:`kanedyn.examples`), RK4 at 1 ms for ``T`` s (default 10 s), end to end through
:func:`kanedyn.simulate` (the kernels compiled before the timed run):

* kanedyn's native engine (``engine="compiled"``: the constrained accelerations and the
  projection onto the constraint manifold inside the native RK4 step);
* kanedyn's open chain of the same bodies (the model without its loops), native;
* kanedyn's dense engine (a short run: it is about a thousand times slower);
* MuJoCo (when ``import mujoco`` works), the four-bar closed by an ``equality connect``,
  its RK4 integrator at the same step (its own soft-constraint solver).

Times are wall times per step with single-threaded BLAS; compare ratios within one run.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import kanedyn as kd  # noqa: E402

DT = 1e-3


def mechanisms() -> dict[str, tuple[kd.Model, kd.State]]:
    """Each mechanism, assembled with its first joint turning at 2 rad/s."""
    out = {}
    for name, m in {
        "four-bar": kd.examples.four_bar(),
        "spatial slider-crank": kd.examples.slider_crank(spatial=True),
        "3-RRR platform": kd.examples.parallel_3rrr(),
    }.items():
        u = np.zeros(m.n)
        first = m.joints[0].name
        u[m.speeds(first)[0]] = 2.0
        out[name] = (m, m.assemble(kd.State(m.initial_state().q, u), fix=[first]))
    return out


def open_chain(m: kd.Model) -> kd.Model:
    """The same bodies and joints without the loops."""
    return kd.Model(m.bodies, m.joints, gravity=m.gravity)


def per_step(model: kd.Model, state: kd.State, t_final: float, engine: str) -> float:
    """Wall time per RK4 step of a run of ``t_final`` s (after a short run that compiles)."""
    kd.simulate(model, state, 10 * DT, DT, engine=engine, output_every=10 * DT)
    t0 = time.perf_counter()
    kd.simulate(model, state, t_final, DT, engine=engine, output_every=0.1)
    return (time.perf_counter() - t0) / round(t_final / DT)


def mujoco_four_bar(model: kd.Model, state: kd.State, t_final: float) -> float | None:
    """Per-step wall time of the four-bar in MuJoCo (``equality connect``, RK4 at the
    same step) from kanedyn's ``state``, or None without mujoco. (Its joint angles after
    1 s agree with kanedyn's to about 1e-3 rad, the softness of its constraint.)"""
    try:
        import mujoco
    except ImportError:
        return None
    ground, crank, rocker = 2.0, 0.5, 1.2
    coupler = float(np.hypot(ground, rocker - crank))
    ang = float(np.degrees(np.arctan2(rocker - crank, ground)))

    def rod(name: str, length: float, pos: str, euler: str, inner: str = "") -> str:
        m = length  # 1 kg/m, uniform slender rod along its x axis
        i = m * length**2 / 12.0
        return (
            f'<body name="{name}" pos="{pos}" euler="{euler}">'
            f'<joint name="{name}" type="hinge" axis="0 0 1"/>'
            f'<inertial pos="{length / 2} 0 0" mass="{m}" diaginertia="1e-9 {i} {i}"/>'
            f"{inner}</body>"
        )

    xml = f"""<mujoco><option timestep="{DT}" integrator="RK4" gravity="0 -9.81 0"/>
    <compiler angle="degree"/>
    <worldbody>
    {rod("crank", crank, "0 0 0", "0 0 90", rod("coupler", coupler, f"{crank} 0 0", f"0 0 {ang - 90}"))}
    {rod("rocker", rocker, f"{ground} 0 0", "0 0 90")}
    </worldbody>
    <equality><connect body1="coupler" body2="rocker" anchor="{coupler} 0 0"/></equality>
    </mujoco>"""
    mj = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(mj)

    def model_index(_: kd.Model, name: str) -> Any:
        return [mj.joint(name).dofadr[0]]

    for name in ("crank", "coupler", "rocker"):  # MuJoCo's order: its body tree
        data.qvel[model_index(model, name)[0]] = state.u[model.speeds(name)[0]]
    steps = round(t_final / DT)
    mujoco.mj_step(mj, data, nstep=100)
    t0 = time.perf_counter()
    mujoco.mj_step(mj, data, nstep=steps)
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 s runs")
    ap.add_argument("--t-final", type=float, default=10.0)
    args = ap.parse_args(argv)
    t_final = 1.0 if args.quick else args.t_final
    rows: dict[str, Any] = {}
    print(f"RK4 at {DT * 1e3:g} ms for {t_final:g} s; wall time per step (µs)")
    print(f"{'mechanism':24s} {'native':>9s} {'open chain':>11s} {'ratio':>6s} "
          f"{'dense':>9s} {'MuJoCo':>9s} {'ratio':>6s}")  # fmt: skip
    for name, (m, s) in mechanisms().items():
        native = per_step(m, s, t_final, "compiled")
        tree = per_step(open_chain(m), kd.State(s.q, s.u), t_final, "compiled")
        dense = per_step(m, s, 0.05, "dense")
        mj = mujoco_four_bar(m, s, t_final) if name == "four-bar" else None
        rows[name] = dict(native=native, open_chain=tree, dense=dense, mujoco=mj)
        mj_txt = f"{mj * 1e6:9.2f} {native / mj:6.2f}" if mj else f"{'-':>9s} {'-':>6s}"
        print(f"{name:24s} {native * 1e6:9.2f} {tree * 1e6:11.2f} {native / tree:6.2f} "
              f"{dense * 1e6:9.0f} {mj_txt}")  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
