"""Stage 4: time integration of either formulation, and the Trajectory it returns.

Two formulations share one state layout ``x = [q | y]``:

* ``"kane"``: ``y = ν = [u | s]``, ``ẏ`` from :func:`kanedyn.forward_dynamics`;
* ``"msd"``: ``y`` = the momentum states of :mod:`kanedyn.dynamics.msd`, ``ẏ`` from
  :func:`kanedyn.dynamics.msd.rates`, and the speeds from one Cholesky solve.

Methods: fixed-step classic RK4 (``method="rk4"``, :func:`kanedyn.dynamics.steppers.rk4_step`;
quaternions are normalized before every stage, as 42's ``KaneNBodyRK4`` does), or any
``scipy.integrate.solve_ivp`` method (``"RK45"``, ``"DOP853"``, ``"Radau"``, ... or an
``OdeSolver`` subclass) with ``rtol``/``atol``. The options are parsed once, on entry,
into the objects of :mod:`kanedyn.simulation.options`.

Joint DOFs can be locked and unlocked during a run with :class:`Lock` / :class:`Unlock`
events (MSD slide 19): the locked speed is held at zero and the free speeds are
re-solved from the generalized momenta, so momentum is redistributed, not lost.
Joint limits (:mod:`kanedyn.simulation.limits`) are reported, or made one-sided stops
out of the same locks.
"""

from __future__ import annotations

import math
import sys
import time as _time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.compiled import CompiledModel, check_finite, compile_model, supports
from kanedyn.dynamics import loops as loops_
from kanedyn.dynamics import msd
from kanedyn.dynamics.kane import (
    forcing_at,
    kane_terms,
    mass_matrix_at,
    solve_mass_matrix,
)
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import LoadsLike, applied_loads, joint_efforts
from kanedyn.dynamics.steppers import FLOATS, Schedule, rk4_step
from kanedyn.errors import (
    SINGULAR_MASS_MATRIX,
    KanedynError,
    ModelError,
    SimulationError,
    SimulationInterrupted,
)
from kanedyn.model import Model, State
from kanedyn.model.names import coordinate_names, speed_names
from kanedyn.simulation import diagnose
from kanedyn.simulation import limits as limits_
from kanedyn.simulation import output as _output
from kanedyn.simulation.control import Controller, Sampler
from kanedyn.simulation.options import EnergyMomentum, Engine, Formulation, Method, Stabilization
from kanedyn.simulation.trajectory import BodyHistory, Trajectory
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.arithmetic import NUMPY

if TYPE_CHECKING:
    import scipy.integrate

__all__ = ["BodyHistory", "Lock", "Trajectory", "Unlock", "simulate"]

Array = NDArray[np.float64]


def resolve_engine(model: Model, engine: Engine) -> bool:
    """Whether to use the compiled engine (:mod:`kanedyn.compiled`) for ``engine``.

    ``AUTO``: compiled when the model can be compiled;
    ``COMPILED``: compiled, or a ModelError saying why not; ``DENSE``: never.
    """
    if engine is Engine.DENSE:
        return False
    why = supports(model)
    if why is not None and engine is Engine.COMPILED:
        raise ModelError(f"engine='compiled': {why}; use engine='dense'")
    return why is None


@attrs.frozen
class Lock:
    """Lock DOF ``dof`` (0-based, rotational first) of ``joint`` at time ``t``."""

    t: float
    joint: str
    dof: int = 0


@attrs.frozen
class Unlock:
    """Unlock a DOF locked earlier."""

    t: float
    joint: str
    dof: int = 0


# --------------------------------------------------------------------------- right-hand sides
def qdot(model: Model, q: Array, u: Array) -> Array:
    """Kinematic equations (:func:`kanedyn.joints.qdot`): angle and slide rates are
    speeds; ``q̇ = ½ q ⊗ [ω, 0]``."""
    return joints.qdot(model.layout, q, u)


def _normalize_quaternions(model: Model, q: Array) -> Array:
    """``q`` with unit quaternions (:func:`kanedyn.joints.normalize_quaternions`)."""
    return joints.normalize_quaternions(NUMPY, model.layout, q)


