"""``kd.monte_carlo``: dispersed members run in chunks, in process or on a Dask cluster.

The N members are cut into chunks of consecutive member numbers. A chunk is a pure
function of the run's arguments and its member range (:func:`run_chunk`): it draws its
members' values (:func:`~kanedyn.simulation.montecarlo.dispersion.sample`, which depends
only on the seed and the member number), validates them, and integrates the valid ones
together with :func:`kanedyn.simulate_ensemble` (the compiled engine when the model can
be compiled). A member whose simulation fails is found by bisecting its chunk and is
reported with its error; the others run to the end.

Because each member's arithmetic in an ensemble is independent of the other members, a
member's results do not depend on the chunk size or on the worker that ran it.

Members with their own inputs (a ``controller``, or dispersed controller gains, wheel
limits or load magnitudes: :mod:`kanedyn.simulation.montecarlo.inputs`) run one by one
through :func:`kanedyn.simulate`, with the member's own model, state, controller and
loads, in the same chunks. The ensemble engine applies one load set to every member and
has no sampled controller: a controller's law is a Python function of one state, called
at every sample time, so it cannot be evaluated for a batch. A member's result is then
``kd.simulate`` of that member, bit for bit, so again it depends only on the seed and
the member number, never on chunks or workers. :func:`_simulate_each` is that path.

Where chunks run:

* ``scheduler=None``: in this process, one chunk after another.
* ``scheduler="processes"``: a ``dask.distributed.LocalCluster`` with one single-threaded
  worker process per CPU.
* a scheduler address (``"tcp://host:8786"``) or a ``dask.distributed.Client``: that
  cluster. The run's description (model, state, dispersions) is sent to every worker
  once (``Client.scatter(..., broadcast=True)``); each chunk is a task, which the
  scheduler reruns elsewhere when its worker dies.

With ``store=folder``, every finished chunk is saved as ``chunk-<first>-<last>.npz``
beside a ``manifest.json`` that fingerprints the run's arguments. A second call with the
same arguments and folder loads the chunks already there and runs only the rest, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import KanedynError, ModelError, SimulationError
from kanedyn.model import Model, State
from kanedyn.model.batch import ModelBatch, States
from kanedyn.model.plan import params_of
from kanedyn.simulation.control import Controller
from kanedyn.simulation.ensemble import EnsembleTrajectory, simulate_ensemble
from kanedyn.simulation.integrate import simulate
from kanedyn.simulation.limits import JointLimitWarning, Limits, limited_joints
from kanedyn.simulation.montecarlo.dispersion import (
    Dispersion,
    DispersionSpec,
    Target,
    apply,
    sample,
)
from kanedyn.simulation.montecarlo.result import STATUS, MonteCarloResult, require_pandas
from kanedyn.simulation.run_options import check_times
from kanedyn.simulation.trajectory import Trajectory

__all__ = ["ChunkResult", "monte_carlo", "run_chunk"]

Array = NDArray[np.float64]
OutputFn = Callable[[Trajectory], Any]
MetricFn = Callable[[Trajectory], float]
_OK, _INVALID, _FAILED = 0, 1, 2


# --------------------------------------------------------------------------- the run
@attrs.frozen(eq=False)
class Run:
    """Everything a chunk needs (sent to each worker once): the dispersions resolved
    against the model, the integration settings, the outputs and the metrics, and the
    controller (None: the members run together, :func:`kanedyn.simulate_ensemble`)."""

    spec: DispersionSpec
    t_final: float
    dt: float
    output_every: float | None
    loads: Any
    engine: str
    output_names: tuple[str, ...]
    output_fns: tuple[Target | OutputFn, ...]
    metric_names: tuple[str, ...]
    metric_fns: tuple[MetricFn, ...]
    keep_trajectories: bool
    controller: Controller | None = None
    limits: str = "warn"

    @property
    def model(self) -> Model:
        return self.spec.model

    @property
    def one_by_one(self) -> bool:
        """Whether members run one by one (:func:`_simulate_each`): they have a
        controller, or their own dispersed inputs."""
        return self.controller is not None or self.spec.per_member_inputs

    @property
    def columns(self) -> list[str]:
        """Metric columns: ``<output>.final|min|max`` for each output, then the user's."""
        cols = [f"{o}.{s}" for o in self.output_names for s in ("final", "min", "max")]
        return cols + list(self.metric_names)


