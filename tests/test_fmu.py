"""Tests of ``kd.codegen.to_fmu`` and ``kanedyn export-fmu``: the FMI 2.0 co-simulation
FMU loaded and run by fmpy (an independent FMI importer; skipped, with the reason, when
fmpy or a C compiler is missing).

Oracles: fmpy's validation of the FMU (the FMI 2.0 schema and its rules); ``kd.simulate``
at the same step, with the same efforts, for the FMU's simulation; a model rebuilt with
other numbers for a parameter set through the FMU.
"""

from __future__ import annotations

import shutil
import zipfile

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import main
from kanedyn.errors import ModelError
from tests.test_compiled import draw_state
from tests.test_to_c import four_bar_start, small_spacecraft

fmpy = pytest.importorskip("fmpy", reason="fmpy (the fmu extra) is not installed")
pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
    reason="no C compiler (cc, gcc or clang) on PATH",
)


@pytest.fixture(scope="module")
def fmu(tmp_path_factory):
    path = tmp_path_factory.mktemp("fmu") / "sc.fmu"
    assert kd.codegen.to_fmu(small_spacecraft(), path, step=0.01, name="sc") == path
    return path


def python_engine(monkeypatch):
    """kd.simulate on the Python engine (the RK4 step the C writes, operation for
    operation)."""
    from kanedyn.compiled import native, tcc

    monkeypatch.setattr(native, "unavailable", lambda: "test")
    monkeypatch.setattr(tcc, "unavailable", lambda: "test")


def test_fmu_passes_fmpy_validation_and_holds_its_parts(fmu):
    from fmpy.validation import validate_fmu

    assert validate_fmu(str(fmu)) == []
    names = zipfile.ZipFile(fmu).namelist()
    assert "modelDescription.xml" in names
    assert {"sources/sc.c", "sources/sc.h", "sources/sc_fmu.c"} <= set(names)
    assert any(n.startswith("binaries/") and n.split("/")[-1].startswith("sc.") for n in names)
    md = fmpy.read_model_description(str(fmu))
    kinds = {v.name: (v.causality, v.variability) for v in md.modelVariables}
    model = small_spacecraft()
    assert kinds["free.qw"] == ("output", "continuous")
    assert kinds["hinge.w0"] == ("output", "continuous")
    assert kinds["tau.hinge.w0"] == ("input", "continuous")
    assert kinds["panel.mass"] == ("parameter", "tunable")
    assert sum(c == "output" for c, _ in kinds.values()) == model.nq + model.n
    assert kinds["load.panel.force.y"] == ("input", "continuous")
    assert kinds["load.hub.torque.z"] == ("input", "continuous")
    assert sum(c == "input" for c, _ in kinds.values()) == model.n + 6 * model.nb
    units = {v.name: v.unit for v in md.modelVariables}
    assert units["load.panel.force.y"] == "N" and units["load.hub.torque.z"] == "N.m"


def test_fmu_simulation_equals_kd_simulate(fmu, monkeypatch):
    """From a drawn state, with a constant effort on the hinge and the slide: fmpy's run
    of the FMU and kd.simulate at the same step agree to 1e-12 at every output."""
    python_engine(monkeypatch)
    model = small_spacecraft()
    state = draw_state(model, 5, 1.0)
    start = dict(zip(kd.model.names.coordinate_names(model), state.q.tolist(), strict=True))
    start.update(zip(kd.model.names.speed_names(model), state.u.tolist(), strict=True))
    start["tau.hinge.w0"], start["tau.slide.s0"] = 0.3, -0.2
    res = fmpy.simulate_fmu(str(fmu), stop_time=0.5, step_size=0.01, output_interval=0.01,
                            start_values=start)  # fmt: skip
    loads = [kd.JointLoad("hinge", [0.3]), kd.JointLoad("slide", [-0.2])]
    traj = kd.simulate(model, state, 0.5, 0.01, loads=loads, progress=False)
    assert len(res) == len(traj.t) and np.allclose(res["time"], traj.t)
    for i, nm in enumerate(kd.model.names.coordinate_names(model)):
        np.testing.assert_allclose(res[nm], traj.q[:, i], rtol=0, atol=1e-12)
    for i, nm in enumerate(kd.model.names.speed_names(model)):
        np.testing.assert_allclose(res[nm], traj.u[:, i], rtol=0, atol=1e-12)
    assert np.max(np.abs(traj.q[-1] - state.q)) > 1e-2  # it moved


