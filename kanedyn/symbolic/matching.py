"""Bringing two derivations into the same symbols before :func:`~kanedyn.symbolic.compare`.

A derivation is read into a :class:`Side`: coordinates ``q``, speeds ``u``, ``M``,
``f`` and, when known, the kinematic equations ``q̇ = N(q) u``. Accepted are anything
with ``.q``, ``.mass_matrix`` and ``.forcing`` (kanedyn's :func:`~kanedyn.symbolic.kane`
and :func:`~kanedyn.symbolic.lagrange`, sympy's ``KanesMethod``), sympy's
``LagrangesMethod`` (speeds ``q̇``), and plain tuples ``(M, forcing, q, u)``.

The second derivation (``theirs``) is then put into the first's symbols (``ours``):

1. **Names.** ``symbols={theirs: ours}`` renames coordinates, speeds and parameters
   (their order follows ours). Without it, coordinates and speeds of the same names are
   paired; otherwise they are paired by position, and the parameters that do not share
   a name are paired by the one permutation under which the most entries of ``M`` and
   ``f`` agree numerically (an error when two permutations tie: then give ``symbols``).
2. **Speeds.** When both sides' kinematic equations are known and differ, their speeds
   are related by ``u_b = W u_a`` with ``N_b W = N_a``; the second side is rewritten in
   the first's speeds (Kane & Levinson 1985, §4.3, a change of generalized speeds):

   .. math::

       M' = W^T M_b W, \\qquad f' = W^T (f_b - M_b \\dot W u_a), \\qquad
       \\dot W = \\sum_k \\frac{\\partial W}{\\partial q_k} \\dot q_k .
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sm
from sympy.core.function import AppliedUndef
from sympy.physics.vector import dynamicsymbols

from kanedyn.errors import ModelError

__all__ = ["Side", "match", "read_side", "symbol_name", "to_chart"]

_t = dynamicsymbols._t


@attrs.define(eq=False)
class Side:
    """One derivation: ``M u̇ = f`` in ``q``, ``u``; ``N`` (nq, n) with ``q̇ = N u`` when
    known (None otherwise). ``M`` and ``f`` may use named intermediates, defined in
    order in ``defs`` (a large system's compact form)."""

    q: list
    u: list
    M: sm.Matrix
    f: sm.Matrix
    N: sm.Matrix | None
    label: str
    defs: list = attrs.field(factory=list)

    def replace(self, rule: Mapping) -> None:
        """``xreplace(rule)`` in ``M``, ``f`` and the definitions."""
        self.M = self.M.xreplace(rule)
        self.f = self.f.xreplace(rule)
        self.defs = [(d, e.xreplace(rule)) for d, e in self.defs]


#: A derivation whose M and f written out would have more tree nodes than this is
#: compared in its compact form (named intermediates), when it has one.
EXPLICIT_NODES = 20_000


def _unfolded_nodes(defs: Sequence, exprs: Sequence) -> int:
    """Tree nodes of ``exprs`` written out, without writing them out (each name counts
    as the size of its definition)."""
    size: dict = {}

    def nodes(e: sm.Basic) -> int:
        return sum(size.get(x, 1) for x in sm.preorder_traversal(e))

    for d, e in defs:
        size[d] = nodes(e)
    return sum(nodes(e) for e in exprs)


def _compact(x: Any) -> tuple[Any, Any, list] | None:
    """``(M, f, defs)`` of kanedyn's compact form of ``x`` (Kane or Lagrange), when
    writing it out would be large; None otherwise."""
    comp = getattr(x, "compact", None)
    if comp is not None and getattr(comp, "intermediates", None) is not None:
        M, f, defs = comp.mass_matrix, comp.forcing, list(comp.intermediates)
    elif getattr(x, "intermediates", None):
        M, f, defs = x.mass_matrix, x.compact_forcing, list(x.intermediates)
    else:
        return None
    if _unfolded_nodes(defs, [*M, *f]) <= EXPLICIT_NODES:
        return None
    return M, f, defs


def _is_rate_of(u: Sequence, q: Sequence) -> bool:
    return len(u) == len(q) and all(
        isinstance(x, sm.Derivative) and x == y.diff(_t) for x, y in zip(u, q, strict=True)
    )


def read_side(x: Any, speeds: Sequence | None, label: str) -> Side:
    """A derivation as a :class:`Side` (see the module docstring)."""
    from sympy.physics.mechanics import KanesMethod, LagrangesMethod

    name = type(x).__name__
    defs: list = []
    if isinstance(x, tuple):
        if len(x) != 4:
            raise ModelError(
                f"compare: {label} is a tuple of {len(x)}; give (mass_matrix, forcing, q, u) "
                "or kd.symbolic.Equations(q, u, mass_matrix, forcing)"
            )
        M, f, q, u = x
        name = "tuple"
    else:
        compact = _compact(x)
        try:
            if compact is not None:
                q, (M, f, defs) = x.q, compact
            else:
                q, M, f = x.q, x.mass_matrix, x.forcing
        except AttributeError as exc:
            raise ModelError(
                f"compare: {label} ({name}) needs .q, .mass_matrix and .forcing ({exc}); "
                "give (mass_matrix, forcing, q, u) or kd.symbolic.Equations(q, u, M, f)"
            ) from None
        if speeds is not None:
            u = speeds
        elif isinstance(x, LagrangesMethod):
            u = [c.diff(_t) for c in sm.Matrix(q)]
        else:
            u = getattr(x, "u", None)
        if u is None:
            raise ModelError(
                f"compare: {label} ({name}) has no .u; pass its speed symbols as "
                "compare(..., speeds=[...])"
            )
    q, u = list(sm.Matrix(q)), list(sm.Matrix(u))
    M = sm.Matrix(M)
    f = sm.Matrix(f)
    f = f.reshape(len(f), 1)
    N = None
    if _is_rate_of(u, q):
        N = sm.eye(len(q))
    elif isinstance(x, KanesMethod):
        kd = x.kindiffdict()
        N = sm.Matrix([kd[c.diff(_t)] for c in q]).jacobian(u)
    elif getattr(x, "kinematic_equations", None) is not None:
        N = sm.Matrix(x.kinematic_equations).jacobian(u)
    elif getattr(type(x), "christoffel", None) is not None:  # LagrangeEquations: u = q̇
        N = sm.eye(len(q))
    return Side(q, u, M, f, N, name, defs)


def symbol_name(s: Any) -> str:
    """``q1`` for a Symbol ``q1`` or a dynamicsymbol ``q1(t)``; ``q1'`` for its derivative."""
    if isinstance(s, AppliedUndef):
        return s.func.__name__
    if isinstance(s, sm.Derivative) and isinstance(s.expr, AppliedUndef):
        return symbol_name(s.expr) + "'" * sum(c for _, c in s.variable_count)
    return str(s)


def _rename(side: Side, rule: Mapping) -> None:
    """Apply ``rule`` (their symbol -> ours) to every expression of ``side``; derivatives
    of renamed functions of time are renamed first, to the rate of the new name when it
    is one itself, else to a stand-in (they are speeds, paired afterwards)."""
    if not rule:
        return
    full = dict(rule)
    for key, value in rule.items():
        if isinstance(key, AppliedUndef) and key.args == (_t,):
            d = key.diff(_t)
            if d not in full:
                is_fun = isinstance(value, AppliedUndef)
                full[d] = value.diff(_t) if is_fun else sm.Symbol(f"{value}'")
    # top-down: a derivative node is matched before the function inside it
    side.q = [full.get(x, x) for x in side.q]
    side.u = [full.get(x, x) for x in side.u]
    side.replace(full)
    if side.N is not None:
        side.N = side.N.xreplace(full)


def _permute(side: Side, order: list[int]) -> None:
    side.u = [side.u[i] for i in order]
    side.M = side.M.extract(order, order)
    side.f = side.f.extract(order, [0])
    if side.N is not None:
        side.N = side.N.extract(list(range(side.N.rows)), order)


def _reorder_q(side: Side, order: list[int]) -> None:
    side.q = [side.q[i] for i in order]
    if side.N is not None:
        side.N = side.N.extract(order, list(range(side.N.cols)))


def _pair(ours: list, theirs: list, what: str, mapped: bool) -> list[int] | None:
    """Order of ``theirs`` that follows ``ours`` by name, or None to pair by position."""
    no, nt = [symbol_name(x) for x in ours], [symbol_name(x) for x in theirs]
    if len(no) != len(nt):
        raise ModelError(f"compare: one side has {len(no)} {what}, the other {len(nt)}")
    if set(no) == set(nt):
        return [nt.index(x) for x in no]
    if mapped and set(nt) & set(no):
        missing = sorted(set(no) - set(nt))
        raise ModelError(
            f"compare: symbols= maps some {what} but not all; {what} {missing} have no counterpart"
        )
    return None


def match(
    a: Side,
    b: Side,
    symbols: Mapping | None,
    params: Mapping | None,
    rng: np.random.Generator,
) -> list[str]:
    """Put ``b`` into ``a``'s symbols (in place); returns notes for the report."""
    notes: list[str] = []
    _rename(b, dict(symbols or {}))
    for what, xa, xb in (("coordinates", a.q, b.q), ("speeds", a.u, b.u)):
        order = _pair(xa, xb, what, bool(symbols))
        if order is None:
            notes.append(
                f"{what} paired by position: "
                + ", ".join(
                    f"{symbol_name(y)} = {symbol_name(x)}" for x, y in zip(xa, xb, strict=True)
                )
            )
            order = list(range(len(xb)))
        if what == "coordinates":
            _reorder_q(b, order)
            _rename(b, {y: x for x, y in zip(a.q, b.q, strict=True) if x != y})
        else:
            _permute(b, order)
    if a.N is not None and b.N is not None:
        notes += _change_of_speeds(a, b)
    else:
        _rename(b, {y: x for x, y in zip(a.u, b.u, strict=True) if x != y})
    b.u = list(a.u)
    notes += _match_parameters(a, b, params or {}, rng)
    return notes


def _change_of_speeds(a: Side, b: Side) -> list[str]:
    """Rewrite ``b`` in ``a``'s speeds when their kinematic equations differ."""
    Na, Nb = a.N, b.N
    assert Na is not None and Nb is not None
    rule = dict(zip(b.u, a.u, strict=True))
    if (Nb.xreplace(rule) - Na).applyfunc(sm.expand) == sm.zeros(*Na.shape):
        _rename(b, rule)
        return []
    W = Nb.solve(Na) if Nb.rows == Nb.cols else (Nb.T * Nb).solve(Nb.T * Na)
    W = W.applyfunc(sm.simplify)
    ua = sm.Matrix(a.u)
    qdot = Na * ua
    Wdot = sm.zeros(*W.shape)
    for k, qk in enumerate(a.q):
        Wdot += W.diff(qk) * qdot[k]
    sub = dict(zip(b.u, list(W * ua), strict=True))
    b.replace(sub)
    Mb, fb = b.M, b.f
    b.M = W.T * Mb * W
    b.f = W.T * (fb - Mb * Wdot * ua)
    b.N = Na
    return [
        "the speeds differ: the second side's speeds are u_b = W u_a with "
        f"W = {W.tolist()}; it is compared after that change of speeds"
    ]


def _match_parameters(a: Side, b: Side, params: Mapping, rng: np.random.Generator) -> list[str]:
    xs = set(a.q) | set(a.u)
    pa = _free(a) - xs
    pb = _free(b) - xs
    only_a = sorted(pa - pb, key=str)
    only_b = sorted(pb - pa, key=str)
    if not only_a or not only_b:
        return []
    if len(only_a) != len(only_b) or len(only_a) > 6:
        return [
            f"parameters not paired: {[str(s) for s in only_a]} and {[str(s) for s in only_b]} "
            "(give symbols={theirs: ours})"
        ]
    state = sorted(xs, key=str)
    shared = sorted(pa & pb, key=str)
    fixed = {str(k): float(v) for k, v in params.items()}
    vals = {s: fixed.get(str(s), rng.uniform(0.5, 2.0)) for s in [*shared, *only_a]}
    x0 = {s: rng.uniform(-1.0, 1.0) for s in state}
    A = _values(a, {**x0, **vals})
    scores = []
    for perm in itertools.permutations(only_a):
        rule = dict(zip(only_b, perm, strict=True))
        B = _values(b, {**x0, **vals, **{k: vals[v] for k, v in rule.items()}})
        scores.append((int(np.sum(np.isclose(A, B, rtol=1e-9, atol=1e-12))), rule))
    scores.sort(key=lambda s: -s[0])
    if len(scores) > 1 and scores[0][0] == scores[1][0]:
        raise ModelError(
            f"compare: cannot pair the parameters {[str(s) for s in only_b]} with "
            f"{[str(s) for s in only_a]} unambiguously; give symbols={{theirs: ours}}"
        )
    best = scores[0][1]
    _rename(b, best)
    return ["parameters paired by structure: " + ", ".join(f"{k} = {v}" for k, v in best.items())]


def _free(s: Side) -> set:
    out: set = set()
    for X in (s.M, s.f, *(e for _, e in s.defs)):
        out |= X.free_symbols
        out |= {f for f in X.atoms(AppliedUndef) if f.args == (_t,)}
    return out - {_t} - {d for d, _ in s.defs}


def _values(s: Side, vals: Mapping) -> np.ndarray:
    rule: dict = {k: sm.Float(v) for k, v in vals.items()}
    for d, e in s.defs:
        rule[d] = e.xreplace(rule).evalf()
    out = [complex(sm.sympify(e).xreplace(rule).evalf()) for e in [*s.M, *s.f]]
    return np.array(out)


def to_chart(side: Side, model: Any, charts: Mapping[str, str]) -> str:
    """Rewrite Kane's equations of ``model`` (``side``, read from
    :func:`kanedyn.symbolic.kane`) in the Euler charts that
    :func:`kanedyn.symbolic.lagrange` uses for spherical joints.

    Each joint's quaternion becomes ``q_1 ⊗ q_2 ⊗ q_3`` of the chart's elementary
    rotations, ``q_c = [sin(θ_c/2) e_c, cos(θ_c/2)]`` (about the sequence's axes), and its
    kinematic equations become ``θ̇ = Γ(θ)^{-1} ω``, with ``Γ`` the 3-DOF gimbal partial
    of :func:`kanedyn.joints.gimbal` (Go axes); the speeds ``ω`` stay Kane's, so that
    :func:`match` then finds the change of speeds ``θ̇ = W ω`` (Kane & Levinson §4.3).
    """
    from kanedyn import joints
    from kanedyn.spatial.charts import euler_axes, quat_product
    from kanedyn.spatial.rotation import parse_sequence
    from kanedyn.symbolic.arithmetic import SYMPY, matrix

    lay = model.layout
    n = len(side.u)
    rule: dict = {}
    new_q: list = []
    rows: list = []
    quat_of: dict = {}
    for k in lay.spherical.tolist():
        j = model.joints[k]
        seq = parse_sequence(charts[j.name])
        theta = [sm.Symbol(f"q_{j.name}_{c}", real=True) for c in range(3)]
        elementary = []
        for a, th in zip(seq, theta, strict=True):
            e = [sm.Integer(0)] * 3
            e[a - 1] = sm.sin(th / 2)
            elementary.append(np.array([*e, sm.cos(th / 2)], dtype=object))
        quat = quat_product(quat_product(elementary[0], elementary[1]), elementary[2])
        qsyms = [side.q[int(i)] for i in lay.q_index[k][:4]]
        rule.update(zip(qsyms, quat.tolist(), strict=True))
        axes = euler_axes(SYMPY, np.eye(3)[[a - 1 for a in seq]])
        zeros = np.array([0, 0, 0], dtype=object)
        _, GammaT, _, _ = joints.gimbal(SYMPY, axes, np.array(theta, dtype=object), zeros, 3)
        Ginv = matrix(GammaT.T).inv().applyfunc(sm.simplify)
        block = sm.zeros(3, n)
        for c, col in enumerate(lay.u_index[k][:3].tolist()):
            block[:, col] = Ginv[:, c]
        quat_of[qsyms[0]] = (theta, block, set(qsyms))
    skip: set = set()
    for i, x in enumerate(side.q):
        if x in quat_of:
            theta, block, members = quat_of[x]
            new_q += theta
            rows += [block[r, :] for r in range(3)]
            skip |= members
        elif x not in skip:
            new_q.append(x)
            assert side.N is not None
            rows.append(side.N[i, :])
    side.q = new_q
    side.replace(rule)
    side.N = sm.Matrix.vstack(*rows)
    names = ", ".join(f"{k} ({v})" for k, v in charts.items())
    return f"Kane's quaternions written in the Euler charts of the spherical joints: {names}"
