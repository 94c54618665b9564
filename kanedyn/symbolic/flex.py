"""Flexible bodies (assumed modes) in the symbolic derivations: Kane and Lagrange.

A flexible body's modal coordinates ``η`` and speeds ``ξ = η̇`` are generalized
coordinates and speeds after the joints' (``q = [q_joints | η]``, ``ν = [u | s | ξ]``,
as in the numeric state), named ``eta_<body>_<k>``, ``xi_<body>_<k>`` and
``xidot_<body>_<k>``. The modal terms are those of :mod:`kanedyn.spatial.modal`
(``modal_inertia``, ``modal_bias``, ``modal_forces``), run on sympy expressions; nothing
here writes them again.

**Kane** (Kane_NBody_Flex slides 31-37, :mod:`kanedyn.dynamics.flex`): the speeds of
flexible body i in body axes, ``w_i = (ω, v₀, ξ_i) = W_i ν``, have the partials

.. math::

    W_i = \\begin{bmatrix} R^T \\Omega_i \\\\ R^T (V_i - \\Omega_i \\times R c_i) \\\\ E_i
    \\end{bmatrix}

(``Ω_i``, ``V_i`` the rigid partials of the body, over the modal speeds too when it
rides on a node: ``Omega_xi``, ``V_xi`` below, ``v₀ = v - ω × R c`` the body-frame
origin, ``E_i`` picks ``ξ_i``) and the remainders ``w_r = (Rᵀα_r, Rᵀa₀,r, 0)``,
``a₀,r = a_r - α_r × Rc - ω × (ω × Rc)``. Kane's equations gain

.. math::

    M \\mathrel{+}= W_i^T \\Delta\\mathcal M_i W_i, \\qquad
    F_r \\mathrel{+}= W_i^T F^e_i, \\qquad
    F^*_r \\mathrel{+}= -W_i^T (\\Delta\\mathcal M_i \\dot w_i + b_i)

with ``ΔM`` = ``modal_inertia``, ``b`` = ``modal_bias`` (velocity terms and geometric
stiffness of the centrifugal and gravity preloads) and the active modal force
``F^e = b - modal_forces`` = ``(c_f × g, 0, -K_Ψη - C_Ψξ + P_Ψᵀg)`` (gravity on the
displaced mass, elastic and damping forces).

**Joints at nodes** (``Joint.inner_node``, ``outer_node``; Kane_NBody_Flex slide 34):
joint k at node n of flexible body i rides on the node frame of
:func:`kanedyn.spatial.modal.node_frame`
(:func:`exact_node_frame`: the Cayley rotation ``C`` of ``Θ_nη/2`` and the displacement
``d = r_n + Ψ_nη``, exact), ``R_Bi_Gi → C R_Bi_Gi`` and the joint point
``d + C(inner_point - r_n)``. Kane's chain adds the node frame's spatial velocity
relative to body i, ``V_node = S ξ_i``, and its bias ``V_i ×_m V_node + c``
(:func:`kanedyn.spatial.modal.node_subspace`, :func:`exact_node_motion`), so that
the bodies outboard of the joint have the partials over the modal speeds

.. math::

    \\Omega_\\xi = R W, \\qquad V_\\xi = R\\Psi_n + (R W) \\times (r - x_n)

(``x_n = p_i + R d``) in their rows of ``M``, ``F_r`` and ``F*_r``, and a flexible body
outboard of a node has them in its ``W_i``. Lagrange's chain uses the same ``C`` and
``d``; its angular velocity is the rate of the attitude, ``[ω]_× = Ċ Cᵀ``
(differentiated), not ``W``. At a node m of the flexible outer body k
(``Joint.outer_node``) Go is fixed in the node frame: ``R_Go_Bo → R_Go_Bo Cᵀ``, the
outer point ``d + C(outer_point - r_m)``, and body k moves by ``V_Go - S_on ξ_k`` with
the bias ``-(V_k ×_m V_on + c_on)`` (``S_on``, ``c_on`` of ``node_subspace`` on
body k); in Lagrange's chain ``J_A`` loses ``R_N_Bk vee(∂C/∂η Cᵀ)``.

**Lagrange**: the body's kinetic energy gains ``½ wᵀ ΔM(η) w`` with ``w = W(q) q̇``
built from the Lagrange chain (``W = [Rᵀ J_A ; Rᵀ ∂p_B/∂q ; E]``), the potential energy
the strain and displaced-mass gravity energy ``½ηᵀK_Ψη - (Rᵀg)·c_f(η)`` (``c_f`` =
``first_moment``), and the generalized forces the modal damping ``-C_Ψξ``. The
Coriolis terms are ``Σ_k ∂(H_f q̇)/∂q_k q̇_k - ∂T_f/∂q``: the velocity terms of
``modal_bias`` are not used there, so the Lagrange cross-check
(:func:`kanedyn.symbolic.compare`) tests them against ``modal_inertia``.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import sympy as sm

from kanedyn.model import Model
from kanedyn.spatial.modal import (
    first_moment,
    modal_bias,
    modal_forces,
    modal_inertia,
    node_frame,
    node_subspace,
)
from kanedyn.symbolic.arithmetic import exact, exact_array
from kanedyn.symbolic.intermediates import cross, matmul

__all__ = [
    "ExactModes",
    "FlexBody",
    "exact_modes",
    "ExactNode",
    "exact_node_frame",
    "exact_node_motion",
    "kane_flex",
    "lagrange_flex",
    "modal_symbols",
    "rational",
]


def modal_symbols(model: Model) -> tuple[list[sm.Symbol], list[sm.Symbol], list[sm.Symbol]]:
    """``(η, ξ, ξ̇)`` symbols of the model's flexible bodies, (nf,) each in ``η``'s order:
    ``eta_<body>_<k>``, ``xi_<body>_<k>``, ``xidot_<body>_<k>`` (k from 0)."""
    eta, xi, xid = [], [], []
    for i, sl in model.modal_slices():
        name = model.bodies[i].name
        for k in range(sl.stop - sl.start):
            eta.append(sm.Symbol(f"eta_{name}_{k}", real=True))
            xi.append(sm.Symbol(f"xi_{name}_{k}", real=True))
            xid.append(sm.Symbol(f"xidot_{name}_{k}", real=True))
    return eta, xi, xid


@attrs.frozen(eq=False)
class ExactModes:
    """A :class:`~kanedyn.Modes` record's arrays as exact sympy numbers (object arrays),
    for :mod:`kanedyn.spatial.modal`."""

    mass: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    P: np.ndarray
    H: np.ndarray
    L: np.ndarray
    N: np.ndarray
    geometric: np.ndarray | None
    node_positions: np.ndarray
    Psi: np.ndarray
    Theta: np.ndarray


def exact_modes(md: Any) -> ExactModes:
    """``md``'s modal data as exact rationals (:func:`~kanedyn.symbolic.arithmetic.exact`)."""
    return ExactModes(
        mass=exact_array(md.mass),
        stiffness=exact_array(md.stiffness),
        damping=exact_array(md.damping),
        P=exact_array(md.P),
        H=exact_array(md.H),
        L=exact_array(md.L),
        N=exact_array(md.N),
        geometric=None if md.geometric is None else exact_array(md.geometric),
        node_positions=exact_array(md.node_positions),
        Psi=exact_array(md.Psi),
        Theta=exact_array(md.Theta),
    )


