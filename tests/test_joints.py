"""The one joint model (kanedyn.joints, kanedyn.spatial.charts) on its three arithmetics.

The same functions run on float arrays (the dense engine), on the code tracer (the
compiled engine) and on sympy expressions (symbolic Kane, Lagrange). Each arithmetic is
checked against independent oracles (scipy's rotations, finite differences of the
rotation, the textbook spring law written out here), and the three against each other.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn import codegen, joints
from kanedyn.codegen import TRACE
from kanedyn.model.plan import params_of
from kanedyn.spatial import charts
from kanedyn.spatial.arithmetic import NUMPY
from kanedyn.spatial.rotation import EULER_SEQUENCES, parse_sequence
from kanedyn.symbolic.arithmetic import SYMPY

RNG = np.random.default_rng(7)
LETTERS = {1: "X", 2: "Y", 3: "Z"}


def _unit_axes(seq: str) -> np.ndarray:
    return np.eye(3)[[a - 1 for a in parse_sequence(seq)]]


def _gimbal_numpy(seq: str, theta: np.ndarray, sigma: np.ndarray, dof: int):
    return joints.gimbal(NUMPY, charts.euler_axes(NUMPY, _unit_axes(seq)), theta, sigma, dof)


def _gimbal_traced(seq: str, theta: np.ndarray, sigma: np.ndarray, dof: int):
    """Trace the gimbal on a tape, generate Python, run it on floats."""
    tape = codegen.Tape()
    th = np.array([tape.input(f"th{i}") for i in range(3)], dtype=object)
    sg = np.array([tape.input(f"sg{i}") for i in range(3)], dtype=object)
    out = joints.gimbal(TRACE, charts.euler_axes(TRACE, _unit_axes(seq)), th, sg, dof)
    flat = [x for part in out for x in np.ravel(part)]
    source = codegen.source(
        tape, "f", [*(f"th{i}" for i in range(3)), *(f"sg{i}" for i in range(3))], flat
    )
    fn = codegen.build(source, "f", codegen.SCALAR_NAMESPACE)
    values = np.array(fn(*theta, *sigma), dtype=float)
    sizes = [9, 9, 9, 3]
    parts = np.split(values, np.cumsum(sizes)[:-1])
    return [p.reshape(s) for p, s in zip(parts, [(3, 3), (3, 3), (3, 3), (3,)], strict=True)]


def _gimbal_sympy(seq: str, theta: np.ndarray, sigma: np.ndarray, dof: int):
    """The gimbal on symbols, then the symbols replaced by the numbers."""
    t, s = sm.symbols("t1:4", real=True), sm.symbols("s1:4", real=True)
    th = np.array(list(t[:dof]) + [0] * (3 - dof), dtype=object)
    sg = np.array(list(s[:dof]) + [0] * (3 - dof), dtype=object)
    out = joints.gimbal(SYMPY, charts.euler_axes(SYMPY, _unit_axes(seq)), th, sg, dof)
    values = {**dict(zip(t, theta, strict=True)), **dict(zip(s, sigma, strict=True))}
    result = []
    for part in out:
        arr = np.array([sm.sympify(x).subs(values) for x in np.ravel(part)], dtype=float)
        result.append(arr.reshape(np.shape(part)))
    for part in out:  # model numbers stay exact: no floats in the symbolic result
        assert not any(sm.sympify(x).atoms(sm.Float) for x in np.ravel(part))
    return result


def _derivative(f, x, direction, h=1e-3):
    """Five-point central difference of f along ``direction`` (error O(h⁴))."""
    return (
        -f(x + 2 * h * direction) + 8 * f(x + h * direction)
        - 8 * f(x - h * direction) + f(x - 2 * h * direction)
    ) / (12 * h)  # fmt: skip


def _finite_difference_gimbal(seq: str, theta: np.ndarray, sigma: np.ndarray):
    """Oracle: ω (Go) from R(θ(t)) and Γ̇σ from Γ(θ(t))σ, by central differences, with
    R from scipy's intrinsic Euler rotation."""
    letters = "".join(LETTERS[a] for a in parse_sequence(seq))

    def R(th):
        return Rotation.from_euler(letters, th).as_matrix()

    def omega(th):  # [ω]× = Rᵀ Ṙ along θ̇ = σ, in Go
        W = R(th).T @ _derivative(R, th, sigma)
        return np.array([W[2, 1], W[0, 2], W[1, 0]])

    return R(theta), omega(theta), _derivative(omega, theta, sigma)


