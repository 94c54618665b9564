"""Joints at nodes of flexible bodies (``Joint.inner_node``, ``outer_node``; issue 29,
item 2).

Independent oracles: finite differences of the positions and attitudes along the
motion (velocities and accelerations), the analytic frequency equation of a cantilever
with a tip mass and tip rotary inertia (kd.linearize), and the conservation of energy
(strain energy included), linear and angular momentum of a torque-free hub, beam and
tip body (which fails when the node's rotation is dropped), the dense engine against
the tree recursion, and for outer nodes a Rayleigh–Ritz model of a beam clamped at its
tip.
"""

import numpy as np
import pytest
import scipy.optimize

import kanedyn as kd
from kanedyn import joints
from kanedyn.dynamics import kinematics as kinematics_module
from kanedyn.dynamics.loads import applied_loads
from kanedyn.dynamics.partials import partials_at
from kanedyn.errors import ModelError
from tests.test_flex import _rk4 as flex_rk4


def _hub_beam_tip(gravity=(0.0, 0.0, 0.0)):
    """A free hub, a beam welded to it, a body hinged at the beam's tip node."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=False)
    tip = kd.Body("tip", 0.7, kd.inertia_tensor(0.05, 0.03, 0.04), com=(0.1, 0.02, -0.03))
    root = kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3)
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    hinge = kd.Joint.revolute("hinge", "beam", "tip", axis=2, inner_point=(2.0, 0.0, 0.0),
                              inner_node="tip", outer_point=(-0.1, 0.0, 0.0))  # fmt: skip
    model = kd.Model([hub, beam, tip], [root, arm, hinge], gravity=gravity)
    nq, n = model.nq, model.n
    q = np.zeros(nq + model.nf)
    q[:3] = (0.1, 0.2, 0.3)
    q[6] = 0.4
    q[nq:] = (0.05, -0.03, 0.04, 0.02)
    u = np.zeros(n + model.nf)
    u[:3] = (0.4, -0.3, 0.8)
    u[3:6] = (0.1, 0.0, -0.2)
    u[6] = -0.5
    u[n:] = (0.3, -0.4, 0.2, 0.25)
    return model, kd.State(q, u)


def _qdot(model, q, u):
    return np.r_[joints.qdot(model.layout, q[: model.nq], u[: model.n]), u[model.n :]]


def _angular(Rdot, R):
    W = Rdot @ R.swapaxes(-1, -2)
    return np.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], axis=-1)


def _along_the_motion(model, s, h=1e-6):
    """The forward dynamics' ``a`` at ``s``, the step ``h``, the kinematics at ``s`` and
    a step ``±h`` along the motion, and the bodies' accelerations and angular
    accelerations from the partials and remainders at ``a``."""
    q, u = s.q, s.u
    a = kd.forward_dynamics(model, s)
    k0 = kd.kinematics(model, s)
    kp = kd.kinematics(model, kd.State(q + h * _qdot(model, q, u), u + h * a))
    km = kd.kinematics(model, kd.State(q - h * _qdot(model, q, u), u - h * a))
    pn = partials_at(model, k0)
    n = model.n
    acc = pn.V @ a[:n] + pn.V_xi @ a[n:] + pn.a_r
    alpha = pn.Omega @ a[:n] + pn.Omega_xi @ a[n:] + pn.alpha_r
    return a, h, k0, kp, km, acc, alpha


def test_velocities_and_accelerations_are_the_rates_of_the_positions():
    """The outer body's velocity and angular velocity (and their rates at the forward
    dynamics' accelerations) against central differences along the motion."""
    model, s = _hub_beam_tip(gravity=(0.0, 0.0, -9.81))
    a, h, k0, kp, km, acc, alpha = _along_the_motion(model, s)
    np.testing.assert_allclose((kp.r - km.r) / (2 * h), k0.v, atol=1e-8)
    np.testing.assert_allclose(_angular((kp.R_N_B - km.R_N_B) / (2 * h), k0.R_N_B), k0.omega,
                               atol=1e-8)  # fmt: skip
    # the tip body's acceleration from the partials and remainders
    np.testing.assert_allclose(acc, (kp.v - km.v) / (2 * h), atol=1e-7)
    np.testing.assert_allclose(alpha, (kp.omega - km.omega) / (2 * h), atol=1e-7)


