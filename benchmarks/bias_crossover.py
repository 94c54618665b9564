"""Where the dense engine's two evaluations of the bias forces meet.

:attr:`kanedyn.dynamics.kane.KaneTerms.bias` evaluates the one definition,
:func:`kanedyn.spatial.plucker.bias_force`, either as its table of terms (a few NumPy
calls over 78 products per body) or with one array per component as its scalars (about
100 NumPy calls over 6 times fewer products). The first wins for few bodies, the second
for many; ``kane.BIAS_TABLE_BODIES`` is the switch. This prints the least time per call of
each, for random inertias and velocities of 1 to 10⁴ bodies::

    python -m benchmarks.bias_crossover
"""

from __future__ import annotations

import timeit

import numpy as np

from kanedyn.dynamics.kane import bias_by_scalars as scalars
from kanedyn.dynamics.kane import bias_by_table as table


def least(fn, *args, repeat: int = 7) -> float:  # type: ignore[no-untyped-def]
    """The least time per call over ``repeat`` rounds of about 20 ms each."""
    fn(*args)
    n = max(1, int(0.02 / max(timeit.timeit(lambda: fn(*args), number=1), 1e-7)))
    return min(timeit.repeat(lambda: fn(*args), number=n, repeat=repeat)) / n


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'bodies':>7} {'table us':>10} {'scalars us':>11} {'table/scalars':>14}")
    for nb in (1, 5, 10, 20, 50, 100, 200, 500, 1000, 10_000):
        A = rng.normal(size=(nb, 6, 6))
        I_O, V = A @ A.swapaxes(-1, -2), rng.normal(size=(nb, 6))
        err = np.max(np.abs(table(I_O, V) - scalars(I_O, V)))
        if err > 1e-12 * max(1.0, float(np.max(np.abs(table(I_O, V))))):
            raise SystemExit(f"{nb} bodies: the two evaluations differ by {err:.3g}")
        t, s = least(table, I_O, V), least(scalars, I_O, V)
        print(f"{nb:>7} {1e6 * t:>10.1f} {1e6 * s:>11.1f} {t / s:>14.2f}")


if __name__ == "__main__":
    main()
