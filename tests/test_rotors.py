"""Geared rotors (seed 004, the gear-train chapter) against hand calculations and a
Lagrange derivation written here directly in sympy.

The rotor on a joint spins at ``ω_R = ω_carrier + n q̇ a`` with inertia
``J_R = J a aᵀ + J_t (U - a aᵀ)``; its kinetic energy ``½ ω_Rᵀ J_R ω_R`` is all the
oracle needs.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.errors import ModelError

I1 = np.array([[0.05, 0.002, -0.001], [0.002, 0.2, 0.003], [-0.001, 0.003, 0.22]])
I2 = np.array([[0.08, 0.001, 0.0], [0.001, 0.02, -0.002], [0.0, -0.002, 0.09]])
C1, C2, P12 = np.array([0.3, 0.05, 0.0]), np.array([0.02, 0.25, 0.03]), np.array([0.6, 0.0, 0.1])
M1, M2, M3 = 2.0, 1.3, 0.7
I3 = np.array([[0.01, 0.0, 0.001], [0.0, 0.012, 0.0], [0.001, 0.0, 0.008]])
C3, P23 = np.array([0.1, 0.0, -0.05]), np.array([0.0, 0.5, 0.0])
GRAVITY = np.array([0.4, -1.0, -9.81])
R1, R2 = dict(inertia=2e-4, ratio=50.0, transverse=1e-4), dict(inertia=1e-4, ratio=-80.0, transverse=6e-5)  # fmt: skip
R3 = dict(inertia=5e-5, ratio=120.0, transverse=2e-5)


def arm(rotor1=None, rotor2=None, elbow_axis=1, gravity=GRAVITY, rotor3=None, wrist=False):
    """Shoulder about N's z, elbow about link1's x (or z): a spatial two-joint arm; with
    ``wrist``, a third joint about link2's y."""
    bodies = [kd.Body("link1", M1, I1, com=C1), kd.Body("link2", M2, I2, com=C2)]
    joints = [
        kd.Joint.revolute("shoulder", None, "link1", axis=3, rotor=rotor1),
        kd.Joint.revolute(
            "elbow", "link1", "link2", axis=elbow_axis, inner_point=P12, rotor=rotor2
        ),
    ]
    if wrist:
        bodies.append(kd.Body("link3", M3, I3, com=C3))
        joints.append(
            kd.Joint.revolute("wrist", "link2", "link3", axis=2, inner_point=P23, rotor=rotor3)
        )
    return kd.Model(bodies, joints, gravity=gravity)


def state_of(model, q, u):
    return kd.State(np.asarray(q, float), np.asarray(u, float))


# ------------------------------------------------------------------ the n²J limit by hand
def test_planar_rotor_reflects_n2J_and_couples_by_nJ():
    """Both joints about z, a rotor (J, n) on the elbow mounted on link 1: its speed is
    q̇1 + n q̇2, so ΔT = ½ J (q̇1 + n q̇2)² and ΔM = J [[1, n], [n, n²]] exactly."""
    J, n = 3e-4, 40.0
    base = arm(elbow_axis=3)
    geared = arm(rotor2=kd.Rotor(J, ratio=n, transverse=5e-5), elbow_axis=3)
    s = state_of(geared, [0.3, -1.1], [0.7, 0.2])
    dM = kd.mass_matrix(geared, s) - kd.mass_matrix(base, s)
    np.testing.assert_allclose(dM, J * np.array([[1.0, n], [n, n * n]]), rtol=1e-13, atol=1e-16)
    # the reflected-only rotor keeps n²J alone: the large-n limit at fixed n²J
    reflected = arm(rotor2=kd.Rotor(J, ratio=n, reflected_only=True), elbow_axis=3)
    dM_r = kd.mass_matrix(reflected, s) - kd.mass_matrix(base, s)
    np.testing.assert_allclose(dM_r, [[0, 0], [0, n * n * J]], rtol=1e-13, atol=1e-16)
    # the kinetic energy adds ½ J (q̇1 + n q̇2)²
    dT = kd.kinetic_energy(geared, s) - kd.kinetic_energy(base, s)
    assert dT == pytest.approx(0.5 * J * (0.7 + n * 0.2) ** 2, rel=1e-13)


