"""Machine instructions per call of the dense engine's forward dynamics, counted by
Valgrind (cachegrind), for trees side by side.

``python -m benchmarks.instructions [TREE_DIR ...]``

Wall-clock times of one small state (a few hundred µs) move by 10–30 % between runs on a
shared machine; the number of instructions executed does not. For each benchmark model of
``--quick`` (the chains of 1, 2, 5 and 10 links, the spacecraft with 3 appendages,
Explorer-1) and each tree (this one, then every ``TREE_DIR``, e.g. a ``git worktree``
of an older commit), it runs ``kd.forward_dynamics`` at the benchmark's random state 0
and ``N`` times under ``valgrind --tool=cachegrind`` and prints the difference over
``N``: the instructions of one call, Python's start-up and imports left out. Needs
``valgrind`` on PATH (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MODELS = {
    "chain n = 1": "models.chain(1)",
    "chain n = 2": "models.chain(2)",
    "chain n = 5": "models.chain(5)",
    "chain n = 10": "models.chain(10)",
    "spacecraft k = 3": "models.spacecraft(3)",
    "Explorer-1": "kd.examples.explorer1()",
}

CHILD = """
import sys
import numpy as np
import kanedyn as kd
from benchmarks import models
model = {model}
state = models.random_state(model, np.random.default_rng(1))
for _ in range(5 + {calls}):
    kd.forward_dynamics(model, state)
"""


def count(tree: Path, model: str, calls: int) -> int:
    """Instructions of a child process in ``tree`` that makes ``5 + calls`` calls."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    code = CHILD.format(model=model, calls=calls)
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", code],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise SystemExit(f"benchmarks.instructions: no count from valgrind:\n{out.stderr}")
    return int(found.group(1).replace(",", ""))


def per_call(tree: Path, model: str, calls: int) -> float:
    return (count(tree, model, calls) - count(tree, model, 0)) / calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="*", type=Path, help="other trees (with benchmarks/models.py)")
    p.add_argument("--calls", type=int, default=100, help="calls counted (default 100)")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("benchmarks.instructions needs valgrind (apt-get install valgrind)")
    trees = [Path(__file__).resolve().parent.parent] + [t.resolve() for t in args.trees]
    head = ["model"] + [f"{t.name} (k instr.)" for t in trees]
    head += [f"{trees[0].name} / {t.name}" for t in trees[1:]]
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * (len(head) - 1) + "|")
    for label, model in MODELS.items():
        counts = [per_call(t, model, args.calls) for t in trees]
        cells = [f"{c / 1e3:.0f}" for c in counts] + [f"{counts[0] / c:.2f}" for c in counts[1:]]
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
