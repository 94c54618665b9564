"""Size and compile time of the C that ``kd.codegen.to_c`` writes.

The cases of issue 33's targets: the 5-link spatial chain (``kd.examples.chain(5,
spatial=True)``, 10 speeds) without derivatives, and Explorer-1
(``kd.examples.explorer1()``, 14 speeds) with derivatives, each with the parameters
folded and at run time. For each it prints the source's size (bytes, lines) and the
time ``cc -std=c99 -O2 -c`` takes on it (best of ``--repeat`` runs, CPU time of the
compiler), for gcc and clang when they are installed.

Usage::

    python -m benchmarks.bench_c_export [--repeat N] [--compilers gcc clang]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import kanedyn as kd

CASES = [
    ("5-link spatial chain", lambda: kd.examples.chain(5, spatial=True), False),
    ("Explorer-1, with derivatives", kd.examples.explorer1, True),
]


def compile_time(compiler: str, source: Path) -> float:
    """CPU seconds (user + system) of one ``compiler -std=c99 -O2 -c source``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic",
                    "-c", str(source), "-o", str(source.with_suffix(".o"))], check=True)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--compilers", nargs="*", default=["gcc", "clang"])
    args = ap.parse_args()
    compilers = [c for c in args.compilers if shutil.which(c)]
    print(f"{'case':<30} {'parameters':<10} {'KB':>7} {'lines':>7}"
          + "".join(f" {c + ' -O2 [s]':>14}" for c in compilers))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for label, build, derivatives in CASES:
            model = build()
            for parameters in ("folded", "runtime"):
                _, c = kd.codegen.to_c(model, tmp, prefix="bench", derivatives=derivatives,
                                       parameters=parameters)  # fmt: skip
                text = c.read_text()
                times = [min(compile_time(cc, c) for _ in range(args.repeat)) for cc in compilers]
                print(
                    f"{label:<30} {parameters:<10} {len(text.encode()) / 1000:>7.1f} "
                    f"{text.count(chr(10)):>7}" + "".join(f" {t:>14.2f}" for t in times)
                )


if __name__ == "__main__":
    main()
