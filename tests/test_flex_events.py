"""Flexible bodies with lock events, joint-limit stops and closed loops (issue 29).

The oracles are built here from the public mass matrix and forcing (kd.mass_matrix,
kd.forcing over [u | s | ξ]): the impact of a lock is the KKT system
``M Δν = Aᵀι, A ν⁺ = 0`` solved in the test, and the loop constraints of the four-bar
are the closing points' positions, differentiated numerically; the accelerations are
then the multiplier form ``[M Aᵀ; A 0]``, not the engine's elimination of dependent
speeds."""

from __future__ import annotations

import warnings

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import loops
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.errors import ModelError
from kanedyn.simulation.diagnose import StepSizeWarning


def _floating():
    """A free hub (123 gimbal and three slides) with an arm on a hinge ("spin") and a
    cantilever of two modes in each of two directions welded to the arm; no gravity."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    arm = kd.Body("arm", 3.0, kd.inertia_tensor(0.1, 0.2, 0.2), com=(0.2, 0.0, 0.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2)
    joints = [
        kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3),
        kd.Joint.revolute("spin", "hub", "arm", axis=3, inner_point=(0.5, 0.1, 0.0)),
        kd.Joint.weld("w", "arm", "beam", inner_point=(0.3, 0.0, 0.0)),
    ]
    model = kd.Model([hub, arm, beam], joints, gravity=(0.0, 0.0, 0.0))
    s = model.set_joint(model.initial_state(), "root", angles=(0.1, 0.2, 0.3),
                        rates=(0.4, -0.3, 0.8), displacement_rates=(0.1, 0.0, -0.2))  # fmt: skip
    s = model.set_joint(s, "spin", rates=(1.5,))
    s = model.set_modes(s, "beam", amplitudes=(0.02, -0.01, 0.015, 0.01),
                        rates=(0.1, -0.2, 0.05, 0.1))  # fmt: skip
    return model, s


def _kkt_impact(M, A, nu):
    """``ν⁺`` of the plastic impact ``M(ν⁺ - ν⁻) = Aᵀι``, ``A ν⁺ = 0``."""
    N, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    return np.linalg.solve(K, np.r_[M @ nu, np.zeros(m)])[:N]


def _speed(model, joint):
    return int(model.layout.u_index[model.joint_index(joint)][0])


def _run(model, s, t, dt, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StepSizeWarning)
        return kd.simulate(model, s, t, dt, **kw)


# ----------------------------------------------------------------------- lock events


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_lock_impact_is_the_kkt_impact_over_the_modal_speeds(formulation):
    """A lock at t = 0: the speeds after it are the KKT impact over [u | s | ξ] (the
    modal speeds jump too), the momenta along the free directions are kept and the
    total P and H of the free-floating system are those before it."""
    model, s = _floating()
    N, n, r = model.n_total, model.n, _speed(model, "spin")
    M = kd.mass_matrix(model, s)
    E = np.eye(N)[[r]]
    expected = _kkt_impact(M, E, s.u)
    tr = _run(model, s, 0.02, 0.01, events=[kd.Lock(0.0, "spin")], formulation=formulation,
              engine="dense")  # fmt: skip
    after = kd.State(tr.q[0], tr.u[0])
    np.testing.assert_allclose(after.u, expected, rtol=0, atol=1e-12)
    assert np.abs(after.u[n:] - s.u[n:]).max() > 1e-2  # the modes are kicked
    free = np.arange(N) != r
    np.testing.assert_allclose((M @ after.u)[free], (M @ s.u)[free], rtol=0, atol=1e-12)
    for a, b in zip(kd.momentum(model, after), kd.momentum(model, s), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert kd.kinetic_energy(model, after) < kd.kinetic_energy(model, s)


def test_an_impact_without_the_modal_coupling_fails_the_kkt_check(monkeypatch):
    """A deliberate break: with the coupling of the joints' and the modal speeds left out
    of the impact's mass matrix, the modal speeds do not jump and the speeds after the
    lock miss the KKT impact by far more than the tolerance above."""
    model, s = _floating()
    N, n, r = model.n_total, model.n, _speed(model, "spin")
    expected = _kkt_impact(kd.mass_matrix(model, s), np.eye(N)[[r]], s.u)
    real = loops.flexible_mass_matrix_at

    def uncoupled(model, tm, eta):
        M = real(model, tm, eta)
        M[:n, n:] = M[n:, :n] = 0.0
        return M

    monkeypatch.setattr(loops, "flexible_mass_matrix_at", uncoupled)
    tr = _run(model, s, 0.01, 0.01, events=[kd.Lock(0.0, "spin")], engine="dense")
    np.testing.assert_allclose(tr.u[0][n:], s.u[n:], rtol=1e-14)
    assert np.abs(tr.u[0] - expected).max() > 1e-2


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_lock_and_unlock_keep_the_total_momenta_and_native_equals_dense(formulation):
    """Free-floating and torque-free: H and P stay through a lock and an unlock (to RK4's
    accuracy, 1e-8 under Kane at this step; a wrong impact moves them by 0.1); the native run loop, which re-enters Python at each event, equals the
    dense engine."""
    model, s = _floating()
    events = [kd.Lock(0.03, "spin"), kd.Unlock(0.055, "spin")]
    runs = {e: _run(model, s, 0.08, 0.0025, events=events, formulation=formulation, engine=e)
            for e in ("dense", "auto")}  # fmt: skip
    tr = runs["dense"]
    P0, H0 = kd.momentum(model, s)
    for q, u in zip(tr.q, tr.u, strict=True):
        P, H = kd.momentum(model, kd.State(q, u))
        assert np.abs(P - P0).max() < 1e-7 and np.abs(H - H0).max() < 1e-7
    held = (tr.t > 0.03 - 1e-9) & (tr.t < 0.055 - 1e-9)
    assert held.sum() == 10 and np.all(tr.u[held, _speed(model, "spin")] == 0.0)
    assert np.all(tr.u[~held, _speed(model, "spin")] != 0.0)
    np.testing.assert_allclose(runs["auto"].q, tr.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(runs["auto"].u, tr.u, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------- stops


def _stopped_arm():
    """An arm on a hinge about N's z ("hinge", stops at ±0.2 rad) carrying a cantilever
    with two modes bending in the plane; no gravity."""
    arm = kd.Body("arm", 2.0, kd.inertia_tensor(0.05, 0.1, 0.1), com=(0.25, 0.0, 0.0))
    beam = kd.beam_body("beam", 1.5, 1.0, 20.0, n_modes=2, directions=(1,))
    joints = [
        kd.Joint.revolute("hinge", None, "arm", axis=3,
                          limits=kd.JointLimits(lower=-0.2, upper=0.2)),
        kd.Joint.weld("w", "arm", "beam", inner_point=(0.5, 0.0, 0.0)),
    ]  # fmt: skip
    model = kd.Model([arm, beam], joints, gravity=(0.0, 0.0, 0.0))
    s = model.set_joint(model.initial_state(), "hinge", rates=(2.0,))
    return model, model.set_modes(s, "beam", amplitudes=(0.01, 0.0), rates=(0.0, 0.2))


def _energy(model, q, u):
    s = kd.State(q, u)
    return kd.kinetic_energy(model, s) + kd.potential_energy(model, s)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_a_stop_holds_the_hinge_of_a_flexible_arm_and_takes_energy(formulation):
    """The hinge reaches its upper stop, is held within its range afterwards, and the
    energy (strain energy included) never rises: it is kept between impacts and falls
    at each (a plastic impact)."""
    model, s = _stopped_arm()
    tr = _run(model, s, 0.3, 0.005, limits="stop", formulation=formulation)
    q = tr.q[:, 0]
    assert np.all(q <= 0.2 + 1e-12) and np.all(q >= -0.2 - 1e-12)
    assert [(c.joint, c.bound) for c in tr.limit_crossings] == [("hinge", "upper")]
    E = np.array([_energy(model, a, b) for a, b in zip(tr.q, tr.u, strict=True)])
    assert np.all(np.diff(E) < 1e-8 * E[0])
    assert E[-1] < 0.9 * E[0]


# ----------------------------------------------------------------------- loops


def _four_bar_with_beam():
    """The planar four-bar (no gravity) with a cantilever of two modes welded to its
    coupler; the loop closes on the coupler and the rocker (rigid)."""
    four = kd.examples.four_bar(gravity=0.0)
    beam = kd.beam_body("beam", 1.0, 0.5, 2.0, n_modes=2, directions=(1,), stiffening=False)
    joints = [*four.joints, kd.Joint.weld("w", "coupler", "beam", inner_point=(0.5, 0.0, 0.0))]
    model = kd.Model([*four.bodies, beam], joints, loops=four.loops, gravity=(0.0, 0.0, 0.0),
                     planar=True)  # fmt: skip
    s = model.set_joint(model.initial_state(), "crank", rates=(2.0,))
    s = model.set_modes(s, "beam", amplitudes=(0.05, 0.0), rates=(0.0, 0.3))
    return model, model.assemble(s, fix=["crank"])


def _closure(model, q):
    """The loop's closing points' separation in N's x-y plane, from the bodies' poses."""
    kin = kinematics_at(model, q[: model.nq], np.zeros(model.n))
    lp = model.loops[0]
    i, o = model.body_index(lp.inner), model.body_index(lp.outer)
    gap = (kin.p[i] + kin.R_N_B[i] @ lp.inner_point) - (kin.p[o] + kin.R_N_B[o] @ lp.outer_point)
    return gap[:2]


def _numeric_rows(model, s, h=1e-4):
    """``A`` (over [u | s | ξ]; the hinges' q̇ = u, the ξ columns zero: the points are
    on rigid bodies) and the bias ``b = d²Φ(q + τu)/dτ²``, by central differences."""
    A = np.zeros((2, model.n_total))
    for j in range(model.nq):
        dq = np.zeros(model.nq_total)
        dq[j] = h
        A[:, j] = (_closure(model, s.q + dq) - _closure(model, s.q - dq)) / (2 * h)
    du = np.r_[s.u[: model.n], np.zeros(model.nq_total - model.nq)]
    b = (_closure(model, s.q + h * du) - 2 * _closure(model, s.q)
         + _closure(model, s.q - h * du)) / h**2  # fmt: skip
    return A, b


def test_four_bar_with_a_beam_accelerations_equal_the_multiplier_form():
    """kd.forward_dynamics of the closed chain equals ``[M Aᵀ; A 0][ν̇; -λ] = [f; -b]``
    with the constraint rows differentiated numerically from the closing points."""
    model, s = _four_bar_with_beam()
    A, b = _numeric_rows(model, s)
    M, f = kd.mass_matrix(model, s), kd.forcing(model, s)
    N = model.n_total
    K = np.block([[M, A.T], [A, np.zeros((2, 2))]])
    expected = np.linalg.solve(K, np.r_[f, -b])[:N]
    np.testing.assert_allclose(kd.forward_dynamics(model, s), expected, rtol=0,
                               atol=1e-6 * np.abs(expected).max())  # fmt: skip
    assert np.abs(expected[model.n :]).max() > 1.0  # the modes take part


def test_four_bar_with_a_beam_lock_is_the_kkt_impact():
    """Locking the crank stops the mechanism; the beam's modal speeds jump by the KKT
    impact with the loop's rows and the lock's row."""
    model, s = _four_bar_with_beam()
    A, _ = _numeric_rows(model, s)
    r = _speed(model, "crank")
    expected = _kkt_impact(kd.mass_matrix(model, s), np.vstack((A, np.eye(model.n_total)[[r]])),
                           s.u)  # fmt: skip
    tr = _run(model, s, 0.01, 0.01, events=[kd.Lock(0.0, "crank")], engine="dense")
    np.testing.assert_allclose(tr.u[0], expected, rtol=0, atol=1e-7)
    np.testing.assert_allclose(tr.u[0][: model.n], 0.0, atol=1e-12)
    assert np.abs(tr.u[0][model.n :] - s.u[model.n :]).max() > 1e-2


@pytest.mark.slow
def test_four_bar_with_a_beam_kane_equals_msd_closed_and_conserving():
    """Torque-free: the Kane and MSD runs agree (to RK4's error at this step, which
    differs between their states), the loop stays closed and the energy
    (strain energy included) is kept to RK4's accuracy."""
    model, s = _four_bar_with_beam()
    runs = {f: _run(model, s, 0.05, 0.0025, formulation=f) for f in ("kane", "msd")}
    np.testing.assert_allclose(runs["kane"].q, runs["msd"].q, rtol=0, atol=2e-8)
    np.testing.assert_allclose(runs["kane"].u, runs["msd"].u, rtol=0, atol=2e-7)
    for tr in runs.values():
        E = np.array([_energy(model, q, u) for q, u in zip(tr.q, tr.u, strict=True)])
        assert np.abs(E - E[0]).max() < 2e-8 * E[0]  # 3.6e-7 at twice the step: RK4's
        for q, u in zip(tr.q, tr.u, strict=True):
            assert max(loops.residuals(model, q, u)) < 1e-10
            assert np.abs(_closure(model, q)).max() < 1e-10


def test_what_the_loops_of_a_flexible_model_refuse_say_why():
    model, s = _four_bar_with_beam()
    loop = attrs.evolve(model.loops[0], name="tip", inner="beam")
    bent = kd.Model(model.bodies, model.joints, loops=[loop], gravity=(0.0, 0.0, 0.0))
    with pytest.raises(ModelError, match="loop 'tip' closes on flexible body 'beam'"):
        _run(bent, bent.initial_state(), 0.01, 0.005)
    model, s = _floating()
    with pytest.raises(ModelError, match="method='energy-momentum' with lock events"):
        _run(model, s, 0.01, 0.005, method="energy-momentum", events=[kd.Lock(0.0, "spin")])
