"""The explicit symbolic solve ``u̇ = M⁻¹ forcing`` (``solve_symmetric``, ``KaneProblem.solve``,
``LagrangeEquations.solve``) against numeric solves of the same M and forcing, sympy's own
``KanesMethod`` + ``LUsolve``, the numeric elimination of ``KaneProblem.rhs`` and the numeric
Kane engine, at random points."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from sympy.physics import mechanics as me

import kanedyn as kd
from kanedyn.spatial.plucker import solve_spd
from kanedyn.symbolic import KaneProblem, lagrange, solve_symmetric
from kanedyn.symbolic.examples import _constrained_disc, _minimal_disc
from kanedyn.symbolic.problem import _det2, _over, _stand_ins


def _evaluator(*mats: sm.Matrix):
    """One function of a random point for all of ``mats`` (every symbol, dynamic symbol
    and derivative in them becomes an argument)."""
    rule = _stand_ins([e for M in mats for e in M])
    args = list(rule.values())
    fns = [sm.lambdify(args, M.xreplace(rule), modules="numpy") for M in mats]

    def at(vals):
        return [np.asarray(f(*vals), dtype=float).reshape(M.shape)
                for f, M in zip(fns, mats, strict=True)]  # fmt: skip

    return list(rule), at


def _cart_pendulum(n: int):
    """An n-link pendulum on a cart in sympy vectors (the benchmark's problem)."""
    q, u = me.dynamicsymbols(f"q:{n + 1}"), me.dynamicsymbols(f"u:{n + 1}")
    m = sm.symbols(f"m:{n + 1}", positive=True)
    l = sm.symbols(f"l:{n}", positive=True)
    g, F = sm.Symbol("g"), me.dynamicsymbols("F")
    N, O = me.ReferenceFrame("N"), me.Point("O")
    O.set_vel(N, 0)
    prev = O.locatenew("C", q[0] * N.x)
    prev.set_vel(N, u[0] * N.x)
    bodies = [me.Particle("cart", prev, m[0])]
    loads = [(prev, F * N.x - m[0] * g * N.y)]
    for i in range(n):
        A = N.orientnew(f"A{i}", "Axis", (q[i + 1], N.z))
        A.set_ang_vel(N, u[i + 1] * N.z)
        P = prev.locatenew(f"P{i}", -l[i] * A.y)
        P.v2pt_theory(prev, N, A)
        bodies.append(me.Particle(f"p{i}", P, m[i + 1]))
        loads.append((P, -m[i + 1] * g * N.y))
        prev = P
    kd_eqs = [qi.diff() - ui for qi, ui in zip(q, u, strict=True)]
    return dict(frame=N, q_ind=q, u_ind=u, kd_eqs=kd_eqs, bodies=bodies, loads=loads)


def test_kane_problem_solve_matches_numeric_solve_and_sympy_lusolve():
    args = _cart_pendulum(3)
    kp = KaneProblem(**args)
    X = kp.solve()
    assert X.shape == (4, 1)
    km = me.KanesMethod(args["frame"], q_ind=args["q_ind"], u_ind=args["u_ind"],
                        kd_eqs=args["kd_eqs"])  # fmt: skip
    km.kanes_equations(args["bodies"], args["loads"])
    X_sympy = km.mass_matrix.LUsolve(km.forcing)  # the independent oracle
    syms, at = _evaluator(kp.mass_matrix, kp.forcing, X, X_sympy)
    rng = np.random.default_rng(1)
    for _ in range(4):
        M, f, x, x_sympy = at(rng.uniform(0.2, 1.5, len(syms)))
        assert np.allclose(x, np.linalg.solve(M, f), rtol=1e-10, atol=1e-12)
        assert np.allclose(x, x_sympy, rtol=1e-10, atol=1e-12)
    assert kp.solve() is X  # formed once


def test_kane_problem_solve_with_dependent_speeds_matches_numeric_elimination():
    """The disc with six speeds and three nonholonomic constraints: the symbolic solve of
    the eliminated equations against ``rhs``, which eliminates numerically."""
    r, m, g = sm.symbols("r m g", positive=True)
    args, _, _, _ = _constrained_disc(r, m, g)
    kp = KaneProblem(**args)
    X = kp.solve()
    assert X.shape == (len(kp.u_ind), 1)
    pub = {**{x: x for x in kp.q}, **{x: x for x in kp.u_ind}}
    rng = np.random.default_rng(2)
    par = dict(zip(kp.parameters, rng.uniform(0.5, 1.5, len(kp.parameters)), strict=True))
    f = sm.lambdify([list(pub), list(par)], X, modules="numpy")
    for _ in range(3):
        q = rng.uniform(-1, 1, len(kp.q))
        q[1] = rng.uniform(0.3, 1.0)  # away from the disc lying flat
        u_i = rng.uniform(-1, 1, len(kp.u_ind))
        expected = kp.rhs(q, u_i, par)[len(kp.q) :]
        got = np.ravel(f(np.concatenate([q, u_i]), list(par.values())))
        assert np.allclose(got, expected, rtol=1e-9, atol=1e-11)


def test_kane_problem_solve_where_entries_vanish():
    """The rolling disc upright (lean 0): entries of M and forcing with sin(lean) vanish
    there, and the solve stays finite and right (no pivot of a positive definite matrix
    vanishes)."""
    r, m, g = sm.symbols("r m g", positive=True)
    args, q, u, _ = _minimal_disc(r, m, g)
    kp = KaneProblem(**args)
    X = kp.solve()
    syms, at = _evaluator(kp.mass_matrix, kp.forcing, X)
    rng = np.random.default_rng(3)
    i_lean = syms.index(q[1])
    for _ in range(3):
        vals = rng.uniform(0.2, 1.5, len(syms))
        vals[i_lean] = 0.0
        M, f, x = at(vals)
        assert np.all(np.isfinite(x))
        assert np.allclose(x, np.linalg.solve(M, f), rtol=1e-10, atol=1e-12)


def _chain(numeric: bool) -> kd.Model:
    """A cart with a 2-link pendulum of rigid links, one link tilted out of the plane."""
    vals = [1.3, 0.7, 0.9, 0.8, 0.6] if numeric else sm.symbols("m0 m1 m2 l0 l1", positive=True)
    m0, m1, m2, l0, l1 = vals
    bodies = [
        kd.Body("cart", mass=m0, inertia=np.diag([0.1, 0.2, 0.3])),
        kd.Body("a", mass=m1, inertia=np.diag([0.05, 0.02, 0.04]), com=(0, -l0, 0)),
        kd.Body("b", mass=m2, inertia=np.diag([0.03, 0.01, 0.03]), com=(0.1, -l1, 0.05)),
    ]
    joints = [
        kd.Joint.prismatic("slide", None, "cart", axis=1),
        kd.Joint.revolute("j0", "cart", "a", axis=3),
        kd.Joint.revolute("j1", "a", "b", axis=1, inner_point=(0, -2 * l0, 0)),
    ]
    return kd.Model(bodies, joints, gravity=(0, -9.81, 0))


def test_lagrange_solve_matches_numeric_engine():
    model = _chain(numeric=True)
    lag = lagrange(model)
    X = lag.solve()
    f = sm.lambdify([list(lag.q), list(lag.u)], X, modules="numpy")
    rng = np.random.default_rng(4)
    for _ in range(4):
        state = kd.State(rng.uniform(-2, 2, model.nq), rng.uniform(-2, 2, model.n))
        expected = kd.forward_dynamics(model, state)
        assert np.allclose(np.ravel(f(state.q, state.u)), expected, rtol=1e-9, atol=1e-10)


def test_lagrange_solve_symbolic_matches_numeric_solve():
    lag = lagrange(_chain(numeric=False))
    X = lag.solve()
    syms, at = _evaluator(lag.mass_matrix, lag.forcing, X)
    rng = np.random.default_rng(5)
    for _ in range(3):
        H, F, x = at(rng.uniform(0.2, 1.5, len(syms)))
        assert np.allclose(x, np.linalg.solve(H, F), rtol=1e-10, atol=1e-12)


def test_solve_symmetric_blocks_and_errors():
    a, b, c, x = sm.symbols("a b c x", positive=True)
    A = sm.Matrix([[a, 0, b * sm.cos(x)], [0, c, 0], [b * sm.cos(x), 0, a + b]])
    B = sm.Matrix([[1, x], [2, 0], [sm.sin(x), 1]])
    X = solve_symmetric(A, B)
    syms, at = _evaluator(A, B, X)
    for point in ({a: 0.5, b: 0.3, c: 1.1, x: 0.0}, {a: 1.2, b: 0.9, c: 0.4, x: 2.0}):
        An, Bn, Xn = at([point[s] for s in syms])
        assert np.allclose(Xn, np.linalg.solve(An, Bn), rtol=1e-12)
    with pytest.raises(kd.ModelError, match="singular"):
        solve_symmetric(sm.Matrix([[a, 0], [0, 0]]), sm.Matrix([1, 1]))
    with pytest.raises(kd.ModelError, match="2 x 3"):
        solve_symmetric(sm.zeros(2, 3), sm.Matrix([1, 1]))


def test_over_is_sympys_division():
    """The directly formed quotient is the very tree sympy's division gives."""
    a, b, c = sm.symbols("a b c", positive=True)
    q = me.dynamicsymbols("q")
    den = a * b - c**2 * sm.cos(q) ** 2
    for num in (a + sm.sin(q), -3 * a * c * sm.sin(q), 2 * sm.cos(q), c, a * den, den, 0, 5):
        assert _over(sm.sympify(num), den) == sm.sympify(num) / den
    assert _over(a + b, a + b + c) == (a + b) / (a + b + c)


def test_det2_is_sympys_determinant():
    a, b, c = sm.symbols("a b c", positive=True)
    q = me.dynamicsymbols("q")
    two = a * sm.sin(q) - b * sm.cos(q) ** 2  # a two-term off-diagonal entry
    for x, y, z in ((a + b, two, c * a), (a, two, a), (two, two, two), (3, two, c),
                    (a * two, two, two), (a, b * c, a + c), (2, a + b, 3)):  # fmt: skip
        x, y, z = map(sm.sympify, (x, y, z))
        assert _det2(x, y, z) == x * z - y * y


def test_solve_spd_with_structural_zeros_against_lusolve():
    """``plucker.solve_spd`` (the LDLᵀ that solve_symmetric and the articulated-body
    recursion share) on sympy matrices with structural zeros, an arrow and a tridiagonal
    pattern, against sympy's ``LUsolve``: equal at random rational points (exactly). Only
    the lower triangle is read (the upper one here holds other symbols)."""
    n = 5
    patterns = {
        "arrow": lambda i, j: i == j or i == n - 1 or j == n - 1,
        "tridiagonal": lambda i, j: abs(i - j) <= 1,
    }
    rng = np.random.default_rng(3)
    for name, nonzero in patterns.items():
        lower = {(i, j): sm.Symbol(f"a{i}{j}") for i in range(n) for j in range(i + 1)
                 if nonzero(i, j)}  # fmt: skip
        A = sm.Matrix([[lower.get((max(i, j), min(i, j)), 0) for j in range(n)]
                       for i in range(n)])  # fmt: skip
        upper_other = [[lower.get((i, j), 0) if j <= i else sm.Symbol(f"u{i}{j}")
                        for j in range(n)] for i in range(n)]  # fmt: skip
        B = sm.Matrix(n, 2, lambda i, c: sm.Symbol(f"b{i}{c}") if (i + c) % 3 else 0)
        X = solve_spd(upper_other, [list(B[:, c]) for c in range(2)])
        assert all(not e.has(*[s for row in upper_other for s in row if str(s)[0] == "u"])
                   for col in X for e in col)  # fmt: skip
        X_lu = A.LUsolve(B)
        for _ in range(3):
            # a diagonally dominant point: A is positive definite there
            point = {s: sm.Rational(int(rng.integers(-9, 10)), 10) for s in lower.values()}
            point.update({lower[i, i]: sm.Integer(int(rng.integers(4, 9))) for i in range(n)})
            point.update({s: sm.Rational(int(rng.integers(-20, 21)), 7) for s in B.free_symbols})
            for c in range(2):
                for i in range(n):
                    assert X[c][i].xreplace(point) == X_lu[i, c].xreplace(point), (name, i, c)


def test_solve_spd_on_floats_and_a_zero_pivot():
    rng = np.random.default_rng(4)
    G = rng.normal(size=(4, 4))
    A = G @ G.T + 4 * np.eye(4)
    A[3, 0] = A[0, 3] = 0.0
    b = rng.normal(size=4)
    x = solve_spd(A.tolist(), [b.tolist()])[0]
    assert np.allclose(x, np.linalg.solve(A, b), rtol=1e-13)
    a = sm.Symbol("a")
    with pytest.raises(ZeroDivisionError, match="pivot 2"):
        solve_spd([[a, 0, 0], [0, 0, 0], [0, 0, a]], [[1, 1, 1]])
