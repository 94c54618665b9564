"""Closed kinematic loops: kd.Loop, the constrained Kane equations, assembly, projection,
loop forces and the examples, against independent oracles.

Oracles: finite differences of Φ (velocity and acceleration forms); an absolute-coordinate
Newton-Euler formulation with multipliers solved as an index-1 DAE (tests/loop_oracles.py);
sympy.physics.mechanics' KanesMethod with configuration and velocity constraints (four-bar);
a free-body moment balance of the four-bar's rocker; energy conservation.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import loops
from tests.loop_oracles import SpatialRevoluteDAE
from tests.test_mbs_benchmarks import n_four_bar


def slider_crank_with_prismatic_loop():
    """The planar slider-crank cut at the slide instead of the pin: the slider hangs on
    the rod by a hinge and a prismatic loop from N holds it on its line."""
    ex = kd.examples.slider_crank()
    pin = ex.loops[0]
    joints = [ex.joint("crank"), ex.joint("rod"),
              kd.Joint.revolute("pin", "rod", "slider", axis=3, inner_point=pin.inner_point,
                                inner_rotation=pin.inner_rotation,
                                outer_rotation=pin.outer_rotation)]  # fmt: skip
    slide = kd.Loop.prismatic("slide", None, "slider", axis=1,
                              inner_point=ex.joint("slide").inner_point)  # fmt: skip
    return kd.Model(ex.bodies, joints, gravity=ex.gravity, loops=[slide], planar=True)


EXAMPLES = {
    "four_bar": kd.examples.four_bar,
    "four_bar_spatial_hinge": lambda: kd.examples.four_bar(planar=False),
    "slider_crank": kd.examples.slider_crank,
    "slider_crank_spatial": lambda: kd.examples.slider_crank(spatial=True),
    "slider_crank_prismatic_loop": slider_crank_with_prismatic_loop,
    "parallel_3rrr": lambda: kd.examples.parallel_3rrr(gravity=9.81),
    "bricard": kd.examples.bricard,
}


def random_assembled(model, seed, spread=0.3):
    """An assembled state near q = 0 with random rates of the first joint."""
    rng = np.random.default_rng(seed)
    first = model.joints[0]
    s = model.initial_state()
    s = model.set_joint(s, first.name, angles=rng.uniform(-spread, spread, first.rot_dof),
                        rates=rng.normal(size=first.rot_dof))  # fmt: skip
    s = kd.State(s.q, np.where(np.isin(np.arange(model.n), model.speeds(first.name)), s.u,
                               rng.normal(size=model.n)))  # fmt: skip
    return model.assemble(s, fix=[first.name])


# --------------------------------------------------------------------------- records
def test_loop_mirrors_joint_constructors():
    for name in ("revolute", "prismatic", "spherical", "weld", "gimbal"):
        j = getattr(kd.Joint, name)("a", "b1", "b2")
        lp = getattr(kd.Loop, name)("a", "b1", "b2")
        assert isinstance(lp, kd.Loop)
        assert (lp.rot_type, lp.rot_dof, lp.rot_seq, lp.trn_dof, lp.trn_seq) == (
            j.rot_type, j.rot_dof, j.rot_seq, j.trn_dof, j.trn_seq)  # fmt: skip
        assert lp.n_constraints == 6 - j.ndof
    universal = kd.Loop("u", "b1", None, rot_type="gimbal", rot_dof=2, rot_seq="231")
    assert universal.outer is None and universal.n_constraints == 4


def test_loop_errors_name_the_loop():
    with pytest.raises(kd.ModelError, match="loop 'x'.*stiffness"):
        kd.Loop.revolute("x", "a", "b", stiffness=1.0)
    with pytest.raises(kd.ModelError, match="loop 'x'.*both N"):
        kd.Loop.revolute("x", None, None)
    m = kd.examples.four_bar()
    bad = kd.Loop.revolute("close2", "coupler", "nosuch")
    with pytest.raises(kd.ModelError, match="loop 'close2': unknown outer body 'nosuch'"):
        kd.Model(m.bodies, m.joints, loops=[bad])
    with pytest.raises(kd.ModelError, match="duplicate joint or loop name 'crank'"):
        kd.Model(m.bodies, m.joints, loops=[kd.Loop.revolute("crank", "coupler", "rocker")])
    with pytest.raises(kd.ModelError, match="is a Loop"):
        kd.Model(m.bodies, [*m.joints[:2], kd.Loop.revolute("rocker", None, "rocker")])
    with pytest.raises(kd.ModelError, match="cycle"):  # a cycle of tree joints is still rejected
        b = [kd.Body(n, 1.0, np.eye(3)) for n in "ab"]
        kd.Model(b, [kd.Joint.revolute("j1", "a", "b"), kd.Joint.revolute("j2", "b", "a")])


def test_planar_model_rejects_out_of_plane_loop():
    m = kd.examples.four_bar()
    tilted = kd.Loop.revolute("close", "coupler", "rocker", axis=1,
                              inner_point=m.loops[0].inner_point,
                              outer_point=m.loops[0].outer_point)  # fmt: skip
    with pytest.raises(kd.ModelError, match="loop 'close': planar=True"):
        loops.loop_plan(kd.Model(m.bodies, m.joints, loops=[tilted], planar=True))


def test_summary_reports_rank_redundancy_and_dof():
    planar = loops.loop_summary(kd.examples.four_bar())
    spatial = loops.loop_summary(kd.examples.four_bar(planar=False))
    assert (planar.n_constraints, planar.rank, planar.dof, planar.redundant) == (2, 2, 1, 0)
    assert (spatial.n_constraints, spatial.rank, spatial.dof, spatial.redundant) == (5, 2, 1, 3)
    assert "3 redundant" in str(spatial)
    bricard = loops.loop_summary(kd.examples.bricard())
    assert (bricard.n_constraints, bricard.rank, bricard.dof) == (5, 4, 1)
    p3 = loops.loop_summary(kd.examples.parallel_3rrr())
    assert (p3.n_constraints, p3.rank, p3.dof) == (4, 4, 3)
    assert loops.loop_summary(kd.examples.slider_crank(spatial=True)).dof == 1
    prismatic = loops.loop_summary(slider_crank_with_prismatic_loop())
    assert (prismatic.n_constraints, prismatic.rank, prismatic.dof) == (2, 2, 1)


# --------------------------------------------------------------------------- Φ, A, b
@pytest.mark.parametrize("name", EXAMPLES)
def test_velocity_and_acceleration_forms_are_the_derivatives_of_phi(name):
    """Φ̇ = A u and d/dt(A u) = A u̇ + b, by central differences along the motion."""
    model = EXAMPLES[name]()
    rng = np.random.default_rng(3)
    s = kd.State(model.initial_state().q, rng.normal(size=model.n))
    s = model.assemble(s, fix=[model.joints[0].name])
    s = kd.State(s.q + 0.05 * joint_noise(model, rng), s.u)  # off the manifold: Φ ≠ 0
    acc = rng.normal(size=model.n)
    lt = loops.loop_terms(model, s.q, s.u, bias=True)
    h = 1e-5

    def at(sign):
        q = loops._step_q(model, s.q, sign * h * s.u + 0.5 * h * h * acc)
        return loops._constraints(model, q), s.u + sign * h * acc

    (lp, up), (lm, um) = at(1.0), at(-1.0)
    np.testing.assert_allclose((lp.Phi - lm.Phi) / (2 * h), lt.A @ s.u, atol=1e-8)
    np.testing.assert_allclose((lp.A @ up - lm.A @ um) / (2 * h), lt.A @ acc + lt.b, atol=1e-6)


def joint_noise(model, rng):
    noise = np.zeros(model.nq)
    noise[model.layout.angle_q] = rng.normal(size=model.layout.angle_q.size)
    return noise


# --------------------------------------------------------------------------- assembly
def test_assemble_keeps_fixed_coordinates_and_closes():
    m = kd.examples.four_bar()
    s = m.set_joint(m.initial_state(), "crank", angles=[0.7], rates=[1.5])
    a = m.assemble(s, fix=["crank"])
    assert a.q[m.coordinates("crank")] == pytest.approx(0.7)
    assert a.u[m.speeds("crank")] == pytest.approx(1.5)
    phi, vel = loops.residuals(m, a.q, a.u)
    assert phi < 1e-12 and vel < 1e-12
    # the closed-loop vector equation of seed 004, in absolute angles
    th = absolute_angles(m, a)[[m.body_index(n) for n in ("crank", "coupler", "rocker")]]
    r1, r2, r4 = 2.0, 0.5, 1.2
    r3 = np.hypot(2.0, 0.7)
    np.testing.assert_allclose(r2 * np.cos(th[0]) + r3 * np.cos(th[1]),
                               r1 + r4 * np.cos(th[2]), atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(r2 * np.sin(th[0]) + r3 * np.sin(th[1]),
                               r4 * np.sin(th[2]), atol=1e-12)  # fmt: skip
    # fixing a coordinate by its index is the same as fixing the joint
    b = m.assemble(s, fix=[int(m.coordinates("crank")[0])])
    np.testing.assert_allclose(b.q, a.q, atol=1e-12)


def absolute_angles(m, s):
    kin = kd.kinematics(m, s)
    return np.array([np.arctan2(R[1, 0], R[0, 0]) for R in kin.R_N_B])


def test_assemble_error_names_the_loop():
    m = kd.examples.four_bar(crank=0.5, rocker=0.3, ground=2.0)
    # the crank pointing away from the rocker: coupler and rocker (2.01 + 0.3 m) cannot
    # reach across the 2.5 m from the crank tip to the rocker pivot
    s = m.set_joint(m.initial_state(), "crank", angles=[np.pi / 2])
    with pytest.raises(kd.ModelError, match="loop 'close' cannot close"):
        m.assemble(s, fix=["crank"])
    s = m.set_joint(m.initial_state(), "crank", rates=[1.0])
    with pytest.raises(kd.ModelError, match="loop 'close'.*not consistent"):
        m.assemble(s, fix=["crank", "rocker"])


def test_simulate_requires_an_assembled_state():
    m = kd.examples.four_bar()
    s = m.set_joint(m.initial_state(), "crank", angles=[0.3])
    for form in ("kane", "msd"):  # MSD with loops: tests/test_msd_loops.py
        with pytest.raises(kd.ModelError, match="assemble it first"):
            kd.simulate(m, s, 0.1, 0.01, formulation=form)
    assert kd.compiled.supports(m) is None  # loops compile (tests/test_loops_native.py)


# --------------------------------------------------------------------------- partition
def test_partition_detects_rank_and_picks_a_well_conditioned_block():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(2, 5))
    A = np.vstack((B, B[0] + 2 * B[1], np.zeros(5)))  # rank 2 of 4 rows
    p = loops.partition(A)
    assert p.rank == 2 and p.dependent.size == 2 and p.independent.size == 3
    assert np.linalg.matrix_rank(A[p.rows]) == 2
    assert np.linalg.cond(A[p.rows][:, p.dependent]) < 1e3
    with pytest.raises(kd.ModelError, match="2 DOF"):
        loops.partition(A[:2, :4], independent=[0])


def test_ill_conditioned_partition_is_chosen_again():
    """At the slider-crank's dead centre (crank and rod along the slide) the pin moves
    across the slide whichever of crank and rod turns: crank and rod cannot both be
    dependent. A partition that makes them so is replaced, and the accelerations do not
    depend on the partition."""
    m = kd.examples.slider_crank()
    s = m.set_joint(m.initial_state(), "crank", angles=[-np.pi / 2], rates=[1.0])
    s = m.assemble(s, fix=["crank"])
    kin = kd.kinematics(m, s)
    L = kd.dynamics.loads.applied_loads(m, s, kin, None, 0.0)
    crank, rod, slide = (int(m.speeds(n)[0]) for n in ("crank", "rod", "slide"))
    bad = loops.Partition(np.arange(2), np.sort([crank, rod]), np.array([slide]), 1.0)
    assert np.linalg.cond(loops.loop_terms(m, s.q).A[:, bad.dependent]) > 1e12
    eq = loops.equations_at(m, s.q, kin, L, s.u, bad)
    assert eq.partition is not bad and slide in eq.partition.dependent
    good = loops.Partition(np.arange(2), np.sort([crank, slide]), np.array([rod]), 1.0)
    kept = loops.equations_at(m, s.q, kin, L, s.u, good)
    assert kept.partition is good  # a well-conditioned partition is kept
    np.testing.assert_allclose(loops.constrained_accelerations(eq),
                               loops.constrained_accelerations(kept), atol=1e-12)  # fmt: skip


# --------------------------------------------------------------------------- oracles
def four_bar_dae(model):
    """The four-bar described by its pivots in N at q = 0 (independent of kanedyn)."""
    O, A, D, B = (np.array(p, float) for p in ((0, 0, 0), (0, 0.5, 0), (2, 0, 0), (2, 1.2, 0)))
    return _rods_dae(model, {"crank": (O, A), "coupler": (A, B), "rocker": (D, B)},
                     [(-1, "crank", O), ("crank", "coupler", A), (-1, "rocker", D),
                      ("coupler", "rocker", B)], [(0, 0, 1.0)] * 4)  # fmt: skip


def bricard_dae(model):
    V = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 1], [0, 0, 1]], float)
    rods = {f"rod{i + 1}": (V[i], V[i + 1]) for i in range(5)}
    edges = [V[(i + 1) % 6] - V[i] for i in range(6)]
    axes = [np.cross(edges[i - 1], edges[i]) for i in range(6)]
    names = [-1] + [f"rod{i + 1}" for i in range(5)] + [-1]
    joints = [(names[i], names[i + 1], V[i]) for i in range(6)]
    return _rods_dae(model, rods, joints, axes)


def spatial_slider_crank_dae(model):
    """The spatial slider-crank from its description: crank (0.3 m) about N's z at the
    origin, rod (1 m) on a ball joint at the crank tip, universal joint at the pin with
    both axes across the rod (one fixed in the rod, horizontal; one fixed in the slider),
    slider on the line y = 0, z = 0.2 along x, not turning."""
    O, A = np.zeros(3), np.array([0.0, 0.3, 0.0])
    P = np.array([np.sqrt(1.0 - 0.09 - 0.04), 0.0, 0.2])
    e = P - A
    a_rod = np.cross(e, (0, 0, 1.0))
    a_rod /= np.linalg.norm(a_rod)
    x, y, z = np.eye(3)
    extra = [("point", "crank", "rod", A), ("point", "rod", "slider", P),
             ("perp", "rod", a_rod, "slider", np.cross(a_rod, e)),
             ("plane", "slider", P, y), ("plane", "slider", P, z),
             ("perp", -1, x, "slider", y), ("perp", -1, x, "slider", z),
             ("perp", -1, y, "slider", z)]  # fmt: skip
    return _rods_dae(model, {"crank": (O, A), "rod": (A, P), "slider": (P, P + x)},
                     [(-1, "crank", O)], [z], extra)  # fmt: skip


def _rods_dae(model, rods, joints, axes, extra=()):
    order = [b.name for b in model.bodies]
    r0, R0, bodies = [], [], []
    for name in order:
        P, Q = rods[name]
        e = (Q - P) / np.linalg.norm(Q - P)
        y = np.cross((0, 0, 1.0) if abs(e[2]) < 0.9 else (1.0, 0, 0), e)
        y /= np.linalg.norm(y)
        b = model.body(name)
        r0.append(P + b.com[0] * e)  # rods: the mass centre on the rod's axis
        R0.append(np.column_stack((e, y, np.cross(e, y))))
        bodies.append((b.mass, b.inertia))
    idx = {name: i for i, name in enumerate(order)}
    jts = [
        (idx.get(a, -1), idx.get(b, -1), p, ax) for (a, b, p), ax in zip(joints, axes, strict=True)
    ]
    cons = [tuple(idx.get(x, x) if isinstance(x, str) else x for x in c) for c in extra]
    return SpatialRevoluteDAE(bodies, jts, np.array(r0), np.array(R0), model.gravity, cons)


def dae_state(model, s, oracle):
    """The oracle's state (its own body frames) of the same motion: each body's rotation
    from q = 0 applied to the oracle's reference attitude."""
    kin = kd.kinematics(model, s)
    R_ref = kd.kinematics(model, model.initial_state()).R_N_B
    R = kin.R_N_B @ R_ref.swapaxes(1, 2) @ oracle.R0
    return kin.r, R, kin.v, kin.omega


