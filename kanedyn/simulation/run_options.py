"""The first stage of a run: :func:`kanedyn.simulate`'s options, each checked once.

:meth:`RunOptions.parse` turns the keyword arguments into one frozen record (the
formulation, method, engine, stabilization and limits mode as the objects of
:mod:`kanedyn.simulation.options` and :mod:`kanedyn.simulation.limits`; times as
floats), or raises a :class:`~kanedyn.ModelError` naming the bad option, before the
model is looked at. Nothing after this stage parses an option again.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from kanedyn.dynamics.loads import LoadsLike
from kanedyn.errors import ModelError
from kanedyn.simulation import diagnose
from kanedyn.simulation import limits as limits_
from kanedyn.simulation.control import Controller
from kanedyn.simulation.options import Engine, Formulation, Method, Stabilization

if TYPE_CHECKING:
    import scipy.integrate

__all__ = ["RunOptions", "check_baumgarte", "check_times", "step_problem"]


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


def check_baumgarte(value: Any) -> tuple[float, float]:
    """Baumgarte's ``(α, β)`` [1/s] as floats, or a ModelError: two non-negative numbers."""
    try:
        alpha, beta = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ModelError(f"baumgarte must be two numbers (alpha, beta), got {value!r}") from None
    if not (np.isfinite(alpha) and np.isfinite(beta)) or alpha < 0 or beta < 0:
        raise ModelError(f"baumgarte must be two non-negative numbers, got {value!r}")
    return alpha, beta


def step_problem(message: str, force: bool, stacklevel: int) -> None:
    """A step problem: a ModelError, or with ``force`` a StepSizeWarning (issued
    ``stacklevel`` frames up, at the caller of :func:`kanedyn.simulate`)."""
    if not force:
        raise ModelError(f"{message}; or force=True (--force) to run it anyway")
    warnings.warn(
        f"{message} (run anyway: force=True)", diagnose.StepSizeWarning, stacklevel=stacklevel + 1
    )


@attrs.frozen
class RunOptions:
    """:func:`kanedyn.simulate`'s options, checked (see its parameters). ``every`` is the
    output interval [s]; ``baumgarte`` is None unless ``stabilization`` is Baumgarte's;
    ``progress`` is resolved (default: when stderr is a terminal)."""

    t_final: float
    dt: float
    method: Method
    formulation: Formulation
    engine: Engine
    every: float
    rtol: float
    atol: float
    loads: LoadsLike
    events: tuple[Any, ...]
    controller: Controller | None
    progress: bool
    stream: Any
    stabilization: Stabilization
    baumgarte: tuple[float, float] | None
    limits: limits_.Limits
    force: bool

    @property
    def fixed_step(self) -> bool:
        """Whether the method steps with the fixed step ``dt`` (RK4)."""
        return not self.method.adaptive

    @classmethod
    def parse(
        cls,
        t_final: Any,
        dt: Any,
        *,
        method: Method | str | type[scipy.integrate.OdeSolver],
        formulation: Formulation | str,
        loads: LoadsLike,
        output_every: float | None,
        rtol: float,
        atol: float,
        events: Sequence[Any],
        controller: Controller | None,
        progress: bool | None,
        engine: Engine | str,
        stream: Any,
        stabilization: Stabilization | str,
        baumgarte: Any,
        limits: limits_.Limits | str,
        force: bool,
        stacklevel: int = 1,
    ) -> RunOptions:
        """The options checked, or a ModelError naming the first bad one. A fixed step
        longer than the run is a step problem (:func:`step_problem`)."""
        t_final, dt = check_times(t_final, dt)
        form = Formulation.parse(formulation)
        integrator = Method.parse(method)
        limit_mode = limits_.Limits.parse(limits)
        if not integrator.adaptive and dt > t_final > 0.0:
            step_problem(
                f"dt = {dt:g} s is longer than the run (t_final = {t_final:g} s): the run "
                f"would be one step of {t_final:g} s; give a step of at most t_final",
                force,
                stacklevel + 1,
            )
        how = Engine.parse(engine)
        if not integrator.compiles and how is Engine.COMPILED:
            raise ModelError(
                f"method={integrator.name!r} steps the director coordinates with NumPy "
                "(Newton on dense matrices); engine='compiled' does not apply: use "
                "engine='auto' or 'dense'"
            )
        every = dt if output_every is None else float(output_every)
        if not np.isfinite(every) or every <= 0.0:
            raise ModelError(f"output_every must be positive, got {output_every}")
        stab = Stabilization.parse(stabilization)
        return cls(
            t_final=t_final, dt=dt, method=integrator, formulation=form, engine=how,
            every=every, rtol=rtol, atol=atol, loads=loads, events=tuple(events),
            controller=controller,
            progress=sys.stderr.isatty() if progress is None else bool(progress),
            stream=stream, stabilization=stab,
            baumgarte=check_baumgarte(baumgarte) if stab is Stabilization.BAUMGARTE else None,
            limits=limit_mode, force=force,
        )  # fmt: skip
