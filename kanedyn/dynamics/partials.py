"""Stage 2: partial angular velocities Ω_u, partial velocities V_u, V_s, remainders.

Kane_NBody slides 18-22 and Translational Joints slides 6-8 (42 ``FindPAngVel``,
``FindPVel``, ``FindAlphaR``, ``FindAccR``), in N components throughout:

.. math::

    \\Omega_u[i][:, r] = P_{i k(r)}\\, R_{N G_o} \\Gamma_{k(r)}[:, r], \\qquad
    V_u[i][:, r] = P_{i k(r)}\\, \\big(R_{N G_o} \\Gamma_{k(r)}[:, r]\\big) \\times (r_i - o_{k(r)}),
    \\qquad V_s[i][:, c] = P_{i k(c)}\\, R_{N G_i} \\Delta_{k(c)}[:, c]

so that ``ω_i = Ω_u[i] u`` and ``v_i = V_u[i] u + V_s[i] s``. The remainders make
``ω̇_i = Ω_u[i] u̇ + α_r[i]`` and ``a_i = V_u[i] u̇ + V_s[i] ṡ + a_r[i]``:

.. math::

    \\alpha^r_k &= \\omega_{o(k)} \\times \\omega^{rel}_k + R_{N G_o} \\dot\\Gamma_k \\sigma_k
        \\quad (\\text{the } \\dot\\Gamma\\sigma \\text{ term}), \\qquad
    \\alpha_r[i] = \\sum_k P_{ik} \\alpha^r_k \\\\
    a_r[i] &= \\sum_k P_{ik} \\big[ \\alpha^r_k \\times (r_i - o_k)
        + \\omega^{rel}_k \\times (v_i - v_{o_k}) + \\omega_{i(k)} \\times w_k \\big]

The last term is the slider Coriolis term (with the ω × (ω × r) terms it gives 42's
``2 ω_i × Δ s``).
"""

from __future__ import annotations

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kinematics import MOTION_CROSS, Kinematics, bilinear, cross, kinematics_at, mv
from kanedyn.model import Model, State
from kanedyn.model.batch import ModelBatch, States, resolve
from kanedyn.model.plan import plan_of

