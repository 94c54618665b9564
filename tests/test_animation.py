"""3D animation pages (kanedyn.animation): the frame data against kd.kinematics, the page
being self-contained, decimation, shapes, URDF visuals, the missing-extra error, and the
page itself in headless Chromium (screenshots, scene body count, #t= seeking)."""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kanedyn as kd

pytest.importorskip("meshcat", reason="the 'animate' extra (meshcat) is not installed")

from kanedyn.animation import animate  # noqa: E402
from kanedyn.animation.browser import dump_dom, find_browser, screenshot  # noqa: E402
from kanedyn.animation.scene import inertia_dimensions  # noqa: E402

FRAMES = re.compile(r'<script type="application/json" id="kanedyn-frames">(.*?)</script>', re.S)


def page_frames(text: str) -> dict:
    """The frame JSON, parsed straight out of the HTML (not through kanedyn)."""
    m = FRAMES.search(text)
    assert m, "no frame data in the page"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def explorer_run():
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    return kd.simulate(model, state, 400.0, 1.0, output_every=4.0, progress=False)


@pytest.fixture(scope="module")
def pendulum_run():
    model = kd.examples.double_pendulum()
    state = model.set_joint(model.initial_state(), "joint0", angles=(1.2,), rates=(0.5,))
    return kd.simulate(model, state, 2.0, 0.01, output_every=0.02, progress=False)


# --------------------------------------------------------------------------- frame data
@pytest.mark.parametrize("run", ["explorer_run", "pendulum_run"])
def test_frame_poses_equal_kinematics(run, request, tmp_path):
    traj = request.getfixturevalue(run)
    path = tmp_path / "run.html"
    traj.animate(path, max_frames=40)
    data = page_frames(path.read_text(encoding="utf-8"))
    model = traj.model
    assert data["bodies"] == [b.name for b in model.bodies]
    t = np.array(data["t"])
    assert t[0] == traj.t[0] and t[-1] == traj.t[-1]  # first and last output kept
    assert len(t) == 40
    for k, tk in enumerate(t):
        (i,) = np.flatnonzero(traj.t == tk)  # a frame is an output sample, not an interpolation
        kin = kd.kinematics(model, traj.state(i))
        p = np.array(data["p"][k])
        R = Rotation.from_quat(np.array(data["quaternion"][k])).as_matrix()  # scalar-last
        assert np.abs(p - kin.p).max() <= 1e-12
        assert np.abs(R - kin.R_N_B).max() <= 1e-12
        _, H = kd.momentum(model, traj.state(i))
        assert np.abs(np.array(data["H"][k]) - H).max() <= 1e-12 * max(1.0, np.linalg.norm(H))


def test_page_is_self_contained(explorer_run, tmp_path):
    text = explorer_run.animate(tmp_path / "run.html").html
    # nothing is loaded from elsewhere: no src/href/url()/import to another place
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z]+:)?//""", text, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:[a-z]+:)?//""", text, re.I)
    assert not re.search(r"""@import|<link\b|<iframe\b|<script[^>]*\bsrc=""", text, re.I)
    # the only absolute URLs are XML namespace names, which are never fetched, and the
    # same-host websocket template of meshcat's viewer.connect(), which the page never calls
    urls = set(re.findall(r"""(?:https?|wss?|ftp):\/\/[^\s"'<>)]*""", text))
    urls = {u for u in urls if not u.startswith("ws://${location.host}")}
    assert urls <= {"http://www.w3.org/1999/xhtml", "http://www.w3.org/2000/svg"}, urls
    assert "viewer.connect(" not in text.split("MeshCat.Viewer(pane)")[-1]
    assert "MeshCat.Viewer" in text  # the viewer bundle is inline


def test_decimation_to_frames_and_bytes(tmp_path):
    model = kd.examples.double_pendulum()
    state = model.set_joint(model.initial_state(), "joint0", angles=(0.5,))
    traj = kd.simulate(model, state, 10.0, 0.005, progress=False)  # 2001 outputs
    a = traj.animate(tmp_path / "a.html", max_frames=100)
    data = page_frames(a.html)
    assert len(data["t"]) == 100 and data["n_samples"] == len(traj.t) == 2001
    steps = np.diff(data["index"])
    assert steps.min() >= 20 and steps.max() <= 21  # evenly spread
    assert "decimated: 100 frames of 2001 outputs" in a.html  # said in the page
    # a byte budget: the frame data stays under it
    b = traj.animate(tmp_path / "b.html", max_frames=10_000, max_bytes=60_000)
    raw = FRAMES.search(b.html).group(1)
    assert len(raw) <= 60_000 and len(page_frames(b.html)["t"]) < 2001
    assert "decimated:" in b.html
    c = traj.animate(tmp_path / "c.html", max_frames=5000)
    assert "all 2001 outputs" in c.html and len(page_frames(c.html)["t"]) == 2001
    with pytest.raises(kd.KanedynError, match="fewer than 2 frames"):
        traj.animate(None, max_frames=1)


