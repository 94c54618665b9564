"""The arithmetic protocol: the few operations every equation of kanedyn is written with.

An equation (a joint's rotation, its partials, a quaternion rate, a spring force) is
written once, as a function of arrays with leading batch axes, using only

* the array operators ``+ - * /`` and ``@``, indexing and broadcasting, ``numpy.stack``
  and ``numpy.sum``, and
* the elementwise functions of an :class:`Arithmetic`: ``sin``, ``cos``, ``sqrt``,
  ``abs`` (``|x|``), ``sign`` (``copysign(1, x)``: a branch-free select, the weight
  ``(1 ± sign(x - a))/2`` being exactly 0 or 1), and ``const`` (which brings the model's numbers into that
  arithmetic).

The arrays are NumPy arrays whose elements are the "scalars". Three arithmetics are
provided, as Pinocchio templates its algorithms on the scalar type:

* :data:`NUMPY`: float arrays. The dense engine and batches (one element per state,
  joint or member).
* :data:`kanedyn.codegen.TRACE`: object arrays of :class:`kanedyn.codegen.Value` and
  floats. Every operation is recorded on the tape (constants folded), from which the
  compiled engine generates code.
* :data:`kanedyn.symbolic.arithmetic.SYMPY`: object arrays of sympy expressions, model
  numbers made exact. The symbolic Kane and Lagrange paths.

Each is defined in the layer that owns its scalar type, so that this module imports
neither the tracer nor sympy.

No branch may depend on an element's value (it is a symbol or a traced value on two of
the three); choose branches from the model's structure instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

__all__ = ["NUMPY", "Arithmetic", "elementwise"]


@attrs.frozen
class Arithmetic:
    """One implementation of the arithmetic protocol (see the module docstring).

    ``sin``, ``cos``, ``sqrt``, ``abs``, ``sign`` act elementwise on arrays of this
    arithmetic's scalars; ``const`` turns a float array (a model constant) into one.
    """

    name: str
    sin: Callable[[Any], Any]
    cos: Callable[[Any], Any]
    sqrt: Callable[[Any], Any]
    const: Callable[[Any], Any]
    abs: Callable[[Any], Any]
    sign: Callable[[Any], Any]

    def __repr__(self) -> str:
        return f"Arithmetic({self.name!r})"


def elementwise(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` applied to every element of an object array (a scalar gives a 0-d array)."""
    ufunc = np.frompyfunc(fn, 1, 1)

    def apply(x: Any) -> Any:
        return np.asarray(ufunc(x), dtype=object)

    return apply


def _float_array(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _sign(x: Any) -> Any:
    return np.copysign(1.0, x)


NUMPY = Arithmetic("numpy", np.sin, np.cos, np.sqrt, _float_array, np.abs, _sign)
"""Float arrays: the dense engine and batches."""
