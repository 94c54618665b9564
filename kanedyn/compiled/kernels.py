"""The traced kernels: one model's equations of motion recorded on a tape.

:func:`traced` (called by :func:`kanedyn.compiled.compile_model`) traces the articulated-body algorithm (ABA; Featherstone, *Rigid
Body Dynamics Algorithms*, 2008, Table 7.1) for one model on a :class:`kanedyn.compiled.tape.Tape`
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
joint coordinates. The dense engine (:mod:`kanedyn.dynamics.kane`) is its oracle; the tests hold
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

``Q`` holds the joint springs and dampers of :mod:`kanedyn.dynamics.loads` (``-k q - c q̇`` per
angle or slide, ``-c ω`` for a spherical joint).

**MSD** (``formulation="msd"``, :meth:`Trace.run_msd`): the speeds from the momentum
states by the same elimination at zero speed (``M ν = y - Ωᵀh``), then the momentum
rates ``ẏ_r = Q_r + s_rᵀ (f^c - v ×f h^c) + ṡ_rᵀ h^c`` from the subtree momenta ``h^c``
and external forces ``f^c`` in Go (docs/theory/compiled.md); a free root's states take
the total external wrench in N.

**Scope.** A spherical joint with a spring (``-J_r⁻ᵀ K φ``) and models with sympy
parameters are not compiled: :func:`supports` says why, and :func:`kanedyn.simulate`
then uses the dense engine. External loads enter the Kane kernel as per-body force and
torque inputs in N (:meth:`CompiledModel.rhs_with_loads`); for MSD, whose loads may
depend on the speeds, the speeds come first from :meth:`CompiledModel.rhs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.compiled.tape import TRACE, Scalar, Tape, Value
from kanedyn.model import Model
from kanedyn.model.batch import PARAM_FIELDS
from kanedyn.model.plan import Params, params_of
from kanedyn.spatial.charts import euler_axes, quat_dcm_form

__all__ = ["Step", "Trace", "Traced", "parameter_values", "rk4_step", "supports", "traced"]

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


def _body_inertia(mass: Scalar, inertia: Mat, c: Vec) -> Mat:
    """Spatial inertia about a frame's origin of a body with mass centre ``c`` and
    inertia ``inertia`` (about the mass centre, symmetric), both in that frame (see
    :func:`kanedyn.dynamics.kane.spatial_inertia`): ``[[I - m [c]×², m [c]×], [-m [c]×, m U]]``,
    with ``-[c]×² = |c|² U - c cᵀ``."""
    cc = _dot(c, c)
    mc = _scale(mass, c)
    out: Mat = [[0.0] * 6 for _ in range(6)]
    for i in range(3):
        for j in range(i, 3):
            shift = (cc if i == j else 0.0) - c[i] * c[j]
            out[i][j] = out[j][i] = inertia[i][j] + mass * shift
        out[i + 3][i + 3] = mass
    mcx = _skew(mc)
    for i in range(3):
        for j in range(3):
            out[i][j + 3] = out[j + 3][i] = mcx[i][j]
    return out


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
@attrs.frozen
class _Joint:
    """One joint's traced kinematics (Go coordinates)."""

    R: Mat  # R_Gi_Go
    cols: list[tuple[Vec, int]]  # free DOFs: (S column, speed index)
    dcols: list[Vec]  # rate of each column in Go (Ṡ)
    vJ: Vec
    cJ: Vec
    d: Vec  # slide displacement in Gi (Δ d)


@attrs.frozen
class _Body:
    """Joint k and its body in Go_k: transform (E = R_P_Go, r) from the inner frame P,
    spatial inertia about the joint point, mass centre, embedded momentum."""

    J: _Joint
    parent: int
    E: Mat
    r: Vec
    inertia: Mat
    com: Vec
    h: Vec
    has_h: bool


def _remainder(J: _Joint, vk: Vec) -> Vec:
    """``c_k = c_J + v_k ×ₘ v_J``: body k's acceleration at zero ``ν̇`` beyond its inner
    body's, the remainder terms (α_r, a_r) of Kane_NBody slides 20-22 in Go."""
    return _add(J.cJ, _cross_m(vk, J.vJ))


