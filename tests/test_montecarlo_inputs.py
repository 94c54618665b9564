"""Monte Carlo dispersions of a member's inputs: controller gains, reaction-wheel torque
limits and load magnitudes (kanedyn.simulation.montecarlo.inputs), against independent
oracles: kd.simulate of a controller built by hand from a member's row, and the closed
form of a rigid body spun up by a constant torque."""

from __future__ import annotations

import re

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import main
from kanedyn.simulation.montecarlo.dispersion import DispersionSpec, apply, sample

pd = pytest.importorskip("pandas")

T_FINAL, DT = 2.0, 0.05
OUTPUTS = ["root.rates.x", "root.rates.z", "wheel_x_spin.rates.0", "wheel_z_spin.rates.0"]


def slew():
    """A 10 degree slew about (1, 0, 1): the x wheel's command stays below its limit, so
    Kp and Kd shape it; the z wheel's limit is dispersed low, so it saturates."""
    return kd.examples.wheel_slew(10.0, (1.0, 0.0, 1.0))


CONTROL = (
    kd.Dispersion("controller.Kp", "normal", sigma=0.1, relative=True),
    kd.Dispersion("controller.Kd", "uniform", low=0.8, high=1.2, relative=True),
    kd.Dispersion("wheel_z.max_torque", "uniform", low=0.02, high=0.05),
)


@pytest.fixture(scope="module")
def control_run():
    case = slew()
    res = kd.monte_carlo(case.model, case.state, CONTROL, 4, T_FINAL, DT, seed=3,
                         controller=case.controller, outputs=OUTPUTS, chunk_size=3)  # fmt: skip
    return case, res


def by_hand(case, Kp, Kd, max_torque_z):
    """kd.simulate with a QuaternionPD law built from the values, not from the run."""
    wx, wy, wz = case.wheels
    wheels = (wx, wy, kd.ReactionWheel(wz.name, wz.body, axis=wz.axis, inertia=wz.inertia,
                                       mass=wz.mass, position=wz.position,
                                       max_torque=max_torque_z, friction=wz.friction))  # fmt: skip
    law = kd.QuaternionPD("hub", case.target, wheels, Kp=Kp, Kd=Kd)
    return kd.simulate(case.model, case.state, T_FINAL, DT,
                       controller=kd.Controller(0.1, law), progress=False)  # fmt: skip


def test_controller_member_equals_hand_built_simulate(control_run):
    case, res = control_run
    t = res.members
    assert list(t.columns[1:4]) == ["controller.Kp", "controller.Kd", "wheel_z.max_torque"]
    assert (t["status"] == "ok").all()
    cols = [case.model.speeds(j)[i] for j, i in
            [("root", 0), ("root", 2), ("wheel_x_spin", 0), ("wheel_z_spin", 0)]]  # fmt: skip
    nominal = (4.0, 18.0, 0.5)
    for _, row in t.head(2).iterrows():
        k = int(row["member"])
        values = (row["controller.Kp"], row["controller.Kd"], row["wheel_z.max_torque"])
        traj = by_hand(case, *values)
        assert np.array_equal(res.t, traj.t)
        for name, c in zip(OUTPUTS, cols, strict=True):
            assert np.array_equal(res.outputs[name][:, k], traj.u[:, c]), name
        # every dispersed value changes the result: put one back to nominal at a time
        for p in range(3):
            other = by_hand(case, *(nominal[p] if i == p else v for i, v in enumerate(values)))
            assert not np.allclose(other.u[-1], traj.u[-1], rtol=1e-6, atol=0), CONTROL[p]


def test_controller_results_do_not_depend_on_chunks(control_run):
    case, res = control_run
    for size in (1, 4):
        other = kd.monte_carlo(case.model, case.state, CONTROL, 4, T_FINAL, DT, seed=3,
                               controller=case.controller, outputs=OUTPUTS,
                               chunk_size=size)  # fmt: skip
        pd.testing.assert_frame_equal(res.members, other.members, check_exact=True)
        for name in OUTPUTS:
            assert np.array_equal(res.outputs[name], other.outputs[name])
    # member 3 of a 4-member run is member 3 of a run of 1 ... 4 in any chunk
    late = kd.monte_carlo(case.model, case.state, CONTROL, 5, T_FINAL, DT, seed=3,
                          controller=case.controller, outputs=OUTPUTS, chunk_size=2)  # fmt: skip
    pd.testing.assert_frame_equal(res.members, late.members.iloc[:4], check_exact=True)


