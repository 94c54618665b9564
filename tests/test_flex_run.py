"""kd.simulate of models with flexible bodies (issue 29): the run against an RK4 loop
written here on kd.forward_dynamics, energy with strain energy, the outputs (modal
columns, node motion) and what the other engines refuse."""

import csv

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.errors import ModelError


def _hub_and_beam(stiffening=False):
    """A free hub (a 123 gimbal and three slides: q̇ = u) with a cantilever of
    two modes in each of two directions, welded off its centre and tilted."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=stiffening)
    root = kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3)
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    model = kd.Model([hub, beam], [root, arm])
    state = model.set_joint(model.initial_state(), "root", angles=(0.1, 0.2, 0.3),
                            rates=(0.4, -0.3, 0.8), displacement_rates=(0.1, 0.0, -0.2))  # fmt: skip
    state = model.set_modes(state, "beam", amplitudes=(0.02, -0.01, 0.015, 0.01),
                            rates=(0.1, -0.2, 0.05, 0.1))  # fmt: skip
    return model, state


def _pd(u):
    return -2.0 * np.asarray(u[:3])  # a rate damper on the hub's gimbal speeds [N m]


def _rk4_loop(model, state, dt, steps, damper=False):
    """Classic RK4 on x = (q, u) with q̇ = u (gimbal angles, slides and modes)."""
    m = state.q.size

    def f(x):
        s = kd.State(x[:m], x[m:])
        loads = [kd.JointLoad("root", np.r_[_pd(x[m:]), 0, 0, 0])] if damper else None
        return np.r_[x[m:], kd.forward_dynamics(model, s, loads)]

    x = np.r_[state.q, state.u]
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[:m], x[m:]


@pytest.fixture(scope="module")
def run():
    model, state = _hub_and_beam()
    return model, state, kd.simulate(model, state, 0.2, 4e-3, engine="dense")


@pytest.mark.parametrize("engine", ["dense", "auto"])
def test_simulate_is_rk4_on_forward_dynamics(run, engine):
    """Both engines' runs (the dense one and the compiled one that engine="auto" picks,
    the modal terms traced in the recursion) are RK4 on the dense kd.forward_dynamics."""
    model, state, traj = run
    if engine == "auto":
        traj = kd.simulate(model, state, 0.2, 4e-3)
        assert traj.engine != "dense"
    assert traj.q.shape == (51, model.nq + model.nf) and traj.u.shape == (51, model.n + model.nf)
    q, u = _rk4_loop(model, state, 4e-3, 50)
    np.testing.assert_allclose(traj.q[-1], q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj.u[-1], u, rtol=0, atol=1e-12)


def test_simulate_with_state_dependent_loads_and_an_adaptive_method():
    model, state = _hub_and_beam()

    def damper(t, model, s, kin):
        assert s.u.shape == (model.n + model.nf,)  # the loads see the modal speeds too
        return [kd.JointLoad("root", np.r_[_pd(s.u), 0, 0, 0])]

    traj = kd.simulate(model, state, 0.06, 0.03, method="DOP853", loads=damper,
                       rtol=1e-10, atol=1e-12)  # fmt: skip
    q, u = _rk4_loop(model, state, 1e-3, 60, damper=True)  # RK4's error: ~1e-8
    np.testing.assert_allclose(traj.q[-1], q, rtol=0, atol=5e-8)
    np.testing.assert_allclose(traj.u[-1], u, rtol=0, atol=5e-8)


def test_simulate_conserves_energy_with_strain_energy(run):
    """Torque-free and undamped: the trajectory's energy (kinetic energy of the elastic
    motion and strain energy included) and H are conserved to RK4's accuracy (about
    1e-7 at dt = 4 ms: tests/test_flex.py)."""
    model, state, traj = run
    E = traj.total_energy
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < 1e-6
    # the strain energy is part of it: it changes along the run by far more than the drift
    K = model.body("beam").modes.stiffness
    eta = traj.modal("beam")[0]
    Ve = 0.5 * np.einsum("ti,ij,tj->t", eta, K, eta)
    assert np.ptp(Ve) > 1e3 * np.max(np.abs(E - E[0]))
    H = traj.angular_momentum
    assert np.max(np.abs(H - H[0])) < 1e-6 * np.abs(H[0]).max()


def test_trajectory_modal_columns_csv_and_npz(run, tmp_path):
    model, state, traj = run
    path = tmp_path / "run.csv"
    traj.to_csv(path)
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    joints_q = [f"root.angle{i} [rad]" for i in range(3)] + [f"root.d{i} [m]" for i in range(3)]
    joints_u = [f"root.w{i} [rad/s]" for i in range(3)] + [f"root.s{i} [m/s]" for i in range(3)]
    modes = ["beam.y1", "beam.y2", "beam.z1", "beam.z2"]
    assert header[: 1 + 6 + 4 + 6 + 4] == [
        "t [s]", *joints_q, *(f"{m} [1]" for m in modes),
        *joints_u, *(f"{m}_dot [1/s]" for m in modes),
    ]  # fmt: skip
    assert header[21:] == ["kinetic_energy [J]", "potential_energy [J]", "Px [N s]", "Py [N s]",
                           "Pz [N s]", "Hx [N m s]", "Hy [N m s]", "Hz [N m s]"]  # fmt: skip
    data = np.array(rows[1:], dtype=float)
    # the initial modal state given to set_modes is the first row's modal columns
    np.testing.assert_array_equal(data[0, 7:11], [0.02, -0.01, 0.015, 0.01])
    np.testing.assert_array_equal(data[0, 17:21], [0.1, -0.2, 0.05, 0.1])
    eta, xi = traj.modal("beam")
    np.testing.assert_array_equal(data[:, 7:11], eta)
    np.testing.assert_array_equal(data[:, 17:21], xi)
    traj.to_npz(tmp_path / "run.npz")
    with np.load(tmp_path / "run.npz") as z:
        assert list(z["coordinate_names"][6:]) == modes
        assert list(z["speed_names"][6:]) == [f"{m}_dot" for m in modes]


def test_trajectory_node_displacement(run):
    model, state, traj = run
    md = model.body("beam").modes
    tip = md.node_names[-1]
    nodes = traj.node("beam", tip)
    R = traj.body("beam").R_N_B
    eta = traj.modal("beam")[0]
    np.testing.assert_allclose(
        nodes.displacement, np.einsum("tij,jm,tm->ti", R, md.Psi[-1], eta), atol=1e-15
    )
    with pytest.raises(ModelError, match="'hub' is not flexible"):
        traj.node("hub", tip)


def test_set_modes_and_set_joint_keep_each_other():
    model, state = _hub_and_beam()
    np.testing.assert_array_equal(state.q[6:], [0.02, -0.01, 0.015, 0.01])
    np.testing.assert_array_equal(state.u[6:], [0.1, -0.2, 0.05, 0.1])
    moved = model.set_joint(state, "root", angles=(0.0, 0.0, 0.0))
    np.testing.assert_array_equal(moved.q[6:], state.q[6:])
    np.testing.assert_array_equal(moved.u, state.u)
    with pytest.raises(ModelError, match="body 'beam': modal amplitudes needs 4 values"):
        model.set_modes(state, "beam", amplitudes=(1.0, 2.0))
    with pytest.raises(ModelError, match="body 'hub' is not flexible"):
        model.set_modes(state, "hub", amplitudes=(1.0,))
    with pytest.raises(ModelError, match="non-finite"):
        model.set_modes(state, "beam", rates=(np.nan, 0, 0, 0))
    assert model.nq_total == model.nq + 4 and model.n_total == model.n + 4


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (
            {"events": [kd.Lock(0.05, "root")], "method": "energy-momentum"},
            "method='energy-momentum' with lock events",
        ),
    ],
)
def test_what_cannot_run_a_flexible_model_says_why(options, reason):
    model, state = _hub_and_beam()
    with pytest.raises(ModelError, match=reason):
        kd.simulate(model, state, 0.1, 0.01, **options)


def test_a_rigid_sized_state_of_a_flexible_model_is_refused():
    model, _ = _hub_and_beam()
    with pytest.raises(ModelError, match=r"state.q has length 6; this model has nq \+ nf = 6 \+ 4"):
        kd.simulate(model, kd.State(np.zeros(6), np.zeros(6)), 0.1, 0.01)
    with pytest.raises(ModelError, match="flexible bodies"):  # a rigid-only function
        kd.inverse_dynamics(model, model.initial_state(), np.zeros(10))


def test_plot_has_a_modal_panel_with_the_cantilever_vibration():
    """A cantilever clamped to N, one mode, released from η0: the panel's line is
    η0 cos(ωt) with Euler–Bernoulli's ω = (1.8751)² √(EI / (ρ ℓ⁴))."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from kanedyn.plotting import plot_run

    ell, rho, EI = 2.0, 1.5, 30.0
    beam = kd.beam_body("arm", ell, rho, EI, n_modes=1, directions=(1,))
    model = kd.Model([beam], [kd.Joint.weld("clamp", None, "arm")])
    state = model.set_modes(model.initial_state(), "arm", amplitudes=[0.01])
    w = 1.87510407**2 * np.sqrt(EI / (rho * ell**4))
    traj = kd.simulate(model, state, 0.4, 1e-2, progress=False)
    fig = plot_run(traj)
    ax = next(a for a in fig.axes if a.get_title() == "Modal coordinates")
    (line,) = ax.get_lines()
    assert line.get_label() == "arm.y1"
    np.testing.assert_allclose(line.get_ydata(), 0.01 * np.cos(w * traj.t), atol=1e-6 * 0.01)


