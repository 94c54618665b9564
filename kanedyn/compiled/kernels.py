"""The traced kernels: one model's equations of motion recorded on a tape.

:func:`traced` (called by :func:`kanedyn.compiled.compile_model`) runs the tree
recursions of :mod:`kanedyn.dynamics.recursion` (ABA, RNEA, the MSD rates: written once,
on scalars) for one model on a :class:`kanedyn.compiled.tape.Tape` (:class:`Trace`) and
emits a function of the coordinates and speeds. The model's constants (masses,
inertias, joint placements and axes, springs, gravity) are folded into the code, so its
structural zeros cost nothing, and the code has no loop, no dispatch and no NumPy call.
The same function runs

* on floats, for one state (``CompiledModel.forward_dynamics(state)``, and the RK4 loop
  of :func:`kanedyn.simulate`), and
* on NumPy arrays of B states, one element-wise operation per line
  (``CompiledModel.forward_dynamics(States)`` and :func:`kanedyn.simulate_ensemble`).

The equations are Kane's (:mod:`kanedyn.dynamics.recursion`); the dense engine
(:mod:`kanedyn.dynamics.kane`) is their oracle, and the tests hold them together to
round-off on random trees with every joint type. ``Q`` holds the joint springs and
dampers (``-k q - c q̇`` per angle or slide, ``-J_r⁻ᵀ ∇V(φ) - c ω`` for a spherical joint:
:func:`kanedyn.joints.spring_damper`).

**MSD** (``formulation="msd"``, :meth:`Recursion.run_msd
<kanedyn.dynamics.recursion.Recursion.run_msd>`): the speeds from the momentum states by
the same elimination at zero speed, then the momentum rates from the subtree momenta
(docs/theory/compiled.md).

**Scope.** Models with sympy parameters are not compiled: :func:`supports` says why, and :func:`kanedyn.simulate`
then uses the dense engine. Flexible bodies (``Body.modes``) enter the Kane kernel
through :func:`kanedyn.dynamics.flex_recursion.flexible_run`; its inputs ``q``, ``u``
then hold the modal coordinates and speeds after the joints' (``nq + nf``, ``n + nf``),
and its outputs are ``[u̇ | ṡ | ξ̇ | q̇_joints | η̇]`` (for MSD the momentum states
``u = [y | y_ξ]``, outputs ``[ẏ | ẏ_ξ | q̇_joints | η̇ | ν | ξ]``); with closed loops,
through :func:`kanedyn.dynamics.loop_rows.flexible_accelerations` (MSD: the
closure's ``flexible_speeds`` and ``flexible_forces``). External loads enter the Kane kernel as per-body force and
torque inputs in N (:meth:`CompiledModel.rhs_with_loads`); for MSD, whose loads may
depend on the speeds, the speeds come first from :meth:`CompiledModel.rhs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled.tape import TRACE, Scalar, Tape, Value
from kanedyn.dynamics import loop_rows
from kanedyn.dynamics.flex_recursion import flexible_run
from kanedyn.dynamics.loops import flexible_refusal, independent_rows, loop_plan
from kanedyn.dynamics.recursion import Recursion
from kanedyn.model import Model
from kanedyn.model.batch import PARAM_FIELDS
from kanedyn.model.plan import Params, params_of
from kanedyn.spatial.plucker import const

__all__ = [
    "Step",
    "Trace",
    "Traced",
    "body_load_names",
    "parameter_values",
    "projection",
    "rk4_step",
    "settled",
    "supports",
    "traced",
]

Array = NDArray[np.float64]


def supports(model: Model, params: Params | None = None, *, flexible: bool = False) -> str | None:
    """``None`` if ``model`` (with the parameters ``params`` of a batch, if given) can be
    compiled, else the reason it cannot. Flexible bodies (``Body.modes``) are compiled
    into Kane's right-hand side (:func:`~kanedyn.compiled.compile_model`, with
    ``flexible=True``) and run by ``kd.simulate``'s compiled and native run loops and by
    ensembles (:func:`kanedyn.simulation.system.resolve_engine` with ``flexible=True``),
    written by the C export and differentiated by ``CompiledModel.parameter_jacobian``;
    a caller that does not take their states (no ``flexible``) refuses them. With closed
    loops, Kane's equations close the tree on ABA with the modes condensed
    (:func:`kanedyn.dynamics.loop_rows.flexible_accelerations`), and so do the momentum
    states' speeds and loop forces (:class:`kanedyn.dynamics.loop_rows.
    MomentumClosure`); the loops that the loop equations refuse with flexible bodies
    (:func:`kanedyn.dynamics.loops.flexible_refusal`) are refused here too."""
    if model.is_symbolic:
        return "the model has symbolic parameters (use model.subs first)"
    if model.nf and not flexible:
        return (
            "a body is flexible (Body.modes: kd.simulate's run loops, ensembles, the C "
            "export, compile_model and the parameter derivatives take its states)"
        )
    return flexible_refusal(model)


# --------------------------------------------------------------------------- tracing
class Trace(Recursion):
    """The tree recursions of one model (:class:`kanedyn.dynamics.recursion.Recursion`)
    recorded on a tape; inputs q, u (and optionally loads, efforts, parameters)."""

    def __init__(self, model: Model, locked: frozenset[int], loads: bool,
                 params: Params | None = None, efforts: bool = False,
                 symbols: Sequence[Sequence[tuple[str, int]]] = (),
                 body_loads: bool = False):  # fmt: skip
        self.tape = tape = Tape()
        # with flexible bodies, the modal coordinates and speeds follow (q = [q | η],
        # u = [u | s | ξ]: kanedyn.dynamics.flex_recursion)
        q: list[Scalar] = [tape.input(f"q{i}") for i in range(model.nq + model.nf)]
        u: list[Scalar] = [tape.input(f"u{i}") for i in range(model.n + model.nf)]
        self.eta, self.xi = q[model.nq :], u[model.n :]
        q, u = q[: model.nq], u[: model.n]
        nb = model.nb
        load_inputs = None
        if loads:
            T = [[tape.input(f"T{i}_{c}") for c in range(3)] for i in range(nb)]
            F = [[tape.input(f"F{i}_{c}") for c in range(3)] for i in range(nb)]
            Q = [tape.input(f"Q{r}") for r in range(model.n)]
            load_inputs = (T, F, Q)
        # efforts: generalized forces added to the springs and dampers (inputs tau*)
        tau = [tape.input(f"tau{r}") for r in range(model.n)] if efforts else None
        # body loads: torques and forces at the mass centres in body axes, added to the
        # model's (inputs bT*, bF*)
        added = None
        if body_loads:
            flat = [tape.input(name) for name in body_load_names(nb)]
            added = ([flat[3 * i : 3 * i + 3] for i in range(nb)],
                     [flat[3 * (nb + i) : 3 * (nb + i) + 3] for i in range(nb)])  # fmt: skip
        # parameters: constants, except the entries that vary across a batch (inputs)
        nominal = params_of(model)
        self.values, self.param_inputs = parameter_values(params or nominal, nominal)
        self.inputs: dict[tuple[str, int], Scalar] = {
            key: tape.input(f"p{i}") for i, key in enumerate(self.param_inputs)
        }
        # symbols: parameters made inputs d0, d1, ... (to differentiate with respect to),
        # each bound to one or more entries (a symmetric inertia's mirrored pair)
        for i, keys in enumerate(symbols):
            d = tape.input(f"d{i}")
            for key in keys:
                self.inputs[key] = d
        super().__init__(model, q, u, ar=TRACE, locked=locked, params=nominal,
                         loads=load_inputs, tau=tau, body_loads=added)  # fmt: skip

    def rotor_inertia(self, spec: Any) -> tuple[Scalar, Scalar]:
        """A geared rotor's ``(J, J_t)``: the inputs bound to ``("rotor_inertia", k)`` and
        ``("rotor_transverse", k)`` for joint k
        (:func:`kanedyn.compiled.derivatives.rotor_symbols`), else the model's."""
        J = self.inputs.get(("rotor_inertia", spec.k), spec.J)
        return J, self.inputs.get(("rotor_transverse", spec.k), spec.J_t)

    def par(self, field: str, *index: int) -> Any:
        """Parameter ``field[index]`` as nested lists: a float where every member of a
        batch has the same value, a tape input where they differ."""
        value = self.values[field][index]
        if not self.inputs:
            return const(value)
        flat0 = int(np.ravel_multi_index(index + (0,) * (value.ndim), self.values[field].shape))
        flat = np.arange(value.size).reshape(value.shape) + flat0
        table = self.inputs

        def build(v: Any, f: Any) -> Any:
            if np.ndim(v):
                return [build(a, b) for a, b in zip(v, f, strict=True)]
            return table.get((field, int(f)), float(v))

        return build(value, flat)


def parameter_values(
    params: Params, nominal: Params
) -> tuple[dict[str, Array], list[tuple[str, int]]]:
    """Per field, the values of member 0 (or the unbatched values); and the (field, flat
    index) of every entry that differs between members of a batch, in a fixed order.
    ``nominal`` (the model's own, unbatched parameters) gives each field's core shape."""
    values: dict[str, Array] = {}
    varying: list[tuple[str, int]] = []
    for f in PARAM_FIELDS:
        field = f.name
        arr = np.asarray(getattr(params, field), dtype=float)
        core = np.ndim(getattr(nominal, field))
        if arr.ndim > core:
            members = int(np.prod(arr.shape[: arr.ndim - core]))  # -1 fails on empty fields
            flat = arr.reshape((members,) + arr.shape[arr.ndim - core :])
            values[field] = flat[0]
            differs = np.any(flat != flat[0], axis=0).ravel()
            varying += [(field, int(i)) for i in np.flatnonzero(differs)]
        else:
            values[field] = arr
    return values, varying


def body_load_names(nb: int) -> list[str]:
    """The names of the added body-load inputs of :func:`traced` (``body_loads``), in
    order: the torques ``bT<body>_<axis>`` of every body, then the forces ``bF...``."""
    return [f"b{v}{i}_{c}" for v in "TF" for i in range(nb) for c in range(3)]


@attrs.frozen(eq=False)
class Traced:
    """One kernel on its tape: the ``outputs`` (``[ν̇ | q̇]`` for Kane, ``[ẏ | q̇ | ν]``
    for MSD) as functions of the inputs named ``args``, in order: ``q0 ...``, ``u0 ...``,
    with loads ``T*``, ``F*``, ``Q*``, with efforts ``tau*``, with added body loads
    ``bT*``, ``bF*``, then the batch's varying
    parameters ``d0 ...`` to differentiate with respect to, then the batch's varying
    parameters ``p0 ...`` (``param_inputs`` says which)."""

    tape: Tape
    outputs: list[Scalar]
    args: list[str]
    param_inputs: list[tuple[str, int]]
    #: Jacobians computed in vector mode (:class:`kanedyn.compiled.sweep.Sweep`), written
    #: to the outputs after ``outputs`` (:func:`kanedyn.compiled.derivatives.unrolled`
    #: makes them scalar outputs, for the emitters without vector code)
    sweeps: tuple[Any, ...] = ()

    @property
    def n_out(self) -> int:
        """The number of outputs, those of the sweeps included."""
        return max([len(self.outputs), *(s.extent for s in self.sweeps)])

    @property
    def inputs(self) -> list[Value]:
        """The tape's input values, in the order of ``args``."""
        by_name = {a: i for i, (op, a, _) in enumerate(self.tape.nodes) if op == "in"}
        return [Value(self.tape, by_name[name]) for name in self.args]


def traced(model: Model, locked: frozenset[int], loads: bool, msd: bool,
           params: Params | None = None, efforts: bool = False,
           symbols: Sequence[Sequence[tuple[str, int]]] = (),
           body_loads: bool = False, cut: bool = True) -> Traced:  # fmt: skip
    """Trace Kane's equations (ABA: :meth:`Trace.run`), or with ``msd`` the
    momentum-state rates (:meth:`Trace.run_msd`), of ``model`` with the speeds ``locked``
    held at zero; with ``loads`` the per-body loads are inputs, with ``efforts``
    generalized forces added to the joint springs; with ``params`` (a batch's) the
    entries that differ between members are inputs; ``symbols`` (groups of (Params
    field, flat index)) are parameter inputs ``d0, d1, ...`` after the efforts; with
    ``body_loads`` a torque and a force per body (at its mass centre, body axes) are
    inputs ``bT0_0 ... bF0_0 ...`` added to the model's loads, between the efforts and
    ``d0``. With ``cut=False`` a model with loops takes its rows' bias without the cut
    near singular configurations (:func:`kanedyn.dynamics.loop_rows.
    constrained_accelerations`), for the native RK4 loop's stages clear of one."""
    tr = Trace(model, locked, loads, params, efforts, symbols, body_loads)
    outputs = _rates(tr, model, locked, msd, cut)
    args = _args(model, loads, efforts, symbols, tr, body_loads)
    return Traced(tr.tape, outputs, args, tr.param_inputs)


def _rates(tr: Trace, model: Model, locked: frozenset[int], msd: bool,
           cut: bool = True) -> list[Scalar]:  # fmt: skip
    """The outputs of :func:`traced` on ``tr``, at its coordinates and speeds."""
    if msd:
        closure = (
            loop_rows.MomentumClosure(loop_plan(model), *_row_choice(model, locked))
            if model.loops
            else None
        )
        # u = [y | y_ξ] with flexible bodies
        ydot, qd, nu = tr.run_msd(tr.eta, tr.xi, closure=closure)
        outputs = [*ydot, *qd, *nu]
    elif model.loops and model.nf:  # closed by the rows, the modes condensed in ABA
        keep, rank = _row_choice(model, locked)
        nudot, _ = loop_rows.flexible_accelerations(tr, loop_plan(model), keep, tr.eta, tr.xi,
                                                    rank=rank, cut=cut)  # fmt: skip
        outputs = [*nudot, *tr.qdot(), *tr.xi]
    elif model.loops:  # the tree closed by its loops' independent rows
        keep, rank = _row_choice(model, locked)
        nudot, _ = loop_rows.constrained_accelerations(tr, loop_plan(model), keep, rank=rank,
                                                       cut=cut)  # fmt: skip
        outputs = [*nudot, *tr.qdot()]
    elif model.nf:
        nudot, qd = flexible_run(tr, tr.eta, tr.xi)
        outputs = [*nudot, *qd]
    else:
        nudot, qd = tr.run()
        outputs = [*nudot, *qd]
    return outputs


def _row_choice(model: Model, locked: frozenset[int]) -> tuple[tuple[int, ...], int | None]:
    """The loop rows a kernel closes the tree with, and how many of them it chooses at
    every evaluation: the independent rows (:func:`kanedyn.dynamics.loops.
    independent_rows`) and None when every row is independent; else every row and
    their rank (redundant rows, as Bricard's: a row set chosen at assembly can degrade
    along the motion while another is fine, so the kernel's pivoted solve chooses the
    rows again at every evaluation, :func:`kanedyn.spatial.plucker.solve_pivoted`)."""
    keep = independent_rows(model, locked)
    m = loop_plan(model).m
    if len(keep) == m:
        return keep, None
    return tuple(range(m)), len(keep)


def _args(model: Model, loads: bool, efforts: bool,
          symbols: Sequence[Sequence[tuple[str, int]]], tr: Trace,
          body_loads: bool = False) -> list[str]:  # fmt: skip
    """The input names of a traced kernel, in order (:class:`Traced`)."""
    args = [f"q{i}" for i in range(model.nq + model.nf)]
    args += [f"u{i}" for i in range(model.n + model.nf)]
    if loads:
        args += [f"T{i}_{c}" for i in range(model.nb) for c in range(3)]
        args += [f"F{i}_{c}" for i in range(model.nb) for c in range(3)]
        args += [f"Q{r}" for r in range(model.n)]
    if efforts:
        args += [f"tau{r}" for r in range(model.n)]
    if body_loads:
        args += body_load_names(model.nb)
    args += [f"d{i}" for i in range(len(symbols))]
    args += [f"p{i}" for i in range(len(tr.param_inputs))]
    return args


def projection(model: Model, locked: frozenset[int], params: Params | None = None,
               efforts: bool = True,
               symbols: Sequence[Sequence[tuple[str, int]]] = (),
               msd: bool = False) -> Traced:  # fmt: skip
    """The projection of a state of a model with loops onto its constraint manifold
    (:func:`kanedyn.dynamics.loop_rows.projected`: one Newton step on ``Φ(q) = 0``,
    enough after an RK4 step, whose drift is far below the radius of Newton's quadratic
    convergence; then the speeds), traced with the inputs of :func:`traced` (the
    efforts unused; ``symbols`` the parameter inputs ``d0, d1, ...``); outputs the new
    state ``[q | u]``. The native RK4 loop and the C export's ``prefix_step`` apply it
    after every step, as :func:`kanedyn.dynamics.loops.project` follows every dense
    step. With ``msd`` the state is ``[q | y]`` and only ``q`` moves: the speeds of the
    momentum states are closed at any ``q`` (:class:`kanedyn.dynamics.loop_rows.
    MomentumClosure`)."""
    tr = Trace(model, locked, False, params, efforts, symbols)
    y = list(tr.u)
    keep, rank = _row_choice(model, locked)
    q, u = loop_rows.projected(tr, loop_plan(model), keep, newton=1, rank=rank)
    if msd:
        u = y
    # the modal coordinates and speeds ride along (the rows' ξ columns are zero)
    out = [*q, *tr.eta, *u, *tr.xi]
    return Traced(tr.tape, out, _args(model, False, efforts, symbols, tr), tr.param_inputs)


def settled(model: Model, locked: frozenset[int], params: Params | None = None,
            efforts: bool = True, msd: bool = False) -> Traced:  # fmt: skip
    """The end of a native RK4 step of a model with loops: :func:`projection` and the
    next step's first rates at the projected state, in one kernel (inputs those of
    :func:`traced`), so that the rows at the projected coordinates, their Gram matrix
    and its factorization serve the velocity projection and the rates. Outputs
    ``[clear | q' | u' | rates]``: ``clear`` of
    :func:`kanedyn.dynamics.loop_rows.settled` (1.0 where the next step's later stages
    may take :func:`traced` with ``cut=False``, :data:`~kanedyn.dynamics.loop_rows.
    CUT_MARGIN`; with ``msd`` 1.0, there being no bias to cut), the projected state (``q'`` with the modal coordinates, ``u'`` with
    the modal speeds; with ``msd`` the momentum states as they are: they are closed at
    any ``q``), and the outputs of :func:`traced` there. The native RK4 loop
    (:func:`kanedyn.compiled.llvm.module`) calls it after each step."""
    tr = Trace(model, locked, False, params, efforts)
    keep, rank = _row_choice(model, locked)
    clear: Scalar = 1.0
    if msd:  # only q moves (projection); no bias to cut, so no clearance to compute
        q = loop_rows.projected(tr, loop_plan(model), keep, newton=1, rank=rank)[0]
        u = list(tr.u)
    else:
        q, u, clear = loop_rows.settled(tr, loop_plan(model), keep, rank=rank)
    tr.u = list(u)  # the rates at the projected state (tr is at q')
    rates = _rates(tr, model, locked, msd)
    out = [clear, *q, *tr.eta, *u, *tr.xi, *rates]
    return Traced(tr.tape, out, _args(model, False, efforts, (), tr), tr.param_inputs)


@attrs.frozen(eq=False)
class Step:
    """The fixed-step loop's arithmetic on one tape, for the emitters' RK4 loops: the
    stage argument ``stage = x + a k`` (inputs ``x``, ``a``, ``k``), the update
    ``update`` (inputs ``x``, ``h6``, ``k1`` ... ``k4``) of
    :data:`kanedyn.dynamics.steppers.ARRAYS`, and ``normalized`` (4): a quaternion
    ``q0 ... q3`` scaled to unit length (:func:`kanedyn.spatial.charts.quat_normalize`,
    as :func:`kanedyn.joints.normalize_quaternions` does after every step)."""

    tape: Tape
    stage: Scalar
    update: Scalar
    normalized: list[Scalar]


def rk4_step() -> Step:
    """The RK4 step's scalar arithmetic traced once (:class:`Step`): the emitters write
    these operations, so the native and C loops do what ``rk4_step`` does."""
    from kanedyn.dynamics.steppers import ARRAYS  # the step is written once, there
    from kanedyn.spatial.charts import quat_normalize

    tape = Tape()
    x, a, k = tape.input("x"), tape.input("a"), tape.input("k")
    stage = ARRAYS.stage(x, a, k)
    h6 = tape.input("h6")
    ks = [tape.input(f"k{i}") for i in range(1, 5)]
    update = ARRAYS.update(x, h6, *ks)
    q = np.array([tape.input(f"q{i}") for i in range(4)], dtype=object)
    normalized = list(quat_normalize(TRACE, q))
    return Step(tape, stage, update, normalized)
