"""Options that several layers share, as string enums parsed once at the public surface.

:class:`Formulation` (the states the equations of motion are written in) is taken by
:func:`kanedyn.compile_model` (compiled layer) and :func:`kanedyn.simulate` (simulation
layer); :class:`Stabilization` by the simulation of models with loops. They live here,
below both layers, and :mod:`kanedyn.simulation.options` re-exports them with the
simulation's own options.

>>> from kanedyn.model.options import Formulation
>>> Formulation.parse("msd") is Formulation.MSD
True
"""

from __future__ import annotations

import enum
from typing import Any

from kanedyn.errors import ModelError

__all__ = ["Formulation", "Stabilization", "parse_choice"]


def parse_choice(cls: Any, value: Any, what: str) -> Any:
    """The member of the string enum ``cls`` named by ``value`` (a member or its string)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value)
        except ValueError:
            pass
    choices = ", ".join(repr(m.value) for m in cls)
    raise ModelError(f"{what} must be one of {choices}, got {value!r}")


class Formulation(enum.StrEnum):
    """The states the equations of motion are written in.

    ``KANE``: the generalized speeds ``ν = [u | s]`` (Kane's equations,
    :func:`kanedyn.forward_dynamics`); ``MSD``: the momentum states of :mod:`kanedyn.dynamics.msd`.
    A member equals its string (``Formulation.MSD == "msd"``).
    """

    KANE = "kane"
    MSD = "msd"

    @classmethod
    def parse(cls, value: Formulation | str) -> Formulation:
        """``value`` as a Formulation, or a ModelError naming the choices."""
        return parse_choice(cls, value, "formulation")  # type: ignore[no-any-return]


class Stabilization(enum.StrEnum):
    """How a simulation of a model with loops stays on the constraint manifold.

    ``PROJECTION`` (default): after every step (RK4) or every output interval
    (adaptive methods), ``q`` is projected onto ``Φ(q) = 0`` by Newton and ``u`` onto
    ``A u = 0`` (:func:`kanedyn.dynamics.loops.project`); ``BAUMGARTE``: the
    acceleration constraint is ``A u̇ + b + 2α A u + β² Φ = 0`` (Baumgarte 1972), no
    projection; ``NONE``: neither (the drift is left, for comparison).
    """

    PROJECTION = "projection"
    BAUMGARTE = "baumgarte"
    NONE = "none"

    @classmethod
    def parse(cls, value: Stabilization | str) -> Stabilization:
        """``value`` as a Stabilization, or a ModelError naming the choices."""
        return parse_choice(cls, value, "stabilization")  # type: ignore[no-any-return]
