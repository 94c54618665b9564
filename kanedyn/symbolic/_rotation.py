"""Rotation kinematics in sympy: the symbolic twins of :mod:`kanedyn.rotation`.

Same conventions and the same equations as the numeric module, on ``sympy.Matrix``:

* ``elementary_rotation(k, a)`` is the *active* rotation about axis k (1 = x, 2 = y,
  3 = z); 42's passive ``R_k(a)`` is its transpose.
* Euler sequences are body-fixed: ``euler_to_dcm(seq, θ) = R_i1(θ1) R_i2(θ2) R_i3(θ3)``
  (42's ``A2C(seq, θ)`` transposed).
* Quaternions are scalar-last ``[x, y, z, w]``; ``quat_to_dcm`` is the unit-quaternion
  form (it equals ``|q|² R``, so callers pass a unit quaternion).
* For ``R_Gi_Go = euler_to_dcm(seq, θ)``, ``ω = Γ(θ) θ̇`` in Go components (42's joint
  partial).

Axes are given as sequences of digits (``"231"`` or ``(2, 3, 1)``); unused trailing
angles may be ``0``, which gives exact identity factors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy as sm

from kanedyn.errors import ModelError
from kanedyn.rotation import parse_sequence

__all__ = [
    "cross",
    "elementary_rotation",
    "euler_gamma",
    "euler_gamma_dot",
    "euler_to_dcm",
    "quat_rate",
    "quat_to_dcm",
    "skew",
]


def _axes(seq: str | Sequence[int]) -> tuple[int, int, int]:
    if isinstance(seq, str):
        return parse_sequence(seq)
    return tuple(int(a) for a in seq)  # type: ignore[return-value]


def skew(v: Sequence[Any]) -> sm.Matrix:
    """Cross-product matrix, :math:`[v]_\\times b = v \\times b`.

    >>> x, y, z = sm.symbols("x y z")
    >>> skew([x, y, z])
    Matrix([
    [ 0, -z,  y],
    [ z,  0, -x],
    [-y,  x,  0]])
    """
    x, y, z = v
    return sm.Matrix([[0, -z, y], [z, 0, -x], [-y, x, 0]])


def cross(a: Sequence[Any], b: Sequence[Any]) -> sm.Matrix:
    """``a × b`` as a 3×1 Matrix (products of the entries, nothing expanded)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    return sm.Matrix([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def elementary_rotation(axis: int, angle: Any) -> sm.Matrix:
    """Active elementary rotation about coordinate axis ``axis`` (1, 2 or 3).

    .. math:: R_1(a) = \\begin{bmatrix} 1 & 0 & 0 \\\\ 0 & c & -s \\\\ 0 & s & c
              \\end{bmatrix}, \\text{ and cyclically for } R_2, R_3.

    An angle of exactly 0 gives the identity.

    >>> a = sm.Symbol("a")
    >>> elementary_rotation(3, a)
    Matrix([
    [cos(a), -sin(a), 0],
    [sin(a),  cos(a), 0],
    [     0,       0, 1]])
    """
    if axis not in (1, 2, 3):
        raise ModelError(f"rotation axis must be 1, 2 or 3, got {axis!r}")
    R = sm.eye(3)
    if angle == 0:
        return R
    c, s = sm.cos(angle), sm.sin(angle)
    i = axis - 1
    j, k = (i + 1) % 3, (i + 2) % 3
    R[j, j], R[j, k] = c, -s
    R[k, j], R[k, k] = s, c
    return R


def euler_to_dcm(seq: str | Sequence[int], angles: Sequence[Any]) -> sm.Matrix:
    """Body-fixed Euler DCM :math:`R_{i_1}(\\theta_1) R_{i_2}(\\theta_2) R_{i_3}(\\theta_3)`.

    Same as :func:`kanedyn.rotation.euler_to_dcm` (42's ``A2C`` transposed).
    """
    i1, i2, i3 = _axes(seq)
    t1, t2, t3 = angles
    return elementary_rotation(i1, t1) * elementary_rotation(i2, t2) * elementary_rotation(i3, t3)


def euler_gamma(seq: str | Sequence[int], angles: Sequence[Any]) -> sm.Matrix:
    """Joint partial :math:`\\Gamma(\\theta)`: ``ω_Go = Γ θ̇`` in Go components.

    .. math:: \\Gamma = \\left[\\, R_{i_3}^T R_{i_2}^T e_{i_1} \\;\\middle|\\;
              R_{i_3}^T e_{i_2} \\;\\middle|\\; e_{i_3} \\,\\right]

    (42 ``JointPartials``; Kane, Likins & Levinson 1983, ch. 1.)
    """
    i1, i2, i3 = _axes(seq)
    _, t2, t3 = angles
    e = sm.eye(3)
    R2T = elementary_rotation(i2, t2).T
    R3T = elementary_rotation(i3, t3).T
    col3 = e[:, i3 - 1]
    col2 = R3T * e[:, i2 - 1]
    col1 = R3T * (R2T * e[:, i1 - 1])
    return sm.Matrix.hstack(col1, col2, col3)


def euler_gamma_dot(
    seq: str | Sequence[int], angles: Sequence[Any], rates: Sequence[Any]
) -> sm.Matrix:
    """:math:`\\dot\\Gamma` along ``θ̇ = rates``.

    .. math:: \\dot\\gamma_1 = \\gamma_1 \\times (r_2 \\gamma_2 + r_3 \\gamma_3), \\quad
              \\dot\\gamma_2 = \\gamma_2 \\times r_3 \\gamma_3, \\quad \\dot\\gamma_3 = 0

    (from :math:`\\tfrac{d}{dt} R_k^T = -r_k [e_k]_\\times R_k^T`; 42's
    ``Gammadot*sigma`` table).
    """
    G = euler_gamma(seq, angles)
    _, r2, r3 = rates
    g1, g2, g3 = G[:, 0], G[:, 1], G[:, 2]
    w3 = r3 * g3
    g1_dot = cross(g1, r2 * g2 + w3)
    g2_dot = cross(g2, w3)
    return sm.Matrix.hstack(g1_dot, g2_dot, sm.zeros(3, 1))


def quat_to_dcm(q: Sequence[Any]) -> sm.Matrix:
    """DCM ``R_A_B`` of a unit scalar-last quaternion.

    .. math:: R = (q_4^2 - q_v \\cdot q_v) I + 2 q_v q_v^T + 2 q_4 [q_v]_\\times

    The transpose of 42's ``Q2C``. For a non-unit ``q`` this is :math:`|q|^2` times the
    rotation; :func:`kanedyn.rotation.quat_to_dcm` normalizes first.
    """
    x, y, z, w = q
    v = sm.Matrix([x, y, z])
    return (w**2 - x**2 - y**2 - z**2) * sm.eye(3) + 2 * v * v.T + 2 * w * skew(v)


def quat_rate(q: Sequence[Any], omega: Sequence[Any]) -> sm.Matrix:
    """:math:`\\dot q = \\tfrac12 q \\otimes [\\omega, 0]`, ω in B components.

    .. math:: \\dot q_v = \\tfrac12 (q_4 \\omega - \\omega \\times q_v), \\qquad
              \\dot q_4 = -\\tfrac12\\, \\omega \\cdot q_v

    (42's ``QW2QDOT``; Kane, Likins & Levinson 1983, eq. 1.13.)
    """
    x, y, z, w = q
    v = sm.Matrix([x, y, z])
    om = sm.Matrix(list(omega))
    half = sm.Rational(1, 2)
    qv_dot = half * (w * om - cross(om, v))
    return sm.Matrix([*qv_dot, -half * om.dot(v)])
