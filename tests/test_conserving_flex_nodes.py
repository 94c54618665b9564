"""Joints at nodes of flexible bodies in the energy-momentum scheme (issue 29).

A node joint rides on the node's frame, a massless triad of the scheme's coordinates
tied to the flexible body by its rigidity rows and the Cayley rotation rows
``axial(C(η)ᵀ Π) = 0`` (kanedyn.simulation.conserving.flexible.NodeFrame). Oracles: the
dense Kane code of the node joints (kd.kinetic_energy, kd.momentum, kd.mass_matrix of
kanedyn.dynamics.flex), finite differences of the node rotation and of the constraints,
the defining identity of a discrete gradient, the balance laws, and a Kane RK4 run at a
far smaller step.
"""

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import kinematics as kinematics_module
from kanedyn.dynamics.kane import mass_matrix
from kanedyn.simulation.conserving import constraints as constraints_module
from kanedyn.simulation.conserving import flexible as flexible_module
from kanedyn.simulation.conserving.formulation import (
    node_partials,
    redundant,
    speed_jacobian,
    to_joint_coordinates,
    to_redundant,
)
from kanedyn.spatial.modal import node_frame, node_rotation_derivatives
from tests.test_flex_nodes import _hub_beam_tip, _outer_nodes


def test_node_rotation_derivatives_are_finite_differences():
    """``C(η)`` is node_frame's rotation, orthonormal, and its first and second
    derivatives in η are central differences of it."""
    model, s = _hub_beam_tip()
    md = model.bodies[1].modes
    eta = 3.0 * s.q[model.nq :]
    C, dC, d2C = node_rotation_derivatives(md.Theta[1], eta)
    np.testing.assert_allclose(C, node_frame(md, 1, eta, 0 * eta)[0], atol=1e-15)
    np.testing.assert_allclose(C @ C.T, np.eye(3), atol=1e-15)
    h, E = 1e-6, np.eye(eta.size)

    def central(i):
        f = node_rotation_derivatives
        return np.array([(f(md.Theta[1], eta + h * e)[i] - f(md.Theta[1], eta - h * e)[i]) / (2 * h)
                         for e in E])  # fmt: skip

    fd1, fd2 = central(0), central(1)
    np.testing.assert_allclose(dC, np.array(fd1), atol=1e-8)
    np.testing.assert_allclose(d2C, np.array(fd2), atol=1e-7)


def _random_state(model, rng):
    q = np.zeros(model.nq_total)
    q[: model.nq] = 0.5 * rng.standard_normal(model.nq)
    q[model.nq :] = 0.1 * rng.standard_normal(model.nf)
    return kd.State(q, rng.standard_normal(model.n_total))


@pytest.mark.parametrize("build", [_hub_beam_tip, _outer_nodes])
def test_director_state_of_node_joints_is_kanes(build):
    """At random states: the lifted director state satisfies the constraints and their
    rates, carries Kane's energy (with gravity and strain), P, H and mass matrix
    (``JᵀMJ``), ``J u`` is its velocity, and the readout returns the state; bodies at
    inner nodes (a tip body) and hanging at outer nodes (two beams)."""
    model, _ = build()
    red = redundant(model)
    rng = np.random.default_rng(5)
    for _ in range(2):
        s = _random_state(model, rng)
        x, v = to_redundant(red, s)
        assert np.abs(red.constraints(x)).max() < 1e-13
        assert np.abs(red.constraints.jacobian(x) @ v).max() < 1e-12
        E = kd.kinetic_energy(model, s) + kd.potential_energy(model, s)
        assert red.energy(x, v) == pytest.approx(E, rel=1e-12)
        P, H = red.momentum(x, v)
        P_k, H_k = kd.momentum(model, s)
        np.testing.assert_allclose(P, P_k, atol=1e-12 * np.abs(P_k).max())
        np.testing.assert_allclose(H, H_k, atol=1e-12 * np.abs(H_k).max())
        J = speed_jacobian(red, x, node_partials(red, s.q))
        np.testing.assert_allclose(J @ s.u, v, atol=1e-12 * np.abs(v).max())
        M = mass_matrix(model, kd.State(s.q, np.zeros(model.n_total)))
        np.testing.assert_allclose(J.T @ red.M @ J, M, atol=1e-12 * np.abs(M).max())
        q, u = to_joint_coordinates(red, x, v, s.q)
        np.testing.assert_allclose(q, s.q, atol=1e-13)
        np.testing.assert_allclose(u, s.u, atol=1e-10)


