"""Stage 4: time integration of either formulation, and the Trajectory it returns.

Two formulations share one state layout ``x = [q | y]``:

* ``"kane"``: ``y = ν = [u | s]``, ``ẏ`` from :func:`kanedyn.forward_dynamics`;
* ``"msd"``: ``y`` = the momentum states of :mod:`kanedyn.dynamics.msd`, ``ẏ`` from
  :func:`kanedyn.dynamics.msd.rates`, and the speeds from one Cholesky solve.

Methods: fixed-step classic RK4 (``method="rk4"``, :func:`kanedyn.simulation.steppers.rk4_step`;
quaternions are normalized before every stage, as 42's ``KaneNBodyRK4`` does), or any
``scipy.integrate.solve_ivp`` method (``"RK45"``, ``"DOP853"``, ``"Radau"``, ... or an
``OdeSolver`` subclass) with ``rtol``/``atol``. The options are parsed once, on entry,
into the objects of :mod:`kanedyn.simulation.options`.

Joint DOFs can be locked and unlocked during a run with :class:`Lock` / :class:`Unlock`
events (MSD slide 19): the locked speed is held at zero and the free speeds are
re-solved from the generalized momenta, so momentum is redistributed, not lost.
"""

from __future__ import annotations

import math
import sys
import time as _time
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import scipy.integrate
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.compiled import CompiledModel, check_finite, compile_model, supports
from kanedyn.dynamics import msd
from kanedyn.dynamics.kane import (
    forcing_at,
    kane_terms,
    kinetic_energy,
    mass_matrix_at,
    momentum,
    potential_energy,
    solve_mass_matrix,
)
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import LoadsLike, applied_loads
from kanedyn.errors import ModelError, SimulationError
from kanedyn.model import Model, State
from kanedyn.simulation.control import Controller
from kanedyn.simulation.options import EnergyMomentum, Engine, Formulation, Method
from kanedyn.simulation.steppers import FLOATS, Schedule, rk4_step
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.arithmetic import NUMPY

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
        if kane:
            tm = kane_terms(model, kin)
            M, f = mass_matrix_at(model, tm), forcing_at(model, tm, L)
            ydot = np.zeros(model.n)
            try:
                if self.locked.size:
                    free = np.setdiff1d(np.arange(model.n), self.locked)
                    ydot[free] = solve_mass_matrix(M[np.ix_(free, free)], f[free])
                else:
                    ydot = solve_mass_matrix(M, f)
            except ModelError as exc:
                raise SimulationError(f"t = {t:.6g}: {exc}") from None
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


# --------------------------------------------------------------------------- trajectory
@attrs.frozen(eq=False)
class BodyHistory:
    """One body's time histories: ``omega`` (nt, 3) in its own axes, ``R_N_B`` (nt, 3, 3),
    ``position`` (nt, 3) and ``velocity`` (nt, 3) of its mass centre in N."""

    omega: Array
    R_N_B: Array
    position: Array
    velocity: Array


