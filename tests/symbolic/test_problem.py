"""KaneProblem against sympy.physics.mechanics.KanesMethod, and its error messages."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from sympy.physics.mechanics import (
    KanesMethod,
    Particle,
    Point,
    ReferenceFrame,
    RigidBody,
    dynamicsymbols,
    inertia,
)

from kanedyn.errors import ModelError
from kanedyn.symbolic.linearize import linearize
from kanedyn.symbolic.problem import KaneProblem, Mass

RNG = np.random.default_rng(20240521)


# ---------------------------------------------------------------------------
# Models; each returns the keyword arguments shared by both methods
# ---------------------------------------------------------------------------


def planar_double_pendulum():
    """Two particles on massless rods; u2 is the absolute rate of the second rod."""
    q1, q2, u1, u2 = dynamicsymbols("q1 q2 u1 u2")
    m1, m2, l1, l2, g = sm.symbols("m1 m2 l1 l2 g")
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", (q1, N.z))
    B = A.orientnew("B", "Axis", (q2, A.z))
    A.set_ang_vel(N, u1 * N.z)
    B.set_ang_vel(N, u2 * N.z)
    O = Point("O")
    O.set_vel(N, 0)
    P1 = O.locatenew("P1", l1 * A.x)
    P2 = P1.locatenew("P2", l2 * B.x)
    P1.v2pt_theory(O, N, A)
    P2.v2pt_theory(P1, N, B)
    return dict(
        frame=N,
        q_ind=[q1, q2],
        u_ind=[u1, u2],
        kd_eqs=[q1.diff() - u1, q2.diff() - (u2 - u1)],
        bodies=[Particle("p1", P1, m1), Particle("p2", P2, m2)],
        loads=[(P1, -m1 * g * N.y), (P2, -m2 * g * N.y)],
    )


def spatial_double_pendulum():
    """Two rigid bodies: a ball joint (body-fixed x-y-z angles, body-axis rates) then a U-joint."""
    q = dynamicsymbols("q1:6")
    u = dynamicsymbols("u1:6")
    mA, mB, lA, lB, a, b, g, k = sm.symbols("mA mB lA lB a b g k")
    IA = sm.symbols("IAxx IAyy IAzz IAxy IAyz IAzx")
    IB = sm.symbols("IBxx IByy IBzz IBxy IByz IBzx")
    N = ReferenceFrame("N")
    A = ReferenceFrame("A")
    A.orient_body_fixed(N, q[:3], "xyz")
    w_qd = A.ang_vel_in(N)
    A.set_ang_vel(N, u[0] * A.x + u[1] * A.y + u[2] * A.z)
    B1 = A.orientnew("B1", "Axis", (q[3], A.x))
    B = B1.orientnew("B", "Axis", (q[4], B1.y))
    O = Point("O")
    O.set_vel(N, 0)
    Ao = O.locatenew("Ao", -lA / 2 * A.z + a * A.x)
    J = O.locatenew("J", -lA * A.z)
    Bo = J.locatenew("Bo", -lB / 2 * B.z + b * B.y)
    Ao.v2pt_theory(O, N, A)
    J.v2pt_theory(O, N, A)
    Bo.v2pt_theory(J, N, B)
    kd = [(w_qd - A.ang_vel_in(N)) & e for e in (A.x, A.y, A.z)]
    kd += [q[3].diff() - u[3], q[4].diff() - u[4]]
    return dict(
        frame=N,
        q_ind=q,
        u_ind=u,
        kd_eqs=kd,
        bodies=[
            RigidBody("A", Ao, A, mA, (inertia(A, *IA), Ao)),
            RigidBody("B", Bo, B, mB, (inertia(B, *IB), Bo)),
        ],
        loads=[
            (Ao, -mA * g * N.z),
            (Bo, -mB * g * N.z),
            (B, -k * q[3] * A.x),
            (A, k * q[3] * A.x),
        ],
    )


def slider_pendulum():
    """A cart on a spring-damper rail, driven by F(t), carrying a rigid pendulum."""
    q1, q2, u1, u2 = dynamicsymbols("q1 q2 u1 u2")
    F = dynamicsymbols("F")
    mc, mp, l, Ip, g, k, c = sm.symbols("m_c m_p l I_p g k c")
    N = ReferenceFrame("N")
    P = N.orientnew("P", "Axis", (q2, N.z))
    P.set_ang_vel(N, u2 * N.z)
    O = Point("O")
    O.set_vel(N, 0)
    C = O.locatenew("C", q1 * N.x)
    C.set_vel(N, u1 * N.x)
    Po = C.locatenew("Po", -l * P.y)
    Po.v2pt_theory(C, N, P)
    return dict(
        frame=N,
        q_ind=[q1, q2],
        u_ind=[u1, u2],
        kd_eqs=[q1.diff() - u1, q2.diff() - u2],
        bodies=[
            Particle("cart", C, mc),
            RigidBody("pendulum", Po, P, mp, (inertia(P, Ip, Ip, Ip), Po)),
        ],
        loads=[(C, (F - k * q1 - c * u1) * N.x), (Po, -mp * g * N.y)],
    )


def shaken_pendulum():
    """A rigid pendulum whose pivot follows a prescribed s(t) along N.x, on a tilted hinge.

    The pivot's velocity holds s'(t) and the accelerations s''(t): the specified
    function's rates must be carried through the time derivatives.
    """
    q1, q2, u1, u2 = dynamicsymbols("q1 q2 u1 u2")
    s = dynamicsymbols("s")
    m, l, g, Ix, Iy, Iz = sm.symbols("m l g I_x I_y I_z")
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", (q1, N.z))
    B = A.orientnew("B", "Axis", (q2, A.x))
    B.set_ang_vel(N, u1 * A.z + u2 * B.x)
    O = Point("O")
    O.set_vel(N, 0)
    pivot = O.locatenew("pivot", s * N.x)
    pivot.set_vel(N, s.diff() * N.x)
    G = pivot.locatenew("G", -l * B.y)
    G.v2pt_theory(pivot, N, B)
    return dict(
        frame=N,
        q_ind=[q1, q2],
        u_ind=[u1, u2],
        kd_eqs=[q1.diff() - u1, q2.diff() - u2],
        bodies=[RigidBody("pendulum", G, B, m, (inertia(B, Ix, Iy, Iz), G))],
        loads=[(G, -m * g * N.y)],
    )


MODELS = {
    "planar double pendulum": planar_double_pendulum,
    "spatial double pendulum": spatial_double_pendulum,
    "slider pendulum": slider_pendulum,
    "shaken pendulum": shaken_pendulum,
}


def _sympy_rhs(model: dict, params: list):
    """u' from sympy's KanesMethod, as a numeric function of (q, u, p)."""
    km = KanesMethod(model["frame"], model["q_ind"], model["u_ind"], model["kd_eqs"])
    km.kanes_equations(model["bodies"], model["loads"])
    args = [model["q_ind"], model["u_ind"], params]
    f = sm.lambdify(args, [km.mass_matrix_full, km.forcing_full], cse=True)

    def rhs(q, u, p):
        M, F = f(q, u, p)
        return np.linalg.solve(np.asarray(M, float), np.asarray(F, float).ravel())

    return rhs


@pytest.mark.parametrize("name", list(MODELS))
def test_matches_sympy_kanes_method(name):
    model = MODELS[name]()
    kp = KaneProblem(
        model["frame"],
        model["q_ind"],
        model["u_ind"],
        model["kd_eqs"],
        bodies=model["bodies"],
        loads=model["loads"],
    )
    params = list(kp.parameters)
    oracle = _sympy_rhs(model, params)
    nq, nu = len(kp.q), len(kp.u)
    ours_symbolic = sm.lambdify(
        [list(kp.q), list(kp.u), params], [kp.mass_matrix_full, kp.forcing_full], cse=True
    )
    for _ in range(5):
        q = RNG.uniform(-1.5, 1.5, nq)
        u = RNG.uniform(-2.0, 2.0, nu)
        p = RNG.uniform(0.5, 2.0, len(params))
        expected = oracle(q, u, p)
        got = kp.rhs(q, u, p)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        M, F = ours_symbolic(q, u, p)
        got_sym = np.linalg.solve(np.asarray(M, float), np.asarray(F, float).ravel())
        np.testing.assert_allclose(got_sym, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(MODELS))
def test_mass_matrix_is_symmetric_positive_definite(name):
    model = MODELS[name]()
    kp = KaneProblem(
        model["frame"], model["q_ind"], model["u_ind"], model["kd_eqs"],
        bodies=model["bodies"], loads=model["loads"],
    )  # fmt: skip
    f = sm.lambdify([list(kp.q), list(kp.parameters)], kp.mass_matrix)
    # Physical inertias: positive diagonals, no products (the spatial model's are zeroed).
    names = [str(p) for p in kp.parameters]
    p = np.array([0.0 if ("xy" in s or "yz" in s or "zx" in s) else 1.3 for s in names])
    M = np.asarray(f(RNG.uniform(-1, 1, len(kp.q)), p), float)
    np.testing.assert_allclose(M, M.T, atol=1e-14)
    assert np.all(np.linalg.eigvalsh(M) > 0)


def test_fr_plus_fr_star_vanishes_on_the_solution():
    model = slider_pendulum()
    kp = KaneProblem(**{k: model[k] for k in ("frame", "q_ind", "u_ind", "kd_eqs")},
                     bodies=model["bodies"], loads=model["loads"])  # fmt: skip
    sol = kp.mass_matrix.LUsolve(kp.forcing)
    ud = [x.diff() for x in kp.u_ind]
    res = (kp.Fr + kp.Fr_star).xreplace(dict(zip(ud, sol, strict=True)))
    assert sm.simplify(res) == sm.zeros(2, 1)


def test_parameters_accept_a_mapping_and_specified_functions():
    model = slider_pendulum()
    kp = KaneProblem(**model)
    names = [str(p) for p in kp.parameters]
    assert "F(t)" in names
    vals = dict(zip(kp.parameters, np.linspace(0.5, 1.5, len(names)), strict=True))
    a = kp.rhs([0.1, 0.2], [0.3, 0.4], vals)
    b = kp.rhs([0.1, 0.2], [0.3, 0.4], list(vals.values()))
    np.testing.assert_array_equal(a, b)
    f = kp.lambdify(vals)
    np.testing.assert_array_equal(f([0.1, 0.2], [0.3, 0.4]), a)
    with pytest.raises(ModelError, match="params: no value for"):
        kp.rhs([0.1, 0.2], [0.3, 0.4], {})


def test_linearize_input_matrix_for_the_slider():
    model = slider_pendulum()
    kp = KaneProblem(**model)
    q1, q2 = model["q_ind"]
    u1, u2 = model["u_ind"]
    F = dynamicsymbols("F")
    mc, mp, l, Ip, g = sm.symbols("m_c m_p l I_p g")
    lin = linearize(kp, {q1: 0, q2: 0, u1: 0, u2: 0}, inputs=[F], check_equilibrium=True)
    assert lin.inputs == (F,)
    # At the hanging equilibrium: M [u1'; u2'] = [F; 0] + ..., with
    # M = [[mc + mp, mp l], [mp l, Ip + mp l^2]].
    M = sm.Matrix([[mc + mp, mp * l], [mp * l, Ip + mp * l**2]])
    expected_B = sm.zeros(2, 1).col_join(M.inv() * sm.Matrix([1, 0]))
    assert sm.simplify(lin.B - expected_B) == sm.zeros(4, 1)


def test_table_lists_partials_and_forces():
    kp = KaneProblem(**planar_double_pendulum())
    text = kp.table()
    lines = text.strip().splitlines()
    assert len(lines) == 2 + 2
    assert lines[0].startswith("| r | u_r | v_r (p1) | v_r (p2) | F_r | F*_r |")
    assert "`l1*A.y`" in lines[2]
    latex = kp.table(latex=True)
    assert "$\\tilde F_r$" in latex and "$" in latex.splitlines()[2]


def test_simplify_option_gives_equal_equations():
    model = planar_double_pendulum()
    plain = KaneProblem(**model)
    simple = KaneProblem(**model, simplify=True, time_budget=30.0)
    diff = (simple.mass_matrix - plain.mass_matrix).applyfunc(sm.simplify)
    assert diff == sm.zeros(2, 2)
    assert sm.count_ops(simple.forcing) <= sm.count_ops(plain.forcing)


def test_mass_record_and_torque_loads():
    # A disc spun by a torque: I u' = T, built from a kanedyn Mass record.
    q, u = dynamicsymbols("q u")
    I, T = sm.symbols("I T")
    N = ReferenceFrame("N")
    D = N.orientnew("D", "Axis", (q, N.z))
    D.set_ang_vel(N, u * N.z)
    O = Point("O")
    O.set_vel(N, 0)
    disc = Mass("disc", 1, O, D, inertia(D, 1, 1, I))
    kp = KaneProblem(N, [q], [u], [q.diff() - u], bodies=[disc], loads=[(D, T * N.z)])
    assert kp.mass_matrix == sm.Matrix([[I]])
    assert kp.forcing == sm.Matrix([[T]])


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def _two_particles():
    q1, q2, u1, u2, u3 = dynamicsymbols("q1 q2 u1 u2 u3")
    m = sm.Symbol("m")
    N = ReferenceFrame("N")
    O = Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", q1 * N.x + q2 * N.y)
    P.set_vel(N, u1 * N.x + u2 * N.y)
    return dict(q=(q1, q2), u=(u1, u2, u3), N=N, P=P, m=m)


def test_kd_eqs_not_solvable_for_qdot():
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    kd = [q1.diff() + q2.diff() - u1, q1.diff() + q2.diff() - u2]
    with pytest.raises(ModelError, match=r"kd_eqs: .*cannot be solved for q'.*not independent"):
        KaneProblem(s["N"], [q1, q2], [u1, u2], kd, bodies=[Particle("p", s["P"], s["m"])])


def test_singular_speed_definition():
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    kd = [q1.diff() - u1 - u2, q2.diff() - u1 - u2]
    with pytest.raises(
        ModelError, match="kd_eqs: the definition of the generalized speeds is singular"
    ):
        KaneProblem(s["N"], [q1, q2], [u1, u2], kd, bodies=[Particle("p", s["P"], s["m"])])


def test_kd_eqs_not_linear():
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    kd = [q1.diff() ** 2 - u1, q2.diff() - u2]
    with pytest.raises(ModelError, match="kd_eqs .* not linear in q'"):
        KaneProblem(s["N"], [q1, q2], [u1, u2], kd)


def test_velocity_constraint_not_linear_in_speeds():
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    with pytest.raises(ModelError, match="velocity_constraints .* not linear in the speeds"):
        KaneProblem(
            s["N"], [q1, q2], [u1], [q1.diff() - u1, q2.diff() - u2],
            u_dep=[u2], velocity_constraints=[u2 - u1**2],
            bodies=[Particle("p", s["P"], s["m"])],
        )  # fmt: skip


def test_dependent_speed_solve_singular_for_every_configuration():
    s = _two_particles()
    (q1, q2), (u1, u2, u3) = s["q"], s["u"]
    with pytest.raises(
        ModelError, match="dependent-speed solve is singular for every configuration"
    ):
        KaneProblem(
            s["N"], [q1, q2], [u1], [q1.diff() - u1, q2.diff() - u2],
            u_dep=[u2, u3],
            velocity_constraints=[u2 - u1, 2 * u2 - 2 * u1],
            bodies=[Particle("p", s["P"], s["m"])],
        )  # fmt: skip


def test_dependent_speed_solve_singular_at_a_configuration():
    # u2 sin(q1) = u1 fixes u2 except where sin(q1) = 0.
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    kp = KaneProblem(
        s["N"], [q1, q2], [u1], [q1.diff() - u1, q2.diff() - u2],
        u_dep=[u2], velocity_constraints=[sm.sin(q1) * u2 - u1],
        bodies=[Particle("p", s["P"], s["m"])],
    )  # fmt: skip
    out = kp.rhs([0.4, 0.0], [0.2], {s["m"]: 1.0})
    assert np.all(np.isfinite(out))
    with pytest.raises(ModelError, match=r"dependent-speed solve is singular at q = \[0.0, 0.0\]"):
        kp.rhs([0.0, 0.0], [0.2], {s["m"]: 1.0})
    with pytest.raises(ModelError, match="dependent-speed solve is singular"):
        kp.dependent_speeds([0.0, 0.0], [0.2], {s["m"]: 1.0})
    with pytest.raises(
        ModelError, match="dependent-speed solve is singular at the operating point"
    ):
        linearize(kp, {q1: 0, q2: 0, u1: 0, s["m"]: 1})


def test_not_an_equilibrium():
    model = planar_double_pendulum()
    kp = KaneProblem(**model)
    q1, q2 = model["q_ind"]
    u1, u2 = model["u_ind"]
    hanging = {q1: -sm.pi / 2, q2: 0, u1: 0, u2: 0}
    lin = linearize(kp, hanging, check_equilibrium=True)
    assert lin.A.shape == (4, 4)
    with pytest.raises(ModelError, match="op_point: not an equilibrium"):
        linearize(kp, {q1: 0.3, q2: 0, u1: 0, u2: 0}, check_equilibrium=True)
    # Without the check, a linearization about a non-equilibrium point is allowed.
    linearize(kp, {q1: 0.3, q2: 0, u1: 0, u2: 0})


def test_operating_point_violating_a_constraint():
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    kp = KaneProblem(
        s["N"], [q1, q2], [u1], [q1.diff() - u1, q2.diff() - u2],
        u_dep=[u2], velocity_constraints=[u2 - 2 * u1],
        bodies=[Particle("p", s["P"], s["m"])],
    )  # fmt: skip
    with pytest.raises(ModelError, match="op_point: the speeds violate the velocity constraints"):
        linearize(kp, {q1: 0, q2: 0, u1: 1, u2: 1})
    with pytest.raises(ModelError, match="op_point: .* is not a coordinate, speed or parameter"):
        linearize(kp, {sm.Symbol("zeta"): 1})


def test_bad_loads_and_counts():
    s = _two_particles()
    (q1, q2), (u1, u2, _) = s["q"], s["u"]
    kd = [q1.diff() - u1, q2.diff() - u2]
    with pytest.raises(ModelError, match=r"loads\[0\]"):
        KaneProblem(s["N"], [q1, q2], [u1, u2], kd, loads=[(s["N"].x, s["P"])])
    with pytest.raises(ModelError, match="kd_eqs: 1 kinematic differential equations for 2"):
        KaneProblem(s["N"], [q1, q2], [u1, u2], kd[:1])
    with pytest.raises(ModelError, match="velocity_constraints: 0 constraints for 1 dependent"):
        KaneProblem(s["N"], [q1, q2], [u1], kd, u_dep=[u2])
