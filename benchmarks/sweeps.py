"""Where the residual route's derivative kernel spends its time, and how the vector width
and group size change it.

    python -m benchmarks.sweeps [--n 50] [--skew] [--sizes]

For the n-link chain (``--skew``: :func:`benchmarks.models.skew_chain`) it compiles the
residual kernel (:func:`kanedyn.compiled.derivatives.residual_kernel`) several times and
reports the size of the sweeps' scratch array and coefficients, and the native
kernel's median CPU time per call (µs, bound buffers):

* one sweep at a time: the straight-line values alone (with a one-entry sweep, so that
  they are compiled as in the full kernel), then each of ``M⁻¹``, ``-∂R/∂q``,
  ``-∂R/∂u`` on top of them;
* the whole kernel at vector widths 4, 8, 16 and 32 lanes;
* the whole kernel with groups of at most 30, 100, 200 and 400 nodes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import attrs
import numpy as np

from benchmarks import models
from kanedyn.compiled import native, sweep
from kanedyn.compiled.derivatives import residual_kernel


def kernel_time(model: Any, tr: Any, x: np.ndarray, tau: np.ndarray) -> tuple[float, float]:
    """(compile seconds, median CPU µs per call) of ``tr``'s native kernel."""
    os.environ["KANEDYN_CACHE_DIR"] = tempfile.mkdtemp()  # compiled, not loaded
    t0 = time.process_time()
    nc = native.build(tr, model.nq, model.n, model.n, model.layout.quat_q.tolist())
    build = time.process_time() - t0
    nc.rhs_into(x, tau)
    args = (nc._ax, nc._ae, nc._ap, nc._aout)
    calls, samples = 200, []
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(calls):
            nc._rhs(*args)
        samples.append((time.process_time() - t0) / calls)
    return build, 1e6 * float(np.median(samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--skew", action="store_true", help="the skew chain")
    parser.add_argument("--sizes", action="store_true", help="the scratch size only")
    args = parser.parse_args()
    model = models.skew_chain(args.n) if args.skew else models.chain(args.n)
    rng = np.random.default_rng(50)
    x = np.concatenate([rng.uniform(-1, 1, model.nq), rng.normal(size=model.n)])
    tau = rng.normal(size=model.n)
    name = f"{'skew chain' if args.skew else 'chain'} n = {args.n}"
    print(f"{name}, vector width {native.vector_width()} on this host\n")

    tr = residual_kernel(model)
    plans = [sweep.plan(tr.tape, s, native.vector_width()) for s in tr.sweeps]
    coefficients = {c.index for p in plans for c in p.coefficients if hasattr(c, "index")}
    scratch = max(p.size for p in plans) * native.vector_width() * 8
    print(
        f"scratch {scratch / 1024:.0f} KiB, coefficients {8 * len(coefficients) / 1024:.0f} KiB\n"
    )
    if args.sizes:
        return
    first = tr.sweeps[0]
    tiny = attrs.evolve(first, outputs=first.outputs[:1], wrt=first.wrt[-1:])
    print("| part | kernel µs | compile s |\n|---|---|---|")
    labels = ("values", "values + M⁻¹", "values + -∂R/∂q", "values + -∂R/∂u", "whole kernel")
    choices = ((tiny,), (first,), (tiny, tr.sweeps[1]), (tiny, tr.sweeps[2]), tr.sweeps)
    for label, chosen in zip(labels, choices, strict=True):
        build, us = kernel_time(model, attrs.evolve(tr, sweeps=tuple(chosen)), x, tau)
        print(f"| {label} | {us:.2f} | {build:.1f} |")

    width, group = native.vector_width, sweep.MAX_GROUP
    print("\n| vector width | kernel µs | compile s |\n|---|---|---|")
    for w in (4, 8, 16, 32):
        native.vector_width = lambda w=w: w  # type: ignore[misc]
        build, us = kernel_time(model, residual_kernel(model), x, tau)
        print(f"| {w} | {us:.2f} | {build:.1f} |")
    native.vector_width = width  # type: ignore[assignment]
    print("\n| nodes per group at most | kernel µs | compile s |\n|---|---|---|")
    for g in (30, 100, 200, 400):
        sweep.MAX_GROUP = g
        build, us = kernel_time(model, residual_kernel(model), x, tau)
        print(f"| {g} | {us:.2f} | {build:.1f} |")
    sweep.MAX_GROUP = group


if __name__ == "__main__":
    main()
