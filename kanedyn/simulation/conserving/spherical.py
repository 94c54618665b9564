"""Springs and dampers on spherical rotations, in director form.

kanedyn's spherical joint spring is the potential ``V = ½ φᵀ K φ`` of the joint's
rotation vector φ (:func:`kanedyn.dynamics.loads.spring_potential`), its damper the
dissipation ``½ ω_rᵀ C ω_r`` of the relative angular velocity in Go axes
(:func:`kanedyn.joints.spring_damper`). In the director formulation the joint's
rotation is the matrix of invariants ``Π_ec = g^i_e·g^o_c`` (= R_Gi_Go on the manifold,
quadratic in ``x``; :mod:`.constraints`). Both are written in ``Π``:

* ``φ(Π) = atan2(|s|, c) s / |s|`` with ``s = axial(Π)`` (= sin θ n) and
  ``c = (tr Π - 1)/2`` (= cos θ): a smooth function of any matrix near a rotation, equal
  to the rotation vector on the manifold;
* the **discrete gradient** of ``Ṽ(Π) = ½ φ(Π)ᵀ K φ(Π)`` is Gonzalez's in the nine
  invariants (Gonzalez 1996, eq. 3.8; Betsch & Leyendecker 2006, §4):
  ``DṼ = ∇Ṽ(Π̄) + [Ṽ(Π₁) - Ṽ(Π₀) - ∇Ṽ(Π̄)·ΔΠ] ΔΠ/|ΔΠ|²``, and the generalized force
  ``Σ_ec DṼ_ec ∇π_ec(z)``. Because ``ΔΠ = ∇π(z)Δx`` exactly, its work over a step is
  ``Ṽ(Π₁) - Ṽ(Π₀)`` (energy); because the invariants are unchanged by a rigid motion of
  the whole system, it exerts no net force or torque (momentum);
* the **discrete relative angular velocity** ``ω̄ = axial(Π̄ᵀ ΔΠ)/h`` (→ ``axial(ΠᵀΠ̇)``,
  the Go-axis rate) is linear in ``Δx``, ``ω̄ = B Δx``; the damper's generalized force
  ``-h Bᵀ C ω̄`` does the work ``-h ω̄ᵀ C ω̄ ≤ 0``: the discrete dissipation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.simulation.conserving.constraints import ALPHA, Invariants

__all__ = ["SphericalSprings", "rotation_vector"]

Array = NDArray[np.float64]

#: below this |s|, the series of atan2(|s|, c)/|s| (its quotient is round-off)
SMALL_S = 1e-6


def rotation_vector(P: Array) -> tuple[Array, Array, Array]:
    """``φ(Π)`` (3,), ``∂φ/∂s`` (3, 3) and ``∂φ/∂c`` (3,) of a 3×3 matrix (see the
    module docstring)."""
    s = np.einsum("jbc,bc->j", ALPHA, P)
    c = 0.5 * (np.trace(P) - 1.0)
    r2 = float(s @ s)
    r = np.sqrt(r2)
    if r < SMALL_S:  # atan(r/c)/r = 1/c - r²/(3c³) + ...
        g = 1.0 / c - r2 / (3.0 * c**3)
        g_r_over_r = -2.0 / (3.0 * c**3)
    else:
        g = np.arctan2(r, c) / r
        g_r_over_r = (c / (r2 + c * c) - g) / r2
    g_c = -1.0 / (r2 + c * c)
    phi = g * s
    dphi_ds = g * np.eye(3) + g_r_over_r * np.outer(s, s)
    dphi_dc = g_c * s
    return phi, dphi_ds, dphi_dc


class SphericalSprings:
    """The springs and dampers of a model's spherical joints, in director form.

    ``joints``: (JointRows, k (3,), c (3,)) per spherical joint with a spring or a
    damper; ``nx`` the number of coordinates. Builds its own invariants ``Π_ec``.
    """

    def __init__(self, joints: list[tuple[Any, Array, Array]], nx: int):
        self.inv = Invariants(nx)
        self.Pi = []
        self.k, self.c = [], []
        cols: set[int] = set()
        for jr, k, c in joints:
            self.Pi.append(np.array([[self.inv.dot(jr.Gi[e], jr.Go[f]) for f in range(3)]
                                     for e in range(3)]))  # fmt: skip
            self.k.append(np.asarray(k, float))
            self.c.append(np.asarray(c, float))
            for v in (*jr.Gi, *jr.Go):
                cols.update(np.nonzero(np.any(v.L != 0.0, axis=0))[0].tolist())
        self.inv.freeze()
        self.depends_on = np.array(sorted(cols), dtype=np.intp)

    def _V(self, P: Array, k: Array) -> float:
        phi = rotation_vector(P)[0]
        return float(0.5 * phi @ (k * phi))

    def _grad(self, P: Array, k: Array) -> Array:
        """∂Ṽ/∂Π (3, 3)."""
        phi, ds, dc = rotation_vector(P)
        kp = k * phi
        a = ds.T @ kp
        return np.einsum("j,jec->ec", a, ALPHA) + 0.5 * float(dc @ kp) * np.eye(3)

    def potential(self, x: Array) -> float:
        """``Σ ½ φᵀ K φ`` at ``x``."""
        pi = self.inv(x)
        return sum((self._V(pi[P], k) for P, k in zip(self.Pi, self.k, strict=True)), 0.0)

    def force(self, x0: Array, x1: Array, h: float) -> tuple[Array, float]:
        """The springs' discrete gradient plus the dampers' discrete force (nx,), the
        term the balance of the step gains, and the discrete dissipation
        ``h Σ ω̄ᵀ C ω̄`` of the step."""
        pi0, pi1 = self.inv(x0), self.inv(x1)
        gz = self.inv.gradient(0.5 * (x0 + x1))
        out = np.zeros(x0.size)
        dissipated = 0.0
        for P, k, c in zip(self.Pi, self.k, self.c, strict=True):
            P0, P1 = pi0[P], pi1[P]
            dP, Pbar = P1 - P0, 0.5 * (P0 + P1)
            D = np.zeros((3, 3))
            if np.any(k):
                D = self._grad(Pbar, k)
                n2 = float(np.sum(dP * dP))
                if n2 > 1e-24:
                    D = D + (self._V(P1, k) - self._V(P0, k) - np.sum(D * dP)) * dP / n2
            if np.any(c):
                # ω̄_j = Σ α_jbc Π̄_eb ΔΠ_ec / h: ∂ω̄_j/∂ΔΠ_ec = Σ_b α_jbc Π̄_eb / h
                dw = np.einsum("jbc,eb->jec", ALPHA, Pbar) / h
                w = np.einsum("jec,ec->j", dw, dP)
                D = D + h * np.einsum("j,jec->ec", c * w, dw)
                dissipated += h * float(w @ (c * w))
            out += np.einsum("ec,ecn->n", D, gz[P])
        return out, dissipated