def test_flexible_spacecraft_example():
    """The arrays' first bending frequency is Euler–Bernoulli's
    1.8751² √(EI / (ρ ℓ⁴)); the rigid twin has the same mass properties and no modes."""
    case = kd.examples.flexible_spacecraft(length=4.0, mass_per_length=2.5, EI=250.0)
    rigid = kd.examples.flexible_spacecraft(flexible=False, length=4.0, mass_per_length=2.5)
    assert case.model.nf == 4 and rigid.model.nf == 0
    w = 1.87510407**2 * np.sqrt(250.0 / (2.5 * 4.0**4))
    for side in ("left", "right"):
        md = case.model.body(f"array_{side}").modes
        np.testing.assert_allclose(md.frequencies, [w, w], rtol=1e-6)
    m_f, c_f, I_f = kd.system_mass_properties(rigid.model, rigid.state)
    assert m_f == pytest.approx(300.0 + 2 * 10.0)
    np.testing.assert_allclose(c_f, 0.0, atol=1e-12)  # the arrays point out on both sides
    # the left array points along -x: its mass centre is 0.8 + 2 m out on -x
    kin = kd.kinematics(case.model, case.state)
    np.testing.assert_allclose(kin.r[case.model.body_index("array_left")], [-2.8, 0, 0],
                               atol=1e-12)  # fmt: skip


def test_quaternion_pd_without_wheels_is_a_body_torque():
    """Hub turned by θ about z from the target, with rates ω (body axes): q_e =
    (0, 0, sin θ/2, cos θ/2), so T = -Kp (0, 0, sin θ/2) - Kd ω (Wie §7.3)."""
    body = kd.Body("hub", 10.0, np.eye(3))
    model = kd.Model([body], [kd.Joint.free("root", "hub")])
    theta, w = 0.4, np.array([0.1, -0.2, 0.3])
    state = model.set_joint(model.initial_state(), "root",
                            quaternion=(0, 0, np.sin(theta / 2), np.cos(theta / 2)), rates=w)  # fmt: skip
    law = kd.QuaternionPD("hub", (0, 0, 0, 1), (), Kp=3.0, Kd=5.0)
    (load,) = law(0.0, model, state)
    assert isinstance(load, kd.Torque) and load.frame == "body" and load.body == "hub"
    np.testing.assert_allclose(load.torque, -3.0 * np.array([0, 0, np.sin(theta / 2)]) - 5.0 * w,
                               atol=1e-12)  # fmt: skip
