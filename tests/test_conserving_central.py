"""The energy-momentum step in a central gravity field (kd.CentralGravity): the field's
potential is a term of the scheme with a discrete gradient in rotation invariants
(kanedyn.simulation.conserving.field).

Oracles: the energy readout of the joint-coordinate trajectory (Kane's kinetic energy
and the field's potential, not the scheme's director energy); the angular momentum
about the field's centre from the kinematics; RK4 on the native engine at a small step.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.model.plan import params_of
from kanedyn.simulation.conserving.formulation import redundant, to_redundant


def spacecraft(J2: float = 0.0) -> tuple[kd.Model, kd.State, kd.Orbit]:
    """A hub with a 12 m panel on a hinge with a spring (no damper), in a 7000 km
    circular orbit, tumbling slowly relative to LVLH, the hinge deflected."""
    hub = kd.Body("hub", mass=400.0, inertia=kd.inertia_tensor(300.0, 250.0, 200.0))
    L, m = 12.0, 60.0
    panel = kd.Body("panel", mass=m, com=(0.0, 0.0, -L / 2),
                    inertia=kd.inertia_tensor(m * L**2 / 12, m * L**2 / 12 + 20.0, 20.0))  # fmt: skip
    joints = [
        kd.Joint.free("root", "hub"),
        kd.Joint.revolute("hinge", "hub", "panel", axis=1, inner_point=(0, 0, -1.0),
                          stiffness=0.05),
    ]  # fmt: skip
    model = kd.Model([hub, panel], joints, gravity=kd.CentralGravity(J2=J2))
    orbit = kd.Orbit.circular(7.0e6)
    state = orbit.place(model, model.initial_state(), "root", angles=(0.3, 0.5, 0.2),
                        rates=(0.002, -0.001, 0.003))  # fmt: skip
    q = state.q.copy()
    q[model.layout.q_index[1][0]] = 0.4
    return model, kd.State(q, state.u), orbit


def angular_momentum(model: kd.Model, traj: kd.Trajectory) -> np.ndarray:
    """``Σ m (r - c) × v + R I Rᵀ ω`` about the field's centre, from the kinematics."""
    pa = params_of(model)
    c = np.asarray(model.central_gravity.center)
    out = []
    for q, u in zip(traj.q, traj.u, strict=True):
        kin = kinematics_at(model, q, u)
        H = np.zeros(3)
        for i in range(model.nb):
            R = np.asarray(kin.R_N_B[i])
            H += pa.mass[i] * np.cross(kin.r[i] - c, kin.v[i])
            H += R @ pa.inertia[i] @ R.T @ kin.omega[i]
        out.append(H)
    return np.array(out)


def test_energy_conserved_over_orbits():
    """Kinetic + spring + field potential over three orbits at 100 steps per orbit: the
    drift stays at the round-off of an energy of 1.3e10 J (5e-5 J). With the
    gravity-gradient term's torque removed from the discrete gradient (its invariants'
    gradients on the directors zeroed), the drift is 1.4e-3 J and this test fails
    (checked once by hand)."""
    model, state, orbit = spacecraft()
    T = orbit.period
    traj = kd.simulate(model, state, 3 * T, T / 100, method="energy-momentum", progress=False)
    E = traj.total_energy
    assert abs(E[0]) > 1e10
    assert np.max(np.abs(E - E[0])) < 3e-4
    r = traj.run
    assert np.max(np.abs(r.energy - r.energy[0])) < 3e-4


def test_angular_momentum_about_centre():
    """J2 = 0: the angular momentum about the centre (5e13 kg m²/s) is conserved to
    round-off; with J2 only its pole (z) component is."""
    model, state, orbit = spacecraft()
    T = orbit.period
    traj = kd.simulate(model, state, T / 2, T / 100, method="energy-momentum", progress=False)
    H = angular_momentum(model, traj)
    assert np.linalg.norm(H[0]) > 1e13
    assert np.max(np.abs(H - H[0])) < 1e-13 * np.linalg.norm(H[0])

    model, state, orbit = spacecraft(J2=kd.EARTH_J2)
    traj = kd.simulate(model, state, T / 2, T / 100, method="energy-momentum", progress=False)
    H = angular_momentum(model, traj)
    assert np.max(np.abs(H[:, 2] - H[0, 2])) < 1e-12 * np.linalg.norm(H[0])
    assert np.max(np.abs(H[:, :2] - H[0, :2])) > 1e3  # J2 turns H (1e4 here; 0.5 without)


