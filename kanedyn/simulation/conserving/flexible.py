"""Flexible bodies (assumed modes, :class:`kanedyn.Modes`) in the director formulation.

A flexible body deforms by ``Ψ(r)η`` (body axes) about its undeformed shape
(:mod:`kanedyn.model.modes`), so a point ``r`` of it (from the body-frame origin; ``X =
r - c`` from the undeformed mass centre ``c``) is at

.. math:: x(r) = \\varphi + \\sum_a X_a d_a + \\sum_{p,a} \\Psi_{ap}(r)\\, y_{pa},
          \\qquad y_{pa} = \\eta_p d_a

in N. The **modal vectors** ``y_pa`` (3 per mode and body axis) are coordinates of the
scheme, so ``x(r)`` is linear in the coordinates and the kinetic energy of the field
``ρ = r + Ψη``, ``T = ½ ∫ |ẋ|² dm``, has a **constant** mass matrix, built from the modal
integrals of :class:`kanedyn.Modes` (their definitions, :mod:`kanedyn.model.modes`):

.. math::

    T = \\tfrac12 \\sum_{I,J} W_{IJ}\\, \\dot x_I \\cdot \\dot x_J, \\quad
    x_I \\in (\\varphi, d_a, y_{pa}), \\qquad
    W = \\begin{bmatrix} m & 0 & P_{ap} \\\\ 0 & E_{ab} & L_{bap} - c_a P_{bp} \\\\
        P_{ap} & \\cdot & N_{abpq} \\end{bmatrix}

(``∫X dm = 0``, ``∫XXᵀ dm = E`` the Euler tensor, ``∫Ψ dm = P``, ``∫X_aΨ_bp dm =
L_bap - c_aP_bp``, ``∫Ψ_apΨ_bq dm = N_abpq``). This is the kinetic energy that
:mod:`kanedyn.spatial.modal` writes in the speeds ``(ω, v₀, ξ)`` (every second-order
term of the linear field kept), so the two agree at every state when ``N`` (and ``L``
with ``H``) are given; a body without them is refused. The modal amplitudes ``η`` are
augmented coordinates (massless), tied to the modal vectors by the invariant constraints

.. math:: y_{pa}\\cdot d_b - \\delta_{ab}\\,\\eta_p = 0 \\qquad (9 \\text{ per mode})

which, with orthonormal directors, give ``y_pa = η_p d_a``. They are bilinear in the
coordinates, so their midpoint gradient is their discrete gradient, and rotation
invariant, so their forces exert no net force or torque (:mod:`.constraints`). The strain
energy ``½ηᵀK_Ψη`` is quadratic in ``η``: its midpoint gradient ``K_Ψ(η_n + η_{n+1})/2``
is its discrete gradient; the modal damping ``C_Ψ`` acts at the mean rate ``Δη/h`` and
dissipates ``ΔηᵀC_ΨΔη/h ≥ 0`` per step. Uniform gravity adds ``-g·Σ P_ap y_pa`` (the
displaced mass) to the potential: linear, a constant force.

**Geometric stiffening** (``Modes.geometric``) is not a potential: in
:mod:`kanedyn.spatial.modal` it is the inertia of the foreshortening
``u_f = ½ηᵀG(r)η e(r)``, to first order in ``u_f``: the kinetic energy gains the cross
term of the rigid field with it, ``T_f = ∫(φ̇ + Σ_b X_b ḋ_b)·(d/dt) D u_f dm``, and the
stiffening follows from it (the preloads are the body's accelerations and ``ω²``). A
stiffened body has one more vector per mode pair ``p ≤ q`` and body axis,
``z_pqa = η_pη_q d_a``, so that ``D u_f = Σ ½G_pq(r) e_a(r) z_pqa`` (over ordered pairs)
is linear in the coordinates and ``T_f`` a constant bilinear form:

.. math::

    W_{\\varphi z_{pqa}} = \\tfrac{w}{2} B_{a,pq}, \\qquad
    W_{d_b z_{pqa}} = \\tfrac{w}{2} (S_{ab,pq} - c_b B_{a,pq}), \\qquad
    W_{zz} = W_{yz} = 0

(``w = 2`` for ``p < q``), with ``B_a = ∫G e_a dm`` and ``S_ab = ∫G e_a r_b dm`` read
from the rows of ``Modes.geometric`` (:func:`foreshortening_moments`), and the rows
``z_pqa·d_b - δ_ab η_pη_q = 0`` (quadratic and invariant, like the others). The
foreshortening's own inertia and its products with the elastic velocities are left out,
as in :mod:`kanedyn.spatial.modal`, so the mass matrix is **indefinite** on the ``z``:
the balance laws still hold to the Newton tolerance, but the nodal rates
``2Δx/h - v_n`` may leave the tangent space of the constraints with kinetic energy of
either sign, which no joint state has (up to 8 % of the energy at ``h = 0.1`` s on the
hub and beam of ``tests/test_conserving_flex.py``, 1.7 % at 0.05 s, falling as ``h⁴``
once the step resolves the fastest mode). The step of a stiffened model therefore
moves its nodal rates onto the tangent space with the same energy, ``P`` and ``H``
(:func:`~.formulation.tangent_rates`, a change of ``O(h²)``): the joint-space readout
then carries the scheme's energy to round-off, and the run stays second order.

**Joints at nodes** (``Joint.inner_node``, ``outer_node``): the node's frame is a
:class:`NodeFrame`, the deflected node (affine in the coordinates) and three massless
axes ``n_c`` tied to the body by rigidity rows and the Cayley rotation rows
``axial(C(η)ᵀ Π) = 0``, ``Π_ac = d_a·n_c`` (:class:`~.constraints.NodeRows`); the
joint's rows are those of any joint on that frame.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.plan import ModalData, modal_data, node_joints, outer_node_joints, params_of
from kanedyn.simulation.conserving.constraints import Affine, Invariants, NodeRows
from kanedyn.spatial.algebra import cross
from kanedyn.spatial.modal import LEVI_CIVITA, node_frame

__all__ = [
    "FlexBody",
    "NodeFrame",
    "check_flexible",
    "flex_bodies",
    "flex_size",
    "foreshortening_moments",
    "node_frames",
    "node_sides",
    "node_size",
]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class FlexBody:
    """One flexible body in the director coordinates: ``body`` its index, ``modal`` its
    slice into the state's ``η`` and ``ξ``, ``eta`` (n,) the coordinate indices of its
    modal amplitudes, ``y`` the modal vectors ``y_pa`` (index ``3p + a``) as
    :class:`~.constraints.Affine` functions of ``x``, ``vectors`` the body's vectors
    ``(φ, d_1, d_2, d_3, y_11, y_12, ..., z_...)`` and ``W`` the weights of the module
    docstring over them (``T = ½ Σ W_IJ ẋ_I·ẋ_J``), rigid block included; ``pairs`` the
    mode pairs ``p ≤ q`` of a stiffened body and ``z`` their foreshortening vectors
    ``z_pqa = η_pη_q d_a`` (index ``3j + a``)."""

    body: int
    modal: slice
    eta: NDArray[np.intp]
    y: tuple[Affine, ...]
    vectors: tuple[Affine, ...]
    W: Array
    pairs: tuple[tuple[int, int], ...] = ()
    z: tuple[Affine, ...] = ()

    @property
    def flex_weights(self) -> Array:
        """``W`` without the rigid block (φ, d), which the rigid body's terms hold."""
        W = self.W.copy()
        W[:4, :4] = 0.0
        return W


