"""42's orbit section: reference orbit files (``Orb_*.txt``), the attitude relative to
LVLH, ``Inp_Sim.txt``; each against a spacecraft built by hand with the Python API.

Oracles written out here from 42's source, not from kanedyn: the elements of
``InitOrbit`` (``a = R + (h_p + h_a)/2``), 42's LVLH frame ``FindCLN`` (z nadir, y the
negative orbit normal), ``A2C`` as passive elementary rotations, the vis-viva speed of a
circular orbit; scipy's rotations for the elements.
"""

from __future__ import annotations

import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, read_42_case, read_42_orbit, read_42_sim
from tests.io.test_fortytwo import _passive

DATA = Path(__file__).parent / "data"
MU_42, R_42 = 3.986004e14, 6.378145e6  # 42's Earth (Source/42init.c, LoadPlanets)


def A2C(seq: str, deg) -> np.ndarray:
    """42's ``A2C``: C = R_i3(t3) R_i2(t2) R_i1(t1) (passive), angles in degrees."""
    t = np.deg2rad(deg)
    i1, i2, i3 = (int(ch) for ch in seq)
    return _passive(i3, t[2]) @ _passive(i2, t[1]) @ _passive(i1, t[0])


def find_cln(r, v):
    """42's ``FindCLN`` (Kit/Source/orbkit.c): C_LN (rows L's axes in N) and ω_L/N in N."""
    h = np.cross(r, v)
    L3 = -r / np.linalg.norm(r)
    L2 = -h / np.linalg.norm(h)
    L1 = np.cross(L2, L3)
    return np.array([L1, L2, L3]), h / (r @ r)


def _orbit_file(tmp_path: Path, **lines: str) -> Path:
    """Demo/Orb_LEO.txt with some of its lines replaced (by their 1-based number)."""
    text = (DATA / "Orb_LEO.txt").read_text().splitlines()
    for key, value in lines.items():
        text[int(key[1:]) - 1] = value
    path = tmp_path / "Orb_Test.txt"
    path.write_text("\n".join(text) + "\n")
    return path


def _kin_summary(model, state):
    kin = kd.kinematics(model, state)
    m = np.array([b.mass for b in model.bodies])
    return kin, m @ kin.r / m.sum(), m @ kin.v / m.sum()


# --------------------------------------------------------------------- the orbit file
def test_demo_leo_orbit_file_is_42s_circular_orbit():
    """Demo/Orb_LEO.txt: CENTRAL about EARTH, KEP with PA altitudes 400 and 400 km,
    i = Ω = ω = 0, ν = 180°: a = 6378.145 + 400 km, e = 0, at -a x̂ moving along -ŷ
    at the circular speed sqrt(μ/a)."""
    orb = read_42_orbit(DATA / "Orb_LEO.txt")
    a = R_42 + 400.0e3
    assert orb.regime == "CENTRAL" and orb.world == "EARTH"
    assert orb.gravity.mu == MU_42 and orb.gravity.J2 == 0.0
    r, v = orb.orbit.state(0.0)
    np.testing.assert_allclose(r, [-a, 0, 0], atol=1e-6)
    np.testing.assert_allclose(v, [0, -math.sqrt(MU_42 / a), 0], atol=1e-9)


