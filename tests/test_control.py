"""Reaction wheels and sampled controllers (kanedyn.simulation.control)."""

import numpy as np
import pytest

import kanedyn as kd


def _hub_with_wheel(tau_max=1.0):
    hub = kd.Body("hub", mass=100.0, inertia=kd.inertia_tensor(12.0, 10.0, 8.0))
    wheel = kd.ReactionWheel("w", "hub", axis=(0, 0, 1), inertia=0.2, mass=2.0, max_torque=tau_max)
    model = kd.add_wheels([hub], [kd.Joint.free("root", outer="hub")], [wheel])
    return model, wheel


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_wheel_momentum_exchange_matches_analytic(formulation):
    # Constant motor torque tau on a wheel on the hub's z axis through its mass centre.
    # Rotor axial momentum J_w (w_h + w_rel) = tau t; total H_z = I_hz w_h + J_w (w_h + w_rel) = 0,
    # so w_h = -tau t / I_hz and w_rel = tau t / J_w + tau t / I_hz (I_hz = 8 excludes the rotor).
    model, wheel = _hub_with_wheel()
    tau, T = 0.3, 5.0
    traj = kd.simulate(
        model, model.initial_state(), T, 0.01, formulation=formulation,
        loads=kd.wheel_loads([wheel], [tau]), progress=False,
    )  # fmt: skip
    w_hub = traj.body("hub").omega[-1]
    w_rel = traj.u[-1, model.speeds("w_spin")[0]]
    assert w_hub[2] == pytest.approx(-tau * T / 8.0, rel=1e-10)
    assert w_rel == pytest.approx(tau * T / 0.2 + tau * T / 8.0, rel=1e-10)
    assert np.abs(w_hub[:2]).max() < 1e-12
    H = traj.angular_momentum
    assert np.abs(H).max() < 1e-11  # wheel torques are internal: H stays zero


def test_wheel_torque_saturates():
    model, wheel = _hub_with_wheel(tau_max=0.1)
    (load,) = kd.wheel_loads([wheel], [5.0])
    assert load.values.tolist() == [0.1]
    (load,) = kd.wheel_loads([wheel], [-5.0])
    assert load.values.tolist() == [-0.1]
    with pytest.raises(kd.ModelError, match="1 wheels but 2 torques"):
        kd.wheel_loads([wheel], [1.0, 2.0])


def test_wheel_axis_is_gi_z():
    # an oblique axis: the hinge's partial angular velocity must be that axis (in N, hub at rest)
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    hub = kd.Body("hub", mass=10.0, inertia=kd.inertia_tensor(1.0, 1.0, 1.0))
    wheel = kd.ReactionWheel("w", "hub", axis=axis, inertia=0.01, mass=0.5)
    model = kd.add_wheels([hub], [kd.Joint.weld("fix", None, "hub")], [wheel])
    par = kd.partials(model, model.initial_state())
    assert np.allclose(par.Omega_u[model.body_index("w"), :, 0], axis, atol=1e-15)


def test_controller_is_sampled_with_zero_order_hold():
    model, wheel = _hub_with_wheel()
    calls = []

    def law(t, model, state):
        calls.append(t)
        return kd.wheel_loads([wheel], [0.1 if t < 0.45 else -0.1])

    traj = kd.simulate(model, model.initial_state(), 1.0, 0.01,
                       controller=kd.Controller(0.25, law), progress=False)  # fmt: skip
    # samples at 0, 0.25, 0.5, 0.75 (1.0 is the end): the law runs once per sample
    assert calls == pytest.approx([0.0, 0.25, 0.5, 0.75])
    # held torque: +0.1 for t < 0.5, then -0.1 -> rotor momentum 0.1*0.5 - 0.1*0.5 = 0
    w = traj.body("w").omega[-1, 2] * 0.2  # rotor axial momentum J_w * w_rotor
    assert w == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(kd.ModelError, match="period must be positive"):
        kd.Controller(0.0, law)


@pytest.mark.parametrize(
    ("formulation", "method"),
    [("kane", "rk4"), ("msd", "rk4"), pytest.param("kane", "DOP853", marks=pytest.mark.slow)],
)
def test_wheel_slew_reaches_target_and_conserves_momentum(formulation, method):
    case = kd.examples.wheel_slew(angle_deg=30.0, axis=(0, 0, 1))
    traj = kd.simulate(case.model, case.state, 60.0, 0.05, controller=case.controller, method=method,
                       formulation=formulation, output_every=1.0, progress=False)  # fmt: skip
    R = traj.body("hub").R_N_B[-1]
    # attitude error from the DCM directly: angle of R_target^T R
    R_t = kd.quat_to_dcm(case.target)
    err = np.degrees(np.arccos(np.clip((np.trace(R_t.T @ R) - 1.0) / 2.0, -1.0, 1.0)))
    assert err < 0.05
    start = np.degrees(np.arccos((np.trace(R_t.T @ traj.body("hub").R_N_B[0]) - 1.0) / 2.0))
    assert start == pytest.approx(30.0, abs=1e-9)
    H = traj.angular_momentum
    assert np.abs(H - H[0]).max() < 1e-11


def test_add_wheels_extends_an_existing_model():
    """add_wheels(model, wheels) builds the same model as add_wheels(bodies, joints, wheels),
    and keeps the model's gravity."""
    hub = kd.Body("hub", mass=100.0, inertia=kd.inertia_tensor(12.0, 10.0, 8.0))
    joints = [kd.Joint.free("root", outer="hub")]
    wheels = [kd.ReactionWheel(f"w{i}", "hub", axis=np.eye(3)[i], inertia=0.2, mass=2.0)
              for i in range(3)]  # fmt: skip
    base = kd.Model([hub], joints, gravity=(0.0, 0.0, -1.0))
    extended = kd.add_wheels(base, wheels)
    built = kd.add_wheels([hub], joints, wheels, gravity=(0.0, 0.0, -1.0))
    assert [b.name for b in extended.bodies] == ["hub", "w0", "w1", "w2"]
    assert np.array_equal(extended.gravity, base.gravity)
    state = extended.set_joint(extended.initial_state(), "root", rates=(0.1, -0.2, 0.3))
    # a wheel adds its axial inertia to the mass matrix: M(extended) equals M(built)
    np.testing.assert_array_equal(kd.mass_matrix(extended, state), kd.mass_matrix(built, state))
    assert kd.mass_matrix(extended, state).shape == (6 + 3, 6 + 3)
    with pytest.raises(kd.ModelError, match="takes the model and the wheels only"):
        kd.add_wheels(base, wheels, wheels)
