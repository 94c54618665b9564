"""Vector and spatial algebra as constant bilinear maps, on any arithmetic.

A bilinear map ``z = B(x, y)`` over the last axis with a constant table of terms
``z[o] += c x[i] y[j]`` is evaluated as ``(x[..., I] * y[..., J]) @ K``: one gather per
operand, one product, one matrix product (a trilinear map, :class:`Trilinear`, gathers a
third operand). On float arrays this is a handful of NumPy calls for any batch; on object
arrays (traced values, sympy expressions) the same expression records or builds exactly
the non-zero terms. The cross products, the spatial (Plücker) cross products and the
quaternion forms of :mod:`kanedyn.spatial.charts` are all such tables.

A body term of :mod:`kanedyn.spatial.plucker` that is such a map is read off its one
definition as a table (:meth:`Bilinear.of_function`, :meth:`Trilinear.of_quadratic`), so
that the dense engine evaluates it for all bodies and states in a few NumPy calls without
a second copy of the formula (the bias forces: :attr:`kanedyn.dynamics.kane.KaneTerms.bias`).

Spatial vectors are 6-vectors, motion ``(ω, v)`` and force ``(n, f)`` (conventions page).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
    "Trilinear",
    "bilinear",
    "cross",
    "cross_terms",
    "mv",
    "skew",
    "take_last",
    "trilinear",
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
        I, J = _index(t[0] for t in terms), _index(t[1] for t in terms)
        return cls(I, J, *_scatter([(t[2], t[3]) for t in terms], p))

    @classmethod
    def of_function(cls, fn: Callable[[list, list], list], nx: int, ny: int, p: int) -> Bilinear:
        """The terms of ``fn(x, y)`` (lists of ``nx`` and ``ny`` scalars to ``p``), a
        bilinear function with integer coefficients, read off by evaluating it at unit
        vectors (exact on floats): ``coef = fn(e_i, e_j)[out]``."""
        terms = [(i, j, out, c) for i, x in enumerate(_units(nx)) for j, y in enumerate(_units(ny))
                 for out, c in enumerate(fn(x, y)) if c]  # fmt: skip
        return cls.of(terms, p)


@attrs.frozen(eq=False)
class Trilinear:
    """The constant trilinear map ``z[out] = Σ coef · x[i] · y[j] · w[k]`` over its terms
    (as :class:`Bilinear`, with a third gather ``L``)."""

    I: NDArray[np.intp]
    J: NDArray[np.intp]
    L: NDArray[np.intp]
    K: NDArray[np.float64]
    K_exact: NDArray[np.object_]

    @classmethod
    def of_quadratic(cls, fn: Callable[[list, list], list], nx: int, ny: int, p: int) -> Trilinear:
        """The terms of ``fn(x, y)``, linear in ``x`` and quadratic in ``y`` with integer
        coefficients, as ``(x, y, y)`` terms ``(i, j, k)``, ``j ≤ k``, read off at unit
        vectors by polarization (exact on floats): ``fn(e_i, e_j)`` holds the ``y_j²``
        terms, ``fn(e_i, e_j + e_k) - fn(e_i, e_j) - fn(e_i, e_k)`` the ``y_j y_k``."""
        terms = []
        ys = _units(ny)
        for i, x in enumerate(_units(nx)):
            square = [fn(x, y) for y in ys]
            for j in range(ny):
                for k in range(j, ny):
                    if j == k:
                        z = square[j]
                    else:
                        both = fn(x, [a + b for a, b in zip(ys[j], ys[k], strict=True)])
                        z = [c - a - b for c, a, b in zip(both, square[j], square[k], strict=True)]
                    terms += [(i, j, k, out, c) for out, c in enumerate(z) if c]
        I, J, L = (_index(int(t[n]) for t in terms) for n in range(3))
        return cls(I, J, L, *_scatter([(t[3], t[4]) for t in terms], p))


def _units(n: int) -> list[list[float]]:
    """The unit vectors of length ``n``, as lists of floats."""
    return [[1.0 if i == j else 0.0 for i in range(n)] for j in range(n)]


def _index(values: Iterable[int]) -> NDArray[np.intp]:
    out = np.array(list(values), dtype=np.intp)
    out.setflags(write=False)
    return out


def _scatter(
    terms: list[tuple[int, float]], p: int
) -> tuple[NDArray[np.float64], NDArray[np.object_]]:
    """``K`` (n_terms, p) from ``(out, coef)`` per term, and ``K_exact`` (Python integers)."""
    K = np.zeros((len(terms), p))
    for row, (out, coef) in enumerate(terms):
        K[row, out] = coef
    if not np.all(K == np.round(K)):
        raise ModelError("bilinear coefficients must be integers; scale the result instead")
    exact = np.array([[int(c) for c in row] for row in K], dtype=object).reshape(K.shape)
    for arr in (K, exact):
        arr.setflags(write=False)
    return K, exact


#: up to this many entries, :func:`take_last` gathers by ``ndarray.take`` (half the cost
#: of ``x[..., idx]`` on one state); above, by indexing (``take`` along the last axis
#: copies element by element, and costs more than indexing on batches of states)
TAKE_LAST_SIZE = 300


def take_last(x: Array, idx: NDArray[np.intp]) -> Array:
    """``x[..., idx]``, the cheaper way for ``x``'s size (:data:`TAKE_LAST_SIZE`)."""
    return x.take(idx, axis=-1) if x.size <= TAKE_LAST_SIZE else x[..., idx]


def bilinear(x: Array, y: Array, form: Bilinear) -> Array:
    """``(x[..., I] * y[..., J]) @ K``: the bilinear map ``form`` over the last axis,
    broadcasting the leading axes (``x``, ``y`` NumPy arrays, of floats or objects)."""
    prod = take_last(x, form.I) * take_last(y, form.J)
    return prod @ (form.K_exact if prod.dtype == object else form.K)


def trilinear(x: Array, y: Array, w: Array, form: Trilinear) -> Array:
    """``(x[..., I] * y[..., J] * w[..., L]) @ K``: the trilinear map ``form`` over the
    last axis, broadcasting the leading axes."""
    prod = take_last(x, form.I) * take_last(y, form.J) * take_last(w, form.L)
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
