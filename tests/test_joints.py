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
    source = tape.source("f", [*(f"th{i}" for i in range(3)), *(f"sg{i}" for i in range(3))], flat)
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
        tape.source("f", [f"q{i}" for i in range(4)], outs), "f", codegen.SCALAR_NAMESPACE
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
    lay = model.layout
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
    Q = joints.spring_damper(lay, lay.stiffness, lay.damping, q, u)
    np.testing.assert_allclose(Q, Q_ref, atol=1e-15)
    np.testing.assert_allclose(joints.qdot(lay, q, u), qd_ref, atol=1e-15)
    # symbols and traced values give the same numbers
    qs = np.array(sm.symbols(f"q0:{model.nq}", real=True), dtype=object)
    us = np.array(sm.symbols(f"u0:{model.n}", real=True), dtype=object)
    values = {**dict(zip(qs, q, strict=True)), **dict(zip(us, u, strict=True))}
    for fn, ref in (
        (lambda a, b: joints.spring_damper(lay, SYMPY.const(lay.stiffness),
                                           SYMPY.const(lay.damping), a, b), Q),
        (lambda a, b: joints.qdot(lay, a, b), joints.qdot(lay, q, u)),
    ):  # fmt: skip
        sym = np.array([sm.sympify(e).subs(values) for e in fn(qs, us)], dtype=float)
        np.testing.assert_allclose(sym, ref, atol=1e-15)
        tape = codegen.Tape()
        tq = np.array([tape.input(f"q{i}") for i in range(model.nq)], dtype=object)
        tu = np.array([tape.input(f"u{i}") for i in range(model.n)], dtype=object)
        names = [f"q{i}" for i in range(model.nq)] + [f"u{i}" for i in range(model.n)]
        src = tape.source("f", names, list(fn(tq, tu)))
        traced = codegen.build(src, "f", codegen.SCALAR_NAMESPACE)(*q, *u)
        np.testing.assert_allclose(traced, ref, atol=1e-15)
