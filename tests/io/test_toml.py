"""kanedyn's TOML model files: lossless round trips, hand-written files, and bad input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.io import Case, detect_format, read_model, read_toml, read_toml_case, write_toml

BODY_FIELDS = ("mass", "inertia", "com", "embedded_momentum", "check_triangle")
JOINT_FIELDS = ("name", "inner", "outer", "rot_type", "rot_dof", "rot_seq", "trn_dof", "trn_seq",
                "inner_point", "outer_point", "inner_rotation", "outer_rotation", "stiffness",
                "damping", "stiffness_poly", "damping_poly")  # fmt: skip


def assert_same_model(a: kd.Model, b: kd.Model) -> None:
    np.testing.assert_array_equal(a.gravity, b.gravity)
    assert [x.name for x in a.bodies] == [x.name for x in b.bodies]
    for x, y in zip(a.bodies, b.bodies, strict=True):
        for f in BODY_FIELDS:
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f), err_msg=f"{x.name}.{f}")
    assert [x.name for x in a.joints] == [x.name for x in b.joints]
    for x, y in zip(a.joints, b.joints, strict=True):
        for f in JOINT_FIELDS:
            vx, vy = getattr(x, f), getattr(y, f)
            if isinstance(vx, np.ndarray):
                np.testing.assert_array_equal(vx, vy, err_msg=f"{x.name}.{f}")
            else:
                assert str(vx) == str(vy), (x.name, f)


def random_state(model: kd.Model, rng: np.random.Generator) -> kd.State:
    q = rng.normal(size=model.nq)
    lay = model.layout
    if lay.quat_q.size:
        quats = rng.normal(size=lay.quat_q.shape)
        q[lay.quat_q] = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    return kd.State(q, rng.normal(size=model.n))


def every_kind() -> kd.Model:
    I = kd.inertia_tensor
    R = kd.euler_to_dcm
    bodies = [
        kd.Body("hub", 50.0, I(4.0, 5.0, 6.0, 0.1, -0.2, 0.3), com=(0.1, -0.2, 0.3),
                embedded_momentum=(0.0, 0.5, -0.25)),
        *(kd.Body(f"b{i}", 1.0 + i / 3, I(0.3, 0.4, 0.5, 0.01 * i), com=(0.2, 0.01 * i, 0.0))
          for i in range(1, 8)),
    ]  # fmt: skip
    kw = dict(inner_rotation=R("312", (0.3, -0.2, 0.1)), outer_rotation=R("213", (0.1, 0.7, -0.4)))
    joints = [
        kd.Joint.free("root", outer="hub", outer_point=(0.1, -0.2, 0.3)),
        kd.Joint.revolute("rev", "hub", "b1", axis=2, inner_point=(0.5, 0, 0), stiffness=2.0,
                          damping=0.1, stiffness_poly=(-0.5, 3.0), damping_poly=(0.2, 0.0), **kw),
        kd.Joint.prismatic("pri", "hub", "b2", axis=3, inner_point=(0, 0.5, 0), stiffness=10.0,
                           **kw),
        kd.Joint.spherical("sph", "b1", "b3", inner_point=(0.4, 0, 0), stiffness=(1, 2, 3),
                           damping=(0.1, 0.2, 0.3), **kw),
        kd.Joint.gimbal("gim", "b2", "b4", seq="321", dof=3, outer_point=(-0.1, 0, 0),
                        stiffness=(1.0, 0.0, 2.0)),
        kd.Joint.weld("wel", "b3", "b5", inner_point=(0.2, 0.2, 0.2), **kw),
        kd.Joint("gen", "b4", "b6", rot_dof=2, rot_seq="132", trn_dof=2, trn_seq="312",
                 inner_point=(0.3, 0, 0.1), stiffness=(1, 2, 3, 4), damping=0.5,
                 stiffness_poly=[(0.1, 0.2), (0.0, 0.0), (-0.3, 1.5), (0.0, 2.0)]),
        kd.Joint("gen_sph", "hub", "b7", rot_type="spherical", rot_dof=3, trn_dof=1,
                 trn_seq="231", **kw),
    ]  # fmt: skip
    return kd.Model(bodies, joints, gravity=(0.0, -9.81, 0.3))


def examples() -> list[kd.Model]:
    return [
        every_kind(),
        kd.examples.explorer1(),
        kd.examples.double_pendulum(),
        kd.examples.hub_with_panels(),
        kd.examples.chain(4, spatial=True),
    ]


@pytest.mark.parametrize("model", examples(), ids=["every_kind", "explorer1", "double_pendulum",
                                                    "hub_with_panels", "chain"])  # fmt: skip
def test_round_trip_is_lossless(tmp_path, model):
    rng = np.random.default_rng(7)
    state = random_state(model, rng)
    loads = [kd.Force(model.bodies[-1].name, (1.0, -2.0, 0.5), point=(0.1, 0.2, 0.3), frame="body"),
             kd.Force(model.bodies[0].name, (0.1, 0.0, 0.0)),
             kd.Torque(model.bodies[0].name, (0.0, 0.0, 1e-3)),
             kd.JointLoad(model.joints[-1].name, rng.normal(size=model.joints[-1].ndof))]  # fmt: skip
    settings = {"t_final": 12.5, "dt": 1e-3, "method": "rk4", "formulation": "msd",
                "output_every": 0.1}  # fmt: skip
    path = tmp_path / "model.toml"
    write_toml(model, path, state, settings, loads=loads)
    case = read_toml_case(path)
    assert isinstance(case, Case)
    assert_same_model(model, case.model)
    np.testing.assert_array_equal(case.state.q, state.q)
    np.testing.assert_array_equal(case.state.u, state.u)
    assert case.settings == settings
    assert [type(x) for x in case.loads] == [type(x) for x in loads]
    for x, y in zip(case.loads, loads, strict=True):
        for f in ("body", "joint", "frame"):
            assert getattr(x, f, None) == getattr(y, f, None)
        for f in ("force", "torque", "values", "point"):
            np.testing.assert_array_equal(getattr(x, f, None), getattr(y, f, None))
    M0 = kd.mass_matrix(model, state)
    M1 = kd.mass_matrix(case.model, case.state)
    assert np.max(np.abs(M1 - M0)) <= 1e-15 * np.max(np.abs(M0))
    np.testing.assert_array_equal(
        kd.forward_dynamics(case.model, case.state, list(case.loads)),
        kd.forward_dynamics(model, state, loads),
    )
    # reading twice, and writing what was read, gives the same text
    write_toml(case.model, tmp_path / "again.toml", case.state, case.settings, loads=case.loads)
    assert (tmp_path / "again.toml").read_text() == path.read_text()
    assert_same_model(read_toml(path), model)
    assert detect_format(path) == "toml"
    m2, s2 = read_model(path)
    np.testing.assert_array_equal(s2.q, state.q)


def test_model_only_file_gives_initial_state(tmp_path):
    model = kd.examples.hub_with_panels()
    write_toml(model, tmp_path / "m.toml")
    case = read_toml_case(tmp_path / "m.toml")
    np.testing.assert_array_equal(case.state.q, model.initial_state().q)
    assert case.loads == () and case.settings == {}


HAND = """
# Explorer-1's hub with one antenna, written by hand in degrees
[model]
gravity_m_s2 = [0, 0, 0]

