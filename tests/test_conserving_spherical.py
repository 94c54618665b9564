"""Springs and dampers on spherical (quaternion) joints under the energy-momentum scheme.

Oracles: kanedyn's rotation-vector map (quat_to_rotvec of dcm_to_quat), Kane's energy
of the same state (kd.kinetic_energy + kd.potential_energy, whose spring potential is
½ φᵀKφ), central differences (of φ, and of the discrete force for its Newton tangent),
the discrete dissipation recomputed here from the output quaternions, and RK4 runs of
Kane's equations at small steps.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.simulation.conserving import redundant, run, to_redundant
from kanedyn.simulation.conserving import step as em_step
from kanedyn.simulation.conserving.spherical import rotation_vector
from kanedyn.spatial import rotation as rot

K = np.array([3.0, 5.0, 2.0])
C = np.array([0.4, 0.2, 0.3])
KP0 = (0.0, 0.0)
KP = (1.5, 4.0)  # MuJoCo's radial terms (k₂, k₃), with an isotropic k


def ball_pair(damped: bool = False, gravity=(0.0, 0.0, 0.0), k=K, c=C, kp=(0.0, 0.0)) -> kd.Model:
    """A free hub and a body on a spherical joint with an anisotropic spring (and
    damper), offset joint points, rotated joint frames and products of inertia; ``kp``
    MuJoCo's radial terms ``(k₂, k₃)`` (with an isotropic ``k``)."""
    I, R = kd.inertia_tensor, kd.euler_to_dcm
    bodies = [
        kd.Body("hub", 10.0, I(4.0, 5.0, 6.0, 0.3, -0.2, 0.1)),
        kd.Body("arm", 2.0, I(0.2, 0.5, 0.6, 0.05, 0.0, 0.02), com=(0.4, 0.05, 0.0)),
    ]
    joints = [
        kd.Joint.free("root", "hub"),
        kd.Joint.spherical(
            "ball", "hub", "arm", inner_point=(0.5, 0.2, -0.1), outer_point=(-0.1, 0.0, 0.05),
            inner_rotation=R("312", (0.3, -0.2, 0.5)), outer_rotation=R("123", (0.1, 0.2, -0.3)),
            stiffness=k, damping=c if damped else np.zeros(3), stiffness_poly=kp,
        ),
    ]  # fmt: skip
    return kd.Model(bodies, joints, gravity=gravity)


def ball_state(m: kd.Model, phi=(0.6, -0.4, 0.9)) -> kd.State:
    s = m.set_joint(m.initial_state(), "root", rates=(0.2, -0.1, 0.3),
                    displacement_rates=(0.1, 0.0, -0.05))  # fmt: skip
    q = rot.rotvec_to_quat(np.asarray(phi, float))
    qq, uu = np.array(s.q), np.array(s.u)
    qq[m.coordinates("ball")] = q
    uu[m.speeds("ball")] = (0.5, -0.8, 0.4)
    return kd.State(qq, uu)


def test_rotation_vector_of_a_matrix():
    rng = np.random.default_rng(3)
    for phi in [*rng.uniform(-1.7, 1.7, (5, 3)), np.array([1e-8, 0, 0]), np.zeros(3)]:
        R = kd.quat_to_dcm(rot.rotvec_to_quat(phi))
        np.testing.assert_allclose(rotation_vector(R)[0], phi, atol=1e-13)
        np.testing.assert_allclose(rot.quat_to_rotvec(kd.dcm_to_quat(R)), phi, atol=1e-13)
    # the derivatives in s = axial(P) and c = (tr P - 1)/2 at a matrix off the manifold
    P = kd.quat_to_dcm(rot.rotvec_to_quat(np.array([0.4, -0.3, 0.8]))) + 0.05 * rng.standard_normal(
        (3, 3)
    )
    _, ds, dc = rotation_vector(P)
    eps = 1e-6
    for j, (b, c) in enumerate(((2, 1), (0, 2), (1, 0))):
        E = np.zeros((3, 3))
        E[b, c], E[c, b] = eps, -eps  # changes s_j by 2·½·eps·... = eps, c unchanged
        fd = (rotation_vector(P + E)[0] - rotation_vector(P - E)[0]) / (2 * eps)
        np.testing.assert_allclose(fd, ds[:, j], atol=1e-7)
    E = np.eye(3) * (2 * eps / 3)  # changes c by eps, s unchanged
    fd = (rotation_vector(P + E)[0] - rotation_vector(P - E)[0]) / (2 * eps)
    np.testing.assert_allclose(fd, dc, atol=1e-7)


