"""Flexible bodies in closed loops on the compiled engine, its native RK4 loop,
ensembles and the C export (issue 29).

Oracle: the dense engine (:func:`kanedyn.forward_dynamics`: the loop rows over
``[u | s | ξ]`` and the flexible mass matrix by CRBA, solved by the speed partition),
an algorithm independent of the traced constraint force method on ABA with the modes
condensed (:func:`kanedyn.dynamics.loop_rows.flexible_accelerations`); and the loop
residuals of :func:`kanedyn.dynamics.loops.residuals`.
"""

from __future__ import annotations

import ctypes
import warnings

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import loops, msd
from kanedyn.errors import ModelError
from kanedyn.simulation.diagnose import StepSizeWarning
from tests.test_flex_events import _four_bar_with_beam
from tests.test_to_c import COMPILERS, compile_shared, needs_cc


@pytest.fixture(scope="module")
def four_bar():
    return _four_bar_with_beam()


def _states(model, s, count, seed=0):
    """Assembled states near ``s``: the crank's angle and rate and the modal
    coordinates and speeds drawn at random, the loop closed with the crank held."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        t = model.set_joint(s, "crank", angles=(rng.uniform(-np.pi, np.pi),),
                            rates=(rng.normal(0.0, 2.0),))  # fmt: skip
        t = model.set_modes(t, "beam", amplitudes=tuple(0.05 * rng.normal(size=2)),
                            rates=tuple(rng.normal(size=2)))  # fmt: skip
        out.append(model.assemble(t, fix=["crank"]))
    return out


def _run(model, s, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StepSizeWarning)
        return kd.simulate(model, s, 0.05, 0.0025, method="rk4", progress=False, **kw)


def test_native_kane_forward_dynamics_equals_the_dense_engine(four_bar):
    pytest.importorskip("llvmlite")
    model, s = four_bar
    cm = kd.compile_model(model, backend="native")
    for state in _states(model, s, 4):
        dense = kd.forward_dynamics(model, state)
        np.testing.assert_allclose(cm.forward_dynamics(state), dense, rtol=0, atol=1e-12)
        assert np.abs(dense[model.n :]).max() > 0.1  # the modes take part


def test_native_rk4_run_equals_the_dense_run_and_keeps_the_loop_closed(four_bar):
    pytest.importorskip("llvmlite")
    model, s = four_bar
    native = _run(model, s, engine="compiled")
    dense = _run(model, s, engine="dense")
    assert native.engine.startswith("native")
    np.testing.assert_allclose(native.q, dense.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(native.u, dense.u, rtol=0, atol=1e-12)
    for q, u in zip(native.q, native.u, strict=True):
        assert max(loops.residuals(model, q, u)) < 1e-12
    assert np.abs(native.q[-1, model.nq :] - s.q[model.nq :]).max() > 1e-3  # modes moved


def test_an_ensemble_of_flexible_closed_chains_runs_compiled(four_bar):
    """Each member of a compiled ensemble equals its own kd.simulate on the dense
    engine."""
    model, s = four_bar
    states = _states(model, s, 2, seed=1)
    q0 = np.stack([st.q for st in states])
    u0 = np.stack([st.u for st in states])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StepSizeWarning)
        ens = kd.simulate_ensemble(model, kd.States(q0, u0), 0.05, 0.0025, engine="compiled")
    for b, st in enumerate(states):
        dense = _run(model, st, engine="dense")
        np.testing.assert_allclose(ens.q[:, b], dense.q, rtol=0, atol=1e-11)
        np.testing.assert_allclose(ens.u[:, b], dense.u, rtol=0, atol=1e-11)


def test_native_msd_equals_the_dense_msd(four_bar):
    """The speeds of the momentum states at assembled states are the state's speeds
    (joints and modes, the loop closed with the modes condensed), and a native MSD run
    equals the dense MSD run, with the loop closed."""
    pytest.importorskip("llvmlite")
    model, s = four_bar
    cm = kd.compile_model(model, formulation="msd", backend="native")
    nq, n = model.nq_total, model.n_total
    for state in _states(model, s, 3, seed=3):
        out = np.asarray(cm.rhs(state.q.tolist(), msd.momenta(model, state).tolist()))
        np.testing.assert_allclose(out[n + nq :], state.u, rtol=0, atol=1e-12)
    native = _run(model, s, engine="compiled", formulation="msd")
    dense = _run(model, s, engine="dense", formulation="msd")
    assert native.engine.startswith("native")
    np.testing.assert_allclose(native.q, dense.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(native.u, dense.u, rtol=0, atol=1e-12)
    for q, u in zip(native.q, native.u, strict=True):
        assert max(loops.residuals(model, q, u)) < 1e-12


def test_a_loop_closing_on_the_beam_is_refused_by_name(four_bar):
    model, _ = four_bar
    loop = attrs.evolve(model.loops[0], name="tip", inner="beam")
    bent = kd.Model(model.bodies, model.joints, loops=[loop], gravity=(0.0, 0.0, 0.0))
    with pytest.raises(ModelError, match="loop 'tip' closes on flexible body 'beam'"):
        kd.compile_model(bent)


@needs_cc
@pytest.mark.parametrize("compiler", COMPILERS)
def test_c_rates_equal_the_dense_engine(four_bar, compiler, tmp_path):
    """The C export's rates at assembled states equal the dense engine's; its step
    projects onto the loop (the residuals stay at round-off)."""
    model, s = four_bar
    h, c = kd.codegen.to_c(model, tmp_path, prefix="fl")
    lib = compile_shared(compiler, [c], tmp_path / "libfl.so")
    nq, n = model.nq_total, model.n_total
    p = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    for state in _states(model, s, 3, seed=2):
        x = np.concatenate((state.q, state.u))
        out = np.empty(n + nq)
        assert lib.fl_rhs(p(x), p(np.zeros(model.n)), p(out)) == 0
        dense = kd.forward_dynamics(model, state)
        np.testing.assert_allclose(out[:n], dense, rtol=0, atol=1e-12)
    lib.fl_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    x = np.concatenate((s.q, s.u))
    for _ in range(10):
        assert lib.fl_step(p(x), p(np.zeros(model.n)), 0.0025) == 0
    assert max(loops.residuals(model, x[:nq], x[nq:])) < 1e-12
    dense = _run(model, s, engine="dense")
    np.testing.assert_allclose(x[:nq], dense.q[10], rtol=0, atol=1e-12)
