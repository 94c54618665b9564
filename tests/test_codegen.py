"""Tests of kanedyn.codegen: the tracer Tape (constant folding, value numbering) and the
straight-line Python it emits.

Oracles: the same formulas evaluated directly with ``math`` / NumPy in the test, and a
random expression DAG with many shared subexpressions whose values are computed by an
ordered evaluation here, next to the tracing. The DAG test runs the generated code on
NumPy arrays as well: a local name reused while its value is still live (the register
allocation of ``Tape.source``) would change the numbers.
"""

from __future__ import annotations

import math
import operator
import re

import numpy as np
import pytest

from kanedyn import codegen
from kanedyn.codegen import ARRAY_NAMESPACE, SCALAR_NAMESPACE, Tape, Value, build, cos, sin, sqrt


def _inputs(tape: Tape, *names: str) -> list[Value]:
    return [tape.input(n) for n in names]


def _compile(tape: Tape, args, outputs, namespace=SCALAR_NAMESPACE):
    return build(codegen.source(tape, "f", args, outputs), "f", namespace)


def _assignments(source: str) -> list[str]:
    """Local names assigned by the generated function, in order (one per line)."""
    return re.findall(r"^    (\w+) = ", source, flags=re.MULTILINE)


# --------------------------------------------------------------------------- folding
def test_identities_record_no_operation():
    tape = Tape()
    x, y = _inputs(tape, "x", "y")
    neg_x = -x
    neg_neg_x = -neg_x  # -(-x)
    four = operator.neg(operator.neg(neg_neg_x))  # -(-(-(-x)))
    same_x = [0.0 + x, x + 0.0, x - 0.0, 1.0 * x, x * 1.0, x / 1.0, neg_neg_x, +x, four]
    for e in same_x:
        assert isinstance(e, Value) and e.index == x.index
    zeros = [0.0 * x, x * 0.0, x - x, (x * y) - (y * x), 0.0 / x, x * -0.0, (x + y) - (y + x)]
    for e in zeros:
        assert not isinstance(e, Value) and e == 0.0
    assert tape.count([*same_x, *zeros]) == 0
    assert tape.count([neg_x]) == 1
    # constants fold at once; operations on them cost nothing
    c = (2.0 * 3.0 - 1.0) / 5.0 + math.sqrt(4.0)
    assert c == 3.0
    assert tape.count([x * (c - 3.0), x + (c - 3.0), sin(0.5) * (cos(0.0) * x)]) == 1
    assert sqrt(9.0) == 3.0 and cos(0.0) == 1.0 and sin(0.0) == 0.0


def test_negations_are_absorbed():
    tape = Tape()
    x, y = _inputs(tape, "x", "y")
    # a + (-b) = a - b, (-a) * (-b) = a * b, (-a) * c = a * (-c), x * -1 = -x
    cases = [x + (-y), (-x) + y, x - (-y), (-x) * (-y), (-x) * 2.0, x * -1.0, 0.0 - x]
    counts = [tape.count([e]) for e in cases]
    assert counts == [1, 1, 1, 1, 1, 1, 1]
    f = _compile(tape, ["x", "y"], cases)
    got = f(0.7, -1.3)
    want = [0.7 - -1.3, -0.7 + -1.3, 0.7 + -1.3, 0.7 * -1.3, -1.4, -0.7, -0.7]
    assert got == pytest.approx(want, rel=1e-15, abs=0)


def test_common_subexpressions_are_recorded_once():
    tape = Tape()
    x, y, z = _inputs(tape, "x", "y", "z")
    a, b = x * y, y * x
    assert a.index == b.index  # commutative operands are ordered
    assert (x + y).index == (y + x).index
    assert (x - y).index != (y - x).index  # ... but not for a difference
    assert sin(x).index == sin(x).index and sqrt(z).index == sqrt(z).index
    n = len(tape.nodes)
    e = (x * y + z) * (y * x + z)  # x*y, +z, and the product: 3 operations
    assert tape.count([e]) == 3
    assert len(tape.nodes) == n + 2  # x*y was on the tape already; x*y + z recorded once
    f = _compile(tape, ["x", "y", "z"], [e])
    assert f(2.0, 3.0, 0.5) == [(2.0 * 3.0 + 0.5) ** 2]


