"""``Params`` is the one store of a model's numbers (issue 27).

A :class:`~kanedyn.ModelBatch` carries each member's numbers in its ``Params`` only; the
model's layout holds topology and index ranges. So every function that takes a batch
must give member b the result of the model built with member b's numbers, and every
function that takes one model must refuse a batch instead of evaluating the nominal
numbers.

The oracle for member b is a ``kd.Model`` built here from member b's arrays (bodies and
joints rebuilt with ``attrs.evolve``, not with ``ModelBatch.member``) and evaluated on
its own.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import sympy as sm
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.compiled import compile_model, supports
from kanedyn.dynamics.kane import kinetic_energy_at, momentum_at, potential_energy_at
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.errors import ModelError
from kanedyn.model.batch import ModelBatch, States
from kanedyn.model.plan import Params, params_of
from kanedyn.simulation.ensemble import simulate_ensemble

B = 3


def nominal() -> kd.Model:
    """A free hub with an embedded momentum, a sprung hinge with rotated joint frames, a
    two-angle gimbal and a slide: every kind of number a batch may vary."""
    hub = kd.Body("hub", mass=10.0, inertia=kd.inertia_tensor(4.0, 5.0, 6.0), com=(0.0, 0.0, 0.2),
                  embedded_momentum=(0.0, 0.0, 0.5))  # fmt: skip
    panel = kd.Body("panel", mass=2.0, inertia=kd.inertia_tensor(0.5, 0.4, 0.3), com=(0.3, 0, 0))
    rod = kd.Body("rod", mass=1.0, inertia=kd.inertia_tensor(0.2, 0.2, 0.05), com=(0, 0, 0.4))
    bead = kd.Body("bead", mass=0.5, inertia=kd.inertia_tensor(0.01, 0.01, 0.01))
    joints = [
        kd.Joint.free("root", outer="hub"),
        kd.Joint.revolute(
            "hinge",
            inner="hub",
            outer="panel",
            axis=2,
            inner_point=(0.5, 0, 0),
            inner_rotation=kd.euler_to_dcm("312", (0.3, 0.0, 0.0)),
            stiffness=2.0,
            damping=0.3,
        ),  # fmt: skip
        kd.Joint.gimbal(
            "g",
            inner="hub",
            outer="rod",
            seq="231",
            dof=2,
            inner_point=(0, 0.4, 0.1),
            outer_point=(0, 0, -0.1),
            outer_rotation=kd.euler_to_dcm("123", (0.0, 0.2, 0.1)),
            stiffness=(1.0, 1.5),
            damping=(0.1, 0.2),
        ),  # fmt: skip
        kd.Joint.prismatic(
            "slide",
            inner="rod",
            outer="bead",
            axis=3,
            inner_point=(0, 0, 0.3),
            stiffness=5.0,
            damping=0.5,
        ),  # fmt: skip
    ]
    return kd.Model([hub, panel, rod, bead], joints, gravity=(0.0, -9.81, 0.0))


def member_arrays(model: kd.Model, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """B sets of numbers, every one away from the nominal model's."""
    nb, n = model.nb, model.n

    def turns(shape: tuple[int, ...]) -> np.ndarray:
        return (
            Rotation.from_rotvec(rng.normal(0.0, 0.3, (int(np.prod(shape)), 3)))
            .as_matrix()
            .reshape(shape + (3, 3))
        )

    R = turns((B, nb))
    moments = rng.uniform(1.0, 2.0, (B, nb, 3))
    moments[..., 2] = rng.uniform(0.5, 0.9) * (moments[..., 0] + moments[..., 1])  # triangle
    inertia = R @ (moments[..., None] * np.eye(3)) @ np.swapaxes(R, -1, -2)
    stiffness = rng.uniform(0.5, 3.0, (B, n))
    stiffness[:, model.speeds("root")] = 0.0  # no spring on the free joint
    return {
        "mass": rng.uniform(1.0, 5.0, (B, nb)),
        "inertia": inertia,
        "com": rng.normal(0.0, 0.2, (B, nb, 3)),
        "embedded_momentum": rng.normal(0.0, 0.5, (B, nb, 3)),
        "inner_point": rng.normal(0.0, 0.3, (B, nb, 3)),
        "outer_point": rng.normal(0.0, 0.3, (B, nb, 3)),
        "inner_rotation": turns((B, nb)),
        "outer_rotation": turns((B, nb)),
        "stiffness": stiffness,
        "damping": rng.uniform(0.1, 1.0, (B, n)),
        "gravity": rng.normal(0.0, 5.0, (B, 3)),
    }


