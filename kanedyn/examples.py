"""Built-in example models, built with the public API.

* :func:`explorer1` — NASA 42's "TumbleSat" demo (refs: 42's ``Demo/SC_TumbleSat.txt``): a
  minor-axis spinner with four damped, hinged whip antennas. Energy drains through the
  dampers while H stays fixed, so the spin moves to the major axis (the 1958 flat spin).
* :func:`double_pendulum` — two uniform rods on parallel hinges under gravity.
* :func:`hub_with_panels` — a free-floating hub with two hinged solar panels.
* :func:`flexible_spacecraft` — a hub with two flexible solar arrays (cantilevers,
  :func:`kanedyn.beam_body`) slewed by a quaternion PD law (a :class:`SlewCase`).
* :func:`chain` — an n-link planar or spatial chain of uniform rods.
* :func:`gravity_gradient_boom` — a hub with a long hinged boom and a tip mass in a
  circular orbit, captured into the vertical by a hinge damper (an :class:`OrbitCase`).
* Closed loops (:class:`kanedyn.Loop`): :func:`four_bar`, :func:`slider_crank` (planar and
  spatial), :func:`parallel_3rrr` (a planar 3-RRR parallel manipulator) and
  :func:`bricard` (Bricard's orthogonal 6R linkage, one DOF where Grübler counts none).
  Each is built so that its zero state is assembled (``Φ(0) = 0``).

Example model files (42 spacecraft files, URDF, TOML) ship inside the package:
:func:`path` finds one, :func:`files` lists them, so tutorials and how-tos run from an
installed wheel as well as from a checkout.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.model import Body, CentralGravity, Joint, Loop, Model, State
from kanedyn.model.gravity import EARTH_MU
from kanedyn.model.orbit import Orbit
from kanedyn.simulation.control import Controller, QuaternionPD, ReactionWheel, add_wheels
from kanedyn.spatial.inertia import inertia_tensor
from kanedyn.spatial.rotation import dcm_to_quat, euler_to_dcm, rotvec_to_quat

__all__ = [
    "OrbitCase",
    "SlewCase",
    "bricard",
    "files",
    "flexible_spacecraft",
    "path",
    "chain",
    "four_bar",
    "parallel_3rrr",
    "slider_crank",
    "slider_crank_iftomm",
    "slider_crank_iftomm_state",
    "double_pendulum",
    "explorer1",
    "explorer1_state",
    "gravity_gradient_boom",
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


def flexible_spacecraft(
    angle_deg: float = 20.0, axis=(0.0, 0.0, 1.0), *, flexible: bool = True,
    length: float = 5.0, mass_per_length: float = 2.0, EI: float = 400.0,
    n_modes: int = 1, damping_ratio: float = 0.005, period: float = 0.1,
    Kp: float = 40.0, Kd: float = 120.0,
) -> SlewCase:  # fmt: skip
    """A free 300 kg hub with two solar arrays, uniform cantilevers (``length`` m,
    ``mass_per_length`` kg/m, bending stiffness ``EI`` N·m² in and out of the array
    plane, ``n_modes`` modes a direction, :func:`kanedyn.beam_body`) clamped at ±0.8 m
    on the hub's x axis and pointing out, slewed ``angle_deg`` about ``axis`` (N) by the
    quaternion PD law :class:`~kanedyn.QuaternionPD` as an ideal hub torque, sampled
    every ``period`` s. ``flexible=False``: the same arrays rigid (the same mass,
    mass centre and inertia, no modes). The arrays' first bending frequency is
    ``1.8751² √(EI / (ρ ℓ⁴)) / 2π`` (0.25 Hz by default)."""
    from kanedyn.model.beam import beam_body

    hub = Body("hub", mass=300.0, inertia=inertia_tensor(150.0, 120.0, 100.0))
    bodies, joints = [hub], [Joint.free("root", outer="hub")]
    for side, sign in (("left", -1.0), ("right", 1.0)):
        array = beam_body(f"array_{side}", length, mass_per_length, EI, n_modes=n_modes,
                          damping_ratio=damping_ratio)  # fmt: skip
        if not flexible:
            array = attrs.evolve(array, modes=None)
        bodies.append(array)
        turn = np.eye(3) if sign > 0 else np.diag([-1.0, -1.0, 1.0])  # half a turn about z
        joints.append(Joint.weld(f"mount_{side}", "hub", array.name,
                                 inner_point=(sign * 0.8, 0.0, 0.0), inner_rotation=turn))  # fmt: skip
    model = Model(bodies, joints)
    a = np.asarray(axis, dtype=float)
    target = rotvec_to_quat(np.deg2rad(angle_deg) * a / np.linalg.norm(a))
    law = QuaternionPD("hub", target, (), Kp=Kp, Kd=Kd)
    return SlewCase(model, model.initial_state(), Controller(period, law), target, ())


# --------------------------------------------------------------------------- in orbit
@attrs.frozen(eq=False)
class OrbitCase:
    """A ready-to-run spacecraft in orbit: ``kd.simulate(c.model, c.state, t, dt)``, and
    the reference orbit for ``traj.lvlh_attitude(c.orbit)``."""

    model: Model
    state: State
    orbit: Orbit


def gravity_gradient_boom(*, radius: float = 7.0e6, length: float = 10.0,
                          tip_mass: float = 10.0, stiffness: float = 1e-3,
                          damping: float = 1.0, pitch: float = 0.5) -> OrbitCase:  # fmt: skip
    """A gravity-gradient spacecraft: a 500 kg hub (I = 400 kg m² about every axis), a
    ``length`` m, 10 kg boom hinged at the hub's zenith face about the pitch axis, and a
    ``tip_mass`` kg particle at the boom's end, in a circular orbit of ``radius`` about
    the Earth (``kd.CentralGravity()``).

    The boom points to the zenith (the hub's -z, with the hub's axes on LVLH's), and the
    whole spacecraft starts pitched by ``pitch`` rad and held in LVLH. The gravity-gradient
    torque on the boom makes it librate in pitch about the local vertical (a slender boom
    alone at ``n √3``, n the orbit rate; docs/howto/central-gravity.md). The hub has no
    gravity-gradient stiffness of its own; it lags the boom, and the hinge damper
    (``damping`` N m s/rad, with a weak ``stiffness`` N m/rad spring to keep the hub in
    line) takes the energy out. With the defaults, the libration drops from 0.5 rad to
    0.03 rad in six orbits and to a few milliradians in ten.
    """
    hub = Body("hub", mass=500.0, inertia=inertia_tensor(400.0, 400.0, 400.0))
    m = 10.0
    I_rod = m * length**2 / 12.0
    boom = Body(
        "boom", mass=m, inertia=inertia_tensor(I_rod, I_rod, 0.01), com=(0.0, 0.0, -length / 2)
    )
    tip = Body("tip", mass=tip_mass, inertia=0.0)
    joints = [
        Joint.free("root", "hub"),
        Joint.revolute("hinge", "hub", "boom", axis=2, inner_point=(0.0, 0.0, -0.5),
                       stiffness=stiffness, damping=damping),
        Joint.weld("tip_weld", "boom", "tip", inner_point=(0.0, 0.0, -length)),
    ]  # fmt: skip
    model = Model([hub, boom, tip], joints, gravity=CentralGravity(mu=EARTH_MU))
    orbit = Orbit.circular(radius, mu=EARTH_MU)
    state = orbit.place(model, model.initial_state(), "root", angles=(0.0, pitch, 0.0))
    return OrbitCase(model, state, orbit)


# --------------------------------------------------------------------------- closed loops
def _frame_with_z(z: Any) -> Any:
    """A rotation ``R_N_G`` whose third column is the unit vector ``z``."""
    z = np.asarray(z, dtype=float) / np.linalg.norm(z)
    helper = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack((x, np.cross(z, x), z))


def _placed(cls: Any, name: str, inner: str | None, outer: str | None, pose: dict[Any, Any],
            point: Any, axis: Any = (0.0, 0.0, 1.0), **kw: Any) -> Any:  # fmt: skip
    """A revolute joint (or loop) about ``axis`` through ``point`` (both in N), between
    bodies whose poses at q = 0 are ``pose[name] = (R_N_B, p)`` (N: identity, origin)."""
    R_i, p_i = pose.get(inner, (np.eye(3), np.zeros(3)))
    R_o, p_o = pose.get(outer, (np.eye(3), np.zeros(3)))
    R_N_G = _frame_with_z(axis)
    point = np.asarray(point, dtype=float)
    return cls.revolute(
        name, inner, outer, axis=3,
        inner_point=R_i.T @ (point - p_i), inner_rotation=R_i.T @ R_N_G,
        outer_point=R_o.T @ (point - p_o), outer_rotation=R_N_G.T @ R_o, **kw,
    )  # fmt: skip


def _planar_rod(name: str, mass: float, length: float) -> Body:
    return _rod(name, mass, length)


def _rz(angle: float) -> Any:
    return euler_to_dcm("123", (0.0, 0.0, angle))


def four_bar(*, ground: float = 2.0, crank: float = 0.5, rocker: float = 1.2,
             mass_per_length: float = 1.0, gravity: float = 9.81,
             planar: bool = True) -> Model:  # fmt: skip
    """A planar four-bar (crank-rocker) under gravity -y, closed by a revolute loop.

    Seed 004's closed-loop vector ``R2 + R3 = R1 + R4``: the crank (length ``crank``)
    turns about N's origin, the rocker (``rocker``) about ``(ground, 0, 0)``, and the
    coupler runs from the crank tip to the rocker tip; the loop ``"close"`` pins the
    coupler's end to the rocker's end. At ``q = 0`` the crank and the rocker point up
    (+y) and the coupler, of length ``√(ground² + (rocker - crank)²)``, joins their tips,
    so the zero state is assembled. Joints ``"crank"``, ``"coupler"``, ``"rocker"``;
    uniform slender rods. ``planar=False`` closes it with the full spatial hinge (five
    constraints, three of them redundant).
    """
    lengths = {"crank": crank, "coupler": float(np.hypot(ground, rocker - crank)), "rocker": rocker}
    phi = float(np.arctan2(rocker - crank, ground))
    pose = {
        "crank": (_rz(0.5 * np.pi), np.zeros(3)),
        "coupler": (_rz(phi), np.array([0.0, crank, 0.0])),
        "rocker": (_rz(0.5 * np.pi), np.array([ground, 0.0, 0.0])),
    }
    bodies = [_planar_rod(k, mass_per_length * v, v) for k, v in lengths.items()]
    joints = [
        _placed(Joint, "crank", None, "crank", pose, (0.0, 0.0, 0.0)),
        _placed(Joint, "coupler", "crank", "coupler", pose, (0.0, crank, 0.0)),
        _placed(Joint, "rocker", None, "rocker", pose, (ground, 0.0, 0.0)),
    ]
    loop = _placed(Loop, "close", "coupler", "rocker", pose, (ground, rocker, 0.0))
    return Model(bodies, joints, gravity=(0.0, -gravity, 0.0), loops=[loop], planar=planar)


def slider_crank(spatial: bool = False, *, crank: float = 0.3, rod: float = 1.0,
                 offset: float = 0.2, gravity: float = 9.81) -> Model:  # fmt: skip
    """A slider-crank under gravity -y; the loop ``"pin"`` joins the rod to the slider.

    Planar (``spatial=False``): the crank (joint ``"crank"``) turns about N's z axis at
    the origin, the connecting rod hangs on it (joint ``"rod"``, a hinge about z), the
    slider slides along N's x axis (joint ``"slide"``) and a revolute loop pins the rod's
    end to the slider (``planar=True``: two constraints).

    Spatial: the slider's line is lifted by ``offset`` out of the crank's plane (along
    z), the rod hangs on the crank by a spherical joint and is held to the slider by a
    universal loop (a 2-DOF gimbal, four constraints), so the rod cannot spin about its
    own axis: the classic spatial slider-crank (Haug, *Computer-Aided Kinematics and
    Dynamics*, §7). At ``q = 0`` the crank points up (+y) and the mechanism is assembled.
    """
    z = offset if spatial else 0.0
    x_s = float(np.sqrt(rod**2 - crank**2 - z**2))
    tip = np.array([0.0, crank, 0.0])
    pin = np.array([x_s, 0.0, z])
    e = (pin - tip) / rod
    R_rod = _frame_with_z(np.cross(e, (0.0, 0.0, 1.0)))
    R_rod = np.column_stack((e, np.cross(R_rod[:, 2], e), R_rod[:, 2]))
    pose = {
        "crank": (_rz(0.5 * np.pi), np.zeros(3)),
        "rod": (R_rod, tip),
        "slider": (np.eye(3), pin),
    }
    bodies = [
        _rod("crank", crank, crank),
        _rod("rod", rod, rod),
        Body("slider", mass=0.5, inertia=inertia_tensor(1e-3, 1e-3, 1e-3)),
    ]
    joints: list[Joint] = [_placed(Joint, "crank", None, "crank", pose, (0.0, 0.0, 0.0))]
    slide = Joint.prismatic("slide", None, "slider", axis=1, inner_point=pin)
    if spatial:
        R_c = pose["crank"][0]
        joints.append(Joint.spherical("rod", "crank", "rod", inner_point=R_c.T @ tip,
                                      inner_rotation=R_c.T @ R_rod))  # fmt: skip
        # the universal's axes, both across the rod: Gi's 1 (the rod's z, fixed in the
        # rod) and Go's 2 (the rod's y at q = 0, fixed in the slider)
        R_rod_Gi = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
        loop = Loop("pin", "rod", "slider", rot_dof=2, rot_seq="123",
                    inner_point=(rod, 0.0, 0.0), inner_rotation=R_rod_Gi,
                    outer_rotation=(R_rod @ R_rod_Gi).T)  # fmt: skip
    else:
        joints.append(_placed(Joint, "rod", "crank", "rod", pose, tip))
        loop = _placed(Loop, "pin", "rod", "slider", pose, pin)
    return Model(bodies, [*joints, slide], gravity=(0.0, -gravity, 0.0), loops=[loop],
                 planar=not spatial)  # fmt: skip


def slider_crank_iftomm() -> Model:
    """The spatial rigid slider-crank of the IFToMM library of multibody benchmarks.

    Gravity 9.81 N/kg along -z. The crank (joint ``"crank"``, 0.08 m, 0.12 kg,
    ``I_xx = 1e-4`` kg m² about its mass centre at its middle) turns about N's x axis
    through ``A = (0, 0.1, 0.12)`` and points along +z at ``q = 0``; the connecting rod
    (0.3 m, 0.5 kg, mass centre at its middle, 4e-4 kg m² about its axis and 4e-3
    across) hangs on the crank tip ``B`` by a spherical joint (``"rod"``); the slider
    (2 kg, 1e-4 kg m²) slides along N's x axis through the origin (joint ``"slide"``)
    and starts at ``C = (0.2, 0, 0)``. The loop ``"pin"`` is a universal joint at C whose
    axes are the slider's x and the rod-fixed axis across the rod and x at ``q = 0``
    (along ``x × (C - B)``). The benchmark starts at ``q = 0`` with the crank turning at
    6 rad/s about +x (:func:`slider_crank_iftomm_state`). The crank's mass-centre
    position and the universal's axes are not in the data available to us from the
    specification; these are the choices that reproduce the published solutions (see
    the verification page).
    """
    A = np.array([0.0, 0.1, 0.12])
    B = A + np.array([0.0, 0.0, 0.08])
    C = np.array([0.2, 0.0, 0.0])
    e = (C - B) / 0.3
    across = np.cross((1.0, 0.0, 0.0), e)
    across /= np.linalg.norm(across)
    R_rod = np.column_stack((e, across, np.cross(e, across)))  # rod frame: x along B→C
    bodies = [
        Body("crank", mass=0.12, inertia=inertia_tensor(1e-4, 1e-5, 1e-4), com=(0.0, 0.0, 0.04)),
        Body("rod", mass=0.5, inertia=inertia_tensor(4e-4, 4e-3, 4e-3), com=(0.15, 0.0, 0.0)),
        Body("slider", mass=2.0, inertia=inertia_tensor(1e-4, 1e-4, 1e-4)),
    ]
    joints = [
        Joint.revolute("crank", None, "crank", axis=1, inner_point=A),
        Joint.spherical("rod", "crank", "rod", inner_point=(0.0, 0.0, 0.08),
                        inner_rotation=R_rod),
        Joint.prismatic("slide", None, "slider", axis=1, inner_point=C),
    ]  # fmt: skip
    # the universal: Gi's x is the rod-fixed axis (across), Go's y the slider's x
    G = np.column_stack((across, (1.0, 0.0, 0.0), np.cross(across, (1.0, 0.0, 0.0))))
    loop = Loop("pin", "rod", "slider", rot_dof=2, rot_seq="123", inner_point=(0.3, 0.0, 0.0),
                inner_rotation=R_rod.T @ G, outer_rotation=G.T)  # fmt: skip
    return Model(bodies, joints, gravity=(0.0, 0.0, -9.81), loops=[loop])


def slider_crank_iftomm_state(model: Model) -> State:
    """The benchmark's initial state: ``q = 0``, the crank turning at 6 rad/s about +x,
    the other speeds from the loop (``assemble`` with the crank fixed)."""
    s = model.set_joint(model.initial_state(), "crank", rates=[6.0])
    return model.assemble(s, fix=["crank"])


def parallel_3rrr(*, base: float = 1.0, platform: float = 0.3, link: float = 0.5,
                  mass_per_length: float = 1.0, platform_mass: float = 1.0,
                  gravity: float = 0.0) -> Model:  # fmt: skip
    """A planar 3-RRR parallel manipulator (the class of seed 001's chapter).

    Three legs from base pivots on a circle of radius ``base`` (at 90°, 210°, 330°)
    to platform pins on a circle of radius ``platform``; each leg is two links of length
    ``link`` (joints ``"base{k}"``, ``"elbow{k}"``). Leg 0 carries the triangular
    platform (joint ``"wrist0"``); legs 1 and 2 close on it through the revolute loops
    ``"wrist1"``, ``"wrist2"``. Tree 7 DOF, 4 loop constraints, 3 DOF (the platform's
    x, y and rotation). At ``q = 0`` the platform is centred at the origin, the elbows
    bent outward, and the mechanism is assembled. The base joints are the actuated ones.
    """
    half = 0.5 * (base - platform)
    if half >= link:
        raise ModelError("parallel_3rrr: the legs are too short to reach the platform")
    alpha = float(np.arccos(half / link))
    pose: dict[Any, Any] = {"platform": (np.eye(3), np.zeros(3))}
    bodies = [Body("platform", mass=platform_mass,
                   inertia=inertia_tensor(*(0.25 * platform_mass * platform**2 * np.array([1, 1, 2]))))]  # fmt: skip
    joints: list[Joint] = []
    loops: list[Loop] = []
    for k in range(3):
        psi = np.deg2rad(90.0 + 120.0 * k)
        radial = np.array([np.cos(psi), np.sin(psi), 0.0])
        B, P = base * radial, platform * radial
        a1, a2 = psi + np.pi + alpha, psi + np.pi - alpha
        E = B + link * np.array([np.cos(a1), np.sin(a1), 0.0])
        pose[f"upper{k}"] = (_rz(a1), B)
        pose[f"lower{k}"] = (_rz(a2), E)
        bodies += [_rod(f"upper{k}", mass_per_length * link, link),
                   _rod(f"lower{k}", mass_per_length * link, link)]  # fmt: skip
        joints += [_placed(Joint, f"base{k}", None, f"upper{k}", pose, B),
                   _placed(Joint, f"elbow{k}", f"upper{k}", f"lower{k}", pose, E)]  # fmt: skip
        if k == 0:
            joints.append(_placed(Joint, "wrist0", "lower0", "platform", pose, P))
        else:
            loops.append(_placed(Loop, f"wrist{k}", f"lower{k}", "platform", pose, P))
    return Model(bodies, joints, gravity=(0.0, -gravity, 0.0), loops=loops, planar=True)


def bricard(*, length: float = 1.0, mass: float = 1.0, side: float = 0.1,
            gravity: float = 9.81, spec: str | None = None) -> Model:  # fmt: skip
    """Bricard's orthogonal 6R linkage: five rods and the ground on the edges of a cube.

    The six links (the ground edge and five rods ``rod1`` ... ``rod5``, each ``length``
    long, ``mass`` kg, square section ``side``) follow the cube's skew hexagon
    (0,0,0) → (1,0,0) → (1,1,0) → (1,1,1) → (0,1,1) → (0,0,1) → (0,0,0) (times
    ``length``); each hinge axis is perpendicular to its two links. Every link has twist
    90° and no offset, with ``a₁² + a₃² + a₅² = a₂² + a₄² + a₆²``: Bricard's orthogonal
    case, mobile with one DOF although Grübler's count gives none. The ground joint
    ``"j0"`` and hinges ``"j1"`` ... ``"j4"`` form the tree; the loop ``"j5"`` closes it
    to the ground: five constraints of rank four (one redundant). The defaults and gravity
    (-y) are those of the IFToMM benchmark A04 (five 1 m, 1 kg rods of 0.1 m square
    section, six revolute joints); by default the rods stand up from the ground pivots.

    ``spec="iftomm"`` builds the benchmark's own configuration (problem A04 of the IFToMM
    / A Coruña library, in the position of its figure, also used by its published
    implementations): the rods hang from the ground pivots, the hexagon being
    (0,0,0) → (1,0,0) → (1,-1,0) → (1,-1,1) → (0,-1,1) → (0,0,1) → (0,0,0) (times
    ``length``): ``rod1`` turns about y at the origin, ``rod5`` about x at ``(0, 0, 1)``,
    and the benchmark's point P3, the hinge ``"j2"`` between ``rod2`` and ``rod3``, is at
    ``(1, -1, 0)``. Released from rest at ``q = 0`` the mechanism swings under gravity
    (this position is not an equilibrium). ``tests/test_mbs_benchmarks.py`` checks it
    against the benchmark's published reference curves.
    """
    if spec not in (None, "iftomm"):
        raise ModelError(f"bricard: unknown spec {spec!r} (expected None or 'iftomm')")
    down = -1.0 if spec == "iftomm" else 1.0
    V = length * np.array([[0, 0, 0], [1, 0, 0], [1, down, 0], [1, down, 1], [0, down, 1],
                           [0, 0, 1]], dtype=float)  # fmt: skip
    edges = [V[(i + 1) % 6] - V[i] for i in range(6)]
    axes = [np.cross(edges[i - 1], edges[i]) for i in range(6)]  # at vertex i
    I_t = mass * (length**2 + side**2) / 12.0
    I_a = mass * side**2 / 6.0
    pose: dict[Any, Any] = {}
    bodies, joints = [], []
    for i in range(5):
        name = f"rod{i + 1}"
        e = edges[i] / length
        R = _frame_with_z(axes[i])
        R = np.column_stack((e, np.cross(R[:, 2], e), R[:, 2]))
        pose[name] = (R, V[i])
        bodies.append(Body(name, mass=mass, inertia=inertia_tensor(I_a, I_t, I_t),
                           com=(0.5 * length, 0.0, 0.0)))  # fmt: skip
        inner = None if i == 0 else f"rod{i}"
        joints.append(_placed(Joint, f"j{i}", inner, name, pose, V[i], axes[i]))
    loop = _placed(Loop, "j5", "rod5", None, pose, V[5], axes[5])
    return Model(bodies, joints, gravity=(0.0, -gravity, 0.0), loops=[loop])