@pytest.mark.parametrize(("name", "dae"), [("four_bar", four_bar_dae),
                                           ("four_bar_spatial_hinge", four_bar_dae),
                                           ("slider_crank_spatial", spatial_slider_crank_dae),
                                           ("bricard", bricard_dae)])  # fmt: skip
def test_accelerations_match_the_absolute_coordinate_dae(name, dae):
    model = EXAMPLES[name]()
    oracle = dae(model)
    for seed in range(3):
        s = random_assembled(model, seed)
        r, R, v, w = dae_state(model, s, oracle)
        J, _ = oracle.kkt(r, R, v, w)
        x_dot = np.concatenate([np.concatenate((vi, wi)) for vi, wi in zip(v, w, strict=True)])
        assert np.abs(J @ x_dot).max() < 1e-10  # the same motion, seen by the oracle
        a_ref, wd_ref, _ = oracle.accelerations(r, R, v, w)
        acc = kd.forward_dynamics(model, s)
        par = kd.partials(model, s)
        np.testing.assert_allclose(par.Omega_u @ acc[: model.nu] + par.alpha_r, wd_ref,
                                   atol=1e-9)  # fmt: skip
        np.testing.assert_allclose(par.V @ acc + par.a_r, a_ref, atol=1e-9)


@pytest.mark.parametrize(("name", "dae", "t_final"), [
    ("four_bar", four_bar_dae, 2.0), ("bricard", bricard_dae, 1.0),
    ("slider_crank_spatial", spatial_slider_crank_dae, 1.0)])  # fmt: skip
