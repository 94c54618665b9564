"""The one RK4 step and the step schedule (kanedyn.dynamics.steppers)."""

from __future__ import annotations

import numpy as np
import pytest

from kanedyn.dynamics.steppers import FLOATS, Schedule, per_float, rk4_step
from kanedyn.errors import ModelError


def _oscillator(t, x):
    """ẋ = A x + forcing(t): a damped oscillator driven by cos t, on arrays."""
    return np.array([x[1], -4.0 * x[0] - 0.1 * x[1] + np.cos(t)])


def _oscillator_floats(t, x):
    return _oscillator(t, np.array(x)).tolist()


def _run(h, t_final=2.0):
    x = np.array([1.0, 0.0])
    for _, t, step, _, _ in Schedule.of(t_final, h, h):
        x = rk4_step(_oscillator, t, x, step)
    return x


def test_rk4_is_fourth_order():
    """The global error falls as h⁴ (diffrax's convergence-order test)."""
    reference = _run(1e-3)
    hs = np.array([0.1, 0.05, 0.025, 0.0125])
    errors = [np.linalg.norm(_run(h) - reference) for h in hs]
    order = np.polyfit(np.log(hs), np.log(errors), 1)[0]
    assert order == pytest.approx(4.0, abs=0.1)


def test_floats_and_arrays_take_the_same_step():
    x = [0.3, -0.7]
    k1 = _oscillator_floats(0.2, x)
    a = rk4_step(_oscillator, 0.2, np.array(x), 0.1)
    b = rk4_step(_oscillator_floats, 0.2, x, 0.1, FLOATS)
    c = rk4_step(_oscillator_floats, 0.2, x, 0.1, FLOATS, k1=k1)
    assert type(b) is list
    np.testing.assert_array_equal(a, b)
    assert b == c


def test_per_float_spells_out_an_expression_as_a_comprehension():
    def fn(x, a, y, z):
        return x + a * (y + 2.0 * z) + 1.5

    lifted = per_float(fn)
    x, y, z = [0.1, 0.2, 0.3], [1.0, -1.0, 3.0], [0.7, 0.11, -2.0]
    assert lifted(x, 0.3, y, z) == [fn(*args) for args in zip(x, [0.3] * 3, y, z, strict=True)]
    assert lifted([], 0.3, [], []) == []


def test_the_schedule_ends_at_t_final_with_a_short_last_step():
    steps = list(Schedule.of(1.0, 0.3, 0.6))
    assert [s[0] for s in steps] == [1, 2, 3, 4]
    assert [s[1] for s in steps] == pytest.approx([0.0, 0.3, 0.6, 0.9])
    assert [s[2] for s in steps] == pytest.approx([0.3, 0.3, 0.3, 0.1])
    assert steps[-1][3] == 1.0
    assert [s[4] for s in steps] == [False, True, False, True]  # every 2 steps, and the last


@pytest.mark.parametrize("every", [0.25, 0.0, -0.2, np.nan, np.inf])
def test_outputs_must_be_a_positive_multiple_of_the_step(every):
    with pytest.raises(ModelError, match="positive multiple of dt"):
        Schedule.of(1.0, 0.1, every)
