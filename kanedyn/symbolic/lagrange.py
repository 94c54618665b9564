"""Lagrange's equations for a joint tree, in the closed form of the seed's serial-chain notes.

This is an oracle for the Kane path that shares none of its kinematics: body attitudes and
mass-centre positions are built here in sympy, the link Jacobians come from
differentiating them, and the equations of motion come from the kinetic and potential
energies, not from partial velocities and generalized inertia forces.

With the generalized coordinates ``q`` (gimbal angles and slide displacements) and the
speeds ``q̇`` (their rates), each body i has the link Jacobians (seed 000, eqs. 2-2 to 2-4)

.. math::

    v_{ci} = J_L^{(i)} \\dot q, \\qquad \\omega_i = J_A^{(i)} \\dot q, \\qquad
    J_L^{(i)} = \\frac{\\partial r_{ci}}{\\partial q}, \\qquad
    J_{A,j}^{(i)} = \\begin{cases} b_j & \\text{rotational coordinate } j
        \\text{ on the path of body } i \\\\ 0 & \\text{otherwise} \\end{cases}

with ``b_j`` the axis of coordinate j in N. The kinetic energy is ``T = ½ q̇ᵀ H q̇`` with
(eqs. 2-5 to 2-8)

.. math::

    H = \\sum_i m_i J_L^{(i)T} J_L^{(i)} + J_A^{(i)T} I_i J_A^{(i)}, \\qquad
    I_i = R_i \\bar I_i R_i^T

and Lagrange's equations are (eqs. 2-9 to 2-11)

.. math::

    \\sum_j H_{ij} \\ddot q_j + \\sum_{j,k} h_{ijk} \\dot q_j \\dot q_k + G_i = Q_i, \\qquad
    h_{ijk} = \\frac{\\partial H_{ij}}{\\partial q_k}
        - \\frac12 \\frac{\\partial H_{jk}}{\\partial q_i}, \\qquad
    G_i = \\frac{\\partial U}{\\partial q_i}, \\quad U = -\\sum_i m_i\\, g \\cdot r_{ci}

where ``g`` is the model's gravity (the acceleration, pointing down; the seed's ``g``
points the other way, hence the minus sign) and ``Q = τ + Jᵀ F_ext`` (eq. 2-10) holds the
joint springs and dampers ``-(k q + k₂ q² + k₃ q³) - (c q̇ + c₂ q̇|q̇| + c₃ q̇³)``
(:func:`kanedyn.joints.spring_damper`), joint torques and body forces.

A flexible body (``kd.Body(..., modes=...)``) adds its modal coordinates ``η`` (speeds
``ξ = η̇``) after the joints', the kinetic energy of its elastic motion ``½ wᵀ ΔM(η) w``
(``w = (ω, v₀, ξ)`` in body axes, ``ΔM`` = :func:`kanedyn.spatial.modal.modal_inertia`)
to ``T``, its strain and displaced-mass gravity energy ``½ηᵀK_Ψη - (Rᵀg)·c_f(η)`` to
``U`` and the modal damping ``-C_Ψξ`` to ``Q`` (:func:`kanedyn.symbolic.flex.lagrange_flex`).
A joint at a node of its flexible inner body (``Joint.inner_node``) is placed by the
node frame (``R_Bi_Gi → C R_Bi_Gi``, point ``d + C(inner_point - r_n)``,
:func:`kanedyn.symbolic.flex.exact_node_frame`), and its ``J_A`` gains the columns of
the modal coordinates ``R_N_Bi vee(∂C/∂η_p Cᵀ)``: the angular velocity is the rate of
the attitude, not Kane's partials. At a node of the flexible outer body
(``Joint.outer_node``) the outer body is placed by the node frame the other way
(``R_N_Bo = R_N_Go R_Go_Bo Cᵀ``) and its ``J_A`` loses ``R_N_Bo vee(∂C/∂η_p Cᵀ)``.

The Coriolis and centrifugal terms are formed, not from the Christoffel symbols, but
by the product rule on the body velocities (:func:`_coriolis`),
``C = Σ_jk h_ijk q̇_j q̇_k = Ḣ q̇ - ½ ∂(q̇ᵀ H q̇)/∂q``, with the entries of the link
Jacobians, inertia matrices, their rates and the velocities as named intermediates
(``LagrangeEquations.intermediates``, ``compact_C``): each row then has O(bodies · n)
terms, where the Christoffel sum has n² products of large ``∂H/∂q`` entries.

This form needs speeds that are coordinate rates. Hinges, gimbals (1-3 Euler angles) and
slides have them. A spherical joint (and so a free-floating root) is described here by a
**chart**: the three angles of an Euler sequence the user names (default 3-2-1, yaw,
pitch, roll), which turn Go relative to Gi as a 3-DOF gimbal would, with the angle rates
as speeds. The chart is singular where its middle angle is ±π/2 (asymmetric sequences
such as 321) or 0, π (symmetric ones such as 313): there ``H`` is singular. Kane's
spherical speeds are Go's angular velocity ``ω = Γ(θ) θ̇``, so
:func:`~kanedyn.symbolic.compare` maps them onto the chart rates
(:mod:`kanedyn.symbolic.matching`). Springs and dampers on spherical joints are not
supported here.

References
----------
G. Schaffner, *Musculoskeletal Dynamics* lecture notes (seed 000), eqs. 2-1 to 2-11;
H. Asada and J.-J. E. Slotine, *Robot Analysis and Control*, Wiley, 1986, ch. 6.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sm

from kanedyn import joints
from kanedyn.dynamics.rotors import rotor_specs
from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.plan import node_joints, outer_node_joints, params_of
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.charts import axis_rotations, euler_axes
from kanedyn.spatial.rotation import parse_sequence
from kanedyn.symbolic.arithmetic import SYMPY, exact, exact_array, exact_rotation, matrix
from kanedyn.symbolic.components import directional
from kanedyn.symbolic.flex import exact_node_frame, lagrange_flex, modal_symbols
from kanedyn.symbolic.kane import central_args
from kanedyn.symbolic.loads import read_loads
from kanedyn.symbolic.problem import solve_symmetric

__all__ = ["LagrangeEquations", "generalized_symbols", "lagrange"]


# --------------------------------------------------------------------------- symbols
def generalized_symbols(model: Model) -> tuple[sm.Matrix, sm.Matrix]:
    """The coordinate and speed symbols of a gimbal/slide tree, in the model's order.

    Coordinates are ``q_<joint>_<i>`` (gimbal angle i) and ``d_<joint>_<i>`` (slide i);
    speeds are their rates ``u_<joint>_<i>`` and ``s_<joint>_<i>``. Both follow the
    model's partition ``[all rotational | all translational]``, joints in model order,
    so index r of ``u`` is index r of ``[u | s]`` in the numeric engine. The modal
    coordinates ``eta_<body>_<k>`` and speeds ``xi_<body>_<k>`` of flexible bodies come
    last (:func:`kanedyn.symbolic.flex.modal_symbols`), as in the numeric state.

    Parameters
    ----------
    model : Model
        Any tree; a spherical joint's coordinates are its chart angles
        ``q_<joint>_0..2`` and its speeds their rates ``qd_<joint>_0..2``.

    Returns
    -------
    q, u : sympy.Matrix, shape (n, 1)

    Examples
    --------
    >>> import kanedyn as kd
    >>> q, u = generalized_symbols(kd.examples.double_pendulum())
    >>> list(q), list(u)  # doctest: +SKIP
    ([q_j0_0, q_j1_0], [u_j0_0, u_j1_0])
    """
    q_rot, q_trn, u_rot, u_trn = [], [], [], []
    for j in model.joints:
        rate = "qd" if j.rot_type == "spherical" else "u"  # chart rates are not kane's ω
        q_rot += [sm.Symbol(f"q_{j.name}_{i}", real=True) for i in range(j.rot_dof)]
        u_rot += [sm.Symbol(f"{rate}_{j.name}_{i}", real=True) for i in range(j.rot_dof)]
        q_trn += [sm.Symbol(f"d_{j.name}_{i}", real=True) for i in range(j.trn_dof)]
        u_trn += [sm.Symbol(f"s_{j.name}_{i}", real=True) for i in range(j.trn_dof)]
    eta, xi, _ = modal_symbols(model)  # flexible bodies: after the joints', as in Kane
    return sm.Matrix(q_rot + q_trn + eta), sm.Matrix(u_rot + u_trn + xi)


class _Partials:
    """``∂A/∂x`` entry by entry, by forward-mode differentiation
    (:func:`kanedyn.symbolic.components.directional`) with one memo per symbol x, so a
    subexpression shared by several entries, bodies or matrices is differentiated once
    (``Matrix.diff`` and ``jacobian`` go through sympy's ``Derivative`` for every node)."""

    def __init__(self) -> None:
        self._memo: dict = {}

    def __call__(self, A: Any, x: sm.Symbol) -> Any:
        memo = self._memo.setdefault(x, {})
        if isinstance(A, sm.MatrixBase):
            return sm.Matrix(A.rows, A.cols, [directional(e, {x: sm.S.One}, memo) for e in A])
        return directional(A, {x: sm.S.One}, memo)

    def jacobian(self, r: sm.Matrix, q: Sequence) -> sm.Matrix:
        """``∂r/∂q`` of a column ``r``, shape (len(r), len(q))."""
        cols = [self(r, x) for x in q]
        return sm.Matrix.hstack(*cols) if cols else sm.zeros(r.rows, 0)


def _inertia_N(R: Sequence, I_B: Sequence) -> list[sm.Matrix]:
    """``I_N = R Ī Rᵀ`` of each body (eq. 2-8)."""
    return [R_i * I_i * R_i.T for R_i, I_i in zip(R, I_B, strict=True)]


def _inertia_N_rate(dR: sm.Matrix, R: sm.Matrix, I_B: sm.Matrix) -> sm.Matrix:
    """``∂I_N/∂q_k = ∂R/∂q_k Ī Rᵀ + (…)ᵀ`` from ``dR = ∂R/∂q_k`` (``I_N = R Ī Rᵀ``)."""
    half = dR * I_B * R.T
    return half + half.T


def _inertia_matrix_rate(
    qk: sm.Symbol,
    mass: Sequence,
    J_L: Sequence,
    J_A: Sequence,
    R: Sequence,
    I_B: Sequence,
    I_N: Sequence,
    partial: _Partials,
) -> sm.Matrix:
    """``∂H/∂q_k`` of ``H = Σ m J_Lᵀ J_L + J_Aᵀ R I Rᵀ J_A`` (eq. 2-7) by the product rule,
    differentiating only the factors (positions, axes, attitudes), not the large ``H``;
    ``I_N`` is :func:`_inertia_N` of ``R`` and ``I_B``."""
    n = J_L[0].cols
    out = sm.zeros(n, n)
    for i in range(len(mass)):
        dJL, dJA, dR = partial(J_L[i], qk), partial(J_A[i], qk), partial(R[i], qk)
        dI_N = _inertia_N_rate(dR, R[i], I_B[i])
        lin = dJL.T * J_L[i]
        ang = dJA.T * I_N[i] * J_A[i]
        out += mass[i] * (lin + lin.T) + ang + ang.T + J_A[i].T * dI_N * J_A[i]
    return out


def _coriolis(
    q: sm.Matrix,
    u: sm.Matrix,
    mass: list,
    J_L: list,
    J_A: list,
    R: list,
    I_B: list,
    I_N: list,
    partial: _Partials,
) -> tuple[list[tuple[sm.Dummy, sm.Expr]], sm.Matrix]:
    """``C = Ḣ q̇ - ½ ∂(q̇ᵀ H q̇)/∂q`` (the Christoffel terms of eq. 2-11, summed) by the
    product rule on the body velocities, as short expressions in named intermediates.

    With ``v_i = J_L q̇``, ``ω_i = J_A q̇`` and ``İ = Σ_k ∂I_N/∂q_k q̇_k``,

    .. math::

        \\dot H \\dot q = \\sum_i m_i (\\dot J_L^T v_i + J_L^T \\dot J_L \\dot q)
            + \\dot J_A^T I_N \\omega_i + J_A^T (\\dot I_N \\omega_i
            + I_N \\dot J_A \\dot q), \\qquad
        \\frac{\\partial (\\dot q^T H \\dot q)}{\\partial q_k} = \\sum_i
            2 m_i v_i \\cdot \\frac{\\partial J_L}{\\partial q_k} \\dot q
            + 2 I_N \\omega_i \\cdot \\frac{\\partial J_A}{\\partial q_k} \\dot q
            + \\omega_i^T \\frac{\\partial I_N}{\\partial q_k} \\omega_i .

    Every entry of ``J_L``, ``J_A``, ``I_N``, their rates and the velocities is a named
    intermediate, so each row of ``C`` has O(bodies · n) terms instead of the n² products
    of large ``∂H/∂q`` entries; ``∂I_N/∂q_k = ∂R/∂q_k Ī Rᵀ + (…)ᵀ`` (``I_N = R Ī Rᵀ``).
    ``I_N`` is :func:`_inertia_N` of ``R`` and ``I_B``. Returns the definitions (in
    order) and ``C`` in them.
    """
    from kanedyn.symbolic.intermediates import Intermediates

    t = Intermediates()
    n = len(q)
    Hd_u = [sm.Integer(0)] * n  # Ḣ q̇
    dT = [sm.Integer(0)] * n  # ∂(q̇ᵀ H q̇)/∂q
    ul = list(u)

    def lin(A: sm.Matrix, x: list, label: str) -> list:
        return [t.name(sm.Add(*[A[a, c] * x[c] for c in range(A.cols)]), f"{label}{a}")
                for a in range(A.rows)]  # fmt: skip

    def rate(dA: list[sm.Matrix], label: str) -> sm.Matrix:
        """Σ_k ∂A/∂q_k q̇_k from the ``dA[k] = ∂A/∂q_k``, entry by entry, named."""
        out = sm.zeros(*dA[0].shape)
        for a in range(out.rows):
            for c in range(out.cols):
                e = sm.Add(*[d[a, c] * uk for d, uk in zip(dA, ul, strict=True)])
                out[a, c] = t.name(e, f"{label}{a}{c}_")
        return out

    for i in range(len(mass)):
        m = mass[i]
        JL = J_L[i].applyfunc(lambda e, i=i: t.name(e, f"JL{i}_"))
        JA = J_A[i].applyfunc(lambda e, i=i: t.name(e, f"JA{i}_"))
        IN = I_N[i].applyfunc(lambda e, i=i: t.name(e, f"IN{i}_"))
        v, w = lin(JL, ul, f"v{i}_"), lin(JA, ul, f"w{i}_")
        Iw = lin(IN, w, f"Iw{i}_")
        free = J_L[i].free_symbols | J_A[i].free_symbols | R[i].free_symbols
        zero = (sm.zeros(3, n), sm.zeros(3, n), sm.zeros(3, 3))
        d = []
        for qk in q:
            if qk not in free:
                d.append(zero)
                continue
            dI = _inertia_N_rate(partial(R[i], qk), R[i], I_B[i])
            d.append((partial(J_L[i], qk), partial(J_A[i], qk), dI))
        JLd, JAd, INd = (rate([x[c] for x in d], f"{lab}{i}_")
                         for c, lab in enumerate(("JLd", "JAd", "INd")))  # fmt: skip
        aL, aA = lin(JLd, ul, f"aL{i}_"), lin(JAd, ul, f"aA{i}_")
        rot = [t.name(x + y, f"rot{i}_{a}") for a, (x, y) in
               enumerate(zip(lin(INd, w, f"Idw{i}_"), lin(IN, aA, f"IaA{i}_"), strict=True))]  # fmt: skip
        for r in range(n):
            Hd_u[r] += sm.Add(
                *[m * (JLd[a, r] * v[a] + JL[a, r] * aL[a]) for a in range(3)],
                *[JAd[a, r] * Iw[a] + JA[a, r] * rot[a] for a in range(3)],
            )
        for k in range(n):
            dJL, dJA, dIN = d[k]
            terms = []
            if any(e != 0 for e in dJL):
                terms += [
                    2 * m * x * y for x, y in zip(v, lin(dJL, ul, f"dv{i}_{k}_"), strict=True)
                ]
            if any(e != 0 for e in dJA):
                terms += [2 * x * y for x, y in zip(Iw, lin(dJA, ul, f"dw{i}_{k}_"), strict=True)]
            if any(e != 0 for e in dIN):
                dINw = lin(dIN, w, f"dIw{i}_{k}_")
                terms += [x * y for x, y in zip(w, dINw, strict=True)]
            dT[k] += sm.Add(*terms)
    C = sm.Matrix([Hd_u[r] - dT[r] / 2 for r in range(n)])
    return t.defs, C


def _charts(model: Model, chart: str | Mapping[str, str]) -> dict[str, str]:
    """The Euler sequence of each spherical joint (checked), by joint name."""
    out = {}
    for j in model.joints:
        if j.rot_type != "spherical":
            continue
        seq = chart if isinstance(chart, str) else chart.get(j.name, "321")
        try:
            parse_sequence(seq)
        except ModelError as exc:
            raise ModelError(f"lagrange: chart of joint {j.name!r}: {exc}") from None
        if any(
            x != 0
            for field in (j.stiffness[:3], j.stiffness_poly[:3], j.damping[:3], j.damping_poly[:3])
            for x in np.asarray(field, dtype=object).ravel()
        ):
            raise ModelError(
                f"lagrange: spherical joint {j.name!r} has a spring or damper, whose "
                "rotation-vector potential is 0/0 at zero rotation in closed form; its "
                "numeric engines take it (kd.simulate, kd.linearize)"
            )
        out[j.name] = str(seq)
    return out


def _matrix(x: Any) -> sm.Matrix:
    """A model constant as an exact sympy Matrix (a column for a vector)."""
    return matrix(exact_array(x))


# --------------------------------------------------------------------------- result
@attrs.frozen(eq=False)
class LagrangeEquations:
    """Lagrange's equations ``H q̈ + C(q, q̇) + G = Q`` of a joint tree (seed 000, eq. 2-11).

    Attributes
    ----------
    model : Model
    q : sympy.Matrix, (n, 1)
        Generalized coordinates (``q_<joint>_<i>`` angles, ``d_<joint>_<i>`` slides).
    u : sympy.Matrix, (n, 1)
        Generalized speeds ``u = q̇`` (``u_<joint>_<i>``, ``s_<joint>_<i>``), named so that
        they line up with :func:`kanedyn.symbolic.kane`.
    R : tuple of sympy.Matrix (3, 3)
        Body attitudes ``R_N_B``, model order.
    r : tuple of sympy.Matrix (3, 1)
        Mass-centre positions in N.
    J_L, J_A : tuple of sympy.Matrix (3, n)
        Link Jacobians of each body (eqs. 2-2 to 2-4): ``v_ci = J_L q̇``, ``ω_i = J_A q̇``.
    H : sympy.Matrix, (n, n)
        Inertia matrix (eq. 2-7), ``T = ½ q̇ᵀ H q̇``.
    intermediates : tuple of (sympy.Dummy, sympy.Expr)
        Named intermediates of the compact forcing, in definition order: the entries of
        ``J_L``, ``J_A``, ``I_N``, their rates and the body velocities
        (:func:`_coriolis`).
    compact_C : sympy.ImmutableMatrix, (n, 1)
        ``C = Ḣ q̇ - ½ ∂(q̇ᵀ H q̇)/∂q`` in those names; ``compact_forcing`` is
        ``Q - G - compact_C``, what :func:`~kanedyn.symbolic.compare` evaluates for a
        large system.
    G : sympy.Matrix, (n, 1)
        Gravity terms ``G_i = ∂U/∂q_i`` (eq. 2-9).
    charts : dict
        The Euler sequence of each spherical joint, by name.
    Q : sympy.Matrix, (n, 1)
        Generalized forces (eq. 2-10): springs, dampers, joint torques, body loads and the
        gyroscopic torque of embedded rotors.
    kinetic_energy, potential_energy : sympy.Expr
        ``T = ½ q̇ᵀ H q̇`` and ``U`` (gravity only; springs are in ``Q``).

    The Christoffel symbols ``h_ijk`` (:attr:`christoffel`, built on request; the
    equations use the compact ``C``), the centrifugal and Coriolis terms ``C`` written
    out (:attr:`C`) and the explicit accelerations (:meth:`solve`) are properties and
    methods below.
    """

    model: Model
    q: sm.Matrix
    u: sm.Matrix
    R: tuple[sm.Matrix, ...]
    r: tuple[sm.Matrix, ...]
    J_L: tuple[sm.Matrix, ...]
    J_A: tuple[sm.Matrix, ...]
    H: sm.Matrix
    G: sm.Matrix
    Q: sm.Matrix
    potential_energy: sm.Expr
    charts: dict = attrs.field(factory=dict)
    intermediates: tuple[tuple[sm.Dummy, sm.Expr], ...] = ()
    compact_C: sm.ImmutableMatrix = attrs.field(factory=lambda: sm.ImmutableMatrix([]))
    _cache: dict = attrs.field(factory=dict, init=False, repr=False)

    @property
    def christoffel(self) -> sm.Array:
        """``h_ijk = ∂H_ij/∂q_k - ½ ∂H_jk/∂q_i`` (eq. 2-11), sympy.Array (n, n, n), with
        ``∂H/∂q_k`` by the product rule on the factors of ``H``
        (:func:`_inertia_matrix_rate`); built on request (the equations use the compact
        ``C``)."""
        pa = params_of(self.model)
        mass = [exact(m) for m in pa.mass]
        I_B = [_matrix(pa.inertia[i]) for i in range(self.model.nb)]
        I_N = _inertia_N(self.R, I_B)
        partial = _Partials()
        dH = [_inertia_matrix_rate(qk, mass, self.J_L, self.J_A, self.R, I_B, I_N, partial)
              for qk in self.q]  # fmt: skip
        if rotor_specs(self.model) or self.model.nf:  # terms in H only: differentiate it
            dH = [self.H.diff(qk) for qk in self.q]
        n = len(self.q)
        h = sm.MutableDenseNDimArray.zeros(n, n, n)
        for a in range(n):
            for b in range(n):
                for c in range(n):
                    h[a, b, c] = dH[c][a, b] - dH[a][b, c] / 2
        return sm.ImmutableDenseNDimArray(h)

    @property
    def C(self) -> sm.Matrix:
        """The centrifugal and Coriolis terms (n, 1),
        ``C = Ḣ q̇ - ½ ∂(q̇ᵀ H q̇)/∂q = Σ_jk h_ijk q̇_j q̇_k``, written out (the compact
        form's names substituted back, in order; formed once and kept)."""
        if "C" not in self._cache:
            self._cache["C"] = sm.ImmutableMatrix(self.explicit(self.compact_C))
        return sm.Matrix(self._cache["C"])

    @property
    def compact_forcing(self) -> sm.Matrix:
        """``Q - G - C`` with ``C`` in the named intermediates."""
        return self.Q - self.G - self.compact_C

    def explicit(self, expr: Any) -> Any:
        """``expr`` in the intermediates written in q, q̇ and the parameters."""
        values: dict = {}
        for d, e in self.intermediates:
            values[d] = e.xreplace(values)
        return expr.xreplace(values)

    @property
    def mass_matrix(self) -> sm.Matrix:
        """``H``: the left side of ``mass_matrix · d/dt(u) = forcing``."""
        return self.H

    @property
    def forcing(self) -> sm.Matrix:
        """``Q - G - C``: the right side of ``mass_matrix · d/dt(u) = forcing``."""
        return self.Q - self.G - self.C

    def solve(self) -> sm.Matrix:
        """The explicit accelerations ``q̈ = H⁻¹ (Q - G - C)``, shape (n, 1), in the
        order of ``q``.

        ``H`` is symmetric positive definite (the matrix of the kinetic energy), so the
        solve is an ``L D Lᵀ`` factorization without pivoting
        (:func:`kanedyn.symbolic.problem.solve_symmetric`), whose pivots vanish only
        where ``H`` is singular (a chart's singularity, for a spherical joint). Nothing
        is expanded or simplified; the result is formed once and kept.
        """
        if "solve" not in self._cache:
            X = solve_symmetric(self.H, self.forcing, what="lagrange: the inertia matrix H")
            self._cache["solve"] = sm.ImmutableMatrix(X)
        return sm.Matrix(self._cache["solve"])

    @property
    def kinetic_energy(self) -> sm.Expr:
        """``T = ½ q̇ᵀ H q̇`` (eq. 2-6)."""
        return (self.u.T * self.H * self.u)[0, 0] / 2

    @property
    def parameters(self) -> tuple[sm.Symbol, ...]:
        """The model's symbols (masses, lengths, ...), sorted by name."""
        free = set().union(*(e.free_symbols for e in (*self.H, *self.forcing)))
        return tuple(sorted(free - set(self.q) - set(self.u), key=str))

    def __repr__(self) -> str:
        n = len(self.q)
        return f"LagrangeEquations(n={n}, q={list(self.q)}, parameters={list(self.parameters)})"


# --------------------------------------------------------------------------- derivation
def lagrange(
    model: Model,
    *,
    joint_torques: Mapping[str, Sequence[Any]] | None = None,
    body_forces: Mapping[str, Sequence[Any]] | None = None,
    body_torques: Mapping[str, Sequence[Any]] | None = None,
    chart: str | Mapping[str, str] = "321",
    simplify: bool = False,
) -> LagrangeEquations:
    """Lagrange's equations of motion of a gimbal/slide tree (seed 000, eqs. 2-1 to 2-11).

    The body attitudes and mass-centre positions are built in sympy along the joint chain
    ``Bi → Gi → slides along the Gi axes → gimbal R_i1(θ1) R_i2(θ2) R_i3(θ3) → Go → Bo``;
    then

    .. math::

        J_L^{(i)} = \\partial r_{ci} / \\partial q, \\qquad
        H = \\sum_i m_i J_L^{(i)T} J_L^{(i)} + J_A^{(i)T} R_i \\bar I_i R_i^T J_A^{(i)}
        \\quad (2\\text{-}7, 2\\text{-}8)

    .. math::

        h_{ijk} = \\frac{\\partial H_{ij}}{\\partial q_k}
            - \\frac12 \\frac{\\partial H_{jk}}{\\partial q_i}, \\qquad
        G_i = -\\sum_j m_j\\, g^T J_{L,i}^{(j)}, \\qquad
        Q = \\tau - K q - C \\dot q + J^T F_{ext} \\quad (2\\text{-}9 \\ldots 2\\text{-}11)

    and ``mass_matrix = H``, ``forcing = Q - G - Σ_jk h_ijk q̇_j q̇_k``, so that
    ``mass_matrix · q̈ = forcing`` is directly comparable with Kane's
    ``M ν̇ = f`` (:func:`kanedyn.symbolic.compare`).

    Parameters
    ----------
    model : Model
        Numeric or symbolic (sympy parameters), any tree; spherical joints (free roots)
        through ``chart``.
    joint_torques : mapping joint name -> sequence, optional
        Actuator efforts τ on each DOF of the joint (rotational first), as in
        :class:`kanedyn.JointLoad`; may be sympy expressions.
    body_forces : mapping body name -> F or (F, point), optional
        Force in N components at the mass centre, or at ``point`` (body axes, from the
        body-frame origin), entering as ``J_pᵀ F`` with ``J_p`` the Jacobian of the
        application point (eq. 2-10's ``Jᵀ F_ext``).
    body_torques : mapping body name -> (3,), optional
        Pure torque, N components (``J_Aᵀ T``).

        Load values may be functions of time (inputs); see :mod:`kanedyn.symbolic.loads`.
    chart : str or mapping joint name -> str
        The Euler sequence of each spherical joint's angles (default ``"321"``): the
        coordinates ``q_<joint>_0..2``, speeds their rates ``qd_<joint>_0..2``.
        Singular where the middle angle is ±π/2 (asymmetric sequences) or 0, π
        (symmetric). A joint torque on a spherical joint is its Go components (as
        :class:`kanedyn.JointLoad`).
    simplify : bool
        ``trigsimp`` the attitudes, positions, H and G (slower; cleaner output for
        small models).

    Returns
    -------
    LagrangeEquations

    Examples
    --------
    >>> import sympy as sm, kanedyn as kd
    >>> m, l, g = sm.symbols("m l g", positive=True)
    >>> rod = kd.Body("rod", mass=m, inertia=sm.diag(1, 1, 1) * m * l**2 / 12,
    ...               com=(l / 2, 0, 0))
    >>> model = kd.Model([rod], [kd.Joint.revolute("j", None, "rod", axis=3)],
    ...                  gravity=(0, -g, 0))
    >>> lag = lagrange(model, simplify=True)
    >>> lag.H
    Matrix([[l**2*m/3]])
    >>> lag.G
    Matrix([[g*l*m*cos(q_j_0)/2]])
    """
    loads = read_loads(model, joint_torques, body_forces, body_torques, "lagrange")
    q, u = generalized_symbols(model)
    charts = _charts(model, chart)
    n = len(q)
    lay, pa = model.layout, params_of(model)
    tidy = (lambda e: sm.trigsimp(e)) if simplify else (lambda e: e)

    # attitudes and mass-centre positions along the chain (model order is topological)
    index = {s: r for r, s in enumerate(q)}
    R_N_B: list[sm.Matrix] = []
    p_B: list[sm.Matrix] = []  # body-frame origins
    r_c: list[sm.Matrix] = []
    J_A: list[sm.Matrix] = []
    R_N_Gos: list[sm.Matrix] = []
    nodes = {k: (i, nd) for k, i, nd in node_joints(model)}
    outer_nodes = dict(outer_node_joints(model))
    partial = _Partials()
    eta_all, xi_all = list(q[n - model.nf :]), list(u[n - model.nf :])

    def node_rate(nf: Any) -> list[tuple[sm.Symbol, sm.Matrix]]:
        """``(η_c, vee(∂C/∂η_c Cᵀ))`` of node frame ``nf``: the node's angular velocity
        per modal speed in its body's axes, from the rate of its attitude
        (``[ω]× = Ċ Cᵀ``)."""
        out = []
        for eta_c in eta_all[nf.sl]:
            dC = partial(nf.C, eta_c)
            out.append((eta_c, sm.Matrix([(dC[a, :] * nf.C[b, :].T)[0]
                                          for a, b in ((2, 1), (0, 2), (1, 0))])))  # fmt: skip
        return out

    for k, j in enumerate(model.joints):
        par = lay.parent[k]
        R_N_Bi = sm.eye(3) if par < 0 else R_N_B[par]
        p_Bi = sm.zeros(3, 1) if par < 0 else p_B[par]
        J_Ai = sm.zeros(3, n) if par < 0 else J_A[par].copy()
        R_Bi_Gi, inner_point = matrix(exact_rotation(j.inner_rotation)), _matrix(j.inner_point)
        if k in nodes:  # Gi rides on the node frame (C, d) of the flexible inner body
            nfr = exact_node_frame(model, *nodes[k], eta_all, xi_all)
            R_Bi_Gi = nfr.C * R_Bi_Gi
            inner_point = nfr.d + nfr.C * (inner_point - nfr.r_n)
            for eta_c, w_c in node_rate(nfr):  # Gi turns with the node
                J_Ai[:, index[eta_c]] += R_N_Bi * w_c
        R_N_Gi = R_N_Bi * R_Bi_Gi
        # slides along the Gi axes named by trn_seq
        trn_axes = parse_sequence(j.trn_seq)
        slide = sm.zeros(3, 1)
        for c in range(j.trn_dof):
            slide[trn_axes[c] - 1] += sm.Symbol(f"d_{j.name}_{c}", real=True)
        o = p_Bi + R_N_Bi * inner_point + R_N_Gi * slide
        # gimbal R_Gi_Go = R_i1(θ1) R_i2(θ2) R_i3(θ3); column of J_A = joint axis in N (2-4)
        R_N_Go = R_N_Gi
        rot_axes = parse_sequence(charts.get(j.name, j.rot_seq))
        thetas = [sm.Symbol(f"q_{j.name}_{c}", real=True) for c in range(j.rot_dof)]
        if thetas:  # the elementary rotations R_c(θ_c) of the joint model
            E = euler_axes(SYMPY, np.eye(3)[[a - 1 for a in rot_axes]])
            theta = np.array(thetas + [0] * (3 - j.rot_dof), dtype=object)
            factors = axis_rotations(SYMPY, E, theta, j.rot_dof)
        for c, theta_c in enumerate(thetas):
            axis = rot_axes[c]
            J_Ai[:, index[theta_c]] = R_N_Go[:, axis - 1]
            R_N_Go = (R_N_Go * matrix(factors[c])).applyfunc(tidy)
        R_N_Gos.append(R_N_Go)
        R = (R_N_Go * matrix(exact_rotation(j.outer_rotation))).applyfunc(tidy)
        outer_point = _matrix(j.outer_point)
        if k in outer_nodes:  # Go is fixed in the node frame (C, d) of the outer body
            nfo = exact_node_frame(model, k, outer_nodes[k], eta_all, xi_all)
            R = (R * nfo.C.T).applyfunc(tidy)
            outer_point = nfo.d + nfo.C * (outer_point - nfo.r_n)
            for eta_c, w_c in node_rate(nfo):  # Bo turns back by the node's rotation
                J_Ai[:, index[eta_c]] -= R * w_c
        p = o - R * outer_point
        R_N_B.append(R)
        p_B.append(p.applyfunc(tidy))
        r_c.append((p + R * _matrix(pa.com[k])).applyfunc(tidy))
        J_A.append(J_Ai)

    # link Jacobians and the inertia matrix (2-2 .. 2-8)
    J_L = [partial.jacobian(r, q) for r in r_c]
    mass = [exact(m) for m in pa.mass]
    H = sm.zeros(n, n)
    I_B = [_matrix(pa.inertia[i]) for i in range(model.nb)]
    I_N = _inertia_N(R_N_B, I_B)  # (2-8)
    # geared rotors (kanedyn.dynamics.rotors): massless bodies turning with their carriers
    # C plus n σ a, J_A = J_A,C + n a e_kᵀ, inertia J a aᵀ + J_t (U - a aᵀ) fixed in C
    bodies = (list(mass), list(J_L), list(J_A), list(R_N_B), list(I_B))
    if (nodes or outer_nodes) and rotor_specs(model):
        raise ModelError(
            "lagrange: geared rotors (Joint.rotor) in a model with joints at nodes of "
            "flexible bodies (Joint.inner_node, outer_node) are not modelled yet"
        )
    for spec in rotor_specs(model):
        col = index[sm.Symbol(f"{'q' if spec.hinge else 'd'}_{model.joints[spec.k].name}_0",
                              real=True)]  # fmt: skip
        n_r, J_r = exact(spec.n), exact(spec.J)
        if spec.reflected_only:  # ½ n² J σ²
            H[col, col] += n_r**2 * J_r
            continue
        R_C = sm.eye(3) if spec.c < 0 else R_N_B[spec.c]
        a_C = _matrix(spec.a_C)
        J_A_R = (sm.zeros(3, n) if spec.c < 0 else J_A[spec.c]).copy()
        J_A_R[:, col] += n_r * R_C * a_C
        I_R = J_r * a_C * a_C.T + exact(spec.J_t) * (sm.eye(3) - a_C * a_C.T)
        for lst, item in zip(bodies, (0, sm.zeros(3, n), J_A_R, R_C, I_R), strict=True):
            lst.append(item)
    mass_a, J_L_a, J_A_a, R_a, I_B_a = bodies
    I_N_a = I_N + _inertia_N(R_a[model.nb :], I_B_a[model.nb :])
    for i in range(len(mass_a)):
        H += mass_a[i] * J_L_a[i].T * J_L_a[i] + J_A_a[i].T * I_N_a[i] * J_A_a[i]
    H = H.applyfunc(lambda e: tidy(sm.expand(e)) if simplify else e)

    # C = Σ_jk h_ijk q̇_j q̇_k, by the product rule on the velocities (compact)
    defs, C = _coriolis(q, u, mass_a, J_L_a, J_A_a, R_a, I_B_a, I_N_a, partial)

    # gravity (2-9): U = -Σ m g·r, G = ∂U/∂q
    g = _matrix(pa.gravity)
    U = -sum((mass[i] * (g.T * r_c[i])[0, 0] for i in range(model.nb)), sm.Integer(0))
    if model.central_gravity is not None:  # the field's potential, body by body
        U = sum(
            (sp.central_gravity_potential(*central_args(model, i, R_N_B[i], r_c[i]))
             for i in range(model.nb)),
            sm.Integer(0),
        )  # fmt: skip
    if model.nf:  # flexible bodies: elastic kinetic energy, strain energy, modal damping
        H_f, C_f, U_f, Q_f = lagrange_flex(model, q, u, R_N_B, p_B, J_A, g, partial)
        H, C, U = H + H_f, C + C_f, U + U_f
    G = sm.Matrix([tidy(partial(U, qr)) for qr in q])

    # generalized forces (2-10): springs, dampers, joint torques, body loads, rotors
    q_layout = np.zeros(model.nq, dtype=object)  # the joint model's coordinates
    for k, j in enumerate(model.joints):
        if j.rot_type != "spherical":
            q_layout[lay.q_index[k]] = [q[int(r)] for r in lay.u_index[k]]
    kp, cp = (exact_array(a) if pa.has_poly else None for a in (pa.stiffness_poly, pa.damping_poly))
    Q = matrix(
        joints.spring_damper(
            lay, exact_array(pa.stiffness), exact_array(pa.damping),
            q_layout, np.array(list(u)[: model.n], dtype=object), kp, cp, ar=SYMPY,
        )
    )  # fmt: skip
    if model.nf:
        Q = Q.col_join(sm.zeros(model.nf, 1)) + Q_f
    spherical_u = {int(r): k for k in lay.spherical.tolist() for r in lay.u_index[k][:3]}
    for r, tau in loads.Q:
        if r in spherical_u:  # a torque component in Go: J_A columns of the chart angles
            k = spherical_u[r]
            cols = [int(c) for c in lay.u_index[k][:3]]
            c = int(np.flatnonzero(np.asarray(lay.u_index[k][:3]) == r)[0])
            torque = R_N_Gos[k][:, c] * tau
            for col in cols:
                Q[col] += (J_A[k][:, col].T * torque)[0]
            continue
        Q[r] += tau
    for f in loads.forces:  # the Jacobian of the application point (eq. 2-10)
        at = r_c[f.body] if f.point is None else p_B[f.body] + R_N_B[f.body] * f.point
        Q += partial.jacobian(at, q).T * f.F
    for i, T in loads.torques:
        Q += J_A[i].T * T
    for i in range(model.nb):
        h_B = _matrix(pa.h_embedded[i])
        if any(e != 0 for e in h_B):
            omega = J_A[i] * u
            Q -= J_A[i].T * omega.cross(R_N_B[i] * h_B)  # gyroscopic torque -ω × h

    return LagrangeEquations(
        model=model,
        q=q,
        u=u,
        R=tuple(R_N_B),
        r=tuple(r_c),
        J_L=tuple(J_L),
        J_A=tuple(J_A),
        H=sm.ImmutableMatrix(H),
        G=sm.ImmutableMatrix(G),
        Q=sm.ImmutableMatrix(Q),
        potential_energy=U,
        charts=charts,
        intermediates=tuple(defs),
        compact_C=sm.ImmutableMatrix(C),
    )
