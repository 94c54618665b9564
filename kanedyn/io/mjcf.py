"""MuJoCo MJCF models, read through MuJoCo's own compiler (optional extra ``mujoco``).

MuJoCo resolves ``<default>`` classes, ``<include>``, angle units, frame orientations
(``euler``, ``axisangle``, ``zaxis``, ``fromto``) and the mass properties of bodies
from their geoms; kanedyn reads the compiled ``mjModel``
(mujoco.readthedocs.io, "MJCF XML reference" and "mjModel"):

* every MuJoCo body (but the world) is a :class:`~kanedyn.Body`: ``body_mass``, mass
  centre ``body_ipos`` and inertia ``R(body_iquat) diag(body_inertia) Rᵀ`` in the body
  frame. A body's frame sits at ``body_pos``, turned by ``body_quat``, in its parent's.
* joints (``jnt_pos`` anchor and ``jnt_axis``, both in the body frame) map to kanedyn
  joints with the same names:

  ========  =================================================================
  MuJoCo    kanedyn
  ========  =================================================================
  hinge     1-DOF gimbal about a Gi axis along ``jnt_axis``, through the anchor
  slide     1-DOF slide along it
  ball      spherical (quaternion; speeds = body-axes relative angular velocity)
  free      free (slides in N, then spherical): ``qvel = (ṙ, ω_B)`` reordered
  ========  =================================================================

  A body with no joint is welded to its parent. A body with several joints (MuJoCo
  applies them in order, each in the frame the previous ones produced) becomes a chain
  of massless bodies named ``"<body>/<joint>"``, one joint each, ending in the body.
  Unnamed joints are called ``"<body>_joint<i>"``, unnamed bodies ``"body<id>"``.
* kanedyn's hinge angle and slide displacement are ``qpos - qpos0`` (MuJoCo's
  ``ref``); :func:`state_from_mujoco` converts MuJoCo's ``qpos`` and ``qvel``.
* gravity ``opt.gravity``; joint damping ``dof_damping`` and stiffness
  ``jnt_stiffness``; ``range`` becomes the joint's :class:`~kanedyn.JointLimits`.
* sites become :class:`~kanedyn.Frame` records named after them.

Not modelled, each reported with an :class:`~kanedyn.io.UnsupportedFeatureWarning`:
equality constraints (closed loops; reported until kanedyn's loops import them),
tendons, actuators, armature of ball and free joints, a spring reference other than ``ref``, friction loss, fluid forces
(density, viscosity, wind), gravity compensation and free-joint springs. Contacts are
not modelled (kanedyn has no collision detection).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import FileFormatError, KanedynError, ModelError
from kanedyn.io.urdf import axis_frame, build_model, is_singular
from kanedyn.model import Body, Frame, Joint, JointLimits, Model, Rotor, State
from kanedyn.spatial import rotation as rot

__all__ = ["read_mjcf", "speeds_from_mujoco", "state_from_mujoco"]

Array = NDArray[np.float64]

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3


def _mujoco() -> Any:
    try:
        import mujoco
    except ImportError:
        raise KanedynError("reading MJCF needs MuJoCo: pip install 'kanedyn[mujoco]'") from None
    return mujoco


def _R(quat_wxyz: ArrayLike) -> Array:
    """DCM of a MuJoCo quaternion (scalar first, parent <- child)."""
    w, x, y, z = np.asarray(quat_wxyz, dtype=float)
    return rot.quat_to_dcm(np.array([x, y, z, w]) / np.linalg.norm([x, y, z, w]))


def body_name(mjm: Any, b: int) -> str:
    return mjm.body(b).name or f"body{b}"


def joint_name(mjm: Any, j: int) -> str:
    name = mjm.joint(j).name
    if name:
        return str(name)
    b = int(mjm.jnt_bodyid[j])
    return f"{body_name(mjm, b)}_joint{j - int(mjm.body_jntadr[b])}"


def read_mjcf(path: str | os.PathLike[str], *, mj_model: Any = None) -> Model:
    """Read an MJCF file (or an already compiled ``mujoco.MjModel``) into a Model.

    Parameters
    ----------
    path : path of the MJCF ``.xml`` file (its includes are resolved by MuJoCo).
    mj_model : mujoco.MjModel, optional
        Use this compiled model instead of compiling ``path`` (``path`` then only names
        it in messages).

    Raises
    ------
    FileFormatError
        MuJoCo's own compile error (which names the element and line), or a model
        kanedyn cannot build.
    KanedynError
        If MuJoCo is not installed (extra ``mujoco``).
    """
    shown = os.fspath(path)
    mujoco = _mujoco()
    mjm = mj_model
    if mjm is None:
        try:
            mjm = mujoco.MjModel.from_xml_path(shown)
        except ValueError as exc:
            raise FileFormatError(f"{shown}: {' '.join(str(exc).split())}") from None
    notes: list[str] = []
    bodies: list[Body] = []
    joints: list[Joint] = []
    for b in range(1, mjm.nbody):
        name = body_name(mjm, b)
        parent = int(mjm.body_parentid[b])
        inner: str | None = None if parent == 0 else body_name(mjm, parent)
        R_iq = _R(mjm.body_iquat[b])
        mass, inertia = float(mjm.body_mass[b]), R_iq @ np.diag(mjm.body_inertia[b]) @ R_iq.T
        try:
            body = Body(
                name,
                mass=mass,
                inertia=inertia,
                com=mjm.body_ipos[b],
                check_triangle=False,
                allow_singular=is_singular(mass, inertia),
            )
        except ModelError as exc:
            raise FileFormatError(f"{shown}: {exc}") from None
        # the body frame in the parent's, before its joints move it
        point, R_pb = np.array(mjm.body_pos[b], dtype=float), _R(mjm.body_quat[b])
        first, n = int(mjm.body_jntadr[b]), int(mjm.body_jntnum[b])
        if n == 0:
            joints.append(
                Joint.weld(f"{name}_weld", inner, name, inner_point=point, inner_rotation=R_pb)
            )
        for i, j in enumerate(range(first, first + n)):
            outer = name if i == n - 1 else f"{name}/{joint_name(mjm, j)}"
            if outer != name:
                bodies.append(Body(outer, mass=0.0, inertia=np.zeros((3, 3)), allow_singular=True))
            joints.append(_joint(mjm, j, inner, outer, point, R_pb, notes, shown))
            inner, point, R_pb = outer, np.zeros(3), np.eye(3)
        bodies.append(body)
    frames = []
    for s in range(mjm.nsite):
        b = int(mjm.site_bodyid[s])
        frames.append(
            Frame(
                mjm.site(s).name or f"site{s}",
                None if b == 0 else body_name(mjm, b),
                point=mjm.site_pos[s],
                rotation=_R(mjm.site_quat[s]),
            )
        )
    _report(mjm, shown, notes)
    if not bodies:
        raise FileFormatError(f"{shown}: the model has no bodies besides the world")

    return build_model(shown, bodies, joints, np.array(mjm.opt.gravity), frames, notes)


def _joint(
    mjm: Any,
    j: int,
    inner: str | None,
    outer: str,
    point: Array,
    R_pb: Array,
    notes: list[str],
    shown: str,
) -> Joint:
    """Joint j of MuJoCo, its body's pre-joint frame at ``(point, R_pb)`` in ``inner``."""
    name = joint_name(mjm, j)
    kind = int(mjm.jnt_type[j])
    anchor = np.array(mjm.jnt_pos[j], dtype=float)
    dofs = range(
        int(mjm.jnt_dofadr[j]),
        int(mjm.jnt_dofadr[j]) + (6 if kind == _FREE else 3 if kind == _BALL else 1),
    )
    damping = np.array([mjm.dof_damping[d] for d in dofs])
    armature = np.array([mjm.dof_armature[d] for d in dofs])
    stiffness = float(mjm.jnt_stiffness[j])
    q0 = int(mjm.jnt_qposadr[j])
    where = f"{shown}: joint {name!r}"
    if stiffness != 0.0:
        nq = {_FREE: 7, _BALL: 4}.get(kind, 1)
        if not np.allclose(
            mjm.qpos_spring[q0 : q0 + nq], mjm.qpos0[q0 : q0 + nq], rtol=0, atol=1e-12
        ):
            notes.append(
                f"{where}: the spring reference (springref) differs from the joint's "
                "reference position; kanedyn's spring acts about the reference (ref)"
            )
    if any(mjm.dof_frictionloss[d] != 0.0 for d in dofs):
        notes.append(f"{where}: frictionloss is not modelled; ignored")
    kw: dict[str, Any] = dict(damping=damping)
    if kind != _FREE:
        kw.update(inner_point=point + R_pb @ anchor, outer_point=anchor)
    if np.any(armature != 0.0):
        if kind in (_HINGE, _SLIDE):  # MuJoCo's armature is the reflected inertia n²J
            kw.update(rotor=Rotor(float(armature[0]), reflected_only=True))
        else:
            notes.append(
                f"{where}: armature on a {('free', 'ball')[kind]} joint is not modelled; ignored"
            )
    try:
        if kind == _FREE:
            if stiffness != 0.0:
                notes.append(f"{where}: a free joint's spring is not modelled; ignored")
            # MuJoCo's qvel = (ṙ, ω_B); kanedyn's speeds (ω_B | ṙ): reorder the damping
            return Joint.free(name, outer, inner=inner, damping=np.r_[damping[3:], damping[:3]])
        if kind == _BALL:
            return Joint.spherical(
                name, inner, outer, inner_rotation=R_pb, stiffness=stiffness, **kw
            )
        axis = np.array(mjm.jnt_axis[j], dtype=float)
        A, k = axis_frame(axis / np.linalg.norm(axis))
        limits = None
        if mjm.jnt_limited[j]:
            lo, hi = (float(x) - float(mjm.qpos0[q0]) for x in mjm.jnt_range[j])
            limits = JointLimits(lower=lo, upper=hi)
        kw.update(inner_rotation=R_pb @ A, outer_rotation=A.T, stiffness=stiffness, limits=limits)
        if kind == _HINGE:
            return Joint.revolute(name, inner, outer, axis=k, **kw)
        return Joint.prismatic(name, inner, outer, axis=k, **kw)
    except ModelError as exc:
        raise FileFormatError(f"{where}: {exc}") from None


