"""The static scene of an animation, as meshcat commands.

Scene graph (meshcat paths; the scene is N, z up)::

    /kanedyn/N/axes                     N's axes (x red, y green, z blue)
    /kanedyn/bodies/<body>              one node per body, placed at the body frame
        frame                           the body's axes
        shape                           inertia-equivalent box or ellipsoid, at the mass centre
        rod<k>                          rods joining the body's joint points and mass centre
        visual<k>                       URDF visual geometry (replaces ``shape`` when found)
        flex/seg<k>, flex/node<k>       a flexible body's deflected shape: unit cylinders
                                        along its nodes (instead of ``shape``) and a ball
                                        per node, posed at every frame in the body frame
                                        (:func:`kanedyn.animation.frames.deflected_path`)
        joint-axis-<joint>-<k>          the joint's axes, on request
    /kanedyn/H                          the angular momentum arrow, at the system mass centre

Shapes (``shape=``):

* ``"box"``: the uniform box with the body's mass and principal moments,
  :math:`a_i = \\sqrt{6 (I_j + I_k - I_i) / m}` along principal axis i;
* ``"ellipsoid"``: the uniform ellipsoid, semi-axes
  :math:`a_i = \\sqrt{5 (I_j + I_k - I_i) / (2 m)}`;
* ``"rod"``: only the rods (a chain drawn as a stick figure), a small ball at each
  mass centre.

A dimension that comes out zero or imaginary (a thin rod, a particle, or an inertia that
violates the triangle inequality, as 42's Explorer-1 hub does) is drawn at a minimum
thickness of 2 % of the scene.
"""

from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.animation.frames import segment_count
from kanedyn.errors import FileFormatError, KanedynError
from kanedyn.model import Model
from kanedyn.spatial.inertia import principal_axes

__all__ = ["SHAPES", "Scene", "build_scene", "frame_along", "meshcat_modules", "node_name"]

Array = NDArray[np.float64]
SHAPES = ("box", "ellipsoid", "rod")
PALETTE = (0x4C72B0, 0xDD8452, 0x55A868, 0xC44E52, 0x8172B3, 0x937860, 0xDA8BC3, 0x8C8C8C,
           0xCCB974, 0x64B5CD)  # fmt: skip
ROD_COLOR, H_COLOR, AXIS_COLOR = 0x9A9A9A, 0xFFD000, 0xFF00FF


def meshcat_modules() -> tuple[Any, Any, Any]:
    """``(meshcat.geometry, meshcat.commands, meshcat.path)``, or a KanedynError naming
    the extra to install."""
    try:
        with warnings.catch_warnings():  # meshcat's server modules import deprecated pyzmq names
            warnings.simplefilter("ignore", DeprecationWarning)
            import meshcat.commands as mc
            import meshcat.geometry as mg
            import meshcat.path as mp
    except ImportError as exc:
        raise KanedynError(
            "animation needs the meshcat viewer: kanedyn[animate] (in kanedyn's source tree: python -m pip install '.[animate]') "
            f"(import failed: {exc})"
        ) from None
    return mg, mc, mp


def node_name(name: str) -> str:
    """A body or joint name as one meshcat path element (no '/')."""
    return name.replace("/", "\u2215") or "_"


def frame_along(d: Array, axis: int = 1) -> Array:
    """A rotation matrix whose column ``axis`` is the unit vector along ``d``
    (three.js cylinders lie along their y axis)."""
    d = np.asarray(d, dtype=float)
    n = np.linalg.norm(d)
    if n == 0.0:
        return np.eye(3)
    y = d / n
    helper = np.eye(3)[int(np.argmin(np.abs(y)))]
    x = np.cross(y, helper)
    x /= np.linalg.norm(x)
    z = np.cross(x, y)
    R = np.column_stack((x, y, z))  # det +1: x × y = z
    return np.roll(R, axis - 1, axis=1) if axis != 1 else R


def _pose(R: Array, p: Array, scale: Array | None = None) -> Array:
    T = np.eye(4)
    T[:3, :3] = R if scale is None else R * np.asarray(scale)[None, :]
    T[:3, 3] = p
    return T


def inertia_dimensions(mass: float, inertia: Array, shape: str) -> tuple[Array, Array]:
    """Full lengths (box) or semi-axes (ellipsoid) along the principal axes, and those axes.

    Box: :math:`a_i^2 = 6 (I_j + I_k - I_i) / m`; ellipsoid: :math:`a_i^2 = 5 (I_j + I_k - I_i) / (2m)`
    (uniform solids; e.g. Meriam & Kraige, Dynamics, table D/4). Negative squares
    (inertias outside the triangle inequality) are returned as zero.
    """
    moments, R = principal_axes(inertia)
    if mass <= 0.0:
        return np.zeros(3), R
    s = moments.sum() - 2.0 * moments  # I_j + I_k - I_i
    k = 6.0 if shape == "box" else 2.5
    return np.sqrt(np.clip(k * s / mass, 0.0, None)), R


