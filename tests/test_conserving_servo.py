"""Servo constraints (inverse dynamics) with the energy-momentum step.

Oracles: the closed-form torque of a prescribed pendulum motion, and forward RK4
simulations (kd.simulate) driven by the computed efforts.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.simulation.conserving import JointOutput, PointOutput, inverse_dynamics
from tests.test_conserving import parallelogram


def test_prescribed_pendulum_angle_gives_the_closed_form_torque():
    """θ(t) = A sin ωt for a rod of length 1 hinged at its end:
    τ = I_O θ̈ + m g (l/2) sin θ; the nodal efforts converge at second order."""
    m = kd.examples.chain(1)
    b = m.bodies[0]
    I_O = b.inertia[2, 2] + b.mass * 0.5**2
    A, w = 0.5, 2.0
    errors = []
    for h in (0.02, 0.01):
        s = m.set_joint(m.initial_state(), "joint0", angles=(0.0,), rates=(A * w,))
        res = inverse_dynamics(m, s, 2.0, h, [JointOutput("joint0", lambda t: A * np.sin(w * t))],
                               ["joint0"])  # fmt: skip
        t = res.t
        tau = I_O * (-A * w * w * np.sin(w * t)) + b.mass * 9.81 * 0.5 * np.sin(A * np.sin(w * t))
        assert res.efforts.shape == (len(t) - 1, 1)
        errors.append(np.max(np.abs(res.nodal_efforts[:, 0] - tau)))
    assert errors[1] < 1e-3 * np.max(np.abs(tau))
    assert 3.5 < errors[0] / errors[1] < 4.5


def _miss(m, traj, circle):
    """The largest distance of the tip from the circle over a trajectory."""
    return max(np.max(np.abs(_tip(m, q) - circle(t))) for t, q in zip(traj.t, traj.q, strict=True))


def _tip(m, q):
    kin = kd.kinematics(m, kd.State(q, np.zeros(m.n)))
    return (kin.p[1] + kin.R_N_B[1] @ np.array([1.0, 0.0, 0.0]))[:2]


def test_two_link_arm_end_point_on_a_circle():
    """The tip of a 2-link arm follows a circle; both joints are actuated. The efforts,
    fed to RK4 (interpolated nodal efforts), reproduce the circle to O(h²); fed back to
    the conserving scheme with the same steps (interval efforts), to the tolerance."""
    m = kd.examples.double_pendulum()
    s = m.set_joint(m.initial_state(), "joint0", angles=(0.6,))
    s = m.set_joint(s, "joint1", angles=(0.8,))
    centre, radius, W = _tip(m, s.q) - np.array([0.2, 0.0]), 0.2, 1.5

    def circle(t):
        return centre + radius * np.array([np.cos(W * t), np.sin(W * t)])

    J = np.zeros((2, 2))
    for j in range(2):  # tip Jacobian by central differences, for consistent start speeds
        e = np.zeros(2)
        e[j] = 1e-7
        J[:, j] = (_tip(m, s.q + e) - _tip(m, s.q - e)) / 2e-7
    s = kd.State(s.q, np.linalg.solve(J, [0.0, radius * W]))
    out = [PointOutput("link1", (1.0, 0.0, 0.0), circle, axes=(0, 1))]
    errors = []
    for h in (0.01, 0.005):
        res = inverse_dynamics(m, s, 2.0, h, out, ["joint0", "joint1"])
        assert _miss(m, res, circle) < 1e-10
        fw = kd.simulate(m, s, 2.0, h / 4, loads=res.loads())
        errors.append(_miss(m, fw, circle))
    assert errors[1] < 1e-5
    assert 3.5 < errors[0] / errors[1] < 4.5
    em = kd.simulate(m, s, 2.0, 0.005, loads=res.loads(piecewise=True), method="energy-momentum")
    assert _miss(m, em, circle) < 1e-9
    # energy balance of the servo run: the change of energy is the actuator work
    r = res.run
    angles = np.diff(res.q, axis=0)
    work = np.sum(res.efforts * angles, axis=1)
    np.testing.assert_allclose(np.diff(r.energy), work, atol=1e-9)


def test_servo_errors():
    m = kd.examples.double_pendulum()
    s = m.initial_state()
    with pytest.raises(kd.ModelError, match="as many actuator"):
        inverse_dynamics(m, s, 0.1, 0.01, [JointOutput("joint0", lambda t: 0.0)],
                         ["joint0", "joint1"])  # fmt: skip
    with pytest.raises(kd.ModelError, match="misses"):
        inverse_dynamics(m, s, 0.1, 0.01, [JointOutput("joint0", lambda t: 1.0)], ["joint0"])


def test_servo_on_a_closed_loop():
    """The parallelogram four-bar of tests/test_conserving.py driven at its crank:
    θ(t) = θ0 + A sin ωt needs τ = (2 I_O + m_c L²) θ̈ + g L (m + m_c) cos θ."""
    m, close = parallelogram()
    th0, A, w = 0.8, 0.3, 2.0
    s = m.initial_state()
    for name, a, rate in (("j0", th0, A * w), ("j1", -th0, -A * w), ("j2", th0 + np.pi, A * w)):
        s = m.set_joint(s, name, angles=(a,), rates=(rate,))
    I_O, mc = 1.0 / 12 + 0.25, 0.7
    errors = []
    for h in (0.02, 0.01):
        res = inverse_dynamics(m, s, 2.0, h, [JointOutput("j0", lambda t: th0 + A * np.sin(w * t))],
                               ["j0"], closures=[close])  # fmt: skip
        th = th0 + A * np.sin(w * res.t)
        tau = (2 * I_O + mc) * (-A * w * w * np.sin(w * res.t)) + 9.81 * (1 + mc) * np.cos(th)
        errors.append(np.max(np.abs(res.nodal_efforts[:, 0] - tau)))
        assert np.max(res.run.constraint_residual) < 1e-10
    assert errors[1] < 1e-3 * np.max(np.abs(tau))
    assert 3.5 < errors[0] / errors[1] < 4.5


# --------------------------------------------------------------------------- 3-RRR
def platform_pose(m, q):
    """The platform's centre (x, y) and rotation angle about z, from Kane's kinematics."""
    P = m.body_index("platform")
    kin = kd.kinematics(m, kd.State(q, np.zeros(m.n)))
    R = kin.R_N_B[P]
    return np.array([kin.p[P][0], kin.p[P][1], np.arctan2(R[1, 0], R[0, 0])])


def platform_state(m, velocity):
    """The assembled 3-RRR at q = 0 with the platform moving at ``velocity`` (ẋ, ẏ, φ̇):
    leg 0 alone carries the platform (its three joints' rates from the pose Jacobian by
    central differences), legs 1 and 2 follow by assembly."""
    s = m.initial_state()
    leg = ["base0", "elbow0", "wrist0"]
    J = np.zeros((3, 3))
    for c, name in enumerate(leg):
        e = np.zeros(m.nq)
        e[m.coordinates(name)[0]] = 1e-7
        J[:, c] = (platform_pose(m, s.q + e) - platform_pose(m, s.q - e)) / 2e-7
    for name, w in zip(leg, np.linalg.solve(J, velocity), strict=True):
        s = m.set_joint(s, name, rates=[w])
    return m.assemble(s, fix=leg)


@pytest.mark.slow
def test_3rrr_platform_on_a_circle_by_its_base_torques():
    """The 3-RRR's platform centre follows a circle of radius 5 cm while it rocks by
    ±0.1 rad; the servo run computes the three base torques. Fed back as JointLoad
    inputs to Kane's constrained equations with RK4 (an independent formulation), they
    reproduce the prescribed motion to O(h²) (ratio 4 when h halves)."""
    m = kd.examples.parallel_3rrr()
    r, W, A = 0.05, 2.0, 0.1

    def centre(t):
        return np.array([r * (np.cos(W * t) - 1.0), r * np.sin(W * t)])

    def pose(t):
        return np.r_[centre(t), A * np.sin(W * t)]

    s = platform_state(m, (0.0, r * W, A * W))
    np.testing.assert_allclose(platform_pose(m, s.q), pose(0.0), atol=1e-12)
    outputs = [  # linear in the directors: the centre, and the y of a marker 1 m out on x
        PointOutput("platform", (0.0, 0.0, 0.0), centre, axes=(0, 1)),
        PointOutput("platform", (1.0, 0.0, 0.0), lambda t: centre(t)[1] + np.sin(A * np.sin(W * t)),
                    axes=(1,)),
    ]  # fmt: skip
    errors = []
    for h in (0.02, 0.01):
        res = inverse_dynamics(m, s, 1.0, h, outputs, ["base0", "base1", "base2"])
        assert res.actuators == (("base0", 0), ("base1", 0), ("base2", 0))
        assert res.efforts.shape == (len(res.t) - 1, 3)
        assert np.max(res.run.constraint_residual) < 1e-10
        miss = max(
            np.max(np.abs(platform_pose(m, q) - pose(t))) for t, q in zip(res.t, res.q, strict=True)
        )
        assert miss < 1e-9  # the servo run follows the prescription
        # no gravity: the change of energy is the base torques' work
        work = np.sum(res.efforts * np.diff(res.q[:, [m.coordinates(f"base{k}")[0]
                                                      for k in range(3)]], axis=0), axis=1)  # fmt: skip
        np.testing.assert_allclose(np.diff(res.run.energy), work, atol=1e-10)
        fw = kd.simulate(m, s, 1.0, h / 4, loads=res.loads(), output_every=h, progress=False)
        errors.append(max(np.max(np.abs(platform_pose(m, q) - pose(t)))
                          for t, q in zip(fw.t, fw.q, strict=True)))  # fmt: skip
    assert np.max(np.abs(res.nodal_efforts)) > 0.05  # the torques do work
    assert errors[1] < 1e-5
    assert 3.5 < errors[0] / errors[1] < 4.5
