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


# --------------------------------------------------------------------------- flexible bodies
@pytest.fixture(scope="module")
def flexible_run():
    case = kd.examples.flexible_spacecraft(n_modes=2)
    return kd.simulate(case.model, case.state, 2.0, 0.01, controller=case.controller,
                       output_every=0.05, progress=False)  # fmt: skip


def test_flexible_frames_carry_deflected_nodes(flexible_run, tmp_path):
    """Each frame of a flexible body holds its modal coordinates (the trajectory's
    columns ``body.y1``, ...) and its nodes at ``p + R (r_n + Ψ_n η)``, with ``Ψ`` of the
    tip from the Euler–Bernoulli cantilever modes (Blevins' φ_k(ℓ)) and the body frame's
    pose from kd.kinematics; the drawn nodes and segments follow ``r_n + s Ψ_n η``."""
    from kanedyn.model.beam import cantilever_mode, cantilever_roots

    traj, scale = flexible_run, 10.0
    model = traj.model
    a = traj.animate(tmp_path / "flex.html", max_frames=9, deflection_scale=scale)
    data = page_frames((tmp_path / "flex.html").read_text(encoding="utf-8"))
    assert "elastic deflections drawn 10 times true size" in data["note"]
    assert a.parts["array_right"][0] == "deflected shape" and "box" in a.parts["hub"]
    ell, n_modes = 5.0, 2  # the example's arrays: 5 m, two modes along y then along z
    phi_tip = np.array([cantilever_mode(b, np.array([ell]), ell)[0][0]
                        for b in cantilever_roots(n_modes)])  # fmt: skip
    names = traj.column_names()[1:]  # the q columns, then the u columns
    tracks = {tuple(tr["path"][2:]): tr for tr in data["tracks"]}
    assert {k for k in tracks if k[0] == "array_right"} == {
        *(("array_right", "flex", f"seg{k}") for k in range(8)),
        ("array_right", "flex", "node0"), ("array_right", "flex", "node1"),
    }  # fmt: skip
    moved = 0.0
    for body in ("array_left", "array_right"):
        flex = data["flex"][body]
        assert flex["node_names"] == ["root", "tip"] and flex["deflection_scale"] == scale
        b = model.body_index(body)
        cols = [names.index(f"{body}.{m}") for m in ("y1", "y2", "z1", "z2")]
        for k, i in enumerate(data["index"]):
            eta = traj.q[i, cols]
            np.testing.assert_array_equal(flex["eta"][k], eta)
            kin = kd.kinematics(model, traj.state(i))
            p, R = kin.p[b], kin.R_N_B[b]
            assert np.abs(np.array(data["p"][k][b]) - p).max() <= 1e-12
            R_page = Rotation.from_quat(data["quaternion"][k][b]).as_matrix()
            assert np.abs(R_page - R).max() <= 1e-12
            d_tip = np.array([0.0, phi_tip @ eta[:2], phi_tip @ eta[2:]])  # body axes
            tip = p + R @ (np.array([ell, 0.0, 0.0]) + d_tip)
            nodes = np.array(flex["nodes"][k])
            assert np.abs(nodes[0] - p).max() <= 1e-12  # the clamped root
            assert np.abs(nodes[1] - tip).max() <= 1e-12
            moved = max(moved, float(np.linalg.norm(d_tip)))
            drawn = np.array(tracks[(body, "flex", "node1")]["position"][k])
            assert np.abs(drawn - (np.array([ell, 0.0, 0.0]) + scale * d_tip)).max() <= 1e-12
            # the segments chain from the root to the drawn tip: each unit cylinder (along
            # its y axis) scaled to its length and centred between its ends
            ends = []
            for s in range(8):
                tr = tracks[(body, "flex", f"seg{s}")]
                y = Rotation.from_quat(tr["quaternion"][k]).as_matrix()[:, 1]
                half = 0.5 * tr["scale"][k][1] * y
                mid = np.array(tr["position"][k])
                ends.append((mid - half, mid + half))
            assert np.abs(ends[0][0]).max() <= 1e-12
            assert np.abs(ends[-1][1] - drawn).max() <= 1e-9
            for (_, e1), (s2, _) in zip(ends[:-1], ends[1:], strict=True):
                assert np.abs(e1 - s2).max() <= 1e-9
    assert moved > 1e-3  # the arrays did bend during the slew
    with pytest.raises(kd.KanedynError, match="deflection_scale must be a finite number"):
        traj.animate(None, deflection_scale=-1.0)


