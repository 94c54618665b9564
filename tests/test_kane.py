"""Tests of kanedyn.dynamics.kane (Fr, Fr*, M, forward and inverse dynamics, energy, momentum)
and kanedyn.dynamics.loads.

Oracles: sympy.physics.mechanics KanesMethod on the same model (tests/sympy_oracle.py),
quantities rebuilt here from kd.kinematics (kinetic energy, momenta, load moments),
finite differences along accurate trajectories, and analytic solutions derived in the
comments. Every conservation check has a companion test that breaks the physics and
shows that the check then fails.
"""

from __future__ import annotations

import importlib
import weakref

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kanedyn as kd
import kanedyn.compiled
import kanedyn.dynamics.kane
import kanedyn.dynamics.loads
import kanedyn.dynamics.recursion
from kanedyn.errors import ModelError
from tests.strategies import (
    KINDS,
    SEQUENCES,
    SETTINGS,
    joint_of_kind,
    random_body,
    random_loads,
    random_state,
    tree,
    trees,
)

SEEDS = st.integers(0, 2**32 - 1)
# the package exports a function named ``partials``, which hides the submodule attribute
partials_module = importlib.import_module("kanedyn.dynamics.partials")
ENGINES = ("dense", "compiled")

# --------------------------------------------------------------------------- sympy oracle
_ORACLES: dict = {}


def oracle(key, make_model):
    """Cached (model, rhs) pair: building KanesMethod takes seconds per model."""
    if key not in _ORACLES:
        from tests.sympy_oracle import build

        model = make_model()
        _ORACLES[key] = (model, build(model)[0])
    return _ORACLES[key]


def assert_matches_oracle(model, rhs, n_states=3, seed=0):
    """M, forcing and M⁻¹f agree with KanesMethod to 1e-12 (relative to the largest
    entry when it exceeds 1) at random states."""
    rng = np.random.default_rng(seed)
    for _ in range(n_states):
        state = random_state(model, rng)
        M_o, f_o = rhs(state.q, state.u)
        M = kd.mass_matrix(model, state)
        f = -kd.inverse_dynamics(model, state, np.zeros(model.n))  # Fr + Fr* at zero ν̇
        acc_o = np.linalg.solve(M_o, f_o)
        acc = kd.forward_dynamics(model, state)
        for name, got, want in (("M", M, M_o), ("forcing", f, f_o), ("M⁻¹f", acc, acc_o)):
            err = np.abs(got - want).max()
            assert err <= 1e-12 * max(1.0, np.abs(want).max()), (name, err, state)


def _single(kind, seq="123", *, static=True, seed=1, springs=True):
    """One body joined to N by a joint of ``kind``, random points and rotations, gravity.
    Springs only where the oracle models them (1-DOF gimbals and slides)."""
    rng = np.random.default_rng(seed)
    body = random_body("a", rng)
    j = joint_of_kind(kind, "j0", None, "a", rng, seq=seq, springs=springs, static=static)
    if (j.rot_type == "gimbal" and j.rot_dof > 1) or j.rot_type == "spherical":
        k = np.array(j.stiffness, dtype=float)
        c = np.array(j.damping, dtype=float)
        k[: j.rot_dof], c[: j.rot_dof] = 0.0, 0.0
        j = attrs.evolve(j, stiffness=k, damping=c)
    return kd.Model([body], [j], gravity=(0.3, -9.81, 1.2))


def _on_hinge(kind, seq="123", seed=2):
    """A body on a damped hinge from N, carrying a second body through ``kind``."""
    rng = np.random.default_rng(seed)
    a, b = random_body("a", rng), random_body("b", rng)
    j0 = joint_of_kind("hinge", "j0", None, "a", rng, seq="231")
    j1 = joint_of_kind(kind, "j1", "a", "b", rng, seq=seq, springs=False)
    return kd.Model([a, b], [j0, j1], gravity=(0.0, -9.81, 0.5))


def _two_spherical():
    rng = np.random.default_rng(3)
    a, b = random_body("a", rng), random_body("b", rng)
    joints = [
        kd.Joint.spherical("s0", None, "a", inner_point=(0, 0, 0.1), outer_point=(0, 0, 0.8)),
        kd.Joint.spherical("s1", "a", "b", inner_point=(0.1, 0, -0.4), outer_point=(0, 0.2, 0.5),
                           inner_rotation=kd.euler_to_dcm("312", (0.3, -0.2, 0.7))),
    ]  # fmt: skip
    return kd.Model([a, b], joints, gravity=(0, 0, -9.81))


