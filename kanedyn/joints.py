"""The joint model, written once: what each joint kind contributes to every engine.

Stoneking's joint (42 Joints slides 10-17; refs/notes/42-kane-msd.md §3) connects an inner
body Bi (or N) to an outer body Bo through the frames Gi (fixed in Bi) and Go (fixed in
Bo). Per joint kind this module gives

* :func:`motion`, the joint's whole motion (Pinocchio's joint ``calc``): ``R_Gi_Go``, the
  slide offset ``Δ d``, the motion subspace ``S``, its rate ``Ṡ``, the joint velocity
  ``v_J = S ν`` and bias ``c_J = Ṡ ν``, all in Go, for one joint of any kind; every
  recursion takes a joint's motion from it;
* the rotation ``R_Gi_Go`` and the partial ``Γ`` (``ω_rel = Γ σ`` in Go), with ``Γ̇`` and
  ``Γ̇σ``: :func:`gimbal` (1-3 Euler angles), :func:`spherical` (a quaternion);
* the translational map: the slide offset ``Δ d`` and velocity ``Δ ṡ`` along the Gi
  axes ``Δ`` (:func:`slide`);
* the kinematic equations ``q̇(q, u)`` (:func:`qdot`) and the quaternion normalization
  (:func:`normalize_quaternions`);
* the joint springs and dampers as generalized forces (:func:`spring_damper`, MuJoCo's
  polynomial law), their potential (:func:`spring_potential`) and its discrete gradient
  (:func:`spring_discrete_gradient`); a spherical joint's spring potential in its
  rotation vector, with MuJoCo's radial terms (:func:`spherical_spring`);
* the closure of a loop joint (:class:`kanedyn.Loop`): its configuration constraints
  ``Φ``, their velocity form and their acceleration (bias) terms
  (:func:`loop_rotation`, :func:`loop_translation`, :func:`loop_constraint_axes`).

Every function is written over the arithmetic protocol (:mod:`kanedyn.spatial.arithmetic`):
the dense engine runs it on float arrays (all joints of a kind, and every batch member,
at once), the compiled engine on traced values (:data:`kanedyn.codegen.TRACE`), the
symbolic Kane and Lagrange paths on sympy expressions
(:data:`kanedyn.symbolic.arithmetic.SYMPY`). A new joint kind goes here, and every
engine has it.

Index arrays (``angle_q``, ``quat_q``, ...) come from the model's layout
(:class:`kanedyn.model.Model`); arrays carry leading batch axes ``...``.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.spatial import charts
from kanedyn.spatial.algebra import cross
from kanedyn.spatial.arithmetic import NUMPY, Arithmetic
from kanedyn.spatial.charts import EulerAxes, euler_axes

__all__ = [
    "EulerAxes",
    "JointMotion",
    "euler_axes",
    "gimbal",
    "loop_constraint_axes",
    "loop_rotation",
    "loop_translation",
    "motion",
    "normalize_quaternions",
    "qdot",
    "slide",
    "spherical",
    "damper_force",
    "damper_rate",
    "spring_damper",
    "spring_discrete_gradient",
    "spring_energy",
    "spring_potential",
    "spherical_spring",
    "spherical_spring_force",
    "spherical_spring_gradient",
    "quat_log",
    "subspace",
    "subspace_rows",
]

_EYE_INT = np.eye(3, dtype=int)  # exact on every arithmetic

Array = NDArray[Any]


def gimbal(
    ar: Arithmetic, axes: EulerAxes, theta: Array, sigma: Array, dof: int = 3
) -> tuple[Array, Array, Array, Array]:
    """A gimbal joint: ``R_Gi_Go``, ``Γᵀ``, ``Γ̇`` and ``Γ̇σ`` (Go components).

    .. math::

        R_{G_i G_o} = R_1(\\theta_1) R_2(\\theta_2) R_3(\\theta_3), \\quad
        \\Gamma = [R_3^T R_2^T e_1 \\,|\\, R_3^T e_2 \\,|\\, e_3], \\quad
        \\dot\\gamma_1 = \\gamma_1 \\times (\\sigma_2\\gamma_2 + \\sigma_3\\gamma_3), \\;
        \\dot\\gamma_2 = \\gamma_2 \\times \\sigma_3\\gamma_3, \\; \\dot\\gamma_3 = 0

    (42 ``JointPartials``; Kane_NBody slides 10-12). The speeds are the angle rates,
    ``σ = θ̇``. Columns of Γ beyond the joint's DOF are its rotational constraint axes
    (Kane Constraints slide 8).

    Parameters
    ----------
    ar : Arithmetic
    axes : EulerAxes
        The joints' sequences (:func:`euler_axes`), (..., 3, 3).
    theta, sigma : array (..., 3)
        Angles and rates, zero beyond the joint's DOF.
    dof : int
        The largest number of angles (1-3) of these joints.

    Returns
    -------
    R_Gi_Go (..., 3, 3), GammaT (..., 3, 3) rows ``γ_j``, Gamma_dot (..., 3, 3) columns
    ``γ̇_j``, Gds (..., 3).
    """
    R, GammaT = charts.euler(ar, axes, theta, dof)
    Gamma_dot, Gds = charts.euler_gamma_dot(GammaT, sigma, dof)
    return R, GammaT, Gamma_dot, Gds


def spherical(quat: Array, unit: bool = False) -> tuple[Array, Array, Array, Array]:
    """A spherical joint: ``R_Gi_Go`` of its quaternion (normalized: divided by ``|q|²``,
    unless ``unit`` says the quaternion has unit length), ``Γ = U`` (the speeds are Go's
    angular velocity relative to Gi, in Go) and ``Γ̇ = 0``. Shapes as :func:`gimbal`,
    from ``quat`` (..., 4)."""
    R = charts.quat_dcm_form(quat) if unit else charts.quat_to_dcm(quat)
    zero = R * 0
    return R, zero + _EYE_INT, zero, zero[..., 0]


def slide(Delta: Array, d: Array) -> Array:
    """The translational map of slides along the Gi axes: ``Δ d`` (Gi components).

    ``Delta`` (..., 3, 3) holds the slide axes as columns (zero beyond the joint's
    translational DOF), ``d`` (..., 3) the displacements; the same map gives the slide
    velocity ``Δ ṡ`` and acceleration ``Δ s̈`` (42 Translational Joints slides 3-5).
    """
    return (Delta @ d[..., None])[..., 0]


def subspace_rows(
    GammaT: Array, R: Array, Delta: Array, slides: bool = True
) -> tuple[Array, Array | None]:
    """The two blocks of the motion subspace of joints in Go (:func:`subspace`): the
    rotational rows ``γ_j`` (``γ_j = Γ[:, j]``, the rows of ``GammaT``) and the slide rows
    ``R_Gi_Goᵀ Δ_c`` (``Δ_c = Delta[:, c]``, the slide axis in Gi seen in Go), each
    (..., 3, 3); the second is ``None`` when ``slides`` says that no joint slides (42
    Joints slides 10-17, Translational Joints slides 3-8). Any arithmetic."""
    return GammaT, (Delta.swapaxes(-1, -2) @ R if slides else None)  # rows (R_Gi_Goᵀ Δ_c)ᵀ


def subspace(GammaT: Array, R: Array, Delta: Array) -> Array:
    """The motion subspace of joints in Go, one row per speed slot, shape (..., 6, 6):
    row ``j < 3`` is ``(γ_j, 0)``, row ``3 + c`` is ``(0, R_Gi_Goᵀ Δ_c)``
    (:func:`subspace_rows`): the columns of :attr:`JointMotion.S` over all six slots.

    A slot the joint does not use holds whatever ``Γ`` or ``Δ`` hold there (the
    constraint axes, or zero); its speed is zero. Any arithmetic (``R``, ``Δ`` (...,
    3, 3)).
    """
    rot_rows, slide_rows = subspace_rows(GammaT, R, Delta)
    assert slide_rows is not None
    shape, dtype = slide_rows.shape, slide_rows.dtype
    if rot_rows.shape != shape:  # (the checks cost more than the work on one state)
        shape = np.broadcast_shapes(rot_rows.shape, shape)
    if rot_rows.dtype != dtype:
        dtype = np.result_type(rot_rows, slide_rows)
    S = np.zeros(shape[:-2] + (6, 6), dtype=dtype)
    S[..., :3, :3] = rot_rows  # (γ_j, 0)
    S[..., 3:, 3:] = slide_rows  # (0, R_Gi_Goᵀ Δ_c)
    return S


@attrs.frozen(eq=False)
class JointMotion:
    """One joint's motion, in Go about the joint point (spatial motion vectors (ω, v)).

    ``R`` (..., 3, 3) ``R_Gi_Go``; ``d`` (..., 3) the slide offset ``Δ d`` in Gi;
    ``S`` (..., 6, n) the motion subspace, one column per speed (rotational first): ``(γ_j,
    0)`` for a rotational speed, ``(0, R_Gi_Goᵀ Δ_c)`` for a slide; ``S_dot`` (..., 6, n)
    the rate of each column in Go, ``(γ̇_j, 0)`` and ``(0, (R_Gi_Goᵀ Δ_c) × ω_J)``;
    ``v_J`` (..., 6) ``= S ν`` the velocity of Go relative to Gi; ``c_J`` (..., 6)
    ``= Ṡ ν = (Γ̇σ, -ω_J × R_Gi_Goᵀ Δ ṡ)``, with ``ω_J = Γσ``.
    """

    R: Array
    d: Array
    S: Array
    S_dot: Array
    v_J: Array
    c_J: Array


def _slide_axes(joint: Any) -> Array:
    """Δ (3, trn_dof): the joint's slide axes in Gi, as columns (exact integers)."""
    return _EYE_INT[:, [int(ch) - 1 for ch in joint.trn_seq[: joint.trn_dof]]]


