"""Lagrange path (seed 000, eqs. 2-1 to 2-11): the seed's 2-DOF arm in closed form, and
agreement with the numeric Kane engine and the symbolic Kane path on chains."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.spatial.charts import axis_rotations, euler_axes
from kanedyn.symbolic.arithmetic import SYMPY
from kanedyn.symbolic.compare import Equations, compare
from kanedyn.symbolic.lagrange import generalized_symbols, lagrange

m1, m2, l1, lc1, lc2, I1, I2, g = sm.symbols("m1 m2 l1 lc1 lc2 I1 I2 g", positive=True)


def seed_arm() -> kd.Model:
    """The seed's 2-DOF planar arm: hinges about z, rods along x, gravity along -y.

    Angle conventions: the seed's θ1 is link 1's angle from x0 and θ2 is link 2's angle
    relative to link 1, both counter-clockwise about z0. kanedyn's revolute joints about
    axis 3 measure the same angles (active rotations; joint j2 sits at (l1, 0, 0) in link
    1 and rotates link 2 relative to link 1), so θ1 = q_j1_0 and θ2 = q_j2_0.
    """
    b1 = kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(lc1, 0, 0))
    b2 = kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(lc2, 0, 0))
    j1 = kd.Joint.revolute("j1", None, "link1", axis=3)
    j2 = kd.Joint.revolute("j2", "link1", "link2", axis=3, inner_point=(l1, 0, 0))
    return kd.Model([b1, b2], [j1, j2], gravity=(0, -g, 0))


def is_zero(expr) -> bool:
    """sympy.simplify(expr) == 0, after a cheap expansion that usually settles it."""
    expanded = sm.expand(sm.expand_trig(expr))
    return expanded == 0 or sm.simplify(sm.trigsimp(expanded)) == 0


def test_seed_two_link_arm_closed_forms():
    lag = lagrange(seed_arm())
    t1, t2 = lag.q
    # inertia matrix (seed: "Substituting the linear and angular Jacobians into (2-7)")
    H11 = m1 * lc1**2 + I1 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * sm.cos(t2)) + I2
    H12 = m2 * (lc2**2 + l1 * lc2 * sm.cos(t2)) + I2
    H22 = m2 * lc2**2 + I2
    assert is_zero(lag.H[0, 0] - H11)
    assert is_zero(lag.H[0, 1] - H12)
    assert is_zero(lag.H[1, 0] - H12)
    assert is_zero(lag.H[1, 1] - H22)
    # centrifugal / Coriolis coefficients, indices 1-based in the seed
    h = lag.christoffel
    s = m2 * l1 * lc2 * sm.sin(t2)
    assert is_zero(h[0, 0, 0])  # h111 = 0
    assert is_zero(h[0, 0, 1] + h[0, 1, 0] + 2 * s)  # h112 + h121 = -2 m2 l1 lc2 sin θ2
    assert is_zero(h[0, 1, 1] + s)  # h122 = -m2 l1 lc2 sin θ2
    assert is_zero(h[1, 0, 0] - s)  # h211 = m2 l1 lc2 sin θ2
    assert is_zero(h[1, 0, 1] + h[1, 1, 0])  # h212 + h221 = 0
    assert is_zero(h[1, 1, 1])  # h222 = 0
    # gravity terms G_i = Σ_j m_j gᵀ J_Li^(j) with the seed's g pointing up (+y): U = Σ m g y
    G1 = m1 * g * lc1 * sm.cos(t1) + m2 * g * (l1 * sm.cos(t1) + lc2 * sm.cos(t1 + t2))
    G2 = m2 * g * lc2 * sm.cos(t1 + t2)
    assert is_zero(lag.G[0] - G1)
    assert is_zero(lag.G[1] - G2)
    # equations (2-11): H θ̈ + h θ̇θ̇ + G = τ (no springs: Q = 0)
    assert lag.Q == sm.zeros(2, 1)
    u1, u2 = lag.u
    C = sm.Matrix([-s * (2 * u1 * u2 + u2**2), s * u1**2])
    assert all(is_zero(x) for x in lag.forcing - (-C - sm.Matrix([G1, G2])))


def test_jacobians_match_the_seed_example():
    lag = lagrange(seed_arm())
    t1, t2 = lag.q
    JL2 = sm.Matrix(
        [
            [-l1 * sm.sin(t1) - lc2 * sm.sin(t1 + t2), -lc2 * sm.sin(t1 + t2)],
            [l1 * sm.cos(t1) + lc2 * sm.cos(t1 + t2), lc2 * sm.cos(t1 + t2)],
            [0, 0],
        ]
    )
    assert (lag.J_L[1] - JL2).applyfunc(sm.simplify) == sm.zeros(3, 2)
    assert lag.J_A[0] == sm.Matrix([[0, 0], [0, 0], [1, 0]])
    assert lag.J_A[1] == sm.Matrix([[0, 0], [0, 0], [1, 1]])


def test_angular_velocity_from_rotation_rate():
    """J_A q̇ is the ω of skew(ω) = Ṙ Rᵀ, on a spatial chain with a 3-DOF gimbal."""
    model = sym_chain("gs", spatial=True)
    lag = lagrange(model)
    for i, R in enumerate(lag.R):
        Rdot = sum((R.diff(qr) * ur for qr, ur in zip(lag.q, lag.u, strict=True)), sm.zeros(3, 3))
        W = Rdot * R.T
        omega = lag.J_A[i] * lag.u
        rng = np.random.default_rng(i)
        vals = dict(zip([*lag.q, *lag.u], rng.uniform(-2, 2, 2 * len(lag.q)), strict=True))
        Wn = np.array(W.subs(vals), dtype=float)
        wn = np.array(omega.subs(vals), dtype=float).ravel()
        assert np.allclose(Wn, kd.skew(wn), atol=1e-12)


def test_elementary_rotation_matches_numeric():
    """The elementary rotations Lagrange multiplies (the joint model's, on sympy)."""
    a = sm.Symbol("a")
    for axis in (1, 2, 3):
        E = euler_axes(SYMPY, np.eye(3)[[axis - 1] * 3])
        Rs = axis_rotations(SYMPY, E, np.array([a, 0, 0], dtype=object), 1)[0]
        R = np.array([[e.subs(a, 0.7) for e in row] for row in Rs], dtype=float)
        assert np.allclose(R, kd.rotation.elementary_rotation(axis, 0.7))


def test_symbol_names_line_up_with_the_numeric_order():
    model = sym_chain("hsg", spatial=True)
    q, u = generalized_symbols(model)
    assert [str(x) for x in q] == ["q_j0_0", "q_j2_0", "q_j2_1", "d_j1_0"]
    assert [str(x) for x in u] == ["u_j0_0", "u_j2_0", "u_j2_1", "s_j1_0"]
    assert list(model.coordinates("j1")) == [3]


# ---------------------------------------------------------------------- chains
def sym_chain(kinds: str, spatial: bool = False) -> kd.Model:
    """A chain with sympy parameters: h = hinge, s = slide, g = 2-DOF gimbal (231),
    G = 3-DOF gimbal (313). Springs and dampers on every DOF, gravity along -y."""
    bodies, joints = [], []
    for i, kind in enumerate(kinds):
        m, lc, Ixx, Iyy, Izz, k, c = sm.symbols(
            f"m{i} lc{i} Ixx{i} Iyy{i} Izz{i} k{i} c{i}", positive=True
        )
        bodies.append(kd.Body(f"b{i}", mass=m, inertia=sm.diag(Ixx, Iyy, Izz), com=(lc, 0, 0)))
        inner = None if i == 0 else f"b{i - 1}"
        kw = dict(
            inner_point=(0, 0, 0) if i == 0 else (sm.Symbol(f"l{i - 1}", positive=True), 0, 0),
            stiffness=k,
            damping=c,
        )
        if kind == "h":
            axis = 1 + (i + 2) % 3 if spatial else 3
            joints.append(kd.Joint.revolute(f"j{i}", inner, f"b{i}", axis=axis, **kw))
        elif kind == "s":
            joints.append(kd.Joint.prismatic(f"j{i}", inner, f"b{i}", axis=1 + i % 2, **kw))
        elif kind == "g":
            joints.append(kd.Joint.gimbal(f"j{i}", inner, f"b{i}", seq="231", dof=2, **kw))
        elif kind == "G":
            joints.append(kd.Joint.gimbal(f"j{i}", inner, f"b{i}", seq="313", dof=3, **kw))
    return kd.Model(bodies, joints, gravity=(0, -sm.Symbol("g", positive=True), 0))


def values_for(model: kd.Model, rng: np.random.Generator) -> dict:
    lag_params = set()
    for b in model.bodies:
        for x in (b.mass, *np.ravel(b.inertia), *b.com):
            lag_params |= getattr(x, "free_symbols", set())
    for j in model.joints:
        for x in (*j.inner_point, *j.stiffness, *j.damping):
            lag_params |= getattr(x, "free_symbols", set())
    vals = {s: rng.uniform(0.5, 2.0) for s in lag_params}
    vals[sm.Symbol("g", positive=True)] = 9.81
    # principal moments that satisfy the triangle inequality
    for b in model.bodies:
        Ixx, Iyy, Izz = (b.inertia[a, a] for a in range(3))
        base = rng.uniform(1.0, 2.0)
        vals.update({Ixx: base, Iyy: base * 1.1, Izz: base * 1.2})
    return vals


def check_against_engine(kinds: str, spatial: bool, seed: int, n_states: int = 4):
    rng = np.random.default_rng(seed)
    model = sym_chain(kinds, spatial)
    lag = lagrange(model)
    vals = values_for(model, rng)
    num = model.subs(vals)
    params = lag.parameters
    f = sm.lambdify(
        [list(lag.q), list(lag.u), list(params)], [lag.mass_matrix, lag.forcing], cse=True
    )
    p = [vals[s] for s in params]
    for _ in range(n_states):
        state = kd.State(rng.uniform(-2, 2, num.nq), rng.uniform(-2, 2, num.n))
        M = kd.mass_matrix(num, state)
        forcing = M @ kd.forward_dynamics(num, state)
        H, F = f(state.q, state.u, p)
        assert np.allclose(H, M, rtol=0, atol=1e-12 * np.abs(M).max())
        assert np.allclose(np.ravel(F), forcing, rtol=0, atol=1e-12 * max(1, np.abs(forcing).max()))


@pytest.mark.parametrize(
    ("kinds", "spatial", "seed"),
    [("hs", False, 0), ("hsh", False, 1), ("shhs", False, 2), ("hg", True, 4)],
)
def test_lagrange_matches_numeric_kane(kinds, spatial, seed):
    check_against_engine(kinds, spatial, seed)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kinds", "spatial", "seed"),
    [("hshsh", False, 3), ("hGs", True, 5), ("hshsh", True, 6), ("sgh", True, 7)],
)
def test_lagrange_matches_numeric_kane_long_chains(kinds, spatial, seed):
    check_against_engine(kinds, spatial, seed)


