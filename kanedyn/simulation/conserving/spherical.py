"""Springs and dampers on spherical rotations, in director form.

kanedyn's spherical joint spring is the potential ``V = ½ φᵀ K φ + ⅓ k₂ r³ + ¼ k₃ r⁴``
of the joint's rotation vector φ, ``r = |φ|`` (:func:`kanedyn.joints.spherical_spring`;
the radial terms are MuJoCo's ball-joint polynomial spring), its damper the
dissipation ``½ ω_rᵀ C ω_r`` of the relative angular velocity in Go axes
(:func:`kanedyn.joints.spring_damper`). In the director formulation the joint's
rotation is the matrix of invariants ``Π_ec = g^i_e·g^o_c`` (= R_Gi_Go on the manifold,
quadratic in ``x``; :mod:`.constraints`). Both are written in ``Π``:

* ``φ(Π) = atan2(|s|, c) s / |s|`` with ``s = axial(Π)`` (= sin θ n) and
  ``c = (tr Π - 1)/2`` (= cos θ): a smooth function of any matrix near a rotation, equal
  to the rotation vector on the manifold;
* the **discrete gradient** of ``Ṽ(Π) = V(φ(Π))`` is Gonzalez's in the nine
  invariants (Gonzalez 1996, eq. 3.8; Betsch & Leyendecker 2006, §4):
  ``DṼ = ∇Ṽ(Π̄) + [Ṽ(Π₁) - Ṽ(Π₀) - ∇Ṽ(Π̄)·ΔΠ] ΔΠ/|ΔΠ|²``, and the generalized force
  ``Σ_ec DṼ_ec ∇π_ec(z)``. Because ``ΔΠ = ∇π(z)Δx`` exactly, its work over a step is
  ``Ṽ(Π₁) - Ṽ(Π₀)`` (energy); because the invariants are unchanged by a rigid motion of
  the whole system, it exerts no net force or torque (momentum);
* the **discrete relative angular velocity** ``ω̄ = axial(Π̄ᵀ ΔΠ)/h`` (→ ``axial(ΠᵀΠ̇)``,
  the Go-axis rate) is linear in ``Δx``, ``ω̄ = B Δx``; the damper's generalized force
  ``-h Bᵀ C ω̄`` does the work ``-h ω̄ᵀ C ω̄ ≤ 0``: the discrete dissipation;
* Newton's tangent of both, :meth:`SphericalSprings.jacobian`, is exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.joints import spherical_spring
from kanedyn.simulation.conserving.constraints import ALPHA, Invariants

__all__ = ["SphericalSprings", "rotation_vector"]

Array = NDArray[np.float64]

#: below this |s|, the series of atan2(|s|, c)/|s| (its quotient is round-off)
SMALL_S = 1e-6


def _g(q: float, c: float) -> tuple[float, ...]:
    """``g = atan2(√q, c)/√q`` (so that ``φ = g s``, ``q = |s|²``) and its derivatives
    ``g_q, g_c, g_qq, g_qc, g_cc``. Below ``|s| = SMALL_S`` the series
    ``g = 1/c - q/(3c³) + q²/(5c⁵) - ...`` (the closed forms' quotients are round-off)."""
    d = q + c * c
    g_c, g_qc, g_cc = -1.0 / d, 1.0 / d**2, 2.0 * c / d**2
    if q < SMALL_S**2:
        g = 1.0 / c - q / (3.0 * c**3)
        g_q = -1.0 / (3.0 * c**3)
        g_qq = 2.0 / (5.0 * c**5)
    else:
        r = np.sqrt(q)
        g = float(np.arctan2(r, c)) / r
        g_q = 0.5 * (c / d - g) / q
        g_qq = -0.5 * (c / d**2 + 3.0 * g_q) / q
    return g, g_q, g_c, g_qq, g_qc, g_cc


def _invariants_sc(P: Array) -> tuple[Array, float]:
    """``s = axial(P)`` and ``c = (tr P - 1)/2``."""
    return np.einsum("jbc,bc->j", ALPHA, P), 0.5 * (float(np.trace(P)) - 1.0)


#: ∂(s, c)/∂Π (4, 9): ``s`` and ``c`` are linear in Π (the rows ALPHA_j and ½ I)
_T = np.vstack((ALPHA.reshape(3, 9), 0.5 * np.eye(3).reshape(1, 9)))


def rotation_vector(P: Array) -> tuple[Array, Array, Array]:
    """``φ(Π)`` (3,), ``∂φ/∂s`` (3, 3) and ``∂φ/∂c`` (3,) of a 3×3 matrix (see the
    module docstring)."""
    s, c = _invariants_sc(P)
    g, g_q, g_c = _g(float(s @ s), c)[:3]
    phi = g * s
    dphi_ds = g * np.eye(3) + 2.0 * g_q * np.outer(s, s)
    dphi_dc = g_c * s
    return phi, dphi_ds, dphi_dc


def _hessian(P: Array, k: Array, kp: Array | None) -> Array:
    """``∂²Ṽ/∂Π²`` (9, 9) of ``Ṽ = V(φ(Π))`` (``V`` of
    :func:`kanedyn.joints.spherical_spring`, stiffness ``k``, radial terms ``kp``), over
    the entries of Π in row order: ``Tᵀ (Jᵀ ∇²V J + Σ_i (∇V)_i ∇²φ_i) T`` with
    ``J = ∂φ/∂(s, c)``, ``T = ∂(s, c)/∂Π`` (constant), and, from ``φ_i = g(q, c) s_i``,
    ``q = |s|²``,

    * ``∂²φ_i/∂s_j∂s_k = 2g_q (δ_ij s_k + δ_ik s_j + δ_jk s_i) + 4g_qq s_i s_j s_k``,
    * ``∂²φ_i/∂s_j∂c = g_c δ_ij + 2g_qc s_i s_j``, ``∂²φ_i/∂c² = g_cc s_i``.
    """
    s, c = _invariants_sc(P)
    g, g_q, g_c, g_qq, g_qc, g_cc = _g(float(s @ s), c)
    phi = g * s
    J = np.hstack((g * np.eye(3) + 2.0 * g_q * np.outer(s, s), (g_c * s)[:, None]))
    _, gv, hv = spherical_spring(k, kp, phi, hessian=True)
    ks = float(gv @ s)
    H = J.T @ hv @ J
    H[:3, :3] += 2.0 * g_q * (np.outer(gv, s) + np.outer(s, gv) + ks * np.eye(3))
    H[:3, :3] += 4.0 * g_qq * ks * np.outer(s, s)
    H[:3, 3] += g_c * gv + 2.0 * g_qc * ks * s
    H[3, :3] = H[:3, 3]
    H[3, 3] += g_cc * ks
    return _T.T @ H @ _T  # type: ignore[no-any-return]


#: the damper's ``h ∂(∂ω̄_j/∂ΔΠ_ec)/∂Π₁_fg = ½ α_jgc δ_ef`` (jecfg), constant
_DDW = 0.5 * np.einsum("jgc,ef->jecfg", ALPHA, np.eye(3))


def _rate_gradient(Pbar: Array, h: float) -> Array:
    """``∂ω̄/∂ΔΠ`` (3, 3, 3) of ``ω̄_j = Σ α_jbc Π̄_eb ΔΠ_ec / h``: ``Σ_b α_jbc Π̄_eb / h``."""
    return np.einsum("jbc,eb->jec", ALPHA, Pbar) / h  # type: ignore[no-any-return]


class SphericalSprings:
    """The springs and dampers of a model's spherical joints, in director form.

    ``joints``: (JointRows, k (3,), kp (2,) or None, c (3,)) per spherical joint with a
    spring or a damper (``kp`` the radial spring terms ``(k₂, k₃)``); ``nx`` the number
    of coordinates. Builds its own invariants ``Π_ec``.
    """

    def __init__(self, joints: list[tuple[Any, Array, Array | None, Array]], nx: int):
        self.inv = Invariants(nx)
        self.Pi = []
        self.k, self.kp, self.c = [], [], []
        cols: set[int] = set()
        for jr, k, kp, c in joints:
            self.Pi.append(np.array([[self.inv.dot(jr.Gi[e], jr.Go[f]) for f in range(3)]
                                     for e in range(3)]))  # fmt: skip
            self.k.append(np.asarray(k, float))
            self.kp.append(None if kp is None or not np.any(kp) else np.asarray(kp, float))
            self.c.append(np.asarray(c, float))
            for v in (*jr.Gi, *jr.Go):
                cols.update(np.nonzero(np.any(v.L != 0.0, axis=0))[0].tolist())
        self.inv.freeze()
        self.depends_on = np.array(sorted(cols), dtype=np.intp)

    @staticmethod
    def _V(P: Array, k: Array, kp: Array | None) -> float:
        """``Ṽ(Π) = V(φ(Π))``."""
        return float(spherical_spring(k, kp, rotation_vector(P)[0])[0])

    @staticmethod
    def _grad(P: Array, k: Array, kp: Array | None) -> Array:
        """∂Ṽ/∂Π (3, 3): ``∇V(φ)`` through ``∂φ/∂s`` and ``∂φ/∂c``."""
        phi, ds, dc = rotation_vector(P)
        gv = spherical_spring(k, kp, phi)[1]
        a = ds.T @ gv
        return np.einsum("j,jec->ec", a, ALPHA) + 0.5 * float(dc @ gv) * np.eye(3)

    def potential(self, x: Array) -> float:
        """``Σ V(φ)`` at ``x`` (``½ φᵀ K φ + ⅓ k₂ r³ + ¼ k₃ r⁴`` per joint)."""
        pi = self.inv(x)
        terms = zip(self.Pi, self.k, self.kp, strict=True)
        return sum((self._V(pi[P], k, kp) for P, k, kp in terms), 0.0)

    def force(self, x0: Array, x1: Array, h: float) -> tuple[Array, float]:
        """The springs' discrete gradient plus the dampers' discrete force (nx,), the
        term the balance of the step gains, and the discrete dissipation
        ``h Σ ω̄ᵀ C ω̄`` of the step."""
        out, dissipated, _ = self.force_and_jacobian(x0, x1, h, jacobian=False)
        return out, dissipated

    def jacobian(self, x0: Array, x1: Array, h: float) -> Array:
        """The exact derivative (nx, nx) of :meth:`force`'s first output in ``x1`` at
        fixed ``x0`` (Newton's tangent); see :meth:`force_and_jacobian`."""
        jac = self.force_and_jacobian(x0, x1, h)[2]
        assert jac is not None
        return jac

    def force_and_jacobian(
        self, x0: Array, x1: Array, h: float, jacobian: bool = True
    ) -> tuple[Array, float, Array | None]:
        """:meth:`force`'s two outputs and (when ``jacobian``, else None) its exact
        derivative (nx, nx) in ``x1`` at fixed ``x0`` (Newton's tangent), from the
        pieces both share. With ``D`` the 3×3 coefficients of the force
        ``Σ_ec D_ec ∇π_ec(z)``, ``z = (x0 + x1)/2``:

        .. math::

            \\frac{\\partial f}{\\partial x_1} = \\nabla\\pi(z)^T
                \\frac{\\partial D}{\\partial \\Pi_1} \\nabla\\pi(x_1)
                + \\tfrac12 \\textstyle\\sum_{ec} D_{ec} \\nabla^2\\pi_{ec}

        with, for Gonzalez's ``D = ∇Ṽ(Π̄) + β ΔΠ``,
        ``β = [Ṽ(Π₁) - Ṽ(Π₀) - ∇Ṽ(Π̄)·ΔΠ]/|ΔΠ|²``:
        ``∂D/∂Π₁ = ½∇²Ṽ(Π̄) + β I + ΔΠ ⊗ ∂β/∂Π₁``,
        ``∂β/∂Π₁ = [∇Ṽ(Π₁) - ∇Ṽ(Π̄) - ½∇²Ṽ(Π̄)ΔΠ - 2βΔΠ]/|ΔΠ|²`` (``½∇²Ṽ(Π̄)`` alone
        where ``D = ∇Ṽ(Π̄)``), and for the damper's ``h Σ_j C_j ω̄_j ∂ω̄_j/∂ΔΠ`` the product
        rule, ``∂ω̄/∂ΔΠ`` being linear in ``Π̄``."""
        pi0, pi1 = self.inv(x0), self.inv(x1)
        gz = self.inv.gradient(0.5 * (x0 + x1))
        out = np.zeros(x0.size)
        dissipated = 0.0
        if jacobian:
            g1 = self.inv.gradient(x1)
            jac = np.zeros((x0.size, x0.size))
            weights = np.zeros(self.inv.m)
        for P, k, kp, c in zip(self.Pi, self.k, self.kp, self.c, strict=True):
            P0, P1 = pi0[P], pi1[P]
            dP, Pbar = P1 - P0, 0.5 * (P0 + P1)
            D = np.zeros((3, 3))  # the force's coefficients
            DJ = np.zeros((3, 3))  # the same, as the tangent's weights form them
            dD = np.zeros((9, 9))  # ∂D_ec/∂Π₁_fg, rows ec, columns fg
            if np.any(k) or kp is not None:
                D = DJ = self._grad(Pbar, k, kp)
                n2 = float(np.sum(dP * dP))
                if jacobian:
                    H = _hessian(Pbar, k, kp)
                    dD += 0.5 * H
                if n2 > 1e-24:
                    dV = self._V(P1, k, kp) - self._V(P0, k, kp) - np.sum(D * dP)
                    if jacobian:
                        d = dP.ravel()
                        beta = dV / n2
                        dbeta = (self._grad(P1, k, kp) - D).ravel() - 0.5 * H @ d - 2.0 * beta * d
                        dD += beta * np.eye(9) + np.outer(d, dbeta / n2)
                        DJ = DJ + beta * dP
                    D = D + dV * dP / n2
            if np.any(c):
                dw = _rate_gradient(Pbar, h)
                w = np.einsum("jec,ec->j", dw, dP)
                damper = h * np.einsum("j,jec->ec", c * w, dw)
                D = D + damper
                dissipated += h * float(w @ (c * w))
                if jacobian:
                    DJ = DJ + damper
                    # ∂ω̄_j/∂Π₁_fg = ∂ω̄_j/∂ΔΠ_fg + Σ_ec ΔΠ_ec ∂(∂ω̄_j/∂ΔΠ_ec)/∂Π₁_fg
                    dw1 = dw.reshape(3, 9) + np.einsum("jecfg,ec->jfg", _DDW, dP).reshape(3, 9) / h
                    dD += h * np.einsum("j,je,jf->ef", c, dw.reshape(3, 9), dw1)
                    dD += np.einsum("j,jecfg->ecfg", c * w, _DDW).reshape(9, 9)
            out += np.einsum("ec,ecn->n", D, gz[P])
            if jacobian:
                idx = P.ravel()
                jac += gz[idx].T @ dD @ g1[idx]
                weights[idx] += DJ.ravel()
        if not jacobian:
            return out, dissipated, None
        return out, dissipated, jac + 0.5 * self.inv.hessian(weights)
