"""The example model files ship inside the package and load from there."""

from __future__ import annotations

import fnmatch
import json
import math
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import main

ROOT = Path(__file__).parents[1]


def test_every_example_file_loads():
    names = kd.examples.files()
    assert {"SC_TumbleSat.txt", "Jnt_Tumble02.txt", "arm3.urdf", "panel.toml"} <= set(names)
    for name in names:
        path = kd.examples.path(name)
        assert path.is_file() and path.parent.name == "data"
        if name.startswith(("Jnt_", "Orb_")):
            continue  # joint parameter and orbit files are read with their SC file
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, state = kd.io.read_model(path)
        assert model.nb >= 2 and kd.kinetic_energy(model, state) >= 0.0


def test_bundled_tumblesat_is_the_test_copy_of_42s_demo():
    for name in ("SC_TumbleSat.txt", "Jnt_Tumble02.txt", "Jnt_Tumble13.txt", "SC_WheelSat.txt",
                 "Orb_LEO.txt"):  # fmt: skip
        bundled = kd.examples.path(name).read_bytes()
        assert bundled == (ROOT / "tests" / "io" / "data" / name).read_bytes(), name


def test_unknown_example_file_names_the_choices():
    with pytest.raises(kd.FileFormatError, match=r"no example file 'SC_Nothing.txt'.*SC_TumbleSat"):
        kd.examples.path("SC_Nothing.txt")


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="installed package")
def test_package_data_globs_cover_every_file():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["kanedyn"]
    for f in (ROOT / "kanedyn" / "data").iterdir():
        rel = f"data/{f.name}"
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not in package-data"


# ------------------------------------------------------------ the shipped files, from the CLI
MODEL_FILES = [n for n in kd.examples.files() if not n.startswith(("Jnt_", "Orb_"))]


def samples_per_half_swing(x: np.ndarray) -> float:
    """Outputs between sign changes of ``x`` about its mean: an oscillation sampled ``n``
    times per period gives about ``n / 2`` (inf for a column that does not oscillate)."""
    span = np.ptp(x)
    if not span > 1e-9 * max(np.max(np.abs(x)), 1e-300):
        return math.inf
    crossings = np.count_nonzero(np.diff(np.sign(x - np.mean(x))) != 0)
    return len(x) / crossings if crossings else math.inf


@pytest.mark.parametrize("name", MODEL_FILES)
def test_every_shipped_file_simulates_with_defaults_that_show_its_motion(name, tmp_path):
    out = tmp_path / "o"
    assert main(["simulate", str(kd.examples.path(name)), "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    data = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1, ndmin=2)
    assert summary["status"] == "completed" and data.shape[0] == summary["outputs"]
    assert summary["outputs"] >= 21  # t = 0 and at least 20 more
    assert data[-1, 0] == pytest.approx(summary["t_final_s"])
    npz = np.load(out / "trajectory.npz")
    q, u = npz["q"], npz["u"]
    assert q.shape[0] == u.shape[0] == summary["outputs"]
    # at least 10 outputs per period of every oscillation seen in the speeds (5 a swing)
    assert min(samples_per_half_swing(u[:, r]) for r in range(u.shape[1])) >= 5.0
    # and the model moves: some coordinate changes by more than 0.05 (rad, m or quaternion)
    assert np.max(np.abs(q - q[0])) > 0.05


@pytest.mark.parametrize("name", MODEL_FILES)
def test_every_shipped_file_converts_to_toml_with_the_same_dynamics(name, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["convert", str(kd.examples.path(name)), str(tmp_path / "m.toml")]) == 0
        model, state = kd.io.read_model(kd.examples.path(name))
    case = kd.io.read_toml_case(tmp_path / "m.toml")
    np.testing.assert_array_equal(case.state.q, state.q)
    np.testing.assert_array_equal(case.state.u, state.u)
    np.testing.assert_array_equal(case.model.gravity, model.gravity)
    np.testing.assert_array_equal(kd.mass_matrix(case.model, state), kd.mass_matrix(model, state))
    np.testing.assert_allclose(
        kd.forward_dynamics(case.model, state), kd.forward_dynamics(model, state), rtol=1e-12
    )
