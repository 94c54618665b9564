"""Constraints of the director formulation, and their discrete gradients.

Every constraint of the scheme, internal (rigidity of a body) or external (a joint), is
written as a function of a few **invariants** ``π(x)`` and of the augmented joint
coordinates ``a`` (Betsch & Leyendecker 2006, §4; Betsch & Uhlar 2007, §3):

* each invariant is a quadratic (or affine) function of the redundant coordinates,
  ``π_m(x) = Σ A_m,ij x_i x_j + b_m·x + k_m``: a product of two body-fixed vectors
  (directors, or joint axes and joint points, all affine in ``x``). For joints between
  two bodies it is unchanged by a rigid motion of the whole system;
* **internal** constraints: ``½(d_a·d_b - δ_ab) = 0`` for each body (6);
* **translational** joint constraints: the joint point of Bo seen in the Gi axes,
  ``π_e = g_e^i·(o_o - o_i)``, equals the slide ``(Δ d)_e`` (3 per joint, except a free
  root, which has none);
* **rotational** joint constraints: the measured relative rotation
  ``Π_ec = g_e^i·g_c^o`` (= :math:`R_{G_iG_o}` on the manifold) equals the joint's
  Euler rotation ``R(θ)`` of its augmented angles,
  ``c = axial(R(θ)ᵀ Π) = 0`` (3 per gimbal joint, weld included; none for a spherical
  joint);
* **node** constraints (a joint at a node of a flexible body): the node's frame is a
  massless triad ``n_c`` (rigidity rows as a body's), its origin the deflected node
  ``φ + Σ_a (r_k - c)_a d_a + Σ_pa Ψ_k,ap y_pa`` (affine, :mod:`.flexible`), and its
  rotation rows ``axial(C(η)ᵀ Π) = 0`` with ``Π_ac = d_a·n_c`` and ``C(η)`` the Cayley
  rotation of :func:`kanedyn.spatial.modal.node_frame`: a gimbal whose angles are the
  body's modal amplitudes (:class:`NodeRows`).

Because ``π`` is quadratic, ``π(x') - π(x) = ∇π(z)(x' - x)`` exactly at the midpoint
``z``. The discrete gradient of a constraint ``c = F(π, a)`` is therefore the chain rule
with ``∇π(z)`` and a discrete derivative of ``F`` (exact product rule for the bilinear
``R(θ)ᵀΠ``; Gonzalez's discrete gradient for the entries of ``R(θ)``):

.. math::

    c(x') - c(x) = G_d(x, x')\\,(x' - x) \\quad\\text{exactly}, \\qquad
    G_d = \\partial_\\pi \\bar F\\, \\nabla\\pi(z) + \\partial_a^d F

so the constraint forces ``G_dᵀλ`` do no work over a step (energy), and, ``π`` being
invariant, exert no net force or torque (momentum; Gonzalez 1996, §4).

The builder takes *joint-like* objects: anything with ``name, inner, outer, rot_type,
rot_dof, rot_seq, trn_dof, trn_seq, inner_point, outer_point, inner_rotation,
outer_rotation`` (:class:`kanedyn.Joint`, and a closed-loop joint with the same fields),
so a loop-closure joint is one more call of :func:`joint_constraints`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.spatial import charts
from kanedyn.spatial.arithmetic import NUMPY
from kanedyn.spatial.modal import node_rotation_derivatives
from kanedyn.spatial.rotation import parse_sequence

__all__ = [
    "Affine",
    "ConstraintSet",
    "HiddenConstraints",
    "Invariants",
    "JointRows",
    "NodeRows",
    "hidden_rows",
    "joint_constraints",
]

Array = NDArray[Any]

#: axial(A) = ½ [A32 - A23, A13 - A31, A21 - A12] as coefficients α[j, b, c] of A_bc
ALPHA = np.zeros((3, 3, 3))
for _j, (_b, _c) in enumerate(((2, 1), (0, 2), (1, 0))):
    ALPHA[_j, _b, _c], ALPHA[_j, _c, _b] = 0.5, -0.5

#: below this |Δθ|², Gonzalez's correction is dropped (its quotient is then round-off)
SMALL_STEP = 1e-20


@attrs.frozen(eq=False)
class Affine:
    """Three affine functions of the coordinates, ``L x + c``: a point or an axis in N.

    ``L`` (3, nx), ``c`` (3,).
    """

    L: Array
    c: Array

    def __call__(self, x: Array) -> Array:
        """The vector at ``x`` (..., nx) -> (..., 3)."""
        return x @ self.L.T + self.c

    def __add__(self, other: Affine) -> Affine:
        return Affine(self.L + other.L, self.c + other.c)

    def __sub__(self, other: Affine) -> Affine:
        return Affine(self.L - other.L, self.c - other.c)

    def scale(self, s: float) -> Affine:
        return Affine(self.L * s, self.c * s)


def combine(vectors: Sequence[Affine], weights: Array) -> Affine:
    """``Σ_a w_a v_a`` of affine vectors."""
    L = sum((w * v.L for w, v in zip(weights, vectors, strict=True)), np.zeros_like(vectors[0].L))
    c = sum((w * v.c for w, v in zip(weights, vectors, strict=True)), np.zeros(3))
    return Affine(L, c)


class Invariants:
    """Quadratic functions ``π_m(x) = Σ_t v_t x_{i_t} x_{j_t} + b_m·x + k_m``.

    Built one dot product of two :class:`Affine` vectors at a time (:meth:`dot`), then
    frozen into triplet arrays (:meth:`freeze`). Evaluation, gradient (m, nx) and the
    weighted Hessian ``Σ_m w_m ∇²π_m`` (nx, nx) are sums over the triplets.
    """

    def __init__(self, nx: int):
        self.nx = nx
        self._t: list[tuple[int, Array, Array, Array]] = []
        self._b: list[Array] = []
        self._k: list[float] = []

    @property
    def m(self) -> int:
        return len(self._k)

    def dot(
        self, u: Affine, w: Affine, scale: float = 1.0, shift: float = 0.0, into: int | None = None
    ) -> int:
        """Add ``π = scale·(u·w) + shift``; return its index. ``into``: add the term to
        that invariant instead of a new one (a sum of products)."""
        m = self.m if into is None else into
        for r in range(3):
            iu, iw = np.nonzero(u.L[r])[0], np.nonzero(w.L[r])[0]
            if iu.size and iw.size:
                I, J = np.meshgrid(iu, iw, indexing="ij")
                V = scale * np.outer(u.L[r, iu], w.L[r, iw])
                self._t.append((m, I.ravel(), J.ravel(), V.ravel()))
        b = scale * (u.c @ w.L + w.c @ u.L)
        k = scale * float(u.c @ w.c) + shift
        if into is None:
            self._b.append(b)
            self._k.append(k)
        else:
            self._b[into] = self._b[into] + b
            self._k[into] += k
        return m

    def freeze(self) -> None:
        t = self._t or [(0, np.zeros(0), np.zeros(0), np.zeros(0))]  # none: no quadratic term
        self.tm = np.concatenate([np.full(len(i), m) for m, i, _, _ in t]).astype(np.intp)
        self.ti = np.concatenate([i for _, i, _, _ in t]).astype(np.intp)
        self.tj = np.concatenate([j for _, _, j, _ in t]).astype(np.intp)
        self.tv = np.concatenate([v for _, _, _, v in t]).astype(float)
        self.b = np.array(self._b).reshape(self.m, self.nx)
        self.k = np.array(self._k)

    def __call__(self, x: Array) -> Array:
        """π(x), (m,)."""
        quad = np.bincount(self.tm, self.tv * x[self.ti] * x[self.tj], minlength=self.m)
        return quad + self.b @ x + self.k

    def gradient(self, x: Array) -> Array:
        """∇π(x), (m, nx): row m is ``(A_m + A_mᵀ) x + b_m``."""
        g = self.b.copy()
        np.add.at(g, (self.tm, self.ti), self.tv * x[self.tj])
        np.add.at(g, (self.tm, self.tj), self.tv * x[self.ti])
        return g

    def hessian(self, w: Array) -> Array:
        """``Σ_m w_m ∇²π_m``, (nx, nx)."""
        H = np.zeros((self.nx, self.nx))
        vals = w[self.tm] * self.tv
        np.add.at(H, (self.ti, self.tj), vals)
        np.add.at(H, (self.tj, self.ti), vals)
        return H


@attrs.frozen(eq=False)
class JointRows:
    """What one joint adds: its affine frames and the rows it contributes.

    ``Gi``, ``Go``: the three axes of Gi and Go (N components) as affine functions of
    ``x``; ``o_i``, ``o_o``: the Gi and Go origins. ``trn``: invariant indices of the
    translational rows (3) or None; ``rot``: the 3×3 invariant indices of ``Π`` or None;
    ``a_rot``, ``a_trn``: the coordinate indices of its augmented angles and slides.
    """

    name: str
    Gi: tuple[Affine, ...]
    Go: tuple[Affine, ...]
    o_i: Affine
    o_o: Affine
    Delta: Array  # (3, trn_dof) slide axes in Gi
    trn: Array | None
    rot: Array | None
    axes: Array  # (3, 3) rows: unit Euler axes of rot_seq
    a_rot: Array
    a_trn: Array


def joint_constraints(
    joint: Any,
    frames: dict[str | None, tuple[Affine, tuple[Affine, Affine, Affine], Array]],
    inv: Invariants,
    a_rot: Array,
    a_trn: Array,
) -> JointRows:
    """The invariants of one tree or loop joint (any object with kd.Joint's fields).

    ``frames[body]`` = (mass-centre position, the three directors, the mass centre ``com``
    in body axes) as affine functions; ``frames[None]`` is N. A body-fixed point ``X``
    (body axes, from the body-frame origin) is ``φ + Σ_a (X - com)_a d_a``; the Gi axes
    are the columns of ``D_i R_Bi_Gi`` and the Go axes those of ``D_o R_Go_Boᵀ``.

    Translational rows (3): ``g_e^i·(o_o - o_i) - (Δ d)_e`` unless the joint is a free
    root (``inner`` None, spherical, 3 slides). Rotational rows (3):
    ``axial(R(θ)ᵀ Π)`` for a gimbal (a weld is a 0-angle gimbal); none for a spherical
    joint.
    """
    phi_i, D_i, com_i = frames[joint.inner]
    phi_o, D_o, com_o = frames[joint.outer]
    R_Bi_Gi = np.asarray(joint.inner_rotation, dtype=float)
    R_Bo_Go = np.asarray(joint.outer_rotation, dtype=float).T
    Gi = tuple(combine(D_i, R_Bi_Gi[:, e]) for e in range(3))
    Go = tuple(combine(D_o, R_Bo_Go[:, c]) for c in range(3))
    o_i = phi_i + combine(D_i, np.asarray(joint.inner_point, dtype=float) - com_i)
    o_o = phi_o + combine(D_o, np.asarray(joint.outer_point, dtype=float) - com_o)
    trn_axes = np.array(parse_sequence(joint.trn_seq)) - 1
    Delta = np.eye(3)[:, trn_axes[: joint.trn_dof]]
    free_root = joint.inner is None and joint.rot_type == "spherical" and joint.trn_dof == 3
    trn = None
    if not free_root:
        sep = o_o - o_i
        trn = np.array([inv.dot(Gi[e], sep) for e in range(3)])
    rot = None
    if joint.rot_type != "spherical":
        rot = np.array([[inv.dot(Gi[e], Go[c]) for c in range(3)] for e in range(3)])
    axes = np.eye(3)[np.array(parse_sequence(joint.rot_seq)) - 1]
    return JointRows(joint.name, Gi, Go, o_i, o_o, Delta, trn, rot, axes,
                     np.asarray(a_rot, dtype=np.intp), np.asarray(a_trn, dtype=np.intp))  # fmt: skip


@attrs.frozen(eq=False)
class _Rot:
    """The rotational rows of all gimbal joints, then of the nodes' frames, stacked
    (nr = ne + nn, their angles padded to the widest; the nodes' angles are the modal
    amplitudes of their body)."""

    rows: Array  # (nr, 3) constraint row indices
    Pi: Array  # (nr, 3, 3) invariant indices
    theta: Array  # (nr, width) coordinate indices of the angles (padded with 0)
    mask: Array  # (nr, width) True for a real angle
    axes: charts.EulerAxes | None  # of the ne gimbal rows
    ne: int
    Theta: tuple[Array, ...]  # (3, n) per node: the rotational mode shapes Θ_k


@attrs.frozen(eq=False)
class NodeRows:
    """The rotation rows of a node's frame (a joint at a node of a flexible body):
    ``Pi`` (3, 3) the invariants ``d_a·n_c``, ``eta`` (n,) the coordinate indices of
    the body's modal amplitudes, ``Theta`` (3, n) the node's rotational mode shapes;
    ``axial(C(η)ᵀ Π) = 0`` with ``C`` of :func:`kanedyn.spatial.modal.node_frame`."""

    name: str
    Pi: Array
    eta: Array
    Theta: Array


class ConstraintSet:
    """All constraints ``c(x) = 0`` of a system, in two groups of rows.

    * linear rows: ``c = π[lin] + C_a x`` (internal and translational constraints);
    * rotational rows: ``c = axial(R(θ)ᵀ Π)`` per gimbal joint, then per node frame
      (:class:`NodeRows`, ``R = C(η)``).

    Methods give the values, the Jacobian, the discrete gradient ``G_d(x, x')`` and
    the derivative of ``G_d(x, x')ᵀλ`` in ``x'`` (the Newton tangent).
    """

    def __init__(
        self,
        inv: Invariants,
        lin: list[int],
        Ca: list[Array],
        rot: list[JointRows],
        nodes: Sequence[NodeRows] = (),
    ):
        inv.freeze()
        self.inv = inv
        self.nx = inv.nx
        self.lin = np.array(lin, dtype=np.intp)
        self.Ca = np.array(Ca).reshape(len(lin), inv.nx)
        nl = len(lin)
        nr = len(rot) + len(nodes)
        self.n_all = nl + 3 * nr
        self.keep: NDArray[np.intp] | None = None
        self.nc = self.n_all
        if nr:
            angles = [np.asarray(j.a_rot) for j in rot] + [np.asarray(nd.eta) for nd in nodes]
            width = max(3, *(a.size for a in angles))
            theta = np.zeros((nr, width), dtype=np.intp)
            mask = np.zeros((nr, width), dtype=bool)
            for r, a in enumerate(angles):
                theta[r, : a.size] = a
                mask[r, : a.size] = True
            self.dof = max(1, int(mask.sum(axis=1).max()))
            self.rot: _Rot | None = _Rot(
                rows=nl + np.arange(3 * nr).reshape(-1, 3),
                Pi=np.array([j.rot for j in rot] + [nd.Pi for nd in nodes]),
                theta=theta,
                mask=mask,
                axes=charts.euler_axes(NUMPY, np.array([j.axes for j in rot])) if rot else None,
                ne=len(rot),
                Theta=tuple(np.asarray(nd.Theta, dtype=float) for nd in nodes),
            )
        else:
            self.rot = None

    def keep_rows(self, keep: Array) -> None:
        """Keep only the rows ``keep`` (of all rows, in order): a planar formulation
        drops its identically zero out-of-plane rows. The multipliers ``λ`` of
        :meth:`linearize` are then those of the kept rows."""
        self.keep = np.asarray(keep, dtype=np.intp)
        self.nc = int(self.keep.size)

    def _sel(self, a: Array) -> Array:
        return a if self.keep is None else a[self.keep]

    # ----------------------------------------------------------------- rotations
    def _euler(self, x: Array) -> tuple[Array, Array, Array]:
        """R(θ) (nr, 3, 3), dR (nr, dof, 3, 3), d2R (nr, dof, dof, 3, 3), with ``dof``
        the most angles of any joint or node; unused angles are zero. The gimbals' ``R``
        is their Euler rotation (:func:`kanedyn.spatial.charts.euler_derivatives`), the
        nodes' the Cayley rotation ``C(η)``
        (:func:`kanedyn.spatial.modal.node_rotation_derivatives`)."""
        rot = self.rot
        assert rot is not None
        theta = np.where(rot.mask, x[rot.theta], 0.0)
        dof, ne = self.dof, rot.ne
        nr = theta.shape[0]
        R, dR = np.zeros((nr, 3, 3)), np.zeros((nr, dof, 3, 3))
        d2R = np.zeros((nr, dof, dof, 3, 3))
        if ne:
            assert rot.axes is not None
            k = min(dof, 3)
            R[:ne], dR[:ne, :k], d2R[:ne, :k, :k] = charts.euler_derivatives(
                NUMPY, rot.axes, theta[:ne, :3], k
            )
        for r, Theta in enumerate(rot.Theta):
            n = Theta.shape[1]
            R[ne + r], dR[ne + r, :n], d2R[ne + r, :n, :n] = node_rotation_derivatives(
                Theta, theta[ne + r, :n]
            )
        return R, dR, d2R

    def _dtheta(self, x0: Array, x1: Array) -> Array:
        assert self.rot is not None
        th = np.where(self.rot.mask, x1[self.rot.theta] - x0[self.rot.theta], 0.0)
        return th[:, : self.dof]

    def _discrete_dR(
        self, x0: Array, x1: Array, tangent: bool = False, e0: Any = None, e1: Any = None
    ) -> tuple[Array, Array | None]:
        """Gonzalez's discrete derivative of R(θ) in θ, per entry (nr, 3, 3, 3) [k, e, b],
        and (with ``tangent``) its derivative in θ' (nr, 3, 3, 3, 3) [k, l, e, b]:

        .. math:: D_k R = \\partial_k R(\\bar\\theta) + s\\,\\Delta\\theta_k, \\quad
                  s = \\frac{\\Delta R - \\sum_l \\partial_l R(\\bar\\theta)\\Delta\\theta_l}
                  {|\\Delta\\theta|^2}

        so that ``Σ_k D_kR Δθ_k = R(θ') - R(θ)`` exactly (Gonzalez 1996, eq. 3.8)."""
        dth = self._dtheta(x0, x1)
        R0 = (e0 or self._euler(x0))[0]
        R1, dR1, _ = e1 or self._euler(x1)
        _, dRm, d2Rm = self._euler(0.5 * (x0 + x1))
        n2 = np.sum(dth**2, axis=-1)
        big = n2 > SMALL_STEP
        safe = np.where(big, n2, 1.0)[:, None, None]
        num = R1 - R0 - np.einsum("rlij,rl->rij", dRm, dth)
        s = np.where(big[:, None, None], num / safe, 0.0)
        D = dRm + dth[:, :, None, None] * s[:, None]
        if not tangent:
            return D, None
        # ∂s/∂θ'_l = [(∂_l R(θ') - ½ Σ_m ∂_m∂_l R(θ̄) Δθ_m - ∂_l R(θ̄)) |Δθ|² - num 2Δθ_l] / |Δθ|⁴
        dnum = dR1 - 0.5 * np.einsum("rmlij,rm->rlij", d2Rm, dth) - dRm
        ds = (dnum * safe[:, None] - 2.0 * num[:, None] * dth[:, :, None, None]) / safe[
            :, None
        ] ** 2
        ds = np.where(big[:, None, None, None], ds, 0.0)
        dD = 0.5 * d2Rm + dth[:, :, None, None, None] * ds[:, None]
        dD = dD + np.eye(self.dof)[None, :, :, None, None] * s[:, None, None]
        return D, dD

    # ----------------------------------------------------------------- values and Jacobians
    def __call__(self, x: Array) -> Array:
        """c(x), (nc,)."""
        pi = self.inv(x)
        c = np.empty(self.n_all)
        c[: self.lin.size] = pi[self.lin] + self.Ca @ x
        if self.rot is not None:
            R = self._euler(x)[0]
            Pi = pi[self.rot.Pi]
            c[self.rot.rows] = np.einsum("jbc,reb,rec->rj", ALPHA, R, Pi)
        return self._sel(c)

    def jacobian(self, x: Array) -> Array:
        """G(x) = ∂c/∂x, (nc, nx)."""
        gpi = self.inv.gradient(x)
        G = np.zeros((self.n_all, self.nx))
        G[: self.lin.size] = gpi[self.lin] + self.Ca
        if self.rot is not None:
            R, dR, _ = self._euler(x)
            Pi = self.inv(x)[self.rot.Pi]
            self._rot_rows(G, R, gpi, dR, Pi)
        return self._sel(G)

    def _rot_rows(self, G: Array, R: Array, gpi: Array, dR: Array, Pi: Array) -> None:
        """Fill the rotational rows: ``Σ_ec (∂c/∂Π_ec)(R) ∇π_ec`` and the θ columns
        ``axial(∂_kRᵀ Π)``."""
        rot = self.rot
        assert rot is not None
        C = np.einsum("jbc,reb->rjec", ALPHA, R)  # ∂c_j/∂Π_ec
        G[rot.rows] = np.einsum("rjec,recn->rjn", C, gpi[rot.Pi])
        dc = np.einsum("jbc,rkeb,rec->rjk", ALPHA, dR, Pi)  # ∂c_j/∂θ_k
        for r in range(rot.rows.shape[0]):
            k = rot.mask[r, : self.dof]
            G[np.ix_(rot.rows[r], rot.theta[r, : self.dof][k])] += dc[r][:, k]

    def discrete_gradient(self, x0: Array, x1: Array) -> Array:
        """``G_d(x0, x1)``, (nc, nx), with ``G_d (x1 - x0) = c(x1) - c(x0)`` exactly."""
        z = 0.5 * (x0 + x1)
        gpi = self.inv.gradient(z)
        G = np.zeros((self.n_all, self.nx))
        G[: self.lin.size] = gpi[self.lin] + self.Ca
        if self.rot is not None:
            Rbar = 0.5 * (self._euler(x0)[0] + self._euler(x1)[0])
            Pibar = 0.5 * (self.inv(x0) + self.inv(x1))[self.rot.Pi]
            D, _ = self._discrete_dR(x0, x1)
            self._rot_rows(G, Rbar, gpi, D, Pibar)
        return self._sel(G)

    def tangent(self, x0: Array, x1: Array, lam: Array) -> Array:
        """``∂[G_d(x0, x1)ᵀ λ] / ∂x1``, (nx, nx): the geometric part of the Newton tangent."""
        return self.linearize(x0, x1, lam)[3]

    def linearize(self, x0: Array, x1: Array, lam: Array) -> tuple[Array, Array, Array, Array]:
        """Everything a Newton iteration needs, sharing the work: ``c(x1)`` (nc,),
        ``G(x1)`` and ``G_d(x0, x1)`` (nc, nx), and the tangent ``∂[G_dᵀλ]/∂x1``
        (nx, nx)."""
        if self.keep is not None:
            lam_all = np.zeros(self.n_all)
            lam_all[self.keep] = lam
            lam = lam_all
        z = 0.5 * (x0 + x1)
        nl = self.lin.size
        pi0, pi1 = self.inv(x0), self.inv(x1)
        gz, g1 = self.inv.gradient(z), self.inv.gradient(x1)
        c = np.empty(self.n_all)
        c[:nl] = pi1[self.lin] + self.Ca @ x1
        G = np.zeros((self.n_all, self.nx))
        G[:nl] = g1[self.lin] + self.Ca
        G_d = np.zeros((self.n_all, self.nx))
        G_d[:nl] = gz[self.lin] + self.Ca
        w = np.zeros(self.inv.m)
        np.add.at(w, self.lin, lam[:nl])
        if self.rot is None:
            return self._sel(c), self._sel(G), self._sel(G_d), 0.5 * self.inv.hessian(w)
        rot = self.rot
        e0, e1 = self._euler(x0), self._euler(x1)
        R0 = e0[0]
        R1, dR1, _ = e1
        Pi1 = pi1[rot.Pi]
        c[rot.rows] = np.einsum("jbc,reb,rec->rj", ALPHA, R1, Pi1)
        self._rot_rows(G, R1, g1, dR1, Pi1)
        Rbar = 0.5 * (R0 + R1)
        Pibar = 0.5 * (pi0 + pi1)[rot.Pi]
        D, dD = self._discrete_dR(x0, x1, True, e0, e1)
        assert dD is not None
        self._rot_rows(G_d, Rbar, gz, D, Pibar)
        lr = lam[rot.rows]  # (nr, 3)
        # w_ec = Σ_j λ_j ∂c_j/∂Π_ec at R̄
        np.add.at(w, rot.Pi, np.einsum("rj,jbc,reb->rec", lr, ALPHA, Rbar))
        K = 0.5 * self.inv.hessian(w)
        gz, g1 = gz[rot.Pi], g1[rot.Pi]
        # x rows, θ' columns: ∇π(z)ᵀ ∂w/∂θ'_k, with ∂R̄/∂θ'_k = ½ ∂_k R(θ')
        dw = 0.5 * np.einsum("rj,jbc,rkeb->rkec", lr, ALPHA, dR1)
        cross_x = np.einsum("rkec,recn->rnk", dw, gz)  # (nr, nx, 3)
        # θ rows: (G_dᵀλ)_k = Σ λ_j α D_kR Π̄; its x' derivative through Π̄ = ½(Π + Π')
        coef = np.einsum("rj,jbc,rkeb->rkec", lr, ALPHA, D)
        cross_t = 0.5 * np.einsum("rkec,recn->rkn", coef, g1)  # (nr, 3, nx)
        tt = np.einsum("rj,jbc,rkleb,rec->rkl", lr, ALPHA, dD, Pibar)  # (nr, 3, 3)
        for r in range(rot.rows.shape[0]):
            k = rot.mask[r, : self.dof]
            cols = rot.theta[r, : self.dof][k]
            K[:, cols] += cross_x[r][:, k]
            K[cols, :] += cross_t[r][k]
            K[np.ix_(cols, cols)] += tt[r][np.ix_(k, k)]
        return self._sel(c), self._sel(G), self._sel(G_d), K


class HiddenConstraints:
    """The velocity ("hidden") constraints that the step enforces at the step points
    when a body's directors' mass matrix is indefinite (:mod:`.step`).

    Each row is a fixed linear combination ``η_r(x) = Σ_m W_rm π_m(x) + const`` of the
    quadratic invariants, chosen among the constraints that involve no augmented
    coordinate: the rigidity rows, the translational rows along which no slide acts, and
    the entries of ``Π`` that a gimbal of fewer than three angles fixes (``Π_ab = 0``,
    ``b ≠ a``, for a hinge about ``a``; ``Π_{a_1 a_2} = 0`` for a two-angle gimbal
    ``a_1 a_2``; ``axial(Π) = 0`` for a weld). Their rates ``H(x) v`` with
    ``H = W ∇π(x)`` are **bilinear** in ``(x, v)``, so that

    .. math:: H(x_1) v_1 - H(x_0) v_0 = H(\\bar x)\\,\\Delta v + B(\\bar v)\\,\\Delta x,
              \\qquad B(v) = W (\\nabla\\pi(v) - b)

    exactly (``x̄``, ``v̄`` the midpoints): the discrete gradients of the hidden
    constraints, in ``v`` and in ``x``. On the constraint manifold, ``H(x) v = 0`` and the
    velocity constraints of the augmented coordinates leave exactly the rigid velocities
    allowed by the joints (their rates follow from the bodies').
    """

    def __init__(self, inv: Invariants, weights: Array, inverse_mass: Array):
        self.inv = inv
        self.W = weights  # (nh, m)
        self.nh = int(weights.shape[0])
        #: the inverse of the mass matrix on the body coordinates (zero on augmented ones)
        self.inverse_mass = inverse_mass

    def jacobian(self, x: Array) -> Array:
        """``H(x)`` (nh, nx)."""
        return self.W @ self.inv.gradient(x)  # type: ignore[no-any-return]

    def rate_gradient(self, v: Array) -> Array:
        """``B(v) = ∂[H(x) v]/∂x`` (nh, nx), independent of ``x``."""
        return self.W @ (self.inv.gradient(v) - self.inv.b)  # type: ignore[no-any-return]

    def hessian(self, mu: Array) -> Array:
        """``Σ_r μ_r ∇²η_r`` (nx, nx): ``∂[H(x)ᵀμ]/∂x`` and ``∂[B(v)ᵀμ]/∂v``."""
        return self.inv.hessian(self.W.T @ mu)


def hidden_rows(cons: ConstraintSet, joints: Sequence[JointRows]) -> Array:
    """The weights ``W`` (nh, m) of :class:`HiddenConstraints` over the invariants of
    ``cons``: its linear rows without augmented coordinates, and the ``Π`` entries that
    the gimbals (``joints``' rotational rows, fewer than three angles) fix."""
    m = cons.inv.m
    rows: list[Array] = []
    for r in range(cons.lin.size):
        if not np.any(cons.Ca[r]):
            w = np.zeros(m)
            w[cons.lin[r]] = 1.0
            rows.append(w)
    for j in joints:
        if j.rot is None:
            continue
        axes = [int(np.argmax(e)) for e in j.axes[: j.a_rot.size]]
        pairs: list[list[tuple[int, int, float]]] = []
        if not axes:  # weld: axial(Π) = 0
            pairs = [[(b, c, float(ALPHA[k, b, c])) for b in range(3) for c in range(3)
                      if ALPHA[k, b, c] != 0.0] for k in range(3)]  # fmt: skip
        elif len(axes) == 1:
            pairs = [[(axes[0], c, 1.0)] for c in range(3) if c != axes[0]]
        elif len(axes) == 2 and axes[0] != axes[1]:
            pairs = [[(axes[0], axes[1], 1.0)]]
        for combo in pairs:
            w = np.zeros(m)
            for b, c, s in combo:
                w[j.rot[b, c]] += s
            rows.append(w)
    return np.array(rows).reshape(len(rows), m)
