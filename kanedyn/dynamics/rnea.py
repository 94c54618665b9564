"""Recursive Newton–Euler inverse dynamics: a third path to the joint efforts.

The free-body diagram of body i (seed 000, "Free Body Diagram of Link i") balances the
force ``f_{k}`` and moment ``N_{k}`` that its inbound joint k transmits from the inner
body, the forces and moments of its outbound joints (reacted), gravity, and the applied
loads:

.. math::

    f_k &= m_i (a_{ci} - g) - F_i + \\sum_{c \\in \\text{children}(i)} f_c \\\\
    N_k &= I_i \\alpha_i + \\omega_i \\times (I_i \\omega_i + h_i) - T_i
        + (r_{ci} - o_k) \\times \\big(m_i (a_{ci} - g) - F_i\\big)
        + \\sum_{c} \\big[ N_c + (o_c - o_k) \\times f_c \\big]

with ``N_k`` taken about the joint point ``o_k`` (the Go origin), all vectors in N. A
forward pass from the root carries the angular velocities and accelerations and the
accelerations of the joint points and mass centres along the joint chain
``Bi → Gi → slides → rotation → Go → Bo``; a backward pass from the leaves sums the
forces. The joint efforts are the projections on the joint's axes, less what the joint's
own springs and dampers supply:

.. math::

    \\tau_r = b_r \\cdot N_k - Q^{spring}_r \\;(\\text{rotational}), \\qquad
    \\tau_c = \\delta_c \\cdot f_k - Q^{spring}_c \\;(\\text{slide})

(``b_r`` the axis of rotational speed r in N: the gimbal axis of angle r, or Go axis r of
a spherical joint; ``δ_c`` the slide axis), so that ``τ = M ν̇ - f`` with Kane's ``M`` and
``f``: the same vector as :func:`kanedyn.inverse_dynamics`. Nothing of the Kane path
(partials, mass matrix) is used; the spring law is the model's (:mod:`kanedyn.dynamics.loads`).
"""

from __future__ import annotations

import warnings

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.dynamics.kinematics import joint_rotations
from kanedyn.dynamics.loads import LoadsLike, applied_loads, joint_spring_forces
from kanedyn.dynamics.rotors import refuse_rotors
from kanedyn.dynamics.subtree import subtree_wrench
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.spatial.algebra import cross, mv