def motion(
    joint: Any, q: Array, u: Array, ar: Arithmetic = NUMPY, *, unit: bool = False
) -> JointMotion:
    """The motion of one joint at its coordinates ``q`` and speeds ``u``: Pinocchio's
    joint ``calc`` for Stoneking's joint (42 Joints slides 10-17, Translational Joints
    slides 3-8; refs/notes/42-kane-msd.md §3).

    .. math::

        R_{G_iG_o} = R(q_{rot}), \\quad
        S = \\begin{bmatrix} \\Gamma & 0 \\\\ 0 & R_{G_iG_o}^T \\Delta \\end{bmatrix}, \\quad
        v_J = S \\begin{bmatrix}\\sigma \\\\ \\dot s\\end{bmatrix}, \\quad
        c_J = \\begin{bmatrix} \\dot\\Gamma\\sigma \\\\
              -(\\Gamma\\sigma) \\times R_{G_iG_o}^T \\Delta \\dot s \\end{bmatrix}

    ``R``, ``Γ`` and ``Γ̇σ`` come from :func:`gimbal` or :func:`spherical`, ``Δ d`` from
    :func:`slide`; the blocks above are written here once, for every engine.

    Parameters
    ----------
    joint : kanedyn.Joint
        Its kind, sequences and numbers of degrees of freedom.
    q : array (..., nq_k)
        The joint's coordinates, rotational first (``model.coordinates(joint)``):
        angles, or a quaternion (scalar last; any length, R is normalized), then slides.
    u : array (..., n_k)
        Its speeds, rotational first (``model.speeds(joint)``).
    ar : Arithmetic
        The arithmetic of ``q`` and ``u``: :data:`~kanedyn.spatial.arithmetic.NUMPY`
        (default), the tracer's or sympy's.
    unit : bool
        The caller has normalized the quaternion (:func:`normalize_quaternions`): ``R``
        is then its DCM form, without the division by ``|q|²``.

    Returns
    -------
    JointMotion

    >>> import numpy as np, kanedyn as kd
    >>> from kanedyn import joints
    >>> j = kd.Joint.revolute("hinge", inner="a", outer="b", axis=3)
    >>> m = joints.motion(j, np.array([np.pi / 2]), np.array([2.0]))
    >>> m.v_J.tolist()
    [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]
    """
    q, u = np.asarray(q), np.asarray(u)
    nr, nt = joint.rot_dof, joint.trn_dof
    batch = np.broadcast_shapes(q.shape[:-1], u.shape[:-1])
    exact = q.dtype == object or u.dtype == object
    zeros = np.zeros(batch + (3, 3 + nr + nt), dtype=int if exact else float)
    zeros = zeros.astype(object) if exact else ar.const(zeros)
    zero3, zero = zeros[..., :3], zeros[..., 3:]  # (..., 3, 3), (..., 3, n)
    sigma = u[..., :nr]
    if joint.rot_type == "spherical":
        R, GammaT, Gamma_dot, Gds = spherical(q[..., :4], unit)
    else:
        e = np.eye(3)[[int(ch) - 1 for ch in joint.rot_seq]]
        theta = np.concatenate((q[..., :nr], zero3[..., 0, nr:]), axis=-1)
        rates = np.concatenate((sigma, zero3[..., 0, nr:]), axis=-1)
        R, GammaT, Gamma_dot, Gds = gimbal(ar, euler_axes(ar, e), theta, rates, nr)
    R = zero3 + R  # with the batch axes (a constant R has none)
    Delta = np.concatenate((_slide_axes(joint), _EYE_INT[:, : 3 - nt] * 0), axis=-1)
    slots = list(range(nr)) + list(range(3, 3 + nt))
    S = subspace(GammaT, R, Delta)[..., slots, :].swapaxes(-1, -2)
    S = S + np.concatenate((zero, zero), axis=-2)  # with the batch axes
    dtop, dbottom = zero.copy(), zero.copy()
    dtop[..., :nr] = Gamma_dot[..., :, :nr]
    omega_J = (S[..., :3, :nr] @ sigma[..., None])[..., 0] if nr else zero3[..., 0]
    d = slide(_slide_axes(joint), q[..., joint.n_rot_coordinates :]) if nt else zero3[..., 0]
    if nt:
        cols = S[..., 3:, nr:]  # R_Gi_Goᵀ Δ_c
        dbottom[..., nr:] = cross(cols.swapaxes(-1, -2), omega_J[..., None, :]).swapaxes(-1, -2)
        v_lin = (cols @ u[..., nr:, None])[..., 0]
    else:
        v_lin = zero3[..., 0]
    S_dot = np.concatenate((dtop, dbottom), axis=-2)
    v_J = np.concatenate((omega_J, v_lin), axis=-1)
    c_J = np.concatenate((zero3[..., 0] + Gds, -cross(omega_J, v_lin)), axis=-1)
    return JointMotion(R=R, d=d, S=S, S_dot=S_dot, v_J=v_J, c_J=c_J)


