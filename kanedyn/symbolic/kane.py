"""Kane's equations of a multibody tree in sympy: the symbolic twin of :mod:`kanedyn.dynamics.kane`.

The stages, equations and names are those of the numeric engine
(:mod:`kanedyn.dynamics.kinematics`, :mod:`kanedyn.dynamics.partials`, :mod:`kanedyn.dynamics.loads`,
:mod:`kanedyn.dynamics.kane`), evaluated on ``sympy`` expressions instead of arrays:

1. joint rotations ``R_Gi_Go``, ``Gamma``, ``Gds`` = Γ̇σ (gimbal angles or quaternion);
2. the chain Bi → Gi → slide → rotation → Go → Bo (42 Joints slides 10-17)::

       R_N_Bo = R_N_Bi R_Bi_Gi R_Gi_Go R_Go_Bo
       p_Bo   = p_Bi + R_N_Bi (inner_point + R_Bi_Gi Δ d) - R_N_Bo outer_point

3. angular velocities and velocities down the tree,

   .. math::

       \\omega_i = \\omega_{i(k)} + \\omega^{rel}_k, \\quad
       \\omega^{rel}_k = R_{N G_o} \\Gamma_k \\sigma_k, \\quad
       w_k = R_{N G_i} \\Delta_k s_k, \\quad
       v_i = \\omega_i \\times r_i + \\sum_{k \\in path(i)} (w_k - \\omega^{rel}_k \\times o_k);

4. partials read off the joint axes (Kane_NBody slides 18-22), never by differentiation,

   .. math::

       \\Omega_u[i][:, r] = R_{N G_o} \\Gamma_{k}[:, r], \\quad
       V_u[i][:, r] = \\big(R_{N G_o} \\Gamma_{k}[:, r]\\big) \\times (r_i - o_k), \\quad
       V_s[i][:, c] = R_{N G_i} \\Delta_k[:, c]

   for joints k on the path from body i to N (zero columns otherwise), and the
   remainders :math:`\\alpha_r`, :math:`a_r` of :mod:`kanedyn.dynamics.partials`;
5. Kane's equations (Kane_NBody slide 23),

   .. math::

       F_r &= \\sum_i V_i^T m_i g + Q, \\qquad
       F_r^* = -M \\dot\\nu + \\sum_i \\Omega_i^T(-I_i \\alpha_{r,i} - \\omega_i \\times H_i)
           - V_i^T m_i a_{r,i}, \\\\
       M &= \\sum_i \\Omega_i^T I_i \\Omega_i + m_i V_i^T V_i, \\qquad
       M \\dot\\nu = F_r + F_r^*\\big|_{\\dot\\nu = 0} = \\mathrm{forcing}

   with :math:`\\nu = [u | s]`, :math:`H_i = I_i \\omega_i + h_i` (embedded momentum) and
   ``Q`` the joint springs and dampers of :mod:`kanedyn.dynamics.loads`.

**Flexible bodies** (``kd.Body(..., modes=...)``): the modal coordinates ``η`` and
speeds ``ξ`` are generalized coordinates and speeds after the joints'
(``q = [q_joints | η]``, ``ν = [u | s | ξ]``, as in the numeric state), and ``M``,
``F_r``, ``F*_r`` gain each flexible body's terms over its own speeds
``(ω, v₀, ξ_i) = W_i ν`` (:mod:`kanedyn.symbolic.flex`; Kane_NBody_Flex slides 31-37):
``W_iᵀ ΔM_i W_i``, ``W_iᵀ F^e_i`` and ``-W_iᵀ(ΔM_i w_{r,i} + b_i)``, with the modal
terms of :mod:`kanedyn.spatial.modal` evaluated on sympy. A joint at a node of its
flexible inner body (``Joint.inner_node``) rides on the node frame: its chain turns
``R_Bi_Gi`` by the node's rotation ``C`` and moves its point by the node's
displacement, Gi's angular velocity and transport gain the node frame's
``V_node = S ξ`` and the remainders its bias ``V_i ×_m V_node + c``
(:func:`kanedyn.spatial.modal.node_subspace`); the outboard bodies' partials over
the modal speeds, ``Omega_xi`` and ``V_xi``, enter ``M``, ``F_r`` and ``F*_r`` like the
joints' (:mod:`kanedyn.symbolic.flex`). At a node of its flexible outer body
(``Joint.outer_node``) the outer body moves relative to Go by the node's motion, with
the opposite sign.

**Compact form.** Nothing is expanded. Every non-trivial intermediate (each entry of
each body's ``R_N_B``, each position, angular velocity, velocity, partial column,
remainder) is a named quantity: a ``sympy.Dummy`` with its defining expression, kept
in order in :attr:`CompactEquations.intermediates`. The mass matrix and forcing are
short expressions in those names, so the derivation grows polynomially with the number
of bodies (the mass matrix is a sum over bodies of column dot products, O(n³) terms for
a chain). :meth:`KaneEquations.lambdify` evaluates the intermediates as straight-line
code (replayed on the compiled engine's tape and written by its Python emitter:
:mod:`kanedyn.symbolic.replay`; or ``sympy.lambdify`` with them as the ``cse``), and
:meth:`KaneEquations.lambdify_stages` evaluates the kinematic stages the same way. The
explicit forms in the coordinates, speeds and
parameters (``.mass_matrix``, ``.forcing``, ``.Omega_u``, ...) are built by substituting
the intermediates back, on first access; they are for small systems (teaching views and
closed-form checks) and grow quickly with the depth of the tree.

**Limits.** Spherical joints use the unit-quaternion DCM (numeric callables normalize
the quaternion first, as the numeric engine does). Spherical-joint *springs* need the
rotation vector and the inverse right Jacobian, whose closed forms are 0/0 at zero
rotation; a model with a non-zero spherical stiffness raises :class:`~kanedyn.ModelError`
(spherical dampers, ``-C ω``, are supported). The model-level loads (gravity, the
joints' springs and dampers) always enter; applied loads (joint torques, body forces and
torques, possibly functions of time) are keywords of :func:`kane`
(:mod:`kanedyn.symbolic.loads`).

References
----------
E. Stoneking, "Kane's method for N-body dynamics" (Kane_NBody slides 18-23) and NASA 42
(``KaneNBodyEOM``, ``JointPartials``); refs/notes/42-kane-msd.md §3.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import scipy.linalg
import sympy as sm

from kanedyn import joints
from kanedyn.dynamics.rotors import rotor_specs, rotor_terms
from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.plan import node_joints, outer_node_joints, params_of
from kanedyn.spatial import charts
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.charts import euler_axes
from kanedyn.spatial.rotation import parse_sequence
from kanedyn.symbolic.arithmetic import SYMPY, exact, exact_rotation, matrix
from kanedyn.symbolic.flex import (
    FlexBody,
    exact_node_frame,
    exact_node_motion,
    kane_flex,
    modal_symbols,
)
from kanedyn.symbolic.intermediates import Intermediates, cross, dot, is_zero, matmul
from kanedyn.symbolic.loads import Loads, read_loads
from kanedyn.symbolic.reactions import joint_reactions
from kanedyn.symbolic.replay import python_function
from kanedyn.symbolic.stages import Stages, stages

__all__ = ["CompactEquations", "KaneEquations", "kane"]

_ZERO3 = sm.ImmutableMatrix.zeros(3, 1)
# Jupyter shows the explicit teaching table only for systems this small (in named
# intermediates); larger ones show a summary, and ``.table()`` builds it on request.
_TABLE_MAX_INTERMEDIATES = 250


# --------------------------------------------------------------------------- helpers
def _const(x: Any) -> sm.Expr:
    """A model number as sympy: exact (:func:`~kanedyn.symbolic.arithmetic.exact`, so
    that ``0.1`` is ``1/10`` and identities cancel), a sympy expression as it is."""
    if isinstance(x, sm.Basic):
        if x.is_Float:
            return exact(float(x))
        return x
    return exact(x)


def _cmat(arr: Any) -> sm.Matrix:
    return sm.Matrix(np.asarray(arr, dtype=object).tolist()).applyfunc(_const)


def _tex(text: str) -> str:
    """Escape a name for LaTeX math (``\\mathrm``/``\\mathtt``)."""
    return text.replace("_", "\\_")


def _slots(nb: int) -> list[Any]:
    """One (not yet computed) entry per body."""
    return [None] * nb


# --------------------------------------------------------------------------- records
@attrs.frozen(eq=False)
class CompactEquations:
    """Kane's equations as named intermediates plus short expressions in them.

    Attributes
    ----------
    intermediates : tuple of (sympy.Dummy, sympy.Expr)
        Definitions in order; each uses the coordinates, speeds, parameters and earlier
        intermediates only.
    mass_matrix : ImmutableMatrix, (n, n)
    forcing : ImmutableMatrix, (n, 1)
        ``mass_matrix * d/dt[u | s] = forcing``.
    Fr : ImmutableMatrix, (n, 1)
        Generalized active forces (gravity, springs, dampers).
    Fr_star : ImmutableMatrix, (n, 1)
        Generalized inertia forces, linear in the ``u_dot`` symbols.
    """

    intermediates: tuple[tuple[sm.Dummy, sm.Expr], ...]
    mass_matrix: sm.ImmutableMatrix
    forcing: sm.ImmutableMatrix
    Fr: sm.ImmutableMatrix
    Fr_star: sm.ImmutableMatrix

    def count_ops(self) -> int:
        """``sympy.count_ops`` of the intermediates the mass matrix and forcing use, plus
        the upper triangle of the mass matrix and the forcing (the cost of one evaluation)."""
        M, f = self.mass_matrix, self.forcing
        outputs = [M[r, c] for r in range(M.rows) for c in range(r, M.cols)] + list(f)
        tape = Intermediates()
        tape.defs = list(self.intermediates)
        tape.index = {s: i for i, (s, _) in enumerate(self.intermediates)}
        used = tape.needed(outputs)
        return int(sum(sm.count_ops(e) for _, e in used) + sum(sm.count_ops(e) for e in outputs))


@attrs.frozen(eq=False)
class _Derivation:
    """Everything :func:`kane` builds, in tape names (lists are per body / per speed)."""

    tape: Intermediates
    R_N_B: list[sm.Matrix]
    r: list[sm.Matrix]
    o: list[sm.Matrix]
    omega: list[sm.Matrix]
    v: list[sm.Matrix]
    Omega_u: list[sm.Matrix]
    V_u: list[sm.Matrix]
    V_s: list[sm.Matrix]
    alpha_r: list[sm.Matrix]
    a_r: list[sm.Matrix]
    M: sm.Matrix
    Fr: sm.Matrix
    Fr_star0: sm.Matrix
    R_N_Gi: list[sm.Matrix]  # per joint
    R_N_Go: list[sm.Matrix]
    Gamma: list[sm.Matrix]  # Go axes
    I_N: list[sm.Matrix]  # per body, about the mass centre, N axes
    H: list[sm.Matrix]  # per body: angular momentum about the mass centre, I_N omega + h
    T_star0: list[sm.Matrix]  # -(I_N alpha_r + omega x H): T*_i at zero u_dot
    F_star0: list[sm.Matrix]  # -m a_r: F*_i at zero u_dot
    F_app: list[sm.Matrix]  # resultant applied force (at the mass centre) and torque
    T_app: list[sm.Matrix]
    Q: list[sm.Expr]  # per speed: joint springs, dampers and actuators (part of Fr)
    flex: list[FlexBody] = attrs.field(factory=list)  # the flexible bodies' modal terms
    # per body (3, nf): partials over the modal speeds of the nodes it rides on (empty
    # without joints at nodes)
    Omega_xi: list[sm.Matrix] = attrs.field(factory=list)
    V_xi: list[sm.Matrix] = attrs.field(factory=list)


# --------------------------------------------------------------------------- symbols
def _symbols(model: Model) -> tuple[list, list, list]:
    """Coordinates, speeds [u | s] and their rates, named after the joints; the modal
    coordinates, speeds and rates of flexible bodies after them
    (:func:`kanedyn.symbolic.flex.modal_symbols`)."""
    lay = model.layout
    q: list[Any] = [None] * model.nq
    u: list[Any] = [None] * model.n
    ud: list[Any] = [None] * model.n
    for k, j in enumerate(model.joints):
        nr = j.n_rot_coordinates
        qi, ui = lay.q_index[k], lay.u_index[k]
        rot_q = (
            [f"q_{j.name}_{c}" for c in "xyzw"]
            if j.rot_type == "spherical"
            else [f"q_{j.name}_{c}" for c in range(j.rot_dof)]
        )
        names_q = rot_q + [f"d_{j.name}_{c}" for c in range(j.trn_dof)]
        names_u = [f"u_{j.name}_{c}" for c in range(j.rot_dof)]
        names_u += [f"s_{j.name}_{c}" for c in range(j.trn_dof)]
        for idx, name in zip(qi[:nr].tolist() + qi[nr:].tolist(), names_q, strict=True):
            q[idx] = sm.Symbol(name, real=True)
        for idx, name in zip(ui.tolist(), names_u, strict=True):
            u[idx] = sm.Symbol(name, real=True)
            ud[idx] = sm.Symbol(name.replace("_", "dot_", 1), real=True)
    eta, xi, xid = modal_symbols(model)  # flexible bodies: [q | η], [u | s | ξ]
    return q + eta, u + xi, ud + xid


def _parameters(model: Model, loads: Loads) -> tuple[sm.Basic, ...]:
    """The model's symbols, the loads' constants and inputs, sorted by name."""
    pa = params_of(model)
    found: set[sm.Basic] = set(loads.constants) | set(loads.inputs)
    arrays = [pa.gravity, pa.stiffness, pa.damping, pa.mass, pa.inertia, pa.com]
    arrays += [pa.stiffness_poly, pa.damping_poly]
    arrays += [pa.h_embedded, pa.inner_point, pa.outer_point, pa.R_Bi_Gi, pa.R_Go_Bo]
    arrays += [x for lp in model.loops for x in (lp.inner_point, lp.outer_point)]
    for arr in arrays:
        for x in np.asarray(arr, dtype=object).ravel():
            if isinstance(x, sm.Basic):
                found |= x.free_symbols
    return tuple(sorted(found, key=str))


# --------------------------------------------------------------------------- derivation
def _derive(model: Model, q: list, u: list, loads: Loads) -> _Derivation:
    """Stages 1-4 of the numeric engine on sympy expressions (see the module docstring)."""
    lay, pa = model.layout, params_of(model)
    nb, nu, ns, n = model.nb, model.nu, model.ns, model.n
    eta, xi = q[model.nq :], u[n:]  # flexible bodies' modal coordinates and speeds
    q, u = q[: model.nq], u[:n]
    t = Intermediates()
    R_N_B, p, r, o, omega, v, v_o = (_slots(nb) for _ in range(7))
    R_N_Gi, R_N_Go, Gamma, omega_rel, w = (_slots(nb) for _ in range(5))
    transport, alpha_r, C, a_r = (_slots(nb) for _ in range(4))
    nodes = {k: (i, nd) for k, i, nd in node_joints(model)}  # joints at nodes (inner side)
    outer_nodes = dict(outer_node_joints(model))  # joint k: node of its outer body k
    # (joint k, flexible body, sign, S (6, m) named): the node frames' motion, + at an
    # inner node, - at an outer node (the outer body moves by V_Go - V_on)
    S_node: list[tuple[int, int, int, sm.Matrix]] = []

    def named_S(S_: sm.Matrix, label: str) -> sm.Matrix:
        return sm.Matrix.hstack(*[
            sm.Matrix.vstack(t.vec(S_[:3, c], f"{label}w{c}_"), t.vec(S_[3:, c], f"{label}v{c}_"))
            for c in range(S_.cols)
        ])  # fmt: skip

    for k, j in enumerate(model.joints):
        qi, ui = lay.q_index[k], lay.u_index[k]
        nr = j.n_rot_coordinates
        # stage 1: joint rotation R_Gi_Go, partial Gamma and Gamma_dot sigma (Go axes)
        if j.rot_type == "spherical":  # a unit quaternion: R_Gi_Go is its quadratic form
            R_Gi_Go = matrix(charts.quat_dcm_form(np.array([q[i] for i in qi[:4]], dtype=object)))
            G = sm.eye(3)
            Gds = sm.zeros(3, 1)
            sigma = sm.Matrix([u[i] for i in ui[:3]])
        else:
            pad = [0] * (3 - j.rot_dof)
            theta = np.array([q[i] for i in qi[: j.rot_dof]] + pad, dtype=object)
            sig = [u[i] for i in ui[: j.rot_dof]] + pad
            axes = euler_axes(SYMPY, np.eye(3)[[a - 1 for a in parse_sequence(j.rot_seq)]])
            R_, GammaT, _, Gds_ = joints.gimbal(
                SYMPY, axes, theta, np.array(sig, dtype=object), j.rot_dof
            )
            R_Gi_Go, G, Gds = matrix(R_), matrix(GammaT.T), matrix(Gds_)
            sigma = sm.Matrix(sig)
        R_Gi_Go = t.mat(R_Gi_Go, f"R_Gi_Go{k}_")
        Gamma[k] = t.mat(G, f"Gamma{k}_")
        Gds = t.vec(Gds, f"Gds{k}_")
        Delta = _cmat(lay.Delta[k])
        d = sm.Matrix([q[i] for i in qi[nr:]] + [0] * (3 - j.trn_dof))
        s = sm.Matrix([u[i] for i in ui[j.rot_dof :]] + [0] * (3 - j.trn_dof))

        # stage 2: the chain Bi -> Gi -> slide -> rotation -> Go -> Bo
        R_Bi_Gi, R_Go_Bo = (matrix(exact_rotation(R)) for R in (pa.R_Bi_Gi[k], pa.R_Go_Bo[k]))
        Gi, ip = ("", R_Bi_Gi), ("", _cmat(pa.inner_point[k]))
        node = nodes.get(k)
        if node is not None:  # Gi rides on the node frame (C, d) of the inner body
            i_n, nd = node
            nfr = exact_node_frame(model, i_n, nd, eta, xi)
            C_n = t.mat(nfr.C, f"C_n{k}_")
            Gi = (f"R_Bi_Gi{k}_", t.product(f"R_Bi_Gi{k}_", [(f"C_n{k}_", C_n), Gi]))
            ip = (f"ip{k}_", t.vec(nfr.d + matmul(C_n, ip[1] - nfr.r_n), f"ip{k}_"))
        R_Bi_Gi = Gi[1]
        Bo, op = ("", R_Go_Bo), ("", _cmat(pa.outer_point[k]))
        if k in outer_nodes:  # Go is fixed in the node frame (C, d) of the outer body k
            nfo = exact_node_frame(model, k, outer_nodes[k], eta, xi)
            C_o = t.mat(nfo.C, f"C_o{k}_")
            Bo = (f"R_Go_Bo{k}_", t.product(f"R_Go_Bo{k}_", [Bo, (f"C_o{k}_^T", C_o.T)]))
            op = (f"op{k}_", t.vec(nfo.d + matmul(C_o, op[1] - nfo.r_n), f"op{k}_"))
        R_Go_Bo = Bo[1]
        R_Bi_Go = t.product(f"R_Bi_Go{k}_", [Gi, (f"R_Gi_Go{k}_", R_Gi_Go)])
        i_in = int(lay.parent[k])
        if i_in < 0:
            R_N_Bi, p_Bi = sm.eye(3), sm.zeros(3, 1)
            omega_in, T_in, alpha_in, C_in = (sm.zeros(3, 1) for _ in range(4))
        else:
            R_N_Bi, p_Bi = R_N_B[i_in], p[i_in]
            omega_in, T_in, alpha_in, C_in = omega[i_in], transport[i_in], alpha_r[i_in], C[i_in]
        Bi = f"R_N_B{i_in}_" if i_in >= 0 else ""
        R_N_B[k] = t.product(f"R_N_B{k}_", [(Bi, R_N_Bi), (f"R_Bi_Go{k}_", R_Bi_Go), Bo])
        R_N_Gi[k] = t.product(f"R_N_Gi{k}_", [(Bi, R_N_Bi), Gi])
        # p_Bo = p_Bi + R_N_Bi inner_point + R_N_Gi Δ d - R_N_Bo outer_point
        p[k] = t.combine(
            f"p{k}_",
            [
                (1, "", (f"p{i_in}_", p_Bi)),
                (1, "@", (Bi, R_N_Bi), ip),
                (1, "@", (f"R_N_Gi{k}_", R_N_Gi[k]), ("", Delta), ("", d)),
                (-1, "@", (f"R_N_B{k}_", R_N_B[k]), op),
            ],
        )
        R_N_Go[k] = t.product(f"R_N_Go{k}_", [(Bi, R_N_Bi), (f"R_Bi_Go{k}_", R_Bi_Go)])
        Pk, R = (f"p{k}_", p[k]), (f"R_N_B{k}_", R_N_B[k])
        o[k] = t.combine(f"o{k}_", [(1, "", Pk), (1, "@", R, op)])
        r[k] = t.combine(f"r{k}_", [(1, "", Pk), (1, "@", R, ("", _cmat(pa.com[k])))])

        # stage 3: velocities; omega_rel = R_N_Go Gamma sigma, w = R_N_Gi Delta s
        omega_rel[k] = t.combine(
            f"omega_rel{k}_",
            [(1, "@", (f"R_N_Go{k}_", R_N_Go[k]), (f"Gamma{k}_", Gamma[k]), ("", sigma))],
        )
        w[k] = t.combine(f"w{k}_", [(1, "@", (f"R_N_Gi{k}_", R_N_Gi[k]), ("", Delta), ("", s))])
        # operands by label (the inner body's, zero for a root)
        Wi = (f"omega{i_in}_", omega_in)
        Ti = (f"T{i_in}_", T_in)
        Ai = (f"alpha_r{i_in}_", alpha_in)
        Ci = (f"C{i_in}_", C_in)
        Wr, Wk = (f"omega_rel{k}_", omega_rel[k]), (f"w{k}_", w[k])
        Ok, Rk = (f"o{k}_", o[k]), (f"r{k}_", r[k])
        node_terms: list[tuple[Any, ...]] = []  # the node frame's bias: alpha_r, C
        node_lin: list[tuple[Any, ...]] = []
        Wg, Tg = Wi, Ti  # Gi's angular velocity and transport (the inner body's)
        if node is not None:  # V_node = S ξ; bias V_i x_m V_node + c (node_subspace)
            S_n, c_ = exact_node_motion(nfr, R_N_Bi, p_Bi)
            S_n = named_S(S_n, f"S{k}_")
            S_node.append((k, i_n, 1, S_n))
            Wn = (f"omega_node{k}_", t.vec(matmul(S_n[:3, :], nfr.xi), f"omega_node{k}_"))
            Vn = (f"v_node{k}_", t.vec(matmul(S_n[3:, :], nfr.xi), f"v_node{k}_"))
            cw = (f"alpha_q{k}_", t.vec(c_[:3, :], f"alpha_q{k}_"))
            cv = (f"a_q{k}_", t.vec(c_[3:, :], f"a_q{k}_"))
            Wg = (f"omega_Gi{k}_", t.combine(f"omega_Gi{k}_", [(1, "", Wi), (1, "", Wn)]))
            Tg = (f"T_Gi{k}_", t.combine(f"T_Gi{k}_", [(1, "", Ti), (1, "", Vn)]))
            node_terms = [(1, "", (f"alpha_node{k}_", t.combine(
                f"alpha_node{k}_", [(1, "x", Wi, Wn), (1, "", cw)])))]  # fmt: skip
            node_lin = [(1, "", (f"a_node{k}_", t.combine(
                f"a_node{k}_", [(1, "x", Wi, Vn), (1, "x", Ti, Wn), (1, "", cv)])))]  # fmt: skip
        if k not in outer_nodes:
            omega[k] = t.combine(f"omega{k}_", [(1, "", Wg), (1, "", Wr)])
            W = Wgo = (f"omega{k}_", omega[k])
            transport[k] = t.combine(f"T{k}_", [(1, "", Tg), (1, "", Wk), (-1, "x", Wr, Ok)])
            Tk = Tgo = (f"T{k}_", transport[k])
        else:  # the outer body moves by V_Go - V_on, V_on = S_on ξ_k (node_subspace)
            Wgo = (f"omega_Go{k}_", t.combine(f"omega_Go{k}_", [(1, "", Wg), (1, "", Wr)]))
            Tgo = (f"T_Go{k}_", t.combine(
                f"T_Go{k}_", [(1, "", Tg), (1, "", Wk), (-1, "x", Wr, Ok)]))  # fmt: skip
            S_o, c_o = exact_node_motion(nfo, R_N_B[k], p[k])
            S_o = named_S(S_o, f"So{k}_")
            S_node.append((k, k, -1, S_o))
            Won = (f"omega_on{k}_", t.vec(matmul(S_o[:3, :], nfo.xi), f"omega_on{k}_"))
            Von = (f"v_on{k}_", t.vec(matmul(S_o[3:, :], nfo.xi), f"v_on{k}_"))
            omega[k] = t.combine(f"omega{k}_", [(1, "", Wgo), (-1, "", Won)])
            W = (f"omega{k}_", omega[k])
            transport[k] = t.combine(f"T{k}_", [(1, "", Tgo), (-1, "", Von)])
            Tk = (f"T{k}_", transport[k])
            # its bias: -(V_k x_m V_on + c_on)
            node_terms = [*node_terms, (-1, "", (f"alpha_on{k}_", t.combine(
                f"alpha_on{k}_", [(1, "x", W, Won), (1, "", (f"alpha_qo{k}_", t.vec(
                    c_o[:3, :], f"alpha_qo{k}_")))])))]  # fmt: skip
            node_out = [(-1, "", (f"a_on{k}_", t.combine(
                f"a_on{k}_", [(1, "x", W, Von), (1, "x", Tk, Won), (1, "", (f"a_qo{k}_", t.vec(
                    c_o[3:, :], f"a_qo{k}_")))])))]  # fmt: skip
        v[k] = t.combine(f"v{k}_", [(1, "x", W, Rk), (1, "", Tk)])
        # the joint point's velocity, moving with Go
        v_o[k] = t.combine(f"v_o{k}_", [(1, "x", Wgo, Ok), (1, "", Tgo)])

        # remainders: alpha_k = omega_Go x omega_rel + R_N_Go Gds, summed down the path
        alpha_k = t.combine(
            f"alpha_k{k}_",
            [(1, "x", Wgo, Wr), (1, "@", (f"R_N_Go{k}_", R_N_Go[k]), (f"Gds{k}_", Gds))],
        )
        Ak = (f"alpha_k{k}_", alpha_k)
        alpha_r[k] = t.combine(f"alpha_r{k}_", [(1, "", Ai), *node_terms, (1, "", Ak)])
        C[k] = t.combine(
            f"C{k}_",
            [(1, "", Ci), *node_lin, (-1, "x", Ak, Ok), (-1, "x", Wr, (f"v_o{k}_", v_o[k])),
             (1, "x", Wg, Wk), *(node_out if k in outer_nodes else ())],
        )  # fmt: skip
        a_r[k] = t.combine(
            f"a_r{k}_",
            [
                (1, "x", (f"alpha_r{k}_", alpha_r[k]), Rk),
                (1, "x", W, (f"v{k}_", v[k])),
                (1, "", (f"C{k}_", C[k])),
            ],
        )

    # joint axes in N: Hw[r] = R_N_Go Gamma[:, col], Hs[c] = R_N_Gi Delta[:, col]
    Hw = [
        t.vec(matmul(R_N_Go[k], Gamma[k][:, c]), f"Hw{rr}_")
        for rr, (k, c) in enumerate(zip(lay.u_joint.tolist(), lay.u_col.tolist(), strict=True))
    ]
    Hs = [
        matmul(R_N_Gi[k], _cmat(lay.Delta[k])[:, c])
        for k, c in zip(lay.s_joint.tolist(), lay.s_col.tolist(), strict=True)
    ]
    P = lay.path
    Omega_u, V_u, V_s = [], [], []
    for i in range(nb):
        Om = sm.zeros(3, nu)
        Vu = sm.zeros(3, nu)
        Vs = sm.zeros(3, ns)
        for rr, k in enumerate(lay.u_joint.tolist()):
            if P[i, k]:
                Om[:, rr] = Hw[rr]
                Vu[:, rr] = t.vec(cross(Hw[rr], r[i] - o[k]), f"V_u{i}_{rr}_")
        for c, k in enumerate(lay.s_joint.tolist()):
            if P[i, k]:
                Vs[:, c] = Hs[c]
        Omega_u.append(Om)
        V_u.append(Vu)
        V_s.append(Vs)
    # the modal speeds of the nodes a body rides on: Omega_xi = Σ S_w, V_xi = S_v + S_w x r
    Omega_xi: list[sm.Matrix] = []
    V_xi: list[sm.Matrix] = []
    if S_node:
        slices = dict(model.modal_slices())
        for i in range(nb):
            Ox, Vx = sm.zeros(3, model.nf), sm.zeros(3, model.nf)
            for k, i_n, sign, S_n in S_node:
                if P[i, k]:
                    sl = slices[i_n]
                    Ox[:, sl] += sign * S_n[:3, :]
                    Vx[:, sl] += sign * S_n[3:, :]
            for c in range(model.nf):
                if not is_zero(Ox[:, c]):
                    Ox[:, c] = t.vec(Ox[:, c], f"Omega_xi{i}_{c}_")
                    Vx[:, c] += cross(Ox[:, c], r[i])
                if not is_zero(Vx[:, c]):
                    Vx[:, c] = t.vec(Vx[:, c], f"V_xi{i}_{c}_")
            Omega_xi.append(Ox)
            V_xi.append(Vx)

    # stage 4: Kane's equations, M = sum Omega^T I Omega + m V^T V, and the bias terms
    N = n + model.nf  # all speeds [u | s | ξ]
    M_terms: dict[tuple[int, int], list] = {}
    Fr_terms: list[list] = [[] for _ in range(N)]
    F0_terms: list[list] = [[] for _ in range(N)]
    Q = [a + b for a, b in zip(_joint_forces(model, q, u), loads.Q_vector(n), strict=True)]
    F_app, T_app = _applied(model, loads, R_N_B, t, r)
    I_Ns, H_N, T_star0, F_star0 = _slots(nb), _slots(nb), _slots(nb), _slots(nb)
    for i in range(nb):
        R = R_N_B[i]
        m = _const(pa.mass[i])
        I_B = sm.ImmutableMatrix(_cmat(pa.inertia[i]))
        I_N = t.product(
            f"I_N{i}_", [(f"R_N_B{i}_", R), ("", I_B), (f"R_N_B{i}_^T", R.T)], symmetric=True
        )
        H = t.vec(matmul(I_N, omega[i]) + matmul(R, _cmat(pa.h_embedded[i])), f"H{i}_")
        Tb = t.vec(-matmul(I_N, alpha_r[i]) - cross(omega[i], H), f"T_star{i}_")
        Fb = t.vec(-m * a_r[i], f"F_star{i}_")
        I_Ns[i], H_N[i], T_star0[i], F_star0[i] = I_N, H, Tb, Fb
        F, T = F_app[i], T_app[i]
        cols = []  # (speed, Omega column, V column, I Omega column, m V column)
        for rr in range(nu):
            if not is_zero(Omega_u[i][:, rr]):
                IOm = t.vec(matmul(I_N, Omega_u[i][:, rr]), f"IOm{i}_{rr}_")
                mV = t.vec(m * V_u[i][:, rr], f"mV{i}_{rr}_")
                cols.append((rr, Omega_u[i][:, rr], V_u[i][:, rr], IOm, mV))
        for c in range(ns):
            if not is_zero(V_s[i][:, c]):
                mV = t.vec(m * V_s[i][:, c], f"mV{i}_{nu + c}_")
                cols.append((nu + c, _ZERO3, V_s[i][:, c], _ZERO3, mV))
        for c in range(model.nf if Omega_xi else 0):  # riding on nodes: the ξ columns
            Om_c, V_c = Omega_xi[i][:, c], V_xi[i][:, c]
            if is_zero(Om_c) and is_zero(V_c):
                continue
            IOm = t.vec(matmul(I_N, Om_c), f"IOm{i}_{n + c}_") if not is_zero(Om_c) else _ZERO3
            mV = t.vec(m * V_c, f"mV{i}_{n + c}_")
            cols.append((n + c, Om_c, V_c, IOm, mV))
        for a, (ra, Om_a, V_a, _, _) in enumerate(cols):
            for rb, _, _, IOm_b, mV_b in cols[a:]:
                M_terms.setdefault((ra, rb), []).extend((dot(Om_a, IOm_b), dot(V_a, mV_b)))
            Fr_terms[ra].extend((dot(V_a, F), dot(Om_a, T)))
            F0_terms[ra].extend((dot(Om_a, Tb), dot(V_a, Fb)))
    M = sm.zeros(N, N)
    for (ra, rb), terms in M_terms.items():
        lo, hi = min(ra, rb), max(ra, rb)
        M[lo, hi] = M[hi, lo] = sm.Add(*terms)
    Q = Q + [sm.Integer(0)] * model.nf  # no joint force on the modal speeds
    Fr = sm.Matrix([sm.Add(*Fr_terms[rr]) + Q[rr] for rr in range(N)])
    Fr_star0 = sm.Matrix([sm.Add(*F0_terms[rr]) for rr in range(N)])
    if S_node and rotor_specs(model):
        raise ModelError(
            "kd.symbolic.kane: geared rotors (Joint.rotor) in a model with joints at nodes "
            "of flexible bodies (Joint.inner_node, outer_node) are not modelled yet"
        )
    for spec in rotor_specs(model):  # geared rotors: the same terms as the dense engine
        carrier: tuple[Any, ...] = (None, None, None, None)
        if spec.c >= 0:
            c = spec.c
            Om = np.array(Omega_u[c].row_join(sm.zeros(3, ns)).tolist(), dtype=object)
            carrier = tuple(
                np.array(x.tolist(), dtype=object) for x in (R_N_B[c], omega[c], alpha_r[c])
            )
            carrier = (carrier[0], carrier[1][:, 0], Om, carrier[2][:, 0])
        M_R, f_R = rotor_terms(spec, n, u[spec.r], *carrier)
        M[:n, :n] = M[:n, :n] + sm.Matrix(M_R.tolist())
        Fr_star0[:n, 0] = Fr_star0[:n, 0] + sm.Matrix([f_R[i] for i in range(n)])
    flex: list[FlexBody] = []
    if model.nf:  # the modal terms (kanedyn.symbolic.flex), over [u | s | ξ]
        kin = {"R_N_B": R_N_B, "omega": omega, "v": v, "alpha_r": alpha_r, "a_r": a_r,
               "Omega_u": Omega_u, "V_u": V_u, "V_s": V_s, "Omega_xi": Omega_xi,
               "V_xi": V_xi}  # fmt: skip
        com = [_cmat(pa.com[i]) for i in range(nb)]
        xid = modal_symbols(model)[2]
        flex, M_f, Fr_f, F0_f = kane_flex(model, t, eta, xi, xid, kin, com, _cmat(pa.gravity))
        M, Fr, Fr_star0 = M + M_f, Fr + Fr_f, Fr_star0 + F0_f
    return _Derivation(
        tape=t,
        R_N_B=R_N_B,
        r=r,
        o=o,
        omega=omega,
        v=v,
        Omega_u=Omega_u,
        V_u=V_u,
        V_s=V_s,
        alpha_r=alpha_r,
        a_r=a_r,
        M=M,
        Fr=Fr,
        Fr_star0=Fr_star0,
        R_N_Gi=R_N_Gi,
        R_N_Go=R_N_Go,
        Gamma=Gamma,
        I_N=I_Ns,
        H=H_N,
        T_star0=T_star0,
        F_star0=F_star0,
        F_app=F_app,
        T_app=T_app,
        Q=Q,
        flex=flex,
        Omega_xi=Omega_xi,
        V_xi=V_xi,
    )


def _applied(
    model: Model, loads: Loads, R_N_B: list, t: Intermediates, r: list
) -> tuple[list[sm.Matrix], list[sm.Matrix]]:
    """Resultant force (at the mass centre) and torque on each body, N components: gravity
    (uniform ``m_i g``, or a central field's force and gravity-gradient torque,
    :func:`kanedyn.spatial.plucker.central_gravity`, at the mass centres ``r``), the body
    forces, and the torques plus ``(R_N_B (p - c_i)) × F`` of each force applied at a
    point ``p`` (as :func:`kanedyn.dynamics.loads.applied_loads`)."""
    pa = params_of(model)
    if model.central_gravity is not None:
        F, T = [], []
        for i in range(model.nb):
            Fi, Ti = sp.central_gravity(*central_args(model, i, R_N_B[i], r[i]))
            F.append(sm.Matrix(Fi))
            T.append(sm.Matrix(Ti))
    else:
        g = _cmat(pa.gravity)
        F = [_const(pa.mass[i]) * g for i in range(model.nb)]
        T = [sm.zeros(3, 1) for _ in range(model.nb)]
    for f in loads.forces:
        F[f.body] = F[f.body] + f.F
        if f.point is not None:
            arm = t.vec(matmul(R_N_B[f.body], f.point - _cmat(pa.com[f.body])), f"arm{f.body}_")
            T[f.body] = T[f.body] + cross(arm, f.F)
    for i, torque in loads.torques:
        T[i] = T[i] + torque
    return F, T


def central_args(model: Model, i: int, R_N_B: sm.Matrix, r: sm.Matrix) -> tuple[Any, ...]:
    """The arguments of :func:`kanedyn.spatial.plucker.central_gravity` (and of its
    potential) for body ``i`` with attitude ``R_N_B`` and mass centre ``r`` (N), in sympy:
    the field's numbers exact, the inertia in N axes, the mass centre from the centre."""
    pa = params_of(model)
    I_N = R_N_B * _cmat(pa.inertia[i]) * R_N_B.T
    rel = [r[a] - _const(pa.center[a]) for a in range(3)]
    field = [_const(np.asarray(getattr(pa, f)).item()) for f in ("mu", "J2", "radius")]
    return (SYMPY, *field, _const(pa.mass[i]), I_N.tolist(), rel, [0, 0, 1])


