"""kanedyn's symbolic engines against sympy.physics.mechanics, stage by stage, same run.

Problems (each side gets its own copy, built by the same function from sympy frames,
points and bodies, and sympy's cache is cleared before each side, so neither reuses the
other's work):

* ``KaneProblem`` against ``KanesMethod``: the n-link pendulum on a cart (n = 1, 3, 5),
  the n-link pendulum (n = 2, 4, 6), Kane's rolling disc (three speeds, the contact
  point at rest; and with six speeds, a holonomic and three nonholonomic constraints)
  and the Whipple bicycle (Moore's formulation, as in sympy's ``test_bicycle``: one
  holonomic and three nonholonomic constraints, ``constraint_solver="CRAMER"``);
* ``lagrange()`` (a kanedyn model) against ``LagrangesMethod`` (the Lagrangian of the
  same system in sympy): the pendulum on a cart and the n-pendulum.

Stages, timed separately (CPU seconds of this process; the smallest of ``--repeat``
runs, the two sides interleaved):

* **build**: from the description to ``M`` and ``forcing`` (``KaneProblem(...)`` and
  reading ``.mass_matrix``/``.forcing``; ``KanesMethod(...).kanes_equations`` and
  reading its ``mass_matrix``/``forcing``; ``lagrange(model)`` and reading
  ``.mass_matrix``/``.forcing``; ``LagrangesMethod(...).form_lagranges_equations``);
* **solve**: the explicit accelerations ``M⁻¹ forcing``: kanedyn's own symbolic solve,
  ``KaneProblem.solve()`` and ``LagrangeEquations.solve()`` (an ``L D Lᵀ`` of the
  mass matrix, :func:`kanedyn.symbolic.problem.solve_symmetric`), against sympy's
  ``M.LUsolve(forcing)`` on sympy's own ``M``, ``forcing`` (``KanesMethod`` gives the
  dependent speeds' rows too, ``KaneProblem`` eliminates them);
* **linearize**: ``kd.symbolic.linearize(problem, op)`` against
  ``KanesMethod.linearize(op_point=..., A_and_B=True)`` (the bicycle: about upright
  rolling at a symbolic speed with the benchmark's parameter values, sympy with
  ``linear_solver="CRAMER"``, as in ``bench_bicycle.py``).

Ratios are kanedyn / sympy (below 1: kanedyn is faster). The targets of issue 20 are
``KaneProblem`` ≤ 0.5× ``KanesMethod`` and ``lagrange()`` ≤ 0.5× ``LagrangesMethod``.
Run: ``python -m benchmarks.bench_symbolic_peers [--quick] [--no-bicycle] [--repeat N]``
(``--quick``: the smallest sizes, no bicycle linearization, which takes sympy minutes).
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sm
from sympy.core.cache import clear_cache
from sympy.physics import mechanics as me

import kanedyn as kd
from kanedyn.symbolic import KaneProblem, lagrange, linearize
from kanedyn.symbolic.examples import (
    BenchmarkParameters,
    _constrained_disc,
    _minimal_disc,
    _model_values,
    _whipple_kane_args,
)

# CPU seconds after which a stage is abandoned (reported as "> cap").
CAP = 600.0


class _Cap(Exception):
    pass


def cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and its CPU seconds; nan seconds if it runs past ``CAP`` (wall clock)."""

    def stop(*_):
        raise _Cap

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(int(CAP))
    c0 = time.process_time()
    try:
        out = fn()
    except _Cap:
        return None, np.inf
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return out, time.process_time() - c0


# --------------------------------------------------------------------------- problems
def pendulum_parts(n: int, cart: bool = True) -> dict:
    """An n-link pendulum (on a cart along N.x when ``cart``) in sympy vectors, links in x-y."""
    k = 1 if cart else 0
    q = me.dynamicsymbols(f"q:{n + k}")
    u = me.dynamicsymbols(f"u:{n + k}")
    m = sm.symbols(f"m:{n + k}", positive=True)
    l = sm.symbols(f"l:{n}", positive=True)
    g = sm.Symbol("g", positive=True)
    F = me.dynamicsymbols("F")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    particles, loads, kd_eqs, prev = [], [], [], O
    if cart:
        prev = O.locatenew("C", q[0] * N.x)
        prev.set_vel(N, u[0] * N.x)
        particles.append(me.Particle("cart", prev, m[0]))
        loads.append((prev, F * N.x - m[0] * g * N.y))
        kd_eqs.append(q[0].diff() - u[0])
    for i in range(n):
        A = N.orientnew(f"A{i}", "Axis", (q[i + k], N.z))
        A.set_ang_vel(N, u[i + k] * N.z)
        P = prev.locatenew(f"P{i}", -l[i] * A.y)
        P.v2pt_theory(prev, N, A)
        particles.append(me.Particle(f"p{i}", P, m[i + k]))
        loads.append((P, -m[i + k] * g * N.y))
        kd_eqs.append(q[i + k].diff() - u[i + k])
        prev = P
    op = {**dict.fromkeys(q, 0), **dict.fromkeys(u, 0)}
    return {"args": dict(frame=N, q_ind=q, u_ind=u, kd_eqs=kd_eqs, bodies=particles,
                         loads=loads),
            "op": op, "sympy_op": op, "inputs": [F] if cart else None}  # fmt: skip


