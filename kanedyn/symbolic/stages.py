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

Every entry is shown in the coordinates, speeds and parameters, except that a named
intermediate of the derivation (the compact form's names: ``R_N_B0_01``, ``omega1_2``,
...) whose expression would have more than ``fold`` tree nodes stays a name, defined
under "where" at the end of the stage that first uses it. An entry that still does not
fit in a few lines of :data:`PAGE_WIDTH` printed characters per component names its
largest written-out intermediates, and then its largest parenthesized sums (``X_1``,
``X_2``, ...: the loop closure, built outside the tape), until it does; long sums are
broken between terms, and a column whose rows are too wide for a ``bmatrix`` is shown
component by component. :meth:`Stages.unfold` substitutes the names back. The sine and
cosine of a coordinate print as :math:`\\mathrm{s}_k`, :math:`\\mathrm{c}_k`.

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

__all__ = ["Stage", "Stages", "stages"]


@attrs.frozen(eq=False)
class Stage:
    """One stage: a title, a sentence, its entries ``(lhs LaTeX, value)`` and the named
    intermediates it introduces ``(symbol, value)``."""

    title: str
    text: str
    entries: tuple[tuple[str, Any], ...]
    where: tuple[tuple[sm.Symbol, Any], ...]


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


_PRINTER = _Printer()
_COMMAND = re.compile(r"\\(left|right|mathrm|begin\{bmatrix\}|end\{bmatrix\}|dot|quad)")


def latex(e: Any) -> str:
    """LaTeX of ``e`` with the short sines and cosines of :class:`_Printer`."""
    return str(_PRINTER.doprint(e))


def width(tex: str) -> int:
    """Estimated printed width of LaTeX math ``tex``, in characters: commands such as
    ``\\left``, braces, ``^``, ``_`` and spaces take no room, ``\\sin`` three, any other
    command one (subscripts count as full characters, which about pays for the spacing
    around operators)."""
    t = _COMMAND.sub("", tex)
    t = re.sub(r"\\(sin|cos|tan)", "xxx", t)
    t = re.sub(r"\\[a-zA-Z]+", "x", t)
    return len(re.sub(r"[{}^_ \\]", "", t))


def _terms(e: Any) -> list[str]:
    """The LaTeX of the top-level terms of ``e``, each with its sign (``+ t`` / ``- t``)."""
    e = sm.sympify(e)
    if not isinstance(e, sm.Add):
        return [latex(e)]
    out = []
    for t in e.as_ordered_terms():
        tex = latex(t)
        out.append(tex if tex.startswith("-") else f"+ {tex}")
    out[0] = out[0].removeprefix("+ ")
    return out


def _lines(e: Any, first: int) -> list[str]:
    """``e`` broken between its terms into lines of at most ``PAGE_WIDTH`` (the first
    line has ``first`` characters taken by its left-hand side)."""
    lines: list[str] = []
    cur, room = "", PAGE_WIDTH - first
    for t in _terms(e):
        if cur and width(cur) + width(t) > room:
            lines.append(cur)
            cur, room = "", PAGE_WIDTH - 4
        cur = f"{cur} {t}".strip()
    return [*lines, cur]


def _fits(e: Any, first: int, max_lines: int = 4) -> bool:
    """Whether ``e`` (a scalar or a column) prints in at most ``max_lines`` page-wide
    lines per entry."""
    for x in e if isinstance(e, sm.MatrixBase) else [e]:
        ls = _lines(x, first)
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
        return f"{lhs} = {latex(value)}"
    ls = _lines(value, lw)
    if len(ls) == 1:
        return f"{lhs} = {ls[0]}"
    return "\\begin{aligned}\n" + " \\\\\n".join(_aligned(lhs, value, lw)) + "\n\\end{aligned}"


def _aligned(lhs: str, value: Any, first: int) -> list[str]:
    ls = _lines(value, first)
    return [f"{lhs} &= {ls[0]}"] + [f"&\\quad {x}" for x in ls[1:]]


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
        self._names: set[str] = set()
        self._sums: dict[sm.Basic, sm.Symbol] = {}
        self._count = 0

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
        """Keep intermediate ``s`` as a name from now on, defined under "where"."""
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

    def __call__(self, expr: Any, first: int = 12) -> Any:
        mat = isinstance(expr, sm.MatrixBase)
        items = list(expr) if mat else [sm.sympify(expr)]
        for s, e in self.tape.needed(items):
            if s in self.rule:
                continue
            value = self._tidy(e.xreplace(self.rule))
            if _size(value) <= self.fold:
                self.rule[s] = value
            else:
                self._name(s)
        if mat:
            whole = self._fit(sm.ImmutableMatrix(expr.rows, expr.cols, items), first)
            return sm.ImmutableMatrix(whole)
        return self._fit(items[0], first)