def supports(model: Model, params: Params | None = None) -> str | None:
    """``None`` if ``model`` (with the parameters ``params`` of a batch, if given) can be
    compiled, else the reason it cannot."""
    if model.is_symbolic:
        return "the model has symbolic parameters (use model.subs first)"
    if model.loops:
        return "the model has closed loops (kd.Loop); the dense engine runs them"
    lay = model.layout
    stiffness = lay.stiffness if params is None else np.asarray(params.stiffness)
    if lay.spherical.size and np.any(stiffness[..., lay.quat_u]):
        return "a spherical joint has a spring (-J_r^-T K phi is not compiled)"
    if any(j.rotor is not None for j in model.joints):
        return "a joint carries a geared rotor (kanedyn.dynamics.rotors is not compiled)"
    return None


# --------------------------------------------------------------------------- tracing
class Trace:
    """The ABA of one model on a tape; inputs q, u (and optionally loads)."""

    def __init__(self, model: Model, locked: frozenset[int], loads: bool,
                 params: Params | None = None, efforts: bool = False,
                 symbols: Sequence[Sequence[tuple[str, int]]] = ()):  # fmt: skip
        self.model = model
        lay = model.layout
        self.tape = tape = Tape()
        self.q: list[Scalar] = [tape.input(f"q{i}") for i in range(model.nq)]
        self.u: list[Scalar] = [tape.input(f"u{i}") for i in range(model.n)]
        nb = model.nb
        self.loads = loads
        if loads:
            self.T = [[tape.input(f"T{i}_{c}") for c in range(3)] for i in range(nb)]
            self.F = [[tape.input(f"F{i}_{c}") for c in range(3)] for i in range(nb)]
            self.Q = [tape.input(f"Q{r}") for r in range(model.n)]
        # efforts: generalized forces added to the springs and dampers (inputs tau*)
        self.tau = [tape.input(f"tau{r}") for r in range(model.n)] if efforts else None
        # parameters: constants, except the entries that vary across a batch (inputs)
        nominal = params_of(model)
        self.values, self.param_inputs = parameter_values(params or nominal, nominal)
        self.inputs: dict[tuple[str, int], Scalar] = {
            key: tape.input(f"p{i}") for i, key in enumerate(self.param_inputs)
        }
        # symbols: parameters made inputs d0, d1, ... (to differentiate with respect to),
        # each bound to one or more entries (a symmetric inertia's mirrored pair)
        for i, keys in enumerate(symbols):
            d = tape.input(f"d{i}")
            for key in keys:
                self.inputs[key] = d
        self.locked = locked
        # coordinates with normalized quaternions (as the dense engine normalizes them)
        self.qn = joints.normalize_quaternions(TRACE, lay, np.array(self.q, dtype=object))
        self.gimbal_row = {int(k): row for row, k in enumerate(lay.gimbal)}
        self.sph_row = {int(k): row for row, k in enumerate(lay.spherical)}

    def par(self, field: str, *index: int) -> Any:
        """Parameter ``field[index]`` as nested lists: a float where every member of a
        batch has the same value, a tape input where they differ."""
        value = self.values[field][index]
        if not self.inputs:
            return _const(value)
        flat0 = int(np.ravel_multi_index(index + (0,) * (value.ndim), self.values[field].shape))
        flat = np.arange(value.size).reshape(value.shape) + flat0
        table = self.inputs

        def build(v: Any, f: Any) -> Any:
            if np.ndim(v):
                return [build(a, b) for a, b in zip(v, f, strict=True)]
            return table.get((field, int(f)), float(v))

        return build(value, flat)

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
            pad = [0.0] * (3 - j.rot_dof)
            theta = np.array(
                [self.q[int(i)] for i in lay.q_index[k][: j.rot_dof]] + pad, dtype=object
            )
            R_, GammaT, Gamma_dot, Gds_ = joints.gimbal(
                TRACE, euler_axes(TRACE, lay.gimbal_e[row]), theta,
                np.array(sigma + pad, dtype=object), j.rot_dof)  # fmt: skip
            R = R_.tolist()
            gammas = GammaT[: j.rot_dof].tolist()
            dgammas = Gamma_dot.T[: j.rot_dof].tolist()
            Gds = Gds_.tolist()
        elif k in self.sph_row:
            R = quat_dcm_form(self.qn[lay.quat_q[self.sph_row[k]]]).tolist()
            gammas = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
            dgammas = [zero, zero, zero]
            Gds = zero
        else:
            R = _const(np.eye(3))
            gammas, dgammas, Gds = [], [], zero
        omega_J = zero
        for g, s in zip(gammas, sigma, strict=True):
            omega_J = _add(omega_J, _scale(s, g))
        Delta = lay.Delta[k]
        pad = [0.0] * (3 - j.trn_dof)
        d = joints.slide(TRACE.const(Delta), np.array([self.q[i] for i in trn_q] + pad)).tolist()
        v_lin = zero
        trn_cols = []
        for c, r in enumerate(trn_u):
            axis = _const(Delta[:, c])
            col = _mtv(R, axis)  # R_Gi_Goᵀ Δ_c
            trn_cols.append((col, r))
            v_lin = _add(v_lin, _scale(self.u[r], col))
        cols = [(g + zero, r) for g, r in zip(gammas, rot_u, strict=True) if r not in self.locked]
        dcols = [dg + zero for dg, r in zip(dgammas, rot_u, strict=True) if r not in self.locked]
        cols += [(zero + col, r) for col, r in trn_cols if r not in self.locked]
        dcols += [zero + _cross(col, omega_J) for col, r in trn_cols if r not in self.locked]
        vJ = omega_J + v_lin
        cJ = Gds + _scale(-1.0, _cross(omega_J, v_lin))
        return _Joint(R, cols, dcols, vJ, cJ, d)

    def generalized_forces(self) -> list[Scalar]:
        """``Q``: springs and dampers per speed; with loads, the input ``Q`` (which holds
        them, as :class:`kanedyn.dynamics.loads.AppliedLoads` does); plus the input
        efforts ``tau`` when traced with them."""
        model, lay = self.model, self.model.layout
        if self.loads:
            Q: list[Scalar] = list(self.Q)
        else:
            k = np.array([self.par("stiffness", r) for r in range(model.n)], dtype=object)
            c = np.array([self.par("damping", r) for r in range(model.n)], dtype=object)
            u = np.array(self.u, dtype=object)
            Q = joints.spring_damper(lay, k, c, np.array(self.q, dtype=object), u).tolist()
        if self.tau is not None:
            Q = [Qr + t for Qr, t in zip(Q, self.tau, strict=True)]
        return Q

    def geometry(self) -> list[_Body]:
        """Per joint: its traced kinematics at the current speeds ``self.u``, the
        transform from the inner frame, and the body's constants in Go_k."""
        model, lay = self.model, self.model.layout
        out: list[_Body] = []
        for k in range(model.nb):
            J = self.joint(k)
            p = int(lay.parent[k])
            R_Bi_Gi = self.par("R_Bi_Gi", k)
            if p < 0:
                R_P_Gi, r0 = R_Bi_Gi, self.par("inner_point", k)
            else:
                R_p = self.par("R_Go_Bo", p)
                R_P_Gi = _mm(R_p, R_Bi_Gi)
                r0 = _mv(R_p, _sub(self.par("inner_point", k), self.par("outer_point", p)))
            E = _mm(R_P_Gi, J.R)
            r = _add(r0, _mv(R_P_Gi, J.d))
            R_Go_Bo = self.par("R_Go_Bo", k)
            com = _mv(R_Go_Bo, _sub(self.par("com", k), self.par("outer_point", k)))
            I_c = _rotate_sym(R_Go_Bo, self.par("inertia", k))
            inertia = _body_inertia(self.par("mass", k), I_c, com)
            h = _mv(R_Go_Bo, self.par("h_embedded", k))
            has_h = any(isinstance(x, Value) or x != 0.0 for x in h)
            out.append(_Body(J, p, E, r, inertia, com, h, has_h))
        return out

    def velocities(self, geo: list[_Body]) -> list[Vec]:
        """Pass 1: spatial velocities ``v_k = X_k v_P + v_J`` in Go_k."""
        v: list[Vec] = []
        for b in geo:
            v.append(b.J.vJ if b.parent < 0 else
                     _add(_motion_to_child(b.E, b.r, v[b.parent]), b.J.vJ))  # fmt: skip
        return v

    def aba(self, geo: list[_Body], c: list[Vec], p: list[Vec], Q: list[Scalar],
            a_N: Vec) -> list[Scalar]:  # fmt: skip
        """Passes 2 and 3: ``ν̇`` with remainder accelerations ``c``, bias forces ``p``
        (Go_k), joint forces ``Q`` and the acceleration ``a_N`` of N (in N); the free
        speeds only, locked entries 0. With ``c = 0``, ``a_N = 0`` this solves
        ``M x = Q - Σ S_kᵀ (subtree sum of p)``."""
        model = self.model
        nb = model.nb
        IA = [[list(row) for row in b.inertia] for b in geo]
        pA = [list(x) for x in p]
        U: list[list[Vec]] = [[] for _ in range(nb)]
        Dk: list[Any] = [None] * nb
        uu: list[list[Scalar]] = [[] for _ in range(nb)]
        for k in reversed(range(nb)):
            b = geo[k]
            Ia, pa = IA[k], pA[k]
            cols = [col for col, _ in b.J.cols]
            Uk = [_sym_mv(Ia, s) for s in cols]
            uk = [Q[r] - _sdot(s, pa) for s, (_, r) in zip(cols, b.J.cols, strict=True)]
            D = [[_sdot(cols[a], Uk[bb]) for bb in range(len(cols))] for a in range(len(cols))]
            for a in range(len(cols)):
                for bb in range(a):
                    D[a][bb] = D[bb][a]
            U[k], uu[k], Dk[k] = Uk, uk, D
            if b.parent < 0:
                continue
            if cols:
                # W = U D⁻¹: solve D Wᵀ = Uᵀ for the 6 rows of U
                W = _solve_spd(D, [[Uk[a][i] for a in range(len(cols))] for i in range(6)])
                Ia2: Mat = [[0.0] * 6 for _ in range(6)]
                for i in range(6):
                    for jj in range(i, 6):
                        corr = sum((W[i][a] * Uk[a][jj] for a in range(len(cols))), 0.0)
                        Ia2[i][jj] = Ia2[jj][i] = Ia[i][jj] - corr
                Wu = [sum((W[i][a] * uk[a] for a in range(len(cols))), 0.0) for i in range(6)]
                pa2 = _add(_add(pa, _sym_mv(Ia2, c[k])), Wu)
            else:
                Ia2 = Ia
                pa2 = _add(pa, _sym_mv(Ia2, c[k]))
            Ip = _inertia_to_parent(b.E, b.r, Ia2)
            fp = _force_to_parent(b.E, b.r, pa2)
            P = IA[b.parent]
            for i in range(6):
                for jj in range(i, 6):
                    P[i][jj] = P[jj][i] = P[i][jj] + Ip[i][jj]
            pA[b.parent] = _add(pA[b.parent], fp)
        nudot: list[Scalar] = [0.0] * model.n
        acc: list[Vec] = []
        for k in range(nb):
            b = geo[k]
            ap = a_N if b.parent < 0 else acc[b.parent]
            a1 = _add(_motion_to_child(b.E, b.r, ap), c[k])
            if b.J.cols:
                rhs = [uu[k][a] - _sdot(U[k][a], a1) for a in range(len(b.J.cols))]
                zdd = _solve_spd(Dk[k], [rhs])[0]
                for (s, rr), z in zip(b.J.cols, zdd, strict=True):
                    nudot[rr] = z
                    a1 = _add(a1, _scale(z, s))
            acc.append(a1)
        return nudot

    def inverse_dynamics(self, geo: list[_Body], c: list[Vec], p: list[Vec], Q: list[Scalar],
                         a_N: Vec, nudot: list[Scalar]) -> list[Scalar]:  # fmt: skip
        """The residual of Kane's equations at the accelerations ``nudot``,
        ``S_kᵀ f_k - Q`` per free speed (zero at the ``ν̇`` of :meth:`aba`), by the
        recursive Newton-Euler algorithm in Go_k (Featherstone 2008, Table 5.1) on the
        terms of :meth:`terms`: ``a_k = X_k a_P + c_k + S_k ν̇_k``, ``f_k = I_k a_k +
        p_k``, then ``f_P += X_kᵀ f_k`` from the leaves. Its derivatives at fixed
        ``nudot`` give those of ``ν̇``: ``∂ν̇/∂x = -M⁻¹ ∂(S_kᵀ f_k - Q)/∂x`` (Carpentier
        and Mansard, RSS 2018)."""
        acc: list[Vec] = []
        f: list[Vec] = []
        for k, b in enumerate(geo):
            a = _add(_motion_to_child(b.E, b.r, a_N if b.parent < 0 else acc[b.parent]), c[k])
            for s, r in b.J.cols:
                a = _add(a, _scale(nudot[r], s))
            acc.append(a)
            f.append(_add(_sym_mv(b.inertia, a), p[k]))
        for k in reversed(range(len(geo))):
            b = geo[k]
            if b.parent >= 0:
                f[b.parent] = _add(f[b.parent], _force_to_parent(b.E, b.r, f[k]))
        out: list[Scalar] = [0.0] * self.model.n
        for k, b in enumerate(geo):
            for s, r in b.J.cols:
                out[r] = _sdot(s, f[k]) - Q[r]
        return out

    def _load_forces(self, geo: list[_Body]) -> list[Vec]:
        """The input loads T, F (N, at the mass centres) as spatial forces in Go_k."""
        R_N: list[Mat] = []
        out = []
        for k, b in enumerate(geo):
            RN = b.E if b.parent < 0 else _mm(R_N[b.parent], b.E)  # R_N_Go
            R_N.append(RN)
            F_go = _mtv(RN, self.F[k])
            n_go = _add(_mtv(RN, self.T[k]), _cross(b.com, F_go))
            out.append(n_go + F_go)
        return out

    def run(self) -> tuple[list[Scalar], list[Scalar]]:
        """Forward dynamics by ABA; returns (ν̇, q̇)."""
        geo, c, p, a_N = self.terms()
        return self.aba(geo, c, p, self.generalized_forces(), a_N), self.qdot()

    def terms(self) -> tuple[list[_Body], list[Vec], list[Vec], Vec]:
        """The geometry, remainder accelerations ``c``, bias forces ``p`` (Go_k) and the
        acceleration ``a_N`` of N in Kane's equations (:meth:`run`)."""
        geo = self.geometry()
        v = self.velocities(geo)
        c = [_remainder(b.J, vk) for b, vk in zip(geo, v, strict=True)]
        p = []
        for b, vk in zip(geo, v, strict=True):
            pk = _cross_f(vk, _sym_mv(b.inertia, vk))
            if b.has_h:
                pk = _add(pk[:3], _cross(vk[:3], b.h)) + pk[3:]
            p.append(pk)
        if self.loads:
            p = [_sub(pk, fk) for pk, fk in zip(p, self._load_forces(geo), strict=True)]
        # uniform gravity as an acceleration of N (with loads, it is in the input F)
        g = [0.0, 0.0, 0.0] if self.loads else self.par("gravity")
        a_N = [0.0, 0.0, 0.0] + [-x for x in g]
        return geo, c, p, a_N

    def run_msd(self) -> tuple[list[Scalar], list[Scalar], list[Scalar]]:
        """Momentum-state dynamics; returns (ẏ, q̇, ν) for the MSD states ``y`` (the
        inputs named ``u*``: see :mod:`kanedyn.dynamics.msd`).

        1. Speeds: ``M ν = y_gen - Ωᵀ h`` by ABA at zero speed (``c = 0``, ``a_N = 0``,
           bias ``(h, 0)``), where ``y_gen`` converts a momentum root's total ``H``,
           ``P`` (N) to its generalized momenta.
        2. Rates, per joint in Go_k, with ``h^c_k`` the spatial momentum of the subtree
           about the joint point and ``f^c_k`` its external (gravity) force:
           ``ẏ_r = Q_r + s_rᵀ (f^c_k - v_k ×f h^c_k) + ṡ_rᵀ h^c_k`` (``ṡ_r`` the rate of
           the column in Go: ``γ̇_j``, or ``-(Γσ) × R_Go_Gi Δ_j``); for a momentum
           root, the total external wrench in N.
        """
        from kanedyn.dynamics.msd import momentum_roots

        model, lay = self.model, self.model.layout
        n, nb = model.n, model.nb
        y = self.u
        roots = set(momentum_roots(model))
        self.u = [0.0] * n
        geo0 = self.geometry()
        y_gen: list[Scalar] = list(y)
        for k in roots:
            b = geo0[k]
            idx = [int(i) for i in lay.u_index[k]]
            H: list[Scalar] = [y[i] for i in idx[:3]]
            P: list[Scalar] = [y[i] for i in idx[3:]] or [0.0, 0.0, 0.0]
            for i, val in zip(idx[:3], _mtv(b.E, _sub(H, _cross(b.r, P))), strict=True):
                y_gen[i] = val  # R_N_Goᵀ (H - o × P)
            if len(idx) == 6:
                D = _mm(self.par("R_Bi_Gi", k), _const(lay.Delta[k]))  # R_N_Gi Δ
                for i, val in zip(idx[3:], _mtv(D, P), strict=True):
                    y_gen[i] = val
        zero6 = [0.0] * 6
        bias = [(b.h + [0.0, 0.0, 0.0]) if b.has_h else zero6 for b in geo0]
        nu = self.aba(geo0, [zero6] * nb, bias, y_gen, zero6)
        self.u = nu
        geo = self.geometry()
        v = self.velocities(geo)
        Q = self.generalized_forces()
        # with loads, gravity is in the input F (as in AppliedLoads)
        g = [0.0, 0.0, 0.0] if self.loads else self.par("gravity")
        # gravity in each Go_k, and the subtree momenta and external forces
        g_go: list[Vec] = []
        hc: list[Vec] = []
        fc: list[Vec] = []
        for b, vk in zip(geo, v, strict=True):
            gk = _mtv(b.E, g if b.parent < 0 else g_go[b.parent])
            g_go.append(gk)
            hk = _sym_mv(b.inertia, vk)
            if b.has_h:
                hk = _add(hk[:3], b.h) + hk[3:]
            hc.append(hk)
            m = b.inertia[3][3]
            F = _scale(m, gk)
            fc.append(_cross(b.com, F) + F)
        if self.loads:
            fc = [_add(f, fl) for f, fl in zip(fc, self._load_forces(geo), strict=True)]
        for k in reversed(range(nb)):
            b = geo[k]
            if b.parent >= 0:
                hc[b.parent] = _add(hc[b.parent], _force_to_parent(b.E, b.r, hc[k]))
                fc[b.parent] = _add(fc[b.parent], _force_to_parent(b.E, b.r, fc[k]))
        ydot: list[Scalar] = [0.0] * n
        for k, b in enumerate(geo):
            if k in roots:
                continue
            drive = _sub(fc[k], _cross_f(v[k], hc[k]))
            for (s, r), ds in zip(b.J.cols, b.J.dcols, strict=True):
                ydot[r] = Q[r] + _sdot(s, drive) + _sdot(ds, hc[k])
        for k in roots:
            b = geo[k]
            idx = [int(i) for i in lay.u_index[k]]
            n_go, f_go = fc[k][:3], fc[k][3:]
            n_go = _add(n_go, [Q[i] for i in idx[:3]])  # the root's own effort (Go)
            for s, r in b.J.cols[3:]:
                f_go = _add(f_go, _scale(Q[r], s[3:]))
            F_N = _mv(b.E, f_go)
            N_o = _mv(b.E, n_go)
            if len(idx) == 6:
                N_o = _add(N_o, _cross(b.r, F_N))  # about N's origin
                for i, val in zip(idx[3:], F_N, strict=True):
                    ydot[i] = val
            for i, val in zip(idx[:3], N_o, strict=True):
                ydot[i] = val
        return ydot, self.qdot(), list(nu)

    def qdot(self) -> list[Scalar]:
        """Kinematic equations (:func:`kanedyn.joints.qdot`) at the normalized
        coordinates."""
        u = np.array(self.u, dtype=object)
        return joints.qdot(self.model.layout, self.qn, u).tolist()


