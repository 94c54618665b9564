"""The example model files ship inside the package and load from there."""

from __future__ import annotations

import fnmatch
import tomllib
import warnings
from pathlib import Path

import pytest

import kanedyn as kd

ROOT = Path(__file__).parents[1]


def test_every_example_file_loads():
    names = kd.examples.files()
    assert {"SC_TumbleSat.txt", "Jnt_Tumble02.txt", "arm3.urdf", "panel.toml"} <= set(names)
    for name in names:
        path = kd.examples.path(name)
        assert path.is_file() and path.parent.name == "data"
        if name.startswith("Jnt_"):
            continue  # joint parameter files are read through their SC file
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, state = kd.io.read_model(path)
        assert model.nb >= 2 and kd.kinetic_energy(model, state) >= 0.0


def test_bundled_tumblesat_is_the_test_copy_of_42s_demo():
    for name in ("SC_TumbleSat.txt", "Jnt_Tumble02.txt", "Jnt_Tumble13.txt", "SC_WheelSat.txt"):
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
