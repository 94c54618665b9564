"""Simulation options as small frozen objects, parsed once at the public surface.

:func:`kanedyn.simulate`, :func:`kanedyn.simulate_ensemble` and
:func:`kanedyn.compile_model` accept these objects or their names as strings. Each
function parses its options once, on entry, with :meth:`Formulation.parse`,
:meth:`Engine.parse` and :meth:`Method.parse`, which raise a
:class:`~kanedyn.ModelError` naming the valid choices. Everything inside dispatches on
the parsed objects. :class:`Formulation` and :class:`Stabilization`, which the compiled
layer shares, are defined in :mod:`kanedyn.model.options` and re-exported here.

>>> from kanedyn.simulation.options import Engine, Formulation, Method
>>> Formulation.parse("msd") is Formulation.MSD
True
>>> Method.parse("rk4").adaptive, Method.parse("DOP853").adaptive
(False, True)
>>> Method.parse("energy-momentum").tol, Method.parse("energy-momentum").compiles
(1e-10, False)
"""

from __future__ import annotations

import enum
import sys
from typing import TYPE_CHECKING, Any

import attrs

from kanedyn.errors import ModelError
from kanedyn.model.options import Formulation, Stabilization, parse_choice

if TYPE_CHECKING:
    import scipy.integrate

__all__ = ["EnergyMomentum", "Engine", "Formulation", "Method", "Stabilization", "parse_choice"]


class Engine(enum.StrEnum):
    """How the right-hand side is evaluated.

    ``COMPILED``: the generated equations of :mod:`kanedyn.compiled`; ``DENSE``: the NumPy
    engine; ``AUTO``: compiled when the model can be compiled, otherwise dense.
    """

    AUTO = "auto"
    COMPILED = "compiled"
    DENSE = "dense"

    @classmethod
    def parse(cls, value: Engine | str) -> Engine:
        """``value`` as an Engine, or a ModelError naming the choices."""
        return parse_choice(cls, value, "engine")  # type: ignore[no-any-return]


#: the adaptive methods of ``scipy.integrate.solve_ivp``, by name (scipy.integrate is
#: imported when one is chosen, so that ``import kanedyn`` stays light)
ADAPTIVE = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


@attrs.frozen
class Method:
    """An integration method: fixed-step classic RK4 (``solver`` is None), or an
    adaptive ``scipy.integrate.solve_ivp`` solver class. ``name`` is what
    :attr:`kanedyn.Trajectory.method` reports."""

    name: str
    solver: type[scipy.integrate.OdeSolver] | None = None

    @property
    def adaptive(self) -> bool:
        """Whether the step size is chosen by the solver (from ``rtol``, ``atol``)."""
        return self.solver is not None

    @property
    def compiles(self) -> bool:
        """Whether the method evaluates the right-hand side that ``engine`` chooses (so
        that a compiled engine applies); False for a scheme with its own NumPy engine."""
        return True

    @classmethod
    def parse(cls, value: Method | str | type[scipy.integrate.OdeSolver]) -> Method:
        """``"rk4"``, ``"energy-momentum"`` (:class:`EnergyMomentum` with its default
        tolerance), the name of a solve_ivp method (``"RK45"``, ``"RK23"``,
        ``"DOP853"``, ``"Radau"``, ``"BDF"``, ``"LSODA"``), an ``OdeSolver`` subclass, or
        a Method; anything else is a ModelError naming the choices."""
        if isinstance(value, Method):
            return value
        if isinstance(value, str):
            if value == RK4.name:
                return RK4
            if value == EnergyMomentum.NAME:
                return EnergyMomentum()
            if value in ADAPTIVE:
                import scipy.integrate

                return cls(value, getattr(scipy.integrate, value))
        elif isinstance(value, type) and "scipy.integrate" in sys.modules:
            import scipy.integrate  # a solver class: its module is loaded already

            if issubclass(value, scipy.integrate.OdeSolver):
                return cls(value.__name__, value)
        choices = ", ".join(repr(name) for name in (RK4.name, EnergyMomentum.NAME, *ADAPTIVE))
        raise ModelError(
            f"unknown method {value!r}: use one of {choices} or a scipy.integrate.OdeSolver "
            "subclass"
        )


#: fixed-step classic fourth-order Runge-Kutta (:func:`kanedyn.dynamics.steppers.rk4_step`)
RK4 = Method("rk4")


def _positive(instance: Any, attribute: Any, value: Any) -> None:
    if not value > 0:
        raise ModelError(f"EnergyMomentum.{attribute.name} must be positive, got {value!r}")


def _reduction(instance: Any, attribute: Any, value: Any) -> None:
    if value not in ("full", "null-space"):
        raise ModelError(f"EnergyMomentum.reduction must be 'full' or 'null-space', got {value!r}")


@attrs.frozen
class EnergyMomentum(Method):
    """The energy-momentum conserving scheme on director coordinates
    (:mod:`kanedyn.simulation.conserving`): fixed step, implicit, Newton with the exact
    tangent. ``tol``: Newton stops when the update and the constraint residual are
    below ``tol`` (relative to the largest coordinate); ``max_iter``: Newton iterations
    before a SimulationError (the run then halves the step). ``reduction``: ``"full"``
    (Newton on the system with multipliers) or ``"null-space"`` (the discrete
    null-space method: a Newton system of the minimal size; trees only). Both solve the
    same discrete equations. ``planar``: the planar formulation (position and two
    in-plane directors per body) when the model is ``planar`` and every joint turns
    about z and slides in the x-y plane (None, default), always (True: a ModelError
    when the model does not qualify) or never (False).

    >>> EnergyMomentum(tol=1e-12).name
    'energy-momentum'
    """

    NAME = "energy-momentum"
    name: str = attrs.field(default=NAME, init=False)
    tol: float = attrs.field(default=1e-10, validator=_positive, kw_only=True)
    max_iter: int = attrs.field(default=15, validator=_positive, kw_only=True)
    reduction: str = attrs.field(default="full", validator=_reduction, kw_only=True)
    planar: bool | None = attrs.field(default=None, kw_only=True)

    @property
    def compiles(self) -> bool:
        """False: the scheme steps the director coordinates with NumPy (Newton on dense
        matrices), not a right-hand side of the engines."""
        return False