def rational(e: Any) -> Any:
    """``e`` with its floating-point numbers exact (the ``2.0``, ``0.5`` of the shared
    modal formulas), so that ``1.0*x`` is ``x`` and the terms read as written."""
    e = sm.sympify(e)
    floats = e.atoms(sm.Float)
    return e.xreplace({x: exact(float(x)) for x in floats}) if floats else e


@attrs.frozen(eq=False)
class ExactNode:
    """:func:`kanedyn.spatial.modal.node_frame` of node ``node`` of flexible body ``i``
    on sympy, its numbers exact (body axes): ``C``, ``d`` (3, 1), ``W`` and its rate
    ``W_dot`` (3, m); with the node's ``Psi`` (3, m) and its undeformed position ``r_n``, the body's
    modal slice ``sl`` and modal speeds ``xi`` (m, 1)."""

    i: int
    node: int
    sl: slice
    C: sm.Matrix
    d: sm.Matrix
    W: sm.Matrix
    W_dot: sm.Matrix
    Psi: sm.Matrix
    r_n: sm.Matrix
    xi: sm.Matrix


def exact_node_frame(model: Model, i: int, node: int, eta: list, xi: list) -> ExactNode:
    """The node frame of ``node`` of flexible body ``i`` (:class:`ExactNode`) at the
    body's modal coordinates and speeds taken from ``eta``, ``xi`` (all the model's)."""
    sl = dict(model.modal_slices())[i]
    md = exact_modes(model.bodies[i].modes)
    e, x = (np.array(list(v[sl]), dtype=object) for v in (eta, xi))
    C, d, W, W_dot = (
        sm.Matrix(np.asarray(a, dtype=object).tolist()).applyfunc(rational)
        for a in node_frame(md, node, e, x)
    )
    return ExactNode(i, node, sl, C, d, W, W_dot, sm.Matrix(md.Psi[node].tolist()),
                     sm.Matrix(md.node_positions[node].tolist()), sm.Matrix(list(x)))  # fmt: skip


