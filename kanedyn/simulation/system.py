"""The right-hand side a run integrates: ``ẋ = f(t, x)`` of one formulation, engine and
set of locked speeds, on the state ``x = [q | y]``.

* ``"kane"``: ``y = ν = [u | s]``, ``ẏ`` from the Kane equations ``M ν̇ = f``
  (:func:`kanedyn.dynamics.kane.mass_matrix_at`, :func:`~kanedyn.dynamics.kane.forcing_at`),
  or with loops ``Cᵀ(Fr + Fr*) = 0`` (:mod:`kanedyn.dynamics.loops`);
* ``"msd"``: ``y`` = the momentum states of :mod:`kanedyn.dynamics.msd`, ``ẏ`` from
  :func:`kanedyn.dynamics.msd.rates`, and the speeds from one Cholesky solve.

The compiled engine (:mod:`kanedyn.compiled`) evaluates the same equations from generated
code. A locked speed is held at zero (MSD slide 19; with loops, one more row of the
loop constraints, :func:`kanedyn.dynamics.loops.stacked_rows`); :meth:`System.relock`
re-solves the state when the locked set changes.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.compiled import CompiledModel, check_finite, compile_model, supports
from kanedyn.dynamics import loops as loops_
from kanedyn.dynamics import msd
from kanedyn.dynamics.kane import (
    flexible_mass_matrix_at,
    flexible_system_at,
    forcing_at,
    kane_terms,
    mass_matrix_at,
    solve_mass_matrix,
)
from kanedyn.dynamics.kinematics import Kinematics, kinematics_at, rest_kinematics
from kanedyn.dynamics.loads import AppliedLoads, LoadsLike, applied_loads
from kanedyn.errors import SINGULAR_MASS_MATRIX, ModelError, SimulationError
from kanedyn.model import Model, State
from kanedyn.simulation import diagnose
from kanedyn.simulation.options import Engine, Formulation
from kanedyn.spatial.arithmetic import NUMPY

__all__ = [
    "Drift",
    "System",
    "linear_modes",
    "normalize_quaternions",
    "qdot",
    "resolve_engine",
]

Array = NDArray[np.float64]


def resolve_engine(model: Model, engine: Engine, *, flexible: bool = False) -> bool:
    """Whether to use the compiled engine (:mod:`kanedyn.compiled`) for ``engine``.

    ``AUTO``: compiled when the model can be compiled;
    ``COMPILED``: compiled, or a ModelError saying why not; ``DENSE``: never.
    ``flexible``: the caller's run loops take flexible states (``kd.simulate``'s do;
    the ensembles' do not yet).
    """
    if engine is Engine.DENSE:
        return False
    why = supports(model, flexible=flexible)
    if why is not None and engine is Engine.COMPILED:
        raise ModelError(f"engine='compiled': {why}; use engine='dense'")
    return why is None


def qdot(model: Model, q: Array, u: Array) -> Array:
    """Kinematic equations (:func:`kanedyn.joints.qdot`): angle and slide rates are
    speeds; ``q̇ = ½ q ⊗ [ω, 0]``; with flexible bodies, ``η̇ = ξ`` (``q`` and ``u``
    the full states, ``nq_total`` and ``n_total`` long)."""
    qd = joints.qdot(model.layout, q, u)
    if model.nf:
        qd[..., model.nq :] = u[..., model.n :]
    return qd


def normalize_quaternions(model: Model, q: Array) -> Array:
    """``q`` with unit quaternions (:func:`kanedyn.joints.normalize_quaternions`)."""
    return joints.normalize_quaternions(NUMPY, model.layout, q)


@attrs.define
class System:
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
    # dense MSD with loops: the mass matrix at this right-hand side's q, formed once for
    # the speeds (_speeds) and read by the loop equations while __call__ runs
    _speeds_M: Array | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self.locked = self._locked

    @property
    def locked(self) -> NDArray[np.intp]:
        """The locked speed indices (held at zero)."""
        return self._locked

    @locked.setter
    def locked(self, locked: NDArray[np.intp]) -> None:
        changed = not np.array_equal(locked, self._locked)
        if self.compiled and (self.cm is None or changed):
            self.cm = compile_model(self.model, locked.tolist(), self.formulation)
        if changed:  # the partition is one of the loops' rows and the lock rows
            self.part = None
        self._locked = locked

    def speeds(self, q: Array, y: Array) -> Array:
        """The speeds ``ν`` at ``[q | y]`` (``y`` itself under Kane)."""
        return self._speeds(q, y)[0]

    def _speeds(self, q: Array, y: Array) -> tuple[Array, Array | None]:
        """:meth:`speeds` and, on the dense MSD engine with loops, the tree's mass matrix
        ``M`` at ``q`` that gave them (formed once per right-hand side: the speeds'
        solve, their closure :func:`kanedyn.dynamics.loops.plastic_impact` and the loop
        forces of :meth:`_loop_forces` share it); otherwise None."""
        if self.formulation is Formulation.KANE:
            return y, None
        model = self.model
        if self.cm is not None:  # the last n_total outputs of the MSD kernel
            nu = self.cm.rhs(q.tolist(), y.tolist())[model.n_total + model.nq_total :]
            return np.array(nu), None
        kin, eta = rest_kinematics(model, q)
        if not model.loops:
            return msd.speeds_at(model, kin, y, self.locked, eta), None
        tm = kane_terms(model, kin)
        M = flexible_mass_matrix_at(model, tm, eta)
        u = msd.speeds_at(model, kin, y, self.locked, eta, tm=tm, M=M)
        # the momenta along the admissible directions C only
        lt = loops_.loop_terms(model, q, kin=kin, tm=tm)
        return loops_.plastic_impact(model, q, u, self.locked, M=M, terms=lt), M

    def __call__(self, t: float, x: Array) -> Array:
        model = self.model
        nc = None if self.cm is None else self.cm.native
        if nc is not None and not (self.loads or self.held):
            # the native kernel normalizes the quaternions itself
            if not nc.rhs_into(x):
                check_finite(x)  # a non-finite state, or:
                raise ModelError(SINGULAR_MASS_MATRIX)
            out, n_t = nc.out, model.n_total
            return np.concatenate((out[n_t : n_t + model.nq_total], out[:n_t]))
        nq, n = model.nq, model.n
        q = normalize_quaternions(model, x[: model.nq_total])
        y = x[model.nq_total :]
        if self.cm is not None and not (self.loads or self.held):
            return self._compiled(self.cm, q, y, None)
        u, M_speeds = self._speeds(q, y)
        if model.nf:  # the modal state too (joints at nodes ride on it)
            kin = kinematics_at(model, q[:nq], u[:n], eta=q[nq:], xi=u[n:])
        else:
            kin = kinematics_at(model, q[:nq], u[:n])
        state = State(q, u) if callable(self.loads) else _LightState(q, u)
        records = self.loads(t, model, state, kin) if callable(self.loads) else self.loads
        if self.held:
            records = [*(records or ()), *self.held]
        joint_state = _LightState(q[:nq], u[:n]) if model.nf else state
        try:
            L = applied_loads(model, joint_state, kin, records, t)  # type: ignore[arg-type]
        except ModelError as exc:
            if not self.started:
                raise
            raise SimulationError(f"t = {t:.6g}: loads: {exc}") from None
        kane = self.formulation is Formulation.KANE
        if self.cm is not None:
            return self._compiled(self.cm, q, u if kane else y, L)
        if kane and model.loops:  # Cᵀ(Fr + Fr*) = 0 with the dependent speeds eliminated
            ydot = self._loop_equations(t, q, kin, L, u)[1]
        elif kane:
            tm = kane_terms(model, kin)
            if model.nf:  # over [u | s | ξ] (kanedyn.dynamics.flex)
                M, f = flexible_system_at(model, tm, L, q[nq:], u[n:])
            else:
                M, f = mass_matrix_at(model, tm), forcing_at(model, tm, L)
            ydot = np.zeros(model.n_total)
            # a singular mass matrix raises ModelError; the run loops add the time
            if self.locked.size:
                free = np.setdiff1d(np.arange(model.n_total), self.locked)
                ydot[free] = solve_mass_matrix(M[np.ix_(free, free)], f[free])
            else:
                ydot = solve_mass_matrix(M, f)
        else:
            if model.loops:  # the loops' generalized constraint forces Aᵀλ are efforts
                self._speeds_M = M_speeds  # shared with the loop equations
                try:
                    L = attrs.evolve(L, Q=L.Q + self._loop_forces(t, q, kin, L, u))
                finally:
                    self._speeds_M = None
            ydot = msd.rates(model, kin, L, q[nq:], u[n:]) if model.nf else msd.rates(model, kin, L)
            ydot[self.locked] = 0.0
        return np.concatenate((qdot(model, q, u), ydot))

    def _loop_equations(
        self, t: float, q: Array, kin: Kinematics, L: AppliedLoads, u: Array
    ) -> tuple[loops_.LoopEquations, Array]:
        """Kane's equations of the closed chain at ``q``, ``u``
        (:func:`kanedyn.dynamics.loops.equations_at`, the partition kept or chosen again;
        the mass matrix of this right-hand side's speeds when :meth:`_speeds` formed it)
        and their accelerations ``u̇``."""
        eq = loops_.equations_at(
            self.model, q, kin, L, u, self.part, baumgarte=self.baumgarte, locked=self.locked,
            M=self._speeds_M,
        )  # fmt: skip
        if self.part is not None and eq.partition is not self.part:
            self.repartitions += 1
        self.part = eq.partition
        try:
            return eq, loops_.constrained_accelerations(eq)
        except ModelError as exc:
            raise SimulationError(f"t = {t:.6g}: {exc}") from None

    def _loop_forces(self, t: float, q: Array, kin: Kinematics, L: AppliedLoads, u: Array) -> Array:
        """The loops' (and locks') generalized constraint forces ``Aᵀλ = M u̇ - f`` at
        ``q``, ``u`` (:meth:`_loop_equations`). Under MSD the states are the tree's
        generalized momenta ``y = ∂T/∂ν``, and the loops act on the tree as these
        further efforts of :func:`kanedyn.dynamics.msd.rates`
        (Kane: ``Fr + Fr* + (Aᵀλ)_r = 0``)."""
        eq, acc = self._loop_equations(t, q, kin, L, u)
        return np.asarray(eq.M @ acc - eq.f)[: self.model.n]  # ξ's: zero (A's ξ columns)

    def _compiled(self, cm: CompiledModel, q: Array, y: Array, L: Any) -> Array:
        """``[q̇ | ẏ]`` from the compiled equations (locked speeds held at zero); ``y``
        are the speeds (Kane) or the momentum states (MSD, then ``L`` is None)."""
        qv, yv = q.tolist(), y.tolist()
        n, nq = self.model.n_total, self.model.nq_total
        out = cm.rhs(qv, yv) if L is None else cm.rhs_with_loads(qv, yv, L)
        xdot = np.array(out[n : n + nq] + out[:n])
        check_finite(xdot)
        return xdot

    def initial(self, state: State) -> Array:
        """The integrated state ``[q | y]`` of ``state``."""
        if self.formulation is Formulation.KANE:
            return np.concatenate((state.q, state.u))
        return np.concatenate((state.q, msd.momenta(self.model, state)))

    def relock(self, q: Array, y: Array, locked: NDArray[np.intp]) -> Array:
        """New ``y`` after the locked set changes at configuration ``q``.

        The generalized momenta of the free DOFs are kept (the locking impulse does no
        work along them), so total momentum is conserved through the event; a DOF that
        is unlocked starts from its generalized momentum with its speed still zero.
        With loops, the free directions are those the loops and the locks leave, ``C``:
        ``u⁺ = C (CᵀMC)⁻¹ CᵀM u⁻`` (:func:`kanedyn.dynamics.loops.plastic_impact`),
        which keeps ``u`` at an unlock. With flexible bodies the same impact runs over
        ``[u | s | ξ]`` with the full mass matrix (the modal speeds jump too), and the
        MSD states after it are the momenta ``M ν⁺`` (the modal ones ``∂T/∂ξ``).
        """
        model = self.model
        u_old = self.speeds(q, y)
        if model.loops or model.nf:
            self.locked = locked
            u_new = loops_.plastic_impact(model, q, u_old, locked)
            if self.formulation is Formulation.KANE:
                return u_new
            kin, eta = rest_kinematics(model, q)  # M ν⁺ needs the positions only
            p = msd.generalized_momenta(model, kin, u_new, eta)
            return msd.root_to_total(model, kin, p, eta=eta)
        kin = kinematics_at(model, q, u_old)
        p_old = msd.root_to_total(model, kin, msd.generalized_momenta(model, kin, u_old))
        was_locked = self.locked
        self.locked = locked
        if self.formulation is Formulation.KANE:
            return msd.speeds_at(model, kin, p_old, locked)
        y_new = y.copy()
        y_new[was_locked] = p_old[was_locked]
        return y_new

    def relocked(self, x: Array, locked: NDArray[np.intp]) -> Array:
        """The state ``x = [q | y]`` re-solved for the locked set ``locked``
        (:meth:`relock`). With loops, ``q`` is first closed again with the locked
        coordinates kept (:func:`kanedyn.dynamics.loops.close`: a stop has set one on
        its bound)."""
        nq = self.model.nq_total
        q = x[:nq]
        if self.model.loops:
            q = loops_.close(self.model, normalize_quaternions(self.model, q), locked)
        return np.concatenate((q, self.relock(q, x[nq:], locked)))

    def unlocked_acceleration(self, t: float, x: Array, r: int) -> float:
        """``ν̇_r`` that locked speed ``r`` would have at ``x`` if it alone were freed
        (the Kane equations with the other locks kept; with loops, the loop equations
        with that lock row removed): its sign tells whether the lock's constraint force
        pushes or pulls."""
        nq = self.model.nq_total
        q = normalize_quaternions(self.model, x[:nq])
        u = self.speeds(q, x[nq:])
        free = np.setdiff1d(self.locked, [r])
        trial = System(self.model, Formulation.KANE, self.loads, held=self.held,
                       started=True, locked=free, baumgarte=self.baumgarte)  # fmt: skip
        return float(trial(t, np.concatenate((q, u)))[nq + r])


@attrs.frozen(eq=False)
class _LightState:
    """A State without validation, for the inner loop (loads that are not callables)."""

    q: Array
    u: Array


class Drift:
    """Projects states of a model with loops back onto the constraint manifold
    (:func:`kanedyn.dynamics.loops.project`), with the speeds ``system`` holds locked
    kept at zero and their coordinates where they are, and keeps the largest residual
    found before a projection."""

    def __init__(self, system: System):
        self.system, self.model, self.largest = system, system.model, 0.0

    def __call__(self, x: Array) -> Array:
        nq, system = self.model.nq_total, self.system  # with flexible bodies: [q | η]
        y = x[nq:]
        u = system.speeds(x[:nq], y)
        q, u, before = loops_.project(self.model, x[:nq], u, locked=system.locked)
        self.largest = max(self.largest, before)
        if system.formulation is not Formulation.KANE:
            # the momentum states stay: their speeds at the closed q satisfy A u = 0
            return np.concatenate((q, y))
        return np.concatenate((q, u))


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
    :func:`kanedyn.simulate` integrates); None for very large models."""
    system = System(
        model, Formulation.parse(formulation), loads,
        compiled=resolve_engine(model, Engine.parse(engine)),
    )  # fmt: skip
    return diagnose.linear_modes(system, system.initial(state))
