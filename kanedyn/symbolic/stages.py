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
under "where" at the end of the stage that first uses it. So no entry is longer than
about ``fold`` nodes, whatever the size of the model.

Each stage renders as Markdown with LaTeX math (:meth:`Stages.markdown`, shown by
Jupyter), and the whole as a LaTeX document (:meth:`Stages.latex`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import sympy as sm

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


def _tex(x: Any) -> str:
    if isinstance(x, sm.MatrixBase):
        if x.cols == 1:
            rows = " \\\\ ".join(sm.latex(e) for e in x)
            return f"\\begin{{bmatrix}} {rows} \\end{{bmatrix}}"
    return sm.latex(x)


class _Folder:
    """Explicit forms, with the named intermediates kept as names where they are large:
    an intermediate is written out when its expression has at most ``fold`` nodes, and
    an entry (or a definition) longer than ``page`` nodes names its largest written-out
    parts until it fits."""

    def __init__(self, eom: Any, fold: int, simplify: bool) -> None:
        self.tape = eom._der.tape
        self.fold = fold
        self.page = 6 * fold
        self.simplify = simplify
        self.rule: dict[sm.Basic, Any] = {}
        self.where: list[tuple[sm.Symbol, Any]] = []
        self._names: set[str] = set()

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
        value = self._fit(self.tape.defs[self.tape.index[s]][1])
        self.rule[s] = sym
        self.where.append((sym, value))

    def _fit(self, e: sm.Expr) -> Any:
        """``e`` (in tape names) written out, at most ``page`` nodes where possible."""
        value = self._tidy(e.xreplace(self.rule))
        while _size(value) > self.page:
            parts = [x for x in e.free_symbols if x in self.tape.index]
            parts = [x for x in parts if not isinstance(self.rule[x], sm.Symbol)]
            if not parts:
                break
            self._name(max(parts, key=lambda x: _size(self.rule[x])))
            value = self._tidy(e.xreplace(self.rule))
        return value

    def __call__(self, expr: Any) -> Any:
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
        done = [self._fit(e) for e in items]
        return sm.ImmutableMatrix(expr.rows, expr.cols, done) if mat else done[0]


@attrs.frozen(eq=False)
class Stages:
    """The stages of Kane's method for one system (see the module docstring)."""

    name: str
    stages: tuple[Stage, ...]

    def markdown(self) -> str:
        """Markdown with ``$$ ... $$`` LaTeX math, one section per stage."""
        out = [f"# Kane's method: {self.name}\n"]
        for k, st in enumerate(self.stages, 1):
            out.append(f"## {k}. {st.title}\n\n{st.text}\n")
            out += [f"$$ {lhs} = {_tex(v)} $$\n" for lhs, v in st.entries]
            if st.where:
                out.append("where\n")
                out += [f"$$ {sm.latex(s)} = {_tex(v)} $$\n" for s, v in st.where]
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
        ]
        for k, st in enumerate(self.stages, 1):
            out.append(f"\\subsection*{{{k}. {_escape(st.title)}}}")
            out.append(_escape(st.text).replace("$$", "$"))
            out += [f"\\[ {lhs} = {_tex(v)} \\]" for lhs, v in st.entries]
            if st.where:
                out.append("where")
                out += [f"\\[ {sm.latex(s)} = {_tex(v)} \\]" for s, v in st.where]
        out.append("\\end{document}")
        return "\n".join(out) + "\n"

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        n = sum(len(s.entries) for s in self.stages)
        return f"Stages({self.name!r}, {len(self.stages)} stages, {n} entries)"


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
