"""The runtime wrapper: :func:`compile_model` and the :class:`CompiledModel` it returns.

:func:`compile_model` traces a model's kernels once (:func:`kanedyn.compiled.kernels.traced`),
emits them as Python (:mod:`kanedyn.compiled.python`), and caches the result per model
(or batch), lock set and formulation. The :class:`CompiledModel` evaluates them for
one state (floats) or a batch (NumPy arrays), checking its inputs once per call.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled import python
from kanedyn.compiled.kernels import supports, traced
from kanedyn.dynamics.loads import AppliedLoads
from kanedyn.errors import SINGULAR_MASS_MATRIX, ModelError
from kanedyn.model import Model
from kanedyn.model.batch import ModelBatch, States
from kanedyn.model.plan import Params

__all__ = ["CompiledModel", "check_finite", "compile_model"]

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
    formulation: str  # a kanedyn.simulation.options.Formulation
    batch: ModelBatch | None  # the batch whose varying parameters are inputs
    _code: _Code

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
    def _scalar(self) -> Callable[..., list]:
        return self._code.scalar

    @property
    def _array(self) -> Callable[..., list]:
        return self._code.array

    def parameter_arrays(self) -> list[Array]:
        """The values of the inputs ``p0, p1, ...`` per member, each (B,)."""
        return list(self._code.param_values)

    def forward_dynamics(self, state: Any) -> Array:
        """``d/dt [u | s]`` at a :class:`~kanedyn.State` (n,) or :class:`~kanedyn.States`
        (B, n); the same numbers as :func:`kanedyn.forward_dynamics` to round-off."""
        from kanedyn.simulation.options import Formulation

        if self.formulation is not Formulation.KANE:
            raise ModelError("forward_dynamics needs the Kane formulation's compiled model")
        model = self.model
        n = model.n
        if isinstance(state, States) or self.batch is not None:
            if isinstance(state, States):
                q, u = np.asarray(state.q, dtype=float), np.asarray(state.u, dtype=float)
                _check_batch(model, q, u)
            else:
                model.check_state(state)
                q, u = state.q[None, :], state.u[None, :]
            p = self.parameter_arrays()
            B = q.shape[0] if not p else p[0].shape[0]
            if p and q.shape[0] not in (1, B):
                raise ModelError(f"States: {q.shape[0]} states for a batch of {B} parameter sets")
            B = max(B, q.shape[0])
            with np.errstate(all="ignore"):
                out = self._array(*q.T, *u.T, *p)
            acc = np.empty((B, n))
            for r in range(n):
                acc[:, r] = out[r]
            check_finite(acc)
            return acc
        model.check_state(state)
        acc = np.array(_evaluate(self._scalar, *state.q.tolist(), *state.u.tolist())[:n])
        check_finite(acc)
        return acc

    def rhs(self, q: Sequence[float], u: Sequence[float]) -> list[float]:
        """``[ν̇ | q̇]`` as a list of floats at ``q``, ``u`` (the inner loop: no checks but
        a zero pivot, which raises the ModelError of a singular mass matrix); for a
        batch, member b's parameters are the arrays of :meth:`parameter_arrays`,
        appended as the last arguments of ``_array``."""
        if self.batch is not None:
            raise ModelError("rhs: a ModelBatch's compiled model is evaluated on States")
        return _evaluate(self._scalar, *q, *u)

    def rhs_with_loads(self, q: Sequence[float], u: Sequence[float],
                       loads: AppliedLoads) -> list[float]:  # fmt: skip
        """As :meth:`rhs`, with every load given by ``loads`` (from
        :func:`kanedyn.dynamics.loads.applied_loads`: gravity, springs and dampers included):
        torques ``T`` and forces ``F`` (nb, 3) at the mass centres in N, joint efforts
        ``Q`` (n,). For the MSD formulation, ``u`` are the momentum states and the
        loads must be those at the speeds they give (the last n outputs of :meth:`rhs`)."""
        if self.batch is not None:
            raise ModelError("rhs_with_loads: a ModelBatch's compiled model takes no loads")
        return _evaluate(self._code.scalar_loads, *q, *u, *loads.T.ravel().tolist(),
                         *loads.F.ravel().tolist(), *loads.Q.tolist())  # fmt: skip


def _check_batch(model: Model, q: Array, u: Array) -> None:
    if q.ndim != 2 or q.shape[1] != model.nq or u.shape != (q.shape[0], model.n):
        raise ModelError(
            f"States: expected q (B, {model.nq}) and u (B, {model.n}), got {q.shape} and {u.shape}"
        )


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


@attrs.frozen(eq=False)
class _Code:
    """The generated code of one model (or batch), lock set and formulation: its source,
    the functions built from it, and the batch's values of its parameter inputs. Nothing
    here refers to the model, so the cache that holds it does not keep the model alive."""

    source: str
    n_ops: int
    source_loads: str
    param_inputs: tuple[tuple[str, int], ...]  # (Params field, flat index) of inputs p0, p1...
    param_values: tuple[Array, ...]  # per input, its value for each member, (B,)
    scalar: Callable[..., list]
    array: Callable[..., list]
    scalar_loads: Callable[..., list]

    @classmethod
    def generate(cls, model: Model, locked: frozenset[int], msd: bool,
                 params: Params | None) -> _Code:  # fmt: skip
        """The code of Kane's equations, or with ``msd`` of the momentum-state rates."""
        source, n_ops, inputs = _generate(model, locked, False, msd, params)
        source_loads = _generate(model, locked, True, msd, params)[0]
        values = []
        if params is not None:
            B = params.batch_shape[0] if params.batch_shape else 1
            for field, i in inputs:
                arr = np.asarray(getattr(params, field), dtype=float)
                values.append(np.ascontiguousarray(arr.reshape(B, -1)[:, i]))
        return cls(
            source=source,
            n_ops=n_ops,
            source_loads=source_loads,
            param_inputs=tuple(inputs),
            param_values=tuple(values),
            scalar=python.build(source, "rhs", python.SCALAR_NAMESPACE),
            array=python.build(source, "rhs", python.ARRAY_NAMESPACE),
            scalar_loads=python.build(source_loads, "rhs", python.SCALAR_NAMESPACE),
        )