def qdot(layout: Any, q: Array, u: Array) -> Array:
    """The kinematic equations ``q̇(q, u)``, shape (..., nq).

    Angles and slide displacements: ``q̇ = u`` (their speeds are their rates).
    Quaternions: ``q̇ = ½ q ⊗ [ω, 0]`` with ω the joint's speeds (Go components; 42's
    ``QW2QDOT``).
    """
    qd = np.zeros_like(q)
    qd[..., layout.angle_q] = u[..., layout.angle_u]
    if layout.quat_q.size:
        qd[..., layout.quat_q] = charts.quat_rate(q[..., layout.quat_q], u[..., layout.quat_u])
    return qd


def normalize_quaternions(ar: Arithmetic, layout: Any, q: Array) -> Array:
    """``q`` with every joint quaternion scaled to unit length (a copy), shape (..., nq).
    42's ``KaneNBodyRK4`` does this before every stage."""
    if not layout.quat_q.size:
        return q
    q = q.copy()
    q[..., layout.quat_q] = charts.quat_normalize(ar, q[..., layout.quat_q])
    return q


def damper_force(
    damping: Array, damping_poly: Array | None, v: Array, ar: Arithmetic = NUMPY
) -> Array:
    """MuJoCo's polynomial damper law ``f(v) = c₁ v + c₂ v|v| + c₃ v³`` (the force on the
    speed is ``-f(v)``), elementwise (mujoco.readthedocs.io, Computation, "Polynomial
    forces": the even power anti-symmetrized, so that ``f`` is odd).

    ``damping`` (...) holds ``c₁``, ``damping_poly`` (..., 2) ``(c₂, c₃)`` (None: linear,
    ``c₁ v`` only); ``ar`` the arithmetic of ``v`` (its ``abs`` gives ``|v|``).
    """
    f = damping * v
    if damping_poly is not None:
        f = f + damping_poly[..., 0] * (v * ar.abs(v)) + damping_poly[..., 1] * (v * v * v)
    return f


