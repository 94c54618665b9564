"""``limits="stop"``: the joints' position limits (:mod:`kanedyn.simulation.limits`) as
one-sided stops, made of the same locks as :class:`~kanedyn.Lock` events.

After a step that takes a limited coordinate past a bound, the coordinate is set to the
bound and its DOF locked (:meth:`kanedyn.simulation.system.System.relock`: the other
DOFs keep their generalized momenta, a perfectly plastic impact). At each step boundary
an engaged stop is released when the acceleration its DOF would have unlocked points
back into the range (its constraint force would pull).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.simulation import limits as limits_
from kanedyn.simulation.events import Lock, Unlock
from kanedyn.simulation.options import EnergyMomentum, Method
from kanedyn.simulation.system import System

__all__ = ["Stops", "stop_limits"]

Array = NDArray[np.float64]


class Stops:
    """The stops of one run. ``engaged`` maps a limited joint (its row in ``lim``) to the
    side of its stop (+1 lower, -1 upper); ``held`` lists the first time each stop held
    its joint."""

    def __init__(self, lim: limits_.LimitedJoints):
        self.lim = lim
        self.engaged: dict[int, int] = {}
        self.held: list[limits_.LimitCrossing] = []

    def after_step(self, system: System, t: float, x: Array) -> Array:
        """The state after the step that ended at ``t``: stops whose DOF would
        accelerate back into the range released, joints past a bound set on it and
        locked there (:meth:`~kanedyn.simulation.system.System.relock`)."""
        lim = self.lim
        events_locked = np.setdiff1d(system.locked, self.speeds())
        changed = False
        for c, side in list(self.engaged.items()):
            if side * system.unlocked_acceleration(t, x, int(lim.u_index[c])) > 0.0:
                del self.engaged[c]
                changed = True
        xq = x[lim.q_index]
        for c in range(len(lim.names)):
            if c in self.engaged or lim.lower[c] <= xq[c] <= lim.upper[c]:
                continue
            side, bound = (1, "lower") if xq[c] < lim.lower[c] else (-1, "upper")
            value = lim.lower[c] if side > 0 else lim.upper[c]
            x[lim.q_index[c]] = value
            self.engaged[c] = side
            if all((e.joint, e.bound) != (lim.names[c], bound) for e in self.held):
                self.held.append(limits_.LimitCrossing(lim.names[c], bound, float(value), t))
            changed = True
        if not changed:
            return x
        locked = np.union1d(events_locked, self.speeds()).astype(np.intp)
        return system.relocked(x, locked)

    def speeds(self) -> NDArray[np.intp]:
        """The speed indices the stops hold locked now."""
        return self.lim.u_index[list(self.engaged)]

    def crossings(self) -> tuple[limits_.LimitCrossing, ...]:
        """The first time each stop held its joint, in time order."""
        return tuple(sorted(self.held, key=lambda e: (e.t, e.joint)))


def stop_limits(
    model: Model,
    state: State,
    mode: limits_.Limits,
    integrator: Method,
    events: Sequence[Any],
) -> limits_.LimitedJoints | None:
    """The limited joints of a ``limits="stop"`` run (None for the other modes, or a
    model without limits), or a ModelError for a run that cannot have them."""
    lim = limits_.limited_joints(model)
    if mode is not limits_.Limits.STOP or not lim.names:
        return None
    why = (
        "the energy-momentum scheme has no lock events"
        if isinstance(integrator, EnergyMomentum)
        else f"method {integrator.name!r} steps adaptively"
        if integrator.adaptive
        else "a model with loops takes no lock events"
        if model.loops
        else None
    )
    if why is not None:
        raise ModelError(
            f"limits='stop' needs fixed-step RK4 (method='rk4') on a tree: {why}; the "
            "stops are locks applied between steps. Use limits='warn' to be told of "
            "crossings"
        )
    for ev in events:
        if isinstance(ev, (Lock, Unlock)) and ev.joint in lim.names:
            raise ModelError(
                f"joint {ev.joint!r}: its limits are stops (limits='stop'), so it cannot "
                "also be locked or unlocked by events; use limits='warn'"
            )
    x = state.q[lim.q_index]
    outside = np.nonzero((x < lim.lower) | (x > lim.upper))[0]
    if outside.size:
        c = int(outside[0])
        raise ModelError(
            f"joint {lim.names[c]!r} starts at {x[c]:g}, outside its limits "
            f"[{lim.lower[c]:g}, {lim.upper[c]:g}]: limits='stop' needs a start within "
            "them (move the joint, or use limits='warn')"
        )
    return lim
