"""Named frames and massless bodies at the model level.

Oracles: a pendulum's tip by hand (v = ω × r, a = α × r - ω² r); the structure of the
tree for the no-mass-outboard check.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.errors import ModelError


def pendulum():
    rod = kd.Body("rod", mass=2.0, inertia=np.diag([0.2, 0.2, 0.01]), com=(0, 0, -0.5))
    frames = [
        kd.Frame("tip", "rod", point=(0, 0, -1), rotation=kd.euler_to_dcm("123", (0, 0, 0.3))),
        kd.Frame("ground", None, point=(1, 2, 3)),
    ]
    return kd.Model(
        [rod],
        [kd.Joint.revolute("hinge", None, "rod", axis=1)],
        gravity=(0, 0, -9.81),
        frames=frames,
    )


def test_pendulum_tip_by_hand():
    model = pendulum()
    theta, w = 0.4, 1.5
    state = model.set_joint(model.initial_state(), "hinge", angles=[theta], rates=[w])
    R = kd.euler_to_dcm("123", (theta, 0, 0))
    r = R @ [0, 0, -1.0]
    R_f, x = kd.frame_placement(model, state, "tip")
    np.testing.assert_allclose(x, r, atol=1e-15)
    np.testing.assert_allclose(R_f, R @ kd.euler_to_dcm("123", (0, 0, 0.3)), atol=1e-15)
    udot = kd.forward_dynamics(model, state)
    # by hand: I_hinge = I_xx + m (l/2)², torque -m g (l/2) sin θ about x
    alpha = -2.0 * 9.81 * 0.5 * np.sin(theta) / (0.2 + 2.0 * 0.25)
    np.testing.assert_allclose(udot, [alpha], rtol=1e-14)
    mot = kd.frame_acceleration(model, state, "tip", udot)
    wv = np.array([w, 0, 0])
    np.testing.assert_allclose(mot.omega, wv, atol=1e-15)
    np.testing.assert_allclose(mot.v, np.cross(wv, r), atol=1e-14)
    np.testing.assert_allclose(mot.alpha, [alpha, 0, 0], atol=1e-14)
    np.testing.assert_allclose(mot.a, np.cross([alpha, 0, 0], r) - w * w * r, atol=1e-13)
    still = kd.frame_acceleration(model, state, "ground", udot)
    np.testing.assert_array_equal(still.position, [1, 2, 3])
    assert not np.any(still.v) and not np.any(still.a)


def test_frame_errors():
    model = pendulum()
    with pytest.raises(ModelError, match="unknown frame 'hand'; frames are \\['tip', 'ground'\\]"):
        kd.frame_placement(model, model.initial_state(), "hand")
    rod = model.bodies[0]
    joint = model.joints[0]
    with pytest.raises(ModelError, match="frame 'f': unknown body 'arm'"):
        kd.Model([rod], [joint], frames=[kd.Frame("f", "arm")])
    with pytest.raises(ModelError, match="duplicate frame name 'f'"):
        kd.Model([rod], [joint], frames=[kd.Frame("f", "rod"), kd.Frame("f", None)])
    with pytest.raises(ModelError, match="frame 'f': rotation is not a proper orthonormal"):
        kd.Frame("f", "rod", rotation=np.diag([1.0, 1.0, -1.0]))


def test_massless_bodies_need_mass_outboard():
    heavy = kd.Body("b", 1.0, np.eye(3) * 0.1)
    with pytest.raises(ModelError, match="mass must be positive"):
        kd.Body("yoke", 0.0, np.zeros((3, 3)))
    yoke = kd.Body("yoke", 0.0, np.zeros((3, 3)), allow_singular=True)
    point = kd.Body("p", 0.5, np.zeros((3, 3)), allow_singular=True)
    with pytest.raises(ModelError, match="mass must be non-negative"):
        kd.Body("neg", -1.0, np.zeros((3, 3)), allow_singular=True)
    with pytest.raises(ModelError, match="not positive semidefinite"):
        kd.Body("neg", 1.0, np.diag([1.0, 1.0, -1.0]), allow_singular=True)
    # a massless link between two hinges, mass beyond it: fine
    model = kd.Model(
        [yoke, heavy],
        [
            kd.Joint.revolute("j1", None, "yoke", axis=3),
            kd.Joint.revolute("j2", "yoke", "b", axis=1),
        ],
    )
    assert np.all(np.linalg.eigvalsh(kd.mass_matrix(model, model.initial_state())) > 0)
    # a massless leaf on a hinge: named
    with pytest.raises(ModelError, match="joint 'j2' has no mass outboard"):
        kd.Model(
            [heavy, yoke],
            [
                kd.Joint.revolute("j1", None, "b", axis=3),
                kd.Joint.revolute("j2", "b", "yoke", axis=1),
            ],
        )
    # welded massless leaves are fine, and a point mass counts as mass
    kd.Model([heavy, yoke], [kd.Joint.revolute("j1", None, "b"), kd.Joint.weld("w", "b", "yoke")])
    kd.Model(
        [heavy, point], [kd.Joint.revolute("j1", None, "b"), kd.Joint.prismatic("s", "b", "p")]
    )
