"""The native back end: a traced kernel compiled to machine code in-process by llvmlite.

:func:`build` emits the module of :mod:`kanedyn.compiled.llvm` and compiles it for the
host CPU (instruction selection and register allocation at ``-O2``; the tape already
folded constants and shared common subexpressions) with MCJIT; :class:`NativeCode` calls its
functions through ctypes with buffer addresses taken once, so a call costs about a
microsecond more than the arithmetic. ctypes releases the GIL during each call, which
lets :meth:`NativeCode.rk4_batch` split an ensemble across threads.

**Object cache.** The machine code is written to the user cache directory
(``$KANEDYN_CACHE_DIR``, else ``$XDG_CACHE_HOME/kanedyn``, else ``~/.cache/kanedyn``),
named by a hash of the IR, the CPU name and features and the llvmlite version, so a
second process loads it instead of compiling. A model that changes changes its IR (its
constants are folded into it), so it gets a new entry.

llvmlite is optional (the ``native`` extra): :func:`unavailable` says why it cannot be
used, and :func:`kanedyn.compile_model` then returns the Python back end.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled import llvm, sweep
from kanedyn.compiled.kernels import Traced

__all__ = ["KernelCalls", "NativeCode", "build", "cache_dir", "unavailable"]

Array = NDArray[np.float64]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def unavailable() -> str | None:
    """``None`` when llvmlite can compile native code here, else the reason it cannot."""
    if "reason" not in _STATE:
        try:
            import llvmlite
            import llvmlite.binding as binding

            binding.initialize_native_target()
            binding.initialize_native_asmprinter()
            _STATE["version"] = llvmlite.__version__
            _STATE["reason"] = None
        except Exception as exc:  # ImportError, or no native target for this platform
            _STATE["reason"] = f"llvmlite is not available ({type(exc).__name__}: {exc})"
    return _STATE["reason"]  # type: ignore[no-any-return]


def cache_dir() -> Path:
    """The object cache directory (see the module docstring)."""
    env = os.environ.get("KANEDYN_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kanedyn"


#: above this many operations a kernel is compiled at codegen level 0 (fast instruction
#: selection and register allocation): LLVM's level 2 grows faster than linearly with
#: the length of one straight-line function (measured: 13k operations 2 s, 65k 34 s)
LARGE = 20000


def _target_machine(opt: int = 2) -> Any:
    """A new target machine for the host CPU (an MCJIT engine owns the one it is given)."""
    import llvmlite.binding as binding

    if "host" not in _STATE:
        reason = unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        _STATE["cpu"] = binding.get_host_cpu_name()
        _STATE["features"] = binding.get_host_cpu_features().flatten()
        _STATE["host"] = f"{binding.get_default_triple()} {_STATE['cpu']} {_STATE['features']}"
    target = binding.Target.from_default_triple()
    return target.create_target_machine(
        cpu=_STATE["cpu"], features=_STATE["features"], opt=opt, codemodel="jitdefault"
    )


def vector_width() -> int:
    """Doubles per machine vector for the vector-mode derivatives
    (:mod:`kanedyn.compiled.sweep`): 8 where the host CPU has AVX-512, else 4 (other
    CPUs split LLVM's 4-wide vectors as they need)."""
    if "host" not in _STATE:
        _target_machine()
    return 8 if "+avx512f" in str(_STATE["features"]).split(",") else sweep.WIDTH


def cache_key(ir: str) -> str:
    """The object cache's name for ``ir`` on this host and llvmlite version."""
    if "host" not in _STATE:
        _target_machine()
    text = f"{_STATE['version']}\n{_STATE['host']}\n{ir}"
    return hashlib.sha256(text.encode()).hexdigest()


def _compile(ir: str, opt: int = 2) -> tuple[Any, bool]:
    """An MCJIT engine holding ``ir``'s functions, compiled at codegen level ``opt``;
    and whether its object came from the disk cache."""
    import llvmlite.binding as binding

    with _LOCK:
        tm = _target_machine(opt)
        key = cache_key(f"; opt {opt}\n{ir}")
        path = cache_dir() / f"{key}.o"
        try:
            cached: bytes | None = path.read_bytes()
        except OSError:
            cached = None
        mod = binding.parse_assembly(ir)
        mod.verify()
        # no IR passes: the tape has folded constants and shared subexpressions already,
        # and measured, LLVM's O2 pipeline costs compile time without faster code
        engine = binding.create_mcjit_compiler(mod, tm)

        def notify(_module: Any, buffer: bytes) -> None:
            _store(path, buffer)

        def getbuffer(_module: Any) -> bytes | None:
            return cached

        engine.set_object_cache(notify, getbuffer)
        engine.finalize_object()
        return engine, cached is not None


def _store(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_RHS = ctypes.CFUNCTYPE(ctypes.c_int32, _P, _P, _P, _P)
_RHS_BOUND = ctypes.CFUNCTYPE(ctypes.c_int32)
_RHS_BATCH = ctypes.CFUNCTYPE(_I64, _P, _P, _P, _P, _I64, _I64, _I64)
_RK4 = ctypes.CFUNCTYPE(_I64, _P, _P, _P, _I64, ctypes.c_double, _I64, _I64, _P, _I64)
_RK4_BATCH = ctypes.CFUNCTYPE(
    None, _P, _P, _P, _P, _I64, _I64, _I64, _I64, ctypes.c_double, _I64, _I64, _P
)


def _addr(a: NDArray[Any]) -> int:
    return int(a.ctypes.data)


class KernelCalls:
    """The one-state and batch calls of a compiled kernel, shared by the back ends
    (:class:`NativeCode`, :class:`kanedyn.compiled.tcc.TccCode`). A subclass sets the
    sizes (:meth:`_sizes`), reads the inputs where :meth:`_slots` says, binds the
    buffers (:meth:`_bind_buffers`: ``_x``, ``_e``, ``_out``, ``_zeros``, ``params`` and
    their addresses), and sets the ctypes functions ``_rhs``, ``_rhs_bound`` and
    ``_rhs_batch`` of :mod:`kanedyn.compiled.llvm`'s signatures."""

    nq: int
    n: int
    nx: int
    n_e: int
    n_p: int
    n_out: int
    params: Array
    _x: Array
    _e: Array
    _out: Array
    _zeros: Array
    _ax: int
    _ae: int
    _aout: int
    _azeros: int
    _ap: int
    _rhs: Any
    _rhs_bound: Any
    _rhs_batch: Any

    def _sizes(self, traced: Traced, nq: int, n: int, n_e: int) -> None:
        """The sizes of ``traced``'s kernel: ``nq``, ``n``, ``nx``, ``n_e``, ``n_p``,
        ``n_out``."""
        self.nq, self.n, self.nx = nq, n, nq + n
        self.n_e, self.n_p, self.n_out = n_e, len(traced.param_inputs), traced.n_out

    def _slots(self, traced: Traced) -> dict[str, tuple[str, int]]:
        """Where each input of ``traced`` is read: ``(buffer, index)`` with buffer
        ``"x"`` (the state), ``"e"`` (efforts or loads) or ``"p"`` (parameters)."""
        inputs: dict[str, tuple[str, int]] = {}
        e_names = [a for a in traced.args[self.nx :] if not a.startswith("p")]
        for i, name in enumerate(traced.args[: self.nx]):
            inputs[name] = ("x", i)
        for i, name in enumerate(e_names):
            inputs[name] = ("e", i)
        for i in range(self.n_p):
            inputs[f"p{i}"] = ("p", i)
        return inputs

    def _bind_buffers(self, params: Array | None) -> None:
        """The one-state buffers and their addresses; the parameters ``params`` (B, n_p)
        per member, or one empty row."""
        self.params = (
            np.zeros((1, max(self.n_p, 1)))
            if params is None or self.n_p == 0
            else np.ascontiguousarray(params, dtype=float)
        )
        self._x = np.zeros(max(self.nx, 1))
        self._e = np.zeros(max(self.n_e, 1))
        self._out = np.zeros(max(self.n_out, 1))
        self._zeros = np.zeros(max(self.n_e, 1))
        self._ax, self._ae, self._aout = _addr(self._x), _addr(self._e), _addr(self._out)
        self._ap = _addr(self.params)
        self._azeros = _addr(self._zeros)

    # -- one state ------------------------------------------------------------------
    def rhs_into(self, x: Any, e: Any = None) -> bool:
        """The kernel at state ``x`` (nx,) with efforts ``e`` (or none), into
        :attr:`out`; False when an output is not finite."""
        self._x[: self.nx] = x
        if e is None:
            bad = self._rhs(self._ax, self._azeros, self._ap, self._aout)
        else:
            self._e[: self.n_e] = e
            bad = self._rhs(self._ax, self._ae, self._ap, self._aout)
        return not bad

    def rhs_qu(self, q: Any, u: Any) -> bool:
        """:meth:`rhs_into` at coordinates ``q`` and speeds (or momenta) ``u``."""
        self._x[: self.nq] = q
        self._x[self.nq : self.nx] = u
        return not self._rhs_bound()

    @property
    def out(self) -> Array:
        """The outputs of the last single-state call (a view of an internal buffer)."""
        return self._out[: self.n_out]

    # -- batches --------------------------------------------------------------------
    def rhs_batch(self, X: Array, E: Array | None = None, threads: int = 1) -> tuple[Array, int]:
        """The kernel on each row of ``X`` (B, nx), member b with parameter row b (or
        the one row) and efforts ``E[b]`` (or none): ``(OUT (B, n_out), 1 + first
        non-finite member or 0)``. With ``threads > 1`` the rows are split across
        threads (ctypes releases the GIL)."""
        X = np.ascontiguousarray(X, dtype=float)
        B = X.shape[0]
        OUT = np.empty((B, self.n_out))
        if E is None:
            E_, estep = self._zeros, 0
        else:
            E_, estep = np.ascontiguousarray(E, dtype=float), self.n_e
        pstep = self.n_p if self.params.shape[0] > 1 else 0

        def run(lo: int, hi: int) -> int:
            if hi <= lo:
                return 0
            r = int(
                self._rhs_batch(
                    _addr(X) + 8 * lo * self.nx, _addr(E_) + 8 * lo * estep,
                    self._ap + 8 * lo * pstep, _addr(OUT) + 8 * lo * self.n_out, hi - lo,
                    estep, pstep,
                )
            )  # fmt: skip
            return lo + r if r else 0

        results = _split(run, B, threads)
        bad = [r for r in results if r]
        return OUT, (min(bad) if bad else 0)


class NativeCode(KernelCalls):
    """One traced kernel compiled to machine code (see :mod:`kanedyn.compiled.llvm` for
    its functions). ``nx = nq + n`` state entries, ``n_e`` effort inputs, ``n_p``
    parameter inputs, ``n_out`` outputs; ``from_cache`` says whether the object code was
    loaded from the disk cache.

    The single-state calls (:meth:`rhs_into`, :meth:`rhs_qu`, and ``_rhs_bound``, the
    kernel on these buffers with no efforts, called without arguments; see
    :func:`kanedyn.compiled.llvm.module`) use buffers owned by this object: they are
    not to be called from two threads at once. :meth:`rhs_batch` and :meth:`rk4_batch`
    take their own arrays and run concurrently.
    """

    def __init__(self, traced: Traced, nq: int, n: int, n_e: int, quats: Sequence[Sequence[int]],
                 params: Array | None, settle: Traced | None = None,
                 uncut: Traced | None = None):  # fmt: skip
        self._sizes(traced, nq, n, n_e)
        inputs = self._slots(traced)
        width = vector_width() if traced.sweeps else sweep.WIDTH
        plans = [sweep.plan(traced.tape, s, width) for s in traced.sweeps]
        # the rate of state entry i: q̇ follows the n rates in the kernel's outputs
        perm = [n + i for i in range(nq)] + list(range(n))
        self.n_ops = traced.tape.count(
            [*traced.outputs, *(c for p in plans for c in p.coefficients)]
        )
        self.n_vector_ops = sum(p.lane_operations() for p in plans)
        # level 2 for the sweeps' loops; long straight-line code at the fastest level
        fast = self.n_ops > LARGE
        kernel = llvm.kernel_function(traced.tape, "kernel", traced.outputs, inputs, plans, fast)
        settle_fn = uncut_fn = None
        if settle is not None:  # the same inputs (x, e, p); kernels.settled's outputs
            settle_fn = llvm.kernel_function(settle.tape, "settle", settle.outputs, inputs,
                                             fast=fast)  # fmt: skip
        if uncut is not None:  # the same inputs and outputs as the kernel
            uncut_fn = llvm.kernel_function(uncut.tape, "kernel_uncut", uncut.outputs,
                                            inputs, fast=fast)  # fmt: skip
        self.ir = llvm.module(kernel, self.nx, self.n_out, perm, quats, settle_fn, uncut_fn)
        self.engine, self.from_cache = _compile(self.ir, 0 if fast and not plans else 2)
        get = self.engine.get_function_address
        self._rhs = _RHS(get("rhs"))
        self._rhs_batch = _RHS_BATCH(get("rhs_batch"))
        self._rk4 = _RK4(get("rk4"))
        self._rk4_batch = _RK4_BATCH(get("rk4_batch"))
        self._bind_buffers(params)
        # rhs_bound: rhs on (x, no efforts, parameter row 0, out), no arguments to convert
        bound = (ctypes.c_void_p * 4).from_address(self.engine.get_global_value_address("bound"))
        bound[:] = [self._ax, self._azeros, self._ap, self._aout]
        self._rhs_bound = _RHS_BOUND(get("rhs_bound"))

    # -- RK4 ------------------------------------------------------------------------
    def rk4(self, x: Array, steps: int, h: float, first: int, stride: int, out: Array,
            e: Array | None = None) -> int:  # fmt: skip
        """``steps`` RK4 steps in place on ``x`` (nx,), writing the state after every
        global step divisible by ``stride`` to the next row of ``out`` (rows of nx);
        returns 0 or the global index of the first non-finite step."""
        if steps <= 0:
            return 0
        ea = self._azeros
        if e is not None:
            self._e[: self.n_e] = e
            ea = self._ae
        return int(self._rk4(_addr(x), ea, self._ap, steps, h, first, stride, _addr(out), self.nx))

    def rk4_batch(self, X: Array, steps: int, h: float, first: int, stride: int,
                  out: Array, threads: int = 1) -> NDArray[np.int64]:  # fmt: skip
        """:meth:`rk4` for every row of ``X`` (B, nx), in place; ``out`` (rows, B, nx);
        returns each member's status. Members are split across ``threads`` threads."""
        B = X.shape[0]
        status = np.zeros(B, dtype=np.int64)
        if steps <= 0 or B == 0:
            return status
        pstep = self.n_p if self.params.shape[0] > 1 else 0
        ldo = B * self.nx

        def run(lo: int, hi: int) -> int:
            if hi > lo:
                self._rk4_batch(
                    _addr(X) + 8 * lo * self.nx, self._azeros, self._ap + 8 * lo * pstep,
                    _addr(out) + 8 * lo * self.nx, hi - lo, ldo, pstep, steps, h, first,
                    stride, _addr(status) + 8 * lo,
                )  # fmt: skip
            return 0

        _split(run, B, threads)
        return status


def _split(run: Any, B: int, threads: int) -> list[int]:
    """``run(lo, hi)`` over ``threads`` contiguous slices of ``range(B)``."""
    threads = max(1, min(int(threads), B))
    if threads == 1:
        return [run(0, B)]
    bounds = [B * i // threads for i in range(threads + 1)]
    results = [0] * threads

    def work(i: int) -> None:
        results[i] = run(bounds[i], bounds[i + 1])

    pool = [threading.Thread(target=work, args=(i,)) for i in range(1, threads)]
    for t in pool:
        t.start()
    work(0)
    for t in pool:
        t.join()
    return results


def default_threads() -> int:
    """Threads for batches: ``$KANEDYN_THREADS``, else the CPUs this process may use."""
    env = os.environ.get("KANEDYN_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def build(traced: Traced, nq: int, n: int, n_e: int, quats: Sequence[Sequence[int]],
          params: Array | None = None, settle: Traced | None = None,
          uncut: Traced | None = None) -> NativeCode:  # fmt: skip
    """Compile ``traced`` (state inputs first, then ``n_e`` effort or load inputs, then
    parameters ``params`` (B, n_p)) to a :class:`NativeCode`, at LLVM's code-generation
    level 2 up to :data:`LARGE` operations and level 0 beyond; ``settle`` (same
    inputs, the outputs of :func:`kanedyn.compiled.kernels.settled`) projects the state
    after every RK4 step and gives the next step's first rates; ``uncut`` (``traced``
    with ``cut=False``) takes the later stages of the steps clear of a singular
    configuration."""
    return NativeCode(traced, nq, n, n_e, quats, params, settle, uncut)
