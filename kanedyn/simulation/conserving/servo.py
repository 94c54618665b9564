"""Servo constraints: inverse dynamics with the energy-momentum step.

A servo constraint prescribes an output of the system as a function of time,
``y(x_{n+1}) = y_d(t_{n+1})``, and frees as many actuator efforts ``τ`` (Blajer &
Kołodziejczyk 2004; Betsch, Uhlar & Quasem 2009 for conserving schemes). The step of
:mod:`.step` takes them as extra unknowns beside the multipliers:

.. math::

    r_x - B\\,\\tau = 0, \\qquad c(x_{n+1}) = 0, \\qquad
    Y x_{n+1} - y_d(t_{n+1}) = 0

``B`` maps the efforts onto the actuated joints' augmented coordinates (a torque on a
gimbal angle, a force on a slide: the generalized force of a
:class:`~kanedyn.JointLoad`), constant over the step. The outputs here are linear in the
director coordinates: a joint's angle or slide (an augmented coordinate) or components
of a body point in N (``φ + Σ X_a d_a``), so ``Y`` is constant. The energy balance of a
step gains the actuator work ``τ·Δa``.

The efforts belong to the step intervals: ``efforts[n]`` acts on ``[t_n, t_{n+1}]``;
applied as piecewise-constant :class:`~kanedyn.JointLoad` in the same scheme they
reproduce the prescribed motion to the Newton tolerance. They carry an alternating
O(h) component: the nodal velocities of a midpoint scheme satisfy
``v_{n+1} + v_n = 2 Δx / h`` and the start excites the mode ``(-1)^n`` of that
recursion, which the prescribed positions do not damp. The mean of two neighbouring
intervals cancels it: :attr:`ServoResult.nodal_efforts` are second-order accurate
efforts at the step points, for any other simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import params_of
from kanedyn.simulation.conserving.formulation import Redundant, redundant, to_redundant
from kanedyn.simulation.conserving.step import joint_histories, run

__all__ = ["JointOutput", "PointOutput", "Servo", "ServoResult", "inverse_dynamics"]

Array = NDArray[np.float64]
Motion = Callable[[float], ArrayLike]


@attrs.frozen(eq=False)
class JointOutput:
    """Prescribe DOF ``dof`` (0-based, rotational first) of ``joint``: ``motion(t)``
    (a number: angle [rad] or slide [m])."""

    joint: str
    motion: Motion
    dof: int = 0


@attrs.frozen(eq=False)
class PointOutput:
    """Prescribe the N coordinates ``axes`` (0-2) of the point ``point`` of ``body``
    (body axes, from the body-frame origin): ``motion(t)`` gives ``len(axes)`` numbers."""

    body: str
    point: ArrayLike
    motion: Motion
    axes: tuple[int, ...] = (0, 1, 2)


@attrs.frozen(eq=False)
class Servo:
    """The servo rows of a step: ``Y`` (ns, nx), ``B`` (nx, ns) and the targets."""

    Y: Array
    B: Array
    outputs: tuple[Any, ...]
    actuators: tuple[tuple[str, int], ...]

    @property
    def n(self) -> int:
        return int(self.Y.shape[0])

    def target(self, t: float) -> Array:
        """``y_d(t)``, (ns,)."""
        parts = []
        for out in self.outputs:
            y = np.atleast_1d(np.asarray(out.motion(t), dtype=float)).reshape(-1)
            need = 1 if isinstance(out, JointOutput) else len(out.axes)
            if y.size != need:
                raise ModelError(
                    f"servo output {out!r}: motion(t) gave {y.size} values, need {need}"
                )
            parts.append(y)
        return np.concatenate(parts)


def _actuators(model: Model, red: Redundant, actuators: Sequence[Any]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for act in actuators:
        name, dofs = (act, None) if isinstance(act, str) else (act[0], [int(act[1])])
        k = model.joint_index(name)
        idx = red.aug[k]
        for d in range(idx.size) if dofs is None else dofs:
            if not 0 <= d < idx.size or idx[d] < 0:
                raise ModelError(
                    f"actuator {name!r} DOF {d}: only gimbal angles and slides can be actuated"
                )
            out.append((name, d))
    return out


def servo(
    model: Model, outputs: Sequence[Any], actuators: Sequence[Any], closures: Any = None
) -> Servo:
    """The :class:`Servo` of ``outputs`` (:class:`JointOutput`, :class:`PointOutput`) and
    ``actuators`` (joint names, for all their DOFs, or ``(joint, dof)`` pairs)."""
    red = redundant(model, closures)
    rows = []
    for out in outputs:
        if isinstance(out, JointOutput):
            k = model.joint_index(out.joint)
            idx = red.aug[k]
            if not 0 <= out.dof < idx.size or idx[out.dof] < 0:
                raise ModelError(
                    f"servo output on joint {out.joint!r} DOF {out.dof}: no such angle or slide"
                )
            row = np.zeros(red.nx)
            row[idx[out.dof]] = 1.0
            rows.append(row)
        elif isinstance(out, PointOutput):
            i = model.body_index(out.body)
            X = np.asarray(out.point, dtype=float) - params_of(model).com[i]
            bf = red.bodies[i]
            point = bf.pos.L + sum(X[a] * bf.dirs[a].L for a in range(3))
            for ax in out.axes:
                if not np.any(point[ax]):
                    raise ModelError(
                        f"servo output on body {out.body!r}: axis {ax} is out of the plane "
                        "of the planar formulation"
                    )
                rows.append(point[ax].copy())
        else:
            raise ModelError(f"unknown servo output {out!r}: use JointOutput or PointOutput")
    acts = _actuators(model, red, actuators)
    if len(acts) != len(rows):
        raise ModelError(
            f"servo constraints need as many actuator DOFs as prescribed outputs: "
            f"{len(acts)} actuators, {len(rows)} outputs"
        )
    B = np.zeros((red.nx, len(acts)))
    for col, (name, d) in enumerate(acts):
        B[red.aug[model.joint_index(name)][d], col] = 1.0
    return Servo(np.array(rows), B, tuple(outputs), tuple(acts))


@attrs.frozen(eq=False)
class ServoResult:
    """Inverse dynamics along a prescribed motion: ``t`` (nt,), ``q``, ``u`` (nt, ·) the
    motion in joint coordinates, ``efforts`` (nt - 1, ns) the actuator efforts on each
    step interval ``[t_n, t_{n+1}]`` (named by ``actuators``, ``(joint, dof)``), and the
    director ``run``."""

    t: Array
    q: Array
    u: Array
    efforts: Array
    actuators: tuple[tuple[str, int], ...]
    run: Any

    @property
    def nodal_efforts(self) -> Array:
        """Efforts at the step points ``t`` (nt, ns): the mean of the two neighbouring
        intervals (which cancels the alternating mode, see the module docstring),
        extrapolated linearly to the first and last point."""
        e = self.efforts
        mid = 0.5 * (e[1:] + e[:-1])
        if len(mid) < 2:
            return np.vstack((e[:1], e[:1], e[-1:]))[: len(self.t)]
        return np.vstack((2 * mid[:1] - mid[1:2], mid, 2 * mid[-1:] - mid[-2:-1]))

    def loads(self, piecewise: bool = False) -> Callable[..., list[Any]]:
        """The efforts as a ``loads(t, model, state, kin)`` callable for
        :func:`kanedyn.simulate`: the nodal efforts interpolated linearly (for any
        method), or with ``piecewise`` the interval efforts (constant on each step; the
        energy-momentum scheme with the same steps then repeats the servo run)."""
        t, acts = self.t, self.actuators
        eff, nodal = self.efforts, self.nodal_efforts

        def loads(time: float, model: Model, state: State, kin: Any) -> list[Any]:
            from kanedyn.dynamics.loads import JointLoad

            if piecewise:
                n = int(np.clip(np.searchsorted(t, time, side="left") - 1, 0, len(eff) - 1))
                row = eff[n]
            else:
                row = np.array([np.interp(time, t, nodal[:, c]) for c in range(len(acts))])
            values: dict[str, Array] = {}
            for col, (name, d) in enumerate(acts):
                v = values.setdefault(name, np.zeros(model.joint(name).ndof))
                v[d] += row[col]
            return [JointLoad(name, v) for name, v in values.items()]

        return loads


def inverse_dynamics(
    model: Model,
    state: State,
    t_final: float,
    dt: float,
    outputs: Sequence[Any],
    actuators: Sequence[Any],
    *,
    loads: Any = None,
    tol: float = 1e-10,
    max_iter: int = 15,
    closures: Any = None,
) -> ServoResult:
    """Actuator efforts that make ``outputs`` follow their motions, with the
    energy-momentum step (servo constraints; see the module docstring).

    ``state`` must satisfy the outputs at t = 0. Every step is output (the efforts
    belong to the steps). ``closures``: loop-closing joints, as for :func:`~.step.run`
    (a parallel manipulator: its tree, the joints closing its loops, actuators on the
    tree's base joints, the platform's point as the output).

    >>> import kanedyn as kd, numpy as np
    >>> from kanedyn.simulation.conserving import JointOutput, inverse_dynamics
    >>> m = kd.examples.chain(1)
    >>> res = inverse_dynamics(m, m.initial_state(), 0.1, 0.01,
    ...                        [JointOutput("joint0", lambda t: 0.1 * t**2)], ["joint0"])
    >>> res.efforts.shape
    (10, 1)
    """
    sv = servo(model, outputs, actuators, closures)
    red = redundant(model, closures)
    x0, _ = to_redundant(red, state)
    miss = np.max(np.abs(sv.Y @ x0 - sv.target(0.0)))
    if miss > 1e-8:
        raise ModelError(f"the initial state misses the prescribed outputs by {miss:.3g}")
    r = run(model, state, t_final, dt, loads=loads, tol=tol, max_iter=max_iter, servo=sv,
            closures=closures)  # fmt: skip
    q, u = joint_histories(red, r)
    assert r.efforts is not None
    return ServoResult(r.t, q, u, r.efforts, sv.actuators, r)
