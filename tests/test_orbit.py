"""Keplerian orbits (kd.Orbit), placing a free root on one, and the attitude relative
to LVLH; a spacecraft in orbit against independent oracles.

Oracles: Vallado's worked example of the elements-to-state conversion; the two-body
equation ``r̈ = -μ r/|r|³`` integrated by scipy (DOP853, rtol 1e-12) for Kepler's
propagation; scipy's rotations for the perifocal frame; the forward kinematics
(``kd.kinematics``) for the placed root; the pitch libration equation integrated by
scipy and its small-angle frequency for the rigid body in a circular orbit.

The simulations use the default engine (the native or compiled recursion); the
libration is also checked on every engine and formulation at orbital radius
(docs/howto/central-gravity.md, round-off at orbital distances).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.errors import ModelError
from kanedyn.simulation.diagnose import RoundoffWarning

MU_KM = 398600.4418  # km³/s², Vallado's value for the worked example


# --------------------------------------------------------------------------- elements
def test_elements_to_state_matches_vallado_example_2_6():
    """Vallado (2013), Example 2-6: p = 11067.790 km, e = 0.83285, i = 87.87°,
    Ω = 227.89°, ω = 53.38°, ν = 92.335° give r = (6525.344, 6861.535, 6449.125) km,
    v = (4.902276, 5.533124, -1.975709) km/s. The elements are printed to 5-6 digits
    (ν to 0.001°, 0.2 µrad, which moves r by 0.02 km at this radius), so the
    tolerances are 0.05 km and 2e-5 km/s."""
    e = 0.83285
    deg = np.radians
    orbit = kd.Orbit.from_elements(11067.790 / (1 - e * e), e, deg(87.87), deg(227.89),
                                   deg(53.38), deg(92.335), mu=MU_KM)  # fmt: skip
    np.testing.assert_allclose(orbit.position, [6525.344, 6861.535, 6449.125], atol=0.05)
    np.testing.assert_allclose(orbit.velocity, [4.902276, 5.533124, -1.975709], atol=2e-5)


def test_perifocal_frame_is_vallado_rotation_and_periapsis_on_x():
    """R_N_P = R3(-Ω) R1(-i) R3(-ω) is scipy's intrinsic "ZXZ" rotation of (Ω, i, ω);
    at ν = 0 the body is at periapsis a(1 - e) along P's x, moving along P's y."""
    a, e, i, raan, argp = 8.0e6, 0.2, 0.7, 1.1, -0.4
    orbit = kd.Orbit.from_elements(a, e, i, raan, argp, 0.0)
    R = Rotation.from_euler("ZXZ", [raan, i, argp]).as_matrix()
    np.testing.assert_allclose(orbit.R_N_P, R, atol=1e-15)
    np.testing.assert_allclose(orbit.position, a * (1 - e) * R[:, 0], rtol=1e-14)
    speed = np.sqrt(kd.EARTH_MU / a * (1 + e) / (1 - e))  # vis-viva at periapsis
    np.testing.assert_allclose(orbit.velocity, speed * R[:, 1], rtol=1e-14)


def test_kepler_propagation_matches_the_two_body_equation():
    """state(t) (Kepler's equation by Newton) against r̈ = -μ r/|r|³ integrated by
    scipy's DOP853 at rtol 1e-12 over two periods, e = 0.6 (where Newton works hardest)."""
    orbit = kd.Orbit.from_elements(9.0e6, 0.6, 0.3, 2.0, 1.0, 2.5)
    mu = orbit.mu
    t = np.linspace(0.0, 2.0 * orbit.period, 57)

    def f(_t, y):
        r = y[:3]
        return np.concatenate((y[3:], -mu * r / np.linalg.norm(r) ** 3))

    y0 = np.concatenate((orbit.position, orbit.velocity))
    sol = solve_ivp(f, (0, t[-1]), y0, method="DOP853", rtol=1e-12, atol=1e-6, t_eval=t)
    r, v = orbit.state(t)
    assert r.shape == v.shape == (57, 3)
    np.testing.assert_allclose(r, sol.y[:3].T, atol=1e-7 * orbit.a)
    np.testing.assert_allclose(v, sol.y[3:].T, atol=1e-7 * np.linalg.norm(orbit.velocity))


def test_lvlh_axes_and_rate():
    """z_L nadir, y_L along -h, x_L along v on a circular orbit; the rate of L is the
    finite difference of R_L_N: d/dt R_L_N = -[ω_L/N]× R_L_N (ω in L)."""
    orbit = kd.Orbit.circular(7.0e6, i=0.5, raan=0.3, nu=1.0)
    t = 1234.0
    r, v = orbit.state(t)
    R = orbit.lvlh(t)
    h = np.cross(r, v)
    np.testing.assert_allclose(R[2], -r / np.linalg.norm(r), atol=1e-15)
    np.testing.assert_allclose(R[1], -h / np.linalg.norm(h), atol=1e-15)
    np.testing.assert_allclose(R[0], v / np.linalg.norm(v), atol=1e-14)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(orbit.lvlh_rate(t), [0, -orbit.mean_motion, 0], rtol=1e-13)
    ecc = kd.Orbit.from_elements(1.0e7, 0.3, 0.5, 0.3, 1.0, 0.2)
    dt = 1e-2
    R_dot = (ecc.lvlh(t + dt) - ecc.lvlh(t - dt)) / (2 * dt)
    W = -R_dot @ ecc.lvlh(t).T  # [ω]×
    w = np.array([W[2, 1], W[0, 2], W[1, 0]])
    np.testing.assert_allclose(w, ecc.lvlh_rate(t), atol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": -1.0}, "a .* must be positive"),
        ({"e": 1.0}, r"e .* must be in \[0, 1\)"),
        ({"i": float("nan")}, "i .* must be finite"),
        ({"mu": 0.0}, "mu .* must be positive"),
        ({"nu": "x"}, "nu .* expected a number"),
    ],
)
def test_bad_elements_are_refused(kwargs, message):
    elements = {"a": 7e6, "e": 0.1, "i": 0.0, "raan": 0.0, "argp": 0.0, "nu": 0.0}
    with pytest.raises(ModelError, match=message):
        kd.Orbit.from_elements(**{**elements, **kwargs})


