"""Recursive Newton–Euler inverse dynamics: a third path to the joint efforts.

The free-body diagram of body i (seed 000, "Free Body Diagram of Link i") balances the
force ``f_{k}`` and moment ``N_{k}`` that its inbound joint k transmits from the inner
body, the forces and moments of its outbound joints (reacted), gravity, and the applied
loads:

.. math::

    f_k &= m_i (a_{ci} - g) - F_i + \\sum_{c \\in \\text{children}(i)} f_c \\\\
    N_k &= I_i \\alpha_i + \\omega_i \\times (I_i \\omega_i + h_i) - T_i
        + (r_{ci} - o_k) \\times \\big(m_i (a_{ci} - g) - F_i\\big)
        + \\sum_{c} \\big[ N_c + (o_c - o_k) \\times f_c \\big]

with ``N_k`` taken about the joint point ``o_k`` (the Go origin), all vectors in N. A
forward pass from the root carries the spatial velocities and accelerations along the
joint chain ``Bi → Gi → slides → rotation → Go → Bo``; a backward pass from the leaves
sums the forces. The recursion is the one of :mod:`kanedyn.dynamics.recursion` (written
once on scalars, in the joint frames; the compiled engine traces it); this module
expresses its results in N. The joint efforts are the projections on the joint's axes, less what the joint's
own springs and dampers supply:

.. math::

    \\tau_r = b_r \\cdot N_k - Q^{spring}_r \\;(\\text{rotational}), \\qquad
    \\tau_c = \\delta_c \\cdot f_k - Q^{spring}_c \\;(\\text{slide})

(``b_r`` the axis of rotational speed r in N: the gimbal axis of angle r, or Go axis r of
a spherical joint; ``δ_c`` the slide axis), so that ``τ = M ν̇ - f`` with Kane's ``M`` and
``f``: the same vector as :func:`kanedyn.inverse_dynamics`. Nothing of the Kane path
(partials, mass matrix) is used; the spring law is the model's (:mod:`kanedyn.dynamics.loads`).
"""

from __future__ import annotations

import warnings

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.dynamics.loads import LoadsLike
from kanedyn.dynamics.recursion import Recursion
from kanedyn.dynamics.rotors import refuse_rotors
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.spatial.algebra import cross, mv

__all__ = ["NewtonEuler", "newton_euler"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class NewtonEuler:
    """Result of :func:`newton_euler` (all vectors in N components).

    Attributes
    ----------
    tau : (n,)
        Joint efforts ``[u | s]`` order: ``τ = M ν̇ - f`` (Kane's M and f).
    f_joint : (nj, 3)
        Force transmitted by joint k from its inner body (or N) to its outer body.
    N_joint : (nj, 3)
        Moment transmitted by joint k, about the joint point ``o[k]``.
    o : (nj, 3)
        Joint points (Go origins).
    omega, alpha : (nb, 3)
        Angular velocities and accelerations of the bodies.
    r, a : (nb, 3)
        Mass-centre positions and accelerations.
    """

    tau: Array
    f_joint: Array
    N_joint: Array
    o: Array
    omega: Array
    alpha: Array
    r: Array
    a: Array


def newton_euler(
    model: Model, state: State, acc: ArrayLike, loads: LoadsLike = None, t: float = 0.0
) -> NewtonEuler:
    """Recursive Newton–Euler: joint efforts and reactions for the accelerations ``acc``.

    The recursion of :meth:`kanedyn.dynamics.recursion.Recursion.newton_euler` (the one
    RNEA, also traced by the compiled engine) on the numbers of ``state``, in each joint
    frame Go_k, with the applied loads (gravity, springs, dampers, ``loads``) as body
    forces; its results are then expressed in N:

    .. math::

        R_{N G_o,k} = R_{N G_o,p} E_k, \\quad o_k = o_p + R_{N G_o,p} r_k, \\qquad
        a_{c} = a_O + \\alpha \\times c + \\omega \\times (v_O + \\omega \\times c)

    (``(E_k, r_k)`` the joint's transform from its inner frame; ``a_O``, ``v_O`` the
    spatial acceleration and velocity of the body point at the joint point; ``c`` the
    mass centre). The wrench transmitted by joint k is the free-body balance of its
    subtree (module docstring), and ``τ_r = S_rᵀ f_k - Q_r``.

    Parameters
    ----------
    model : Model
        Numeric; every joint type (gimbal, spherical, slides, free, weld).
    state : State
    acc : (n,)
        ``d/dt [u | s]``.
    loads : optional
        Applied loads as for :func:`kanedyn.forward_dynamics`.
    t : float
        Time passed to callable loads.

    Returns
    -------
    NewtonEuler
    """
    model.check_state(state)
    refuse_rotors(model, "newton_euler (RNEA)")
    acc = np.asarray(acc, dtype=float)
    if acc.shape != (model.n,):
        raise ModelError(f"acc has shape {acc.shape}; this model has n = {model.n} speeds")
    rec = Recursion.at_state(model, state, loads, t)
    geo, c, p, a_N = rec.terms()
    a_go, f_go = rec.newton_euler(geo, c, p, a_N, acc.tolist())
    Q = rec.generalized_forces()
    nb = model.nb
    R = np.empty((nb, 3, 3))  # R_N_Go
    o = np.empty((nb, 3))
    tau = np.empty(model.n)
    for k, b in enumerate(geo):
        E, r = np.array(b.E, dtype=float), np.array(b.r, dtype=float)
        R[k], o[k] = (E, r) if b.parent < 0 else (R[b.parent] @ E, o[b.parent] + R[b.parent] @ r)
        for s, i in b.J.cols:
            tau[i] = np.dot(s, f_go[k]) - Q[i]
    V = np.array(rec.velocities(geo), dtype=float).reshape(nb, 6)
    A = np.array(a_go, dtype=float).reshape(nb, 6)
    F = np.array(f_go, dtype=float).reshape(nb, 6)
    com = np.array([b.com for b in geo], dtype=float).reshape(nb, 3)
    w, v_O, al, a_O = V[:, :3], V[:, 3:], A[:, :3], A[:, 3:]
    a_c = a_O + cross(al, com) + cross(w, v_O + cross(w, com))
    return NewtonEuler(
        tau=tau,
        f_joint=mv(R, F[:, 3:]),
        N_joint=mv(R, F[:, :3]),
        o=o,
        omega=mv(R, w),
        alpha=mv(R, al),
        r=o + mv(R, com),
        a=mv(R, a_c),
    )


def inverse_dynamics_rnea(
    model: Model, state: State, acc: ArrayLike, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """Deprecated: ``newton_euler(model, state, acc, loads, t).tau``
    (:attr:`NewtonEuler.tau`), which this returns with a DeprecationWarning."""
    warnings.warn(
        "kanedyn.inverse_dynamics_rnea is deprecated; use "
        "kanedyn.newton_euler(model, state, acc, loads, t).tau",
        DeprecationWarning,
        stacklevel=2,
    )
    return newton_euler(model, state, acc, loads, t).tau
