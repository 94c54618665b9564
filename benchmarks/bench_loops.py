"""Closed loops on the native engine: per-step cost of RK4 runs against peers.

``python -m benchmarks.bench_loops [--quick] [--t-final T] [--repeats R] [--ops]``

For the planar four-bar, the spatial slider-crank and the planar 3-RRR platform
(:mod:`kanedyn.examples`), RK4 at 1 ms for ``T`` s (default 10 s), end to end through
:func:`kanedyn.simulate` (the kernels compiled before the timed run):

* kanedyn's native engine (``engine="compiled"``: the constrained accelerations and the
  projection onto the constraint manifold inside the native RK4 step);
* kanedyn's open chain of the same bodies (the model without its loops), native;
* kanedyn's dense engine (a short run: it is about a thousand times slower);
* MuJoCo (when ``import mujoco`` works), the same bodies closed by ``equality connect``
  (:func:`mujoco_tree`), its RK4 integrator at the same step (its own soft-constraint
  solver).

Times are CPU times per step (``time.process_time``, single-threaded BLAS), the least
of ``--repeats`` runs (default 15) taken in turn (native, open chain, MuJoCo, native,
...), so that the ratios of one row share the machine's load (another job only
lengthens a run; the ratio of the medians is printed beside); compare ratios within one
run. ``--ops`` prints the traced kernels' operation counts instead."""

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
    """CPU time per RK4 step of a run of ``t_final`` s (after a short run that compiles)."""
    kd.simulate(model, state, 10 * DT, DT, engine=engine, output_every=10 * DT)
    t0 = time.process_time()
    kd.simulate(model, state, t_final, DT, engine=engine, output_every=0.1)
    return (time.process_time() - t0) / round(t_final / DT)


def mujoco_tree(name: str, m: kd.Model) -> tuple[kd.Model, str]:
    """The tree MuJoCo runs for the mechanism ``name`` and the ``<equality>`` that closes
    it (``<connect>`` at the pin). The four-bar and the 3-RRR platform: kanedyn's own
    tree, each revolute loop a ``connect`` at its joint point (the planar hinges keep
    the bodies in the plane). The spatial slider-crank: its universal loop has no
    MuJoCo equality, so the tree is cut at the spherical joint instead (the rod hangs
    on the slider by the universal, two hinges, and a ``connect`` pins it to the crank
    tip): the same bodies and the same four-plus-three constraints."""
    from benchmarks.peers import mjcf_point

    if name == "spatial slider-crank":
        kin = kd.kinematics(m, m.initial_state())
        ic, ir, isl = (m.body_index(b) for b in ("crank", "rod", "slider"))
        R_rod, pin = kin.R_N_B[ir], kin.p[isl]
        R_sl = kin.R_N_B[isl]
        length = float(np.linalg.norm(pin - kin.p[ir]))
        # the universal's axes: the rod's y at q = 0 (fixed in the slider), then its z
        universal = kd.Joint("rod", "slider", "rod", rot_dof=2, rot_seq="231",
                             inner_rotation=R_sl.T @ R_rod, outer_point=(length, 0.0, 0.0))  # fmt: skip
        tree = kd.Model(m.bodies, [m.joint("crank"), m.joint("slide"), universal],
                        gravity=m.gravity)  # fmt: skip
        tip_crank = kin.R_N_B[ic].T @ (kin.p[ir] - kin.p[ic])
        anchor = mjcf_point(m.joint("crank"), tip_crank)
        return tree, f'<connect body1="crank" body2="rod" anchor="{_fmt(anchor)}"/>'
    tree = open_chain(m)
    eq = []
    for loop in m.loops:
        if loop.rot_dof != 1 or loop.trn_dof != 0 or not m.planar:
            raise ValueError(f"{name}: loop {loop.name!r} is not a planar hinge")
        anchor = mjcf_point(m.joint(m.joints[m.body_index(loop.inner)].name), loop.inner_point)
        body2 = f' body2="{loop.outer}"' if loop.outer is not None else ""
        eq.append(f'<connect body1="{loop.inner}"{body2} anchor="{_fmt(anchor)}"/>')
    return tree, "".join(eq)