def _generate(model: Model, locked: frozenset[int], loads: bool, msd: bool,
              params: Params | None = None) -> tuple[str, int, list]:  # fmt: skip
    tr = traced(model, locked, loads, msd, params)
    source = tr.tape.source("rhs", tr.args, tr.outputs)
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
    model: Model | ModelBatch, locked: Sequence[int] = (), formulation: str = "kane"
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
    formulation : {"kane", "msd"} or kanedyn.simulation.options.Formulation
        Kane's equations (``ν̇`` from the speeds), or the momentum-state rates
        (``ẏ`` and the speeds from the momentum states).

    Raises
    ------
    ModelError
        When the model cannot be compiled (:func:`supports` gives the reason), or for an
        unknown formulation.

    Notes
    -----
    The generated code is cached for the lifetime of the model; while a CompiledModel
    is held, the same one is returned for the same arguments.
    """
    from kanedyn.dynamics.msd import momentum_roots
    from kanedyn.simulation.options import Formulation

    form = Formulation.parse(formulation)
    batch = model if isinstance(model, ModelBatch) else None
    base: Model = model.model if isinstance(model, ModelBatch) else model
    why = supports(base, None if batch is None else batch.params)
    if why is not None:
        raise ModelError(f"cannot compile this model: {why}")
    lock_set = frozenset(int(r) for r in locked)
    if form is Formulation.MSD:
        for k in momentum_roots(base):
            if lock_set & {int(r) for r in base.layout.u_index[k]}:
                raise ModelError(
                    f"joint {base.joints[k].name!r}: the DOFs of a free root cannot be "
                    "locked (its MSD states are total momenta)"
                )
    per_model = _CACHE.setdefault(batch if batch is not None else base, {})
    key = (lock_set, form)
    entry = per_model.get(key)
    if entry is None:
        params = None if batch is None else batch.params
        msd = form is Formulation.MSD
        entry = per_model[key] = _Cached(_Code.generate(base, lock_set, msd, params))
    cm = None if entry.compiled is None else entry.compiled()
    if cm is None:
        cm = CompiledModel(base, lock_set, form, batch, entry.code)
        entry.compiled = weakref.ref(cm)
    return cm
