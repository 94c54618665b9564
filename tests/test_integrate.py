"""Tests of kanedyn.simulate and Trajectory: argument checks, run-time errors, outputs,
and agreement between fixed-step RK4 and adaptive scipy methods."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kanedyn as kd
import kanedyn.simulation.system
from kanedyn.errors import ModelError, SimulationError
from kanedyn.simulation.run_loops import LOOPS
from kanedyn.simulation.run_plan import Loop
from tests.strategies import random_state, tree


def _model():
    model = tree([0, 1], ["free", "gimbal_slider", "spherical"], ["123", "231", "312"], seed=1,
                 springs=True, embedded=True, gravity=False)  # fmt: skip
    return model, random_state(model, np.random.default_rng(2))


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if simulate evaluates the dynamics or starts stepping."""

    def forbidden(*args, **kwargs):
        raise AssertionError("simulate did work before rejecting its arguments")

    monkeypatch.setattr(kanedyn.simulation.system, "kinematics_at", forbidden)
    for loop in Loop:
        monkeypatch.setitem(LOOPS, loop, forbidden)
    monkeypatch.setattr(kanedyn.simulation.system, "compile_model", forbidden)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(dt=0.0), "dt"),
        (dict(dt=-0.1), "dt"),
        (dict(dt=np.nan), "dt"),
        (dict(t_final=-1.0), "t_final"),
        (dict(t_final=np.inf), "t_final"),
        (dict(formulation="lagrange"), "formulation"),
        (dict(method="euler"), "method"),
        (dict(output_every=-1.0), "output_every"),
    ],
)
def test_bad_arguments_are_rejected_before_any_work(no_work, kwargs, match):
    model, state = _model()
    args = dict(t_final=1.0, dt=0.01, progress=False) | kwargs
    with pytest.raises(ModelError, match=match):
        kd.simulate(model, state, **args)


@pytest.mark.parametrize("where", ["q", "u"])
def test_non_finite_initial_state_is_rejected_before_any_work(no_work, where):
    model, state = _model()
    q, u = state.q.copy(), state.u.copy()
    (q if where == "q" else u)[0] = np.nan
    with pytest.raises(ModelError, match="non-finite"):
        kd.simulate(model, kd.State(q, u), 1.0, 0.01, progress=False)


def test_bad_load_name_is_rejected_before_stepping(monkeypatch):
    model, state = _model()

    def forbidden(*args, **kwargs):
        raise AssertionError("stepping started")

    for loop in Loop:
        monkeypatch.setitem(LOOPS, loop, forbidden)
    with pytest.raises(ModelError, match="ghost"):
        kd.simulate(model, state, 1.0, 0.01, loads=[kd.Torque("ghost", (1, 0, 0))],
                    progress=False)  # fmt: skip


def test_load_blowing_up_is_a_simulation_error_naming_the_time():
    """A callback load that grows without bound (finite, then overflowing) makes the
    state non-finite; the error names the time."""
    model = kd.examples.double_pendulum()

    def loads(t, model, state, kin):
        return [kd.Torque("link1", (0.0, 0.0, 1e308 if t >= 0.5 else 0.0))]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(SimulationError, match=r"t = 0\.[56]"):
            kd.simulate(model, model.initial_state(), 1.0, 0.1, loads=loads, progress=False)


@pytest.mark.parametrize("kind", ["torque", "joint"])
def test_loads_callback_producing_nan_is_a_simulation_error_naming_the_time(kind):
    model = kd.examples.double_pendulum()

    def loads(t, model, state, kin):
        value = np.nan if t >= 0.5 else 0.0
        if kind == "torque":
            return [kd.Torque("link1", (0.0, 0.0, value))]
        return [kd.JointLoad("joint1", (value,))]

    with pytest.raises(SimulationError, match=r"t = 0\.5"):
        kd.simulate(model, model.initial_state(), 1.0, 0.1, loads=loads, progress=False)


def _gimbal3(seq="123"):
    body = kd.Body("a", mass=1.0, inertia=kd.inertia_tensor(2.0, 2.0, 2.0))
    return kd.Model([body], [kd.Joint.gimbal("g3", None, "a", seq=seq, dof=3)])


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_state_at_gimbal_lock_is_a_simulation_error_naming_the_joint(formulation):
    model = _gimbal3()
    state = model.set_joint(model.initial_state(), "g3", angles=(0.0, np.pi / 2 - 5e-5, 0.0))
    with pytest.raises(SimulationError, match=r"(?s)'g3'.*spherical"):
        kd.simulate(model, state, 1.0, 0.01, formulation=formulation, progress=False)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_gimbal_driven_through_lock_is_a_simulation_error(formulation):
    """Isotropic body, torque-free, spinning about the gimbal's second axis: θ2 grows at
    1 rad/s from 1.4 and reaches π/2 at t ≈ 0.17."""
    model = _gimbal3()
    state = model.set_joint(model.initial_state(), "g3", angles=(0.0, 1.4, 0.0),
                            rates=(0.0, 1.0, 0.0))  # fmt: skip
    with pytest.raises(SimulationError, match=r"(?s)'g3'.*spherical"):
        kd.simulate(model, state, 1.0, 0.01, formulation=formulation, progress=False)


def test_gimbal_lock_inside_an_rk4_stage_is_a_simulation_error():
    body = kd.Body("a", mass=1.0, inertia=kd.inertia_tensor(2.0, 3.0, 4.0))
    model = kd.Model([body], [kd.Joint.gimbal("g3", None, "a", seq="123", dof=3)])
    state = model.set_joint(model.initial_state(), "g3", angles=(0.0, 1.4, 0.0),
                            rates=(0.3, 1.0, 0.2))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(SimulationError, match=r"(?s)'g3'.*spherical"):
            kd.simulate(model, state, 2.0, 0.01, progress=False)


