"""The cost of geared rotors on the native engine: a geared two-joint arm against the
same arm without rotors.

The arm of tests/test_rotors.py (shoulder about N's z, elbow about link 1's x, spatial
inertias, gravity), with a rotor on each joint (the shoulder's on N, the elbow's on
link 1: ratios 50 and -80, transverse inertias), against the same arm without them.
For each it times, on the native engine:

* ``kernel``: one native ``rhs`` call on bound buffers (the kernel alone);
* ``RK4 step``: ``kd.simulate`` at 1 ms for 10 s, end to end, per step (Kane);
* ``MSD step``: the same with ``formulation="msd"``.

Each is the median over ``--repeat`` interleaved blocks (CPU time); the ratio geared /
plain is issue 28's measure (target: at most 1.5).

Usage::

    python -m benchmarks.bench_rotors [--repeat N] [--quick]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import kanedyn as kd  # noqa: E402
from benchmarks.native import bare_kernel  # noqa: E402

I1 = np.array([[0.05, 0.002, -0.001], [0.002, 0.2, 0.003], [-0.001, 0.003, 0.22]])
I2 = np.array([[0.08, 0.001, 0.0], [0.001, 0.02, -0.002], [0.0, -0.002, 0.09]])
ROTORS = (
    kd.Rotor(2e-4, ratio=50.0, transverse=1e-4),
    kd.Rotor(1e-4, ratio=-80.0, transverse=6e-5),
)


def arm(geared: bool) -> kd.Model:
    """The two-joint spatial arm, with or without a geared rotor on each joint."""
    r1, r2 = ROTORS if geared else (None, None)
    bodies = [
        kd.Body("link1", 2.0, I1, com=[0.3, 0.05, 0.0]),
        kd.Body("link2", 1.3, I2, com=[0.02, 0.25, 0.03]),
    ]
    joints = [
        kd.Joint.revolute("shoulder", None, "link1", axis=3, rotor=r1),
        kd.Joint.revolute("elbow", "link1", "link2", axis=1, inner_point=[0.6, 0.0, 0.1],
                          rotor=r2),
    ]  # fmt: skip
    return kd.Model(bodies, joints, gravity=[0.4, -1.0, -9.81])


def per_call(fn: Callable[[], Any], calls: int) -> float:
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls


def interleaved(fns: dict[str, Callable[[], Any]], calls: dict[str, int], repeats: int) -> dict:
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(per_call(fn, calls[name]))
    return {name: float(np.median(s)) for name, s in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="1 s runs instead of 10 s")
    args = ap.parse_args()
    t_final, dt = (1.0 if args.quick else 10.0), 1e-3
    steps = int(round(t_final / dt))
    state = kd.State(np.array([0.2, 0.5]), np.array([1.0, -2.0]))
    fns: dict[str, Callable[[], Any]] = {}
    calls: dict[str, int] = {}
    for label, geared in (("plain", False), ("geared", True)):
        model = arm(geared)
        cm = kd.compile_model(model)
        assert cm.native is not None, "the native back end is unavailable"
        np.testing.assert_allclose(
            cm.forward_dynamics(state), kd.forward_dynamics(model, state), rtol=1e-12, atol=1e-12
        )
        fns[f"kernel {label}"] = bare_kernel(cm, state)
        calls[f"kernel {label}"] = 200_000
        for form in ("kane", "msd"):
            traj = kd.simulate(model, state, dt, dt, formulation=form, progress=False)
            assert traj.engine == "native", traj.engine

            def run(model: kd.Model = model, form: str = form) -> None:
                kd.simulate(model, state, t_final, dt, formulation=form, progress=False)

            fns[f"{form} {label}"] = run
            calls[f"{form} {label}"] = 1
    t = interleaved(fns, calls, args.repeat)
    print(f"geared two-joint arm vs the same arm without rotors ({args.repeat} repeats, "
          f"RK4 at {dt * 1e3:g} ms for {t_final:g} s)")  # fmt: skip
    print(f"{'measure':<22} {'plain':>12} {'geared':>12} {'ratio':>7}")
    for what, key, scale, unit in (
        ("kernel (rhs)", "kernel", 1e9, "ns"),
        ("RK4 step (Kane)", "kane", 1e9 / steps, "ns"),
        ("RK4 step (MSD)", "msd", 1e9 / steps, "ns"),
    ):
        a, b = t[f"{key} plain"] * scale, t[f"{key} geared"] * scale
        print(f"{what:<22} {a:>9.0f} {unit} {b:>9.0f} {unit} {b / a:>7.2f}")


if __name__ == "__main__":
    main()