@pytest.mark.parametrize("seq", EULER_SEQUENCES)
@pytest.mark.parametrize("dof", [0, 1, 2, 3])
def test_gimbal_same_numbers_on_every_arithmetic_and_against_oracles(seq, dof):
    theta = np.zeros(3)
    sigma = np.zeros(3)
    theta[:dof] = RNG.uniform(-2.5, 2.5, dof)
    sigma[:dof] = RNG.uniform(-1.5, 1.5, dof)
    R, GammaT, Gamma_dot, Gds = _gimbal_numpy(seq, theta, sigma, dof)
    for other in (_gimbal_traced(seq, theta, sigma, dof), _gimbal_sympy(seq, theta, sigma, dof)):
        for a, b in zip((R, GammaT, Gamma_dot, Gds), other, strict=True):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-14)
    R_ref, omega_ref, Gds_ref = _finite_difference_gimbal(seq, theta, sigma)
    np.testing.assert_allclose(R, R_ref, atol=1e-14)
    np.testing.assert_allclose(GammaT.T @ sigma, omega_ref, atol=1e-10)
    np.testing.assert_allclose(Gds, Gds_ref, atol=1e-8)
    np.testing.assert_allclose(Gamma_dot @ sigma, Gds, atol=1e-14)
    # beyond the DOF, Γ's columns are the Euler axes at zero angle (the constraint axes)
    np.testing.assert_allclose(GammaT[2], _unit_axes(seq)[2], atol=0)


def test_gimbal_batched_equals_one_at_a_time():
    seqs = ["123", "231", "313", "212"]
    E = np.stack([_unit_axes(s) for s in seqs])
    theta = RNG.uniform(-3, 3, (5, 4, 3))
    sigma = RNG.uniform(-2, 2, (5, 4, 3))
    batch = joints.gimbal(NUMPY, charts.euler_axes(NUMPY, E), theta, sigma)
    for b in range(5):
        for k, seq in enumerate(seqs):
            single = _gimbal_numpy(seq, theta[b, k], sigma[b, k], 3)
            for a, s in zip(batch, single, strict=True):
                np.testing.assert_allclose(a[b, k], s, atol=1e-15)


def test_quaternion_dcm_rate_and_normalization():
    q = RNG.normal(size=(6, 4)) * 2.0
    omega = RNG.normal(size=(6, 3))
    unit = q / np.linalg.norm(q, axis=1, keepdims=True)
    R = charts.quat_to_dcm(q)  # normalizes by |q|²
    np.testing.assert_allclose(R, Rotation.from_quat(q).as_matrix(), atol=1e-14)
    np.testing.assert_allclose(charts.quat_normalize(NUMPY, q), unit, atol=1e-15)
    # q̇ = ½ q ⊗ [ω, 0]: against the exact rotation over a small step, ω in body axes
    h = 1e-6
    ahead = (Rotation.from_quat(unit) * Rotation.from_rotvec(omega * h)).as_quat()
    behind = (Rotation.from_quat(unit) * Rotation.from_rotvec(-omega * h)).as_quat()
    ahead *= np.sign(np.sum(ahead * unit, axis=1))[:, None]
    behind *= np.sign(np.sum(behind * unit, axis=1))[:, None]
    np.testing.assert_allclose(charts.quat_rate(unit, omega), (ahead - behind) / (2 * h), atol=1e-8)
    # the same lines on sympy symbols and on the tracer
    xs = sm.symbols("x y z w", real=True)
    ws = sm.symbols("a b c", real=True)
    qs, om = np.array(xs, dtype=object), np.array(ws, dtype=object)
    values = {**dict(zip(xs, unit[0], strict=True)), **dict(zip(ws, omega[0], strict=True))}
    sym_R = np.array([e.subs(values) for e in charts.quat_dcm_form(qs).ravel()], dtype=float)
    np.testing.assert_allclose(sym_R.reshape(3, 3), R[0], atol=1e-14)
    sym_rate = np.array([e.subs(values) for e in charts.quat_rate(qs, om)], dtype=float)
    np.testing.assert_allclose(sym_rate, charts.quat_rate(unit[0], omega[0]), atol=1e-15)
    tape = codegen.Tape()
    tq = np.array([tape.input(f"q{i}") for i in range(4)], dtype=object)
    outs = list(charts.quat_normalize(TRACE, tq)) + list(charts.quat_dcm_form(tq).ravel())
    fn = codegen.build(
        codegen.source(tape, "f", [f"q{i}" for i in range(4)], outs), "f", codegen.SCALAR_NAMESPACE
    )
    got = np.array(fn(*q[0]))
    np.testing.assert_allclose(got[:4], unit[0], atol=1e-15)
    np.testing.assert_allclose(got[4:], (R[0] * np.sum(q[0] ** 2)).ravel(), atol=1e-13)