@attrs.frozen(eq=False)
class ChunkResult:
    """Members ``first`` to ``first + B - 1``: ``values`` (B, number of dispersions),
    ``status`` (B,) (0 ok, 1 invalid, 2 failed), ``errors`` (B,) strings, ``metrics``
    (B, number of metric columns), ``t`` (nt,), ``histories`` (number of outputs, nt, B);
    ``q`` (nt, B, nq) and ``u`` (nt, B, n) when trajectories are kept, else empty;
    ``crossings`` (B,) each member's joint-limit crossings (or stops) as text, empty when
    none. Everything not computed for a member (it is not ok) is NaN."""

    first: int
    values: Array
    status: NDArray[np.int8]
    errors: tuple[str, ...]
    metrics: Array
    t: Array
    histories: Array
    q: Array
    u: Array
    crossings: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return int(self.status.size)

    def save(self, path: Path) -> None:
        """Write to ``path`` (an ``.npz``) atomically: a partial file is never seen."""
        tmp = path.with_name(path.name + ".part.npz")
        np.savez(
            tmp, first=self.first, values=self.values, status=self.status,
            errors=np.array(self.errors, dtype=str), metrics=self.metrics, t=self.t,
            histories=self.histories, q=self.q, u=self.u,
            crossings=np.array(self.crossings or ("",) * self.size, dtype=str),
        )  # fmt: skip
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> ChunkResult:
        with np.load(path) as z:
            return cls(
                first=int(z["first"]), values=z["values"], status=z["status"],
                errors=tuple(str(e) for e in z["errors"]), metrics=z["metrics"], t=z["t"],
                histories=z["histories"], q=z["q"], u=z["u"],
                crossings=tuple(str(c) for c in z["crossings"]) if "crossings" in z else (),
            )  # fmt: skip


def run_chunk(run: Run, first: int, stop: int) -> ChunkResult:
    """Members ``first`` ... ``stop - 1`` of ``run``: draw, validate, simulate, measure.

    A pure function of its arguments: the same members give the same numbers whatever
    process runs them.
    """
    ks = np.arange(first, stop)
    B = ks.size
    spec = run.spec
    values = sample(spec, ks)
    members = apply(spec, values)
    status = np.zeros(B, dtype=np.int8)
    errors = list(members.invalid)
    status[[b for b in range(B) if errors[b]]] = _INVALID
    t = _output_times(run)
    nt = t.size
    metrics = np.full((B, len(run.columns)), np.nan)
    histories = np.full((len(run.output_names), nt, B), np.nan)
    model = spec.model
    keep = run.keep_trajectories
    q_all = np.full((nt, B, model.nq_total) if keep else (0, 0, 0), np.nan)
    u_all = np.full((nt, B, model.n_total) if keep else (0, 0, 0), np.nan)
    crossings = [""] * B
    how = _simulate_each if run.one_by_one else _simulate
    for sel, ens in how(run, members, np.flatnonzero(status == _OK), errors):
        if ens is None:
            status[sel] = _FAILED
            continue
        for j, found in enumerate(ens.limit_crossings):
            crossings[int(sel[j])] = "; ".join(map(str, found))
        hist = _histories(run, ens)  # (n_out, nt, len(sel))
        histories[:, :, sel] = hist
        metrics[sel] = _metrics(run, ens, hist)
        if keep:
            q_all[:, sel], u_all[:, sel] = ens.q, ens.u
    return ChunkResult(
        first=first, values=values, status=status, errors=tuple(errors), metrics=metrics,
        t=t, histories=histories, q=q_all, u=u_all, crossings=tuple(crossings),
    )  # fmt: skip


def _output_times(run: Run) -> Array:
    from kanedyn.dynamics.steppers import Schedule

    every = run.dt if run.output_every is None else run.output_every
    schedule = Schedule.of(run.t_final, run.dt, every)
    ts = [0.0] + [t_next for _, _, _, t_next, output in schedule if output]
    return np.array(ts)


def _rows(arrays: dict[str, Any], sel: NDArray[np.intp]) -> dict[str, Any]:
    """The members ``sel`` of :attr:`Members.arrays` (arrays, or dicts by body name of
    arrays: the modal keywords of :meth:`kanedyn.ModelBatch.dispersed`)."""
    return {k: ({name: a[sel] for name, a in v.items()} if isinstance(v, dict) else v[sel])
            for k, v in arrays.items()}  # fmt: skip