class Scene:
    """Collects meshcat commands (``.commands``) and what was drawn (``.parts``, per body)."""

    def __init__(self) -> None:
        self.mg, self.mc, self.mp = meshcat_modules()
        self.commands: list[Any] = []
        self.parts: dict[str, list[str]] = {}

    def path(self, *names: str) -> Any:
        return self.mp.Path(tuple(names))

    def add(self, path: tuple[str, ...], obj: Any, T: Array | None = None) -> None:
        if T is not None:
            self.commands.append(self.mc.SetTransform(T, self.path(*path)))
        self.commands.append(self.mc.SetObject(obj, path=self.path(*path)))

    def mesh(self, geometry: Any, color: int, opacity: float = 1.0) -> Any:
        mat = self.mg.MeshLambertMaterial(color=color, opacity=opacity,
                                          transparent=opacity < 1.0)  # fmt: skip
        return self.mg.Mesh(geometry, mat)

    def rod(self, path: tuple[str, ...], a: Array, b: Array, radius: float, color: int) -> None:
        d = np.asarray(b, float) - np.asarray(a, float)
        L = float(np.linalg.norm(d))
        if L <= 1e-12:
            return
        T = _pose(frame_along(d), (np.asarray(a) + np.asarray(b)) / 2.0)
        self.add(path, self.mesh(self.mg.Cylinder(L, radius), color), T)

    def triad(self, path: tuple[str, ...], size: float) -> None:
        self.add(path, self.mg.triad(size))

    def set_property(self, path: tuple[str, ...], key: str, value: Any) -> None:
        self.commands.append(self.mc.SetProperty(key, value, self.path(*path)))


def scene_size(model: Model, p: Array, c: Array) -> float:
    """A length for the whole scene: the spread of the body origins, mass centres and
    joint points over the run, and the bodies' own sizes (at least 1 mm)."""
    pts = [p.reshape(-1, 3), c]
    spread = float(np.ptp(np.concatenate(pts), axis=0).max()) if len(pts[0]) else 0.0
    own = 0.0
    for b in model.bodies:
        dims, _ = inertia_dimensions(b.mass, np.asarray(b.inertia, float), "box")
        own = max(own, float(dims.max()), float(np.linalg.norm(b.com)))
    for j in model.joints:
        own = max(own, float(np.linalg.norm(j.inner_point)), float(np.linalg.norm(j.outer_point)))
    return max(spread, own, 1e-3)