def check_flexible(model: Model) -> None:
    """A :class:`~kanedyn.ModelError` naming a flexible body the scheme cannot hold: one
    without the second-order integral ``N`` (or with ``H`` but without ``L``), whose
    kinetic energy is then not that of a displacement field, or whose ``N`` and ``L``
    disagree with its modal mass and ``H`` (data :class:`kanedyn.Modes` accepts with a
    warning; the director form would run other equations than Kane's), or a flexible
    body in a central field, whose displaced mass's potential
    (:func:`kanedyn.spatial.modal.modal_central_potential`) the scheme's discrete
    gradient of the field does not hold."""
    for b in model.bodies:
        md: Any = b.modes
        if md is None:
            continue
        if model.central_gravity is not None:
            raise ModelError(
                f"body {b.name!r}: method='energy-momentum' takes a central field on rigid "
                "bodies only (its discrete gradient of the field's potential has no term "
                "for a flexible body's displaced mass); use method='rk4' (Kane or "
                "formulation='msd')"
            )
        if not np.any(md.N) or (np.any(md.H) and not np.any(md.L)):
            missing = "N" if not np.any(md.N) else "L"
            raise ModelError(
                f"body {b.name!r}: method='energy-momentum' needs the modal integral "
                f"Modes.{missing} (the kinetic energy of the field r + Ψη in director "
                "coordinates is built from P, L and N); give it, or use method='rk4'"
            )
        trace = np.einsum("iipq->pq", md.N)
        H_of_L = np.einsum("ijk,kjp->ip", LEVI_CIVITA, md.L)  # ∫ r×Ψ dm from L
        for what, have, want in (("the trace of N", trace, md.mass), ("H", md.H, H_of_L)):
            scale = max(float(np.abs(want).max(initial=0.0)), 1e-300)
            if not np.allclose(have, want, rtol=1e-6, atol=1e-9 * scale):
                raise ModelError(
                    f"body {b.name!r}: method='energy-momentum' needs consistent modal "
                    f"data: {what} differs from "
                    f"{'the modal mass' if what != 'H' else 'the antisymmetric part of L'} "
                    "(the director form is built from N and L); use method='rk4'"
                )


