"""Stage 1: kinematics of the tree: attitudes, positions, angular velocities, velocities.

The chain of each joint k (refs/notes/42-kane-msd.md §3.2, 42 Joints slides 10-17)::

    R_Bi_Bo = R_Bi_Gi R_Gi_Go R_Go_Bo
    p_Bo    = p_Bi + R_N_Bi (inner_point + R_Bi_Gi Delta d) - R_N_Bo outer_point

For a tree, with ``P[i, k] = 1`` when joint k lies on the path from body i to N, every
velocity is a sum over the path (all vectors in N components):

.. math::

    \\omega_i = \\sum_k P_{ik}\\, \\omega^{rel}_k, \\qquad
    \\omega^{rel}_k = R_{N G_o} \\Gamma_k \\sigma_k, \\qquad
    v_x = \\sum_k P_{ik} \\left[ \\omega^{rel}_k \\times (x - o_k) + w_k \\right], \\qquad
    w_k = R_{N G_i} \\Delta_k s_k

with ``o_k`` the joint point (Go origin) and ``x`` any point fixed in body i. The
composition down the tree is done by pointer jumping on 4×4 homogeneous transforms,
``T <- T[a_p] @ T`` over the schedule of :class:`kanedyn.plan.Plan` (⌈log2 depth⌉
batched products), never by a loop over bodies.

Every array may carry leading batch axes (states and parameters of an ensemble): the
single-state path is the batched path with an empty batch shape.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.model import Model, State
from kanedyn.plan import Params, Plan, params_of, plan_of

__all__ = ["Kinematics", "bilinear", "cross", "kinematics"]

Array = NDArray[np.float64]


_EYE = np.eye(3)
_EYE4 = np.eye(4)


def _bilinear_form(pairs: list[tuple[int, int, int, float]], p: int) -> tuple:
    """Constant (I, J, K) with ``z = (x[..., I] * y[..., J]) @ K`` for the terms
    ``z[out] += sign * x[i] * y[j]`` listed in ``pairs``; ``p`` outputs."""
    I = np.array([i for i, _, _, _ in pairs], dtype=np.intp)
    J = np.array([j for _, j, _, _ in pairs], dtype=np.intp)
    K = np.zeros((len(pairs), p))
    for row, (_, _, out, sign) in enumerate(pairs):
        K[row, out] = sign
    return I, J, K


def _cross_terms(xo: int, yo: int, zo: int) -> list[tuple[int, int, int, float]]:
    """Terms of ``z[zo:zo+3] += x[xo:xo+3] × y[yo:yo+3]``."""
    terms = []
    for c, (a, b) in enumerate(((1, 2), (2, 0), (0, 1))):
        terms += [(xo + a, yo + b, zo + c, 1.0), (xo + b, yo + a, zo + c, -1.0)]
    return terms


CROSS = _bilinear_form(_cross_terms(0, 0, 0), 3)
#: spatial motion cross product (ω, v) ×ₘ (ω₂, v₂) = (ω × ω₂, ω × v₂ + v × ω₂)
MOTION_CROSS = _bilinear_form(
    _cross_terms(0, 0, 0) + _cross_terms(0, 3, 3) + _cross_terms(3, 0, 3), 6
)
#: spatial force cross product (ω, v) ×f (n, f) = (ω × n + v × f, ω × f)
FORCE_CROSS = _bilinear_form(
    _cross_terms(0, 0, 0) + _cross_terms(3, 3, 0) + _cross_terms(0, 3, 3), 6
)


def bilinear(x: Array, y: Array, form: tuple) -> Array:
    """A constant bilinear map over the last axis, ``(x[..., I] * y[..., J]) @ K``
    (broadcasting): one gather per operand, one product, one matmul."""
    I, J, K = form
    return (x[..., I] * y[..., J]) @ K


def cross(a: Array, b: Array) -> Array:
    """Cross product over the last axis (broadcasting), cheaper than ``np.cross``."""
    I, J, K = CROSS
    return (a[..., I] * b[..., J]) @ K


def mv(A: Array, x: Array) -> Array:
    """Batched matrix-vector product ``A[k] @ x[k]``."""
    return (A @ x[..., None])[..., 0]


def _pad(x: Array) -> Array:
    """``x`` (..., m) with a trailing zero (..., m + 1): the sentinel entry."""
    out = np.zeros(x.shape[:-1] + (x.shape[-1] + 1,))
    out[..., :-1] = x
    return out


@attrs.frozen(eq=False)
class Kinematics:
    """Positions and velocities of every body, plus the per-joint quantities behind them.

    Body arrays (index i, model order; all in N components):
    ``R_N_B`` (nb, 3, 3), ``p`` (nb, 3) body-frame origins, ``r`` (nb, 3) mass centres,
    ``omega`` (nb, 3) angular velocities, ``v`` (nb, 3) mass-centre velocities.

    Joint arrays (index k; joint k feeds body k): ``R_N_Gi``, ``R_N_Go`` (nj, 3, 3);
    ``o`` (nj, 3) joint points (Go origins) and ``v_o`` their velocities;
    ``Gamma`` (nj, 3, 3) joint partials in Go (unused columns are the rotational
    constraint axes); ``Gamma_dot`` (nj, 3, 3) its time derivative; ``Gds`` (nj, 3) = Γ̇σ; ``omega_rel`` (nj, 3) = R_N_Go Γσ;
    ``w`` (nj, 3) = R_N_Gi Δ s, the slide velocity; ``omega_in`` (nj, 3) the inner
    body's angular velocity (zero for roots).

    Spatial (Plücker) quantities about N's origin, in N: ``V`` (nb, 6) = (ω_i, v_O)
    the body's spatial velocity (v_O: velocity of the body point at N's origin);
    ``Phi`` (nj, 6, 6) the joint's motion subspace, row j < 3 = (h_j, o × h_j) for the
    rotational axis ``h_j = R_N_Go Γ[:, j]``, row 3 + j = (0, R_N_Gi Δ[:, j]);
    ``V_rel`` (nj, 6) = Φᵀ [σ | ṡ] the joint's relative spatial velocity.

    With a batch of states or parameters every array has the leading batch axes too.
    """

    R_N_B: Array
    p: Array
    r: Array
    omega: Array
    v: Array
    R_N_Gi: Array
    R_N_Go: Array
    o: Array
    v_o: Array
    Gamma: Array
    Gamma_dot: Array
    Gds: Array
    omega_rel: Array
    w: Array
    omega_in: Array
    V: Array
    Phi: Array
    V_rel: Array
    params: Params


def joint_rotations(model: Model, qpad: Array, upad: Array) -> tuple[Array, Array, Array, Array]:
    """Per-joint ``R_Gi_Go``, ``Γᵀ`` (rows are Γ's columns), ``Γ̇`` and ``Γ̇σ`` (Go).

    Gimbals: ``R_Gi_Go = euler_to_dcm(seq, θ)`` with unused angles zero, ``ω = Γ(θ) θ̇``
    (42 ``JointPartials``). Spherical: ``R_Gi_Go = quat_to_dcm(q)``, ``Γ = U``, ``Γ̇ = 0``.
    Joints without rotation: ``R_Gi_Go = U``, ``Γ = 0``. ``qpad``, ``upad`` (..., nq + 1),
    (..., n + 1) end with the sentinel zero.
    """
    lay, pl = model.layout, plan_of(model)
    if pl.gimbal_all:
        return _gimbal(lay, pl, qpad[..., lay.gimbal_q], upad[..., lay.gimbal_u])
    batch = qpad.shape[:-1]
    parts = []  # (R_Gi_Go, Γᵀ, Γ̇, Γ̇σ) of the gimbals, the spherical joints, the others
    if lay.gimbal.size:
        parts.append(_gimbal(lay, pl, qpad[..., lay.gimbal_q], upad[..., lay.gimbal_u]))
    if pl.has_spherical:
        zeros = np.zeros(batch + (lay.spherical.size, 3, 3))
        eye = zeros + _EYE
        parts.append((quat_to_dcm(qpad[..., lay.quat_q]), eye, zeros, zeros[..., 0]))
    if pl.n_other:
        zeros = np.zeros(batch + (pl.n_other, 3, 3))
        parts.append((zeros + _EYE, zeros, zeros, zeros[..., 0]))
    if len(parts) == 1:
        return parts[0]
    R, GammaT, Gamma_dot, Gds = (
        _assemble(arrays, batch, pl.joint_order, nd)
        for arrays, nd in zip(zip(*parts, strict=True), (3, 3, 3, 2), strict=True)
    )
    return R, GammaT, Gamma_dot, Gds


def _assemble(arrays: tuple[Array, ...], batch: tuple[int, ...], order: Any, nd: int) -> Array:
    """Per-joint array from the blocks [gimbals | spherical | others] (core ndim ``nd``)."""
    if batch:
        arrays = tuple(np.broadcast_to(a, batch + a.shape[-nd:]) for a in arrays)
    return np.take(np.concatenate(arrays, axis=-nd), order, axis=-nd)


def quat_to_dcm(quat: Array) -> Array:
    """``R_A_B`` of scalar-last quaternions (..., 4), normalized: the quadratic form
    ``R = [(q_4² - q_v·q_v) U + 2 q_v q_vᵀ + 2 q_4 [q_v]×] / |q|²`` (see
    :func:`kanedyn.rotation.quat_to_dcm`) as one :func:`bilinear` map."""
    R = bilinear(quat, quat, _QUAT_DCM) / np.sum(quat * quat, axis=-1, keepdims=True)
    return R.reshape(quat.shape[:-1] + (3, 3))


def _quat_dcm_terms() -> list[tuple[int, int, int, float]]:
    x, y, z, w = range(4)
    entries = {  # R[i, j] as sums of sign * q_a q_b
        (0, 0): [(w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)],
        (1, 1): [(w, w, 1), (y, y, 1), (x, x, -1), (z, z, -1)],
        (2, 2): [(w, w, 1), (z, z, 1), (x, x, -1), (y, y, -1)],
        (0, 1): [(x, y, 2), (w, z, -2)], (1, 0): [(x, y, 2), (w, z, 2)],
        (0, 2): [(x, z, 2), (w, y, 2)], (2, 0): [(x, z, 2), (w, y, -2)],
        (1, 2): [(y, z, 2), (w, x, -2)], (2, 1): [(y, z, 2), (w, x, 2)],
    }  # fmt: skip
    return [(a, b, 3 * i + j, c) for (i, j), terms in entries.items() for a, b, c in terms]


_QUAT_DCM = _bilinear_form(_quat_dcm_terms(), 9)


def _gimbal(lay: Any, pl: Plan, theta: Array, sigma: Array) -> tuple[Array, Array, Array, Array]:
    """All gimbal joints at once: ``R_Gi_Go``, ``Γᵀ``, ``Γ̇`` and ``Γ̇σ`` (the formulas of
    :func:`kanedyn.rotation.euler_to_dcm_axes`, ``euler_gamma_axes`` and
    ``euler_gamma_dot_axes``, with the per-axis constants precomputed by the model).

    ``R_k = e eᵀ + cos θ_k (U - e eᵀ) + sin θ_k [e]×``; ``R = R_1 R_2 R_3``;
    ``Γ = [R_3ᵀR_2ᵀ e_1 | R_3ᵀ e_2 | e_3]``; ``γ̇_1 = γ_1 × (σ_2 γ_2 + σ_3 γ_3)``,
    ``γ̇_2 = γ_2 × σ_3 γ_3``, ``γ̇_3 = 0``. One-axis gimbals (``pl.gimbal_dof == 1``)
    keep only ``R_1``: then ``Γ = [e_1 | e_2 | e_3]`` and ``Γ̇ = 0``.
    """
    eeT, e = lay.gimbal_eeT, lay.gimbal_e
    zeros3 = np.zeros(theta.shape[:-1] + (3, 3))
    if pl.gimbal_dof == 1:
        c = np.cos(theta[..., 0])[..., None, None]
        s = np.sin(theta[..., 0])[..., None, None]
        R = eeT[:, 0] + c * (_EYE - eeT[:, 0]) + s * lay.gimbal_skew[:, 0]
        GammaT = e if R.ndim == 3 else np.broadcast_to(e, R.shape)  # constant: [e_1 | e_2 | e_3]
        return R, GammaT, zeros3, zeros3[..., 0]
    c = np.cos(theta)[..., None, None]
    s = np.sin(theta)[..., None, None]
    Rk = eeT + c * (_EYE - eeT) + s * lay.gimbal_skew  # (..., ng, 3, 3, 3)
    R3 = Rk[..., 2, :, :]
    R23 = Rk[..., 1, :, :] @ R3
    GammaT = np.empty(R3.shape)
    GammaT[..., 0:1, :] = e[:, 0:1, :] @ R23  # γ_1ᵀ = e_1ᵀ R_2 R_3
    GammaT[..., 1:2, :] = e[:, 1:2, :] @ R3
    GammaT[..., 2, :] = e[:, 2, :]
    W = sigma[..., None] * GammaT  # rows σ_j γ_j
    B = np.cumsum(W[..., :0:-1, :], axis=-2)[..., ::-1, :]  # rows σ_2γ_2 + σ_3γ_3, σ_3γ_3
    DT = cross(GammaT[..., :2, :], B)  # rows γ̇_1, γ̇_2
    Gamma_dot = zeros3
    Gamma_dot[..., :, :2] = DT.swapaxes(-1, -2)
    Gds = (sigma[..., None, :2] @ DT)[..., 0, :]
    return Rk[..., 0, :, :] @ R23, GammaT, Gamma_dot, Gds


def kinematics(model: Model, state: State) -> Kinematics:
    """Attitudes, mass-centre positions, angular velocities and velocities of all bodies.

    Implements the chain Bi → Gi → slide → rotation → Go → Bo of Stoneking's joint model
    (42 ``MapStateVectorToBodyStates``); see the module docstring for the equations.

    >>> import kanedyn as kd
    >>> m = kd.examples.double_pendulum()
    >>> kd.kinematics(m, m.initial_state()).r.shape
    (2, 3)
    """
    model.check_state(state)
    return _kinematics(model, state.q, state.u)


def _kinematics(model: Model, q: Array, u: Array, params: Params | None = None) -> Kinematics:
    """Kinematics at ``q`` (..., nq), ``u`` (..., n) with ``params`` (default: the model's).

    Steps (all joints and bodies at once):

    1. ``J_k = [R_Gi_Go, Δd]`` and ``T_Bi_Bo = C_in J C_out`` (see :mod:`kanedyn.plan`);
    2. pointer jumping ``T <- T[a_p] @ T`` gives ``T_N_B``; then ``T_N_Gi = T_N_Bi C_in``,
       ``T_N_Go = T_N_Gi J``, ``r = T_N_B [com; 1]``;
    3. ``Φ`` from ``h = R_N_Go Γ``, ``d = R_N_Gi Δ``; ``V_rel = Φᵀ[σ | ṡ]``,
       ``V = P V_rel``; ``v_x = v_O + ω × x`` for the mass centres and joint points.
    """
    pl = plan_of(model)
    pa = params_of(model) if params is None else params
    nb = pl.nb
    qpad, upad = _pad(q), _pad(u)
    R_Gi_Go, GammaT, Gamma_dot, Gds = joint_rotations(model, qpad, upad)
    batch = q.shape[:-1]
    if pa.batch_shape:
        batch = np.broadcast_shapes(batch, pa.batch_shape)

    J = np.zeros(R_Gi_Go.shape[:-2] + (4, 4))
    J[..., :3, :3] = R_Gi_Go
    J[..., 3, 3] = 1.0
    if pl.has_slides:
        J[..., :3, 3] = (qpad[..., model.layout.trn_q][..., None, :] @ pl.Delta_T)[..., 0, :]

    T = np.empty(batch + (nb + 1, 4, 4))
    T[..., :nb, :, :] = pa.C_in @ J @ pa.C_out
    T[..., nb, :, :] = _EYE4
    for a in pl.jumps:
        T = T[..., a, :, :] @ T
    T_N_B = T[..., :nb, :, :]
    T_N_Gi = T[..., pl.parent_ext, :, :] @ pa.C_in
    T_N_Go = T_N_Gi @ J
    R_N_Go, o = T_N_Go[..., :3, :3], T_N_Go[..., :3, 3]
    R_N_Gi = T_N_Gi[..., :3, :3]
    r = (T_N_B @ pa.com_h)[..., :3, 0]

    # motion subspace Φ and spatial velocities about N's origin
    HT = GammaT @ R_N_Go.swapaxes(-1, -2)  # rows h_j = R_N_Go Γ[:, j]
    Phi = np.zeros(batch + (nb, 6, 6))
    Phi[..., :3, :3] = HT
    Phi[..., :3, 3:] = cross(o[..., None, :], HT)
    if pl.has_slides:
        Phi[..., 3:, 3:] = pl.Delta_T @ R_N_Gi.swapaxes(-1, -2)
    z = upad[..., pl.slots_u]  # (..., nj, 6) = [σ | ṡ], zero in unused slots
    V_rel = (z[..., None, :] @ Phi)[..., 0, :]
    V_ext = pl.path_ext @ V_rel  # row nb: N at rest
    V = V_ext[..., :nb, :]
    omega_rel = V_rel[..., :3]
    if pl.has_slides:
        w = (z[..., None, 3:] @ Phi[..., 3:, 3:])[..., 0, :]
    else:
        w = np.zeros(V_rel.shape[:-1] + (3,))
    omega, v_O = V[..., :3], V[..., 3:]
    v = v_O + cross(omega, r)
    v_o = v_O + cross(omega, o)
    omega_in = V_ext[..., pl.parent_ext, :3]
    return Kinematics(
        R_N_B=T_N_B[..., :3, :3],
        p=T_N_B[..., :3, 3],
        r=r,
        omega=omega,
        v=v,
        R_N_Gi=R_N_Gi,
        R_N_Go=R_N_Go,
        o=o,
        v_o=v_o,
        Gamma=GammaT.swapaxes(-1, -2),
        Gamma_dot=Gamma_dot,
        Gds=Gds,
        omega_rel=omega_rel,
        w=w,
        omega_in=omega_in,
        V=V,
        Phi=Phi,
        V_rel=V_rel,
        params=pa,
    )
