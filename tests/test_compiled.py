"""Tests of kanedyn.compiled: the generated articulated-body equations of one model.

Oracles: the dense engine (``kd.forward_dynamics``: Kane's mass matrix and bias, solved
by Cholesky; a different algorithm) on random trees with every joint kind, springs,
dampers, embedded momentum, gravity, loads and locked speeds; ``kanedyn.simulation.integrate.qdot``
for the kinematic equations; and, independent of both engines, conservation laws along
an RK4 trajectory integrated here with ``CompiledModel.rhs`` alone.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import kanedyn as kd
import kanedyn.simulation.integrate
import kanedyn.simulation.system
from kanedyn.compiled import CompiledModel, compile_model, supports
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import applied_loads
from kanedyn.errors import ModelError
from kanedyn.model.batch import States
from kanedyn.model.plan import params_of
from tests.strategies import SETTINGS, random_inertia, random_loads, random_state, tree, trees

SEEDS = st.integers(0, 2**32 - 1)
COMPILED = settings(SETTINGS, max_examples=20)


# --------------------------------------------------------------------------- helpers
@st.composite
def compilable_trees(draw, **kwargs) -> kd.Model:
    """``trees(**kwargs)`` that the compiled engine takes."""
    model = draw(trees(max_bodies=5, **kwargs))
    assume(supports(model) is None)
    return model


def draw_state(model: kd.Model, seed: int, speed: float) -> kd.State:
    rng = np.random.default_rng(seed)
    return random_state(model, rng, speed=speed, at_rest=speed == 0.0)


SPEEDS = st.sampled_from([0.0, 1.0, 5.0])


def cond(model: kd.Model, state: kd.State) -> float:
    return float(np.linalg.cond(kd.mass_matrix(model, state))) if model.n else 1.0


def assert_close(got, want, condition: float = 1.0, rtol: float = 1e-12):
    """``|got - want| <= rtol · max(1, cond/1e3) · max(1, |want|)``: the two engines
    differ by round-off amplified by the conditioning of the mass matrix."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    tol = rtol * max(1.0, condition / 1e3) * scale
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= tol, f"error {err:.3g} > tolerance {tol:.3g} (cond {condition:.3g})"


def free_root_speeds(model: kd.Model) -> set[int]:
    """Speed indices of 6-DOF joints from N (a free-floating root)."""
    out: set[int] = set()
    for k, j in enumerate(model.joints):
        if j.inner is None and j.rot_type == "spherical" and j.trn_dof == 3:
            out.update(int(r) for r in model.layout.u_index[k])
    return out


# --------------------------------------------------------------------------- dense oracle
@COMPILED
@given(model=compilable_trees(), seed=SEEDS, speed=SPEEDS)
def test_msd_speeds_and_rates_equal_dense_on_random_trees(model, seed, speed):
    """The MSD kernel: speeds from the momentum states (``kd.msd.speeds``) and the
    momentum rates (``kd.msd.rates``, the corrected equations) at those speeds."""
    state = draw_state(model, seed, speed)
    y = kd.msd.momenta(model, state)
    cm = compile_model(model, formulation="msd")
    out = cm.rhs(state.q.tolist(), y.tolist())
    n, nq = model.n, model.nq
    assert len(out) == 2 * n + nq
    c = cond(model, state)
    nu = kd.msd.speeds(model, state.q, y)
    assert_close(out[n + nq :], nu, c)
    assert_close(out[n + nq :], state.u, c)
    kin = kinematics_at(model, state.q, nu)
    want = kd.msd.rates(model, kin, applied_loads(model, kd.State(state.q, nu), kin))
    assert_close(out[:n], want, c)


@COMPILED
@given(model=compilable_trees(), seed=SEEDS)
def test_msd_with_locked_speeds_equals_dense(model, seed):
    """Locked speeds are zero, their rates zero, the free speeds solve the restricted
    mass matrix (``kd.msd.speeds(..., locked)``)."""
    rng = np.random.default_rng(seed)
    roots = {int(r) for k in kd.msd.momentum_roots(model) for r in model.layout.u_index[k]}
    candidates = sorted(set(range(model.n)) - roots)
    assume(candidates)
    locked = sorted(rng.choice(candidates, size=min(2, len(candidates)), replace=False).tolist())
    state = draw_state(model, seed, 1.0)
    u = state.u.copy()
    u[locked] = 0.0
    state = kd.State(state.q, u)
    y = kd.msd.momenta(model, state)
    if roots:
        with pytest.raises(ModelError, match="cannot be locked"):
            compile_model(model, [min(roots)], formulation="msd")
    out = compile_model(model, locked, formulation="msd").rhs(state.q.tolist(), y.tolist())
    n, nq = model.n, model.nq
    nu = kd.msd.speeds(model, state.q, y, locked)
    assert all(out[n + nq + r] == 0.0 and out[r] == 0.0 for r in locked)
    assert_close(out[n + nq :], nu, cond(model, state))


