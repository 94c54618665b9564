"""Per-model evaluation plan and parameter arrays for the numeric engine.

Two small frozen records, built once per model and cached:

* :class:`Plan` holds the topology: index arrays and the pointer-jumping schedule,
  padded so that one evaluation of the dynamics is a fixed, short sequence of batched
  NumPy calls with no dispatch per joint or per body.
* :class:`Params` holds the physical parameters (masses, inertias, joint placements,
  springs, gravity) as stacked arrays. Every field may carry leading batch axes, so an
  ensemble of dispersed models is the same computation with one more axis
  (see :class:`kanedyn.model.batch.ModelBatch`).

Homogeneous transforms are 4×4: ``T_A_B = [[R_A_B, p], [0, 1]]`` maps B coordinates to
A coordinates. The joint chain of Stoneking's model (42 Joints slides 10-17) is then

.. math:: T_{B_i B_o} = C^{in}_k \\, J_k(q) \\, C^{out}_k, \\qquad
    C^{in} = [R_{B_i G_i}, \\; \\text{inner point}], \\quad J = [R_{G_i G_o}, \\; \\Delta d], \\quad
    C^{out} = [R_{G_o B_o}, \\; -R_{G_o B_o} \\, \\text{outer point}]
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.records import node_index
from kanedyn.spatial.arithmetic import NUMPY
from kanedyn.spatial.charts import EulerAxes, euler_axes

__all__ = [
    "MODAL_FIELDS",
    "ModalData",
    "ModalSlot",
    "Params",
    "Plan",
    "modal_data",
    "modal_slots",
    "node_joint_names",
    "node_joints",
    "outer_node_joints",
    "params_of",
    "plan_of",
]

Array = NDArray[np.float64]
Index = NDArray[np.intp]


def _frozen(arr: Any) -> Any:
    arr = np.ascontiguousarray(arr).reshape(np.shape(arr))  # a 0-d array stays 0-d
    arr.setflags(write=False)
    return arr


def homogeneous(R: Array, p: Array) -> Array:
    """``[[R, p], [0, 1]]`` for stacked ``R`` (..., 3, 3) and ``p`` (..., 3): (..., 4, 4)."""
    shape = np.broadcast_shapes(R.shape[:-2], p.shape[:-1]) + (4, 4)
    T = np.zeros(shape, dtype=np.result_type(R, p))
    T[..., :3, :3] = R
    T[..., :3, 3] = p
    T[..., 3, 3] = 1.0
    return T


# --------------------------------------------------------------------------- Params
@attrs.frozen(eq=False)
class Params:
    """Physical parameters as stacked arrays; ``...`` is an optional batch shape.

    ``mass`` (..., nb), ``inertia`` (..., nb, 3, 3) about the mass centre in body axes,
    ``com`` (..., nb, 3), ``h_embedded`` (..., nb, 3), ``inner_point``, ``outer_point``
    (..., nj, 3), ``R_Bi_Gi``, ``R_Go_Bo`` (..., nj, 3, 3), ``stiffness``, ``damping``
    (..., n), ``gravity`` (..., 3) (uniform; zero in a central field), the central
    field's (:class:`kanedyn.CentralGravity`; zeros when gravity is uniform) ``mu``,
    ``J2``, ``radius`` (...) and ``center`` (..., 3), ``stiffness_poly``, ``damping_poly``
    (..., n, 2) the higher-order spring and damper coefficients ``(k₂, k₃)``, ``(c₂, c₃)``
    per speed (:func:`kanedyn.joints.spring_damper`). Derived: ``C_in``, ``C_out`` (...,
    nj, 4, 4) (see the module docstring), ``com_h`` (..., nb, 4, 1) = [com; 1], ``has_h``
    (any embedded momentum), ``has_poly`` (any higher-order coefficient), ``batch_shape``.

    The flexible bodies' modal data (:class:`kanedyn.Modes`) are flat arrays (..., m),
    each body's entries (C order) one after the other in body order, at the offsets of
    :func:`modal_slots` (:data:`MODAL_FIELDS`): ``modal_mass``, ``modal_stiffness``,
    ``modal_damping`` (n × n per body), ``modal_P``, ``modal_H`` (3 × n), ``modal_L``
    (3 × 3 × n), ``modal_N`` (3 × 3 × n × n), ``node_positions`` (N × 3), ``node_Psi``,
    ``node_Theta`` (N × 3 × n) and ``modal_geometric`` (12 × n × n, stiffened bodies only);
    :func:`modal_data` gives one body's as a :class:`ModalData`. Without flexible bodies
    they are empty.
    """

    mass: Array
    inertia: Array
    com: Array
    h_embedded: Array
    inner_point: Array
    outer_point: Array
    R_Bi_Gi: Array
    R_Go_Bo: Array
    stiffness: Array
    damping: Array
    gravity: Array
    mu: Array
    J2: Array
    radius: Array
    center: Array
    stiffness_poly: Array
    damping_poly: Array
    modal_mass: Array
    modal_stiffness: Array
    modal_damping: Array
    modal_P: Array
    modal_H: Array
    modal_L: Array
    modal_N: Array
    node_positions: Array
    node_Psi: Array
    node_Theta: Array
    modal_geometric: Array
    C_in: Array = attrs.field(init=False)
    C_out: Array = attrs.field(init=False)
    com_h: Array = attrs.field(init=False)
    has_h: bool = attrs.field(init=False)
    has_poly: bool = attrs.field(init=False)
    batch_shape: tuple[int, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        batch = np.broadcast_shapes(
            self.mass.shape[:-1],
            self.inertia.shape[:-3],
            self.com.shape[:-2],
            self.h_embedded.shape[:-2],
            self.inner_point.shape[:-2],
            self.outer_point.shape[:-2],
            self.R_Bi_Gi.shape[:-3],
            self.R_Go_Bo.shape[:-3],
            self.stiffness.shape[:-1],
            self.damping.shape[:-1],
            self.gravity.shape[:-1],
            np.shape(self.mu),
            np.shape(self.J2),
            np.shape(self.radius),
            self.center.shape[:-1],
            self.stiffness_poly.shape[:-2],
            self.damping_poly.shape[:-2],
            *(getattr(self, f).shape[:-1] for f in MODAL_FIELDS),
        )
        R_out = self.R_Go_Bo
        p_out = -(R_out @ self.outer_point[..., None])[..., 0]
        ones = np.ones(self.com.shape[:-1] + (1,), dtype=self.com.dtype)
        com_h = np.concatenate((self.com, ones), axis=-1)[..., None]
        object.__setattr__(self, "C_in", _frozen(homogeneous(self.R_Bi_Gi, self.inner_point)))
        object.__setattr__(self, "C_out", _frozen(homogeneous(R_out, p_out)))
        object.__setattr__(self, "com_h", _frozen(com_h))
        object.__setattr__(self, "has_h", bool(np.any(self.h_embedded != 0)))
        poly = np.any(self.stiffness_poly != 0) or np.any(self.damping_poly != 0)
        object.__setattr__(self, "has_poly", bool(poly))
        object.__setattr__(self, "batch_shape", tuple(batch))

    @classmethod
    def of_model(cls, model: Model) -> Params:
        """The numbers of ``model``'s bodies, joints and gravity, stacked (no batch axes).

        For a symbolic model (``model.is_symbolic``) the arrays have dtype ``object`` and
        hold the sympy expressions (and plain numbers) as given; otherwise they are floats.
        """
        dtype = object if model.layout.symbolic else float
        bodies, joints = model.bodies, model.joints
        nb, n = model.nb, model.n

        def stack(values: list[Any], shape: tuple[int, ...]) -> Array:
            arr = np.empty(shape, dtype=dtype)
            arr.ravel()[:] = [x for v in values for x in np.asarray(v, dtype=dtype).ravel()]
            return _frozen(arr)

        central = model.central_gravity
        stiffness, damping = np.zeros(n, dtype=dtype), np.zeros(n, dtype=dtype)
        stiffness_poly, damping_poly = np.zeros((n, 2), dtype=dtype), np.zeros((n, 2), dtype=dtype)
        for k, j in enumerate(joints):
            idx = model.layout.u_index[k]
            stiffness[idx], damping[idx] = j.stiffness, j.damping
            stiffness_poly[idx], damping_poly[idx] = j.stiffness_poly, j.damping_poly
        return cls(
            mass=stack([b.mass for b in bodies], (nb,)),
            inertia=stack([b.inertia for b in bodies], (nb, 3, 3)),
            com=stack([b.com for b in bodies], (nb, 3)),
            h_embedded=stack([b.embedded_momentum for b in bodies], (nb, 3)),
            inner_point=stack([j.inner_point for j in joints], (nb, 3)),
            outer_point=stack([j.outer_point for j in joints], (nb, 3)),
            R_Bi_Gi=stack([j.inner_rotation for j in joints], (nb, 3, 3)),
            R_Go_Bo=stack([j.outer_rotation for j in joints], (nb, 3, 3)),
            stiffness=_frozen(stiffness),
            damping=_frozen(damping),
            gravity=stack([model.uniform_gravity], (3,)),
            mu=stack([0.0 if central is None else central.mu], ()),
            J2=stack([0.0 if central is None else central.J2], ()),
            radius=stack([0.0 if central is None else central.radius], ()),
            center=stack([np.zeros(3) if central is None else central.center], (3,)),
            stiffness_poly=_frozen(stiffness_poly),
            damping_poly=_frozen(damping_poly),
            **{f: stack(v, (len(v),)) for f, v in _modal_values(model).items()},
        )

    @property
    def symbolic(self) -> bool:
        """True when the numbers are sympy expressions (dtype ``object``)."""
        return self.mass.dtype == object


# --------------------------------------------------------------------------- modes
#: the Params fields of the flexible bodies' modal data, and the kanedyn.Modes field each
#: holds (module docstring of kanedyn.model.modes)
MODAL_FIELDS = {
    "modal_mass": "mass",
    "modal_stiffness": "stiffness",
    "modal_damping": "damping",
    "modal_P": "P",
    "modal_H": "H",
    "modal_L": "L",
    "modal_N": "N",
    "node_positions": "node_positions",
    "node_Psi": "Psi",
    "node_Theta": "Theta",
    "modal_geometric": "geometric",
}


@attrs.frozen
class ModalSlot:
    """Where a flexible body's modal data sit in the flat :class:`Params` fields: the
    ``body`` index, its ``n`` modes and ``nodes`` nodes, whether it is stiffened
    (``geometric``: ``Modes.geometric`` given) and per field of :data:`MODAL_FIELDS`
    its ``offset`` and core ``shape``."""

    body: int
    n: int
    nodes: int
    geometric: bool
    offset: dict[str, int]
    shape: dict[str, tuple[int, ...]]

    def entries(self, field: str) -> range:
        """The flat indices of the body's entries of ``field``."""
        start = self.offset[field]
        return range(start, start + int(np.prod(self.shape[field], dtype=int)))


