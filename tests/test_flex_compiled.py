"""Flexible bodies on the compiled engine: the modal speeds in the tree recursion
(kanedyn.dynamics.flex_recursion, ABA with each flexible body's modes condensed),
traced and compiled, against the dense engine (Kane's mass matrix and forcing by CRBA
and Cholesky, kanedyn.dynamics.flex), a different algorithm for the same equations.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.compiled import compile_model, supports
from kanedyn.compiled.native import unavailable
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import applied_loads

BACKENDS = ["python"] + ([] if unavailable() else ["native"])


def _hub(two: bool, stiffening: bool, gravity=(0.3, -9.81, 1.2)) -> kd.Model:
    """A hub on a free joint (gimbal and three slides, mass centre off its origin) with
    a two-direction beam welded at a point and a rotation, and optionally a second,
    one-direction beam on a hinge."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0), com=(0.05, -0.02, 0.03))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=stiffening,
                        damping_ratio=0.02)  # fmt: skip
    bodies = [hub, beam]
    joints = [
        kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3),
        kd.Joint.weld(
            "arm",
            "hub",
            "beam",
            inner_point=(0.5, 0.1, 0.0),
            inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)),
        ),  # fmt: skip
    ]
    if two:
        bodies.append(kd.beam_body("beam2", 1.5, 1.0, 20.0, n_modes=3, directions=(2,),
                                   stiffening=stiffening))  # fmt: skip
        joints.append(kd.Joint("hinge", "hub", "beam2", rot_dof=1, inner_point=(-0.5, 0.0, 0.1)))
    return kd.Model(bodies, joints, gravity=gravity)


def _states(model: kd.Model, count: int, seed: int) -> list[kd.State]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        q = 0.3 * rng.normal(size=model.nq + model.nf)
        q[model.nq :] *= 0.1  # modal amplitudes: small deflections
        out.append(kd.State(q, rng.normal(size=model.n + model.nf)))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("two", "stiffening"), [(False, False), (False, True), (True, True)])
def test_compiled_flexible_accelerations_equal_the_dense_engine(backend, two, stiffening):
    model = _hub(two, stiffening)
    cm = compile_model(model, backend=backend)
    assert cm.backend == backend
    n, nq, nf = model.n, model.nq, model.nf
    for s in _states(model, 4, seed=int(two) + 2 * int(stiffening)):
        ref = kd.forward_dynamics(model, s)
        assert ref.shape == (n + nf,)
        scale = max(1.0, float(np.linalg.norm(ref)))
        np.testing.assert_allclose(cm.forward_dynamics(s), ref, rtol=0, atol=1e-12 * scale)
        out = np.array(cm.rhs(s.q, s.u))  # [u̇ | ṡ | ξ̇ | q̇_joints | η̇]
        assert out.shape == (2 * nf + n + nq,)
        np.testing.assert_allclose(out[: n + nf], ref, rtol=0, atol=1e-12 * scale)
        np.testing.assert_array_equal(out[n + nf + nq :], s.u[n:])  # η̇ = ξ
        qd = kd.joints.qdot(model.layout, s.q[:nq], s.u[:n])
        np.testing.assert_allclose(out[n + nf : n + nf + nq], qd, rtol=0, atol=1e-15)


def test_compiled_flexible_without_gravity_and_a_batch_of_states():
    model = _hub(True, False, gravity=(0.0, 0.0, 0.0))
    cm = compile_model(model)
    states = _states(model, 3, seed=7)
    ref = np.array([kd.forward_dynamics(model, s) for s in states])
    got = cm.forward_dynamics(kd.States(np.array([s.q for s in states]),
                                        np.array([s.u for s in states])))  # fmt: skip
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * max(1.0, np.linalg.norm(ref)))