@COMPILED
@given(model=compilable_trees(), seed=SEEDS)
def test_msd_rates_with_loads_equal_dense(model, seed):
    """``rhs_with_loads`` of the MSD kernel, with the loads resolved at the speeds that
    ``rhs`` recovers, equals ``kd.msd.rates`` with the same loads."""
    rng = np.random.default_rng(seed)
    state = draw_state(model, seed, 1.0)
    y = kd.msd.momenta(model, state)
    cm = compile_model(model, formulation="msd")
    n, nq = model.n, model.nq
    nu = np.array(cm.rhs(state.q.tolist(), y.tolist())[n + nq :])
    at = kd.State(state.q, nu)
    kin = kinematics_at(model, state.q, nu)
    L = applied_loads(model, at, kin, random_loads(model, rng))
    got = cm.rhs_with_loads(state.q.tolist(), y.tolist(), L)
    assert_close(got[:n], kd.msd.rates(model, kin, L), cond(model, at))
    assert_close(got[n + nq :], nu, cond(model, at))


def test_msd_compiled_model_has_no_forward_dynamics():
    model = kd.examples.double_pendulum()
    cm = compile_model(model, formulation="msd")
    assert cm.formulation == "msd" and cm is not compile_model(model)
    with pytest.raises(ModelError, match="Kane formulation"):
        cm.forward_dynamics(model.initial_state())
    with pytest.raises(ModelError, match="formulation must be"):
        compile_model(model, formulation="lagrange")


def test_compile_model_names_what_it_was_given_instead_of_a_model():
    case = kd.examples.wheel_slew()  # a case holding a model, not a model
    with pytest.raises(ModelError, match="expected a kanedyn Model or ModelBatch, got SlewCase"):
        compile_model(case)
    assert compile_model(case.model).model is case.model


@COMPILED
@given(model=compilable_trees(), seed=SEEDS, speed=SPEEDS)
def test_compiled_equals_dense_on_random_trees(model, seed, speed):
    state = draw_state(model, seed, speed)
    cm = compile_model(model)
    got = cm.forward_dynamics(state)
    assert got.shape == (model.n,) and got.dtype == np.float64
    assert_close(got, kd.forward_dynamics(model, state), cond(model, state))


@COMPILED
@given(model=compilable_trees(), seed=SEEDS, scale=st.floats(0.5, 2.0))
def test_rhs_qdot_equals_integrate_qdot(model, seed, scale):
    """``rhs`` on coordinates whose quaternions are not unit: q̇ is that of the normalized
    quaternions, ν̇ equals the dense engine's (which also normalizes them)."""
    state = draw_state(model, seed, 1.0)
    lay = model.layout
    q = state.q.copy()
    if lay.quat_q.size:
        q[lay.quat_q] *= scale * np.linspace(1.0, 1.3, lay.quat_q.shape[0])[:, None]
    out = compile_model(model).rhs(q.tolist(), state.u.tolist())
    assert isinstance(out, list) and len(out) == model.n + model.nq
    q_unit = kanedyn.simulation.system.normalize_quaternions(model, q)
    want = kanedyn.simulation.integrate.qdot(model, q_unit, state.u)
    np.testing.assert_allclose(out[model.n :], want, rtol=1e-13, atol=1e-14)
    unit = kd.State(q_unit, state.u)
    assert_close(out[: model.n], kd.forward_dynamics(model, unit), cond(model, unit))


@COMPILED
@given(model=compilable_trees(), seed=SEEDS)
def test_rhs_with_loads_equals_dense_with_loads(model, seed):
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    loads = random_loads(model, rng)
    L = applied_loads(model, state, kinematics_at(model, state.q, state.u), loads)
    cm = compile_model(model)
    out = cm.rhs_with_loads(state.q.tolist(), state.u.tolist(), L)
    assert len(out) == model.n + model.nq
    assert_close(out[: model.n], kd.forward_dynamics(model, state, loads), cond(model, state))
    # the kinematic equations do not depend on the loads
    assert out[model.n :] == cm.rhs(state.q.tolist(), state.u.tolist())[model.n :]


