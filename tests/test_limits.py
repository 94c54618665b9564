"""Joint limits in a run (kanedyn.simulation.limits): reported, stops, or ignored.

Oracles: a slider under gravity falls ``d = ½ g t²``, so it reaches a bound ``d`` below
its start at ``t = √(2 d / g)``; on a spring ``k`` it swings about ``-m g / k`` with
``ω = √(k / m)``, and after a plastic stop at a bound it starts again from rest there.
"""

from __future__ import annotations

import warnings

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, read_urdf
from kanedyn.simulation.limits import JointLimitWarning, LimitCrossing

G = 9.81
LOWER, UPPER = -0.5, 0.5
DT = 1e-3
ENGINES = [("dense", "kane"), ("dense", "msd"), ("compiled", "kane"), ("compiled", "msd")]


def slider(stiffness=0.0, lower=LOWER, upper=UPPER, mass=1.0):
    """A block on a vertical slide (z up), gravity down, limits [lower, upper] m."""
    body = kd.Body("block", mass=mass, inertia=kd.inertia_tensor(0.1, 0.1, 0.1))
    joint = kd.Joint.prismatic("lift", None, "block", axis=3, stiffness=stiffness,
                               limits=kd.JointLimits(lower=lower, upper=upper))  # fmt: skip
    return kd.Model([body], [joint], gravity=(0.0, 0.0, -G))


def quiet_run(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JointLimitWarning)
        return kd.simulate(model, model.initial_state(), **kw)


@pytest.mark.parametrize(("engine", "formulation"), ENGINES)
def test_warn_names_the_joint_and_the_free_fall_time(engine, formulation):
    model = slider()
    with pytest.warns(JointLimitWarning, match=r"'lift' past its lower limit -0.5 at t = 0.3192"):
        traj = kd.simulate(model, model.initial_state(), 1.0, DT, engine=engine,
                           formulation=formulation)  # fmt: skip
    assert traj.limits == "warn"
    (crossing,) = traj.limit_crossings
    assert (crossing.joint, crossing.bound, crossing.limit) == ("lift", "lower", LOWER)
    # linear interpolation of the parabola over one step: error <= g h² / (8 v) ~ 4e-7 s
    assert crossing.t == pytest.approx(np.sqrt(2 * (0 - LOWER) / G), abs=1e-6)
    # not enforced: the block falls on
    assert traj.q[-1, 0] == pytest.approx(-0.5 * G * 1.0**2, rel=1e-9)


def test_warn_reports_each_bound_once_in_time_order():
    """A spring swings the block through both bounds, again and again: each bound is
    reported once, at its first crossing, the earlier first."""
    model = slider(stiffness=40.0, lower=-0.3, upper=0.1)
    state = model.set_joint(
        model.initial_state(), "lift", displacements=[0.0], displacement_rates=[2.0]
    )
    with pytest.warns(JointLimitWarning):
        traj = kd.simulate(model, state, 3.0, DT)
    # q(t) = -c + c cos ωt + (v0/ω) sin ωt, c = g/ω²
    w, c = np.sqrt(40.0), G / 40.0
    t = np.linspace(0, 3, 300001)
    q = -c + c * np.cos(w * t) + 2.0 / w * np.sin(w * t)
    assert q.max() > 0.1 and q.min() < -0.3
    first_up, first_down = t[np.argmax(q > 0.1)], t[np.argmax(q < -0.3)]
    assert [(e.bound, e.t) for e in traj.limit_crossings] == [
        ("upper", pytest.approx(first_up, abs=2e-5)),
        ("lower", pytest.approx(first_down, abs=2e-5)),
    ]


@pytest.mark.parametrize(("engine", "formulation"), ENGINES)
def test_stop_holds_the_slider_at_its_limit(engine, formulation):
    model = slider()
    traj = kd.simulate(model, model.initial_state(), 1.0, DT, engine=engine,
                       formulation=formulation, limits="stop")  # fmt: skip
    t_hit = np.sqrt(2 * (0 - LOWER) / G)
    # held at the first step boundary past the analytic impact
    assert traj.limit_crossings == (
        LimitCrossing("lift", "lower", LOWER, pytest.approx(np.ceil(t_hit / DT) * DT)),
    )
    z, v = traj.q[:, 0], traj.u[:, 0]
    before = traj.t < t_hit - DT
    np.testing.assert_allclose(z[before], -0.5 * G * traj.t[before] ** 2, rtol=0, atol=1e-12)
    assert np.all(z >= LOWER - 1e-12)
    after = traj.t > t_hit + DT
    np.testing.assert_allclose(z[after], LOWER, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v[after], 0.0, rtol=0, atol=1e-12)
    if engine == "compiled":
        assert traj.engine != "dense"  # the right-hand side stays compiled


