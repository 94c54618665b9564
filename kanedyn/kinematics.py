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
composition down the tree is done by pointer jumping over the precomputed schedule
``model.layout.jump`` (⌈log2 depth⌉ batched products), never by a loop over bodies.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import rotation as rot
from kanedyn.model import Model, State

__all__ = ["Kinematics", "cross", "kinematics"]

Array = NDArray[np.float64]


_EYE = np.eye(3)
_I1 = np.array([1, 2, 0])
_I2 = np.array([2, 0, 1])


def cross(a: Array, b: Array) -> Array:
    """Cross product over the last axis (broadcasting), cheaper than ``np.cross``."""
    return a[..., _I1] * b[..., _I2] - a[..., _I2] * b[..., _I1]


def mv(A: Array, x: Array) -> Array:
    """Batched matrix-vector product ``A[k] @ x[k]``."""
    return (A @ x[..., None])[..., 0]


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


def joint_rotations(model: Model, qpad: Array, upad: Array) -> tuple[Array, Array, Array]:
    """Per-joint ``R_Gi_Go``, ``Gamma`` and ``Gamma_dot`` (Go components).

    Gimbals: ``R_Gi_Go = euler_to_dcm(seq, θ)`` with unused angles zero, ``ω = Γ(θ) θ̇``
    (42 ``JointPartials``). Spherical: ``R_Gi_Go = quat_to_dcm(q)``, ``Γ = U``, ``Γ̇ = 0``.
    """
    lay = model.layout
    nj = model.nb
    R_Gi_Go = np.broadcast_to(np.eye(3), (nj, 3, 3)).copy()
    Gamma = np.zeros((nj, 3, 3))
    Gamma_dot = np.zeros((nj, 3, 3))
    if lay.gimbal.size:
        R_Gi_Go[lay.gimbal], Gamma[lay.gimbal], Gamma_dot[lay.gimbal] = _gimbal(
            lay, qpad[lay.gimbal_q], upad[lay.gimbal_u]
        )
    if lay.spherical.size:
        quat = qpad[lay.quat_q]
        quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
        R_Gi_Go[lay.spherical] = rot.quat_to_dcm(quat)
        Gamma[lay.spherical] = np.eye(3)
    return R_Gi_Go, Gamma, Gamma_dot


def _gimbal(lay: Any, theta: Array, sigma: Array) -> tuple[Array, Array, Array]:
    """All gimbal joints at once: ``R_Gi_Go``, ``Γ``, ``Γ̇`` (the formulas of
    :func:`kanedyn.rotation.euler_to_dcm_axes`, ``euler_gamma_axes`` and
    ``euler_gamma_dot_axes``, with the per-axis constants precomputed by the model).

    ``R_k = e eᵀ + cos θ_k (U - e eᵀ) + sin θ_k [e]×``; ``R = R_1 R_2 R_3``;
    ``Γ = [R_3ᵀR_2ᵀ e_1 | R_3ᵀ e_2 | e_3]``; ``γ̇_1 = γ_1 × (σ_2 γ_2 + σ_3 γ_3)``,
    ``γ̇_2 = γ_2 × σ_3 γ_3``, ``γ̇_3 = 0``.
    """
    c = np.cos(theta)[..., None, None]
    s = np.sin(theta)[..., None, None]
    eeT = lay.gimbal_eeT
    Rk = eeT + c * (_EYE - eeT) + s * lay.gimbal_skew  # (ng, 3, 3, 3)
    R2T, R3T = np.swapaxes(Rk[:, 1], -1, -2), np.swapaxes(Rk[:, 2], -1, -2)
    e = lay.gimbal_e
    g3 = e[:, 2]
    g2 = mv(R3T, e[:, 1])
    g1 = mv(R3T, mv(R2T, e[:, 0]))
    Gamma = np.stack((g1, g2, g3), axis=-1)
    d1 = cross(g1, sigma[:, 1:2] * g2 + sigma[:, 2:3] * g3)
    d2 = cross(g2, sigma[:, 2:3] * g3)
    Gamma_dot = np.stack((d1, d2, np.zeros_like(d1)), axis=-1)
    return Rk[:, 0] @ Rk[:, 1] @ Rk[:, 2], Gamma, Gamma_dot


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


def _kinematics(model: Model, q: Array, u: Array) -> Kinematics:
    lay = model.layout
    nb = model.nb
    P = lay.path
    qpad = np.append(q, 0.0)
    upad = np.append(u, 0.0)
    R_Gi_Go, Gamma, Gamma_dot = joint_rotations(model, qpad, upad)

    # joint k: body k relative to its inner body (or to N for a root)
    R_Bi_Go = lay.R_Bi_Gi @ R_Gi_Go
    R_Bi_Bo = R_Bi_Go @ lay.R_Go_Bo
    slide = mv(lay.Delta, qpad[lay.trn_q])  # Δ d, Gi components
    p_Bi_Bo = lay.inner_point + mv(lay.R_Bi_Gi, slide) - mv(R_Bi_Bo, lay.outer_point)

    # compose down the tree by pointer jumping: T_k <- T_anc(k) ∘ T_k
    R_N_B = R_Bi_Bo.copy()
    p = p_Bi_Bo.copy()
    for idx, src in lay.jump:
        R_src, p_src = R_N_B[src], p[src]
        p[idx] = p_src + mv(R_src, p[idx])
        R_N_B[idx] = R_src @ R_N_B[idx]

    # frames and points of each joint, in N; index nb of the extended arrays is N itself
    R_ext = np.concatenate((R_N_B, np.eye(3)[None]), axis=0)
    inner = np.where(lay.parent < 0, nb, lay.parent)
    R_N_Bi = R_ext[inner]
    R_N_Gi = R_N_Bi @ lay.R_Bi_Gi
    R_N_Go = R_N_Bi @ R_Bi_Go
    o = p + mv(R_N_B, lay.outer_point)
    r = p + mv(R_N_B, lay.com)

    # velocities: sums over the path
    sigma = upad[lay.rot_u]
    omega_rel = mv(R_N_Go, mv(Gamma, sigma))
    w = mv(R_N_Gi, mv(lay.Delta, upad[lay.trn_u]))
    omega = P @ omega_rel
    transport = P @ w - P @ cross(omega_rel, o)  # Σ_k [w_k - ω_k^rel × o_k]
    v = cross(omega, r) + transport
    v_o = cross(omega, o) + transport
    omega_in = np.concatenate((omega, np.zeros((1, 3))), axis=0)[inner]
    return Kinematics(
        R_N_B=R_N_B,
        p=p,
        r=r,
        omega=omega,
        v=v,
        R_N_Gi=R_N_Gi,
        R_N_Go=R_N_Go,
        o=o,
        v_o=v_o,
        Gamma=Gamma,
        Gamma_dot=Gamma_dot,
        Gds=mv(Gamma_dot, sigma),
        omega_rel=omega_rel,
        w=w,
        omega_in=omega_in,
    )
