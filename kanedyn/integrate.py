"""Stage 4: time integration of either formulation, and the Trajectory it returns.

Two formulations share one state layout ``x = [q | y]``:

* ``"kane"``: ``y = ν = [u | s]``, ``ẏ`` from :func:`kanedyn.forward_dynamics`;
* ``"msd"``: ``y`` = the momentum states of :mod:`kanedyn.msd`, ``ẏ`` from
  :func:`kanedyn.msd.rates`, and the speeds from one Cholesky solve.

Methods: fixed-step classic RK4 (``method="rk4"``; quaternions are normalized before
every stage, as 42's ``KaneNBodyRK4`` does), or any ``scipy.integrate.solve_ivp`` method
(``"RK45"``, ``"DOP853"``, ``"Radau"``, ...) with ``rtol``/``atol``.

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

from kanedyn import joints, msd
from kanedyn import rotation as rot
from kanedyn.compiled import check_finite, compile_model, supports
from kanedyn.control import Controller
from kanedyn.errors import ModelError, SimulationError
from kanedyn.kane import (
    _bias,
    _mass_matrix,
    _solve,
    _terms,
    kinetic_energy,
    momentum,
    potential_energy,
)
from kanedyn.kinematics import _kinematics
from kanedyn.loads import LoadsLike, applied_loads
from kanedyn.model import Model, State
from kanedyn.spatial.arithmetic import NUMPY

__all__ = ["BodyHistory", "Lock", "Trajectory", "Unlock", "simulate"]

Array = NDArray[np.float64]

_FORMULATIONS = ("kane", "msd")
_ENGINES = ("auto", "compiled", "dense")


def resolve_engine(model: Model, engine: str) -> bool:
    """Whether to use the compiled engine (:mod:`kanedyn.compiled`) for ``engine``.

    ``"auto"``: compiled when the model can be compiled;
    ``"compiled"``: compiled, or a ModelError saying why not; ``"dense"``: never.
    """
    if engine not in _ENGINES:
        raise ModelError(f"engine must be one of {_ENGINES}, got {engine!r}")
    if engine == "dense":
        return False
    why = supports(model)
    if why is not None and engine == "compiled":
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
    """Right-hand side ``ẋ = f(t, x)`` of one formulation with a set of locked speeds."""

    model: Model
    formulation: str
    loads: LoadsLike
    locked: NDArray[np.intp] = attrs.field(factory=lambda: np.zeros(0, dtype=np.intp))
    held: list[Any] = attrs.field(factory=list)  # controller commands, zero-order hold
    started: bool = False  # after the first call, errors from loads name the time
    compiled: bool = False  # either formulation through kanedyn.compiled

    def speeds(self, q: Array, y: Array) -> Array:
        if self.formulation == "kane":
            return y
        if self.compiled:  # the last n outputs of the MSD kernel
            cm = compile_model(self.model, self.locked.tolist(), "msd")
            return np.array(cm.rhs(q.tolist(), y.tolist())[self.model.n + self.model.nq :])
        return msd._speeds(
            self.model, _kinematics(self.model, q, np.zeros(self.model.n)), y, self.locked
        )

    def __call__(self, t: float, x: Array) -> Array:
        model = self.model
        q = _normalize_quaternions(model, x[: model.nq])
        y = x[model.nq :]
        if self.compiled and not (self.loads or self.held):
            return self._compiled(t, q, y, None)
        u = self.speeds(q, y)
        kin = _kinematics(model, q, u)
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
        if self.compiled:
            return self._compiled(t, q, u if self.formulation == "kane" else y, L)
        if self.formulation == "kane":
            tm = _terms(model, kin)
            M, f = _mass_matrix(model, tm), _bias(model, tm, L)
            ydot = np.zeros(model.n)
            try:
                if self.locked.size:
                    free = np.setdiff1d(np.arange(model.n), self.locked)
                    ydot[free] = _solve(M[np.ix_(free, free)], f[free])
                else:
                    ydot = _solve(M, f)
            except ModelError as exc:
                raise SimulationError(f"t = {t:.6g}: {exc}") from None
        else:
            ydot = msd.rates(model, kin, L)
            ydot[self.locked] = 0.0
        return np.concatenate((qdot(model, q, u), ydot))

    def _compiled(self, t: float, q: Array, y: Array, L: Any) -> Array:
        """``[q̇ | ẏ]`` from the compiled equations (locked speeds held at zero); ``y``
        are the speeds (Kane) or the momentum states (MSD, then ``L`` is None)."""
        cm = compile_model(self.model, self.locked.tolist(), self.formulation)
        qv, yv = q.tolist(), y.tolist()
        n, nq = self.model.n, self.model.nq
        out = cm.rhs(qv, yv) if L is None else cm.rhs_with_loads(qv, yv, L)
        xdot = np.array(out[n : n + nq] + out[:n])
        check_finite(xdot)
        return xdot

    def initial(self, state: State) -> Array:
        if self.formulation == "kane":
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
        kin = _kinematics(model, q, u_old)
        p_old = msd._root_to_total(model, kin, msd._generalized_momenta(model, kin, u_old))
        was_locked = self.locked
        self.locked = locked
        if self.formulation == "kane":
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
    (:func:`kanedyn.msd.momenta` layout; ``None`` for Kane runs).

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
        kins = [_kinematics(self.model, q, u) for q, u in zip(self.q, self.u, strict=True)]
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
    method: str = "rk4",
    formulation: str = "kane",
    loads: LoadsLike = None,
    output_every: float | None = None,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    events: Sequence[Lock | Unlock] = (),
    controller: Controller | None = None,
    progress: bool | None = None,
    engine: str = "auto",
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
    method : str
        ``"rk4"`` (default) or a ``scipy.integrate.solve_ivp`` method name such as
        ``"DOP853"``.
    formulation : str
        ``"kane"`` (speeds as states) or ``"msd"`` (momentum states).
    loads : None, sequence of load records, or callable
        Extra loads (see :mod:`kanedyn.loads`); a callable is evaluated at every
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
    engine : {"auto", "compiled", "dense"}
        How the right-hand side is evaluated: ``"compiled"`` by the generated
        equations of :mod:`kanedyn.compiled` (5-25 times faster; built once per model
        and formulation), ``"dense"`` by the NumPy engine of :func:`kanedyn.forward_dynamics`
        and :mod:`kanedyn.msd`. ``"auto"`` (default) compiles when the model can be
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
    if formulation not in _FORMULATIONS:
        raise ModelError(f"formulation must be one of {_FORMULATIONS}, got {formulation!r}")
    if method != "rk4" and method not in scipy.integrate._ivp.ivp.METHODS:
        raise ModelError(
            f"unknown method {method!r}: use 'rk4' or one of {sorted(scipy.integrate._ivp.ivp.METHODS)}"
        )
    every = dt if output_every is None else float(output_every)
    if not np.isfinite(every) or every <= 0.0:
        raise ModelError(f"output_every must be positive, got {output_every}")
    schedule = _lock_indices(model, events)
    system = _System(model, formulation, loads, compiled=resolve_engine(model, engine))
    x = system.initial(state)
    sampler = _Sampler(controller, model)
    sampler.sample(system, 0.0, x)
    system(0.0, x)  # resolves loads once: a bad load name fails here, before any work
    system.started = True
    if progress is None:
        progress = sys.stderr.isatty()
    start = _time.perf_counter()
    speeds = None
    if method == "rk4" and system.compiled and not (loads or controller or schedule):
        ts, xs, locks, steps, speeds = _run_rk4_compiled(system, x, t_final, dt, every, progress)
    elif method == "rk4":
        ts, xs, locks, steps = _run_rk4(system, x, t_final, dt, every, schedule, progress, sampler)
    else:
        ts, xs, locks, steps = _run_adaptive(
            system, x, t_final, dt, every, schedule, method, rtol, atol, sampler
        )
    wall = _time.perf_counter() - start
    q = xs[:, : model.nq]
    # speeds at the outputs (MSD stores momenta), with the lock set of each instant
    u = _output_speeds(system, xs, locks) if speeds is None else speeds
    return Trajectory(
        model=model, t=ts, q=q, u=u, formulation=formulation, method=method, wall_time=wall,
        steps=steps, events=tuple(events),
        momenta=xs[:, model.nq :].copy() if formulation == "msd" else None,
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
    schedule: list[tuple[float, str, int]], t: float, n_applied: int | None = None
) -> NDArray[np.intp]:
    locked: set[int] = set()
    for i, (te, kind, r) in enumerate(schedule):
        if (n_applied is not None and i >= n_applied) or (n_applied is None and te > t):
            break
        (locked.add if kind == "lock" else locked.discard)(r)
    return np.array(sorted(locked), dtype=np.intp)


def _output_speeds(system: _System, xs: Array, locks: list[NDArray[np.intp]]) -> Array:
    model = system.model
    if system.formulation == "kane":
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


def _steps(t_final: float, dt: float, every: float) -> tuple[int, int]:
    """Number of RK4 steps, and the output stride (``every`` must be a multiple of dt)."""
    stride = max(1, int(round(every / dt)))
    if abs(stride * dt - every) > 1e-9 * max(every, 1.0):
        raise ModelError(f"output_every = {every} is not a multiple of dt = {dt}")
    return int(np.ceil(t_final / dt - 1e-9)), stride


def _run_rk4(system, x, t_final, dt, every, schedule, progress, sampler):
    model = system.model
    n_steps, stride = _steps(t_final, dt, every)
    bar = _Progress(n_steps, progress and n_steps > 2000)
    nq = model.nq
    t = 0.0
    applied = _n_due(schedule, 0.0)
    if applied:
        x = _apply_events(system, x, schedule, applied)
    ts, xs, locks = [0.0], [x.copy()], [system.locked]
    monitor = _Monitor(model, x)
    monitor.x = x
    for step in range(1, n_steps + 1):
        h = min(dt, t_final - t)
        try:
            with np.errstate(all="ignore"):
                k1 = system(t, x)
                k2 = system(t + 0.5 * h, x + 0.5 * h * k1)
                k3 = system(t + 0.5 * h, x + 0.5 * h * k2)
                k4 = system(t + h, x + h * k3)
        except (ModelError, np.linalg.LinAlgError) as exc:
            raise monitor.failure(t + h, str(exc)) from None
        x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        x[:nq] = _normalize_quaternions(model, x[:nq])
        t = step * dt if step < n_steps else t_final
        monitor.check(t, x)
        due = _n_due(schedule, t)
        if due != applied:
            applied = due
            x = _apply_events(system, x, schedule, applied)
        if step < n_steps:
            sampler.sample(system, t, x)
        if step % stride == 0 or step == n_steps:
            ts.append(t)
            xs.append(x.copy())
            locks.append(system.locked)
        if step % 200 == 0:
            bar.update(step)
    bar.update(n_steps)
    bar.close()
    return np.array(ts), np.array(xs), locks, n_steps


def _run_rk4_compiled(system, x, t_final, dt, every, progress):
    """:func:`_run_rk4` for the common case (either formulation, compiled, no loads,
    controller or events), on Python floats: the same arithmetic per step (quaternions
    normalized inside every right-hand side and after every step), without NumPy calls.
    Under MSD it also returns the speeds at the outputs (the kernel's last n outputs).
    """
    model = system.model
    n, nq = model.n, model.nq
    cm = compile_model(model, formulation=system.formulation)
    rhs = cm._scalar
    msd = system.formulation == "msd"
    n_steps, stride = _steps(t_final, dt, every)
    bar = _Progress(n_steps, progress and n_steps > 2000)
    quats = [[int(i) for i in row] for row in model.layout.quat_q]
    monitor = _Monitor(model, x)
    monitor.x = x
    gimbal3 = bool(model.layout.gimbal3.size)
    # state as [q | y]; the kernel returns [ẏ | q̇] (Kane, y = ν) or [ẏ | q̇ | ν] (MSD)
    xs_l = x.tolist()
    ts, out = [0.0], [list(xs_l)]
    first = rhs(*xs_l)
    us = [first[n + nq :]] if msd else None
    t = 0.0
    isfinite = math.isfinite
    for step in range(1, n_steps + 1):
        h = min(dt, t_final - t)
        h2, h6 = 0.5 * h, h / 6.0
        try:
            k1 = first if first is not None else rhs(*xs_l)
            first = None
            k1 = k1[n : n + nq] + k1[:n]
            k2 = rhs(*[a + h2 * b for a, b in zip(xs_l, k1, strict=True)])
            k2 = k2[n : n + nq] + k2[:n]
            k3 = rhs(*[a + h2 * b for a, b in zip(xs_l, k2, strict=True)])
            k3 = k3[n : n + nq] + k3[:n]
            k4 = rhs(*[a + h * b for a, b in zip(xs_l, k3, strict=True)])
            k4 = k4[n : n + nq] + k4[:n]
        except (ZeroDivisionError, ValueError, OverflowError) as exc:
            raise monitor.failure(t + h, f"the right-hand side failed ({exc})") from None
        xs_l = [
            a + h6 * (b1 + 2.0 * b2 + 2.0 * b3 + b4)
            for a, b1, b2, b3, b4 in zip(xs_l, k1, k2, k3, k4, strict=True)
        ]
        for idx in quats:
            s = 1.0 / math.sqrt(sum(xs_l[i] * xs_l[i] for i in idx))
            for i in idx:
                xs_l[i] *= s
        t = step * dt if step < n_steps else t_final
        if gimbal3:
            monitor.check(t, np.array(xs_l))
        elif not isfinite(sum(xs_l)):
            raise monitor.failure(t, f"the state became non-finite: {np.array(xs_l)}")
        if step % stride == 0 or step == n_steps:
            ts.append(t)
            out.append(xs_l)
            if us is not None:  # the speeds at the output; k1 of the next step
                try:
                    first = rhs(*xs_l)
                except (ZeroDivisionError, ValueError, OverflowError) as exc:
                    raise monitor.failure(t, f"the right-hand side failed ({exc})") from None
                us.append(first[n + nq :])
        if step % 200 == 0:
            bar.update(step)
    bar.update(n_steps)
    bar.close()
    speeds = None if us is None else np.array(us)
    return np.array(ts), np.array(out), [system.locked] * len(ts), n_steps, speeds


def _apply_events(system: _System, x: Array, schedule: list, n_applied: int) -> Array:
    """Re-solve the state for the lock set after the first ``n_applied`` events."""
    model = system.model
    locked = _locked_at(schedule, np.inf, n_applied=n_applied)
    q, y = x[: model.nq], x[model.nq :]
    return np.concatenate((q, system.relock(q, y, locked)))


def _n_due(schedule: list, t: float) -> int:
    return sum(1 for e in schedule if e[0] <= t + 1e-12)


def _run_adaptive(system, x, t_final, dt, every, schedule, method, rtol, atol, sampler):
    model = system.model
    t_out = np.arange(0.0, t_final + 0.5 * every, every)
    t_out = np.minimum(t_out[t_out <= t_final + 1e-9 * max(every, 1.0)], t_final)
    if t_out[-1] < t_final - 1e-12:
        t_out = np.append(t_out, t_final)
    bounds = sorted(
        {0.0, t_final, *[e[0] for e in schedule if 0.0 < e[0] < t_final], *sampler.times(t_final)}
    )
    ts, xs, locks, nfev, applied = [], [], [], 0, 0
    monitor = _Monitor(model, x)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if _n_due(schedule, a) != applied:
            applied = _n_due(schedule, a)
            x = _apply_events(system, x, schedule, applied)
        sampler.sample(system, a, x)
        inside = np.union1d(t_out[(t_out > a) & (t_out < b)], [a, b])
        try:
            sol = scipy.integrate.solve_ivp(
                system, (a, b), x, method=method, t_eval=inside, rtol=rtol, atol=atol
            )
        except (ModelError, np.linalg.LinAlgError) as exc:
            raise monitor.failure(a, str(exc)) from None
        if not sol.success:
            raise SimulationError(
                f"t = {sol.t[-1] if sol.t.size else a:.6g}: {method} failed: {sol.message}"
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
