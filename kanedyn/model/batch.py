"""Batches: many states, and many parameter sets, evaluated together.

The numeric engine (:mod:`kanedyn.dynamics.kinematics` to :mod:`kanedyn.dynamics.kane`) works on arrays
with leading batch axes, so a batch costs about as many NumPy calls as one state:

* :class:`States` — ``q`` (B, nq) and ``u`` (B, n): B states of one model.
* :class:`ModelBatch` — one topology with B parameter sets (masses, inertias, mass
  centres, joint placements, springs, dampers, gravity, the flexible bodies' modal
  data), for Monte Carlo dispersions.
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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray

from kanedyn.errors import ModelError, did_you_mean
from kanedyn.model import Model, State
from kanedyn.model.gravity import CentralGravity
from kanedyn.model.modes import modal_matrix, normal_modes
from kanedyn.model.plan import (
    MODAL_FIELDS,
    ModalData,
    ModalSlot,
    Params,
    modal_data,
    modal_slots,
    params_of,
)

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
    def dispersed(cls, model: Model, **arrays: Any) -> ModelBatch:
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

        The flexible bodies' modes, by body name: ``modal_frequency={"array": w}`` with
        ``w`` (B, n) the natural frequencies [rad/s] of the body's n modes (positive), and
        ``modal_damping_ratio={"array": zeta}`` with ``zeta`` (B, n) their damping ratios
        (non-negative). Mode p is that of :func:`kanedyn.model.modes.normal_modes`: the
        modal coordinate p when the body's modal mass and stiffness are diagonal,
        otherwise its p-th normal mode (``K φ = ω² M φ``, ascending nominal frequency,
        as ``kd.Modes(damping_ratio=...)``). The member's modal stiffness and damping are
        ``K = M Φ diag(ω²) Φᵀ M`` and ``C = M Φ diag(2ζω) Φᵀ M`` on the nominal
        mass-normalised modes Φ (``k = ω² m``, ``c = 2ζ√(k m)`` for a diagonal modal
        mass; the mode shapes and the modal mass stay the nominal ones). A body given
        frequencies but no damping ratios keeps its nominal damping matrix (its ratios
        then scale as ω_nominal/ω); damping ratios use the member's frequencies.
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
        given_modes = {key: arrays.pop(key) for key in _MODAL_KEYS if key in arrays}
        modes, B = _modal_arrays(model, given_modes)
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
        if modes:
            fields.update(_modal_matrices(model, base, modes, B))
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

# ModelBatch.dispersed's keywords for the flexible bodies' modes (dicts by body name)
_MODAL_KEYS = ("modal_frequency", "modal_damping_ratio")


def _modal_arrays(
    model: Model, given: dict[str, Any]
) -> tuple[dict[int, dict[str, Array]], int | None]:
    """The ``modal_frequency`` and ``modal_damping_ratio`` keywords, checked: per
    flexible body index, its (B, n) arrays; and B (None when nothing is given)."""
    slots = {s.body: s for s in modal_slots(model)}
    out: dict[int, dict[str, Array]] = {}
    B: int | None = None
    for key, by_body in given.items():
        if not isinstance(by_body, Mapping):
            raise ModelError(
                f"{key}: expected a dict of flexible body name -> (B, number of modes) "
                f"array, e.g. {key}={{'beam': ...}}, got {type(by_body).__name__}"
            )
        for name, value in by_body.items():
            what = f"{key}[{name!r}]"
            i = model.layout.body_index.get(name)
            if i is None:
                hint = did_you_mean(str(name), list(model.layout.body_index))
                raise ModelError(f"{what}: {name!r} is not a body of the model{hint}")
            slot: ModalSlot | None = slots.get(i)
            if slot is None:
                raise ModelError(f"{what}: body {name!r} is not flexible (it has no modes)")
            try:
                arr = np.array(value, dtype=float)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"{what}: cannot be read as numbers ({exc})") from None
            if arr.ndim != 2 or arr.shape[1] != slot.n:
                raise ModelError(
                    f"{what}: expected shape (B, {slot.n}) (one column per mode of body "
                    f"{name!r}), got {arr.shape}"
                )
            if B is not None and arr.shape[0] != B:
                raise ModelError(f"{what}: batch size {arr.shape[0]} differs from {B}")
            B = arr.shape[0]
            frequency = key == "modal_frequency"
            bad = ~np.isfinite(arr) | ((arr <= 0.0) if frequency else (arr < 0.0))
            if np.any(bad):
                b, p = (int(v) for v in np.argwhere(bad)[0])
                names: Any = model.bodies[i].modes
                raise ModelError(
                    f"{what}: member {b}, mode {p + 1} ({names.mode_names[p]!r}) of body "
                    f"{name!r}: must be {'positive' if frequency else 'non-negative'} and "
                    f"finite, got {arr[b, p]:g}"
                )
            out.setdefault(i, {})[key] = arr
    return out, B


def _modal_matrices(
    model: Model, base: Params, modes: dict[int, dict[str, Array]], B: int
) -> dict[str, Array]:
    """The flat ``modal_stiffness`` and ``modal_damping`` (B, m) with the bodies of
    ``modes`` set from their frequencies and damping ratios (:func:`modal_matrix` on
    the nominal modes of :func:`normal_modes`)."""
    out = {f: np.tile(np.asarray(getattr(base, f), dtype=float), (B, 1))
           for f in ("modal_stiffness", "modal_damping")}  # fmt: skip
    slots = {s.body: s for s in modal_slots(model)}
    for i, given in modes.items():
        data = modal_data(base, model, i)
        w0, Phi = normal_modes(data.stiffness, data.mass)
        w = given.get("modal_frequency")
        if w is not None:
            r = slots[i].entries("modal_stiffness")
            out["modal_stiffness"][:, r.start : r.stop] = modal_matrix(
                data.mass, Phi, w**2
            ).reshape(B, -1)
        zeta = given.get("modal_damping_ratio")
        if zeta is not None:
            r = slots[i].entries("modal_damping")
            omega = np.broadcast_to(w0, zeta.shape) if w is None else w
            out["modal_damping"][:, r.start : r.stop] = modal_matrix(
                data.mass, Phi, 2.0 * zeta * omega
            ).reshape(B, -1)
    return out


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
