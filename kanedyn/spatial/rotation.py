"""Rotation kinematics: DCMs, Euler sequences, quaternions and rotation vectors.

Conventions (see the conventions page in the docs):

* ``R_A_B`` is a direction-cosine matrix mapping B components to A components,
  ``v_A = R_A_B @ v_B``, so ``R_A_C = R_A_B @ R_B_C``.
* ``elementary_rotation(k, a)`` is the *active* rotation about axis k (1 = x, 2 = y,
  3 = z); 42's passive ``R_k(a)`` is its transpose.
* Euler sequences are body-fixed (intrinsic): ``euler_to_dcm(seq, theta) =
  R_i1(t1) @ R_i2(t2) @ R_i3(t3)``. This is scipy's ``Rotation.from_euler`` with the
  upper-case letters ("231" -> "YZX") and 42's ``A2C(seq, theta)`` transposed.
* Quaternions are scalar-last ``[x, y, z, w]`` (scipy, 42); ``quat_to_dcm(q)`` is
  ``Rotation.from_quat(q).as_matrix()``.
* For ``R_Gi_Go = euler_to_dcm(seq, theta)``, the angular velocity of Go relative to Gi,
  in Go components, is ``omega = Gamma(theta) @ theta_dot`` (42's joint partial).

Every function accepts a leading batch shape ``...`` and broadcasts over it.
"""

from __future__ import annotations

import warnings

import numpy as np

from kanedyn.errors import ModelError
from kanedyn.spatial import algebra, charts
from kanedyn.spatial.arithmetic import NUMPY

__all__ = [
    "EULER_SEQUENCES",
    "GimbalLockError",
    "GimbalLockWarning",
    "dcm_to_euler",
    "dcm_to_quat",
    "dcm_to_rotvec",
    "elementary_rotation",
    "euler_gamma",
    "euler_gamma_axes",
    "euler_gamma_dot",
    "euler_gamma_dot_axes",
    "euler_rates_from_omega",
    "euler_to_dcm",
    "euler_to_dcm_axes",
    "gimbal_lock",
    "is_rotation_matrix",
    "is_symmetric_sequence",
    "omega_from_euler_rates",
    "parse_sequence",
    "quat_conjugate",
    "quat_multiply",
    "quat_normalize",
    "quat_rate",
    "quat_to_dcm",
    "quat_to_rotvec",
    "rotvec_rate_matrix",
    "rotvec_rate_matrix_inv",
    "rotvec_to_dcm",
    "rotvec_to_quat",
    "skew",
]

EULER_SEQUENCES: tuple[str, ...] = (
    "121",
    "123",
    "131",
    "132",
    "212",
    "213",
    "231",
    "232",
    "312",
    "313",
    "321",
    "323",
)
"""The 12 valid Euler sequences (no axis repeated in adjacent positions)."""

_EYE = np.eye(3)

# Below this angle the cancelling closed forms switch to their Taylor series.
_SERIES_ANGLE = 0.25


class GimbalLockWarning(UserWarning):
    """An Euler decomposition hit gimbal lock; the third angle was set to zero."""


class GimbalLockError(ModelError):
    """Euler rates cannot be found from an angular velocity: Gamma is singular."""


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


_C1 = np.array([1, 2, 0])
_C2 = np.array([2, 0, 1])


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product over the last axis, broadcasting (:func:`kanedyn.spatial.algebra.cross`)."""
    return algebra.cross(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def _vec3(v) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    if v.shape[-1:] != (3,):
        raise ModelError(f"expected an array of shape (..., 3), got {v.shape}")
    return v


def _mat3(R) -> np.ndarray:
    R = np.asarray(R, dtype=float)
    if R.shape[-2:] != (3, 3):
        raise ModelError(f"expected an array of shape (..., 3, 3), got {R.shape}")
    return R


def _quat(q) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    if q.shape[-1:] != (4,):
        raise ModelError(f"expected an array of shape (..., 4), got {q.shape}")
    return q


def _matvec(M: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``M @ v`` for stacks: M (..., 3, 3), v (..., 3) -> (..., 3)."""
    return np.matmul(M, v[..., None])[..., 0]


