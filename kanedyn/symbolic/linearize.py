"""Linearization of a :class:`~kanedyn.symbolic.problem.KaneProblem` about an operating point.

The constrained system is linearized, not the raw one: the configuration
constraints, the velocity constraints and their time derivative are
differentiated together with the unconstrained Kane equations, and the
dependent perturbations are eliminated afterwards (Peterson, Gede & Hubbard
2015). With Lagrange multipliers :math:`\\lambda` for the motion constraints
:math:`f_v = B(q) u + b(q) = 0`, the unconstrained equations read

.. math::

    F(q, \\dot q, u) - M(q)\\,\\dot u + B(q)^\\top \\lambda = 0, \\qquad
    B\\,\\dot u + h(q, \\dot q, u) = 0, \\qquad
    K_{\\dot q}\\,\\dot q + k(q, u) = 0, \\qquad f_c(q) = 0.

Perturbing about :math:`(q_0, u_0, \\dot u_0, \\lambda_0)` and projecting with
:math:`T_0^\\top = [I \\;\\; A_0^\\top]` (which annihilates :math:`B_0^\\top`, so
:math:`\\delta\\lambda` drops out; Kane & Levinson 1985, Kane's equations with motion constraints) gives, for the
state :math:`x = [q_i; u_i]`,

.. math::

    \\delta q = T_q\\,\\delta q_i, \\quad
    \\delta u = T_{uq}\\,\\delta q_i + T_0\\,\\delta u_i, \\quad
    \\delta \\dot q = -K_{\\dot q}^{-1}(k_q\\,\\delta q + k_u\\,\\delta u),

    \\tilde M_0\\,\\delta\\dot u_i = T_0^\\top\\left[(F - M\\dot u_0 + B^\\top\\lambda_0)_q\\,\\delta q
        + F_{\\dot q}\\,\\delta\\dot q + F_u\\,\\delta u
        + M_0 \\begin{bmatrix} 0 \\\\ B_d^{-1} w \\end{bmatrix} + F_r\\,\\delta r\\right],

where :math:`w = (B\\dot u_0 + h)_q\\,\\delta q + h_{\\dot q}\\,\\delta\\dot q + h_u\\,\\delta u`
is the perturbation of the constraint acceleration. Every Jacobian is taken of
the small unconstrained expressions, and for each variable the operating point
of all other variables is substituted before differentiating.

References
----------
D. L. Peterson, G. Gede and M. Hubbard, "Symbolic linearization of equations of
motion of constrained multibody systems", Multibody Syst. Dyn. 33 (2015) 143-161.
T. R. Kane and D. A. Levinson, *Dynamics: Theory and Applications*, 1985.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np
import scipy.linalg
import sympy as sm
from sympy.physics.vector import dynamicsymbols

from kanedyn.errors import ModelError
from kanedyn.symbolic.kane import KaneEquations
from kanedyn.symbolic.problem import KaneProblem, solve_linear

__all__ = ["Linearization", "linearize"]

_t = dynamicsymbols._t
_TOL = 1e-9


@attrs.frozen
class Linearization:
    """A linear model :math:`M\\,\\delta\\dot x = A\\,\\delta x + B\\,\\delta r`.

    Attributes
    ----------
    A : Matrix, (n, n)
        State matrix for :math:`x = [q_i; u_i]` (independent coordinates, then
        independent speeds).
    B : Matrix, (n, n_r)
        Input matrix for the inputs ``r``.
    M : Matrix, (n, n)
        Identity when built with ``A_and_B=True``, otherwise
        :math:`\\mathrm{diag}(I, \\tilde M_0)`.
    state : tuple
        The user's symbols of :math:`x`.
    inputs : tuple
        The user's symbols of :math:`r`.
    op_point : dict
        The complete operating point (dependent coordinates and speeds
        included), by the user's symbols.
    """

    A: sm.Matrix
    B: sm.Matrix
    M: sm.Matrix
    state: tuple
    inputs: tuple
    op_point: dict = attrs.field(eq=False)

    def numeric(self, params: Mapping | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(M, A)`` as float arrays after substituting ``params``."""
        rule = dict(params or {})
        out = []
        for X in (self.M, self.A):
            Y = X.xreplace(rule) if rule else X
            if Y.free_symbols:
                names = ", ".join(sorted(str(s) for s in Y.free_symbols))
                raise ModelError(f"eigenvalues: no value for {names}")
            out.append(np.array(Y.evalf(), dtype=float))
        return out[0], out[1]

    def eigenvalues(self, params: Mapping | None = None) -> np.ndarray:
        """Eigenvalues of the linear model, sorted by real part then imaginary part.

        Parameters
        ----------
        params : mapping, optional
            Values for the symbols left in ``A`` (and ``M``).
        """
        M, A = self.numeric(params)
        if np.allclose(M, np.eye(len(M))):
            lam = np.linalg.eigvals(A)
        else:
            lam = scipy.linalg.eigvals(A, M)
        return np.sort_complex(lam)