def parameter_values(
    params: Params, nominal: Params
) -> tuple[dict[str, Array], list[tuple[str, int]]]:
    """Per field, the values of member 0 (or the unbatched values); and the (field, flat
    index) of every entry that differs between members of a batch, in a fixed order.
    ``nominal`` (the model's own, unbatched parameters) gives each field's core shape."""
    values: dict[str, Array] = {}
    varying: list[tuple[str, int]] = []
    for f in PARAM_FIELDS:
        field = f.name
        arr = np.asarray(getattr(params, field), dtype=float)
        core = np.ndim(getattr(nominal, field))
        if arr.ndim > core:
            flat = arr.reshape((-1,) + arr.shape[arr.ndim - core :])
            values[field] = flat[0]
            differs = np.any(flat != flat[0], axis=0).ravel()
            varying += [(field, int(i)) for i in np.flatnonzero(differs)]
        else:
            values[field] = arr
    return values, varying


@attrs.frozen(eq=False)
class Traced:
    """One kernel on its tape: the ``outputs`` (``[ν̇ | q̇]`` for Kane, ``[ẏ | q̇ | ν]``
    for MSD) as functions of the inputs named ``args``, in order: ``q0 ...``, ``u0 ...``,
    with loads ``T*``, ``F*``, ``Q*``, with efforts ``tau*``, then the batch's varying
    parameters ``d0 ...`` to differentiate with respect to, then the batch's varying
    parameters ``p0 ...`` (``param_inputs`` says which)."""

    tape: Tape
    outputs: list[Scalar]
    args: list[str]
    param_inputs: list[tuple[str, int]]
    #: Jacobians computed in vector mode (:class:`kanedyn.compiled.sweep.Sweep`), written
    #: to the outputs after ``outputs`` (:func:`kanedyn.compiled.derivatives.unrolled`
    #: makes them scalar outputs, for the emitters without vector code)
    sweeps: tuple[Any, ...] = ()

    @property
    def n_out(self) -> int:
        """The number of outputs, those of the sweeps included."""
        return max([len(self.outputs), *(s.extent for s in self.sweeps)])

    @property
    def inputs(self) -> list[Value]:
        """The tape's input values, in the order of ``args``."""
        by_name = {a: i for i, (op, a, _) in enumerate(self.tape.nodes) if op == "in"}
        return [Value(self.tape, by_name[name]) for name in self.args]