def test_trajectory_matches_the_dae(name, dae, t_final):
    """kanedyn's minimal-coordinate run against the redundant-coordinate DAE (no published
    reference solution of the IFToMM problems is available offline)."""
    model = EXAMPLES[name]()
    s = random_assembled(model, 7)
    t = np.linspace(0.0, t_final, 11)
    traj = kd.simulate(model, s, t_final, 0.1, method="DOP853", rtol=1e-11, atol=1e-12,
                       output_every=t_final / 10)  # fmt: skip
    oracle = dae(model)
    r_ref, _ = oracle.simulate(*dae_state(model, s, oracle), t)
    for i, b in enumerate(model.bodies):
        np.testing.assert_allclose(traj.body(b.name).position, r_ref[:, i], atol=2e-7)


def test_loop_forces_match_the_dae_multipliers_and_a_free_body_balance():
    model = kd.examples.four_bar()
    oracle = four_bar_dae(model)
    for seed in range(3):
        s = random_assembled(model, seed)
        lf = kd.loop_forces(model, s)
        *_, lam = oracle.accelerations(*dae_state(model, s, oracle))
        # the DAE's last joint is the coupler-rocker pin: rows 3 (point) + 2 (axis); λ acts
        # on the coupler (its body A), so the coupler exerts -λ on the rocker
        lam_pin = lam[-5:-2]
        np.testing.assert_allclose(lf.of("close")["force"], -lam_pin, atol=1e-9)
        np.testing.assert_allclose(lf.of("close")["torque"], 0.0, atol=1e-9)
        # rocker free body, moments about its ground pivot D (its inertia about D,
        # its weight, the loop force at B): I_D α = (B - D) × F + (c - D) × m g
        kin = kd.kinematics(model, s)
        acc = kd.forward_dynamics(model, s)
        k = model.body_index("rocker")
        rocker = model.body("rocker")
        alpha = acc[model.speeds("rocker")[0]]
        D = np.array([2.0, 0.0, 0.0])
        c = kin.r[k]
        I_D = (kin.R_N_B[k] @ rocker.inertia @ kin.R_N_B[k].T)[2, 2] + rocker.mass * np.sum(
            (c - D)[:2] ** 2)  # fmt: skip
        B = kin.p[k] + kin.R_N_B[k] @ np.array([1.2, 0.0, 0.0])
        moment = np.cross(B - D, lf.force[0])[2] + np.cross(c - D, rocker.mass * model.gravity)[2]
        assert I_D * alpha == pytest.approx(moment, abs=1e-9)
        # in the Go axes: the same vector
        R_N_Go = kin.R_N_B[k] @ np.asarray(model.loops[0].outer_rotation).T
        np.testing.assert_allclose(R_N_Go @ lf.force_Go[0], lf.force[0], atol=1e-12)


