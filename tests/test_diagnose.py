"""Run options, divergence diagnosis, step-size warnings, partial results and streaming
(kanedyn.simulation.diagnose and kanedyn.simulation.output), checked against closed forms:
a torsion spring on a revolute joint is the harmonic oscillator θ'' = -(k/I) θ."""

import json
import math
import warnings

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.simulation.diagnose import (
    Modes,
    StepSizeWarning,
    motion_rates,
    run_defaults,
    suggest_step,
)
from kanedyn.simulation.integrate import linear_modes
from kanedyn.simulation.output import strict_json


def oscillator(k: float, I: float) -> tuple[kd.Model, kd.State]:
    """A body spinning about its mass centre on a revolute joint with a torsion spring
    ``k``: ``ω = sqrt(k / I)``, energy ``½ I θ'² + ½ k θ²``."""
    body = kd.Body("rotor", mass=1.0, inertia=np.diag([I, I, I]))
    model = kd.Model([body], [kd.Joint.revolute("pivot", None, "rotor", axis=3, stiffness=k)])
    return model, model.set_joint(model.initial_state(), "pivot", angles=[0.1])


def rk4_energy_ratio(omega: float, dt: float, steps: int) -> float:
    """RK4 multiplies the amplitude of e^{iωt} by |R(iωΔt)| per step (closed form)."""
    z = 1j * omega * dt
    R = 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24
    return abs(R) ** (2 * steps)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
@pytest.mark.parametrize("engine", ["compiled", "dense"])
def test_fastest_mode_is_the_spring_frequency(formulation, engine):
    model, state = oscillator(k=400.0, I=4.0)
    modes = linear_modes(model, state, formulation=formulation, engine=engine)
    assert modes.fastest_rate == pytest.approx(10.0, rel=1e-6)  # sqrt(400 / 4)
    assert modes.period == pytest.approx(2 * math.pi / 10.0, rel=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dt": 0.0}, "dt must be positive"),
        ({"dt": -1.0}, "dt must be positive"),
        ({"dt": math.nan}, "dt must be a finite number"),
        ({"t_final": -1.0}, "t_final must be non-negative"),
        ({"t_final": math.nan}, "t_final must be a finite number"),
        ({"t_final": math.inf}, "t_final must be a finite number"),
        ({"output_every": 0.0}, "output_every must be positive"),
        ({"output_every": math.nan}, "output_every must be positive"),
        ({"output_every": 0.015}, "is not a positive multiple of dt"),
        ({"t_final": 1e13, "dt": 1.0}, "more than the available memory"),
    ],
)
def test_bad_run_options_are_refused_before_any_work(kwargs, message):
    model, state = oscillator(k=1.0, I=1.0)
    calls = []
    args = {"t_final": 1.0, "dt": 0.01, **kwargs}
    with pytest.raises(kd.ModelError, match=message):
        kd.simulate(model, state, args.pop("t_final"), args.pop("dt"), **args,
                    loads=lambda *a: calls.append(a) or [])  # fmt: skip
    assert not calls  # no right-hand side was evaluated


def test_adaptive_run_of_zero_length_returns_the_initial_state():
    model, state = oscillator(k=1.0, I=1.0)
    traj = kd.simulate(model, state, 0.0, 0.1, method="DOP853")
    assert traj.t.tolist() == [0.0] and np.array_equal(traj.q[0], state.q)