# --------------------------------------------------------------------------- outputs
@pytest.fixture(scope="module")
def traj():
    model, state = _model()
    return kd.simulate(model, state, 1.0, 0.01, output_every=0.1, progress=False)


def test_output_every_spacing(traj):
    np.testing.assert_allclose(traj.t, np.arange(11) * 0.1, atol=1e-12)
    assert traj.q.shape == (11, traj.model.nq) and traj.u.shape == (11, traj.model.n)
    assert traj.steps == 100
    with pytest.raises(ModelError, match="multiple"):
        kd.simulate(traj.model, traj.state(0), 1.0, 0.01, output_every=0.015, progress=False)


def test_every_step_is_output_by_default():
    model, state = _model()
    tr = kd.simulate(model, state, 0.05, 0.01, progress=False)
    np.testing.assert_allclose(tr.t, [0, 0.01, 0.02, 0.03, 0.04, 0.05], atol=1e-12)


def test_to_csv_reads_back(traj, tmp_path):
    path = tmp_path / "traj.csv"
    traj.to_csv(path)
    header = path.read_text().splitlines()[0].split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    assert header[0] == "t [s]" and len(header) == data.shape[1]
    nq, n = traj.model.nq, traj.model.n
    # every column carries its unit: quaternion parts [1], angles [rad], slides [m], ...
    assert header[-8:] == ["kinetic_energy [J]", "potential_energy [J]", "Px [N s]",
                           "Py [N s]", "Pz [N s]", "Hx [N m s]", "Hy [N m s]", "Hz [N m s]"]  # fmt: skip
    assert all(h.endswith("]") and " [" in h for h in header)
    np.testing.assert_array_equal(data[:, 0], traj.t)
    np.testing.assert_array_equal(data[:, 1 : 1 + nq], traj.q)
    np.testing.assert_array_equal(data[:, 1 + nq : 1 + nq + n], traj.u)
    rest = data[:, 1 + nq + n :]
    np.testing.assert_array_equal(rest[:, 0], traj.kinetic_energy)
    np.testing.assert_array_equal(rest[:, 1], traj.potential_energy)
    np.testing.assert_array_equal(rest[:, 2:5], traj.linear_momentum)
    np.testing.assert_array_equal(rest[:, 5:8], traj.angular_momentum)


def test_to_npz_reads_back(traj, tmp_path):
    path = tmp_path / "traj.npz"
    traj.to_npz(path)
    with np.load(path) as z:
        for name in ("t", "q", "u", "kinetic_energy", "potential_energy"):
            np.testing.assert_array_equal(z[name], getattr(traj, name))
        np.testing.assert_array_equal(z["linear_momentum"], traj.linear_momentum)
        np.testing.assert_array_equal(z["angular_momentum"], traj.angular_momentum)
        assert z["coordinate_names"].size == traj.model.nq
        assert z["speed_names"].size == traj.model.n


def test_body_history_omega_in_body_axes(traj):
    for b in traj.model.bodies:
        hist = traj.body(b.name)
        for i in range(traj.t.size):
            kin = kd.kinematics(traj.model, traj.state(i))
            k = traj.model.body_index(b.name)
            np.testing.assert_allclose(hist.omega[i], kin.R_N_B[k].T @ kin.omega[k], atol=1e-14)
            np.testing.assert_allclose(hist.R_N_B[i], kin.R_N_B[k], atol=1e-15)
            np.testing.assert_allclose(hist.position[i], kin.r[k], atol=1e-15)


def test_energies_and_momenta_histories(traj):
    for i in (0, 5, 10):
        s = traj.state(i)
        assert traj.kinetic_energy[i] == pytest.approx(kd.kinetic_energy(traj.model, s), rel=1e-14)
        P, H = kd.momentum(traj.model, s)
        np.testing.assert_allclose(traj.linear_momentum[i], P, atol=1e-14)
        np.testing.assert_allclose(traj.angular_momentum[i], H, atol=1e-14)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_adaptive_agrees_with_small_step_rk4(formulation):
    model = tree([0, 1], ["hinge", "gimbal2", "slider1"], ["312", "231", "123"], seed=4,
                 springs=True, gravity=True)  # fmt: skip
    state = random_state(model, np.random.default_rng(5))
    a = kd.simulate(model, state, 1.0, 0.1, method="DOP853", rtol=1e-12, atol=1e-13,
                    formulation=formulation, progress=False)  # fmt: skip
    b = kd.simulate(model, state, 1.0, 0.002, output_every=0.1, formulation=formulation,
                    progress=False)  # fmt: skip
    np.testing.assert_allclose(a.t, b.t, atol=1e-12)
    np.testing.assert_allclose(a.q, b.q, atol=1e-9)
    np.testing.assert_allclose(a.u, b.u, atol=1e-9)
    assert a.method == "DOP853" and b.method == "rk4"


@pytest.mark.parametrize(("t_final", "dt"), [(0.3, 0.1), (0.7, 0.1), (0.3, 0.05)])
def test_adaptive_output_grid_that_rounds_past_t_final(t_final, dt):
    model = kd.examples.double_pendulum()
    state = model.set_joint(model.initial_state(), "joint0", angles=(0.3,))
    tr = kd.simulate(model, state, t_final, dt, method="DOP853", progress=False)
    assert tr.t[-1] == pytest.approx(t_final)


def test_zero_duration_returns_the_initial_state():
    model, state = _model()
    tr = kd.simulate(model, state, 0.0, 0.01, progress=False)
    np.testing.assert_array_equal(tr.q[-1], state.q)
    np.testing.assert_array_equal(tr.u[-1], state.u)
