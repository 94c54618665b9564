"""Fixed-step integration, written once: the step schedule of a run and the classic RK4
step.

:func:`rk4_step` is the one RK4 step of kanedyn. :func:`kanedyn.simulate` runs it on
NumPy state vectors (dense engine), and on lists of floats in its compiled loop, where
NumPy calls would cost more than the arithmetic. :func:`kanedyn.simulate_ensemble`
runs it on (B, nx) arrays. The two combinations of the step (a stage's argument and the
update) are written once, as expressions that floats and arrays share
(:data:`ARRAYS`); :data:`FLOATS` spells each out once as a list comprehension.

>>> from kanedyn.dynamics.steppers import FLOATS, rk4_step
>>> rk4_step(lambda t, x: [x[0]], 0.0, [1.0], 0.1, FLOATS)  # ẋ = x: e^0.1 to O(h^5)
[1.1051708333333332]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs
import numpy as np

from kanedyn.errors import ModelError

__all__ = ["ARRAYS", "FLOATS", "Combinations", "Schedule", "rk4_step"]

X = TypeVar("X")


def _stage(x: Any, a: float, k: Any) -> Any:
    """The argument of a stage: ``x + a k``."""
    return x + a * k


def _update(x: Any, h6: float, k1: Any, k2: Any, k3: Any, k4: Any) -> Any:
    """The classic RK4 combination ``x + h/6 (k1 + 2 k2 + 2 k3 + k4)``, ``h6 = h/6``."""
    return x + h6 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


@attrs.frozen
class Combinations:
    """The combinations of an RK4 step on one type of state vector: ``stage(x, a, k)``
    and ``update(x, h6, k1, k2, k3, k4)``."""

    stage: Callable[..., Any]
    update: Callable[..., Any]


class _Term(str):
    """A scalar operand that spells out the arithmetic done on it (``+`` and ``*``)."""

    __slots__ = ()

    def __add__(self, other: object) -> _Term:
        return _Term(f"({self} + {other})")

    def __radd__(self, other: object) -> _Term:
        return _Term(f"({other} + {self})")

    def __mul__(self, other: object) -> _Term:  # type: ignore[override]
        return _Term(f"({self} * {other})")

    def __rmul__(self, other: object) -> _Term:  # type: ignore[override]
        return _Term(f"({other} * {self})")


def per_float(fn: Callable[..., Any]) -> Callable[..., list[float]]:
    """``fn(x, a, *ks)``, an expression of scalars, as a function of lists of floats
    ``x``, ``ks`` (``a`` stays a scalar): one list comprehension with the same arithmetic
    in the same order (a Python call per element would cost more than the arithmetic)."""
    x, a, *ks = inspect.signature(fn).parameters
    expression = fn(_Term(x), _Term(a), *map(_Term, ks))
    vectors = ", ".join((x, *ks))
    source = f"lambda {x}, {a}, {', '.join(ks)}: [{expression} for {vectors} in zip({vectors})]"
    return eval(source)  # type: ignore[no-any-return]


#: the step's combinations on NumPy arrays (any shape), and on lists of floats
ARRAYS = Combinations(_stage, _update)
FLOATS = Combinations(per_float(_stage), per_float(_update))


def rk4_step(
    f: Callable[[float, X], X],
    t: float,
    x: X,
    h: float,
    on: Combinations = ARRAYS,
    k1: X | None = None,
) -> X:
    """One step of the classic fourth-order Runge-Kutta method for ``ẋ = f(t, x)``:

    .. math::

        k_1 = f(t, x), \\quad k_2 = f(t + h/2, x + h/2 \\, k_1), \\quad
        k_3 = f(t + h/2, x + h/2 \\, k_2), \\quad k_4 = f(t + h, x + h \\, k_3),

        x(t + h) \\approx x + \\tfrac{h}{6} (k_1 + 2 k_2 + 2 k_3 + k_4)

    (Hairer, Nørsett and Wanner, *Solving Ordinary Differential Equations I*, Table 1.2).

    ``x`` and the values of ``f`` are NumPy arrays (``on=ARRAYS``) or lists of floats
    (``on=FLOATS``). ``k1``, when given, is ``f(t, x)`` already evaluated.
    """
    if k1 is None:
        k1 = f(t, x)
    k2 = f(t + 0.5 * h, on.stage(x, 0.5 * h, k1))
    k3 = f(t + 0.5 * h, on.stage(x, 0.5 * h, k2))
    k4 = f(t + h, on.stage(x, h, k3))
    return on.update(x, h / 6.0, k1, k2, k3, k4)  # type: ignore[no-any-return]


@attrs.frozen
class Schedule:
    """The steps of a fixed-step run from t = 0 to ``t_final``: ``n_steps`` steps of
    ``dt``, the last one shortened to end exactly at ``t_final``, with an output every
    ``stride`` steps and after the last."""

    t_final: float
    dt: float
    n_steps: int
    stride: int

    @classmethod
    def of(cls, t_final: float, dt: float, every: float) -> Schedule:
        """The schedule with outputs every ``every`` seconds, which must be a positive
        multiple of ``dt`` (a ModelError otherwise)."""
        ok = np.isfinite(every) and every > 0.0
        stride = max(1, int(round(every / dt))) if ok else 0
        if not ok or abs(stride * dt - every) > 1e-9 * max(every, 1.0):
            raise ModelError(f"output_every = {every} is not a positive multiple of dt = {dt}")
        return cls(t_final, dt, int(np.ceil(t_final / dt - 1e-9)), stride)

    def __iter__(self) -> Iterator[tuple[int, float, float, float, bool]]:
        """``(step, t, h, t_next, output)`` for steps 1 to ``n_steps``: the step from
        ``t`` to ``t_next`` of size ``h``, and whether ``t_next`` is an output time."""
        dt, t_final, n_steps, stride = self.dt, self.t_final, self.n_steps, self.stride
        t = 0.0
        for step in range(1, n_steps + 1):
            t_next = step * dt if step < n_steps else t_final
            yield step, t, min(dt, t_final - t), t_next, step % stride == 0 or step == n_steps
            t = t_next
