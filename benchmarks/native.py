"""The native back end's measurements for ``python -m benchmarks.run``.

* :func:`scalar_rate`: the machine's scalar double-precision rate for the operations of a
  kernel (independent ``fmul``/``fadd`` chains, compiled by the same LLVM), so that a
  kernel's time can be put against its physical limit ``n_ops / rate``;
* :func:`derivatives`: the exact derivatives (``cm.jacobian``, and the bare native call)
  against ``pin.computeABADerivatives``, same model and state;
* :func:`thread_scaling`: states per second of ``rhs_batch`` and of the ensemble RK4 loop
  on 1 and 2 threads.

Timing uses CPU time for single-threaded work and wall time for the threaded runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import kanedyn as kd
from benchmarks import models
from kanedyn.compiled import native, tcc


@contextlib.contextmanager
def python_backend() -> Iterator[None]:
    """``compile_model``'s automatic choice made to fall back to the Python back end."""
    original, original_tcc = native.unavailable, tcc.unavailable
    native.unavailable = lambda: "the Python back end, for comparison"
    tcc.unavailable = lambda: "the Python back end, for comparison"
    try:
        yield
    finally:
        native.unavailable, tcc.unavailable = original, original_tcc


def bare_kernel(cm: kd.CompiledModel, state: kd.State) -> Callable[[], Any]:
    """The native ``rhs`` at ``state`` on its bound buffers (``rhs_bound``, the call the
    public one-state path makes): the kernel alone, with ctypes' cost of one call."""
    nc = cm.native
    assert nc is not None
    nc.rhs_qu(state.q, state.u)
    return nc._rhs_bound


def scalar_rate(per_call: Callable[[Callable[[], Any], int], float]) -> float:
    """Scalar double operations per second: 16 independent multiply-add chains of
    ``x = x * a + b`` (plain ``fmul`` and ``fadd``, no FMA), 10⁶ iterations per call."""
    import llvmlite.binding as llvm

    native.unavailable()
    chains = 16
    lines = ["define double @rate(double %a, double %b, i64 %n) {", "entry:", "  br label %loop",
             "loop:", "  %i = phi i64 [0, %entry], [%i1, %loop]"]  # fmt: skip
    for c in range(chains):
        lines.append(f"  %x{c} = phi double [{float(c + 1)}, %entry], [%y{c}, %loop]")
    for c in range(chains):
        lines.append(f"  %m{c} = fmul double %x{c}, %a")
        lines.append(f"  %y{c} = fadd double %m{c}, %b")
    lines += ["  %i1 = add i64 %i, 1", "  %more = icmp slt i64 %i1, %n",
              "  br i1 %more, label %loop, label %done", "done:"]  # fmt: skip
    acc = "%y0"
    for c in range(1, chains):
        lines.append(f"  %s{c} = fadd double {acc}, %y{c}")
        acc = f"%s{c}"
    lines += [f"  ret double {acc}", "}"]
    tm = native._target_machine(2)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly("\n".join(lines)), tm)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_int64)(
        engine.get_function_address("rate")
    )
    iters = 1_000_000
    seconds = per_call(lambda: fn(0.999999, 1e-6, iters), 5)
    return 2 * chains * iters / seconds


def derivatives(n: int, peers: dict, interleaved: Callable[..., dict], repeats: int,
                skew: bool = False) -> dict[str, Any]:  # fmt: skip
    """``∂ν̇/∂q, ∂ν̇/∂u, ∂ν̇/∂τ`` of the n-link chain (with ``skew``, of
    :func:`benchmarks.models.skew_chain`): ``cm.jacobian`` (public call) and the bare
    native kernel, against ``pin.computeABADerivatives``."""
    model = models.skew_chain(n) if skew else models.chain(n)
    state = models.random_state(model, np.random.default_rng(4))
    tau = np.zeros(model.n)
    cm = kd.compile_model(model)
    t0 = time.process_time()  # the derivative kernel: tracing, forward mode and LLVM
    rates, J = cm.jacobian(state.q, state.u)
    build = time.process_time() - t0
    fn = cm._code.derivatives(model, cm.locked)
    dn = fn.native  # type: ignore[attr-defined]
    x = np.concatenate((state.q, state.u))
    fns: dict[str, Callable[[], Any]] = {
        "jacobian": lambda: cm.jacobian(state.q, state.u),
        "jacobian kernel": lambda: fn(x, tau),  # the native kernel (and product with M⁻¹)
    }
    row: dict[str, Any] = {"workload": f"{'skew chain' if skew else 'chain'} n = {n}", "n": n,
                           "ops": dn.n_ops, "vector_ops": getattr(dn, "n_vector_ops", 0),
                           "build_seconds": build, "from_cache": dn.from_cache,
                           "load_average": list(os.getloadavg())}  # fmt: skip
    if "pinocchio" in peers:
        peer = peers["pinocchio"](model)
        dq, dv, dtau = peer.derivatives(state.q, state.u, tau)
        err = max(float(np.max(np.abs(J[:n, :n] - dq))), float(np.max(np.abs(J[:n, n:2 * n] - dv))),
                  float(np.max(np.abs(J[:n, 2 * n:] - dtau))))  # fmt: skip
        row["error_vs_pinocchio"] = err / max(1.0, float(np.max(np.abs(dq))))
        if row["error_vs_pinocchio"] > 1e-9:
            raise SystemExit(f"derivatives, {row['workload']}: disagree with Pinocchio ({err:.2e})")
        peer.set_state(state.q, state.u, tau)
        fns["pin.computeABADerivatives"] = peer.timed_derivatives
    row["seconds"] = interleaved(fns, repeats)
    return row


def thread_scaling(n: int, B: int, repeats: int) -> dict[str, Any]:
    """Wall-clock states per second of ``rhs_batch`` and of the ensemble RK4 loop (100
    steps) for B states of the n-link chain, on 1 and 2 threads."""
    model = models.chain(n)
    cm = kd.compile_model(model)
    nc = cm.native
    assert nc is not None
    states = models.random_states(model, B, np.random.default_rng(5))
    X = np.ascontiguousarray(np.concatenate((states.q, states.u), axis=1))
    row: dict[str, Any] = {"workload": f"chain n = {n}, B = {B}", "n": n, "B": B,
                           "load_average": list(os.getloadavg())}  # fmt: skip
    steps = 100
    out = np.empty((1, B, X.shape[1]))
    for threads in (1, 2):
        best_rhs, best_rk4 = np.inf, np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            nc.rhs_batch(X, threads=threads)
            best_rhs = min(best_rhs, time.perf_counter() - t0)
            Xc = X.copy()
            t0 = time.perf_counter()
            nc.rk4_batch(Xc, steps, 1e-3, 0, steps, out, threads)
            best_rk4 = min(best_rk4, time.perf_counter() - t0)
        row[f"rhs_batch_states_per_second_{threads}"] = B / best_rhs
        row[f"rk4_rhs_per_second_{threads}"] = 4 * steps * B / best_rk4
    return row