@pytest.mark.parametrize("engine", ["compiled", "dense"])
def test_diverging_run_names_time_quantity_cause_and_keeps_the_outputs(engine):
    omega = 10.0
    model, state = oscillator(k=100.0, I=1.0)
    dt = 0.5  # |λ| dt = 5 > 2√2: outside RK4's stability interval
    with pytest.warns(StepSizeWarning, match="is unstable for RK4"):
        with pytest.raises(kd.SimulationError) as info:
            kd.simulate(model, state, 1000.0, dt, engine=engine, output_every=1.0, force=True)
    message = str(info.value)
    t_fail = float(message.split("t = ")[1].split(":")[0])
    assert 0.0 < t_fail < 1000.0
    assert "pivot.w0" in message or "pivot.angle0" in message  # the quantity, by name
    assert "the step may be too large for this model's fastest mode" in message
    assert "gimbal" not in message  # there is no gimbal in this model
    period = 2 * math.pi / omega
    suggested = float(message.split("try a step of ")[1].split(" s")[0])
    assert period / 200 < suggested <= period / 20
    traj = info.value.trajectory
    assert traj.status == "diverged" and traj.t[-1] < t_fail
    assert np.array_equal(traj.t, np.arange(len(traj.t)) * 1.0)
    assert traj.steps == round(t_fail / dt) - 1  # every step before the failing one
    # what was recorded is the oscillator's state: θ grows as |R(5i)|^n from 0.1
    growth = abs(1 + 5j + (5j) ** 2 / 2 + (5j) ** 3 / 6 + (5j) ** 4 / 24)
    n = int(traj.t[-1] / dt)
    amplitude = np.hypot(traj.q[-1, 0], traj.u[-1, 0] / omega)
    assert amplitude == pytest.approx(0.1 * growth**n, rel=1e-6)


@pytest.mark.parametrize("dt", [1e-3, 5e-4])
def test_stiff_step_warning_predicts_the_energy_that_rk4_drains(dt):
    """k = 1e4, I = 0.01: ω = 1000 rad/s. RK4 drains the energy to |R(iωΔt)|^(2n) of its
    start (closed form): with dt = 1e-3 nearly all of it, with dt = 5e-4 about a fifth;
    the warning says so before the run."""
    model, state = oscillator(k=1e4, I=0.01)
    steps = 1000
    with pytest.warns(StepSizeWarning, match="loses about") as record:
        traj = kd.simulate(model, state, steps * dt, dt)
    E = traj.total_energy
    expected = rk4_energy_ratio(1000.0, dt, steps)
    assert E[-1] / E[0] == pytest.approx(expected, rel=1e-6)
    said = float(str(record[0].message).split("loses about ")[1].split(" %")[0])
    assert said == pytest.approx(100 * (1 - expected), rel=2e-3)
    assert f"{suggest_step(2 * math.pi / 1000.0):g} s or less" in str(record[0].message)


def test_no_step_warning_when_the_step_resolves_the_motion():
    model, state = oscillator(k=1e4, I=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepSizeWarning)
        kd.simulate(model, state, 0.1, 1e-5, output_every=1e-3)
        explorer = kd.examples.explorer1()
        kd.simulate(explorer, kd.examples.explorer1_state(explorer), 100.0, 1.0)


def test_interrupted_run_keeps_the_outputs_so_far():
    model, state = oscillator(k=1.0, I=1.0)

    def stop_at_5(t, model, state, kin):
        if t > 5.0:
            raise KeyboardInterrupt
        return []

    with pytest.raises(kd.SimulationInterrupted) as info:
        kd.simulate(model, state, 100.0, 0.01, loads=stop_at_5, output_every=0.5)
    assert isinstance(info.value, KeyboardInterrupt)
    traj = info.value.trajectory
    assert traj.status == "interrupted" and 4.5 <= traj.t[-1] <= 5.0
    # the recorded part is the oscillator's exact motion θ = 0.1 cos t to RK4 accuracy
    np.testing.assert_allclose(traj.q[:, 0], 0.1 * np.cos(traj.t), atol=1e-9)


@pytest.mark.parametrize(
    ("formulation", "method", "engine"),
    [("kane", "rk4", "compiled"), ("msd", "rk4", "compiled"), ("kane", "rk4", "dense"),
     ("msd", "DOP853", "dense")],
)  # fmt: skip
def test_stream_receives_every_output_in_order(formulation, method, engine):
    model = kd.examples.hub_with_panels()
    state = model.set_joint(model.initial_state(), model.joints[0].name, rates=(0.1, 0.2, 0.3))
    got = []
    traj = kd.simulate(model, state, 30.0, 0.01, output_every=0.1, formulation=formulation,
                       method=method, engine=engine,
                       stream=lambda t, q, u: got.append((t, q.copy(), u.copy())))  # fmt: skip
    assert len(got) > 1  # in blocks, while the run goes
    assert np.concatenate([g[0] for g in got]).tolist() == traj.t.tolist()
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), traj.q)
    np.testing.assert_allclose(np.concatenate([g[2] for g in got]), traj.u, rtol=0, atol=1e-12)


