"""Modal data of a flexible body (assumed modes; Kane_NBody_Flex slides 8-17).

A flexible body deforms by ``d(r) = Ψ(r) η`` (body axes) about its undeformed shape,
the rigid body of its :class:`~kanedyn.Body` record (mass, mass centre, inertia). Its
modal coordinates are ``η`` (n) and its modal speeds ``ξ = η̇``. The integrals over the
undeformed body that the equations of motion need (``r`` the position of ``dm`` from the
body-frame origin):

.. math::

    M_\\Psi = \\int \\Psi^T \\Psi\\,dm, \\quad P_\\Psi = \\int \\Psi\\,dm, \\quad
    H_\\Psi = \\int r\\times\\Psi\\,dm, \\quad
    L_{ijp} = \\int \\Psi_{ip} r_j\\,dm, \\quad N_{ijpq} = \\int \\Psi_{ip}\\Psi_{jq}\\,dm

(42's ``Mf``, ``Pf``, ``Hf``, ``L``, ``N``; ``Q_Ψ``, ``R_Ψ``, ``S_Ψ`` of the slides are
contractions of L and N). ``geometric[k]`` is the modal stiffness under unit inertial
preload k, ``K_geo = Σ_k load_k · geometric[k]``, with the loads

====== =================================================================
rows   load
====== =================================================================
0-2    acceleration of the body-frame origin along body x, y, z
3-5    angular acceleration about body x, y, z
6-11   ``ω_xω_x, ω_yω_y, ω_zω_z, ω_xω_y, ω_yω_z, ω_zω_x`` (body axes)
====== =================================================================

that is ``geometric[k] = ∫ G(r) (e(r)·ℓ_k(r)) dm`` for the second-order (foreshortening)
displacement ``½ ηᵀG(r)η e(r)`` and ``ℓ_k`` the rigid acceleration field of load k
(``e_k``, ``e_k × r``, the terms of ``ω × (ω × r)``); :func:`kanedyn.beam_body` computes
it for a beam.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError

__all__ = ["GEOMETRIC_LOADS", "Modes", "modal_matrix", "normal_modes"]

Array = NDArray[np.float64]

#: the 12 unit preloads of ``Modes.geometric``, in row order
GEOMETRIC_LOADS = (
    "ax", "ay", "az", "alpha_x", "alpha_y", "alpha_z",
    "wx*wx", "wy*wy", "wz*wz", "wx*wy", "wy*wz", "wz*wx",
)  # fmt: skip


def _array(value: Any, shape: tuple[int, ...], what: str) -> Array:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"modes: {what} cannot be read as numbers ({exc})") from None
    if arr.shape != shape:
        raise ModelError(f"modes: {what} must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"modes: {what} has non-finite entries")
    arr.setflags(write=False)
    return arr


def _square(value: Any, n: int | None, what: str) -> Array:
    arr = np.atleast_2d(np.array(value, dtype=float)) if np.ndim(value) < 2 else value
    if np.ndim(value) == 1:  # a diagonal
        arr = np.diag(np.asarray(value, dtype=float))
    m = np.shape(arr)[0] if n is None else n
    arr = _array(arr, (m, m), what)
    scale = max(float(np.max(np.abs(arr))) if arr.size else 0.0, np.finfo(float).tiny)
    if not np.allclose(arr, arr.T, rtol=0.0, atol=1e-9 * scale):
        raise ModelError(f"modes: {what} is not symmetric")
    return arr


def _check_psd(arr: Array, what: str, definite: bool) -> None:
    if arr.size == 0:
        return
    ev = np.linalg.eigvalsh(0.5 * (arr + arr.T))
    tol = 1e-10 * max(float(np.max(np.abs(ev))), np.finfo(float).tiny)
    if definite and ev.min() <= tol:
        raise ModelError(
            f"modes: {what} must be positive definite (smallest eigenvalue {ev.min():g})"
        )
    if ev.min() < -tol:
        raise ModelError(
            f"modes: {what} must be positive semidefinite (smallest eigenvalue {ev.min():g})"
        )


@attrs.frozen(eq=False)
class Modes:
    """Assumed-mode data of one flexible body, validated on construction.

    Parameters
    ----------
    mass : (n, n)
        Modal mass ``M_Ψ = ∫ΨᵀΨ dm``: symmetric positive definite (a 1-D array is a
        diagonal).
    stiffness : (n, n)
        Modal stiffness ``K_Ψ``: symmetric positive semidefinite.
    damping : (n, n), optional
        Modal damping ``C_Ψ``: symmetric positive semidefinite. Give it or
        ``damping_ratio``, not both; zero when neither.
    damping_ratio : float or (n,), optional
        ``ζ`` per mode: ``C = 2ζ√(K M)`` mode by mode when ``K`` and ``M`` are
        diagonal; otherwise ``ζ_i`` is the ratio of the i-th normal mode (``K φ = ω² M φ``,
        ascending frequency, ``ΦᵀMΦ = 1``) and ``C = M Φ diag(2ζω) Φᵀ M``.
        It is stored as ``damping`` (the record's ``damping_ratio`` is then None).
    P : (3, n)
        ``∫Ψ dm`` (body axes); zero by default.
    H : (3, n)
        ``∫ r×Ψ dm`` about the body-frame origin; zero by default.
    L : (3, 3, n)
        ``L_ijp = ∫Ψ_ip r_j dm``; when given, its antisymmetric part must be ``H``
        (``H_ip = ε_ijk L_kjp``). Zero by default: the terms of ω² in the modal
        equations (42's ``R_Ψ``) are then left out, and with ``H ≠ 0`` the angular
        momentum is conserved to first order in η only.
    N : (3, 3, n, n)
        ``N_ijpq = ∫Ψ_ip Ψ_jq dm``; its trace over ``i = j`` must equal ``mass``. Zero
        by default: the terms second order in η (42's ``Q_Ψ``, ``S_Ψ``, without
        ``IncludeSecondOrderFlexTerms``) are then left out; the equations stay those of
        a kinetic energy, so energy and momenta are still conserved.
    node_positions : (N, 3)
        Nodes in the body frame (joint attachments, sensors, loads).
    Psi, Theta : (N, 3, n)
        Translational and rotational mode shapes at the nodes, body axes.
    node_names : N strings
        Unique names of the nodes (default ``"node1"``, ``"node2"``, ...).
    geometric : (12, n, n), optional
        Geometric stiffness under the 12 unit preloads of the module docstring, each
        symmetric. None: the body is not stiffened (a linear modal model, as 42's).
    mode_names : n strings, optional
        Names of the modal coordinates (default ``"eta1"``, ``"eta2"``, ...).
    """

    mass: Array = attrs.field()
    stiffness: Array = attrs.field()
    damping: Array | None = attrs.field(default=None)
    damping_ratio: Any = attrs.field(default=None, kw_only=True)
    P: Array | None = attrs.field(default=None, kw_only=True)
    H: Array | None = attrs.field(default=None, kw_only=True)
    L: Array | None = attrs.field(default=None, kw_only=True)
    N: Array | None = attrs.field(default=None, kw_only=True)
    node_positions: Array = attrs.field(default=(), kw_only=True)
    Psi: Array = attrs.field(default=(), kw_only=True)
    Theta: Array = attrs.field(default=(), kw_only=True)
    node_names: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    geometric: Array | None = attrs.field(default=None, kw_only=True)
    mode_names: tuple[str, ...] | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if np.ndim(self.mass) not in (1, 2):
            raise ModelError(
                f"modes: mass must be an (n, n) array, got shape {np.shape(self.mass)}"
            )
        M = _square(self.mass, None, "mass")
        n = M.shape[0]
        if n == 0:
            raise ModelError("modes: a flexible body needs at least one mode (mass is empty)")
        _check_psd(M, "mass", definite=True)
        K = _square(self.stiffness, n, "stiffness")
        _check_psd(K, "stiffness", definite=False)
        if self.damping is not None and self.damping_ratio is not None:
            raise ModelError("modes: give damping or damping_ratio, not both")
        if self.damping_ratio is not None:
            zeta = np.broadcast_to(np.asarray(self.damping_ratio, dtype=float), (n,))
            if not np.all(np.isfinite(zeta)) or np.any(zeta < 0):
                raise ModelError(f"modes: damping_ratio must be finite and >= 0, got {zeta}")
            w, Phi = normal_modes(K, M)
            C = modal_matrix(M, Phi, 2.0 * zeta * w)
            C.setflags(write=False)
        elif self.damping is not None:
            C = _square(self.damping, n, "damping")
            _check_psd(C, "damping", definite=False)
        else:
            C = np.zeros((n, n))
            C.setflags(write=False)
        P = _array(np.zeros((3, n)) if self.P is None else self.P, (3, n), "P")
        H = _array(np.zeros((3, n)) if self.H is None else self.H, (3, n), "H")
        L = _array(np.zeros((3, 3, n)) if self.L is None else self.L, (3, 3, n), "L")
        if np.any(L):
            eps = np.zeros((3, 3, 3))
            eps[0, 1, 2] = eps[1, 2, 0] = eps[2, 0, 1] = 1.0
            eps[0, 2, 1] = eps[2, 1, 0] = eps[1, 0, 2] = -1.0
            H_of_L = np.einsum("ijk,kjp->ip", eps, L)  # ∫ r×Ψ dm from L
            if not np.allclose(H, H_of_L, rtol=1e-6, atol=1e-9 * max(np.abs(L).max(), 1e-300)):
                # 42 accepts such data (REFPT_CM zeroes H but keeps L): the equations
                # then come from no one kinetic energy, and H is kept only to first order
                warnings.warn(
                    "modes: H and L disagree (H_ip = ε_ijk L_kjp, ∫ r×Ψ dm from "
                    "L_ijp = ∫Ψ_ip r_j dm): angular momentum is conserved only to first "
                    "order in the modal coordinates",
                    stacklevel=3,
                )
        N = _array(np.zeros((3, 3, n, n)) if self.N is None else self.N, (3, 3, n, n), "N")
        if np.any(N):
            scale = float(np.abs(N).max())
            if not np.allclose(N, N.transpose(1, 0, 3, 2), atol=1e-9 * scale):
                raise ModelError("modes: N must satisfy N_ijpq = N_jiqp (N_ijpq = ∫Ψ_ip Ψ_jq dm)")
            trace = np.einsum("iipq->pq", N)
            if not np.allclose(trace, M, rtol=1e-6, atol=1e-9 * np.abs(M).max()):
                # 42 accepts such data (N from another mesh than M): the second-order
                # terms then come from no one kinetic energy
                warnings.warn(
                    "modes: the trace of N over i = j differs from mass (∫ΨᵀΨ dm): "
                    "energy is conserved only to first order in the modal coordinates",
                    stacklevel=3,
                )
        nodes = np.asarray(self.node_positions, dtype=float)
        nn = 0 if nodes.size == 0 else nodes.reshape(-1, 3).shape[0] if nodes.ndim == 2 else -1
        if nn < 0:
            raise ModelError(f"modes: node_positions must be (N, 3), got shape {nodes.shape}")
        nodes = _array(nodes.reshape(nn, 3), (nn, 3), "node_positions")
        Psi = _array(
            np.zeros((nn, 3, n)) if np.size(self.Psi) == 0 else self.Psi, (nn, 3, n), "Psi"
        )
        Theta = _array(
            np.zeros((nn, 3, n)) if np.size(self.Theta) == 0 else self.Theta, (nn, 3, n), "Theta"
        )
        names = tuple(self.node_names) or tuple(f"node{i + 1}" for i in range(nn))
        if len(names) != nn or not all(isinstance(s, str) and s for s in names):
            raise ModelError(f"modes: node_names must be {nn} non-empty strings, got {names!r}")
        if len(set(names)) != nn:
            raise ModelError(f"modes: node_names are not unique: {names!r}")
        if self.geometric is None:
            G = None
        else:
            G = _array(self.geometric, (12, n, n), "geometric")
            if not np.allclose(G, G.transpose(0, 2, 1), atol=1e-9 * max(np.abs(G).max(), 1e-300)):
                raise ModelError("modes: geometric must be symmetric in its last two axes")
        mode_names = (
            tuple(f"eta{p + 1}" for p in range(n))
            if self.mode_names is None
            else tuple(self.mode_names)
        )
        if len(mode_names) != n or len(set(mode_names)) != n:
            raise ModelError(f"modes: mode_names must be {n} unique strings, got {mode_names!r}")
        # damping_ratio is folded into damping (so attrs.evolve re-validates one field)
        for name, value in (("mass", M), ("stiffness", K), ("damping", C), ("damping_ratio", None),
                            ("P", P), ("H", H),
                            ("L", L), ("N", N), ("node_positions", nodes), ("Psi", Psi),
                            ("Theta", Theta), ("node_names", names), ("geometric", G),
                            ("mode_names", mode_names)):  # fmt: skip
            object.__setattr__(self, name, value)

    @property
    def n(self) -> int:
        """Number of modes."""
        return int(self.mass.shape[0])

    @property
    def frequencies(self) -> Array:
        """Natural frequencies of the body clamped at its frame, rad/s (ascending):
        ``√λ`` of ``K v = λ M v``."""
        import scipy.linalg

        lam = scipy.linalg.eigh(self.stiffness, self.mass, eigvals_only=True)
        return np.sqrt(np.clip(lam, 0.0, None))

    def node(self, name: str) -> int:
        """Index of a node by name."""
        try:
            return self.node_names.index(name)
        except ValueError:
            raise ModelError(
                f"modes: no node named {name!r} (nodes: {list(self.node_names)})"
            ) from None

    def shapes(self, nodes: Sequence[str] | None = None) -> tuple[Array, Array]:
        """``(Psi, Theta)`` at the named nodes (all by default), (N, 3, n) each."""
        idx = list(range(len(self.node_names))) if nodes is None else [self.node(s) for s in nodes]
        return self.Psi[idx], self.Theta[idx]


def normal_modes(stiffness: ArrayLike, mass: ArrayLike) -> tuple[Array, Array]:
    """``(ω, Φ)``: a flexible body's modes as :class:`Modes` numbers them for
    ``damping_ratio`` and :meth:`kanedyn.ModelBatch.dispersed` for its frequencies.

    When the modal mass ``M`` and stiffness ``K`` are both diagonal, mode p is the modal
    coordinate p: ``ω_p = √(K_pp / M_pp)``, ``Φ = diag(1/√M_pp)``. Otherwise the normal
    modes ``K φ = ω² M φ`` in ascending frequency, mass-normalised (``ΦᵀMΦ = 1``).
    Either way ``ΦᵀMΦ = 1`` and ``ΦᵀKΦ = diag(ω²)``.
    """
    K, M = np.asarray(stiffness, dtype=float), np.asarray(mass, dtype=float)
    if not any(np.any(A - np.diag(np.diag(A))) for A in (K, M)):
        m = np.diag(M)
        return np.sqrt(np.clip(np.diag(K), 0.0, None) / m), np.diag(1.0 / np.sqrt(m))
    import scipy.linalg

    w2, Phi = scipy.linalg.eigh(K, M)
    return np.sqrt(np.clip(w2, 0.0, None)), Phi


def modal_matrix(mass: ArrayLike, Phi: ArrayLike, values: ArrayLike) -> Array:
    """``M Φ diag(values) Φᵀ M`` (symmetrised), ``values`` (..., n): the modal matrix whose
    projection on the modes ``Φ`` of :func:`normal_modes` is ``diag(values)``
    (``ΦᵀMΦ = 1``). The stiffness of frequencies ω is ``values = ω²`` (``k = ω² m`` for a
    diagonal mass), the damping of ratios ζ ``values = 2ζω`` (``c = 2ζ√(k m)``)."""
    MPhi = np.asarray(mass, dtype=float) @ np.asarray(Phi, dtype=float)
    A = (MPhi * np.asarray(values, dtype=float)[..., None, :]) @ MPhi.T
    out: Array = 0.5 * (A + np.swapaxes(A, -1, -2))
    return out


def as_modes(value: ArrayLike | Modes | None) -> Modes | None:
    """``Body.modes``'s converter: a :class:`Modes` or None."""
    if value is None or isinstance(value, Modes):
        return value
    raise ModelError(f"body modes must be a kanedyn.Modes record, got {type(value).__name__}")