@attrs.frozen(eq=False)
class Stages:
    """The stages of Kane's method for one system (see the module docstring)."""

    name: str
    stages: tuple[Stage, ...]

    def markdown(self) -> str:
        """Markdown with ``$$ ... $$`` LaTeX math, one section per stage."""
        out = [f"# Kane's method: {self.name}\n\n{_NOTATION}\n"]
        for k, st in enumerate(self.stages, 1):
            out.append(f"## {k}. {st.title}\n\n{st.text}\n")
            out += [f"$$\n{display(lhs, v)}\n$$\n" for lhs, v in st.entries]
            if st.where:
                out.append("where\n")
                out += [f"$$\n{display(latex(s), v)}\n$$\n" for s, v in st.where]
        return "\n".join(out)

    def latex(self) -> str:
        """A complete LaTeX document (``article``, amsmath), one section per stage."""
        out = [
            "\\documentclass[10pt]{article}",
            "\\usepackage[margin=2cm]{geometry}",
            "\\usepackage{amsmath}",
            "\\allowdisplaybreaks",
            "\\begin{document}",
            f"\\section*{{Kane's method: {_escape(self.name)}}}",
            _NOTATION.replace("$$", "$"),
        ]
        for k, st in enumerate(self.stages, 1):
            out.append(f"\\subsection*{{{k}. {_escape(st.title)}}}")
            out.append(_escape(st.text).replace("$$", "$"))
            out += [f"\\[\n{display(lhs, v)}\n\\]" for lhs, v in st.entries]
            if st.where:
                out.append("where")
                out += [f"\\[\n{display(latex(s), v)}\n\\]" for s, v in st.where]
        out.append("\\end{document}")
        return "\n".join(out) + "\n"

    def unfold(self, expr: Any) -> Any:
        """``expr`` (an entry of a stage) with every name defined under "where" replaced
        by its definition: in coordinates, speeds, their rates and parameters only."""
        for _, st in reversed(list(enumerate(self.stages))):
            for s, v in reversed(st.where):
                expr = expr.xreplace({s: v})
        return expr

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        n = sum(len(s.entries) for s in self.stages)
        return f"Stages({self.name!r}, {len(self.stages)} stages, {n} entries)"


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