def test_compiled_flexible_with_loads_as_inputs():
    """The loads kernel (gravity in the input forces, N not accelerated) gives the
    flexible body's gravity from the model's: the same accelerations."""
    model = _hub(True, True)
    cm = compile_model(model, backend=BACKENDS[-1])
    n, nq = model.n, model.nq
    for s in _states(model, 2, seed=3):
        q, u = s.q[:nq], s.u[:n]
        loads = applied_loads(model, kd.State(q, u), kinematics_at(model, q, u))
        ref = kd.forward_dynamics(model, s)
        got = np.array(cm.rhs_with_loads(s.q, s.u, loads))[: n + model.nf]
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * max(1.0, np.linalg.norm(ref)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("mu", "radius"), [(kd.EARTH_MU, 7e6), (50.0**3, 50.0)])
def test_compiled_flexible_in_a_central_field_equals_the_dense_engine(backend, mu, radius):
    """The field on the elastic motion (:func:`kanedyn.spatial.modal.modal_central_forces`)
    in the recursion, with the loads in the kernel and as inputs, against the dense
    engine: at orbital radius, and in a field whose gravity gradient is O(1) (μ = R³)."""
    field = kd.CentralGravity(mu=mu, center=(-radius, 0.1 * radius, 0.05 * radius))
    model = _hub(True, True, gravity=field)
    cm = compile_model(model, backend=backend)
    n, nq = model.n, model.nq
    for s in _states(model, 2, seed=11):
        ref = kd.forward_dynamics(model, s)
        tol = 1e-12 * max(1.0, float(np.linalg.norm(ref)))
        np.testing.assert_allclose(cm.forward_dynamics(s), ref, rtol=0, atol=tol)
        q, u = s.q[:nq], s.u[:n]
        loads = applied_loads(model, kd.State(q, u), kinematics_at(model, q, u))
        got = np.array(cm.rhs_with_loads(s.q, s.u, loads))[: n + model.nf]
        np.testing.assert_allclose(got, ref, rtol=0, atol=tol)


@pytest.mark.slow
def test_compiled_flexible_jacobian_against_differences_of_the_dense_engine():
    """The tape's exact Jacobian (kd.linearize's route) against central differences of
    kd.forward_dynamics (dense); the efforts' columns against a JointLoad."""
    model = _hub(True, True)
    cm = compile_model(model)
    (s,) = _states(model, 1, seed=5)
    rates, J = cm.jacobian(s.q, s.u)
    NQ, N, n = model.nq + model.nf, model.n + model.nf, model.n
    assert J.shape == (N + NQ, NQ + N + n)
    np.testing.assert_allclose(rates[:N], kd.forward_dynamics(model, s), atol=1e-10)
    x0 = np.r_[s.q, s.u]
    for j in range(NQ + N):
        h = 1e-6
        xp, xm = x0.copy(), x0.copy()
        xp[j] += h
        xm[j] -= h
        fd = (kd.forward_dynamics(model, kd.State(xp[:NQ], xp[NQ:]))
              - kd.forward_dynamics(model, kd.State(xm[:NQ], xm[NQ:]))) / (2 * h)  # fmt: skip
        np.testing.assert_allclose(J[:N, j], fd, rtol=0, atol=1e-6 * max(1.0, np.abs(fd).max()))
    hinge = int(model.layout.u_index[model.joint_index("hinge")][0])
    pushed = kd.forward_dynamics(model, s, [kd.JointLoad("hinge", [1.0])])
    np.testing.assert_allclose(J[:N, NQ + N + hinge], pushed - rates[:N], atol=1e-9)


def test_compiled_flexible_refusals_name_the_problem():
    model = _hub(False, False)
    assert "flexible" in supports(model)  # the run loops do not take its states yet
    assert supports(model, flexible=True) is None
    cm = compile_model(model, backend="python")
    with pytest.raises(kd.ModelError, match="nq \\+ nf"):
        cm.forward_dynamics(kd.State(np.zeros(model.nq), np.zeros(model.n)))
    with pytest.raises(kd.ModelError, match="expected q"):
        cm.jacobian(np.zeros(model.nq), np.zeros(model.n))