def _even_series(a2: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    """``sum_k coeffs[k] * a2**k`` by Horner's rule."""
    out = np.full_like(a2, coeffs[-1])
    for c in coeffs[-2::-1]:
        out = out * a2 + c
    return out


def _series_or_exact(a: np.ndarray, exact, coeffs: tuple[float, ...], small: float) -> np.ndarray:
    """``exact(a)`` where ``a >= small``, else the even Taylor series in ``a``.

    ``exact`` is only evaluated on a safe argument (1.0 where ``a`` is small), so no
    NaN or division warning can appear.
    """
    is_small = a < small
    a_safe = np.where(is_small, 1.0, a)
    return np.where(is_small, _even_series(a * a, coeffs), exact(a_safe))


# f(a) = sin(a)/a
_SINC = (1.0, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880)
# f(a) = (1 - cos a)/a^2
_COSC = (0.5, -1.0 / 24, 1.0 / 720, -1.0 / 40320, 1.0 / 3628800)
# f(a) = (a - sin a)/a^3
_SINC3 = (1.0 / 6, -1.0 / 120, 1.0 / 5040, -1.0 / 362880, 1.0 / 39916800, -1.0 / 6227020800)
# f(a) = sin(a/2)/a
_HALF_SINC = (0.5, -1.0 / 48, 1.0 / 3840, -1.0 / 645120, 1.0 / 185794560)
# f(a) = 1/a^2 - cot(a/2)/(2a)
_JINV = (
    1.0 / 12,
    1.0 / 720,
    1.0 / 30240,
    1.0 / 1209600,
    1.0 / 47900160,
    691.0 / 1307674368000,
)
# f(x) = atan(x)/x
_ATANC = (1.0, -1.0 / 3, 1.0 / 5, -1.0 / 7, 1.0 / 9)


def _axes_to_unit_vectors(axes) -> np.ndarray:
    """Integer axes (..., 3) in 1..3 -> unit vectors (..., 3, 3), row j = e_{i_j}."""
    axes = np.asarray(axes)
    if axes.shape[-1:] != (3,) or not np.issubdtype(axes.dtype, np.integer):
        raise ModelError(f"Euler axes must be an integer array of shape (..., 3), got {axes!r}")
    if np.any((axes < 1) | (axes > 3)):
        raise ModelError(f"Euler axes must take the values 1, 2 or 3, got {axes!r}")
    return _EYE[axes - 1]


def _euler_arguments(axes, angles) -> tuple[np.ndarray, np.ndarray]:
    """Unit axis vectors and angles of an Euler sequence, broadcast to one batch shape."""
    E = _axes_to_unit_vectors(axes)
    theta = _vec3(angles)
    batch = np.broadcast_shapes(E.shape[:-2], theta.shape[:-1])
    return np.broadcast_to(E, batch + (3, 3)), np.broadcast_to(theta, batch + (3,))


def _permutation_sign(a: int, b: int, c: int) -> int:
    """+1 for a cyclic order of (0, 1, 2), -1 for an anti-cyclic one."""
    return 1 if (b - a) % 3 == 1 and (c - b) % 3 == 1 else -1


# ---------------------------------------------------------------------------
# Basic matrices
# ---------------------------------------------------------------------------


def skew(v) -> np.ndarray:
    """Cross-product matrix of ``v``.

    .. math:: [v]_\\times = \\begin{bmatrix} 0 & -v_3 & v_2 \\\\ v_3 & 0 & -v_1 \\\\
              -v_2 & v_1 & 0 \\end{bmatrix}, \\qquad [a]_\\times b = a \\times b

    Parameters
    ----------
    v : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)

    Examples
    --------
    >>> skew([1.0, 2.0, 3.0]) @ [4.0, 5.0, 6.0]
    array([-3.,  6., -3.])
    """
    return algebra.skew(_vec3(v))


def elementary_rotation(axis: int, angle) -> np.ndarray:
    """Active elementary rotation about coordinate axis ``axis`` (1 = x, 2 = y, 3 = z).

    .. math:: R_1(a) = \\begin{bmatrix} 1 & 0 & 0 \\\\ 0 & c & -s \\\\ 0 & s & c
              \\end{bmatrix}, \\text{ and cyclically for } R_2, R_3.

    This is the transpose of 42's passive ``R_k`` (dcmkit.c).

    Parameters
    ----------
    axis : int
        1, 2 or 3.
    angle : array_like, shape (...)
        Angle in radians.

    Returns
    -------
    ndarray, shape (..., 3, 3)

    Examples
    --------
    >>> np.round(elementary_rotation(3, np.pi / 2) @ [1.0, 0.0, 0.0], 12)
    array([0., 1., 0.])
    """
    if isinstance(axis, bool) or axis not in (1, 2, 3):
        raise ModelError(f"rotation axis must be 1, 2 or 3, got {axis!r}")
    angle = np.asarray(angle, dtype=float)
    axes = charts.euler_axes(NUMPY, _EYE[[axis - 1] * 3])
    return charts.axis_rotations(NUMPY, axes, angle[..., None], 1)[..., 0, :, :]


def is_rotation_matrix(R, tol: float = 1e-9) -> np.ndarray:
    """True where ``R`` is a proper rotation: :math:`\\|R^T R - I\\|_\\infty \\le tol`
    and :math:`\\det R > 0`.

    Parameters
    ----------
    R : array_like, shape (..., 3, 3)
    tol : float

    Returns
    -------
    bool or ndarray of bool, shape (...)

    Examples
    --------
    >>> bool(is_rotation_matrix(elementary_rotation(1, 0.3)))
    True
    """
    R = _mat3(R)
    with np.errstate(invalid="ignore"):
        err = np.abs(np.swapaxes(R, -1, -2) @ R - _EYE).max(axis=(-2, -1))
        det = np.linalg.det(R)
    return (err <= tol) & (det > 0)


# ---------------------------------------------------------------------------
# Euler sequences
# ---------------------------------------------------------------------------


def parse_sequence(seq) -> tuple[int, int, int]:
    """Validate an Euler sequence name and return its axes.

    A sequence is three digits from 1-3 with no axis repeated in adjacent positions
    ("123", "313", ...; the 12 names in :data:`EULER_SEQUENCES`).

    Parameters
    ----------
    seq : str or int

    Returns
    -------
    tuple of int
        ``(i1, i2, i3)``.

    Raises
    ------
    ModelError
        Naming the sequence and what is wrong with it.

    Examples
    --------
    >>> parse_sequence("231")
    (2, 3, 1)
    """
    text = str(seq) if isinstance(seq, int) and not isinstance(seq, bool) else seq
    if not isinstance(text, str):
        raise ModelError(f"Euler sequence {seq!r} must be a string such as '123'")
    if len(text) != 3:
        raise ModelError(f"Euler sequence {seq!r} must have exactly 3 digits, got {len(text)}")
    if any(ch not in "123" for ch in text):
        raise ModelError(f"Euler sequence {seq!r} may only contain the digits 1, 2 and 3")
    i1, i2, i3 = (int(ch) for ch in text)
    if i1 == i2 or i2 == i3:
        raise ModelError(
            f"Euler sequence {seq!r} repeats an axis in adjacent positions; "
            f"valid sequences are {', '.join(EULER_SEQUENCES)}"
        )
    return i1, i2, i3


def is_symmetric_sequence(seq) -> bool:
    """True for a symmetric ("proper Euler", 121-type) sequence, where i1 == i3.

    Examples
    --------
    >>> is_symmetric_sequence("313"), is_symmetric_sequence("321")
    (True, False)
    """
    i1, _, i3 = parse_sequence(seq)
    return i1 == i3


def euler_to_dcm_axes(axes, angles) -> np.ndarray:
    """Body-fixed Euler DCM for integer axes; one implementation for all sequences.

    .. math:: R_{Gi,Go} = R_{i_1}(\\theta_1)\\, R_{i_2}(\\theta_2)\\, R_{i_3}(\\theta_3)

    with active elementary rotations. Equals 42's ``A2C(seq, theta)`` transposed
    (dcmkit.c).

    Parameters
    ----------
    axes : array_like of int, shape (..., 3)
        Axis digits 1..3; may differ along the batch (one joint per row).
    angles : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    E, theta = _euler_arguments(axes, angles)
    return charts.euler(NUMPY, charts.euler_axes(NUMPY, E), theta)[0]


def euler_to_dcm(seq, angles) -> np.ndarray:
    """DCM ``R_A_B`` of the frame B reached from A by the intrinsic sequence ``seq``.

    .. math:: R_{A,B} = R_{i_1}(\\theta_1)\\, R_{i_2}(\\theta_2)\\, R_{i_3}(\\theta_3)

    Same as ``scipy.spatial.transform.Rotation.from_euler("XYZ"-letters, angles)``
    and as 42's ``A2C(seq, theta)`` transposed (dcmkit.c).

    Parameters
    ----------
    seq : str
        One of :data:`EULER_SEQUENCES`.
    angles : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)

    Examples
    --------
    >>> np.allclose(euler_to_dcm("321", [0.3, 0.0, 0.0]), elementary_rotation(3, 0.3))
    True
    """
    return euler_to_dcm_axes(np.array(parse_sequence(seq)), angles)


def dcm_to_euler(seq, R, *, tol: float = 1e-9) -> np.ndarray:
    """Euler angles of ``R = R_i1(t1) R_i2(t2) R_i3(t3)`` (the inverse of `euler_to_dcm`).

    With a, b the 0-based indices of i1, i2, c the remaining index and
    :math:`\\epsilon = \\pm 1` the parity of (a, b, c):

    * non-symmetric (i3 = c): :math:`\\theta_2 = \\operatorname{atan2}(\\epsilon R_{ac},
      \\sqrt{R_{aa}^2 + R_{ab}^2}) \\in [-\\pi/2, \\pi/2]`,
      :math:`\\theta_1 = \\operatorname{atan2}(-\\epsilon R_{bc}, R_{cc})`,
      :math:`\\theta_3 = \\operatorname{atan2}(-\\epsilon R_{ab}, R_{aa})`;
    * symmetric (i3 = a): :math:`\\theta_2 = \\operatorname{atan2}(\\sqrt{R_{ab}^2 +
      R_{ac}^2}, R_{aa}) \\in [0, \\pi]`,
      :math:`\\theta_1 = \\operatorname{atan2}(R_{ba}, -\\epsilon R_{ca})`,
      :math:`\\theta_3 = \\operatorname{atan2}(R_{ab}, \\epsilon R_{ac})`.

    At gimbal lock (:math:`|\\cos\\theta_2|` resp. :math:`|\\sin\\theta_2|` below
    ``tol``) only :math:`\\theta_1 \\pm \\theta_3` is defined: :math:`\\theta_3 = 0` and
    :math:`\\theta_1 = \\operatorname{atan2}(\\epsilon R_{cb}, R_{bb})`, from
    :math:`R e_b = R_{i_1}(\\theta_1) e_b`. A :class:`GimbalLockWarning` is issued.
    (Shuster 1993, "A survey of attitude representations", section 5.)

    Parameters
    ----------
    seq : str
    R : array_like, shape (..., 3, 3)
    tol : float

    Returns
    -------
    ndarray, shape (..., 3)

    Examples
    --------
    >>> np.round(dcm_to_euler("123", euler_to_dcm("123", [0.1, 0.2, 0.3])), 12)
    array([0.1, 0.2, 0.3])
    """
    i1, i2, i3 = parse_sequence(seq)
    R = _mat3(R)
    a, b = i1 - 1, i2 - 1
    c = 3 - a - b
    eps = _permutation_sign(a, b, c)
    if i3 == i1:
        sin2 = np.hypot(R[..., a, b], R[..., a, c])
        t2 = np.arctan2(sin2, R[..., a, a])
        t1 = np.arctan2(R[..., b, a], -eps * R[..., c, a])
        t3 = np.arctan2(R[..., a, b], eps * R[..., a, c])
        locked = sin2 < tol
    else:
        cos2 = np.hypot(R[..., a, a], R[..., a, b])
        t2 = np.arctan2(eps * R[..., a, c], cos2)
        t1 = np.arctan2(-eps * R[..., b, c], R[..., c, c])
        t3 = np.arctan2(-eps * R[..., a, b], R[..., a, a])
        locked = cos2 < tol
    if np.any(locked):
        warnings.warn(
            f"Euler sequence {seq!r} is at gimbal lock in {int(np.sum(locked))} of "
            f"{locked.size} rotation(s); only theta1 +- theta3 is defined, so theta3 = 0",
            GimbalLockWarning,
            stacklevel=2,
        )
        t1 = np.where(locked, np.arctan2(eps * R[..., c, b], R[..., b, b]), t1)
        t3 = np.where(locked, 0.0, t3)
    return np.stack([t1, t2, t3], axis=-1)


def euler_gamma_axes(axes, angles) -> np.ndarray:
    """Joint partial Gamma for integer axes: ``omega_Go = Gamma(theta) @ theta_dot``.

    .. math:: \\Gamma = \\left[\\, R_{i_3}^T R_{i_2}^T e_{i_1} \\;\\middle|\\;
              R_{i_3}^T e_{i_2} \\;\\middle|\\; e_{i_3} \\,\\right]

    Go's angular velocity relative to Gi, in Go components, for
    ``R_Gi_Go = euler_to_dcm_axes(axes, theta)``. 42 ``JointPartials``/``ADOT2W``
    (dcmkit.c); Kane, Likins & Levinson 1983, ch. 1.

    Parameters
    ----------
    axes : array_like of int, shape (..., 3)
    angles : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    E, theta = _euler_arguments(axes, angles)
    return np.swapaxes(charts.euler(NUMPY, charts.euler_axes(NUMPY, E), theta)[1], -1, -2)