def stages(eom: Any, *, fold: int = 30, simplify: bool = False) -> Stages:
    """The stages of Kane's method for ``eom`` (a :class:`~kanedyn.symbolic.KaneEquations`).

    Parameters
    ----------
    fold : int
        Named intermediates whose expressions have more tree nodes than this stay names
        (defined under "where"); larger shows more explicitly.
    simplify : bool
        ``sympy.trigsimp(sympy.expand(...))`` each entry (and intermediate) of at most
        ``4 * fold`` nodes.
    """
    der, comp = eom._der, eom.compact
    model = eom.model
    f = _Folder(eom, fold, simplify)
    names = [b.name for b in model.bodies]
    nu, n = model.nu, model.n
    ud = list(eom.u_dot)

    def lab(sym: str, i: int) -> str:
        return f"{sym}_{{\\mathrm{{{_escape(names[i])}}}}}"

    def rate(cols: list[sm.Matrix], rem: sm.Matrix) -> sm.Matrix:
        out = sm.Matrix(rem)
        for c, x in zip(cols, ud, strict=False):
            if any(e != 0 for e in c):
                out += c * x
        return out

    alpha, acc = [], []
    for i in range(model.nb):
        cols_w = [der.Omega_u[i][:, r] for r in range(nu)]
        cols_v = [der.V_u[i][:, r] for r in range(nu)] + [der.V_s[i][:, c] for c in range(model.ns)]
        alpha.append(rate(cols_w, der.alpha_r[i]))
        acc.append(rate(cols_v, der.a_r[i]))

    def stage(title: str, text: str, entries: Sequence[tuple[str, Any]]) -> Stage:
        start = len(f.where)
        done = tuple((lhs, f(v)) for lhs, v in entries)
        return Stage(title, text, done, tuple(f.where[start:]))

    out = []
    kin = []
    for i in range(model.nb):
        kin += [
            (lab("\\omega", i), der.omega[i]),
            (lab("v", i), der.v[i]),
            (lab("\\alpha", i), alpha[i]),
            (lab("a", i), acc[i]),
        ]
    out.append(
        stage(
            "Kinematics",
            "Angular velocity, mass-centre velocity and their rates for each body, in N "
            "components; $\\dot u$ are the rates of the generalized speeds.",
            kin,
        )
    )
    par = []
    for r in range(n):
        for i in range(model.nb):
            w = der.Omega_u[i][:, r] if r < nu else sm.zeros(3, 1)
            v = der.V_u[i][:, r] if r < nu else der.V_s[i][:, r - nu]
            if all(e == 0 for e in w) and all(e == 0 for e in v):
                continue
            ur = sm.latex(eom.u[r])
            par += [
                (
                    f"\\frac{{\\partial \\omega_{{\\mathrm{{{_escape(names[i])}}}}}}}{{\\partial {ur}}}",
                    w,
                ),
                (f"\\frac{{\\partial v_{{\\mathrm{{{_escape(names[i])}}}}}}}{{\\partial {ur}}}", v),
            ]
    out.append(
        stage(
            "Partial velocities",
            "The coefficients of each generalized speed in the velocities (bodies that a "
            "speed does not move are left out).",
            par,
        )
    )
    forces = []
    for i in range(model.nb):
        m = eom.masses[i]
        T_star = der.T_star0[i] - der.I_N[i] * rate(
            [der.Omega_u[i][:, r] for r in range(nu)], sm.zeros(3, 1)
        )
        forces += [
            (lab("F", i), der.F_app[i]),
            (lab("T", i), der.T_app[i]),
            (lab("F^*", i), -m * acc[i]),
            (lab("T^*", i), T_star),
        ]
    out.append(
        stage(
            "Forces on each body",
            "Applied force (at the mass centre) and torque, and the inertia force "
            "$F^*_i = -m_i a_i$ and torque $T^*_i = -(I_i \\alpha_i + \\omega_i \\times I_i "
            "\\omega_i)$, in N components.",
            forces,
        )
    )
    rows = []
    for r in range(n):
        rows += [(f"F_{{{r + 1}}}", comp.Fr[r]), (f"F^*_{{{r + 1}}}", comp.Fr_star[r])]
    out.append(
        stage(
            "Generalized active and inertia forces",
            "Row r dots each body's forces with its partial velocities for $u_r$ "
            "(and adds the joint springs, dampers and actuators acting on $u_r$).",
            rows,
        )
    )
    if model.loops:
        lc = eom.loops
        closure = []
        for c, name in enumerate(lc.loop):
            sub = f"{{\\mathrm{{{_escape(name)}}},{c + 1}}}"
            closure += [
                (f"\\Phi_{sub}", lc.Phi[c]),
                (f"\\dot\\Phi_{sub}", (lc.A[c, :] * eom.u)[0]),
                (f"b_{sub}", lc.b[c]),
            ]
        out.append(
            stage(
                "Loop closure",
                "Each closed loop's constraints $\\Phi(q) = 0$ (rotational rows keep an axis "
                "pair perpendicular, translational rows bring the loop's two points "
                "together), their rates $\\dot\\Phi = A \\nu = 0$, and the bias $b$ of "
                "$\\ddot\\Phi = A \\dot\\nu + b = 0$. The tree's equations above hold with "
                "$\\nu = C \\nu_i$: $C^T (F_r + F^*_r) = 0$ "
                "(`eom.constrained(independent)`).",
                closure,
            )
        )
    qd = [sm.Symbol(f"\\dot{{{sm.latex(x)}}}") for x in eom.q]
    eqs = [(sm.latex(x), e) for x, e in zip(qd, eom.kinematic_equations, strict=True)]
    out.append(
        stage(
            "Equations of motion",
            f"Kane's dynamical equations are $F_r + F^*_r = 0$ for $r = 1, \\dots, {n}$ "
            "(stage 4), linear in $\\dot u$: $M \\dot u = F_r + F^*_r|_{\\dot u = 0}$. "
            "With the kinematic equations below they determine the motion.",
            eqs,
        )
    )
    label = ", ".join(names) if len(names) <= 4 else f"{len(names)} bodies"
    return Stages(label, tuple(out))
