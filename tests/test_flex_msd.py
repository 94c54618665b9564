"""Flexible bodies in momentum-state dynamics (MSD): the modal momenta ``y_ξ = ∂T/∂ξ``.

Oracles: the gradient of the kinetic energy (finite differences of
``kd.kinetic_energy``, which the MSD code does not call) for the momenta; Kane's
equations on the dense engine (a different algorithm: ``M ν̇ = f``) for the rates, as
``d/dt (∂T/∂ν)`` by central differences along Kane's solution, and for whole
trajectories; conservation of H, P and energy (with strain energy) for a torque-free
hub and beam; the dense MSD code for the native kernel. Each physics check fails when a
modal term is broken on purpose.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import flex, msd
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.system import System


def _hub_beam(stiffening=False, free=True, gravity=(0.0, 0.0, 0.0), damping=0.0):
    """A hub with a two-direction, two-mode beam welded off its centre at a slant; the
    hub on a free joint (a momentum root: total H about the mass centre and P) or on a
    3-2-1 gimbal with three slides (generalized momenta of each speed)."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=stiffening,
                        damping_ratio=damping)  # fmt: skip
    if free:
        root = kd.Joint.free("root", "hub")
    else:
        root = kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="321",
                        trn_dof=3)  # fmt: skip
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    model = kd.Model([hub, beam], [root, arm], gravity=gravity)
    rng = np.random.default_rng(7)
    s = model.initial_state()
    s = model.set_joint(s, "root", angles=(0.3, -0.2, 0.4)) if not free else s
    q = s.q.copy()
    q[: model.nq] += 0.0
    if free:
        q[: model.nq][:4] = np.r_[0.9, 0.1, -0.3, 0.2] / np.linalg.norm([0.9, 0.1, -0.3, 0.2])
    q[model.nq :] = (0.02, -0.01, 0.015, 0.01)
    u = np.zeros(model.n_total)
    u[: model.n] = 0.4 * rng.normal(size=model.n)
    u[model.n :] = (0.1, -0.2, 0.05, 0.1)
    return model, kd.State(q, u)


CASES = {
    "free root": {"free": True},
    "free root, stiffening": {"free": True, "stiffening": True},
    "gimbal root, gravity, stiffening, damping": {
        "free": False, "stiffening": True, "gravity": (0.0, 0.0, -9.81), "damping": 0.05,
    },
}  # fmt: skip


def energy_gradient(model, s, h=1e-3):
    """``∂T/∂ν`` at ``s`` by central differences of ``kd.kinetic_energy`` (quadratic in
    ν, so exact to round-off)."""
    grad = np.zeros(model.n_total)
    for r in range(model.n_total):
        up, um = s.u.copy(), s.u.copy()
        up[r] += h
        um[r] -= h
        grad[r] = (kd.kinetic_energy(model, kd.State(s.q, up))
                   - kd.kinetic_energy(model, kd.State(s.q, um))) / (2 * h)  # fmt: skip
    return grad


@pytest.mark.parametrize("case", CASES)
def test_generalized_momenta_are_the_gradient_of_the_kinetic_energy(case):
    """``∂T/∂ν`` by central differences of ``kd.kinetic_energy`` (quadratic in ν: exact
    to round-off) is ``generalized_momenta``, its modal rows ``∂T/∂ξ`` included, and the
    speeds come back from the momentum states."""
    model, s = _hub_beam(**CASES[case])
    kin = kinematics_at(model, s.q[: model.nq], s.u[: model.n])
    y = msd.generalized_momenta(model, kin, s.u, s.q[model.nq :])
    grad = energy_gradient(model, s)
    np.testing.assert_allclose(y, grad, rtol=0, atol=1e-9 * np.abs(grad).max())
    np.testing.assert_allclose(msd.speeds(model, s.q, msd.momenta(model, s)), s.u, atol=1e-13)


def rate_error(model, s, h=1e-5, loads=None):
    """Largest ``|ẏ_MSD - d/dt y|`` relative to ``|d/dt y|``, ``d/dt y`` by central
    differences of the momentum states along Kane's dense right-hand side (O(h²): about
    1e-10 at h = 1e-5 on these models, falling 100 times per tenfold smaller h)."""
    kane = System(model, Formulation.KANE, loads)
    moms = System(model, Formulation.MSD, loads)
    x = np.r_[s.q, s.u]
    xdot = kane(0.0, x)
    nq = model.nq_total

    def y(x):
        return msd.momenta(model, kd.State(x[:nq], x[nq:]))

    fd = (y(x + h * xdot) - y(x - h * xdot)) / (2 * h)
    rates = moms(0.0, moms.initial(s))
    np.testing.assert_allclose(rates[:nq], xdot[:nq], atol=1e-13)  # q̇ from the speeds
    return np.abs(rates[nq:] - fd).max() / np.abs(fd).max()


