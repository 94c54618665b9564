"""The energy-momentum scheme against RK4 (Kane and MSD) on free-floating trees.

``python -m benchmarks.bench_conserving [--quick] [--t-final T]``

For each spacecraft (a rigid-hub Explorer-1 and the hub with two panels, both without
dampers) every method runs over a ladder of steps; for each run it reports the CPU time,
the error of the final joint coordinates against an RK4 run at a step 16 times smaller
than the smallest of the ladder, and the largest relative drifts of the total energy and of
the angular momentum about the mass centre. From the ladders it interpolates (log-log)
the cost of each method **at equal error** and the error **at equal cost**. Times are
process CPU times with single-threaded BLAS; compare ratios within one run only.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import attrs  # noqa: E402
import numpy as np  # noqa: E402

import kanedyn as kd  # noqa: E402


def undamped(m: kd.Model) -> kd.Model:
    joints = [attrs.evolve(j, damping=np.zeros(j.ndof)) for j in m.joints]
    return kd.Model(m.bodies, joints, gravity=m.gravity)


def explorer() -> tuple[kd.Model, kd.State]:
    """Explorer-1 with Iyy = 4993 kg m² (42's hub violates the triangle inequality)."""
    m = kd.examples.explorer1()
    hub = attrs.evolve(m.bodies[0], inertia=kd.inertia_tensor(5174.0, 4993.0, 245.4))
    m = undamped(kd.Model([hub, *m.bodies[1:]], m.joints))
    s = kd.examples.explorer1_state(m)
    s = m.set_joint(s, "root", rates=(0.05, 0.02, 0.1), displacement_rates=(0.02, -0.01, 0.03))
    for k in range(4):
        s = m.set_joint(s, f"hinge{k}", angles=(0.05 * k, 0.1), rates=(0.02, -0.02 * k))
    return m, s


def panels() -> tuple[kd.Model, kd.State]:
    m = undamped(kd.examples.hub_with_panels())
    s = m.set_joint(m.initial_state(), "root", rates=(0.05, 0.2, 0.1),
                    displacement_rates=(0.2, -0.1, 0.3))  # fmt: skip
    return m, m.set_joint(s, "hinge_left", angles=(0.3,), rates=(0.1,))


METHODS = {
    "RK4 Kane": dict(method="rk4", formulation="kane"),
    "RK4 MSD": dict(method="rk4", formulation="msd"),
    "energy-momentum": dict(method="energy-momentum"),
}


def drift(a: Any) -> float:
    a = np.asarray(a)
    return float(np.max(np.abs(a - a[0])) / np.max(np.abs(a[0])))


def error(q: np.ndarray, ref: np.ndarray, model: kd.Model) -> float:
    q = q.copy()
    for k in model.layout.quat_q:  # quaternion sign
        if q[k] @ ref[k] < 0:
            q[k] = -q[k]
    return float(np.max(np.abs(q - ref)))


def ladder(model: kd.Model, state: kd.State, t_final: float, steps: list[float]) -> dict:
    ref = kd.simulate(model, state, t_final, min(steps) / 16, output_every=5 * max(steps))
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {}
    for name, kw in METHODS.items():
        kd.simulate(model, state, 2 * max(steps), max(steps), **kw)  # build/compile once
        rows[name] = []
        for dt in steps:
            t0 = time.process_time()
            try:
                tr = kd.simulate(model, state, t_final, dt, output_every=5 * max(steps), **kw)
            except kd.SimulationError:  # RK4 beyond its stability limit
                rows[name].append((dt, time.process_time() - t0, *([float("nan")] * 3)))
                continue
            cpu = time.process_time() - t0
            rows[name].append((dt, cpu, error(tr.q[-1], ref.q[-1], model),
                               drift(tr.total_energy), drift(tr.angular_momentum)))  # fmt: skip
    return rows


def power_law(rows: list[tuple[float, ...]]) -> tuple[float, float]:
    """``(a, b)`` of ``log(error) = a + b log(CPU)`` fitted over a ladder's converged runs
    (error below 0.1), for comparisons at equal error and at equal cost."""
    pts = np.array([(r[1], r[2]) for r in rows if np.isfinite(r[2]) and r[2] < 0.1])
    b, a = np.polyfit(np.log(pts[:, 0]), np.log(pts[:, 1]), 1)
    return float(a), float(b)


def report(name: str, rows: dict) -> None:
    print(f"\n### {name}\n")
    print("| method | dt [s] | CPU [s] | error of q(T) | energy drift | H drift |")
    print("|---|---|---|---|---|---|")
    for meth, rs in rows.items():
        for dt, cpu, err, dE, dH in rs:
            if not np.isfinite(err):
                print(f"| {meth} | {dt:g} | {cpu:.3g} | diverged | | |")
                continue
            print(f"| {meth} | {dt:g} | {cpu:.3g} | {err:.2e} | {dE:.1e} | {dH:.1e} |")
    fits = {meth: power_law(rs) for meth, rs in rows.items() if meth != "energy-momentum"}
    print("\nEach energy-momentum run against RK4 at its error and at its cost (RK4 from a "
          "power law error ∝ CPU^b fitted to its ladder; b given):\n")  # fmt: skip
    head = " | ".join(f"{m} CPU at equal error | {m} error at equal cost" for m in fits)
    print(f"| dt [s] | CPU [s] | error | {head} |")
    print("|---|---|---|" + "---|---|" * len(fits))
    for dt, cpu, err, _, _ in rows["energy-momentum"]:
        cells = []
        for a, b in fits.values():
            cells.append(f"{np.exp((np.log(err) - a) / b):.2g} | {np.exp(a + b * np.log(cpu)):.1e}")
        print(f"| {dt:g} | {cpu:.3g} | {err:.2e} | " + " | ".join(cells) + " |")
    print("\n(b: " + ", ".join(f"{m} {b:.2f}" for m, (_, b) in fits.items()) + ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--t-final", type=float, default=None)
    args = parser.parse_args()
    cases = {
        "Explorer-1 (rigid hub), no dampers": (explorer, 400.0, [8.0, 4.0, 2.0, 1.0, 0.5]),
        "Hub with two panels, no dampers": (panels, 200.0, [1.0, 0.5, 0.25, 0.125, 0.0625]),
    }
    for name, (build, t_final, steps) in cases.items():
        if args.quick:
            t_final, steps = t_final / 10, steps[1:4]
        if args.t_final is not None:
            t_final = args.t_final
        model, state = build()
        report(f"{name}, T = {t_final:g} s", ladder(model, state, t_final, steps))


if __name__ == "__main__":
    main()