def spring_damper(
    layout: Any,
    stiffness: Array,
    damping: Array,
    q: Array,
    u: Array,
    stiffness_poly: Array | None = None,
    damping_poly: Array | None = None,
    ar: Arithmetic = NUMPY,
) -> Array:
    """Generalized forces of the joint springs and dampers on angles and slides, and the
    dampers of spherical joints, shape (..., n).

    .. math:: Q_r = -(k_r q_r + k_{2r} q_r^2 + k_{3r} q_r^3)
                    - (c_r u_r + c_{2r} u_r |u_r| + c_{3r} u_r^3)
              \\;(\\text{angle or slide } r), \\qquad
              Q_r = -(c_r \\omega_r + c_{2r} \\omega_r |\\omega_r| + c_{3r} \\omega_r^3)
              \\;(\\text{spherical})

    MuJoCo's polynomial spring and damper (``stiffness="k k₂ k₃"``, ``damping="c c₂
    c₃"``; mujoco.readthedocs.io, Computation, "Polynomial forces"; its
    ``mj_springdamper``). The spring is the generalized force of the potential
    :func:`spring_energy`, the damper that of :func:`damper_force` (virtual work
    ``Q δq``), not 42's ``Γ τ``. ``stiffness``, ``damping`` (..., n) hold one value per
    speed, ``stiffness_poly``, ``damping_poly`` (..., n, 2) the higher-order coefficients
    ``(k₂, k₃)``, ``(c₂, c₃)`` per speed (None: none). ``ar`` is the arithmetic of ``q``
    and ``u`` (``|u|`` needs its ``abs``). A spherical joint's spring
    is ``-J_r⁻ᵀ(φ) ∇V(φ)`` (:func:`spherical_spring_force`, ``V`` of
    :func:`spherical_spring`), left out when its stiffness is structurally zero.
    """
    Q = -damper_force(damping, damping_poly, u, ar)
    x = q[..., layout.angle_q]
    k = stiffness[..., layout.angle_u]
    if stiffness_poly is not None:
        kp = stiffness_poly[..., layout.angle_u, :]
        k = k + x * (kp[..., 0] + kp[..., 1] * x)  # k + k₂ x + k₃ x²
    Q[..., layout.angle_u] = Q[..., layout.angle_u] - k * x
    if layout.quat_u.size:
        ks = stiffness[..., layout.quat_u]
        kps = None if stiffness_poly is None else stiffness_poly[..., layout.quat_u[:, 0], :]
        if not (_is_zero(ks) and (kps is None or _is_zero(kps))):
            f = spherical_spring_force(ks, kps, q[..., layout.quat_q], ar)
            shape = np.broadcast_shapes(Q.shape[:-1], f.shape[:-2])
            if Q.shape[:-1] != shape:
                Q = np.broadcast_to(Q, shape + Q.shape[-1:]).copy()
            Q[..., layout.quat_u] = Q[..., layout.quat_u] + f
    return Q


