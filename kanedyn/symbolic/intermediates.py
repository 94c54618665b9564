"""The named intermediates of a symbolic derivation, and the sparse products it is
built from.

:class:`Intermediates` names each non-trivial expression once (equal expressions share
one name) and records, for every vector and matrix of the derivation, its entries and
the terms it was combined from (:class:`Group`, with the operations of
:data:`OPERATIONS`). :func:`kanedyn.symbolic.kane` and :func:`kanedyn.symbolic.lagrange`
derive on it; the teaching tables (:mod:`kanedyn.symbolic.stages`) read its groups.
:func:`dot`, :func:`cross` and :func:`matmul` skip zero products, which sympy would
otherwise build and simplify away.

The names are a presentation, not an evaluation tape: they give a reader (and the
tables) one labelled symbol per quantity of the derivation, so they are kept as sympy
expressions. Numbers are evaluated on the compiled engine's tape, which replays these
definitions (:mod:`kanedyn.symbolic.replay`) and shares their subexpressions itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import sympy as sm

__all__ = ["OPERATIONS", "Group", "Intermediates", "cross", "dot", "is_zero", "matmul"]


def _product(x: sm.Expr, y: sm.Expr, sign: int = 1) -> sm.Expr:
    """``sign * x * y``. Products of numbers and named quantities (atoms) are built in
    canonical order without sympy's evaluation machinery; anything else is evaluated."""
    if x.is_Number and y.is_Number:
        return sign * x * y
    if y.is_Number:
        x, y = y, x
    if x.is_Atom and y.is_Atom:
        if x.is_Number:
            c = sign * x
            return y if c == 1 else sm.Mul(c, y, evaluate=False)
        if sign == 1:
            return sm.Mul(x, y, evaluate=False)
        return sm.Mul(sm.S.NegativeOne, x, y, evaluate=False)
    return sign * x * y


def _sum(terms: list) -> sm.Expr:
    terms = [e for e in terms if e != 0]
    return sm.Add(*terms, evaluate=False) if len(terms) > 1 else sm.Add(*terms)


def dot(a: Sequence[Any], b: Sequence[Any]) -> sm.Expr:
    """``a · b``, with the zero products skipped."""
    return _sum([_product(x, y) for x, y in zip(a, b, strict=True) if x != 0 and y != 0])


def cross(a: Sequence[Any], b: Sequence[Any]) -> sm.Matrix:
    """``a × b`` as a column, with the zero products skipped."""
    a0, a1, a2 = a
    b0, b1, b2 = b

    def d(x, y, z, w):  # x*y - z*w
        return _sum([_product(x, y) if x != 0 and y != 0 else 0,
                     _product(z, w, -1) if z != 0 and w != 0 else 0])  # fmt: skip

    return sm.Matrix([d(a1, b2, a2, b1), d(a2, b0, a0, b2), d(a0, b1, a1, b0)])


def matmul(A: sm.Matrix, B: sm.Matrix) -> sm.Matrix:
    """Matrix product as sums of the non-zero products (cheaper than ``A * B`` in sympy)."""
    a, b = A.tolist(), B.tolist()
    nk, nc = B.rows, B.cols
    return sm.Matrix(
        A.rows,
        nc,
        [
            sm.Add(*[row[k] * b[k][c] for k in range(nk) if row[k] != 0 and b[k][c] != 0])
            for row in a
            for c in range(nc)
        ],
    )


def is_zero(v: sm.Matrix) -> bool:
    """Whether every entry of ``v`` is zero."""
    return all(x == 0 for x in v)


def _atomic(expr: sm.Expr) -> bool:
    """Leave numbers, symbols and ``c * symbol`` unnamed; name everything else."""
    if expr.is_Atom:
        return True
    return bool(
        expr.is_Mul and len(expr.args) == 2 and expr.args[0].is_Number and expr.args[1].is_Atom
    )


