"""What a run's step can resolve, and why a run diverged.

The fastest motion of a model near a state is read from its linearization: the
eigenvalues ``λ`` of the Jacobian ``A = ∂f/∂x`` of the first-order system
``ẋ = f(t, x)`` that :func:`kanedyn.simulate` integrates (either formulation), by central
finite differences at the initial state. For an undamped spring-mass system ``A`` has
``λ = ±iω`` with ``ω²`` the eigenvalues of ``M⁻¹K``; ``A`` also carries damping and the
gyroscopic coupling of spinning bodies. The fastest mode's period is ``2π / max|λ|``.

Classic RK4 multiplies a mode ``e^{λt}`` by its stability polynomial per step,

.. math:: R(z) = 1 + z + z^2/2 + z^3/6 + z^4/24, \\qquad z = λ\\,Δt,

instead of ``e^{z}`` (Hairer & Wanner, *Solving ODEs II*, §IV.2). Over ``n`` steps the
mode's amplitude is off by ``(|R(z)| / |e^z|)^n``: :func:`step_report` turns that into a
warning before a fixed-step run (RK4 is stable on the imaginary axis up to
``|z| = 2√2``; beyond that the mode grows and the run diverges). The same estimate sets
the CLI's defaults for a model file that gives no run settings (:func:`run_defaults`:
duration, step and output cadence) and the step suggested when a run diverges
(:func:`suggest_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Modes",
    "check_initial_energy",
    "StepSizeWarning",
    "divergence_reason",
    "linear_modes",
    "motion_rates",
    "momentum_varies",
    "output_interval",
    "rk4_amplification",
    "run_defaults",
    "step_report",
    "suggest_step",
    "unstable_step",
]

Array = NDArray[np.float64]

#: the largest state a finite-difference Jacobian is built for (2 n right-hand sides)
MAX_STATES = 400
#: samples per period of the fastest mode that the suggested step and cadence give
SAMPLES_PER_PERIOD = 20
#: a default run lasts this many fastest periods, and this many e-folding times of a
#: growing mode
DEFAULT_SPAN = 10.0
#: a default run lasts at least this long [s], the step when nothing sets a time scale
DEFAULT_T_FINAL = 10.0
DEFAULT_DT = 0.01
#: steps per fastest period, and per run, that a default step gives at least
STEPS_PER_PERIOD = 100
STEPS_PER_RUN = 1000
#: the most steps a default duration asks for
MAX_DEFAULT_STEPS = 1_000_000


class StepSizeWarning(UserWarning):
    """A fixed step too large for the model's fastest mode (energy lost or a divergence)."""


class RoundoffWarning(UserWarning):
    """A run whose engine loses the attitude to round-off (a body far from the origin of
    the dense engine's spatial quantities: a fixed-base model far from N's origin)."""


#: the relative round-off of the attitude accelerations above which a run is warned about
ROUNDOFF_WARN = 1e-6


