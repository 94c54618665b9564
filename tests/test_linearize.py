"""Tests of the exact derivatives (kanedyn.compiled.derivatives) and ``kd.linearize``.

Oracles: central finite differences of the dense engine (``kd.forward_dynamics``, a
different algorithm from the traced ABA); Pinocchio's ``computeABADerivatives`` on
revolute (and prismatic) trees; closed forms: the small oscillations of a pendulum, and
the torque-free spin of an axisymmetric body (nutation at ``(I₃ - I)/I · Ω`` in the body,
attitude error turning at ``Ω``).
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given, settings

import kanedyn as kd
from kanedyn.compiled import native, tcc
from kanedyn.compiled.derivatives import jacobian
from kanedyn.compiled.tape import Tape, cos, sin, sqrt
from kanedyn.errors import ModelError
from kanedyn.spatial import charts
from tests.strategies import SETTINGS
from tests.test_batch import random_inertia, random_joint
from tests.test_compiled import SEEDS, compilable_trees, draw_state


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KANEDYN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def test_tape_rules_against_closed_form():
    """d/dx and d/dy of a formula with every operation, against its hand derivative."""
    tape = Tape()
    x, y = tape.input("x"), tape.input("y")
    f = sin(x * y) / (1.0 + x) - cos(y) * sqrt(x) - (-x) + y
    (dfdx, dfdy), = jacobian(tape, [f], [x, y])  # fmt: skip
    fn = kd.codegen.build(kd.codegen.source(tape, "f", ["x", "y"], [f, dfdx, dfdy]), "f",
                          kd.codegen.SCALAR_NAMESPACE)  # fmt: skip
    X, Y = 0.7, -1.3
    _, gx, gy = fn(X, Y)
    want_x = (
        (Y * np.cos(X * Y) * (1 + X) - np.sin(X * Y)) / (1 + X) ** 2
        - np.cos(Y) / (2 * np.sqrt(X))
        + 1.0
    )
    want_y = X * np.cos(X * Y) / (1 + X) + np.sin(Y) * np.sqrt(X) + 1.0
    assert gx == pytest.approx(want_x, rel=1e-14)
    assert gy == pytest.approx(want_y, rel=1e-14)


def tangent_directions(model: kd.Model, q: np.ndarray) -> list[np.ndarray]:
    """Unit directions in q: each angle or slide, and the 3 tangent directions
    ``E(q) e_i`` of each quaternion (along which the kernel's normalization is the
    identity)."""
    lay = model.layout
    dirs = []
    for i in lay.angle_q:
        d = np.zeros(model.nq)
        d[i] = 1.0
        dirs.append(d)
    for qi in lay.quat_q:
        for w in np.eye(3):
            d = np.zeros(model.nq)
            d[qi] = charts.quat_rate(q[qi], w)
            dirs.append(d)
    return dirs


def dense_fd(model, q, u, dq, du, h=1e-6):
    """Central difference of the dense engine along (dq, du), quaternions renormalized."""

    def f(s):
        qs = q + s * dq
        qs[model.layout.quat_q] /= np.linalg.norm(qs[model.layout.quat_q], axis=-1)[..., None]
        return kd.forward_dynamics(model, kd.State(qs, u + s * du))

    return (f(h) - f(-h)) / (2 * h)


@settings(SETTINGS, max_examples=4)
@given(model=compilable_trees(), seed=SEEDS)
def test_jacobian_equals_finite_differences_of_the_dense_engine(model, seed):
    check_against_finite_differences(model, seed)


@pytest.mark.slow
@settings(SETTINGS, max_examples=40)
@given(model=compilable_trees(), seed=SEEDS)
def test_jacobian_equals_finite_differences_many_trees(model, seed):
    check_against_finite_differences(model, seed)


def check_against_finite_differences(model, seed):
    state = draw_state(model, seed, 1.0)
    cm = kd.compile_model(model)
    rates, J = cm.jacobian(state.q, state.u)
    n, nq = model.n, model.nq
    np.testing.assert_allclose(rates[:n], kd.forward_dynamics(model, state), rtol=1e-9,
                               atol=1e-9)  # fmt: skip
    scale = max(1.0, float(np.max(np.abs(J[:n]))))
    for d in tangent_directions(model, state.q):
        fd = dense_fd(model, state.q, state.u, d, np.zeros(n))
        np.testing.assert_allclose(J[:n, :nq] @ d, fd, atol=2e-6 * scale)
    for r in range(n):
        du = np.zeros(n)
        du[r] = 1.0
        fd = dense_fd(model, state.q, state.u, np.zeros(nq), du)
        np.testing.assert_allclose(J[:n, nq + r], fd, atol=2e-6 * scale)
    # ∂ν̇/∂τ is the inverse mass matrix (locked speeds aside)
    np.testing.assert_allclose(J[:n, nq + n :], np.linalg.inv(kd.mass_matrix(model, state)),
                               rtol=1e-8, atol=1e-10 * scale)  # fmt: skip


def without_springs_and_rotors(model):
    bodies = [attrs.evolve(b, embedded_momentum=(0.0, 0.0, 0.0)) for b in model.bodies]
    joints = [attrs.evolve(j, stiffness=0.0, damping=0.0) for j in model.joints]
    return kd.Model(bodies, joints, gravity=model.gravity)


def revolute_chain(seed: int, nb: int) -> kd.Model:
    """A serial chain of ``nb`` bodies on revolute joints (or, with ``prismatic``, some
    sliders), random axes, offsets, inertias and gravity; no springs, no rotors.
    (A chain: Pinocchio's derivative algorithms expect each subtree's speeds contiguous.)"""
    rng = np.random.default_rng(seed)
    bodies, joints = [], []
    for i in range(nb):
        bodies.append(kd.Body(f"b{i}", mass=rng.uniform(0.5, 3.0), inertia=random_inertia(rng),
                              com=0.3 * rng.normal(size=3)))  # fmt: skip
        kind = "prismatic" if rng.random() < 0.25 else "revolute"
        joints.append(random_joint(rng, kind, f"j{i}", f"b{i - 1}" if i else None, f"b{i}"))
    return without_springs_and_rotors(kd.Model(bodies, joints, gravity=rng.normal(size=3)))


@pytest.mark.parametrize("seed, nb", [(1, 3), (2, 6), (3, 5), (4, 4)])
def test_jacobian_equals_pinocchio_aba_derivatives(seed, nb):
    pytest.importorskip("pinocchio", reason="pinocchio is not installed")
    from benchmarks.peers import pinocchio_peer

    model = revolute_chain(seed, nb)
    peer = pinocchio_peer(model)
    rng = np.random.default_rng(seed)
    q, u, tau = rng.uniform(-1, 1, model.nq), rng.normal(size=model.n), rng.normal(size=model.n)
    dq, du, dtau = peer.derivatives(q, u, tau)
    rates, J = kd.compile_model(model).jacobian(q, u, tau)
    n = model.n
    np.testing.assert_allclose(rates[:n], peer.accelerations(q, u, tau), rtol=1e-10, atol=1e-10)
    scale = max(1.0, float(np.max(np.abs(dq))))
    np.testing.assert_allclose(J[:n, :n], dq, atol=1e-10 * scale)
    np.testing.assert_allclose(J[:n, n : 2 * n], du, atol=1e-10 * scale)
    np.testing.assert_allclose(J[:n, 2 * n :], dtau, atol=1e-10 * scale)


@pytest.mark.slow
def test_jacobian_of_a_twenty_link_chain():
    """n = 20 (the derivative kernel of a long chain): against Pinocchio's
    ``computeABADerivatives`` when installed, and against finite differences of the dense
    engine along a few directions."""
    model = revolute_chain(7, 20)
    rng = np.random.default_rng(7)
    q, u, tau = rng.uniform(-1, 1, model.nq), rng.normal(size=model.n), rng.normal(size=model.n)
    rates, J = kd.compile_model(model).jacobian(q, u, tau)
    n = model.n
    scale = max(1.0, float(np.max(np.abs(J[:n]))))
    loads = [kd.JointLoad(j.name, tau[model.layout.u_index[k]]) for k, j in enumerate(model.joints)]
    for r in (0, 9, 19):
        for dq, du in ((np.eye(n)[r], np.zeros(n)), (np.zeros(n), np.eye(n)[r])):
            h = 1e-6
            fd = (kd.forward_dynamics(model, kd.State(q + h * dq, u + h * du), loads=loads)
                  - kd.forward_dynamics(model, kd.State(q - h * dq, u - h * du), loads=loads)) / (2 * h)  # fmt: skip
            np.testing.assert_allclose(
                J[:n, :n] @ dq + J[:n, n : 2 * n] @ du, fd, atol=2e-6 * scale
            )
    try:
        from benchmarks.peers import pinocchio_peer
    except ImportError:  # pinocchio not installed
        return
    dq_, du_, dtau_ = pinocchio_peer(model).derivatives(q, u, tau)
    np.testing.assert_allclose(J[:n, :n], dq_, atol=1e-10 * scale)
    np.testing.assert_allclose(J[:n, n : 2 * n], du_, atol=1e-10 * scale)
    np.testing.assert_allclose(J[:n, 2 * n :], dtau_, atol=1e-10 * scale)


@pytest.mark.parametrize("root", [pytest.param("free", marks=pytest.mark.slow), "spherical"])
def test_jacobian_of_a_tree_with_a_quaternion_root_and_slides(root):
    """A tree with a free (or spherical) root, a spherical joint, sliders (one carrying a
    hinge) and a hinge, with dampers, slide and spherical springs, embedded momentum and gravity:
    against finite differences of the dense engine (quaternion directions along the
    tangent space)."""
    model = quaternion_tree(root)
    for seed in (1, 2):
        check_against_finite_differences(model, seed)


def quaternion_tree(root: str) -> kd.Model:
    """The tree of :func:`test_jacobian_of_a_tree_with_a_quaternion_root_and_slides`."""
    rng = np.random.default_rng(11)
    bodies = [kd.Body(f"b{i}", mass=rng.uniform(0.5, 3.0), inertia=random_inertia(rng),
                      com=0.3 * rng.normal(size=3)) for i in range(5)]  # fmt: skip
    bodies[2] = attrs.evolve(bodies[2], embedded_momentum=(0.1, -0.2, 0.3))
    joints = [
        random_joint(rng, root, "root", None, "b0"),
        random_joint(rng, "prismatic", "slide", "b0", "b1"),
        random_joint(rng, "revolute", "hinge", "b1", "b2"),
        random_joint(rng, "spherical", "ball", "b0", "b3"),
        random_joint(rng, "slide_gimbal", "sg", "b3", "b4"),
    ]
    return kd.Model(bodies, joints, gravity=rng.normal(size=3))


@pytest.mark.slow
@pytest.mark.parametrize("locked", [(), (1, 7, 11)])
def test_residual_route_equals_forward_mode_on_the_aba(locked):
    """Above ``RESIDUAL_ROUTE`` speeds ``cm.jacobian`` takes ``-M⁻¹ ∂R/∂x`` of the
    Newton-Euler residual; against forward mode on the whole ABA (the other algorithm,
    :func:`derivative_kernel`), with and without locked speeds."""
    from kanedyn.compiled import runtime
    from kanedyn.compiled.derivatives import derivative_kernel

    model = quaternion_tree("spherical")
    assert model.n > runtime.RESIDUAL_ROUTE
    state = draw_state(model, 5, 1.0)
    tau = np.random.default_rng(5).normal(size=model.n)
    rates, J = kd.compile_model(model, locked=locked).jacobian(state.q, state.u, tau)
    tr, m = derivative_kernel(model, frozenset(locked))
    fn = kd.codegen.build(kd.codegen.source(tr.tape, "f", tr.args, tr.outputs), "f",
                          kd.codegen.SCALAR_NAMESPACE)  # fmt: skip
    want = np.array(fn(*state.q, *state.u, *tau))
    np.testing.assert_allclose(rates, want[:m], rtol=1e-12, atol=1e-12)
    scale = max(1.0, float(np.max(np.abs(J))))
    np.testing.assert_allclose(J, want[m:].reshape(J.shape), atol=1e-11 * scale)
    if locked:  # rigid DOFs: no acceleration, and their efforts move nothing
        n, nq = model.n, model.nq
        assert not np.any(J[list(locked)]) and not np.any(J[:n, nq + n + np.array(locked)])


def test_python_and_native_derivatives_agree(monkeypatch):
    model = kd.examples.chain(3, spatial=True)
    state = draw_state(model, 4, 1.0)
    got = kd.compile_model(model).jacobian(state.q, state.u)
    monkeypatch.setattr(native, "unavailable", lambda: "test")
    monkeypatch.setattr(tcc, "unavailable", lambda: "test")
    want = kd.compile_model(model).jacobian(state.q, state.u)
    assert kd.compile_model(model).backend == "python"
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# --------------------------------------------------------------------------- linearize
def test_pendulum_small_oscillations():
    """A uniform rod (mass m, length L) hanging from a hinge: ω² = m g (L/2) / I_O with
    ``I_O = I_c + m (L/2)²``; B = [0, 1/I_O] for the hinge torque."""
    model = kd.examples.chain(1)
    rod, joint = model.bodies[0], model.joints[0]
    g = float(np.linalg.norm(model.gravity))
    c = float(np.linalg.norm(np.asarray(rod.com) - np.asarray(joint.outer_point)))
    axis = int(joint.rot_seq[0]) - 1
    I_O = float(rod.inertia[axis, axis]) + rod.mass * c**2
    state = model.initial_state()  # hanging
    lin = kd.linearize(model, state, inputs=[joint.name])
    w = np.sqrt(rod.mass * g * c / I_O)
    np.testing.assert_allclose(np.sort(lin.eigenvalues.imag), [-w, w], rtol=1e-12)
    np.testing.assert_allclose(lin.eigenvalues.real, 0.0, atol=1e-12)
    np.testing.assert_allclose(lin.B, [[0.0], [1.0 / I_O]], rtol=1e-12)
    assert lin.input_names == (f"{joint.name}.tau0",)
    assert lin.state_names == (f"{joint.name}.angle0", f"{joint.name}.w0")
    assert kd.linearize(model, state).B.shape == (2, 0)


@pytest.mark.parametrize("root", ["spherical", "free"])
def test_spinning_axisymmetric_body(root):
    """Torque-free spin Ω about the symmetry axis (I₁ = I₂ = I, I₃): the body rates
    nutate at ``λ = (I₃ - I)/I · Ω``, the attitude error turns at ``Ω``
    (``δθ̇ = δω - ω₀ × δθ``), every other eigenvalue is 0."""
    I, I3, Om = 2.0, 3.0, 1.7
    body = kd.Body("b", mass=10.0, inertia=np.diag([I, I, I3]))
    joint = kd.Joint.spherical("j", None, "b") if root == "spherical" else kd.Joint.free("j", "b")
    model = kd.Model([body], [joint])
    state = model.initial_state()
    u = state.u.copy()
    u[model.speeds("j")[2]] = Om
    lin = kd.linearize(model, kd.State(state.q, u))
    lam = (I3 - I) / I * Om
    ev = lin.eigenvalues
    np.testing.assert_allclose(ev.real, 0.0, atol=1e-12)
    nonzero = np.sort(ev.imag[np.abs(ev) > 1e-9])
    np.testing.assert_allclose(nonzero, [-Om, -lam, lam, Om], rtol=1e-12)
    assert lin.A.shape == (2 * model.n, 2 * model.n) and len(lin.state_names) == 2 * model.n
    # the modes are eigenvectors
    np.testing.assert_allclose(lin.A @ lin.modes, lin.modes * ev, atol=1e-12)


def test_spin_about_the_intermediate_axis_is_unstable():
    """Closed form: about the intermediate axis (I₁ < I₂ < I₃) the body rates grow at
    ``σ = Ω √((I₂ - I₁)(I₃ - I₂) / (I₁ I₃))``."""
    I1, I2, I3, Om = 1.0, 2.0, 2.5, 0.8
    model = kd.Model([kd.Body("b", mass=1.0, inertia=np.diag([I1, I2, I3]))],
                     [kd.Joint.spherical("j", None, "b")])  # fmt: skip
    state = model.initial_state()
    lin = kd.linearize(model, kd.State(state.q, np.array([0.0, Om, 0.0])))
    sigma = Om * np.sqrt((I2 - I1) * (I3 - I2) / (I1 * I3))
    assert np.max(lin.eigenvalues.real) == pytest.approx(sigma, rel=1e-12)


def test_linearize_rejects_bad_input():
    model = kd.examples.chain(2)
    with pytest.raises(ModelError, match="nope"):
        kd.linearize(model, model.initial_state(), inputs=["nope"])
    with pytest.raises(ModelError, match="non-finite"):
        kd.linearize(model, kd.State(np.array([np.nan, 0.0]), np.zeros(2)))