def test_fmu_body_loads_equal_kd_simulate(fmu, monkeypatch):
    """A constant torque and force in body axes on the panel and the hub, and an effort
    on the hinge: fmpy's run and kd.simulate with kd.Torque / kd.Force records
    (frame="body", at the mass centre) agree to 1e-12."""
    python_engine(monkeypatch)
    model = small_spacecraft()
    state = draw_state(model, 7, 1.0)
    start = dict(zip(kd.model.names.coordinate_names(model), state.q.tolist(), strict=True))
    start.update(zip(kd.model.names.speed_names(model), state.u.tolist(), strict=True))
    panel_T, panel_F, hub_F = [0.1, -0.2, 0.3], [0.0, 0.5, -0.4], [1.0, 0.2, 0.0]
    for c, axis in enumerate("xyz"):
        start[f"load.panel.torque.{axis}"] = panel_T[c]
        start[f"load.panel.force.{axis}"] = panel_F[c]
        start[f"load.hub.force.{axis}"] = hub_F[c]
    start["tau.hinge.w0"] = 0.1
    res = fmpy.simulate_fmu(str(fmu), stop_time=0.3, step_size=0.01, output_interval=0.01,
                            start_values=start)  # fmt: skip
    loads = [kd.Torque("panel", panel_T, frame="body"), kd.Force("panel", panel_F, frame="body"),
             kd.Force("hub", hub_F, frame="body"), kd.JointLoad("hinge", [0.1])]  # fmt: skip
    traj = kd.simulate(model, state, 0.3, 0.01, loads=loads, progress=False)
    unloaded = kd.simulate(model, state, 0.3, 0.01, loads=loads[3:], progress=False)
    assert np.max(np.abs(traj.u[-1] - unloaded.u[-1])) > 1e-2  # the body loads act
    assert len(res) == len(traj.t)
    for i, nm in enumerate(kd.model.names.coordinate_names(model)):
        np.testing.assert_allclose(res[nm], traj.q[:, i], rtol=0, atol=1e-12)
    for i, nm in enumerate(kd.model.names.speed_names(model)):
        np.testing.assert_allclose(res[nm], traj.u[:, i], rtol=0, atol=1e-12)


def test_fmu_parameter_equals_a_rebuilt_model(fmu, monkeypatch):
    python_engine(monkeypatch)
    rebuilt = small_spacecraft(panel_mass=3.5, stiffness=7.0)
    state = draw_state(rebuilt, 6, 1.0)
    start = dict(zip(kd.model.names.coordinate_names(rebuilt), state.q.tolist(), strict=True))
    start.update(zip(kd.model.names.speed_names(rebuilt), state.u.tolist(), strict=True))
    start.update({"panel.mass": 3.5, "hinge.stiffness0": 7.0})
    res = fmpy.simulate_fmu(str(fmu), stop_time=0.2, step_size=0.01, output_interval=0.01,
                            start_values=start)  # fmt: skip
    traj = kd.simulate(rebuilt, state, 0.2, 0.01, progress=False)
    np.testing.assert_allclose(res["hinge.angle0"], traj.q[:, 4], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res["hinge.w0"], traj.u[:, 3], rtol=0, atol=1e-12)


def test_fmu_of_the_four_bar_equals_kd_simulate(tmp_path):
    """A closed loop: the four-bar assembled with its crank held and spun, as an FMU
    (its step projects onto the loop) run by fmpy, against kd.simulate on the native
    engine to 1e-12, with an effort on the crank; the loop stays closed."""
    from kanedyn.dynamics.loops import loop_terms

    model = kd.examples.four_bar()
    state = four_bar_start(model)
    path = kd.codegen.to_fmu(model, tmp_path / "fb.fmu", step=0.01, name="fb", state=state)
    res = fmpy.simulate_fmu(str(path), stop_time=0.5, step_size=0.01, output_interval=0.01,
                            start_values={"tau.crank.w0": 0.4})  # fmt: skip
    traj = kd.simulate(model, state, 0.5, 0.01, loads=[kd.JointLoad("crank", [0.4])],
                       engine="auto", progress=False)  # fmt: skip
    assert traj.engine == "native" and len(res) == len(traj.t)
    for i, nm in enumerate(kd.model.names.coordinate_names(model)):
        np.testing.assert_allclose(res[nm], traj.q[:, i], rtol=0, atol=1e-12)
    for i, nm in enumerate(kd.model.names.speed_names(model)):
        np.testing.assert_allclose(res[nm], traj.u[:, i], rtol=0, atol=1e-12)
    q = np.array([res[nm][-1] for nm in kd.model.names.coordinate_names(model)])
    assert np.max(np.abs(loop_terms(model, q).Phi)) < 1e-12
    assert abs(q[0] - state.q[0]) > 0.05  # it moved


def test_to_fmu_rejects_bad_input(tmp_path):
    with pytest.raises(ModelError, match="step must be a positive number"):
        kd.codegen.to_fmu(small_spacecraft(), tmp_path / "a.fmu", step=0.0)
    with pytest.raises(ModelError, match="C identifier"):
        kd.codegen.to_fmu(small_spacecraft(), tmp_path / "a.fmu", name="a-b")


def test_cli_export_fmu(tmp_path, capsys):
    from fmpy.validation import validate_fmu

    out = tmp_path / "panel.fmu"
    assert main(["export-fmu", str(kd.examples.path("panel.toml")), str(out),
                 "--step", "0.05"]) == 0  # fmt: skip
    assert validate_fmu(str(out)) == []
    md = fmpy.read_model_description(str(out))
    assert md.coSimulation.modelIdentifier == "panel"
    assert md.defaultExperiment.stepSize == "0.05"
    assert {"load.panel.force.x", "hinge.stiffness0"} <= {v.name for v in md.modelVariables}
    assert "panel.fmu" in capsys.readouterr().out
    assert main(["export-fmu", str(tmp_path / "missing.txt"), str(out)]) != 0
    err = capsys.readouterr().err
    assert "missing.txt" in err and "Traceback" not in err