def origin_roundoff(model: Any, state: Any, compiled: bool) -> str | None:
    """Why the attitude of ``model`` loses accuracy to round-off in this run, or None.

    The dense engine (``compiled`` False, either formulation) writes its spatial
    quantities about one point (:class:`kanedyn.dynamics.kinematics.Kinematics`
    ``origin``): a free root's joint point, or N's origin for a model without one. At a
    distance ``|r|`` from it, a body's rotational terms (``I``) sit beside translational
    ones of ``m |r|²``, so they keep a relative accuracy of about ``ε m |r|² / I``
    (``ε`` the machine epsilon, ``m`` the model's mass, ``I`` the smallest principal
    moment of a root body). A spacecraft on a free root is at that point, and the
    compiled engine works in each joint's frame: neither loses anything in orbit
    (docs/howto/central-gravity.md, round-off at orbital distances); nor do the MSD
    states of a free root, its momentum about its mass centre.
    """
    if compiled:
        return None
    from kanedyn.dynamics.kinematics import kinematics
    from kanedyn.spatial.inertia import principal_axes

    roots = [k for k, j in enumerate(model.joints) if j.inner is None]
    if not roots:
        return None
    kin = kinematics(model, state)
    mass = float(sum(float(b.mass) for b in model.bodies))
    worst, where, dist = 0.0, "", 0.0
    for k in roots:
        moments = principal_axes(np.asarray(model.bodies[k].inertia, dtype=float))[0]
        positive = moments[moments > 0.0]
        if not positive.size:
            continue
        r = float(np.linalg.norm(kin.r_rel[k]))
        loss = np.finfo(float).eps * mass * r * r / float(positive.min())
        if loss > worst:
            worst, where, dist = loss, model.bodies[k].name, r
    if worst <= ROUNDOFF_WARN:
        return None
    return (
        f"body {where!r} is {dist:.3g} m from the origin of the dense engine's spatial "
        f"quantities (N's origin: no root joint has slides): its attitude accelerations "
        f"keep about {worst:.1g} (ε m |r|² / I_min); simulate it on the compiled engine "
        "(the default), or give the model a free root "
        "(docs/howto/central-gravity.md, round-off at orbital distances)"
    )


@attrs.frozen
class Modes:
    """Eigenvalues ``lam`` (complex, (n,)) of the linearized system at a state."""

    lam: NDArray[np.complex128]

    @property
    def fastest_rate(self) -> float:
        """``max |λ|`` [rad/s] (0 for a model that does not move)."""
        return float(np.max(np.abs(self.lam))) if self.lam.size else 0.0

    @property
    def period(self) -> float:
        """``2π / max |λ|`` [s]: the fastest mode's period (inf when nothing moves)."""
        rate = self.fastest_rate
        return 2.0 * math.pi / rate if rate > 0.0 else math.inf


def linear_modes(f: Callable[[float, Array], Array], x0: Array, t0: float = 0.0) -> Modes | None:
    """The eigenvalues of ``∂f/∂x`` at ``(t0, x0)`` by central differences.

    The step per component is ``1e-6 max(1, |x_i|)``. Returns None for systems of more
    than :data:`MAX_STATES` states, or when ``f`` fails or is not finite near ``x0``.
    """
    x0 = np.asarray(x0, dtype=float)
    n = x0.size
    if n == 0 or n > MAX_STATES:
        return None
    A = np.empty((n, n))
    try:
        with np.errstate(all="ignore"):
            for i in range(n):
                h = 1e-6 * max(1.0, abs(x0[i]))
                xp, xm = x0.copy(), x0.copy()
                xp[i] += h
                xm[i] -= h
                A[:, i] = (np.asarray(f(t0, xp)) - np.asarray(f(t0, xm))) / (2.0 * h)
    except (ArithmeticError, ValueError, np.linalg.LinAlgError, RuntimeError):
        return None
    if not np.all(np.isfinite(A)):
        return None
    return Modes(np.linalg.eigvals(A).astype(np.complex128))


def check_initial_energy(model: Any, state: Any) -> None:
    """A ModelError when the kinetic or potential energy of ``state`` is not finite (a
    mass, inertia, rate or spring too large to compute with): such a run cannot start."""
    from kanedyn.dynamics.kane import kinetic_energy, potential_energy

    with np.errstate(all="ignore"):
        T, V = kinetic_energy(model, state), potential_energy(model, state)
    if not (math.isfinite(T) and math.isfinite(V)):
        from kanedyn.errors import ModelError

        raise ModelError(
            f"the initial energy is not finite (kinetic {T:g} J, potential {V:g} J): a mass, "
            "an inertia, a rate or a spring too large to compute with"
        )


def rk4_amplification(z: Any) -> Any:
    """``R(z) = 1 + z + z²/2 + z³/6 + z⁴/24``, classic RK4's stability polynomial."""
    return 1.0 + z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z / 24.0)))