def _simulate(
    run: Run, members: Any, sel: NDArray[np.intp], errors: list[str]
) -> Iterator[tuple[NDArray[np.intp], Any]]:
    """Yield ``(sel, ensemble)`` for groups of members that ran to the end, and
    ``(sel, None)`` for single members that failed (their error put in ``errors``).
    A failing group is bisected: one bad member costs about log2(B) extra runs."""
    if sel.size == 0:
        return
    model = run.model
    sub = _rows(members.arrays, sel)
    target: Model | ModelBatch = ModelBatch.dispersed(model, **sub) if sub else model
    try:
        with warnings.catch_warnings():  # the crossings go to the result's members
            warnings.simplefilter("ignore", JointLimitWarning)
            ens = simulate_ensemble(
                target, States(members.q[sel], members.u[sel]), run.t_final, run.dt,
                loads=run.loads, output_every=run.output_every, engine=run.engine,
                limits=run.limits,
            )  # fmt: skip
    except (SimulationError, ModelError) as exc:
        if sel.size == 1:
            text = re.sub(r"members \[\[0\]\] ", "", " ".join(str(exc).split()))
            errors[int(sel[0])] = f"{type(exc).__name__}: {text}"
            yield sel, None
            return
        half = sel.size // 2
        yield from _simulate(run, members, sel[:half], errors)
        yield from _simulate(run, members, sel[half:], errors)
        return
    yield sel, ens


def _simulate_each(
    run: Run, members: Any, sel: NDArray[np.intp], errors: list[str]
) -> Iterator[tuple[NDArray[np.intp], Any]]:
    """:func:`_simulate`'s results for members that run one by one: ``kd.simulate`` of
    member b's model, initial state, controller and loads (the run's, or the member's
    own when they are dispersed), as an ensemble of one."""
    model = run.model
    sub = _rows(members.arrays, sel)
    batch = ModelBatch.dispersed(model, **sub) if sub else None
    for j, b in enumerate(sel.tolist()):
        member = model if batch is None else batch.member(j)
        controller = run.controller if members.controllers is None else members.controllers[b]
        loads = run.loads if members.loads is None else members.loads[b]
        try:
            with warnings.catch_warnings():  # the crossings go to the result's members
                warnings.simplefilter("ignore", JointLimitWarning)
                traj = simulate(
                    member, State(members.q[b], members.u[b]), run.t_final, run.dt,
                    loads=loads or None, controller=controller, output_every=run.output_every,
                    engine=run.engine, progress=False, limits=run.limits,
                )  # fmt: skip
        except (SimulationError, ModelError) as exc:
            errors[b] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            yield np.array([b]), None
            continue
        yield np.array([b]), EnsembleTrajectory(
            model=member, t=traj.t, q=traj.q[:, None], u=traj.u[:, None],
            wall_time=traj.wall_time, steps=traj.steps, limits=traj.limits,
            limit_crossings=(traj.limit_crossings,),
        )  # fmt: skip


def _histories(run: Run, ens: Any) -> Array:
    nt, B = ens.q.shape[:2]
    out = np.empty((len(run.output_fns), nt, B))
    trajectories: list[Trajectory] | None = None
    for o, fn in enumerate(run.output_fns):
        if isinstance(fn, Target):
            src = ens.q if fn.kind == "q" else ens.u
            out[o] = src[:, :, fn.index[0]]
            continue
        if trajectories is None:
            trajectories = [ens.member(b) for b in range(B)]
        for b, traj in enumerate(trajectories):
            value = np.asarray(fn(traj), dtype=float)
            if value.shape != (nt,):
                raise ModelError(
                    f"output {run.output_names[o]!r}: the function returned shape "
                    f"{value.shape}, expected ({nt},) (one value per output time)"
                )
            out[o, :, b] = value
    return out


def _metrics(run: Run, ens: Any, hist: Array) -> Array:
    B = hist.shape[2]
    cols = [hist[:, -1, :], hist.min(axis=1), hist.max(axis=1)]  # each (n_out, B)
    per_output = np.stack(cols, axis=1).reshape(-1, B).T  # (B, 3 n_out)
    user = np.empty((B, len(run.metric_fns)))
    if run.metric_fns:
        for b in range(B):
            traj = ens.member(b)
            for c, fn in enumerate(run.metric_fns):
                user[b, c] = float(fn(traj))
    return np.concatenate((per_output, user), axis=1)


