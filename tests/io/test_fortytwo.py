"""Reading NASA 42 spacecraft files: against models built by hand with the Python API.

The oracle for 42's conventions is written out here from refs/notes/42-kane-msd.md §2
(``A2C`` as a product of passive elementary rotations, ``Q2C``), not taken from
kanedyn.spatial.rotation, and quaternions come from scipy.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, detect_format, read_42, read_model

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).parents[3] / "shared/refs/42-inputs"
TUMBLE = ("SC_TumbleSat.txt", "Jnt_Tumble02.txt", "Jnt_Tumble13.txt")


# --------------------------------------------------------------------- 42's conventions
def _passive(axis: int, a: float) -> np.ndarray:
    """42's elementary rotation R_axis(a) (a frame rotation: maps old to new components)."""
    c, s = np.cos(a), np.sin(a)
    return {
        1: np.array([[1, 0, 0], [0, c, s], [0, -s, c]]),
        2: np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]]),
        3: np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]]),
    }[axis]


def A2C(seq: str, deg: tuple[float, float, float]) -> np.ndarray:
    """42's ``A2C``: C = R_i3(t3) R_i2(t2) R_i1(t1), angles in degrees."""
    t = np.deg2rad(deg)
    i1, i2, i3 = (int(ch) for ch in seq)
    return _passive(i3, t[2]) @ _passive(i2, t[1]) @ _passive(i1, t[0])


def Q2C(q: np.ndarray) -> np.ndarray:
    """42's ``Q2C``: C = (q4² - qv·qv) U + 2 qv qvᵀ - 2 q4 qv~ (scalar last)."""
    qv, q4 = np.asarray(q[:3]), q[3]
    qx = np.array([[0, -qv[2], qv[1]], [qv[2], 0, -qv[0]], [-qv[1], qv[0], 0]])
    return (q4**2 - qv @ qv) * np.eye(3) + 2 * np.outer(qv, qv) - 2 * q4 * qx


def quat(R_A_B: np.ndarray) -> np.ndarray:
    return Rotation.from_matrix(R_A_B).as_quat()


def I42(moments, products) -> np.ndarray:
    (Ixx, Iyy, Izz), (Ixy, Ixz, Iyz) = moments, products
    return np.array([[Ixx, -Ixy, -Ixz], [-Ixy, Iyy, -Iyz], [-Ixz, -Iyz, Izz]])


def same_quat(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, atol=1e-14) or np.allclose(a, -b, atol=1e-14))


# --------------------------------------------------------------------- helpers
def tumble_copy(tmp_path: Path, edit=None) -> Path:
    """Copy TumbleSat and its joint files to tmp_path, applying ``edit(lines)``."""
    for name in TUMBLE:
        shutil.copy(DATA / name, tmp_path / name)
    sc = tmp_path / "SC_TumbleSat.txt"
    if edit is not None:
        lines = sc.read_text().splitlines()
        edit(lines)
        sc.write_text("\n".join(lines) + "\n")
    return sc


def set_line(n: int, text: str):
    def edit(lines: list[str]) -> None:
        lines[n - 1] = text

    return edit


