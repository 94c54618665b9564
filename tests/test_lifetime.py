"""A model the user deletes is freed: nothing that kanedyn derives from a model (its
compiled equations, plan, parameters, momentum roots) keeps it alive after a run."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.model.batch import ModelBatch, States
from kanedyn.model.plan import params_of


def _freed(make_model, use) -> bool:
    """Whether the model built by ``make_model()`` is collected after ``use(model)``
    and the deletion of every reference the test holds."""
    model = make_model()
    ref = weakref.ref(model)
    result = use(model)
    del model, result
    gc.collect()
    return ref() is None


def _explorer1():
    return kd.examples.explorer1()


def _simulate(model, **kw):
    state = kd.examples.explorer1_state(model)
    return kd.simulate(model, state, 0.05, 0.01, progress=False, **kw)


def test_compile_model_frees_the_model():
    assert _freed(_explorer1, kd.compile_model)
    assert _freed(_explorer1, lambda m: kd.compile_model(m, formulation="msd"))
    assert _freed(_explorer1, lambda m: kd.compile_model(m, [7, 8]))


def test_a_compiled_model_keeps_its_model_while_it_is_held():
    model = _explorer1()
    ref = weakref.ref(model)
    cm = kd.compile_model(model)
    del model
    gc.collect()
    assert ref() is cm.model
    assert kd.compile_model(cm.model) is cm
    del cm
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("engine", ["compiled", "dense"])
@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_simulate_frees_the_model(engine, formulation):
    assert _freed(_explorer1, lambda m: _simulate(m, engine=engine, formulation=formulation))


@pytest.mark.parametrize("engine", ["compiled", "dense"])
@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_simulate_with_loads_events_and_adaptive_steps_frees_the_model(engine, formulation):
    torque = [kd.Torque("hub", (0.0, 0.0, 0.1))]
    events = [kd.Lock(0.02, "hinge1", 1), kd.Unlock(0.04, "hinge1", 1)]
    assert _freed(
        _explorer1,
        lambda m: _simulate(m, engine=engine, formulation=formulation, loads=torque,
                            events=events),
    )  # fmt: skip
    assert _freed(
        _explorer1,
        lambda m: _simulate(m, engine=engine, formulation=formulation, method="RK45"),
    )


@pytest.mark.parametrize("engine", ["compiled", "dense"])
def test_simulate_ensemble_frees_the_model_and_the_batch(engine):
    def run(model):
        states = States.repeat(kd.examples.explorer1_state(model), 3)
        return kd.simulate_ensemble(model, states, 0.05, 0.01, engine=engine)

    assert _freed(_explorer1, run)

    def run_batch(model):
        batch = ModelBatch.dispersed(model, mass=params_of(model).mass * np.array([[1.0], [1.1]]))
        kd.simulate_ensemble(batch, States.repeat(kd.examples.explorer1_state(model), 2),
                             0.05, 0.01, engine=engine)  # fmt: skip
        return weakref.ref(batch)

    model = _explorer1()
    ref = weakref.ref(model)
    batch_ref = run_batch(model)
    del model
    gc.collect()
    assert ref() is None and batch_ref() is None


def test_a_used_model_pickles_without_what_was_derived_from_it():
    """What is derived from a model lives on it but is not pickled: a model that has been
    simulated (plan, parameters and compiled kernels built) still pickles, and the copy
    rebuilds them and gives the same dynamics."""
    import pickle

    model = _explorer1()
    state = kd.examples.explorer1_state(model)
    kd.simulate(model, state, t_final=0.5, dt=0.1, progress=False)
    kd.forward_dynamics(model, state)
    copy = pickle.loads(pickle.dumps(model))
    assert copy is not model
    np.testing.assert_array_equal(
        kd.forward_dynamics(copy, state), kd.forward_dynamics(model, state)
    )
