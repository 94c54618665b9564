"""Closed loops on the dense engine: the RK4 step of two source trees, interleaved.

``python -m benchmarks.bench_dense_loops [--against DIR ...] [--rounds R] [--steps N]
[--formulation kane|msd] [--profile MECHANISM]``

For the planar four-bar, the spatial slider-crank and the planar 3-RRR platform (the
mechanisms of :mod:`benchmarks.bench_loops`, assembled with their first joint turning at
2 rad/s), the CPU time per step (``time.process_time``, single-threaded BLAS) of
``kd.simulate(..., engine="dense")``, RK4 at 1 ms for ``N`` steps (default 30; each run
after a warm-up run of the same model).

Each source tree (this one, and each ``--against`` directory: a checkout of another
commit, e.g. ``git worktree add ../kd-before <commit>``) runs in a worker process of its
own with ``PYTHONPATH`` pointing at it. The workers are asked in turn, one run at a
time (mechanism by mechanism, the trees' order turned every round), so that the load of
a shared machine falls on all of them alike; the table gives each tree's median over
the rounds and, per other tree, the median of the per-round ratios (this tree over
that one; below 1 is faster).

``--profile MECHANISM`` instead prints, per tree, the ``cProfile`` of one run of
``N`` steps of that mechanism (sorted by own time).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

DT = 1e-3
HERE = Path(__file__).resolve().parent.parent
MECHANISMS = ("four-bar", "spatial slider-crank", "3-RRR platform")


# --------------------------------------------------------------------------- worker
# The worker imports only kanedyn (whichever tree PYTHONPATH points at) and the public
# API the trees share: it must run on older checkouts too.
def _mechanism(name: str) -> tuple[Any, Any]:
    import kanedyn as kd

    m = {
        "four-bar": kd.examples.four_bar,
        "spatial slider-crank": lambda: kd.examples.slider_crank(spatial=True),
        "3-RRR platform": kd.examples.parallel_3rrr,
    }[name]()
    u = np.zeros(m.n)
    first = m.joints[0].name
    u[m.speeds(first)[0]] = 2.0
    return m, m.assemble(kd.State(m.initial_state().q, u), fix=[first])


def _run(model: Any, state: Any, steps: int, formulation: str) -> Any:
    import kanedyn as kd

    t = steps * DT
    kw: dict[str, Any] = {"engine": "dense", "output_every": t}
    if formulation != "kane":
        kw["formulation"] = formulation
    return kd.simulate(model, state, t, DT, **kw)


def worker() -> None:
    """Answer one JSON request a line: ``{"mech", "steps", "formulation"}`` → the CPU
    seconds per step; ``{"profile": mech, ...}`` → the profile's text."""
    cache: dict[str, tuple[Any, Any]] = {}
    for line in sys.stdin:
        req = json.loads(line)
        name = req.get("profile") or req["mech"]
        if name not in cache:
            cache[name] = _mechanism(name)
        m, s = cache[name]
        steps, formulation = int(req["steps"]), req.get("formulation", "kane")
        _run(m, s, 5, formulation)  # warm-up: plans, caches, imports
        if req.get("profile"):
            import cProfile
            import io
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            _run(m, s, steps, formulation)
            pr.disable()
            buf = io.StringIO()
            pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(30)
            reply: Any = buf.getvalue()
        else:
            t0 = time.process_time()
            _run(m, s, steps, formulation)
            reply = (time.process_time() - t0) / steps
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


# --------------------------------------------------------------------------- driver
class Worker:
    """A worker process on the source tree ``tree``."""

    def __init__(self, tree: Path):
        env = dict(os.environ, PYTHONPATH=str(tree))
        for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
            env[var] = "1"
        self.tree = tree
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, cwd=tree,
        )  # fmt: skip

    def ask(self, **req: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker on {self.tree} stopped (see its error above)")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", action="append", default=[], metavar="DIR",
                    help="another source tree to time in turn with this one")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median)")
    ap.add_argument("--steps", type=int, default=30, help="RK4 steps per run")
    ap.add_argument("--formulation", default="kane", choices=("kane", "msd"))
    ap.add_argument("--only", choices=MECHANISMS, action="append", help="mechanisms to run")
    ap.add_argument("--profile", choices=MECHANISMS, help="print cProfile of one run instead")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return {}
    trees = [HERE, *(Path(d).resolve() for d in args.against)]
    labels = ["this tree", *(str(d) for d in args.against)]
    workers = [Worker(t) for t in trees]
    try:
        if args.profile:
            for label, w in zip(labels, workers, strict=True):
                print(f"== {label}")
                print(w.ask(profile=args.profile, steps=args.steps, formulation=args.formulation))
            return {}
        mechs = args.only or list(MECHANISMS)
        times = {(k, m): [] for k in range(len(trees)) for m in mechs}  # type: dict[tuple[int, str], list[float]]
        for r in range(max(1, args.rounds)):
            for m in mechs:
                order = np.roll(np.arange(len(trees)), r)
                for k in order:
                    times[int(k), m].append(
                        workers[k].ask(mech=m, steps=args.steps, formulation=args.formulation)
                    )
    finally:
        for w in workers:
            w.close()
    print(f"dense RK4 at {DT * 1e3:g} ms, {args.formulation}: CPU ms per step, median of "
          f"{args.rounds} interleaved rounds of {args.steps} steps; load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    for k, label in enumerate(labels):
        print(f"  [{k}] {label}")
    head = f"{'mechanism':22s}" + "".join(f" {f'[{k}] ms':>9s}" for k in range(len(trees)))
    head += "".join(f" {f'[0]/[{k}]':>8s}" for k in range(1, len(trees)))
    print(head)
    out: dict[str, Any] = {}
    for m in mechs:
        med = [float(np.median(times[k, m])) for k in range(len(trees))]
        ratios = [float(np.median(np.divide(times[0, m], times[k, m])))
                  for k in range(1, len(trees))]  # fmt: skip
        out[m] = dict(ms=[t * 1e3 for t in med], ratio=ratios)
        print(f"{m:22s}" + "".join(f" {t * 1e3:9.2f}" for t in med)
              + "".join(f" {x:8.2f}" for x in ratios))  # fmt: skip
    return out


if __name__ == "__main__":
    main()
