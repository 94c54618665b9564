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

import functools
from functools import cached_property
from typing import Any

import attrs
import numpy as np
import scipy.linalg.lapack
from numpy.typing import ArrayLike, NDArray

from kanedyn.dynamics import flex
from kanedyn.dynamics.kinematics import Kinematics, cross, kinematics_at, mv
from kanedyn.dynamics.loads import (
    AppliedLoads,
    LoadsLike,
    applied_loads,
    central_gravity_potential,
    spring_potential,
)
from kanedyn.dynamics.partials import Partials, bias_accelerations, joint_subspace, partials_at
from kanedyn.dynamics.rotors import (
    carrier,
    has_rotors,
    rotor_momentum,
    rotor_specs,
    rotor_sums,
)
from kanedyn.dynamics.subtree import subtree_sum
from kanedyn.errors import SINGULAR_MASS_MATRIX, ModelError, deprecated_attribute
from kanedyn.model import Model, State
from kanedyn.model.batch import ModelBatch, States, resolve
from kanedyn.model.plan import Params, plan_of
from kanedyn.spatial import plucker as sp
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.algebra import Bilinear, Trilinear, bilinear, trilinear

__all__ = [
    "forcing",
    "generalized_active_forces",
    "generalized_inertia_forces",
    "inverse_dynamics",
    "kinetic_energy",
    "mass_matrix",
    "momentum",
    "potential_energy",
]

Array = NDArray[np.float64]

_EYE = np.eye(3)
_vecdot = getattr(np, "vecdot", None) or (lambda a, b: np.einsum("...i,...i->...", a, b))
_POTRF, _POTRS = scipy.linalg.lapack.get_lapack_funcs(("potrf", "potrs"), (np.zeros(1),))


_SKEW = rot.skew(np.eye(3)).reshape(3, 9)  # r @ _SKEW = [r]× flattened


@attrs.frozen(eq=False, slots=False)
class KaneTerms:
    """Everything one evaluation of Kane's equations needs (one per right-hand side).

    ``S`` (..., n, 6) the motion subspace per speed (:func:`kanedyn.dynamics.partials.joint_subspace`);
    ``I_N`` (..., nb, 3, 3) inertias about the mass centres, N axes; ``I_O`` (..., nb, 6, 6)
    spatial inertias about the origin of the spatial quantities (``kin.origin``: N's
    origin, or a free root's joint point). Built on first use (the momentum states'
    speeds need only ``M``): ``A_r`` (..., nb, 6) spatial bias accelerations, ``bias``
    (..., nb, 6) the free-body wrenches ``V ×f (I_O V) + (ω × h, 0)``
    (:func:`kanedyn.spatial.plucker.bias_force`, embedded rotor momentum h included),
    and ``par``, ``Omega``, ``V``, ``H``.
    """

    model: Model
    kin: Kinematics
    params: Params
    S: Array
    I_N: Array
    I_O: Array

    @cached_property
    def A_r(self) -> Array:
        return bias_accelerations(self.model, self.kin)

    @cached_property
    def bias(self) -> Array:
        """The free-body wrenches :func:`kanedyn.spatial.plucker.bias_force`, evaluated
        for all bodies (and states) at once. Up to :data:`BIAS_TABLE_BODIES` bodies (summed
        over the states) as its table of terms (:func:`bias_forms`: a few NumPy calls on
        78 products per body); above, the definition itself runs with one array per
        component as its scalars (about 100 NumPy calls, each over every body, and a
        fifth of the table's arithmetic per body)."""
        I_O, V, pa = self.I_O, self.kin.V, self.params
        h = mv(self.kin.R_N_B, pa.h_embedded) if pa.has_h else None
        if V[..., 0].size > BIAS_TABLE_BODIES and V.dtype != object:
            return bias_by_scalars(I_O, V, h)
        return bias_by_table(I_O, V, h)

    @cached_property
    def par(self) -> Partials:
        return partials_at(self.model, self.kin)

    @cached_property
    def Omega(self) -> Array:  # (nb, 3, n)
        return self.par.Omega

    @cached_property
    def V(self) -> Array:  # (nb, 3, n)
        return self.par.V

    @cached_property
    def H(self) -> Array:
        """(nb, 3) = I_N ω + h, N."""
        H = mv(self.I_N, self.kin.omega)
        if self.params.has_h:
            H = H + mv(self.kin.R_N_B, self.params.h_embedded)
        return H


