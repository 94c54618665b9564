"""Locked joints in the energy-momentum step: lock events and joint-limit stops.

A gimbal angle or slide has an augmented coordinate ``a`` (:mod:`.formulation`), tied
to the bodies by the joint's constraints. Locking it at the value ``ā`` it has at the
event adds the linear constraint

.. math:: a_{n+1} - \\bar a = 0

to the step (:meth:`~.step.Stepper.step`), with a multiplier ``ρ``: the balance gains
``e_aᵀ ρ``, the generalized force ``-ρ`` with which the lock holds the joint. It is the
servo constraint of :mod:`.servo` with a constant output and its own DOF as the
actuator. The constraint is linear, so its discrete gradient is its gradient and
``e_aᵀ Δx = 0``: the step's energy balance and its momentum maps are those of the
unlocked scheme (the lock force is internal to the joint), so energy and momentum are
conserved between events to the Newton tolerance.

**The impact at a lock** is perfectly plastic: the new velocities are the ones that
satisfy the velocity constraints, the lock's included, nearest to the old ones in the
kinetic-energy metric (Gauss's principle for an impulsive constraint; Brogliato,
*Nonsmooth Mechanics*, 3rd ed. 2016, §4.3, the inelastic impact law
``v⁺ = prox_M(v⁻; T)``). In director coordinates, with ``C = [G(x); e_aᵀ]`` (the joint
rows and the locks),

.. math::

    \\begin{bmatrix} \\mathbf M & C^T \\\\ C & 0 \\end{bmatrix}
    \\begin{bmatrix} v^+ \\\\ \\Lambda \\end{bmatrix} =
    \\begin{bmatrix} \\mathbf M v^- \\\\ 0 \\end{bmatrix}

(the KKT system of ``min ½ (v⁺ - v⁻)ᵀ M (v⁺ - v⁻)`` subject to ``C v⁺ = 0``). Since the
joint rows annihilate the tree's speed Jacobian ``J`` and ``e_aᵀ J`` picks the locked
speed, ``Jᵀ M v⁺ = Jᵀ M v⁻ - e_r ρ``: the generalized momenta of the free DOFs are kept
and the locked speed is zero, the impact of :meth:`kanedyn.simulation.system.System.relock`
(``M(q) = Jᵀ M J``). The impulse ``CᵀΛ`` is internal: linear and angular momentum are
kept through the event. An unlock removes the row; the velocities are unchanged.

A stop (``limits="stop"``, :class:`kanedyn.simulation.stops.Stops`) drives
:class:`LockedScheme` through the same protocol as the RK4 runs' system: after the step
that crosses a bound, the joint coordinate is set on the bound (the outer subtree turned
or slid back onto it, through the joint coordinates) and locked there; it is released
after a step whose lock force would pull, ``side · ρ > 0`` (``ρ`` has the sign of the
acceleration the DOF would have unlocked).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model import State
from kanedyn.model.names import speed_names
from kanedyn.simulation.conserving.formulation import (
    Redundant,
    to_joint_coordinates,
    to_redundant,
)

__all__ = ["LockRows", "LockedScheme", "plastic_impact"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class LockRows:
    """The locks of a step: the augmented coordinates ``idx`` held at ``target``."""

    idx: NDArray[np.intp]
    target: Array

    @property
    def n(self) -> int:
        return int(self.idx.size)


def plastic_impact(red: Redundant, x: Array, v: Array, idx: NDArray[np.intp]) -> Array:
    """The velocities after a perfectly plastic impact that locks the augmented
    coordinates ``idx`` at ``x`` (the KKT projection of the module docstring)."""
    nx = red.nx
    G = red.constraints.jacobian(x)
    C = np.vstack((G, np.eye(nx)[idx]))
    nr = C.shape[0]
    A = np.zeros((nx + nr, nx + nr))
    A[:nx, :nx] = red.M
    A[:nx, nx:] = C.T
    A[nx:, :nx] = C
    rhs = np.concatenate((red.M @ v, np.zeros(nr)))
    # least squares: a planar formulation's joint rows may depend on each other
    sol = scipy.linalg.lstsq(A, rhs, check_finite=False, lapack_driver="gelsy")[0]
    return np.asarray(sol[:nx], dtype=np.float64)


class LockedScheme:
    """The locked DOFs of an energy-momentum run, and the director state they act on.

    ``locked`` (speed indices, sorted) is what :class:`~kanedyn.simulation.stops.Stops`
    reads; :meth:`relocked` and :meth:`unlocked_acceleration` are the protocol it drives
    (on joint-coordinate states ``[q | u]``); :meth:`relock` changes the lock set of the
    director state ``(x, v)`` itself (lock events)."""

    def __init__(self, red: Redundant):
        self.red = red
        model = red.model
        self.aug_of = np.full(model.n, -1, dtype=np.intp)  # speed -> augmented coordinate
        for k, idx in enumerate(red.aug):
            self.aug_of[model.layout.u_index[k]] = idx
        self.locked: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self.rows = LockRows(np.zeros(0, dtype=np.intp), np.zeros(0))
        self.x: Array = np.zeros(red.nx)
        self.v: Array = np.zeros(red.nx)
        self.rho: Array = np.zeros(0)  # the last step's lock multipliers, as ``locked``

    def check(self, speeds: Any) -> None:
        """A ModelError for a speed without an augmented coordinate (a spherical joint's
        rotation, a free root's DOFs)."""
        names = speed_names(self.red.model)
        for r in np.atleast_1d(np.asarray(speeds, dtype=np.intp)):
            if self.aug_of[r] < 0:
                raise ModelError(
                    f"speed {names[r]!r}: method='energy-momentum' locks gimbal angles and "
                    "slides (a spherical joint's rotation has no angle to hold)"
                )

    def relock(self, x: Array, v: Array, locked: Any) -> Array:
        """Set the lock set to the speeds ``locked`` at the director state ``(x, v)``:
        each newly locked coordinate is held at its value in ``x``, and the velocities
        after the plastic impact (:func:`plastic_impact`) are returned (``v`` itself when
        nothing new is locked)."""
        locked = np.unique(np.asarray(locked, dtype=np.intp))
        self.check(locked)
        new = np.setdiff1d(locked, self.locked)
        idx = self.aug_of[locked]
        self.locked = locked
        self.rows = LockRows(idx, x[idx].copy())
        self.rho = np.zeros(locked.size)
        if new.size:
            v = plastic_impact(self.red, x, v, idx)
        self.x, self.v = x, v
        return v

    def multipliers(self, lam: Array, start: int) -> None:
        """Keep the lock multipliers ``ρ`` of a converged step's ``lam`` (from ``start``)."""
        self.rho = lam[start : start + self.locked.size].copy()

    # ---------------------------------------------------------------- the Stops protocol
    def relocked(self, xq: Array, locked: Any) -> Array:
        """The joint-coordinate state ``xq = [q | u]`` (a stop may have set a coordinate
        on its bound) re-solved for the lock set ``locked``: mapped to directors, locked
        (:meth:`relock`) and read back. :attr:`x`, :attr:`v` hold the director state."""
        model = self.red.model
        x, v = to_redundant(self.red, State(xq[: model.nq], xq[model.nq :]))
        v = self.relock(x, v, locked)
        q, u = to_joint_coordinates(self.red, x, v, xq[: model.nq])
        return np.concatenate((q, u))

    def unlocked_acceleration(self, t: float, xq: Array, r: int) -> float:
        """A number with the sign of the acceleration locked speed ``r`` would have
        unlocked: its lock multiplier ``ρ`` over the last step (the lock holds the DOF
        with ``-ρ``, so the DOF would accelerate along ``ρ``)."""
        hit = np.nonzero(self.locked == r)[0]
        return float(self.rho[hit[0]]) if hit.size else 0.0
