"""Spatial (Plücker) algebra and the body terms, on lists of scalars of any arithmetic.

The recursions over the tree (:mod:`kanedyn.dynamics.recursion`: ABA, RNEA, the MSD
rates) are written on these functions. A "scalar" is a float, a traced value
(:class:`kanedyn.compiled.tape.Value`) or a sympy expression: the same lines run the
articulated-body algorithm on numbers (``kd.aba``), record it on the tape (the compiled
engine) or build it symbolically. Vectors are lists, so a structural zero stays a plain
``0.0`` that the tracer folds away, and a symmetric matrix stores each mirrored pair
once (the same object), so its entries are computed once.

Spatial vectors are 6-lists, motion ``m = (ω, v)`` and force ``f = (n, f)``
(conventions page); a spatial inertia is a symmetric 6×6 list of rows about a frame's
origin, ``[[I_O, m[c]×], [-m[c]×, m U]]`` (Featherstone 2008, eq. 2.63).

Body terms (each written once here; the recursions call them):

* :func:`rotate_symmetric`: an inertia in other axes, ``E I Eᵀ``;
* :func:`body_inertia`: the spatial inertia of a body about a frame's origin
  (the parallel-axis shift); :func:`inertia_to_parent`: ``Xᵀ I X``;
* :func:`motion_to_child`, :func:`force_to_parent`: point transport of velocities,
  accelerations and forces;
* :func:`bias_force`: the free-body wrench ``v ×f I v + (ω × h, 0)`` (with embedded
  momentum h); :func:`momentum`: ``I v + (h, 0)`` (``H = I ω + h``);
* :func:`gravity_force`: the wrench of uniform gravity at the mass centre;
* :func:`central_gravity`, :func:`central_gravity_potential`: a central field's force
  and gravity-gradient torque on a body, and their one potential.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kanedyn.spatial.arithmetic import Arithmetic

__all__ = [
    "add",
    "add3",
    "bias_force",
    "body_inertia",
    "central_gravity",
    "central_gravity_potential",
    "central_gravity_terms",
    "const",
    "cross",
    "cross_force",
    "cross_motion",
    "dot",
    "force_to_parent",
    "gravity_force",
    "load_at",
    "inertia_to_parent",
    "is_zero",
    "mm",
    "momentum",
    "motion_to_child",
    "mtv",
    "mv",
    "rotate",
    "rotate_symmetric",
    "scale",
    "sdot",
    "skew",
    "at_least_zero",
    "solve_pivoted",
    "solve_spd",
    "solve_spd_truncated",
    "sub",
    "sub3",
    "sym_mv",
    "truncation_clear",
]

Scalar = Any
Vec = list  # of Scalar
Mat = list  # of rows of Scalar


# --------------------------------------------------------------------------- 3-vectors
def dot(a: Vec, b: Vec) -> Scalar:
    """``a · b`` of 3-vectors."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a: Vec, b: Vec) -> Vec:
    """``a × b``."""
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def add3(a: Vec, b: Vec) -> Vec:
    """``a + b`` of 3-vectors (:func:`add`'s operations, unrolled)."""
    return [a[0] + b[0], a[1] + b[1], a[2] + b[2]]


def sub3(a: Vec, b: Vec) -> Vec:
    """``a - b`` of 3-vectors (:func:`sub`'s operations, unrolled)."""
    return [a[0] - b[0], a[1] - b[1], a[2] - b[2]]


def add(a: Vec, b: Vec) -> Vec:
    """``a + b`` (any length)."""
    return [x + y for x, y in zip(a, b, strict=True)]


def sub(a: Vec, b: Vec) -> Vec:
    """``a - b`` (any length)."""
    return [x - y for x, y in zip(a, b, strict=True)]


def scale(s: Scalar, a: Vec) -> Vec:
    """``s a``."""
    return [s * x for x in a]


def mv(A: Mat, x: Vec) -> Vec:
    """``A x`` for a 3×3 ``A``."""
    return [dot(row, x) for row in A]


def mtv(A: Mat, x: Vec) -> Vec:
    """``Aᵀ x``."""
    return [A[0][j] * x[0] + A[1][j] * x[1] + A[2][j] * x[2] for j in range(3)]


