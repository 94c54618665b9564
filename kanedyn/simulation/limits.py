"""Joint limits in a run: reported (``limits="warn"``), enforced as stops (``"stop"``) or
not checked (``"ignore"``).

A joint's position range is its :class:`~kanedyn.JointLimits` ``lower``, ``upper``
(URDF ``<limit>``, MJCF ``range``), on a 1-DOF hinge or slide; a range with
``lower >= upper`` (URDF's default ``0 0``) and a joint without limits are not checked.

* ``"warn"`` (default of :func:`kanedyn.simulate`): the stored outputs are checked; for each
  joint and bound, the first time its coordinate crossed it (linearly interpolated
  between the two outputs around the crossing) is a :class:`LimitCrossing` in
  ``Trajectory.limit_crossings``, and a :class:`JointLimitWarning` names them. A
  crossing and return between two outputs is not seen: output every step (the
  default) to check every step.
* ``"stop"``: each bound is a one-sided stop (:mod:`kanedyn.simulation.stops`). When
  the coordinate reaches a bound, it is set to the bound and the DOF is locked there
  (a :class:`~kanedyn.Lock`: its speed is held at zero, the other DOFs keep their
  generalized momenta, so the impact is perfectly plastic). A locked stop is released
  when the acceleration its DOF would have unlocked (its constraint force reversed)
  points back into the range. Fixed-step RK4 acts at the step boundary after the
  crossing (and checks releases at each boundary); an adaptive method (``"RK45"``,
  ``"DOP853"``, ...) locates the crossing and the release on its dense output, as
  ``solve_ivp`` locates a terminal event, and restarts from there. On a model with
  loops the lock is one more row of the loop constraints (``e_rᵀ u = 0``): the loops
  are closed again with the joint on its bound and the impact keeps the generalized
  momenta along the directions the loops and the locks leave
  (:func:`kanedyn.dynamics.loops.plastic_impact`). The energy-momentum scheme acts at
  the step boundary after the crossing too, its lock a constraint of the step
  (:mod:`kanedyn.simulation.conserving.locks`), on trees; with loops it is refused (it
  sets the joint back on its bound through the tree's coordinates, which would open
  the loops).
* ``"ignore"``: no check.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.model import Joint, Model
from kanedyn.model.options import parse_choice

__all__ = [
    "JointLimitWarning",
    "LimitCrossing",
    "LimitedJoints",
    "Limits",
    "crossings",
    "describe",
    "has_range",
    "limited_joints",
    "report",
    "summary",
    "summary_line",
]

Array = NDArray[np.float64]


class JointLimitWarning(UserWarning):
    """A run's joint coordinate went past its joint's limits (``limits="warn"``)."""


class Limits(enum.StrEnum):
    """What :func:`kanedyn.simulate` does with the joints' position limits."""

    WARN = "warn"
    STOP = "stop"
    IGNORE = "ignore"

    @classmethod
    def parse(cls, value: Limits | str) -> Limits:
        """``value`` as a Limits, or a ModelError naming the choices."""
        return parse_choice(cls, value, "limits")  # type: ignore[no-any-return]


@attrs.frozen
class LimitCrossing:
    """The first time ``t`` [s] that ``joint``'s coordinate went past its ``bound``
    (``"lower"`` or ``"upper"``), whose value is ``limit`` (rad or m). Under
    ``limits="stop"`` it is the time the stop first held the joint."""

    joint: str
    bound: str
    limit: float
    t: float

    def __str__(self) -> str:
        return f"{self.joint!r} past its {self.bound} limit {self.limit:g} at t = {self.t:.6g} s"


@attrs.frozen(eq=False)
class LimitedJoints:
    """The joints with a position range: ``names``; ``q_index``, ``u_index`` (their
    coordinate and speed); ``lower``, ``upper`` (each ``(k,)``, ``±inf`` where a side is
    open)."""

    names: tuple[str, ...]
    q_index: NDArray[np.intp]
    u_index: NDArray[np.intp]
    lower: Array
    upper: Array


def has_range(joint: Joint) -> bool:
    """Whether ``joint``'s limits give it a position range that a run checks: a 1-DOF
    joint, ``lower < upper``, at least one of them finite."""
    lim = joint.limits
    return (
        lim is not None
        and joint.ndof == 1
        and lim.lower < lim.upper
        and not (np.isinf(lim.lower) and np.isinf(lim.upper))
    )