def _is_zero(arr: Any) -> bool:
    """Whether every element is a number equal to 0 (a structural zero; a traced or
    symbolic value is not)."""
    arr = np.asarray(arr)
    if arr.dtype != object:  # numbers: one comparison over the array
        return not np.any(arr)
    return all(bool(x == 0) for x in arr.ravel())


#: ``asin(s)/s = Σ aₙ s²ⁿ``, ``aₙ = (2n)! / (4ⁿ (n!)² (2n+1))`` (Abramowitz & Stegun
#: 4.4.40), for ``s² ≤ sin²(π/256)`` after :data:`_HALVINGS` half-angle steps: the first
#: term left out is below 1e-21
_ASINC = (1.0, 1 / 6, 3 / 40, 5 / 112, 35 / 1152, 63 / 2816, 231 / 13312)
_HALVINGS = 6
#: ``β(θ) = 1/θ² - cot(θ/2)/(2θ) = Σ bₙ θ²ⁿ`` (the Bernoulli series of ``cot``), used
#: for ``sin²(θ/2) < _BETA_SERIES`` (θ² < 4e-4: the first term left out is below 1e-35)
_BETA = (1 / 12, 1 / 720, 1 / 30240, 1 / 1209600)
_BETA_SERIES = 1e-4
#: below this ``|φ|²``, ``|φ|`` is taken as 0 (so that its derivative is finite at 0)
_TINY = 1e-300


def _poly(coefs: tuple[float, ...], x: Any) -> Any:
    acc: Any = coefs[-1]
    for a in coefs[-2::-1]:
        acc = a + x * acc
    return acc


def quat_log(quat: Array, ar: Arithmetic = NUMPY) -> tuple[Array, Array, Array, Array]:
    """The rotation vector ``φ = θ n`` (θ ∈ [0, π]) of quaternions ``quat`` (..., 4),
    ``(x, y, z, w)``, not necessarily of unit norm, on the arithmetic protocol with no
    branch on the value. With ``q ← sign(w) q / |q|`` (so ``w ≥ 0``), ``s = |q_v| =
    sin α``, ``c = w = cos α``, ``α = θ/2 ∈ [0, π/2]``:

    .. math:: \\varphi = 2 F\\, q_v, \\qquad F = \\frac{\\alpha}{\\sin\\alpha}
              = \\frac{\\operatorname{asin}(s_k)/s_k}{c_1 c_2 \\cdots c_k},
              \\qquad c_{j+1} = \\sqrt{\\tfrac12 (1 + c_j)}, \\quad
              s_{j+1}^2 = \\frac{s_j^2}{2 (1 + c_j)}

    (``k`` = :data:`_HALVINGS` half-angle steps ``α_{j+1} = α_j / 2``, so that
    ``s_k ≤ sin(π/2^{k+1})`` and the series of ``asin(s)/s`` is exact to round-off;
    ``1 + c_j ≥ 1``, so no step cancels, and nothing divides by ``s``). The map of
    :func:`kanedyn.spatial.rotation.quat_to_rotvec`, traceable. Returns ``φ`` (..., 3),
    ``F`` (...), ``c = cos α`` (...) and ``s² = sin² α`` (...).
    """
    v, w = quat[..., :3], quat[..., 3]
    vv = np.sum(v * v, axis=-1)
    n2 = vv + w * w
    n = ar.sqrt(n2)
    c0 = ar.abs(w) / n
    s2 = vv / n2
    c, x, P = c0, s2, 1.0
    for _ in range(_HALVINGS):
        x = x / (2.0 * (1.0 + c))
        c = ar.sqrt(0.5 * (1.0 + c))
        P = P * c
    F = _poly(_ASINC, x) / P
    phi = (2.0 * F * ar.sign(w) / n)[..., None] * v
    return phi, F, c0, s2


def spherical_spring_gradient(
    stiffness: Array, stiffness_poly: Array | None, phi: Array, ar: Arithmetic = NUMPY
) -> Array:
    """``∇V(φ) = K φ + (k₂ r + k₃ r²) φ``, ``r = |φ|``: the gradient of
    :func:`spherical_spring`'s potential, on the arithmetic protocol. ``stiffness``
    (..., 3) the diagonal of K, ``stiffness_poly`` (..., 2) ``(k₂, k₃)`` or None, ``phi``
    (..., 3). ``r`` is ``sqrt(r² + z) - z`` with the select ``z = 1`` below
    ``r² = 1e-300`` (else 0): ``r`` to round-off, with a finite derivative at ``φ = 0``.
    """
    grad = stiffness * phi
    if stiffness_poly is not None:
        r2 = np.sum(phi * phi, axis=-1)
        z = 0.5 - 0.5 * ar.sign(r2 - _TINY)
        r = ar.sqrt(r2 + z) - z
        radial = r * (stiffness_poly[..., 0] + stiffness_poly[..., 1] * r)
        grad = grad + radial[..., None] * phi
    return grad