def test_node_rows_have_an_exact_discrete_gradient_and_newton_tangent():
    """``G_d(x0, x1)(x1 - x0) = c(x1) - c(x0)`` to round-off (the constraint forces do
    no work over a step), ``G_d(x, x) = G(x)`` is the Jacobian of ``c`` (finite
    differences), and the Newton tangent ``∂(G_dᵀλ)/∂x1`` is that of finite
    differences, between two states of a large relative motion of the node."""
    model, s = _hub_beam_tip()
    red = redundant(model)
    cons = red.constraints
    rng = np.random.default_rng(2)
    x0 = to_redundant(red, _random_state(model, rng))[0]
    x1 = x0 + 0.2 * rng.standard_normal(red.nx)
    dc = cons(x1) - cons(x0)
    np.testing.assert_allclose(cons.discrete_gradient(x0, x1) @ (x1 - x0), dc,
                               atol=1e-13 * np.abs(dc).max())  # fmt: skip
    h, E = 1e-6, np.eye(red.nx)
    G_fd = np.array([(cons(x0 + h * e) - cons(x0 - h * e)) / (2 * h) for e in E]).T
    np.testing.assert_allclose(cons.jacobian(x0), G_fd, atol=1e-8)
    lam = rng.standard_normal(red.nc)
    K_fd = np.array([(cons.discrete_gradient(x0, x1 + h * e).T @ lam
                      - cons.discrete_gradient(x0, x1 - h * e).T @ lam) / (2 * h)
                     for e in E]).T  # fmt: skip
    np.testing.assert_allclose(cons.tangent(x0, x1, lam), K_fd, atol=1e-7 * np.abs(K_fd).max())


def _drifts(model, s, dt=0.05, steps=20):
    tr = kd.simulate(model, s, dt * steps, dt, method=kd.EnergyMomentum(tol=1e-12))
    r = tr.run
    E, P, H = r.energy, r.linear_momentum, r.angular_momentum
    return (np.abs(E - E[0]).max() / abs(E[0]), np.abs(P - P[0]).max() / np.abs(P[0]).max(),
            np.abs(H - H[0]).max() / np.abs(H[0]).max(), tr)  # fmt: skip


def test_torque_free_hub_beam_and_tip_body_conserve_energy_and_momenta():
    """A free hub, a beam and a body hinged at the beam's tip node: energy with strain
    energy, P and H conserved to round-off over 20 steps of 0.05 s while the strain
    energy and the hinge angle change by much; the constraints (the node frame's
    included) hold to round-off."""
    model, s = _hub_beam_tip()
    dE, dP, dH, tr = _drifts(model, s)
    assert dE < 1e-12 and dP < 1e-12 and dH < 1e-12
    assert np.max(tr.run.constraint_residual) < 1e-12
    eta = tr.q[:, model.nq :]
    K = model.bodies[1].modes.stiffness
    strain = 0.5 * np.einsum("ti,ij,tj->t", eta, K, eta)
    assert strain.max() - strain.min() > 0.05 * tr.run.energy[0]
    assert np.ptp(tr.q[:, 6]) > 0.3  # the hinge at the node turns