def _slots(model: Model) -> tuple[ModalSlot, ...]:
    out = []
    at = dict.fromkeys(MODAL_FIELDS, 0)
    for i, b in enumerate(model.bodies):
        md: Any = b.modes
        if md is None:
            continue
        n, nn = md.n, len(md.node_names)
        shape = {
            "modal_mass": (n, n), "modal_stiffness": (n, n), "modal_damping": (n, n),
            "modal_P": (3, n), "modal_H": (3, n), "modal_L": (3, 3, n),
            "modal_N": (3, 3, n, n), "node_positions": (nn, 3), "node_Psi": (nn, 3, n),
            "node_Theta": (nn, 3, n),
            "modal_geometric": (12, n, n) if md.geometric is not None else (0,),
        }  # fmt: skip
        out.append(ModalSlot(i, n, nn, md.geometric is not None, dict(at), shape))
        for f in MODAL_FIELDS:
            at[f] += int(np.prod(shape[f], dtype=int))
    return tuple(out)


def modal_slots(model: Model) -> tuple[ModalSlot, ...]:
    """The :class:`ModalSlot` of each flexible body, in body order (found once per
    model): the sizes and offsets of its modal data in :class:`Params`."""
    out: tuple[ModalSlot, ...] = derived(model, "modal_slots", _slots)
    return out


