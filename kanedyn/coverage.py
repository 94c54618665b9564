"""Which engine runs which feature: the coverage table, made by running the code.

Each feature has a *probe*: the smallest model (and run options) that has it. Each
engine is asked to run every probe, through its public entry point, for two steps
(:func:`table`); the cell is what happened:

* ``native``: the compiled engine's native kernel ran it (the native Kane and MSD
  columns, from ``Trajectory.engine``);
* ``yes``: the engine ran it (every other column);
* ``dense: <reason>``: asked for the compiled engine (``engine="auto"``), the run fell
  back to the dense engine, for the reason :func:`kanedyn.compiled.supports` gives;
* ``refused: <reason>``: the engine raised a :class:`~kanedyn.ModelError`, whose first
  sentence is the reason;
* ``n/a: <reason>``: the engine has no input for the feature (a controller is a Python
  function of a sampled state: the symbolic derivations take its output as an input
  torque instead).

``python -m kanedyn.coverage`` prints the table as Markdown; ``python -m kanedyn.coverage
--write docs/coverage.md`` writes the documentation page, which a test compares with a
fresh run of this module.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

import kanedyn as kd
from kanedyn.errors import KanedynError

__all__ = ["ENGINES", "FEATURES", "Probe", "cell", "main", "markdown", "table"]

DT = 0.01


@attrs.frozen
class Probe:
    """A model with one feature, its initial state, and the options a run needs for it:
    ``loads`` (records or a callable), ``controller``, ``events``, ``limits``; ``symbolic``
    the loads as the symbolic derivations take them (``joint_torques`` and the like)."""

    model: kd.Model
    state: kd.State
    loads: Any = None
    controller: Any = None
    events: tuple[Any, ...] = ()
    limits: str = "warn"
    symbolic: dict[str, Any] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- probes
def _rod(name: str, mass: float = 1.0) -> kd.Body:
    return kd.Body(name, mass=mass, inertia=kd.inertia_tensor(0.01, 0.1, 0.1), com=(0.5, 0, 0))


def _pendulum(*joints: kd.Joint, gravity: Any = (0.0, 0.0, -9.81), **kw: Any) -> Probe:
    bodies = [_rod(j.outer) for j in joints]
    model = kd.Model(bodies, list(joints), gravity=gravity)
    state = model.initial_state()
    rng = np.random.default_rng(1)
    q = state.q.copy()
    q[model.layout.angle_q] = rng.uniform(-0.5, 0.5, model.layout.angle_q.size)
    u = rng.uniform(-0.5, 0.5, model.n)
    return Probe(model, kd.State(q, u), **kw)


def _hinge(name: str, inner: str | None, outer: str, **kw: Any) -> kd.Joint:
    point = (1.0, 0.0, 0.0) if inner is not None else (0.0, 0.0, 0.0)
    return kd.Joint.revolute(name, inner, outer, axis=2, inner_point=point, **kw)


def probe_joints() -> Probe:
    """Every joint kind: a free root, then a spherical joint, a 2-angle gimbal, a hinge
    and a slide."""
    return _pendulum(
        kd.Joint.free("root", "a"),
        kd.Joint.spherical("ball", "a", "b", inner_point=(1, 0, 0)),
        kd.Joint.gimbal("gim", "b", "c", seq="312", dof=2, inner_point=(1, 0, 0)),
        _hinge("hinge", "c", "d"),
        kd.Joint.prismatic("slide", "d", "e", axis=1, inner_point=(1, 0, 0)),
    )


def probe_springs() -> Probe:
    """Springs and dampers on a hinge and a slide."""
    return _pendulum(
        _hinge("hinge", None, "a", stiffness=5.0, damping=0.3),
        kd.Joint.prismatic(
            "slide", "a", "b", axis=1, inner_point=(1, 0, 0), stiffness=20.0, damping=0.5
        ),  # fmt: skip
    )


def probe_polynomial_springs() -> Probe:
    """MuJoCo's polynomial spring and damper (``stiffness_poly``, ``damping_poly``)."""
    return _pendulum(
        _hinge(
            "hinge",
            None,
            "a",
            stiffness=5.0,
            damping=0.3,
            stiffness_poly=(1.0, 2.0),
            damping_poly=(0.1, 0.2),
        ),  # fmt: skip
    )


def probe_spherical_spring() -> Probe:
    """A spring on a spherical joint (``-J_r⁻ᵀ K φ``)."""
    return _pendulum(kd.Joint.spherical("ball", None, "a", stiffness=2.0, damping=0.1))


