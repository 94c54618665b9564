"""Tests of kanedyn.dynamics.partials: Ω_u, V_u, V_s and the remainder accelerations α_r, a_r.

The partials are checked against kd.kinematics (ω_i = Ω_u u, v_i = V_u u + V_s s), and
the remainders against finite differences of kd.kinematics along an accurately
integrated flow: ω̇_i = Ω_u u̇ + α_r and a_i = V ν̇ + a_r, with ν̇ itself taken from the
finite differences. Companion tests drop the Γ̇σ term and the slider Coriolis term and
show that the check then fails.
"""

from __future__ import annotations

import importlib

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kanedyn as kd
from tests.strategies import SETTINGS, random_loads, random_state, tree, trees

SEEDS = st.integers(0, 2**32 - 1)
# the package exports a function named ``partials``, which hides the submodule attribute
partials_module = importlib.import_module("kanedyn.dynamics.partials")


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_partials_reproduce_kinematics(model, seed):
    state = random_state(model, np.random.default_rng(seed))
    kin = kd.kinematics(model, state)
    par = kd.partials(model, state)
    nb, nu, ns = model.nb, model.nu, model.ns
    assert par.Omega_u.shape == (nb, 3, nu)
    assert par.V_u.shape == (nb, 3, nu) and par.V_s.shape == (nb, 3, ns)
    u, s = state.u[:nu], state.u[nu:]
    np.testing.assert_allclose(par.Omega_u @ u, kin.omega, atol=1e-13)
    np.testing.assert_allclose(par.V_u @ u + par.V_s @ s, kin.v, atol=1e-12)
    # the [u | s] views
    np.testing.assert_array_equal(par.Omega[:, :, nu:], 0.0)
    np.testing.assert_allclose(par.V @ state.u, kin.v, atol=1e-12)


@SETTINGS
@given(model=trees(), seed=SEEDS)
def test_partials_are_derivatives_of_velocities(model, seed):
    """ω and v are linear in ν: their change for ν + e_r is column r (finite
    difference, exact for a linear map)."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    par = kd.partials(model, state)
    base = kd.kinematics(model, state)
    for r in range(model.n):
        bumped = kd.kinematics(model, kd.State(state.q, state.u + np.eye(model.n)[r]))
        np.testing.assert_allclose(bumped.omega - base.omega, par.Omega[:, :, r], atol=1e-12)
        np.testing.assert_allclose(bumped.v - base.v, par.V[:, :, r], atol=1e-12)


def _fd5(values, h):
    v = np.asarray(values)
    return (v[0] - 8 * v[1] + 8 * v[3] - v[4]) / (12 * h)


def remainder_errors(model, state, loads=None, h=2e-3, substeps=20):
    """Largest mismatch of ω̇ and a from finite differences of kd.kinematics along the
    flow against Ω ν̇ + α_r and V ν̇ + a_r (ν̇ from the same finite differences),
    relative to the size of the accelerations."""
    traj = kd.simulate(model, state, 4 * h, h / substeps, loads=loads, output_every=h,
                       progress=False)  # fmt: skip
    kins = [kd.kinematics(model, traj.state(i)) for i in range(5)]
    w_dot = _fd5([k.omega for k in kins], h)
    a = _fd5([k.v for k in kins], h)
    nu_dot = _fd5(traj.u, h)
    par = kd.partials(model, traj.state(2))
    e_w = np.abs(par.Omega @ nu_dot + par.alpha_r - w_dot).max()
    e_a = np.abs(par.V @ nu_dot + par.a_r - a).max()
    scale = 1.0 + np.abs(w_dot).max() + np.abs(a).max()
    return e_w / scale, e_a / scale


@settings(SETTINGS, max_examples=10)
@given(model=trees(), seed=SEEDS)
def test_remainder_accelerations_match_finite_differences(model, seed):
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    e_w, e_a = remainder_errors(model, state, random_loads(model, rng))
    assert e_w < 1e-7 and e_a < 1e-7, (e_w, e_a)


def _gimbal_and_slider_tree():
    """Gimbals (Γ̇σ ≠ 0) and sliders on spinning bodies (Coriolis ≠ 0)."""
    model = tree([0, 1, 0], ["free", "gimbal3", "slider2", "gimbal_slider"],
                 ["123", "231", "123", "312"], seed=5)  # fmt: skip
    return model, random_state(model, np.random.default_rng(6), speed=1.5)


def test_remainder_check_passes_on_reference_tree():
    e_w, e_a = remainder_errors(*_gimbal_and_slider_tree())
    assert e_w < 1e-7 and e_a < 1e-7


def _without(model, kin, term):
    """The remainders with one term removed, written with Kinematics fields only:
    Γ̇σ: α_r - Σ_k P_ik R_N_Go Γ̇_k σ_k; slider Coriolis: a_r - Σ_k P_ik ω_i(k) × w_k."""
    P = model.layout.path
    if term == "Gds":
        return {"alpha_r": P @ (kin.R_N_Go @ kin.Gds[..., None])[..., 0]}
    return {"a_r": P @ np.cross(kin.omega_in, kin.w)}


def _break_partials(monkeypatch, term):
    original = partials_module.partials_at

    def broken(model, kin):
        par = original(model, kin)
        drop = _without(model, kin, term)
        return attrs.evolve(par, **{k: getattr(par, k) - v for k, v in drop.items()})

    monkeypatch.setattr(partials_module, "partials_at", broken)


@pytest.mark.parametrize(
    ("term", "field"),
    [("Γ̇σ", "Gds"), ("slider Coriolis ω_i × Δ s", "omega_in")],
)
def test_remainder_check_catches_a_missing_term(monkeypatch, term, field):
    model, state = _gimbal_and_slider_tree()
    kin = kd.kinematics(model, state)
    assert np.abs(next(iter(_without(model, kin, field).values()))).max() > 0.1
    _break_partials(monkeypatch, field)
    e_w, e_a = remainder_errors(model, state)
    assert max(e_w, e_a) > 1e-3, term


def test_partials_of_a_hinge_chain_by_hand():
    """Planar double pendulum (kd.examples.chain: rods of length 1 hanging along -y,
    hinges about z): at zero angles ω_1 = u1 z, ω_2 = (u1 + u2) z; the mass centres at
    (0, -0.5) and (0, -1.5) move with v = ω z × r about the pivots."""
    model = kd.examples.double_pendulum()
    par = kd.partials(model, model.initial_state())
    z = np.array([0.0, 0.0, 1.0])
    np.testing.assert_allclose(par.Omega_u[0], np.c_[z, 0 * z], atol=1e-15)
    np.testing.assert_allclose(par.Omega_u[1], np.c_[z, z], atol=1e-15)
    np.testing.assert_allclose(par.V_u[0], np.c_[[0.5, 0, 0], [0, 0, 0]], atol=1e-15)
    np.testing.assert_allclose(par.V_u[1], np.c_[[1.5, 0, 0], [0.5, 0, 0]], atol=1e-15)
