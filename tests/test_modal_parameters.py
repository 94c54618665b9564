"""The flexible bodies' modal data as parameters (issues 27, 29 and 33): held by
``Params`` (``modal_slots``, ``modal_data``), differentiated by
``CompiledModel.parameter_jacobian`` and dispersed in a ``ModelBatch``.

Oracles: central finite differences of the dense engine (``kd.forward_dynamics``: CRBA
and Cholesky over Kane's flexible mass matrix, another algorithm than the traced ABA)
on models rebuilt with each parameter moved (the test's own perturbation of the
``kd.Body`` and ``kd.Modes`` records, not the code's parameter table); for a batch, the
dense engine on each member model built by hand.
"""

from __future__ import annotations

import warnings

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.model.plan import modal_data, modal_slots, params_of
from tests.test_flex_nodes import _two_beams

AXES = "xyz"


@pytest.fixture(scope="module")
def two_beams():
    """A hub spinning about z, a stiffened beam b1 welded to it and a second beam b2
    hinged at b1's tip node, in gravity; b1 damped (its damping is a parameter)."""
    model, state = _two_beams()
    model = with_body(model, "b1", modes={"damping": 0.3 * np.eye(4)})
    return model, state


def with_body(model: kd.Model, name: str, modes: dict | None = None, **body) -> kd.Model:
    """``model`` rebuilt with ``name``'s record fields ``body`` and modes ``modes``
    changed."""
    bodies = []
    for b in model.bodies:
        if b.name == name:
            if modes:
                with warnings.catch_warnings():  # H and L, N and the mass apart: allowed
                    warnings.simplefilter("ignore", UserWarning)
                    body["modes"] = attrs.evolve(b.modes, **modes)
            b = attrs.evolve(b, **body)
        bodies.append(b)
    return kd.Model(bodies, model.joints, gravity=model.gravity)


def moved(model: kd.Model, name: str, h: float) -> kd.Model:
    """``model`` with the parameter ``name`` (of ``parameter_symbols``) moved by ``h``,
    by the names' documented meaning."""
    body, field, *rest = name.split(".")
    b = model.body(body)
    if field == "mass":
        return with_body(model, body, mass=b.mass + h)
    if field == "inertia":
        i, j = (AXES.index(c) for c in rest[0])
        inertia = np.array(b.inertia, dtype=float)
        inertia[i, j] += h
        if i != j:
            inertia[j, i] += h
        return with_body(model, body, inertia=inertia)
    if field == "com":
        com = np.array(b.com, dtype=float)
        com[AXES.index(rest[0])] += h
        return with_body(model, body, com=com)
    md = b.modes
    mode = md.mode_names.index
    if field in ("modal_mass", "modal_stiffness", "modal_damping"):
        attr = field.removeprefix("modal_")
        a, c = mode(rest[0]), mode(rest[1])
        A = np.array(getattr(md, attr))
        A[a, c] += h
        if a != c:
            A[c, a] += h
        return with_body(model, body, modes={attr: A})
    if field in ("modal_P", "modal_H"):
        attr = field.removeprefix("modal_")
        A = np.array(getattr(md, attr))
        A[AXES.index(rest[0]), mode(rest[1])] += h
        return with_body(model, body, modes={attr: A})
    if field == "modal_L":
        L = np.array(md.L)
        L[AXES.index(rest[0]), AXES.index(rest[1]), mode(rest[2])] += h
        return with_body(model, body, modes={"L": L})
    if field == "modal_N":
        i, j, a, c = AXES.index(rest[0]), AXES.index(rest[1]), mode(rest[2]), mode(rest[3])
        N = np.array(md.N)
        N[i, j, a, c] += h
        if (i, a) != (j, c):
            N[j, i, c, a] += h  # N_ijac = N_jica
        return with_body(model, body, modes={"N": N})
    if field == "geometric":
        k, a, c = int(rest[0]), mode(rest[1]), mode(rest[2])
        G = np.array(md.geometric)
        G[k, a, c] += h
        if a != c:
            G[k, c, a] += h
        return with_body(model, body, modes={"geometric": G})
    node = md.node(rest[0])
    if field == "node_positions":
        r = np.array(md.node_positions)
        r[node, AXES.index(rest[1])] += h
        return with_body(model, body, modes={"node_positions": r})
    assert field in ("Psi", "Theta"), name
    S = np.array(getattr(md, field))
    S[node, AXES.index(rest[1]), mode(rest[2])] += h
    return with_body(model, body, modes={field: S})


def test_params_hold_each_flexible_bodys_modal_data(two_beams):
    """``modal_data`` of the model's Params gives back each body's kd.Modes numbers; a
    model without flexible bodies has empty modal fields."""
    model, _ = two_beams
    pa = params_of(model)
    slots = modal_slots(model)
    assert [s.body for s in slots] == [model.body_index("b1"), model.body_index("b2")]
    assert [s.geometric for s in slots] == [True, False]
    for s in slots:
        md, got = model.bodies[s.body].modes, modal_data(pa, model, s.body)
        for attr in ("mass", "stiffness", "damping", "P", "H", "L", "N", "node_positions",
                     "Psi", "Theta"):  # fmt: skip
            assert np.array_equal(getattr(got, attr), getattr(md, attr)), attr
        assert (got.geometric is None) == (md.geometric is None)
        if md.geometric is not None:
            assert np.array_equal(got.geometric, md.geometric)
    assert pa.modal_mass.size == 4 * 4 + 2 * 2
    rigid = params_of(kd.examples.double_pendulum())
    assert rigid.modal_mass.shape == (0,) and rigid.node_Psi.shape == (0,)
    with pytest.raises(kd.ModelError, match="'hub' is not flexible"):
        modal_data(pa, model, model.body_index("hub"))


