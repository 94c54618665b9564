"""Tests of kanedyn.dynamics.msd (momentum states p_k, h_k) and simulate(formulation="msd").

Oracles: generalized momenta as the gradient of the kinetic co-energy rebuilt from
kd.kinematics (K = Σ ½ ωᵀIω + ω·h + ½ m v·v, central differences, exact for a
quadratic), total P and H rebuilt from kd.kinematics, finite differences of momenta()
along accurate Kane trajectories, and the Kane formulation itself. The rate check is
shown to catch a broken rate equation.
"""

from __future__ import annotations

import weakref

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kanedyn as kd
import kanedyn.compiled
import kanedyn.dynamics.msd
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import applied_loads
from kanedyn.errors import ModelError
from kanedyn.model.plan import params_of
from tests.strategies import SETTINGS, random_loads, random_state, tree, trees

SEEDS = st.integers(0, 2**32 - 1)


def _coenergy(model, q, nu):
    kin = kd.kinematics(model, kd.State(q, nu))
    K = 0.0
    for i, b in enumerate(model.bodies):
        w_B = kin.R_N_B[i].T @ kin.omega[i]
        K += 0.5 * w_B @ b.inertia @ w_B + w_B @ b.embedded_momentum
        K += 0.5 * b.mass * kin.v[i] @ kin.v[i]
    return K


def _totals(model, state, about):
    """Total P and H about the point ``about`` (N), from kd.kinematics."""
    kin = kd.kinematics(model, state)
    P, H = np.zeros(3), np.zeros(3)
    for i, b in enumerate(model.bodies):
        R = kin.R_N_B[i]
        P += b.mass * kin.v[i]
        H += R @ (b.inertia @ (R.T @ kin.omega[i]) + b.embedded_momentum)
        H += np.cross(kin.r[i] - about, b.mass * kin.v[i])
    return P, H


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_speeds_of_momenta_round_trip(model, seed):
    state = random_state(model, np.random.default_rng(seed))
    y = kd.msd.momenta(model, state)
    nu = kd.msd.speeds(model, state.q, y)
    np.testing.assert_allclose(nu, state.u, rtol=0, atol=1e-12 * max(1.0, np.abs(state.u).max()))


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_momenta_are_generalized_momenta_or_root_totals(model, seed):
    state = random_state(model, np.random.default_rng(seed))
    y = kd.msd.momenta(model, state)
    eps = 1e-3
    grad = np.array([(_coenergy(model, state.q, state.u + eps * e)
                      - _coenergy(model, state.q, state.u - eps * e)) / (2 * eps)
                     for e in np.eye(model.n)])  # fmt: skip
    par = kd.partials(model, state)
    kin = kd.kinematics(model, state)
    h_N = np.array([kin.R_N_B[i] @ b.embedded_momentum for i, b in enumerate(model.bodies)])
    Mnu = kd.mass_matrix(model, state) @ state.u + par.Omega.reshape(-1, model.n).T @ h_N.ravel()
    np.testing.assert_allclose(Mnu, grad, atol=1e-9 * (1 + np.abs(grad).max()))
    expected = grad.copy()
    for k in kd.msd.momentum_roots(model):
        j = model.joints[k]
        idx = model.speeds(j.name)
        about = _mass_centre(model, kin) if j.trn_dof else kin.o[k]
        P, H = _totals(model, state, about)
        expected[idx[:3]] = H
        if j.trn_dof:
            expected[idx[3:]] = P
    np.testing.assert_allclose(y, expected, atol=1e-9 * (1 + np.abs(expected).max()))


def _mass_centre(model, kin):
    m = np.array([b.mass for b in model.bodies])
    return m @ kin.r / m.sum()