def _pairs(md: Any) -> tuple[tuple[int, int], ...]:
    """The mode pairs ``p ≤ q`` of a stiffened body's foreshortening vectors (none
    without ``Modes.geometric``)."""
    if md.geometric is None:
        return ()
    return tuple((p, q) for p in range(md.n) for q in range(p, md.n))


def flex_size(model: Model) -> int:
    """The coordinates the flexible bodies add: ``10 n`` per body (``η`` and ``y``), and
    ``9`` per mode pair of a stiffened body (``z_pqa``)."""
    return sum(10 * b.modes.n + 9 * len(_pairs(b.modes)) for b in model.bodies if b.modes)


def foreshortening_moments(G: Array) -> tuple[Array, Array]:
    """``B_a = ∫G e_a dm`` (3, n, n) and ``S_ab = ∫G e_a r_b dm`` (3, 3, n, n) of the
    foreshortening ``½ηᵀG(r)η e(r)``, from the rows of ``Modes.geometric``
    (``∫G (e·ℓ_k) dm``, :mod:`kanedyn.model.modes`): rows 0-2 are ``B``; the
    angular-acceleration rows ``ℓ = e_k × r`` give the antisymmetric part of ``S``,
    ``½(S_ab - S_ba) = ½ Σ_k ε_akb G_{3+k}``; the centrifugal rows give the symmetric
    part, ``ℓ = e_a r_a - r`` for ``ω_a²`` (``S_aa - tr S``) and ``e_a r_b + e_b r_a`` for
    ``ω_aω_b``."""
    B = np.asarray(G[:3])
    S = np.zeros((3, 3) + B.shape[1:])
    for a in range(3):
        for b in range(3):
            S[a, b] = 0.5 * sum(LEVI_CIVITA[a, k, b] * G[3 + k] for k in range(3))
    trace = -0.5 * (G[6] + G[7] + G[8])
    for a in range(3):
        S[a, a] += G[6 + a] + trace
    for k, (a, b) in enumerate(((0, 1), (1, 2), (2, 0))):
        S[a, b] += 0.5 * G[9 + k]
        S[b, a] += 0.5 * G[9 + k]
    return B, S