def test_partials_refuse_a_joint_state_when_joints_ride_on_nodes():
    model, s = _hub_beam_tip()
    with pytest.raises(ModelError, match=r"\['hinge'\] attach at nodes"):
        kd.partials(model, kd.State(s.q[: model.nq], s.u[: model.n]))


def _rk4(model, state, dt, steps):
    return flex_rk4(model, state, dt, steps, qdot=lambda q, u: _qdot(model, q, u))


def _conservation_errors(model, s0):
    s1 = _rk4(model, s0, 4e-3, 75)
    E0 = kd.kinetic_energy(model, s0) + kd.potential_energy(model, s0)
    E1 = kd.kinetic_energy(model, s1) + kd.potential_energy(model, s1)
    (P0, H0), (P1, H1) = kd.momentum(model, s0), kd.momentum(model, s1)
    return abs(E1 - E0) / abs(E0), np.abs(P1 - P0).max(), np.abs(H1 - H0).max() / np.abs(H0).max()


def test_torque_free_hub_beam_and_tip_body_conserve_energy_and_momenta():
    """Energy with strain energy, P and H conserved to RK4's accuracy with a body
    riding on the beam's tip node (its translation and rotation)."""
    model, s0 = _hub_beam_tip()
    dE, dP, dH = _conservation_errors(model, s0)
    assert dE < 1e-6 and dP < 1e-6 and dH < 1e-6


def test_conservation_and_the_rates_fail_without_the_node_rotation_rate(monkeypatch):
    """Break test: the node's rotation kept in the attitude but dropped from the
    velocities (W = 0) breaks energy conservation and the finite-difference check."""
    real = kinematics_module.node_frame

    def broken(md, k, eta, xi):
        C, d, W, wq = real(md, k, eta, xi)
        return C, d, 0.0 * W, 0.0 * wq

    monkeypatch.setattr(kinematics_module, "node_frame", broken)
    model, s0 = _hub_beam_tip()
    dE, dP, dH = _conservation_errors(model, s0)
    assert max(dE, dP, dH) > 1e-4
    with pytest.raises(AssertionError):
        test_velocities_and_accelerations_are_the_rates_of_the_positions()


def _tip_mass_frequencies(ell, rho, EI, M, J, count):
    """The cantilever with a tip mass M and tip rotary inertia J: roots of the 2×2
    determinant of the tip conditions ``EI w'' = ω²J w'`` and ``EI w''' = -ω²M w`` on
    ``w = A(cos - cosh) + B(sin - sinh)`` (clamped root), as frequencies (rad/s)."""

    def det(lam):
        b = lam / ell
        w2 = EI * b**4 / rho
        c, s, ch, sh = np.cos(lam), np.sin(lam), np.cosh(lam), np.sinh(lam)
        w = np.array([c - ch, s - sh])
        w1 = b * np.array([-s - sh, c - ch])
        w2_ = b**2 * np.array([-c - ch, -s - sh])
        w3 = b**3 * np.array([s - sh, -c - ch])
        return np.linalg.det(np.array([EI * w2_ - w2 * J * w1, EI * w3 + w2 * M * w])) / ch**2

    xs = np.linspace(0.3, 15.0, 3000)
    v = [det(x) for x in xs]
    roots = [scipy.optimize.brentq(det, a, b, xtol=1e-14)
             for a, b, fa, fb in zip(xs, xs[1:], v, v[1:], strict=False) if fa * fb < 0]  # fmt: skip
    return np.array([(r / ell) ** 2 * np.sqrt(EI / rho) for r in roots[:count]])


@pytest.mark.slow
def test_clamped_beam_with_a_tip_body_has_the_tip_mass_frequencies():
    """A rigid body welded at the tip node of a clamped beam (kd.linearize) converges,
    as the cantilever modes are added, to the analytic frequencies of a cantilever with
    that tip mass and tip rotary inertia; the rotary inertia (the node's rotation)
    lowers the first frequency by 1.9 %."""
    ell, rho, EI, M, J = 2.0, 1.5, 30.0, 0.9, 0.12
    exact = _tip_mass_frequencies(ell, rho, EI, M, J, 2)
    no_rotation = _tip_mass_frequencies(ell, rho, EI, M, 0.0, 1)
    assert no_rotation[0] > 1.015 * exact[0]
    errors = []
    for n_modes in (2, 4, 8):
        beam = kd.beam_body("beam", ell, rho, EI, n_modes=n_modes, directions=(1,),
                            stiffening=False)  # fmt: skip
        tip = kd.Body("tip", M, np.diag([0.05, 0.07, J]))
        model = kd.Model(
            [beam, tip],
            [kd.Joint.weld("clamp", None, "beam"),
             kd.Joint.weld("w", "beam", "tip", inner_point=(ell, 0, 0), inner_node=1)],
            gravity=(0.0, 0.0, 0.0),
        )  # fmt: skip
        ev = kd.linearize(model, model.initial_state()).eigenvalues
        freq = np.sort(np.abs(ev.imag))[::2][:2]
        err = (freq - exact) / exact
        assert np.all(err > -1e-6)  # assumed modes: from above
        errors.append(err)
    errors = np.array(errors)
    assert np.all(np.diff(errors, axis=0) < 0)  # converging
    assert errors[-1, 0] < 2e-4 and errors[-1, 1] < 0.03


