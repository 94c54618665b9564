"""kanedyn: Kane's method and momentum-state dynamics for multibody trees.

The layers (dependencies point one way; docs/architecture.md)::

    spatial -> model -> joints -> dynamics -> compiled / symbolic -> simulation
        -> io -> plotting, cli

Every public name is imported on first use (PEP 562 ``__getattr__``), so ``import
kanedyn`` and ``kanedyn --help`` stay fast: ``kanedyn.symbolic`` (and with it sympy),
scipy's integrators and the compiled engine load when something needs them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kanedyn import codegen, examples, io, symbolic
    from kanedyn.compiled import CompiledModel, compile_model
    from kanedyn.compiled.linearize import Linearization, linearize
    from kanedyn.dynamics import msd
    from kanedyn.dynamics.constraints import ConstraintForces, constraint_forces
    from kanedyn.dynamics.frames import (
        FrameMotion,
        frame_acceleration,
        frame_placement,
        frame_velocity,
    )
    from kanedyn.dynamics.kane import (
        Fr,
        Fr_star,
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
    from kanedyn.dynamics.kinematics import Kinematics, kinematics
    from kanedyn.dynamics.loads import Force, JointLoad, Torque
    from kanedyn.dynamics.loops import LoopEquations, LoopForces, loop_equations, loop_forces
    from kanedyn.dynamics.partials import Partials, partials
    from kanedyn.dynamics.recursion import aba
    from kanedyn.dynamics.rnea import NewtonEuler, inverse_dynamics_rnea, newton_euler
    from kanedyn.errors import (
        FileFormatError,
        KanedynError,
        ModelError,
        SimulationError,
        SimulationInterrupted,
    )
    from kanedyn.model import Body, Frame, Joint, JointLimits, Loop, Model, Rotor, State
    from kanedyn.model.batch import ModelBatch, States
    from kanedyn.simulation.control import (
        Controller,
        QuaternionPD,
        ReactionWheel,
        Thruster,
        add_wheels,
        thruster_loads,
        wheel_loads,
    )
    from kanedyn.simulation.ensemble import EnsembleTrajectory, simulate_ensemble
    from kanedyn.simulation.integrate import Lock, Trajectory, Unlock, simulate
    from kanedyn.simulation.montecarlo import Dispersion, MonteCarloResult, monte_carlo
    from kanedyn.simulation.options import EnergyMomentum, Engine, Formulation, Method
    from kanedyn.spatial import rotation
    from kanedyn.spatial.inertia import (
        composite_mass_properties,
        inertia_tensor,
        parallel_axis,
        principal_axes,
        validate_inertia,
    )
    from kanedyn.spatial.rotation import (
        dcm_to_euler,
        dcm_to_quat,
        euler_to_dcm,
        quat_to_dcm,
        skew,
    )

# Modules that moved into the layered packages stay importable under their old names
# (``import kanedyn.kinematics``, ``from kanedyn.integrate import ...``): the same module
# objects, imported on first use by _MovedModules.
_MOVED = {
    "rotation": "kanedyn.spatial.rotation",
    "inertia": "kanedyn.spatial.inertia",
    "plan": "kanedyn.model.plan",
    "batch": "kanedyn.model.batch",
    **{m: f"kanedyn.dynamics.{m}" for m in (
        "kinematics", "partials", "loads", "kane", "rnea", "msd", "constraints", "subtree",
        "loops")},
    **{m: f"kanedyn.simulation.{m}" for m in (
        "integrate", "ensemble", "control", "options", "steppers")},
}  # fmt: skip


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path (``kanedyn.integrate``) as the moved module object itself, on
    first use, so that ``import kanedyn`` does not load every layer."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        old = fullname.removeprefix("kanedyn.")
        if old == fullname or old not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = importlib.import_module(_MOVED[spec.name.removeprefix("kanedyn.")])
        self.spec = module.__spec__  # the import system sets the alias's spec: put it back
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self.spec


class _Package(types.ModuleType):
    """``kanedyn`` itself: importing an old path whose name is also a public function
    (``kanedyn.kinematics``) must not replace that function on the package."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and name not in _SUBMODULES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.meta_path.insert(0, _MovedModules())
sys.modules[__name__].__class__ = _Package

__version__ = "0.1.0"

