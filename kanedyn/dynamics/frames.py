"""Named frames: pose, velocity and acceleration of a frame fixed in a body.

A :class:`~kanedyn.Frame` F is fixed in body B at ``point`` (B axes, from B's frame
origin) with ``R_B_F = rotation``. With B's attitude ``R_N_B``, origin ``p``, mass
centre ``r``, angular velocity ω and angular acceleration α (all in N):

.. math::

    R_{NF} = R_{NB} R_{BF}, \\qquad x = p + R_{NB}\\,\\text{point}, \\qquad
    v_x = v + \\omega \\times (x - r), \\qquad
    a_x = a + \\alpha \\times (x - r) + \\omega \\times (\\omega \\times (x - r))

(the two-points formulas of a rigid body, Kane & Levinson §2.7), where ``v`` and ``a``
are the mass-centre velocity and acceleration and
``α = Ω_u u̇ + α_r``, ``a = V u̇ + a_r`` (Kane_NBody slides 18-22). A frame in N
(``body=None``) is at rest.
"""

from __future__ import annotations

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.dynamics.kinematics import cross, kinematics
from kanedyn.dynamics.partials import partials
from kanedyn.errors import ModelError
from kanedyn.model import Model, State

__all__ = ["FrameMotion", "frame_acceleration", "frame_placement", "frame_velocity"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class FrameMotion:
    """A frame's attitude ``R_N_F`` (3, 3), origin ``position`` (3,), angular velocity
    ``omega`` and origin velocity ``v``, and, from :func:`frame_acceleration`, angular
    acceleration ``alpha`` and origin acceleration ``a``; all vectors in N components."""

    R_N_F: Array
    position: Array
    omega: Array
    v: Array
    alpha: Array | None = None
    a: Array | None = None


def _frame_on_body(model: Model, name: str) -> tuple[int, Array, Array]:
    f = model.frame(name)
    i = -1 if f.body is None else model.body_index(f.body)
    return i, np.asarray(f.point, dtype=float), np.asarray(f.rotation, dtype=float)


def frame_velocity(model: Model, state: State, name: str) -> FrameMotion:
    """Pose and velocity of frame ``name`` at ``state`` (N components).

    >>> import numpy as np, kanedyn as kd
    >>> rod = kd.Body("rod", mass=1.0, inertia=np.diag([0.1, 0.1, 0.01]), com=(0, 0, -0.5))
    >>> tip = kd.Frame("tip", "rod", point=(0, 0, -1))
    >>> m = kd.Model([rod], [kd.Joint.revolute("j", None, "rod", axis=1)], frames=[tip])
    >>> s = m.set_joint(m.initial_state(), "j", rates=[2.0])
    >>> kd.frame_velocity(m, s, "tip").v.round(12).tolist()
    [0.0, -2.0, 0.0]
    """
    i, point, R_B_F = _frame_on_body(model, name)
    if i < 0:
        zero = np.zeros(3)
        return FrameMotion(R_B_F.copy(), point.copy(), zero, zero.copy())
    kin = kinematics(model, state)
    R_N_B = kin.R_N_B[i]
    x = kin.p[i] + R_N_B @ point
    v = kin.v[i] + cross(kin.omega[i], x - kin.r[i])
    return FrameMotion(R_N_B @ R_B_F, x, kin.omega[i].copy(), v)


def frame_placement(model: Model, state: State, name: str) -> tuple[Array, Array]:
    """``(R_N_F, x)``: attitude and origin (in N) of frame ``name`` at ``state``."""
    m = frame_velocity(model, state, name)
    return m.R_N_F, m.position


def frame_acceleration(model: Model, state: State, name: str, udot: ArrayLike) -> FrameMotion:
    """Pose, velocity and acceleration of frame ``name`` for speed rates ``udot``.

    ``udot`` is d/dt [u | s], for instance :func:`kanedyn.forward_dynamics`'s result.
    """
    acc = np.asarray(udot, dtype=float)
    if acc.shape != (model.n,):
        raise ModelError(f"udot has shape {acc.shape}; this model has n = {model.n} speeds")
    i, point, R_B_F = _frame_on_body(model, name)
    if i < 0:
        zero = np.zeros(3)
        return FrameMotion(R_B_F.copy(), point.copy(), zero, zero, zero, zero)
    par = partials(model, state)
    kin = par.kin
    R_N_B = kin.R_N_B[i]
    x = kin.p[i] + R_N_B @ point
    rho = x - kin.r[i]
    w = kin.omega[i]
    alpha = par.Omega[i] @ acc + par.alpha_r[i]
    a_c = par.V[i] @ acc + par.a_r[i]
    return FrameMotion(
        R_N_B @ R_B_F,
        x,
        w.copy(),
        kin.v[i] + cross(w, rho),
        alpha,
        a_c + cross(alpha, rho) + cross(w, cross(w, rho)),
    )
