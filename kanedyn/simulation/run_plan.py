"""The second stage of a run: the plan, built once from the model, the initial state and
the checked options (:class:`~kanedyn.simulation.run_options.RunOptions`).

:meth:`RunPlan.of` decides everything that does not need the equations evaluated: the
engine (compiled or dense, :func:`~kanedyn.simulation.system.resolve_engine`), the
fixed-step schedule, the lock events, the joint-limit stops, the loops' stabilization
and whether the outputs fit in memory. A ModelError names what a run cannot do, before
any work. :meth:`RunPlan.loop` then picks the run loop (:mod:`kanedyn.simulation.run_loops`)
for the compiled model the engine built.
"""

from __future__ import annotations

import enum
import math

import attrs

from kanedyn.compiled import CompiledModel
from kanedyn.dynamics import loops as loops_
from kanedyn.dynamics.steppers import Schedule
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.simulation import limits as limits_
from kanedyn.simulation import output as output_
from kanedyn.simulation.events import LockEvent, lock_indices
from kanedyn.simulation.options import EnergyMomentum, Engine, Formulation, Stabilization
from kanedyn.simulation.run_options import RunOptions
from kanedyn.simulation.stops import stop_limits
from kanedyn.simulation.system import resolve_engine

__all__ = ["Loop", "RunPlan", "check_flexible", "check_loops"]


class Loop(enum.Enum):
    """The run loop of a plan (:mod:`kanedyn.simulation.run_loops`)."""

    RK4 = "rk4"  # NumPy states: events, controller, callable loads, stops, loops
    RK4_COMPILED = "rk4-compiled"  # Python floats through the compiled kernel
    RK4_NATIVE = "rk4-native"  # the native RK4 loop of kanedyn.compiled.llvm
    ADAPTIVE = "adaptive"  # a scipy OdeSolver


@attrs.frozen
class RunPlan:
    """What a run does (see :meth:`of`): ``compiled`` the engine chosen; ``schedule`` the
    fixed steps (None for adaptive methods); ``lock_events`` the checked events
    (:func:`~kanedyn.simulation.events.lock_indices`); ``limited`` the joints whose
    limits are stops (``limits="stop"``), or None; ``project`` whether the states are
    projected onto the loops' constraint manifold; ``baumgarte`` Baumgarte's ``(α, β)``
    for a model with loops, or None."""

    model: Model
    state: State
    options: RunOptions
    compiled: bool
    schedule: Schedule | None
    lock_events: list[LockEvent]
    limited: limits_.LimitedJoints | None
    project: bool
    baumgarte: tuple[float, float] | None

    @classmethod
    def of(cls, model: Model, state: State, options: RunOptions) -> RunPlan:
        """The plan of a run of ``model`` from ``state`` (checked by the caller), or a
        ModelError for a run that cannot be done."""
        o = options
        limited = stop_limits(model, state, o.limits, o.method, o.events)
        compiled = resolve_engine(model, o.engine, flexible=True)
        if compiled and model.loops and o.stabilization is not Stabilization.PROJECTION:
            # the compiled loop kernels project after every step (kernels.projection)
            if o.engine is Engine.COMPILED:
                raise ModelError(
                    f"engine='compiled' runs a model with loops with "
                    f"stabilization='projection', not {o.stabilization.value!r}; use "
                    "engine='dense'"
                )
            compiled = False
        schedule = None if o.method.adaptive else Schedule.of(o.t_final, o.dt, o.every)
        n_out = (
            math.floor(o.t_final / o.every) + 2
            if schedule is None
            else schedule.n_steps // schedule.stride + 2
        )
        output_.check_output_size(model, n_out)
        lock_events = lock_indices(model, o.events)
        project = check_loops(model, state, o.formulation, o.stabilization)
        return cls(
            model=model, state=state, options=o, compiled=compiled, schedule=schedule,
            lock_events=lock_events, limited=limited, project=project,
            baumgarte=o.baumgarte if model.loops else None,
        )  # fmt: skip

    def loop(self, cm: CompiledModel | None) -> Loop:
        """The run loop for the engine's compiled model ``cm`` (None: dense): the native
        or compiled RK4 loops take runs without loads or stops (the compiled one also
        without a controller or lock events, the native one without a 3-DOF gimbal,
        whose lock it does not watch)."""
        o = self.options
        if self.schedule is None:
            return Loop.ADAPTIVE
        if self.model.loops:  # the native step projects (kernels.projection); else dense
            native = cm is not None and cm.native is not None
            if native and not (o.loads or o.controller or self.limited is not None):
                return Loop.RK4_NATIVE
            return Loop.RK4
        if (
            cm is not None
            and cm.native is not None
            and not (o.loads or self.model.layout.gimbal3.size or self.limited is not None)
        ):
            return Loop.RK4_NATIVE
        stops = self.limited is not None
        if cm is not None and not (o.loads or o.controller or self.lock_events or stops):
            return Loop.RK4_COMPILED
        return Loop.RK4


