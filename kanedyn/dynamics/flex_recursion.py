"""Flexible bodies in the tree recursion: the modal speeds as body-local speeds of ABA.

A flexible body's modal speeds ``ξ`` couple to its own body frame and, through the
joints at its nodes (``Joint.inner_node``), to the subtrees outboard of them. The
articulated-body algorithm (:meth:`Recursion.aba
<kanedyn.dynamics.recursion.Recursion.aba>`) condenses them as it does a joint's
speeds (a block elimination of Kane's mass matrix), once the body's own terms below
and its node joints' articulated inertias (``C += I^a Φ_n``, ``M += Φ_nᵀ I^a Φ_n``,
``h += Φ_nᵀ p^a``, :mod:`kanedyn.dynamics.recursion`) are in its modal blocks:

In ``Go_k`` (the recursion's frame: joint point, joint outer axes), the body's speeds
``w = (ω, v₀, ξ)`` in body axes are ``[T_x v_k ; ξ]`` with ``T_x = [[Rᵀ, 0],
[-Rᵀ[o]×, Rᵀ]]``, ``R = R_Go_Bo`` and ``o = -R r_out`` the body-frame origin, and their
rates (in the moving axes) ``[T_x a_k ; ξ̇]`` for the spatial acceleration ``a_k``
(Featherstone's, which the recursion carries); the classical ``a₀`` adds ``ω × v₀``.
With the terms of :mod:`kanedyn.spatial.modal` (``ΔM``, and ``h`` of
:func:`~kanedyn.spatial.modal.modal_forces`), the body's force is

.. math::

    \\begin{bmatrix} f_k \\\\ f_\\xi \\end{bmatrix} =
    \\begin{bmatrix} I_k + T_x^T A T_x & C \\\\ C^T & M_\\Psi \\end{bmatrix}
    \\begin{bmatrix} a_k \\\\ \\dot\\xi \\end{bmatrix} +
    \\begin{bmatrix} p_k + T_x^T h_r \\\\ h_\\xi \\end{bmatrix},\\qquad
    h = \\text{modal\\_forces} + \\Delta\\mathcal M_{:,v}\\,(\\omega\\times v_0),

``A = ΔM_rr``, ``C = T_xᵀ ΔM_rξ``, and Kane's equations for the modes are ``f_ξ = 0``.
With ``M = M_Ψ`` (plus the node joints' terms), eliminating ``ξ̇ = -M⁻¹(h_ξ + Cᵀ a_k)``
leaves a rigid body for ABA with inertia ``I_k + T_xᵀAT_x - C M⁻¹ Cᵀ`` (SPD: a Schur
complement of the body's kinetic-energy matrix) and bias ``p_k + T_xᵀh_r - C M⁻¹ h_ξ``;
pass 3's ``a_k`` then gives ``ξ̇``, before the node joints' children take
``a_k + Φ_n ξ̇``.
Gravity is an acceleration of N in the recursion (``a_N = -g``), so ``h`` is taken at
``g = 0`` (the same forces, :func:`~kanedyn.spatial.modal.modal_forces`); with the
loads as inputs (``a_N = 0``) ``h`` takes the gravity in body axes. In a central field
``h`` loses the field's forces on the elastic motion
(:func:`~kanedyn.spatial.modal.modal_central_forces`, at the undeformed mass centre
from the field's centre, ``Rᵀ r`` of :meth:`Recursion.field_positions
<kanedyn.dynamics.recursion.Recursion.field_positions>`), with or without loads: the
rigid bodies' loads do not hold them.

Written over the arithmetic protocol: the compiled engine
(:mod:`kanedyn.compiled.kernels`) traces it, the dense engine
(:func:`kanedyn.forward_dynamics` by CRBA and Cholesky with :mod:`kanedyn.dynamics.flex`)
is its oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kanedyn.dynamics.recursion import Recursion
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.modal import modal_central_forces, modal_forces

__all__ = ["flexible_run", "flexible_terms", "modal_accelerations"]

Scalar = Any


def flexible_terms(
    rec: Recursion, eta: Sequence[Scalar], xi: Sequence[Scalar]
) -> tuple[list[Any], list[Any], list[Any], Any, dict[int, list[Any]], list[Any]]:
    """The terms of :meth:`Recursion.aba <kanedyn.dynamics.recursion.Recursion.aba>` for
    a tree with flexible bodies (the module docstring): ``(geo, c, p, a_N, blocks,
    bodies)``, the geometry and bias forces with the flexible bodies' rigid-body terms
    ``T_xᵀAT_x``, ``T_xᵀh_r`` in them, the modal blocks ``[C, M_Ψ, h_ξ]`` per flexible
    body for ``flex`` (:meth:`Recursion.modal_blocks
    <kanedyn.dynamics.recursion.Recursion.modal_blocks>`) and the :class:`ModalBody`
    list. ``rec`` is moved to the modal state (its node joints ride on it)."""
    model = rec.model
    rec.set_modal(eta, xi)  # the joints at nodes ride on them
    geo, c, p, a_N = rec.terms()
    v = rec.velocities(geo)
    bodies = rec.modal_bodies(geo, eta)
    r_field = rec.field_positions(geo)[1] if model.central_gravity is not None else None
    blocks: dict[int, list[Any]] = {}  # body k: [C, M, h_ξ] (Recursion.aba condenses them)
    for mb in bodies:
        x = np.array(list(xi[mb.sl]), dtype=object)
        w = mb.body_velocity(rec.frame_velocity(v, mb.k))  # (ω, v₀) in body axes
        # gravity: an acceleration of N (a_N = -g), or with loads in the body axes
        g = mb.g if rec.loads else np.array([0.0, 0.0, 0.0], dtype=object)
        w_x_v = np.array(sp.cross(list(w[:3]), list(w[3:])), dtype=object)
        hk = modal_forces(mb.md, mb.eta, x, w[:3], g) + mb.dM[:, 3:6] @ w_x_v
        if r_field is not None:  # the field on the displaced mass, beyond the rigid body's
            r = mb.R.T @ np.array(list(r_field[mb.k]), dtype=object)
            hk = hk - modal_central_forces(
                rec.ar, mb.md, mb.eta, rec.par("mu"), rec.par("com", mb.k), r
            )
        blocks[mb.k] = rec.modal_blocks(geo, p, mb, hk)
    return geo, c, p, a_N, blocks, bodies


def flexible_run(
    rec: Recursion, eta: Sequence[Scalar], xi: Sequence[Scalar]
) -> tuple[list[Scalar], list[Scalar]]:
    """Forward dynamics of a tree with flexible bodies by ABA (the module docstring);
    ``rec`` holds the joints' coordinates and speeds, ``eta``, ``xi`` the modal ones
    (``Model.nf`` each, in body order). Returns ``(ν̇, q̇)`` over the flexible state:
    ``[u̇ | ṡ | ξ̇]`` and ``[q̇_joints | η̇ = ξ]``. The modes are condensed inside
    :meth:`Recursion.aba <kanedyn.dynamics.recursion.Recursion.aba>` (``flex``, with the
    blocks of :meth:`Recursion.modal_blocks
    <kanedyn.dynamics.recursion.Recursion.modal_blocks>`, which the momentum states'
    speeds, :meth:`Recursion.run_msd <kanedyn.dynamics.recursion.Recursion.run_msd>`,
    share)."""
    geo, c, p, a_N, blocks, bodies = flexible_terms(rec, eta, xi)
    nudot = rec.aba(geo, c, p, rec.generalized_forces(), a_N, flex=blocks)
    return [*nudot, *modal_accelerations(rec)], [*rec.qdot(), *xi]


def modal_accelerations(rec: Recursion) -> list[Scalar]:
    """``ξ̇`` (``Model.nf``, in body order) of the last pass 3 of :meth:`Recursion.aba
    <kanedyn.dynamics.recursion.Recursion.aba>` with ``flex`` (``rec.xidot``)."""
    xidot: list[Scalar] = [0.0] * rec.model.nf
    for k, sl in rec.model.modal_slices():
        xidot[sl] = rec.xidot[k]
    return xidot