def rolling_disc_parts() -> dict:
    """Kane's rolling disc, three speeds (the contact point at rest), upright at spin 5."""
    r, m, g = sm.symbols("r m g", positive=True)
    args, q, u, _ = _minimal_disc(r, m, g)
    op = {**dict.fromkeys(q, 0), **dict.fromkeys(u, 0)}
    op[u[1]] = 5  # upright rolling at spin rate 5
    return {"args": args, "op": op, "sympy_op": op, "inputs": None}


def constrained_disc_parts() -> dict:
    """The rolling disc with six speeds and the contact's velocity as three constraints."""
    r, m, g = sm.symbols("r m g", positive=True)
    args, _, _, _ = _constrained_disc(r, m, g)
    return {"args": args, "op": None, "sympy_op": None, "inputs": None}


def bicycle_parts() -> dict:
    """The Whipple bicycle (sympy's ``test_bicycle`` formulation) and upright rolling."""
    args, s = _whipple_kane_args()
    bench = BenchmarkParameters()
    par = {s[k]: sm.Float(x, 17) for k, x in _model_values(bench).items()}
    v = sm.Symbol("v")
    op = {s["q1"]: 0, s["q2"]: 0, s["q4"]: 0, s["q5"]: 0, s["u2"]: 0, s["u5"]: 0}
    op[s["u3"]] = v / bench.r_R
    # sympy needs every speed and rate at the point (the dependent ones solved by hand)
    state = {**op, s["u1"]: 0, s["u4"]: 0, s["u6"]: v / bench.r_F}
    state.update({s[f"u{i}"].diff(): 0 for i in range(1, 7)})
    return {"args": args, "op": {**op, **par}, "sympy_op": state, "par": par,
            "inputs": None}  # fmt: skip


def _ours(parts: dict, linearize_too: bool) -> list[float]:
    kp, t_build = cpu(lambda: KaneProblem(**parts["args"]))
    (M, f), t_mf = cpu(lambda: (kp.mass_matrix, kp.forcing))
    _, t_solve = cpu(kp.solve)
    t_lin = np.nan
    if linearize_too and parts["op"] is not None:
        t_lin = cpu(lambda: linearize(kp, parts["op"], inputs=parts["inputs"]))[1]
    return [t_build + t_mf, t_solve, t_lin]


def _sympy(parts: dict, linearize_too: bool) -> list[float]:
    a = parts["args"]
    solver = "CRAMER" if a.get("u_dep") else "LU"

    def build():
        km = me.KanesMethod(
            a["frame"],
            q_ind=a["q_ind"],
            u_ind=a["u_ind"],
            kd_eqs=a["kd_eqs"],
            q_dependent=a.get("q_dep", ()),
            configuration_constraints=a.get("configuration_constraints", ()),
            u_dependent=a.get("u_dep", ()),
            velocity_constraints=a.get("velocity_constraints", ()),
            constraint_solver=solver,
        )
        km.kanes_equations(a["bodies"], a["loads"])
        return km, km.mass_matrix, km.forcing

    (km, M, f), s_build = cpu(build)
    _, s_solve = cpu(lambda: M.LUsolve(f))
    s_lin = np.nan
    if linearize_too and parts["sympy_op"] is not None:

        def lin():
            A, B, _ = km.linearize(op_point=parts["sympy_op"], A_and_B=True,
                                   linear_solver=solver)  # fmt: skip
            if "par" in parts:
                A = A.xreplace(parts["par"])
            return A

        s_lin = cpu(lin)[1]
    return [s_build, s_solve, s_lin]


def kane_sides(
    make: Callable[[], dict], linearize_too: bool, repeat: int = 1
) -> tuple[list[float], list[float]]:
    """[build, solve, linearize] CPU seconds of KaneProblem and of KanesMethod.

    Each repetition builds fresh copies of the problem for each side and clears sympy's
    cache first; the smallest time of each stage is kept.
    """
    ours, theirs = [], []
    for _ in range(repeat):
        parts = make()
        clear_cache()
        ours.append(_ours(parts, linearize_too))
        parts = make()
        clear_cache()
        theirs.append(_sympy(parts, linearize_too))
    return list(np.min(ours, axis=0)), list(np.min(theirs, axis=0))


def lagrange_sides(n: int, cart: bool, repeat: int = 1) -> tuple[list[float], list[float]]:
    """[build, solve] CPU seconds of kd.symbolic.lagrange and of LagrangesMethod for the
    n-pendulum (on a cart when ``cart``), particles on massless rods in the plane; the
    smallest of ``repeat`` runs of each stage, each run from a fresh model and cache."""
    runs = [_lagrange_once(n, cart) for _ in range(repeat)]
    ours, theirs = zip(*runs, strict=True)
    return list(np.min(ours, axis=0)), list(np.min(theirs, axis=0))