def built_member(model: kd.Model, arrays: dict[str, np.ndarray], b: int) -> kd.Model:
    """Member b as its own model, from the arrays (the oracle's side)."""
    body_fields = ("mass", "inertia", "com", "embedded_momentum")
    bodies = [
        attrs.evolve(body, **{f: arrays[f][b, i] for f in body_fields})
        for i, body in enumerate(model.bodies)
    ]
    joint_fields = ("inner_point", "outer_point", "inner_rotation", "outer_rotation")
    joints = [
        attrs.evolve(
            j,
            **{f: arrays[f][b, k] for f in joint_fields},
            stiffness=arrays["stiffness"][b, model.speeds(j.name)],
            damping=arrays["damping"][b, model.speeds(j.name)],
        )
        for k, j in enumerate(model.joints)
    ]
    return kd.Model(bodies, joints, gravity=arrays["gravity"][b])


@pytest.fixture(scope="module")
def setup():
    model = nominal()
    rng = np.random.default_rng(27)
    arrays = member_arrays(model, rng)
    batch = ModelBatch.dispersed(model, **arrays)
    members = [built_member(model, arrays, b) for b in range(B)]
    state = model.initial_state()
    state = model.set_joint(state, "hinge", angles=(0.4,), rates=(0.7,))
    state = model.set_joint(state, "g", angles=(0.2, -0.3), rates=(0.5, -0.4))
    state = model.set_joint(state, "slide", displacements=(0.1,), displacement_rates=(0.2,))
    state = model.set_joint(state, "root", angles=(0.1, 0.2, 0.3), rates=(0.3, -0.2, 0.1))
    state = kd.State(state.q, state.u + rng.normal(0.0, 0.2, model.n))
    return model, batch, members, state


def test_members_differ_from_the_nominal_model(setup):
    """Otherwise the checks below could not tell a batch's numbers from the nominal ones."""
    model, batch, members, state = setup
    M0 = kd.mass_matrix(model, state)
    f0 = kd.forcing(model, state)
    for m in members:
        assert np.max(np.abs(kd.mass_matrix(m, state) - M0)) > 1e-2
        assert np.max(np.abs(kd.forcing(m, state) - f0)) > 1e-2


def _load():
    return [kd.Force("panel", (0.5, -1.0, 2.0), point=(0.1, 0.2, 0.0), frame="body")]


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, s: kd.mass_matrix(m, s),
        lambda m, s: kd.forcing(m, s, _load()),
        lambda m, s: kd.forward_dynamics(m, s, _load()),
        lambda m, s: kd.partials(m, s).Omega_u,
        lambda m, s: kd.partials(m, s).V_u,
        lambda m, s: kd.partials(m, s).V_s,
    ],
    ids=["mass_matrix", "forcing", "forward_dynamics", "Omega_u", "V_u", "V_s"],
)
@pytest.mark.parametrize("batched_states", [False, True])
def test_dense_functions_give_each_member_its_own_result(setup, fn, batched_states):
    model, batch, members, state = setup
    s = States.repeat(state, B) if batched_states else state
    got = fn(batch, s)
    assert got.shape[0] == B
    for b, m in enumerate(members):
        np.testing.assert_allclose(got[b], fn(m, state), rtol=1e-11, atol=1e-11)


