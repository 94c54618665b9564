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
composition down the tree is done by pointer jumping on 4×4 homogeneous transforms,
``T <- T[a_p] @ T`` over the schedule of :class:`kanedyn.model.plan.Plan` (⌈log2 depth⌉
batched products), never by a loop over bodies.

Every array may carry leading batch axes (states and parameters of an ensemble): the
single-state path is the batched path with an empty batch shape.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import (
    Params,
    modal_data,
    node_joints,
    outer_node_joints,
    params_of,
    plan_of,
)
from kanedyn.spatial.algebra import FORCE_CROSS, MOTION_CROSS, bilinear, cross, mv, take_last
from kanedyn.spatial.arithmetic import NUMPY
from kanedyn.spatial.modal import node_frame, node_subspace

__all__ = [
    "FORCE_CROSS",
    "MOTION_CROSS",
    "Kinematics",
    "NodeKinematics",
    "bilinear",
    "cross",
    "kinematics",
    "mv",
    "rest_kinematics",
]

Array = NDArray[np.float64]


_EYE4 = np.eye(4)
_EYE3 = np.eye(3)


def _pad(x: Array) -> Array:
    """``x`` (..., m) with a trailing zero (..., m + 1): the sentinel entry."""
    out = np.zeros(x.shape[:-1] + (x.shape[-1] + 1,))
    out[..., :-1] = x
    return out


@attrs.frozen(eq=False, slots=False)
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

    Spatial (Plücker) quantities about the point ``origin`` (..., 3) (N's origin, or the
    joint point of the first root with slides: ``Plan.origin_joint``), in N: ``V`` (nb, 6)
    = (ω_i, v_O) the body's spatial velocity (v_O: velocity of the body point at the
    origin); ``Phi`` (nj, 6, 6) the joint's motion subspace, row j < 3 = (h_j, o × h_j)
    for the rotational axis ``h_j = R_N_Go Γ[:, j]``, row 3 + j = (0, R_N_Gi Δ[:, j]);
    ``V_rel`` (nj, 6) = Φᵀ [σ | ṡ] the joint's relative spatial velocity. ``r_rel``
    (nb, 3), ``p_rel`` (nb, 3) and ``o_rel`` (nj, 3) are the mass centres, body-frame
    origins and joint points relative to the origin, composed down the tree from it
    (``r = origin + r_rel``, formed on first use, as ``p`` and ``o``): a spacecraft 7e6 m
    from N's origin keeps its lever arms and moments exact (docs/howto/central-gravity.md,
    round-off at orbital distances).

    With a batch of states or parameters every array has the leading batch axes too.

    ``nodes`` (:class:`NodeKinematics`) holds the elastic motion of the joints attached
    at nodes of flexible bodies (``Joint.inner_node``), None without such joints.
    """

    R_N_B: Array
    omega: Array
    R_N_Gi: Array
    R_N_Go: Array
    Gamma: Array
    Gamma_dot: Array
    Gds: Array
    omega_rel: Array
    w: Array
    omega_in: Array
    V: Array
    Phi: Array
    V_rel: Array
    params: Params
    origin: Array
    r_rel: Array
    p_rel: Array
    o_rel: Array
    nodes: NodeKinematics | None = None

    @cached_property
    def r(self) -> Array:
        """(nb, 3) the mass centres, ``origin + r_rel``."""
        return self.r_rel + self.origin[..., None, :]

    @cached_property
    def p(self) -> Array:
        """(nb, 3) the body-frame origins, ``origin + p_rel``."""
        return self.p_rel + self.origin[..., None, :]

    @cached_property
    def o(self) -> Array:
        """(nj, 3) the joint points, ``origin + o_rel``."""
        return self.o_rel + self.origin[..., None, :]

    @cached_property
    def v(self) -> Array:
        """(nb, 3) the mass centres' velocities, ``v_O + ω × r_rel`` (``V = (ω, v_O)``)."""
        return self.V[..., 3:] + cross(self.omega, self.r_rel)

    @cached_property
    def v_o(self) -> Array:
        """(nj, 3) the joint points' velocities (the outer bodies'), ``v_O + ω × o_rel``."""
        return self.V[..., 3:] + cross(self.omega, self.o_rel)