def test_undispersed_controller_runs_every_member_with_it():
    """A controller given with only model dispersions: each member is kd.simulate of its
    own model under that controller."""
    case = slew()
    d = [kd.Dispersion("hub.mass", "uniform", low=190.0, high=210.0)]
    res = kd.monte_carlo(case.model, case.state, d, 2, T_FINAL, DT, controller=case.controller,
                         outputs=["root.rates.x"])  # fmt: skip
    for k in range(2):
        hub = attrs.evolve(case.model.bodies[0], mass=res.members["hub.mass"][k])
        model = kd.Model([hub, *case.model.bodies[1:]], case.model.joints)
        traj = kd.simulate(model, case.state, T_FINAL, DT, controller=case.controller,
                           progress=False)  # fmt: skip
        assert np.allclose(res.outputs["root.rates.x"][:, k], traj.u[:, 0], rtol=1e-12, atol=1e-15)


def test_values_land_in_member_controllers_and_loads():
    case = slew()
    loads = [kd.Torque("hub", (0.1, 0.2, 0.3)), kd.JointLoad("hinge_left", [0.05]),
             kd.Force("hub", (1.0, 0.0, 0.0), point=(0.0, 0.5, 0.0), frame="body")]  # fmt: skip
    ds = (
        *CONTROL,
        kd.Dispersion("loads.0.scale", "uniform", low=0.5, high=1.5),
        kd.Dispersion("loads.0.values.y", "normal", sigma=0.05),
        kd.Dispersion("loads.1.values.0", "normal", sigma=0.01),
        kd.Dispersion("loads.2.values.2", "choice", values=[-1.0, 1.0]),
    )
    spec = DispersionSpec(case.model, case.state, ds, 9, case.controller, loads)
    assert spec.nominals == (4.0, 18.0, 0.5, 1.0, 0.2, 0.05, 0.0)
    values = sample(spec, range(3))
    mem = apply(spec, values)
    assert mem.invalid == ["", "", ""] and mem.arrays == {}
    for b in range(3):
        Kp, Kd, tz, s, ty, tau, fz = values[b]
        law = mem.controllers[b].law
        assert (law.Kp, law.Kd) == (Kp, Kd) and mem.controllers[b].period == 0.1
        assert [w.max_torque for w in law.wheels] == [0.5, 0.5, tz]
        assert np.array_equal(law.wheels[2].axis, case.wheels[2].axis)
        torque, joint, force = mem.loads[b]
        assert torque.torque.tolist() == [s * 0.1, s * ty, s * 0.3]
        assert joint.values.tolist() == [tau] and joint.joint == "hinge_left"
        assert force.force.tolist() == [1.0, 0.0, fz] and force.frame == "body"
        assert force.point.tolist() == [0.0, 0.5, 0.0]
    # a wheel's friction is its hinge's damping, a model parameter
    friction = kd.Dispersion("wheel_x_spin.damping", "uniform", low=0.0, high=1e-3)
    spec = DispersionSpec(case.model, case.state, (friction,), 0, case.controller)
    assert spec.nominals == (case.wheels[0].friction,) == (1e-4,)
    assert "damping" in apply(spec, sample(spec, range(2))).arrays
    # the run's own controller and loads are untouched
    assert case.controller.law.Kp == 4.0 and loads[0].torque.tolist() == [0.1, 0.2, 0.3]
    # the draws are about the nominal gain: relative sigma 10 % of Kp = 4
    kp = sample(DispersionSpec(case.model, case.state, CONTROL[:1], 1, case.controller),
                range(2000))[:, 0]  # fmt: skip
    assert abs(kp.mean() - 4.0) < 4 * 0.4 / np.sqrt(2000)
    assert abs(kp.std(ddof=1) / 0.4 - 1.0) < 0.08


def test_negative_torque_limit_is_an_invalid_member():
    case = slew()
    d = [kd.Dispersion("wheel_y.max_torque", "choice", values=[-0.1, 0.3])]
    spec = DispersionSpec(case.model, case.state, tuple(d), 0, case.controller)
    mem = apply(spec, np.array([[-0.1], [0.3]]))
    assert mem.invalid[0] == "wheel 'wheel_y': max_torque must be non-negative, got -0.1"
    assert mem.invalid[1] == "" and mem.controllers[0] is None
    res = kd.monte_carlo(case.model, case.state, d, 6, 0.2, DT, controller=case.controller)
    bad = res.members["wheel_y.max_torque"] < 0
    assert bad.any() and (res.members.loc[bad, "status"] == "invalid").all()
    assert (res.members.loc[~bad, "status"] == "ok").all()