def test_spring_damper_and_qdot_on_a_model_with_every_joint_kind():
    model = kd.Model(
        [kd.Body(n, mass=1.0, inertia=np.eye(3)) for n in "abcd"],
        [
            kd.Joint.free("root", "a", damping=0.3),
            kd.Joint.gimbal("g", "a", "b", seq="231", dof=2, stiffness=(2.0, 3.0), damping=0.5),
            kd.Joint(
                "s",
                "b",
                "c",
                rot_dof=1,
                rot_seq="312",
                trn_dof=2,
                trn_seq="312",
                stiffness=(4.0, 5.0, 6.0),
                damping=(0.1, 0.2, 0.3),
            ),  # fmt: skip
            kd.Joint.spherical("ball", "c", "d", damping=0.7),
        ],
    )
    state = model.initial_state()
    q = RNG.normal(size=model.nq)
    u = RNG.normal(size=model.n)
    lay, pa = model.layout, params_of(model)
    # oracle, written out joint by joint from the conventions
    Q_ref = np.zeros(model.n)
    qd_ref = np.zeros(model.nq)
    for j in model.joints:
        qi, ui = model.coordinates(j.name), model.speeds(j.name)
        if j.rot_type == "spherical":
            quat, w = q[qi[:4]], u[ui[:3]]
            qd_ref[qi[:4]] = 0.5 * kd.rotation.quat_multiply(quat, np.append(w, 0.0))
            Q_ref[ui[:3]] = -np.asarray(j.damping[:3]) * w
            angle_q, angle_u = qi[4:], ui[3:]
            k_trn, c_trn = j.stiffness[3:], j.damping[3:]
        else:
            angle_q, angle_u = qi, ui
            k_trn, c_trn = j.stiffness, j.damping
        qd_ref[angle_q] = u[angle_u]
        Q_ref[angle_u] = -np.asarray(k_trn) * q[angle_q] - np.asarray(c_trn) * u[angle_u]
    assert state.q.shape == q.shape
    Q = joints.spring_damper(lay, pa.stiffness, pa.damping, q, u)
    np.testing.assert_allclose(Q, Q_ref, atol=1e-15)
    np.testing.assert_allclose(joints.qdot(lay, q, u), qd_ref, atol=1e-15)
    # symbols and traced values give the same numbers
    qs = np.array(sm.symbols(f"q0:{model.nq}", real=True), dtype=object)
    us = np.array(sm.symbols(f"u0:{model.n}", real=True), dtype=object)
    values = {**dict(zip(qs, q, strict=True)), **dict(zip(us, u, strict=True))}
    for fn, ref in (
        (lambda a, b: joints.spring_damper(lay, SYMPY.const(pa.stiffness),
                                           SYMPY.const(pa.damping), a, b), Q),
        (lambda a, b: joints.qdot(lay, a, b), joints.qdot(lay, q, u)),
    ):  # fmt: skip
        sym = np.array([sm.sympify(e).subs(values) for e in fn(qs, us)], dtype=float)
        np.testing.assert_allclose(sym, ref, atol=1e-15)
        tape = codegen.Tape()
        tq = np.array([tape.input(f"q{i}") for i in range(model.nq)], dtype=object)
        tu = np.array([tape.input(f"u{i}") for i in range(model.n)], dtype=object)
        names = [f"q{i}" for i in range(model.nq)] + [f"u{i}" for i in range(model.n)]
        src = codegen.source(tape, "f", names, list(fn(tq, tu)))
        traced = codegen.build(src, "f", codegen.SCALAR_NAMESPACE)(*q, *u)
        np.testing.assert_allclose(traced, ref, atol=1e-15)


