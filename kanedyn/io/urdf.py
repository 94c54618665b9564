"""URDF robot descriptions (``<robot>`` with ``<link>`` and ``<joint>`` elements).

Mapping to kanedyn (URDF spec: wiki.ros.org/urdf/XML):

* Each ``<link>`` is a :class:`~kanedyn.Body` whose body frame is the link frame. Its
  ``<inertial>`` gives the mass, the mass centre (``<origin xyz>``) and the inertia
  tensor entries ``ixx ixy ixz iyy iyz izz`` *as tensor elements* (URDF's ``ixy`` is the
  off-diagonal element itself, ``-∫xy dm``), in the inertial frame rotated by
  ``<origin rpy>`` from the link frame: ``I_link = R I R^T``.
* ``rpy`` is the extrinsic X-Y-Z rotation ``R = Rz(yaw) Ry(pitch) Rx(roll)``, which is
  the body-fixed 321 sequence ``euler_to_dcm("321", (yaw, pitch, roll))``.
* A ``<joint>`` from ``parent`` to ``child`` places the joint frame J at ``<origin>`` in
  the parent link; the child link frame is J moved by the joint coordinate. kanedyn's
  Gi is J rotated by ``A`` so that a Gi axis lies along ``<axis>`` (``A = I`` when the
  axis is a positive coordinate axis), and ``outer_rotation = A^T`` brings the child
  frame back to J: ``inner_point = xyz``, ``inner_rotation = R(rpy) A``,
  ``outer_point = 0``.

  ======================  ============================================================
  URDF type               kanedyn joint
  ======================  ============================================================
  revolute, continuous    1-DOF gimbal about the Gi axis along ``<axis>``
  prismatic               1-DOF slide along it
  planar                  2 slides normal to ``<axis>`` and a rotation about it
  fixed                   weld
  floating                free (3 slides, then spherical)
  ======================  ============================================================

* Every link is kept as a named :class:`~kanedyn.Frame` (``model.frames``; query it
  with :func:`kanedyn.frame_placement`, :func:`kanedyn.frame_velocity`,
  :func:`kanedyn.frame_acceleration`). By default a link attached by a ``fixed`` joint
  is merged into its parent's body (Pinocchio does the same): the body's mass, mass
  centre and inertia are the exact composite (:func:`kanedyn.composite_mass_properties`).
  The inertia of a merged link is checked on the body it is merged into: a link whose
  own inertia is slightly indefinite (CAD noise) is accepted, with a warning naming it,
  when that body is physical.
* Links without ``<inertial>``, or with zero mass and inertia, are frames. A massless
  link on a movable joint is allowed when the mass matrix stays positive definite;
  otherwise the error names the joint with no mass outboard. Negative mass, an
  indefinite inertia and non-finite numbers are errors naming the line.
* The root link (the one that is no joint's child) is welded to N, or joined by a free
  joint with ``floating_base=True``. A massless fixed root (``world``) is N itself.
* ``<dynamics damping>`` becomes the joint's viscous damping. ``friction`` (Coulomb) is
  not modelled: a warning says so. ``<limit>`` is recorded as the joint's
  :class:`~kanedyn.JointLimits`; :func:`kanedyn.simulate` checks its range or makes it
  a stop (its ``limits`` option). A ``<mimic>`` joint is imported as an
  independent joint, with a warning that the coupling is not enforced. Calibration,
  safety controllers, ``<transmission>`` and ``<gazebo>`` elements are ignored with an
  :class:`~kanedyn.io.UnsupportedFeatureWarning`. Visual and collision geometry is not
  needed for the dynamics and is ignored silently.
* URDF has no gravity: ``read_urdf`` uses ``(0, 0, -9.81)`` unless given another.
"""

from __future__ import annotations

import os
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from xml.parsers import expat

