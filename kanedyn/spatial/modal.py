"""The body terms of a flexible body (assumed modes), over the arithmetic protocol.

Kane_NBody_Flex slides 14-17 and 28 (42's ``FindFlexTerms``), with every second-order
term kept for the linear displacement field ``ρ = r + Ψη`` (so the kinetic energy of
that field is exact, and energy is conserved). In body axes, with ``ω`` the angular
velocity, ``a₀`` the acceleration of the body-frame origin, ``α = ω̇`` and ``ξ = η̇``,
the generalized inertia force of the body over its speeds ``(ω, v₀, ξ)`` is

.. math::

    f = \\mathcal M(\\eta) \\begin{bmatrix}\\alpha \\\\ a_0 \\\\ \\dot\\xi\\end{bmatrix} + b,
    \\qquad f_\\omega = \\int \\rho\\times a\\,dm,\\;
    f_v = \\int a\\,dm,\\; f_\\xi = \\int \\Psi^T a\\,dm,

    a = a_0 + \\alpha\\times\\rho + \\omega\\times(\\omega\\times\\rho)
        + 2\\omega\\times\\Psi\\xi + \\Psi\\dot\\xi .

This module gives the part that the rigid body (mass, mass centre and inertia of the
undeformed body) does not: ``ΔM`` and ``b`` below, with ``c_f = P_Ψη``,
``D_p = ∫Ψ_p ρᵀ dm = L_p + Σ_q η_q N_pq``, ``ΔE = ∫ρρᵀ - ∫rrᵀ``,
``ΔJ = tr(ΔE) U - ΔE``, ``H̄ = ∫ρ × Ψ dm = H_Ψ + Σ_q η_q ∫Ψ_q × Ψ dm`` (42's
``H_Ψ + Q_Ψ η``), ``D_ξ = Σ_p ξ_p D_p``:

.. math::

    \\Delta\\mathcal M = \\begin{bmatrix} \\Delta J & [c_f]_\\times & \\bar H \\\\
        -[c_f]_\\times & 0 & P_\\Psi \\\\ \\bar H^T & P_\\Psi^T & M_\\Psi \\end{bmatrix},\\quad
    b = \\begin{bmatrix} \\omega\\times\\Delta J\\omega + 2(\\omega\\,\\mathrm{tr} D_\\xi - D_\\xi\\omega) \\\\
        \\omega\\times(\\omega\\times c_f) + 2\\omega\\times P_\\Psi\\xi \\\\
        \\omega^T D_p\\omega - |\\omega|^2 \\mathrm{tr} D_p
        + 2\\sum_q \\xi_q\\,\\omega\\cdot\\int\\Psi_q\\times\\Psi_p\\,dm \\end{bmatrix}

(the slides' ``w·R·w``, ``w·S·w η`` and ``2ξᵀQᵀw`` are the last row). The geometric
stiffness (``Modes.geometric``, rows G_k) of the foreshortening ``½ηᵀG(r)η e`` adds, to
first order, ``K_geo η = Σ_k λ_k G_k η`` to ``f_ξ`` with the loads
``λ = (a₀ - g, α, ω_xω_x, ..., ω_zω_x)``. To keep the equations those of a kinetic
energy (energy and momenta conserved), the foreshortening is a displacement of mass to
first order in ``u_f``: ``c_f`` gains ``½(ηᵀG_kη)_{k<3}``, ``ΔJ`` gains ``ΔJ_f``
(:func:`foreshortening_inertia`, from rows 6-11), the ξ columns of ``a₀,k`` and ``α_k``
gain ``G_k η`` (and symmetrically the rows); ``b_v`` gains ``ξᵀG_kξ + 2ω × ġ`` and
``b_ω`` gains ``ξᵀG_{3+k}ξ + ω × ġ_{3..5} + ΔJ̇_f ω`` (``ġ_k = ηᵀG_kξ``). The inertia
that ``u_f`` adds to the modes is of higher order and left out.

In a central field, :func:`modal_central_forces` and :func:`modal_central_potential`
give the field's forces and potential on the elastic motion beyond the rigid body's
(the displaced mass at the mass centre, and the gravity gradient on the displaced
second moment: MacCullagh's order).

Arrays may hold floats, traced values or sympy expressions (object arrays); only
``+``, ``-``, ``*``, ``/`` by integers, ``@`` and sums are used, with integer constants
(so that on sympy the terms stay exact: :mod:`kanedyn.symbolic.flex`), and the
arithmetic's ``sqrt`` for the central field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kanedyn.spatial import plucker as sp
from kanedyn.spatial.arithmetic import Arithmetic

__all__ = [
    "LEVI_CIVITA",
    "centrifugal_loads",
    "cross_integrals",
    "first_moment",
    "foreshortening_inertia",
    "modal_bias",
    "modal_forces",
    "modal_inertia",
    "modal_momentum",
    "modal_momentum_rate",
    "modal_central_forces",
    "modal_central_potential",
    "node_frame",
    "node_rotation_derivatives",
    "node_subspace",
]

#: ε_ijk
LEVI_CIVITA = np.zeros((3, 3, 3), dtype=np.int64)  # integers: exact on sympy
LEVI_CIVITA[0, 1, 2] = LEVI_CIVITA[1, 2, 0] = LEVI_CIVITA[2, 0, 1] = 1
LEVI_CIVITA[0, 2, 1] = LEVI_CIVITA[2, 1, 0] = LEVI_CIVITA[1, 0, 2] = -1


def _skew(v: Any) -> Any:
    z = v[0] * 0
    return np.array([[z, -v[2], v[1]], [v[2], z, -v[0]], [-v[1], v[0], z]])


def _cross(a: Any, b: Any) -> Any:
    return np.array(
        [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    )


def cross_integrals(N: Any) -> Any:
    """``X[:, q, p] = ∫Ψ_q × Ψ_p dm`` (3, n, n) from ``N_ijqp``: ``X_iqp = ε_ijk N_jkqp``."""
    return np.tensordot(LEVI_CIVITA, N, axes=([1, 2], [0, 1]))


def centrifugal_loads(w: Any) -> Any:
    """The six products ``ω_xω_x, ω_yω_y, ω_zω_z, ω_xω_y, ω_yω_z, ω_zω_x`` (rows 6-11 of
    ``Modes.geometric``)."""
    return np.array([w[0] * w[0], w[1] * w[1], w[2] * w[2], w[0] * w[1], w[1] * w[2], w[2] * w[0]])


def foreshortening_inertia(s: Any) -> Any:
    """``ΔJ_f`` (3, 3) of the foreshortening from ``s_k = ηᵀG_kη`` (rows 6-11): the
    symmetric matrix with ``ωᵀΔJ_fω = -Σ_k λ_k(ω) s_k``, so that ``½ωᵀΔJ_fω`` is the
    kinetic energy ``∫(ω×r)·(ω×u_f) dm`` of ``u_f = ½ηᵀG(r)η e``."""
    return -np.array(
        [
            [s[6], s[9] / 2, s[11] / 2],
            [s[9] / 2, s[7], s[10] / 2],
            [s[11] / 2, s[10] / 2, s[8]],
        ]
    )


def _second_moment(md: Any, eta: Any) -> tuple[Any, Any]:
    """``D_p = L_p + Σ_q η_q N_pq`` (3, 3, n) and ``ΔE = ∫ρρᵀ dm - ∫rrᵀ dm`` (3, 3) of
    the linear field ``ρ = r + Ψη``."""
    D = md.L + (md.N * eta[None, None, None, :]).sum(axis=-1)  # (3, 3, n): D_p
    dE = (D * eta).sum(axis=-1)  # Σ η_p D_p
    dE = dE + dE.T - (md.N * eta[None, None, :, None] * eta[None, None, None, :]).sum(axis=(-1, -2))
    # ∫ρρᵀ - ∫rrᵀ = Σ η_p(L_p + L_pᵀ) + ηᵀNη ; D carries L + Nη, so (Dη) + (Dη)ᵀ - ηᵀNη
    return D, dE


def _inertia_parts(md: Any, eta: Any) -> tuple[Any, Any, Any]:
    """``D_p`` (3, 3, n), ``ΔJ`` (3, 3) and ``c_f`` (3) at ``η``, the foreshortening's
    ``½(ηᵀG_kη)_{k<3}`` and ``ΔJ_f`` included when ``md.geometric`` is set."""
    D, dE = _second_moment(md, eta)
    dJ = (
        np.eye(3, dtype=np.int64) * (dE[0, 0] + dE[1, 1] + dE[2, 2]) - dE
    )  # array first: scalars of any arithmetic
    cf = md.P @ eta
    if md.geometric is not None:
        s = (md.geometric @ eta) @ eta  # (12,) ηᵀG_kη
        cf = cf + s[:3] / 2
        dJ = dJ + foreshortening_inertia(s)
    return D, dJ, cf


def first_moment(md: Any, eta: Any) -> Any:
    """``c_f = ∫(ρ - r) dm = P_Ψη`` (plus the foreshortening's ``½(ηᵀG_kη)_{k<3}``)."""
    return _inertia_parts(md, eta)[2]


def _couplings(md: Any, eta: Any, constant: bool = True) -> tuple[Any, Any]:
    """The rigid–elastic couplings ``H̄ = H_Ψ + Σ_q η_q ∫Ψ_q × Ψ dm`` (+ ``G_{3..5}η``)
    and ``P̄ = P_Ψ`` (+ ``G_{0..2}η``), (3, n) each; both are affine in ``η``, so without
    the ``constant`` parts and at ``η = ξ`` they are their rates ``(dH̄/dt, dP̄/dt)``."""
    Hbar = (cross_integrals(md.N) * eta[None, :, None]).sum(axis=1)
    Pb = md.P * 0.0 if md.geometric is None else md.geometric[:3] @ eta
    if md.geometric is not None:
        Hbar = Hbar + md.geometric[3:6] @ eta  # G_k η
    if constant:
        Hbar, Pb = Hbar + md.H, Pb + md.P
    return Hbar, Pb


def modal_inertia(md: Any, eta: Any) -> Any:
    """``ΔM(η)`` (6 + n, 6 + n) of the module docstring, speeds ordered ``(ω, v₀, ξ)``;
    geometric stiffness's acceleration columns included when ``md.geometric`` is set."""
    n = md.mass.shape[0]
    _, dJ, cf = _inertia_parts(md, eta)
    Hbar, Pb = _couplings(md, eta)
    M = np.zeros((6 + n, 6 + n), dtype=np.result_type(dJ, Hbar, float))
    M[:3, :3] = dJ
    M[:3, 3:6] = _skew(cf)
    M[3:6, :3] = -_skew(cf)
    M[:3, 6:] = Hbar
    M[3:6, 6:] = Pb
    M[6:, :3] = Hbar.T
    M[6:, 3:6] = Pb.T
    M[6:, 6:] = md.mass
    return M


def modal_bias(md: Any, eta: Any, xi: Any, w: Any, g: Any) -> Any:
    """``b`` (6 + n) of the module docstring at ``η``, ``ξ``, body rate ``w`` and gravity
    ``g`` (body axes): the velocity terms of the flexible body's inertia forces, and the
    geometric stiffness of the centrifugal and gravity preloads."""
    D, dJ, cf = _inertia_parts(md, eta)
    Dxi = (D * xi).sum(axis=-1)
    b_w = _cross(w, dJ @ w) + 2 * (w * (Dxi[0, 0] + Dxi[1, 1] + Dxi[2, 2]) - Dxi @ w)
    b_v = _cross(w, _cross(w, cf)) + 2 * _cross(w, md.P @ xi)
    Dw = (D * w[None, :, None]).sum(axis=1)  # (3, n): D_p ω
    trD = D[0, 0] + D[1, 1] + D[2, 2]
    b_x = (Dw * w[:, None]).sum(axis=0) - trD * (w @ w)
    b_x = b_x + 2 * ((cross_integrals(md.N) * w[:, None, None]).sum(axis=0) * xi[:, None]).sum(
        axis=0
    )
    if md.geometric is not None:
        G = md.geometric
        lam = centrifugal_loads(w)
        b_x = (
            b_x
            + ((G[6:] * lam[:, None, None]).sum(axis=0) - (G[:3] * g[:, None, None]).sum(axis=0))
            @ eta
        )
        gdot = (G @ xi) @ eta  # ηᵀG_kξ
        xGx = (G[:6] @ xi) @ xi
        b_v = b_v + xGx[:3] + 2 * _cross(w, gdot[:3])
        b_w = b_w + xGx[3:] + _cross(w, gdot[3:6]) + foreshortening_inertia(2 * gdot) @ w
    return np.concatenate([b_w, b_v, b_x])


def modal_forces(md: Any, eta: Any, xi: Any, w: Any, g: Any) -> Any:
    """``h`` (6 + n): the flexible body's velocity, gravity and elastic forces over its
    speeds ``(ω, v₀, ξ)`` beyond the rigid body's, so that its inertia and applied
    forces are ``f = ΔM(η) [α; a₀; ξ̇] + h`` (Kane_NBody_Flex slides 32-33):
    :func:`modal_bias` plus uniform gravity ``g`` (body axes) on the displaced mass
    (``-c_f × g`` and ``-P_Ψᵀg``) and the modal stiffness and damping ``K_Ψη + C_Ψξ``.
    With ``g = 0`` and the accelerations ``a₀ - g`` (gravity as an acceleration of N),
    ``ΔM [α; a₀ - g; ξ̇] + h`` is the same force."""
    b = modal_bias(md, eta, xi, w, g)
    b_w = b[:3] - _cross(first_moment(md, eta), g)
    b_x = b[6:] + md.stiffness @ eta + md.damping @ xi - md.P.T @ g
    return np.concatenate([b_w, b[3:6], b_x])


def modal_momentum(md: Any, eta: Any, xi: Any, w: Any, v0: Any) -> Any:
    """``ΔM(η) [ω; v₀; ξ]`` (6 + n): the momenta of the flexible body beyond the rigid
    body's (body axes) over its speeds ``(ω, v₀, ξ)``: the angular momentum about the
    body-frame origin, the linear momentum, and its modal momenta
    ``y_ξ = ∂T/∂ξ = H̄ᵀω + P̄ᵀv₀ + M_Ψξ`` (the whole of them: the rigid body's
    kinetic energy has no ``ξ``), the momentum states of MSD_NBody's flexible bodies."""
    return modal_inertia(md, eta) @ np.concatenate([w, v0, xi])


def modal_momentum_rate(md: Any, eta: Any, xi: Any, w: Any, v0: Any, g: Any) -> Any:
    """``ẏ_ξ`` (n): the rate of the modal momenta ``y_ξ = H̄ᵀω + P̄ᵀv₀ + M_Ψξ``
    (:func:`modal_momentum`) from Kane's equations of the modes at body rate ``w``,
    origin velocity ``v0`` and gravity ``g`` (body axes).

    Differentiating ``y_ξ`` (components in the moving body axes, where
    ``d(v₀)/dt = a₀ - ω × v₀``) and using the modal rows of Kane's equations
    ``H̄ᵀα + P̄ᵀa₀ + M_Ψξ̇ + h_ξ = 0`` (:func:`modal_forces`, Kane_NBody_Flex slide 33)
    leaves no acceleration:

    .. math::

        \\dot y_\\xi = -h_\\xi - \\bar P^T(\\omega\\times v_0)
            + \\dot{\\bar H}^T\\omega + \\dot{\\bar P}^T v_0

    with ``dH̄/dt``, ``dP̄/dt`` the couplings' rates (affine in ``η``). It is MSD_NBody's
    modal momentum rate with the slides' dropped second-order terms kept."""
    h = modal_forces(md, eta, xi, w, g)
    Hbar, Pb = _couplings(md, eta)
    Hd, Pd = _couplings(md, xi, constant=False)
    n = md.mass.shape[0]
    return -h[6 : 6 + n] - Pb.T @ _cross(w, v0) + Hd.T @ w + Pd.T @ v0


def _central_parts(ar: Arithmetic, md: Any, eta: Any, mu: Any, com: Any, r: Any) -> tuple[Any, ...]:
    """The pieces of :func:`modal_central_forces` and :func:`modal_central_potential`:
    ``g₀``, ``G``, ``D_p``, ``c_f`` and ``J_Δ`` (body axes)."""
    r = np.array(list(r))
    com = np.array(list(com))
    inv_r2 = 1.0 / (r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
    inv_r3 = ar.sqrt(inv_r2)[()] * inv_r2
    g0 = r * (-mu * inv_r3)
    G = (r[:, None] * r[None, :]) * (3.0 * inv_r2) - np.eye(3)
    G = G * (mu * inv_r3)
    D, dE = _second_moment(md, eta)
    cl = md.P @ eta  # c_f of the linear field
    Delta = dE - cl[:, None] * com[None, :] - com[:, None] * cl[None, :]
    J = np.eye(3) * (Delta[0, 0] + Delta[1, 1] + Delta[2, 2]) - Delta
    return g0, G, D, first_moment(md, eta), J, r


def modal_central_potential(ar: Arithmetic, md: Any, eta: Any, mu: Any, com: Any, r: Any) -> Any:
    """The potential of a central field on a flexible body beyond the rigid body's
    (:func:`kanedyn.spatial.plucker.central_gravity_potential` with the undeformed mass,
    mass centre and inertia): the body's potential ``-μ∫dm/|r + R(ρ - c)|`` expanded
    about its undeformed mass centre ``r`` (from the field's centre) to second order in
    ``ρ - c`` (MacCullagh's order, Hughes 1986 ch. 8), minus the rigid body's,

    .. math:: \\Delta V = -g_0\\cdot c_f - \\tfrac12\\, G : \\Delta, \\qquad
        g_0 = -\\frac{\\mu r}{|r|^3},\\quad
        G = \\frac{\\mu}{|r|^3}\\left(3\\hat r\\hat r^T - U\\right),\\quad
        \\Delta = \\Delta E - c_\\Psi c^T - c\\, c_\\Psi^T

    with ``c_f`` the displaced first moment (:func:`first_moment`, foreshortening
    included), ``c_Ψ = P_Ψη``, ``ΔE = ∫ρρᵀ - ∫rrᵀ`` of the linear field and ``c`` the
    undeformed mass centre from the body-frame origin. ``-½G:Δ`` is MacCullagh's term
    of the inertia ``J_Δ = tr(Δ)U - Δ`` (``G`` is traceless). All vectors in body axes;
    J2 acts on the rigid mass centre only."""
    g0, _, _, cf, J, r = _central_parts(ar, md, eta, mu, com, r)
    V2 = sp.central_gravity_potential(ar, mu, 0.0, 1.0, 0.0, J.tolist(), list(r), [0.0, 0.0, 1.0])
    return V2 - (g0[0] * cf[0] + g0[1] * cf[1] + g0[2] * cf[2])


def modal_central_forces(ar: Arithmetic, md: Any, eta: Any, mu: Any, com: Any, r: Any) -> Any:
    """The generalized active forces (6 + n) of a central field on a flexible body over
    its speeds ``(ω, v₀, ξ)``, beyond the rigid body's: minus the gradient of
    :func:`modal_central_potential` (same arguments, body axes). With ``d = c_f``,

    .. math::

        F = G d + F_\\Delta,\\quad T_c = d \\times g_0 + T_\\Delta,\\quad
        \\begin{bmatrix} T_c + c\\times F \\\\ F \\\\
        \\bar P^T g_0 + \\left(G : (D_p - P_{\\Psi,p} c^T)\\right)_p\\end{bmatrix}

    where ``F_Δ``, ``T_Δ`` are :func:`kanedyn.spatial.plucker.central_gravity` of the
    inertia ``J_Δ`` with no mass (the gravity-gradient force and torque of the displaced
    second moment), ``P̄ = P_Ψ + (G_kη)_{k<3}`` the displaced first moment's rate
    (foreshortening included) and ``G : (D_p - P_{Ψ,p}cᵀ) = ∫Ψ_pᵀ G (ρ - c) dm`` the
    gravity gradient on the modes (``-∂(-½G:Δ)/∂η_p``; the foreshortening's second
    moment, of higher order, is left out). First order in the body's size: the
    displaced mass in the field at the mass centre (the uniform-gravity terms of
    :func:`modal_forces` with ``g = g₀``); second order: the gravity gradient."""
    g0, G, D, cf, J, r = _central_parts(ar, md, eta, mu, com, r)
    com = np.array(list(com))
    F2, T2 = sp.central_gravity(ar, mu, 0.0, 1.0, 0.0, J.tolist(), list(r), [0.0, 0.0, 1.0])
    F = G @ cf + np.array(F2)
    Tc = _cross(cf, g0) + np.array(T2)
    Pb = md.P
    if md.geometric is not None:
        Pb = Pb + md.geometric[:3] @ eta  # (3, n): ∂c_f/∂η
    Q = Pb.T @ g0 + (G[:, :, None] * D).sum(axis=(0, 1)) - md.P.T @ (G @ com)
    return np.concatenate([Tc + _cross(com, F), F, Q])


def _cayley(G: Any, den: Any) -> Any:
    """``C = U + 2([g]× + [g]×²)/(1 + g·g)`` of ``G = [g]×`` and ``den = 1 + g·g``."""
    return np.eye(3) + (G + G @ G) * (2.0 / den)  # arrays first: traced scalars broadcast


def node_rotation_derivatives(Theta: Any, eta: Any) -> tuple[Any, Any, Any]:
    """The node rotation ``C(η)`` of :func:`node_frame` (the Cayley rotation of
    ``g = Θη/2``) with its first and second derivatives in the amplitudes ``η`` (NumPy;
    the energy-momentum scheme's discrete gradient of a node joint's rotation,
    :mod:`kanedyn.simulation.conserving.constraints`). With ``s = 1 + g·g``,
    ``N = [g]× + [g]×²``, ``E_i = [e_i]×``:

    .. math::

        \\partial_i C = \\frac{2 N_i}{s} - \\frac{4 g_i N}{s^2},\\quad
        N_i = E_i + E_i [g]_\\times + [g]_\\times E_i, \\\\
        \\partial_{ij} C = \\frac{2 (E_iE_j + E_jE_i)}{s}
            - \\frac{4 (g_j N_i + g_i N_j + \\delta_{ij} N)}{s^2}
            + \\frac{16 g_i g_j N}{s^3}

    in ``g``, and ``∂C/∂η = ½ Θ`` (chain rule). Returns ``C`` (3, 3), ``dC`` (n, 3, 3),
    ``d2C`` (n, n, 3, 3)."""
    Theta = np.asarray(Theta, dtype=float)
    A = 0.5 * Theta
    g = A @ np.asarray(eta, dtype=float)
    s = 1.0 + float(g @ g)
    G = _skew(g)
    N = G + G @ G
    E = np.array([_skew(e) for e in np.eye(3)])
    Ni = E + E @ G + G @ E  # (3, 3, 3): ∂N/∂g_i
    dCg = 2.0 * Ni / s - 4.0 * g[:, None, None] * N / s**2
    EE = np.einsum("iab,jbc->ijac", E, E)
    d2Cg = (
        2.0 * (EE + EE.transpose(1, 0, 2, 3)) / s
        - 4.0 * (g[None, :, None, None] * Ni[:, None] + g[:, None, None, None] * Ni[None, :]) / s**2
        - 4.0 * np.eye(3)[:, :, None, None] * N / s**2
        + 16.0 * np.outer(g, g)[:, :, None, None] * N / s**3
    )
    dC = np.einsum("ik,iab->kab", A, dCg)
    d2C = np.einsum("ik,jl,ijab->klab", A, A, d2Cg)
    return _cayley(G, s), dC, d2C


def node_frame(md: Any, k: int, eta: Any, xi: Any) -> tuple[Any, Any, Any, Any]:
    """The frame that node ``k`` carries, in body axes: ``(C, d, W, Ẇ)``.

    A joint attached at node k (``Joint.inner_node``) rides on the node's elastic
    displacement ``Ψ_kη`` and rotation ``Θ_kη`` (Kane_NBody_Flex slide 34, 42's
    ``C(Θη)`` on the joint's inner side). The rotation is the Cayley (Gibbs-vector)
    rotation of ``g = Θ_kη/2``, first-order equal to 42's ``U + [Θη]×``, rational (no
    branch, traceable) and exactly orthonormal; its angular velocity is the exact rate:

    .. math::

        C = U + \\frac{2([g]_\\times + [g]_\\times^2)}{1 + g\\cdot g},\\quad
        d = r_k + \\Psi_k\\eta,\\quad
        w = W\\xi,\\quad W = \\frac{\\Theta_k + [g]_\\times\\Theta_k}{1 + g\\cdot g},\\quad
        v = \\Psi_k\\xi,\\quad
        \\dot W = \\frac{[a]_\\times\\Theta_k/2 - (g\\cdot a)\\,W}{1 + g\\cdot g}

    with ``a = Θ_kξ`` (``ġ = a/2``): ``Ċ = [w]×C``, ``ḋ = v``. ``W`` (3, n) is the
    partial of ``w`` (the partial of ``v`` is ``Ψ_k``) and ``Ẇ`` (3, n) its rate along
    the motion, so that ``ẇ = Wξ̇ + Ẇξ`` (``Ẇξ = -(g·a)w/(1 + g·g)``, as ``a × a = 0``).
    Only ``+ - * /`` are used."""
    Theta = md.Theta[k]
    g = 0.5 * (Theta @ eta)
    a = Theta @ xi
    den = 1.0 + (g[0] * g[0] + g[1] * g[1] + g[2] * g[2])
    G = _skew(g)
    C = _cayley(G, den)
    W = (Theta + G @ Theta) / den
    W_dot = (_skew(a) @ Theta * 0.5 - W * (g[0] * a[0] + g[1] * a[1] + g[2] * a[2])) / den
    return C, md.node_positions[k] + md.Psi[k] @ eta, W, W_dot


def node_subspace(R: Any, x_n: Any, W: Any, W_dot: Any, Psi: Any, xi: Any) -> tuple[Any, Any]:
    """The motion subspace of a node frame over its body's modal speeds and its rate in
    the body, ``(Φ, Φ̇)`` (6 × n each), in the axes of ``R`` (the body axes' rotation to
    them) about the origin from which the deflected node is at ``x_n``:

    .. math::

        \\Phi = \\begin{bmatrix} R W \\\\ R\\Psi_n + [x_n]_\\times R W \\end{bmatrix},\\qquad
        \\dot\\Phi = \\begin{bmatrix} R \\dot W \\\\ R[\\Psi_n\\xi]_\\times W
            + [x_n]_\\times R \\dot W \\end{bmatrix}

    (``W``, ``Ẇ`` of :func:`node_frame`): the node frame moves in the body with the
    spatial velocity ``Φξ``, and ``Φ̇`` is the rate of ``Φ`` with the body held still
    (``ẋ_n = RΨ_nξ`` in it), so that in a body moving at ``V`` the rate of ``Φ`` is
    ``V ×ₘ Φ + Φ̇``. Both engines take the node's terms from here: the dense
    kinematics (:class:`kanedyn.dynamics.kinematics.NodeKinematics`, N about the
    origin) and the recursion (in the inner body's joint frame)."""
    RW = R @ W
    RWd = R @ W_dot
    Phi = np.concatenate([RW, R @ Psi + _skew(x_n) @ RW])
    Phi_dot = np.concatenate([RWd, R @ (_skew(Psi @ xi) @ W) + _skew(x_n) @ RWd])
    return Phi, Phi_dot
