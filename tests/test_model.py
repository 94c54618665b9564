"""Tests of kanedyn.model: Body, Joint, State, Model construction, layout and validation."""

from __future__ import annotations

import itertools
import re

import attrs
import numpy as np
import pytest
import sympy as sp
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn import Body, Joint, Loop, Model, State
from kanedyn.errors import ModelError

I123 = kd.inertia_tensor(1.0, 2.0, 3.0)  # a thin plate: 1 + 2 = 3, on the triangle boundary
I_BOX = kd.inertia_tensor(2.0, 3.0, 4.0, Ixy=0.1, Ixz=-0.2, Iyz=0.3)


def body(name: str, mass: float = 1.0, inertia=I_BOX, com=(0.0, 0.0, 0.0)) -> Body:
    return Body(name, mass=mass, inertia=inertia, com=com)


def same_rotation(a, b):
    """Quaternions a, b describe the same rotation (q and -q), to 1e-12."""
    a, b = np.asarray(a), np.asarray(b)
    return min(np.abs(a - b).max(), np.abs(a + b).max()) <= 1e-12


# --------------------------------------------------------------------------- joints


@pytest.mark.parametrize(
    ("joint", "rot_type", "rot_dof", "trn_dof", "n_rot_q"),
    [
        (Joint.free("j", outer="b"), "spherical", 3, 3, 4),
        (Joint.revolute("j", None, "b", axis=1), "gimbal", 1, 0, 1),
        (Joint.revolute("j", None, "b", axis=2), "gimbal", 1, 0, 1),
        (Joint.revolute("j", None, "b", axis=3), "gimbal", 1, 0, 1),
        (Joint.prismatic("j", None, "b", axis=1), "gimbal", 0, 1, 0),
        (Joint.prismatic("j", None, "b", axis=2), "gimbal", 0, 1, 0),
        (Joint.prismatic("j", None, "b", axis=3), "gimbal", 0, 1, 0),
        (Joint.spherical("j", None, "b"), "spherical", 3, 0, 4),
        (Joint.gimbal("j", None, "b", seq="231", dof=2), "gimbal", 2, 0, 2),
        (Joint.gimbal("j", None, "b", seq="313", dof=3), "gimbal", 3, 0, 3),
        (Joint.weld("j", None, "b"), "gimbal", 0, 0, 0),
        (Joint("j", None, "b", rot_dof=2, rot_seq="321", trn_dof=2, trn_seq="312"), "gimbal", 2, 2, 2),
        (Joint("j", None, "b", rot_type="spherical", rot_dof=3, trn_dof=1), "spherical", 3, 1, 4),
    ],
)  # fmt: skip
def test_joint_constructors(joint, rot_type, rot_dof, trn_dof, n_rot_q):
    assert joint.name == "j"
    assert joint.inner is None and joint.is_root
    assert joint.outer == "b"
    assert joint.rot_type == rot_type
    assert (joint.rot_dof, joint.trn_dof, joint.ndof) == (rot_dof, trn_dof, rot_dof + trn_dof)
    assert joint.n_rot_coordinates == n_rot_q
    assert joint.stiffness.shape == (rot_dof + trn_dof,)
    assert joint.damping.shape == (rot_dof + trn_dof,)


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_revolute_and_prismatic_axis_digits(axis):
    assert Joint.revolute("j", "a", "b", axis=axis).rot_seq[0] == str(axis)
    assert Joint.prismatic("j", "a", "b", axis=axis).trn_seq[0] == str(axis)