def test_stiffened_beam_with_a_tip_body_keeps_its_readout_energy():
    """The same hub, beam and tip body with the beam's geometric stiffening: E, P and H
    conserved to round-off, and the joint states read out carry the scheme's energy as
    Kane's equations measure it (the stiffened step's tangent rates, on a node too)."""
    model, s = _hub_beam_tip()
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=True)
    model = kd.Model([model.bodies[0], beam, model.bodies[2]], list(model.joints))
    dE, dP, dH, tr = _drifts(model, s, steps=6)
    assert dE < 1e-12 and dP < 1e-12 and dH < 1e-12
    E_k = [kd.kinetic_energy(model, tr.state(i)) + kd.potential_energy(model, tr.state(i))
           for i in range(len(tr.t))]  # fmt: skip
    np.testing.assert_allclose(E_k, tr.run.energy, rtol=1e-12)


def test_outer_nodes_conserve_energy_and_momenta():
    """Two beams hanging at their tip nodes (Joint.outer_node), the second from the
    first's root node: energy, P and H conserved to round-off."""
    model, s = _outer_nodes(gravity=(0.0, 0.0, 0.0))
    dE, dP, dH, tr = _drifts(model, s, dt=0.02, steps=5)
    assert dE < 1e-12 and dP < 1e-12 and dH < 1e-12
    assert np.max(tr.run.constraint_residual) < 1e-12


T_REF = 0.2


@pytest.fixture(scope="module")
def kane_run():
    """The hub, beam and tip body, and Kane's RK4 run to 0.2 s at 2e-4 s (its own error
    below 1e-9): the reference of the slow tests."""
    model, s = _hub_beam_tip()
    ref = kd.simulate(model, s, T_REF, 2e-4, method="rk4")
    return s, np.r_[ref.q[-1], ref.u[-1]]


def _distance(model, s, ref_y, h):
    tr = kd.simulate(model, s, T_REF, h, method=kd.EnergyMomentum(tol=1e-12))
    return np.abs(np.r_[tr.q[-1], tr.u[-1]] - ref_y).max(), tr


@pytest.mark.slow
def test_node_joint_converges_to_the_kane_run_at_second_order(kane_run):
    """As h halves, the distance to Kane's run at t = 0.2 s falls by 4: the node
    frame's rows keep the midpoint scheme second order, in the tip body's hinge and the
    modes alike."""
    s, ref_y = kane_run
    model = _hub_beam_tip()[0]
    errs = [_distance(model, s, ref_y, h)[0] for h in (0.01, 0.005, 0.0025)]
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(rates - 2.0) < 0.15), (errs, rates)  # 1.95, 1.99
    assert errs[-1] < 1e-2, errs  # 5.0e-3 (the modal rates' share)


@pytest.mark.slow
def test_dropping_the_node_rotation_keeps_the_energy_but_leaves_kanes_motion(kane_run, monkeypatch):
    """Break test: the node frame made to translate with the node but not to turn
    (``C = U`` in the rows, in the lifted state and in the readout) is still a
    conservative system, and
    the scheme conserves its energy to round-off, but its motion is not Kane's: at
    h = 0.01 s it ends more than 10× farther from Kane's run than the real scheme (17×)."""
    s, ref_y = kane_run
    good = _distance(_hub_beam_tip()[0], s, ref_y, 0.01)[0]

    def still(Theta, eta):
        n = np.size(eta)
        return np.eye(3), np.zeros((n, 3, 3)), np.zeros((n, n, 3, 3))

    def translating(md, k, eta, xi):
        _, d, W, wq = node_frame(md, k, eta, xi)
        return np.eye(3), d, 0.0 * W, 0.0 * wq

    monkeypatch.setattr(constraints_module, "node_rotation_derivatives", still)
    for module in (flexible_module, kinematics_module):  # the lifted state and the readout
        monkeypatch.setattr(module, "node_frame", translating)
    model = _hub_beam_tip()[0]  # a new model: the director formulation is stored on it
    bad, tr = _distance(model, s, ref_y, 0.01)
    E = tr.run.energy
    assert np.abs(E - E[0]).max() < 1e-12 * abs(E[0])
    assert bad > 10.0 * good, (bad, good)
