"""Geared rotors (``kd.Rotor``) as a term of the tree recursion: the articulated-body
algorithm, the traced native kernels, the momentum-state rates, ``kd.linearize`` and
the C export.

Oracles: the dense engine's Kane sums (CRBA and Cholesky, the rotor's ``Ω_Rᵀ J_R Ω_R``
in N; an algorithm that forms the mass matrix, where the recursion never does), the
Lagrange derivation of tests/test_rotors.py written in sympy, hand calculations of a
ball screw and of a rotor on a hinge's outer body, finite differences of the kinetic
energy (the generalized momenta) and of the dense forward dynamics (the
linearization), and the conservation of angular momentum.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from tests.strategies import random_state
from tests.test_compiled import assert_close, cond
from tests.test_rotors import R1, R2, R3, arm, lagrange, lagrange_arm  # noqa: F401

ROTORS = dict(inertia=3e-4, ratio=-30.0, transverse=1e-4)


def mixed(gravity=(0.3, -0.5, -9.81)) -> kd.Model:
    """A free hub with a geared arm: a rotor on the shoulder's inner body (the hub), one on
    the elbow's outer body, a ball screw (a slide with a rotor on its inner body), a
    reflected-only rotor on the wrist, and a slide from the hub with its rotor on the
    outer body."""
    I = np.array([[0.05, 0.002, -0.001], [0.002, 0.07, 0.003], [-0.001, 0.003, 0.06]])
    bodies = [
        kd.Body("hub", 8.0, np.diag([0.9, 1.1, 1.3])),
        kd.Body("link1", 2.0, I, com=[0.3, 0.05, 0.0]),
        kd.Body("link2", 1.3, 1.2 * I, com=[0.02, 0.25, 0.03]),
        kd.Body("nut", 0.4, 0.3 * I, com=[0.0, 0.02, 0.0]),
        kd.Body("hand", 0.3, 0.2 * I, com=[0.05, 0.0, 0.01]),
        kd.Body("cart", 0.6, 0.4 * I, com=[0.0, 0.0, 0.1]),
    ]
    joints = [
        kd.Joint.free("free", "hub"),
        kd.Joint.revolute("shoulder", "hub", "link1", axis=3, inner_point=[0.4, 0.0, 0.2],
                          rotor=kd.Rotor(**R1)),
        kd.Joint.revolute("elbow", "link1", "link2", axis=1, inner_point=[0.6, 0.0, 0.1],
                          rotor=kd.Rotor(**R2, body="outer")),
        kd.Joint.prismatic("screw", "link2", "nut", axis=2, inner_point=[0.0, 0.3, 0.0],
                           rotor=kd.Rotor(2e-5, ratio=600.0, transverse=1e-5)),
        kd.Joint.revolute("wrist", "nut", "hand", axis=2, inner_point=[0.1, 0.0, 0.0],
                          rotor=kd.Rotor(**R3, reflected_only=True)),
        kd.Joint.prismatic("rail", "hub", "cart", axis=3, inner_point=[-0.5, 0.0, 0.0],
                           rotor=kd.Rotor(**ROTORS, body="outer")),
    ]  # fmt: skip
    return kd.Model(bodies, joints, gravity=gravity)


@pytest.fixture(scope="module")
def model():
    return mixed()


@pytest.fixture(scope="module")
def native(model):
    assert kd.compiled.supports(model) is None
    return kd.compile_model(model)


def states(model, count=5, speed=3.0):
    rng = np.random.default_rng(7)
    return [random_state(model, rng, speed=speed) for _ in range(count)]


# ------------------------------------------------------------------ Kane: native and ABA
def test_native_and_aba_equal_the_dense_engine(model, native):
    for s in states(model):
        want = kd.forward_dynamics(model, s)
        c = cond(model, s)
        assert_close(native.forward_dynamics(s), want, c)
        assert_close(kd.aba(model, s), want, c)


def test_breaking_the_gyroscopic_term_is_seen(model, monkeypatch):
    """The comparison above can fail: the recursion with the rotors' velocity-product
    torque τ dropped (their inertias kept) is far from the dense engine."""
    import attrs

    from kanedyn.dynamics import recursion

    real = recursion.rotor_piece
    monkeypatch.setattr(
        recursion, "rotor_piece",
        lambda *a: attrs.evolve(real(*a), tau=[0.0, 0.0, 0.0]),
    )  # fmt: skip
    s = states(model, 1)[0]
    assert np.max(np.abs(kd.aba(model, s) - kd.forward_dynamics(model, s))) > 1e-3


@pytest.mark.slow
def test_native_geared_arm_matches_lagrange(lagrange):  # noqa: F811
    """The two-joint arm of tests/test_rotors.py: native ν̇ = M⁻¹ f of the sympy
    Lagrangian (rotors' energy ½ ω_Rᵀ J_R ω_R)."""
    M_fn, f_fn, _ = lagrange
    model = arm(rotor1=kd.Rotor(**R1), rotor2=kd.Rotor(**R2))
    cm = kd.compile_model(model)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, u = rng.uniform(-2, 2, 2), rng.uniform(-3, 3, 2)
        acc = np.linalg.solve(np.array(M_fn(*q, *u), float), np.ravel(f_fn(*q, *u)))
        got = cm.forward_dynamics(kd.State(q, u))[:2]
        np.testing.assert_allclose(got, acc, rtol=1e-10, atol=1e-11)


def test_ball_screw_and_outer_rotor_by_hand():
    """A cart on a ball screw (lead ratio n rad/m) under gravity along the screw falls at
    ``m g / (m + n² J)``; a body on a hinge with a spring k and a rotor on the body
    itself (spinning at (1 + n) q̇) oscillates with ``q̈ = -k q / (I_zz + (1 + n)² J)``."""
    body = kd.Body("cart", 3.0, np.diag([0.1, 0.2, 0.3]))
    J, n, g = 2e-5, 600.0, 9.81
    screw = kd.Model(
        [body], [kd.Joint.prismatic("x", None, "cart", axis=1, rotor=kd.Rotor(J, n, 1e-5))],
        gravity=[g, 0.0, 0.0],
    )  # fmt: skip
    s = kd.State(np.array([0.1]), np.array([2.0]))
    assert kd.compile_model(screw).forward_dynamics(s)[0] == pytest.approx(
        3.0 * g / (3.0 + n * n * J), rel=1e-14
    )
    k, n = 40.0, 7.0
    hinge = kd.Model(
        [body],
        [kd.Joint.revolute("h", None, "cart", axis=3, stiffness=k,
                           rotor=kd.Rotor(J, n, 1e-5, body="outer"))],
    )  # fmt: skip
    s = kd.State(np.array([0.3]), np.array([-1.0]))
    assert kd.compile_model(hinge).forward_dynamics(s)[0] == pytest.approx(
        -k * 0.3 / (0.3 + (1 + n) ** 2 * J), rel=1e-14
    )


# ------------------------------------------------------------------ MSD
def test_momentum_states_are_the_derivatives_of_the_kinetic_energy():
    """``y = ∂T/∂ν`` with the rotors' energy (central differences of kd.kinetic_energy);
    the free root's entries are the totals H (about N's origin) and P."""
    model = mixed()
    s = states(model, 1)[0]
    y = kd.dynamics.msd.momenta(model, s)
    eps = 1e-6
    p = np.zeros(model.n)
    for r in range(model.n):
        du = np.zeros(model.n)
        du[r] = eps
        p[r] = (
            kd.kinetic_energy(model, kd.State(s.q, s.u + du))
            - kd.kinetic_energy(model, kd.State(s.q, s.u - du))
        ) / (2 * eps)
    roots = model.layout.u_index[0]
    free = np.setdiff1d(np.arange(model.n), roots)
    np.testing.assert_allclose(y[free], p[free], rtol=1e-8, atol=1e-9)
    # the speeds come back from the states
    u = kd.dynamics.msd.speeds(model, s.q, y)
    np.testing.assert_allclose(u, s.u, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("engine", ["compiled", "dense"])
def test_msd_trajectories_equal_kane(model, engine):
    s = states(model, 1, speed=1.0)[0]
    kane = kd.simulate(model, s, 0.05, 0.005, engine="compiled", progress=False)
    msd = kd.simulate(model, s, 0.05, 0.005, engine=engine, formulation="msd", progress=False)
    assert msd.engine == ("native" if engine == "compiled" else "dense")
    np.testing.assert_allclose(msd.q, kane.q, atol=1e-10)
    np.testing.assert_allclose(msd.u, kane.u, atol=1e-9)


def total_momenta(model, traj):
    """``(H_c, P)`` along a trajectory: the angular momentum about the mass centre (the
    rotors' ``J_R ω_R`` included) and the linear momentum, by the dense kd.momentum."""
    return np.array(
        [
            np.concatenate(kd.momentum(model, kd.State(q, u))[::-1])
            for q, u in zip(traj.q, traj.u, strict=True)
        ]
    )


def test_msd_keeps_the_angular_momentum_with_rotors():
    """Torque-free, the system's angular momentum about its mass centre (the rotors'
    J_R ω_R included, dense kd.momentum) and its linear momentum are states of MSD and
    stay constant to round-off along the native run, while Kane's RK4 drifts at the
    truncation error."""
    model = mixed(gravity=(0.0, 0.0, 0.0))
    s = states(model, 1, speed=2.0)[0]
    msd = kd.simulate(model, s, 0.5, 0.01, formulation="msd", progress=False)
    assert msd.engine == "native"
    H = total_momenta(model, msd)
    drift = np.max(np.abs(H - H[0]))
    assert drift < 1e-12 * np.max(np.abs(H))
    kane = kd.simulate(model, s, 0.5, 0.01, progress=False)
    Hk = total_momenta(model, kane)
    assert np.max(np.abs(Hk - Hk[0])) > 30 * drift


# ------------------------------------------------------------------ linearize, C, ensembles
def test_linearize_matches_finite_differences():
    model = arm(kd.Rotor(**R1, body="outer"), kd.Rotor(**R2), rotor3=kd.Rotor(**R3), wrist=True)
    s = kd.State(np.array([0.3, -0.7, 0.4]), np.array([1.1, -0.6, 2.0]))
    lin = kd.linearize(model, s)
    n = model.n
    x0 = np.concatenate((s.q, s.u))

    def rate(x):
        return kd.forward_dynamics(model, kd.State(x[:n], x[n:]))

    eps = 1e-6
    A = np.zeros((2 * n, 2 * n))
    A[:n, n:] = np.eye(n)
    for i in range(2 * n):
        dx = np.zeros(2 * n)
        dx[i] = eps
        A[n:, i] = (rate(x0 + dx) - rate(x0 - dx)) / (2 * eps)
    np.testing.assert_allclose(lin.A, A, rtol=1e-6, atol=1e-6)


def test_c_export_equals_the_dense_engine(tmp_path):
    from tests.test_to_c import COMPILERS, _p, compile_shared

    if not COMPILERS:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2, body="outer"))
    h, c = kd.codegen.to_c(model, tmp_path, prefix="geared")
    lib = compile_shared(COMPILERS[0], [c], tmp_path / "libgeared.so")
    for s in states(model, 3):
        x = np.concatenate((s.q, s.u))
        out = np.empty(model.n + model.nq)
        assert lib.geared_rhs(_p(x), _p(np.zeros(model.n)), _p(out)) == 0
        np.testing.assert_allclose(out[: model.n], kd.forward_dynamics(model, s), rtol=1e-12,
                                   atol=1e-12)  # fmt: skip