def test_general_form_keeps_every_field():
    R = kd.euler_to_dcm("312", (np.pi / 2, 0.0, 0.0))
    j = Joint("g1", inner="hub", outer="rod", rot_type="gimbal", rot_dof=2, rot_seq="231",
              trn_dof=1, trn_seq="213", inner_point=(0, 0.5, 2.5), outer_point=(1, 2, 3),
              inner_rotation=R, outer_rotation=R.T, stiffness=(0.2, 0.3, 0.4),
              damping=5.0)  # fmt: skip
    assert (j.inner, j.outer, j.rot_seq, j.trn_seq) == ("hub", "rod", "231", "213")
    assert not j.is_root
    np.testing.assert_array_equal(j.inner_point, [0.0, 0.5, 2.5])
    np.testing.assert_array_equal(j.outer_point, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(j.inner_rotation, R)
    np.testing.assert_array_equal(j.outer_rotation, R.T)
    np.testing.assert_array_equal(j.stiffness, [0.2, 0.3, 0.4])
    np.testing.assert_array_equal(j.damping, [5.0, 5.0, 5.0])  # scalar -> one per DOF
    assert isinstance(Joint("j", None, "b", rot_dof=np.int64(2)).rot_dof, int)


@pytest.mark.parametrize(
    ("joint", "nq", "nu", "ns"),
    [
        (Joint.free("j", outer="b"), 7, 3, 3),
        (Joint.revolute("j", None, "b", axis=2), 1, 1, 0),
        (Joint.prismatic("j", None, "b", axis=3), 1, 0, 1),
        (Joint.spherical("j", None, "b"), 4, 3, 0),
        (Joint.gimbal("j", None, "b", seq="231", dof=2), 2, 2, 0),
        (Joint.gimbal("j", None, "b", seq="121", dof=3), 3, 3, 0),
        (Joint.weld("j", None, "b"), 0, 0, 0),
        (Joint("j", None, "b", rot_dof=2, trn_dof=1), 3, 2, 1),
        (Joint("j", None, "b", rot_type="spherical", rot_dof=3, trn_dof=2), 6, 3, 2),
    ],
)
def test_single_joint_model_sizes(joint, nq, nu, ns):
    model = Model([body("b")], [joint])
    assert (model.nq, model.nu, model.ns, model.n, model.nb) == (nq, nu, ns, nu + ns, 1)
    state = model.initial_state()
    assert state.q.shape == (nq,) and state.u.shape == (nu + ns,)


def test_explorer1_sizes():
    # free root (4 quaternion + 3 slides; 3 + 3 speeds) and four 2-DOF gimbals
    model = kd.examples.explorer1()
    assert model.nb == 5
    assert model.nq == 4 + 4 * 2 + 3  # 15
    assert model.nu == 3 + 4 * 2  # 11
    assert model.ns == 3
    assert model.n == 14


# Hand values for one body, mass 2, I_c = diag(1, 2, 3), mass centre c = (0.1, 0.2, 0.3),
# hinged at the origin of N with the body frame on the joint point:
#   axis 1: Ixx + m (cy^2 + cz^2) = 1 + 2 (0.04 + 0.09) = 1.26
#   axis 2: Iyy + m (cx^2 + cz^2) = 2 + 2 (0.01 + 0.09) = 2.20
#   axis 3: Izz + m (cx^2 + cy^2) = 3 + 2 (0.01 + 0.04) = 3.10
@pytest.mark.parametrize(("axis", "expected"), [(1, 1.26), (2, 2.20), (3, 3.10)])
def test_revolute_axis_by_hand_mass_matrix(axis, expected):
    b = body("b", mass=2.0, inertia=I123, com=(0.1, 0.2, 0.3))
    model = Model([b], [Joint.revolute("h", None, "b", axis=axis)])
    M = kd.mass_matrix(model, model.initial_state())
    np.testing.assert_allclose(M, [[expected]], rtol=1e-12)
    # a slide along any axis carries the whole mass: M = m = 2
    model = Model([b], [Joint.prismatic("p", None, "b", axis=axis)])
    np.testing.assert_allclose(kd.mass_matrix(model, model.initial_state()), [[2.0]], rtol=1e-12)


def test_spherical_mass_matrix_by_hand():
    # I about the joint point = I_c + m (|c|^2 U - c c^T), c = (0.1, 0.2, 0.3), |c|^2 = 0.14:
    #   |c|^2 U - c c^T = [[0.13, -0.02, -0.03], [-0.02, 0.10, -0.06], [-0.03, -0.06, 0.05]]
    #   times m = 2, plus diag(1, 2, 3)
    b = body("b", mass=2.0, inertia=I123, com=(0.1, 0.2, 0.3))
    model = Model([b], [Joint.spherical("s", None, "b")])
    expected = [[1.26, -0.04, -0.06], [-0.04, 2.20, -0.12], [-0.06, -0.12, 3.10]]
    np.testing.assert_allclose(
        kd.mass_matrix(model, model.initial_state()), expected, rtol=1e-12, atol=1e-14
    )


# --------------------------------------------------------------------------- immutability


def test_state_arrays_are_read_only_copies():
    q_in = [0.0, 0.0, 0.0, 1.0]
    u_arr = np.array([1.0, 2.0, 3.0])
    state = State(q_in, u_arr)
    q_in[0] = 99.0
    u_arr[0] = 99.0
    np.testing.assert_array_equal(state.q, [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(state.u, [1.0, 2.0, 3.0])
    assert state.q.dtype == np.float64
    with pytest.raises(ValueError, match="read-only"):
        state.q[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        state.u[1] = 1.0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        state.q = np.zeros(4)


@pytest.mark.parametrize(
    ("q", "u", "match"),
    [
        ([[0.0, 1.0]], [0.0], r"state\.q: must be one-dimensional"),
        ([0.0], 3.0, r"state\.u: must be one-dimensional"),
        (["a"], [0.0], r"state\.q: cannot be read as numbers"),
    ],
)
def test_state_rejects_bad_arrays(q, u, match):
    with pytest.raises(ModelError, match=match):
        State(q, u)


def test_body_arrays_are_read_only_copies():
    inertia = np.array(I_BOX)
    com = [0.1, 0.2, 0.3]
    h = np.array([0.0, 0.0, 5.0])
    b = Body("b", mass=2.0, inertia=inertia, com=com, embedded_momentum=h)
    inertia[0, 0] = 99.0
    com[0] = 99.0
    h[2] = 99.0
    np.testing.assert_array_equal(b.inertia, I_BOX)
    np.testing.assert_array_equal(b.com, [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(b.embedded_momentum, [0.0, 0.0, 5.0])
    for arr in (b.inertia, b.com, b.embedded_momentum):
        assert not arr.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1.0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        b.mass = 3.0


def test_joint_arrays_are_read_only_copies():
    p = np.array([1.0, 2.0, 3.0])
    R = np.eye(3)
    k = [0.5, 0.6]
    j = Joint("j", "a", "b", rot_dof=2, inner_point=p, inner_rotation=R, stiffness=k, damping=1.0)
    p[0] = 99.0
    R[0, 0] = -1.0
    k[0] = 99.0
    np.testing.assert_array_equal(j.inner_point, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(j.inner_rotation, np.eye(3))
    np.testing.assert_array_equal(j.stiffness, [0.5, 0.6])
    for field in ("inner_point", "outer_point", "inner_rotation", "outer_rotation",
                  "stiffness", "damping"):  # fmt: skip
        arr = getattr(j, field)
        assert not arr.flags.writeable, field
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1.0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        j.rot_dof = 3


def test_attrs_evolve_makes_a_changed_copy():
    b = body("b", mass=2.0, com=(0.0, 0.0, 1.0))
    b2 = attrs.evolve(b, mass=3.0)
    assert (b.mass, b2.mass) == (2.0, 3.0)
    np.testing.assert_array_equal(b2.com, b.com)
    with pytest.raises(ModelError, match="body 'b': mass must be positive"):
        attrs.evolve(b, mass=-1.0)  # an evolved copy is validated too

    j = Joint.revolute("h", None, "b", axis=1, stiffness=0.5)
    j2 = attrs.evolve(j, stiffness=2.0)
    np.testing.assert_array_equal(j.stiffness, [0.5])
    np.testing.assert_array_equal(j2.stiffness, [2.0])
    assert j2.rot_seq == j.rot_seq

    model = Model([b], [j])
    model2 = attrs.evolve(model, gravity=(0.0, 0.0, -9.81))
    np.testing.assert_array_equal(model.gravity, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(model2.gravity, [0.0, 0.0, -9.81])
    assert model2.nq == model.nq == 1
    model3 = attrs.evolve(model, bodies=[b2])
    assert model3.bodies[0].mass == 3.0 and model.bodies[0].mass == 2.0


# --------------------------------------------------------------------------- topology


def chain_parts():
    bodies = [body(f"b{i}", mass=1.0 + i, com=(0.5, 0.0, 0.0)) for i in range(4)]
    joints = [Joint.free("j0", outer="b0")] + [
        Joint.revolute(f"j{i}", f"b{i - 1}", f"b{i}", axis=3, inner_point=(1.0, 0, 0))
        for i in range(1, 4)
    ]
    return bodies, joints


def test_chain_in_any_order_sorts_the_same():
    bodies, joints = chain_parts()
    for perm in itertools.permutations(range(4)):
        model = Model([bodies[i] for i in perm[::-1]], [joints[i] for i in perm])
        assert [j.name for j in model.joints] == ["j0", "j1", "j2", "j3"], perm
        assert [b.name for b in model.bodies] == ["b0", "b1", "b2", "b3"], perm
        np.testing.assert_array_equal(model.layout.parent, [-1, 0, 1, 2])


def tree_parts():
    bodies = [
        body("hub", mass=10.0, com=(0.0, 0.0, 0.5)),
        body("a", mass=1.0, com=(0.5, 0.0, 0.0)),
        body("b", mass=2.0, com=(0.0, 0.3, 0.0)),
        body("c", mass=3.0, com=(0.0, 0.0, 0.2)),
        body("d", mass=4.0, com=(0.1, 0.1, 0.1)),
    ]
    joints = [
        Joint.free("root", outer="hub"),
        Joint.revolute("ja", "hub", "a", axis=2, inner_point=(1.0, 0.0, 0.0)),
        Joint.prismatic("jb", "hub", "b", axis=2, inner_point=(0.0, 1.0, 0.0)),
        Joint.spherical("jc", "a", "c", inner_point=(1.0, 0.0, 0.0)),
        Joint("jd", "b", "d", rot_dof=2, rot_seq="231", trn_dof=1, trn_seq="312",
              inner_point=(0.0, 0.5, 0.0)),
    ]  # fmt: skip
    return bodies, joints


TREE_PARENT = {"root": None, "ja": "hub", "jb": "hub", "jc": "a", "jd": "b"}


def tree_state(model: Model) -> State:
    s = model.initial_state()
    s = model.set_joint(s, "root", quaternion=(0.1, -0.2, 0.3, 0.9), rates=(0.1, 0.2, -0.3),
                        displacements=(1.0, 2.0, 3.0), displacement_rates=(0.4, 0.5, 0.6))  # fmt: skip
    s = model.set_joint(s, "ja", angles=(0.3,), rates=(-0.7,))
    s = model.set_joint(s, "jb", displacements=(0.2,), displacement_rates=(0.8,))
    s = model.set_joint(s, "jc", angles=(0.1, 0.4, -0.2), rates=(0.3, -0.1, 0.2))
    return model.set_joint(s, "jd", angles=(0.5, -0.3), rates=(0.2, 0.1),
                           displacements=(0.05,), displacement_rates=(-0.3,))  # fmt: skip


def test_tree_order_is_topological_for_every_input_order():
    bodies, joints = tree_parts()
    for perm in itertools.permutations(range(5)):
        model = Model(bodies, [joints[i] for i in perm])
        names = [j.name for j in model.joints]
        assert sorted(names) == sorted(TREE_PARENT)
        for k, j in enumerate(model.joints):
            # joint k is the inbound joint of body k
            assert j.outer == model.bodies[k].name
            assert model.body_index(j.outer) == k and model.joint_index(j.name) == k
            # parent = inner body's index, and it comes first
            parent = model.layout.parent[k]
            if TREE_PARENT[j.name] is None:
                assert parent == -1
            else:
                assert model.bodies[parent].name == TREE_PARENT[j.name]
                assert parent < k


def test_tree_mass_matrix_independent_of_input_order():
    bodies, joints = tree_parts()
    ref = Model(bodies, joints)
    order = list(TREE_PARENT)
    idx = np.concatenate([ref.speeds(name) for name in order])
    M_ref = kd.mass_matrix(ref, tree_state(ref))[np.ix_(idx, idx)]
    for perm in [(4, 3, 2, 1, 0), (2, 4, 0, 3, 1), (3, 1, 4, 0, 2)]:
        model = Model(bodies[::-1], [joints[i] for i in perm])
        idx = np.concatenate([model.speeds(name) for name in order])
        M = kd.mass_matrix(model, tree_state(model))[np.ix_(idx, idx)]
        np.testing.assert_allclose(M, M_ref, rtol=1e-12, atol=1e-12)


def test_coordinates_and_speeds_layout():
    bodies, joints = tree_parts()
    model = Model(bodies, joints)
    # breadth-first order: root, ja, jb (children of hub), jc (of a), jd (of b)
    assert [j.name for j in model.joints] == ["root", "ja", "jb", "jc", "jd"]
    # q = [root quat 0-3 | ja 4 | jc quat 5-8 | jd angles 9-10 || root slides 11-13 |
    #      jb 14 | jd slide 15]
    assert model.nq == 4 + 1 + 4 + 2 + 3 + 1 + 1  # 16
    # u = [root 0-2 | ja 3 | jc 4-6 | jd 7-8 || root 9-11 | jb 12 | jd 13]
    assert (model.nu, model.ns, model.n) == (9, 5, 14)
    expected_q = {
        "root": [0, 1, 2, 3, 11, 12, 13],
        "ja": [4],
        "jb": [14],
        "jc": [5, 6, 7, 8],
        "jd": [9, 10, 15],
    }
    expected_u = {
        "root": [0, 1, 2, 9, 10, 11],
        "ja": [3],
        "jb": [12],
        "jc": [4, 5, 6],
        "jd": [7, 8, 13],
    }
    for name in expected_q:
        np.testing.assert_array_equal(model.coordinates(name), expected_q[name])
        np.testing.assert_array_equal(model.speeds(name), expected_u[name])
        assert model.coordinates(name).dtype.kind == "i"
    assert len(model.coordinates("jc")) == 4 and len(model.speeds("jc")) == 3
    # the returned index arrays are the caller's to change
    c = model.coordinates("ja")
    c[0] = 99
    np.testing.assert_array_equal(model.coordinates("ja"), [4])


def test_initial_state():
    bodies, joints = tree_parts()
    model = Model(bodies, joints)
    state = model.initial_state()
    expected_q = np.zeros(16)
    expected_q[[3, 8]] = 1.0  # scalar-last identity quaternions of root and jc
    np.testing.assert_array_equal(state.q, expected_q)
    np.testing.assert_array_equal(state.u, np.zeros(14))
    np.testing.assert_array_equal(state.q[model.coordinates("root")[:4]], [0, 0, 0, 1])
    np.testing.assert_array_equal(state.q[model.coordinates("jc")], [0, 0, 0, 1])


# --------------------------------------------------------------------------- set_joint


def test_set_joint_gimbal_returns_new_state():
    bodies, joints = tree_parts()
    model = Model(bodies, joints)
    s0 = model.initial_state()
    q0, u0 = s0.q.copy(), s0.u.copy()
    s1 = model.set_joint(s0, "jd", angles=(0.1, -0.2), rates=(0.0, 0.2))
    assert s1 is not s0
    np.testing.assert_array_equal(s0.q, q0)  # old state untouched
    np.testing.assert_array_equal(s0.u, u0)
    np.testing.assert_array_equal(s1.q[[9, 10]], [0.1, -0.2])
    np.testing.assert_array_equal(s1.u[[7, 8]], [0.0, 0.2])
    other_q = np.setdiff1d(np.arange(model.nq), [9, 10])
    other_u = np.setdiff1d(np.arange(model.n), [7, 8])
    np.testing.assert_array_equal(s1.q[other_q], q0[other_q])
    np.testing.assert_array_equal(s1.u[other_u], u0[other_u])
    assert not s1.q.flags.writeable


def test_set_joint_slides():
    bodies, joints = tree_parts()
    model = Model(bodies, joints)
    s = model.set_joint(model.initial_state(), "root", displacements=(1.0, 2.0, 3.0),
                        displacement_rates=(4.0, 5.0, 6.0))  # fmt: skip
    np.testing.assert_array_equal(s.q[[11, 12, 13]], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(s.u[[9, 10, 11]], [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(s.q[:4], [0, 0, 0, 1])  # rotation untouched
    s = model.set_joint(s, "jd", displacements=0.25, displacement_rates=[-1.0])
    assert s.q[15] == 0.25 and s.u[13] == -1.0


@pytest.mark.parametrize("angles", [(0.1, 0.2, 0.3), (-1.2, 0.9, 2.5), (0.4, -1.4, 0.2)])
def test_set_joint_spherical_by_angles_is_body_fixed_123(angles):
    bodies, joints = tree_parts()
    model = Model(bodies, joints)
    s = model.set_joint(model.initial_state(), "jc", angles=angles, rates=(1.0, 2.0, 3.0))
    expected = Rotation.from_euler("XYZ", angles).as_quat()  # intrinsic x-y-z, scalar last
    assert same_rotation(s.q[model.coordinates("jc")], expected)
    np.testing.assert_array_equal(s.u[model.speeds("jc")], [1.0, 2.0, 3.0])


def test_set_joint_spherical_by_quaternion_normalizes():
    bodies, joints = tree_parts()
    model = Model(bodies, joints)
    s = model.set_joint(model.initial_state(), "root", quaternion=(1.0, 2.0, 3.0, 4.0))
    # |(1, 2, 3, 4)| = sqrt(30)
    expected = np.array([1.0, 2.0, 3.0, 4.0]) / np.sqrt(30.0)
    assert same_rotation(s.q[:4], expected)


# --------------------------------------------------------------------------- bad input


def raises(match: str):
    return pytest.raises(ModelError, match=match)


@pytest.mark.parametrize("mass", [0.0, -1.0])
def test_body_rejects_non_positive_mass(mass):
    with raises(r"body 'b': mass must be positive"):
        body("b", mass=mass)


@pytest.mark.parametrize("mass", [np.nan, np.inf, -np.inf])
def test_body_rejects_non_finite_mass(mass):
    with raises(r"body 'b': mass.*non-finite"):
        body("b", mass=mass)


@pytest.mark.parametrize(
    ("inertia", "match"),
    [
        ([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "not symmetric"),
        (np.diag([1.0, 2.0, -3.0]), "not positive definite"),
        (np.diag([1.0, 1.0, 2.5]), "triangle inequality"),  # 1 + 1 < 2.5
        (np.diag([5174.0, 3593.0, 245.4]), "triangle inequality"),  # 245.4 + 3593 < 5174
        (np.eye(2), r"expected shape \(3, 3\)"),
        (np.diag([1.0, np.nan, 1.0]), "non-finite"),
    ],
)
def test_body_rejects_bad_inertia(inertia, match):
    with raises(rf"body 'panel'.*{match}"):
        body("panel", inertia=inertia)


def test_body_check_triangle_false():
    hub = Body("hub", 1963.5, np.diag([5174.0, 3593.0, 245.4]), check_triangle=False)
    np.testing.assert_array_equal(np.diag(hub.inertia), [5174.0, 3593.0, 245.4])
    with raises(r"body 'hub'.*not positive definite"):
        Body("hub", 1963.5, np.diag([5174.0, 3593.0, -245.4]), check_triangle=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"com": (0.0, 1.0)}, r"body 'b': com: expected shape \(3,\)"),
        ({"com": (0.0, np.nan, 0.0)}, r"body 'b': com: has non-finite"),
        ({"embedded_momentum": np.zeros(4)}, r"body 'b': embedded_momentum: expected shape"),
    ],
)
def test_body_rejects_bad_vectors(kwargs, match):
    with raises(match):
        Body("b", mass=1.0, inertia=I_BOX, **kwargs)


def test_model_rejects_duplicate_body_name():
    with raises(r"duplicate body name 'a'"):
        Model([body("a"), body("a")], [Joint.free("r", outer="a")])


def test_model_rejects_duplicate_joint_name():
    with raises(r"duplicate joint name 'r'"):
        Model([body("a"), body("b")], [Joint.free("r", outer="a"), Joint.free("r", outer="b")])


@pytest.mark.parametrize(
    ("joint", "match"),
    [
        (Joint.revolute("h", "ghost", "b"), r"joint 'h': unknown inner body 'ghost'"),
        (Joint.revolute("h", "a", "ghost"), r"joint 'h': unknown outer body 'ghost'"),
    ],
)
def test_model_rejects_unknown_body(joint, match):
    with raises(match):
        Model([body("a"), body("b")], [Joint.free("r", outer="a"), joint])


def test_model_rejects_two_inbound_joints():
    joints = [Joint.free("r", outer="a"), Joint.weld("w", None, "b"), Joint.revolute("h", "a", "b")]
    with raises(r"body 'b' has two inbound joints \('w' and 'h'\)"):
        Model([body("a"), body("b")], joints)


def test_two_inbound_joints_suggest_a_loop_joint():
    joints = [
        Joint.free("r", outer="a"),
        Joint.revolute("h1", "a", "b"),
        Joint.revolute("h2", "a", "b"),
    ]
    with raises(r"declare one of them as a loop joint \(kd\.Loop, passed as Model\(\.\.\., loops="):
        Model([body("a"), body("b")], joints)
    # the remedy works: the same joint as a kd.Loop closes the chain
    loop = Loop.revolute("h2", "a", "b")
    assert Model([body("a"), body("b")], joints[:2], loops=[loop]).loops[0].name == "h2"


@pytest.mark.parametrize(
    ("lookup", "match"),
    [
        (lambda m: m.body_index("hbu"), r"unknown body 'hbu' \(did you mean 'hub'\?\); bodies are"),
        (lambda m: m.body("b "), r"unknown body 'b ' \(did you mean 'b'\?\)"),
        (lambda m: m.joint("jaa"), r"unknown joint 'jaa' \(did you mean 'ja'\?\)"),
        (lambda m: m.set_joint(m.initial_state(), "jbb", angles=(0.1,)),
         r"unknown joint 'jbb' \(did you mean 'jb'\?\)"),
    ],
)  # fmt: skip
def test_misspelt_names_suggest_the_closest(tree_model, lookup, match):
    with raises(match):
        lookup(tree_model)


@pytest.mark.parametrize(
    ("joint", "match"),
    [
        (Joint.revolute("h", "aa", "b"), r"unknown inner body 'aa' \(did you mean 'a'\?\)"),
        (Joint.revolute("h", "a", "hinge"), r"unknown outer body 'hinge'$"),
    ],
)
def test_model_suggests_a_body_for_a_misspelt_joint_end(joint, match):
    with raises(match):
        Model([body("a"), body("b")], [Joint.free("r", outer="a"), joint])


def test_model_rejects_body_without_inbound_joint():
    with raises(r"body 'b' has no inbound joint"):
        Model([body("a"), body("b")], [Joint.free("r", outer="a")])
    with raises(r"body 'a' has no inbound joint"):
        Model([body("a")], [])


def test_model_rejects_two_cycle():
    joints = [Joint.revolute("j1", "a", "b"), Joint.revolute("j2", "b", "a")]
    with raises(r"joints \['j1', 'j2'\] form a cycle"):
        Model([body("a"), body("b")], joints)


def test_model_rejects_three_cycle_beside_a_valid_root():
    joints = [
        Joint.free("root", outer="hub"),
        Joint.revolute("j1", "a", "b"),
        Joint.revolute("j2", "b", "c"),
        Joint.revolute("j3", "c", "a"),
    ]
    with raises(r"joints \['j1', 'j2', 'j3'\] form a cycle"):
        Model([body("hub"), body("a"), body("b"), body("c")], joints)


def test_joint_rejects_self_loop():
    with raises(r"joint 'j': inner and outer body are both 'a'"):
        Joint.revolute("j", "a", "a")


@pytest.mark.parametrize("field", ["rot_dof", "trn_dof"])
@pytest.mark.parametrize("value", [-1, 4, 1.0, 2.5, "2", None, True, False])
def test_joint_rejects_bad_dof(field, value):
    with raises(rf"joint 'j': {field} must be an integer 0-3, got {re.escape(repr(value))}"):
        Joint("j", None, "b", **{field: value})


@pytest.mark.parametrize(
    ("seq", "problem"),
    [("124", "only contain the digits"), ("112", "repeats an axis"), ("12", "exactly 3 digits")],
)
def test_joint_rejects_bad_euler_sequence(seq, problem):
    with raises(rf"joint 'j': rot_seq: Euler sequence '{seq}' .*{problem}"):
        Joint("j", None, "b", rot_dof=3, rot_seq=seq)
    with raises(rf"joint 'j': rot_seq: Euler sequence '{seq}' .*{problem}"):
        Joint.gimbal("j", None, "b", seq=seq, dof=1)


def test_joint_rejects_bad_translation_sequence():
    with raises(r"joint 'j': trn_seq '121' must name three distinct axes"):
        Joint("j", None, "b", trn_dof=2, trn_seq="121")
    with raises(r"joint 'j': trn_seq: Euler sequence '12'"):
        Joint("j", None, "b", trn_dof=1, trn_seq="12")


@pytest.mark.parametrize("axis", [0, 4, -1])
def test_revolute_and_prismatic_reject_bad_axis(axis):
    with raises(rf"joint 'j': axis must be 1, 2 or 3, got {axis}"):
        Joint.revolute("j", None, "b", axis=axis)
    with raises(rf"joint 'j': axis must be 1, 2 or 3, got {axis}"):
        Joint.prismatic("j", None, "b", axis=axis)


@pytest.mark.parametrize("axis", [True, 2.0])
def test_revolute_rejects_non_integer_axis(axis):
    with raises(r"joint 'j': axis must be 1, 2 or 3"):
        Joint.revolute("j", None, "b", axis=axis)


@pytest.mark.parametrize("rot_dof", [0, 1, 2])
def test_spherical_needs_three_rotational_dof(rot_dof):
    with raises(rf"joint 'j': a spherical joint has rot_dof = 3, got {rot_dof}"):
        Joint("j", None, "b", rot_type="spherical", rot_dof=rot_dof)


def test_joint_rejects_unknown_rotation_type():
    with raises(r"joint 'j': rot_type must be 'gimbal' or 'spherical', got 'ball'"):
        Joint("j", None, "b", rot_type="ball", rot_dof=3)


@pytest.mark.parametrize("field", ["inner_rotation", "outer_rotation"])
@pytest.mark.parametrize(
    "R",
    [
        [[1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],  # not orthonormal
        2.0 * np.eye(3),  # orthogonal columns, wrong length
        np.diag([1.0, 1.0, -1.0]),  # a reflection, det = -1
        -np.eye(3),  # det = -1
    ],
)
def test_joint_rejects_improper_rotation(field, R):
    with raises(rf"joint 'j': {field} is not a proper orthonormal matrix"):
        Joint("j", None, "b", **{field: R})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"inner_point": (1.0, 2.0)}, r"joint 'j': inner_point: expected shape \(3,\), got \(2,\)"),
        ({"outer_point": np.zeros(4)}, r"joint 'j': outer_point: expected shape \(3,\)"),
        ({"inner_rotation": np.eye(2)}, r"joint 'j': inner_rotation: expected shape \(3, 3\)"),
        ({"inner_point": (0.0, np.inf, 0.0)}, r"joint 'j': inner_point: has non-finite"),
        ({"rot_dof": 2, "stiffness": (1.0, 2.0, 3.0)}, r"joint 'j': stiffness .*expected 2 values"),
        ({"rot_dof": 2, "damping": (1.0,)}, r"joint 'j': damping .*expected 2 values"),
        ({"rot_dof": 1, "trn_dof": 1, "stiffness": np.ones((2, 1))}, r"joint 'j': stiffness .*expected 2 values"),
        ({"rot_dof": 1, "stiffness": -0.1}, r"joint 'j': stiffness must be non-negative"),
        ({"rot_dof": 1, "damping": (-1.0,)}, r"joint 'j': damping must be non-negative"),
        ({"rot_dof": 1, "stiffness_poly": (0.0, np.nan)}, r"joint 'j': stiffness_poly .*non-finite"),
        ({"rot_dof": 1, "damping_poly": (np.inf, 0.0)}, r"joint 'j': damping_poly .*non-finite"),
        ({"rot_dof": 2, "stiffness_poly": np.ones((3, 2))}, r"joint 'j': stiffness_poly .*expected a pair or 2 pairs"),
        ({"rot_dof": 1, "damping_poly": (1.0, 2.0, 3.0)}, r"joint 'j': damping_poly .*got shape \(3,\)"),
        ({"rot_type": "spherical", "rot_dof": 3, "stiffness": (1.0, 1.0, 2.0), "stiffness_poly": (0.0, 1.0)}, r"joint 'j': .*polynomial spring .*needs an isotropic stiffness"),
        ({"rot_type": "spherical", "rot_dof": 3, "stiffness_poly": [(0.0, 1.0)] * 2 + [(0.0, 2.0)]}, r"joint 'j': .*radial.*same pair \(k₂, k₃\)"),
    ],
)  # fmt: skip
def test_joint_rejects_bad_arrays(kwargs, match):
    with raises(match):
        Joint("j", None, "b", **kwargs)


@pytest.mark.parametrize("name", ["", None, 3])
def test_rejects_bad_names(name):
    with raises("body name must be a non-empty string"):
        Body(name, mass=1.0, inertia=I_BOX)
    with raises("joint name must be a non-empty string"):
        Joint(name, None, "b")


def test_model_rejects_bad_gravity():
    with raises(r"model gravity: expected shape \(3,\)"):
        Model([body("b")], [Joint.weld("w", None, "b")], gravity=(0.0, -9.81))


def test_failed_construction_binds_nothing():
    model = None
    with raises("duplicate body name"):
        model = Model([body("a"), body("a")], [Joint.free("r", outer="a")])
    assert model is None


@pytest.fixture
def tree_model():
    bodies, joints = tree_parts()
    return Model(bodies, joints)


@pytest.mark.parametrize(
    ("q_len", "u_len", "match"),
    [
        (15, 14, r"state\.q has length 15; this model has nq = 16"),
        (17, 14, r"state\.q has length 17; this model has nq = 16"),
        (16, 13, r"state\.u has length 13; this model has nu \+ ns = 9 \+ 5"),
        (16, 0, r"state\.u has length 0"),
    ],
)
def test_mass_matrix_rejects_wrong_length_state(tree_model, q_len, u_len, match):
    with raises(match):
        kd.mass_matrix(tree_model, State(np.zeros(q_len), np.zeros(u_len)))


@pytest.mark.parametrize(("where", "value"), [("q", np.nan), ("u", np.inf), ("u", -np.inf)])
def test_mass_matrix_rejects_non_finite_state(tree_model, where, value):
    q = tree_model.initial_state().q.copy()
    u = np.zeros(tree_model.n)
    {"q": q, "u": u}[where][2] = value
    with raises("state has non-finite entries"):
        kd.mass_matrix(tree_model, State(q, u))


def test_mass_matrix_rejects_non_state(tree_model):
    with raises("expected a kanedyn State, got tuple"):
        kd.mass_matrix(tree_model, (np.zeros(16), np.zeros(14)))


@pytest.mark.parametrize(
    ("joint", "kwargs", "match"),
    [
        ("jd", {"angles": (0.1, 0.2, 0.3)}, r"joint 'jd': angles needs 2 values, got 3"),
        ("jd", {"rates": (0.1,)}, r"joint 'jd': rates needs 2 values, got 1"),
        ("jd", {"displacements": (0.1, 0.2)}, r"joint 'jd': displacements needs 1 values, got 2"),
        ("jd", {"angles": (0.1, np.nan)}, r"joint 'jd': angles has non-finite values"),
        ("jc", {"angles": (0.1, 0.2)}, r"joint 'jc': angles needs 3 values, got 2"),
        ("jc", {"quaternion": (0.0, 0.0, 1.0)}, r"joint 'jc': quaternion needs 4 values, got 3"),
        ("jc", {"rates": (1.0, 2.0, 3.0, 4.0)}, r"joint 'jc': rates needs 3 values, got 4"),
        ("root", {"displacement_rates": (1.0, 2.0)}, r"joint 'root': displacement_rates needs 3 values, got 2"),
        ("jc", {"angles": (0, 0, 0), "quaternion": (0, 0, 0, 1)}, r"joint 'jc': give angles or quaternion, not both"),
        ("ja", {"quaternion": (0, 0, 0, 1)}, r"joint 'ja': a gimbal joint takes angles, not a quaternion"),
        ("nope", {"angles": (0.1,)}, r"unknown joint 'nope'"),
    ],
)  # fmt: skip
def test_set_joint_rejects_bad_values(tree_model, joint, kwargs, match):
    state = tree_model.initial_state()
    with raises(match):
        tree_model.set_joint(state, joint, **kwargs)


def test_set_joint_rejects_wrong_state(tree_model):
    with raises(r"state\.q has length 1"):
        tree_model.set_joint(State([0.0], [0.0]), "ja", angles=(0.1,))


def test_unknown_body_and_joint_lookups(tree_model):
    with raises(r"unknown body 'zz'; bodies are \['hub', 'a', 'b', 'c', 'd'\]"):
        tree_model.body_index("zz")
    with raises(r"unknown joint 'zz'"):
        tree_model.coordinates("zz")
    with raises(r"unknown joint 'zz'"):
        tree_model.speeds("zz")
    assert tree_model.body("c").name == "c" and tree_model.joint("jc").name == "jc"


# --------------------------------------------------------------------------- symbolic


m1, m2, L, Ia, Ib = sp.symbols("m1 m2 L I_a I_b", positive=True)
VALUES = {m1: 2.0, m2: 0.5, L: 1.5, Ia: 0.01, Ib: 0.4}


def pendulum(m1_, m2_, L_, Ia_, Ib_) -> Model:
    """Double pendulum on a spherical root and a 2-DOF gimbal, in any number type."""
    upper = Body("upper", mass=m1_, inertia=[[Ib_, 0, 0], [0, Ia_, 0], [0, 0, Ib_]],
                 com=(0, -L_ / 2, 0))  # fmt: skip
    lower = Body("lower", mass=m2_, inertia=[[Ib_, 0, 0], [0, Ia_, 0], [0, 0, Ib_]],
                 com=(0, -L_ / 2, 0))  # fmt: skip
    joints = [
        Joint.spherical("shoulder", None, "upper"),
        Joint.gimbal("elbow", "upper", "lower", seq="312", dof=2, inner_point=(0, -L_, 0)),
    ]
    return Model([upper, lower], joints, gravity=(0.0, -9.81, 0.0))


def pendulum_state(model: Model) -> State:
    s = model.set_joint(model.initial_state(), "shoulder", angles=(0.3, -0.2, 0.5),
                        rates=(0.1, 0.2, 0.3))  # fmt: skip
    return model.set_joint(s, "elbow", angles=(0.7, -0.4), rates=(-0.5, 0.6))


def test_symbolic_body_and_model():
    b = Body("b", mass=m1, inertia=np.eye(3))
    assert b.mass == m1
    model = pendulum(m1, m2, L, Ia, Ib)
    assert model.is_symbolic
    assert model.bodies[0].inertia.dtype == object
    assert not model.bodies[0].inertia.flags.writeable
    numeric = pendulum(*(VALUES[s] for s in (m1, m2, L, Ia, Ib)))
    assert not numeric.is_symbolic


@pytest.mark.parametrize(
    "fn", [kd.mass_matrix, kd.kinetic_energy, kd.forward_dynamics, kd.momentum]
)
def test_numeric_functions_refuse_symbolic_models(fn):
    model = pendulum(m1, m2, L, Ia, Ib)
    with raises("symbolic parameters"):
        fn(model, model.initial_state())


def test_symbolic_only_in_a_joint_is_symbolic():
    k = sp.Symbol("k")
    model = Model([body("b")], [Joint.revolute("h", None, "b", stiffness=k)])
    assert model.is_symbolic
    with raises("symbolic"):
        kd.mass_matrix(model, model.initial_state())
    numeric = model.subs({k: 3.0})
    assert not numeric.is_symbolic
    np.testing.assert_array_equal(numeric.joints[0].stiffness, [3.0])


def test_subs_gives_the_numeric_model():
    symbolic = pendulum(m1, m2, L, Ia, Ib)
    numeric = pendulum(*(VALUES[s] for s in (m1, m2, L, Ia, Ib)))
    substituted = symbolic.subs(VALUES)
    assert not substituted.is_symbolic
    assert symbolic.is_symbolic  # the original is unchanged
    assert substituted.bodies[1].mass == 0.5
    np.testing.assert_allclose(substituted.bodies[0].com, [0.0, -0.75, 0.0], rtol=1e-15)
    np.testing.assert_allclose(substituted.joints[1].inner_point, [0.0, -1.5, 0.0], rtol=1e-15)
    M_sub = kd.mass_matrix(substituted, pendulum_state(substituted))
    M_num = kd.mass_matrix(numeric, pendulum_state(numeric))
    assert M_num.shape == (5, 5)
    np.testing.assert_allclose(M_sub, M_num, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("missing", [m1, m2, L, Ia, Ib], ids=str)
def test_subs_names_the_missing_symbol(missing):
    model = pendulum(m1, m2, L, Ia, Ib)
    values = {s: v for s, v in VALUES.items() if s != missing}
    with raises(rf"subs: no value for symbols \['{missing}'\]"):
        model.subs(values)