def _jacobian_at(exprs: sm.Matrix, xs: Sequence, x0: Mapping) -> sm.Matrix:
    """:math:`\\partial e / \\partial x` at ``x0``, substituting the other variables first.

    For each variable the operating point of every other variable is put in
    before differentiating, which keeps the expression to differentiate small;
    a variable missing from ``x0`` stays symbolic.
    """
    J = sm.zeros(exprs.rows, len(xs))
    if exprs.rows == 0 or not xs:
        return J
    free = [e.free_symbols for e in exprs]
    for j, x in enumerate(xs):
        rule = {y: v for y, v in x0.items() if y is not x}
        at = {x: x0[x]} if x in x0 else {}
        for i, e in enumerate(exprs):
            if x in free[i]:
                J[i, j] = e.xreplace(rule).diff(x).xreplace(at)
    return J


# Entries with more nodes than this are left as formed (a quotient of shared
# cofactor sums): multiplied out, a determinant of order n has n! products.
_EXPAND_MAX_NODES = 1000


def _is_large(e: sm.Expr) -> bool:
    """More than ``_EXPAND_MAX_NODES`` nodes (counting stops there)."""
    for k, _ in enumerate(sm.preorder_traversal(e)):
        if k > _EXPAND_MAX_NODES:
            return True
    return False


def _tidy(e: sm.Expr, free_states: Mapping) -> sm.Expr:
    """Expand an entry unless it is large; simplify small ones that still hold q or u."""
    if _is_large(e):
        return e
    e = sm.expand(e)
    if free_states and e.has(*free_states) and sm.count_ops(e) < 300:
        e = sm.simplify(e)
    return e


def _is_numeric(X: sm.Matrix) -> bool:
    return not X.free_symbols


def solve_mass_matrix(A: sm.Matrix, B: sm.Matrix, what: str) -> sm.Matrix:
    """Solve ``A X = B`` at the operating point; numeric ``A`` is inverted in floats."""
    if A.rows == 0:
        return sm.zeros(0, B.cols)
    if _is_numeric(A) and not A.has(sm.Float):
        if A.det() == 0:
            raise ModelError(f"linearize: {what} is singular at the operating point")
        return A.LUsolve(B)
    if _is_numeric(A):
        a = np.array(A.evalf(), dtype=float)
        s = np.linalg.svd(a, compute_uv=False)
        if s[-1] <= 1e-12 * s[0]:
            raise ModelError(f"linearize: {what} is singular at the operating point")
        inv = sm.Matrix(np.linalg.inv(a))
        return inv * B
    return solve_linear(A, B, what=f"linearize: {what}")


