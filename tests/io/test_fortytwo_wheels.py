"""42's wheels, thrusters and locked joints.

``SC_WheelSat.txt`` is written in 42's spacecraft-file format (the TumbleSat demo's
layout, with 42's wheel and thruster sections filled in): a hub with a hinged boom,
three wheels (two on the hub, one on the boom) and two thrusters.

Oracles: conservation of the total angular momentum (a closed system, wheels included);
42's wheel model written out by hand (h_w = J (a·ω + Ω), a motor torque τ on the rotor
and -τ on the host); Newton-Euler by hand for a thruster on a free body.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, read_42, read_42_case

DATA = Path(__file__).parent / "data"
WHEELSAT = DATA / "SC_WheelSat.txt"


def case_of(path=WHEELSAT):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        return read_42_case(path)


def test_wheels_are_rotors_with_the_file_momenta():
    case = case_of()
    model, state = case.model, case.state
    assert [w.name for w in case.wheels] == ["W0", "W1", "W2"]
    assert [w.body for w in case.wheels] == ["B0", "B0", "B1"]
    assert [w.max_torque for w in case.wheels] == [0.14, 0.14, 0.2]
    assert [w.max_momentum for w in case.wheels] == [50.0, 50.0, 30.0]
    np.testing.assert_allclose(case.wheels[2].axis, np.ones(3) / np.sqrt(3), rtol=1e-15)
    # 42's wheel momentum h_w = J (a·ω_rotor), the rotor's axial momentum, from the
    # rotor's absolute angular velocity: the file's initial momenta
    kin = kd.kinematics(model, state)
    for w, h0 in zip(case.wheels, (4.0, -2.5, 1.0), strict=True):
        host = model.body_index(w.body)
        a_N = kin.R_N_B[host] @ w.axis
        assert w.inertia * float(a_N @ kin.omega[model.body_index(w.name)]) == pytest.approx(
            h0, rel=1e-13
        )
    # massless rotors: the spacecraft's mass is the hub's and the boom's
    assert model.total_mass == pytest.approx(1963.5 + 94.25, rel=1e-15)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_total_angular_momentum_is_conserved_with_wheels(formulation):
    case = case_of()
    model, state = case.model, case.state
    traj = kd.simulate(model, state, 40.0, 0.05, formulation=formulation, progress=False)
    H = traj.angular_momentum
    h0 = np.linalg.norm(H[0])
    assert h0 > 1.0
    assert np.max(np.linalg.norm(H - H[0], axis=1)) < 1e-12 * h0
    # the wheels carry part of it: the hub and boom alone exchange momentum with them
    wheels = [model.body_index(w.name) for w in case.wheels]
    kin0 = kd.kinematics(model, kd.State(traj.q[0], traj.u[0]))
    I_w = [
        kin0.R_N_B[i] @ model.bodies[i].inertia @ kin0.R_N_B[i].T @ kin0.omega[i] for i in wheels
    ]
    assert np.linalg.norm(np.sum(I_w, axis=0)) > 0.3 * h0


def test_wheel_torque_changes_the_body_rate_as_a_hand_calculation(tmp_path):
    """One rigid hub at rest with a wheel along its principal z axis, motor torque τ:
    H_z = I_zz ω_z + h_w = 0 and ḣ_w = τ, so ω_z(t) = -τ t / I_zz (no gyroscopic terms
    while ω stays along z), and the wheel's relative rate is Ω = τ t (1/J + 1/I_zz)."""
    text = WHEELSAT.read_text().splitlines()
    # one body (the hub, principal axes), at rest, one wheel along +z
    body1 = next(i for i, t in enumerate(text) if "= Body 1 =" in t)
    joints = next(i for i, t in enumerate(text) if "Joint Parameters" in t) - 1
    wheels = next(i for i, t in enumerate(text) if "Wheel Parameters" in t)
    lines = text[:body1] + text[joints : joints + 4] + text[wheels:]
    lines = [
        "1      ! Number of Bodies"
        if "Number of Bodies" in t
        else "0.0 0.0 0.0      ! Ang Vel (deg/sec)"
        if "Ang Vel (deg/sec)" in t
        else "0.0 0.0 0.0      ! Products of Inertia (xy,xz,yz)"
        if "Products of Inertia" in t
        else "1    ! Number of wheels"
        if "Number of wheels" in t
        else "0.0   0.0   1.0  ! Wheel Axis Components, [X, Y, Z]"
        if "Wheel Axis" in t
        else "0.0  ! Initial Momentum, N-m-sec"
        if "Initial Momentum" in t
        else t
        for t in lines
    ]
    path = tmp_path / "SC_OneWheel.txt"
    path.write_text("\n".join(lines) + "\n")
    case = case_of(path)
    model, state = case.model, case.state
    assert [b.name for b in model.bodies] == ["B0", "W0"]
    I_zz, J, tau = 900.0, 0.012, 0.1
    loads = kd.wheel_loads(case.wheels, [tau])
    acc = kd.forward_dynamics(model, state, loads)
    w_hub = model.speeds("root")[:3]
    np.testing.assert_allclose(acc[w_hub], [0.0, 0.0, -tau / I_zz], rtol=0, atol=1e-15)
    np.testing.assert_allclose(acc[model.speeds("W0_spin")], [tau * (1 / J + 1 / I_zz)], rtol=1e-13)
    traj = kd.simulate(model, state, 10.0, 0.1, loads=loads, progress=False)
    np.testing.assert_allclose(traj.body("B0").omega[-1], [0, 0, -tau * 10.0 / I_zz], atol=1e-15)
    # the motor saturates at the file's 0.14 N m
    assert kd.wheel_loads(case.wheels, [1.0])[0].values.tolist() == [0.14]


