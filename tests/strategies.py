"""Hypothesis strategies and builders for random physical trees.

Topology, joint kinds and Euler sequences are drawn by hypothesis; the continuous
parameters (masses, inertias, points, static rotations, springs, dampers, embedded
momenta) come from a numpy generator seeded by a drawn integer, so every example is
reproducible from its printed seed.

Every generated body is physical: positive mass, and an inertia ``R diag(I) Rᵀ`` whose
principal moments are ``I1 = b + c, I2 = a + c, I3 = a + b`` with ``a, b, c > 0`` (second
moments of mass), so the triangle inequality holds strictly.

Joint kinds (``KINDS``): a hinge, 2- and 3-DOF gimbals over all 12 Euler sequences, a
spherical joint, 1-3 DOF sliders, a gimbal plus a slider, a weld. A root is ``"free"``
(6 DOF from N), ``"weld"`` (fixed to N) or any joint kind from N.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.spatial.rotation import EULER_SEQUENCES, is_symmetric_sequence

__all__ = [
    "KINDS",
    "ROOTS",
    "SEQUENCES",
    "SETTINGS",
    "joint_of_kind",
    "random_body",
    "random_inertia",
    "random_loads",
    "random_rotation",
    "random_state",
    "tree",
    "trees",
]

SEQUENCES = EULER_SEQUENCES
KINDS = (
    "hinge",
    "gimbal2",
    "gimbal3",
    "spherical",
    "slider1",
    "slider2",
    "slider3",
    "gimbal_slider",
    "weld",
)
ROOTS = ("free", *KINDS)

# modest example counts: every example builds a model and evaluates the dynamics
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


# --------------------------------------------------------------------------- parameters
def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random proper rotation matrix."""
    return Rotation.random(random_state=rng).as_matrix()