def test_keplerian_and_rv_inputs_give_the_same_orbit(tmp_path):
    """PA altitudes 300 and 2000 km: 42's a = R + 1150 km, e = 850 km / a; i = 52°,
    Ω = 30°, ω = 40°, ν = 70° against r, v from the perifocal formulas and scipy's
    ZXZ rotation. The same r, v given as RV (km, km/s) give back the orbit."""
    kep = _orbit_file(tmp_path, l15="300.0 2000.0 ! alt", l17="52.0 ! i", l18="30.0 ! raan",
                      l19="40.0 ! argp", l20="70.0 ! nu")  # fmt: skip
    a = R_42 + 1150.0e3
    e = 850.0e3 / a
    nu = np.radians(70.0)
    p = a * (1 - e * e)
    r_p = p / (1 + e * np.cos(nu)) * np.array([np.cos(nu), np.sin(nu), 0.0])
    v_p = np.sqrt(MU_42 / p) * np.array([-np.sin(nu), e + np.cos(nu), 0.0])
    R = Rotation.from_euler("ZXZ", np.radians([30.0, 52.0, 40.0])).as_matrix()
    orbit = read_42_orbit(kep).orbit
    assert orbit.a == pytest.approx(a, rel=1e-15) and orbit.e == pytest.approx(e, rel=1e-14)
    r, v = orbit.state(0.0)
    np.testing.assert_allclose(r, R @ r_p, atol=1e-6)
    np.testing.assert_allclose(v, R @ v_p, atol=1e-9)
    rv = _orbit_file(tmp_path, l13="RV ! input", l21=" ".join(f"{x:.17g}" for x in r / 1e3),
                     l22=" ".join(f"{x:.17g}" for x in v / 1e3))  # fmt: skip
    r2, v2 = read_42_orbit(rv).orbit.state(1000.0)
    r1, v1 = orbit.state(1000.0)
    np.testing.assert_allclose(r2, r1, atol=1e-5)
    np.testing.assert_allclose(v2, v1, atol=1e-8)


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ({"l11": "VULCAN ! world"}, 11, "orbit center 'VULCAN'"),
        ({"l13": "FILE ! input"}, 13, "FILE: TLE, TRV or SPLINE"),
        ({"l15": "400.0 300.0 ! alt"}, 15, "apoapsis"),
        ({"l14": "AE ! ae", "l16": "400.0 1.5 ! ecc"}, 16, "not an ellipse"),
        ({"l3": "ORBITAL ! type"}, 3, "Orbit Type"),
        ({"l44": "X ! fixed in"}, 44, "Formation Frame Fixed in"),
    ],
)
def test_bad_orbit_files_name_the_file_and_line(tmp_path, lines, line, message):
    path = _orbit_file(tmp_path, **lines)
    with pytest.raises(kd.FileFormatError, match=rf"Orb_Test.txt line {line}: .*{message}"):
        read_42_orbit(path)


def test_three_body_orbits_are_reported_and_read_without_gravity(tmp_path):
    path = _orbit_file(tmp_path, l3="THREE_BODY ! type")
    with pytest.warns(UnsupportedFeatureWarning, match=r"line 3: THREE_BODY orbits are not"):
        orb = read_42_orbit(path)
    assert orb.orbit is None and orb.gravity is None