def suggest_step(period: float) -> float:
    """A round step of at most ``period / 20`` (one significant digit, rounded down)."""
    return _round_down(period / SAMPLES_PER_PERIOD)


def _round_down(x: float) -> float:
    """``x`` rounded down to one significant digit (0.42 -> 0.4); a value that is not
    finite and positive is returned as it is."""
    if not math.isfinite(x) or x <= 0.0:
        return x
    unit = 10.0 ** math.floor(math.log10(x))
    return math.floor(x / unit + 1e-9) * unit


#: ``|λ Δt|`` above which a growing RK4 amplification is the step's, not the physics'
UNSTABLE_Z = 2.0


def unstable_step(modes: Modes, h: float) -> str | None:
    """Why a fixed RK4 step ``h`` is unstable for one of ``modes``, or None.

    A mode is unstable when RK4 multiplies it by more than the motion does at every
    step, ``|R(z)| > max(1, |e^z|)``, at ``|z| = |λ| h > 2``: there the growth is the
    integrator's (the imaginary axis is stable up to ``|z| = 2√2``), so the run diverges
    or, over a few steps, multiplies the energy by ``|R(z)|²`` per step. The message names
    the mode's period, ``|λ| h``, that factor and the step suggested
    (:func:`suggest_step`).
    """
    if not modes.lam.size or not (math.isfinite(h) and h > 0.0):
        return None
    z = modes.lam * h
    with np.errstate(all="ignore"):
        R = np.abs(rk4_amplification(z))
        bad = (np.abs(z) > UNSTABLE_Z) & (R > np.maximum(1.0, np.exp(z.real)) * (1.0 + 1e-9))
    if not np.any(bad):
        return None
    worst = int(np.argmax(np.where(bad, np.abs(z), -1.0)))
    rate = float(abs(modes.lam[worst]))
    period = 2.0 * math.pi / rate
    return (
        f"dt = {h:g} s is unstable for RK4 on this model's fastest mode (period "
        f"~{period:.3g} s, |λ| dt = {rate * h:.3g}): every step multiplies that mode's "
        f"energy by {float(R[worst]) ** 2:.3g}; use a step of {suggest_step(period):g} s or "
        "less, or an adaptive method such as DOP853"
    )


def momentum_varies(model: Any, loads: Any = None) -> str | None:
    """Why the total linear and angular momentum of ``model`` are not conserved, or None
    when they are: every root joint free (3 slides and a spherical rotation), no loop
    closing on N, no gravity, no applied loads (a callable counts as loads)."""
    for j in model.joints:
        if j.inner is None and not (j.rot_type == "spherical" and j.trn_dof == 3):
            return (
                f"the root joint {j.name!r} holds {j.outer!r} to N, whose reactions "
                "change the momentum"
            )
    for lp in model.loops:
        if lp.inner is None or lp.outer is None:
            return f"the loop {lp.name!r} closes on N, whose reactions change the momentum"
    if model.central_gravity is not None or np.any(model.uniform_gravity != 0.0):
        return "gravity acts on the system"
    if loads is not None and (callable(loads) or len(loads)):
        return "applied loads act on the system"
    return None


def output_interval(period: float, dt: float, requested: float | None = None) -> float:
    """An output interval, a multiple of ``dt``, with at least ~20 samples per
    ``period`` (the fastest mode), and no longer than ``requested`` when given."""
    every = dt
    if math.isfinite(period) and period > 0.0:
        every = max(dt, dt * math.floor(period / SAMPLES_PER_PERIOD / dt))
    if requested is not None:
        every = min(every, requested)
    return every