def _with_hinge(**kw):
    beam = kd.beam_body("beam", 2.0, 1.5, 30.0, n_modes=2, directions=(1,), stiffening=False)
    hub = kd.Body("hub", 5.0, np.eye(3))
    tip = kd.Body("tip", 0.5, np.eye(3) * 0.01)
    inner = kw.pop("inner", "beam")
    return kd.Model(
        [hub, beam, tip],
        [kd.Joint.revolute("spin", None, "hub"), kd.Joint.weld("w", "hub", "beam"),
         kd.Joint.revolute("hinge", inner, "tip", inner_point=(2.0, 0, 0), **kw)],
    )  # fmt: skip


def test_bad_node_attachments_are_refused_naming_joint_and_body():
    with pytest.raises(ModelError, match=r"joint 'hinge': inner_node=2 is out of range: "
                                         r"body 'beam' has 2 nodes"):  # fmt: skip
        _with_hinge(inner_node=2)
    with pytest.raises(ModelError, match=r"joint 'hinge'.*no such node.*'root', 'tip'"):
        _with_hinge(inner_node="middle")
    with pytest.raises(ModelError, match=r"joint 'hinge'.*inner body 'hub' is rigid"):
        _with_hinge(inner="hub", inner_node=0)
    with pytest.raises(
        ModelError, match=r"joint 'hinge'.*needs a flexible inner body; the inner side is N"
    ):
        kd.Joint.revolute("hinge", None, "tip", inner_node=0)
    with pytest.raises(ModelError, match=r"joint 'hinge': inner_node must be a node index"):
        kd.Joint.revolute("hinge", "beam", "tip", inner_node=-1)
    with pytest.raises(ModelError, match=r"loop 'l'.*cannot attach at a node"):
        kd.Loop.revolute("l", "beam", "tip", inner_node=0)


def test_a_node_by_name_is_the_node_by_index():
    a, b = _with_hinge(inner_node="tip"), _with_hinge(inner_node=1)
    s = a.set_modes(a.initial_state(), "beam", amplitudes=[0.1, -0.05], rates=[0.3, 0.2])
    np.testing.assert_array_equal(kd.forward_dynamics(a, s), kd.forward_dynamics(b, s))


def _two_beams(gravity=(0.0, 0.0, -9.81)):
    """A flexible body riding on a node: a second beam hinged at the first's tip node
    (with a rotated joint frame and an offset from the node), on a spinning hub."""
    hub = kd.Body("hub", 5.0, kd.inertia_tensor(1.0, 1.5, 2.0))
    b1 = kd.beam_body("b1", 1.5, 1.2, (20.0, 35.0), n_modes=2, stiffening=True)
    b2 = kd.beam_body("b2", 1.0, 0.8, 15.0, n_modes=2, directions=(1,), stiffening=False)
    model = kd.Model(
        [hub, b1, b2],
        [kd.Joint.revolute("spin", None, "hub", axis=3),
         kd.Joint.weld("w", "hub", "b1", inner_point=(0.2, 0.0, 0.0)),
         kd.Joint.revolute("elbow", "b1", "b2", axis=2, inner_point=(1.5, 0.02, 0.0),
                           inner_rotation=kd.euler_to_dcm("123", (0.1, -0.2, 0.3)),
                           inner_node="tip", stiffness=3.0)],
        gravity=gravity,
    )  # fmt: skip
    q = np.r_[0.3, 0.5, 0.04, -0.03, 0.02, 0.05, -0.06, 0.03]
    u = np.r_[1.2, -0.7, 0.3, 0.5, -0.2, 0.4, 0.6, -0.3]
    return model, kd.State(q, u)