class Intermediates:
    """Named intermediates in definition order; equal expressions share one name."""

    def __init__(self) -> None:
        self.defs: list[tuple[sm.Dummy, sm.Expr]] = []
        self.index: dict[sm.Dummy, int] = {}
        self._memo: dict[sm.Expr, sm.Dummy] = {}
        # vectors and matrices by label: their entries and, for a vector built by
        # :meth:`combine`, its terms (sign, operation, operand labels), for the
        # teaching tables (:mod:`kanedyn.symbolic.stages`)
        self.groups: dict[str, Group] = {}

    def name(self, expr: sm.Expr, label: str) -> sm.Expr:
        expr = sm.sympify(expr)
        if _atomic(expr):
            return expr
        s = self._memo.get(expr)
        if s is None:
            s = sm.Dummy(label)
            self.index[s] = len(self.defs)
            self.defs.append((s, expr))
            self._memo[expr] = s
        return s

    def vec(self, v: sm.Matrix, label: str) -> sm.Matrix:
        out = sm.Matrix([self.name(x, f"{label}{c}") for c, x in enumerate(v)])
        self.groups.setdefault(label, Group(label, tuple(out), (3, 1)))
        return out

    def combine(self, label: str, terms: Sequence[tuple[Any, ...]]) -> sm.Matrix:
        """The vector ``Σ sign · op(operands)`` named ``label``, with its terms recorded:
        each term is ``(sign, op, (label, value), ...)`` with ``op`` one of
        :data:`OPERATIONS`; a term with a zero operand is left out (it is zero). The
        value and the record come from the same terms, so they cannot disagree."""
        kept: list[tuple[int, str, tuple[str, ...]]] = []
        value = None
        for sign, op, *args in terms:
            if any(is_zero(x) for _, x in args):
                continue
            if op == "@":  # an identity factor changes nothing: left out
                args = [(lab, x) for lab, x in args if x.shape != (3, 3) or x != sm.eye(3)]
                op = op if len(args) > 1 else ""
            part = OPERATIONS[op](*[x for _, x in args])
            part = part if sign == 1 else -part if sign == -1 else sign * part
            value = part if value is None else value + part
            kept.append((sign, op, tuple(self._constant(lab, x) for lab, x in args)))
        out = self.vec(sm.zeros(3, 1) if value is None else value, label)
        self.groups[label] = Group(label, tuple(out), (3, 1), tuple(kept))
        return out

    def _constant(self, label: str, x: sm.Matrix) -> str:
        """``label``, or for an unnamed operand (a constant) a new label recording it."""
        if not label:
            label = f"const{len(self.groups)}"
            self.groups[label] = Group(label, tuple(x), x.shape)
        return label

    def product(
        self, label: str, operands: Sequence[tuple[str, sm.Matrix]], *, symmetric: bool = False
    ) -> sm.Matrix:
        """The 3x3 matrix product of ``operands`` ``(label, value)`` (in order)
        named ``label``, recorded as one term (see :meth:`combine`); an operand that is a
        constant is recorded with its value (label ``""``)."""
        operands = [(lab, x) for lab, x in operands if x != sm.eye(3)]  # I: left out
        args = [self._constant(lab, x) for lab, x in operands]
        value = OPERATIONS["@"](*[x for _, x in operands]) if operands else sm.eye(3)
        out = self.mat(value, label, symmetric=symmetric)
        terms = ((1, "@", tuple(args)),) if args else None
        self.groups[label] = Group(label, tuple(out), (3, 3), terms)
        return out

    def mat(self, A: sm.Matrix, label: str, *, symmetric: bool = False) -> sm.Matrix:
        out = sm.zeros(3, 3)
        for a in range(3):
            for b in range(3):
                if symmetric and b < a:
                    out[a, b] = out[b, a]
                else:
                    out[a, b] = self.name(A[a, b], f"{label}{a}{b}")
        self.groups.setdefault(label, Group(label, tuple(out), (3, 3)))
        return out

    def needed(self, exprs: Sequence[sm.Basic]) -> list[tuple[sm.Dummy, sm.Expr]]:
        """The definitions that ``exprs`` depend on, in definition order."""
        seen: set[int] = set()
        stack = [s for e in exprs for s in e.free_symbols if s in self.index]
        while stack:
            i = self.index[stack.pop()]
            if i in seen:
                continue
            seen.add(i)
            stack.extend(s for s in self.defs[i][1].free_symbols if s in self.index)
        return [self.defs[i] for i in sorted(seen)]


#: The operations of :meth:`Intermediates.combine`'s terms: an operand alone, a cross product,
#: a matrix times a vector.
OPERATIONS: dict[str, Callable[..., sm.Matrix]] = {
    "": lambda a: a,
    "x": cross,
    "@": lambda *m: functools.reduce(lambda acc, A: matmul(A, acc), m[-2::-1], m[-1]),
}


@attrs.frozen(eq=False)
class Group:
    """A named vector or matrix of the derivation: its ``label`` (``"C3_"``), its entries
    (tape names or atoms, row by row), its ``shape`` and, when it was built by
    :meth:`Intermediates.combine`, its ``terms`` ``(sign, op, operand labels)``."""

    label: str
    entries: tuple[Any, ...]
    shape: tuple[int, int]
    terms: tuple[tuple[int, str, tuple[str, ...]], ...] | None = None
