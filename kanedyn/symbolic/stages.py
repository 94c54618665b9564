"""Kane's method stage by stage, as a student writes it: the teaching view of
:func:`kanedyn.symbolic.kane` (:meth:`~kanedyn.symbolic.KaneEquations.stages`).

The stages are those of Kane & Levinson (1985) and of Stoneking's Kane_NBody slides
18-23, in order:

1. **Kinematics**: for each body i, the angular velocity :math:`\\omega_i`, the velocity
   of the mass centre :math:`v_i`, and their rates
   :math:`\\alpha_i = \\Omega_i \\dot u + \\alpha_{r,i}`,
   :math:`a_i = V_i \\dot u + a_{r,i}` (N components).
2. **Partial velocities**: for each speed :math:`u_r`, :math:`\\partial\\omega_i/\\partial u_r`
   and :math:`\\partial v_i/\\partial u_r` (the columns of :math:`\\Omega_i`, :math:`V_i`).
3. **Forces on each body**: the resultant applied force :math:`F_i` (at the mass centre)
   and torque :math:`T_i`, and the inertia force and torque
   :math:`F^*_i = -m_i a_i`, :math:`T^*_i = -(I_i \\alpha_i + \\omega_i \\times I_i \\omega_i)`
   (plus embedded momentum when a body has it).
4. **Generalized forces** row by row:
   :math:`F_r = \\sum_i \\partial v_i/\\partial u_r \\cdot F_i
   + \\partial\\omega_i/\\partial u_r \\cdot T_i + Q_r` (``Q``: joint springs, dampers,
   actuators) and :math:`F^*_r = \\sum_i \\partial v_i/\\partial u_r \\cdot F^*_i
   + \\partial\\omega_i/\\partial u_r \\cdot T^*_i`.
5. **Equations**: :math:`F_r + F^*_r = 0` (the rows of stage 4), and the kinematic
   equations :math:`\\dot q`.

**Named vectors, as the textbook writes them.** Every vector of the pipeline has a name
whose components print as :math:`\\omega_{B,x}`, :math:`F^*_{B,y}`, ...: the angular
velocity :math:`\\omega_i`, velocity :math:`v_i`, the remainders :math:`\\alpha_{r,i}`,
:math:`a_{r,i}`, the partials :math:`\\Omega_r` (the same for every body that
:math:`u_r` moves) and :math:`V_{i,r}` (given once when bodies share it), the forces
:math:`F_i`, :math:`T_i` and the central inertia matrix :math:`I_i` (N axes) are written
out once; everything built from them is written in those names, not expanded
(:class:`Formula`): :math:`\\alpha_i = \\sum_r \\Omega_r \\dot u_r + \\alpha_{r,i}`,
:math:`F^*_i = -m_i a_i`, :math:`T^*_i = -(I_i\\alpha_i + \\omega_i \\times I_i\\omega_i)`,
:math:`F^*_r = \\sum_i V_{i,r}\\cdot F^*_i + \\Omega_r \\cdot T^*_i`. So the table grows
with the number of (body, speed) pairs, not with the size of the expanded equations.

The written-out vectors use the derivation's named intermediates (the compact form's
names: ``R_N_B0_01``, ``omega1_2``, ...): one whose expression has more than ``fold``
tree nodes (default 4: a sine, a product of two names) stays a name, defined under
"where" at the end of the stage that first uses it, in pipeline order, one short line
each. An entry that still does not fit in a few lines of :data:`PAGE_WIDTH` printed
characters per component names its largest written-out intermediates, and then its
largest parenthesized sums (``X_1``, ``X_2``, ...: the loop closure, built outside the
tape), until it does; long sums are broken between terms, and a column whose rows are
too wide for a ``bmatrix`` is shown component by component. :meth:`Stages.unfold`
substitutes every name back. The sine and cosine of a coordinate print as
:math:`\\mathrm{s}_k`, :math:`\\mathrm{c}_k`.

**The recursion in named vectors.** The derivation records how it builds each of its
vectors and matrices (``Intermediates.combine`` and ``Intermediates.product`` in :mod:`kanedyn.symbolic.kane`: the
terms ``sign · op(operands)`` that also compute the value), so the remainders are
written as the textbook's recursion down the tree, in names:
:math:`\\alpha_{r,i} = \\alpha_{r,i(k)} + \\alpha^{rel}_k`,
:math:`\\alpha^{rel}_k = \\omega_i \\times \\omega^{rel}_k + R^{NG_o}_k \\dot\\Gamma_k\\sigma_k`,
:math:`a_{r,i} = \\alpha_{r,i} \\times r_i + \\omega_i \\times v_i + C_k`,
:math:`C_k = C_{i(k)} - \\alpha^{rel}_k \\times o_k - \\omega^{rel}_k \\times v_{o,k}
+ \\omega_{i(k)} \\times w_k`, the rotations one matrix per joint
(:math:`R^{NB}_i = R^{NB}_{i(k)} R^{B_iG_o}_k`) and :math:`I_i = R^{NB}_i I^B_i (R^{NB}_i)^T`
(``_Folder.group``, ``_Folder.formula``). A vector or matrix whose entries are
all small (``fold``) is written out where it is used.

**Compact form.** Above :data:`COMPACT_ABOVE` characters of Markdown, the lines that
only instantiate a stage's general formula (:attr:`Stage.instances`) are shown as a
short table (:attr:`Stage.table`), and a definition that reads like an earlier joint's
once the names of the joint, its body, the inner body and the inner body's joint are
swapped is written once, with a sentence naming the joints it stands for
(``_fold_alike``; Explorer-1's four antennas). The stages keep every entry:
:meth:`Stages.unfold` and the checks work on the same names either way.

A model with flexible bodies has a stage **Flexible bodies** after the forces: each
flexible body's partials :math:`W_{i,r}` of its speeds :math:`(\\omega, v_0, \\xi_i)` in
its own axes, the remainder :math:`w_{r,i}`, the blocks of its modal inertia
:math:`\\Delta M_i` (:math:`\\Delta J`, :math:`c_f`, :math:`\\bar H`, :math:`\\bar P`,
:math:`M_\\Psi`), its velocity terms :math:`b_i`, the active modal force :math:`F^e_i`
and the inertia force :math:`F^{*e}_i = -(\\Delta M_i \\dot w_i + b_i)`
(:mod:`kanedyn.symbolic.flex`); the rows of stage 4 gain
:math:`W_{i,r} \\cdot F^e_i` and :math:`W_{i,r} \\cdot F^{*e}_i`.

A model with closed loops (:class:`kanedyn.Loop`) has a sixth stage before the
equations, **Loop closure**: :math:`\\Phi`, :math:`\\dot\\Phi = A\\nu` and the bias
:math:`b` of each constraint row (:mod:`kanedyn.symbolic.loops`).

Each stage renders as Markdown with LaTeX math (:meth:`Stages.markdown`, shown by
Jupyter), and the whole as a LaTeX document (:meth:`Stages.latex`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs
import sympy as sm
from sympy.printing.latex import LatexPrinter

from kanedyn.symbolic.plain import from_latex, readable_numbers, shown_float, text

__all__ = ["Formula", "Stage", "Stages", "stages"]


@attrs.frozen(eq=False)
class Stage:
    """One stage: a title, a sentence, its entries ``(lhs LaTeX, value)`` and the named
    intermediates it introduces ``(symbol, value)``."""

    title: str
    text: str
    entries: tuple[tuple[str, Any], ...]
    where: tuple[tuple[sm.Symbol, Any], ...]
    #: the entries that only instantiate the stage's general formula (by lhs), and a
    #: table (header row first, cells in LaTeX math) that says the same in short:
    #: shown instead of them in a large table (:data:`COMPACT_ABOVE`); definitions
    #: listed here (by LaTeX) are hidden with them (stage 5's M and f above
    #: :data:`EXPLICIT_UP_TO` speeds)
    instances: frozenset[str] = frozenset()
    table: tuple[tuple[str, ...], ...] = ()
    #: entries and definitions (by lhs) written like an earlier one of another joint
    #: (body), with that joint's own names, and the sentence that says so
    alike: frozenset[str] = frozenset()
    likewise: str = ""
    #: entries (by lhs) that are all zero, shown as one line ``a = b = ... = 0`` where
    #: the first is (a welded body's position, velocities and accelerations)
    zero: tuple[str, ...] = ()

    def shown(self, compact: bool) -> list[tuple[str, Any]]:
        """The entries displayed one by one."""
        hidden = self.alike | (self.instances if self.table else frozenset())
        out = []
        for lhs, v in self.entries:
            if self.zero and lhs == self.zero[0]:
                out.append((" = ".join(self.zero), sm.Integer(0)))
            elif lhs not in self.zero and (not compact or lhs not in hidden):
                out.append((lhs, v))
        return out

    def shown_where(self, compact: bool) -> list[tuple[sm.Symbol, Any]]:
        """The definitions displayed under "where" (those of hidden entries left out)."""
        if not compact:
            return list(self.where)
        hidden = self.alike | (self.instances if self.table else frozenset())
        return [(x, v) for x, v in self.where if latex(x) not in hidden]

    def table_markdown(self) -> str:
        rows = [f"| {' | '.join(row)} |" for row in self.table]
        rows.insert(1, "|" + " --- |" * len(self.table[0]))
        return "\n".join(rows) + "\n"

    def table_latex(self) -> str:
        rows = [" & ".join(row) + " \\\\" for row in self.table]
        head = "\\begin{tabular}{" + "l" * len(self.table[0]) + "}"
        return "\n".join([head, rows[0], "\\hline", *rows[1:], "\\end{tabular}"])


#: A table whose Markdown would be longer than this (characters) shows each stage's
#: instances of its general formula as a short table (:attr:`Stage.table`).
COMPACT_ABOVE = 10_000


def _size(e: Any) -> int:
    if isinstance(e, sm.MatrixBase):
        return max((_size(x) for x in e), default=0)
    return sum(1 for _ in sm.preorder_traversal(e))


#: Width of a page in (estimated) printed characters of math: 17 cm of 10 pt type.
PAGE_WIDTH = 100


class _Printer(LatexPrinter):
    """sympy's LaTeX, with the textbook's short forms :math:`\\mathrm{s}_k = \\sin q_k`,
    :math:`\\mathrm{c}_k = \\cos q_k` for the sine and cosine of a coordinate ``q_k``
    (Kane & Levinson's :math:`s_i`, :math:`c_i`)."""

    def _print_Function(self, e: Any, exp: Any = None) -> str:
        a = e.args[0] if e.args else None
        if e.func in (sm.sin, sm.cos) and isinstance(a, sm.Symbol) and a.name.startswith("q_"):
            s = f"\\mathrm{{{e.func.__name__[0]}}}_{{{a.name[2:].replace('_', ' ')}}}"
            return s if exp is None else f"{s}^{{{exp}}}"
        return str(super()._print_Function(e, exp))

    def _print_Float(self, e: Any) -> str:
        return shown_float(e)


_PRINTER = _Printer()
_COMMAND = re.compile(r"\\(left|right|mathrm|begin\{bmatrix\}|end\{bmatrix\}|dot|quad)")


def latex(e: Any) -> str:
    """LaTeX of ``e`` with the short sines and cosines of :class:`_Printer`, and plain
    parentheses (the entries are one line high: ``\\left(`` only costs markup)."""
    e = readable_numbers(e)
    return str(_PRINTER.doprint(e)).replace("\\left(", "(").replace("\\right)", ")")


def width(tex: str) -> int:
    """Estimated printed width of LaTeX math ``tex``, in characters: commands such as
    ``\\left``, braces, ``^``, ``_`` and spaces take no room, ``\\sin`` three, any other
    command one (subscripts count as full characters, which about pays for the spacing
    around operators)."""
    t = _COMMAND.sub("", tex)
    t = re.sub(r"\\(sin|cos|tan)", "xxx", t)
    t = re.sub(r"\\[a-zA-Z]+", "x", t)
    return len(re.sub(r"[{}^_ \\]", "", t))


def _terms(e: Any, split: bool = True) -> list[str]:
    """The LaTeX of the top-level terms of ``e``, each with its sign (``+ t`` / ``- t``);
    ``split``: a term wider than a line broken at its largest factor's sum
    (:func:`_signed`)."""
    return _signed(e, latex, width, split)


def _signed(e: Any, fmt: Any, size: Any, split: bool) -> list[str]:
    """The terms of ``e`` printed by ``fmt`` with their signs (``+ t`` / ``- t``, the
    first as ``t`` / ``-t``); with ``split``, a term whose printed ``size`` exceeds a line
    (``c·(a + b + ...)``) is given as pieces ``c (a``, ``+ b``, ..., ``+ z)``, its
    sum's terms broken the same way."""
    e = sm.sympify(e)
    out: list[str] = []
    for t in e.as_ordered_terms() if isinstance(e, sm.Add) else [e]:
        neg = t.could_extract_minus_sign()
        pieces = _pieces(-t if neg else t, fmt, size, split)
        out += [f"{'-' if neg else '+'} {pieces[0]}", *pieces[1:]]
    out[0] = out[0].removeprefix("+ ").replace("- ", "-", 1 if out[0].startswith("-") else 0)
    return out


def _pieces(t: Any, fmt: Any, size: Any, split: bool) -> list[str]:
    s = fmt(t)
    if not split or size(s) <= PAGE_WIDTH - 12 or not isinstance(t, sm.Mul):
        return [s]
    sums = [a for a in t.args if isinstance(a, sm.Add)]
    if not sums:
        return [s]
    big = max(sums, key=lambda a: size(fmt(a)))
    rest = sm.Mul(*[a for a in t.args if a is not big])
    inner = _signed(big, fmt, size, split)
    head = "" if rest == 1 else fmt(rest) + ("·" if fmt is text else " ")
    if len(inner) == 1:
        return [s]
    return [f"{head}({inner[0]}", *inner[1:-1], f"{inner[-1]})"]


def _lines(e: Any, first: int, split: bool = True) -> list[str]:
    """``e`` broken between its terms into lines of at most ``PAGE_WIDTH`` (the first
    line has ``first`` characters taken by its left-hand side); ``split``: long terms
    broken too (:func:`_signed`)."""
    return _join(_terms(e, split), first)


def _join(terms: Sequence[str], first: int) -> list[str]:
    """Signed LaTeX terms joined into lines of at most ``PAGE_WIDTH`` (see :func:`_lines`)."""
    lines: list[str] = []
    cur, room = "", PAGE_WIDTH - first
    for t in terms:
        if cur and width(cur) + width(t) > room:
            lines.append(cur)
            cur, room = "", PAGE_WIDTH - 4
        cur = f"{cur} {t}".strip()
    return [*lines, cur]


def _fits(e: Any, first: int, max_lines: int = 4) -> bool:
    """Whether ``e`` (a scalar or a column) prints in at most ``max_lines`` page-wide
    lines per entry."""
    for x in e if isinstance(e, sm.MatrixBase) else [e]:
        ls = _lines(x, first, split=False)
        if len(ls) > max_lines or any(width(x) > PAGE_WIDTH - 4 for x in ls[1:]):
            return False
        if width(ls[0]) > PAGE_WIDTH - first:
            return False
    return True


def display(lhs: str, value: Any) -> str:
    """``lhs = value`` as the body of one display: a column vector as a ``bmatrix`` with
    one row per source line when its rows fit on the page, otherwise component by
    component (``[lhs]_k``) in an ``aligned`` block, long sums broken between terms."""
    lw = width(lhs) + 2
    if isinstance(value, Formula):
        ls = _join(value.terms, lw)
        if len(ls) == 1:
            return f"{lhs} = {ls[0]}"
        return "\\begin{aligned}\n" + " \\\\\n".join(_broken(lhs, ls)) + "\n\\end{aligned}"
    if isinstance(value, sm.MatrixBase) and all(x == 0 for x in value):
        return f"{lhs} = 0"
    if isinstance(value, sm.MatrixBase) and value.cols == 1:
        rows = [latex(x) for x in value]
        if all(width(r) + lw + 2 <= PAGE_WIDTH for r in rows):
            body = " \\\\\n".join(rows)
            return f"{lhs} = \\begin{{bmatrix}}\n{body}\n\\end{{bmatrix}}"
        out = []
        for k, x in enumerate(value, 1):
            out += _aligned(f"\\left[{lhs}\\right]_{{{k}}}", x, lw + 4)
        return "\\begin{aligned}\n" + " \\\\\n".join(out) + "\n\\end{aligned}"
    if isinstance(value, sm.MatrixBase):
        tex = latex(value)
        if width(tex) + lw <= PAGE_WIDTH:
            return f"{lhs} = {tex}"
        out = []  # entry by entry (the upper triangle of a symmetric matrix)
        symmetric = value.is_symmetric()
        for a in range(value.rows):
            for b in range(value.cols):
                if symmetric and b < a:
                    continue
                out += _aligned(f"\\left[{lhs}\\right]_{{{a + 1}{b + 1}}}", value[a, b], lw + 6)
        return "\\begin{aligned}\n" + " \\\\\n".join(out) + "\n\\end{aligned}"
    ls = _lines(value, lw)
    if len(ls) == 1:
        return f"{lhs} = {ls[0]}"
    return "\\begin{aligned}\n" + " \\\\\n".join(_aligned(lhs, value, lw)) + "\n\\end{aligned}"


def _broken(lhs: str, lines: Sequence[str]) -> list[str]:
    """``lhs &= first line`` and the further lines indented, for an ``aligned`` block."""
    return [f"{lhs} &= {lines[0]}"] + [f"&\\quad {x}" for x in lines[1:]]


def _aligned(lhs: str, value: Any, first: int) -> list[str]:
    return _broken(lhs, _lines(value, first))


class _Folder:
    """Explicit forms, with the named intermediates kept as names where they are large:
    an intermediate is written out when its expression has at most ``fold`` nodes, and
    an entry (or a definition) that does not fit in a few page-wide lines per component
    (:func:`display`) names its largest written-out parts until it fits."""

    def __init__(self, eom: Any, fold: int, simplify: bool) -> None:
        self.tape = eom._der.tape
        self.fold = fold
        self.page = 4 * fold
        self.simplify = simplify
        self.rule: dict[sm.Basic, Any] = {}
        self.where: list[tuple[sm.Symbol, Any]] = []
        self.defs: list[tuple[sm.Symbol, Any]] = []  # the groups' components
        self._names: set[str] = set()
        self._sums: dict[sm.Basic, sm.Symbol] = {}
        self._count = 0
        # the derivation's vectors and matrices that have a name in the tables
        self.tex = _group_names(eom.model)
        self.group_of: dict[sm.Basic, str] = {}
        for label, g in self.tape.groups.items():
            if label in self.tex:
                for x in g.entries:
                    if x in self.tape.index:
                        self.group_of.setdefault(x, label)
        self.shown: dict[str, tuple[str, sm.ImmutableMatrix]] = {}
        self.literal: set[str] = set()  # the groups written out where used
        self._by_entries: dict[tuple, tuple[str, sm.ImmutableMatrix]] = {}

    def preset(self, label: str, tex: str, names: sm.ImmutableMatrix) -> None:
        """Group ``label`` is the table's vector ``names`` (``tex``), defined there."""
        g = self.tape.groups[label]
        for x, c in zip(g.entries, names, strict=True):
            if x in self.tape.index and x not in self.rule:
                self.rule[x] = c
        self.shown[label] = (tex, names)
        self._by_entries.setdefault(g.entries, (tex, names))

    def group(self, label: str) -> tuple[str, sm.ImmutableMatrix]:
        """The LaTeX name and the component names of the derivation's vector or matrix
        ``label``, defined under "where" on first use: by its recorded terms (in the
        names of its operands, :meth:`formula`) or by its entries."""
        if label in self.shown:
            return self.shown[label]
        if label.endswith("^T"):  # a transposed operand
            tex, names = self.group(label[:-2])
            return f"\\left({tex}\\right)^T", names.T
        g = self.tape.groups[label]
        mat = sm.ImmutableMatrix(*g.shape, list(g.entries))
        if label not in self.tex and not any(x in self.tape.index for x in g.entries):
            self.shown[label] = (latex(mat), mat)  # a constant: written out
            self.literal.add(label)
            return self.shown[label]
        if all(x == 0 for x in g.entries):
            self.shown[label] = ("0", mat)
            return self.shown[label]
        if g.entries in self._by_entries:  # the same entries under another name
            self.shown[label] = self._by_entries[g.entries]
            return self.shown[label]
        base, sub = self.tex[label]
        tex = f"{base}_{{{sub}}}"
        names = _components((base, sub), g)
        if g.terms is not None:
            shown: Any = self.formula(label)
            value = shown.value
        else:
            own = [x for x in g.entries if x in self.tape.index]
            self._prepare([self.tape.defs[self.tape.index[x]][1] for x in own])
            value = sm.ImmutableMatrix(
                *g.shape,
                [
                    self._fit(self.tape.defs[self.tape.index[x]][1], 12)
                    if x in self.tape.index and self.rule.get(x, x) == x
                    else self.rule.get(x, x)
                    for x in g.entries
                ],
            )
            shown = value
            if all(_size(x) <= self.fold for x in value):  # small: written out where used
                self.shown[label] = (latex(value), value)
                self.literal.add(label)
                return self.shown[label]
        for x, c in zip(g.entries, names, strict=True):
            if x in self.tape.index and isinstance(c, sm.Symbol):
                if not isinstance(self.rule.get(x), sm.Symbol):  # keep an earlier name
                    self.rule[x] = c  # from now on (an entry written out before stays so)
        self.where.append((sm.Symbol(tex), shown))
        self.defs += [(c, v) for c, v in zip(names, value, strict=True) if c != v]
        self.shown[label] = (tex, names)
        self._by_entries.setdefault(g.entries, (tex, names))
        return self.shown[label]

    def formula(self, label: str) -> Formula:
        """The recorded terms of vector ``label`` written in its operands' names
        (defining those first), as a :class:`Formula`: ``Σ sign · op(operands)``
        evaluated by the derivation's own operations
        (:data:`kanedyn.symbolic.intermediates.OPERATIONS`)."""
        from kanedyn.symbolic.intermediates import OPERATIONS

        terms = []
        for sign, op, args in self.tape.groups[label].terms or ():
            named = [self.group(a) for a in args]
            if any(t == "0" for t, _ in named):
                continue
            if op == "x" and named[0][1] == named[1][1]:
                continue  # a x a = 0
            if op == "@":
                rate, named = self._axis(named, args)
                sign = sign * rate
            texs = [t for t, _ in named]
            tex = f"{texs[0]} \\times {texs[1]}" if op == "x" else " ".join(texs)
            terms.append((sign, tex, OPERATIONS[op](*[n for _, n in named])))
        return _combination(terms, sm.zeros(*self.tape.groups[label].shape))

    def _axis(self, named: list, args: Sequence[str]) -> tuple[Any, list]:
        """A product's trailing written-out operands ending in a column multiplied
        together, and a rate along one axis taken out as a scalar factor (returned
        first, else 1): a revolute joint's ``R [0, 1, 0; 0, 0, 1; 1, 0, 0] [u; 0; 0]``
        reads ``u R [0; 0; 1]``."""
        k = len(named)
        while k > 0 and args[k - 1] in self.literal:
            k -= 1
        tail = [n for _, n in named[k:]]
        if len(tail) < 2 and not (tail and k == 0) or tail[-1].shape[1] != 1:
            return 1, named
        col = sm.ImmutableMatrix(sm.Mul(*tail) if len(tail) > 1 else tail[0])
        nonzero = [x for x in col if x != 0]
        if len(nonzero) == 1 and not nonzero[0].is_number:
            rate = nonzero[0]
            unit = col.applyfunc(lambda x: 1 if x == rate else 0)
            return rate, [*named[:k], (latex(unit), unit)]
        return 1, [*named[:k], (latex(col), col)]

    def _tidy(self, e: Any) -> Any:
        if self.simplify and _size(e) <= 4 * self.fold:
            return sm.trigsimp(sm.expand(e))
        return e

    def _symbol(self, s: sm.Dummy) -> sm.Symbol:
        base = s.name.rstrip("_")
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}'{k}"
        self._names.add(name)
        return sm.Symbol(name)

    def _name(self, s: sm.Dummy) -> None:
        """Keep intermediate ``s`` as a name from now on, defined under "where" (with its
        vector or matrix, when it is a component of one with a name)."""
        if s in self.group_of:
            self.group(self.group_of[s])
            if isinstance(self.rule.get(s), sm.Symbol):
                return
        sym = self._symbol(s)
        value = self._fit(self.tape.defs[self.tape.index[s]][1], width(latex(sym)) + 2)
        self.rule[s] = sym
        self.where.append((sym, value))

    def _fit(self, e: Any, first: int = 12) -> Any:
        """``e`` (in tape names) written out, at most ``page`` nodes and a few page-wide
        lines per component where possible."""
        value = self._tidy(e.xreplace(self.rule))
        while _size(value) > self.page or not _fits(value, first):
            parts = [x for x in e.free_symbols if x in self.tape.index]
            parts = [x for x in parts if not isinstance(self.rule[x], sm.Symbol)]
            if not parts:
                return self._split(value, first)
            self._name(max(parts, key=lambda x: _size(self.rule[x])))
            value = self._tidy(e.xreplace(self.rule))
        return value

    def _split(self, value: Any, first: int) -> Any:
        """Name the largest parenthesized sums of ``value`` (``X_1``, ``X_2``, ...) until
        it fits: for entries built outside the derivation's tape (the loop closure)."""
        value = value.xreplace(self._sums)
        while not _fits(value, first):
            sums = {
                x
                for x in sm.preorder_traversal(value)
                if isinstance(x, sm.Add) and x not in self._sums and 5 <= _size(x)
            }
            tops = set(value if isinstance(value, sm.MatrixBase) else [value])
            sums -= tops
            if not sums:
                break
            big = max(sums, key=_size)
            self._count += 1
            sym = sm.Symbol(f"X_{self._count}")
            self._names.add(sym.name)
            definition = self._split(big, width(latex(sym)) + 2)
            self._sums[big] = sym
            self.where.append((sym, definition))
            value = value.xreplace({big: sym})
        return value

    def own(self, expr: sm.MatrixBase, comps: sm.MatrixBase) -> Any:
        """``expr`` (a vector or matrix of the derivation's names) written out one level
        deeper, as a quantity of the table whose components are ``comps``: an entry that
        is a name not shown yet is replaced by its definition here, and prints as its
        component of ``comps`` wherever it is used later."""
        items, flat = list(expr), list(comps)
        new = [x in self.tape.index and x not in self.rule for x in items]
        expanded = [
            self.tape.defs[self.tape.index[x]][1] if fresh else x
            for x, fresh in zip(items, new, strict=True)
        ]
        shown = self(sm.ImmutableMatrix(expr.rows, expr.cols, expanded))
        for x, c, fresh in zip(items, flat, new, strict=True):
            if fresh and x not in self.rule:
                self.rule[x] = c
        return shown

    def _prepare(self, items: list) -> None:
        """Inline or name each intermediate that ``items`` need, in definition order (a
        component of a named vector or matrix names the whole, :meth:`group`)."""
        for s, e in self.tape.needed(items):
            if s in self.rule:
                continue
            value = self._tidy(e.xreplace(self.rule))
            if _size(value) <= self.fold:
                self.rule[s] = value
            else:
                self._name(s)

    def __call__(self, expr: Any, first: int = 12) -> Any:
        mat = isinstance(expr, sm.MatrixBase)
        items = list(expr) if mat else [sm.sympify(expr)]
        self._prepare(items)
        if mat:
            whole = self._fit(sm.ImmutableMatrix(expr.rows, expr.cols, items), first)
            return sm.ImmutableMatrix(whole)
        return self._fit(items[0], first)


