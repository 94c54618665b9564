"""``simulate``: a run of the equations of motion, stage by stage.

Two formulations share one state layout ``x = [q | y]``:

* ``"kane"``: ``y = ν = [u | s]``, ``ẏ`` from :func:`kanedyn.forward_dynamics`;
* ``"msd"``: ``y`` = the momentum states of :mod:`kanedyn.dynamics.msd`, ``ẏ`` from
  :func:`kanedyn.dynamics.msd.rates`, and the speeds from one Cholesky solve.

Methods: fixed-step classic RK4 (``method="rk4"``, :func:`kanedyn.dynamics.steppers.rk4_step`;
quaternions are normalized before every stage, as 42's ``KaneNBodyRK4`` does), or any
``scipy.integrate.solve_ivp`` method (``"RK45"``, ``"DOP853"``, ``"Radau"``, ... or an
``OdeSolver`` subclass) with ``rtol``/``atol``.

A run is a pipeline, one module a stage:

1. :mod:`~kanedyn.simulation.run_options`: the options, each checked once;
2. :mod:`~kanedyn.simulation.run_plan`: the plan, built once from the model and the
   options (engine, schedule, lock events, stops, loops, output size);
3. :mod:`~kanedyn.simulation.run_state`: the run's workspace, started at ``t = 0``
   (the right-hand side of :mod:`~kanedyn.simulation.system`, the step check);
4. :mod:`~kanedyn.simulation.run_loops`: one run loop per engine kind;
5. :mod:`~kanedyn.simulation.run_result`: the outputs written as a Trajectory.

Joint DOFs can be locked and unlocked during a run with :class:`Lock` / :class:`Unlock`
events (:mod:`kanedyn.simulation.events`, MSD slide 19): the locked speed is held at
zero and the free speeds are re-solved from the generalized momenta, so momentum is
redistributed, not lost. Joint limits (:mod:`kanedyn.simulation.limits`) are reported,
or made one-sided stops out of the same locks (:mod:`kanedyn.simulation.stops`).
"""

from __future__ import annotations

import time as _time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kanedyn.dynamics.loads import LoadsLike
from kanedyn.errors import SimulationError, SimulationInterrupted
from kanedyn.model import Model, State
from kanedyn.simulation import diagnose, run_result
from kanedyn.simulation import limits as limits_
from kanedyn.simulation import output as output_
from kanedyn.simulation.control import Controller
from kanedyn.simulation.events import Lock, Unlock, lock_indices
from kanedyn.simulation.monitor import state_names
from kanedyn.simulation.options import EnergyMomentum, Engine, Formulation, Method, Stabilization
from kanedyn.simulation.run_loops import LOOPS
from kanedyn.simulation.run_options import RunOptions, check_times
from kanedyn.simulation.run_plan import Loop, RunPlan, check_flexible
from kanedyn.simulation.run_state import Run
from kanedyn.simulation.stops import Stops, stop_limits
from kanedyn.simulation.system import linear_modes, qdot, resolve_engine
from kanedyn.simulation.trajectory import BodyHistory, Trajectory

if TYPE_CHECKING:
    import scipy.integrate

__all__ = [
    "BodyHistory",
    "Lock",
    "Trajectory",
    "Unlock",
    "check_times",
    "linear_modes",
    "qdot",
    "resolve_engine",
    "simulate",
    "state_names",
]


