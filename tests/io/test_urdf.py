"""URDF import: closed-form planar arm, hand-computed kinematics, parse errors.

Oracles: the textbook two-link mass matrix; link poses composed by hand with scipy
(``Rotation.from_euler("xyz", rpy)`` is URDF's extrinsic roll-pitch-yaw); and a mass
matrix assembled from finite-difference Jacobians of those poses.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import attrs
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, detect_format, read_model, read_urdf

DATA = Path(__file__).parent / "data"


def rpy(r: float, p: float, y: float) -> np.ndarray:
    return Rotation.from_euler("xyz", [r, p, y]).as_matrix()


def about(axis, angle: float) -> np.ndarray:
    n = np.asarray(axis, float) / np.linalg.norm(axis)
    return Rotation.from_rotvec(angle * n).as_matrix()


def read_quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        return read_urdf(path, **kw)


# --------------------------------------------------------------------- two-link planar arm
@pytest.mark.parametrize("theta2", [0.0, 0.7, -1.9, np.pi])
def test_planar_arm_mass_matrix_closed_form(theta2):
    model = read_quiet(DATA / "arm2.urdf")
    m1, l1, lc1, I1, m2, lc2, I2 = 2.0, 1.0, 0.4, 0.15, 1.5, 0.6, 0.1
    state = model.set_joint(model.initial_state(), "shoulder", angles=[0.3])
    state = model.set_joint(state, "elbow", angles=[theta2])
    M = kd.mass_matrix(model, state)
    i1, i2 = model.speeds("shoulder")[0], model.speeds("elbow")[0]
    c2 = np.cos(theta2)
    H11 = m1 * lc1**2 + I1 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2) + I2
    H12 = m2 * (lc2**2 + l1 * lc2 * c2) + I2
    H22 = m2 * lc2**2 + I2
    np.testing.assert_allclose(M[i1, i1], H11, rtol=1e-13)
    np.testing.assert_allclose(M[i1, i2], H12, rtol=1e-13)
    np.testing.assert_allclose(M[i2, i1], H12, rtol=1e-13)
    np.testing.assert_allclose(M[i2, i2], H22, rtol=1e-13)
    assert model.nq == 2 and model.n == 2


def test_planar_arm_records_limits():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = read_urdf(DATA / "arm2.urdf")
    lim = model.joint("shoulder").limits
    assert (lim.lower, lim.upper, lim.effort, lim.velocity) == (-3.0, 3.0, 10.0, 2.0)
    assert model.joint("elbow").limits is None  # continuous
    np.testing.assert_array_equal(model.gravity, [0.0, 0.0, -9.81])  # URDF default


# --------------------------------------------------------------------- three-link arm
N1 = np.array([0.0, 1.0, 1.0]) / np.sqrt(2.0)


ARM3_COM = {
    "base": [0, 0, 0.1],
    "link1": [0.2, 0.05, 0.1],
    "link2": [0.25, 0, 0],
    "tool": [0, 0, 0.05],
}
ARM3_MASS = {"base": 10.0, "link1": 2.0, "link2": 1.2, "tool": 0.3}
ARM3_INERTIA = {
    "base": np.diag([0.5, 0.5, 0.8]),
    "link1": rpy(0.3, -0.2, 0.5)
    @ np.array([[0.02, 0.001, -0.002], [0.001, 0.15, 0.003], [-0.002, 0.003, 0.16]])
    @ rpy(0.3, -0.2, 0.5).T,
    "link2": np.diag([0.01, 0.08, 0.085]),
    "tool": np.diag([0.001, 0.0012, 0.0015]),
}  # fmt: skip


def arm3_frames(theta: float, d: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(R_N_link, link origin in N) of every link, composed from the URDF by hand."""
    R0, p0 = np.eye(3), np.zeros(3)
    R1 = rpy(0, 0, 0.5) @ about(N1, theta)
    p1 = p0 + np.array([0, 0, 0.5])
    Rj2 = R1 @ rpy(0.1, 0.2, 0.3)
    R2, p2 = Rj2, p1 + R1 @ [0.6, 0, 0] + Rj2 @ [d, 0, 0]
    R3, p3 = R2 @ rpy(0, 0.5, 0), p2 + R2 @ [0.3, 0.1, 0]
    return {"base": (R0, p0), "link1": (R1, p1), "link2": (R2, p2), "tool": (R3, p3)}


