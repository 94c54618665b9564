"""The kanedyn command line, end to end in a temporary folder (subprocess, like a user)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import SIMULATE_FILES, build_parser, main

DATA = Path(__file__).parent / "io" / "data"


def run(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "kanedyn", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_simulate_builtin_writes_consistent_files(tmp_path):
    res = run("simulate", "--t-final", "40", "--dt", "1.0", "--quiet", "--out", "out", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Explorer-1" in res.stdout and "degrees of freedom 14" in res.stdout
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    csv = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    header = (out / "trajectory.csv").read_text().splitlines()[0].split(",")
    assert header[0] == "t [s]" and "root.qw [1]" in header and "hinge0.angle1 [rad]" in header
    # the output grid: every 2 s from 0 to 40 (~20 outputs per 42 s period of the
    # fastest mode, an antenna mode)
    assert csv[:, 0].tolist() == [2.0 * k for k in range(21)]
    # energy in the summary equals KE + PE of the first and last CSV rows
    ke, pe = header.index("kinetic_energy [J]"), header.index("potential_energy [J]")
    assert summary["energy_initial_J"] == pytest.approx(csv[0, ke] + csv[0, pe], rel=1e-15)
    assert summary["energy_final_J"] == pytest.approx(csv[-1, ke] + csv[-1, pe], rel=1e-15)
    # and equals kanedyn's energy of the initial state computed independently here
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    assert csv[0, ke] == pytest.approx(kd.kinetic_energy(model, state), rel=1e-14)
    assert summary["steps"] == 40 and summary["dof"] == 14
    npz = np.load(out / "trajectory.npz")
    assert np.array_equal(npz["t"], csv[:, 0])
    assert np.allclose(npz["q"], csv[:, 1 : 1 + model.nq], rtol=0, atol=0)
    assert (out / "trajectory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out.iterdir()) == sorted(SIMULATE_FILES)


def test_simulate_42_file_and_formulation(tmp_path):
    res = run("simulate", str(DATA / "SC_Custom.txt"), "--t-final", "0.2", "--dt", "0.01",
              "--formulation", "msd", "--quiet", "--out", "o", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["formulation"] == "msd" and summary["steps"] == 20


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("simulate", "missing.toml"), "missing.toml: no such file"),
        (("simulate", "--dt", "-1"), "dt must be positive"),
        (("simulate", "--dt", "0"), "dt must be positive"),
        (("simulate", "--dt", "nan"), "dt must be a finite number"),
        (("simulate", "--t-final", "-5"), "t_final must be non-negative"),
        (("simulate", "--method", "nonsense"), "unknown method 'nonsense'"),
        (("convert", str(DATA / "SC_Custom.txt"), "x.txt"), "writes TOML model files only"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    res = (
        run(*args, "--out", "out", cwd=tmp_path)
        if args[0] == "simulate"
        else run(*args, cwd=tmp_path)
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "x.txt").exists()


def test_unreadable_model_file(tmp_path):
    bad = tmp_path / "model.toml"
    bad.write_text("[[bodies]]\nname = 'hub'\nmass_kg = 'heavy'\n")
    res = run("simulate", str(bad), "--out", "out", cwd=tmp_path)
    assert res.returncode == 2 and "mass_kg" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_convert_then_check_round_trip(tmp_path):
    res = run("convert", str(DATA / "SC_Custom.txt"), "custom.toml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    a, sa = kd.io.read_42(DATA / "SC_Custom.txt")
    b, sb = kd.io.read_model(tmp_path / "custom.toml")
    assert np.array_equal(kd.mass_matrix(a, sa), kd.mass_matrix(b, sb))
    assert np.array_equal(sa.u, sb.u)
    res = run("check", "custom.toml", cwd=tmp_path)
    assert res.returncode == 0 and "OK" in res.stdout and f"nu = {a.nu}" in res.stdout


def _bug(*args, **kwargs):
    raise RuntimeError("a bug\nover two lines")


def test_internal_error_is_short_exit_1_without_traceback(monkeypatch, capsys):
    monkeypatch.setattr(kd, "system_mass_properties", _bug)
    assert main(["check"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "kanedyn check: internal error: RuntimeError: a bug over two lines; "
        "run again with --debug for the traceback, and please report it"
    ]
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["--debug", "check"], ["check", "--debug"]])
def test_debug_lets_an_internal_error_propagate(monkeypatch, argv):
    monkeypatch.setattr(kd, "system_mass_properties", _bug)
    with pytest.raises(RuntimeError, match="a bug"):
        main(argv)


def test_debug_shows_the_traceback_of_a_bad_input_error(tmp_path):
    res = run("--debug", "check", "missing.toml", cwd=tmp_path)
    assert res.returncode == 1
    assert "Traceback" in res.stderr and "FileFormatError: missing.toml: no such file" in res.stderr
    res = run("check", "missing.toml", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_debug_is_global_before_or_after_the_subcommand():
    parser = build_parser()
    assert parser.parse_args(["check"]).debug is False
    assert parser.parse_args(["--debug", "check"]).debug is True
    assert parser.parse_args(["check", "--debug"]).debug is True


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("check", str(DATA / "arm3.urdf")), "gravity (0, 0, -9.81) m/s^2 (URDF default)"),
        (("check", str(DATA / "arm3.urdf"), "--gravity", "0,-1.62,0"),
         "gravity (0, -1.62, 0) m/s^2 (--gravity)"),
        (("check", str(DATA / "SC_Custom.txt")), "gravity (0, 0, 0) m/s^2 (42 default: none)"),
    ],
)  # fmt: skip
def test_check_prints_gravity_and_its_source(capsys, args, expected):
    assert main(list(args)) == 0
    assert expected in capsys.readouterr().out


def test_simulate_gravity_option(tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["simulate", str(DATA / "arm2.urdf"), "--t-final", "0.02", "--dt", "0.01", "--quiet"]
    assert main([*argv, "--gravity", "0,0,-3.5", "--out", str(out)]) == 0
    assert "gravity (0, 0, -3.5) m/s^2 (--gravity)" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gravity_m_s2"] == [0.0, 0.0, -3.5] and summary["gravity_source"] == "--gravity"
    assert main([*argv, "--gravity", "0,-9.81", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gravity: expected three numbers GX,GY,GZ" in err[0]
    assert not (tmp_path / "bad").exists()