@pytest.mark.parametrize("build", [_hub_beam_tip, _two_beams, "outer"])
def test_dense_and_native_accelerations_agree(build):
    """Kane's dense equations (CRBA over [u | s | ξ]) and the tree recursion (ABA with
    the modal speeds condensed after the node joints' articulated inertias), on floats
    and compiled: the same accelerations to round-off."""
    from kanedyn.dynamics.flex_recursion import flexible_run
    from kanedyn.dynamics.recursion import Recursion

    build = _outer_nodes if build == "outer" else build  # defined below
    model, s = build(gravity=(0.0, 0.0, -9.81))
    nq, n = model.nq, model.n
    dense = kd.forward_dynamics(model, s)
    scale = np.abs(dense).max()
    rec = Recursion(model, s.q[:nq], s.u[:n])
    native = np.array(flexible_run(rec, s.q[nq:], s.u[n:])[0], dtype=float)
    np.testing.assert_allclose(native, dense, rtol=0, atol=1e-12 * scale)
    cm = kd.compile_model(model)
    compiled = np.array(cm.rhs(s.q, s.u))[: n + model.nf]
    np.testing.assert_allclose(compiled, dense, rtol=0, atol=1e-12 * scale)
    # the loads as inputs (gravity and springs resolved at the deflected kinematics)
    loads = applied_loads(model, kd.State(s.q[:nq], s.u[:n]), kd.kinematics(model, s))
    with_loads = np.array(cm.rhs_with_loads(s.q, s.u, loads))[: n + model.nf]
    np.testing.assert_allclose(with_loads, dense, rtol=0, atol=1e-12 * scale)


def test_a_flexible_body_on_a_node_conserves_energy():
    """The second beam's own modes ride on the first's tip node (their partials gain
    the first beam's modal columns): energy with both strain energies conserved."""
    model, s0 = _two_beams(gravity=(0.0, 0.0, 0.0))
    E = [kd.kinetic_energy(model, s) + kd.potential_energy(model, s)
         for s in (s0, _rk4(model, s0, 2e-3, 30), _rk4(model, s0, 1e-3, 60))]  # fmt: skip
    errors = np.abs(np.array(E[1:]) - E[0]) / E[0]
    assert errors[1] < 2e-6 and errors[1] < errors[0] / 16  # RK4's error, falling as dt⁴


def test_simulate_runs_node_joints_on_the_compiled_engine_as_densely():
    model, s0 = _hub_beam_tip()
    fast = kd.simulate(model, s0, 0.05, dt=0.005, engine="compiled")
    dense = kd.simulate(model, s0, 0.05, dt=0.005, engine="dense")
    np.testing.assert_allclose(fast.q[-1], dense.q[-1], rtol=0, atol=1e-10)


def test_trajectory_histories_of_a_body_on_a_node():
    """The trajectory's body history of the tip body is kd.kinematics at its states,
    and its node history is the tip node's (the hinge's inner point)."""
    model, s0 = _hub_beam_tip()
    traj = kd.simulate(model, s0, 0.04, dt=0.01, engine="dense")
    tip = traj.body("tip")
    node = traj.node("beam", "tip")
    for i in (0, len(traj.t) - 1):
        kin = kd.kinematics(model, traj.state(i))
        np.testing.assert_allclose(tip.position[i], kin.r[2], atol=1e-12)
        np.testing.assert_allclose(tip.R_N_B[i], kin.R_N_B[2], atol=1e-12)
        np.testing.assert_allclose(node.position[i], kin.o[2], atol=1e-12)  # Gi = Go here


def test_animation_frames_place_the_body_on_the_node():
    from kanedyn.animation.frames import frames

    model, s0 = _hub_beam_tip()
    traj = kd.simulate(model, s0, 0.02, dt=0.01)
    fr = frames(traj)
    np.testing.assert_allclose(fr.p[-1], kd.kinematics(model, traj.state(len(traj.t) - 1)).p,
                               atol=1e-12)  # fmt: skip


# ------------------------------------------------------------------- outer nodes