def test_redundant_spatial_hinge_gives_the_planar_dynamics():
    planar, spatial = kd.examples.four_bar(), kd.examples.four_bar(planar=False)
    s = random_assembled(planar, 5)
    np.testing.assert_allclose(kd.forward_dynamics(spatial, s), kd.forward_dynamics(planar, s),
                               atol=1e-10)  # fmt: skip
    np.testing.assert_allclose(kd.loop_forces(spatial, s).force, kd.loop_forces(planar, s).force,
                               atol=1e-9)  # fmt: skip


def sympy_four_bar(model):
    """The four-bar of kd.examples.four_bar() in sympy.physics.mechanics: frames, mass
    centres and the loop closure (x and y of R2 + R3 - R1 - R4), from its lengths."""
    import sympy as sp
    from sympy.physics import mechanics as me

    L1, L3, d = 0.5, 1.2, 2.0
    L2 = float(np.hypot(d, L3 - L1))
    phi = float(np.arctan2(L3 - L1, d))
    q1, q2, q3 = me.dynamicsymbols("q1:4")
    u1, u2, u3 = me.dynamicsymbols("u1:4")
    N = me.ReferenceFrame("N")
    C = N.orientnew("C", "Axis", (sp.pi / 2 + q1, N.z))
    K = C.orientnew("K", "Axis", (phi - sp.pi / 2 + q2, C.z))
    R = N.orientnew("R", "Axis", (sp.pi / 2 + q3, N.z))
    C.set_ang_vel(N, u1 * N.z)
    K.set_ang_vel(N, (u1 + u2) * N.z)
    R.set_ang_vel(N, u3 * N.z)
    O = me.Point("O")
    O.set_vel(N, 0)
    A = O.locatenew("A", L1 * C.x)
    D = O.locatenew("D", d * N.x)
    D.set_vel(N, 0)
    A.v2pt_theory(O, N, C)
    bodies, loads = [], []
    for frame, origin, name, L in ((C, O, "crank", L1), (K, A, "coupler", L2),
                                   (R, D, "rocker", L3)):  # fmt: skip
        b = model.body(name)
        mc = origin.locatenew(f"m_{name}", L / 2 * frame.x)
        mc.v2pt_theory(origin, N, frame)
        bodies.append(me.RigidBody(name, mc, frame, b.mass,
                                   (me.inertia(frame, *np.diag(b.inertia)), mc)))  # fmt: skip
        loads.append((mc, b.mass * sp.Float(model.gravity[1]) * N.y))
    loop = A.pos_from(O) + L2 * K.x - (d * N.x + L3 * R.x)
    return N, (q1, q2, q3), (u1, u2, u3), bodies, loads, [loop.dot(N.x), loop.dot(N.y)]