def test_ensemble_runs_natively():
    model = arm(kd.Rotor(**R1), kd.Rotor(**R2))
    ss = states(model, 2, speed=1.0)
    batch = kd.States(np.stack([s.q for s in ss]), np.stack([s.u for s in ss]))
    ens = kd.simulate_ensemble(model, batch, 0.02, 0.005)
    for b, s in enumerate(ss):
        one = kd.simulate(model, s, 0.02, 0.005, engine="dense", progress=False)
        np.testing.assert_allclose(ens.q[-1, b], one.q[-1], atol=1e-12)


@pytest.mark.slow
def test_a_dispersed_batch_equals_its_members(model):
    """Every parameter of the geared model varies across a batch (joint placements and
    rotations included): in the joint frames the rotors' terms hold no parameter, so
    the native batch is each member's model (the dense engine on ``batch.member(b)``)."""
    from tests.test_compiled import dispersed_batch

    rng = np.random.default_rng(2)
    batch = dispersed_batch(model, 3, rng)
    members = states(model, 3)
    got = kd.compile_model(batch).forward_dynamics(
        kd.States(np.array([s.q for s in members]), np.array([s.u for s in members]))
    )
    for b, s in enumerate(members):
        member = batch.member(b)
        assert member.joints[1].rotor is not None
        assert_close(got[b], kd.forward_dynamics(member, s), cond(member, s))


