"""Lock events and joint-limit stops on models with closed loops (kd.Loop).

Oracles: the same mechanism built with the locked joint welded (kd.Joint.weld at the
angle it was locked at) and simulated from the state after the lock; a direct
least-squares solve of the plastic impact (minimum kinetic-energy distance subject to the
loop and lock constraints, a KKT system written here with the constraint Jacobian from
central differences of Φ); the free mechanism restarted from the state at an unlock; the
crossing time of the unlimited run.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import loops
from kanedyn.spatial.rotation import euler_to_dcm

DT = 1e-3
T_LOCK = 0.3
T_FINAL = 0.8


def four_bar_pendulum(weld: float | None = None) -> kd.Model:
    """kd.examples.four_bar with a pendulum (a uniform rod, 0.6 m, 0.4 kg) hinged at the
    coupler's midpoint (joint ``"pend"``, about z); ``weld``: the pendulum welded at that
    angle instead."""
    base = kd.examples.four_bar()
    mid = (base.body("coupler").com[0], 0.0, 0.0)  # a uniform rod: its mass centre
    length, mass = 0.6, 0.4
    i_t = mass * length**2 / 12.0
    pend = kd.Body("pend", mass=mass, inertia=np.diag([1e-5, i_t, i_t]),
                   com=(0.5 * length, 0.0, 0.0))  # fmt: skip
    if weld is None:
        joint = kd.Joint.revolute("pend", "coupler", "pend", inner_point=mid)
    else:
        joint = kd.Joint.weld("pend", "coupler", "pend", inner_point=mid,
                              inner_rotation=euler_to_dcm("123", (0.0, 0.0, weld)))  # fmt: skip
    return kd.Model([*base.bodies, pend], [*base.joints, joint], gravity=tuple(base.gravity),
                    loops=list(base.loops), planar=True)  # fmt: skip


def start(model: kd.Model) -> kd.State:
    s = model.set_joint(model.initial_state(), "crank", angles=[0.1], rates=[2.0])
    return model.assemble(s, fix=["crank"])


def at(traj: kd.Trajectory, t: float) -> int:
    i = int(np.argmin(np.abs(traj.t - t)))
    assert abs(traj.t[i] - t) < 1e-9
    return i


def fd_jacobian(model: kd.Model, q: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """``∂Φ/∂q`` by central differences (the coordinates are hinge angles: ``q̇ = u``)."""

    def phi(x: np.ndarray) -> np.ndarray:
        return loops.loop_terms(model, x).Phi

    return np.column_stack([(phi(q + h * e) - phi(q - h * e)) / (2 * h) for e in np.eye(model.nq)])


def kkt_impact(M: np.ndarray, A: np.ndarray, u_minus: np.ndarray) -> np.ndarray:
    """``argmin (u - u⁻)ᵀ M (u - u⁻)`` subject to ``A u = 0``: the KKT system
    ``[[M, Aᵀ], [A, 0]] [u; λ] = [M u⁻; 0]``."""
    n, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    rhs = np.concatenate((M @ u_minus, np.zeros(m)))
    return np.linalg.lstsq(K, rhs, rcond=None)[0][:n]


def max_residuals(model: kd.Model, traj: kd.Trajectory) -> float:
    return max(max(loops.residuals(model, q, u)) for q, u in zip(traj.q, traj.u, strict=True))


@pytest.fixture(scope="module")
def locked_run():
    model = four_bar_pendulum()
    s0 = start(model)
    free = kd.simulate(model, s0, T_LOCK, DT)  # the same steps as the locked run up to T_LOCK
    traj = kd.simulate(model, s0, T_FINAL, DT, events=[kd.Lock(T_LOCK, "pend")])
    return model, free, traj


def test_lock_is_the_plastic_impact_of_the_constraints(locked_run):
    model, free, traj = locked_run
    r = int(model.speeds("pend")[0])
    i = at(traj, T_LOCK)
    before = kd.State(free.q[-1], free.u[-1])
    after = kd.State(traj.q[i], traj.u[i])
    np.testing.assert_allclose(after.q, before.q, atol=1e-12)  # a lock moves nothing
    assert abs(before.u[r]) > 1.0  # the pendulum was swinging
    # the speeds closest to u⁻ in the kinetic-energy metric with the loop and the lock held
    A = np.vstack((fd_jacobian(model, before.q), np.eye(model.n)[r]))
    expected = kkt_impact(kd.mass_matrix(model, before), A, before.u)
    np.testing.assert_allclose(after.u, expected, atol=1e-7)
    assert after.u[r] == 0.0 or abs(after.u[r]) < 1e-12
    # plastic: kinetic energy lost, not gained
    assert kd.kinetic_energy(model, after) < kd.kinetic_energy(model, before) - 1e-3


def test_locked_mechanism_moves_as_the_welded_one(locked_run):
    model, _, traj = locked_run
    i = at(traj, T_LOCK)
    theta = float(traj.q[i, model.coordinates("pend")[0]])
    welded = four_bar_pendulum(weld=theta)
    tree = [int(model.coordinates(j.name)[0]) for j in welded.joints if j.name != "pend"]
    s = welded.assemble(kd.State(traj.q[i, tree], traj.u[i, tree]), fix=["crank"])
    np.testing.assert_allclose(s.u, traj.u[i, tree], atol=1e-10)  # already consistent
    ref = kd.simulate(welded, s, T_FINAL - T_LOCK, DT)
    np.testing.assert_allclose(traj.q[i:, tree], ref.q, atol=1e-8)
    np.testing.assert_allclose(traj.u[i:, tree], ref.u, atol=1e-7)
    # the pendulum stays where it was locked, at rest relative to the coupler
    np.testing.assert_allclose(traj.q[i:, model.coordinates("pend")[0]], theta, atol=1e-12)
    np.testing.assert_allclose(traj.u[i:, model.speeds("pend")[0]], 0.0, atol=1e-12)
    assert max_residuals(model, traj) < 1e-10
    if traj.engine != "native":  # the native step projects inside its loop: no drift kept
        assert traj.loop_drift is not None and traj.loop_drift < 1e-8


def test_unlock_resumes_the_free_motion():
    model = four_bar_pendulum()
    r = int(model.speeds("pend")[0])
    t_unlock = 0.5
    traj = kd.simulate(model, start(model), T_FINAL, DT,
                       events=[kd.Lock(T_LOCK, "pend"), kd.Unlock(t_unlock, "pend")])  # fmt: skip
    i = at(traj, t_unlock)
    assert traj.u[i, r] == 0.0 or abs(traj.u[i, r]) < 1e-12  # the unlock keeps the speeds
    j = at(traj, T_LOCK)
    assert np.all(np.abs(traj.u[j:i, r]) < 1e-12)
    # the free mechanism restarted from the state at the unlock: the same motion
    ref = kd.simulate(model, kd.State(traj.q[i], traj.u[i]), T_FINAL - t_unlock, DT)
    np.testing.assert_allclose(traj.q[i:], ref.q, atol=1e-8)
    np.testing.assert_allclose(traj.u[i:], ref.u, atol=1e-7)
    assert abs(traj.u[-1, r]) > 1e-2  # the pendulum swings again
    # continuous through the unlock: no jump larger than the steps' usual change
    jump = np.max(np.abs(traj.u[i] - traj.u[i - 1]))
    typical = np.max(np.abs(np.diff(traj.u[i - 20 : i], axis=0)))
    assert jump < 3 * typical + 1e-9
    assert max_residuals(model, traj) < 1e-10


def crank_limited(lower: float, upper: float) -> kd.Model:
    base = kd.examples.four_bar()
    limits = kd.JointLimits(lower=lower, upper=upper)
    joints = [attrs.evolve(j, limits=limits) if j.name == "crank" else j for j in base.joints]
    return kd.Model(list(base.bodies), joints, gravity=tuple(base.gravity),
                    loops=list(base.loops), planar=True)  # fmt: skip


@pytest.mark.parametrize("method", ["rk4", "RK45"])
def test_stop_on_a_four_bar_holds_the_crank_at_its_bound(method):
    """The four-bar falls from rest (crank at 0.1 rad) onto the crank's upper bound:
    the stop engages when the unlimited run crosses the bound, and the mechanism (one DOF,
    none left with the crank held) stays there at rest, closed."""
    upper = 0.6
    model = crank_limited(-0.6, upper)
    s0 = model.assemble(model.set_joint(model.initial_state(), "crank", angles=[0.1]),
                        fix=["crank"])  # fmt: skip
    c = int(model.coordinates("crank")[0])
    free = kd.simulate(model, s0, 0.7, DT, limits="ignore")
    k = int(np.argmax(free.q[:, c] > upper))
    assert k > 0
    t_cross = free.t[k - 1] + DT * (upper - free.q[k - 1, c]) / (free.q[k, c] - free.q[k - 1, c])
    every = DT if method == "rk4" else 0.01  # an adaptive run restarts at every output
    traj = kd.simulate(model, s0, 0.8, DT, limits="stop", method=method, output_every=every)
    (hit,) = traj.limit_crossings
    assert (hit.joint, hit.bound) == ("crank", "upper")
    assert abs(hit.t - t_cross) <= DT
    after = traj.t > hit.t + DT
    np.testing.assert_allclose(traj.q[after, c], upper, atol=1e-12)
    np.testing.assert_allclose(traj.u[after], 0.0, atol=1e-12)
    # the rest of the mechanism where the loop closes with the crank on its bound
    rest = model.assemble(model.set_joint(s0, "crank", angles=[upper], rates=[0.0]),
                          fix=["crank"])  # fmt: skip
    np.testing.assert_allclose(traj.q[-1], rest.q, atol=1e-9)
    assert max_residuals(model, traj) < 1e-10


def test_stop_released_on_a_loop_model():
    """The crank driven back by a constant torque after it reached its bound: the stop
    releases and the crank leaves the bound."""
    model = crank_limited(-0.6, 0.6)
    s0 = model.assemble(model.set_joint(model.initial_state(), "crank", angles=[0.1]),
                        fix=["crank"])  # fmt: skip
    c = int(model.coordinates("crank")[0])

    def loads(t, m, state, kin):
        return [kd.JointLoad("crank", [-40.0 if t > 0.8 else 0.0])]

    traj = kd.simulate(model, s0, 1.2, DT, limits="stop", loads=loads)
    held = (traj.t > 0.7) & (traj.t < 0.8)
    np.testing.assert_allclose(traj.q[held, c], 0.6, atol=1e-12)
    assert traj.q[-1, c] < 0.6 - 1e-3
    assert max_residuals(model, traj) < 1e-10
