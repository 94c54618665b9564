"""A free system's positions held near N's origin while it drifts.

A spacecraft that translates at 0.4 m/s is 1.5 km from N's origin after an hour. Its
mass-centre positions ``φ`` are then rounded to an ulp of 1.5 km (2.3e-13 m) at every
step, independently per body: the next step's Newton iteration takes the misfit out of
the constraints, and ``v_{n+1} = 2Δx/h - v_n`` turns it into a velocity error of order
``2 ulp/h``. ``P`` and ``H`` then walk at random, by up to 1e-12 of themselves over 10⁴ steps.

When nothing in the step depends on where the system is (no joint to N, no central
field, no servo, loads and springs that are functions of the relative configuration),
the step commutes with a translation ``x -> x + T δ`` of every body (Noether's symmetry
that conserves ``P``). The run then keeps the state relative to an origin ``o``: after a
step that leaves the system's mass centre more than :data:`REACH` from it, ``T s`` is
taken off ``x`` and ``s`` added to ``o``. The rounding of ``x`` is then that of the
system's own size, and the absolute state ``x + T o`` is formed only for the outputs,
the controller and callable loads.
"""

from __future__ import annotations

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.model.plan import params_of
from kanedyn.simulation.conserving.formulation import Redundant

__all__ = ["REACH", "Origin", "origin_of"]

Array = NDArray[np.float64]

#: how far (m) the mass centre may move from the run's origin before the origin follows
REACH = 1.0


@attrs.define(eq=False)
class Origin:
    """The run's origin ``o`` (3,) in N and the translation ``T`` (nx, 3): ``x + T δ``
    moves every body by ``δ``, its directors and every other coordinate unchanged."""

    T: Array
    o: Array
    weights: Array
    const: Array  # the bodies' mass centre relative to o: weights @ x + const

    def absolute(self, x: Array) -> Array:
        """The state in N, ``x + T o``."""
        return x + self.T @ self.o  # type: ignore[no-any-return]

    def follow(self, x: Array) -> Array:
        """``x`` relative to a new origin at the mass centre when the mass centre is more
        than :data:`REACH` from the current one (``x`` itself otherwise)."""
        s = self.weights @ x + self.const
        if np.max(np.abs(s)) <= REACH:
            return x
        self.o = self.o + s
        return x - self.T @ s  # type: ignore[no-any-return]


def origin_of(red: Redundant, x: Array) -> Origin | None:
    """The moving origin of a run from ``x``, or None when the step is not invariant
    under translations along all three of N's axes: a joint or loop closure to N (its
    constraints move), a central field, a planar formulation.

    The loads of :func:`.step.generalized_loads` act on ``φ`` and the directors through
    the directors alone, gravity and the springs of the augmented coordinates do not see
    ``φ``: the constraints are what can tie a body to N, and they are checked, not
    assumed (every body's ``φ`` moves by ``δ``, its directors and modal vectors stay,
    the constraints' values do not change to 1e-12 of the state's scale, for ``δ`` one
    metre along each axis)."""
    if red.central is not None or red.planar or not red.bodies:
        return None
    T = np.zeros((red.nx, 3))
    for b in red.bodies:
        T[b.cols] = b.pinv[:, :3]
    for b in red.bodies:
        if np.max(np.abs(b.pos.L @ T - np.eye(3))) > 1e-14:
            return None
        if any(np.max(np.abs(d.L @ T)) > 1e-14 for d in b.dirs):
            return None
    for fb in red.flex:
        if any(np.max(np.abs(vec.L @ T)) > 1e-14 for vec in fb.vectors[1:]):
            return None
    scale = max(1.0, float(np.max(np.abs(x))))
    c0 = red.constraints(x)
    for k in range(3):
        if np.max(np.abs(red.constraints(x + T[:, k]) - c0), initial=0.0) > 1e-12 * scale:
            return None
    mass = params_of(red.model).mass
    W = sum((m * b.pos.L for m, b in zip(mass, red.bodies, strict=True)), np.zeros((3, red.nx)))
    const = sum((m * b.pos.c for m, b in zip(mass, red.bodies, strict=True)), np.zeros(3))
    return Origin(T, np.zeros(3), W / mass.sum(), const / mass.sum())
