"""Exact derivatives of a traced kernel: forward-mode differentiation on the tape.

:func:`jacobian` walks the operations a kernel's outputs need, in order, and records on
the same :class:`~kanedyn.compiled.tape.Tape` the tangent of each value with respect to
chosen inputs, by the rules of differentiation (:meth:`Tape.partials
<kanedyn.compiled.tape.Tape.partials>`, after Griewank and Walther, *Evaluating
Derivatives*, 2nd ed., 2008, Table 3.3).

Tangents are sparse (a value's tangent holds only the directions it depends on), and the
tape folds the structural zeros and shares common subexpressions, so the derivative
code has no multiplication by a known zero. The result is a list of traced values like
any kernel output, emitted to Python, LLVM IR or C by the same emitters.

:func:`derivative_kernel` traces Kane's equations with generalized-effort inputs
(:func:`kanedyn.compiled.kernels.traced`) and appends the Jacobian of ``[ν̇ | q̇]``
with respect to ``[q | u | τ]``: the ``∂ν̇/∂q``, ``∂ν̇/∂u``, ``∂ν̇/∂τ`` of
:func:`kanedyn.linearize`. :func:`residual_kernel` gives the same Jacobian in fewer
operations for larger models, through the Newton-Euler residual and ``M⁻¹``
(Carpentier and Mansard, RSS 2018), its large Jacobians as vector-mode sweeps
(:mod:`kanedyn.compiled.sweep`) that :func:`unrolled` makes scalar for the emitters
without vector code. :func:`parameter_kernel` differentiates with respect
to the model's physical parameters (:func:`parameter_symbols`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kanedyn.compiled.kernels import Trace, Traced, body_load_names, traced
from kanedyn.compiled.sweep import Sweep
from kanedyn.compiled.tape import Scalar, Tape, Value
from kanedyn.model import Model
from kanedyn.model.plan import (
    ModalSlot,
    Params,
    modal_slots,
    node_joints,
    outer_node_joints,
)

__all__ = [
    "central_symbols",
    "derivative_kernel",
    "jacobian",
    "modal_symbols",
    "parameter_kernel",
    "parameter_symbols",
    "residual_kernel",
    "rotor_symbols",
    "unrolled",
]

Tangent = dict[int, Scalar]  # direction -> derivative


def _axpy(t: Tangent, s: Scalar, u: Tangent) -> Tangent:
    """``t + s u`` (new dict)."""
    out = dict(t)
    for j, d in u.items():
        term = s * d
        out[j] = out[j] + term if j in out else term
    return out


def jacobian(tape: Tape, outputs: Sequence[Scalar], wrt: Sequence[Value],
             fixed: Sequence[Scalar] = ()) -> list[list[Scalar]]:  # fmt: skip
    """``d outputs[i] / d wrt[j]`` as traced values (or floats), recorded on ``tape``;
    the values ``fixed`` are held constant (their tangents are zero)."""
    seeds = {v.index: j for j, v in enumerate(wrt)}
    tangent: dict[int, Tangent] = {}
    stop = {x.index for x in fixed if isinstance(x, Value)}

    for i in tape.needed(outputs, stop):
        if i in stop:
            tangent[i] = {}
            continue
        if tape.nodes[i][0] == "in":
            tangent[i] = {seeds[i]: 1.0} if i in seeds else {}
            continue
        t: Tangent = {}
        for k, coef in tape.partials(i):
            t = _axpy(t, coef, tangent[k])
        tangent[i] = {j: d for j, d in t.items() if isinstance(d, Value) or d != 0.0}
    out = []
    for x in outputs:
        row: list[Scalar] = [0.0] * len(wrt)
        if isinstance(x, Value):
            for j, d in tangent[x.index].items():
                row[j] = d
        out.append(row)
    return out


def derivative_kernel(model: Model, locked: frozenset[int] = frozenset(),
                      params: Params | None = None,
                      symbols: Sequence[Sequence[tuple[str, int]]] = (),
                      body_loads: bool = False) -> tuple[Traced, int]:  # fmt: skip
    """Kane's equations with effort inputs, their outputs ``[ν̇ | q̇]`` (n + nq) followed
    by the Jacobian ``∂[ν̇ | q̇] / ∂[q | u | τ]`` row by row ((n + nq) × (nq + 2n)); the
    parameters ``symbols`` (of :func:`parameter_symbols`) are inputs ``d0, d1, ...``
    after the efforts, held fixed (with ``body_loads``, the added body loads of
    :func:`kanedyn.compiled.kernels.traced` are inputs too, also held fixed). Returns
    the traced kernel and the number of value outputs (n + nq). With flexible bodies, ``q`` and ``u`` hold the modal coordinates
    and speeds too (``nq + nf``, ``n + nf``; the efforts stay the joints' ``n``)."""
    tr = traced(model, locked, False, False, params, efforts=True, symbols=symbols,
                body_loads=body_loads)  # fmt: skip
    nx = model.nq + 2 * model.n + 2 * model.nf  # q, u (modal ones included), tau
    wrt = tr.inputs[:nx]
    J = jacobian(tr.tape, tr.outputs, wrt)
    outputs = [*tr.outputs, *(d for row in J for d in row)]
    return Traced(tr.tape, outputs, tr.args, tr.param_inputs), len(tr.outputs)


def residual_kernel(model: Model, locked: frozenset[int] = frozenset(),
                    symbols: Sequence[Sequence[tuple[str, int]]] = (),
                    body_loads: bool = False) -> Traced:  # fmt: skip
    """Kane's equations with effort inputs and what their exact Jacobian is made of,
    by the route of Carpentier and Mansard (RSS 2018): with ``R(q, u, ν̇) = S_kᵀ f_k -
    Q`` the residual of the equations by recursive Newton-Euler
    (:meth:`kanedyn.compiled.kernels.Trace.inverse_dynamics`), zero at the ``ν̇`` of
    the ABA, ``∂ν̇/∂[q | u] = -M⁻¹ ∂R/∂[q | u]`` at fixed ``ν̇`` and ``∂ν̇/∂τ = M⁻¹``.

    Outputs, row by row: ``[ν̇ | q̇]`` (n + nq); ``∂q̇/∂[q | u]`` (nq × (nq + n)); then,
    as vector-mode Jacobians (:attr:`Traced.sweeps`), ``M⁻¹ = ∂ν̇/∂τ`` (n × n, on the
    ABA's effort inputs) and ``-∂R/∂[q | u]`` (n × (nq + n), at fixed ``ν̇``). The
    Jacobian of :func:`derivative_kernel` is ``[M⁻¹ (-∂R/∂[q | u]) | M⁻¹]`` over
    ``[∂q̇/∂[q | u] | 0]`` (the product is left to the caller,
    :meth:`kanedyn.CompiledModel.jacobian`).

    The tangents of ``R`` with respect to one joint's coordinate or speed reach only
    that joint's subtree in the outward pass and its ancestors in the inward one, and
    carry 6-vectors where those of the ABA carry articulated inertias: about a third of
    the operations of :func:`derivative_kernel` on long chains, half on Explorer-1.

    The parameters ``symbols`` (of :func:`parameter_symbols`) are inputs ``d0, d1,
    ...`` after the efforts, held fixed (as in :func:`derivative_kernel`); with
    ``body_loads``, the added body loads of :func:`kanedyn.compiled.kernels.traced`
    are inputs before them, held fixed too."""
    tr = Trace(model, locked, False, None, efforts=True, symbols=symbols, body_loads=body_loads)
    geo, c, p, a_N = tr.terms()
    Q = tr.generalized_forces()
    nudot = tr.aba(geo, c, p, Q, a_N)
    qd = tr.qdot()
    R = tr.inverse_dynamics(geo, c, p, Q, a_N, nudot)
    by_name = {a: i for i, (op, a, _) in enumerate(tr.tape.nodes) if op == "in"}
    nq, n = model.nq, model.n
    args = [f"q{i}" for i in range(nq)] + [f"u{i}" for i in range(n)]
    args += [f"tau{r}" for r in range(n)]
    inputs = [Value(tr.tape, by_name[a]) for a in args]
    if body_loads:
        args += body_load_names(model.nb)
    args += [f"d{i}" for i in range(len(symbols))]
    q, u, tau = inputs[:nq], inputs[nq : nq + n], inputs[nq + n :]
    dqd = jacobian(tr.tape, qd, q + u)
    outputs: list[Scalar] = [*nudot, *qd, *(d for row in dqd for d in row)]
    at = len(outputs)
    ld = nq + n
    minus_R = tuple(-r for r in R)
    sweeps = (
        Sweep(tuple(nudot), tuple(tau), (), at, n),
        Sweep(minus_R, tuple(q), tuple(nudot), at + n * n, ld),
        Sweep(minus_R, tuple(u), tuple(nudot), at + n * n + nq, ld),
    )
    return Traced(tr.tape, outputs, args, tr.param_inputs, sweeps)


def unrolled(tr: Traced) -> Traced:
    """``tr`` with its vector-mode Jacobians (:attr:`Traced.sweeps`) made scalar outputs
    by :func:`jacobian`, in the same places: for the emitters that write straight-line
    code only (Python, C)."""
    if not tr.sweeps:
        return tr
    out: list[Scalar] = [*tr.outputs, *[0.0] * (tr.n_out - len(tr.outputs))]
    for sweep in tr.sweeps:
        rows = jacobian(tr.tape, sweep.outputs, sweep.wrt, sweep.fixed)
        for r, row in enumerate(rows):
            start = sweep.offset + r * sweep.ld
            out[start : start + len(row)] = row
    return Traced(tr.tape, out, tr.args, tr.param_inputs)


_AXES = "xyz"


def rotor_symbols(model: Model) -> list[tuple[str, list[tuple[str, int]]]]:
    """The geared rotors' moments (:class:`kanedyn.Rotor`), in the form of
    :func:`parameter_symbols`: per joint k with a rotor, ``joint.rotor.inertia`` (the
    axial moment J) bound to ``("rotor_inertia", k)`` and, unless the rotor is
    ``reflected_only`` (whose ``n² J`` alone enters), ``joint.rotor.transverse`` (J_t)
    bound to ``("rotor_transverse", k)``. They are not fields of
    :class:`~kanedyn.model.plan.Params`: the traced recursion reads them through
    :meth:`kanedyn.compiled.kernels.Trace.rotor_inertia`."""
    out: list[tuple[str, list[tuple[str, int]]]] = []
    for k, joint in enumerate(model.joints):
        if joint.rotor is None:
            continue
        out.append((f"{joint.name}.rotor.inertia", [("rotor_inertia", k)]))
        if not joint.rotor.reflected_only:
            out.append((f"{joint.name}.rotor.transverse", [("rotor_transverse", k)]))
    return out


def parameter_symbols(model: Model) -> list[tuple[str, list[tuple[str, int]]]]:
    """The model's parameters that :func:`parameter_kernel` differentiates with respect
    to: ``(name, [(Params field, flat index), ...])`` each, in the order

    * per body (``model.bodies``): ``body.mass``; ``body.inertia.xx``, ``.yy``, ``.zz``,
      ``.xy``, ``.xz``, ``.yz`` (about the mass centre in body axes; an off-diagonal
      entry moves both mirrored entries of the tensor); ``body.com.x`` ... and
      ``body.embedded_momentum.x`` ... (body axes);
    * per joint (``model.joints``): ``joint.inner_point.x`` ... and
      ``joint.outer_point.x`` ... (in the inner and outer body's axes); ``joint.stiffness0``
      ... and ``joint.damping0`` ... per speed of the joint (none for the speeds of a
      spherical joint's rotation, whose spring the compiled engine does not take);
    * ``gravity.x``, ``gravity.y``, ``gravity.z`` (N);
    * per flexible body, its modal data (:func:`modal_symbols`).

    The names of the rigid parameters are those of the keywords of
    :meth:`kanedyn.ModelBatch.dispersed`.
    """
    lay = model.layout
    out: list[tuple[str, list[tuple[str, int]]]] = []
    for i, body in enumerate(model.bodies):
        out.append((f"{body.name}.mass", [("mass", i)]))
        for a, b in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)):
            keys = sorted({("inertia", 9 * i + 3 * a + b), ("inertia", 9 * i + 3 * b + a)})
            out.append((f"{body.name}.inertia.{_AXES[a]}{_AXES[b]}", keys))
        for field, label in (("com", "com"), ("h_embedded", "embedded_momentum")):
            for c in range(3):
                out.append((f"{body.name}.{label}.{_AXES[c]}", [(field, 3 * i + c)]))
    spherical = {int(r) for r in np.ravel(lay.quat_u)}
    for k, joint in enumerate(model.joints):
        for field in ("inner_point", "outer_point"):
            for c in range(3):
                out.append((f"{joint.name}.{field}.{_AXES[c]}", [(field, 3 * k + c)]))
        for field in ("stiffness", "damping"):
            for c, r in enumerate(lay.u_index[k]):
                if not (field == "stiffness" and int(r) in spherical):
                    out.append((f"{joint.name}.{field}{c}", [(field, int(r))]))
    out += [(f"gravity.{_AXES[c]}", [("gravity", c)]) for c in range(3)]
    return out + modal_symbols(model)


