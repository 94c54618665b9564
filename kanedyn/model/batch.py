"""Batches: many states, and many parameter sets, evaluated together.

The numeric engine (:mod:`kanedyn.dynamics.kinematics` to :mod:`kanedyn.dynamics.kane`) works on arrays
with leading batch axes, so a batch costs about as many NumPy calls as one state:

* :class:`States` — ``q`` (B, nq) and ``u`` (B, n): B states of one model.
* :class:`ModelBatch` — one topology with B parameter sets (masses, inertias, mass
  centres, joint placements, springs, dampers, gravity), for Monte Carlo dispersions.
  Build it from B models (:meth:`ModelBatch.stack`) or from a nominal model and
  dispersed arrays (:meth:`ModelBatch.dispersed`).

``kd.forward_dynamics``, ``kd.mass_matrix`` and ``kd.partials`` accept either (or both)
in place of ``Model`` / ``State``; the results gain the leading batch axis. The batch
shape of the states and of the parameters broadcast against each other.

>>> import numpy as np, kanedyn as kd
>>> from kanedyn.model.batch import States
>>> m = kd.examples.chain(3)
>>> states = States(np.zeros((4, m.nq)), np.ones((4, m.n)))
>>> kd.forward_dynamics(m, states).shape
(4, 3)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.gravity import CentralGravity
from kanedyn.model.plan import MODAL_FIELDS, ModalData, Params, modal_slots, params_of

__all__ = ["BATCH_FUNCTIONS", "ModelBatch", "NotOneModelError", "States", "resolve"]

Array = NDArray[np.float64]


def _read_only(value: ArrayLike, what: str) -> Array:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{what}: cannot be read as numbers ({exc})") from None
    arr.setflags(write=False)
    return arr


@attrs.frozen(eq=False)
class States:
    """A batch of states of one model: ``q`` (..., nq), ``u`` (..., n) (read-only).

    The leading axes (usually one, B) are the batch. ``states[b]`` is member b as a
    :class:`~kanedyn.State`; ``len(states)`` is B.
    """

    q: Array = attrs.field(converter=lambda v: _read_only(v, "states.q"))
    u: Array = attrs.field(converter=lambda v: _read_only(v, "states.u"))

    def __attrs_post_init__(self) -> None:
        if self.q.ndim < 2 or self.u.ndim < 2:
            raise ModelError(
                f"States needs a batch axis: q (B, nq) and u (B, n), got {self.q.shape} "
                f"and {self.u.shape} (use kd.State for one state)"
            )
        if self.q.shape[:-1] != self.u.shape[:-1]:
            raise ModelError(f"states.q {self.q.shape} and states.u {self.u.shape} differ in batch")

    @classmethod
    def stack(cls, states: Sequence[State]) -> States:
        """B single states stacked along a new first axis."""
        return cls(np.stack([s.q for s in states]), np.stack([s.u for s in states]))

    @classmethod
    def repeat(cls, state: State, B: int) -> States:
        """``state`` repeated B times."""
        return cls(np.tile(state.q, (B, 1)), np.tile(state.u, (B, 1)))

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.q.shape[:-1]

    def __len__(self) -> int:
        return self.q.shape[0]

    def __getitem__(self, b: int) -> State:
        return State(self.q[b], self.u[b])


# The public functions that take a ModelBatch (each member's own numbers); every other
# function takes one Model and refuses a batch (ModelBatch.__getattr__).
BATCH_FUNCTIONS = (
    "kd.partials, kd.mass_matrix, kd.forcing, kd.forward_dynamics, kd.simulate_ensemble "
    "and kd.compile_model"
)


class NotOneModelError(ModelError, AttributeError):
    """A :class:`ModelBatch` given where one :class:`~kanedyn.Model` is needed. Also an
    ``AttributeError``, so ``hasattr`` and ``getattr(x, name, default)`` keep working."""


# Body and joint fields that a ModelBatch may vary, with their Params names.
_BODY_FIELDS = {"mass": "mass", "inertia": "inertia", "com": "com",
                "embedded_momentum": "h_embedded"}  # fmt: skip
_JOINT_FIELDS = {"inner_point": "inner_point", "outer_point": "outer_point",
                 "inner_rotation": "R_Bi_Gi", "outer_rotation": "R_Go_Bo"}  # fmt: skip


@attrs.frozen(eq=False)
class ModelBatch:
    """One model topology with a batch of parameter sets.

    ``model`` gives the topology (and is member 0's nominal values); ``params`` holds the
    stacked arrays of :class:`kanedyn.model.plan.Params`, each with the leading batch axis
    (B,): ``mass`` (B, nb), ``inertia`` (B, nb, 3, 3), ``com`` (B, nb, 3), ...,
    ``stiffness`` (B, n), ``gravity`` (B, 3).
    """

    model: Model
    params: Params

    def __getattr__(self, name: str) -> Any:
        """A :class:`~kanedyn.Model` attribute asked of a batch: the caller takes one model,
        so refuse rather than let it evaluate ``batch.model``'s nominal numbers."""
        if name.startswith("__") or not hasattr(Model, name):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise NotOneModelError(
            f"this function takes one kd.Model, not a ModelBatch (it asked for model.{name}); "
            f"{BATCH_FUNCTIONS} take a batch; evaluate others on batch.member(b)"
        )

    @classmethod
    def stack(cls, models: Sequence[Model]) -> ModelBatch:
        """B models with the same topology (same bodies, joints and DOF, in order),
        differing only in parameters (e.g. built with ``attrs.evolve``)."""
        if not models:
            raise ModelError("ModelBatch.stack needs at least one model")
        base = models[0]
        sig = _topology(base)
        for b, m in enumerate(models):
            if m.is_symbolic:
                raise ModelError(f"ModelBatch.stack: model {b} has symbolic parameters")
            if _topology(m) != sig:
                raise ModelError(f"ModelBatch.stack: model {b} has a different topology")
        each = [params_of(m) for m in models]
        fields = {f.name: np.stack([getattr(p, f.name) for p in each]) for f in PARAM_FIELDS}
        return cls(base, Params(**fields))

    @classmethod
    def dispersed(cls, model: Model, **arrays: ArrayLike) -> ModelBatch:
        """``model`` with some parameters given per member, each with a leading batch axis.

        Keywords: ``mass`` (B, nb), ``inertia`` (B, nb, 3, 3) about the mass centres in
        body axes, ``com`` (B, nb, 3), ``embedded_momentum`` (B, nb, 3), ``inner_point``,
        ``outer_point`` (B, nj, 3), ``inner_rotation``, ``outer_rotation`` (B, nj, 3, 3),
        ``stiffness``, ``damping`` (B, n) (per speed, in ``[u | s]`` order),
        ``stiffness_poly``, ``damping_poly`` (B, n, 2) (the higher-order coefficients per
        speed, :class:`~kanedyn.Joint`), ``gravity`` (B, 3); in a central field
        (:class:`kanedyn.CentralGravity`) its ``mu``, ``J2``, ``radius`` (B,) and ``center``
        (B, 3). Bodies and joints are in model order (``model.body_index``). Masses must
        be positive, inertias valid, rotations orthonormal, springs non-negative.
        """
        if model.is_symbolic:
            raise ModelError("ModelBatch.dispersed: the model has symbolic parameters")
        names = {**_BODY_FIELDS, **_JOINT_FIELDS, "stiffness": "stiffness",
                 "damping": "damping", "gravity": "gravity",
                 "stiffness_poly": "stiffness_poly", "damping_poly": "damping_poly"}  # fmt: skip
        central = ("mu", "J2", "radius", "center")
        if model.central_gravity is not None:
            names.update({key: key for key in central})
        elif any(key in central for key in arrays):
            raise ModelError(
                f"ModelBatch.dispersed: {sorted(k for k in arrays if k in central)} are "
                "parameters of a central field; this model's gravity is uniform"
            )
        base = params_of(model)
        fields = {f.name: getattr(base, f.name) for f in PARAM_FIELDS}
        B = None
        for key, value in arrays.items():
            if key not in names:
                raise ModelError(
                    f"ModelBatch.dispersed: unknown parameter {key!r}; use {sorted(names)}"
                )
            arr = np.array(value, dtype=float)
            tail = np.shape(fields[names[key]])
            if arr.shape[1:] != tail or arr.ndim != len(tail) + 1:
                raise ModelError(
                    f"{key}: expected shape (B, {', '.join(map(str, tail))}), got {arr.shape}"
                )
            if B is not None and arr.shape[0] != B:
                raise ModelError(f"{key}: batch size {arr.shape[0]} differs from {B}")
            B = arr.shape[0]
            _validate(key, arr)
            fields[names[key]] = arr
        if B is None:
            raise ModelError("ModelBatch.dispersed: give at least one parameter array")
        for f in PARAM_FIELDS:
            value = fields[f.name]
            if value.ndim == np.ndim(getattr(base, f.name)):
                fields[f.name] = np.broadcast_to(value, (B,) + value.shape)
        return cls(model, Params(**fields))

    @property
    def size(self) -> int:
        """B, the number of parameter sets."""
        return self.params.mass.shape[0]

    def member(self, b: int) -> Model:
        """Parameter set b as a stand-alone :class:`~kanedyn.Model` (for checks)."""
        p = self.params
        bodies = [
            attrs.evolve(body, **{f: getattr(p, name)[b, i] for f, name in _BODY_FIELDS.items()})
            for i, body in enumerate(self.model.bodies)
        ]
        for slot in modal_slots(self.model):  # the member's modal data (Params)
            data = ModalData.of_flat(slot, lambda f: getattr(p, f)[b])
            numbers = {attr: getattr(data, attr) for attr in MODAL_FIELDS.values()}
            record: Any = bodies[slot.body].modes
            with warnings.catch_warnings():  # the data as given, warned about once already
                warnings.simplefilter("ignore", UserWarning)
                modes = attrs.evolve(record, **numbers)
            bodies[slot.body] = attrs.evolve(bodies[slot.body], modes=modes)
        joints = []
        for k, j in enumerate(self.model.joints):
            idx = self.model.layout.u_index[k]
            joints.append(
                attrs.evolve(
                    j,
                    **{f: getattr(p, name)[b, k] for f, name in _JOINT_FIELDS.items()},
                    stiffness=p.stiffness[b, idx],
                    damping=p.damping[b, idx],
                    stiffness_poly=p.stiffness_poly[b, idx],
                    damping_poly=p.damping_poly[b, idx],
                )
            )
        m = self.model
        gravity: Any = p.gravity[b]
        if m.central_gravity is not None:
            gravity = CentralGravity(mu=p.mu[b], J2=p.J2[b], radius=p.radius[b], center=p.center[b])
        return Model(
            bodies, joints, gravity=gravity, frames=m.frames, loops=m.loops, planar=m.planar
        )


PARAM_FIELDS = [f for f in attrs.fields(Params) if f.init]


def _topology(model: Model) -> Any:
    joints = tuple(
        (j.name, j.inner, j.outer, j.rot_type, j.rot_dof, j.rot_seq, j.trn_dof, j.trn_seq,
         j.inner_node, j.outer_node)
        for j in model.joints
    )  # fmt: skip
    # the flexible bodies' sizes (their modal data are parameters: Params)
    modes = tuple((s.body, s.n, s.nodes, s.geometric) for s in modal_slots(model))
    return joints, modes


def _validate(key: str, arr: Array) -> None:
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{key}: has non-finite entries")
    if key == "mass" and np.any(arr <= 0.0):
        raise ModelError("mass: must be positive")
    if key in ("mu", "radius") and np.any(arr <= 0.0):
        raise ModelError(f"{key}: must be positive")
    if key in ("stiffness", "damping") and np.any(arr < 0.0):
        raise ModelError(f"{key}: must be non-negative")
    if key == "inertia":
        if not np.allclose(arr, np.swapaxes(arr, -1, -2), rtol=1e-12, atol=1e-12):
            raise ModelError("inertia: not symmetric")
        particle = ~np.any(arr, axis=(-2, -1))  # zero inertia: a particle
        bad = np.argwhere((np.linalg.eigvalsh(arr)[..., 0] <= 0.0) & ~particle)
        if bad.size:
            raise ModelError(f"inertia[{bad[0][0]}, {bad[0][1]}]: not positive definite")
    if key in ("inner_rotation", "outer_rotation"):
        RtR = np.swapaxes(arr, -1, -2) @ arr
        if not (np.allclose(RtR, np.eye(3), atol=1e-9) and np.all(np.linalg.det(arr) > 0)):
            raise ModelError(f"{key}: not proper orthonormal matrices")


def resolve(model: Model | ModelBatch, state: Any, *,
            flexible: bool = False) -> tuple[Model, Params | None, Array, Array]:  # fmt: skip
    """``(model, params, q, u)`` for the engine, after checking sizes and finiteness.

    ``params`` is None for a plain model (the engine uses the model's own).
    ``flexible``: the caller takes the full states of a model with flexible bodies
    (``q = [q_joints | η]``, ``u = [u | s | ξ]``: ``nq + nf`` and ``n + nf``).
    """
    base = model.model if isinstance(model, ModelBatch) else model
    params = model.params if isinstance(model, ModelBatch) else None
    if not isinstance(model, (Model, ModelBatch)):
        raise ModelError(f"expected a kanedyn Model or ModelBatch, got {type(model).__name__}")
    if isinstance(state, States):
        if base.is_symbolic:
            base.check_state(base.initial_state())  # raises the symbolic-model error
        nq, n = (base.nq_total, base.n_total) if flexible else (base.nq, base.n)
        if state.q.shape[-1] != nq or state.u.shape[-1] != n:
            sizes = (
                f"nq + nf = {base.nq} + {base.nf}, n + nf = {base.n} + {base.nf}"
                if flexible and base.nf
                else f"nq = {base.nq}, n = {base.n}"
            )
            raise ModelError(
                f"states have nq = {state.q.shape[-1]}, n = {state.u.shape[-1]}; this model has "
                f"{sizes}"
            )
        if not (np.all(np.isfinite(state.q)) and np.all(np.isfinite(state.u))):
            raise ModelError("states have non-finite entries")
        q, u = state.q, state.u
    else:
        base.check_state(state, flexible=flexible)
        q, u = state.q, state.u
    if params is not None:
        try:
            np.broadcast_shapes(q.shape[:-1], params.batch_shape)
        except ValueError:
            raise ModelError(
                f"states batch {q.shape[:-1]} does not match the ModelBatch size {params.batch_shape}"
            ) from None
    return base, params, q, u