@attrs.frozen(eq=False)
class Formula:
    """A vector or scalar written in named quantities, as the textbook writes it
    (``F^*_i = -m_i a_i``): its LaTeX ``terms`` (joined by ``+``/``-`` as written) and
    its ``value`` in the components of the names (for :meth:`Stages.unfold`). The two
    are built by the same call (:func:`_combination`), so they cannot disagree."""

    terms: tuple[str, ...]
    value: Any

    def _sympy_(self) -> Any:
        return sm.sympify(self.value)


@attrs.frozen(eq=False)
class Stages:
    """The stages of Kane's method for one system (see the module docstring).

    ``names`` holds, in definition order, every named component (``\\omega_{B,x}``,
    ``F^*_{B,y}``, ...) and named intermediate (``R_N_B1_00``, ``X_1``) with its value,
    for :meth:`unfold`."""

    name: str
    stages: tuple[Stage, ...]
    names: tuple[tuple[sm.Symbol, Any], ...] = ()
    #: the parameters' values (symbol, number as the user wrote it), listed at the end
    values: tuple[tuple[sm.Symbol, float], ...] = ()

    def markdown(self, *, compact: bool | None = None) -> str:
        """Markdown with ``$$ ... $$`` LaTeX math, one section per stage; ``compact``
        (default: when the full form is longer than :data:`COMPACT_ABOVE` characters)
        shows the entries that instantiate a stage's general formula as a table."""
        if compact is None:
            full = self.markdown(compact=False)
            if len(full) <= COMPACT_ABOVE:
                return full
            compact = True
        out = [f"# Kane's method: {self.name}\n\n{_NOTATION}\n"]
        for k, st in enumerate(self.stages, 1):
            out.append(f"## {k}. {st.title}\n\n{st.text}\n")
            if compact and st.table:
                out.append(st.table_markdown())
            out += [f"$$\n{display(lhs, v)}\n$$\n" for lhs, v in st.shown(compact)]
            where = st.shown_where(compact)
            if where:
                out.append("where\n")
                out.append(f"$$\n{_where(where)}\n$$\n")
            if compact and st.likewise:
                out.append(f"{st.likewise}\n")
        if self.values:
            rows = [f"| `{x}` | {v!r} |" for x, v in self.values]
            out.append(
                "## Parameters\n\n| parameter | value |\n|---|---|\n" + "\n".join(rows) + "\n"
            )
        return "\n".join(out)

    def latex(self, *, compact: bool | None = None, fragment: bool = False) -> str:
        """A complete LaTeX document (``article``, amsmath), one section per stage
        (``compact`` as in :meth:`markdown`); ``fragment=True``: the body only, to
        ``\\input`` in a document that loads amsmath."""
        if compact is None:
            compact = len(self.markdown(compact=False)) > COMPACT_ABOVE
        out = [] if fragment else [
            "\\documentclass[10pt]{article}",
            "\\usepackage[margin=2cm]{geometry}",
            "\\usepackage{amsmath}",
            "\\allowdisplaybreaks",
            "\\begin{document}",
        ]  # fmt: skip
        out += [
            f"\\section*{{Kane's method: {_escape(self.name)}}}",
            _NOTATION.replace("$$", "$"),
        ]
        for k, st in enumerate(self.stages, 1):
            out.append(f"\\subsection*{{{k}. {_escape(st.title)}}}")
            out.append(_escape(st.text).replace("$$", "$"))
            if compact and st.table:
                out.append(st.table_latex())
            out += [f"\\[\n{display(lhs, v)}\n\\]" for lhs, v in st.shown(compact)]
            where = st.shown_where(compact)
            if where:
                out.append("where")
                out.append(f"\\[\n{_where(where)}\n\\]")
            if compact and st.likewise:
                out.append(_escape(st.likewise))
        if self.values:
            rows = [f"${latex(x)}$ & {v!r} \\\\" for x, v in self.values]
            out += ["\\subsection*{Parameters}", "\\begin{tabular}{ll}", *rows, "\\end{tabular}"]
        if not fragment:
            out.append("\\end{document}")
        return "\n".join(out) + "\n"

    def text(self, *, compact: bool | None = None) -> str:
        """Plain Unicode text for a terminal, one section per stage, the ``=`` of each
        stage's entries aligned (``compact`` as in :meth:`markdown`); ``str(stages)``."""
        if compact is None:
            compact = len(self.markdown(compact=False)) > COMPACT_ABOVE
        title = f"Kane's method: {self.name}"
        out = [title, "=" * len(title), "", *_wrap(_prose(_NOTATION)), ""]
        for k, st in enumerate(self.stages, 1):
            head = f"{k}. {st.title}"
            out += [head, "-" * len(head), *_wrap(_prose(st.text)), ""]
            if compact and st.table:
                out += [*_text_table(st.table), ""]
            shown = [(from_latex(lhs), v) for lhs, v in st.shown(compact)]
            pad = min(max((len(lhs) for lhs, _ in shown if " = " not in lhs), default=0), 24)
            for lhs, v in shown:
                out += text_display(lhs.ljust(pad), v)
            where = [(text(x), v) for x, v in st.shown_where(compact)]
            if where:
                out += ["", "where"]
                pad = min(max(len(lhs) for lhs, _ in where), 24)
                for lhs, v in where:
                    out += ["  " + line for line in text_display(lhs.ljust(pad), v)]
            if compact and st.likewise:
                out += ["", *_wrap(_prose(st.likewise))]
            out.append("")
        if self.values:
            out += ["Parameters", "-" * 10]
            pad = max(len(text(x)) for x, _ in self.values)
            out += [f"{text(x).ljust(pad)} = {v!r}" for x, v in self.values]
        return "\n".join(out).rstrip() + "\n"

    def __str__(self) -> str:
        return self.text()

    def unfold(self, expr: Any) -> Any:
        """``expr`` (an entry of a stage, or a :class:`Formula`) with every name replaced
        by its definition, repeatedly: in coordinates, speeds, their rates and
        parameters only."""
        if isinstance(expr, Formula):
            expr = expr.value
        expr = sm.sympify(expr)
        rule = dict(self.names)
        for _ in range(len(rule) + 1):
            hit = expr.free_symbols & rule.keys()
            if not hit:
                return expr
            expr = expr.xreplace({s: rule[s] for s in hit})
        return expr

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        n = sum(len(s.entries) for s in self.stages)
        return f"Stages({self.name!r}, {len(self.stages)} stages, {n} entries)"


