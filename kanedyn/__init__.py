"""kanedyn: Kane's method and momentum-state dynamics for multibody trees.

The pipeline (each stage a module; dependencies point one way)::

    rotation, inertia -> model -> kinematics -> partials -> kane / msd / symbolic
        -> integrate -> io -> cli

``kanedyn.symbolic`` (and with it sympy) is loaded on first use, so ``import kanedyn``
stays fast for numeric work.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kanedyn import examples, io, msd, rotation
from kanedyn.batch import ModelBatch, States
from kanedyn.compiled import CompiledModel, compile_model
from kanedyn.constraints import ConstraintForces, constraint_forces
from kanedyn.control import Controller, QuaternionPD, ReactionWheel, add_wheels, wheel_loads
from kanedyn.ensemble import EnsembleTrajectory, simulate_ensemble
from kanedyn.errors import FileFormatError, KanedynError, ModelError, SimulationError
from kanedyn.inertia import (
    composite_mass_properties,
    inertia_tensor,
    parallel_axis,
    principal_axes,
    validate_inertia,
)
from kanedyn.integrate import Lock, Trajectory, Unlock, simulate
from kanedyn.kane import (
    Fr,
    Fr_star,
    aba,
    crba,
    forcing,
    forward_dynamics,
    generalized_active_forces,
    generalized_inertia_forces,
    inverse_dynamics,
    kinetic_energy,
    mass_matrix,
    momentum,
    potential_energy,
    system_mass_properties,
)
from kanedyn.kinematics import Kinematics, kinematics
from kanedyn.loads import Force, JointLoad, Torque
from kanedyn.model import Body, Joint, Model, State
from kanedyn.options import Engine, Formulation, Method
from kanedyn.partials import Partials, partials
from kanedyn.rnea import NewtonEuler, inverse_dynamics_rnea, newton_euler
from kanedyn.rotation import (
    dcm_to_euler,
    dcm_to_quat,
    euler_to_dcm,
    quat_to_dcm,
    skew,
)

if TYPE_CHECKING:
    from kanedyn import symbolic

__version__ = "0.1.0"

#: submodules imported on first attribute access (PEP 562): they pull in sympy
_LAZY_SUBMODULES = ("symbolic",)

__all__ = [
    "Engine",
    "Formulation",
    "Method",
    "Fr",
    "Fr_star",
    "aba",
    "crba",
    "forcing",
    "Body",
    "CompiledModel",
    "compile_model",
    "EnsembleTrajectory",
    "ModelBatch",
    "States",
    "simulate_ensemble",
    "Controller",
    "QuaternionPD",
    "ReactionWheel",
    "add_wheels",
    "wheel_loads",
    "ConstraintForces",
    "Lock",
    "Trajectory",
    "Unlock",
    "constraint_forces",
    "msd",
    "simulate",
    "FileFormatError",
    "Force",
    "Joint",
    "JointLoad",
    "KanedynError",
    "Kinematics",
    "Model",
    "ModelError",
    "Partials",
    "SimulationError",
    "State",
    "Torque",
    "__version__",
    "composite_mass_properties",
    "dcm_to_euler",
    "dcm_to_quat",
    "euler_to_dcm",
    "examples",
    "forward_dynamics",
    "generalized_active_forces",
    "generalized_inertia_forces",
    "inertia_tensor",
    "io",
    "inverse_dynamics",
    "inverse_dynamics_rnea",
    "newton_euler",
    "NewtonEuler",
    "kinematics",
    "kinetic_energy",
    "mass_matrix",
    "momentum",
    "parallel_axis",
    "partials",
    "potential_energy",
    "principal_axes",
    "quat_to_dcm",
    "rotation",
    "skew",
    "symbolic",
    "system_mass_properties",
    "validate_inertia",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})