# ----------------------------------------------------------------------------- loads
def spinner():
    """One rigid body on a free joint, principal axes, spinning about z."""
    body = kd.Body("sat", mass=50.0, inertia=kd.inertia_tensor(2.0, 2.0, 3.0))
    model = kd.Model([body], [kd.Joint.free("root", outer="sat")])
    return model, model.set_joint(model.initial_state(), "root", rates=[0.0, 0.0, 0.2])


LOADS = [
    kd.Torque("sat", (0.0, 0.0, 0.4)),
    kd.Force("sat", (0.0, 2.0, 0.0), point=(0.25, 0.0, 0.0), frame="body"),
]
LOAD_DISPERSIONS = (
    kd.Dispersion("loads.0.scale", "uniform", low=0.5, high=1.5),
    kd.Dispersion("loads.0.values.z", "normal", sigma=0.1),
    kd.Dispersion("loads.1.values.y", "truncnormal", sigma=1.0, low=0.0, high=4.0),
    kd.Dispersion("sat.inertia.zz", "uniform", low=2.5, high=3.5),
    kd.Dispersion("root.rates.z", "normal", sigma=0.05),
)


def test_dispersed_torque_spin_rate_closed_form():
    """ω_z(t) = ω0 + T t / I_zz with T = scale · T_z + 0.25 m × F_y (the moment of the
    force, fixed in the body, about the mass centre): the spin stays on the principal z
    axis, so this is exact and RK4 integrates it to round-off."""
    model, state = spinner()
    t_final = 3.0
    res = kd.monte_carlo(model, state, LOAD_DISPERSIONS, 6, t_final, 0.1, seed=2, loads=LOADS,
                         outputs=["root.rates.z", "root.rates.x"], chunk_size=4)  # fmt: skip
    t = res.members
    assert (t["status"] == "ok").all()
    T = t["loads.0.scale"] * t["loads.0.values.z"] + 0.25 * t["loads.1.values.y"]
    expected = t["root.rates.z"] + T * t_final / t["sat.inertia.zz"]
    assert np.allclose(t["root.rates.z.final"], expected, rtol=1e-12, atol=0)
    assert np.abs(res.outputs["root.rates.x"]).max() < 1e-14
    # the members really differ (each has its own loads), and the nominal would be wrong
    assert t["root.rates.z.final"].std() > 0.05
    nominal = state.u[2] + (0.4 + 0.5) * t_final / 3.0
    assert not np.any(np.isclose(t["root.rates.z.final"], nominal, rtol=1e-6))
    # the same members in other chunks
    for size in (1, 6):
        other = kd.monte_carlo(model, state, LOAD_DISPERSIONS, 6, t_final, 0.1, seed=2,
                               loads=LOADS, outputs=["root.rates.z", "root.rates.x"],
                               chunk_size=size)  # fmt: skip
        pd.testing.assert_frame_equal(t, other.members, check_exact=True)


def test_dispersed_joint_load_closed_form():
    """A rotor on a hinge from N with a dispersed motor torque τ: θ̇ = τ t / I_zz."""
    rotor = kd.Body("rotor", mass=1.0, inertia=kd.inertia_tensor(0.3, 0.3, 0.5))
    model = kd.Model([rotor], [kd.Joint.revolute("spin", None, "rotor", axis=3)])
    d = [kd.Dispersion("loads.0.values.0", "uniform", low=-1.0, high=1.0)]
    res = kd.monte_carlo(model, model.initial_state(), d, 5, 2.0, 0.1,
                         loads=(kd.JointLoad("spin", [0.2]),))  # fmt: skip
    t = res.members
    assert np.allclose(t["spin.rates.0.final"], t["loads.0.values.0"] * 2.0 / 0.5, rtol=1e-12)


