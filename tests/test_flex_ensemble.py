"""Flexible bodies (``Body.modes``) in ``kd.simulate_ensemble`` and ``kd.monte_carlo``
(issue 29): the members run together on the compiled engine's flexible equations (the
native RK4 loop, or the traced kernel on columns of states), or one by one through
``kd.simulate`` off it (loads, ``engine="dense"``).

Oracles: ``kd.simulate`` of each member, its model built by hand (``attrs.evolve`` of
the nominal bodies) where the parameters are dispersed, and the dense engine's run
(CRBA and Cholesky over Kane's flexible mass matrix, another algorithm) to round-off.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.model.plan import params_of
from tests.test_flex_c import hub_and_beam, python_engine, start

T, DT = 0.1, 0.01


@pytest.fixture(scope="module")
def flexible():
    model = hub_and_beam()
    state = start(model)
    rng = np.random.default_rng(3)
    B = 3
    q = np.stack([state.q] * B)
    q[:, model.nq :] += 0.01 * rng.normal(size=(B, model.nf))
    u = state.u + 0.2 * rng.normal(size=(B, model.n_total))
    return model, kd.States(q, u)


def _member(states, b):
    return kd.State(states.q[b], states.u[b])


def _close(ens, b, traj, tol):
    assert np.allclose(ens.t, traj.t, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ens.q[:, b], traj.q, rtol=0, atol=tol)
    np.testing.assert_allclose(ens.u[:, b], traj.u, rtol=0, atol=tol)


def test_ensemble_of_a_flexible_model_equals_kd_simulate(flexible):
    model, states = flexible
    ens = kd.simulate_ensemble(model, states, T, DT)
    assert ens.q.shape == (11, 3, model.nq_total) and ens.u.shape == (11, 3, model.n_total)
    for b in range(ens.size):
        traj = kd.simulate(model, _member(states, b), T, DT, progress=False)
        _close(ens, b, traj, 1e-12)
        dense = kd.simulate(model, _member(states, b), T, DT, engine="dense", progress=False)
        _close(ens, b, dense, 1e-10)
        np.testing.assert_array_equal(ens.member(b).modal("beam")[0], traj.modal("beam")[0])
    assert np.ptp(ens.q[:, :, model.nq]) > 1e-3  # the modes moved


def test_ensemble_on_the_traced_kernel_equals_kd_simulate(flexible, monkeypatch):
    """Off the native back end the ensemble runs the traced kernel on columns of states
    (one element-wise NumPy operation per line); kd.simulate on the Python engine."""
    python_engine(monkeypatch)
    model, states = flexible
    ens = kd.simulate_ensemble(model, states, T, DT, engine="compiled")
    for b in range(ens.size):
        traj = kd.simulate(model, _member(states, b), T, DT, progress=False)
        assert traj.engine.startswith("python")
        _close(ens, b, traj, 1e-12)


def test_batch_of_a_flexible_model_equals_models_built_by_hand(flexible):
    """A ModelBatch with the hub's mass and the beam's root point dispersed."""
    model, states = flexible
    hub, beam = model.bodies
    masses = np.array([[18.0, beam.mass], [20.0, beam.mass], [26.0, beam.mass]])
    nominal = params_of(model).inner_point
    points = np.broadcast_to(nominal, (3, *nominal.shape)).copy()
    points[:, 1, 0] = [0.5, 0.4, 0.7]
    batch = kd.ModelBatch.dispersed(model, mass=masses, inner_point=points)
    ens = kd.simulate_ensemble(batch, states, T, DT)
    for b in range(3):
        arm = attrs.evolve(model.joints[1], inner_point=points[b, 1])
        by_hand = kd.Model([attrs.evolve(hub, mass=masses[b, 0]), beam],
                           [model.joints[0], arm], gravity=model.gravity)  # fmt: skip
        traj = kd.simulate(by_hand, _member(states, b), T, DT, progress=False)
        _close(ens, b, traj, 1e-12)
    assert np.ptp(ens.u[-1, :, 0]) > 1e-6  # the members differ


@pytest.mark.slow
def test_flexible_ensemble_with_loads_runs_each_member(flexible):
    model, states = flexible
    loads = [kd.JointLoad("root", [0.3, -0.2, 0.1, 0.0, 0.5, 0.0]),
             kd.Torque("beam", [0.0, 0.2, 0.0], frame="body")]  # fmt: skip
    for engine in ("auto", "dense"):
        ens = kd.simulate_ensemble(model, states, T, DT, loads=loads, engine=engine)
        for b in range(ens.size):
            traj = kd.simulate(model, _member(states, b), T, DT, loads=loads, engine=engine,
                               progress=False)  # fmt: skip
            _close(ens, b, traj, 1e-12)
    with pytest.raises(kd.ModelError, match=r"flexible bodies \['beam'\] .* give load records"):
        kd.simulate_ensemble(model, states, T, DT, loads=lambda t, m, s, kin: [],
                             engine="dense")  # fmt: skip
    with pytest.raises(kd.ModelError, match=r"nq \+ nf = 7 \+ 4"):
        kd.simulate_ensemble(model, kd.States(states.q[:, :7], states.u), T, DT)


@pytest.mark.slow
def test_monte_carlo_of_a_flexible_model_equals_single_runs(tmp_path):
    """The hub's mass and its initial rate dispersed: each member's trajectory, modal
    output and metric equal kd.simulate of the model built by hand from its row."""
    pytest.importorskip("pandas")
    model = hub_and_beam()
    state = start(model)
    ds = [kd.Dispersion("hub.mass", "normal", sigma=2.0),
          kd.Dispersion("root.rates.x", "uniform", low=0.3, high=0.5)]  # fmt: skip
    res = kd.monte_carlo(model, state, ds, 3, T, DT, store=tmp_path, keep_trajectories=True,
                         outputs={"eta": lambda tr: tr.modal("beam")[0][:, 0]},
                         metrics={"energy": lambda tr: float(tr.total_energy[-1])})  # fmt: skip
    assert (res.members["status"] == "ok").all()
    hub, beam = model.bodies
    for k in range(3):
        row = res.members.iloc[k]
        by_hand = kd.Model([attrs.evolve(hub, mass=row["hub.mass"]), beam], model.joints,
                           gravity=model.gravity)  # fmt: skip
        st = by_hand.set_joint(state, "root", rates=(row["root.rates.x"], *state.u[1:3]))
        traj = kd.simulate(by_hand, st, T, DT, progress=False)
        t, q, u = res.trajectory(k)
        np.testing.assert_allclose(q, traj.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(u, traj.u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.outputs["eta"][:, k], traj.modal("beam")[0][:, 0],
                                   rtol=0, atol=1e-12)  # fmt: skip
        assert row["energy"] == pytest.approx(traj.total_energy[-1], rel=1e-12)
