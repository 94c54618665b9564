"""kanedyn.symbolic.kane against its oracles.

* The numeric engine (kd.mass_matrix, kd.partials, kd.generalized_active_forces,
  kd.generalized_inertia_forces, kd.forward_dynamics) at random states, on chains, a
  free hub with panels, sliders, spherical chains, 3-DOF gimbals and random trees with
  every joint type.
* sympy.physics.mechanics KanesMethod on the same model (tests/sympy_oracle.py).
* Closed forms: the 2-link planar arm's mass matrix with symbolic parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.errors import ModelError
from kanedyn.spatial.rotation import EULER_SEQUENCES, euler_to_dcm, is_symmetric_sequence
from kanedyn.symbolic.kane import kane
from tests.sympy_oracle import build, random_state

TOL = 1e-12


def close(a, b, scale=None) -> None:
    """|a - b| <= TOL * max(1, scale), with scale the largest entry of b by default."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    s = max(1.0, float(np.abs(b).max(initial=0.0)) if scale is None else scale)
    err = float(np.abs(a - b).max(initial=0.0))
    assert err <= TOL * s, f"max error {err:.3e} > {TOL:g} * {s:.3e}"


def numeric_forcing(model: kd.Model, state: kd.State) -> np.ndarray:
    """Fr + Fr* at zero acceleration, from the numeric engine (no solve)."""
    zero = np.zeros(model.n)
    return kd.generalized_active_forces(model, state) + kd.generalized_inertia_forces(
        model, state, zero
    )


def check_numeric(model: kd.Model, rng: np.random.Generator, n_states: int = 3, eom=None):
    """lambdify(kane(model)) equals the numeric engine at random states."""
    eom = kane(model) if eom is None else eom
    f = eom.lambdify()
    f_acc = eom.lambdify_rhs()
    for _ in range(n_states):
        st = random_state(model, rng)
        M, F = f(st.q, st.u)
        M_num = kd.mass_matrix(model, st)
        F_num = numeric_forcing(model, st)
        close(M, M_num)
        assert np.array_equal(M, M.T)
        close(F, F_num, scale=np.abs(F_num).max() + np.abs(M_num).max())
        # a backward-stable check of the accelerations: the residual of M acc = F
        acc = kd.forward_dynamics(model, st)
        scale = np.abs(M_num).max() * np.abs(acc).max() + np.abs(F_num).max()
        close(M @ acc - F, np.zeros(model.n), scale=scale)
        if np.linalg.cond(M_num) < 1e6:
            acc_sym = f_acc(st.q, st.u)
            close(acc_sym, acc, scale=np.abs(acc).max() * np.linalg.cond(M_num))
    return eom


def lambdify_explicit(eom, exprs):
    """A numeric function of (q, u, u_dot) for explicit expressions of ``eom``."""
    return sm.lambdify(
        [list(eom.q), list(eom.u), list(eom.u_dot)], exprs, modules="numpy", cse=True
    )


def check_partials(model: kd.Model, rng: np.random.Generator, n_states: int = 2):
    """The explicit partials, remainders, Fr and Fr* equal the numeric engine's."""
    eom = kane(model)
    nb = model.nb
    names = ("Omega_u", "V_u", "V_s", "alpha_r", "a_r", "omega", "v", "r", "R_N_B")
    fns = {k: lambdify_explicit(eom, [sm.Matrix(m) for m in getattr(eom, k)]) for k in names}
    fr = lambdify_explicit(eom, eom.Fr)
    fr_star = lambdify_explicit(eom, eom.Fr_star)
    for _ in range(n_states):
        st = random_state(model, rng)
        par = kd.partials(model, st)
        ref = {
            "Omega_u": par.Omega_u,
            "V_u": par.V_u,
            "V_s": par.V_s,
            "alpha_r": par.alpha_r,
            "a_r": par.a_r,
            "omega": par.kin.omega,
            "v": par.kin.v,
            "r": par.kin.r,
            "R_N_B": par.kin.R_N_B,
        }
        ud = rng.uniform(-1.0, 1.0, model.n)
        for k in names:
            got = np.array(fns[k](st.q, st.u, ud), dtype=float).reshape(ref[k].shape)
            assert got.shape[0] == nb
            close(got, ref[k])
        close(np.ravel(fr(st.q, st.u, ud)), kd.generalized_active_forces(model, st))
        close(np.ravel(fr_star(st.q, st.u, ud)), kd.generalized_inertia_forces(model, st, ud))


