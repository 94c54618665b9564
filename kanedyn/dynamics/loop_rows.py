"""The loop constraints as terms of the one recursion: ``Φ``, ``A``, ``b`` and the
constrained accelerations, written once on scalars.

The rows of every loop joint (:mod:`kanedyn.dynamics.loops`: ``Φ(q) = 0``,
``Φ̇ = A u``, ``Φ̈ = A u̇ + b``) from the quantities the tree recursion
(:class:`kanedyn.dynamics.recursion.Recursion`) already has per joint k in ``Go_k``: the
transform ``(E_k, r_k)`` from the inner frame, the motion columns ``S_k``, the spatial
velocity ``v_k`` and the remainder acceleration ``c_k``. Chaining them gives, in N, each
joint frame's rotation ``R_k = R_P E_k`` and origin ``o_k = o_P + R_P r_k``, each body's
angular velocity ``ω_k = R_k v_k^ω``, the velocity of a body point ``x``
``R_k v_k^v + ω_k × (x - o_k)``, and with the bias accelerations ``a_k = X_k a_P + c_k``
(``a_N = 0``) its acceleration at zero ``u̇``, ``R_k a_k^v + α_k × (x - o_k) + ω_k ×
ẋ``; the partial angular velocity of speed r of joint j is ``R_j s_r^ω`` and the partial
velocity of ``x`` ``R_j s_r^v + R_j s_r^ω × (x - o_j)`` (Kane_NBody slides 18-22). The
rows are then those of :func:`kanedyn.joints.loop_rotation` and
:func:`kanedyn.joints.loop_translation`; a joint on the paths of both loop bodies adds
nothing to a row (it moves the two bodies together).

**Constrained accelerations** (:func:`constrained_accelerations`): with ``r`` independent
rows ``A_r``, ``b_r`` and the tree's ``u̇₀ = M⁻¹ f`` (ABA), Kane's equations with the
loop forces ``Aᵀλ`` are (Featherstone 2008, sec. 8.1: the constraint force method)

.. math::

    \\dot u = \\dot u_0 + Y \\lambda, \\quad Y = M^{-1} A_r^T, \\qquad
    (A_r Y)\\,\\lambda = -(A_r \\dot u_0 + b_r)

ABA factors ``M = Kᵀ D K`` (its pass 2 is ``y = K⁻ᵀ Q``, its pass 3
``ν̇ = K⁻¹ D⁻¹ y`` at zero remainders; :meth:`Recursion.aba_backward
<kanedyn.dynamics.recursion.Recursion.aba_backward>`), so ``A_r Y = Σ_k y_kᵀ D_k⁻¹ y_k``
from pass 2 alone on each row ``A_i`` as joint forces (its articulated inertias are
shared), and ``u̇`` is one more pass 3 on ``y₀ + Σ λ_i y_i`` (pass 2 is linear). The
r×r system by an unrolled LDLᵀ (:func:`kanedyn.spatial.plucker.solve_spd`): the same
``u̇`` as the dense engine's speed partition (:func:`kanedyn.dynamics.loops.equations_at`,
``(CᵀMC) u̇_i = Cᵀ(f - M c₀)``), which is its oracle. **Projection**
(:func:`projected`): Newton steps on ``Φ(q) = 0`` with minimum-norm corrections
``δu = -A_rᵀ (A_r A_rᵀ)⁻¹ Φ_r``, then ``u ← u - A_rᵀ (A_r A_rᵀ)⁻¹ A_r u``, as
:func:`kanedyn.dynamics.loops.project` does.

**Redundant rows** (rank ``r`` below the number of rows ``m``: Bricard's linkage): a set
of ``r`` independent rows chosen at assembly can become dependent along the motion
while another set is fine, so with ``rank=r`` every row is kept and the semidefinite
``A M⁻¹ Aᵀ`` (``A Aᵀ`` in the projection) is solved by the LDLᵀ with diagonal pivoting
of :func:`kanedyn.spatial.plucker.solve_pivoted`, which chooses the ``r`` rows again at
every evaluation, branch-free (``λ`` is zero on the others, consistent on the manifold).

**Near a singular configuration** (the IFToMM A02 N-four-bar with its rods horizontal,
where rows of ``A`` shrink to zero and the mechanism can branch) the part of the bias
``b`` along the small singular direction of ``A`` is round-off of the closure divided
by the small singular value σ. The dense engine leaves it out by a truncated SVD
(:func:`kanedyn.dynamics.loops.equations_at`); the kernel, which has no SVD, makes the
same cut on the unpivoted LDLᵀ of ``A_r A_rᵀ`` (:func:`cut_bias`,
:func:`kanedyn.spatial.plucker.solve_spd_truncated`): a row whose part independent of
the rows kept before it is below :data:`SINGULAR_RCOND` of the longest row (nearly
dependent, or itself nearly zero) keeps its row, so the acceleration stays on the
admissible motions, but takes the bias the kept rows imply, ``b̃ = A_r x`` with ``x``
the kept rows' minimum-norm solution of ``A_r x = b``. The Gram-Schmidt vector of such
a row is the SVD's singular vector to ``O(σ²)``, so the two engines agree to round-off
on both sides of the cut (``tests/test_loops_native.py``). The velocity projection
leaves ``A u`` alone along the same rows, and the projection moves no coordinate once
``max |Φ| ≤`` :data:`CLOSED_TOL` (a Newton step on a closure at round-off moves the
state along the branching mode by ``Φ/σ``; ``tests/test_loops_ladder.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.dynamics.flex_recursion import flexible_terms, modal_accelerations
from kanedyn.dynamics.recursion import AbaPass, BodyTerms, Recursion
from kanedyn.spatial import plucker as sp

__all__ = [
    "LoopRows",
    "MomentumClosure",
    "CLOSED_TOL",
    "CUT_MARGIN",
    "RowFrames",
    "RowPlan",
    "SINGULAR_RCOND",
    "constrained_accelerations",
    "cut_bias",
    "flexible_accelerations",
    "frames",
    "loop_rows",
    "projected",
    "rows",
    "settled",
]

Scalar = Any
Vec = list  # of Scalar
Mat = list  # of rows of Scalar

SINGULAR_RCOND = 1e-4
"""Relative cut-off near a singular configuration: a row whose part independent of the
rows kept before it is below it, relative to the longest row
(:func:`kanedyn.spatial.plucker.solve_spd_truncated`; for the dense engine, the singular
values of ``A`` relative to the largest), keeps its row but not its bias
(:func:`cut_bias`), and the velocity projection leaves ``A u`` along it alone."""
CUT_MARGIN = 100.0
"""How far a state is from the cut of :data:`SINGULAR_RCOND` for the native RK4 loop to
take a step's later stages without it (:func:`settled`): every row's part independent
of the rows before it at least ``CUT_MARGIN · SINGULAR_RCOND`` (1e-2) of the longest
row, at the step's start and at its end (the step is taken again with the cut
otherwise). No row is near the cut there, and :func:`cut_bias` leaves the bias as it is
up to round-off."""
CLOSED_TOL = 1e-13
"""Absolute closure below which the projection moves no coordinate: ``max |Φ| ≤`` it ends
Newton's iteration (:func:`projected`, :func:`kanedyn.dynamics.loops.project`). Near a
singular configuration a Newton step on a closure already at round-off would move the
state along the branching mode by ``Φ/σ``, and turn its admissible velocities."""


class RowPlan(Protocol):
    """The constant data of the loop rows (:class:`kanedyn.dynamics.loops.LoopPlan`):
    per row, ``rot``, the inner and outer body ``bi``, ``bo`` (``nb`` for N), the axes
    ``x_B``, ``y_B`` and the points ``pi_B``, ``po_B`` in their bodies' axes."""

    @property
    def rot(self) -> NDArray[np.bool_]: ...
    @property
    def bi(self) -> NDArray[np.intp]: ...
    @property
    def bo(self) -> NDArray[np.intp]: ...
    @property
    def x_B(self) -> NDArray[Any]: ...
    @property
    def y_B(self) -> NDArray[Any]: ...
    @property
    def pi_B(self) -> NDArray[Any]: ...
    @property
    def po_B(self) -> NDArray[Any]: ...