def spherical_spring_force(
    stiffness: Array, stiffness_poly: Array | None, quat: Array, ar: Arithmetic = NUMPY
) -> Array:
    """The generalized force of a spherical joint's spring on its three speeds (the
    relative rate ω in Go axes), (..., 3):

    .. math:: Q = -J_r^{-T}(\\varphi)\\, \\nabla V(\\varphi), \\qquad
              J_r^{-T} g = g - \\tfrac12 \\varphi \\times g
                  + \\beta\\, \\varphi \\times (\\varphi \\times g), \\qquad
              \\beta = \\frac{1}{\\theta^2} - \\frac{\\cot(\\theta/2)}{2\\theta}
                  = \\frac{1 - \\alpha \\cot\\alpha}{4 \\alpha^2}

    the exact gradient of ``V`` (:func:`spherical_spring`) under ``ω = J_r(φ) φ̇``
    (``J_r`` the right Jacobian of SO(3); Bullo & Murray 1995): ``Q·ω = -dV/dt``. With
    ``α cot α = F c`` (:func:`quat_log`), ``β = (1 - F c) / (4 F² s²)``; below
    ``s² = 1e-4`` its series in ``θ² = 4 F² s²`` is taken instead, chosen by the select
    ``(1 ∓ sign(s² - 10⁻⁴))/2`` (exactly 0 or 1; the branch not taken stays finite, its
    divisor being ``s² + 1``). For isotropic K, ``J_r⁻ᵀ φ = φ`` and this is MuJoCo's
    ball-joint spring ``-(k + k₂ r + k₃ r²) φ``. ``stiffness`` (..., 3), ``stiffness_poly``
    (..., 2) or None, ``quat`` (..., 4) ``(x, y, z, w)``; ``ar`` the arithmetic of ``quat``.
    """
    phi, F, c, s2 = quat_log(quat, ar)
    g = spherical_spring_gradient(stiffness, stiffness_poly, phi, ar)
    small = 0.5 - 0.5 * ar.sign(s2 - _BETA_SERIES)
    exact = (1.0 - F * c) / (4.0 * F * F * (s2 + small))
    series = _poly(_BETA, 4.0 * F * F * s2)
    beta = small * series + (1.0 - small) * exact
    pg = cross(phi, g)
    return -(g - 0.5 * pg + beta[..., None] * cross(phi, pg))


def spring_energy(stiffness: Array, stiffness_poly: Array | None, x: Array) -> Array:
    """One coordinate's spring potential, elementwise (MuJoCo's ``mju_polyPotential``):

    .. math:: V(x) = \\tfrac12 k x^2 + \\tfrac13 k_2 x^3 + \\tfrac14 k_3 x^4

    so that ``-V'(x) = -(k x + k₂ x² + k₃ x³)`` is the spring of :func:`spring_damper`.
    ``stiffness`` (...) ``k``, ``stiffness_poly`` (..., 2) ``(k₂, k₃)`` or None.
    """
    c = 0.5 * stiffness
    if stiffness_poly is not None:
        c = c + x * (stiffness_poly[..., 0] / 3 + stiffness_poly[..., 1] * x / 4)
    return c * x * x


def spring_potential(
    layout: Any, stiffness: Array, stiffness_poly: Array | None, q: Array
) -> Array:
    """The potential of the angle and slide springs (:func:`spring_damper`), summed over
    the joints, shape (...): ``Σ_r V_r(q_r)`` with ``V`` of :func:`spring_energy`.
    Spherical joints' springs are not included
    (:func:`kanedyn.dynamics.loads.spring_potential` adds them).
    """
    kp = None if stiffness_poly is None else stiffness_poly[..., layout.angle_u, :]
    V = spring_energy(stiffness[..., layout.angle_u], kp, q[..., layout.angle_q])
    return np.sum(V, axis=-1)