import attrs
import numpy as np

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.io.fortytwo import UnsupportedFeatureWarning
from kanedyn.model import Body, Frame, Joint, JointLimits, Loop, Model
from kanedyn.spatial.inertia import composite_mass_properties, validate_inertia
from kanedyn.spatial.rotation import euler_to_dcm

_HUGE = 1e100  # kg, kg m^2, m: larger mass properties and lengths are refused (they overflow)
__all__ = ["URDF_GRAVITY", "read_urdf", "rpy_to_dcm"]

#: principal moments above -_ROUND_OFF (kg·m²) count as zero
_ROUND_OFF = 1e-15

#: gravity (N axes, m/s²) of a URDF model unless the caller gives one
URDF_GRAVITY = (0.0, 0.0, -9.81)

_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")


def rpy_to_dcm(rpy: Any) -> np.ndarray:
    """URDF ``rpy`` (roll, pitch, yaw): ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (parent <- child)."""
    r, p, y = np.asarray(rpy, dtype=float)
    return euler_to_dcm("321", (y, p, r))


class _Doc:
    """An XML tree with the source line of every element, for error messages."""

    def __init__(self, path: Path, shown: str) -> None:
        self.name = shown
        self.line: dict[int, int] = {}
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise FileFormatError(f"{shown}: cannot read the file ({exc.strerror})") from None
        parser = expat.ParserCreate()
        stack: list[ET.Element] = []
        roots: list[ET.Element] = []

        def start(tag: str, attrib: dict[str, str]) -> None:
            el = ET.Element(tag, attrib)
            self.line[id(el)] = parser.CurrentLineNumber
            if stack:
                stack[-1].append(el)
            else:
                roots.append(el)
            stack.append(el)

        def end(tag: str) -> None:
            stack.pop()

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        try:
            parser.Parse(data, True)
        except expat.ExpatError as exc:
            raise FileFormatError(
                f"{shown} line {exc.lineno}: not well-formed XML ({expat.ErrorString(exc.code)})"
            ) from None
        self.root = roots[0]

    def where(self, el: ET.Element, *children: str, at: ET.Element | None = None) -> str:
        """``file line L: <tag name='...'> <child> ...``, L the line of ``at`` (or ``el``)."""
        name = el.get("name")
        text = f"<{el.tag} name={name!r}>" if name is not None else f"<{el.tag}>"
        for child in children:
            text += f" <{child}>"
        return f"{self.name} line {self.line.get(id(at if at is not None else el), '?')}: {text}"

    def error(self, el: ET.Element, message: str, *children: str) -> FileFormatError:
        return FileFormatError(f"{self.where(el, *children)}: {message}")


def _floats(
    doc: _Doc,
    el: ET.Element,
    attr: str,
    n: int,
    default: Any = None,
    owner: tuple[Any, ...] | None = None,
) -> np.ndarray:
    """``n`` numbers from attribute ``attr`` of ``el``.

    ``owner = (link or joint element, intermediate tags...)`` names where ``el`` sits.
    """

    def fail(message: str) -> FileFormatError:
        if owner is None:
            where = doc.where(el)
        else:
            where = doc.where(owner[0], *owner[1:], el.tag, at=el)
        return FileFormatError(f"{where}: {message}")

    text = el.get(attr)
    if text is None:
        if default is None:
            raise fail(f"missing attribute {attr!r}")
        return np.array(default, dtype=float)
    try:
        values = np.array([float(t) for t in text.split()], dtype=float)
    except ValueError:
        values = np.array([])
    if values.size != n or not np.all(np.isfinite(values)):
        what = "a number" if n == 1 else f"{n} numbers"
        raise fail(f"attribute {attr}: expected {what}, got {text!r}")
    return values


