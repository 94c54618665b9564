"""The Whipple bicycle benchmark (Meijaard, Papadopoulos, Ruina & Schwab 2007).

The model is Moore's formulation as ported in sympy's ``test_kane3.py``: yaw
q1, roll q2, pitch q4 (dependent, one holonomic front-contact constraint),
steer q5; speeds u2, u3, u5 independent and u1, u4, u6 dependent through the
three nonholonomic front-contact constraints. It is built here with
:class:`KaneProblem`, linearized about upright rolling at speed v, and compared
with the published coefficient matrices (section 5), the eigenvalue table and
the weave and capsize speeds (Table 2).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import sympy as sm

from kanedyn.symbolic.examples import BenchmarkParameters, benchmark_matrices, whipple_bicycle
from kanedyn.symbolic.linearize import linearize

# Meijaard et al. (2007), section 5: M q'' + v C1 q' + (g K0 + v^2 K2) q = f, q = [roll, steer].
M_PUB = np.array([[80.81722, 2.31941332208709], [2.31941332208709, 0.29784188199686]])
C1_PUB = np.array([[0.0, 33.86641391492494], [-0.85035641456978, 1.68540397397560]])
K0_PUB = np.array([[-80.95, -2.59951685249872], [-2.59951685249872, -0.80329488458618]])
K2_PUB = np.array([[0.0, 76.59734589573222], [0.0, 2.65431523794604]])

# Table 2: v, capsize root, weave (real, imaginary), castering root.
TABLE2 = [
    (1, -3.13423125066578, 3.52696170990070, 0.80774027519930, -7.11008014637442),
    (2, -3.07158645641514, 2.68234517512745, 1.68066296590675, -8.67387984831735),
    (3, -2.63366137253667, 1.70675605663975, 2.31582447384325, -10.35101467245920),
    (4, -1.42944427361326, 0.41325331521125, 3.07910818603206, -12.15861426576450),
    (5, -0.32286642900409, -0.77534188219585, 4.46486771378823, -14.07838969279820),
    (6, -0.00406690076970, -1.52644486584142, 5.87673060598709, -16.08537123098030),
    (7, 0.10268170574766, -2.13875644258362, 7.19525913329805, -18.15788466125262),
    (8, 0.14327879765713, -2.69348683581097, 8.46037971396931, -20.27940894394569),
    (9, 0.15790184030917, -3.21675402252485, 9.69377351531791, -22.43788559040858),
    (10, 0.16105338653172, -3.72016840437287, 10.90681139476287, -24.62459635017404),
]
V_WEAVE = 4.29238253634111
V_CAPSIZE = 6.02426201538837


@pytest.fixture(scope="module")
def bicycle():
    """The Whipple bicycle with the Table-1 parameters (speed symbol ``bike.speed``)."""
    return whipple_bicycle()


@pytest.fixture(scope="module")
def lateral(bicycle):
    """The lean/steer block [roll, steer, roll rate, steer rate] of A(v), and the model."""
    bike = bicycle
    lin = linearize(bike.problem, bike.op_point, check_equilibrium=True)
    rows = list(bike.lateral)  # q2, q5, u2, u5 in x = [q1, q2, q5, u2, u3, u5]
    f = sm.lambdify(bike.speed, lin.A.extract(rows, rows), modules="numpy")
    return (lambda speed: np.asarray(f(speed), dtype=float)), lin


def published_A(v: float) -> np.ndarray:
    Minv = np.linalg.inv(M_PUB)
    K = 9.81 * K0_PUB + v**2 * K2_PUB
    return np.block([[np.zeros((2, 2)), np.eye(2)], [-Minv @ K, -Minv @ (v * C1_PUB)]])


def test_coefficient_matrices_match_published(bicycle):
    # M dx' = A x with the mass matrix kept: the roll/steer rows of A are
    # -(g K0 + v^2 K2) in the angle columns and -v C1 in the rate columns.
    v = bicycle.speed
    lin = linearize(bicycle.problem, bicycle.op_point, A_and_B=False)
    angles, rates = [1, 2], [3, 5]

    def block(X, cols, speed):
        return np.array(X.extract(rates, cols).subs(v, speed), dtype=float)

    np.testing.assert_allclose(block(lin.M, rates, 0.0), M_PUB, rtol=0, atol=1e-12)
    K0 = -block(lin.A, angles, 0.0) / 9.81
    K2 = -block(lin.A, angles, 1.0) - 9.81 * K0
    C1 = -block(lin.A, rates, 1.0)
    np.testing.assert_allclose(K0, K0_PUB, rtol=0, atol=1e-12)
    np.testing.assert_allclose(K2, K2_PUB, rtol=0, atol=1e-12)
    np.testing.assert_allclose(C1, C1_PUB, rtol=0, atol=1e-12)


def test_benchmark_matrices_match_published(bicycle):
    bm = benchmark_matrices(bicycle)
    for got, printed in ((bm.M, M_PUB), (bm.C1, C1_PUB), (bm.K0, K0_PUB), (bm.K2, K2_PUB)):
        np.testing.assert_allclose(got, printed, rtol=0, atol=1e-12)
    np.testing.assert_allclose(bm.state_matrix(5.0), published_A(5.0), rtol=0, atol=1e-10)


def appendix_a(p: BenchmarkParameters) -> tuple[np.ndarray, ...]:
    """M, C1, K0, K2 from the closed forms of Meijaard et al. (2007), Appendix A."""
    mT = p.m_R + p.m_B + p.m_H + p.m_F
    xT = (p.x_B * p.m_B + p.x_H * p.m_H + p.w * p.m_F) / mT
    zT = (-p.r_R * p.m_R + p.z_B * p.m_B + p.z_H * p.m_H - p.r_F * p.m_F) / mT
    ITxx = (p.I_Rxx + p.I_Bxx + p.I_Hxx + p.I_Fxx + p.m_R * p.r_R**2 + p.m_B * p.z_B**2
            + p.m_H * p.z_H**2 + p.m_F * p.r_F**2)  # fmt: skip
    ITxz = p.I_Bxz + p.I_Hxz - p.m_B * p.x_B * p.z_B - p.m_H * p.x_H * p.z_H + p.m_F * p.w * p.r_F
    ITzz = (p.I_Rxx + p.I_Bzz + p.I_Hzz + p.I_Fxx + p.m_B * p.x_B**2 + p.m_H * p.x_H**2
            + p.m_F * p.w**2)  # fmt: skip
    mA = p.m_H + p.m_F
    xA = (p.x_H * p.m_H + p.w * p.m_F) / mA
    zA = (p.z_H * p.m_H - p.r_F * p.m_F) / mA
    IAxx = p.I_Hxx + p.I_Fxx + p.m_H * (p.z_H - zA) ** 2 + p.m_F * (p.r_F + zA) ** 2
    IAxz = p.I_Hxz - p.m_H * (p.x_H - xA) * (p.z_H - zA) + p.m_F * (p.w - xA) * (p.r_F + zA)
    IAzz = p.I_Hzz + p.I_Fxx + p.m_H * (p.x_H - xA) ** 2 + p.m_F * (p.w - xA) ** 2
    s, c = np.sin(p.lam), np.cos(p.lam)
    uA = (xA - p.w - p.c) * c - zA * s
    IAll = mA * uA**2 + IAxx * s**2 + 2 * IAxz * s * c + IAzz * c**2
    IAlx = -mA * uA * zA + IAxx * s + IAxz * c
    IAlz = mA * uA * xA + IAxz * s + IAzz * c
    mu = p.c / p.w * c
    SR, SF = p.I_Ryy / p.r_R, p.I_Fyy / p.r_F
    ST = SR + SF
    SA = mA * uA + mu * mT * xT
    M = [[ITxx, IAlx + mu * ITxz], [IAlx + mu * ITxz, IAll + 2 * mu * IAlz + mu**2 * ITzz]]
    K0 = [[mT * zT, -SA], [-SA, -SA * s]]
    K2 = [[0.0, (ST - mT * zT) * c / p.w], [0.0, (SA + SF * s) * c / p.w]]
    C1 = [
        [0.0, mu * ST + SF * c + ITxz * c / p.w - mu * mT * zT],
        [-(mu * ST + SF * c), IAlz * c / p.w + mu * (SA + ITzz * c / p.w)],
    ]
    return tuple(np.array(X) for X in (M, C1, K0, K2))


def test_appendix_a_reproduces_published():
    # The oracle itself, against the printed matrices.
    expected = appendix_a(BenchmarkParameters())
    for got, printed in zip(expected, (M_PUB, C1_PUB, K0_PUB, K2_PUB), strict=True):
        np.testing.assert_allclose(got, printed, rtol=0, atol=1e-12)


def test_benchmark_matrices_for_other_parameters():
    # Every Table-1 value changed: the conversion to the model's geometry is general.
    p = BenchmarkParameters(
        w=1.1, c=0.06, lam=0.3, g=9.8, r_R=0.32, m_R=2.5, I_Rxx=0.07, I_Ryy=0.13,
        x_B=0.35, z_B=-1.0, m_B=70.0, I_Bxx=8.0, I_Byy=10.0, I_Bzz=3.0, I_Bxz=2.0,
        x_H=0.95, z_H=-0.75, m_H=5.0, I_Hxx=0.06, I_Hyy=0.065, I_Hzz=0.008, I_Hxz=-0.006,
        r_F=0.33, m_F=2.8, I_Fxx=0.13, I_Fyy=0.25,
    )  # fmt: skip
    bm = benchmark_matrices(whipple_bicycle(p))
    for got, expected in zip((bm.M, bm.C1, bm.K0, bm.K2), appendix_a(p), strict=True):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-11)


def test_state_matrix_matches_published_and_sympy(lateral):
    A_of_v, _ = lateral
    v = sm.Symbol("v")
    # sympy's test_kane3.py::test_bicycle reference matrix.
    res = sm.Matrix(
        [
            [0, 0, 1.0, 0],
            [0, 0, 0, 1.0],
            [9.48977444677355, -0.891197738059089 * v**2 - 0.571523173729245,
             -0.105522449805691 * v, -0.330515398992311 * v],
            [11.7194768719633, -1.97171508499972 * v**2 + 30.9087533932407,
             3.67680523332152 * v, -3.08486552743311 * v],
        ]
    )  # fmt: skip
    for speed in range(11):
        A = A_of_v(float(speed))
        np.testing.assert_allclose(A, published_A(speed), rtol=0, atol=1e-10)
        np.testing.assert_allclose(A, np.array(res.subs(v, speed), dtype=float), rtol=0, atol=1e-10)


@pytest.mark.parametrize("row", TABLE2, ids=[f"v={r[0]}" for r in TABLE2])
def test_eigenvalues_table2(lateral, row):
    A_of_v, _ = lateral
    v, capsize, weave_re, weave_im, caster = row
    expected = np.sort_complex(
        np.array([capsize, weave_re + 1j * weave_im, weave_re - 1j * weave_im, caster])
    )
    got = np.sort_complex(np.linalg.eigvals(A_of_v(float(v))))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


def test_eigenvalues_at_rest(lateral):
    A_of_v, _ = lateral
    got = np.sort(np.linalg.eigvals(A_of_v(0.0)).real)
    expected = [-5.53094371765393, -3.13164324790656, 3.13164324790656, 5.53094371765393]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


def test_eigenvalues_at_5_from_full_linearization(lateral):
    _, lin = lateral
    lam = lin.eigenvalues({sm.Symbol("v"): 5.0})
    # Six states: the yaw angle and the rear-wheel speed each add a zero eigenvalue.
    assert np.sum(np.abs(lam) < 1e-9) == 2
    lam = lam[np.abs(lam) > 1e-9]
    expected = np.sort_complex(
        np.array([-0.32286642900409, -0.77534188219585 + 4.46486771378823j,
                  -0.77534188219585 - 4.46486771378823j, -14.07838969279820])
    )  # fmt: skip
    np.testing.assert_allclose(np.sort_complex(lam), expected, rtol=0, atol=1e-10)


def test_weave_and_capsize_speeds(lateral):
    A_of_v, _ = lateral

    def weave_real(v):
        lam = np.linalg.eigvals(A_of_v(v))
        return lam[np.abs(lam.imag) > 1e-9].real.max()

    def capsize_root(v):
        lam = np.linalg.eigvals(A_of_v(v))
        return lam[np.abs(lam.imag) <= 1e-9].real.max()

    v_w = scipy.optimize.brentq(weave_real, 3.0, 5.0, xtol=1e-14, rtol=1e-15)
    v_c = scipy.optimize.brentq(capsize_root, 5.5, 6.5, xtol=1e-14, rtol=1e-15)
    assert abs(v_w - V_WEAVE) < 1e-10
    assert abs(v_c - V_CAPSIZE) < 1e-10
    lam_w = np.linalg.eigvals(A_of_v(v_w))
    assert abs(np.abs(lam_w.imag).max() - 3.43503384866144) < 1e-10
    # Self-stable only between the weave and capsize speeds.
    for speed, stable in ((3.0, False), (5.0, True), (7.0, False)):
        assert (np.linalg.eigvals(A_of_v(speed)).real.max() < 0) == stable


def test_linearization_matches_finite_differences_of_rhs(bicycle, lateral):
    # The nonlinear numeric right-hand side (dependent pitch and speeds solved
    # numerically at each state) against the linear model at v = 5 m/s.
    problem, v, par = bicycle.problem, bicycle.speed, bicycle.parameters
    _, lin = lateral
    pvals = {p: float(par[p]) for p in problem.parameters}
    raw = problem.raw
    rule = {k: float(par[p]) for k, p in raw.public.items() if p in par}
    f_c = sm.lambdify([raw.q], raw.f_c.xreplace(rule)[0], modules="numpy")
    speed = 5.0

    def f(x):
        q_i, u_i = x[:3], x[3:]

        def pitch_residual(q4):
            return f_c([*q_i, q4])

        q4 = scipy.optimize.brentq(pitch_residual, -0.5, 0.5, xtol=1e-15)
        return problem.rhs([*q_i, q4], u_i, pvals)[[0, 1, 2, 4, 5, 6]]

    x0 = np.array([0.0, 0.0, 0.0, 0.0, speed / 0.3, 0.0])
    np.testing.assert_allclose(f(x0), 0.0, atol=1e-12)  # steady upright rolling
    eps = 1e-6
    J = np.column_stack([(f(x0 + eps * e) - f(x0 - eps * e)) / (2 * eps) for e in np.eye(6)])
    A = np.array(lin.A.subs(v, speed), dtype=float)
    np.testing.assert_allclose(J, A, rtol=0, atol=1e-6)
