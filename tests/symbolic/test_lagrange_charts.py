"""Lagrange's equations for spherical joints through an Euler chart, against the numeric
engine (through scipy-independent chart kinematics of kanedyn.rotation) and against
Kane's body-rate equations through compare()."""

from __future__ import annotations

import sys

import attrs
import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.symbolic import compare, kane, lagrange


def top(free: bool = False) -> kd.Model:
    """A rigid body on a ball joint (a heavy top), or free-floating with a hinged panel."""
    body = kd.Body("body", mass=2.0, inertia=kd.inertia_tensor(0.5, 0.7, 0.9, 0.05, 0.02, 0.0),
                   com=(0.1, 0.05, 0.4))  # fmt: skip
    if not free:
        joint = kd.Joint.spherical("ball", None, "body", inner_point=(0, 0, 0.2))
        return kd.Model([body], [joint], gravity=(0, 0, -9.81))
    panel = kd.Body("panel", mass=0.5, inertia=kd.inertia_tensor(0.1, 0.2, 0.25), com=(0.4, 0, 0))
    joints = [
        kd.Joint.free("ball", "body"),
        kd.Joint.revolute("h", "body", "panel", axis=2, inner_point=(0.5, 0, 0)),
    ]
    return kd.Model([body, panel], joints)


@pytest.mark.parametrize(
    "seq",
    [
        "321",
        pytest.param("313", marks=pytest.mark.slow),
        pytest.param("123", marks=pytest.mark.slow),
    ],
)
def test_chart_equations_match_the_numeric_engine(seq):
    """θ̈ from Lagrange gives ω̇ = Γ θ̈ + Γ̇ θ̇, the numeric engine's body-rate rates."""
    model = top()
    tau = sm.symbols("tau0:3")
    lag = lagrange(model, chart=seq, joint_torques={"ball": tau})
    f = sm.lambdify([list(lag.q), list(lag.u), tau], [lag.mass_matrix, lag.forcing])
    rng = np.random.default_rng(1)
    for _ in range(3):
        theta = rng.uniform(0.2, 1.2, 3)
        rates = rng.uniform(-1, 1, 3)
        torque = rng.uniform(-1, 1, 3)
        M, F = f(theta, rates, torque)
        acc = np.linalg.solve(np.asarray(M, float), np.asarray(F, float).ravel())
        Gamma = kd.rotation.euler_gamma(seq, theta)  # ω (Go axes) = Γ θ̇
        omega = Gamma @ rates
        omega_dot = Gamma @ acc + kd.rotation.euler_gamma_dot(seq, theta, rates) @ rates
        quat = kd.dcm_to_quat(kd.euler_to_dcm(seq, theta))
        expected = kd.forward_dynamics(model, kd.State(quat, omega), [kd.JointLoad("ball", torque)])
        assert np.allclose(omega_dot, expected, atol=1e-10)


def test_chart_singularity_is_where_stated():
    lag = lagrange(top(), chart="321")
    q0, q1, q2 = lag.q
    H = np.array(lag.H.subs({q0: 0.3, q1: np.pi / 2, q2: -0.4}).evalf(), dtype=float)
    assert abs(np.linalg.det(H)) < 1e-12 * np.abs(H).max() ** 3
    module = sys.modules["kanedyn.symbolic.lagrange"]
    assert "singular where its middle angle is ±π/2" in " ".join(module.__doc__.split())


@pytest.mark.slow
def test_kane_against_lagrange_through_the_chart():
    model = top()
    eom, lag = kane(model), lagrange(model, chart="321")
    report = compare(eom, lag, time_budget=0.0, samples=3)
    assert report.equivalent, str(report)
    text = " ".join(report.notes)
    assert "Euler charts" in text and "speeds differ" in text
    # the check can fail: the right equations read through the wrong chart differ
    wrong = attrs.evolve(lag, charts={"ball": "123"})
    assert not compare(eom, wrong, time_budget=0.0, samples=3).equivalent


@pytest.mark.slow
def test_free_floating_spacecraft_kane_against_lagrange():
    model = top(free=True)
    report = compare(kane(model), lagrange(model), time_budget=0.0, samples=3)
    assert report.equivalent, str(report)