# --------------------------------------------------------------------------- models
def rod(name: str, mass: float = 1.0, length: float = 1.0) -> kd.Body:
    return kd.Body(
        name,
        mass=mass,
        inertia=kd.inertia_tensor(0.01 * mass, mass * length**2 / 12, mass * length**2 / 12),
        com=(0.5 * length, 0.0, 0.0),
    )


def slider_hinge() -> kd.Model:
    """A cart on a 2-DOF slider (x then y, with springs) carrying a hinged rod."""
    cart = kd.Body("cart", mass=3.0, inertia=kd.inertia_tensor(0.2, 0.3, 0.4), com=(0.1, 0, 0))
    joints = [
        kd.Joint("slider", None, "cart", trn_dof=2, trn_seq="123", stiffness=(4.0, 2.0),
                 damping=(0.3, 0.1), inner_rotation=euler_to_dcm("123", (0.2, -0.1, 0.4))),
        kd.Joint.revolute("hinge", "cart", "rod", axis=3, inner_point=(0.2, 0.1, 0.0),
                          stiffness=1.5, damping=0.2),
    ]  # fmt: skip
    return kd.Model([cart, rod("rod")], joints, gravity=(0.0, -9.81, 0.0))


def spherical_chain(n: int, *, damping: float = 0.0) -> kd.Model:
    """n rods on spherical joints hanging from N, gravity along -z."""
    bodies, joints, inner = [], [], None
    for i in range(n):
        bodies.append(rod(f"link{i}", mass=1.0 + 0.2 * i, length=1.0 - 0.1 * i))
        point = (0.0, 0.0, 0.0) if inner is None else (1.0 - 0.1 * (i - 1), 0.0, 0.0)
        joints.append(kd.Joint.spherical(f"ball{i}", inner, f"link{i}", inner_point=point,
                                         damping=0.1 * damping))  # fmt: skip
        inner = f"link{i}"
    return kd.Model(bodies, joints, gravity=(0.0, 0.0, -9.81))


def gimbal3(seq: str) -> kd.Model:
    """A 3-DOF gimbal from N carrying a body that carries a 2-DOF gimbal."""
    a = kd.Body("a", mass=2.0, inertia=kd.inertia_tensor(0.3, 0.4, 0.5, 0.02, -0.01, 0.03),
                com=(0.2, -0.1, 0.3))  # fmt: skip
    b = kd.Body("b", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.2, 0.25), com=(0.0, 0.3, 0.0))
    joints = [
        kd.Joint.gimbal("g", None, "a", seq=seq, dof=3, inner_point=(0.1, 0.2, 0.3),
                        inner_rotation=euler_to_dcm("312", (0.3, 0.2, -0.5)),
                        outer_point=(0.05, 0.0, -0.1), stiffness=(0.5, 0.4, 0.3),
                        damping=(0.1, 0.0, 0.2)),
        kd.Joint.gimbal("h", "a", "b", seq=seq[::-1], dof=2, inner_point=(0.4, 0.0, 0.1),
                        outer_rotation=euler_to_dcm("123", (0.1, 0.7, -0.2)), stiffness=0.3),
    ]  # fmt: skip
    return kd.Model([a, b], joints, gravity=(0.1, -9.81, 0.3))


def random_inertia(rng: np.random.Generator) -> np.ndarray:
    """R diag(I1, I2, I3) Rᵀ with I3 strictly inside the triangle |I1 - I2| < I3 < I1 + I2."""
    I1, I2 = rng.uniform(0.5, 2.0, 2)
    I3 = rng.uniform(abs(I1 - I2) + 0.05, I1 + I2 - 0.05)
    R = euler_to_dcm("321", rng.uniform(-np.pi, np.pi, 3))
    return R @ np.diag([I1, I2, I3]) @ R.T


