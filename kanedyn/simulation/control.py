"""Reaction wheels and sampled controllers.

A reaction wheel is a rotor body on a hinge about its spin axis (``Joint.revolute`` with
the Gi z axis along the wheel axis). Its hinge speed is the wheel rate relative to the
host, its viscous friction is the hinge damping, and its motor torque is a
:class:`~kanedyn.JointLoad` (equal and opposite on rotor and host). Under the MSD
formulation the wheel's momentum state is its axial angular momentum, 42's wheel state
``h_w`` (refs/notes/42-kane-msd.md §9.3). An axisymmetric rotor leaves the mass matrix
independent of the wheel angle, so fast wheels add no stiffness.

A :class:`Controller` is flight software: ``law(t, model, state)`` returns load records
(usually wheel and joint torques), sampled every ``period`` seconds and held constant
in between (zero-order hold), as 42's FSW is sampled at ``FswSampleTime >= DTSIM``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn import joints
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import Force, JointLoad, Torque
from kanedyn.errors import ModelError
from kanedyn.model import Body, Joint, Model, State
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.arithmetic import NUMPY
from kanedyn.spatial.inertia import inertia_tensor

__all__ = [
    "Controller",
    "Sampler",
    "QuaternionPD",
    "ReactionWheel",
    "Thruster",
    "add_wheels",
    "thruster_loads",
    "wheel_loads",
]

Array = NDArray[np.float64]


def _unit(v: ArrayLike, what: str) -> Array:
    a = np.asarray(v, dtype=float).reshape(3)
    n = float(np.linalg.norm(a))
    if not np.isfinite(n) or n == 0.0:
        raise ModelError(f"{what}: axis must be a non-zero finite 3-vector, got {v!r}")
    return a / n


@attrs.frozen
class ReactionWheel:
    """A reaction wheel on ``body``.

    ``axis`` and ``position`` are in the host's body axes (position from the host frame
    origin). ``inertia`` is the rotor's axial moment (kg m²), ``transverse`` its
    transverse moment (default: half the axial, a thin disc), ``mass`` the rotor mass.
    ``max_torque`` (N m) saturates the motor; ``friction`` is viscous (N m s/rad).
    ``max_momentum`` (N m s) is the rated wheel momentum, recorded for the flight
    software (not enforced).

    ``mass=0`` and ``transverse=0`` give NASA 42's wheel: a momentum ``h_w`` along the
    axis only, the rotor's mass and transverse inertia being part of the host body
    (refs/notes/42-kane-msd.md §9.3); the rotor is then a massless body with inertia
    ``J a aᵀ``, and its hinge's momentum state is ``h_w = J (a·ω_host + Ω)``.
    """

    name: str
    body: str
    axis: Array = attrs.field(converter=lambda v: _unit(v, "ReactionWheel"))
    inertia: float = 0.05
    mass: float = 3.0
    position: Array = attrs.field(
        default=(0.0, 0.0, 0.0), converter=lambda v: np.asarray(v, float).reshape(3)
    )
    transverse: float | None = None
    max_torque: float = 0.2
    friction: float = 0.0
    max_momentum: float = float("inf")

    def rotor(self) -> Body:
        jt = 0.5 * self.inertia if self.transverse is None else self.transverse
        return Body(
            self.name,
            mass=self.mass,
            inertia=inertia_tensor(jt, jt, self.inertia),
            allow_singular=self.mass == 0.0 or jt == 0.0,
            check_triangle=jt != 0.0,  # an axial-only rotor stands for its momentum
        )

    def joint(self) -> Joint:
        # Gi's z axis along the wheel axis: any proper rotation whose third column is axis
        z = self.axis
        helper = np.eye(3)[int(np.argmin(np.abs(z)))]
        x = np.cross(helper, z)
        x /= np.linalg.norm(x)
        R_Bi_Gi = np.column_stack((x, np.cross(z, x), z))
        return Joint.revolute(
            f"{self.name}_spin", self.body, self.name, axis=3,
            inner_point=self.position, inner_rotation=R_Bi_Gi, damping=self.friction,
        )  # fmt: skip


def add_wheels(
    bodies: Model | Sequence[Body],
    joints: Sequence[Joint] | Sequence[ReactionWheel],
    wheels: Sequence[ReactionWheel] | None = None,
    gravity: ArrayLike | None = None,
) -> Model:
    """A Model with each wheel added as a rotor on a hinge.

    Either ``add_wheels(model, wheels)``, which extends an existing Model (its gravity
    kept), or ``add_wheels(bodies, joints, wheels, gravity=(0, 0, 0))``, which builds one.

    >>> import kanedyn as kd
    >>> hub = kd.Model([kd.Body("hub", 10.0, kd.inertia_tensor(1, 1, 1))],
    ...                [kd.Joint.free("root", outer="hub")])
    >>> kd.add_wheels(hub, [kd.ReactionWheel("w", "hub", axis=(0, 0, 1), inertia=0.01)]).nb
    2
    """
    if isinstance(bodies, Model):
        if wheels is not None or gravity is not None:
            raise ModelError(
                "add_wheels(model, wheels) takes the model and the wheels only "
                "(the model keeps its gravity)"
            )
        model = bodies
        added = [w for w in joints if isinstance(w, ReactionWheel)]
        if len(added) != len(joints):
            raise ModelError("add_wheels(model, wheels): wheels must be kanedyn.ReactionWheel")
        return attrs.evolve(
            model,
            bodies=[*model.bodies, *(w.rotor() for w in added)],
            joints=[*model.joints, *(w.joint() for w in added)],
        )
    if wheels is None:
        raise ModelError("add_wheels(bodies, joints, wheels): give the wheels")
    return Model(
        [*bodies, *(w.rotor() for w in wheels)],
        [*joints, *(w.joint() for w in wheels)],  # type: ignore[misc]
        (0.0, 0.0, 0.0) if gravity is None else gravity,
    )


@attrs.frozen
class Thruster:
    """A thruster on ``body``: a force of up to ``force`` N along ``axis`` (host body
    axes: the direction of the force on the spacecraft), applied at ``position`` (host
    body axes, from the body-frame origin).

    The command is the throttle, clipped to ``[0, 1]``: ``PROPORTIONAL`` thrust is
    ``command × force``; a ``PULSED`` thruster's command is its on-time fraction over
    the control period (42's pulse width over its FSW sample time), whose average
    thrust is the same.
    """

    name: str
    body: str
    axis: Array = attrs.field(converter=lambda v: _unit(v, "Thruster"))
    force: float = 1.0
    position: Array = attrs.field(
        default=(0.0, 0.0, 0.0), converter=lambda v: np.asarray(v, float).reshape(3)
    )
    mode: str = "PROPORTIONAL"

    def load(self, command: float) -> Force:
        """The :class:`~kanedyn.Force` of throttle ``command``."""
        c = float(np.clip(command, 0.0, 1.0))
        return Force(self.body, c * self.force * self.axis, point=self.position, frame="body")


def thruster_loads(thrusters: Sequence[Thruster], commands: ArrayLike) -> list[Force]:
    """The forces of ``thrusters`` at throttles ``commands`` (each clipped to [0, 1])."""
    c = np.asarray(commands, dtype=float).reshape(-1)
    if c.size != len(thrusters):
        raise ModelError(f"thruster_loads: {len(thrusters)} thrusters but {c.size} commands")
    return [t.load(x) for t, x in zip(thrusters, c, strict=True)]


def wheel_loads(wheels: Sequence[ReactionWheel], torques: ArrayLike) -> list[JointLoad]:
    """Motor torques (on the rotors, about their axes), saturated at ``max_torque``."""
    tau = np.asarray(torques, dtype=float).reshape(-1)
    if tau.size != len(wheels):
        raise ModelError(f"wheel_loads: {len(wheels)} wheels but {tau.size} torques")
    return [
        JointLoad(f"{w.name}_spin", [float(np.clip(t, -w.max_torque, w.max_torque))])
        for w, t in zip(wheels, tau, strict=True)
    ]


@attrs.frozen
class Controller:
    """Sampled control law: ``law(t, model, state) -> load records``, held for ``period`` s."""

    period: float
    law: Callable[[float, Model, State], Sequence[Any]]

    def __attrs_post_init__(self) -> None:
        if not np.isfinite(self.period) or self.period <= 0.0:
            raise ModelError(f"Controller period must be positive, got {self.period}")


def _wheels(value: Iterable[ReactionWheel]) -> tuple[ReactionWheel, ...]:
    return tuple(value)


@attrs.frozen
class QuaternionPD:
    """Quaternion-feedback PD attitude law with reaction wheels (Wie, *Space Vehicle
    Dynamics and Control*, §7.3): body torque command

    .. math:: T = -K_p\\, \\mathrm{sign}(q_{e4})\\, q_{e,1:3} - K_d\\, \\omega_B

    with ``q_e = q_target⁻¹ ⊗ q`` (attitude of ``body`` relative to the target, both
    ``R_N_B`` quaternions), realized by the wheels: the motors apply ``τ`` to the rotors
    and ``-τ`` to the host, so ``τ = -A⁺ T`` with ``A`` the wheel axes as columns.
    Without wheels (``wheels=()``), ``T`` is applied to ``body`` itself (an ideal
    torquer, body axes).
    """

    body: str
    target: Array = attrs.field(converter=lambda q: rot.quat_normalize(np.asarray(q, float)))
    wheels: tuple[ReactionWheel, ...] = attrs.field(converter=_wheels)
    Kp: float = 1.0
    Kd: float = 5.0

    def __call__(self, t: float, model: Model, state: State) -> list[JointLoad] | list[Torque]:
        kin = kinematics_at(model, state.q[: model.nq], state.u[: model.n])  # the joints'
        i = model.body_index(self.body)
        R = kin.R_N_B[i]
        q = rot.dcm_to_quat(R)
        q_err = rot.quat_multiply(rot.quat_conjugate(self.target), q)
        w_B = R.T @ kin.omega[i]
        T = -self.Kp * np.sign(q_err[3] if q_err[3] != 0 else 1.0) * q_err[:3] - self.Kd * w_B
        if not self.wheels:
            return [Torque(self.body, T, frame="body")]
        A = np.column_stack([w.axis for w in self.wheels])
        return wheel_loads(self.wheels, -np.linalg.pinv(A) @ T)


class Sampler:
    """Samples a :class:`Controller` at its period (at ``t = 0`` first, then on or after
    each sample time) and stores the held commands in the system being integrated
    (``system.held``); shared by :func:`kanedyn.simulate` and the energy-momentum run."""

    def __init__(self, controller: Controller | None, model: Model):
        self.controller, self.model = controller, model
        self.next = 0.0

    def times(self, t_final: float) -> list[float]:
        if self.controller is None:
            return []
        n = int(np.floor(t_final / self.controller.period + 1e-9))
        return [
            k * self.controller.period
            for k in range(1, n + 1)
            if k * self.controller.period < t_final
        ]

    def due(self, t: float) -> bool:
        """Whether the controller is sampled at ``t`` (on or after its next sample time)."""
        return self.controller is not None and t >= self.next - 1e-9

    def advance(self, t: float) -> None:
        """Move the next sample time past ``t`` (after a sample at ``t``)."""
        assert self.controller is not None
        while self.next <= t + 1e-9:
            self.next += self.controller.period

    def sample(self, system: Any, t: float, x: Array) -> None:
        """Sample at ``t`` if due: the law at the state ``x = [q | y]`` of ``system``
        (whose ``speeds(q, y)`` gives ``[u | s]``), held in ``system.held``."""
        if not self.due(t):
            return
        assert self.controller is not None
        model = self.model
        q = joints.normalize_quaternions(NUMPY, model.layout, x[: model.nq_total])
        u = system.speeds(q, x[model.nq_total :])
        system.held = list(self.controller.law(t, model, State(q, u)))
        self.advance(t)