__all__ = ["Partials", "partials"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class Partials:
    """Partial (angular) velocities and remainder accelerations, all in N components.

    ``Omega_u`` (nb, 3, nu), ``V_u`` (nb, 3, nu), ``V_s`` (nb, 3, ns),
    ``alpha_r`` (nb, 3), ``a_r`` (nb, 3). ``kin`` is the Kinematics they were built from.
    With joints at nodes of flexible bodies (``kin.nodes``), ``Omega_xi``, ``V_xi``
    (nb, 3, nf) are the partials over the modal speeds of the bodies outboard of a node
    (``P S_ξ``, :class:`~kanedyn.dynamics.kinematics.NodeKinematics`); None without.
    """

    Omega_u: Array
    V_u: Array
    V_s: Array
    alpha_r: Array
    a_r: Array
    kin: Kinematics
    Omega_xi: Array | None = None
    V_xi: Array | None = None

    @property
    def Omega(self) -> Array:
        """Ω over all speeds [u | s], shape (nb, 3, nu + ns); Ω_s = 0."""
        zeros = np.zeros(self.V_s.shape)
        return np.concatenate((self.Omega_u, zeros), axis=-1)

    @property
    def V(self) -> Array:
        """V over all speeds [u | s], shape (nb, 3, nu + ns)."""
        return np.concatenate((self.V_u, self.V_s), axis=-1)


def joint_axes(model: Model, kin: Kinematics) -> tuple[Array, Array]:
    """Columns of the joint partials in N: ``Hw`` (..., nu, 3) = R_N_Go Γ, ``Hs`` (..., ns, 3)
    = R_N_Gi Δ (one row per speed, read from the motion subspace ``kin.Phi``)."""
    S = joint_subspace(model, kin)
    nu = model.nu
    return S[..., :nu, :3], S[..., nu:, 3:]


def joint_subspace(model: Model, kin: Kinematics) -> Array:
    """The motion subspace per speed, ``S`` (..., n, 6): row r is (h_r, o × h_r) for a
    rotational speed and (0, d_r) for a slide (Plücker, about ``kin.origin``, in N)."""
    pl = plan_of(model)
    Phi = kin.Phi
    return Phi.reshape(Phi.shape[:-3] + (6 * pl.nb, 6)).take(pl.dof_flat, axis=-2)


def bias_accelerations(model: Model, kin: Kinematics) -> Array:
    """Spatial bias accelerations ``A_r`` (..., nb, 6) = (α_r, a_O) about the origin of
    the spatial quantities (``kin.origin``, :class:`~kanedyn.dynamics.kinematics.Kinematics`):
    the body accelerations at zero generalized accelerations.

    .. math::

        c_k = (V_k + (0, w_k)) \\times_m V^{rel}_k + (g_k, o_k \\times g_k),
        \\quad g_k = R_{N G_o} \\dot\\Gamma_k \\sigma_k, \\qquad A_r = P c

    (equal to the α_k and a_r terms of the module docstring, with
    ``a_r = a_O + α_r × r + ω × v``; ``o``, ``r`` relative to the origin). A joint at a
    node of a flexible body adds ``c_node`` to its ``c_k``
    (:class:`~kanedyn.dynamics.kinematics.NodeKinematics`).
    """
    pl = plan_of(model)
    Vk = kin.V
    if pl.has_slides:
        Vk = Vk.copy()
        Vk[..., 3:] += kin.w
    c = bilinear(Vk, kin.V_rel, MOTION_CROSS)
    if pl.gimbal_dof >= 2:
        g = mv(kin.R_N_Go, kin.Gds)
        c[..., :3] += g
        c[..., 3:] += cross(kin.o_rel, g)
    if kin.nodes is not None:  # joints riding on nodes: c_node of NodeKinematics
        c = c + kin.nodes.c_node
    return model.layout.path @ c


def partials(model: Model | ModelBatch, state: State | States) -> Partials:
    """Ω_u, V_u, V_s and the remainder accelerations α_r, a_r at ``state``.

    See the module docstring for the equations (Kane_NBody slides 18-22). With
    :class:`~kanedyn.States` and/or a :class:`~kanedyn.ModelBatch`, every array gains
    the leading batch axis.

    >>> import kanedyn as kd
    >>> m = kd.examples.double_pendulum()
    >>> par = kd.partials(m, m.initial_state())
    >>> par.Omega_u.shape, par.V_u.shape, par.V_s.shape
    ((2, 3, 2), (2, 3, 2), (2, 3, 0))
    """
    base, params, q, u = resolve(model, state)
    return partials_at(base, kinematics_at(base, q, u, params))


def partials_at(model: Model, kin: Kinematics) -> Partials:
    """Partials of ``kin`` (any leading batch axes)."""
    lay = model.layout
    P = lay.path
    Hw, Hs = joint_axes(model, kin)
    Pu = P[:, lay.u_joint]  # (nb, nu)
    Ps = P[:, lay.s_joint]  # (nb, ns)
    Omega_u = Pu[:, None, :] * Hw.swapaxes(-1, -2)[..., None, :, :]
    lever = kin.r_rel[..., :, None, :] - kin.o_rel[..., None, lay.u_joint, :]  # (nb, nu, 3)
    V_u = Pu[:, None, :] * cross(Hw[..., None, :, :], lever).swapaxes(-1, -2)
    V_s = Ps[:, None, :] * Hs.swapaxes(-1, -2)[..., None, :, :]
    A = bias_accelerations(model, kin)
    alpha_r = A[..., :3]
    a_r = A[..., 3:] + cross(alpha_r, kin.r_rel) + cross(kin.omega, kin.v)
    Omega_xi = V_xi = None
    if kin.nodes is not None:  # the modal speeds of the bodies that carry nodes
        B = np.einsum("ik,kjf->ijf", P, kin.nodes.S_xi)
        Omega_xi = B[:, :3]
        V_xi = B[:, 3:] + cross(Omega_xi.swapaxes(-1, -2), kin.r_rel[:, None, :]).swapaxes(-1, -2)
    return Partials(Omega_u=Omega_u, V_u=V_u, V_s=V_s, alpha_r=alpha_r, a_r=a_r, kin=kin,
                    Omega_xi=Omega_xi, V_xi=V_xi)  # fmt: skip