def random_tree(rng: np.random.Generator, nb: int) -> kd.Model:
    """A random tree of ``nb`` bodies using every joint type (gimbal 1-3 DOF with random
    sequences, spherical, slides with and without rotation, free and welded roots)."""
    kinds = ["revolute", "gimbal2", "gimbal3", "spherical", "prismatic", "slide_gimbal", "free"]
    bodies, joints = [], []
    for i in range(nb):
        name = f"b{i}"
        bodies.append(
            kd.Body(name, mass=rng.uniform(0.5, 3.0), inertia=random_inertia(rng),
                    com=rng.uniform(-0.5, 0.5, 3),
                    embedded_momentum=rng.uniform(-0.2, 0.2, 3) * (rng.random() < 0.3))
        )  # fmt: skip
        inner = None if i == 0 else f"b{rng.integers(0, i)}"
        kind = kinds[i % len(kinds)] if i else ("free" if rng.random() < 0.5 else "gimbal3")
        common = dict(
            inner_point=rng.uniform(-1.0, 1.0, 3),
            outer_point=rng.uniform(-0.5, 0.5, 3),
            inner_rotation=euler_to_dcm("123", rng.uniform(-np.pi, np.pi, 3)),
            outer_rotation=euler_to_dcm("231", rng.uniform(-np.pi, np.pi, 3)),
        )
        seq = str(rng.choice(EULER_SEQUENCES))
        if kind == "revolute":
            j = kd.Joint.revolute(f"j{i}", inner, name, axis=int(rng.integers(1, 4)),
                                  stiffness=rng.uniform(0, 2), damping=rng.uniform(0, 1), **common)  # fmt: skip
        elif kind in ("gimbal2", "gimbal3"):
            dof = int(kind[-1])
            j = kd.Joint.gimbal(f"j{i}", inner, name, seq=seq, dof=dof,
                                stiffness=rng.uniform(0, 2, dof), damping=rng.uniform(0, 1, dof), **common)  # fmt: skip
        elif kind == "spherical":
            j = kd.Joint.spherical(f"j{i}", inner, name, damping=rng.uniform(0, 1), **common)
        elif kind == "prismatic":
            j = kd.Joint.prismatic(f"j{i}", inner, name, axis=int(rng.integers(1, 4)),
                                   stiffness=rng.uniform(0, 2), damping=rng.uniform(0, 1), **common)  # fmt: skip
        elif kind == "slide_gimbal":
            j = kd.Joint(f"j{i}", inner, name, rot_dof=1, rot_seq=seq, trn_dof=2, trn_seq="312",
                         stiffness=rng.uniform(0, 2, 3), damping=rng.uniform(0, 1, 3), **common)  # fmt: skip
        else:
            j = kd.Joint.free(f"j{i}", name, inner=inner, **common)
        joints.append(j)
    if rng.random() < 0.5:  # a welded body
        bodies.append(kd.Body("welded", mass=1.0, inertia=random_inertia(rng)))
        joints.append(kd.Joint.weld("w", f"b{nb - 1}", "welded", inner_point=(0.3, 0.0, 0.1)))
    return kd.Model(bodies, joints, gravity=rng.uniform(-10.0, 10.0, 3))


def nonsingular_state(model: kd.Model, rng: np.random.Generator) -> kd.State:
    """Random state with symmetric-sequence 3-DOF gimbals kept away from θ2 = 0."""
    st = random_state(model, rng)
    q = st.q.copy()
    for j in model.joints:
        if j.rot_type == "gimbal" and j.rot_dof == 3 and is_symmetric_sequence(j.rot_seq):
            q[model.coordinates(j.name)[1]] = rng.uniform(0.5, 1.5)
    return kd.State(q, st.u)


