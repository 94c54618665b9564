"""The arithmetic protocol (:mod:`kanedyn.spatial.arithmetic`) on sympy expressions.

The shared equations (:mod:`kanedyn.spatial.charts`, :mod:`kanedyn.joints`) run on
object arrays of sympy expressions with :data:`SYMPY`; the model's numbers enter through
:func:`exact`, so that symbolic differences cancel exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sm

from kanedyn.spatial.arithmetic import Arithmetic, elementwise

__all__ = ["SYMPY", "exact", "exact_array", "exact_rotation", "matrix"]

_ROTATION_ROUND_OFF = 8 * np.finfo(float).eps


def exact(x: Any) -> Any:
    """A sympy expression as it is; a number as an exact rational: the shortest decimal
    that round-trips (integers as integers), so that ``0.1`` is ``1/10``.

    >>> exact(0.1), exact(2.0), exact(sm.Symbol("m"))
    (1/10, 2, m)
    """
    if isinstance(x, sm.Basic):
        return x
    if isinstance(x, (bool, np.bool_)):
        return sm.Integer(int(x))
    if isinstance(x, (float, int, np.floating, np.integer)):
        f = float(x)
        if not np.isfinite(f):
            return sm.sympify(f)
        return sm.Integer(int(f)) if f.is_integer() else sm.Rational(repr(f))
    return sm.sympify(x)


def exact_array(x: Any) -> np.ndarray:
    """``x`` as an object array of :func:`exact` values (same shape)."""
    arr = np.asarray(x, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for index, value in np.ndenumerate(arr):
        out[index] = exact(value)
    return out


def exact_rotation(R: Any) -> np.ndarray:
    """A direction-cosine matrix as exact sympy numbers: entries within round-off
    (8 ulp) of 0 or ±1 are those integers, the others exact rationals (:func:`exact`).

    A rotation built from angles in floats (``euler_to_dcm("312", (pi/2, 0, 0))``) has
    entries such as ``6.1e-17`` where the matrix is exactly 0; without this they leave
    ``6.1e-17*x`` residue terms in every symbolic product.
    """
    arr = np.asarray(R, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for index, x in np.ndenumerate(arr):
        if not isinstance(x, sm.Basic):
            f = float(x)
            for target in (0.0, 1.0, -1.0):
                if abs(f - target) <= _ROTATION_ROUND_OFF:
                    x = target
        out[index] = exact(x)
    return out


def matrix(arr: Any) -> sm.Matrix:
    """An object array of shape (m,) or (m, k) as a ``sympy.Matrix`` (a column for 1-D)."""
    a = np.asarray(arr, dtype=object)
    return sm.Matrix(a.reshape(a.shape[0], -1).tolist())


SYMPY = Arithmetic(
    "sympy",
    elementwise(sm.sin),
    elementwise(sm.cos),
    elementwise(sm.sqrt),
    exact_array,
    elementwise(sm.Abs),
    elementwise(sm.sign),
)
"""Object arrays of sympy expressions."""