def _fmt(x: Any) -> str:
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def mujoco_mechanism(name: str, model: kd.Model, state: kd.State,
                     solref: tuple[float, float] | None = None) -> tuple[Any, Any]:  # fmt: skip
    """``(MjModel, MjData)`` of the mechanism ``name`` (:func:`mujoco_tree`), RK4 at
    :data:`DT`, at kanedyn's ``state`` (assembled at ``q = 0``, MuJoCo's ``qpos0``): its
    ``qvel`` is the least-squares fit of the bodies' mass-centre velocities and angular
    velocities (``mj_jacBodyCom``) to kanedyn's. ``solref``: the equalities' time
    constant and damping ratio (MuJoCo's default ``(0.02, 1)``)."""
    import mujoco

    from benchmarks.peers import mjcf

    if not np.allclose(state.q[: model.nq], model.initial_state().q[: model.nq], atol=1e-9):
        raise ValueError(f"{name}: the MuJoCo model starts at q = 0")
    tree, eq = mujoco_tree(name, model)
    if solref is not None:
        eq = eq.replace("/>", f' solref="{_fmt(solref)}"/>')
    mj = mujoco.MjModel.from_xml_string(mjcf(tree, equality=eq, integrator="RK4", timestep=DT))
    data = mujoco.MjData(mj)
    mujoco.mj_forward(mj, data)
    kin = kd.kinematics(model, state)
    rows, rhs = [], []
    jacp, jacr = np.zeros((3, mj.nv)), np.zeros((3, mj.nv))
    for k, body in enumerate(model.bodies):
        mujoco.mj_jacBodyCom(mj, data, jacp, jacr, mj.body(body.name).id)
        rows += [jacp.copy(), jacr.copy()]
        rhs += [kin.v[k], kin.omega[k]]
    qvel, *_ = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)
    data.qvel[:] = qvel
    mujoco.mj_forward(mj, data)
    return mj, data


def mujoco_per_step(name: str, model: kd.Model, state: kd.State, t_final: float) -> float | None:
    """Per-step CPU time of the mechanism in MuJoCo (:func:`mujoco_mechanism`), or None
    without mujoco. (With MuJoCo's default ``solref`` its driven angle after 1 s differs
    from kanedyn's by 3e-3 to 4e-2 rad, the softness of its equality; it converges onto
    kanedyn's as the equality hardens: ``tests/test_benchmark_checks.py``.)"""
    try:
        import mujoco
    except ImportError:
        return None
    mj, data = mujoco_mechanism(name, model, state)
    steps = round(t_final / DT)
    mujoco.mj_step(mj, data, nstep=100)
    t0 = time.process_time()
    mujoco.mj_step(mj, data, nstep=steps)
    return (time.process_time() - t0) / steps


def operations(m: kd.Model) -> tuple[int, int, int, int]:
    """The traced kernels' operation counts (those the outputs need): the constrained
    accelerations, the same without the cut of the bias near a singular configuration
    (``cut=False``), the open chain's accelerations, and the step end
    (:func:`kanedyn.compiled.kernels.settled`: the projection and the next step's first
    accelerations). A native RK4 step makes three evaluations of the accelerations
    (without the cut where the step starts and ends clear of a singular configuration)
    and one step-end call."""
    from kanedyn.compiled import kernels

    rhs = kernels.traced(m, frozenset(), False, False)
    uncut = kernels.traced(m, frozenset(), False, False, cut=False)
    tree = kernels.traced(open_chain(m), frozenset(), False, False)
    settle = kernels.settled(m, frozenset())
    return tuple(t.tape.count(t.outputs) for t in (rhs, uncut, tree, settle))  # type: ignore[return-value]


