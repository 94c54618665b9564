"""kanedyn against its peers: ``python -m benchmarks.run [--quick] [--only SECTION] [--out DIR]``.

kanedyn's columns: ``dense`` (the NumPy engine, ``kd.forward_dynamics``), ``python``
(the compiled engine's generated Python), ``native`` (its machine code through the
public ``cm.forward_dynamics``) and ``kernel`` (the native kernel alone, buffers bound);
``limit`` is the kernel's operation count at the machine's measured scalar rate
(:func:`benchmarks.native.scalar_rate`). Also: exact derivatives against
``pin.computeABADerivatives``, thread scaling of the native batches, and the tcc
fallback's kernel (:mod:`kanedyn.compiled.tcc`) against the native one and ``pin.aba``.

For every workload the peers' accelerations are first checked against kanedyn's (1e-10
relative); then each engine is timed in blocks, the engines interleaved block by block,
and the median per-call time over the repeats is reported, with the ratio to
``pin.aba`` from the same run. Results are printed as a table and written as JSON to
``benchmarks/results/`` (git-ignored). A missing peer is reported and skipped.

Timing uses the process CPU time (``time.process_time``) with single-threaded BLAS,
so that other load on the machine inflates the numbers less than wall time would.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import kanedyn as kd  # noqa: E402
from benchmarks import models, pin_loop  # noqa: E402
from benchmarks import native as native_bench  # noqa: E402
from benchmarks.checks import relative_error  # noqa: E402
from benchmarks.peers import PEERS, available  # noqa: E402
from kanedyn.dynamics.loads import joint_spring_forces  # noqa: E402

TOLERANCE = 1e-10
CHAINS = (1, 2, 5, 10, 20, 50)
#: the sections of a run, for ``--only``
SECTIONS = ("single", "derivatives", "threads", "tcc", "batched", "explorer")
SPACECRAFT = (3, 6, 12)
RESULTS = Path(__file__).resolve().parent / "results"


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """CPU seconds per call of ``fn`` over one block of ``calls`` calls."""
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls


def interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, budget: float = 0.05
) -> dict[str, float]:
    """Median per-call time of each function; blocks sized to ~``budget`` s, interleaved."""
    calls = {}
    for name, fn in fns.items():
        fn()
        t = per_call(fn, 3)
        calls[name] = max(1, int(budget / max(t, 1e-7)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(per_call(fn, calls[name]))
    return {name: float(np.median(s)) for name, s in samples.items()}


class CompiledPeer:
    """kanedyn's compiled engine, checked against the dense one like a peer."""

    def __init__(self, model: kd.Model):
        t0 = time.process_time()
        self.cm = kd.compile_model(model)
        self.compile_seconds = time.process_time() - t0
        self.error = float("nan")  # set by compiled_check

    def accelerations(self, q: Any, u: Any, tau: Any) -> Any:
        return self.cm.forward_dynamics(kd.State(q, u))  # springs are in the model


def compiled_check(model: kd.Model, label: str) -> CompiledPeer:
    """Build the compiled equations and check them against ``kd.forward_dynamics``."""
    peer = CompiledPeer(model)
    err = relative_error(model, peer)  # type: ignore[arg-type]
    if err > TOLERANCE:
        raise SystemExit(f"{label}: compiled engine disagrees ({err:.2e} > {TOLERANCE})")
    peer.error = err
    return peer


def single_state(model: kd.Model, label: str, peers: dict, repeats: int) -> dict[str, Any]:
    """Forward dynamics at one random state: kanedyn (dense, compiled Python, native
    public call, native kernel) and every installed peer."""
    state = models.random_state(model, np.random.default_rng(1))
    tau = joint_spring_forces(model, state.q, state.u)
    row: dict[str, Any] = {"workload": label, "nb": model.nb, "n": model.n, "errors": {}}
    compiled = compiled_check(model, label)
    cm = compiled.cm
    row["errors"]["compiled"] = compiled.error
    row["compile_seconds"] = compiled.compile_seconds
    row["compiled_ops"] = cm.n_ops
    row["backend"] = cm.backend
    cp = kd.compile_model(model, backend="python")
    fns: dict[str, Callable[[], Any]] = {
        "kanedyn": lambda: kd.forward_dynamics(model, state),
        "python": lambda: cp.forward_dynamics(state),
        "compiled": lambda: cm.forward_dynamics(state),
    }
    if cm.native is not None:
        row["native_ops"] = cm.native.n_ops
        fns["kernel"] = native_bench.bare_kernel(cm, state)
    for name, make in peers.items():
        try:
            peer = make(model)
        except Exception as exc:  # a peer that cannot represent the model
            row["errors"][name] = f"not built: {str(exc).splitlines()[0]}"
            continue
        err = relative_error(model, peer)
        row["errors"][name] = err
        if err > TOLERANCE:
            raise SystemExit(f"{label}: {name} disagrees with kanedyn ({err:.2e} > {TOLERANCE})")
        peer.set_state(state.q, state.u, tau)
        fns[name] = peer.timed
    row["seconds"] = interleaved(fns, repeats)
    return row