def read_quiet(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_42(path)


def assert_dynamics_equal(m1, s1, m2, s2, tol=1e-12):
    M1, M2 = kd.mass_matrix(m1, s1), kd.mass_matrix(m2, s2)
    assert np.max(np.abs(M1 - M2)) <= tol * max(1.0, np.max(np.abs(M2)))
    a1, a2 = kd.forward_dynamics(m1, s1), kd.forward_dynamics(m2, s2)
    assert np.max(np.abs(a1 - a2)) <= tol * max(1.0, np.max(np.abs(a2)))
    T1, T2 = kd.kinetic_energy(m1, s1), kd.kinetic_energy(m2, s2)
    assert abs(T1 - T2) <= tol * max(1.0, abs(T2))


# --------------------------------------------------------------------- TumbleSat
def test_bundled_copy_matches_shared_refs():
    if not SHARED.is_dir():
        pytest.skip("shared/refs not present")
    for name in TUMBLE:
        assert (DATA / name).read_text() == (SHARED / name).read_text()


def test_tumblesat_is_explorer1():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, state = read_42(DATA / "SC_TumbleSat.txt")
    # the only warning: the hub's moments violate the triangle inequality, kept as in 42
    assert len(caught) == 1, [str(w.message) for w in caught]
    w = caught[0]
    assert not issubclass(w.category, UnsupportedFeatureWarning)
    assert "B0" in str(w.message) and "triangle" in str(w.message)
    assert "SC_TumbleSat.txt line 31" in str(w.message)

    ref = kd.examples.explorer1()
    ref_state = kd.examples.explorer1_state(ref)
    assert model.nb == ref.nb and model.nq == ref.nq and model.n == ref.n
    for b, r in zip(model.bodies, ref.bodies, strict=True):
        assert b.mass == r.mass
        np.testing.assert_array_equal(b.inertia, r.inertia)
        np.testing.assert_array_equal(b.com, r.com)
        np.testing.assert_array_equal(b.embedded_momentum, r.embedded_momentum)
        assert b.check_triangle == r.check_triangle
    names = {b.name: r.name for b, r in zip(model.bodies, ref.bodies, strict=True)}
    for j, r in zip(model.joints, ref.joints, strict=True):
        assert (j.inner is None) == (r.inner is None)
        if j.inner is not None:
            assert names[j.inner] == r.inner
        assert names[j.outer] == r.outer
        for f in ("rot_type", "rot_dof", "rot_seq", "trn_dof", "trn_seq"):
            assert getattr(j, f) == getattr(r, f), f
        for f in ("inner_point", "outer_point", "inner_rotation", "outer_rotation",
                  "stiffness", "damping"):  # fmt: skip
            np.testing.assert_allclose(getattr(j, f), getattr(r, f), rtol=0, atol=1e-15)
    np.testing.assert_allclose(state.q, ref_state.q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(state.u, ref_state.u, rtol=0, atol=1e-15)
    assert_dynamics_equal(model, state, ref, ref_state)


def test_shared_refs_path_reads_too():
    if not SHARED.is_dir():
        pytest.skip("shared/refs not present")
    model, state = read_quiet(SHARED / "SC_TumbleSat.txt")
    ref = kd.examples.explorer1()
    assert_dynamics_equal(model, state, ref, kd.examples.explorer1_state(ref))


def test_42_detection_and_read_model():
    assert detect_format(DATA / "SC_TumbleSat.txt") == "42"
    assert detect_format(DATA / "SC_Custom.txt") == "42"
    model, state = read_quiet(DATA / "SC_Custom.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m2, s2 = read_model(DATA / "SC_Custom.txt")
    assert_dynamics_equal(model, state, m2, s2, tol=0.0)


# --------------------------------------------------------------------- a custom 42 file
def custom_by_hand() -> tuple[kd.Model, kd.State]:
    """tests/io/data/SC_Custom.txt, built with the Python API from 42's conventions."""
    hub = kd.Body("B0", 500.0, I42((400, 350, 300), (10, -5, 8)), com=(0.1, 0.2, 0.3),
                  embedded_momentum=(0, 0, 2.5))  # fmt: skip
    boom = kd.Body("B1", 20.0, I42((2, 10, 10.5), (0.5, 0, 0.2)), com=(1.0, 0.05, 0.0))
    slider = kd.Body("B2", 15.0, I42((1, 1.2, 1.5), (0, 0, 0)), com=(0, 0, 0.2),
                     embedded_momentum=(0.1, 0, 0))  # fmt: skip
    tip = kd.Body("B3", 5.0, I42((0.2, 0.3, 0.4), (0.01, 0.02, 0.03)), com=(0.1, 0, 0))
    joints = [
        kd.Joint.free("root", outer="B0", outer_point=(0.1, 0.2, 0.3)),
        # inner_rotation = R_Bi_Gi = C_GiBi^T; outer_rotation = R_Go_Bo = C_BoGo^T
        kd.Joint.spherical("G0", "B0", "B1", inner_point=(0.5, 0.2, 0.1),
                           outer_point=(-0.3, 0.0, 0.05),
                           inner_rotation=A2C("213", (30, -20, 10)).T,
                           outer_rotation=A2C("312", (0, 15, 0)).T,
                           stiffness=(2, 3, 4), damping=(0.5, 0.6, 0.7)),
        kd.Joint("G1", "B0", "B2", trn_dof=2, trn_seq="231", inner_point=(0, -0.4, 0.2),
                 outer_point=(0, 0, -0.1), inner_rotation=A2C("321", (0, 0, 45)).T,
                 outer_rotation=A2C("123", (10, 0, 0)).T, stiffness=(100, 200),
                 damping=(1, 2)),
        kd.Joint("G2", "B1", "B3", rot_dof=1, rot_seq="312", trn_dof=1, trn_seq="123",
                 inner_point=(2, 0, 0), inner_rotation=A2C("123", (0, 90, 0)).T),
    ]  # fmt: skip
    model = kd.Model([hub, boom, slider, tip], joints)
    q = np.zeros(model.nq)
    u = np.zeros(model.n)
    d2r = np.pi / 180
    q0 = np.array([0.1, -0.2, 0.3, 0.9273618495495703])  # qbn: C_BN = Q2C(q), R_N_B = C_BNᵀ
    q[model.coordinates("root")[:4]] = quat(Q2C(q0).T)
    u[model.speeds("root")[:3]] = np.array([1.0, -2.0, 0.5]) * d2r  # w_BN in B
    # spherical: 123 angles -> C_GoGi = A2C(123, ...); the joint's quaternion is of R_Gi_Go
    q[model.coordinates("G0")] = quat(A2C("123", (10, 20, 30)).T)
    u[model.speeds("G0")] = np.array([1.0, -2.0, 3.0]) * d2r  # w of Go rel Gi, in Go
    q[model.coordinates("G1")] = (0.1, -0.05)
    u[model.speeds("G1")] = (0.01, 0.02)
    q[model.coordinates("G2")] = (25 * d2r, 0.02)
    u[model.speeds("G2")] = (5 * d2r, -0.01)
    return model, kd.State(q, u)


def test_custom_file_matches_hand_built_model():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, state = read_42(DATA / "SC_Custom.txt")
    assert caught == []
    ref, ref_state = custom_by_hand()
    assert [b.name for b in model.bodies] == [b.name for b in ref.bodies]
    assert [j.name for j in model.joints] == [j.name for j in ref.joints]
    for b, r in zip(model.bodies, ref.bodies, strict=True):
        np.testing.assert_array_equal(b.inertia, r.inertia)
        np.testing.assert_array_equal(b.embedded_momentum, r.embedded_momentum)
    for j, r in zip(model.joints, ref.joints, strict=True):
        for f in ("rot_type", "rot_dof", "trn_dof", "trn_seq"):
            assert getattr(j, f) == getattr(r, f), (j.name, f)
        for f in ("inner_point", "outer_point", "inner_rotation", "outer_rotation",
                  "stiffness", "damping"):  # fmt: skip
            np.testing.assert_allclose(getattr(j, f), getattr(r, f), rtol=0, atol=1e-15)
    for name in ("root", "G0"):
        assert same_quat(state.q[model.coordinates(name)], ref_state.q[ref.coordinates(name)])
    idx = np.r_[model.coordinates("G1"), model.coordinates("G2")]
    np.testing.assert_allclose(state.q[idx], ref_state.q[idx], rtol=0, atol=1e-15)
    np.testing.assert_allclose(state.u, ref_state.u, rtol=0, atol=1e-15)
    assert_dynamics_equal(model, state, ref, ref_state)


def test_custom_file_state_kinematics_agree_with_42_chain():
    """The slider's mass centre from 42's chain (§3.2), written out by hand."""
    model, state = read_quiet(DATA / "SC_Custom.txt")
    kin = kd.kinematics(model, state)
    i0, i2 = model.body_index("B0"), model.body_index("B2")
    C_B0N = Q2C([0.1, -0.2, 0.3, 0.9273618495495703])
    C_GiBi, C_BoGo = A2C("321", (0, 0, 45)), A2C("123", (10, 0, 0))
    xg = np.array([0.0, 0.1, -0.05])  # slides along Gi axes 2 then 3 (TrnSeq 231)
    p_joint = kin.r[i0] + C_B0N.T @ (np.array([0, -0.4, 0.2]) - np.array([0.1, 0.2, 0.3]))
    p_joint = p_joint + C_B0N.T @ C_GiBi.T @ xg
    C_BoN = C_BoGo @ C_GiBi @ C_B0N
    p_B2 = p_joint + C_BoN.T @ (np.array([0, 0, 0.2]) - np.array([0, 0, -0.1]))
    np.testing.assert_allclose(kin.r[i2], p_B2, rtol=0, atol=1e-14)
    np.testing.assert_allclose(kin.R_N_B[i2], C_BoN.T, rtol=0, atol=1e-14)


# --------------------------------------------------------------------- warnings
def test_unsupported_features_are_reported(tmp_path):
    def edit(lines):
        lines[4] = "SPINNER_FSW   ! FSW"
        lines[7] = "ENCKE         ! Orbit"
        lines[12] = "LAL          ! code"
        lines[18] = "TRUE         ! constraints"
        lines[19] = "REFPT_JOINT  ! ref pt"
        lines[20] = "TRUE         ! flex"
        lines[22] = "Shake.txt    ! shaker"
        lines[34] = "1.0 0.0 0.0  ! dipole"
        lines[36] = "Nodes.txt    ! node file"
        lines[83] = "ACTUATED     ! type"
        lines[87] = "TRUE FALSE FALSE  ! RotDOF Locked"
        lines[149] = "1           ! Number of wheels"
        lines[159] = "2           ! Number of MTBs"
        lines[173] = "3           ! Number of Gyro Axes"

    sc = tumble_copy(tmp_path, edit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, state = read_42(sc)
    unsupported = [str(w.message) for w in caught if w.category is UnsupportedFeatureWarning]
    text = "\n".join(unsupported)
    for expected in ("line 5: flight software SPINNER_FSW", "line 8: orbit propagation (ENCKE)",
                     "line 13: attitude code LAL", "line 19: constraint forces",
                     "line 20: REFPT_JOINT", "line 23: shaker file",
                     "line 35: body B0: the magnetic dipole", "line 37: body B0: node file",
                     "line 84: joint G0 is ACTUATED",
                     "actuator rate loop", "0 thruster(s) and 1 locked DOF are not part of the model",
                     "line 160: 2 magnetic torquer(s)", "no magnetic field model",
                     "line 174: Number of Gyro Axes = 3"):  # fmt: skip
        assert expected in text, expected
    assert len(unsupported) == 12  # flex files: tests/io/test_modes.py
    # the wheel and the lock are modelled now
    assert model.body("W0").mass == 0.0 and model.joint("W0_spin").inner == "B0"
    case = kd.io.read_42_case(sc)
    assert [(e.t, e.joint, e.dof) for e in case.events] == [(0.0, "G0", 0)]
    # the actuated joint has no springs; the others keep theirs
    assert np.all(model.joint("G0").stiffness == 0.0)
    assert np.array_equal(model.joint("G2").stiffness, [0.2, 0.2])


def test_attitude_from_quaternion_and_from_angles_agree(tmp_path):
    R_N_B = A2C("231", (90, 45, 20)).T
    # 42's qbn gives C_BN = Q2C(qbn); scipy's quaternion of R_N_B = C_BN^T is the same qbn
    q = Rotation.from_matrix(R_N_B).as_quat()
    np.testing.assert_allclose(Q2C(q), R_N_B.T, atol=1e-15)

    def edit(lines):
        lines[12] = "NQN"
        lines[14] = " ".join(repr(float(x)) for x in q) + " ! Quaternion"

    m1, s1 = read_quiet(tumble_copy(tmp_path, edit))
    m2, s2 = read_quiet(DATA / "SC_TumbleSat.txt")
    assert_dynamics_equal(m1, s1, m2, s2)


# --------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (set_line(40, "heavy   ! Mass"), "SC_TumbleSat.txt line 40: expected 'Mass' as a number, got 'heavy'"),
        (set_line(41, "0.47 8.09 ! Moments"), "line 41: expected 'Moments of Inertia (kg-m^2)' as 3 numbers"),
        (set_line(41, "0.47 8.09 -8.09 ! Moments"), "line 41: body B1: inertia is not positive definite"),
        (set_line(42, "5.0 0.0 0.0 ! Products"), "line 41: body B1: inertia is not positive definite"),
        (set_line(40, "-94.25 ! Mass"), "line 40: body B1: mass must be positive"),
        (set_line(85, "0 7    ! Inner, outer"), "line 85: joint G0: outer body index 7 is out of range"),
        (set_line(85, "2 1    ! Inner, outer"), "line 85: joint G0: inner body index (2) must be less"),
        (set_line(101, "0 1   ! Inner, outer"), "line 101: joint G1: body 1 already has inbound joint G0"),
        (set_line(86, "2 231 SPHERICAL ! Rot"), "line 86: joint G0: a SPHERICAL joint needs RotDOF = 3"),
        (set_line(86, "2 221 GIMBAL ! Rot"), "line 86: joint G0: RotSeq '221'"),
        (set_line(86, "2 231 HINGE ! Rot"), "line 86: expected 'RotDOF, Seq, GIMBAL or SPHERICAL'"),
        (set_line(94, "0.0 0.0 0.0 ! Bi to Gi"), "line 94: expected 'Bi to Gi Static Angles [deg] & Seq' as 3 numbers and a sequence"),
        (set_line(98, "Jnt_Missing.txt ! parm"), "SC_TumbleSat.txt line 98: joint parameter file"),
        (set_line(84, "MOTORIZED ! type"), "line 84: expected 'Type of joint (PASSIVE, ACTUATED, others)'"),
        (set_line(13, "NXN ! code"), "line 13: expected 'Ang Vel wrt [NL], Att [QA] wrt [NLF]'"),
        (set_line(28, "many ! Number of Bodies"), "line 28: expected 'Number of Bodies' as an integer"),
        (set_line(88, "FALSE MAYBE FALSE ! locked"), "line 88: expected 'RotDOF Locked' as 3 words from TRUE, FALSE"),
        (lambda lines: lines.__delitem__(slice(100, None)), "SC_TumbleSat.txt: the file ends after line 100; expected 'Inner, outer body indices'"),
        (lambda lines: lines.__delitem__(slice(0, None)), "SC_TumbleSat.txt: the file ends (the file is empty)"),
    ],
)  # fmt: skip
def test_bad_sc_file(tmp_path, edit, expected):
    sc = tumble_copy(tmp_path, edit)
    with pytest.raises(kd.FileFormatError) as info:
        read_quiet(sc)
    assert expected in str(info.value)
    assert str(sc) in str(info.value)


def test_bad_jnt_file(tmp_path):
    sc = tumble_copy(tmp_path)
    jnt = tmp_path / "Jnt_Tumble13.txt"
    lines = jnt.read_text().splitlines()
    lines[4] = "5.0  x  0.0    ! Rot Passive Damping Coefficients (Nms/rad)"
    jnt.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        kd.FileFormatError, match=r"Jnt_Tumble13.txt line 5: expected 'Rot Passive Damping"
    ):
        read_quiet(sc)
    jnt.write_text("\n".join(lines[:4]) + "\n")
    with pytest.raises(kd.FileFormatError, match=r"Jnt_Tumble13.txt: the file ends after line 4"):
        read_quiet(sc)


def test_missing_file():
    with pytest.raises(kd.FileFormatError, match="SC_Nowhere.txt: cannot read"):
        read_42(DATA / "SC_Nowhere.txt")


def test_imported_tumblesat_shows_the_energy_sink_flat_spin():
    """The imported 42 demo, simulated: the dampers drain energy while H stays fixed, so
    the nutation angle of H from the hub's minor (spin) axis grows. Over 4000 s (dt = 1)
    the nutation starts at 0.07 deg and more than doubles (its growth is exponential,
    doubling about every 1500 s)."""
    from kanedyn.plotting import nutation_angle

    model, state = read_quiet(DATA / "SC_TumbleSat.txt")
    traj = kd.simulate(model, state, 4000.0, 1.0, output_every=100.0, progress=False)
    E = traj.total_energy
    assert np.all(np.diff(E) < 0.0)  # dampers only ever remove energy
    H = traj.angular_momentum
    assert np.abs(H - H[0]).max() < 1e-6 * np.linalg.norm(H[0])
    nut = np.degrees(nutation_angle(traj, "B0", axis=2))
    assert nut[0] == pytest.approx(0.0665, abs=5e-4)  # from the initial rates (0, 0.001, 5) deg/s
    assert nut[-1] > 2.0 * nut[0]
    assert np.all(np.diff(nut[::10]) > 0.0)  # growing, sampled every 1000 s