def motion_rates(model: Any, state: Any, loads: Any = None) -> Array:
    """The rates [rad/s] at which ``state`` turns the model's mass, for :func:`run_defaults`.

    For each rotational speed ``u_r`` (``state.u[:nu]``) two rates: ``|u_r|`` (a joint
    turning at ``u_r`` sweeps a turn in ``2π/|u_r|``) and ``√|u̇_r|`` from the
    accelerations of :func:`kanedyn.forward_dynamics` (a joint at rest with angular
    acceleration ``α`` turns half a radian in ``1/√α``: a pendulum released level with its
    pivot, whose linearization there has no stiffness). A one-axis hinge whose outer body
    is a leaf, symmetric about the hinge axis with its mass centre on it (a reaction
    wheel), turns nothing visible and is left out.
    """
    from kanedyn.dynamics.forward import forward_dynamics

    edges = (*model.joints, *model.loops)
    keep = np.ones(model.nu, dtype=bool)
    for j in model.joints:
        if j.rot_type != "gimbal" or j.rot_dof != 1 or j.trn_dof != 0:
            continue
        if sum(j.outer in (k.inner, k.outer) for k in edges) > 1:
            continue  # not a leaf: something hangs on the outer body
        body = model.body(j.outer)
        a = np.asarray(j.outer_rotation, dtype=float).T[:, int(str(j.rot_seq)[0]) - 1]
        I = np.asarray(body.inertia, dtype=float)
        axial = float(a @ I @ a)
        transverse = 0.5 * (float(np.trace(I)) - axial)
        symmetric = axial * np.outer(a, a) + transverse * (np.eye(3) - np.outer(a, a))
        d = np.asarray(body.com, dtype=float) - np.asarray(j.outer_point, dtype=float)
        scale = max(float(np.max(np.abs(I))), 1e-300)
        length = max(float(np.linalg.norm(body.com)), float(np.linalg.norm(j.outer_point)), 1.0)
        if (
            np.allclose(I, symmetric, rtol=0.0, atol=1e-9 * scale)
            and float(np.linalg.norm(np.cross(d, a))) <= 1e-9 * length
        ):
            keep[model.speeds(j.name)[0]] = False
    rates = np.abs(np.asarray(state.u[: model.nu], dtype=float))[keep]
    try:
        with np.errstate(all="ignore"):
            accel = np.asarray(forward_dynamics(model, state, loads), dtype=float)[: model.nu]
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return rates
    accel = np.sqrt(np.abs(accel[keep]))
    return np.concatenate([rates, accel[np.isfinite(accel)]])