def arm3_poses(theta: float, d: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(R_N_link, mass centre in N) of every link."""
    return {n: (R, p + R @ ARM3_COM[n]) for n, (R, p) in arm3_frames(theta, d).items()}


def arm3_state(model, theta, d, theta_dot=0.0, d_dot=0.0):
    state = model.set_joint(model.initial_state(), "shoulder", angles=[theta], rates=[theta_dot])
    return model.set_joint(state, "slide", displacements=[d], displacement_rates=[d_dot])


def test_three_link_arm_structure_and_inertia():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = read_urdf(DATA / "arm3.urdf")
    assert [str(w.message) for w in caught] == []
    # the fixed "wrist" joint is merged: "tool" is part of body "link2", and a frame
    assert [j.name for j in model.joints] == ["root", "shoulder", "slide"]
    assert [b.name for b in model.bodies] == ["base", "link1", "link2"]
    assert [f.name for f in model.frames] == ["base", "link1", "link2", "tool"]
    assert model.joint("root").inner is None and model.joint("root").ndof == 0
    assert model.nu == 1 and model.ns == 1
    np.testing.assert_array_equal(model.joint("shoulder").damping, [0.3])
    np.testing.assert_array_equal(model.joint("slide").damping, [0.0])
    assert model.joint("slide").limits.upper == 0.5
    np.testing.assert_allclose(
        model.body("link1").inertia, ARM3_INERTIA["link1"], rtol=0, atol=1e-15
    )
    np.testing.assert_array_equal(model.body("link1").com, [0.2, 0.05, 0.1])
    # composite of link2 and tool, by hand: tool frame at (0.3, 0.1, 0), turned 0.5 about y
    R_t, p_t = rpy(0, 0.5, 0), np.array([0.3, 0.1, 0.0])
    c2, ct = np.array([0.25, 0, 0]), p_t + R_t @ [0, 0, 0.05]
    m = 1.2 + 0.3
    c = (1.2 * c2 + 0.3 * ct) / m
    I = ARM3_INERTIA["link2"] + R_t @ ARM3_INERTIA["tool"] @ R_t.T
    for mk, ck in ((1.2, c2), (0.3, ct)):
        d = ck - c
        I = I + mk * (d @ d * np.eye(3) - np.outer(d, d))
    body = model.body("link2")
    assert body.mass == pytest.approx(m, rel=1e-15)
    np.testing.assert_allclose(body.com, c, rtol=0, atol=1e-15)
    np.testing.assert_allclose(body.inertia, I, rtol=0, atol=1e-15)
    tool = model.frame("tool")
    assert tool.body == "link2"
    np.testing.assert_allclose(tool.point, p_t, atol=1e-15)
    np.testing.assert_allclose(tool.rotation, R_t, atol=1e-15)


@pytest.mark.parametrize(("theta", "d"), [(0.0, 0.0), (0.8, 0.2), (-2.5, -0.1)])
def test_three_link_arm_poses_and_velocities(theta, d):
    model = read_quiet(DATA / "arm3.urdf")
    theta_dot, d_dot = 0.7, -0.3
    kin = kd.kinematics(model, arm3_state(model, theta, d, theta_dot, d_dot))
    state = arm3_state(model, theta, d, theta_dot, d_dot)
    poses = arm3_frames(theta, d)
    h = 1e-6
    ahead, behind = (
        arm3_frames(theta + h * theta_dot, d + h * d_dot),
        arm3_frames(theta - h * theta_dot, d - h * d_dot),
    )
    for name, (R, x) in poses.items():
        if name in ("link1", "link2"):
            i = model.body_index(name)
            np.testing.assert_allclose(kin.R_N_B[i], R, rtol=0, atol=1e-14)
            np.testing.assert_allclose(kin.p[i], x, rtol=0, atol=1e-14)
        R_f, x_f = kd.frame_placement(model, state, name)
        np.testing.assert_allclose(R_f, R, rtol=0, atol=1e-14)
        np.testing.assert_allclose(x_f, x, rtol=0, atol=1e-14)
        v = (ahead[name][1] - behind[name][1]) / (2 * h)
        Rdot = (ahead[name][0] - behind[name][0]) / (2 * h)
        W = Rdot @ R.T
        omega = np.array([W[2, 1], W[0, 2], W[1, 0]])
        mot = kd.frame_velocity(model, state, name)
        np.testing.assert_allclose(mot.v, v, rtol=0, atol=1e-8)
        np.testing.assert_allclose(mot.omega, omega, rtol=0, atol=1e-8)
    # the shoulder turns about its URDF axis, expressed in N
    np.testing.assert_allclose(
        kin.omega[model.body_index("link1")], theta_dot * rpy(0, 0, 0.5) @ N1, atol=1e-15
    )


def test_three_link_arm_mass_matrix_from_jacobians():
    model = read_quiet(DATA / "arm3.urdf")
    theta, d, h = 1.1, 0.15, 1e-6
    M = np.zeros((2, 2))
    for name, (R, _) in arm3_poses(theta, d).items():
        Jv, Jw = np.zeros((3, 2)), np.zeros((3, 2))
        for c, dq in enumerate(((h, 0.0), (0.0, h))):
            (Ra, ra), (Rb, rb) = (
                arm3_poses(theta + s * dq[0], d + s * dq[1])[name] for s in (1, -1)
            )
            Jv[:, c] = (ra - rb) / (2 * h)
            W = (Ra - Rb) / (2 * h) @ R.T
            Jw[:, c] = [W[2, 1], W[0, 2], W[1, 0]]
        I_N = R @ ARM3_INERTIA[name] @ R.T
        M += ARM3_MASS[name] * Jv.T @ Jv + Jw.T @ I_N @ Jw
    state = arm3_state(model, theta, d)
    order = [model.speeds("shoulder")[0], model.speeds("slide")[0]]
    M_kd = kd.mass_matrix(model, state)[np.ix_(order, order)]
    np.testing.assert_allclose(M_kd, M, rtol=1e-8, atol=1e-9)


def test_floating_base_and_gravity():
    model = read_quiet(DATA / "arm3.urdf", floating_base=True, gravity=(0, 0, -9.81))
    root = model.joint("root")
    assert root.rot_type == "spherical" and root.trn_dof == 3
    assert model.nq == 7 + 2 and model.n == 6 + 2
    np.testing.assert_array_equal(model.gravity, [0, 0, -9.81])


# --------------------------------------------------------------------- other joint types
def urdf(body: str) -> str:
    link = ('<link name="{}"><inertial><mass value="1"/>'
            '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>')  # fmt: skip
    links = "".join(link.format(n) for n in ("a", "b", "c"))
    return f'<?xml version="1.0"?>\n<robot name="t">\n{links}\n{body}\n</robot>\n'


def joint(name, jtype, parent, child, extra=""):
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/>'
            f'<child link="{child}"/>{extra}</joint>')  # fmt: skip


def test_planar_floating_and_negative_axis(tmp_path):
    path = tmp_path / "t.urdf"
    path.write_text(urdf(
        joint("p", "planar", "a", "b", '<origin xyz="1 0 0"/><axis xyz="0 0 1"/>')
        + joint("f", "floating", "b", "c", '<origin xyz="0 1 0" rpy="0.2 0 0"/>')
    ))  # fmt: skip
    model = read_urdf(path)
    assert model.joint("p").ndof == 3 and model.joint("f").ndof == 6
    state = model.set_joint(model.initial_state(), "p", angles=[0.4], displacements=[0.3, -0.2])
    kin = kd.kinematics(model, state)
    ib = model.body_index("b")
    np.testing.assert_allclose(kin.p[ib], [1.3, -0.2, 0.0], atol=1e-15)
    np.testing.assert_allclose(kin.R_N_B[ib], about([0, 0, 1], 0.4), atol=1e-15)
    # a revolute joint about -y turns the child the other way
    path.write_text(urdf(
        joint("r", "revolute", "a", "b", '<axis xyz="0 -1 0"/>')
        + joint("w", "fixed", "b", "c")
    ))  # fmt: skip
    model = read_quiet(path)
    state = model.set_joint(model.initial_state(), "r", angles=[0.3])
    kin = kd.kinematics(model, state)
    np.testing.assert_allclose(kin.R_N_B[model.body_index("b")], about([0, -1, 0], 0.3), atol=1e-15)


def test_world_link_is_N(tmp_path):
    path = tmp_path / "world.urdf"
    path.write_text(urdf(
        '<link name="world"/>'
        + joint("mount", "fixed", "world", "a", '<origin xyz="0 0 1"/>')
        + joint("j1", "continuous", "a", "b", '<axis xyz="1 0 0"/>')
        + joint("j2", "prismatic", "b", "c", '<axis xyz="0 0 1"/><dynamics damping="2" friction="0.1"/>')
    ))  # fmt: skip
    with pytest.warns(UnsupportedFeatureWarning, match="friction is not modelled"):
        model = read_urdf(path)
    # "a" is fixed to the world: merged into the root body, which is welded to N
    assert [j.name for j in model.joints] == ["root", "j1", "j2"]
    assert model.joint("j1").inner == "world" and model.body("world").mass == 1.0
    np.testing.assert_array_equal(model.body("world").com, [0, 0, 1])
    np.testing.assert_array_equal(model.joint("j2").damping, [2.0])
    assert detect_format(path) == "urdf"
    with pytest.warns(UnsupportedFeatureWarning):
        m, s = read_model(path)
    assert m.nb == 3 and np.array_equal(s.q, m.initial_state().q)
    # without a mass at the root, the root is N itself
    path.write_text(urdf(
        '<link name="world"/><link name="flange"/>'
        + joint("j0", "continuous", "world", "a", '<origin xyz="0 0 1"/>')
        + joint("j1", "continuous", "a", "b", '<axis xyz="1 0 0"/>')
        + joint("j2", "prismatic", "b", "c", '<axis xyz="0 0 1"/>')
        + joint("tool", "fixed", "c", "flange", '<origin xyz="0 0 0.2"/>')
    ))  # fmt: skip
    model = read_urdf(path)
    assert [j.name for j in model.joints] == ["j0", "j1", "j2"]
    assert model.joint("j0").inner is None
    assert model.frame("world").body is None and model.frame("flange").body == "c"
    R, x = kd.frame_placement(model, model.initial_state(), "flange")
    np.testing.assert_allclose(x, [0, 0, 1.2], atol=1e-15)


# --------------------------------------------------------------------- parse errors
BAD = [
    ("missing_mass", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")).replace(
        '<mass value="1"/>', "", 1), "<link name='a'> <inertial>: missing <mass"),
    ("bad_xyz", urdf(joint("j", "fixed", "a", "b", '<origin xyz="1 2"/>') + joint("k", "fixed", "a", "c")),
     "<joint name='j'> <origin>: attribute xyz: expected 3 numbers, got '1 2'"),
    ("bad_number", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")).replace(
        'ixx="0.1"', 'ixx="heavy"', 1), "<link name='a'> <inertial> <inertia>: attribute ixx: expected a number, got 'heavy'"),
    ("unknown_type", urdf(joint("j", "hinge", "a", "b") + joint("k", "fixed", "a", "c")),
     "<joint name='j'>: unknown joint type 'hinge'"),
    ("unknown_link", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "d")),
     "<joint name='k'> <child>: unknown link 'd'"),
    ("massless_leaf", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")
                           + '<link name="e"/>' + joint("l", "revolute", "c", "e")),
     "joint 'l' has no mass outboard"),
    ("not_psd", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")).replace(
        'izz="0.1"', 'izz="-0.1"', 1), "<link name='a'> <inertial>: body 'a': inertia is not positive semidefinite"),
    ("triangle", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")).replace(
        'izz="0.1"', 'izz="0.3"', 1), "violate the triangle inequality"),
    ("negative_mass", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")).replace(
        '<mass value="1"/>', '<mass value="-1"/>', 1), "<link name='a'> <inertial> <mass>: mass must be non-negative"),
    ("nan_mass", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "a", "c")).replace(
        '<mass value="1"/>', '<mass value="nan"/>', 1), "<link name='a'> <inertial> <mass>: attribute value: expected a number, got 'nan'"),
    ("two_roots", urdf(joint("j", "fixed", "a", "b")), "expected exactly one root link"),
    ("two_parents", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "c", "b")),
     "<joint name='k'>: link 'b' is already the child of joint 'j'"),
    ("cycle", urdf(joint("j", "fixed", "a", "b") + joint("k", "fixed", "b", "c") + joint("l", "fixed", "c", "a")),
     "expected exactly one root link"),
    ("zero_axis", urdf(joint("j", "revolute", "a", "b", '<axis xyz="0 0 0"/>') + joint("k", "fixed", "a", "c")),
     "<joint name='j'> <axis>: the axis must not be zero"),
    ("malformed", '<robot name="x"><link name="a"></robot>', "line 1: not well-formed XML"),
    ("not_robot", '<sdf version="1.6"><model name="x"/></sdf>', "<sdf>: the root element must be <robot>"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_parse_errors_name_the_element(tmp_path, text, expected):
    path = tmp_path / "bad.urdf"
    path.write_text(text)
    with pytest.raises(kd.FileFormatError) as info:
        read_quiet(path, check_triangle=True)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert expected in message, message


def test_error_gives_the_line(tmp_path):
    path = tmp_path / "bad.urdf"
    text = (DATA / "arm3.urdf").read_text().replace('xyz="0.6 0 0"', 'xyz="0.6 zero 0"')
    path.write_text(text)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "0.6 zero" in t)
    with pytest.raises(
        kd.FileFormatError,
        match=rf"bad.urdf line {line}: <joint name='slide'> <origin>: attribute xyz",
    ):
        read_quiet(path)


def test_detect_format_rejects_other_files(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some text\n")
    with pytest.raises(kd.FileFormatError, match="cannot tell the format"):
        detect_format(path)
    assert detect_format(DATA / "arm3.urdf") == "urdf"


# --------------------------------------------------------------------- joint axes
def _axes():
    """Unit axes near every coordinate axis, with both signs, and a few generic ones."""
    out = []
    for k in range(3):
        for sign in (1.0, -1.0):
            for eps in (0.0, 6.12323e-17, -1e-12, 1e-6, 0.3):
                a = np.zeros(3)
                a[k] = sign
                a[(k + 1) % 3] += eps
                a[(k + 2) % 3] -= 0.5 * eps
                out.append(a)
    rng = np.random.default_rng(5)
    out += list(rng.normal(size=(6, 3)))
    out.append(np.array([1.0, -1.0, 1.0]))  # equal components: a tie for the nearest axis
    out.append(np.array([0.0, 6.12323e-17, 1.0]))  # as iCub writes +z
    return out


AXES = _axes()


@pytest.mark.parametrize("axis", AXES, ids=[" ".join(f"{x:.3g}" for x in a) for a in AXES])
def test_axis_keeps_its_direction(tmp_path, axis):
    """A revolute joint turns the child by exp(θ [a]×) and a prismatic one moves it by
    d·a: the rotation check that the joint keeps the file's axis direction."""
    text = " ".join(repr(float(x)) for x in axis)
    path = tmp_path / "axis.urdf"
    path.write_text(urdf(
        joint("r", "revolute", "a", "b", f'<origin xyz="0.1 0.2 0.3" rpy="0.3 -0.4 0.2"/><axis xyz="{text}"/>')
        + joint("p", "prismatic", "b", "c", f'<origin xyz="0 0 0.5"/><axis xyz="{text}"/>')
    ))  # fmt: skip
    model = read_urdf(path)
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    theta, d = 0.7, 0.4
    state = model.set_joint(model.initial_state(), "r", angles=[theta])
    state = model.set_joint(state, "p", displacements=[d])
    R_j = rpy(0.3, -0.4, 0.2)
    R_b, x_b = kd.frame_placement(model, state, "b")
    R_c, x_c = kd.frame_placement(model, state, "c")
    np.testing.assert_allclose(R_b, R_j @ about(a, theta), rtol=0, atol=1e-14)
    np.testing.assert_allclose(x_b, [0.1, 0.2, 0.3], rtol=0, atol=1e-15)
    np.testing.assert_allclose(R_c, R_b, rtol=0, atol=1e-14)
    np.testing.assert_allclose(x_c, x_b + R_b @ ([0, 0, 0.5] + d * a), rtol=0, atol=1e-14)


def test_axes_against_pinocchio(tmp_path):
    pin = pytest.importorskip("pinocchio")
    path = tmp_path / "axes.urdf"
    names = [f"l{i}" for i in range(len(AXES) + 1)]
    link = ('<link name="{}"><inertial><origin xyz="0.1 0.02 -0.03"/><mass value="1"/>'
            '<inertia ixx="0.1" ixy="0.01" ixz="0" iyy="0.2" iyz="0" izz="0.25"/></inertial></link>')  # fmt: skip
    body = "".join(link.format(n) for n in names)
    for i, axis in enumerate(AXES):
        kind = "revolute" if i % 2 == 0 else "prismatic"
        text = " ".join(repr(float(x)) for x in axis)
        body += (f'<joint name="j{i}" type="{kind}"><parent link="{names[i]}"/><child link="{names[i + 1]}"/>'
                 f'<origin xyz="0.05 0 0.1" rpy="0.1 0.2 -0.3"/><axis xyz="{text}"/>'
                 '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')  # fmt: skip
    path.write_text(f'<robot name="axes">{body}</robot>')
    model = read_urdf(path)
    pm = pin.buildModelFromUrdf(str(path))
    data = pm.createData()
    rng = np.random.default_rng(3)
    q = rng.uniform(-1, 1, size=pm.nq)
    state = model.initial_state()
    for i in range(len(AXES)):
        jid = pm.getJointId(f"j{i}")
        kw = "angles" if i % 2 == 0 else "displacements"
        state = model.set_joint(state, f"j{i}", **{kw: [q[pm.joints[jid].idx_q]]})
    pin.framesForwardKinematics(pm, data, q)
    for n in names:
        oMf = data.oMf[pm.getFrameId(n)]
        R, x = kd.frame_placement(model, state, n)
        np.testing.assert_allclose(R, oMf.rotation, rtol=0, atol=1e-12)
        np.testing.assert_allclose(x, oMf.translation, rtol=0, atol=1e-12)


# --------------------------------------------------------------------- frame links
def test_massless_link_between_joints_is_allowed(tmp_path):
    """A massless link on a movable joint with mass beyond it: M stays positive definite,
    and equals the model with the massless link's two joints' bodies as given."""
    path = tmp_path / "t.urdf"
    path.write_text(urdf(
        '<link name="yoke"><inertial><mass value="0"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>'
        + joint("j1", "revolute", "a", "yoke", '<axis xyz="0 0 1"/>')
        + joint("j2", "revolute", "yoke", "b", '<origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>')
        + joint("k", "fixed", "a", "c")
    ))  # fmt: skip
    model = read_urdf(path)
    assert model.body("yoke").mass == 0.0
    state = model.set_joint(model.initial_state(), "j1", angles=[0.4], rates=[0.3])
    state = model.set_joint(state, "j2", angles=[-0.2], rates=[1.1])
    M = kd.mass_matrix(model, state)
    assert np.all(np.linalg.eigvalsh(M) > 0)
    # the same two DOF about fixed axes through the body b: m=1, I=0.1 U, com at 0.3 x
    # from the j1 axis: M11 = I + m·0.3², M22 = I, M12 = 0 (the axes are normal, the
    # com lies on the j2 axis' line through the yoke's x)
    np.testing.assert_allclose(M, [[0.1 + 0.09, 0.0], [0.0, 0.1]], rtol=0, atol=1e-15)


def test_mimic_and_friction_are_reported(tmp_path):
    path = tmp_path / "t.urdf"
    path.write_text(urdf(
        joint("j1", "revolute", "a", "b", '<axis xyz="0 0 1"/><dynamics damping="0.5" friction="0.2"/>')
        + joint("j2", "revolute", "b", "c", '<axis xyz="0 0 1"/><mimic joint="j1" multiplier="2"/>')
    ))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = read_urdf(path)
    text = " | ".join(str(w.message) for w in caught)
    assert "<joint name='j1'> <dynamics>: Coulomb friction is not modelled" in text
    assert "joint 'j2' mimics joint 'j1'" in text and "not enforced" in text
    np.testing.assert_array_equal(model.joint("j1").damping, [0.5])
    assert model.joint("j2").ndof == 1


def test_write_toml_leaves_out_frames_and_keeps_massless_bodies(tmp_path):
    model = read_urdf(DATA / "arm3.urdf")
    with pytest.warns(UnsupportedFeatureWarning, match=r"4 named frame\(s\) not written"):
        kd.io.write_toml(model, tmp_path / "arm3.toml", model.initial_state())
    back = kd.io.read_toml(tmp_path / "arm3.toml")

    def limits(m):
        return [None if j.limits is None else attrs.astuple(j.limits) for j in m.joints]

    assert limits(back) == limits(model)
    assert any(j.limits is not None for j in model.joints)
    s = model.set_joint(model.initial_state(), "shoulder", angles=[0.3])
    np.testing.assert_array_equal(kd.mass_matrix(back, s), kd.mass_matrix(model, s))
    path = tmp_path / "t.urdf"
    path.write_text(urdf(
        '<link name="yoke"/>'
        + joint("j1", "revolute", "a", "yoke", '<axis xyz="0 0 1"/>')
        + joint("j2", "revolute", "yoke", "b", '<origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>')
        + joint("k", "fixed", "a", "c")
    ))  # fmt: skip
    massless = read_urdf(path)
    assert massless.body("yoke").allow_singular and massless.body("yoke").mass == 0.0
    kd.io.write_toml(massless, tmp_path / "x.toml")
    assert "allow_singular = true" in (tmp_path / "x.toml").read_text()
    back = kd.io.read_toml(tmp_path / "x.toml")
    assert back.body("yoke").allow_singular and back.body("yoke").mass == 0.0
    s = massless.set_joint(massless.initial_state(), "j1", angles=[0.4])
    s = massless.set_joint(s, "j2", angles=[-0.7], rates=[1.5])
    np.testing.assert_array_equal(kd.mass_matrix(back, s), kd.mass_matrix(massless, s))
    np.testing.assert_array_equal(kd.forward_dynamics(back, s), kd.forward_dynamics(massless, s))


# --------------------------------------------------------------------- merged inertias
NOISY = """<?xml version="1.0"?>
<robot name="noisy">
  <link name="base"><inertial><mass value="3"/>
    <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/></inertial></link>
  <link name="upper"><inertial><origin xyz="0.2 0 0"/><mass value="1.5"/>
    <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.03"/></inertial></link>
  <link name="sensor"><inertial><origin xyz="0.05 0.02 0" rpy="0.3 0 0.2"/><mass value="0.05"/>
    <inertia ixx="1e-6" ixy="{ixy}" ixz="0" iyy="1e-6" iyz="0" izz="1e-6"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0.15 0 0.01"/><mass value="0.8"/>
    <inertia ixx="0.001" ixy="0.0002" ixz="0" iyy="0.01" iyz="0" izz="0.011"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
  <joint name="mount" type="fixed"><parent link="upper"/><child link="sensor"/>
    <origin xyz="0.3 0 0.02" rpy="0 0.5 0"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/>
    <origin xyz="0.4 0 0"/><axis xyz="0 0.6 0.8"/>
    <limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
</robot>
"""


def test_fixed_link_inertia_is_checked_on_the_merged_body(tmp_path):
    """CAD noise: a fixed link whose own inertia is slightly indefinite (principal moments
    1e-6 ± 1.3e-6) is accepted, with a warning naming it, because the body it is merged
    into is physical; the mass matrix equals Pinocchio's (which loads the robot too)."""
    pin = pytest.importorskip("pinocchio")
    path = tmp_path / "noisy.urdf"
    path.write_text(NOISY.format(ixy="1.3e-6"))
    with pytest.warns(UnsupportedFeatureWarning, match=r"noisy.urdf line 7: <link name='sensor'>"
                      r" <inertial>: the link's own inertia is not physical .*body 'upper'"):  # fmt: skip
        model = read_urdf(path)
    assert [b.name for b in model.bodies] == ["base", "upper", "lower"]
    pm = pin.buildModelFromUrdf(str(path))
    data = pm.createData()
    rng = np.random.default_rng(11)
    for _ in range(3):
        theta = rng.uniform(-2.0, 2.0, size=2)
        state = model.initial_state()
        for name, value in zip(("shoulder", "elbow"), theta, strict=True):
            state = model.set_joint(state, name, angles=[value])
        q = np.zeros(pm.nq)
        for name, value in zip(("shoulder", "elbow"), theta, strict=True):
            q[pm.joints[pm.getJointId(name)].idx_q] = value
        M = pin.crba(pm, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(kd.mass_matrix(model, state), M, rtol=0, atol=1e-14)
    # kept as its own body (no merging), the same link is an error naming it
    with pytest.raises(kd.FileFormatError, match=r"line 7: <link name='sensor'> <inertial>: "
                       r"body 'sensor': inertia is not positive semidefinite"):  # fmt: skip
        read_urdf(path, merge_fixed=False)
    # noise too large for the merged body: still an error, naming the link and the body
    path.write_text(NOISY.format(ixy="-5").replace('ixx="0.002"', 'ixx="0.0001"'))
    with pytest.raises(kd.FileFormatError, match=r"<link name='sensor'> <inertial>: .*merged "
                       r"into its parent, body 'upper': inertia is not positive"):  # fmt: skip
        read_urdf(path)
