"""Central gravity in the symbolic engines: symbolic Kane (lambdified) gives the dense
engine's accelerations, and Lagrange's equations from the field's potential agree with
Kane's (kd.symbolic.compare, numerically at random points)."""

from __future__ import annotations

import numpy as np

import kanedyn as kd
from kanedyn.symbolic import compare, kane, lagrange
from tests.strategies import random_state

FIELD = kd.CentralGravity(mu=2.0e4, J2=0.05, radius=5.0, center=(-14.0, 9.0, -6.0))


def _pendulum():
    """A body on a 2-DOF gimbal from N with a hinged arm, 17 m from the field's centre."""
    hub = kd.Body("hub", mass=3.0, inertia=kd.inertia_tensor(2.0, 1.5, 1.0), com=(0.2, 0.1, 0.3))
    arm = kd.Body("arm", mass=1.0, inertia=kd.inertia_tensor(0.5, 0.4, 0.2), com=(0.0, 1.0, 0.0))
    js = [
        kd.Joint.gimbal("g", None, "hub", seq="123", dof=2, inner_point=(0.5, -0.5, 0.2)),
        kd.Joint.revolute("h", inner="hub", outer="arm", axis=3, inner_point=(0.3, 0.0, 0.0)),
    ]
    return kd.Model([hub, arm], js, gravity=FIELD)


def test_symbolic_kane_gives_the_dense_accelerations():
    model = _pendulum()
    f = kane(model).lambdify()
    rng = np.random.default_rng(2)
    for _ in range(3):
        st = random_state(model, rng)
        M, F = f(st.q, st.u)
        acc = np.linalg.solve(np.asarray(M, dtype=float), np.asarray(F, dtype=float).ravel())
        np.testing.assert_allclose(acc, kd.forward_dynamics(model, st), atol=1e-9)


def test_lagrange_from_the_potential_agrees_with_kane():
    model = _pendulum()
    report = compare(kane(model), lagrange(model), time_budget=1.0)
    assert report.equivalent, str(report)