__all__ = ["NewtonEuler", "newton_euler"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class NewtonEuler:
    """Result of :func:`newton_euler` (all vectors in N components).

    Attributes
    ----------
    tau : (n,)
        Joint efforts ``[u | s]`` order: ``τ = M ν̇ - f`` (Kane's M and f).
    f_joint : (nj, 3)
        Force transmitted by joint k from its inner body (or N) to its outer body.
    N_joint : (nj, 3)
        Moment transmitted by joint k, about the joint point ``o[k]``.
    o : (nj, 3)
        Joint points (Go origins).
    omega, alpha : (nb, 3)
        Angular velocities and accelerations of the bodies.
    r, a : (nb, 3)
        Mass-centre positions and accelerations.
    """

    tau: Array
    f_joint: Array
    N_joint: Array
    o: Array
    omega: Array
    alpha: Array
    r: Array
    a: Array


def _transport(a: Array, alpha: Array, omega: Array, d: Array) -> Array:
    """Acceleration of a point at offset ``d`` in a body: a + α × d + ω × (ω × d)."""
    return a + np.cross(alpha, d) + np.cross(omega, np.cross(omega, d))


def newton_euler(
    model: Model, state: State, acc: ArrayLike, loads: LoadsLike = None, t: float = 0.0
) -> NewtonEuler:
    """Recursive Newton–Euler: joint efforts and reactions for the accelerations ``acc``.

    Forward pass, for joint k from inner body p (N for a root) to body i
    (``ρ`` offsets, ``w`` the slide velocity, ``ω^rel`` the joint's relative rate)::

        o_k   = g_k + R_N_Gi Δ d                      (g_k = Gi origin, fixed in p)
        v̇_o  = a_g + α_p × δ + ω_p × (ω_p × δ) + 2 ω_p × w + R_N_Gi Δ ṡ
        ω_i   = ω_p + ω^rel,    α_i = α_p + ω_p × ω^rel + R_N_Gi d/dt|_Gi(Γσ)
        a_ci  = v̇_o + α_i × (r_ci - o_k) + ω_i × (ω_i × (r_ci - o_k))

    Backward pass: the free-body balance in the module docstring.

    Parameters
    ----------
    model : Model
        Numeric; every joint type (gimbal, spherical, slides, free, weld).
    state : State
    acc : (n,)
        ``d/dt [u | s]``.
    loads : optional
        Applied loads as for :func:`kanedyn.forward_dynamics`.
    t : float
        Time passed to callable loads.

    Returns
    -------
    NewtonEuler
    """
    model.check_state(state)
    refuse_rotors(model, "newton_euler (RNEA)")
    acc = np.asarray(acc, dtype=float)
    if acc.shape != (model.n,):
        raise ModelError(f"acc has shape {acc.shape}; this model has n = {model.n} speeds")
    lay = model.layout
    nb = model.nb
    q, u = state.q, state.u

    R_N_B = np.zeros((nb, 3, 3))
    p = np.zeros((nb, 3))  # body-frame origins
    v_p = np.zeros((nb, 3))
    a_p = np.zeros((nb, 3))
    omega = np.zeros((nb, 3))
    alpha = np.zeros((nb, 3))
    o = np.zeros((nb, 3))
    axes_u = np.zeros((model.n, 3))  # axis in N of each speed (rotational: b_r, slide: δ_c)
    R_joint, GammaT, _, Gds = joint_rotations(model, np.append(q, 0.0), np.append(u, 0.0))
    for k, j in enumerate(model.joints):
        par = lay.parent[k]
        if par < 0:
            R_p, p_p, vp, ap = np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3)
            w_p, al_p = np.zeros(3), np.zeros(3)
        else:
            R_p, p_p, vp, ap = R_N_B[par], p[par], v_p[par], a_p[par]
            w_p, al_p = omega[par], alpha[par]
        R_N_Gi = R_p @ lay.R_Bi_Gi[k]
        # Gi origin, fixed in the inner body
        rho = R_p @ lay.inner_point[k]
        v_g = vp + np.cross(w_p, rho)
        a_g = _transport(ap, al_p, w_p, rho)
        # slides along the Gi axes
        qk, uk = lay.q_index[k], lay.u_index[k]
        nr = j.n_rot_coordinates
        d, s_dot = q[qk[nr:]], u[uk[j.rot_dof :]]
        s_ddot = acc[uk[j.rot_dof :]]
        Delta = lay.Delta[k][:, : j.trn_dof]
        delta = R_N_Gi @ (Delta @ d)
        w = R_N_Gi @ (Delta @ s_dot)
        o[k] = p_p + rho + delta
        v_o = v_g + np.cross(w_p, delta) + w
        a_o = (
            a_g
            + np.cross(al_p, delta)
            + np.cross(w_p, np.cross(w_p, delta))
            + 2.0 * np.cross(w_p, w)
            + R_N_Gi @ (Delta @ s_ddot)
        )
        axes_u[uk[j.rot_dof :]] = (R_N_Gi @ Delta).T
        # rotation of Go relative to Gi (the joint model): relative rate x = R_Gi_Go Γ σ
        # in Gi, and its Gi-frame derivative R_Gi_Go (Γ̇σ + Γ σ̇) (ω_rel × ω_rel = 0)
        sigma, sigma_dot = u[uk[: j.rot_dof]], acc[uk[: j.rot_dof]]
        R_Gi_Go = R_joint[k]
        b = GammaT[k, : j.rot_dof] @ R_Gi_Go.T  # rows: the rotational axes in Gi
        x = sigma @ b
        x_dot = R_Gi_Go @ Gds[k] + sigma_dot @ b
        w_rel = R_N_Gi @ x
        axes_u[uk[: j.rot_dof]] = b[: j.rot_dof] @ R_N_Gi.T
        omega[k] = w_p + w_rel
        alpha[k] = al_p + np.cross(w_p, w_rel) + R_N_Gi @ x_dot
        R_N_B[k] = R_N_Gi @ R_Gi_Go @ lay.R_Go_Bo[k]
        dp = -R_N_B[k] @ lay.outer_point[k]
        p[k] = o[k] + dp
        v_p[k] = v_o + np.cross(omega[k], dp)
        a_p[k] = _transport(a_o, alpha[k], omega[k], dp)

    rc = R_N_B @ lay.com[..., None]
    r = p + rc[..., 0]
    a = np.array([_transport(a_p[i], alpha[i], omega[i], rc[i, :, 0]) for i in range(nb)])

    # applied loads: gravity and springs from the model, the user's records resolved
    if loads is None:
        F = lay.mass[:, None] * model.gravity[None, :]
        T = np.zeros((nb, 3))
        Q = joint_spring_forces(model, q, u)
    else:
        from kanedyn.dynamics.kinematics import kinematics

        L = applied_loads(model, state, kinematics(model, state), loads, t)
        F, T, Q = L.F, L.T, L.Q

    # backward pass: the free-body balance of each body, summed over each joint's subtree
    I_N = R_N_B @ lay.inertia @ np.swapaxes(R_N_B, -1, -2)
    h_N = mv(I_N, omega) + mv(R_N_B, lay.h_embedded)
    F_net = lay.mass[:, None] * a - F  # what the joints must supply, per body
    T_net = mv(I_N, alpha) + cross(omega, h_N) - T
    f_joint, N_joint = subtree_wrench(model, F_net, T_net, r, o)

    tau = np.empty(model.n)
    for k, j in enumerate(model.joints):
        uk = lay.u_index[k]
        tau[uk[: j.rot_dof]] = axes_u[uk[: j.rot_dof]] @ N_joint[k]
        tau[uk[j.rot_dof :]] = axes_u[uk[j.rot_dof :]] @ f_joint[k]
    return NewtonEuler(
        tau=tau - Q,
        f_joint=f_joint,
        N_joint=N_joint,
        o=o,
        omega=omega,
        alpha=alpha,
        r=r,
        a=a,
    )


def inverse_dynamics_rnea(
    model: Model, state: State, acc: ArrayLike, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """Deprecated: ``newton_euler(model, state, acc, loads, t).tau``
    (:attr:`NewtonEuler.tau`), which this returns with a DeprecationWarning."""
    warnings.warn(
        "kanedyn.inverse_dynamics_rnea is deprecated; use "
        "kanedyn.newton_euler(model, state, acc, loads, t).tau",
        DeprecationWarning,
        stacklevel=2,
    )
    return newton_euler(model, state, acc, loads, t).tau
