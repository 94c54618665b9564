"""Tests of the exact parameter derivatives ``CompiledModel.parameter_jacobian``.

Oracle: central finite differences of the dense engine (``kd.forward_dynamics``, a
different algorithm from the traced ABA) on models rebuilt with the perturbed parameter
(``attrs.evolve`` of the body, joint or gravity: the model's own constructor, not the
compiled engine's parameter arrays).
"""

from __future__ import annotations

import re

import attrs
import numpy as np
import pytest
from hypothesis import given, settings

import kanedyn as kd
from kanedyn.errors import ModelError
from tests.strategies import SETTINGS
from tests.test_compiled import SEEDS, compilable_trees, draw_state

_NAME = re.compile(
    r"^(?P<owner>.*)\.(?P<field>mass|inertia|com|embedded_momentum|inner_point|outer_point"
    r"|stiffness|damping)(?:\.(?P<axes>[xyz]{1,2})|(?P<dof>\d+))?$"
)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KANEDYN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def perturbed(model: kd.Model, name: str, h: float) -> kd.Model:
    """``model`` rebuilt with the parameter ``name`` moved by ``h``."""
    bodies, joints, gravity = list(model.bodies), list(model.joints), np.array(model.gravity)
    if name.startswith("gravity."):
        gravity["xyz".index(name[-1])] += h
        return kd.Model(bodies, joints, gravity=gravity)
    m = _NAME.match(name)
    assert m is not None, name
    owner, field, axes, dof = m["owner"], m["field"], m["axes"], m["dof"]
    if field in ("mass", "inertia", "com", "embedded_momentum"):
        i = next(i for i, b in enumerate(bodies) if b.name == owner)
        value = np.array(getattr(bodies[i], field), dtype=float)
        if field == "mass":
            value = value + h
        elif field == "inertia":
            a, b = ("xyz".index(c) for c in axes)
            value[a, b] += h
            if a != b:
                value[b, a] += h
        else:
            value["xyz".index(axes)] += h
        bodies[i] = attrs.evolve(bodies[i], **{field: value})
    else:
        k = next(k for k, j in enumerate(joints) if j.name == owner)
        j = joints[k]
        if field in ("inner_point", "outer_point"):
            value = np.array(getattr(j, field), dtype=float)
            value["xyz".index(axes)] += h
        else:
            ndof = len(model.layout.u_index[k])
            value = np.array(np.broadcast_to(np.asarray(getattr(j, field), float), (ndof,)))
            value[int(dof)] += h
        joints[k] = attrs.evolve(j, **{field: value})
    return kd.Model(bodies, joints, gravity=gravity)


def check_parameters(model: kd.Model, seed: int) -> None:
    state = draw_state(model, seed, 1.0)
    tau = np.random.default_rng(seed).normal(size=model.n)
    cm = kd.compile_model(model)
    J, names = cm.parameter_jacobian(state.q, state.u, tau)
    assert J.shape == (model.n, len(names))
    assert len(set(names)) == len(names)
    loads = [kd.JointLoad(j.name, tau[model.layout.u_index[k]])
             for k, j in enumerate(model.joints) if len(model.layout.u_index[k])]  # fmt: skip
    scale = max(1.0, float(np.max(np.abs(J))))
    for c, name in enumerate(names):
        h = 1e-6
        # ν̇ is linear in a spring or damper constant, which may not go negative: a
        # one-sided difference is exact there
        lo = 0.0 if re.search(r"\.(stiffness|damping)\d+$", name) else -h
        fd = (kd.forward_dynamics(perturbed(model, name, h), state, loads=loads)
              - kd.forward_dynamics(perturbed(model, name, lo), state, loads=loads)) / (h - lo)  # fmt: skip
        np.testing.assert_allclose(J[:, c], fd, atol=3e-6 * scale, err_msg=name)


@settings(SETTINGS, max_examples=3)
@given(model=compilable_trees(), seed=SEEDS)
def test_parameter_jacobian_equals_finite_differences(model, seed):
    check_parameters(model, seed)


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(model=compilable_trees(), seed=SEEDS)
def test_parameter_jacobian_equals_finite_differences_many_trees(model, seed):
    check_parameters(model, seed)


def test_parameter_jacobian_of_a_chain_with_springs():
    """Every kind of parameter moves the accelerations of a spring-loaded chain with an
    offset joint: each column against its finite difference."""
    model = kd.examples.chain(3, spatial=True)
    joints = [attrs.evolve(j, stiffness=2.0 + k, damping=0.3, inner_point=(0.0, 0.1 * k, 0.0))
              for k, j in enumerate(model.joints)]  # fmt: skip
    bodies = [attrs.evolve(b, embedded_momentum=(0.0, 0.0, 0.2)) for b in model.bodies]
    model = kd.Model(bodies, joints, gravity=model.gravity)
    check_parameters(model, 3)


def test_parameter_selection_and_names():
    model = kd.examples.chain(2)
    state = draw_state(model, 1, 1.0)
    cm = kd.compile_model(model)
    J, names = cm.parameter_jacobian(state.q, state.u)
    assert names[:2] == ("link0.mass", "link0.inertia.xx")
    assert "joint1.stiffness0" in names and names[-1] == "gravity.z"
    pick = ["gravity.y", "link1.mass", "joint0.inner_point.x"]
    Js, got = cm.parameter_jacobian(state.q, state.u, parameters=pick)
    assert got == tuple(pick)
    np.testing.assert_array_equal(Js, J[:, [names.index(p) for p in pick]])
    with pytest.raises(ModelError, match="unknown parameter 'link9.mass'"):
        cm.parameter_jacobian(state.q, state.u, parameters=["link9.mass"])
    with pytest.raises(ModelError, match="expected q"):
        cm.parameter_jacobian(state.q[:1], state.u)