def test_free_root_rows_are_total_momenta_about_the_mass_centre():
    """A free root's rows hold H about the system's mass centre (not about N's origin,
    where the orbit's c × P would bury the attitude's momentum) and P."""
    model = kd.examples.hub_with_panels()
    state = random_state(model, np.random.default_rng(3))
    y = kd.msd.momenta(model, state)
    P, H = _totals(model, state, _mass_centre(model, kd.kinematics(model, state)))
    idx = model.speeds("root")
    np.testing.assert_allclose(y[idx[:3]], H, atol=1e-12)
    np.testing.assert_allclose(y[idx[3:]], P, atol=1e-12)
    assert kd.msd.momentum_roots(model) == [model.joint_index("root")]


def _fd5(values, h):
    v = np.asarray(values)
    return (v[0] - 8 * v[1] + 8 * v[3] - v[4]) / (12 * h)


def rate_error(model, state, loads=None, h=2e-3, substeps=20):
    """Mismatch between kanedyn.dynamics.msd.rates and the finite-difference derivative of
    momenta() along an accurate Kane trajectory, relative to the rates' size."""
    traj = kd.simulate(model, state, 4 * h, h / substeps, loads=loads, output_every=h,
                       progress=False)  # fmt: skip
    ys = [kd.msd.momenta(model, traj.state(i)) for i in range(5)]
    fd = _fd5(ys, h)
    mid = traj.state(2)
    kin = kinematics_at(model, mid.q, mid.u)
    rates = kanedyn.dynamics.msd.rates(model, kin, applied_loads(model, mid, kin, loads, traj.t[2]))
    return np.abs(rates - fd).max() / (1.0 + np.abs(fd).max())


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_momentum_rates_match_finite_differences(model, seed):
    """Every joint kind, gravity, springs, dampers, embedded momentum, external forces,
    torques and joint actuators."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    assert rate_error(model, state, random_loads(model, rng)) < 1e-7


def _rate_tree():
    """Gimbals away from the root (Γ̇ ≠ 0) and sliders on rotating bodies."""
    model = tree([0, 1, 0], ["free", "gimbal3", "slider2", "gimbal_slider"],
                 ["123", "313", "123", "231"], seed=7, embedded=True, gravity=True)  # fmt: skip
    return model, random_state(model, np.random.default_rng(8), speed=1.5)


def test_rate_check_passes_on_reference_tree():
    assert rate_error(*_rate_tree()) < 1e-7


@pytest.mark.parametrize(
    ("term", "field"),
    [("Γ̇ᵀH", "Gamma_dot"), ("(ω_i × Δ)ᵀP", "omega_in")],
)
def test_rate_check_catches_a_broken_rate_equation(monkeypatch, term, field):
    original = kanedyn.dynamics.msd.rates

    def broken(model, kin, L):
        return original(model, attrs.evolve(kin, **{field: 0 * getattr(kin, field)}), L)

    monkeypatch.setattr(kanedyn.dynamics.msd, "rates", broken)
    assert rate_error(*_rate_tree()) > 1e-3, term


def _agreement_models():
    yield tree([0, 1, 0], ["free", "gimbal3", "spherical", "gimbal_slider"],
               ["123", "321", "123", "212"], seed=9, embedded=True)  # fmt: skip
    yield tree([0, 0], ["hinge", "slider3", "gimbal2"], ["231", "123", "131"], seed=10,
               gravity=True)  # fmt: skip
    yield tree([0], ["spherical", "slider1"], ["123", "123"], seed=11, gravity=True)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_msd_and_kane_trajectories_agree(index):
    model = list(_agreement_models())[index]
    rng = np.random.default_rng(12)
    state = random_state(model, rng)
    loads = random_loads(model, rng)
    kw = dict(method="DOP853", rtol=1e-11, atol=1e-12, loads=loads, progress=False)
    a = kd.simulate(model, state, 1.0, 0.1, formulation="msd", **kw)
    b = kd.simulate(model, state, 1.0, 0.1, formulation="kane", **kw)
    assert a.formulation == "msd" and b.formulation == "kane"
    np.testing.assert_allclose(a.t, b.t)
    np.testing.assert_allclose(a.q, b.q, atol=1e-8)
    np.testing.assert_allclose(a.u, b.u, atol=1e-8)


# --------------------------------------------------------------------------- long runs
def _spinning_hub(damping=0.5):
    model = kd.examples.hub_with_panels(stiffness=50.0, damping=damping)
    state = model.set_joint(model.initial_state(), "root", rates=(0.1, 0.3, -0.2),
                            displacement_rates=(0.05, 0.02, 0.0))  # fmt: skip
    state = model.set_joint(state, "hinge_left", angles=(0.3,), rates=(0.5,))
    return model, model.set_joint(state, "hinge_right", angles=(-0.2,), rates=(-0.4,))


def _drift(y, idx):
    return max(np.abs(y[:, r] - y[0, r]).max() / np.abs(y[0, r]).max() for r in (idx[:3], idx[3:]))


def momentum_drift_and_energy(formulation, steps, dt, engine="auto"):
    """Relative drift of the root's total H and P, and the total-energy history, for a
    torque-free RK4 run: (drift read from the output speeds through kd.msd.momenta,
    drift of the integrated MSD states themselves (None for Kane), energies)."""
    model, state = _spinning_hub()
    tr = kd.simulate(model, state, steps * dt, dt, formulation=formulation,
                     output_every=steps * dt / 50, progress=False, engine=engine)  # fmt: skip
    y = np.array([kd.msd.momenta(model, tr.state(i)) for i in range(tr.t.size)])
    idx = model.speeds("root")
    states = None if tr.momenta is None else _drift(tr.momenta, idx)
    return _drift(y, idx), states, tr.total_energy


def _check_long_run(steps, dt, engine="auto"):
    """MSD's total-momentum states stay constant to round-off (and Kane's momentum
    drifts far more); read back through the speeds, MSD's momentum carries the
    round-off of recovering the speeds from H about the mass centre (compiled and dense
    engines recover the speeds in different orders)."""
    d_msd, s_msd, E_msd = momentum_drift_and_energy("msd", steps, dt, engine)
    d_kane, _, E_kane = momentum_drift_and_energy("kane", steps, dt, engine)
    msg = (f"relative momentum drift over {steps} RK4 steps ({engine} engine): msd states "
           f"{s_msd:.3e}, msd through the speeds {d_msd:.3e}, kane {d_kane:.3e}")  # fmt: skip
    print(msg)  # shown in CI's slow run (-rP)
    assert s_msd <= 1e-15, msg
    assert d_msd <= 1e-11, msg
    assert d_kane > 50 * d_msd, msg
    for E in (E_msd, E_kane):
        assert np.all(np.diff(E) < 0.0), msg


def _break_root_rates(monkeypatch):
    """Break MSD on both engines: give the free root's total-momentum rate a transport
    term of a rotating frame (``H × ω``, or the hub's ``-ω × I ω``), which an inertial
    total momentum does not have."""
    model, _ = _spinning_hub()
    idx = model.speeds("root")[:3]
    original = kanedyn.dynamics.msd.rates

    def broken(model, kin, L, *modal):
        ydot = original(model, kin, L, *modal)
        R, w = kin.R_N_B[0], kin.omega[0]
        ydot[idx] -= np.cross(w, R @ params_of(model).inertia[0] @ R.T @ w)
        return ydot

    monkeypatch.setattr(kanedyn.dynamics.msd, "rates", broken)
    traced = kanedyn.compiled.kernels.Trace.run_msd

    def broken_traced(self, *modal, **kw):
        y = list(self.u)
        ydot, qd, nu = traced(self, *modal, **kw)
        H, w = [y[i] for i in idx], [nu[i] for i in idx]
        for c, i in enumerate(idx):
            ydot[i] = ydot[i] + (H[(c + 1) % 3] * w[(c + 2) % 3] - H[(c + 2) % 3] * w[(c + 1) % 3])
        return ydot, qd, nu

    monkeypatch.setattr(kanedyn.compiled.kernels.Trace, "run_msd", broken_traced)
    monkeypatch.setattr(kanedyn.compiled.runtime, "_CACHE", weakref.WeakKeyDictionary())


@pytest.mark.parametrize("engine", ["dense", "compiled"])
def test_msd_keeps_total_momentum_to_round_off(engine):
    _check_long_run(steps=1000, dt=0.05, engine=engine)


@pytest.mark.parametrize("engine", ["dense", "compiled"])
def test_momentum_check_fails_when_the_root_rate_is_broken(monkeypatch, engine):
    _break_root_rates(monkeypatch)
    d_msd, s_msd, _ = momentum_drift_and_energy("msd", 1000, 0.05, engine)
    assert d_msd > 1e-6 and s_msd > 1e-6


@pytest.mark.slow
def test_msd_keeps_total_momentum_over_1e5_steps():
    _check_long_run(steps=100_000, dt=0.01)


# --------------------------------------------------------------------------- locks
@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_lock_and_unlock_conserve_momentum_and_lock_loses_energy(formulation):
    model, state = _spinning_hub(damping=0.0)
    events = [kd.Lock(0.5, "hinge_left"), kd.Unlock(1.0, "hinge_left")]
    tr = kd.simulate(model, state, 1.5, 0.01, formulation=formulation, events=events,
                     progress=False)  # fmt: skip
    P, H = tr.linear_momentum, tr.angular_momentum
    np.testing.assert_allclose(P - P[0], 0.0, atol=1e-10 * np.abs(P[0]).max())
    np.testing.assert_allclose(H - H[0], 0.0, atol=1e-9 * np.abs(H[0]).max())
    r = model.speeds("hinge_left")[0]
    i_lock, i_unlock = np.searchsorted(tr.t, [0.5 - 1e-9, 1.0 - 1e-9])
    assert np.all(tr.u[i_lock:i_unlock, r] == 0.0)
    assert np.any(tr.u[i_unlock + 1 :, r] != 0.0)
    E = tr.total_energy
    before, after = E[i_lock - 1], E[i_lock]
    assert after < before - 1e-4 * before
    # no damping: energy is otherwise conserved, and unlocking releases none
    assert np.abs(np.diff(E[:i_lock])).max() < 1e-6 * before
    assert np.abs(np.diff(E[i_lock:])).max() < 1e-6 * before


def test_lock_of_a_missing_dof_names_the_joint():
    model, state = _spinning_hub()
    with pytest.raises(ModelError, match="hinge_left"):
        kd.simulate(model, state, 1.0, 0.01, events=[kd.Lock(0.5, "hinge_left", dof=1)],
                    progress=False)  # fmt: skip
    with pytest.raises(ModelError, match="nowhere"):
        kd.simulate(model, state, 1.0, 0.01, events=[kd.Lock(0.5, "nowhere")], progress=False)


def test_unlock_of_a_dof_that_is_not_locked_names_the_joint():
    model, state = _spinning_hub()
    with pytest.raises(ModelError, match="hinge_right"):
        kd.simulate(model, state, 1.0, 0.01, events=[kd.Unlock(0.5, "hinge_right")],
                    formulation="msd", progress=False)  # fmt: skip


def test_free_root_cannot_be_locked():
    model, state = _spinning_hub()
    with pytest.raises(ModelError, match="root"):
        kd.simulate(model, state, 1.0, 0.01, events=[kd.Lock(0.5, "root")], progress=False)


def test_momentum_vector_of_wrong_length_is_a_model_error():
    model, state = _spinning_hub()
    with pytest.raises(ModelError, match="length"):
        kd.msd.speeds(model, state.q, np.zeros(model.n + 1))
    with pytest.raises(ModelError, match="length"):
        kd.msd.speeds(model, state.q[:-1], np.zeros(model.n))
