"""Options as objects: the formulation, engine and method are parsed once, on entry to
simulate, simulate_ensemble and compile_model, from strings or the objects themselves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.integrate

import kanedyn as kd
import kanedyn.compiled
import kanedyn.simulation.system
from kanedyn.errors import ModelError
from kanedyn.model.batch import States
from kanedyn.simulation.options import RK4, Engine, Formulation, Method


def _pendulum():
    model = kd.examples.double_pendulum()
    return model, model.set_joint(model.initial_state(), model.joints[0].name, angles=[0.3])


@pytest.mark.parametrize(
    ("parse", "text", "member"),
    [
        (Formulation.parse, "kane", Formulation.KANE),
        (Formulation.parse, "msd", Formulation.MSD),
        (Engine.parse, "auto", Engine.AUTO),
        (Engine.parse, "compiled", Engine.COMPILED),
        (Engine.parse, "dense", Engine.DENSE),
    ],
)
def test_a_string_and_its_member_parse_to_the_member(parse, text, member):
    assert parse(text) is member
    assert parse(member) is member
    assert member == text and str(member) == text


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (Formulation.parse, "lagrange", "formulation must be one of 'kane', 'msd', got 'lagrange'"),
        (Formulation.parse, None, "formulation must be one of 'kane', 'msd', got None"),
        (Engine.parse, "fast", "engine must be one of 'auto', 'compiled', 'dense', got 'fast'"),
        (Engine.parse, Formulation.KANE, "engine must be one of"),
        (Method.parse, "euler", "unknown method 'euler': use one of 'rk4', 'energy-momentum', 'RK45', 'RK23', "
                                "'DOP853', 'Radau', 'BDF', 'LSODA' or a scipy.integrate.OdeSolver"),
        (Method.parse, "rk45", "unknown method 'rk45'"),
        (Method.parse, int, "unknown method <class 'int'>"),
    ],
)  # fmt: skip
def test_bad_values_are_model_errors_naming_the_choices(parse, value, message):
    with pytest.raises(ModelError) as info:
        parse(value)
    assert message in str(info.value)


def test_methods_know_whether_they_are_adaptive():
    assert Method.parse("rk4") is RK4 and not RK4.adaptive and RK4.solver is None
    for name in ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"):
        method = Method.parse(name)
        assert method.adaptive and method.name == name
        assert method.solver is getattr(scipy.integrate, name)
    custom = Method.parse(scipy.integrate.DOP853)
    assert custom == Method("DOP853", scipy.integrate.DOP853)
    assert Method.parse(custom) is custom


def test_simulate_accepts_objects_and_reports_strings():
    model, state = _pendulum()
    a = kd.simulate(model, state, 0.2, 0.05, progress=False)
    b = kd.simulate(model, state, 0.2, 0.05, progress=False, method=RK4,
                    formulation=Formulation.KANE, engine=Engine.DENSE)  # fmt: skip
    assert type(b.formulation) is str and type(b.method) is str
    assert (b.formulation, b.method) == ("kane", "rk4")
    np.testing.assert_allclose(b.u, a.u, rtol=0, atol=1e-12)
    c = kd.simulate(model, state, 0.2, 0.05, progress=False, method=scipy.integrate.DOP853,
                    formulation=Formulation.MSD)  # fmt: skip
    d = kd.simulate(model, state, 0.2, 0.05, progress=False, method="DOP853", formulation="msd")
    assert (c.formulation, c.method) == ("msd", "DOP853")
    np.testing.assert_array_equal(c.u, d.u)


def test_simulate_ensemble_and_compile_model_accept_objects():
    model, state = _pendulum()
    states = States.repeat(state, 2)
    a = kd.simulate_ensemble(model, states, 0.2, 0.05, engine=Engine.DENSE)
    b = kd.simulate_ensemble(model, states, 0.2, 0.05, engine="dense")
    np.testing.assert_array_equal(a.u, b.u)
    with pytest.raises(ModelError, match="engine must be one of"):
        kd.simulate_ensemble(model, states, 0.2, 0.05, engine="fast")
    cm = kd.compile_model(model, formulation=Formulation.MSD)
    assert cm is kd.compile_model(model, formulation="msd")
    assert cm.formulation is Formulation.MSD and cm.formulation == "msd"


def test_the_compiled_model_is_looked_up_once_per_lock_set_not_per_step(monkeypatch):
    """With loads or lock events the right-hand side runs the compiled kernel at every
    stage; the CompiledModel is looked up when the lock set changes, not per stage."""
    model, state = _pendulum()
    calls = []
    original = kanedyn.simulation.system.compile_model

    def spy(*args, **kwargs):
        calls.append(args[1:])
        return original(*args, **kwargs)

    def lookups(t_final, **kw):
        calls.clear()
        kd.simulate(model, state, t_final, 0.01, engine="compiled", progress=False, **kw)
        return len(calls)

    monkeypatch.setattr(kanedyn.simulation.system, "compile_model", spy)
    hinge = model.joints[1].name
    loads = [kd.JointLoad(model.joints[0].name, [0.1])]
    events = [kd.Lock(0.2, hinge), kd.Unlock(0.3, hinge)]
    for formulation in ("kane", "msd"):
        assert lookups(0.1, loads=loads, formulation=formulation) == 1
        assert lookups(0.5, loads=loads, formulation=formulation) == 1
        assert lookups(0.4, events=events, formulation=formulation) == lookups(
            0.8, events=events, formulation=formulation
        )
    assert lookups(0.8, events=events) == 3  # unlocked, locked, unlocked again


def test_momentum_roots_are_found_once_per_model():
    model = kd.examples.explorer1()
    roots = kd.msd.momentum_roots(model)
    assert roots == [model.joint_index("root")]
    roots.append(99)  # the caller's copy
    assert kd.msd.momentum_roots(model) == [model.joint_index("root")]
    assert kd.msd.momentum_roots(kd.examples.double_pendulum()) == []


def test_no_private_scipy_api():
    package = Path(kanedyn.__file__).parent
    for path in package.rglob("*.py"):
        assert "scipy.integrate._" not in path.read_text(), path
