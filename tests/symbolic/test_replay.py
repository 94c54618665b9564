"""Sympy expressions replayed on the compiled engine's tape (kanedyn.symbolic.replay): the
numbers against sympy's own evaluation (evalf) at random points, shared intermediates
recorded once, and an unsupported node refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.compiled.tape import Tape
from kanedyn.symbolic.replay import FUNCTIONS, Replay, python_function

x, y, z = sm.symbols("x y z")
T = sm.Function("T")
t = sm.Symbol("t")

# expressions in x in (0.1, 0.9), y in (1.1, 2.0), z in (-2, 2): every function in its domain
CASES = {
    "sin": sm.sin(x * y),
    "cos": sm.cos(z + y),
    "tan": sm.tan(x),
    "asin": sm.asin(x),
    "acos": sm.acos(-x),
    "atan": sm.atan(z * y),
    "atan2": sm.atan2(z, x - 0.5),
    "sinh": sm.sinh(z),
    "cosh": sm.cosh(z),
    "tanh": sm.tanh(z * x),
    "exp": sm.exp(z),
    "log": sm.log(y * x),
    "Abs": sm.Abs(z) + sm.Abs(x - 0.5) * z,
    "sign": sm.sign(z) * y + sm.sign(x - 0.5),
    "sqrt": sm.sqrt(y + x),
    "square": (z - x) ** 2,
    "cube": z**3 - 2 * y**3,
    "power 5": z**5,
    "power 12": (x + y) ** 12,
    "reciprocal": 1 / (z + 3),
    "power -2": (y - x) ** -2,
    "power -3 times": z * y**-3,
    "inverse sqrt": 1 / sm.sqrt(y),
    "power 3/2": y ** sm.Rational(3, 2),
    "power -5/2": y ** sm.Rational(-5, 2),
    "power 1/3": y ** sm.Rational(1, 3),
    "float power": x**0.7,
    "symbolic power": y**x,
    "quotient": (x + z) * y / (x * (y + 1) ** 2),
    "constants": sm.pi * x + sm.E * y - sm.Rational(3, 7) * z + sm.Float(0.125) + 4,
    "constant functions": sm.sin(2) * x + sm.sqrt(3) * y + sm.log(5) + sm.atan2(1, 2),
    "nested": sm.cos(sm.sin(x) * sm.exp(-(z**2)) + y) * sm.sqrt(1 + z**2),
}


def _evalf(e, point):
    return float(e.evalf(30, subs=point))


def test_every_supported_function_has_a_case():
    assert {str(f) for f in FUNCTIONS} <= set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_replay_against_evalf(name):
    expr = CASES[name]
    fn = python_function([[x, y, z]], [], [sm.Matrix([expr])])
    rng = np.random.default_rng(list(CASES).index(name))
    for _ in range(5):
        vals = [rng.uniform(0.1, 0.9), rng.uniform(1.1, 2.0), rng.uniform(-2.0, 2.0)]
        got = fn(vals)[0][0][0]
        expected = _evalf(expr, dict(zip((x, y, z), vals, strict=True)))
        assert got == pytest.approx(expected, rel=1e-13, abs=1e-13), name


def test_named_intermediates_traced_once():
    """A named intermediate is recorded once, whatever uses it; a node that appears in
    several expressions is recorded once too (the tape's value numbering)."""
    a, b = sm.Dummy("a"), sm.Dummy("b")
    defs = [(a, sm.sin(x) * y), (b, a**2 + sm.cos(z))]
    outputs = [sm.Matrix([[a + b, a * b], [3 * a, sm.cos(z) * b]]), sm.Matrix([b**2])]
    fn = python_function([[x, y], [z]], defs, outputs)
    source = fn.__doc__
    assert source.count("sin(") == 1 and source.count("cos(") == 1
    point = {x: 0.3, y: 1.7, z: -0.4}
    out = fn([0.3, 1.7], [-0.4])
    full = [e.xreplace({b: defs[1][1]}).xreplace({a: defs[0][1]}) for e in
            [*outputs[0], outputs[1][0]]]  # fmt: skip
    got = [*np.ravel(out[0]), out[1][0][0]]
    assert np.allclose(got, [_evalf(e, point) for e in full], rtol=1e-14)
    # replaying known subexpressions records nothing new
    tape = Tape()
    replay = Replay(tape, {x: tape.input("x"), y: tape.input("y"), z: tape.input("z")})
    replay(sm.exp(sm.sin(x) * y) * sm.cos(z))
    n = len(tape.nodes)
    replay(sm.sin(x) * y + sm.cos(z))
    assert len(tape.nodes) == n + 1  # only the new sum


def test_constant_outputs_including_not_finite():
    fn = python_function([[x]], [], [sm.Matrix([[sm.nan, sm.oo, -2, x]])])
    out = fn([3.0])[0][0]
    assert np.isnan(out[0]) and out[1] == np.inf and out[2:] == [-2.0, 3.0]


def test_inputs_may_be_functions_of_time():
    fn = python_function([[x], [T(t)]], [], [sm.Matrix([x * T(t) + sm.cos(T(t))])])
    assert fn([2.0], [0.5])[0][0][0] == pytest.approx(1.0 + np.cos(0.5), rel=1e-15)


@pytest.mark.parametrize(
    ("expr", "name"),
    [(sm.floor(x), "floor"), (sm.Piecewise((x, x > 0), (0, True)), "Piecewise"),
     (sm.Function("f")(x) + 1, "f"), (sm.Heaviside(x), "Heaviside")],
)  # fmt: skip
def test_unsupported_node_is_named(expr, name):
    with pytest.raises(kd.ModelError, match=f"cannot evaluate {name}"):
        python_function([[x]], [], [sm.Matrix([expr])])


def test_unknown_symbol_is_named():
    with pytest.raises(kd.ModelError, match="the symbol y is neither an input"):
        python_function([[x]], [], [sm.Matrix([x + y])])
