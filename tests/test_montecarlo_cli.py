"""``kanedyn montecarlo``: files, settings from the model file, resume, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import main
from tests.test_montecarlo import SPEC_TOML

pd = pytest.importorskip("pandas")


@pytest.fixture()
def files(tmp_path):
    """Explorer-1 with a short [simulation] table, and the Explorer-1 dispersion file."""
    m = kd.examples.explorer1()
    s = kd.examples.explorer1_state(m)
    model = tmp_path / "explorer1.toml"
    kd.io.write_toml(m, model, state=s, settings={"t_final": 6.0, "dt": 1.0,
                                                  "output_every": 2.0})  # fmt: skip
    disp = tmp_path / "disp.toml"
    disp.write_text(SPEC_TOML)
    return m, s, model, disp, tmp_path


def test_montecarlo_writes_members_and_summary(files, capsys):
    m, s, model, disp, tmp = files
    out = tmp / "out"
    argv = ["montecarlo", str(model), "--dispersions", str(disp), "--n", "12", "--out",
            str(out), "--quiet", "--chunk-size", "5"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "12 members, seed 7, t = 6 s, dt = 1 s, 3 chunks (0 resumed)" in text
    assert "root.rates.z.final" in text  # the percentile table
    table = pd.read_csv(out / "members.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns[:5]) == [
        "member", "hub.mass", "root.rates.z", "hinge0.stiffness", "hub.com.z"
    ]  # fmt: skip
    assert list(table.columns[-2:]) == ["status", "error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 12 and summary["seed"] == 7 and summary["counts"]["ok"] == 12
    assert (out / "montecarlo.png").stat().st_size > 0
    # the same run in Python gives the same table
    res = kd.monte_carlo(m, s, kd.io.read_dispersions(disp)[0], 12, 6.0, 1.0, seed=7,
                         output_every=2.0, outputs=["root.rates.z"])  # fmt: skip
    assert np.allclose(table["root.rates.z.final"], res.members["root.rates.z.final"],
                       rtol=1e-15)  # fmt: skip
    # the same command again resumes from the chunks on disk; --t-final overrides the file
    assert main(argv) == 0
    assert "3 chunks (3 resumed)" in capsys.readouterr().out
    short = [*argv[:-3], "--t-final", "2", "--out", str(tmp / "short"), "--quiet"]
    assert main(short) == 0
    assert json.loads((tmp / "short" / "summary.json").read_text())["t_final"] == 2.0
    # without MODEL: the built-in Explorer-1
    assert main([*argv[:1], *argv[2:-3], "--t-final", "2", "--out", str(tmp / "b"),
                 "--quiet"]) == 0  # fmt: skip
    built_in = pd.read_csv(tmp / "b" / "members.csv", keep_default_na=False, na_values=[""])
    again = pd.read_csv(tmp / "short" / "members.csv", keep_default_na=False, na_values=[""])
    pd.testing.assert_frame_equal(built_in, again)


def test_montecarlo_bad_input_is_one_line_exit_2(files, capsys):
    m, s, model, disp, tmp = files
    disp.write_text(SPEC_TOML.replace('"hub.mass"', '"rotor.mass"'))
    argv = ["montecarlo", str(model), "--dispersions", str(disp), "--n", "4", "--out",
            str(tmp / "o"), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "kanedyn montecarlo: error: " + str(disp)
        + ": line 5: dispersion[1]: parameter 'rotor.mass': 'rotor' is not a body"
    ) in err  # fmt: skip
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    disp.write_text(SPEC_TOML.replace("sigma = 20.0", "sigma = -1"))
    assert main(argv) == 2
    assert "disp.toml: line 7: dispersion[1]" in capsys.readouterr().err
    disp.write_text(SPEC_TOML)
    assert main([*argv[:4], "--n", "0", *argv[6:]]) == 2
    assert "--n must be a positive integer" in capsys.readouterr().err
    # a misspelt name in an option or the dispersion file: the closest name is suggested
    assert main([*argv, "--output", "hinj0.rates.0"]) == 2
    err = capsys.readouterr().err
    assert "'hinj0' is not a body or joint of the model (did you mean 'hinge0'?" in err
    disp.write_text(SPEC_TOML.replace('"hub.mass"', '"hbu.mass"'))
    assert main(argv) == 2
    assert "'hbu' is not a body or joint of the model (did you mean 'hub'?" in (
        capsys.readouterr().err
    )
    # a parameter the model has not, or a relative dispersion of a zero nominal value:
    # the line of the table in the dispersion file
    disp.write_text(SPEC_TOML.replace('"hinge0.stiffness"', '"hinge0.stiffness.7"'))
    assert main(argv) == 2
    assert "disp.toml: line 16: dispersion[3]: parameter 'hinge0.stiffness.7'" in (
        capsys.readouterr().err
    )
    disp.write_text(SPEC_TOML.replace('"root.rates.z"\ndistribution = "uniform"',
                                      '"hub.com.x"\ndistribution = "uniform"\nrelative = true'))  # fmt: skip
    assert main(argv) == 2
    assert "disp.toml: line 10: dispersion[2]: parameter 'hub.com.x': relative = true" in (
        capsys.readouterr().err
    )