@attrs.define
class _System:
    """Right-hand side ``ẋ = f(t, x)`` of one formulation with a set of locked speeds.

    With ``compiled``, ``cm`` is the model's compiled equations for the current lock set
    (looked up once per lock set, not per right-hand side).
    """

    model: Model
    formulation: Formulation
    loads: LoadsLike
    compiled: bool = False  # either formulation through kanedyn.compiled
    held: list[Any] = attrs.field(factory=list)  # controller commands, zero-order hold
    started: bool = False  # after the first call, errors from loads name the time
    _locked: NDArray[np.intp] = attrs.field(
        factory=lambda: np.zeros(0, dtype=np.intp), alias="locked"
    )
    cm: CompiledModel | None = attrs.field(init=False, default=None)
    baumgarte: tuple[float, float] | None = None  # loops: Baumgarte's (α, β), or None
    part: loops_.Partition | None = attrs.field(init=False, default=None)  # loops: speeds
    repartitions: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        self.locked = self._locked

    @property
    def locked(self) -> NDArray[np.intp]:
        """The locked speed indices (held at zero)."""
        return self._locked

    @locked.setter
    def locked(self, locked: NDArray[np.intp]) -> None:
        if self.compiled and (self.cm is None or not np.array_equal(locked, self._locked)):
            self.cm = compile_model(self.model, locked.tolist(), self.formulation)
        self._locked = locked

    def speeds(self, q: Array, y: Array) -> Array:
        if self.formulation is Formulation.KANE:
            return y
        if self.cm is not None:  # the last n outputs of the MSD kernel
            return np.array(self.cm.rhs(q.tolist(), y.tolist())[self.model.n + self.model.nq :])
        return msd._speeds(
            self.model, kinematics_at(self.model, q, np.zeros(self.model.n)), y, self.locked
        )

    def __call__(self, t: float, x: Array) -> Array:
        model = self.model
        nc = None if self.cm is None else self.cm.native
        if nc is not None and not (self.loads or self.held):
            # the native kernel normalizes the quaternions itself
            if not nc.rhs_into(x):
                check_finite(x)  # a non-finite state, or:
                raise ModelError(SINGULAR_MASS_MATRIX)
            out = nc.out
            return np.concatenate((out[model.n : model.n + model.nq], out[: model.n]))
        q = _normalize_quaternions(model, x[: model.nq])
        y = x[model.nq :]
        if self.cm is not None and not (self.loads or self.held):
            return self._compiled(self.cm, q, y, None)
        u = self.speeds(q, y)
        kin = kinematics_at(model, q, u)
        state = State(q, u) if callable(self.loads) else _LightState(q, u)
        records = self.loads(t, model, state, kin) if callable(self.loads) else self.loads
        if self.held:
            records = [*(records or ()), *self.held]
        try:
            L = applied_loads(model, state, kin, records, t)  # type: ignore[arg-type]
        except ModelError as exc:
            if not self.started:
                raise
            raise SimulationError(f"t = {t:.6g}: loads: {exc}") from None
        kane = self.formulation is Formulation.KANE
        if self.cm is not None:
            return self._compiled(self.cm, q, u if kane else y, L)
        if kane and model.loops:  # Cᵀ(Fr + Fr*) = 0 with the dependent speeds eliminated
            eq = loops_._equations(model, kin, L, u, self.part, baumgarte=self.baumgarte)
            if self.part is not None and eq.partition is not self.part:
                self.repartitions += 1
            self.part = eq.partition
            try:
                ydot = loops_.constrained_accelerations(eq)
            except ModelError as exc:
                raise SimulationError(f"t = {t:.6g}: {exc}") from None
        elif kane:
            tm = kane_terms(model, kin)
            M, f = mass_matrix_at(model, tm), forcing_at(model, tm, L)
            ydot = np.zeros(model.n)
            # a singular mass matrix raises ModelError; the run loops add the time
            if self.locked.size:
                free = np.setdiff1d(np.arange(model.n), self.locked)
                ydot[free] = solve_mass_matrix(M[np.ix_(free, free)], f[free])
            else:
                ydot = solve_mass_matrix(M, f)
        else:
            ydot = msd.rates(model, kin, L)
            ydot[self.locked] = 0.0
        return np.concatenate((qdot(model, q, u), ydot))

    def _compiled(self, cm: CompiledModel, q: Array, y: Array, L: Any) -> Array:
        """``[q̇ | ẏ]`` from the compiled equations (locked speeds held at zero); ``y``
        are the speeds (Kane) or the momentum states (MSD, then ``L`` is None)."""
        qv, yv = q.tolist(), y.tolist()
        n, nq = self.model.n, self.model.nq
        out = cm.rhs(qv, yv) if L is None else cm.rhs_with_loads(qv, yv, L)
        xdot = np.array(out[n : n + nq] + out[:n])
        check_finite(xdot)
        return xdot

    def initial(self, state: State) -> Array:
        if self.formulation is Formulation.KANE:
            return np.concatenate((state.q, state.u))
        return np.concatenate((state.q, msd.momenta(self.model, state)))

    def relock(self, q: Array, y: Array, locked: NDArray[np.intp]) -> Array:
        """New ``y`` after the locked set changes at configuration ``q``.

        The generalized momenta of the free DOFs are kept (the locking impulse does no
        work along them), so total momentum is conserved through the event; a DOF that
        is unlocked starts from its generalized momentum with its speed still zero.
        """
        model = self.model
        u_old = self.speeds(q, y)
        kin = kinematics_at(model, q, u_old)
        p_old = msd._root_to_total(model, kin, msd._generalized_momenta(model, kin, u_old))
        was_locked = self.locked
        self.locked = locked
        if self.formulation is Formulation.KANE:
            return msd._speeds(model, kin, p_old, locked)
        y_new = y.copy()
        y_new[was_locked] = p_old[was_locked]
        return y_new


@attrs.frozen(eq=False)
class _LightState:
    """A State without validation, for the inner loop (loads that are not callables)."""

    q: Array
    u: Array


# --------------------------------------------------------------------------- simulate
class _Progress:
    """A progress bar on stderr (tqdm when installed), updated with the number of steps
    done (or, for adaptive methods, thousandths of ``t_final``); each update also calls
    ``tick`` (the streaming of outputs). It draws each state once and ends once."""

    def __init__(self, total: int, enabled: bool, unit: str = "step", tick: Any = None) -> None:
        self.total, self.enabled, self.bar, self.unit = total, enabled, None, unit
        self.last, self.done, self.tick, self.closed = 0.0, -1, tick, False
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit=unit, file=sys.stderr, leave=False)
            except ImportError:
                self.bar = None

    def update(self, done: int) -> None:
        if self.tick is not None:
            self.tick()
        if not self.enabled or done == self.done:
            return
        self.done = done
        if self.bar is not None:
            self.bar.n = done
            self.bar.refresh()
            return
        now = _time.perf_counter()
        if now - self.last > 0.5 or done == self.total:
            self.last = now
            frac = done / max(self.total, 1)
            bar = "#" * int(30 * frac)
            count = f"  {self.unit} {done}/{self.total}" if self.unit else ""
            print(f"\r[{bar:<30}] {100 * frac:5.1f}%{count}", end="", file=sys.stderr)

    def close(self) -> None:
        if self.enabled and not self.closed:
            self.closed = True
            if self.bar is not None:
                self.bar.close()
            else:
                print(file=sys.stderr)


def _lock_indices(model: Model, events: Sequence[Any]) -> list[tuple[float, str, int]]:
    out = []
    for ev in events:
        if not isinstance(ev, (Lock, Unlock)):
            raise ModelError(f"unknown event {ev!r}: use kanedyn.Lock or kanedyn.Unlock")
        k = model.joint_index(ev.joint)
        j = model.joints[k]
        if not 0 <= ev.dof < j.ndof:
            raise ModelError(
                f"joint {ev.joint!r} has {j.ndof} DOF; cannot lock or unlock DOF {ev.dof}"
            )
        if k in msd.momentum_roots(model) or (j.inner is None and j.rot_type == "spherical"):
            raise ModelError(f"joint {ev.joint!r}: the DOFs of a free root cannot be locked")
        out.append(
            (
                float(ev.t),
                "lock" if isinstance(ev, Lock) else "unlock",
                int(model.layout.u_index[k][ev.dof]),
            )
        )
    out.sort(key=lambda e: e[0])
    locked: set[int] = set()
    for t, kind, r in out:
        if kind == "lock":
            if r in locked:
                raise ModelError(f"t = {t}: speed {speed_names(model)[r]!r} is already locked")
            locked.add(r)
        else:
            if r not in locked:
                raise ModelError(
                    f"t = {t}: cannot unlock {speed_names(model)[r]!r}: it is not locked"
                )
            locked.discard(r)
    return out