def _modal_values(model: Model) -> dict[str, list[Any]]:
    """Per field of :data:`MODAL_FIELDS`, the flexible bodies' entries in order."""
    values: dict[str, list[Any]] = {f: [] for f in MODAL_FIELDS}
    for slot in modal_slots(model):
        md: Any = model.bodies[slot.body].modes
        for f, attr in MODAL_FIELDS.items():
            if f != "modal_geometric" or slot.geometric:
                values[f] += np.ravel(getattr(md, attr)).tolist()
    return values


@attrs.frozen(eq=False)
class ModalData:
    """One flexible body's modal data as the equations read them (the numbers of
    :class:`kanedyn.Modes`, taken from :class:`Params`): ``mass``, ``stiffness``,
    ``damping`` (n, n), ``P``, ``H`` (3, n), ``L`` (3, 3, n), ``N`` (3, 3, n, n),
    ``node_positions`` (N, 3), ``Psi``, ``Theta`` (N, 3, n), ``geometric`` (12, n, n) or
    None. Float arrays, or object arrays holding traced values or sympy expressions."""

    mass: Any
    stiffness: Any
    damping: Any
    P: Any
    H: Any
    L: Any
    N: Any
    node_positions: Any
    Psi: Any
    Theta: Any
    geometric: Any

    @property
    def n(self) -> int:
        """Number of modes."""
        return int(np.shape(self.mass)[0])

    @classmethod
    def of_flat(cls, slot: ModalSlot, flat: Any) -> ModalData:
        """The body of ``slot`` from ``flat(field)``, the whole flat array of a field
        (a float array, or an object array of the arithmetic's scalars)."""
        parts: dict[str, Any] = {}
        for f, attr in MODAL_FIELDS.items():
            if f == "modal_geometric" and not slot.geometric:
                parts[attr] = None
                continue
            r = slot.entries(f)
            parts[attr] = np.asarray(flat(f))[r.start : r.stop].reshape(slot.shape[f])
        return cls(**parts)


