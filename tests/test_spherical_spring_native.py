"""Spherical joint springs on the arithmetic protocol (:func:`kanedyn.joints.spherical_spring_force`)
and on the native engine.

Oracles: the rotation vector and inverse right Jacobian of :mod:`kanedyn.spatial.rotation`
(``atan2`` and series, a separate implementation), finite differences of the potential
``V(φ)`` along ``q(t) = q ⊗ exp(ω t / 2)`` (``Q·ω = -dV/dt``), the small-angle closed form,
the dense engine, and the small-oscillation frequencies ``√(k_i / I_i)`` of a ball joint.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn import joints
from kanedyn.compiled import compile_model, supports
from kanedyn.spatial import rotation as rot

# 0.019 and 0.021: either side of the switch to the series of β(θ) (sin²(θ/2) = 1e-4)
ANGLES = [0.0, 1e-12, 1e-9, 1e-6, 1e-3, 0.019, 0.021, 0.3, 1.7, 3.0, np.pi - 1e-6, np.pi - 1e-9]
LAWS = {
    "isotropic": (np.full(3, 2.0), None),
    "anisotropic": (np.array([2.0, 3.0, 5.0]), None),
    "polynomial": (np.full(3, 1.5), np.array([0.7, 0.3])),
}


def _quat(rng: np.random.Generator, angle: float) -> np.ndarray:
    """A quaternion (x, y, z, w) of ``angle`` about a random axis, of random norm and
    sign (the law takes either hemisphere and any scale)."""
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    q = np.r_[np.sin(angle / 2) * axis, np.cos(angle / 2)]
    return q * rng.uniform(0.5, 2.0) * rng.choice([-1.0, 1.0])


def _potential(k, kp, q):
    return joints.spherical_spring(k, kp, rot.quat_to_rotvec(q))[0]


@pytest.mark.parametrize("law", LAWS)
def test_the_law_is_the_rotation_modules_formula(law):
    k, kp = LAWS[law]
    rng = np.random.default_rng(0)
    for angle in ANGLES:
        for _ in range(5):
            q = _quat(rng, angle)
            phi = rot.quat_to_rotvec(q)
            JinvT = rot.rotvec_rate_matrix_inv(phi).T
            r = np.linalg.norm(phi)
            radial = 0.0 if kp is None else kp[0] * r + kp[1] * r * r
            expected = -JinvT @ ((k + radial) * phi)  # MuJoCo's -(k + k₂ r + k₃ r²) φ
            got = joints.spherical_spring_force(k, kp, q)
            scale = max(np.abs(expected).max(), 1e-300)
            assert np.abs(got - expected).max() <= 1e-14 * scale + 1e-300, angle
            np.testing.assert_allclose(joints.quat_log(q)[0], phi, rtol=1e-15, atol=0)


def test_small_rotations_follow_the_closed_form():
    """``J_r⁻ᵀ = I - ½[φ]× + O(θ²)``: at θ = 1e-9 the force is ``-(Kφ - ½ φ × Kφ)`` to
    a relative 1e-18."""
    k = LAWS["anisotropic"][0]
    rng = np.random.default_rng(1)
    for _ in range(10):
        axis = rng.normal(size=3)
        phi = 1e-9 * axis / np.linalg.norm(axis)
        q = np.r_[np.sin(5e-10) * phi / 1e-9, np.cos(5e-10)]
        g = k * phi
        expected = -(g - 0.5 * np.cross(phi, g))
        np.testing.assert_allclose(joints.spherical_spring_force(k, None, q), expected,
                                   rtol=1e-14, atol=0)  # fmt: skip


@pytest.mark.parametrize("law", LAWS)
def test_the_force_is_minus_the_rate_of_the_potential(law):
    """``Q·ω = -dV/dt`` along ``q(t) = q ⊗ exp(ω t/2)`` (central differences)."""
    k, kp = LAWS[law]
    rng = np.random.default_rng(2)
    h = 1e-5
    for angle in (1e-2, 0.3, 1.7, 3.0):
        for _ in range(4):
            q = _quat(rng, angle)
            q = q / np.linalg.norm(q)
            w = rng.normal(size=3)
            Q = joints.spherical_spring_force(k, kp, q)
            ends = [rot.quat_multiply(q, rot.rotvec_to_quat(s * h * w)) for s in (1.0, -1.0)]
            dV = (_potential(k, kp, ends[0]) - _potential(k, kp, ends[1])) / (2 * h)
            assert abs(Q @ w + dV) <= 1e-8 * max(1.0, abs(dV)), (angle, Q @ w, -dV)


def _ball_chain() -> kd.Model:
    a = kd.Body("a", mass=1.3, inertia=np.diag([1.0, 2.0, 2.5]), com=(0.3, 0.1, -0.2))
    b = kd.Body("b", mass=0.7, inertia=np.diag([0.4, 0.5, 0.6]), com=(0.0, 0.2, 0.1))
    return kd.Model([a, b], [
        kd.Joint.spherical("s1", None, "a", stiffness=[2.0, 3.0, 5.0], damping=0.1),
        kd.Joint.spherical("s2", "a", "b", stiffness=1.5, stiffness_poly=(0.7, 0.3),
                           damping=0.2, inner_point=(0.5, 0.0, 0.0)),
    ], gravity=(0.0, 0.0, -9.81))  # fmt: skip


def test_native_accelerations_agree_with_the_dense_engine():
    model = _ball_chain()
    assert supports(model) is None
    cm = compile_model(model)
    rng = np.random.default_rng(3)
    for angle in ANGLES:
        for _ in range(3):
            q = np.zeros(model.nq)
            for qi in model.layout.quat_q:
                q[qi] = _quat(rng, angle)
            state = kd.State(q=q, u=rng.normal(size=model.n))
            dense = kd.forward_dynamics(model, state)
            np.testing.assert_allclose(cm.forward_dynamics(state), dense, rtol=0,
                                       atol=1e-12 * max(1.0, np.abs(dense).max()))  # fmt: skip


def test_a_torque_free_sprung_ball_joint_keeps_its_energy_natively():
    body = kd.Body("b", mass=1.0, inertia=np.diag([1.0, 2.0, 2.5]), com=(0.0, 0.0, 0.0))
    model = kd.Model([body], [kd.Joint.spherical("s", None, "b", stiffness=[2.0, 3.0, 5.0])],
                     gravity=(0.0, 0.0, 0.0))  # fmt: skip
    state = kd.State(q=np.r_[np.sin(1.0) * np.array([0.6, 0.0, 0.8]), np.cos(1.0)],
                     u=np.array([0.3, -0.5, 0.2]))  # fmt: skip
    traj = kd.simulate(model, state, 5.0, 1e-3, engine="compiled", progress=False)
    E = traj.total_energy
    assert np.ptp(E) < 1e-10 * abs(E[0])
    assert np.ptp(traj.q[:, 3]) > 0.1  # it swings


@pytest.mark.parametrize("law", ["anisotropic", "polynomial"])
def test_linearize_gives_the_small_oscillation_frequencies(law):
    """A body on a ball joint at its mass centre, K and the inertia diagonal: the modes
    about rest are ``√(k_i / I_i)`` (the radial terms are of higher order; their
    derivative at zero rotation is finite, and zero)."""
    k, kp = LAWS[law]
    inertia = np.array([1.0, 2.0, 2.5])
    body = kd.Body("b", mass=1.0, inertia=np.diag(inertia), com=(0.0, 0.0, 0.0))
    poly = {} if kp is None else {"stiffness_poly": tuple(kp)}
    joint = kd.Joint.spherical("s", None, "b", stiffness=k, **poly)
    model = kd.Model([body], [joint], gravity=(0.0, 0.0, 0.0))
    lin = kd.linearize(model, kd.State(q=[0.0, 0.0, 0.0, 1.0], u=np.zeros(3)))
    assert np.all(np.isfinite(lin.A))
    freq = np.sort(np.abs(lin.eigenvalues.imag))[::2]
    np.testing.assert_allclose(freq, np.sort(np.sqrt(k / inertia)), rtol=1e-12)
    np.testing.assert_allclose(lin.eigenvalues.real, 0.0, atol=1e-12)