@attrs.frozen(eq=False, slots=False)
class Trajectory:
    """The result of :func:`simulate`: ``t`` (nt,), ``q`` (nt, nq), ``u`` (nt, n); for an
    MSD run, ``momenta`` (nt, n) holds the integrated momentum states themselves
    (:func:`kanedyn.dynamics.msd.momenta` layout; ``None`` for Kane runs).

    Derived histories are computed on first use: ``kinetic_energy``,
    ``potential_energy``, ``total_energy``, ``linear_momentum`` (nt, 3, N),
    ``angular_momentum`` (nt, 3, about the system mass centre, N), ``body(name)``.
    """

    model: Model
    t: Array
    q: Array
    u: Array
    formulation: str
    method: str
    wall_time: float
    steps: int
    events: tuple[Any, ...] = ()
    momenta: Array | None = None

    def state(self, i: int) -> State:
        return State(self.q[i], self.u[i])

    def _map(self, fn: Any) -> Array:
        return np.array([fn(self.model, State(q, u)) for q, u in zip(self.q, self.u, strict=True)])

    @cached_property
    def kinetic_energy(self) -> Array:
        """Kinetic energy at each output time, (nt,) [J]."""
        return self._map(kinetic_energy)

    @cached_property
    def potential_energy(self) -> Array:
        """Gravity and spring potential energy at each output time, (nt,) [J]."""
        return self._map(potential_energy)

    @property
    def total_energy(self) -> Array:
        """Kinetic plus potential energy, (nt,) [J]."""
        return self.kinetic_energy + self.potential_energy

    @cached_property
    def _momenta(self) -> tuple[Array, Array]:
        PH = [momentum(self.model, State(q, u)) for q, u in zip(self.q, self.u, strict=True)]
        return np.array([p for p, _ in PH]), np.array([h for _, h in PH])

    @property
    def linear_momentum(self) -> Array:
        """Total linear momentum in N, (nt, 3) [N s]."""
        return self._momenta[0]

    @property
    def angular_momentum(self) -> Array:
        """Total angular momentum about the system mass centre, N axes, (nt, 3) [N m s]."""
        return self._momenta[1]

    def body(self, name: str) -> BodyHistory:
        i = self.model.body_index(name)
        kins = [kinematics_at(self.model, q, u) for q, u in zip(self.q, self.u, strict=True)]
        R = np.array([k.R_N_B[i] for k in kins])
        w_N = np.array([k.omega[i] for k in kins])
        return BodyHistory(
            omega=np.einsum("tji,tj->ti", R, w_N),
            R_N_B=R,
            position=np.array([k.r[i] for k in kins]),
            velocity=np.array([k.v[i] for k in kins]),
        )

    def column_names(self) -> list[str]:
        return ["t", *coordinate_names(self.model), *speed_names(self.model)]

    def to_csv(self, path: str | Path) -> None:
        """Write t, q, u and the energy and momentum histories as CSV with a header."""
        names = [
            *self.column_names(),
            "kinetic_energy",
            "potential_energy",
            "Px",
            "Py",
            "Pz",
            "Hx",
            "Hy",
            "Hz",
        ]
        data = np.column_stack(
            (
                self.t,
                self.q,
                self.u,
                self.kinetic_energy,
                self.potential_energy,
                self.linear_momentum,
                self.angular_momentum,
            )
        )
        np.savetxt(path, data, delimiter=",", header=",".join(names), comments="", fmt="%.17g")

    def to_npz(self, path: str | Path) -> None:
        """Write every history (and the coordinate and speed names) to a NumPy .npz file."""
        np.savez(
            path,
            t=self.t,
            q=self.q,
            u=self.u,
            kinetic_energy=self.kinetic_energy,
            potential_energy=self.potential_energy,
            linear_momentum=self.linear_momentum,
            angular_momentum=self.angular_momentum,
            coordinate_names=np.array(coordinate_names(self.model)),
            speed_names=np.array(speed_names(self.model)),
        )

    def plot(self, path: str | Path | None = None, body: str | None = None) -> Any:
        """Energy, momentum drift and one body's rates against time (needs matplotlib)."""
        from kanedyn.plotting import plot_trajectory

        return plot_trajectory(self, path=path, body=body)


def coordinate_names(model: Model) -> list[str]:
    names = [""] * model.nq
    for k, j in enumerate(model.joints):
        idx = model.layout.q_index[k]
        nr = j.n_rot_coordinates
        rot_names = (
            ["qx", "qy", "qz", "qw"]
            if j.rot_type == "spherical"
            else [f"angle{i}" for i in range(nr)]
        )
        for pos, i in enumerate(idx):
            names[i] = f"{j.name}.{rot_names[pos]}" if pos < nr else f"{j.name}.d{pos - nr}"
    return names


def speed_names(model: Model) -> list[str]:
    names = [""] * model.n
    for k, j in enumerate(model.joints):
        for pos, i in enumerate(model.layout.u_index[k]):
            names[i] = f"{j.name}.w{pos}" if pos < j.rot_dof else f"{j.name}.s{pos - j.rot_dof}"
    return names