def _slider2_hinge():
    """A body on a 2-DOF slider (sprung, damped) plus a hinge, in one joint."""
    rng = np.random.default_rng(4)
    j = kd.Joint("sh", None, "a", rot_dof=1, rot_seq="312", trn_dof=2, trn_seq="231",
                 inner_rotation=kd.euler_to_dcm("123", (0.2, 0.4, -0.3)),
                 outer_point=(0.3, -0.2, 0.1), stiffness=(2.0, 5.0, 3.0), damping=(0.1, 0.2, 0.3))  # fmt: skip
    return kd.Model([random_body("a", rng)], [j], gravity=(0, -9.81, 0))


@pytest.mark.parametrize(
    ("key", "make"),
    [
        ("double_pendulum", kd.examples.double_pendulum),
        pytest.param("two_spherical", _two_spherical, marks=pytest.mark.slow),
        ("slider2_hinge", _slider2_hinge),
        ("hub_with_panels", kd.examples.hub_with_panels),
    ],
)
def test_oracle_named_models(key, make):
    model, rhs = oracle(key, make)
    assert_matches_oracle(model, rhs)


@pytest.mark.parametrize(
    "kind", ["hinge", "spherical", "slider1", "slider2", "slider3", "gimbal_slider", "free"]
)
def test_oracle_joint_kinds(kind):
    model, rhs = oracle(("single", kind), lambda: _single(kind, seq="231"))
    assert_matches_oracle(model, rhs)


def test_oracle_weld_and_fixed_root():
    """A weld inside the tree, and a root welded to N carrying a hinge."""
    rng = np.random.default_rng(5)

    def make():
        bodies = [random_body(n, rng) for n in ("base", "a", "b")]
        joints = [
            joint_of_kind("weld", "fix", None, "base", rng),
            joint_of_kind("hinge", "h", "base", "a", rng, seq="312"),
            joint_of_kind("weld", "w", "a", "b", rng),
        ]
        return kd.Model(bodies, joints, gravity=(0.0, -9.81, 0.0))

    model, rhs = oracle("weld", make)
    assert model.n == 1
    assert_matches_oracle(model, rhs)


@pytest.mark.parametrize("dof", [2, 3])
@pytest.mark.parametrize("seq", SEQUENCES)
def test_oracle_gimbals_all_sequences(seq, dof):
    kind = f"gimbal{dof}"
    model, rhs = oracle(("gimbal", kind, seq), lambda: _single(kind, seq, static=False))
    assert_matches_oracle(model, rhs)


@pytest.mark.slow
@pytest.mark.parametrize("dof", [2, 3])
@pytest.mark.parametrize("seq", SEQUENCES)
def test_oracle_gimbals_static_rotations_on_moving_body(seq, dof):
    kind = f"gimbal{dof}"
    model, rhs = oracle(("gimbal-static", kind, seq), lambda: _single(kind, seq, static=True))
    assert_matches_oracle(model, rhs)
    model, rhs = oracle(("on-hinge", kind, seq), lambda: _on_hinge(kind, seq))
    assert_matches_oracle(model, rhs)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["spherical", "slider3", "gimbal_slider", "weld"])
def test_oracle_joint_kinds_on_moving_body(kind):
    model, rhs = oracle(("on-hinge", kind), lambda: _on_hinge(kind, "321"))
    assert_matches_oracle(model, rhs)