def test_adaptive_progress_is_reported_and_ends_once(capsys):
    model, state = oscillator(k=1.0, I=1.0)
    kd.simulate(model, state, 10.0, 0.1, method="RK45", progress=True)
    err = capsys.readouterr().err
    assert "100.0%" in err or "100%" in err
    assert err.count("100.0%") <= 1 and err.endswith("\n")


def test_rk4_progress_ends_once(capsys):
    model, state = oscillator(k=1.0, I=1.0)
    kd.simulate(model, state, 40.0, 0.01, progress=True)  # 4000 steps, a multiple of 200
    err = capsys.readouterr().err
    assert err.count("step 4000/4000") <= 1 and err.count("\n") == 1


def test_strict_json_has_no_nan():
    text = strict_json({"a": math.nan, "b": [1.0, math.inf], "c": {"d": -math.inf}})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {
        "a": None, "b": [1.0, None], "c": {"d": None}
    }  # fmt: skip


def test_csv_names_with_commas_quotes_and_newlines_keep_their_columns(tmp_path):
    import csv

    odd = 'arm, "left"\nside'
    model = kd.Model([kd.Body(odd, 1.0, np.eye(3))], [kd.Joint.revolute(f"j{odd}", None, odd)])
    traj = kd.simulate(model, model.initial_state(), 0.1, 0.01)
    traj.to_csv(tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][1] == f"j{odd}.angle0 [rad]" and rows[0][2] == f"j{odd}.w0 [rad/s]"
    assert {len(r) for r in rows} == {len(rows[0])} and len(rows) == 1 + traj.t.size