def _joint_forces(model: Model, q: list, u: list) -> list:
    """Springs and dampers per speed (:func:`kanedyn.joints.spring_damper`): ``Q = -(k q
    + k₂ q² + k₃ q³) - (c u + c₂ u|u| + c₃ u³)`` (gimbal angles and slides), the damper
    alone on spherical joints."""
    lay, pa = model.layout, params_of(model)
    for k in lay.spherical.tolist():
        j = model.joints[k]
        stiff = [_const(x) for x in (*j.stiffness[:3], *j.stiffness_poly[:3].ravel())]
        if any(x != 0 for x in stiff):
            raise ModelError(
                f"joint {model.joints[k].name!r}: spherical-joint springs are not supported by "
                "kanedyn.symbolic.kane (the rotation-vector spring force is 0/0 at zero "
                "rotation in closed form); set its rotational stiffness to 0, or use the "
                "numeric engine"
            )
    stiffness, damping = (np.array([_const(x) for x in a], dtype=object)
                          for a in (pa.stiffness, pa.damping))  # fmt: skip
    kp = cp = None
    if pa.has_poly:
        kp, cp = (np.array([[_const(x) for x in row] for row in a], dtype=object).reshape(-1, 2)
                  for a in (pa.stiffness_poly, pa.damping_poly))  # fmt: skip
    obj = np.array(q, dtype=object), np.array(u, dtype=object)
    return joints.spring_damper(lay, stiffness, damping, *obj, kp, cp, ar=SYMPY).tolist()


