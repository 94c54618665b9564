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
  ``jnt_stiffness``; ``range`` becomes the joint's :class:`~kanedyn.JointLimits`
  (:func:`kanedyn.simulate` checks or enforces them: its ``limits`` option).
* the ``<option><flag .../>`` switches that change the dynamics are honoured:
  ``gravity="disable"`` gives zero gravity, ``spring="disable"`` zero stiffness,
  ``damper="disable"`` zero damping, ``limit="disable"`` no joint limits,
  ``equality="disable"`` no loops, ``constraint="disable"`` neither.
* MuJoCo's polynomial stiffness and damping (``stiffness="a b c"``: the force
  ``-(a x + b x² + c x³)``; ``damping="a b c"``: ``-(a v + b v|v| + c v³)``, the
  model's ``jnt_stiffness`` with ``jnt_stiffnesspoly`` and ``dof_damping`` with
  ``dof_dampingpoly``) are the joint's ``stiffness``, ``stiffness_poly``, ``damping``
  and ``damping_poly`` (:func:`kanedyn.joints.spring_damper`, MuJoCo's
  ``mj_springdamper``): hinge and slide springs, the dampers of every joint, and a
  ball joint's radial spring, MuJoCo's ``-(a + b r + c r²) φ`` of the rotation vector
  φ of its quaternion relative to ``qpos0``, ``r = |φ|`` (the gradient of
  ``½ a r² + ⅓ b r³ + ¼ c r⁴``; :func:`kanedyn.joints.spherical_spring`).
* sites become :class:`~kanedyn.Frame` records named after them.
* equality constraints that are joints between bodies become loops
  (:class:`~kanedyn.Loop`, named after the equality, ``"equality<i>"`` if unnamed),
  with MuJoCo's constraint equations (``mj_instantiateEquality``): body1 is the loop's
  inner side, body2 its outer side, the world N.

  ============================  ===================================================
  MuJoCo                        kanedyn
  ============================  ===================================================
  ``connect`` (body semantic)   ``Loop.spherical``: the point ``eq_data[0:3]`` of
                                body1 on the point ``eq_data[3:6]`` of body2 (MuJoCo's
                                compiler finds the latter at ``qpos0``)
  ``weld`` (body semantic)      ``Loop.weld``: Gi at ``relpose``'s position
                                ``eq_data[3:6]`` in body1, turned by its quaternion
                                ``eq_data[6:10]``; Go at ``anchor`` ``eq_data[0:3]`` in
                                body2, along body2's axes (``R_N_B2 = R_N_B1 R_rel``)
  ``connect`` / ``weld`` with   the same, at the two sites (the weld makes the two
  ``site1`` and ``site2``       site frames coincide)
  ``weld`` ``torquescale="0"``  ``Loop.spherical`` (MuJoCo then leaves the rotation free)
  ============================  ===================================================

  MuJoCo's equality constraints are soft (``solref``, ``solimp``); kanedyn's loops are
  exact. An equality with ``active="false"`` is not imported (a note says so). The
  configuration ``qpos0`` may not close the loops (a ``relpose`` or sites that do not
  meet there): :func:`initial_state` assembles it.

Not modelled, each reported with an :class:`~kanedyn.io.UnsupportedFeatureWarning`:
``joint`` equalities (a polynomial coupling of joint coordinates, ``polycoef``), ``tendon``
and ``flex`` equalities (the model is the tree and loops without them), tendons, actuators, armature of ball and free joints, a spring reference other than ``ref``, friction loss, fluid forces
(density, viscosity, wind), gravity compensation and free-joint springs. Contacts are
not modelled (kanedyn has no collision detection).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import FileFormatError, KanedynError, ModelError
from kanedyn.io.urdf import axis_frame, build_model, is_singular
from kanedyn.model import Body, Frame, Joint, JointLimits, Loop, Model, Rotor, State
from kanedyn.spatial import rotation as rot

__all__ = ["initial_state", "mujoco_module", "read_mjcf", "speeds_from_mujoco", "state_from_mujoco"]

Array = NDArray[np.float64]

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_CONNECT, _WELD = 0, 1  # mjtEq
_OBJ_SITE = 6  # mjtObj.mjOBJ_SITE (else mjOBJ_BODY)


def mujoco_module() -> Any:
    """The `mujoco` module, or a one-line error naming the extra to install."""
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


@attrs.frozen
class _Flags:
    """The parts of the dynamics that MuJoCo's ``<flag>`` switches leave on."""

    gravity: bool
    springs: bool
    dampers: bool
    limits: bool
    equalities: bool

    @classmethod
    def of(cls, mjm: Any) -> _Flags:
        bit = mujoco_module().mjtDisableBit
        off = int(mjm.opt.disableflags)
        constraint = bool(off & int(bit.mjDSBL_CONSTRAINT))
        return cls(
            gravity=not off & int(bit.mjDSBL_GRAVITY),
            springs=not off & int(bit.mjDSBL_SPRING),
            dampers=not off & int(bit.mjDSBL_DAMPER),
            limits=not (constraint or off & int(bit.mjDSBL_LIMIT)),
            equalities=not (constraint or off & int(bit.mjDSBL_EQUALITY)),
        )


