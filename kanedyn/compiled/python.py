"""The Python emitter: a tape's operations as one straight-line Python function.

:func:`source` writes the operations still needed for the outputs of a
:class:`kanedyn.compiled.tape.Tape`, in order, with single-use values inlined into their
consumer's expression and local names reused after a value's last use (so that, run on
NumPy arrays of B states, at most the live values are held in memory). The same source
runs on floats (one state, ``math`` functions: :data:`SCALAR_NAMESPACE`) or on
equal-shaped NumPy arrays (a batch, ``numpy`` functions: :data:`ARRAY_NAMESPACE`);
:func:`build` turns it into a function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kanedyn.compiled.tape import Scalar, Tape, Value

__all__ = ["ARRAY_NAMESPACE", "SCALAR_NAMESPACE", "build", "source"]

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def source(tape: Tape, name: str, args: Sequence[str], outputs: Sequence[Scalar],
           preamble: Sequence[str] = ()) -> str:  # fmt: skip
    """Python source of ``def name(*args): ...; return [outputs]``.

    ``args`` are the parameter names; ``preamble`` lines (unpacking the inputs into
    the locals named by :meth:`Tape.input`) come first. A value used once is written
    inside its consumer's expression (to a nesting depth of 12); every other value
    gets a local name, reused once the value is dead.
    """
    needed = tape.needed(outputs)
    nodes = tape.nodes
    outs = {x.index for x in outputs if isinstance(x, Value)}
    consumers: dict[int, list[int]] = {i: [] for i in needed}
    for i in needed:
        op, a, b = nodes[i]
        if op != "in":
            for arg in (a, b):
                if arg is not None and arg[0] == "n":
                    consumers[arg[1]].append(i)
    inline, depth = {}, {}
    for i in needed:
        op, a, b = nodes[i]
        if op == "in":
            inline[i], depth[i] = False, 0
            continue
        d = 1 + max((depth[arg[1]] for arg in (a, b) if arg is not None and arg[0] == "n"
                     and inline[arg[1]]), default=0)  # fmt: skip
        inline[i] = len(consumers[i]) == 1 and i not in outs and d < 12
        depth[i] = d if inline[i] else 0
    order = {i: pos for pos, i in enumerate(needed)}
    emit_pos: dict[int, int] = {}
    for i in reversed(needed):
        emit_pos[i] = emit_pos[consumers[i][0]] if inline[i] else order[i]
    releases: dict[int, list[int]] = {}
    for j in needed:
        if nodes[j][0] == "in" or inline[j] or j in outs:
            continue
        last = max((emit_pos[c] for c in consumers[j]), default=order[j])
        releases.setdefault(last, []).append(j)
    expr: dict[int, str] = {}
    names: dict[int, str] = {}
    free: list[str] = []
    counter = 0
    lines = [f"def {name}({', '.join(args)}):", *(f"    {p}" for p in preamble)]

    def operand(arg: tuple[str, Any]) -> str:
        if arg[0] == "c":
            x = arg[1]
            if not math.isfinite(x):
                return f"float('{x!r}')"
            return repr(x) if x >= 0 else f"({x!r})"
        return expr.pop(arg[1]) if arg[1] in expr else names[arg[1]]

    for pos, i in enumerate(needed):
        op, a, b = nodes[i]
        if op == "in":
            names[i] = a
            continue
        if op == "neg":
            text = f"(-{operand(a)})"
        elif op in _BINARY:
            text = f"({operand(a)} {_BINARY[op]} {operand(b)})"
        elif b is None:
            text = f"{op}({operand(a)})"
        else:
            text = f"{op}({operand(a)}, {operand(b)})"
        if inline[i]:
            expr[i] = text
            continue
        free.extend(names[j] for j in releases.get(pos, ()))
        if free:
            local = free.pop()
        else:
            local = f"t{counter}"
            counter += 1
        names[i] = local
        lines.append(f"    {local} = {text}")
    result = ", ".join(operand(("n", x.index)) if isinstance(x, Value)
                       else operand(("c", float(x))) for x in outputs)  # fmt: skip
    lines.append(f"    return [{result}]")
    return "\n".join(lines) + "\n"


def _sgn(x: float) -> float:
    """The sign of ``x`` (0 at 0), as ``sympy.sign`` and ``numpy.sign`` (``sgn``); the
    kernels' ``sign`` is ``copysign(1, x)``, the derivative of ``fabs``."""
    return float((x > 0) - (x < 0))


SCALAR_NAMESPACE: dict[str, Any] = {
    "sin": math.sin, "cos": math.cos, "sqrt": math.sqrt, "tan": math.tan, "asin": math.asin,
    "acos": math.acos, "atan": math.atan, "atan2": math.atan2, "sinh": math.sinh,
    "cosh": math.cosh, "tanh": math.tanh, "exp": math.exp, "log": math.log,
    "fabs": math.fabs, "sign": lambda x: math.copysign(1.0, x), "sgn": _sgn, "pow": math.pow,
}  # fmt: skip
"""The functions a tape may call, on floats: the kernels' ``sin``, ``cos``, ``sqrt``,
``fabs`` and ``sign`` (``copysign(1, x)``), and those of symbolic expressions replayed on
a tape (:mod:`kanedyn.symbolic.replay`)."""
ARRAY_NAMESPACE: dict[str, Any] = {
    "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "exp": np.exp, "log": np.log, "fabs": np.fabs,
    "sign": lambda x: np.copysign(1.0, x), "sgn": np.sign, "pow": np.power,
}  # fmt: skip
"""The same functions on equal-shaped NumPy arrays (a batch)."""


def build(source: str, name: str, namespace: dict[str, Any]) -> Callable[..., list]:
    """Compile ``source`` (from :func:`source`) in a copy of ``namespace``."""
    ns = dict(namespace)
    exec(compile(source, f"<kanedyn.compiled {name}>", "exec"), ns)  # noqa: S102
    return ns[name]