def exact_node_motion(nf: ExactNode, R: sm.Matrix, p: sm.Matrix) -> tuple[sm.Matrix, sm.Matrix]:
    """The node frame ``nf``'s motion relative to a body with attitude ``R`` and frame
    origin ``p`` (N), on sympy, as spatial vectors about the origin in N: ``S = Φ``
    (6, m) and the bias at constant ``ξ``, ``c = Φ̇ξ`` (6, 1), of
    :func:`kanedyn.spatial.modal.node_subspace` (Kane_NBody_Flex slide 34)."""

    def arr(a: sm.Matrix) -> np.ndarray:
        return np.array(a.tolist(), dtype=object)

    x_n = arr(p)[:, 0] + arr(R) @ arr(nf.d)[:, 0]
    xi = arr(nf.xi)[:, 0]
    S, S_dot = node_subspace(arr(R), x_n, arr(nf.W), arr(nf.W_dot), arr(nf.Psi), xi)
    return sm.Matrix(S.tolist()), sm.Matrix((S_dot @ xi).tolist())


def _column(a: Any) -> sm.Matrix:
    return sm.Matrix([rational(x) for x in np.asarray(a, dtype=object).ravel()])


@attrs.frozen(eq=False)
class FlexBody:
    """The modal terms of flexible body ``i`` in the Kane derivation (tape names).

    ``W`` (6 + m, n_total): partials of the body's speeds ``w = (ω, v₀, ξ_i)`` (body
    axes); ``w``, ``w_r`` (remainders ``(α_r, a₀,r, 0)``), ``g`` (gravity, body axes);
    ``dM`` (6 + m, 6 + m) = ``modal_inertia``; ``b`` = ``modal_bias``; ``F_e`` the
    active modal force ``b - modal_forces``; ``eta``, ``xi``, ``xi_dot`` its symbols."""

    i: int
    sl: slice
    W: sm.Matrix
    w: sm.Matrix
    w_r: sm.Matrix
    g: sm.Matrix
    dM: sm.Matrix
    b: sm.Matrix
    F_e: sm.Matrix
    eta: tuple[sm.Symbol, ...]
    xi: tuple[sm.Symbol, ...]
    xi_dot: tuple[sm.Symbol, ...]