def simulate(
    model: Model,
    state: State,
    t_final: float,
    dt: float = 0.01,
    *,
    method: Method | str | type[scipy.integrate.OdeSolver] = "rk4",
    formulation: Formulation | str = "kane",
    loads: LoadsLike = None,
    output_every: float | None = None,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    events: Sequence[Lock | Unlock] = (),
    controller: Controller | None = None,
    progress: bool | None = None,
    engine: Engine | str = "auto",
    stream: Any = None,
    stabilization: Stabilization | str = "projection",
    baumgarte: tuple[float, float] = (10.0, 10.0),
    limits: limits_.Limits | str = "warn",
    force: bool = False,
) -> Trajectory:
    """Integrate the equations of motion from ``state`` for ``t_final`` seconds.

    Parameters
    ----------
    model : Model
        With flexible bodies (``Body.modes``), run on every engine in Kane's or the MSD
        formulation (the modal momenta ``∂T/∂ξ`` as states; RK4 or an adaptive method,
        loads and a controller; :func:`kanedyn.simulation.run_plan.check_flexible` names
        what is refused), or with ``method="energy-momentum"``
        (:mod:`kanedyn.simulation.conserving.flexible`).
    state : State
        Initial coordinates and speeds (with flexible bodies ``q = [q_joints | η]``,
        ``u = [u | s | ξ]``: :meth:`kanedyn.Model.set_modes`).
    t_final : float
        Duration [s], from t = 0.
    dt : float
        Step of fixed-step RK4; for adaptive methods, the output spacing when
        ``output_every`` is not given.
    method : str, scipy.integrate.OdeSolver subclass or kanedyn.simulation.options.Method
        ``"rk4"`` (default) or a ``scipy.integrate.solve_ivp`` method: a name
        (``"RK45"``, ``"RK23"``, ``"DOP853"``, ``"Radau"``, ``"BDF"``, ``"LSODA"``) or an
        ``OdeSolver`` subclass. ``"energy-momentum"`` (or
        :class:`~kanedyn.EnergyMomentum` with a Newton ``tol``) runs the conserving
        scheme of :mod:`kanedyn.simulation.conserving` (fixed step ``dt``; loads
        evaluated at each step's midpoint; returns a
        :class:`~kanedyn.simulation.conserving.ConservingTrajectory`).
    formulation : {"kane", "msd"} or kanedyn.simulation.options.Formulation
        ``"kane"`` (speeds as states) or ``"msd"`` (momentum states).
    loads : None, sequence of load records, or callable
        Extra loads (see :mod:`kanedyn.dynamics.loads`); a callable is evaluated at every
        right-hand side as ``loads(t, model, state, kin)``.
    output_every : float, optional
        Output interval (a multiple of ``dt`` for RK4); default every step.
    rtol, atol : float
        Tolerances of the adaptive methods.
    events : sequence of Lock or Unlock
        Applied at the first step boundary at or after their time. On a model with
        loops a lock is one more loop constraint row, engaged by a plastic impact
        (:func:`kanedyn.dynamics.loops.plastic_impact`).
    controller : Controller, optional
        Sampled at its period from t = 0 (at the first step boundary at or after each
        sample time) and held in between; its loads add to ``loads``.
    progress : bool, optional
        Show a progress bar (default: when stderr is a terminal).
    engine : {"auto", "compiled", "dense"} or kanedyn.simulation.options.Engine
        How the right-hand side is evaluated: ``"compiled"`` by the generated
        equations of :mod:`kanedyn.compiled` (5-25 times faster; built once per model
        and formulation), ``"dense"`` by the NumPy engine of :func:`kanedyn.forward_dynamics`
        and :mod:`kanedyn.dynamics.msd`. ``"auto"`` (default) compiles when the model can be
        compiled (:func:`kanedyn.compiled.supports`). Both agree to round-off.
    stream : callable, optional
        ``stream(t, q, u)`` is called with each block of outputs, in order, while the run
        goes (every few hundred steps): ``t`` (k,), ``q`` (k, nq), ``u`` (k, n). For
        example :class:`kanedyn.simulation.output.CsvStream`.
        A model with loops runs on the native engine (its RK4 step projects onto the
        constraint manifold) with ``stabilization="projection"``, else on the dense one.
    stabilization : {"projection", "baumgarte", "none"} or kanedyn.simulation.options.Stabilization
        Models with loops only (:class:`~kanedyn.simulation.options.Stabilization`):
        project ``q`` and ``u`` back onto the constraint manifold after every RK4 step
        or every output interval of an adaptive method (default), or Baumgarte's
        stabilization with ``baumgarte = (α, β)`` [1/s], or neither. The initial state
        must be assembled (:meth:`kanedyn.Model.assemble`).
    limits : {"warn", "stop", "ignore"}
        The joints' position limits (:class:`~kanedyn.JointLimits`, read from URDF and
        MJCF files; :mod:`kanedyn.simulation.limits`). ``"warn"`` (default): the first
        crossing of each joint's bound in the outputs is in
        ``Trajectory.limit_crossings`` and a
        :class:`~kanedyn.simulation.limits.JointLimitWarning` names it. ``"stop"``: each
        bound is a one-sided stop, a lock of the joint at the bound, released when its
        constraint force would pull (RK4: at the step boundary after the crossing; an
        adaptive method: at the crossing, located on its dense output; either
        formulation and engine (on models with loops too), and the energy-momentum scheme
        on trees, where a lock is a constraint of the step
        (:mod:`kanedyn.simulation.conserving.locks`); a ModelError for the energy-momentum
        scheme on a model with loops, and for a state that starts outside a range).
        ``"ignore"``: no check.
    force : bool
        Run a fixed step that is refused otherwise: ``dt > t_final``, or a step at which
        RK4 is unstable for the model's fastest mode
        (:func:`kanedyn.simulation.diagnose.unstable_step`); each is then a
        :class:`~kanedyn.simulation.diagnose.StepSizeWarning` instead of an error.

    Returns
    -------
    Trajectory

    Raises
    ------
    ModelError
        Bad arguments (checked before any work): ``dt <= 0``, ``t_final < 0``, a
        non-finite ``t_final``, ``dt`` or ``output_every``, a non-finite state, unknown
        formulation or method, bad events, bad loads, outputs that would not fit in memory
        (:func:`kanedyn.simulation.output.check_output_size`); unless ``force``, a fixed
        step longer than the run or unstable for the fastest mode.
    SimulationError
        A non-finite state during the run, or a 3-DOF gimbal reaching its singular
        angle. The message names the time, the first non-finite quantity and the likely
        cause (:func:`kanedyn.simulation.diagnose.divergence_reason`); ``.trajectory``
        holds the outputs up to the failure (``status == "diverged"``, ``steps`` the
        steps taken). Also when the run runs out of memory all the same (without a
        trajectory).
    SimulationInterrupted
        Ctrl-C at any moment once the arguments are checked (a KeyboardInterrupt);
        ``.trajectory`` holds the outputs up to it, at least the initial state at t = 0
        (``status == "interrupted"``).

    Warns
    -----
    StepSizeWarning
        Before a fixed-step run whose step is too large for the model's fastest mode
        (:func:`kanedyn.simulation.diagnose.step_report`).
    JointLimitWarning
        After a run (``limits="warn"``) whose outputs cross a joint limit, naming each
        joint, bound and the first time.
    """
    options = RunOptions.parse(
        t_final, dt, method=method, formulation=formulation, loads=loads,
        output_every=output_every, rtol=rtol, atol=atol, events=events, controller=controller,
        progress=progress, engine=engine, stream=stream, stabilization=stabilization,
        baumgarte=baumgarte, limits=limits, force=force, stacklevel=2,
    )  # fmt: skip
    model.check_state(state, flexible=True)
    check_flexible(model, options)
    diagnose.check_initial_energy(model, state)
    if isinstance(options.method, EnergyMomentum):
        return _energy_momentum(model, state, options)
    run = Run(RunPlan.of(model, state, options))
    try:
        x = run.begin(stacklevel=2)
        assert run.system is not None and run.rec is not None
        kind = run.plan.loop(run.system.cm)
        steps, speeds = LOOPS[kind](run, x)
        run.rec.drain()
        # the native step projects inside the loop: no residual before projection to report
        native = kind is Loop.RK4_NATIVE
        traj = run_result.trajectory(
            run.system, run.rec, options.method, options.events,
            wall_time=_time.perf_counter() - run.start, steps=steps, speeds=speeds,
            loop_drift=None if run.drift is None or native else run.drift.largest,
        )  # fmt: skip
    except SimulationError as exc:
        raise _diverged(run, exc) from None
    except KeyboardInterrupt:
        raise _interrupted(run) from None
    except MemoryError:
        raise SimulationError(
            "the run ran out of memory (more than the estimate of "
            "kanedyn.simulation.output.check_output_size); output less often (output_every) "
            "or run a shorter time"
        ) from None
    return run_result.checked_limits(traj, options.limits, run.stops, stacklevel=2)