def traced(model: Model, locked: frozenset[int], loads: bool, msd: bool,
           params: Params | None = None, efforts: bool = False,
           symbols: Sequence[Sequence[tuple[str, int]]] = ()) -> Traced:  # fmt: skip
    """Trace Kane's equations (ABA: :meth:`Trace.run`), or with ``msd`` the
    momentum-state rates (:meth:`Trace.run_msd`), of ``model`` with the speeds ``locked``
    held at zero; with ``loads`` the per-body loads are inputs, with ``efforts``
    generalized forces added to the joint springs; with ``params`` (a batch's) the
    entries that differ between members are inputs; ``symbols`` (groups of (Params
    field, flat index)) are parameter inputs ``d0, d1, ...`` after the efforts."""
    tr = Trace(model, locked, loads, params, efforts, symbols)
    if msd:
        ydot, qd, nu = tr.run_msd()
        outputs = [*ydot, *qd, *nu]
    else:
        nudot, qd = tr.run()
        outputs = [*nudot, *qd]
    args = [f"q{i}" for i in range(model.nq)] + [f"u{i}" for i in range(model.n)]
    if loads:
        args += [f"T{i}_{c}" for i in range(model.nb) for c in range(3)]
        args += [f"F{i}_{c}" for i in range(model.nb) for c in range(3)]
        args += [f"Q{r}" for r in range(model.n)]
    if efforts:
        args += [f"tau{r}" for r in range(model.n)]
    args += [f"d{i}" for i in range(len(symbols))]
    args += [f"p{i}" for i in range(len(tr.param_inputs))]
    return Traced(tr.tape, outputs, args, tr.param_inputs)