def mm(A: Mat, B: Mat) -> Mat:
    """``A B`` of 3×3 matrices."""
    return [[A[i][0] * B[0][j] + A[i][1] * B[1][j] + A[i][2] * B[2][j] for j in range(3)]
            for i in range(3)]  # fmt: skip


def const(A: Any) -> Any:
    """A float array (a model constant) as nested lists of floats."""
    return [const(x) for x in A] if np.ndim(A) else float(A)


def skew(r: Vec) -> Mat:
    """``[r]×``."""
    return [[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]]


def rotate_symmetric(E: Mat, A: Mat) -> Mat:
    """``E A Eᵀ`` for symmetric A (upper triangle computed, mirrored): an inertia tensor
    in the axes that ``E`` maps to."""
    T = mm(E, A)
    out: Mat = [[0.0] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i, 3):
            out[i][j] = out[j][i] = T[i][0] * E[j][0] + T[i][1] * E[j][1] + T[i][2] * E[j][2]
    return out


def rotate(E: Mat, B: Mat) -> Mat:
    """``E B Eᵀ``."""
    T = mm(E, B)
    return [[T[i][0] * E[j][0] + T[i][1] * E[j][1] + T[i][2] * E[j][2] for j in range(3)]
            for i in range(3)]  # fmt: skip


# --------------------------------------------------------------------------- spatial
def cross_motion(a: Vec, b: Vec) -> Vec:
    """``a ×ₘ b = (ω × ω_b, ω × v_b + v × ω_b)``."""
    w, v = a[:3], a[3:]
    return cross(w, b[:3]) + add(cross(w, b[3:]), cross(v, b[:3]))


def cross_force(a: Vec, f: Vec) -> Vec:
    """``a ×f f = (ω × n + v × f, ω × f)``."""
    w, v = a[:3], a[3:]
    return add(cross(w, f[:3]), cross(v, f[3:])) + cross(w, f[3:])


def sym_mv(I: Mat, x: Vec) -> Vec:
    """``I x`` for a 6×6 ``I``."""
    return [sum((I[i][j] * x[j] for j in range(6)), 0.0) for i in range(6)]


def sdot(a: Vec, b: Vec) -> Scalar:
    """``a · b`` of 6-vectors (a motion and a force: the power)."""
    return sum((a[i] * b[i] for i in range(6)), 0.0)


def motion_to_child(E: Mat, r: Vec, m: Vec) -> Vec:
    """``X m``: a motion vector from parent coordinates to the child frame (E = R_P_C,
    r = child origin in the parent): ``(Eᵀ ω, Eᵀ (v - r × ω))``."""
    w = m[:3]
    return mtv(E, w) + mtv(E, sub(m[3:], cross(r, w)))


def force_to_parent(E: Mat, r: Vec, f: Vec) -> Vec:
    """``Xᵀ f``: a force from the child frame to parent coordinates."""
    fp = mv(E, f[3:])
    return add(mv(E, f[:3]), cross(r, fp)) + fp


def inertia_to_parent(E: Mat, r: Vec, I: Mat) -> Mat:
    """``Xᵀ I X`` for a symmetric spatial inertia in the child frame.

    With ``I = [[A, B], [Bᵀ, C]]`` rotated to the parent axes (``A' = E A Eᵀ`` ...) and
    ``R = [r]×``: ``[[A' + K + Kᵀ - R C' R, B' + R C'], [·, C']]``, ``K = R B'ᵀ``.
    """
    A = [row[:3] for row in I[:3]]
    B = [row[3:] for row in I[:3]]
    C = [row[3:] for row in I[3:]]
    A2, B2, C2 = rotate_symmetric(E, A), rotate(E, B), rotate_symmetric(E, C)
    R = skew(r)
    RC = mm(R, C2)
    K = [[dot(R[i], B2[j]) for j in range(3)] for i in range(3)]  # (R B'ᵀ)_ij = R_i · B'_j
    out: Mat = [[0.0] * 6 for _ in range(6)]
    for i in range(3):
        for j in range(i, 3):
            # (R C' R)_ij = RC_i · R[:, j] = -RC_i · R_j (R antisymmetric)
            rcr = -dot(RC[i], R[j])
            out[i][j] = out[j][i] = A2[i][j] + K[i][j] + K[j][i] - rcr
            out[i + 3][j + 3] = out[j + 3][i + 3] = C2[i][j]
        for j in range(3):
            out[i][j + 3] = out[j + 3][i] = B2[i][j] + RC[i][j]
    return out