def spherical_spring(
    stiffness: Array, stiffness_poly: Array | None, phi: Array, hessian: bool = False
) -> tuple[Array, ...]:
    """A spherical joint's spring potential in its rotation vector φ (NumPy), its
    gradient and (``hessian``) its Hessian in φ:

    .. math:: V(\\varphi) = \\tfrac12 \\varphi^T K \\varphi + \\tfrac13 k_2 r^3
                             + \\tfrac14 k_3 r^4, \\qquad r = |\\varphi|,

              \\nabla V = K\\varphi + (k_2 r + k_3 r^2)\\,\\varphi, \\qquad
              \\nabla^2 V = K + (k_2 r + k_3 r^2) I
                  + (k_2 / r + 2 k_3)\\,\\varphi\\varphi^T

    (the last term is zero at ``r = 0``, where ``φφᵀ/r → 0``). With an isotropic
    ``K = kI`` this is MuJoCo's ball-joint spring: ``∇V = (k + k₂ r + k₃ r²) φ``, the
    gradient of ``½ k r² + ⅓ k₂ r³ + ¼ k₃ r⁴`` (:func:`spring_energy` of ``r``;
    MuJoCo's ``mj_springdamper``, ``mju_polyPotential``). The generalized force on the
    joint's speeds is ``-J_r⁻ᵀ(φ) ∇V``
    (:func:`kanedyn.dynamics.loads.joint_spring_forces`). ``stiffness`` (..., 3) the
    diagonal of K, ``stiffness_poly`` (..., 2) ``(k₂, k₃)`` or None, ``phi`` (..., 3).
    Returns ``V`` (...), ``∇V`` (..., 3) and, with ``hessian``, ``∇²V`` (..., 3, 3).
    """
    V = 0.5 * np.sum(stiffness * phi * phi, axis=-1)
    grad = spherical_spring_gradient(stiffness, stiffness_poly, phi)
    H = np.zeros(phi.shape + (3,)) + stiffness[..., None] * np.eye(3)
    if stiffness_poly is not None:
        k2, k3 = stiffness_poly[..., 0], stiffness_poly[..., 1]
        r = np.sqrt(np.sum(phi * phi, axis=-1))
        V = V + spring_energy(0.0 * k2, stiffness_poly, r)
        radial = k2 * r + k3 * r * r
        if hessian:
            outer = k2 / np.where(r > 0.0, r, 1.0) + 2.0 * k3
            H = H + radial[..., None, None] * np.eye(3)
            H = H + outer[..., None, None] * phi[..., :, None] * phi[..., None, :]
    return (V, grad, H) if hessian else (V, grad)


def damper_rate(damping: Array, damping_poly: Array | None, v: Array) -> Array:
    """``f'(v) = c₁ + 2 c₂ |v| + 3 c₃ v²``, the derivative of :func:`damper_force`
    (NumPy, elementwise; Newton's tangent of the energy-momentum step)."""
    d = damping + 0 * v
    if damping_poly is not None:
        d = d + 2 * damping_poly[..., 0] * np.abs(v) + 3 * damping_poly[..., 1] * v * v
    return d


def spring_discrete_gradient(
    stiffness: Array, stiffness_poly: Array | None, x0: Array, x1: Array
) -> tuple[Array, Array]:
    """The discrete gradient of one coordinate's spring potential
    ``V(x) = ½ k x² + ⅓ k₂ x³ + ¼ k₃ x⁴`` (:func:`spring_energy`), elementwise, and its
    derivative in ``x1``:

    .. math:: \\bar\\nabla V = \\frac{V(x_1) - V(x_0)}{x_1 - x_0}
              = \\tfrac12 k (x_0 + x_1) + \\tfrac13 k_2 (x_0^2 + x_0 x_1 + x_1^2)
                + \\tfrac14 k_3 (x_0 + x_1)(x_0^2 + x_1^2)

    (Gonzalez 1996): the quotient divided out exactly, so it needs no branch at
    ``x1 = x0`` (where it is ``V'(x0)``). The energy-momentum step's springs
    (:mod:`kanedyn.simulation.conserving.step`): ``Δx · ∇̄V = V(x1) - V(x0)``.
    ``stiffness`` (...) ``k``, ``stiffness_poly`` (..., 2) ``(k₂, k₃)`` or None.
    """
    s = x0 + x1
    grad = 0.5 * stiffness * s
    dgrad = 0.5 * stiffness + 0 * s
    if stiffness_poly is not None:
        k2, k3 = stiffness_poly[..., 0], stiffness_poly[..., 1]
        grad = grad + k2 * (x0 * x0 + x0 * x1 + x1 * x1) / 3 + k3 * s * (x0 * x0 + x1 * x1) / 4
        dgrad = dgrad + k2 * (x0 + 2 * x1) / 3 + k3 * (x0 * x0 + 2 * x0 * x1 + 3 * x1 * x1) / 4
    return grad, dgrad


