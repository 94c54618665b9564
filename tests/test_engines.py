"""The compiled and dense engines inside simulate, simulate_ensemble and the CLI: the
choice of engine, and agreement of whole runs (loads, controllers, lock events,
ensembles) between the two. The per-state agreement is in tests/test_compiled.py."""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
import kanedyn.simulation.system
from kanedyn.errors import ModelError
from kanedyn.model.plan import params_of
from kanedyn.simulation.run_loops import LOOPS
from kanedyn.simulation.run_plan import Loop
from tests.strategies import random_loads, random_state, tree


def _tree(springs: bool = True, gravity: bool = True):
    model = tree([0, 0, 1], ["free", "hinge", "gimbal2", "gimbal_slider"],
                 ["123", "231", "312", "321"], seed=5, springs=springs, embedded=True,
                 gravity=gravity)  # fmt: skip
    return model, random_state(model, np.random.default_rng(6))


def _spherical_spring():
    model = tree([0], ["free", "spherical"], ["123", "123"], seed=3, springs=True)
    assert np.any(model.joints[1].stiffness[:3])  # the spring is on the spherical joint
    return model, random_state(model, np.random.default_rng(4))


def _runs(model, state, t_final=0.5, dt=0.01, **kw):
    return [kd.simulate(model, state, t_final, dt, progress=False, engine=e, **kw)
            for e in ("dense", "compiled")]  # fmt: skip


def _assert_same(a, b, tol=1e-10):
    assert a.t.shape == b.t.shape
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=tol)
    np.testing.assert_allclose(b.u, a.u, rtol=0, atol=tol * max(1.0, np.abs(a.u).max()))


# --------------------------------------------------------------------------- choice
def test_bad_engine_name_is_a_model_error():
    model, state = _tree()
    with pytest.raises(ModelError, match="engine must be one of"):
        kd.simulate(model, state, 0.1, 0.01, engine="fast", progress=False)


@pytest.mark.parametrize("kind", ["records", "callable"])
def test_msd_runs_with_loads_agree(kind):
    """MSD with loads: the kernel gives the speeds, the loads are resolved at them, and
    the kernel with load inputs gives the momentum rates."""
    model, state = _tree()
    records = random_loads(model, np.random.default_rng(1))
    if kind == "records":
        loads = records
    else:

        def loads(t, model, state, kin):  # depends on the speeds
            return [kd.JointLoad("j1", [-0.5 * state.u[model.speeds("j1")[0]]]), *records]

    dense, compiled = _runs(model, state, loads=loads, formulation="msd")
    _assert_same(dense, compiled)
    np.testing.assert_allclose(compiled.momenta, dense.momenta, rtol=0, atol=1e-10)
    free, _ = _runs(model, state, formulation="msd")
    assert np.max(np.abs(free.u[-1] - dense.u[-1])) > 1e-3  # the loads matter


def test_msd_controlled_slew_agrees():
    case = kd.examples.wheel_slew(angle_deg=10.0)
    dense, compiled = _runs(case.model, case.state, t_final=1.0, dt=0.05,
                            controller=case.controller, formulation="msd")  # fmt: skip
    _assert_same(dense, compiled)


def test_compiled_spherical_spring_agrees():
    model, state = _spherical_spring()
    assert kd.compiled.supports(model) is None
    dense, compiled = _runs(model, state)
    _assert_same(dense, compiled)


def test_auto_falls_back_to_dense_when_the_model_cannot_be_compiled(monkeypatch):
    model, state = _tree()

    def forbidden(*args, **kwargs):
        raise AssertionError("compiled engine used for a model it does not support")

    monkeypatch.setattr(kanedyn.simulation.system, "supports", lambda *a, **k: "a reason")
    monkeypatch.setattr(kanedyn.simulation.system, "compile_model", forbidden)
    traj = kd.simulate(model, state, 0.05, 0.01, progress=False)
    assert np.all(np.isfinite(traj.u))


def test_auto_uses_the_compiled_engine(monkeypatch):
    model, state = _tree()
    calls = []
    # the compiled engine's loop: native code when llvmlite is there, else Python floats
    native = kd.compile_model(model).backend == "native"
    loop = Loop.RK4_NATIVE if native else Loop.RK4_COMPILED
    original = LOOPS[loop]

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setitem(LOOPS, loop, spy)
    kd.simulate(model, state, 0.05, 0.01, progress=False)
    assert calls == [1]


# --------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("method", ["rk4", "DOP853"])
def test_free_runs_agree(method):
    model, state = _tree()
    dense, compiled = _runs(model, state, method=method)
    _assert_same(dense, compiled)
    assert np.ptp(dense.u) > 0.1  # the run moves


@pytest.mark.parametrize("kind", ["records", "callable"])
def test_runs_with_loads_agree(kind):
    model, state = _tree()
    records = random_loads(model, np.random.default_rng(8))
    assert records
    if kind == "records":
        loads = records
    else:

        def loads(t, model, state, kin):
            return [kd.Torque(model.bodies[-1].name, [np.sin(t), 0.5, -0.2]), *records]

    dense, compiled = _runs(model, state, loads=loads)
    _assert_same(dense, compiled)
    free, _ = _runs(model, state)
    assert np.max(np.abs(free.u[-1] - dense.u[-1])) > 1e-3  # the loads matter


