"""The plain-symbol helpers behind KaneProblem, against sympy's own operations."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

from kanedyn.symbolic.components import cross, directional
from kanedyn.symbolic.problem import _cramer, _det_and_adjugate, solve_linear

RNG = np.random.default_rng(2026)


def _values(exprs, syms) -> dict:
    return {s: sm.Float(RNG.uniform(0.3, 1.2)) for s in syms}


@pytest.mark.parametrize(
    "expr",
    [
        "sin(a)*cos(b)*c**2 + a*b",
        "sqrt(a**2 + b**2*sin(c)**2) / (1 + a*c)",
        "exp(a*b)*tan(c) - log(1 + a**2)*b**3",
        "(a + b)**c + atan2(a, b)",
        "sin(a + b*c)**2 * (a - b)**-2",
    ],
)
def test_directional_derivative_matches_sympy_diff(expr):
    a, b, c, da, db, dc = sm.symbols("a b c da db dc")
    e = sm.sympify(expr, locals={"a": a, "b": b, "c": c})
    seeds = {a: da, b: db, c: dc}
    ours = directional(e, seeds)
    expected = sum(e.diff(x) * s for x, s in seeds.items())
    at = _values([e], [a, b, c, da, db, dc])
    assert abs(complex((ours - expected).xreplace(at).evalf())) < 1e-12


def test_directional_shares_subexpressions_and_skips_constants():
    a, b, k = sm.symbols("a b k")
    inner = sm.sin(a * b)
    e = inner**2 + k * inner
    memo: dict = {}
    ours = directional(e, {a: 1}, memo)  # b and k are constants
    assert inner in memo  # differentiated once, shared by both terms
    assert sm.simplify(ours - e.diff(a)) == 0


def test_cross_product():
    a, b = sm.symbols("a0:3"), sm.symbols("b0:3")
    expected = sm.Matrix(a).cross(sm.Matrix(b))
    assert sm.Matrix(cross(a, b)) == expected


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_laplace_determinant_and_adjugate(n):
    P = sm.Matrix(n, n, lambda i, j: sm.Symbol(f"p{i}{j}") if (i + 2 * j) % 5 else 0)
    det, adj = _det_and_adjugate(P)
    assert sm.expand(det - P.det(method="berkowitz")) == 0
    assert (sm.Matrix(adj) - P.adjugate()).applyfunc(sm.expand) == sm.zeros(n, n)


def test_cramer_solves_and_reuses_the_adjugate():
    x, y = sm.symbols("x y", positive=True)
    A = sm.Matrix([[2 + x, sm.cos(y), 0], [sm.cos(y), 3, x * y], [0, x * y, 4 + y]])
    for B in (sm.Matrix([1, x, y]), sm.Matrix([[sm.sin(x), 0], [1, y], [x, 2]])):
        X = _cramer(A, B)
        at = _values([A, B], [x, y])
        res = (A * X - B).xreplace(at).evalf()
        assert max(abs(complex(e)) for e in res) < 1e-12
    assert solve_linear(sm.eye(3), sm.Matrix([1, x, y]), what="identity") == sm.Matrix([1, x, y])
