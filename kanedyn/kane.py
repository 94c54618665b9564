"""Stage 3: Kane's equations for the tree, ``Fr + Fr* = 0``.

Kane_NBody slide 23 (42 ``KaneNBodyEOM``), with ``ν = [u | s]``, ``Ω = [Ω_u | 0]``,
``V = [V_u | V_s]`` and per-body inertia ``I_i`` expressed in N:

.. math::

    F_r &= \\sum_i \\Omega_i^T T_i + V_i^T F_i + Q  \\\\
    F_r^* &= -\\sum_i \\Omega_i^T \\left[ I_i \\dot\\omega_i + \\omega_i \\times
        (I_i \\omega_i + h_i) \\right] + V_i^T m_i a_i \\\\
    M &= \\sum_i \\Omega_i^T I_i \\Omega_i + m_i V_i^T V_i \\\\
    M \\dot\\nu &= F_r + F_r^*\\big|_{\\dot\\nu = 0}
        = \\Omega^T (T - I\\alpha_r - \\omega\\times H) + V^T (F - m a_r) + Q

``T_i``, ``F_i`` are the applied torque and force at the mass centre of body i (N),
``h_i`` the embedded rotor momentum (in N), ``Q`` the joint springs, dampers and
actuators. Every sum is one ``matmul`` over the stacked (nb, 3, n) partials.
"""

from __future__ import annotations

import attrs
import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError
from kanedyn.kinematics import Kinematics, _kinematics, cross, mv
from kanedyn.loads import AppliedLoads, LoadsLike, applied_loads, spring_potential
from kanedyn.model import Model, State
from kanedyn.partials import Partials, _partials

__all__ = [
    "generalized_active_forces",
    "generalized_inertia_forces",
    "forward_dynamics",
    "inverse_dynamics",
    "kinetic_energy",
    "mass_matrix",
    "momentum",
    "potential_energy",
]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class _Terms:
    """Everything one evaluation of Kane's equations needs (one per right-hand side)."""

    par: Partials
    Omega: Array  # (nb, 3, n)
    V: Array  # (nb, 3, n)
    I_N: Array  # (nb, 3, 3) inertia about each mass centre, N axes
    H: Array  # (nb, 3) I_N ω + h, N


def _terms(model: Model, kin: Kinematics) -> _Terms:
    lay = model.layout
    par = _partials(model, kin)
    R = kin.R_N_B
    I_N = R @ lay.inertia @ np.swapaxes(R, -1, -2)
    H = mv(I_N, kin.omega) + mv(R, lay.h_embedded)
    return _Terms(par=par, Omega=par.Omega, V=par.V, I_N=I_N, H=H)


def _mass_matrix(model: Model, tm: _Terms) -> Array:
    n = model.n
    Om = tm.Omega.reshape(-1, n)
    V = tm.V.reshape(-1, n)
    IOm = (tm.I_N @ tm.Omega).reshape(-1, n)
    mV = (model.layout.mass[:, None, None] * tm.V).reshape(-1, n)
    M = Om.T @ IOm + V.T @ mV
    return 0.5 * (M + M.T)


def _bias(model: Model, tm: _Terms, L: AppliedLoads) -> Array:
    """``Fr + Fr*`` at zero acceleration: the right-hand side of ``M ν̇ = f``."""
    lay = model.layout
    kin = tm.par.kin
    T = L.T - mv(tm.I_N, tm.par.alpha_r) - cross(kin.omega, tm.H)
    F = L.F - lay.mass[:, None] * tm.par.a_r
    n = model.n
    return tm.Omega.reshape(-1, n).T @ T.ravel() + tm.V.reshape(-1, n).T @ F.ravel() + L.Q


def _check(model: Model, state: State) -> State:
    return model.check_state(state)


def mass_matrix(model: Model, state: State) -> Array:
    """Kane's mass matrix ``M = Σ Ωᵀ I Ω + m VᵀV``, (n, n), symmetric positive definite.

    Kane_NBody slide 23 (42's ``COEF``).
    """
    _check(model, state)
    return _mass_matrix(model, _terms(model, _kinematics(model, state.q, state.u)))


