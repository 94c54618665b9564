"""Watching a run: each accepted state checked (:class:`Monitor`: finite, no 3-DOF gimbal
at or through lock; the error of a failed step names the time, the quantity and the
cause) and the progress bar (:class:`Progress`)."""

from __future__ import annotations

import sys
import time as _time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import SimulationError
from kanedyn.model import Model
from kanedyn.model.names import coordinate_names, speed_names
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.system import System
from kanedyn.spatial import rotation as rot

__all__ = ["Monitor", "Progress", "state_names"]

Array = NDArray[np.float64]


def state_names(model: Model, formulation: Formulation) -> list[str]:
    """Names of the integrated state ``[q | y]``: the coordinates, then the speeds
    (Kane) or ``"<speed> momentum"`` (MSD)."""
    speeds = speed_names(model)
    if formulation is Formulation.MSD:
        speeds = [f"{name} momentum" for name in speeds]
    return [*coordinate_names(model), *speeds]


class Monitor:
    """Checks each accepted state: finite, and no 3-DOF gimbal at or through lock.

    ``det Γ`` of a 3-DOF gimbal vanishes at its singular middle angle (cos θ2 = 0, or
    sin θ2 = 0 for symmetric sequences). A state within ``|det Γ| < tol`` of it, or a
    sign change of ``det Γ`` between two accepted states (the angle stepped through
    it), is gimbal lock. When a step fails (non-finite values, a singular mass matrix)
    next to a nearly singular gimbal, the error names that gimbal too; otherwise it is a
    divergence (``diverged = True`` on the error), and names the first non-finite
    quantity of the state, or the largest one of the last good state.
    """

    tol = 1e-4
    near = 0.2  # |det Γ| of the last good state below which a failure is blamed on lock

    def __init__(self, system: System, x0: Array):
        self.model = system.model
        self.names = state_names(system.model, system.formulation)
        self.det = self._dets(x0)
        self.x = x0

    def _dets(self, x: Array) -> Array:
        lay = self.model.layout
        if not lay.gimbal3.size:
            return np.zeros(0)
        theta = np.append(x[: self.model.nq], 0.0)[lay.gimbal_q[lay.gimbal3]]
        return np.linalg.det(rot.euler_gamma_axes(lay.gimbal_axes[lay.gimbal3], theta))

    def _lock(self, t: float, row: int, x: Array, how: str) -> SimulationError:
        lay = self.model.layout
        j = self.model.joints[lay.gimbal[lay.gimbal3[row]]]
        theta = np.append(x[: self.model.nq], 0.0)[lay.gimbal_q[lay.gimbal3[row]]]
        return SimulationError(
            f"t = {t:.6g}: joint {j.name!r} (3-DOF gimbal, sequence {j.rot_seq}) {how} its "
            f"singular angle (gimbal lock, angles {np.round(theta, 6).tolist()} rad); "
            "model it as a spherical joint"
        )

    def check(self, t: float, x: Array) -> None:
        x = np.asarray(x, dtype=float)
        bad_values = ~np.isfinite(x)
        if np.any(bad_values):
            i = int(np.argmax(bad_values))
            raise self.failure(t, f"the state became non-finite (first: {self.names[i]} = {x[i]})")
        det = self._dets(x)
        if det.size:
            bad = np.nonzero((np.abs(det) < self.tol) | (np.sign(det) != np.sign(self.det)))[0]
            if bad.size:
                raise self._lock(t, int(bad[0]), x, "reached or passed")
        self.det, self.x = det, x

    def failure(self, t: float, reason: str) -> SimulationError:
        """The error for a step that failed at ``t``, blaming a nearly locked gimbal."""
        if self.det.size:
            row = int(np.argmin(np.abs(self.det)))
            if abs(self.det[row]) < self.near:
                return self._lock(t, row, self.x, "approached")
        if "non-finite" not in reason and self.x.size:
            i = int(np.argmax(np.abs(self.x)))
            reason += (
                f"; the largest value of the last good state was {self.names[i]} = {self.x[i]:.3g}"
            )
        error = SimulationError(f"t = {t:.6g}: {reason}")
        error.diverged = True  # type: ignore[attr-defined]
        return error


class Progress:
    """A progress bar on stderr (tqdm when installed), updated with the number of steps
    done (or, for adaptive methods, thousandths of ``t_final``); each update also calls
    ``tick`` (the streaming of outputs). It draws each state once and ends once."""

    def __init__(self, total: int, enabled: bool, unit: str = "step", tick: Any = None) -> None:
        self.total, self.enabled, self.bar, self.unit = total, enabled, None, unit
        self.last, self.done, self.tick, self.closed = 0.0, -1, tick, False
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit=unit, file=sys.stderr, leave=False)
            except ImportError:
                self.bar = None

    def update(self, done: int) -> None:
        if self.tick is not None:
            self.tick()
        if not self.enabled or done == self.done:
            return
        self.done = done
        if self.bar is not None:
            self.bar.n = done
            self.bar.refresh()
            return
        now = _time.perf_counter()
        if now - self.last > 0.5 or done == self.total:
            self.last = now
            frac = done / max(self.total, 1)
            bar = "#" * int(30 * frac)
            count = f"  {self.unit} {done}/{self.total}" if self.unit else ""
            print(f"\r[{bar:<30}] {100 * frac:5.1f}%{count}", end="", file=sys.stderr)

    def close(self) -> None:
        if self.enabled and not self.closed:
            self.closed = True
            if self.bar is not None:
                self.bar.close()
            else:
                print(file=sys.stderr)
