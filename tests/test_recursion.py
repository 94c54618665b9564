"""The tree recursions written once on scalars (kanedyn.dynamics.recursion): ABA, RNEA
and the MSD rates, run on floats (``kd.aba``), on the tracer (the compiled engine) and
on sympy symbols. The oracles are different algorithms for the same quantities: the
dense engine's Kane sums solved by Cholesky (``kd.forward_dynamics``), the dense MSD
rates (``kd.msd``), and Kane's equations ``Fr + Fr* = 0``."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from hypothesis import given
from hypothesis import strategies as st

import kanedyn as kd
from kanedyn import codegen
from kanedyn.compiled.kernels import traced
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import applied_loads
from kanedyn.dynamics.recursion import Recursion
from kanedyn.symbolic.arithmetic import SYMPY
from tests.strategies import SETTINGS, random_loads, random_state, tree, trees

SEEDS = st.integers(0, 2**32 - 1)


@SETTINGS
@given(model=trees(max_bodies=5), seed=SEEDS)
def test_aba_equals_crba_and_cholesky_on_random_trees(model, seed):
    """ABA and the Kane sums solved by Cholesky: two algorithms, one answer, with
    springs, dampers, embedded momentum, gravity and random external loads."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    loads = random_loads(model, rng)
    expected = kd.forward_dynamics(model, state, loads)
    scale = 1.0 + np.abs(expected).max()
    np.testing.assert_allclose(kd.aba(model, state, loads), expected, atol=1e-9 * scale)


@SETTINGS
@given(model=trees(max_bodies=5), seed=SEEDS)
def test_rnea_residual_vanishes_at_the_aba_solution_and_only_there(model, seed):
    """RNEA at ABA's accelerations gives ``Sᵀf - Q = 0`` (Kane's ``Fr + Fr* = 0``); at
    other accelerations it gives ``M Δν̇`` with the dense mass matrix."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    rec = Recursion.at_state(model, state)
    geo, c, p, a_N = rec.terms()
    Q = rec.generalized_forces()
    nudot = rec.aba(geo, c, p, Q, a_N)
    residual = np.array(rec.inverse_dynamics(geo, c, p, Q, a_N, nudot))
    M = kd.mass_matrix(model, state)
    scale = 1.0 + np.abs(M).max() * (1.0 + np.abs(nudot).max())
    np.testing.assert_allclose(residual, 0.0, atol=1e-9 * scale)
    delta = rng.normal(size=model.n)
    shifted = np.array(rec.inverse_dynamics(geo, c, p, Q, a_N, list(np.add(nudot, delta))))
    np.testing.assert_allclose(shifted, M @ delta, atol=1e-9 * scale)


@SETTINGS
@given(model=trees(max_bodies=4), seed=SEEDS)
def test_msd_rates_of_the_recursion_equal_the_dense_msd_rates(model, seed):
    """The momentum-state rates and the speeds recovered from the states, by the
    recursion (ABA at zero speed; subtree momenta in Go) and by the dense engine
    (Cholesky; subtree sums in N)."""
    rng = np.random.default_rng(seed)
    state = random_state(model, rng)
    y = kd.msd.momenta(model, state)
    kin = kinematics_at(model, state.q, state.u)
    L = applied_loads(model, state, kin, None, 0.0)
    expected = kd.msd.rates(model, kin, L)
    loads = tuple(np.asarray(x).tolist() for x in (L.T, L.F, L.Q))
    ydot, _, nu = Recursion(model, state.q.tolist(), y.tolist(), loads=loads).run_msd()
    np.testing.assert_allclose(nu, state.u, atol=1e-9 * (1 + np.abs(state.u).max()))
    np.testing.assert_allclose(ydot, expected, atol=1e-9 * (1 + np.abs(expected).max()))


def test_the_recursion_gives_the_same_numbers_on_every_arithmetic():
    """One ABA on floats, recorded on the tape (generated Python run on floats), and on
    sympy symbols for q and u (then the numbers substituted)."""
    model = tree([0], ["hinge", "slider1"], ["231", "312"], seed=5, gravity=True)
    rng = np.random.default_rng(9)
    state = random_state(model, rng)
    numbers = np.array(Recursion(model, state.q.tolist(), state.u.tolist()).run()[0])
    np.testing.assert_allclose(numbers, kd.forward_dynamics(model, state), atol=1e-11)

    tr = traced(model, frozenset(), False, False)
    fn = codegen.build(
        codegen.source(tr.tape, "f", tr.args, tr.outputs), "f", codegen.SCALAR_NAMESPACE
    )
    on_tape = np.array(fn(*state.q, *state.u), dtype=float)[: model.n]
    np.testing.assert_allclose(on_tape, numbers, atol=1e-13)

    qs = sm.symbols(f"q0:{model.nq}", real=True)
    us = sm.symbols(f"u0:{model.n}", real=True)
    symbolic = Recursion(model, qs, us, ar=SYMPY).run()[0]
    evaluate = sm.lambdify([*qs, *us], symbolic, cse=True)
    np.testing.assert_allclose(evaluate(*state.q, *state.u), numbers, atol=1e-11)


def test_aba_refuses_what_is_not_a_tree_term():
    """Closed loops are refused with the reason, not approximated (geared rotors are a
    term of the recursion: tests/test_rotors_native.py)."""
    four_bar = kd.examples.four_bar()
    with pytest.raises(kd.ModelError, match="closed loops"):
        kd.aba(four_bar, four_bar.initial_state())
