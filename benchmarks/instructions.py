"""Machine instructions per call of the dense engine's forward dynamics (or of the
compiled model's generated Python, ``--engine python``), counted by Valgrind
(cachegrind), for trees side by side.

``python -m benchmarks.instructions [TREE_DIR ...] [--engine python] [--only WORD ...]``
``python -m benchmarks.instructions [TREE_DIR ...] --runs``

Wall-clock times of one small state (a few hundred µs) move by 10–30 % between runs on a
shared machine; the number of instructions executed does not. For each benchmark model of
``--quick`` (the chains of 1, 2, 5 and 10 links, the spacecraft with 3 appendages,
Explorer-1, and the two batches of 1000 states: the 10-link chain and Explorer-1 with
dispersed parameters) and each tree (this one, then every ``TREE_DIR``, e.g. a ``git worktree``
of an older commit), it runs ``kd.forward_dynamics`` at the benchmark's random state 0
(or its 1000 states) and ``N`` times under ``valgrind --tool=cachegrind`` and prints the difference over
``N``: the instructions of one call, Python's start-up and imports left out. Needs
``valgrind`` on PATH (Debian: ``apt-get install valgrind``).

``--runs`` counts instead the long Explorer-1 runs of ``--quick`` on the native engine
(:func:`benchmarks.run.explorer_run`: 200 s at dt = 0.1, RK4, Kane and MSD, a new model
each run, its tracing and compile included) per run. The child first makes one such run
(which fills the object cache, as the benchmark's runs find it), then freezes the
objects alive (``gc.freeze``): a full collection of the imports' objects falls inside the
counted runs or not depending on the allocations before them, and would move the count
by more than the difference between trees.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

ONE = "models.random_state(model, np.random.default_rng(1))"

#: label: (model, state, calls per count relative to ``--calls``)
MODELS = {
    "chain n = 1": ("models.chain(1)", ONE, 1.0),
    "chain n = 2": ("models.chain(2)", ONE, 1.0),
    "chain n = 5": ("models.chain(5)", ONE, 1.0),
    "chain n = 10": ("models.chain(10)", ONE, 1.0),
    "spacecraft k = 3": ("models.spacecraft(3)", ONE, 1.0),
    "Explorer-1": ("kd.examples.explorer1()", ONE, 1.0),
    # the two batches of --quick (benchmarks.run: batched, dispersed), per call of B states
    "chain n = 10, B = 1000": (
        "models.chain(10)",
        "models.random_states(model, 1000, np.random.default_rng(0))",
        0.05,
    ),
    "Explorer-1, B = 1000, dispersed parameters": (
        "dispersed(kd.examples.explorer1(), 1000)",
        "models.random_states(model.model, 1000, np.random.default_rng(3))",
        0.05,
    ),
}

CHILD = """
import sys
import numpy as np
import kanedyn as kd
from benchmarks import models

def dispersed(model, B):  # as benchmarks.run.dispersed
    rng = np.random.default_rng(3)
    mass = np.array([b.mass for b in model.bodies], dtype=float)
    inertia = np.array([b.inertia for b in model.bodies], dtype=float)
    com = np.array([b.com for b in model.bodies], dtype=float)
    return kd.ModelBatch.dispersed(
        model, mass=mass * rng.uniform(0.9, 1.1, (B, model.nb)),
        inertia=inertia * rng.uniform(0.9, 1.1, (B, model.nb, 1, 1)),
        com=com + rng.normal(0.0, 0.01, (B, model.nb, 3)),
    )

model = {model}
state = {state}
fd = {call}
for _ in range(5 + {calls}):
    fd(state)
"""

#: label: formulation of the long Explorer-1 run (``--runs``)
RUNS = {
    "Explorer-1, 200 s, kane, native": "kane",
    "Explorer-1, 200 s, msd, native": "msd",
}

RUN_CHILD = """
import gc
import numpy as np
import kanedyn as kd

def run():  # as benchmarks.run.explorer_run
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    kd.simulate(model, state, 200.0, 0.1, progress=False, output_every=10.0,
                engine="compiled", formulation="{form}")

pendulum = kd.Model([kd.Body("bob", 1.0, np.eye(3), com=(0.0, -1.0, 0.0))],
                    [kd.Joint.revolute("pivot", None, "bob", axis=3)], gravity=(0.0, -9.81, 0.0))
kd.simulate(pendulum, kd.State([0.1], [0.0]), 0.2, 0.1, progress=False, engine="compiled",
            formulation="{form}")
run()
gc.collect()
gc.freeze()
for _ in range({calls}):
    run()
"""

#: how a child calls the forward dynamics, per engine
CALLS = {
    "dense": "lambda s: kd.forward_dynamics(model, s)",
    "python": "kd.compile_model(model, backend='python').forward_dynamics",
}


def count(tree: Path, code: str) -> int:
    """Instructions of a child process in ``tree`` that runs ``code``."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", code],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise SystemExit(f"benchmarks.instructions: no count from valgrind:\n{out.stderr}")
    return int(found.group(1).replace(",", ""))


def per_call(tree: Path, child: Callable[..., str], calls: int) -> float:
    """Instructions of one call: the child ``child(calls=calls)`` against ``calls=0``."""
    return (count(tree, child(calls=calls)) - count(tree, child(calls=0))) / calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="*", type=Path, help="other trees (with benchmarks/models.py)")
    p.add_argument(
        "--calls",
        type=int,
        default=100,
        help="calls counted (default 100; 5 for the batches of 1000 states)",
    )
    p.add_argument(
        "--engine",
        choices=sorted(CALLS),
        default="dense",
        help="the dense engine (default) or the compiled model's generated Python",
    )
    p.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="only the models whose label contains one of these words",
    )
    p.add_argument(
        "--runs",
        action="store_true",
        help="the long native Explorer-1 runs of --quick, compile included, per run",
    )
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("benchmarks.instructions needs valgrind (apt-get install valgrind)")
    trees = [Path(__file__).resolve().parent.parent] + [t.resolve() for t in args.trees]
    head = ["model"] + [f"{t.name} (k instr.)" for t in trees]
    head += [f"{trees[0].name} / {t.name}" for t in trees[1:]]
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * (len(head) - 1) + "|")
    rows: list[tuple[str, Callable[..., str], int]]
    if args.runs:  # 3 runs counted
        rows = [(label, partial(RUN_CHILD.format, form=form), 3) for label, form in RUNS.items()]
    else:
        call = CALLS[args.engine]
        rows = [(label, partial(CHILD.format, model=model, state=state, call=call),
                 max(1, round(share * args.calls)))
                for label, (model, state, share) in MODELS.items()]  # fmt: skip
    for label, child, calls in rows:
        if args.only and not any(w.lower() in label.lower() for w in args.only):
            continue
        counts = [per_call(t, child, calls) for t in trees]
        cells = [f"{c / 1e3:.0f}" for c in counts] + [f"{counts[0] / c:.2f}" for c in counts[1:]]
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