def probe_constant_loads() -> Probe:
    """Load records: a force at a point (a thruster), a body torque, a joint effort."""
    loads = [
        kd.Force("a", (0.0, 0.0, 1.0), point=(1.0, 0.0, 0.0)),
        kd.Torque("b", (0.1, 0.0, 0.0)),
        kd.JointLoad("h2", (0.2,)),
    ]
    return _pendulum(_hinge("h1", None, "a"), _hinge("h2", "a", "b"), loads=loads,
                     symbolic={"joint_torques": {"h2": [0.2]}})  # fmt: skip


def probe_callable_loads() -> Probe:
    """Loads as a function of time and state."""

    def loads(t: float, model: kd.Model, state: Any, kin: Any) -> list[Any]:
        return [kd.JointLoad("h1", (np.sin(t),))]

    return _pendulum(_hinge("h1", None, "a"), loads=loads)


def probe_controller() -> Probe:
    """A sampled controller (a PD law on a hinge, held between samples)."""

    def law(t: float, model: kd.Model, state: kd.State) -> list[Any]:
        return [kd.JointLoad("h1", (-2.0 * state.q[0] - 0.5 * state.u[0],))]

    return _pendulum(_hinge("h1", None, "a"), controller=kd.Controller(DT, law))


def probe_events() -> Probe:
    """A lock event, then an unlock."""
    events = (kd.Lock(DT, "h2"), kd.Unlock(1.5 * DT, "h2"))
    return _pendulum(_hinge("h1", None, "a"), _hinge("h2", "a", "b"), events=events)


def probe_limit_stops() -> Probe:
    """A joint limit made a stop (``limits="stop"``)."""
    lim = kd.JointLimits(lower=-1.0, upper=1.0)
    return _pendulum(_hinge("h1", None, "a", limits=lim), limits="stop")


def probe_loops() -> Probe:
    """A closed loop (the four-bar linkage)."""
    model = kd.examples.four_bar()
    return Probe(model, model.assemble(model.initial_state(), fix=["crank"]))


def probe_wheels() -> Probe:
    """A reaction wheel's embedded momentum on a free body (``Body.embedded_momentum``)."""
    hub = kd.Body("hub", mass=10.0, inertia=kd.inertia_tensor(1.0, 2.0, 3.0),
                  embedded_momentum=(0.0, 0.0, 0.5))  # fmt: skip
    model = kd.Model([hub], [kd.Joint.free("root", "hub")])
    state = model.set_joint(model.initial_state(), "root", rates=[0.1, 0.2, 0.3])
    return Probe(model, state)


def probe_rotors() -> Probe:
    """A geared motor rotor on a hinge (``kd.Rotor``)."""
    return _pendulum(_hinge("h1", None, "a", rotor=kd.Rotor(inertia=1e-4, ratio=20.0)))


def probe_particles() -> Probe:
    """A particle (a body with zero inertia) on a 2-angle gimbal."""
    bob = kd.Body("bob", mass=0.7, inertia=np.zeros((3, 3)), com=(0.0, 0.0, -1.0))
    model = kd.Model([bob], [kd.Joint.gimbal("pivot", None, "bob", seq="123", dof=2)],
                     gravity=(0, 0, -9.81))  # fmt: skip
    state = model.set_joint(model.initial_state(), "pivot", angles=[0.3, 0.2])
    return Probe(model, state)


def probe_sympy_parameters() -> Probe:
    """A model whose mass is a sympy symbol."""
    import sympy as sm

    m = sm.Symbol("m", positive=True)
    body = kd.Body("a", mass=m, inertia=kd.inertia_tensor(0.01, 0.1, 0.1), com=(0.5, 0, 0))
    model = kd.Model([body], [_hinge("h1", None, "a")], gravity=(0, 0, -9.81))
    return Probe(model, kd.State(np.array([0.3]), np.array([0.1])))


def probe_uniform_gravity() -> Probe:
    """Uniform gravity on a two-link pendulum."""
    return _pendulum(_hinge("h1", None, "a"), _hinge("h2", "a", "b"))