@pytest.mark.parametrize(("engine", "formulation"), ENGINES)
def test_stop_releases_when_a_spring_pulls_back(engine, formulation):
    """k = 30 N/m: the block swings about -g/ω² = -0.327 m, down to -0.654 m, so it hits
    the stop at -0.5 m; there the spring (15 N) beats gravity (9.81 N) and pulls it off.
    From rest at the stop it swings between -0.5 m and -0.154 m."""
    k = 30.0
    w, c = np.sqrt(k), G / k
    model = slider(stiffness=k)
    traj = kd.simulate(model, model.initial_state(), 1.5, DT, engine=engine,
                       formulation=formulation, limits="stop")  # fmt: skip
    t_hit = np.arccos((LOWER + c) / c) / w  # -c + c cos ωt = LOWER
    t_held = np.ceil(t_hit / DT) * DT  # the stop acts at the step boundary after the impact
    assert traj.limit_crossings[0].t == pytest.approx(t_held)
    z = traj.q[:, 0]
    assert np.all(z >= LOWER - 1e-12)
    # released one step later (the constraint force would pull), then a free swing
    t_free = t_held + DT
    period = 2 * np.pi / w
    swing = (traj.t > t_free) & (traj.t < t_free + 0.9 * period)
    expected = -c + (LOWER + c) * np.cos(w * (traj.t[swing] - t_free))
    np.testing.assert_allclose(z[swing], expected, rtol=0, atol=1e-9)
    assert z[swing].max() == pytest.approx(-c - (LOWER + c), abs=1e-6)  # -0.154 m


def test_ignore_checks_nothing():
    model = slider()
    with warnings.catch_warnings():
        warnings.simplefilter("error", JointLimitWarning)
        traj = kd.simulate(model, model.initial_state(), 1.0, DT, limits="ignore")
    assert traj.limits == "ignore" and traj.limit_crossings == ()
    assert traj.q[-1, 0] == pytest.approx(-0.5 * G, rel=1e-9)


def test_stop_is_refused_where_it_cannot_act():
    model = slider()
    state = model.initial_state()
    with pytest.raises(kd.ModelError, match=r"joint 'lift': its limits are stops"):
        kd.simulate(model, state, 1.0, DT, limits="stop", events=[kd.Lock(0.5, "lift")])
    outside = model.set_joint(state, "lift", displacements=[0.7])
    with pytest.raises(
        kd.ModelError, match=r"'lift' starts at 0.7, outside its limits \[-0.5, 0.5\]"
    ):
        kd.simulate(model, outside, 1.0, DT, limits="stop")
    with pytest.raises(kd.ModelError, match=r"limits must be one of 'warn', 'stop', 'ignore'"):
        kd.simulate(model, state, 1.0, DT, limits="clamp")
    # an adaptive run is still told of the crossing
    with pytest.warns(JointLimitWarning, match="'lift'"):
        traj = kd.simulate(model, state, 1.0, 0.01, method="RK45")
    assert traj.limit_crossings[0].t == pytest.approx(np.sqrt(2 * 0.5 / G), abs=1e-4)


def test_energy_momentum_stop_is_refused_on_a_model_with_loops():
    """The energy-momentum scheme sets a stopped joint back through the tree's
    coordinates, which would open the loops: refused, saying why (RK4 and the adaptive
    methods take stops on loops: tests/test_loops_locks.py)."""
    base = kd.examples.four_bar()
    crank = kd.JointLimits(lower=-1.0, upper=1.0)
    joints = [attrs.evolve(j, limits=crank) if j.name == "crank" else j for j in base.joints]
    model = kd.Model(list(base.bodies), joints, gravity=tuple(base.gravity),
                     loops=list(base.loops), planar=True)  # fmt: skip
    state = model.initial_state()  # assembled at q = 0
    with pytest.raises(kd.ModelError, match=r"cannot act here: the energy-momentum scheme"):
        kd.simulate(model, state, 0.1, DT, method="energy-momentum", limits="stop")


