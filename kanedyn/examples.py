"""Built-in example models, built with the public API.

* :func:`explorer1` — NASA 42's "TumbleSat" demo (refs: 42's ``Demo/SC_TumbleSat.txt``): a
  minor-axis spinner with four damped, hinged whip antennas. Energy drains through the
  dampers while H stays fixed, so the spin moves to the major axis (the 1958 flat spin).
* :func:`double_pendulum` — two uniform rods on parallel hinges under gravity.
* :func:`hub_with_panels` — a free-floating hub with two hinged solar panels.
* :func:`chain` — an n-link planar or spatial chain of uniform rods.

Example model files (42 spacecraft files, URDF, TOML) ship inside the package:
:func:`path` finds one, :func:`files` lists them, so tutorials and how-tos run from an
installed wheel as well as from a checkout.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import attrs
import numpy as np

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.model import Body, Joint, Model, State
from kanedyn.simulation.control import Controller, QuaternionPD, ReactionWheel, add_wheels
from kanedyn.spatial.inertia import inertia_tensor
from kanedyn.spatial.rotation import dcm_to_quat, euler_to_dcm, rotvec_to_quat

__all__ = [
    "SlewCase",
    "files",
    "path",
    "chain",
    "double_pendulum",
    "explorer1",
    "explorer1_state",
    "hub_with_panels",
    "wheel_slew",
]


def files() -> list[str]:
    """Names of the example model files shipped with kanedyn (see :func:`path`)."""
    folder = resources.files("kanedyn") / "data"
    return sorted(f.name for f in folder.iterdir() if f.is_file() and f.name != "README.md")


def path(name: str) -> Path:
    """Path of a bundled example file, such as ``"SC_TumbleSat.txt"`` or ``"arm3.urdf"``.

    The 42 files' joint parameter files sit beside them, so
    ``kd.io.read_42(kd.examples.path("SC_TumbleSat.txt"))`` finds them.

    >>> import kanedyn as kd
    >>> kd.examples.path("SC_TumbleSat.txt").name
    'SC_TumbleSat.txt'
    """
    names = files()
    if name not in names:
        raise FileFormatError(f"no example file {name!r}; the bundled files are {names}")
    return Path(str(resources.files("kanedyn") / "data" / name))


def explorer1() -> Model:
    """Explorer-1 "TumbleSat" exactly as 42's demo spacecraft file describes it.

    Hub: 1963.5 kg, I = diag(5174, 3593, 245.4) kg m², mass centre 2.5 m up its z axis.
    Four 94.25 kg antennas on 2-DOF gimbals (sequence 231) at the hub's rim, rotated
    0°, 90°, 180°, 270° about z (Bi→Gi static angles, sequence 312). Antennas 0 and 2
    have springs (0.2, 0.2) N·m/rad and dampers (5, 5) N·m·s/rad; antennas 1 and 3 have
    (0.2, 0.0098) and (5, 1.1). The root is free, its joint point at the hub mass centre.
    The hub's principal moments violate the triangle inequality (245.4 + 3593 < 5174), as
    in 42's file; the hub is built with ``check_triangle=False`` to reproduce it.
    """
    # 42's hub moments violate the triangle inequality (245.4 + 3593 < 5174); kept as given.
    hub = Body("hub", mass=1963.5, inertia=inertia_tensor(5174.0, 3593.0, 245.4), com=(0, 0, 2.5),
               check_triangle=False)  # fmt: skip
    bodies = [hub]
    joints = [Joint.free("root", outer="hub", outer_point=(0.0, 0.0, 2.5))]
    spring = {0: ((0.2, 0.2), (5.0, 5.0)), 1: ((0.2, 9.8e-3), (5.0, 1.1))}
    rims = [(0.5, 0.0, 2.5), (0.0, 0.5, 2.5), (-0.5, 0.0, 2.5), (0.0, -0.5, 2.5)]
    for k, rim in enumerate(rims):
        name = f"antenna{k}"
        bodies.append(
            Body(name, mass=94.25, inertia=inertia_tensor(0.47, 8.09, 8.09), com=(0.5, 0, 0))
        )
        k_rot, c_rot = spring[k % 2]
        joints.append(
            Joint.gimbal(
                f"hinge{k}", "hub", name, seq="231", dof=2,
                inner_point=rim,
                inner_rotation=euler_to_dcm("312", (np.deg2rad(90.0 * k), 0.0, 0.0)),
                stiffness=k_rot, damping=c_rot,
            )
        )  # fmt: skip
    return Model(bodies, joints)


def explorer1_state(model: Model) -> State:
    """42's initial attitude (231 angles 90°, 45°, 20°) and rate (0, 0.001, 5) deg/s."""
    R_N_B = euler_to_dcm("231", np.deg2rad([90.0, 45.0, 20.0]))
    state = model.initial_state()
    return model.set_joint(
        state, "root", quaternion=dcm_to_quat(R_N_B), rates=np.deg2rad([0.0, 0.001, 5.0])
    )


