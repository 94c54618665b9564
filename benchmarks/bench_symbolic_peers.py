"""kanedyn's symbolic engines against sympy.physics.mechanics, stage by stage, same run.

Problems (each built the same way for both sides, from sympy frames and points):

* ``KaneProblem`` against ``KanesMethod``: the n-link pendulum on a cart (n = 1, 3, 5),
  Kane's rolling disc (three speeds, the contact point at rest) and, with
  ``--bicycle``, the Whipple bicycle;
* ``lagrange()`` (a kanedyn model) against ``LagrangesMethod`` (the Lagrangian of the
  same system in sympy): the pendulum on a cart and the n-pendulum.

Stages, timed separately (CPU seconds of this process):

* **build**: from the description to ``M`` and ``forcing`` (``KaneProblem(...)`` and
  reading ``.mass_matrix``/``.forcing``; ``KanesMethod(...).kanes_equations``;
  ``lagrange(model)``; ``LagrangesMethod(...).form_lagranges_equations``);
* **solve**: ``M.LUsolve(forcing)`` on each side's own ``M``, ``forcing`` (the same
  sympy operation, so it measures how large the expressions are);
* **linearize**: ``kd.symbolic.linearize(problem, op)`` against
  ``KanesMethod.linearize(op_point=..., A_and_B=True)``, about the hanging equilibrium.

Ratios are kanedyn / sympy (below 1: kanedyn is faster). The targets of issue 20 are
``KaneProblem`` ≤ 0.5× ``KanesMethod`` and ``lagrange()`` ≤ 0.5× ``LagrangesMethod``.
Run: ``python -m benchmarks.bench_symbolic_peers [--quick] [--bicycle]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sm
from sympy.physics import mechanics as me

import kanedyn as kd
from kanedyn.symbolic import KaneProblem, lagrange, linearize


def cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
    c0 = time.process_time()
    out = fn()
    return out, time.process_time() - c0


# --------------------------------------------------------------------------- problems
def cart_pendulum_parts(n: int) -> dict:
    """An n-link pendulum on a cart in sympy vectors (cart along N.x, links in x-y)."""
    q = me.dynamicsymbols(f"q:{n + 1}")
    u = me.dynamicsymbols(f"u:{n + 1}")
    m = sm.symbols(f"m:{n + 1}", positive=True)
    l = sm.symbols(f"l:{n}", positive=True)
    g = sm.Symbol("g", positive=True)
    F = me.dynamicsymbols("F")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    cart = O.locatenew("C", q[0] * N.x)
    cart.set_vel(N, u[0] * N.x)
    particles = [me.Particle("cart", cart, m[0])]
    loads = [(cart, F * N.x - m[0] * g * N.y)]
    kd_eqs = [q[0].diff() - u[0]]
    prev = cart
    for i in range(n):
        A = N.orientnew(f"A{i}", "Axis", (q[i + 1], N.z))
        A.set_ang_vel(N, u[i + 1] * N.z)
        P = prev.locatenew(f"P{i}", -l[i] * A.y)
        P.v2pt_theory(prev, N, A)
        particles.append(me.Particle(f"p{i}", P, m[i + 1]))
        loads.append((P, -m[i + 1] * g * N.y))
        kd_eqs.append(q[i + 1].diff() - u[i + 1])
        prev = P
    return {"N": N, "q": q, "u": u, "kd": kd_eqs, "bodies": particles, "loads": loads,
            "op": {**dict.fromkeys(q, 0), **dict.fromkeys(u, 0)}, "F": F}  # fmt: skip


def rolling_disc_parts() -> dict:
    disc = kd.symbolic.rolling_disc("minimal")
    a = disc.kane_args
    q_ind, u_ind = list(a["q_ind"]), list(a["u_ind"])
    op = {**dict.fromkeys(q_ind, 0), **dict.fromkeys(u_ind, 0)}
    op[u_ind[1]] = 5  # upright rolling at spin rate 5
    return {"N": a["frame"], "q": q_ind, "u": u_ind, "kd": list(a["kd_eqs"]),
            "bodies": list(a["bodies"]), "loads": list(a["loads"]), "op": op, "F": None}  # fmt: skip


def kane_sides(parts: dict, linearize_too: bool) -> tuple[list[float], list[float]]:
    """[build, solve, linearize] CPU seconds of KaneProblem and of KanesMethod."""
    kp, t_build = cpu(
        lambda: KaneProblem(
            parts["N"],
            parts["q"],
            parts["u"],
            parts["kd"],
            bodies=parts["bodies"],
            loads=parts["loads"],
        )  # fmt: skip
    )
    (M, f), t_mf = cpu(lambda: (kp.mass_matrix, kp.forcing))
    _, t_solve = cpu(lambda: M.LUsolve(f))
    inputs = [parts["F"]] if parts["F"] is not None else None
    t_lin = cpu(lambda: linearize(kp, parts["op"], inputs=inputs))[1] if linearize_too else np.nan
    ours = [t_build + t_mf, t_solve, t_lin]

    def sympy_build():
        km = me.KanesMethod(parts["N"], parts["q"], parts["u"], kd_eqs=parts["kd"])
        km.kanes_equations(parts["bodies"], parts["loads"])
        return km

    km, s_build = cpu(sympy_build)
    _, s_solve = cpu(lambda: km.mass_matrix.LUsolve(km.forcing))
    s_lin = np.nan
    if linearize_too:
        s_lin = cpu(lambda: km.linearize(op_point=parts["op"], A_and_B=True))[1]
    return ours, [s_build, s_solve, s_lin]


def lagrange_sides(n: int, cart: bool) -> tuple[list[float], list[float]]:
    """[build, solve] CPU seconds of kd.symbolic.lagrange and of LagrangesMethod for the
    n-pendulum (on a cart when ``cart``), particles on massless rods in the plane."""
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
    lag, t_build = cpu(lambda: lagrange(model))
    _, t_solve = cpu(lambda: lag.mass_matrix.LUsolve(lag.forcing))

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

    lm, s_build = cpu(sympy_build)
    _, s_solve = cpu(lambda: lm.mass_matrix.LUsolve(lm.forcing))
    return [t_build, t_solve], [s_build, s_solve]


# --------------------------------------------------------------------------- report
def _fmt(x: float) -> str:
    return f"{x:8.2f}" if np.isfinite(x) else "     n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the smallest sizes only")
    ap.add_argument("--bicycle", action="store_true", help="also the Whipple bicycle")
    args = ap.parse_args()
    sizes = [1, 3] if args.quick else [1, 3, 5]
    head = f"{'problem':<28}{'stage':<11}{'kanedyn s':>10}{'sympy s':>10}{'ratio':>8}"
    print(head)
    print("-" * len(head))

    def row(name: str, ours: list[float], theirs: list[float], stages: tuple[str, ...]):
        for st, a, b in zip(stages, ours, theirs, strict=False):
            ratio = a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else np.nan
            print(f"{name:<28}{st:<11}{_fmt(a)}  {_fmt(b)}{ratio:8.2f}")
            name = ""

    stages = ("build", "solve", "linearize")
    for n in sizes:
        ours, theirs = kane_sides(cart_pendulum_parts(n), linearize_too=n <= 3)
        row(f"KaneProblem cart+{n}-pend.", ours, theirs, stages)
    ours, theirs = kane_sides(rolling_disc_parts(), linearize_too=True)
    row("KaneProblem rolling disc", ours, theirs, stages)
    if args.bicycle:
        bike = kd.symbolic.whipple_bicycle()
        a = bike.kane_args
        parts = {"N": a["frame"], "q": list(a["q_ind"]), "u": list(a["u_ind"]),
                 "kd": list(a["kd_eqs"]), "bodies": list(a["bodies"]),
                 "loads": list(a["loads"]), "op": {}, "F": None}  # fmt: skip
        print("(bicycle: only the unconstrained build is comparable; see bench_bicycle.py)")
        ours, theirs = kane_sides(parts, linearize_too=False)
        row("KaneProblem bicycle", ours, theirs, stages)
    for n in sizes:
        ours, theirs = lagrange_sides(n, cart=True)
        row(f"lagrange() cart+{n}-pend.", ours, theirs, stages[:2])
        ours, theirs = lagrange_sides(n + 1, cart=False)
        row(f"lagrange() {n + 1}-pendulum", ours, theirs, stages[:2])


if __name__ == "__main__":
    main()
