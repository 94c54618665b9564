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
"""

from __future__ import annotations

import time as _time
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import rotation as rot
from kanedyn.batch import ModelBatch, States, resolve
from kanedyn.compiled import compile_model, supports
from kanedyn.errors import ModelError, SimulationError
from kanedyn.integrate import Trajectory, check_times, resolve_engine
from kanedyn.kane import _bias, _mass_matrix, _solve, _terms
from kanedyn.kinematics import _kinematics
from kanedyn.loads import LoadsLike, applied_loads
from kanedyn.model import Model
from kanedyn.plan import Params

__all__ = ["EnsembleTrajectory", "simulate_ensemble"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class EnsembleTrajectory:
    """The result of :func:`simulate_ensemble`: ``t`` (nt,), ``q`` (nt, B, nq),
    ``u`` (nt, B, n). ``member(b)`` is member b as a :class:`~kanedyn.Trajectory`
    (with its energies and momenta)."""

    model: Model | ModelBatch
    t: Array
    q: Array
    u: Array
    wall_time: float
    steps: int

    @property
    def size(self) -> int:
        """B, the number of members."""
        return self.q.shape[1]

    def member(self, b: int) -> Trajectory:
        model = self.model.member(b) if isinstance(self.model, ModelBatch) else self.model
        return Trajectory(
            model=model, t=self.t, q=self.q[:, b].copy(), u=self.u[:, b].copy(),
            formulation="kane", method="rk4", wall_time=self.wall_time, steps=self.steps,
        )  # fmt: skip


@attrs.frozen(eq=False)
class _Ensemble:
    """Right-hand side ``ẋ = f(t, x)`` of the Kane formulation for x (B, nq + n)."""

    model: Model
    params: Params | None
    loads: LoadsLike
    compiled: Any = None  # the model's CompiledModel, when the ensemble runs compiled

    def normalize(self, q: Array) -> Array:
        quat_q = self.model.layout.quat_q
        if quat_q.size:
            quat = q[..., quat_q]
            q = q.copy()
            q[..., quat_q] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
        return q

    def qdot(self, q: Array, u: Array) -> Array:
        """Angle and slide rates are speeds; ``q̇ = ½ q ⊗ [ω, 0]`` for quaternions."""
        lay = self.model.layout
        qd = np.zeros(q.shape)
        qd[..., lay.angle_q] = u[..., lay.angle_u]
        if lay.quat_q.size:
            qd[..., lay.quat_q] = rot.quat_rate(q[..., lay.quat_q], u[..., lay.quat_u])
        return qd

    def __call__(self, t: float, x: Array) -> Array:
        model = self.model
        if self.compiled is not None:
            return self._compiled_rhs(t, x)
        q = self.normalize(x[..., : model.nq])
        u = x[..., model.nq :]
        kin = _kinematics(model, q, u, self.params)
        states: Any = States(q, u) if callable(self.loads) else _LightStates(q, u)
        L = applied_loads(model, states, kin, self.loads, t)
        tm = _terms(model, kin)
        try:
            udot = _solve(_mass_matrix(model, tm), _bias(model, tm, L))
        except ModelError as exc:
            raise SimulationError(f"t = {t:.6g}: {exc}") from None
        return np.concatenate((self.qdot(q, u), udot), axis=-1)

    def _compiled_rhs(self, t: float, x: Array) -> Array:
        """The compiled equations on columns of ``x`` (B, nq + n): one element-wise NumPy
        operation per line of the generated code (quaternions normalized inside)."""
        n = self.model.n
        with np.errstate(all="ignore"):
            out = self.compiled._array(*x.T, *self.compiled.parameter_arrays())
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
    engine: str = "auto",
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
        Initial coordinates and speeds, shapes (B, nq) and (B, n).
    loads : None, sequence, or callable
        Load records applied to every member, or a callable
        ``loads(t, model, states, kin)`` returning records.
    output_every : float, optional
        Output interval, a multiple of ``dt`` (default every step).
    engine : {"auto", "compiled", "dense"}
        As for :func:`kanedyn.simulate`. ``"auto"`` runs the compiled equations
        (:mod:`kanedyn.compiled`, on arrays of B states; with a ModelBatch, the
        parameters that differ between members are inputs) when there are no loads
        and the model can be compiled; otherwise the dense batched engine.

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
    base, params, q0, u0 = resolve(model, states)
    t_final, dt = check_times(t_final, dt)
    every = dt if output_every is None else float(output_every)
    stride = max(1, int(round(every / dt)))
    if not np.isfinite(every) or every <= 0.0 or abs(stride * dt - every) > 1e-9 * max(every, 1.0):
        raise ModelError(f"output_every = {output_every} is not a positive multiple of dt = {dt}")
    batch = np.broadcast_shapes(q0.shape[:-1], () if params is None else params.batch_shape)
    x = np.concatenate(
        (np.broadcast_to(q0, batch + q0.shape[-1:]), np.broadcast_to(u0, batch + u0.shape[-1:])),
        axis=-1,
    )
    compiled = resolve_engine(base, engine)
    if compiled and isinstance(model, ModelBatch):
        why = supports(base, model.params)
        if why is not None:
            if engine == "compiled":
                raise ModelError(f"engine='compiled': {why}; use engine='dense'")
            compiled = False
    if compiled and loads:
        if engine == "compiled":
            raise ModelError("engine='compiled' runs ensembles without loads; use engine='dense'")
        compiled = False
    system = _Ensemble(base, params, loads, compile_model(model) if compiled else None)
    system(0.0, x)  # resolves loads once: a bad load fails here, before any work
    start = _time.perf_counter()
    ts, xs, steps = _run_rk4(system, x, t_final, dt, stride)
    wall = _time.perf_counter() - start
    return EnsembleTrajectory(
        model=model, t=ts, q=xs[..., : base.nq], u=xs[..., base.nq :], wall_time=wall, steps=steps
    )


def _run_rk4(system: _Ensemble, x: Array, t_final: float, dt: float, stride: int):
    """Classic RK4, the same arithmetic as :func:`kanedyn.integrate._run_rk4`."""
    nq = system.model.nq
    n_steps = int(np.ceil(t_final / dt - 1e-9))
    t = 0.0
    ts, xs = [0.0], [x.copy()]
    for step in range(1, n_steps + 1):
        h = min(dt, t_final - t)
        k1 = system(t, x)
        k2 = system(t + 0.5 * h, x + 0.5 * h * k1)
        k3 = system(t + 0.5 * h, x + 0.5 * h * k2)
        k4 = system(t + h, x + h * k3)
        x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        x[..., :nq] = system.normalize(x[..., :nq])
        t = step * dt if step < n_steps else t_final
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.all(np.isfinite(x), axis=-1))[:5].tolist()
            raise SimulationError(f"t = {t:.6g}: members {bad} became non-finite")
        if step % stride == 0 or step == n_steps:
            ts.append(t)
            xs.append(x.copy())
    return np.array(ts), np.array(xs), n_steps
