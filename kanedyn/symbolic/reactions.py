"""Joint reactions in sympy through auxiliary speeds (Kane & Levinson 1985, §5.6).

A joint's reaction does no work in any motion the joint allows, so it is absent from
Kane's equations. To bring it into evidence, give the subtree outboard of joint k a
motion the joint forbids, with an **auxiliary speed** ``ũ`` along a constrained
direction: a rotation about a unit axis ``e`` through the joint point ``o_k``, or a
translation along a unit axis ``d``. The partials of every outboard body i are

.. math::

    \\tilde\\Omega_i = e, \\quad \\tilde V_i = e \\times (r_i - o_k)
    \\qquad\\text{or}\\qquad \\tilde\\Omega_i = 0, \\quad \\tilde V_i = d,

and, since the reaction (force ``F_c``, torque ``T_c`` about ``o_k`` that the inner body
exerts on the subtree) now does work, the auxiliary equation
``\\tilde F_r + \\tilde F^*_r = 0`` at ``ũ = 0`` gives its component

.. math::

    e \\cdot T_c = -\\sum_{i \\in k} \\tilde\\Omega_i \\cdot (T_i + T^*_i)
        + \\tilde V_i \\cdot (F_i + F^*_i)
      = e \\cdot \\sum_{i \\in k} \\big[-(T_i + T^*_i) - (r_i - o_k) \\times (F_i + F^*_i)\\big],

the projection of the subtree wrench (:func:`kanedyn.dynamics.subtree.subtree_wrench`,
the sum written once) with ``F*_i = -m_i a_i``, ``T*_i = -(I_i α_i + ω_i × H_i)``,
``α_i = Ω_i ν̇ + α_r``, ``a_i = V_i ν̇ + a_r``. The joint's own springs, dampers and
actuators act along its free axes only, and the constrained directions are chosen
orthogonal to those, so they do no work there either.

The constrained directions (an orthonormal basis of the complement of the free axes, in
Go axes) are:

* rotation: all three Go axes for a joint without rotation; for a 1-DOF hinge about Go
  axis a, the other two axes; for a 2-DOF gimbal, ``Γ_1 × Γ_2`` (the two free axes are
  orthogonal unit vectors); none for a 3-DOF gimbal or a spherical joint;
* translation: the Gi axes that are not free slide axes.

The reaction is reported in Go axes (the joint frame carried by the outer body), the
torque about the Go origin: ``F_c = Σ λ_c d_c``, ``T_c = Σ μ_c e_c``. Its expressions
contain the accelerations ``u_dot``: substitute the solution of Kane's equations (as
:meth:`~kanedyn.symbolic.KaneEquations.lambdify_reactions` does), as with sympy's
``KanesMethod.auxiliary_eqs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sympy as sm

from kanedyn.dynamics.subtree import subtree_wrench
from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.spatial.rotation import parse_sequence

__all__ = ["DIRECTIONS", "reaction_directions"]

DIRECTIONS = ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")
"""Names of explicit reaction directions: force and torque along the Go axes."""


def _axis(c: int) -> sm.Matrix:
    e = sm.zeros(3, 1)
    e[c] = 1
    return e


def reaction_directions(
    model: Model, k: int, directions: Sequence[str] | str | None, Gamma: sm.Matrix
) -> tuple[list[sm.Matrix], list[tuple[sm.Matrix, bool]], list[int] | None]:
    """Constrained directions of joint k, Go components (see the module docstring).

    Returns ``rot`` (unit axes e), ``trn`` (unit axes, each with a flag: True when it is
    given in Gi components) and, for explicit ``directions``, the asked components
    (0-2 force, 3-5 torque), else None.

    Raises
    ------
    ModelError
        For an unknown direction name, or one the joint leaves free.
    """
    j = model.joints[k]
    free_rot = [a - 1 for a in parse_sequence(j.rot_seq)[: j.rot_dof]]
    free_trn = [a - 1 for a in parse_sequence(j.trn_seq)[: j.trn_dof]]
    if directions is None:
        if j.rot_type == "spherical" or j.rot_dof == 3:
            rot = []
        elif j.rot_dof == 2:
            g1, g2 = Gamma[:, 0], Gamma[:, 1]
            rot = [g1.cross(g2)]
        else:
            rot = [_axis(c) for c in range(3) if c not in free_rot]
        trn = [(_axis(c), True) for c in range(3) if c not in free_trn]
        return rot, trn, None
    names = [directions] if directions in DIRECTIONS else list(directions)
    bad = [d for d in names if d not in DIRECTIONS]
    if bad:
        raise ModelError(
            f"kane: reactions of joint {j.name!r}: unknown directions {bad}; use some of "
            f"{list(DIRECTIONS)} (force and torque along the Go axes)"
        )
    asked = sorted({DIRECTIONS.index(d) for d in names})
    rot, trn = [], []
    for c in asked:
        if c >= 3:
            ok = j.rot_type == "gimbal" and j.rot_dof <= 1 and (c - 3) not in free_rot
            rot.append(_axis(c - 3))
        else:
            ok = (j.trn_dof == 0 or (j.rot_dof == 0 and j.rot_type == "gimbal")) and (
                c not in free_trn
            )
            trn.append((_axis(c), False))
        if not ok:
            raise ModelError(
                f"kane: reactions of joint {j.name!r}: {DIRECTIONS[c]} (Go axes) is not a "
                "constrained direction of this joint (it is free, or not orthogonal to the "
                "free axes in every configuration); ask for the joint by name alone to get "
                "its whole reaction"
            )
    return rot, trn, asked


def joint_reactions(
    model: Model,
    der: Any,
    u_dot: list,
    specs: Sequence[str | tuple[str, Sequence[str] | str]],
    mass: Sequence[sm.Expr],
) -> dict[str, tuple[sm.Matrix, sm.Matrix]]:
    """``{joint: (force, torque)}`` in Go axes, compact (tape) expressions; see the
    module docstring. ``der`` is the :func:`kanedyn.symbolic.kane` derivation, ``mass``
    the body masses as it uses them."""
    t = der.tape
    nb, nu = model.nb, model.nu
    # the resultant of the applied and inertia forces of each body (F_i + F*_i, T_i + T*_i)
    F = np.empty((nb, 3), dtype=object)
    T = np.empty((nb, 3), dtype=object)
    for i in range(nb):
        Om_ud = sm.zeros(3, 1)
        V_ud = sm.zeros(3, 1)
        for rr in range(nu):
            Om_ud += der.Omega_u[i][:, rr] * u_dot[rr]
            V_ud += der.V_u[i][:, rr] * u_dot[rr]
        for c in range(model.ns):
            V_ud += der.V_s[i][:, c] * u_dot[nu + c]
        F_star = der.F_star0[i] - mass[i] * V_ud
        T_star = der.T_star0[i] - der.I_N[i] * Om_ud
        F[i] = list(t.vec(-(der.F_app[i] + F_star), f"F_net{i}_"))
        T[i] = list(t.vec(-(der.T_app[i] + T_star), f"T_net{i}_"))
    r = np.array([list(x) for x in der.r], dtype=object)
    o = np.array([list(x) for x in der.o], dtype=object)
    F_k, T_k = subtree_wrench(model, F, T, r, o)
    out: dict[str, tuple[sm.Matrix, sm.Matrix]] = {}
    for spec in specs:
        name, directions = (spec, None) if isinstance(spec, str) else spec
        k = model.joint_index(name)
        if name in out:
            raise ModelError(f"kane: reactions: joint {name!r} is asked for twice")
        rot, trn, asked = reaction_directions(model, k, directions, der.Gamma[k])
        R_N_Go, R_N_Gi = der.R_N_Go[k], der.R_N_Gi[k]
        Fk, Tk = sm.Matrix(list(F_k[k])), sm.Matrix(list(T_k[k]))
        torque = sm.zeros(3, 1)
        for e in rot:  # e · T_c, back along e
            mu = t.name((R_N_Go * e).dot(Tk), f"mu_{name}_")
            torque += mu * e
        force = sm.zeros(3, 1)
        for d, in_gi in trn:
            d_N = R_N_Gi * d if in_gi else R_N_Go * d
            lam = t.name(d_N.dot(Fk), f"lambda_{name}_")
            force += lam * (t.vec(R_N_Go.T * d_N, f"d_{name}_") if in_gi else d)
        if asked is not None:
            for c in range(6):
                if c not in asked:
                    (force if c < 3 else torque)[c % 3] = sm.nan
        out[name] = (sm.ImmutableMatrix(force), sm.ImmutableMatrix(torque))
    return out
