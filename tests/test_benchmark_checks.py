"""The benchmark suite's correctness pre-checks, on small sizes: each peer's forward
dynamics equals kanedyn's on the benchmark models and on random trees with every joint
type. Skipped, naming the package, when a peer is not installed. No timing here."""

from __future__ import annotations

import attrs
import pytest

import kanedyn as kd
from benchmarks import models
from benchmarks.checks import relative_error
from benchmarks.run import TOLERANCE
from tests.test_batch import random_tree

PEERS = [("pinocchio", "pinocchio_peer"), ("mujoco", "mujoco_peer")]


def peer_builder(package: str, builder: str):
    pytest.importorskip(
        package, reason=f"{package} is not installed (python -m pip install '.[benchmarks]')"
    )
    from benchmarks import peers

    return getattr(peers, builder)


def without_rotors(model: kd.Model) -> kd.Model:
    """The peers have no embedded rotor momentum: drop it."""
    bodies = [attrs.evolve(b, embedded_momentum=(0.0, 0.0, 0.0)) for b in model.bodies]
    return kd.Model(bodies, model.joints, gravity=model.gravity)


BENCHMARK_MODELS = {
    "chain1": lambda: models.chain(1),
    "chain5": lambda: models.chain(5),
    "spacecraft3": lambda: models.spacecraft(3),
    "hub_with_panels": kd.examples.hub_with_panels,  # springs and dampers enter as Q
}


@pytest.mark.parametrize("package, builder", PEERS)
@pytest.mark.parametrize("name", list(BENCHMARK_MODELS))
def test_peer_agrees_on_benchmark_models(package, builder, name):
    make = peer_builder(package, builder)
    model = BENCHMARK_MODELS[name]()
    assert relative_error(model, make(model)) < TOLERANCE


@pytest.mark.parametrize("package, builder", PEERS)
@pytest.mark.parametrize("seed", [1, 2, 4, 6, 7])
def test_peer_agrees_on_random_trees(package, builder, seed):
    make = peer_builder(package, builder)
    model = without_rotors(random_tree(seed))
    assert relative_error(model, make(model), seed=seed) < TOLERANCE


def test_pinocchio_agrees_on_explorer1():
    make = peer_builder("pinocchio", "pinocchio_peer")
    model = kd.examples.explorer1()
    assert relative_error(model, make(model)) < TOLERANCE


def test_the_check_fails_on_a_different_model():
    """The pre-check has teeth: a peer built with another gravity disagrees."""
    make = peer_builder("pinocchio", "pinocchio_peer")
    model = models.chain(3)
    other = kd.Model(model.bodies, model.joints, gravity=(0.0, -9.0, 0.0))
    assert relative_error(model, make(other)) > 1e-3


@pytest.mark.slow
def test_suite_runs_without_peers(monkeypatch, tmp_path, capsys):
    """A missing peer is reported and skipped; the suite still produces its results."""
    from benchmarks import run

    monkeypatch.setattr(run, "available", lambda: {"pinocchio": None, "mujoco": None})
    monkeypatch.setattr(run, "CHAINS", (1,))
    assert (
        run.main(["--quick", "--repeats", "1", "--explorer-t-final", "5", "--out", str(tmp_path)])
        == 0
    )
    out = capsys.readouterr().out
    assert "pinocchio: not installed, skipped" in out
    assert list(tmp_path.glob("bench-*.json"))


def test_pinocchio_rk4_loop_runs_the_same_explorer1_as_simulate():
    """The peer of the native simulation loop (Pinocchio, RK4 in Python, the hinges'
    springs and dampers as joint torques) integrates the same motion as ``kd.simulate``:
    the final speeds after 50 s agree far below the RK4 error of either run."""
    import numpy as np

    peer_builder("pinocchio", "pinocchio_peer")
    from benchmarks import pin_loop

    run = pin_loop.explorer_rk4(50.0)
    model = kd.examples.explorer1()
    traj = kd.simulate(
        model, kd.examples.explorer1_state(model), 50.0, 0.1, progress=False, output_every=10.0
    )
    u_kd = np.asarray(traj.u)[-1]
    assert run["samples"] == 5
    assert np.max(np.abs(u_kd - np.asarray(run["u_final"]))) < 1e-12 * np.max(np.abs(u_kd))


@pytest.mark.parametrize("name", ["four-bar", "spatial slider-crank", "3-RRR platform"])
def test_mujoco_loop_peer_is_the_same_mechanism(name):
    """The loop benchmark's MuJoCo peers (``equality connect``, RK4 at the same step)
    are kanedyn's mechanisms: the driven joint's angle over 0.5 s from the same state
    agrees with kanedyn's (native engine, exact loop) to the softness of MuJoCo's
    equality, and converges onto it as the equality hardens (the error falls about as the
    square of the constraint's time constant; it falls more than threefold when the
    time constant halves)."""
    mujoco = pytest.importorskip(
        "mujoco", reason="mujoco is not installed (python -m pip install '.[benchmarks]')"
    )
    import numpy as np

    from benchmarks.bench_loops import DT, mechanisms, mujoco_mechanism

    m, s = mechanisms()[name]
    driven = m.joints[0].name
    traj = kd.simulate(m, s, 0.5, DT, engine="compiled", output_every=0.05)
    q_kd = traj.q[1:, m.coordinates(driven)[0]]
    errors = []
    for solref in ((0.004, 1.0), (0.002, 1.0)):
        mj, data = mujoco_mechanism(name, m, s, solref)
        adr = mj.joint(f"{driven}_r0").qposadr[0]
        q_mj = []
        for _ in range(q_kd.size):
            mujoco.mj_step(mj, data, nstep=50)
            q_mj.append(data.qpos[adr])
        errors.append(np.max(np.abs(np.array(q_mj) - q_kd)))
    assert np.ptp(q_kd) > 0.1  # the driven joint moves
    assert errors[1] < 1e-3 and errors[1] < errors[0] / 3.0, errors


def test_compare_gives_medians_and_ratios_of_two_result_sets(tmp_path, capsys):
    """``python -m benchmarks.compare``: per quantity, the median of each side's runs and
    now / before (values chosen so the medians are 2 and 3 µs, a ratio of 1.50)."""
    import json

    from benchmarks import compare

    def write(folder: str, run: int, seconds: float, rate: float) -> None:
        (tmp_path / folder).mkdir(exist_ok=True)
        result = {
            "single_state": [{"workload": "chain n = 1", "seconds": {"kanedyn": seconds}}],
            "batched": [{"workload": "B = 10", "states_per_second": {"compiled": rate}}],
        }
        (tmp_path / folder / f"bench-{run}.json").write_text(json.dumps(result))

    for run, (s, r) in enumerate([(1e-6, 10.0), (2e-6, 20.0), (9e-6, 30.0)]):
        write("before", run, s, r)
    for run, (s, r) in enumerate([(3e-6, 40.0), (3e-6, 40.0)]):
        write("now", run, s, r)
    assert compare.main([str(tmp_path / "before"), "--now", str(tmp_path / "now")]) == 0
    rows = {line.split(" | ")[2]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["kanedyn"].endswith("| µs | 2 | 3 | 1.50 |")
    assert rows["compiled"].endswith("| states/s | 20 | 40 | 2.00 |")
    with pytest.raises(SystemExit, match="no results"):
        compare.main([str(tmp_path / "missing"), "--now", str(tmp_path / "now")])