# --------------------------------------------------------------------------- numeric engine
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_planar_chain_matches_numeric(n):
    check_numeric(kd.examples.chain(n), np.random.default_rng(n))


@pytest.mark.parametrize("n", [1, 3])
def test_spatial_chain_matches_numeric(n):
    check_numeric(kd.examples.chain(n, spatial=True), np.random.default_rng(10 + n))


def test_hub_with_panels_matches_numeric():
    check_numeric(kd.examples.hub_with_panels(), np.random.default_rng(3))


def test_explorer1_matches_numeric():
    """Embedded 2-DOF gimbals with springs on a free hub (triangle-violating hub)."""
    check_numeric(kd.examples.explorer1(), np.random.default_rng(4), n_states=2)


def test_slider_hinge_matches_numeric():
    check_numeric(slider_hinge(), np.random.default_rng(5))


@pytest.mark.parametrize("n", [1, 3])
def test_spherical_chain_matches_numeric(n):
    check_numeric(spherical_chain(n, damping=1.0), np.random.default_rng(6 + n))


@pytest.mark.parametrize("seq", ["123", "231", "313", "121", "321"])
def test_three_dof_gimbals_match_numeric(seq):
    model = gimbal3(seq)
    rng = np.random.default_rng(int(seq))
    eom = kane(model)
    f = eom.lambdify()
    for _ in range(3):
        st = nonsingular_state(model, rng)
        M, F = f(st.q, st.u)
        close(M, kd.mass_matrix(model, st))
        F_num = numeric_forcing(model, st)
        close(F, F_num, scale=np.abs(F_num).max() + np.abs(M).max())
        close(np.linalg.solve(M, F), kd.forward_dynamics(model, st))


@pytest.mark.parametrize("seed", [0, 1, 2, pytest.param(3, marks=pytest.mark.slow),
                                  pytest.param(4, marks=pytest.mark.slow),
                                  pytest.param(5, marks=pytest.mark.slow)])  # fmt: skip
def test_random_trees_match_numeric(seed):
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, nb=int(rng.integers(3, 7)))
    eom = kane(model)
    f = eom.lambdify()
    for _ in range(2):
        st = nonsingular_state(model, rng)
        M, F = f(st.q, st.u)
        M_num = kd.mass_matrix(model, st)
        F_num = numeric_forcing(model, st)
        close(M, M_num)
        close(F, F_num, scale=np.abs(F_num).max() + np.abs(M_num).max())


@pytest.mark.parametrize(
    "model",
    [kd.examples.chain(3), kd.examples.chain(2, spatial=True), kd.examples.hub_with_panels()]
    + [slider_hinge(), spherical_chain(2, damping=1.0)]
    + [pytest.param(gimbal3("231"), marks=pytest.mark.slow)],
    ids=["planar3", "spatial2", "hub", "slider", "spherical2", "gimbal231"],
)
def test_explicit_partials_and_forces_match_numeric(model):
    """Ω_u, V_u, V_s, α_r, a_r, ω, v, r, R_N_B, Fr and Fr* stage by stage."""
    check_partials(model, np.random.default_rng(7))


@pytest.mark.parametrize("seed", range(3))
def test_random_tree_stages_match_numeric(seed):
    """lambdify_stages (compact form) against kd.partials on random trees."""
    rng = np.random.default_rng(20 + seed)
    model = random_tree(rng, nb=5)
    g = kane(model).lambdify_stages()
    for _ in range(2):
        st = random_state(model, rng)
        par = kd.partials(model, st)
        got = g(st.q, st.u)
        ref = {"Omega_u": par.Omega_u, "V_u": par.V_u, "V_s": par.V_s, "alpha_r": par.alpha_r,
               "a_r": par.a_r, "omega": par.kin.omega, "v": par.kin.v, "r": par.kin.r,
               "R_N_B": par.kin.R_N_B}  # fmt: skip
        assert set(got) == set(ref)
        for k, value in ref.items():
            assert got[k].shape == value.shape, k
            close(got[k], value)