# --------------------------------------------------------------------------- identities
def _T_from_kinematics(model, state):
    """½ Σ ωᵀ I ω + m v·v, rebuilt from kd.kinematics."""
    kin = kd.kinematics(model, state)
    T = 0.0
    for i, b in enumerate(model.bodies):
        w_B = kin.R_N_B[i].T @ kin.omega[i]
        T += 0.5 * w_B @ b.inertia @ w_B + 0.5 * b.mass * kin.v[i] @ kin.v[i]
    return T


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_mass_matrix_symmetric_positive_definite(model, seed):
    state = random_state(model, np.random.default_rng(seed))
    M = kd.mass_matrix(model, state)
    assert M.shape == (model.n, model.n)
    np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-13 * max(1.0, np.abs(M).max()))
    if model.n:
        assert np.linalg.eigvalsh(M).min() > 0.0
        np.linalg.cholesky(M)


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_mass_matrix_equals_inverse_dynamics_columns(model, seed):
    """Column r of M is the generalized force needed for ν̇ = e_r at zero speed, less
    the one needed for ν̇ = 0 (gravity and springs)."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng, at_rest=True)
    M = kd.mass_matrix(model, state)
    tau0 = kd.inverse_dynamics(model, state, np.zeros(model.n))
    cols = [kd.inverse_dynamics(model, state, e) - tau0 for e in np.eye(model.n)]
    M_id = np.array(cols).T if cols else np.zeros((0, 0))
    np.testing.assert_allclose(M_id, M, rtol=0, atol=1e-12 * max(1.0, np.abs(M).max(initial=0)))
    # also at a moving state: Fr* is affine in ν̇ with slope -M
    moving = kd.State(state.q, rng.uniform(-1, 1, model.n))
    Fs0 = kd.generalized_inertia_forces(model, moving, np.zeros(model.n))
    for r, e in enumerate(np.eye(model.n)):
        col = Fs0 - kd.generalized_inertia_forces(model, moving, e)
        np.testing.assert_allclose(col, M[:, r], rtol=0, atol=1e-11 * max(1.0, np.abs(M).max()))


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_fr_plus_fr_star_vanishes_at_forward_dynamics_solution(model, seed):
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    loads = random_loads(model, rng)
    acc = kd.forward_dynamics(model, state, loads)
    Fr = kd.generalized_active_forces(model, state, loads)
    Fr_star = kd.generalized_inertia_forces(model, state, acc)
    scale = max(1.0, np.abs(Fr).max(initial=0), np.abs(Fr_star).max(initial=0))
    np.testing.assert_allclose(Fr + Fr_star, 0.0, atol=1e-11 * scale)
    np.testing.assert_allclose(
        kd.inverse_dynamics(model, state, acc, loads), 0.0, atol=1e-11 * scale
    )


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_kinetic_energy_is_half_nu_M_nu(model, seed):
    state = random_state(model, np.random.default_rng(seed))
    M = kd.mass_matrix(model, state)
    T = _T_from_kinematics(model, state)
    assert kd.kinetic_energy(model, state) == pytest.approx(T, rel=1e-12, abs=1e-14)
    assert 0.5 * state.u @ M @ state.u == pytest.approx(T, rel=1e-11, abs=1e-14)


def _external_wrench(model, state, loads):
    """Σ F and Σ T + (x - c) × F about the system mass centre c, from kd.kinematics."""
    kin = kd.kinematics(model, state)
    m = np.array([b.mass for b in model.bodies])
    c = m @ kin.r / m.sum()
    F_tot, T_tot = np.zeros(3), np.zeros(3)
    for rec in loads:
        i = model.body_index(rec.body)
        R = kin.R_N_B[i]
        if isinstance(rec, kd.Force):
            f = R @ rec.force if rec.frame == "body" else np.asarray(rec.force)
            x = kin.r[i] if rec.point is None else kin.p[i] + R @ rec.point
            F_tot += f
            T_tot += np.cross(x - c, f)
        else:
            T_tot += R @ rec.torque if rec.frame == "body" else np.asarray(rec.torque)
    return F_tot, T_tot


def _fd5(values, h):
    """Central 5-point derivative at the middle of 5 equally spaced samples."""
    v = np.asarray(values)
    return (v[0] - 8 * v[1] + 8 * v[3] - v[4]) / (12 * h)


def _momentum_rate_fd(model, state, loads, h=2e-3, substeps=20):
    traj = kd.simulate(model, state, 4 * h, h / substeps, loads=loads, output_every=h,
                       progress=False)  # fmt: skip
    assert traj.t.size == 5
    PH = [kd.momentum(model, traj.state(i)) for i in range(5)]
    return traj.state(2), _fd5([p for p, _ in PH], h), _fd5([H for _, H in PH], h)


@settings(SETTINGS, max_examples=10)
@given(model=trees(roots=("free",), gravity=False), seed=SEEDS)
def test_momentum_rate_equals_external_wrench(model, seed):
    """dP/dt = ΣF and dH/dt = Σ T + (x - c) × F about the system mass centre c, on free
    trees with internal springs, dampers and actuators, by finite differences."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    loads = [ld for ld in random_loads(model, rng) if not isinstance(ld, kd.JointLoad)]
    loads.append(kd.Torque(model.bodies[0].name, rng.uniform(-1, 1, 3)))
    mid, dP, dH = _momentum_rate_fd(model, state, loads + [kd.JointLoad(j.name, np.ones(j.ndof))
                                                           for j in model.joints[1:] if j.ndof])  # fmt: skip
    F, T = _external_wrench(model, mid, loads)
    np.testing.assert_allclose(dP, F, rtol=0, atol=1e-7 * (1 + np.abs(F).max()))
    np.testing.assert_allclose(dH, T, rtol=0, atol=1e-7 * (1 + np.abs(T).max()))


# --------------------------------------------------------------------------- breaking the physics
def _drop_remainders(monkeypatch):
    """Break Kane's equations: zero the remainder (bias) accelerations α_r, a_r."""
    original = partials_module.bias_accelerations

    def broken(model, kin):
        return 0.0 * original(model, kin)

    monkeypatch.setattr(partials_module, "bias_accelerations", broken)
    monkeypatch.setattr(kanedyn.dynamics.kane, "bias_accelerations", broken)
    # the compiled engine's remainder terms (traced at compile time: clear the cache)
    monkeypatch.setattr(kanedyn.dynamics.recursion, "remainder", lambda J, vk: [0.0] * 6)
    monkeypatch.setattr(kanedyn.compiled.runtime, "_CACHE", weakref.WeakKeyDictionary())