def _kinematic_equations(model: Model, q: list, u: list) -> sm.Matrix:
    """q̇ (:func:`kanedyn.joints.qdot`): angle and slide rates are speeds; quaternions
    ``q̇ = ½ q ⊗ [ω, 0]``; modal coordinates ``η̇ = ξ``."""
    nq, n = model.nq, model.n
    qd = joints.qdot(model.layout, np.array(q[:nq], dtype=object), np.array(u[:n], dtype=object))
    return sm.ImmutableMatrix(qd.tolist() + list(u[n:]))  # η̇ = ξ


# --------------------------------------------------------------------------- result
class KaneEquations:
    """Kane's equations of a kanedyn Model in sympy (built by :func:`kane`).

    All vectors are in N components, with the numeric engine's names and shapes.

    Attributes
    ----------
    model : Model
    q : ImmutableMatrix, (nq, 1)
        Coordinates in the model's order: ``q_<joint>_<i>`` (gimbal angles),
        ``q_<joint>_x .. q_<joint>_w`` (spherical quaternion, scalar last),
        ``d_<joint>_<i>`` (slides); rotational first; then the flexible bodies' modal
        coordinates ``eta_<body>_<k>`` (``model.nq_total`` in all).
    u : ImmutableMatrix, (n, 1)
        Speeds ``[u | s]``: ``u_<joint>_<i>`` (gimbal rates; spherical ω in Go axes),
        ``s_<joint>_<i>`` (slide rates); then the modal speeds ``xi_<body>_<k>``
        (``model.n_total`` in all).
    u_dot : ImmutableMatrix, (n, 1)
        Their rates, ``udot_<joint>_<i>``, ``sdot_<joint>_<i>``, ``xidot_<body>_<k>``.
    parameters : tuple of Symbol
        The model's free symbols (masses, lengths, g, ...) and those of the loads,
        including the inputs, sorted by name (the order of ``p`` in :meth:`lambdify`).
    inputs : tuple
        The functions of time in the loads (``T1(t)``), sorted by name.
    kinematic_equations : ImmutableMatrix, (nq, 1)
        q̇ as functions of q and the speeds.
    compact : CompactEquations
        The mass matrix, forcing, Fr and Fr* as short expressions in named
        intermediates (what :meth:`lambdify` evaluates).
    simplify_report : str
        What ``simplify=True`` did (empty when not asked).
    masses : tuple
        The body masses as the equations use them (exact).

    The explicit forms below are in q, the speeds and the parameters; they are built
    from the compact form on first access (and simplified if asked):
    ``mass_matrix`` (n, n), ``forcing`` (n, 1), ``Fr`` (n, 1), ``Fr_star`` (n, 1, in
    ``u_dot``), and per body i (lists of length nb): ``Omega_u[i]`` (3, nu), ``V_u[i]``
    (3, nu), ``V_s[i]`` (3, ns), ``alpha_r[i]``, ``a_r[i]``, ``R_N_B[i]``, ``r[i]``,
    ``omega[i]``, ``v[i]``. :meth:`explicit` converts any compact expression.

    Numeric evaluation: :meth:`lambdify` (M and forcing), :meth:`lambdify_rhs` and
    :meth:`rhs` (accelerations), :meth:`lambdify_stages` (kinematics and partials);
    teaching view: :meth:`table`.
    """

    def __init__(
        self,
        model: Model,
        q: list,
        u: list,
        u_dot: list,
        der: _Derivation,
        kinematic_equations: sm.ImmutableMatrix,
        loads: Loads,
        reactions: dict[str, tuple[sm.Matrix, sm.Matrix]] | None = None,
    ) -> None:
        self.model = model
        self.q = sm.ImmutableMatrix(q)
        self.u = sm.ImmutableMatrix(u)
        self.u_dot = sm.ImmutableMatrix(u_dot)
        self.parameters = _parameters(model, loads)
        self.inputs = loads.inputs
        self.masses = tuple(_const(x) for x in params_of(model).mass)
        self.compact_reactions = dict(reactions or {})
        self.kinematic_equations = kinematic_equations
        self._der = der
        M = sm.ImmutableMatrix(der.M)
        Fr = sm.ImmutableMatrix(der.Fr)
        n = len(u)
        Fr_star = sm.ImmutableMatrix(
            [
                der.Fr_star0[a]
                - sm.Add(*[der.M[a, b] * u_dot[b] for b in range(n) if der.M[a, b] != 0])
                for a in range(n)
            ]
        )
        self.compact = CompactEquations(
            intermediates=tuple(der.tape.defs),
            mass_matrix=M,
            forcing=sm.ImmutableMatrix(der.Fr + der.Fr_star0),
            Fr=Fr,
            Fr_star=Fr_star,
        )
        self.simplify_report = ""
        self._values: dict[sm.Dummy, sm.Expr] = {}
        self._sizes: dict[sm.Basic, int] = {}

    def __repr__(self) -> str:
        nf = f", nf={self.model.nf}" if self.model.nf else ""  # modal coordinates
        return (
            f"KaneEquations(bodies={self.model.nb}, nq={self.model.nq}, nu={self.model.nu}, "
            f"ns={self.model.ns}{nf}, intermediates={len(self.compact.intermediates)})"
        )

    # -- explicit forms ---------------------------------------------------------
    def explicit(self, expr: Any) -> Any:
        """``expr`` (an expression or Matrix in the named intermediates) in q, u and the
        parameters: the intermediates are substituted back, in definition order."""
        tape = self._der.tape
        items = list(expr) if isinstance(expr, sm.MatrixBase) else [expr]
        for s, e in tape.needed(items):
            if s not in self._values:
                self._values[s] = e.xreplace(self._values)
        if isinstance(expr, sm.MatrixBase):
            return sm.ImmutableMatrix(
                expr.rows, expr.cols, [e.xreplace(self._values) for e in items]
            )
        return expr.xreplace(self._values)

    @functools.cached_property
    def loops(self) -> Any:
        """The loop constraints ``Φ``, ``A``, ``b`` of a model with loops (compact forms;
        :class:`kanedyn.symbolic.loops.LoopConstraints`). ``mass_matrix`` and ``forcing``
        are the tree's; :meth:`constrained` eliminates the dependent speeds."""
        from kanedyn.symbolic.loops import loop_constraints

        return loop_constraints(self)

    def constrained(self, independent: Sequence[Any], *, rows: Sequence[int] | None = None) -> Any:
        """Kane's equations with the loops' dependent speeds eliminated,
        ``Cᵀ(Fr + Fr*) = 0`` (:func:`kanedyn.symbolic.loops.constrained_equations`)."""
        from kanedyn.symbolic.loops import constrained_equations

        return constrained_equations(self, independent, rows=rows)

    def _explicit_list(self, mats: list) -> list:
        return [self.explicit(sm.ImmutableMatrix(m)) for m in mats]

    @functools.cached_property
    def mass_matrix(self) -> sm.ImmutableMatrix:
        """``M`` (n, n), symmetric: ``mass_matrix * d/dt[u | s] = forcing``."""
        return self.explicit(self.compact.mass_matrix)

    @functools.cached_property
    def forcing(self) -> sm.ImmutableMatrix:
        """``Fr + Fr*`` at zero acceleration, (n, 1)."""
        return self.explicit(self.compact.forcing)

    @functools.cached_property
    def reactions(self) -> dict[str, tuple[sm.ImmutableMatrix, sm.ImmutableMatrix]]:
        """``{joint: (force, torque)}``, (3, 1) each in the joint's Go axes, torque about
        the Go origin: the reaction the inner body exerts on the joint's subtree (its
        springs, dampers and actuators excluded), from auxiliary speeds
        (:mod:`kanedyn.symbolic.reactions`; ask with ``kane(..., reactions=[...])``).
        Functions of q, u, ``u_dot`` and the parameters."""
        return {
            k: (self.explicit(F), self.explicit(T)) for k, (F, T) in self.compact_reactions.items()
        }

    @functools.cached_property
    def Fr(self) -> sm.ImmutableMatrix:
        """Generalized active forces ``Σ V_iᵀ m_i g + Q``, (n, 1)."""
        return self.explicit(self.compact.Fr)

    @functools.cached_property
    def Fr_star(self) -> sm.ImmutableMatrix:
        """Generalized inertia forces ``-M u̇ + Fr*|_{u̇=0}``, (n, 1), linear in ``u_dot``."""
        return self.explicit(self.compact.Fr_star)

    @functools.cached_property
    def Omega_u(self) -> list:
        """Partial angular velocities, per body a (3, nu) Matrix in N components."""
        return self._explicit_list(self._der.Omega_u)

    @functools.cached_property
    def V_u(self) -> list:
        """Partial velocities of the mass centres for the rotational speeds, (3, nu) each."""
        return self._explicit_list(self._der.V_u)

    @functools.cached_property
    def V_s(self) -> list:
        """Partial velocities of the mass centres for the slide speeds, (3, ns) each."""
        return self._explicit_list(self._der.V_s)

    @functools.cached_property
    def Omega_xi(self) -> list:
        """Partial angular velocities over the modal speeds, per body a (3, nf) Matrix:
        non-zero for the bodies outboard of a joint at a node of a flexible body
        (``Joint.inner_node``); an empty list without such joints."""
        return self._explicit_list(self._der.Omega_xi)

    @functools.cached_property
    def V_xi(self) -> list:
        """Partial velocities of the mass centres over the modal speeds, (3, nf) each
        (see :attr:`Omega_xi`)."""
        return self._explicit_list(self._der.V_xi)

    @functools.cached_property
    def alpha_r(self) -> list:
        """Angular-acceleration remainders ``ω̇_i - Ω_u[i] u̇``, (3, 1) each."""
        return self._explicit_list(self._der.alpha_r)

    @functools.cached_property
    def a_r(self) -> list:
        """Acceleration remainders ``a_i - V_u[i] u̇ - V_s[i] ṡ``, (3, 1) each."""
        return self._explicit_list(self._der.a_r)

    @functools.cached_property
    def R_N_B(self) -> list:
        """Body attitudes (3, 3) each."""
        return self._explicit_list(self._der.R_N_B)

    @functools.cached_property
    def r(self) -> list:
        """Mass-centre positions in N, (3, 1) each."""
        return self._explicit_list(self._der.r)

    @functools.cached_property
    def omega(self) -> list:
        """Angular velocities in N, (3, 1) each."""
        return self._explicit_list(self._der.omega)

    @functools.cached_property
    def v(self) -> list:
        """Mass-centre velocities in N, (3, 1) each."""
        return self._explicit_list(self._der.v)

    def _simplify(self, time_budget: float | None) -> None:
        """Simplify the explicit mass matrix, forcing, ``Fr`` and ``Fr*`` at zero
        acceleration entry by entry, smallest first, until ``time_budget`` seconds have
        passed; ``Fr* = -M u̇ + Fr*|_{u̇=0}`` is rebuilt from the simplified parts, so
        that it holds no terms that cancel."""
        start = time.perf_counter()
        parts = {
            "M": sm.Matrix(self.mass_matrix),
            "f": sm.Matrix(self.forcing),
            "Fr": sm.Matrix(self.Fr),
            "Fr0": sm.Matrix(self.explicit(sm.ImmutableMatrix(self._der.Fr_star0))),
        }
        n = len(self.u)
        entries = [("M", a, b) for a in range(n) for b in range(a, n)]
        entries += [(k, a, 0) for k in ("f", "Fr", "Fr0") for a in range(n)]
        entries.sort(key=lambda e: sm.count_ops(parts[e[0]][e[1], e[2]]))
        done = 0
        for kind, a, b in entries:
            if time_budget is not None and time.perf_counter() - start > time_budget:
                break
            value = sm.simplify(parts[kind][a, b])
            parts[kind][a, b] = value
            if kind == "M":
                parts[kind][b, a] = value
            done += 1
        M = parts["M"]
        self.mass_matrix = sm.ImmutableMatrix(M)
        self.forcing = sm.ImmutableMatrix(parts["f"])
        self.Fr = sm.ImmutableMatrix(parts["Fr"])
        self.Fr_star = sm.ImmutableMatrix(
            [
                sm.Add(*[-M[a, b] * self.u_dot[b] for b in range(n) if M[a, b] != 0])
                + parts["Fr0"][a]
                for a in range(n)
            ]
        )
        elapsed = time.perf_counter() - start
        what = "the mass matrix (upper triangle), forcing, Fr and Fr* at zero acceleration"
        if done < len(entries):
            self.simplify_report = (
                f"time budget of {time_budget} s exceeded: simplified {done} of "
                f"{len(entries)} entries of {what} in {elapsed:.1f} s; the rest are as derived"
            )
        else:
            self.simplify_report = (
                f"simplified all {len(entries)} entries of {what} in {elapsed:.1f} s"
            )

    # -- numeric evaluation -------------------------------------------------------
    def _params(self, params: Sequence[Any] | None) -> list:
        params = list(self.parameters if params is None else params)
        missing = sorted(set(self.parameters) - set(params), key=str)
        if missing:
            raise ModelError(
                f"lambdify: params must include every model parameter; missing {missing}"
            )
        return params

    def _arguments(self, syms: list):
        """Check and convert ``(q, u, p)``; quaternions normalized as in the numeric engine."""
        quat_q = self.model.layout.quat_q
        nq, n, npar = len(self.q), len(self.u), len(syms)

        def args(q, u, p):
            q = np.array(q, dtype=float).reshape(-1)
            u = np.asarray(u, dtype=float).reshape(-1)
            if q.shape != (nq,) or u.shape != (n,):
                raise ModelError(f"expected q of length {nq} and u of length {n}")
            if quat_q.size:
                quat = q[quat_q]
                q[quat_q] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
            if isinstance(p, Mapping):
                try:
                    p = [p[s] for s in syms]
                except KeyError as exc:
                    raise ModelError(f"no value for parameter {exc.args[0]}") from None
            pv = [] if p is None else [float(x) for x in np.asarray(p, dtype=float).reshape(-1)]
            if len(pv) != npar:
                raise ModelError(
                    f"expected {npar} parameter values in the order {[str(s) for s in syms]}"
                )
            return q.tolist(), u.tolist(), pv

        return args

    def lambdify(self, params: Sequence[Any] | None = None, *, backend: str = "python"):
        """A numeric function ``f(q, u, p=None) -> (M, forcing)``.

        Parameters
        ----------
        params : sequence of Symbol, optional
            Order of the parameter values ``p`` (default :attr:`parameters`). ``p`` may
            also be a mapping from symbol to value.
        backend : {"python", "sympy"}
            ``"python"`` (default) replays the named intermediates on the compiled
            engine's tape and writes them as straight-line Python
            (:func:`kanedyn.symbolic.replay.python_function`), which is fast to build;
            ``"sympy"`` uses ``sympy.lambdify`` with the intermediates as its common
            subexpressions (``cse``), slower to build for large trees. Both evaluate the
            same expressions.

        Returns
        -------
        callable
            ``f(q, u, p)`` with ``q`` (nq,), ``u`` (n,) = [u | s]; returns ``M`` (n, n)
            and ``forcing`` (n,). Quaternions in ``q`` are normalized first, as in the
            numeric engine.
        """
        syms = self._params(params)
        comp = self.compact
        outputs = [comp.mass_matrix, comp.forcing]
        defs = self._der.tape.needed([e for m in outputs for e in m])
        args = [list(self.q), list(self.u), syms]
        if backend == "python":
            fn = python_function(args, defs, outputs)
        elif backend == "sympy":
            fn = sm.lambdify(args, outputs, modules="numpy", cse=lambda exprs: (defs, exprs))
        else:
            raise ModelError(f"lambdify: backend must be 'python' or 'sympy', got {backend!r}")
        n = len(self.u)
        f_args = self._arguments(syms)

        def f(q, u, p=None):
            M, F = fn(*f_args(q, u, p))
            return np.asarray(M, dtype=float).reshape(n, n), np.asarray(F, dtype=float).ravel()

        return f

    _STAGES = ("R_N_B", "r", "omega", "v", "Omega_u", "V_u", "V_s", "alpha_r", "a_r")

    def lambdify_stages(self, params: Sequence[Any] | None = None):
        """A numeric function ``g(q, u, p=None) -> dict`` of the kinematic stages.

        Evaluates the compact form (no explicit expressions are built), so it works for
        large trees. The dict holds the numeric engine's arrays and shapes:
        ``R_N_B`` (nb, 3, 3), ``r``, ``omega``, ``v``, ``alpha_r``, ``a_r`` (nb, 3),
        ``Omega_u``, ``V_u`` (nb, 3, nu), ``V_s`` (nb, 3, ns); compare
        :func:`kanedyn.dynamics.kinematics` and :func:`kanedyn.dynamics.partials`. Arguments as for
        :meth:`lambdify`.
        """
        syms = self._params(params)
        der = self._der
        nb = self.model.nb
        mats = [sm.ImmutableMatrix(m) for k in self._STAGES for m in getattr(der, k)]
        defs = der.tape.needed([e for m in mats for e in m])
        fn = python_function([list(self.q), list(self.u), syms], defs, mats)
        shapes = {k: getattr(der, k)[0].shape for k in self._STAGES}
        f_args = self._arguments(syms)

        def g(q, u, p=None):
            out = fn(*f_args(q, u, p))
            result = {}
            for a, k in enumerate(self._STAGES):
                arr = np.array(out[a * nb : (a + 1) * nb], dtype=float).reshape((nb, *shapes[k]))
                result[k] = arr[..., 0] if k in ("r", "omega", "v", "alpha_r", "a_r") else arr
            return result

        return g

    def lambdify_reactions(self, params: Sequence[Any] | None = None):
        """A numeric function ``g(q, u, p=None) -> {joint: (force, torque)}`` of the
        reactions asked with ``kane(..., reactions=...)``, with ``u_dot`` the solution of
        Kane's equations at that state; arguments as for :meth:`lambdify`, arrays (3,)
        in Go axes."""
        syms = self._params(params)
        names = list(self.compact_reactions)
        mats = [sm.ImmutableMatrix(X) for k in names for X in self.compact_reactions[k]]
        defs = self._der.tape.needed([e for m in mats for e in m])
        fn = python_function([list(self.q), list(self.u), list(self.u_dot), syms], defs, mats)
        acc = self.lambdify_rhs(syms)
        f_args = self._arguments(syms)

        def g(q, u, p=None):
            ud = acc(q, u, p)
            qq, uu, pv = f_args(q, u, p)
            out = fn(qq, uu, ud.tolist(), pv)
            return {
                k: (np.array(out[2 * a], dtype=float).ravel(),
                    np.array(out[2 * a + 1], dtype=float).ravel())
                for a, k in enumerate(names)
            }  # fmt: skip

        return g

    def lambdify_rhs(self, params: Sequence[Any] | None = None):
        """A numeric function ``f_acc(q, u, p=None) -> d/dt[u | s]`` (Cholesky solve of
        ``M ν̇ = forcing``); arguments as for :meth:`lambdify`."""
        f = self.lambdify(params)
        gimbal3 = bool(self.model.layout.gimbal3.size)  # only then is gimbal lock a cause

        def f_acc(q, u, p=None):
            M, F = f(q, u, p)
            try:
                return scipy.linalg.cho_solve(scipy.linalg.cho_factor(M), F)
            except np.linalg.LinAlgError:
                where = " (a 3-DOF gimbal at its singular angle?)" if gimbal3 else ""
                raise ModelError(
                    f"mass matrix is not positive definite at q = {q}{where}"
                ) from None

        return f_acc

    @functools.cached_property
    def _rhs(self):
        return self.lambdify_rhs()

    def rhs(self, q, u, params=None) -> np.ndarray:
        """``d/dt[u | s]`` at one state; ``params`` are values of :attr:`parameters`."""
        return self._rhs(q, u, params)

    # -- teaching view ------------------------------------------------------------
    def explicit_size(self, expr: Any) -> int:
        """Number of nodes of ``explicit(expr)``'s expression tree, without building it
        (each named intermediate counts as the size of its own explicit tree)."""
        sizes = self._sizes
        for s, e in self._der.tape.needed(
            list(expr) if isinstance(expr, sm.MatrixBase) else [expr]
        ):
            if s not in sizes:
                sizes[s] = self._tree_size(e)
        items = list(expr) if isinstance(expr, sm.MatrixBase) else [expr]
        return sum(self._tree_size(e) for e in items)

    def _tree_size(self, e: sm.Basic) -> int:
        size = self._sizes.get(e)
        if size is not None:
            return size
        return 1 + sum(self._tree_size(a) for a in e.args)

    def table(self, fmt: str = "markdown", *, max_size: int | None = 2000) -> str:
        """Partial angular velocities and partial velocities per generalized speed.

        One group of rows per speed :math:`\\nu_r` (N components, explicit forms): for
        each body, :math:`\\partial\\omega_i/\\partial\\nu_r` (column r of
        :math:`\\Omega_u[i]`, zero for slide speeds) and
        :math:`\\partial v_i/\\partial\\nu_r` (column r of :math:`[V_u | V_s][i]`); then
        :math:`F_r` and :math:`F^*_r` in the group's first row.

        Parameters
        ----------
        fmt : {"markdown", "latex"}
            Markdown with code cells, or a LaTeX ``array`` (display math).
        max_size : int or None
            Cells whose explicit expression would have more tree nodes than this
            (:meth:`explicit_size`, estimated without building it) show a placeholder
            naming the attribute that holds them (``Fr_star[r]``, ``V_u[i][:, r]``, ...);
            None shows everything. Explicit forms grow quickly with the depth of the
            tree, so for large trees the placeholders are the readable choice (compare
            stages numerically with :meth:`lambdify_stages`).
        """
        if fmt not in ("markdown", "latex"):
            raise ModelError(f"table: fmt must be 'markdown' or 'latex', got {fmt!r}")
        latex = fmt == "latex"
        nu = self.model.nu
        der, comp = self._der, self.compact
        names = [b.name for b in self.model.bodies]

        def cell(x: Any, where: str) -> str:
            x = sm.ImmutableMatrix(x).T if isinstance(x, sm.MatrixBase) else x
            size = self.explicit_size(x)
            if max_size is not None and size > max_size:
                if latex:
                    return f"\\text{{({size} nodes: }}\\mathtt{{eom.{_tex(where)}}}\\text{{)}}"
                return f"({size} nodes: eom.{where})"
            x = self.explicit(x)
            if latex:
                return sm.latex(x)
            if isinstance(x, sm.MatrixBase):
                return "`[" + ", ".join(sm.sstr(e) for e in x) + "]`"
            return f"`{sm.sstr(x)}`"

        rows = []
        for rr, speed in enumerate(self.u):
            for i, name in enumerate(names):
                if rr < nu:
                    om, vel = der.Omega_u[i][:, rr], der.V_u[i][:, rr]
                    w_om, w_v = f"Omega_u[{i}][:, {rr}]", f"V_u[{i}][:, {rr}]"
                elif rr < self.model.n:
                    om, vel = _ZERO3, der.V_s[i][:, rr - nu]
                    w_om, w_v = "", f"V_s[{i}][:, {rr - nu}]"
                elif der.Omega_xi:  # a modal speed moves the bodies riding on its nodes
                    c = rr - self.model.n
                    om, vel = der.Omega_xi[i][:, c], der.V_xi[i][:, c]
                    w_om, w_v = f"Omega_xi[{i}][:, {c}]", f"V_xi[{i}][:, {c}]"
                else:  # a modal speed moves no body frame (its terms: the flexible stage)
                    om, vel, w_om, w_v = _ZERO3, _ZERO3, "", ""
                first = i == 0
                rows.append(
                    [
                        str(rr + 1) if first else "",
                        cell(speed, "u") if first else "",
                        (f"\\mathrm{{{_tex(name)}}}" if latex else name),
                        cell(om, w_om),
                        cell(vel, w_v),
                        cell(comp.Fr[rr], f"Fr[{rr}]") if first else "",
                        cell(comp.Fr_star[rr], f"Fr_star[{rr}]") if first else "",
                    ]
                )
        if latex:
            head = ["r", "\\nu_r", "\\text{body}", "\\partial\\omega_i/\\partial\\nu_r",
                    "\\partial v_i/\\partial\\nu_r", "F_r", "F^*_r"]  # fmt: skip
            body = " \\\\\n".join(" & ".join(row) for row in rows)
            return (
                "\\begin{array}{c|c|c|c|c|c|c}\n"
                + " & ".join(head)
                + " \\\\ \\hline\n"
                + body
                + "\n\\end{array}"
            )
        head = ["r", "ν_r", "body", "∂ω_i/∂ν_r (N)", "∂v_i/∂ν_r (N)", "F_r", "F*_r"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        if self.model.loops:  # the loop closure and its velocity and acceleration forms
            lc = self.loops
            lines += ["", "| loop | constraint | Φ (closure) | Φ̇ = A ν | Φ̈ = A ν̇ + b: b |",
                      "|---|---|---|---|---|"]  # fmt: skip
            for c, name in enumerate(lc.loop):
                kind = "rotation" if lc.rotational[c] else "translation"
                lines.append(
                    f"| {name} | {c + 1} ({kind}) | {cell(lc.Phi[c], f'loops.Phi[{c}]')} | "
                    f"{cell(lc.A[c, :] * self.u, f'loops.A[{c}, :]')} | "
                    f"{cell(lc.b[c], f'loops.b[{c}]')} |"
                )
            lines.append(
                "\nThe constrained equations: `eom.constrained(independent=[...])` gives "
                "`u_dep`, `C`, and `Cᵀ M C`, `Cᵀ(f - M c0)`."
            )
        return "\n".join(lines) + "\n"

    def stages(
        self, *, fold: int = 4, simplify: bool = False, values: dict | None = None
    ) -> Stages:
        """Kane's method stage by stage (kinematics, partial velocities, the forces on
        each body, Fr and Fr* row by row, the equations with M and f), for reading: see
        :mod:`kanedyn.symbolic.stages`. ``print()`` gives plain text, ``.markdown()``,
        ``.latex()`` (a document, or ``fragment=True``) and a Jupyter display; named
        intermediates larger than ``fold`` nodes stay names; ``values`` (symbol ->
        number, from :func:`~kanedyn.symbolic.symbolic_parameters`) are listed at the end."""
        return stages(self, fold=fold, simplify=simplify, values=values)

    def _shows_table(self) -> bool:
        return len(self.compact.intermediates) <= _TABLE_MAX_INTERMEDIATES

    def _repr_markdown_(self) -> str:
        if not self._shows_table():
            return f"**{self!r}** (large: call `.table()` for the explicit teaching table)"
        return f"**{self!r}**\n\n" + self.table("markdown")

    def _repr_latex_(self) -> str | None:
        if not self._shows_table():
            return None  # Jupyter falls back to the Markdown summary
        return "$$" + self.table("latex") + "$$"


def kane(
    model: Model,
    *,
    joint_torques: Mapping[str, Sequence[Any]] | None = None,
    body_forces: Mapping[str, Any] | None = None,
    body_torques: Mapping[str, Sequence[Any]] | None = None,
    reactions: Sequence[str | tuple[str, Sequence[str] | str]] = (),
    simplify: bool = False,
    time_budget: float | None = None,
) -> KaneEquations:
    """Kane's equations of ``model`` in sympy (the numeric engine's stages, symbolically).

    Parameters
    ----------
    model : Model
        Numeric (its numbers become sympy Integers/Floats) or with sympy parameters
        (masses, inertias, points, rotations, stiffness, damping, gravity).
    joint_torques : mapping joint name -> sequence, optional
        Actuator efforts on each DOF of the joint, rotational first (generalized forces,
        as :class:`kanedyn.JointLoad`).
    body_forces : mapping body name -> F or (F, point), optional
        A force in N components at the mass centre, or at ``point`` (body axes, from the
        body-frame origin; as :class:`kanedyn.Force`).
    body_torques : mapping body name -> (3,), optional
        A pure torque, N components (as :class:`kanedyn.Torque`).

        The loads have the form :func:`kanedyn.symbolic.lagrange` takes; their values may
        be numbers, sympy constants or *inputs*, functions of time such as
        ``dynamicsymbols("T1")`` (listed in :attr:`KaneEquations.inputs`, the columns of
        ``B`` in :func:`kanedyn.symbolic.linearize`). They enter ``Fr`` as
        ``V_iᵀ F_i + Ω_iᵀ (T_i + (R_N_B (p - c_i)) × F_i)`` and ``Q``.
    reactions : sequence of joint names or (joint, directions), optional
        Joints whose reaction force and torque to bring into evidence with auxiliary
        speeds (:mod:`kanedyn.symbolic.reactions`): a name gives the whole reaction, a
        pair ``(joint, ["Fx", "Tz", ...])`` only those components along the Go axes
        (the others are ``nan``). The result is :attr:`KaneEquations.reactions`.
    simplify : bool, optional
        Build the explicit mass matrix and forcing now and ``sympy.simplify`` them
        entry by entry (smallest first). Default False: nothing is expanded or
        simplified.
    time_budget : float, optional
        Seconds allowed for ``simplify``; when exceeded the remaining entries are left
        as derived and :attr:`KaneEquations.simplify_report` says so.

    Returns
    -------
    KaneEquations
        ``mass_matrix * d/dt[u | s] = forcing``; see the module docstring for the
        equations (Kane_NBody slides 18-23).

    Raises
    ------
    ModelError
        For a spherical joint with a non-zero spring (see the module docstring), and for
        reactions or closed loops with flexible bodies and for geared rotors with joints
        at nodes of flexible bodies (not derived symbolically yet).

    Examples
    --------
    >>> import kanedyn as kd
    >>> from kanedyn.symbolic.kane import kane
    >>> eom = kane(kd.examples.double_pendulum())
    >>> eom.u.T
    Matrix([[u_joint0_0, u_joint1_0]])
    >>> M, forcing = eom.lambdify()([0.1, 0.2], [0.0, 0.0])
    >>> M.shape, forcing.shape
    ((2, 2), (2,))
    """
    if not isinstance(model, Model):
        raise ModelError(f"kane: expected a kanedyn Model, got {type(model).__name__}")
    if model.nf and (reactions or model.loops):
        what = "reactions" if reactions else "closed loops"
        raise ModelError(
            f"kd.symbolic.kane: {what} with flexible bodies "
            f"{[b.name for b in model.bodies if b.modes is not None]} are not derived "
            "symbolically yet (the numeric engines have the flexible bodies' terms)"
        )
    loads = read_loads(model, joint_torques, body_forces, body_torques, "kane")
    q, u, ud = _symbols(model)
    der = _derive(model, q, u, loads)
    rx = {}
    if reactions:
        rx = joint_reactions(
            model, der, ud, list(reactions), [_const(x) for x in params_of(model).mass]
        )
    eom = KaneEquations(model, q, u, ud, der, _kinematic_equations(model, q, u), loads, rx)
    if simplify:
        eom._simplify(time_budget)
    return eom