def batched(model: kd.Model, label: str, B: int, peers: dict, repeats: int) -> dict[str, Any]:
    """States per second: one batched kanedyn call against a Python loop over each peer."""
    rng = np.random.default_rng(2)
    states = models.random_states(model, B, rng)
    row: dict[str, Any] = {"workload": f"{label}, B = {B}", "nb": model.nb, "n": model.n, "B": B}
    cm = compiled_check(model, label).cm
    cp = kd.compile_model(model, backend="python")
    fns: dict[str, Callable[[], Any]] = {
        "kanedyn": lambda: kd.forward_dynamics(model, states),
        "python": lambda: cp.forward_dynamics(states),
        "compiled": lambda: cm.forward_dynamics(states),
    }
    tau = np.zeros(model.n)
    for name, make in peers.items():
        peer = make(model)
        qs, us = states.q, states.u

        def loop(peer=peer, qs=qs, us=us) -> None:
            for b in range(B):
                peer.set_state(qs[b], us[b], tau)
                peer.timed()

        fns[name] = loop
    sec = interleaved(fns, repeats, budget=0.2)
    row["states_per_second"] = {name: B / s for name, s in sec.items()}
    return row


def dispersed(model: kd.Model, label: str, B: int, repeats: int) -> dict[str, Any]:
    """States per second for B members that each have their own masses, inertias and
    mass centres (a ``ModelBatch``): dense against compiled (the peers would need one
    model per member, so they are not timed here)."""
    rng = np.random.default_rng(3)
    mass = np.array([b.mass for b in model.bodies], dtype=float)
    inertia = np.array([b.inertia for b in model.bodies], dtype=float)
    com = np.array([b.com for b in model.bodies], dtype=float)
    batch = kd.ModelBatch.dispersed(
        model, mass=mass * rng.uniform(0.9, 1.1, (B, model.nb)),
        inertia=inertia * rng.uniform(0.9, 1.1, (B, model.nb, 1, 1)),
        com=com + rng.normal(0.0, 0.01, (B, model.nb, 3)),
    )  # fmt: skip
    states = models.random_states(model, B, rng)
    cm = kd.compile_model(batch)
    cp = kd.compile_model(batch, backend="python")
    err = np.max(np.abs(cm.forward_dynamics(states) - kd.forward_dynamics(batch, states)))
    scale = max(1.0, float(np.max(np.abs(kd.forward_dynamics(batch, states)))))
    if err / scale > 1e-9:
        raise SystemExit(f"{label}: compiled batch disagrees with the dense batch ({err:.2e})")
    fns: dict[str, Callable[[], Any]] = {
        "kanedyn": lambda: kd.forward_dynamics(batch, states),
        "python": lambda: cp.forward_dynamics(states),
        "compiled": lambda: cm.forward_dynamics(states),
    }
    sec = interleaved(fns, repeats, budget=0.2)
    return {"workload": f"{label}, B = {B}, dispersed parameters", "nb": model.nb,
            "n": model.n, "B": B, "parameter_inputs": len(cm.param_inputs),
            "states_per_second": {name: B / s for name, s in sec.items()}}  # fmt: skip