@attrs.frozen(eq=False)
class Step:
    """The fixed-step loop's arithmetic on one tape, for the emitters' RK4 loops: the
    stage argument ``stage = x + a k`` (inputs ``x``, ``a``, ``k``), the update
    ``update`` (inputs ``x``, ``h6``, ``k1`` ... ``k4``) of
    :data:`kanedyn.simulation.steppers.ARRAYS`, and ``normalized`` (4): a quaternion
    ``q0 ... q3`` scaled to unit length (:func:`kanedyn.spatial.charts.quat_normalize`,
    as :func:`kanedyn.joints.normalize_quaternions` does after every step)."""

    tape: Tape
    stage: Scalar
    update: Scalar
    normalized: list[Scalar]


def rk4_step() -> Step:
    """The RK4 step's scalar arithmetic traced once (:class:`Step`): the emitters write
    these operations, so the native and C loops do what ``rk4_step`` does."""
    from kanedyn.simulation.steppers import ARRAYS  # the step is written once, there
    from kanedyn.spatial.charts import quat_normalize

    tape = Tape()
    x, a, k = tape.input("x"), tape.input("a"), tape.input("k")
    stage = ARRAYS.stage(x, a, k)
    h6 = tape.input("h6")
    ks = [tape.input(f"k{i}") for i in range(1, 5)]
    update = ARRAYS.update(x, h6, *ks)
    q = np.array([tape.input(f"q{i}") for i in range(4)], dtype=object)
    normalized = list(quat_normalize(TRACE, q))
    return Step(tape, stage, update, normalized)
