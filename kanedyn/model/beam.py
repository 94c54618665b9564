"""A uniform Euler–Bernoulli cantilever as a flexible body (:func:`beam_body`).

The beam lies along body axis ``a`` (``axis``) from the body-frame origin, where it is
clamped, to ``s = ℓ``; it bends along the axes of ``directions``. Per direction d and
mode k, the analytic cantilever mode (Blevins, *Formulas for Natural Frequency and Mode
Shape*, table 8-1)

.. math::

    \\phi_k(s) = \\cosh\\beta_k s - \\cos\\beta_k s
        - \\sigma_k(\\sinh\\beta_k s - \\sin\\beta_k s), \\quad
    \\sigma_k = \\frac{\\cosh\\beta_k\\ell + \\cos\\beta_k\\ell}{\\sinh\\beta_k\\ell + \\sin\\beta_k\\ell},
    \\quad \\cos\\beta_k\\ell\\cosh\\beta_k\\ell = -1

(``β_kℓ = 1.8751, 4.6941, 7.8548, ...``) gives ``Ψ = φ_k(s) e_d``; ``∫φ_k² ds = ℓ``, so
``M_Ψ = m U`` and ``K_Ψ = EI_d β_k⁴ ℓ``: clamped frequencies ``(β_kℓ)² √(EI/(ρℓ⁴))``.
The integrals P, H, L, N of :class:`~kanedyn.Modes` are Gauss–Legendre quadratures.

The geometric stiffness follows from the foreshortening of the bent beam,
``u_a(s) = -½ ∫₀^s Σ_d (w_d')² ds'``: with ``W_k(t) = ∫_t^ℓ ρ e_a·ℓ_k ds``,
``geometric[k]_pq = -∫₀^ℓ φ_p' φ_q' W_k dt`` (same direction only): an acceleration
``a`` along the axis gives ``-ρ a ∫φ_p'φ_q'(ℓ - t)``, and a spin ω about a transverse
axis ``ρ ω² ∫φ_p'φ_q'(ℓ² - t²)/2`` (Kane, Ryan & Banerjee 1987, the stiffening that a
linear modal model lacks).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model.modes import Modes
from kanedyn.model.records import Body

__all__ = ["beam_body", "cantilever_roots", "cantilever_mode"]

Array = NDArray[np.float64]


def cantilever_roots(n: int) -> Array:
    """The first ``n`` roots ``βℓ`` of ``cos x cosh x = -1`` (1.8751, 4.6941, ...)."""
    from scipy.optimize import brentq

    f = lambda x: np.cos(x) + 1.0 / np.cosh(x)  # noqa: E731  (cos cosh + 1, divided by cosh)
    return np.array([brentq(f, (k - 0.5) * np.pi - 0.9, (k - 0.5) * np.pi + 0.9, xtol=1e-15)
                     for k in range(1, n + 1)])  # fmt: skip


def cantilever_mode(beta_l: float, s: Array, length: float) -> tuple[Array, Array, Array]:
    """``φ``, ``φ'`` and ``φ''`` of the cantilever mode with root ``βℓ`` at ``s``.

    Written without the cancellation of ``cosh - σ sinh`` for large ``βℓ``:
    ``cosh x - σ sinh x = ((1 - σ) eˣ + (1 + σ) e⁻ˣ) / 2`` with
    ``1 - σ = (sin βℓ - cos βℓ - e^{-βℓ}) / (sinh βℓ + sin βℓ)``.
    """
    b = beta_l / length
    x, X = b * s, beta_l
    den = np.sinh(X) + np.sin(X)
    sigma = (np.cosh(X) + np.cos(X)) / den
    one_minus = (np.sin(X) - np.cos(X) - np.exp(-X)) / den
    ep = 0.5 * one_minus * np.exp(x)  # ((1-σ)/2) eˣ
    em = 0.5 * (1.0 + sigma) * np.exp(-x)  # ((1+σ)/2) e⁻ˣ
    phi = ep + em - np.cos(x) + sigma * np.sin(x)
    dphi = b * (ep - em + np.sin(x) + sigma * np.cos(x))
    ddphi = b * b * (ep + em + np.cos(x) - sigma * np.sin(x))
    return phi, dphi, ddphi


def beam_body(
    name: str,
    length: float,
    mass_per_length: float,
    EI: Any,
    n_modes: int = 4,
    axis: int = 0,
    directions: tuple[int, ...] = (1, 2),
    stiffening: bool = True,
    damping_ratio: Any = 0.0,
    *,
    quadrature: int = 96,
) -> Body:
    """A uniform cantilever clamped at the body-frame origin, as a flexible :class:`~kanedyn.Body`.

    Parameters
    ----------
    name : str
    length : float
        ``ℓ`` > 0, along body axis ``axis`` (0, 1 or 2 for x, y, z).
    mass_per_length : float
        ``ρ`` > 0, kg/m.
    EI : float or one per direction
        Bending stiffness for displacements along each axis of ``directions``, N·m².
    n_modes : int
        Cantilever modes per direction; the modal coordinates are direction-major
        (``directions[0]`` modes 1..n, then ``directions[1]``, ...).
    directions : tuple of int
        The body axes (0, 1, 2; not ``axis``) the beam bends along.
    stiffening : bool
        Include the geometric stiffness (``Modes.geometric``); False gives the linear
        modal model of 42.
    damping_ratio : float or (n,)
        Modal damping ratios.

    Returns
    -------
    Body
        Mass ``ρℓ``, mass centre at ``ℓ/2`` on the axis, the inertia of a thin rod (zero
        about its own axis: ``allow_singular``), and :class:`~kanedyn.Modes` with the
        nodes ``"root"`` and ``"tip"``.
    """
    try:
        ell, rho = float(length), float(mass_per_length)
    except (TypeError, ValueError):
        raise ModelError(f"beam {name!r}: length and mass_per_length must be numbers") from None
    if not (np.isfinite(ell) and ell > 0 and np.isfinite(rho) and rho > 0):
        raise ModelError(f"beam {name!r}: length and mass_per_length must be positive and finite")
    if axis not in (0, 1, 2):
        raise ModelError(f"beam {name!r}: axis must be 0, 1 or 2, got {axis!r}")
    dirs = tuple(directions)
    if (
        not dirs
        or any(d not in (0, 1, 2) or d == axis for d in dirs)
        or len(set(dirs)) != len(dirs)
    ):
        raise ModelError(
            f"beam {name!r}: directions must be distinct axes among 0, 1, 2 other than axis {axis}, "
            f"got {directions!r}"
        )
    if not isinstance(n_modes, (int, np.integer)) or n_modes < 1:
        raise ModelError(f"beam {name!r}: n_modes must be a positive integer, got {n_modes!r}")
    ei = np.broadcast_to(np.asarray(EI, dtype=float), (len(dirs),))
    if not np.all(np.isfinite(ei)) or np.any(ei <= 0):
        raise ModelError(f"beam {name!r}: EI must be positive and finite, got {EI!r}")
    roots = cantilever_roots(n_modes)
    x, w = np.polynomial.legendre.leggauss(quadrature)
    s, w = 0.5 * ell * (x + 1.0), 0.5 * ell * w
    phi, dphi = [], []
    for bl in roots:
        f, df, _ = cantilever_mode(bl, s, ell)
        phi.append(f)
        dphi.append(df)
    phi_, dphi_ = np.array(phi), np.array(dphi)  # (n_modes, nq)
    n = n_modes * len(dirs)
    d_of = np.repeat(dirs, n_modes)  # direction of each modal coordinate
    k_of = np.tile(np.arange(n_modes), len(dirs))
    Phi, dPhi = phi_[k_of], dphi_[k_of]  # (n, nq)
    same = (d_of[:, None] == d_of[None, :]).astype(float)
    e = np.eye(3)
    Psi_q = Phi.T[:, None, :] * e[d_of].T[None, :, :]  # (nq, 3, n) Ψ at the quadrature points
    r_q = s[:, None] * e[axis]  # (nq, 3)
    dm = rho * w
    M = rho * ell * np.eye(n)  # ∫φ_k² ds = ℓ, and the modes are orthogonal
    K = np.diag(np.repeat(ei, n_modes) * (roots[k_of] / ell) ** 4 * ell)  # EI β⁴ ∫φ² (∫φ² = ℓ)
    P = np.einsum("k,kip->ip", dm, Psi_q)
    H = np.einsum("k,kip->ip", dm, np.cross(r_q[:, :, None], Psi_q, axisa=1, axisb=1, axisc=1))
    L = np.einsum("k,kip,kj->ijp", dm, Psi_q, r_q)
    N = np.einsum("k,kip,kjq->ijpq", dm, Psi_q, Psi_q)
    geometric = None
    if stiffening:
        geometric = np.zeros((12, n, n))
        dd = np.einsum("k,pk,qk->pqk", w, dPhi, dPhi) * same[:, :, None]
        geometric[axis] = -rho * dd @ (ell - s)  # unit acceleration along the axis
        for a in range(3):
            if a != axis:  # unit ω_a²: centrifugal tension ρ(ℓ² - t²)/2
                geometric[6 + a] = rho * dd @ (0.5 * (ell**2 - s**2))
    nodes = np.array([np.zeros(3), ell * e[axis]])
    Psi_n = np.zeros((2, 3, n))
    Theta_n = np.zeros((2, 3, n))
    for p in range(n):
        f, df, _ = cantilever_mode(roots[k_of[p]], np.array([0.0, ell]), ell)
        Psi_n[:, :, p] = f[:, None] * e[d_of[p]]
        Theta_n[:, :, p] = df[:, None] * np.cross(e[axis], e[d_of[p]])
    mode_names = tuple(f"{'xyz'[d]}{k + 1}" for d, k in zip(d_of, k_of, strict=True))
    modes = Modes(
        M, K, damping_ratio=damping_ratio, P=P, H=H, L=L, N=N,
        node_positions=nodes, Psi=Psi_n, Theta=Theta_n, node_names=("root", "tip"),
        geometric=geometric, mode_names=mode_names,
    )  # fmt: skip
    m = rho * ell
    inertia = (m * ell**2 / 12.0) * (np.eye(3) - np.outer(e[axis], e[axis]))
    return Body(name, mass=m, inertia=inertia, com=0.5 * ell * e[axis], modes=modes,
                allow_singular=True)  # fmt: skip
