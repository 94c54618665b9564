"""Kane's generalized forces from vector components in plain symbols.

:class:`~kanedyn.symbolic.problem.KaneProblem` takes its kinematics as
``sympy.physics.vector`` objects. Working on those objects directly is slow:
every ``Vector.dot`` between vectors in different frames multiplies
direction-cosine matrices through sympy's matrix machinery, and every
derivative with respect to a speed goes through the dynamic-symbol bookkeeping
of functions of time. Here the vectors are taken apart once into their
components in the frames they are written in, with the coordinates, speeds and
rates replaced by plain symbols (as sympy's ``KanesMethod`` does internally), and
the stages of Kane's method are formed from those components:

* a vector is a mapping ``frame -> [x, y, z]`` (its measure numbers in that
  frame's basis, summed over frames);
* the direction cosines between two frames, :math:`C_{ij} = a_i \\cdot b_j`, are
  formed once per pair of frames;
* partial velocities are the coefficients of the speeds, :math:`v_r = \\partial v
  / \\partial u_r`, taken component by component with respect to plain symbols
  (the velocities are linear in the speeds);
* time derivatives in the inertial frame N are
  :math:`\\frac{{}^N d}{dt} \\sum_F c_F \\cdot f = \\sum_F \\dot c_F \\cdot f +
  {}^N\\omega^F \\times c_F \\cdot f`, with
  :math:`\\dot c = \\sum_k \\frac{\\partial c}{\\partial q_k} \\dot q_k` (at
  :math:`\\dot u = 0`);
* a force is expressed once in each frame a partial velocity is written in, so
  that each :math:`F \\cdot v_r` is a sum of three products.

The results are the unconstrained generalized active forces, the generalized
inertia forces at :math:`\\dot u = 0` and the mass matrix (Kane & Levinson 1985,
generalized active and inertia forces):

.. math::

    F_r = \\sum_P R_P \\cdot v^P_r + \\sum_A T_A \\cdot \\omega^A_r, \\qquad
    F^*_r|_{\\dot u = 0} = \\sum_i (-m_i a_i) \\cdot v^i_r
        - (I_i \\alpha_i + \\omega_i \\times I_i \\omega_i) \\cdot \\omega^i_r,

    M_{rs} = \\sum_i m_i\\, v^i_r \\cdot v^i_s + \\omega^i_r \\cdot I_i \\omega^i_s .

References
----------
T. R. Kane and D. A. Levinson, *Dynamics: Theory and Applications*,
McGraw-Hill, 1985.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy as sm
from sympy.core.function import AppliedUndef
from sympy.physics.vector import Point, ReferenceFrame, Vector, dynamicsymbols

from kanedyn.errors import ModelError

__all__ = ["Components", "Lookup", "generalized_forces"]

_t = dynamicsymbols._t
_ZERO = sm.S.Zero

Vec = dict  # frame -> list of three expressions


def _add(terms: list) -> Any:
    return sm.Add(*terms) if terms else _ZERO


class Components:
    """Vectors of ``sympy.physics.vector`` as components in plain symbols.

    Parameters
    ----------
    frame : ReferenceFrame
        The inertial frame N (time derivatives are taken in it).
    rule : dict
        Functions of time and their rates -> plain symbols (or expressions in
        them). Velocities are converted with it.
    rates : dict
        Plain symbol -> its time derivative (None for a constant) (``q -> q'``; the speeds map to 0,
        so derivatives are taken at :math:`\\dot u = 0`).
    specified : callable
        Called with a function of time (or a derivative of one) met in an
        expression that ``rule`` does not cover; returns its plain symbol. It
        raises for a second derivative of a coordinate.
    """

    def __init__(
        self, frame: ReferenceFrame, rule: dict, rates: dict, specified: Callable[[Any], Any]
    ) -> None:
        self.N = frame
        self.rule = rule
        self.rates = rates
        self._specified = specified
        self._dcm: dict = {}
        self._omega: dict = {}
        self._rate_memo: dict = {}

    # -- conversion ---------------------------------------------------------------

    def scalar(self, e: Any) -> Any:
        """One expression in plain symbols."""
        e = sm.sympify(e)
        if e.is_Number:
            return e
        for f in e.atoms(sm.Derivative, AppliedUndef):
            if f not in self.rule:
                d = self._specified(f)
                if d is not None:
                    self.rule[f] = d
        return e.xreplace(self.rule)

    def vector(self, v: Vector | int) -> Vec:
        """A Vector as ``frame -> components``."""
        out: Vec = {}
        if not isinstance(v, Vector) or v == 0:
            return out
        for m, F in v.args:
            c = [self.scalar(x) for x in m]
            if F in out:
                c = [a + b for a, b in zip(out[F], c, strict=True)]
            out[F] = c
        return {F: c for F, c in out.items() if any(x != 0 for x in c)}

    def dcm(self, A: ReferenceFrame, B: ReferenceFrame) -> list:
        """:math:`C_{ij} = a_i \\cdot b_j` (rows: A's basis), cached per pair."""
        key = (A, B)
        C = self._dcm.get(key)
        if C is None:
            try:
                M = A.dcm(B)
            except ValueError as exc:
                raise ModelError(f"frames {A} and {B} are not connected: {exc}") from None
            C = [[self.scalar(M[i, j]) for j in range(3)] for i in range(3)]
            self._dcm[key] = C
            self._dcm[(B, A)] = [[C[j][i] for j in range(3)] for i in range(3)]
        return C

    def omega(self, F: ReferenceFrame) -> list:
        """:math:`{}^N\\omega^F` in F's basis, cached per frame."""
        w = self._omega.get(F)
        if w is None:
            try:
                wv = F.ang_vel_in(self.N)
            except ValueError as exc:
                raise ModelError(f"the angular velocity of {F} is undefined: {exc}") from None
            w = self.express(self.vector(wv), F)
            self._omega[F] = w
        return w

    # -- algebra ------------------------------------------------------------------

    def express(self, v: Vec, F: ReferenceFrame) -> list:
        """Components of ``v`` in F's basis."""
        terms: list[list] = [[], [], []]
        for G, c in v.items():
            if G is F:
                for i in range(3):
                    if c[i] != 0:
                        terms[i].append(c[i])
                continue
            C = self.dcm(F, G)
            for i in range(3):
                for j in range(3):
                    if c[j] != 0 and C[i][j] != 0:
                        terms[i].append(C[i][j] * c[j])
        return [_add(t) for t in terms]

    def dot(self, a: Vec, b: Vec) -> Any:
        """:math:`a \\cdot b`."""
        terms = []
        for Fa, ca in a.items():
            for Fb, cb in b.items():
                if Fa is Fb:
                    terms += [x * y for x, y in zip(ca, cb, strict=True) if x != 0 and y != 0]
                    continue
                C = self.dcm(Fa, Fb)
                for i in range(3):
                    if ca[i] == 0:
                        continue
                    for j in range(3):
                        if cb[j] != 0 and C[i][j] != 0:
                            terms.append(ca[i] * C[i][j] * cb[j])
        return _add(terms)

    @staticmethod
    def diff(v: Vec, x: Any) -> Vec:
        """Component-wise :math:`\\partial v / \\partial x` (x a plain symbol)."""
        out = {}
        for F, c in v.items():
            d = [e.diff(x) for e in c]
            if any(e != 0 for e in d):
                out[F] = d
        return out

    def rate(self, e: Any) -> Any:
        """:math:`\\dot e = \\sum_x (\\partial e / \\partial x)\\, \\dot x` over the plain symbols."""
        return directional(e, self.rates, self._rate_memo)

    def dt(self, v: Vec) -> Vec:
        """:math:`{}^N d v / dt = \\sum_F \\dot c_F \\cdot f + {}^N\\omega^F \\times c_F \\cdot f`."""
        out = {}
        for F, c in v.items():
            w = self.omega(F)
            wc = cross(w, c)
            out[F] = [self.rate(ci) + x for ci, x in zip(c, wc, strict=True)]
        return out


def directional(e: Any, seeds: Any, memo: dict | None = None) -> Any:
    """Forward-mode derivative :math:`\\sum_x (\\partial e/\\partial x)\\, s_x` in one pass.

    ``seeds[x]`` is :math:`s_x` for a plain symbol x (None or absent: a
    constant). Every subexpression is differentiated once (``memo``), by the
    sum, product and chain rules, so a subexpression shared by several
    entries or terms costs one derivative; ``e.diff(x)`` for each symbol would
    traverse the whole tree once per symbol.
    """
    if memo is None:
        memo = {}

    def d(x: Any) -> Any:
        if x.is_Atom:
            if x.is_Symbol:
                s = seeds[x] if isinstance(seeds, Lookup) else seeds.get(x)
                return _ZERO if s is None else s
            return _ZERO
        out = memo.get(x)
        if out is not None:
            return out
        if x.is_Add:
            out = _add([t for t in map(d, x.args) if t != 0])
        elif x.is_Mul:
            args = x.args
            terms = []
            for i, a in enumerate(args):
                da = d(a)
                if da != 0:
                    terms.append(sm.Mul(*args[:i], da, *args[i + 1 :]))
            out = _add(terms)
        elif x.is_Pow:
            b, ex = x.args
            db, dex = d(b), d(ex)
            out = _ZERO
            if db != 0:
                out = ex * b ** (ex - 1) * db
            if dex != 0:
                out = out + x * sm.log(b) * dex
        elif isinstance(x, sm.Function) and not isinstance(x, AppliedUndef):
            terms = []
            for k, a in enumerate(x.args):
                da = d(a)
                if da != 0:
                    terms.append(x.fdiff(k + 1) * da)
            out = _add(terms)
        else:  # anything else: the chain rule through sympy, symbol by symbol
            terms = []
            for y in x.free_symbols:
                s = seeds[y] if isinstance(seeds, Lookup) else seeds.get(y)
                if s is not None and s != 0:
                    terms.append(x.diff(y) * s)
            out = _add(terms)
        memo[x] = out
        return out

    return d(sm.sympify(e))


class Lookup(dict):
    """A seed mapping whose missing keys are resolved by ``__missing__``."""


def cross(a: Sequence, b: Sequence) -> list:
    """:math:`a \\times b` of two component lists in one basis."""

    def p(x, y):
        return _ZERO if x == 0 or y == 0 else x * y

    return [
        p(a[1], b[2]) - p(a[2], b[1]),
        p(a[2], b[0]) - p(a[0], b[2]),
        p(a[0], b[1]) - p(a[1], b[0]),
    ]


def _dot3(a: Sequence, b: Sequence) -> Any:
    return _add([x * y for x, y in zip(a, b, strict=True) if x != 0 and y != 0])


def _mat3(I: list, w: Sequence) -> list:
    return [_dot3(I[i], w) for i in range(3)]


def _inertia_frame(mass: Any) -> tuple[ReferenceFrame, sm.Matrix]:
    """A frame in which the inertia dyadic can be written, and its 3x3 matrix there.

    The frame the dyadic is given in comes first (its matrix is then the user's
    entries), then the body frame.
    """
    frames = [v.args[0][1] for _, v, _ in mass.inertia.args if v.args] + [mass.frame]
    for F in frames:
        try:
            return F, mass.inertia.to_matrix(F)
        except ValueError:
            continue
    raise ModelError(f"bodies: the inertia of {mass.name} is not in a frame connected to it")


def _key(v: Vec) -> frozenset:
    """A hashable form of a vector's components (equal vectors, equal keys)."""
    return frozenset((F, tuple(c)) for F, c in v.items())


def _sum(vs: Sequence[Vec]) -> Vec:
    out: dict = {}
    for v in vs:
        for F, c in v.items():
            out.setdefault(F, [[], [], []])
            for i in range(3):
                if c[i] != 0:
                    out[F][i].append(c[i])
    return {F: [_add(t) for t in c] for F, c in out.items()}


def _projected(comp: Components, groups: dict) -> Any:
    """:math:`\\sum_g (\\sum_k R_k) \\cdot v_g` over groups ``key -> (v_g, [R_k])``."""
    terms = []
    for v, Rs in groups.values():
        R = _sum(Rs)
        for F, c in v.items():
            terms.append(_dot3(comp.express(R, F), c))
    return _add(terms)


def generalized_forces(
    comp: Components,
    masses: Sequence,
    loads: Sequence,
    u: Sequence,
    load_vector: Callable[[Any], Vec],
) -> tuple[sm.Matrix, sm.Matrix, sm.Matrix]:
    """Unconstrained :math:`F_r`, :math:`F^*_r|_{\\dot u=0}` and :math:`M_{rs}` in plain symbols.

    Parameters
    ----------
    comp : Components
    masses : sequence of :class:`~kanedyn.symbolic.problem.Mass`
    loads : sequence of (Point or ReferenceFrame, Vector)
    u : sequence of plain symbols
        All speeds.
    load_vector : callable
        Converts a load's Vector to components (its rates stay rates).
    """
    N, n = comp.N, len(u)
    # Forces with the same partial velocity are added before the dot product
    # (for a chain, every body beyond a joint shares that joint's partial velocity):
    # per speed, key of the partial velocity -> (partial velocity, [forces]).
    active: list[dict] = [{} for _ in range(n)]
    for where, vec in loads:
        try:
            vel = where.vel(N) if isinstance(where, Point) else where.ang_vel_in(N)
        except ValueError as exc:
            raise ModelError(f"loads: velocity of {where.name} is undefined: {exc}") from None
        vel_c = comp.vector(vel)
        R = load_vector(vec)
        if not R or not vel_c:
            continue
        for r, ur in enumerate(u):
            vel_r = comp.diff(vel_c, ur)
            if vel_r:
                active[r].setdefault(_key(vel_r), (vel_r, []))[1].append(R)
    inertial: list[dict] = [{} for _ in range(n)]
    pairs: dict = {}  # (r, s, key_r, key_s) -> (v_r, v_s, [masses])
    for mass in masses:
        try:
            v = comp.vector(mass.point.vel(N))
        except ValueError as exc:
            raise ModelError(
                f"bodies: the velocity of {mass.name}'s mass centre is undefined: {exc}"
            ) from None
        v_r = [comp.diff(v, ur) for ur in u]
        m = comp.scalar(mass.mass)
        if any(v_r):
            Rstar = {F: [-m * x for x in c] for F, c in comp.dt(v).items()}
            keys = [_key(x) for x in v_r]
            for r in range(n):
                if not v_r[r]:
                    continue
                inertial[r].setdefault(keys[r], (v_r[r], []))[1].append(Rstar)
                for s in range(r, n):
                    if v_r[s]:
                        pair = (r, s, keys[r], keys[s])
                        pairs.setdefault(pair, (v_r[r], v_r[s], []))[2].append(m)
    Fstar: list[list] = [[] for _ in range(n)]
    M: list[list[list]] = [[[] for _ in range(n)] for _ in range(n)]
    for mass in masses:
        if mass.frame is None or mass.inertia is None or mass.inertia == 0:
            continue
        W, Im = _inertia_frame(mass)
        I = [[comp.scalar(Im[i, j]) for j in range(3)] for i in range(3)]
        try:
            w = comp.express(comp.vector(mass.frame.ang_vel_in(N)), W)
        except ValueError as exc:
            raise ModelError(
                f"bodies: the angular velocity of {mass.name} is undefined: {exc}"
            ) from None
        w_r = [[e.diff(ur) for e in w] for ur in u]
        if not any(x != 0 for wr in w_r for x in wr):
            continue
        # alpha in W's basis: d/dt of the components plus omega_W x omega
        alpha = [comp.rate(e) + x for e, x in zip(w, cross(comp.omega(W), w), strict=True)]
        Iw = _mat3(I, w)
        Tstar = [-(a + b) for a, b in zip(_mat3(I, alpha), cross(w, Iw), strict=True)]
        Iw_s = [_mat3(I, ws) for ws in w_r]
        for r in range(n):
            if not any(x != 0 for x in w_r[r]):
                continue
            Fstar[r].append(_dot3(Tstar, w_r[r]))
            for s in range(r, n):
                d = _dot3(w_r[r], Iw_s[s])
                if d != 0:
                    M[r][s].append(d)
    Fr = [_projected(comp, groups) for groups in active]
    for r in range(n):
        Fstar[r].append(_projected(comp, inertial[r]))
    for (r, s, _, _), (a, b, ms) in pairs.items():
        d = comp.dot(a, b)
        if d != 0:
            M[r][s].append(sm.Add(*ms) * d)
    Mm = sm.zeros(n, n)
    for r in range(n):
        for s in range(r, n):
            Mm[r, s] = Mm[s, r] = _add(M[r][s])
    return (
        sm.Matrix(Fr),
        sm.Matrix([_add(t) for t in Fstar]),
        Mm,
    )
