"""A run's outputs as they are computed: the record of output states, streaming CSV,
run status, strict JSON, and the output-size check.

:func:`kanedyn.simulate` appends every output state to a :class:`Recorder`. When the run
fails or is interrupted, what the recorder holds becomes the partial
:class:`~kanedyn.Trajectory` attached to the error (:class:`RunStopped`), so nothing
computed is lost. A :class:`CsvStream` writes the CSV rows while the run goes (every few
hundred steps), so a long run's trajectory is on disk even if the process is killed.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kane import (
    kinetic_energy,
    kinetic_energy_at,
    momentum,
    momentum_at,
    potential_energy,
    potential_energy_at,
)
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.errors import ModelError
from kanedyn.model import Model, State

__all__ = [
    "STATUSES",
    "CsvStream",
    "Recorder",
    "check_output_size",
    "column_names",
    "output_bytes",
    "run_bytes",
    "signals_deferred",
    "derived_histories",
    "seed_histories",
    "strict_json",
]

Array = NDArray[np.float64]

#: how a run ended, as ``summary.json`` reports it
STATUSES = ("completed", "diverged", "interrupted")

#: the states whose kinematics are computed at once for the derived histories (each
#: takes just over 200 floats a body while its block is computed)
BLOCK = 1024
#: floats a body per state of a block, with a margin (measured: just over 200 with the
#: positions relative to the spatial origin, ``Kinematics.r_rel`` and ``o_rel``)
BLOCK_FLOATS_PER_BODY = 288

#: the derived columns of the CSV after t, q and u, with their units
DERIVED_COLUMNS = (
    ("kinetic_energy", "J"),
    ("potential_energy", "J"),
    ("Px", "N s"),
    ("Py", "N s"),
    ("Pz", "N s"),
    ("Hx", "N m s"),
    ("Hy", "N m s"),
    ("Hz", "N m s"),
)


class Recorder:
    """The output states of a run, in order: ``ts``, ``xs`` (the integrated state
    ``[q | y]``) and ``locks`` (the locked speeds at each output).

    ``sink(ts, xs, locks)`` (optional) receives every output once, in blocks, when
    :meth:`drain` is called (by the run loops every few hundred steps, and at the end).
    ``steps`` is the number of steps taken so far, kept by the run loops, so a run that
    stops early reports how far it went.
    """

    def __init__(
        self, sink: Callable[[list[float], list[Any], list[Any]], None] | None = None
    ) -> None:
        self.ts: list[float] = []
        self.xs: list[Any] = []
        self.locks: list[Any] = []
        self.sink = sink
        self.sent = 0
        self.steps = 0  # the steps taken so far (set by the run loops)

    def add(self, t: float, x: Any, locked: Any) -> None:
        """Record the output state ``x`` at time ``t`` with its locked speeds."""
        self.ts.append(t)
        self.xs.append(x)
        self.locks.append(locked)

    def drain(self) -> None:
        """Send the outputs not sent yet to the sink, as one block."""
        n = min(len(self.ts), len(self.xs), len(self.locks))
        if self.sink is None or n == self.sent:
            return
        with signals_deferred():  # a block is sent whole, and counted once
            self.sink(self.ts[self.sent : n], self.xs[self.sent : n], self.locks[self.sent : n])
            self.sent = n


@contextlib.contextmanager
def signals_deferred(deliver: bool = True) -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM for the duration of the block, then deliver the first
    one that arrived to the handler in force before (in the main thread; elsewhere a
    no-op), so that an interrupt never lands halfway through writing outputs.

    The block receives the list of the signals that arrived; with ``deliver=False``
    they are only listed (for code that is already stopping because of a signal)."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in held}
    try:
        yield caught
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if caught and deliver:
            signal.raise_signal(caught[0])


def column_names(coordinates: list[str], speeds: list[str], units: dict[str, str]) -> list[str]:
    """The CSV header: ``t [s]``, each coordinate and speed as ``name [unit]``, then the
    energy and momentum columns. Names are quoted by the CSV writer when they hold a
    comma, a quote or a line break, so they cannot break the header."""
    return [
        "t [s]",
        *(f"{n} [{units[n]}]" for n in coordinates),
        *(f"{n} [{units[n]}]" for n in speeds),
        *(f"{n} [{u}]" for n, u in DERIVED_COLUMNS),
    ]


def derived_histories(model: Model, q: Array, u: Array) -> tuple[Array, Array, Array, Array]:
    """Kinetic and potential energy (k,), P (k, 3) [N s] and H (k, 3) [N m s, about the
    mass centre] at the states ``q`` (k, nq_total), ``u`` (k, n_total): the derived CSV
    columns. The kinematics of blocks of :data:`BLOCK` states are computed at once; with
    flexible bodies, state by state (:func:`kanedyn.kinetic_energy` and the others:
    elastic motion and strain energy included; NaN for a state that is not finite)."""
    if model.nf:
        return _flexible_histories(model, q, u)
    T, V, P, H = [np.zeros(0)], [np.zeros(0)], [np.zeros((0, 3))], [np.zeros((0, 3))]
    with np.errstate(all="ignore"):  # a diverged run's last states may overflow
        for a in range(0, len(q), BLOCK):
            qb, ub = q[a : a + BLOCK], u[a : a + BLOCK]
            kin = kinematics_at(model, qb, ub)
            Pb, Hb = momentum_at(model, kin)
            T.append(kinetic_energy_at(model, kin))
            V.append(potential_energy_at(model, qb, kin))
            P.append(Pb)
            H.append(Hb)
    return np.concatenate(T), np.concatenate(V), np.concatenate(P), np.concatenate(H)


def _flexible_histories(model: Model, q: Array, u: Array) -> tuple[Array, Array, Array, Array]:
    k = len(q)
    T, V, P, H = (
        np.full(k, np.nan),
        np.full(k, np.nan),
        np.full((k, 3), np.nan),
        np.full((k, 3), np.nan),
    )
    with np.errstate(all="ignore"):
        for i in range(k):
            if not (np.all(np.isfinite(q[i])) and np.all(np.isfinite(u[i]))):
                continue  # a diverged run's last states
            state = State(q[i], u[i])
            T[i], V[i] = kinetic_energy(model, state), potential_energy(model, state)
            P[i], H[i] = momentum(model, state)
    return T, V, P, H


class CsvStream:
    """Writes a trajectory's CSV block by block while the run goes.

    Each row is ``t, q, u`` and the derived columns (:func:`derived_histories`), written
    with 17 significant digits; the derived values are also kept (:attr:`derived`), so the
    caller need not compute them again. The file is flushed after every block.
    """

    def __init__(self, path: str | os.PathLike[str], model: Model, header: list[str]) -> None:
        self.model = model
        self.fh: IO[str] = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115
        self.writer = csv.writer(self.fh, lineterminator="\n")
        self.writer.writerow(header)
        self.blocks: list[tuple[Array, Array, Array, Array]] = []
        self.seconds = 0.0  # time spent here (computing and writing rows)
        self.rows = 0  # rows written so far

    def __call__(self, t: Array, q: Array, u: Array) -> None:
        start = time.perf_counter()
        T, V, P, H = derived = derived_histories(self.model, q, u)
        self.blocks.append(derived)
        rows = np.column_stack((t, q, u, T, V, P, H))
        self.writer.writerows([f"{v:.17g}" for v in row] for row in rows)
        self.fh.flush()
        self.rows += len(rows)
        self.seconds += time.perf_counter() - start

    @property
    def derived(self) -> tuple[Array, Array, Array, Array] | None:
        """T, V, P, H of every row written so far (None before the first block)."""
        if not self.blocks:
            return None
        T, V, P, H = (np.concatenate(xs) for xs in zip(*self.blocks, strict=True))
        return T, V, P, H

    def close(self) -> None:
        if not self.fh.closed:
            self.fh.close()


def seed_histories(traj: Any, derived: tuple[Array, Array, Array, Array] | None) -> None:
    """Give ``traj`` the energy and momentum histories a :class:`CsvStream` computed for
    the same outputs (so they are not computed twice); nothing when the counts differ."""
    if derived is None or len(derived[0]) != len(traj.t):
        return
    # Trajectory keeps them in a cached property, stored in the instance dictionary
    traj.__dict__["_derived"] = derived


def strict_json(data: Any) -> str:
    """``data`` as strict JSON: non-finite floats become ``null`` (JSON has no NaN)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(data), indent=2, allow_nan=False) + "\n"