@pytest.mark.parametrize("case", CASES)
def test_momentum_rates_are_kanes_rates_of_the_momenta(case):
    model, s = _hub_beam(**CASES[case])
    assert rate_error(model, s) < 1e-9


def _drop_frame_term(real):
    """``ẏ_ξ`` without its moving-axes term ``-P̄ᵀ(ω × v₀)``."""

    def broken(md, eta, xi, w, v0, g):
        return real(md, eta, xi, w, v0, g) + md.P.T @ np.cross(w, v0)

    return broken


def _drop_elastic_momentum(real):
    """The elastic motion's momenta left out of the subtree momenta (the modal rows kept)."""

    def broken(md, eta, xi, w, v0):
        out = real(md, eta, xi, w, v0)
        out[:6] = 0.0
        return out

    return broken


BREAKS = {"modal_momentum_rate": _drop_frame_term, "modal_momentum": _drop_elastic_momentum}


@pytest.mark.parametrize("name", BREAKS)
def test_rate_check_fails_when_a_modal_term_is_broken(monkeypatch, name):
    model, s = _hub_beam(free=False, stiffening=True)
    monkeypatch.setattr(flex, name, BREAKS[name](getattr(flex, name)))
    assert rate_error(model, s) > 1e-3


def _run(model, s, formulation, engine, t_final=0.12, dt=4e-3):
    return kd.simulate(model, s, t_final, dt, formulation=formulation, engine=engine,
                       progress=False)  # fmt: skip


def test_msd_and_kane_trajectories_agree():
    """Dense MSD and dense Kane integrate the same motion, to RK4's error (the two
    differ by 1e-9 in q and 4e-8 in u here, 20 steps of 4 ms; a term of the rates
    wrong by 1e-3 would show at 1e-4; at 2 ms they differ 16 times less)."""
    model, s = _hub_beam(free=False, stiffening=True, gravity=(0.0, 0.0, -9.81))
    a, b = _run(model, s, "msd", "dense", 0.08), _run(model, s, "kane", "dense", 0.08)
    assert a.u.shape == b.u.shape == (len(a.t), model.n_total)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-7)
    np.testing.assert_allclose(a.u, b.u, rtol=0, atol=1e-6 * np.abs(b.u).max())
    assert a.momenta is not None and a.momenta.shape == (len(a.t), model.n_total)


def drifts(model, tr):
    """Relative drifts of H, P (kd.momentum: from q and u, elastic motion included) and
    of the energy with strain energy, over the run ``tr``."""
    s0, s1 = tr.state(0), tr.state(-1)
    (P0, H0), (P1, H1) = kd.momentum(model, s0), kd.momentum(model, s1)
    E0 = kd.kinetic_energy(model, s0) + kd.potential_energy(model, s0)
    E1 = kd.kinetic_energy(model, s1) + kd.potential_energy(model, s1)
    dH = np.abs(H1 - H0).max() / np.abs(H0).max()
    dP = np.abs(P1 - P0).max() / np.abs(P0).max()
    return dH, dP, abs(E1 - E0) / abs(E0)


@pytest.mark.parametrize("stiffening", [False, True])
def test_torque_free_hub_and_beam_keeps_H_and_P_to_round_off(stiffening):
    """The free root's states are total H (about the moving mass centre, which the
    beam's deflection shifts) and P: the speeds recovered from them keep kd.momentum's
    H and P to round-off; energy (strain energy included) to RK4's accuracy (1e-7
    here: 30 steps of 4 ms)."""
    model, s = _hub_beam(stiffening=stiffening)
    tr = _run(model, s, "msd", "dense")
    dH, dP, dE = drifts(model, tr)
    assert dH < 1e-12 and dP < 1e-12
    assert dE < 1e-6
    idx = model.speeds("root")
    assert np.ptp(tr.momenta[:, idx], axis=0).max() == 0.0  # the states themselves