def euler_gamma_dot_axes(axes, angles, rates) -> np.ndarray:
    """Time derivative of Gamma along ``theta_dot = rates``.

    With :math:`\\gamma_j` the columns of Gamma and :math:`r_j` the rates,

    .. math:: \\dot\\gamma_1 = \\gamma_1 \\times (r_2 \\gamma_2 + r_3 \\gamma_3), \\quad
              \\dot\\gamma_2 = \\gamma_2 \\times r_3 \\gamma_3, \\quad \\dot\\gamma_3 = 0,

    from :math:`\\tfrac{d}{dt} R_k^T = -r_k [e_k]_\\times R_k^T`. Reproduces 42's
    ``Gammadot*sigma`` table (JointPartials).

    Parameters
    ----------
    axes : array_like of int, shape (..., 3)
    angles, rates : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    E, theta = _euler_arguments(axes, angles)
    GammaT = charts.euler(NUMPY, charts.euler_axes(NUMPY, E), theta)[1]
    r = np.broadcast_to(_vec3(rates), GammaT.shape[:-1])
    return charts.euler_gamma_dot(GammaT, r)[0]


def euler_gamma(seq, angles) -> np.ndarray:
    """Gamma(theta) for ``seq``: ``omega = Gamma @ theta_dot`` in Go components.

    See :func:`euler_gamma_axes` for the equation. For "123",

    .. math:: \\Gamma = \\begin{bmatrix} c_2 c_3 & s_3 & 0 \\\\ -c_2 s_3 & c_3 & 0 \\\\
              s_2 & 0 & 1 \\end{bmatrix}

    (42 JointPartials).

    Parameters
    ----------
    seq : str
    angles : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)

    Examples
    --------
    >>> np.round(euler_gamma("123", [0.0, 0.0, 0.0]), 12)
    array([[1., 0., 0.],
           [0., 1., 0.],
           [0., 0., 1.]])
    """
    return euler_gamma_axes(np.array(parse_sequence(seq)), angles)


def euler_gamma_dot(seq, angles, rates) -> np.ndarray:
    """d/dt Gamma(theta(t)) for ``seq`` at ``theta_dot = rates``; see
    :func:`euler_gamma_dot_axes`.

    Parameters
    ----------
    seq : str
    angles, rates : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    return euler_gamma_dot_axes(np.array(parse_sequence(seq)), angles, rates)