@pytest.mark.slow
def test_rotor_moments_are_runtime_parameters_of_the_c(model, tmp_path, monkeypatch):
    """With ``parameters="runtime"`` the rotors' moments are fields of the params struct
    (the reflected-only wrist rotor's J alone); the defaults give the folded rates to
    1e-14, and other moments set in the struct give the rates (dense engine) and ten
    RK4 steps (kd.simulate) of the model rebuilt with those rotors."""
    import ctypes

    import attrs

    from kanedyn.compiled import native, tcc
    from tests.test_to_c import COMPILERS, _p, compile_shared, params_struct

    if not COMPILERS:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    h, c = kd.codegen.to_c(model, tmp_path, prefix="gr", parameters="runtime")
    fields = [p.field for p in kd.compiled.c.runtime_parameters(model)]
    assert {"shoulder_rotor_inertia", "shoulder_rotor_transverse", "wrist_rotor_inertia",
            "rail_rotor_transverse"} <= set(fields)  # fmt: skip
    assert "wrist_rotor_transverse" not in fields
    assert "double shoulder_rotor_inertia; /* shoulder.rotor.inertia [kg.m^2] */" in h.read_text()
    lib = compile_shared(COMPILERS[0], [c], tmp_path / "libgr.so")
    Params = params_struct(model)
    p = Params.in_dll(lib, "gr_default_params")
    assert p.shoulder_rotor_inertia == R1["inertia"] and p.wrist_rotor_inertia == R3["inertia"]
    cp = kd.compile_model(model, backend="python")
    s = states(model, 1)[0]
    x = np.concatenate((s.q, s.u))
    tau = np.zeros(model.n)
    out = np.empty(model.n + model.nq)
    assert lib.gr_rhs(_p(x), _p(tau), ctypes.byref(p), _p(out)) == 0
    want = np.array(cp.rhs(s.q.tolist(), s.u.tolist()))
    np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-14 * np.max(np.abs(want)))
    new = {"shoulder": dict(inertia=5e-4, transverse=3e-4), "wrist": dict(inertia=2e-4),
           "rail": dict(transverse=4e-4)}  # fmt: skip
    q = Params.from_buffer_copy(p)
    for joint, moments in new.items():
        for what, value in moments.items():
            setattr(q, f"{joint}_rotor_{what}", value)
    joints = [attrs.evolve(j, rotor=attrs.evolve(j.rotor, **new[j.name])) if j.name in new else j
              for j in model.joints]  # fmt: skip
    rebuilt = kd.Model(model.bodies, joints, gravity=model.gravity)
    assert lib.gr_rhs(_p(x), _p(tau), ctypes.byref(q), _p(out)) == 0
    want = kd.forward_dynamics(rebuilt, s)
    np.testing.assert_allclose(out[: model.n], want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))
    assert np.max(np.abs(want - kd.forward_dynamics(model, s))) > 1e-3  # it changed
    monkeypatch.setattr(native, "unavailable", lambda: "test")
    monkeypatch.setattr(tcc, "unavailable", lambda: "test")
    traj = kd.simulate(rebuilt, s, 0.01, 0.001, progress=False)
    lib.gr_step.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double]
    for _ in range(10):
        assert lib.gr_step(_p(x), _p(tau), ctypes.addressof(q), 0.001) == 0
    np.testing.assert_allclose(x, np.concatenate((traj.q[-1], traj.u[-1])), rtol=1e-12,
                               atol=1e-12)  # fmt: skip
