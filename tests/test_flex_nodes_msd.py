"""Momentum-state dynamics (MSD) with joints at nodes of flexible bodies (issue 29).

The modal momenta ``y_ξ = ∂T/∂ξ`` then hold the momenta of the subtrees riding on the
nodes, and their rates the subtrees' external loads and the rate of the nodes' motion
subspaces (the reactions at the nodes cancel against those on the node's body).

Oracles: the gradient of the kinetic energy (central differences of
``kd.kinetic_energy``) for the momenta; Kane's equations on the dense engine (CRBA and
Cholesky over ``[u | s | ξ]``, a different algorithm) for the rates, as ``d/dt y`` by
central differences along Kane's motion, and for whole runs; conservation of H, P and
energy (strain energy included) for a torque-free free-floating hub, beam and tip body;
the dense MSD code for the native kernel. Each physics check fails when a node term is
dropped on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import msd
from kanedyn.dynamics.recursion import Recursion
from kanedyn.model.plan import params_of
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.system import System
from tests.test_flex_msd import (
    drifts,
    energy_gradient,
    native_msd_equals_dense,
    rate_error,
    runs_equal,
)
from tests.test_flex_nodes import _hub_beam_tip, _outer_nodes, _two_beams


def _free_tip(gravity=(0.0, 0.0, 0.0)):
    """A free-floating hub (a momentum root: total H about the moving mass centre, and P),
    a beam welded to it at a slant, and a tip body at the beam's tip node on a joint with
    two gimbal angles and a slide (in a rotated joint frame, with springs)."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=False)
    tip = kd.Body("tip", 0.7, kd.inertia_tensor(0.05, 0.03, 0.04), com=(0.1, 0.02, -0.03))
    model = kd.Model(
        [hub, beam, tip],
        [kd.Joint.free("root", "hub"),
         kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                       inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1))),
         kd.Joint("slider", "beam", "tip", rot_type="gimbal", rot_dof=2, rot_seq="213",
                  trn_dof=1, trn_seq="312", inner_point=(2.0, 0.0, 0.0), inner_node="tip",
                  inner_rotation=kd.euler_to_dcm("123", (0.2, -0.1, 0.3)),
                  outer_point=(-0.1, 0.0, 0.0), stiffness=(2.0, 1.0, 5.0))],
        gravity=gravity,
    )  # fmt: skip
    q = np.zeros(model.nq_total)
    q[:4] = np.r_[0.9, 0.1, -0.3, 0.2] / np.linalg.norm([0.9, 0.1, -0.3, 0.2])
    q[model.coordinates("slider")] = (0.3, -0.2, 0.05)
    q[model.nq :] = (0.05, -0.03, 0.04, 0.02)
    u = 0.5 * np.random.default_rng(11).normal(size=model.n_total)
    return model, kd.State(q, u)


BUILDS = {
    "hinge at the tip node": _hub_beam_tip,
    "free root, gimbal and slide at the tip node": _free_tip,
    "a beam hinged at a beam's tip node": _two_beams,
    "outer nodes": _outer_nodes,
}
GRAVITY = (0.0, 0.0, -9.81)


@pytest.mark.parametrize("case", BUILDS)
def test_momenta_are_the_gradient_of_the_kinetic_energy(case):
    """``∂T/∂ν`` by central differences of ``kd.kinetic_energy`` (quadratic in ν: exact
    to round-off) is ``generalized_momenta``, the modal rows with the bodies outboard of
    the nodes; the speeds come back from the momentum states."""
    model, s = BUILDS[case](gravity=GRAVITY)
    nq, n = model.nq, model.n
    kin = kd.kinematics(model, s)
    y = msd.generalized_momenta(model, kin, s.u, s.q[nq:])
    grad = energy_gradient(model, s)
    np.testing.assert_allclose(y, grad, rtol=0, atol=1e-10 * np.abs(grad).max())
    assert np.abs(y[n:] - grad[n:]).max() < 1e-10 * np.abs(grad[n:]).max()
    np.testing.assert_allclose(msd.speeds(model, s.q, msd.momenta(model, s)), s.u, atol=1e-13)


@pytest.mark.parametrize("case", BUILDS)
def test_momentum_rates_are_the_rates_of_the_momenta_along_kanes_motion(case):
    model, s = BUILDS[case](gravity=GRAVITY)
    assert rate_error(model, s) < 5e-9


LOADS = [kd.Force("tip", (0.3, -0.2, 0.5), point=(0.05, 0.0, 0.0)),
         kd.Torque("tip", (0.1, 0.2, -0.1), frame="body"),
         kd.JointLoad("slider", [0.2, -0.1, 0.3])]  # fmt: skip


def test_loads_on_the_body_at_the_node_and_the_joints_effort():
    """A force and a torque on the tip body enter the modal rates through the subtree's
    external wrench, the joint's effort does not (it acts on both sides of the joint);
    the native kernel takes the loads as inputs and agrees."""
    model, s = _free_tip(gravity=GRAVITY)
    assert rate_error(model, s, loads=LOADS) < 5e-9
    dense = System(model, Formulation.MSD, LOADS)
    native = System(model, Formulation.MSD, LOADS, compiled=True)
    x = dense.initial(s)
    a, b = dense(0.0, x), native(0.0, x)
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())