def modal_symbols(model: Model) -> list[tuple[str, list[tuple[str, int]]]]:
    """The flexible bodies' modal data (:class:`kanedyn.Modes`, held by
    :class:`~kanedyn.model.plan.Params`: :func:`kanedyn.model.plan.modal_slots`), in the
    form of :func:`parameter_symbols`, per flexible body in body order, with ``a``,
    ``b`` the modes' names (``Modes.mode_names``), ``i``, ``j`` the body axes and ``a ≤ b``
    where the data are symmetric (one name moves both mirrored entries):

    * ``body.modal_mass.a.b``, ``body.modal_stiffness.a.b``, ``body.modal_damping.a.b``;
    * ``body.modal_P.i.a`` (``∫Ψ dm``) and ``body.modal_H.i.a`` (``∫r×Ψ dm``);
    * when given (not all zero): ``body.modal_L.i.j.a`` (``L_ija``) and
      ``body.modal_N.i.j.a.b`` (``N_ijab``, with ``N_jiba``; every ``a``, ``b`` when
      ``i ≠ j``, else ``a ≤ b``);
    * for a stiffened body (``Modes.geometric``): ``body.geometric.k.a.b`` (row ``k`` of
      :data:`kanedyn.model.modes.GEOMETRIC_LOADS`, 0-based);
    * per node that a joint attaches at (``Joint.inner_node``, ``outer_node``):
      ``body.node_positions.node.i``, ``body.Psi.node.i.a`` and ``body.Theta.node.i.a``
      (the other nodes' data do not enter the equations of motion).
    """
    used = {(i, n) for _, i, n in node_joints(model)} | set(outer_node_joints(model))
    out: list[tuple[str, list[tuple[str, int]]]] = []
    for slot in modal_slots(model):
        md: Any = model.bodies[slot.body].modes
        name, modes, n = model.bodies[slot.body].name, md.mode_names, slot.n

        def add(label: str, field: str, *index: tuple[int, ...], slot: ModalSlot = slot,
                name: str = name) -> None:  # fmt: skip
            shape, at = slot.shape[field], slot.offset[field]
            keys = sorted({(field, at + int(np.ravel_multi_index(ix, shape))) for ix in index})
            out.append((f"{name}.{label}", keys))

        for field in ("modal_mass", "modal_stiffness", "modal_damping"):
            for a in range(n):
                for b in range(a, n):
                    add(f"{field}.{modes[a]}.{modes[b]}", field, (a, b), (b, a))
        for field in ("modal_P", "modal_H"):
            for i in range(3):
                for a in range(n):
                    add(f"{field}.{_AXES[i]}.{modes[a]}", field, (i, a))
        if np.any(md.L):
            for i in range(3):
                for j in range(3):
                    for a in range(n):
                        add(f"modal_L.{_AXES[i]}.{_AXES[j]}.{modes[a]}", "modal_L", (i, j, a))
        if np.any(md.N):
            for i in range(3):
                for j in range(i, 3):
                    for a in range(n):
                        for b in range(a, n) if i == j else range(n):
                            add(f"modal_N.{_AXES[i]}.{_AXES[j]}.{modes[a]}.{modes[b]}",
                                "modal_N", (i, j, a, b), (j, i, b, a))  # fmt: skip
        if slot.geometric:
            for k in range(12):
                for a in range(n):
                    for b in range(a, n):
                        add(f"geometric.{k}.{modes[a]}.{modes[b]}", "modal_geometric",
                            (k, a, b), (k, b, a))  # fmt: skip
        for node in range(slot.nodes):
            if (slot.body, node) not in used:
                continue
            label = md.node_names[node]
            for i in range(3):
                add(f"node_positions.{label}.{_AXES[i]}", "node_positions", (node, i))
            for field, what in (("node_Psi", "Psi"), ("node_Theta", "Theta")):
                for i in range(3):
                    for a in range(n):
                        add(f"{what}.{label}.{_AXES[i]}.{modes[a]}", field, (node, i, a))
    return out