def body_inertia(mass: Scalar, inertia: Mat, c: Vec) -> Mat:
    """Spatial inertia about a frame's origin of a body with mass centre ``c`` and
    inertia ``inertia`` (about the mass centre, symmetric), both in that frame:
    ``[[I - m [c]×², m [c]×], [-m [c]×, m U]]``, with ``-[c]×² = |c|² U - c cᵀ`` (the
    parallel-axis theorem; Featherstone 2008, eq. 2.63)."""
    cc = dot(c, c)
    mc = scale(mass, c)
    out: Mat = [[0.0] * 6 for _ in range(6)]
    for i in range(3):
        for j in range(i, 3):
            shift = (cc if i == j else 0.0) - c[i] * c[j]
            out[i][j] = out[j][i] = inertia[i][j] + mass * shift
        out[i + 3][i + 3] = mass
    mcx = skew(mc)
    for i in range(3):
        for j in range(3):
            out[i][j + 3] = out[j + 3][i] = mcx[i][j]
    return out


def momentum(I: Mat, v: Vec, h: Vec | None = None) -> Vec:
    """A body's spatial momentum about the frame's origin, ``I v + (h, 0)``: the angular
    part is ``H = I ω + m c × v + h`` with the embedded momentum ``h`` (a wheel's spin
    momentum, in the same axes; Kane_NBody slide 25)."""
    out = sym_mv(I, v)
    return out if h is None else add(out[:3], h) + out[3:]


def bias_force(I: Mat, v: Vec, h: Vec | None = None) -> Vec:
    """The free-body wrench of a body moving at ``v`` with no acceleration, ``v ×f (I v)
    + (ω × h, 0)``: the velocity-product terms of the Newton-Euler equations
    (``ω × H``, ``m ω × v_c``), with the embedded momentum ``h``.

    ``I`` is a rigid body's spatial inertia (:func:`body_inertia`, lower-right block
    ``m U``), so the linear momentum is ``m v + f_ω`` with ``f_ω = -m [c]× ω``, and the
    angular part's ``v × (m v)``, zero, is left out: ``(ω × n + v × f_ω, ω × f)``. At
    orbital speeds (``|v|`` ≈ 7.5 km/s) its round-off, ``m |v|² ε``, would be of the
    order of a gravity-gradient torque."""
    w, lin = v[:3], v[3:]
    # the sums unrolled (the same operations as a sum from 0 on every arithmetic)
    v0, v1, v2, v3, v4, v5 = v
    n = [I[i][0] * v0 + I[i][1] * v1 + I[i][2] * v2 + I[i][3] * v3 + I[i][4] * v4
         + I[i][5] * v5 for i in range(3)]  # fmt: skip
    f_w = [I[3 + i][0] * v0 + I[3 + i][1] * v1 + I[3 + i][2] * v2 for i in range(3)]
    f = [f_w[i] + I[3 + i][3 + i] * lin[i] for i in range(3)]
    p = add(cross(w, n), cross(lin, f_w)) + cross(w, f)
    return p if h is None else add(p[:3], cross(w, h)) + p[3:]


def gravity_force(mass: Scalar, g: Vec, c: Vec) -> Vec:
    """The wrench about a frame's origin of uniform gravity ``g`` on a body of mass
    ``mass`` with mass centre ``c`` (same axes): ``(c × m g, m g)``."""
    F = scale(mass, g)
    return cross(c, F) + F


def load_at(T: Vec, F: Vec, c: Vec) -> Vec:
    """The wrench about a frame's origin of a torque ``T`` and a force ``F`` applied at
    the point ``c`` (same axes): ``(T + c × F, F)``."""
    return add(T, cross(c, F)) + F


def is_zero(x: Scalar) -> bool:
    """Whether ``x`` is a structural zero: a plain number or a sympy number equal to 0.
    A traced value, a symbolic expression or an array never is one (its value is not
    known where the equations are written)."""
    return (isinstance(x, int | float) or getattr(x, "is_Number", False) is True) and x == 0