def test_only_needed_operations_are_emitted():
    tape = Tape()
    x, y = _inputs(tape, "x", "y")
    unused = sin(x) * cos(y) + x / y  # recorded, never output
    assert tape.count([unused]) == 5
    out = x * y
    source = codegen.source(tape, "f", ["x", "y"], [out, x, 2.5])
    assert tape.count([out, x, 2.5]) == 1
    assert "sin" not in source and "cos" not in source and "/" not in source
    assert build(source, "f", SCALAR_NAMESPACE)(3.0, 4.0) == [12.0, 3.0, 2.5]


def test_division_by_constant_zero_raises():
    tape = Tape()
    x, y = _inputs(tape, "x", "y")
    with pytest.raises(ZeroDivisionError, match="constant 0"):
        _ = x / 0.0
    with pytest.raises(ZeroDivisionError, match="constant 0"):
        _ = y / (x - x)  # folds to y / 0.0
    with pytest.raises(ZeroDivisionError):
        _ = 1.0 / (0.0 * x)
    # division by a traced value is recorded (it may be zero only at run time)
    assert tape.count([x / y]) == 1


# --------------------------------------------------------------------------- evaluation
def test_source_evaluates_formula_on_floats_and_arrays():
    tape = Tape()
    x, y, z = _inputs(tape, "x", "y", "z")
    outputs = [
        sin(x) * cos(y) - sqrt(x * x + z * z) / (1.5 + y),
        -(x - 2.5) * (y + -0.75) / z,
        (x * y - y * x * 3.0) + cos(sin(z)),
        (0.0 - x) / (-4.0),
        -z,
    ]

    def direct(x, y, z, sin, cos, sqrt):
        return [
            sin(x) * cos(y) - sqrt(x * x + z * z) / (1.5 + y),
            -(x - 2.5) * (y - 0.75) / z,
            (x * y - 3.0 * x * y) + cos(sin(z)),
            x / 4.0,
            -z,
        ]

    source = codegen.source(tape, "f", ["x", "y", "z"], outputs)
    f = build(source, "f", SCALAR_NAMESPACE)
    for args in [(0.3, -0.4, 1.7), (2.0, 5.0, -0.25), (-1.1, 0.0, 3.0)]:
        got = f(*args)
        assert all(isinstance(g, float) for g in got)
        assert got == pytest.approx(direct(*args, math.sin, math.cos, math.sqrt), rel=1e-14)
    rng = np.random.default_rng(0)
    xs, ys, zs = rng.uniform(-2, 2, 50), rng.uniform(-1, 1, 50), rng.uniform(0.5, 2, 50)
    got = build(source, "f", ARRAY_NAMESPACE)(xs, ys, zs)
    want = direct(xs, ys, zs, np.sin, np.cos, np.sqrt)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15)


def test_preamble_unpacks_inputs():
    tape = Tape()
    a, b = _inputs(tape, "a", "b")
    source = codegen.source(tape, "g", ["v"], [a * b + a, b - a], preamble=["a, b = v"])
    assert build(source, "g", SCALAR_NAMESPACE)((2.0, 5.0)) == [12.0, 3.0]


def _random_dag(seed: int, n_inputs: int = 6, n_ops: int = 400):
    """A random expression DAG traced on a Tape, with its values computed alongside by
    direct evaluation on NumPy arrays (B = 5 points; column 0 is also checked on floats).

    Operands come half the time from the last few values and half the time from any
    earlier value, so many values stay live for long stretches while others are used
    once (and inlined); constants (including 0, 1, -1) exercise the folding.
    Returns (tape, input names, outputs, expected values, input values).
    """
    rng = np.random.default_rng(seed)
    tape = Tape()
    names = [f"x{i}" for i in range(n_inputs)]
    X = rng.uniform(-1.5, 1.5, (n_inputs, 5))
    pool: list[tuple[object, np.ndarray]] = [(tape.input(n), X[i]) for i, n in enumerate(names)]

    def pick():
        if rng.random() < 0.15:
            c = float(rng.choice([0.0, 1.0, -1.0, rng.uniform(-2, 2)]))
            return c, np.full(5, c)
        if rng.random() < 0.5:
            return pool[int(rng.integers(max(0, len(pool) - 4), len(pool)))]
        return pool[int(rng.integers(0, len(pool)))]

    for _ in range(n_ops):
        op = str(rng.choice(["add", "sub", "mul", "div", "neg", "sin", "cos", "sqrt"]))
        (a, va), (b, vb) = pick(), pick()
        if op == "add":
            e, v = a + b, va + vb
        elif op == "sub":
            e, v = a - b, va - vb
        elif op == "mul":
            e, v = a * b, va * vb
        elif op == "div":  # by 1.5 + cos(b), never zero
            e, v = a / (1.5 + cos(b)), va / (1.5 + np.cos(vb))
        elif op == "neg":
            e, v = -a, -va
        elif op == "sin":
            e, v = sin(a), np.sin(va)
        elif op == "cos":
            e, v = cos(a), np.cos(va)
        else:
            e, v = sqrt(1.0 + a * a), np.sqrt(1.0 + va * va)
        if np.all(np.abs(v) < 50.0):  # keep magnitudes (and round-off) bounded
            pool.append((e, v))
    chosen = rng.choice(len(pool), size=30, replace=False)
    outputs = [pool[i] for i in chosen] + pool[-3:] + [pool[0], (0.25, np.full(5, 0.25))]
    return tape, names, [o for o, _ in outputs], [v for _, v in outputs], X


