"""Auxiliary speeds of a :class:`~kanedyn.symbolic.KaneProblem` (sympy's ``u_auxiliary``).

An auxiliary speed ``ũ`` is a speed of a motion the system cannot make (a point leaving
its track, a joint opening), written into the velocities by the user. The equations of
motion are formed with ``ũ = 0``; for each auxiliary speed Kane's equation

.. math::

    \\tilde F_r + \\tilde F^*_r = \\sum_P R_P \\cdot \\frac{\\partial v^P}{\\partial\\tilde u}
        + \\sum_A T_A \\cdot \\frac{\\partial\\omega^A}{\\partial\\tilde u}
        + \\sum_i R^*_i \\cdot \\frac{\\partial v^i}{\\partial\\tilde u}
        + T^*_i \\cdot \\frac{\\partial\\omega^i}{\\partial\\tilde u} = 0,
    \\qquad R^* = -m a, \\quad T^* = -(\\alpha \\cdot I + \\omega \\times I \\cdot \\omega),

evaluated at ``ũ = 0`` (accelerations with ``u̇`` kept), brings the non-working force
that the motion would do work against into evidence (Kane & Levinson 1985, §5.6;
sympy's ``KanesMethod.auxiliary_eqs``). The loads should include that force, in terms
of unknown symbols, to solve for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy as sm
from sympy.physics.vector import Point, ReferenceFrame, Vector, dynamicsymbols

from kanedyn.errors import ModelError

__all__ = ["auxiliary_equations", "check_auxiliary"]

_t = dynamicsymbols._t


def check_auxiliary(u_aux: Sequence, speeds: Sequence) -> tuple:
    """The auxiliary speeds, checked: dynamic symbols distinct from the speeds."""
    u_aux = tuple(u_aux)
    for s in u_aux:
        if not (getattr(s, "args", None) == (_t,) and s.is_Function):
            raise ModelError(f"u_auxiliary: expected dynamic symbols of t, got {s!r}")
    if len(set(u_aux)) != len(u_aux) or set(u_aux) & set(speeds):
        raise ModelError("u_auxiliary: must be distinct from each other and from the speeds")
    return u_aux


def auxiliary_equations(
    N: ReferenceFrame, masses: Sequence[Any], loads: Sequence, u_aux: Sequence, qdot_map: dict
) -> sm.Matrix:
    """``F̃_r + F̃*_r`` per auxiliary speed, shape (n_aux, 1), in q, u, u̇ and q̇-free
    (see the module docstring). ``masses`` are :class:`~kanedyn.symbolic.Mass` records."""
    zero = dict.fromkeys(u_aux, 0)
    rates = {x.diff(_t): 0 for x in u_aux}

    def at_zero(x: Any) -> Any:
        return x.xreplace(rates).xreplace(zero).xreplace(qdot_map)

    out = sm.zeros(len(u_aux), 1)
    for where, vec in loads:
        vel = where.vel(N) if isinstance(where, Point) else where.ang_vel_in(N)
        vel = vel.xreplace(qdot_map)
        for a, ua in enumerate(u_aux):
            out[a] += vec.xreplace(zero) & at_zero(vel.diff(ua, N, var_in_dcm=False))
    for m in masses:
        v = m.point.vel(N).xreplace(qdot_map)
        v0 = v.xreplace(zero)
        R = at_zero(-m.mass * v0.dt(N))
        w = Vector(0) if m.frame is None else m.frame.ang_vel_in(N).xreplace(qdot_map)
        T: Vector = Vector(0)
        if m.frame is not None and m.inertia is not None:
            w0 = w.xreplace(zero)
            T = at_zero(-((w0.dt(N) & m.inertia) + (w0 ^ (m.inertia & w0))))
        for a, ua in enumerate(u_aux):
            out[a] += R & at_zero(v.diff(ua, N, var_in_dcm=False))
            if m.frame is not None:
                out[a] += T & at_zero(w.diff(ua, N, var_in_dcm=False))
    return out
