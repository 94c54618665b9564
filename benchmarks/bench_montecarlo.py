"""Monte Carlo scaling: members per second on 1 and 2 Dask workers, and the cost model.

``python -m benchmarks.bench_montecarlo [--quick] [--members N] [--t-final T]``

The workload is member-bound: an Explorer-1 dispersion (hub mass, spin rate, a hinge
damper) in chunks of a fixed size, so that both runs do the same chunks. Each cluster
(``LocalCluster``, one single-threaded worker process per worker) is started and warmed
up (the run's description sent, the first chunk's imports done) before the timed run; the
wall time of the run is measured, and the CPU time its workers spent. On a busy machine
the wall-time ratio is limited by the cores the workers actually get; equal members per
CPU second on 1 and 2 workers show that running in parallel adds no work. The two results are checked to be identical, member by
member. Reported: members per second for 1 and 2 workers and their ratio (target: at
least 1.6 on 2 cores), and the terms of the cost model of docs/howto/montecarlo-scaling.md,
measured in this process: the code generation per chunk, the cost of one ensemble step
as a function of the chunk size, and the bytes sent per chunk and per run.

Results go to ``benchmarks/results/montecarlo-<date>.json`` (git-ignored).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import kanedyn as kd  # noqa: E402
from kanedyn.simulation.montecarlo import dispersion, runner  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DISPERSIONS = [
    kd.Dispersion("hub.mass", "normal", sigma=20.0),
    kd.Dispersion("root.rates.z", "uniform", low=0.08, high=0.09),
    kd.Dispersion("hinge1.damping.1", "uniform", low=0.5, high=1.5, relative=True),
]


def workload(members: int, t_final: float, chunk: int) -> dict[str, Any]:
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    return dict(model=model, state=state, dispersions=DISPERSIONS, n=members,
                t_final=t_final, dt=1.0, seed=1, chunk_size=chunk, output_every=10.0,
                outputs=["root.rates.z", "hinge0.angles.0"])  # fmt: skip


def on_cluster(workers: int, work: dict[str, Any]) -> tuple[float, float, Any]:
    """Wall seconds of the run on a fresh LocalCluster of ``workers`` processes, and the
    CPU seconds its workers spent (which other load on the machine inflates less)."""
    import distributed

    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:  # fmt: skip
        with distributed.Client(cluster) as client:
            warm = {**work, "n": workers, "chunk_size": 1, "t_final": 2.0}
            kd.monte_carlo(scheduler=client, **warm)
            cpu0 = client.run(time.process_time)
            t0 = time.perf_counter()
            res = kd.monte_carlo(scheduler=client, **work)
            wall = time.perf_counter() - t0
            cpu1 = client.run(time.process_time)
            return wall, sum(cpu1[w] - cpu0[w] for w in cpu1), res


def cost_terms(work: dict[str, Any]) -> dict[str, float]:
    """The cost model's terms, measured in this process."""
    model, state = work["model"], work["state"]
    spec = dispersion.DispersionSpec(model, state, tuple(DISPERSIONS), 1)
    out = {}
    for B in sorted({1, work["chunk_size"], 256}):
        members = dispersion.apply(spec, dispersion.sample(spec, range(B)))
        batch = kd.ModelBatch.dispersed(model, **members.arrays)
        t0 = time.perf_counter()
        kd.compile_model(batch)
        out[f"compile_s_B{B}"] = time.perf_counter() - t0
        states = kd.States(members.q, members.u)
        steps = 50
        t0 = time.perf_counter()
        kd.simulate_ensemble(batch, states, float(steps), 1.0)
        out[f"step_s_B{B}"] = (time.perf_counter() - t0) / steps  # compiled above
    run = runner.Run(
        spec=spec, t_final=work["t_final"], dt=1.0, output_every=10.0, loads=None,
        engine="auto", output_names=("root.rates.z",),
        output_fns=(dispersion.Target.of(model, "root.rates.z"),),
        metric_names=(), metric_fns=(), keep_trajectories=False,
    )  # fmt: skip
    chunk = runner.run_chunk(run, 0, work["chunk_size"])
    out["bytes_per_chunk_result"] = float(len(pickle.dumps(chunk)))
    out["bytes_run_description"] = float(len(pickle.dumps(run)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 members, 100 s")
    ap.add_argument("--members", type=int, default=64)
    ap.add_argument("--t-final", type=float, default=400.0)
    ap.add_argument("--chunk-size", type=int, default=8)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    members, t_final = (16, 100.0) if args.quick else (args.members, args.t_final)
    work = workload(members, t_final, args.chunk_size)
    print(f"Explorer-1 dispersion: {members} members, {t_final:g} s at dt = 1 s, "
          f"chunks of {args.chunk_size}, {os.cpu_count()} CPUs")  # fmt: skip
    wall1, cpu1, res1 = on_cluster(1, work)
    wall2, cpu2, res2 = on_cluster(2, work)
    identical = res1.members.equals(res2.members)
    rate1, rate2 = members / wall1, members / wall2
    terms = cost_terms(work)
    print(
        f"  1 worker : {wall1:8.2f} s  {rate1:8.2f} members/s  "
        f"(workers' CPU {cpu1:.2f} s, {members / cpu1:.2f} members per CPU s)"
    )
    print(f"  2 workers: {wall2:8.2f} s  {rate2:8.2f} members/s  "
          f"(workers' CPU {cpu2:.2f} s, {members / cpu2:.2f} members per CPU s)")  # fmt: skip
    print(f"  ratio 2/1: {rate2 / rate1:.2f} (target >= 1.6 on 2 cores); results identical: "
          f"{identical}")  # fmt: skip
    for k, v in terms.items():
        print(f"  {k:24s} {v:.4g}")
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "members": members, "t_final": t_final, "chunk_size": args.chunk_size,
        "wall_1_worker_s": wall1, "wall_2_workers_s": wall2, "members_per_s_1": rate1,
        "members_per_s_2": rate2, "ratio": rate2 / rate1, "identical": identical,
        "worker_cpu_1_s": cpu1, "worker_cpu_2_s": cpu2,
        "cost_terms": terms, "cpus": os.cpu_count(), "python": platform.python_version(),
        "numpy": np.__version__,
    }  # fmt: skip
    path = args.out / f"montecarlo-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"  wrote {path}")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