def build_scene(
    model: Model,
    p: Array,
    c: Array,
    H: Array,
    *,
    shape: str = "box",
    joint_axes: bool = False,
    urdf: str | Path | None = None,
) -> tuple[Scene, float]:
    """The meshcat commands that draw ``model`` (poses are set by the animation).

    ``p`` (nf, nb, 3) body origins and ``c`` (nf, 3) mass centres size the scene;
    ``H`` (nf, 3) hides the momentum arrow when it is zero throughout. Returns the scene
    and its length scale [m].
    """
    if shape not in SHAPES:
        raise KanedynError(f"animation shape must be one of {', '.join(SHAPES)}, got {shape!r}")
    sc = Scene()
    L = scene_size(model, p, c)
    thin = 0.02 * L
    sc.set_property(("Axes",), "visible", False)  # meshcat's own 0.5 m axes: N's are drawn instead
    sc.triad(("kanedyn", "N", "axes"), 0.5 * L)
    visuals = urdf_visuals(urdf) if urdf is not None else {}

    outbound: dict[str, list[Array]] = {b.name: [] for b in model.bodies}
    for j in model.joints:
        if j.inner is not None:
            outbound[j.inner].append(np.asarray(j.inner_point, float))
    inbound = {j.outer: np.asarray(j.outer_point, float) for j in model.joints}

    for i, b in enumerate(model.bodies):
        node = ("kanedyn", "bodies", node_name(b.name))
        color = PALETTE[i % len(PALETTE)]
        parts: list[str] = []
        com = np.asarray(b.com, float)
        I = np.asarray(b.inertia, float)
        # rods: inbound joint point -> each outbound joint point, and -> the mass centre
        # (a flexible body is drawn along its deflected nodes instead of to its mass centre)
        start = inbound.get(b.name, np.zeros(3))
        flexible = b.modes is not None and len(b.modes.node_names) > 0
        ends = [*outbound[b.name]] if flexible else [*outbound[b.name], com]
        for k, e in enumerate(ends):
            if np.linalg.norm(e - start) > 1e-12:
                sc.rod((*node, f"rod{k}"), start, e, 0.4 * thin, ROD_COLOR)
                parts.append("rod")
        drawn = False
        for k, (geometry, T, rgba) in enumerate(visuals.get(b.name, [])):
            col = color if rgba is None else _rgb(rgba)
            opacity = 1.0 if rgba is None else float(rgba[3])
            sc.add((*node, f"visual{k}"), sc.mesh(geometry, col, opacity), T)
            parts.append(f"visual:{type(geometry).__name__}")
            drawn = True
        if not drawn and flexible:
            md: Any = b.modes
            for k in range(segment_count(md)):  # posed by the animation's tracks
                sc.add((*node, "flex", f"seg{k}"), sc.mesh(sc.mg.Cylinder(1.0, 0.5 * thin), color))
            for k in range(len(md.node_names)):
                sc.add((*node, "flex", f"node{k}"), sc.mesh(sc.mg.Sphere(0.9 * thin), color))
            parts.append("deflected shape")
            drawn = True
        if not drawn:
            if shape == "rod" or b.mass <= 0.0:
                sc.add(
                    (*node, "shape"),
                    sc.mesh(sc.mg.Sphere(1.5 * thin), color),
                    _pose(np.eye(3), com),
                )
                parts.append("ball")
            else:
                dims, R = inertia_dimensions(b.mass, I, shape)
                if shape == "box":
                    geom = sc.mg.Box(np.maximum(dims, thin).tolist())
                else:
                    geom = sc.mg.Ellipsoid(np.maximum(dims, thin / 2).tolist())
                sc.add((*node, "shape"), sc.mesh(geom, color, 0.85), _pose(R, com))
                parts.append(shape)
        body_size = max(
            2.0 * float(np.linalg.norm(com)), *(float(np.linalg.norm(e)) for e in ends), 4.0 * thin
        )
        sc.triad((*node, "frame"), 0.6 * min(body_size, 0.5 * L))
        parts.append("frame")
        sc.parts[b.name] = parts

    if joint_axes:
        for j in model.joints:
            for where, point, R, axes in joint_axis_placements(j):
                owner = (
                    ("kanedyn", "N") if where is None else ("kanedyn", "bodies", node_name(where))
                )
                for k, ax in enumerate(axes):
                    d = R[:, ax]
                    a = point - 0.3 * L * d
                    sc.rod((*owner, f"joint-axis-{node_name(j.name)}-{where or 'N'}-{k}"), a,
                           point + 0.3 * L * d, 0.15 * thin, AXIS_COLOR)  # fmt: skip
                    sc.parts.setdefault(where or "N", []).append(f"joint-axis:{j.name}")

    # the angular momentum arrow: +y of its node along H, length 0.6 L at max |H|
    ell = 0.6 * L
    sc.add(("kanedyn", "H", "shaft"), sc.mesh(sc.mg.Cylinder(0.85 * ell, 0.6 * thin), H_COLOR),
           _pose(np.eye(3), np.array([0.0, 0.425 * ell, 0.0])))  # fmt: skip
    sc.add(("kanedyn", "H", "head"),
           sc.mesh(sc.mg.Cylinder(0.15 * ell, radiusTop=0.0, radiusBottom=1.8 * thin), H_COLOR),
           _pose(np.eye(3), np.array([0.0, 0.925 * ell, 0.0])))  # fmt: skip
    if not np.any(np.linalg.norm(H, axis=1) > 0.0):
        sc.set_property(("kanedyn", "H"), "visible", False)
    return sc, L


def joint_axis_placements(j: Any) -> list[tuple[str | None, Array, Array, list[int]]]:
    """Where each of a joint's axes is fixed: ``(body or None for N, point, R, [axis])``.

    Slides and the first rotation of a gimbal turn about axes fixed in Gi (in the inner
    body, at ``inner_point``, ``R_Bi_Gi``); the last rotation of a 2- or 3-DOF gimbal
    about an axis fixed in Go (in the outer body: ``R_Bo_Go = outer_rotationᵀ``). A
    3-DOF gimbal's middle axis moves with both and is not drawn; a spherical joint has
    no axes.
    """
    out: list[tuple[str | None, Array, Array, list[int]]] = []
    Ri = np.asarray(j.inner_rotation, float)
    pi = np.asarray(j.inner_point, float)
    fixed_in_gi = [int(ch) - 1 for ch in j.trn_seq[: j.trn_dof]]
    if j.rot_type == "gimbal" and j.rot_dof >= 1:
        seq = [int(ch) - 1 for ch in j.rot_seq]
        fixed_in_gi.append(seq[0])
        if j.rot_dof >= 2:
            Ro = np.asarray(j.outer_rotation, float).T
            out.append((j.outer, np.asarray(j.outer_point, float), Ro, [seq[j.rot_dof - 1]]))
    if fixed_in_gi:
        out.insert(0, (j.inner, pi, Ri, sorted(set(fixed_in_gi))))
    return out