def _where(defs: Sequence[tuple[sm.Symbol, Any]]) -> str:
    """The definitions of one stage as one ``aligned`` display, one per line (long ones
    broken between terms, a column component by component)."""
    out: list[str] = []
    for s, v in defs:
        name = latex(s)
        if isinstance(v, Formula):
            out += _broken(name, _join(v.terms, width(name) + 2))
            continue
        if isinstance(v, sm.MatrixBase) and v.cols == 3:  # a matrix: by rows if they fit
            rows = [[latex(x) for x in v.row(a)] for a in range(v.rows)]
            if all(sum(width(x) + 3 for x in row) + width(name) + 4 <= PAGE_WIDTH for row in rows):
                body = " \\\\\n".join(" & ".join(row) for row in rows)
                out.append(f"{name} &= \\begin{{bmatrix}}\n{body}\n\\end{{bmatrix}}")
                continue
            for a in range(v.rows):
                for b in range(v.cols):
                    lhs = f"\\left[{name}\\right]_{{{a + 1}{b + 1}}}"
                    out += _aligned(lhs, v[a, b], width(name) + 6)
            continue
        if isinstance(v, sm.MatrixBase):
            body = display(name, v)
            if "aligned" not in body:
                out.append(body.replace(" = ", " &= ", 1))
                continue
            for k, x in enumerate(v, 1):
                out += _aligned(f"\\left[{name}\\right]_{{{k}}}", x, width(name) + 6)
        else:
            out += _aligned(name, v, width(name) + 2)
    return "\\begin{aligned}\n" + " \\\\\n".join(out) + "\n\\end{aligned}"


