"""The result of a simulation: :class:`Trajectory` (time histories of ``q`` and ``u``,
energies and momenta computed on first use, CSV and NPZ output) and
:class:`BodyHistory`.

It sits below :mod:`kanedyn.simulation.integrate` and
:mod:`kanedyn.simulation.conserving`, which both return trajectories. The plotting
and animation hooks (:meth:`Trajectory.plot`, :meth:`Trajectory.animate`) import their
layers when called, so a numeric run never loads them.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.dynamics import loops as loops_
from kanedyn.dynamics.kinematics import kinematics, kinematics_at
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.names import coordinate_names, coordinate_units, speed_names, speed_units
from kanedyn.model.options import Formulation
from kanedyn.model.orbit import LvlhAttitude, Orbit, lvlh
from kanedyn.model.plan import node_joints
from kanedyn.simulation import limits as limits_
from kanedyn.simulation import output as _output

__all__ = ["BodyHistory", "NodeHistory", "Trajectory", "csv_header"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class BodyHistory:
    """One body's time histories: ``omega`` (nt, 3) in its own axes, ``R_N_B`` (nt, 3, 3),
    ``position`` (nt, 3) and ``velocity`` (nt, 3) of its mass centre in N."""

    omega: Array
    R_N_B: Array
    position: Array
    velocity: Array


@attrs.frozen(eq=False)
class NodeHistory:
    """A flexible body's node at each output (:meth:`Trajectory.node`; N components):
    ``position``, ``velocity``, ``omega``, ``displacement`` (the elastic part
    ``RΨη``), ``rotation`` (``RΘη``), each (nt, 3), and ``R_N_node`` (nt, 3, 3) (the
    fields of :class:`kanedyn.dynamics.flex.NodeMotion`)."""

    position: Array
    velocity: Array
    R_N_node: Array
    omega: Array
    displacement: Array
    rotation: Array


@attrs.frozen(eq=False, slots=False)
class Trajectory:
    """The result of :func:`simulate`: ``t`` (nt,), ``q`` (nt, nq), ``u`` (nt, n) (with
    flexible bodies ``q = [q_joints | η]`` (nt, nq + nf) and ``u = [u | s | ξ]``
    (nt, n + nf): :meth:`modal` and :meth:`node` read them); for an
    MSD run, ``momenta`` (nt, n; n + nf with flexible bodies) holds the integrated
    momentum states themselves (:func:`kanedyn.dynamics.msd.momenta` layout; ``None``
    for Kane runs).

    For a model with loops: ``loop_drift`` is the largest constraint residual
    ``max(|Φ|, |A u|)`` the integrator produced before a projection (over every step;
    None when the native RK4 step projects),
    ``loop_residual`` (nt, 2) the residuals ``max |Φ|``, ``max |A u|`` of the stored
    states, ``repartitions`` how often the dependent speeds were chosen again.

    Derived histories are computed on first use: ``kinetic_energy``,
    ``potential_energy``, ``total_energy``, ``linear_momentum`` (nt, 3, N),
    ``angular_momentum`` (nt, 3, about the system mass centre, N), ``body(name)``;
    in orbit, ``lvlh_attitude(orbit)`` (a body's attitude relative to LVLH).

    ``engine`` says what evaluated the right-hand side: ``"native"`` (machine code,
    :mod:`kanedyn.compiled.native`), ``"tcc"`` (C compiled by libtcc,
    :mod:`kanedyn.compiled.tcc`) or ``"python"`` (generated Python), each but native
    with the reason native code was not used, or ``"dense"``.

    ``limits`` is what the run did with the joint limits (``"warn"``, ``"stop"`` or
    ``"ignore"``); ``limit_crossings`` the first crossing of each joint's bound
    (:class:`~kanedyn.simulation.limits.LimitCrossing`, in time order; under ``"stop"``
    the first time each stop held its joint).
    """

    model: Model
    t: Array
    q: Array
    u: Array
    formulation: str
    method: str
    wall_time: float
    steps: int
    events: tuple[Any, ...] = ()
    momenta: Array | None = None
    status: str = "completed"
    engine: str = ""  # what evaluated the right-hand side (see simulate)
    loop_drift: float | None = None
    repartitions: int = 0
    limits: str = "ignore"
    limit_crossings: tuple[limits_.LimitCrossing, ...] = ()

    def state(self, i: int) -> State:
        return State(self.q[i], self.u[i])

    @classmethod
    def initial(
        cls,
        model: Model,
        state: State,
        *,
        formulation: str = "kane",
        method: str = "rk4",
        status: str = "interrupted",
        wall_time: float = 0.0,
    ) -> Trajectory:
        """The trajectory of a run stopped before its first step: the initial state at
        t = 0 alone (with its momentum states under MSD)."""
        from kanedyn.dynamics import msd

        momenta = None
        if Formulation.parse(formulation) is Formulation.MSD:
            momenta = msd.momenta(model, state)[None, :].copy()
        return cls(
            model=model, t=np.zeros(1), q=np.array(state.q, dtype=float)[None, :],
            u=np.array(state.u, dtype=float)[None, :], formulation=formulation,
            method=method, wall_time=wall_time, steps=0, momenta=momenta, status=status,
        )  # fmt: skip

    def __str__(self) -> str:
        """A short summary: samples, time span, status, formulation, method and engine,
        the model's size (the full record, with every array, is ``repr(traj)``)."""
        nt = len(self.t)
        span = f"t = {self.t[0]:g} .. {self.t[-1]:g} s" if nt else "no samples"
        lines = [
            f"Trajectory: {nt} samples, {span}, {self.steps} steps, status {self.status!r}",
            f"  {self.formulation}, {self.method}"
            + (f", engine {self.engine}" if self.engine else "")
            + f", {self.wall_time:.3g} s wall time",
            f"  model: {self.model.nb} bodies, {self.model.n} DOF",
        ]
        if self.events:
            lines.append(f"  events: {len(self.events)}")
        if self.loop_drift is not None:
            lines.append(f"  loop drift: {self.loop_drift:.3g}")
        return "\n".join(lines)

    @cached_property
    def _derived(self) -> tuple[Array, Array, Array, Array]:
        """Kinetic and potential energy, P and H at every output, from the kinematics of
        blocks of outputs at once (:func:`kanedyn.dynamics.kinematics.kinematics_at` is
        batched)."""
        return _output.derived_histories(self.model, self.q, self.u)

    @cached_property
    def loop_residual(self) -> Array:
        """``max |Φ(q)|`` and ``max |A(q) u|`` at each output, (nt, 2) (zeros without
        loops)."""
        return np.array(
            [loops_.residuals(self.model, q, u) for q, u in zip(self.q, self.u, strict=True)]
        ).reshape(len(self.t), 2)

    @property
    def kinetic_energy(self) -> Array:
        """Kinetic energy at each output time, (nt,) [J]."""
        return self._derived[0]

    @property
    def potential_energy(self) -> Array:
        """Gravity and spring potential energy at each output time, (nt,) [J]."""
        return self._derived[1]

    @property
    def total_energy(self) -> Array:
        """Kinetic plus potential energy, (nt,) [J]."""
        return self.kinetic_energy + self.potential_energy

    @property
    def linear_momentum(self) -> Array:
        """Total linear momentum in N, (nt, 3) [N s]."""
        return self._derived[2]

    @property
    def angular_momentum(self) -> Array:
        """Total angular momentum about the system mass centre, N axes, (nt, 3) [N m s]."""
        return self._derived[3]

    def angular_momentum_about(self, point: ArrayLike | None = None) -> Array:
        """Total angular momentum about ``point`` (N components; default the model's
        ``CentralGravity.center``, or N's origin in uniform gravity), N axes, (nt, 3)
        [N m s]: ``H_o = H_c + (c - o) × P`` with ``H_c`` :attr:`angular_momentum`
        (about the system mass centre ``c``) and ``P`` :attr:`linear_momentum`.

        In a central field this, about the centre, is the conserved angular momentum
        (the field's forces and gravity-gradient torques have no moment about the
        centre in total); :attr:`angular_momentum` is not: the gravity-gradient torque
        changes it."""
        if point is None:
            field = self.model.central_gravity
            point = (0.0, 0.0, 0.0) if field is None else field.center
        o = np.asarray(point, dtype=float)
        if o.shape != (3,) or not np.all(np.isfinite(o)):
            raise ModelError(
                f"angular_momentum_about: point must be 3 finite numbers, got {point!r}"
            )
        c = self._system_centre[0]
        return self.angular_momentum + np.cross(c - o, self.linear_momentum)

    @cached_property
    def _bodies(self) -> dict[str, BodyHistory]:
        return {}

    def _joints(self, rows: slice) -> tuple[Array, Array]:
        """The joints' coordinates and speeds of the outputs ``rows`` (the modal ones
        left out)."""
        return self.q[rows, : self.model.nq], self.u[rows, : self.model.n]

    def modal(self, body: str) -> tuple[Array, Array]:
        """A flexible body's modal coordinates ``η`` and speeds ``ξ`` at each output,
        (nt, modes) each (the columns ``body.y1``, ..., ``body.y1_dot``, ...)."""
        idx = self.model.modal(body)
        return self.q[:, self.model.nq + idx], self.u[:, self.model.n + idx]

    def node(self, body: str, node: str) -> NodeHistory:
        """The motion of ``node`` of the flexible ``body`` at each output
        (:func:`kanedyn.dynamics.flex.node_motion`, stacked: :class:`NodeHistory`)."""
        from kanedyn.dynamics.flex import node_motion

        self.model.modal(body)  # a ModelError for a rigid body, before any work
        rows = [node_motion(self.model, self.state(i), body, node) for i in range(len(self.t))]
        fields = [f.name for f in attrs.fields(NodeHistory)]
        return NodeHistory(**{f: np.array([getattr(r, f) for r in rows]) for f in fields})

    def body(self, name: str) -> BodyHistory:
        """One body's histories (computed once per body); of the body frame (the
        undeformed body) of a flexible body."""
        if name in self._bodies:
            return self._bodies[name]
        i = self.model.body_index(name)
        parts = []  # the kinematics of blocks of outputs at once (kinematics_at is batched)
        block = _output.BLOCK
        for a in range(0, len(self.t), block):
            kin = self._kinematics(slice(a, a + block))
            parts.append((kin.R_N_B[:, i], kin.omega[:, i], kin.r[:, i], kin.v[:, i]))
        R, w_N, r, v = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
        hist = BodyHistory(omega=np.einsum("tji,tj->ti", R, w_N), R_N_B=R, position=r, velocity=v)
        self._bodies[name] = hist
        return hist

    def lvlh_attitude(
        self, orbit: Orbit | None = None, body: str | None = None, seq: str = "123"
    ) -> LvlhAttitude:
        """The attitude of ``body`` (default: the first body with a root joint)
        relative to LVLH at each output: ``R_L_B = R_L_N R_N_B``
        (:class:`~kanedyn.model.orbit.LvlhAttitude`: Euler angles of ``seq``, roll,
        pitch, yaw and the angle from LVLH).

        With an ``orbit``, L is the reference orbit's LVLH at each time
        (``orbit.lvlh(t)``); without, it is the osculating LVLH of the system's mass
        centre (:func:`kanedyn.model.orbit.lvlh` of its position relative to the
        model's ``CentralGravity.center`` and its velocity). The conventions are in
        :mod:`kanedyn.model.orbit`.
        """
        if body is None:
            body = next(b.name for b, j in zip(self.model.bodies, self.model.joints,
                                               strict=True) if j.is_root)  # fmt: skip
        R_N_B = self.body(body).R_N_B
        if orbit is not None:
            R_L_N = orbit.lvlh(self.t)
        else:
            field = self.model.central_gravity
            center = np.zeros(3) if field is None else np.asarray(field.center, dtype=float)
            r, v = self._system_centre
            R_L_N = lvlh(r - center, v)
        return LvlhAttitude(t=self.t, R_L_B=R_L_N @ R_N_B, seq=seq)

    def _kinematics(self, rows: slice) -> Any:
        """The kinematics of the outputs ``rows`` (batched); with joints at nodes of
        flexible bodies (``Joint.inner_node``), output by output with the modal state,
        the arrays stacked."""
        if not node_joints(self.model):
            return kinematics_at(self.model, *self._joints(rows))
        kins = [kinematics(self.model, self.state(i)) for i in range(len(self.t))[rows]]
        names = ("R_N_B", "omega", "r", "v")
        return SimpleNamespace(**{f: np.array([getattr(k, f) for k in kins]) for f in names})

    @cached_property
    def _system_centre(self) -> tuple[Array, Array]:
        """Position and velocity of the system mass centre in N, (nt, 3) each."""
        m = np.array([float(b.mass) for b in self.model.bodies])
        parts = []
        for a in range(0, len(self.t), _output.BLOCK):
            kin = self._kinematics(slice(a, a + _output.BLOCK))
            parts.append((m @ kin.r / m.sum(), m @ kin.v / m.sum()))
        r, v = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
        return r, v

    def column_names(self) -> list[str]:
        return ["t", *coordinate_names(self.model), *speed_names(self.model)]

    def csv_header(self) -> list[str]:
        """The CSV column names with units, ``name [unit]``
        (:func:`kanedyn.simulation.output.column_names`)."""
        return csv_header(self.model)

    def to_csv(self, path: str | Path) -> None:
        """Write t, q, u and the energy and momentum histories as CSV with a header of
        ``name [unit]`` columns (names holding a comma, quote or line break are quoted)."""
        import csv

        data = np.column_stack(
            (
                self.t,
                self.q,
                self.u,
                self.kinetic_energy,
                self.potential_energy,
                self.linear_momentum,
                self.angular_momentum,
            )
        )
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(self.csv_header())
            writer.writerows([f"{v:.17g}" for v in row] for row in data)

    def to_npz(self, path: str | Path) -> None:
        """Write every history (and the coordinate and speed names) to a NumPy .npz file."""
        np.savez(
            path,
            t=self.t,
            q=self.q,
            u=self.u,
            kinetic_energy=self.kinetic_energy,
            potential_energy=self.potential_energy,
            linear_momentum=self.linear_momentum,
            angular_momentum=self.angular_momentum,
            coordinate_names=np.array(coordinate_names(self.model)),
            speed_names=np.array(speed_names(self.model)),
        )

    def plot(self, path: str | Path | None = None, body: str | None = None) -> Any:
        """Energy, momentum drift and one body's rates against time (needs matplotlib)."""
        from kanedyn.plotting import plot_trajectory

        return plot_trajectory(self, path=path, body=body)

    def animate(self, path: str | Path | None = None, **options: Any) -> Any:
        """3D animation in the browser: one self-contained HTML page, written to ``path``
        (``run.html#t=SECONDS`` opens it paused at a time). Needs the ``animate`` extra
        (meshcat). Options and return value: :func:`kanedyn.animation.animate`."""
        from kanedyn.animation import animate

        return animate(self, path, **options)


def csv_header(model: Model) -> list[str]:
    """The CSV header of ``model``'s trajectories: ``t [s]``, the coordinates (``[1]`` for
    quaternion components, ``[rad]``, ``[m]``), the speeds (``[rad/s]``, ``[m/s]``),
    then the energies ``[J]`` and momenta ``[N s]``, ``[N m s]``."""
    qn, un = coordinate_names(model), speed_names(model)
    units = dict(zip(qn, coordinate_units(model), strict=True))
    units.update(zip(un, speed_units(model), strict=True))
    return _output.column_names(coordinate_names(model), speed_names(model), units)
