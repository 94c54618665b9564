"""kanedyn: Kane's method and momentum-state dynamics for multibody trees.

The layers (dependencies point one way; docs/architecture.md)::

    spatial -> model -> joints -> dynamics -> compiled / symbolic -> simulation
        -> io -> plotting, cli

``kanedyn.symbolic`` (and with it sympy) is loaded on first use, so ``import kanedyn``
stays fast for numeric work.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kanedyn import codegen, examples, io
from kanedyn.compiled import CompiledModel, compile_model
from kanedyn.compiled.linearize import Linearization, linearize_model
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
from kanedyn.dynamics.rnea import (
    NewtonEuler,
    inverse_dynamics_rnea,  # noqa: F401 (deprecated: warns when called)
    newton_euler,
)
from kanedyn.errors import (
    FileFormatError,
    KanedynError,
    ModelError,
    MovedModule,
    SimulationError,
    SimulationInterrupted,
    deprecated_attribute,
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
from kanedyn.simulation.integrate import Lock, Unlock, simulate
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

# ``kanedyn.msd`` and ``kanedyn.rotation`` are public modules of the facade (``kd.msd``,
# ``kd.rotation``): importable by those names, as the same module objects.
sys.modules["kanedyn.msd"] = msd
sys.modules["kanedyn.rotation"] = rotation

# Modules that moved into the layered packages stay importable under their old names
# (``import kanedyn.kinematics``, ``from kanedyn.integrate import ...``), deprecated: each
# old path is a MovedModule that warns and reads (or patches) the module it names.
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
for _old, _new in _MOVED.items():
    sys.modules[f"kanedyn.{_old}"] = MovedModule(f"kanedyn.{_old}", importlib.import_module(_new))

#: Deprecated second names of public functions: (the name to use instead, the object).
#: ``eom.Fr`` and ``eom.Fr_star`` on symbolic results are attributes, not aliases.
#: (``inverse_dynamics_rnea``, deprecated too, warns when called.)
_DEPRECATED: dict[str, tuple[str, Any]] = {
    "Fr": ("kanedyn.generalized_active_forces", generalized_active_forces),
    "Fr_star": ("kanedyn.generalized_inertia_forces", generalized_inertia_forces),
    "crba": ("kanedyn.mass_matrix", mass_matrix),
}


if TYPE_CHECKING:
    from kanedyn import symbolic

__version__ = "0.1.0"

#: submodules imported on first attribute access (PEP 562): they pull in sympy
_LAZY_SUBMODULES = ("symbolic",)

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
    if isinstance(model, Model):
        return linearize_model(model, state, inputs)
    from kanedyn.symbolic.linearize_numeric import linearize_symbolic  # loads sympy

    return linearize_symbolic(model, state, inputs)


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    return deprecated_attribute(__name__, name, _DEPRECATED)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})
