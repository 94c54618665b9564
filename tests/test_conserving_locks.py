"""Lock events and joint-limit stops in the energy-momentum scheme
(kanedyn.simulation.conserving.locks).

Oracles: the same mechanism built with the locked joint welded at the locked angle
(kd.Joint.weld), run by RK4 at a small step and by the energy-momentum scheme; the
plastic impact computed here from Kane's mass matrix (kd.mass_matrix) and the KKT
projection in joint coordinates; the closed-form free fall onto a stop and the
harmonic oscillation off it.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd

I = kd.inertia_tensor
DT = 0.005
T_LOCK = 1.0


def hub_panel(weld=None) -> kd.Model:
    """A free hub, a panel on a hinge about z (welded at ``weld`` = R_Gi_Go when given)
    and a tip mass on a slide along the panel; no gravity."""
    bodies = [
        kd.Body("hub", 10.0, I(3.0, 2.5, 2.0)),
        kd.Body("panel", 1.0, I(0.2, 0.1, 0.15), com=(0.5, 0, 0)),
        kd.Body("tip", 0.5, I(0.02, 0.03, 0.04), com=(0.2, 0, 0)),
    ]
    hinge = (
        kd.Joint.revolute("h", "hub", "panel", axis=3, inner_point=(0.6, 0, 0))
        if weld is None
        else kd.Joint.weld("h", "hub", "panel", inner_point=(0.6, 0, 0), inner_rotation=weld)
    )
    joints = [
        kd.Joint.free("root", "hub"),
        hinge,
        kd.Joint.prismatic("s", "panel", "tip", axis=1, inner_point=(1.0, 0, 0)),
    ]
    return kd.Model(bodies, joints)


def start(m: kd.Model) -> kd.State:
    s = m.initial_state()
    s = m.set_joint(s, "root", rates=(0.1, 0.2, 0.3), displacement_rates=(0.01, 0, 0))
    s = m.set_joint(s, "h", angles=(0.3,), rates=(1.0,))
    return m.set_joint(s, "s", displacements=(0.1,), displacement_rates=(0.3,))


def rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


@pytest.fixture(scope="module")
def locked_run():
    m = hub_panel()
    s = start(m)
    tr = kd.simulate(m, s, 2.0, DT, method="energy-momentum", events=[kd.Lock(T_LOCK, "h")])
    before = kd.simulate(m, s, T_LOCK, DT, method="energy-momentum")  # the same steps
    return m, tr, before


def test_lock_is_a_plastic_impact(locked_run):
    """The state after the lock is the KKT projection of the state before it in Kane's
    mass matrix: the free DOFs' generalized momenta kept, the hinge rate zero."""
    m, tr, before = locked_run
    n = int(round(T_LOCK / DT))
    r = m.layout.u_index[m.joint_index("h")][0]
    q, u = before.q[-1], before.u[-1]
    M = kd.mass_matrix(m, kd.State(q, u))
    B = np.zeros((1, m.n))
    B[0, r] = 1.0
    K = np.block([[M, B.T], [B, np.zeros((1, 1))]])
    u_plus = np.linalg.solve(K, np.concatenate((M @ u, [0.0])))[: m.n]
    assert tr.t[n] == pytest.approx(T_LOCK)
    np.testing.assert_allclose(tr.q[n], q, atol=1e-12)
    np.testing.assert_allclose(tr.u[n], u_plus, atol=1e-9)
    T_before = 0.5 * u @ M @ u
    T_after = 0.5 * tr.u[n] @ M @ tr.u[n]
    assert T_after < T_before - 5e-4
    assert T_after == pytest.approx(0.5 * u_plus @ M @ u_plus, rel=1e-9)
    # the scheme's own energy drops by the same amount at the event
    assert tr.run.energy[n - 1] - tr.run.energy[n] == pytest.approx(T_before - T_after, rel=1e-6)


def test_energy_and_momentum_through_the_lock(locked_run):
    """Energy conserved between events to the Newton tolerance; linear and angular
    momentum through the lock too (the impulse is internal)."""
    _, tr, _ = locked_run
    n = int(round(T_LOCK / DT))
    E = tr.run.energy
    assert np.ptp(E[:n]) < 1e-10 * abs(E[0])
    assert np.ptp(E[n:]) < 1e-10 * abs(E[0])
    assert E[n] < E[n - 1]
    assert np.max(np.ptp(tr.run.angular_momentum, axis=0)) < 1e-11
    assert np.max(np.ptp(tr.run.linear_momentum, axis=0)) < 1e-11