def _damping_per_speed(model):
    c = np.zeros(model.n)
    for j in model.joints:
        c[model.speeds(j.name)] = j.damping
    return c


def _flip_dampers(monkeypatch):
    """Break the dampers: they push with the motion instead of against it."""
    original = kanedyn.dynamics.loads.joint_spring_forces

    def broken(model, q, u, *args, **kwargs):
        return original(model, q, u, *args, **kwargs) + 2.0 * _damping_per_speed(model) * u

    monkeypatch.setattr(kanedyn.dynamics.loads, "joint_spring_forces", broken)
    traced = kanedyn.compiled.kernels.Trace.generalized_forces

    def broken_traced(self):
        Q = traced(self)
        c = _damping_per_speed(self.model)
        return [Qr + 2.0 * c[r] * self.u[r] for r, Qr in enumerate(Q)]

    monkeypatch.setattr(kanedyn.compiled.kernels.Trace, "generalized_forces", broken_traced)
    monkeypatch.setattr(kanedyn.compiled.runtime, "_CACHE", weakref.WeakKeyDictionary())


# --------------------------------------------------------------------------- conservation
def _spatial_chain():
    model = kd.examples.chain(3, spatial=True)
    state = model.initial_state()
    for k, j in enumerate(model.joints):
        state = model.set_joint(state, j.name, angles=(0.6, -0.4 + 0.3 * k), rates=(1.0, -0.5))
    return model, state


def energy_convergence_slope(model, state, engine, dts=(0.005, 0.0025, 0.00125), t_final=2.0):
    """Log-log slope of |E(t_final) - E(0)| against the RK4 step."""
    errs = []
    for dt in dts:
        traj = kd.simulate(model, state, t_final, dt, output_every=t_final, progress=False,
                           engine=engine)  # fmt: skip
        E = traj.total_energy
        errs.append(abs(E[-1] - E[0]))
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    return slope, errs


@pytest.mark.parametrize("engine", ENGINES)
def test_undamped_energy_error_converges_at_order_4(engine):
    """RK4's global error is O(dt⁴), so is the energy error of a conservative system.
    Steps are chosen so the errors sit far above round-off (1e-12 J here)."""
    slope, errs = energy_convergence_slope(*_spatial_chain(), engine)
    assert min(errs) > 1e-10
    assert 3.6 < slope < 4.4, (slope, errs)


@pytest.mark.parametrize("engine", ENGINES)
def test_energy_convergence_check_fails_without_remainder_terms(monkeypatch, engine):
    _drop_remainders(monkeypatch)
    slope, errs = energy_convergence_slope(*_spatial_chain(), engine)
    assert not 3.6 < slope < 4.4, (slope, errs)


def _damped_hub():
    model = kd.examples.hub_with_panels(stiffness=50.0, damping=0.5)
    state = model.set_joint(model.initial_state(), "root", rates=(0.1, 0.3, -0.2),
                            displacement_rates=(0.05, 0.0, 0.0))  # fmt: skip
    state = model.set_joint(state, "hinge_left", angles=(0.3,), rates=(0.5,))
    state = model.set_joint(state, "hinge_right", angles=(-0.2,), rates=(-0.4,))
    return model, state


def energy_decreases(model, state, engine, t_final=10.0, dt=0.01):
    """True if the total energy never rises (beyond round-off) and falls overall."""
    traj = kd.simulate(model, state, t_final, dt, output_every=0.05, progress=False,
                       engine=engine)  # fmt: skip
    E = traj.total_energy
    tol = 1e-12 * abs(E[0])
    return bool(np.all(np.diff(E) <= tol) and E[-1] < E[0] - 1e-3 * abs(E[0])), E


@pytest.mark.parametrize("engine", ENGINES)
def test_dampers_strictly_lower_energy(engine):
    ok, E = energy_decreases(*_damped_hub(), engine)
    assert ok, E


@pytest.mark.parametrize("engine", ENGINES)
def test_damper_check_fails_when_dampers_inject_energy(monkeypatch, engine):
    _flip_dampers(monkeypatch)
    ok, _ = energy_decreases(*_damped_hub(), engine)
    assert not ok


def _free_tree_with_springs():
    model = tree([0, 0, 1, 2], ["free", "hinge", "gimbal2", "spherical", "gimbal_slider"],
                 ["123", "231", "312", "123", "321"], seed=11, springs=True, embedded=True)  # fmt: skip
    return model, random_state(model, np.random.default_rng(12))


def momentum_drift(model, state, loads=None, t_final=3.0):
    traj = kd.simulate(model, state, t_final, 0.05, method="DOP853", rtol=1e-11, atol=1e-12,
                       loads=loads, progress=False)  # fmt: skip
    P, H = traj.linear_momentum, traj.angular_momentum
    dP = np.abs(P - P[0]).max() / max(1.0, np.abs(P[0]).max())
    dH = np.abs(H - H[0]).max() / max(1.0, np.abs(H[0]).max())
    return dP, dH