def central_symbols(model: Model) -> list[tuple[str, list[tuple[str, int]]]]:
    """A central field's parameters (:class:`kanedyn.CentralGravity`), in the form of
    :func:`parameter_symbols`: ``gravity.mu``, ``gravity.J2``, ``gravity.radius``,
    ``gravity.center.x`` ... (N); none when gravity is uniform."""
    if model.central_gravity is None:
        return []
    out: list[tuple[str, list[tuple[str, int]]]] = [
        (f"gravity.{field}", [(field, 0)]) for field in ("mu", "J2", "radius")
    ]
    return out + [(f"gravity.center.{_AXES[c]}", [("center", c)]) for c in range(3)]


def parameter_kernel(model: Model, locked: frozenset[int],
                     names: Sequence[str]) -> tuple[Traced, int]:  # fmt: skip
    """Kane's equations with effort inputs and the parameters ``names`` (of
    :func:`parameter_symbols`) as inputs ``d0, d1, ...``: outputs ``[ν̇ | q̇]``
    (n + nq) followed by ``∂ν̇/∂p`` row by row (n × len(names)). Returns the traced
    kernel and the number of value outputs. With flexible bodies ``ν̇ = [u̇ | ṡ | ξ̇]``
    and ``q̇ = [q̇_joints | η̇]`` (n + nf, nq + nf), the modal data among the
    parameters (:func:`modal_symbols`)."""
    table = dict(parameter_symbols(model))
    tr = traced(model, locked, False, False, None, efforts=True,
                symbols=[table[name] for name in names])  # fmt: skip
    start = model.nq + 2 * model.n + 2 * model.nf  # after q, u (modal ones included), tau
    wrt = tr.inputs[start : start + len(names)]
    J = jacobian(tr.tape, tr.outputs[: model.n + model.nf], wrt)
    outputs = [*tr.outputs, *(d for row in J for d in row)]
    return Traced(tr.tape, outputs, tr.args, tr.param_inputs), len(tr.outputs)
