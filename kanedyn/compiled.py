"""The compiled engine: one model's equations of motion as generated straight-line code.

:func:`compile_model` traces the articulated-body algorithm (ABA; Featherstone, *Rigid
Body Dynamics Algorithms*, 2008, Table 7.1) for one model on a :class:`kanedyn.codegen.Tape`
and emits a Python function of the coordinates and speeds. The model's constants (masses,
inertias, joint placements and axes, springs, gravity) are folded into the code, so its
structural zeros cost nothing, and the code has no loop, no dispatch and no NumPy call.
The same function runs

* on floats, for one state (``CompiledModel.forward_dynamics(state)``, and the RK4 loop
  of :func:`kanedyn.simulate`), and
* on NumPy arrays of B states, one element-wise operation per line
  (``CompiledModel.forward_dynamics(States)`` and :func:`kanedyn.simulate_ensemble`).

**The equations are Kane's.** ABA solves ``M ν̇ = Fr + Fr*|_{ν̇=0}`` (Kane_NBody slide 23)
without forming ``M``: eliminating the joints from the leaves inwards is a block
factorization of Kane's mass matrix, and every quantity below is a Kane quantity in
joint coordinates. The dense engine (:mod:`kanedyn.kane`) is its oracle; the tests hold
them together to round-off on random trees with every joint type.

Per joint k, in the frame ``Go_k`` (axes Go, origin at the joint point), with spatial
vectors (ω, v) and forces (n, f) (conventions page):

* joint transform from the inner frame P (``Go`` of the inner body, or N):
  ``E = R_P_Gi R_Gi_Go``, ``r = r_0 + R_P_Gi Δ d``;
* motion subspace ``S = [[Γ, 0], [0, R_Gi_Goᵀ Δ]]``; ``v_J = S [σ | ṡ]``;
  ``c_J = (Γ̇σ, -(Γσ) × R_Gi_Goᵀ Δ ṡ)`` (the rate of ``v_J`` in Go);
* pass 1: ``v_k = X_k v_P + v_J``, ``c_k = c_J + v_k ×ₘ v_J``,
  ``p_k = v_k ×f I_k v_k + (ω_k × h_k, 0)`` (h: embedded momentum);
* pass 2 (leaves to root): ``U = I^A S``, ``D = Sᵀ U``, ``u = Q - Sᵀ p^A``;
  ``I^a = I^A - U D⁻¹ Uᵀ``, ``p^a = p^A + I^a c + U D⁻¹ u`` added to the inner body
  through ``X_kᵀ``;
* pass 3 (root to leaves): ``a' = X_k a_P + c_k``, ``ν̇_k = D⁻¹ (u - Uᵀ a')``,
  ``a_k = a' + S ν̇_k``; N accelerates at ``-g`` (uniform gravity).

``Q`` holds the joint springs and dampers of :mod:`kanedyn.loads` (``-k q - c q̇`` per
angle or slide, ``-c ω`` for a spherical joint).

**Scope.** A spherical joint with a spring (``-J_r⁻ᵀ K φ``) and models with sympy
parameters are not compiled: :func:`supports` says why, and :func:`kanedyn.simulate`
then uses the dense engine. External loads enter as per-body force and torque inputs in
N (:meth:`CompiledModel.rhs_with_loads`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import codegen
from kanedyn.codegen import Scalar, Tape, cos, sin, sqrt
from kanedyn.errors import ModelError
from kanedyn.loads import AppliedLoads
from kanedyn.model import Model

__all__ = ["CompiledModel", "compile_model", "supports"]

Array = NDArray[np.float64]
Vec = list  # of Scalar
Mat = list  # of rows of Scalar


# --------------------------------------------------------------------------- 3-vectors
def _dot(a: Vec, b: Vec) -> Scalar:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec, b: Vec) -> Vec:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _add(a: Vec, b: Vec) -> Vec:
    return [x + y for x, y in zip(a, b, strict=True)]


def _sub(a: Vec, b: Vec) -> Vec:
    return [x - y for x, y in zip(a, b, strict=True)]


def _scale(s: Scalar, a: Vec) -> Vec:
    return [s * x for x in a]


def _mv(A: Mat, x: Vec) -> Vec:
    return [_dot(row, x) for row in A]


def _mtv(A: Mat, x: Vec) -> Vec:
    """``Aᵀ x``."""
    return [A[0][j] * x[0] + A[1][j] * x[1] + A[2][j] * x[2] for j in range(3)]


def _mm(A: Mat, B: Mat) -> Mat:
    return [[A[i][0] * B[0][j] + A[i][1] * B[1][j] + A[i][2] * B[2][j] for j in range(3)]
            for i in range(3)]  # fmt: skip


def _const(A: Any) -> Any:
    return [_const(x) for x in A] if np.ndim(A) else float(A)


def _rotate_sym(E: Mat, A: Mat) -> Mat:
    """``E A Eᵀ`` for symmetric A (upper triangle computed, mirrored)."""
    T = _mm(E, A)
    out: Mat = [[0.0] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i, 3):
            out[i][j] = out[j][i] = T[i][0] * E[j][0] + T[i][1] * E[j][1] + T[i][2] * E[j][2]
    return out


def _rotate(E: Mat, B: Mat) -> Mat:
    """``E B Eᵀ``."""
    T = _mm(E, B)
    return [[T[i][0] * E[j][0] + T[i][1] * E[j][1] + T[i][2] * E[j][2] for j in range(3)]
            for i in range(3)]  # fmt: skip


# --------------------------------------------------------------------------- spatial
# Spatial motion vectors m = (ω, v) and forces f = (n, f) are 6-lists; a spatial inertia
# is a symmetric 6×6 list of rows whose mirrored entries are the same objects.
def _cross_m(a: Vec, b: Vec) -> Vec:
    """``a ×ₘ b = (ω × ω_b, ω × v_b + v × ω_b)``."""
    w, v = a[:3], a[3:]
    return _cross(w, b[:3]) + _add(_cross(w, b[3:]), _cross(v, b[:3]))


def _cross_f(a: Vec, f: Vec) -> Vec:
    """``a ×f f = (ω × n + v × f, ω × f)``."""
    w, v = a[:3], a[3:]
    return _add(_cross(w, f[:3]), _cross(v, f[3:])) + _cross(w, f[3:])


def _sym_mv(I: Mat, x: Vec) -> Vec:
    return [sum((I[i][j] * x[j] for j in range(6)), 0.0) for i in range(6)]


def _sdot(a: Vec, b: Vec) -> Scalar:
    return sum((a[i] * b[i] for i in range(6)), 0.0)


def _motion_to_child(E: Mat, r: Vec, m: Vec) -> Vec:
    """``X m``: a motion vector from parent coordinates to the child frame (E = R_P_C,
    r = child origin in the parent): ``(Eᵀ ω, Eᵀ (v - r × ω))``."""
    w = m[:3]
    return _mtv(E, w) + _mtv(E, _sub(m[3:], _cross(r, w)))


def _force_to_parent(E: Mat, r: Vec, f: Vec) -> Vec:
    """``Xᵀ f``: a force from the child frame to parent coordinates."""
    fp = _mv(E, f[3:])
    return _add(_mv(E, f[:3]), _cross(r, fp)) + fp


def _skew(r: Vec) -> Mat:
    return [[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]]


def _inertia_to_parent(E: Mat, r: Vec, I: Mat) -> Mat:
    """``Xᵀ I X`` for a symmetric spatial inertia in the child frame.

    With ``I = [[A, B], [Bᵀ, C]]`` rotated to the parent axes (``A' = E A Eᵀ`` ...) and
    ``R = [r]×``: ``[[A' + K + Kᵀ - R C' R, B' + R C'], [·, C']]``, ``K = R B'ᵀ``.
    """
    A = [row[:3] for row in I[:3]]
    B = [row[3:] for row in I[:3]]
    C = [row[3:] for row in I[3:]]
    A2, B2, C2 = _rotate_sym(E, A), _rotate(E, B), _rotate_sym(E, C)
    R = _skew(r)
    RC = _mm(R, C2)
    K = [[_dot(R[i], B2[j]) for j in range(3)] for i in range(3)]  # (R B'ᵀ)_ij = R_i · B'_j
    out: Mat = [[0.0] * 6 for _ in range(6)]
    for i in range(3):
        for j in range(i, 3):
            # (R C' R)_ij = RC_i · R[:, j] = -RC_i · R_j (R antisymmetric)
            rcr = -_dot(RC[i], R[j])
            out[i][j] = out[j][i] = A2[i][j] + K[i][j] + K[j][i] - rcr
            out[i + 3][j + 3] = out[j + 3][i + 3] = C2[i][j]
        for j in range(3):
            out[i][j + 3] = out[j + 3][i] = B2[i][j] + RC[i][j]
    return out


def _body_inertia(mass: float, inertia: Array, c: Array) -> Mat:
    """Spatial inertia about a frame's origin of a body with mass centre ``c`` and
    inertia ``inertia`` (about the mass centre), both in that frame (see
    :func:`kanedyn.kane.spatial_inertia`)."""
    cx = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
    I6 = np.zeros((6, 6))
    I6[:3, :3] = inertia - mass * cx @ cx
    I6[:3, 3:] = mass * cx
    I6[3:, :3] = -mass * cx
    I6[3:, 3:] = mass * np.eye(3)
    I6 = 0.5 * (I6 + I6.T)
    return _const(I6)


def _solve_spd(D: Mat, B: list[Vec]) -> list[Vec]:
    """``D⁻¹ b`` for each right-hand side ``b`` in ``B`` (D symmetric positive definite,
    d ≤ 6) by an unrolled LDLᵀ factorization."""
    d = len(D)
    L: Mat = [[0.0] * d for _ in range(d)]
    diag: list[Scalar] = [0.0] * d
    inv: list[Scalar] = [0.0] * d
    for j in range(d):
        s = D[j][j]
        for k in range(j):
            s = s - L[j][k] * L[j][k] * diag[k]
        diag[j] = s
        inv[j] = 1.0 / s
        for i in range(j + 1, d):
            t = D[i][j]
            for k in range(j):
                t = t - L[i][k] * L[j][k] * diag[k]
            L[i][j] = t * inv[j]
    out = []
    for b in B:
        y = list(b)
        for i in range(d):
            for k in range(i):
                y[i] = y[i] - L[i][k] * y[k]
        x = [y[i] * inv[i] for i in range(d)]
        for i in reversed(range(d)):
            for k in range(i + 1, d):
                x[i] = x[i] - L[k][i] * x[k]
        out.append(x)
    return out


# --------------------------------------------------------------------------- joints
def _axis_rotation(e: Array, c: Scalar, s: Scalar) -> Mat:
    """``R = e eᵀ + cos θ (U - e eᵀ) + sin θ [e]×`` (rotation about unit axis e)."""
    eeT = np.outer(e, e)
    ex = np.array([[0.0, -e[2], e[1]], [e[2], 0.0, -e[0]], [-e[1], e[0], 0.0]])
    return [[float(eeT[i, j]) + c * float(np.eye(3)[i, j] - eeT[i, j]) + s * float(ex[i, j])
             for j in range(3)] for i in range(3)]  # fmt: skip


def _quat_dcm(x: Scalar, y: Scalar, z: Scalar, w: Scalar) -> Mat:
    """``R_A_B`` of a unit scalar-last quaternion (:func:`kanedyn.rotation.quat_to_dcm`)."""
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    return [
        [ww + xx - yy - zz, 2.0 * (xy - wz), 2.0 * (xz + wy)],
        [2.0 * (xy + wz), ww + yy - xx - zz, 2.0 * (yz - wx)],
        [2.0 * (xz - wy), 2.0 * (yz + wx), ww + zz - xx - yy],
    ]


@attrs.frozen
class _Joint:
    """One joint's traced kinematics (Go coordinates)."""

    R: Mat  # R_Gi_Go
    cols: list[tuple[Vec, int]]  # free DOFs: (S column, speed index)
    vJ: Vec
    cJ: Vec
    d: Vec  # slide displacement in Gi (Δ d)


def _remainder(J: _Joint, vk: Vec) -> Vec:
    """``c_k = c_J + v_k ×ₘ v_J``: body k's acceleration at zero ``ν̇`` beyond its inner
    body's, the remainder terms (α_r, a_r) of Kane_NBody slides 20-22 in Go."""
    return _add(J.cJ, _cross_m(vk, J.vJ))


def supports(model: Model) -> str | None:
    """``None`` if ``model`` can be compiled, else the reason it cannot."""
    if model.is_symbolic:
        return "the model has symbolic parameters (use model.subs first)"
    lay = model.layout
    if lay.spherical.size and np.any(lay.stiffness[lay.quat_u]):
        return "a spherical joint has a spring (-J_r^-T K phi is not compiled)"
    return None


# --------------------------------------------------------------------------- tracing
class _Trace:
    """The ABA of one model on a tape; inputs q, u (and optionally loads)."""

    def __init__(self, model: Model, locked: frozenset[int], loads: bool):
        self.model = model
        lay = model.layout
        self.tape = tape = Tape()
        self.q = [tape.input(f"q{i}") for i in range(model.nq)]
        self.u = [tape.input(f"u{i}") for i in range(model.n)]
        nb = model.nb
        self.loads = loads
        if loads:
            self.T = [[tape.input(f"T{i}_{c}") for c in range(3)] for i in range(nb)]
            self.F = [[tape.input(f"F{i}_{c}") for c in range(3)] for i in range(nb)]
            self.Q = [tape.input(f"Q{r}") for r in range(model.n)]
        self.locked = locked
        # normalized quaternions (as the dense engine normalizes them)
        self.quat: dict[int, list[Scalar]] = {}
        for row, k in enumerate(lay.spherical):
            idx = lay.quat_q[row]
            x, y, z, w = (self.q[i] for i in idx)
            s = 1.0 / sqrt(x * x + y * y + z * z + w * w)
            self.quat[int(k)] = [x * s, y * s, z * s, w * s]
        self.gimbal_row = {int(k): row for row, k in enumerate(lay.gimbal)}
        self.sph_row = {int(k): row for row, k in enumerate(lay.spherical)}

    def joint(self, k: int) -> _Joint:
        model, lay = self.model, self.model.layout
        j = model.joints[k]
        rot_u = [int(r) for r in lay.u_index[k][: j.rot_dof]]
        trn_u = [int(r) for r in lay.u_index[k][j.rot_dof :]]
        trn_q = [int(i) for i in lay.q_index[k][j.n_rot_coordinates :]]
        sigma = [self.u[r] for r in rot_u]
        zero = [0.0, 0.0, 0.0]
        if k in self.gimbal_row:
            row = self.gimbal_row[k]
            e = lay.gimbal_e[row]
            q_idx = [int(i) for i in lay.q_index[k][: j.rot_dof]]
            Rs = [_axis_rotation(e[a], cos(self.q[q_idx[a]]), sin(self.q[q_idx[a]]))
                  for a in range(j.rot_dof)]  # fmt: skip
            R = Rs[0]
            for Ra in Rs[1:]:
                R = _mm(R, Ra)
            # Γ = [R_3ᵀ R_2ᵀ e_1 | R_3ᵀ e_2 | e_3] (only the first rot_dof columns)
            gammas: list[Vec] = []
            for a in range(j.rot_dof):
                g: Vec = _const(e[a])
                for b in range(a + 1, j.rot_dof):
                    g = _mtv(Rs[b], g)
                gammas.append(g)
            # Γ̇σ = Σ_a σ_a γ̇_a, γ̇_a = γ_a × Σ_{b > a} σ_b γ_b
            Gds = zero
            for a in range(j.rot_dof - 1):
                tail = zero
                for b in range(a + 1, j.rot_dof):
                    tail = _add(tail, _scale(sigma[b], gammas[b]))
                Gds = _add(Gds, _scale(sigma[a], _cross(gammas[a], tail)))
        elif k in self.sph_row:
            R = _quat_dcm(*self.quat[k])
            gammas = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
            Gds = zero
        else:
            R = _const(np.eye(3))
            gammas, Gds = [], zero
        omega_J = zero
        for g, s in zip(gammas, sigma, strict=True):
            omega_J = _add(omega_J, _scale(s, g))
        Delta = lay.Delta[k]
        d = zero
        v_lin = zero
        trn_cols = []
        for c, (r, i) in enumerate(zip(trn_u, trn_q, strict=True)):
            axis = _const(Delta[:, c])
            d = _add(d, _scale(self.q[i], axis))
            col = _mtv(R, axis)  # R_Gi_Goᵀ Δ_c
            trn_cols.append((col, r))
            v_lin = _add(v_lin, _scale(self.u[r], col))
        cols = [(g + zero, r) for g, r in zip(gammas, rot_u, strict=True) if r not in self.locked]
        cols += [(zero + col, r) for col, r in trn_cols if r not in self.locked]
        vJ = omega_J + v_lin
        cJ = Gds + _scale(-1.0, _cross(omega_J, v_lin))
        return _Joint(R, cols, vJ, cJ, d)

    def generalized_forces(self) -> list[Scalar]:
        """``Q``: springs and dampers per speed; with loads, the input ``Q`` (which holds
        them, as :class:`kanedyn.loads.AppliedLoads` does)."""
        model, lay = self.model, self.model.layout
        if self.loads:
            return list(self.Q)
        Q: list[Scalar] = [0.0] * model.n
        for i, r in zip(lay.angle_q, lay.angle_u, strict=True):
            Q[int(r)] = -float(lay.stiffness[r]) * self.q[int(i)]
        for r in range(model.n):
            Q[r] = Q[r] - float(lay.damping[r]) * self.u[r]
        return Q

    def run(self) -> tuple[list[Scalar], list[Scalar]]:
        """Trace ABA; returns (ν̇, q̇)."""
        model, lay = self.model, self.model.layout
        nb = model.nb
        parent = [int(p) for p in lay.parent]
        # uniform gravity as an acceleration of N (with loads, it is in the input F)
        g = [0.0, 0.0, 0.0] if self.loads else _const(model.gravity)
        Q = self.generalized_forces()
        X: list[tuple[Mat, Vec]] = []
        joints, v, c, IA, pA = [], [], [], [], []
        R_N: list[Mat] = []  # R_N_Go, only with loads
        for k in range(nb):
            J = self.joint(k)
            p = parent[k]
            R_Bi_Gi = lay.R_Bi_Gi[k]
            if p < 0:
                R_P_Gi, r0 = R_Bi_Gi, lay.inner_point[k]
            else:
                R_P_Gi = lay.R_Go_Bo[p] @ R_Bi_Gi
                r0 = lay.R_Go_Bo[p] @ (lay.inner_point[k] - lay.outer_point[p])
            R_P_Gi_c = _const(R_P_Gi)
            E = _mm(R_P_Gi_c, J.R)
            r = _add(_const(r0), _mv(R_P_Gi_c, J.d))
            X.append((E, r))
            if p < 0:
                vk = J.vJ
            else:
                vk = _add(_motion_to_child(E, r, v[p]), J.vJ)
            ck = _remainder(J, vk)
            # body k in Go_k: mass centre and inertia
            R_Go_Bo = lay.R_Go_Bo[k]
            com = R_Go_Bo @ (lay.com[k] - lay.outer_point[k])
            I_c = R_Go_Bo @ lay.inertia[k] @ R_Go_Bo.T
            Ik = _body_inertia(float(lay.mass[k]), I_c, com)
            hk = _sym_mv(Ik, vk)
            pk = _cross_f(vk, hk)
            h = R_Go_Bo @ lay.h_embedded[k]
            if np.any(h):
                pk = _add(pk[:3], _cross(vk[:3], _const(h))) + pk[3:]
            if self.loads:
                RN = E if p < 0 else _mm(R_N[p], E)
                R_N.append(RN)
                # T, F at the mass centre, in N: to Go_k about its origin
                F_go = _mtv(RN, self.F[k])
                T_go = _mtv(RN, self.T[k])
                n_go = _add(T_go, _cross(_const(com), F_go))
                pk = _sub(pk, n_go + F_go)
            joints.append(J)
            v.append(vk)
            c.append(ck)
            IA.append([list(row) for row in Ik])
            pA.append(pk)
        # pass 2: leaves to root
        U: list[list[Vec]] = [[] for _ in range(nb)]
        Dinv_cols: list[Any] = [None] * nb
        uu: list[list[Scalar]] = [[] for _ in range(nb)]
        for k in reversed(range(nb)):
            J = joints[k]
            Ia, pa = IA[k], pA[k]
            cols = [col for col, _ in J.cols]
            Uk = [_sym_mv(Ia, s) for s in cols]
            uk = [Q[r] - _sdot(s, pa) for s, r in zip(cols, [r for _, r in J.cols], strict=True)]
            D = [[_sdot(cols[a], Uk[b]) for b in range(len(cols))] for a in range(len(cols))]
            for a in range(len(cols)):
                for b in range(a):
                    D[a][b] = D[b][a]
            U[k], uu[k] = Uk, uk
            if cols:
                # W = U D⁻¹ as columns: solve D Wᵀ = Uᵀ row by row of U (6 right-hand sides)
                rows = _solve_spd(D, [[Uk[a][i] for a in range(len(cols))] for i in range(6)])
                Dinv_u = _solve_spd(D, [uk])[0]
                Dinv_cols[k] = (D, Dinv_u)
            p = parent[k]
            if p < 0:
                continue
            if cols:
                Ia2: Mat = [[0.0] * 6 for _ in range(6)]
                for i in range(6):
                    for jj in range(i, 6):
                        corr = sum((rows[i][a] * Uk[a][jj] for a in range(len(cols))), 0.0)
                        Ia2[i][jj] = Ia2[jj][i] = Ia[i][jj] - corr
                Wu = [sum((rows[i][a] * uk[a] for a in range(len(cols))), 0.0) for i in range(6)]
                pa2 = _add(_add(pa, _sym_mv(Ia2, c[k])), Wu)
            else:
                Ia2 = Ia
                pa2 = _add(pa, _sym_mv(Ia2, c[k]))
            E, r = X[k]
            Ip = _inertia_to_parent(E, r, Ia2)
            fp = _force_to_parent(E, r, pa2)
            IA[p] = [[IA[p][i][jj] + Ip[i][jj] for jj in range(6)] for i in range(6)]
            for i in range(6):
                for jj in range(i):
                    IA[p][i][jj] = IA[p][jj][i]
            pA[p] = _add(pA[p], fp)
        # pass 3: root to leaves
        nudot: list[Scalar] = [0.0] * model.n
        a_N = [0.0, 0.0, 0.0] + [-x for x in g]
        acc: list[Vec] = []
        for k in range(nb):
            J = joints[k]
            E, r = X[k]
            p = parent[k]
            ap = a_N if p < 0 else acc[p]
            a1 = _add(_motion_to_child(E, r, ap), c[k])
            if J.cols:
                D, _ = Dinv_cols[k]
                rhs = [uu[k][a] - _sdot(U[k][a], a1) for a in range(len(J.cols))]
                zdd = _solve_spd(D, [rhs])[0]
                for (s, rr), z in zip(J.cols, zdd, strict=True):
                    nudot[rr] = z
                    a1 = _add(a1, _scale(z, s))
            acc.append(a1)
        return nudot, self.qdot()

    def qdot(self) -> list[Scalar]:
        """Kinematic equations (:func:`kanedyn.integrate.qdot`)."""
        model, lay = self.model, self.model.layout
        qd: list[Scalar] = [0.0] * model.nq
        for i, r in zip(lay.angle_q, lay.angle_u, strict=True):
            qd[int(i)] = self.u[int(r)]
        for row, k in enumerate(lay.spherical):
            x, y, z, w = self.quat[int(k)]
            wx, wy, wz = (self.u[int(r)] for r in lay.quat_u[row])
            qv = [x, y, z]
            vec = _add(_scale(w, [wx, wy, wz]), _cross(qv, [wx, wy, wz]))
            idx = lay.quat_q[row]
            for c in range(3):
                qd[int(idx[c])] = 0.5 * vec[c]
            qd[int(idx[3])] = -0.5 * _dot(qv, [wx, wy, wz])
        return qd


# --------------------------------------------------------------------------- result
@attrs.frozen(eq=False)
class CompiledModel:
    """Generated equations of motion of one model (see the module docstring).

    ``source`` is the generated Python (``def rhs(q, u)``: returns ν̇ then q̇, as a list);
    ``n_ops`` its number of arithmetic operations. Build with :func:`compile_model`.
    """

    model: Model
    locked: frozenset[int]
    source: str
    n_ops: int
    source_loads: str
    _scalar: Callable[..., list]
    _array: Callable[..., list]
    _scalar_loads: Callable[..., list]

    def forward_dynamics(self, state: Any) -> Array:
        """``d/dt [u | s]`` at a :class:`~kanedyn.State` (n,) or :class:`~kanedyn.States`
        (B, n); the same numbers as :func:`kanedyn.forward_dynamics` to round-off."""
        from kanedyn.batch import States

        model = self.model
        n = model.n
        if isinstance(state, States):
            q, u = np.asarray(state.q, dtype=float), np.asarray(state.u, dtype=float)
            _check_batch(model, q, u)
            with np.errstate(all="ignore"):
                out = self._array(*q.T, *u.T)
            acc = np.empty((q.shape[0], n))
            for r in range(n):
                acc[:, r] = out[r]
            _check_finite(acc)
            return acc
        model.check_state(state)
        try:
            out = self._scalar(*state.q.tolist(), *state.u.tolist())
        except (ZeroDivisionError, ValueError, OverflowError):  # float arithmetic raises
            out = [np.nan] * n
        acc = np.array(out[:n], dtype=float)
        _check_finite(acc)
        return acc

    def rhs(self, q: Sequence[float], u: Sequence[float]) -> list[float]:
        """``[ν̇ | q̇]`` as a list of floats at ``q``, ``u`` (no checks: the inner loop)."""
        return self._scalar(*q, *u)

    def rhs_with_loads(self, q: Sequence[float], u: Sequence[float],
                       loads: AppliedLoads) -> list[float]:  # fmt: skip
        """As :meth:`rhs`, with every load given by ``loads`` (from
        :func:`kanedyn.loads.applied_loads`: gravity, springs and dampers included):
        torques ``T`` and forces ``F`` (nb, 3) at the mass centres in N, joint efforts
        ``Q`` (n,)."""
        return self._scalar_loads(*q, *u, *loads.T.ravel().tolist(), *loads.F.ravel().tolist(),
                                  *loads.Q.tolist())  # fmt: skip


def _check_batch(model: Model, q: Array, u: Array) -> None:
    if q.ndim != 2 or q.shape[1] != model.nq or u.shape != (q.shape[0], model.n):
        raise ModelError(
            f"States: expected q (B, {model.nq}) and u (B, {model.n}), got {q.shape} and {u.shape}"
        )


def _check_finite(acc: Array) -> None:
    if not np.all(np.isfinite(acc)):
        raise ModelError(
            "mass matrix is not positive definite (a 3-DOF gimbal at its singular angle?)"
        )


def _generate(model: Model, locked: frozenset[int], loads: bool) -> tuple[str, int]:
    tr = _Trace(model, locked, loads)
    nudot, qd = tr.run()
    outputs = [*nudot, *qd]
    args = [f"q{i}" for i in range(model.nq)] + [f"u{i}" for i in range(model.n)]
    if loads:
        args += [f"T{i}_{c}" for i in range(model.nb) for c in range(3)]
        args += [f"F{i}_{c}" for i in range(model.nb) for c in range(3)]
        args += [f"Q{r}" for r in range(model.n)]
    return tr.tape.source("rhs", args, outputs), tr.tape.count(outputs)


_CACHE: weakref.WeakKeyDictionary[Model, dict[frozenset[int], CompiledModel]] = (
    weakref.WeakKeyDictionary()
)


def compile_model(model: Model, locked: Sequence[int] = ()) -> CompiledModel:
    """Generate (once per model and lock set; cached) the model's compiled equations.

    Parameters
    ----------
    model : Model
    locked : sequence of int
        Speed indices held at zero (their joint DOF is rigid; see :class:`kanedyn.Lock`).

    Raises
    ------
    ModelError
        When the model cannot be compiled (:func:`supports` gives the reason).
    """
    why = supports(model)
    if why is not None:
        raise ModelError(f"cannot compile this model: {why}")
    key = frozenset(int(r) for r in locked)
    per_model = _CACHE.setdefault(model, {})
    hit = per_model.get(key)
    if hit is not None:
        return hit
    source, n_ops = _generate(model, key, loads=False)
    source_loads, _ = _generate(model, key, loads=True)
    cm = CompiledModel(
        model=model,
        locked=key,
        source=source,
        n_ops=n_ops,
        source_loads=source_loads,
        scalar=codegen.build(source, "rhs", codegen.SCALAR_NAMESPACE),
        array=codegen.build(source, "rhs", codegen.ARRAY_NAMESPACE),
        scalar_loads=codegen.build(source_loads, "rhs", codegen.SCALAR_NAMESPACE),
    )
    per_model[key] = cm
    return cm
