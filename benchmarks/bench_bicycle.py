"""Time the Whipple bicycle: derivation + linearization, kanedyn against sympy.

Both tools get the same model (Moore's formulation of Meijaard et al. 2007, as in
sympy's ``test_kane3.py::test_bicycle``): 4 bodies, one holonomic and three
nonholonomic constraints. Each derives the equations and linearizes about
upright rolling at a symbolic speed ``v`` with the Table-1 parameters; the
script checks that both give the same lean/steer state matrix, then prints the
wall-clock and CPU times and their ratio. kanedyn's derivation time includes
building the frames and bodies (``whipple_bicycle``); sympy's starts from them.

Usage::

    python benchmarks/bench_bicycle.py [--repeat N] [--skip-sympy-linearize]

sympy's linearization of this model takes minutes; ``--skip-sympy-linearize``
times only its derivation (``KanesMethod`` + ``kanes_equations``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import sympy as sm
from sympy.physics.mechanics import KanesMethod

from kanedyn.symbolic.examples import WhippleBicycle, whipple_bicycle
from kanedyn.symbolic.linearize import linearize


class Timer:
    """Wall-clock and CPU seconds of a ``with`` block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def run_kanedyn():
    """Build the model and derive (``whipple_bicycle``), then linearize."""
    with Timer() as derive:
        bike = whipple_bicycle()
    with Timer() as lin_t:
        lin = linearize(bike.problem, bike.op_point)
    rows = list(bike.lateral)  # roll, steer, roll rate, steer rate in [q1, q2, q5, u2, u3, u5]
    return bike, derive, lin_t, lin.A.extract(rows, rows)


def run_sympy(bike: WhippleBicycle, linearize_too: bool):
    """Derive with ``KanesMethod`` from the same frames, bodies and constraints."""
    model, s, V = bike.kane_args, bike.symbols, bike.speed
    with Timer() as derive:
        km = KanesMethod(
            model["frame"],
            q_ind=model["q_ind"],
            u_ind=model["u_ind"],
            kd_eqs=model["kd_eqs"],
            q_dependent=model["q_dep"],
            configuration_constraints=model["configuration_constraints"],
            u_dependent=model["u_dep"],
            velocity_constraints=model["velocity_constraints"],
            constraint_solver="CRAMER",
        )
        km.kanes_equations(model["bodies"], model["loads"])
    if not linearize_too:
        return derive, None, None
    op, par = bike.op_point, bike.parameters
    state = {k: v for k, v in op.items() if k not in par}
    # sympy needs every speed, its rate and the dependent speeds in the point.
    state.update({s["u1"]: 0, s["u4"]: 0, s["u6"]: V / bike.benchmark.r_F})
    state.update({x.diff(): 0 for x in km.u})
    with Timer() as lin_t:
        A, _, _ = km.linearize(A_and_B=True, op_point=state, linear_solver="CRAMER")
        A = A.xreplace(par).evalf()
    rows = list(bike.lateral)
    return derive, lin_t, A.extract(rows, rows)


def _row(name: str, t: Timer | None) -> str:
    if t is None:
        return f"  {name:<28} {'skipped':>10}"
    return f"  {name:<28} {t.wall:10.2f} {t.cpu:10.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="kanedyn repetitions (best kept)")
    parser.add_argument("--skip-sympy-linearize", action="store_true")
    args = parser.parse_args()

    runs = [run_kanedyn() for _ in range(args.repeat)]
    bike, kd_derive, kd_lin, A_kd = min(runs, key=lambda r: r[1].wall + r[2].wall)
    sp_derive, sp_lin, A_sp = run_sympy(bike, not args.skip_sympy_linearize)

    print("Whipple bicycle: derivation + linearization about upright rolling (seconds)")
    print(f"  {'':<28} {'wall':>10} {'cpu':>10}")
    print(_row("kanedyn derivation", kd_derive))
    print(_row("kanedyn linearization", kd_lin))
    print(_row("sympy KanesMethod derivation", sp_derive))
    print(_row("sympy linearize", sp_lin))
    kd_total = kd_derive.wall + kd_lin.wall
    print(f"  kanedyn total: {kd_total:.2f} s")
    if sp_lin is not None:
        sp_total = sp_derive.wall + sp_lin.wall
        print(f"  sympy total:   {sp_total:.2f} s")
        cpu_ratio = (sp_derive.cpu + sp_lin.cpu) / (kd_derive.cpu + kd_lin.cpu)
        print(
            "  ratio sympy / kanedyn (derivation + linearization): "
            f"{sp_total / kd_total:.1f} wall, {cpu_ratio:.1f} cpu"
        )
        V = bike.speed
        f_kd = sm.lambdify(V, A_kd, modules="numpy")
        f_sp = sm.lambdify(V, A_sp, modules="numpy")
        diff = max(
            np.abs(np.asarray(f_kd(v), float) - np.asarray(f_sp(v), float)).max() for v in range(11)
        )
        print(f"  max |A_kanedyn - A_sympy| over v = 0..10: {diff:.2e}")
    print(f"  ratio sympy / kanedyn (derivation only): {sp_derive.wall / kd_derive.wall:.1f}")


if __name__ == "__main__":
    main()