def test_lambdify_backends_agree():
    model = gimbal3("313")
    eom = kane(model)
    st = nonsingular_state(model, np.random.default_rng(21))
    M1, F1 = eom.lambdify()(st.q, st.u)
    M2, F2 = eom.lambdify(backend="sympy")(st.q, st.u)
    close(M1, M2)
    close(F1, F2)
    with pytest.raises(ModelError, match="backend"):
        eom.lambdify(backend="c")


def test_kinematic_equations():
    """Angle and slide rates are speeds; quaternion rates are ½ q ⊗ [ω, 0]."""
    model = random_tree(np.random.default_rng(9), nb=5)
    eom = kane(model)
    f = sm.lambdify([list(eom.q), list(eom.u)], eom.kinematic_equations, modules="numpy")
    st = random_state(model, np.random.default_rng(10))
    qdot = np.ravel(f(st.q, st.u))
    lay = model.layout
    close(qdot[lay.angle_q], st.u[lay.angle_u])
    for qq, uu in zip(lay.quat_q, lay.quat_u, strict=True):
        close(qdot[qq], kd.rotation.quat_rate(st.q[qq], st.u[uu]))
    assert eom.kinematic_equations.shape == (model.nq, 1)


def test_fr_plus_fr_star_vanishes_at_the_solution():
    model = slider_hinge()
    eom = kane(model)
    res = lambdify_explicit(eom, eom.Fr + eom.Fr_star)
    st = random_state(model, np.random.default_rng(11))
    acc = eom.rhs(st.q, st.u)
    close(np.ravel(res(st.q, st.u, acc)), np.zeros(model.n))


def test_symbol_names_and_order():
    model = kd.Model(
        [rod("a"), rod("b"), rod("c")],
        [kd.Joint.free("root", "a"), kd.Joint.revolute("hinge", "a", "b"),
         kd.Joint.prismatic("rail", "a", "c", axis=2)],
    )  # fmt: skip
    eom = kane(model)
    assert [str(s) for s in eom.q] == [
        "q_root_x", "q_root_y", "q_root_z", "q_root_w", "q_hinge_0",
        "d_root_0", "d_root_1", "d_root_2", "d_rail_0",
    ]  # fmt: skip
    assert [str(s) for s in eom.u] == [
        "u_root_0", "u_root_1", "u_root_2", "u_hinge_0", "s_root_0", "s_root_1", "s_root_2",
        "s_rail_0",
    ]  # fmt: skip
    assert str(eom.u_dot[3]) == "udot_hinge_0"
    assert str(eom.u_dot[-1]) == "sdot_rail_0"
    for i in range(model.nb):
        assert eom.Omega_u[i].shape == (3, model.nu)
        assert eom.V_u[i].shape == (3, model.nu)
        assert eom.V_s[i].shape == (3, model.ns)
    assert eom.mass_matrix.shape == (model.n, model.n)
    assert eom.forcing.shape == (model.n, 1)


# --------------------------------------------------------------------------- sympy oracle
@pytest.mark.parametrize(
    "model",
    [kd.examples.chain(3), kd.examples.chain(2, spatial=True), slider_hinge()]
    + [kd.examples.hub_with_panels()],
    ids=["planar3", "spatial2", "slider", "hub"],
)
def test_matches_sympy_kanes_method(model):
    rhs, _, _ = build(model)
    f = kane(model).lambdify()
    rng = np.random.default_rng(12)
    for _ in range(3):
        st = random_state(model, rng)
        M_ref, F_ref = rhs(st.q, st.u)
        M, F = f(st.q, st.u)
        close(M, M_ref)
        close(F, F_ref, scale=np.abs(F_ref).max() + np.abs(M_ref).max())


@pytest.mark.slow
def test_spherical_chain_matches_sympy_kanes_method():
    model = spherical_chain(2)
    rhs, _, _ = build(model)
    f = kane(model).lambdify()
    st = random_state(model, np.random.default_rng(13))
    M_ref, F_ref = rhs(st.q, st.u)
    M, F = f(st.q, st.u)
    close(M, M_ref)
    close(F, F_ref, scale=np.abs(F_ref).max() + np.abs(M_ref).max())