def _weights(body: Any, md: ModalData) -> Array:
    """``W`` (4 + 3n, 4 + 3n) of the module docstring for a flexible :class:`kanedyn.Body`
    with the modal data ``md`` (:func:`kanedyn.model.plan.modal_data`)."""
    n = md.n
    pairs = _pairs(md)
    I = np.asarray(body.inertia, dtype=float)
    c = np.asarray(body.com, dtype=float)
    W = np.zeros((4 + 3 * n + 3 * len(pairs),) * 2)
    W[0, 0] = body.mass
    W[1:4, 1:4] = 0.5 * np.trace(I) * np.eye(3) - I  # the Euler tensor ∫XXᵀ dm
    Ly = np.asarray(md.L) - c[None, :, None] * np.asarray(md.P)[:, None, :]  # ∫Ψ_bp X_a: [b, a, p]
    for p in range(n):
        for a in range(3):
            k = 4 + 3 * p + a
            W[0, k] = W[k, 0] = md.P[a, p]
            W[1:4, k] = W[k, 1:4] = Ly[a, :, p]
            for q in range(n):
                W[k, 4 + 3 * q : 7 + 3 * q] = md.N[a, :, p, q]
    if pairs:  # the foreshortening's cross term with the rigid field (module docstring)
        B, S = foreshortening_moments(np.asarray(md.geometric))
        for j, (p, q) in enumerate(pairs):
            w = 0.5 if p == q else 1.0  # ½ Σ over ordered pairs
            for a in range(3):
                k = 4 + 3 * n + 3 * j + a
                W[0, k] = W[k, 0] = w * B[a, p, q]
                W[1:4, k] = W[k, 1:4] = w * (S[a, :, p, q] - c * B[a, p, q])
    return W


def flex_bodies(model: Model, bodies: Any, start: int, nx: int) -> tuple[FlexBody, ...]:
    """The :class:`FlexBody` of every flexible body, its coordinates from ``start``:
    ``η`` (n), then ``y_pa`` (3 each, index ``3p + a``), then a stiffened body's
    ``z_pqa`` (3 each, index ``3j + a`` for the j-th pair of ``pairs``)."""
    eye = np.eye(nx)
    out, off = [], start
    for i, sl in model.modal_slices():
        n = sl.stop - sl.start
        eta = np.arange(off, off + n, dtype=np.intp)
        y0 = off + n
        y = tuple(
            Affine(eye[y0 + 3 * k : y0 + 3 * k + 3].copy(), np.zeros(3)) for k in range(3 * n)
        )
        pairs = _pairs(model.bodies[i].modes)
        z0 = y0 + 9 * n
        z = tuple(
            Affine(eye[z0 + 3 * k : z0 + 3 * k + 3].copy(), np.zeros(3))
            for k in range(3 * len(pairs))
        )
        bf = bodies[i]
        vectors = (bf.pos, *bf.dirs, *y, *z)
        md = modal_data(params_of(model), model, i)
        out.append(FlexBody(i, sl, eta, y, vectors, _weights(model.bodies[i], md), pairs, z))
        off += 10 * n + 9 * len(pairs)
    return tuple(out)


def add_mass(M: Array, fbs: tuple[FlexBody, ...]) -> None:
    """``M += Σ W_IJ L_Iᵀ L_J`` over the pairs that hold a modal vector (in place)."""
    for fb in fbs:
        W = fb.flex_weights
        for I, J in zip(*np.nonzero(W), strict=True):
            M += W[I, J] * fb.vectors[I].L.T @ fb.vectors[J].L


def _scalar(nx: int, i: int) -> Affine:
    """The coordinate ``x_i`` as the vector ``(x_i, 0, 0)`` (for a product of two)."""
    L = np.zeros((3, nx))
    L[0, i] = 1.0
    return Affine(L, np.zeros(3))