# --------------------------------------------------------------------- adaptive stops
ADAPTIVE = [("RK45", "dense", "kane"), ("DOP853", "compiled", "msd"), ("RK45", "compiled", "kane")]


@pytest.mark.parametrize(("method", "engine", "formulation"), ADAPTIVE)
def test_adaptive_stop_locates_the_contact_and_holds(method, engine, formulation):
    """Free fall from rest reaches the bound 0.5 m below at t = √(2 d / g) (the event is
    located on the solver's dense output, not at a step boundary); the block stays on
    it at rest afterwards (a plastic impact: all of ½ m v² is lost)."""
    model = slider()
    traj = kd.simulate(model, model.initial_state(), 1.0, 0.01, method=method, engine=engine,
                       formulation=formulation, limits="stop")  # fmt: skip
    t_hit = np.sqrt(2 * (0 - LOWER) / G)
    (crossing,) = traj.limit_crossings
    assert (crossing.joint, crossing.bound, crossing.limit) == ("lift", "lower", LOWER)
    assert crossing.t == pytest.approx(t_hit, abs=1e-8)
    z, v = traj.q[:, 0], traj.u[:, 0]
    before = traj.t < t_hit
    np.testing.assert_allclose(z[before], -0.5 * G * traj.t[before] ** 2, rtol=0, atol=1e-8)
    after = traj.t > t_hit
    np.testing.assert_allclose(z[after], LOWER, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v[after], 0.0, rtol=0, atol=1e-12)
    assert np.all(np.diff(traj.t) > 0) and traj.t[-1] == 1.0


@pytest.mark.parametrize(("method", "engine", "formulation"), ADAPTIVE)
def test_adaptive_stop_releases_when_a_spring_pulls_back(method, engine, formulation):
    """k = 30 N/m: the block reaches the stop at -c + c cos ωt = -0.5 m, stops there
    (plastic), and the spring pulls it off at once: from rest at -0.5 m it swings as
    -c + (LOWER + c) cos ω(t - t_hit), up to -0.154 m and back to the stop one period
    later, where it arrives at rest."""
    k = 30.0
    w, c = np.sqrt(k), G / k
    model = slider(stiffness=k)
    traj = kd.simulate(model, model.initial_state(), 1.4, 0.005, method=method,
                       engine=engine, formulation=formulation, limits="stop")  # fmt: skip
    t_hit = np.arccos((LOWER + c) / c) / w
    assert traj.limit_crossings[0].t == pytest.approx(t_hit, abs=1e-8)
    z = traj.q[:, 0]
    assert np.all(z >= LOWER - 1e-12)
    free = traj.t < t_hit
    np.testing.assert_allclose(z[free], -c + c * np.cos(w * traj.t[free]), rtol=0, atol=1e-8)
    swing = traj.t > t_hit
    expected = -c + (LOWER + c) * np.cos(w * (traj.t[swing] - t_hit))
    np.testing.assert_allclose(z[swing], expected, rtol=0, atol=1e-7)