# ----------------------------------------------------------------------------- errors
def test_unknown_input_parameters_are_clear_errors():
    case = slew()
    m, s, ctrl = case.model, case.state, case.controller
    loads = [kd.Torque("hub", (0, 0, 1.0)), kd.JointLoad("hinge_left", [0.1])]
    bad = [
        ("controller.Kq", ctrl, None, r"QuaternionPD has no attribute 'Kq'; its numeric "
                                       r"attributes: Kp, Kd"),
        ("controller.target", ctrl, None, r"QuaternionPD.target is not a number \(ndarray\)"),
        ("controller", ctrl, None, r"has no attribute '\(nothing\)'"),
        ("controller.Kp", None, None, "no controller was given .* Python-only"),
        ("wheel_w.max_torque", ctrl, None, r"has no reaction wheel 'wheel_w' \(its wheels: "
                                           r"\['wheel_x', 'wheel_y', 'wheel_z'\]\)"),
        ("wheel_x.max_torque", None, None, "reaction-wheel parameter of a controller, and no "
                                           "controller was given"),
        ("wheel_x.friction", ctrl, None, "disperse 'wheel_x_spin.damping'"),
        ("loads.2.scale", ctrl, loads, r"there is no load 2 \(valid: 0 to 1\)"),
        ("loads.0.values.w", ctrl, loads, r"load 0 \(Torque\) has no component 'w'"),
        ("loads.1.values.1", ctrl, loads, r"load 1 \(JointLoad\) has no component '1' "
                                          r"\(valid: 0\)"),
        ("loads.0.torque.x", ctrl, loads, r"use loads.<k>.scale or loads.<k>.values.i"),
        ("loads.first.scale", ctrl, loads, r"use loads.<k>.scale"),
        ("loads.0.scale", ctrl, None, r"no loads were given"),
        ("loads.0.scale", ctrl, lambda t, m, s, k: [], "dispersing loads needs a list"),
    ]  # fmt: skip
    for parameter, controller, ld, message in bad:
        d = (kd.Dispersion(parameter, "normal", sigma=0.1),)
        with pytest.raises(kd.ModelError, match=f"parameter '{re.escape(parameter)}': .*{message}"):
            DispersionSpec(m, s, d, 0, controller, ld)
    # a law that is a plain function has no attributes to disperse
    plain = kd.Controller(0.1, lambda t, model, state: [])
    with pytest.raises(kd.ModelError, match="law \\(function\\) is not an attrs record"):
        kd.monte_carlo(m, s, [kd.Dispersion("controller.Kp", "normal", sigma=1.0)], 2, 0.1,
                       DT, controller=plain)  # fmt: skip
    with pytest.raises(kd.ModelError, match="controller must be a kd.Controller"):
        kd.monte_carlo(m, s, [kd.Dispersion("hub.mass", "normal", sigma=1.0)], 2, 0.1, DT,
                       controller=ctrl.law)  # fmt: skip
    # a body named like a prefix keeps its names unless the prefix's input is given too
    body = kd.Body("loads", mass=1.0, inertia=kd.inertia_tensor(1.0, 1.0, 1.0))
    odd = kd.Model([body], [kd.Joint.free("root", outer="loads")])
    d = (kd.Dispersion("loads.mass", "normal", sigma=0.1),)
    assert DispersionSpec(odd, odd.initial_state(), d, 0).nominals == (1.0,)
    with pytest.raises(kd.ModelError, match="both a body or joint of the model and the loads"):
        DispersionSpec(odd, odd.initial_state(), d, 0, None, [kd.Torque("loads", (0, 0, 1))])


# ----------------------------------------------------------------------------- CLI
def test_cli_disperses_file_loads_and_rejects_controller_gains(tmp_path, capsys):
    model, state = spinner()
    path = tmp_path / "spinner.toml"
    kd.io.write_toml(model, path, state=state, loads=LOADS,
                     settings={"t_final": 3.0, "dt": 0.1})  # fmt: skip
    disp = tmp_path / "disp.toml"
    disp.write_text(
        "seed = 2\noutputs = [\"root.rates.z\"]\n"
        + "".join(f'[[dispersion]]\nparameter = "{d.parameter}"\ndistribution = "uniform"\n'
                  f"low = {lo}\nhigh = {hi}\n"
                  for d, (lo, hi) in zip(LOAD_DISPERSIONS[:3], [(0.5, 1.5), (0.3, 0.5),
                                                                (1.0, 3.0)], strict=True))
    )  # fmt: skip
    out = tmp_path / "out"
    argv = ["montecarlo", str(path), "--dispersions", str(disp), "--n", "4", "--out", str(out),
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    table = pd.read_csv(out / "members.csv", keep_default_na=False, na_values=[""])
    T = table["loads.0.scale"] * table["loads.0.values.z"] + 0.25 * table["loads.1.values.y"]
    assert np.allclose(table["root.rates.z.final"], 0.2 + T * 3.0 / 3.0, rtol=1e-12)
    capsys.readouterr()
    disp.write_text('[[dispersion]]\nparameter = "controller.Kp"\ndistribution = "normal"\n'
                    "sigma = 0.1\n")  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "disp.toml: line 2: dispersion[1]: parameter 'controller.Kp': no controller was given"
    ) in err
    assert "Python-only" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