# --------------------------------------------------------------------- a spacecraft on it
def test_tumblesat_on_the_demo_orbit_has_its_mass_centre_on_the_orbit():
    """42's Explorer-1 demo (five bodies, NAN attitude) with Demo/Orb_LEO.txt: the model
    has 42's Earth field, the composite mass centre is at the orbit's position with its
    velocity (42's "CM, 0 wrt F"), and the attitude and rates are those of the file
    read without an orbit (relative to N)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = read_42_case(DATA / "SC_TumbleSat.txt", orbit=DATA / "Orb_LEO.txt")
        free = read_42_case(DATA / "SC_TumbleSat.txt")
    a = R_42 + 400.0e3
    assert case.model.central_gravity.mu == MU_42
    kin, c, v_c = _kin_summary(case.model, case.state)
    np.testing.assert_allclose(c, [-a, 0, 0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(v_c, [0, -math.sqrt(MU_42 / a), 0], rtol=0, atol=1e-10)
    kin0 = kd.kinematics(free.model, free.state)
    np.testing.assert_allclose(kin.R_N_B, kin0.R_N_B, atol=1e-15)
    np.testing.assert_allclose(kin.omega, kin0.omega, atol=1e-15)
    np.testing.assert_allclose(kin.r - c, kin0.r - _kin_summary(free.model, free.state)[1],
                               atol=1e-9)  # fmt: skip


def _spinner(tmp_path: Path, code: str, rates: str, angles: str) -> Path:
    text = (DATA / "SC_Spinner.txt").read_text().splitlines()
    text[12], text[13], text[15] = f"{code} ! code", f"{rates} ! rates", f"{angles} ! angles"
    text[32] = "0.1 -0.2 0.3 ! Location of mass center, m"
    path = tmp_path / "SC_Test.txt"
    path.write_text("\n".join(text) + "\n")
    return path


def test_spinner_held_in_lvlh_matches_a_hand_built_spacecraft(tmp_path):
    """42's Demo SC_Spinner (one body, 100 kg, I = diag(100, 100, 300)) with attitude
    code LAL (rates and Euler angles relative to LVLH: 10, 20, 30 deg in sequence 213,
    rates 0.1, -0.2, 0.3 deg/s) on an inclined eccentric orbit. The spacecraft built by
    hand: ``C_BN = A2C(213, ...) C_LN`` with 42's ``FindCLN`` of the orbit's r, v, and
    ``ω_B/N = ω_B/L + C_BN ω_L/N`` (42's InitSpacecraft); both simulated for 600 s."""
    orb = _orbit_file(tmp_path, l15="500.0 1500.0 ! alt", l17="63.4 ! i", l18="20.0 ! raan",
                      l19="270.0 ! argp", l20="33.0 ! nu")  # fmt: skip
    sc = _spinner(tmp_path, "LAL", "0.1 -0.2 0.3", "10.0 20.0 30.0 213")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = read_42_case(sc, orbit=orb)
    # by hand
    a = R_42 + 1000.0e3
    e = 500.0e3 / a
    orbit = kd.Orbit.from_elements(a, e, *np.radians([63.4, 20.0, 270.0, 33.0]), mu=MU_42)
    r, v = orbit.state(0.0)
    C_LN, w_LN = find_cln(r, v)
    C_BN = A2C("213", (10.0, 20.0, 30.0)) @ C_LN
    w_B = np.radians([0.1, -0.2, 0.3]) + C_BN @ w_LN
    com = np.array([0.1, -0.2, 0.3])
    body = kd.Body("B0", mass=100.0, inertia=np.diag([100.0, 100.0, 300.0]), com=com,
                   check_triangle=False)  # fmt: skip
    model = kd.Model([body], [kd.Joint.free("root", "B0", outer_point=com)],
                     gravity=kd.CentralGravity(mu=MU_42, radius=R_42))  # fmt: skip
    q = Rotation.from_matrix(C_BN.T).as_quat()  # scalar last, R_N_B
    state = model.set_joint(model.initial_state(), "root", quaternion=q, rates=w_B,
                            displacements=r, displacement_rates=v)  # fmt: skip
    kin, c, v_c = _kin_summary(case.model, case.state)
    np.testing.assert_allclose(c, r, rtol=0, atol=1e-8)
    np.testing.assert_allclose(v_c, v, rtol=0, atol=1e-11)
    np.testing.assert_allclose(kin.R_N_B[0], C_BN.T, atol=1e-14)
    np.testing.assert_allclose(kin.R_N_B[0].T @ kin.omega[0], w_B, atol=1e-16)
    runs = [kd.simulate(m, s, t_final=600.0, dt=0.5, output_every=60.0, progress=False)
            for m, s in ((case.model, case.state), (model, state))]  # fmt: skip
    np.testing.assert_allclose(runs[0].q, runs[1].q, atol=1e-9)
    np.testing.assert_allclose(runs[0].u, runs[1].u, atol=1e-12)
    att = runs[0].lvlh_attitude(case.orbit)
    np.testing.assert_allclose(att.R_L_B[0], A2C("213", (10.0, 20.0, 30.0)).T, atol=1e-13)


def test_formation_offset_in_lvlh_follows_42s_euler_hill_conversion(tmp_path):
    """A spacecraft 100 m above and 50 m ahead of the reference point, formation fixed
    in L: 42 takes (50, 0, -100) m as Euler-Hill (curvilinear) coordinates, so the
    mass centre is at radius a + 100 m, 50 m of arc ahead (angle 50/a), its velocity
    the circular orbit's rate n times the new radius along the local horizontal."""
    sc = _spinner(tmp_path, "NAN", "0.0 0.0 0.0", "0.0 0.0 0.0 123")
    text = sc.read_text().splitlines()
    text[9] = "50.0 0.0 -100.0 ! pos wrt F"
    sc.write_text("\n".join(text) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = read_42_case(sc, orbit=_orbit_file(tmp_path, l44="L ! fixed in"))  # ν = 180°
    a = R_42 + 400.0e3
    n = math.sqrt(MU_42 / a**3)
    _, c, v_c = _kin_summary(case.model, case.state)
    # the orbit runs along -y at -x: "ahead" turns the position towards -y
    expected = (a + 100.0) * np.array([-np.cos(50.0 / a), -np.sin(50.0 / a), 0.0])
    np.testing.assert_allclose(c, expected, atol=1e-6)
    speed = n * (a + 100.0)
    np.testing.assert_allclose(v_c, speed * np.array([np.sin(50.0 / a), -np.cos(50.0 / a), 0.0]),
                               atol=1e-9)  # fmt: skip


def test_inp_sim_finds_the_spacecraft_and_its_orbit_and_reports_the_environment(tmp_path):
    """Inp_Sim.txt names the orbit files and each spacecraft's RefOrb; the flags of forces
    kanedyn does not model are reported with their line."""
    for name in ("SC_TumbleSat.txt", "Jnt_Tumble02.txt", "Jnt_Tumble13.txt", "Orb_LEO.txt"):
        shutil.copy(DATA / name, tmp_path / name)
    sim = tmp_path / "Inp_Sim.txt"
    sim.write_text(
        "<<<<<<<<<<<<<<<<<  42: The Mostly Harmless Simulator  >>>>>>>>>>>>>>>>>\n"
        "************************** Simulation Control **************************\n"
        "FAST ! Time Mode\n20000.0 0.1 ! Sim Duration, Step Size [sec]\n"
        "10.0 ! File Output Interval [sec]\n0 ! RNG Seed\nTRUE ! Graphics Front End?\n"
        "Inp_Cmd.txt ! Command Script File Name\n"
        "**************************  Reference Orbits  **************************\n"
        "2 ! Number of Reference Orbits\nTRUE Orb_None.txt ! Orb 0\nTRUE Orb_LEO.txt ! Orb 1\n"
        "*****************************  Spacecraft  *****************************\n"
        "1 ! Number of Spacecraft\nTRUE 1 SC_TumbleSat.txt ! Existence, RefOrb, SC 0\n"
        "***************************** Environment  *****************************\n"
        "09 29 2016 ! Date\nFALSE FALSE ! Aerodynamic Forces & Torques (Shadows)\n"
        "FALSE ! Gravity Gradient Torques\nTRUE FALSE ! Solar Pressure Forces & Torques\n"
        "********************* Celestial Bodies of Interest *********************\n"
        "TRUE ! Aerodynamic Forces (not in the environment section)\n"
    )
    with pytest.warns(UnsupportedFeatureWarning) as record:
        case = read_42_sim(sim)
    messages = [str(w.message) for w in record]
    assert any("Inp_Sim.txt line 19: gravity-gradient torques are off" in m for m in messages)
    assert any("Inp_Sim.txt line 20: solar radiation pressure" in m for m in messages)
    assert not any("aerodynamic" in m for m in messages)
    assert any("third-body" in m for m in messages)
    assert case.orbit is not None and case.model.central_gravity is not None
    text = sim.read_text().replace("TRUE 1 SC_", "TRUE 2 SC_")
    sim.write_text(text)
    with pytest.raises(kd.FileFormatError, match=r"Inp_Sim.txt line 15: .*RefOrb 2 is out of"):
        read_42_sim(sim)
    sim.write_text(text.replace("TRUE 2 SC_", "TRUE 0 SC_"))
    with pytest.raises(kd.FileFormatError, match=r"Inp_Sim.txt line 11: .*Orb_None.txt.*not found"):
        read_42_sim(sim)


def test_attitude_relative_to_a_formation_frame_fixed_in_lvlh(tmp_path):
    """Attitude code NAF: the angles are relative to the formation frame F, here fixed in
    L at 42's A2C(312, 30, 0, 10): ``C_BN = C_BF C_FL C_LN`` (42's ``InitOrbit`` and
    ``InitSpacecraft``), the rate relative to N."""
    orb = _orbit_file(tmp_path, l44="L ! fixed in", l45="30.0 0.0 10.0 312 ! angles")
    sc = _spinner(tmp_path, "NAF", "0.0 0.0 2.0", "5.0 -15.0 25.0 123")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = read_42_case(sc, orbit=orb)
    r, v = case.orbit.state(0.0)
    C_LN, _ = find_cln(r, v)
    C_BN = A2C("123", (5.0, -15.0, 25.0)) @ A2C("312", (30.0, 0.0, 10.0)) @ C_LN
    kin = kd.kinematics(case.model, case.state)
    np.testing.assert_allclose(kin.R_N_B[0], C_BN.T, atol=1e-14)
    np.testing.assert_allclose(kin.R_N_B[0].T @ kin.omega[0], np.radians([0, 0, 2.0]),
                               atol=1e-16)  # fmt: skip