def _joint_line(shown: str, name: str) -> str:
    """``" line N"``: the 1-based line of ``<joint name="name"`` in the file ``shown``
    (empty when the file cannot be read or does not hold it, e.g. an include)."""
    try:
        text = Path(shown).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    found = re.search(r"<joint\b[^>]*\bname\s*=\s*[\"']" + re.escape(name) + r"[\"']", text)
    return "" if found is None else f" line {text.count(chr(10), 0, found.start()) + 1}"


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
    mujoco = mujoco_module()
    mjm = mj_model
    if mjm is None:
        try:
            mjm = mujoco.MjModel.from_xml_path(shown)
        except ValueError as exc:
            raise FileFormatError(f"{shown}: {' '.join(str(exc).split())}") from None
    notes: list[str] = []
    bodies: list[Body] = []
    joints: list[Joint] = []
    flags = _Flags.of(mjm)
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
            joints.append(_joint(mjm, j, inner, outer, point, R_pb, notes, shown, flags))
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
    loops = _loops(mjm, shown, notes) if flags.equalities else []
    if mjm.neq and not flags.equalities:
        notes.append(
            f"{shown}: {mjm.neq} equality constraint(s) not imported: disabled by "
            '<flag equality="disable"/> or constraint="disable"'
        )
    _report(mjm, shown, notes)
    if not bodies:
        raise FileFormatError(f"{shown}: the model has no bodies besides the world")
    gravity = np.array(mjm.opt.gravity) if flags.gravity else np.zeros(3)
    return build_model(shown, bodies, joints, gravity, frames, notes, loops=loops)


def _loops(mjm: Any, shown: str, notes: list[str]) -> list[Loop]:
    """The loops of MuJoCo's ``connect`` and ``weld`` equalities; notes for the others.

    The points and frames are those of MuJoCo's ``mj_instantiateEquality`` (body
    semantic: ``connect`` puts ``eq_data[0:3]`` of body1 on ``eq_data[3:6]`` of body2;
    ``weld`` puts ``eq_data[3:6]`` of body1 on ``eq_data[0:3]`` of body2 with
    ``q2 = q1 ⊗ eq_data[6:10]``; site semantic: the two sites coincide, in position, and
    for ``weld`` in orientation).
    """
    mujoco = mujoco_module()
    loops: list[Loop] = []
    for i in range(mjm.neq):
        kind = int(mjm.eq_type[i])
        kname = mujoco.mjtEq(kind).name.removeprefix("mjEQ_").lower()
        name = mjm.equality(i).name or f"equality{i}"
        where = f"{shown}: equality {name!r} ({kname})"
        if kind not in (_CONNECT, _WELD):
            what = {
                "joint": "a polynomial coupling of joint coordinates (polycoef) is not a "
                "joint between bodies, so kanedyn's loops cannot express it",
                "tendon": "tendons are not modelled",
            }.get(kname, "kanedyn models no flexible bodies")
            notes.append(f"{where} not imported: {what}; the model is without it")
            continue
        if not mjm.eq_active0[i]:
            notes.append(f'{where} is inactive (active="false"); not imported')
            continue
        data = np.array(mjm.eq_data[i], dtype=float)
        o1, o2 = int(mjm.eq_obj1id[i]), int(mjm.eq_obj2id[i])
        if int(mjm.eq_objtype[i]) == _OBJ_SITE:
            b1, b2 = int(mjm.site_bodyid[o1]), int(mjm.site_bodyid[o2])
            p1, p2 = np.array(mjm.site_pos[o1]), np.array(mjm.site_pos[o2])
            R1, R2 = _R(mjm.site_quat[o1]), _R(mjm.site_quat[o2])
        elif kind == _CONNECT:
            b1, b2, p1, p2 = o1, o2, data[0:3], data[3:6]
            R1 = R2 = np.eye(3)
        else:
            b1, b2, p1, p2 = o1, o2, data[3:6], data[0:3]
            R1, R2 = _R(data[6:10]), np.eye(3)
        if b1 == b2:
            notes.append(f"{where} joins body {body_name(mjm, b1)!r} to itself; ignored")
            continue
        inner = None if b1 == 0 else body_name(mjm, b1)
        outer = None if b2 == 0 else body_name(mjm, b2)
        kw: dict[str, Any] = dict(inner=inner, outer=outer, inner_point=p1, outer_point=p2)
        if kind == _WELD and data[10] != 0.0:  # Loop.weld: no rotational freedom
            kw.update(inner_rotation=R1, outer_rotation=R2.T)
        else:  # Loop.spherical
            if kind == _WELD:
                notes.append(
                    f'{where}: torquescale="0" leaves the rotation free; imported as a '
                    "spherical loop"
                )
            kw.update(rot_type="spherical", rot_dof=3)
        try:
            loops.append(Loop(name, **kw))
        except ModelError as exc:
            raise FileFormatError(f"{where}: {exc}") from None
    return loops