# --------------------------------------------------------------------------- symbolic parameters
def two_link_arm():
    """Two rods on z hinges, rods along x: symbols m, l, lc, I, g."""
    m1, m2, l1, lc1, lc2, I1, I2, g = sm.symbols("m1 m2 l1 lc1 lc2 I1 I2 g", positive=True)
    bodies = [
        kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(lc1, 0, 0)),
        kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(lc2, 0, 0)),
    ]
    joints = [
        kd.Joint.revolute("shoulder", None, "link1", axis=3),
        kd.Joint.revolute("elbow", "link1", "link2", axis=3, inner_point=(l1, 0, 0)),
    ]
    model = kd.Model(bodies, joints, gravity=(0, -g, 0))
    return model, (m1, m2, l1, lc1, lc2, I1, I2, g)


def test_two_link_arm_mass_matrix_closed_form():
    model, (m1, m2, l1, lc1, lc2, I1, I2, g) = two_link_arm()
    assert model.is_symbolic
    eom = kane(model)
    th2 = eom.q[1]
    H11 = m1 * lc1**2 + I1 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * sm.cos(th2)) + I2
    H12 = m2 * (lc2**2 + l1 * lc2 * sm.cos(th2)) + I2
    H22 = m2 * lc2**2 + I2
    expected = sm.Matrix([[H11, H12], [H12, H22]])
    assert sm.simplify(eom.mass_matrix - expected) == sm.zeros(2, 2)
    # gravity torques: -g (m1 lc1 + m2 l1) cos θ1 - g m2 lc2 cos(θ1 + θ2), at rest
    th1 = eom.q[0]
    at_rest = {s: 0 for s in eom.u}
    G1 = -g * (m1 * lc1 + m2 * l1) * sm.cos(th1) - g * m2 * lc2 * sm.cos(th1 + th2)
    G2 = -g * m2 * lc2 * sm.cos(th1 + th2)
    assert sm.simplify(eom.forcing.subs(at_rest) - sm.Matrix([G1, G2])) == sm.zeros(2, 1)
    assert set(eom.parameters) == {m1, m2, l1, lc1, lc2, I1, I2, g}


def test_symbolic_parameters_lambdify_equals_numeric_on_subs():
    model, syms = two_link_arm()
    values = dict(zip(syms, (1.3, 0.7, 0.9, 0.4, 0.35, 0.11, 0.05, 9.81), strict=True))
    eom = kane(model)
    f = eom.lambdify(params=list(syms))
    f_default = eom.lambdify()
    numeric = model.subs(values)
    rng = np.random.default_rng(14)
    for _ in range(3):
        st = random_state(numeric, rng)
        M, F = f(st.q, st.u, [values[s] for s in syms])
        close(M, kd.mass_matrix(numeric, st))
        close(F, numeric_forcing(numeric, st))
        M2, F2 = f_default(st.q, st.u, values)  # a mapping works too
        close(M2, M)
        close(F2, F)
        close(eom.rhs(st.q, st.u, values), kd.forward_dynamics(numeric, st))


def test_symbolic_spatial_model_with_springs_equals_numeric_on_subs():
    """Symbolic points, rotations-free inertias, stiffness and damping on a spatial tree."""
    k, c, a, m, g = sm.symbols("k c a m g", positive=True)
    bodies = [
        kd.Body("hub", mass=5 * m, inertia=sm.diag(2 * m, 3 * m, 4 * m), com=(0, 0, a / 2)),
        kd.Body(
            "arm", mass=m, inertia=sm.Matrix([[m, 0, m / 10], [0, 2 * m, 0], [m / 10, 0, 2 * m]])
        ),
    ]
    joints = [
        kd.Joint.free("root", "hub", damping=(0, 0, 0, c, c, c)),
        kd.Joint.gimbal("g", "hub", "arm", seq="231", dof=2, inner_point=(a, 0, a),
                        outer_point=(-a / 2, 0, 0), stiffness=(k, 2 * k), damping=c),
    ]  # fmt: skip
    model = kd.Model(bodies, joints, gravity=(0, 0, -g))
    values = {k: 3.0, c: 0.4, a: 0.8, m: 1.7, g: 9.81}
    check_numeric(model.subs(values), np.random.default_rng(15), n_states=1)
    eom = kane(model)
    f = eom.lambdify()
    numeric = model.subs(values)
    st = random_state(numeric, np.random.default_rng(16))
    M, F = f(st.q, st.u, values)
    close(M, kd.mass_matrix(numeric, st))
    close(F, numeric_forcing(numeric, st))


