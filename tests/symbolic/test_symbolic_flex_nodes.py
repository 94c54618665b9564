"""Joints at nodes of flexible bodies (``Joint.inner_node``, ``outer_node``) in the
symbolic derivations (kd.symbolic.kane, kd.symbolic.lagrange; issue 29).

Oracles: sympy.physics.mechanics KanesMethod on a hub, a body of particles displaced by
a mode and a tip body hinged on the node frame written here from the node's mode shape
numbers (its displacement ``Ψ_n η`` and its Cayley rotation of ``Θ_n η / 2``, the
angular velocity by sympy's differentiation of that rotation); the dense numeric engine
(kd.mass_matrix, kd.forcing); and Lagrange's equations, whose angular velocity of the
node frame is the rate of its attitude (``Ċ Cᵀ``), not the node's partials ``W``.
Breaking the node's rotation in the derivation makes the checks fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics import mechanics as me

import kanedyn as kd
from kanedyn.symbolic import flex as symflex
from tests.sympy_oracle import particle_modes
from tests.test_flex_nodes import geared_tip_model

R = sp.Rational
# the lumped beam: particles near the x axis, one mode φ(x) = (x/2)² displacing along (0, 1, 1/3)
X = [R(1, 2), R(1), R(3, 2), R(2)]
YZ = [(R(1, 10), 0), (-R(1, 10), R(1, 20)), (R(1, 10), -R(1, 20)), (0, 0)]
MASS = [R(1, 2), R(1, 2), R(1, 2), R(1, 4)]
DIR = [0, 1, R(1, 3)]
PSI_N = [0, 1, R(1, 3)]  # the tip node's displacement and rotation (φ(2) = 1, φ'(2) = 1)
THETA_N = [0, -R(1, 3), 1]
K, C_DAMP = 40, R(1, 10)
OFFSET = [R(1, 2), R(1, 10), 0]  # the weld on the hub
INNER_POINT = [2, R(1, 20), 0]  # the hinge, near the node (the node frame's lever)
R_BI_GI = sp.Matrix([[1, 0, 0], [0, 0, -1], [0, 1, 0]])  # the hinge's frame: x turned 90°
OUTER_POINT = [-R(1, 10), 0, 0]
TIP_COM = [R(1, 10), R(1, 50), -R(3, 100)]
TIP_I = [R(1, 20), R(3, 100), R(1, 25)]
GRAVITY = [0, -R(981, 100), R(1, 2)]


def _f(v):
    return np.array([float(x) for x in v], dtype=float)


def lumped_beam_tip():
    """A hub turning about z, the lumped beam welded to it, a tip body hinged (axis 2 of
    a turned joint frame) at the beam's tip node: the kanedyn model, modal data exact
    from the particles."""
    r = np.array([[float(x), float(y), float(z)] for x, (y, z) in zip(X, YZ, strict=True)])
    m = _f(MASS)
    Psi = np.array([[[float(d * (x / 2) ** 2)] for d in DIR] for x in X])
    Mpsi, P, H, L, N = particle_modes(r, m, Psi)
    mass = m.sum()
    com = m @ r / mass
    d = r - com
    inertia = np.einsum("k,kj,kj->", m, d, d) * np.eye(3) - np.einsum("k,ki,kj->ij", m, d, d)
    modes = kd.Modes(Mpsi, [[K]], [[float(C_DAMP)]], P=P, H=H, L=L, N=N,
                     node_positions=[[2.0, 0.0, 0.0]], Psi=[_f(PSI_N)[:, None]],
                     Theta=[_f(THETA_N)[:, None]], node_names=("tip",))  # fmt: skip
    hub = kd.Body("hub", 3.0, kd.inertia_tensor(1.0, 1.5, 2.0))
    beam = kd.Body("beam", mass, inertia, com=com, modes=modes)
    tip = kd.Body("tip", 0.7, np.diag(_f(TIP_I)), com=_f(TIP_COM))
    return kd.Model(
        [hub, beam, tip],
        [kd.Joint.revolute("h", None, "hub", axis=3),
         kd.Joint.weld("w", "hub", "beam", inner_point=_f(OFFSET)),
         kd.Joint.revolute("hinge", "beam", "tip", axis=2, inner_point=_f(INNER_POINT),
                           inner_rotation=np.array(R_BI_GI, dtype=float), inner_node="tip",
                           outer_point=_f(OUTER_POINT))],
        gravity=_f(GRAVITY),
    )  # fmt: skip


def _skew(g):
    return sp.Matrix([[0, -g[2], g[1]], [g[2], 0, -g[0]], [-g[1], g[0], 0]])


def kanes_method_oracle():
    """The same system in sympy.physics.mechanics, built from the particles and the node
    numbers: ``oracle(q, u) -> (M, forcing)`` over ``[q_h, q_hinge, η]``."""
    qh, qt, e = me.dynamicsymbols("qh qt e")
    uh, ut, x = me.dynamicsymbols("uh ut x")
    Nf = me.ReferenceFrame("N")
    A = me.ReferenceFrame("A")  # hub and beam (the weld turns nothing)
    A.orient_axis(Nf, Nf.z, qh)
    O = me.Point("O")
    O.set_vel(Nf, 0)
    g = GRAVITY[0] * Nf.x + GRAVITY[1] * Nf.y + GRAVITY[2] * Nf.z
    hub = me.RigidBody("hub", O, A, 3, (me.inertia(A, 1, R(3, 2), 2), O))
    bodies, loads = [hub], [(O, 3 * g)]
    Bo = O.locatenew("Bo", sum(c * a for c, a in zip(OFFSET, (A.x, A.y, A.z), strict=True)))

    def in_A(v):
        return sum(c * a for c, a in zip(v, (A.x, A.y, A.z), strict=True))

    for k, (xk, (yk, zk), mk) in enumerate(zip(X, YZ, MASS, strict=True)):
        phi = (xk / 2) ** 2
        pk = Bo.locatenew(f"p{k}", in_A([xk + phi * DIR[0] * e, yk + phi * DIR[1] * e,
                                          zk + phi * DIR[2] * e]))  # fmt: skip
        pk.set_vel(Nf, pk.pos_from(O).dt(Nf))
        bodies.append(me.Particle(f"m{k}", pk, mk))
        loads.append((pk, mk * g))
    # the node frame: Cayley rotation of g = Θ_n η / 2, displacement r_n + Ψ_n η
    gv = sp.Matrix(THETA_N) * e / 2
    G = _skew(gv)
    C = (sp.eye(3) + 2 * (G + G * G) / (1 + (gv.T * gv)[0, 0])).applyfunc(sp.cancel)
    Gi = me.ReferenceFrame("Gi")
    Gi.orient_explicit(A, C * R_BI_GI)  # A.dcm(Gi) = C R_Bi_Gi
    # its angular velocity: sympy's own from the rate of that DCM, brought to lowest terms
    w = Gi.ang_vel_in(A).to_matrix(A).applyfunc(sp.cancel)
    Gi.set_ang_vel(A, in_A(w))
    d = sp.Matrix([2, 0, 0]) + sp.Matrix(PSI_N) * e
    o = Bo.locatenew("o", in_A(d + C * (sp.Matrix(INNER_POINT) - sp.Matrix([2, 0, 0]))))
    Bt = me.ReferenceFrame("Bt")
    Bt.orient_axis(Gi, Gi.y, qt)
    p_t = o.locatenew("pt", -sum(c * a for c, a in zip(OUTER_POINT, (Bt.x, Bt.y, Bt.z),
                                                          strict=True)))  # fmt: skip
    ct = p_t.locatenew("ct", sum(c * a for c, a in zip(TIP_COM, (Bt.x, Bt.y, Bt.z),
                                                        strict=True)))  # fmt: skip
    ct.set_vel(Nf, ct.pos_from(O).dt(Nf))
    tip = me.RigidBody("tip", ct, Bt, R(7, 10), (me.inertia(Bt, *TIP_I), ct))
    bodies.append(tip)
    loads.append((ct, R(7, 10) * g))
    q, u = [qh, qt, e], [uh, ut, x]
    km = me.KanesMethod(Nf, q_ind=q, u_ind=u,
                        kd_eqs=[a.diff() - b for a, b in zip(q, u, strict=True)])  # fmt: skip
    km.kanes_equations(bodies, loads)
    Mf = sp.lambdify([*q, *u], km.mass_matrix, "numpy", cse=True)
    ff = sp.lambdify([*q, *u], km.forcing, "numpy", cse=True)

    def oracle(qv, uv):
        vals = [*map(float, qv), *map(float, uv)]
        fs = np.array(ff(*vals), dtype=float).ravel()
        fs[2] -= K * qv[2] + float(C_DAMP) * uv[2]  # the modal stiffness and damping
        return np.array(Mf(*vals), dtype=float), fs

    return oracle


@pytest.fixture(scope="module")
def lumped():
    model = lumped_beam_tip()
    return model, kd.symbolic.kane(model)


@pytest.fixture(scope="module")
def oracle():
    return kanes_method_oracle()  # about 10 s: sympy's KanesMethod on the Cayley rotation


def _states(model, seed, k=3):
    rng = np.random.default_rng(seed)
    for _ in range(k):
        yield kd.State(rng.uniform(-0.8, 0.8, model.nq_total), rng.uniform(-1, 1, model.n_total))


def _hub_beam_tip():
    """A hub, a one-mode beam (kd.beam_body) welded to it and a tip body hinged at the
    beam's tip node, under gravity."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, 40.0, n_modes=1, directions=(1,), stiffening=False,
                        damping_ratio=0.02)  # fmt: skip
    tip = kd.Body("tip", 0.7, kd.inertia_tensor(0.05, 0.03, 0.04), com=(0.1, 0.02, -0.03))
    return kd.Model(
        [hub, beam, tip],
        [kd.Joint.revolute("h", None, "hub", axis=3),
         kd.Joint.weld("w", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                       inner_rotation=kd.euler_to_dcm("123", (0.0, 0.0, 0.2))),
         kd.Joint.revolute("hinge", "beam", "tip", axis=2, inner_point=(2.0, 0.0, 0.0),
                           inner_node="tip", outer_point=(-0.1, 0.0, 0.0))],
        gravity=(0.0, -9.81, 0.5),
    )  # fmt: skip