def available_memory() -> float:
    """Bytes of memory available to a new allocation now: Linux's ``MemAvailable``
    (free memory plus reclaimable caches), else the free physical pages, else inf."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def output_bytes(model: Model, plot: bool = False) -> float:
    """Bytes a run holds per output state, counting every array that grows with the
    outputs (the run loops allocate nothing per step: their state vectors are reused).

    With ``nx = nq + n`` values in the integrated state (``nq_total + n_total`` with
    flexible bodies) and ``8`` bytes a float:

    * the recorder: a copy of the state (``8 nx`` and a 112-byte array header), the time
      as a Python float (24) and three list slots (24);
    * the native loop's output buffer (``8 nx``) and, under MSD, its speeds
      (``8 (nx + n)``);
    * the trajectory's arrays: the stacked states (``8 nx``), ``t``, ``q``, ``u`` and the
      momentum states (``8 (1 + nq + 2 n)``);
    * the energy and momentum histories (8 values), held three times: the CSV stream's
      blocks, their concatenation and the trajectory's copy;
    * with ``plot``: one body's histories (18 values: ``R_N_B``, ω, position, velocity)
      and matplotlib's copies of every line drawn (two coordinates, twice, for ~16 lines
      and one per joint coordinate).
    """
    nx, n, nq = model.nq_total + model.n_total, model.n_total, model.nq_total
    floats = nx + nx + (nx + n) + nx + (1 + nq + 2 * n) + 3 * len(DERIVED_COLUMNS)
    if plot:
        floats += 18 + 4 * (16 + nq)
    return 8.0 * floats + 112.0 + 24.0 + 24.0


def run_bytes(model: Model, n_outputs: int, plot: bool = False) -> float:
    """Bytes a run of ``n_outputs`` outputs holds at most: ``n_outputs`` ×
    :func:`output_bytes`, and the kinematics of one block of outputs (up to
    :data:`BLOCK` states of :data:`BLOCK_FLOATS_PER_BODY` floats a body) computed for
    the energy and momentum histories, with a quarter more for NumPy's temporaries. A
    run's peak allocation, measured with ``tracemalloc``, is at most this and at least
    half of it (``tests/test_diagnose.py``)."""
    block = min(n_outputs, BLOCK) * 8.0 * BLOCK_FLOATS_PER_BODY * model.nb
    return 1.25 * (n_outputs * output_bytes(model, plot) + block)


def check_output_size(
    model: Model,
    n_outputs: int,
    folder: str | os.PathLike[str] | None = None,
    *,
    plot: bool = False,
) -> None:
    """A ModelError before a run whose outputs would not fit in the available memory
    (:func:`run_bytes`) or, with ``folder``, on its disk (about 25
    bytes per CSV value and 8 per NPZ value), naming both numbers and the remedies."""
    columns = 1 + model.nq_total + model.n_total + len(DERIVED_COLUMNS)
    memory = run_bytes(model, n_outputs, plot)
    available = available_memory()
    if memory > available:
        raise ModelError(
            f"the run would keep {n_outputs:.4g} outputs of {columns} values in memory "
            f"(~{memory / 1e9:.3g} GB), more than the available memory "
            f"({available / 1e9:.3g} GB); output less often (output_every, "
            "--output-every), run a shorter time, or stream the outputs in parts "
            "(several runs, each from the last state of the one before)"
        )
    if folder is not None:
        disk = 33.0 * n_outputs * columns
        free = shutil.disk_usage(_existing(Path(folder))).free
        if disk > free:
            raise ModelError(
                f"the outputs would take ~{disk / 1e9:.3g} GB, more than the free disk space "
                f"in {folder} ({free / 1e9:.3g} GB); output less often (--output-every) or "
                "run a shorter time"
            )


def _existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path