def _rod(name: str, mass: float, length: float, axis: int = 0) -> Body:
    """Uniform slender rod along body axis ``axis`` from the origin (radius length/20)."""
    radius = length / 20.0
    I_axial = 0.5 * mass * radius**2
    I_trans = mass * (3 * radius**2 + length**2) / 12.0
    moments = [I_trans] * 3
    moments[axis] = I_axial
    com = [0.0, 0.0, 0.0]
    com[axis] = 0.5 * length
    return Body(name, mass=mass, inertia=inertia_tensor(*moments), com=com)


def chain(n: int, *, length: float = 1.0, mass: float = 1.0, spatial: bool = False,
          gravity: float = 9.81) -> Model:  # fmt: skip
    """An n-link chain of uniform rods hanging along -y from a fixed pivot at N's origin.

    Planar: hinges about z. Spatial: 2-DOF gimbals (sequence 312: about z then x).
    """
    if n < 1:
        raise ModelError(f"chain needs n >= 1, got {n}")
    bodies, joints = [], []
    inner: str | None = None
    rot = euler_to_dcm("123", (0.0, 0.0, -0.5 * np.pi))  # rod axis x points down -y
    for i in range(n):
        name = f"link{i}"
        bodies.append(_rod(name, mass, length))
        point = (0.0, 0.0, 0.0) if inner is None else (length, 0.0, 0.0)
        kw = dict(inner_point=point, inner_rotation=rot if inner is None else np.eye(3))
        if spatial:
            joints.append(Joint.gimbal(f"joint{i}", inner, name, seq="312", dof=2, **kw))
        else:
            joints.append(Joint.revolute(f"joint{i}", inner, name, axis=3, **kw))
        inner = name
    return Model(bodies, joints, gravity=(0.0, -gravity, 0.0))


def double_pendulum(length: float = 1.0, mass: float = 1.0) -> Model:
    """Two uniform rods on parallel hinges (about z) under gravity -9.81 y."""
    return chain(2, length=length, mass=mass)


def _hub_and_panels(
    hub: Body, panel: str, mass: float, size: tuple[float, float], hinge_x: float,
    stiffness: float, damping: float,
) -> tuple[list[Body], list[Joint]]:  # fmt: skip
    """A free hub and two thin rectangular plates in the body x-y plane (span along x,
    chord along y, ``size`` = (span, chord)), hinged about the hub's y axis at
    ``±hinge_x`` so that they flap out of plane, their centres half a span out."""
    span, chord = size
    I = inertia_tensor(mass * chord**2 / 12, mass * span**2 / 12, mass * (span**2 + chord**2) / 12)
    bodies, joints = [hub], [Joint.free("root", outer=hub.name)]
    for side, sign in (("left", -1.0), ("right", 1.0)):
        name = f"{panel}_{side}"
        bodies.append(Body(name, mass=mass, inertia=I, com=(sign * span / 2, 0.0, 0.0)))
        joints.append(
            Joint.revolute(
                f"hinge_{side}",
                hub.name,
                name,
                axis=2,
                inner_point=(sign * hinge_x, 0, 0),
                stiffness=stiffness,
                damping=damping,
            )  # fmt: skip
        )
    return bodies, joints


def hub_with_panels(*, stiffness: float = 50.0, damping: float = 0.5) -> Model:
    """A free-floating 500 kg hub with two 20 kg, 2 m × 1 m solar panels hinged about the
    hub's y axis."""
    hub = Body("hub", mass=500.0, inertia=inertia_tensor(400.0, 350.0, 300.0))
    return Model(*_hub_and_panels(hub, "panel", 20.0, (2.0, 1.0), 0.8, stiffness, damping))


@attrs.frozen(eq=False)
class SlewCase:
    """A ready-to-run slew: ``kd.simulate(c.model, c.state, t, dt, controller=c.controller)``."""

    model: Model
    state: State
    controller: Controller
    target: np.ndarray
    wheels: tuple[ReactionWheel, ...]


def wheel_slew(angle_deg: float = 30.0, axis=(0.0, 0.0, 1.0), *, period: float = 0.1,
               Kp: float = 4.0, Kd: float = 18.0) -> SlewCase:  # fmt: skip
    """A 200 kg spacecraft with two flexible solar-array hinges and three orthogonal
    reaction wheels (0.5 N·m), slewing ``angle_deg`` about ``axis`` (N) under the
    quaternion-feedback PD law :class:`~kanedyn.QuaternionPD` sampled every ``period`` s.
    """
    hub = Body("hub", mass=200.0, inertia=inertia_tensor(60.0, 50.0, 40.0))
    bodies, joints = _hub_and_panels(hub, "array", 5.0, (1.5, 1.0), 0.6, 8.0, 0.4)
    wheels = tuple(
        ReactionWheel(
            f"wheel_{c}",
            "hub",
            axis=np.eye(3)[k],
            inertia=0.05,
            mass=3.0,
            position=0.2 * np.eye(3)[k],
            max_torque=0.5,
            friction=1e-4,
        )  # fmt: skip
        for k, c in enumerate("xyz")
    )
    model = add_wheels(bodies, joints, wheels)
    a = np.asarray(axis, dtype=float)
    target = rotvec_to_quat(np.deg2rad(angle_deg) * a / np.linalg.norm(a))
    law = QuaternionPD("hub", target, wheels, Kp=Kp, Kd=Kd)
    return SlewCase(model, model.initial_state(), Controller(period, law), target, wheels)
