"""Kane's rolling disc (Kane & Levinson 1985), minimal and with constraints.

Reference values: docs/reference-cases section 2 (closed-form equations of the
minimal model; sympy's nonholonomic regression values; the critical spin rate
of upright rolling, :math:`\\Omega^2 = g / (3 r)`).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

from kanedyn.symbolic.examples import rolling_disc
from kanedyn.symbolic.linearize import linearize

r, m, g = sm.symbols("r m g", positive=True)  # the parameters of rolling_disc
OMEGA_CRIT = 1 / sm.sqrt(3)  # sqrt(g / (3 r)) with r = g = 1


# The three forms of kanedyn.symbolic.examples.rolling_disc, unpacked.
def minimal_disc():
    disc = rolling_disc("minimal")
    return disc.problem, disc.q, disc.u


def nonholonomic_disc():
    disc = rolling_disc("contact")
    return disc.problem, disc.q, disc.u, disc.contact


def constrained_disc():
    disc = rolling_disc("constrained")
    return disc.problem, disc.q, disc.u


def test_every_form_has_parameters_r_m_g():
    for form in ("minimal", "contact", "constrained"):
        disc = rolling_disc(form)
        assert (disc.r, disc.m, disc.g) == (r, m, g)
        assert set(disc.problem.parameters) == {r, m, g}


# ---------------------------------------------------------------------------
# Minimal model
# ---------------------------------------------------------------------------


def test_minimal_closed_form():
    problem, (q1, q2, q3), (u1, u2, u3) = minimal_disc()
    rhs = problem.mass_matrix.LUsolve(problem.forcing)
    expected = sm.Matrix(
        [
            (6 * r * u2 * u3 - r * u3**2 * sm.tan(q2) + 4 * g * sm.sin(q2)) / (5 * r),
            -2 * u1 * u3 / 3,
            u1 * (-2 * u2 + u3 * sm.tan(q2)),
        ]
    )
    assert sm.simplify(rhs - expected) == sm.zeros(3, 1)


def test_minimal_numeric_rhs_matches_symbolic():
    problem, q, u = minimal_disc()
    f = sm.lambdify(
        [q, u, problem.parameters], problem.mass_matrix_full.LUsolve(problem.forcing_full)
    )
    rng = np.random.default_rng(3)
    for _ in range(3):
        qv, uv, pv = rng.uniform(-1, 1, 3), rng.uniform(-2, 2, 3), rng.uniform(0.5, 2, 3)
        np.testing.assert_allclose(
            problem.rhs(qv, uv, pv), np.ravel(f(qv, uv, pv)), rtol=1e-12, atol=1e-12
        )


def _upright(problem, q, u, spin):
    q1, q2, q3 = q
    u1, u2, u3 = u
    return {q1: 0, q2: 0, q3: 0, u1: 0, u2: spin, u3: 0, r: 1, g: 1, m: 1}


def test_minimal_critical_spin_rate():
    problem, q, u = minimal_disc()
    spin = sm.Symbol("Omega")
    lin = linearize(problem, _upright(problem, q, u, spin), check_equilibrium=True)
    # All six eigenvalues vanish at the critical spin rate: the characteristic
    # polynomial is lambda^6 there (exactly).
    lam = sm.Symbol("lambda")
    A_crit = lin.A.subs(spin, OMEGA_CRIT).applyfunc(sm.nsimplify)
    assert sm.expand(A_crit.charpoly(lam).as_expr()) == lam**6
    above = lin.eigenvalues({spin: float(OMEGA_CRIT) + 0.01})
    below = lin.eigenvalues({spin: float(OMEGA_CRIT) - 0.01})
    assert np.max(above.real) < 1e-12 and np.max(np.abs(above.imag)) > 0.1
    assert np.max(below.real) > 0.1


# ---------------------------------------------------------------------------
# Nonholonomic model (section 2.3)
# ---------------------------------------------------------------------------

P_VALS = {g: 9.81, r: 0.26, m: 3.43}
CASES = [
    (
        (0.3, 0.1, 1.97, -0.35, 2.27),
        (-0.2, 1.3, 0.15),
        [0.126603940595934, 0.215942571601660, 1.28736069604936, 0.319764288376543,
         0.0989146857254898, -0.925848952664489, -0.0181350656532944, 2.91695398184589,
         -0.00992793421754526, 0.0412861634829171],
    ),
    (
        (3.97, -0.28, 8.2, -0.35, 2.27),
        (-0.25, -2.2, 0.62),
        [0.0259159090798597, 0.668041660387416, -2.19283799213811, 0.385441810852219,
         0.420109283790573, 1.45030568179066, -0.0110924422400793, -8.35617840186040,
         -0.154098542632173, -0.146102664410010],
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def nh_disc():
    return nonholonomic_disc()


@pytest.mark.parametrize("case", CASES, ids=["state1", "state2"])
def test_nonholonomic_regression_values(nh_disc, case):
    problem, _, _, _ = nh_disc
    q, u_ind, expected = case
    got = problem.rhs(q, u_ind, P_VALS, full=True)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("case", CASES, ids=["state1", "state2"])
def test_nonholonomic_symbolic_eliminated_form(nh_disc, case):
    problem, q_syms, u_syms, _ = nh_disc
    q, u_ind, expected = case
    f = sm.lambdify(
        [q_syms, u_syms[:3], problem.parameters],
        [problem.mass_matrix_full, problem.forcing_full],
        cse=True,
    )
    M, F = f(q, u_ind, [P_VALS[p] for p in problem.parameters])
    got = np.linalg.solve(np.asarray(M, float), np.asarray(F, float).ravel())
    np.testing.assert_allclose(got, expected[:8], rtol=0, atol=1e-10)
    ud = sm.lambdify(
        [q_syms, u_syms[:3], problem.parameters], list(problem.u_dep_solution.values())
    )
    np.testing.assert_allclose(
        ud(q, u_ind, [P_VALS[p] for p in problem.parameters]), expected[3:5], rtol=0, atol=1e-10
    )


def test_nonholonomic_zero_state_gives_zero(nh_disc):
    problem, _, _, _ = nh_disc
    out = problem.rhs(np.zeros(5), np.zeros(3), P_VALS, full=True)
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out, np.zeros(10))


def test_nonholonomic_partials_satisfy_the_constraints(nh_disc):
    # The disc's material point at the contact has zero nonholonomic partial
    # velocity: v_r~ + omega_r~ x (contact - centre) = 0 for every r.
    problem, q, _, contact = nh_disc
    N = problem.frame
    lever = contact.pos_from(problem.bodies[0].point)
    rule = {q[0]: 0.3, q[1]: 0.1, q[2]: 1.97, r: 0.26}
    pv, pw = problem.partial_velocities["disc"], problem.partial_angular_velocities["disc"]
    for vr, wr in zip(pv, pw, strict=True):
        vc = vr + (wr ^ lever)
        comps = vc.to_matrix(N).xreplace(rule).evalf()
        assert max(abs(float(c)) for c in comps) < 1e-12


# ---------------------------------------------------------------------------
# Constrained model with a dependent coordinate (section 2.2)
# ---------------------------------------------------------------------------


def test_constrained_linearization_and_critical_speed():
    problem, q, u = constrained_disc()
    q1, q2, q3, q4, q5, q6 = q
    u1, u2, u3, u4, u5, u6 = u
    spin = sm.Symbol("Omega")
    # Upright rolling along the yaw heading q1 with spin rate Omega (q1' = 0,
    # q3' = Omega); q1, q3, q4, q5 stay symbolic and q6 and u4..u6 follow
    # from the constraints.
    op = {q2: 0, u1: 0, u2: spin, u3: 0, r: 1, g: 1, m: 1}
    lin = linearize(problem, op, check_equilibrium=True)
    assert lin.op_point[q6] == -1
    expected = sm.Matrix(
        [
            [0, 0, 0, 0, 0, 0, 0, 1],
            [0, 0, 0, 0, 0, 1, 0, 0],
            [0, 0, 0, 0, 0, 0, 1, 0],
            [sm.sin(q1) * spin, 0, 0, 0, 0, -sm.sin(q1), -sm.cos(q1), 0],
            [-sm.cos(q1) * spin, 0, 0, 0, 0, sm.cos(q1), -sm.sin(q1), 0],
            [0, sm.Rational(4, 5), 0, 0, 0, 0, 0, 6 * spin / 5],
            [0, 0, 0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, -2 * spin, 0, 0],
        ]
    )
    assert sm.simplify(lin.A - expected) == sm.zeros(8, 8)
    A_crit = lin.A.subs({spin: OMEGA_CRIT, q1: sm.Rational(3, 10)})
    lam = sm.Symbol("lambda")
    assert sm.simplify(A_crit.charpoly(lam).as_expr()) == lam**8
    above = lin.eigenvalues({spin: float(OMEGA_CRIT) + 0.01, q1: 0.3})
    below = lin.eigenvalues({spin: float(OMEGA_CRIT) - 0.01, q1: 0.3})
    assert np.max(above.real) < 1e-9
    assert np.max(below.real) > 0.1