def add_constraints(
    inv: Invariants, lin: list[int], Ca: list[Array], owners: list[str], fbs: Any, model: Model
) -> None:
    """The rows ``y_pa·d_b - δ_ab η_p = 0`` of every flexible body, and
    ``z_pqa·d_b - δ_ab η_pη_q = 0`` of a stiffened one (appended in place)."""
    nx = inv.nx
    for fb in fbs:
        dirs = fb.vectors[1:4]
        for p, e in enumerate(fb.eta):
            for a in range(3):
                for b in range(3):
                    lin.append(inv.dot(fb.y[3 * p + a], dirs[b]))
                    row = np.zeros(nx)
                    row[e] = -1.0 if a == b else 0.0
                    Ca.append(row)
                    owners.append(f"body {model.bodies[fb.body].name!r}")
        for j, (p, q) in enumerate(fb.pairs):  # z_pqa·d_b - δ_ab η_p η_q = 0
            ep, eq = _scalar(nx, fb.eta[p]), _scalar(nx, fb.eta[q])
            for a in range(3):
                for b in range(3):
                    m = inv.dot(fb.z[3 * j + a], dirs[b])
                    if a == b:
                        inv.dot(ep, eq, -1.0, into=m)
                    lin.append(m)
                    Ca.append(np.zeros(nx))
                    owners.append(f"body {model.bodies[fb.body].name!r}")


def modal_matrices(model: Model, fbs: tuple[FlexBody, ...], nx: int) -> tuple[Array, Array]:
    """``K``, ``C`` (nx, nx): the modal stiffness and damping on the ``η`` coordinates."""
    K, C = np.zeros((nx, nx)), np.zeros((nx, nx))
    for fb in fbs:
        md = modal_data(params_of(model), model, fb.body)
        ix = np.ix_(fb.eta, fb.eta)
        K[ix], C[ix] = md.stiffness, md.damping
    return K, C


def gravity(fbs: tuple[FlexBody, ...], g: Array, nx: int) -> Array:
    """The generalized gravity force on the modal vectors, ``P_ap g`` on ``y_pa``."""
    f = np.zeros(nx)
    for fb in fbs:
        for k in range(4, len(fb.vectors)):
            f += fb.W[0, k] * fb.vectors[k].L.T @ g
    return f


def first_moment(fbs: tuple[FlexBody, ...], x: Array) -> Array:
    """``Σ P_ap y_pa`` (N): the displaced mass's first moment about the mass centres."""
    out = np.zeros(3)
    for fb in fbs:
        for k in range(4, len(fb.vectors)):
            out += fb.W[0, k] * fb.vectors[k](x)
    return out


def momentum(fbs: tuple[FlexBody, ...], x: Array, v: Array, c: Array) -> tuple[Array, Array]:
    """The modal vectors' part of ``P = ∫ẋ dm`` and of ``H = ∫(x - c) × ẋ dm``:
    ``Σ W_IJ x̃_I × ẋ_J`` over the pairs that hold one (``x̃_φ = φ - c``)."""
    P, H = np.zeros(3), np.zeros(3)
    for fb in fbs:
        W = fb.flex_weights
        X = np.array([vec(x) for vec in fb.vectors])
        X[0] -= c
        Xd = np.array([vec.L @ v for vec in fb.vectors])
        P += W[0] @ Xd
        H += np.sum(cross(X, (W @ Xd)), axis=0)
    return P, H


def lift(fb: FlexBody, x: Array, v: Array, eta: Array, xi: Array, D: Array, Dd: Array) -> None:
    """Set ``η``, ``y_pa = η_p d_a`` and their rates ``ξ``, ``ẏ_pa = ξ_p d_a + η_p ḋ_a``
    (and ``z_pqa = η_pη_q d_a``, ``ż_pqa = (ξ_pη_q + η_pξ_q) d_a + η_pη_q ḋ_a``) in place,
    from the directors ``D`` and their rates ``Dd``."""
    x[fb.eta], v[fb.eta] = eta, xi
    for p in range(eta.size):
        for a in range(3):
            cols = np.nonzero(fb.y[3 * p + a].L.any(axis=0))[0]
            x[cols] = eta[p] * D[:, a]
            v[cols] = xi[p] * D[:, a] + eta[p] * Dd[:, a]
    for j, (p, q) in enumerate(fb.pairs):
        for a in range(3):
            cols = np.nonzero(fb.z[3 * j + a].L.any(axis=0))[0]
            x[cols] = eta[p] * eta[q] * D[:, a]
            v[cols] = (xi[p] * eta[q] + eta[p] * xi[q]) * D[:, a] + eta[p] * eta[q] * Dd[:, a]