@pytest.mark.parametrize("make", [_damped_hub, _free_tree_with_springs])
def test_internal_springs_and_dampers_conserve_momentum(make):
    dP, dH = momentum_drift(*make())
    assert dP < 1e-8 and dH < 1e-8, (dP, dH)


def test_momentum_check_fails_with_a_spurious_external_torque():
    model, state = _free_tree_with_springs()
    _, dH = momentum_drift(model, state, loads=[kd.Torque("b2", (0.0, 0.01, 0.0))])
    assert dH > 1e-4


def test_momentum_check_fails_without_remainder_terms(monkeypatch):
    _drop_remainders(monkeypatch)
    dP, dH = momentum_drift(*_free_tree_with_springs())
    assert max(dP, dH) > 1e-4


@pytest.mark.slow
@SETTINGS
@given(model=trees(max_bodies=3, roots=("free", "weld", "spherical", "hinge")), seed=SEEDS)
def test_undamped_energy_conserved_on_random_trees(model, seed):
    """Springs of every joint kind (spherical ones on the rotation vector) and gravity:
    with the dampers removed, T + V is constant to integration accuracy."""
    model = kd.Model(
        list(model.bodies),
        [attrs.evolve(j, damping=np.zeros(j.ndof)) for j in model.joints],
        gravity=model.gravity,
    )
    state = random_state(model, np.random.default_rng(seed), speed=0.5)
    traj = kd.simulate(model, state, 1.0, 0.05, method="DOP853", rtol=1e-11, atol=1e-12,
                       progress=False)  # fmt: skip
    E = traj.total_energy
    scale = max(1.0, np.abs(traj.kinetic_energy).max(), np.abs(traj.potential_energy).max())
    assert np.abs(E - E[0]).max() < 1e-8 * scale