def _sqrt(ar: Arithmetic, x: Scalar) -> Scalar:
    """``√x`` of one scalar (a float, an array of floats as one batched scalar, a traced
    value or a sympy expression) by the arithmetic's elementwise ``sqrt``."""
    return ar.sqrt(x)[()]


def central_gravity_potential(ar: Arithmetic, mu: Scalar, J2: Scalar, radius: Scalar,
                              mass: Scalar, inertia: Mat, r: Vec, pole: Vec) -> Scalar:  # fmt: skip
    """The potential of a body in a central field: MacCullagh's formula to second order
    in the body's size, plus the J2 zonal term on the mass centre,

    .. math:: V = -\\frac{\\mu m}{|r|} - \\frac{\\mu}{2|r|^3}\\left(\\operatorname{tr} I
        - \\frac{3\\, r^\\top I r}{|r|^2}\\right)
        + \\frac{\\mu m J_2 R^2}{2|r|^3}\\left(\\frac{3 z^2}{|r|^2} - 1\\right),
        \\qquad z = r \\cdot \\hat p

    (MacCullagh's formula: Hughes, *Spacecraft Attitude Dynamics*, 1986, ch. 8; Schaub
    and Junkins, *Analytical Mechanics of Space Systems*, the gravity-gradient torque;
    the J2 term: Vallado, *Fundamentals of Astrodynamics and Applications*, the zonal
    harmonics of the geopotential). ``r``: the mass centre
    from the field's centre; ``inertia``: about the mass centre; ``pole``: the unit J2
    axis; all in the same axes. ``radius``: J2's reference radius ``R``. ``ar`` gives
    ``sqrt`` (:mod:`kanedyn.spatial.arithmetic`). A J2 that is a plain zero adds no term.
    """
    trI = inertia[0][0] + inertia[1][1] + inertia[2][2]
    z = 0.0 if is_zero(J2) else dot(r, pole)
    terms = central_gravity_terms(
        ar, mu, J2, radius, mass, trI, dot(r, r), dot(r, mv(inertia, r)), z
    )
    return terms[0] + terms[1] if is_zero(J2) else terms[0] + terms[1] + terms[2]


def central_gravity_terms(ar: Arithmetic, mu: Scalar, J2: Scalar, radius: Scalar, mass: Scalar,
                          trI: Scalar, r2: Scalar, rIr: Scalar, z: Scalar) -> tuple[Scalar, Scalar, Scalar]:  # fmt: skip
    """The three terms of :func:`central_gravity_potential` as functions of the
    invariants ``r2 = |r|²``, ``rIr = rᵀ I r`` and ``z = r·p̂`` (and ``tr I``): the point
    mass ``-μ m/|r|``, MacCullagh's second-order term
    ``-μ/(2|r|³) (tr I - 3 rᵀIr/|r|²)`` and J2's ``μ m J₂ R²/(2|r|³) (3 z²/|r|² - 1)``
    (0 when ``J2`` is a plain zero). The energy-momentum step gives each its own
    discrete gradient (:mod:`kanedyn.simulation.conserving.field`)."""
    inv_r2 = 1.0 / r2
    inv_r = _sqrt(ar, inv_r2)
    inv_r3 = inv_r * inv_r2
    point = -mu * mass * inv_r
    gradient = -0.5 * mu * inv_r3 * (trI - 3.0 * rIr * inv_r2)
    oblate: Scalar = 0.0
    if not is_zero(J2):
        oblate = 0.5 * mu * mass * J2 * radius * radius * inv_r3 * (3.0 * z * z * inv_r2 - 1.0)
    return point, gradient, oblate