def _gamma_det(Gamma: np.ndarray) -> np.ndarray:
    """det Gamma = gamma_1 . (gamma_2 x gamma_3); +-cos t2 (or +-sin t2, symmetric)."""
    return np.einsum("...i,...i->...", Gamma[..., 0], _cross(Gamma[..., 1], Gamma[..., 2]))


def gimbal_lock(seq, angles, *, tol: float = 1e-9) -> np.ndarray:
    """True where Gamma(theta) is singular: :math:`|\\det\\Gamma| < tol`.

    :math:`\\det\\Gamma = \\pm\\cos\\theta_2` for non-symmetric sequences (lock at
    :math:`\\theta_2 = \\pm\\pi/2`) and :math:`\\pm\\sin\\theta_2` for symmetric ones
    (lock at :math:`\\theta_2 = 0, \\pi`).

    Parameters
    ----------
    seq : str
    angles : array_like, shape (..., 3)
    tol : float

    Returns
    -------
    bool or ndarray of bool, shape (...)

    Examples
    --------
    >>> bool(gimbal_lock("313", [0.4, 0.0, 0.2]))
    True
    """
    return np.abs(_gamma_det(euler_gamma(seq, angles))) < tol


def omega_from_euler_rates(seq, angles, rates) -> np.ndarray:
    """Angular velocity of Go relative to Gi in Go components, ``Gamma(theta) @ rates``.

    Parameters
    ----------
    seq : str
    angles, rates : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3)
    """
    return _matvec(euler_gamma(seq, angles), _vec3(rates))