def test_spatial_rotor_hand_calculation():
    """Elbow about link1's x, rotor axis a ⟂ z: ΔM = [[J_t, 0], [0, n²J]] (the shoulder
    turns the rotor about a transverse axis; the coupling z·J_R·a vanishes)."""
    J, n, Jt = 1e-4, -80.0, 6e-5
    s = state_of(arm(), [0.3, -1.1], [0.7, 0.2])
    dM = kd.mass_matrix(arm(rotor2=kd.Rotor(J, ratio=n, transverse=Jt)), s) - kd.mass_matrix(
        arm(), s
    )
    np.testing.assert_allclose(dM, [[Jt, 0.0], [0.0, n * n * J]], rtol=1e-12, atol=1e-18)


# ------------------------------------------------------------------ Lagrange in sympy
def lagrange_arm(rotor1, rotor2, rotor3=None):
    """M(q) and the forcing f(q, q̇) of the arm with a geared rotor on each joint, from
    L = T - V written out here (no kanedyn involved). With ``rotor3``, the three-joint arm
    (its wrist's rotor mounted on link 2)."""
    q1, q2, q3, qd1, qd2, qd3 = sm.symbols("q1 q2 q3 qd1 qd2 qd3", real=True)
    wrist = rotor3 is not None
    q = sm.Matrix([q1, q2, q3] if wrist else [q1, q2])
    qd = sm.Matrix([qd1, qd2, qd3] if wrist else [qd1, qd2])

    def Ry(t):
        return sm.Matrix([[sm.cos(t), 0, sm.sin(t)], [0, 1, 0], [-sm.sin(t), 0, sm.cos(t)]])

    def Rz(t):
        return sm.Matrix([[sm.cos(t), -sm.sin(t), 0], [sm.sin(t), sm.cos(t), 0], [0, 0, 1]])

    def Rx(t):
        return sm.Matrix([[1, 0, 0], [0, sm.cos(t), -sm.sin(t)], [0, sm.sin(t), sm.cos(t)]])

    M_ = sm.Matrix
    A1, A2 = Rz(q1), Rz(q1) * Rx(q2)
    r1 = A1 * M_(C1)
    r2 = A1 * M_(P12) + A2 * M_(C2)
    z, x1 = M_([0, 0, 1]), A1 * M_([1, 0, 0])
    w1 = qd1 * z
    w2 = w1 + qd2 * x1
    links = [(M1, I1, r1, w1, A1), (M2, I2, r2, w2, A2)]
    rotors = [(rotor1, sm.zeros(3, 1), z, qd1), (rotor2, w1, x1, qd2)]
    if wrist:
        A3 = A2 * Ry(q3)
        r3 = A1 * M_(P12) + A2 * M_(P23) + A3 * M_(C3)
        y2 = A2 * M_([0, 1, 0])
        w3 = w2 + qd3 * y2
        links.append((M3, I3, r3, w3, A3))
        rotors.append((rotor3, w2, y2, qd3))
    T = 0
    for m, I, r, w, A in links:
        v = r.jacobian(q) * qd
        T += sm.Rational(1, 2) * m * v.dot(v) + sm.Rational(1, 2) * (w.T * A * M_(I) * A.T * w)[0]
    # the rotors: ω_R = ω_carrier + n q̇ a, J_R = J a aᵀ + J_t (U - a aᵀ)
    for rot, w_c, a, qdot in rotors:
        J, n, Jt = rot["inertia"], rot["ratio"], rot["transverse"]
        w_R = w_c + n * qdot * a
        J_R = J * a * a.T + Jt * (sm.eye(3) - a * a.T)
        T += sm.Rational(1, 2) * (w_R.T * J_R * w_R)[0]
    V = -sum(m * M_(GRAVITY).dot(r) for m, _, r, _, _ in links)
    L = T - V
    p = sm.Matrix([sm.diff(L, v) for v in qd])
    M = p.jacobian(qd)
    f = sm.Matrix([sm.diff(L, v) for v in q]) - p.jacobian(q) * qd  # M q̈ = f
    args = (*q, *qd)
    return sm.lambdify(args, M, "numpy"), sm.lambdify(args, f, "numpy"), sm.lambdify(args, T)


