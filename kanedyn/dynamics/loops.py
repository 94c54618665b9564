"""Closed kinematic loops: constraints, Kane's equations with dependent speeds, loop forces.

A model with loops (:class:`kanedyn.Loop`) is its spanning tree (the joints; their
coordinates ``q`` and speeds ``u = [u | s]`` are the states) plus, per loop joint, the
configuration constraints of its constrained directions
(:func:`kanedyn.joints.loop_constraint_axes`)

.. math::

    \\Phi(q) = 0, \\qquad A(q)\\,u = 0, \\qquad A(q)\\,\\dot u + b(q, u) = 0

all from the tree's kinematics and the joint model (:func:`kanedyn.joints.loop_rotation`,
:func:`kanedyn.joints.loop_translation`): the velocity rows use the partial angular
velocities of the loop's two bodies and the partial velocities of its two joint points,
the bias ``b`` their remainder accelerations α_r, a_r (Kane_NBody slides 18-22).

**Dependent speeds** (Kane & Levinson, *Dynamics: Theory and Applications*, 1985:
holonomic constraints and dependent generalized speeds): a column-pivoted QR of the rows
of A finds its rank r and r independent rows, a second pivoted QR of those rows r
dependent speeds ``u_d`` (a well-conditioned square block ``A_d``); the others are the
independent speeds ``u_i``:

.. math::

    u = C u_i, \\quad C = \\begin{bmatrix} I \\\\ -A_d^{-1} A_i \\end{bmatrix}, \\qquad
    \\dot u = C \\dot u_i + c_0, \\quad c_0 = \\begin{bmatrix} 0 \\\\ -A_d^{-1} b \\end{bmatrix}

and Kane's equations of the constrained system are ``Cᵀ(Fr + Fr*) = 0``:

.. math:: (C^T M C)\\, \\dot u_i = C^T (f - M c_0)

with ``M``, ``f`` the tree's mass matrix and forcing (:mod:`kanedyn.dynamics.kane`).
Redundant rows (rank r < number of rows, as in the Bricard mechanism or a planar linkage
closed by spatial hinges) are dropped by the first QR: the acceleration solves the
kept rows exactly and the others in the least-squares sense (they are consistent on the
constraint manifold). The multipliers ``λ`` of ``M u̇ = f + Aᵀλ`` are the loop forces
(:func:`loop_forces`); with redundant rows they are the minimum-norm set.

**Near a singular configuration** (a linkage that can branch, such as the N-four-bar
with its rods horizontal) the smallest singular value σ of A falls with the distance
from it, and the parts of ``b`` and of ``A u`` along its direction are round-off of the
closure divided by σ (a state closed to ε lies ε/σ off the branch, where the admissible
velocities are turned by about ε/σ²). ``c0`` and the velocity projection
(:func:`project`) therefore leave out the directions of singular values below
:data:`SINGULAR_RCOND` of the largest: without that, the steps of a fixed-step run that
end close to the singular configuration jumped (docs/theory/closed-loops.md, "Near a
singular configuration").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.dynamics import flex, loop_rows
from kanedyn.dynamics.kane import (
    KaneTerms,
    flexible_mass_matrix_at,
    flexible_system_at,
    forcing_at,
    kane_terms,
    mass_matrix_at,
    solve_mass_matrix,
)
from kanedyn.dynamics.kinematics import Kinematics, cross, kinematics_at, mv, rest_kinematics
from kanedyn.dynamics.loads import AppliedLoads, LoadsLike, applied_loads
from kanedyn.dynamics.loop_rows import RowFrames
from kanedyn.dynamics.partials import bias_accelerations, joint_subspace
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import derived, node_joint_names, params_of, plan_of
from kanedyn.spatial.arithmetic import NUMPY as _NUMPY

__all__ = [
    "LoopEquations",
    "LoopForces",
    "LoopTerms",
    "Partition",
    "assemble",
    "close",
    "constrained_accelerations",
    "equations_at",
    "flexible_refusal",
    "independent_rows",
    "loop_equations",
    "loop_forces",
    "loop_summary",
    "lock_rows",
    "loop_terms",
    "partition",
    "plastic_impact",
    "project",
    "row_partition",
    "stacked_rows",
]

Array = NDArray[np.float64]
Index = NDArray[np.intp]

RANK_TOL = 1e-9
"""Relative tolerance of the rank decision (pivots of the QR below it are zero)."""
SINGULAR_RCOND = loop_rows.SINGULAR_RCOND
"""Relative cut-off of the singular values of A below which the bias and the velocity
projection leave a direction alone (near a singular configuration, see
:func:`project` and the module docstring; :data:`kanedyn.dynamics.loop_rows.SINGULAR_RCOND`,
which the compiled kernels apply to the pivots of their own factorization)."""
REPARTITION_COND = 1e6
"""A partition is chosen again when the condition number of its block ``A_d`` exceeds this."""


# --------------------------------------------------------------------------- plan
@attrs.frozen(eq=False)
class LoopPlan:
    """The constraint rows of a model's loops, built once per model.

    Per row c (loops in the model's order; in each loop the rotational rows first):
    ``loop`` (m,) its loop index; ``rot`` (m,) bool, a rotational row; ``bi``, ``bo``
    (m,) the inner and outer body (``nb`` for N); ``x_B`` (m, 3) the Go axis of a
    rotational row in Bo axes; ``y_B`` (m, 3) the Gi axis (the constrained axis ``d``
    of a translational row) in Bi axes; ``pi_B``, ``po_B`` (m, 3) the Gi and Go origins
    in their bodies' axes. ``names`` the loops' names.
    """

    names: tuple[str, ...]
    loop: Index
    rot: NDArray[np.bool_]
    bi: Index
    bo: Index
    x_B: Array
    y_B: Array
    pi_B: Array
    po_B: Array

    @property
    def m(self) -> int:
        return int(self.loop.size)

    @classmethod
    def build(cls, model: Model) -> LoopPlan:
        nb = model.nb
        rows: list[tuple[int, bool, int, int, Array, Array, Array, Array]] = []
        for l, lp in enumerate(model.loops):
            bi = nb if lp.inner is None else model.body_index(lp.inner)
            bo = nb if lp.outer is None else model.body_index(lp.outer)
            R_Bi_Gi = np.asarray(lp.inner_rotation)
            R_Bo_Go = np.asarray(lp.outer_rotation).T
            pi, po = np.asarray(lp.inner_point), np.asarray(lp.outer_point)
            pairs, trn = joints.loop_constraint_axes(
                lp.rot_type, lp.rot_dof, lp.rot_seq, lp.trn_dof, lp.trn_seq
            )
            for x, y in pairs:
                rows.append((l, True, bi, bo, R_Bo_Go[:, x], R_Bi_Gi[:, y], pi, po))
            for c in trn:
                rows.append((l, False, bi, bo, np.zeros(3), R_Bi_Gi[:, c], pi, po))
        plan = cls._of(model, rows)
        if model.planar and plan.m:
            plan = cls._of(model, [rows[c] for c in _planar_rows(model, plan)])
        return plan

    @classmethod
    def _of(cls, model: Model, rows: Sequence[Any]) -> LoopPlan:
        def col(i: int, dtype: Any, shape: tuple[int, ...] = ()) -> Any:
            out = np.empty((len(rows),) + shape, dtype=dtype)
            for c, r in enumerate(rows):
                out[c] = r[i]
            return out

        num = object if model.is_symbolic else float  # sympy parameters stay sympy
        return cls(
            names=tuple(lp.name for lp in model.loops),
            loop=col(0, np.intp),
            rot=col(1, bool),
            bi=col(2, np.intp),
            bo=col(3, np.intp),
            x_B=col(4, num, (3,)),
            y_B=col(5, num, (3,)),
            pi_B=col(6, num, (3,)),
            po_B=col(7, num, (3,)),
        )


def _planar_rows(model: Model, plan: LoopPlan) -> list[int]:
    """The in-plane rows of a planar model (N's x-y plane), decided at ``q = 0``.

    A rotational row is in the plane when its direction ``n`` is along z, a
    translational row when its axis ``d`` is in the x-y plane. Every row must be one or
    the other, or the mechanism is not planar about z.
    """
    R = _ext(_rest_rotations(model), np.eye(3))
    x_o = mv(R[plan.bo], plan.x_B.astype(float))
    y_i = mv(R[plan.bi], plan.y_B.astype(float))
    dirs = np.where(plan.rot[:, None], cross(x_o, y_i), y_i)
    z = np.abs(dirs[:, 2])
    keep = []
    for c in range(plan.m):
        if min(z[c], abs(1.0 - z[c])) > 1e-9:
            name = plan.names[plan.loop[c]]
            raise ModelError(
                f"loop {name!r}: planar=True, but its constrained direction "
                f"{np.round(dirs[c], 6).tolist()} is neither along N's z axis nor in the x-y "
                "plane (a planar model moves in N's x-y plane, rotating about z)"
            )
        if (z[c] > 0.5) == bool(plan.rot[c]):
            keep.append(c)
    return keep


def _rest_rotations(model: Model) -> Array:
    """``R_N_B`` (nb, 3, 3) at ``q = 0`` from the joints' placement rotations alone (the
    points may be sympy symbols; the rotations must be numbers)."""
    try:
        pa = params_of(model)
        R_in = np.asarray(pa.R_Bi_Gi, dtype=float)
        R_out = np.asarray(pa.R_Go_Bo, dtype=float)
    except TypeError:
        raise ModelError(
            "planar=True needs numeric joint rotations (inner_rotation, outer_rotation)"
        ) from None
    R = np.zeros((model.nb, 3, 3))
    for k in range(model.nb):  # joints are sorted: the inner body comes first
        i = int(model.layout.parent[k])
        R[k] = (np.eye(3) if i < 0 else R[i]) @ R_in[k] @ R_out[k]
    return R


def loop_plan(model: Model) -> LoopPlan:
    """The (cached) :class:`LoopPlan` of ``model``."""
    plan: LoopPlan = derived(model, "loops", LoopPlan.build)
    return plan


def flexible_refusal(model: Model) -> str | None:
    """Why the loop equations cannot hold ``model``'s flexible bodies, naming the loop or
    joints, or None. The loop rows are the rigid bodies' (:func:`loop_terms`): a loop
    closing on a flexible body would need the deflection and rotation of its closing
    point (the modes' columns there), and a rigid body riding on a node of a flexible
    body (``Joint.inner_node``) moves with the modal speeds, which its rows would need
    as columns too; neither is modelled yet."""
    if not (model.loops and model.nf):
        return None
    flexible = {b.name for b in model.bodies if b.modes is not None}
    for lp in model.loops:
        for side in (lp.inner, lp.outer):
            if side in flexible:
                return (
                    f"loop {lp.name!r} closes on flexible body {side!r}: its rows need the "
                    "deflection and rotation at the closing point, which the loop equations "
                    "do not have yet (close it on a rigid body, e.g. one welded to the beam)"
                )
    nodes = node_joint_names(model)
    if nodes:
        return (
            f"joints {nodes} at nodes of flexible bodies in a model with loops: the bodies "
            "riding on a node move with the modal speeds, which the loop rows do not have "
            "as columns yet"
        )
    return None


# --------------------------------------------------------------------------- terms
def _ext(a: Array, fill: Array) -> Array:
    """``a`` (nb, ...) with N appended as row nb."""
    return np.concatenate((a, fill[None]), axis=0)


@attrs.frozen(eq=False)
class LoopTerms:
    """The loop constraints at one state: ``Phi`` (m,), ``A`` (m, n) with ``Φ̇ = A u``,
    ``b`` (m,) with ``Φ̈ = A u̇ + b``; ``loop`` (m,) the loop of each row, ``rot`` (m,)
    whether it is rotational; ``dirs`` (m, 3) the row's direction in N (``n`` of a
    rotational row: the axis of its constraint torque; ``d`` of a translational row: the
    axis of its constraint force, which acts at the Go origin ``p_o`` (m, 3)). ``Aᵀλ``
    is the generalized force of those torques and forces times ``λ``
    (:func:`loop_forces`)."""

    Phi: Array
    A: Array
    b: Array
    loop: Index
    rot: NDArray[np.bool_]
    dirs: Array  # (m, 3) n (rotational rows) or d (translational rows), N
    p_o: Array  # (m, 3) Go origin, N


def loop_terms(model: Model, q: Array, u: Array | None = None, bias: bool = False, *,
               kin: Kinematics | None = None, tm: KaneTerms | None = None) -> LoopTerms:  # fmt: skip
    """``Φ``, ``A`` and (with ``bias``, at the speeds ``u``) ``b`` of every loop
    constraint at the coordinates ``q`` (see the module docstring): the rows of
    :func:`kanedyn.dynamics.loop_rows.rows`, which the compiled engine traces on the
    recursion's frames (:func:`kanedyn.dynamics.loop_rows.frames`), here on the dense
    engine's vectorised kinematics (:func:`row_frames`). Without ``bias``, ``b`` is
    zero. ``kin`` (the kinematics at ``q``, ``u``) and ``tm`` (:func:`kane_terms` at
    ``kin``) are reused when given.

    With flexible bodies (``Model.nf``) ``q`` and ``u`` may be the full states (the
    joints' entries are read) and ``A`` runs over all the speeds ``[u | s | ξ]``, its ξ
    columns zero: the loops close on rigid bodies whose motion the modal speeds do not
    enter (:func:`flexible_refusal` names the loops that do not).
    """
    pl = loop_plan(model)
    if kin is None:
        u = np.zeros(model.n) if u is None else np.asarray(u, dtype=float)[: model.n]
        kin = kinematics_at(model, np.asarray(q, dtype=float)[: model.nq], u)
    S = joint_subspace(model, kin) if tm is None else tm.S
    A_r = None
    if bias:
        A_r = bias_accelerations(model, kin) if tm is None else tm.A_r
    # Φ and A are of the positions alone: the speeds enter the frames with the bias
    fr = row_frames(model, kin, S, A_r, speeds=bias)
    rows = loop_rows.rows(fr, pl, model.layout.path, model.n)
    m = pl.m
    A = np.array(rows.A, dtype=float).reshape(m, model.n)
    if model.nf:  # the modal speeds' columns: zero on rigid bodies
        A = np.hstack((A, np.zeros((m, model.nf))))
    return LoopTerms(
        Phi=np.array(rows.Phi, dtype=float).reshape(m),
        A=A,
        b=np.array(rows.b, dtype=float).reshape(m),
        loop=pl.loop,
        rot=pl.rot,
        dirs=np.array(rows.dirs, dtype=float).reshape(m, 3),
        p_o=np.array(rows.p_o, dtype=float).reshape(m, 3),
    )


def row_frames(model: Model, kin: Kinematics, S: Array, A_r: Array | None = None,
               speeds: bool = True) -> RowFrames:  # fmt: skip
    """The loop rows' frames (:class:`kanedyn.dynamics.loop_rows.RowFrames`) from the
    dense kinematics ``kin`` (one state), the motion subspace ``S`` (n, 6) of
    :func:`kanedyn.dynamics.partials.joint_subspace` and, for the bias, the spatial bias
    accelerations ``A_r`` (nb, 6) of :func:`kanedyn.dynamics.partials.bias_accelerations`
    (both about ``kin.origin``); without ``speeds`` (and ``A_r``), the frames of the
    positions alone (``Φ`` and ``A`` do not depend on the speeds). A Plücker vector
    ``(ω, v_O)`` about the origin has the linear part ``v_O + ω × o`` at the point ``o``
    (relative to the origin): so the partial velocity of ``Go_j``'s origin is
    ``S_r^v - o_j × S_r^ω`` and its bias acceleration ``a_O + α × o``."""
    dof_joint = plan_of(model).dof_joint
    o_rel = kin.o_rel
    sw = S[:, :3]
    sv = S[:, 3:] - cross(o_rel[dof_joint], sw)
    n = len(dof_joint)
    cols = list(zip(dof_joint.tolist(), range(n), sw.tolist(), sv.tolist(), strict=True))
    # the frames' vectors in one array (N's row zero), made lists at once
    vecs = [kin.o, kin.params.outer_point]
    if speeds or A_r is not None:
        vecs += [kin.omega, kin.v_o]
    if A_r is not None:
        vecs += [A_r[:, :3], A_r[:, 3:] + cross(A_r[:, :3], o_rel)]
    V = np.zeros((len(vecs), model.nb + 1, 3))
    V[:, : model.nb] = vecs
    RB = np.concatenate((kin.R_N_B, np.eye(3)[None])).tolist()
    o, op, *motion = V.tolist()
    return RowFrames(o, RB, op, cols, *motion)


# --------------------------------------------------------------------------- partition
@attrs.frozen(eq=False)
class Partition:
    """A choice of independent constraint rows and of dependent speeds.

    ``rows`` (r,) the independent rows of A (r = its rank), ``dependent`` (r,) the
    dependent speeds (``A[rows][:, dependent]`` is square and well conditioned),
    ``independent`` (n - r,) the independent speeds, ``cond`` the condition number of
    that block when chosen.
    """

    rows: Index
    dependent: Index
    independent: Index
    cond: float

    @property
    def rank(self) -> int:
        return int(self.rows.size)


def partition(A: Array, independent: Iterable[int] | None = None) -> Partition:
    """Rank, independent rows and dependent speeds of ``A`` (m, n) by pivoted QR.

    The rows: a column-pivoted QR of ``Aᵀ`` (pivots below :data:`RANK_TOL` times the
    largest are zero: those rows are redundant). The speeds: a column-pivoted QR of the
    kept rows picks the r best-conditioned columns as dependent speeds, or, with
    ``independent`` given, those speeds are independent and the others dependent.
    """
    m, n = A.shape
    if m == 0 or not np.any(A):
        return Partition(np.zeros(0, np.intp), np.zeros(0, np.intp), np.arange(n), 1.0)
    _, R, piv = scipy.linalg.qr(A.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > RANK_TOL * d[0]))
    rows = np.sort(piv[:r]).astype(np.intp)
    Ar = A[rows]
    if independent is None:
        _, _, piv2 = scipy.linalg.qr(Ar, mode="economic", pivoting=True)
        dep = np.sort(piv2[:r]).astype(np.intp)
    else:
        ind = np.unique(np.asarray(list(independent), dtype=np.intp))
        dep = np.setdiff1d(np.arange(n), ind).astype(np.intp)
        if dep.size != r:
            raise ModelError(
                f"{ind.size} independent speeds given, but the loops leave {n - r} DOF"
            )
    ind = np.setdiff1d(np.arange(n), dep).astype(np.intp)
    return Partition(rows, dep, ind, _ratio(np.linalg.svd(Ar[:, dep], compute_uv=False)))


def _ratio(s: NDArray[Any]) -> float:
    """The condition number ``σ_max / σ_min`` of the singular values ``s`` (descending),
    as :func:`numpy.linalg.cond` gives it (inf for a singular matrix)."""
    if s[-1] > 0.0:
        return float(s[0] / s[-1])
    return math.nan if math.isnan(s[0]) else math.inf


def independent_rows(model: Model, locked: Iterable[int] = ()) -> tuple[int, ...]:
    """The loop rows the compiled engine keeps (:func:`kanedyn.dynamics.loop_rows.
    constrained_accelerations`): the independent rows of ``A`` on the free speeds (the
    first QR of :func:`partition`) at the model's initial state, assembled when it can
    be; cached per lock set. Redundant rows (a planar linkage closed by spatial hinges)
    are left out; they are consistent on the constraint manifold."""
    return tuple(int(i) for i in row_partition(model, locked).rows)


def row_partition(model: Model, locked: Iterable[int] = ()) -> Partition:
    """The :func:`partition` of ``A`` on the free speeds at the model's initial state,
    assembled when it can be, that :func:`independent_rows` takes its rows from
    (``independent`` and ``dependent`` index the free speeds); cached per lock set."""
    lock = tuple(sorted(int(r) for r in locked))
    table: dict[tuple[int, ...], Partition] = derived(model, "loop_rows", lambda m: {})
    if lock not in table:
        state = model.initial_state()
        try:
            state = assemble(model, state)
        except ModelError:
            pass
        free = np.setdiff1d(np.arange(model.n), np.asarray(lock, dtype=np.intp))
        A = loop_terms(model, state.q).A[:, free]
        table[lock] = partition(A)
    return table[lock]


@attrs.frozen(eq=False)
class LoopEquations:
    """Kane's equations of a looped model with dependent speeds eliminated.

    ``C`` (n, n - r): ``u = C u_i``; ``c0`` (n,): ``u̇ = C u̇_i + c0``, zero on the
    independent speeds (``-A_d⁻¹ b`` on the dependent ones, up to the directions left
    out near a singular configuration, :data:`SINGULAR_RCOND`);
    ``mass_matrix`` (n - r, n - r) = ``Cᵀ M C``; ``forcing`` (n - r,) = ``Cᵀ(f - M c0)``,
    so that ``mass_matrix @ u̇_i = forcing``; ``partition`` the choice of speeds;
    ``M``, ``f`` the tree's; ``terms`` the loop constraints.
    """

    C: Array
    c0: Array
    mass_matrix: Array
    forcing: Array
    partition: Partition
    M: Array
    f: Array
    terms: LoopTerms


def _reduce(
    M: Array, f: Array, lt: LoopTerms, A: Array, part: Partition, bias: Array,
    s: Array | None = None,
) -> LoopEquations:  # fmt: skip
    """:class:`LoopEquations` from the constraint rows ``A`` (the loops' rows of ``lt``,
    then any lock rows) and their bias, with the speeds of ``part``; ``s``: the
    singular values of ``A[part.rows]`` when the caller has them (then, when none is
    below :data:`SINGULAR_RCOND` of the largest, ``c0 = -A_d⁻¹ b`` by the LU of ``A_d``
    that gives ``C``)."""
    n = M.shape[0]
    Ar = A[part.rows]
    Ad, Ai = Ar[:, part.dependent], Ar[:, part.independent]
    C = np.zeros((n, part.independent.size))
    C[part.independent, np.arange(part.independent.size)] = 1.0
    c0 = np.zeros(n)
    b_r = bias[part.rows]
    if part.rank and s is not None and s[-1] > SINGULAR_RCOND * s[0]:
        # nothing to leave out: c0 = -A_d⁻¹ b (below), one LU of A_d for C and c0
        X = np.linalg.solve(Ad, np.concatenate((Ai, b_r[:, None]), axis=1))
        C[part.dependent] = -X[:, :-1]
        c0[part.dependent] = -X[:, -1]
    elif part.rank:
        C[part.dependent] = -np.linalg.solve(Ad, Ai)
        # c0: the minimum-norm solution of A_r c = -b without the directions of A's
        # singular values below SINGULAR_RCOND (near a singular configuration, b's part
        # along them is round-off divided by σ), moved into the partition's form
        # (c0_i = 0) by a null-space term; the same as -A_d⁻¹ b when nothing is cut
        if np.any(b_r):  # (a zero bias, as in plastic_impact, gives c0 = 0)
            p = -_truncated_solve(np.linalg.svd(Ar, full_matrices=False), b_r)
            c0[:] = p - C @ p[part.independent]
    return LoopEquations(C, c0, C.T @ M @ C, C.T @ (f - M @ c0), part, M, f, lt)


def _truncated_solve(svd: tuple[Array, Array, Array], rhs: Array) -> Array:
    """The minimum-norm least-squares solution of ``A x = rhs`` from the thin SVD
    ``A = U diag(s) Vᵀ``, the singular values up to :data:`SINGULAR_RCOND` of the
    largest left out (``numpy.linalg.lstsq(A, rhs, rcond=SINGULAR_RCOND)``):
    ``x = Σ_{s_k > rcond s_0} v_k (u_kᵀ rhs) / s_k``."""
    U, s, Vt = svd
    keep = s > SINGULAR_RCOND * s[0]
    return Vt[keep].T @ ((U[:, keep].T @ rhs) / s[keep])


def lock_rows(n: int, locked: Iterable[int]) -> Array:
    """The velocity constraints of locked speeds, ``E`` (k, n): one row ``e_rᵀ`` per
    locked speed ``r`` (``e_rᵀ u = 0``, ``e_rᵀ u̇ = 0``: bias zero, and no position row,
    the coordinate stays where it was locked)."""
    idx = _indices(locked)
    E = np.zeros((idx.size, n))
    E[np.arange(idx.size), idx] = 1.0
    return E


def _indices(locked: Iterable[int]) -> Index:
    """The speed indices ``locked`` as an index array (an index array as it is)."""
    return np.asarray(locked if isinstance(locked, np.ndarray) else list(locked), dtype=np.intp)


def stacked_rows(lt: LoopTerms, locked: Iterable[int]) -> tuple[Array, Array, Array]:
    """``A``, ``Φ`` and ``b`` of the loops with the lock rows appended:
    ``[A; E]``, ``[Φ; 0]``, ``[b; 0]`` (:func:`lock_rows`)."""
    idx = _indices(locked)
    if not idx.size:  # nothing locked (every step of most runs)
        return lt.A, lt.Phi, lt.b
    E = lock_rows(lt.A.shape[1], idx)
    zero = np.zeros(E.shape[0])
    return np.vstack((lt.A, E)), np.concatenate((lt.Phi, zero)), np.concatenate((lt.b, zero))


def constrained_accelerations(eq: LoopEquations) -> Array:
    """``u̇ = C u̇_i + c0`` with ``(CᵀMC) u̇_i = Cᵀ(f - M c0)`` (Cholesky), shape (n,)."""
    return eq.C @ solve_mass_matrix(eq.mass_matrix, eq.forcing) + eq.c0


def equations_at(
    model: Model,
    q: Array,
    kin: Kinematics,
    L: AppliedLoads,
    u: Array,
    part: Partition | None = None,
    independent: Iterable[int] | None = None,
    baumgarte: tuple[float, float] | None = None,
    locked: Iterable[int] = (),
    M: Array | None = None,
) -> LoopEquations:
    """:class:`LoopEquations` at ``kin`` (coordinates ``q``, speeds ``u``) with the loads
    ``L`` (``M``: the tree's mass matrix at ``q`` when already formed; with flexible
    bodies the full one is formed with the forcing); a new
    partition when ``part`` is None or its block has become ill-conditioned
    (:data:`REPARTITION_COND`) or its rows nearly dependent (condition above
    ``1 / SINGULAR_RCOND``: a row set chosen where it was well conditioned can degrade,
    as Bricard's does, while another is fine). ``baumgarte = (α, β)`` replaces ``A u̇ + b = 0`` by
    ``A u̇ + b + 2α A u + β² Φ = 0`` (Baumgarte 1972). The speeds in ``locked`` are
    held at zero: their rows ``e_rᵀ`` (:func:`stacked_rows`) join A before the
    partition, so each locked speed is dependent, with ``u_r = 0`` and ``u̇_r = 0``
    (its row of C and its entry of c0 are zero), and the reduced equations
    ``Cᵀ(Fr + Fr*) = 0`` are those of the mechanism with the DOF locked. ``part``
    must then be a partition of the same stacked rows.

    With flexible bodies (``q = [q | η]``, ``u = [u | s | ξ]``, ``kin`` with the modal
    state) ``M`` and ``f`` are the full ones over the speeds
    (:func:`kanedyn.dynamics.kane.flexible_system_at`) and the rows' ξ columns are zero,
    so the modal speeds are independent ones."""
    tm = kane_terms(model, kin)
    lt = loop_terms(model, q, u, bias=True, kin=kin, tm=tm)
    if model.nf:
        M, f = flexible_system_at(model, tm, L, q[model.nq :], u[model.n :])
    else:
        M = mass_matrix_at(model, tm) if M is None else M
        f = forcing_at(model, tm, L)
    A, Phi, bias = stacked_rows(lt, locked)
    if baumgarte is not None:
        alpha, beta = baumgarte
        bias = bias + 2.0 * alpha * (A @ u) + beta**2 * Phi
    s = None
    if part is None or independent is not None:
        part = partition(A, independent)
    elif part.rank:
        s, s_d = _singular_values(A[part.rows], part.dependent)  # c0 shares s
        if (
            s[0] > s[-1] / SINGULAR_RCOND  # cond(A_r) above 1 / SINGULAR_RCOND
            or _ratio(s_d) > REPARTITION_COND  # cond(A_d)
        ):  # the kept rows nearly dependent: chosen again before c0 leaves a direction out
            part, s = partition(A), None
    return _reduce(M, f, lt, A, part, bias, s)


def _singular_values(Ar: Array, dependent: Index) -> tuple[Array, Array]:
    """The singular values of ``A_r`` (r, n) and of its block ``A_d = A_r[:, dependent]``
    (r, r), in one LAPACK call: ``A_d`` padded with zero columns to ``A_r``'s shape has
    the same r singular values."""
    pair = np.zeros((2,) + Ar.shape)
    pair[0] = Ar
    pair[1, :, : dependent.size] = Ar[:, dependent]
    s = np.linalg.svd(pair, compute_uv=False)
    return s[0], s[1]


def _speed_indices(model: Model, items: Iterable[int | str]) -> Index:
    """Speed indices of joint names (all their speeds) and of coordinate indices
    (angles and slides, whose rates are speeds)."""
    lay = model.layout
    out: list[int] = []
    for item in items:
        if isinstance(item, str):
            out += model.speeds(item).tolist()
            continue
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise ModelError(
                f"fix/independent entries are joint names or coordinate indices, got {item!r}"
            )
        hit = np.nonzero(lay.angle_q == int(item))[0]
        if not hit.size:
            raise ModelError(
                f"coordinate {item} is not an angle or slide of the model (nq = {model.nq}); "
                "fix a spherical joint by its name"
            )
        out.append(int(lay.angle_u[hit[0]]))
    return np.unique(np.array(out, dtype=np.intp))


def loop_equations(
    model: Model,
    state: State,
    loads: LoadsLike = None,
    t: float = 0.0,
    independent: Iterable[int | str] | None = None,
) -> LoopEquations:
    """Kane's equations with the loops' dependent speeds eliminated, at ``state``.

    ``independent``: joint names or coordinate indices whose speeds are to be the
    independent ones (default: chosen by pivoted QR). See the module docstring.

    >>> import kanedyn as kd
    >>> m = kd.examples.four_bar()
    >>> eq = kd.loop_equations(m, m.assemble(m.initial_state(), fix=["crank"]))
    >>> eq.mass_matrix.shape
    (1, 1)
    """
    if model.nf:  # over [u | s | ξ]: the joints' kinematics ride on the modal state
        why = flexible_refusal(model)
        if why is not None:
            raise ModelError(why)
        q, u, eta, xi = flex.split(model, state)
        kin = kinematics_at(model, q, u, eta=eta, xi=xi)
        L = applied_loads(model, State(q, u), kin, loads, t)
    else:
        model.check_state(state)
        kin = kinematics_at(model, state.q, state.u)
        L = applied_loads(model, state, kin, loads, t)
    ind = None if independent is None else _speed_indices(model, independent)
    return equations_at(model, state.q, kin, L, state.u, independent=ind)


def forward_dynamics(model: Model, state: State, loads: LoadsLike = None, t: float = 0.0) -> Array:
    """``u̇`` of a looped model (:func:`constrained_accelerations`), shape (n,)."""
    return constrained_accelerations(loop_equations(model, state, loads, t))


# --------------------------------------------------------------------------- manifold
def _step_q(model: Model, q: Array, du: Array) -> Array:
    """``q`` moved by the speed-space increment ``du`` (angles and slides add;
    quaternions turn by ``½ q ⊗ [δω, 0]`` and are normalized)."""
    q = q + joints.qdot(model.layout, q, du)
    return joints.normalize_quaternions(_NUMPY, model.layout, q)


def _constraints(model: Model, q: Array) -> LoopTerms:
    return loop_terms(model, q)


def _newton(
    model: Model, q: Array, free: Index, tol: float, max_iter: int,
    lt: LoopTerms | None = None,
) -> tuple[Array, LoopTerms, bool]:  # fmt: skip
    """Gauss-Newton on ``Φ(q) = 0`` in the free speeds' directions (minimum norm).

    ``Φ̇ = A u`` holds exactly, so ``A`` is the Jacobian of ``Φ`` in speed space and
    the iteration is Newton's (quadratic near a regular closure). ``lt``: the
    constraints at ``q`` when the caller has them."""
    lt = _constraints(model, q) if lt is None else lt
    for _ in range(max_iter):
        if not lt.Phi.size or np.max(np.abs(lt.Phi)) <= tol:
            return q, lt, True
        du = np.zeros(model.n)
        du[free] = -np.linalg.lstsq(lt.A[:, free], lt.Phi, rcond=RANK_TOL)[0]
        q = _step_q(model, q, du)
        lt = _constraints(model, q)
    return q, lt, bool(not lt.Phi.size or np.max(np.abs(lt.Phi)) <= tol)


def _worst(model: Model, lt: LoopTerms, r: Array) -> str:
    c = int(np.argmax(np.abs(r)))
    return model.loops[int(lt.loop[c])].name


def assemble(
    model: Model,
    state: State,
    fix: Iterable[int | str] = (),
    *,
    tol: float = 1e-12,
    max_iter: int = 50,
) -> State:
    """Close every loop: ``Φ(q) = 0`` by Newton, then ``A u = 0``.

    The speeds of the joints (names) or coordinates (indices of angles or slides) in
    ``fix`` keep their values: their coordinates keep their values during the Newton
    iteration, and their rates are kept while the other speeds are solved (minimum-norm
    least squares) from ``A u = 0``.

    Raises
    ------
    ModelError
        The mechanism cannot close (naming the loop with the largest residual), or the
        fixed rates are not consistent with the loops.
    """
    model.check_state(state, flexible=True)
    if not model.loops:
        return state
    fixed = _speed_indices(model, fix)
    free = np.setdiff1d(np.arange(model.n), fixed).astype(np.intp)
    q, lt, ok = _newton(model, state.q[: model.nq], free, tol, max_iter)
    if not ok or not np.all(np.isfinite(q)):
        fixed_txt = f" with {list(fix)} fixed" if list(fix) else ""
        raise ModelError(
            f"loop {_worst(model, lt, lt.Phi)!r} cannot close{fixed_txt}: the closure "
            f"residual is {np.max(np.abs(lt.Phi)):.3g} after {max_iter} Newton iterations "
            "(the loop may be out of reach from this configuration)"
        )
    u = np.array(state.u, dtype=float)
    if lt.A.size:
        u[free] = np.linalg.lstsq(lt.A[:, free], -lt.A[:, fixed] @ u[fixed], rcond=RANK_TOL)[0]
        r = lt.A @ u
        scale = max(1.0, float(np.max(np.abs(u))))
        if np.max(np.abs(r)) > 1e-9 * scale:
            raise ModelError(
                f"loop {_worst(model, lt, r)!r}: the fixed rates of {list(fix)} are not "
                f"consistent with the loops (velocity residual {np.max(np.abs(r)):.3g})"
            )
    return State(np.concatenate((q, state.q[model.nq :])), u)  # η and ξ as given


def project(
    model: Model,
    q: Array,
    u: Array,
    tol: float = loop_rows.CLOSED_TOL,
    locked: Iterable[int] = (),
) -> tuple[Array, Array, float]:
    """Project ``(q, u)`` back onto the constraint manifold: a few Newton steps on
    ``Φ(q) = 0`` (minimum-norm corrections), then ``u ← u - A⁺ A u`` with the
    directions of A's singular values below :data:`SINGULAR_RCOND` of the largest left
    out (near a singular configuration ``A u`` along them is the closure's round-off
    over σ, not a speed error; see the module docstring). Returns the new ``q``, ``u``
    and the largest residual before the projection, ``max(|Φ|, |A u|)``.

    The speeds in ``locked`` are held: their coordinates take no Newton correction and
    their rows ``e_rᵀ`` join A in the velocity projection (:func:`stacked_rows`), so
    they come out zero and the residual counts them.

    With flexible bodies ``q`` may be ``[q | η]`` (``η`` kept) and ``u`` runs over
    ``[u | s | ξ]``: the rows' ξ columns are zero, so the projection leaves ``ξ``."""
    if q.size > model.nq:
        qj, u, before = project(model, q[: model.nq], u, tol, locked)
        return np.concatenate((qj, q[model.nq :])), u, before
    locked = _indices(locked)
    free = np.arange(model.n)
    if locked.size:
        free = np.setdiff1d(free, locked).astype(np.intp)
    lt0 = _constraints(model, q)
    A0 = stacked_rows(lt0, locked)[0]
    before = max(float(np.max(np.abs(lt0.Phi), initial=0.0)), float(np.max(np.abs(A0 @ u))))
    q, lt, _ = _newton(model, q, free, tol, 5, lt0)
    A = A0 if lt is lt0 else stacked_rows(lt, locked)[0]
    u = u - np.linalg.lstsq(A, A @ u, rcond=SINGULAR_RCOND)[0]  # see the docstring
    return q, u, before


def close(model: Model, q: Array, locked: Iterable[int] = (), tol: float = 1e-13) -> Array:
    """``q`` with its loops closed again (``Φ(q) = 0`` by Newton, minimum-norm
    corrections) while the coordinates of the ``locked`` speeds keep their values; a
    ModelError naming the loop when it cannot close (a stop's bound out of the
    mechanism's reach). With flexible bodies ``q`` may be ``[q | η]``: ``η`` is kept."""
    if q.size > model.nq:  # the modal coordinates ride along
        return np.concatenate((close(model, q[: model.nq], locked, tol), q[model.nq :]))
    free = np.setdiff1d(np.arange(model.n), np.asarray(list(locked), dtype=np.intp))
    q, lt, ok = _newton(model, q, free.astype(np.intp), tol, 50)
    if not ok and np.max(np.abs(lt.Phi)) > 1e-8:
        raise ModelError(
            f"loop {_worst(model, lt, lt.Phi)!r} cannot close with the locked coordinates "
            f"kept (closure residual {np.max(np.abs(lt.Phi)):.3g})"
        )
    return q


def plastic_impact(model: Model, q: Array, u: Array, locked: Iterable[int] = (), *,
                   M: Array | None = None, terms: LoopTerms | None = None) -> Array:  # fmt: skip
    """The speeds just after the loops and the locks ``locked`` act as a plastic impact
    on the speeds ``u`` (a lock engaged: its speed stopped, the loops kept closed).

    The constraint impulse ``Aᵀι`` (rows ``[A; E]``, :func:`stacked_rows`) does no work
    along the admissible directions ``C`` of the constrained partition, so Kane's
    impulse equations (Kane & Levinson 1985, impulsive motion: generalized impulses
    and suddenly imposed constraints) keep the generalized momenta along them,
    ``Cᵀ M (u⁺ - u⁻) = 0``, with ``u⁺ = C u_i⁺``:

    .. math:: u^+ = C\\,(C^T M C)^{-1} C^T M\\, u^-

    the speeds closest to ``u⁻`` in the kinetic-energy metric among those that satisfy
    the constraints (Gauss's principle for impulses), so the kinetic energy cannot
    rise. Speeds that already satisfy them (an unlock) are kept.

    With flexible bodies ``q = [q | η]``, ``u = [u | s | ξ]`` and ``M`` is the full mass
    matrix over them (:func:`kanedyn.dynamics.kane.flexible_mass_matrix_at`); the rows
    have zero ξ columns, so the modal speeds are free directions of ``C`` and jump too:
    this is the KKT impact ``M Δν = Aᵀι``, ``A ν⁺ = 0``. A model without loops takes the
    lock rows alone. ``M`` (the mass matrix over all the speeds at ``q``) and ``terms``
    (:func:`loop_terms` at ``q``) are reused when given (the dense MSD engine forms ``M``
    once per right-hand side)."""
    n = model.n_total
    kin = None
    if M is None:
        kin, eta = rest_kinematics(model, q)
        M = flexible_mass_matrix_at(model, kane_terms(model, kin), eta)
    if terms is not None:
        lt = terms
    elif model.loops:
        lt = loop_terms(model, q, kin=kin)
    else:
        z = np.zeros(0)
        lt = LoopTerms(z, np.zeros((0, n)), z, z.astype(np.intp), z.astype(bool),
                       np.zeros((0, 3)), np.zeros((0, 3)))  # fmt: skip
    A = stacked_rows(lt, locked)[0]
    eq = _reduce(M, np.zeros(n), lt, A, partition(A), np.zeros(A.shape[0]))
    return eq.C @ solve_mass_matrix(eq.mass_matrix, eq.C.T @ (M @ u))


def residuals(model: Model, q: Array, u: Array) -> tuple[float, float]:
    """``max |Φ(q)|`` and ``max |A(q) u|`` (zero without loops)."""
    if not model.loops:
        return 0.0, 0.0
    lt = _constraints(model, q)
    return float(np.max(np.abs(lt.Phi))), float(np.max(np.abs(lt.A @ u[: lt.A.shape[1]])))


# --------------------------------------------------------------------------- loop forces
@attrs.frozen(eq=False)
class LoopForces:
    """The constraint force and torque at every loop joint (model order of ``loops``).

    ``force`` (nl, 3) and ``torque`` (nl, 3): the wrench the inner body Bi exerts on the
    outer body Bo through the loop joint, the force acting at the Go origin, in N
    components (Bo exerts the opposite wrench on Bi). ``force_Go``, ``torque_Go``: the
    same in the loop's Go axes; ``force_Gi``, ``torque_Gi``: in its Gi axes.
    ``multipliers``: per loop, the multipliers λ of its constraint rows
    (``M u̇ = f + Aᵀλ``). With redundant constraints, the minimum-norm set.
    """

    loop_names: tuple[str, ...]
    force: Array
    torque: Array
    force_Go: Array
    torque_Go: Array
    force_Gi: Array
    torque_Gi: Array
    multipliers: tuple[Array, ...]

    def of(self, loop: str) -> dict[str, Array]:
        """The entries of one loop, by name."""
        k = self.loop_names.index(loop)
        return {
            "force": self.force[k],
            "torque": self.torque[k],
            "force_Go": self.force_Go[k],
            "torque_Go": self.torque_Go[k],
            "force_Gi": self.force_Gi[k],
            "torque_Gi": self.torque_Gi[k],
            "multipliers": self.multipliers[k],
        }


def loop_forces(model: Model, state: State, loads: LoadsLike = None, t: float = 0.0) -> LoopForces:
    """Loop-joint constraint forces and torques at ``state`` (see :class:`LoopForces`).

    With ``u̇`` from the constrained equations, the multipliers solve
    ``Aᵀλ = M u̇ - f`` (least squares, minimum norm); a rotational row with direction
    ``n`` carries the torque ``λ n`` on Bo (``-λ n`` on Bi), a translational row with
    axis ``d`` the force ``λ d`` on Bo at the Go origin (``-λ d`` on Bi at the same
    point): their generalized force is exactly ``λ`` times the row of A (Kane
    Constraints slides 8-10, with the loop's constrained directions).
    """
    eq = loop_equations(model, state, loads, t)
    acc = constrained_accelerations(eq)
    lt = eq.terms
    lam = np.linalg.lstsq(lt.A.T, eq.M @ acc - eq.f, rcond=RANK_TOL)[0]
    nl = len(model.loops)
    force, torque = np.zeros((nl, 3)), np.zeros((nl, 3))
    np.add.at(torque, lt.loop[lt.rot], lam[lt.rot, None] * lt.dirs[lt.rot])
    np.add.at(force, lt.loop[~lt.rot], lam[~lt.rot, None] * lt.dirs[~lt.rot])
    kin = kinematics_at(model, state.q[: model.nq], state.u[: model.n])
    R_N_Gi, R_N_Go = _loop_rotations(model, kin)
    return LoopForces(
        loop_names=tuple(lp.name for lp in model.loops),
        force=force,
        torque=torque,
        force_Go=np.einsum("lji,lj->li", R_N_Go, force),
        torque_Go=np.einsum("lji,lj->li", R_N_Go, torque),
        force_Gi=np.einsum("lji,lj->li", R_N_Gi, force),
        torque_Gi=np.einsum("lji,lj->li", R_N_Gi, torque),
        multipliers=tuple(lam[lt.loop == k] for k in range(nl)),
    )


def _loop_rotations(model: Model, kin: Kinematics) -> tuple[Array, Array]:
    """``R_N_Gi``, ``R_N_Go`` (nl, 3, 3) of every loop joint."""
    R = _ext(kin.R_N_B, np.eye(3))
    idx: dict[str | None, int] = {b.name: i for i, b in enumerate(model.bodies)}
    idx[None] = model.nb
    R_N_Gi = np.array([R[idx[lp.inner]] @ lp.inner_rotation for lp in model.loops])
    R_N_Go = np.array([R[idx[lp.outer]] @ np.asarray(lp.outer_rotation).T for lp in model.loops])
    return R_N_Gi.reshape(-1, 3, 3), R_N_Go.reshape(-1, 3, 3)


def loop_wrenches(model: Model, kin: Kinematics, lf: LoopForces) -> tuple[Array, Array]:
    """The loop forces as body loads: ``F``, ``T`` (nb, 3) at the mass centres, N."""
    F, T = np.zeros((model.nb + 1, 3)), np.zeros((model.nb + 1, 3))
    r = _ext(kin.r, np.zeros(3))
    R = _ext(kin.R_N_B, np.eye(3))
    p = _ext(kin.p, np.zeros(3))
    for k, lp in enumerate(model.loops):
        bi = model.nb if lp.inner is None else model.body_index(lp.inner)
        bo = model.nb if lp.outer is None else model.body_index(lp.outer)
        p_o = p[bo] + R[bo] @ np.asarray(lp.outer_point, float)
        for b, sign in ((bo, 1.0), (bi, -1.0)):
            F[b] += sign * lf.force[k]
            T[b] += sign * (lf.torque[k] + np.cross(p_o - r[b], lf.force[k]))
    return F[: model.nb], T[: model.nb]


# --------------------------------------------------------------------------- summary
@attrs.frozen(eq=False)
class LoopSummary:
    """Loop constraints at one state: ``n_constraints`` rows, their ``rank``, the
    ``dof`` left (n - rank), ``redundant`` (rows - rank), ``independent`` and
    ``dependent`` speed names, ``residual`` (max |Φ|, max |A u|)."""

    n_constraints: int
    rank: int
    dof: int
    redundant: int
    independent: tuple[str, ...]
    dependent: tuple[str, ...]
    residual: tuple[float, float]

    def __str__(self) -> str:
        red = f", {self.redundant} redundant (least-squares consistent)" if self.redundant else ""
        return (
            f"{self.n_constraints} loop constraints, rank {self.rank}{red}; "
            f"{self.dof} DOF after constraints; independent speeds: "
            f"{', '.join(self.independent) or '(none)'}"
        )


def loop_summary(model: Model, state: State | None = None) -> LoopSummary:
    """Rank, DOF after the constraints and the chosen independent speeds at ``state``
    (default: the initial state, assembled when it can be)."""
    if state is None:
        state = model.initial_state()
        try:
            state = assemble(model, state)
        except ModelError:
            pass
    lt = _constraints(model, state.q)
    part = partition(lt.A[:, : model.n])  # the joints' speeds (ξ columns are zero)
    names = [""] * model.n
    for k, j in enumerate(model.joints):
        for pos, i in enumerate(model.layout.u_index[k]):
            names[i] = f"{j.name}.w{pos}" if pos < j.rot_dof else f"{j.name}.s{pos - j.rot_dof}"
    return LoopSummary(
        n_constraints=int(lt.Phi.size),
        rank=part.rank,
        dof=model.n - part.rank,
        redundant=int(lt.Phi.size) - part.rank,
        independent=tuple(names[i] for i in part.independent),
        dependent=tuple(names[i] for i in part.dependent),
        residual=residuals(model, state.q, state.u),
    )
