"""A central gravity field (:class:`kanedyn.CentralGravity`) as a potential term of the
energy-momentum step, with a discrete gradient that conserves energy and the angular
momentum about the field's centre.

**The potential in invariants.** Body i's potential has three terms, the point mass,
MacCullagh's gravity-gradient term and J2
(:func:`kanedyn.spatial.plucker.central_gravity_terms`, the formula every engine
uses), functions of the invariants of the body's coordinates, with ``r = φ - c``
(``c`` the field's centre) and the directors ``d_a``:

.. math:: s = r \\cdot r, \\qquad p_a = r \\cdot d_a, \\qquad z = r \\cdot e_z

(point mass: ``s``; gravity gradient: ``s, p``, with ``rᵀ R I Rᵀ r = pᵀ I p`` for
orthonormal directors; J2: ``s, z``). ``s`` and ``p_a`` are unchanged by a rotation of
the whole system about ``c``, ``z`` by one about the pole. All are quadratic in the
coordinates.

**The discrete gradient** of each term is Gonzalez's (J. Nonlinear Sci. 6, 1996, §4,
systems with symmetry) in its own invariants ``π``:

.. math:: \\bar\\partial\\tilde V = \\nabla\\tilde V(\\bar\\pi)
    + \\frac{\\tilde V(\\pi_{n+1}) - \\tilde V(\\pi_n) - \\nabla\\tilde V(\\bar\\pi)\\cdot\\Delta\\pi}
    {\\Delta\\pi^T W \\Delta\\pi}\\,W\\Delta\\pi, \\qquad
    \\bar\\nabla V = \\sum_k \\bar\\partial_k\\tilde V\\, \\nabla\\pi_k(z)

with ``π̄ = π_n + Δπ/2``, ``z`` the midpoint coordinates and ``W`` the invariants'
scales (``1/s̄²`` for ``s``, ``1/s̄`` for ``p`` and ``z``); the point mass's is the
divided difference of ``-μm/√s`` in closed form, ``μm/(√(s₀s₁)(√s₀ + √s₁))``. A
quadratic invariant has ``π_k(x_{n+1}) - π_k(x_n) = ∇π_k(z)·Δx`` exactly, so
``∇̄V·Δx = ΔV`` (energy), and each ``∇π_k(z)`` is orthogonal to the rotations that
leave ``π_k`` unchanged (angular momentum about ``c``; its pole component with J2).
Keeping the terms apart keeps the point mass's energy (1e10 J in low orbit) out of the
differences of the gravity-gradient term (1e-3 J). Gonzalez's formula applied to the
body coordinates themselves keeps the energy but not the angular momentum: its
correction along ``Δx`` has a moment about ``c`` (``tests/test_conserving_central.py``
checks both).

**Exact derivatives.** Each term, its gradient and its Hessian in ``π`` come from the
formula traced once on the compiled engine's tape (:data:`kanedyn.compiled.tape.TRACE`)
and differentiated there in forward mode (:func:`kanedyn.compiled.derivatives.jacobian`,
twice), then emitted as Python on NumPy arrays (one element per body). When the scaled
change ``√(ΔπᵀWΔπ)`` is below ``√ε``, the correction (``O(|Δπ|²)`` relative) is below
the round-off of ``ΔṼ`` and is left out.

**Newton's tangent** is the midpoint Hessian ``½ ∇²V(z)`` (the derivative of the
correction term, ``O(|Δπ|)`` smaller, is left out); Newton converges in 3-4 iterations
on a spacecraft in low orbit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.compiled import python as emit
from kanedyn.compiled.derivatives import jacobian
from kanedyn.compiled.tape import TRACE, Tape
from kanedyn.model import Model
from kanedyn.model.plan import params_of
from kanedyn.spatial import plucker as sp

__all__ = ["CentralField"]

Array = NDArray[np.float64]

#: relative change of the invariants below which a term's discrete gradient is its
#: midpoint gradient (the correction, O(|Δπ|²) relative, is then below round-off)
_SMALL = float(np.sqrt(np.finfo(float).eps))


def _kernel(mu: float, J2: float, radius: float, term: int, k: int) -> Callable[..., list[Any]]:
    """One term of the potential (:func:`kanedyn.spatial.plucker.central_gravity_terms`,
    ``term`` 0, 1 or 2), its gradient (k) and Hessian (k, k, row-major) in its
    invariants (``s``; ``s, p_1, p_2, p_3``; ``s, z``), with the mass and the inertia's
    six entries as inputs (arrays of bodies): traced on the tape, differentiated there
    in forward mode, emitted as Python on NumPy arrays."""
    tape = Tape()
    pi = [tape.input(f"pi{i}") for i in range(k)]
    m = tape.input("m")
    I6 = [tape.input(f"I{i}") for i in range(6)]  # 11 22 33 12 13 23
    I = [[I6[0], I6[3], I6[4]], [I6[3], I6[1], I6[5]], [I6[4], I6[5], I6[2]]]
    trI = I6[0] + I6[1] + I6[2]
    rIr = sp.dot(pi[1:4], sp.mv(I, pi[1:4])) if term == 1 else 0.0
    z = pi[1] if term == 2 else 0.0
    V = sp.central_gravity_terms(TRACE, mu, J2, radius, m, trI, pi[0], rIr, z)[term]
    g = jacobian(tape, [V], pi)[0]
    H = jacobian(tape, g, pi)
    args = [*(f"pi{i}" for i in range(k)), "m", *(f"I{i}" for i in range(6))]
    src = emit.source(tape, "term", args, [V, *g, *(h for row in H for h in row)])
    return emit.build(src, "term", emit.ARRAY_NAMESPACE)


class CentralField:
    """The central field's potential on the director coordinates of a model (see the
    module docstring): :meth:`potential` ``V(x)``, :meth:`discrete_gradient`
    ``∇̄V(x_n, x_n + Δx)`` and Newton's tangent for it."""

    def __init__(self, model: Model, bodies: Sequence[Any], nx: int):
        field = model.central_gravity
        assert field is not None
        pa = params_of(model)
        self.nx, self.nb = nx, model.nb
        self.mu = float(field.mu)
        self.oblate = not sp.is_zero(field.J2)
        self.center = np.asarray(field.center, dtype=float)
        self.bodies = bodies
        self.mass = np.asarray(pa.mass, dtype=float)
        I = np.asarray(pa.inertia, dtype=float)
        self.I6 = [I[:, 0, 0], I[:, 1, 1], I[:, 2, 2], I[:, 0, 1], I[:, 0, 2], I[:, 1, 2]]
        args = (float(field.mu), float(field.J2), float(field.radius))
        self._terms = [(0, _kernel(*args, 0, 1)), (1, _kernel(*args, 1, 4))]
        if self.oblate:
            self._terms.append((2, _kernel(*args, 2, 2)))

    # -- invariants ---------------------------------------------------------------
    def _invariants(self, x: Array, dx: Array | None = None) -> tuple[Array, list[Array], Array]:
        """``s = |r|², p_a = r·d_a, z = r·e_z`` (nb, 5) at ``x``, their gradients
        (nb × (5, nx)) and, with ``dx``, their exact increments ``∇π(x)·Δx`` (nb, 5)
        (``x`` then the midpoint; quadratic invariants: exact, and free of the round-off
        of far-travelled positions)."""
        pi = np.zeros((self.nb, 5))
        grads = []
        for i, b in enumerate(self.bodies):
            r = b.pos(x) - self.center
            G = np.zeros((5, self.nx))
            pi[i, 0] = r @ r
            G[0] = 2.0 * b.pos.L.T @ r
            for a in range(3):
                d = b.dirs[a](x)
                pi[i, 1 + a] = r @ d
                G[1 + a] = b.pos.L.T @ d + b.dirs[a].L.T @ r
            pi[i, 4] = r[2]
            G[4] = b.pos.L[2]
            grads.append(G)
        dpi = np.array([G @ dx for G in grads]) if dx is not None else pi * 0.0
        return pi, grads, dpi

    @staticmethod
    def _columns(term: int) -> list[int]:
        return [[0], [0, 1, 2, 3], [0, 4]][term]

    def _eval(self, kernel: Callable[..., list[Any]], pi: Array) -> tuple[Array, Array, Array]:
        """A term's value (nb,), gradient (nb, k) and Hessian (nb, k, k) at ``pi`` (nb, k)."""
        k, one = pi.shape[1], np.ones(self.nb)
        vals = [np.asarray(o, dtype=float) * one for o in kernel(*pi.T, self.mass, *self.I6)]
        g = np.stack(vals[1 : 1 + k], axis=-1)
        return vals[0], g, np.stack(vals[1 + k :], axis=-1).reshape(self.nb, k, k)

    # -- the scheme's terms --------------------------------------------------------
    def potential(self, x: Array) -> float:
        """``V(x)``: the three terms summed over the bodies."""
        pi = self._invariants(x)[0]
        return float(sum(np.sum(self._eval(kern, pi[:, self._columns(t)])[0])
                         for t, kern in self._terms))  # fmt: skip

    def discrete_gradient(self, x0: Array, dx: Array) -> tuple[Array, Array]:
        """``∇̄V(x0, x0 + Δx)`` (nx,) and the tangent ``½ ∇²V(z)`` (nx, nx) Newton uses
        for its derivative in ``x_{n+1}`` (module docstring)."""
        z = x0 + 0.5 * dx
        piz, grads, dpi = self._invariants(z, dx)
        pi0 = self._invariants(x0)[0]
        s0, s1 = pi0[:, 0], pi0[:, 0] + dpi[:, 0]
        f = np.zeros(self.nx)
        K = np.zeros((self.nx, self.nx))
        for t, kern in self._terms:
            cols = self._columns(t)
            if t == 0:  # the point mass: the divided difference of -μm/√s in closed form
                r0, r1 = np.sqrt(s0), np.sqrt(s1)
                dbar = (self.mu * self.mass / (r0 * r1 * (r0 + r1)))[:, None]
            else:
                # Gonzalez's discrete gradient in the term's invariants, each scaled by
                # its size at the midpoint (s by s̄, p and z by |r̄|)
                p0, dp = pi0[:, cols], dpi[:, cols]
                pbar = p0 + 0.5 * dp
                w = np.ones_like(pbar) / pbar[:, :1]
                w[:, 0] = 1.0 / pbar[:, 0] ** 2
                _, g, _ = self._eval(kern, pbar)
                dV = self._eval(kern, p0 + dp)[0] - self._eval(kern, p0)[0]
                norm2 = np.sum(w * dp**2, axis=1)
                with np.errstate(divide="ignore", invalid="ignore"):
                    corr = np.where(norm2 > _SMALL**2, (dV - np.sum(g * dp, axis=1)) / norm2, 0.0)
                dbar = g + corr[:, None] * w * dp
            _, gz, Hz = self._eval(kern, piz[:, cols])
            for i, b in enumerate(self.bodies):
                G = grads[i][cols]
                f += dbar[i] @ G
                K += G.T @ Hz[i] @ G
                K += gz[i, 0] * 2.0 * b.pos.L.T @ b.pos.L  # ∇²s = 2 Lφᵀ Lφ
                if t == 1:  # ∇²p_a = Lφᵀ L_a + L_aᵀ Lφ
                    for a in range(3):
                        c = b.pos.L.T @ b.dirs[a].L
                        K += gz[i, 1 + a] * (c + c.T)
        return f, 0.5 * K
