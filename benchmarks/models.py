"""The benchmark models, built with kanedyn's public API (peers are built from these)."""

from __future__ import annotations

import numpy as np

import kanedyn as kd


def chain(n: int) -> kd.Model:
    """n-link planar pendulum of uniform rods on z hinges, gravity -9.81 y."""
    return kd.examples.chain(n)


def skew_chain(n: int, seed: int = 50) -> kd.Model:
    """n-link chain of hinges with no structure to exploit: random joint frames (so
    hinge axes in no coordinate direction), offsets, full inertia tensors, mass-centre
    offsets and gravity; revolute only, no springs (as the peers compute it)."""
    rng = np.random.default_rng(seed)
    bodies, joints = [], []
    for i in range(n):
        moments = np.sort(rng.uniform(0.5, 2.0, 3))
        moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
        R = kd.euler_to_dcm("123", rng.uniform(-3, 3, 3))
        bodies.append(kd.Body(f"link{i}", rng.uniform(0.5, 3.0), R @ np.diag(moments) @ R.T,
                              com=0.3 * rng.normal(size=3)))  # fmt: skip
        joints.append(
            kd.Joint.revolute(
                f"joint{i}", f"link{i - 1}" if i else None, f"link{i}", axis=int(rng.integers(1, 4)),
                inner_point=0.5 * rng.normal(size=3), outer_point=0.3 * rng.normal(size=3),
                inner_rotation=kd.euler_to_dcm("321", rng.uniform(-3, 3, 3)),
                outer_rotation=kd.euler_to_dcm("213", rng.uniform(-3, 3, 3)),
            )
        )  # fmt: skip
    return kd.Model(bodies, joints, gravity=rng.normal(size=3))


def spacecraft(k: int) -> kd.Model:
    """A free-floating hub with ``k`` appendages, cycling through three kinds:

    * a hinged boom (revolute about the hub's y axis) carrying a hinged tip panel;
    * a rod on a spherical joint;
    * a slider (prismatic along the hub's x axis) carrying a 2-DOF gimbal (231).
    No gravity, springs or dampers: pure rigid-body dynamics, as the peers compute it.
    """
    I = kd.inertia_tensor
    bodies = [
        kd.Body("hub", 500.0, I(400.0, 350.0, 300.0, 5.0, -3.0, 2.0), com=(0.02, -0.01, 0.05))
    ]
    joints = [kd.Joint.free("root", outer="hub")]
    for a in range(k):
        ang = 2.0 * np.pi * a / max(k, 1)
        rim = (0.8 * np.cos(ang), 0.8 * np.sin(ang), 0.1 * (a % 3))
        R_in = kd.euler_to_dcm("312", (ang, 0.0, 0.0))
        kind = a % 3
        name = f"app{a}"
        if kind == 0:
            bodies += [kd.Body(name, 20.0, I(0.5, 6.0, 6.2), com=(1.0, 0.0, 0.0)),
                       kd.Body(name + "_tip", 5.0, I(0.4, 0.3, 0.6), com=(0.3, 0.0, 0.0))]  # fmt: skip
            joints += [
                kd.Joint.revolute(f"hinge{a}", "hub", name, axis=2, inner_point=rim,
                                  inner_rotation=R_in),
                kd.Joint.revolute(f"tip{a}", name, name + "_tip", axis=3,
                                  inner_point=(2.0, 0.0, 0.0), outer_point=(-0.05, 0.0, 0.0)),
            ]  # fmt: skip
        elif kind == 1:
            bodies.append(
                kd.Body(name, 8.0, I(0.2, 1.5, 1.6, 0.01, 0.0, 0.02), com=(0.6, 0.05, 0.0))
            )
            joints.append(kd.Joint.spherical(f"ball{a}", "hub", name, inner_point=rim,
                                             inner_rotation=R_in))  # fmt: skip
        else:
            bodies += [kd.Body(name, 10.0, I(0.3, 0.4, 0.5), com=(0.1, 0.0, 0.0)),
                       kd.Body(name + "_arm", 3.0, I(0.05, 0.6, 0.6), com=(0.5, 0.0, 0.0))]  # fmt: skip
            joints += [
                kd.Joint.prismatic(f"slide{a}", "hub", name, axis=1, inner_point=rim,
                                   inner_rotation=R_in),
                kd.Joint.gimbal(f"gimbal{a}", name, name + "_arm", seq="231", dof=2,
                                inner_point=(0.2, 0.0, 0.0),
                                outer_rotation=kd.euler_to_dcm("123", (0.1, 0.2, 0.3))),
            ]  # fmt: skip
    return kd.Model(bodies, joints)


def random_state(model: kd.Model, rng: np.random.Generator) -> kd.State:
    """Angles and slides ~ N(0, 0.5), random unit quaternions, speeds ~ N(0, 1)."""
    q = 0.5 * rng.normal(size=model.nq)
    quat_q = model.layout.quat_q
    if quat_q.size:
        quat = rng.normal(size=quat_q.shape)
        q[quat_q] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return kd.State(q, rng.normal(size=model.n))


def random_states(model: kd.Model, B: int, rng: np.random.Generator) -> kd.States:
    """B random states (see :func:`random_state`)."""
    from kanedyn.model.batch import States

    return States.stack([random_state(model, rng) for _ in range(B)])