@pytest.mark.parametrize("kinds", ["hs", "hsh", "sh"])
def test_lagrange_equals_symbolic_kane(kinds):
    from kanedyn.symbolic.kane import kane

    model = sym_chain(kinds)
    report = compare(kane(model), lagrange(model), time_budget=30.0)
    assert report.equivalent and report.proven and report.level == "identical", str(report)


def test_lagrange_equals_independent_sympy_mechanics_derivation():
    """Symbolic equivalence against sympy.physics.mechanics' Kane for a hinge-slide chain."""
    me = pytest.importorskip("sympy.physics.mechanics")
    model = sym_chain("hs")
    lag = lagrange(model)
    (q0, d1), (u0, s1) = lag.q, lag.u
    m0, m1_, lc0, lc1_, Izz0, l0, k0, c0, k1, c1, gg = sm.symbols(
        "m0 m1 lc0 lc1 Izz0 l0 k0 c0 k1 c1 g", positive=True
    )
    Izz1 = sm.Symbol("Izz1", positive=True)
    qf, df, uf, sf = me.dynamicsymbols("qf df uf sf")
    N = me.ReferenceFrame("N")
    B0 = N.orientnew("B0", "Axis", (qf, N.z))
    O = me.Point("O")
    O.set_vel(N, 0)
    B0.set_ang_vel(N, uf * N.z)
    c0p = O.locatenew("c0", lc0 * B0.x)
    c0p.v2pt_theory(O, N, B0)
    P0 = O.locatenew("P0", l0 * B0.x)  # the slide's base point, fixed in body 0
    P0.v2pt_theory(O, N, B0)
    G1 = P0.locatenew("G1", df * B0.y)  # slide along axis 2 (i = 1: axis 1 + 1 % 2)
    G1.set_vel(N, G1.pos_from(O).dt(N).subs(df.diff(), sf).subs(qf.diff(), uf))
    c1p = G1.locatenew("c1", lc1_ * B0.x)
    c1p.v2pt_theory(G1, N, B0)
    bodies = [
        me.RigidBody("b0", c0p, B0, m0, (me.inertia(B0, 0, 0, Izz0), c0p)),
        me.RigidBody("b1", c1p, B0, m1_, (me.inertia(B0, 0, 0, Izz1), c1p)),
    ]
    loads = [
        (c0p, -m0 * gg * N.y),
        (c1p, -m1_ * gg * N.y),
        (B0, (-k0 * qf - c0 * uf) * N.z),
        (G1, (-k1 * df - c1 * sf) * B0.y),
        (P0, (k1 * df + c1 * sf) * B0.y),
    ]
    km = me.KanesMethod(N, [qf, df], [uf, sf], kd_eqs=[qf.diff() - uf, df.diff() - sf])
    km.kanes_equations(bodies, loads)
    to = {qf: q0, df: d1, uf: u0, sf: s1}
    ref = Equations(lag.q, lag.u, km.mass_matrix.xreplace(to), km.forcing.xreplace(to))
    report = compare(ref, lag, time_budget=30.0)
    assert report.equivalent and report.proven, str(report)