[[bodies]]
name = "hub"
mass_kg = 1963.5
inertia_kg_m2 = { Ixx = 5174.0, Iyy = 3593.0, Izz = 245.4 }
com_m = [0, 0, 2.5]
check_triangle = false

[[bodies]]
name = "antenna"
mass_kg = 94.25
inertia_tensor_kg_m2 = [[0.47, 0, 0], [0, 8.09, -0.1], [0, -0.1, 8.09]]
com_m = [0.5, 0, 0]

[[bodies]]
name = "boom"
mass_kg = 3
inertia_kg_m2 = { Ixx = 1, Iyy = 1.5, Izz = 2, Ixy = 0.1 }

[[joints]]
name = "root"
outer = "hub"
kind = "free"
outer_point_m = [0, 0, 2.5]

[[joints]]
name = "hinge"
inner = "hub"
outer = "antenna"
kind = "gimbal"
seq = "231"
dof = 2
inner_point_m = [0, 0.5, 2.5]
inner_angles_deg = [90, 0, 0]
inner_seq = "312"
stiffness = [0.2, 0.0098]
damping = [5, 1.1]

[[joints]]
name = "slide"
inner = "antenna"
outer = "boom"
kind = "prismatic"
axis = 1
outer_angles_deg = [0, 30, 0]
outer_seq = 123
stiffness = 40