# --------------------------------------------------------------------------- placing
def _offset_root_model(field=None):
    """A free root with every geometric offset non-trivial, and a hinged appendage."""
    hub = kd.Body("hub", mass=300.0, inertia=kd.inertia_tensor(60.0, 50.0, 40.0),
                  com=(0.2, -0.1, 0.3))  # fmt: skip
    arm = kd.Body("arm", mass=20.0, inertia=kd.inertia_tensor(2.0, 3.0, 4.0))
    root = kd.Joint("root", None, "hub", rot_type="spherical", rot_dof=3, trn_dof=3,
                    trn_seq="312", inner_point=(1.0, 2.0, -3.0), outer_point=(0.5, 0.4, -0.2),
                    inner_rotation=kd.euler_to_dcm("123", (0.3, -0.2, 0.5)),
                    outer_rotation=kd.euler_to_dcm("321", (0.1, 0.7, -0.4)))  # fmt: skip
    hinge = kd.Joint.revolute("hinge", "hub", "arm", axis=2, inner_point=(1.0, 0, 0))
    return kd.Model([hub, arm], [root, hinge], gravity=field or kd.CentralGravity())


def test_place_puts_the_mass_centre_on_the_orbit_with_the_lvlh_attitude():
    """Forward kinematics of the placed state: the hub's mass centre at centre + r(t)
    with velocity v(t), R_L_B = euler_to_dcm("123", angles), and the body rate relative
    to LVLH as given (the LVLH rate from finite differences of the orbit's frame)."""
    field = kd.CentralGravity(center=(100.0, -50.0, 20.0))
    model = _offset_root_model(field)
    orbit = kd.Orbit.from_elements(8.0e6, 0.2, 0.9, 0.4, 0.3, 1.2)
    state = model.set_joint(model.initial_state(), "hinge", angles=[0.4], rates=[0.1])
    t, angles, rates = 300.0, (0.1, -0.3, 0.7), (0.01, -0.02, 0.03)
    placed = orbit.place(model, state, "root", t=t, angles=angles, rates=rates)
    kin = kd.kinematics(model, placed)
    r, v = orbit.state(t)
    np.testing.assert_allclose(kin.r[0], field.center + r, rtol=0, atol=1e-8)
    np.testing.assert_allclose(kin.v[0], v, rtol=0, atol=1e-9)
    R_L_B = orbit.lvlh(t) @ kin.R_N_B[0]
    np.testing.assert_allclose(R_L_B, kd.euler_to_dcm("123", angles), atol=1e-14)
    dt = 1e-3
    R_dot = (orbit.lvlh(t + dt) - orbit.lvlh(t - dt)) / (2 * dt)
    W = -R_dot @ orbit.lvlh(t).T
    w_LN = orbit.lvlh(t).T @ np.array([W[2, 1], W[0, 2], W[1, 0]])  # in N
    w_BL = kin.R_N_B[0].T @ (kin.omega[0] - w_LN)
    np.testing.assert_allclose(w_BL, rates, atol=1e-10)
    # the appendage keeps its joint state
    np.testing.assert_array_equal(placed.q[model.coordinates("hinge")], [0.4])
    np.testing.assert_array_equal(placed.u[model.speeds("hinge")], [0.1])