def test_spherical_joint_chart_and_its_limits():
    """Spherical joints take an Euler chart (tests/symbolic/test_lagrange_charts.py checks
    the equations); a bad chart and a spherical spring or damper are refused by name."""
    hub = kd.Body("hub", mass=1.0, inertia=np.eye(3))
    ball = kd.Body("ball", mass=1.0, inertia=np.eye(3))
    model = kd.Model(
        [hub, ball], [kd.Joint.free("root", "hub"), kd.Joint.revolute("h", "hub", "ball")]
    )
    q, u = generalized_symbols(model)
    assert [str(x) for x in u[:3]] == ["qd_root_0", "qd_root_1", "qd_root_2"]
    with pytest.raises(kd.ModelError, match="chart of joint 'root'"):
        lagrange(model, chart="32")
    damped = kd.Model(
        [hub, ball],
        [
            kd.Joint.weld("root", None, "hub"),
            kd.Joint.spherical("ball", "hub", "ball", damping=0.1),
        ],
    )
    with pytest.raises(kd.ModelError, match="spherical joint 'ball' has a spring or damper"):
        lagrange(damped)


def test_weld_root_and_joint_torques():
    tau = sm.Symbol("tau")
    b0 = kd.Body("base", mass=1.0, inertia=np.eye(3))
    b1 = kd.Body("arm", mass=2.0, inertia=np.eye(3), com=(0.5, 0, 0))
    model = kd.Model(
        [b0, b1],
        [
            kd.Joint.weld("w", None, "base", inner_point=(0, 0, 1)),
            kd.Joint.revolute("h", "base", "arm"),
        ],
        gravity=(0, 0, -9.81),
    )
    lag = lagrange(model, joint_torques={"h": [tau]}, simplify=True)
    assert lag.q.shape == (1, 1)
    assert sm.simplify(lag.H[0] - (1 + 2 * sm.Rational(1, 4))) == 0
    assert sm.simplify(lag.forcing[0] - tau) == 0