[initial.root]
angles_deg = [10, 20, 30]
rates_deg_s = [0, 0.001, 5]

[initial.hinge]
angles_deg = [5, -3]
rates_deg_s = [1, 2]

[initial.slide]
displacements_m = [0.25]
displacement_rates_m_s = [-0.5]

[[loads]]
type = "joint"
joint = "hinge"
values = [0.5, 0]

[simulation]
t_final_s = 100
dt_s = 0.01
"""


def test_hand_written_degrees_equal_python_api_radians(tmp_path):
    path = tmp_path / "hand.toml"
    path.write_text(HAND)
    case = read_toml_case(path)
    d = np.pi / 180
    hub = kd.Body("hub", 1963.5, kd.inertia_tensor(5174.0, 3593.0, 245.4), com=(0, 0, 2.5),
                  check_triangle=False)  # fmt: skip
    antenna = kd.Body("antenna", 94.25, kd.inertia_tensor(0.47, 8.09, 8.09, Iyz=0.1),
                      com=(0.5, 0, 0))  # fmt: skip
    boom = kd.Body("boom", 3.0, kd.inertia_tensor(1, 1.5, 2, Ixy=0.1))
    joints = [
        kd.Joint.free("root", outer="hub", outer_point=(0, 0, 2.5)),
        kd.Joint.gimbal("hinge", "hub", "antenna", seq="231", dof=2, inner_point=(0, 0.5, 2.5),
                        inner_rotation=kd.euler_to_dcm("312", (np.pi / 2, 0, 0)),
                        stiffness=(0.2, 0.0098), damping=(5.0, 1.1)),
        kd.Joint.prismatic("slide", "antenna", "boom", axis=1,
                           outer_rotation=kd.euler_to_dcm("123", (0, np.pi / 6, 0)),
                           stiffness=40.0),
    ]  # fmt: skip
    model = kd.Model([hub, antenna, boom], joints)
    for x, y in zip(case.model.bodies, model.bodies, strict=True):
        for f in BODY_FIELDS:
            np.testing.assert_allclose(getattr(x, f), getattr(y, f), rtol=0, atol=1e-15)
    for x, y in zip(case.model.joints, model.joints, strict=True):
        for f in JOINT_FIELDS[3:]:
            if isinstance(getattr(x, f), np.ndarray):
                np.testing.assert_allclose(getattr(x, f), getattr(y, f), rtol=0, atol=1e-15)
            else:
                assert getattr(x, f) == getattr(y, f)
    state = model.initial_state()
    state = model.set_joint(state, "root", angles=(10 * d, 20 * d, 30 * d),
                            rates=(0, 0.001 * d, 5 * d))  # fmt: skip
    state = model.set_joint(state, "hinge", angles=(5 * d, -3 * d), rates=(d, 2 * d))
    state = model.set_joint(state, "slide", displacements=[0.25], displacement_rates=[-0.5])
    np.testing.assert_allclose(case.state.q, state.q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(case.state.u, state.u, rtol=0, atol=1e-15)
    loads = [kd.JointLoad("hinge", (0.5, 0.0))]
    np.testing.assert_allclose(
        kd.forward_dynamics(case.model, case.state, list(case.loads)),
        kd.forward_dynamics(model, state, loads),
        rtol=1e-13, atol=1e-13,
    )  # fmt: skip
    assert case.settings == {"t_final": 100.0, "dt": 0.01}


# --------------------------------------------------------------------- bad input
def edit(old: str, new: str):
    assert old in HAND
    return HAND.replace(old, new, 1)


# (id, text, the text of the line the error must name (None: no line), parts of the message)
BAD = [
    ("malformed", "[[bodies]\nname = 1", "[[bodies]", ["line 1, column 9: not valid TOML"]),
    ("truncated", HAND[: HAND.index("mass_kg = 94.25") + 6], ("mass_k", 2), ["not valid TOML", "end of the file"]),
    ("missing_field", edit("mass_kg = 94.25\n", ""), ("[[bodies]]", 2),
     ['mass_kg in [[bodies]] #2 (name "antenna"): required field is missing']),
    ("wrong_type", edit("mass_kg = 94.25", 'mass_kg = "heavy"'), 'mass_kg = "heavy"',
     ['mass_kg in [[bodies]] #2 (name "antenna"): expected a number, got "heavy"']),
    ("bool_is_not_a_number", edit("mass_kg = 3", "mass_kg = true"), "mass_kg = true",
     ['mass_kg in [[bodies]] #3 (name "boom"): expected a number, got true']),
    ("unknown_kind", edit('kind = "prismatic"', 'kind = "slider"'), 'kind = "slider"',
     ['kind in [[joints]] #3 (name "slide"): expected one of "free", "revolute", "prismatic"', 'got "slider"']),
    ("unknown_key", edit("mass_kg = 94.25", "mas_kg = 94.25"), "mas_kg = 94.25",
     ['[[bodies]] #2 (name "antenna"): unknown key "mas_kg"; allowed keys are name, mass_kg,']),
    ("unknown_key_for_kind", edit('kind = "prismatic"', 'kind = "prismatic"\nseq = "123"'), 'seq = "123"',
     ['[[joints]] #3 (name "slide"): unknown key "seq"', "axis"]),
    ("unknown_top_table", HAND + "\n[solver]\nx = 1\n", "[solver]", ['unknown key "solver"']),
    ("unknown_array_of_tables", edit("[[bodies]]", "[[-bodies]]"), "[[-bodies]]",
     ['unknown key "-bodies"; allowed keys are model, bodies']),
    ("unknown_dotted_table", HAND + "\n[solver.newton]\nx = 1\n", "[solver.newton]",
     ['unknown key "solver"']),
    ("non_physical_inertia", edit("Izz = 2,", "Izz = -2,"), "Izz = -2,",
     ["inertia_kg_m2 in [[bodies]] #3", "body 'boom': inertia is not positive definite"]),
    ("triangle", edit("Ixx = 1, Iyy = 1.5, Izz = 2,", "Ixx = 1, Iyy = 1.5, Izz = 3,"), "Izz = 3,",
     ["inertia_kg_m2 in [[bodies]] #3", "triangle inequality", "check_triangle = false"]),
    ("negative_mass", edit("mass_kg = 3", "mass_kg = -3"), "mass_kg = -3",
     ['mass_kg in [[bodies]] #3 (name "boom")', "mass must be positive"]),
    ("two_inertias", edit("com_m = [0.5, 0, 0]", "com_m = [0.5, 0, 0]\ninertia_kg_m2 = {Ixx = 1, Iyy = 1, Izz = 1}"),
     ("[[bodies]]", 2), ["[[bodies]] #2", "give exactly one of inertia_kg_m2"]),
    ("short_vector", edit("com_m = [0.5, 0, 0]", "com_m = [0.5, 0]"), "com_m = [0.5, 0]",
     ["com_m in [[bodies]] #2", "expected a list of 3 numbers, got [0.5, 0]"]),
    ("bad_dcm", edit('inner_angles_deg = [90, 0, 0]\ninner_seq = "312"', "inner_rotation_dcm = [[1, 0, 0], [0, 1, 0], [0, 0, 2]]"),
     "inner_rotation_dcm =", ["inner_rotation_dcm in [[joints]] #2", "not a proper orthonormal matrix"]),
    ("seq_without_angles", edit('inner_angles_deg = [90, 0, 0]\n', ""), 'inner_seq = "312"',
     ["inner_seq in [[joints]] #2", "inner_seq needs"]),
    ("bad_seq", edit('inner_seq = "312"', 'inner_seq = "311"'), 'inner_seq = "311"', ["inner_seq in [[joints]] #2", "'311'"]),
    ("bad_axis", edit("axis = 1", "axis = 4"), "axis = 4", ["axis in [[joints]] #3", "expected one of [1, 2, 3], got 4"]),
    ("stiffness_count", edit("stiffness = [0.2, 0.0098]", "stiffness = [0.2, 0.0098, 1]"), "stiffness = [0.2, 0.0098, 1]",
     ["stiffness in [[joints]] #2", "expected 2 values"]),
    ("stiffness_poly_nan", edit("stiffness = [0.2, 0.0098]", "stiffness = [0.2, 0.0098]\nstiffness_poly = [1, nan]"),
     "stiffness_poly = [1, nan]", ["stiffness_poly in [[joints]] #2", "expected a finite number, got nan"]),
    ("damping_poly_pairs", edit("stiffness = [0.2, 0.0098]", "stiffness = [0.2, 0.0098]\ndamping_poly = [[1, 2], [3, 4], [5, 6]]"),
     "damping_poly =", ["damping_poly in [[joints]] #2", "joint 'hinge': damping_poly", "expected a pair or 2 pairs"]),
    ("unknown_inner", edit('inner = "antenna"', 'inner = "antena"'), 'inner = "antena"',
     ["inner in [[joints]] #3", "joint 'slide': unknown inner body 'antena' (did you mean 'antenna'?)"]),
    ("missing_kind", edit('kind = "free"\n', ""), ("[[joints]]", 1), ["kind in [[joints]] #1", "required field is missing"]),
    ("initial_unknown_joint", edit("[initial.hinge]", "[initial.hing]"), "[initial.hing]",
     ["[initial.hing]: no joint named 'hing' (did you mean 'hinge'?)"]),
    ("initial_length", edit("angles_deg = [5, -3]", "angles_deg = [5, -3, 1]"), "angles_deg = [5, -3, 1]",
     ["angles_deg in [initial.hinge]: joint 'hinge': angles needs 2 values, got 3"]),
    ("initial_quaternion_on_gimbal", edit("angles_deg = [5, -3]", "quaternion = [0, 0, 0, 1]"), "quaternion =",
     ["quaternion in [initial.hinge]: joint 'hinge' is a gimbal"]),
    ("initial_both_units", edit("rates_deg_s = [1, 2]", "rates_deg_s = [1, 2]\nrates_rad_s = [1, 2]"), "rates_rad_s",
     ["rates_rad_s in [initial.hinge]: give rates_deg_s or rates_rad_s, not both"]),
    ("load_unknown_body", HAND + '\n[[loads]]\ntype = "force"\nbody = "moon"\nvalues = [1, 2, 3]\n', 'body = "moon"',
     ["body in [[loads]] #2: no body named 'moon'"]),
    ("load_type", edit('type = "joint"', 'type = "push"'), 'type = "push"',
     ['type in [[loads]] #1: expected one of "force", "torque", "joint"']),
    ("load_dof", edit("values = [0.5, 0]", "values = [0.5]"), "values = [0.5]",
     ["values in [[loads]] #1: joint 'hinge' has 2 DOF, got 1 values"]),
    ("simulation_formulation", edit("dt_s = 0.01", 'dt_s = 0.01\nformulation = "lagrange"'), "formulation =",
     ['formulation in [simulation]: expected one of "kane", "msd", got "lagrange"']),
    ("simulation_method", edit("dt_s = 0.01", 'dt_s = 0.01\nmethod = "rk45"'), "method =",
     ['method in [simulation]: expected one of "rk4", "RK45"', 'got "rk45"']),
    ("simulation_negative_dt", edit("dt_s = 0.01", "dt_s = -0.01"), "dt_s = -0.01", ["dt_s in [simulation]: must be positive"]),
    ("simulation_nan_dt", edit("dt_s = 0.01", "dt_s = nan"), "dt_s = nan", ["dt_s in [simulation]: expected a finite number, got nan"]),
    ("huge_integer_mass", edit("mass_kg = 3", "mass_kg = " + "9" * 400), "mass_kg = 999",
     ["mass_kg in [[bodies]] #3", "expected a finite number"]),
    ("body_named_N", edit('name = "boom"', 'name = "N"'), 'name = "N"', ['name in [[bodies]] #3 (name "N"): \'N\' is reserved']),
    ("no_bodies", "[model]\ngravity_m_s2 = [0, 0, 0]\n", None, ["bodies: the file defines no bodies"]),
    ("two_inbound", edit('outer = "antenna"', 'outer = "boom"'), ("[[joints]]", 2),
     ["body 'boom' has two inbound joints", "declare one of them as a loop joint (a [[loops]] table"]),
    ("load_misspelt_joint", edit('joint = "hinge"', 'joint = "hnige"'), 'joint = "hnige"',
     ["joint in [[loads]] #1: no joint named 'hnige' (did you mean 'hinge'?)"]),
    ("load_misspelt_body", HAND + '\n[[loads]]\ntype = "force"\nbody = "bom"\nvalues = [1, 2, 3]\n', 'body = "bom"',
     ["body in [[loads]] #2: no body named 'bom' (did you mean 'boom'?)"]),
    ("limits_empty_range", edit("stiffness = 40", "stiffness = 40\nlimits = { lower = 0.5, upper = -0.5 }"), "limits =",
     ["limits.upper in [[joints]] #3 (name \"slide\"): the range is empty: upper -0.5 < lower 0.5"]),
    ("limits_unknown_key", edit("stiffness = 40", "stiffness = 40\nlimits = { low = 0.5 }"), "limits =",
     ['unknown key "low"; allowed keys are lower, upper, effort, velocity']),
    ("limits_nan", edit("stiffness = 40", "stiffness = 40\nlimits = { lower = nan }"), "limits =",
     ["limits.lower in [[joints]] #3", "nan"]),
    ("limits_negative_effort", edit("stiffness = 40", "stiffness = 40\nlimits = { effort = -1 }"), "limits =",
     ["limits.effort in [[joints]] #3", "must be positive, got -1"]),
    ("limits_on_a_gimbal", edit("rates_deg_s = [1, 2]\n\n[initial.slide]", "rates_deg_s = [1, 2]\n\n[initial.slide]").replace(
        'kind = "gimbal"', 'kind = "gimbal"\nlimits = { lower = -1, upper = 1 }'), "limits =",
     ["limits in [[joints]] #2 (name \"hinge\"): joint 'hinge' has 2 degrees of freedom: limits are a range of one coordinate"]),
    ("simulation_limits", edit("dt_s = 0.01", 'dt_s = 0.01\nlimits = "enforce"'), "limits =",
     ['limits in [simulation]: expected one of "warn", "stop", "ignore", got "enforce"']),
    ("central_and_uniform", edit("gravity_m_s2 = [0, 0, 0]", "gravity_m_s2 = [0, 0, 0]\ncentral_gravity = {}"),
     "central_gravity =", ["central_gravity in [model]: give gravity_m_s2 (a uniform field) or central_gravity, not both"]),
    ("central_negative_mu", edit("gravity_m_s2 = [0, 0, 0]", "\n[model.central_gravity]\nJ2 = 0.001\nmu_m3_s2 = -4e14"),
     "mu_m3_s2 = -4e14", ["central_gravity.mu_m3_s2 in [model]: must be positive, got -4"]),
    ("central_zero_radius", edit("gravity_m_s2 = [0, 0, 0]", "central_gravity = { radius_m = 0 }"),
     "central_gravity =", ["central_gravity.radius_m in [model]: must be positive, got 0.0"]),
    ("central_unknown_key", edit("gravity_m_s2 = [0, 0, 0]", "\n[model.central_gravity]\nmu = 4e14"), "mu = 4e14",
     ['[model]: unknown key "mu"; allowed keys are mu_m3_s2, J2, radius_m, center_m']),
    ("central_short_center", edit("gravity_m_s2 = [0, 0, 0]", "central_gravity = { center_m = [1, 2] }"),
     "central_gravity =", ["central_gravity.center_m in [model]: expected a list of 3 numbers, got [1, 2]"]),
    ("central_not_a_table", edit("gravity_m_s2 = [0, 0, 0]", "central_gravity = 4e14"),
     "central_gravity =", ["central_gravity in [model]: expected a table, got 4"]),
]  # fmt: skip


def test_limits_and_the_limits_setting_round_trip(tmp_path):
    """A joint's limits (open sides left out, or inf) and the run's limits setting are
    written and read back as given."""
    text = HAND.replace(
        "stiffness = 40", "stiffness = 40\nlimits = { lower = -0.2, upper = inf, effort = 30 }"
    ).replace("dt_s = 0.01", 'dt_s = 0.01\nlimits = "stop"')
    path = tmp_path / "in.toml"
    path.write_text(text)
    case = read_toml_case(path)
    lim = case.model.joint("slide").limits
    assert (lim.lower, lim.upper, lim.effort, lim.velocity) == (-0.2, np.inf, 30.0, np.inf)
    assert case.model.joint("hinge").limits is None
    assert case.settings["limits"] == "stop"
    write_toml(case.model, tmp_path / "out.toml", case.state, case.settings, loads=case.loads)
    written = (tmp_path / "out.toml").read_text()
    assert "limits = { lower = -0.2, effort = 30.0 }" in written
    back = read_toml_case(tmp_path / "out.toml")
    got = back.model.joint("slide").limits
    assert (got.lower, got.upper, got.effort, got.velocity) == (-0.2, np.inf, 30.0, np.inf)
    assert back.settings == case.settings


def test_a_file_with_limits_stops_the_slider_from_the_command_line(tmp_path):
    """A slider under gravity with limits and ``limits = "stop"`` in the file: the
    command line run (no --limits) holds it at the lower bound, reached at the free-fall
    time sqrt(2 d / g)."""
    from kanedyn.cli import main

    path = tmp_path / "slider.toml"
    path.write_text(
        textwrap.dedent("""
        [model]
        gravity_m_s2 = [0, 0, -9.81]
        [[bodies]]
        name = "block"
        mass_kg = 1
        inertia_kg_m2 = { Ixx = 0.1, Iyy = 0.1, Izz = 0.1 }
        [[joints]]
        name = "lift"
        outer = "block"
        kind = "prismatic"
        axis = 3
        limits = { lower = -0.5, upper = 0.5 }
        [simulation]
        t_final_s = 1
        dt_s = 0.001
        limits = "stop"
    """)
    )
    out = tmp_path / "run"
    assert main(["simulate", str(path), "--out", str(out), "--quiet"]) == 0
    header = (out / "trajectory.csv").read_text().splitlines()[0].split(",")
    assert header[1] == "lift.d0 [m]"
    z = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)[:, 1]
    assert z.min() >= -0.5 - 1e-12
    assert z[-1] == pytest.approx(-0.5, abs=1e-12)
    summary = (out / "summary.json").read_text()
    assert '"joint_limits": "stop"' in summary


def line_of(text: str, anchor: str | tuple[str, int]) -> int:
    """The 1-based line of the n-th line of ``text`` that contains ``anchor``."""
    needle, nth = anchor if isinstance(anchor, tuple) else (anchor, 1)
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[nth - 1]


@pytest.mark.parametrize(
    ("text", "anchor", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input_names_file_line_and_key(tmp_path, text, anchor, expected):
    """Each error names the file, the 1-based line (found here by searching the text for
    what the error is about) and the TOML key, in TOML syntax."""
    path = tmp_path / "model.toml"
    path.write_text(text)
    with pytest.raises(kd.FileFormatError) as info:
        read_toml_case(path)
    message = str(info.value)
    if anchor is None:
        assert message.startswith(f"{path}: "), message
    else:
        assert message.startswith(f"{path} line {line_of(text, anchor)}"), message
    assert "bodies[" not in message and "=False" not in message, message
    for part in expected:
        assert part in message, (part, message)


def test_unreadable_file():
    with pytest.raises(kd.FileFormatError, match="nowhere.toml: cannot read the file"):
        read_toml(Path("nowhere.toml"))


def test_write_refuses_what_it_cannot_store(tmp_path):
    model = kd.examples.double_pendulum()
    with pytest.raises(kd.ModelError, match="cannot write the load"):
        write_toml(model, tmp_path / "x.toml", loads=[lambda t, m, s, k: []])
    with pytest.raises(kd.ModelError, match="unknown settings"):
        write_toml(model, tmp_path / "x.toml", settings={"t_end": 1.0})
    with pytest.raises(kd.ModelError, match="nq"):
        write_toml(model, tmp_path / "x.toml", kd.State(np.zeros(5), np.zeros(2)))


def test_odd_names_are_quoted(tmp_path):
    model = kd.Model(
        [kd.Body('arm "1".x', 1.0, np.eye(3)), kd.Body("tip\tß", 1.0, np.eye(3))],
        [kd.Joint.revolute("j.0 [a]", None, 'arm "1".x'),
         kd.Joint.revolute("j=1", 'arm "1".x', "tip\tß", axis=1)],
    )  # fmt: skip
    state = model.set_joint(model.initial_state(), "j=1", angles=[0.5], rates=[1.0])
    write_toml(model, tmp_path / "odd.toml", state)
    case = read_toml_case(tmp_path / "odd.toml")
    assert_same_model(case.model, model)
    np.testing.assert_array_equal(case.state.q, state.q)


def test_schema_document_example_reads(tmp_path):
    """The complete example in docs/toml-schema.md is a valid file."""
    doc = Path(__file__).parents[2] / "docs" / "toml-schema.md"
    text = doc.read_text()
    start = text.index("```toml\n", text.index("## Complete example")) + len("```toml\n")
    example = text[start : text.index("```", start)]
    path = tmp_path / "example.toml"
    path.write_text(textwrap.dedent(example))
    case = read_toml_case(path)
    assert case.model.nb >= 3 and case.settings and case.loads
    kd.forward_dynamics(case.model, case.state, list(case.loads))


# --------------------------------------------------------------------------- central gravity
def test_central_gravity_round_trips_bit_for_bit(tmp_path):
    """A central field (kd.CentralGravity) is written as [model] central_gravity = {...}
    and read back with every number equal."""
    field = kd.CentralGravity(mu=3.986004418e14 * (1 + 1e-9), J2=kd.EARTH_J2,
                              radius=6378136.3, center=(1.5, -2.25, 1e-7))  # fmt: skip
    model = attrs.evolve(every_kind(), gravity=field)
    write_toml(model, tmp_path / "orbit.toml")
    text = (tmp_path / "orbit.toml").read_text()
    assert "gravity_m_s2" not in text
    back = read_toml(tmp_path / "orbit.toml").central_gravity
    assert back is not None
    assert (back.mu, back.J2, back.radius) == (field.mu, field.J2, field.radius)
    np.testing.assert_array_equal(back.center, field.center)


def test_hand_written_central_gravity_defaults_to_the_earth(tmp_path):
    """``[model.central_gravity]`` as a table of its own; keys left out take
    kd.CentralGravity's defaults (the Earth's mu and radius, J2 = 0, the centre at N's
    origin)."""
    path = tmp_path / "sat.toml"
    path.write_text(edit("gravity_m_s2 = [0, 0, 0]", "\n[model.central_gravity]\nJ2 = 1.0826e-3"))
    field = read_toml(path).central_gravity
    assert field is not None
    assert (field.mu, field.J2, field.radius) == (kd.EARTH_MU, 1.0826e-3, kd.EARTH_RADIUS)
    np.testing.assert_array_equal(field.center, np.zeros(3))
