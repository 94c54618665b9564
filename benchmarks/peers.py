"""The same kanedyn model, built in each peer: Pinocchio (``pin``) and MuJoCo.

Each builder returns a :class:`Peer`: a forward-dynamics callable taking kanedyn's
``q``, ``u`` and the joint efforts ``tau`` (kanedyn order), plus the raw call to time.

Mapping of Stoneking's joint model (kanedyn) onto the peers' joints:

* the frame of a peer body is the joint's Go frame; the kanedyn body Bo sits in it at
  ``T_Go_Bo = C_out`` (``R_Go_Bo``, ``-R_Go_Bo outer_point``); a child's joint is placed
  at ``C_out(parent) C_in(child)``;
* slides: one prismatic joint per DOF, along the Gi axis named by ``trn_seq``;
* gimbals: one revolute joint per angle, about the axes of ``rot_seq`` in order
  (body-fixed sequence); spherical: a ball joint (quaternion, local angular velocity);
* a free joint is three slides and a ball, as in kanedyn (speeds: inertial translation
  rates and body angular velocity);
* springs and dampers are passed as generalized forces (kanedyn's ``Q``).

Intermediate Pinocchio bodies (between the DOF of one kanedyn joint) are massless;
MuJoCo puts all the DOF of one kanedyn joint in one body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

import kanedyn as kd
from kanedyn.spatial.rotation import dcm_to_quat

__all__ = ["Peer", "available", "mjcf", "mjcf_point", "mujoco_peer", "pinocchio_peer"]


@attrs.frozen
class Peer:
    """``accelerations(q, u, tau) -> u̇`` in kanedyn order; ``timed()`` the bare call at
    the state set by ``set_state(q, u, tau)``; ``name`` and ``version``."""

    name: str
    version: str
    accelerations: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    set_state: Callable[[np.ndarray, np.ndarray, np.ndarray], None]
    timed: Callable[[], Any]
    #: Pinocchio only, models without quaternions: ``(∂u̇/∂q, ∂u̇/∂u, ∂u̇/∂τ)`` in
    #: kanedyn order by ``pin.computeABADerivatives``, and its bare timed call
    derivatives: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple] | None = None
    timed_derivatives: Callable[[], Any] | None = None
    #: Pinocchio only: ``(pin_model, pin_data, q_map, v_map)``, kanedyn's index of each
    #: of Pinocchio's coordinates and speeds, for loops written against Pinocchio itself
    handles: tuple[Any, ...] = ()


def available() -> dict[str, str | None]:
    """Peer package -> version, or None when it is not installed."""
    out: dict[str, str | None] = {}
    for name, module in (("pinocchio", "pinocchio"), ("mujoco", "mujoco")):
        try:
            mod = __import__(module)
            out[name] = getattr(mod, "__version__", "?")
        except ImportError:
            out[name] = None
    return out


def _homogeneous(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = p
    return T


def _c_in(j: kd.Joint) -> np.ndarray:
    return _homogeneous(j.inner_rotation, j.inner_point)


def _c_out(j: kd.Joint) -> np.ndarray:
    return _homogeneous(j.outer_rotation, -j.outer_rotation @ j.outer_point)


def _axes(seq: str, n: int) -> list[int]:
    return [int(c) - 1 for c in seq[:n]]


# --------------------------------------------------------------------------- Pinocchio
def pinocchio_peer(model: kd.Model) -> Peer:
    """Pinocchio model of ``model``; forward dynamics by ``pin.aba``."""
    import pinocchio as pin

    pm = pin.Model()
    pm.gravity = pin.Motion(np.array(model.gravity, dtype=float), np.zeros(3))
    lay = model.layout
    frame: dict[int, tuple[int, np.ndarray]] = {}  # body -> (pin joint, T_jointframe_Bo)
    q_map: list[int] = []  # pin q index -> kanedyn q index (quaternions reordered below)
    v_map: list[int] = []
    R_axis = (pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ)
    P_axis = (pin.JointModelPX, pin.JointModelPY, pin.JointModelPZ)
    for k, j in enumerate(model.joints):
        parent = lay.parent[k]
        jid, X = (0, np.eye(4)) if parent < 0 else frame[parent]
        place = X @ _c_in(j)
        qi, ui = lay.q_index[k], lay.u_index[k]
        dofs: list[tuple[Any, list[int], list[int]]] = []
        nr = j.n_rot_coordinates
        for c, a in enumerate(_axes(j.trn_seq, j.trn_dof)):
            dofs.append((P_axis[a](), [qi[nr + c]], [ui[j.rot_dof + c]]))
        if j.rot_type == "spherical":
            dofs.append((pin.JointModelSpherical(), list(qi[:4]), list(ui[:3])))
        else:
            for c, a in enumerate(_axes(j.rot_seq, j.rot_dof)):
                dofs.append((R_axis[a](), [qi[c]], [ui[c]]))
        for d, (jm, qs, us) in enumerate(dofs):
            se3 = pin.SE3(place[:3, :3].copy(), place[:3, 3].copy())
            jid = pm.addJoint(jid, jm, se3, f"{j.name}_{d}")
            place = np.eye(4)
            q_map += qs
            v_map += us
        body = model.bodies[k]
        X_b = place @ _c_out(j)  # T_jointframe_Bo (place is identity after a DOF)
        inertia = pin.Inertia(
            float(body.mass), np.array(body.com, float), np.array(body.inertia, float)
        )
        pm.appendBodyToJoint(jid, inertia, pin.SE3(X_b[:3, :3].copy(), X_b[:3, 3].copy()))
        frame[k] = (jid, X_b)
    data = pm.createData()
    q_map_a, v_map_a = np.array(q_map), np.array(v_map)
    v_inv = np.empty_like(v_map_a)
    v_inv[v_map_a] = np.arange(v_map_a.size)
    cur: dict[str, np.ndarray] = {}

    def set_state(q: np.ndarray, u: np.ndarray, tau: np.ndarray) -> None:
        cur["q"], cur["v"], cur["tau"] = q[q_map_a].copy(), u[v_map_a].copy(), tau[v_map_a].copy()

    def accelerations(q: np.ndarray, u: np.ndarray, tau: np.ndarray) -> np.ndarray:
        a = pin.aba(pm, data, q[q_map_a], u[v_map_a], tau[v_map_a])
        return np.asarray(a)[v_inv]

    def timed() -> Any:
        return pin.aba(pm, data, cur["q"], cur["v"], cur["tau"])

    def derivatives(q: np.ndarray, u: np.ndarray, tau: np.ndarray) -> tuple:
        if lay.quat_q.size:
            raise ValueError("derivatives: models without quaternions only")
        dq, dv, Minv = (
            np.array(a)
            for a in pin.computeABADerivatives(pm, data, q[q_map_a], u[v_map_a], tau[v_map_a])
        )
        Minv = np.triu(Minv) + np.triu(Minv, 1).T  # pin may fill the upper triangle only
        q_inv = np.empty_like(q_map_a)
        q_inv[q_map_a] = np.arange(q_map_a.size)
        ix = np.ix_(v_inv, v_inv)
        return dq[np.ix_(v_inv, q_inv)], dv[ix], Minv[ix]

    def timed_derivatives() -> Any:
        return pin.computeABADerivatives(pm, data, cur["q"], cur["v"], cur["tau"])

    return Peer("pinocchio", pin.__version__, accelerations, set_state, timed,
                derivatives, timed_derivatives, (pm, data, q_map_a, v_map_a))  # fmt: skip


# --------------------------------------------------------------------------- MuJoCo
def _fmt(x: Any) -> str:
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def mjcf_point(joint: kd.Joint, p_B: Any) -> np.ndarray:
    """The point ``p_B`` of the outer body of ``joint`` (its axes, from its origin) in
    the frame :func:`mjcf` gives that body (the joint's Go frame)."""
    return (_c_out(joint) @ np.r_[np.asarray(p_B, float), 1.0])[:3]


def mjcf(model: kd.Model, *, equality: str = "", integrator: str = "Euler",
         timestep: float = 0.001) -> str:  # fmt: skip
    """MJCF text of the tree of ``model``: bodies nested as the tree, explicit inertials,
    no geoms, contacts off, no damping or armature, the model's gravity. ``equality``:
    the body of an ``<equality>`` element (then constraints are on, else off)."""
    lay = model.layout
    children: dict[int, list[int]] = {}
    for k in range(model.nb):
        children.setdefault(int(lay.parent[k]), []).append(k)

    def body_xml(k: int, indent: str) -> list[str]:
        j, b = model.joints[k], model.bodies[k]
        parent = lay.parent[k]
        T = _c_in(j) if parent < 0 else _c_out(model.joints[parent]) @ _c_in(j)
        quat = dcm_to_quat(T[:3, :3])  # scalar last
        lines = [f'{indent}<body name="{b.name}" pos="{_fmt(T[:3, 3])}" '
                 f'quat="{_fmt(np.r_[quat[3], quat[:3]])}">']  # fmt: skip
        for c, a in enumerate(_axes(j.trn_seq, j.trn_dof)):
            lines.append(
                f'{indent}  <joint name="{j.name}_t{c}" type="slide" axis="{_fmt(np.eye(3)[a])}"/>'
            )
        if j.rot_type == "spherical":
            lines.append(f'{indent}  <joint name="{j.name}_ball" type="ball"/>')
        else:
            for c, a in enumerate(_axes(j.rot_seq, j.rot_dof)):
                lines.append(
                    f'{indent}  <joint name="{j.name}_r{c}" type="hinge" axis="{_fmt(np.eye(3)[a])}"/>'
                )
        C = _c_out(j)
        com = C[:3, :3] @ b.com + C[:3, 3]
        I = C[:3, :3] @ b.inertia @ C[:3, :3].T
        full = (I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2])
        lines.append(
            f'{indent}  <inertial pos="{_fmt(com)}" mass="{float(b.mass):.17g}" fullinertia="{_fmt(full)}"/>'
        )
        for c in children.get(k, []):
            lines += body_xml(c, indent + "  ")
        lines.append(f"{indent}</body>")
        return lines

    body_lines = [line for k in children.get(-1, []) for line in body_xml(k, "    ")]
    return "\n".join([
        '<mujoco model="kanedyn">',
        '  <compiler angle="radian" inertiafromgeom="false" balanceinertia="false" boundmass="0" boundinertia="0"/>',
        f'  <option gravity="{_fmt(model.gravity)}" timestep="{timestep:.17g}" '
        f'integrator="{integrator}">',
        '    <flag contact="disable"/>' if equality else
        '    <flag contact="disable" constraint="disable"/>',
        "  </option>",
        "  <worldbody>",
        *body_lines,
        "  </worldbody>",
        *([f"  <equality>{equality}</equality>"] if equality else []),
        "</mujoco>",
    ])  # fmt: skip


