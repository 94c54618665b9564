"""Ensembles: many trajectories stepped together, for Monte Carlo dispersions.

:func:`simulate_ensemble` integrates B initial states (and optionally B parameter sets,
a :class:`~kanedyn.ModelBatch`) with fixed-step classic RK4, Kane formulation, exactly
as :func:`kanedyn.simulate` does for one state (quaternions normalized before every
stage and after every step), but with every right-hand side evaluated for the whole
ensemble at once:

.. math::

    \\dot x_b = \\begin{bmatrix} \\dot q(q_b, \\nu_b) \\\\ M_b^{-1} f_b \\end{bmatrix},
    \\qquad b = 1 \\dots B

with the stacked ``M_b = L_b L_bᵀ`` factored by ``np.linalg.cholesky``.

**Flexible bodies** (``Body.modes``): the states are ``[q_joints | η]`` and
``[u | s | ξ]`` (``model.nq_total``, ``model.n_total``). Without loads the members run
together on the compiled engine's flexible equations
(:func:`kanedyn.dynamics.flex_recursion.flexible_run`, a
:class:`~kanedyn.ModelBatch`'s parameters as inputs); with loads or
``engine="dense"`` each member runs through :func:`kanedyn.simulate` (the dense
flexible equations, :func:`kanedyn.dynamics.kane.flexible_system_at`, take one state),
with the ensemble's steps.
"""

from __future__ import annotations

import time as _time
import warnings
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.compiled import CompiledModel, compile_model, supports
from kanedyn.compiled.native import NativeCode, default_threads
from kanedyn.dynamics import loops as loops_
from kanedyn.dynamics.kane import forcing_at, kane_terms, mass_matrix_at, solve_mass_matrix
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import LoadsLike, applied_loads
from kanedyn.dynamics.steppers import Schedule, rk4_step
from kanedyn.errors import ModelError, SimulationError
from kanedyn.model import Model, State
from kanedyn.model.batch import ModelBatch, States, resolve
from kanedyn.model.plan import Params
from kanedyn.simulation import limits as limits_
from kanedyn.simulation.integrate import simulate
from kanedyn.simulation.options import RK4, Engine, Formulation
from kanedyn.simulation.run_options import check_times
from kanedyn.simulation.system import resolve_engine
from kanedyn.simulation.trajectory import Trajectory
from kanedyn.spatial.arithmetic import NUMPY