def jacobian(fb: FlexBody, x: Array, J: Array, n: int) -> None:
    """The rows of ``J = ∂ẋ/∂[u | s | ξ]`` (nx, n + nf) of the modal coordinates (in
    place, after the bodies' rows): ``∂ẏ_pa/∂u = η_p ∂ḋ_a/∂u``, ``∂ẏ_pa/∂ξ_p = d_a``,
    ``∂η̇/∂ξ = U`` (``∂ẏ_pa/∂ξ`` also gains ``η_p ∂ḋ_a/∂ξ`` when the body rides on a
    node, :class:`NodeFrame`), and ``∂ż_pqa/∂u = η_pη_q ∂ḋ_a/∂u``, ``∂ż_pqa/∂ξ_p ∋ η_q d_a``,
    ``∂ż_pqa/∂ξ_q ∋ η_p d_a``; ``n`` the number of joint speeds ``[u | s]``."""
    for p, e in enumerate(fb.eta):
        col = n + fb.modal.start + p
        J[e, col] = 1.0
        for a in range(3):
            rows = np.nonzero(fb.y[3 * p + a].L.any(axis=0))[0]
            d = fb.vectors[1 + a]
            J[rows] = x[e] * (d.L @ J)
            J[rows, col] += d(x)
    for j, (p, q) in enumerate(fb.pairs):
        ep, eq = fb.eta[p], fb.eta[q]
        cp, cq = n + fb.modal.start + p, n + fb.modal.start + q
        for a in range(3):
            rows = np.nonzero(fb.z[3 * j + a].L.any(axis=0))[0]
            d = fb.vectors[1 + a]
            J[rows] = x[ep] * x[eq] * (d.L @ J)
            J[rows, cp] += x[eq] * d(x)
            J[rows, cq] += x[ep] * d(x)


@attrs.frozen(eq=False)
class NodeFrame:
    """The frame a joint rides on at node ``node`` of the flexible body ``body`` (its
    :class:`FlexBody` ``fb``; ``Joint.inner_node`` or ``outer_node`` of joint ``joint``):
    ``pos`` the deflected node ``φ + Σ_a (r_k - c)_a d_a + Σ_pa Ψ_k,ap y_pa`` (affine in
    the coordinates, ``= p + R(r_k + Ψ_kη)`` of :func:`kanedyn.spatial.modal.node_frame`),
    ``dirs`` its axes ``n_c``, three massless coordinate vectors (``cols``, 9) tied to
    the body by the rigidity rows ``½(n_a·n_b - δ_ab)`` and the rotation rows
    ``axial(C(η)ᵀ Π) = 0``, ``Π_ac = d_a·n_c`` (:class:`~.constraints.NodeRows`), so that
    ``n_c = Σ_a C_ac(η) d_a`` (``D C``, the node frame in N); ``com`` the undeformed node
    ``r_k`` in body axes, so that a joint point ``X`` of the body is
    ``pos + Σ_c (X - r_k)_c n_c`` (Kane's ``d + C (X - r_k)``)."""

    joint: int
    body: int
    node: int
    fb: FlexBody
    pos: Affine
    dirs: tuple[Affine, Affine, Affine]
    cols: NDArray[np.intp]
    com: Array


def node_sides(model: Model) -> tuple[tuple[int, int, int, str], ...]:
    """``(joint k, body, node, side)`` of every joint side at a node (``side`` the
    joint's ``"inner"`` or ``"outer"``), in joint order."""
    out = [(k, i, n, "inner") for k, i, n in node_joints(model)]
    out += [(k, k, n, "outer") for k, n in outer_node_joints(model)]
    return tuple(sorted(out))


def node_size(model: Model) -> int:
    """The coordinates the node frames add: 9 per joint side at a node."""
    return 9 * len(node_sides(model))