def modal_data(params: Params, model: Model, body: int) -> ModalData:
    """The modal data (:class:`ModalData`) of the flexible ``body`` (index) from
    ``params`` (unbatched: a batch's members are evaluated one at a time)."""
    if params.batch_shape:
        raise ModelError(
            "flexible bodies: the dense engine takes one parameter set at a time "
            f"(got a batch {params.batch_shape}); evaluate ModelBatch.member(b)"
        )
    slot = next((s for s in modal_slots(model) if s.body == body), None)
    if slot is None:
        raise ModelError(f"body {model.bodies[body].name!r} is not flexible (it has no modes)")
    return ModalData.of_flat(slot, lambda f: getattr(params, f))


# --------------------------------------------------------------------------- Plan
@attrs.frozen(eq=False)
class Plan:
    """Topology of one model, as index arrays for the batched engine.

    Sentinels: index ``nb`` of an extended body array is N (identity transform, zero
    velocity); index ``nq`` / ``n`` of a padded q / u gathers a zero.

    ``jumps``: pointer-jumping schedule, one (nb+1,) ancestor array per pass, so that
    ``T <- T[a_p] @ T`` composes every transform down to N in ⌈log2 depth⌉ products.
    ``parent_ext`` (nb,) inner body with N as ``nb``. ``slots_u`` (nj, 6) the speed index of
    each joint DOF slot (3 rotational, then 3 translational; sentinel when unused).
    ``dof_flat`` (n,) slot ``6 k + j`` of each speed, ``dof_joint`` (n,) its joint k.
    ``A_up``, ``A_low`` (n, n) the CRBA masks (see :func:`kanedyn.dynamics.kane.mass_matrix_at`):
    ``A_up[r, s] = 1`` when joint k(r) is a strict ancestor of k(s), or the same joint
    and r ≤ s; ``A_low`` is the transpose of ``A_up`` without its diagonal.
    ``path_ext`` (nb + 1, nj) the path matrix with a zero row for N.
    ``joint_order`` (nj,) gathers the per-joint arrays from [gimbals | spherical | others].
    Flags, decided once here: ``gimbal_all`` (every joint is a gimbal with rotation),
    ``gimbal_dof`` (largest gimbal ``rot_dof``), ``has_slides``, ``has_spherical``,
    ``has_nodes`` (a joint at a node of a flexible body).
    ``origin_joint``: the joint whose joint point is the origin of the dense engine's
    spatial quantities (the first root with slides: a spacecraft's orbit), or None for
    N's origin (:class:`kanedyn.dynamics.kinematics.Kinematics`); ``roots`` (…,) the
    joints whose inner body is N.
    """

    nb: int
    nq: int
    n: int
    nu: int
    ns: int
    jumps: tuple[Index, ...]
    parent_ext: Index
    slots_u: Index
    dof_flat: Index
    dof_joint: Index
    A_up: Array
    A_low: Array
    path_ext: Array
    joint_order: Index
    n_other: int
    gimbal_all: bool
    gimbal_dof: int
    has_slides: bool
    has_spherical: bool
    Delta_T: Array  # (nj, 3, 3) Δᵀ: rows are slide axes in Gi
    gimbal_axes: EulerAxes  # (ng, 3, 3) the gimbals' axis constants (joints.gimbal)
    has_nodes: bool
    origin_joint: int | None
    roots: Index

    @classmethod
    def build(cls, model: Model) -> Plan:
        lay = model.layout
        nb, n = model.nb, model.n
        parent_ext = np.where(lay.parent < 0, nb, lay.parent).astype(np.intp)
        anc = np.append(parent_ext, nb).astype(np.intp)
        jumps = []
        while np.any(anc[:nb] < nb):
            jumps.append(_frozen(anc.copy()))
            anc = anc[anc]
        slots_u = np.concatenate((lay.rot_u, lay.trn_u), axis=1).astype(np.intp)
        dof_flat = np.empty(n, dtype=np.intp)
        dof_joint = np.empty(n, dtype=np.intp)
        for k in range(nb):
            for j in range(6):
                r = slots_u[k, j]
                if r < n:
                    dof_flat[r] = 6 * k + j
                    dof_joint[r] = k
        # CRBA masks: A[r, s] = 1 when joint k(r) is an ancestor of (or is) joint k(s)
        A = lay.path[dof_joint][:, dof_joint].T
        same = dof_joint[:, None] == dof_joint[None, :]
        r_le_s = np.arange(n)[:, None] <= np.arange(n)[None, :]
        A_up = np.where(same, r_le_s, A).astype(float)
        A_low = (A_up - np.eye(n)).T
        path_ext = np.vstack((lay.path, np.zeros((1, nb))))
        groups = list(lay.gimbal) + list(lay.spherical)
        others = [k for k in range(nb) if k not in set(groups)]
        joint_order = np.argsort(np.array(groups + others, dtype=np.intp)).astype(np.intp)
        gdof = max((j.rot_dof for j in model.joints if j.rot_type == "gimbal"), default=0)
        return cls(
            nb=nb,
            nq=model.nq,
            n=n,
            nu=model.nu,
            ns=model.ns,
            jumps=tuple(jumps),
            parent_ext=_frozen(parent_ext),
            slots_u=_frozen(slots_u),
            dof_flat=_frozen(dof_flat),
            dof_joint=_frozen(dof_joint),
            A_up=_frozen(A_up),
            A_low=_frozen(A_low),
            path_ext=_frozen(path_ext),
            joint_order=_frozen(joint_order),
            n_other=len(others),
            gimbal_all=lay.gimbal.size == nb,
            gimbal_dof=gdof,
            has_slides=model.ns > 0,
            has_spherical=lay.spherical.size > 0,
            Delta_T=_frozen(np.swapaxes(lay.Delta, -1, -2)),
            gimbal_axes=euler_axes(NUMPY, lay.gimbal_e),
            has_nodes=bool(node_joints(model) or outer_node_joints(model)),
            origin_joint=next(
                (k for k, j in enumerate(model.joints) if j.inner is None and j.trn_dof > 0),
                None,
            ),
            roots=_frozen(np.flatnonzero(parent_ext == nb).astype(np.intp)),
        )