def _outer_nodes(gravity=(0.0, 0.0, -9.81)):
    """Two beams hanging at their tip nodes (Joint.outer_node) from a free hub and from
    the first beam's root node (Joint.inner_node)."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    b1 = kd.beam_body("b1", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=False)
    b2 = kd.beam_body("b2", 1.0, 0.8, (15.0, 20.0), n_modes=1, stiffening=False)
    model = kd.Model(
        [hub, b1, b2],
        [kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3),
         kd.Joint.revolute("h1", "hub", "b1", axis=2, inner_point=(0.5, 0.1, 0.0),
                           outer_node="tip", outer_point=(2.0, 0.0, 0.0),
                           outer_rotation=kd.euler_to_dcm("123", (0.1, 0.2, -0.1))),
         kd.Joint.revolute("h2", "b1", "b2", axis=3, inner_node="root", outer_node=1,
                           outer_point=(1.0, 0.0, 0.0))],
        gravity=gravity,
    )  # fmt: skip
    rng = np.random.default_rng(3)
    q = np.zeros(model.nq_total)
    q[:3], q[6], q[7] = (0.1, 0.2, 0.3), 0.3, -0.4
    q[model.nq :] = rng.normal(size=model.nf) * 0.1
    return model, kd.State(q, rng.normal(size=model.n_total) * 0.5)


def test_outer_node_rates_are_those_of_the_positions():
    """Bodies whose frames hang from their own nodes: velocities and accelerations
    against central differences, and Go sits on the deflected node."""
    model, s = _outer_nodes()
    a, h, k0, kp, km, acc, alpha = _along_the_motion(model, s)
    np.testing.assert_allclose((kp.r - km.r) / (2 * h), k0.v, atol=1e-8)
    np.testing.assert_allclose(_angular((kp.R_N_B - km.R_N_B) / (2 * h), k0.R_N_B), k0.omega,
                               atol=1e-8)  # fmt: skip
    scale = np.abs(a).max()
    np.testing.assert_allclose(acc, (kp.v - km.v) / (2 * h), atol=1e-8 * scale)
    np.testing.assert_allclose(alpha, (kp.omega - km.omega) / (2 * h), atol=1e-8 * scale)
    from kanedyn.dynamics.flex import node_motion

    tip = node_motion(model, s, "b1", "tip")
    np.testing.assert_allclose(tip.position, k0.o[1], atol=1e-14)


def test_outer_nodes_conserve_energy_and_momenta():
    """Energy, P and H conserved to RK4's accuracy (falling as dt⁴)."""
    model, s0 = _outer_nodes(gravity=(0.0, 0.0, 0.0))
    E0 = kd.kinetic_energy(model, s0) + kd.potential_energy(model, s0)
    (P0, H0), errors = kd.momentum(model, s0), []
    for dt, steps in ((2e-3, 30), (1e-3, 60)):
        s1 = _rk4(model, s0, dt, steps)
        P1, H1 = kd.momentum(model, s1)
        E1 = kd.kinetic_energy(model, s1) + kd.potential_energy(model, s1)
        errors.append((abs(E1 - E0) / E0, np.abs(P1 - P0).max() / np.abs(P0).max(),
                       np.abs(H1 - H0).max() / np.abs(H0).max()))  # fmt: skip
    errors = np.array(errors)
    assert np.all(errors[1] < 3e-6) and np.all(errors[1] < errors[0] / 8)


def test_a_beam_welded_at_its_tip_node_has_the_ritz_frequencies():
    """A cantilever (modes clamped at its root) welded to N at its tip node: its frame
    then moves with the tip's deflection, and the frequencies are those of the
    Rayleigh–Ritz model of a beam clamped at the tip with the shape functions
    ``φ_k(s) - φ_k(ℓ) - φ_k'(ℓ)(s - ℓ)``, computed here from the closed-form modes."""
    ell, rho, EI, nm = 2.0, 1.5, 30.0, 3
    f = lambda x: np.cos(x) * np.cosh(x) + 1.0  # noqa: E731
    roots = [scipy.optimize.brentq(f, (k - 0.5) * np.pi - 0.9, (k - 0.5) * np.pi + 0.9)
             for k in range(1, nm + 1)]  # fmt: skip
    x, w = np.polynomial.legendre.leggauss(200)
    s, w = 0.5 * ell * (x + 1), 0.5 * ell * w

    def phi(bl, x):
        b = bl / ell
        sig = (np.cosh(bl) + np.cos(bl)) / (np.sinh(bl) + np.sin(bl))
        ch, co, sh, si = np.cosh(b * x), np.cos(b * x), np.sinh(b * x), np.sin(b * x)
        return (ch - co - sig * (sh - si), b * (sh + si - sig * (ch - co)),
                b * b * (ch + co - sig * (sh + si)))  # fmt: skip

    shapes, curvatures = [], []
    for bl in roots:
        f0, _, f2 = phi(bl, s)
        fl, dfl, _ = phi(bl, ell)
        shapes.append(f0 - fl - dfl * (s - ell))
        curvatures.append(f2)
    Y, C = np.array(shapes), np.array(curvatures)
    ritz = np.sqrt(scipy.linalg.eigh(EI * (C * w) @ C.T, rho * (Y * w) @ Y.T, eigvals_only=True))
    beam = kd.beam_body("beam", ell, rho, EI, n_modes=nm, directions=(1,), stiffening=False)
    model = kd.Model(
        [beam],
        [kd.Joint.weld("clamp", None, "beam", outer_node="tip", outer_point=(ell, 0.0, 0.0))],
        gravity=(0.0, 0.0, 0.0),
    )
    ev = kd.linearize(model, model.initial_state()).eigenvalues
    np.testing.assert_allclose(np.sort(np.abs(ev.imag))[::2], ritz, rtol=1e-6)