def spatial_inertia(I_N: Array, m: Array, r: Array) -> Array:
    """Spatial inertia about the origin of a body with mass centre ``r``, (..., 6, 6):

    .. math:: I_O = \\begin{bmatrix} I - m [r]_\\times^2 & m [r]_\\times \\\\
              -m [r]_\\times & m U \\end{bmatrix}

    so that ``I_O (ω, v_O) = (H_O, P)`` (Featherstone, *Rigid Body Dynamics
    Algorithms*, eq. 2.63, with the body's point at the origin).
    """
    m_ = m[..., None, None]
    rx = (r @ _SKEW).reshape(r.shape[:-1] + (3, 3))
    mrx = m_ * rx
    I_O = np.empty(mrx.shape[:-2] + (6, 6))
    I_O[..., :3, :3] = I_N - mrx @ rx
    I_O[..., :3, 3:] = mrx
    I_O[..., 3:, :3] = mrx.swapaxes(-1, -2)
    I_O[..., 3:, 3:] = m_ * _EYE
    return I_O


#: above this many bodies in one call (bodies times states), :attr:`KaneTerms.bias`
#: evaluates the definition with arrays as its scalars rather than its table of terms
#: (the two meet near 200 bodies: ``python -m benchmarks.bias_crossover``)
BIAS_TABLE_BODIES = 200


@functools.cache
def bias_forms() -> tuple[Trilinear, Bilinear]:
    """:func:`kanedyn.spatial.plucker.bias_force` as tables of terms: in ``(I_O, V, V)``
    (``I_O`` flattened to 36; :meth:`~kanedyn.spatial.algebra.Trilinear.of_quadratic`)
    and in ``(V, h)`` (:meth:`~kanedyn.spatial.algebra.Bilinear.of_function`), read off the
    one definition. Its monomials are the definition's, so the exactly zero ``v × m v`` is
    not among them."""

    def in_v(x: list, v: list) -> list:
        return sp.bias_force([x[6 * i : 6 * i + 6] for i in range(6)], v)

    def in_h(v: list, h: list) -> list:
        return sp.bias_force([[0.0] * 6] * 6, v, h)

    return Trilinear.of_quadratic(in_v, 36, 6, 6), Bilinear.of_function(in_h, 6, 3, 6)


def bias_by_table(I_O: Array, V: Array, h: Array | None = None) -> Array:
    """:func:`kanedyn.spatial.plucker.bias_force` for every body by its table of terms
    (:func:`bias_forms`): ``I_O`` (..., 6, 6), ``V`` (..., 6), ``h`` (..., 3) or None."""
    in_v, in_h = bias_forms()
    p = trilinear(I_O.reshape(I_O.shape[:-2] + (36,)), V, V, in_v)
    return p if h is None else p + bilinear(V, h, in_h)


def bias_by_scalars(I_O: Array, V: Array, h: Array | None = None) -> Array:
    """:func:`kanedyn.spatial.plucker.bias_force` itself, with one float array per
    component (over every body and state) as its scalars; arguments as
    :func:`bias_by_table`."""
    rows = np.moveaxis(I_O, (-2, -1), (0, 1))
    comps = sp.bias_force(
        [list(r) for r in rows],
        list(np.moveaxis(V, -1, 0)),
        None if h is None else list(np.moveaxis(h, -1, 0)),
    )
    return np.stack(comps, axis=-1)