# --------------------------------------------------------------------------- shapes
def test_inertia_equivalent_box_and_ellipsoid():
    """The uniform box/ellipsoid with the body's principal moments has its dimensions
    (closed forms: box I_x = m (b² + c²)/12, ellipsoid I_x = m (b² + c²)/5)."""
    m, (a, b, c) = 3.0, (0.4, 1.0, 2.5)
    box = np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 12.0
    ell = np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 5.0
    R = Rotation.from_euler("xyz", [0.3, -0.5, 1.1]).as_matrix()
    for I, shape in ((box, "box"), (ell, "ellipsoid")):
        dims, axes = inertia_dimensions(m, R @ I @ R.T, shape)
        assert np.allclose(np.sort(dims), [a, b, c], rtol=1e-12)
        assert np.allclose(np.abs(axes.T @ R), np.eye(3)[np.argsort(np.argsort(dims))], atol=1e-9)


def test_shapes_rods_and_joint_axes(pendulum_run):
    a = pendulum_run.animate(None, shape="rod", joint_axes=True)
    assert "ball" in a.parts["link0"] and "rod" in a.parts["link0"]
    assert "joint-axis:joint0" in a.parts["N"] and "joint-axis:joint1" in a.parts["link0"]
    e = pendulum_run.animate(None, shape="ellipsoid")
    assert all("ellipsoid" in e.parts[b.name] for b in pendulum_run.model.bodies)
    with pytest.raises(kd.KanedynError, match="shape must be one of"):
        pendulum_run.animate(None, shape="cone")


ASCII_STL = """solid tri
facet normal 0 0 1
 outer loop
  vertex 0 0 0
  vertex 1 0 0
  vertex 0 1 0
 endloop
endfacet
endsolid tri
"""


URDF = """<?xml version="1.0"?>
<robot name="arm">
  <material name="red"><color rgba="0.9 0.1 0.1 1"/></material>
  <link name="base">
    <inertial><mass value="10.0"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>
    <visual><geometry><mesh filename="package://arm/meshes/missing.stl"/></geometry></visual>
  </link>
  <link name="link1">
    <inertial><origin xyz="0.5 0 0"/><mass value="2.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.15" iyz="0" izz="0.15"/></inertial>
    <visual><origin xyz="0.5 0 0"/><geometry><box size="1 0.05 0.05"/></geometry>
      <material name="red"/></visual>
  </link>
  <link name="link2">
    <inertial><origin xyz="0.5 0 0"/><mass value="1.5"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
    <visual><geometry><mesh filename="package://arm/meshes/link2.stl" scale="0.5 0.5 0.5"/></geometry></visual>
    <visual><origin xyz="1 0 0"/><geometry><cylinder radius="0.05" length="0.2"/></geometry></visual>
  </link>
  <joint name="shoulder" type="continuous">
    <parent link="base"/><child link="link1"/><axis xyz="0 1 0"/>
  </joint>
  <joint name="elbow" type="continuous">
    <parent link="link1"/><child link="link2"/><origin xyz="1.0 0 0"/><axis xyz="0 1 0"/>
  </joint>
</robot>
"""


def test_urdf_visual_meshes(tmp_path):
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "link2.stl").write_text(ASCII_STL)
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(URDF)
    model = kd.io.read_urdf(urdf)
    state = model.set_joint(model.initial_state(), "shoulder", angles=(0.3,))
    traj = kd.simulate(model, state, 0.2, 0.01, progress=False)
    with pytest.warns(UserWarning, match="missing.stl"):
        a = traj.animate(tmp_path / "arm.html", urdf=urdf)
    assert a.parts["link1"].count("visual:Box") == 1  # the URDF's <box>
    # the STL found through package://, and the cylinder
    assert "visual:MeshGeometry" in a.parts["link2"] and "visual:Cylinder" in a.parts["link2"]
    # the base's mesh is missing: its inertia box instead
    assert "box" in a.parts["base"] and not any(p.startswith("visual") for p in a.parts["base"])