def check_flexible(model: Model, options: RunOptions) -> None:
    """A ModelError naming what a run of a model with flexible bodies cannot do yet:
    they run in Kane's formulation (:func:`kanedyn.forward_dynamics` over
    ``[u | s | ξ]``, :mod:`kanedyn.dynamics.flex`) or with the momentum states of MSD
    (the modal momenta ``∂T/∂ξ``, :mod:`kanedyn.dynamics.msd`), with RK4 or an adaptive
    method, loads and a controller, and in the energy-momentum scheme
    (:mod:`kanedyn.simulation.conserving.flexible`, which names what it refuses). Lock
    events, joint-limit stops and loops run in Kane's and the MSD formulation: their
    impacts use the full mass matrix over ``[u | s | ξ]``
    (:func:`kanedyn.dynamics.loops.plastic_impact`) and the loop rows have zero ξ
    columns, so a loop closing on a flexible body (or on a body riding on one of its
    nodes) is refused (:func:`kanedyn.dynamics.loops.flexible_refusal`); the
    energy-momentum scheme's locks and loops do not have the modal coordinates."""
    if not model.nf:
        return
    o = options
    flexible = [b.name for b in model.bodies if b.modes is not None]
    why = None
    # joints at nodes run in every formulation and in the energy-momentum scheme (the
    # node's frame a massless triad of its coordinates,
    # kanedyn.simulation.conserving.flexible.NodeFrame)
    if isinstance(o.method, EnergyMomentum) and (
        o.events or o.limits is limits_.Limits.STOP or model.loops
    ):
        what = (
            "lock events" if o.events
            else "limits='stop'" if o.limits is limits_.Limits.STOP
            else "loops"
        )  # fmt: skip
        why = (
            f"method='energy-momentum' with {what}: the scheme's lock and loop rows act on "
            "the bodies' director coordinates, which do not have the modal coordinates"
        )
    elif model.loops:
        why = loops_.flexible_refusal(model)
    if why is not None:
        raise ModelError(
            f"flexible bodies {flexible}: {why}; a flexible model runs in Kane's or the "
            "MSD formulation (method 'rk4' or an adaptive one) or with "
            "method='energy-momentum'"
        )


def check_loops(
    model: Model,
    state: State,
    form: Formulation,
    how: Stabilization,
) -> bool:
    """Check a model with loops can be simulated from ``state``; whether to project.
    Lock events and stops are held by the loop equations (a locked speed is one more
    velocity row, :func:`kanedyn.dynamics.loops.stacked_rows`). Under MSD the states are
    the tree's momenta, moved by the loops' constraint forces, and the speeds are theirs
    along the directions the loops admit (:class:`kanedyn.simulation.system.System`)."""
    if not model.loops:
        return False
    phi, vel = loops_.residuals(model, state.q, state.u)
    if max(phi, vel) > 1e-8:
        raise ModelError(
            f"the initial state does not close the loops (max |Φ| = {phi:.3g}, "
            f"max |A u| = {vel:.3g}); assemble it first: model.assemble(state, fix=[...])"
        )
    return how is Stabilization.PROJECTION