@attrs.frozen(eq=False)
class NodeKinematics:
    """The node terms of the joints attached at nodes of flexible bodies (one state).

    Joint k at node n of the flexible inner body i (Kane_NBody_Flex slide 34): Gi rides
    on the node frame of :func:`kanedyn.spatial.modal.node_frame` (``C``, ``d``, ``W``,
    body axes of i, ``R = R_N_Bi``), which moves relative to Bi with the spatial
    velocity (about the origin, N) ``V_node,k = S_ξ,k ξ``,

    .. math::

        S_{\\xi,k} = \\begin{bmatrix} R W \\\\ R\\Psi_n + [x_n]_\\times R W \\end{bmatrix},
        \\qquad x_n = p_i + R d \\ (\\text{the deflected node, from the origin}),

    (:func:`kanedyn.spatial.modal.node_subspace`) so that ``V_o = V_i + V_node + V_rel``
    for the outer body. At a node of the flexible outer body k (``Joint.outer_node``;
    Go fixed in the node frame, ``C_out`` its inverse) the outer body moves by
    ``V_o = V_Go - V_on`` with ``V_on = S_on ξ_k`` of the same form (``R = R_N_Bo``, the
    node of body k): ``S_ξ,k`` gains ``-S_on``. ``S_xi_dot`` is the rate of ``S_ξ``
    along the motion, ``V_i ×ₘ S_in + Φ̇_in - V_o ×ₘ S_on - Φ̇_on`` (``Φ̇`` of
    ``node_subspace``, the rate in the body), and the joint's bias (the rate of
    ``V_node`` at constant ``ξ``, added to its ``c_k``:
    :func:`kanedyn.dynamics.partials.bias_accelerations`) is ``c_node = Ṡ_ξ ξ +
    V_on ×ₘ V_rel`` (the joint's own term taken with ``V_o``, its frame moving with
    ``V_Go``). Arrays (index k over all joints, zero for the others): ``S_xi``,
    ``S_xi_dot`` (nj, 6, nf) over all modal speeds, ``V_node`` (nj, 6), ``c_node``
    (nj, 6), ``V_on`` (nj, 6) (zero but at outer nodes).
    """

    S_xi: Array
    V_node: Array
    c_node: Array
    S_xi_dot: Array
    V_on: Array


def joint_rotations(model: Model, qpad: Array, upad: Array) -> tuple[Array, Array, Array, Array]:
    """Per-joint ``R_Gi_Go``, ``Γᵀ`` (rows are Γ's columns), ``Γ̇`` and ``Γ̇σ`` (Go), from
    the joint model (:func:`kanedyn.joints.gimbal`, :func:`kanedyn.joints.spherical`),
    all joints of a kind at once. Joints without rotation: ``R_Gi_Go = U``, ``Γ = 0``.
    ``qpad``, ``upad`` (..., nq + 1), (..., n + 1) end with the sentinel zero.
    """
    lay, pl = model.layout, plan_of(model)
    if pl.gimbal_all:
        return _gimbal(model, qpad, upad)
    batch = qpad.shape[:-1]
    parts = []  # (R_Gi_Go, Γᵀ, Γ̇, Γ̇σ) of the gimbals, the spherical joints, the others
    if lay.gimbal.size:
        parts.append(_gimbal(model, qpad, upad))
    if pl.has_spherical:
        parts.append(joints.spherical(take_last(qpad, lay.quat_q)))
    if pl.n_other:
        zeros = np.zeros(batch + (pl.n_other, 3, 3))
        parts.append((zeros + _EYE3, zeros, zeros, zeros[..., 0]))
    if len(parts) == 1:
        return parts[0]
    R, GammaT, Gamma_dot, Gds = (
        _assemble(arrays, batch, pl.joint_order, nd)
        for arrays, nd in zip(zip(*parts, strict=True), (3, 3, 3, 2), strict=True)
    )
    return R, GammaT, Gamma_dot, Gds


def _assemble(arrays: tuple[Array, ...], batch: tuple[int, ...], order: Any, nd: int) -> Array:
    """Per-joint array from the blocks [gimbals | spherical | others] (core ndim ``nd``)."""
    if batch:
        arrays = tuple(np.broadcast_to(a, batch + a.shape[-nd:]) for a in arrays)
    return np.take(np.concatenate(arrays, axis=-nd), order, axis=-nd)