def test_the_rate_check_is_second_order_in_the_step():
    """The check's residual is the central differences' error, not a missing term: it
    falls 100 times when the step falls 10 times."""
    model, s = _two_beams()
    coarse, fine = rate_error(model, s, 1e-3), rate_error(model, s, 1e-4)
    assert 80 < coarse / fine < 120


def _without_node_rates(kin, P_k, H_k, F_k, T_k):
    return np.zeros(kin.nodes.S_xi.shape[-1])


def _without_subspace_rate(kin, P_k, H_k, F_k, T_k):
    """The node term with ``Ṡ_ξ = 0`` (the subtrees' loads kept)."""
    o = kin.o_rel
    W_k = np.concatenate([T_k + np.cross(o, F_k), F_k], axis=-1)
    return np.einsum("kjf,kj->f", kin.nodes.S_xi, W_k)


def _bodies_as_joint_frames(kin):
    """The joint frames moving with the inner and outer bodies (the nodes' motion left out)."""
    return kin.omega_in, kin.omega, kin.v_o


BREAKS = {
    "node_momentum_rates": (_without_node_rates, _hub_beam_tip),
    "node_momentum_rates, Ṡ": (_without_subspace_rate, _two_beams),
    "joint_frame_velocities, slide at a node": (_bodies_as_joint_frames, _free_tip),
    "joint_frame_velocities, outer node": (_bodies_as_joint_frames, _outer_nodes),
}


@pytest.mark.parametrize("name", BREAKS)
def test_rate_check_fails_when_a_node_term_is_broken(monkeypatch, name):
    broken, build = BREAKS[name]
    monkeypatch.setattr(msd, name.split(",")[0], broken)
    model, s = build(gravity=GRAVITY)
    assert rate_error(model, s) > 1e-4


def _run(model, s, formulation, engine="dense", t_final=0.01, dt=5e-4):
    return kd.simulate(model, s, t_final, dt, formulation=formulation, engine=engine,
                       progress=False)  # fmt: skip


RUNS = {  # (t_final, dt): ten RK4 steps (the outer nodes' beams are the stiffer)
    "free root, gimbal and slide at the tip node": (5e-3, 5e-4),
    "outer nodes": (2e-3, 2e-4),
}


@pytest.mark.parametrize("case", RUNS)
def test_msd_and_kane_runs_agree(case):
    """Dense MSD and dense Kane integrate the same motion: ten RK4 steps differ by
    RK4's error only (3e-12 and 5e-11 in q, 1e-10 and 3e-9 in u relative, here; it
    falls 16 times when the step halves)."""
    model, s = BUILDS[case](gravity=GRAVITY)
    t_final, dt = RUNS[case]
    a, b = _run(model, s, "msd", "dense", t_final, dt), _run(model, s, "kane", "dense", t_final, dt)
    assert a.u.shape == b.u.shape == (len(a.t), model.n_total) and len(a.t) == 11
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.u, b.u, rtol=0, atol=1e-8 * np.abs(b.u).max())


def test_torque_free_hub_beam_and_tip_keep_H_and_P_to_round_off():
    """The free root's states are total H and P: the speeds recovered from them keep
    kd.momentum's H and P to round-off; the energy with strain energy to RK4's accuracy
    (1.4e-7 here: 30 steps of 4 ms; 5e-9 at 2 ms)."""
    model, s = _free_tip()
    tr = _run(model, s, "msd", t_final=0.12, dt=4e-3)
    dH, dP, dE = drifts(model, tr)
    assert dH < 1e-13 and dP < 1e-13
    assert dE < 1e-6
    assert np.ptp(tr.momenta[:, model.speeds("root")], axis=0).max() == 0.0


@pytest.mark.slow
def test_energy_check_fails_without_the_node_term(monkeypatch):
    """Without the subtree on the node in the modal rates, the energy drifts by 4e-2
    (the momenta stay: the free root's states are still the total ones)."""
    model, s = _free_tip()
    monkeypatch.setattr(msd, "node_momentum_rates", _without_node_rates)
    tr = _run(model, s, "msd", t_final=0.12, dt=4e-3)
    assert drifts(model, tr)[2] > 1e-3


@pytest.mark.parametrize("case", BUILDS)
def test_native_msd_equals_dense_msd(case):
    """The native kernel traces Recursion.run_msd (the node frames at rest for the
    speeds, then the subtrees on the nodes in the modal rates: Recursion.node_rates);
    the dense code sums over the joints in N: rates and speeds agree to round-off."""
    native_msd_equals_dense(*BUILDS[case](gravity=GRAVITY), speeds_atol=1e-12)


def test_native_msd_run_equals_the_dense_run():
    model, s = _free_tip(gravity=GRAVITY)
    runs_equal(
        _run(model, s, "msd", "dense", 0.04, 4e-3), _run(model, s, "msd", "auto", 0.04, 4e-3)
    )