def test_place_attitude_dcm_equals_angles_and_held_in_lvlh_by_default():
    model = _offset_root_model()
    orbit = kd.Orbit.circular(7.0e6)
    R = kd.euler_to_dcm("321", (0.2, 0.1, -0.3))
    a = orbit.place(model, model.initial_state(), "root", attitude=R)
    b = orbit.place(model, model.initial_state(), "root", angles=(0.2, 0.1, -0.3), seq="321")
    np.testing.assert_allclose(a.q, b.q, atol=1e-9)
    np.testing.assert_allclose(a.u, b.u, atol=1e-12)
    kin = kd.kinematics(model, orbit.place(model, model.initial_state(), "root"))
    np.testing.assert_allclose(orbit.lvlh() @ kin.R_N_B[0], np.eye(3), atol=1e-14)
    np.testing.assert_allclose(kin.omega[0], [0, 0, orbit.mean_motion], rtol=1e-12, atol=1e-18)


def test_place_refuses_what_it_cannot_do():
    model = _offset_root_model()
    orbit = kd.Orbit.circular(7.0e6)
    s = model.initial_state()
    with pytest.raises(ModelError, match="'hinge' is not a free root joint"):
        orbit.place(model, s, "hinge")
    with pytest.raises(ModelError, match="mu"):
        kd.Orbit.circular(7.0e6, mu=4.0e14).place(model, s, "root")
    with pytest.raises(ModelError, match="attitude or angles, not both"):
        orbit.place(model, s, "root", attitude=np.eye(3), angles=(0, 0, 0))
    with pytest.raises(ModelError, match="not a rotation matrix"):
        orbit.place(model, s, "root", attitude=2 * np.eye(3))
    with pytest.raises(ModelError, match=r"rates: expected shape \(3,\)"):
        orbit.place(model, s, "root", rates=(0.0, 1.0))