def derived(model: Model, name: str, build: Any) -> Any:
    """``build(model)``, computed once per model and ``name`` (:meth:`kanedyn.Model.derived`)."""
    return model.derived(name, build)


def node_joints(model: Model) -> tuple[tuple[int, int, int], ...]:
    """``(joint k, inner body i, node)`` of every joint attached at a node of a flexible
    body (``Joint.inner_node``), in joint order; found once per model."""

    def build(m: Model) -> tuple[tuple[int, int, int], ...]:
        return tuple(
            (k, m.body_index(j.inner), node_index(j, m.bodies[m.body_index(j.inner)]))
            for k, j in enumerate(m.joints)
            if j.inner_node is not None and j.inner is not None
        )

    out: tuple[tuple[int, int, int], ...] = derived(model, "node_joints", build)
    return out


def outer_node_joints(model: Model) -> tuple[tuple[int, int], ...]:
    """``(joint k, node)`` of every joint whose Go is fixed at a node of its flexible
    outer body k (``Joint.outer_node``), in joint order; found once per model."""

    def build(m: Model) -> tuple[tuple[int, int], ...]:
        return tuple(
            (k, node_index(j, m.bodies[k], "outer_node"))
            for k, j in enumerate(m.joints)
            if j.outer_node is not None
        )

    out: tuple[tuple[int, int], ...] = derived(model, "outer_node_joints", build)
    return out


def node_joint_names(model: Model) -> list[str]:
    """The names of the joints at nodes of flexible bodies (:func:`node_joints` and
    :func:`outer_node_joints`), in joint order."""
    ks = {k for k, _, _ in node_joints(model)} | {k for k, _ in outer_node_joints(model)}
    return [model.joints[k].name for k in sorted(ks)]


def plan_of(model: Model) -> Plan:
    """The (cached) :class:`Plan` of ``model``."""
    plan: Plan = derived(model, "plan", Plan.build)
    return plan


def params_of(model: Model) -> Params:
    """The (cached) :class:`Params` of ``model``, without batch axes."""
    params: Params = derived(model, "params", Params.of_model)
    return params