@attrs.frozen(eq=False)
class LoopRows:
    """The rows at one state, as lists of scalars: ``Phi`` (m), ``A`` (m rows of n),
    ``b`` (m; zeros without the bias), ``dirs`` (m × 3; ``n`` of a rotational row, ``d``
    of a translational one, N) and ``p_o`` (m × 3; the Go origins, N)."""

    Phi: list[Scalar]
    A: list[list[Scalar]]
    b: list[Scalar]
    dirs: list[Vec]
    p_o: list[Vec]


def _poses(rec: Recursion, geo: list[BodyTerms]) -> tuple[list[Mat], list[Vec]]:
    """``R_N_Go`` and the Go origin in N of every joint frame, N appended last."""
    R: list[Mat] = []
    o: list[Vec] = []
    for b in geo:
        if b.parent < 0:
            R.append(b.E)
            o.append(b.r)
        else:
            R.append(sp.mm(R[b.parent], b.E))
            o.append(sp.add(o[b.parent], sp.mv(R[b.parent], b.r)))
    R.append([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    o.append([0.0, 0.0, 0.0])
    return R, o


def _arr(x: list[Any]) -> NDArray[Any]:
    """Floats as a float array (the dense engine), traced or symbolic scalars as an
    object array."""
    a = np.array(x)
    return a if a.dtype.kind == "f" else np.array(x, dtype=object)


def _scalar(x: Any) -> Scalar:
    return x.item() if isinstance(x, np.ndarray | np.generic) else x


@attrs.frozen(eq=False)
class RowFrames:
    """The tree's quantities that the loop rows read, lists of scalars in N with N
    appended last (index ``nb``): ``o`` the joint frames' origins, ``RB`` the body axes
    ``R_N_Bo``, ``op`` the joint points in them (``outer_point``), ``cols`` per free
    speed ``(joint j, speed r, R_j s_r^ω, R_j s_r^v)`` (its partial angular velocity and
    the partial velocity of ``Go_j``'s origin); with speeds ``w`` the angular
    velocities and ``vo`` the velocities of the ``Go`` origins; with the bias ``al``,
    ``ao`` their accelerations at zero ``u̇`` (spatial: ``ao`` is the linear part at
    the origin, a point's acceleration adding ``al × (x - o) + ω × ẋ``).

    :func:`frames` takes them from the recursion (the compiled engine traces it); the
    dense engine fills them from its vectorised kinematics
    (:func:`kanedyn.dynamics.loops.loop_terms`). :func:`rows` reads them."""

    o: list[Vec]
    RB: list[Mat]
    op: list[Vec]
    cols: list[tuple[int, int, Vec, Vec]]
    w: list[Vec] | None = None
    vo: list[Vec] | None = None
    al: list[Vec] | None = None
    ao: list[Vec] | None = None


def frames(rec: Recursion, geo: list[BodyTerms], v: Sequence[Vec] | None = None,
           c: Sequence[Vec] | None = None) -> RowFrames:  # fmt: skip
    """:class:`RowFrames` from the recursion's geometry ``geo`` (module docstring),
    with the velocities ``v`` and remainders ``c`` of :meth:`Recursion.terms
    <kanedyn.dynamics.recursion.Recursion.terms>` when given (Go_k, about its origin)."""
    nb = rec.model.nb
    R, o = _poses(rec, geo)
    # body axes and the joint point in them, N appended
    RB = [sp.mm(R[k], rec.par("R_Go_Bo", k)) for k in range(nb)] + [R[nb]]
    op = [rec.par("outer_point", k) for k in range(nb)] + [[0.0, 0.0, 0.0]]
    zero3 = [0.0, 0.0, 0.0]
    # the partial angular velocity of every free speed: (joint, speed, R_j s^ω, R_j s^v)
    cols = [(j, r, sp.mv(R[j], s[:3]), sp.mv(R[j], s[3:]))
            for j, b in enumerate(geo) for s, r in b.J.cols]  # fmt: skip
    if v is None:
        return RowFrames(o, RB, op, cols)
    w = [sp.mv(R[k], v[k][:3]) for k in range(nb)] + [zero3]
    vo = [sp.mv(R[k], v[k][3:]) for k in range(nb)] + [zero3]
    if c is None:
        return RowFrames(o, RB, op, cols, w, vo)
    a0: list[Vec] = []
    for k, b in enumerate(geo):
        ak = c[k] if b.parent < 0 else sp.add(sp.motion_to_child(b.E, b.r, a0[b.parent]), c[k])
        a0.append(ak)
    al = [sp.mv(R[k], a0[k][:3]) for k in range(nb)] + [zero3]
    ao = [sp.mv(R[k], a0[k][3:]) for k in range(nb)] + [zero3]
    return RowFrames(o, RB, op, cols, w, vo, al, ao)


def loop_rows(rec: Recursion, geo: list[BodyTerms], plan: RowPlan,
              v: Sequence[Vec] | None = None, c: Sequence[Vec] | None = None) -> LoopRows:  # fmt: skip
    """``Φ``, ``A`` and (with the velocities ``v`` and remainders ``c`` of
    :meth:`Recursion.terms <kanedyn.dynamics.recursion.Recursion.terms>`) ``b`` of the
    rows of ``plan`` at the geometry ``geo`` of ``rec`` (see the module docstring):
    :func:`rows` of :func:`frames`. The columns of locked speeds are zero."""
    model = rec.model
    return rows(frames(rec, geo, v, c), plan, model.layout.path, model.n)


def _values(x: NDArray[Any]) -> list[Scalar]:
    """A formula's result (k,) as a list of scalars (floats, or the traced values)."""
    return x.tolist() if x.dtype.kind == "f" else [_scalar(v) for v in x]


def rows(fr: RowFrames, plan: RowPlan, path: NDArray[Any], n: int) -> LoopRows:
    """``Φ``, ``A`` and (with ``fr``'s speeds and bias) ``b`` of the rows of ``plan``
    on the frames ``fr`` (module docstring): the rows of
    :func:`kanedyn.joints.loop_rotation` and :func:`kanedyn.joints.loop_translation`,
    ``A``'s entries from the partial velocities ``fr.cols``. ``path[b, j]``: joint j is
    on the path from N to body b; ``n`` speeds. A joint on the paths of both bodies of a
    row, or of neither, adds nothing to it: its entries are left zero without being
    formed."""
    o, RB, op, cols = fr.o, fr.RB, fr.op, fr.cols
    nb = len(o) - 1
    zero3 = [0.0, 0.0, 0.0]
    has_v = fr.w is not None
    has_b = fr.al is not None
    w, vo = fr.w or [], fr.vo or []
    al, ao = fr.al or [], fr.ao or []
    mv, cross, dot, add3, sub3 = sp.mv, sp.cross, sp.dot, sp.add3, sp.sub3

    points: dict[tuple[Any, ...], Vec] = {}
    motions: dict[tuple[Any, ...], list[Vec]] = {}

    def point(b: int, p_B: list[Any]) -> Vec:
        key = (b, *p_B)
        x = points.get(key)
        if x is None:
            x = points[key] = add3(o[b], mv(RB[b], sub3(p_B, op[b])))
        return x

    def motion(b: int, p_B: list[Any]) -> list[Vec]:
        """A body point's position, velocity and bias acceleration (N)."""
        key = (b, *p_B)
        out = motions.get(key)
        if out is None:
            x = point(b, p_B)
            vx = ax = zero3
            if b < nb and has_v:  # N's points are at rest
                d = sub3(x, o[b])
                vx = add3(vo[b], cross(w[b], d))
                if has_b:
                    lin = add3(ao[b], cross(al[b], d))
                    ax = add3(lin, cross(w[b], vx))
            out = motions[key] = [x, vx, ax]
        return out

    # the joints on the path of each body (N's: none)
    on_path = [[bool(x) for x in r] for r in path.tolist()] + [[False] * path.shape[1]]
    m = len(plan.rot)
    rot = [bool(x) for x in plan.rot]
    bis, bos = [int(x) for x in plan.bi], [int(x) for x in plan.bo]
    pi_B, po_B = np.asarray(plan.pi_B).tolist(), np.asarray(plan.po_B).tolist()
    x_B, y_B = np.asarray(plan.x_B).tolist(), np.asarray(plan.y_B).tolist()
    # each row's vectors, then the rows' formulas at once (one call per kind of row)
    args: list[tuple[Vec, ...]] = []
    for row in range(m):
        bi, bo = bis[row], bos[row]
        y_i = mv(RB[bi], y_B[row])
        w_i, w_o = (w[bi], w[bo]) if has_v else (zero3, zero3)
        al_i, al_o = (al[bi], al[bo]) if has_b else (zero3, zero3)
        if rot[row]:
            x_o = mv(RB[bo], x_B[row])
            args.append((x_o, y_i, w_i, w_o, al_i, al_o))
        else:
            p_i, v_i, a_i = motion(bi, pi_B[row])
            p_o, v_o, a_o = motion(bo, po_B[row])
            args.append((y_i, sub3(p_o, p_i), sub3(v_o, v_i), w_i, al_i, sub3(a_o, a_i)))
    out: list[Any] = [None] * m
    for kind, formula in ((True, joints.loop_rotation), (False, joints.loop_translation)):
        idx = [row for row in range(m) if rot[row] == kind]
        if idx:
            vecs = _arr([args[row] for row in idx])  # (rows, 6, 3): one array, six views
            a = [vecs[:, k] for k in range(6)]
            phi, dv, bias = formula(a[0], a[1], a[2], a[3], a[4], a[5], rates=has_b)
            for row, ph, d, bs in zip(idx, _values(phi), dv.tolist(), _values(bias), strict=True):
                out[row] = (ph, d, bs)

    out_phi, out_A, out_b, dirs, p_os = [], [], [], [], []
    for row in range(m):
        bi, bo = bis[row], bos[row]
        phi, dv, bias = out[row]
        p_o = point(bo, po_B[row])
        Arow: list[Scalar] = [0.0] * n
        path_i, path_o = on_path[bi], on_path[bo]
        if rot[row]:
            for j, r, sw, _ in cols:
                o_on = path_o[j]
                if path_i[j] != o_on:
                    Arow[r] = dot(dv, sw) if o_on else -dot(dv, sw)
            dirs.append(dv)
        else:
            y_i = args[row][0]
            p_i = point(bi, pi_B[row])
            for j, r, sw, sv in cols:
                i_on, o_on = path_i[j], path_o[j]
                if i_on == o_on:
                    continue
                # the partial velocity of the moving point (the other is fixed in it)
                pv = add3(sv, cross(sw, sub3(p_o if o_on else p_i, o[j])))
                Arow[r] = (dot(dv, sw) if i_on else 0.0) + (dot(y_i, pv) if o_on else -dot(y_i, pv))
            dirs.append(y_i)
        out_phi.append(phi)
        out_A.append(Arow)
        out_b.append(bias if has_b else 0.0)
        p_os.append(p_o)
    return LoopRows(out_phi, out_A, out_b, dirs, p_os)


def settled(rec: Recursion, plan: RowPlan, keep: Sequence[int], rank: int | None = None
            ) -> tuple[list[Scalar], list[Scalar], Scalar]:  # fmt: skip
    """``(q', u', clear)``: :func:`projected` with one Newton step, and ``clear`` 1.0
    where the projected state is :data:`CUT_MARGIN` clear of a singular configuration
    (0.0 otherwise, branch-free; 1.0 with redundant rows, which :func:`cut_bias` never
    cuts), from the Gram matrix of the rows at ``q'`` that the velocity projection
    factors. ``rec`` is moved to ``q'``, so that the next step's first rates follow on
    the same rows (:func:`kanedyn.compiled.kernels.settled`)."""
    return _projected(rec, plan, keep, 1, rank, True)


def _newton_step(rec: Recursion, Ar: Mat, free: Sequence[int], Phi: Sequence[Scalar],
                 closed: Scalar, rank: int | None) -> list[Scalar]:  # fmt: skip
    """``q + q̇(q, δu)`` with ``δu = -A_rᵀ(A_r A_rᵀ)⁻¹ Φ_r`` on the free speeds, at the
    normalized coordinates of ``rec``; no move where ``closed`` is 1.0 (module
    docstring)."""
    model = rec.model
    dx = _min_norm(rec, Ar, list(Phi), rank)
    du = np.zeros(model.n, dtype=object)
    du[:] = 0.0
    for k, r in enumerate(free):
        du[r] = -dx[k] * (1.0 - closed)
    qn = np.array(rec.qn, dtype=object)
    return list(qn + joints.qdot(model.layout, qn, du))


def _speeds_projected(rec: Recursion, Ar: Mat, free: Sequence[int], u: list[Scalar],
                      rank: int | None) -> list[Scalar]:  # fmt: skip
    """``u - A_rᵀ(A_r A_rᵀ)⁻¹ A_r u`` on the free speeds (``A_r``'s columns), ``A u``
    left alone along the rows :data:`SINGULAR_RCOND` leaves out (module docstring)."""
    Au = [_dot(a, [u[r] for r in free]) for a in Ar]
    corr = _min_norm(rec, Ar, Au, rank, SINGULAR_RCOND)
    u = list(u)
    for k, r in enumerate(free):
        u[r] = u[r] - corr[k]
    return u


def _closed_flag(rec: Recursion, Phi: Sequence[Scalar]) -> Scalar:
    """``Π_i [|Φ_i| ≤ CLOSED_TOL]``, branch-free: 1.0 when every residual is within
    :data:`CLOSED_TOL`, else 0.0."""
    closed: Scalar = 1.0
    for x in Phi:
        closed = closed * sp.at_least_zero(rec.ar, CLOSED_TOL - rec.ar.abs(x)[()])
    return closed


def _mat_rows(A: list[list[Scalar]], keep: Sequence[int], free: Sequence[int]) -> Mat:
    return [[A[i][r] for r in free] for i in keep]


def constrained_accelerations(rec: Recursion, plan: RowPlan, keep: Sequence[int],
                              baumgarte: tuple[float, float] | None = None,
                              rank: int | None = None, cut: bool = True
                              ) -> tuple[list[Scalar], LoopRows]:  # fmt: skip
    """``u̇`` of the tree closed by the rows ``keep`` of ``plan`` (independent rows;
    or, with ``rank`` below their number, redundant rows of which ``rank`` independent
    ones are chosen again at every evaluation: module docstring, "Redundant rows"), by
    ABA and the constraint force method (module docstring); locked speeds 0. With
    ``baumgarte = (α, β)`` the bias is ``b + 2α A u + β² Φ`` (Baumgarte 1972). With
    ``cut=False`` the bias is taken as it is, without :func:`cut_bias`: for states clear
    of a singular configuration (:data:`CUT_MARGIN`), where the cut leaves it unchanged
    up to round-off."""
    nudot, rows, _ = _constrained(rec, plan, keep, baumgarte, rank, cut)
    return nudot, rows


def _constrained(rec: Recursion, plan: RowPlan, keep: Sequence[int],
                 baumgarte: tuple[float, float] | None = None, rank: int | None = None,
                 cut: bool = True) -> tuple[list[Scalar], LoopRows, list[Scalar]]:  # fmt: skip
    """:func:`constrained_accelerations` and the loops' generalized forces ``A_rᵀλ``
    (n, locked entries 0)."""
    model = rec.model
    geo, c, p, a_N = rec.terms()
    v = rec.velocities(geo)
    Q = rec.generalized_forces()
    bw = rec.aba_backward(geo, c, p, Q)
    nudot0 = rec.aba_forward(geo, c, bw, a_N)
    rows = loop_rows(rec, geo, plan, v, c)
    keep = list(keep)
    if not keep:
        return nudot0, rows, [0.0] * model.n
    bias = list(rows.b)
    if baumgarte is not None:
        alpha, beta = baumgarte
        free = [r for b in geo for _, r in b.J.cols]
        for i in keep:
            Au = _dot([rows.A[i][r] for r in free], [rec.u[r] for r in free])
            bias[i] = bias[i] + 2.0 * alpha * Au + beta * beta * rows.Phi[i]
    out, lam_forces = _closed(rec, geo, rows, keep, nudot0, bias, bw, rank, cut)
    return out, rows, lam_forces


def _closed(rec: Recursion, geo: list[BodyTerms], rows: LoopRows, keep: Sequence[int],
            x0: list[Scalar], bias: Sequence[Scalar], bw: AbaPass, rank: int | None = None,
            cut: bool = True) -> tuple[list[Scalar], list[Scalar]]:  # fmt: skip
    """``x = x₀ + M⁻¹A_rᵀλ`` with ``A_r x + b_r = 0``: the tree's ``x₀ = M⁻¹ g`` closed by
    the rows ``keep``, on ABA's factorization ``bw`` of ``M`` (its ``U``, ``D``; the
    rotors' inertias included): ``A_r M⁻¹ A_rᵀ`` from pass 2 on each row,
    ``(A_r M⁻¹ A_rᵀ) λ = -(A_r x₀ + b_r)`` by LDLᵀ, ``M⁻¹A_rᵀλ`` by pass 3. Returns ``x`` and the
    generalized forces ``A_rᵀ λ`` (n, locked entries 0): the constraint force method
    (Featherstone 2008, sec. 8.1). With ``rank`` below the number of rows, ``λ`` is
    :func:`_solve`'s, on ``rank`` rows chosen at this evaluation."""
    model = rec.model
    free = [r for b in geo for _, r in b.J.cols]
    zero6 = [0.0] * 6
    nb = model.nb
    # pass 2 of ABA on each kept row as joint forces: y_i = K⁻ᵀ A_iᵀ (the rotors at
    # rest: their gyroscopic bias belongs to x₀ only); then A_r M⁻¹ A_rᵀ = Σ_k y_kᵀ D_k⁻¹ y_k
    # over the joints (Recursion.aba_backward)
    rest = rec.rotor_pieces([zero6] * nb)
    ys = [rec.aba_backward(geo, [zero6] * nb, [zero6] * nb, rows.A[i], rest).u for i in keep]
    m = len(keep)
    G: Mat = [[0.0] * m for _ in range(m)]
    for k in range(nb):
        if not ys or not ys[0][k]:
            continue
        Dinv_y = sp.solve_spd(bw.D[k], [y[k] for y in ys])
        for a in range(m):
            for bb in range(a + 1):
                G[a][bb] = G[a][bb] + _dot(ys[a][k], Dinv_y[bb])
    Ar = _mat_rows(rows.A, keep, free)
    b = cut_bias(rec, Ar, [bias[i] for i in keep], rank, cut)
    rhs = [-(_dot(Ar[a], [x0[r] for r in free]) + b[a]) for a in range(m)]
    lam = _solve(rec, G, rhs, rank)
    # pass 3 on Σ λ_i y_i at c = 0, a_N = 0: M⁻¹ A_rᵀ λ
    uu = [[_dot([y[k][col] for y in ys], lam) for col in range(len(bw.u[k]))] for k in range(nb)]
    dx = rec.aba_forward(geo, [zero6] * nb, attrs.evolve(bw, u=uu), zero6)
    out = list(x0)
    forces: list[Scalar] = [0.0] * model.n
    for k, r in enumerate(free):
        out[r] = x0[r] + dx[r]
        forces[r] = _dot([Ar[a][k] for a in range(m)], lam)
    return out, forces


def flexible_accelerations(rec: Recursion, plan: RowPlan, keep: Sequence[int],
                           eta: Sequence[Scalar], xi: Sequence[Scalar],
                           rank: int | None = None, cut: bool = True
                           ) -> tuple[list[Scalar], LoopRows]:  # fmt: skip
    """``[u̇ | ṡ | ξ̇]`` of a tree with flexible bodies (modal coordinates ``eta``, speeds
    ``xi``) closed by the rows ``keep`` of ``plan`` (``rank``: as in
    :func:`constrained_accelerations`), and the rows. The loops close on rigid bodies
    off the flexible bodies' nodes (:func:`kanedyn.dynamics.loops.flexible_refusal`), so
    the rows over ``[u | s | ξ]`` have zero ``ξ`` columns, ``Ā = [A 0]``, and the
    constraint force method (module docstring) runs on the flexible mass matrix
    ``M̄`` (joints and modes):

    .. math::

        \\dot{\\bar\\nu} = \\dot{\\bar\\nu}_0 + \\bar Y \\lambda, \\quad
        \\bar Y = \\bar M^{-1} \\bar A_r^T, \\qquad
        (A_r \\bar Y_u)\\,\\lambda = -(A_r \\dot u_0 + b_r)

    ``M̄⁻¹`` applied by ABA with the modes condensed
    (:func:`kanedyn.dynamics.flex_recursion.flexible_run`): ``ν̄̇₀`` the tree's, each
    column of ``Ȳ`` one ABA at rest on the joint forces ``A_iᵀ`` (no bias, ``h_ξ = 0``,
    the rotors at rest), whose joint part ``Ȳ_u`` closes the rows and whose modal part
    carries ``ξ̇`` with the constrained joints' accelerations. ``cut``: as in
    :func:`constrained_accelerations`."""
    out, rows, _ = _flexible_constrained(rec, plan, keep, eta, xi, rank, cut)
    return out, rows


def _flexible_constrained(rec: Recursion, plan: RowPlan, keep: Sequence[int],
                          eta: Sequence[Scalar], xi: Sequence[Scalar], rank: int | None,
                          cut: bool = True) -> tuple[list[Scalar], LoopRows, list[Scalar]]:  # fmt: skip
    """:func:`flexible_accelerations` and the loops' generalized forces ``A_rᵀλ`` (n)."""
    geo, c, p, a_N, blocks, _ = flexible_terms(rec, eta, xi)
    v = rec.velocities(geo)
    nudot0 = rec.aba(geo, c, p, rec.generalized_forces(), a_N, flex=_fresh(blocks, True))
    x0 = [*nudot0, *modal_accelerations(rec)]
    rows = loop_rows(rec, geo, plan, v, c)
    if not keep:
        return x0, rows, [0.0] * rec.model.n
    out, forces = _flexible_closed(rec, geo, rows, list(keep), x0, rows.b, blocks, rank, cut)
    return out, rows, forces


def _fresh(blocks: dict[int, list[Any]], h: bool) -> dict[int, list[Any]]:
    """A copy of the modal blocks ``[C, M_Ψ, h_ξ]`` (ABA condenses them in place), with
    ``h_ξ`` zero unless ``h``."""
    return {
        k: [[list(r) for r in C], [list(r) for r in M], list(hb) if h else [0.0] * len(hb)]
        for k, (C, M, hb) in blocks.items()
    }


def _flexible_closed(rec: Recursion, geo: list[BodyTerms], rows: LoopRows,
                     keep: Sequence[int], x0: list[Scalar], bias: Sequence[Scalar],
                     blocks: dict[int, list[Any]], rank: int | None, cut: bool = True
                     ) -> tuple[list[Scalar], list[Scalar]]:  # fmt: skip
    """``x̄ = x̄₀ + M̄⁻¹Āᵀ_rλ`` with ``A_r x + b_r = 0`` over ``[u | s | ξ]``
    (:func:`flexible_accelerations`): each column of ``M̄⁻¹Āᵀ_r`` one ABA at rest on
    the joint forces ``A_iᵀ`` with the modal ``blocks`` condensed (``h_ξ = 0``, no
    bias, the rotors at rest). Returns ``x̄`` and ``A_rᵀλ`` (n, locked entries 0)."""
    model = rec.model
    free = [r for b in geo for _, r in b.J.cols]
    nb = model.nb
    zero6 = [0.0] * 6
    rest = rec.rotor_pieces([zero6] * nb)
    Y = []
    for i in keep:
        yu = rec.aba(geo, [zero6] * nb, [zero6] * nb, rows.A[i], zero6, rest, _fresh(blocks, False))
        Y.append([*yu, *modal_accelerations(rec)])
    Ar = _mat_rows(rows.A, keep, free)
    m = len(keep)
    G = [[_dot(Ar[a], [Y[bb][r] for r in free]) for bb in range(m)] for a in range(m)]
    b = cut_bias(rec, Ar, [bias[i] for i in keep], rank, cut)
    rhs = [-(_dot(Ar[a], [x0[r] for r in free]) + b[a]) for a in range(m)]
    lam = _solve(rec, G, rhs, rank)
    out = [x0[j] + _dot([Y[a][j] for a in range(m)], lam) for j in range(len(x0))]
    forces: list[Scalar] = [0.0] * model.n
    for k, r in enumerate(free):
        forces[r] = _dot([Ar[a][k] for a in range(m)], lam)
    return out, forces


@attrs.frozen(eq=False)
class MomentumClosure:
    """The loops in momentum-state dynamics (:meth:`Recursion.run_msd
    <kanedyn.dynamics.recursion.Recursion.run_msd>`), closed by the rows ``keep`` of
    ``plan``. The MSD states are the tree's generalized momenta ``y = ∂T/∂ν``; the
    loops act on the tree as the generalized constraint forces ``A_rᵀλ``, so

    .. math::

        \\nu = \\nu_0 + Y\\mu, \\quad (A_r Y)\\mu = -A_r \\nu_0, \\qquad
        \\dot y = \\dot y_{tree}(Q + A_r^T \\lambda)

    with ``ν₀ = M⁻¹(y - Ωᵀh)`` the tree's speeds (:meth:`speeds`: the speeds on the
    constraint manifold whose momenta along the admissible directions are ``y``'s,
    ``u = C (CᵀMC)⁻¹ Cᵀ p`` of the dense engine) and ``λ`` the multipliers of Kane's
    constrained equations at ``ν`` (:meth:`forces`, the λ of
    :func:`constrained_accelerations`). With flexible bodies the same on the flexible
    mass matrix, over ``[ν | ξ]`` (:meth:`flexible_speeds`, :meth:`flexible_forces`:
    the rows' ``ξ`` columns zero, ``M̄⁻¹`` by ABA with the modes condensed, as in
    :func:`flexible_accelerations`)."""

    plan: RowPlan
    keep: tuple[int, ...]
    rank: int | None = None  # below len(keep): redundant rows, chosen at every evaluation

    def speeds(self, rec: Recursion, geo: list[BodyTerms], nu0: list[Scalar],
               bw: AbaPass) -> list[Scalar]:  # fmt: skip
        """The speeds of the momentum states: the tree's ``ν₀`` (solved on ABA's pass 2
        ``bw``, the factors of ``M`` it shares) closed, ``A_r ν = 0``."""
        if not self.keep:
            return nu0
        rows = loop_rows(rec, geo, self.plan)
        return _closed(rec, geo, rows, self.keep, nu0, [0.0] * len(rows.Phi), bw, self.rank)[0]

    def forces(self, rec: Recursion) -> list[Scalar]:
        """The loops' generalized forces ``A_rᵀλ`` at ``rec``'s state."""
        return _constrained(rec, self.plan, self.keep, rank=self.rank)[2]

    def flexible_speeds(self, rec: Recursion, geo: list[BodyTerms], nu0: list[Scalar],
                        blocks: dict[int, list[Any]]) -> list[Scalar]:  # fmt: skip
        """:meth:`speeds` with flexible bodies: the tree's ``ν̄₀ = [ν₀ | ξ₀]`` (the
        modal ``blocks`` of the momentum states, condensed in ABA) closed, ``A_r ν = 0``,
        by ``M̄⁻¹Āᵀ_r`` with the modes condensed (:func:`flexible_accelerations`)."""
        if not self.keep:
            return nu0
        rows = loop_rows(rec, geo, self.plan)
        zero = [0.0] * len(rows.Phi)
        return _flexible_closed(rec, geo, rows, self.keep, nu0, zero, blocks, self.rank)[0]

    def flexible_forces(self, rec: Recursion, eta: Sequence[Scalar],
                        xi: Sequence[Scalar]) -> list[Scalar]:  # fmt: skip
        """:meth:`forces` with flexible bodies (modal coordinates ``eta``, speeds
        ``xi``): the ``λ`` of :func:`flexible_accelerations`."""
        return _flexible_constrained(rec, self.plan, self.keep, eta, xi, self.rank)[2]


def _dot(a: Sequence[Scalar], b: Sequence[Scalar]) -> Scalar:
    acc: Scalar = 0.0
    for x, y in zip(a, b, strict=True):
        acc = acc + x * y
    return acc


def _solve(rec: Recursion, G: Mat, rhs: Vec, rank: int | None) -> Vec:
    """``λ`` with ``G λ = rhs`` (lower triangle of ``G`` read): ``G`` positive definite
    by LDLᵀ (:func:`kanedyn.spatial.plucker.solve_spd`); or, with ``rank`` below its
    size, ``G = A_r W A_rᵀ`` of redundant rows, semidefinite of that rank, by the
    diagonal-pivoted LDLᵀ of :func:`kanedyn.spatial.plucker.solve_pivoted`, whose pivots
    choose ``rank`` independent rows at this evaluation (``λ`` is zero on the others).
    (Near a singular configuration ``rhs`` is consistent, its bias cut by
    :func:`cut_bias`.)"""
    if rank is None or rank >= len(G):
        return sp.solve_spd(G, [rhs])[0]
    return sp.solve_pivoted(rec.ar, G, [rhs], rank)[0]


def _min_norm(rec: Recursion, Ar: Mat, rhs: Vec, rank: int | None = None,
              tol: float | None = None) -> Vec:  # fmt: skip
    """``x = A_rᵀ μ`` with ``(A_r A_rᵀ) μ = rhs``, the minimum-norm solution of
    ``A_r x = rhs`` (with ``rank`` below the number of rows, on the rows
    :func:`kanedyn.spatial.plucker.solve_pivoted` chooses); with ``tol``
    (:data:`SINGULAR_RCOND`), on the rows whose part independent of the rows before them
    is at least ``tol`` of the longest row
    (:func:`kanedyn.spatial.plucker.solve_spd_truncated`)."""
    m = len(Ar)
    if not m:
        return [0.0] * (len(Ar[0]) if Ar else 0)
    mu = _gram_solve(rec, _gram(Ar), rhs, rank, tol)
    return [_dot([Ar[a][k] for a in range(m)], mu) for k in range(len(Ar[0]))]


def _gram(Ar: Mat) -> Mat:
    """``A_r A_rᵀ``, its lower triangle (the upper entries None, not read)."""
    m = len(Ar)
    return [[_dot(Ar[a], Ar[bb]) if bb <= a else None for bb in range(m)] for a in range(m)]


def _gram_solve(rec: Recursion, G: Mat, rhs: Vec, rank: int | None,
                tol: float | None) -> Vec:  # fmt: skip
    """``μ`` of :func:`_min_norm` from the lower triangle ``G`` of ``A_r A_rᵀ``."""
    if rank is not None and rank < len(G):
        return sp.solve_pivoted(rec.ar, G, [rhs], rank)[0]
    if tol is None:
        return sp.solve_spd(G, [rhs])[0]
    return sp.solve_spd_truncated(rec.ar, G, rhs, tol)


def cut_bias(rec: Recursion, Ar: Mat, b: Vec, rank: int | None = None,
             cut: bool = True) -> Vec:  # fmt: skip
    """The bias ``b`` of the rows ``A_r`` near a singular configuration (module
    docstring): ``b̃ = A_r x`` with ``x`` the minimum-norm solution of the rows that
    :data:`SINGULAR_RCOND` keeps (:func:`_min_norm`), so ``b̃`` is ``b`` on the kept rows
    and, on a row left out, the bias the kept rows imply for it; ``b`` itself wherever
    every row is kept. With redundant rows (``rank``) ``b``: their pivoted solve
    chooses independent rows, and no singular configuration is cut. With ``cut=False``
    ``b`` (a state clear of a singular configuration, :data:`CUT_MARGIN`, where the cut
    leaves it as it is up to round-off)."""
    if not cut or not Ar or all(sp.is_zero(x) for x in b) or (rank is not None and rank < len(Ar)):
        return list(b)
    G = _gram(Ar)
    mu = _gram_solve(rec, G, list(b), None, SINGULAR_RCOND)
    m = len(Ar)  # b̃ = A_r A_rᵀ μ, G symmetric
    return [_dot([G[a][c] if c <= a else G[c][a] for c in range(m)], mu) for a in range(m)]


def projected(rec: Recursion, plan: RowPlan, keep: Sequence[int], newton: int = 2,
              rank: int | None = None) -> tuple[list[Scalar], list[Scalar]]:  # fmt: skip
    """``(q, u)`` of ``rec`` projected onto the constraint manifold of the rows ``keep``
    (with ``rank`` below their number, ``rank`` of them chosen at every evaluation, as
    :func:`constrained_accelerations` does):
    ``newton`` Newton steps on ``Φ_r(q) = 0`` in the free speeds' directions (minimum
    norm: ``q ← q + q̇(q, δu)``, ``δu = -A_rᵀ(A_r A_rᵀ)⁻¹ Φ_r``, quaternions normalized;
    none once ``max |Φ_r| ≤`` :data:`CLOSED_TOL`, branch-free), then
    ``u ← u - A_rᵀ(A_r A_rᵀ)⁻¹ A_r u`` at the new ``q`` (``A u`` left alone along rows
    :data:`SINGULAR_RCOND` leaves out, near a singular configuration). The dense
    engine's :func:`kanedyn.dynamics.loops.project` is the same projection with Newton
    iterated to :data:`CLOSED_TOL`. ``rec`` is moved to the new coordinates (its ``q``,
    ``qn``)."""
    q, u, _ = _projected(rec, plan, keep, newton, rank, False)
    return q, u


def _projected(rec: Recursion, plan: RowPlan, keep: Sequence[int], newton: int,
               rank: int | None, clearance: bool
               ) -> tuple[list[Scalar], list[Scalar], Scalar]:  # fmt: skip
    """:func:`projected`, and with ``clearance`` the ``clear`` flag of :func:`settled`
    (else 1.0)."""
    lay = rec.model.layout
    keep = list(keep)
    u = list(rec.u)
    for it in range(newton + 1):
        geo = rec.geometry()
        rows = loop_rows(rec, geo, plan)
        free = [r for b in geo for _, r in b.J.cols]
        Ar = _mat_rows(rows.A, keep, free)
        if it == newton:
            clear: Scalar = 1.0
            if clearance and Ar and (rank is None or rank >= len(Ar)):
                clear = sp.truncation_clear(rec.ar, _gram(Ar), SINGULAR_RCOND, CUT_MARGIN)
            return list(rec.q), _speeds_projected(rec, Ar, free, u, rank), clear
        Phi = [rows.Phi[i] for i in keep]
        q = _newton_step(rec, Ar, free, Phi, _closed_flag(rec, Phi), rank)
        rec.q = q
        rec.qn = joints.normalize_quaternions(rec.ar, lay, np.array(q, dtype=object))
    return list(rec.q), u, 1.0  # pragma: no cover - the loop returns