def central_gravity(ar: Arithmetic, mu: Scalar, J2: Scalar, radius: Scalar, mass: Scalar,
                    inertia: Mat, r: Vec, pole: Vec) -> tuple[Vec, Vec]:  # fmt: skip
    """The force ``F`` on a body's mass centre and the torque ``T`` about it in a central
    field: ``F = -∂V/∂r``, ``T`` the gradient of ``V`` (:func:`central_gravity_potential`,
    same arguments) under a rotation of the body, so both conserve its energy:

    .. math:: F = -\\frac{\\mu m}{|r|^3} r - \\frac{3\\mu}{2|r|^5}\\left[(\\operatorname{tr} I) r
        + 2 I r - \\frac{5\\, r^\\top I r}{|r|^2} r\\right]
        - \\frac{3 \\mu m J_2 R^2}{2|r|^5}\\left[\\left(1 - \\frac{5 z^2}{|r|^2}\\right) r
        + 2 z \\hat p\\right],
        \\qquad T = \\frac{3\\mu}{|r|^5}\\, r \\times (I r)

    (the gravity-gradient torque of Hughes 1986, ch. 8; the second-order force and the
    J2 acceleration are the same potential's gradient in ``r``). The vectors are in the
    axes of ``r``.
    """
    r2 = dot(r, r)
    inv_r2 = 1.0 / r2
    inv_r = _sqrt(ar, inv_r2)
    inv_r3 = inv_r * inv_r2
    inv_r5 = inv_r3 * inv_r2
    Ir = mv(inertia, r)
    trI = inertia[0][0] + inertia[1][1] + inertia[2][2]
    rIr = dot(r, Ir)
    c = 1.5 * mu * inv_r5
    radial = -mu * mass * inv_r3 - c * (trI - 5.0 * rIr * inv_r2)
    F = [radial * r[i] - 2.0 * c * Ir[i] for i in range(3)]
    if not is_zero(J2):
        z = dot(r, pole)
        cj = 1.5 * mu * mass * J2 * radius * radius * inv_r5
        a = cj * (1.0 - 5.0 * z * z * inv_r2)
        b = 2.0 * cj * z
        F = [F[i] - a * r[i] - b * pole[i] for i in range(3)]
    T = scale(2.0 * c, cross(r, Ir))
    return F, T


def solve_spd(D: Mat, B: list[Vec]) -> list[Vec]:
    """``D⁻¹ b`` for each right-hand side ``b`` in ``B`` (D symmetric positive definite)
    by an unrolled :math:`D = L\\,\\mathrm{diag}(d)\\,L^\\top` without pivoting:

    .. math::

        W_{ij} = D_{ij} - \\sum_{k<j} W_{ik} L_{jk}, \\quad d_j = W_{jj}, \\quad
        L_{ij} = W_{ij} / d_j \\quad (i > j),

        y_i = b_i - \\sum_{k<i} L_{ik} y_k, \\qquad
        x_i = y_i / d_i - \\sum_{k>i} L_{ki} x_k

    (Golub & Van Loan, *Matrix Computations*, 4th ed., 2013, sec. 4.1.2). Only the lower
    triangle of ``D`` is read. On any arithmetic (floats, traced values, sympy): a
    product with a structural zero (:func:`is_zero`) is skipped, each sum is formed term
    by term (sympy flattens it into one ``Add``; nothing is multiplied out), and each
    pivot's reciprocal is formed once.

    Raises
    ------
    ZeroDivisionError
        If a pivot is a structural zero (for sympy, zero for every value of its symbols).
    """

    def reciprocal(j: int, pivot: Scalar) -> Scalar:
        if is_zero(pivot):
            raise ZeroDivisionError(f"pivot {j + 1} of the LDLᵀ factorization is zero")
        return 1 / pivot

    L, inv = _ldl(D, reciprocal)
    return [_substitute(L, inv, b) for b in B]


def _ldl(D: Mat, reciprocal: Any) -> tuple[Mat, list[Scalar]]:
    """The unrolled :math:`D = L\\,\\mathrm{diag}(d)\\,L^\\top` of :func:`solve_spd`
    (lower triangle of ``D`` read; products with a structural zero skipped): ``L`` and
    ``reciprocal(j, d_j)`` for each stage, the pivot's reciprocal as the caller forms it
    (zero for a stage left out, whose column of ``L`` is then zero)."""
    d = len(D)
    W: Mat = [[None] * d for _ in range(d)]
    L: Mat = [[None] * d for _ in range(d)]
    inv: list[Scalar] = [None] * d
    for j in range(d):
        for i in range(j, d):
            s = D[i][j]
            for k in range(j):
                if not (is_zero(W[i][k]) or is_zero(L[j][k])):
                    s = s - W[i][k] * L[j][k]
            W[i][j] = s
        inv[j] = reciprocal(j, W[j][j])
        for i in range(j + 1, d):
            L[i][j] = W[i][j] if is_zero(W[i][j]) else W[i][j] * inv[j]
    return L, inv