@COMPILED
@given(model=compilable_trees(), seed=SEEDS, with_loads=st.booleans())
def test_locked_speeds_solve_the_restricted_mass_matrix(model, seed, with_loads):
    """Locked speeds (held at zero) make their DOF rigid: on the free speeds, ν̇ solves
    ``M[free, free] ν̇ = f[free]`` with the dense M and f = M · (dense ν̇)."""
    rng = np.random.default_rng(seed)
    candidates = sorted(set(range(model.n)) - free_root_speeds(model))
    assume(candidates)
    locked = sorted(
        int(r) for r in rng.choice(candidates, int(rng.integers(1, len(candidates) + 1)), False)
    )
    state = random_state(model, rng)
    u = state.u.copy()
    u[locked] = 0.0
    state = kd.State(state.q, u)
    loads = random_loads(model, rng) if with_loads else None
    M = kd.mass_matrix(model, state)
    f = M @ kd.forward_dynamics(model, state, loads)
    free = [r for r in range(model.n) if r not in locked]
    want = np.zeros(model.n)
    if free:
        want[free] = np.linalg.solve(M[np.ix_(free, free)], f[free])
    cm = compile_model(model, locked)
    assert cm.locked == frozenset(locked)
    if with_loads:
        L = applied_loads(model, state, kinematics_at(model, state.q, state.u), loads)
        got = np.array(cm.rhs_with_loads(state.q.tolist(), state.u.tolist(), L)[: model.n])
    else:
        got = cm.forward_dynamics(state)
    assert np.all(got[locked] == 0.0)
    assert_close(got, want, cond(model, state))


# --------------------------------------------------------------------------- batches
@pytest.mark.parametrize("seed", range(4))
def test_batch_equals_single_states(seed):
    rng = np.random.default_rng(seed)
    model = tree([0, 1, 0], ["free", "gimbal3", "spherical", "gimbal_slider"],
                 ["123", "313", "231", "321"], seed, springs=True, embedded=True, gravity=True)  # fmt: skip
    cm = compile_model(model)
    singles = [random_state(model, rng, speed=3.0) for _ in range(7)]
    acc = cm.forward_dynamics(States.stack(singles))
    assert acc.shape == (7, model.n)
    for b, s in enumerate(singles):
        one = cm.forward_dynamics(s)
        assert np.max(np.abs(acc[b] - one)) <= 1e-13 * max(1.0, np.max(np.abs(one)))
        assert_close(acc[b], kd.forward_dynamics(model, s), cond(model, s))


def test_batch_of_one_and_zero_dof_model():
    model = kd.examples.chain(3)
    state = random_state(model, np.random.default_rng(0))
    acc = compile_model(model).forward_dynamics(States(state.q[None], state.u[None]))
    assert acc.shape == (1, 3)
    np.testing.assert_allclose(acc[0], compile_model(model).forward_dynamics(state), rtol=1e-13)
    welded = kd.Model([kd.Body("b", mass=1.0, inertia=np.eye(3))],
                      [kd.Joint.weld("w", None, "b", inner_point=(0.1, 0.2, 0.3))])  # fmt: skip
    cm = compile_model(welded)
    assert cm.forward_dynamics(welded.initial_state()).shape == (0,)
    assert cm.forward_dynamics(States(np.zeros((4, 0)), np.zeros((4, 0)))).shape == (4, 0)
    assert cm.rhs([], []) == []


def test_bad_batch_shapes_are_rejected():
    model = kd.examples.explorer1()
    cm = compile_model(model)
    nq, n = model.nq, model.n
    expected = rf"expected q \(B, {nq}\) and u \(B, {n}\)"
    with pytest.raises(ModelError, match=expected + rf", got \(3, {nq + 1}\) and \(3, {n}\)"):
        cm.forward_dynamics(States(np.zeros((3, nq + 1)), np.zeros((3, n))))
    with pytest.raises(ModelError, match=expected + rf", got \(3, {nq}\) and \(3, {n - 1}\)"):
        cm.forward_dynamics(States(np.zeros((3, nq)), np.zeros((3, n - 1))))
    with pytest.raises(ModelError, match=expected):
        cm.forward_dynamics(States(np.zeros((2, 3, nq)), np.zeros((2, 3, n))))
    with pytest.raises(ModelError, match="nq"):
        cm.forward_dynamics(kd.State(np.zeros(nq + 1), np.zeros(n)))
    with pytest.raises(ModelError, match="non-finite"):
        cm.forward_dynamics(kd.State(np.full(nq, np.nan), np.zeros(n)))