def kane_terms(model: Model, kin: Kinematics) -> KaneTerms:
    """Inertias at ``kin`` (the parameters are ``kin.params``), and on first use the bias
    accelerations and bias forces (:class:`KaneTerms`); spatial quantities about
    ``kin.origin``. The bias forces (:attr:`KaneTerms.bias`) leave out the exactly zero
    ``v × m v``, whose round-off at orbital speeds is of the size of a gravity-gradient
    torque."""
    pa = kin.params
    R = kin.R_N_B
    I_N = R @ pa.inertia @ R.swapaxes(-1, -2)
    I_O = spatial_inertia(I_N, pa.mass, kin.r_rel)
    return KaneTerms(model, kin, pa, joint_subspace(model, kin), I_N, I_O)


def mass_matrix_at(model: Model, tm: KaneTerms) -> Array:
    """``M = Σ Ωᵀ I Ω + m VᵀV`` by composite rigid bodies, (..., n, n).

    ``I^c_k = Σ_{i outboard of k} I_O,i`` (one product with the path matrix), then for
    joint k(r) on the path of joint k(s): ``M_rs = S_rᵀ I^c_{k(s)} S_s``; the masks of
    :class:`kanedyn.model.plan.Plan` keep those entries and mirror them (Featherstone's CRBA,
    in the subtree form).
    """
    pl = plan_of(model)
    I_O = tm.I_O
    Ic = (model.layout.path.T @ I_O.reshape(I_O.shape[:-2] + (36,))).reshape(I_O.shape)
    S = tm.S
    Y = Ic.take(pl.dof_joint, axis=-3) @ S[..., None]  # (..., n, 6, 1): I^c_{k(s)} S_s
    G = S @ Y[..., 0].swapaxes(-1, -2)  # G[r, s] = S_r · I^c_{k(s)} S_s
    M = pl.A_up * G + pl.A_low * G.swapaxes(-1, -2)
    if has_rotors(model):  # geared rotors (kanedyn.dynamics.rotors)
        M = M + rotor_sums(model, tm.kin, tm.par)[0]
    return M


def body_wrenches(tm: KaneTerms, L: AppliedLoads) -> Array:
    """Per body, the spatial force about the origin that the joints must supply,
    ``f_i = I_O A_r + V ×f (I_O V) + (ω × h, 0) - (T + r × F, F)`` (..., nb, 6)."""
    f = mv(tm.I_O, tm.A_r) + tm.bias
    f[..., :3] -= L.T + cross(tm.kin.r_rel, L.F)
    f[..., 3:] -= L.F
    return f


def forcing_at(model: Model, tm: KaneTerms, L: AppliedLoads) -> Array:
    """``Fr + Fr*`` at zero acceleration: the right-hand side of ``M ν̇ = f``.

    Per body, the spatial force about the origin (``kin.origin``) that the joints must
    supply, ``f_i = I_O A_r + V ×f (I_O V) + (ω × h, 0) - (T + r × F, F)`` (``tm.bias``,
    ``r`` relative to the origin); summed over each joint's subtree
    (``Pᵀ f``) and projected on the joint's subspace: ``f_r = -S_r · (Pᵀ f)_{k(r)} + Q_r``.
    """
    pl = plan_of(model)
    kin = tm.kin
    f = body_wrenches(tm, L)
    f_sub = subtree_sum(model, f).take(pl.dof_joint, axis=-2)
    out = L.Q - _vecdot(tm.S, f_sub)
    if has_rotors(model):  # geared rotors (kanedyn.dynamics.rotors)
        out = out + rotor_sums(model, kin, tm.par)[1]
    return out


def _check(model: Model, state: State) -> State:
    return model.check_state(state)


def _flexible_state(model: Model, state: State) -> tuple[Kinematics, Partials, Array, Array]:
    q, u, eta, xi = flex.split(model, state)
    kin = kinematics_at(model, q, u, eta=eta, xi=xi)
    return kin, partials_at(model, kin), eta, xi