# --------------------------------------------------------------------------- store
def fingerprint(run: Run, n: int, chunk_size: int) -> str:
    """A SHA-256 of everything that determines the chunks' contents."""
    h = hashlib.sha256()
    model, state = run.spec.model, run.spec.state
    p = params_of(model)
    for f in attrs.fields(type(p)):
        if f.init:
            h.update(np.ascontiguousarray(getattr(p, f.name), dtype=float).tobytes())
    topo = [(j.name, j.inner, j.outer, j.rot_type, j.rot_dof, j.rot_seq, j.trn_dof, j.trn_seq)
            for j in model.joints]  # fmt: skip
    h.update(repr((topo, [(b.name, b.check_triangle) for b in model.bodies])).encode())
    h.update(np.ascontiguousarray(state.q).tobytes() + np.ascontiguousarray(state.u).tobytes())
    h.update(repr([attrs.astuple(d) for d in run.spec.dispersions]).encode())
    h.update(repr((run.spec.seed, n, chunk_size, run.t_final, run.dt, run.output_every,
                   run.engine, run.output_names, run.metric_names, run.keep_trajectories,
                   run.limits, [(j.name, attrs.astuple(j.limits) if j.limits else None)
                                for j in model.joints],
                   _describe(run.loads), [_describe(f) for f in run.output_fns],
                   [_describe(f) for f in run.metric_fns])).encode())  # fmt: skip
    if run.controller is not None:
        h.update(_describe(run.controller).encode())
    return h.hexdigest()


def _describe(obj: Any) -> str:
    """A description that is the same in every process: a function by its qualified
    name (its code may change between calls without changing it), data by its repr."""
    if isinstance(obj, Target):
        return obj.parameter
    if isinstance(obj, Controller):
        return f"Controller(period={obj.period!r}, law={_describe(obj.law)})"
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '')}.{obj.__qualname__}"
    if isinstance(obj, (list, tuple)):
        return repr([_describe(o) for o in obj])
    return repr(obj)


class _Store:
    """A folder of chunk files and the manifest that says which run they belong to."""

    def __init__(self, folder: Path, fp: str, n: int, chunk_size: int) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        manifest = folder / "manifest.json"
        if manifest.exists():
            try:
                old = json.loads(manifest.read_text())
            except (OSError, ValueError):
                old = {}
            if old.get("fingerprint") != fp:
                raise ModelError(
                    f"store {folder}: holds chunks of a different run (other model, "
                    "dispersions, seed, n, chunk size or settings); give an empty folder"
                )
        else:
            data = {"fingerprint": fp, "n": n, "chunk_size": chunk_size}
            manifest.write_text(json.dumps(data, indent=2) + "\n")

    def path(self, first: int, stop: int) -> Path:
        return self.folder / f"chunk-{first:09d}-{stop - 1:09d}.npz"

    def load(self, first: int, stop: int) -> ChunkResult | None:
        path = self.path(first, stop)
        if not path.exists():
            return None
        try:
            return ChunkResult.load(path)
        except (OSError, ValueError, KeyError):
            return None  # unreadable: run it again


