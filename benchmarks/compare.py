"""Two sets of ``python -m benchmarks.run`` results, side by side.

``python -m benchmarks.compare BEFORE_DIR [BEFORE_DIR ...] --now NOW_DIR [NOW_DIR ...]``

Each directory holds the JSON files that ``python -m benchmarks.run --out DIR`` wrote
(one per run). For every timed quantity (one workload on one engine) the table gives
the median over the runs of each side and their ratio, now / before: a time above 1 is
slower now, a rate (states or right-hand sides per second) above 1 is faster now.

To compare two commits, run each tree in turn several times on the same machine, the
old one with this tree's ``run.py`` (the same method on both), e.g.::

    git worktree add ../kd-before <commit>
    cp benchmarks/run.py ../kd-before/benchmarks/run.py
    for r in 1 2 3 4 5; do
      (cd ../kd-before && PYTHONPATH=$PWD python -m benchmarks.run --quick --out /tmp/b-$r)
      python -m benchmarks.run --quick --out /tmp/n-$r
    done
    python -m benchmarks.compare /tmp/b-* --now /tmp/n-*
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: (section, workload, quantity) -> per side, the values of its runs
Table = dict[tuple[str, str, str], dict[str, list[float]]]


def quantities(result: dict[str, Any]) -> Iterator[tuple[str, str, str, float, str]]:
    """``(section, workload, quantity, value, unit)`` of one results file: times in µs
    (per call, per right-hand side), rates per second."""
    for w in result.get("single_state", []):
        for engine, s in w["seconds"].items():
            yield "one state", w["workload"], engine, 1e6 * s, "µs"
    for w in result.get("derivatives", []):
        for engine, s in w["seconds"].items():
            yield "derivatives", w["workload"], engine, 1e6 * s, "µs"
    for w in result.get("tcc", []):
        for engine, s in w["seconds"].items():
            yield "tcc", w["workload"], engine, 1e6 * s, "µs"
    for w in result.get("batched", []):
        for engine, rate in w["states_per_second"].items():
            yield "batched", w["workload"], engine, rate, "states/s"
    for w in result.get("explorer1", []):
        yield "long run", w["workload"], "CPU per rhs", 1e6 * w["cpu_seconds_per_rhs"], "µs"
    for w in result.get("threads", []):
        for key, rate in w.items():
            if key.endswith(("_1", "_2")):
                yield "threads", w["workload"], key, rate, "/s"


def collect(sides: dict[str, Iterable[Path]]) -> tuple[Table, dict[tuple[str, str, str], str]]:
    """Every quantity of every results file below the directories of each side."""
    table: Table = {}
    units: dict[tuple[str, str, str], str] = {}
    for side, dirs in sides.items():
        files = [f for d in dirs for f in sorted(Path(d).glob("*.json"))]
        if not files:
            raise SystemExit(f"benchmarks.compare: no results (*.json) in {list(dirs)}")
        for f in files:
            for section, workload, what, value, unit in quantities(json.loads(f.read_text())):
                key = (section, workload, what)
                table.setdefault(key, {}).setdefault(side, []).append(value)
                units[key] = unit
    return table, units


def markdown(table: Table, units: dict[tuple[str, str, str], str]) -> str:
    """The side-by-side table (quantities measured on both sides only)."""
    lines = [
        "| section | workload | quantity | unit | before (median) | now (median) | now / before |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for key, sides in table.items():
        if "before" not in sides or "now" not in sides:
            continue
        before, now = statistics.median(sides["before"]), statistics.median(sides["now"])
        ratio = f"{now / before:.2f}" if before else "—"
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {units[key]} | {before:.4g} | {now:.4g} "
            f"| {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", nargs="+", type=Path, help="results directories of the old tree")
    p.add_argument("--now", nargs="+", type=Path, required=True,
                   help="results directories of this tree")  # fmt: skip
    args = p.parse_args(argv)
    table, units = collect({"before": args.before, "now": args.now})
    print(markdown(table, units))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
