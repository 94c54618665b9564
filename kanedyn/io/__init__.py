"""Model files: kanedyn's TOML, NASA 42 spacecraft files, URDF, and MJCF (via MuJoCo);
modal-data files of flexible bodies.

>>> import kanedyn as kd                                   # doctest: +SKIP
>>> model, state = kd.io.read_42("SC_TumbleSat.txt")       # doctest: +SKIP
>>> kd.io.write_toml(model, "tumblesat.toml", state)       # doctest: +SKIP
>>> case = kd.io.read_toml_case("tumblesat.toml")          # doctest: +SKIP
>>> model, state = kd.io.read_model("arm.urdf")            # doctest: +SKIP
>>> modes = kd.io.read_modes("solar_array.npz")            # doctest: +SKIP
"""

from kanedyn.io.detect import detect_format, read_model
from kanedyn.io.dispersions import read_dispersions
from kanedyn.io.fortytwo import (
    FortyTwoCase,
    FortyTwoFlex,
    FortyTwoOrbit,
    UnsupportedFeatureWarning,
    read_42,
    read_42_case,
    read_42_orbit,
    read_42_sim,
)
from kanedyn.io.mjcf import read_mjcf
from kanedyn.io.modes import parse_modes, read_modes, write_modes
from kanedyn.io.toml import Case, read_toml, read_toml_case, write_toml
from kanedyn.io.urdf import read_urdf, rpy_to_dcm

__all__ = [
    "Case",
    "FortyTwoCase",
    "FortyTwoFlex",
    "FortyTwoOrbit",
    "UnsupportedFeatureWarning",
    "detect_format",
    "parse_modes",
    "read_42",
    "read_dispersions",
    "read_42_case",
    "read_42_orbit",
    "read_42_sim",
    "read_mjcf",
    "read_model",
    "read_modes",
    "read_toml",
    "read_toml_case",
    "read_urdf",
    "rpy_to_dcm",
    "write_modes",
    "write_toml",
]