@pytest.fixture(scope="module")
def lagrange():
    return lagrange_arm(R1, R2)


def test_geared_arm_matches_lagrange(lagrange):
    M_fn, f_fn, T_fn = lagrange
    model = arm(rotor1=kd.Rotor(**R1), rotor2=kd.Rotor(**R2))
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, u = rng.uniform(-2, 2, 2), rng.uniform(-3, 3, 2)
        s = state_of(model, q, u)
        M_ref = np.array(M_fn(*q, *u), float)
        f_ref = np.array(f_fn(*q, *u), float).ravel()
        np.testing.assert_allclose(kd.mass_matrix(model, s), M_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(kd.forcing(model, s), f_ref, rtol=1e-11, atol=1e-12)
        acc = np.linalg.solve(M_ref, f_ref)
        np.testing.assert_allclose(kd.forward_dynamics(model, s), acc, rtol=1e-10, atol=1e-11)
        assert kd.kinetic_energy(model, s) == pytest.approx(T_fn(*q, *u), rel=1e-12)
        # Kane's equations hold at the solution: Fr + Fr* = 0
        residual = kd.generalized_active_forces(model, s) + kd.generalized_inertia_forces(
            model, s, acc
        )
        np.testing.assert_allclose(residual, 0.0, atol=1e-11)


def test_three_joint_arm_gyroscopic_coupling():
    """The wrist's rotor rides on link 2, which turns about two axes (z and the elbow's
    a): its gyroscopic torque ω_C × (J_R ω_R) has components along the shoulder and elbow
    axes, so the full form differs from the n²J diagonal in M and in the forcing.
    (The elbow rotor's gyroscopic torque, along z × a, is normal to every axis that moves
    its carrier: it loads only the structure.)"""
    M_fn, f_fn, T_fn = lagrange_arm(R1, R2, R3)
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2), rotor3=kd.Rotor(**R3), wrist=True)
    plain = arm(
        kd.Rotor(**R1), kd.Rotor(**R2), rotor3=kd.Rotor(**R3, reflected_only=True), wrist=True
    )
    rng = np.random.default_rng(9)
    for _ in range(4):
        q, u = rng.uniform(-2, 2, 3), rng.uniform(-3, 3, 3)
        s = state_of(model, q, u)
        M_ref = np.array(M_fn(*q, *u), float)
        f_ref = np.array(f_fn(*q, *u), float).ravel()
        np.testing.assert_allclose(kd.mass_matrix(model, s), M_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(kd.forcing(model, s), f_ref, rtol=1e-11, atol=1e-12)
        assert kd.kinetic_energy(model, s) == pytest.approx(T_fn(*q, *u), rel=1e-12)
        # the n²J diagonal alone misses the coupling
        assert np.max(np.abs(kd.forcing(plain, s) - f_ref)) > 1e-4


def test_symbolic_kane_has_the_rotors(lagrange):
    M_fn, f_fn, _ = lagrange
    model = arm(rotor1=kd.Rotor(**R1), rotor2=kd.Rotor(**R2))
    eom = kd.symbolic.kane(model)
    fn = eom.lambdify()
    q, u = np.array([0.4, -0.9]), np.array([1.3, -0.6])
    M, f = fn(q, u)
    np.testing.assert_allclose(M, np.array(M_fn(*q, *u), float), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        np.ravel(f), np.array(f_fn(*q, *u), float).ravel(), rtol=1e-11, atol=1e-12
    )


def test_geared_arm_conserves_energy_natively():
    model = arm(rotor1=kd.Rotor(**R1), rotor2=kd.Rotor(**R2))
    s = state_of(model, [0.2, 0.5], [1.0, -2.0])
    assert kd.compiled.supports(model) is None
    traj = kd.simulate(model, s, 1.0, 0.001, progress=False)
    assert traj.engine == "native"
    E = traj.total_energy
    assert np.max(np.abs(E - E[0])) < 1e-9 * abs(E[0])
    msd = kd.simulate(model, s, 1.0, 0.001, formulation="msd", progress=False)
    E = msd.total_energy
    assert np.max(np.abs(E - E[0])) < 1e-9 * abs(E[0])


def test_symbolic_lagrange_has_the_rotors(lagrange):
    """kd.symbolic.lagrange: the rotors as massless bodies turning with their carriers
    plus n q̇ a, against the Lagrangian written here; the Christoffel symbols sum to C."""
    M_fn, f_fn, _ = lagrange
    model = arm(rotor1=kd.Rotor(**R1), rotor2=kd.Rotor(**R2))
    lag = kd.symbolic.lagrange(model)
    args = [*lag.q, *lag.u]
    M = sm.lambdify(args, lag.mass_matrix)
    f = sm.lambdify(args, lag.forcing)
    q, u = np.array([0.4, -0.9]), np.array([1.3, -0.6])
    np.testing.assert_allclose(np.array(M(*q, *u), float), M_fn(*q, *u), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        np.ravel(np.array(f(*q, *u), float)), np.ravel(f_fn(*q, *u)), rtol=1e-11, atol=1e-12
    )
    h = lag.christoffel
    C = sm.Matrix([sum(h[i, j, k] * lag.u[j] * lag.u[k] for j in range(2) for k in range(2))
                   for i in range(2)])  # fmt: skip
    diff = sm.lambdify(args, C - lag.C)(*q, *u)
    assert np.max(np.abs(np.array(diff, float))) < 1e-12
    # a reflected-only rotor: n²J on its joint's diagonal (the dense engine's)
    model = arm(rotor1=kd.Rotor(**R1), rotor2=kd.Rotor(**R2, reflected_only=True))
    M = sm.lambdify(args, kd.symbolic.lagrange(model).mass_matrix)(*q, *u)
    np.testing.assert_allclose(np.array(M, float), kd.mass_matrix(model, state_of(model, q, u)),
                               rtol=1e-12, atol=1e-14)  # fmt: skip


def test_rotor_validation():
    with pytest.raises(ModelError, match="Rotor.inertia must be positive"):
        kd.Rotor(0.0)
    with pytest.raises(ModelError, match="Rotor.ratio must be non-zero"):
        kd.Rotor(1e-4, ratio=0.0)
    with pytest.raises(ModelError, match="Rotor.body must be 'inner' or 'outer'"):
        kd.Rotor(1e-4, body="stator")
    with pytest.raises(ModelError, match="a geared rotor drives a 1-DOF hinge or slide"):
        kd.Joint.gimbal("g", None, "b", dof=2, rotor=kd.Rotor(1e-4))


def test_slide_and_outer_carrier_by_hand():
    """A ball-screw slide: ω_R = n ṡ a, so ΔM = n²J; a rotor mounted on the outer body of
    a hinge turns at (1 + n) q̇: ΔM = (1 + n)² J."""
    body = kd.Body("cart", 3.0, np.diag([0.1, 0.2, 0.3]))
    J, n = 2e-5, 600.0  # rad/m
    slide = kd.Model([body], [kd.Joint.prismatic("x", None, "cart", axis=1, rotor=kd.Rotor(J, n))])
    s = slide.initial_state()
    np.testing.assert_allclose(kd.mass_matrix(slide, s), [[3.0 + n * n * J]], rtol=1e-14)
    hinge = kd.Model(
        [body], [kd.Joint.revolute("h", None, "cart", axis=3, rotor=kd.Rotor(J, 7.0, body="outer"))]
    )
    np.testing.assert_allclose(
        kd.mass_matrix(hinge, hinge.initial_state()), [[0.3 + 64.0 * J]], rtol=1e-14
    )
