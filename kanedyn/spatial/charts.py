"""Rotation charts written once, on any arithmetic: Euler sequences and quaternions.

Each function takes arrays with leading batch axes ``...`` whose elements are floats,
traced values or sympy expressions (:mod:`kanedyn.spatial.arithmetic`), and uses only
the protocol's operations, so the same lines serve the public rotation functions
(:mod:`kanedyn.spatial.rotation`), the joint model (:mod:`kanedyn.joints`) and through it every
engine.

Conventions (docs/conventions.md): ``R_A_B`` maps B components to A components; the
elementary rotation about the unit axis e is active,
``R(e, θ) = e eᵀ + cos θ (U - e eᵀ) + sin θ [e]×``; an Euler sequence with axes
``e_1, e_2, e_3`` is body-fixed, ``R = R_1(θ_1) R_2(θ_2) R_3(θ_3)``, the transpose of 42's
``A2C``; quaternions are scalar-last ``[x, y, z, w]``.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.spatial.algebra import Bilinear, bilinear, cross, cross_terms, skew
from kanedyn.spatial.arithmetic import Arithmetic

__all__ = [
    "QUAT_DCM",
    "QUAT_RATE",
    "EulerAxes",
    "axis_rotations",
    "euler",
    "euler_axes",
    "euler_derivatives",
    "euler_gamma_dot",
    "quat_dcm_form",
    "quat_normalize",
    "quat_rate",
    "quat_to_dcm",
]

Array = NDArray[Any]


# --------------------------------------------------------------------------- Euler
@attrs.frozen(eq=False)
class EulerAxes:
    """The constants of Euler sequences, in one arithmetic's representation.

    ``e`` (..., 3, 3): row j is the unit vector of axis j; ``eeT``, ``perp``, ``ex``
    (..., 3, 3, 3): ``e eᵀ``, ``U - e eᵀ`` and ``[e]×`` per axis. Built once per model
    (:func:`euler_axes`); the dense engine keeps them for every call.
    """

    e: Array
    eeT: Array
    perp: Array
    ex: Array


def euler_axes(ar: Arithmetic, e: Any) -> EulerAxes:
    """:class:`EulerAxes` of the unit axis vectors ``e`` (..., 3, 3) (row j = axis j)."""
    e = np.asarray(e, dtype=float)
    eeT = e[..., :, None] * e[..., None, :]
    return EulerAxes(
        e=ar.const(e), eeT=ar.const(eeT), perp=ar.const(np.eye(3) - eeT), ex=ar.const(skew(e))
    )


def axis_rotations(ar: Arithmetic, axes: EulerAxes, theta: Array, dof: int = 3) -> Array:
    """The elementary rotations ``R_k(θ_k)`` of the first ``dof`` axes: (..., dof, 3, 3).

    .. math:: R_k(\theta_k) = e_k e_k^T + \\cos\theta_k\\,(U - e_k e_k^T)
              + \\sin\theta_k\\,[e_k]_\times

    (active; 42's passive ``R_k`` transposed). For a coordinate axis every entry is
    exactly 0, 1, ``cos θ`` or ``±sin θ``.
    """
    c = ar.cos(theta[..., :dof])[..., None, None]
    s = ar.sin(theta[..., :dof])[..., None, None]
    return axes.eeT[..., :dof, :, :] + c * axes.perp[..., :dof, :, :] + s * axes.ex[..., :dof, :, :]


def euler(ar: Arithmetic, axes: EulerAxes, theta: Array, dof: int = 3) -> tuple[Array, Array]:
    """Body-fixed Euler rotation and its joint partial.

    .. math::

        R_{G_i G_o} = R_1(\\theta_1) R_2(\\theta_2) R_3(\\theta_3), \\qquad
        \\Gamma = \\left[\\, R_3^T R_2^T e_1 \\;\\middle|\\; R_3^T e_2 \\;\\middle|\\;
        e_3 \\,\\right]

    so that the angular velocity of Go relative to Gi, in Go, is ``ω = Γ θ̇`` (42
    ``JointPartials``; Kane, Likins & Levinson 1983, ch. 1). Only the first ``dof``
    angles can be non-zero (the others are taken as 0 and their factors as the
    identity: a choice of the model's structure, not of the values).

    Parameters
    ----------
    ar : Arithmetic
    axes : EulerAxes
        From :func:`euler_axes`, shape (..., 3, 3).
    theta : array, shape (..., 3)
    dof : int
        0 (no rotation), 1, 2 or 3.

    Returns
    -------
    R : array (..., 3, 3)
        ``R_Gi_Go``.
    GammaT : array (..., 3, 3)
        ``Γᵀ``: row j is column ``γ_j`` of Γ, in Go.
    """
    e = axes.e
    rows = [e[..., 0, :], e[..., 1, :], e[..., 2, :]]
    if dof == 0:  # no rotation: R = U, and Γ's columns are the (constraint) axes
        return axes.eeT[..., 0, :, :] * 0 + ar.const(np.eye(3)), e
    Rk = axis_rotations(ar, axes, theta, dof)
    tail = Rk[..., dof - 1, :, :]  # R_a ... R_dof, built from the last factor inwards
    if dof == 1:  # Γ = [e_1 | e_2 | e_3] is constant: callers broadcast it if they must
        return tail, e
    GammaT = e + tail * 0  # rows γ_j, batched; γ_j = e_j for j ≥ dof
    for a in reversed(range(dof - 1)):
        # γ_aᵀ = e_aᵀ R_{a+1} ... R_dof
        GammaT[..., a, :] = (rows[a][..., None, :] @ tail)[..., 0, :]
        tail = Rk[..., a, :, :] @ tail
    return tail, GammaT


def euler_gamma_dot(GammaT: Array, rates: Array, dof: int = 3) -> tuple[Array, Array]:
    """``Γ̇`` along the angle rates, and ``Γ̇ θ̇``.

    .. math:: \\dot\\gamma_1 = \\gamma_1 \\times (\\dot\\theta_2 \\gamma_2 +
              \\dot\\theta_3 \\gamma_3), \\quad
              \\dot\\gamma_2 = \\gamma_2 \\times \\dot\\theta_3 \\gamma_3, \\quad
              \\dot\\gamma_3 = 0

    from :math:`\\tfrac{d}{dt} R_k^T = -\\dot\\theta_k [e_k]_\\times R_k^T`; 42's
    ``Gammadot*sigma`` table (``JointPartials``).

    Parameters
    ----------
    GammaT : array (..., 3, 3)
        Rows ``γ_j`` (from :func:`euler`).
    rates : array (..., 3)
        ``θ̇`` (entries beyond ``dof`` are ignored).
    dof : int

    Returns
    -------
    Gamma_dot : array (..., 3, 3)
        Columns ``γ̇_j``.
    Gds : array (..., 3)
        ``Γ̇ θ̇``.
    """
    if dof <= 1:  # one angle: Γ is constant, Γ̇ = 0
        zero = GammaT * 0
        return zero, zero[..., 0]
    W = rates[..., 1:dof, None] * GammaT[..., 1:dof, :]  # rows θ̇_b γ_b, b ≥ 2
    B = np.cumsum(W[..., ::-1, :], axis=-2)[..., ::-1, :]  # row a: Σ_{b > a} θ̇_b γ_b
    D = cross(GammaT[..., : dof - 1, :], B)  # rows γ̇_a, a < dof
    Gamma_dot = GammaT * 0
    Gamma_dot[..., :, : dof - 1] = D.swapaxes(-1, -2)
    Gds = np.sum(rates[..., : dof - 1, None] * D, axis=-2)
    return Gamma_dot, Gds


def euler_derivatives(
    ar: Arithmetic, axes: EulerAxes, theta: Array, dof: int = 3
) -> tuple[Array, Array, Array]:
    """Body-fixed Euler rotation with its first and second derivatives in the angles.

    .. math::

        R = R_1 R_2 R_3, \\qquad
        \\frac{\\partial R}{\\partial\\theta_k} = \\ldots R_k [e_k]_\\times \\ldots, \\qquad
        \\frac{\\partial^2 R}{\\partial\\theta_k^2} = \\ldots R_k [e_k]_\\times^2 \\ldots

    (each factor is :math:`R_k = \\exp(\\theta_k [e_k]_\\times)`, whose derivative is
    :math:`R_k [e_k]_\\times`; mixed derivatives replace two factors). The conserving
    scheme needs them for the discrete gradient of its joint constraints
    (:mod:`kanedyn.simulation.conserving.constraints`).

    Returns
    -------
    R (..., 3, 3), dR (..., dof, 3, 3), d2R (..., dof, dof, 3, 3).
    """
    Rk = axis_rotations(ar, axes, theta, 3)
    F1 = Rk @ axes.ex
    F2 = F1 @ axes.ex
    factors = [Rk[..., k, :, :] for k in range(3)]

    def product(replace: dict[int, Array]) -> Array:
        out = replace.get(0, factors[0])
        for k in (1, 2):
            out = out @ replace.get(k, factors[k])
        return out

    R = product({})
    dR = np.stack([product({k: F1[..., k, :, :]}) for k in range(dof)], axis=-3)
    rows = []
    for k in range(dof):
        row = [
            product({k: F2[..., k, :, :]} if k == l else {k: F1[..., k, :, :], l: F1[..., l, :, :]})
            for l in range(dof)
        ]
        rows.append(np.stack(row, axis=-3))
    d2R = np.stack(rows, axis=-4)
    return R, dR, d2R


# --------------------------------------------------------------------------- quaternions
def _quat_dcm_terms() -> list[tuple[int, int, int, float]]:
    x, y, z, w = range(4)
    entries = {  # R[i, j] as sums of coef * q_a q_b
        (0, 0): [(w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)],
        (1, 1): [(w, w, 1), (y, y, 1), (x, x, -1), (z, z, -1)],
        (2, 2): [(w, w, 1), (z, z, 1), (x, x, -1), (y, y, -1)],
        (0, 1): [(x, y, 2), (w, z, -2)], (1, 0): [(x, y, 2), (w, z, 2)],
        (0, 2): [(x, z, 2), (w, y, 2)], (2, 0): [(x, z, 2), (w, y, -2)],
        (1, 2): [(y, z, 2), (w, x, -2)], (2, 1): [(y, z, 2), (w, x, 2)],
    }  # fmt: skip
    return [(a, b, 3 * i + j, c) for (i, j), terms in entries.items() for a, b, c in terms]


QUAT_DCM = Bilinear.of(_quat_dcm_terms(), 9)
"""``(q_4² - q_v·q_v) U + 2 q_v q_vᵀ + 2 q_4 [q_v]×`` (flattened) as a bilinear form of q."""


def _quat_rate_terms() -> list[tuple[int, int, int, float]]:
    # 2 q̇ = q ⊗ [ω, 0]: vector part q_4 ω + q_v × ω, scalar part -q_v · ω
    terms = [(3, c, c, 1.0) for c in range(3)] + cross_terms(0, 0, 0)
    return terms + [(c, c, 3, -1.0) for c in range(3)]


QUAT_RATE = Bilinear.of(_quat_rate_terms(), 4)
"""``q ⊗ [ω, 0]`` as a bilinear form of (q, ω)."""


def quat_dcm_form(q: Array) -> Array:
    """``|q|² R_A_B`` of scalar-last quaternions (..., 4): (..., 3, 3).

    .. math:: |q|^2 R = (q_4^2 - q_v \\cdot q_v) U + 2 q_v q_v^T + 2 q_4 [q_v]_\\times

    For a unit quaternion this is ``R`` itself: the transpose of 42's ``Q2C``, and
    scipy's ``Rotation.from_quat(q).as_matrix()``.
    """
    return bilinear(q, q, QUAT_DCM).reshape(q.shape[:-1] + (3, 3))


def quat_product(p: Array, q: Array) -> Array:
    """Hamilton product, scalar-last, on any arithmetic (shapes (..., 4)):

    .. math:: p \\otimes q = [\\,p_4 q_v + q_4 p_v + p_v \\times q_v,\\;
              p_4 q_4 - p_v \\cdot q_v\\,]

    (Shuster 1993), so that the DCM of ``p ⊗ q`` is the product of their DCMs.
    """
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    vec = pw * qv + qw * pv + cross(pv, qv)
    scalar = pw * qw - np.sum(pv * qv, axis=-1, keepdims=True)
    scalar = np.broadcast_to(scalar, vec.shape[:-1] + (1,))
    return np.concatenate([vec, scalar], axis=-1)


def quat_to_dcm(q: Array) -> Array:
    """``R_A_B`` of (not necessarily unit) quaternions: :func:`quat_dcm_form` / ``|q|²``."""
    return quat_dcm_form(q) / np.asarray(np.sum(q * q, axis=-1))[..., None, None]


def quat_normalize(ar: Arithmetic, q: Array) -> Array:
    """``q / |q|`` over the last axis."""
    scale = np.asarray(1.0 / ar.sqrt(np.sum(q * q, axis=-1)))  # stays an array when 0-d
    return q * scale[..., None]


def quat_rate(q: Array, omega: Array) -> Array:
    """Quaternion kinematics with the body-frame angular velocity.

    .. math:: \\dot q = \\tfrac12\\, q \\otimes [\\omega, 0], \\quad
              \\dot q_v = \\tfrac12 (q_4 \\omega + q_v \\times \\omega), \\quad
              \\dot q_4 = -\\tfrac12\\, q_v \\cdot \\omega

    with ``omega`` in B components for ``R_A_B = quat_to_dcm(q)`` (42's ``QW2QDOT``;
    Kane, Likins & Levinson 1983, eq. 1.13). Shapes: q (..., 4), omega (..., 3).
    """
    return bilinear(q, omega, QUAT_RATE) / 2
