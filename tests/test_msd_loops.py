"""Closed loops in momentum-state dynamics (``formulation="msd"``).

The MSD states stay the tree's generalized momenta ``y = ∂T/∂ν``; the loops act on the
tree through their generalized constraint forces ``Aᵀλ``, and the speeds are those on
the constraint manifold whose momenta along the admissible directions are ``y``'s.

Oracles: the rate of the momenta along Kane's constrained motion by central
differences (``y`` is evaluated by :func:`kanedyn.dynamics.msd.momenta`, its
definition; the motion ``q̇``, ``u̇`` by Kane's loop equations, a different
formulation); Kane's runs; for a free-floating mechanism the conservation of its total
momenta (round-off in MSD) and of its energy (integrator accuracy). The native MSD
kernel is held against the dense MSD engine.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn import joints
from kanedyn.compiled import native
from kanedyn.dynamics import msd
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.system import System
from tests.test_loops import random_assembled
from tests.test_mbs_benchmarks import n_four_bar

MODELS = {
    "four_bar": kd.examples.four_bar,
    "slider_crank_spatial": lambda: kd.examples.slider_crank(spatial=True),
    "n_four_bar": lambda: n_four_bar(2),
    "parallel_3rrr": kd.examples.parallel_3rrr,
    "bricard": kd.examples.bricard,
}


def free_four_bar() -> kd.Model:
    """kd.examples.four_bar on a free-floating base (a 6-DOF joint from N), no gravity:
    its loop closes inside one subtree, so its total momenta are invariants."""
    fb = kd.examples.four_bar(planar=False)
    base = kd.Body("base", mass=3.0, inertia=np.diag([0.4, 0.5, 0.6]), com=(1.0, 0.2, 0.1))
    joints = [kd.Joint.free("float", "base")]
    for j in fb.joints:
        joints.append(attrs.evolve(j, inner="base") if j.inner is None else j)
    return kd.Model([base, *fb.bodies], joints, gravity=(0.0, 0.0, 0.0), loops=list(fb.loops))


def free_state(model: kd.Model) -> kd.State:
    s = model.set_joint(model.initial_state(), "float", rates=[0.3, -0.2, 0.5],
                        displacement_rates=[0.1, 0.05, -0.2])  # fmt: skip
    s = model.set_joint(s, "crank", angles=[0.2], rates=[2.0])
    return model.assemble(s, fix=["crank", "float"])


def msd_rates(model: kd.Model, state: kd.State) -> np.ndarray:
    """``[q̇ | ẏ]`` of the dense MSD engine at ``state``."""
    system = System(model, Formulation.MSD, None)
    return system(0.0, system.initial(state))


def momentum_rate_by_differences(model: kd.Model, state: kd.State, h: float = 1e-5) -> np.ndarray:
    """``d/dt msd.momenta(q, u)`` along Kane's constrained motion, by central
    differences in the direction ``(q̇, u̇)``."""
    udot = kd.forward_dynamics(model, state)
    qdot = joints.qdot(model.layout, state.q, state.u)

    def y(sign: float) -> np.ndarray:
        return msd.momenta(model, kd.State(state.q + sign * h * qdot, state.u + sign * h * udot))

    return (y(1.0) - y(-1.0)) / (2.0 * h)


@pytest.mark.parametrize("name", MODELS)
def test_msd_rates_are_the_rate_of_the_momenta_along_kanes_motion(name):
    model = MODELS[name]()
    for seed in range(2):
        s = random_assembled(model, seed)
        ydot = msd_rates(model, s)[model.nq :]
        ref = momentum_rate_by_differences(model, s)
        np.testing.assert_allclose(ydot, ref, rtol=0, atol=1e-7 * max(1.0, np.abs(ref).max()))


def test_the_rates_are_wrong_without_the_loop_forces(monkeypatch):
    model = kd.examples.four_bar()
    s = random_assembled(model, 0)
    monkeypatch.setattr(System, "_loop_forces", lambda self, t, q, kin, L, u: np.zeros(model.n))
    with pytest.raises(AssertionError):
        test_msd_rates_are_the_rate_of_the_momenta_along_kanes_motion("four_bar")
    ref = momentum_rate_by_differences(model, s)
    assert np.abs(msd_rates(model, s)[model.nq :] - ref).max() > 1e-3 * np.abs(ref).max()


def test_speeds_of_the_momenta_close_the_loops_and_give_the_state_back():
    model = kd.examples.slider_crank(spatial=True)
    s = random_assembled(model, 3)
    system = System(model, Formulation.MSD, None)
    y = msd.momenta(model, s)
    np.testing.assert_allclose(system.speeds(s.q, y), s.u, rtol=0, atol=1e-12)
    # momenta off the manifold's directions (a constraint impulse) leave the speeds
    A = kd.dynamics.loops.loop_terms(model, s.q).A
    lam = np.random.default_rng(0).normal(size=A.shape[0])
    np.testing.assert_allclose(system.speeds(s.q, y + A.T @ lam), s.u, rtol=0, atol=1e-11)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["four_bar", "slider_crank_spatial", "bricard"])
def test_msd_run_matches_kane_run(name):
    model = MODELS[name]()
    s = random_assembled(model, 1)
    kw = dict(t_final=0.05, dt=1e-3, engine="dense")
    kane = kd.simulate(model, s, **kw)
    m = kd.simulate(model, s, formulation="msd", **kw)
    np.testing.assert_allclose(m.q, kane.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(m.u, kane.u, rtol=0, atol=1e-10)


@pytest.mark.skipif(native.unavailable() is not None, reason="needs llvmlite")
@pytest.mark.parametrize("name", MODELS)
def test_native_msd_with_loops_matches_the_dense_engine(name):
    model = MODELS[name]()
    cm = kd.compile_model(model, formulation="msd")
    system = System(model, Formulation.MSD, None)
    for seed in range(3):
        s = random_assembled(model, seed)
        y = msd.momenta(model, s)
        out = np.array(cm.rhs(s.q.tolist(), y.tolist()))
        dense = system(0.0, np.concatenate((s.q, y)))
        ydot = dense[model.nq :]
        np.testing.assert_allclose(out[: model.n], ydot, rtol=0,
                                   atol=1e-12 * max(1.0, np.abs(ydot).max()))  # fmt: skip
        np.testing.assert_allclose(out[model.n + model.nq :], s.u, rtol=0, atol=1e-12)


@pytest.mark.slow
@pytest.mark.skipif(native.unavailable() is not None, reason="needs llvmlite")
@pytest.mark.parametrize("name", ["four_bar", "parallel_3rrr"])
def test_native_msd_run_with_loops_matches_the_dense_run(name):
    model = MODELS[name]()
    s = random_assembled(model, 1)
    run = kd.simulate(model, s, 0.05, 1e-3, formulation="msd")
    assert run.engine == "native"
    dense_run = kd.simulate(model, s, 0.05, 1e-3, formulation="msd", engine="dense")
    np.testing.assert_allclose(run.q, dense_run.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.momenta, dense_run.momenta, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def free_runs():
    model = free_four_bar()
    s = free_state(model)
    kw = dict(t_final=2.0, dt=2e-3, output_every=0.1)
    return model, {
        "msd": kd.simulate(model, s, formulation="msd", **kw),
        "kane": kd.simulate(model, s, **kw),
    }


@pytest.mark.slow
def test_free_floating_loop_msd_keeps_the_total_momenta_to_round_off(free_runs):
    model, runs = free_runs
    drift = {}
    for form, traj in runs.items():
        P = traj.linear_momentum
        H = traj.angular_momentum
        scale = np.abs(H[0]).max() + np.abs(P[0]).max()
        drift[form] = max(np.abs(H - H[0]).max(), np.abs(P - P[0]).max()) / scale
    assert drift["msd"] < 1e-12
    assert drift["kane"] < 1e-6  # integrator accuracy only
    E = runs["msd"].total_energy
    assert np.abs(E - E[0]).max() < 1e-7 * abs(E[0])
    np.testing.assert_allclose(runs["msd"].q, runs["kane"].q, rtol=0, atol=1e-8)


@pytest.mark.slow
def test_lock_and_unlock_in_msd_are_the_plastic_impact_and_its_release():
    """A lock on a looped mechanism under MSD: the speeds after the lock are the plastic
    impact's (the KKT solve of tests/test_loops_locks.py), and the run matches Kane's
    through the lock and the unlock."""
    from tests.test_loops_locks import (
        T_FINAL,
        T_LOCK,
        at,
        fd_jacobian,
        four_bar_pendulum,
        kkt_impact,
    )
    from tests.test_loops_locks import start as pendulum_start

    model = four_bar_pendulum()
    s0 = pendulum_start(model)
    events = [kd.Lock(T_LOCK, "pend"), kd.Unlock(0.5, "pend")]
    kw = dict(t_final=T_FINAL, dt=1e-3, events=events, engine="dense")
    m = kd.simulate(model, s0, formulation="msd", **kw)
    free = kd.simulate(model, s0, T_LOCK, 1e-3, formulation="msd", engine="dense")
    r = int(model.speeds("pend")[0])
    i = at(m, T_LOCK)
    before = kd.State(free.q[-1], free.u[-1])
    A = np.vstack((fd_jacobian(model, before.q), np.eye(model.n)[r]))
    expected = kkt_impact(kd.mass_matrix(model, before), A, before.u)
    np.testing.assert_allclose(m.u[i], expected, atol=1e-7)
    kane = kd.simulate(model, s0, **kw)
    np.testing.assert_allclose(m.q, kane.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(m.u, kane.u, rtol=0, atol=1e-8)
