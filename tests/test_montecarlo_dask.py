"""kd.monte_carlo on Dask: the same members as in process, on a 2-worker LocalCluster
(processes), and after a worker process is killed in the middle of the run."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import kanedyn as kd
from tests.test_montecarlo import pendulum_problem

pd = pytest.importorskip("pandas")
distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow  # each test starts a cluster of worker processes


def _same(a, b):
    pd.testing.assert_frame_equal(a.members, b.members, check_exact=True)
    for name in a.outputs:
        assert np.array_equal(a.outputs[name], b.outputs[name], equal_nan=True)


def test_local_cluster_gives_the_in_process_members():
    m, s, ds, kw = pendulum_problem()
    local = kd.monte_carlo(m, s, ds, 30, chunk_size=7, **kw)
    assert set(local.members["status"]) == {"ok", "invalid", "failed"}
    on_cluster = kd.monte_carlo(m, s, ds, 30, chunk_size=4, scheduler="processes", **kw)
    assert on_cluster.settings["workers"] == (os.cpu_count() or 1)
    _same(local, on_cluster)


def test_killed_worker_gives_the_complete_identical_result():
    m, s, ds, kw = pendulum_problem()
    kw = {**kw, "t_final": 4.0}  # chunks long enough to kill a worker between them
    n, chunk = 40, 2
    local = kd.monte_carlo(m, s, ds, n, chunk_size=chunk, **kw)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)  # fmt: skip
    client = distributed.Client(cluster)
    try:
        started = threading.Event()
        counts: list[int] = [0]
        box: dict[str, object] = {}

        def progress(done, total):
            counts.append(done)
            if done >= 1:
                started.set()

        def run():
            try:
                box["result"] = kd.monte_carlo(
                    m, s, ds, n, chunk_size=chunk, scheduler=client, progress=progress, **kw
                )
            except BaseException as exc:  # reported below
                box["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert started.wait(120), "no chunk finished within 120 s"
        pids = client.run(os.getpid)
        busy = [addr for addr, keys in client.processing().items() if keys]
        assert busy, "no worker is running a chunk"
        victim = pids[busy[0]]
        os.kill(victim, signal.SIGKILL)  # a chunk of this worker is lost mid-run
        assert counts[-1] < n // chunk
        thread.join(300)
        assert not thread.is_alive(), "the run did not finish within 300 s of the kill"
        assert "error" not in box, box.get("error")
        result = box["result"]
        # the killed process is gone (the nanny started a new one in its place)
        assert victim not in client.run(os.getpid).values()
        assert result.settings["chunks"] == n // chunk
        _same(local, result)
    finally:
        client.close()
        cluster.close()


def test_scheduler_address():
    m, s, ds, kw = pendulum_problem()
    local = kd.monte_carlo(m, s, ds, 12, chunk_size=12, **kw)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:  # fmt: skip
        remote = kd.monte_carlo(m, s, ds, 12, chunk_size=3, scheduler=cluster.scheduler_address,
                                **kw)  # fmt: skip
    assert remote.settings["scheduler"] == cluster.scheduler_address
    _same(local, remote)


def test_members_with_their_own_controller_and_loads_on_a_cluster():
    """Members that run one by one (dispersed controller gains, wheel limit and load):
    worker processes give the in-process members (the controller law travels to them)."""
    from tests.test_montecarlo_inputs import CONTROL, DT, OUTPUTS, slew

    case = slew()
    ds = [*CONTROL, kd.Dispersion("loads.0.scale", "uniform", low=0.0, high=2.0)]
    kw = dict(controller=case.controller, loads=[kd.Torque("hub", (0.0, 0.02, 0.0))],
              outputs=OUTPUTS, seed=5)  # fmt: skip
    local = kd.monte_carlo(case.model, case.state, ds, 6, 1.0, DT, chunk_size=6, **kw)
    assert (local.members["status"] == "ok").all()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:  # fmt: skip
        with distributed.Client(cluster) as client:
            remote = kd.monte_carlo(case.model, case.state, ds, 6, 1.0, DT, chunk_size=2,
                                    scheduler=client, **kw)  # fmt: skip
    _same(local, remote)
