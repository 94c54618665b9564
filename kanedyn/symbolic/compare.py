"""Cross-check two sets of equations of motion ``M ν̇ = f`` (Kane against Lagrange, or any
two derivations in the same coordinates and speeds).

Two derivations of the same system may differ by a row scaling or combination (a
Lagrange row is a Kane row when the speeds are coordinate rates, but a hand derivation may
multiply a row out), so :func:`compare` checks two levels:

1. entry by entry: ``M_a - M_b`` and ``f_a - f_b``;
2. the accelerations: ``M_a^{-1} f_a = M_b^{-1} f_b``, i.e. (cleared of the inverse)

   .. math:: M_b\\, \\mathrm{adj}(M_a)\\, f_a - \\det(M_a)\\, f_b = 0 .

Each difference is decided symbolically within a time budget, cheapest test first over all
entries before any costlier one:

* structural zero, then ``expand``;
* the trigonometric normal form: ``expand_trig``, then ``sin x → S_x``, ``cos x → C_x``
  and reduction modulo ``S_x² + C_x² - 1`` (a canonical form for polynomials in the
  sines and cosines of the coordinates, so a zero here is a proof);
* ``trigsimp`` and ``simplify``, for small expressions only.

A large derivation of kanedyn's own (Kane, or Lagrange, whose explicit ``M`` and ``f``
would have more than :data:`~kanedyn.symbolic.matching.EXPLICIT_NODES` tree nodes) is
compared in its compact form: short entries in named intermediates, evaluated as
straight-line code; a zero found in the names is still a proof.

An entry the budget does not reach is *undecided*. Independently, every entry and the
accelerations are evaluated at random states (and random parameter values, unless given),
which decides *differs* and gives :attr:`ComparisonReport.max_numeric_error`. The
timing is by clock checks between steps (no signals), so it works in threads and notebooks;
one step already started may overrun the budget.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import sympy as sm
from sympy.core.function import AppliedUndef

from kanedyn.errors import ModelError
from kanedyn.symbolic.matching import match, read_side, symbol_name, to_chart
from kanedyn.symbolic.replay import python_function

__all__ = ["ComparisonReport", "EntryComparison", "Equations", "compare"]

_TRIGSIMP_OPS = 400  # larger expressions skip trigsimp
_SIMPLIFY_OPS = 150  # and simplify
_OPS_PER_SECOND = 2000  # no step starts on more operations than this times the seconds left


# --------------------------------------------------------------------------- records
def _column(x: Any) -> sm.ImmutableMatrix:
    return sm.ImmutableMatrix(sm.Matrix(x).reshape(len(sm.Matrix(x)), 1))


def _matrix(x: Any) -> sm.ImmutableMatrix:
    return sm.ImmutableMatrix(x)


@attrs.frozen(eq=False)
class Equations:
    """Equations of motion ``mass_matrix · d/dt(u) = forcing`` in coordinates ``q``.

    A small record for a derivation of one's own (by hand, or from another tool), so that
    :func:`compare` can check it against :func:`kanedyn.symbolic.kane` or
    :func:`kanedyn.symbolic.lagrange`.

    Parameters
    ----------
    q : sequence of sympy symbols, (n_q,)
        Generalized coordinates.
    u : sequence of sympy symbols, (n,)
        Generalized speeds (the unknowns' integrals: ``mass_matrix · u̇ = forcing``).
    mass_matrix : sympy.Matrix, (n, n)
    forcing : sympy.Matrix, (n,) or (n, 1)

    Examples
    --------
    >>> import sympy as sm
    >>> q, u, m, k = sm.symbols("q u m k")
    >>> Equations([q], [u], [[m]], [-k * q])
    Equations(q=[q], u=[u], n=1)
    """

    q: sm.ImmutableMatrix = attrs.field(converter=_column)
    u: sm.ImmutableMatrix = attrs.field(converter=_column)
    mass_matrix: sm.ImmutableMatrix = attrs.field(converter=_matrix)
    forcing: sm.ImmutableMatrix = attrs.field(converter=_column)

    def __repr__(self) -> str:
        return f"Equations(q={list(self.q)}, u={list(self.u)}, n={len(self.u)})"


@attrs.frozen(eq=False)
class EntryComparison:
    """The verdict on one entry.

    Attributes
    ----------
    name : str
        ``"mass_matrix[i, j]"``, ``"forcing[i]"`` or ``"acceleration[i]"`` (row i of
        ``M_b M_a^{-1} f_a = f_b``).
    status : str
        ``"equal"`` (proven), ``"differs"`` (numerically, beyond the tolerance) or
        ``"undecided"`` (numerically equal; not proven within the budget).
    method : str
        What decided it: ``"identical"``, ``"expand"``, ``"trig normal form"``,
        ``"trigsimp"``, ``"simplify"``, ``"numeric"``, or why it is undecided.
    difference : sympy.Expr or None
        ``a - b`` in the simplest form found (``None`` when equal).
    numeric_error : float
        ``max |a - b|`` over the random samples.
    scale : float
        ``max(|a|, |b|)`` over the samples, for judging ``numeric_error``.
    """

    name: str
    status: str
    method: str
    difference: sm.Expr | None
    numeric_error: float
    scale: float


@attrs.frozen(eq=False)
class ComparisonReport:
    """Result of :func:`compare`.

    Attributes
    ----------
    equivalent : bool
        The two give the same accelerations ``ν̇`` at every sample, and no entry is proven
        different. True also when only the row scaling differs.
    proven : bool
        Equivalence is proven symbolically (entry by entry, or at the acceleration level).
    level : str
        ``"identical"`` (M and f agree entry by entry), ``"same accelerations"`` (rows
        scaled or combined) or ``"different"``.
    max_numeric_error : float
        ``max |M_a^{-1} f_a - M_b^{-1} f_b|`` over the samples (the accelerations, which do
        not depend on how rows are scaled).
    entries : tuple of EntryComparison
        Every entry of ``M`` and ``f``, then the acceleration rows when they were needed.
    q, u : tuple
        The coordinates and speeds (the first object's symbols).
    samples : int
        Random states evaluated.
    seconds : float
        Time spent on the symbolic checks.
    budget_spent : bool
        The time budget ran out before every entry was decided.
    notes : tuple of str
        How the second derivation was put into the first's symbols: coordinates,
        speeds or parameters paired by position or structure, and a change of speeds
        ``u_b = W u_a`` when the kinematic equations differ
        (:mod:`kanedyn.symbolic.matching`).
    """

    equivalent: bool
    proven: bool
    level: str
    max_numeric_error: float
    entries: tuple[EntryComparison, ...]
    q: tuple[Any, ...]
    u: tuple[Any, ...]
    samples: int
    seconds: float
    budget_spent: bool
    names: tuple[str, str] = ("a", "b")
    notes: tuple[str, ...] = ()

    @property
    def differing(self) -> tuple[EntryComparison, ...]:
        """The entries that differ."""
        return tuple(e for e in self.entries if e.status == "differs")

    @property
    def undecided(self) -> tuple[EntryComparison, ...]:
        """The entries numerically equal but not proven within the budget."""
        return tuple(e for e in self.entries if e.status == "undecided")

    def verdict(self) -> str:
        """One line: equivalent or not, at which level, proven or numeric."""
        if not self.equivalent:
            return (
                "NOT EQUIVALENT: "
                + ", ".join(e.name for e in self.differing[:8])
                + (" ..." if len(self.differing) > 8 else "")
                + " differ"
            )
        what = {
            "identical": "mass matrices and forcings agree entry by entry",
            "same accelerations": "same accelerations M⁻¹f; the rows are scaled or combined",
        }[self.level]
        how = (
            "proven symbolically" if self.proven else "numerically only (symbolic check undecided)"
        )
        return f"EQUIVALENT ({how}): {what}"

    def _rows(self) -> list[EntryComparison]:
        if len(self.entries) <= 40:
            return list(self.entries)
        return [e for e in self.entries if e.status != "equal"]

    def __str__(self) -> str:
        a, b = self.names
        lines = [
            f"compare({a}, {b}): {self.verdict()}",
            f"  coordinates: {', '.join(map(str, self.q))}",
            f"  speeds:      {', '.join(map(str, self.u))}",
            f"  max numeric error of the accelerations over {self.samples} random states: "
            f"{self.max_numeric_error:.3g}",
            f"  symbolic checks: {self.seconds:.2f} s"
            + ("  (time budget spent: some entries undecided)" if self.budget_spent else ""),
        ]
        lines += [f"  note: {n}" for n in self.notes]
        rows = self._rows()
        if len(rows) < len(self.entries):
            lines.append(
                f"  {len(self.entries) - len(rows)} of {len(self.entries)} entries equal; "
                "the others:"
            )
        if rows:
            w = max(len(e.name) for e in rows)
            lines.append(
                f"  {'entry':<{w}}  {'status':<9}  {'how':<18}  {'num. error':>10}  difference ({a} - {b})"
            )
            for e in rows:
                diff = "" if e.difference is None else _short(str(e.difference), 100)
                lines.append(
                    f"  {e.name:<{w}}  {e.status:<9}  {e.method:<18}  {e.numeric_error:>10.3g}  {diff}"
                )
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        a, b = self.names
        out = [
            f"**compare({a}, {b})**: {self.verdict()}  ",
            f"max numeric error of the accelerations ({self.samples} random states): "
            f"{self.max_numeric_error:.3g}; symbolic checks {self.seconds:.2f} s",
            *[f"\n*note:* {n}" for n in self.notes],
            "",
            f"| entry | status | how | numeric error | difference ({a} − {b}) |",
            "|---|---|---|---|---|",
        ]
        for e in self._rows():
            diff = "" if e.difference is None else f"${sm.latex(e.difference)}$"
            if len(diff) > 400:
                diff = "`" + _short(str(e.difference), 200) + "`"
            out.append(f"| `{e.name}` | {e.status} | {e.method} | {e.numeric_error:.3g} | {diff} |")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        a, b = self.names
        esc = html.escape
        rows = "".join(
            f"<tr><td><code>{esc(e.name)}</code></td><td>{esc(e.status)}</td>"
            f"<td>{esc(e.method)}</td><td>{e.numeric_error:.3g}</td>"
            f"<td><code>{esc('' if e.difference is None else _short(str(e.difference), 200))}"
            "</code></td></tr>"
            for e in self._rows()
        )
        return (
            f"<p><b>compare({esc(a)}, {esc(b)})</b>: {esc(self.verdict())}<br>"
            f"max numeric error of the accelerations ({self.samples} random states): "
            f"{self.max_numeric_error:.3g}; symbolic checks {self.seconds:.2f} s</p>"
            f"<table><tr><th>entry</th><th>status</th><th>how</th><th>numeric error</th>"
            f"<th>difference ({esc(a)} − {esc(b)})</th></tr>{rows}</table>"
        )


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


# --------------------------------------------------------------------------- inputs
def _trig_pairs(e: sm.Expr) -> tuple[sm.Expr, list[tuple[sm.Dummy, sm.Dummy]], dict]:
    """``sin x → S_x``, ``cos x → C_x`` (after ``expand_trig``), ``tan x → S_x / C_x``.

    Returns the replaced expression, the (S_x, C_x) pairs and the map back.
    """
    e = sm.expand_trig(e)
    args = sorted({f.args[0] for f in e.atoms(sm.sin, sm.cos, sm.tan)}, key=sm.default_sort_key)
    pairs, rep, back = [], {}, {}
    for x in args:
        S, C = sm.Dummy("S"), sm.Dummy("C")
        rep.update({sm.sin(x): S, sm.cos(x): C, sm.tan(x): S / C})
        back.update({S: sm.sin(x), C: sm.cos(x)})
        pairs.append((S, C))
    return e.xreplace(rep), pairs, back


class _NotPolynomial(ValueError):
    """Internal: ``_reduce`` met a term that is not a polynomial in the sines (caught below)."""


def _reduce(e: sm.Expr, pairs: list[tuple[sm.Dummy, sm.Dummy]]) -> sm.Expr:
    """Normal form of a polynomial in S_x, C_x modulo S_x² + C_x² - 1: degree ≤ 1 in S_x.

    The generators S_x² + C_x² - 1 of distinct x have coprime leading terms, so they are a
    Gröbner basis and the remainder is unique: zero exactly when ``e`` vanishes.
    """
    e = sm.expand(e)
    for S, C in pairs:
        if not e.has(S):
            continue
        out = sm.Integer(0)
        for key, coeff in sm.collect(e, S, evaluate=False).items():
            k = 0 if key == 1 else sm.degree(key, S)
            if key != S**k or coeff.has(S):
                raise _NotPolynomial("not a polynomial in sin x")
            out += coeff * S ** (k % 2) * (1 - C**2) ** (k // 2)
        e = sm.expand(out)
    return e


def _trig_normal_form(e: sm.Expr) -> sm.Expr:
    """Canonical form of ``e`` as a polynomial in sines and cosines (in sin, cos again).

    Rational expressions are reduced to their numerator over a common denominator (the
    result is zero exactly when ``e`` is).
    """
    e_sc, pairs, back = _trig_pairs(e)
    gens = [g for p in pairs for g in p]
    if any(d.has(*gens) for d in _denominators(e_sc)):
        e_sc = sm.numer(sm.together(e_sc))
    try:
        nf = _reduce(e_sc, pairs)
    except (ValueError, sm.PolynomialError):  # _NotPolynomial, or sympy on a non-polynomial
        return sm.expand(e)
    return nf.xreplace(back)


def _denominators(e: sm.Expr) -> list[sm.Expr]:
    return [p.base for p in e.atoms(sm.Pow) if p.exp.is_negative]


class _Deadline:
    def __init__(self, seconds: float):
        self.start = time.perf_counter()
        self.end = self.start + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()

    def spent(self) -> bool:
        return self.left() <= 0.0


def _ops(e: sm.Expr) -> int:
    return int(sm.count_ops(e))


# --------------------------------------------------------------------------- main
def compare(
    a: Any,
    b: Any,
    *,
    speeds: Sequence[Any] | None = None,
    symbols: Mapping[Any, Any] | None = None,
    time_budget: float = 10.0,
    samples: int = 5,
    rng: int | np.random.Generator | None = None,
    params: Mapping[Any, float] | None = None,
    tol: float = 1e-9,
) -> ComparisonReport:
    """Compare two sets of equations ``M ν̇ = f`` of the same system.

    ``a`` and ``b`` are any objects with ``.q``, ``.u`` (or give ``speeds``),
    ``.mass_matrix`` and ``.forcing`` such that ``mass_matrix · d/dt(u) = forcing``:
    :func:`kanedyn.symbolic.kane`, :func:`kanedyn.symbolic.lagrange`,
    :class:`Equations` (your own), ``sympy.physics.mechanics.KanesMethod`` and
    ``LagrangesMethod`` (speeds ``q̇``), or tuples ``(M, forcing, q, u)``. Dynamic
    symbols ``q1(t)`` match symbols named ``q1``.

    ``b`` may use its own names: ``symbols={theirs: ours}`` renames its coordinates,
    speeds and parameters; without it, unmatched coordinates and speeds are paired by
    position and unmatched parameters by structure (the permutation under which most
    entries agree), and the report's ``notes`` say so. When both kinematic equations are
    known and the speeds differ (``u_b = W u_a``), ``b`` is rewritten in ``a``'s speeds
    first (:mod:`kanedyn.symbolic.matching`).

    Each entry of ``M`` and ``f`` is checked symbolically within ``time_budget`` (see the
    module docstring: cheap canonical forms first, over all entries) and numerically at
    ``samples`` random states. If ``M`` or ``f`` differ but the accelerations agree
    numerically, the rows ``M_b M_a^{-1} f_a = f_b`` are checked too (the equations may
    differ by a row scaling or combination).

    Parameters
    ----------
    a, b : equations
    speeds : sequence, optional
        Speed symbols for an object that has no ``.u``.
    symbols : mapping, optional
        ``{their symbol: our symbol}`` for ``b``'s coordinates, speeds and parameters.
    time_budget : float
        Seconds for the symbolic checks (clock checks between steps; no signals).
    samples : int
        Random states ``q ~ U(-π, π)``, speeds ``~ U(-1, 1)``.
    rng : int or numpy.random.Generator, optional
        Seed or generator for the samples (default seed 0: reproducible).
    params : mapping, optional
        Values for parameters (symbols or their names). Others are drawn from
        ``U(0.5, 2)`` at every sample.
    tol : float
        Relative tolerance of the numeric check: ``|a - b| ≤ tol · max(1, |a|, |b|)``.

    Returns
    -------
    ComparisonReport

    Raises
    ------
    ModelError
        The numbers of coordinates or speeds differ, the sizes do not fit, or the
        parameters cannot be paired unambiguously (then give ``symbols``).

    Examples
    --------
    >>> import sympy as sm
    >>> q, u, m, k = sm.symbols("q u m k")
    >>> r = compare(Equations([q], [u], [[m]], [-k * q]), Equations([q], [u], [[2 * m]], [-2 * k * q]))
    >>> r.equivalent, r.level
    (True, 'same accelerations')
    """
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng or 0)
    A = read_side(a, speeds, "the first argument")
    B = read_side(b, speeds, "the second argument")
    labels = (A.label, B.label)
    for lab, side in ((labels[0], A), (labels[1], B)):
        n_side = len(side.u)
        if side.M.shape != (n_side, n_side) or side.f.shape != (n_side, 1):
            raise ModelError(
                f"compare: {lab}: mass_matrix is {side.M.shape[0]}x{side.M.shape[1]} and "
                f"forcing has {side.f.shape[0]} rows, but there are {n_side} speeds"
            )
    notes = []
    for x, y, side in ((a, b, A), (b, a, B)):  # Kane's quaternions -> Lagrange's charts
        if getattr(y, "charts", None) and getattr(x, "kinematic_equations", None) is not None:
            notes.append(to_chart(side, x.model, y.charts))
    notes += match(A, B, symbols, params, generator)
    qa, ua, Ma, fa = A.q, A.u, A.M, A.f
    qb, ub, Mb, fb = B.q, B.u, B.M, B.f
    n = len(ua)
    for lab, M, f in ((labels[0], Ma, fa), (labels[1], Mb, fb)):
        if M.shape != (n, n) or f.shape != (n, 1):
            raise ModelError(
                f"compare: {lab}: mass_matrix is {M.shape[0]}x{M.shape[1]} and forcing has "
                f"{f.shape[0]} rows, but there are {n} speeds"
            )

    # one set of variables: plain dummies for q, u and any function-of-time parameters
    var: dict[Any, sm.Dummy] = {}
    for xa, xb in zip([*ua, *qa], [*ub, *qb], strict=True):
        d = var.setdefault(xa, sm.Dummy(symbol_name(xa)))
        var.setdefault(xb, d)
    # a large side comes in its compact form: M, f in names defined in order in defs
    defs = [(d, e.xreplace(var)) for d, e in [*A.defs, *B.defs]]
    Ma, fa, Mb, fb = (X.xreplace(var) for X in (Ma, fa, Mb, fb))
    everything = (Ma, fa, Mb, fb, *(e for _, e in defs))
    undef = set().union(*(X.atoms(AppliedUndef, sm.Derivative) for X in everything))
    fun = {x: sm.Dummy(symbol_name(x)) for x in undef}
    Ma, fa, Mb, fb = (X.xreplace(fun) for X in (Ma, fa, Mb, fb))
    defs = [(d, e.xreplace(fun)) for d, e in defs]
    x_state = [var[x] for x in [*qa, *ua]]
    inv = {d: x for x, d in var.items() if x in qa or x in ua} | {d: x for x, d in fun.items()}
    free = set().union(*(X.free_symbols for X in (Ma, fa, Mb, fb, *(e for _, e in defs))))
    free -= set(x_state) | {d for d, _ in defs}
    p_syms = sorted(free, key=lambda s: symbol_name(inv.get(s, s)))

    values = _param_values(p_syms, params or {}, inv)
    num = _Numeric(x_state, p_syms, Ma, fa, Mb, fb, defs)
    states = [
        np.r_[generator.uniform(-np.pi, np.pi, len(qa)), generator.uniform(-1.0, 1.0, n)]
        for _ in range(samples)
    ]
    pvals = [
        np.array([values[s] if s in values else generator.uniform(0.5, 2.0) for s in p_syms])
        for _ in range(samples)
    ]
    evals = [num(x, p) for x, p in zip(states, pvals, strict=True)]

    deadline = _Deadline(time_budget)
    back = lambda e: e.xreplace(inv)  # noqa: E731
    entries: list[_Entry] = []
    for i in range(n):
        for j in range(n):
            entries.append(_Entry(f"mass_matrix[{i}, {j}]", Ma[i, j] - Mb[i, j]))
    for i in range(n):
        entries.append(_Entry(f"forcing[{i}]", fa[i] - fb[i]))
    Mea = np.array([e[0] for e in evals])
    fea = np.array([e[1] for e in evals])
    Meb = np.array([e[2] for e in evals])
    feb = np.array([e[3] for e in evals])
    for k, e in enumerate(entries):
        if k < n * n:
            i, j = divmod(k, n)
            e.numeric(Mea[:, i, j], Meb[:, i, j], tol)
        else:
            i = k - n * n
            e.numeric(fea[:, i], feb[:, i], tol)
    _decide(entries, deadline)

    # the accelerations
    acc_err, acc_ok = 0.0, True
    for Mx, fx, My, fy in evals:
        try:
            da, db = np.linalg.solve(Mx, fx), np.linalg.solve(My, fy)
        except np.linalg.LinAlgError:
            continue
        err = float(np.max(np.abs(da - db), initial=0.0))
        acc_err = max(acc_err, err)
        scale = max(
            1.0, float(np.max(np.abs(da), initial=0.0)), float(np.max(np.abs(db), initial=0.0))
        )
        if not np.isfinite(err) or err > tol * scale * max(1.0, np.linalg.cond(Mx)) ** 0.5:
            acc_ok = False
    identical = all(e.status == "equal" for e in entries)
    entrywise_numeric = not any(e.status == "differs" for e in entries)
    level = "identical" if entrywise_numeric else ("same accelerations" if acc_ok else "different")
    proven = identical
    acc_entries: list[_Entry] = []
    if not entrywise_numeric and acc_ok:
        acc_entries = _acceleration_rows(Ma, fa, Mb, fb, evals, tol, deadline)
        _decide(acc_entries, deadline)
        proven = all(e.status == "equal" for e in acc_entries)
        if any(e.status == "differs" for e in acc_entries):
            acc_ok, level = False, "different"
    equivalent = acc_ok and (level != "different")
    if not acc_ok:
        # name the acceleration rows too, when M and f differ entry by entry anyway
        level = "different"
    out = tuple(e.freeze(back) for e in [*entries, *acc_entries])
    return ComparisonReport(
        equivalent=equivalent,
        proven=proven and equivalent,
        level=level,
        max_numeric_error=acc_err,
        entries=out,
        q=tuple(qa),
        u=tuple(ua),
        samples=samples,
        seconds=time.perf_counter() - deadline.start,
        budget_spent=deadline.spent() and any(e.status == "undecided" for e in out),
        names=labels,
        notes=tuple(notes),
    )


def _param_values(p_syms: list, params: Mapping[Any, float], inv: dict) -> dict:
    by_name = {str(k): float(v) for k, v in params.items()}
    out = {}
    for s in p_syms:
        name = symbol_name(inv.get(s, s))
        if name in by_name:
            out[s] = by_name[name]
    unknown = set(by_name) - {symbol_name(inv.get(s, s)) for s in p_syms}
    if unknown:
        raise ModelError(f"compare: params {sorted(unknown)} do not occur in the equations")
    return out


class _Numeric:
    """``(x, p) -> (M_a, f_a, M_b, f_b)`` as float arrays (one lambdified function)."""

    f: Callable

    def __init__(self, x: list, p: list, Ma, fa, Mb, fb, defs: Sequence = ()):
        if defs:  # straight-line code: the named intermediates, then M and f
            self.f = python_function([x, p], list(defs), [Ma, fa, Mb, fb])
            return
        self.f = sm.lambdify([x, p], [Ma, fa, Mb, fb], modules="numpy", cse=True)

    def __call__(self, x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, ...]:
        with np.errstate(all="ignore"):
            Ma, fa, Mb, fb = self.f(x, p)
        return (
            np.array(Ma, dtype=float),
            np.array(fa, dtype=float).ravel(),
            np.array(Mb, dtype=float),
            np.array(fb, dtype=float).ravel(),
        )


@attrs.define(eq=False)
class _Entry:
    """One difference being decided (mutable while :func:`compare` runs)."""

    name: str
    diff: sm.Expr
    status: str = "undecided"
    method: str = "not reached"
    shown: sm.Expr | None = None
    numeric_error: float = 0.0
    scale: float = 0.0
    stage: int = 0

    def numeric(self, va: np.ndarray, vb: np.ndarray, tol: float) -> None:
        err = np.abs(va - vb)
        self.numeric_error = float(np.max(err, initial=0.0)) if np.all(np.isfinite(err)) else np.inf
        self.scale = float(max(np.max(np.abs(va), initial=0.0), np.max(np.abs(vb), initial=0.0)))
        if self.diff == 0:
            self.status, self.method, self.stage = "equal", "identical", 99
        elif not self.numeric_error <= tol * max(1.0, self.scale):
            self.status, self.method, self.shown = "differs", "numeric", self.diff

    def freeze(self, back: Callable) -> EntryComparison:
        shown = (
            None
            if self.status == "equal" or self.diff is sm.nan
            else back(self.shown if self.shown is not None else self.diff)
        )
        return EntryComparison(
            name=self.name,
            status=self.status,
            method=self.method,
            difference=shown,
            numeric_error=self.numeric_error,
            scale=self.scale,
        )


def _decide(entries: list[_Entry], deadline: _Deadline) -> None:
    """Symbolic tests until the budget is spent: first the proofs (undecided entries, the
    cheapest test over all entries before a costlier one), then a readable form of each
    difference (expand and the trigonometric normal form only)."""
    proofs: list[tuple[str, Callable[[sm.Expr], sm.Expr], int | None]] = [
        ("expand", sm.expand, None),
        ("trig normal form", _trig_normal_form, None),
        ("trigsimp", sm.trigsimp, _TRIGSIMP_OPS),
        ("simplify", sm.simplify, _SIMPLIFY_OPS),
    ]
    cache: dict[tuple[int, sm.Expr], sm.Expr] = {}

    def run(stage: int, fn: Callable[[sm.Expr], sm.Expr], x: sm.Expr) -> sm.Expr:
        key = (stage, x)
        if key not in cache:
            try:
                cache[key] = fn(x)
            except Exception:  # noqa: BLE001 (a failing simplifier must not fail the check)
                cache[key] = x
        return cache[key]

    for stage, (method, fn, max_ops) in enumerate(proofs, start=1):
        for e in entries:
            if e.status != "undecided" or e.stage >= stage:
                continue
            if deadline.spent():
                e.method = "time budget spent"
                continue
            ops = _ops(e.diff)
            if (max_ops is not None and ops > max_ops) or ops > _OPS_PER_SECOND * deadline.left():
                e.stage, e.method = stage, "too large to simplify"
                continue
            res = run(stage, fn, e.diff)
            e.stage = stage
            if res == 0:
                e.status, e.method = "equal", method
            else:
                e.method = f"not zero after {method}"
                if stage <= 2:
                    e.shown = res
    for e in entries:
        if e.status != "differs" or deadline.spent():
            continue
        shown = run(2, _trig_normal_form, e.diff)
        if _ops(shown) <= _TRIGSIMP_OPS:
            shown = sm.factor_terms(shown)
        e.shown = shown


def _acceleration_rows(Ma, fa, Mb, fb, evals, tol: float, deadline: _Deadline) -> list[_Entry]:
    """Rows of ``M_b adj(M_a) f_a - det(M_a) f_b`` (zero iff the accelerations agree)."""
    n = Ma.shape[0]
    rows: list[_Entry] = []
    if n <= 4 and deadline.left() > 0:
        # canonical (expanded, reduced) entries first keep the products small
        Ma, fa, Mb, fb = (X.applyfunc(_trig_normal_form) for X in (Ma, fa, Mb, fb))
        adj = Ma.adjugate(method="berkowitz")
        det = Ma.det(method="berkowitz")
        R = Mb * (adj * fa) - det * fb
        exprs = list(R)
    else:
        exprs = [None] * n
    for i in range(n):
        e = _Entry(f"acceleration[{i}]", exprs[i] if exprs[i] is not None else sm.nan)
        va = np.array([(My @ np.linalg.solve(Mx, fx))[i] for Mx, fx, My, fy in evals])
        vb = np.array([fy[i] for Mx, fx, My, fy in evals])
        e.numeric(va, vb, tol)
        if exprs[i] is None:
            e.stage, e.method = 99, "too large to simplify"
        rows.append(e)
    return rows
