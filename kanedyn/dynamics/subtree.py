"""Sums over the subtree outboard of each joint, moved to the joint point: written once.

Kane's method, MSD and Newton–Euler all need, for every joint k, the resultant of some
per-body vectors over the bodies outboard of k (the subtree of k, k's outer body
included), with moments taken about the joint point ``o_k``:

.. math::

    F_k = \\sum_{i \\in k} F_i, \\qquad
    T_k = \\sum_{i \\in k} T_i + (r_i - o_k) \\times F_i
        = \\sum_{i \\in k} (T_i + r_i \\times F_i) - o_k \\times F_k

With forces and torques this is the wrench the joint must transmit (Kane Constraints
slides 8-10; the free-body diagram of seed 000), with momenta the subtree momenta
``P_k``, ``H_k`` of the MSD states (MSD_NBody slides 8 and 16, where the path matrix's
transpose plays Σ). It is one product with the transposed path matrix
(``model.layout.path``), for every joint at once.
"""

from __future__ import annotations

from typing import Any

from numpy.typing import NDArray

from kanedyn.spatial.algebra import cross

__all__ = ["subtree_sum", "subtree_wrench"]

Array = NDArray[Any]


def subtree_sum(model: Any, x: Array) -> Array:
    """``Σ_{i ∈ k} x_i`` for every joint k: ``path.T @ x``, x (nb, ...) -> (nj, ...).

    On object arrays (sympy, traced values) the path matrix is taken as integers, so the
    sums stay exact."""
    path = model.layout.path
    return (path.astype(int) if x.dtype == object else path).T @ x


def subtree_wrench(model: Any, F: Array, T: Array, r: Array, o: Array) -> tuple[Array, Array]:
    """Resultant ``F_k`` and moment ``T_k`` about ``o_k`` of the vectors ``F_i`` applied
    at the points ``r_i`` plus the couples ``T_i``, over the bodies outboard of each joint
    (see the module docstring).

    Parameters
    ----------
    model : Model
    F, T, r : (nb, 3)
        Per body: vector, couple, point of application (N components).
    o : (nj, 3)
        The points the moments are taken about (the joint points, or one point for all).

    Returns
    -------
    F_k, T_k : (nj, 3)
    """
    F_k = subtree_sum(model, F)
    return F_k, subtree_sum(model, T + cross(r, F)) - cross(o, F_k)