def _gimbal(model: Model, qpad: Array, upad: Array) -> tuple[Array, Array, Array, Array]:
    """All gimbal joints at once (:func:`kanedyn.joints.gimbal` on float arrays, with the
    axis constants of the model's plan)."""
    lay, pl = model.layout, plan_of(model)
    theta, sigma = take_last(qpad, lay.gimbal_q), take_last(upad, lay.gimbal_u)
    R, GammaT, Gamma_dot, Gds = joints.gimbal(NUMPY, pl.gimbal_axes, theta, sigma, pl.gimbal_dof)
    if GammaT.ndim < R.ndim:  # one-axis gimbals: Γ is constant, give it the batch axes
        GammaT, Gamma_dot = (np.broadcast_to(a, R.shape) for a in (GammaT, Gamma_dot))
        Gds = np.broadcast_to(Gds, R.shape[:-1])
    return R, GammaT, Gamma_dot, Gds


def kinematics(model: Model, state: State) -> Kinematics:
    """Attitudes, mass-centre positions, angular velocities and velocities of all bodies.

    Implements the chain Bi → Gi → slide → rotation → Go → Bo of Stoneking's joint model
    (42 ``MapStateVectorToBodyStates``); see the module docstring for the equations.

    >>> import kanedyn as kd
    >>> m = kd.examples.double_pendulum()
    >>> kd.kinematics(m, m.initial_state()).r.shape
    (2, 3)

    With flexible bodies, the body frames' (the undeformed bodies'): the joints'
    coordinates and speeds of the state (:func:`kanedyn.dynamics.flex.node_motion`
    gives a node's deflected motion).
    """
    model.check_state(state, flexible=True)
    nq, n = model.nq, model.n
    if model.nf and len(state.q) > nq:
        return kinematics_at(model, state.q[:nq], state.u[:n], eta=state.q[nq:], xi=state.u[n:])
    return kinematics_at(model, state.q[:nq], state.u[:n])