def probe_central_gravity() -> Probe:
    """A central field (``kd.CentralGravity``) on a free body in a circular orbit."""
    hub = kd.Body("hub", mass=10.0, inertia=kd.inertia_tensor(1.0, 2.0, 3.0))
    model = kd.Model([hub], [kd.Joint.free("root", "hub")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.circular(7.0e6)
    return Probe(model, orbit.place(model, model.initial_state(), "root"))


def probe_flexible() -> Probe:
    """A flexible appendage (``kd.beam_body``, one mode a direction) on a free hub."""
    hub = kd.Body("hub", mass=20.0, inertia=kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, 40.0, n_modes=1)
    model = kd.Model([hub, beam], [kd.Joint.free("root", "hub"),
                                   kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0, 0))])  # fmt: skip
    state = model.set_joint(model.initial_state(), "root", rates=[0.1, 0.2, 0.3])
    return Probe(model, model.set_modes(state, "beam", amplitudes=[0.01, 0.02]))


def probe_flexible_nodes() -> Probe:
    """A rigid tip body hinged at the tip node of a flexible appendage
    (``Joint.inner_node``) on a free hub."""
    hub = kd.Body("hub", mass=20.0, inertia=kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, 40.0, n_modes=1)
    tip = kd.Body("tip", mass=0.5, inertia=kd.inertia_tensor(0.01, 0.02, 0.02))
    model = kd.Model(
        [hub, beam, tip],
        [kd.Joint.free("root", "hub"),
         kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0, 0)),
         kd.Joint.revolute("tip", "beam", "tip", axis=3, inner_point=(2.0, 0, 0),
                           inner_node="tip")],
    )  # fmt: skip
    state = model.set_joint(model.initial_state(), "root", rates=[0.1, 0.2, 0.3])
    return Probe(model, model.set_modes(state, "beam", amplitudes=[0.01, 0.02]))


FEATURES: tuple[tuple[str, Callable[[], Probe]], ...] = (
    ("tree joints of every kind", probe_joints),
    ("joint springs and dampers", probe_springs),
    ("polynomial springs and dampers", probe_polynomial_springs),
    ("spherical joint springs", probe_spherical_spring),
    ("constant loads and thrusters", probe_constant_loads),
    ("callable loads", probe_callable_loads),
    ("controllers", probe_controller),
    ("lock and unlock events", probe_events),
    ("joint-limit stops", probe_limit_stops),
    ("closed loops", probe_loops),
    ("reaction wheels (embedded momentum)", probe_wheels),
    ("geared rotors", probe_rotors),
    ("particles", probe_particles),
    ("sympy parameters", probe_sympy_parameters),
    ("uniform gravity", probe_uniform_gravity),
    ("central gravity", probe_central_gravity),
    ("flexible bodies", probe_flexible),
    ("joints at nodes of flexible bodies", probe_flexible_nodes),
)