def lift_and_arm(m1=1.0, m2=0.5, l=0.3, Iyy=0.01):
    """A block on a vertical slide (limits ±0.5 m) carrying an arm on a hinge about y,
    the arm's centre of mass ``l`` out along its x axis."""
    hub = kd.Body("block", mass=m1, inertia=kd.inertia_tensor(0.1, 0.1, 0.1))
    arm = kd.Body("arm", mass=m2, inertia=kd.inertia_tensor(0.001, Iyy, Iyy), com=(l, 0, 0))
    return kd.Model(
        [hub, arm],
        [kd.Joint.prismatic("lift", None, "block", axis=3,
                            limits=kd.JointLimits(lower=LOWER, upper=UPPER)),
         kd.Joint.revolute("hinge", "block", "arm", axis=2)],
        gravity=(0.0, 0.0, -G),
    )  # fmt: skip


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_adaptive_stop_is_a_plastic_impact_of_the_chain(method):
    """The block and a tilted arm fall freely (no relative motion in uniform gravity),
    so the impact comes at t = √(2 d / g) with ż⁻ = -g t, θ̇⁻ = 0. Locking the slide keeps
    the hinge's generalized momentum p_θ = M_θz ż + M_θθ θ̇, with (written here by hand)
    M = [[m1 + m2, ±m2 l cos θ], [±m2 l cos θ, m2 l² + I_yy]]: θ̇⁺ = ±m2 l cos θ ż⁻ / M_θθ,
    and the energy lost is the Carnot loss ½ ż⁻² / (M⁻¹)_zz."""
    m1, m2, l, Iyy, theta0 = 1.0, 0.5, 0.3, 0.01, 0.4
    model = lift_and_arm(m1, m2, l, Iyy)
    state = model.set_joint(model.initial_state(), "hinge", angles=[theta0])
    traj = kd.simulate(model, state, 0.4, 0.001, method=method, limits="stop")
    t_hit = np.sqrt(2 * 0.5 / G)
    assert traj.limit_crossings[0].t == pytest.approx(t_hit, abs=1e-8)
    iz, ith = model.speeds("lift")[0], model.speeds("hinge")[0]
    # the first output after the impact, close enough to it that gravity did little
    k = int(np.argmax(traj.t > t_hit))
    assert traj.t[k] - t_hit < 1e-3
    zdot_minus = -G * t_hit
    M = np.array([[m1 + m2, m2 * l * np.cos(theta0)],
                  [m2 * l * np.cos(theta0), m2 * l**2 + Iyy]])  # fmt: skip
    thetadot_plus = M[0, 1] * zdot_minus / M[1, 1]
    assert traj.u[k, iz] == 0.0
    dt_after = traj.t[k] - t_hit  # the arm's angular acceleration acts for dt_after
    assert abs(traj.u[k, ith]) == pytest.approx(abs(thetadot_plus), abs=30 * dt_after)
    T_minus = 0.5 * M[0, 0] * zdot_minus**2
    T_plus = T_minus - 0.5 * zdot_minus**2 / np.linalg.inv(M)[0, 0]  # Carnot's loss
    # the run's own kinetic energy at the same output agrees with the hand-written one
    theta_k = traj.q[k, model.coordinates("hinge")[0]]
    Mk = np.array([[m1 + m2, m2 * l * np.cos(theta_k)],
                   [m2 * l * np.cos(theta_k), m2 * l**2 + Iyy]])  # fmt: skip
    u = traj.u[k, [iz, ith]]
    kinetic = float(kd.kinetic_energy(model, kd.State(traj.q[k], traj.u[k])))
    assert kinetic == pytest.approx(0.5 * abs(u @ Mk @ u), rel=1e-9)
    assert kinetic == pytest.approx(T_plus, rel=1e-2)


def test_adaptive_and_rk4_stops_agree_at_small_steps():
    """The same impact and swing of the block and arm by RK4 at dt = 1e-4 (the stop
    acting at the step boundary after the crossing) and by DOP853 (at the located
    crossing): the two differ by O(dt)."""
    model = lift_and_arm()
    state = model.set_joint(model.initial_state(), "hinge", angles=[0.4])
    rk4 = kd.simulate(model, state, 0.6, 1e-4, output_every=0.01, limits="stop")
    ivp = kd.simulate(model, state, 0.6, 0.01, method="DOP853", limits="stop")
    assert rk4.limit_crossings[0].t == pytest.approx(ivp.limit_crossings[0].t, abs=1e-4)
    np.testing.assert_allclose(ivp.t, rk4.t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ivp.q, rk4.q, rtol=0, atol=2e-3)
    np.testing.assert_allclose(ivp.u, rk4.u, rtol=0, atol=2e-2)