# --------------------------------------------------------------------------- loop joints
def loop_constraint_axes(
    rot_type: str, rot_dof: int, rot_seq: str, trn_dof: int, trn_seq: str
) -> tuple[list[tuple[int, int]], list[int]]:
    """The constrained directions of a loop joint, from its structure (0-based axes).

    Rotations: pairs ``(x, y)`` of a Go axis x and a Gi axis y that must stay
    perpendicular, ``Φ = x_o · y_i = 0``. For the gimbal sequence ``a b c``:

    * ``rot_dof = 0`` (no relative rotation, ``R_Gi_Go = U``): (a, b), (a, c), (b, c);
    * ``rot_dof = 1`` (a hinge about a): Go's axis a stays Gi's axis a: (a, b), (a, c);
    * ``rot_dof = 2`` (a universal joint, ``R_a(θ1) R_b(θ2)``): Go's axis b stays
      perpendicular to Gi's axis a: (b, a);
    * ``rot_dof = 3`` or spherical: none.

    Translations: the Gi axes that are not slide axes (slides come first, along Gi), with
    ``Φ = d_i · (o_Go - o_Gi) = 0``.

    Each set is exact: ``R_Gi_Go`` is a rotation of the joint's gimbal, and the Go
    origin lies on the joint's slide axes, if and only if every ``Φ`` is zero (up to the
    flipped branches ``x_o = -x_i`` that Newton started near the closure does not reach).
    """
    a, b, c = (int(ch) - 1 for ch in rot_seq)
    if rot_type == "spherical" or rot_dof == 3:
        pairs: list[tuple[int, int]] = []
    elif rot_dof == 2:
        pairs = [(b, a)]
    elif rot_dof == 1:
        pairs = [(a, b), (a, c)]
    else:
        pairs = [(a, b), (a, c), (b, c)]
    trn = [int(ch) - 1 for ch in trn_seq[trn_dof:]]
    return pairs, trn


def loop_rotation(
    x_o: Array, y_i: Array, w_i: Array, w_o: Array, al_i: Array, al_o: Array,
    rates: bool = True,
) -> tuple[Array, Array, Array]:  # fmt: skip
    """A rotational loop constraint ``Φ = x_o · y_i`` and its rates (all in N).

    ``x_o`` is an axis fixed in the outer body, ``y_i`` one fixed in the inner body;
    ``w`` their bodies' angular velocities, ``al`` their angular accelerations at zero
    generalized accelerations (the remainders α_r). Differentiating,

    .. math::

        \\dot\\Phi = n \\cdot (\\omega_o - \\omega_i), \\quad n = x_o \\times y_i, \\qquad
        \\ddot\\Phi = n \\cdot (\\dot\\omega_o - \\dot\\omega_i)
            + \\dot n \\cdot (\\omega_o - \\omega_i), \\quad
        \\dot n = (\\omega_o \\times x_o) \\times y_i + x_o \\times (\\omega_i \\times y_i)

    Returns ``Φ`` (...,), ``n`` (..., 3) (the velocity row is ``n·(Ω_o - Ω_i)``) and the
    bias ``b`` (...,) = ``Φ̈`` at zero generalized accelerations; without ``rates``, ``Φ``
    and ``n`` alone (``b`` zero: a projection needs no bias).
    """
    phi = (x_o * y_i).sum(-1)
    n = cross(x_o, y_i)
    if not rates:
        return phi, n, 0 * phi
    n_dot = cross(cross(w_o, x_o), y_i) + cross(x_o, cross(w_i, y_i))
    bias = (n_dot * (w_o - w_i)).sum(-1) + (n * (al_o - al_i)).sum(-1)
    return phi, n, bias


def loop_translation(
    d: Array, rho: Array, rho_dot: Array, w_i: Array, al_i: Array, a_rel: Array,
    rates: bool = True,
) -> tuple[Array, Array, Array]:  # fmt: skip
    """A translational loop constraint ``Φ = d · ρ`` and its rates (all in N).

    ``d`` is a constrained Gi axis (fixed in the inner body), ``ρ = o_Go - o_Gi`` the
    Go origin relative to the Gi origin and ``ρ̇`` its rate (the difference of the
    velocities of the two points, each fixed in its body), ``a_rel`` the difference of
    their accelerations at zero generalized accelerations. With ``ḋ = ω_i × d``:

    .. math::

        \\dot\\Phi = (d \\times \\rho) \\cdot \\omega_i + d \\cdot \\dot\\rho, \\qquad
        \\ddot\\Phi = (\\dot\\omega_i \\times d + \\omega_i \\times \\dot d) \\cdot \\rho
            + 2\\, \\dot d \\cdot \\dot\\rho + d \\cdot \\ddot\\rho

    The bias is evaluated as ``b = d · β``, with, by the scalar triple product,

    .. math::

        \\beta = \\rho \\times \\dot\\omega_i + (\\rho \\times \\omega_i) \\times \\omega_i
            + 2\\, \\dot\\rho \\times \\omega_i + \\ddot\\rho

    (``ḋ = ω_i × d``, ``d̈ = ω̇_i × d + ω_i × ḋ``), which does not depend on ``d``: the
    rows of one loop joint share it.

    Returns ``Φ`` (...,), ``m = d × ρ`` (..., 3) (the velocity row is
    ``m·Ω_i + d·(V_o - V_i)``) and the bias ``b`` (...,); without ``rates``, ``Φ`` and
    ``m`` alone (``b`` zero).
    """
    phi = (d * rho).sum(-1)
    m = cross(d, rho)
    if not rates:
        return phi, m, 0 * phi
    beta = cross(rho, al_i) + cross(cross(rho, w_i), w_i) + 2 * cross(rho_dot, w_i) + a_rel
    return phi, m, (d * beta).sum(-1)