def test_batched_histories_equal_the_per_state_functions():
    """The trajectory's energies and momenta, computed for blocks of states at once, equal
    kd.kinetic_energy, the potential energy and kd.momentum of each state (a model with
    every joint kind, springs on spherical joints included)."""
    from kanedyn.dynamics.kane import potential_energy
    from kanedyn.simulation.output import derived_histories
    from tests.io.test_toml import every_kind, random_state

    model, rng = every_kind(), np.random.default_rng(1)
    states = [random_state(model, rng) for _ in range(7)]
    T, V, P, H = derived_histories(
        model, np.array([s.q for s in states]), np.array([s.u for s in states])
    )
    for k, s in enumerate(states):
        p, h = kd.momentum(model, s)
        assert T[k] == pytest.approx(kd.kinetic_energy(model, s), rel=1e-13)
        assert V[k] == pytest.approx(potential_energy(model, s), rel=1e-13)
        np.testing.assert_allclose(P[k], p, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(H[k], h, rtol=1e-13, atol=1e-13)


def test_a_state_with_infinite_energy_is_refused_before_the_run():
    model, _ = oscillator(k=1.0, I=1.0)
    state = model.set_joint(model.initial_state(), "pivot", rates=[1e200])
    with pytest.raises(kd.ModelError, match=r"initial energy is not finite \(kinetic inf J"):
        kd.simulate(model, state, 1.0, 0.01)


# ----------------------------------------------------------- defaults of a run (run_defaults)
@pytest.mark.parametrize(("k", "I"), [(400.0, 4.0), (0.2, 8.0), (1e4, 1.0)])
def test_run_defaults_resolve_the_spring_period(k, I):
    """Against the closed-form period 2π sqrt(I/k): 10 periods (at least 10 s), 100 steps
    and about 20 outputs a period, at least 20 outputs a run."""
    model, state = oscillator(k=k, I=I)
    period = 2 * math.pi * math.sqrt(I / k)
    t_final, dt, every = run_defaults(linear_modes(model, state), motion_rates(model, state))
    assert t_final >= max(10.0, 10 * period) and t_final <= 1.1 * max(10.0, 10 * period)
    assert period / dt >= 100 and t_final / dt >= 1000
    assert t_final / every >= 20 and period / every >= 10
    assert math.isclose(every / dt, round(every / dt), rel_tol=1e-9)


def test_run_defaults_keep_given_values_and_follow_a_growing_mode():
    modes = Modes(np.array([1e-3 + 0.1j, 1e-3 - 0.1j]))  # grows by e over 1000 s
    t_final, dt, every = run_defaults(modes)
    assert t_final == pytest.approx(10_000.0)  # 10 e-folding times
    assert run_defaults(modes, t_final=5.0, dt=0.5, output_every=1.0) == (5.0, 0.5, 1.0)
    t, dt, every = run_defaults(modes, t_final=5.0)
    assert t == 5.0 and 5.0 / every >= 20 and dt <= every
    assert run_defaults(None) == (10.0, 0.01, 0.5)  # no time scale: 10 s, 21 outputs


def test_motion_rates_leave_out_a_wheel_and_see_a_pendulum_released_level():
    hub = kd.Body("hub", mass=10.0, inertia=np.diag([1.0, 2.0, 3.0]))
    wheel = kd.Body("wheel", mass=1.0, inertia=np.diag([0.01, 0.01, 0.02]), com=(0, 0, 0.1))
    flap = kd.Body("flap", mass=1.0, inertia=np.diag([0.01, 0.02, 0.03]))
    model = kd.Model([hub, wheel, flap], [
        kd.Joint.free("root", outer="hub"),
        kd.Joint.revolute("spin", "hub", "wheel", axis=3, outer_point=(0, 0, 0.1)),
        kd.Joint.revolute("hinge", "hub", "flap", axis=3),
    ])  # fmt: skip
    state = model.set_joint(model.initial_state(), "spin", rates=[300.0])
    state = model.set_joint(state, "hinge", rates=[0.5])
    rates = motion_rates(model, state)
    assert 300.0 not in rates and 0.5 in rates  # the symmetric wheel turns nothing visible
    # a rod of length l released level with its pivot: α = 3g / (2l) (closed form)
    rod = kd.Body("rod", mass=1.0, inertia=np.diag([1e-6, 1.0 / 12, 1.0 / 12]), com=(0.5, 0, 0))
    pendulum = kd.Model([rod], [kd.Joint.revolute("pivot", None, "rod", axis=2)],
                        gravity=(0, 0, -9.81))  # fmt: skip
    rates = motion_rates(pendulum, pendulum.initial_state())
    assert max(rates) == pytest.approx(math.sqrt(3 * 9.81 / 2), rel=1e-3)


@pytest.mark.parametrize("engine", ["compiled", "dense"])
def test_an_unstable_step_is_refused_before_any_work_unless_forced(engine):
    """ω = 10 rad/s at dt = 0.5: RK4 multiplies the mode's energy by |R(5i)|² a step
    (closed form), so the run is refused with that factor and the suggested step."""
    model, state = oscillator(k=100.0, I=1.0)
    calls = []
    with pytest.raises(kd.ModelError) as info:
        kd.simulate(model, state, 10.0, 0.5, engine=engine,
                    loads=lambda *a: calls.append(a) or [])  # fmt: skip
    message = str(info.value)
    factor = abs(1 + 5j + (5j) ** 2 / 2 + (5j) ** 3 / 6 + (5j) ** 4 / 24) ** 2
    assert f"energy by {factor:.3g}" in message and "|λ| dt = 5" in message
    assert f"use a step of {suggest_step(2 * math.pi / 10.0):g} s or less" in message
    assert "force=True (--force)" in message
    assert calls and all(c[0] == 0.0 for c in calls)  # evaluated at t = 0 only: no step
    with pytest.warns(StepSizeWarning, match="is unstable for RK4"):
        traj = kd.simulate(model, state, 2.0, 0.5, engine=engine, force=True)
    E = traj.total_energy
    assert traj.steps == 4 and E[-1] / E[0] == pytest.approx(factor**4, rel=1e-9)


def test_a_single_huge_step_is_refused_not_completed():
    """dt > t_final: one step of t_final. On Explorer-1 (|λ| ≈ 0.15 rad/s) a step of
    20000 s is far outside RK4's stability region: refused twice over, and with force the
    energy gain that made the old run 'complete' is warned about."""
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    with pytest.raises(kd.ModelError, match=r"dt = 1e\+06 s is longer than the run"):
        kd.simulate(model, state, 20000.0, 1e6)
    with pytest.raises(kd.ModelError, match="dt = 20000 s is unstable for RK4"):
        kd.simulate(model, state, 20000.0, 20000.0)
    with pytest.warns(StepSizeWarning) as record:
        traj = kd.simulate(model, state, 20000.0, 1e6, force=True)
    said = " ".join(str(w.message) for w in record)
    assert "longer than the run" in said and "unstable for RK4" in said
    assert traj.steps == 1 and traj.t.tolist() == [0.0, 20000.0]


def test_a_zero_length_run_is_not_a_step_problem():
    model, state = oscillator(k=100.0, I=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepSizeWarning)
        traj = kd.simulate(model, state, 0.0, 0.5)
    assert traj.t.tolist() == [0.0] and traj.steps == 0


def test_drift_warning_suggests_a_smaller_step_than_the_one_given():
    """A slow mode over very many steps: the drift warning's suggested step is below dt
    (it never says 'dt = 0.001 s is too large ... try 1 s or less')."""
    from kanedyn.simulation.diagnose import Modes, step_report

    modes = Modes(np.array([0.5j, -0.5j]))  # period 4π s, step 0.1 s: |z| = 0.05
    report = step_report(modes, 0.1, 10**9)
    assert report is not None
    suggested = float(report.split("try a step of ")[1].split(" s")[0])
    assert suggested < 0.1
    # the suggestion meets the 10 % bound: RK4's energy error per step at ω dt is
    # |R(i ω dt)|² - 1 (closed form), over the same duration of 1e8 s
    n = int(round(0.1 * 10**9 / suggested))
    z = 0.5j * suggested
    ratio = abs(1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24)
    assert abs(n * math.log(ratio)) <= math.log(1.1)


def test_the_memory_estimate_covers_what_a_run_holds():
    """The peak of a run's allocations (tracemalloc: NumPy's arrays and Python's objects)
    is within the estimate that the memory check uses, and not far below it."""
    import tracemalloc

    from kanedyn.simulation.output import run_bytes

    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    kd.simulate(model, state, 1.0, 0.01)  # compiled once, outside the measurement
    for n in (2000, 20000):
        tracemalloc.start()
        try:
            traj = kd.simulate(model, state, n * 0.01, 0.01, output_every=0.01)
            traj.total_energy, traj.body("hub")  # the derived histories, as the CLI does
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        estimate = run_bytes(model, traj.t.size)
        assert peak <= estimate <= 2.0 * peak, (n, peak, estimate)


def test_a_long_run_allocates_nothing_per_step():
    """2e5 steps with 5 outputs: the run loops hold the outputs only (the old native
    loop held five arrays of the steps, ~50 bytes a step)."""
    import tracemalloc

    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    kd.simulate(model, state, 1.0, 0.01)
    tracemalloc.start()
    try:
        traj = kd.simulate(model, state, 2000.0, 0.01, output_every=500.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert traj.steps == 200_000 and traj.t.size == 5
    assert peak < 1e6  # 50 bytes a step would be 1e7


def test_a_run_that_cannot_fit_is_refused_with_the_numbers_and_remedies():
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    with pytest.raises(kd.ModelError) as info:
        kd.simulate(model, state, 1e7, 0.01)  # 1e9 outputs
    message = str(info.value)
    assert "1e+09 outputs" in message and "GB), more than the available memory" in message
    assert "output_every" in message and "shorter time" in message


def test_running_out_of_memory_anyway_is_a_kanedyn_error(monkeypatch):
    from kanedyn.simulation import output

    def full(self, t, x, locked):
        raise MemoryError

    monkeypatch.setattr(output.Recorder, "add", full)
    model, state = oscillator(k=1.0, I=1.0)
    with pytest.raises(kd.SimulationError, match="ran out of memory.*output_every"):
        kd.simulate(model, state, 1.0, 0.01)


def test_momentum_is_conserved_only_for_a_free_system_without_loads_or_gravity():
    from kanedyn.simulation.diagnose import momentum_varies

    explorer = kd.examples.explorer1()  # a free hub with hinged booms, no gravity
    assert momentum_varies(explorer) is None
    assert "applied loads" in momentum_varies(explorer, [kd.Torque("hub", (0, 0, 1.0))])
    assert "applied loads" in momentum_varies(explorer, lambda *a: [])
    import attrs

    assert "gravity" in momentum_varies(attrs.evolve(explorer, gravity=(0, 0, -9.81)))
    model, _ = oscillator(k=1.0, I=1.0)
    assert "root joint 'pivot' holds 'rotor' to N" in momentum_varies(model)
