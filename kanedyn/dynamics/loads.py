"""Loads: small immutable records, resolved to body forces, torques and joint forces.

A ``loads`` argument anywhere in kanedyn is ``None``, a sequence of records, or a
callable ``loads(t, model, state, kin) -> sequence of records`` evaluated at every
right-hand-side call. Model-level loads are always included: gravity (uniform, or a
central field's force and gravity-gradient torque on every body,
:func:`central_gravity_loads`), and each joint's springs and dampers.

Joint springs, dampers and actuators act on their joint's generalized speeds directly,
which is the same as an equal and opposite torque (force) pair on Bo and Bi. Their
generalized forces are (per DOF; refs/notes/42-kane-msd.md §3.4, §8):

* gimbal angle θ_j and slide d_j: ``Q_j = -k_j q_j - c_j \\dot q_j`` (exactly
  conservative, potential ½ k q²; 42 instead applies Γτ, which is not conservative for
  3-DOF gimbals), with MuJoCo's higher-order terms ``-k₂ q² - k₃ q³`` (potential
  ``⅓ k₂ q³ + ¼ k₃ q⁴``) and ``-c₂ q̇|q̇| - c₃ q̇³`` (:func:`kanedyn.joints.spring_damper`);
* spherical joint, rotation vector φ of Go in Gi and relative rate ω (Go axes):
  ``Q = -J_r(φ)^{-T} K φ - C ω``, the exact gradient of the potential ½ φᵀKφ under
  ``ω = J_r(φ) φ̇``. For isotropic K it is 42's ``-k φ`` (because ``J_rᵀ φ = φ``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn import joints
from kanedyn.dynamics.kinematics import Kinematics, cross
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.plan import Params, params_of
from kanedyn.spatial import plucker as sp
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.arithmetic import NUMPY

if TYPE_CHECKING:
    from kanedyn.model.batch import States

__all__ = [
    "AppliedLoads",
    "Force",
    "JointLoad",
    "Torque",
    "applied_loads",
    "central_gravity_loads",
    "central_gravity_potential",
    "joint_spring_forces",
]

Array = NDArray[np.float64]


def _vec(value: ArrayLike, what: str) -> Array:
    arr = np.array(value, dtype=float).reshape(-1)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ModelError(f"{what}: expected 3 finite numbers, got {value!r}")
    arr.setflags(write=False)
    return arr


def _frame(value: str) -> str:
    if value not in ("N", "body"):
        raise ModelError(f"load frame must be 'N' or 'body', got {value!r}")
    return value


@attrs.frozen(eq=False)
class Force:
    """A force on ``body``, at ``point`` (body axes, from the body-frame origin;
    ``None`` = the mass centre), with components in N or in the body axes."""

    body: str
    force: Array = attrs.field(converter=lambda v: _vec(v, "Force.force"))
    point: Array | None = attrs.field(
        default=None, converter=lambda v: None if v is None else _vec(v, "Force.point")
    )
    frame: Literal["N", "body"] = attrs.field(default="N", converter=_frame)


@attrs.frozen(eq=False)
class Torque:
    """A pure torque on ``body``, components in N or in the body axes."""

    body: str
    torque: Array = attrs.field(converter=lambda v: _vec(v, "Torque.torque"))
    frame: Literal["N", "body"] = attrs.field(default="N", converter=_frame)


@attrs.frozen(eq=False)
class JointLoad:
    """Actuator effort on a joint's DOFs, rotational first (one value per DOF).

    The value for DOF j is its generalized force: the torque whose virtual work is
    ``τ_j δθ_j`` for a gimbal angle, the torque component in Go for a spherical joint,
    the force along the axis for a slide. It acts equal and opposite on Bo and Bi.
    """

    joint: str
    values: Array = attrs.field(converter=lambda v: np.array(v, dtype=float).reshape(-1))


@attrs.frozen(eq=False)
class AppliedLoads:
    """Resolved loads: ``F`` (nb, 3) forces at the mass centres and ``T`` (nb, 3) torques,
    both in N, and ``Q`` (n,) generalized joint forces (springs, dampers, actuators)."""

    F: Array
    T: Array
    Q: Array


LoadsLike = None | Sequence[Any] | Callable[..., Sequence[Any]]


def joint_spring_forces(model: Model, q: Array, u: Array, params: Params | None = None) -> Array:
    """Generalized forces of every joint's springs and dampers, shape (..., n).

    Angles, slides and dampers: :func:`kanedyn.joints.spring_damper`. A spherical
    joint's spring is the gradient of ``V(φ) = ½ φᵀ K φ + ⅓ k₂ r³ + ¼ k₃ r⁴``
    (:func:`kanedyn.joints.spherical_spring`, ``r = |φ|``) in the rotation vector φ:
    ``-J_r⁻ᵀ(φ) ∇V(φ)`` (``J_r`` the right Jacobian of SO(3);
    :func:`kanedyn.joints.spherical_spring_force`, the law the compiled engine traces
    too). For isotropic K,
    ``J_r⁻ᵀ φ = φ`` and this is 42's ``-k φ`` and MuJoCo's ball-joint spring
    ``-(k + k₂ r + k₃ r²) φ``. ``params`` (default: the model's) may carry batch axes,
    like ``q`` and ``u``.
    """
    lay = model.layout
    pa = params_of(model) if params is None else params
    stiffness, damping = pa.stiffness, pa.damping
    poly = (pa.stiffness_poly, pa.damping_poly) if pa.has_poly else (None, None)
    return joints.spring_damper(lay, stiffness, damping, q, u, *poly)


def _spherical_stiffness(lay: Any, pa: Params) -> tuple[Array, Array | None]:
    """The spherical joints' stiffness diagonals (..., nsph, 3) and radial coefficients
    ``(k₂, k₃)`` (..., nsph, 2) (those of each joint's first rotational DOF: a
    :class:`~kanedyn.Joint` holds the same pair on all three), or None."""
    k = pa.stiffness[..., lay.quat_u]
    kp = pa.stiffness_poly[..., lay.quat_u[:, 0], :] if pa.has_poly else None
    return k, kp


def spring_potential(model: Model, q: Array, params: Params | None = None) -> Any:
    """Σ ½ k q² + ⅓ k₂ q³ + ¼ k₃ q⁴ over angles and slides
    (:func:`kanedyn.joints.spring_potential`), plus ``½ φᵀKφ + ⅓ k₂ r³ + ¼ k₃ r⁴`` over
    spherical joints (:func:`kanedyn.joints.spherical_spring`): a float, or (...) for a
    batch of coordinates ``q`` (..., nq) and/or of ``params`` (default: the model's)."""
    lay = model.layout
    pa = params_of(model) if params is None else params
    V = joints.spring_potential(lay, pa.stiffness, pa.stiffness_poly if pa.has_poly else None, q)
    if lay.spherical.size:
        phi = rot.quat_to_rotvec(q[..., lay.quat_q])
        V = V + np.sum(joints.spherical_spring(*_spherical_stiffness(lay, pa), phi)[0], axis=-1)
    return float(V) if np.ndim(V) == 0 else V


def _central_terms(kin: Kinematics) -> tuple[Any, ...]:
    """The arguments of the central-gravity body terms for every body at once: each
    "scalar" an array (..., nb) (a batch of bodies, states and members), in N."""
    pa = kin.params
    I_N = kin.R_N_B @ pa.inertia @ np.swapaxes(kin.R_N_B, -1, -2)  # R I Rᵀ
    r = kin.r - pa.center[..., None, :]
    one = np.ones(r.shape[:-1])
    par = [np.asarray(getattr(pa, f))[..., None] * one for f in ("mu", "J2", "radius")]
    return (*par, pa.mass * one, [[I_N[..., i, j] for j in range(3)] for i in range(3)],
            [r[..., i] for i in range(3)], [0.0, 0.0, 1.0])  # fmt: skip


def central_gravity_loads(kin: Kinematics) -> tuple[Array, Array]:
    """The central field's force ``F`` (at the mass centres) and gravity-gradient torque
    ``T`` on every body, (..., nb, 3) in N: :func:`kanedyn.spatial.plucker.central_gravity`
    (written once, on scalars) run with arrays of bodies as its scalars."""
    F, T = sp.central_gravity(NUMPY, *_central_terms(kin))
    return np.stack(F, axis=-1), np.stack(T, axis=-1)


def central_gravity_potential(kin: Kinematics) -> Any:
    """The central field's potential energy summed over the bodies, (...):
    :func:`kanedyn.spatial.plucker.central_gravity_potential` on arrays of bodies."""
    return np.sum(sp.central_gravity_potential(NUMPY, *_central_terms(kin)), axis=-1)


def applied_loads(
    model: Model, state: State | States, kin: Kinematics, loads: LoadsLike = None, t: float = 0.0
) -> AppliedLoads:
    """Gravity, joint springs and dampers, and the user's loads, resolved at ``state``.

    The parameters (masses, gravity, springs) are ``kin.params``; with a batch of states
    or parameters, ``F``, ``T`` (..., nb, 3) and ``Q`` (..., n) carry the batch axes and
    each record applies to every member.
    """
    pa = kin.params
    batch = kin.r_rel.shape[:-2]
    if model.central_gravity is not None:
        F, T = central_gravity_loads(kin)
    else:
        F = pa.mass[..., :, None] * pa.gravity[..., None, :]
        T = np.zeros(batch + (model.nb, 3))
    if F.shape != T.shape:
        shape = np.broadcast_shapes(F.shape, T.shape)
        F, T = np.broadcast_to(F, shape), np.broadcast_to(T, shape).copy()
    Q = joint_spring_forces(model, state.q, state.u, None if pa is params_of(model) else pa)
    if Q.shape[:-1] != batch:
        Q = np.broadcast_to(Q, batch + Q.shape[-1:]).copy()
    records = loads(t, model, state, kin) if callable(loads) else loads
    if records:
        F = F.copy()
        for rec in records:
            _add(model, kin, rec, F, T, Q)
    return AppliedLoads(F=F, T=T, Q=Q)


def joint_efforts(model: Model, records: Sequence[Any]) -> Array | None:
    """The generalized forces (n,) of ``records`` when they are all
    :class:`JointLoad` s (which do not depend on the state), else None."""
    Q = np.zeros(model.n)
    for rec in records:
        if not isinstance(rec, JointLoad):
            return None
        _add(model, None, rec, Q, Q, Q)  # type: ignore[arg-type]
    return Q


def _add(model: Model, kin: Kinematics, rec: Any, F: Array, T: Array, Q: Array) -> None:
    if isinstance(rec, Force):
        i = model.body_index(rec.body)
        R = kin.R_N_B[..., i, :, :]
        f = R @ rec.force if rec.frame == "body" else rec.force
        F[..., i, :] += f
        if rec.point is not None:
            arm = R @ (rec.point - kin.params.com[..., i, :])[..., None]
            T[..., i, :] += cross(arm[..., 0], f)
    elif isinstance(rec, Torque):
        i = model.body_index(rec.body)
        T[..., i, :] += kin.R_N_B[..., i, :, :] @ rec.torque if rec.frame == "body" else rec.torque
    elif isinstance(rec, JointLoad):
        k = model.joint_index(rec.joint)
        idx = model.layout.u_index[k]
        if rec.values.shape != idx.shape:
            raise ModelError(
                f"JointLoad on joint {rec.joint!r}: needs {idx.size} values (one per DOF), "
                f"got {rec.values.size}"
            )
        if not np.all(np.isfinite(rec.values)):
            raise ModelError(f"JointLoad on joint {rec.joint!r}: non-finite values")
        Q[..., idx] += rec.values
    else:
        raise ModelError(
            f"unknown load {rec!r}: use kanedyn.Force, kanedyn.Torque or kanedyn.JointLoad"
        )