def test_four_bar_matches_sympy_kanes_method_with_constraints():
    """KanesMethod with configuration and velocity constraints (the dependent speeds
    eliminated by sympy): its full accelerations and its reduced mass matrix."""
    import sympy as sp
    from sympy.physics import mechanics as me

    model = kd.examples.four_bar()
    N, (q1, q2, q3), (u1, u2, u3), bodies, loads, config = sympy_four_bar(model)
    qd = {q1.diff(): u1, q2.diff(): u2, q3.diff(): u3}
    vel = [sp.diff(c, me.dynamicsymbols._t).subs(qd) for c in config]
    km = me.KanesMethod(N, q_ind=[q1], u_ind=[u1], q_dependent=[q2, q3], u_dependent=[u2, u3],
                        kd_eqs=[q1.diff() - u1, q2.diff() - u2, q3.diff() - u3],
                        configuration_constraints=config, velocity_constraints=vel)  # fmt: skip
    km.kanes_equations(bodies, loads)
    MM = sp.lambdify((q1, q2, q3, u1, u2, u3), km.mass_matrix)
    FF = sp.lambdify((q1, q2, q3, u1, u2, u3), km.forcing)
    for seed in range(3):
        s = random_assembled(model, seed)
        order = np.concatenate([model.speeds(n) for n in ("crank", "coupler", "rocker")])
        args = (*s.q[order], *s.u[order])  # the joint angles and rates are sympy's q, u
        udot = np.linalg.solve(np.array(MM(*args), float), np.array(FF(*args), float).ravel())
        np.testing.assert_allclose(kd.forward_dynamics(model, s)[order], udot, atol=1e-10)
        eq = kd.loop_equations(model, s, independent=["crank"])
        reduced = np.array(MM(*args), float)[0] @ eq.C[order]
        np.testing.assert_allclose(eq.mass_matrix.ravel(), reduced, rtol=1e-10)