# --------------------------------------------------------------------------- API
def monte_carlo(
    model: Model,
    state: State,
    dispersions: Sequence[Dispersion],
    n: int,
    t_final: float,
    dt: float,
    *,
    seed: int = 0,
    outputs: Sequence[str] | Mapping[str, str | OutputFn] | None = None,
    metrics: Mapping[str, MetricFn] | None = None,
    output_every: float | None = None,
    loads: Any = None,
    controller: Controller | None = None,
    engine: str = "auto",
    chunk_size: int | None = None,
    scheduler: Any = None,
    store: str | os.PathLike[str] | None = None,
    keep_trajectories: bool = False,
    progress: bool | Callable[[int, int], None] = False,
    limits: str = "warn",
) -> MonteCarloResult:
    """Run ``n`` dispersed members of ``model`` from ``state`` and gather their metrics.

    Member k (0-based) has the dispersed values drawn for (``seed``, k) (see
    :mod:`kanedyn.simulation.montecarlo.dispersion`) and is integrated as
    :func:`kanedyn.simulate_ensemble` integrates a member (fixed-step RK4, step ``dt``).

    Parameters
    ----------
    model, state : Model, State
        The nominal model and initial state.
    dispersions : sequence of Dispersion
        What varies, and how.
    n : int
        Number of members.
    t_final, dt : float
        Run length and step [s].
    seed : int
        The seed of the draws.
    outputs : sequence of str, or mapping of name to str or callable
        Time histories to keep and measure. A name is a coordinate or speed in the
        dispersion grammar (``"hinge0.angles.1"``, ``"root.rates.z"``); a callable takes
        a member's :class:`~kanedyn.Trajectory` and returns one value per output time.
        Default: the first joint's rotational speeds. Each output gives the metrics
        ``<output>.final``, ``.min`` and ``.max``.
    metrics : mapping of name to callable
        User metrics: ``f(trajectory) -> float`` per member.
    output_every : float, optional
        Output interval (a multiple of ``dt``; default every step).
    loads : optional
        Loads applied to every member: None, a list of load records (``kd.Force``,
        ``kd.Torque``, ``kd.JointLoad``), or a callable. A callable is called as
        :func:`kanedyn.simulate_ensemble` calls it (with the states of a chunk), or, when
        members run one by one (below), as :func:`kanedyn.simulate` calls it (one
        member's state). The records' magnitudes are dispersed by ``loads.<k>.scale``
        and ``loads.<k>.values.i`` (record k of the list).
    controller : Controller, optional
        A sampled controller, as for :func:`kanedyn.simulate`; its law's numeric
        attributes are dispersed by ``controller.<attr>`` (``controller.Kp``), its
        reaction wheels' torque limits by ``<wheel>.max_torque``. With a controller, or
        with dispersed loads, members run one by one through :func:`kanedyn.simulate`
        (in the same chunks; results unchanged by chunking).
    engine : {"auto", "compiled", "dense"}
        As for :func:`kanedyn.simulate_ensemble`.
    chunk_size : int, optional
        Members per chunk (default: ``n`` split into two chunks per worker, at most 1000
        members each). It does not change any member's result; larger chunks spread the
        fixed cost of an ensemble step over more members (the cost model of the scaling
        page in the docs).
    scheduler : None, "processes", str or dask.distributed.Client
        Where chunks run (module docstring). Dask comes with ``kanedyn[dask]``.
    store : path, optional
        A folder for the finished chunks; a second call with the same arguments resumes
        from it.
    keep_trajectories : bool
        Also save every member's ``q`` and ``u`` in the chunk files (needs ``store``).
    progress : bool or callable
        A progress bar on stderr, or ``progress(done, total)`` after each chunk.
    limits : {"warn", "stop", "ignore"}
        The joints' position limits, as for :func:`kanedyn.simulate`: each member's
        crossings (``"warn"``, default) or stops (``"stop"``) are in the ``limit_crossings``
        column of ``members`` (empty when none; the column is there when the model has
        joint limits and they are checked), and one
        :class:`~kanedyn.simulation.limits.JointLimitWarning` counts the members that
        crossed. Under ``"stop"`` each member runs through :func:`kanedyn.simulate`.

    Returns
    -------
    MonteCarloResult

    Raises
    ------
    ModelError
        Bad arguments (an unknown parameter, a bad distribution), before any member runs.
        A member that is invalid or whose simulation fails does not raise: it is
        reported in the result with its error.
    """
    pd = require_pandas()
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ModelError(f"monte_carlo: n must be a positive integer, got {n!r}")
    model.check_state(state, flexible=True)
    t_final, dt = check_times(t_final, dt)
    if controller is not None and not isinstance(controller, Controller):
        raise ModelError(
            f"monte_carlo: controller must be a kd.Controller, got {type(controller).__name__}"
        )
    spec = DispersionSpec(model, state, tuple(dispersions), seed, controller, loads)
    out_names, out_fns = _outputs(model, outputs)
    metric_names = tuple(metrics or {})
    metric_fns = tuple((metrics or {}).values())
    clash = set(metric_names) & set(spec.names)
    if clash:
        raise ModelError(f"metric names {sorted(clash)} are also dispersed parameter names")
    if keep_trajectories and store is None:
        raise ModelError("keep_trajectories=True needs a store folder for the trajectories")
    run = Run(
        spec=spec, t_final=t_final, dt=dt,
        output_every=None if output_every is None else float(output_every), loads=loads,
        engine=engine, output_names=out_names, output_fns=out_fns, metric_names=metric_names,
        metric_fns=metric_fns, keep_trajectories=keep_trajectories, controller=controller,
        limits=Limits.parse(limits).value,
    )  # fmt: skip
    _check_run(run)
    workers, client, close = _connect(scheduler)
    try:
        size = _chunk_size(chunk_size, n, workers)
        ranges = [(a, min(a + size, n)) for a in range(0, n, size)]
        fp = fingerprint(run, n, size)
        box = None if store is None else _Store(Path(store), fp, n, size)
        report = _progress(progress, len(ranges))
        start = time.perf_counter()
        chunks: dict[int, ChunkResult] = {}
        if box is not None:
            for a, b in ranges:
                done = box.load(a, b)
                if done is not None:
                    chunks[a] = done
        resumed = len(chunks)
        report(len(chunks))
        todo = [(a, b) for a, b in ranges if a not in chunks]
        results = _run_local(run, todo) if client is None else _run_dask(client, run, todo, fp)
        for chunk in results:
            if box is not None:
                chunk.save(box.path(chunk.first, chunk.first + chunk.size))
            chunks[chunk.first] = chunk
            report(len(chunks))
        wall = time.perf_counter() - start
    finally:
        close()
    ordered = [chunks[a] for a, _ in ranges]
    settings = {
        "n": int(n), "seed": int(seed), "t_final": t_final, "dt": dt,
        "output_every": run.output_every, "chunk_size": size, "chunks": len(ranges),
        "chunks_resumed": resumed, "engine": engine,
        "scheduler": _scheduler_name(scheduler), "workers": workers,
        "keep_trajectories": keep_trajectories, "limits": run.limits,
        "wall_time_s": round(wall, 3),
    }  # fmt: skip
    result = _gather(pd, run, ordered, settings, None if box is None else box.folder)
    crossings = result.members.get("limit_crossings")
    crossed = 0 if crossings is None else int((crossings != "").sum())
    if crossed and run.limits == "warn":
        warnings.warn(
            f"joint limits crossed by {crossed} of {n} members (not enforced; limits='stop' "
            "makes them stops): see the limit_crossings column of the members",
            JointLimitWarning,
            stacklevel=2,
        )
    return result