class _Stops:
    """``limits="stop"``: the joints' bounds as one-sided stops, applied by :func:`_run_rk4`
    after every step (:meth:`after_step`). ``engaged`` maps a limited joint (its row in
    ``lim``) to the side of its stop (+1 lower, -1 upper); ``held`` lists the first time
    each stop held its joint."""

    def __init__(self, lim: limits_.LimitedJoints):
        self.lim = lim
        self.engaged: dict[int, int] = {}
        self.held: list[limits_.LimitCrossing] = []

    @classmethod
    def of(
        cls,
        model: Model,
        state: State,
        mode: limits_.Limits,
        integrator: Method,
        events: Sequence[Any],
    ) -> _Stops | None:
        """The stops of a ``limits="stop"`` run (None for the other modes, or a model
        without limits), or a ModelError for a run that cannot have them."""
        lim = limits_.limited_joints(model)
        if mode is not limits_.Limits.STOP or not lim.names:
            return None
        why = (
            "the energy-momentum scheme has no lock events"
            if isinstance(integrator, EnergyMomentum)
            else f"method {integrator.name!r} steps adaptively"
            if integrator.adaptive
            else "a model with loops takes no lock events"
            if model.loops
            else None
        )
        if why is not None:
            raise ModelError(
                f"limits='stop' needs fixed-step RK4 (method='rk4') on a tree: {why}; the "
                "stops are locks applied between steps. Use limits='warn' to be told of "
                "crossings"
            )
        for ev in events:
            if isinstance(ev, (Lock, Unlock)) and ev.joint in lim.names:
                raise ModelError(
                    f"joint {ev.joint!r}: its limits are stops (limits='stop'), so it cannot "
                    "also be locked or unlocked by events; use limits='warn'"
                )
        x = state.q[lim.q_index]
        outside = np.nonzero((x < lim.lower) | (x > lim.upper))[0]
        if outside.size:
            c = int(outside[0])
            raise ModelError(
                f"joint {lim.names[c]!r} starts at {x[c]:g}, outside its limits "
                f"[{lim.lower[c]:g}, {lim.upper[c]:g}]: limits='stop' needs a start within "
                "them (move the joint, or use limits='warn')"
            )
        return cls(lim)

    def after_step(self, system: _System, t: float, x: Array) -> Array:
        """The state after the step that ended at ``t``: stops whose DOF would
        accelerate back into the range released, joints past a bound set on it and
        locked there (:meth:`_System.relock`)."""
        model, lim = system.model, self.lim
        nq = model.nq
        ours = lim.u_index[list(self.engaged)]
        events_locked = np.setdiff1d(system.locked, ours)
        changed = False
        if self.engaged:
            q = _normalize_quaternions(model, x[:nq])
            u = system.speeds(q, x[nq:])
            for c, side in list(self.engaged.items()):
                free = np.setdiff1d(system.locked, lim.u_index[c : c + 1])
                # the Kane equations with this DOF unlocked: its acceleration
                trial = _System(model, Formulation.KANE, system.loads, held=system.held,
                                started=True, locked=free)  # fmt: skip
                if side * trial(t, np.concatenate((q, u)))[nq + lim.u_index[c]] > 0.0:
                    del self.engaged[c]
                    changed = True
        xq = x[lim.q_index]
        for c in range(len(lim.names)):
            if c in self.engaged or lim.lower[c] <= xq[c] <= lim.upper[c]:
                continue
            side, bound = (1, "lower") if xq[c] < lim.lower[c] else (-1, "upper")
            value = lim.lower[c] if side > 0 else lim.upper[c]
            x[lim.q_index[c]] = value
            self.engaged[c] = side
            if all((e.joint, e.bound) != (lim.names[c], bound) for e in self.held):
                self.held.append(limits_.LimitCrossing(lim.names[c], bound, float(value), t))
            changed = True
        if not changed:
            return x
        locked = np.union1d(events_locked, lim.u_index[list(self.engaged)]).astype(np.intp)
        return np.concatenate((x[:nq], system.relock(x[:nq], x[nq:], locked)))

    def speeds(self) -> NDArray[np.intp]:
        """The speed indices the stops hold locked now."""
        return self.lim.u_index[list(self.engaged)]


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
    state : State
        Initial coordinates and speeds.
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
        Applied at the first step boundary at or after their time.
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
        A model with loops runs on the dense engine.
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
        constraint force would pull (fixed-step RK4 on either formulation and engine;
        a ModelError for adaptive methods, the energy-momentum scheme and models with
        loops, and for a state that starts outside a range). ``"ignore"``: no check.
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
    model.check_state(state)
    diagnose.check_initial_energy(model, state)
    t_final, dt = check_times(t_final, dt)
    form = Formulation.parse(formulation)
    integrator = Method.parse(method)
    limit_mode = limits_.Limits.parse(limits)
    stops = _Stops.of(model, state, limit_mode, integrator, events)
    if isinstance(integrator, EnergyMomentum):
        from kanedyn.simulation.conserving import simulate_energy_momentum

        if events:
            raise ModelError("method='energy-momentum' does not take events")
        traj = simulate_energy_momentum(
            model, state, t_final, dt, loads=loads, output_every=output_every,
            tol=integrator.tol, max_iter=integrator.max_iter, reduction=integrator.reduction,
            planar=integrator.planar, controller=controller,
        )  # fmt: skip
        return _checked_limits(traj, limit_mode)
    fixed = not integrator.adaptive
    if fixed and dt > t_final > 0.0:
        _step_problem(
            f"dt = {dt:g} s is longer than the run (t_final = {t_final:g} s): the run would "
            f"be one step of {t_final:g} s; give a step of at most t_final",
            force,
        )
    use_compiled = resolve_engine(model, Engine.parse(engine))
    every = dt if output_every is None else float(output_every)
    if not np.isfinite(every) or every <= 0.0:
        raise ModelError(f"output_every must be positive, got {output_every}")
    schedule = None if integrator.adaptive else Schedule.of(t_final, dt, every)
    n_out = (
        math.floor(t_final / every) + 2
        if schedule is None
        else schedule.n_steps // schedule.stride + 2
    )
    _output.check_output_size(model, n_out)
    lock_events = _lock_indices(model, events)
    project = _loop_options(model, state, form, lock_events, Stabilization.parse(stabilization))
    start = _time.perf_counter()
    system: _System | None = None
    rec: _output.Recorder | None = None
    try:
        with _output.signals_deferred():  # not inside llvmlite's callbacks, where it is lost
            system = _System(model, form, loads, compiled=use_compiled)
        if model.loops and Stabilization.parse(stabilization) is Stabilization.BAUMGARTE:
            system.baumgarte = _baumgarte(baumgarte)
        x = system.initial(state)
        sampler = Sampler(controller, model)
        sampler.sample(system, 0.0, x)
        system(0.0, x)  # resolves loads once: a bad load name fails here, before any work
        system.started = True
        x0, modes = x.copy(), None
        if schedule is not None and t_final > 0.0:
            modes = diagnose.linear_modes(system, x0)
            h = min(dt, t_final)
            unstable = None if modes is None else diagnose.unstable_step(modes, h)
            if unstable:
                _step_problem(unstable, force)
            # the drift check is worth its cost when the run is longer than the check
            elif modes is not None and 4 * schedule.n_steps > 2 * x0.size + 1:
                report = diagnose.step_report(modes, dt, schedule.n_steps)
                if report:
                    warnings.warn(report, diagnose.StepSizeWarning, stacklevel=2)
        if progress is None:
            progress = sys.stderr.isatty()
        rec = _output.Recorder(None if stream is None else _Streamer(system, stream))
        applied = _n_due(lock_events, 0.0)
        if applied:
            x = _apply_events(system, x, lock_events, applied)
        rec.add(0.0, x.copy(), system.locked)  # t = 0 first, whatever happens next
        steps, speeds = 0, None  # speeds: (outputs, n) at the outputs under MSD, if known
        speeds_list: list[Any] | None = None
        drift = _Drift(model) if project else None
        if schedule is None:
            steps = _run_adaptive(
                system, x, t_final, every, lock_events, integrator, rtol, atol, sampler,
                progress, rec, drift,
            )  # fmt: skip
        elif (
            system.cm is not None
            and system.cm.native is not None
            and not (loads or model.layout.gimbal3.size or stops)
        ):
            steps, speeds = _run_rk4_native(
                system, x, schedule, lock_events, progress, sampler, rec
            )
        elif system.cm is not None and not (loads or controller or lock_events or stops):
            steps, speeds_list = _run_rk4_compiled(system, system.cm, x, schedule, progress, rec)
            speeds = None if speeds_list is None else np.array(speeds_list)
        else:
            steps = _run_rk4(system, x, schedule, lock_events, progress, sampler, rec, drift, stops)
        wall = _time.perf_counter() - start
        rec.drain()
        xs = np.array(rec.xs, dtype=float)
        q = xs[:, : model.nq]
        # speeds at the outputs (MSD stores momenta), with the lock set of each instant
        u = _output_speeds(system, xs, rec.locks) if speeds is None else np.array(speeds)
    except SimulationError as exc:
        if system is None or rec is None:
            raise
        if modes is None:
            modes = diagnose.linear_modes(system, x0)
        message = str(exc)
        if getattr(exc, "diverged", False):
            message += "; " + diagnose.divergence_reason(modes, dt, integrator.adaptive)
        error = SimulationError(message)
        error.trajectory = _checked_limits(
            _partial(system, rec, form, integrator, start, events, "diverged"), limit_mode, stops
        )
        raise error from None
    except KeyboardInterrupt:
        with _output.signals_deferred(deliver=False):  # a second Ctrl-C: already stopping
            if system is not None and rec is not None and rec.ts:
                traj = _checked_limits(
                    _partial(system, rec, form, integrator, start, events, "interrupted"),
                    limit_mode,
                    stops,
                )
            else:
                traj = Trajectory.initial(
                    model, state, formulation=form.value, method=integrator.name,
                    status="interrupted", wall_time=_time.perf_counter() - start,
                )  # fmt: skip
                if stream is not None:
                    stream(traj.t, traj.q, traj.u)
        raise SimulationInterrupted(f"interrupted at t = {traj.t[-1]:.6g} s", traj) from None
    except MemoryError:
        raise SimulationError(
            "the run ran out of memory (more than the estimate of "
            "kanedyn.simulation.output.check_output_size); output less often (output_every) "
            "or run a shorter time"
        ) from None
    traj = Trajectory(
        model=model, t=np.array(rec.ts), q=q, u=u, formulation=form.value,
        method=integrator.name, wall_time=wall, steps=steps, events=tuple(events),
        momenta=xs[:, model.nq :].copy() if form is Formulation.MSD else None,
        engine=_engine_label(system),
        loop_drift=drift.largest if drift is not None else None,
        repartitions=system.repartitions,
    )  # fmt: skip
    return _checked_limits(traj, limit_mode, stops, warn=True)