# --------------------------------------------------------------------------- simulate
@pytest.mark.parametrize(
    "name", ["four_bar", "slider_crank_spatial", "slider_crank_prismatic_loop", "parallel_3rrr",
             "bricard"])  # fmt: skip
def test_energy_is_conserved_and_the_loops_stay_closed(name):
    model = EXAMPLES[name]()
    s = random_assembled(model, 11)
    traj = kd.simulate(model, s, 0.4, 0.001, output_every=0.05)
    E = traj.total_energy
    scale = max(1.0, float(np.max(np.abs(traj.kinetic_energy))))
    assert np.ptp(E) < 1e-7 * scale
    assert traj.loop_residual.max() < 1e-12
    if traj.engine != "native":  # the native step projects inside its loop: no drift kept
        assert 0.0 < traj.loop_drift < 1e-5  # RK4 leaves the manifold; projection brings it back
    assert np.ptp(traj.kinetic_energy) > 1e-2 * scale  # the mechanism moves


def test_adaptive_and_baumgarte_runs():
    model = kd.examples.four_bar()
    s = random_assembled(model, 2)
    ref = kd.simulate(model, s, 0.5, 0.002, output_every=0.1)
    ad = kd.simulate(model, s, 0.5, method="DOP853", rtol=1e-10, atol=1e-12, output_every=0.1)
    bg = kd.simulate(model, s, 0.5, 0.002, stabilization="baumgarte", output_every=0.1)
    none = kd.simulate(model, s, 0.5, 0.002, stabilization="none", output_every=0.1)
    for traj in (ad, bg, none):
        np.testing.assert_allclose(traj.q, ref.q, atol=1e-6)
    assert ad.loop_residual.max() < 1e-12
    assert bg.loop_residual[:, 0].max() < 1e-8
    assert none.loop_drift is None and none.loop_residual[:, 0].max() > 1e-12
    with pytest.raises(kd.ModelError, match="stabilization"):
        kd.simulate(model, s, 0.1, 0.01, stabilization="magic")


@pytest.mark.slow
def test_residual_stays_at_round_off_over_1e5_steps():
    model = kd.examples.four_bar()
    s = random_assembled(model, 4)
    traj = kd.simulate(model, s, 100.0, 0.001, output_every=1.0)
    assert traj.loop_residual.max() < 1e-12
    E = traj.total_energy
    assert np.ptp(E) < 1e-6 * np.max(np.abs(traj.kinetic_energy))


def test_tree_joint_reactions_include_the_loop_forces():
    """The crank's ground pin force of the four-bar equals the DAE's multiplier."""
    model = kd.examples.four_bar()
    oracle = four_bar_dae(model)
    s = random_assembled(model, 1)
    *_, lam = oracle.accelerations(*dae_state(model, s, oracle))
    cf = kd.constraint_forces(model, s)
    # DAE joint 0 is ground (A) - crank (B): the ground exerts -λ on the crank
    np.testing.assert_allclose(cf.of("crank")["force"], -lam[:3], atol=1e-9)
    np.testing.assert_allclose(cf.of("rocker")["force"], -lam[10:13], atol=1e-9)


# --------------------------------------------------------------------------- TOML and CLI
@pytest.mark.parametrize("name", ["four_bar", "slider_crank_spatial", "bricard"])
def test_toml_round_trip_keeps_loops(tmp_path, name):
    model = EXAMPLES[name]()
    s = random_assembled(model, 9)
    path = tmp_path / "m.toml"
    kd.io.write_toml(model, path)
    back = kd.io.read_toml(path)
    assert [lp.name for lp in back.loops] == [lp.name for lp in model.loops]
    assert back.planar == model.planar
    np.testing.assert_array_equal(kd.forward_dynamics(back, s), kd.forward_dynamics(model, s))


