"""``kd.linearize`` of a symbolic problem: a :class:`~kanedyn.symbolic.KaneProblem` (with
configuration and motion constraints, such as the Whipple bicycle) or the equations
:func:`kanedyn.symbolic.kane` returns, about a numeric operating point.

The linearization itself is :func:`kanedyn.symbolic.linearize.linearize` (Peterson, Gede
& Hubbard 2015: the constrained equations are perturbed together with their
constraints, and the dependent perturbations eliminated); this module evaluates its
matrices at the operating point and returns them in the record of
:func:`kanedyn.linearize`, :class:`~kanedyn.compiled.linearize.Linearization`, with the
eigenvalues and modes of ``A``. The state is that of the symbolic linearizer,
``x = [q_i; u_i]``: the independent coordinates, then the independent speeds.

References
----------
D. L. Peterson, G. Gede and M. Hubbard, "Symbolic linearization of equations of
motion of constrained multibody systems", Multibody Syst. Dyn. 33 (2015) 143-161.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import sympy as sm

from kanedyn.compiled.linearize import Linearization
from kanedyn.errors import ModelError
from kanedyn.symbolic.kane import KaneEquations
from kanedyn.symbolic.linearize import linearize as linearize_sympy
from kanedyn.symbolic.matching import symbol_name
from kanedyn.symbolic.problem import KaneProblem

__all__ = ["linearize_symbolic"]


def _as_floats(X: sm.Matrix, what: str) -> np.ndarray:
    """``X`` as a float array; a symbol left in it has no value in the operating point."""
    free = X.free_symbols
    if free:
        names = ", ".join(sorted(str(s) for s in free))
        raise ModelError(f"linearize: the operating point gives no value for {names} ({what})")
    return np.array(X.evalf(), dtype=float).reshape(X.shape)


def linearize_symbolic(
    problem: Any, op_point: Any, inputs: Sequence | None = None
) -> Linearization:
    """Linearize ``problem`` about the numeric ``op_point`` (see :func:`kanedyn.linearize`).

    Parameters
    ----------
    problem : KaneProblem or KaneEquations
    op_point : mapping
        Numbers by the problem's symbols: every independent coordinate and speed and
        every parameter (dependent coordinates and speeds may be omitted; they are
        solved from the constraints).
    inputs : sequence, optional
        Specified symbols (constants or functions of time in the loads) that become
        the columns of ``B``, at the operating value 0 (for ``KaneEquations``, the value
        ``op_point`` gives, if any).
        Omitted: none for a ``KaneProblem``; for ``KaneEquations``, its ``inputs``
        (the functions of time in its loads), as in :func:`kanedyn.symbolic.linearize`.

    Returns
    -------
    Linearization
        ``state_names`` from the symbols of ``x = [q_i; u_i]`` (``q2`` for ``q2(t)``),
        ``input_names`` from ``inputs``; ``state`` is the complete operating point
        (dependent coordinates and speeds included), floats by the problem's symbols.
    """
    if not isinstance(problem, KaneProblem | KaneEquations):
        raise ModelError(
            "linearize: expected a kd.Model, a kd.symbolic.KaneProblem or the equations "
            f"kd.symbolic.kane returns, got {type(problem).__name__}"
        )
    if not isinstance(op_point, Mapping):
        raise ModelError(
            "linearize: the operating point of a symbolic problem is a mapping from its "
            f"coordinates, speeds and parameters to numbers, got {type(op_point).__name__}"
        )
    if isinstance(problem, KaneProblem):
        needed = [*problem.q_ind, *problem.u_ind, *problem.parameters]
        given = set(inputs or ())
    else:
        needed = [*problem.q, *problem.u, *problem.parameters]
        given = set(problem.inputs if inputs is None else inputs)
    # checked first: a symbol left free would make the symbolic linearization slow
    missing = [x for x in needed if x not in op_point and x not in given]
    if missing:
        names = ", ".join(symbol_name(x) for x in missing)
        raise ModelError(f"linearize: the operating point gives no value for {names}")
    lin = linearize_sympy(problem, op_point, inputs=inputs)
    A = _as_floats(lin.A, "in A")
    B = _as_floats(lin.B, "in B")
    eigenvalues, modes = np.linalg.eig(A)
    point = {}
    for key, value in lin.op_point.items():
        if isinstance(key, sm.Derivative):
            continue  # rates follow from the equations
        value = sm.sympify(value)
        if value.free_symbols:
            raise ModelError(f"linearize: the operating point gives no number for {key}")
        point[key] = float(sm.re(value.evalf()))
    return Linearization(
        A=A,
        B=B,
        eigenvalues=eigenvalues.astype(np.complex128),
        modes=modes.astype(np.complex128),
        state_names=tuple(symbol_name(x) for x in lin.state),
        input_names=tuple(symbol_name(x) for x in lin.inputs),
        state=MappingProxyType(point),
    )
