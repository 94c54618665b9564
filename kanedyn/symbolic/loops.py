"""Closed loops in sympy: the loop constraints of a model and its constrained equations.

The same lines as the numeric engine (:mod:`kanedyn.dynamics.loops`): the constrained
directions come from :func:`kanedyn.joints.loop_constraint_axes` (through the model's
:class:`~kanedyn.dynamics.loops.LoopPlan`), and ``Φ``, the velocity rows and the bias
``b`` from :func:`kanedyn.joints.loop_rotation` and :func:`kanedyn.joints.loop_translation`
run on sympy expressions (:data:`kanedyn.symbolic.arithmetic.SYMPY`), fed with the
symbolic tree's attitudes, mass centres, partials and remainders of :func:`kanedyn.symbolic.kane`.

.. math::

    \\Phi(q) = 0, \\qquad \\dot\\Phi = A\\,\\nu, \\qquad \\ddot\\Phi = A\\dot\\nu + b,
    \\qquad \\nu = C\\nu_i, \\quad C^T(F_r + F_r^*) = 0 .
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import sympy as sm

from kanedyn import joints
from kanedyn.dynamics.loops import loop_plan
from kanedyn.errors import ModelError
from kanedyn.symbolic.arithmetic import exact, exact_rotation

if TYPE_CHECKING:
    from kanedyn.symbolic.kane import KaneEquations

__all__ = ["ConstrainedEquations", "LoopConstraints", "constrained_equations", "loop_constraints"]


@attrs.frozen(eq=False)
class LoopConstraints:
    """The loop constraints of a symbolic model (compact: in the named intermediates of
    :class:`~kanedyn.symbolic.kane.KaneEquations`; :meth:`KaneEquations.explicit`
    writes them in q, u and the parameters).

    ``Phi`` (m, 1) the closure ``Φ(q)``; ``A`` (m, n) its velocity form, ``Φ̇ = A ν``;
    ``b`` (m, 1) the acceleration bias, ``Φ̈ = A ν̇ + b``; ``loop`` (m,) the loop of each
    row, ``rotational`` (m,) whether it is a rotational row.
    """

    Phi: sm.ImmutableMatrix
    A: sm.ImmutableMatrix
    b: sm.ImmutableMatrix
    loop: tuple[str, ...]
    rotational: tuple[bool, ...]


def _vec(m: sm.MatrixBase) -> np.ndarray:
    return np.array(list(m), dtype=object)


def loop_constraints(eom: KaneEquations) -> LoopConstraints:
    """``Φ``, ``A`` and ``b`` of ``eom.model``'s loops (see the module docstring)."""
    model = eom.model
    der = eom._der
    pl = loop_plan(model)
    n, nu, nb = model.n, model.nu, model.nb
    com = [sm.Matrix([exact(c) for c in b.com]) for b in model.bodies]
    zero3 = sm.zeros(3, 1)

    def body(i: int) -> dict[str, Any]:
        if i == nb:  # N
            return dict(R=sm.eye(3), r=zero3, com=zero3, w=zero3, v=zero3, al=zero3,
                        a=zero3, Om=sm.zeros(3, n), V=sm.zeros(3, n))  # fmt: skip
        Om = sm.Matrix.hstack(der.Omega_u[i], sm.zeros(3, n - nu))
        V = sm.Matrix.hstack(der.V_u[i], der.V_s[i])
        return dict(R=der.R_N_B[i], r=der.r[i], com=com[i], w=der.omega[i], v=der.v[i],
                    al=der.alpha_r[i], a=der.a_r[i], Om=Om, V=V)  # fmt: skip

    def point(
        bd: dict[str, Any], p_B: Any, label: str
    ) -> tuple[sm.Matrix, sm.Matrix, sm.Matrix, sm.Matrix]:
        """Position, velocity, remainder acceleration and partial velocities of a point
        fixed in the body at ``p_B`` (body axes, from the body-frame origin)."""
        lever = tape.vec(bd["R"] * (sm.Matrix([exact(c) for c in p_B]) - bd["com"]), label)
        w = bd["w"]
        v = bd["v"] + w.cross(lever)
        a = bd["a"] + bd["al"].cross(lever) + w.cross(w.cross(lever))
        Vp = bd["V"] + sm.Matrix.hstack(*[bd["Om"][:, c].cross(lever) for c in range(n)])
        return bd["r"] + lever, v, a, Vp

    tape = der.tape  # the loop's axes and levers are named intermediates too
    Phi, A, b = [], [], []
    for c in range(pl.m):
        bi, bo = body(int(pl.bi[c])), body(int(pl.bo[c]))
        name = pl.names[int(pl.loop[c])]
        y_i = tape.vec(bi["R"] * sm.Matrix(list(exact_rotation(pl.y_B[c]))), f"y_{name}{c}_")
        if pl.rot[c]:
            x_o = tape.vec(bo["R"] * sm.Matrix(list(exact_rotation(pl.x_B[c]))), f"x_{name}{c}_")
            phi, nvec, bias = joints.loop_rotation(
                _vec(x_o), _vec(y_i), _vec(bi["w"]), _vec(bo["w"]), _vec(bi["al"]), _vec(bo["al"])
            )
            row = sm.Matrix(list(nvec)).T * (bo["Om"] - bi["Om"])
        else:
            p_i, v_i, a_i, V_i = point(bi, pl.pi_B[c], f"l_{name}_i_")
            p_o, v_o, a_o, V_o = point(bo, pl.po_B[c], f"l_{name}_o_")
            phi, mvec, bias = joints.loop_translation(
                _vec(y_i), _vec(p_o - p_i), _vec(v_o - v_i), _vec(bi["w"]), _vec(bi["al"]),
                _vec(a_o - a_i),
            )  # fmt: skip
            row = sm.Matrix(list(mvec)).T * bi["Om"] + y_i.T * (V_o - V_i)
        Phi.append(phi)
        b.append(bias)
        A.append(row)
    return LoopConstraints(
        Phi=sm.ImmutableMatrix(Phi) if Phi else sm.ImmutableMatrix.zeros(0, 1),
        A=sm.ImmutableMatrix(sm.Matrix.vstack(*A)) if A else sm.ImmutableMatrix.zeros(0, n),
        b=sm.ImmutableMatrix(b) if b else sm.ImmutableMatrix.zeros(0, 1),
        loop=tuple(pl.names[int(k)] for k in pl.loop),
        rotational=tuple(bool(x) for x in pl.rot),
    )


