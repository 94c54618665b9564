"""Kane's equations of a tree with flexible bodies (Kane_NBody_Flex slides 31-37).

The state of a model with flexible bodies is ``q = [q_joints | η]`` and
``u = [u | s | ξ]``: the modal coordinates and speeds of the flexible bodies, in body
order, follow the joints' (``Model.nf`` of them; ``Model.modal(body)`` gives a body's
indices into ``η``). The body frames' kinematics are the tree's
(:mod:`kanedyn.dynamics.kinematics`): a joint attaches at a body-frame origin, or at a
node of a flexible inner body (``Joint.inner_node``), whose elastic displacement and
rotation the outer bodies then ride on (:class:`~kanedyn.dynamics.kinematics.NodeKinematics`;
their partials gain the node's modal columns ``Ω_ξ``, ``V_ξ``). The generalized speeds
of flexible body i are ``w_i = (ω, v₀, ξ_i) = T_i y`` (body axes),
``T_i = [R_N_Bᵀ Ω_i ; R_N_Bᵀ V₀,i ; E_i]`` over all speeds ``y = [u | s | ξ]`` with
``V₀ = V + [R c]_× Ω`` the partials of the body-frame origin. Kane's equations gain, per flexible body (slides 32-33's
``Z₁..Z₆`` in body axes, :mod:`kanedyn.spatial.modal`):

.. math::

    M \\mathrel{+}= T_i^T \\Delta\\mathcal M_i T_i, \\qquad
    f \\mathrel{-}= T_i^T\\left(\\Delta\\mathcal M_i \\begin{bmatrix}\\alpha_r\\\\a_{0,r}\\\\0\\end{bmatrix}
        + b_i + \\begin{bmatrix}-c_f\\times g\\\\0\\\\ K_\\Psi\\eta + C_\\Psi\\xi - P_\\Psi^T g\\end{bmatrix}\\right)

with ``α_r``, ``a₀,r`` the remainder accelerations of the body frame. In a central
field ``f += T_iᵀ Q_c`` (:func:`kanedyn.spatial.modal.modal_central_forces`, the field
on the elastic motion) and the potential gains
:func:`~kanedyn.spatial.modal.modal_central_potential`. The dense Kane
functions (:mod:`kanedyn.dynamics.kane`: ``kd.mass_matrix``, ``kd.forcing``,
``kd.forward_dynamics``, the energies and momenta) add these terms to the rigid tree's;
the compiled engine runs the same terms in the tree recursion
(:mod:`kanedyn.dynamics.flex_recursion`), and ``kd.simulate`` integrates them.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kinematics import Kinematics, cross, kinematics_at
from kanedyn.dynamics.partials import Partials, partials_at
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import modal_data
from kanedyn.spatial.arithmetic import NUMPY
from kanedyn.spatial.modal import (
    first_moment,
    modal_central_forces,
    modal_central_potential,
    modal_forces,
    modal_inertia,
    modal_momentum,
    modal_momentum_rate,
    node_frame,
)

__all__ = [
    "BodyMomenta",
    "NodeMotion",
    "body_momenta",
    "flex_energy",
    "flex_momentum",
    "flex_terms",
    "node_motion",
    "split",
]

Array = NDArray[np.float64]


def split(model: Model, state: Any) -> tuple[Array, Array, Array, Array]:
    """``(q_joints, u_joints, η, ξ)`` of a state of a model with flexible bodies (one
    :class:`~kanedyn.State`; batches of states are not taken yet)."""
    if not isinstance(state, State):
        raise ModelError(
            f"a model with flexible bodies takes one kanedyn State, got {type(state).__name__}"
        )
    model.check_state(state, flexible=True)
    nq, n = model.nq, model.n
    return state.q[:nq], state.u[:n], state.q[nq:], state.u[n:]


@attrs.frozen
class _BodyFlex:
    i: int  # body index
    sl: slice  # its modal indices into η
    T: Array  # (6 + nm, n + nf) body speeds (ω, v₀, ξ_i) from all speeds, body axes
    r: Array  # (6 + nm,) remainder accelerations (α_r, a₀,r, 0), body axes
    w: Array  # (3,) ω, body axes
    v0: Array  # (3,) v₀, body axes
    g: Array  # (3,) gravity, body axes
    R: Array  # R_N_B
    p: Array  # body-frame origin, N
    com: Array  # the undeformed mass centre from the body-frame origin, body axes
    r_field: Array | None  # that mass centre from a central field's centre, body axes (or None)


def _bodies(model: Model, kin: Kinematics, par: Partials) -> list[_BodyFlex]:
    n, nf = model.n, model.nf
    g_N = kin.params.gravity
    central = model.central_gravity is not None
    out = []
    for i, sl in model.modal_slices():
        R = kin.R_N_B[i]
        rc = R @ kin.params.com[i]
        Om = par.Omega[i]  # (3, n)
        V0 = par.V[i] - cross(Om.T, rc).T  # v₀ = v_c - ω × r_c
        nm = sl.stop - sl.start
        T = np.zeros((6 + nm, n + nf))
        T[:3, :n] = R.T @ Om
        T[3:6, :n] = R.T @ V0
        T[6:, n + sl.start : n + sl.stop] = np.eye(nm)
        if par.Omega_xi is not None and par.V_xi is not None:  # riding on a node
            Ox = par.Omega_xi[i]
            T[:3, n:] += R.T @ Ox
            T[3:6, n:] += R.T @ (par.V_xi[i] - cross(Ox.T, rc).T)
        w = kin.omega[i]
        a0 = par.a_r[i] - np.cross(par.alpha_r[i], rc) - np.cross(w, np.cross(w, rc))
        r = np.concatenate([R.T @ par.alpha_r[i], R.T @ a0, np.zeros(nm)])
        v0 = kin.v[i] - np.cross(w, rc)
        rf = R.T @ (kin.r[i] - kin.params.center) if central else None
        out.append(_BodyFlex(i, sl, T, r, R.T @ w, R.T @ v0, R.T @ g_N, R, kin.p[i],
                             kin.params.com[i], rf))  # fmt: skip
    return out


def flex_terms(
    model: Model, kin: Kinematics, par: Partials, eta: Array, xi: Array
) -> tuple[Array, Array]:
    """The flexible bodies' additions ``(ΔM, Δf)`` to Kane's mass matrix and forcing over
    ``[u | s | ξ]``, (n + nf, n + nf) and (n + nf,): the module docstring's sums, with
    gravity on the displaced mass and the elastic and damping forces; in a central field
    ``f += T_iᵀ Q_c`` with ``Q_c`` of :func:`~kanedyn.spatial.modal.modal_central_forces`
    (the displaced mass and its gravity gradient, beyond the rigid body's terms)."""
    n, nf = model.n, model.nf
    M = np.zeros((n + nf, n + nf))
    f = np.zeros(n + nf)
    for bf in _bodies(model, kin, par):
        md = modal_data(kin.params, model, bf.i)
        e, x = eta[bf.sl], xi[bf.sl]
        dM = modal_inertia(md, e)
        b = modal_forces(md, e, x, bf.w, bf.g)
        M += bf.T.T @ dM @ bf.T
        f -= bf.T.T @ (dM @ bf.r + b)
        if bf.r_field is not None:
            mu = float(kin.params.mu)
            f += bf.T.T @ modal_central_forces(NUMPY, md, e, mu, bf.com, bf.r_field)
    return M, f


def flex_energy(
    model: Model, kin: Kinematics, par: Partials, eta: Array, xi: Array
) -> tuple[float, float]:
    """The flexible bodies' additions to the kinetic and potential energy: per body
    ``½ wᵀΔM w`` (exact for the field ``r + Ψη``; the foreshortening to first order when
    stiffened) and ``½ηᵀK_Ψη - g·c_f`` (uniform gravity on the displaced mass), or in a
    central field :func:`~kanedyn.spatial.modal.modal_central_potential`."""
    T = V = 0.0
    for bf in _bodies(model, kin, par):
        md = modal_data(kin.params, model, bf.i)
        e, x = eta[bf.sl], xi[bf.sl]
        w = np.concatenate([bf.w, bf.v0, x])
        T += 0.5 * float(w @ modal_inertia(md, e) @ w)
        V += 0.5 * float(e @ md.stiffness @ e) - float(bf.g @ first_moment(md, e))
        if bf.r_field is not None:
            mu = float(kin.params.mu)
            V += float(modal_central_potential(NUMPY, md, e, mu, bf.com, bf.r_field))
    return T, V


def flex_momentum(
    model: Model, kin: Kinematics, par: Partials, eta: Array, xi: Array
) -> tuple[Array, Array, Array]:
    """The flexible bodies' additions to the linear momentum (N), the angular momentum
    about N's origin (N) and the first moment of mass (N): per body ``ΔP = R(ω × c_f +
    P̄ξ)``, ``ΔH₀ = R(ΔJω + c_f × v₀ + H̄ξ) + p × ΔP`` (the rows of ``ΔM w``) and
    ``R c_f``."""
    P, H, mc = np.zeros(3), np.zeros(3), np.zeros(3)
    for bf in _bodies(model, kin, par):
        md = modal_data(kin.params, model, bf.i)
        e, x = eta[bf.sl], xi[bf.sl]
        h = modal_inertia(md, e) @ np.concatenate([bf.w, bf.v0, x])
        dP = bf.R @ h[3:6]
        P += dP
        H += bf.R @ h[:3] + np.cross(bf.p, dP)
        mc += bf.R @ first_moment(md, e)
    return P, H, mc


@attrs.frozen(eq=False)
class BodyMomenta:
    """A flexible body's terms in the momentum states (:mod:`kanedyn.dynamics.msd`), N
    components: ``P`` and ``H`` (about the body-frame origin ``p``) the momenta of its
    elastic motion beyond the rigid body's, ``first`` its displaced mass's first moment
    ``R c_f``, ``couple`` gravity's couple ``R(c_f × g)`` on it, ``y_xi`` the modal
    momenta ``∂T/∂ξ`` and ``rate`` their rates (:func:`kanedyn.spatial.modal.
    modal_momentum_rate`, with a central field's modal forces); ``force`` and
    ``torque`` (about ``p``) a central field's force and moment on the displaced mass
    beyond the rigid body's (:func:`kanedyn.spatial.modal.modal_central_forces`; zero
    otherwise)."""

    i: int
    sl: slice
    p: Array
    P: Array
    H: Array
    first: Array
    couple: Array
    y_xi: Array
    rate: Array
    force: Array
    torque: Array


def body_momenta(
    model: Model, kin: Kinematics, par: Partials, eta: Array, xi: Array
) -> list[BodyMomenta]:
    """:class:`BodyMomenta` of each flexible body at the joints' kinematics ``kin``
    (and partials ``par``) and the modal coordinates and speeds ``eta``, ``xi``."""
    out = []
    for bf in _bodies(model, kin, par):
        md = modal_data(kin.params, model, bf.i)
        e, x = eta[bf.sl], xi[bf.sl]
        h = modal_momentum(md, e, x, bf.w, bf.v0)
        cf = first_moment(md, e)
        rate = modal_momentum_rate(md, e, x, bf.w, bf.v0, bf.g)
        field = np.zeros(6 + e.size)
        if bf.r_field is not None:  # the field on the displaced mass, beyond the rigid body's
            mu = float(kin.params.mu)
            field = modal_central_forces(NUMPY, md, e, mu, bf.com, bf.r_field)
            rate = rate + field[6:]
        out.append(BodyMomenta(
            bf.i, bf.sl, bf.p, bf.R @ h[3:6], bf.R @ h[:3], bf.R @ cf,
            bf.R @ np.cross(cf, bf.g), h[6:], rate, bf.R @ field[3:6], bf.R @ field[:3],
        ))  # fmt: skip
    return out


@attrs.frozen(eq=False)
class NodeMotion:
    """A node of a flexible body at a state (N components): its deflected position
    ``p + R(r_n + Ψ_nη)``, velocity ``v₀ + ω × R(r_n + Ψ_nη) + RΨ_nξ``, attitude
    ``R_N_node = R C(Θ_nη)`` and angular velocity ``ω + RWξ`` (the Cayley rotation of
    :func:`~kanedyn.spatial.modal.node_frame`, first-order equal to 42's ``U + [Θ_nη]×``,
    and the frame a joint at the node rides on: ``Joint.inner_node``); ``displacement``
    ``RΨ_nη`` and ``rotation`` ``RΘ_nη`` are the elastic parts (42's
    ``BodyStatesToNodeStates``)."""

    position: Array
    velocity: Array
    R_N_node: Array
    omega: Array
    displacement: Array
    rotation: Array


def node_motion(model: Model, state: State, body: str, node: str) -> NodeMotion:
    """The motion of ``node`` of the flexible ``body`` at ``state`` (:class:`NodeMotion`)."""
    q, u, eta, xi = split(model, state)
    i = model.body_index(body)
    modes: Any = model.bodies[i].modes
    if modes is None:
        raise ModelError(f"body {body!r} is not flexible (it has no modes)")
    k = modes.node(node)
    sl = model.modal_slices()[[j for j, _ in model.modal_slices()].index(i)][1]
    e, x = eta[sl], xi[sl]
    kin = kinematics_at(model, q, u, eta=eta, xi=xi)
    md = modal_data(kin.params, model, i)
    par = partials_at(model, kin)
    bf = next(b for b in _bodies(model, kin, par) if b.i == i)
    R = bf.R
    C, dn, W, _ = node_frame(md, k, e, x)
    d, th = md.Psi[k] @ e, md.Theta[k] @ e
    rho = R @ dn
    w = R @ bf.w
    return NodeMotion(
        position=bf.p + rho,
        velocity=R @ bf.v0 + np.cross(w, rho) + R @ (md.Psi[k] @ x),
        R_N_node=R @ C,
        omega=w + R @ (W @ x),
        displacement=R @ d,
        rotation=R @ th,
    )
