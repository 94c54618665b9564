"""The multibody model: bodies, joints (Stoneking's / NASA 42's joint model), and states.

Everything here is frozen. Array fields are copied and made read-only on construction,
so a model cannot change under a cache; "changing" a model means ``attrs.evolve``.
Invalid models cannot be built: every check raises :class:`~kanedyn.ModelError` naming
the body or joint and the problem.

Joint model (refs/notes/42-kane-msd.md §3, 42 Joints slides 10-17)::

    Bi --(inner_point, Bi axes)--> Gi --(slide Delta d along Gi axes)-->
       --(rotation R_Gi_Go: gimbal angles or quaternion)--> Go --(R_Go_Bo)--> Bo,
    with Go's origin at ``outer_point`` in Bo.

Storage order: ``Model`` sorts its joints topologically (every joint after the joint of
its inner body) and stores its bodies in the same order, so **joint k is the inbound
joint of body k**. Use ``model.body_index(name)`` and ``model.joint_index(name)``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn import hooks
from kanedyn.errors import ModelError, did_you_mean
from kanedyn.model.gravity import CentralGravity
from kanedyn.model.modes import Modes, as_modes
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.inertia import validate_inertia

#: how a Python model declares a loop joint (the TOML reader names its [[loops]] instead)
LOOP_REMEDY = "kd.Loop, passed as Model(..., loops=[...])"

__all__ = ["Body", "Frame", "Joint", "JointLimits", "Loop", "Model", "Rotor", "State"]

Array = NDArray[np.float64]


# --------------------------------------------------------------------------- helpers
def _frozen_array(value: ArrayLike, shape: tuple[int, ...], what: str) -> Array:
    """Copy to a read-only float array; sympy expressions give a read-only object array."""
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        arr = _symbolic_array(value, what, exc)
    if arr.shape != shape:
        raise ModelError(f"{what}: expected shape {shape}, got {arr.shape}")
    if arr.dtype == float and not np.all(np.isfinite(arr)):
        raise ModelError(f"{what}: has non-finite entries")
    arr.setflags(write=False)
    return arr


def _symbolic_array(value: Any, what: str, not_numbers: Exception) -> NDArray[Any]:
    """``value`` as an object array of sympy expressions.

    A value can only hold sympy objects once sympy has been imported, so a model of plain
    numbers never imports it. Strings are not parsed into expressions.
    """
    if "sympy" not in sys.modules:
        raise ModelError(f"{what}: cannot be read as numbers ({not_numbers})") from None
    import sympy

    try:
        arr = np.array(
            sympy.Array(value).tolist() if hasattr(value, "tolist") else value, dtype=object
        )
        flat = [sympy.sympify(x, strict=True) for x in arr.ravel()]
    except (TypeError, ValueError, sympy.SympifyError) as exc:
        raise ModelError(
            f"{what}: cannot be read as numbers or sympy expressions ({exc})"
        ) from None
    if arr.ndim == 0:
        return np.array(flat[0], dtype=object)
    out = np.empty(arr.shape, dtype=object)
    out.ravel()[:] = flat
    return out


def is_symbolic(value: Any) -> bool:
    """True for object arrays (sympy entries) and sympy expressions with free symbols."""
    if isinstance(value, np.ndarray):
        return value.dtype == object
    return bool(getattr(value, "free_symbols", None))


def _gravity(value: ArrayLike | CentralGravity) -> Array | CentralGravity:
    if isinstance(value, CentralGravity):
        return value
    return _frozen_array(value, (3,), "model gravity")


def _array_like(value: ArrayLike) -> Array:
    """Accept any array-like at construction; ``__attrs_post_init__`` validates, copies
    and freezes it (the annotation is the stored type)."""
    return value  # type: ignore[return-value]


def _bodies(value: Iterable[Body]) -> tuple[Body, ...]:
    return tuple(value)


def _joints(value: Iterable[Joint]) -> tuple[Joint, ...]:
    return tuple(value)


def _loops(value: Iterable[Loop]) -> tuple[Loop, ...]:
    return tuple(value)


def _scalar(value: Any, what: str) -> Any:
    arr = _frozen_array(value, (), what)
    return arr.item() if arr.dtype == object else float(arr)


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ModelError(f"{what} name must be a non-empty string, got {name!r}")
    return name


# --------------------------------------------------------------------------- Body
@attrs.frozen(eq=False)
class Body:
    """A rigid body.

    Parameters
    ----------
    name : str
    mass : float
        Positive, kg.
    inertia : (3, 3)
        Inertia tensor about the mass centre, in body axes (build it with
        :func:`kanedyn.inertia_tensor`). Symmetric, positive definite, and its principal
        moments satisfy the triangle inequality; or zero (``0`` or a zero matrix): the
        body is a **particle**, a point mass at ``com`` (:attr:`is_particle`). The model
        checks that its mass matrix stays positive definite.
    com : (3,)
        Mass-centre position relative to the body-frame origin, in body axes.
    embedded_momentum : (3,)
        Constant angular momentum of rotors embedded in the body (42's "Constant
        Embedded Momentum"), body axes, N·m·s. It enters H and the gyroscopic terms.
    check_triangle : bool
        Reject principal moments that violate the triangle inequality (default). Set
        False only to reproduce a model that has them, such as 42's Explorer-1 demo.
    allow_singular : bool
        Accept a zero mass and an inertia that is only positive semidefinite: a
        massless link, or a point mass (URDF frame links, massless links between two
        joints). :class:`Model` then checks that every joint still moves some mass
        (``Model`` raises a :class:`~kanedyn.ModelError` naming a joint with no mass
        outboard). Negative or non-finite mass and indefinite inertia stay errors.
    modes : Modes, optional
        Assumed-mode data: the body is flexible (:class:`~kanedyn.Modes`; mass, ``com``
        and inertia are its undeformed properties). Its modal coordinates and speeds
        follow the joints' in the state (``Model.nf``).
    """

    name: str = attrs.field()
    mass: float = attrs.field()
    inertia: Array = attrs.field(converter=_array_like)
    com: Array = attrs.field(default=(0.0, 0.0, 0.0), converter=_array_like)
    embedded_momentum: Array = attrs.field(default=(0.0, 0.0, 0.0), converter=_array_like)
    check_triangle: bool = attrs.field(default=True, kw_only=True)
    allow_singular: bool = attrs.field(default=False, kw_only=True)
    modes: Modes | None = attrs.field(default=None, kw_only=True, converter=as_modes)

    def __attrs_post_init__(self) -> None:
        name = _check_name(self.name, "body")
        mass = _scalar(self.mass, f"body {name!r}: mass")
        if self.allow_singular:
            if not is_symbolic(mass) and (not np.isfinite(mass) or mass < 0.0):
                raise ModelError(f"body {name!r}: mass must be non-negative and finite, got {mass}")
        elif not is_symbolic(mass) and (not np.isfinite(mass) or mass <= 0.0):
            raise ModelError(f"body {name!r}: mass must be positive and finite, got {mass}")
        inertia = self.inertia
        if np.ndim(inertia) == 0 and not is_symbolic(inertia) and inertia == 0:
            inertia = np.zeros((3, 3))  # inertia=0: a particle
        inertia = _frozen_array(inertia, (3, 3), f"body {name!r}: inertia")
        if is_symbolic(inertia):
            if any(
                (inertia[a, b] - inertia[b, a]).expand() != 0 for a in range(3) for b in range(a)
            ):
                raise ModelError(f"body {name!r}: inertia is not symmetric:\n{inertia}")
        else:
            inertia = validate_inertia(
                inertia,
                name=f"body {name!r}",
                check_triangle=self.check_triangle,
                allow_singular=self.allow_singular,
            )
        inertia.setflags(write=False)
        object.__setattr__(self, "mass", mass)
        object.__setattr__(self, "inertia", inertia)
        object.__setattr__(self, "com", _frozen_array(self.com, (3,), f"body {name!r}: com"))
        object.__setattr__(
            self,
            "embedded_momentum",
            _frozen_array(self.embedded_momentum, (3,), f"body {name!r}: embedded_momentum"),
        )

    @property
    def is_particle(self) -> bool:
        """True when the inertia is exactly zero (a point mass at ``com``)."""
        return all(x == 0 for x in np.asarray(self.inertia, dtype=object).ravel())


# --------------------------------------------------------------------------- Joint
@attrs.frozen(eq=False)
class JointLimits:
    """A 1-DOF joint's range and actuator limits, as model files give them (URDF
    ``<limit>``, MJCF ``range``). The equations of motion do not hold them;
    :func:`kanedyn.simulate` checks the range (``limits="warn"``, the default) or makes
    its bounds one-sided stops (``limits="stop"``, :mod:`kanedyn.simulation.limits`).

    ``lower``, ``upper``: position range (rad or m); ``effort``: largest torque or force
    (N·m or N); ``velocity``: largest speed (rad/s or m/s). ``inf`` when not given.
    """

    lower: float = attrs.field(default=-np.inf, converter=float)
    upper: float = attrs.field(default=np.inf, converter=float)
    effort: float = attrs.field(default=np.inf, converter=float)
    velocity: float = attrs.field(default=np.inf, converter=float)


def _finite(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{what}: expected a number, got {value!r}") from None
    if not np.isfinite(x):
        raise ModelError(f"{what}: must be finite, got {x}")
    return x


@attrs.frozen(eq=False)
class Rotor:
    r"""A geared motor rotor driving a 1-DOF joint (seed 004, the gear-train chapter).

    The rotor spins about the joint's axis, mounted on a carrier body (the joint's
    ``"inner"`` body, where the motor usually sits, or its ``"outer"`` one), behind a
    gear of ratio ``n``: its absolute angular velocity is

    .. math:: \omega_{rotor} = \omega_{carrier} + n\,\dot q\,a

    (a: the joint axis; for a slide, ``n`` is in rad/m). Its kinetic energy
    ``½ ω_rotorᵀ J_r ω_rotor`` with ``J_r = J a aᵀ + J_t (U - a aᵀ)`` adds the reflected
    inertia ``n² J`` to the joint's diagonal of M and the coupling and gyroscopic terms
    of the carrier's motion (:mod:`kanedyn.dynamics.rotors`). The rotor's mass is part
    of the carrier body's.

    Parameters
    ----------
    inertia : float
        Axial moment J of the rotor (kg m²), positive.
    ratio : float
        Gear ratio n (rotor turns per joint turn), non-zero.
    transverse : float
        Transverse moment J_t (kg m²), default 0.
    body : "inner" or "outer"
        The carrier body.
    reflected_only : bool
        Keep only the reflected inertia ``n² J`` on the joint's diagonal (the limit of a
        large ratio at fixed ``n² J``): MuJoCo's and Pinocchio's ``armature``.
    """

    inertia: float = attrs.field(converter=lambda v: _finite(v, "Rotor.inertia"))
    ratio: float = attrs.field(default=1.0, converter=lambda v: _finite(v, "Rotor.ratio"))
    transverse: float = attrs.field(default=0.0, converter=lambda v: _finite(v, "Rotor.transverse"))
    body: str = attrs.field(default="inner")
    reflected_only: bool = attrs.field(default=False)

    def __attrs_post_init__(self) -> None:
        if self.inertia <= 0.0:
            raise ModelError(f"Rotor.inertia must be positive, got {self.inertia}")
        if self.ratio == 0.0:
            raise ModelError("Rotor.ratio must be non-zero")
        if self.transverse < 0.0:
            raise ModelError(f"Rotor.transverse must be non-negative, got {self.transverse}")
        if self.body not in ("inner", "outer"):
            raise ModelError(f"Rotor.body must be 'inner' or 'outer', got {self.body!r}")


_ROT_TYPES = ("gimbal", "spherical")


def _cyclic_sequence(axis: int, what: str) -> str:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or axis not in (1, 2, 3):
        raise ModelError(f"{what}: axis must be 1, 2 or 3, got {axis!r}")
    return "".join(str((axis - 1 + k) % 3 + 1) for k in range(3))


@attrs.frozen(eq=False)
class Joint:
    """A joint from an inner body Bi (``None`` = inertial frame N) to an outer body Bo.

    Translations come first (``trn_dof`` slides along the Gi axes named by the first
    digits of ``trn_seq``), then rotations: ``gimbal`` (the first ``rot_dof`` angles of
    the body-fixed Euler sequence ``rot_seq``; speeds are the angle rates) or
    ``spherical`` (a scalar-last quaternion of Go in Gi; speeds are Go's angular velocity
    relative to Gi, in Go components).

    Parameters
    ----------
    inner_point : (3,)
        Gi origin in Bi axes, relative to the Bi frame origin (N coordinates for a root).
    outer_point : (3,)
        Go origin in Bo axes, relative to the Bo frame origin.
    inner_rotation : (3, 3)
        ``R_Bi_Gi`` (42's ``C_GiBi`` transposed).
    outer_rotation : (3, 3)
        ``R_Go_Bo`` (42's ``C_BoGo`` transposed).
    stiffness, damping : float or (ndof,)
        One value per DOF, rotational first; a scalar applies to every DOF. A spherical
        joint's spring acts on the rotation vector of Go in Gi.
    stiffness_poly, damping_poly : (2,) or (ndof, 2)
        MuJoCo's higher-order spring and damper coefficients ``(k₂, k₃)`` and ``(c₂,
        c₃)`` per DOF (a pair applies to every DOF; default none): the generalized force
        on a DOF with coordinate ``x`` and speed ``v`` is ``-(k x + k₂ x² + k₃ x³) - (c v
        + c₂ v|v| + c₃ v³)`` (:func:`kanedyn.joints.spring_damper`), its spring potential
        ``½ k x² + ⅓ k₂ x³ + ¼ k₃ x⁴``. Any finite values (MuJoCo's condition for a
        restoring spring and a dissipating damper is ``k₃ ≥ 0``, ``k₂² ≤ 4 k k₃``, and the
        same for ``c``). A spherical joint's higher-order spring terms are radial,
        ``⅓ k₂ r³ + ¼ k₃ r⁴`` of its rotation angle ``r = |φ|`` (MuJoCo's ball joint,
        :func:`kanedyn.joints.spherical_spring`): the same pair on its three rotational
        DOFs, with an isotropic stiffness there.
    limits : JointLimits or None
        Range and actuator limits read from a model file; :func:`kanedyn.simulate`
        checks the range or makes it a stop (``limits``), the effort and speed limits
        are recorded only.
    rotor : Rotor or None
        A geared motor rotor driving this joint (1-DOF joints only).
    inner_node : int or str, optional
        A node of the flexible inner body (``Body.modes``; its 0-based index into
        ``Modes.node_positions``, or its name in ``Modes.node_names``): Gi rides on the
        node's elastic displacement ``Ψ_kη`` and rotation ``Θ_kη``
        (:func:`kanedyn.spatial.modal.node_frame`). ``inner_point`` and
        ``inner_rotation`` place Gi on the undeformed body as before; Gi is fixed in the
        node's frame (usually ``inner_point`` is the node's position). None: Gi is fixed
        in the body frame.
    outer_node : int or str, optional
        A node of the flexible outer body: Go is fixed in that node's frame (placed on
        the undeformed body by ``outer_point`` and ``outer_rotation``), so the outer
        body's frame moves relative to Go by the node's elastic motion (needed for
        free-free or FEM modes; unnecessary when the outer body's modes are clamped at
        its joint, as :func:`kanedyn.beam_body`'s are at its frame origin).
    """

    name: str = attrs.field()
    inner: str | None = attrs.field()
    outer: str = attrs.field()
    rot_type: str = attrs.field(default="gimbal")
    rot_dof: int = attrs.field(default=0)
    rot_seq: str = attrs.field(default="123")
    trn_dof: int = attrs.field(default=0)
    trn_seq: str = attrs.field(default="123")
    inner_point: Array = attrs.field(default=(0.0, 0.0, 0.0), converter=_array_like)
    outer_point: Array = attrs.field(default=(0.0, 0.0, 0.0), converter=_array_like)
    inner_rotation: Array = attrs.field(default=np.eye(3), converter=_array_like)
    outer_rotation: Array = attrs.field(default=np.eye(3), converter=_array_like)
    stiffness: Array = attrs.field(default=0.0, converter=_array_like)
    damping: Array = attrs.field(default=0.0, converter=_array_like)
    limits: JointLimits | None = attrs.field(default=None, kw_only=True)
    stiffness_poly: Array = attrs.field(default=0.0, converter=_array_like, kw_only=True)
    damping_poly: Array = attrs.field(default=0.0, converter=_array_like, kw_only=True)
    rotor: Rotor | None = attrs.field(default=None, kw_only=True)
    inner_node: int | str | None = attrs.field(default=None, kw_only=True)
    outer_node: int | str | None = attrs.field(default=None, kw_only=True)

    _kind = "joint"  # the word in error messages
    _outer_may_be_N = False

    def __attrs_post_init__(self) -> None:
        name = _check_name(self.name, self._kind)
        what = f"{self._kind} {name!r}"
        if self.rotor is not None:
            if not isinstance(self.rotor, Rotor):
                raise ModelError(f"{what}: rotor must be a kanedyn Rotor, got {self.rotor!r}")
            if self.rot_dof + self.trn_dof != 1 or self.rot_type != "gimbal":
                raise ModelError(f"{what}: a geared rotor drives a 1-DOF hinge or slide")
        if self.inner is not None:
            _check_name(self.inner, f"{what}: inner body")
        for side in ("inner_node", "outer_node"):
            node = getattr(self, side)
            if node is None:
                continue
            if self._kind != "joint":
                raise ModelError(f"{what}: a {self._kind} cannot attach at a node ({side})")
            if side == "inner_node" and self.inner is None:
                raise ModelError(
                    f"{what}: inner_node={node!r} needs a flexible inner body; the inner side is N"
                )
            if isinstance(node, (bool, np.bool_)) or not (
                isinstance(node, str) and node or isinstance(node, (int, np.integer)) and node >= 0
            ):
                raise ModelError(
                    f"{what}: {side} must be a node index (0-based) or a node name, got {node!r}"
                )
            if not isinstance(node, str):
                object.__setattr__(self, side, int(node))
        if self.outer is not None or not self._outer_may_be_N:
            _check_name(self.outer, f"{what}: outer body")
        if self.inner == self.outer:
            where = "N" if self.outer is None else repr(self.outer)
            raise ModelError(f"{what}: inner and outer body are both {where}")
        if self.rot_type not in _ROT_TYPES:
            raise ModelError(
                f"{what}: rot_type must be 'gimbal' or 'spherical', got {self.rot_type!r}"
            )
        for field, dof in (("rot_dof", self.rot_dof), ("trn_dof", self.trn_dof)):
            if isinstance(dof, bool) or not isinstance(dof, (int, np.integer)) or not 0 <= dof <= 3:
                raise ModelError(f"{what}: {field} must be an integer 0-3, got {dof!r}")
        if self.rot_type == "spherical" and self.rot_dof != 3:
            raise ModelError(f"{what}: a spherical joint has rot_dof = 3, got {self.rot_dof}")
        for field, seq in (("rot_seq", self.rot_seq), ("trn_seq", self.trn_seq)):
            try:
                rot.parse_sequence(seq)
            except ModelError as exc:
                raise ModelError(f"{what}: {field}: {exc}") from None
        if len(set(self.trn_seq)) != 3:
            raise ModelError(f"{what}: trn_seq {self.trn_seq!r} must name three distinct axes")
        object.__setattr__(self, "rot_dof", int(self.rot_dof))
        object.__setattr__(self, "trn_dof", int(self.trn_dof))
        for field in ("inner_point", "outer_point"):
            object.__setattr__(
                self, field, _frozen_array(getattr(self, field), (3,), f"{what}: {field}")
            )
        for field in ("inner_rotation", "outer_rotation"):
            R = _frozen_array(getattr(self, field), (3, 3), f"{what}: {field}")
            if not is_symbolic(R) and not rot.is_rotation_matrix(R, tol=1e-9):
                raise ModelError(f"{what}: {field} is not a proper orthonormal matrix:\n{R}")
            object.__setattr__(self, field, R)
        ndof = self.rot_dof + self.trn_dof
        for field in ("stiffness", "damping"):
            where = f"{what}: {field} (one value per DOF, rotational first)"
            raw = getattr(self, field)
            values: NDArray[Any] = _frozen_array(raw, np.shape(raw), where)
            if values.ndim == 0:
                values = np.full(ndof, values.item(), dtype=values.dtype)
            if values.shape != (ndof,):
                raise ModelError(f"{where}: expected {ndof} values, got shape {values.shape}")
            values.setflags(write=False)
            if not is_symbolic(values) and np.any(values < 0.0):
                raise ModelError(f"{what}: {field} must be non-negative, got {values.tolist()}")
            object.__setattr__(self, field, values)
        for field in ("stiffness_poly", "damping_poly"):
            where = f"{what}: {field} (the (x², x³) coefficients (k₂, k₃) per DOF)"
            raw = getattr(self, field)
            values = _frozen_array(raw, np.shape(raw), where)
            if values.ndim == 0 or values.shape == (2,):
                values = np.array(np.broadcast_to(values, (ndof, 2)))
            if values.shape != (ndof, 2):
                raise ModelError(
                    f"{where}: expected a pair or {ndof} pairs (shape ({ndof}, 2)), "
                    f"got shape {values.shape}"
                )
            values.setflags(write=False)
            object.__setattr__(self, field, values)
        if self.rot_type == "spherical":
            self._check_radial_spring(what)

    def _check_radial_spring(self, what: str) -> None:
        """A spherical joint's polynomial spring is radial, ``⅓ k₂ r³ + ¼ k₃ r⁴`` of
        ``r = |φ|`` (MuJoCo's ball joint; :func:`kanedyn.joints.spherical_spring`): one
        pair ``(k₂, k₃)`` on its three rotational DOFs, and an isotropic stiffness."""
        kp, k = self.stiffness_poly[:3], self.stiffness[:3]
        if not is_symbolic(kp) and not np.any(kp != 0.0):
            return
        if any(bool(kp[i, c] != kp[0, c]) for i in (1, 2) for c in (0, 1)):
            raise ModelError(
                f"{what}: a spherical joint's polynomial spring is radial (⅓ k₂ r³ + ¼ k₃ r⁴ "
                "of the rotation angle r = |φ|, MuJoCo's ball joint): stiffness_poly must be "
                f"the same pair (k₂, k₃) on its three rotational DOFs, got {kp.tolist()}"
            )
        if any(bool(k[i] != k[0]) for i in (1, 2)):
            raise ModelError(
                f"{what}: a spherical joint's polynomial spring (stiffness_poly "
                f"{kp[0].tolist()}) needs an isotropic stiffness, the same k on its three "
                f"rotational DOFs (MuJoCo's radial law -(k + k₂ r + k₃ r²) φ), got "
                f"{k.tolist()}; make the stiffness isotropic or drop the polynomial terms"
            )

    # -- derived sizes -------------------------------------------------------------
    @property
    def ndof(self) -> int:
        """Number of degrees of freedom (rotational + translational)."""
        return self.rot_dof + self.trn_dof

    @property
    def n_rot_coordinates(self) -> int:
        """Rotational coordinates: 4 (quaternion) for spherical, else rot_dof angles."""
        return 4 if self.rot_type == "spherical" else self.rot_dof

    @property
    def is_root(self) -> bool:
        return self.inner is None

    # -- constructors --------------------------------------------------------------
    @classmethod
    def free(cls, name: str, outer: str, inner: str | None = None, **kw: Any) -> Joint:
        """Six-DOF joint: three slides along the Gi axes, then a spherical rotation."""
        return cls(name, inner, outer, rot_type="spherical", rot_dof=3, trn_dof=3, **kw)

    @classmethod
    def revolute(cls, name: str, inner: str | None, outer: str, axis: int = 3, **kw: Any) -> Joint:
        """One-DOF hinge about Gi (= Go) axis ``axis`` (1, 2 or 3)."""
        return cls(
            name, inner, outer, rot_dof=1, rot_seq=_cyclic_sequence(axis, f"joint {name!r}"), **kw
        )

    @classmethod
    def prismatic(cls, name: str, inner: str | None, outer: str, axis: int = 1, **kw: Any) -> Joint:
        """One-DOF slide along Gi axis ``axis`` (1, 2 or 3)."""
        return cls(
            name, inner, outer, trn_dof=1, trn_seq=_cyclic_sequence(axis, f"joint {name!r}"), **kw
        )

    @classmethod
    def spherical(cls, name: str, inner: str | None, outer: str, **kw: Any) -> Joint:
        """Three-DOF ball joint (quaternion coordinates, relative angular velocity speeds)."""
        return cls(name, inner, outer, rot_type="spherical", rot_dof=3, **kw)

    @classmethod
    def gimbal(
        cls, name: str, inner: str | None, outer: str, seq: str = "231", dof: int = 2, **kw: Any
    ) -> Joint:
        """Gimbal: the first ``dof`` angles of the body-fixed Euler sequence ``seq``."""
        return cls(name, inner, outer, rot_type="gimbal", rot_dof=dof, rot_seq=seq, **kw)

    @classmethod
    def weld(cls, name: str, inner: str | None, outer: str, **kw: Any) -> Joint:
        """Zero-DOF joint (a rigid attachment, or a fixed root when ``inner`` is None)."""
        return cls(name, inner, outer, **kw)


# --------------------------------------------------------------------------- Frame
@attrs.frozen(eq=False)
class Frame:
    """A named frame F fixed in a body (Pinocchio's operational frames).

    Imported models keep the frames of the links they merge (URDF links attached by
    fixed joints, sensor and tool frames) as frames. Query them with
    :func:`kanedyn.frame_placement`, :func:`kanedyn.frame_velocity` and
    :func:`kanedyn.frame_acceleration`.

    Parameters
    ----------
    name : str
    body : str or None
        The body F is fixed in; ``None`` is N.
    point : (3,)
        F's origin in body axes, relative to the body-frame origin.
    rotation : (3, 3)
        ``R_B_F`` (F components to body components).
    """

    name: str = attrs.field()
    body: str | None = attrs.field()
    point: Array = attrs.field(default=(0.0, 0.0, 0.0), converter=_array_like)
    rotation: Array = attrs.field(default=np.eye(3), converter=_array_like)

    def __attrs_post_init__(self) -> None:
        name = _check_name(self.name, "frame")
        if self.body is not None:
            _check_name(self.body, f"frame {name!r}: body")
        object.__setattr__(self, "point", _frozen_array(self.point, (3,), f"frame {name!r}: point"))
        R = _frozen_array(self.rotation, (3, 3), f"frame {name!r}: rotation")
        if not is_symbolic(R) and not rot.is_rotation_matrix(R, tol=1e-9):
            raise ModelError(f"frame {name!r}: rotation is not a proper orthonormal matrix:\n{R}")
        object.__setattr__(self, "rotation", R)


def _frames(value: Iterable[Frame]) -> tuple[Frame, ...]:
    return tuple(value)


# --------------------------------------------------------------------------- Loop
@attrs.frozen(eq=False)
class Loop(Joint):
    """A loop joint: a joint that closes a kinematic cycle instead of adding a tree edge.

    It has exactly the fields and constructors of :class:`Joint` (``Loop.revolute``,
    ``Loop.prismatic``, ``Loop.spherical``, ``Loop.weld``, ``Loop.gimbal``, the general
    form with ``rot_type``, ``rot_dof``, ``rot_seq``, ``trn_dof``, ``trn_seq``), and the
    same frames: Gi fixed in the inner body at ``inner_point`` / ``inner_rotation``, Go
    fixed in the outer body at ``outer_point`` / ``outer_rotation``. Either side may be N
    (``None``). Its coordinates are not states: the directions it leaves free are free,
    and the others become the configuration constraints ``Φ(q) = 0`` of the model
    (:mod:`kanedyn.dynamics.loops`): the Gi axes that are not slide axes (translation),
    and for ``rot_dof`` 0, 1, 2 the 3, 2, 1 rotational constraints of the gimbal. A loop
    carries no springs or dampers (``stiffness``, ``damping`` and their ``_poly``
    coefficients must be zero).

    >>> import kanedyn as kd
    >>> kd.Loop.revolute("close", inner="coupler", outer="rocker", axis=3).ndof
    1
    """

    _kind = "loop"
    _outer_may_be_N = True

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for field in ("stiffness", "damping", "stiffness_poly", "damping_poly"):
            values = getattr(self, field)
            if is_symbolic(values) or np.any(values != 0.0):
                raise ModelError(
                    f"loop {self.name!r}: {field} must be zero (a loop joint's coordinates are "
                    "not states; put springs on tree joints or apply loads)"
                )

    @property
    def n_constraints(self) -> int:
        """Number of constrained directions, ``6 - ndof`` (all of them, spatial)."""
        return 6 - self.ndof


# --------------------------------------------------------------------------- State
@attrs.frozen(eq=False)
class State:
    """Generalized coordinates ``q`` and speeds ``u = [u | s]`` (read-only arrays).

    ``q = [rotational coordinates of all joints | translational coordinates]`` and
    ``u = [rotational speeds of all joints | translational speeds]``, each in the
    model's joint order (see ``Model.coordinates`` / ``Model.speeds``).
    """

    q: Array = attrs.field(converter=_array_like)
    u: Array = attrs.field(converter=_array_like)

    def __attrs_post_init__(self) -> None:
        for field in ("q", "u"):
            try:
                arr = np.array(getattr(self, field), dtype=float)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"state.{field}: cannot be read as numbers ({exc})") from None
            if arr.ndim != 1:
                raise ModelError(f"state.{field}: must be one-dimensional, got shape {arr.shape}")
            arr.setflags(write=False)
            object.__setattr__(self, field, arr)


# --------------------------------------------------------------------------- Model
@attrs.frozen(eq=False)
class Model:
    """A tree of rigid bodies connected by joints, in uniform or central gravity.

    ``gravity`` is a uniform acceleration (3 numbers, N components) or a
    :class:`~kanedyn.CentralGravity` field (a central body, gravity-gradient torques on
    every body); ``model.uniform_gravity`` is the vector (zero in a central field) and
    ``model.central_gravity`` the field (None when uniform).

    Joints may be given in any order; they are stored topologically sorted, and the
    bodies in the same order, so that joint k is the inbound joint of body k. Every body
    must have exactly one inbound joint; a root's joint has ``inner=None`` (use
    ``Joint.free`` for a free-floating root and ``Joint.weld`` for a fixed one).

    ``frames`` are named :class:`Frame` records fixed in the bodies (or in N), for
    :func:`kanedyn.frame_placement` and its rates; they do not change the dynamics.
    """

    bodies: tuple[Body, ...] = attrs.field(converter=_bodies)
    joints: tuple[Joint, ...] = attrs.field(converter=_joints)
    gravity: Array | CentralGravity = attrs.field(
        default=attrs.Factory(lambda: np.zeros(3)), converter=_gravity
    )
    frames: tuple[Frame, ...] = attrs.field(default=(), converter=_frames, kw_only=True)
    loops: tuple[Loop, ...] = attrs.field(default=(), converter=_loops, kw_only=True)
    planar: bool = attrs.field(default=False, kw_only=True)

    # derived layout (filled in __attrs_post_init__) ------------------------------
    nq: int = attrs.field(init=False, default=0)
    nu: int = attrs.field(init=False, default=0)
    ns: int = attrs.field(init=False, default=0)
    layout: _Layout = attrs.field(init=False, default=None, repr=False)
    # what is derived from the model (plan, parameters, compiled kernels): see `derived`
    _derived: dict[str, Any] = attrs.field(init=False, factory=dict, repr=False)

    def derived(self, name: str, build: Callable[[Model], Any]) -> Any:
        """``build(self)``, computed on first use and kept on the model for its lifetime.

        A model is frozen, so what is derived from it (its evaluation plan, its parameter
        arrays, its compiled kernels) is a pure function of it. The store lives on the
        model, so it is freed with the model; it is not pickled (a copy rebuilds it).
        """
        store = self._derived
        try:
            return store[name]
        except KeyError:
            value = store[name] = build(self)
            return value

    def __getstate__(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in attrs.fields(type(self)) if f.init}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __attrs_post_init__(self) -> None:
        bodies, joints = _sorted_tree(self.bodies, self.joints)
        _check_loops(bodies, joints, self.loops)
        if not isinstance(self.planar, (bool, np.bool_)):
            raise ModelError(f"model planar must be True or False, got {self.planar!r}")
        object.__setattr__(self, "bodies", bodies)
        object.__setattr__(self, "joints", joints)
        _check_frames(self.frames, bodies)
        _check_mass_outboard(bodies, joints)
        _check_nodes(bodies, joints)
        central = self.central_gravity
        layout = _Layout.build(
            bodies,
            joints,
            self.uniform_gravity,
            central is not None and central.is_symbolic,
        )
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "nq", layout.nq)
        object.__setattr__(self, "nu", layout.nu)
        object.__setattr__(self, "ns", layout.ns)
        if any(b.is_particle for b in bodies):
            hooks.check_mass_matrix(self)  # needs M: the dynamics layer (kanedyn.hooks)

    def __str__(self) -> str:
        """A short summary: bodies, joints and their kinds, DOF, loops, gravity (the full
        record is ``repr(model)``)."""

        def kind(j: Joint) -> str:
            rot = "" if j.rot_dof == 0 else f"{j.rot_type} {j.rot_dof}"
            rot = {"gimbal 1": "revolute", "spherical 3": "spherical"}.get(rot, rot)
            trn = "" if j.trn_dof == 0 else f"slide {j.trn_dof}"
            return " + ".join(x for x in (rot, trn) if x) or "weld"

        def names(items: Sequence[Any]) -> str:
            shown = ", ".join(x.name for x in items[:6])
            return shown + (f", ... ({len(items)} in all)" if len(items) > 6 else "")

        joints = ", ".join(
            f"{j.name} ({kind(j)}: {'N' if j.inner is None else j.inner} -> {j.outer})"
            for j in self.joints[:6]
        ) + (f", ... ({self.nb} in all)" if self.nb > 6 else "")
        lines = [
            f"Model: {self.nb} bodies, {self.n} DOF (nq = {self.nq}, nu = {self.nu}, "
            f"ns = {self.ns}){', symbolic' if self.is_symbolic else ''}",
            f"  bodies: {names(self.bodies)}",
            f"  joints: {joints}",
        ]
        if self.loops:
            lines.append(f"  loops: {names(self.loops)}")
        if self.central_gravity is not None:
            lines.append(f"  gravity: {self.central_gravity!r}")
        else:
            g = ", ".join(
                str(x) if is_symbolic(x) else f"{float(x):g}" for x in self.uniform_gravity
            )
            lines.append(f"  gravity: ({g})")
        return "\n".join(lines)

    # -- gravity -------------------------------------------------------------------
    @property
    def central_gravity(self) -> CentralGravity | None:
        """The central field, or None when gravity is uniform."""
        g = self.gravity
        return g if isinstance(g, CentralGravity) else None

    @property
    def uniform_gravity(self) -> Array:
        """The uniform gravity vector (3,) in N; zero in a central field."""
        g = self.gravity
        return np.zeros(3) if isinstance(g, CentralGravity) else g

    # -- sizes and names -----------------------------------------------------------
    @property
    def nb(self) -> int:
        """Number of bodies (= number of joints)."""
        return len(self.bodies)

    @property
    def n(self) -> int:
        """Number of generalized speeds, ``nu + ns``."""
        return self.nu + self.ns

    @property
    def nf(self) -> int:
        """Number of modal coordinates of the flexible bodies (``Body.modes``); the
        state is ``q = [q_joints | η]``, ``u = [u | s | ξ]``. Counted once per model
        (every right-hand side asks)."""
        nf: int = self.derived(
            "nf", lambda m: sum(b.modes.n for b in m.bodies if b.modes is not None)
        )
        return nf

    @property
    def nq_total(self) -> int:
        """Length of a state's ``q``: the joints' coordinates and the modal coordinates,
        ``nq + nf`` (= ``nq`` for a rigid model)."""
        return self.nq + self.nf

    @property
    def n_total(self) -> int:
        """Length of a state's ``u``: the joints' speeds and the modal speeds,
        ``n + nf`` (= ``n`` for a rigid model)."""
        return self.n + self.nf

    def modal_slices(self) -> list[tuple[int, slice]]:
        """``(body index, slice into η)`` of every flexible body, in body order."""
        out, k = [], 0
        for i, b in enumerate(self.bodies):
            if b.modes is not None:
                out.append((i, slice(k, k + b.modes.n)))
                k += b.modes.n
        return out

    def modal(self, body: str) -> NDArray[np.intp]:
        """Indices of a flexible body's modal coordinates into ``η`` (and ``ξ``); the
        state's entries are ``q[nq + i]``, ``u[n + i]``."""
        i = self.body_index(body)
        for j, sl in self.modal_slices():
            if j == i:
                return np.arange(sl.start, sl.stop, dtype=np.intp)
        raise ModelError(f"body {body!r} is not flexible (it has no modes)")

    def body_index(self, name: str) -> int:
        try:
            return self.layout.body_index[name]
        except KeyError:
            names = list(self.layout.body_index)
            raise ModelError(
                f"unknown body {name!r}{did_you_mean(name, names)}; bodies are {names}"
            ) from None

    def joint_index(self, name: str) -> int:
        try:
            return self.layout.joint_index[name]
        except KeyError:
            names = list(self.layout.joint_index)
            hint = did_you_mean(name, names)
            if not hint and name in {lp.name for lp in self.loops}:
                hint = " (it is a loop joint, which has no coordinates of its own)"
            raise ModelError(f"unknown joint {name!r}{hint}; joints are {names}") from None

    def body(self, name: str) -> Body:
        return self.bodies[self.body_index(name)]

    def frame(self, name: str) -> Frame:
        """The :class:`Frame` called ``name``."""
        for f in self.frames:
            if f.name == name:
                return f
        names = [f.name for f in self.frames]
        raise ModelError(f"unknown frame {name!r}{did_you_mean(name, names)}; frames are {names}")

    def joint(self, name: str) -> Joint:
        return self.joints[self.joint_index(name)]

    def coordinates(self, joint: str) -> NDArray[np.intp]:
        """Indices into ``q`` of a joint's coordinates: rotational, then translational."""
        k = self.joint_index(joint)
        return self.layout.q_index[k].copy()

    def speeds(self, joint: str) -> NDArray[np.intp]:
        """Indices into ``u`` (= [u | s]) of a joint's speeds: rotational, then translational."""
        k = self.joint_index(joint)
        return self.layout.u_index[k].copy()

    @property
    def total_mass(self) -> float:
        return float(sum(b.mass for b in self.bodies))

    # -- states --------------------------------------------------------------------
    def initial_state(self) -> State:
        """Zero angles and displacements, identity quaternions, zero speeds."""
        q = np.zeros(self.nq + self.nf)
        q[self.layout.quat_q[:, 3]] = 1.0
        return State(q, np.zeros(self.n + self.nf))

    @property
    def is_symbolic(self) -> bool:
        """True when any parameter is a sympy expression (see :mod:`kanedyn.symbolic`)."""
        return self.layout.symbolic or any(
            is_symbolic(getattr(lp, f))
            for lp in self.loops
            for f in ("inner_point", "outer_point", "inner_rotation", "outer_rotation")
        )

    def subs(self, values: dict[Any, Any]) -> Model:
        """A numeric copy: every sympy parameter with ``values`` substituted (``sympy.subs``)."""

        def num(x: Any) -> Any:
            if isinstance(x, np.ndarray) and x.dtype == object:
                try:
                    return np.array([float(e.subs(values)) for e in x.ravel()]).reshape(x.shape)
                except TypeError:
                    missing = sorted(
                        {str(s) for e in x.ravel() for s in e.subs(values).free_symbols}
                    )
                    raise ModelError(f"subs: no value for symbols {missing}") from None
            if is_symbolic(x):
                return num(np.array([x], dtype=object))[0]
            return x

        bodies = [
            attrs.evolve(
                b,
                **{f: num(getattr(b, f)) for f in ("mass", "inertia", "com", "embedded_momentum")},
            )
            for b in self.bodies
        ]
        fields = (
            "inner_point",
            "outer_point",
            "inner_rotation",
            "outer_rotation",
            "stiffness",
            "damping",
            "stiffness_poly",
            "damping_poly",
        )
        joints = [attrs.evolve(j, **{f: num(getattr(j, f)) for f in fields}) for j in self.joints]
        frames = [
            attrs.evolve(f, point=num(f.point), rotation=num(f.rotation)) for f in self.frames
        ]
        loops = [attrs.evolve(j, **{f: num(getattr(j, f)) for f in fields}) for j in self.loops]
        central = self.central_gravity
        gravity = (
            num(self.gravity)
            if central is None
            else attrs.evolve(
                central, **{f: num(getattr(central, f)) for f in ("mu", "J2", "radius")}
            )
        )
        return Model(
            bodies,
            joints,
            gravity=gravity,
            frames=frames,
            loops=loops,
            planar=self.planar,
        )

    def assemble(self, state: State, fix: Iterable[int | str] = (), **kw: Any) -> State:
        """``state`` with every loop closed: ``Φ(q) = 0`` by Newton for the coordinates
        not in ``fix`` (joint names, or indices of angles and slides), then ``A u = 0``
        for their speeds; see :func:`kanedyn.dynamics.loops.assemble` (called through
        :mod:`kanedyn.hooks`, as it is in the dynamics layer above this one)."""
        return hooks.assemble(self, state, fix, **kw)

    def check_state(self, state: State, *, flexible: bool = False) -> State:
        """Return ``state`` if its sizes fit this model and it is finite, else raise.

        ``flexible``: the caller takes the full state of a model with flexible bodies,
        ``q = [q_joints | η]`` (``nq_total``), ``u = [u | s | ξ]`` (``n_total``); without
        it such a state is refused with the reason (the caller runs the rigid tree only).
        """
        if self.is_symbolic:
            raise ModelError(
                "this model has symbolic parameters, and numeric evaluation needs numbers: "
                "use kanedyn.symbolic, or model.subs({...}) to give them values first"
            )
        if not isinstance(state, State):
            raise ModelError(f"expected a kanedyn State, got {type(state).__name__}")
        nq, n = (self.nq_total, self.n_total) if flexible else (self.nq, self.n)
        if self.nf and not flexible and state.q.shape == (self.nq_total,):
            raise ModelError(
                "this model has flexible bodies: kd.simulate (engine='dense'), "
                "kd.mass_matrix, kd.forcing, kd.forward_dynamics, kd.kinetic_energy, "
                "kd.potential_energy, kd.momentum, kd.kinematics and kd.linearize take its "
                "states (q = [q_joints | eta], u = [u | s | xi]); this function does not yet"
            )
        flex = flexible and self.nf > 0
        if state.q.shape != (nq,):
            sizes = f"nq + nf = {self.nq} + {self.nf}" if flex else f"nq = {self.nq}"
            raise ModelError(f"state.q has length {state.q.size}; this model has {sizes}")
        if state.u.shape != (n,):
            sizes = f"nu + ns{' + nf' if flex else ''} = {self.nu} + {self.ns}"
            raise ModelError(
                f"state.u has length {state.u.size}; this model has "
                f"{sizes}{f' + {self.nf}' if flex else ''}"
            )
        if not (np.all(np.isfinite(state.q)) and np.all(np.isfinite(state.u))):
            raise ModelError("state has non-finite entries")
        return state

    def set_modes(
        self,
        state: State,
        body: str,
        *,
        amplitudes: ArrayLike | None = None,
        rates: ArrayLike | None = None,
    ) -> State:
        """Return a new State with a flexible body's modal coordinates ``η`` (its
        ``amplitudes``, as many as the body's modes) and modal speeds ``ξ = η̇``
        (``rates``) set; the state's other entries are kept."""
        self.check_state(state, flexible=True)
        idx = self.modal(body)
        q, u = state.q.copy(), state.u.copy()
        for x, target, offset, what in (
            (amplitudes, q, self.nq, "amplitudes"),
            (rates, u, self.n, "rates"),
        ):
            if x is None:
                continue
            arr = np.asarray(x, dtype=float).reshape(-1)
            if arr.size != idx.size:
                raise ModelError(
                    f"body {body!r}: modal {what} needs {idx.size} values (one a mode), "
                    f"got {arr.size}"
                )
            if not np.all(np.isfinite(arr)):
                raise ModelError(f"body {body!r}: modal {what} has non-finite values")
            target[offset + idx] = arr
        return State(q, u)

    def set_joint(
        self,
        state: State,
        joint: str,
        *,
        angles: ArrayLike | None = None,
        quaternion: ArrayLike | None = None,
        rates: ArrayLike | None = None,
        displacements: ArrayLike | None = None,
        displacement_rates: ArrayLike | None = None,
    ) -> State:
        """Return a new State with one joint's coordinates and speeds set.

        Gimbal: ``angles`` and ``rates`` have ``rot_dof`` entries (rad, rad/s).
        Spherical: either ``angles`` (three angles of a body-fixed 123 sequence, as 42
        reads a spherical joint's "initial angles") or ``quaternion`` (scalar last);
        ``rates`` is Go's angular velocity relative to Gi in Go components.
        Slides: ``displacements`` and ``displacement_rates`` have ``trn_dof`` entries.
        The modal coordinates of a model with flexible bodies are kept
        (:meth:`set_modes` sets them).
        """
        self.check_state(state, flexible=True)
        k = self.joint_index(joint)
        jnt = self.joints[k]
        lay = self.layout
        q = state.q.copy()
        u = state.u.copy()
        qr = lay.q_index[k][: jnt.n_rot_coordinates]
        qt = lay.q_index[k][jnt.n_rot_coordinates :]
        ur = lay.u_index[k][: jnt.rot_dof]
        ut = lay.u_index[k][jnt.rot_dof :]

        def values(x: ArrayLike, n: int, what: str) -> Array:
            arr = np.asarray(x, dtype=float).reshape(-1)
            if arr.size != n:
                raise ModelError(f"joint {joint!r}: {what} needs {n} values, got {arr.size}")
            if not np.all(np.isfinite(arr)):
                raise ModelError(f"joint {joint!r}: {what} has non-finite values")
            return arr

        if jnt.rot_type == "spherical":
            if angles is not None and quaternion is not None:
                raise ModelError(f"joint {joint!r}: give angles or quaternion, not both")
            if angles is not None:
                R = rot.euler_to_dcm("123", values(angles, 3, "angles"))
                q[qr] = rot.dcm_to_quat(R)
            if quaternion is not None:
                q[qr] = rot.quat_normalize(values(quaternion, 4, "quaternion"))
        else:
            if quaternion is not None:
                raise ModelError(f"joint {joint!r}: a gimbal joint takes angles, not a quaternion")
            if angles is not None:
                q[qr] = values(angles, jnt.rot_dof, "angles")
        if rates is not None:
            u[ur] = values(rates, jnt.rot_dof, "rates")
        if displacements is not None:
            q[qt] = values(displacements, jnt.trn_dof, "displacements")
        if displacement_rates is not None:
            u[ut] = values(displacement_rates, jnt.trn_dof, "displacement_rates")
        return State(q, u)


# --------------------------------------------------------------------------- tree sort
def _sorted_tree(
    bodies: Sequence[Body], joints: Sequence[Joint]
) -> tuple[tuple[Body, ...], tuple[Joint, ...]]:
    """Validate the topology and return (bodies, joints) so that joint k feeds body k."""
    for b in bodies:
        if not isinstance(b, Body):
            raise ModelError(f"bodies must be kanedyn Body objects, got {type(b).__name__}")
    for j in joints:
        if not isinstance(j, Joint):
            raise ModelError(f"joints must be kanedyn Joint objects, got {type(j).__name__}")
        if isinstance(j, Loop):
            raise ModelError(f"{j.name!r} is a Loop: pass it in Model(..., loops=[...])")
    if not bodies:
        raise ModelError("a model needs at least one body")
    by_name: dict[str, Body] = {}
    for b in bodies:
        if b.name in by_name:
            raise ModelError(f"duplicate body name {b.name!r}")
        by_name[b.name] = b
    seen: set[str] = set()
    inbound: dict[str, Joint] = {}
    for j in joints:
        _check_edge(j, seen, by_name, "joint")
        if j.outer in inbound:
            raise ModelError(
                f"body {j.outer!r} has two inbound joints ({inbound[j.outer].name!r} and "
                f"{j.name!r}); a tree gives each body one: to close a kinematic loop, declare "
                f"one of them as a loop joint ({LOOP_REMEDY})"
            )
        inbound[j.outer] = j
    for b in bodies:
        if b.name not in inbound:
            raise ModelError(
                f"body {b.name!r} has no inbound joint; give it one (Joint.free(...) for a "
                "free-floating root, Joint.weld(name, None, ...) to fix it to N)"
            )
    # breadth-first from the roots, keeping the user's order among siblings
    children: dict[str | None, list[Joint]] = {}
    for j in joints:
        children.setdefault(j.inner, []).append(j)
    order: list[Joint] = []
    frontier: list[str | None] = [None]
    while frontier:
        nxt: list[str | None] = []
        for parent in frontier:
            for j in children.get(parent, []):
                order.append(j)
                nxt.append(j.outer)
        frontier = nxt
    if len(order) != len(joints):
        stuck = sorted({j.name for j in joints} - {j.name for j in order})
        raise ModelError(f"joints {stuck} form a cycle (no path from them to N)")
    return tuple(by_name[j.outer] for j in order), tuple(order)


def _check_frames(frames: tuple[Frame, ...], bodies: tuple[Body, ...]) -> None:
    names = {b.name for b in bodies}
    seen: set[str] = set()
    for f in frames:
        if not isinstance(f, Frame):
            raise ModelError(f"frames must be kanedyn Frame objects, got {type(f).__name__}")
        if f.name in seen:
            raise ModelError(f"duplicate frame name {f.name!r}")
        seen.add(f.name)
        if f.body is not None and f.body not in names:
            hint = did_you_mean(f.body, names)
            raise ModelError(f"frame {f.name!r}: unknown body {f.body!r}{hint}")


def node_index(joint: Joint, body: Body, side: str = "inner_node") -> int:
    """The 0-based index of ``joint.inner_node`` (or ``outer_node``: ``side``) among the
    nodes of ``body``, the joint's inner (outer) body; a ModelError naming the joint
    and the body when there is no such node."""
    node = getattr(joint, side)
    what = f"joint {joint.name!r}: {side}={node!r}"
    md = body.modes
    if md is None:
        role = "inner" if side == "inner_node" else "outer"
        raise ModelError(
            f"{what}: the {role} body {body.name!r} is rigid (no modes); a joint attaches "
            "at a node of a flexible body"
        )
    names = list(md.node_names)
    if isinstance(node, str):
        if node not in names:
            raise ModelError(f"{what}: body {body.name!r} has no such node (nodes: {names})")
        return names.index(node)
    k = int(node)
    if k >= len(names):
        raise ModelError(
            f"{what} is out of range: body {body.name!r} has {len(names)} nodes "
            f"(0-based indices 0 to {len(names) - 1}: {names})"
        )
    return k


def _check_nodes(bodies: tuple[Body, ...], joints: tuple[Joint, ...]) -> None:
    by_name = {b.name: b for b in bodies}
    for j in joints:
        if j.inner_node is not None and j.inner is not None:
            node_index(j, by_name[j.inner])
        if j.outer_node is not None:
            node_index(j, by_name[j.outer], "outer_node")


def _check_mass_outboard(bodies: tuple[Body, ...], joints: tuple[Joint, ...]) -> None:
    """Every joint with degrees of freedom must move some mass or inertia.

    Only bodies built with ``allow_singular`` can fail this: a joint whose outboard
    subtree has zero mass and zero inertia has zero rows in the mass matrix. (A massless
    subtree that carries only a point mass on a hinge's axis also makes M singular;
    importers check M itself at their model's initial state.)
    """
    if not any(b.allow_singular for b in bodies):
        return
    index = {b.name: i for i, b in enumerate(bodies)}
    heavy = [
        is_symbolic(b.mass) or b.mass > 0.0 or bool(np.any(np.asarray(b.inertia) != 0.0))
        for b in bodies
    ]
    # joints are sorted topologically (joint k feeds body k): sum outward, leaves first
    for k in range(len(joints) - 1, -1, -1):
        inner = joints[k].inner
        if heavy[k] and inner is not None:
            heavy[index[inner]] = True
    for k, j in enumerate(joints):
        if j.ndof > 0 and not heavy[k]:
            raise ModelError(
                f"joint {j.name!r} has no mass outboard: body {j.outer!r} and every body "
                "beyond it are massless, so the mass matrix is singular (give one of them "
                "mass, or make the joint fixed)"
            )


def _check_edge(j: Joint, seen: set[str], bodies: Any, unique_among: str) -> None:
    """``j``'s name is new (among ``unique_among``; added to ``seen``) and its inner and
    outer bodies are in ``bodies`` or N."""
    if j.name in seen:
        raise ModelError(f"duplicate {unique_among} name {j.name!r}")
    seen.add(j.name)
    for side, body in (("inner", j.inner), ("outer", j.outer)):
        if body is not None and body not in bodies:
            hint = did_you_mean(body, bodies)
            raise ModelError(f"{j._kind} {j.name!r}: unknown {side} body {body!r}{hint}")


def _check_loops(bodies: Sequence[Body], joints: Sequence[Joint], loops: Sequence[Loop]) -> None:
    """Loop joints name known bodies, and their names are unique among joints and loops."""
    names = {b.name for b in bodies}
    seen = {j.name for j in joints}
    for lp in loops:
        if not isinstance(lp, Loop):
            raise ModelError(
                f"loops must be kanedyn Loop objects (kd.Loop.revolute(...), ...), got "
                f"{type(lp).__name__}"
            )
        _check_edge(lp, seen, names, "joint or loop")


# --------------------------------------------------------------------------- layout
@attrs.frozen(eq=False)
class _Layout:
    """Index arrays computed once per model, so the dynamics never dispatch per joint.

    Conventions: ``nj == nb``; a sentinel index (``nq`` into q, ``n`` into u) gathers a
    zero, so padded (nj, 3) arrays of angles, rates, slides come from one fancy index.

    Topology and structure only: no mass, inertia, placement, spring or gravity is kept
    here. Those numbers are :class:`kanedyn.model.plan.Params` (``params_of(model)``, or a
    batch's), their one store. The constant arrays kept here (``path``, ``Delta``,
    ``gimbal_e``) are 0/1 structure fixed by the joints' kinds and axis sequences, which a
    batch never varies; ``symbolic`` says whether those numbers are sympy expressions.
    """

    nq: int
    nu: int
    ns: int
    symbolic: bool
    body_index: dict[str, int]
    joint_index: dict[str, int]
    parent: NDArray[np.intp]  # (nb,) inner body of joint k, -1 for N
    path: Array  # (nb, nj) 1 if joint k is on the path from body i to N
    q_index: tuple[NDArray[np.intp], ...]  # per joint, rot then trn
    u_index: tuple[NDArray[np.intp], ...]
    gimbal: NDArray[np.intp]  # joints with gimbal rotation and rot_dof > 0
    gimbal_axes: NDArray[np.intp]  # (ng, 3) axis digits
    gimbal_q: NDArray[np.intp]  # (ng, 3) q indices of angles, sentinel for unused
    gimbal_u: NDArray[np.intp]  # (ng, 3) speed indices, sentinel for unused
    gimbal3: NDArray[np.intp]  # rows of `gimbal` with rot_dof == 3 (can lock)
    gimbal_e: Array  # (ng, 3, 3) row j = unit vector of axis j
    spherical: NDArray[np.intp]  # joints with spherical rotation
    quat_q: NDArray[np.intp]  # (nsph, 4)
    quat_u: NDArray[np.intp]  # (nsph, 3)
    rot_u: NDArray[np.intp]  # (nj, 3) rotational speed indices of every joint, sentinel for unused
    Delta: Array  # (nj, 3, 3) slide axes in Gi, zero columns for unused
    trn_q: NDArray[np.intp]  # (nj, 3) slide displacements, sentinel for unused
    trn_u: NDArray[np.intp]  # (nj, 3)
    u_joint: NDArray[np.intp]  # (nu,) joint owning rotational speed r
    u_col: NDArray[np.intp]  # (nu,) column of Gamma for speed r
    s_joint: NDArray[np.intp]  # (ns,) joint owning translational speed
    s_col: NDArray[np.intp]  # (ns,) column of Delta
    angle_q: NDArray[np.intp]  # q indices whose rate is a speed directly (angles, slides)
    angle_u: NDArray[np.intp]  # the matching speed indices

    @classmethod
    def build(cls, bodies: tuple[Body, ...], joints: tuple[Joint, ...], gravity: Array,
              symbolic_field: bool = False) -> _Layout:  # fmt: skip
        nb = len(bodies)
        symbolic = (
            symbolic_field
            or is_symbolic(gravity)
            or any(
                is_symbolic(getattr(b, f))
                for b in bodies
                for f in ("mass", "inertia", "com", "embedded_momentum")
            )
            or any(
                is_symbolic(getattr(j, f))
                for j in joints
                for f in (
                    "inner_point",
                    "outer_point",
                    "inner_rotation",
                    "outer_rotation",
                    "stiffness",
                    "damping",
                    "stiffness_poly",
                    "damping_poly",
                )
            )
        )
        body_index = {b.name: i for i, b in enumerate(bodies)}
        joint_index = {j.name: k for k, j in enumerate(joints)}
        parent = np.array(
            [-1 if j.inner is None else body_index[j.inner] for j in joints], dtype=np.intp
        )
        path = np.zeros((nb, nb))
        for i in range(nb):
            k = i
            while k >= 0:
                path[i, k] = 1.0
                k = parent[k]
        # rotational coordinates first, then translational
        nq_rot = sum(j.n_rot_coordinates for j in joints)
        nq = nq_rot + sum(j.trn_dof for j in joints)
        nu = sum(j.rot_dof for j in joints)
        ns = sum(j.trn_dof for j in joints)
        n = nu + ns
        q_index, u_index = [], []
        qr, qt, ur, ut = 0, nq_rot, 0, nu
        for j in joints:
            nr = j.n_rot_coordinates
            q_index.append(
                np.r_[np.arange(qr, qr + nr), np.arange(qt, qt + j.trn_dof)].astype(np.intp)
            )
            u_index.append(
                np.r_[np.arange(ur, ur + j.rot_dof), np.arange(ut, ut + j.trn_dof)].astype(np.intp)
            )
            qr, qt, ur, ut = qr + nr, qt + j.trn_dof, ur + j.rot_dof, ut + j.trn_dof
        for arr in (*q_index, *u_index):
            arr.setflags(write=False)

        gimbal = [k for k, j in enumerate(joints) if j.rot_type == "gimbal" and j.rot_dof > 0]
        gimbal_axes = np.array(
            [rot.parse_sequence(joints[k].rot_seq) for k in gimbal], dtype=np.intp
        ).reshape(-1, 3)
        gimbal_q = np.full((len(gimbal), 3), nq, dtype=np.intp)
        gimbal_u = np.full((len(gimbal), 3), n, dtype=np.intp)
        for row, k in enumerate(gimbal):
            d = joints[k].rot_dof
            gimbal_q[row, :d] = q_index[k][:d]
            gimbal_u[row, :d] = u_index[k][:d]
        gimbal_e = np.eye(3)[gimbal_axes - 1]
        gimbal3 = np.array(
            [row for row, k in enumerate(gimbal) if joints[k].rot_dof == 3], dtype=np.intp
        )
        spherical = [k for k, j in enumerate(joints) if j.rot_type == "spherical"]
        quat_q = np.array([q_index[k][:4] for k in spherical], dtype=np.intp).reshape(-1, 4)
        quat_u = np.array([u_index[k][:3] for k in spherical], dtype=np.intp).reshape(-1, 3)

        rot_u = np.full((nb, 3), n, dtype=np.intp)
        for k, j in enumerate(joints):
            rot_u[k, : j.rot_dof] = u_index[k][: j.rot_dof]
        Delta = np.zeros((nb, 3, 3))
        trn_q = np.full((nb, 3), nq, dtype=np.intp)
        trn_u = np.full((nb, 3), n, dtype=np.intp)
        u_joint, u_col, s_joint, s_col = [], [], [], []
        for k, j in enumerate(joints):
            axes = rot.parse_sequence(j.trn_seq)
            for c in range(j.trn_dof):
                Delta[k, axes[c] - 1, c] = 1.0
            nr = j.n_rot_coordinates
            trn_q[k, : j.trn_dof] = q_index[k][nr:]
            trn_u[k, : j.trn_dof] = u_index[k][j.rot_dof :]
            u_joint += [k] * j.rot_dof
            u_col += list(range(j.rot_dof))
            s_joint += [k] * j.trn_dof
            s_col += list(range(j.trn_dof))
        angle_pairs: list[
            tuple[int, int]
        ] = []  # (q index, speed index) where q_dot is the speed itself
        for k, j in enumerate(joints):
            nr = j.n_rot_coordinates
            if j.rot_type == "gimbal":
                angle_pairs += zip(q_index[k][: j.rot_dof], u_index[k][: j.rot_dof], strict=True)
            angle_pairs += zip(q_index[k][nr:], u_index[k][j.rot_dof :], strict=True)
        angle_q = np.array([a for a, _ in angle_pairs], dtype=np.intp)
        angle_u = np.array([b for _, b in angle_pairs], dtype=np.intp)

        ix = lambda xs: np.array(xs, dtype=np.intp)  # noqa: E731
        return cls(
            nq=nq,
            nu=nu,
            ns=ns,
            symbolic=symbolic,
            body_index=body_index,
            joint_index=joint_index,
            parent=parent,
            path=path,
            q_index=tuple(q_index),
            u_index=tuple(u_index),
            gimbal=ix(gimbal),
            gimbal_axes=gimbal_axes,
            gimbal_q=gimbal_q,
            gimbal_u=gimbal_u,
            gimbal3=gimbal3,
            gimbal_e=gimbal_e,
            spherical=ix(spherical),
            quat_q=quat_q,
            quat_u=quat_u,
            rot_u=rot_u,
            Delta=Delta,
            trn_q=trn_q,
            trn_u=trn_u,
            u_joint=ix(u_joint),
            u_col=ix(u_col),
            s_joint=ix(s_joint),
            s_col=ix(s_col),
            angle_q=angle_q,
            angle_u=angle_u,
        )