def test_deflected_path_is_exact_for_a_cubic():
    """Between nodes the drawn shape is the cubic Hermite curve of the nodes'
    displacements and rotations: a cubic deflection (a beam element's) is drawn exactly,
    here w_y(s) and w_z(s) along three unevenly spaced nodes on the x axis (rotations
    θ_z = w_y', θ_y = -w_z')."""
    from kanedyn.animation.frames import SUBDIVISIONS, deflected_path

    s_nodes = np.array([0.0, 0.7, 2.0])
    wy = np.polynomial.Polynomial([0.1, -0.3, 0.5, 0.2])
    wz = np.polynomial.Polynomial([0.0, 0.4, -0.1, 0.3])
    Psi = np.zeros((3, 3, 2))
    Theta = np.zeros((3, 3, 2))
    Psi[:, 1, 0], Theta[:, 2, 0] = wy(s_nodes), wy.deriv()(s_nodes)
    Psi[:, 2, 1], Theta[:, 1, 1] = wz(s_nodes), -wz.deriv()(s_nodes)
    modes = kd.Modes(np.eye(2), np.eye(2), node_positions=np.outer(s_nodes, [1.0, 0.0, 0.0]),
                     Psi=Psi, Theta=Theta)  # fmt: skip
    eta = np.array([[0.3, -0.7], [1.1, 0.2]])  # two frames
    path, nodes = deflected_path(modes, eta, scale=2.5)
    tau = np.linspace(0.0, 1.0, SUBDIVISIONS + 1)[:-1]
    s = np.concatenate(
        [a + tau * (b - a) for a, b in zip(s_nodes[:-1], s_nodes[1:], strict=True)] + [[2.0]]
    )
    assert path.shape == (2, len(s), 3) and nodes.shape == (2, 3, 3)
    for f in range(2):
        want = np.column_stack((s, 2.5 * eta[f, 0] * wy(s), 2.5 * eta[f, 1] * wz(s)))
        np.testing.assert_allclose(path[f], want, rtol=0, atol=1e-13)


@pytest.mark.slow
@needs_browser
def test_flexible_page_plays_in_a_browser(flexible_run, tmp_path):
    """The page with the flexible bodies' tracks loads (its player script runs to the
    end), seeks, and draws the arrays bent: the pane changes when the deflection is
    magnified."""
    page = flexible_run.animate(tmp_path / "flex.html", deflection_scale=30.0).path
    t = 1.0
    dom = dump_dom(page, t=t)
    attrs = dict(
        re.findall(r'data-kanedyn-([\w-]+)="([^"]*)"', re.search(r"<body[^>]*>", dom).group(0))
    )
    assert attrs.get("ready") == "1" and int(attrs["bodies"]) == 3
    assert float(attrs["time"]) == pytest.approx(t)
    straight = flexible_run.animate(tmp_path / "straight.html", deflection_scale=0.0).path
    a = _pane(screenshot(page, tmp_path / "bent.png", t=t))
    b = _pane(screenshot(straight, tmp_path / "straight.png", t=t))
    changed = np.mean(np.abs(a - b).max(axis=2) > 30.0)
    assert changed > 0.001, f"only {changed:.4f} of the pixels differ between bent and straight"


def test_cli_animates_a_flexible_model_file(tmp_path):
    """A flexible model written by kd.io.write_toml, run by ``kanedyn simulate --animate
    --deflection-scale``: the page holds the arrays' nodes, the note says the scale."""
    from kanedyn.cli import main

    case = kd.examples.flexible_spacecraft()
    model = case.model
    state = model.set_joint(case.state, "root", rates=(0.0, 0.05, 0.3))
    kd.io.write_toml(model, tmp_path / "sc.toml", state)
    code = main(["simulate", str(tmp_path / "sc.toml"), "--t-final", "1", "--dt", "0.01",
                 "--output-every", "0.1", "--quiet", "--animate", "--deflection-scale", "50",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 0
    data = page_frames((tmp_path / "out" / "animation.html").read_text(encoding="utf-8"))
    assert set(data["flex"]) == {"array_left", "array_right"} and len(data["t"]) == 11
    assert "drawn 50 times true size" in data["note"]
    tip = np.array(data["flex"]["array_right"]["nodes"])[:, 1]
    assert np.ptp(tip, axis=0).max() > 0.01  # the tip moves with the turning hub
    code = main(["simulate", str(tmp_path / "sc.toml"), "--animate", "--deflection-scale", "-1",
                 "--out", str(tmp_path / "bad")])  # fmt: skip
    assert code == 2 and not (tmp_path / "bad").exists()