# --------------------------------------------------------------------------- in orbit
def _kepler_error(n_per_orbit: int) -> float:
    """Largest |r - r_Kepler| / a over ten orbits of an isotropic body (whose potential
    is exactly the point mass's: MacCullagh's term vanishes for I = k 1)."""
    body = kd.Body("sat", mass=10.0, inertia=0.4 * np.eye(3))
    model = kd.Model([body], [kd.Joint.free("root", "sat")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.from_elements(1.0e7, 0.3, 0.5, 0.3, 1.0, 0.2)
    state = orbit.place(model, model.initial_state(), "root")
    T = orbit.period
    traj = kd.simulate(model, state, t_final=10 * T, dt=T / n_per_orbit, output_every=T / 8,
                       method="rk4", progress=False)  # fmt: skip
    r_kepler, _ = orbit.state(traj.t)
    return float(np.max(np.linalg.norm(traj.body("sat").position - r_kepler, axis=1)) / orbit.a)


def test_point_mass_in_an_eccentric_orbit_follows_kepler_over_ten_orbits():
    """e = 0.3, a = 1e7 m (perigee 7e6 m), RK4 with 1600 steps per orbit (6.2 s; 4.4 km
    of arc at perigee, where the error is made). RK4's global error is O(dt⁴): halving
    the step from 800 to 1600 per orbit must divide the error by about 16 (measured
    18, the asymptotic regime), so what is left is the integrator's truncation and not
    a modelling error; at 1600 steps it is 4e-9 of a (40 m over ten orbits, mostly
    along the track), bounded here by 1e-8 a."""
    coarse, fine = _kepler_error(800), _kepler_error(1600)
    assert fine < 1e-8
    assert 12.0 < coarse / fine < 24.0


def _rigid_body_in_lvlh(theta0: float, t_final_periods: float):
    I1, I2, I3 = 100.0, 120.0, 40.0
    body = kd.Body("sat", mass=500.0, inertia=kd.inertia_tensor(I1, I2, I3))
    model = kd.Model([body], [kd.Joint.free("root", "sat")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.circular(7.0e6, i=0.4, raan=0.2)
    state = orbit.place(model, model.initial_state(), "root", angles=(0.0, theta0, 0.0))
    T = orbit.period
    traj = kd.simulate(model, state, t_final=t_final_periods * T, dt=T / 4000,
                       output_every=T / 400, progress=False)  # fmt: skip
    return traj, orbit, (I1, I2, I3)


def test_pitch_libration_follows_the_planar_libration_equation():
    """A rigid body with principal axes (1, 2, 3) on LVLH's (x along track, y the
    negative orbit normal, z nadir), pitched by θ about y. With R_L_B = R_y(θ) the
    direction to the body from the centre, -z_L, is r̂ = (sin θ, 0, -cos θ) in B, and
    the gravity-gradient torque 3n² r̂ × I r̂ (μ/r³ = n² on a circular orbit) has the
    y component 3n² (I3 - I1) sin θ cos θ. The body rate about y is ω₂ = θ̇ - n
    (L turns at -n about y_L), n constant, and with ω₁ = ω₃ = 0 Euler's second equation
    is I2 ω̇₂ = T₂:

        I2 θ̈ = -(3/2) n² (I1 - I3) sin 2θ

    (the issue's I₃θ̈ = -(3/2)n²(I₂ - I₁) sin 2θ in a frame with the pitch axis third and
    the radial axis first). Integrated by scipy's DOP853 at rtol 1e-12, against the
    simulated pitch relative to the reference orbit's LVLH, over two orbits, θ0 = 0.1
    (nonlinear); roll and yaw stay zero. The agreement (measured 7e-13 rad) is bounded
    by 1e-9 rad; so is the pitch seen in the osculating LVLH of the body's own orbit."""
    theta0 = 0.1
    traj, orbit, (I1, I2, I3) = _rigid_body_in_lvlh(theta0, 2.0)
    n = orbit.mean_motion
    k = 1.5 * n * n * (I1 - I3) / I2
    sol = solve_ivp(lambda _t, y: [y[1], -k * np.sin(2 * y[0])], (0, traj.t[-1]), [theta0, 0.0],
                    method="DOP853", rtol=1e-12, atol=1e-14, t_eval=traj.t)  # fmt: skip
    att = traj.lvlh_attitude(orbit)
    assert np.ptp(att.pitch) > 0.19  # it librates
    np.testing.assert_allclose(att.pitch, sol.y[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(att.roll, 0.0, atol=1e-9)
    np.testing.assert_allclose(att.yaw, 0.0, atol=1e-9)
    np.testing.assert_allclose(att.angle, np.abs(sol.y[0]), atol=1e-9)
    np.testing.assert_allclose(traj.lvlh_attitude().pitch, sol.y[0], rtol=0, atol=1e-9)


def test_small_pitch_libration_has_the_gravity_gradient_frequency():
    """For small θ the libration equation is θ̈ = -3n²(I1 - I3)/I2 θ: the frequency is
    n √(3 (I1 - I3)/I2) (1.22 n here). Measured from the zero crossings of the pitch
    (linear interpolation between outputs 14.6 s apart, which at a zero crossing of a
    sinusoid errs by O((ωΔt)³) of Δt) over about four libration periods; θ0 = 1e-3
    shifts the frequency by θ0²/4 = 2.5e-7, so the tolerance is 1e-5."""
    traj, orbit, (I1, I2, I3) = _rigid_body_in_lvlh(1e-3, 3.3)
    pitch = traj.lvlh_attitude(orbit).pitch
    t = traj.t
    i = np.nonzero(np.sign(pitch[:-1]) != np.sign(pitch[1:]))[0]
    crossings = t[i] - pitch[i] * (t[i + 1] - t[i]) / (pitch[i + 1] - pitch[i])
    assert len(crossings) >= 7
    half_period = np.mean(np.diff(crossings))
    expected = orbit.mean_motion * np.sqrt(3 * (I1 - I3) / I2)
    assert np.pi / half_period == pytest.approx(expected, rel=1e-5)


def test_lvlh_attitude_names_its_angles():
    traj, orbit, _ = _rigid_body_in_lvlh(0.01, 0.01)
    att = traj.lvlh_attitude(orbit, seq="321")
    np.testing.assert_allclose(att.pitch, att.angles[:, 1])
    np.testing.assert_allclose(att.yaw, att.angles[:, 0])
    with pytest.raises(ModelError, match="each axis once"):
        _ = traj.lvlh_attitude(orbit, seq="313").pitch


# --------------------------------------------------------------------------- the example
def _boom_run(damping: float, orbits: float):
    case = kd.examples.gravity_gradient_boom(damping=damping)
    T = case.orbit.period
    traj = kd.simulate(case.model, case.state, t_final=orbits * T, dt=T / 2000,
                       output_every=T / 100, progress=False)  # fmt: skip
    return traj, traj.lvlh_attitude(case.orbit, body="boom")


def test_gravity_gradient_boom_is_captured_into_the_vertical():
    """The hinge damper takes the boom's pitch libration (0.5 rad) below 0.05 rad in
    six orbits, and the boom stays in the orbit plane (roll and yaw zero: the hinge is
    about the pitch axis). Without the damper, the same run keeps its libration.

    (The total energy cannot show the damping here: the libration holds about 5e-4 J
    against 1.5e10 J of orbital energy, whose round-off is 1e-5 J per output.)"""
    traj, att = _boom_run(1.0, 6.0)
    last = slice(-100, None)  # the last orbit
    assert np.max(np.abs(att.pitch[last])) < 0.05
    np.testing.assert_allclose(att.roll, 0.0, atol=1e-9)
    np.testing.assert_allclose(att.yaw, 0.0, atol=1e-9)
    _, free = _boom_run(0.0, 6.0)
    assert np.max(np.abs(free.pitch[last])) > 0.45


def test_small_roll_and_yaw_follow_the_linearised_roll_yaw_frequencies():
    """Roll φ and yaw ψ of a body held in LVLH (principal axes 1, 2, 3 on x_L along
    track, y_L the negative orbit normal, z_L nadir) are coupled by the orbit rate n.
    Linearised (Hughes, *Spacecraft Attitude Dynamics*, 1986, §9.3):

        I1 φ̈ + 4n²(I2 - I3) φ - n(I1 - I2 + I3) ψ̇ = 0
        I3 ψ̈ +  n²(I2 - I1) ψ + n(I1 - I2 + I3) φ̇ = 0

    whose frequencies ω = Ω n solve Ω⁴ - (1 + 3k1 + k1 k3) Ω² + 4 k1 k3 = 0 with
    k1 = (I2 - I3)/I1, k3 = (I2 - I1)/I3 (0.8 and 0.5 here: Ω = 1.8215 and 0.6945).
    From roll 1e-4 rad, the simulated roll and yaw over four orbits are fitted by
    cosines and sines at those two frequencies: the residual, relative to the roll
    amplitude, is 9e-8 (the nonlinear terms: it grows as φ0², 9e-6 from 1e-3 rad),
    bounded by 1e-6; at frequencies 1e-3 off it is 2e-2, so the fit pins them."""
    I1, I2, I3 = 100.0, 120.0, 40.0
    body = kd.Body("sat", mass=500.0, inertia=kd.inertia_tensor(I1, I2, I3))
    model = kd.Model([body], [kd.Joint.free("root", "sat")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.circular(7.0e6, i=0.4, raan=0.2)
    state = orbit.place(model, model.initial_state(), "root", angles=(1e-4, 0.0, 0.0))
    T = orbit.period
    traj = kd.simulate(model, state, t_final=4.0 * T, dt=T / 4000, output_every=T / 200,
                       progress=False)  # fmt: skip
    att = traj.lvlh_attitude(orbit)
    k1, k3 = (I2 - I3) / I1, (I2 - I1) / I3
    b = 1.0 + 3.0 * k1 + k1 * k3
    Omega = np.sqrt((b + np.array([1.0, -1.0]) * np.sqrt(b * b - 16.0 * k1 * k3)) / 2.0)
    n, t = orbit.mean_motion, traj.t

    def residual(freqs):
        basis = np.column_stack([f(w * t) for w in freqs for f in (np.cos, np.sin)])
        worst = 0.0
        for x in (att.roll, att.yaw):
            coef, *_ = np.linalg.lstsq(basis, x, rcond=None)
            worst = max(worst, np.max(np.abs(basis @ coef - x)) / np.max(np.abs(att.roll)))
        return worst

    assert np.ptp(att.yaw) > 1e-5  # roll and yaw are coupled
    assert residual(Omega * n) < 1e-6
    assert residual(Omega * n * 1.001) > 1e-3


ENGINES = [("kane", "dense"), ("kane", "compiled"), ("msd", "dense"), ("msd", "compiled")]


def _libration_error(formulation, engine, orbits, steps_per_orbit):
    """The largest pitch error (against the libration equation, scipy DOP853 at rtol
    1e-13) and roll and yaw of the rigid body of :func:`_rigid_body_in_lvlh`, pitched
    0.1 rad on an inclined circular orbit at 7e6 m, on one formulation and engine; and
    whether the run warned of round-off."""
    I1, I2, I3 = 100.0, 120.0, 40.0
    body = kd.Body("sat", mass=500.0, inertia=kd.inertia_tensor(I1, I2, I3))
    model = kd.Model([body], [kd.Joint.free("root", "sat")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.circular(7.0e6, i=0.4, raan=0.2)
    state = orbit.place(model, model.initial_state(), "root", angles=(0.0, 0.1, 0.0))
    T, n = orbit.period, orbit.mean_motion
    k = 1.5 * n * n * (I1 - I3) / I2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traj = kd.simulate(model, state, orbits * T, T / steps_per_orbit, output_every=T / 200,
                           formulation=formulation, engine=engine, progress=False)  # fmt: skip
    sol = solve_ivp(lambda _t, y: [y[1], -k * np.sin(2 * y[0])], (0, traj.t[-1]), [0.1, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-15, t_eval=traj.t)  # fmt: skip
    att = traj.lvlh_attitude(orbit)
    warned = any(issubclass(w.category, RoundoffWarning) for w in caught)
    return (np.max(np.abs(att.pitch - sol.y[0])),
            max(np.max(np.abs(att.roll)), np.max(np.abs(att.yaw))), warned)  # fmt: skip


@pytest.mark.parametrize(("formulation", "engine"), ENGINES)
def test_every_engine_keeps_the_attitude_at_orbital_radius(formulation, engine):
    """At 7e6 m every engine follows the libration equation to the step's truncation
    error (measured 1e-12 rad over a twentieth of an orbit at T/1000 steps, on each):
    the dense engine's spatial quantities are about the free root's joint point and its
    bias forces leave out the exactly zero v × m v; the MSD states hold the root's
    angular momentum about the mass centre. With the spatial quantities about N's
    origin, the dense Kane engine was off by 2e-4 rad over a tenth of an orbit, and
    with the momentum about N's origin (2.6e13 N m s against the attitude's 0.1) MSD
    lost the attitude (0.1 to 3 rad) on both engines. No run warns of round-off."""
    pitch, roll_yaw, warned = _libration_error(formulation, engine, 0.05, 1000)
    assert pitch < 1e-10 and roll_yaw < 1e-10, (pitch, roll_yaw)
    assert not warned


@pytest.mark.slow
@pytest.mark.parametrize(("formulation", "engine"), ENGINES)
def test_every_engine_keeps_the_attitude_over_half_an_orbit(formulation, engine):
    """Half an orbit at T/2000 steps (truncation error 2e-12 rad, measured on each
    engine): the pitch within 1e-9 rad of the libration equation, roll and yaw zero."""
    pitch, roll_yaw, _ = _libration_error(formulation, engine, 0.5, 2000)
    assert pitch < 1e-9 and roll_yaw < 1e-9, (pitch, roll_yaw)


def test_a_fixed_base_far_from_N_origin_warns_on_the_dense_engine():
    """A model without a free root keeps the dense engine's spatial quantities about N's
    origin: a pendulum hinged 7e6 m away (ε m |r|²/I = 0.2) warns on the dense engine,
    not on the compiled one, and not when the hinge is at N's origin."""
    rod = kd.Body("rod", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.05), com=(0.0, 0.0, -0.5))

    def run(point, engine):
        model = kd.Model([rod], [kd.Joint.revolute("hinge", None, "rod", axis=1,
                                                   inner_point=point)])  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kd.simulate(model, model.initial_state(), 0.1, 0.01, engine=engine, progress=False)
        return [str(w.message) for w in caught if issubclass(w.category, RoundoffWarning)]

    far = run((7.0e6, 0.0, 0.0), "dense")
    assert len(far) == 1 and "'rod' is 7e+06 m from the origin of the dense engine" in far[0]
    assert not run((7.0e6, 0.0, 0.0), "compiled")
    assert not run((0.0, 0.0, 0.0), "dense")