def test_missing_extra_names_it(monkeypatch, pendulum_run):
    for name in ("meshcat", "meshcat.geometry", "meshcat.commands", "meshcat.path"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(kd.KanedynError, match=r"kanedyn\[animate\]"):
        pendulum_run.animate(None)


def test_cli_simulate_animate(tmp_path):
    from kanedyn.cli import main

    code = main(["simulate", "--t-final", "40", "--dt", "1", "--output-every", "20", "--quiet",
                 "--animate", "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 0
    data = page_frames((tmp_path / "out" / "animation.html").read_text(encoding="utf-8"))
    assert data["t"] == [0.0, 20.0, 40.0] and len(data["bodies"]) == 5


def test_cli_animate_without_extra_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    from kanedyn.cli import main

    monkeypatch.setitem(sys.modules, "meshcat.geometry", None)
    code = main(["simulate", "--t-final", "2", "--dt", "1", "--quiet", "--animate",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "kanedyn[animate]" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing half-written


# --------------------------------------------------------------------------- in a browser
# each Chromium start takes a few seconds: these run with the slow tests (pytest -m slow)
needs_browser = pytest.mark.skipif(
    find_browser() is None,
    reason="no headless Chromium (Debian: apt-get install chromium; or set KANEDYN_CHROMIUM)",
)


def _pane(png: Path) -> np.ndarray:
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB"), dtype=float)
    return img[60:-60, :-10]  # the 3D view, without the title lines and the control bar


def _drawn_fraction(img: np.ndarray) -> float:
    """Pixels that differ from their row's background: meshcat's background is a
    vertical gradient, constant along each row; a blank or failed canvas is all
    background (or all one colour)."""
    background = np.median(img, axis=1, keepdims=True)
    return float(np.mean(np.abs(img - background).max(axis=2) > 20.0))


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory, explorer_run):
    page = tmp_path_factory.mktemp("anim") / "explorer.html"
    animate(explorer_run, page, title="Explorer 1", shape="box")
    return page


@pytest.mark.slow
@needs_browser
def test_screenshots_not_blank_and_differ(browser_page):
    first = screenshot(browser_page, browser_page.with_name("first.png"))
    t_last = page_frames(browser_page.read_text(encoding="utf-8"))["t"][-1]
    last = screenshot(browser_page, browser_page.with_name("last.png"), t=t_last)
    a, b = _pane(first), _pane(last)
    assert _drawn_fraction(a) > 0.005 and _drawn_fraction(b) > 0.005  # a blank pane gives 0
    changed = np.mean(np.abs(a - b).max(axis=2) > 30.0)
    assert changed > 0.003, f"only {changed:.4f} of the pixels changed between t = 0 and the end"


@pytest.mark.slow
@needs_browser
def test_scene_body_count_and_seek(browser_page, explorer_run):
    t_last = float(explorer_run.t[-1])
    dom = dump_dom(browser_page, t=t_last)
    body = re.search(r"<body[^>]*>", dom).group(0)
    attrs = dict(re.findall(r'data-kanedyn-([\w-]+)="([^"]*)"', body))
    assert attrs.get("ready") == "1", body
    assert int(attrs["bodies"]) == explorer_run.model.nb == 5  # counted in the scene graph
    assert float(attrs["time"]) == pytest.approx(t_last)
    dom0 = dump_dom(browser_page)
    assert float(re.search(r'data-kanedyn-time="([^"]*)"', dom0).group(1)) == 0.0


def test_no_warnings_for_plain_models(pendulum_run):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pendulum_run.animate(None)


@pytest.mark.slow
@needs_browser
def test_play_runs_to_the_end_and_holds_it(pendulum_run, tmp_path):
    """Press play (from a script in the page) at 1000 × real time: the 2 s run finishes,
    and the page holds its last frame, paused."""
    page = pendulum_run.animate(None).html.replace(
        "</body>",
        "<script>kanedyn.viewer.animator.mixer.timeScale = 1000; kanedyn.play();</script></body>",
    )
    path = tmp_path / "play.html"
    path.write_text(page, encoding="utf-8")
    dom = dump_dom(path)
    assert float(re.search(r'data-kanedyn-time="([^"]*)"', dom).group(1)) == pendulum_run.t[-1]
    assert "play" in re.search(r'id="kd-play"[^>]*>([^<]*)<', dom).group(1)
