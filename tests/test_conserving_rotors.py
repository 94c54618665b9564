"""Geared rotors in the energy-momentum scheme (:mod:`kanedyn.simulation.conserving.geared`):
each rotor a massless body on a hinge from its carrier, geared by a linear row; a
reflected-only rotor the mass ``n² J`` of its joint's coordinate.

Oracles: the conservation laws (energy; linear and angular momentum of a free hub with
rotors on hinges and slides, inner and outer carriers, against the dense engine's
``kd.momentum`` with the rotors' ``J_R ω_R``), and RK4 on the dense engine's Kane
equations with the rotors' terms at a small step.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from tests.test_rotors import R1, R2, arm
from tests.test_rotors_native import mixed, states


def test_free_hub_with_rotors_keeps_energy_and_momentum():
    model = mixed(gravity=(0.0, 0.0, 0.0))
    s = states(model, 1, speed=1.0)[0]
    em = kd.simulate(model, s, 0.05, 0.01, method="energy-momentum", progress=False)
    r = em.run
    for quantity in (r.energy, r.linear_momentum, r.angular_momentum):
        scale = max(1.0, float(np.max(np.abs(quantity))))
        assert np.max(np.ptp(quantity, axis=0)) < 1e-12 * scale
    # the scheme's momenta are the model's, rotors included (kd.momentum: about the
    # mass centre, the rotors' J_R ω_R; a reflected-only rotor has none)
    for i in (0, -1):
        P, H = kd.momentum(model, em.state(i))
        np.testing.assert_allclose(r.angular_momentum[i], H, atol=1e-10)
        np.testing.assert_allclose(r.linear_momentum[i], P, atol=1e-10)


def error_against_rk4(model, s, h, t_final=0.1):
    rk = kd.simulate(model, s, t_final, 1e-4, progress=False)  # native Kane
    em = kd.simulate(model, s, t_final, h, method="energy-momentum", progress=False)
    E = em.run.energy
    assert np.ptp(E) < 1e-12 * max(1.0, np.max(np.abs(E)))
    return float(np.max(np.abs(em.q[-1] - rk.q[-1])))


def test_geared_arm_follows_rk4_and_a_broken_gear_does_not(monkeypatch):
    """The geared arm (rotors on N and on link 1's outer side) against RK4; with the
    gear rows' ratios halved on purpose (the rotors' reflected inertia and gyroscopic
    coupling wrong), energy is still conserved but the motion is far from the model's."""
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2, body="outer"))
    s = kd.State(np.array([0.0, 0.0]), np.array([1.0, -2.0]))
    good = error_against_rk4(model, s, 0.0025)
    assert good < 5e-3
    from kanedyn.simulation.conserving import formulation, geared

    monkeypatch.setattr(
        formulation, "gear_rows",
        lambda m, aug: [(psi, a, n / 2) for psi, a, n in geared.gear_rows(m, aug)],
    )  # fmt: skip
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2, body="outer"))  # a fresh cache
    broken = error_against_rk4(model, s, 0.0025)
    assert broken > 20 * good, (broken, good)


@pytest.mark.slow
def test_geared_arm_converges_at_second_order():
    """The error against RK4 falls by 4 per halving of the step (the rotors' spin, n σ h
    per step, must be resolved: the error is that of the midpoint rule on their
    directors)."""
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2, body="outer"))
    s = kd.State(np.array([0.2, 0.5]), np.array([1.0, -2.0]))
    errors = [error_against_rk4(model, s, h, 0.2) for h in (0.005, 0.0025, 0.00125)]
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all((ratios > 3.0) & (ratios < 4.5)), ratios


def test_rotors_with_callable_loads_are_refused():
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2))
    with pytest.raises(kd.ModelError, match="geared rotors takes constant loads only"):
        kd.simulate(model, model.initial_state(), 0.02, 0.01, method="energy-momentum",
                    loads=lambda t, m, s, kin: [], progress=False)  # fmt: skip


def test_streamed_rows_are_the_original_models():
    """With the rotors as bodies of the scheme's model, the stream still receives the
    original model's coordinates and speeds, the trajectory's rows bit for bit."""
    from tests.test_conserving import _streamed

    model = mixed(gravity=(0.0, 0.0, 0.0))
    s = states(model, 1, speed=1.0)[0]
    tr, (t, q, u) = _streamed(model, s, 0.5, 0.005)
    assert t.size == 100 and q.shape[1] == model.nq_total and u.shape[1] == model.n_total
    np.testing.assert_array_equal(q, tr.q[:100])
    np.testing.assert_array_equal(u, tr.u[:100])
