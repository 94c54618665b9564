"""``kanedyn montecarlo``: files, settings from the model file, resume, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import main

pd = pytest.importorskip("pandas")

DISPERSIONS = """\
seed = 3
outputs = ["joint0.angles.0"]

[[dispersion]]
parameter = "link0.mass"
distribution = "normal"
sigma = 0.05
relative = true

[[dispersion]]
parameter = "joint1.rates.0"
distribution = "uniform"
low = -0.5
high = 0.5
"""


@pytest.fixture()
def files(tmp_path):
    m = kd.examples.chain(2)
    s = m.set_joint(m.initial_state(), "joint0", angles=[0.3])
    model = tmp_path / "pendulum.toml"
    kd.io.write_toml(m, model, state=s, settings={"t_final": 0.5, "dt": 0.01,
                                                  "output_every": 0.1})  # fmt: skip
    disp = tmp_path / "disp.toml"
    disp.write_text(DISPERSIONS)
    return m, s, model, disp, tmp_path


def test_montecarlo_writes_members_and_summary(files, capsys):
    m, s, model, disp, tmp = files
    out = tmp / "out"
    argv = ["montecarlo", str(model), "--dispersions", str(disp), "--n", "12", "--out",
            str(out), "--quiet", "--chunk-size", "5"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "12 members, seed 3, t = 0.5 s, dt = 0.01 s, 3 chunks (0 resumed)" in text
    assert "joint0.angles.0.final" in text  # the percentile table
    table = pd.read_csv(out / "members.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns[:3]) == ["member", "link0.mass", "joint1.rates.0"]
    assert list(table.columns[-2:]) == ["status", "error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 12 and summary["seed"] == 3 and summary["counts"]["ok"] == 12
    assert (out / "montecarlo.png").stat().st_size > 0
    # the same run in Python gives the same table
    res = kd.monte_carlo(m, s, kd.simulation.montecarlo.read_dispersions(disp)[0], 12, 0.5, 0.01,
                         seed=3, output_every=0.1, outputs=["joint0.angles.0"])  # fmt: skip
    assert np.allclose(table["joint0.angles.0.final"], res.members["joint0.angles.0.final"],
                       rtol=1e-15)  # fmt: skip
    # the same command again resumes from the chunks on disk; --t-final overrides the file
    assert main(argv) == 0
    assert "3 chunks (3 resumed)" in capsys.readouterr().out
    assert main([*argv[:-3], "--t-final", "0.2", "--out", str(tmp / "short"), "--quiet"]) == 0
    assert json.loads((tmp / "short" / "summary.json").read_text())["t_final"] == 0.2


def test_montecarlo_bad_input_is_one_line_exit_2(files, capsys):
    m, s, model, disp, tmp = files
    disp.write_text(DISPERSIONS.replace('"link0.mass"', '"link9.mass"'))
    argv = ["montecarlo", str(model), "--dispersions", str(disp), "--n", "4", "--out",
            str(tmp / "o"), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "kanedyn montecarlo: error: parameter 'link9.mass': 'link9' is not a body" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    disp.write_text(DISPERSIONS.replace("sigma = 0.05", "sigma = -1"))
    assert main(argv) == 2
    assert "disp.toml: line 7: dispersion[1]" in capsys.readouterr().err
    disp.write_text(DISPERSIONS)
    assert main([*argv[:4], "--n", "0", *argv[6:]]) == 2
    assert "--n must be a positive integer" in capsys.readouterr().err
