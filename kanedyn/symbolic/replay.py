"""Numbers from symbolic expressions: sympy replayed onto the compiled engine's tape.

The symbolic paths evaluate their results (Kane's mass matrix and forcing, the stages,
the reactions, Lagrange's equations, :func:`kanedyn.symbolic.compare`'s samples) as the
compiled engine evaluates its kernels: :class:`Replay` walks each sympy expression and
records it on a :class:`kanedyn.compiled.tape.Tape` (each sympy node once: a named
intermediate is traced once and its value shared by every expression that uses it),
and :func:`python_function` writes the tape with the Python emitter
(:func:`kanedyn.compiled.python.source`). The tape folds constants and shares common
subexpressions; there is no other printer.

Recorded: ``Add``, ``Mul`` (factors with negative exponents as one division), ``Pow``
(integer exponents as products, half-integer ones through ``sqrt``, others as ``pow``),
numbers and number symbols (as floats), and the functions of :data:`FUNCTIONS`. Any
other node raises a :class:`~kanedyn.ModelError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy as sm

from kanedyn.compiled import python
from kanedyn.compiled.tape import Scalar, Tape, Value
from kanedyn.errors import ModelError

__all__ = ["FUNCTIONS", "Replay", "python_function"]

#: sympy functions and the names of the emitters' namespace functions they are recorded
#: as (:data:`kanedyn.compiled.python.SCALAR_NAMESPACE`)
FUNCTIONS: dict[Any, str] = {
    sm.sin: "sin", sm.cos: "cos", sm.tan: "tan", sm.asin: "asin", sm.acos: "acos",
    sm.atan: "atan", sm.atan2: "atan2", sm.sinh: "sinh", sm.cosh: "cosh", sm.tanh: "tanh",
    sm.exp: "exp", sm.log: "log", sm.Abs: "fabs", sm.sign: "sgn",
}  # fmt: skip


class Replay:
    """Records sympy expressions on ``tape``, the values of ``inputs`` (a mapping from
    sympy symbols, or other sympy nodes such as ``T(t)``, to traced values or floats)
    taken as they are.

    ``replay(expr)`` is the traced value of ``expr``; :meth:`define` binds a named
    intermediate. Every node is recorded once (memoised), so what the expressions
    share stays shared on the tape.
    """

    def __init__(self, tape: Tape, inputs: Mapping[sm.Basic, Scalar]) -> None:
        self.tape = tape
        self.values: dict[sm.Basic, Scalar] = dict(inputs)

    def define(self, symbol: sm.Basic, expr: sm.Basic) -> Scalar:
        """Record ``expr`` and bind ``symbol`` (a named intermediate) to its value."""
        value = self(expr)
        self.values[symbol] = value
        return value

    def __call__(self, e: Any) -> Scalar:
        value = self.values.get(e)
        if value is None:
            value = self._record(sm.sympify(e))
            self.values[e] = value
        return value

    def _record(self, e: sm.Basic) -> Scalar:
        if e.is_Number or e.is_NumberSymbol:
            try:
                return float(e)
            except TypeError:
                raise ModelError(f"cannot evaluate the number {e} as a float") from None
        if e.is_Add:
            total: Scalar = self(e.args[0])
            for a in e.args[1:]:
                total = total + self(a)
            return total
        if e.is_Mul:
            num: Scalar = 1.0
            den: list[Scalar] = []
            for a in e.args:
                if a.is_Pow and a.exp.is_Rational and a.exp.is_negative:
                    den.append(self._power(a.base, -a.exp))
                else:
                    num = num * self(a)
            if not den:
                return num
            divisor = den[0]
            for d in den[1:]:
                divisor = divisor * d
            return num / divisor
        if e.is_Pow:
            return self._power(e.base, e.exp)
        name = FUNCTIONS.get(e.func)
        if name is not None:
            return self._function(name, [self(a) for a in e.args])
        if e.is_Symbol:
            raise ModelError(f"the symbol {e} is neither an input nor a named intermediate")
        raise ModelError(
            f"cannot evaluate {type(e).__name__} ({e}) numerically: the supported "
            "functions are " + ", ".join(sorted(str(f) for f in FUNCTIONS))
        )

    def _power(self, base: sm.Basic, ex: sm.Basic) -> Scalar:
        """``base ** ex``: an integer exponent as repeated squaring, a half-integer one as
        a power of ``sqrt(base)``, a negative one as the reciprocal."""
        if ex.is_Integer or (ex.is_Rational and ex.q == 2):
            n = int(ex.p)
            x = self(base) if ex.is_Integer else self._function("sqrt", [self(base)])
            if n < 0:
                return 1.0 / _integer_power(x, -n)
            return _integer_power(x, n)
        return self._function("pow", [self(base), self(ex)])

    def _function(self, name: str, args: list[Scalar]) -> Scalar:
        if any(isinstance(a, Value) for a in args):
            return self.tape.func(name, *args)
        return float(python.SCALAR_NAMESPACE[name](*args))


def _integer_power(x: Scalar, n: int) -> Scalar:
    """``x ** n`` for ``n >= 0`` by repeated squaring (``x² = x·x``, ``x³ = x·x²``)."""
    out: Scalar = 1.0
    while n:
        if n & 1:
            out = out * x
        n >>= 1
        if n:
            x = x * x
    return out


def python_function(
    args: Sequence[Sequence[Any]], defs: Sequence[tuple[Any, Any]],
    outputs: Sequence[sm.MatrixBase],
) -> Callable[..., list]:  # fmt: skip
    """``f(*args) -> [nested lists of outputs]``: the named intermediates ``defs``
    (``(symbol, expression)`` in definition order) and the ``outputs`` (matrices)
    replayed on one tape (:class:`Replay`) and written by the Python emitter.

    ``f`` takes one sequence of values per group of ``args`` (symbols, in order) and
    returns, per output, its rows as lists. It runs on floats (``math`` functions); its
    source is ``f.__doc__``.
    """
    tape = Tape()
    inputs: dict[Any, Scalar] = {}
    params, preamble = [], []
    for g, group in enumerate(args):
        params.append(f"a{g}")
        local = [f"a{g}_{i}" for i in range(len(group))]
        inputs.update((s, tape.input(name)) for s, name in zip(group, local, strict=True))
        if local:
            preamble.append(f"{', '.join(local)}, = a{g}")
    replay = Replay(tape, inputs)
    for s, e in defs:
        replay.define(s, e)
    shapes = [(X.rows, X.cols) for X in outputs]
    flat = [replay(X[r, c]) for X in outputs for r in range(X.rows) for c in range(X.cols)]
    source = python.source(tape, "symbolic", params, flat, preamble)
    kernel = python.build(source, "symbolic", python.SCALAR_NAMESPACE)

    def f(*values: Any) -> list:
        out = kernel(*values)
        nested, pos = [], 0
        for rows, cols in shapes:
            nested.append([out[pos + r * cols : pos + (r + 1) * cols] for r in range(rows)])
            pos += rows * cols
        return nested

    f.__doc__ = source
    return f