def mujoco_peer(model: kd.Model) -> Peer:
    """MuJoCo model of ``model`` (:func:`mjcf`); forward dynamics by ``mj_forward``."""
    import mujoco

    mm = mujoco.MjModel.from_xml_string(mjcf(model))
    data = mujoco.MjData(mm)
    lay = model.layout
    q_map: list[int] = []
    v_map: list[int] = []
    quat_w_first: list[int] = []
    # MuJoCo orders bodies depth first; joints within a body in the order written
    order: list[int] = []
    children: dict[int, list[int]] = {}
    for k in range(model.nb):
        children.setdefault(int(lay.parent[k]), []).append(k)
    stack = list(reversed(children.get(-1, [])))
    while stack:
        k = stack.pop()
        order.append(k)
        stack += list(reversed(children.get(k, [])))
    for k in order:
        j = model.joints[k]
        qi, ui, nr = lay.q_index[k], lay.u_index[k], j.n_rot_coordinates
        q_map += [qi[nr + c] for c in range(j.trn_dof)]
        v_map += [ui[j.rot_dof + c] for c in range(j.trn_dof)]
        if j.rot_type == "spherical":
            quat_w_first.append(len(q_map))
            q_map += [qi[3], qi[0], qi[1], qi[2]]  # MuJoCo quaternions are scalar first
            v_map += list(ui[:3])
        else:
            q_map += list(qi[: j.rot_dof])
            v_map += list(ui[: j.rot_dof])
    q_map_a, v_map_a = np.array(q_map, dtype=int), np.array(v_map, dtype=int)
    v_inv = np.empty_like(v_map_a)
    v_inv[v_map_a] = np.arange(v_map_a.size)

    def set_state(q: np.ndarray, u: np.ndarray, tau: np.ndarray) -> None:
        data.qpos[:] = q[q_map_a]
        data.qvel[:] = u[v_map_a]
        data.qfrc_applied[:] = tau[v_map_a]

    def accelerations(q: np.ndarray, u: np.ndarray, tau: np.ndarray) -> np.ndarray:
        set_state(q, u, tau)
        mujoco.mj_forward(mm, data)
        return data.qacc.copy()[v_inv]

    def timed() -> Any:
        return mujoco.mj_forward(mm, data)

    return Peer("mujoco", mujoco.__version__, accelerations, set_state, timed)


PEERS = {"pinocchio": pinocchio_peer, "mujoco": mujoco_peer}