def test_outer_nodes_on_the_native_engine_and_a_rigid_outer_body_refused():
    model, s0 = _outer_nodes()
    native = kd.simulate(model, s0, 0.02, dt=0.01)  # engine="auto": native
    dense = kd.simulate(model, s0, 0.02, dt=0.01, engine="dense")
    np.testing.assert_allclose(native.q[-1], dense.q[-1], rtol=0, atol=1e-10)
    with pytest.raises(ModelError, match=r"joint 'h'.*outer_node=0.*outer body 'hub' is rigid"):
        kd.Model(
            [kd.Body("hub", 1.0, np.eye(3))], [kd.Joint.revolute("h", None, "hub", outer_node=0)]
        )


def geared_tip_model():
    """A clamped one-mode beam with a tip body hinged at its tip node by a geared rotor."""
    beam = kd.beam_body("beam", 2.0, 1.5, 30.0, n_modes=1, directions=(1,), stiffening=False)
    tip = kd.Body("tip", 0.5, np.eye(3) * 0.01)
    return kd.Model(
        [beam, tip],
        [kd.Joint.weld("clamp", None, "beam"),
         kd.Joint.revolute("hinge", "beam", "tip", inner_point=(2.0, 0, 0), inner_node="tip",
                           rotor=kd.Rotor(1e-4, ratio=50.0))],
    )  # fmt: skip


def test_geared_rotors_with_node_joints_are_refused_on_both_engines():
    model = geared_tip_model()
    s = model.initial_state()
    for engine in ("dense", "compiled"):
        with pytest.raises(ModelError, match=r"geared rotors .* are not modelled yet"):
            kd.simulate(model, s, 0.01, engine=engine)


@pytest.mark.parametrize("build", [_hub_beam_tip, _outer_nodes])
def test_ensembles_of_node_joints_are_kd_simulate_member_by_member(build):
    model, s = build()
    states = kd.States(np.stack([s.q, s.q]), np.stack([s.u, 0.5 * s.u]))
    ens = kd.simulate_ensemble(model, states, 0.02, 1e-3)
    for b in range(2):
        ref = kd.simulate(model, states[b], 0.02, 1e-3)
        np.testing.assert_allclose(ens.q[:, b], ref.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ens.u[:, b], ref.u, rtol=0, atol=1e-12)


@pytest.mark.parametrize("build", [_hub_beam_tip, _outer_nodes])
def test_c_export_of_node_joints_equals_the_dense_engine(build, tmp_path):
    import ctypes

    from tests.test_to_c import COMPILERS, compile_shared

    if not COMPILERS:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    model, s = build()
    _, c = kd.codegen.to_c(model, tmp_path, prefix="fn")
    lib = compile_shared(COMPILERS[0], [c], tmp_path / "libfn.so")
    nq, n = model.nq_total, model.n_total
    x, out = np.concatenate((s.q, s.u)), np.empty(n + nq)

    def ptr(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    assert lib.fn_rhs(ptr(x), ptr(np.zeros(model.n)), ptr(out)) == 0
    dense = kd.forward_dynamics(model, s)
    np.testing.assert_allclose(out[:n], dense, rtol=0, atol=1e-10 * np.abs(dense).max())
