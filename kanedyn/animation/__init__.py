"""3D animation of a trajectory in the browser: one self-contained HTML file.

``kd.animate(traj, "run.html")`` (or ``traj.animate("run.html")``, or
``kanedyn simulate --animate``) writes a page that plays the run with no server and no
network: play/pause, a time slider, a playback speed, and ``run.html#t=SECONDS`` to
open it paused at a moment. It shows N's axes, each body's axes and shape (its
inertia-equivalent box or ellipsoid, URDF visual meshes where found, rods joining the
joint points of chains), the angular momentum vector, and joint axes on request; a
flexible body is drawn along its deflected nodes (``deflection_scale`` magnifies it).

The viewer is **meshcat** (the WebGL viewer of Pinocchio and Drake, built on three.js;
optional extra ``kanedyn[animate]``): its Python package ships the viewer's JavaScript
bundle, which is copied into the page, and its geometry and command classes build the
scene. ``docs/howto/animate.md`` says why it was chosen over the alternatives.

Modules: :mod:`~kanedyn.animation.frames` (decimated poses from
:func:`kanedyn.kinematics`), :mod:`~kanedyn.animation.scene` (the drawn shapes),
:mod:`~kanedyn.animation.page` (the HTML and its player),
:mod:`~kanedyn.animation.browser` (headless Chromium: screenshots, the page's DOM;
``python -m kanedyn.animation.screenshot``).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kanedyn.animation.frames import Frames, frames, nice_speed
from kanedyn.animation.page import FRAMES_ID, render
from kanedyn.animation.scene import build_scene, frame_along, meshcat_modules, node_name
from kanedyn.errors import KanedynError
from kanedyn.spatial.rotation import dcm_to_quat

if TYPE_CHECKING:
    from kanedyn.simulation.trajectory import Trajectory

__all__ = ["Animation", "Frames", "animate", "read_frames"]


class Animation:
    """A written (or in-memory) animation page.

    Attributes: ``html`` (the page's text), ``path`` (the file written, or ``None``),
    ``frames`` (:class:`~kanedyn.animation.frames.Frames`), ``parts`` (what was drawn for
    each body), ``note`` (the decimation note shown in the page). In Jupyter it displays
    itself inline (an ``<iframe srcdoc>``, so it works offline and in static HTML
    exports of the notebook).
    """

    def __init__(self, page: str, path: Path | None, fr: Frames, parts: dict[str, list[str]],
                 note: str, height: int = 480) -> None:  # fmt: skip
        self.html = page
        self.path = path
        self.frames = fr
        self.parts = parts
        self.note = note
        self.height = height

    def __repr__(self) -> str:
        where = f" at {self.path}" if self.path is not None else ""
        return f"<kanedyn Animation{where}: {len(self.frames.t)} frames; {self.note}>"

    def _repr_html_(self) -> str:
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
            f'style="width: 100%; height: {self.height}px; border: 1px solid #ddd" '
            'title="kanedyn animation"></iframe>'
        )


def animate(
    traj: Trajectory,
    path: str | Path | None = None,
    *,
    shape: str = "box",
    joint_axes: bool = False,
    urdf: str | Path | None = None,
    max_frames: int = 1000,
    max_bytes: float = 8e6,
    playback_seconds: float = 20.0,
    view: Any = None,
    title: str | None = None,
    deflection_scale: float = 1.0,
) -> Animation:
    """Write a self-contained HTML page that plays ``traj`` in 3D.

    Parameters
    ----------
    traj : Trajectory
        The run (:func:`kanedyn.simulate`).
    path : str or Path, optional
        The HTML file to write; ``None`` writes nothing (the returned object still holds
        the page and displays it in Jupyter).
    shape : {"box", "ellipsoid", "rod"}
        How each body is drawn: the uniform box or ellipsoid with its mass and principal
        moments, or only the rods of the chain (and a ball at the mass centre). Rods
        join each body's inbound joint point to its outbound joint points and its mass
        centre in every case.
    joint_axes : bool
        Draw each joint's axes (magenta).
    urdf : str or Path, optional
        A URDF whose links' ``<visual>`` geometry (meshes found on disk, boxes,
        cylinders, spheres) replaces the inertia shapes of the bodies of the same name.
    max_frames, max_bytes : int, float
        Decimation: at most this many frames, and about this many bytes of frame data
        (the page adds about 0.9 MB for the viewer). The page says when frames were
        dropped; between frames the viewer interpolates (linearly, and by slerp).
    playback_seconds : float
        The default speed plays the whole run in about this long (never slower than
        real time); the page's speed box changes it.
    view : array_like (3,), optional
        The direction (N) from which the camera looks at the scene. By default, along
        the normal of the plane the motion spreads least in, tilted for depth.
    title : str, optional
        The page title.
    deflection_scale : float
        A flexible body (``Body(..., modes=kd.Modes)``) is drawn along its deflected
        nodes, ``r_n + s Ψ_n η`` (:func:`~kanedyn.animation.frames.deflected_path`),
        with its elastic displacement magnified ``s`` times (1: true size; the page says
        when it is not 1). The frame data keep the true node positions.

    Returns
    -------
    Animation
        The page (``.html``), where it was written (``.path``) and the frames.

    Notes
    -----
    Poses are :func:`kanedyn.kinematics` at the kept output times: each body frame's
    origin ``p`` and ``R_N_B`` (as a scalar-last quaternion), stored at full precision
    in the page's ``<script id="kanedyn-frames">`` JSON (:func:`read_frames`). For each
    flexible body, ``flex[body]`` holds its ``node_names``, modal coordinates ``eta``
    (nf, modes) and deflected node positions ``nodes`` (nf, Nn, 3; N, true size,
    ``p + R_N_B (r_n + Ψ_n η)``); ``tracks`` the poses of the drawn segments and nodes.
    """
    meshcat_modules()  # fail early, naming the extra
    model = traj.model
    fr = frames(traj, max_frames=max_frames, max_bytes=max_bytes,
                deflection_scale=deflection_scale)  # fmt: skip
    sc, L = build_scene(model, fr.p, fr.c, fr.H, shape=shape, joint_axes=joint_axes, urdf=urdf)
    R_view_N = _up_rotation(model.uniform_gravity)
    T = np.eye(4)
    T[:3, :3] = R_view_N
    sc.commands.insert(0, sc.mc.SetTransform(T, sc.path("kanedyn")))
    lowest = float(np.min(_points(fr) @ R_view_N[2]))
    if lowest < -1e-3 * L:  # meshcat's ground grid (view z = 0) would cut through the motion
        sc.set_property(("Grid",), "visible", False)

    Hn = np.linalg.norm(fr.H, axis=1)
    Hmax = float(Hn.max())
    H_quat = np.array([dcm_to_quat(frame_along(h)) for h in fr.H])
    H_scale = Hn / Hmax if Hmax > 0 else np.zeros_like(Hn)
    H_scale = np.maximum(H_scale, 1e-6)  # three.js cannot invert a zero scale

    duration = float(fr.t[-1] - fr.t[0])
    speed = nice_speed(duration, playback_seconds)
    n, m = len(fr.t), fr.n_samples
    note = (
        f"decimated: {n} frames of {m} outputs, evenly spread "
        f"(limits {max_frames} frames, {max_bytes / 1e6:g} MB of frame data)"
        if fr.decimated
        else f"all {m} outputs"
    ) + f"; t = {fr.t[0]:g} to {fr.t[-1]:g} s; {model.nb} bodies; speed in simulated s per s"
    if fr.flex and deflection_scale != 1.0:
        note += f"; elastic deflections drawn {deflection_scale:g} times true size"
    data = {
        "version": 1,
        "bodies": [b.name for b in model.bodies],
        "nodes": [node_name(b.name) for b in model.bodies],
        "t": fr.t.tolist(),
        "index": fr.index.tolist(),
        "n_samples": m,
        "p": fr.p.tolist(),
        "quaternion": fr.quaternion.tolist(),
        "H": fr.H.tolist(),
        "c": fr.c.tolist(),
        "H_quaternion": H_quat.tolist(),
        "H_scale": H_scale.tolist(),
        "speed": speed,
        "camera": _camera(fr, L, view, R_view_N),
        "note": note,
        "flex": {
            name: {
                "node_names": list(f.node_names),
                "eta": f.eta.tolist(),
                "nodes": f.nodes.tolist(),
                "deflection_scale": f.scale,
            }
            for name, f in fr.flex.items()
        },  # fmt: skip
        "tracks": _flex_tracks(fr),
    }
    page = render(title or "kanedyn animation", data, sc.commands)
    out = None
    if path is not None:
        out = Path(path)
        out.write_text(page, encoding="utf-8")
    return Animation(page, out, fr, sc.parts, note)


def _flex_tracks(fr: Frames) -> list[dict[str, Any]]:
    """The animation tracks of the flexible bodies' drawn shapes, in their body frames:
    each segment ``k`` of the path (a unit cylinder along its y axis) at the midpoint of
    its ends ``a``, ``b``, turned so that y is along ``b - a`` and scaled ``|b - a|``
    along y; each node ball at the drawn node."""
    tracks: list[dict[str, Any]] = []
    for name, f in fr.flex.items():
        base = ["kanedyn", "bodies", node_name(name), "flex"]
        a, b = f.path[:, :-1], f.path[:, 1:]
        for k in range(a.shape[1]):
            d = b[:, k] - a[:, k]
            Q = np.array([dcm_to_quat(frame_along(dk)) for dk in d])
            for j in range(1, len(Q)):  # one hemisphere, so that slerp turns the short way
                if Q[j] @ Q[j - 1] < 0.0:
                    Q[j] = -Q[j]
            length = np.maximum(np.linalg.norm(d, axis=1), 1e-9)  # three.js cannot invert 0
            scale = np.column_stack((np.ones_like(length), length, np.ones_like(length)))
            tracks.append({"path": [*base, f"seg{k}"], "position": (0.5 * (a[:, k] + b[:, k])).tolist(),
                           "quaternion": Q.tolist(), "scale": scale.tolist()})  # fmt: skip
        for k in range(f.drawn_nodes.shape[1]):
            tracks.append({"path": [*base, f"node{k}"], "position": f.drawn_nodes[:, k].tolist()})
    return tracks


def _up_rotation(gravity: Any) -> Any:
    """``R_view_N``: the viewer's z is up, so N is turned to put -gravity up (identity
    without gravity)."""
    g = np.asarray(gravity, dtype=float)
    if not np.any(g):
        return np.eye(3)
    return frame_along(-g, axis=2).T


def _points(fr: Frames) -> Any:
    """The points the scene must show (N): body origins, mass centres, flexible nodes."""
    nodes = [f.nodes.reshape(-1, 3) for f in fr.flex.values()]
    return np.concatenate((fr.p.reshape(-1, 3), fr.c, *nodes))


def _camera(fr: Frames, L: float, view: Any, R_view_N: Any) -> dict[str, Any]:
    """Camera position and target in the viewer's axes (``R_view_N`` applied)."""
    pts = _points(fr) @ R_view_N.T
    target = fr.c.mean(axis=0) @ R_view_N.T
    if view is None:
        # the direction of least spread of the motion, tilted toward a diagonal for depth
        w, V = np.linalg.eigh(np.cov((pts - pts.mean(axis=0)).T))
        # the least-spread directions (several when the points lie on a line or at one
        # point): of these, the one closest to the vertical, so that we look from above
        flat = V[:, w <= w[0] + 1e-6 * max(w[-1], L * L)]
        up = flat @ (flat.T @ np.array([0.0, 0.0, 1.0]))
        n = up / np.linalg.norm(up) if np.linalg.norm(up) > 1e-6 else V[:, 0]
        n = n if n[2] >= -1e-9 else -n
        side = np.array([1.0, -1.0, 1.0])
        side = side - (side @ n) * n
        d = n + 0.8 * side / max(float(np.linalg.norm(side)), 1e-12)
    else:
        d = np.asarray(view, dtype=float)
        if d.shape != (3,) or not np.all(np.isfinite(d)) or not np.any(d):
            raise KanedynError(f"view must be a nonzero 3-vector (N axes), got {view!r}")
        d = R_view_N @ d
    d = d / np.linalg.norm(d)
    radius = float(np.linalg.norm(pts - target, axis=1).max()) + 0.25 * L  # + the bodies' size
    dist = 2.0 * radius + 1e-3
    return {
        "position": (target + dist * d).tolist(),
        "target": target.tolist(),
        "near": dist / 1000.0,
        "far": dist * 20.0,
    }


def read_frames(page: str | Path) -> dict[str, Any]:
    """The frame data of a written page (its ``kanedyn-frames`` JSON) as a dict:
    ``t``, ``bodies``, ``p`` (nf, nb, 3), ``quaternion`` (nf, nb, 4), ``H``, ``c``, ..."""
    if isinstance(page, str) and page.lstrip().startswith("<"):
        text = page
    else:
        text = Path(page).read_text(encoding="utf-8")
    start_tag = f'<script type="application/json" id="{FRAMES_ID}">'
    i = text.find(start_tag)
    if i < 0:
        raise KanedynError("no kanedyn frame data in this page")
    j = text.find("</script>", i)
    return json.loads(text[i + len(start_tag) : j])