def _substitute(L: Mat, inv: list[Scalar], b: Vec) -> Vec:
    """``x = L⁻ᵀ diag(inv) L⁻¹ b``: the forward and back substitutions of :func:`_ldl`'s
    factors."""
    d = len(L)
    y = list(b)
    for i in range(d):
        for k in range(i):
            if not (is_zero(L[i][k]) or is_zero(y[k])):
                y[i] = y[i] - L[i][k] * y[k]
    x = [y[i] * inv[i] for i in range(d)]
    for i in reversed(range(d)):
        for k in range(i + 1, d):
            if not (is_zero(L[k][i]) or is_zero(x[k])):
                x[i] = x[i] - L[k][i] * x[k]
    return x


def solve_spd_truncated(ar: Arithmetic, D: Mat, b: Vec, tol: float) -> Vec:
    """``x`` with ``D x = b`` on the rows ``D`` keeps, ``D`` (m × m) symmetric positive
    semidefinite, by the unrolled :math:`LDL^T` of :func:`solve_spd` truncated: a stage
    whose pivot ``d_j`` is below ``tol² δ``, ``δ = max_i D_ii``, is left out (its
    ``1/d_j`` and its column of ``L`` are zero), so ``x_j = 0`` and the later stages are
    those of the other rows. With ``D = A Aᵀ`` the pivot ``d_j`` is the squared length of
    row j's part independent of the rows kept before it (Gram-Schmidt) and ``δ`` the
    squared length of the longest row, so a row nearly dependent on the kept ones, or
    itself nearly zero, is left out, and ``Aᵀx`` is the basic minimum-norm solution of
    the kept rows (the truncated QR of ``Aᵀ`` in the rows' order, Golub & Van Loan 2013,
    sec. 5.4.2, without the column pivoting, which would lose the zeros of ``D``).

    Branch-free (``[d_j ≥ tol² δ]`` by :func:`at_least_zero` on ``ar``), so the rows are kept or
    left out again at every evaluation, from the values; the structural zeros of ``D``
    are kept as :func:`solve_spd` keeps them. Only the lower triangle of ``D`` is read."""
    L, inv, _, _ = _truncated_ldl(ar, D, tol)
    return _substitute(L, inv, b)


def truncation_clear(ar: Arithmetic, D: Mat, tol: float, margin: float) -> Scalar:
    """1.0 when every pivot of :func:`solve_spd_truncated`'s factorization of ``D`` at
    ``tol`` is at least ``(margin·tol)² δ``, so that no stage is near being left out
    (with ``D = A Aᵀ``: every row's part independent of the rows before it is at least
    ``margin·tol`` of the longest row); 0.0 otherwise. Branch-free, and on the same
    factorization (on a tape, the operations are shared with the solve)."""
    _, _, pivots, big = _truncated_ldl(ar, D, tol)
    floor = (margin * tol) ** 2 * big
    clear: Scalar = 1.0
    for pivot in pivots:
        clear = clear * at_least_zero(ar, pivot - floor)
    return clear


def _truncated_ldl(ar: Arithmetic, D: Mat, tol: float
                   ) -> tuple[Mat, list[Scalar], list[Scalar], Scalar]:  # fmt: skip
    """:func:`solve_spd_truncated`'s factorization: ``L``, the pivots' reciprocals (0
    for a stage left out), the pivots and ``δ = max_i D_ii``."""
    d = len(D)
    big: Scalar = D[0][0] if d else 0.0  # max_i D_ii, branch-free
    for i in range(1, d):
        big = big + (D[i][i] - big) * at_least_zero(ar, D[i][i] - big)
    floor = (tol * tol) * big
    pivots: list[Scalar] = []

    def reciprocal(j: int, pivot: Scalar) -> Scalar:  # 0 for a stage left out
        pivots.append(pivot)
        kept = at_least_zero(ar, pivot - floor)
        return kept / (kept * pivot + (1.0 - kept))

    L, inv = _ldl(D, reciprocal)
    return L, inv, pivots, big