def _joint(
    mjm: Any,
    j: int,
    inner: str | None,
    outer: str,
    point: Array,
    R_pb: Array,
    notes: list[str],
    shown: str,
    flags: _Flags,
) -> Joint:
    """Joint j of MuJoCo, its body's pre-joint frame at ``(point, R_pb)`` in ``inner``;
    the springs, dampers and limits that ``flags`` disable left out."""
    name = joint_name(mjm, j)
    kind = int(mjm.jnt_type[j])
    anchor = np.array(mjm.jnt_pos[j], dtype=float)
    dofs = range(
        int(mjm.jnt_dofadr[j]),
        int(mjm.jnt_dofadr[j]) + (6 if kind == _FREE else 3 if kind == _BALL else 1),
    )
    damping = np.array([mjm.dof_damping[d] if flags.dampers else 0.0 for d in dofs])
    damping_poly = np.array(
        [_poly(mjm, "dof_dampingpoly", d) if flags.dampers else np.zeros(2) for d in dofs]
    )
    armature = np.array([mjm.dof_armature[d] for d in dofs])
    stiffness = float(mjm.jnt_stiffness[j]) if flags.springs else 0.0
    stiffness_poly = _poly(mjm, "jnt_stiffnesspoly", j) if flags.springs else np.zeros(2)
    q0 = int(mjm.jnt_qposadr[j])
    where = f"{shown}: joint {name!r}"
    if stiffness != 0.0 or np.any(stiffness_poly):
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
    kw: dict[str, Any] = dict(damping=damping, damping_poly=damping_poly)
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
            if stiffness != 0.0 or np.any(stiffness_poly):
                notes.append(f"{where}: a free joint's spring is not modelled; ignored")
            # MuJoCo's qvel = (ṙ, ω_B); kanedyn's speeds (ω_B | ṙ): reorder the dampers
            return Joint.free(
                name, outer, inner=inner, damping=np.r_[damping[3:], damping[:3]],
                damping_poly=np.r_[damping_poly[3:], damping_poly[:3]],
            )  # fmt: skip
        if kind == _BALL:
            return Joint.spherical(
                name, inner, outer, inner_rotation=R_pb, stiffness=stiffness,
                stiffness_poly=stiffness_poly, **kw,
            )  # fmt: skip
        axis = np.array(mjm.jnt_axis[j], dtype=float)
        A, k = axis_frame(axis / np.linalg.norm(axis))
        limits = None
        if mjm.jnt_limited[j] and flags.limits:
            lo, hi = (float(x) - float(mjm.qpos0[q0]) for x in mjm.jnt_range[j])
            limits = JointLimits(lower=lo, upper=hi)
        kw.update(inner_rotation=R_pb @ A, outer_rotation=A.T, stiffness=stiffness,
                  stiffness_poly=stiffness_poly, limits=limits)  # fmt: skip
        if kind == _HINGE:
            return Joint.revolute(name, inner, outer, axis=k, **kw)
        return Joint.prismatic(name, inner, outer, axis=k, **kw)
    except ModelError as exc:
        raise FileFormatError(f"{shown}{_joint_line(shown, name)}: {exc}") from None


def _poly(mjm: Any, field: str, i: int) -> Array:
    """Row ``i`` of MuJoCo's higher-order coefficients ``field`` (``jnt_stiffnesspoly``,
    ``dof_dampingpoly``): ``(b, c)`` of ``"a b c"``; zeros before MuJoCo 3.7 (no such
    fields)."""
    table = getattr(mjm, field, None)
    return np.zeros(2) if table is None else np.array(table[i], dtype=float)


def _report(mjm: Any, shown: str, notes: list[str]) -> None:
    """Notes for the parts of the mjModel kanedyn does not model."""
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


def initial_state(
    model: Model,
    mjm: Any,
    qpos: ArrayLike | None = None,
    qvel: ArrayLike | None = None,
    *,
    fix: Iterable[int | str] = (),
) -> State:
    """The state of MuJoCo's ``(qpos, qvel)`` (default ``qpos0`` at rest), loops closed.

    With loops, the state is assembled (:meth:`~kanedyn.Model.assemble`): Newton's
    minimum-norm correction moves the coordinates as little as possible onto
    ``Φ(q) = 0``, and the speeds onto ``A u = 0``. MuJoCo gives every joint a ``qpos``,
    so no joint is singled out by default; name the joints to keep in ``fix``. A model
    whose equalities hold at ``qpos0`` (``connect`` and ``weld`` without ``relpose``:
    MuJoCo's compiler takes the second point and the relative pose there) is unchanged.

    Raises
    ------
    ModelError
        A loop cannot close from this configuration (naming it).
    """
    qpos = mjm.qpos0 if qpos is None else qpos
    qvel = np.zeros(mjm.nv) if qvel is None else qvel
    state = state_from_mujoco(model, mjm, qpos, qvel)
    return model.assemble(state, fix=fix) if model.loops else state