def test_a_tip_body_on_a_beam_node_equals_the_dense_engine():
    """A hub + one-mode beam + tip body hinged at the beam's tip node: the symbolic mass
    matrix and forcing are the dense engine's at random states."""
    model = _hub_beam_tip()
    eom = kd.symbolic.kane(model)
    assert [str(s) for s in eom.u] == ["u_h_0", "u_hinge_0", "xi_beam_0"]
    f = eom.lambdify()
    for state in _states(model, 21):
        M, F = f(state.q, state.u)
        np.testing.assert_allclose(M, kd.mass_matrix(model, state), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, kd.forcing(model, state), rtol=1e-9, atol=1e-9)


def test_the_lumped_beam_and_tip_equal_the_dense_engine(lumped):
    model, eom = lumped
    f = eom.lambdify()
    for state in _states(model, 22):
        M, F = f(state.q, state.u)
        np.testing.assert_allclose(M, kd.mass_matrix(model, state), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, kd.forcing(model, state), rtol=1e-9, atol=1e-9)
    # the tip body's ξ column is not zero: the node carries it
    assert np.abs(M[:2, 2]).min() > 1e-3


@pytest.mark.slow
def test_the_lumped_beam_and_tip_equal_sympy_kanes_method(lumped, oracle):
    model, eom = lumped
    f = eom.lambdify()
    for state in _states(model, 22):
        M, F = f(state.q, state.u)
        Ms, Fs = oracle(state.q, state.u)
        np.testing.assert_allclose(M, Ms, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, Fs, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_lagrange_equals_kane_with_a_tip_body_on_the_node(lumped):
    model, eom = lumped
    lag = kd.symbolic.lagrange(model)
    assert list(lag.q) == list(eom.q) and list(lag.u) == list(eom.u)
    rep = kd.symbolic.compare(eom, lag, time_budget=0.1, samples=3)
    assert rep.equivalent and not rep.differing, str(rep)
    assert rep.max_numeric_error < 1e-9
    # the kinetic energy with the tip body on the node is the dense engine's
    state = next(_states(model, 23, 1))
    sub = dict(zip([*lag.q, *lag.u], [*state.q, *state.u], strict=True))
    T = float(lag.kinetic_energy.xreplace(sub))
    np.testing.assert_allclose(T, kd.kinetic_energy(model, state), rtol=1e-12)


def _broken_node_frame(monkeypatch, dropped):
    """The symbolic derivation's node frame with its angular velocity dropped (the
    attitude kept: ``dropped="rate"``) or with no rotation at all (the displacement
    kept: ``"rotation"``)."""
    real = symflex.node_frame

    def broken(md, k, eta, xi):
        C, d, W, W_dot = real(md, k, eta, xi)
        if dropped == "rotation":
            C = np.eye(3, dtype=np.int64) + 0 * C
        return C, d, 0 * W, 0 * W_dot

    monkeypatch.setattr(symflex, "node_frame", broken)


@pytest.mark.parametrize("dropped", ["rate", "rotation"])
def test_the_dense_check_fails_when_the_node_rotation_is_dropped(monkeypatch, dropped):
    """Break test: without the node's rotation (or its rate) in the symbolic derivation,
    its mass matrix or forcing is not the dense engine's."""
    _broken_node_frame(monkeypatch, dropped)
    model = lumped_beam_tip()
    f = kd.symbolic.kane(model).lambdify()
    state = next(_states(model, 24, 1))
    M, F = f(state.q, state.u)
    Md, Fd = kd.mass_matrix(model, state), kd.forcing(model, state)
    assert np.abs(M - Md).max() > 1e-3 or np.abs(F - Fd).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("dropped", ["rate", "rotation"])
def test_the_oracle_checks_fail_when_the_node_rotation_is_dropped(monkeypatch, oracle, dropped):
    """Break test: the node's rotation dropped from the symbolic derivation makes Kane's
    equations differ from KanesMethod's; dropping its rate alone (the attitude kept)
    also makes them differ from Lagrange's, which differentiates the attitude."""
    _broken_node_frame(monkeypatch, dropped)
    model = lumped_beam_tip()
    eom = kd.symbolic.kane(model)
    f = eom.lambdify()
    state = next(_states(model, 24, 1))
    M, F = f(state.q, state.u)
    Ms, Fs = oracle(state.q, state.u)
    assert np.abs(M - Ms).max() > 1e-3 or np.abs(F - Fs).max() > 1e-3
    if dropped == "rate":
        rep = kd.symbolic.compare(eom, kd.symbolic.lagrange(model), time_budget=0.1, samples=2)
        assert not rep.equivalent and rep.differing


@pytest.mark.slow
def test_stages_and_table_show_the_node_partials_and_unfold_to_the_equations(lumped):
    """The stages name the node frame and the tip body's partials for the modal speed;
    the rows F_r + F*_r, unfolded, are the dense engine's forcing - M u̇."""
    model, eom = lumped
    st = eom.stages()
    partials = dict(st.stages[1].entries)
    assert "\\Omega_{3}" in partials  # the modal speed turns the tip body
    rows = dict(st.stages[4].entries)
    n = len(eom.u)
    exprs = [st.unfold(rows[f"F_{{{r + 1}}}"]) + st.unfold(rows[f"F^*_{{{r + 1}}}"])
             for r in range(n)]  # fmt: skip
    fn = sp.lambdify([list(eom.q), list(eom.u), list(eom.u_dot)], exprs)
    rng = np.random.default_rng(25)
    for state in _states(model, 26, 2):
        acc = rng.uniform(-1, 1, n)
        got = np.array(fn(state.q, state.u, acc), dtype=float)
        want = kd.forcing(model, state) - kd.mass_matrix(model, state) @ acc
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert "V_xi[2][:, 0]" in eom.table(max_size=10)
    Om = eom.Omega_xi
    assert Om[0] == sp.zeros(3, 1) and Om[1] == sp.zeros(3, 1) and Om[2] != sp.zeros(3, 1)


def lumped_beam_hanging(with_tip=True):
    """The lumped beam hinged to the hub at its tip node (``outer_node``, the joint
    frame turned and off the node), a tip body hinged to it at an undeformed point."""
    hub, beam, tip = lumped_beam_tip().bodies
    joints = [kd.Joint.revolute("h", None, "hub", axis=3),
              kd.Joint.revolute("hang", "hub", "beam", axis=2, inner_point=(0.3, 0.1, 0.0),
                                outer_node="tip", outer_point=_f(INNER_POINT),
                                outer_rotation=np.array(R_BI_GI, dtype=float)),
              kd.Joint.revolute("t", "beam", "tip", axis=1, inner_point=(1, 0, 0))]  # fmt: skip
    if not with_tip:
        return kd.Model([hub, beam], joints[:2], gravity=_f(GRAVITY))
    return kd.Model([hub, beam, tip], joints, gravity=_f(GRAVITY))


@pytest.fixture(scope="module")
def hanging():
    model = lumped_beam_hanging()
    return model, kd.symbolic.kane(model)


def test_a_beam_hanging_at_its_tip_node_equals_the_dense_engine(hanging):
    """``Joint.outer_node``: the beam moves relative to the joint by minus its tip node's
    motion; the symbolic mass matrix and forcing are the dense engine's."""
    model, eom = hanging
    f = eom.lambdify()
    for state in _states(model, 27):
        M, F = f(state.q, state.u)
        np.testing.assert_allclose(M, kd.mass_matrix(model, state), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(F, kd.forcing(model, state), rtol=1e-9, atol=1e-9)
    assert eom.Omega_xi[1] != sp.zeros(3, 1)  # the beam's frame turns with its node


@pytest.mark.slow
def test_lagrange_equals_kane_for_the_beam_hanging_at_its_tip_node():
    model = lumped_beam_hanging(with_tip=False)
    rep = kd.symbolic.compare(kd.symbolic.kane(model), kd.symbolic.lagrange(model),
                              time_budget=0.1, samples=2)  # fmt: skip
    assert rep.equivalent and not rep.differing, str(rep)
    assert rep.max_numeric_error < 1e-9


@pytest.mark.slow
def test_inner_and_outer_nodes_on_a_free_hub_equal_the_dense_engine():
    """Two beams hanging at their tip nodes from a free hub and from the first beam's
    root node (tests/test_flex_nodes.py's model)."""
    from tests.test_flex_nodes import _outer_nodes

    model, state = _outer_nodes()
    M, F = kd.symbolic.kane(model).lambdify()(state.q, state.u)
    np.testing.assert_allclose(M, kd.mass_matrix(model, state), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(F, kd.forcing(model, state), rtol=1e-9, atol=1e-9)


def test_geared_rotors_with_node_joints_are_refused_by_both_derivations():
    model = geared_tip_model()
    for derive in (kd.symbolic.kane, kd.symbolic.lagrange):
        with pytest.raises(kd.ModelError, match=r"geared rotors .* are not modelled yet"):
            derive(model)