def _nonzero(x: sm.Expr) -> bool:
    """True if ``x`` is not zero to ``_TOL``; symbols left in ``x`` take random values."""
    x = sm.sympify(x)
    if not x.free_symbols:
        return abs(complex(x.evalf())) > _TOL
    rng = np.random.default_rng(11)
    syms = sorted(x.free_symbols, key=str)
    for _ in range(3):
        val = x.xreplace({s: sm.Float(rng.uniform(0.5, 1.5)) for s in syms})
        if abs(complex(val.evalf())) > _TOL:
            return True
    return False


def _op_values(problem: KaneProblem, op_point: Mapping, inputs) -> tuple[dict, dict, list]:
    """Split ``op_point`` into parameter values and state values, by stand-in symbol."""
    raw = problem.raw
    to_raw = {v: k for k, v in raw.public.items()}
    rates = {x.diff(_t) for x in [*problem.q, *problem.u]}
    params: dict = {}
    state: dict = {}
    for key, val in op_point.items():
        if key in rates:
            continue  # rates at the operating point follow from the equations
        if key not in to_raw:
            raise ModelError(
                f"op_point: {key} is not a coordinate, speed or parameter of the problem"
            )
        s = to_raw[key]
        (params if s in raw.parameters else state)[s] = sm.sympify(val)
    r = []
    for x in inputs or ():
        if x not in to_raw or to_raw[x] not in raw.parameters:
            raise ModelError(f"inputs: {x} does not appear in the equations as a parameter")
        r.append(to_raw[x])
        params.pop(to_raw[x], None)
    return params, state, r


def _complete_coordinates(raw, f_c: sm.Matrix, x0: dict) -> None:
    """Fill in dependent coordinates from :math:`f_c(q) = 0` and check the given ones."""
    q_dep = raw.q[raw.n_q_ind :]
    missing = [q for q in q_dep if q not in x0]
    if missing:
        fc = f_c.xreplace(x0)
        if fc.free_symbols - set(missing):
            raise ModelError(
                "op_point: give the dependent coordinates q_dep; they cannot be solved from "
                "the configuration constraints with symbolic values"
            )
        J = fc.jacobian(missing)
        if not J.has(*missing):  # linear in q_dep: solve exactly
            sol = solve_mass_matrix(
                J, -fc.xreplace(dict.fromkeys(missing, 0)), "the configuration constraints"
            )
            x0.update({q: sol[k] for k, q in enumerate(missing)})
        else:
            sol = sm.nsolve(list(fc), missing, [0.0] * len(missing), tol=1e-14, prec=30)
            x0.update({q: sm.Float(sol[k], 17) for k, q in enumerate(missing)})
    res = f_c.xreplace(x0)
    if any(_nonzero(r) for r in res):
        raise ModelError(
            f"op_point: the coordinates violate the configuration constraints (residual {list(res)})"
        )


def _complete_speeds(raw, Bm: sm.Matrix, b: sm.Matrix, x0: dict) -> None:
    """Fill in dependent speeds from :math:`B u + b = 0` and check the given ones."""
    p = raw.n_u_ind
    u_dep = raw.u[p:]
    if not u_dep:
        return
    B0, b0 = Bm.xreplace(x0), b.xreplace(x0)
    if any(u not in x0 for u in u_dep):
        u_i = sm.Matrix([x0.get(u, u) for u in raw.u[:p]])
        sol = solve_mass_matrix(B0[:, p:], -(B0[:, :p] * u_i + b0), "the dependent-speed solve")
        for k, u in enumerate(u_dep):
            x0.setdefault(u, sol[k])
    res = B0 * sm.Matrix([x0.get(u, u) for u in raw.u]) + b0
    if any(_nonzero(r) for r in res):
        raise ModelError(
            f"op_point: the speeds violate the velocity constraints (residual {list(res)})"
        )


