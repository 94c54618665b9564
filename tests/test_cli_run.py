"""The command line in the first hour: errors that name the line, runs that keep their
outputs when they fail or are interrupted, truthful summaries, ``check``'s report."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import SIMULATE_FILES, main

DATA = Path(__file__).parent / "io" / "data"

PENDULUM = """\
[model]
gravity_m_s2 = [0, -9.81, 0]

[[bodies]]
name = "bob"
mass_kg = 2.0
inertia_kg_m2 = { Ixx = 0.1, Iyy = 0.1, Izz = 0.1 }
com_m = [1.0, 0, 0]

[[joints]]
name = "pivot"
inner = "N"
outer = "bob"
kind = "revolute"
axis = 3
"""


def strict(text: str):
    """json.loads that refuses NaN and Infinity (strict JSON)."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))


def run(*args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "kanedyn", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, **kw)  # fmt: skip


# --------------------------------------------------------------------------- errors
def test_toml_syntax_error_keeps_line_and_column(tmp_path, capsys):
    path = tmp_path / "model.toml"
    path.write_text(PENDULUM.replace("mass_kg = 2.0", "mass_kg = = 2.0"))
    line = PENDULUM.splitlines().index("mass_kg = 2.0") + 1  # column 11: the second "="
    where = f"line {line}, column 11: not valid TOML"
    with pytest.raises(kd.FileFormatError, match=f"model.toml {where}"):
        kd.io.read_model(path)
    for command in ("check", "simulate", "derive"):
        assert (
            main(
                [
                    command,
                    str(path),
                    *(["--out", str(tmp_path / "o")] if command == "simulate" else []),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert where in err and "cannot tell the format" not in err


def test_toml_field_error_names_line_and_key_through_the_cli(tmp_path, capsys):
    path = tmp_path / "model.toml"
    path.write_text(PENDULUM.replace("axis = 3", "axis = 4"))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    line = PENDULUM.splitlines().index("axis = 3") + 1
    assert f'model.toml line {line}: axis in [[joints]] #1 (name "pivot")' in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--dt", "0"), "dt must be positive"),
        (("--dt", "nan"), "dt must be a finite number"),
        (("--t-final", "-1"), "t_final must be non-negative"),
        (("--t-final", "nan"), "t_final must be a finite number"),
        (("--t-final", "inf"), "t_final must be a finite number"),
        (("--output-every", "0"), "--output-every must be positive"),
    ],
)
def test_bad_run_options_are_refused_before_the_model_is_read(tmp_path, capsys, args, message):
    # the model file does not exist: the options are checked first
    assert (
        main(["simulate", str(tmp_path / "missing.toml"), *args, "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err
    assert message in err and "missing.toml" not in err
    assert not (tmp_path / "o").exists()


def test_output_every_not_a_multiple_of_dt_gets_the_api_message(tmp_path, capsys):
    model = kd.examples.explorer1()
    with pytest.raises(kd.ModelError) as info:
        kd.simulate(model, kd.examples.explorer1_state(model), 10.0, 1.0, output_every=1.5)
    assert main(["simulate", "--t-final", "10", "--output-every", "1.5", "--quiet",
                 "--out", str(tmp_path / "o")]) == 2  # fmt: skip
    assert str(info.value) in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_run_refused_by_simulate_leaves_no_files(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise kd.ModelError("refused")

    monkeypatch.setattr(kd, "simulate", refuse)
    assert main(["simulate", "--t-final", "10", "--quiet", "--out", str(tmp_path / "o")]) == 2
    assert "refused" in capsys.readouterr().err and not (tmp_path / "o").exists()
    (tmp_path / "o2").mkdir()  # a folder that was there stays, empty
    assert main(["simulate", "--t-final", "10", "--quiet", "--out", str(tmp_path / "o2")]) == 2
    assert list((tmp_path / "o2").iterdir()) == []


def test_output_that_would_not_fit_is_refused_before_the_run(tmp_path, capsys):
    assert main(["simulate", "--t-final", "1e13", "--quiet", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "more than the available memory" in err and "--output-every" in err
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- nothing lost
def test_diverging_run_writes_the_partial_outputs_and_says_why(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["simulate", "--dt", "50", "--t-final", "5000", "--quiet", "--force",
                 "--out", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "the step may be too large for this model's fastest mode" in err
    assert "warning: dt = 50 s is unstable for RK4" in err  # said before the run
    assert sorted(p.name for p in out.iterdir()) == sorted(SIMULATE_FILES)
    summary = strict((out / "summary.json").read_text())
    assert summary["status"] == "diverged" and 0 < summary["t_reached_s"] < 5000
    assert summary["steps"] == summary["t_reached_s"] / 50  # output every step
    assert "error" in summary and "t = " in summary["error"]
    data = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1, ndmin=2)
    npz = np.load(out / "trajectory.npz")
    assert data.shape[0] == summary["outputs"] == npz["t"].size
    assert data[-1, 0] == summary["t_reached_s"] == npz["t"][-1]


def test_fixed_base_urdf_summary_is_strict_json_without_nutation(tmp_path):
    res = run("simulate", str(DATA / "arm2.urdf"), "--t-final", "1", "--quiet", "--out", "o",
              cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "o" / "summary.json").read_text()
    summary = strict(text)
    assert "nutation_initial_deg" not in summary and "nutation" not in res.stdout
    assert "nan" not in res.stdout.lower()


def test_zero_initial_energy_and_momentum_give_absolute_changes(tmp_path):
    """A pendulum released at rest level with its pivot: E0 = 0 and H0 = 0. The summary
    gives absolute changes (not a relative 0 when the run drifted)."""
    (tmp_path / "p.toml").write_text(PENDULUM)
    out = tmp_path / "o"
    assert main(["simulate", str(tmp_path / "p.toml"), "--t-final", "2", "--dt", "0.05",
                 "--output-every", "0.05", "--quiet", "--out", str(out)]) == 0  # fmt: skip
    s = strict((out / "summary.json").read_text())
    assert "energy_relative_change" not in s
    rows = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    header = next(csv.reader(open(out / "trajectory.csv")))
    E = rows[:, header.index("kinetic_energy [J]")] + rows[:, header.index("potential_energy [J]")]
    assert E[0] == 0.0 and s["energy_change_J"] == E[-1] != 0.0
    # grounded: H is not conserved (gravity turns the pendulum), so no drift is reported
    H = rows[:, [header.index(f"H{c} [N m s]") for c in "xyz"]]
    assert np.linalg.norm(H, axis=1).max() > 0.1
    assert not any("momentum_drift" in k and k != "momentum_drift_not_shown" for k in s)
    assert "the root joint 'pivot' holds 'bob' to N" in s["momentum_drift_not_shown"]


def _long_run(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kanedyn", "simulate", *args, "--quiet", "--out", "o"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _interrupted(proc: subprocess.Popen, sig: int, ready, out: Path) -> dict:
    """Send ``sig`` once ``ready()`` (polled for up to 120 s); the run must end with exit
    code 130, one line naming the time, its four files and an "interrupted" summary."""
    deadline = time.monotonic() + 120
    try:
        while not ready():
            if time.monotonic() > deadline:
                pytest.fail("the run was not ready to stop in 120 s")
            time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted at t = " in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == sorted(SIMULATE_FILES)
    summary = strict((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    return summary


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)]
)
def test_signal_ends_the_run_with_valid_partial_outputs_and_no_temporary_files(tmp_path, sig):
    proc = _long_run(tmp_path, "--t-final", "1e6", "--output-every", "10")
    out = tmp_path / "o"
    csv_path = out / "trajectory.csv"
    # once the stream has written rows
    summary = _interrupted(
        proc, sig, lambda: csv_path.exists() and csv_path.read_text().count("\n") > 50, out
    )
    assert [p.name for p in tmp_path.iterdir()] == ["o"]  # no temporary folders
    assert 0 < summary["t_reached_s"] < 1e6
    rows = np.loadtxt(csv_path, delimiter=",", skiprows=1, ndmin=2)
    assert rows[-1, 0] == summary["t_reached_s"] and rows.shape[0] == summary["outputs"]
    assert np.load(out / "trajectory.npz")["t"].size == summary["outputs"]


@pytest.mark.slow
def test_ctrl_c_ends_an_energy_momentum_run_with_its_outputs(tmp_path):
    """The energy-momentum scheme's run streams its rows while it goes; stopped once
    it has written 100, it writes the outputs it reached (at least those 100: the stop
    may come before the next output), labelled with the director formulation and NumPy
    engine, not the initial state alone."""
    proc = _long_run(tmp_path, "--method", "energy-momentum")
    out = tmp_path / "o"
    csv_path = out / "trajectory.csv"
    summary = _interrupted(
        proc,
        signal.SIGINT,
        lambda: csv_path.exists() and csv_path.read_text().count("\n") > 100,  # header + 100
        out,
    )
    assert summary["t_reached_s"] > 0.0
    assert summary["formulation"] == "directors" and summary["engine"] == "dense"
    rows = np.loadtxt(csv_path, delimiter=",", skiprows=1, ndmin=2)
    assert rows[-1, 0] == summary["t_reached_s"] and rows.shape[0] == summary["outputs"] >= 100


# --------------------------------------------------------------------------- check
def test_check_labels_joints_and_reports_T_V_E(tmp_path, capsys):
    path = tmp_path / "p.toml"
    state_rate = 2.0
    path.write_text(
        PENDULUM + f"\n[initial.pivot]\nangles_rad = [0.5]\nrates_rad_s = [{state_rate}]\n"
    )
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "revolute about axis 3" in out and "gimbal" not in out
    # T = ½ (Izz + m l²) θ'², V = -m g·r with r = l (cos θ, sin θ)
    T = 0.5 * (0.1 + 2.0 * 1.0**2) * state_rate**2
    V = 2.0 * 9.81 * math.sin(0.5)
    line = next(x for x in out.splitlines() if "kinetic T" in x)
    values = [float(w) for w in line.replace(",", " ").split() if w[0].isdigit() or w[0] == "-"]
    np.testing.assert_allclose(values, [T, V, T + V], rtol=1e-5)  # printed to 6 digits
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "free" in out and "gimbal 2-DOF" in out


def test_check_warns_at_a_gimbals_singular_angle(tmp_path, capsys):
    text = PENDULUM.replace('kind = "revolute"\naxis = 3', 'kind = "gimbal"\nseq = "123"\ndof = 3')
    path = tmp_path / "g.toml"
    path.write_text(text + "\n[initial.pivot]\nangles_deg = [0, 89.99, 0]\n")
    assert main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "'pivot' (3-DOF gimbal, sequence 123) starts near its singular angle" in err
    path.write_text(text + "\n[initial.pivot]\nangles_deg = [0, 30, 0]\n")
    assert main(["check", str(path)]) == 0
    assert "singular" not in capsys.readouterr().err


def test_check_refuses_infinite_energy(tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_text(PENDULUM + "\n[initial.pivot]\nrates_rad_s = [1e200]\n")
    assert main(["check", str(path)]) == 2
    assert "the initial energy is not finite" in capsys.readouterr().err


@pytest.mark.parametrize(
    "edit",
    [
        ("mass_kg = 2.0", "mass_kg = 1" + "0" * 30),  # a huge integer mass
        ("Ixx = 0.1, Iyy = 0.1, Izz = 0.1", "Ixx = 1e-30, Iyy = 1e-30, Izz = 1e-30"),
        ("Ixx = 0.1, Iyy = 0.1, Izz = 0.1", "Ixx = 1e30, Iyy = 1e30, Izz = 1e30"),
    ],
)
def test_edge_inputs_run_or_are_refused_never_an_internal_error(tmp_path, edit):
    path = tmp_path / "p.toml"
    path.write_text(PENDULUM.replace(*edit))
    for args in (("check", str(path)), ("simulate", str(path), "--t-final", "0.1", "--quiet")):
        assert main(
            [*args] + (["--out", str(tmp_path / "o")] if args[0] == "simulate" else [])
        ) in (0, 2)


def test_help_shows_the_defaults():
    res = subprocess.run([sys.executable, "-m", "kanedyn", "simulate", "--help"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    text = " ".join(res.stdout.split())
    for option in ("--t-final", "--dt", "--output-every", "--method", "--formulation",
                   "--engine", "--out", "--quiet"):  # fmt: skip
        after = text.split(f"{option} ", 1)[1] if f"{option} " in text else text
        assert "default" in after.split(" --")[0], option


def test_check_imports_neither_matplotlib_nor_sympy():
    code = ("import sys; from kanedyn.cli import main; main(['check']); "
            "print(sorted(m for m in ('matplotlib', 'sympy') if m in sys.modules))")  # fmt: skip
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ})  # fmt: skip
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stderr


def test_summary_reports_the_time_split(tmp_path):
    assert main(["simulate", "--t-final", "20", "--quiet", "--out", str(tmp_path / "o")]) == 0
    s = strict((tmp_path / "o" / "summary.json").read_text())
    assert set(s["timing_s"]) == {"load", "compile", "integrate", "write"}
    assert all(v >= 0 for v in s["timing_s"].values())


def test_default_output_cadence_resolves_the_fastest_mode(tmp_path):
    """A torsion spring k = 400 N m/rad on I = 4 kg m²: ω = 10 rad/s, period 2π/10 s.
    Without --output-every the CLI writes at least ~20 samples per period."""
    path = tmp_path / "spring.toml"
    path.write_text(
        PENDULUM.replace("[0, -9.81, 0]", "[0, 0, 0]")
        .replace("Ixx = 0.1, Iyy = 0.1, Izz = 0.1", "Ixx = 4, Iyy = 4, Izz = 4")
        .replace("com_m = [1.0, 0, 0]", "com_m = [0, 0, 0]")
        + "stiffness = 400.0\n\n[initial.pivot]\nangles_rad = [0.1]\n"
    )
    out = tmp_path / "o"
    assert main(["simulate", str(path), "--t-final", "2", "--dt", "0.001", "--quiet",
                 "--out", str(out)]) == 0  # fmt: skip
    s = strict((out / "summary.json").read_text())
    period = 2 * math.pi / 10.0
    assert period / 40 < s["output_every_s"] <= period / 20
    rows = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    assert rows.shape[0] == s["outputs"] and np.all(np.diff(rows[:, 0]) <= period / 20 + 1e-12)


def test_output_that_would_not_fit_on_disk_is_refused(tmp_path, capsys, monkeypatch):
    import shutil

    from kanedyn.simulation import output

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(output.shutil, "disk_usage", lambda p: usage._replace(free=1000))
    assert main(["simulate", "--t-final", "100", "--quiet", "--out", str(tmp_path / "o")]) == 2
    assert "more than the free disk space" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_zero_quaternion_is_refused_with_its_line(tmp_path, capsys):
    free = PENDULUM.replace('kind = "revolute"\naxis = 3', 'kind = "free"')
    path = tmp_path / "q.toml"
    path.write_text(free + "\n[initial.pivot]\nquaternion = [0, 0, 0, 0]\n")
    assert main(["check", str(path)]) == 2
    line = len(free.splitlines()) + 3
    assert (
        f"line {line}: quaternion in [initial.pivot]: must not be zero" in capsys.readouterr().err
    )


def test_the_csv_units_are_documented():
    from kanedyn.simulation.trajectory import csv_header

    doc = (Path(__file__).parents[1] / "docs" / "reference" / "cli.md").read_text()
    model = kd.examples.explorer1()
    units = {h[h.rindex("[") :] for h in csv_header(model)}
    units |= {h[h.rindex("[") :] for h in csv_header(kd.examples.hub_with_panels())}
    for unit in units:
        assert f" {unit}`" in doc, unit


# --------------------------------------------------------------------------- messages
def test_a_folder_given_as_the_model_says_it_is_a_folder(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "p.toml").write_text(PENDULUM)
    for command in ("check", "simulate"):
        assert main([command, str(tmp_path / "m"), "--out", str(tmp_path / "o")][
            : 2 if command == "check" else 4]) == 2  # fmt: skip
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a folder, not a model file" in err
        assert "p.toml" in err and "no such file" not in err


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_a_bad_out_is_one_line_and_no_errno(tmp_path, capsys, where):
    (tmp_path / "f").write_text("not a folder")
    out = tmp_path / "f" if where == "file" else tmp_path / "f" / "o"
    assert main(["simulate", "--t-final", "1", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}" in err and "Errno" not in err
    assert ("exists and is not a folder" if where == "file" else "is a file, not a folder") in err
    assert (tmp_path / "f").read_text() == "not a folder"


def test_a_step_longer_than_the_run_is_refused_unless_forced(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["simulate", "--dt", "1e6", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dt = 1e+06 s is longer than the run (t_final = 20000 s)" in err
    assert "--force" in err and not out.exists()
    assert main(["simulate", "--dt", "20", "--t-final", "100", "--quiet", "--out", str(out)]) == 2
    assert "is unstable for RK4" in capsys.readouterr().err and not out.exists()


def test_a_free_body_summary_reports_the_momentum_drift(tmp_path):
    out = tmp_path / "o"
    assert main(["simulate", "--t-final", "100", "--quiet", "--out", str(out)]) == 0
    s = strict((out / "summary.json").read_text())
    assert "momentum_drift_not_shown" not in s
    assert s["angular_momentum_relative_drift"] < 1e-6 and "nutation_final_deg" in s
    assert s["steps"] == 100 and s["status"] == "completed"


def test_a_spacecraft_in_orbit_reports_the_momentum_about_the_centre(tmp_path):
    """In a central field only the angular momentum about the centre is conserved: the
    summary reports its drift (RK4, 600 s at 1 s: round-off of its 2.7e13 N m s)."""
    body = kd.Body("sat", mass=500.0, inertia=kd.inertia_tensor(100.0, 120.0, 40.0))
    model = kd.Model([body], [kd.Joint.free("root", "sat")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.circular(7.0e6, i=0.4)
    state = orbit.place(model, model.initial_state(), "root", angles=(0.0, 0.1, 0.0))
    path = tmp_path / "sat.toml"
    kd.io.write_toml(model, path, state)
    out = tmp_path / "o"
    args = ["simulate", str(path), "--t-final", "600", "--dt", "1", "--quiet", "--out", str(out)]
    assert main(args) == 0
    s = strict((out / "summary.json").read_text())
    assert "gravity acts on the system" in s["momentum_drift_not_shown"]
    assert s["angular_momentum_about_center_relative_drift"] < 1e-12