def test_toml_initial_tables_fix_joints_and_errors_name_the_file(tmp_path):
    path = tmp_path / "m.toml"
    kd.io.write_toml(kd.examples.four_bar(), path)
    text = path.read_text()
    path.write_text(text + "\n[initial.crank]\nangles_deg = [20.0]\nrates_rad_s = [1.0]\n")
    case = kd.io.read_toml_case(path)
    m, s = case.model, case.state
    assert s.q[m.coordinates("crank")] == pytest.approx(np.deg2rad(20.0))
    assert max(loops.residuals(m, s.q, s.u)) < 1e-12
    loop_table = text[text.index("[[loops]]") :]
    path.write_text(text.replace(loop_table, loop_table.replace('"rocker"', '"nowhere"')))
    with pytest.raises(kd.FileFormatError, match="loop 'close': unknown outer body 'nowhere'"):
        kd.io.read_toml(path)
    path.write_text(text + '\n[[loops]]\nname = "x"\ninner = "crank"\nouter = "N"\nkind = "revolute"\naxis = 3\n'
                    "stiffness = 2.0\n")  # fmt: skip
    with pytest.raises(
        kd.FileFormatError, match=r"line \d+: stiffness in \[\[loops\]\] #2.*stiffness must be zero"
    ):
        kd.io.read_toml(path)


def test_cli_check_lists_loops_dof_and_independent_speeds(tmp_path):
    from kanedyn.cli import main

    kd.io.write_toml(kd.examples.bricard(), tmp_path / "b.toml")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check", str(tmp_path / "b.toml")]) == 0
    text = out.getvalue()
    assert "loop 'j5': rod5 -> N" in text
    assert "5 loop constraints, rank 4, 1 redundant" in text and "1 DOF after constraints" in text
    assert "independent speeds: " in text and "the model has closed loops" not in text


# --------------------------------------------------------------------------- symbolic
def test_symbolic_loop_constraints_match_the_numeric_engine():
    """kd.symbolic.kane(model).loops: Φ, A, b in sympy, from the same joint model, equal
    the numeric ones; the symbolic constrained equations equal kd.loop_equations."""
    import sympy as sm

    model = kd.examples.four_bar()
    eom = kd.symbolic.kane(model)
    lc = eom.loops
    assert lc.loop == ("close", "close") and lc.A.shape == (2, 3)
    args = [list(eom.q), list(eom.u)]
    fPhi, fA, fb = (sm.lambdify(args, eom.explicit(x)) for x in (lc.Phi, lc.A, lc.b))
    rng = np.random.default_rng(1)
    for _ in range(3):
        s = kd.State(rng.normal(size=3), rng.normal(size=3))  # off the manifold too
        lt = loops.loop_terms(model, s.q, s.u, bias=True)
        np.testing.assert_allclose(np.ravel(fPhi(s.q, s.u)), lt.Phi, atol=1e-12)
        np.testing.assert_allclose(np.array(fA(s.q, s.u), float), lt.A, atol=1e-12)
        np.testing.assert_allclose(np.ravel(fb(s.q, s.u)), lt.b, atol=1e-12)
    ce = eom.constrained(["crank"])
    s = random_assembled(model, 3)
    eq = kd.loop_equations(model, s, independent=["crank"])
    M = sm.lambdify(args, ce.mass_matrix)(s.q, s.u)
    f = sm.lambdify(args, ce.forcing)(s.q, s.u)
    np.testing.assert_allclose(np.array(M, float), eq.mass_matrix, rtol=1e-10)
    np.testing.assert_allclose(np.ravel(f), eq.forcing, rtol=1e-10)
    assert "| close | 1 (translation) |" in eom.table(max_size=50)


def test_symbolic_loop_with_symbolic_lengths():
    import attrs
    import sympy as sm

    model = kd.examples.four_bar()
    L = sm.Symbol("L", positive=True)
    loop = attrs.evolve(model.loops[0], outer_point=(L, 0, 0))
    sym = kd.Model(model.bodies, model.joints, loops=[loop], gravity=model.gravity,
                   planar=True)  # fmt: skip
    assert sym.is_symbolic
    eom = kd.symbolic.kane(sym)
    assert L in eom.explicit(eom.loops.Phi).free_symbols
    num = sym.subs({L: 1.2})
    s = random_assembled(num, 2)
    f = sm.lambdify([list(eom.q), L], eom.explicit(eom.loops.Phi))
    np.testing.assert_allclose(np.ravel(f(s.q, 1.2)), 0.0, atol=1e-12)