def _report(mjm: Any, shown: str, notes: list[str]) -> None:
    """Notes for the parts of the mjModel kanedyn does not model."""
    if mjm.neq:
        mujoco = _mujoco()
        kinds = sorted(
            {
                mujoco.mjtEq(int(mjm.eq_type[i])).name.removeprefix("mjEQ_").lower()
                for i in range(mjm.neq)
            }
        )
        notes.append(
            f"{shown}: {mjm.neq} equality constraint(s) ({', '.join(kinds)}) not imported: "
            "the model is the open tree without them"
        )
    if mjm.ntendon:
        notes.append(f"{shown}: {mjm.ntendon} tendon(s) not modelled; ignored")
    if mjm.nu:
        notes.append(
            f"{shown}: {mjm.nu} actuator(s) not modelled; apply joint loads "
            "(kanedyn.JointLoad) or a controller instead"
        )
    if mjm.opt.density or mjm.opt.viscosity or np.any(mjm.opt.wind):
        notes.append(f"{shown}: fluid forces (density, viscosity, wind) are not modelled")
    if np.any(mjm.body_gravcomp):
        notes.append(f"{shown}: gravity compensation (gravcomp) is not modelled")


def speeds_from_mujoco(model: Model, mjm: Any, qvel: ArrayLike) -> Array:
    """kanedyn's speeds ``[u | s]`` from MuJoCo's ``qvel`` (the same numbers, reordered)."""
    qvel = np.asarray(qvel, dtype=float)
    u = np.zeros(model.n)
    for j in range(mjm.njnt):
        idx = model.speeds(joint_name(mjm, j))
        d = int(mjm.jnt_dofadr[j])
        if int(mjm.jnt_type[j]) == _FREE:
            u[idx] = np.r_[qvel[d + 3 : d + 6], qvel[d : d + 3]]
        else:
            u[idx] = qvel[d : d + len(idx)]
    return u


