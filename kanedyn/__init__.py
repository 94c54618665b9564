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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kanedyn import hooks as _hooks
from kanedyn.errors import MovedModule, deprecated_attribute

if TYPE_CHECKING:
    from kanedyn import codegen, examples, io, symbolic
    from kanedyn.compiled import CompiledModel, compile_model
    from kanedyn.compiled.linearize import Linearization
    from kanedyn.dynamics import msd
    from kanedyn.dynamics.constraints import ConstraintForces, constraint_forces
    from kanedyn.dynamics.forward import forward_dynamics
    from kanedyn.dynamics.frames import (
        FrameMotion,
        frame_acceleration,
        frame_placement,
        frame_velocity,
    )
    from kanedyn.dynamics.kane import (
        forcing,
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
    from kanedyn.dynamics.rnea import NewtonEuler, newton_euler
    from kanedyn.errors import (
        FileFormatError,
        KanedynError,
        ModelError,
        SimulationError,
        SimulationInterrupted,
    )
    from kanedyn.model import (
        EARTH_J2,
        EARTH_MU,
        EARTH_RADIUS,
        Body,
        CentralGravity,
        Frame,
        Joint,
        JointLimits,
        Loop,
        Model,
        Modes,
        Rotor,
        State,
    )
    from kanedyn.model.batch import ModelBatch, States
    from kanedyn.model.beam import beam_body
    from kanedyn.model.orbit import LvlhAttitude, Orbit
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
    from kanedyn.simulation.events import Lock, Unlock
    from kanedyn.simulation.integrate import simulate
    from kanedyn.simulation.montecarlo import Dispersion, MonteCarloResult, monte_carlo
    from kanedyn.simulation.options import EnergyMomentum, Engine, Formulation, Method
    from kanedyn.simulation.trajectory import Trajectory
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

# The composition root: the Model record (model layer) calls the dynamics layer above it
# through kanedyn.hooks, set here, before any submodule runs (kanedyn/hooks.py).


def _check_mass_matrix(model: Any) -> None:
    from kanedyn.dynamics.particles import check_mass_matrix

    check_mass_matrix(model)


def _assemble(model: Any, state: Any, fix: Any = (), **kw: Any) -> Any:
    from kanedyn.dynamics.loops import assemble

    return assemble(model, state, fix, **kw)


_hooks.check_mass_matrix = _check_mass_matrix
_hooks.assemble = _assemble

# Modules that moved into the layered packages stay importable under their old names
# (``import kanedyn.kinematics``, ``from kanedyn.integrate import ...``), deprecated: on
# first use, _MovedModules makes each old path a MovedModule that warns and reads (or
# patches) the module it names. ``kanedyn.msd`` and ``kanedyn.rotation`` are the facade's
# own modules (``kd.msd``, ``kd.rotation``): they import as the modules themselves.
_OWN = {"msd": "kanedyn.dynamics.msd", "rotation": "kanedyn.spatial.rotation"}
_MOVED = {
    "inertia": "kanedyn.spatial.inertia",
    "plan": "kanedyn.model.plan",
    "batch": "kanedyn.model.batch",
    **{m: f"kanedyn.dynamics.{m}" for m in (
        "kinematics", "partials", "loads", "kane", "rnea", "constraints", "subtree", "loops")},
    **{m: f"kanedyn.simulation.{m}" for m in ("integrate", "ensemble", "control", "options")},
    "steppers": "kanedyn.dynamics.steppers",
    "simulation.steppers": "kanedyn.dynamics.steppers",
}  # fmt: skip


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path (``kanedyn.integrate``) on first use: a deprecated
    :class:`~kanedyn.errors.MovedModule` for the moved modules, the module object itself
    for the facade's own (``kanedyn.msd``), so ``import kanedyn`` loads no layer."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        old = fullname.removeprefix("kanedyn.")
        if old == fullname or (old not in _MOVED and old not in _OWN):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        old = spec.name.removeprefix("kanedyn.")
        if old in _OWN:
            module = importlib.import_module(_OWN[old])
            self.spec = module.__spec__  # the import system sets the alias's spec: put it back
            return module
        self.spec = None
        return MovedModule(spec.name, importlib.import_module(_MOVED[old]))

    def exec_module(self, module: types.ModuleType) -> None:
        if self.spec is not None:
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
    "msd": "kanedyn.dynamics.msd",
    "ConstraintForces": "kanedyn.dynamics.constraints",
    "constraint_forces": "kanedyn.dynamics.constraints",
    "FrameMotion": "kanedyn.dynamics.frames",
    "frame_acceleration": "kanedyn.dynamics.frames",
    "frame_placement": "kanedyn.dynamics.frames",
    "frame_velocity": "kanedyn.dynamics.frames",
    "aba": "kanedyn.dynamics.recursion",
    "forcing": "kanedyn.dynamics.kane",
    "forward_dynamics": "kanedyn.dynamics.forward",
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
    "newton_euler": "kanedyn.dynamics.rnea",
    "FileFormatError": "kanedyn.errors",
    "KanedynError": "kanedyn.errors",
    "ModelError": "kanedyn.errors",
    "SimulationError": "kanedyn.errors",
    "SimulationInterrupted": "kanedyn.errors",
    "Body": "kanedyn.model",
    "CentralGravity": "kanedyn.model",
    "EARTH_J2": "kanedyn.model",
    "EARTH_MU": "kanedyn.model",
    "EARTH_RADIUS": "kanedyn.model",
    "Frame": "kanedyn.model",
    "Joint": "kanedyn.model",
    "JointLimits": "kanedyn.model",
    "Loop": "kanedyn.model",
    "Model": "kanedyn.model",
    "Modes": "kanedyn.model",
    "beam_body": "kanedyn.model.beam",
    "LvlhAttitude": "kanedyn.model.orbit",
    "Orbit": "kanedyn.model.orbit",
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
    "Lock": "kanedyn.simulation.events",
    "Trajectory": "kanedyn.simulation.trajectory",
    "Unlock": "kanedyn.simulation.events",
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

#: Deprecated second names of public functions: (the name to use instead, its module,
#: its name there). ``eom.Fr`` and ``eom.Fr_star`` on symbolic results are attributes,
#: not aliases; ``inverse_dynamics_rnea`` warns when called.
_DEPRECATED: dict[str, tuple[str, str, str]] = {
    "Fr": ("kanedyn.generalized_active_forces", "kanedyn.dynamics.kane", "generalized_active_forces"),
    "Fr_star": ("kanedyn.generalized_inertia_forces", "kanedyn.dynamics.kane",
                "generalized_inertia_forces"),
    "crba": ("kanedyn.mass_matrix", "kanedyn.dynamics.kane", "mass_matrix"),
    "inverse_dynamics_rnea": ("kanedyn.newton_euler(model, state, acc).tau",
                              "kanedyn.dynamics.rnea", "inverse_dynamics_rnea"),
}  # fmt: skip

__all__ = [
    "EnergyMomentum",
    "Engine",
    "Formulation",
    "Method",
    "aba",
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
    "Modes",
    "beam_body",
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
    "CentralGravity",
    "EARTH_J2",
    "EARTH_MU",
    "EARTH_RADIUS",
    "LvlhAttitude",
    "Orbit",
    "LoopEquations",
    "LoopForces",
    "loop_equations",
    "loop_forces",
]


def linearize(
    model: Any, state: State | Mapping[Any, Any], inputs: Sequence[Any] | None = None
) -> Linearization:
    """Linearize the equations of motion about ``state``.

    A :class:`~kanedyn.Model` is linearized from the exact derivatives of the compiled
    engine's traced equations (Kane's; :func:`kanedyn.compiled.linearize.linearize_model`). A symbolic problem, a
    :class:`kanedyn.symbolic.KaneProblem` (which may carry configuration and
    nonholonomic motion constraints, such as the Whipple bicycle's rolling) or the
    :class:`kanedyn.symbolic.KaneEquations` of :func:`kanedyn.symbolic.kane`, is
    linearized by :func:`kanedyn.symbolic.linearize` (constraints perturbed with the
    equations, Peterson, Gede & Hubbard 2015) and evaluated at the numeric operating
    point (:mod:`kanedyn.symbolic.linearize_numeric`, imported on first use). Both return
    the same record, :class:`~kanedyn.compiled.linearize.Linearization`.

    Parameters
    ----------
    model : Model, KaneProblem or KaneEquations
    state : State or mapping
        The operating point; need not be an equilibrium. For a ``Model``, a
        :class:`~kanedyn.State`. For a symbolic problem, numbers by its symbols: every
        independent coordinate and speed and every parameter (dependent coordinates
        and speeds may be omitted: they are solved from the constraints).
    inputs : sequence, optional
        For a ``Model``, joint names: ``B`` has one column per DOF of each (the
        generalized force of a :class:`kanedyn.JointLoad` on it). For a symbolic
        problem, specified symbols (constants or functions of time in its loads), one
        column each, at the operating value 0 (for ``KaneEquations``, the value ``state``
        gives, if any). When omitted, no columns (for ``KaneEquations``: its ``inputs``,
        the functions of time in its loads).

    Returns
    -------
    Linearization
        ``A``, ``B``, eigenvalues and modes: for a ``Model`` in the minimal state of the
        :mod:`kanedyn.compiled.linearize` docstring (one coordinate per speed; spherical joints by attitude
        error), for a symbolic problem in ``x = [q_i; u_i]`` (independent coordinates,
        then independent speeds).

    Raises
    ------
    ModelError
        A bad state, a joint name not in the model, a model the compiled engine
        cannot take (:func:`kanedyn.compiled.supports`); for a symbolic problem, an
        operating point that leaves a symbol without a value or violates a constraint.
    """
    from kanedyn.model import Model

    if isinstance(model, Model):
        from kanedyn.compiled.linearize import linearize_model

        return linearize_model(model, state, inputs)
    from kanedyn.symbolic.linearize_numeric import linearize_symbolic  # loads sympy

    return linearize_symbolic(model, state, inputs)


def __getattr__(name: str) -> Any:
    """A public name, or a subpackage (``kanedyn.plotting``), imported on first access."""
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if name in _SUBMODULES else getattr(module, name)
    elif name in _DEPRECATED:
        replacement, where, attr = _DEPRECATED[name]
        value = getattr(importlib.import_module(where), attr)
        return deprecated_attribute(__name__, name, {name: (replacement, value)})
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