def test_native_check_fails_without_the_recursions_node_term(monkeypatch):
    """The recursion's node term dropped: its rates leave the dense engine's."""
    monkeypatch.setattr(Recursion, "node_rates", lambda self, *args: None)
    model, s = _hub_beam_tip(gravity=GRAVITY)
    dense = System(model, Formulation.MSD, None)
    x = dense.initial(s)
    nq, n = model.nq, model.n
    rec = Recursion(model, x[:nq].tolist(), x[model.nq_total : model.nq_total + n].tolist())
    ydot, _, nu = rec.run_msd(x[nq : model.nq_total], x[model.nq_total + n :])
    np.testing.assert_allclose(np.array(nu, dtype=float), s.u, atol=1e-12)  # speeds kept
    a = dense(0.0, x)[model.nq_total :]
    assert np.abs(np.array(ydot, dtype=float) - a).max() > 1e-3 * np.abs(a).max()


@pytest.mark.parametrize(
    "build", [_hub_beam_tip, pytest.param(_outer_nodes, marks=pytest.mark.slow)]
)
def test_a_model_batch_compiles_the_momentum_states(build):
    """A ModelBatch of a flexible model (rigid bodies' masses dispersed; node joints
    too): each member of the batch's MSD kernel is the dense MSD right-hand side of that
    member's model (what kd.simulate(..., formulation='msd', engine='dense') integrates),
    and its speeds are the member's."""
    model, s = build(gravity=GRAVITY)
    pa = params_of(model)
    rigid = np.array([b.modes is None for b in model.bodies])
    masses = np.stack([pa.mass, pa.mass * np.where(rigid, 1.3, 1.0)])
    batch = kd.ModelBatch.dispersed(model, mass=masses)
    cm = kd.compile_model(batch, formulation="msd")
    nq, n = model.nq_total, model.n_total
    for b in range(2):
        member = batch.member(b)
        dense = System(member, Formulation.MSD, None)
        x = dense.initial(s)
        out = cm.array_fn(*x, *[p[b] for p in cm.parameter_arrays()])
        out = np.array([float(v) for v in out])
        want = dense(0.0, x)
        np.testing.assert_allclose(np.r_[out[n : n + nq], out[:n]], want, rtol=0,
                                   atol=1e-12 * np.abs(want).max())  # fmt: skip
        np.testing.assert_allclose(out[n + nq :], s.u, atol=1e-12)


@pytest.mark.slow
def test_a_model_batchs_momentum_states_run_as_each_member_does():
    """The members stepped together by RK4 on the batch's MSD kernel (on arrays, as the
    ensembles step the Kane kernel) are kd.simulate(member, formulation='msd',
    engine='dense'), five steps, to round-off."""
    from kanedyn.dynamics.steppers import rk4_step

    model, s = _hub_beam_tip(gravity=GRAVITY)
    pa = params_of(model)
    masses = np.stack([pa.mass, pa.mass * np.r_[1.3, 1.0, 0.7]])  # the hub and the tip
    batch = kd.ModelBatch.dispersed(model, mass=masses)
    cm = kd.compile_model(batch, formulation="msd")
    nq, n = model.nq_total, model.n_total
    members = [batch.member(b) for b in range(2)]
    X = np.stack([System(m, Formulation.MSD, None).initial(s) for m in members])

    def f(t, X):
        out = cm.array_fn(*X.T, *cm.parameter_arrays())
        xdot = np.empty(X.shape)
        for c, col in enumerate(out[n : n + nq] + out[:n]):
            xdot[:, c] = col
        return xdot

    for _ in range(5):
        X = rk4_step(f, 0.0, X, 2e-3)
    for b, member in enumerate(members):
        run = kd.simulate(member, s, 0.01, 2e-3, formulation="msd", engine="dense",
                          progress=False)  # fmt: skip
        np.testing.assert_allclose(X[b, :nq], run.q[-1], rtol=0, atol=1e-13)
        np.testing.assert_allclose(X[b, nq:], run.momenta[-1], rtol=0,
                                   atol=1e-12 * np.abs(run.momenta[-1]).max())  # fmt: skip


def test_a_lock_on_a_node_joint_under_msd_follows_kanes_run():
    """A lock event on the joint at the tip node: the MSD states after the impact are the
    momenta ``M ν⁺`` of the node-aware mass matrix, so the run follows Kane's (to RK4's
    error at this step) with the locked speed held at zero."""
    model, s = _hub_beam_tip(gravity=GRAVITY)
    runs = [
        kd.simulate(model, s, 0.02, 0.005, events=[kd.Lock(0.01, "hinge")], formulation=f,
                    engine="dense")
        for f in ("kane", "msd")
    ]  # fmt: skip
    hinge = model.speeds("hinge")[0]
    assert np.all(runs[1].u[runs[1].t > 0.01, hinge] == 0.0)
    np.testing.assert_allclose(runs[1].q, runs[0].q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(runs[1].u, runs[0].u, rtol=0, atol=1e-6)