def euler_rates_from_omega(seq, angles, omega, *, tol: float = 1e-9) -> np.ndarray:
    """Euler rates from the angular velocity, :math:`\\dot\\theta = \\Gamma^{-1}\\omega`.

    The inverse is the adjugate form, row j of :math:`\\Gamma^{-1}` being
    :math:`(\\gamma_{j+1} \\times \\gamma_{j+2}) / \\det\\Gamma`.

    Parameters
    ----------
    seq : str
    angles, omega : array_like, shape (..., 3)
        ``omega`` is in Go components.
    tol : float
        Gimbal lock threshold on :math:`|\\det\\Gamma|`.

    Returns
    -------
    ndarray, shape (..., 3)

    Raises
    ------
    GimbalLockError
        Where Gamma is singular; names the sequence and the middle angle.
    """
    theta = _vec3(angles)
    Gamma = euler_gamma(seq, theta)
    det = _gamma_det(Gamma)
    locked = np.abs(det) < tol
    if np.any(locked):
        t2 = float(np.broadcast_to(theta[..., 1], locked.shape)[locked].flat[0])
        raise GimbalLockError(
            f"Euler sequence {seq!r} is at gimbal lock (theta2 = {t2!r} rad, "
            f"|det Gamma| < {tol}); Euler rates are undefined, use a quaternion instead"
        )
    g1, g2, g3 = Gamma[..., 0], Gamma[..., 1], Gamma[..., 2]
    Gamma_inv = np.stack([_cross(g2, g3), _cross(g3, g1), _cross(g1, g2)], axis=-2)
    return _matvec(Gamma_inv, _vec3(omega)) / det[..., None]