def test_director_energy_is_kanes_with_the_spherical_spring():
    m = ball_pair(gravity=(0.0, -9.81, 0.0))
    s = ball_state(m)
    red = redundant(m)
    x, v = to_redundant(red, s)
    E = kd.kinetic_energy(m, s) + kd.potential_energy(m, s)
    assert red.spherical is not None
    assert red.spherical.potential(x) == pytest.approx(
        0.5 * np.sum(K * [0.6, -0.4, 0.9] ** np.array(2)), rel=1e-13
    )
    assert red.energy(x, v) == pytest.approx(E, rel=1e-13)


def test_spherical_spring_conserves_energy_and_momenta():
    m = ball_pair()
    s = ball_state(m)
    for reduction, T in (("full", 6.0), ("null-space", 2.0)):
        r = run(m, s, T, 0.05, reduction=reduction)
        E = r.energy
        assert np.max(np.abs(E - E[0])) < 1e-10 * abs(E[0])
        P, H = r.linear_momentum, r.angular_momentum
        assert np.max(np.abs(P - P[0])) < 1e-12 * np.max(np.abs(P[0]))
        assert np.max(np.abs(H - H[0])) < 1e-12 * np.max(np.abs(H[0]))
        assert np.max(r.constraint_residual) < 1e-10
        # the spring is working: its potential changes by far more than the tolerance
        V = [r.red.spherical.potential(x) for x in r.x]
        assert np.ptp(V) > 0.1 * abs(E[0])


def radial_potential(k, kp, quats):
    """``½ k r² + ⅓ k₂ r³ + ¼ k₃ r⁴`` of the rotation angles ``r`` of (scalar-last)
    quaternions, in closed form."""
    r = 2.0 * np.arctan2(np.linalg.norm(quats[:, :3], axis=1), np.abs(quats[:, 3]))
    return 0.5 * k * r**2 + kp[0] * r**3 / 3 + kp[1] * r**4 / 4


def test_polynomial_spherical_spring_conserves_energy():
    """MuJoCo's radial spring ``-(k + k₂ r + k₃ r²) φ``, undamped: the scheme's energy
    is conserved to round-off, with the angular momentum, and its spring potential is
    the closed form ``½ k r² + ⅓ k₂ r³ + ¼ k₃ r⁴`` of the output quaternions, while
    the radial terms exchange most of the energy."""
    k = 2.0
    m = ball_pair(k=np.full(3, k), kp=KP)
    s = ball_state(m, phi=(0.9, -0.6, 1.2))
    qi = m.coordinates("ball")
    tr = kd.simulate(m, s, 4.0, 0.02, method="energy-momentum")
    E = tr.run.energy
    assert np.max(np.abs(E - E[0])) < 1e-12 * E[0]
    V = [tr.run.red.spherical.potential(x) for x in tr.run.x]
    np.testing.assert_allclose(V, radial_potential(k, KP, tr.q[:, qi]), rtol=0, atol=1e-12 * E[0])
    assert np.ptp(radial_potential(0.0, KP, tr.q[:, qi])) > 0.5 * E[0]
    H = tr.run.angular_momentum
    assert np.max(np.abs(H - H[0])) < 1e-12 * np.max(np.abs(H[0]))


def test_spherical_damper_dissipates_exactly_the_discrete_dissipation():
    """E_{n+1} - E_n = -h ω̄ᵀCω̄ with ω̄ = axial(Π̄ᵀΔΠ)/h, Π = R_Gi_Go from the output
    quaternions; the energy falls monotonically; H is still conserved."""
    m = ball_pair(damped=True)
    s = ball_state(m)
    h = 0.05
    tr = kd.simulate(m, s, 5.0, h, method="energy-momentum")
    E = tr.run.energy
    assert np.all(np.diff(E) < 0.0)
    Pi = np.array([kd.quat_to_dcm(q) for q in tr.q[:, m.coordinates("ball")]])
    D = []
    for P0, P1 in zip(Pi[:-1], Pi[1:], strict=True):
        A = 0.5 * (P0 + P1).T @ (P1 - P0) / h
        w = 0.5 * np.array([A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1]])
        D.append(h * w @ (C * w))
    np.testing.assert_allclose(np.diff(E), -np.array(D), rtol=1e-8, atol=1e-12 * abs(E[0]))
    np.testing.assert_allclose(tr.run.dissipated[1:], np.cumsum(D), rtol=1e-8)
    H = tr.run.angular_momentum
    assert np.max(np.abs(H - H[0])) < 1e-12 * np.max(np.abs(H[0]))