def open_steps(m: kd.Model, s: kd.State, steps: int = 1000) -> float:
    """The fraction of ``steps`` RK4 steps at :data:`DT` after which the loops are open
    (``max |Φ| > loop_rows.CLOSED_TOL``), so that the projection's Newton step moves the
    coordinates and the rows are evaluated again at the new ones: RK4 on the native
    accelerations (``cm.forward_dynamics``), each step projected by the dense engine
    (``loops.project``)."""
    from kanedyn import joints
    from kanedyn.dynamics import loop_rows, loops

    cm = kd.compile_model(m)
    lay = m.layout

    def rates(q: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return joints.qdot(lay, q, u), cm.forward_dynamics(kd.State(q, u))

    q, u, n_open = s.q.copy(), s.u.copy(), 0
    for _ in range(steps):
        k1 = rates(q, u)
        k2 = rates(q + DT / 2 * k1[0], u + DT / 2 * k1[1])
        k3 = rates(q + DT / 2 * k2[0], u + DT / 2 * k2[1])
        k4 = rates(q + DT * k3[0], u + DT * k3[1])
        q = q + DT / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        u = u + DT / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        q = joints.normalize_quaternions(kd.spatial.arithmetic.NUMPY, lay, q)
        n_open += loops.residuals(m, q, np.zeros(m.n))[0] > loop_rows.CLOSED_TOL
        q, u, _ = loops.project(m, q, u)
    return n_open / steps


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 s runs")
    ap.add_argument("--t-final", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=15, help="runs per engine")
    ap.add_argument("--ops", action="store_true",
                    help="print the traced kernels' operation counts instead")  # fmt: skip
    args = ap.parse_args(argv)
    if args.ops:
        print("operations per kernel call, and per RK4 step (clear of a singular "
              "configuration, and near one); the share of the steps after which the "
              "loops are open, Newton's step moving the coordinates (RK4 at 1 ms for 1 s)")  # fmt: skip
        print(f"{'mechanism':24s} {'constrained':>11s} {'uncut':>6s} {'open chain':>10s} "
              f"{'step end':>8s} {'per step':>8s} {'ratio':>5s} {'near':>5s} "
              f"{'steps open':>10s}")  # fmt: skip
        counts = {}
        for name, (m, s) in mechanisms().items():
            rhs, uncut, tree, settle = counts[name] = operations(m)
            clear, near = 3 * uncut + settle, 3 * rhs + settle
            print(f"{name:24s} {rhs:11d} {uncut:6d} {tree:10d} {settle:8d} {clear:8d} "
                  f"{clear / (4 * tree):5.2f} {near:5d} {open_steps(m, s):10.1%}")  # fmt: skip
        return counts
    t_final = 1.0 if args.quick else args.t_final
    rows: dict[str, Any] = {}
    print(f"RK4 at {DT * 1e3:g} ms for {t_final:g} s; CPU time per step (µs), the least of "
          f"{args.repeats} interleaved runs (ratio of medians beside); load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'mechanism':24s} {'native':>9s} {'open chain':>11s} {'ratio':>6s} {'median':>6s} "
          f"{'dense':>9s} {'MuJoCo':>9s} {'ratio':>6s}")  # fmt: skip
    for name, (m, s) in mechanisms().items():
        tree_m, tree_s = open_chain(m), kd.State(s.q, s.u)
        times: dict[str, list[float]] = {"native": [], "tree": [], "mj": []}
        for _ in range(max(1, args.repeats)):
            times["native"].append(per_step(m, s, t_final, "compiled"))
            times["tree"].append(per_step(tree_m, tree_s, t_final, "compiled"))
            mj_t = mujoco_per_step(name, m, s, t_final)
            if mj_t is not None:
                times["mj"].append(mj_t)
        # the least time of the runs: another job on the machine only lengthens a run
        native, tree = (float(np.min(times[k])) for k in ("native", "tree"))
        medians = float(np.median(times["native"]) / np.median(times["tree"]))
        mj = float(np.min(times["mj"])) if times["mj"] else None
        dense = per_step(m, s, 0.05, "dense")
        rows[name] = dict(native=native, open_chain=tree, dense=dense, mujoco=mj,
                          ratio_of_medians=medians)  # fmt: skip
        mj_txt = f"{mj * 1e6:9.2f} {native / mj:6.2f}" if mj else f"{'-':>9s} {'-':>6s}"
        print(f"{name:24s} {native * 1e6:9.2f} {tree * 1e6:11.2f} {native / tree:6.2f} "
              f"{medians:6.2f} {dense * 1e6:9.0f} {mj_txt}")  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