def flexible_system(
    model: Model, state: State | States, loads: LoadsLike = None, t: float = 0.0
) -> tuple[Array, Array]:
    """``(M, f)`` over ``[u | s | ξ]`` of a model with flexible bodies: the rigid tree's
    (:func:`mass_matrix_at`, :func:`forcing_at`) plus the modal terms of
    :func:`kanedyn.dynamics.flex.flex_terms` (Kane_NBody_Flex slides 32-33)."""
    q, u, eta, xi = flex.split(model, state)  # one State: a batch is refused
    kin = kinematics_at(model, q, u, eta=eta, xi=xi)
    tm = kane_terms(model, kin)
    return flexible_system_at(model, tm, applied_loads(model, State(q, u), kin, loads, t), eta, xi)


def flexible_system_at(
    model: Model, tm: KaneTerms, L: AppliedLoads, eta: Array, xi: Array
) -> tuple[Array, Array]:
    """:func:`flexible_system` from the Kane terms of the joints' state ``tm``, the
    applied loads ``L`` resolved there and the modal coordinates and speeds."""
    n = model.n
    M, f = flex.flex_terms(model, tm.kin, tm.par, eta, xi)
    M[:n, :n] += mass_matrix_at(model, tm)
    f[:n] += forcing_at(model, tm, L)
    if tm.kin.nodes is not None:
        B = _node_inertia(model, tm, M)
        f[n:] -= np.einsum("ijf,ij->f", B, body_wrenches(tm, L))
    return M, f


def flexible_mass_matrix_at(model: Model, tm: KaneTerms, eta: Array | None) -> Array:
    """Kane's mass matrix over ``[u | s | ξ]`` of a model with flexible bodies
    (:func:`flexible_system_at`'s ``M``, which holds no speed) at the modal coordinates
    ``eta``: the rigid tree's, the modal blocks ``T_iᵀ ΔM_i T_i`` and the node terms. The
    momentum states' ``y = M ν`` (:mod:`kanedyn.dynamics.msd`) and the impacts of lock
    events, stops and loops (:func:`kanedyn.dynamics.loops.plastic_impact`) take it.
    Without flexible bodies (``eta`` None) it is :func:`mass_matrix_at`."""
    if eta is None:
        return mass_matrix_at(model, tm)
    n = model.n
    M, _ = flex.flex_terms(model, tm.kin, tm.par, eta, np.zeros(model.nf))
    M[:n, :n] += mass_matrix_at(model, tm)
    if tm.kin.nodes is not None:
        _node_inertia(model, tm, M)
    return M


def _node_inertia(model: Model, tm: KaneTerms, M: Array) -> Array:
    """The rigid bodies' terms over the modal speeds of the nodes they ride on
    (``Joint.inner_node``, ``outer_node``), added to ``M`` over ``[u | s | ξ]``: with
    the bodies' spatial partials ``B_ν = P S`` (joint speeds) and ``B_ξ = P S_ξ``
    (:class:`~kanedyn.dynamics.kinematics.NodeKinematics`), Kane's
    ``M = Σ_i Bᵀ I_O,i B`` in its ξ rows and columns; returns ``B_ξ`` (nb, 6, nf), with
    which the forcing's ξ rows are ``f = -Σ_i B_ξᵀ f_i`` (:func:`body_wrenches`, the
    bias ``A_r`` with the node terms)."""
    if has_rotors(model):
        raise ModelError(
            "geared rotors (Joint.rotor) in a model with joints at nodes of flexible "
            "bodies (Joint.inner_node) are not modelled yet"
        )
    assert tm.kin.nodes is not None
    pl, n = plan_of(model), model.n
    P = model.layout.path
    B = np.einsum("ik,kjf->ijf", P, tm.kin.nodes.S_xi)  # (nb, 6, nf)
    Bnu = P[:, pl.dof_joint][:, None, :] * tm.S.T[None, :, :]  # (nb, 6, n)
    IB = tm.I_O @ B
    M[n:, n:] += np.einsum("ijf,ijg->fg", B, IB)
    M_nx = np.einsum("ijr,ijf->rf", Bnu, IB)
    M[:n, n:] += M_nx
    M[n:, :n] += M_nx.T
    return B