def _lagrange_once(n: int, cart: bool) -> tuple[list[float], list[float]]:
    g = sm.Symbol("g", positive=True)
    m = sm.symbols(f"m:{n + 1}", positive=True)
    l = sm.symbols(f"l:{n}", positive=True)
    bodies, joints, inner = [], [], None
    if cart:
        bodies.append(kd.Body("cart", mass=m[0], inertia=0))
        joints.append(kd.Joint.prismatic("slide", None, "cart", axis=1))
        inner = "cart"
    for i in range(n):
        bodies.append(kd.Body(f"p{i}", mass=m[i + 1], inertia=0, com=(0, -l[i], 0)))
        point = (0, 0, 0) if i == 0 else (0, -l[i - 1], 0)
        joints.append(kd.Joint.revolute(f"j{i}", inner, f"p{i}", axis=3, inner_point=point))
        inner = f"p{i}"
    model = kd.Model(bodies, joints, gravity=(0, -g, 0))
    clear_cache()

    def build():
        lag = lagrange(model)
        return lag, lag.mass_matrix, lag.forcing

    (lag, _, _), t_build = cpu(build)
    _, t_solve = cpu(lag.solve)

    def sympy_build():
        N = me.ReferenceFrame("N")
        O = me.Point("O")
        O.set_vel(N, 0)
        q = me.dynamicsymbols(f"q:{n + 1}")
        particles, prev = [], O
        if cart:
            prev = O.locatenew("C", q[0] * N.x)
            particles.append(me.Particle("cart", prev, m[0]))
        for i in range(n):
            A = N.orientnew(f"A{i}", "Axis", (q[i + 1], N.z))
            P = prev.locatenew(f"P{i}", -l[i] * A.y)
            particles.append(me.Particle(f"p{i}", P, m[i + 1]))
            prev = P
        for p in particles:
            p.potential_energy = p.mass * g * p.point.pos_from(O).dot(N.y)
        lm = me.LagrangesMethod(me.Lagrangian(N, *particles), q if cart else q[1:])
        lm.form_lagranges_equations()
        return lm

    clear_cache()
    lm, s_build = cpu(sympy_build)
    _, s_solve = cpu(lambda: lm.mass_matrix.LUsolve(lm.forcing))
    return [t_build, t_solve], [s_build, s_solve]


# --------------------------------------------------------------------------- report
def _fmt(x: float) -> str:
    if x == np.inf:
        return f"{'>' + format(CAP, '.0f'):>8}"
    return f"{x:8.2f}" if np.isfinite(x) else "     n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the smallest sizes only")
    ap.add_argument("--no-bicycle", action="store_true", help="leave out the Whipple bicycle")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side (smallest kept)")
    args = ap.parse_args()
    sizes = [1, 3] if args.quick else [1, 3, 5]
    print(f"load average at the start: {os.getloadavg()[0]:.1f}; sympy {sm.__version__}")
    head = f"{'problem':<28}{'stage':<11}{'kanedyn s':>10}{'sympy s':>10}{'ratio':>8}"
    print(head)
    print("-" * len(head))

    def row(name: str, ours: list[float], theirs: list[float], stages: tuple[str, ...]):
        for st, a, b in zip(stages, ours, theirs, strict=False):
            if b == np.inf and np.isfinite(a):
                ratio = f"<{a / CAP:.2f}"  # sympy did not finish within the cap
            else:
                ok = np.isfinite(a) and np.isfinite(b) and b > 0
                ratio = f"{a / b:.2f}" if ok else "nan"
            print(f"{name:<28}{st:<11}{_fmt(a)}  {_fmt(b)}{ratio:>8}", flush=True)
            name = ""

    stages = ("build", "solve", "linearize")
    rep = args.repeat
    for n in sizes:
        ours, theirs = kane_sides(lambda n=n: pendulum_parts(n, cart=True), True, rep)
        row(f"KaneProblem cart+{n}-pend.", ours, theirs, stages)
    for n in sizes:
        ours, theirs = kane_sides(lambda n=n: pendulum_parts(n + 1, cart=False), True, rep)
        row(f"KaneProblem {n + 1}-pendulum", ours, theirs, stages)
    ours, theirs = kane_sides(rolling_disc_parts, True, rep)
    row("KaneProblem rolling disc", ours, theirs, stages)
    ours, theirs = kane_sides(constrained_disc_parts, False, rep)
    row("KaneProblem disc, 3 constr.", ours, theirs, stages)
    if not args.no_bicycle:
        ours, theirs = kane_sides(bicycle_parts, not args.quick, 1)
        row("KaneProblem bicycle", ours, theirs, stages)
    for n in sizes:
        ours, theirs = lagrange_sides(n, True, rep)
        row(f"lagrange() cart+{n}-pend.", ours, theirs, stages[:2])
        ours, theirs = lagrange_sides(n + 1, False, rep)
        row(f"lagrange() {n + 1}-pendulum", ours, theirs, stages[:2])
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
