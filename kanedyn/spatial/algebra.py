"""Vector and spatial algebra as constant bilinear maps, on any arithmetic.

A bilinear map ``z = B(x, y)`` over the last axis with a constant table of terms
``z[o] += c x[i] y[j]`` is evaluated as ``(x[..., I] * y[..., J]) @ K``: one gather per
operand, one product, one matrix product. On float arrays this is a handful of NumPy
calls for any batch; on object arrays (traced values, sympy expressions) the same
expression records or builds exactly the non-zero terms. The cross products, the
spatial (Plücker) cross products and the quaternion forms of :mod:`kanedyn.spatial.charts`
are all such tables.

Spatial vectors are 6-vectors, motion ``(ω, v)`` and force ``(n, f)`` (conventions page).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError

__all__ = [
    "CROSS",
    "FORCE_CROSS",
    "MOTION_CROSS",
    "Bilinear",
    "bilinear",
    "cross",
    "cross_terms",
    "mv",
    "skew",
]

Array = NDArray[Any]


@attrs.frozen(eq=False)
class Bilinear:
    """The constant bilinear map ``z[out] = Σ coef · x[i] · y[j]`` over its ``terms``.

    ``I``, ``J`` gather the operands, ``K`` (n_terms, p) scatters the products with their
    coefficients; ``K_exact`` is ``K`` with Python integers, for object arrays (so that a
    symbolic result carries no floats). Coefficients are integers: scale the result
    instead (``bilinear(...) / 2`` stays exact on every arithmetic).
    """

    I: NDArray[np.intp]
    J: NDArray[np.intp]
    K: NDArray[np.float64]
    K_exact: NDArray[np.object_]

    @classmethod
    def of(cls, terms: Iterable[tuple[int, int, int, float]], p: int) -> Bilinear:
        """From ``(i, j, out, coef)`` terms with ``p`` outputs."""
        terms = list(terms)
        I = np.array([t[0] for t in terms], dtype=np.intp)
        J = np.array([t[1] for t in terms], dtype=np.intp)
        K = np.zeros((len(terms), p))
        for row, (_, _, out, coef) in enumerate(terms):
            K[row, out] = coef
        if not np.all(K == np.round(K)):
            raise ModelError("bilinear coefficients must be integers; scale the result instead")
        exact = np.array([[int(c) for c in row] for row in K], dtype=object).reshape(K.shape)
        for arr in (I, J, K, exact):
            arr.setflags(write=False)
        return cls(I, J, K, exact)


def bilinear(x: Array, y: Array, form: Bilinear) -> Array:
    """``(x[..., I] * y[..., J]) @ K``: the bilinear map ``form`` over the last axis,
    broadcasting the leading axes."""
    prod = x[..., form.I] * y[..., form.J]
    return prod @ (form.K_exact if prod.dtype == object else form.K)


def cross_terms(xo: int, yo: int, zo: int) -> list[tuple[int, int, int, float]]:
    """Terms of ``z[zo:zo+3] += x[xo:xo+3] × y[yo:yo+3]``."""
    terms = []
    for c, (a, b) in enumerate(((1, 2), (2, 0), (0, 1))):
        terms += [(xo + a, yo + b, zo + c, 1.0), (xo + b, yo + a, zo + c, -1.0)]
    return terms


CROSS = Bilinear.of(cross_terms(0, 0, 0), 3)
"""``a × b``."""
MOTION_CROSS = Bilinear.of(cross_terms(0, 0, 0) + cross_terms(0, 3, 3) + cross_terms(3, 0, 3), 6)
"""Spatial motion cross product ``(ω, v) ×ₘ (ω₂, v₂) = (ω × ω₂, ω × v₂ + v × ω₂)``."""
FORCE_CROSS = Bilinear.of(cross_terms(0, 0, 0) + cross_terms(3, 3, 0) + cross_terms(0, 3, 3), 6)
"""Spatial force cross product ``(ω, v) ×f (n, f) = (ω × n + v × f, ω × f)``."""


def cross(a: Array, b: Array) -> Array:
    """Cross product over the last axis (broadcasting), cheaper than ``np.cross``."""
    return bilinear(a, b, CROSS)


def mv(A: Array, x: Array) -> Array:
    """Batched matrix-vector product ``A[k] @ x[k]`` over the last two axes of ``A``."""
    return (A @ x[..., None])[..., 0]


def skew(v: Array) -> Array:
    """Cross-product matrices ``[v]×`` (..., 3, 3) of ``v`` (..., 3): ``[v]× b = v × b``."""
    zero = v[..., 0] * 0
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    rows = [
        np.stack([zero, -z, y], axis=-1),
        np.stack([z, zero, -x], axis=-1),
        np.stack([-y, x, zero], axis=-1),
    ]
    return np.stack(rows, axis=-2)