def _origin(doc: _Doc, parent: ET.Element, owner: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(xyz, R)`` of a child ``<origin>`` (identity when absent)."""
    el = parent.find("origin")
    if el is None:
        return np.zeros(3), np.eye(3)
    xyz = _floats(doc, el, "xyz", 3, (0.0, 0.0, 0.0), owner)
    rpy = _floats(doc, el, "rpy", 3, (0.0, 0.0, 0.0), owner)
    if float(np.max(np.abs(xyz))) > _HUGE:
        # lever arms this long overflow the parallel-axis terms and the kinematics
        raise doc.error(el, f"xyz {xyz.tolist()} m is beyond {_HUGE:g} m: not a physical value")
    return xyz, rpy_to_dcm(rpy)


def axis_frame(axis: np.ndarray) -> tuple[np.ndarray, int]:
    """A rotation ``A`` (joint frame <- Gi) and the Gi axis number k with ``A e_k = axis``.

    k is the coordinate axis nearest ``axis`` (its largest component), so the rotation is
    well conditioned for every unit axis, including a coordinate axis up to round-off
    (iCub's ``0 6.12323e-17 1`` is +z). For ``axis·e_k > 0``, ``A`` is the shortest
    rotation taking e_k onto the axis (Rodrigues, with ``v = e_k × a`` and
    ``c = e_k·a >= 1/√3``):

    .. math:: A = U + [v]_\times + \frac{[v]_\times^2}{1 + c}

    and ``A = U`` exactly for ``a = e_k``. For ``axis·e_k < 0`` it is that rotation onto
    ``-a`` after a half turn about the next coordinate axis, which takes e_k to -e_k.
    """
    k = int(np.argmax(np.abs(axis)))
    e = np.eye(3)[k]
    sign = 1.0 if axis[k] > 0.0 else -1.0
    a = sign * axis
    v = np.cross(e, a)
    c = float(e @ a)
    K = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    A = np.eye(3) + K + (K @ K) / (1.0 + c)
    if sign < 0.0:
        flip = np.full(3, -1.0)
        flip[(k + 1) % 3] = 1.0  # half turn about the next axis: e_k -> -e_k
        A = A @ np.diag(flip)
    return A, k + 1


@attrs.frozen(eq=False)
class _Link:
    """A parsed ``<link>``: its element and mass properties in the link frame (zero
    mass and inertia for a link with no ``<inertial>``)."""

    el: ET.Element
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    problem: str | None = None  # why its own inertia is not physical (checked once merged)


def _link(doc: _Doc, link: ET.Element, check_triangle: bool) -> _Link:
    inertial = link.find("inertial")
    if inertial is None:
        return _Link(link, 0.0, np.zeros(3), np.zeros((3, 3)))
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise doc.error(link, "missing <mass value='...'>", "inertial")
    mass = float(_floats(doc, mass_el, "value", 1, None, (link, "inertial"))[0])
    if mass < 0.0:
        raise doc.error(link, f"mass must be non-negative, got {mass!r}", "inertial", "mass")
    inertia_el = inertial.find("inertia")
    if inertia_el is None:
        raise doc.error(link, "missing <inertia ixx=... />", "inertial")
    ixx, ixy, ixz, iyy, iyz, izz = (
        float(_floats(doc, inertia_el, a, 1, None, (link, "inertial"))[0])
        for a in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    )
    I_inertial = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    com, R = _origin(doc, inertial, (link, "inertial"))
    I = R @ I_inertial @ R.T
    if np.all(np.isfinite(I)):
        # principal moments within round-off of zero (iCub writes 2.4e-35 products on a
        # point mass) are zero; anything more negative stays an error
        lam, V = np.linalg.eigh(0.5 * I + 0.5 * I.T)
        if 0.0 > lam[0] >= -_ROUND_OFF:
            I = (V * np.maximum(lam, 0.0)) @ V.T
    problem = None
    try:
        I = validate_inertia(
            I,
            name=f"body {link.get('name')!r}",
            check_triangle=check_triangle,
            allow_singular=True,
        )
    except ModelError as exc:
        if not np.all(np.isfinite(I)):
            raise doc.error(link, str(exc), "inertial") from None
        # CAD noise on a link merged by a fixed joint is judged on the merged body
        problem = str(exc)
    if mass > _HUGE or float(np.max(np.abs(I))) > _HUGE:
        # products with placements and parallel-axis terms would overflow to inf or NaN
        raise doc.error(
            link,
            f"mass {mass:g} kg or inertia up to {float(np.max(np.abs(I))):g} kg m^2 is beyond "
            f"{_HUGE:g}: not a physical value (check the units)",
            "inertial",
        )
    return _Link(link, mass, com, I, problem)


def _composite(parts: list[tuple[float, np.ndarray, np.ndarray]]) -> tuple[float, Any, Any]:
    """:func:`~kanedyn.composite_mass_properties` of the parts with mass, plus the
    (rotational-only) inertia of massless parts."""
    heavy = [p for p in parts if p[0] > 0.0]
    extra = sum((p[2] for p in parts if p[0] == 0.0), np.zeros((3, 3)))
    if not heavy:
        return 0.0, np.zeros(3), extra
    m, c, I = composite_mass_properties(heavy)
    return m, c, I + extra


def read_urdf(
    path: str | os.PathLike[str],
    *,
    floating_base: bool = False,
    gravity: Any = URDF_GRAVITY,
    check_triangle: bool = False,
    merge_fixed: bool = True,
) -> Model:
    """Read a URDF file into a :class:`~kanedyn.Model`.

    Every link becomes a named :class:`~kanedyn.Frame` of the model (query it with
    :func:`kanedyn.frame_placement`). With ``merge_fixed`` (the default, as Pinocchio
    does) a link attached by a fixed joint is merged into its parent's body: the body's
    mass, mass centre and inertia are the composite of the merged links
    (:func:`kanedyn.composite_mass_properties`). Links with no ``<inertial>``, or zero
    mass and inertia, are accepted; a movable joint with no mass outboard is an error
    naming the joint. A massless root of a fixed-base robot (such as ``world``) is N.

    Parameters
    ----------
    path : path of the ``.urdf`` file.
    floating_base : bool
        Join the root link to N with a free joint instead of a weld.
    gravity : (3,)
        URDF has no gravity; the default is ``(0, 0, -9.81)`` m/s² (N's z up, as ROS,
        Pinocchio and MuJoCo assume). Pass ``(0, 0, 0)`` for none.
    check_triangle : bool
        Reject link inertias whose principal moments violate the triangle inequality.
        Off by default: CAD exports often violate it slightly, and Pinocchio accepts them.
    merge_fixed : bool
        Merge fixed-joint links into their parents (default). If False, each link is a
        body and each fixed joint a weld.

    Raises
    ------
    FileFormatError
        Naming the file, the line and the element (and the attribute) at fault.
    """
    shown = os.fspath(path)
    doc = _Doc(Path(shown), shown)
    robot = doc.root
    if robot.tag != "robot":
        raise doc.error(robot, "the root element must be <robot>")
    notes: list[str] = []
    links: dict[str, _Link] = {}
    for el in robot.findall("link"):
        name = el.get("name")
        if not name:
            raise doc.error(el, "missing attribute 'name'")
        if name in links:
            raise doc.error(el, f"duplicate link name {name!r}")
        links[name] = _link(doc, el, check_triangle)
    if not links:
        raise doc.error(robot, "no <link> elements")

    joints_el = robot.findall("joint")
    children: dict[str, ET.Element] = {}
    below: dict[str, list[ET.Element]] = {}
    for el in joints_el:
        if not el.get("name"):
            raise doc.error(el, "missing attribute 'name'")
        jtype = el.get("type")
        if jtype not in _JOINT_TYPES:
            raise doc.error(
                el, f"unknown joint type {jtype!r}; expected one of {', '.join(_JOINT_TYPES)}"
            )
        for side in ("parent", "child"):
            sub = el.find(side)
            if sub is None or not sub.get("link"):
                raise doc.error(el, f"missing <{side} link='...'>")
            if sub.get("link") not in links:
                raise doc.error(el, f"unknown link {sub.get('link')!r}", side)
        child = str(el.find("child").get("link"))  # type: ignore[union-attr]
        if child in children:
            raise doc.error(
                el, f"link {child!r} is already the child of joint {children[child].get('name')!r}"
            )
        children[child] = el
        below.setdefault(str(el.find("parent").get("link")), []).append(el)  # type: ignore[union-attr]
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise doc.error(
            robot, f"expected exactly one root link (a link that is no joint's child), got {roots}"
        )
    root = roots[0]

    # Each link's owner body and its placement in it: (owner, p, R) with
    # x_owner = p + R x_link. Fixed joints merge their child into the parent's owner.
    place: dict[str, tuple[str, np.ndarray, np.ndarray]] = {root: (root, np.zeros(3), np.eye(3))}
    order: list[ET.Element] = []  # joints, parents before children
    frontier = [root]
    while frontier:
        nxt = []
        for parent in frontier:
            for el in below.get(parent, []):
                child = str(el.find("child").get("link"))  # type: ignore[union-attr]
                if merge_fixed and el.get("type") == "fixed":
                    owner, p0, R0 = place[parent]
                    xyz, R_origin = _origin(doc, el, (el,))
                    place[child] = (owner, p0 + R0 @ xyz, R0 @ R_origin)
                else:
                    place[child] = (child, np.zeros(3), np.eye(3))
                order.append(el)
                nxt.append(child)
        frontier = nxt

    groups: dict[str, list[tuple[float, np.ndarray, np.ndarray]]] = {}
    for name, (owner, p0, R0) in place.items():
        lk = links[name]
        groups.setdefault(owner, []).append((lk.mass, p0 + R0 @ lk.com, R0 @ lk.inertia @ R0.T))
    masses = {owner: _composite(parts) for owner, parts in groups.items()}
    _check_merged_inertias(doc, links, place, masses, check_triangle, notes)
    m_root, _, I_root = masses[root]
    world = not floating_base and m_root == 0.0 and not np.any(I_root)

    bodies = []
    for owner, (m, c, I) in masses.items():
        if world and owner == root:
            continue
        try:
            bodies.append(
                Body(
                    owner,
                    mass=m,
                    inertia=I,
                    com=c,
                    check_triangle=False,
                    allow_singular=is_singular(m, I),
                )
            )
        except ModelError as exc:
            raise doc.error(links[owner].el, str(exc), "inertial") from None
    frames = [
        Frame(name, None if world and owner == root else owner, point=p0, rotation=R0)
        for name, (owner, p0, R0) in place.items()
    ]

    joints = []
    if not world:
        root_name = "root" if all(el.get("name") != "root" for el in joints_el) else f"{root}_root"
        joints.append(
            Joint.free(root_name, outer=root)
            if floating_base
            else Joint.weld(root_name, None, root)
        )
    for el in order:
        if merge_fixed and el.get("type") == "fixed":
            continue
        owner, p0, R0 = place[str(el.find("parent").get("link"))]  # type: ignore[union-attr]
        inner = None if world and owner == root else owner
        joints.append(_joint(doc, el, inner, p0, R0, notes))
    for tag in ("transmission", "gazebo"):
        found = robot.findall(tag)
        if found:
            notes.append(
                f"{doc.where(found[0])}: {len(found)} <{tag}> element(s) ignored "
                "(actuators and simulator plugins are not modelled)"
            )

    def locate(message: str) -> FileFormatError:
        # the line of the first joint (or link) the message names, else of <robot>
        named = re.findall(r"'([^']*)'", message)
        elements = (*joints_el, *robot.findall("link"))
        culprit = next((el for name in named for el in elements if el.get("name") == name), robot)
        return doc.error(culprit, message)

    return build_model(shown, bodies, joints, gravity, frames, notes, locate)


def _check_merged_inertias(
    doc: _Doc,
    links: dict[str, _Link],
    place: dict[str, tuple[str, np.ndarray, np.ndarray]],
    masses: dict[str, tuple[float, Any, Any]],
    check_triangle: bool,
    notes: list[str],
) -> None:
    """Links whose own inertia is not physical: an error naming the link unless it is
    merged (by fixed joints) into a body whose composite inertia is physical; then a
    note naming it."""
    for name, lk in links.items():
        if lk.problem is None or name not in place:
            continue
        owner = place[name][0]
        if owner == name:
            raise doc.error(lk.el, lk.problem, "inertial")
        try:
            validate_inertia(
                masses[owner][2],
                name=f"body {owner!r}",
                check_triangle=check_triangle,
                allow_singular=True,
            )
        except ModelError as exc:
            raise doc.error(
                lk.el, f"{lk.problem}; merged into its parent, {exc}", "inertial"
            ) from None
        notes.append(
            f"{doc.where(lk.el, 'inertial')}: the link's own inertia is not physical "
            f"({lk.problem.removeprefix(f'body {name!r}: ')}); accepted because body {owner!r}, "
            "which it is merged into by fixed joints, is physical"
        )


def build_model(
    shown: str,
    bodies: list[Body],
    joints: list[Joint],
    gravity: Any,
    frames: list[Frame],
    notes: list[str],
    locate: Callable[[str], FileFormatError] | None = None,
    loops: Sequence[Loop] = (),
) -> Model:
    """The Model of an imported file, its mass matrix checked, its notes warned about
    (from the caller of the reader). ``locate(message)`` turns a model error into a
    file error at the element it names (default: the file alone)."""
    try:
        model = Model(bodies, joints, gravity=gravity, frames=frames, loops=loops)
    except ModelError as exc:
        if locate is None:
            raise FileFormatError(f"{shown}: {exc}") from None
        raise locate(str(exc)) from None
    check_mass_matrix(model, shown, locate)
    for message in notes:
        warnings.warn(message, UnsupportedFeatureWarning, stacklevel=3)
    return model


def is_singular(mass: float, inertia: np.ndarray) -> bool:
    """A massless body, or one whose inertia is only positive semidefinite."""
    scale = max(float(np.max(np.abs(inertia))), np.finfo(float).tiny)
    return mass == 0.0 or float(np.linalg.eigvalsh(inertia)[0]) <= 1e-9 * scale


def check_mass_matrix(
    model: Model, shown: str, locate: Callable[[str], FileFormatError] | None = None
) -> None:
    """Raise a FileFormatError naming a joint if M is singular at the initial state.

    Only models with massless or point-mass bodies can fail; M is factored by Cholesky
    and the first speed with a vanishing pivot names its joint (at its line, with
    ``locate``, as for :func:`build_model`).
    """
    if not any(b.allow_singular for b in model.bodies) or model.n == 0:
        return
    from kanedyn.dynamics.kane import mass_matrix

    M = mass_matrix(model, model.initial_state())
    try:
        np.linalg.cholesky(M)
        if float(np.linalg.eigvalsh(M)[0]) > 1e-12 * float(np.max(np.abs(np.diag(M)))):
            return
    except np.linalg.LinAlgError:
        pass
    scale = max(float(np.max(np.abs(np.diag(M)))), np.finfo(float).tiny)
    for r in range(1, model.n + 1):
        eig = float(np.linalg.eigvalsh(M[:r, :r])[0])
        if eig <= 1e-12 * scale:
            k = next(k for k, idx in enumerate(model.layout.u_index) if r - 1 in idx)
            message = (
                f"joint {model.joints[k].name!r} moves no mass at the initial state (the "
                "mass matrix is singular): the bodies outboard of it are massless or their "
                "mass lies on its axis, or the model's lengths and masses differ by too "
                "many orders of magnitude"
            )
            raise FileFormatError(f"{shown}: {message}") if locate is None else locate(message)


def _limits(doc: _Doc, el: ET.Element, ndof: int) -> JointLimits | None:
    lim = el.find("limit")
    if lim is None or ndof == 0:
        return None
    read = lambda a, d: float(_floats(doc, lim, a, 1, (d,), (el,))[0])  # noqa: E731
    return JointLimits(
        lower=read("lower", 0.0),
        upper=read("upper", 0.0),
        effort=read("effort", np.inf) if lim.get("effort") is not None else np.inf,
        velocity=read("velocity", np.inf) if lim.get("velocity") is not None else np.inf,
    )


def _joint(
    doc: _Doc,
    el: ET.Element,
    inner: str | None,
    p0: np.ndarray,
    R0: np.ndarray,
    notes: list[str],
) -> Joint:
    """The kanedyn joint of ``el``, its parent link placed at ``(p0, R0)`` in ``inner``."""
    name = el.get("name", "")
    jtype = el.get("type")
    child = str(el.find("child").get("link"))  # type: ignore[union-attr]
    xyz, R_origin = _origin(doc, el, (el,))
    xyz, R_origin = p0 + R0 @ xyz, R0 @ R_origin
    axis_el = el.find("axis")
    axis = (
        np.array([1.0, 0.0, 0.0])
        if axis_el is None
        else _floats(doc, axis_el, "xyz", 3, None, (el,))
    )
    norm = float(np.linalg.norm(axis))
    if jtype in ("revolute", "continuous", "prismatic", "planar") and norm < 1e-12:
        raise doc.error(el, "the axis must not be zero", "axis")
    damping = 0.0
    dyn = el.find("dynamics")
    if dyn is not None:
        damping = float(_floats(doc, dyn, "damping", 1, (0.0,), (el,))[0])
        if damping < 0.0:
            raise doc.error(el, f"damping must be non-negative, got {damping}", "dynamics")
        if float(_floats(doc, dyn, "friction", 1, (0.0,), (el,))[0]) != 0.0:
            notes.append(
                f"{doc.where(el, 'dynamics')}: Coulomb friction is not modelled; ignored "
                "(the viscous damping is kept)"
            )
    mimic = el.find("mimic")
    if mimic is not None:
        notes.append(
            f"{doc.where(el, 'mimic')}: joint {name!r} mimics joint {mimic.get('joint')!r}: "
            "kanedyn imports it as an independent joint; the coupling is not enforced"
        )
    for tag, what in (
        ("calibration", "calibration is"),
        ("safety_controller", "safety controllers are"),
    ):
        if el.find(tag) is not None:
            notes.append(f"{doc.where(el, tag)}: {what} not modelled; ignored")
    A, k = axis_frame(axis / norm if norm > 0 else np.array([1.0, 0.0, 0.0]))
    kw: dict[str, Any] = dict(inner_point=xyz, inner_rotation=R_origin)
    try:
        if jtype == "fixed":
            return Joint.weld(name, inner, child, **kw)
        if jtype == "floating":
            return Joint.free(name, child, inner=inner, **kw)
        ndof = 3 if jtype == "planar" else 1
        kw.update(
            inner_rotation=R_origin @ A,
            outer_rotation=A.T,
            damping=damping,
            limits=_limits(doc, el, ndof) if jtype != "planar" else None,
        )
        if jtype in ("revolute", "continuous"):
            if jtype == "continuous":
                kw.update(limits=None)
            return Joint.revolute(name, inner, child, axis=k, **kw)
        if jtype == "prismatic":
            return Joint.prismatic(name, inner, child, axis=k, **kw)
        # planar: slides along the two Gi axes normal to the axis, then a rotation about it
        seq = {1: "231", 2: "312", 3: "123"}[k]  # first two digits: the normal axes
        return Joint(
            name,
            inner,
            child,
            rot_dof=1,
            rot_seq=f"{k}{seq[0]}{seq[1]}",
            trn_dof=2,
            trn_seq=seq,
            **kw,
        )
    except ModelError as exc:
        raise doc.error(el, str(exc)) from None