def kinematics_at(
    model: Model,
    q: Array,
    u: Array,
    params: Params | None = None,
    eta: Array | None = None,
    xi: Array | None = None,
) -> Kinematics:
    """Kinematics at ``q`` (..., nq), ``u`` (..., n) with ``params`` (default: the model's).

    A model with joints at nodes (``Joint.inner_node``, ``outer_node``) needs the modal
    coordinates ``eta`` and speeds ``xi`` (nf each, one state): ``C_in`` (``C_out``) of
    those joints is the node frame's (:func:`kanedyn.spatial.modal.node_frame`) and the
    velocities gain ``V_node`` (:class:`NodeKinematics`).

    Steps (all joints and bodies at once):

    1. ``J_k = [R_Gi_Go, Δd]`` and ``T_Bi_Bo = C_in J C_out`` (see :mod:`kanedyn.model.plan`);
    2. pointer jumping ``T <- T[a_p] @ T`` gives ``T_N_B``; then ``T_N_Gi = T_N_Bi C_in``,
       ``T_N_Go = T_N_Gi J``, ``r = T_N_B [com; 1]``;
    3. ``Φ`` from ``h = R_N_Go Γ``, ``d = R_N_Gi Δ``; ``V_rel = Φᵀ[σ | ṡ]``,
       ``V = P V_rel``; ``v_x = v_O + ω × x`` for the mass centres and joint points.
    """
    pl = plan_of(model)
    pa = params_of(model) if params is None else params
    nb = pl.nb
    qpad, upad = _pad(q), _pad(u)
    R_Gi_Go, GammaT, Gamma_dot, Gds = joint_rotations(model, qpad, upad)
    batch = q.shape[:-1]
    if pa.batch_shape:
        batch = np.broadcast_shapes(batch, pa.batch_shape)

    frames: list[tuple[Any, ...]] = []
    C_in, C_out = pa.C_in, pa.C_out
    if pl.has_nodes:
        C_in, C_out, frames = _node_placements(model, pa, q, eta, xi)
    J = np.zeros(R_Gi_Go.shape[:-2] + (4, 4))
    J[..., :3, :3] = R_Gi_Go
    J[..., 3, 3] = 1.0
    if pl.has_slides:
        J[..., :3, 3] = (take_last(qpad, model.layout.trn_q)[..., None, :] @ pl.Delta_T)[..., 0, :]

    # T_Bi_Go = C_in J; a root's is taken relative to the origin (the first translating
    # root's joint point), so that every position below is formed relative to it
    A = C_in @ J
    k0 = pl.origin_joint
    if k0 is None:  # the origin is N's
        origin = np.zeros(batch + (3,))
    else:
        origin = A[..., k0, :3, 3].copy()
        if pl.roots.size == 1:  # the only root: its point is the origin (x - x = 0)
            A[..., k0, :3, 3] = 0.0
        else:
            at = A[..., :3, 3]  # a view
            at[..., pl.roots, :] -= origin[..., None, :]
        if origin.shape != batch + (3,):
            origin = np.broadcast_to(origin, batch + (3,))
    T = np.empty(batch + (nb + 1, 4, 4))
    T[..., :nb, :, :] = A @ C_out
    T[..., nb, :, :] = _EYE4
    for a in pl.jumps:
        T = T.take(a, axis=-3) @ T
    T_N_B = T[..., :nb, :, :]
    T_in = T.take(pl.parent_ext, axis=-3)  # (take: cheaper than T[..., idx, :, :])
    T_N_Go = T_in @ A
    R_N_Go, o_rel = T_N_Go[..., :3, :3], T_N_Go[..., :3, 3]
    R_N_Gi = T_in[..., :3, :3] @ C_in[..., :3, :3]
    r_rel = (T_N_B @ pa.com_h)[..., :3, 0]

    # motion subspace Φ: the joint's rows S (Go, :func:`kanedyn.joints.subspace_rows`) as
    # motion vectors about the origin in N, (ω, v) -> (R_N_Go ω, R_N_Go v + o × R_N_Go ω),
    # block by block (S's rotational rows are (γ_j, 0), its slide rows (0, δ_c))
    rot_rows, slide_rows = joints.subspace_rows(GammaT, R_Gi_Go, model.layout.Delta, pl.has_slides)
    R_T = R_N_Go.swapaxes(-1, -2)
    Phi = np.zeros(batch + (nb, 6, 6))
    Phi[..., :3, :3] = rot_rows @ R_T  # rows h_j = R_N_Go γ_j
    Phi[..., :3, 3:] = cross(o_rel[..., None, :], Phi[..., :3, :3])
    if slide_rows is not None:
        Phi[..., 3:, 3:] = slide_rows @ R_T  # rows d_c = R_N_Go δ_c
    z = take_last(upad, pl.slots_u)  # (..., nj, 6) = [σ | ṡ], zero in unused slots
    V_rel = (z[..., None, :] @ Phi)[..., 0, :]
    nodes = None
    if frames:
        nodes = _node_velocities(model, frames, T_N_B, V_rel, xi)  # type: ignore[arg-type]
        V_ext = pl.path_ext @ (V_rel + nodes.V_node)
    else:
        V_ext = pl.path_ext @ V_rel  # row nb: N at rest
    V = V_ext[..., :nb, :]
    omega_rel = V_rel[..., :3]
    if pl.has_slides:
        w = (z[..., None, 3:] @ Phi[..., 3:, 3:])[..., 0, :]
    else:
        w = np.zeros(V_rel.shape[:-1] + (3,))
    omega_in = V_ext.take(pl.parent_ext, axis=-2)[..., :3]
    return Kinematics(
        R_N_B=T_N_B[..., :3, :3],
        omega=V[..., :3],
        R_N_Gi=R_N_Gi,
        R_N_Go=R_N_Go,
        Gamma=GammaT.swapaxes(-1, -2),
        Gamma_dot=Gamma_dot,
        Gds=Gds,
        omega_rel=omega_rel,
        w=w,
        omega_in=omega_in,
        V=V,
        Phi=Phi,
        V_rel=V_rel,
        params=pa,
        origin=origin,
        r_rel=r_rel,
        p_rel=T_N_B[..., :3, 3],
        o_rel=o_rel,
        nodes=nodes,
    )


