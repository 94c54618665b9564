"""The energy-momentum scheme on 42's Explorer-1 as shipped (kd.examples.explorer1()).

The hub's principal moments (5174, 3593, 245.4) violate the triangle inequality, so its
directors' mass matrix E = ½ tr(I) U - I is indefinite; the step then also enforces the
hidden velocity constraints at the step points (kanedyn.simulation.conserving.
constraints.HiddenConstraints). Oracles: finite differences and direct evaluation of the
hidden constraints, the velocity constraints G(x) v of the full constraint set, the
joint-coordinate rates of kd.simulate's kinematics (speed Jacobian), Kane's momenta,
and RK4 references. The exact discrete dissipation with the hinge dampers and
second-order convergence to RK4 on this model are cases of the tests in
test_conserving.py.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics.partials import partials
from kanedyn.simulation.conserving import redundant, run, to_redundant
from kanedyn.simulation.conserving.formulation import speed_jacobian
from tests.test_conserving import explorer_state as state


def _rel_spread(a) -> float:
    a = np.asarray(a)
    return float(np.max(np.abs(a - a[0])) / np.max(np.abs(a[0])))


def shipped(damped: bool = True) -> kd.Model:
    m = kd.examples.explorer1()
    if damped:
        return m
    joints = [attrs.evolve(j, damping=np.zeros(j.ndof)) for j in m.joints]
    return kd.Model(m.bodies, joints, gravity=m.gravity)


def velocity_residual(red, x, v) -> float:
    """max |G(x) v| of the full constraint set (rigidity and joint rows)."""
    return float(np.max(np.abs(red.constraints.jacobian(x) @ v)))


def test_the_hub_is_indefinite_and_the_hidden_constraints_are_exact():
    """E_11 = ½ tr I - 5174 < 0; the hidden rows are implied by the constraints (their
    rates vanish on every joint motion), H = ∂h/∂x (finite differences), and the
    discrete identity H(x1)v1 - H(x0)v0 = H(x̄)Δv + B(v̄)Δx holds for any x, v."""
    m = shipped()
    I = np.asarray(m.bodies[0].inertia)
    assert 0.5 * np.trace(I) - I[0, 0] < 0.0
    red = redundant(m)
    hid = red.hidden
    assert hid is not None
    # 5 bodies × 6 rigidity rows, 4 hinges × (3 translational rows + 1 Π entry)
    assert hid.nh == 30 + 4 * 4
    s = state(m)
    x, _ = to_redundant(red, s)
    par = partials(m, s)
    J = speed_jacobian(red, x, par)  # ẋ = J u for every joint motion
    assert np.max(np.abs(hid.jacobian(x) @ J)) < 1e-12
    assert np.max(np.abs(red.constraints.jacobian(x) @ J)) < 1e-12
    rng = np.random.default_rng(1)
    x0, x1, v0, v1 = rng.standard_normal((4, red.nx))

    def h(z):
        return hid.W @ hid.inv(z)

    eps = 1e-6
    fd = np.column_stack([(h(x0 + eps * e) - h(x0 - eps * e)) / (2 * eps) for e in np.eye(red.nx)])
    np.testing.assert_allclose(hid.jacobian(x0), fd, atol=1e-8)
    lhs = hid.jacobian(x1) @ v1 - hid.jacobian(x0) @ v0
    rhs = hid.jacobian(0.5 * (x0 + x1)) @ (v1 - v0) + hid.rate_gradient(0.5 * (v0 + v1)) @ (x1 - x0)
    np.testing.assert_allclose(lhs, rhs, atol=1e-12)


@pytest.mark.parametrize("reduction", ["full", "null-space"])
def test_shipped_explorer_conserves_and_stays_on_the_velocity_constraints(reduction):
    """No dampers, spinning and translating, 40 steps of 1.25 s: energy, H and P
    conserved, every step point on the position and velocity constraints, and the
    joint-coordinate readout carries Kane's momenta."""
    m = shipped(damped=False)
    tr = kd.simulate(m, state(m, fast=False), 50.0, 1.25, method=kd.EnergyMomentum(
        reduction=reduction, tol=1e-12))  # fmt: skip
    r = tr.run
    assert _rel_spread(r.energy) < 1e-10
    assert _rel_spread(r.linear_momentum) < 1e-12
    assert _rel_spread(r.angular_momentum) < 1e-12
    assert np.max(r.constraint_residual) < 1e-12
    assert max(velocity_residual(r.red, x, v) for x, v in zip(r.x, r.v, strict=True)) < 1e-12
    P, H = kd.momentum(m, tr.state(len(tr.t) - 1))
    np.testing.assert_allclose(P, tr.linear_momentum[-1], atol=1e-9)
    np.testing.assert_allclose(H, tr.angular_momentum[-1], atol=1e-9)
    # on the velocity constraints, the scheme's kinetic energy is Kane's (positive) one
    np.testing.assert_allclose(kd.kinetic_energy(m, tr.state(len(tr.t) - 1)),
                               tr.kinetic_energy[-1], rtol=1e-10)  # fmt: skip


def test_a_singular_euler_tensor_is_refused_with_an_indefinite_one():
    """The hidden constraints need the bodies' mass matrix inverse: an antenna whose
    E has a zero eigenvalue (I_11 = I_22 + I_33) is refused, by name."""
    m = shipped()
    ant = attrs.evolve(m.bodies[1], inertia=kd.inertia_tensor(16.18, 8.09, 8.09))
    bad = kd.Model([m.bodies[0], ant, *m.bodies[2:]], m.joints)
    with pytest.raises(kd.ModelError, match="'antenna0'.*singular"):
        kd.simulate(bad, kd.examples.explorer1_state(bad), 1.0, 0.1, method="energy-momentum")
    with pytest.raises(kd.ModelError, match="'hub'.*planar"):
        redundant(m, planar=True)


@pytest.mark.slow
def test_shipped_explorer_over_1e4_steps_at_ten_times_the_rk4_step():
    """10⁴ steps of 1.25 s (the step of the rigid-hub Explorer test in
    test_conserving.py), without dampers: energy, H, P conserved and every step point on
    the position and velocity constraints. On this hub RK4 is still 1e-3 off over 400 s
    at a tenth of that step (checked here against a step 8 times smaller), so the step is
    more than ten times the RK4 step of 1e-6 accuracy. Without the hidden constraints the
    nodal velocities leave the velocity constraints (see the fast test above)."""
    m = shipped(damped=False)
    s = state(m, fast=False)
    h, T = 1.25, 400.0
    ref = kd.simulate(m, s, T, h / 80, output_every=T)
    assert np.max(np.abs(kd.simulate(m, s, T, h / 10, output_every=T).q[-1] - ref.q[-1])) > 1e-3
    r = run(m, s, 1e4 * h, h)  # every step point stored and checked
    assert r.iterations.size == 10_000
    assert _rel_spread(r.energy) < 1e-10
    assert _rel_spread(r.linear_momentum) < 1e-12
    assert _rel_spread(r.angular_momentum) < 1e-12
    assert np.max(r.constraint_residual) < 1e-10
    assert max(velocity_residual(r.red, x, v) for x, v in zip(r.x, r.v, strict=True)) < 1e-12