def _prose(tex: str) -> str:
    """A stage's sentence with its ``$...$`` math as Unicode text."""
    parts = re.split(r"\$+", tex)
    return "".join(from_latex(x) if k % 2 else x for k, x in enumerate(parts)).replace("`", "")


def _wrap(paragraph: str) -> list[str]:
    import textwrap

    out: list[str] = []
    for line in paragraph.splitlines():
        out += textwrap.wrap(line, PAGE_WIDTH, break_on_hyphens=False) or [""]
    return out


def _text_table(table: Sequence[Sequence[str]]) -> list[str]:
    rows = [[_prose(c) for c in row] for row in table]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = [" │ ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return [lines[0], "─┼─".join("─" * w for w in widths), *lines[1:]]


def _text_terms(e: Any) -> list[str]:
    """The text of the top-level terms of ``e``, each with its sign (``+ t`` / ``- t``),
    long terms broken (:func:`_signed`)."""
    return _signed(e, text, len, True)


def _text_lines(terms: Sequence[str], first: int) -> list[str]:
    """Signed terms joined into lines of at most ``PAGE_WIDTH`` characters (the first
    one has ``first`` characters taken)."""
    lines: list[str] = []
    cur, room = "", PAGE_WIDTH - first
    for t in terms:
        if cur and len(cur) + len(t) + 1 > room:
            lines.append(cur)
            cur, room = "", PAGE_WIDTH - first
        cur = f"{cur} {t}".strip()
    return [*lines, cur]


def _bracketed(lhs: str, cells: list[list[str]]) -> list[str]:
    """``lhs = [matrix]`` with the columns aligned, in Unicode brackets."""
    widths = [max(len(r[c]) for r in cells) for c in range(len(cells[0]))]
    rows = ["  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True)) for r in cells]
    n = len(rows)
    left = ["["] if n == 1 else ["⎡", *["⎢"] * (n - 2), "⎣"]
    right = ["]"] if n == 1 else ["⎤", *["⎥"] * (n - 2), "⎦"]
    pre = [f"{lhs} = "] + [" " * (len(lhs) + 3)] * (n - 1)
    return [f"{p}{a}{r}{b}" for p, a, r, b in zip(pre, left, rows, right, strict=True)]


def text_display(lhs: str, value: Any) -> list[str]:
    """``lhs = value`` as lines of plain text (``lhs`` already text): a
    :class:`Formula` in its names, a vector or matrix in brackets when it fits on the
    page (else entry by entry, the upper triangle of a symmetric matrix), long sums broken
    between terms."""
    first = len(lhs) + 3
    if isinstance(value, Formula):
        lines = _text_lines([from_latex(t) for t in value.terms], first)
    elif isinstance(value, sm.MatrixBase):
        if all(x == 0 for x in value):
            return [f"{lhs} = 0"]
        cells = [[text(value[a, b]) for b in range(value.cols)] for a in range(value.rows)]
        if sum(max(len(r[c]) for r in cells) + 2 for c in range(value.cols)) + first <= PAGE_WIDTH:
            return _bracketed(lhs, cells)
        out = []
        symmetric = value.rows == value.cols and value.is_symmetric()
        base = lhs.rstrip()
        for a in range(value.rows):
            for b in range(value.cols):
                if symmetric and b < a:
                    continue
                k = f"{a + 1}" if value.cols == 1 else f"{a + 1}{b + 1}"
                out += text_display(f"[{base}]_{k}", value[a, b])
        return out
    else:
        lines = _text_lines(_text_terms(value), first)
    return [f"{lhs} = {lines[0]}"] + [" " * first + x for x in lines[1:]]


_NOTATION = (
    "Short forms: $\\mathrm{s}_k = \\sin q_k$, $\\mathrm{c}_k = \\cos q_k$ for each "
    "coordinate $q_k$."
)


def _escape(text: str) -> str:
    out = []
    math = False
    for ch in text:
        if ch == "$":
            math = not math
        if not math and ch in "_&%#":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


class _Names:
    """Named vectors and matrices of the tables: components are symbols
    (``\\omega_{B,x}``), their values are kept, in order, for :meth:`Stages.unfold`."""

    def __init__(self) -> None:
        self.defs: list[tuple[sm.Symbol, Any]] = []

    def vector(self, base: str, sub: str, value: Any = None) -> sm.ImmutableMatrix:
        """The name ``base_{sub}``; defined now if ``value`` is given, else by
        :meth:`define`."""
        comps = sm.ImmutableMatrix([sm.Symbol(f"{base}_{{{sub},{a}}}") for a in "xyz"])
        if value is not None:
            self.define(comps, value)
        return comps

    def define(self, comps: sm.MatrixBase, value: Any) -> None:
        self.defs += zip(comps, value, strict=True)

    def scalar(self, tex: str, value: Any) -> sm.Symbol:
        sym = sm.Symbol(tex)
        self.defs.append((sym, value))
        return sym

    def inertia(self, sub: str) -> sm.ImmutableMatrix:
        """A symmetric 3x3 (``I_{B,xy} = I_{B,yx}``), defined by :meth:`define_inertia`."""
        out = sm.zeros(3, 3)
        for a in range(3):
            for b in range(a, 3):
                out[a, b] = out[b, a] = sm.Symbol(f"I_{{{sub},{'xyz'[a]}{'xyz'[b]}}}")
        return sm.ImmutableMatrix(out)

    def define_inertia(self, I: sm.MatrixBase, value: Any) -> None:
        self.defs += [(I[a, b], value[a, b]) for a in range(3) for b in range(a, 3)]


#: The derivation's vectors and matrices that the tables name (by label prefix, see
#: :class:`kanedyn.symbolic.intermediates.Group`): LaTeX base, subscript prefix, and whether the
#: quantity belongs to a joint (else to a body). The table's own vectors (``omega``,
#: ``v``, ``o``, ``r``, ``alpha_r``, ``a_r``) are named where they are written.
_GROUPS = {
    "omega_rel": ("\\omega^{rel}", "", True),
    "w": ("w", "", True),
    "T": ("\\tau", "", True),
    "v_o": ("v", "o,", True),
    "alpha_k": ("\\alpha^{rel}", "", True),
    "C": ("C", "", True),
    "Gds": ("\\dot\\Gamma\\sigma", "", True),
    "R_N_Go": ("R^{NG_o}", "", True),
    "R_N_Gi": ("R^{NG_i}", "", True),
    "R_Gi_Go": ("R^{G_iG_o}", "", True),
    "R_Bi_Go": ("R^{B_iG_o}", "", True),
    "Gamma": ("\\Gamma", "", True),
    "R_N_B": ("R^{NB}", "", False),
    "p": ("p", "", False),
    # a joint at a node of its flexible inner body (Joint.inner_node): the node frame
    "C_n": ("C^{node}", "", True),
    "R_Bi_Gi": ("R^{B_iG_i}", "", True),
    "ip": ("p", "G_i,", True),
    "omega_node": ("\\omega^{node}", "", True),
    "v_node": ("v^{node}", "", True),
    "omega_Gi": ("\\omega", "G_i,", True),
    "T_Gi": ("\\tau", "G_i,", True),
    "alpha_q": ("\\alpha^{q}", "", True),
    "a_q": ("a^{q}", "", True),
    "alpha_node": ("\\alpha^{node}", "", True),
    "a_node": ("C^{node}", "", True),
}


def _group_names(model: Any) -> dict[str, tuple[str, str]]:
    """``label -> (LaTeX base, subscript)`` of the derivation's named groups."""
    out = {}
    for k in range(model.nb):
        joint = f"\\mathrm{{{_escape(model.joints[k].name)}}}"
        body = f"\\mathrm{{{_escape(model.bodies[k].name)}}}"
        for prefix, (base, pre, of_joint) in _GROUPS.items():
            out[f"{prefix}{k}_"] = (base, f"{pre}{joint if of_joint else body}")
    return out


def _components(name: tuple[str, str], g: Any) -> sm.ImmutableMatrix:
    """The component names of group ``g`` (``C_{J,x}``, ``R^{NB}_{B,12}``); an entry
    that is a number or a symbol stays itself."""
    base, sub = name
    if g.shape == (3, 1):
        keys = list("xyz")
    else:
        keys = [f"{a + 1}{b + 1}" for a in range(g.shape[0]) for b in range(g.shape[1])]
    out = [
        sm.Symbol(f"{base}_{{{sub},{c}}}") if not (x.is_Atom and not isinstance(x, sm.Dummy)) else x
        for x, c in zip(g.entries, keys, strict=True)
    ]
    return sm.ImmutableMatrix(*g.shape, out)


def _names_of(tex: str, value: sm.MatrixBase) -> sm.ImmutableMatrix:
    """Component names ``tex_{a}`` (a vector) or ``tex_{a,b}`` (a matrix) of a flexible
    body's quantity, 1-based; an entry that is zero stays 0."""
    rows, cols = value.shape
    base, _, sub = tex.rpartition("_{")
    sub = sub.removesuffix("}")

    def name(a: int, b: int) -> Any:
        if value[a, b] == 0:
            return sm.Integer(0)
        key = f"{a + 1}" if cols == 1 else f"{a + 1},{b + 1}"
        return sm.Symbol(f"{base}_{{{sub},{key}}}")

    return sm.ImmutableMatrix(rows, cols, [name(a, b) for a in range(rows) for b in range(cols)])


def _pairs(names: sm.MatrixBase, value: Any) -> tuple[list, list]:
    kept = [(c, v) for c, v in zip(names, value, strict=True) if isinstance(c, sm.Symbol)]
    return [c for c, _ in kept], [v for _, v in kept]


def _written_flex(
    nm: _Names, f: _Folder, tex: str, value: sm.MatrixBase, entries: list
) -> sm.ImmutableMatrix:
    """A flexible body's vector or matrix ``tex`` written out (folded) as an entry, and
    its component names (:func:`_names_of`), defined for :meth:`Stages.unfold`."""
    shown = f(sm.ImmutableMatrix(value))
    names = _names_of(tex, shown)
    nm.define(*_pairs(names, shown))
    entries.append((tex, shown))
    return names


def _modal_inertia_blocks(
    nm: _Names, f: _Folder, b: str, dM: sm.MatrixBase, entries: list
) -> sm.ImmutableMatrix:
    """``ΔM`` of a flexible body (:func:`kanedyn.spatial.modal.modal_inertia`) written as
    its blocks ``ΔJ``, ``c_f``, ``H̄``, ``P̄``, ``M_Ψ`` (entries), returned in their names."""
    m = dM.rows - 6
    S = dM[:3, 3:6]  # [c_f]x
    dJ = _written_flex(nm, f, f"\\Delta J_{{{b}}}", dM[:3, :3], entries)
    cf = _written_flex(nm, f, f"c_{{f,{b}}}", sm.Matrix([S[2, 1], S[0, 2], S[1, 0]]), entries)
    Hb = _written_flex(nm, f, f"\\bar H_{{{b}}}", dM[:3, 6:], entries)
    Pb = _written_flex(nm, f, f"\\bar P_{{{b}}}", dM[3:6, 6:], entries)
    Mp = _written_flex(nm, f, f"M_{{\\Psi,{b}}}", dM[6:, 6:], entries)
    skew = sm.Matrix([[0, -cf[2], cf[1]], [cf[2], 0, -cf[0]], [-cf[1], cf[0], 0]])
    out = sm.zeros(6 + m, 6 + m)
    out[:3, :3], out[:3, 3:6], out[3:6, :3] = dJ, skew, -skew
    out[:3, 6:], out[6:, :3], out[3:6, 6:], out[6:, 3:6] = Hb, Hb.T, Pb, Pb.T
    out[6:, 6:] = Mp
    return sm.ImmutableMatrix(out)


def _combination(terms: Sequence[tuple[Any, str, Any]], zero: Any = 0) -> Formula:
    """``Σ c_k X_k`` from ``(c_k, LaTeX of X_k, value of X_k)``: the written terms and
    the value from the same loop (zero coefficients and zero values left out; ``zero``
    when nothing is left)."""
    tex: list[str] = []
    value: Any = 0
    for c, name, x in terms:
        c = sm.sympify(c)
        zero = all(e == 0 for e in x) if isinstance(x, sm.MatrixBase) else x == 0
        if c == 0 or zero:
            continue
        neg = c.could_extract_minus_sign()
        mag = -c if neg else c
        ctex = "" if mag == 1 else latex(mag)
        if isinstance(mag, sm.Add):
            ctex = f"\\left({ctex}\\right)"
        tex.append(f"{'-' if neg else '+'} {ctex} {name}".replace("  ", " "))
        value = c * x if isinstance(value, int) else value + c * x
    if not tex:
        return Formula(("0",), zero)
    first = tex[0]
    return Formula((first.removeprefix("+ "), *tex[1:]), value)


def stages(
    eom: Any, *, fold: int = 4, simplify: bool = False, values: dict | None = None
) -> Stages:
    """The stages of Kane's method for ``eom`` (a :class:`~kanedyn.symbolic.KaneEquations`).

    Every vector of the pipeline is a name (``\\omega_B``, ``\\alpha_{r,B}``,
    ``\\Omega_r``, ``V_{B,r}``, ``F^*_B``, ...): the kinematic vectors, partials and
    inertia matrices are written out once (in the tape's named intermediates, folded
    as ``fold`` says), and everything built from them is written as the textbook does,
    in those names: :math:`\\alpha_i = \\sum_r \\Omega_r \\dot u_r + \\alpha_{r,i}`,
    :math:`F^*_i = -m_i a_i`, :math:`T^*_i = -(I_i \\alpha_i + \\omega_i \\times H_i)`,
    :math:`F^*_r = \\sum_i V_{i,r} \\cdot F^*_i + \\Omega_r \\cdot T^*_i`.

    Parameters
    ----------
    fold : int
        Named intermediates whose expressions have more tree nodes than this stay names
        (defined under "where"); larger shows more explicitly.
    simplify : bool
        ``sympy.trigsimp(sympy.expand(...))`` each entry (and intermediate) of at most
        ``4 * fold`` nodes, and stage 5's mass matrix and right-hand side (explicit).
    values : dict, optional
        The parameters' numbers (symbol -> number), listed at the end.
    """
    from kanedyn.dynamics.rotors import rotor_specs
    from kanedyn.model.plan import params_of

    der, comp = eom._der, eom.compact
    model = eom.model
    h_embedded = params_of(model).h_embedded
    f = _Folder(eom, fold, simplify)
    nm = _Names()
    names = [b.name for b in model.bodies]
    subs = [f"\\mathrm{{{_escape(x)}}}" for x in names]
    nu, n, nb = model.nu, model.n, model.nb
    ud = list(eom.u_dot)

    def stage(
        title: str,
        text: str,
        entries: Sequence[tuple[str, Any]],
        start: int,
        instances: Sequence[str] = (),
        table: Sequence[Sequence[str]] = (),
    ) -> Stage:
        return Stage(
            title,
            text,
            tuple(entries),
            tuple(f.where[start:]),
            frozenset(instances),
            tuple(tuple(row) for row in table),
        )

    def written(base: str, sub: str, value: Any) -> tuple[sm.ImmutableMatrix, Any]:
        """The named vector ``base_{sub}`` and its written-out value (:meth:`_Folder.own`)."""
        comps = nm.vector(base, sub)
        shown = f.own(value, comps)
        nm.define(comps, shown)
        return comps, shown

    def leaf(base: str, i: int, value: Any, entries: list) -> sm.ImmutableMatrix:
        comps, shown = written(base, subs[i], value)
        entries.append((f"{base}_{{{subs[i]}}}", shown))
        return comps

    # the partials' names first (stage 1's rates are written with them): Omega_r is the
    # same column for every body that u_r moves; V_{i,r} per body, a body whose column
    # equals another's reuses its name
    Om: dict[tuple[int, int], sm.ImmutableMatrix] = {}
    Vn: dict[tuple[int, int], tuple[str, sm.ImmutableMatrix]] = {}
    columns: list[tuple[str, sm.ImmutableMatrix, Any]] = []  # (lhs, name, column)
    seen: dict[tuple, tuple[str, sm.ImmutableMatrix]] = {}
    n_all = len(eom.u)

    def partial_columns(i: int, r: int) -> tuple[Any, Any]:
        """Body i's partial angular velocity and velocity for speed r (a modal speed's
        when the body rides on a node: ``Omega_xi``, ``V_xi``)."""
        if r < nu:
            return der.Omega_u[i][:, r], der.V_u[i][:, r]
        if r < n:
            return sm.zeros(3, 1), der.V_s[i][:, r - nu]
        if der.Omega_xi:
            return der.Omega_xi[i][:, r - n], der.V_xi[i][:, r - n]
        return sm.zeros(3, 1), sm.zeros(3, 1)

    for r in range(n_all):
        omega_r = None
        for i in range(nb):
            w, v = partial_columns(i, r)
            if all(e == 0 for e in w) and all(e == 0 for e in v):
                continue
            if any(e != 0 for e in w):
                if omega_r is None:
                    omega_r = nm.vector("\\Omega", str(r + 1))
                    columns.append((f"\\Omega_{{{r + 1}}}", omega_r, w))
                Om[i, r] = omega_r
            if all(e == 0 for e in v):
                continue  # u_r turns body i about its mass centre: no V_{i,r} term
            key = tuple(v)
            if key in seen:
                Vn[i, r] = seen[key]
                continue
            lhs = f"V_{{{subs[i]},{r + 1}}}"
            Vn[i, r] = seen[key] = (lhs, nm.vector("V", f"{subs[i]},{r + 1}"))
            # a rotational speed's V_{i,r} = Omega_r x (r_i - o_k), in the names
            arm = (i, int(model.layout.u_joint[r])) if (i, r) in Om and r < nu else None
            columns.append((lhs, Vn[i, r][1], arm or v))

    def _v_names(i: int) -> str:
        """Body i's partial velocities by name: ``V_{B,r}: 1–3; V_{A,r}: 12``."""
        owners: dict[str, list[int]] = {}
        for r in moved(i):
            if (i, r) in Vn:
                owner = Vn[i, r][0].rsplit(",", 1)[0]
                owners.setdefault(owner, []).append(r + 1)
        return "; ".join(f"${o},r}}$: {_ranges(rs)}" for o, rs in owners.items())

    def moved(i: int) -> list[int]:
        return [r for r in range(n_all) if (i, r) in Vn or (i, r) in Om]

    # stage 1: kinematics; positions, then omega_i = sum_r Omega_r u_r, v likewise,
    # alpha_i = sum_r Omega_r udot_r + alpha_r,i, a likewise
    start = len(f.where)
    kin: list[tuple[str, Any]] = []
    omega, alpha, acc = [], [], []
    points: dict[tuple[str, int], sm.ImmutableMatrix] = {}

    def point(kind: str, k: int, entries: list) -> sm.ImmutableMatrix:
        """The named mass centre r_i or joint point o_k, written out on first use."""
        if (kind, k) not in points:
            sub = subs[k] if kind == "r" else f"\\mathrm{{{_escape(model.joints[k].name)}}}"
            label = f"{kind}{k}_"  # p_i + R^{NB}_i (point in B_i), a combination
            comps = nm.vector(kind, sub)
            shown = f.formula(label)
            f.preset(label, f"{kind}_{{{sub}}}", comps)
            nm.define(comps, shown.value)
            points[kind, k] = comps
            entries.append((f"{kind}_{{{sub}}}", shown))
        return points[kind, k]

    omega_n = [nm.vector("\\omega", b) for b in subs]
    v_n = [nm.vector("v", b) for b in subs]
    for i in range(nb):  # the derivation's omega_i, v_i are the table's
        f.preset(f"omega{i}_", f"\\omega_{{{subs[i]}}}", omega_n[i])
        f.preset(f"v{i}_", f"v_{{{subs[i]}}}", v_n[i])

    def remainder(base: str, label: str, i: int) -> sm.ImmutableMatrix:
        """alpha_{r,i} or a_{r,i} in the names of the recursion's terms."""
        comps = nm.vector(base, f"r,{subs[i]}")
        form = f.formula(f"{label}{i}_")
        f.preset(f"{label}{i}_", f"{base}_{{r,{subs[i]}}}", comps)
        nm.define(comps, form.value)
        kin.append((f"{base}_{{r,{subs[i]}}}", form))
        return comps

    of_body: list[list[str]] = []
    for i in range(nb):
        first = len(kin)
        point("o", i, kin)  # joint i's point (joint i carries body i)
        point("r", i, kin)
        form = _combination(
            [(eom.u[r], f"\\Omega_{{{r + 1}}}", Om[i, r]) for r in moved(i) if (i, r) in Om],
            sm.zeros(3, 1),
        )
        kin.append((f"\\omega_{{{subs[i]}}}", form))
        nm.define(omega_n[i], form.value)
        omega.append(omega_n[i])
        form = _combination(
            [(eom.u[r], Vn[i, r][0], Vn[i, r][1]) for r in moved(i) if (i, r) in Vn],
            sm.zeros(3, 1),
        )
        kin.append((f"v_{{{subs[i]}}}", form))
        nm.define(v_n[i], form.value)
        a_r = remainder("\\alpha", "alpha_r", i)
        form = _combination(
            [(ud[r], f"\\Omega_{{{r + 1}}}", Om[i, r]) for r in moved(i) if (i, r) in Om]
            + [(1, f"\\alpha_{{r,{subs[i]}}}", a_r)]
        )
        kin.append((f"\\alpha_{{{subs[i]}}}", form))
        alpha.append(nm.vector("\\alpha", subs[i], form.value))
        acc_r = remainder("a", "a_r", i)
        form = _combination(
            [(ud[r], Vn[i, r][0], Vn[i, r][1]) for r in moved(i) if (i, r) in Vn]
            + [(1, f"a_{{r,{subs[i]}}}", acc_r)]
        )
        kin.append((f"a_{{{subs[i]}}}", form))
        acc.append(nm.vector("a", subs[i], form.value))
        of_body.append([lhs for lhs, _ in kin[first:]] if not moved(i) else [])
    # the remainders are written out in full (they are the tape's) in the entries above
    kin = [(lhs, v if not isinstance(v, sm.MatrixBase) else _shown(nm, v)) for lhs, v in kin]
    kinematics = stage(
        "Kinematics",
        "Each body's angular velocity, mass-centre velocity and their rates (N "
        "components) in the partials of stage 2: $\\omega_i = \\sum_r \\Omega_r u_r$, "
        "$v_i = \\sum_r V_{i,r} u_r$, $\\alpha_i = \\sum_r \\Omega_r \\dot u_r + "
        "\\alpha_{r,i}$, $a_i = \\sum_r V_{i,r} \\dot u_r + a_{r,i}$ (remainders "
        "$\\alpha_{r,i}$, $a_{r,i}$).\nThe remainders by the recursion down the tree: "
        "$\\alpha_{r,i} = \\alpha_{r,i(k)} + \\alpha^{rel}_k$, "
        "$\\alpha^{rel}_k = \\omega_i \\times \\omega^{rel}_k + R^{NG_o}_k \\dot\\Gamma_k\\sigma_k$, "
        "$a_{r,i} = \\alpha_{r,i} \\times r_i + \\omega_i \\times v_i + C_k$\n"
        "(joint k carries body i from its inner body i(k); $\\omega^{rel}_k$, $w_k$: the "
        "joint's relative angular velocity and slide velocity, $\\tau_k$: the velocity "
        "terms $v_i = \\omega_i \\times r_i + \\tau_k$ that do not turn with body i,\n"
        "$v_{o,k}$: the velocity of the joint point).",
        kin,
        start,
        [lhs for lhs, v in kin if isinstance(v, Formula) and lhs[0] not in "or"],
        [
            (
                "body $i$",
                "joint $k$ (inner body $i(k)$)",
                "$\\Omega_r$ in $\\omega_i$, $\\alpha_i$: $r =$",
                "$V_{i,r}$ in $v_i$, $a_i$",
            ),
            *[
                (
                    f"${subs[i]}$",
                    f"$\\mathrm{{{_escape(model.joints[i].name)}}}$ ("
                    + (
                        f"${subs[int(model.layout.parent[i])]}$)"
                        if model.layout.parent[i] >= 0
                        else "N)"
                    ),
                    _ranges([r + 1 for r in moved(i) if (i, r) in Om]),
                    _v_names(i),
                )
                for i in range(nb)
            ],
        ],  # fmt: skip
    )

    start = len(f.where)
    par: list[tuple[str, Any]] = []
    for lhs, name, column in columns:
        if isinstance(column, tuple):
            i, k = column
            r_i, o_k = point("r", i, par), point("o", k, par)
            r = int(lhs.rsplit(",", 1)[1].rstrip("}")) - 1
            j = f"\\mathrm{{{_escape(model.joints[k].name)}}}"
            form = Formula(
                (f"\\Omega_{{{r + 1}}} \\times \\left(r_{{{subs[i]}}} - o_{{{j}}}\\right)",),
                Om[i, r].cross(r_i - o_k),
            )
            nm.define(name, form.value)
            par.append((lhs, form))
            continue
        shown = f.own(column, name)
        nm.define(name, shown)
        par.append((lhs, shown))
    arms = {(c[0], int(lhs.rsplit(",", 1)[1].rstrip("}")) - 1) for lhs, _, c in columns
            if isinstance(c, tuple)}  # fmt: skip

    def _by_joint(i: int) -> dict[int, list[int]]:
        """Body i's speeds r whose V_{i,r} is Omega_r x (r_i - o_k), by joint k."""
        out: dict[int, list[int]] = {}
        for r in range(nu):
            if (i, r) in arms:
                out.setdefault(int(model.layout.u_joint[r]), []).append(r + 1)
        return out

    partials = stage(
        "Partial velocities",
        "$\\Omega_r = \\partial\\omega_i/\\partial u_r$ is the same for every body $i$ "
        "that $u_r$ moves (and zero for the others, and for slide speeds); "
        "$V_{i,r} = \\partial v_i/\\partial u_r = \\Omega_r \\times (r_i - o_k)$ for a "
        "rotational speed of joint $k$ ($r_i$ the mass centre, $o_k$ the joint point), "
        "the slide's axis for a slide speed; given once when bodies share it.",
        par,
        start,
        [lhs for lhs, v in par if isinstance(v, Formula)],
        [
            ("body $i$", "$V_{i,r} = \\Omega_r \\times (r_i - o_k)$ for $r =$ (joint $k$)"),
            *[
                (
                    f"${subs[i]}$",
                    "; ".join(
                        f"{_ranges(rs)} ($\\mathrm{{{_escape(model.joints[k].name)}}}$)"
                        for k, rs in _by_joint(i).items()
                    ),
                )
                for i in range(nb)
                if _by_joint(i)
            ],
        ],  # fmt: skip
    )

    # stage 3: forces on each body
    start = len(f.where)
    forces: list[tuple[str, Any]] = []
    F, T, F_star, T_star = [], [], [], []
    for i in range(nb):
        b = subs[i]
        F.append(leaf("F", i, der.F_app[i], forces))
        T.append(leaf("T", i, der.T_app[i], forces))
        I = nm.inertia(b)
        form = f.formula(f"I_N{i}_")  # I_i = R I_B R^T, in the names
        f.preset(f"I_N{i}_", f"I_{{{b}}}", I)
        nm.define_inertia(I, form.value)
        forces.append((f"I_{{{b}}}", form))
        m = eom.masses[i]
        form = _combination([(-m, f"a_{{{b}}}", acc[i])], sm.zeros(3, 1))
        forces.append((f"F^*_{{{b}}}", form))
        F_star.append(nm.vector("F^*", b, form.value))
        if any(e != 0 for e in h_embedded[i]):
            H = leaf("H", i, der.H[i], forces)
            h_tex = f"H_{{{b}}}"
        else:
            H = I * omega[i]
            h_tex = f"I_{{{b}}} \\omega_{{{b}}}"
        value = -(I * alpha[i] + omega[i].cross(H))
        tex = f"-\\left(I_{{{b}}} \\alpha_{{{b}}} + \\omega_{{{b}}} \\times {h_tex}\\right)"
        forces.append((f"T^*_{{{b}}}", Formula((tex,), value)))
        T_star.append(nm.vector("T^*", b, value))
    loads = stage(
        "Forces on each body",
        "Applied force (at the mass centre) and torque, the central inertia matrix "
        "$I_i$ in N, and the inertia force $F^*_i = -m_i a_i$ and torque "
        "$T^*_i = -(I_i \\alpha_i + \\omega_i \\times H_i)$, $H_i = I_i \\omega_i$ "
        "(plus the embedded momentum, when a body has it).",
        forces,
        start,
        [lhs for lhs, _ in forces if lhs.startswith(("F^*_", "T^*_"))],
        [
            ("body $i$", "$m_i$", "$H_i$"),
            *[
                (
                    f"${subs[i]}$",
                    f"${latex(eom.masses[i])}$",
                    f"$H_{{{subs[i]}}}$"
                    if any(e != 0 for e in h_embedded[i])
                    else f"$I_{{{subs[i]}}} \\omega_{{{subs[i]}}}$",
                )
                for i in range(nb)
            ],
        ],  # fmt: skip
    )

    # flexible bodies: the partials W of their speeds (ω, v₀, ξ) in body axes, ΔM, b, the
    # active and inertia modal forces (kanedyn.symbolic.flex)
    n_all = len(eom.u)
    Wn: dict[tuple[int, int], sm.ImmutableMatrix] = {}
    Fe_n, Fs_n = [], []
    out = [kinematics, partials, loads]
    if der.flex:
        start = len(f.where)
        flex: list[tuple[str, Any]] = []
        for k, fb in enumerate(der.flex):
            b = subs[fb.i]
            for r in range(n_all):
                if any(e != 0 for e in fb.W[:, r]):
                    Wn[k, r] = _written_flex(nm, f, f"W_{{{b},{r + 1}}}", fb.W[:, r], flex)
            w_r = _written_flex(nm, f, f"w_{{r,{b}}}", fb.w_r, flex)
            form = _combination(
                [(ud[r], f"W_{{{b},{r + 1}}}", Wn[k, r]) for r in range(n_all) if (k, r) in Wn]
                + [(1, f"w_{{r,{b}}}", w_r)]
            )
            flex.append((f"\\dot w_{{{b}}}", form))
            wdot = sm.ImmutableMatrix(form.value)
            dM = _modal_inertia_blocks(nm, f, b, fb.dM, flex)
            bias = _written_flex(nm, f, f"b_{{{b}}}", fb.b, flex)
            Fe_n.append(_written_flex(nm, f, f"F^e_{{{b}}}", fb.F_e, flex))
            value = -(dM * wdot + bias)
            flex.append((f"F^{{*e}}_{{{b}}}",
                         Formula((f"-\\left(\\Delta M_{{{b}}} \\dot w_{{{b}}} + b_{{{b}}}\\right)",),
                                 value)))  # fmt: skip
            Fs_n.append(_names_of(f"F^{{*e}}_{{{b}}}", value))
            nm.define(*_pairs(Fs_n[-1], value))
        out.append(
            stage(
                "Flexible bodies",
                "A flexible body's speeds in its own axes, $w_i = (\\omega, v_0, \\xi_i)$ "
                "(angular velocity, velocity of the body-frame origin, modal speeds), "
                "are $w_i = \\sum_r W_{i,r} u_r$ with the partials $W_{i,r}$, and "
                "$\\dot w_i = \\sum_r W_{i,r} \\dot u_r + w_{r,i}$. Beyond the rigid "
                "body's, its generalized inertia force over $w_i$ is "
                "$F^{*e}_i = -(\\Delta M_i \\dot w_i + b_i)$ with the modal inertia "
                "$\\Delta M_i = [\\Delta J_i, [c_{f,i}]_\\times, \\bar H_i; "
                "-[c_{f,i}]_\\times, 0, \\bar P_i; \\bar H_i^T, \\bar P_i^T, M_{\\Psi,i}]$ "
                "(the inertia and first moment the deformation adds, the modes' coupling "
                "with rotation and translation, the modal mass) and $b_i$ its velocity "
                "terms (Coriolis, centrifugal, and the "
                "geometric stiffness of the centrifugal and gravity preloads), and "
                "$F^e_i$ is the active force: gravity on the displaced mass, the modal "
                "stiffness and damping $-K_\\Psi\\eta - C_\\Psi\\xi$ "
                "(`kanedyn.spatial.modal`: `modal_inertia`, `modal_bias`, `modal_forces`).",
                flex,
                start,
                [lhs for lhs, v in flex if isinstance(v, Formula)],
            )
        )

    # stage 4: F_r and F*_r row by row, in the names
    start = len(f.where)
    rows: list[tuple[str, Any]] = []
    acts: list[list] = []
    rotors = bool(rotor_specs(model))

    def _dotted(r: int) -> str:
        """The bodies of row r, with the name of V_{i,r} when it is another body's."""
        out = []
        for i in range(nb):
            if (i, r) in Vn:
                own = Vn[i, r][0] == f"V_{{{subs[i]},{r + 1}}}"
                out.append(f"${subs[i]}$" + ("" if own else f" (${Vn[i, r][0]}$)"))
            elif (i, r) in Om:
                out.append(f"${subs[i]}$")
        out += [f"${subs[fb.i]}$ ($W_{{{subs[fb.i]},{r + 1}}}$)"
                for k, fb in enumerate(der.flex) if (k, r) in Wn]  # fmt: skip
        return ", ".join(out)

    for r in range(n_all):
        act, ine = [], []
        for i in range(nb):
            if (i, r) in Vn:
                lhs, V = Vn[i, r]
                act.append((1, f"{lhs} \\cdot F_{{{subs[i]}}}", (V.T * F[i])[0]))
                ine.append((1, f"{lhs} \\cdot F^*_{{{subs[i]}}}", (V.T * F_star[i])[0]))
            if (i, r) in Om:
                w = Om[i, r]
                act.append((1, f"\\Omega_{{{r + 1}}} \\cdot T_{{{subs[i]}}}", (w.T * T[i])[0]))
                ine.append((1, f"\\Omega_{{{r + 1}}} \\cdot T^*_{{{subs[i]}}}",
                            (w.T * T_star[i])[0]))  # fmt: skip
        for k, fb in enumerate(der.flex):  # W_{i,r} · F^e_i, W_{i,r} · F^{*e}_i
            if (k, r) in Wn:
                b = subs[fb.i]
                act.append((1, f"W_{{{b},{r + 1}}} \\cdot F^e_{{{b}}}",
                            (Wn[k, r].T * Fe_n[k])[0]))  # fmt: skip
                ine.append((1, f"W_{{{b},{r + 1}}} \\cdot F^{{*e}}_{{{b}}}",
                            (Wn[k, r].T * Fs_n[k])[0]))  # fmt: skip
        Q = sm.expand(der.Q[r])  # joint springs, dampers and actuators
        if Q != 0:
            act.append((1, f"Q_{{{r + 1}}}", nm.scalar(f"Q_{{{r + 1}}}", f(Q))))
        acts.append(act)
        rows.append((f"F_{{{r + 1}}}", _combination(act)))
        rows.append((f"F^*_{{{r + 1}}}", f(comp.Fr_star[r]) if rotors else _combination(ine)))
    generalized = stage(
        "Generalized active and inertia forces",
        "Row r dots each body's forces with its partial velocities for $u_r$: "
        "$F_r = \\sum_i V_{i,r} \\cdot F_i + \\Omega_r \\cdot T_i + Q_r$ ($Q_r$: the "
        "joint springs, dampers and actuators acting on $u_r$), "
        "$F^*_r = \\sum_i V_{i,r} \\cdot F^*_i + \\Omega_r \\cdot T^*_i$.",
        [(lhs, v) for lhs, v in rows if not (isinstance(v, Formula) and v.terms == ("0",))]
        + [(lhs, v) for lhs, v in rows if isinstance(v, Formula) and v.terms == ("0",)],
        start,
        [lhs for lhs, _ in rows if not (rotors and lhs.startswith("F^*"))],
        [
            (
                "$r$",
                "bodies $i$ (with $V_{i,r}$ when named after another body)",
                "$\\Omega_r$",
                "$Q_r$",
            )
        ]
        + [
            (
                f"${r + 1}$",
                _dotted(r),
                "yes" if any((i, r) in Om for i in range(nb)) else "",
                "yes" if any(lhs == f"Q_{{{r + 1}}}" for _, lhs, _ in acts[r]) else "",
            )
            for r in range(n_all)
        ],  # fmt: skip
    )
    out.append(generalized)
    if model.loops:
        start = len(f.where)
        lc = eom.loops
        closure = []
        zero = _zero_rows(eom)
        for c, name in enumerate(lc.loop):
            if c in zero:
                continue
            sub = f"{{\\mathrm{{{_escape(name)}}},{c + 1}}}"
            closure += [
                (f"\\Phi_{sub}", f(lc.Phi[c])),
                (f"\\dot\\Phi_{sub}", f((lc.A[c, :] * eom.u)[0])),
                (f"b_{sub}", f(lc.b[c])),
            ]
        out.append(
            stage(
                "Loop closure",
                "Each closed loop's constraints $\\Phi(q) = 0$ (rotational rows keep an axis "
                "pair perpendicular, translational rows bring the loop's two points "
                "together), their rates $\\dot\\Phi = A \\nu = 0$, and the bias $b$ of "
                "$\\ddot\\Phi = A \\dot\\nu + b = 0$. The tree's equations above hold with "
                "$\\nu = C \\nu_i$: $C^T (F_r + F^*_r) = 0$ "
                "(`eom.constrained(independent)`)."
                + _planar_rows_left_out(model)
                + (
                    f"\n{len(zero)} of the {len(lc.loop)} rows are identically zero "
                    "and are not shown: rows " + _ranges([c + 1 for c in sorted(zero)]) + "."
                    if zero
                    else ""
                ),
                closure,
                start,
            )
        )
    start = len(f.where)
    kinematic = [(_dotted_coordinate(x), f(e)) for x, e in zip(eom.q, eom.kinematic_equations,
                                                                strict=True)]  # fmt: skip
    eqs, said, hidden, pattern = _equations(eom, f, simplify, rotors)
    eqs += kinematic
    if hidden:  # a large model: M and f (and their definitions) behind the pattern table
        need = _needed([(lhs, v) for lhs, v in eqs if lhs not in hidden], f.where[start:],
                       f.shown.values())  # fmt: skip
        hidden += [latex(x) for x, _ in f.where[start:] if x not in need]
        plain = [lhs for lhs, v in kinematic if v in eom.u]  # an angle's or slide's rate
        if plain:
            hidden += plain
            said += (
                f"\nThe kinematic equations of the {len(plain)} angles and slides, "
                "$\\dot q_k = u_k$ (a slide's $\\dot d_k = s_k$), are not repeated."
            )
    out.append(
        stage(
            "Equations of motion",
            f"Kane's dynamical equations are $F_r + F^*_r = 0$ for $r = 1, \\dots, {n_all}$ "
            "(stage 4), linear in $\\dot u$: $M \\dot u = f$ with the mass matrix $M$ "
            "(symmetric) and $f = F_r + F^*_r|_{\\dot u = 0}$.\n"
            + said
            + "\nWith the kinematic equations $\\dot q$ below they determine the motion.",
            eqs,
            start,
            hidden,
            pattern,
        )
    )
    out = _fold_alike(out, model)
    label = ", ".join(names) if len(names) <= 4 else f"{len(names)} bodies"
    order = [(x, v) for x, v in f.where if not isinstance(v, (Formula, sm.MatrixBase))]
    order += [*f.defs, *nm.defs]
    result = Stages(label, tuple(out), tuple(order), tuple((values or {}).items()))
    # a body that no speed moves (welded): its zero quantities on one line
    first_stage = dict(out[0].entries)
    still = tuple(
        lhs
        for lhs in (x for xs in of_body for x in xs)
        if all(e == 0 for e in sm.ImmutableMatrix(result.unfold(first_stage[lhs])))
    )
    if len(still) > 1:
        result = attrs.evolve(result, stages=(attrs.evolve(out[0], zero=still), *out[1:]))
    return result


#: Stage 5 writes the equations out one by one up to this many speeds (else the
#: matrix form M u̇ = f stands for them).
EXPLICIT_UP_TO = 3


def _simplified(x: Any) -> Any:
    return sm.trigsimp(sm.expand(x))


def _dotted_coordinate(x: sm.Symbol) -> str:
    """``\\dot{q}_{elbow 0}`` for ``q_elbow_0``: the dot over the coordinate, not its
    subscript."""
    base, _, rest = x.name.partition("_")
    base = f"\\{base}" if base in ("eta", "xi") else base  # a flexible body's η
    return f"\\dot{{{base}}}_{{{rest.replace('_', ' ')}}}" if rest else f"\\dot{{{base}}}"


def _equation(M_row: Any, rates: Sequence[Any], rhs: Any) -> tuple[str, Any]:
    """Row ``Σ_c M_rc u̇_c = f_r`` as an entry: the left side written out when it is
    short, else ``0 = f_r - Σ_c M_rc u̇_c``."""
    lhs = sm.Add(*[m * x for m, x in zip(M_row, rates, strict=True)])
    tex = " + ".join(
        (f"\\left({latex(m)}\\right)" if isinstance(m, sm.Add) else latex(m)) + f" {latex(x)}"
        for m, x in zip(M_row, rates, strict=True)
        if m != 0
    ).replace("+ -", "- ")
    if tex and width(tex) <= PAGE_WIDTH // 2:
        return tex, rhs
    return "0", rhs - lhs


def _equations(
    eom: Any, f: _Folder, simplify: bool, rotors: bool
) -> tuple[list[tuple[str, Any]], str, list[str], list[tuple[str, ...]]]:
    """Stage 5's M and f (simplified, or in the tables' names), the equations row by
    row for up to :data:`EXPLICIT_UP_TO` speeds, and for a model with loops the reduced
    equations in the independent speeds; with the sentence that says which. Above
    :data:`EXPLICIT_UP_TO` speeds, the matrices are entries the compact form hides
    (returned by lhs) behind the table of M's nonzero pattern (returned too)."""
    n = len(eom.u)
    if simplify:
        M = eom.mass_matrix.applyfunc(_simplified)
        F = eom.forcing.applyfunc(_simplified)
    else:
        M, F = f(eom.compact.mass_matrix), f(eom.compact.forcing)
    eqs: list[tuple[str, Any]] = [("M", M), ("f", F)]
    hidden: list[str] = []
    pattern: list[tuple[str, ...]] = []
    if n <= EXPLICIT_UP_TO:
        eqs += [_equation(M.row(r), eom.u_dot, F[r]) for r in range(n)]
        said = "Below: $M$, $f$, then the equations row by row."
    else:
        hidden += ["M", "f"]
        pattern = _pattern(eom, M)
        said = (
            f"The {n} equations are the rows of $M \\dot u = f$: $M$ ({n} $\\times$ {n}, "
            "`eom.mass_matrix`), "
            "$[M]_{rc} = \\sum_i \\Omega_r \\cdot I_i \\Omega_c + m_i V_{i,r} \\cdot V_{i,c}$"
            + (" (plus the geared rotors' terms)" if rotors else "")
            + ", nonzero as tabled;\n$f_r$ (`eom.forcing`) is row $r$ of stage 4 at "
            "$\\dot u = 0$; `compact=False` writes both out."
        )
    if eom.model.loops:
        from kanedyn.symbolic.loops import constrained_equations

        ind, rows = _independent(eom)
        ce = constrained_equations(eom, [eom.u[r] for r in ind], rows=rows, explicit=False)
        said += (
            "\nWith the loops, the dependent speeds follow from the independent ones "
            "$\\nu_i$ ($\\nu = C \\nu_i$, $\\dot\\nu = C \\dot\\nu_i + c_0$) and the "
            "reduced equations are $\\bar M \\dot\\nu_i = \\bar f$, "
            "$\\bar M = C^T M C$, $\\bar f = C^T (f - M c_0)$, below after the tree's."
        )
        for x, e in zip(ce.dependent, ce.u_dep, strict=True):
            eqs.append((latex(x), f(e)))
        Mbar, fbar = f(ce.mass_matrix), f(ce.forcing)
        eqs += [("\\bar M", Mbar), ("\\bar f", fbar)]
        if len(ind) <= EXPLICIT_UP_TO:
            rates = [eom.u_dot[r] for r in ind]
            eqs += [_equation(Mbar.row(r), rates, fbar[r]) for r in range(len(ind))]
        else:
            hidden += ["\\bar M", "\\bar f"]
    return eqs, said, hidden, pattern


def _pattern(eom: Any, M: Any) -> list[tuple[str, ...]]:
    """The nonzero pattern of the mass matrix as a table (header row first): row r, its
    speed u_r, and the columns c of its nonzero entries ``[M]_rc``. An entry ``M``
    writes as nonzero (folded, not simplified) counts as zero when it vanishes at two
    random states and parameter values (an identity such as a gimbal's orthogonal axes
    through a diagonal inertia)."""
    import numpy as np

    nonzero = np.array([[M[r, c] != 0 for c in range(M.cols)] for r in range(M.rows)])
    fn = eom.lambdify()
    rng = np.random.default_rng(0)
    seen = np.zeros_like(nonzero)
    for _ in range(2):
        q = rng.uniform(0.3, 1.3, len(eom.q))
        Mn, _ = fn(q, rng.uniform(-1.0, 1.0, M.rows), rng.uniform(0.5, 1.5, len(eom.parameters)))
        seen |= np.abs(Mn) > 1e-9 * max(1.0, float(np.abs(Mn).max()))
    nonzero &= seen
    head: list[tuple[str, ...]] = [("$r$", "$u_r$", "$[M]_{rc} \\neq 0$ for $c =$")]
    return head + [
        (f"${r + 1}$", f"${latex(eom.u[r])}$",
         _ranges([c + 1 for c in range(M.cols) if nonzero[r, c]]))
        for r in range(M.rows)
    ]  # fmt: skip


def _needed(
    entries: Sequence[tuple[str, Any]], where: Sequence[tuple[sm.Symbol, Any]], groups: Any
) -> set[sm.Symbol]:
    """The definitions of ``where`` that ``entries`` use, directly or through other
    definitions (a component of a named vector or matrix, ``groups``' ``(tex, names)``,
    uses the whole)."""
    defs = dict(where)
    owner: dict[sm.Basic, sm.Symbol] = {}
    for tex, names in groups:
        if isinstance(names, sm.MatrixBase) and sm.Symbol(tex) in defs:
            owner.update({c: sm.Symbol(tex) for c in names if isinstance(c, sm.Symbol)})
    need: set[sm.Symbol] = set()
    stack = [v for _, v in entries]
    while stack:
        v = stack.pop()
        for x in sm.sympify(v.value if isinstance(v, Formula) else v).free_symbols:
            x = owner.get(x, x)
            if x in defs and x not in need:
                need.add(x)
                stack.append(defs[x])
    return need


def _planar_rows_left_out(model: Any) -> str:
    """For a planar model (:attr:`kanedyn.Model.planar`), the sentence saying how many
    of its loops' rows, out of the plane and so identically zero, the model leaves out."""
    if not model.planar:
        return ""
    from kanedyn.dynamics.loops import loop_plan

    spatial, kept = loop_plan(attrs.evolve(model, planar=False)).m, loop_plan(model).m
    if spatial == kept:
        return ""
    return (
        f"\n{spatial - kept} of the {spatial} rows are identically zero (the out-of-plane "
        "rows of a planar loop: the model moves in N's x-y plane) and are left out; the "
        f"{kept} in-plane rows follow."
    )


def _zero_rows(eom: Any) -> set[int]:
    """The loop-constraint rows that are identically zero (Φ, A and b)."""
    lc = eom.loops
    return {
        c
        for c in range(len(lc.loop))
        if all(sm.expand(eom.explicit(x)) == 0 for x in (lc.Phi[c], lc.b[c], *lc.A.row(c)))
    }


def _independent(eom: Any) -> tuple[list[int], list[int]]:
    """Independent speeds and independent constraint rows of a model with loops, chosen
    as the numeric engine chooses them (:func:`kanedyn.dynamics.loops.partition`) at a
    random configuration."""
    import numpy as np

    from kanedyn.dynamics.loops import partition

    rng = np.random.default_rng(0)
    A = eom.explicit(eom.loops.A)
    point = {x: float(rng.uniform(0.3, 1.3)) for x in A.free_symbols}
    part = partition(np.array(A.xreplace(point).evalf(), dtype=float))
    return [int(r) for r in part.independent], [int(c) for c in part.rows]


def _fold_alike(stages: list[Stage], model: Any) -> list[Stage]:
    """Mark each entry and definition of joint k (body k) that reads like one of an
    earlier joint once the names of the joint, its body, the inner body and the inner
    body's joint are swapped for the earlier one's (Explorer-1's four antennas): the
    compact form writes the first and says the others are alike."""

    def forms(name: str) -> list[str]:
        return sorted({_escape(name), name, name.replace("_", " ")}, key=len, reverse=True)

    joints = [j.name for j in model.joints]
    bodies = [b.name for b in model.bodies]
    parent = [int(x) for x in model.layout.parent]

    def owner(lhs: str) -> int | None:
        for k in range(model.nb):
            if (
                f"\\mathrm{{{_escape(joints[k])}}}" in lhs
                or f"\\mathrm{{{_escape(bodies[k])}}}" in lhs
            ):
                return k
        return None

    def key(k: int, text: str) -> str:
        roles = [(joints[k], "<K>"), (bodies[k], "<I>")]
        if parent[k] >= 0:
            roles += [(bodies[parent[k]], "<P>"), (joints[parent[k]], "<PK>")]
        for name, role in roles:
            for form in forms(name):
                text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])", role, text)
        return text

    seen: dict[str, int] = {}
    out = []
    for st in stages:
        alike: set[str] = set()
        kinds: dict[tuple[int, int], list[str]] = {}  # (first, k) -> quantities
        items = [(lhs, display(lhs, v)) for lhs, v in st.entries if lhs not in st.instances]
        items += [(latex(x), _where([(x, v)])) for x, v in st.where]
        for lhs, shown in items:
            k = owner(lhs)
            if k is None or lhs.startswith("v_"):
                continue  # velocities (v_o,k) are shown, not said to be alike
            form = key(k, shown)
            first = seen.setdefault(form, k)
            if first != k:
                alike.add(lhs)
                kind = key(k, lhs).replace("\\mathrm{<K>}", "k").replace("\\mathrm{<I>}", "i")
                kinds.setdefault((first, k), []).append(f"${kind}$")
        like: dict[tuple[int, tuple[str, ...]], list[int]] = {}
        for (first, k), ks in kinds.items():
            like.setdefault((first, tuple(ks)), []).append(k)
        sentences = [
            "Written as for joint $k = \\mathrm{"
            + f"{_escape(joints[first])}}}$ (body $i = \\mathrm{{{_escape(bodies[first])}}}$), "
            + "with their own names, and not repeated: "
            + ", ".join(names)
            + " for "
            + ", ".join(f"$k = \\mathrm{{{_escape(joints[k])}}}$ ($\\mathrm{{{_escape(bodies[k])}}}$)"
                        for k in ks)
            + "."
            for (first, names), ks in like.items()
        ]  # fmt: skip
        out.append(attrs.evolve(st, alike=frozenset(alike), likewise="\n".join(sentences)))
    return out


def _ranges(rs: Sequence[int]) -> str:
    """``1, 2, 3, 5`` as ``1–3, 5``."""
    out: list[str] = []
    k = 0
    while k < len(rs):
        j = k
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(f"{rs[k]}" if j == k else f"{rs[k]}–{rs[j]}")
        k = j + 1
    return ", ".join(out)


def _shown(nm: _Names, comps: sm.MatrixBase) -> Any:
    """The written-out value of a named vector (its components' definitions)."""
    rule = dict(nm.defs)
    return sm.ImmutableMatrix([rule.get(c, c) for c in comps])