# --------------------------------------------------------------------------- analytic cases
def test_torque_free_axisymmetric_body_precession():
    """Euler's equations for I1 = I2 ≠ I3 and no torque: ω3 is constant and
    ω̇1 = -λ ω2, ω̇2 = λ ω1 with λ = (I3 - I1) ω3 / I1, so (ω1, ω2) turns in body axes
    at the rate λ. The body z axis cones about H in N at |H| / I1."""
    I1, I3 = 2.0, 3.0
    body = kd.Body("b", mass=5.0, inertia=kd.inertia_tensor(I1, I1, I3))
    model = kd.Model([body], [kd.Joint.free("root", outer="b")])
    w0 = np.array([0.3, -0.1, 2.0])
    state = model.set_joint(model.initial_state(), "root", quaternion=(0.1, 0.2, 0.3, 0.9),
                            rates=w0)  # fmt: skip
    traj = kd.simulate(model, state, 10.0, 0.01, output_every=0.05, progress=False)
    w = traj.body("b").omega
    lam = (I3 - I1) * w0[2] / I1
    angle = np.unwrap(np.arctan2(w[:, 1], w[:, 0]))
    assert np.polyfit(traj.t, angle, 1)[0] == pytest.approx(lam, rel=1e-8)
    np.testing.assert_allclose(w[:, 2], w0[2], atol=1e-10)
    # inertial nutation: the body z axis turns about H at |H| / I1
    H = traj.angular_momentum[0]
    e3 = traj.body("b").R_N_B[:, :, 2]
    n = H / np.linalg.norm(H)
    a = np.cross(n, [1.0, 0.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(n, a)
    phi = np.unwrap(np.arctan2(e3 @ b, e3 @ a))
    assert np.polyfit(traj.t, phi, 1)[0] == pytest.approx(np.linalg.norm(H) / I1, rel=1e-8)


def test_compound_pendulum_small_oscillation_period():
    """A rigid body on a hinge (axis N z) under gravity g along -y: small oscillations
    about the hanging equilibrium have T = 2π √(I_pivot / (m g l)), with l the distance
    of the mass centre from the axis and I_pivot = nᵀ I n + m l² about the axis."""
    rng = np.random.default_rng(7)
    m, g = 2.5, 9.81
    inertia = kd.inertia_tensor(0.3, 0.4, 0.5, Ixy=0.02, Ixz=-0.01, Iyz=0.03)
    body = kd.Body("b", mass=m, inertia=inertia, com=(0.1, 0.7, -0.2))
    R_Go_Bo = kd.euler_to_dcm("312", rng.uniform(-1, 1, 3))
    joint = kd.Joint.revolute("h", None, "b", axis=3, outer_point=(0.05, -0.1, 0.3),
                              outer_rotation=R_Go_Bo)  # fmt: skip
    model = kd.Model([body], [joint], gravity=(0.0, -g, 0.0))
    n = R_Go_Bo.T @ [0.0, 0.0, 1.0]  # axis in body components
    d = body.com - joint.outer_point
    d_perp = d - (d @ n) * n
    l = np.linalg.norm(d_perp)
    I_pivot = n @ inertia @ n + m * l**2
    period = 2 * np.pi * np.sqrt(I_pivot / (m * g * l))
    c0 = R_Go_Bo @ d_perp  # mass centre direction in Go at zero angle
    theta_eq = -0.5 * np.pi - np.arctan2(c0[1], c0[0])
    state = model.set_joint(model.initial_state(), "h", angles=(theta_eq + 1e-4,))
    dt = 2.0**-7  # binary output step: the output grid i·dt is exact
    t_final = dt * np.ceil(5 * period / dt)
    traj = kd.simulate(model, state, t_final, dt, method="DOP853", rtol=1e-12,
                       atol=1e-14, progress=False)  # fmt: skip
    x = traj.q[:, 0] - theta_eq
    i = np.nonzero((x[:-1] > 0) & (x[1:] <= 0))[0]
    crossings = traj.t[i] + (traj.t[i + 1] - traj.t[i]) * x[i] / (x[i] - x[i + 1])
    measured = np.mean(np.diff(crossings))
    assert len(crossings) >= 4
    assert measured == pytest.approx(period, rel=1e-6)


# --------------------------------------------------------------------------- loads
def _loads_model():
    model = tree([0, 1], ["free", "gimbal_slider", "spherical"], ["123", "231", "312"], seed=21,
                 springs=True, embedded=True, gravity=True)  # fmt: skip
    return model, random_state(model, np.random.default_rng(22))


def Fr(model, state, loads):
    return kd.generalized_active_forces(model, state, loads)


def test_force_at_point_equals_force_at_mass_centre_plus_moment():
    model, state = _loads_model()
    kin = kd.kinematics(model, state)
    f, point = np.array([0.4, -1.2, 0.7]), np.array([0.3, 0.2, -0.5])
    for i, b in enumerate(model.bodies):
        arm = kin.R_N_B[i] @ (point - b.com)
        direct = Fr(model, state, [kd.Force(b.name, f, point=point)])
        moved = Fr(model, state, [kd.Force(b.name, f), kd.Torque(b.name, np.cross(arm, f))])
        np.testing.assert_allclose(direct, moved, atol=1e-12)
        # the point default is the mass centre
        np.testing.assert_allclose(Fr(model, state, [kd.Force(b.name, f, point=b.com)]),
                                   Fr(model, state, [kd.Force(b.name, f)]), atol=1e-12)  # fmt: skip


def test_body_frame_loads_equal_rotated_N_frame_loads():
    model, state = _loads_model()
    kin = kd.kinematics(model, state)
    f, tq, point = np.array([0.4, -1.2, 0.7]), np.array([-0.3, 0.8, 0.1]), np.array([0.1, 0.2, 0.3])
    for i, b in enumerate(model.bodies):
        R = kin.R_N_B[i]
        a = Fr(model, state, [kd.Force(b.name, f, point=point, frame="body"),
                              kd.Torque(b.name, tq, frame="body")])  # fmt: skip
        c = Fr(model, state, [kd.Force(b.name, R @ f, point=point), kd.Torque(b.name, R @ tq)])
        np.testing.assert_allclose(a, c, atol=1e-12)


def test_loads_are_linear_and_gravity_is_a_force_at_the_mass_centre():
    model, state = _loads_model()
    g = np.asarray(model.gravity)
    no_g = kd.Model(list(model.bodies), list(model.joints))
    weights = [kd.Force(b.name, b.mass * g) for b in model.bodies]
    np.testing.assert_allclose(Fr(model, state, None), Fr(no_g, state, weights), atol=1e-12)


@pytest.mark.parametrize("kind", ["hinge", "gimbal2", "gimbal3", "spherical", "slider2",
                                  "gimbal_slider"])  # fmt: skip
def test_joint_load_equals_equal_and_opposite_pair(kind):
    """JointLoad τ on a joint ≡ a torque T on Bo and -T on Bi, with T chosen so that its
    components on the free axes give τ (T = R_N_Go Γ (ΓᵀΓ)⁻¹ τ, Γ from
    kd.rotation.euler_gamma), plus for slides a force f on Bo and -f on Bi applied at
    the same point (the joint point), f = R_N_Gi Δ τ_s."""
    rng = np.random.default_rng(31)
    a, b = random_body("a", rng), random_body("b", rng)
    j0 = joint_of_kind("free", "j0", None, "a", rng)
    j1 = joint_of_kind(kind, "j1", "a", "b", rng, seq="313", springs=True)
    model = kd.Model([a, b], [j0, j1], gravity=(0, -9.81, 0))
    state = random_state(model, rng)
    tau = rng.uniform(-1, 1, j1.ndof)
    kin = kd.kinematics(model, state)
    ia, ib = model.body_index("a"), model.body_index("b")
    q1 = state.q[model.coordinates("j1")]
    R_N_Gi = kin.R_N_B[ia] @ j1.inner_rotation
    if j1.rot_type == "spherical":
        R_Gi_Go, Gamma = kd.quat_to_dcm(q1[:4]), np.eye(3)
    else:
        angles = np.zeros(3)
        angles[: j1.rot_dof] = q1[: j1.rot_dof]
        R_Gi_Go = kd.euler_to_dcm(j1.rot_seq, angles)
        Gamma = kd.rotation.euler_gamma(j1.rot_seq, angles)[:, : j1.rot_dof]
    pair = []
    if j1.rot_dof:
        G_N = R_N_Gi @ R_Gi_Go @ Gamma
        T = G_N @ np.linalg.solve(Gamma.T @ Gamma, tau[: j1.rot_dof])
        pair += [kd.Torque("b", T), kd.Torque("a", -T)]
    if j1.trn_dof:
        axes = [int(c) - 1 for c in j1.trn_seq[: j1.trn_dof]]
        f = R_N_Gi @ np.eye(3)[:, axes] @ tau[j1.rot_dof :]
        o = kin.p[ib] + kin.R_N_B[ib] @ j1.outer_point  # the joint point (Go origin)
        pair += [kd.Force("b", f, point=kin.R_N_B[ib].T @ (o - kin.p[ib])),
                 kd.Force("a", -f, point=kin.R_N_B[ia].T @ (o - kin.p[ia]))]  # fmt: skip
    np.testing.assert_allclose(
        Fr(model, state, [kd.JointLoad("j1", tau)]), Fr(model, state, pair), atol=1e-12
    )


def test_joint_spring_generalized_force_is_minus_k_q():
    """On angles and slides the spring's generalized force is exactly -k q - c q̇."""
    rng = np.random.default_rng(41)
    a = random_body("a", rng)
    j = kd.Joint("g", None, "a", rot_dof=3, rot_seq="231", trn_dof=2, trn_seq="312",
                 stiffness=(1.0, 2.0, 3.0, 4.0, 5.0), damping=(0.5, 0.4, 0.3, 0.2, 0.1))  # fmt: skip
    model = kd.Model([a], [j])
    bare = kd.Model([a], [attrs.evolve(j, stiffness=0.0, damping=0.0)])
    state = random_state(model, rng)
    diff = Fr(model, state, None) - Fr(bare, state, None)
    k, c = np.array(j.stiffness), np.array(j.damping)
    angle_u = np.r_[0:3, 3:5]
    np.testing.assert_allclose(diff, -k * state.q[angle_u] - c * state.u, atol=1e-14)


@pytest.mark.parametrize(
    "load",
    [kd.Force("nobody", (1, 0, 0)), kd.Torque("nobody", (1, 0, 0)),
     kd.JointLoad("nojoint", (1.0,))],
)  # fmt: skip
def test_unknown_body_or_joint_in_a_load_is_a_model_error(load):
    model = kd.examples.double_pendulum()
    state = model.initial_state()
    name = getattr(load, "body", None) or load.joint
    for call in (
        lambda: kd.generalized_active_forces(model, state, [load]),
        lambda: kd.forward_dynamics(model, state, [load]),
        lambda: kd.simulate(model, state, 1.0, 0.1, loads=[load], progress=False),
    ):
        with pytest.raises(ModelError, match=name):
            call()


def test_joint_load_of_wrong_length_is_a_model_error():
    model = kd.examples.double_pendulum()
    with pytest.raises(ModelError, match="joint0"):
        kd.forward_dynamics(model, model.initial_state(), [kd.JointLoad("joint0", (1.0, 2.0))])


# --------------------------------------------------------------------------- embedded momentum
def test_embedded_momentum_gyroscopic_torque():
    """A body carrying rotor momentum h on a spherical joint, spinning at ω with zero
    acceleration, needs the torque ω × (Iω + h) (all in body axes): this is the
    generalized force inverse dynamics must return for the relative-rate speeds."""
    rng = np.random.default_rng(51)
    h = np.array([0.0, 0.0, 4.0])
    I = kd.inertia_tensor(2.0, 3.0, 4.0, Ixy=0.1)
    body = kd.Body("rotor", mass=1.0, inertia=I, embedded_momentum=h)
    model = kd.Model([body], [kd.Joint.spherical("s", None, "rotor")])
    w = rng.uniform(-1, 1, 3)
    state = model.set_joint(model.initial_state(), "s", quaternion=rng.normal(size=4), rates=w)
    tau = kd.inverse_dynamics(model, state, np.zeros(3))
    np.testing.assert_allclose(tau, np.cross(w, I @ w + h), atol=1e-12)
    # the rotor term alone: a body that is not spinning on its own feels only ω × h
    bare = kd.Model([attrs.evolve(body, embedded_momentum=(0, 0, 0))], list(model.joints))
    np.testing.assert_allclose(tau - kd.inverse_dynamics(bare, state, np.zeros(3)),
                               np.cross(w, h), atol=1e-12)  # fmt: skip


def test_gyrostat_precession_rate():
    """Torque-free gyrostat with isotropic inertia J and rotor momentum h (body z):
    H = J ω + h_N is fixed, so ḣ_N = ω × h_N = (H × h_N) / J: the rotor axis (body z)
    precesses about H at |H| / J."""
    J, h = 2.0, np.array([0.0, 0.0, 3.0])
    body = kd.Body("g", mass=1.0, inertia=J * np.eye(3), embedded_momentum=h)
    model = kd.Model([body], [kd.Joint.free("root", outer="g")])
    state = model.set_joint(model.initial_state(), "root", rates=(0.5, -0.2, 0.1))
    traj = kd.simulate(model, state, 10.0, 0.01, output_every=0.05, progress=False)
    H = traj.angular_momentum
    np.testing.assert_allclose(H - H[0], 0.0, atol=1e-9)
    n = H[0] / np.linalg.norm(H[0])
    a = np.cross(n, [0.0, 1.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(n, a)
    e3 = traj.body("g").R_N_B[:, :, 2]
    phi = np.unwrap(np.arctan2(e3 @ b, e3 @ a))
    assert np.polyfit(traj.t, phi, 1)[0] == pytest.approx(np.linalg.norm(H[0]) / J, rel=1e-8)


def test_numeric_stages_reject_bad_states():
    model = kd.examples.double_pendulum()
    with pytest.raises(ModelError):
        kd.mass_matrix(model, kd.State(np.zeros(3), np.zeros(2)))
    with pytest.raises(ModelError):
        kd.generalized_inertia_forces(model, model.initial_state(), np.zeros(3))


def test_kinds_cover_every_joint_type():
    assert set(KINDS) >= {"hinge", "gimbal2", "gimbal3", "spherical", "slider1", "slider2",
                          "slider3", "gimbal_slider", "weld"}  # fmt: skip


def test_zero_dof_model():
    rng = np.random.default_rng(61)
    bodies = [random_body("a", rng), random_body("b", rng)]
    joints = [
        joint_of_kind("weld", "w0", None, "a", rng),
        joint_of_kind("weld", "w1", "a", "b", rng),
    ]
    model = kd.Model(bodies, joints, gravity=(0, 0, -9.81))
    state = model.initial_state()
    assert kd.mass_matrix(model, state).shape == (0, 0)
    assert kd.forward_dynamics(model, state).shape == (0,)
    assert kd.msd.momenta(model, state).shape == (0,)
    tr = kd.simulate(model, state, 0.1, 0.05, progress=False)
    assert tr.u.shape == (3, 0)


def test_numeric_names_match_the_symbolic_ones():
    """kd.generalized_active_forces, kd.generalized_inertia_forces, kd.forcing,
    kd.mass_matrix: the symbolic result's .Fr, .Fr_star, .forcing, .mass_matrix;
    Fr + Fr* = 0 at the solution with f = Fr + Fr*|ν̇=0 and M ν̇ = f; kd.aba (the
    articulated-body algorithm) gives the accelerations of CRBA and Cholesky."""
    model = kd.examples.hub_with_panels()
    state = model.set_joint(model.initial_state(), "root", rates=(0.1, -0.2, 0.3))
    acc = kd.forward_dynamics(model, state)
    np.testing.assert_allclose(kd.aba(model, state), acc, atol=1e-12)
    M = kd.mass_matrix(model, state)
    f = kd.forcing(model, state)
    np.testing.assert_allclose(M @ acc, f, atol=1e-10)
    np.testing.assert_allclose(
        kd.generalized_active_forces(model, state)
        + kd.generalized_inertia_forces(model, state, np.zeros(model.n)),
        f,
        atol=1e-10,
    )
    eom = kd.symbolic.kane(model)
    assert {"Fr", "Fr_star", "mass_matrix", "forcing"} <= set(dir(eom))


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("kanedyn", "Fr", "generalized_active_forces"),
        ("kanedyn", "Fr_star", "generalized_inertia_forces"),
        ("kanedyn", "crba", "mass_matrix"),
        ("kanedyn.dynamics.kane", "Fr", "generalized_active_forces"),
        ("kanedyn.dynamics.kane", "Fr_star", "generalized_inertia_forces"),
        ("kanedyn.dynamics.kane", "crba", "mass_matrix"),
    ],
)
def test_old_short_names_warn_and_are_the_same_functions(module, old, new):
    import importlib

    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is deprecated; use kanedyn.{new}"):
        value = getattr(mod, old)
    assert value is getattr(kd, new)
    assert old not in getattr(mod, "__all__", ())