def _poly_model() -> kd.Model:
    """A hinge, a 2-angle gimbal with a slide, and a ball: polynomial springs and dampers."""
    return kd.Model(
        [kd.Body(n, mass=1.0, inertia=np.eye(3)) for n in "abc"],
        [
            kd.Joint.revolute("h", None, "a", stiffness=2.0, damping=0.4,
                              stiffness_poly=(-1.5, 6.0), damping_poly=(0.3, 0.2)),
            kd.Joint("g", "a", "b", rot_dof=2, rot_seq="231", trn_dof=1, stiffness=(1.0, 0.0, 3.0),
                     stiffness_poly=[(0.5, 2.0), (0.0, 4.0), (-2.0, 1.0)],
                     damping_poly=[(0.1, 0.0), (0.0, 0.7), (0.4, 0.4)]),
            kd.Joint.spherical("ball", "b", "c", damping=0.2, damping_poly=(0.6, 0.1)),
        ],
    )  # fmt: skip


def test_polynomial_spring_damper_on_every_arithmetic():
    """MuJoCo's law, written out per DOF from its documentation (Computation, "Polynomial
    forces"): ``-(k x + k₂ x² + k₃ x³) - (c v + c₂ v|v| + c₃ v³)``, the damper alone on
    the ball; the same numbers on floats, sympy and the tape."""
    model = _poly_model()
    lay, pa = model.layout, params_of(model)
    q, u = RNG.normal(size=model.nq), RNG.normal(size=model.n)
    Q_ref = np.zeros(model.n)
    for j in model.joints:
        qi, ui = model.coordinates(j.name), model.speeds(j.name)
        for d, r in enumerate(ui):
            (k2, k3), (c2, c3) = j.stiffness_poly[d], j.damping_poly[d]
            v = u[r]
            Q_ref[r] = -(j.damping[d] * v + c2 * v * abs(v) + c3 * v**3)
            if j.rot_type != "spherical":
                x = q[qi[d]]
                Q_ref[r] -= j.stiffness[d] * x + k2 * x**2 + k3 * x**3

    def law(ar, a, b):
        k, c, kp, cp = (ar.const(x) for x in (pa.stiffness, pa.damping, pa.stiffness_poly,
                                               pa.damping_poly))  # fmt: skip
        return joints.spring_damper(lay, k, c, a, b, kp, cp, ar=ar)

    np.testing.assert_allclose(law(NUMPY, q, u), Q_ref, rtol=1e-14, atol=1e-14)
    qs = np.array(sm.symbols(f"q0:{model.nq}", real=True), dtype=object)
    us = np.array(sm.symbols(f"u0:{model.n}", real=True), dtype=object)
    values = {**dict(zip(qs, q, strict=True)), **dict(zip(us, u, strict=True))}
    sym = np.array([sm.sympify(e).subs(values) for e in law(SYMPY, qs, us)], dtype=float)
    np.testing.assert_allclose(sym, Q_ref, rtol=1e-14, atol=1e-14)
    tape = codegen.Tape()
    tq = np.array([tape.input(f"q{i}") for i in range(model.nq)], dtype=object)
    tu = np.array([tape.input(f"u{i}") for i in range(model.n)], dtype=object)
    names = [f"q{i}" for i in range(model.nq)] + [f"u{i}" for i in range(model.n)]
    src = codegen.source(tape, "f", names, list(law(TRACE, tq, tu)))
    traced = codegen.build(src, "f", codegen.SCALAR_NAMESPACE)(*q, *u)
    np.testing.assert_allclose(traced, Q_ref, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("v", [-0.7, 0.0, 0.5])
def test_traced_damper_derivative_is_exact_at_and_off_zero(v):
    """The tape's ``fabs`` (and its ``sign`` rule): d f / dv of the polynomial damper is
    ``c + 2 c₂ |v| + 3 c₃ v²`` (differentiated by hand), finite at v = 0."""
    from kanedyn.compiled.derivatives import jacobian

    c, c2, c3 = 0.4, 0.3, 0.2
    tape = codegen.Tape()
    x = tape.input("v")
    v_in = np.array([x], dtype=object)
    (f,) = joints.damper_force(np.array([c]), np.array([[c2, c3]]), v_in, TRACE)
    (row,) = jacobian(tape, [f], [x])
    src = codegen.source(tape, "g", ["v"], [f, row[0]])
    value, slope = codegen.build(src, "g", codegen.SCALAR_NAMESPACE)(v)
    assert value == pytest.approx(c * v + c2 * v * abs(v) + c3 * v**3, abs=1e-15)
    assert slope == pytest.approx(c + 2 * c2 * abs(v) + 3 * c3 * v**2, abs=1e-15)


def test_polynomial_spring_potential_is_the_integral_of_its_force():
    """``V(x) - V(0) = -∫₀ˣ Q(ξ) dξ`` (scipy's quad of the generalized force at rest), and
    the discrete gradient is ``(V(x₁) - V(x₀))/(x₁ - x₀)`` by the same quadrature, and
    ``V'`` at ``x₁ = x₀``."""
    from scipy.integrate import quad

    model = kd.Model(
        [kd.Body("a", mass=1.0, inertia=np.eye(3))],
        [kd.Joint.prismatic("s", None, "a", stiffness=3.0, stiffness_poly=(-2.5, 7.0))],
    )
    lay, pa = model.layout, params_of(model)

    def force(x):
        return joints.spring_damper(lay, pa.stiffness, pa.damping, np.array([x]),
                                    np.zeros(1), pa.stiffness_poly)[0]  # fmt: skip

    for x in (-1.3, -0.2, 0.4, 1.7):
        V = kd.dynamics.loads.spring_potential(model, np.array([x]))
        assert V == pytest.approx(-quad(force, 0.0, x, epsabs=1e-14)[0], rel=1e-12)
        assert joints.spring_energy(3.0, np.array([-2.5, 7.0]), x) == pytest.approx(V, rel=1e-14)
    for x0, x1 in ((-1.3, 0.4), (0.2, 1.7), (0.9, 0.9)):
        grad, dgrad = joints.spring_discrete_gradient(3.0, np.array([-2.5, 7.0]), x0, x1)
        if x0 == x1:
            assert grad == pytest.approx(-force(x0), rel=1e-14)
        else:
            assert grad == pytest.approx(-quad(force, x0, x1)[0] / (x1 - x0), rel=1e-12)
        eps = 1e-6
        fd = (
            joints.spring_discrete_gradient(3.0, np.array([-2.5, 7.0]), x0, x1 + eps)[0]
            - joints.spring_discrete_gradient(3.0, np.array([-2.5, 7.0]), x0, x1 - eps)[0]
        )
        assert dgrad == pytest.approx(fd / (2 * eps), rel=1e-8)


# --------------------------------------------------------------------------- joints.motion
MOTION_JOINTS = [
    kd.Joint.revolute("rev", inner="a", outer="b", axis=2),
    kd.Joint.prismatic("pri", inner="a", outer="b", axis=3),
    kd.Joint.gimbal("gim", inner="a", outer="b", seq="231", dof=2),
    kd.Joint("g3s", inner="a", outer="b", rot_dof=3, rot_seq="313", trn_dof=2, trn_seq="213"),
    kd.Joint("g1s", inner="a", outer="b", rot_dof=1, rot_seq="312", trn_dof=1, trn_seq="231"),
    kd.Joint.spherical("sph", inner="a", outer="b"),
    kd.Joint.free("free", outer="b"),
    kd.Joint.weld("weld", inner="a", outer="b"),
]


def _motion_point(joint: kd.Joint, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = joint.rot_dof + joint.trn_dof
    if joint.rot_type == "spherical":
        quat = rng.normal(size=4)
        q = np.concatenate((quat / np.linalg.norm(quat), rng.normal(size=joint.trn_dof)))
    else:
        q = rng.uniform(-1.2, 1.2, n)
    return q, rng.normal(size=n)


def _motion_rate(joint: kd.Joint, q: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``q̇`` of one joint, written out here: rates for angles and slides, ``½ q ⊗ (ω, 0)``
    for a quaternion (Hamilton, scalar last)."""
    if joint.rot_type != "spherical":
        return u.copy()
    x, y, z, w = q[:4]
    wx, wy, wz = u[:3]
    quat_dot = 0.5 * np.array(
        [w * wx + y * wz - z * wy, w * wy + z * wx - x * wz, w * wz + x * wy - y * wx,
         -(x * wx + y * wy + z * wz)]
    )  # fmt: skip
    return np.concatenate((quat_dot, u[3:]))


@pytest.mark.parametrize("joint", MOTION_JOINTS, ids=lambda j: j.name)
def test_motion_against_finite_differences(joint):
    """``joints.motion`` on floats against central differences along ``q̇(q, u)``:
    ``[ω_J]× = Rᵀ Ṙ``, the slide velocity ``Rᵀ d/dt(Δd)``, ``c_J = (dS/dt) ν`` and
    ``Ṡ = dS/dt`` at fixed speeds."""
    rng = np.random.default_rng(hash(joint.name) % 2**32)
    q, u = _motion_point(joint, rng)
    m = joints.motion(joint, q, u)
    h = 1e-6
    qdot = _motion_rate(joint, q, u)
    plus, minus = joints.motion(joint, q + h * qdot, u), joints.motion(joint, q - h * qdot, u)
    R_dot = (plus.R - minus.R) / (2 * h)
    W = m.R.T @ R_dot
    omega = np.array([W[2, 1], W[0, 2], W[1, 0]])
    d_dot = (plus.d - minus.d) / (2 * h)
    S_dot = (plus.S - minus.S) / (2 * h)
    np.testing.assert_allclose(m.v_J[:3], omega, atol=1e-8)
    np.testing.assert_allclose(m.v_J[3:], m.R.T @ d_dot, atol=1e-8)
    np.testing.assert_allclose(m.S @ u, m.v_J, atol=1e-12)
    np.testing.assert_allclose(m.S_dot, S_dot, atol=1e-7)
    np.testing.assert_allclose(m.c_J, S_dot @ u, atol=1e-7)
    # R is a rotation; the revolute, prismatic and weld joints by hand
    np.testing.assert_allclose(m.R @ m.R.T, np.eye(3), atol=1e-12)
    if joint.name == "rev":
        np.testing.assert_allclose(m.R, Rotation.from_rotvec([0, q[0], 0]).as_matrix(), atol=1e-14)
        np.testing.assert_allclose(m.S[:, 0], [0, 1, 0, 0, 0, 0])
    if joint.name == "pri":
        np.testing.assert_allclose(m.d, [0, 0, q[0]])
        np.testing.assert_allclose(m.S[:, 0], [0, 0, 0, 0, 0, 1])
    if joint.name == "weld":
        assert m.S.shape == (6, 0) and not np.any(m.v_J) and not np.any(m.c_J)


@pytest.mark.parametrize("joint", MOTION_JOINTS, ids=lambda j: j.name)
def test_motion_same_numbers_on_every_arithmetic(joint):
    """The one ``joints.motion`` traced (generated Python run on floats) and on sympy
    symbols (then the numbers substituted) gives the float result; with a batch of
    states it gives each state's."""
    rng = np.random.default_rng(3)
    q, u = _motion_point(joint, rng)
    ref = joints.motion(joint, q, u)
    fields = ("R", "d", "S", "S_dot", "v_J", "c_J")

    tape = codegen.Tape()
    qt = np.array([tape.input(f"q{i}") for i in range(q.size)], dtype=object)
    ut = np.array([tape.input(f"u{i}") for i in range(u.size)], dtype=object)
    mt = joints.motion(joint, qt, ut, TRACE)
    flat = [x for f in fields for x in np.ravel(getattr(mt, f))]
    names = [f"q{i}" for i in range(q.size)] + [f"u{i}" for i in range(u.size)]
    fn = codegen.build(codegen.source(tape, "f", names, flat), "f", codegen.SCALAR_NAMESPACE)
    traced = np.array(fn(*q, *u), dtype=float)

    qs = np.array(sm.symbols(f"q0:{q.size}", real=True), dtype=object)
    us = np.array(sm.symbols(f"u0:{u.size}", real=True), dtype=object)
    ms = joints.motion(joint, qs, us, SYMPY)
    values = {**dict(zip(qs, q, strict=True)), **dict(zip(us, u, strict=True))}
    symbolic = np.array(
        [float(sm.sympify(x).subs(values)) for f in fields for x in np.ravel(getattr(ms, f))]
    )
    expected = np.concatenate([np.ravel(getattr(ref, f)) for f in fields])
    np.testing.assert_allclose(traced, expected, atol=1e-13)
    np.testing.assert_allclose(symbolic, expected, atol=1e-13)

    qb = np.stack([q, _motion_point(joint, rng)[0]])
    ub = np.stack([u, -u])
    batch = joints.motion(joint, qb, ub)
    for b in range(2):
        one = joints.motion(joint, qb[b], ub[b])
        for f in fields:
            np.testing.assert_allclose(getattr(batch, f)[b], getattr(one, f), atol=1e-15)