@pytest.mark.parametrize("method", ["rk4", "DOP853"])
def test_msd_runs_agree(method):
    model, state = _tree()
    dense, compiled = _runs(model, state, method=method, formulation="msd")
    _assert_same(dense, compiled)
    kane = kd.simulate(model, state, 0.5, 0.01, progress=False, method=method)
    _assert_same(kane, compiled, tol=1e-5)  # the other formulation: same motion, to the step error


def test_msd_runs_with_lock_events_agree():
    model, state = _tree()
    events = [kd.Lock(0.1, "j1"), kd.Lock(0.2, "j2", 1), kd.Unlock(0.35, "j1")]
    dense, compiled = _runs(model, state, events=events, formulation="msd")
    _assert_same(dense, compiled)


def test_runs_with_lock_events_agree():
    model, state = _tree()
    events = [kd.Lock(0.1, "j1"), kd.Lock(0.2, "j2", 1), kd.Unlock(0.35, "j1")]
    dense, compiled = _runs(model, state, events=events)
    _assert_same(dense, compiled)
    i = np.searchsorted(dense.t, 0.25)
    assert dense.u[i, model.speeds("j1")[0]] == 0.0


def test_controlled_slew_agrees():
    case = kd.examples.wheel_slew(angle_deg=10.0)
    dense, compiled = _runs(case.model, case.state, t_final=1.0, dt=0.05,
                            controller=case.controller)  # fmt: skip
    _assert_same(dense, compiled)


def test_explorer1_run_agrees():
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    dense, compiled = _runs(model, state, t_final=50.0, dt=0.1, output_every=5.0)
    _assert_same(dense, compiled, tol=1e-12)


# --------------------------------------------------------------------------- ensembles
def _states(model, B, seed):
    rng = np.random.default_rng(seed)
    members = [random_state(model, rng) for _ in range(B)]
    return kd.States(np.array([s.q for s in members]), np.array([s.u for s in members]))


def test_compiled_ensemble_equals_dense_ensemble_and_single_runs():
    model, _ = _tree()
    states = _states(model, 6, 9)
    dense = kd.simulate_ensemble(model, states, 0.3, 0.01, engine="dense")
    compiled = kd.simulate_ensemble(model, states, 0.3, 0.01)
    np.testing.assert_allclose(compiled.q, dense.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(compiled.u, dense.u, rtol=0, atol=1e-9)
    for b in (0, 5):
        one = kd.simulate(model, kd.State(states.q[b], states.u[b]), 0.3, 0.01, progress=False)
        np.testing.assert_allclose(compiled.q[:, b], one.q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(compiled.u[:, b], one.u, rtol=0, atol=1e-12)


def _dispersed(model, B, seed):
    rng = np.random.default_rng(seed)
    pa = params_of(model)
    return kd.ModelBatch.dispersed(
        model,
        mass=pa.mass * rng.uniform(0.8, 1.2, (B, model.nb)),
        com=pa.com + rng.uniform(-0.05, 0.05, (B, model.nb, 3)),
        stiffness=pa.stiffness * rng.uniform(0.5, 1.5, (B, model.n)),
        gravity=np.tile(model.gravity, (B, 1)) * rng.uniform(0.5, 1.5, (B, 1)),
    )


def test_compiled_model_batch_equals_dense_and_single_members():
    model, _ = _tree()
    B = 5
    batch = _dispersed(model, B, 2)
    states = _states(model, B, 3)
    cm = kd.compile_model(batch)
    assert cm.param_inputs  # the dispersed entries are inputs, not constants
    assert {f for f, _ in cm.param_inputs} == {"mass", "com", "stiffness", "gravity"}
    got = cm.forward_dynamics(states)
    np.testing.assert_allclose(got, kd.forward_dynamics(batch, states), rtol=0, atol=1e-11)
    for b in (0, 3):
        member = kd.compile_model(batch.member(b))
        one = member.forward_dynamics(kd.State(states.q[b], states.u[b]))
        np.testing.assert_allclose(got[b], one, rtol=0, atol=1e-12)
    dense = kd.simulate_ensemble(batch, states, 0.3, 0.01, engine="dense")
    compiled = kd.simulate_ensemble(batch, states, 0.3, 0.01)
    np.testing.assert_allclose(compiled.q, dense.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(compiled.u, dense.u, rtol=0, atol=1e-9)
    assert np.ptp(compiled.u[-1], axis=0).max() > 1e-3  # the members differ


def test_model_batch_with_spherical_springs_is_compiled():
    """The spherical stiffness varies across the batch (a parameter input of the
    kernel): the compiled ensemble is the dense one."""
    model = tree([0], ["free", "spherical"], ["123", "123"], seed=3, springs=False)
    k = np.zeros((2, model.n))
    k[1, model.speeds("j1")] = 0.5  # member 1 has a spherical spring
    batch = kd.ModelBatch.dispersed(model, stiffness=k)
    states = _states(model, 2, 1)
    compiled = kd.simulate_ensemble(batch, states, 0.1, 0.01, engine="compiled")
    dense = kd.simulate_ensemble(batch, states, 0.1, 0.01, engine="dense")
    np.testing.assert_allclose(compiled.q, dense.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(compiled.u, dense.u, rtol=0, atol=1e-9)


# --------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("engine", ["dense", "compiled"])
def test_cli_engine_option(engine, tmp_path, capsys):
    from kanedyn.cli import main

    code = main(["simulate", "--t-final", "20", "--dt", "1", "--engine", engine, "--quiet",
                 "--out", str(tmp_path / engine)])  # fmt: skip
    assert code == 0
    assert (tmp_path / engine / "summary.json").exists()
    assert "Explorer-1" in capsys.readouterr().out