def node_frames(
    model: Model, bodies: Any, fbs: tuple[FlexBody, ...], start: int, nx: int
) -> tuple[NodeFrame, ...]:
    """The :class:`NodeFrame` of every joint side at a node, their axes' coordinates
    from ``start`` (9 each: ``n_1, n_2, n_3``)."""
    eye = np.eye(nx)
    by_body = {fb.body: fb for fb in fbs}
    out = []
    for j, (k, i, node, _) in enumerate(node_sides(model)):
        fb = by_body[i]
        md = modal_data(params_of(model), model, i)
        bf = bodies[i]
        rk = np.asarray(md.node_positions[node], dtype=float)
        c = np.asarray(model.bodies[i].com, dtype=float)
        Psi = np.asarray(md.Psi[node], dtype=float)  # (3, n)
        pos = bf.pos
        for a in range(3):
            pos = pos + bf.dirs[a].scale(rk[a] - c[a])
            for p in range(md.n):
                if Psi[a, p]:
                    pos = pos + fb.y[3 * p + a].scale(Psi[a, p])
        c0 = start + 9 * j
        dirs = tuple(Affine(eye[c0 + 3 * a : c0 + 3 * a + 3].copy(), np.zeros(3)) for a in range(3))
        cols = np.arange(c0, c0 + 9, dtype=np.intp)
        out.append(NodeFrame(k, i, node, fb, pos, dirs, cols, rk))  # type: ignore[arg-type]
    return tuple(out)


def add_node_constraints(
    inv: Invariants,
    lin: list[int],
    Ca: list[Array],
    owners: list[str],
    nodes: Any,
    model: Model,
    bodies: Any,
) -> list[NodeRows]:
    """The rigidity rows ``½(n_a·n_b - δ_ab) = 0`` of every node frame (appended in
    place) and its rotation rows (:class:`~.constraints.NodeRows`, returned)."""
    out = []
    for nf in nodes:
        name = f"joint {model.joints[nf.joint].name!r}"
        for a in range(3):
            for b in range(a, 3):
                lin.append(inv.dot(nf.dirs[a], nf.dirs[b], 0.5, -0.5 * (a == b)))
                Ca.append(np.zeros(inv.nx))
                owners.append(name)
        d = bodies[nf.body].dirs
        Pi = np.array([[inv.dot(d[a], nf.dirs[c]) for c in range(3)] for a in range(3)])
        md = modal_data(params_of(model), model, nf.body)
        out.append(NodeRows(name, Pi, nf.fb.eta, np.asarray(md.Theta[nf.node], dtype=float)))
    return out


def lift_node(nf: NodeFrame, model: Model, x: Array, v: Array, eta: Array, xi: Array,
              D: Array, Dd: Array) -> None:  # fmt: skip
    """Set a node frame's axes ``n_c = D C e_c`` and their rates ``Ḋ C + D [w]× C``
    (``C``, ``w = Wξ`` of :func:`kanedyn.spatial.modal.node_frame`) in place."""
    C, _, W, _ = node_frame(modal_data(params_of(model), model, nf.body), nf.node, eta, xi)
    x[nf.cols] = (D @ C).T.ravel()
    v[nf.cols] = (Dd @ C + D @ cross(W @ xi, C.T).T).T.ravel()


def node_jacobian(nf: NodeFrame, model: Model, x: Array, J: Array, n: int) -> None:
    """The rows of a node frame's axes in ``J = ∂ẋ/∂[u | s | ξ]`` (in place, after the
    body's and the modal rows): ``∂ṅ_c/∂· = Σ_a C_ac ∂ḋ_a/∂·`` and
    ``∂ṅ_c/∂ξ_p ∋ D (W_p × C e_c)``."""
    eta = x[nf.fb.eta]
    C, _, W, _ = node_frame(
        modal_data(params_of(model), model, nf.body), nf.node, eta, np.zeros(eta.size)
    )
    dirs = nf.fb.vectors[1:4]
    D = np.column_stack([d(x) for d in dirs])
    dD = np.array([d.L @ J for d in dirs])  # (3 a, 3, ncol)
    for c in range(3):
        rows = nf.cols[3 * c : 3 * c + 3]
        J[rows] = np.einsum("a,aij->ij", C[:, c], dD)
        for p in range(eta.size):
            J[rows, n + nf.fb.modal.start + p] += D @ cross(W[:, p], C[:, c])