def test_embedded_momentum_and_body_loads_match_engine():
    rng = np.random.default_rng(11)
    hub = kd.Body(
        "hub",
        mass=2.0,
        inertia=kd.inertia_tensor(1.0, 1.2, 1.5),
        embedded_momentum=(0.3, -0.2, 0.5),
    )
    arm = kd.Body("arm", mass=1.0, inertia=kd.inertia_tensor(0.2, 0.3, 0.4), com=(0.4, 0.1, 0))
    model = kd.Model(
        [hub, arm],
        [
            kd.Joint.gimbal("g", None, "hub", seq="123", dof=2, stiffness=(1.0, 2.0), damping=0.1),
            kd.Joint.revolute("h", "hub", "arm", axis=2, inner_point=(0.5, 0, 0)),
        ],
        gravity=(0, 0, -9.81),
    )
    F, T = (0.5, -1.0, 2.0), (0.1, 0.2, -0.3)
    lag = lagrange(model, body_forces={"arm": F}, body_torques={"arm": T})
    f = sm.lambdify([list(lag.q), list(lag.u)], [lag.mass_matrix, lag.forcing])
    loads = [kd.Force("arm", F), kd.Torque("arm", T)]
    for _ in range(3):
        state = kd.State(rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3))
        M = kd.mass_matrix(model, state)
        H, Fl = f(state.q, state.u)
        assert np.allclose(H, M, atol=1e-12)
        assert np.allclose(np.ravel(Fl), M @ kd.forward_dynamics(model, state, loads), atol=1e-12)