@attrs.frozen(eq=False)
class ConstrainedEquations:
    """Kane's equations with the dependent speeds eliminated (explicit sympy).

    ``independent``, ``dependent`` the speed symbols; ``u_dep`` (r, 1) the dependent
    speeds in the independent ones, ``u_d = -A_d⁻¹ A_i u_i``; ``C`` (n, n - r);
    ``c0`` (n, 1); ``mass_matrix`` = ``Cᵀ M C`` and ``forcing`` = ``Cᵀ(f - M c0)``, so
    that ``mass_matrix * d/dt(independent) = forcing``.
    """

    independent: tuple[sm.Symbol, ...]
    dependent: tuple[sm.Symbol, ...]
    u_dep: sm.ImmutableMatrix
    C: sm.ImmutableMatrix
    c0: sm.ImmutableMatrix
    mass_matrix: sm.ImmutableMatrix
    forcing: sm.ImmutableMatrix


def constrained_equations(
    eom: KaneEquations,
    independent: Sequence[Any],
    *,
    rows: Sequence[int] | None = None,
    explicit: bool = True,
) -> ConstrainedEquations:
    """Eliminate the dependent speeds of ``eom`` (a model with loops), symbolically.

    ``independent``: the independent speeds (symbols of ``eom.u``, or joint names);
    ``rows``: the constraint rows to use (default: all; give independent ones when the
    model's constraints are redundant). ``A_d`` is inverted by ``LUsolve``, so keep to
    small mechanisms (a four-bar, a slider-crank). ``explicit=False`` keeps every
    matrix in the derivation's named intermediates (``eom.compact``; the stage tables).
    """
    model = eom.model
    u = list(eom.u)
    ind: list[int] = []
    for x in independent:
        if isinstance(x, str):
            ind += model.speeds(x).tolist()
        elif x in u:
            ind.append(u.index(x))
        else:
            raise ModelError(f"independent: {x!r} is not a joint name or a speed of eom.u")
    ind = sorted(set(ind))
    dep = [r for r in range(model.n) if r not in ind]
    lc = eom.loops
    A = eom.explicit(lc.A) if explicit else lc.A
    b = eom.explicit(lc.b) if explicit else lc.b
    if rows is not None:
        A, b = A.extract(list(rows), list(range(A.cols))), b.extract(list(rows), [0])
    if A.rows != len(dep):
        raise ModelError(
            f"{A.rows} constraint rows for {len(dep)} dependent speeds: choose {len(dep)} "
            "independent rows with rows=[...]"
        )
    Ad, Ai = A.extract(list(range(A.rows)), dep), A.extract(list(range(A.rows)), ind)
    X = Ad.LUsolve(sm.Matrix.hstack(Ai, b))
    n = model.n
    C = sm.zeros(n, len(ind))
    c0 = sm.zeros(n, 1)
    for j, r in enumerate(ind):
        C[r, j] = 1
    for a, r in enumerate(dep):
        C[r, :] = -X[a, : len(ind)]
        c0[r] = -X[a, len(ind)]
    M, f = (eom.mass_matrix, eom.forcing) if explicit else (
        eom.compact.mass_matrix, eom.compact.forcing)  # fmt: skip
    return ConstrainedEquations(
        independent=tuple(u[r] for r in ind),
        dependent=tuple(u[r] for r in dep),
        u_dep=sm.ImmutableMatrix(-X[:, : len(ind)] * sm.Matrix([u[r] for r in ind])),
        C=sm.ImmutableMatrix(C),
        c0=sm.ImmutableMatrix(c0),
        mass_matrix=sm.ImmutableMatrix(C.T * M * C),
        forcing=sm.ImmutableMatrix(C.T * (f - M * c0)),
    )