def test_kinematics_level_functions_read_the_batch_numbers(setup):
    """Energies, momenta and loads from a batch's kinematics use ``kin.params``."""
    model, batch, members, state = setup
    states = States.repeat(state, B)
    kin = kinematics_at(model, states.q, states.u, batch.params)
    T = kinetic_energy_at(model, kin)
    V = potential_energy_at(model, states.q, kin)
    P, H = momentum_at(model, kin)
    for b, m in enumerate(members):
        assert T[b] == pytest.approx(kd.kinetic_energy(m, state), rel=1e-12)
        assert V[b] == pytest.approx(kd.potential_energy(m, state), rel=1e-12)
        P_b, H_b = kd.momentum(m, state)
        np.testing.assert_allclose(P[b], P_b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(H[b], H_b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", ["dense", "compiled"])
def test_simulate_ensemble_runs_each_member_with_its_numbers(setup, engine):
    model, batch, members, state = setup
    if engine == "compiled":
        assert supports(model, batch.params) is None
    ens = simulate_ensemble(batch, States.repeat(state, B), 0.2, 0.01, engine=engine)
    for b, m in enumerate(members):
        one = kd.simulate(m, state, 0.2, 0.01, method="rk4", formulation="kane", progress=False)
        np.testing.assert_allclose(ens.q[-1, b], one.q[-1], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(ens.u[-1, b], one.u[-1], rtol=1e-9, atol=1e-9)


def test_compile_model_of_a_batch_gives_each_member_its_own_accelerations(setup):
    """The compiled batch (ABA on the tape) against each member's dense Kane solve."""
    model, batch, members, state = setup
    acc = compile_model(batch).forward_dynamics(States.repeat(state, B))
    for b, m in enumerate(members):
        np.testing.assert_allclose(acc[b], kd.forward_dynamics(m, state), rtol=1e-9, atol=1e-9)


ONE_MODEL = {
    "kinematics": lambda b, s: kd.kinematics(b, s),
    "kinetic_energy": lambda b, s: kd.kinetic_energy(b, s),
    "potential_energy": lambda b, s: kd.potential_energy(b, s),
    "momentum": lambda b, s: kd.momentum(b, s),
    "system_mass_properties": lambda b, s: kd.system_mass_properties(b, s),
    "generalized_active_forces": lambda b, s: kd.generalized_active_forces(b, s),
    "generalized_inertia_forces": lambda b, s: kd.generalized_inertia_forces(b, s, np.zeros(len(s.u))),
    "inverse_dynamics": lambda b, s: kd.inverse_dynamics(b, s, np.zeros(len(s.u))),
    "constraint_forces": lambda b, s: kd.constraint_forces(b, s),
    "aba": lambda b, s: kd.aba(b, s),
    "newton_euler": lambda b, s: kd.newton_euler(b, s, np.zeros(len(s.u))),
    "msd.momenta": lambda b, s: kd.msd.momenta(b, s),
    "simulate": lambda b, s: kd.simulate(b, s, 0.1, 0.01, progress=False),
    "linearize": lambda b, s: kd.linearize(b, s),
    "symbolic.kane": lambda b, s: kd.symbolic.kane(b),
    "symbolic.lagrange": lambda b, s: kd.symbolic.lagrange(b),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ONE_MODEL))
def test_functions_of_one_model_refuse_a_batch(setup, name):
    model, batch, members, state = setup
    with pytest.raises(ModelError, match="ModelBatch"):
        ONE_MODEL[name](batch, state)


def test_a_batch_of_a_model_with_geared_rotors_is_refused():
    """The rotors' axes come from the joints' rotations; a batch may vary those."""
    link = kd.Body("link", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.1), com=(0.5, 0, 0))
    joint = kd.Joint.revolute("shoulder", None, "link", axis=3, rotor=kd.Rotor(0.01, 50.0))
    model = kd.Model([link], [joint], gravity=(0, -9.81, 0))
    batch = ModelBatch.dispersed(model, mass=[[1.0], [2.0]])
    state = model.initial_state()
    with pytest.raises(ModelError, match="rotors.*ModelBatch"):
        kd.forward_dynamics(batch, state)
    with pytest.raises(ModelError, match="rotors.*ModelBatch"):
        kd.mass_matrix(batch, state)


def test_layout_keeps_no_parameter():
    """The layout's fields share no name with Params, and its only non-index arrays are
    0/1 structure (the path matrix, the slide axes, the gimbal axis unit vectors)."""
    model = nominal()
    layout_fields = {f.name for f in attrs.fields(type(model.layout))}
    param_fields = {f.name for f in attrs.fields(Params) if f.init}
    assert param_fields == {"mass", "inertia", "com", "h_embedded", "inner_point",
                            "outer_point", "R_Bi_Gi", "R_Go_Bo", "stiffness", "damping",
                            "gravity", "stiffness_poly", "damping_poly", "mu", "J2", "radius",
                            "center", "modal_mass", "modal_stiffness", "modal_damping",
                            "modal_P", "modal_H", "modal_L", "modal_N", "node_positions",
                            "node_Psi", "node_Theta", "modal_geometric"}  # fmt: skip
    assert not layout_fields & param_fields
    numbers = {
        name: value
        for name in layout_fields
        if isinstance(value := getattr(model.layout, name), np.ndarray)
        and not np.issubdtype(value.dtype, np.integer)
    }
    assert set(numbers) == {"path", "Delta", "gimbal_e"}
    for value in numbers.values():
        assert np.all((value == 0.0) | (value == 1.0))


def test_a_symbolic_model_keeps_its_symbols_in_params():
    m, k, g, a = sm.symbols("m k g a", positive=True)
    body = kd.Body("rod", mass=m, inertia=kd.inertia_tensor(0.1, 0.1, 0.2), com=(a, 0, 0))
    joint = kd.Joint.revolute("pin", None, "rod", axis=3, stiffness=k)
    model = kd.Model([body], [joint], gravity=(0, -g, 0))
    pa = params_of(model)
    assert pa.mass.dtype == object and pa.mass[0] is m
    assert pa.com[0, 0] is a and pa.stiffness[0] is k and pa.gravity[1] == -g
    assert not pa.has_h
    eom = kd.symbolic.kane(model)
    assert {m, k, g, a} <= eom.mass_matrix.free_symbols | eom.forcing.free_symbols


def test_dispersed_polynomial_springs_equal_models_built_one_by_one():
    """``stiffness_poly`` / ``damping_poly`` per member (B, n, 2): the batch's
    accelerations are those of models built with each member's coefficients."""
    link = kd.Body("link", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.1), com=(0.5, 0, 0))

    def model(kp, cp):
        joint = kd.Joint.revolute("h", None, "link", axis=3, stiffness=2.0, damping=0.1,
                                  stiffness_poly=kp, damping_poly=cp)  # fmt: skip
        return kd.Model([link], [joint], gravity=(0, -9.81, 0))

    kps, cps = [(0.0, 0.0), (-1.0, 5.0), (2.0, 0.5)], [(0.0, 0.0), (0.3, 0.0), (0.1, 0.4)]
    batch = ModelBatch.dispersed(model(0.0, 0.0), stiffness_poly=np.array(kps)[:, None],
                                 damping_poly=np.array(cps)[:, None])  # fmt: skip
    state = kd.State(np.array([0.7]), np.array([-1.2]))
    got = kd.forward_dynamics(batch, state)
    want = [kd.forward_dynamics(model(kp, cp), state) for kp, cp in zip(kps, cps, strict=True)]
    np.testing.assert_allclose(got, np.array(want), rtol=1e-14, atol=1e-14)
    assert not np.allclose(want[0], want[1])
