"""Tests of kanedyn.constraint_forces: joint reaction forces and torques.

Oracles: hand-derived rigid spins (including the welded-spin case of
refs/notes/42-kane-msd.md §12, whose true centripetal joint force is -13.636 N), the
weight of a tree at rest, and Newton-Euler for each subtree with the momentum rates
taken by finite differences of kd.kinematics along an accurate trajectory.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kanedyn as kd
from tests.strategies import (
    SETTINGS,
    joint_of_kind,
    random_body,
    random_loads,
    random_state,
    trees,
)

SEEDS = st.integers(0, 2**32 - 1)


def test_welded_spin_note_case():
    """§12's case: hub B0 (100 kg) on a free root at its mass centre, B1 (10 kg) welded
    with its mass centre 1.5 m out along x, spinning at 1 rad/s about z (a principal axis
    of both, so the spin is steady). B1 circles the system mass centre, which sits
    15/110 m from B0's, at radius 1.5·100/110 m: the weld pulls B1 inward with
    m ω² r = 10 · 1.5 · 100/110 = 13.636 N, i.e. F = -13.636 N along x. The torque about
    the weld point (B1's mass centre) is ω × I ω = 0."""
    b0 = kd.Body("B0", mass=100.0, inertia=kd.inertia_tensor(50.0, 60.0, 70.0))
    b1 = kd.Body("B1", mass=10.0, inertia=kd.inertia_tensor(1.0, 2.0, 2.5))
    model = kd.Model([b0, b1], [kd.Joint.free("root", outer="B0"),
                                kd.Joint.weld("weld", "B0", "B1", inner_point=(1.5, 0, 0))])  # fmt: skip
    state = model.set_joint(model.initial_state(), "root", rates=(0.0, 0.0, 1.0))
    cf = kd.constraint_forces(model, state).of("weld")
    np.testing.assert_allclose(cf["force"], [-1500.0 / 110.0, 0.0, 0.0], atol=1e-12)
    assert cf["force"][0] == pytest.approx(-13.636, abs=5e-4)
    np.testing.assert_allclose(cf["torque"], 0.0, atol=1e-12)
    np.testing.assert_allclose(cf["constraint_force"], cf["force"], atol=1e-12)
    # generalized constraint forces: the three Go rotation axes, then the Gi slide axes
    np.testing.assert_allclose(cf["generalized"], [0, 0, 0, -1500.0 / 110.0, 0, 0], atol=1e-12)
    # the free root transmits nothing
    np.testing.assert_allclose(kd.constraint_forces(model, state).force[0], 0.0, atol=1e-12)


def test_welded_spin_about_a_fixed_axis():
    """A hinge from N (axis z through o) carries A, and B is welded to A; no loads, so the
    spin rate ω stays constant (θ̈ = 0) and every mass centre accelerates centripetally:
    a_i = -ω² (r_i - o)⊥. Newton-Euler for the subtrees:
    weld:  F = m_B a_B,  T = ω × (I_B ω) + (r_B - o_w) × m_B a_B  (about the weld point o_w);
    hinge: F = Σ m_i a_i, T = Σ ω × (I_i ω) + (r_i - o) × m_i a_i, with T·z = 0."""
    rng = np.random.default_rng(3)
    a, b = random_body("A", rng), random_body("B", rng)
    hinge = kd.Joint.revolute("h", None, "A", axis=3, inner_point=(0.2, -0.1, 0.3),
                              outer_point=(0.1, 0.4, 0.0), outer_rotation=kd.euler_to_dcm(
                                  "123", (0.3, -0.5, 0.9)))  # fmt: skip
    weld = joint_of_kind("weld", "w", "A", "B", rng)
    model = kd.Model([a, b], [hinge, weld])
    w = 1.7
    state = model.set_joint(model.initial_state(), "h", angles=(0.4,), rates=(w,))
    np.testing.assert_allclose(kd.forward_dynamics(model, state), 0.0, atol=1e-12)
    kin = kd.kinematics(model, state)
    o = np.array(hinge.inner_point)
    omega = np.array([0.0, 0.0, w])
    acc, gyro = {}, {}
    for name in ("A", "B"):
        i = model.body_index(name)
        d = kin.r[i] - o
        acc[name] = -(w**2) * np.r_[d[:2], 0.0]
        I_N = kin.R_N_B[i] @ model.body(name).inertia @ kin.R_N_B[i].T
        gyro[name] = np.cross(omega, I_N @ omega)
    iB = model.body_index("B")
    iA = model.body_index("A")
    o_w = kin.p[iA] + kin.R_N_B[iA] @ weld.inner_point  # the weld point, fixed in A
    cf = kd.constraint_forces(model, state)
    mB, mA = b.mass, a.mass
    np.testing.assert_allclose(cf.of("w")["force"], mB * acc["B"], atol=1e-12)
    np.testing.assert_allclose(
        cf.of("w")["torque"], gyro["B"] + np.cross(kin.r[iB] - o_w, mB * acc["B"]), atol=1e-12
    )
    F_h = mA * acc["A"] + mB * acc["B"]
    T_h = sum(gyro[n] + np.cross(kin.r[model.body_index(n)] - o, m * acc[n])
              for n, m in (("A", mA), ("B", mB)))  # fmt: skip
    np.testing.assert_allclose(cf.of("h")["force"], F_h, atol=1e-12)
    np.testing.assert_allclose(cf.of("h")["torque"], T_h, atol=1e-12)
    assert abs(cf.of("h")["torque"][2]) < 1e-12


def test_gyrostat_on_a_hinge_needs_the_torque_omega_cross_h():
    """A rotor body (principal axes, embedded momentum h along body z) turned about N x
    at constant rate w by a hinge: dH/dt = ω × h = w h (x × z) = -w h y at zero angle,
    which only the hinge's constraint torque can supply."""
    h, w = 2.5, 0.8
    body = kd.Body("rotor", mass=1.0, inertia=kd.inertia_tensor(1.0, 1.0, 1.5),
                   embedded_momentum=(0, 0, h))  # fmt: skip
    model = kd.Model([body], [kd.Joint.revolute("h", None, "rotor", axis=1)])
    state = model.set_joint(model.initial_state(), "h", rates=(w,))
    np.testing.assert_allclose(kd.forward_dynamics(model, state), 0.0, atol=1e-14)
    cf = kd.constraint_forces(model, state).of("h")
    np.testing.assert_allclose(cf["constraint_torque"], [0.0, -w * h, 0.0], atol=1e-14)


def _at_rest_model():
    """A welded base carrying a welded body and, on a slider whose axis is horizontal, a
    third body: at rest nothing accelerates."""
    rng = np.random.default_rng(9)
    bodies = [random_body(n, rng) for n in ("base", "arm", "cart")]
    joints = [joint_of_kind("weld", "fix", None, "base", rng),
              joint_of_kind("weld", "w", "base", "arm", rng),
              joint_of_kind("slider1", "s", "arm", "cart", rng, springs=False)]  # fmt: skip
    probe = kd.Model(bodies, joints)
    kin = kd.kinematics(probe, probe.initial_state())
    k = probe.joint_index("s")
    axis = kin.R_N_Gi[k] @ np.eye(3)[:, int(joints[2].trn_seq[0]) - 1]
    g = np.cross(axis, rng.normal(size=3))
    g *= 9.81 / np.linalg.norm(g)
    return kd.Model(bodies, joints, gravity=g)


def test_reaction_at_a_fixed_root_is_the_weight():
    model = _at_rest_model()
    state = model.initial_state()
    np.testing.assert_allclose(kd.forward_dynamics(model, state), 0.0, atol=1e-12)
    kin = kd.kinematics(model, state)
    g = np.asarray(model.gravity)
    m = np.array([b.mass for b in model.bodies])
    cf = kd.constraint_forces(model, state).of("fix")
    o = kin.o[model.joint_index("fix")]
    np.testing.assert_allclose(cf["force"], -m.sum() * g, atol=1e-12)
    np.testing.assert_allclose(cf["constraint_force"], -m.sum() * g, atol=1e-12)
    np.testing.assert_allclose(
        cf["torque"], -sum(np.cross(kin.r[i] - o, m[i] * g) for i in range(3)), atol=1e-12
    )


def test_reaction_of_an_all_weld_tree_is_the_weight():
    rng = np.random.default_rng(10)
    bodies = [random_body(n, rng) for n in ("a", "b")]
    joints = [
        joint_of_kind("weld", "fix", None, "a", rng),
        joint_of_kind("weld", "w", "a", "b", rng),
    ]
    model = kd.Model(bodies, joints, gravity=(0, 0, -9.81))
    cf = kd.constraint_forces(model, model.initial_state())
    np.testing.assert_allclose(cf.force[0], [0, 0, 9.81 * sum(b.mass for b in bodies)])


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_constraint_wrench_has_no_component_along_free_axes(model, seed):
    """Ideal reactions do no work: Γ_freeᵀ T_c = 0 (free rotation axes R_N_Go Γ) and
    Δ_freeᵀ F_c = 0 (free slide axes R_N_Gi Δ); the constraint axes are orthogonal
    complements of the free ones for slides and for 1-DOF hinges."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    loads = random_loads(model, rng)
    cf = kd.constraint_forces(model, state, loads)
    kin = kd.kinematics(model, state)
    scale = 1.0 + np.abs(cf.force).max() + np.abs(cf.torque).max()
    for k, j in enumerate(model.joints):
        G = kin.R_N_Go[k] @ kin.Gamma[k][:, : j.rot_dof]
        D = kin.R_N_Gi[k] @ np.eye(3)[:, [int(c) - 1 for c in j.trn_seq[: j.trn_dof]]]
        assert np.abs(G.T @ cf.constraint_torque[k]).max(initial=0) < 1e-10 * scale
        assert np.abs(D.T @ cf.constraint_force[k]).max(initial=0) < 1e-10 * scale
        if j.rot_type == "spherical":
            assert np.abs(cf.constraint_torque[k]).max() < 1e-10 * scale
        if j.trn_dof == 3:
            assert np.abs(cf.constraint_force[k]).max() < 1e-10 * scale
        assert cf.axes[k].shape[1] == cf.generalized[k].size
        if j.rot_type == "gimbal":
            assert cf.generalized[k].size == 6 - j.ndof


def _fd5(values, h):
    v = np.asarray(values)
    return (v[0] - 8 * v[1] + 8 * v[3] - v[4]) / (12 * h)


def _body_loads(model, kin, loads):
    """Per-body external force and torque about the mass centre (N), gravity included."""
    F = np.array([b.mass * np.asarray(model.gravity) for b in model.bodies])
    T = np.zeros((model.nb, 3))
    for rec in loads:
        if isinstance(rec, kd.JointLoad):
            continue
        i = model.body_index(rec.body)
        R = kin.R_N_B[i]
        if isinstance(rec, kd.Force):
            f = R @ rec.force if rec.frame == "body" else np.asarray(rec.force)
            x = kin.r[i] if rec.point is None else kin.p[i] + R @ rec.point
            F[i] += f
            T[i] += np.cross(x - kin.r[i], f)
        else:
            T[i] += R @ rec.torque if rec.frame == "body" else np.asarray(rec.torque)
    return F, T


@SETTINGS
@given(model=trees(max_bodies=3), seed=SEEDS)
def test_joint_wrench_is_newton_euler_of_the_subtree(model, seed):
    """F_k = Σ_{i outboard} (dL_i/dt - F_i) and T_k = Σ (dH_i/dt - T_i + (r_i - o_k) ×
    (dL_i/dt - F_i)), with L_i = m_i v_i and H_i = I_i ω_i + h_i from kd.kinematics,
    differentiated along an accurate trajectory."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    loads = random_loads(model, rng)
    h = 2e-3
    traj = kd.simulate(model, state, 4 * h, h / 20, loads=loads, output_every=h, progress=False)
    kins = [kd.kinematics(model, traj.state(i)) for i in range(5)]
    mass = np.array([b.mass for b in model.bodies])
    L = [mass[:, None] * k.v for k in kins]
    H = [np.einsum("bij,bjk,blk,bl->bi", k.R_N_B, np.array([b.inertia for b in model.bodies]),
                   k.R_N_B, k.omega)
         + np.einsum("bij,bj->bi", k.R_N_B, np.array([b.embedded_momentum for b in model.bodies]))
         for k in kins]  # fmt: skip
    dL, dH = _fd5(L, h), _fd5(H, h)
    mid, kin = traj.state(2), kins[2]
    F, T = _body_loads(model, kin, loads)
    cf = kd.constraint_forces(model, mid, loads)
    scale = 1.0 + np.abs(dL).max() + np.abs(dH).max() + np.abs(F).max()
    for k, j in enumerate(model.joints):
        sub = [i for i in range(model.nb) if model.layout.path[i, k]]
        net = dL[sub] - F[sub]
        F_k = net.sum(axis=0)
        T_k = (dH[sub] - T[sub] + np.cross(kin.r[sub] - kin.o[k], net)).sum(axis=0)
        np.testing.assert_allclose(cf.force[k], F_k, atol=1e-6 * scale, err_msg=j.name)
        np.testing.assert_allclose(cf.torque[k], T_k, atol=1e-6 * scale, err_msg=j.name)