def test_thrusters_are_body_forces_with_a_command():
    case = case_of()
    model, state = case.model, case.state
    assert [(t.name, t.mode, t.force) for t in case.thrusters] == [
        ("T0", "PULSED", 1.0),
        ("T1", "PROPORTIONAL", 5.0),
    ]
    # thrust at the hub origin; by hand: the boom hinge rate and the wheels do not
    # matter for the system's mass-centre acceleration, a = F / m
    loads = kd.thruster_loads(case.thrusters, [1.0, 0.4])
    kin = kd.kinematics(model, state)
    R = kin.R_N_B[model.body_index("B0")]
    F = R @ (np.array([-1.0, 0, 0]) * 1.0 + np.array([0, 0, 1.0]) * 5.0 * 0.4)
    acc = kd.forward_dynamics(model, state, loads)
    acc0 = kd.forward_dynamics(model, state)
    m = model.total_mass
    # P = Σ m_i v_i; its rate from the partial velocities: Σ m_i V_i (acc - acc0) = F
    par = kd.partials(model, state)
    dP = np.einsum("b,bij,j->i", np.array([b.mass for b in model.bodies]), par.V, acc - acc0)
    np.testing.assert_allclose(dP, F, rtol=0, atol=1e-12)
    assert np.linalg.norm(dP) / m > 0
    # the throttle is clipped to [0, 1]
    assert np.allclose(case.thrusters[1].load(3.0).force, [0, 0, 5.0])
    assert np.allclose(case.thrusters[1].load(-1.0).force, 0.0)


def test_locked_joint_is_a_lock_event(tmp_path):
    path = tmp_path / "SC_WheelSat.txt"
    path.write_text(
        WHEELSAT.read_text().replace(
            "FALSE  FALSE  FALSE           ! RotDOF Locked",
            "TRUE  FALSE  FALSE           ! RotDOF Locked",
        )
    )
    case = case_of(path)
    assert [(e.t, e.joint, e.dof) for e in case.events] == [(0.0, "G0", 0)]
    with pytest.warns(UnsupportedFeatureWarning, match="1 locked DOF are not part of the model"):
        read_42(path)
    traj = kd.simulate(case.model, case.state, 2.0, 0.05, events=case.events, progress=False)
    i = case.model.speeds("G0")[0]
    assert np.all(traj.u[:, i] == 0.0)  # locked from the start: its 3 deg/s are removed
    j = case.model.coordinates("G0")[0]
    assert np.all(traj.q[:, j] == traj.q[0, j])
    # without the lock the boom swings
    free = kd.simulate(case.model, case.state, 2.0, 0.05, progress=False)
    assert abs(free.q[-1, j] - free.q[0, j]) > 1e-3


def test_wheel_section_errors(tmp_path):
    path = tmp_path / "SC_Bad.txt"
    shutil.copy(WHEELSAT, path)
    text = WHEELSAT.read_text()
    path.write_text(
        text.replace(
            "0.012                       ! Wheel Rotor Inertia", "0 ! Wheel Rotor Inertia", 1
        )
    )
    with pytest.raises(
        kd.FileFormatError, match=r"line \d+: wheel W0: rotor inertia must be positive"
    ):
        case_of(path)
    path.write_text(text.replace("1                           ! Body", "7   ! Body", 1))
    with pytest.raises(kd.FileFormatError, match=r"wheel W2: body index 7 is out of range 0..1"):
        case_of(path)
