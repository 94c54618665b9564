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

* The root link (the one that is no joint's child) is welded to N, or joined by a free
  joint with ``floating_base=True``. A root link named ``world`` without
  ``<inertial>`` is taken to be N itself. Any other link without ``<inertial>`` is an
  error.
* ``<dynamics damping>`` becomes the joint's damping. Joint limits, friction, mimic,
  calibration, safety controllers, ``<transmission>`` and ``<gazebo>`` elements are
  ignored with an :class:`~kanedyn.io.UnsupportedFeatureWarning`. Visual and collision
  geometry is not needed for the dynamics and is ignored silently.
"""

from __future__ import annotations

import os
import re
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from xml.parsers import expat

import numpy as np

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.io.fortytwo import UnsupportedFeatureWarning
from kanedyn.model import Body, Joint, Model
from kanedyn.spatial.rotation import euler_to_dcm

__all__ = ["read_urdf", "rpy_to_dcm"]

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
    return xyz, rpy_to_dcm(rpy)


def _axis_frame(axis: np.ndarray) -> tuple[np.ndarray, int]:
    """A rotation ``A`` (joint frame <- Gi) and the Gi axis number along ``axis``."""
    for k in range(3):
        if np.array_equal(axis, np.eye(3)[k]):
            return np.eye(3), k + 1
    z = np.array([0.0, 0.0, 1.0])
    c = float(z @ axis)
    v = np.cross(z, axis)
    s = float(np.linalg.norm(v))
    if s < 1e-12:  # axis = -z: half turn about x
        return np.diag([1.0, -1.0, -1.0]), 3
    K = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]]) / s
    A = np.eye(3) + s * K + (1.0 - c) * (K @ K)  # Rodrigues: rotates z onto axis
    return A, 3


def read_urdf(
    path: str | os.PathLike[str],
    *,
    floating_base: bool = False,
    gravity: Any = (0.0, 0.0, 0.0),
    check_triangle: bool = True,
) -> Model:
    """Read a URDF file into a :class:`~kanedyn.Model`.

    Parameters
    ----------
    path : path of the ``.urdf`` file.
    floating_base : bool
        Join the root link to N with a free joint instead of a weld.
    gravity : (3,)
        URDF has no gravity; give it here (m/s², N axes), e.g. ``(0, 0, -9.81)``.
    check_triangle : bool
        Reject link inertias whose principal moments violate the triangle inequality.

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
    links = {}
    for el in robot.findall("link"):
        name = el.get("name")
        if not name:
            raise doc.error(el, "missing attribute 'name'")
        if name in links:
            raise doc.error(el, f"duplicate link name {name!r}")
        links[name] = el
    if not links:
        raise doc.error(robot, "no <link> elements")

    joints_el = robot.findall("joint")
    children: dict[str, ET.Element] = {}
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
        child = el.find("child").get("link")  # type: ignore[union-attr]
        if child in children:
            raise doc.error(
                el, f"link {child!r} is already the child of joint {children[child].get('name')!r}"
            )
        children[child] = el  # type: ignore[index]
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise doc.error(
            robot, f"expected exactly one root link (a link that is no joint's child), got {roots}"
        )
    root = roots[0]
    world = root == "world" and links[root].find("inertial") is None

    bodies = [
        _body(doc, el, check_triangle) for name, el in links.items() if not (world and name == root)
    ]
    joints = []
    if not world:
        root_name = "root" if all(el.get("name") != "root" for el in joints_el) else f"{root}_root"
        joints.append(
            Joint.free(root_name, outer=root)
            if floating_base
            else Joint.weld(root_name, None, root)
        )
    elif floating_base:
        notes.append(f"{shown}: floating_base=True is ignored: the root link 'world' is N")
    for el in joints_el:
        joints.append(_joint(doc, el, None if world else root, notes))
    for tag in ("transmission", "gazebo"):
        found = robot.findall(tag)
        if found:
            notes.append(
                f"{doc.where(found[0])}: {len(found)} <{tag}> element(s) ignored "
                "(actuators and simulator plugins are not modelled)"
            )
    try:
        model = Model(bodies, joints, gravity=gravity)
    except ModelError as exc:
        # the line of the first joint (or link) the message names, else of <robot>
        named = re.findall(r"'([^']*)'", str(exc))
        culprit = next(
            (
                el
                for name in named
                for el in (*joints_el, *links.values())
                if el.get("name") == name
            ),
            robot,
        )
        raise doc.error(culprit, str(exc)) from None
    for message in notes:
        warnings.warn(message, UnsupportedFeatureWarning, stacklevel=2)
    return model


def _body(doc: _Doc, link: ET.Element, check_triangle: bool) -> Body:
    name = link.get("name", "")
    inertial = link.find("inertial")
    if inertial is None:
        raise doc.error(
            link,
            "has no <inertial>: kanedyn bodies need mass and inertia (merge the link into "
            "its parent or give it an <inertial>)",
        )
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise doc.error(link, "missing <mass value='...'>", "inertial")
    mass = float(_floats(doc, mass_el, "value", 1, None, (link, "inertial"))[0])
    if mass <= 0.0:
        raise doc.error(link, f"mass must be positive, got {mass!r}", "inertial", "mass")
    inertia_el = inertial.find("inertia")
    if inertia_el is None:
        raise doc.error(link, "missing <inertia ixx=... />", "inertial")
    ixx, ixy, ixz, iyy, iyz, izz = (
        float(_floats(doc, inertia_el, a, 1, None, (link, "inertial"))[0])
        for a in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    )
    I_inertial = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    com, R = _origin(doc, inertial, (link, "inertial"))
    try:
        return Body(
            name, mass=mass, inertia=R @ I_inertial @ R.T, com=com, check_triangle=check_triangle
        )
    except ModelError as exc:
        raise doc.error(link, str(exc), "inertial") from None


def _joint(doc: _Doc, el: ET.Element, root: str | None, notes: list[str]) -> Joint:
    name = el.get("name", "")
    jtype = el.get("type")
    parent = str(el.find("parent").get("link"))  # type: ignore[union-attr]
    child = str(el.find("child").get("link"))  # type: ignore[union-attr]
    inner = None if root is None and parent == "world" else parent
    xyz, R_origin = _origin(doc, el, (el,))
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
            notes.append(f"{doc.where(el, 'dynamics')}: friction is not modelled; ignored")
    for tag, what in (
        ("limit", "joint limits are"),
        ("mimic", "mimic joints are"),
        ("calibration", "calibration is"),
        ("safety_controller", "safety controllers are"),
    ):
        if el.find(tag) is not None and not (tag == "limit" and jtype in ("fixed", "floating")):
            notes.append(f"{doc.where(el, tag)}: {what} not modelled; ignored")
    A, k = _axis_frame(axis / norm if norm > 0 else axis)
    kw: dict[str, Any] = dict(inner_point=xyz, inner_rotation=R_origin)
    try:
        if jtype == "fixed":
            return Joint.weld(name, inner, child, **kw)
        if jtype == "floating":
            return Joint.free(name, child, inner=inner, **kw)
        kw.update(inner_rotation=R_origin @ A, outer_rotation=A.T, damping=damping)
        if jtype in ("revolute", "continuous"):
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