# ---------------------------------------------------------------------------
# Quaternions (scalar-last [x, y, z, w])
# ---------------------------------------------------------------------------


def quat_normalize(q) -> np.ndarray:
    """Unit quaternion :math:`q / \\|q\\|`.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)

    Raises
    ------
    ModelError
        If any quaternion is zero or not finite.

    Examples
    --------
    >>> quat_normalize([0.0, 0.0, 0.0, 2.0])
    array([0., 0., 0., 1.])
    """
    q = _quat(q)
    norm2 = np.sum(q * q, axis=-1)
    if not np.all(np.isfinite(norm2)) or np.any(norm2 == 0.0):
        raise ModelError(f"quaternion must be finite and non-zero to normalize, got {q!r}")
    return charts.quat_normalize(NUMPY, q)


def quat_conjugate(q) -> np.ndarray:
    """Conjugate :math:`q^* = [-q_v, q_4]`, the inverse rotation for a unit quaternion.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    q = _quat(q)
    return np.concatenate([-q[..., :3], q[..., 3:]], axis=-1)


def quat_multiply(p, q) -> np.ndarray:
    """Hamilton product, scalar-last.

    .. math:: p \\otimes q = [\\,p_4 q_v + q_4 p_v + p_v \\times q_v,\\;
              p_4 q_4 - p_v \\cdot q_v\\,]

    so that ``quat_to_dcm(p ⊗ q) == quat_to_dcm(p) @ quat_to_dcm(q)`` (Shuster 1993).

    Parameters
    ----------
    p, q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 4)

    Examples
    --------
    >>> quat_multiply([0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    array([1., 0., 0., 0.])
    """
    return charts.quat_product(_quat(p), _quat(q))


def quat_to_dcm(q) -> np.ndarray:
    """DCM ``R_A_B`` of a scalar-last quaternion (normalized first).

    .. math:: R = (q_4^2 - q_v \\cdot q_v) I + 2 q_v q_v^T + 2 q_4 [q_v]_\\times

    The transpose of 42's ``Q2C`` (dcmkit.c), equal to scipy's
    ``Rotation.from_quat(q).as_matrix()``.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 3, 3)

    Examples
    --------
    >>> np.allclose(quat_to_dcm([0.0, 0.0, np.sin(0.2), np.cos(0.2)]),
    ...             elementary_rotation(3, 0.4))
    True
    """
    return charts.quat_dcm_form(quat_normalize(q))


def _canonical_quat(q: np.ndarray) -> np.ndarray:
    """Sign convention: w > 0, or w == 0 and the first non-zero component positive."""
    ordered = q[..., [3, 0, 1, 2]]
    first = np.argmax(ordered != 0.0, axis=-1)
    lead = np.take_along_axis(ordered, first[..., None], axis=-1)
    return np.where(lead < 0.0, -q, q)


def dcm_to_quat(R) -> np.ndarray:
    """Canonical (w >= 0) unit quaternion of a DCM by Shepperd's method.

    Four candidates, each a multiple of q, are formed,

    .. math:: 4 q_4 q = [R_{32}-R_{23},\\; R_{13}-R_{31},\\; R_{21}-R_{12},\\; 1+\\operatorname{tr}R],
              \\quad 4 q_1 q = [1+2R_{11}-\\operatorname{tr}R,\\; R_{12}+R_{21},\\;
              R_{13}+R_{31},\\; R_{32}-R_{23}], \\ldots

    and the one with the largest pivot (tr R or R_kk) is normalized, which is accurate
    for every rotation (Shepperd 1978; Markley 2008).

    Parameters
    ----------
    R : array_like, shape (..., 3, 3)

    Returns
    -------
    ndarray, shape (..., 4)

    Examples
    --------
    >>> np.round(dcm_to_quat(np.eye(3)), 12)
    array([0., 0., 0., 1.])
    """
    R = _mat3(R)
    tr = np.trace(R, axis1=-2, axis2=-1)
    d0, d1, d2 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    s01, s02, s12 = (
        R[..., 0, 1] + R[..., 1, 0],
        R[..., 0, 2] + R[..., 2, 0],
        R[..., 1, 2] + R[..., 2, 1],
    )
    a0, a1, a2 = (
        R[..., 2, 1] - R[..., 1, 2],
        R[..., 0, 2] - R[..., 2, 0],
        R[..., 1, 0] - R[..., 0, 1],
    )
    candidates = np.stack(
        [
            np.stack([1.0 + 2.0 * d0 - tr, s01, s02, a0], axis=-1),
            np.stack([s01, 1.0 + 2.0 * d1 - tr, s12, a1], axis=-1),
            np.stack([s02, s12, 1.0 + 2.0 * d2 - tr, a2], axis=-1),
            np.stack([a0, a1, a2, 1.0 + tr], axis=-1),
        ],
        axis=-2,
    )
    pivot = np.argmax(np.stack([d0, d1, d2, tr], axis=-1), axis=-1)
    q = np.take_along_axis(candidates, pivot[..., None, None], axis=-2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return _canonical_quat(q)


def quat_rate(q, omega) -> np.ndarray:
    """Quaternion kinematics with the body-frame angular velocity.

    .. math:: \\dot q = \\tfrac12\\, q \\otimes [\\omega, 0], \\quad
              \\dot q_v = \\tfrac12 (q_4 \\omega - \\omega \\times q_v), \\quad
              \\dot q_4 = -\\tfrac12 \\omega \\cdot q_v

    with ``omega`` in B components for ``R_A_B = quat_to_dcm(q)``. Same as 42's
    ``QW2QDOT`` (Kane, Likins & Levinson 1983, eq. 1.13).

    Parameters
    ----------
    q : array_like, shape (..., 4)
    omega : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    omega = _vec3(omega)
    q = _quat(q)
    batch = np.broadcast_shapes(q.shape[:-1], omega.shape[:-1])
    return charts.quat_rate(np.broadcast_to(q, batch + (4,)), np.broadcast_to(omega, batch + (3,)))


# ---------------------------------------------------------------------------
# Rotation vectors
# ---------------------------------------------------------------------------


def _angle(phi: np.ndarray) -> np.ndarray:
    return np.linalg.norm(phi, axis=-1)


def rotvec_to_dcm(phi) -> np.ndarray:
    """Rodrigues' formula for the rotation vector :math:`\\phi = a\\,n`.

    .. math:: R = I + \\frac{\\sin a}{a} [\\phi]_\\times
              + \\frac{1 - \\cos a}{a^2} [\\phi]_\\times^2

    with Taylor series near a = 0 (Shuster 1993).

    Parameters
    ----------
    phi : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)

    Examples
    --------
    >>> np.allclose(rotvec_to_dcm([0.0, 0.7, 0.0]), elementary_rotation(2, 0.7))
    True
    """
    phi = _vec3(phi)
    a = _angle(phi)
    A = _series_or_exact(a, lambda x: np.sin(x) / x, _SINC, 1e-3)
    B = _series_or_exact(a, lambda x: 2.0 * (np.sin(0.5 * x) / x) ** 2, _COSC, 1e-3)
    K = skew(phi)
    return _EYE + A[..., None, None] * K + B[..., None, None] * (K @ K)


def rotvec_to_quat(phi) -> np.ndarray:
    """Quaternion of a rotation vector, :math:`q = [\\sin(a/2)\\, \\phi / a,\\; \\cos(a/2)]`.

    Series in a near 0 (Shuster 1993).

    Parameters
    ----------
    phi : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 4)
    """
    phi = _vec3(phi)
    a = _angle(phi)
    k = _series_or_exact(a, lambda x: np.sin(0.5 * x) / x, _HALF_SINC, 1e-3)
    return np.concatenate([k[..., None] * phi, np.cos(0.5 * a)[..., None]], axis=-1)


def quat_to_rotvec(q) -> np.ndarray:
    """Rotation vector :math:`\\phi = a\\,n` with :math:`a \\in [0, \\pi]`.

    After normalization and the sign choice :math:`q_4 \\ge 0`,
    :math:`a = 2\\operatorname{atan2}(\\|q_v\\|, q_4)` and :math:`\\phi = (a/\\|q_v\\|)\\, q_v`;
    near :math:`q_v = 0` the factor uses the series of
    :math:`2\\arctan(x)/(x q_4)`, :math:`x = \\|q_v\\|/q_4`.

    Parameters
    ----------
    q : array_like, shape (..., 4)

    Returns
    -------
    ndarray, shape (..., 3)

    Examples
    --------
    >>> np.round(quat_to_rotvec([0.0, 0.0, np.sin(0.5), np.cos(0.5)]), 12)
    array([0., 0., 1.])
    """
    q = quat_normalize(q)
    q = np.where(q[..., 3:] < 0.0, -q, q)
    v, w = q[..., :3], q[..., 3]
    n = np.linalg.norm(v, axis=-1)
    small = n < 1e-3 * w
    n_safe = np.where(small, 1.0, n)
    w_safe = np.where(small, w, 1.0)
    exact = 2.0 * np.arctan2(n, w) / n_safe
    series = 2.0 / w_safe * _even_series((n / w_safe) ** 2, _ATANC)
    return np.where(small, series, exact)[..., None] * v


def dcm_to_rotvec(R) -> np.ndarray:
    """Rotation vector of a DCM, angle in [0, pi], through Shepperd's quaternion.

    Going through :func:`dcm_to_quat` keeps the axis accurate near a = pi, where
    the skew part of R vanishes.

    Parameters
    ----------
    R : array_like, shape (..., 3, 3)

    Returns
    -------
    ndarray, shape (..., 3)
    """
    return quat_to_rotvec(dcm_to_quat(R))


def rotvec_rate_matrix(phi) -> np.ndarray:
    """Right Jacobian of SO(3): :math:`\\omega_B = J_r(\\phi)\\, \\dot\\phi`.

    .. math:: J_r = I - \\frac{1-\\cos a}{a^2}[\\phi]_\\times
              + \\frac{a - \\sin a}{a^3}[\\phi]_\\times^2

    for ``R_A_B = rotvec_to_dcm(phi)``, with Taylor series near a = 0
    (Bullo & Murray 1995; Shuster 1993).

    Parameters
    ----------
    phi : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    phi = _vec3(phi)
    a = _angle(phi)
    B = _series_or_exact(a, lambda x: 2.0 * (np.sin(0.5 * x) / x) ** 2, _COSC, 1e-3)
    C = _series_or_exact(a, lambda x: (x - np.sin(x)) / x**3, _SINC3, _SERIES_ANGLE)
    K = skew(phi)
    return _EYE - B[..., None, None] * K + C[..., None, None] * (K @ K)


def rotvec_rate_matrix_inv(phi) -> np.ndarray:
    """Inverse right Jacobian: :math:`\\dot\\phi = J_r^{-1}(\\phi)\\, \\omega_B`.

    .. math:: J_r^{-1} = I + \\tfrac12[\\phi]_\\times
              + \\left(\\frac{1}{a^2} - \\frac{\\cot(a/2)}{2a}\\right)[\\phi]_\\times^2

    with a Taylor series near a = 0; singular at a = 2 pi (Bullo & Murray 1995).

    Parameters
    ----------
    phi : array_like, shape (..., 3)

    Returns
    -------
    ndarray, shape (..., 3, 3)
    """
    phi = _vec3(phi)
    a = _angle(phi)
    D = _series_or_exact(
        a,
        lambda x: 1.0 / x**2 - np.cos(0.5 * x) / (2.0 * x * np.sin(0.5 * x)),
        _JINV,
        _SERIES_ANGLE,
    )
    K = skew(phi)
    return _EYE + 0.5 * K + D[..., None, None] * (K @ K)