def test_kane_problem_forms_velocity_constraints_from_configuration_constraints():
    """KaneProblem given only the four-bar's loop closure f_c(q) = 0 (and u_dep): the
    reduced equations equal kanedyn's (sympy's KanesMethod ignores such constraints)."""

    from kanedyn.symbolic import KaneProblem

    model = kd.examples.four_bar()
    N, (q1, q2, q3), (u1, u2, u3), bodies, loads, config = sympy_four_bar(model)
    kp = KaneProblem(N, [q1], [u1], [q1.diff() - u1, q2.diff() - u2, q3.diff() - u3],
                     q_dep=[q2, q3], configuration_constraints=config,
                     u_dep=[u2, u3], bodies=bodies, loads=loads)  # fmt: skip
    assert "(configuration)" in kp.table() and "(velocity)" in kp.table()
    order = np.concatenate([model.speeds(n) for n in ("crank", "coupler", "rocker")])
    for seed in range(2):
        s = random_assembled(model, seed)
        qd = kp.rhs(s.q[order], s.u[order][:1])
        eq = kd.loop_equations(model, s, independent=["crank"])
        udot = np.linalg.solve(eq.mass_matrix, eq.forcing)
        assert qd[-1] == pytest.approx(udot[0], rel=1e-10)


# --------------------------------------------------------------------------- IFToMM A02
@pytest.mark.parametrize(
    ("N", "t_final"), [(2, 3.0), pytest.param(5, 10.0, marks=pytest.mark.slow)]
)
def test_n_four_bar_passes_its_singular_configurations(N, t_final):
    """A02 starts with the rods vertical and the couplers moving at 1 m/s; under gravity
    the rods turn through the horizontal, where the parallelograms are singular (they
    could fold into anti-parallelograms). Every rod must keep the angle of the 1-DOF
    closed form: a pendulum with I = (N+1) m L²/3 + N m L² and V = m g L sin θ ((N+1)/2 + N)
    (the couplers translate), integrated here by scipy at tight tolerance."""
    import scipy.integrate

    model = n_four_bar(N)
    assert loops.loop_summary(model).dof == 1
    s = model.assemble(model.set_joint(model.initial_state(), "p0", rates=[-1.0]), fix=["p0"])
    traj = kd.simulate(model, s, t_final, 0.005, output_every=0.1)
    I_eff = (N + 1) / 3 + N
    k_g = 9.81 * ((N + 1) / 2 + N)
    ref = scipy.integrate.solve_ivp(lambda t, x: [x[1], -k_g * np.cos(x[0]) / I_eff],
                                    (0, t_final), [np.pi / 2, -1.0], t_eval=traj.t,
                                    rtol=1e-12, atol=1e-12).y[0]  # fmt: skip
    assert ref[0] - ref.min() > 1.6 * np.pi  # through θ = 0 and θ = -π: horizontal twice
    for k in range(N + 1):
        theta = np.pi / 2 + traj.q[:, model.coordinates(f"p{k}")[0]]
        np.testing.assert_allclose(theta, ref, atol=1e-4)
    assert traj.loop_residual.max() < 1e-12


def test_cli_simulate_reports_the_loops(tmp_path):
    import contextlib
    import io
    import json

    from kanedyn.cli import main

    kd.io.write_toml(
        kd.examples.four_bar(),
        tmp_path / "fb.toml",
        settings={"t_final": 0.2, "dt": 0.01, "output_every": 0.01},
    )
    with open(tmp_path / "fb.toml", "a") as fh:
        fh.write("\n[initial.crank]\nrates_rad_s = [2.0]\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            main(["simulate", str(tmp_path / "fb.toml"), "--quiet", "--out", str(tmp_path / "o")])
            == 0
        )
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["dof_after_loops"] == 1 and summary["loop_residual_max"] < 1e-12
    assert "loops: 1 DOF after the constraints" in out.getvalue()
    # the engine reported is the run's (loops run compiled, natively with llvmlite)
    assert summary["engine"] in ("native", "compiled")
    assert f"engine {summary['engine']}" in out.getvalue()
    csv = np.loadtxt(tmp_path / "o" / "trajectory.csv", delimiter=",", skiprows=1)
    assert csv.shape[0] == 21


def test_dense_ensembles_refuse_loops():
    """Ensembles of looped models run natively (tests/test_loops_native.py); the dense
    batched engine has no loop equations."""
    m = kd.examples.four_bar()
    s = m.initial_state()
    states = kd.States(np.array([s.q, s.q]), np.array([s.u, s.u]))
    with pytest.raises(kd.ModelError, match="loops"):
        kd.simulate_ensemble(m, states, 0.1, 0.01, engine="dense")
    with pytest.raises(kd.ModelError, match="loops"):
        kd.forward_dynamics(m, states)


def test_cutting_the_loop_elsewhere_gives_the_same_motion():
    """The slider-crank cut at the pin (revolute loop) and at the slide (prismatic loop):
    two different trees and loop joints, one mechanism."""
    runs = []
    for model in (kd.examples.slider_crank(), slider_crank_with_prismatic_loop()):
        s = model.set_joint(model.initial_state(), "crank", angles=[0.4], rates=[2.0])
        s = model.assemble(s, fix=["crank"])
        traj = kd.simulate(model, s, 0.5, 0.002, output_every=0.05)
        runs.append(traj.q[:, model.coordinates("crank")[0]])
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-9)
    assert np.ptp(runs[0]) > 0.5