def linearize(
    problem: KaneProblem | KaneEquations,
    op_point: Mapping,
    *,
    A_and_B: bool = True,
    inputs: Sequence | None = None,
    check_equilibrium: bool = False,
) -> Linearization:
    """Linearize a Kane problem with dependent coordinates and speeds.

    Parameters
    ----------
    problem : KaneProblem or KaneEquations
        A :class:`KaneProblem`, or the equations of a model tree from
        :func:`kanedyn.symbolic.kane` (no constraints: the state is ``x = [q; u]``, and
        ``inputs`` default to its :attr:`~KaneEquations.inputs`, the functions of time
        in its loads).
    op_point : mapping
        Values (numbers or expressions) by the problem's symbols: coordinates,
        speeds and any parameters. Missing independent coordinates and speeds
        stay symbolic; missing dependent speeds are solved from the velocity
        constraints and missing dependent coordinates from the configuration
        constraints (numerically). Rates (q', u') are ignored; they follow
        from the equations.
    A_and_B : bool, optional
        If True (default) return :math:`\\delta\\dot x = A\\,\\delta x + B\\,\\delta r`;
        otherwise keep the mass matrix, :math:`M\\,\\delta\\dot x = A\\,\\delta x + B\\,\\delta r`.
    inputs : sequence, optional
        Parameters (constants or specified functions of time) to treat as
        inputs r; their operating values default to 0.
    check_equilibrium : bool, optional
        Raise ModelError unless the independent speeds are steady at the
        operating point, :math:`\\dot u_i = 0` (an equilibrium or a steady
        motion; dependent speeds may still change, e.g. body-frame components).

    Returns
    -------
    Linearization
        With ``A`` (n, n), ``B`` (n, n_r) for :math:`x = [q_i; u_i]`, n = n_qi + n_ui.

    Raises
    ------
    ModelError
        If the operating point violates a constraint, a solve is singular there,
        or (with ``check_equilibrium``) the speeds are not steady.

    Examples
    --------
    A pendulum hanging from O, about its lowest point:

    >>> import sympy as sm
    >>> from sympy.physics.mechanics import Particle, Point, ReferenceFrame, dynamicsymbols
    >>> q, u = dynamicsymbols("q u")
    >>> m, l, g = sm.symbols("m l g", positive=True)
    >>> N = ReferenceFrame("N"); A = N.orientnew("A", "Axis", (q, N.z))
    >>> A.set_ang_vel(N, u * N.z)
    >>> O = Point("O"); O.set_vel(N, 0)
    >>> P = O.locatenew("P", l * A.x); _ = P.v2pt_theory(O, N, A)
    >>> kp = KaneProblem(N, [q], [u], [q.diff() - u],
    ...                  bodies=[Particle("p", P, m)], loads=[(P, m * g * N.x)])
    >>> linearize(kp, {q: 0, u: 0}, check_equilibrium=True).A
    Matrix([
    [   0, 1],
    [-g/l, 0]])
    """
    if isinstance(problem, KaneEquations):
        return _linearize_tree(problem, op_point, A_and_B, inputs, check_equilibrium)
    raw = problem.raw
    nq, nu, p = len(raw.q), len(raw.u), raw.n_u_ind
    nqi, m = raw.n_q_ind, raw.n_u_dep
    params, x0, r = _op_values(problem, op_point, inputs)
    x0.update(dict.fromkeys(r, sm.S.Zero))
    # Parameters are constants for the differentiation: substitute them first.
    K_qd, k, f_c, Bm, b, h, M, F = (
        X.xreplace(params) for X in (raw.K_qd, raw.k, raw.f_c, raw.B, raw.b, raw.h, raw.M, raw.F)
    )
    q, qd, u, ud = (list(x) for x in (raw.q, raw.qd, raw.u, raw.ud))

    # Operating point: coordinates, speeds, then rates from the equations.
    _complete_coordinates(raw, f_c, x0)
    _complete_speeds(raw, Bm, b, x0)
    K0 = K_qd.xreplace(x0)
    qd0 = solve_mass_matrix(K0, -k.xreplace(x0), "the kinematic solve for q'")
    x0.update(zip(qd, qd0, strict=True))
    M0 = M.xreplace(x0)
    F0, h0 = F.xreplace(x0), h.xreplace(x0)
    B0 = Bm.xreplace(x0)
    B_i0, B_d0 = B0[:, :p], B0[:, p:]
    X = solve_mass_matrix(B_d0, (-B_i0).row_join(-h0), "the dependent-speed solve")
    A0, c0 = X[:, :p], X[:, p:]
    T0 = sm.eye(p).col_join(A0)
    Mt0 = T0.T * M0 * T0
    F0c = F0 - M0[:, p:] * c0 if m else F0
    ud_i0 = solve_mass_matrix(Mt0, T0.T * F0c, "the mass matrix")
    ud0 = T0 * ud_i0 + sm.zeros(p, 1).col_join(c0)
    back = {s: v for s, v in raw.public.items() if s is not v}
    if check_equilibrium and any(_nonzero(a) for a in ud_i0):
        rates = [sm.sympify(a).xreplace(back).evalf(6) for a in ud_i0]
        raise ModelError(
            "op_point: not an equilibrium or steady motion: the independent speeds "
            f"change there, u_ind' = {rates}"
        )
    x0.update(zip(ud, ud0, strict=True))
    R0 = F0 - M0 * ud0
    lam0 = solve_mass_matrix(B_d0.T, -R0[p:, :], "the multiplier solve") if m else sm.zeros(0, 1)

    # Jacobians of the unconstrained expressions at the operating point. Values
    # that depend on coordinates or speeds left symbolic are held fixed while
    # differentiating (frozen), so only the explicit dependence is differentiated.
    freeze = {s: sm.Dummy() for s in [*q, *u] if s not in x0}
    thaw = {d: s for s, d in freeze.items()}
    xf = {k: sm.sympify(v).xreplace(freeze) for k, v in x0.items()}
    udv, lamv = sm.Matrix(ud0).xreplace(freeze), lam0.xreplace(freeze)

    def jac(exprs, xs):
        return _jacobian_at(exprs, xs, xf).xreplace(thaw)

    E = F - M * udv + (Bm.T * lamv if m else sm.zeros(nu, 1))
    R_q = jac(E, q)
    R_qd, R_u, R_r = (jac(F, xs) for xs in (qd, u, r))
    kd = K_qd * sm.Matrix(qd) + k
    kd_q, kd_u = (jac(kd, xs) for xs in (q, u))
    fv = Bm * sm.Matrix(u) + b
    fv_q = jac(fv, q)
    fa = Bm * udv + h
    fa_q, fa_qd, fa_u = (jac(fa, xs) for xs in (q, qd, u))
    fc_q = jac(f_c, q)

    # Eliminate the dependent perturbations: rows are variables, columns x = [q_i; u_i].
    nx = nqi + p
    T_q = sm.eye(nqi).col_join(
        solve_mass_matrix(fc_q[:, nqi:], -fc_q[:, :nqi], "the configuration-constraint Jacobian")
    )
    Dq = T_q.row_join(sm.zeros(nq, p))
    Du = sm.zeros(p, nqi).row_join(sm.eye(p))
    if m:
        Du_d = A0 * Du[:, :] + solve_mass_matrix(B_d0, -fv_q * Dq, "the dependent-speed solve")
        Du = Du.col_join(Du_d)
    Dqd = solve_mass_matrix(K0, -(kd_q * Dq + kd_u * Du), "the kinematic solve for q'")
    Rx = R_q * Dq + R_qd * Dqd + R_u * Du
    if m:
        W = fa_q * Dq + fa_qd * Dqd + fa_u * Du
        Rx = Rx - M0[:, p:] * solve_mass_matrix(B_d0, -W, "the dependent-acceleration solve")
    G_x, G_r = T0.T * Rx, T0.T * R_r
    top = Dqd[:nqi, :]
    if A_and_B:
        A = top.col_join(solve_mass_matrix(Mt0, G_x, "the mass matrix"))
        B = sm.zeros(nqi, len(r)).col_join(solve_mass_matrix(Mt0, G_r, "the mass matrix"))
        Ml = sm.eye(nx)
    else:
        A, B, Ml = top.col_join(G_x), sm.zeros(nqi, len(r)).col_join(G_r), sm.diag(sm.eye(nqi), Mt0)
    A, B, Ml = (X.applyfunc(lambda e: _tidy(e, freeze)) for X in (A, B, Ml))

    pub = raw.public
    state = tuple(pub[s] for s in [*q[:nqi], *u[:p]])
    op = {pub[s]: sm.sympify(v).xreplace(back) for s, v in x0.items()}
    op.update({pub[s]: v for s, v in params.items()})
    return Linearization(
        A=A.xreplace(back),
        B=B.xreplace(back),
        M=Ml.xreplace(back),
        state=state,
        inputs=tuple(pub[s] for s in r),
        op_point=op,
    )