def test_locked_motion_is_the_welded_mechanism(locked_run):
    """After the lock the mechanism moves as the one with the hinge welded at the locked
    angle, from the projected state: the energy-momentum run of the welded model agrees
    to round-off, RK4 at 1 ms to its own accuracy."""
    m, tr, _ = locked_run
    n = int(round(T_LOCK / DT))
    k = m.joint_index("h")
    iq, iu = m.layout.q_index[k][0], m.layout.u_index[k][0]
    welded = hub_panel(weld=rot_z(tr.q[n, iq]))
    keep_q, keep_u = np.delete(np.arange(m.nq), iq), np.delete(np.arange(m.n), iu)
    s_w = kd.State(tr.q[n, keep_q], tr.u[n, keep_u])
    em = kd.simulate(welded, s_w, 2.0 - T_LOCK, DT, method="energy-momentum")
    rk4 = kd.simulate(welded, s_w, 2.0 - T_LOCK, 1e-3)
    np.testing.assert_allclose(tr.q[n:, iq], tr.q[n, iq], atol=1e-12)
    np.testing.assert_allclose(tr.q[n:, keep_q], em.q, atol=1e-10)
    np.testing.assert_allclose(tr.u[n:, keep_u], em.u, atol=1e-6)
    np.testing.assert_allclose(tr.q[-1, keep_q], rk4.q[-1], atol=2e-6)
    np.testing.assert_allclose(tr.u[-1, keep_u], rk4.u[-1], atol=2e-6)


def test_unlock_frees_the_slide():
    """A slide locked then unlocked: held at its locked value in between, no energy
    lost at the unlock (constant from the lock on), and free again after it."""
    m = hub_panel()
    tr = kd.simulate(m, start(m), 1.5, DT, method="energy-momentum",
                     events=[kd.Lock(0.5, "s"), kd.Unlock(1.0, "s")])  # fmt: skip
    E = tr.run.energy
    n1, n2 = int(round(0.5 / DT)), int(round(1.0 / DT))
    assert E[n1] < E[n1 - 1] - 1e-3
    assert np.ptp(E[n1:]) < 1e-10 * abs(E[0])
    iq = m.layout.q_index[m.joint_index("s")][0]
    np.testing.assert_allclose(tr.q[n1 : n2 + 1, iq], tr.q[n1, iq], atol=1e-12)
    # the tip moves again after the unlock (the hub spins and the slide is free)
    assert abs(tr.q[-1, iq] - tr.q[n2, iq]) > 1e-4


def test_null_space_reduction_refuses_locks():
    m = hub_panel()
    method = kd.EnergyMomentum(reduction="null-space")
    with pytest.raises(kd.ModelError, match="locked joints .* need reduction='full'"):
        kd.simulate(m, start(m), 0.1, DT, method=method, events=[kd.Lock(0.05, "h")])


# ------------------------------------------------------------------------------ stops
G = 9.81


def slider(stiffness=0.0, lower=-0.5, upper=0.5, gravity=G) -> kd.Model:
    """A block on a vertical slide (z up), limits [lower, upper] m."""
    body = kd.Body("block", mass=1.0, inertia=I(0.1, 0.1, 0.1))
    joint = kd.Joint.prismatic("lift", None, "block", axis=3, stiffness=stiffness,
                               limits=kd.JointLimits(lower=lower, upper=upper))  # fmt: skip
    return kd.Model([body], [joint], gravity=(0.0, 0.0, -gravity))