@pytest.mark.parametrize(("damped", "poly"), [(False, False), (True, False), (True, True)])
def test_spherical_spring_converges_to_rk4_at_second_order(damped, poly):
    k = np.full(3, 3.0) if poly else K
    m = ball_pair(damped=damped, gravity=(0.0, -9.81, 0.0), k=k, kp=KP if poly else KP0)
    s = ball_state(m)
    T = 0.5
    ref = kd.simulate(m, s, T, 1e-3, output_every=T)
    err = []
    for h in (0.02, 0.01):
        tr = kd.simulate(m, s, T, h, method="energy-momentum", output_every=T)
        dq = tr.q[-1] - ref.q[-1]
        qi = m.coordinates("ball")
        if tr.q[-1][qi] @ ref.q[-1][qi] < 0:  # the same rotation either sign
            dq[qi] = tr.q[-1][qi] + ref.q[-1][qi]
        err.append(np.max(np.abs(dq)))
    assert err[1] < 1e-3
    assert 3.5 < err[0] / err[1] < 4.5


def central_jacobian(sph, x0, x1, h, eps):
    """∂force/∂x1 by fourth-order central differences over the coordinates it uses."""
    J = np.zeros((x0.size, x0.size))

    def F(y):
        return sph.force(x0, y, h)[0]

    for j in sph.depends_on:
        e = np.zeros(x0.size)
        e[j] = eps
        J[:, j] = (8.0 * (F(x1 + e) - F(x1 - e)) - (F(x1 + 2 * e) - F(x1 - 2 * e))) / (12 * eps)
    return J


@pytest.mark.parametrize(
    ("k", "c", "kp"),
    [
        (K, C, KP0),
        (np.array([7.0, 0.5, 1.5]), np.zeros(3), KP0),
        (np.zeros(3), np.array([1.0, 0.1, 2.5]), KP0),
        (np.full(3, 2.0), C, KP),
        (np.zeros(3), np.zeros(3), (-20.0, 60.0)),
    ],
)
def test_spherical_newton_tangent_is_the_derivative_of_the_force(k, c, kp):
    """SphericalSprings.jacobian against central differences of SphericalSprings.force:
    at random points off the constraint manifold; with the mean relative rotation zero
    (Π̄ symmetric: the small-|s| series of φ); and at x1 = x0 (|ΔΠ| = 0: D = ∇Ṽ(Π̄),
    where the differences straddle both of Gonzalez's branches). The radial terms'
    ``⅓ k₂ r³`` is twice but not three times differentiable at φ(Π̄) = 0: there the
    differences converge to the tangent at first order in ε, so they take a smaller ε
    and a tolerance of order k₂ ε."""
    m = ball_pair(damped=True, k=k, c=c, kp=kp)
    red = redundant(m)
    sph = red.spherical
    h = 0.05
    rng = np.random.default_rng(17)
    x, v = to_redundant(red, ball_state(m))
    cases = []
    for _ in range(3):
        x0 = x + 0.02 * rng.standard_normal(red.nx)
        cases.append((x0, x0 + h * v + 0.02 * rng.standard_normal(red.nx), 1e-4))
    a = np.array([0.3, -0.2, 0.25])
    xa, _ = to_redundant(red, ball_state(m, -a))
    xb, _ = to_redundant(red, ball_state(m, a))
    P = sph.Pi[0]
    Pbar = 0.5 * (sph.inv(xa)[P] + sph.inv(xb)[P])
    assert np.max(np.abs(Pbar - Pbar.T)) < 1e-15  # s(Π̄) = 0: the series branch
    radial = bool(np.any(kp))
    series_eps, tol = (1e-6, 1e-5) if radial else (1e-4, 1e-6)
    cases = [(*case, 1e-6) for case in cases]
    cases += [(xa, xb, series_eps, tol),
              (xa, xb + 1e-9 * rng.standard_normal(red.nx), series_eps, tol)]  # fmt: skip
    cases.append((x, x.copy(), 1e-3, 1e-6))
    for x0, x1, eps, tol in cases:
        J = sph.jacobian(x0, x1, h)
        fd = central_jacobian(sph, x0, x1, h, eps)
        assert np.max(np.abs(fd)) > 0.1
        np.testing.assert_allclose(J, fd, rtol=tol, atol=tol * np.max(np.abs(fd)))


def test_spherical_newton_converges_quadratically(monkeypatch):
    """The Newton residuals of one step with spring and damper: r_{k+1} <= r_k²
    (residuals of order one at the start) until round-off, in at most 5 iterations."""
    m = ball_pair(damped=True)
    stepper = em_step.Stepper(m, tol=1e-13)
    x, v = to_redundant(stepper.red, ball_state(m))
    residuals = []
    solve = em_step._equilibrated_solve

    def recording_solve(A, b):
        residuals.append(float(np.max(np.abs(b))))
        return solve(A, b)

    monkeypatch.setattr(em_step, "_equilibrated_solve", recording_solve)
    result = stepper.step(x, v, 0.05)
    assert result.iterations <= 5
    assert len(residuals) == result.iterations >= 3
    assert residuals[0] > 0.1
    for r0, r1 in zip(residuals[:-1], residuals[1:], strict=True):
        if r1 > 1e-12:
            assert r1 <= r0**2