#: the public names that are submodules
_SUBMODULES = frozenset({"codegen", "examples", "io", "symbolic", "msd", "rotation"})
#: every public name and the module it lives in (a submodule: itself), imported on first
#: access (PEP 562)
_LAZY: dict[str, str] = {
    "codegen": "kanedyn.codegen",
    "examples": "kanedyn.examples",
    "io": "kanedyn.io",
    "symbolic": "kanedyn.symbolic",
    "CompiledModel": "kanedyn.compiled",
    "compile_model": "kanedyn.compiled",
    "Linearization": "kanedyn.compiled.linearize",
    "linearize": "kanedyn.compiled.linearize",
    "msd": "kanedyn.dynamics.msd",
    "ConstraintForces": "kanedyn.dynamics.constraints",
    "constraint_forces": "kanedyn.dynamics.constraints",
    "FrameMotion": "kanedyn.dynamics.frames",
    "frame_acceleration": "kanedyn.dynamics.frames",
    "frame_placement": "kanedyn.dynamics.frames",
    "frame_velocity": "kanedyn.dynamics.frames",
    "Fr": "kanedyn.dynamics.kane",
    "Fr_star": "kanedyn.dynamics.kane",
    "aba": "kanedyn.dynamics.recursion",
    "crba": "kanedyn.dynamics.kane",
    "forcing": "kanedyn.dynamics.kane",
    "forward_dynamics": "kanedyn.dynamics.kane",
    "generalized_active_forces": "kanedyn.dynamics.kane",
    "generalized_inertia_forces": "kanedyn.dynamics.kane",
    "inverse_dynamics": "kanedyn.dynamics.kane",
    "kinetic_energy": "kanedyn.dynamics.kane",
    "mass_matrix": "kanedyn.dynamics.kane",
    "momentum": "kanedyn.dynamics.kane",
    "potential_energy": "kanedyn.dynamics.kane",
    "system_mass_properties": "kanedyn.dynamics.kane",
    "Kinematics": "kanedyn.dynamics.kinematics",
    "kinematics": "kanedyn.dynamics.kinematics",
    "Force": "kanedyn.dynamics.loads",
    "JointLoad": "kanedyn.dynamics.loads",
    "Torque": "kanedyn.dynamics.loads",
    "LoopEquations": "kanedyn.dynamics.loops",
    "LoopForces": "kanedyn.dynamics.loops",
    "loop_equations": "kanedyn.dynamics.loops",
    "loop_forces": "kanedyn.dynamics.loops",
    "Partials": "kanedyn.dynamics.partials",
    "partials": "kanedyn.dynamics.partials",
    "NewtonEuler": "kanedyn.dynamics.rnea",
    "inverse_dynamics_rnea": "kanedyn.dynamics.rnea",
    "newton_euler": "kanedyn.dynamics.rnea",
    "FileFormatError": "kanedyn.errors",
    "KanedynError": "kanedyn.errors",
    "ModelError": "kanedyn.errors",
    "SimulationError": "kanedyn.errors",
    "SimulationInterrupted": "kanedyn.errors",
    "Body": "kanedyn.model",
    "Frame": "kanedyn.model",
    "Joint": "kanedyn.model",
    "JointLimits": "kanedyn.model",
    "Loop": "kanedyn.model",
    "Model": "kanedyn.model",
    "Rotor": "kanedyn.model",
    "State": "kanedyn.model",
    "ModelBatch": "kanedyn.model.batch",
    "States": "kanedyn.model.batch",
    "Controller": "kanedyn.simulation.control",
    "QuaternionPD": "kanedyn.simulation.control",
    "ReactionWheel": "kanedyn.simulation.control",
    "Thruster": "kanedyn.simulation.control",
    "add_wheels": "kanedyn.simulation.control",
    "thruster_loads": "kanedyn.simulation.control",
    "wheel_loads": "kanedyn.simulation.control",
    "EnsembleTrajectory": "kanedyn.simulation.ensemble",
    "simulate_ensemble": "kanedyn.simulation.ensemble",
    "Lock": "kanedyn.simulation.integrate",
    "Trajectory": "kanedyn.simulation.integrate",
    "Unlock": "kanedyn.simulation.integrate",
    "simulate": "kanedyn.simulation.integrate",
    "Dispersion": "kanedyn.simulation.montecarlo",
    "MonteCarloResult": "kanedyn.simulation.montecarlo",
    "monte_carlo": "kanedyn.simulation.montecarlo",
    "EnergyMomentum": "kanedyn.simulation.options",
    "Engine": "kanedyn.simulation.options",
    "Formulation": "kanedyn.simulation.options",
    "Method": "kanedyn.simulation.options",
    "rotation": "kanedyn.spatial.rotation",
    "dcm_to_euler": "kanedyn.spatial.rotation",
    "dcm_to_quat": "kanedyn.spatial.rotation",
    "euler_to_dcm": "kanedyn.spatial.rotation",
    "quat_to_dcm": "kanedyn.spatial.rotation",
    "skew": "kanedyn.spatial.rotation",
    "composite_mass_properties": "kanedyn.spatial.inertia",
    "inertia_tensor": "kanedyn.spatial.inertia",
    "parallel_axis": "kanedyn.spatial.inertia",
    "principal_axes": "kanedyn.spatial.inertia",
    "validate_inertia": "kanedyn.spatial.inertia",
}

__all__ = [
    "EnergyMomentum",
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
    "Linearization",
    "linearize",
    "EnsembleTrajectory",
    "ModelBatch",
    "States",
    "simulate_ensemble",
    "Dispersion",
    "MonteCarloResult",
    "monte_carlo",
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
    "SimulationInterrupted",
    "State",
    "Torque",
    "__version__",
    "composite_mass_properties",
    "dcm_to_euler",
    "dcm_to_quat",
    "euler_to_dcm",
    "codegen",
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
    "Frame",
    "FrameMotion",
    "frame_acceleration",
    "frame_placement",
    "frame_velocity",
    "Thruster",
    "thruster_loads",
    "JointLimits",
    "Rotor",
    "Loop",
    "LoopEquations",
    "LoopForces",
    "loop_equations",
    "loop_forces",
]


def __getattr__(name: str) -> Any:
    """A public name, or a subpackage (``kanedyn.plotting``), imported on first access."""
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if name in _SUBMODULES else getattr(module, name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
