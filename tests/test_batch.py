"""The batched path (kd.States, kd.ModelBatch, simulate_ensemble) equals the single-state
path on random trees with every joint type, including dispersed parameter sets."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.errors import ModelError
from kanedyn.model.batch import ModelBatch, States
from kanedyn.model.plan import params_of
from kanedyn.simulation.ensemble import simulate_ensemble

SEQS = ["123", "231", "312", "132", "213", "321", "121", "131", "212", "232", "313", "323"]
KINDS = ["revolute", "gimbal2", "gimbal3", "spherical", "prismatic", "slide_gimbal",
         "free", "weld", "slide3"]  # fmt: skip


def random_inertia(rng: np.random.Generator) -> np.ndarray:
    moments = np.sort(rng.uniform(0.5, 2.0, 3))
    moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
    R = kd.euler_to_dcm("123", rng.uniform(-3, 3, 3))
    return R @ np.diag(moments) @ R.T


def random_joint(rng: np.random.Generator, kind: str, name: str, inner, outer) -> kd.Joint:
    kw = dict(
        inner_point=0.5 * rng.normal(size=3),
        outer_point=0.3 * rng.normal(size=3),
        inner_rotation=kd.euler_to_dcm("321", rng.uniform(-3, 3, 3)),
        outer_rotation=kd.euler_to_dcm("213", rng.uniform(-3, 3, 3)),
    )
    axis = int(rng.integers(1, 4))
    seq = str(rng.choice(SEQS))
    make = {
        "revolute": lambda: kd.Joint.revolute(name, inner, outer, axis=axis, stiffness=1.0, damping=0.1, **kw),
        "gimbal2": lambda: kd.Joint.gimbal(name, inner, outer, seq=seq, dof=2, stiffness=0.5, damping=0.2, **kw),
        "gimbal3": lambda: kd.Joint.gimbal(name, inner, outer, seq=seq, dof=3, **kw),
        "spherical": lambda: kd.Joint.spherical(name, inner, outer, stiffness=0.3, damping=0.05, **kw),
        "prismatic": lambda: kd.Joint.prismatic(name, inner, outer, axis=axis, stiffness=2.0, **kw),
        "slide_gimbal": lambda: kd.Joint(name, inner, outer, rot_dof=2, rot_seq="312", trn_dof=2,
                                         trn_seq="231", damping=0.1, **kw),
        "free": lambda: kd.Joint.free(name, outer, inner, **kw),
        "weld": lambda: kd.Joint.weld(name, inner, outer, **kw),
        "slide3": lambda: kd.Joint(name, inner, outer, trn_dof=3, trn_seq="312", stiffness=1.0, **kw),
    }  # fmt: skip
    return make[kind]()


def random_tree(seed: int, kinds=KINDS) -> kd.Model:
    """A random tree of 1-7 bodies (some with embedded momentum), every joint type,
    several roots possible, joints listed in random order, random gravity."""
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(1, 8))
    bodies, joints = [], []
    for i in range(nb):
        h = 0.1 * rng.normal(size=3) if rng.random() < 0.3 else (0.0, 0.0, 0.0)
        bodies.append(kd.Body(f"b{i}", mass=rng.uniform(0.5, 3.0), inertia=random_inertia(rng),
                              com=0.3 * rng.normal(size=3), embedded_momentum=h))  # fmt: skip
        inner = None if i == 0 or rng.random() < 0.1 else f"b{int(rng.integers(0, i))}"
        kind = str(rng.choice(kinds))
        if inner is None and kind == "weld":
            kind = "free"
        joints.append(random_joint(rng, kind, f"j{i}", inner, f"b{i}"))
    order = rng.permutation(nb)
    return kd.Model(
        [bodies[i] for i in order], [joints[i] for i in order], gravity=rng.normal(size=3)
    )


def random_state(model: kd.Model, rng: np.random.Generator) -> kd.State:
    q = 0.7 * rng.normal(size=model.nq)
    quat_q = model.layout.quat_q
    if quat_q.size:
        quat = rng.normal(size=quat_q.shape)
        q[quat_q] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return kd.State(q, rng.normal(size=model.n))


def dispersed_members(model: kd.Model, B: int, rng: np.random.Generator) -> list[kd.Model]:
    """B copies of ``model`` with every body and joint parameter perturbed (attrs.evolve)."""
    out = []
    for _ in range(B):
        bodies = [
            attrs.evolve(
                b,
                mass=b.mass * rng.uniform(0.8, 1.2),
                inertia=b.inertia * rng.uniform(0.9, 1.1),
                com=b.com + 0.05 * rng.normal(size=3),
            )  # fmt: skip
            for b in model.bodies
        ]
        joints = [
            attrs.evolve(
                j,
                inner_point=j.inner_point + 0.05 * rng.normal(size=3),
                outer_rotation=kd.euler_to_dcm("123", 0.1 * rng.normal(size=3)) @ j.outer_rotation,
                stiffness=j.stiffness * rng.uniform(0.5, 1.5, j.ndof),
                damping=j.damping * rng.uniform(0.5, 1.5, j.ndof),
            )  # fmt: skip
            for j in model.joints
        ]
        out.append(kd.Model(bodies, joints, gravity=model.gravity + 0.1 * rng.normal(size=3)))
    return out


def well_conditioned(model: kd.Model, state: kd.State) -> bool:
    return np.linalg.cond(kd.mass_matrix(model, state)) < 1e8


def close(a, b, rtol=1e-13, scale=None):
    scale = max(1.0, np.max(np.abs(b), initial=0.0)) if scale is None else scale
    return np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0) <= rtol * scale


LOADS = None


@pytest.mark.parametrize("seed", range(25))
def test_batched_states_equal_single_states(seed):
    model = random_tree(seed)
    rng = np.random.default_rng(seed + 100)
    singles = [random_state(model, rng) for _ in range(4)]
    singles = [s for s in singles if well_conditioned(model, s)]
    assert singles, "every drawn state is near a gimbal singularity: choose another seed"
    states = States.stack(singles)
    acc = kd.forward_dynamics(model, states)
    M = kd.mass_matrix(model, states)
    par = kd.partials(model, states)
    for b, s in enumerate(singles):
        M1 = kd.mass_matrix(model, s)
        acc1 = kd.forward_dynamics(model, s)
        par1 = kd.partials(model, s)
        assert close(M[b], M1)
        # the two solves (potrs and stacked triangular solves) differ by round-off × cond(M)
        assert close(acc[b], acc1, rtol=1e-13 * np.linalg.cond(M1))
        for field in ("Omega_u", "V_u", "V_s", "alpha_r", "a_r"):
            assert close(getattr(par, field)[b], getattr(par1, field)), field


@pytest.mark.parametrize("seed", range(12))
def test_batched_parameters_equal_rebuilt_models(seed):
    model = random_tree(seed)
    rng = np.random.default_rng(seed + 200)
    members = dispersed_members(model, 3, rng)
    batch = ModelBatch.stack(members)
    singles = [random_state(model, rng) for _ in members]
    states = States.stack(singles)
    loads = [kd.Force(model.bodies[0].name, (1.0, -2.0, 0.5), point=(0.1, 0.0, 0.2)),
             kd.Torque(model.bodies[-1].name, (0.2, 0.1, -0.3), frame="body")]  # fmt: skip
    acc = kd.forward_dynamics(batch, states, loads)
    M = kd.mass_matrix(batch, states)
    for b, (m, s) in enumerate(zip(members, singles, strict=True)):
        if not well_conditioned(m, s):
            continue
        M1 = kd.mass_matrix(m, s)
        assert close(M[b], M1)
        assert close(acc[b], kd.forward_dynamics(m, s, loads), rtol=1e-13 * np.linalg.cond(M1))


def test_one_state_many_parameter_sets_broadcast():
    model = random_tree(3)
    members = dispersed_members(model, 4, np.random.default_rng(0))
    state = random_state(model, np.random.default_rng(1))
    acc = kd.forward_dynamics(ModelBatch.stack(members), state)
    assert acc.shape == (4, model.n)
    for b, m in enumerate(members):
        assert close(acc[b], kd.forward_dynamics(m, state), rtol=1e-11)


def test_dispersed_equals_stack_and_members_round_trip():
    model = kd.examples.explorer1()
    rng = np.random.default_rng(0)
    mass = params_of(model).mass * rng.uniform(0.9, 1.1, (5, model.nb))
    stiffness = params_of(model).stiffness * rng.uniform(0.5, 1.5, (5, model.n))
    batch = ModelBatch.dispersed(model, mass=mass, stiffness=stiffness)
    again = ModelBatch.stack([batch.member(b) for b in range(batch.size)])
    states = States.repeat(kd.examples.explorer1_state(model), 5)
    assert close(kd.forward_dynamics(batch, states), kd.forward_dynamics(again, states))
    assert batch.member(2).bodies[1].mass == pytest.approx(mass[2, 1], rel=0, abs=0)


def test_bad_batches_are_rejected():
    model = kd.examples.chain(3)
    with pytest.raises(ModelError, match="batch axis"):
        States(np.zeros(3), np.zeros(3))
    with pytest.raises(ModelError, match="nq"):
        kd.forward_dynamics(model, States(np.zeros((2, 4)), np.zeros((2, 3))))
    with pytest.raises(ModelError, match="mass"):
        ModelBatch.dispersed(model, mass=-np.ones((2, 3)))
    with pytest.raises(ModelError, match="different topology"):
        ModelBatch.stack([model, kd.examples.chain(3, spatial=True)])
    with pytest.raises(ModelError, match="does not match"):
        kd.forward_dynamics(
            ModelBatch.dispersed(model, mass=np.ones((2, 3))),
            States(np.zeros((3, 3)), np.zeros((3, 3))),
        )


@pytest.mark.parametrize("seed", [0, 5, 9])
def test_simulate_ensemble_equals_per_member_simulate(seed):
    model = random_tree(seed, kinds=["revolute", "gimbal2", "spherical", "prismatic", "free"])
    rng = np.random.default_rng(seed + 300)
    members = dispersed_members(model, 3, rng)
    singles = [kd.State(s.q, 0.3 * s.u) for s in (random_state(model, rng) for _ in members)]
    traj = simulate_ensemble(ModelBatch.stack(members), States.stack(singles), 0.5, 0.01,
                             output_every=0.05)  # fmt: skip
    assert traj.q.shape == (11, 3, model.nq)
    for b, (m, s) in enumerate(zip(members, singles, strict=True)):
        one = kd.simulate(m, s, 0.5, 0.01, output_every=0.05, progress=False)
        np.testing.assert_allclose(traj.t, one.t, rtol=0, atol=1e-12)
        scale = max(1.0, np.abs(one.u).max())
        assert np.abs(traj.q[:, b] - one.q).max() <= 1e-10 * scale
        assert np.abs(traj.u[:, b] - one.u).max() <= 1e-10 * scale
        member = traj.member(b)
        assert np.allclose(member.total_energy, one.total_energy, rtol=1e-10, atol=1e-10)


def test_simulate_ensemble_of_states_of_one_model():
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    rng = np.random.default_rng(4)
    singles = [model.set_joint(state, "hinge0", angles=0.05 * rng.normal(size=2)) for _ in range(3)]
    traj = simulate_ensemble(model, States.stack(singles), 2.0, 0.1)
    for b, s in enumerate(singles):
        one = kd.simulate(model, s, 2.0, 0.1, progress=False)
        assert np.abs(traj.u[:, b] - one.u).max() <= 1e-12
