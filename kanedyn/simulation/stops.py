"""``limits="stop"``: the joints' position limits (:mod:`kanedyn.simulation.limits`) as
one-sided stops, made of the same locks as :class:`~kanedyn.Lock` events.

When a limited coordinate reaches a bound, it is set to the bound and its DOF locked
(:meth:`kanedyn.simulation.system.System.relock`: the other DOFs keep their generalized
momenta, a perfectly plastic impact; on a model with loops, the loops are first closed
again with the joint on its bound, and the momenta kept are those along the directions
the loops and the locks leave). An engaged stop is released when the acceleration
its DOF would have unlocked points back into the range (its constraint force would
pull). Fixed-step RK4 applies both after each step (:meth:`Stops.after_step`: a bound
is caught at the step boundary after the crossing); the adaptive methods locate both as
events on the solver's dense output (:meth:`Stops.next_event`, a root of
``q - bound`` or of the would-be acceleration, as ``solve_ivp`` locates a terminal
event) and restart from there (:meth:`Stops.apply`).
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

_XTOL = 4 * np.finfo(float).eps  # solve_ivp's tolerance on an event's time


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
            self._hold(c, 1 if xq[c] < lim.lower[c] else -1, t, x)
            changed = True
        if not changed:
            return x
        locked = np.union1d(events_locked, self.speeds()).astype(np.intp)
        return system.relocked(x, locked)

    def _hold(self, c: int, side: int, t: float, x: Array) -> None:
        """Set joint ``c``'s coordinate in ``x`` on the bound of ``side`` (+1 lower, -1
        upper) and engage its stop (the caller relocks); the first hold of each bound
        is recorded."""
        lim = self.lim
        bound = "lower" if side > 0 else "upper"
        value = lim.lower[c] if side > 0 else lim.upper[c]
        x[lim.q_index[c]] = value
        self.engaged[c] = side
        if all((e.joint, e.bound) != (lim.names[c], bound) for e in self.held):
            self.held.append(limits_.LimitCrossing(lim.names[c], bound, float(value), t))

    def next_event(
        self, system: System, sol: Any, t_old: float, t_new: float
    ) -> tuple[float, int, int] | None:
        """The first stop event in ``(t_old, t_new]`` of the dense output ``sol`` (a
        ``scipy.integrate.DenseOutput`` of the state ``[q | y]``), or None: ``(t, c,
        side)`` with ``side`` the bound joint ``c`` reaches (+1 lower, -1 upper), or
        ``(t, c, 0)`` when engaged stop ``c`` is to be released. A crossing is a root of
        ``q_c - lower`` (``upper - q_c``) going negative; a release a root of
        ``side · ν̇_c`` going positive, ``ν̇_c`` the DOF's acceleration with its lock
        removed (:meth:`~kanedyn.simulation.system.System.unlocked_acceleration`). Each
        is located by Brent's method to the tolerance ``solve_ivp`` uses for events."""
        import scipy.optimize  # with the adaptive methods' scipy.integrate, on first use

        lim = self.lim
        found: list[tuple[float, int, int]] = []

        def root(f: Any) -> float:
            if f(t_old) > 0.0:  # already past it at the step's start: act there
                return t_old
            return float(scipy.optimize.brentq(f, t_old, t_new, xtol=_XTOL, rtol=_XTOL))

        for c in range(len(lim.names)):
            i, r = int(lim.q_index[c]), int(lim.u_index[c])
            if c in self.engaged:
                side = self.engaged[c]

                def pull(t: float, side: int = side, r: int = r) -> float:
                    return side * system.unlocked_acceleration(t, sol(t), r)

                if pull(t_new) > 0.0:
                    found.append((root(pull), c, 0))
                continue
            for side, bound in ((1, lim.lower[c]), (-1, lim.upper[c])):

                def past(t: float, side: int = side, bound: float = bound, i: int = i) -> float:
                    return side * (bound - sol(t)[i])  # > 0 outside the range

                if past(t_new) > 0.0:
                    found.append((root(past), c, side))
        return min(found, default=None)

    def apply(self, system: System, event: tuple[float, int, int], x: Array) -> Array:
        """The state ``x`` at ``event`` (:meth:`next_event`) after it: a bound reached
        set on it and its DOF locked, then released at once if its acceleration already
        points back into the range; a release unlocked. Locks of events on other joints
        are kept."""
        t, c, side = event
        r = int(self.lim.u_index[c])
        others = np.setdiff1d(system.locked, self.speeds())
        if side:
            x = x.copy()
            self._hold(c, side, t, x)
            x = system.relocked(x, np.union1d(others, self.speeds()).astype(np.intp))
            if side * system.unlocked_acceleration(t, x, r) <= 0.0:
                return x
        del self.engaged[c]
        return system.relocked(x, np.union1d(others, self.speeds()).astype(np.intp))

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
        "the energy-momentum scheme sets a stopped joint back on its bound through the "
        "tree's coordinates, which would open the loops (a stop is a lock of the joint at "
        "its bound); use method='rk4' or an adaptive method"
        if isinstance(integrator, EnergyMomentum) and model.loops
        else None
    )
    if why is not None:
        raise ModelError(
            f"limits='stop' cannot act here: {why}. Use limits='warn' to be told of crossings"
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