def _node_placements(
    model: Model, pa: Params, q: Array, eta: Array | None, xi: Array | None
) -> tuple[Array, Array, list[tuple[Any, ...]]]:
    """``C_in``, ``C_out`` with the node frames of the node joints
    (:class:`NodeKinematics`): at an inner node, ``T_Bi_Gi = [C R_Bi_Gi, d + C
    (inner_point - r_n)]`` (Gi fixed in the node frame); at an outer node, ``T_Bo_Go =
    [C R_Go_Boᵀ, d + C (outer_point - r_n)]`` and ``C_out`` its inverse; and per node
    ``(joint k, body, sign, modes, d, W, Ẇ, Ψ_n)`` (sign -1 at an outer node). For a
    model with such joints (``Plan.has_nodes``)."""
    inner, outer = node_joints(model), outer_node_joints(model)
    names = [model.joints[k].name for k, _, _ in inner] + [model.joints[k].name for k, _ in outer]
    if eta is None or xi is None:
        raise ModelError(
            f"kinematics: joints {names} attach at nodes of flexible bodies; their "
            "kinematics need the modal coordinates and speeds (pass the model's full State)"
        )
    if q.ndim != 1 or pa.batch_shape or np.ndim(eta) != 1:
        raise ModelError(
            f"kinematics: joints {names} attach at nodes of flexible bodies; batches of "
            "states or parameters are not taken with them yet"
        )
    slices = dict(model.modal_slices())
    C_in = np.array(pa.C_in, dtype=float)
    C_out = np.array(pa.C_out, dtype=float)
    frames: list[tuple[Any, ...]] = []
    for sign, k, i, n in [(1.0, k, i, n) for k, i, n in inner] + [
        (-1.0, k, k, n) for k, n in outer
    ]:
        md = modal_data(pa, model, i)
        sl = slices[i]
        C, d, W, W_dot = node_frame(md, n, eta[sl], xi[sl])
        if sign > 0:
            C_in[k, :3, :3] = C @ pa.C_in[k, :3, :3]
            C_in[k, :3, 3] = d + C @ (pa.C_in[k, :3, 3] - md.node_positions[n])
        else:
            R_Go_Bo = pa.C_out[k, :3, :3]
            outer_point = -R_Go_Bo.T @ pa.C_out[k, :3, 3]
            R = R_Go_Bo @ C.T  # T_Go_Bo: the inverse of T_Bo_Go
            C_out[k, :3, :3] = R
            C_out[k, :3, 3] = -R @ (d + C @ (outer_point - md.node_positions[n]))
        frames.append((k, i, sign, sl, d, W, W_dot, md.Psi[n]))
    return C_in, C_out, frames


def _node_velocities(
    model: Model, frames: list[tuple[Any, ...]], T_N_B: Array, V_rel: Array, xi: Array
) -> NodeKinematics:
    """:class:`NodeKinematics` of the node frames ``frames`` (of :func:`_node_placements`)
    at the bodies' placements ``T_N_B`` and the joints' relative velocities ``V_rel``:
    ``S_ξ`` and ``V_node = S_ξ ξ`` first, then with the bodies' velocities (the path
    sums of ``V_rel + V_node``) the rate ``Ṡ_ξ`` and the bias ``c_node``."""
    pl = plan_of(model)
    nb, nf = model.nb, model.nf
    S_in = np.zeros((nb, 6, nf))  # the inner nodes' subspaces
    S_on = np.zeros((nb, 6, nf))  # the outer nodes'
    S_dot = np.zeros((nb, 6, nf))  # their rates in their bodies, signed
    for k, i, sign, sl, d, W, W_dot, Psi in frames:
        R = T_N_B[i, :3, :3]
        Phi, Phi_dot = node_subspace(R, T_N_B[i, :3, 3] + R @ d, W, W_dot, Psi, xi[sl])
        (S_in if sign > 0 else S_on)[k, :, sl] += Phi
        S_dot[k, :, sl] += sign * Phi_dot
    S_xi = S_in - S_on
    V_node, V_on = S_xi @ xi, S_on @ xi
    V_ext = pl.path_ext @ (V_rel + V_node)
    V_in, V_Bo = V_ext[pl.parent_ext], V_ext[:nb]  # the inner bodies' (N's: zero), the outer

    def times(V: Array, S: Array) -> Array:  # V ×ₘ S, column by column
        return bilinear(V[:, None, :], S.swapaxes(-1, -2), MOTION_CROSS).swapaxes(-1, -2)

    S_xi_dot = S_dot + times(V_in, S_in) - times(V_Bo, S_on)
    c_node = S_xi_dot @ xi + bilinear(V_on, V_rel, MOTION_CROSS)
    return NodeKinematics(S_xi=S_xi, V_node=V_node, c_node=c_node, S_xi_dot=S_xi_dot, V_on=V_on)


def rest_kinematics(model: Model, q: Array) -> tuple[Kinematics, Array | None]:
    """The kinematics at the coordinates ``q`` (``[q_joints | η]`` with flexible
    bodies) and zero speeds, where the mass matrix and the momentum states' speeds take them (:func:`kanedyn.dynamics.msd.speeds_at`), and the modal
    coordinates ``η`` (None without flexible bodies)."""
    if not model.nf:
        return kinematics_at(model, q, np.zeros(model.n)), None
    eta = q[model.nq :]
    zero = np.zeros(model.n)
    return kinematics_at(model, q[: model.nq], zero, eta=eta, xi=np.zeros(model.nf)), eta