def test_lambdify_reports_missing_parameters():
    model, syms = two_link_arm()
    eom = kane(model)
    with pytest.raises(ModelError, match="missing"):
        eom.lambdify(params=list(syms[:3]))
    f = eom.lambdify()
    with pytest.raises(ModelError, match="parameter"):
        f([0.0, 0.0], [0.0, 0.0], [1.0, 2.0])


# --------------------------------------------------------------------------- teaching view
def test_table_markdown_and_latex():
    model = slider_hinge()
    eom = kane(model)
    md = eom.table()
    for s in eom.u:
        assert str(s) in md
    assert md.startswith("| r |")
    assert "cart" in md and "rod" in md
    assert md.count("\n") == 2 + model.n * model.nb
    tex = eom.table("latex")
    assert tex.startswith("\\begin{array}") and tex.rstrip().endswith("\\end{array}")
    assert sm.latex(eom.u[0]) in tex
    assert eom._repr_latex_().startswith("$$")
    assert "| r |" in eom._repr_markdown_()
    with pytest.raises(ModelError):
        eom.table("html")


def test_table_shows_placeholders_for_large_cells():
    """Explicit Fr* of a free hub is huge: the table names it instead, and stays quick."""
    eom = kane(kd.examples.hub_with_panels())
    md = eom.table()
    assert "nodes: eom.Fr_star[0])" in md
    assert "`u_hinge_left_0`" in md
    assert "\\mathtt{eom.Fr\\_star[0]}" in eom.table("latex")
    small = kane(kd.examples.double_pendulum())
    assert "nodes:" not in small.table(max_size=None)
    assert "nodes:" in small.table(max_size=1)
    # the size estimate is the tree size of the explicit form, built without it
    x = small.compact.mass_matrix[0, 0]
    assert small.explicit_size(x) >= sm.count_ops(small.explicit(x))


def test_simplify_and_time_budget():
    model, _ = two_link_arm()
    eom = kane(model, simplify=True)
    assert "simplified all" in eom.simplify_report
    assert eom.mass_matrix[1, 1] == sm.simplify(kane(model).mass_matrix[1, 1])
    rushed = kane(model, simplify=True, time_budget=0.0)
    assert "exceeded" in rushed.simplify_report
    assert kane(model).simplify_report == ""


def test_spherical_spring_is_refused():
    model = kd.Model([rod("a")], [kd.Joint.spherical("ball", None, "a", stiffness=1.0)])
    with pytest.raises(ModelError, match="spherical-joint springs"):
        kane(model)


# --------------------------------------------------------------------------- growth
def test_operation_count_grows_polynomially():
    """ops(n=8) / ops(n=4) for planar chains stays below 2**3.

    The mass matrix is a sum over bodies of column dot products: body i contributes
    i(i+1)/2 entries, so the count is a cubic in n (Σ i² ~ n³/3) plus lower-order terms
    (kinematics and forcing, O(n²)). A cubic with positive lower-order terms has
    ops(2n)/ops(n) < 8, while any growth like 2**n (the expansion of nested rotations)
    gives ops(8)/ops(4) >= 16.
    """
    ops = {n: kane(kd.examples.chain(n)).compact.count_ops() for n in (4, 8)}
    assert ops[8] / ops[4] < 8.0