def _vdot(a: Vec, b: Vec) -> Scalar:
    """``a · b`` of vectors of any length, term by term."""
    acc: Scalar = 0.0
    for x, y in zip(a, b, strict=True):
        acc = acc + x * y
    return acc


def at_least_zero(ar: Arithmetic, x: Scalar) -> Scalar:
    """``[x ≥ 0]`` as 0 or 1, branch-free: ``(1 + sign(x)) / 2`` (``sign`` is
    ``copysign(1, x)``, so ``x - x = +0`` counts as ``≥ 0``)."""
    return (1.0 + ar.sign(x)[()]) * 0.5


def solve_pivoted(ar: Arithmetic, D: Mat, B: list[Vec], rank: int) -> list[Vec]:
    """A solution ``x`` of ``D x = b`` for each ``b`` in ``B``, ``D`` (m × m) symmetric
    positive semidefinite of rank ``rank`` and each ``b`` in its range: the
    :math:`LDL^T` factorization with diagonal (symmetric) pivoting, the rank-revealing
    Cholesky of a semidefinite matrix (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., 2002, sec. 10.3). Stage k takes as pivot the largest diagonal
    entry of the Schur complement ``S`` among the rows not yet taken, ``p_k``, and
    updates ``S ← S - g gᵀ / δ`` with ``g = S e_p``, ``δ = g_p``; after ``rank`` stages the
    rows ``p_0 … p_{r-1}`` are independent and the best conditioned the greedy choice
    finds, and ``x`` is supported on them: ``D_PP x_P = b_P`` by the factors
    ``W_ak = g_k[p_a]``, ``δ_k`` (as :func:`solve_spd`), which solves every row since the
    others depend on them.

    Branch-free on every arithmetic with ``sign``: the pivot is a one-hot weight
    vector, ``e_i = Π_{j<i} [s_j < s_i] Π_{j>i} [s_i ≥ s_j]`` on the scores ``s_i`` (the
    diagonal, minus ``|S_ii| + tr D`` for the rows already taken; ``[·]`` by
    :func:`at_least_zero`), so the choice is made again at every evaluation, from the values.
    Only the lower triangle of ``D`` is read."""
    m = len(D)
    S: Mat = [[D[i][j] if i >= j else D[j][i] for j in range(m)] for i in range(m)]
    trace: Scalar = 0.0
    for i in range(m):
        trace = trace + ar.abs(D[i][i])[()]
    taken: Vec = [0.0] * m
    pivots: list[Vec] = []  # e_k, one-hot
    cols: list[Vec] = []  # g_k
    inv: list[Scalar] = []  # 1 / δ_k
    for stage in range(rank):
        s = [S[i][i] - taken[i] * (ar.abs(S[i][i])[()] + trace) for i in range(m)]
        ge = {(i, j): at_least_zero(ar, s[i] - s[j]) for i in range(m) for j in range(i + 1, m)}
        e: Vec = []
        for i in range(m):
            w: Scalar = 1.0
            for j in range(m):
                if j < i:
                    w = w * (1.0 - ge[j, i])
                elif j > i:
                    w = w * ge[i, j]
            e.append(w)
        g = [_vdot(S[i], e) for i in range(m)]
        d_inv = 1 / _vdot(e, g)
        if stage + 1 < rank:  # the Schur complement (symmetric: lower triangle, mirrored)
            gd = [x * d_inv for x in g]
            for i in range(m):
                for j in range(i + 1):
                    S[i][j] = S[i][j] - g[i] * gd[j]
                    S[j][i] = S[i][j]
        taken = add(taken, e)
        pivots.append(e)
        cols.append(g)
        inv.append(d_inv)
    W = [[_vdot(pivots[a], cols[k]) for k in range(a)] for a in range(rank)]
    out = []
    for b in B:
        y = [_vdot(e, b) for e in pivots]
        for a in range(rank):
            for k in range(a):
                y[a] = y[a] - W[a][k] * inv[k] * y[k]
        mu = [y[a] * inv[a] for a in range(rank)]
        for a in reversed(range(rank)):
            for k in range(a + 1, rank):
                mu[a] = mu[a] - W[k][a] * inv[a] * mu[k]
        x: Vec = [0.0] * m
        for a in range(rank):
            x = add(x, scale(mu[a], pivots[a]))
        out.append(x)
    return out