def state_from_mujoco(model: Model, mjm: Any, qpos: ArrayLike, qvel: ArrayLike) -> State:
    """The kanedyn :class:`~kanedyn.State` of MuJoCo's ``(qpos, qvel)``.

    Hinge and slide coordinates are ``qpos - qpos0``; quaternions are reordered to scalar
    last; a free joint's ``(r, quat)`` become kanedyn's ``(quat | r)`` entries.
    """
    qpos = np.asarray(qpos, dtype=float)
    q = model.initial_state().q.copy()
    for j in range(mjm.njnt):
        idx = model.coordinates(joint_name(mjm, j))
        a = int(mjm.jnt_qposadr[j])
        kind = int(mjm.jnt_type[j])
        if kind == _FREE:
            w, x, y, z = qpos[a + 3 : a + 7]
            q[idx[:4]] = np.array([x, y, z, w]) / np.linalg.norm([x, y, z, w])
            q[idx[4:]] = qpos[a : a + 3]
        elif kind == _BALL:
            w, x, y, z = qpos[a : a + 4]
            q[idx] = np.array([x, y, z, w]) / np.linalg.norm([x, y, z, w])
        else:
            q[idx] = qpos[a] - mjm.qpos0[a]
    return State(q, speeds_from_mujoco(model, mjm, qvel))