def generalized_active_forces(
    model: Model, state: State, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """``Fr = Σ_i Ω_iᵀ T_i + V_iᵀ F_i + Q``, shape (n,): gravity, springs, dampers, loads."""
    _check(model, state)
    kin = _kinematics(model, state.q, state.u)
    par = _partials(model, kin)
    L = applied_loads(model, state, kin, loads, t)
    n = model.n
    return par.Omega.reshape(-1, n).T @ L.T.ravel() + par.V.reshape(-1, n).T @ L.F.ravel() + L.Q


def generalized_inertia_forces(model: Model, state: State, acc: ArrayLike) -> Array:
    """``Fr* = -Σ_i Ω_iᵀ [I_i α_i + ω_i × (I_i ω_i + h_i)] + V_iᵀ m_i a_i``, shape (n,).

    ``acc`` is ``d/dt [u | s]``; ``α_i = Ω_i ν̇ + α_r``, ``a_i = V_i ν̇ + a_r``.
    """
    _check(model, state)
    acc = np.asarray(acc, dtype=float)
    if acc.shape != (model.n,):
        raise ModelError(f"acc has shape {acc.shape}; this model has n = {model.n} speeds")
    tm = _terms(model, _kinematics(model, state.q, state.u))
    kin = tm.par.kin
    alpha = tm.Omega @ acc + tm.par.alpha_r
    a = tm.V @ acc + tm.par.a_r
    T_star = -mv(tm.I_N, alpha) - cross(kin.omega, tm.H)
    F_star = -model.layout.mass[:, None] * a
    n = model.n
    return tm.Omega.reshape(-1, n).T @ T_star.ravel() + tm.V.reshape(-1, n).T @ F_star.ravel()


def _solve(M: Array, f: Array) -> Array:
    """Solve ``M x = f`` by Cholesky (M symmetric positive definite)."""
    try:
        factor = scipy.linalg.cho_factor(M, check_finite=False)
        return scipy.linalg.cho_solve(factor, f, check_finite=False)
    except np.linalg.LinAlgError:
        raise ModelError(
            "mass matrix is not positive definite (a 3-DOF gimbal at its singular angle?)"
        ) from None


def forward_dynamics(model: Model, state: State, loads: LoadsLike = None, t: float = 0.0) -> Array:
    """``d/dt [u | s]`` from ``M ν̇ = Fr + Fr*|_{ν̇=0}``, solved by Cholesky.

    Kane_NBody slide 23.
    """
    _check(model, state)
    kin = _kinematics(model, state.q, state.u)
    tm = _terms(model, kin)
    L = applied_loads(model, state, kin, loads, t)
    return _solve(_mass_matrix(model, tm), _bias(model, tm, L))


def inverse_dynamics(
    model: Model, state: State, acc: ArrayLike, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """Generalized forces ``τ`` that must be added to ``Fr`` for the accelerations ``acc``.

    ``τ = -(Fr + Fr*(acc))``: Kane's equations with ``τ`` as extra joint efforts.
    """
    return -(
        generalized_active_forces(model, state, loads, t)
        + generalized_inertia_forces(model, state, acc)
    )


def kinetic_energy(model: Model, state: State) -> float:
    """``T = ½ Σ ω_iᵀ I_i ω_i + m_i v_i·v_i`` (embedded rotor energy is constant, excluded)."""
    _check(model, state)
    kin = _kinematics(model, state.q, state.u)
    lay = model.layout
    w_B = np.einsum("bji,bj->bi", kin.R_N_B, kin.omega)
    rot_ke = np.einsum("bi,bij,bj->", w_B, lay.inertia, w_B)
    return 0.5 * float(rot_ke + np.sum(lay.mass * np.sum(kin.v**2, axis=1)))


def potential_energy(model: Model, state: State) -> float:
    """Gravity ``-Σ m_i g·r_i`` plus joint springs (see :mod:`kanedyn.loads`)."""
    _check(model, state)
    kin = _kinematics(model, state.q, state.u)
    gravity = -float(np.sum(model.layout.mass * (kin.r @ model.gravity)))
    return gravity + spring_potential(model, state.q)


def system_mass_properties(model: Model, state: State) -> tuple[float, Array, Array]:
    """Total mass, mass centre (N) and inertia about it (N axes) at ``state``."""
    _check(model, state)
    kin = _kinematics(model, state.q, state.u)
    lay = model.layout
    m = float(lay.mass.sum())
    c = lay.mass @ kin.r / m
    d = kin.r - c
    I_N = kin.R_N_B @ lay.inertia @ np.swapaxes(kin.R_N_B, -1, -2)
    shift = lay.mass[:, None, None] * (
        np.einsum("bi,bi->b", d, d)[:, None, None] * np.eye(3) - d[:, :, None] * d[:, None, :]
    )
    return m, c, (I_N + shift).sum(axis=0)


def momentum(model: Model, state: State) -> tuple[Array, Array]:
    """Linear momentum ``P`` (N) and angular momentum ``H`` about the system mass centre (N).

    ``H = Σ_i I_i ω_i + h_i + m_i (r_i - r_c) × v_i``, embedded momentum included.
    """
    _check(model, state)
    kin = _kinematics(model, state.q, state.u)
    lay = model.layout
    P = lay.mass @ kin.v
    c = lay.mass @ kin.r / lay.mass.sum()
    I_N = kin.R_N_B @ lay.inertia @ np.swapaxes(kin.R_N_B, -1, -2)
    H = mv(I_N, kin.omega) + mv(kin.R_N_B, lay.h_embedded)
    H = H.sum(axis=0) + np.sum(lay.mass[:, None] * cross(kin.r - c, kin.v), axis=0)
    return P, H