def limited_joints(model: Model) -> LimitedJoints:
    """The 1-DOF joints of ``model`` whose :class:`~kanedyn.JointLimits` give a range
    (``lower < upper``, at least one side finite)."""
    names, qi, ui, lo, hi = [], [], [], [], []
    for k, j in enumerate(model.joints):
        if not has_range(j):
            continue
        lim = j.limits
        assert lim is not None
        names.append(j.name)
        qi.append(int(model.layout.q_index[k][0]))
        ui.append(int(model.layout.u_index[k][0]))
        lo.append(lim.lower)
        hi.append(lim.upper)
    return LimitedJoints(
        tuple(names),
        np.array(qi, dtype=np.intp),
        np.array(ui, dtype=np.intp),
        np.array(lo, dtype=float),
        np.array(hi, dtype=float),
    )


def crossings(model: Model, t: Array, q: Array) -> tuple[LimitCrossing, ...]:
    """For each limited joint and bound, the first crossing in the outputs ``t`` (nt,),
    ``q`` (nt, nq), in time order. The time is interpolated linearly between the last
    output inside the range and the first past it (the first output, when the run
    starts past the bound)."""
    lim = limited_joints(model)
    found: list[LimitCrossing] = []
    if not lim.names or not len(t):
        return ()
    x = q[:, lim.q_index]  # (nt, k)
    for bound, values, past in (
        ("lower", lim.lower, x < lim.lower),
        ("upper", lim.upper, x > lim.upper),
    ):
        for c in np.nonzero(past.any(axis=0))[0]:
            i = int(np.argmax(past[:, c]))
            tc = float(t[i])
            if i > 0:
                a, b = x[i - 1, c], x[i, c]
                tc = float(t[i - 1] + (t[i] - t[i - 1]) * (values[c] - a) / (b - a))
            found.append(LimitCrossing(lim.names[c], bound, float(values[c]), tc))
    return tuple(sorted(found, key=lambda e: (e.t, e.joint)))


def report(found: Sequence[LimitCrossing]) -> str:
    """The warning text of ``limits="warn"``."""
    return (
        "joint limits crossed (not enforced; simulate(..., limits='stop') or "
        "--limits stop makes them stops): " + "; ".join(str(c) for c in found)
    )


def describe(model: Model) -> list[str]:
    """One line per joint with :class:`~kanedyn.JointLimits`: its range, effort and
    speed limits with units (for ``kanedyn check``)."""
    lines = []
    for j in model.joints:
        lim = j.limits
        if lim is None:
            continue
        unit, effort, speed = ("rad", "N m", "rad/s") if j.rot_dof else ("m", "N", "m/s")
        text = (
            f"range {lim.lower:g} to {lim.upper:g} {unit} (a run warns when it is crossed; "
            "limits='stop' or --limits stop makes its bounds stops)"
            if has_range(j)
            else f"no position range (lower {lim.lower:g}, upper {lim.upper:g} {unit}; not checked)"
        )
        extra = [
            f"{what} {value:g} {u}"
            for what, value, u in (("effort", lim.effort, effort), ("speed", lim.velocity, speed))
            if np.isfinite(value)
        ]
        lines.append(
            f"joint {j.name!r} limits: {text}"
            + (f"; {', '.join(extra)} (not enforced)" if extra else "")
        )
    return lines


def summary(traj: Any) -> dict[str, Any]:
    """The run summary's entries for the joint limits: ``joint_limits`` (the mode) and
    ``limit_crossings`` (joint, bound, limit, first time), when the model has limits."""
    if not limited_joints(traj.model).names:
        return {}
    return {
        "joint_limits": traj.limits,
        "limit_crossings": [
            {"joint": c.joint, "bound": c.bound, "limit": c.limit, "t_s": c.t}
            for c in traj.limit_crossings
        ],
    }


def summary_line(s: dict[str, Any]) -> str | None:
    """The line of ``kanedyn simulate``'s printed summary for the entries of
    :func:`summary` (None without them)."""
    if "joint_limits" not in s:
        return None
    mode, found = s["joint_limits"], s["limit_crossings"]
    if mode == "ignore":
        return "  joint limits: not checked"
    events = "; ".join(
        f"{c['joint']!r} {c['bound']} {c['limit']:g} at t = {c['t_s']:.6g} s" for c in found
    )
    if mode == "stop":
        return f"  joint limits (stops): {events or 'no stop reached'}"
    return f"  joint limits: {'crossed (not enforced): ' + events if found else 'not crossed'}"