def explorer_run(t_final: float, engine: str, formulation: str = "kane",
                 python: bool = False, runs: int = 1) -> dict[str, Any]:  # fmt: skip
    """Explorer-1, RK4 at dt = 0.1 for ``t_final`` s (4 right-hand sides per step),
    compile time included (a new model each run, so nothing is cached in memory; the
    object cache on disk may hold the native code); ``python``: the compiled engine's
    Python back end. Python's imports are not included: a run of a one-body pendulum
    with the same options takes them first (the modules of a run load on first use).
    The least CPU time of ``runs`` runs (one run of a short ``--quick`` run is moved by
    a garbage collection or another job)."""
    timed = []  # (cpu, wall, trajectory) of each run
    with native_bench.python_backend() if python else contextlib.nullcontext():
        pendulum = kd.Model([kd.Body("bob", 1.0, np.eye(3), com=(0.0, -1.0, 0.0))],
                            [kd.Joint.revolute("pivot", None, "bob", axis=3)],
                            gravity=(0.0, -9.81, 0.0))  # fmt: skip
        kd.simulate(pendulum, kd.State([0.1], [0.0]), 0.2, 0.1, progress=False,
                    engine=engine, formulation=formulation)  # fmt: skip
        for _ in range(runs):
            model = kd.examples.explorer1()
            state = kd.examples.explorer1_state(model)
            t0, c0 = time.perf_counter(), time.process_time()
            traj = kd.simulate(model, state, t_final, 0.1, progress=False,
                               output_every=10.0, engine=engine,
                               formulation=formulation)  # fmt: skip
            timed.append((time.process_time() - c0, time.perf_counter() - t0, traj))
    cpu, wall, traj = min(timed, key=lambda r: r[0])
    return {"workload": f"Explorer-1, {t_final:g} s, dt = 0.1, RK4, {formulation}, "
                        f"engine = {traj.engine.split(' ')[0]}",
            "t_final": t_final, "engine": engine, "formulation": formulation,
            "rhs_evaluations": 4 * traj.steps, "wall_seconds": wall, "cpu_seconds": cpu,
            "cpu_seconds_per_rhs": cpu / (4 * traj.steps), "runs": runs}  # fmt: skip


def environment() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "numpy": np.__version__,
        "kanedyn": kd.__version__,
        "peers": available(),
    }


