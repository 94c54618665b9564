"""Kane's method for a system given as frames, points, speeds and constraints.

This is the textbook form of Kane's method (Kane & Levinson 1985)
for systems that are not a joint tree: the user builds the kinematics with
``sympy.physics.vector`` (frames, points, angular and linear velocities in terms
of the generalized speeds), names the generalized coordinates and speeds, and
gives the kinematic differential equations and the constraints. Holonomic
(configuration) constraints make some coordinates dependent; motion (velocity)
constraints make some speeds dependent.

With ``n`` speeds of which ``m`` are dependent, the velocity constraints are
solved for the dependent speeds (Kane & Levinson 1985, motion constraints),

.. math::

    u_s = \\sum_{r=1}^{p} A_{sr} u_r + B_s, \\qquad s = p+1, \\dots, n,
    \\quad p = n - m,

and the nonholonomic partial velocities and generalized forces are
(Kane & Levinson 1985, nonholonomic partial velocities and generalized
forces; seed 004)

.. math::

    \\tilde v_r = v_r + \\sum_s v_s A_{sr}, \\qquad
    \\tilde F_r = F_r + \\sum_s F_s A_{sr}, \\qquad
    \\tilde F^*_r = F^*_r + \\sum_s F^*_s A_{sr}, \\qquad
    \\tilde F_r + \\tilde F^*_r = 0, \\quad r = 1, \\dots, p.

The class keeps the unconstrained equations (:class:`RawEquations`) small and
builds the eliminated ones (:attr:`KaneProblem.mass_matrix`,
:attr:`KaneProblem.forcing`) on first access. Numeric evaluation
(:meth:`KaneProblem.rhs`) and linearization (:mod:`kanedyn.symbolic.linearize`)
work from the unconstrained pieces and eliminate numerically, so that no
symbolic inverse has to be evaluated where it would be 0/0.

References
----------
T. R. Kane and D. A. Levinson, *Dynamics: Theory and Applications*,
McGraw-Hill, 1985 (motion constraints, partial velocities, generalized
active and inertia forces, Kane's dynamical equations).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sm
from sympy.core.function import AppliedUndef
from sympy.physics.mechanics import Particle, RigidBody
from sympy.physics.vector import Dyadic, Point, ReferenceFrame, Vector, dynamicsymbols
from sympy.physics.vector.printing import vlatex, vsstrrepr

from kanedyn.errors import ModelError
from kanedyn.spatial.plucker import solve_spd
from kanedyn.symbolic.auxiliary import auxiliary_equations, check_auxiliary
from kanedyn.symbolic.components import Components, Lookup, generalized_forces

__all__ = ["KaneProblem", "Mass", "RawEquations", "solve_linear", "solve_symmetric"]

_t = dynamicsymbols._t

# Relative size of the smallest singular value below which a matrix is treated
# as singular (at random points for symbolic checks, at the given state for
# numeric evaluation).
_SINGULAR_RTOL = 1e-10
# Largest diagonal block solved by Cramer's rule; bigger blocks use a pivoted LU.
_CRAMER_MAX = 6


# ---------------------------------------------------------------------------
# Small records
# ---------------------------------------------------------------------------


@attrs.frozen
class Mass:
    """A particle or rigid body as plain data.

    Parameters
    ----------
    name : str
        Used in tables and messages.
    mass : sympy.Expr
    point : Point
        The mass centre; its velocity in the inertial frame must be defined.
    frame : ReferenceFrame or None
        The body frame (None for a particle).
    inertia : Dyadic or None
        Central inertia dyadic (None for a particle).
    """

    name: str
    mass: Any
    point: Point
    frame: ReferenceFrame | None = None
    inertia: Dyadic | None = None


@attrs.frozen
class RawEquations:
    """Kane's equations before the dependent speeds are eliminated, in plain symbols.

    All speeds (independent first) are treated as free; the constrained motion
    is recovered by eliminating with the velocity constraints. Shapes use
    ``nq`` coordinates, ``nu`` speeds, ``nc`` configuration constraints and
    ``nm`` velocity constraints.

    .. math::

        K_{\\dot q}\\,\\dot q + k(q, u) = 0, \\qquad f_c(q) = 0, \\qquad
        f_v = B(q)\\,u + b(q) = 0,

        \\dot f_v = B\\,\\dot u + h(q, \\dot q, u) = 0, \\qquad
        F_r + F_r^* = F(q, \\dot q, u) - M(q)\\,\\dot u = 0 \\quad (r = 1..nu).

    Attributes
    ----------
    q, qd, u, ud : tuple of sympy.Dummy
        Coordinates (independent first), their rates, speeds (independent
        first) and their rates; each stands for the public symbol in ``public``.
    n_q_ind, n_u_ind : int
        Number of independent coordinates and speeds.
    parameters : tuple
        Constant symbols and specified-function stand-ins, sorted by name.
    K_qd : Matrix, (nq, nq)
    k : Matrix, (nq, 1)
    f_c : Matrix, (nc, 1)
    B : Matrix, (nm, nu)
    b : Matrix, (nm, 1)
    h : Matrix, (nm, 1)
    M : Matrix, (nu, nu)
        Unconstrained mass matrix, :math:`M_{rs} = \\sum_i m_i v_r\\cdot v_s
        + \\omega_r \\cdot I_i \\cdot \\omega_s`.
    F : Matrix, (nu, 1)
        :math:`F_r + F^*_r|_{\\dot u = 0}`.
    Fr : Matrix, (nu, 1)
        Generalized active forces :math:`F_r` (part of ``F``).
    public : dict
        Stand-in symbol -> the user's symbol or dynamic symbol.
    """

    q: tuple
    qd: tuple
    u: tuple
    ud: tuple
    n_q_ind: int
    n_u_ind: int
    parameters: tuple
    K_qd: sm.Matrix
    k: sm.Matrix
    f_c: sm.Matrix
    B: sm.Matrix
    b: sm.Matrix
    h: sm.Matrix
    M: sm.Matrix
    F: sm.Matrix
    Fr: sm.Matrix
    public: dict = attrs.field(eq=False, repr=False)

    @property
    def n_u_dep(self) -> int:
        """Number of dependent speeds."""
        return len(self.u) - self.n_u_ind


# ---------------------------------------------------------------------------
# Linear algebra helpers (symbolic and numeric)
# ---------------------------------------------------------------------------


def _stand_ins(exprs: Iterable[sm.Expr]) -> dict:
    """Map every derivative, dynamic symbol and symbol in ``exprs`` to a Dummy."""
    derivs, funcs, syms = set(), set(), set()
    for e in exprs:
        e = sm.sympify(e)
        derivs |= e.atoms(sm.Derivative)
        funcs |= e.atoms(AppliedUndef)
        syms |= e.free_symbols
    out = {d: sm.Dummy() for d in derivs}
    out.update({f: sm.Dummy() for f in funcs})
    out.update({s: sm.Dummy() for s in syms if s not in out})
    return out


def _random_evaluations(A: sm.Matrix, n: int = 3, seed: int = 7) -> list[np.ndarray]:
    """Evaluate ``A`` at ``n`` random points (all symbols in (0.2, 1.3))."""
    rule = _stand_ins(A)
    if not rule:  # a numeric matrix: one evaluation is all of them
        a = np.asarray(A.evalf(), dtype=complex).reshape(A.shape)
        return [a] * n
    args = list(rule.values())
    f = sm.lambdify(args, A.xreplace(rule), modules="numpy")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        vals = rng.uniform(0.2, 1.3, len(args))
        with np.errstate(all="ignore"):
            out.append(np.asarray(f(*vals), dtype=complex).reshape(A.shape))
    return out


def _numerically_singular(a: np.ndarray) -> bool:
    """True if the square array ``a`` is rank deficient to ``_SINGULAR_RTOL``."""
    if a.size == 0:
        return False
    if not np.all(np.isfinite(a)):
        return True
    s = np.linalg.svd(a, compute_uv=False)
    return bool(s[0] == 0.0 or s[-1] <= _SINGULAR_RTOL * s[0])


def is_singular(A: sm.Matrix) -> bool:
    """Whether a square symbolic matrix is singular for all values of its symbols.

    The test is numeric: the matrix is evaluated at three random points and is
    called singular when it is rank deficient at all of them.
    """
    if A.rows == 0:
        return False
    if A.is_zero_matrix:
        return True
    return all(_numerically_singular(a) for a in _random_evaluations(A))


def _column_rank(A: sm.Matrix) -> int:
    """Generic rank of a symbolic matrix (largest over random points)."""
    if A.rows == 0 or A.cols == 0:
        return 0
    ranks = []
    for a in _random_evaluations(A):
        s = np.linalg.svd(a, compute_uv=False)
        ranks.append(int(np.sum(s > _SINGULAR_RTOL * max(s[0], 1e-300))))
    return max(ranks)


def _blocks(A: sm.Matrix) -> list[tuple[list[int], list[int]]]:
    """Connected row/column blocks of the nonzero pattern of ``A`` (union-find)."""
    n = A.rows
    parent = list(range(2 * n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(n):
            if A[i, j] != 0:
                parent[find(i)] = find(n + j)
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for k in range(2 * n):
        rows, cols = groups.setdefault(find(k), ([], []))
        (rows if k < n else cols).append(k if k < n else k - n)
    return list(groups.values())


def _det_and_adjugate(P: sm.Matrix) -> tuple[Any, list]:
    """:math:`\\det P` and :math:`\\mathrm{adj}\\,P` by Laplace expansion with shared minors.

    Each minor (a set of rows and of columns) is expanded along its first row
    once and reused by every larger minor and cofactor that contains it, and zero
    entries are skipped, so the result is a sum of products of the entries with
    common factors shared rather than multiplied out.
    """
    n = P.rows
    memo: dict = {}

    def minor(rows: tuple, cols: tuple) -> Any:
        if not rows:
            return sm.S.One
        key = (rows, cols)
        out = memo.get(key)
        if out is None:
            terms = []
            r0 = rows[0]
            for k, c in enumerate(cols):
                a = P[r0, c]
                if a == 0:
                    continue
                sub = minor(rows[1:], cols[:k] + cols[k + 1 :])
                if sub != 0:
                    terms.append(a * sub if k % 2 == 0 else -a * sub)
            out = sm.Add(*terms)
            memo[key] = out
        return out

    every = tuple(range(n))
    adj = [[sm.S.Zero] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            m = minor(every[:j] + every[j + 1 :], every[:i] + every[i + 1 :])
            adj[i][j] = m if (i + j) % 2 == 0 else -m
    det = sm.Add(*[P[0, j] * adj[j][0] for j in range(n) if P[0, j] != 0])
    return det, adj


# Recently solved matrices: A -> (determinant placeholder, adjugate, placeholder values).
_CRAMER_CACHE: dict = {}


def _cramer(A: sm.Matrix, B: sm.Matrix) -> sm.Matrix:
    """Solve ``A X = B`` by Cramer's rule, :math:`X = \\mathrm{adj}(A) B / \\det A`.

    The adjugate, determinant and product are formed on placeholder symbols and
    the entries of ``A`` and ``B`` are put back in one pass, so each appears
    shared in the result rather than copied into a tree. The adjugate of a matrix
    is kept for the next solve with the same matrix (a linearization solves with
    its mass matrix several times).
    """
    key = A.as_immutable()
    hit = _CRAMER_CACHE.get(key)
    if hit is None:
        back: dict = {}
        seen: dict = {}

        def ph(a):
            if a.is_Number:
                return a
            if a not in seen:
                seen[a] = sm.Dummy()
                back[seen[a]] = a
            return seen[a]

        P = A.applyfunc(ph)
        det, adj = _det_and_adjugate(P)
        d = sm.Dummy()
        back[d] = det.xreplace(back)
        hit = (d, adj, back)
        if len(_CRAMER_CACHE) > 16:
            _CRAMER_CACHE.clear()
        _CRAMER_CACHE[key] = hit
    d, adj, back = hit
    n = A.rows
    back = dict(back)
    # placeholders for B: map each distinct entry to a Dummy
    qs: dict = {}
    for e in B:
        if not e.is_Number and e not in qs:
            qs[e] = sm.Dummy()
            back[qs[e]] = e
    Q = B.applyfunc(lambda b: b if b.is_Number else qs[b])
    X = sm.zeros(n, B.cols)
    for i in range(n):
        for c in range(B.cols):
            terms = [adj[i][j] * Q[j, c] for j in range(n) if adj[i][j] != 0 and Q[j, c] != 0]
            X[i, c] = sm.Add(*terms) / d
    return X.xreplace(back)


def solve_linear(A: sm.Matrix, B: sm.Matrix, *, what: str, checked: bool = False) -> sm.Matrix:
    """Solve the symbolic linear system ``A X = B`` without 0/0 hazards.

    The nonzero pattern of ``A`` is split into independent diagonal blocks; each
    block of size up to 6 is solved by Cramer's rule, so the only divisor is
    the block determinant, which vanishes only where ``A`` is singular
    (unlike a symbolic LU, whose pivots can vanish where ``A`` is regular;
    sympy issue #9641).

    Parameters
    ----------
    A : Matrix, (n, n)
    B : Matrix, (n, k)
    what : str
        Names the system in the error message.
    checked : bool, optional
        The caller has already checked that ``A`` is not singular everywhere.

    Raises
    ------
    ModelError
        If ``A`` is singular for all values of its symbols.
    """
    n = A.rows
    if A.cols != n:
        raise ModelError(f"{what}: the system is {A.rows} x {A.cols}, not square")
    if n == 0:
        return sm.zeros(0, B.cols)
    if A == sm.eye(n):
        return B.copy()
    if not checked and is_singular(A):
        raise ModelError(f"{what}: the matrix is singular for every configuration")
    X = sm.zeros(n, B.cols)
    for rows, cols in _blocks(A):
        if len(rows) != len(cols):
            raise ModelError(f"{what}: the matrix is structurally singular")
        Ab = A.extract(rows, cols)
        Bb = B.extract(rows, list(range(B.cols)))
        if len(rows) <= _CRAMER_MAX:
            Xb = _cramer(Ab, Bb)
        else:
            Xb = Ab.LUsolve(Bb)
        for a, c in enumerate(cols):
            X[c, :] = Xb[a, :]
    return X


def _over(num: Any, den: Any) -> Any:
    """``num / den``: the expression sympy's division gives, formed directly when ``den``
    is a sum of two terms.

    For such a ``den``, sympy's ``Pow(den, -1)`` asks whether either term is infinite
    (``Add._eval_power``), and for trigonometric functions of dynamic symbols that one
    question costs milliseconds, more than a whole 2 x 2 solve. A determinant or pivot
    of a mass matrix is finite wherever the matrix is, so the answer would not change
    the result: here the reciprocal is built unevaluated and the product put in
    sympy's canonical order (``_mulsort``), the same tree the division would give. Any
    other case is left to sympy.
    """
    from sympy.core.mul import _mulsort

    if num == 0:
        return sm.S.Zero
    if not (den.is_Add and len(den.args) == 2) or den.is_number or num.is_Number:
        return num / den
    coeff, factors = sm.S.One, [num]
    if num.is_Mul:
        coeff, rest = num.as_coeff_Mul()
        factors = list(rest.args) if rest.is_Mul else [rest]
    if any(f.as_base_exp()[0] == den or f.is_Number for f in factors):
        return num / den
    args = [*factors, sm.Pow(den, -1, evaluate=False)]
    _mulsort(args)
    if coeff is not sm.S.One:
        args.insert(0, coeff)
    return sm.Mul._from_args(args)


def _det2(a: Any, b: Any, c: Any) -> Any:
    """``a c - b²``, the expression sympy gives, without its infinity query on squaring a
    two-term ``b`` (see :func:`_over`): the square is built unevaluated and the sum put
    in sympy's canonical order (``_addsort``) when its two terms cannot combine."""
    from sympy.core.add import _addsort

    ac = a * c
    if not (b.is_Add and len(b.args) == 2) or b.is_number or ac.is_Add or ac.is_Number:
        return ac - b * b
    sq = sm.Pow(b, 2, evaluate=False)
    if ac.as_coeff_Mul()[1] == sq:
        return ac - b * b
    terms = [ac, sm.Mul._from_args((sm.S.NegativeOne, sq))]
    _addsort(terms)
    return sm.Add._from_args(terms)


def _small_solve(A: sm.Matrix, B: sm.Matrix, what: str) -> sm.Matrix:
    """``A X = B`` for a symmetric 1 x 1 or 2 x 2 ``A`` (lower triangle) by Cramer's rule,
    :math:`X = \\mathrm{adj}(A)\\,B / \\det A`, one division per entry."""
    det = A[0, 0] if A.rows == 1 else _det2(A[0, 0], A[1, 0], A[1, 1])
    if det == 0:
        raise ModelError(f"{what}: the matrix is singular for every configuration")
    if A.rows == 1:
        return B.applyfunc(lambda b: _over(b, det))
    a, b, c = A[0, 0], A[1, 0], A[1, 1]
    X = sm.zeros(2, B.cols)
    for k in range(B.cols):
        f0, f1 = B[0, k], B[1, k]
        X[0, k] = _over(c * f0 - b * f1, det)
        X[1, k] = _over(a * f1 - b * f0, det)
    return X


def solve_symmetric(A: sm.Matrix, B: sm.Matrix, *, what: str = "the mass matrix") -> sm.Matrix:
    """Solve ``A X = B`` for a symmetric positive definite symbolic ``A`` (a mass matrix).

    ``A`` is split into its independent diagonal blocks (the nonzero pattern) and each
    block is factored as :math:`L D L^\\top` without pivoting
    (:func:`kanedyn.spatial.plucker.solve_spd`, the solve of the articulated-body
    recursion: structural zeros skipped, nothing multiplied out, one reciprocal per
    pivot). A block of size 1 or 2 is solved by Cramer's rule instead
    (:func:`_small_solve`), whose explicit quotients have no nested fractions. For
    a positive definite ``A`` the pivots are :math:`d_k = \\Delta_k / \\Delta_{k-1}`,
    the ratios of its leading principal minors, which are positive: so no pivot
    vanishes where ``A`` is regular, the 0/0 hazard of a symbolic LU with pivoting on a
    general matrix (sympy issue #9641) cannot occur, and no pivot has to be tested for
    zero. A mass matrix is positive definite wherever the speeds are independent: it
    is the matrix of the kinetic energy :math:`T = \\tfrac12 u^\\top M u`
    (:math:`\\tilde M = T^\\top M T` after eliminating dependent speeds).

    Only the lower triangle of ``A`` is read. The result is explicit (in the symbols
    of ``A`` and ``B``), and nothing is expanded or simplified. For a general
    (unsymmetric or indefinite) matrix use :func:`solve_linear`.

    Parameters
    ----------
    A : Matrix, (n, n)
        Symmetric and positive definite for the values of its symbols of interest.
    B : Matrix, (n, k)
    what : str
        Names the system in the error message.

    Raises
    ------
    ModelError
        If ``A`` is not square, or a pivot is identically zero (``A`` singular).
    """
    n = A.rows
    if A.cols != n or B.rows != n:
        raise ModelError(f"{what}: the system is {A.rows} x {A.cols} with {B.rows} rows")
    X = sm.zeros(n, B.cols)
    cols = list(range(B.cols))
    for rows, rows_c in _blocks(A):
        if len(rows) != len(rows_c):
            raise ModelError(f"{what}: the matrix is structurally singular")
        if rows != rows_c:
            raise ModelError(f"{what}: the nonzero pattern is not symmetric")
        Ab, Bb = A.extract(rows, rows), B.extract(rows, cols)
        if len(rows) <= 2:
            Xb = _small_solve(Ab, Bb, what)
        else:
            try:
                Xc = solve_spd(Ab.tolist(), [list(Bb[:, c]) for c in cols])
            except ZeroDivisionError:
                raise ModelError(
                    f"{what}: the matrix is singular for every configuration"
                ) from None
            Xb = sm.Matrix([[Xc[c][i] for c in cols] for i in range(len(rows))])
        for a, r in enumerate(rows):
            X[r, :] = Xb[a, :]
    return X


def _linear_coefficients(exprs: sm.Matrix, xs: Sequence, *, what: str, of: str) -> sm.Matrix:
    """Jacobian of ``exprs`` with respect to ``xs``; raise unless it is free of ``xs``."""
    if not xs:
        return sm.zeros(exprs.rows, 0)
    J = exprs.jacobian(list(xs))
    if J.has(*xs):
        # An expression such as (sin^2 + cos^2 - 1) u^2 may still be linear;
        # decide on the second derivatives numerically.
        H = sm.Matrix([[J[i, j].diff(x) for x in xs] for i in range(J.rows) for j in range(J.cols)])
        if any(np.max(np.abs(h)) > 1e-12 for h in _random_evaluations(H)):
            bad = [i for i in range(J.rows) if J[i, :].has(*xs)]
            raise ModelError(
                f"{what} {bad} {'is' if len(bad) == 1 else 'are'} not linear in {of}; "
                f"Kane's method needs {what} of the form A x + b in {of}"
            )
        J = J.xreplace(dict.fromkeys(xs, 0))
    return J


# ---------------------------------------------------------------------------
# Stages
# ---------------------------------------------------------------------------


def _as_mass(body: Any) -> Mass:
    if isinstance(body, Mass):
        return body
    if isinstance(body, RigidBody):
        return Mass(str(body.name), body.mass, body.masscenter, body.frame, body.central_inertia)
    if isinstance(body, Particle):
        return Mass(str(body.name), body.mass, body.masscenter)
    raise ModelError(f"bodies: {body!r} is not a kanedyn Mass or a sympy RigidBody or Particle")


def _as_load(load: Any, k: int) -> tuple[Point | ReferenceFrame, Vector]:
    try:
        where, vec = load
    except (TypeError, ValueError):
        raise ModelError(
            f"loads[{k}]: expected a (Point, Vector) or (ReferenceFrame, Vector) pair"
        ) from None
    if not isinstance(where, Point | ReferenceFrame) or not isinstance(vec, Vector | int):
        raise ModelError(
            f"loads[{k}]: expected a (Point, Vector) or (ReferenceFrame, Vector) pair, "
            f"got ({type(where).__name__}, {type(vec).__name__})"
        )
    return where, Vector(0) if vec == 0 else vec


def _check_speeds_and_coordinates(q_ind, q_dep, u_ind, u_dep) -> None:
    allsyms = [*q_ind, *q_dep, *u_ind, *u_dep]
    for s in allsyms:
        if not (isinstance(s, AppliedUndef) and s.args == (_t,)):
            raise ModelError(f"coordinates and speeds must be dynamic symbols of t, got {s!r}")
    if len(set(allsyms)) != len(allsyms):
        raise ModelError("q_ind, q_dep, u_ind and u_dep must be distinct dynamic symbols")
    if not u_ind:
        raise ModelError("u_ind: at least one independent speed is needed")


@attrs.frozen
class _Kinematics:
    """Kinematic differential equations solved for the coordinate rates."""

    K_qd: sm.Matrix  # (nq, nq)
    k: sm.Matrix  # (nq, 1), k = K_u u + k_0
    qdot: sm.Matrix  # (nq, 1), in q and all u
    qdot_map: dict  # q' -> qdot entry


def kinematics_at(kd_eqs: Sequence, q: Sequence, u: Sequence) -> _Kinematics:
    """:math:`K_{\\dot q} \\dot q + K_u u + k_0 = 0 \\Rightarrow \\dot q = -K_{\\dot q}^{-1}(K_u u + k_0)`."""
    kd = sm.Matrix(list(kd_eqs))
    qd = [qi.diff(_t) for qi in q]
    if kd.rows != len(q):
        raise ModelError(
            f"kd_eqs: {kd.rows} kinematic differential equations for {len(q)} coordinates; "
            "give one per coordinate"
        )
    if kd.has(*[ui.diff(_t) for ui in u]):
        raise ModelError("kd_eqs: the kinematic differential equations contain u'")
    # coefficients with respect to plain symbols (no dynamic-symbol bookkeeping)
    plain = {x: sm.Dummy() for x in [*qd, *u]}
    back = {v: k for k, v in plain.items()}
    kd_p = kd.xreplace(plain)
    K_qd = _linear_coefficients(kd_p, [plain[x] for x in qd], what="kd_eqs", of="q'")
    K_u = _linear_coefficients(kd_p, [plain[x] for x in u], what="kd_eqs", of="the speeds u")
    K_qd, K_u = K_qd.xreplace(back), K_u.xreplace(back)
    if K_qd.has(*u) or K_u.has(*qd):
        raise ModelError("kd_eqs: the kinematic differential equations are not linear in q' and u")
    k = kd.xreplace(dict.fromkeys(qd, 0))
    if is_singular(K_qd):
        raise ModelError(
            "kd_eqs: the kinematic differential equations cannot be solved for q' "
            "(their q' coefficient matrix is singular), so the speeds are not independent"
        )
    if _column_rank(K_u) < len(q):
        raise ModelError(
            "kd_eqs: the definition of the generalized speeds is singular: the speeds' "
            "coefficient matrix has rank below the number of coordinates, so the speeds "
            "are not independent combinations of q'"
        )
    qdot = solve_linear(K_qd, -k, what="kd_eqs (solving for q')", checked=True)
    return _Kinematics(K_qd, k, qdot, dict(zip(qd, qdot, strict=True)))


@attrs.frozen
class _Constraints:
    """Velocity constraints :math:`f_v = B_d u_d + B_i u_i + b = 0` and their rate.

    ``f_c``, ``B`` and ``b`` are in the user's symbols; ``raw`` holds
    ``(f_c, B, b, h)`` in the plain symbols of :class:`RawEquations`.
    """

    f_c: sm.Matrix  # (nc, 1)
    B: sm.Matrix  # (nm, nu)
    b: sm.Matrix  # (nm, 1)
    raw: tuple  # f_c, B, b, h (nm, 1): d/dt f_v at u' = 0 (contains q')


def _constraints(
    configuration_constraints, velocity_constraints, q_dep, u_ind, u_dep, kin, comp, u_raw, back
) -> _Constraints:
    f_c = sm.Matrix(list(configuration_constraints))
    if f_c.rows != len(q_dep):
        raise ModelError(
            f"configuration_constraints: {f_c.rows} constraints for {len(q_dep)} dependent "
            "coordinates q_dep; give one per dependent coordinate"
        )
    if f_c.rows and f_c.has(*kin.qdot_map):
        raise ModelError("configuration_constraints: must not contain coordinate rates q'")
    f_c_raw = f_c.applyfunc(comp.scalar)
    f_v = sm.Matrix(list(velocity_constraints))
    if f_v.rows == 0 and u_dep and f_c.rows == len(u_dep):
        # configuration constraints without their velocity form: use d/dt f_c(q) = 0 (the
        # q' are replaced by the kinematic equations below), rather than ignoring them
        f_v = f_c.diff(_t)
    if f_v.rows != len(u_dep):
        raise ModelError(
            f"velocity_constraints: {f_v.rows} constraints for {len(u_dep)} dependent speeds "
            "u_dep; give one per dependent speed"
        )
    nu = len(u_ind) + len(u_dep)
    if f_v.rows == 0:
        z = sm.zeros(0, nu), sm.zeros(0, 1)
        return _Constraints(f_c, z[0], z[1], (f_c_raw, z[0], z[1], z[1]))
    # in plain symbols, with q' replaced by the kinematic equations
    f_v = f_v.applyfunc(comp.scalar)
    B = _linear_coefficients(f_v, u_raw, what="velocity_constraints", of="the speeds u")
    if is_singular(B[:, len(u_ind) :]):
        raise ModelError(
            "velocity_constraints: the dependent-speed solve is singular for every "
            "configuration: the constraints do not determine u_dep (their u_dep "
            "coefficient matrix is singular)"
        )
    b = f_v.xreplace(dict.fromkeys(u_raw, 0))
    # h = d/dt (B u + b) at u' = 0: the chain rule through q (and specified inputs)
    h = sm.Matrix(
        [
            comp.rate(sm.Add(*[B[i, j] * u_raw[j] for j in range(nu) if B[i, j] != 0], b[i]))
            for i in range(B.rows)
        ]
    )
    return _Constraints(f_c, B.xreplace(back), b.xreplace(back), (f_c_raw, B, b, h))


@attrs.frozen
class _Motion:
    """Velocities of one mass (q' eliminated) and their partials for all speeds."""

    v: Vector
    w: Vector
    v_r: tuple  # of Vector, one per speed
    w_r: tuple


def _motion(N: ReferenceFrame, mass: Mass, u: Sequence, qdot_map: dict) -> _Motion:
    try:
        v = mass.point.vel(N).xreplace(qdot_map)
    except ValueError as exc:
        raise ModelError(
            f"bodies: the velocity of {mass.name}'s mass centre is undefined: {exc}"
        ) from None
    w = Vector(0) if mass.frame is None else mass.frame.ang_vel_in(N).xreplace(qdot_map)
    v_r = tuple(v.diff(ur, N, var_in_dcm=False) for ur in u)
    w_r = tuple(w.diff(ur, N, var_in_dcm=False) for ur in u)
    return _Motion(v, w, v_r, w_r)


def _matmul(A: sm.Matrix, B: sm.Matrix) -> sm.Matrix:
    """Matrix product as plain sums of products, skipping zero factors."""
    out = sm.zeros(A.rows, B.cols)
    for i in range(A.rows):
        for j in range(B.cols):
            terms = [A[i, k] * B[k, j] for k in range(A.cols) if A[i, k] != 0 and B[k, j] != 0]
            out[i, j] = sm.Add(*terms)
    return out


def _simplified(M: sm.Matrix, budget: float | None, start: float) -> sm.Matrix:
    """Apply ``sympy.simplify`` entry by entry until ``budget`` seconds have passed."""
    out = M.copy()
    for k in sorted(range(len(out)), key=lambda k: sm.count_ops(out[k])):
        if budget is not None and time.perf_counter() - start > budget:
            break
        out[k] = sm.simplify(out[k])
    return out


class _Rates(Lookup):
    """Plain symbol -> its time derivative; a specified input's rate is made on demand."""

    def __init__(self, problem: KaneProblem) -> None:
        super().__init__()
        self._problem = problem

    def __missing__(self, x):
        if not self._problem._specified:
            return None
        back = {v: k for k, v in self._problem._specified.items()}
        if x not in back:
            return None
        d = self._problem._specify(back[x].diff(_t))
        self[x] = d
        return d


# ---------------------------------------------------------------------------
# The problem
# ---------------------------------------------------------------------------


class KaneProblem:
    """Kane's equations of motion with dependent coordinates and speeds.

    Parameters
    ----------
    frame : ReferenceFrame
        The inertial frame N.
    q_ind : sequence of dynamic symbols
        Independent generalized coordinates.
    u_ind : sequence of dynamic symbols
        Independent generalized speeds.
    kd_eqs : sequence of expressions
        Kinematic differential equations, each ``= 0``, linear in :math:`\\dot q`
        and :math:`u`, one per coordinate (independent and dependent). The speeds
        may be any invertible linear combination of the coordinate rates, and
        there may be more speeds than coordinates (e.g. wheel spin speeds).
    q_dep : sequence of dynamic symbols, optional
        Dependent coordinates, fixed by ``configuration_constraints``.
    configuration_constraints : sequence of expressions, optional
        Holonomic constraints :math:`f_c(q) = 0`, one per dependent coordinate.
        They are used by linearization; the dynamics use their time derivatives.
        With dependent speeds ``u_dep`` (one per constraint) and no
        ``velocity_constraints``, the velocity constraints are
        :math:`\\dot f_c = 0`, formed here (closed kinematic loops).
    u_dep : sequence of dynamic symbols, optional
        Dependent speeds, fixed by ``velocity_constraints``.
    velocity_constraints : sequence of expressions, optional
        Motion constraints :math:`f_v(q, u) = 0`, linear in the speeds, one per
        dependent speed.
    bodies : sequence of RigidBody, Particle or :class:`Mass`
    loads : sequence of (Point, Vector) or (ReferenceFrame, Vector)
        Forces applied at points and torques applied to frames.
    u_auxiliary : sequence of dynamic symbols, optional
        Auxiliary speeds, as sympy's ``KanesMethod`` takes them: speeds of motions the
        system cannot make, written into the velocities by the user to bring
        non-working forces into evidence. The equations of motion are formed with them
        zero; :attr:`auxiliary_eqs` holds their Kane equations
        (:mod:`kanedyn.symbolic.auxiliary`).
    simplify : bool, optional
        Apply ``sympy.simplify`` to the mass matrix and forcing entries
        (default False; expressions are otherwise left as built).
    time_budget : float, optional
        Seconds allowed for ``simplify``; entries are simplified smallest first
        and the rest are left as they are once the budget is spent (checked
        between entries).

    Notes
    -----
    The constructor runs the stages of the method in order (kinematic
    differential equations, velocity constraints, partial velocities,
    generalized forces); the results are attributes, and eliminated forms are
    formed when first read. The unconstrained equations (``.raw``) are

    .. math::

        F_r + F^*_r = F_r(q,\\dot q,u) - \\sum_s M_{rs}\\dot u_s
        + F^*_r|_{\\dot u = 0}, \\qquad r = 1..n,

    and the constrained ones, with :math:`T = [I; A]` (Kane & Levinson 1985;
    seed 004),

    .. math::

        \\underbrace{T^\\top M T}_{\\tilde M} \\dot u_i
        = T^\\top \\left(F - M \\begin{bmatrix} 0 \\\\ c \\end{bmatrix}\\right),
        \\qquad \\dot u_d = A \\dot u_i + c, \\quad c = -B_d^{-1} h.

    Examples
    --------
    A particle pendulum:

    >>> import sympy as sm
    >>> from sympy.physics.mechanics import Particle, Point, ReferenceFrame, dynamicsymbols
    >>> q, u = dynamicsymbols("q u")
    >>> m, l, g = sm.symbols("m l g")
    >>> N = ReferenceFrame("N"); A = N.orientnew("A", "Axis", (q, N.z))
    >>> A.set_ang_vel(N, u * N.z)
    >>> O = Point("O"); O.set_vel(N, 0)
    >>> P = O.locatenew("P", l * A.x); _ = P.v2pt_theory(O, N, A)
    >>> kp = KaneProblem(N, [q], [u], [q.diff() - u],
    ...                  bodies=[Particle("p", P, m)], loads=[(P, m * g * N.x)])
    >>> sm.simplify(kp.forcing[0] / kp.mass_matrix[0])
    -g*sin(q(t))/l
    """

    def __init__(
        self,
        frame: ReferenceFrame,
        q_ind: Sequence,
        u_ind: Sequence,
        kd_eqs: Sequence,
        *,
        q_dep: Sequence = (),
        configuration_constraints: Sequence = (),
        u_dep: Sequence = (),
        velocity_constraints: Sequence = (),
        bodies: Sequence = (),
        loads: Sequence = (),
        u_auxiliary: Sequence = (),
        simplify: bool = False,
        time_budget: float | None = None,
    ) -> None:
        if not isinstance(frame, ReferenceFrame):
            raise ModelError(f"frame: expected a ReferenceFrame, got {type(frame).__name__}")
        q_ind, q_dep, u_ind, u_dep = (tuple(x) for x in (q_ind, q_dep, u_ind, u_dep))
        _check_speeds_and_coordinates(q_ind, q_dep, u_ind, u_dep)
        self.frame = frame
        self.q_ind, self.q_dep, self.u_ind, self.u_dep = q_ind, q_dep, u_ind, u_dep
        self.q = sm.Matrix([*q_ind, *q_dep])
        self.u = sm.Matrix([*u_ind, *u_dep])
        self.bodies = tuple(_as_mass(b) for b in bodies)
        self.loads = tuple(_as_load(ld, k) for k, ld in enumerate(loads))
        self._simplify = bool(simplify)
        self._time_budget = time_budget
        u = list(self.u)

        self.u_auxiliary = check_auxiliary(u_auxiliary, u)
        self._kin = kinematics_at(kd_eqs, list(self.q), u)
        plain, vel = self._plain_symbols()
        raw_u = [self._to_raw[x] for x in u]
        back = {v: k for k, v in self._to_raw.items()}
        self._con = _constraints(
            configuration_constraints,
            velocity_constraints,
            q_dep,
            u_ind,
            u_dep,
            self._kin,
            vel,
            raw_u,
            back,
        )
        # the equations of motion are those with the auxiliary speeds zero
        Fr, Fstar, M = generalized_forces(vel, self.bodies, self.loads, raw_u, plain.vector)
        self.raw = self._raw_equations(Fr, Fstar, M)

    # -- the unconstrained equations in stand-in symbols -----------------------

    def _plain_symbols(self) -> tuple[Components, Components]:
        """Plain symbols for q, q', u, u' and specified inputs; two converters.

        The first keeps q' as a symbol; the second (for velocities) writes q' by the
        kinematic differential equations and sets the auxiliary speeds to zero.
        """
        q, u = list(self.q), list(self.u)
        qd = [x.diff(_t) for x in q]
        ud = [x.diff(_t) for x in u]
        to_raw: dict = {}
        for names, xs in (("qd", qd), ("ud", ud), ("q", q), ("u", u)):
            for x in xs:
                to_raw[x] = sm.Dummy(f"{names}_{x}")
        self._to_raw = to_raw
        self._specified: dict = {}
        rates = _Rates(self)
        rates.update({to_raw[x]: to_raw[x.diff(_t)] for x in q})
        rates.update({to_raw[x]: sm.S.Zero for x in u})  # derivatives at u' = 0
        aux = dict.fromkeys(self.u_auxiliary, sm.S.Zero)
        rule = {**to_raw, **aux}
        plain = Components(self.frame, rule, rates, self._specify)
        qdot = [plain.scalar(e) for e in self._kin.qdot]
        vel_rule = {**rule, **dict(zip(qd, qdot, strict=True))}
        vel = Components(self.frame, vel_rule, rates, self._specify)
        vel._dcm = plain._dcm  # direction cosines hold no rates: share them
        self._plain = plain
        return plain, vel

    def _specify(self, f) -> Any:
        """The plain symbol of a specified input (a function of t or its rate)."""
        if f in self._specified:
            return self._specified[f]
        coords = set(self.q)
        if isinstance(f, sm.Derivative):
            if f.expr in coords and f.derivative_count > 1:
                raise ModelError(
                    f"second derivative {f} of a coordinate appears in the "
                    "kinematics; define velocities with u or q' only"
                )
            if f.variables != (_t,) * f.derivative_count:
                return None
        elif f.args != (_t,):
            return None
        d = sm.Dummy(str(f))
        self._specified[f] = d
        return d

    def _raw_equations(self, Fr, Fstar, M) -> RawEquations:
        q, u = list(self.q), list(self.u)
        to_raw = self._to_raw
        K_qd = self._kin.K_qd.applyfunc(self._plain.scalar)
        k = self._kin.k.applyfunc(self._plain.scalar)
        f_c, B, b, h = self._con.raw
        pieces = (K_qd, k, f_c, B, b, h, M, Fr, Fstar)
        consts = set()
        for P in pieces:
            consts |= P.free_symbols
        consts -= set(to_raw.values())
        specified = set(self._specified.values())
        params = sorted(consts, key=str)
        public = {v: k for k, v in to_raw.items()}
        public.update({v: k for k, v in self._specified.items()})
        public.update({p: p for p in consts - specified})
        return RawEquations(
            q=tuple(to_raw[x] for x in q),
            qd=tuple(to_raw[x.diff(_t)] for x in q),
            u=tuple(to_raw[x] for x in u),
            ud=tuple(to_raw[x.diff(_t)] for x in u),
            n_q_ind=len(self.q_ind),
            n_u_ind=len(self.u_ind),
            parameters=tuple(params),
            K_qd=K_qd,
            k=k,
            f_c=f_c,
            B=B,
            b=b,
            h=h,
            M=M,
            F=Fr + Fstar,
            Fr=Fr,
            public=public,
        )

    @property
    def parameters(self) -> tuple:
        """Constants and specified functions of time in the equations, sorted by name.

        This is the order of the ``params`` argument of :meth:`rhs`.
        """
        return tuple(self.raw.public[p] for p in self.raw.parameters)

    def _public(self, X):
        rule = {k: v for k, v in self.raw.public.items() if k is not v}
        return X.xreplace(rule)

    # -- eliminated (constrained) symbolic forms, formed on first access -------
    #
    # Each substitution below is one xreplace pass over a small expression with
    # a rule whose values are not traversed again, so the results are shared
    # graphs of the small pieces rather than expanded trees.

    @functools.cached_property
    def _elimination(self) -> dict:
        """:math:`A`, :math:`B_s`, :math:`c`, :math:`\\dot q` and the substitution rule."""
        raw = self.raw
        p, m = raw.n_u_ind, raw.n_u_dep
        B, b, h = (self._public(X) for X in (raw.B, raw.b, raw.h))
        if m:
            X = solve_linear(
                B[:, p:],
                (-B[:, :p]).row_join(-b).row_join(-h),
                what="velocity_constraints (solving for u_dep)",
                checked=True,
            )
            A, B_s, c = X[:, :p], X[:, p], X[:, p + 1]
        else:
            A, B_s, c = sm.zeros(0, p), sm.zeros(0, 1), sm.zeros(0, 1)
        u_d = _matmul(A, sm.Matrix(self.u_ind)) + B_s
        rule = dict(zip(self.u_dep, u_d, strict=True))
        qdot = self._kin.qdot.xreplace(rule)
        rule.update(zip([x.diff(_t) for x in self.q], qdot, strict=True))
        # the same rule from the plain symbols: one pass gives the user's symbols
        from_raw = {k: v for k, v in raw.public.items() if k is not v}
        from_raw.update(zip(raw.u[p:], u_d, strict=True))
        from_raw.update(zip(raw.qd, qdot, strict=True))
        return {"A": A, "B_s": B_s, "u_d": u_d, "qdot": qdot, "c": c.xreplace(rule),
                "rule": rule, "from_raw": from_raw}  # fmt: skip

    def _constrained(self, X: sm.Matrix) -> sm.Matrix:
        """:math:`T^\\top X` with :math:`T = [I; A]`, X in the user's symbols."""
        p = self.raw.n_u_ind
        if not self.raw.n_u_dep:
            return X
        return X[:p, :] + _matmul(self.A_sr.T, X[p:, :])

    @functools.cached_property
    def _reduced(self) -> dict:
        """:math:`\\tilde M` and the forcing (seed 004; Kane & Levinson 1985)."""
        raw, e = self.raw, self._elimination
        p = raw.n_u_ind
        M = self._public(raw.M)
        F = raw.F.xreplace(e["from_raw"])
        if raw.n_u_dep:
            F = F - _matmul(M[:, p:], e["c"])
            MT = M[:, :p] + _matmul(M[:, p:], e["A"])
            Mt, forcing = self._constrained(MT), self._constrained(F)
        else:
            Mt, forcing = M, F
        if self._simplify:
            start = time.perf_counter()
            Mt = _simplified(Mt, self._time_budget, start)
            forcing = _simplified(forcing, self._time_budget, start)
        return {"M": Mt, "forcing": forcing}

    @functools.cached_property
    def auxiliary_eqs(self) -> sm.Matrix:
        """``F̃_r + F̃*_r`` for each auxiliary speed, (n_aux, 1), ``= 0`` on a motion; in
        q, all speeds and their rates ``u'`` (substitute the solution of the equations of
        motion and of the constraints to solve them for the forces they bring in)."""
        return auxiliary_equations(
            self.frame, self.bodies, self.loads, self.u_auxiliary, self._kin.qdot_map
        )

    @property
    def A_sr(self) -> sm.Matrix:
        """Dependent-speed coefficients :math:`A_{sr}`, shape (n_dep, n_ind), in q."""
        return self._elimination["A"]

    @property
    def B_s(self) -> sm.Matrix:
        """Dependent-speed offsets :math:`B_s`, shape (n_dep, 1), in q."""
        return self._elimination["B_s"]

    @property
    def u_dep_solution(self) -> dict:
        """Dependent speeds in q and the independent speeds, :math:`u_d = A u_i + B_s`."""
        return dict(zip(self.u_dep, self._elimination["u_d"], strict=True))

    @property
    def qdot_solution(self) -> dict:
        """Coordinate rates :math:`\\dot q` in q and the independent speeds."""
        qd = self._elimination["qdot"]
        return dict(zip([x.diff(_t) for x in self.q], qd, strict=True))

    @functools.cached_property
    def _motions(self) -> tuple:
        motion_map = {**self._kin.qdot_map, **dict.fromkeys(self.u_auxiliary, 0)}
        return tuple(_motion(self.frame, b, list(self.u), motion_map) for b in self.bodies)

    @functools.cached_property
    def partial_velocities(self) -> dict:
        """Nonholonomic partial velocities of each mass centre, :math:`\\tilde v_r = v_r + \\sum_s v_s A_{sr}`.

        A dict ``body name -> tuple of Vector``, one per independent speed.
        """
        return {
            b.name: self._tilde(mo.v_r) for b, mo in zip(self.bodies, self._motions, strict=True)
        }

    @functools.cached_property
    def partial_angular_velocities(self) -> dict:
        """Nonholonomic partial angular velocities, :math:`\\tilde\\omega_r = \\omega_r + \\sum_s \\omega_s A_{sr}`."""
        return {
            b.name: self._tilde(mo.w_r) for b, mo in zip(self.bodies, self._motions, strict=True)
        }

    def _tilde(self, vecs: Sequence[Vector]) -> tuple:
        p = len(self.u_ind)
        A = self.A_sr
        out = []
        for r in range(p):
            v = vecs[r]
            for s in range(A.rows):
                if A[s, r] != 0:
                    v = v + A[s, r] * vecs[p + s]
            out.append(v)
        return tuple(out)

    @functools.cached_property
    def Fr(self) -> sm.Matrix:
        """Generalized active forces :math:`\\tilde F_r`, shape (n_ind, 1)."""
        return self._constrained(self.raw.Fr.xreplace(self._elimination["from_raw"]))

    @functools.cached_property
    def Fr_star(self) -> sm.Matrix:
        """Generalized inertia forces :math:`\\tilde F^*_r`, shape (n_ind, 1), linear in :math:`\\dot u_i`."""
        red = self._reduced
        ud_i = sm.Matrix([x.diff(_t) for x in self.u_ind])
        return red["forcing"] - self.Fr - red["M"] * ud_i

    @property
    def mass_matrix(self) -> sm.Matrix:
        """:math:`\\tilde M`, shape (n_ind, n_ind): ``mass_matrix * d/dt(u_ind) = forcing``."""
        return self._reduced["M"]

    @property
    def forcing(self) -> sm.Matrix:
        """Right-hand side, shape (n_ind, 1), with dependent speeds and rates eliminated.

        The entries share the dependent-speed solution as common subexpressions;
        for a large nonholonomic system (the bicycle) written out as a tree they
        are very large, so evaluate numerically with :meth:`rhs` rather than by
        lambdifying this matrix.
        """
        return self._reduced["forcing"]

    @functools.cached_property
    def _solution(self) -> sm.Matrix:
        return solve_symmetric(self.mass_matrix, self.forcing, what="the mass matrix")

    def solve(self) -> sm.Matrix:
        """The explicit accelerations :math:`\\dot u_i = \\tilde M^{-1}\\,\\mathrm{forcing}`,
        shape (n_ind, 1), in the order of ``u_ind``.

        :math:`\\tilde M` is symmetric positive definite (the matrix of the kinetic
        energy in the independent speeds), so the solve is an :math:`L D L^\\top`
        factorization without pivoting (:func:`solve_symmetric`), whose pivots vanish only
        where :math:`\\tilde M` is singular. Nothing is expanded or simplified; the
        result is formed once and kept. For numbers at a state, :meth:`rhs` is cheaper.
        """
        return self._solution

    @functools.cached_property
    def mass_matrix_full(self) -> sm.Matrix:
        """Mass matrix for the state [q; u_ind], shape (nq + n_ind, nq + n_ind)."""
        return sm.diag(sm.eye(len(self.q)), self.mass_matrix)

    @functools.cached_property
    def forcing_full(self) -> sm.Matrix:
        """Forcing for the state [q; u_ind]: :math:`[\\dot q(q, u_i); \\mathrm{forcing}]`."""
        return self._elimination["qdot"].col_join(self.forcing)

    # -- numeric evaluation ------------------------------------------------------

    @functools.cached_property
    def _numeric(self):
        raw = self.raw
        qs, qds, us, ps = list(raw.q), list(raw.qd), list(raw.u), list(raw.parameters)
        lam = functools.partial(sm.lambdify, modules="numpy", cse=True)
        return (
            lam([qs, us, ps], [raw.B, raw.b]),
            lam([qs, us, ps], [raw.K_qd, raw.k]),
            lam([qs, qds, us, ps], [raw.M, raw.F, raw.h]),
        )

    def _param_values(self, params) -> list:
        names = self.parameters
        if params is None:
            params = {}
        if isinstance(params, Mapping):
            missing = [str(p) for p in names if p not in params]
            if missing:
                raise ModelError(f"params: no value for {', '.join(missing)}")
            return [params[p] for p in names]
        params = list(np.ravel(np.asarray(params, dtype=float)))
        if len(params) != len(names):
            raise ModelError(
                f"params: expected {len(names)} values in the order "
                f"{[str(p) for p in names]}, got {len(params)}"
            )
        return params

    def _solve_numeric(self, A: np.ndarray, b: np.ndarray, what: str, q) -> np.ndarray:
        if _numerically_singular(A):
            raise ModelError(f"{what} is singular at q = {np.round(q, 12).tolist()}")
        return np.linalg.solve(A, b)

    def dependent_speeds(self, q, u_ind, params=None) -> np.ndarray:
        """Numeric :math:`u_d = -B_d^{-1}(B_i u_i + b)` at one state, shape (n_dep,)."""
        raw = self.raw
        q = np.asarray(q, dtype=float)
        u_i = np.asarray(u_ind, dtype=float)
        p, m = raw.n_u_ind, raw.n_u_dep
        if m == 0:
            return np.zeros(0)
        pv = self._param_values(params)
        u0 = np.concatenate([u_i, np.zeros(m)])
        Bm, bv = (np.asarray(x, dtype=float) for x in self._numeric[0](q, u0, pv))
        return self._solve_numeric(
            Bm[:, p:],
            -(Bm[:, :p] @ u_i + bv.ravel()),
            "velocity_constraints: the dependent-speed solve",
            q,
        )

    def rhs(self, q, u_ind, params=None, *, full: bool = False) -> np.ndarray:
        """Numeric state derivative :math:`[\\dot q; \\dot u_i]` at one state.

        Parameters
        ----------
        q : array_like, (nq,)
            All coordinates, independent first.
        u_ind : array_like, (n_ind,)
        params : mapping or sequence, optional
            Values of :attr:`parameters` (a dict by symbol, or a sequence in that
            order).
        full : bool, optional
            Also return :math:`\\dot u_d` at the end.

        Returns
        -------
        ndarray, (nq + n_ind,) or (nq + nu,)

        Raises
        ------
        ModelError
            If the kinematic, dependent-speed or mass-matrix solve is singular at
            this state.
        """
        raw = self.raw
        q = np.asarray(q, dtype=float)
        u_i = np.asarray(u_ind, dtype=float)
        if q.shape != (len(raw.q),) or u_i.shape != (raw.n_u_ind,):
            raise ModelError(
                f"rhs: expected q of length {len(raw.q)} and u_ind of length {raw.n_u_ind}"
            )
        pv = self._param_values(params)
        p, m = raw.n_u_ind, raw.n_u_dep
        f_con, f_kin, f_dyn = self._numeric
        A = np.zeros((m, p))
        u = np.concatenate([u_i, np.zeros(m)])
        if m:
            Bm, bv = (np.asarray(x, dtype=float) for x in f_con(q, u, pv))
            B_d = Bm[:, p:]
            what = "velocity_constraints: the dependent-speed solve"
            X = self._solve_numeric(B_d, -np.column_stack([Bm[:, :p], bv.ravel()]), what, q)
            A = X[:, :p]
            u[p:] = A @ u_i + X[:, p]
        K_qd, k = (np.asarray(x, dtype=float) for x in f_kin(q, u, pv))
        qd = self._solve_numeric(K_qd, -k.ravel(), "kd_eqs: the solve for q'", q)
        M, F, h = (np.asarray(x, dtype=float) for x in f_dyn(q, qd, u, pv))
        F = F.ravel()
        c = np.zeros(m)
        if m:
            c = self._solve_numeric(B_d, -h.ravel(), "velocity_constraints", q)
            F = F - M[:, p:] @ c
        T = np.vstack([np.eye(p), A])
        ud_i = self._solve_numeric(T.T @ M @ T, T.T @ F, "the mass matrix", q)
        out = [qd, ud_i]
        if full:
            out.append(A @ ud_i + c)
        return np.concatenate(out)

    def lambdify(self, params=None):
        """A numeric function ``f(q, u_ind, params) -> [q'; u_ind']``.

        With ``params`` given here, the function takes ``(q, u_ind)`` only.
        """
        if params is None:
            return self.rhs
        pv = self._param_values(params)

        def f(q, u_ind):
            return self.rhs(q, u_ind, pv)

        return f

    # -- teaching view ------------------------------------------------------------

    def stages(self, *, simplify: bool = True) -> Any:
        """The derivation stage by stage, as :class:`kanedyn.symbolic.stages.Stages`
        (``print`` gives plain Unicode text, ``.markdown()``, ``.latex()`` a document
        that compiles): the kinematic equations :math:`\\dot q`, the dependent speeds,
        the nonholonomic partial velocities :math:`\\tilde v_r`, :math:`\\tilde\\omega_r`
        (components in the inertial frame), :math:`\\tilde F_r`, :math:`\\tilde F^*_r`, and
        the equations of motion :math:`\\tilde M \\dot u_i = \\mathrm{forcing}` (row by
        row up to three independent speeds). Functions of time print as plain symbols
        (``q1``, ``u̇1``); ``simplify``: ``sympy.simplify`` each entry (small problems)."""
        from kanedyn.symbolic.stages import EXPLICIT_UP_TO, Stage, Stages, latex

        names = {}
        for x in (*self.q, *self.u):
            name = sm.latex(sm.Symbol(x.func.__name__))  # q_{1}: the dots over the q
            base, _, sub = name.partition("_")
            names[x.diff(_t, 2)] = sm.Symbol(f"\\ddot{{{base}}}" + (f"_{sub}" if sub else ""))
            names[x.diff(_t)] = sm.Symbol(f"\\dot{{{base}}}" + (f"_{sub}" if sub else ""))
            names[x] = sm.Symbol(x.func.__name__)

        def plain(e: Any) -> Any:
            e = e.subs(names) if isinstance(e, sm.MatrixBase | sm.Basic) else e
            if simplify:
                e = e.applyfunc(sm.simplify) if isinstance(e, sm.MatrixBase) else sm.simplify(e)
            return e

        def vec(v: Vector) -> sm.ImmutableMatrix:
            return sm.ImmutableMatrix(plain(v.to_matrix(self.frame)))

        N = self.frame.name
        out = [
            Stage(
                "Kinematic equations",
                "The coordinate rates from the kinematic differential equations.",
                tuple((latex(names[x]), plain(e)) for x, e in self.qdot_solution.items()),
                (),
            )
        ]
        if self.u_dep:
            out.append(Stage(
                "Dependent speeds",
                "The dependent speeds from the velocity constraints, "
                "$u_d = A u_i$ (with $A$ = `A_sr`).",
                tuple((latex(names[x]), plain(e)) for x, e in self.u_dep_solution.items()),
                (),
            ))  # fmt: skip
        pv, pw = self.partial_velocities, self.partial_angular_velocities
        par = []
        for r in range(len(self.u_ind)):
            for b in self.bodies:
                par.append((f"\\tilde v_{{{r + 1}}}^{{\\mathrm{{{b.name}}}}}", vec(pv[b.name][r])))
                if b.frame is not None:
                    par.append((f"\\tilde\\omega_{{{r + 1}}}^{{\\mathrm{{{b.name}}}}}",
                                vec(pw[b.name][r])))  # fmt: skip
        out.append(Stage(
            "Partial velocities",
            "The nonholonomic partial velocity of each mass centre and partial angular "
            "velocity of each body for each independent speed $u_r$, "
            "$\\tilde v_r = v_r + \\sum_s v_s A_{sr}$ "
            f"(components in {N}).",
            tuple(par),
            (),
        ))  # fmt: skip
        forces = []
        for r in range(len(self.u_ind)):
            forces += [(f"\\tilde F_{{{r + 1}}}", plain(self.Fr[r])),
                       (f"\\tilde F^*_{{{r + 1}}}", plain(self.Fr_star[r]))]  # fmt: skip
        out.append(Stage(
            "Generalized active and inertia forces",
            "$\\tilde F_r = \\sum_i \\tilde v_r \\cdot F_i + \\tilde\\omega_r \\cdot T_i$ and "
            "$\\tilde F^*_r$, linear in the independent speeds' rates.",
            tuple(forces),
            (),
        ))  # fmt: skip
        M, F = plain(self.mass_matrix), plain(self.forcing)
        eqs: list[tuple[str, Any]] = [("\\tilde M", M), ("f", F)]
        rates = [names[x.diff(_t)] for x in self.u_ind]
        if len(rates) <= EXPLICIT_UP_TO:
            for r in range(len(rates)):
                lhs = sm.Add(*[M[r, c] * rates[c] for c in range(len(rates))])
                eqs.append(("0", F[r] - lhs))
        out.append(Stage(
            "Equations of motion",
            "$\\tilde F_r + \\tilde F^*_r = 0$: $\\tilde M \\dot u_i = f$ (`mass_matrix`, "
            "`forcing`)"
            + (", then row by row." if len(rates) <= EXPLICIT_UP_TO else "."),
            tuple(eqs),
            (),
        ))  # fmt: skip
        title = ", ".join(b.name for b in self.bodies)
        return Stages(title, tuple(out))

    def table(self, latex: bool = False) -> str:
        """Markdown table of partial velocities and generalized forces per speed.

        One row per independent speed :math:`u_r`: the nonholonomic partial
        velocity of each mass centre and partial angular velocity of each body,
        then :math:`\\tilde F_r` and :math:`\\tilde F^*_r`. With ``latex=True`` the
        cells are LaTeX math (``$...$``), for notebooks.
        """

        def fmt(x) -> str:
            return f"${vlatex(x)}$" if latex else f"`{vsstrrepr(x)}`"

        pv, pw = self.partial_velocities, self.partial_angular_velocities
        head = ["r", "u_r"]
        for b in self.bodies:
            head.append(f"v_r ({b.name})" if not latex else f"$\\tilde v_r^{{{b.name}}}$")
            if b.frame is not None:
                head.append(f"ω_r ({b.name})" if not latex else f"$\\tilde\\omega_r^{{{b.name}}}$")
        head += ["F_r", "F*_r"] if not latex else ["$\\tilde F_r$", "$\\tilde F^*_r$"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r, ur in enumerate(self.u_ind):
            row = [str(r + 1), fmt(ur)]
            for b in self.bodies:
                row.append(fmt(pv[b.name][r]))
                if b.frame is not None:
                    row.append(fmt(pw[b.name][r]))
            row += [fmt(self.Fr[r]), fmt(self.Fr_star[r])]
            lines.append("| " + " | ".join(row) + " |")
        if self._con.f_c.rows or self.u_dep:  # the constraints and the dependent speeds
            lines += ["", "| constraint | expression |", "|---|---|"]
            lines += [f"| f_c,{k + 1} = 0 (configuration) | {fmt(e)} |"
                      for k, e in enumerate(self._con.f_c)]  # fmt: skip
            f_v = self._con.B * self.u + self._con.b
            lines += [f"| f_v,{k + 1} = 0 (velocity) | {fmt(e)} |" for k, e in enumerate(f_v)]
            lines += [f"| {fmt(ud)} = (dependent speed) | {fmt(e)} |"
                      for ud, e in self.u_dep_solution.items()]  # fmt: skip
        return "\n".join(lines) + "\n"