NAMES = [
    "hub.inertia.zz", "b1.mass", "b1.com.x", "b2.mass", "b2.com.x",
    "b1.modal_stiffness.y1.y1", "b1.modal_stiffness.y1.z2", "b2.modal_stiffness.y2.y2",
    "b1.modal_mass.y2.y2", "b1.modal_mass.y1.y2", "b1.modal_damping.z1.z1",
    "b1.modal_P.y.y1", "b1.modal_H.z.y2", "b2.modal_H.z.y1", "b1.modal_L.x.x.y1",
    "b1.modal_N.x.y.y1.z1", "b1.modal_N.y.y.y1.y2", "b2.modal_N.y.y.y1.y1",
    "b1.geometric.8.y1.y1", "b1.geometric.0.y1.y2",
    "b1.node_positions.tip.x", "b1.Psi.tip.y.y1", "b1.Theta.tip.z.y1", "b1.Theta.tip.y.z2",
]  # fmt: skip


FEW = ["b1.mass", "b1.modal_stiffness.y1.y1", "b2.modal_mass.y1.y2", "b1.Theta.tip.y.z2"]


@pytest.mark.parametrize(
    "names", [FEW, pytest.param(NAMES, marks=pytest.mark.slow)], ids=["few", "all"]
)
def test_parameter_jacobian_of_a_flexible_model_is_the_finite_differences(two_beams, names):
    """Every column (rigid and modal parameters, node data of the node joint included)
    against central differences of the dense engine on rebuilt models."""
    model, state = two_beams
    cm = kd.compile_model(model)
    J, got = cm.parameter_jacobian(state.q, state.u, parameters=names)
    assert got == tuple(names) and J.shape == (model.n + model.nf, len(names))
    scale = np.max(np.abs(kd.forward_dynamics(model, state)))
    for c, name in enumerate(names):
        h = 1e-5
        fd = (
            kd.forward_dynamics(moved(model, name, h), state)
            - kd.forward_dynamics(moved(model, name, -h), state)
        ) / (2 * h)
        assert np.max(np.abs(fd)) > 1e-6 * scale, name  # the parameter matters here
        np.testing.assert_allclose(J[:, c], fd, rtol=1e-6, atol=1e-7 * scale, err_msg=name)


def test_parameter_jacobian_names_every_modal_parameter(two_beams):
    """The default columns include the modal parameters, and their values are the
    model's (the node data only for the node a joint attaches at)."""
    model, state = two_beams
    from kanedyn.compiled.derivatives import parameter_symbols

    names = [n for n, _ in parameter_symbols(model)]
    assert "b1.Psi.tip.x.y1" in names and not any(".root." in n for n in names)
    assert "b2.geometric.0.y1.y1" not in names  # b2 is not stiffened
    assert sum(n.startswith("b2.modal_mass.") for n in names) == 3  # y1y1, y1y2, y2y2
    table = kd.compile_model(model)._code.parameter_table(model)
    md = model.body("b1").modes
    assert table["b1.modal_stiffness.z2.z2"] == md.stiffness[3, 3]
    assert table["b1.Theta.tip.z.y1"] == md.Theta[md.node("tip"), 2, 0]


@pytest.mark.filterwarnings("ignore:modes. the trace of N")
def test_a_batch_of_models_differing_in_their_modes(two_beams):
    """ModelBatch.stack of models with other modal stiffness and mass: the compiled
    batch's rates are each member's (dense engine), and member(b) gives its modes."""
    model, state = two_beams
    md = model.body("b1").modes
    stiffer = with_body(model, "b1", modes={"stiffness": 1.5 * md.stiffness})
    heavier = with_body(model, "b1", modes={"mass": 1.2 * md.mass})
    batch = kd.ModelBatch.stack([model, stiffer, heavier])
    assert np.array_equal(
        batch.member(1).body("b1").modes.stiffness, stiffer.body("b1").modes.stiffness
    )
    cm = kd.compile_model(batch)
    q, u = np.tile(state.q, (3, 1)), np.tile(state.u, (3, 1))
    got = cm.forward_dynamics(kd.States(q, u))
    for b, m in enumerate((model, stiffer, heavier)):
        want = kd.forward_dynamics(m, state)
        np.testing.assert_allclose(got[b], want, rtol=0, atol=1e-11 * np.max(np.abs(want)))
    assert np.max(np.abs(got[1] - got[0])) > 1e-3
    other = kd.beam_body("b1", 1.5, 1.2, (20.0, 35.0), n_modes=1, stiffening=True)
    fewer = kd.Model([b if b.name != "b1" else other for b in model.bodies], model.joints,
                     gravity=model.gravity)  # fmt: skip
    with pytest.raises(kd.ModelError, match="different topology"):
        kd.ModelBatch.stack([model, fewer])
