"""Flexible bodies in the symbolic derivations (kd.symbolic.kane, kd.symbolic.lagrange).

Oracles: sympy.physics.mechanics KanesMethod on a body of particles whose displacements
are the modes (tests.sympy_oracle.modal_particle_hub: its own frames and
differentiation), the numeric dense engine (kd.mass_matrix, kd.forcing), and Lagrange's
equations from the kinetic and strain energies, which do not use the velocity terms of
Kane's modal forces (kd.symbolic.compare).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.symbolic import flex as symflex
from kanedyn.symbolic.stages import Formula
from tests.sympy_oracle import modal_particle_hub


def _hub_beam(n_modes=1, directions=(1,), stiffening=True, hub_dof=1, damping_ratio=0.02):
    """A hub turning about z (or a 2-DOF gimbal) with a cantilever welded at an offset,
    under gravity: the stiffened beam's geometric stiffness and foreshortening are in."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, 40.0, n_modes=n_modes, directions=directions,
                        stiffening=stiffening, damping_ratio=damping_ratio)  # fmt: skip
    root = (kd.Joint.revolute("h", None, "hub", axis=3) if hub_dof == 1 else
            kd.Joint("h", None, "hub", rot_type="gimbal", rot_dof=2, rot_seq="312"))  # fmt: skip
    weld = kd.Joint.weld("w", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                         inner_rotation=kd.euler_to_dcm("123", (0.0, 0.0, 0.2)))  # fmt: skip
    return kd.Model([hub, beam], [root, weld], gravity=(0.0, -9.81, 0.5))


def _states(model, rng, k):
    for _ in range(k):
        yield kd.State(rng.uniform(-0.8, 0.8, model.nq_total), rng.uniform(-1, 1, model.n_total))


