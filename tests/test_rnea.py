"""Recursive Newton–Euler inverse dynamics against Kane's: τ = M ν̇ - f on random trees."""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics.rnea import newton_euler

KINDS = (
    "free",
    "spherical",
    "hinge",
    "slide",
    "gimbal2",
    "gimbal3",
    "weld",
    "slides+ball",
    "hinge+slide",
)


def random_tree(rng: np.random.Generator, kinds: list[str]) -> kd.Model:
    bodies, joints = [], []
    for i, kind in enumerate(kinds):
        d = rng.uniform(0.5, 2.0, 3)
        R = kd.euler_to_dcm("123", rng.uniform(-1, 1, 3))
        I = R @ kd.inertia_tensor(d[1] + d[2], d[0] + d[2], d[0] + d[1]) @ R.T
        bodies.append(
            kd.Body(f"b{i}", mass=rng.uniform(0.5, 2.0), inertia=I, com=rng.uniform(-0.5, 0.5, 3),
                    embedded_momentum=rng.uniform(-1, 1, 3))
        )  # fmt: skip
        inner = None if i == 0 else f"b{rng.integers(0, i)}"
        kw = dict(
            inner_point=rng.uniform(-1, 1, 3),
            outer_point=rng.uniform(-1, 1, 3),
            inner_rotation=kd.euler_to_dcm("321", rng.uniform(-1, 1, 3)),
            outer_rotation=kd.euler_to_dcm("213", rng.uniform(-1, 1, 3)),
        )
        name, outer = f"j{i}", f"b{i}"
        if kind == "free":
            j = kd.Joint.free(name, outer, inner, **kw)
        elif kind == "spherical":
            j = kd.Joint.spherical(
                name,
                inner,
                outer,
                stiffness=rng.uniform(0, 2, 3),
                damping=rng.uniform(0, 1, 3),
                **kw,
            )
        elif kind == "hinge":
            j = kd.Joint.revolute(
                name, inner, outer, axis=int(rng.integers(1, 4)), stiffness=1.0, damping=0.5, **kw
            )
        elif kind == "slide":
            j = kd.Joint.prismatic(
                name, inner, outer, axis=int(rng.integers(1, 4)), stiffness=1.5, damping=0.2, **kw
            )
        elif kind == "gimbal2":
            j = kd.Joint.gimbal(
                name, inner, outer, seq="231", dof=2, stiffness=(1.0, 2.0), damping=(0.1, 0.2), **kw
            )
        elif kind == "gimbal3":
            j = kd.Joint.gimbal(
                name, inner, outer, seq="121", dof=3, stiffness=1.0, damping=0.3, **kw
            )
        elif kind == "weld":
            j = kd.Joint.weld(name, inner, outer, **kw)
        elif kind == "slides+ball":
            j = kd.Joint(
                name,
                inner,
                outer,
                rot_type="spherical",
                rot_dof=3,
                trn_dof=2,
                trn_seq="231",
                stiffness=0.7,
                damping=0.2,
                **kw,
            )
        else:
            j = kd.Joint(
                name,
                inner,
                outer,
                rot_dof=1,
                rot_seq="312",
                trn_dof=1,
                trn_seq="213",
                stiffness=0.4,
                damping=0.1,
                **kw,
            )
        joints.append(j)
    return kd.Model(bodies, joints, gravity=rng.uniform(-10, 10, 3))


def random_state(model: kd.Model, rng: np.random.Generator) -> kd.State:
    q = rng.uniform(-2, 2, model.nq)
    quat = rng.normal(size=model.layout.quat_q.shape)
    q[model.layout.quat_q] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    return kd.State(q, rng.uniform(-2, 2, model.n))


@pytest.mark.parametrize("seed", range(12))
def test_rnea_matches_kane_on_random_trees(seed):
    rng = np.random.default_rng(seed)
    first = ["free", "hinge", "gimbal3", "slide"][seed % 4]
    kinds = [first] + list(rng.permutation(KINDS[1:]))[: int(rng.integers(2, 8))]
    model = random_tree(rng, kinds)
    for _ in range(3):
        state = random_state(model, rng)
        acc = rng.uniform(-2, 2, model.n)
        tau = newton_euler(model, state, acc).tau
        ref = kd.inverse_dynamics(model, state, acc)
        M = kd.mass_matrix(model, state)
        f = M @ kd.forward_dynamics(model, state)
        scale = 1.0 + np.abs(ref).max()
        assert np.abs(tau - ref).max() <= 1e-10 * scale
        assert np.abs(tau - (M @ acc - f)).max() <= 1e-10 * scale


def test_every_joint_type_is_covered():
    rng = np.random.default_rng(99)
    model = random_tree(rng, list(KINDS))
    state = random_state(model, rng)
    acc = rng.uniform(-1, 1, model.n)
    assert np.allclose(
        newton_euler(model, state, acc).tau, kd.inverse_dynamics(model, state, acc), atol=1e-10
    )


def test_loads_and_zero_effort_at_the_solution():
    rng = np.random.default_rng(5)
    model = random_tree(rng, ["free", "hinge", "gimbal2", "slide"])
    state = random_state(model, rng)
    loads = [kd.Force("b1", (1.0, -2.0, 0.5), point=(0.1, 0.2, 0.0)), kd.Torque("b2", (0.3, 0, -0.1), frame="body"),
             kd.JointLoad("j3", [0.7])]  # fmt: skip
    acc = kd.forward_dynamics(model, state, loads)
    assert np.allclose(newton_euler(model, state, acc, loads).tau, 0.0, atol=1e-10)
    acc2 = rng.uniform(-1, 1, model.n)
    assert np.allclose(
        newton_euler(model, state, acc2, loads).tau,
        kd.inverse_dynamics(model, state, acc2, loads),
        atol=1e-10,
    )


def test_reactions_balance_a_hanging_pendulum():
    """At rest, a pendulum's pivot carries its weight and no moment along the hinge."""
    rod = kd.Body("rod", mass=2.0, inertia=kd.inertia_tensor(0.1, 0.2, 0.2), com=(0.0, -0.5, 0.0))
    model = kd.Model(
        [rod], [kd.Joint.revolute("pivot", None, "rod", axis=3)], gravity=(0, -9.81, 0)
    )
    ne = newton_euler(model, model.initial_state(), [0.0])
    assert np.allclose(ne.f_joint[0], [0.0, 2.0 * 9.81, 0.0])
    assert np.allclose(ne.N_joint[0], 0.0, atol=1e-12)
    assert np.allclose(ne.tau, 0.0, atol=1e-12)
    tilted = model.set_joint(model.initial_state(), "pivot", angles=[0.3])
    tau = newton_euler(model, tilted, [0.0]).tau
    assert np.isclose(tau[0], 2.0 * 9.81 * 0.5 * np.sin(0.3))  # holding torque


def test_bad_acceleration_size():
    model = kd.examples.double_pendulum()
    with pytest.raises(kd.ModelError, match="acc"):
        newton_euler(model, model.initial_state(), [0.0])


def test_inverse_dynamics_rnea_is_deprecated_and_returns_newton_euler_tau():
    model = kd.examples.double_pendulum()
    state = model.initial_state()
    with pytest.warns(DeprecationWarning, match=r"use kanedyn.newton_euler\(.*\).tau"):
        tau = kd.inverse_dynamics_rnea(model, state, [0.1, -0.2])
    np.testing.assert_array_equal(tau, kd.newton_euler(model, state, [0.1, -0.2]).tau)
    assert "inverse_dynamics_rnea" not in kd.__all__
