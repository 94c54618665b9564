"""Momentum-state dynamics (MSD): joint momenta ``h_k``, ``p_k`` as states.

Stoneking, *Momentum State Dynamics* and *Linear Momentum States for Translational
Joints* (refs/42-docs/MSD_NBody, Translational MSD States), with the corrections of
refs/notes/42-kane-msd.md §15.7, derived in docs/theory/msd.md.

**States.** For every joint k, with ``P_k`` and ``H_k`` the linear momentum of everything
outboard of k and its angular momentum about the joint point ``o_k`` (N components):

.. math::

    h_k = (R_{N G_o} \\Gamma_k)^T H_k, \\qquad p_k = (R_{N G_i} \\Delta_k)^T P_k

These are exactly Kane's generalized momenta ``∂K/∂ν = M ν + Ωᵀ h_emb`` (the note's
"key structural fact"), so the speeds come back with the Kane mass matrix
(:func:`speeds`). A free root (spherical rotation with 0 or 3 slides, from N) instead
stores the **total** angular momentum about the mass centre ``c`` of its subtree (about
its fixed joint point when it has no slides) and the total linear momentum, both in N:
invariants that any Runge-Kutta method keeps to round-off when no external load acts
(``Ḣ_c = T_c``, Euler's law about the mass centre). About N's origin instead, the
orbit's ``c × P`` (2.6e13 N m s at 7e6 m) would bury the attitude's momentum in
round-off (docs/howto/central-gravity.md, round-off at orbital distances).

**Rates** (the corrected slide equations; ``T_k``, ``F_k`` are the resultant external
torque about ``o_k`` and force on the bodies outboard of k, ``Q_k`` the joint's own
springs, dampers and actuators, all other joint efforts cancel inside the subtree):

.. math::

    \\dot h_k &= Q_k + \\Gamma_k^T [T_k - v_{o_k} \\times P_k - \\omega_{o(k)} \\times H_k]
        + \\dot\\Gamma_k^T H_k \\\\
    \\dot p_k &= Q_k + \\Delta_k^T F_k + (\\omega_{i(k)} \\times \\Delta_k)^T P_k \\\\
    \\dot H_c &= \\sum_i T_i + (r_i - c) \\times F_i, \\qquad \\dot P = \\sum_i F_i

(Γ and Δ columns taken in N: ``R_N_Go Γ`` and ``R_N_Gi Δ``.)

**Flexible bodies** (docs/theory/msd.md, flexible bodies): the modal momenta
``y_ξ = ∂T/∂ξ`` (MSD_NBody slide 29) follow the joints' states, with the rates
:func:`kanedyn.spatial.modal.modal_momentum_rate`; ``P_k``, ``H_k`` (and a free root's
totals) include the elastic motion (:func:`kanedyn.dynamics.flex.body_momenta`),
``T_k`` gravity's couple on the displaced mass, the mass centre the displaced mass.
With joints at nodes (``Joint.inner_node``, ``outer_node``) the subtree of such a joint
k moves with the node's motion ``S_ξ,k ξ`` too, so ``y_ξ`` holds ``S_ξ,kᵀ L_k`` (the
subtree's spatial momentum), and its rate ``S_ξ,kᵀ W_k + Ṡ_ξ,kᵀ L_k`` (external wrench
``W_k``; the reaction at the node cancels against the one on the node's body:
:func:`node_momentum_rates`); the joints' rates take their frames' velocities
(:func:`joint_frame_velocities`).

**Geared rotors** (:mod:`kanedyn.dynamics.rotors`): the states stay ``y = ∂T/∂ν =
M ν + Ωᵀh`` with the rotors' ``M_R`` in ``M``, so joint k's state holds its rotor's spin
momentum ``n J a·ω_R`` besides the subtree's projection. In the rates the rotor's
momentum ``J_R ω_R`` is its carrier's (as an embedded momentum): Kane's
``ẏ_r = F_r + Σ_i Ω̇_{i,r}·H_i + V̇_{i,r}·P_i`` gains only ``n (ω_C × a)·J_R ω_R = 0``
from the gear's partial ``n a``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.dynamics import flex
from kanedyn.dynamics.kane import (
    KaneTerms,
    flexible_mass_matrix_at,
    kane_terms,
    solve_mass_matrix,
)
from kanedyn.dynamics.kinematics import Kinematics, cross, kinematics_at, mv, rest_kinematics
from kanedyn.dynamics.loads import AppliedLoads
from kanedyn.dynamics.partials import joint_axes, partials_at
from kanedyn.dynamics.rotors import carrier, rotor_momentum, rotor_specs
from kanedyn.dynamics.subtree import subtree_sum, subtree_wrench
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import modal_data
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.modal import first_moment

__all__ = [
    "generalized_momenta",
    "joint_frame_velocities",
    "momenta",
    "momentum_roots",
    "node_momentum_rates",
    "rates",
    "root_to_total",
    "speeds",
    "speeds_at",
]

Array = NDArray[np.float64]


def momentum_roots(model: Model) -> list[int]:
    """Joints whose MSD states are total momenta in N: roots with a spherical rotation
    and no slide (H about the fixed joint point) or three slides (H about the mass
    centre of the root's subtree, P).
    Found once per model (:func:`kanedyn.model.plan.derived`)."""
    from kanedyn.model.plan import derived

    roots = derived(model, "momentum_roots", lambda m: tuple(
        k for k, j in enumerate(m.joints)
        if j.inner is None and j.rot_type == "spherical" and j.trn_dof in (0, 3)
    ))  # fmt: skip
    return list(roots)


def generalized_momenta(model: Model, kin: Kinematics, u: Array, eta: Array | None = None) -> Array:
    """The generalized momenta ``∂T/∂ν = M ν + Ωᵀ R h`` (embedded momentum h) at the
    kinematics ``kin`` and speeds ``u`` (MSD slides: the momentum states of the joints
    before :func:`root_to_total`). With flexible bodies, ``u = [u | s | ξ]`` and ``M``
    is the flexible mass matrix at the modal coordinates ``eta``
    (:func:`kanedyn.dynamics.kane.flexible_mass_matrix_at`): the modal rows are
    ``y_ξ = ∂T/∂ξ``, with joints at nodes (``kin`` then has the modal state) the
    momenta of the bodies outboard of the nodes included (``Ω_ξᵀ R h`` too)."""
    tm = kane_terms(model, kin)
    h = mv(kin.R_N_B, kin.params.h_embedded).ravel()
    n, nb = model.n, model.nb
    y = flexible_mass_matrix_at(model, tm, eta) @ u
    y[:n] += tm.Omega.reshape(3 * nb, n).T @ h
    if tm.par.Omega_xi is not None:
        y[n:] += tm.par.Omega_xi.reshape(3 * nb, model.nf).T @ h
    return y


def displaced_first_moments(model: Model, kin: Kinematics, eta: Array | None) -> Array:
    """``R c_f`` (nb, 3), N: the first moment of each flexible body's displaced mass
    (:func:`kanedyn.spatial.modal.first_moment`; zero for rigid bodies)."""
    out = np.zeros((model.nb, 3))
    for i, sl in model.modal_slices():
        assert eta is not None
        out[i] = kin.R_N_B[i] @ first_moment(modal_data(kin.params, model, i), eta[sl])
    return out


def mass_centre_offsets(model: Model, kin: Kinematics, eta: Array | None = None) -> Array:
    """``o_k - c_k`` (nj, 3), N: from the mass centre ``c_k`` of each joint's subtree to
    its joint point, ``-Σ m_i (r_i - o_k) / Σ m_i`` over the subtree (zero for a
    massless one), from the positions relative to ``kin.origin`` (no round-off of
    ``|o|``); with flexible bodies, their displaced mass at ``eta`` included."""
    m = kin.params.mass
    M = subtree_sum(model, m)
    moments = m[:, None] * kin.r_rel
    if model.nf:
        moments = moments + displaced_first_moments(model, kin, eta)
    first = subtree_sum(model, moments) - M[:, None] * kin.o_rel
    return -first / np.where(M > 0.0, M, 1.0)[:, None]


def root_to_total(
    model: Model, kin: Kinematics, p: Array, inverse: bool = False, eta: Array | None = None
) -> Array:
    """Map the generalized momenta of momentum roots to total (H, P) in N, or back
    (``eta``: the modal coordinates, which move the mass centre).

    The generalized momenta of the root's rotation are ``H_o`` about its joint point
    (in Go); with slides the total is ``H_c = H_o + (o - c) × P`` about the subtree's
    mass centre (:func:`kanedyn.spatial.plucker.load_at`, the moment of ``P`` at
    ``o - c``), and back ``H_o = H_c + (c - o) × P``."""
    y = p.copy()
    lay = model.layout
    roots = momentum_roots(model)
    offset = mass_centre_offsets(model, kin, eta) if roots else None
    for k in roots:
        idx = lay.u_index[k]
        r_idx, t_idx = idx[:3], idx[3:]
        R_go = kin.R_N_Go[k]
        D = kin.R_N_Gi[k] @ lay.Delta[k]
        if not t_idx.size:  # H about the fixed joint point
            y[r_idx] = R_go.T @ p[r_idx] if inverse else R_go @ p[r_idx]
            continue
        assert offset is not None
        if not inverse:
            P = D @ p[t_idx]
            y[r_idx] = sp.load_at(list(R_go @ p[r_idx]), list(P), list(offset[k]))[:3]
            y[t_idx] = P
        else:
            P = p[t_idx]
            y[r_idx] = R_go.T @ sp.load_at(list(p[r_idx]), list(P), list(-offset[k]))[:3]
            y[t_idx] = D.T @ P
    return y


def momenta(model: Model, state: State) -> Array:
    """The MSD states at ``state``, shape (n,), laid out like the speeds ``[u | s]``.

    Entry r holds ``h_k`` (rotational speed r of joint k) or ``p_k`` (translational);
    for momentum roots (:func:`momentum_roots`) the six entries hold total ``H`` and
    ``P`` in N, the elastic motion of flexible bodies included. Embedded rotor momentum
    is included. With flexible bodies the modal momenta ``y_ξ = ∂T/∂ξ`` follow
    (``n_total``, laid out like ``[u | s | ξ]``).
    """
    if model.nf:
        q, u, eta, xi = flex.split(model, state)
        kin = kinematics_at(model, q, u, eta=eta, xi=xi)
        y = generalized_momenta(model, kin, state.u, eta)
        return root_to_total(model, kin, y, eta=eta)
    model.check_state(state)
    kin = kinematics_at(model, state.q, state.u)
    return root_to_total(model, kin, generalized_momenta(model, kin, state.u))


def speeds(model: Model, q: ArrayLike, momenta: ArrayLike, locked: ArrayLike = ()) -> Array:
    """Speeds ``[u | s]`` from the MSD states by one Cholesky solve of ``M ν = p - Ωᵀh``.

    ``locked`` lists speed indices held at zero (their momentum entries are ignored).
    With flexible bodies, ``q = [q_joints | η]``, the momenta and the speeds run over
    ``[u | s | ξ]`` (``nq_total``, ``n_total``).
    """
    q = np.asarray(q, dtype=float)
    y = np.asarray(momenta, dtype=float)
    if q.shape != (model.nq_total,):
        raise ModelError(f"q has length {q.size}; this model has nq = {model.nq_total}")
    if y.shape != (model.n_total,):
        raise ModelError(f"momentum vector has length {y.size}; this model has n = {model.n_total}")
    kin, eta = rest_kinematics(model, q)
    return speeds_at(model, kin, y, np.asarray(locked, dtype=np.intp), eta)


def speeds_at(
    model: Model,
    kin: Kinematics,
    y: Array,
    locked: NDArray[np.intp],
    eta: Array | None = None,
    *,
    tm: KaneTerms | None = None,
    M: Array | None = None,
) -> Array:
    """The speeds ``ν`` of the momentum states ``y`` at the configuration of ``kin``, with
    the speeds ``locked`` held at zero: ``M ν = p - Ωᵀ R h`` solved on the free speeds
    (:func:`speeds` for a state); with flexible bodies over ``[u | s | ξ]`` with the
    flexible mass matrix at the modal coordinates ``eta`` (with joints at nodes, ``kin``
    holds the node frames: :func:`~kanedyn.dynamics.kinematics.rest_kinematics`). ``tm`` (:func:`kane_terms` at
    ``kin``) and ``M`` (the mass matrix over all the speeds at ``kin``: the tree's
    :func:`mass_matrix_at`, or with flexible bodies
    :func:`~kanedyn.dynamics.kane.flexible_mass_matrix_at`) are reused when given."""
    tm = kane_terms(model, kin) if tm is None else tm
    n, N, nb = model.n, model.n_total, model.nb
    M = flexible_mass_matrix_at(model, tm, eta) if M is None else M
    h = mv(kin.R_N_B, kin.params.h_embedded).ravel()
    p = root_to_total(model, kin, y, inverse=True, eta=eta)
    p[:n] -= tm.Omega.reshape(3 * nb, n).T @ h
    if tm.par.Omega_xi is not None:
        p[n:] -= tm.par.Omega_xi.reshape(3 * nb, model.nf).T @ h
    if not locked.size:
        return solve_mass_matrix(M, p)
    free = np.setdiff1d(np.arange(N), locked)
    u = np.zeros(N)
    u[free] = solve_mass_matrix(M[np.ix_(free, free)], p[free])
    return u


def joint_frame_velocities(kin: Kinematics) -> tuple[Array, Array, Array]:
    """Per joint, the angular velocities of its frames Gi and Go and the velocity of Go's
    origin ``o`` (N), ``(ω_Gi, ω_Go, v_o)`` (nj, 3) each: the inner and outer bodies'
    (``kin.omega_in``, ``kin.omega``, ``kin.v_o``), and with joints at nodes
    (:class:`~kanedyn.dynamics.kinematics.NodeKinematics`) the nodes' motion in their
    bodies: Gi rides on an inner node (``V_Gi = V_i + S_in ξ``), Go on an outer one
    (``V_Go = V_o + V_on``)."""
    w_Gi, w_Go, v_o = kin.omega_in, kin.omega, kin.v_o
    nodes = kin.nodes
    if nodes is not None:
        V_on = nodes.V_on
        w_Gi = w_Gi + nodes.V_node[:, :3] + V_on[:, :3]  # S_in ξ = V_node + V_on
        w_Go = w_Go + V_on[:, :3]
        v_o = v_o + V_on[:, 3:] + cross(V_on[:, :3], kin.o_rel)
    return w_Gi, w_Go, v_o


def node_momentum_rates(kin: Kinematics, P_k: Array, H_k: Array, F_k: Array, T_k: Array) -> Array:
    """The modal momentum rates (nf,) from the subtrees that ride on nodes of flexible
    bodies, with the subtree momenta ``P_k``, ``H_k`` and external loads ``F_k``, ``T_k``
    (about the joint points ``o_k``, N; nj × 3 each).

    The subtree of joint k moves with ``S_ξ,k ξ`` besides its joints' speeds
    (:class:`~kanedyn.dynamics.kinematics.NodeKinematics`), so ``y_ξ = ∂T/∂ξ`` holds
    ``Σ_k S_ξ,kᵀ L_k`` (``L_k`` its spatial momentum about the origin), whose rate is
    ``Ṡ_ξ,kᵀ L_k + S_ξ,kᵀ (W_k + W_r,k)`` with ``W_k`` the external wrench and
    ``W_r,k`` the reaction at the node; the node's body's own modal rate
    (:func:`~kanedyn.spatial.modal.modal_momentum_rate`) lacks the reaction's
    ``-S_ξ,kᵀ W_r,k`` on its modes, and the two cancel (a joint's own effort too: it
    does no work along ``ξ``):

    .. math:: \\dot y_\\xi \\mathrel{+}= \\sum_k \\dot S_{\\xi,k}^T L_k + S_{\\xi,k}^T W_k
    """
    assert kin.nodes is not None
    o = kin.o_rel
    L_k = np.concatenate([H_k + cross(o, P_k), P_k], axis=-1)
    W_k = np.concatenate([T_k + cross(o, F_k), F_k], axis=-1)
    nodes = kin.nodes
    return np.einsum("kjf,kj->f", nodes.S_xi, W_k) + np.einsum("kjf,kj->f", nodes.S_xi_dot, L_k)


def rates(
    model: Model,
    kin: Kinematics,
    L: AppliedLoads,
    eta: Array | None = None,
    xi: Array | None = None,
) -> Array:
    """Time derivative of the MSD states (see the module docstring), shape (n,); with
    flexible bodies (modal coordinates and speeds ``eta``, ``xi``), (n_total,).

    ``kin`` must be evaluated at the speeds recovered from the states.
    """
    lay, pa = model.layout, kin.params
    m = pa.mass[:, None]
    I_N = kin.R_N_B @ pa.inertia @ np.swapaxes(kin.R_N_B, -1, -2)
    h_i = mv(I_N, kin.omega) + mv(kin.R_N_B, pa.h_embedded)  # about each mass centre
    mv_i, F_i, T_i = m * kin.v, L.F, L.T
    flexible = []
    if model.nf:  # the elastic motion's momenta (at the body origin), gravity's couple
        assert eta is not None and xi is not None
        flexible = flex.body_momenta(model, kin, partials_at(model, kin), eta, xi)
        mv_i, F_i, T_i = mv_i.copy(), F_i.copy(), T_i.copy()
        for b in flexible:
            rc = kin.R_N_B[b.i] @ pa.com[b.i]  # from the body origin to its mass centre
            mv_i[b.i] += b.P
            h_i[b.i] += b.H - np.cross(rc, b.P)
            F_i[b.i] += b.force  # a central field on the displaced mass (at the origin)
            T_i[b.i] += b.couple + b.torque - np.cross(rc, b.force)
    for spec in rotor_specs(model, pa):  # a geared rotor's momentum J_R ω_R is its carrier's
        if spec.c >= 0:
            R, w, _, _, sigma = carrier(spec, kin)
            h_i[..., spec.c, :] += rotor_momentum(spec, sigma, R, w)[1]
    # subtree momenta P_k, H_k (about o_k) and external force and torque F_k, T_k
    P_k, H_k = subtree_wrench(model, mv_i, h_i, kin.r_rel, kin.o_rel)
    F_k, T_k = subtree_wrench(model, F_i, T_i, kin.r_rel, kin.o_rel)

    Hw, Hs = joint_axes(model, kin)
    w_Gi, w_Go, v_o = joint_frame_velocities(kin)
    # d/dt (R_N_Go Γ) = ω_Go × (R_N_Go Γ) + R_N_Go Γ̇, column by column
    RG = np.swapaxes(kin.R_N_Go @ kin.Gamma, -1, -2)  # (nj, col, 3)
    RGd = np.swapaxes(kin.R_N_Go @ kin.Gamma_dot, -1, -2)
    dHw = (cross(w_Go[:, None, :], RG) + RGd)[lay.u_joint, lay.u_col]
    ku, ks = lay.u_joint, lay.s_joint
    ydot = np.zeros(model.n_total)
    ydot[: model.n] = L.Q
    for b in flexible:
        ydot[model.n + b.sl.start : model.n + b.sl.stop] = b.rate
    ydot[: model.nu] += np.einsum("ri,ri->r", Hw, T_k[ku] - cross(v_o[ku], P_k[ku]))
    ydot[: model.nu] += np.einsum("ri,ri->r", dHw, H_k[ku])
    ydot[model.nu : model.n] += np.einsum("ci,ci->c", Hs, F_k[ks])
    ydot[model.nu : model.n] += np.einsum("ci,ci->c", cross(w_Gi[ks], Hs), P_k[ks])
    if kin.nodes is not None:  # the subtrees riding on nodes
        ydot[model.n :] += node_momentum_rates(kin, P_k, H_k, F_k, T_k)
    roots = momentum_roots(model)
    offset = mass_centre_offsets(model, kin, eta) if roots else None
    for k in roots:
        idx = lay.u_index[k]
        torque = kin.R_N_Go[k] @ L.Q[idx[:3]]  # the root joint's own effort, from N
        if idx.size == 6:  # H about the subtree's mass centre, P
            assert offset is not None
            force = F_k[k] + kin.R_N_Gi[k] @ lay.Delta[k] @ L.Q[idx[3:]]
            T_c = sp.load_at(list(T_k[k] + torque), list(force), list(offset[k]))[:3]
            ydot[idx[:3]] = T_c
            ydot[idx[3:]] = force
        else:  # H about the fixed joint point
            ydot[idx[:3]] = T_k[k] + torque
    return ydot