def test_energy_check_fails_when_the_modal_rate_is_broken(monkeypatch):
    model, s = _hub_beam()
    monkeypatch.setattr(flex, "modal_momentum_rate", _drop_frame_term(flex.modal_momentum_rate))
    tr = _run(model, s, "msd", "dense")
    assert drifts(model, tr)[2] > 1e-5  # 5e-5: 500 times the sound run's


def test_modal_damping_lowers_the_energy_in_msd():
    model, s = _hub_beam(damping=0.05)
    tr = _run(model, s, "msd", "dense")
    dH, dP, _ = drifts(model, tr)
    s0, s1 = tr.state(0), tr.state(-1)
    E0 = kd.kinetic_energy(model, s0) + kd.potential_energy(model, s0)
    E1 = kd.kinetic_energy(model, s1) + kd.potential_energy(model, s1)
    assert E1 < E0 - 1e-4 and dH < 1e-12 and dP < 1e-12  # internal: momenta kept


@pytest.mark.parametrize("case", CASES)
def test_native_msd_equals_dense_msd(case):
    """The native kernel traces Recursion.run_msd (the condensed modes of
    flex_recursion, the modal momentum rates of kanedyn.spatial.modal); the dense code
    sums over the bodies: their rates and recovered speeds agree to round-off."""
    native_msd_equals_dense(*_hub_beam(**CASES[case]), speeds_atol=1e-13)


def native_msd_equals_dense(model, s, speeds_atol):
    """The native MSD kernel's rates equal the dense engine's to 1e-12 of their size at
    ``s``, and its recovered speeds are ``s.u`` to ``speeds_atol``."""
    dense = System(model, Formulation.MSD, None)
    native = System(model, Formulation.MSD, None, compiled=True)
    assert native.cm is not None and native.cm.native is not None
    x = dense.initial(s)
    nq = model.nq_total
    a, b = dense(0.0, x), native(0.0, x)
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())
    np.testing.assert_allclose(native.speeds(x[:nq], x[nq:]), s.u, atol=speeds_atol)


def runs_equal(a, b):
    """Two runs of one model on different engines agree to round-off."""
    assert b.engine != a.engine
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.u, a.u, rtol=0, atol=1e-11)
    np.testing.assert_allclose(b.momenta, a.momenta, rtol=0, atol=1e-11)


def test_native_msd_run_equals_the_dense_run():
    model, s = _hub_beam(free=False, stiffening=True, gravity=(0.0, 0.0, -9.81))
    runs_equal(_run(model, s, "msd", "dense", 0.08), _run(model, s, "msd", "auto", 0.08))


def test_momentum_check_fails_when_the_displaced_mass_is_left_out(monkeypatch):
    """The free root's H is about the mass centre that the deflection moves: taken about
    the undeformed one, the speeds recovered from the constant states lose kd.momentum's
    H (the elastic motion is still in the mass matrix)."""
    model, s = _hub_beam()
    monkeypatch.setattr(msd, "displaced_first_moments", lambda m, kin, eta: np.zeros((m.nb, 3)))
    tr = _run(model, s, "msd", "dense")
    assert drifts(model, tr)[0] > 1e-6


def test_momentum_states_in_a_central_field_hold_the_displaced_mass(monkeypatch):
    """In a central field the modal momentum rates gain the field's modal forces, and the
    body's external wrench the field's force and moment on the displaced mass
    (kanedyn.spatial.modal.modal_central_forces): the rates equal the central
    differences of the momenta along Kane's motion (which has the same field terms),
    dense and native; without the field terms they do not."""
    from tests.test_flex import _orbiting_hub_beam

    model, s = _orbiting_hub_beam()
    assert rate_error(model, s) < 1e-9
    dense = System(model, Formulation.MSD, None)
    native = System(model, Formulation.MSD, None, compiled=True)
    x = dense.initial(s)
    a, b = dense(0.0, x), native(0.0, x)
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())
    real = flex.body_momenta

    def without_field(*args):
        return [attrs.evolve(b, force=0 * b.force, torque=0 * b.torque) for b in real(*args)]

    monkeypatch.setattr(flex, "body_momenta", without_field)
    assert rate_error(model, s) > 1e-4


def test_energy_momentum_refuses_a_flexible_body_in_a_central_field():
    from tests.test_flex import _orbiting_hub_beam

    model, s = _orbiting_hub_beam()
    with pytest.raises(kd.ModelError, match="central field on rigid bodies only"):
        kd.simulate(model, s, 0.1, 0.05, method="energy-momentum")