def kane_flex(
    model: Model,
    t: Any,
    eta: list,
    xi: list,
    xid: list,
    kin: dict[str, list],
    com: list[sm.Matrix],
    gravity: sm.Matrix,
) -> tuple[list[FlexBody], sm.Matrix, sm.Matrix, sm.Matrix]:
    """The flexible bodies' terms of Kane's equations (module docstring): the records
    and the additions to ``M`` (N, N), ``F_r`` (N, 1) and ``F*_r`` at zero acceleration
    (N, 1), ``N = n + nf``. ``t`` is the derivation's tape; ``kin`` holds its per-body
    ``R_N_B``, ``omega``, ``v``, ``alpha_r``, ``a_r``, ``Omega_u``, ``V_u``, ``V_s`` and
    ``Omega_xi``, ``V_xi`` (the partials over the modal speeds of the nodes the body
    rides on, ``Joint.inner_node``; empty lists without such joints)."""
    n, nf = model.n, model.nf
    N = n + nf
    M, Fr, F0 = sm.zeros(N, N), sm.zeros(N, 1), sm.zeros(N, 1)
    out = []
    for i, sl in model.modal_slices():
        nm = sl.stop - sl.start
        md = exact_modes(model.bodies[i].modes)
        R = kin["R_N_B"][i]
        Rt = R.T
        rc = t.vec(matmul(R, com[i]), f"rc{i}_")
        Om = kin["Omega_u"][i].row_join(sm.zeros(3, model.ns))
        V = kin["V_u"][i].row_join(kin["V_s"][i])
        if kin["Omega_xi"]:  # riding on a node: its modal columns
            Om, V = Om.row_join(kin["Omega_xi"][i]), V.row_join(kin["V_xi"][i])
        else:
            Om, V = Om.row_join(sm.zeros(3, nf)), V.row_join(sm.zeros(3, nf))
        W = sm.zeros(6 + nm, N)
        for c in range(N):
            if any(e != 0 for e in Om[:, c]):
                W[:3, c] = t.vec(matmul(Rt, Om[:, c]), f"W{i}_w{c}_")
            v0c = V[:, c] - cross(Om[:, c], rc)
            if any(e != 0 for e in v0c):
                W[3:6, c] = t.vec(matmul(Rt, v0c), f"W{i}_v{c}_")
        for p in range(nm):
            W[6 + p, n + sl.start + p] = 1
        omega, alpha = kin["omega"][i], kin["alpha_r"][i]
        w = t.vec(matmul(Rt, omega), f"wB{i}_")
        v0 = t.vec(matmul(Rt, kin["v"][i] - cross(omega, rc)), f"v0B{i}_")
        g = t.vec(matmul(Rt, gravity), f"gB{i}_")
        a0 = kin["a_r"][i] - cross(alpha, rc) - cross(omega, cross(omega, rc))
        w_r = sm.Matrix.vstack(
            t.vec(matmul(Rt, alpha), f"alpha_rB{i}_"), t.vec(matmul(Rt, a0), f"a0_rB{i}_"),
            sm.zeros(nm, 1),
        )  # fmt: skip
        e, x = (np.array(list(s[sl]), dtype=object) for s in (eta, xi))
        wa, ga = (np.array(list(s), dtype=object) for s in (w, g))
        dM_raw = modal_inertia(md, e)
        dM = sm.zeros(6 + nm, 6 + nm)
        for a in range(6 + nm):
            for c in range(a, 6 + nm):
                dM[a, c] = dM[c, a] = t.name(rational(dM_raw[a, c]), f"dM{i}_{a}_{c}_")
        b_raw = modal_bias(md, e, x, wa, ga)
        h_raw = modal_forces(md, e, x, wa, ga)
        b = sm.Matrix([t.name(x_, f"b{i}_{a}_") for a, x_ in enumerate(_column(b_raw))])
        F_e = sm.Matrix(
            [t.name(sm.expand(x_), f"Fe{i}_{a}_")
             for a, x_ in enumerate(_column(b_raw - h_raw))]
        )  # fmt: skip
        Wt = W.T
        M += matmul(Wt, matmul(dM, W))
        Fr += matmul(Wt, F_e)
        F0 -= matmul(Wt, matmul(dM, w_r) + b)
        out.append(
            FlexBody(i, sl, W, sm.Matrix.vstack(w, v0, sm.Matrix(list(x))), w_r, g, dM, b, F_e,
                     tuple(eta[sl]), tuple(xi[sl]), tuple(xid[sl]))
        )  # fmt: skip
    return out, M, Fr, F0


def lagrange_flex(
    model: Model,
    q: sm.Matrix,
    u: sm.Matrix,
    R_N_B: list[sm.Matrix],
    p_B: list[sm.Matrix],
    J_A: list[sm.Matrix],
    gravity: sm.Matrix,
    partial: Any,
) -> tuple[sm.Matrix, sm.Matrix, sm.Expr, sm.Matrix]:
    """The flexible bodies' additions to Lagrange's ``H``, ``C``, the potential energy
    ``U`` and the generalized forces ``Q`` (module docstring); ``partial`` is the
    derivation's memoized differentiation (:class:`kanedyn.symbolic.lagrange._Partials`)."""
    eta, _, _ = modal_symbols(model)
    nq = len(q)
    n = model.n
    H, C, Q = sm.zeros(nq, nq), sm.zeros(nq, 1), sm.zeros(nq, 1)
    T, U = sm.Integer(0), sm.Integer(0)
    for i, sl in model.modal_slices():
        nm = sl.stop - sl.start
        md = exact_modes(model.bodies[i].modes)
        Rt = R_N_B[i].T
        W = sm.zeros(6 + nm, nq)
        W[:3, :] = Rt * J_A[i]
        W[3:6, :] = Rt * partial.jacobian(p_B[i], list(q))
        for p in range(nm):
            W[6 + p, n + sl.start + p] = 1
        e = np.array(eta[sl], dtype=object)
        dM = sm.Matrix(modal_inertia(md, e).tolist()).applyfunc(rational)
        Hi = W.T * dM * W
        H += Hi
        w = W * u
        T += (w.T * dM * w)[0, 0] / 2
        g_B = Rt * gravity
        cf = _column(first_moment(md, e))
        U += rational((e @ md.stiffness @ e) / 2 - (g_B.T * cf)[0, 0])
        xi = sm.Matrix(list(u[n + sl.start : n + sl.stop]))
        Q[n + sl.start : n + sl.stop, 0] = -sm.Matrix(md.damping.tolist()) * xi
    p_mom = H * u  # ∂T_f/∂q̇
    for r in range(nq):
        C[r] = sm.Add(*[partial(p_mom[r], qk) * uk for qk, uk in zip(q, u, strict=True)])
        C[r] -= partial(T, q[r])
    return H, C, sm.sympify(U), Q