# --------------------------------------------------------------------------- simulate
class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.bar = total, enabled, None
        self.last = 0.0
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="step", file=sys.stderr, leave=False)
            except ImportError:
                self.bar = None

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.n = done
            self.bar.refresh()
            return
        now = _time.perf_counter()
        if now - self.last > 0.5 or done == self.total:
            self.last = now
            frac = done / max(self.total, 1)
            bar = "#" * int(30 * frac)
            print(
                f"\r[{bar:<30}] {100 * frac:5.1f}%  step {done}/{self.total}",
                end="",
                file=sys.stderr,
            )

    def close(self) -> None:
        if self.enabled:
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

    Returns
    -------
    Trajectory

    Raises
    ------
    ModelError
        Bad arguments (checked before any work): ``dt <= 0``, ``t_final < 0``, a
        non-finite state, unknown formulation or method, bad events, bad loads.
    SimulationError
        A non-finite state during the run, or a 3-DOF gimbal reaching its singular
        angle (naming the time and the joint).
    """
    model.check_state(state)
    t_final, dt = check_times(t_final, dt)
    form = Formulation.parse(formulation)
    integrator = Method.parse(method)
    if isinstance(integrator, EnergyMomentum):
        from kanedyn.simulation.conserving import simulate_energy_momentum

        if events or controller is not None:
            raise ModelError("method='energy-momentum' does not take events or a controller")
        return simulate_energy_momentum(
            model, state, t_final, dt, loads=loads, output_every=output_every,
            tol=integrator.tol, max_iter=integrator.max_iter, reduction=integrator.reduction,
        )  # fmt: skip
    use_compiled = resolve_engine(model, Engine.parse(engine))
    every = dt if output_every is None else float(output_every)
    if not np.isfinite(every) or every <= 0.0:
        raise ModelError(f"output_every must be positive, got {output_every}")
    schedule = None if integrator.adaptive else Schedule.of(t_final, dt, every)
    lock_events = _lock_indices(model, events)
    system = _System(model, form, loads, compiled=use_compiled)
    x = system.initial(state)
    sampler = _Sampler(controller, model)
    sampler.sample(system, 0.0, x)
    system(0.0, x)  # resolves loads once: a bad load name fails here, before any work
    system.started = True
    if progress is None:
        progress = sys.stderr.isatty()
    start = _time.perf_counter()
    speeds = None
    if schedule is None:
        ts, xs, locks, steps = _run_adaptive(
            system, x, t_final, every, lock_events, integrator, rtol, atol, sampler
        )
    elif system.cm is not None and not (loads or controller or lock_events):
        ts, xs, locks, steps, speeds = _run_rk4_compiled(system, system.cm, x, schedule, progress)
    else:
        ts, xs, locks, steps = _run_rk4(system, x, schedule, lock_events, progress, sampler)
    wall = _time.perf_counter() - start
    q = xs[:, : model.nq]
    # speeds at the outputs (MSD stores momenta), with the lock set of each instant
    u = _output_speeds(system, xs, locks) if speeds is None else speeds
    return Trajectory(
        model=model, t=ts, q=q, u=u, formulation=form.value, method=integrator.name,
        wall_time=wall, steps=steps, events=tuple(events),
        momenta=xs[:, model.nq :].copy() if form is Formulation.MSD else None,
    )  # fmt: skip


def check_times(t_final: Any, dt: Any) -> tuple[float, float]:
    """``(t_final, dt)`` as floats, or a ModelError: ``dt > 0`` and ``t_final >= 0``."""
    try:
        t_final, dt = float(t_final), float(dt)
    except (TypeError, ValueError):
        raise ModelError(f"t_final and dt must be numbers, got {t_final!r}, {dt!r}") from None
    if not np.isfinite(dt) or dt <= 0.0:
        raise ModelError(f"dt must be positive, got {dt}")
    if not np.isfinite(t_final) or t_final < 0.0:
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
        out[i] = system.speeds(x[: model.nq], x[model.nq :])
    return out


class _Monitor:
    """Checks each accepted state: finite, and no 3-DOF gimbal at or through lock.

    ``det Γ`` of a 3-DOF gimbal vanishes at its singular middle angle (cos θ2 = 0, or
    sin θ2 = 0 for symmetric sequences). A state within ``|det Γ| < tol`` of it, or a
    sign change of ``det Γ`` between two accepted states (the angle stepped through
    it), is gimbal lock. When a step fails (non-finite values, a singular mass matrix)
    next to a nearly singular gimbal, the error names that gimbal too.
    """

    tol = 1e-4
    near = 0.2  # |det Γ| of the last good state below which a failure is blamed on lock

    def __init__(self, model: Model, x0: Array):
        self.model = model
        self.det = self._dets(x0)

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
        if not np.all(np.isfinite(x)):
            raise self.failure(t, f"the state became non-finite: {x}")
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
                return self._lock(t, row, getattr(self, "x", np.zeros(self.model.nq)), "approached")
        return SimulationError(f"t = {t:.6g}: {reason}")


class _Sampler:
    """Samples a Controller at its period and stores the held commands in the system."""

    def __init__(self, controller: Controller | None, model: Model):
        self.controller, self.model = controller, model
        self.next = 0.0

    def times(self, t_final: float) -> list[float]:
        if self.controller is None:
            return []
        n = int(np.floor(t_final / self.controller.period + 1e-9))
        return [
            k * self.controller.period
            for k in range(1, n + 1)
            if k * self.controller.period < t_final
        ]

    def sample(self, system: _System, t: float, x: Array) -> None:
        if self.controller is None or t < self.next - 1e-9:
            return
        model = self.model
        q = _normalize_quaternions(model, x[: model.nq])
        u = system.speeds(q, x[model.nq :])
        system.held = list(self.controller.law(t, model, State(q, u)))
        while self.next <= t + 1e-9:
            self.next += self.controller.period


def _run_rk4(
    system: _System,
    x: Array,
    schedule: Schedule,
    lock_events: list[tuple[float, str, int]],
    progress: bool,
    sampler: _Sampler,
) -> tuple[Array, Array, list[NDArray[np.intp]], int]:
    """RK4 on NumPy state vectors, with lock events, controller samples and callable
    loads; quaternions normalized before every stage and after every step."""
    model = system.model
    nq = model.nq
    bar = _Progress(schedule.n_steps, progress and schedule.n_steps > 2000)
    applied = _n_due(lock_events, 0.0)
    if applied:
        x = _apply_events(system, x, lock_events, applied)
    ts, xs, locks = [0.0], [x.copy()], [system.locked]
    monitor = _Monitor(model, x)
    monitor.x = x
    for step, t, h, t_next, output in schedule:
        try:
            with np.errstate(all="ignore"):
                x = rk4_step(system, t, x, h)
        except (ModelError, np.linalg.LinAlgError) as exc:
            raise monitor.failure(t + h, str(exc)) from None
        x[:nq] = _normalize_quaternions(model, x[:nq])
        monitor.check(t_next, x)
        due = _n_due(lock_events, t_next)
        if due != applied:
            applied = due
            x = _apply_events(system, x, lock_events, applied)
        if step < schedule.n_steps:
            sampler.sample(system, t_next, x)
        if output:
            ts.append(t_next)
            xs.append(x.copy())
            locks.append(system.locked)
        if step % 200 == 0:
            bar.update(step)
    bar.update(schedule.n_steps)
    bar.close()
    return np.array(ts), np.array(xs), locks, schedule.n_steps


def _run_rk4_compiled(
    system: _System, cm: CompiledModel, x: Array, schedule: Schedule, progress: bool
) -> tuple[Array, Array, list[NDArray[np.intp]], int, Array | None]:
    """:func:`_run_rk4` for the common case (either formulation, compiled, no loads,
    controller or events), on Python floats: the same step (quaternions normalized
    inside every right-hand side and after every step), without NumPy calls.
    Under MSD it also returns the speeds at the outputs (the kernel's last n outputs).
    """
    model = system.model
    n, nq = model.n, model.nq
    rhs = cm._scalar
    msd = system.formulation is Formulation.MSD
    bar = _Progress(schedule.n_steps, progress and schedule.n_steps > 2000)
    quats = [tuple(int(i) for i in row) for row in model.layout.quat_q]
    monitor = _Monitor(model, x)
    monitor.x = x
    gimbal3 = bool(model.layout.gimbal3.size)

    # the state is [q | y]; the kernel returns [ẏ | q̇] (Kane, y = ν) or [ẏ | q̇ | ν] (MSD)
    def xdot(t: float, xs: list[float]) -> list[float]:
        out = rhs(*xs)
        return out[n : n + nq] + out[:n]

    xs_l = x.tolist()
    ts, out = [0.0], [list(xs_l)]
    first = rhs(*xs_l)
    us = [first[n + nq :]] if msd else None
    k1: list[float] | None = first[n : n + nq] + first[:n]
    isfinite = math.isfinite
    for step, t, h, t_next, output in schedule:
        try:
            xs_l = rk4_step(xdot, t, xs_l, h, FLOATS, k1)
        except (ZeroDivisionError, ValueError, OverflowError) as exc:
            raise monitor.failure(t + h, f"the right-hand side failed ({exc})") from None
        k1 = None
        for i0, i1, i2, i3 in quats:
            qx, qy, qz, qw = xs_l[i0], xs_l[i1], xs_l[i2], xs_l[i3]
            s = 1.0 / math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
            xs_l[i0], xs_l[i1], xs_l[i2], xs_l[i3] = qx * s, qy * s, qz * s, qw * s
        if gimbal3:
            monitor.check(t_next, np.array(xs_l))
        elif not isfinite(sum(xs_l)):
            raise monitor.failure(t_next, f"the state became non-finite: {np.array(xs_l)}")
        if output:
            ts.append(t_next)
            out.append(xs_l)
            if us is not None:  # the speeds at the output; k1 of the next step
                try:
                    first = rhs(*xs_l)
                except (ZeroDivisionError, ValueError, OverflowError) as exc:
                    raise monitor.failure(t_next, f"the right-hand side failed ({exc})") from None
                us.append(first[n + nq :])
                k1 = first[n : n + nq] + first[:n]
        if step % 200 == 0:
            bar.update(step)
    bar.update(schedule.n_steps)
    bar.close()
    speeds = None if us is None else np.array(us)
    return np.array(ts), np.array(out), [system.locked] * len(ts), schedule.n_steps, speeds


def _apply_events(
    system: _System, x: Array, lock_events: list[tuple[float, str, int]], n_applied: int
) -> Array:
    """Re-solve the state for the lock set after the first ``n_applied`` events."""
    model = system.model
    locked = _locked_at(lock_events, np.inf, n_applied=n_applied)
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
    sampler: _Sampler,
) -> tuple[Array, Array, list[NDArray[np.intp]], int]:
    """``method``'s solver between the event and controller-sample times, with outputs
    every ``every`` seconds."""
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
        }
    )
    ts: list[float] = []
    xs: list[Array] = []
    locks: list[NDArray[np.intp]] = []
    nfev, applied = 0, 0
    monitor = _Monitor(model, x)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if _n_due(lock_events, a) != applied:
            applied = _n_due(lock_events, a)
            x = _apply_events(system, x, lock_events, applied)
        sampler.sample(system, a, x)
        inside = np.union1d(t_out[(t_out > a) & (t_out < b)], [a, b])
        try:
            sol = scipy.integrate.solve_ivp(
                system, (a, b), x, method=method.solver, t_eval=inside, rtol=rtol, atol=atol
            )
        except (ModelError, np.linalg.LinAlgError) as exc:
            raise monitor.failure(a, str(exc)) from None
        if not sol.success:
            raise SimulationError(
                f"t = {sol.t[-1] if sol.t.size else a:.6g}: {method.name} failed: {sol.message}"
            )
        nfev += sol.nfev
        for t, xk in zip(sol.t, sol.y.T, strict=True):
            if ts and abs(t - ts[-1]) < 1e-12:
                continue
            xk = xk.copy()
            xk[: model.nq] = _normalize_quaternions(model, xk[: model.nq])
            monitor.check(t, xk)
            ts.append(t)
            xs.append(xk)
            locks.append(system.locked)
        x = sol.y[:, -1].copy()  # t_eval always contains the segment end b
    return np.array(ts), np.array(xs), locks, nfev