def test_stop_after_an_unlock_event_elsewhere():
    """Events on other joints keep working beside the stops: a hinge locked, then freed."""
    model = lift_and_arm(m1=1.0, m2=0.2, l=0.2, Iyy=0.01)
    traj = kd.simulate(model, model.initial_state(), 1.0, DT, limits="stop",
                       events=[kd.Lock(0.0, "hinge"), kd.Unlock(0.6, "hinge")])  # fmt: skip
    z = traj.q[:, model.coordinates("lift")[0]]
    hinge = traj.u[:, model.speeds("hinge")[0]]
    assert np.all(z >= LOWER - 1e-12)
    # locked hinge: the pair falls as one body and stops at the bound
    t_hit = np.sqrt(2 * 0.5 / G)
    assert traj.limit_crossings[0].t == pytest.approx(np.ceil(t_hit / DT) * DT)
    np.testing.assert_allclose(hinge[traj.t < 0.6 - DT], 0.0, atol=1e-12)
    # freed at 0.6 s on the held block, the arm swings down under gravity
    assert np.max(np.abs(hinge[traj.t > 0.7])) > 0.1


def test_urdf_slider_with_limits(tmp_path):
    """The shipped three-link arm's slider (limits 0-0.5 m) under gravity: without stops
    it falls out of its range (reported); with them it stays in it."""
    path = kd.examples.path("arm3.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = read_urdf(path)
    (slide,) = [j.name for j in model.joints if j.trn_dof == 1]
    lim = model.joint(slide).limits
    assert (lim.lower, lim.upper) == (0.0, 0.5)
    with pytest.warns(JointLimitWarning, match=f"'{slide}' past its (lower|upper) limit"):
        traj = kd.simulate(model, model.initial_state(), 2.0, 1e-3)
    d = traj.q[:, model.coordinates(slide)[0]]
    (crossing,) = traj.limit_crossings
    i = np.argmax((d < 0.0) | (d > 0.5))  # the first output out of the range
    assert traj.t[i - 1] <= crossing.t <= traj.t[i]
    assert d.min() < -0.1 or d.max() > 0.6
    traj = quiet_run(model, t_final=2.0, dt=1e-3, limits="stop")
    d = traj.q[:, model.coordinates(slide)[0]]
    assert d.min() >= -1e-12 and d.max() <= 0.5 + 1e-12


# --------------------------------------------------------------------- command line
def test_cli_check_lists_the_limits(capsys):
    from kanedyn.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        assert main(["check", str(kd.examples.path("arm3.urdf"))]) == 0
    out = capsys.readouterr().out
    assert "joint 'slide' limits: range 0 to 0.5 m (a run warns when it is crossed" in out
    assert "effort 100 N, speed 1 m/s (not enforced)" in out


def test_cli_simulate_reports_the_crossing(tmp_path, capsys):
    """The slider of the shipped arm leaves its range: the summary (printed and in
    summary.json) names it and the first time, and a warning says so."""
    import json

    from kanedyn.cli import main

    path = kd.examples.path("arm3.urdf")
    args = ["simulate", str(path), "--t-final", "2", "--dt", "0.001", "--output-every", "0.001"]
    assert main([*args, "--quiet", "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["joint_limits"] == "warn"
    (crossing,) = summary["limit_crossings"]
    assert (crossing["joint"], crossing["limit"]) in (("slide", 0.0), ("slide", 0.5))
    # the same run through the API gives the same crossing (outputs every step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = read_urdf(path)
    traj = quiet_run(model, t_final=2.0, dt=1e-3)
    assert crossing["t_s"] == pytest.approx(traj.limit_crossings[0].t, rel=1e-9)
    assert f"joint limits: crossed (not enforced): 'slide' {crossing['bound']}" in captured.out
    assert "kanedyn: warning: joint limits crossed" in captured.err


def test_cli_simulate_limits_stop_holds_the_slider_in_its_range(tmp_path):
    """``--limits stop``: the shipped arm's slider, which leaves its 0-0.5 m range under
    ``warn``, stays within it (to the stop's tolerance), and the summary says so."""
    import json

    from kanedyn.cli import main

    path = kd.examples.path("arm3.urdf")
    args = ["simulate", str(path), "--t-final", "2", "--dt", "0.001", "--output-every", "0.01"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*args, "--quiet", "--limits", "stop", "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["joint_limits"] == "stop" and summary["limit_crossings"]
    data = np.load(tmp_path / "o" / "trajectory.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = read_urdf(path)
    d = data["q"][:, model.coordinates("slide")[0]]
    assert d.min() >= -1e-9 and d.max() <= 0.5 + 1e-9