def random_inertia(rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    """``R diag(b+c, a+c, a+b) Rᵀ`` with random second moments ``a, b, c > 0``."""
    a, b, c = scale * rng.uniform(0.2, 1.0, 3)
    R = random_rotation(rng)
    return R @ np.diag([b + c, a + c, a + b]) @ R.T


def random_body(
    name: str, rng: np.random.Generator, *, embedded: bool = False, mass_scale: float = 1.0
) -> kd.Body:
    mass = mass_scale * rng.uniform(0.5, 3.0)
    h = rng.uniform(-1.0, 1.0, 3) if embedded else np.zeros(3)
    return kd.Body(
        name,
        mass=mass,
        inertia=random_inertia(rng, mass_scale),
        com=rng.uniform(-0.5, 0.5, 3),
        embedded_momentum=h,
    )


def _trn_seq(rng: np.random.Generator) -> str:
    return "".join(str(a) for a in rng.permutation([1, 2, 3]))


def joint_of_kind(
    kind: str,
    name: str,
    inner: str | None,
    outer: str,
    rng: np.random.Generator,
    *,
    seq: str = "123",
    springs: bool = True,
    static: bool = True,
) -> kd.Joint:
    """One joint of ``kind`` (see ``KINDS``, plus ``"free"``), with random joint points,
    static rotations (when ``static``), springs and dampers (when ``springs``)."""
    if kind == "free":
        kw: dict = dict(rot_type="spherical", rot_dof=3, trn_dof=3, trn_seq=_trn_seq(rng))
    elif kind == "hinge":
        kw = dict(rot_dof=1, rot_seq=seq)
    elif kind == "gimbal2":
        kw = dict(rot_dof=2, rot_seq=seq)
    elif kind == "gimbal3":
        kw = dict(rot_dof=3, rot_seq=seq)
    elif kind == "spherical":
        kw = dict(rot_type="spherical", rot_dof=3)
    elif kind.startswith("slider"):
        kw = dict(trn_dof=int(kind[-1]), trn_seq=_trn_seq(rng))
    elif kind == "gimbal_slider":
        kw = dict(rot_dof=2, rot_seq=seq, trn_dof=int(rng.integers(1, 3)), trn_seq=_trn_seq(rng))
    elif kind == "weld":
        kw = {}
    else:
        raise ValueError(kind)
    ndof = kw.get("rot_dof", 0) + kw.get("trn_dof", 0)
    if springs and kind != "free":
        kw["stiffness"] = rng.uniform(0.0, 3.0, ndof)
        kw["damping"] = rng.uniform(0.0, 0.5, ndof)
    if static:
        kw["inner_rotation"] = random_rotation(rng)
        kw["outer_rotation"] = random_rotation(rng)
    return kd.Joint(
        name,
        inner,
        outer,
        inner_point=rng.uniform(-0.6, 0.6, 3) if inner is not None else rng.uniform(-0.2, 0.2, 3),
        outer_point=rng.uniform(-0.6, 0.6, 3),
        **kw,
    )


def tree(
    parents: Sequence[int],
    kinds: Sequence[str],
    seqs: Sequence[str],
    seed: int,
    *,
    springs: bool = True,
    embedded: bool = False,
    gravity: bool = False,
    static: bool = True,
) -> kd.Model:
    """A tree of ``len(kinds)`` bodies: body 0 joins N by ``kinds[0]``; body i > 0 joins
    body ``parents[i - 1] < i`` by ``kinds[i]``. Joints are listed in reverse order, so
    the model has to sort them."""
    rng = np.random.default_rng(seed)
    bodies, joints = [], []
    for i, (kind, seq) in enumerate(zip(kinds, seqs, strict=True)):
        name = f"b{i}"
        bodies.append(random_body(name, rng, embedded=embedded and bool(rng.integers(0, 2))))
        inner = None if i == 0 else f"b{parents[i - 1]}"
        joints.append(
            joint_of_kind(kind, f"j{i}", inner, name, rng, seq=seq, springs=springs, static=static)
        )
    g = rng.uniform(-1.0, 1.0, 3) * 9.81 if gravity else np.zeros(3)
    return kd.Model(bodies, joints[::-1], gravity=g)


@st.composite
def trees(
    draw,
    *,
    min_bodies: int = 1,
    max_bodies: int = 4,
    roots: Sequence[str] = ROOTS,
    kinds: Sequence[str] = KINDS,
    springs: bool = True,
    embedded: bool = True,
    gravity: bool = True,
    min_dof: int = 1,
) -> kd.Model:
    """Random physical trees (see the module docstring) with at least ``min_dof``
    degrees of freedom."""
    n = draw(st.integers(min_bodies, max_bodies))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    chosen = [draw(st.sampled_from(tuple(roots)))]
    chosen += [draw(st.sampled_from(tuple(kinds))) for _ in range(n - 1)]
    seqs = [draw(st.sampled_from(SEQUENCES)) for _ in range(n)]
    has_gravity = draw(st.booleans()) if gravity else False
    seed = draw(st.integers(0, 2**32 - 1))
    model = tree(
        parents, chosen, seqs, seed, springs=springs, embedded=embedded, gravity=has_gravity
    )
    assume(model.n >= min_dof)
    return model


# --------------------------------------------------------------------------- states, loads
def random_state(
    model: kd.Model, rng: np.random.Generator, *, speed: float = 1.0, at_rest: bool = False
) -> kd.State:
    """Random coordinates and speeds, keeping 3-DOF gimbals away from gimbal lock.

    Angles are in (-1, 1) rad, except the middle angle of a 3-DOF gimbal: in
    ±(0.5, 2.6) for a symmetric sequence (lock at 0, π), in (-1, 1) otherwise (lock at
    ±π/2). Slides in (-0.3, 0.3); quaternions of a random axis and an angle below 2.5 rad
    (away from the rotation-vector branch cut of spherical springs at π); speeds in
    (-speed, speed).
    """
    q = np.zeros(model.nq)
    for j in model.joints:
        idx = model.coordinates(j.name)
        nr = j.n_rot_coordinates
        if j.rot_type == "spherical":
            axis = rng.normal(size=3)
            half = 0.5 * rng.uniform(0.0, 2.5)  # rotation angle below 2.5 rad
            q[idx[:4]] = np.r_[np.sin(half) * axis / np.linalg.norm(axis), np.cos(half)]
        else:
            q[idx[:nr]] = rng.uniform(-1.0, 1.0, nr)
            if j.rot_dof == 3 and is_symmetric_sequence(j.rot_seq):
                q[idx[1]] = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.6)
        q[idx[nr:]] = rng.uniform(-0.3, 0.3, j.trn_dof)
    u = np.zeros(model.n) if at_rest else rng.uniform(-speed, speed, model.n)
    return kd.State(q, u)


def random_loads(model: kd.Model, rng: np.random.Generator) -> list:
    """External forces (at points and mass centres, N and body frames), torques and
    joint actuator efforts on random bodies and joints."""
    loads: list = []
    for b in model.bodies:
        if rng.random() < 0.6:
            loads.append(
                kd.Force(
                    b.name,
                    rng.uniform(-2.0, 2.0, 3),
                    point=rng.uniform(-0.5, 0.5, 3) if rng.random() < 0.7 else None,
                    frame=str(rng.choice(["N", "body"])),
                )
            )
        if rng.random() < 0.6:
            loads.append(
                kd.Torque(b.name, rng.uniform(-1.0, 1.0, 3), frame=str(rng.choice(["N", "body"])))
            )
    for j in model.joints:
        if j.ndof and rng.random() < 0.5:
            loads.append(kd.JointLoad(j.name, rng.uniform(-1.0, 1.0, j.ndof)))
    return loads