@pytest.mark.parametrize("seed", range(8))
def test_random_dag_generated_code_equals_direct_evaluation(seed):
    tape, names, outputs, expected, X = _random_dag(seed)
    source = codegen.source(tape, "f", names, outputs)
    # the test is only meaningful if names are reused and values inlined
    assigned = _assignments(source)
    assert len(set(assigned)) < len(assigned), "no local name was reused"
    assert any(line.count("(") >= 4 for line in source.splitlines()), "nothing was inlined"
    assert len(assigned) < tape.count(outputs)
    # division by a constant becomes a product with its reciprocal, so allow round-off
    got_arr = build(source, "f", ARRAY_NAMESPACE)(*X)
    f = build(source, "f", SCALAR_NAMESPACE)
    assert len(got_arr) == len(expected)
    for g, w in zip(got_arr, expected, strict=True):
        np.testing.assert_allclose(np.broadcast_to(g, w.shape), w, rtol=1e-11, atol=1e-12)
    for b in range(X.shape[1]):
        got = f(*X[:, b].tolist())
        np.testing.assert_allclose(got, [w[b] for w in expected], rtol=1e-11, atol=1e-12)


def test_deep_chains_compile():
    """500-term sums and 500 nested calls: single-use values are inlined only to a
    bounded depth, so the source stays within Python's parser nesting limits."""
    n = 500
    tape = Tape()
    xs = _inputs(tape, *(f"x{i}" for i in range(n)))
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    acc = xs[0]
    for i in range(1, n):
        acc = acc * 0.5 + float(i)  # one chain of single-use values
    nest = xs[1]
    for _ in range(n):
        nest = sin(nest)
    source = codegen.source(tape, "f", [f"x{i}" for i in range(n)], [total, acc, nest])
    assert max(line.count("(") for line in source.splitlines()) <= 40
    vals = np.random.default_rng(1).uniform(-1, 1, n)
    got = build(source, "f", SCALAR_NAMESPACE)(*vals.tolist())
    want_acc = vals[0]
    for i in range(1, n):
        want_acc = want_acc * 0.5 + i
    want_nest = vals[1]
    for _ in range(n):
        want_nest = math.sin(want_nest)
    assert got[0] == pytest.approx(math.fsum(vals), rel=1e-12, abs=1e-12)
    assert got[1] == pytest.approx(want_acc, rel=1e-14)
    assert got[2] == pytest.approx(want_nest, rel=1e-14)
    arr = build(source, "f", ARRAY_NAMESPACE)(*(np.array([v, -v]) for v in vals))
    np.testing.assert_allclose(arr[0], [got[0], -got[0]], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arr[2], [got[2], -got[2]], rtol=1e-14)


def test_module_functions_on_floats_are_math():
    assert codegen.sin(0.3) == math.sin(0.3)
    assert codegen.cos(0.3) == math.cos(0.3)
    assert codegen.sqrt(2.0) == math.sqrt(2.0)


def test_non_finite_constants_are_written_as_floats():
    tape = Tape()
    x = tape.input("x")
    out = [x * (1e308 * 10.0), x + float("nan")]
    fn = build(codegen.source(tape, "f", ["x"], out), "f", SCALAR_NAMESPACE)
    big, nan = fn(2.0)
    assert big == math.inf and math.isnan(nan)