# --------------------------------------------------------------------------- examples
def _wheel_model():
    return kd.examples.wheel_slew().model


EXAMPLES = {
    "explorer1": kd.examples.explorer1,
    "chain1": lambda: kd.examples.chain(1),
    "chain10": lambda: kd.examples.chain(10),
    "chain30": lambda: kd.examples.chain(30),
    "chain5_spatial": lambda: kd.examples.chain(5, spatial=True),
    "hub_with_panels": kd.examples.hub_with_panels,
    "wheel_slew": _wheel_model,
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_equal_dense(name):
    model = EXAMPLES[name]()
    assert supports(model) is None
    cm = compile_model(model)
    assert isinstance(cm, CompiledModel) and cm.model is model
    assert cm.source.startswith("def rhs(") and "np." not in cm.source
    assert cm.n_ops > 0
    states = [random_state(model, np.random.default_rng(s)) for s in range(3)]
    if name == "explorer1":
        states.insert(0, kd.examples.explorer1_state(model))
    for state in states:
        assert_close(cm.forward_dynamics(state), kd.forward_dynamics(model, state),
                     cond(model, state))  # fmt: skip
    batch = cm.forward_dynamics(States.stack(states))
    for b, state in enumerate(states):
        np.testing.assert_allclose(batch[b], cm.forward_dynamics(state), rtol=1e-13, atol=1e-13)


def test_structural_zeros_are_folded():
    """A planar pendulum with its axis along z and no offsets: ν̇ = -(m g c / I_O) sin θ,
    a handful of operations once the model's zeros are folded away."""
    cm = compile_model(kd.examples.chain(1))
    assert cm.n_ops <= 10
    model = kd.examples.chain(1)
    # uniform rod of length 1, mass 1 about its end: I_O = m (3 r² + L²)/12 + m (L/2)²
    theta = 0.4
    out = cm.rhs([theta], [0.0])
    body = model.bodies[0]
    I_O = body.inertia[2, 2] + body.mass * 0.25
    assert out[0] == pytest.approx(-body.mass * 9.81 * 0.5 * np.sin(theta) / I_O, rel=1e-13)
    assert out[1] == 0.0


# --------------------------------------------------------------------------- scope, cache
def test_symbolic_model_is_not_compiled():
    k, m = sp.symbols("k m", positive=True)
    model = kd.Model([kd.Body("b", mass=m, inertia=np.eye(3))],
                     [kd.Joint.revolute("h", None, "b", stiffness=k)])  # fmt: skip
    why = supports(model)
    assert why is not None and "symbolic" in why
    with pytest.raises(ModelError, match="cannot compile this model: .*symbolic"):
        compile_model(model)
    numeric = model.subs({k: 2.0, m: 1.5})
    assert supports(numeric) is None
    compile_model(numeric)


def test_spherical_springs_are_compiled():
    """A sprung, damped spherical joint (``-J_r⁻ᵀ K φ - C ω``) is compiled; its
    accelerations are the dense engine's."""
    body = kd.Body("b", mass=1.0, inertia=np.diag([1.0, 2.0, 2.5]), com=(0.1, 0, 0))
    sprung = kd.Model([body], [kd.Joint.spherical("s", None, "b", stiffness=[0.3, 0.5, 0.7],
                                                  damping=0.1)])  # fmt: skip
    assert supports(sprung) is None
    state = random_state(sprung, np.random.default_rng(0))
    assert_close(compile_model(sprung).forward_dynamics(state),
                 kd.forward_dynamics(sprung, state))  # fmt: skip


def test_compile_model_is_cached_per_model_and_lock_set():
    model = kd.examples.chain(4)
    cm = compile_model(model)
    assert compile_model(model) is cm
    assert compile_model(model, ()) is cm
    locked = compile_model(model, [1, 3])
    assert locked is not cm and locked.locked == frozenset({1, 3})
    assert compile_model(model, (3, 1)) is locked
    assert compile_model(model, [np.int64(1), 3]) is locked
    assert compile_model(model, [2]) is not locked
    # another model object, even if equal in every parameter, is compiled on its own
    assert compile_model(kd.examples.chain(4)) is not cm


def test_gimbal_lock_raises_model_error():
    """At a 3-DOF gimbal's singular angle every path raises the same ModelError (the
    generated code divides by a zero pivot: on floats that raises, on arrays it is inf)."""
    body = kd.Body("b", mass=1.0, inertia=np.diag([1.0, 2.0, 3.0]))
    model = kd.Model([body], [kd.Joint.gimbal("g", None, "b", seq="313", dof=3)])
    state = kd.State(np.zeros(3), np.array([0.1, 0.2, 0.3]))  # middle angle 0: lock
    with pytest.raises(ModelError, match="not positive definite"):
        kd.forward_dynamics(model, state)
    with pytest.raises(ModelError, match="not positive definite"):
        compile_model(model).forward_dynamics(States(state.q[None], state.u[None]))
    with pytest.raises(ModelError, match="not positive definite"):
        compile_model(model).forward_dynamics(state)


# --------------------------------------------------------------------------- physics oracle
def rk4(cm: CompiledModel, state: kd.State, dt: float, steps: int, perturb=None) -> kd.State:
    """Fixed-step RK4 of ``x = [q | u]`` with ``cm.rhs`` only; quaternions renormalized
    after each step. ``perturb`` maps the rhs output (for the mutation check below)."""
    model = cm.model
    n, nq = model.n, model.nq
    quat_q = model.layout.quat_q

    def f(x):
        out = cm.rhs(x[:nq].tolist(), x[nq:].tolist())
        if perturb is not None:
            out = perturb(out)
        return np.array(out[n:] + out[:n])

    x = np.concatenate([state.q, state.u])
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        if quat_q.size:
            x[quat_q] /= np.linalg.norm(x[quat_q], axis=1, keepdims=True)
    return kd.State(x[:nq], x[nq:])


def _free_tree(springs: bool, gravity: bool, seed: int = 3) -> kd.Model:
    """A free-floating hub carrying hinges, gimbals, a spherical joint and sliders, some
    bodies with embedded momentum."""
    model = tree([0, 0, 1, 2, 0, 3],
                 ["free", "hinge", "gimbal2", "spherical", "slider2", "gimbal_slider", "gimbal3"],
                 ["123", "231", "312", "121", "132", "213", "313"],
                 seed, springs=springs, embedded=True, gravity=gravity)  # fmt: skip
    return model


TORQUE_FREE = {
    "free_tree": lambda: _free_tree(springs=False, gravity=False),
    "hub_with_panels": lambda: kd.examples.hub_with_panels(stiffness=0.0, damping=0.0),
}


@pytest.mark.parametrize("name", sorted(TORQUE_FREE))
def test_torque_free_motion_conserves_momentum_and_energy(name):
    """No gravity, springs or dampers: P, H (about the mass centre) and T are constant.

    Mutation check, done once by hand (not committed): with ``perturb`` scaling one ν̇
    output by 1.001 (each output in turn), the largest of the drifts of H, P and T is at
    least 2e-5 (free tree) and 2.5e-6 (hub with panels) relative, against 1e-11 and 5e-15
    unperturbed. Dropping the embedded-momentum term ``ω × h`` from the traced ABA (in a
    copy of kanedyn.compiled) also fails the free-tree case.
    """
    model = TORQUE_FREE[name]()
    state = random_state(model, np.random.default_rng(7), speed=1.0)
    cm = compile_model(model)
    P0, H0 = kd.momentum(model, state)
    T0 = kd.kinetic_energy(model, state)
    end = rk4(cm, state, dt=0.0025, steps=200)
    P1, H1 = kd.momentum(model, end)
    T1 = kd.kinetic_energy(model, end)
    assert not np.allclose(end.u, state.u, rtol=0, atol=1e-3)  # it did move
    assert np.linalg.norm(H1 - H0) <= 1e-10 * np.linalg.norm(H0)
    assert np.linalg.norm(P1 - P0) <= 1e-10 * max(np.linalg.norm(P0), 1e-3)
    assert abs(T1 - T0) <= 1e-10 * T0


@pytest.mark.parametrize("damped", [False, True])
def test_internal_springs_dampers_and_uniform_gravity(damped):
    """Joint springs and dampers are internal and uniform gravity exerts no moment about
    the mass centre: H is constant and P grows as m g t; without dampers T + V is
    constant too."""
    model = _free_tree(springs=True, gravity=True, seed=11)
    if not damped:
        model = kd.Model(list(model.bodies),
                         [attrs.evolve(j, damping=0.0 * j.damping) for j in model.joints],
                         gravity=model.gravity)  # fmt: skip
    state = random_state(model, np.random.default_rng(8), speed=1.0)
    cm = compile_model(model)
    dt, steps = 0.0025, 200
    P0, H0 = kd.momentum(model, state)
    E0 = kd.kinetic_energy(model, state) + kd.potential_energy(model, state)
    end = rk4(cm, state, dt=dt, steps=steps)
    P1, H1 = kd.momentum(model, end)
    E1 = kd.kinetic_energy(model, end) + kd.potential_energy(model, end)
    m_total = sum(b.mass for b in model.bodies)
    assert np.linalg.norm(H1 - H0) <= 1e-10 * np.linalg.norm(H0)
    P_want = P0 + m_total * model.gravity * dt * steps
    assert np.linalg.norm(P1 - P_want) <= 1e-10 * np.linalg.norm(P_want)
    if damped:
        assert E1 < E0 - 1e-6  # the dampers dissipate
    else:
        assert abs(E1 - E0) <= 1e-10 * max(abs(E0), 1.0)


# --------------------------------------------------------------------------- parameter batches
def dispersed_batch(model: kd.Model, B: int, rng: np.random.Generator):
    """Every parameter of ``model`` dispersed over B members (rotations by random small
    rotations, inertias by random valid tensors, springs kept off spherical joints)."""
    from scipy.spatial.transform import Rotation

    pa = params_of(model)

    def turn(R):  # (nb, 3, 3) -> (B, nb, 3, 3)
        small = Rotation.from_rotvec(rng.normal(0.0, 0.1, (B * R.shape[0], 3))).as_matrix()
        return small.reshape(B, -1, 3, 3) @ R

    inertia = np.array([[random_inertia(rng) for _ in range(model.nb)] for _ in range(B)])
    stiffness = pa.stiffness * rng.uniform(0.5, 1.5, (B, model.n))
    return kd.ModelBatch.dispersed(
        model,
        mass=pa.mass * rng.uniform(0.8, 1.2, (B, model.nb)),
        inertia=inertia,
        com=pa.com + rng.normal(0.0, 0.05, (B, model.nb, 3)),
        embedded_momentum=pa.h_embedded + rng.normal(0.0, 0.1, (B, model.nb, 3)),
        inner_point=pa.inner_point + rng.normal(0.0, 0.05, (B, model.nb, 3)),
        outer_point=pa.outer_point + rng.normal(0.0, 0.05, (B, model.nb, 3)),
        inner_rotation=turn(pa.R_Bi_Gi),
        outer_rotation=turn(pa.R_Go_Bo),
        stiffness=stiffness,
        damping=pa.damping * rng.uniform(0.5, 1.5, (B, model.n)),
        gravity=rng.normal(0.0, 5.0, (B, 3)),
    )


@settings(SETTINGS, max_examples=20)
@given(model=compilable_trees(), seed=SEEDS)
def test_model_batch_equals_dense_batch(model, seed):
    """Every parameter varies: all become inputs of the generated code, and each member
    equals the dense batched engine (itself tested against per-member rebuilt models)."""
    rng = np.random.default_rng(seed)
    B = 4
    batch = dispersed_batch(model, B, rng)
    assume(supports(model, batch.params) is None)
    members = [draw_state(model, seed + b, 1.0) for b in range(B)]
    states = States(np.array([s.q for s in members]), np.array([s.u for s in members]))
    cm = compile_model(batch)
    got = cm.forward_dynamics(states)
    want = kd.forward_dynamics(batch, states)
    for b in range(B):
        member = batch.member(b)
        assert_close(got[b], want[b], cond(member, members[b]))
    # the MSD kernel of the batch: speeds back from the momenta of each member
    cm_msd = compile_model(batch, formulation="msd")
    for b in (0, B - 1):
        member = batch.member(b)
        y = kd.msd.momenta(member, members[b])
        out = cm_msd.array_fn(*members[b].q, *y, *[p[b] for p in cm_msd.parameter_arrays()])
        n, nq = model.n, model.nq
        assert_close([float(x) for x in out[n + nq :]], members[b].u, cond(member, members[b]))