def _linearize_tree(
    eom: KaneEquations,
    op_point: Mapping,
    A_and_B: bool,
    inputs: Sequence | None,
    check_equilibrium: bool,
) -> Linearization:
    """The linearization of ``q̇ = k(q, u)``, ``M(q) u̇ = f(q, u, r)`` about ``op_point``.

    With the accelerations at the operating point ``u̇_0 = M_0^{-1} f_0`` held fixed,
    ``M_0 δu̇ = ∂(f - M u̇_0)/∂x δx + ∂f/∂r δr``; the parameters are substituted first.
    """
    q, u = list(eom.q), list(eom.u)
    r = list(eom.inputs if inputs is None else inputs)
    known = set(q) | set(u) | set(eom.parameters) | set(r)
    for key in op_point:
        if key not in known:
            raise ModelError(f"op_point: {key} is not a coordinate, speed or parameter of eom")
    stand = {x: sm.Dummy(str(x)) for x in r}  # inputs may be functions of time
    x0 = {stand.get(k, k): sm.sympify(v) for k, v in op_point.items()}
    for x in r:
        x0.setdefault(stand[x], sm.S.Zero)
    params = {k: v for k, v in x0.items() if k not in set(q) | set(u) | set(stand.values())}
    M = sm.Matrix(eom.mass_matrix).xreplace(stand).xreplace(params)
    f = sm.Matrix(eom.forcing).xreplace(stand).xreplace(params)
    kd = sm.Matrix(eom.kinematic_equations).xreplace(params)
    M0 = M.xreplace(x0)
    ud0 = solve_mass_matrix(M0, f.xreplace(x0), "the mass matrix")
    if check_equilibrium and any(_nonzero(a) for a in ud0):
        raise ModelError(
            "op_point: not an equilibrium or steady motion: the speeds change there, "
            f"u' = {[sm.sympify(a).evalf(6) for a in ud0]}"
        )
    rs = [stand[x] for x in r]
    G = f - M * ud0
    G_x = _jacobian_at(G, q + u, x0)
    G_r = _jacobian_at(f, rs, x0)
    top = _jacobian_at(kd, q + u, x0)
    nx = len(q) + len(u)
    if A_and_B:
        A = top.col_join(solve_mass_matrix(M0, G_x, "the mass matrix"))
        B = sm.zeros(len(q), len(r)).col_join(solve_mass_matrix(M0, G_r, "the mass matrix"))
        Ml = sm.eye(nx)
    else:
        A, B, Ml = (
            top.col_join(G_x),
            sm.zeros(len(q), len(r)).col_join(G_r),
            sm.diag(sm.eye(len(q)), M0),
        )
    free = dict.fromkeys(s for s in q + u if s not in x0)
    back = {d: x for x, d in stand.items()}
    A, B, Ml = (X.applyfunc(lambda e: _tidy(e, free)).xreplace(back) for X in (A, B, Ml))
    return Linearization(
        A=A,
        B=B,
        M=Ml,
        state=tuple(q + u),
        inputs=tuple(r),
        op_point={back.get(k, k): v for k, v in x0.items()},
    )
