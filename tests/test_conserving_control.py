"""Sampled controllers under the energy-momentum scheme (zero-order hold).

Oracles: the discrete work of the held torques computed here from the commands the
control law returned and the output joint angles; an RK4 run of Kane's equations with
the same controller (kd.simulate's own sampler); the controller's setpoint.
"""

from __future__ import annotations

import numpy as np

import kanedyn as kd


def flat_double_pendulum() -> kd.Model:
    m = kd.examples.double_pendulum()
    return kd.Model(m.bodies, m.joints, gravity=(0.0, 0.0, 0.0))


def pd(setpoint, Kp=10.0, Kd=3.0, log=None):
    """A PD law on both hinges; ``log`` collects (t, τ) of every sample."""

    def law(t, model, state):
        tau = -Kp * (state.q - setpoint) - Kd * state.u
        if log is not None:
            log.append((t, tau.copy()))
        return [kd.JointLoad("joint0", [tau[0]]), kd.JointLoad("joint1", [tau[1]])]

    return law


def start(m):
    s = m.set_joint(m.initial_state(), "joint0", angles=(1.0,), rates=(0.3,))
    return m.set_joint(s, "joint1", angles=(-0.5,), rates=(0.5,))


def test_energy_changes_by_the_discrete_work_of_the_held_torque():
    """E_{n+1} - E_n = τ_held · (q_{n+1} - q_n) on every step (no springs or dampers),
    with τ held over 5 steps between samples: the commands' work is accounted exactly."""
    m = flat_double_pendulum()
    s = start(m)
    log = []
    h, period = 0.01, 0.05
    ctrl = kd.Controller(period, pd(np.array([0.5, -0.3]), log=log))
    tr = kd.simulate(m, s, 2.0, h, method="energy-momentum", controller=ctrl)
    times = np.array([t for t, _ in log])
    np.testing.assert_allclose(times, np.arange(40) * period, atol=1e-12)
    # the torque held on step n is the last sample at or before t_n
    k = np.searchsorted(times, tr.t[:-1] + 1e-9, side="right") - 1
    tau = np.array([tau for _, tau in log])[k]
    work = np.sum(tau * np.diff(tr.q, axis=0), axis=1)
    E = tr.total_energy
    assert np.max(np.abs(np.diff(E))) > 1e-3  # the controller does work
    np.testing.assert_allclose(np.diff(E), work, rtol=0, atol=1e-10 * np.max(np.abs(E)))
    np.testing.assert_allclose(tr.run.work[1:], np.cumsum(work), atol=1e-10 * np.max(np.abs(E)))


def test_pd_controller_drives_the_joints_to_the_setpoint_like_rk4():
    """A PD law sampled every 0.02 s (held over two steps) drives both hinges to the
    setpoint; the run follows RK4 with the same controller."""
    m = flat_double_pendulum()
    s = start(m)
    setpoint = np.array([0.5, -0.3])
    ctrl = kd.Controller(0.02, pd(setpoint))
    em = kd.simulate(m, s, 10.0, 0.01, method="energy-momentum", controller=ctrl, output_every=0.1)
    rk4 = kd.simulate(m, s, 10.0, 0.01, controller=ctrl, output_every=0.1)
    np.testing.assert_allclose(em.q[-1], setpoint, atol=5e-4)
    assert np.max(np.abs(em.q[0] - setpoint)) > 0.1
    np.testing.assert_allclose(em.q, rk4.q, atol=1e-4)


def test_controller_with_a_lock_event():
    """A lock event in a controlled run holds its joint at the locked angle (the lock
    takes the controller's torque on it)."""
    m = flat_double_pendulum()
    ctrl = kd.Controller(0.05, pd(np.zeros(2)))
    tr = kd.simulate(m, start(m), 1.0, 0.01, method="energy-momentum", controller=ctrl,
                     events=[kd.Lock(0.5, "joint0")])  # fmt: skip
    n = int(round(0.5 / 0.01))
    np.testing.assert_allclose(tr.q[n:, 0], tr.q[n, 0], atol=1e-12)
    assert np.ptp(tr.q[:n, 0]) > 1e-3 and np.ptp(tr.q[n:, 1]) > 1e-3


def test_the_work_identity_fails_with_an_end_point_gradient(monkeypatch):
    """The identity above is the scheme's, not the bookkeeping's: with the end-point
    Jacobian in place of the discrete gradient the energy change misses the work."""
    from tests.test_conserving import use_end_point_gradient

    use_end_point_gradient(monkeypatch)
    m = flat_double_pendulum()
    ctrl = kd.Controller(0.05, pd(np.array([0.5, -0.3])))
    tr = kd.simulate(m, start(m), 1.0, 0.05, method="energy-momentum", controller=ctrl)
    r = tr.run
    assert np.max(np.abs((r.energy - r.energy[0]) - r.work)) > 1e-4 * np.max(np.abs(r.energy))
