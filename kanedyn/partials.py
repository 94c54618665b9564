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

from kanedyn.kinematics import Kinematics, _kinematics, cross, mv
from kanedyn.model import Model, State

__all__ = ["Partials", "partials"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class Partials:
    """Partial (angular) velocities and remainder accelerations, all in N components.

    ``Omega_u`` (nb, 3, nu), ``V_u`` (nb, 3, nu), ``V_s`` (nb, 3, ns),
    ``alpha_r`` (nb, 3), ``a_r`` (nb, 3). ``kin`` is the Kinematics they were built from.
    """

    Omega_u: Array
    V_u: Array
    V_s: Array
    alpha_r: Array
    a_r: Array
    kin: Kinematics

    @property
    def Omega(self) -> Array:
        """Ω over all speeds [u | s], (nb, 3, nu + ns): Ω_s = 0."""
        nb = self.Omega_u.shape[0]
        return np.concatenate((self.Omega_u, np.zeros((nb, 3, self.V_s.shape[2]))), axis=2)

    @property
    def V(self) -> Array:
        """V over all speeds [u | s], (nb, 3, nu + ns)."""
        return np.concatenate((self.V_u, self.V_s), axis=2)


def joint_axes(model: Model, kin: Kinematics) -> tuple[Array, Array]:
    """Columns of the joint partials in N: ``Hw`` (nu, 3) = R_N_Go Γ, ``Hs`` (ns, 3) = R_N_Gi Δ."""
    lay = model.layout
    Hw = (kin.R_N_Go @ kin.Gamma)[lay.u_joint, :, lay.u_col]
    Hs = (kin.R_N_Gi @ lay.Delta)[lay.s_joint, :, lay.s_col]
    return Hw, Hs


def partials(model: Model, state: State) -> Partials:
    """Ω_u, V_u, V_s and the remainder accelerations α_r, a_r at ``state``.

    See the module docstring for the equations (Kane_NBody slides 18-22).

    >>> import kanedyn as kd
    >>> m = kd.examples.double_pendulum()
    >>> par = kd.partials(m, m.initial_state())
    >>> par.Omega_u.shape, par.V_u.shape, par.V_s.shape
    ((2, 3, 2), (2, 3, 2), (2, 3, 0))
    """
    model.check_state(state)
    return _partials(model, _kinematics(model, state.q, state.u))


def _partials(model: Model, kin: Kinematics) -> Partials:
    lay = model.layout
    P = lay.path
    Hw, Hs = joint_axes(model, kin)
    Pu = P[:, lay.u_joint]  # (nb, nu)
    Ps = P[:, lay.s_joint]  # (nb, ns)
    Omega_u = Pu[:, None, :] * Hw.T[None]
    lever = kin.r[:, None, :] - kin.o[lay.u_joint][None, :, :]  # (nb, nu, 3)
    V_u = Pu[:, None, :] * cross(Hw[None], lever).transpose(0, 2, 1)
    V_s = Ps[:, None, :] * Hs.T[None]

    alpha_k = cross(kin.omega, kin.omega_rel) + mv(kin.R_N_Go, kin.Gds)
    alpha_r = P @ alpha_k
    a_r = (
        cross(alpha_r, kin.r)
        - P @ cross(alpha_k, kin.o)
        + cross(kin.omega, kin.v)
        - P @ cross(kin.omega_rel, kin.v_o)
        + P @ cross(kin.omega_in, kin.w)
    )
    return Partials(Omega_u=Omega_u, V_u=V_u, V_s=V_s, alpha_r=alpha_r, a_r=a_r, kin=kin)
