"""Explorer-1 (a free root and four hinged antennas): Lagrange through the 3-2-1 chart
against Kane's body-rate equations (compare(), in their compact forms), and both against
the numeric engine at random states through the chart map."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.symbolic import compare, kane, lagrange
from kanedyn.symbolic.replay import python_function

pytestmark = pytest.mark.slow  # about 25 s: the build, the change of speeds, the samples


@pytest.fixture(scope="module")
def explorer1():
    model = kd.examples.explorer1()
    return model, kane(model), lagrange(model, chart="321")


def test_kane_against_lagrange_through_the_chart(explorer1):
    model, eom, lag = explorer1
    report = compare(eom, lag, time_budget=0.0, samples=3)
    assert report.equivalent, str(report)
    text = " ".join(report.notes)
    assert "Euler charts" in text and "speeds differ" in text


def test_a_sign_flipped_in_lagrange_is_reported(explorer1):
    """The check can fail: one term of one Coriolis row with its sign flipped."""
    model, eom, lag = explorer1
    C = sm.Matrix(lag.compact_C)
    row = 4  # an antenna hinge: its row mixes the root's rates and its own
    term = sm.Add.make_args(C[row])[0]
    C[row] = C[row] - 2 * term
    broken = attrs.evolve(lag, compact_C=sm.ImmutableMatrix(C))
    report = compare(eom, broken, time_budget=0.0, samples=3)
    assert not report.equivalent
    assert f"forcing[{row}]" in {e.name for e in report.differing}


def _state(model, rng, theta, rates, hinges, hinge_rates, d, d_rates):
    """The numeric engine's state for chart angles θ (3-2-1), their rates, the hinge
    angles and rates, and the root's position and velocity."""
    lay = model.layout
    q = np.zeros(model.nq)
    u = np.zeros(model.n)
    q[lay.q_index[0][:4]] = kd.dcm_to_quat(kd.euler_to_dcm("321", theta))
    q[lay.q_index[0][4:]] = d
    u[lay.u_index[0][:3]] = kd.rotation.euler_gamma("321", theta) @ rates
    u[lay.u_index[0][3:]] = d_rates
    for k in range(1, len(model.joints)):
        q[lay.q_index[k]] = hinges[2 * (k - 1) : 2 * k]
        u[lay.u_index[k]] = hinge_rates[2 * (k - 1) : 2 * k]
    return kd.State(q, u)


def test_both_against_the_numeric_engine(explorer1):
    """Lagrange's θ̈ gives ω̇ = Γ θ̈ + Γ̇ θ̇ (Go axes), hinge and slide accelerations as
    they are; Kane's equations at the same state give the engine's accelerations."""
    model, eom, lag = explorer1
    lag_fn = python_function(
        [list(lag.q), list(lag.u)], list(lag.intermediates), [lag.mass_matrix, lag.compact_forcing]
    )
    kane_fn = eom.lambdify()
    rng = np.random.default_rng(11)
    for _ in range(3):
        theta = rng.uniform(-1.0, 1.0, 3)  # middle angle well away from ±π/2
        rates, hinges, hinge_rates = (
            rng.uniform(-1, 1, 3),
            rng.uniform(-1, 1, 8),
            rng.uniform(-1, 1, 8),
        )
        d, d_rates = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
        M, f = (np.array(x, dtype=float) for x in lag_fn(
            np.r_[theta, hinges, d], np.r_[rates, hinge_rates, d_rates]))  # fmt: skip
        acc = np.linalg.solve(M, f.ravel())
        state = _state(model, rng, theta, rates, hinges, hinge_rates, d, d_rates)
        expected = kd.forward_dynamics(model, state)
        lay = model.layout
        Gamma = kd.rotation.euler_gamma("321", theta)
        Gamma_dot = kd.rotation.euler_gamma_dot("321", theta, rates)
        assert np.allclose(Gamma @ acc[:3] + Gamma_dot @ rates, expected[lay.u_index[0][:3]],
                           atol=1e-9)  # fmt: skip
        assert np.allclose(acc[3:11], expected[3:11], atol=1e-9)
        assert np.allclose(acc[11:], expected[lay.u_index[0][3:]], atol=1e-9)
        Mk, fk = kane_fn(state.q, state.u)
        assert np.allclose(np.linalg.solve(Mk, np.ravel(fk)), expected, atol=1e-9)
