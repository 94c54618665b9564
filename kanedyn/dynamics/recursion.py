"""The recursions over the tree, written once on scalars: ABA, RNEA and the MSD rates.

Featherstone's articulated-body algorithm (*Rigid Body Dynamics Algorithms*, 2008,
Table 7.1), his recursive Newton-Euler algorithm (Table 5.1) and the momentum-state
rates of Stoneking's MSD slides, per joint k in the frame ``Go_k`` (axes Go, origin at
the joint point), with spatial vectors (ω, v) and forces (n, f) (conventions page):

* joint motion (:func:`kanedyn.joints.motion`): ``R_Gi_Go``, ``Δ d``, ``S``, ``v_J``,
  ``c_J``; transform from the inner frame P (``Go`` of the inner body, or N):
  ``E = R_P_Gi R_Gi_Go``, ``r = r_0 + R_P_Gi Δ d``;
* pass 1: ``v_k = X_k v_P + v_J``, ``c_k = c_J + v_k ×ₘ v_J`` (the remainder terms
  α_r, a_r of Kane_NBody slides 20-22 in Go), ``p_k = v_k ×f I_k v_k + (ω_k × h_k, 0)``
  (:func:`kanedyn.spatial.plucker.bias_force`; h: embedded momentum);
* pass 2 (leaves to root): ``U = I^A S``, ``D = Sᵀ U``, ``u = Q - Sᵀ p^A``;
  ``I^a = I^A - U D⁻¹ Uᵀ``, ``p^a = p^A + I^a c + U D⁻¹ u`` added to the inner body
  through ``X_kᵀ``;
* pass 3 (root to leaves): ``a' = X_k a_P + c_k``, ``ν̇_k = D⁻¹ (u - Uᵀ a')``,
  ``a_k = a' + S ν̇_k``; N accelerates at ``-g`` (uniform gravity). A central field
  (:class:`kanedyn.CentralGravity`) is a per-body external force and gravity-gradient
  torque instead (:meth:`Recursion.central_forces`), subtracted from ``p_k``.
* a geared rotor (:class:`kanedyn.Rotor`) on joint k is a massless second piece moved
  by joint k's speed with the column ``S_R = S + (m e, 0)``: pass 2 takes ``U += I_R
  S_R``, ``D += S_Rᵀ I_R S_R``, ``u -= S_Rᵀ p_R`` and hands ``I^A + I_R``, ``p^A + p_R``
  inwards (:mod:`kanedyn.dynamics.rotors`, :meth:`Recursion.rotor_pieces`).
* a joint k at a node of a flexible inner body P (``Joint.inner_node``, with the modal
  state set by :meth:`Recursion.set_modal`): Gi rides on the node frame
  (:func:`kanedyn.spatial.modal.node_frame`), which moves in P with ``ν_n = Φ_n ξ_P``
  (in Go_P, :meth:`Recursion.node_terms`); pass 1 takes ``v_k = X_k(v_P + ν_n) + v_J``
  and ``c_k += X_k c_n``, ``c_n = v_P ×ₘ ν_n + (the rate of Φ_n at constant ξ) ξ``;
  pass 2 adds the child's ``I^a`` and ``p^a`` (in P) to the body's modal blocks,
  ``C += I^a Φ_n``, ``M += Φ_nᵀ I^a Φ_n``, ``h += Φ_nᵀ p^a``, before they are condensed
  (:mod:`kanedyn.dynamics.flex_recursion`), and pass 3 takes ``a' = X_k(a_P + Φ_n ξ̇_P)
  + c_k``.
* a joint k at a node of its flexible outer body (``Joint.outer_node``): Go is fixed in
  the node frame, so body k's axes and origin in Go_k follow the node
  (:meth:`Recursion.outer_terms`, :meth:`Recursion.body_frame`) and its frame moves with
  ``v_k - Φ_on ξ_k`` (:meth:`Recursion.frame_velocity`), accelerating with
  ``a_Bo = a_k - Φ_on ξ̇_k + c_b``; pass 2 takes the body's blocks over ``(a_Bo, ξ̇)``
  to blocks over ``(a_k, ξ̇)`` before ``ξ`` is condensed, and pass 3 hands ``a_Bo`` to
  its children.

**The equations are Kane's.** ABA solves ``M ν̇ = Fr + Fr*|_{ν̇=0}`` (Kane_NBody slide
23) without forming ``M``: eliminating the joints from the leaves inwards is a block
factorization of Kane's mass matrix. The dense engine's Kane sums
(:mod:`kanedyn.dynamics.kane`, CRBA and Cholesky) are a different algorithm for the same
accelerations, and each is the other's oracle.

A scalar is a float, a traced value or a sympy expression (:mod:`kanedyn.spatial.plucker`):
:func:`aba` runs :class:`Recursion` on the numbers of one state, the compiled engine
(:class:`kanedyn.compiled.kernels.Trace`) records the same lines on its tape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.dynamics.rotors import RotorPiece, RotorSpec, rotor_piece, rotor_specs
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import (
    ModalData,
    Params,
    modal_slots,
    node_joints,
    outer_node_joints,
    params_of,
)
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.arithmetic import NUMPY, Arithmetic
from kanedyn.spatial.modal import (
    first_moment,
    modal_central_forces,
    modal_inertia,
    modal_momentum,
    modal_momentum_rate,
    node_frame,
    node_subspace,
)

__all__ = ["AbaPass", "BodyTerms", "JointTerms", "ModalBody", "Recursion", "aba", "remainder"]

Scalar = Any
Vec = list  # of Scalar
Mat = list  # of rows of Scalar
Array = NDArray[np.float64]


@attrs.frozen
class JointTerms:
    """One joint's motion (Go coordinates) as the recursions use it: the columns of its
    free speeds only (a locked speed is held at zero)."""

    R: Mat  # R_Gi_Go
    cols: list[tuple[Vec, int]]  # free DOFs: (S column, speed index)
    dcols: list[Vec]  # rate of each column in Go (Ṡ)
    vJ: Vec
    cJ: Vec
    d: Vec  # slide displacement in Gi (Δ d)


@attrs.frozen
class AbaPass:
    """Pass 2 of ABA (:meth:`Recursion.aba_backward`), per joint k: ``U`` (its columns'
    ``I^A s``), ``D = Sᵀ I^A S`` and ``u = Q - Sᵀ p^A`` (free speeds only)."""

    U: list[list[Vec]]
    D: list[Any]
    u: list[list[Scalar]]


@attrs.frozen
class NodeTerms:
    """A joint at a node of the flexible body ``parent`` (:meth:`Recursion.node_terms`):
    Gi's placement in Go_parent, the node's motion subspace ``Phi`` (6 × the body's
    modes, Go_parent), ``nu = Φ ξ``, ``quad`` (Φ's rate at constant ξ, times ξ) and
    ``Phi_dot`` (Φ's rate in the body, :func:`~kanedyn.spatial.modal.node_subspace`)."""

    parent: int
    modes: slice
    R_P_Gi: Mat
    r0: Vec
    Phi: Mat
    nu: Vec
    quad: Vec
    Phi_dot: Mat


@attrs.frozen
class BodyTerms:
    """Joint k and its body in Go_k: transform (E = R_P_Go, r) from the inner frame P,
    spatial inertia about the joint point, mass centre, embedded momentum."""

    J: JointTerms
    parent: int
    E: Mat
    r: Vec
    inertia: Mat
    com: Vec
    h: Vec
    has_h: bool


@attrs.frozen(eq=False)
class ModalBody:
    """A flexible body k in Go_k (:mod:`kanedyn.dynamics.flex_recursion`): its modal
    data ``md`` (:meth:`Recursion.modal_data`, from the parameters), modal coordinates
    ``eta`` and slice ``sl`` into them, ``Tx`` (6, 6) from the spatial velocity at the
    joint point (Go) to ``(ω, v₀)`` in body axes, ``R`` (``R_Go_Bo``), gravity ``g`` in
    body axes and ``dM = ΔM(η)`` (:func:`~kanedyn.spatial.modal.modal_inertia`); object
    arrays."""

    k: int
    sl: slice
    md: Any
    eta: Any
    Tx: Any
    R: Any
    g: Any
    dM: Any

    def body_velocity(self, v_k: Vec) -> Any:
        """``(ω, v₀)`` in body axes from the spatial velocity ``v_k`` (Go_k)."""
        return self.Tx @ np.array(v_k, dtype=object)


def remainder(J: JointTerms, v_k: Vec) -> Vec:
    """``c_k = c_J + v_k ×ₘ v_J``: body k's acceleration at zero ``ν̇`` beyond its inner
    body's, the remainder terms (α_r, a_r) of Kane_NBody slides 20-22 in Go."""
    return sp.add(J.cJ, sp.cross_motion(v_k, J.vJ))


def _is_zero(x: Scalar) -> bool:
    """A structural zero: a plain number equal to zero (never a traced or symbolic one)."""
    return isinstance(x, int | float) and x == 0.0


class Closure(Protocol):
    """Closed loops in :meth:`Recursion.run_msd` (implemented by
    :class:`kanedyn.dynamics.loop_rows.MomentumClosure`, a layer above the tree)."""

    def speeds(self, rec: Recursion, geo: list[BodyTerms], nu0: list[Scalar],
               bw: AbaPass) -> list[Scalar]:  # fmt: skip
        """The tree's speeds ``nu0`` of the momentum states (solved on ABA's pass 2
        ``bw``), closed by the loops."""
        ...

    def forces(self, rec: Recursion) -> list[Scalar]:
        """The loops' generalized constraint forces at ``rec``'s state."""
        ...

    def flexible_speeds(self, rec: Recursion, geo: list[BodyTerms], nu0: list[Scalar],
                        blocks: dict[int, list[Any]]) -> list[Scalar]:  # fmt: skip
        """With flexible bodies: the tree's ``[ν₀ | ξ₀]`` of the momentum states (the
        modal ``blocks`` of :meth:`Recursion.modal_blocks`), closed by the loops."""
        ...

    def flexible_forces(self, rec: Recursion, eta: Sequence[Scalar],
                        xi: Sequence[Scalar]) -> list[Scalar]:  # fmt: skip
        """With flexible bodies: the loops' generalized constraint forces at ``rec``'s
        state and the modal state ``eta``, ``xi``."""
        ...


class Recursion:
    """The tree recursions of one model at the coordinates ``q`` and speeds ``u`` (lists
    of scalars of the arithmetic ``ar``), with the speeds ``locked`` held at zero.

    ``loads``: ``(T, F, Q)``, per-body torques and forces at the mass centres in N and
    the generalized forces per speed, replacing the model's springs, dampers and gravity
    (as :class:`kanedyn.dynamics.loads.AppliedLoads` holds them); ``tau``: efforts added
    to the generalized forces; ``body_loads``: ``(T, F)``, per-body torques and forces
    at the mass centres in body axes, added to the model's loads (:meth:`body_forces`).
    Parameters come from :meth:`par` (the model's, or ``params``).
    """

    def __init__(self, model: Model, q: Sequence[Scalar], u: Sequence[Scalar], *,
                 ar: Arithmetic = NUMPY, locked: frozenset[int] = frozenset(),
                 params: Params | None = None,
                 loads: tuple[Sequence[Vec], Sequence[Vec], Sequence[Scalar]] | None = None,
                 tau: Sequence[Scalar] | None = None,
                 body_loads: tuple[Sequence[Vec], Sequence[Vec]] | None = None):  # fmt: skip
        self.model = model
        self.ar = ar
        self.dtype: Any = float if ar is NUMPY else object
        self.q: list[Scalar] = list(q)
        self.u: list[Scalar] = list(u)
        self.locked = locked
        self.loads = loads is not None
        if loads is not None:
            self.T, self.F, self.Q = (list(x) for x in loads)
        self.tau = None if tau is None else list(tau)
        self.body_loads = None if body_loads is None else (list(body_loads[0]), list(body_loads[1]))
        pa = params if params is not None else params_of(model)
        self._params = pa
        self._modal: dict[int, ModalData] = {}  # per flexible body (modal_data)
        # coordinates with normalized quaternions (as the dense engine normalizes them)
        self.qn = joints.normalize_quaternions(ar, model.layout, np.array(self.q, self.dtype))
        #: the geared rotors at the current speeds, per joint (set by :meth:`terms`)
        self.rotors: dict[int, RotorPiece] = {}
        #: the modal coordinates and speeds (:meth:`set_modal`), and per joint at a node
        #: its terms (:meth:`node_terms`)
        self.modal: tuple[list[Scalar], list[Scalar]] | None = None
        self.nodes: dict[int, NodeTerms] = {}
        #: per flexible body whose joint is at its node (Joint.outer_node): its terms
        #: (:meth:`outer_terms`; ``R_P_Gi``, ``r0`` hold its axes and origin in Go_k)
        self.outer: dict[int, NodeTerms] = {}
        #: the bias ``c_b`` of those bodies' frames in Go_k (set by :meth:`terms`)
        self.frame_bias: dict[int, Vec] = {}
        #: the modal accelerations of the flexible bodies (set by :meth:`aba`)
        self.xidot: dict[int, list[Scalar]] = {}

    def set_modal(self, eta: Sequence[Scalar], xi: Sequence[Scalar]) -> None:
        """The flexible bodies' modal coordinates and speeds (``Model.nf`` each): the
        joints at nodes (``Joint.inner_node``, ``outer_node``) ride on them
        (:meth:`node_terms`, :meth:`outer_terms`)."""
        nodes = node_joints(self.model)
        outer = outer_node_joints(self.model)
        if (nodes or outer) and any(j.rotor is not None for j in self.model.joints):
            raise ModelError(
                "geared rotors (Joint.rotor) in a model with joints at nodes of flexible "
                "bodies (Joint.inner_node, outer_node) are not modelled yet"
            )
        self.modal = (list(eta), list(xi))
        self.outer = {k: self.outer_terms(k, n) for k, n in outer}
        self.nodes = {k: self.node_terms(k, p, n) for k, p, n in nodes}

    def _node(self, body: int, n: int) -> tuple[Any, ...]:
        """:func:`~kanedyn.spatial.modal.node_frame` of node n of ``body`` at the modal
        state, and the node's ``Ψ_n`` and ``ξ`` of the body (object arrays)."""
        assert self.modal is not None
        eta, xi = self.modal
        sl = dict(self.model.modal_slices())[body]
        md = self.modal_data(body)
        e, x = np.array(eta[sl], dtype=object), np.array(xi[sl], dtype=object)
        return (*node_frame(md, n, e, x), md.Psi[n], md.node_positions[n], x, sl)

    def body_frame(self, k: int) -> tuple[Mat, Vec]:
        """``(R_Go_Bo, o)``: body k's axes and frame origin in Go_k (constants, or at an
        outer node the node frame's: :meth:`outer_terms`)."""
        if k in self.outer:
            return self.outer[k].R_P_Gi, self.outer[k].r0
        R = self.par("R_Go_Bo", k)
        return R, [-x for x in sp.mv(R, self.par("outer_point", k))]

    def _subspace(self, R: Any, x_n: Any, W: Any, W_dot: Any, Psi: Any,
                  x: Any) -> tuple[Any, Any, Vec]:  # fmt: skip
        """``Φ = [RW ; RΨ + [x_n]× RW]``, its rate in the body ``Φ̇``
        (:func:`~kanedyn.spatial.modal.node_subspace`) and ``Φ̇ξ``, in the frame of
        ``R``, ``x_n``."""
        Phi, Phi_dot = node_subspace(R, x_n, W, W_dot, Psi, x)
        return Phi, Phi_dot, list(Phi_dot @ x)

    def node_terms(self, k: int, p: int, n: int) -> NodeTerms:
        """Joint k at node n of the flexible body p, in Go_p (``(R, o)`` of
        :meth:`body_frame` of p; :func:`~kanedyn.spatial.modal.node_frame`'s ``C``,
        ``d``, ``W``, ``Ẇ``): Gi's placement ``R_P_Gi = R C R_Bi_Gi``,
        ``r_0 = R(d + C(inner_point - r_n)) + o``; the node's motion subspace
        ``Φ_n = [RW ; RΨ_n + [x_n]× RW]`` with ``x_n = Rd + o``, so ``ν_n = Φ_n ξ``;
        and the rate at constant ``ξ`` in P, ``Φ̇_n ξ = (R Ẇξ, R(Ψ_nξ × Wξ) + x_n × R Ẇξ)``
        (the dense engine's :class:`~kanedyn.dynamics.kinematics.NodeKinematics`)."""
        C, d, W, W_dot, Psi, r_n, x, sl = self._node(p, n)
        Rl, ol = self.body_frame(p)
        R, o = np.array(Rl, dtype=object), np.array(ol, dtype=object)
        ip = np.array(self.par("inner_point", k), dtype=object)
        R_P_Gi = R @ C @ np.array(self.par("R_Bi_Gi", k), dtype=object)
        r0 = R @ (d + C @ (ip - r_n)) + o
        x_n = R @ d + o
        Phi, Phi_dot, quad = self._subspace(R, x_n, W, W_dot, Psi, x)
        return NodeTerms(p, sl, R_P_Gi.tolist(), list(r0), Phi.tolist(), list(Phi @ x), quad,
                         Phi_dot.tolist())  # fmt: skip

    def outer_terms(self, k: int, n: int) -> NodeTerms:
        """Joint k at node n of its flexible outer body k (``Joint.outer_node``), in
        Go_k: Go is fixed in the node frame, so body k's axes and origin in Go_k are
        ``R = R_Go_Bo Cᵀ``, ``o = -R(d + C(outer_point - r_n))`` (``R_P_Gi``, ``r0`` of
        the record), and the node moves relative to body k with ``ν_on = Φ_on ξ`` (the
        form of :meth:`node_terms` with this ``R`` and ``x_n = Rd + o``): body k's
        frame moves with ``v_k - ν_on`` and accelerates with ``a_k - Φ_on ξ̇ + c_b``,
        ``c_b = -(v_k ×ₘ ν_on + quad)`` (:meth:`terms`)."""
        C, d, W, W_dot, Psi, r_n, x, sl = self._node(k, n)
        R0 = np.array(self.par("R_Go_Bo", k), dtype=object)
        op = np.array(self.par("outer_point", k), dtype=object)
        R = R0 @ C.T
        o = -(R @ (d + C @ (op - r_n)))
        Phi, Phi_dot, quad = self._subspace(R, R @ d + o, W, W_dot, Psi, x)
        return NodeTerms(k, sl, R.tolist(), list(o), Phi.tolist(), list(Phi @ x), quad,
                         Phi_dot.tolist())  # fmt: skip

    @classmethod
    def at_state(cls, model: Model, state: State, loads: Any = None, t: float = 0.0) -> Recursion:
        """The recursion on the numbers of one state, with the applied loads of
        :func:`kanedyn.dynamics.loads.applied_loads` (springs, dampers, gravity and
        ``loads``) as its inputs ``(T, F, Q)``."""
        from kanedyn.dynamics.kinematics import kinematics_at
        from kanedyn.dynamics.loads import applied_loads

        model.check_state(state)
        q, u = np.asarray(state.q, dtype=float), np.asarray(state.u, dtype=float)
        L = applied_loads(model, state, kinematics_at(model, q, u), loads, t)
        T, F, Q = (np.asarray(x, dtype=float).tolist() for x in (L.T, L.F, L.Q))
        return cls(model, q.tolist(), u.tolist(), loads=(T, F, Q))

    def par(self, field: str, *index: int) -> Any:
        """Parameter ``field[index]`` as nested lists of scalars."""
        return np.asarray(getattr(self._params, field), dtype=float)[index].tolist()

    def modal_data(self, body: int) -> ModalData:
        """The modal data of the flexible ``body`` (index) from :meth:`par` (a traced
        recursion's parameter inputs included): float arrays, or object arrays where a
        field holds inputs. Built once per body."""
        if body not in self._modal:

            def flat(field: str) -> Any:
                values = self.par(field)
                floats = all(isinstance(x, float | int) for x in values)
                return np.array(values, dtype=float if floats else object)

            slot = next(s for s in modal_slots(self.model) if s.body == body)
            self._modal[body] = ModalData.of_flat(slot, flat)
        return self._modal[body]

    # ----------------------------------------------------------------------- terms
    def joint(self, k: int) -> JointTerms:
        """Joint k's motion (:func:`kanedyn.joints.motion`) at the current speeds."""
        lay = self.model.layout
        qk = np.array([self.qn[int(i)] for i in lay.q_index[k]], dtype=self.dtype)
        speeds = [int(r) for r in lay.u_index[k]]
        uk = np.array([self.u[r] for r in speeds], dtype=self.dtype)
        m = joints.motion(self.model.joints[k], qk, uk, self.ar, unit=True)
        S, S_dot = m.S.T.tolist(), m.S_dot.T.tolist()
        free = [a for a, r in enumerate(speeds) if r not in self.locked]
        return JointTerms(
            R=m.R.tolist(),
            cols=[(S[a], speeds[a]) for a in free],
            dcols=[S_dot[a] for a in free],
            vJ=m.v_J.tolist(),
            cJ=m.c_J.tolist(),
            d=m.d.tolist(),
        )

    def generalized_forces(self) -> list[Scalar]:
        """``Q``: springs and dampers per speed (:func:`kanedyn.joints.spring_damper`);
        with loads, the given ``Q`` (which holds them); plus the efforts ``tau``."""
        model, lay = self.model, self.model.layout
        if self.loads:
            Q: list[Scalar] = list(self.Q)
        else:
            k = np.array([self.par("stiffness", r) for r in range(model.n)], dtype=object)
            c = np.array([self.par("damping", r) for r in range(model.n)], dtype=object)
            u = np.array(self.u, dtype=object)
            q = np.array(self.q, dtype=object)
            kp, cp = (
                np.array([self.par(field, r) for r in range(model.n)], dtype=object).reshape(-1, 2)
                for field in ("stiffness_poly", "damping_poly")
            )
            if all(_is_zero(x) for x in (*kp.ravel(), *cp.ravel())):
                # linear springs and dampers (structurally)
                Q = joints.spring_damper(lay, k, c, q, u, ar=self.ar).tolist()
            else:
                Q = joints.spring_damper(lay, k, c, q, u, kp, cp, ar=self.ar).tolist()
        if self.tau is not None:
            Q = [Qr + t for Qr, t in zip(Q, self.tau, strict=True)]
        return Q

    def geometry(self) -> list[BodyTerms]:
        """Per joint: its motion at the current speeds ``self.u``, the transform from the
        inner frame, and the body's constants in Go_k."""
        model, lay = self.model, self.model.layout
        out: list[BodyTerms] = []
        for k in range(model.nb):
            J = self.joint(k)
            p = int(lay.parent[k])
            R_Bi_Gi = self.par("R_Bi_Gi", k)
            if p < 0:
                R_P_Gi, r0 = R_Bi_Gi, self.par("inner_point", k)
            elif k in self.nodes:  # Gi on the node frame
                R_P_Gi, r0 = self.nodes[k].R_P_Gi, self.nodes[k].r0
            else:
                R_p, o_p = self.body_frame(p)
                R_P_Gi = sp.mm(R_p, R_Bi_Gi)
                r0 = sp.add(sp.mv(R_p, self.par("inner_point", k)), o_p)
            E = sp.mm(R_P_Gi, J.R)
            r = sp.add(r0, sp.mv(R_P_Gi, J.d))
            R_Go_Bo, o_k = self.body_frame(k)
            com = sp.add(sp.mv(R_Go_Bo, self.par("com", k)), o_k)
            I_c = sp.rotate_symmetric(R_Go_Bo, self.par("inertia", k))
            inertia = sp.body_inertia(self.par("mass", k), I_c, com)
            h = sp.mv(R_Go_Bo, self.par("h_embedded", k))
            has_h = not all(_is_zero(x) for x in h)
            out.append(BodyTerms(J, p, E, r, inertia, com, h, has_h))
        return out

    def velocities(self, geo: list[BodyTerms]) -> list[Vec]:
        """Pass 1: spatial velocities ``v_k = X_k v_P + v_J`` in Go_k."""
        v: list[Vec] = []
        for k, b in enumerate(geo):
            if b.parent < 0:
                v.append(b.J.vJ)
                continue
            vP = self.frame_velocity(v, b.parent)
            if k in self.nodes:
                vP = sp.add(vP, self.nodes[k].nu)
            v.append(sp.add(sp.motion_to_child(b.E, b.r, vP), b.J.vJ))
        return v

    def frame_velocity(self, v: list[Vec], k: int) -> Vec:
        """Body k's frame velocity in Go_k: ``v_k``, or ``v_k - ν_on`` when the joint
        is at a node of body k (:meth:`outer_terms`)."""
        return v[k] if k not in self.outer else sp.sub(v[k], self.outer[k].nu)

    def load_forces(self, geo: list[BodyTerms]) -> list[Vec]:
        """The loads T, F (N, at the mass centres) as spatial forces in Go_k."""
        R_N: list[Mat] = []
        out = []
        for k, b in enumerate(geo):
            RN = b.E if b.parent < 0 else sp.mm(R_N[b.parent], b.E)  # R_N_Go
            R_N.append(RN)
            out.append(sp.load_at(sp.mtv(RN, self.T[k]), sp.mtv(RN, self.F[k]), b.com))
        return out

    def body_forces(self, geo: list[BodyTerms], T: Sequence[Vec], F: Sequence[Vec]) -> list[Vec]:
        """Body loads ``T``, ``F`` (torque and force at the mass centre, body axes Bo;
        the added ``body_loads``) as spatial forces about the joint point in Go_k:
        ``(R T + c × R F, R F)`` with ``R = R_Go_Bo`` (:func:`~kanedyn.spatial.plucker.load_at`)."""
        out = []
        for k, b in enumerate(geo):
            R = self.par("R_Go_Bo", k)
            out.append(sp.load_at(sp.mv(R, T[k]), sp.mv(R, F[k]), b.com))
        return out

    def field_positions(self, geo: list[BodyTerms]) -> tuple[list[Mat], list[Vec]]:
        """``R_N_Go`` per joint and each body's mass centre from a central field's centre
        in Go_k, ``r = R_N_Goᵀ (o_k - center) + c`` (``o_k`` the joint point)."""
        center = self.par("center")
        R_N: list[Mat] = []
        o_N: list[Vec] = []
        out = []
        for b in geo:
            if b.parent < 0:
                RN, o = b.E, b.r
            else:
                RN = sp.mm(R_N[b.parent], b.E)  # R_N_Go
                o = sp.add(o_N[b.parent], sp.mv(R_N[b.parent], b.r))
            R_N.append(RN)
            o_N.append(o)
            out.append(sp.add(sp.mtv(RN, sp.sub(o, center)), b.com))
        return R_N, out

    def central_forces(self, geo: list[BodyTerms]) -> list[Vec]:
        """A central field's force and gravity-gradient torque on each body
        (:func:`kanedyn.spatial.plucker.central_gravity`, evaluated in Go_k: the mass
        centre from the field's centre, ``r = R_N_Goᵀ (o_k - center) + c``, and the pole
        ``R_N_Goᵀ e_z``), as spatial forces about the joint point in Go_k:
        ``(T + c × F, F)``."""
        mu, J2, radius = (self.par(f) for f in ("mu", "J2", "radius"))
        out = []
        for k, (b, RN, r) in enumerate(zip(geo, *self.field_positions(geo), strict=True)):
            pole = [RN[2][0], RN[2][1], RN[2][2]]  # R_N_Goᵀ e_z
            mass = self.par("mass", k)
            R_Go_Bo = self.par("R_Go_Bo", k)
            I_c = sp.rotate_symmetric(R_Go_Bo, self.par("inertia", k))
            F, T = sp.central_gravity(self.ar, mu, J2, radius, mass, I_c, r, pole)
            out.append(sp.load_at(T, F, b.com))
        return out

    def rotor_pieces(self, v: list[Vec]) -> dict[int, RotorPiece]:
        """The geared rotors (:func:`kanedyn.dynamics.rotors.rotor_piece`) per joint, in
        Go_k, at the body velocities ``v`` and the speeds ``self.u`` (a locked speed at 0).
        The rotors' terms in Go_k are constants of the joint's structure, so they hold
        for every member of a batch."""
        return {
            s.k: rotor_piece(s, v[s.k][:3], 0.0 if s.r in self.locked else self.u[s.r],
                             *self.rotor_inertia(s))
            for s in rotor_specs(self.model)
        }  # fmt: skip

    def rotor_inertia(self, spec: RotorSpec) -> tuple[Scalar, Scalar]:
        """The axial and transverse moments ``(J, J_t)`` of a geared rotor: the model's
        (:class:`kanedyn.Rotor`); a traced recursion may make them inputs (run-time
        parameters of the C export)."""
        return spec.J, spec.J_t

    def terms(self) -> tuple[list[BodyTerms], list[Vec], list[Vec], Vec]:
        """The geometry, remainder accelerations ``c_k = c_J + v_k ×ₘ v_J``, bias forces
        ``p_k`` (Go_k) and the acceleration ``a_N`` of N in Kane's equations; the geared
        rotors' terms go to ``self.rotors``."""
        geo = self.geometry()
        v = self.velocities(geo)
        self.rotors = self.rotor_pieces(v)
        c = [remainder(b.J, vk) for b, vk in zip(geo, v, strict=True)]
        for k, nt in self.nodes.items():  # c_k += X_k c_n
            b = geo[k]
            c_n = sp.add(sp.cross_motion(self.frame_velocity(v, b.parent), nt.nu), nt.quad)
            c[k] = sp.add(c[k], sp.motion_to_child(b.E, b.r, c_n))
        self.frame_bias = {
            k: [-x for x in sp.add(sp.cross_motion(v[k], nt.nu), nt.quad)]
            for k, nt in self.outer.items()
        }
        vb = [self.frame_velocity(v, k) for k in range(len(geo))]
        p = [sp.bias_force(b.inertia, vk, b.h if b.has_h else None)
             for b, vk in zip(geo, vb, strict=True)]  # fmt: skip
        if self.loads:
            p = [sp.sub(pk, fk) for pk, fk in zip(p, self.load_forces(geo), strict=True)]
        elif self.model.central_gravity is not None:  # with loads, it is in the input F, T
            p = [sp.sub(pk, fk) for pk, fk in zip(p, self.central_forces(geo), strict=True)]
        if self.body_loads is not None:
            p = [
                sp.sub(pk, fk)
                for pk, fk in zip(p, self.body_forces(geo, *self.body_loads), strict=True)
            ]
        # uniform gravity as an acceleration of N (with loads, it is in the input F)
        g = [0.0, 0.0, 0.0] if self.loads else self.par("gravity")
        a_N = [0.0, 0.0, 0.0] + [-x for x in g]
        return geo, c, p, a_N

    # ----------------------------------------------------------------------- modes
    def modal_bodies(self, geo: list[BodyTerms], eta: Sequence[Scalar]) -> list[ModalBody]:
        """The flexible bodies (:class:`ModalBody`) at the modal coordinates ``eta``
        (``Model.nf``, in body order), with the gravity of the model in body axes."""
        slices = self.model.modal_slices()
        if not slices:
            return []
        R_N: list[Mat] = []  # R_N_Go per joint
        for b in geo:
            R_N.append(b.E if b.parent < 0 else sp.mm(R_N[b.parent], b.E))
        g_N = self.par("gravity")
        out = []
        for k, sl in slices:
            md = self.modal_data(k)
            e = np.array(list(eta[sl]), dtype=object)
            R_k, o_k = self.body_frame(k)  # at an outer node, the node frame's
            R = np.array(R_k, dtype=object)
            o = np.array(o_k, dtype=object)  # the body-frame origin, Go
            Tx = np.zeros((6, 6), dtype=object)
            Tx[:3, :3] = R.T
            Tx[3:, 3:] = R.T
            Tx[3:, :3] = -(R.T @ np.array(sp.skew(list(o)), dtype=object))
            g = R.T @ np.array(sp.mtv(R_N[k], g_N), dtype=object)
            out.append(ModalBody(k, sl, md, e, Tx, R, g, modal_inertia(md, e)))
        return out

    def modal_blocks(self, geo: list[BodyTerms], p: list[Vec], mb: ModalBody,
                     h: Any) -> list[Any]:  # fmt: skip
        """A flexible body's terms for :meth:`aba`'s ``flex`` (the modal speeds
        condensed there, :mod:`kanedyn.dynamics.flex_recursion`): with the body's force
        ``h`` (6 + n, body axes) beyond ``ΔM [a; ξ̇]``, ``geo[k]``'s inertia gains
        ``T_xᵀAT_x`` and ``p[k]`` gains ``T_xᵀh_r`` (in place); returns the blocks
        ``[C, M_Ψ, h_ξ]`` (``C = T_xᵀΔM_{:6,6:}``, Go_k), which the joints at the body's
        nodes add to before ABA condenses them."""
        k, Tx, dM = mb.k, mb.Tx, mb.dM
        C = Tx.T @ dM[:6, 6:]  # (6, nm)
        inertia = np.array(geo[k].inertia, dtype=object) + Tx.T @ dM[:6, :6] @ Tx
        geo[k] = attrs.evolve(geo[k], inertia=inertia.tolist())
        p[k] = (np.array(p[k], dtype=object) + Tx.T @ h[:6]).tolist()
        return [C.tolist(), np.asarray(mb.md.mass).tolist(), list(h[6:])]

    # ----------------------------------------------------------------------- ABA
    def aba(self, geo: list[BodyTerms], c: list[Vec], p: list[Vec], Q: list[Scalar],
            a_N: Vec, rotors: dict[int, RotorPiece] | None = None,
            flex: dict[int, list[Any]] | None = None) -> list[Scalar]:  # fmt: skip
        """Passes 2 and 3: ``ν̇`` with remainder accelerations ``c``, bias forces ``p``
        (Go_k), joint forces ``Q`` and the acceleration ``a_N`` of N (in N); the free
        speeds only, locked entries 0. With ``c = 0``, ``a_N = 0`` this solves
        ``M x = Q - Σ S_kᵀ (subtree sum of p)``. ``rotors`` (default ``self.rotors``):
        the geared rotors' pieces (module docstring). ``flex``: per flexible body k its
        modal blocks ``[C, M, h]`` (6 × nm, nm × nm, nm; Go_k), which the joints at its
        nodes add to (module docstring) before ``ξ`` is condensed, ``I^A -= C M⁻¹ Cᵀ``,
        ``p^A -= C M⁻¹ h``; pass 3 then sets ``self.xidot[k] = -M⁻¹(h + Cᵀ a_k)``
        (:mod:`kanedyn.dynamics.flex_recursion`)."""
        bw = self.aba_backward(geo, c, p, Q, rotors, flex)
        return self.aba_forward(geo, c, bw, a_N, flex)

    def aba_backward(self, geo: list[BodyTerms], c: list[Vec], p: list[Vec],
                     Q: list[Scalar], rotors: dict[int, RotorPiece] | None = None,
                     flex: dict[int, list[Any]] | None = None) -> AbaPass:  # fmt: skip
        """Pass 2 of :meth:`aba` (leaves to root): per joint ``U = I^A S``, ``D = Sᵀ U``
        and ``u = Q - Sᵀ p^A``. It is linear in ``(c, p, Q)`` at fixed geometry: ABA
        is the factorization ``M = Kᵀ D K`` with pass 2 ``u = K⁻ᵀ Q`` and pass 3
        ``ν̇ = K⁻¹ D⁻¹ u`` (at ``c = 0``, ``a_N = 0``), so ``Q_aᵀ M⁻¹ Q_b = Σ_k u_{a,k}ᵀ
        D_k⁻¹ u_{b,k}`` (:func:`kanedyn.dynamics.loop_rows.constrained_accelerations`).
        ``flex`` (:meth:`aba`): the modal blocks, condensed here in place."""
        model = self.model
        rotors = self.rotors if rotors is None else rotors
        nb = model.nb
        IA = [[list(row) for row in b.inertia] for b in geo]
        pA = [list(x) for x in p]
        U: list[list[Vec]] = [[] for _ in range(nb)]
        Dk: list[Any] = [None] * nb
        uu: list[list[Scalar]] = [[] for _ in range(nb)]
        for k in reversed(range(nb)):
            b = geo[k]
            if flex is not None and k in self.outer:  # a_Bo = a_k + S_b ξ̇ + c_b
                self._frame_blocks(k, IA[k], pA, flex)
            if flex is not None and k in flex:  # condense the modal speeds
                Cb, Mb, hb = flex[k]
                CM = sp.solve_spd(Mb, Cb)  # rows M⁻¹ C[i]
                nm = len(hb)
                for i in range(6):
                    for jj in range(i, 6):
                        corr = sum((CM[i][a] * Cb[jj][a] for a in range(nm)), 0.0)
                        IA[k][i][jj] = IA[k][jj][i] = IA[k][i][jj] - corr
                pA[k] = [pA[k][i] - sum((CM[i][a] * hb[a] for a in range(nm)), 0.0)
                         for i in range(6)]  # fmt: skip
            Ia, pa = IA[k], pA[k]
            cols = [col for col, _ in b.J.cols]
            Uk = [sp.sym_mv(Ia, s) for s in cols]
            uk = [Q[r] - sp.sdot(s, pa) for s, (_, r) in zip(cols, b.J.cols, strict=True)]
            D = [[sp.sdot(cols[a], Uk[bb]) for bb in range(len(cols))] for a in range(len(cols))]
            for a in range(len(cols)):
                for bb in range(a):
                    D[a][bb] = D[bb][a]
            rot = rotors.get(k)
            if rot is not None:  # the rotor, a second piece on joint k's one speed
                if cols:
                    S_R = sp.add(cols[0], rot.me + [0.0, 0.0, 0.0])
                    IS_R = rot.inertia_times(S_R)
                    Uk[0] = sp.add(Uk[0], IS_R)
                    D[0][0] = D[0][0] + sp.sdot(S_R, IS_R) + rot.armature
                    uk[0] = uk[0] - sp.dot(S_R[:3], rot.tau)
                Ia, pa = rot.add_inertia(Ia), sp.add(pa[:3], rot.tau) + pa[3:]
            U[k], uu[k], Dk[k] = Uk, uk, D
            if b.parent < 0:
                continue
            if cols:
                # W = U D⁻¹: solve D Wᵀ = Uᵀ for the 6 rows of U
                W = sp.solve_spd(D, [[Uk[a][i] for a in range(len(cols))] for i in range(6)])
                Ia2: Mat = [[0.0] * 6 for _ in range(6)]
                for i in range(6):
                    for jj in range(i, 6):
                        corr = sum((W[i][a] * Uk[a][jj] for a in range(len(cols))), 0.0)
                        Ia2[i][jj] = Ia2[jj][i] = Ia[i][jj] - corr
                Wu = [sum((W[i][a] * uk[a] for a in range(len(cols))), 0.0) for i in range(6)]
                pa2 = sp.add(sp.add(pa, sp.sym_mv(Ia2, c[k])), Wu)
            else:
                Ia2 = Ia
                pa2 = sp.add(pa, sp.sym_mv(Ia2, c[k]))
            Ip = sp.inertia_to_parent(b.E, b.r, Ia2)
            fp = sp.force_to_parent(b.E, b.r, pa2)
            if flex is not None and k in self.nodes:  # through the node's Φ_n
                Phi, (Cb, Mb, hb) = self.nodes[k].Phi, flex[b.parent]
                nm = len(hb)
                IP = [[sum((Ip[i][j] * Phi[j][a] for j in range(6)), 0.0) for a in range(nm)]
                      for i in range(6)]  # fmt: skip
                for i in range(6):
                    Cb[i] = [Cb[i][a] + IP[i][a] for a in range(nm)]
                for a in range(nm):
                    Mb[a] = [Mb[a][e] + sum((Phi[i][a] * IP[i][e] for i in range(6)), 0.0)
                             for e in range(nm)]  # fmt: skip
                flex[b.parent][2] = [hb[a] + sum((Phi[i][a] * fp[i] for i in range(6)), 0.0)
                                     for a in range(nm)]  # fmt: skip
            P = IA[b.parent]
            for i in range(6):
                for jj in range(i, 6):
                    P[i][jj] = P[jj][i] = P[i][jj] + Ip[i][jj]
            pA[b.parent] = sp.add(pA[b.parent], fp)
        return AbaPass(U, Dk, uu)

    def aba_forward(self, geo: list[BodyTerms], c: list[Vec], bw: AbaPass,
                    a_N: Vec, flex: dict[int, list[Any]] | None = None
                    ) -> list[Scalar]:  # fmt: skip
        """Pass 3 of :meth:`aba` (root to leaves) on the pass 2 ``bw``: ``a' = X_k a_P +
        c_k``, ``ν̇_k = D⁻¹ (u - Uᵀ a')``, ``a_k = a' + S ν̇_k``; with ``flex`` (the
        blocks condensed by pass 2) ``self.xidot``."""
        U, Dk, uu = bw.U, bw.D, bw.u
        nudot: list[Scalar] = [0.0] * self.model.n
        acc: list[Vec] = []
        self.xidot = {}
        for k in range(self.model.nb):
            b = geo[k]
            ap = a_N if b.parent < 0 else acc[b.parent]
            if flex is not None and k in self.nodes:  # a_P + Φ_n ξ̇_P
                Phi, xd = self.nodes[k].Phi, self.xidot[b.parent]
                ap = [ap[i] + sum((Phi[i][a] * xd[a] for a in range(len(xd))), 0.0)
                      for i in range(6)]  # fmt: skip
            a1 = sp.add(sp.motion_to_child(b.E, b.r, ap), c[k])
            if b.J.cols:
                rhs = [uu[k][a] - sp.sdot(U[k][a], a1) for a in range(len(b.J.cols))]
                zdd = sp.solve_spd(Dk[k], [rhs])[0]
                for (s, rr), z in zip(b.J.cols, zdd, strict=True):
                    nudot[rr] = z
                    a1 = sp.add(a1, sp.scale(z, s))
            acc.append(a1)
            if flex is not None and k in flex:
                Cb, Mb, hb = flex[k]
                rhs = [hb[a] + sum((Cb[i][a] * a1[i] for i in range(6)), 0.0)
                       for a in range(len(hb))]  # fmt: skip
                self.xidot[k] = [-x for x in sp.solve_spd(Mb, [rhs])[0]]
                if k in self.outer:  # the children ride on the body frame
                    Phi, xd = self.outer[k].Phi, self.xidot[k]
                    acc[k] = [a1[i] - sum((Phi[i][a] * xd[a] for a in range(len(xd))), 0.0)
                              + self.frame_bias[k][i] for i in range(6)]  # fmt: skip
        return nudot

    def _frame_blocks(self, k: int, IA: Mat, pA: list[Vec], flex: dict[int, list[Any]]) -> None:
        """Body k's blocks over ``(a_Bo, ξ̇)`` (its frame's acceleration) to blocks over
        ``(a_k, ξ̇)`` with ``a_Bo = a_k + S_b ξ̇ + c_b``, ``S_b = -Φ_on``
        (:meth:`outer_terms`): ``C' = I S_b + C``, ``M' = M + S_bᵀC + CᵀS_b + S_bᵀIS_b``,
        ``h' = h + S_bᵀp + C'ᵀc_b``, ``p' = p + I c_b`` (``S_bᵀ`` of the frame's wrench
        is the modes' share of it)."""
        Phi, cb = self.outer[k].Phi, self.frame_bias[k]
        Cb, Mb, hb = flex[k]
        nm = len(hb)
        Sb = [[-Phi[i][a] for a in range(nm)] for i in range(6)]
        IS = [[sum((IA[i][j] * Sb[j][a] for j in range(6)), 0.0) for a in range(nm)]
              for i in range(6)]  # fmt: skip
        C2 = [[IS[i][a] + Cb[i][a] for a in range(nm)] for i in range(6)]
        M2 = [[Mb[a][e] + sum((Sb[i][a] * Cb[i][e] + Cb[i][a] * Sb[i][e] + Sb[i][a] * IS[i][e]
                               for i in range(6)), 0.0) for e in range(nm)]
              for a in range(nm)]  # fmt: skip
        h2 = [hb[a] + sum((Sb[i][a] * pA[k][i] + C2[i][a] * cb[i] for i in range(6)), 0.0)
              for a in range(nm)]  # fmt: skip
        pA[k] = [pA[k][i] + sum((IA[i][j] * cb[j] for j in range(6)), 0.0) for i in range(6)]
        flex[k] = [C2, M2, h2]

    # ----------------------------------------------------------------------- RNEA
    def newton_euler(self, geo: list[BodyTerms], c: list[Vec], p: list[Vec], a_N: Vec,
                     nudot: Sequence[Scalar]) -> tuple[list[Vec], list[Vec]]:  # fmt: skip
        """The recursive Newton-Euler algorithm in Go_k (Featherstone 2008, Table 5.1)
        on the terms of :meth:`terms`: ``a_k = X_k a_P + c_k + S_k ν̇_k``,
        ``f_k = I_k a_k + p_k``, then ``f_P += X_kᵀ f_k`` from the leaves. Returns the
        spatial accelerations ``a_k`` and the wrenches ``f_k`` that joint k transmits to
        its subtree, about the joint point (both in Go_k)."""
        acc: list[Vec] = []
        f: list[Vec] = []
        for k, b in enumerate(geo):
            a = sp.add(sp.motion_to_child(b.E, b.r, a_N if b.parent < 0 else acc[b.parent]), c[k])
            for s, r in b.J.cols:
                a = sp.add(a, sp.scale(nudot[r], s))
            acc.append(a)
            f.append(sp.add(sp.sym_mv(b.inertia, a), p[k]))
            rot = self.rotors.get(k)
            if rot is not None and b.J.cols:  # the rotor's inertia wrench, on joint k
                f[k] = sp.add(f[k], rot.torque(a[:3], nudot[b.J.cols[0][1]]))
            elif rot is not None:
                f[k] = sp.add(f[k], rot.torque(a[:3], 0.0))
        for k in reversed(range(len(geo))):
            b = geo[k]
            if b.parent >= 0:
                f[b.parent] = sp.add(f[b.parent], sp.force_to_parent(b.E, b.r, f[k]))
        return acc, f

    def inverse_dynamics(self, geo: list[BodyTerms], c: list[Vec], p: list[Vec],
                         Q: list[Scalar], a_N: Vec, nudot: list[Scalar]) -> list[Scalar]:  # fmt: skip
        """The residual of Kane's equations at the accelerations ``nudot``,
        ``S_kᵀ f_k - Q`` per free speed (zero at the ``ν̇`` of :meth:`aba`), from
        :meth:`newton_euler`. Its derivatives at fixed ``nudot`` give those of ``ν̇``:
        ``∂ν̇/∂x = -M⁻¹ ∂(S_kᵀ f_k - Q)/∂x`` (Carpentier and Mansard, RSS 2018)."""
        acc, f = self.newton_euler(geo, c, p, a_N, nudot)
        out: list[Scalar] = [0.0] * self.model.n
        for k, b in enumerate(geo):
            for s, r in b.J.cols:
                out[r] = sp.sdot(s, f[k]) - Q[r]
            rot = self.rotors.get(k)
            if rot is not None and b.J.cols:  # the rotor's extra partial (m e, 0)
                r = b.J.cols[0][1]
                n_R = rot.torque(acc[k][:3], nudot[r])[:3]
                out[r] = out[r] + sp.dot(rot.me, n_R) + rot.armature * nudot[r]
        return out

    # ----------------------------------------------------------------------- entries
    def run(self) -> tuple[list[Scalar], list[Scalar]]:
        """Forward dynamics by ABA; returns (ν̇, q̇)."""
        geo, c, p, a_N = self.terms()
        return self.aba(geo, c, p, self.generalized_forces(), a_N), self.qdot()

    def run_msd(self, eta: Sequence[Scalar] = (), y_xi: Sequence[Scalar] = (), *,
                closure: Closure | None = None
                ) -> tuple[list[Scalar], list[Scalar], list[Scalar]]:  # fmt: skip
        """Momentum-state dynamics; returns (ẏ, q̇, ν) for the MSD states ``y`` held in
        ``u`` (see :mod:`kanedyn.dynamics.msd`). With flexible bodies, ``eta`` and
        ``y_xi`` are the modal coordinates and modal momenta ``y_ξ = ∂T/∂ξ``
        (``Model.nf`` each), and the three outputs run over the full state
        (``[ẏ | ẏ_ξ]``, ``[q̇ | η̇ = ξ]``, ``[ν | ξ]``). ``closure``: a model's closed
        loops (:class:`kanedyn.dynamics.loop_rows.MomentumClosure`): the speeds of step 1
        are closed (with flexible bodies ``[ν | ξ]`` together, on the flexible mass
        matrix), and the loops' generalized forces join ``Q`` in step 2.

        1. Speeds: ``M ν = y_gen - Ωᵀ h`` by ABA at zero speed (``c = 0``, ``a_N = 0``,
           bias ``(h, 0)``), where ``y_gen`` converts a momentum root's total ``H``
           (about its subtree's mass centre c, or its fixed joint point), ``P`` (N) to
           its generalized momenta, ``H_o = H + (c - o) × P`` in Go.
        2. Rates, per joint in Go_k, with ``h^c_k`` the spatial momentum of the subtree
           about the joint point and ``f^c_k`` its external (gravity) force:
           ``ẏ_r = Q_r + s_rᵀ (f^c_k - v_k ×f h^c_k) + ṡ_rᵀ h^c_k`` (``ṡ_r`` the rate of
           the column in Go: ``γ̇_j``, or ``-(Γσ) × R_Go_Gi Δ_j``); for a momentum
           root, the total external wrench in N, its moment about c.

        A flexible body (:class:`ModalBody`) enters step 1 by the condensation of
        :meth:`modal_blocks` and :meth:`aba` with the force ``h = (0, -y_ξ)``: ``M_Ψξ = y_ξ - Cᵀv_k``;
        step 2 by its momentum beyond the rigid body's (:func:`~kanedyn.spatial.modal.
        modal_momentum`, its elastic motion: ``T_xᵀ(ΔM w)_{ω,v}`` in ``h^c_k``), the
        couple ``T_xᵀ(c_f × g, 0)`` of gravity on its displaced mass in ``f^c_k``, its
        first moment ``R c_f`` in the subtree's mass centre, and the modal momentum
        rates ``ẏ_ξ`` of :func:`~kanedyn.spatial.modal.modal_momentum_rate` (the joint
        rows hold unchanged: a joint's partial velocities move its subtree rigidly, so
        the elastic forces, internal to a body, do no work along them). Joints at nodes
        (:meth:`set_modal`): the node frames at rest in step 1 (the node joints'
        articulated inertias in the modal blocks, as in :meth:`aba`), moving with the
        recovered ``ξ`` in step 2, where each subtree on a node adds to its body's
        modal rates (:meth:`node_rates`) and the bodies' momenta move with their
        frames' velocities (:meth:`frame_velocity`).
        """
        from kanedyn.dynamics.msd import momentum_roots

        model, lay = self.model, self.model.layout
        n, nb = model.n, model.nb
        y = self.u
        roots = set(momentum_roots(model))
        self.u = [0.0] * n
        nodes = bool(node_joints(model) or outer_node_joints(model))
        if nodes:  # the node frames at the modal coordinates, at rest
            self.set_modal(eta, [0.0] * model.nf)
            self.frame_bias = {k: [0.0] * 6 for k in self.outer}
        geo0 = self.geometry()
        bodies = self.modal_bodies(geo0, eta)
        first = {mb.k: list(mb.R @ first_moment(mb.md, mb.eta)) for mb in bodies}
        offset = self.mass_centre_offsets(geo0, first)
        y_gen: list[Scalar] = list(y)
        for k in roots:
            b = geo0[k]
            idx = [int(i) for i in lay.u_index[k]]
            H: list[Scalar] = [y[i] for i in idx[:3]]
            P: list[Scalar] = [y[i] for i in idx[3:]] or [0.0, 0.0, 0.0]
            H_o = sp.load_at(sp.mtv(b.E, H), sp.mtv(b.E, P), sp.scale(-1.0, offset[k]))
            for i, val in zip(idx[:3], H_o[:3], strict=True):
                y_gen[i] = val  # R_N_Goᵀ H + (c - o) × R_N_Goᵀ P
            if len(idx) == 6:
                D = sp.mm(self.par("R_Bi_Gi", k), sp.const(lay.Delta[k]))  # R_N_Gi Δ
                for i, val in zip(idx[3:], sp.mtv(D, P), strict=True):
                    y_gen[i] = val
        zero6 = [0.0] * 6
        bias = [(b.h + [0.0, 0.0, 0.0]) if b.has_h else zero6 for b in geo0]
        rest = self.rotor_pieces([zero6] * nb)  # the rotors' inertias, no bias at rest
        blocks = {
            mb.k: self.modal_blocks(
                geo0, bias, mb, np.array([0.0] * 6 + [-x for x in y_xi[mb.sl]], dtype=object)
            )
            for mb in bodies
        }  # M_Ψξ = y_ξ - Cᵀv_k: the modes' rows of M ν = y at zero speed
        flex = blocks or None
        bw = self.aba_backward(geo0, [zero6] * nb, bias, y_gen, rest, flex)
        nu = self.aba_forward(geo0, [zero6] * nb, bw, zero6, flex)
        xi: list[Scalar] = [0.0] * model.nf
        for mb in bodies:
            xi[mb.sl] = self.xidot[mb.k]
        if closure is not None and bodies:  # the modes too take the loops' impulses
            full = closure.flexible_speeds(self, geo0, [*nu, *xi], blocks)
            nu, xi = full[:n], full[n:]
        elif closure is not None:
            nu = closure.speeds(self, geo0, nu, bw)
        self.u = nu
        if nodes:  # the node frames moving with ξ
            self.set_modal(eta, xi)
        geo = self.geometry()
        v = self.velocities(geo)
        vb = [self.frame_velocity(v, k) for k in range(nb)]  # the bodies' frames
        self.rotors = self.rotor_pieces(v)
        Q = self.generalized_forces()
        if closure is not None:
            lam = closure.flexible_forces(self, eta, xi) if bodies else closure.forces(self)
            Q = [a + b for a, b in zip(Q, lam, strict=True)]
        # with loads, gravity is in the input F (as in AppliedLoads)
        g = [0.0, 0.0, 0.0] if self.loads else self.par("gravity")
        # gravity in each Go_k, and the subtree momenta and external forces
        g_go: list[Vec] = []
        hc: list[Vec] = []
        fc: list[Vec] = []
        for b, vk in zip(geo, vb, strict=True):
            gk = sp.mtv(b.E, g if b.parent < 0 else g_go[b.parent])
            g_go.append(gk)
            hc.append(sp.momentum(b.inertia, vk, b.h if b.has_h else None))
            fc.append(sp.gravity_force(b.inertia[3][3], gk, b.com))
        for k, rot in self.rotors.items():  # a rotor's momentum is joint k's subtree's
            hc[k] = sp.add(hc[k][:3], rot.H) + hc[k][3:]
        ydot_xi: list[Scalar] = [0.0] * model.nf
        r_field = self.field_positions(geo)[1] if bodies and model.central_gravity else None
        for mb in bodies:  # the elastic motion's momenta, gravity's couple, the modal rates
            k, x = mb.k, np.array(xi[mb.sl], dtype=object)
            w = mb.body_velocity(vb[k])
            dh = mb.Tx.T @ modal_momentum(mb.md, mb.eta, x, w[:3], w[3:])[:6]
            hc[k] = sp.add(hc[k], list(dh))
            couple = sp.cross(list(first_moment(mb.md, mb.eta)), list(mb.g))
            fc[k] = sp.add(fc[k], sp.mv(mb.R.tolist(), couple) + [0.0, 0.0, 0.0])
            rate = modal_momentum_rate(mb.md, mb.eta, x, w[:3], w[3:], mb.g)
            if r_field is not None:  # the field on the displaced mass, beyond the rigid body's
                r = mb.R.T @ np.array(list(r_field[k]), dtype=object)
                Qc = modal_central_forces(
                    self.ar, mb.md, mb.eta, self.par("mu"), self.par("com", k), r
                )
                fc[k] = sp.add(fc[k], list(mb.Tx.T @ Qc[:6]))
                rate = rate + Qc[6:]
            ydot_xi[mb.sl] = list(rate)
        if self.loads:
            fc = [sp.add(f, fl) for f, fl in zip(fc, self.load_forces(geo), strict=True)]
        elif self.model.central_gravity is not None:
            fc = [sp.add(f, fl) for f, fl in zip(fc, self.central_forces(geo), strict=True)]
        if self.body_loads is not None:
            fc = [
                sp.add(f, fl)
                for f, fl in zip(fc, self.body_forces(geo, *self.body_loads), strict=True)
            ]
        for k in reversed(range(nb)):
            b = geo[k]
            if k in self.outer:  # body k's frame moves with -Φ_on ξ_k in Go_k
                self.node_rates(ydot_xi, self.outer[k], vb[k], hc[k], fc[k], -1.0)
            if b.parent >= 0:
                h_p = sp.force_to_parent(b.E, b.r, hc[k])
                f_p = sp.force_to_parent(b.E, b.r, fc[k])
                if k in self.nodes:  # Gi moves with Φ_n ξ_P in Go_P
                    self.node_rates(ydot_xi, self.nodes[k], vb[b.parent], h_p, f_p, 1.0)
                hc[b.parent] = sp.add(hc[b.parent], h_p)
                fc[b.parent] = sp.add(fc[b.parent], f_p)
        ydot: list[Scalar] = [0.0] * n
        for k, b in enumerate(geo):
            if k in roots:
                continue
            drive = sp.sub(fc[k], sp.cross_force(v[k], hc[k]))
            for (s, r), ds in zip(b.J.cols, b.J.dcols, strict=True):
                ydot[r] = Q[r] + sp.sdot(s, drive) + sp.sdot(ds, hc[k])
        for k in roots:
            b = geo[k]
            idx = [int(i) for i in lay.u_index[k]]
            n_go, f_go = fc[k][:3], fc[k][3:]
            n_go = sp.add(n_go, [Q[i] for i in idx[:3]])  # the root's own effort (Go)
            for s, r in b.J.cols[3:]:
                f_go = sp.add(f_go, sp.scale(Q[r], s[3:]))
            if len(idx) == 6:  # about the subtree's mass centre
                n_go = sp.load_at(n_go, f_go, offset[k])[:3]
            F_N = sp.mv(b.E, f_go)
            N_o = sp.mv(b.E, n_go)
            if len(idx) == 6:
                for i, val in zip(idx[3:], F_N, strict=True):
                    ydot[i] = val
            for i, val in zip(idx[:3], N_o, strict=True):
                ydot[i] = val
        return [*ydot, *ydot_xi], [*self.qdot(), *xi], [*nu, *xi]

    def node_rates(self, ydot_xi: list[Scalar], nt: NodeTerms, v_b: Vec, h: Vec, f: Vec,
                   sign: float) -> None:  # fmt: skip
        """The momentum rates of a node's body's modes from the subtree that rides on
        the node (:meth:`run_msd`), added to ``ydot_xi``: the subtree's momentum ``h``
        and external force ``f`` and the node's ``Φ``, ``Φ̇`` (:class:`NodeTerms`) in
        the frame of the body's joint, which moves with the body's frame at ``v_b``;
        ``sign`` -1 at the body's own outer node (its frame moves with ``-Φ_on ξ``).

        The momenta ``y_ξ = ∂T/∂ξ`` hold ``±Φᵀh`` for the subtree (its velocity has
        ``±Φξ``), whose rate is ``±(Φᵀ(f + f_r) + (v_b ×ₘ Φ + Φ̇)ᵀ h)`` with ``f_r`` the
        reaction at the node; the body's own modal rates
        (:func:`~kanedyn.spatial.modal.modal_momentum_rate`) lack the reaction's
        ``∓Φᵀf_r`` on its modes, and the two cancel:

        .. math:: \\dot y_\\xi \\mathrel{+}= \\pm\\left(\\Phi^T(f - v_b \\times_f h)
            + \\dot\\Phi^T h\\right)
        """
        drive = sp.sub(f, sp.cross_force(v_b, h))
        Phi, Phi_dot, sl = nt.Phi, nt.Phi_dot, nt.modes
        for a in range(sl.stop - sl.start):
            term = sum((Phi[i][a] * drive[i] + Phi_dot[i][a] * h[i] for i in range(6)), 0.0)
            ydot_xi[sl.start + a] = ydot_xi[sl.start + a] + (term if sign > 0 else -term)

    def mass_centre_offsets(
        self, geo: list[BodyTerms], extra: dict[int, Vec] | None = None
    ) -> list[Vec]:
        """``o_k - c_k`` per joint in Go_k: from the mass centre of the subtree of k to
        its joint point, ``-Σ m_i (r_i - o_k) / Σ m_i`` (the first moments gathered from
        the leaves, ``s_P += E s_k + m_k r``); ``extra`` adds first moments per body
        (Go_k: a flexible body's displaced mass ``R c_f``)."""
        mass = [self.par("mass", k) for k in range(len(geo))]
        first = [sp.scale(m, b.com) for m, b in zip(mass, geo, strict=True)]
        for k, s in (extra or {}).items():
            first[k] = sp.add(first[k], s)
        for k in reversed(range(len(geo))):
            b = geo[k]
            if b.parent >= 0:
                first[b.parent] = sp.add(
                    first[b.parent], sp.add(sp.mv(b.E, first[k]), sp.scale(mass[k], b.r))
                )
                mass[b.parent] = mass[b.parent] + mass[k]
        return [
            sp.scale(-1.0 / m if not _is_zero(m) else 0.0, s)
            for m, s in zip(mass, first, strict=True)
        ]

    def qdot(self) -> list[Scalar]:
        """Kinematic equations (:func:`kanedyn.joints.qdot`) at the normalized
        coordinates."""
        u = np.array(self.u, dtype=object)
        return joints.qdot(self.model.layout, self.qn, u).tolist()


def aba(model: Model, state: State, loads: Any = None, t: float = 0.0) -> Array:
    """``d/dt [u | s]`` by the articulated-body algorithm (Featherstone 2008, Table 7.1),
    written once over the scalar protocol (:class:`Recursion`; the compiled engine traces
    the same lines).

    The applied loads (springs, dampers, gravity, ``loads``) are those of
    :func:`kanedyn.dynamics.loads.applied_loads`, as for :func:`kanedyn.forward_dynamics`,
    which solves the same equations by CRBA and Cholesky: each is the other's oracle.
    ABA is an algorithm of trees: a model with closed loops is refused (the loops'
    constrained equations are :func:`kanedyn.forward_dynamics`'s). A geared rotor is a
    term of the recursion (a second piece on its joint's speed).

    >>> import kanedyn as kd
    >>> m = kd.examples.double_pendulum()
    >>> s = m.set_joint(m.initial_state(), "joint0", angles=(0.3,))
    >>> bool(abs(kd.aba(m, s) - kd.forward_dynamics(m, s)).max() < 1e-12)
    True
    """
    if model.loops:
        raise ModelError(
            "kd.aba: the articulated-body algorithm is for trees; this model has closed "
            "loops (use kd.forward_dynamics, which solves the constrained equations)"
        )
    if model.is_symbolic:
        raise ModelError("kd.aba: the model has symbolic parameters (use model.subs first)")
    nudot, _ = Recursion.at_state(model, state, loads, t).run()
    return np.array(nudot, dtype=float)