def _checked_limits(
    traj: Any, mode: limits_.Limits, stops: _Stops | None = None, *, warn: bool = True
) -> Any:
    """``traj`` with its ``limits`` mode and ``limit_crossings``: the crossings of its
    outputs (``"warn"``, with a JointLimitWarning when ``warn``) or the first time each
    stop held its joint (``"stop"``)."""
    found: tuple[limits_.LimitCrossing, ...] = ()
    if mode is limits_.Limits.WARN:
        found = limits_.crossings(traj.model, traj.t, traj.q)
        if found and warn:
            warnings.warn(limits_.report(found), limits_.JointLimitWarning, stacklevel=3)
    elif mode is limits_.Limits.STOP and stops is not None:
        found = tuple(sorted(stops.held, key=lambda e: (e.t, e.joint)))
    return attrs.evolve(traj, limits=mode.value, limit_crossings=found)


def _step_problem(message: str, force: bool) -> None:
    """A step problem: a ModelError, or with ``force`` a StepSizeWarning."""
    if not force:
        raise ModelError(f"{message}; or force=True (--force) to run it anyway")
    warnings.warn(f"{message} (run anyway: force=True)", diagnose.StepSizeWarning, stacklevel=3)


class _Streamer:
    """Sends each block of outputs to ``stream`` as ``(t (k,), q (k, nq), u (k, n))``
    (speeds from the momentum states under MSD, with the lock set of each output)."""

    def __init__(self, system: _System, stream: Any) -> None:
        self.system, self.stream = system, stream

    def __call__(self, ts: list[float], xs: list[Any], locks: list[Any]) -> None:
        model = self.system.model
        was_locked = self.system.locked
        x = np.array(xs, dtype=float).reshape(len(ts), model.nq + model.n)
        u = _output_speeds(self.system, x, locks)
        self.system.locked = was_locked
        self.stream(np.array(ts, dtype=float), x[:, : model.nq], u)