def _round_up(x: float) -> float:
    """``x`` rounded up to two significant digits (21141 -> 22000)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / unit - 1e-9) * unit


def run_defaults(
    modes: Modes | None,
    rates: Any = (),
    *,
    t_final: float | None = None,
    dt: float | None = None,
    output_every: float | None = None,
) -> tuple[float, float, float]:
    """``(t_final, dt, output_every)`` for a run, each the given value or a default that
    shows the model's motion at its initial state.

    The time scales come from the linearization (``modes``, None when not available) and
    from the rotation rates ``rates`` [rad/s] of the initial state (a hinge turning
    freely, which the linearization sees as a zero eigenvalue):

    * the fastest period ``T = 2π / max(max|λ|, max|ω|)``;
    * the growth rate ``σ = max Re λ`` of a mode that grows (a minor-axis spin losing
      energy, a pendulum above its pivot), counted when ``σ > 10⁻⁴ max|λ|``.

    Defaults: ``t_final`` is the longest of 10 s, ``10 T`` and ``10 / σ`` (the growing
    motion develops by ``e¹⁰``), rounded up to two digits and at most a million steps;
    ``dt`` gives at least 100 steps per ``T`` and 1000 per run (one significant digit,
    rounded down; 0.01 s when nothing sets a time scale); ``output_every`` is a multiple
    of ``dt`` giving about 20 outputs per ``T`` and at least 20 per run
    (:func:`output_interval`).

    >>> run_defaults(Modes(np.array([2j, -2j])))  # period π s
    (32.0, 0.03, 0.15)
    """
    lam = modes.lam if modes is not None else np.zeros(0, dtype=complex)
    rate_max = max(
        float(np.max(np.abs(lam))) if lam.size else 0.0,
        float(np.max(np.abs(rates))) if np.size(rates) else 0.0,
    )
    period = 2.0 * math.pi / rate_max if rate_max > 0.0 else math.inf
    growth = float(np.max(lam.real)) if lam.size else 0.0
    if not growth > 1e-4 * rate_max:
        growth = 0.0
    if t_final is None:
        span = max(
            DEFAULT_T_FINAL,
            DEFAULT_SPAN * period if math.isfinite(period) else 0.0,
            DEFAULT_SPAN / growth if growth > 0.0 else 0.0,
        )
        t_final = _round_up(span)
        if dt is not None:
            t_final = min(t_final, MAX_DEFAULT_STEPS * dt)
    if dt is None:
        step = min(period / STEPS_PER_PERIOD, t_final / STEPS_PER_RUN)
        dt = _round_down(step) if math.isfinite(step) and step > 0.0 else DEFAULT_DT
    if output_every is None:
        output_every = output_interval(min(period, t_final), dt)
    return t_final, dt, output_every


def step_report(modes: Modes, dt: float, n_steps: int) -> str | None:
    """Why a fixed RK4 step ``dt`` is too large for ``modes`` over ``n_steps`` steps, or
    None when every mode keeps its amplitude within 10 % over the run."""
    if not modes.lam.size or n_steps <= 0:
        return None
    z = modes.lam * dt
    with np.errstate(all="ignore"):
        ratio = np.abs(rk4_amplification(z)) / np.exp(z.real)
        log_drift = n_steps * np.log(ratio)
    worst = int(np.argmax(np.abs(log_drift)))
    if not abs(log_drift[worst]) > math.log(1.1):
        return None
    rate = float(abs(modes.lam[worst]))
    period = 2.0 * math.pi / rate
    # RK4's error per unit time goes as dt⁴: the step that keeps this mode within 10 %
    # over the run, and never more than ``period / 20``, so the advice is always a
    # smaller step than ``dt``
    better = min(
        suggest_step(period), _round_down(dt * (math.log(1.1) / abs(log_drift[worst])) ** 0.25)
    )
    if ratio[worst] > 1.0 and abs(z[worst]) > 2.0:
        effect = "grows at every step and the run will diverge"
    else:
        change = float(np.exp(2.0 * log_drift[worst]) - 1.0)
        effect = (
            f"{'loses' if change < 0 else 'gains'} about "
            f"{min(abs(change), 1.0) * 100:.4g} % of that mode's energy over the run "
            "to the integrator, not to the physics"
        )
    return (
        f"dt = {dt:g} s is too large for this model's fastest mode (period ~{period:.3g} s, "
        f"|λ| dt = {rate * dt:.3g}): RK4 {effect}; try a step of {better:g} s or less, "
        "or an adaptive method such as DOP853"
    )


def divergence_reason(modes: Modes | None, dt: float | None, adaptive: bool) -> str:
    """The likely cause of a divergence, judged from the fastest mode and the step."""
    if modes is None or modes.fastest_rate == 0.0:
        return "the linearized model is not available, so the cause is unknown"
    period = modes.period
    if adaptive or dt is None:
        return (
            f"the model's fastest mode at the start has a period of ~{period:.3g} s; an "
            "adaptive method follows it, so the motion itself grew without bound (a load, a "
            "controller, or a mass matrix that becomes singular)"
        )
    if modes.fastest_rate * dt > 0.5:
        return (
            f"the step may be too large for this model's fastest mode (period ~{period:.3g} s,"
            f" dt = {dt:g} s): try a step of {suggest_step(period):g} s or less, or an "
            "adaptive method such as DOP853"
        )
    return (
        f"the step resolves the model's fastest mode at the start (period ~{period:.3g} s, "
        f"dt = {dt:g} s), so the motion itself grew without bound (a load, a controller, "
        "or a mass matrix that becomes singular); an adaptive method such as DOP853 may "
        "tell which"
    )