def test_falling_slider_is_held_at_the_stop():
    """Free fall from rest onto the lower stop at 0.5 m below: caught at the step
    boundary after t* = √(2·0.5/g), held there at rest afterwards (gravity keeps the
    stop pushing)."""
    m = slider()
    dt = 0.01
    tr = kd.simulate(m, m.initial_state(), 1.0, dt, method="energy-momentum", limits="stop")
    t_star = np.sqrt(2 * 0.5 / G)
    on = np.nonzero(tr.q[:, 0] <= -0.5 + 1e-12)[0]
    assert tr.t[on[0]] - t_star == pytest.approx(0.5 * dt, abs=0.5 * dt)
    assert np.all(np.diff(on) == 1) and on[-1] == len(tr.t) - 1
    np.testing.assert_allclose(tr.q[on[0] :, 0], -0.5, atol=1e-12)
    np.testing.assert_allclose(tr.u[on[0] :, 0], 0.0, atol=1e-9)
    # before the stop: the free fall, which the midpoint rule integrates exactly
    free = tr.t < t_star
    np.testing.assert_allclose(tr.q[free, 0], -0.5 * G * tr.t[free] ** 2, atol=1e-10)
    (crossing,) = tr.limit_crossings
    assert (crossing.joint, crossing.bound) == ("lift", "lower")
    assert crossing.t == pytest.approx(tr.t[on[0]])


@pytest.mark.slow
def test_stop_releases_when_the_spring_pulls_back():
    """No gravity, a spring k = 4 N/m about 0, thrown down at 1 m/s onto the stop at
    -0.2 m: held plastically, released at once (the spring pulls the block back), and
    then the harmonic motion -0.2 cos(2 (t - t_r)) between the two stops at ±0.2 m,
    with the upper stop reached at rest (never crossed)."""
    m = slider(stiffness=4.0, lower=-0.2, upper=0.2, gravity=0.0)
    s = m.set_joint(m.initial_state(), "lift", displacements=(0.0,), displacement_rates=(-1.0,))
    dt = 1e-3
    tr = kd.simulate(m, s, 3.0, dt, method="energy-momentum", limits="stop")
    # closed form before the stop: 0.5 sin(2t) reaches -0.2 at t* = asin(0.4)/2
    t_star = np.arcsin(0.4) / 2
    hit = int(np.nonzero(tr.q[:, 0] <= -0.2 + 1e-12)[0][0])
    assert tr.t[hit] - t_star == pytest.approx(0.5 * dt, abs=0.5 * dt)
    assert tr.u[hit, 0] == pytest.approx(0.0, abs=1e-9)
    assert np.all(tr.q[:, 0] >= -0.2 - 1e-12)
    # released at the next step: from rest at the bound, the oscillation -0.2 cos(2τ)
    after = tr.t > tr.t[hit] + 2 * dt
    tau = tr.t[after] - tr.t[hit]
    np.testing.assert_allclose(tr.q[after, 0], -0.2 * np.cos(2 * tau), atol=2e-3)
    assert np.max(tr.q[:, 0]) == pytest.approx(0.2, abs=1e-5)


def test_stop_and_lock_events_on_a_hinge():
    """A double pendulum released at -1 rad swings up to a stop at -0.3 rad (the upper
    bound) with its elbow locked by an event: held there (gravity pulls the locked
    pendulum back into the stop, towards 0), the elbow kept at its locked angle."""
    m = kd.examples.chain(2)
    stop = kd.JointLimits(lower=-2.0, upper=-0.3)
    joints = [attrs.evolve(j, limits=stop) if j.name == "joint0" else j for j in m.joints]
    model = kd.Model(list(m.bodies), joints, gravity=tuple(m.gravity), planar=m.planar)
    s = model.set_joint(model.initial_state(), "joint0", angles=(-1.0,))
    s = model.set_joint(s, "joint1", angles=(0.4,))
    tr = kd.simulate(model, s, 2.0, 0.005, method="energy-momentum", limits="stop",
                     events=[kd.Lock(0.1, "joint1")])  # fmt: skip
    assert np.all(tr.q[:, 0] <= -0.3 + 1e-12)
    on = np.nonzero(tr.q[:, 0] >= -0.3 - 1e-12)[0]
    assert on.size and np.all(np.diff(on) == 1) and on[-1] == len(tr.t) - 1
    assert tr.limit_crossings[0].bound == "upper"
    n = int(round(0.1 / 0.005))
    np.testing.assert_allclose(tr.q[n:, 1], tr.q[n, 1], atol=1e-12)
    np.testing.assert_allclose(tr.u[on[0] :], 0.0, atol=1e-8)