def mass_matrix(model: Model | ModelBatch, state: State | States) -> Array:
    """Kane's mass matrix ``M = Σ Ωᵀ I Ω + m VᵀV``, (n, n), symmetric positive definite.

    Kane_NBody slide 23 (42's ``COEF``). With :class:`~kanedyn.States` and/or a
    :class:`~kanedyn.ModelBatch`, the result is (B, n, n). For a model with loops this is
    the spanning tree's; :func:`kanedyn.loop_equations` gives the constrained ``CᵀMC``.
    """
    if isinstance(model, Model) and model.nf:
        return flexible_system(model, state)[0]
    base, params, q, u = resolve(model, state)
    return mass_matrix_at(base, kane_terms(base, kinematics_at(base, q, u, params)))


def generalized_active_forces(
    model: Model, state: State, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """``Fr = Σ_i Ω_iᵀ T_i + V_iᵀ F_i + Q``, shape (n,): gravity, springs, dampers, loads."""
    _check(model, state)
    kin = kinematics_at(model, state.q, state.u)
    par = partials_at(model, kin)
    L = applied_loads(model, state, kin, loads, t)
    n = model.n
    return (
        par.Omega.reshape(3 * model.nb, n).T @ L.T.ravel()
        + par.V.reshape(3 * model.nb, n).T @ L.F.ravel()
        + L.Q
    )


def generalized_inertia_forces(model: Model, state: State, acc: ArrayLike) -> Array:
    """``Fr* = -Σ_i Ω_iᵀ [I_i α_i + ω_i × (I_i ω_i + h_i)] + V_iᵀ m_i a_i``, shape (n,).

    ``acc`` is ``d/dt [u | s]``; ``α_i = Ω_i ν̇ + α_r``, ``a_i = V_i ν̇ + a_r``.
    """
    _check(model, state)
    acc = np.asarray(acc, dtype=float)
    if acc.shape != (model.n,):
        raise ModelError(f"acc has shape {acc.shape}; this model has n = {model.n} speeds")
    tm = kane_terms(model, kinematics_at(model, state.q, state.u))
    kin = tm.par.kin
    alpha = tm.Omega @ acc + tm.par.alpha_r
    a = tm.V @ acc + tm.par.a_r
    T_star = -mv(tm.I_N, alpha) - cross(kin.omega, tm.H)
    F_star = -tm.params.mass[:, None] * a
    n = model.n
    Fr_star = (
        tm.Omega.reshape(3 * model.nb, n).T @ T_star.ravel()
        + tm.V.reshape(3 * model.nb, n).T @ F_star.ravel()
    )
    if has_rotors(model):  # F*_R = -(M_R ν̇ - f_R)
        M_R, f_R = rotor_sums(model, kin, tm.par)
        Fr_star = Fr_star - M_R @ acc + f_R
    return Fr_star


def solve_mass_matrix(M: Array, f: Array) -> Array:
    """Solve ``M x = f`` by Cholesky (M symmetric positive definite; LAPACK potrf/potrs).

    Stacked ``M`` (..., n, n), ``f`` (..., n): see :func:`_solve_stacked`.
    """
    if M.shape[-1] == 0:  # a model with no DOF (every joint a weld)
        return np.zeros(M.shape[:-1])
    if M.ndim > 2:
        return _solve_stacked(M, f)
    c, info = _POTRF(M, lower=1, clean=0)
    if info != 0:
        raise ModelError(SINGULAR_MASS_MATRIX)
    return _POTRS(c, f, lower=1)[0]


def _solve_stacked(M: Array, f: Array) -> Array:
    """Stacked solves by LU (``np.linalg.solve``): on (1000, 50, 50) it costs a third of
    ``np.linalg.cholesky`` followed by the two triangular solves (NumPy has no stacked
    triangular solver), and agrees with the Cholesky solution to round-off."""
    try:
        x = np.linalg.solve(M, np.broadcast_to(f, M.shape[:-1])[..., None])[..., 0]
    except np.linalg.LinAlgError:
        x = np.full(M.shape[:-1], np.nan)
    if not np.all(np.isfinite(x)):
        bad = np.argwhere(~np.all(np.isfinite(x), axis=-1))
        raise ModelError(f"mass matrix is singular for batch member(s) {bad[:5].tolist()}")
    return x.astype(np.float64, copy=False)


def forcing(
    model: Model | ModelBatch, state: State | States, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """``f = Fr + Fr*|_{ν̇=0}``, the right-hand side of ``M ν̇ = f`` (Kane_NBody slide 23),
    shape (n,) or (B, n): the numeric twin of the symbolic ``.forcing``. With flexible
    bodies, over ``[u | s | ξ]`` (:func:`flexible_system`)."""
    if isinstance(model, Model) and model.nf:
        return flexible_system(model, state, loads, t)[1]
    base, params, q, u = resolve(model, state)
    kin = kinematics_at(base, q, u, params)
    return forcing_at(base, kane_terms(base, kin), applied_loads(base, state, kin, loads, t))


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
    """``T = ½ Σ ω_iᵀ I_i ω_i + m_i v_i·v_i`` (embedded rotor energy is constant, excluded);
    with flexible bodies, their elastic motion included (:func:`kanedyn.dynamics.flex.flex_energy`)."""
    if model.nf:
        kin, par, eta, xi = _flexible_state(model, state)
        return float(kinetic_energy_at(model, kin)) + flex.flex_energy(model, kin, par, eta, xi)[0]
    _check(model, state)
    return kinetic_energy_at(model, kinematics_at(model, state.q, state.u))


def kinetic_energy_at(model: Model, kin: Kinematics) -> Any:
    """:func:`kinetic_energy` from the kinematics of a state: a float, or (...) for
    kinematics of a batch of states or parameters (..., nb, 3); the masses and inertias
    are ``kin.params``."""
    pa = kin.params
    w_B = np.einsum("...bji,...bj->...bi", kin.R_N_B, kin.omega)
    rot_ke = np.einsum("...bi,...bij,...bj->...", w_B, pa.inertia, w_B)
    for spec in rotor_specs(model, pa):  # geared rotors: ½ ω_R·J_R ω_R (½ n²J σ² if reflected)
        R, w, _, _, sigma = carrier(spec, kin)
        w_R, H_R = rotor_momentum(spec, sigma, R, w)
        rot_ke = rot_ke + (
            spec.n**2 * spec.J * sigma**2 if spec.reflected_only else np.sum(w_R * H_R, axis=-1)
        )
    T = 0.5 * (rot_ke + np.sum(pa.mass * np.sum(kin.v**2, axis=-1), axis=-1))
    return float(T) if np.ndim(T) == 0 else T


def potential_energy(model: Model, state: State) -> float:
    """Gravity plus joint springs (see :mod:`kanedyn.dynamics.loads`): uniform gravity's
    ``-Σ m_i g·r_i``, or a central field's potential summed over the bodies
    (:func:`kanedyn.spatial.plucker.central_gravity_potential`: point mass, gravity
    gradient, J2); with flexible bodies, the strain energy ``½ηᵀK_Ψη`` and the
    displaced mass in uniform gravity."""
    if model.nf:
        kin, par, eta, xi = _flexible_state(model, state)
        V = potential_energy_at(model, state.q[: model.nq], kin)
        return float(V) + flex.flex_energy(model, kin, par, eta, xi)[1]
    _check(model, state)
    return potential_energy_at(model, state.q, kinematics_at(model, state.q, state.u))


def potential_energy_at(model: Model, q: Array, kin: Kinematics) -> Any:
    """:func:`potential_energy` from the coordinates and kinematics of a state (or of a
    batch: ``q`` (..., nq), the result (...)); the parameters are ``kin.params``."""
    pa = kin.params
    if model.central_gravity is not None:
        gravity = central_gravity_potential(kin)
    else:
        gravity = -np.sum(pa.mass * _vecdot(kin.r, pa.gravity[..., None, :]), axis=-1)
    V = gravity + spring_potential(model, q, pa)
    return float(V) if np.ndim(V) == 0 else V


def system_mass_properties(model: Model, state: State) -> tuple[float, Array, Array]:
    """Total mass, mass centre (N) and inertia about it (N axes) at ``state``."""
    _check(model, state)
    kin = kinematics_at(model, state.q, state.u)
    pa = kin.params
    m = float(pa.mass.sum())
    c = pa.mass @ kin.r / m
    d = kin.r - c
    I_N = kin.R_N_B @ pa.inertia @ kin.R_N_B.swapaxes(-1, -2)
    shift = pa.mass[:, None, None] * (
        np.einsum("bi,bi->b", d, d)[:, None, None] * np.eye(3) - d[:, :, None] * d[:, None, :]
    )
    return m, c, (I_N + shift).sum(axis=0)


def momentum(model: Model, state: State) -> tuple[Array, Array]:
    """Linear momentum ``P`` (N) and angular momentum ``H`` about the system mass centre (N).

    ``H = Σ_i I_i ω_i + h_i + m_i (r_i - r_c) × v_i``, embedded momentum included; with
    flexible bodies, their elastic motion too (:func:`kanedyn.dynamics.flex.flex_momentum`).
    """
    if model.nf:
        kin, par, eta, xi = _flexible_state(model, state)
        P, H = momentum_at(model, kin)
        m = float(kin.params.mass.sum())
        c = kin.params.mass @ kin.r / m
        dP, dH_O, dmc = flex.flex_momentum(model, kin, par, eta, xi)
        P_tot = P + dP
        H_O = H + np.cross(c, P) + dH_O  # about N's origin
        return P_tot, H_O - np.cross((m * c + dmc) / m, P_tot)
    _check(model, state)
    return momentum_at(model, kinematics_at(model, state.q, state.u))


def momentum_at(model: Model, kin: Kinematics) -> tuple[Array, Array]:
    """:func:`momentum` from the kinematics of a state (or of a batch of states or
    parameters: (..., 3) each); the parameters are ``kin.params``."""
    pa = kin.params
    m = pa.mass[..., :, None]  # (..., nb, 1)
    P = np.sum(m * kin.v, axis=-2)
    c = np.sum(m * kin.r, axis=-2) / np.sum(m, axis=-2)
    I_N = kin.R_N_B @ pa.inertia @ kin.R_N_B.swapaxes(-1, -2)
    H = mv(I_N, kin.omega) + mv(kin.R_N_B, pa.h_embedded)
    r_c = kin.r - c[..., None, :]
    H = H.sum(axis=-2) + np.sum(m * cross(r_c, kin.v), axis=-2)
    for spec in rotor_specs(model, pa):  # geared rotors: J_R ω_R (the rotor mass is the carrier's)
        R, w, _, _, sigma = carrier(spec, kin)
        H = H + rotor_momentum(spec, sigma, R, w)[1]
    return P, H


# The numeric and symbolic paths use the same names for the same quantities
# (``kd.symbolic.kane(model).Fr`` is the attribute of ``generalized_active_forces``); the
# short function names of earlier versions are deprecated (PEP 562).
_DEPRECATED: dict[str, tuple[str, Any]] = {
    "Fr": ("kanedyn.generalized_active_forces", generalized_active_forces),
    "Fr_star": ("kanedyn.generalized_inertia_forces", generalized_inertia_forces),
    "crba": ("kanedyn.mass_matrix", mass_matrix),
}


def __getattr__(name: str) -> Any:
    return deprecated_attribute(__name__, name, _DEPRECATED)