def _against_oracle_and_dense(model, oracle, rng, k=3):
    eom = kd.symbolic.kane(model)
    assert len(eom.q) == model.nq_total and len(eom.u) == model.n_total
    f = eom.lambdify()
    for state in _states(model, rng, k):
        M, F = f(state.q, state.u)
        Ms, fs = oracle(state.q, state.u)
        np.testing.assert_allclose(M, Ms, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, fs, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(M, kd.mass_matrix(model, state), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, kd.forcing(model, state), rtol=1e-9, atol=1e-9)
    return eom


def test_one_mode_body_kane_equals_sympy_kanes_method_and_the_dense_engine():
    rng = np.random.default_rng(11)
    model, oracle = modal_particle_hub(rng, n_modes=1, n_particles=3, hub_dof=1)
    eom = _against_oracle_and_dense(model, oracle, rng)
    assert [str(x) for x in eom.q] == ["q_root_0", "eta_flex_0"]
    assert [str(x) for x in eom.u] == ["u_root_0", "xi_flex_0"]
    assert [str(x) for x in eom.u_dot] == ["udot_root_0", "xidot_flex_0"]
    assert list(eom.kinematic_equations) == [eom.u[0], eom.u[1]]  # η̇ = ξ


@pytest.mark.slow
def test_two_mode_body_kane_equals_sympy_kanes_method_and_the_dense_engine():
    rng = np.random.default_rng(12)
    model, oracle = modal_particle_hub(rng, n_modes=2, n_particles=3, hub_dof=2)
    _against_oracle_and_dense(model, oracle, rng, k=2)


def test_stiffened_beam_kane_equals_the_dense_engine():
    """The beam's geometric stiffness (centrifugal and gravity preloads, foreshortening)
    is the shared modal code run on sympy: the same numbers as the dense engine's."""
    model = _hub_beam(n_modes=1, directions=(1, 2))
    f = kd.symbolic.kane(model).lambdify()
    for state in _states(model, np.random.default_rng(13), 3):
        M, F = f(state.q, state.u)
        np.testing.assert_allclose(M, kd.mass_matrix(model, state), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, kd.forcing(model, state), rtol=1e-9, atol=1e-9)


def test_lagrange_equals_kane_for_a_one_mode_beam_proven_symbolically():
    model = _hub_beam()
    eom, lag = kd.symbolic.kane(model), kd.symbolic.lagrange(model)
    assert list(lag.q) == list(eom.q) and list(lag.u) == list(eom.u)
    rep = kd.symbolic.compare(eom, lag, time_budget=30)
    assert rep.equivalent and rep.proven, str(rep)
    assert rep.max_numeric_error < 1e-10
    # the energies: T includes the elastic motion, U the strain energy
    state = kd.State(np.array([0.3, 0.05]), np.array([0.7, -0.4]))
    sub = dict(zip([*lag.q, *lag.u], [*state.q, *state.u], strict=True))
    T = float(lag.kinetic_energy.xreplace(sub))
    U = float(lag.potential_energy.xreplace(sub))
    np.testing.assert_allclose(T, kd.kinetic_energy(model, state), rtol=1e-12)
    np.testing.assert_allclose(U, kd.potential_energy(model, state), rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_lagrange_equals_kane_for_a_two_mode_beam_on_a_gimbal():
    model = _hub_beam(n_modes=1, directions=(1, 2), hub_dof=2)
    rep = kd.symbolic.compare(kd.symbolic.kane(model), kd.symbolic.lagrange(model),
                              time_budget=1, samples=3)  # fmt: skip
    assert rep.equivalent and not rep.differing, str(rep)
    assert rep.max_numeric_error < 1e-9


def test_the_lagrange_check_fails_when_kanes_modal_velocity_terms_are_broken(monkeypatch):
    """Lagrange's Coriolis terms come from the energy, not from the modal forces: dropping
    the terms in ξ of Kane's (the Coriolis coupling 2 ω × P_Ψ ξ, the damping, ...) makes
    the two differ."""
    real = symflex.modal_forces

    def without_xi(md, eta, xi, w, g):
        return real(md, eta, 0 * xi, w, g)

    monkeypatch.setattr(symflex, "modal_forces", without_xi)
    model = _hub_beam()
    rep = kd.symbolic.compare(kd.symbolic.kane(model), kd.symbolic.lagrange(model),
                              time_budget=2, samples=3)  # fmt: skip
    assert not rep.equivalent and rep.differing


def test_one_mode_body_stages_are_readable_and_unfold_to_the_equations():
    """The stages name the modal partials W, the blocks of ΔM, b, F^e and F^{*e}; the
    rows F_r + F*_r, unfolded, equal the dense engine's forcing - M u̇."""
    model = _hub_beam(stiffening=False)
    eom = kd.symbolic.kane(model)
    st = eom.stages()
    titles = [s.title for s in st.stages]
    assert titles[3] == "Flexible bodies" and titles[4].startswith("Generalized")
    flex = dict(st.stages[3].entries)
    b = "\\mathrm{beam}"
    for lhs in (f"W_{{{b},1}}", f"W_{{{b},2}}", f"\\Delta J_{{{b}}}", f"c_{{f,{b}}}",
                f"\\bar H_{{{b}}}", f"\\bar P_{{{b}}}", f"M_{{\\Psi,{b}}}", f"b_{{{b}}}",
                f"F^e_{{{b}}}"):  # fmt: skip
        assert lhs in flex, lhs
    assert isinstance(flex[f"F^{{*e}}_{{{b}}}"], Formula)
    # the one-mode beam's modal stiffness K_Ψ = ω₁² M_Ψ is written in F^e
    md = model.bodies[1].modes
    elastic = st.unfold(flex[f"F^e_{{{b}}}"][6])
    eta, xi = eom.q[1], eom.u[1]
    np.testing.assert_allclose(float(elastic.diff(eta)), -md.stiffness[0, 0], rtol=1e-12)
    np.testing.assert_allclose(float(elastic.diff(xi)), -md.damping[0, 0], rtol=1e-12)
    text = str(st)
    assert "Flexible bodies" in text and "η̇_beam_0" in text
    rows = dict(st.stages[4].entries)
    exprs = [st.unfold(rows[f"F_{{{r + 1}}}"]) + st.unfold(rows[f"F^*_{{{r + 1}}}"])
             for r in range(2)]  # fmt: skip
    fn = sm.lambdify([list(eom.q), list(eom.u), list(eom.u_dot)], exprs)
    rng = np.random.default_rng(14)
    for state in _states(model, rng, 2):
        acc = rng.uniform(-1, 1, 2)
        got = np.array(fn(state.q, state.u, acc), dtype=float)
        want = kd.forcing(model, state) - kd.mass_matrix(model, state) @ acc
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert "xi_beam_0" in eom.table()


def test_symbolic_kane_takes_no_reactions_with_flexible_bodies_yet():
    with pytest.raises(kd.ModelError, match=r"reactions with flexible bodies \['beam'\]"):
        kd.symbolic.kane(_hub_beam(), reactions=["w"])


def test_linearized_symbolic_kane_of_a_flexible_model_equals_the_numeric_linearization():
    """kd.linearize of the symbolic equations (their derivatives) against kd.linearize of
    the model (the compiled tape's derivatives of the dense equations) about a spin."""
    model = _hub_beam(stiffening=True)
    eom = kd.symbolic.kane(model)
    state = kd.State(np.array([0.4, 0.0]), np.array([0.7, 0.0]))
    op = dict(zip([*eom.q, *eom.u], [*state.q, *state.u], strict=True))
    A_sym = np.array(kd.linearize(eom, op).A, dtype=float)
    A_num = np.asarray(kd.linearize(model, state).A, dtype=float)
    np.testing.assert_allclose(A_sym, A_num, rtol=1e-6, atol=1e-6)
