"""Applied loads of the symbolic paths, in the form :func:`~kanedyn.symbolic.kane` and
:func:`~kanedyn.symbolic.lagrange` both take.

The keywords mirror the numeric records (:class:`kanedyn.JointLoad`,
:class:`kanedyn.Force`, :class:`kanedyn.Torque`) with sympy values:

* ``joint_torques = {joint: [τ_1, ...]}``: the actuator effort on each DOF of the joint,
  rotational first (a generalized force, as :class:`kanedyn.JointLoad`);
* ``body_forces = {body: F}`` (force at the mass centre) or
  ``{body: (F, point)}`` (force at ``point``, body axes from the body-frame origin, as
  :class:`kanedyn.Force`); ``F`` in N components;
* ``body_torques = {body: T}``: a pure torque, N components.

Values may be numbers (made exact rationals), constants (sympy symbols) or *inputs*:
functions of time such as ``sympy.physics.mechanics.dynamicsymbols("T1")`` (sympy's
"specified" quantities). The inputs are collected in :attr:`Loads.inputs`; they are the
columns of ``B`` in :func:`kanedyn.symbolic.linearize`.

This module only reads and checks the keywords. Each derivation applies them its own
way: Kane's method dots them with the partial velocities, Lagrange's method with the
Jacobians of the application points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sm
from sympy.core.function import AppliedUndef

from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.symbolic.arithmetic import exact

__all__ = ["BodyForce", "Loads", "read_loads"]


def _column(values: Any, n: int, what: str, where: str) -> sm.Matrix:
    try:
        items = list(sm.Matrix(values)) if isinstance(values, sm.MatrixBase) else None
        if items is None:
            items = list(np.asarray(values, dtype=object).ravel())
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} must be a sequence of {n} values") from None
    out = sm.Matrix([exact(v) for v in items])
    if out.shape != (n, 1):
        raise ModelError(f"{where}: {what} needs {n} values, got {out.shape[0]}")
    return out


@attrs.frozen(eq=False)
class BodyForce:
    """A force ``F`` (N components) on body ``body`` (model index) at ``point`` (body
    axes from the body-frame origin), or at the mass centre when ``point`` is None."""

    body: int
    F: sm.Matrix
    point: sm.Matrix | None


@attrs.frozen(eq=False)
class Loads:
    """The applied loads of one derivation, checked against the model.

    Attributes
    ----------
    Q : list of (speed index, value)
        Joint efforts on the generalized speeds ``[u | s]``.
    forces : tuple of BodyForce
    torques : tuple of (body index, sympy.Matrix (3, 1))
        Pure torques, N components.
    inputs : tuple
        The functions of time (``T1(t)``) in the loads, sorted by name.
    constants : frozenset
        The other symbols in the loads.
    """

    Q: tuple[tuple[int, sm.Expr], ...]
    forces: tuple[BodyForce, ...]
    torques: tuple[tuple[int, sm.Matrix], ...]
    inputs: tuple[sm.Expr, ...]
    constants: frozenset

    def Q_vector(self, n: int) -> list:
        """The joint efforts as one list of length n (zeros where none)."""
        out: list[sm.Expr] = [sm.Integer(0)] * n
        for r, value in self.Q:
            out[r] += value
        return out


def _split_force(value: Any, where: str) -> tuple[Any, Any]:
    """``F`` or ``(F, point)``: a pair is a sequence of two 3-vectors."""
    if isinstance(value, sm.MatrixBase):
        return value, None
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return value[0], value[1]
    if isinstance(value, np.ndarray) and value.shape[:1] == (2,):
        return value[0], value[1]
    return value, None


def read_loads(
    model: Model,
    joint_torques: Mapping[str, Sequence[Any]] | None,
    body_forces: Mapping[str, Any] | None,
    body_torques: Mapping[str, Sequence[Any]] | None,
    caller: str,
) -> Loads:
    """Check the load keywords of ``caller`` against ``model`` (see the module docstring).

    Raises
    ------
    ModelError
        Naming the joint or body that does not exist, or the entry of the wrong size.
    """
    Q: list[tuple[int, sm.Expr]] = []
    for name, values in (joint_torques or {}).items():
        where = f"{caller}: joint_torques[{name!r}]"
        idx = [int(r) for r in model.layout.u_index[_index(model.joint_index, name, where)]]
        tau = _column(values, len(idx), "the joint efforts (one per DOF)", where)
        Q += list(zip(idx, tau, strict=True))
    forces = []
    for name, value in (body_forces or {}).items():
        where = f"{caller}: body_forces[{name!r}]"
        i = _index(model.body_index, name, where)
        F, point = _split_force(value, where)
        forces.append(
            BodyForce(
                body=i,
                F=_column(F, 3, "the force", where),
                point=None if point is None else _column(point, 3, "the point", where),
            )
        )
    torques = []
    for name, value in (body_torques or {}).items():
        where = f"{caller}: body_torques[{name!r}]"
        i = _index(model.body_index, name, where)
        torques.append((i, _column(value, 3, "the torque", where)))
    exprs = (
        [v for _, v in Q] + [e for f in forces for e in f.F] + [e for _, T in torques for e in T]
    )
    exprs += [e for f in forces if f.point is not None for e in f.point]
    inputs: set[sm.Expr] = set()
    constants: set[sm.Symbol] = set()
    for e in exprs:
        found = {f for f in e.atoms(AppliedUndef) if len(f.args) == 1}
        inputs |= found
        constants |= e.free_symbols - set().union(*(f.free_symbols for f in found))
    return Loads(
        Q=tuple(Q),
        forces=tuple(forces),
        torques=tuple(torques),
        inputs=tuple(sorted(inputs, key=str)),
        constants=frozenset(constants),
    )


def _index(lookup: Any, name: str, where: str) -> int:
    try:
        return int(lookup(name))
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None