def test_second_order_against_rk4():
    """At an eighth of an orbit, the hub's and panel's attitudes and the hinge angle against
    RK4 (native engine, 0.45 s steps): halving the step divides the error by about 4."""
    model, state, orbit = spacecraft()
    T = orbit.period
    tf = T / 8
    ref = kd.simulate(model, state, tf, tf / 1600, method="rk4", progress=False)
    assert ref.engine == "native"
    k = model.layout.q_index[1][0]

    def error(n: int) -> float:
        traj = kd.simulate(model, state, tf, tf / n, method="energy-momentum", progress=False)
        kin = kinematics_at(model, traj.q[-1], traj.u[-1])
        kin_ref = kinematics_at(model, ref.q[-1], ref.u[-1])
        e = np.max(np.abs(np.asarray(kin.R_N_B) - np.asarray(kin_ref.R_N_B)))
        e = max(e, float(np.max(np.abs(kin.r - kin_ref.r))) / 7e6)
        return max(e, abs(traj.q[-1][k] - ref.q[-1][k]))

    e1, e2 = error(50), error(100)
    assert e1 < 5e-2
    assert 3.3 < e1 / e2 < 4.7


def test_discrete_gradient_in_invariants():
    """The discrete gradient gives ΔV exactly and no moment about the centre (its
    components are orthogonal to a rotation of every position and director about c).
    Gonzalez's formula applied to the body coordinates instead gives ΔV but a moment."""
    model, state, orbit = spacecraft()
    red = redundant(model)
    x, v = to_redundant(red, state)
    dx = 30.0 * v
    f, _ = red.central.discrete_gradient(x, dx)
    dV = red.central.potential(x + dx) - red.central.potential(x)
    assert abs(f @ dx - dV) < 1e-12 * abs(red.central.potential(x))
    z = x + 0.5 * dx
    moment = np.zeros(3)
    for b in red.bodies:
        moment += np.cross(b.pos(z), b.pos.L @ f)
        for d in b.dirs:
            moment += np.cross(d(z), d.L @ f)
    assert np.linalg.norm(moment) < 1e-12 * np.linalg.norm(f) * 7e6
    # Gonzalez's formula on the coordinates themselves, with the exact midpoint gradient
    # (the invariant form's ∇V(z), whose moment is zero): energy, but a moment ~1e5 N m
    g = np.zeros(red.nx)
    piz, grads, _ = red.central._invariants(z, dx)
    for t, kern in red.central._terms:
        cols = red.central._columns(t)
        gz = red.central._eval(kern, piz[:, cols])[1]
        g += sum(gz[i] @ grads[i][cols] for i in range(model.nb))
    plain = g + (dV - g @ dx) / (dx @ dx) * dx
    assert abs(plain @ dx - dV) < 1e-12 * abs(red.central.potential(x))
    moment_plain = np.zeros(3)
    for b in red.bodies:
        moment_plain += np.cross(b.pos(z), b.pos.L @ plain)
        for d in b.dirs:
            moment_plain += np.cross(d(z), d.L @ plain)
    assert np.linalg.norm(moment_plain) > 1e6 * np.linalg.norm(moment)


def test_coverage_cell():
    """The coverage page's cell: the central field runs on the energy-momentum step."""
    from kanedyn import coverage

    probe = dict(coverage.FEATURES)["central gravity"]()
    traj = kd.simulate(probe.model, probe.state, 2.0, 1.0, method="energy-momentum",
                       progress=False)  # fmt: skip
    assert np.all(np.isfinite(traj.q))


@pytest.mark.parametrize("J2", [0.0])
def test_traj_energy_readout_includes_field(J2: float) -> None:
    """The scheme's energy and the trajectory's readout agree (the field is in both)."""
    model, state, orbit = spacecraft(J2)
    traj = kd.simulate(model, state, 60.0, 30.0, method="energy-momentum", progress=False)
    assert abs(traj.run.energy[0] - traj.total_energy[0]) < 1e-5 * 1e-6 * abs(traj.run.energy[0])


@pytest.mark.parametrize("method", ["energy-momentum", "rk4"])
def test_trajectory_readout_about_the_centre_is_the_conserved_momentum(method: str) -> None:
    """``traj.angular_momentum_about()`` (default: the field's centre) equals the
    kinematics' ``Σ m (r - c) × v + R I Rᵀ ω`` about the centre, on the energy-momentum
    run (whose ``Run.angular_momentum`` is about the system mass centre) and on RK4;
    ``traj.angular_momentum`` (about the mass centre) is not conserved: the
    gravity-gradient torque turns it."""
    model, state, orbit = spacecraft()
    T = orbit.period
    traj = kd.simulate(model, state, T / 4, T / 100, method=method, progress=False)
    H = angular_momentum(model, traj)
    scale = np.linalg.norm(H[0])
    np.testing.assert_allclose(traj.angular_momentum_about(), H, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(traj.angular_momentum_about((0.0, 0.0, 0.0)), H, rtol=0,
                               atol=1e-14 * scale)  # fmt: skip
    Hc = traj.angular_momentum
    assert np.max(np.abs(Hc - Hc[0])) > 1e-3 * np.linalg.norm(Hc[0])
    with pytest.raises(kd.ModelError, match="3 finite numbers"):
        traj.angular_momentum_about((0.0, np.nan, 0.0))
