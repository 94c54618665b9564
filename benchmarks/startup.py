"""Start-up time: ``python -m benchmarks.startup [--repeats N]``.

Times, in fresh interpreters, a bare ``python -c pass``, ``import kanedyn``, ``kanedyn
--help`` (as ``python -m kanedyn --help``) and a first ``kd.simulate`` of a small chain,
and prints the best of ``N`` runs of each with its excess over the bare interpreter. The
best (not the mean) is the run least disturbed by other load on the machine; the target
for ``kanedyn --help`` is an excess of at most 0.3 s. The modules ``import kanedyn``
loads are checked, not timed, by ``tests/test_imports.py``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CASES = {
    "python -c pass": ["-c", "pass"],
    "import kanedyn": ["-c", "import kanedyn"],
    "kanedyn --help": ["-m", "kanedyn", "--help"],
    "first simulate": [
        "-c",
        "import kanedyn as kd; m = kd.examples.chain(2); "
        "kd.simulate(m, m.initial_state(), 0.1, 0.01, progress=False)",
    ],
}


def best_wall_time(args: list[str], repeats: int) -> float:
    """The shortest wall time of ``repeats`` runs of ``python *args`` [s]."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each case (default 7)")
    args = parser.parse_args(argv)
    times = {name: best_wall_time(case, args.repeats) for name, case in CASES.items()}
    bare = times["python -c pass"]
    print(f"{'case':<16} {'best s':>8} {'excess s':>9}")
    for name, t in times.items():
        print(f"{name:<16} {t:8.3f} {t - bare:9.3f}")


if __name__ == "__main__":
    main()