def _rgb(rgba: Array) -> int:
    r, g, b = (int(round(255 * float(np.clip(x, 0, 1)))) for x in rgba[:3])
    return (r << 16) | (g << 8) | b


# --------------------------------------------------------------------------- URDF visuals
def _floats(text: str | None, n: int, default: list[float]) -> Array:
    if text is None:
        return np.array(default, float)
    vals = np.array([float(x) for x in text.split()], float)
    if len(vals) != n:
        raise ValueError(f"expected {n} numbers, got {text!r}")
    return vals


def resolve_mesh(filename: str, urdf_dir: Path) -> Path | None:
    """A URDF mesh file name resolved on disk: ``package://pkg/rest`` is looked for as
    ``pkg/rest`` or ``rest`` in the URDF's folder and its parents; ``file://`` and plain
    paths relative to the URDF's folder. ``None`` when not found."""
    if filename.startswith("file://"):
        p = Path(filename[len("file://") :])
        return p if p.is_file() else None
    candidates: list[Path] = []
    if filename.startswith("package://"):
        rest = filename[len("package://") :]
        pkg, _, sub = rest.partition("/")
        for d in (urdf_dir, *urdf_dir.parents):
            candidates += [d / pkg / sub, d / sub] if d.name != pkg else [d / sub]
    else:
        candidates.append(urdf_dir / filename)
    return next((c for c in candidates if c.is_file()), None)


def urdf_visuals(urdf: str | Path) -> dict[str, list[tuple[Any, Array, Array | None]]]:
    """Each link's ``<visual>`` geometry as ``(meshcat geometry, pose in the link frame,
    rgba or None)``.

    Boxes, cylinders (URDF's along z, meshcat's along y), spheres and meshes (STL, OBJ,
    Collada) are drawn; a mesh that cannot be found or read gives a warning, and the link
    is then drawn as its inertia shape.
    """
    mg = meshcat_modules()[0]
    path = Path(urdf)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise FileFormatError(f"{path}: cannot read the URDF for its visuals ({exc})") from None
    colors = {
        m.get("name"): _floats(m.find("color").get("rgba"), 4, [1, 1, 1, 1])  # type: ignore[union-attr]
        for m in root.findall("material")
        if m.find("color") is not None
    }
    out: dict[str, list[tuple[Any, Array, Array | None]]] = {}
    for link in root.findall("link"):
        name = link.get("name", "")
        for vis in link.findall("visual"):
            try:
                item = _visual(mg, vis, path, colors)
            except (OSError, ValueError) as exc:
                warnings.warn(f"{path}: link {name!r}: visual not drawn ({exc})", stacklevel=3)
                continue
            if item is not None:
                out.setdefault(name, []).append(item)
    return out


def _visual(mg: Any, vis: ET.Element, path: Path, colors: dict[Any, Array]) -> Any:
    from kanedyn.io.urdf import rpy_to_dcm

    origin = vis.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, 3, [0, 0, 0])
    rpy = _floats(origin.get("rpy") if origin is not None else None, 3, [0, 0, 0])
    R = rpy_to_dcm(rpy)
    rgba = None
    mat = vis.find("material")
    if mat is not None:
        col = mat.find("color")
        rgba = (
            _floats(col.get("rgba"), 4, [1, 1, 1, 1])
            if col is not None
            else colors.get(mat.get("name"))
        )
    geo = vis.find("geometry")
    if geo is None or len(geo) == 0:
        return None
    g = geo[0]
    if g.tag == "box":
        return mg.Box(_floats(g.get("size"), 3, [1, 1, 1]).tolist()), _pose(R, xyz), rgba
    if g.tag == "sphere":
        return mg.Sphere(float(g.get("radius", "1"))), _pose(R, xyz), rgba
    if g.tag == "cylinder":
        Rz_to_y = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])  # maps meshcat y to URDF z
        geom = mg.Cylinder(float(g.get("length", "1")), float(g.get("radius", "1")))
        return geom, _pose(R @ Rz_to_y, xyz), rgba
    if g.tag == "mesh":
        fn = g.get("filename", "")
        found = resolve_mesh(fn, path.parent)
        if found is None:
            raise OSError(f"mesh file {fn!r} not found")
        scale = _floats(g.get("scale"), 3, [1, 1, 1])
        kind = found.suffix.lower()
        if kind == ".stl":
            geom = mg.StlMeshGeometry.from_file(str(found))
        elif kind == ".obj":
            geom = mg.ObjMeshGeometry.from_file(str(found))
        elif kind == ".dae":
            geom = mg.DaeMeshGeometry.from_file(str(found))
        else:
            raise ValueError(f"mesh format {kind!r} of {fn!r} is not supported (STL, OBJ, DAE are)")
        return geom, _pose(R, xyz, scale), rgba
    raise ValueError(f"unknown visual geometry <{g.tag}>")