def table(rows: list[dict[str, Any]], peer_names: list[str], rate: float) -> str:
    head = ["workload", "n", "ops", "dense µs", "python µs", "native µs", "kernel µs"]
    head += [f"{p} µs" for p in peer_names]
    head += ["native / pin.aba", "kernel / pin.aba", "kernel / limit", "compile ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["seconds"]
        ops = r.get("native_ops", r["compiled_ops"])
        cells = [r["workload"], str(r["n"]), str(ops), f"{1e6 * s['kanedyn']:.1f}",
                 f"{1e6 * s['python']:.1f}", f"{1e6 * s['compiled']:.2f}",
                 f"{1e6 * s['kernel']:.2f}" if "kernel" in s else "—"]  # fmt: skip
        cells += [f"{1e6 * s[p]:.2f}" if p in s else "—" for p in peer_names]
        for mine in ("compiled", "kernel"):
            ok = "pinocchio" in s and mine in s
            cells.append(f"{s[mine] / s['pinocchio']:.2f}×" if ok else "—")
        cells.append(f"{s['kernel'] * rate / ops:.1f}×" if "kernel" in s and rate else "—")
        cells.append(f"{1e3 * r['compile_seconds']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tcc_kernels(model: kd.Model, label: str, peers: dict, repeats: int) -> dict[str, Any]:
    """The one-state kernel on its bound buffers (``rhs_bound``): the tcc fallback's
    against the native one and ``pin.aba``, same model and state, checked first."""
    state = models.random_state(model, np.random.default_rng(1))
    t0 = time.process_time()
    ct = kd.compile_model(model, backend="tcc")
    build = time.process_time() - t0
    cn = kd.compile_model(model, backend="native")
    tc = ct._code.tcc
    assert tc is not None
    want = cn.forward_dynamics(state)
    err = float(np.max(np.abs(ct.forward_dynamics(state) - want))) / max(
        1.0, float(np.max(np.abs(want)))
    )
    if err > TOLERANCE:
        raise SystemExit(f"tcc, {label}: disagrees with the native kernel ({err:.2e})")
    tc.rhs_qu(state.q, state.u)
    fns: dict[str, Callable[[], Any]] = {
        "tcc": tc._rhs_bound,
        "native": native_bench.bare_kernel(cn, state),
    }
    if "pinocchio" in peers:
        peer = peers["pinocchio"](model)
        peer.set_state(state.q, state.u, joint_spring_forces(model, state.q, state.u))
        fns["pinocchio"] = peer.timed
    return {"workload": label, "n": model.n, "ops": tc.n_ops, "build_seconds": build,
            "error": err, "seconds": interleaved(fns, repeats)}  # fmt: skip


def tcc_table(rows: list[dict[str, Any]]) -> str:
    head = ["workload", "n", "ops", "tcc kernel µs", "native kernel µs", "pin.aba µs",
            "tcc / native", "tcc / pin.aba", "tcc compile ms"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["seconds"]
        pin = s.get("pinocchio")
        cells = [r["workload"], str(r["n"]), str(r["ops"]), f"{1e6 * s['tcc']:.2f}",
                 f"{1e6 * s['native']:.2f}", f"{1e6 * pin:.2f}" if pin else "—",
                 f"{s['tcc'] / s['native']:.1f}×", f"{s['tcc'] / pin:.2f}×" if pin else "—",
                 f"{1e3 * r['build_seconds']:.0f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def batch_table(rows: list[dict[str, Any]], peer_names: list[str]) -> str:
    head = ["workload", "dense states/s", "python states/s", "native states/s"]
    head += [f"{p} loop states/s" for p in peer_names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["states_per_second"]
        cells = [r["workload"], f"{s['kanedyn']:,.0f}", f"{s['python']:,.0f}",
                 f"{s['compiled']:,.0f}"]  # fmt: skip
        cells += [f"{s[p]:,.0f}" if p in s else "—" for p in peer_names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def derivative_table(rows: list[dict[str, Any]]) -> str:
    head = ["workload", "ops", "vector ops", "cm.jacobian µs", "derivatives µs",
            "pin.computeABADerivatives µs", "derivatives / pin", "compile ms"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["seconds"]
        pin = s.get("pin.computeABADerivatives")
        cells = [r["workload"], str(r["ops"]), str(r.get("vector_ops", 0)),
                 f"{1e6 * s['jacobian']:.1f}",
                 f"{1e6 * s['jacobian kernel']:.2f}", f"{1e6 * pin:.2f}" if pin else "—",
                 f"{s['jacobian kernel'] / pin:.2f}×" if pin else "—",
                 f"{1e3 * r['build_seconds']:.0f}" + (" (cached)" if r["from_cache"] else "")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def thread_table(rows: list[dict[str, Any]]) -> str:
    head = ["workload", "rhs_batch 1 thread /s", "2 threads /s", "speed-up",
            "ensemble RK4 1 thread rhs/s", "2 threads rhs/s", "speed-up"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        a, b = r["rhs_batch_states_per_second_1"], r["rhs_batch_states_per_second_2"]
        c, d = r["rk4_rhs_per_second_1"], r["rk4_rhs_per_second_2"]
        lines.append(f"| {r['workload']} | {a:,.0f} | {b:,.0f} | {b / a:.2f}× | {c:,.0f} | "
                     f"{d:,.0f} | {d / c:.2f}× |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="small sizes, few repeats, short Explorer-1 run"
    )
    ap.add_argument(
        "--repeats", type=int, default=None, help="timed blocks per engine (default 15, quick 3)"
    )
    ap.add_argument(
        "--explorer-t-final",
        type=float,
        default=None,
        help="Explorer-1 run length, s (default 20000)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON results")
    ap.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        help="run only this section (repeatable; default all): " + ", ".join(SECTIONS),
    )
    args = ap.parse_args(argv)
    only = set(args.only or SECTIONS)
    repeats = args.repeats or (3 if args.quick else 15)
    versions = available()
    for name, version in versions.items():
        print(
            f"{name}: {version}"
            if version
            else f"{name}: not installed, skipped (pip install 'kanedyn[benchmarks]')"
        )
    peers = {name: PEERS[name] for name, v in versions.items() if v}
    names = list(peers)

    native = kd.compiled.native.unavailable() is None
    rows: list[dict[str, Any]] = []
    rate = 0.0
    if "single" in only:
        chains = (1, 2, 5, 10) if args.quick else CHAINS
        crafts = (3,) if args.quick else SPACECRAFT
        rows = [single_state(models.chain(n), f"chain n = {n}", peers, repeats) for n in chains]
        rows += [
            single_state(models.spacecraft(k), f"spacecraft k = {k}", peers, repeats)
            for k in crafts
        ]
        rows.append(single_state(kd.examples.explorer1(), "Explorer-1", peers, repeats))
        rate = native_bench.scalar_rate(per_call) if native else 0.0
        print(f"\nscalar double rate (fmul, fadd): {rate / 1e9:.2f} G operations/s")
        print("\nForward dynamics, one state (median CPU µs per call):\n")
        print(table(rows, names, rate))

    drows: list[dict[str, Any]] = []
    if native and "derivatives" in only:
        drows = [native_bench.derivatives(n, peers, interleaved, repeats)
                 for n in ((2, 5) if args.quick else (2, 5, 10, 20, 50))]  # fmt: skip
        if not args.quick:
            drows.append(native_bench.derivatives(50, peers, interleaved, repeats, skew=True))
        load = ", ".join(f"{x:.2f}" for x in drows[0]["load_average"])
        print("\nExact derivatives ∂ν̇/∂q, ∂ν̇/∂u, ∂ν̇/∂τ (median CPU µs per call; load "
              f"average {load} at the start):\n")  # fmt: skip
        print(derivative_table(drows))
    trows: list[dict[str, Any]] = []
    if native and "threads" in only:
        trows = [native_bench.thread_scaling(10, 2000 if args.quick else 20000, repeats)]
        load = ", ".join(f"{x:.2f}" for x in trows[0]["load_average"])
        print(f"\nNative batches on 1 and 2 threads (wall clock; load average {load}):\n")
        print(thread_table(trows))

    tcc_rows: list[dict[str, Any]] = []
    if native and "tcc" in only and kd.compiled.tcc.unavailable() is None:
        tcc_models = [
            (models.chain(n), f"chain n = {n}") for n in ((10,) if args.quick else (10, 50))
        ]
        tcc_models.append((kd.examples.explorer1(), "Explorer-1"))
        tcc_rows = [tcc_kernels(m, label, peers, repeats) for m, label in tcc_models]
        print("\nThe tcc fallback's kernel (median CPU µs per call):\n")
        print(tcc_table(tcc_rows))

    brows: list[dict[str, Any]] = []
    if "batched" in only:
        sizes = ((10, 1000),) if args.quick else ((10, 1000), (10, 10000), (50, 1000), (50, 10000))
        brows = [batched(models.chain(n), f"chain n = {n}", B, peers, max(3, repeats // 3))
                 for n, B in sizes]  # fmt: skip
        brows += [dispersed(kd.examples.explorer1(), "Explorer-1", 1000, max(3, repeats // 3))]
        print("\nBatched forward dynamics (states per CPU second):\n")
        print(batch_table(brows, names))

    t_final = args.explorer_t_final or (200.0 if args.quick else 20000.0)
    # the dense engine over a 1/50 slice (its full run takes minutes), then the full run
    longs: list[dict[str, Any]] = []
    if "explorer" in only:
        runs = 3 if args.quick else 1  # the least of three short runs
        longs = [explorer_run(t_final / 50.0, "dense", runs=runs),
                 explorer_run(t_final / 10.0, "compiled", python=True, runs=runs),
                 explorer_run(t_final, "compiled", runs=runs),
                 explorer_run(t_final / 50.0, "dense", "msd", runs=runs),
                 explorer_run(t_final / 10.0, "compiled", "msd", python=True, runs=runs),
                 explorer_run(t_final, "compiled", "msd", runs=runs)]  # fmt: skip
        if available().get("pinocchio"):
            longs.append(pin_loop.explorer_rk4(t_final))
    print()
    for long in longs:
        print(f"{long['workload']}: {long['rhs_evaluations']:,} right-hand sides, "
              f"{long['wall_seconds']:.1f} s wall, {long['cpu_seconds']:.1f} s CPU "
              f"({1e6 * long['cpu_seconds_per_rhs']:.2f} µs per right-hand side)")  # fmt: skip
    by_engine = {(r["engine"], r["formulation"]): r for r in longs if r["t_final"] == t_final}
    if ("pinocchio", "aba") in by_engine and ("compiled", "kane") in by_engine:
        ratio = (by_engine[("compiled", "kane")]["cpu_seconds"]
                 / by_engine[("pinocchio", "aba")]["cpu_seconds"])  # fmt: skip
        print(f"default engine / Pinocchio with a Python RK4 loop: {ratio:.3f}× CPU")

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = args.out / f"bench-{stamp}.json"
    path.write_text(json.dumps({"command": " ".join(["python -m benchmarks.run", *(argv or sys.argv[1:])]),
                                "environment": environment(), "single_state": rows,
                                "batched": brows, "explorer1": longs,
                                "scalar_rate": rate, "derivatives": drows,
                                "threads": trows, "tcc": tcc_rows}, indent=2))  # fmt: skip
    print(f"\nwritten {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