__all__ = ["EnsembleTrajectory", "simulate_ensemble"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class EnsembleTrajectory:
    """The result of :func:`simulate_ensemble`: ``t`` (nt,), ``q`` (nt, B, nq),
    ``u`` (nt, B, n) (with flexible bodies nq + nf and n + nf). ``member(b)`` is member
    b as a :class:`~kanedyn.Trajectory` (with its energies and momenta). ``limits`` is what the run did with the joint
    limits (as for :func:`kanedyn.simulate`), ``limit_crossings[b]`` member b's first
    crossing of each bound (under ``"stop"``, the times its stops first held)."""

    model: Model | ModelBatch
    t: Array
    q: Array
    u: Array
    wall_time: float
    steps: int
    limits: str = "ignore"
    limit_crossings: tuple[tuple[limits_.LimitCrossing, ...], ...] = ()

    @property
    def size(self) -> int:
        """B, the number of members."""
        return self.q.shape[1]

    def member(self, b: int) -> Trajectory:
        model = self.model.member(b) if isinstance(self.model, ModelBatch) else self.model
        return Trajectory(
            model=model, t=self.t, q=self.q[:, b].copy(), u=self.u[:, b].copy(),
            formulation=Formulation.KANE.value, method=RK4.name, wall_time=self.wall_time,
            steps=self.steps, limits=self.limits,
            limit_crossings=self.limit_crossings[b] if self.limit_crossings else (),
        )  # fmt: skip


@attrs.frozen(eq=False)
class _Ensemble:
    """Right-hand side ``ẋ = f(t, x)`` of the Kane formulation for x (B, nq + n)."""

    model: Model
    params: Params | None
    loads: LoadsLike
    compiled: CompiledModel | None = None  # when the ensemble runs compiled

    def normalize(self, q: Array) -> Array:
        """``q`` (B, nq) with unit quaternions (:func:`kanedyn.joints.normalize_quaternions`)."""
        return joints.normalize_quaternions(NUMPY, self.model.layout, q)

    def __call__(self, t: float, x: Array) -> Array:
        model = self.model
        if self.compiled is not None:
            return self._compiled_rhs(self.compiled, x)
        q = self.normalize(x[..., : model.nq])
        u = x[..., model.nq :]
        kin = kinematics_at(model, q, u, self.params)
        states: Any = States(q, u) if callable(self.loads) else _LightStates(q, u)
        L = applied_loads(model, states, kin, self.loads, t)
        tm = kane_terms(model, kin)
        try:
            udot = solve_mass_matrix(mass_matrix_at(model, tm), forcing_at(model, tm, L))
        except ModelError as exc:
            raise SimulationError(f"t = {t:.6g}: {exc}") from None
        return np.concatenate((joints.qdot(model.layout, q, u), udot), axis=-1)

    def _compiled_rhs(self, cm: CompiledModel, x: Array) -> Array:
        """The compiled equations on columns of ``x`` (B, nq + n): one element-wise NumPy
        operation per line of the generated code (quaternions normalized inside)."""
        n = self.model.n_total
        with np.errstate(all="ignore"):
            out = cm.array_fn(*x.T, *cm.parameter_arrays())
        xdot = np.empty(x.shape)
        for c, col in enumerate(out[n:] + out[:n]):
            xdot[:, c] = col
        return xdot


@attrs.frozen(eq=False)
class _LightStates:
    q: Array
    u: Array


def simulate_ensemble(
    model: Model | ModelBatch,
    states: States,
    t_final: float,
    dt: float,
    *,
    loads: LoadsLike = None,
    output_every: float | None = None,
    engine: Engine | str = "auto",
    threads: int | None = None,
    limits: limits_.Limits | str = "warn",
) -> EnsembleTrajectory:
    """Integrate every member of ``states`` (B states) for ``t_final`` seconds, together.

    Fixed-step RK4 with step ``dt``, Kane formulation; the arithmetic of each member is
    that of ``kd.simulate(model_b, states[b], t_final, dt)``, so the trajectories agree
    with per-member runs to round-off.

    Parameters
    ----------
    model : Model or ModelBatch
        With a :class:`~kanedyn.ModelBatch`, member b uses parameter set b.
    states : States
        Initial coordinates and speeds, shapes (B, nq) and (B, n); with flexible bodies
        (B, nq + nf) and (B, n + nf).
    loads : None, sequence, or callable
        Load records applied to every member, or a callable
        ``loads(t, model, states, kin)`` returning records.
    output_every : float, optional
        Output interval, a multiple of ``dt`` (default every step).
    engine : {"auto", "compiled", "dense"} or kanedyn.simulation.options.Engine
        As for :func:`kanedyn.simulate`. ``"auto"`` runs the compiled equations
        (:mod:`kanedyn.compiled`, on arrays of B states; with a ModelBatch, the
        parameters that differ between members are inputs) when there are no loads
        and the model can be compiled; otherwise the dense batched engine. With the
        native back end (:mod:`kanedyn.compiled.native`) each member runs the native
        RK4 loop of :func:`kanedyn.simulate`, members split across threads.
    threads : int, optional
        Threads for the native loop (default: ``$KANEDYN_THREADS``, else the CPUs
        this process may use).
    limits : {"warn", "stop", "ignore"}
        The joints' position limits, as for :func:`kanedyn.simulate`. ``"warn"``
        (default): each member's outputs are checked, ``limit_crossings[b]`` holds its
        first crossings and one :class:`~kanedyn.simulation.limits.JointLimitWarning`
        names the members that crossed. ``"stop"``: a stop locks one member's joint at
        its own time, which changes that member's equations and not the others', so
        each member runs through :func:`kanedyn.simulate` with ``limits="stop"`` (its
        steps are those of the ensemble; loads must then be records, not a callable of
        the ensemble's states).

    Raises
    ------
    ModelError
        Bad arguments, checked before any work.
    SimulationError
        A member became non-finite or its mass matrix lost positive definiteness
        (naming the time and the members).
    """
    if not isinstance(states, States):
        raise ModelError(f"simulate_ensemble needs kd.States, got {type(states).__name__}")
    base, params, q0, u0 = resolve(model, states, flexible=True)
    t_final, dt = check_times(t_final, dt)
    engine = Engine.parse(engine)
    limit_mode = limits_.Limits.parse(limits)
    schedule = Schedule.of(t_final, dt, dt if output_every is None else float(output_every))
    batch = np.broadcast_shapes(q0.shape[:-1], () if params is None else params.batch_shape)
    times = (t_final, dt, output_every)
    if limit_mode is limits_.Limits.STOP and limits_.limited_joints(base).names:
        return _each_member(model, batch, q0, u0, times, loads, engine, limit_mode)
    x = np.concatenate(
        (np.broadcast_to(q0, batch + q0.shape[-1:]), np.broadcast_to(u0, batch + u0.shape[-1:])),
        axis=-1,
    )
    compiled = resolve_engine(base, engine, flexible=True)
    if compiled and isinstance(model, ModelBatch):
        why = supports(base, model.params, flexible=True)
        if why is not None:
            if engine is Engine.COMPILED:
                raise ModelError(f"engine='compiled': {why}; use engine='dense'")
            compiled = False
    if compiled and loads:
        if engine is Engine.COMPILED:
            raise ModelError("engine='compiled' runs ensembles without loads; use engine='dense'")
        compiled = False
    if base.nf and not compiled:
        # the dense engine's flexible equations (kanedyn.dynamics.kane.flexible_system_at)
        # take one state: each member runs through kd.simulate, with the ensemble's steps
        ens = _each_member(model, batch, q0, u0, times, loads, engine, limit_mode)
    else:
        ens = _together(model, base, params, x, schedule, loads, compiled, threads, limit_mode)
    if limit_mode is limits_.Limits.IGNORE or not limits_.limited_joints(base).names:
        return ens
    found = tuple(limits_.crossings(base, ens.t, ens.q[:, b]) for b in range(ens.size))
    if any(found):
        warnings.warn(_report(found), limits_.JointLimitWarning, stacklevel=2)
    return attrs.evolve(ens, limit_crossings=found)


def _together(model: Model | ModelBatch, base: Model, params: Params | None, x: Array,
              schedule: Schedule, loads: LoadsLike, compiled: bool, threads: int | None,
              limit_mode: limits_.Limits) -> EnsembleTrajectory:  # fmt: skip
    """Every member stepped together: the native RK4 loop, or RK4 on (B, nx) arrays of
    the compiled or the dense batched equations. ``x`` (B, nq + n), with flexible bodies
    ``[q_joints | η | u | s | ξ]`` (the compiled engine's states)."""
    system = _Ensemble(base, params, loads, compile_model(model) if compiled else None)
    cm = system.compiled
    if base.loops:
        _check_loops(base, x, cm is not None and cm.native is not None and _regular(schedule))
    system(0.0, x)  # resolves loads once: a bad load fails here, before any work
    start = _time.perf_counter()
    if cm is not None and cm.native is not None and _regular(schedule):
        ts, xs = _run_rk4_native(cm.native, x, schedule, threads)
    else:
        ts, xs = _run_rk4(system, x, schedule)
    wall = _time.perf_counter() - start
    return EnsembleTrajectory(
        model=model,
        t=ts,
        q=xs[..., : base.nq_total],
        u=xs[..., base.nq_total :],
        wall_time=wall,
        steps=schedule.n_steps,
        limits=limit_mode.value,
    )


def _check_loops(model: Model, x: Array, native: bool) -> None:
    """A model with loops runs on the native engine, whose RK4 step projects each member
    onto the constraint manifold (:func:`kanedyn.compiled.kernels.projection`), from
    assembled states."""
    if not native:
        raise ModelError(
            "simulate_ensemble runs a model with loops (kd.Loop) on the native engine "
            "(llvmlite, no loads, a regular schedule); use kd.simulate for each member"
        )
    X = x.reshape(-1, x.shape[-1])
    for b in range(X.shape[0]):
        # with flexible bodies [q | η | u | s | ξ] (the rows' η, ξ columns are zero)
        phi, vel = loops_.residuals(model, X[b, : model.nq_total], X[b, model.nq_total :])
        if max(phi, vel) > 1e-8:
            raise ModelError(
                f"member {b}: the initial state does not close the loops (max |Φ| = "
                f"{phi:.3g}, max |A u| = {vel:.3g}); assemble it first: model.assemble"
            )


def _report(found: tuple[tuple[limits_.LimitCrossing, ...], ...]) -> str:
    """The warning of an ensemble whose members crossed joint limits: how many, and the
    crossings of the first few."""
    members = [b for b, f in enumerate(found) if f]
    shown = "; ".join(f"member {b}: " + ", ".join(map(str, found[b])) for b in members[:3])
    more = f"; and {len(members) - 3} more member(s)" if len(members) > 3 else ""
    return (
        f"joint limits crossed by {len(members)} of {len(found)} members (not enforced; "
        f"limits='stop' makes them stops): {shown}{more}"
    )


def _each_member(
    model: Model | ModelBatch,
    batch: tuple[int, ...],
    q0: Array,
    u0: Array,
    times: tuple[float, float, float | None],
    loads: LoadsLike,
    engine: Engine,
    limit_mode: limits_.Limits,
) -> EnsembleTrajectory:
    """Each member through :func:`kanedyn.simulate`, stacked as an ensemble: under
    ``limits="stop"`` (a member's stops are locks at its own times), and for flexible
    bodies off the compiled engine (the dense flexible equations take one state; the
    joint limits are then checked by the caller)."""
    stop = limit_mode is limits_.Limits.STOP
    if callable(loads):
        base = model.model if isinstance(model, ModelBatch) else model
        why = (
            "simulate_ensemble(limits='stop') runs" if stop
            else f"simulate_ensemble of flexible bodies "
            f"{[b.name for b in base.bodies if b.modes is not None]} with loads or "
            "the dense engine runs"
        )  # fmt: skip
        raise ModelError(
            f"{why} each member through kd.simulate, whose load callables take one state: "
            f"give load records{', or use limits=' + repr('warn') if stop else ''}"
        )
    t_final, dt, output_every = times
    B = int(np.prod(batch)) if batch else 1
    qs = np.broadcast_to(q0, batch + q0.shape[-1:]).reshape(B, -1)
    us = np.broadcast_to(u0, batch + u0.shape[-1:]).reshape(B, -1)
    start = _time.perf_counter()
    runs = []
    for b in range(B):
        member = model.member(b) if isinstance(model, ModelBatch) else model
        runs.append(
            simulate(
                member,
                State(qs[b], us[b]),
                t_final,
                dt,
                loads=loads or None,
                output_every=output_every,
                engine=engine,
                limits="stop" if stop else "ignore",
                progress=False,
            )  # fmt: skip
        )
    return EnsembleTrajectory(
        model=model,
        t=runs[0].t,
        q=np.stack([r.q for r in runs], axis=1),
        u=np.stack([r.u for r in runs], axis=1),
        wall_time=_time.perf_counter() - start,
        steps=runs[0].steps,
        limits=limit_mode.value,
        limit_crossings=tuple(r.limit_crossings for r in runs) if stop else (),
    )


def _regular(schedule: Schedule) -> bool:
    """Whether every step but the last has the size ``dt`` (not shortened by round-off)."""
    N, dt = schedule.n_steps, schedule.dt
    t_prev = np.arange(0, max(N - 1, 0)) * dt
    return bool(np.all(np.minimum(dt, schedule.t_final - t_prev) == dt))


def _run_rk4_native(
    nc: NativeCode, x: Array, schedule: Schedule, threads: int | None
) -> tuple[Array, Array]:
    """The native RK4 loop (:meth:`kanedyn.compiled.native.NativeCode.rk4_batch`) for
    every member, each member's steps those of :func:`kanedyn.simulate`'s native loop
    (quaternions normalized, states checked for finiteness), members split across
    ``threads`` threads (ctypes releases the GIL)."""
    N, stride, dt = schedule.n_steps, schedule.stride, schedule.dt
    steps = np.arange(1, N + 1)
    t_next = (steps * dt).astype(float)
    if N:
        t_next[-1] = schedule.t_final
    flags = (steps % stride == 0) | (steps == N)
    B, nx = x.shape
    X = np.array(x, dtype=float, order="C")
    xs = np.empty((1 + int(flags.sum()), B, nx))
    xs[0] = X
    n_threads = default_threads() if threads is None else max(1, int(threads))
    h_last = schedule.t_final - (t_next[-2] if N > 1 else 0.0)
    h_last = min(dt, h_last)
    chunks = [(0, N - 1, dt, stride), (N - 1, 1, h_last, 1)] if N else []
    row = 1
    for first, count, h, st in chunks:
        if count <= 0:
            continue
        status = nc.rk4_batch(X, count, h, first, st, xs[row:], n_threads)
        if np.any(status):
            step = int(status[status > 0].min())
            bad = np.flatnonzero(status == step)[:5].tolist()
            raise SimulationError(f"t = {t_next[step - 1]:.6g}: members {bad} became non-finite")
        row += int(flags[first : first + count].sum())
    return np.concatenate(([0.0], t_next[flags])), xs


def _run_rk4(system: _Ensemble, x: Array, schedule: Schedule) -> tuple[Array, Array]:
    """RK4 on (B, nq + n) arrays, the same step as :func:`kanedyn.simulate`'s (with
    flexible bodies, ``nq + nf`` coordinates: the quaternions are the joints')."""
    nq = system.model.nq_total
    ts, xs = [0.0], [x.copy()]
    for _, t, h, t_next, output in schedule:
        x = rk4_step(system, t, x, h)
        x[..., :nq] = system.normalize(x[..., :nq])
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.all(np.isfinite(x), axis=-1))[:5].tolist()
            raise SimulationError(f"t = {t_next:.6g}: members {bad} became non-finite")
        if output:
            ts.append(t_next)
            xs.append(x.copy())
    return np.array(ts), np.array(xs)
