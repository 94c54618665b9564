"""compare(): equivalence levels, named differences, refusal of mismatched variables."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.symbolic.compare import ComparisonReport, Equations, compare
from kanedyn.symbolic.lagrange import lagrange

m1, m2, l1, lc1, lc2, I1, I2, g = sm.symbols("m1 m2 l1 lc1 lc2 I1 I2 g", positive=True)


@pytest.fixture(scope="module")
def arm():
    b1 = kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(lc1, 0, 0))
    b2 = kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(lc2, 0, 0))
    j1 = kd.Joint.revolute("j1", None, "link1", axis=3)
    j2 = kd.Joint.revolute("j2", "link1", "link2", axis=3, inner_point=(l1, 0, 0))
    return lagrange(kd.Model([b1, b2], [j1, j2], gravity=(0, -g, 0)))


def seed_equations(lag, flip_coriolis: bool = False) -> Equations:
    """The seed's closed-form 2-DOF arm (seed 000), typed by hand, as M u̇ = f."""
    t1, t2 = lag.q
    u1, u2 = lag.u
    H11 = m1 * lc1**2 + I1 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * sm.cos(t2)) + I2
    H12 = m2 * (lc2**2 + l1 * lc2 * sm.cos(t2)) + I2
    H22 = m2 * lc2**2 + I2
    h = -m2 * l1 * lc2 * sm.sin(t2)
    G1 = m1 * g * lc1 * sm.cos(t1) + m2 * g * (l1 * sm.cos(t1) + lc2 * sm.cos(t1 + t2))
    G2 = m2 * g * lc2 * sm.cos(t1 + t2)
    coriolis_2 = (1 if flip_coriolis else -1) * h * u1**2
    f = sm.Matrix([-(2 * h * u1 * u2 + h * u2**2) - G1, -coriolis_2 - G2])
    return Equations(lag.q, lag.u, sm.Matrix([[H11, H12], [H12, H22]]), f)


def test_identical_equations_are_proven(arm):
    report = compare(arm, seed_equations(arm))
    assert isinstance(report, ComparisonReport)
    assert report.equivalent and report.proven and report.level == "identical"
    assert report.max_numeric_error < 1e-12
    assert {e.status for e in report.entries} == {"equal"}
    assert len(report.entries) == 4 + 2


def test_flipped_coriolis_term_is_named(arm):
    report = compare(arm, seed_equations(arm, flip_coriolis=True))
    assert not report.equivalent and report.level == "different"
    (bad,) = report.differing
    assert bad.name == "forcing[1]"
    t2, u1 = arm.q[1], arm.u[0]
    # lagrange - wrong = (h u1²) - (-h u1²) = 2 h u1², h = -m2 l1 lc2 sin θ2
    assert sm.simplify(bad.difference - (-2 * m2 * l1 * lc2 * sm.sin(t2) * u1**2)) == 0
    text = str(report)
    assert "NOT EQUIVALENT" in text and "forcing[1]" in text
    assert "sin(q_j2_0)" in text and "u_j1_0**2" in text
    assert "forcing[1]" in report._repr_markdown_() and "<table>" in report._repr_html_()


def test_row_scaling_and_combination_give_same_accelerations(arm):
    ref = seed_equations(arm)
    T = sm.Matrix([[1, 2], [0, 3]])
    report = compare(arm, Equations(ref.q, ref.u, T * ref.mass_matrix, T * ref.forcing))
    assert report.equivalent and report.level == "same accelerations"
    assert report.proven
    assert report.max_numeric_error < 1e-12
    assert {e.name for e in report.differing} <= {
        f"mass_matrix[{i}, {j}]" for i in range(2) for j in range(2)
    } | {"forcing[0]", "forcing[1]"}
    assert "rows are scaled or combined" in str(report)


def test_sizes_that_do_not_fit_raise(arm):
    ref = seed_equations(arm)
    smaller = Equations(ref.q[:1], ref.u[:1], ref.mass_matrix[:1, :1], ref.forcing[:1, :])
    with pytest.raises(kd.ModelError, match="one side has 2 coordinates, the other 1"):
        compare(arm, smaller)
    wrong_shape = Equations(ref.q, ref.u, ref.mass_matrix[:1, :], ref.forcing)
    with pytest.raises(kd.ModelError, match="mass_matrix"):
        compare(arm, wrong_shape)
    with pytest.raises(kd.ModelError, match="tuple of 3"):
        compare(arm, (ref.mass_matrix, ref.forcing, ref.q))


def test_same_coordinates_in_another_order_or_as_a_tuple(arm):
    ref = seed_equations(arm)
    swapped = Equations(list(reversed(ref.q)), ref.u, ref.mass_matrix, ref.forcing)
    assert compare(arm, swapped).equivalent
    report = compare(arm, (ref.mass_matrix, ref.forcing, ref.q, ref.u))
    assert report.equivalent and report.proven and report.names[1] == "tuple"


def test_numeric_difference_without_symbolic_budget(arm):
    """With no time for symbolic work, the numeric check alone still decides."""
    good = compare(arm, seed_equations(arm), time_budget=0.0)
    assert good.equivalent and not good.proven
    assert {e.status for e in good.entries} <= {"equal", "undecided"}
    bad = compare(arm, seed_equations(arm, flip_coriolis=True), time_budget=0.0)
    assert not bad.equivalent and [e.name for e in bad.differing] == ["forcing[1]"]


def test_params_and_dynamicsymbols():
    """Given parameter values are used; q(t) and u(t) match symbols named q and u."""
    me = pytest.importorskip("sympy.physics.mechanics")
    q, u = me.dynamicsymbols("q u")
    qs, us = sm.symbols("q u")
    m, k = sm.symbols("m k")
    a = Equations([q], [u], [[m]], [-k * q])
    b = Equations([qs], [us], [[m]], [-k * qs + (m - 2) * us])
    assert compare(a, b, params={"m": 2.0}).equivalent
    assert not compare(a, b).equivalent
    with pytest.raises(kd.ModelError, match="do not occur"):
        compare(a, b, params={"nope": 1.0})


def test_speeds_argument_for_objects_without_u():
    class NoSpeeds:
        def __init__(self, q, M, f):
            self.q, self.mass_matrix, self.forcing = q, M, f

    q, u, m = sm.symbols("q u m")
    a = NoSpeeds([q], [[m]], [-q])
    with pytest.raises(kd.ModelError, match="speeds="):
        compare(a, Equations([q], [u], [[m]], [-q]))
    assert compare(a, Equations([q], [u], [[m]], [-q]), speeds=[u]).proven


def test_kane_against_lagrange_in_a_notebook_display(arm):
    from kanedyn.symbolic.kane import kane

    report = compare(kane(arm.model), arm)
    assert report.equivalent and report.proven, str(report)
    md = report._repr_markdown_()
    assert md.startswith("**compare(KaneEquations, LagrangeEquations)**")
    assert np.isfinite(report.max_numeric_error)
