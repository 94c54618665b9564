"""Inertia math: tensors from moments and products, validation, parallel axes, composites.

Conventions (docs/conventions.md): the products of inertia are given as positive
integrals, ``Ixy = ∫ x y dm``, as NASA 42 and CAD tools print them. The tensor has the
negated products off the diagonal:

.. math::

    I = \\begin{bmatrix} I_{xx} & -I_{xy} & -I_{xz} \\\\ -I_{xy} & I_{yy} & -I_{yz} \\\\
        -I_{xz} & -I_{yz} & I_{zz} \\end{bmatrix}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError

__all__ = [
    "composite_mass_properties",
    "inertia_tensor",
    "parallel_axis",
    "principal_axes",
    "validate_inertia",
]

Array = NDArray[np.float64]


def inertia_tensor(
    Ixx: float, Iyy: float, Izz: float, Ixy: float = 0.0, Ixz: float = 0.0, Iyz: float = 0.0
) -> Array:
    """Inertia tensor from moments and products given as positive integrals.

    ``Ixy = ∫ x y dm`` (42's "Products of Inertia (xy,xz,yz)"); the tensor stores ``-Ixy``.

    >>> inertia_tensor(2.0, 3.0, 4.0, Ixy=0.5)[0, 1]
    np.float64(-0.5)
    """
    return np.array(
        [[Ixx, -Ixy, -Ixz], [-Ixy, Iyy, -Iyz], [-Ixz, -Iyz, Izz]],
        dtype=float,
    )


def validate_inertia(
    I: ArrayLike,
    *,
    name: str = "inertia",
    rtol: float = 1e-9,
    check_triangle: bool = True,
    allow_singular: bool = False,
) -> Array:
    """Check that ``I`` is a physical inertia tensor and return it as a float (3, 3) array.

    A physical tensor is finite, symmetric, positive definite, and its principal moments
    satisfy the triangle inequality ``I1 + I2 >= I3`` (for every ordering); or it is
    exactly zero, which makes the body a **particle** (a point mass at its mass centre).
    A tensor with some zero and some positive moments (a thin rod about its axis) is not
    accepted. Whether a model of particles has a positive definite mass matrix is checked
    when the :class:`~kanedyn.Model` is built. ``check_triangle=False`` skips only the
    triangle inequality (NASA 42 does not check it, and its Explorer-1 demo violates it).
    ``allow_singular=True`` accepts a positive semidefinite tensor (zero included): a
    massless link or a point mass.

    Raises
    ------
    ModelError
        Naming ``name`` and the violated property.
    """
    arr = np.asarray(I, dtype=float)
    if arr.shape != (3, 3):
        raise ModelError(f"{name}: inertia must be a 3x3 array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{name}: inertia has non-finite entries")
    scale = max(float(np.max(np.abs(arr))), np.finfo(float).tiny)
    if not np.allclose(arr, arr.T, rtol=0.0, atol=rtol * scale):
        raise ModelError(f"{name}: inertia is not symmetric:\n{arr}")
    if not np.any(arr):
        return np.zeros((3, 3))  # a particle
    arr = 0.5 * arr + 0.5 * arr.T
    try:  # on the tensor scaled to 1, so that huge entries do not overflow
        moments = np.linalg.eigvalsh(arr / scale) * scale
    except np.linalg.LinAlgError:
        raise ModelError(
            f"{name}: the principal moments of the inertia cannot be computed"
        ) from None
    if allow_singular:
        if moments[0] < -rtol * scale:
            raise ModelError(
                f"{name}: inertia is not positive semidefinite (principal moments "
                f"{moments.tolist()})"
            )
    elif moments[0] <= rtol * scale:
        raise ModelError(
            f"{name}: inertia is not positive definite (principal moments {moments.tolist()}); "
            "a particle has inertia exactly zero"
        )
    # eigvalsh sorts ascending: the binding inequality is I1 + I2 >= I3.
    if check_triangle and moments[0] + moments[1] < moments[2] * (1.0 - rtol):
        raise ModelError(
            f"{name}: principal moments {moments.tolist()} violate the triangle inequality "
            "I1 + I2 >= I3 (no real mass distribution has them; pass check_triangle=False "
            "to accept them anyway)"
        )
    return arr


def parallel_axis(I_c: ArrayLike, mass: float, r: ArrayLike) -> Array:
    """Shift an inertia tensor from the mass centre to a point.

    .. math:: I_P = I_C + m \\left( (r \\cdot r) U - r r^T \\right)

    where ``r`` is the vector from the point P to the mass centre C (or from C to P: the
    expression is even in r). All in the same axes.
    """
    r = np.asarray(r, dtype=float)
    return np.asarray(I_c, dtype=float) + mass * (np.dot(r, r) * np.eye(3) - np.outer(r, r))


def principal_axes(I: ArrayLike) -> tuple[Array, Array]:
    """Principal moments (ascending) and axes.

    Returns ``(moments, R)`` with ``I = R @ diag(moments) @ R.T``; the columns of ``R``
    are the principal axes and ``det(R) = +1`` (a proper rotation).
    """
    moments, R = np.linalg.eigh(np.asarray(I, dtype=float))
    if np.linalg.det(R) < 0.0:
        R[:, 2] = -R[:, 2]
    return moments, R


def composite_mass_properties(
    parts: Iterable[tuple[float, ArrayLike, ArrayLike]]
    | Sequence[tuple[float, ArrayLike, ArrayLike]],
) -> tuple[float, Array, Array]:
    """Combine rigidly joined parts into one body.

    Each part is ``(m_k, c_k, I_k)``: mass, mass-centre position and inertia tensor about
    its own mass centre, all in one common frame. The composite is

    .. math::

        m = \\sum_k m_k, \\qquad c = \\frac{1}{m}\\sum_k m_k c_k, \\qquad
        I = \\sum_k \\left[ I_k + m_k\\left( (d_k\\cdot d_k) U - d_k d_k^T \\right) \\right],
        \\; d_k = c_k - c

    (the composite-body method of the multibody notes, seed 002: sum the parts' inertias
    after shifting each to the common mass centre with the parallel-axis theorem).

    Returns
    -------
    mass, com (3,), inertia (3, 3) about ``com``.
    """
    parts = list(parts)
    if not parts:
        raise ModelError("composite_mass_properties: no parts given")
    masses = np.array([float(p[0]) for p in parts])
    if not np.all(np.isfinite(masses)) or np.any(masses <= 0.0):
        raise ModelError(f"composite_mass_properties: masses must be positive, got {masses}")
    coms = np.array([np.asarray(p[1], dtype=float).reshape(3) for p in parts])
    m = float(masses.sum())
    c = masses @ coms / m
    I = np.zeros((3, 3))
    for mk, ck, Ik in zip(masses, coms, (p[2] for p in parts), strict=True):
        I += parallel_axis(Ik, mk, ck - c)
    return m, c, I