def _check_run(run: Run) -> None:
    """Fail on bad settings (the output interval, the engine) before any chunk runs."""
    if run.output_every is not None:
        ratio = run.output_every / run.dt
        if not (run.output_every > 0 and abs(ratio - round(ratio)) < 1e-9):
            raise ModelError(
                f"output_every = {run.output_every} must be a positive multiple of dt = {run.dt}"
            )
    from kanedyn.simulation.options import Engine

    Engine.parse(run.engine)


def _outputs(
    model: Model, outputs: Sequence[str] | Mapping[str, str | OutputFn] | None
) -> tuple[tuple[str, ...], tuple[Target | OutputFn, ...]]:
    if outputs is None:
        j = model.joints[0]
        axes = "xyz" if j.rot_type == "spherical" else "012"
        outputs = [f"{j.name}.rates.{axes[i]}" for i in range(j.rot_dof)]
        if not outputs:
            outputs = [f"{j.name}.displacement_rates.{i}" for i in range(j.trn_dof)]
    items = list(outputs.items()) if isinstance(outputs, Mapping) else [(o, o) for o in outputs]
    names: list[str] = []
    fns: list[Target | OutputFn] = []
    for name, how in items:
        if not isinstance(name, str):
            raise ModelError(f"output names must be strings, got {name!r}")
        if callable(how):
            names.append(name)
            fns.append(how)
            continue
        if not isinstance(how, str):
            raise ModelError(f"output {name!r}: give a name or a function of a Trajectory")
        target = Target.of(model, how)
        if target.kind not in ("q", "u"):
            raise ModelError(
                f"output {how!r}: not a coordinate or speed with a time history (use "
                "angles.i of a gimbal, rates.i, displacements.i, displacement_rates.i, or "
                "a function of the Trajectory)"
            )
        names.append(name)
        fns.append(target)
    if len(set(names)) != len(names):
        raise ModelError(f"output names repeat: {names}")
    return tuple(names), tuple(fns)


def _chunk_size(chunk_size: int | None, n: int, workers: int) -> int:
    if chunk_size is None:  # two chunks per worker: see docs/howto/montecarlo-scaling.md
        return max(1, min(1000, math.ceil(n / (2 * workers))))
    if (
        isinstance(chunk_size, bool)
        or not isinstance(chunk_size, (int, np.integer))
        or chunk_size < 1
    ):
        raise ModelError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return int(chunk_size)


