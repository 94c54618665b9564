"""``kd.linearize``: the state-space linearization of a model about a state, from exact
derivatives.

The state is minimal, one coordinate per speed: ``δx = [δξ | δν]`` (2n), where ``δξ``
holds the angles and slide displacements themselves and, for each spherical joint, the
attitude error ``δθ`` (3, Go components) of ``q = q₀ ⊗ δq(δθ)``, ``δq ≈ [δθ/2, 1]``.
With ``E(q)`` the (4, 3) matrix of the kinematic equation ``q̇ = E(q) ω``
(:func:`kanedyn.joints.qdot`; its columns are orthogonal, of length ½, so
``E⁺ = 4 Eᵀ``), ``δq = E(q₀) δθ`` and ``δθ = E⁺(q₀(t)) (q - q₀(t))``, hence

.. math::

    \\dot{δθ} = E^+ \\left(\\frac{∂\\dot q}{∂q} E\\, δθ + \\frac{∂\\dot q}{∂ω} δω\\right)
               + 4 E(\\dot q_0)^T E(q_0)\\, δθ

(``E`` is linear in ``q``, so ``Ė = E(q̇₀)``); for a torque-free spin this is the
familiar ``δθ̇ = δω - ω₀ × δθ`` (Markley and Crassidis, *Fundamentals of Spacecraft
Attitude Determination and Control*, 2014, §7.2). The rows of ``ν̇`` use the exact
Jacobians ``∂ν̇/∂q``, ``∂ν̇/∂ν``, ``∂ν̇/∂τ`` of
:meth:`kanedyn.CompiledModel.jacobian`:

.. math::

    A = \\begin{bmatrix} P J_{\\dot q q} T + C & P J_{\\dot q ν} \\\\
                         J_{\\dot ν q} T & J_{\\dot ν ν} \\end{bmatrix}, \\qquad
    B = \\begin{bmatrix} 0 \\\\ J_{\\dot ν τ} S \\end{bmatrix}

with ``T = ∂q/∂ξ`` (identity, and ``E(q₀)`` per quaternion), ``P = ∂ξ/∂q`` (identity,
and ``E⁺``), ``C`` the quaternion term above, and ``S`` the columns of the named joints'
efforts. The state need not be an equilibrium (a spinning body is linearized about its
steady spin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled.kernels import supports
from kanedyn.compiled.runtime import compile_model
from kanedyn.dynamics.loops import residuals
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.spatial import charts

__all__ = ["Linearization", "linearize_model"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class Linearization:
    """``δẋ = A δx + B δτ`` about ``state`` (see :func:`linearize`).

    ``A`` (2n, 2n), ``B`` (2n, m); ``eigenvalues`` (2n,) and ``modes`` (2n, 2n, one
    eigenvector per column) of ``A``; ``state_names`` (2n) name the entries of ``δx``
    (``joint.angle0``, ``joint.theta0``, ``joint.d0``, then the speeds ``joint.w0``,
    ``joint.s0``), ``input_names`` (m) the columns of ``B`` (``joint.tau0``, ...).
    For a symbolic problem (:func:`linearize` of a ``KaneProblem``), ``δx = [δq_i | δu_i]``
    is named by its symbols (``q2``, ``u5``), the inputs likewise, and ``state`` is the
    complete operating point, floats by the problem's symbols.
    """

    A: Array
    B: Array
    eigenvalues: NDArray[np.complex128]
    modes: NDArray[np.complex128]
    state_names: tuple[str, ...]
    input_names: tuple[str, ...]
    state: State | Mapping[Any, float]


def _E(q: Array) -> Array:
    """(4, 3): ``q̇ = E(q) ω`` for one quaternion (:func:`kanedyn.spatial.charts.quat_rate`)."""
    return np.column_stack([charts.quat_rate(q, w) for w in np.eye(3)])


def linearize_model(
    model: Model, state: State | Mapping[Any, Any], inputs: Sequence[Any] | None = None
) -> Linearization:
    """Linearize the equations of motion of ``model`` about ``state`` from the exact
    derivatives of the compiled engine's traced equations (Kane's), in the minimal state
    of the module docstring; :func:`kanedyn.linearize` of a :class:`~kanedyn.Model`.
    ``inputs`` are joint names: ``B`` has one column per DOF of each (the generalized
    force of a :class:`kanedyn.JointLoad` on it).

    Raises
    ------
    ModelError
        A bad state, a joint name not in the model, a model the compiled engine
        cannot take (:func:`kanedyn.compiled.supports`).
    """
    if not isinstance(state, State):
        raise ModelError(
            f"linearize: the state of a Model is a kd.State, got {type(state).__name__}"
        )
    if model.nf:
        return _linearize_flexible(model, state, inputs)
    model.check_state(state)
    why = supports(model)
    if why is not None:
        raise ModelError(f"linearize: {why}")
    if model.loops:
        phi, vel = residuals(model, state.q, state.u)
        if max(phi, vel) > 1e-8:
            raise ModelError(
                f"linearize: the state does not close the loops (max |Φ| = {phi:.3g}, "
                f"max |A u| = {vel:.3g}); assemble it first: model.assemble(state, fix=[...])"
            )
    lay = model.layout
    n, nq = model.n, model.nq
    columns: list[int] = []
    input_names: list[str] = []
    for name in inputs or ():
        k = model.joint_index(name)
        for c, r in enumerate(lay.u_index[k]):
            columns.append(int(r))
            input_names.append(f"{name}.tau{c}")
    cm = compile_model(model)
    rates, J = cm.jacobian(state.q, state.u)
    Jn, Jq = J[:n], J[n:]  # rows ν̇, q̇; columns [q | u | τ]
    T = np.zeros((nq, n))  # ∂q/∂ξ
    P = np.zeros((n, nq))  # ∂ξ/∂q
    C = np.zeros((n, n))
    angle_q, angle_u = np.asarray(lay.angle_q, dtype=int), np.asarray(lay.angle_u, dtype=int)
    T[angle_q, angle_u] = 1.0
    P[angle_u, angle_q] = 1.0
    q0 = state.q.copy()
    for qi, ui in zip(lay.quat_q, lay.quat_u, strict=True):
        quat = q0[qi] / np.linalg.norm(q0[qi])
        E = _E(quat)
        T[np.ix_(qi, ui)] = E
        P[np.ix_(ui, qi)] = 4.0 * E.T
        C[np.ix_(ui, ui)] = 4.0 * _E(rates[n + qi]).T @ E
    A = np.block(
        [
            [P @ Jq[:, :nq] @ T + C, P @ Jq[:, nq : nq + n]],
            [Jn[:, :nq] @ T, Jn[:, nq : nq + n]],
        ]
    )
    B = np.vstack((np.zeros((n, len(columns))), Jn[:, nq + n :][:, columns]))
    names = _state_names(model)
    if model.loops:
        A, B, keep = _on_independent(model, state, T, A, B)
        names = [names[i] for i in keep]
    eigenvalues, modes = np.linalg.eig(A)
    return Linearization(
        A=A,
        B=B,
        eigenvalues=eigenvalues,
        modes=modes,
        state_names=tuple(names),
        input_names=tuple(input_names),
        state=state,
    )


def _linearize_flexible(model: Model, state: State, inputs: Sequence[Any] | None) -> Linearization:
    """:func:`linearize_model` of a model with flexible bodies (``Body.modes``): the
    same minimal state with the modal coordinates and speeds appended (``η`` and ``ξ``
    are their own minimal coordinates), the Jacobians exact on the compiled engine's
    tape (:meth:`kanedyn.CompiledModel.jacobian`, the modal terms traced through
    :mod:`kanedyn.dynamics.flex_recursion`); for a model it cannot compile
    (:func:`kanedyn.compiled.supports`), central differences of
    :func:`kanedyn.forward_dynamics` along the columns of ``T`` (relative error about
    1e-9; the inputs' columns are exact, the rates being linear in the efforts)."""
    from kanedyn import joints
    from kanedyn.dynamics.forward import forward_dynamics
    from kanedyn.dynamics.loads import JointLoad

    lay = model.layout
    n, nq, nf = model.n, model.nq, model.nf
    N, NQ = n + nf, nq + nf
    q0, u0 = state.q.copy(), state.u.copy()
    if not (q0.shape == (NQ,) and u0.shape == (N,)):
        raise ModelError(
            f"linearize: state has lengths q {q0.size}, u {u0.size}; this model has "
            f"nq + nf = {NQ}, n + nf = {N}"
        )
    T = np.zeros((NQ, N))
    P = np.zeros((N, NQ))
    C = np.zeros((N, N))
    pairs = [*zip(lay.angle_q, lay.angle_u, strict=True), *((nq + i, n + i) for i in range(nf))]
    for a, b in pairs:
        T[a, b] = P[b, a] = 1.0

    def rates(q: Array, u: Array, loads: Any = None) -> Array:
        qd = np.r_[joints.qdot(lay, q[:nq], u[:n]), u[n:]]
        return np.r_[forward_dynamics(model, State(q, u), loads), qd]

    J = None
    if supports(model, flexible=True) is None:
        f0, J = compile_model(model).jacobian(q0, u0)  # rows [ν̇ | q̇], columns [q | u | τ]
    else:
        f0 = rates(q0, u0)
    for qi, ui in zip(lay.quat_q, lay.quat_u, strict=True):
        q0[qi] = q0[qi] / np.linalg.norm(q0[qi])
        E = _E(q0[qi])
        T[np.ix_(qi, ui)] = E
        P[np.ix_(ui, qi)] = 4.0 * E.T
        C[np.ix_(ui, ui)] = 4.0 * _E(f0[N + qi]).T @ E
    Jx = np.zeros((N + NQ, 2 * N))  # rows [ν̇ | q̇], columns [δξ | δν]
    if J is not None:
        Jx[:, :N] = J[:, :NQ] @ T
        Jx[:, N:] = J[:, NQ : NQ + N]
    for j in range(0 if J is None else 2 * N, 2 * N):
        h = 1e-6 * max(1.0, float(np.abs(u0[j - N]) if j >= N else 0.0))
        dq = h * T[:, j] if j < N else np.zeros(NQ)
        du = np.eye(N)[j - N] * h if j >= N else np.zeros(N)
        Jx[:, j] = (rates(q0 + dq, u0 + du) - rates(q0 - dq, u0 - du)) / (2 * h)
    columns: list[tuple[str, int]] = []
    input_names: list[str] = []
    for name in inputs or ():
        k = model.joint_index(name)
        for c in range(len(lay.u_index[k])):
            columns.append((name, c))
            input_names.append(f"{name}.tau{c}")
    Bn = np.zeros((N, len(columns)))
    for col, (name, c) in enumerate(columns):
        if J is not None:
            Bn[:, col] = J[:N, NQ + N + int(lay.u_index[model.joint_index(name)][c])]
            continue
        values = np.eye(len(lay.u_index[model.joint_index(name)]))[c]
        Bn[:, col] = rates(q0, u0, [JointLoad(name, values)])[:N] - f0[:N]
    A = np.block([[P @ Jx[N:, :N] + C, P @ Jx[N:, N:]], [Jx[:N, :N], Jx[:N, N:]]])
    B = np.vstack((np.zeros((N, len(columns))), Bn))
    eigenvalues, modes = np.linalg.eig(A)
    names = _state_names(model)
    modal = [f"{model.bodies[i].name}.{m}" for i, _ in model.modal_slices()
             for m in model.bodies[i].modes.mode_names]  # type: ignore[union-attr]  # fmt: skip
    rates_names = [f"{s}_dot" for s in modal]
    return Linearization(
        A=A,
        B=B,
        eigenvalues=eigenvalues,
        modes=modes,
        state_names=(*names[:n], *modal, *names[n:], *rates_names),
        input_names=tuple(input_names),
        state=state,
    )


def _velocity_rows(model: Model) -> Any:
    """``f(q, u) -> [A | ∂(A u)/∂q]``: the loops' velocity rows (m × n,
    :func:`kanedyn.dynamics.loop_rows.loop_rows`) and the exact derivative of ``A(q) u``
    along the coordinates (m × nq, forward mode on the tape), as a Python function."""
    from kanedyn.compiled import python
    from kanedyn.compiled.derivatives import jacobian
    from kanedyn.compiled.kernels import Trace
    from kanedyn.dynamics.loop_rows import loop_rows
    from kanedyn.dynamics.loops import loop_plan

    tr = Trace(model, frozenset(), False)
    rows = loop_rows(tr, tr.geometry(), loop_plan(model))
    Au = [sum((a * u for a, u in zip(row, tr.u, strict=True)), 0.0) for row in rows.A]
    wrt = list(tr.q)  # the coordinate inputs
    K = jacobian(tr.tape, Au, wrt)
    outputs = [*(a for row in rows.A for a in row), *(k for row in K for k in row)]
    args = [f"q{i}" for i in range(model.nq)] + [f"u{i}" for i in range(model.n)]
    return python.build(python.source(tr.tape, "rows", args, outputs), "rows",
                        python.SCALAR_NAMESPACE)  # fmt: skip


def _on_independent(model: Model, state: State, T: Array, A: Array,
                    B: Array) -> tuple[Array, Array, list[int]]:  # fmt: skip
    """``A``, ``B`` of the full minimal state ``δx = [δξ | δν]`` restricted to the loops'
    independent coordinates and speeds ``δz = [δξ_i | δν_i]`` (a partition of
    :func:`kanedyn.dynamics.loops.partition` at ``state``), and the kept entries of δx.

    On the constraint manifold ``Φ(ξ) = 0``, ``A(ξ) ν = 0`` (``A = ∂Φ/∂ξ`` in speed
    space): ``δξ = C δξ_i`` with ``C = [I; -A_d⁻¹ A_i]``, and
    ``δν = C δν_i - E K C δξ_i`` with ``K = ∂(A ν)/∂ξ`` and ``E`` placing ``A_d⁻¹`` in
    the dependent rows; so ``δx = W δz`` and ``δż = S A W δz + S B δτ`` with ``S`` the
    rows of ``δz`` (Kane & Levinson 1985, dependent generalized coordinates and speeds
    eliminated to first order)."""
    from kanedyn.dynamics.loops import partition

    n, nq = model.n, model.nq
    fn = derived_rows(model)
    out = np.array(fn(*np.asarray(state.q, float), *np.asarray(state.u, float)), dtype=float)
    m = out.size // (n + nq)
    Arows, Kq = out[: m * n].reshape(m, n), out[m * n :].reshape(m, nq)
    K = Kq @ T  # along the minimal coordinates
    part = partition(Arows)
    ind, dep = part.independent, part.dependent
    Ar, Kr = Arows[part.rows], K[part.rows]
    C = np.zeros((n, ind.size))
    C[ind, np.arange(ind.size)] = 1.0
    E = np.zeros((n, part.rank))
    if part.rank:
        C[dep] = -np.linalg.solve(Ar[:, dep], Ar[:, ind])
        E[dep] = np.linalg.inv(Ar[:, dep])
    W = np.block([[C, np.zeros_like(C)], [-E @ Kr @ C, C]])
    keep = [*ind.tolist(), *(n + ind).tolist()]
    return A[keep] @ W, B[keep], keep


def derived_rows(model: Model) -> Any:
    """The (cached) :func:`_velocity_rows` of ``model``."""
    from kanedyn.model.plan import derived

    return derived(model, "linearize_loop_rows", _velocity_rows)


def _state_names(model: Model) -> list[str]:
    """Names of the minimal coordinates (one per speed), then of the speeds."""
    coords, speeds = [""] * model.n, [""] * model.n
    for k, j in enumerate(model.joints):
        rot = "theta" if j.rot_type == "spherical" else "angle"
        for pos, r in enumerate(model.layout.u_index[k]):
            rotational = pos < j.rot_dof
            i = pos if rotational else pos - j.rot_dof
            coords[r] = f"{j.name}.{rot}{i}" if rotational else f"{j.name}.d{i}"
            speeds[r] = f"{j.name}.w{i}" if rotational else f"{j.name}.s{i}"
    return coords + speeds
