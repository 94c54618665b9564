"""The third stage of a run: its workspace, started from a plan.

:meth:`Run.begin` builds what the run loops step (the right-hand side
:class:`~kanedyn.simulation.system.System`, compiled when the plan says so), samples the
controller and evaluates the loads once at ``t = 0`` (a bad load name fails here, before
any step), checks a fixed step against the model's fastest mode
(:func:`kanedyn.simulation.diagnose.step_report`), applies the events due at ``t = 0``
and records the initial state. The plan stays as built; everything that changes while
the run goes (the lock set, the stops, the outputs) lives here.
"""

from __future__ import annotations

import time as _time
import warnings

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.simulation import diagnose
from kanedyn.simulation import output as output_
from kanedyn.simulation.control import Sampler
from kanedyn.simulation.events import locked_at, n_due
from kanedyn.simulation.run_options import step_problem
from kanedyn.simulation.run_plan import RunPlan
from kanedyn.simulation.run_result import Streamer
from kanedyn.simulation.stops import Stops
from kanedyn.simulation.system import Drift, System

__all__ = ["Run", "apply_events"]

Array = NDArray[np.float64]


@attrs.define
class Run:
    """A run's workspace: ``system`` the right-hand side; ``sampler`` the controller;
    ``rec`` the outputs so far; ``stops`` the joint-limit stops, or None; ``drift`` the
    loops' projection, or None; ``x0`` the initial integrated state and ``modes`` its
    linear modes (for the diagnosis of a failure); ``start`` the wall-clock start."""

    plan: RunPlan
    start: float = attrs.field(factory=_time.perf_counter)
    system: System | None = None
    rec: output_.Recorder | None = None
    sampler: Sampler | None = None
    stops: Stops | None = None
    drift: Drift | None = None
    x0: Array | None = None
    modes: diagnose.Modes | None = None

    def begin(self, stacklevel: int = 1) -> Array:
        """Build the workspace and record ``t = 0``; returns the state to step from.
        Warnings go ``stacklevel`` frames above the caller."""
        plan, o = self.plan, self.plan.options
        model = plan.model
        with output_.signals_deferred():  # not inside llvmlite's callbacks, where it is lost
            system = self.system = System(model, o.formulation, o.loads, compiled=plan.compiled)
        system.baumgarte = plan.baumgarte
        x = system.initial(plan.state)
        self.sampler = Sampler(o.controller, model)
        self.sampler.sample(system, 0.0, x)
        system(0.0, x)  # resolves loads once: a bad load name fails here, before any work
        system.started = True
        far = diagnose.origin_roundoff(model, plan.state, plan.compiled)
        if far:
            warnings.warn(far, diagnose.RoundoffWarning, stacklevel=stacklevel + 1)
        self.x0 = x.copy()
        if plan.schedule is not None and o.t_final > 0.0:
            self.modes = diagnose.linear_modes(system, self.x0)
            h = min(o.dt, o.t_final)
            unstable = None if self.modes is None else diagnose.unstable_step(self.modes, h)
            if unstable:
                step_problem(unstable, o.force, stacklevel + 1)
            # the drift check is worth its cost when the run is longer than the check
            elif self.modes is not None and 4 * plan.schedule.n_steps > 2 * x.size + 1:
                report = diagnose.step_report(self.modes, o.dt, plan.schedule.n_steps)
                if report:
                    warnings.warn(report, diagnose.StepSizeWarning, stacklevel=stacklevel + 1)
        self.rec = output_.Recorder(None if o.stream is None else Streamer(system, o.stream))
        self.stops = None if plan.limited is None else Stops(plan.limited)
        self.drift = Drift(system) if plan.project else None
        applied = n_due(plan.lock_events, 0.0)
        if applied:
            x = apply_events(system, x, plan, applied)
        self.rec.add(0.0, x.copy(), system.locked)  # t = 0 first, whatever happens next
        return x

    def failure_modes(self) -> diagnose.Modes | None:
        """The linear modes at the initial state (computed now if the start did not)."""
        if self.modes is None and self.system is not None and self.x0 is not None:
            self.modes = diagnose.linear_modes(self.system, self.x0)
        return self.modes


def apply_events(
    system: System, x: Array, plan: RunPlan, n_applied: int, stops: Stops | None = None
) -> Array:
    """The state re-solved for the lock set after the first ``n_applied`` lock events
    of ``plan`` (and the engaged ``stops``)."""
    locked = locked_at(plan.lock_events, n_applied)
    if stops is not None:
        locked = np.union1d(locked, stops.speeds()).astype(np.intp)
    return system.relocked(x, locked)