def _run_local(run: Run, todo: list[tuple[int, int]]) -> Iterator[ChunkResult]:
    for a, b in todo:
        yield run_chunk(run, a, b)


def _run_dask(client: Any, run: Run, todo: list[tuple[int, int]], fp: str) -> Iterator[ChunkResult]:
    """Chunks as Dask tasks; results in the order they finish. ``retries`` covers a
    chunk whose task raised on a worker; a worker that dies is handled by the scheduler,
    which reruns its tasks on the others (``distributed.scheduler.allowed-failures``)."""
    if not todo:
        return
    from distributed import as_completed

    shared = client.scatter(run, broadcast=True, hash=False)
    futures = [
        client.submit(
            run_chunk, shared, a, b, key=f"kanedyn-mc-{fp[:12]}-{a}", retries=2, pure=False
        )  # fmt: skip
        for a, b in todo
    ]
    try:
        for future in as_completed(futures):
            yield future.result()
    finally:
        client.cancel(futures + [shared])


def _connect(scheduler: Any) -> tuple[int, Any, Callable[[], None]]:
    """``(workers, client or None, close)`` for ``scheduler``."""
    if scheduler is None:
        return 1, None, lambda: None
    try:
        import distributed
    except ImportError:
        raise KanedynError(
            "monte_carlo(scheduler=...) needs dask.distributed: kanedyn[dask] (in kanedyn's source tree: python -m pip install '.[dask]')"
        ) from None
    if isinstance(scheduler, distributed.Client):
        return max(1, len(scheduler.scheduler_info().get("workers", {}))), scheduler, lambda: None
    if scheduler == "processes":
        n = os.cpu_count() or 1
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = distributed.Client(cluster)

        def close() -> None:
            client.close()
            cluster.close()

        return n, client, close
    if isinstance(scheduler, str):
        try:
            client = distributed.Client(scheduler, timeout=30)
        except (OSError, TimeoutError) as exc:
            raise KanedynError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        return workers, client, client.close
    raise ModelError(
        f"scheduler must be None, 'processes', a scheduler address or a "
        f"dask.distributed.Client, got {scheduler!r}"
    )


def _scheduler_name(scheduler: Any) -> str:
    if scheduler is None:
        return "in-process"
    if isinstance(scheduler, str):
        return scheduler
    return str(getattr(getattr(scheduler, "scheduler", None), "address", "dask client"))


def _progress(progress: bool | Callable[[int, int], None], total: int) -> Callable[[int], None]:
    if callable(progress):
        fn = progress
        return lambda done: fn(done, total)
    if not progress:
        return lambda done: None

    def bar(done: int) -> None:
        width = 30
        fill = int(width * done / total) if total else width
        end = "\n" if done >= total else ""
        print(f"\r  [{'#' * fill}{'.' * (width - fill)}] {done}/{total} chunks", end=end,
              file=sys.stderr, flush=True)  # fmt: skip

    return bar


def _gather(pd: Any, run: Run, chunks: list[ChunkResult], settings: dict[str, Any],
            store: Path | None) -> MonteCarloResult:  # fmt: skip
    first = np.concatenate([np.arange(c.first, c.first + c.size) for c in chunks])
    values = np.concatenate([c.values for c in chunks])
    metrics = np.concatenate([c.metrics for c in chunks])
    status = np.concatenate([c.status for c in chunks])
    errors = [e for c in chunks for e in c.errors]
    columns: dict[str, Any] = {"member": first}
    for c, name in enumerate(run.spec.names):
        columns[name] = values[:, c]
    for c, name in enumerate(run.columns):
        columns[name] = metrics[:, c]
    columns["status"] = [STATUS[s] for s in status]
    columns["error"] = errors
    if limited_joints(run.model).names and run.limits != "ignore":
        columns["limit_crossings"] = [x for c in chunks for x in (c.crossings or ("",) * c.size)]
    members = pd.DataFrame(columns)
    hist = np.concatenate([c.histories for c in chunks], axis=2)
    outputs = {name: hist[o] for o, name in enumerate(run.output_names)}
    return MonteCarloResult(
        members=members, t=chunks[0].t, outputs=outputs, parameters=run.spec.names,
        metrics=run.columns, settings=settings, store=store,
    )  # fmt: skip