# --------------------------------------------------------------------------- engines
def _simulate(p: Probe, **kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kd.simulate(
            p.model, p.state, 2 * DT, DT, loads=p.loads, controller=p.controller,
            events=list(p.events), limits=p.limits, progress=False, **kw,
        )  # fmt: skip


def _native(formulation: str) -> Callable[[Probe], str]:
    def run(p: Probe) -> str:
        traj = _simulate(p, engine="auto", formulation=formulation)
        if traj.engine == "native":
            return "native"
        from kanedyn.compiled import supports

        why = supports(p.model)
        return f"dense: {why}" if why else f"{traj.engine}"

    return run


def _dense(formulation: str) -> Callable[[Probe], str]:
    def run(p: Probe) -> str:
        _simulate(p, engine="dense", formulation=formulation)
        return "yes"

    return run


def _energy_momentum(p: Probe) -> str:
    _simulate(p, method="energy-momentum")
    return "yes"


def _symbolic(kind: str) -> Callable[[Probe], str]:
    def run(p: Probe) -> str:
        if p.controller is not None or callable(p.loads) or p.events or p.limits == "stop":
            return (
                "n/a: a derivation's inputs are functions of time (joint_torques=...); "
                "controllers, callable loads, events and stops act in a run"
            )
        derive = kd.symbolic.kane if kind == "kane" else kd.symbolic.lagrange
        derive(p.model, **p.symbolic)
        return "yes"

    return run


def _linearize(p: Probe) -> str:
    if p.controller is not None or callable(p.loads) or p.events or p.limits == "stop":
        return "n/a: linearizes the equations of motion about a state, without a run's events"
    kd.linearize(p.model, p.state)
    return "yes"


def _to_c(p: Probe) -> str:
    if p.controller is not None or callable(p.loads) or p.events or p.limits == "stop":
        return "n/a: exports the equations of motion; a run's events are the caller's"
    with tempfile.TemporaryDirectory() as out:
        kd.codegen.to_c(p.model, out)
    return "yes"


def _ensemble(p: Probe) -> str:
    if p.controller is not None or p.events:
        return "n/a: simulate_ensemble takes no controller or events (kd.monte_carlo does)"
    states = kd.States(np.stack([p.state.q] * 2), np.stack([p.state.u] * 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kd.simulate_ensemble(p.model, states, 2 * DT, DT, loads=p.loads, limits=p.limits)
    return "yes"


def _monte_carlo(p: Probe) -> str:
    if p.events:
        return "n/a: kd.monte_carlo takes no events"
    body = p.model.bodies[0].name
    disp = kd.Dispersion(f"{body}.com.x", "normal", sigma=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = kd.monte_carlo(
            p.model, p.state, [disp], 2, 2 * DT, DT, loads=p.loads, controller=p.controller,
            limits=p.limits,
        )  # fmt: skip
    bad = res.failures
    if len(bad):
        raise kd.ModelError(str(bad["error"].iloc[0]))
    return "yes"


ENGINES: tuple[tuple[str, Callable[[Probe], str]], ...] = (
    ("dense Kane", _dense("kane")),
    ("native Kane", _native("kane")),
    ("dense MSD", _dense("msd")),
    ("native MSD", _native("msd")),
    ("energy-momentum", _energy_momentum),
    ("symbolic Kane", _symbolic("kane")),
    ("Lagrange", _symbolic("lagrange")),
    ("kd.linearize", _linearize),
    ("C export", _to_c),
    ("ensembles", _ensemble),
    ("kd.monte_carlo", _monte_carlo),
)


# --------------------------------------------------------------------------- the table
def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    text = re.sub(r"^[\w.'=]+: ", "", text, count=1) if text.startswith("engine=") else text
    end = re.search(r"[.;](\s|$)", text)
    return (text[: end.start()] if end else text)[:160]


def cell(engine: Callable[[Probe], str], probe: Probe) -> str:
    """What ``engine`` does with ``probe``: ``native``, ``yes``, ``dense: ...``,
    ``refused: ...`` or ``n/a: ...`` (module docstring)."""
    try:
        return engine(probe)
    except KanedynError as exc:
        return f"refused: {_first_sentence(str(exc))}"


def table() -> list[tuple[str, list[str]]]:
    """Every feature's row: its name and one cell per engine of :data:`ENGINES`."""
    rows = []
    for name, make in FEATURES:
        probe = make()
        rows.append((name, [cell(run, probe) for _, run in ENGINES]))
    return rows


def markdown(rows: list[tuple[str, list[str]]]) -> str:
    """The documentation page of ``rows``: a summary table (✓ native or runs, ○ falls back
    to the dense engine, ✗ refused, – not applicable) and the reasons, engine by engine."""
    mark = {"native": "✓ native", "yes": "✓"}
    lines = [
        "# Coverage: which engine runs which feature",
        "",
        "Made by `python -m kanedyn.coverage --write docs/coverage.md`, which runs every",
        "engine on a small model with each feature for two steps (`kanedyn/coverage.py`);",
        "`tests/test_coverage.py` checks that this page matches a fresh run. ✓: runs",
        "(*native*: the compiled engine's native code); ○: falls back to the dense engine;",
        "✗: refused; –: the engine has no such input. The reasons follow the table.",
        "",
        "| feature | " + " | ".join(name for name, _ in ENGINES) + " |",
        "|---" * (len(ENGINES) + 1) + "|",
    ]
    notes: list[str] = []
    for feature, cells in rows:
        shown = []
        for (engine, _), c in zip(ENGINES, cells, strict=True):
            if c in mark:
                shown.append(mark[c])
                continue
            kind, _, why = c.partition(": ")
            symbol = {"dense": "○", "refused": "✗", "n/a": "–"}.get(kind, "?")
            shown.append(symbol)
            notes.append(f"- **{feature}**, {engine}: {symbol} {why}")
        lines.append(f"| {feature} | " + " | ".join(shown) + " |")
    lines += ["", "## Reasons", "", *notes, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m kanedyn.coverage [--write PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m kanedyn.coverage", description=__doc__)
    parser.add_argument("--write", metavar="PATH", help="write the Markdown page here")
    args = parser.parse_args(argv)
    text = markdown(table())
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