def _energy_momentum(model: Model, state: State, options: RunOptions) -> Any:
    """The run of the energy-momentum scheme (:mod:`kanedyn.simulation.conserving`)."""
    from kanedyn.simulation.conserving import simulate_energy_momentum

    o, integrator = options, options.method
    assert isinstance(integrator, EnergyMomentum)
    limited = stop_limits(model, state, o.limits, integrator, o.events)
    stops = None if limited is None else Stops(limited)
    traj = simulate_energy_momentum(
        model, state, o.t_final, o.dt, loads=o.loads,
        output_every=o.every, tol=integrator.tol,
        max_iter=integrator.max_iter, reduction=integrator.reduction,
        planar=integrator.planar, controller=o.controller,
        events=lock_indices(model, o.events), stops=stops, stream=o.stream,
    )  # fmt: skip
    return run_result.checked_limits(traj, o.limits, stops, stacklevel=3)


def _diverged(run: Run, exc: SimulationError) -> SimulationError:
    """The error of a run that failed, with the likely cause and the outputs so far."""
    system, rec, o = run.system, run.rec, run.plan.options
    if system is None or rec is None:
        return exc
    message = str(exc)
    if getattr(exc, "diverged", False):
        message += "; " + diagnose.divergence_reason(run.failure_modes(), o.dt, o.method.adaptive)
    error = SimulationError(message)
    error.trajectory = run_result.checked_limits(
        run_result.partial(system, rec, o.method, run.start, o.events, "diverged"),
        o.limits, run.stops, stacklevel=3,
    )  # fmt: skip
    return error


def _interrupted(run: Run) -> SimulationInterrupted:
    """The interruption (Ctrl-C) of a run, with the outputs so far (at least ``t = 0``)."""
    plan, o = run.plan, run.plan.options
    with output_.signals_deferred(deliver=False):  # a second Ctrl-C: already stopping
        if run.system is not None and run.rec is not None and run.rec.ts:
            traj = run_result.checked_limits(
                run_result.partial(run.system, run.rec, o.method, run.start, o.events,
                                   "interrupted"),
                o.limits, run.stops, stacklevel=3,
            )  # fmt: skip
        else:
            traj = Trajectory.initial(
                plan.model, plan.state, formulation=o.formulation.value, method=o.method.name,
                status="interrupted", wall_time=_time.perf_counter() - run.start,
            )  # fmt: skip
            if o.stream is not None:
                o.stream(traj.t, traj.q, traj.u)
    return SimulationInterrupted(f"interrupted at t = {traj.t[-1]:.6g} s", traj)
