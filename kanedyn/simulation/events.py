"""Lock events: :class:`Lock` and :class:`Unlock` of a joint DOF at a time (MSD slide 19).

A run takes them as its ``events``; :func:`lock_indices` checks them once against the
model and turns them into a time-sorted list of ``(t, "lock" | "unlock", r)`` with ``r``
the speed index; :func:`n_due` and :func:`locked_at` read that list during the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics import msd
from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.names import speed_names

__all__ = ["Lock", "LockEvent", "Unlock", "lock_indices", "locked_at", "n_due"]

#: One checked event: its time, ``"lock"`` or ``"unlock"``, and the speed index.
LockEvent = tuple[float, str, int]


@attrs.frozen
class Lock:
    """Lock DOF ``dof`` (0-based, rotational first) of ``joint`` at time ``t``."""

    t: float
    joint: str
    dof: int = 0


@attrs.frozen
class Unlock:
    """Unlock a DOF locked earlier."""

    t: float
    joint: str
    dof: int = 0


def lock_indices(model: Model, events: Sequence[Any]) -> list[LockEvent]:
    """``events`` checked against ``model`` and sorted by time, as ``(t, kind, r)``; a
    ModelError for an unknown event, joint or DOF, a free root's DOF, a lock of a locked
    speed or an unlock of a free one."""
    out = []
    for ev in events:
        if not isinstance(ev, (Lock, Unlock)):
            raise ModelError(f"unknown event {ev!r}: use kanedyn.Lock or kanedyn.Unlock")
        k = model.joint_index(ev.joint)
        j = model.joints[k]
        if not 0 <= ev.dof < j.ndof:
            raise ModelError(
                f"joint {ev.joint!r} has {j.ndof} DOF; cannot lock or unlock DOF {ev.dof}"
            )
        if k in msd.momentum_roots(model) or (j.inner is None and j.rot_type == "spherical"):
            raise ModelError(f"joint {ev.joint!r}: the DOFs of a free root cannot be locked")
        out.append(
            (
                float(ev.t),
                "lock" if isinstance(ev, Lock) else "unlock",
                int(model.layout.u_index[k][ev.dof]),
            )
        )
    out.sort(key=lambda e: e[0])
    locked: set[int] = set()
    for t, kind, r in out:
        if kind == "lock":
            if r in locked:
                raise ModelError(f"t = {t}: speed {speed_names(model)[r]!r} is already locked")
            locked.add(r)
        else:
            if r not in locked:
                raise ModelError(
                    f"t = {t}: cannot unlock {speed_names(model)[r]!r}: it is not locked"
                )
            locked.discard(r)
    return out


def n_due(lock_events: list[LockEvent], t: float) -> int:
    """How many of ``lock_events`` fall at or before ``t``."""
    return sum(1 for e in lock_events if e[0] <= t + 1e-12)


def locked_at(lock_events: list[LockEvent], n_applied: int) -> NDArray[np.intp]:
    """The speeds locked after the first ``n_applied`` events, sorted."""
    locked: set[int] = set()
    for _, kind, r in lock_events[:n_applied]:
        (locked.add if kind == "lock" else locked.discard)(r)
    return np.array(sorted(locked), dtype=np.intp)
