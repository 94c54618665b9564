"""Keplerian orbits: the initial state of a free root in orbit, and the LVLH frame.

``kd.Orbit.circular(7.0e6)`` or ``kd.Orbit.from_elements(a, e, i, raan, argp, nu)``
is a two-body (Keplerian) orbit about a central body of gravitational parameter ``mu``.
It gives the position and velocity at any time (:meth:`Orbit.state`, Kepler's equation
solved by Newton), the local-vertical local-horizontal frame (:meth:`Orbit.lvlh`) and
puts a free root on the orbit with an attitude relative to LVLH (:meth:`Orbit.place`).
The model's orbit is still the free root's translation (the simulation integrates it
in the model's field); an ``Orbit`` is a reference: initial conditions and the frame
that attitudes are reported in (``traj.lvlh_attitude(orbit)``).

Conventions (Vallado, *Fundamentals of Astrodynamics and Applications*, 4th ed., 2013,
§2.2-2.3, Algorithm 10 ``COE2RV``):

* Angles are in radians: inclination ``i``, right ascension of the ascending node
  ``raan`` (Ω), argument of periapsis ``argp`` (ω), true anomaly ``nu`` (ν) at t = 0.
* The perifocal frame P has x towards periapsis and z along the angular momentum
  ``h = r × v``. ``R_N_P = R3(-Ω) R1(-i) R3(-ω)`` with Vallado's frame rotations
  ``ROT1``, ``ROT3``, that is the active rotations ``Rz(Ω) Rx(i) Rz(ω)``
  (``kd.euler_to_dcm("313", (Ω, i, ω))``). N's z axis is the pole the inclination is
  measured from (the pole of ``kd.CentralGravity``'s J2).
* Positions are relative to the central body's centre; :meth:`Orbit.place` adds the
  model's ``CentralGravity.center``.

LVLH (the frame L, :func:`lvlh`): ``z_L = -r/|r|`` (nadir), ``y_L = -h/|h|`` (the
negative orbit normal), ``x_L = y_L × z_L`` (completing the right-handed triad; along
the velocity on a circular orbit). ``orbit.lvlh(t)`` is ``R_L_N``: it takes N
components to L components, its rows are L's axes in N. L turns relative to N about
``y_L`` at the rate of the true anomaly, ``ω_L/N = -(|h|/|r|²) y_L`` (``-n y_L`` on a
circular orbit, n the mean motion). Roll, pitch and yaw are rotations about ``x_L``,
``y_L`` and ``z_L``; a positive pitch turns the body's x axis from the velocity
towards the zenith.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError
from kanedyn.model.gravity import EARTH_MU
from kanedyn.model.records import Model, State
from kanedyn.spatial import rotation as rot

__all__ = ["LvlhAttitude", "Orbit", "lvlh"]

Array = NDArray[np.float64]


def lvlh(r: ArrayLike, v: ArrayLike) -> Array:
    """``R_L_N`` of the LVLH frame of position ``r`` and velocity ``v`` (N components,
    relative to the central body), shape (..., 3, 3):

    .. math:: z_L = -\\frac{r}{|r|}, \\quad y_L = -\\frac{r \\times v}{|r \\times v|},
        \\quad x_L = y_L \\times z_L, \\qquad R_{LN} = [x_L\\; y_L\\; z_L]^T

    >>> lvlh([7.0e6, 0, 0], [0, 7.5e3, 0]).round(12) + 0.0  # x_L along v, z_L nadir
    array([[ 0.,  1.,  0.],
           [ 0.,  0., -1.],
           [-1.,  0.,  0.]])
    """
    r = np.asarray(r, dtype=float)
    v = np.asarray(v, dtype=float)
    h = np.cross(r, v)
    z = -r / np.linalg.norm(r, axis=-1, keepdims=True)
    y = -h / np.linalg.norm(h, axis=-1, keepdims=True)
    x = np.cross(y, z)
    return np.stack((x, y, z), axis=-2)


def _number(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"Orbit {what}: expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ModelError(f"Orbit {what}: must be finite, got {x}")
    return x


def _positive(value: Any, what: str) -> float:
    x = _number(value, what)
    if x <= 0.0:
        raise ModelError(f"Orbit {what}: must be positive, got {x}")
    return x


def _a(value: Any) -> float:
    return _positive(value, "a (semi-major axis, m)")


def _mu(value: Any) -> float:
    return _positive(value, "mu (gravitational parameter, m^3/s^2)")


def _e(value: Any) -> float:
    e = _number(value, "e (eccentricity)")
    if not 0.0 <= e < 1.0:
        raise ModelError(
            f"Orbit e (eccentricity): must be in [0, 1) (an ellipse), got {e}; "
            "parabolic and hyperbolic orbits are not supported"
        )
    return e


def _i(value: Any) -> float:
    return _number(value, "i (inclination, rad)")


def _raan(value: Any) -> float:
    return _number(value, "raan (right ascension of the ascending node, rad)")


def _argp(value: Any) -> float:
    return _number(value, "argp (argument of periapsis, rad)")


def _nu(value: Any) -> float:
    return _number(value, "nu (true anomaly at t = 0, rad)")


@attrs.frozen(eq=False)
class Orbit:
    """A Keplerian (two-body) elliptic orbit: its classical elements at t = 0.

    Parameters
    ----------
    a : float
        Semi-major axis (m, positive).
    e : float
        Eccentricity, ``0 <= e < 1``.
    i, raan, argp : float
        Inclination, right ascension of the ascending node, argument of periapsis (rad).
    nu : float
        True anomaly at t = 0 (rad).
    mu : float
        The central body's gravitational parameter (m³/s²; default the Earth's).

    The module docstring gives the conventions (Vallado's ``R3(-Ω) R1(-i) R3(-ω)``, the
    LVLH axes).

    >>> import kanedyn as kd
    >>> orbit = kd.Orbit.circular(7.0e6)
    >>> round(orbit.period, 3)
    5828.517
    """

    a: float = attrs.field(converter=_a)
    e: float = attrs.field(converter=_e)
    i: float = attrs.field(converter=_i)
    raan: float = attrs.field(converter=_raan)
    argp: float = attrs.field(converter=_argp)
    nu: float = attrs.field(converter=_nu)
    mu: float = attrs.field(default=EARTH_MU, converter=_mu)

    @classmethod
    def circular(
        cls,
        radius: float,
        mu: float = EARTH_MU,
        *,
        i: float = 0.0,
        raan: float = 0.0,
        nu: float = 0.0,
    ) -> Orbit:
        """A circular orbit of ``radius`` (m); ``nu`` is the argument of latitude at
        t = 0 (from the ascending node; ``argp`` is 0)."""
        return cls(radius, 0.0, i, raan, 0.0, nu, mu)

    @classmethod
    def from_elements(
        cls,
        a: float,
        e: float,
        i: float,
        raan: float,
        argp: float,
        nu: float,
        mu: float = EARTH_MU,
    ) -> Orbit:
        """The orbit of the classical elements (angles in radians) at t = 0."""
        return cls(a, e, i, raan, argp, nu, mu)

    @classmethod
    def from_state(cls, r: ArrayLike, v: ArrayLike, mu: float = EARTH_MU) -> Orbit:
        """The orbit through position ``r`` (m) and velocity ``v`` (m/s) at t = 0 (N
        components, relative to the central body): Vallado's Algorithm 9 (``RV2COE``),

        .. math:: h = r \\times v, \\quad
            e = \\frac{(v^2 - \\mu/|r|)\\, r - (r \\cdot v)\\, v}{\\mu}, \\quad
            a = \\Big(\\frac{2}{|r|} - \\frac{v^2}{\\mu}\\Big)^{-1}, \\quad
            i = \\operatorname{atan2}(|h_{xy}|, h_z), \\quad
            \\Omega = \\operatorname{atan2}(h_x, -h_y)

        with ``argp`` and the argument of latitude ``u = ω + ν`` measured in the
        node frame ``Rz(Ω) Rx(i)``. A circular orbit has ``argp = 0`` (``nu`` is then the
        argument of latitude), an equatorial one ``raan = 0``: ``state(0)`` gives back
        ``r`` and ``v`` to round-off in every case.

        Raises
        ------
        ModelError
            ``r`` or ``v`` is not three finite numbers, ``r × v`` is zero (a radial
            trajectory) or the orbit is not an ellipse (``v² ≥ 2 mu / |r|``).
        """
        mu = _mu(mu)
        rv = []
        for x, what in ((r, "r (position, m)"), (v, "v (velocity, m/s)")):
            try:
                arr = np.asarray(x, dtype=float)
            except (TypeError, ValueError):
                raise ModelError(
                    f"Orbit.from_state: {what}: expected 3 numbers, got {x!r}"
                ) from None
            if arr.shape != (3,) or not np.all(np.isfinite(arr)):
                raise ModelError(f"Orbit.from_state: {what}: expected 3 finite numbers, got {x!r}")
            rv.append(arr)
        r, v = rv
        rn = float(np.linalg.norm(r))
        h = np.cross(r, v)
        hn = float(np.linalg.norm(h))
        if rn == 0.0 or hn <= 1e-12 * rn * float(np.linalg.norm(v)):
            raise ModelError("Orbit.from_state: r × v is zero (a radial or degenerate path)")
        energy = 2.0 / rn - float(v @ v) / mu
        if energy <= 0.0:
            raise ModelError(
                f"Orbit.from_state: the path is not an ellipse (v² = {float(v @ v)!r} ≥ "
                f"2 mu/|r| = {2.0 * mu / rn!r}); parabolic and hyperbolic orbits are not "
                "supported"
            )
        e_vec = ((float(v @ v) - mu / rn) * r - float(r @ v) * v) / mu
        e = float(np.linalg.norm(e_vec))
        i = math.atan2(math.hypot(h[0], h[1]), h[2])
        equatorial = math.hypot(h[0], h[1]) <= 1e-14 * hn
        raan = 0.0 if equatorial else math.atan2(h[0], -h[1])
        R_N_node = rot.euler_to_dcm("313", (raan, i, 0.0))  # the line of nodes on x
        r_node = R_N_node.T @ r
        u = math.atan2(r_node[1], r_node[0])
        if e < 1e-14:
            e, argp = 0.0, 0.0
        else:
            e_node = R_N_node.T @ e_vec
            argp = math.atan2(e_node[1], e_node[0])
        return cls(1.0 / energy, e, i, raan, argp, u - argp, mu)

    # ------------------------------------------------------------------ constants
    @property
    def mean_motion(self) -> float:
        """``n = sqrt(mu / a³)`` (rad/s)."""
        return math.sqrt(self.mu / self.a**3)

    @property
    def period(self) -> float:
        """``2π / n`` (s)."""
        return 2.0 * math.pi / self.mean_motion

    @cached_property
    def R_N_P(self) -> Array:
        """The perifocal frame in N: ``R3(-Ω) R1(-i) R3(-ω)`` (Vallado eq. 2-104)."""
        return rot.euler_to_dcm("313", (self.raan, self.i, self.argp))

    @cached_property
    def _M0(self) -> float:
        """The mean anomaly at t = 0, from ν through the eccentric anomaly
        ``E = 2 atan2(sqrt(1-e) sin(ν/2), sqrt(1+e) cos(ν/2))``, ``M = E - e sin E``."""
        e, nu = self.e, self.nu
        E = 2.0 * math.atan2(
            math.sqrt(1.0 - e) * math.sin(nu / 2), math.sqrt(1.0 + e) * math.cos(nu / 2)
        )
        return E - e * math.sin(E)

    # ------------------------------------------------------------------ propagation
    def eccentric_anomaly(self, t: ArrayLike) -> Array:
        """The eccentric anomaly ``E`` at ``t`` (s; scalar or array): Kepler's equation
        ``E - e sin E = M0 + n t`` solved by Newton (Vallado Algorithm 2), from
        ``E = M`` (``e < 0.8``) or ``E = π``, to a step below 1e-15 rad.

        ``E`` is in ``[-π, π)`` (the mean anomaly is reduced modulo 2π first).
        """
        t = np.asarray(t, dtype=float)
        M = np.mod(self._M0 + self.mean_motion * t + math.pi, 2.0 * math.pi) - math.pi
        e = self.e
        E = M.copy() if e < 0.8 else np.full_like(M, math.pi)
        for _ in range(50):
            dE = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
            E = E - dE
            if np.all(np.abs(dE) < 1e-15):
                break
        return E

    def state(self, t: ArrayLike = 0.0) -> tuple[Array, Array]:
        """Position (m) and velocity (m/s) in N, relative to the central body, at ``t``
        (s): shapes (3,), or (nt, 3) for an array ``t``. In the perifocal frame
        (Vallado eqs. 2-55, 2-56 in the eccentric anomaly E):

        .. math:: r_P = a (\\cos E - e,\\; \\sqrt{1-e^2} \\sin E,\\; 0), \\quad
            v_P = \\frac{\\sqrt{\\mu a}}{|r|} (-\\sin E,\\; \\sqrt{1-e^2} \\cos E,\\; 0)

        with ``|r| = a (1 - e cos E)``; then ``r = R_N_P r_P``, ``v = R_N_P v_P``.
        """
        E = self.eccentric_anomaly(t)
        a, e = self.a, self.e
        b = math.sqrt(1.0 - e * e)
        cE, sE = np.cos(E), np.sin(E)
        zero = np.zeros_like(E)
        r_P = a * np.stack((cE - e, b * sE, zero), axis=-1)
        speed = math.sqrt(self.mu * a) / (a * (1.0 - e * cE))
        v_P = speed[..., None] * np.stack((-sE, b * cE, zero), axis=-1)
        return r_P @ self.R_N_P.T, v_P @ self.R_N_P.T

    @property
    def position(self) -> Array:
        """The position at t = 0 (m, N components, relative to the central body)."""
        return self.state(0.0)[0]

    @property
    def velocity(self) -> Array:
        """The velocity at t = 0 (m/s, N components)."""
        return self.state(0.0)[1]

    def lvlh(self, t: ArrayLike = 0.0) -> Array:
        """``R_L_N`` of the LVLH frame at ``t`` (s): (3, 3), or (nt, 3, 3) for an array
        ``t`` (:func:`lvlh` of :meth:`state`)."""
        return lvlh(*self.state(t))

    def lvlh_rate(self, t: ArrayLike = 0.0) -> Array:
        """The angular velocity of LVLH relative to N, in L components (rad/s):
        ``(0, -|h|/|r|², 0)``, the rate of the true anomaly about the orbit normal
        (``h = sqrt(mu a (1 - e²))``). Shape (3,) or (nt, 3)."""
        r = np.linalg.norm(self.state(t)[0], axis=-1)
        h = math.sqrt(self.mu * self.a * (1.0 - self.e**2))
        w = -h / r**2
        return np.stack((np.zeros_like(w), w, np.zeros_like(w)), axis=-1)

    # ------------------------------------------------------------------ a model on it
    def place(
        self,
        model: Model,
        state: State,
        root: str,
        *,
        t: float = 0.0,
        attitude: ArrayLike | None = None,
        angles: ArrayLike | None = None,
        seq: str = "123",
        rates: ArrayLike | None = None,
    ) -> State:
        """A new State with the free root joint ``root`` on the orbit at time ``t``.

        The root body's mass centre gets the orbit's position (plus the model's
        ``CentralGravity.center``) and velocity; its attitude is ``attitude``
        (``R_L_B``, a DCM) or the Euler ``angles`` of ``seq`` relative to LVLH
        (``R_L_B = euler_to_dcm(seq, angles)``; default: the body axes on LVLH's), and
        its angular velocity relative to LVLH is ``rates`` (B components, rad/s; default
        zero: the body is held in LVLH, turning with it at ``orbit.lvlh_rate(t)``). The
        other joints keep their coordinates and speeds from ``state``.

        The root joint's coordinates invert its pose (the joint model in
        :mod:`kanedyn.model.records`): with ``R_N_B = R_N_L R_L_B``,

        .. math:: R_{G_iG_o} = R_{N G_i}^T R_{NB} R_{G_oB}^T, \\quad
            \\omega_{B/N} = \\omega_{B/L} + R_{LB}^T \\omega_{L/N}, \\quad
            \\Delta s = R_{NG_i}^T (p_c - p_i - R_{NB}(c - p_o)), \\quad
            \\Delta \\dot s = R_{NG_i}^T (v_c + \\omega_{B/N} \\times R_{NB}(p_o - c))

        (``p_i``, ``p_o`` the joint's inner and outer points, ``c`` the body's mass
        centre in its axes, ``Δ`` the slide axes); the speeds are ``R_GoB ω_B/N`` (Go
        components) and ``ṡ``.

        Raises
        ------
        ModelError
            ``root`` is not a free root joint (three slides and a spherical rotation
            from N), the model's central field has another ``mu``, or the attitude or
            rates are malformed.
        """
        k = model.joint_index(root)
        jnt = model.joints[k]
        if not (jnt.is_root and jnt.rot_type == "spherical" and jnt.trn_dof == 3):
            raise ModelError(
                f"Orbit.place: joint {root!r} is not a free root joint (three slides and a "
                "spherical rotation from N, kd.Joint.free)"
            )
        field = model.central_gravity
        center = np.zeros(3)
        if field is not None:
            center = np.asarray(field.center, dtype=float)
            if not field.is_symbolic and abs(float(field.mu) - self.mu) > 1e-12 * self.mu:
                raise ModelError(
                    f"Orbit.place: the orbit's mu ({self.mu!r}) is not the model's "
                    f"CentralGravity mu ({field.mu!r})"
                )
        if attitude is not None and angles is not None:
            raise ModelError("Orbit.place: give attitude or angles, not both")
        if angles is not None:
            R_L_B = rot.euler_to_dcm(seq, _values(angles, (3,), "angles"))
        elif attitude is not None:
            R_L_B = _values(attitude, (3, 3), "attitude")
            if not rot.is_rotation_matrix(R_L_B):
                raise ModelError("Orbit.place: attitude is not a rotation matrix (R_L_B)")
        else:
            R_L_B = np.eye(3)
        w_BL = np.zeros(3) if rates is None else _values(rates, (3,), "rates")

        r, v = self.state(t)
        R_N_B = self.lvlh(t).T @ R_L_B
        w_B = w_BL + R_L_B.T @ self.lvlh_rate(t)  # ω_B/N in B
        body = model.bodies[k]
        R_N_Gi, R_Go_B = jnt.inner_rotation, jnt.outer_rotation
        c_N = R_N_B @ (body.com - jnt.outer_point)  # Go origin -> mass centre, N
        d = R_N_Gi.T @ (center + r - jnt.inner_point - c_N)
        d_dot = R_N_Gi.T @ (v - np.cross(R_N_B @ w_B, c_N))
        Delta = np.eye(3)[:, [int(ch) - 1 for ch in jnt.trn_seq]]
        return model.set_joint(
            state,
            root,
            quaternion=rot.dcm_to_quat(R_N_Gi.T @ R_N_B @ R_Go_B.T),
            rates=R_Go_B @ w_B,
            displacements=Delta.T @ d,
            displacement_rates=Delta.T @ d_dot,
        )


def _values(x: ArrayLike, shape: tuple[int, ...], what: str) -> Array:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"Orbit.place: {what}: expected numbers, got {x!r}") from None
    if arr.shape != shape:
        raise ModelError(f"Orbit.place: {what}: expected shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"Orbit.place: {what}: has non-finite values")
    return arr


@attrs.frozen(eq=False, slots=False)
class LvlhAttitude:
    """A body's attitude relative to LVLH over time (``traj.lvlh_attitude(...)``).

    ``t`` (nt,), ``R_L_B`` (nt, 3, 3) (B components to L), ``seq`` the Euler sequence of
    ``angles`` (nt, 3): ``R_L_B = R_i1(θ1) R_i2(θ2) R_i3(θ3)``
    (:func:`kanedyn.spatial.rotation.dcm_to_euler`). ``roll``, ``pitch`` and ``yaw`` are
    the angles about L's x, y and z axes (for a sequence that names each axis once;
    the default "123" gives ``angles = (roll, pitch, yaw)``). ``angle`` (nt,) is the
    rotation angle from LVLH, in [0, π].
    """

    t: Array
    R_L_B: Array
    seq: str = "123"

    @cached_property
    def angles(self) -> Array:
        """Euler angles of ``seq`` (nt, 3), rad."""
        return rot.dcm_to_euler(self.seq, self.R_L_B)

    @cached_property
    def angle(self) -> Array:
        """The angle from LVLH (nt,), rad: the norm of ``R_L_B``'s rotation vector."""
        return np.linalg.norm(rot.dcm_to_rotvec(self.R_L_B), axis=-1)

    def _about(self, axis: str) -> Array:
        if sorted(self.seq) != ["1", "2", "3"]:
            raise ModelError(
                f"LvlhAttitude: roll, pitch and yaw need a sequence naming each axis once, "
                f"not {self.seq!r}; read .angles"
            )
        return self.angles[:, self.seq.index(axis)]

    @property
    def roll(self) -> Array:
        """The angle about L's x axis (nt,), rad."""
        return self._about("1")

    @property
    def pitch(self) -> Array:
        """The angle about L's y axis, the negative orbit normal (nt,), rad."""
        return self._about("2")

    @property
    def yaw(self) -> Array:
        """The angle about L's z axis, nadir (nt,), rad."""
        return self._about("3")