def _partial(
    system: _System,
    rec: _output.Recorder,
    form: Formulation,
    integrator: Method,
    start: float,
    events: Sequence[Any],
    status: str,
) -> Trajectory:
    """The Trajectory of the outputs recorded before a run stopped early."""
    model = system.model
    n = min(len(rec.ts), len(rec.xs), len(rec.locks))
    del rec.ts[n:], rec.xs[n:], rec.locks[n:]
    try:
        rec.drain()
    except (KanedynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
        pass  # the run already failed: keep what is recorded
    xs = np.array(rec.xs, dtype=float).reshape(n, model.nq + model.n)
    was_locked = system.locked
    u = _output_speeds(system, xs, rec.locks[:n])
    system.locked = was_locked
    return Trajectory(
        model=model, t=np.array(rec.ts, dtype=float), q=xs[:, : model.nq], u=u,
        formulation=form.value, method=integrator.name,
        wall_time=_time.perf_counter() - start, steps=rec.steps, events=tuple(events),
        momenta=xs[:, model.nq :].copy() if form is Formulation.MSD else None, status=status,
        engine=_engine_label(system),
    )  # fmt: skip


def _engine_label(system: _System) -> str:
    """``Trajectory.engine``: native, python (and why not native), or dense."""
    cm = system.cm
    if cm is None:
        return "dense"
    if cm.backend == "native":
        return "native"
    return f"{cm.backend} ({cm.backend_note})"


def _loop_options(
    model: Model, state: State, form: Formulation, lock_events: list[Any], how: Stabilization
) -> bool:
    """Check a model with loops can be simulated from ``state``; whether to project."""
    if not model.loops:
        return False
    if form is not Formulation.KANE:
        raise ModelError(
            "a model with loops is simulated in Kane's formulation (formulation='kane'); "
            "the momentum states of 'msd' do not hold the loop constraints"
        )
    if lock_events:
        raise ModelError("Lock/Unlock events are not supported on a model with loops")
    phi, vel = loops_.residuals(model, state.q, state.u)
    if max(phi, vel) > 1e-8:
        raise ModelError(
            f"the initial state does not close the loops (max |Φ| = {phi:.3g}, "
            f"max |A u| = {vel:.3g}); assemble it first: model.assemble(state, fix=[...])"
        )
    return how is Stabilization.PROJECTION


def _baumgarte(value: Any) -> tuple[float, float]:
    try:
        alpha, beta = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ModelError(f"baumgarte must be two numbers (alpha, beta), got {value!r}") from None
    if not (np.isfinite(alpha) and np.isfinite(beta)) or alpha < 0 or beta < 0:
        raise ModelError(f"baumgarte must be two non-negative numbers, got {value!r}")
    return alpha, beta


class _Drift:
    """Projects states of a model with loops back onto the constraint manifold and keeps
    the largest residual found before a projection."""

    def __init__(self, model: Model):
        self.model, self.largest = model, 0.0

    def __call__(self, x: Array) -> Array:
        nq = self.model.nq
        q, u, before = loops_.project(self.model, x[:nq], x[nq:])
        self.largest = max(self.largest, before)
        return np.concatenate((q, u))


def check_times(t_final: Any, dt: Any) -> tuple[float, float]:
    """``(t_final, dt)`` as floats, or a ModelError: both finite, ``dt > 0`` and
    ``t_final >= 0``."""
    try:
        t_final, dt = float(t_final), float(dt)
    except (TypeError, ValueError):
        raise ModelError(f"t_final and dt must be numbers, got {t_final!r}, {dt!r}") from None
    for name, value in (("dt", dt), ("t_final", t_final)):
        if not np.isfinite(value):
            raise ModelError(f"{name} must be a finite number, got {value}")
    if dt <= 0.0:
        raise ModelError(f"dt must be positive, got {dt}")
    if t_final < 0.0:
        raise ModelError(f"t_final must be non-negative, got {t_final}")
    return t_final, dt


def _locked_at(
    lock_events: list[tuple[float, str, int]], t: float, n_applied: int | None = None
) -> NDArray[np.intp]:
    locked: set[int] = set()
    for i, (te, kind, r) in enumerate(lock_events):
        if (n_applied is not None and i >= n_applied) or (n_applied is None and te > t):
            break
        (locked.add if kind == "lock" else locked.discard)(r)
    return np.array(sorted(locked), dtype=np.intp)


def _output_speeds(system: _System, xs: Array, locks: list[NDArray[np.intp]]) -> Array:
    model = system.model
    if system.formulation is Formulation.KANE:
        return xs[:, model.nq :].copy()
    out = np.empty((len(xs), model.n))
    for i, (x, locked) in enumerate(zip(xs, locks, strict=True)):
        system.locked = locked
        try:  # a diverged state's speeds may not be computable: NaN for that row only
            with np.errstate(all="ignore"):
                out[i] = system.speeds(x[: model.nq], x[model.nq :])
        except (KanedynError, ArithmeticError, ValueError, np.linalg.LinAlgError):
            out[i] = np.nan
    return out


class _Monitor:
    """Checks each accepted state: finite, and no 3-DOF gimbal at or through lock.

    ``det Γ`` of a 3-DOF gimbal vanishes at its singular middle angle (cos θ2 = 0, or
    sin θ2 = 0 for symmetric sequences). A state within ``|det Γ| < tol`` of it, or a
    sign change of ``det Γ`` between two accepted states (the angle stepped through
    it), is gimbal lock. When a step fails (non-finite values, a singular mass matrix)
    next to a nearly singular gimbal, the error names that gimbal too; otherwise it is a
    divergence (``diverged = True`` on the error), and names the first non-finite
    quantity of the state, or the largest one of the last good state.
    """

    tol = 1e-4
    near = 0.2  # |det Γ| of the last good state below which a failure is blamed on lock

    def __init__(self, system: _System, x0: Array):
        self.model = system.model
        self.names = state_names(system.model, system.formulation)
        self.det = self._dets(x0)
        self.x = x0

    def _dets(self, x: Array) -> Array:
        lay = self.model.layout
        if not lay.gimbal3.size:
            return np.zeros(0)
        theta = np.append(x[: self.model.nq], 0.0)[lay.gimbal_q[lay.gimbal3]]
        return np.linalg.det(rot.euler_gamma_axes(lay.gimbal_axes[lay.gimbal3], theta))

    def _lock(self, t: float, row: int, x: Array, how: str) -> SimulationError:
        lay = self.model.layout
        j = self.model.joints[lay.gimbal[lay.gimbal3[row]]]
        theta = np.append(x[: self.model.nq], 0.0)[lay.gimbal_q[lay.gimbal3[row]]]
        return SimulationError(
            f"t = {t:.6g}: joint {j.name!r} (3-DOF gimbal, sequence {j.rot_seq}) {how} its "
            f"singular angle (gimbal lock, angles {np.round(theta, 6).tolist()} rad); "
            "model it as a spherical joint"
        )

    def check(self, t: float, x: Array) -> None:
        x = np.asarray(x, dtype=float)
        bad_values = ~np.isfinite(x)
        if np.any(bad_values):
            i = int(np.argmax(bad_values))
            raise self.failure(t, f"the state became non-finite (first: {self.names[i]} = {x[i]})")
        det = self._dets(x)
        if det.size:
            bad = np.nonzero((np.abs(det) < self.tol) | (np.sign(det) != np.sign(self.det)))[0]
            if bad.size:
                raise self._lock(t, int(bad[0]), x, "reached or passed")
        self.det, self.x = det, x

    def failure(self, t: float, reason: str) -> SimulationError:
        """The error for a step that failed at ``t``, blaming a nearly locked gimbal."""
        if self.det.size:
            row = int(np.argmin(np.abs(self.det)))
            if abs(self.det[row]) < self.near:
                return self._lock(t, row, self.x, "approached")
        if "non-finite" not in reason and self.x.size:
            i = int(np.argmax(np.abs(self.x)))
            reason += (
                f"; the largest value of the last good state was {self.names[i]} = {self.x[i]:.3g}"
            )
        error = SimulationError(f"t = {t:.6g}: {reason}")
        error.diverged = True  # type: ignore[attr-defined]
        return error


def state_names(model: Model, formulation: Formulation) -> list[str]:
    """Names of the integrated state ``[q | y]``: the coordinates, then the speeds
    (Kane) or ``"<speed> momentum"`` (MSD)."""
    speeds = speed_names(model)
    if formulation is Formulation.MSD:
        speeds = [f"{name} momentum" for name in speeds]
    return [*coordinate_names(model), *speeds]


def _run_rk4(
    system: _System,
    x: Array,
    schedule: Schedule,
    lock_events: list[tuple[float, str, int]],
    progress: bool,
    sampler: Sampler,
    rec: _output.Recorder,
    drift: _Drift | None = None,
    stops: _Stops | None = None,
) -> int:
    """RK4 on NumPy state vectors, with lock events, controller samples and callable
    loads; quaternions normalized before every stage and after every step; with
    ``drift``, the state projected onto the loops' constraint manifold after every step;
    with ``stops``, the joint limits' stops applied after every step.
    The outputs go to ``rec``; returns the number of steps."""
    model = system.model
    nq = model.nq
    bar = _Progress(schedule.n_steps, progress and schedule.n_steps > 2000, tick=rec.drain)
    applied = _n_due(lock_events, 0.0)  # applied by simulate, before t = 0 was recorded
    monitor = _Monitor(system, x)
    try:
        for step, t, h, t_next, output in schedule:
            try:
                with np.errstate(all="ignore"):
                    x = rk4_step(system, t, x, h)
            except (ModelError, np.linalg.LinAlgError) as exc:
                raise monitor.failure(t + h, str(exc)) from None
            x[:nq] = _normalize_quaternions(model, x[:nq])
            if drift is not None:
                x = drift(x)
            monitor.check(t_next, x)
            if stops is not None:
                x = stops.after_step(system, t_next, x)
            rec.steps = step
            due = _n_due(lock_events, t_next)
            if due != applied:
                applied = due
                x = _apply_events(system, x, lock_events, applied, stops)
            if step < schedule.n_steps:
                sampler.sample(system, t_next, x)
            if output:
                rec.add(t_next, x.copy(), system.locked)
            if step % 200 == 0:
                bar.update(step)
        bar.update(schedule.n_steps)
    finally:
        bar.close()
    return schedule.n_steps


def _run_rk4_compiled(
    system: _System,
    cm: CompiledModel,
    x: Array,
    schedule: Schedule,
    progress: bool,
    rec: _output.Recorder,
) -> tuple[int, list[Any] | None]:
    """:func:`_run_rk4` for the common case (either formulation, compiled, no loads,
    controller or events), on Python floats: the same step (quaternions normalized
    inside every right-hand side and after every step), without NumPy calls.
    Under MSD it also returns the speeds at the outputs (the kernel's last n outputs).
    The right-hand side is the compiled kernel when there is one (tcc; or native, for
    models the native RK4 loop does not take), else the generated Python.
    """
    model = system.model
    n, nq = model.n, model.nq
    kernel = cm._code.kernel
    if kernel is None:
        rhs = cm._scalar
    else:

        def rhs(*xs: float) -> list[float]:
            if kernel.rhs_into(xs):
                return kernel.out.tolist()  # type: ignore[no-any-return]
            return cm._scalar(*xs)  # a zero pivot or a non-finite value: fail as Python does

    msd = system.formulation is Formulation.MSD
    bar = _Progress(schedule.n_steps, progress and schedule.n_steps > 2000, tick=rec.drain)
    quats = [tuple(int(i) for i in row) for row in model.layout.quat_q]
    monitor = _Monitor(system, x)
    gimbal3 = bool(model.layout.gimbal3.size)

    # the state is [q | y]; the kernel returns [ẏ | q̇] (Kane, y = ν) or [ẏ | q̇ | ν] (MSD)
    def xdot(t: float, xs: list[float]) -> list[float]:
        out = rhs(*xs)
        return out[n : n + nq] + out[:n]

    xs_l = x.tolist()  # t = 0 is recorded by simulate
    first = rhs(*xs_l)
    us = [first[n + nq :]] if msd else None
    k1: list[float] | None = first[n : n + nq] + first[:n]
    isfinite = math.isfinite
    try:
        for step, t, h, t_next, output in schedule:
            try:
                xs_l = rk4_step(xdot, t, last := xs_l, h, FLOATS, k1)
            except (ZeroDivisionError, ValueError, OverflowError) as exc:
                monitor.x = np.array(last)
                raise monitor.failure(t + h, f"the right-hand side failed ({exc})") from None
            k1 = None
            for i0, i1, i2, i3 in quats:
                qx, qy, qz, qw = xs_l[i0], xs_l[i1], xs_l[i2], xs_l[i3]
                s = 1.0 / math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
                xs_l[i0], xs_l[i1], xs_l[i2], xs_l[i3] = qx * s, qy * s, qz * s, qw * s
            if gimbal3 or not isfinite(sum(xs_l)):
                monitor.check(t_next, np.array(xs_l))
            rec.steps = step
            if output:
                if us is not None:  # the speeds at the output; k1 of the next step
                    try:
                        first = rhs(*xs_l)
                    except (ZeroDivisionError, ValueError, OverflowError) as exc:
                        raise monitor.failure(
                            t_next, f"the right-hand side failed ({exc})"
                        ) from None
                    us.append(first[n + nq :])
                    k1 = first[n : n + nq] + first[:n]
                rec.add(t_next, xs_l, system.locked)
            if step % 200 == 0:
                bar.update(step)
        bar.update(schedule.n_steps)
    finally:
        bar.close()
    return schedule.n_steps, us


_NEVER = 2**62  # an output stride no step reaches


def _run_rk4_native(
    system: _System,
    x: Array,
    schedule: Schedule,
    lock_events: list[tuple[float, str, int]],
    progress: bool,
    sampler: Sampler,
    rec: _output.Recorder,
) -> tuple[int, Array | None]:
    """:func:`_run_rk4` with the steps run by the native RK4 loop
    (:mod:`kanedyn.compiled.llvm`: the same step, quaternions normalized, the state
    checked for finiteness, outputs written every ``stride`` steps), re-entering Python
    only after the steps where a lock event falls due or the controller is sampled, for
    the last step, and every :data:`_NATIVE_BLOCK` steps (so outputs stream to ``rec``
    and an interrupt is handled while the run goes). A controller's held commands enter
    the loop as constant generalized efforts when they are all :class:`~kanedyn.JointLoad`
    s; other commands are stepped in Python between samples (with the native right-hand
    side). Returns the number of steps and, under MSD, the speeds at the outputs.
    """
    model = system.model
    nx = model.nq + model.n
    N, stride, dt, t_final = schedule.n_steps, schedule.stride, schedule.dt, schedule.t_final
    # nothing here grows with the steps (a run of 1e9 steps holds its outputs only): the
    # times of step i (1-based) are computed as the Schedule computes them

    def t_at(i: int) -> float:  # the time after step i
        return t_final if i == N else i * dt

    def h_at(i: int) -> float:  # the size of step i
        return min(dt, t_final - (t_at(i - 1) if i > 1 else 0.0))

    def flagged(i: int) -> bool:  # an output after step i
        return i % stride == 0 or i == N

    def n_flagged(a: int, b: int) -> int:  # outputs after steps a + 1 ... b
        return b // stride - a // stride + int(a < N <= b and N % stride != 0)

    def first_step_at(t: float) -> int:  # the first step ending at or after t (N + 1: none)
        i = min(max(1, math.ceil(t / dt)), N + 1)
        while i > 1 and t_at(i - 1) >= t:
            i -= 1
        while i <= N and t_at(i) < t:
            i += 1
        return i

    if N > 1 and h_at(N - 1) != dt:  # a step shortened by round-off: the plain loop
        return _run_rk4(system, x, schedule, lock_events, progress, sampler, rec), None
    out_steps = np.arange(stride, N + 1, stride)
    if N and (not out_steps.size or out_steps[-1] != N):
        out_steps = np.append(out_steps, N)
    ts: Array = np.concatenate(([0.0], out_steps * dt))
    if N:
        ts[-1] = t_final
    xs = np.empty((1 + out_steps.size, nx))
    bar = _Progress(N, progress and N > 2000, tick=rec.drain)
    applied = _n_due(lock_events, 0.0)  # applied by simulate, before t = 0 was recorded
    x = np.array(x, dtype=float)
    xs[0] = x
    locks = [system.locked]
    monitor = _Monitor(system, x)
    monitor.x = x
    row, s, sent = 1, 0, 1  # the next output row; the steps done; the rows recorded

    def record() -> None:  # the output rows written since the last call, to rec
        nonlocal sent
        for r in range(sent, row):
            rec.add(float(ts[r]), xs[r].copy(), locks[r])
        sent = row
        rec.steps = s

    def fail(bad: int, first: int) -> SimulationError:
        """The failure at step ``bad`` of a native call that began after step ``first``,
        its outputs before that step recorded."""
        nonlocal row, s
        done = (bad - 1) // stride - first // stride
        locks.extend([system.locked] * done)
        row += done
        s = bad - 1
        record()
        bad_values = ~np.isfinite(x)  # the state the loop stopped at
        which = ""
        if np.any(bad_values):
            i = int(np.argmax(bad_values))
            which = f" (first: {monitor.names[i]} = {x[i]})"
        return monitor.failure(t_at(bad), f"the state became non-finite{which}")

    try:
        while s < N:
            # b: the next step after which Python acts (an event, a sample, a block's
            # end, the last step)
            b = min(N, s + _NATIVE_BLOCK)
            if applied < len(lock_events):
                b = min(b, first_step_at(lock_events[applied][0] - 1e-12))
            if sampler.controller is not None:
                b = min(b, first_step_at(sampler.next - 1e-9))
            b = max(b, s + 1)
            nc = system.cm.native  # type: ignore[union-attr]
            assert nc is not None  # the lock set's compiled model is native too
            tau = joint_efforts(model, system.held) if system.held else None
            if system.held and tau is None:
                row = _python_steps(system, x, s, b - 1, t_at, h_at, flagged, xs, row, monitor, rec)
                locks += [system.locked] * n_flagged(s, b - 1)
            elif b - 1 > s:
                bad = nc.rk4(x, b - 1 - s, dt, s, stride, xs[row:], tau)
                if bad:
                    raise fail(bad, s)
                done = (b - 1) // stride - s // stride
                row += done
                locks += [system.locked] * done
            # step b, then Python's part
            if system.held and tau is None:
                _python_steps(
                    system, x, b - 1, b, t_at, h_at, lambda i: False, xs, row, monitor, rec
                )
            else:
                bad = nc.rk4(x, 1, h_at(b), b - 1, _NEVER, xs[:1], tau)
                if bad:
                    raise fail(bad, b - 1)
            s = b
            due = _n_due(lock_events, t_at(b))
            if due != applied:
                applied = due
                x = _apply_events(system, x, lock_events, applied)
            if b < N:
                sampler.sample(system, t_at(b), x)
            if flagged(b):
                xs[row] = x
                row += 1
                locks.append(system.locked)
            record()
            bar.update(s)
    finally:
        bar.close()
    speeds = None
    if system.formulation is Formulation.MSD:
        nc = system.cm.native  # type: ignore[union-attr]
        if all(np.array_equal(lk, locks[0]) for lk in locks) and nc is not None:
            out, _ = nc.rhs_batch(xs)
            speeds = out[:, nx : nx + model.n].copy()
    return N, speeds


_NATIVE_BLOCK = 1000  # steps per native call at most: outputs stream, interrupts land


def _python_steps(
    system: _System, x: Array, s: int, b: int, t_at: Callable[[int], float],
    h_at: Callable[[int], float], flagged: Callable[[int], bool], xs: Array, row: int,
    monitor: _Monitor, rec: _output.Recorder,
) -> int:  # fmt: skip
    """Steps ``s + 1 ... b`` in Python (``rk4_step`` on ``system``), in place on ``x``,
    with outputs after the flagged steps from row ``row``; returns the next row. Step
    ``i`` ends at ``t_at(i)`` and has size ``h_at(i)``."""
    nq = system.model.nq
    for i in range(s + 1, b + 1):
        h = h_at(i)
        try:
            with np.errstate(all="ignore"):
                xn = rk4_step(system, t_at(i - 1) if i > 1 else 0.0, x, h)
        except (ModelError, np.linalg.LinAlgError) as exc:
            raise monitor.failure(t_at(i), str(exc)) from None
        xn[:nq] = _normalize_quaternions(system.model, xn[:nq])
        monitor.check(t_at(i), xn)
        x[:] = xn
        rec.steps = i
        if flagged(i):
            xs[row] = x
            row += 1
    return row


def _apply_events(
    system: _System,
    x: Array,
    lock_events: list[tuple[float, str, int]],
    n_applied: int,
    stops: _Stops | None = None,
) -> Array:
    """Re-solve the state for the lock set after the first ``n_applied`` events (and
    the engaged ``stops``)."""
    model = system.model
    locked = _locked_at(lock_events, np.inf, n_applied=n_applied)
    if stops is not None:
        locked = np.union1d(locked, stops.speeds()).astype(np.intp)
    q, y = x[: model.nq], x[model.nq :]
    return np.concatenate((q, system.relock(q, y, locked)))


def _n_due(lock_events: list[tuple[float, str, int]], t: float) -> int:
    return sum(1 for e in lock_events if e[0] <= t + 1e-12)


def _run_adaptive(
    system: _System,
    x: Array,
    t_final: float,
    every: float,
    lock_events: list[tuple[float, str, int]],
    method: Method,
    rtol: float,
    atol: float,
    sampler: Sampler,
    progress: bool,
    rec: _output.Recorder,
    drift: _Drift | None = None,
) -> int:
    """``method``'s solver (a ``scipy.integrate.OdeSolver``, stepped here as
    ``solve_ivp`` steps it) between the event and controller-sample times, with outputs
    every ``every`` seconds from its dense output; returns the number of right-hand
    sides evaluated. With ``drift``, restarted from the state projected onto the loops'
    constraint manifold at every output time."""
    assert method.solver is not None
    model = system.model
    t_out = np.arange(0.0, t_final + 0.5 * every, every)
    t_out = np.minimum(t_out[t_out <= t_final + 1e-9 * max(every, 1.0)], t_final)
    if t_out[-1] < t_final - 1e-12:
        t_out = np.append(t_out, t_final)
    bounds = sorted(
        {
            0.0,
            t_final,
            *[e[0] for e in lock_events if 0.0 < e[0] < t_final],
            *sampler.times(t_final),
            *(t_out if drift is not None else ()),
        }
    )
    ts = rec.ts
    nfev, applied = 0, _n_due(lock_events, 0.0)  # t = 0's events: applied by simulate
    monitor = _Monitor(system, x)
    bar = _Progress(1000, progress, unit="", tick=rec.drain)

    def record(t: float, xk: Array) -> None:
        if ts and abs(t - ts[-1]) < 1e-12:
            return
        xk = np.array(xk, dtype=float)
        xk[: model.nq] = _normalize_quaternions(model, xk[: model.nq])
        monitor.check(t, xk)
        rec.add(t, xk, system.locked)

    try:
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if _n_due(lock_events, a) != applied:
                applied = _n_due(lock_events, a)
                x = _apply_events(system, x, lock_events, applied)
            sampler.sample(system, a, x)
            record(a, x)
            inside = t_out[(t_out > a) & (t_out < b)]
            try:
                solver = method.solver(system, a, x, b, rtol=rtol, atol=atol)
                k = 0
                while solver.status == "running":
                    t_old = solver.t
                    message = solver.step()
                    if solver.status == "failed":
                        error = SimulationError(
                            f"t = {solver.t:.6g}: {method.name} failed: {message}"
                        )
                        error.diverged = True  # type: ignore[attr-defined]
                        raise error
                    due = inside[k:][inside[k:] <= solver.t]
                    if due.size:
                        sol = solver.dense_output()
                        for te in due:
                            record(float(te), sol(te))
                        k += due.size
                    rec.steps = nfev + solver.nfev
                    if solver.t > t_old:
                        bar.update(int(1000 * solver.t / t_final))
            except (ModelError, np.linalg.LinAlgError) as exc:
                raise monitor.failure(solver.t if "solver" in locals() else a, str(exc)) from None
            nfev += solver.nfev
            x = np.array(solver.y, dtype=float)
            if drift is not None:  # restart from the state projected onto the manifold
                x[: model.nq] = _normalize_quaternions(model, x[: model.nq])
                x = drift(x)
            record(b, x)
        bar.update(1000)
    finally:
        bar.close()
    return nfev


def linear_modes(
    model: Model,
    state: State,
    *,
    formulation: Formulation | str = "kane",
    loads: LoadsLike = None,
    engine: Engine | str = "auto",
) -> diagnose.Modes | None:
    """The eigenvalues of the linearized equations of motion at ``state``
    (:func:`kanedyn.simulation.diagnose.linear_modes` of the right-hand side
    :func:`simulate` integrates); None for very large models."""
    system = _System(
        model, Formulation.parse(formulation), loads,
        compiled=resolve_engine(model, Engine.parse(engine)),
    )  # fmt: skip
    return diagnose.linear_modes(system, system.initial(state))
