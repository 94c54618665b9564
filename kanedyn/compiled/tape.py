"""The tape: a small tracer that records scalar arithmetic as straight-line operations.

The compiled engine (:mod:`kanedyn.compiled`) writes its algorithm once, on scalars, and
runs it on :class:`Tape` values: every ``+ - * /``, ``sin``, ``cos``, ``sqrt`` and ``fabs``
(``|x|``) on a traced value records one operation (and the derivative rule of ``fabs``
records ``sign``, ``copysign(1, x)``); operations on plain floats (the model's constants)
are evaluated at once. The symbolic paths replay their sympy expressions on the same
tape (:mod:`kanedyn.symbolic.replay`) to evaluate them. While recording, the tape

* folds constants and the identities ``0·x = 0``, ``1·x = x``, ``x + 0 = x``,
  ``x - x = 0``, ``-(-x) = x``, so the structural zeros of a model (axes along
  coordinate directions, diagonal inertias, joints with no offset) cost nothing;
* shares common subexpressions (value numbering: an operation on the same operands is
  recorded once).

The emitters read the recorded nodes (``tape.nodes``: ``(op, a, b)`` with operands
``("n", index)`` or ``("c", float)``; inputs ``("in", name, None)``) and write them in a
target language: Python (:func:`kanedyn.compiled.python.source`), LLVM IR
(:mod:`kanedyn.compiled.llvm`) and C (:mod:`kanedyn.compiled.c`). Forward-mode
derivatives are recorded on the same tape (:mod:`kanedyn.compiled.derivatives`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from kanedyn.spatial.arithmetic import Arithmetic, elementwise

__all__ = ["TRACE", "Tape", "Value", "cos", "fabs", "sign", "sin", "sqrt"]


class Value:
    """A traced scalar: node ``index`` of its :class:`Tape`."""

    __slots__ = ("tape", "index")

    def __init__(self, tape: Tape, index: int):
        self.tape = tape
        self.index = index

    def __add__(self, other: Scalar) -> Scalar:
        return self.tape.add(self, other)

    def __radd__(self, other: Scalar) -> Scalar:
        return self.tape.add(other, self)

    def __sub__(self, other: Scalar) -> Scalar:
        return self.tape.sub(self, other)

    def __rsub__(self, other: Scalar) -> Scalar:
        return self.tape.sub(other, self)

    def __mul__(self, other: Scalar) -> Scalar:
        return self.tape.mul(self, other)

    def __rmul__(self, other: Scalar) -> Scalar:
        return self.tape.mul(other, self)

    def __truediv__(self, other: Scalar) -> Scalar:
        return self.tape.div(self, other)

    def __rtruediv__(self, other: Scalar) -> Scalar:
        return self.tape.div(other, self)

    def __neg__(self) -> Scalar:
        return self.tape.neg(self)

    def __pos__(self) -> Value:
        return self

    def __repr__(self) -> str:
        return f"<traced {self.tape.nodes[self.index]}>"


Scalar = float | Value


class Tape:
    """Records operations on :class:`Value` s; see the module docstring."""

    def __init__(self) -> None:
        # node: (op, a, b), operands ("n", index) or ("c", float); inputs ("in", name, None)
        self.nodes: list[tuple[str, Any, Any]] = []
        self._memo: dict[tuple, Value] = {}
        self._neg_of: dict[int, int] = {}

    # -- recording ------------------------------------------------------------------
    def _record(self, op: str, a: Any, b: Any = None) -> Value:
        # the operands are the memo's keys too: ("c", ·) < ("n", ·), so the commutative
        # operations put a constant first, and two traced values in node order
        ka = ("n", a.index) if type(a) is Value else ("c", float(a))
        if b is None:
            kb = None
        else:
            kb = ("n", b.index) if type(b) is Value else ("c", float(b))
            if kb < ka and (op == "add" or op == "mul"):
                ka, kb = kb, ka
        key = (op, ka, kb)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        nodes = self.nodes
        nodes.append(key)
        v = Value(self, len(nodes) - 1)
        self._memo[key] = v
        return v

    def input(self, name: str) -> Value:
        """A new input of the generated function, bound to the local ``name``."""
        self.nodes.append(("in", name, None))
        return Value(self, len(self.nodes) - 1)

    # The four below run once per traced operation (thousands per kernel): they test
    # ``type(x) is Value`` and read ``_neg_of`` in place.
    def neg(self, a: Scalar) -> Scalar:
        if type(a) is not Value:
            return -a
        inner = self._neg_of.get(a.index)
        if inner is not None:
            return Value(self, inner)
        v = self._record("neg", a)
        self._neg_of[v.index] = a.index
        return v

    def add(self, a: Scalar, b: Scalar) -> Scalar:
        ta, tb = type(a) is Value, type(b) is Value
        if not ta:
            if not tb:
                return a + b
            if a == 0.0:
                return b
        elif not tb and b == 0.0:
            return a
        neg_of = self._neg_of
        if tb:
            nb = neg_of.get(b.index)  # type: ignore[union-attr]
            if nb is not None:  # a + (-x) = a - x
                return self.sub(a, Value(self, nb))
        if ta:
            na = neg_of.get(a.index)  # type: ignore[union-attr]
            if na is not None:  # (-x) + b = b - x
                return self.sub(b, Value(self, na))
        return self._record("add", a, b)

    def sub(self, a: Scalar, b: Scalar) -> Scalar:
        ta, tb = type(a) is Value, type(b) is Value
        if not tb:
            if not ta:
                return a - b
            if b == 0.0:
                return a
        elif not ta:
            if a == 0.0:
                return self.neg(b)
        elif a.index == b.index:  # type: ignore[union-attr]
            return 0.0
        if tb:
            nb = self._neg_of.get(b.index)  # type: ignore[union-attr]
            if nb is not None:  # a - (-x) = a + x
                return self.add(a, Value(self, nb))
        return self._record("sub", a, b)

    def mul(self, a: Scalar, b: Scalar) -> Scalar:
        ta, tb = type(a) is Value, type(b) is Value
        if not ta:
            if not tb:
                return a * b
            a, b, tb = b, a, False
        neg_of = self._neg_of
        na = neg_of.get(a.index)  # type: ignore[union-attr]
        if not tb:  # a traced, b constant
            if b == 0.0:
                return 0.0
            if b == 1.0:
                return a
            if b == -1.0:
                return self.neg(a)
            if na is not None:
                return self.mul(Value(self, na), -b)
            return self._record("mul", a, b)
        nb = neg_of.get(b.index)  # type: ignore[union-attr]
        if na is not None and nb is not None:
            return self.mul(Value(self, na), Value(self, nb))
        if na is not None:
            return self.neg(self.mul(Value(self, na), b))
        if nb is not None:
            return self.neg(self.mul(a, Value(self, nb)))
        return self._record("mul", a, b)

    def div(self, a: Scalar, b: Scalar) -> Scalar:
        if not isinstance(b, Value):
            if b == 0.0:
                raise ZeroDivisionError("traced division by the constant 0")
            return self.mul(a, 1.0 / b)
        if not isinstance(a, Value) and a == 0.0:
            return 0.0
        return self._record("div", a, b)

    def func(self, name: str, a: Scalar, b: Scalar | None = None) -> Scalar:
        """``name(a)``, or ``name(a, b)``: a function of the emitters' namespaces
        (``sin``, ``cos``, ``sqrt``, ``fabs``, ``sign`` for the kernels; the replayed
        symbolic expressions of :mod:`kanedyn.symbolic.replay` use more), evaluated at
        once on constants."""
        if not isinstance(a, Value) and not isinstance(b, Value):
            if name in _CONSTANT_FUNCS:
                return _CONSTANT_FUNCS[name](a)
            return float(getattr(math, name)(a) if b is None else getattr(math, name)(a, b))
        return self._record(name, a) if b is None else self._record(name, a, b)

    # -- derivatives ----------------------------------------------------------------
    def partials(self, i: int) -> list[tuple[int, Scalar]]:
        """The local partial derivatives of node ``i``: ``(operand node, ∂v_i/∂operand)``
        for each traced operand, the coefficients recorded on this tape (the rules of
        Griewank and Walther, *Evaluating Derivatives*, 2nd ed., 2008, Table 3.3)::

            d(a ± b) = da ± db          d(a b) = b da + a db      d(a / b) = da/b - (v/b) db
            d(-a) = -da                 d sin a = cos a da        d cos a = -sin a da
            d sqrt a = da / (2 v)       (v the node's value)
            d fabs a = sign(a) da       d sign a = 0

        The one statement of the rules: the scalar forward mode
        (:func:`kanedyn.compiled.derivatives.jacobian`) and the vector one
        (:mod:`kanedyn.compiled.sweep`) both build tangents from them. Inputs have none."""
        op, a, b = self.nodes[i]
        if op == "in":
            return []

        def val(arg: tuple) -> Scalar:
            return Value(self, arg[1]) if arg[0] == "n" else float(arg[1])

        if op == "add":
            rules: list[tuple[Any, Scalar]] = [(a, 1.0), (b, 1.0)]
        elif op == "sub":
            rules = [(a, 1.0), (b, -1.0)]
        elif op == "neg":
            rules = [(a, -1.0)]
        elif op == "mul":
            rules = [(a, val(b)), (b, val(a))]
        elif op == "div":  # b is traced: division by a constant is recorded as a product
            inv = 1.0 / val(b)  # type: ignore[operator]
            rules = [(a, inv), (b, -(Value(self, i) * inv))]
        elif op == "sin":
            rules = [(a, cos(val(a)))]
        elif op == "cos":
            rules = [(a, -sin(val(a)))]
        elif op == "sqrt":
            rules = [(a, 0.5 / Value(self, i))]
        elif op == "fabs":  # at a = 0 a one-sided derivative (±1): v|v| still gets 0 there
            rules = [(a, sign(val(a)))]
        elif op == "sign":
            rules = []
        else:  # only replayed symbolic expressions (never differentiated) record others
            raise ValueError(f"no derivative rule for {op!r}")
        return [(arg[1], coef) for arg, coef in rules if arg is not None and arg[0] == "n"]

    # -- emission -------------------------------------------------------------------
    def count(self, outputs: Sequence[Scalar]) -> int:
        """Number of arithmetic operations needed for ``outputs``."""
        return sum(1 for i in self.needed(outputs) if self.nodes[i][0] != "in")

    def needed(self, outputs: Sequence[Scalar], stop: Collection[int] = ()) -> list[int]:
        """Indices of the nodes ``outputs`` depend on (inputs included), in order; the
        nodes ``stop`` are taken as they are (not what they depend on)."""
        nodes = self.nodes
        live: set[int] = set()
        stack = [x.index for x in outputs if type(x) is Value]
        while stack:
            i = stack.pop()
            if i in live:
                continue
            live.add(i)
            op, a, b = nodes[i]
            if op == "in" or i in stop:
                continue
            if a[0] == "n":
                stack.append(a[1])
            if b is not None and b[0] == "n":
                stack.append(b[1])
        # sorted: O(k log k) in the k live nodes, not O(len(nodes)) (the RK4 step's
        # stages each take a few nodes of a long tape)
        return sorted(live)


def sin(x: Scalar) -> Scalar:
    return x.tape.func("sin", x) if isinstance(x, Value) else math.sin(x)


def cos(x: Scalar) -> Scalar:
    return x.tape.func("cos", x) if isinstance(x, Value) else math.cos(x)


def sqrt(x: Scalar) -> Scalar:
    return x.tape.func("sqrt", x) if isinstance(x, Value) else math.sqrt(x)


def fabs(x: Scalar) -> Scalar:
    return x.tape.func("fabs", x) if isinstance(x, Value) else math.fabs(x)


def _sign(x: float) -> float:
    """``copysign(1, x)``: ±1 (the sign of a zero too), the C library's function."""
    return math.copysign(1.0, x)


def sign(x: Scalar) -> Scalar:
    return x.tape.func("sign", x) if isinstance(x, Value) else _sign(x)


#: functions of constants that are not ``math``'s: the kernels' ``sign`` and the
#: replayed ``sgn`` (``sympy.sign``: 0 at 0)
_CONSTANT_FUNCS = {"sign": _sign, "sgn": lambda x: float((x > 0) - (x < 0))}


def _object_floats(x: Any) -> np.ndarray:
    return np.asarray(np.asarray(x, dtype=float), dtype=object)


TRACE = Arithmetic(
    "trace",
    elementwise(sin),
    elementwise(cos),
    elementwise(sqrt),
    _object_floats,
    elementwise(fabs),
    elementwise(sign),
)
"""The arithmetic protocol (:mod:`kanedyn.spatial.arithmetic`) on traced values: object
arrays of :class:`Value` s and floats. The shared equations run on it to record the
compiled engine's tape."""
