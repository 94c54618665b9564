"""Dispersions as data: which parameter, which distribution, and the sampler.

A dispersion names one number of a model or of its initial state and the distribution it
is drawn from, about its nominal value:

* ``<body>.mass``: the body's mass [kg].
* ``<body>.com.x|y|z``: a mass-centre component, body axes [m].
* ``<body>.inertia.xx|yy|zz``: a moment of inertia about the mass centre [kg m²].
* ``<body>.inertia.xy|xz|yz``: a product of inertia as a positive integral
  (``Ixy = ∫ x y dm``, as :func:`kanedyn.inertia_tensor`).
* ``<body>.inertia.principal.j``: principal moment j = 1, 2, 3 (the nominal moments in
  ascending order) on the nominal principal axes [kg m²].
* ``<body>.inertia.rotation.i``: a rotation [rad] of the body's mass distribution about
  body axis i, ``I ← R_i I R_iᵀ`` (nominal 0); with the principal moments, the
  orientation of the principal axes. Not together with the components on one body.
* ``<body>.modal_frequency.p``: the natural frequency [rad/s] of mode p (1-based, or
  the mode's name, ``eta1``, ...) of a flexible body; ``<body>.modal_damping_ratio.p``:
  its damping ratio. Mode p is that of :func:`kanedyn.model.modes.normal_modes` (the
  modal coordinate p when the modal mass and stiffness are diagonal, otherwise the p-th
  normal mode in ascending frequency); the member's modal stiffness and damping are
  those of :meth:`kanedyn.ModelBatch.dispersed` (``k = ω² m``, ``c = 2ζ√(k m)`` for a
  diagonal modal mass), the other modes keeping their nominal values. The nominal
  damping ratio needs a modal nominal damping (``ΦᵀCΦ`` diagonal); a body whose
  frequencies are dispersed and its damping ratios not keeps its damping matrix.
* ``<joint>.stiffness``: the spring of every DOF of the joint (one value); with a suffix
  ``.i`` (0-based, rotational first), one DOF only. ``<joint>.damping``: the same for
  the damper.
* ``<joint>.angles.i``: a gimbal angle [rad]; for a spherical joint, a rotation of Go
  about its own axis i composed onto the nominal attitude
  (``R_Gi_Go ← R_Gi_Go · R_i(angle)``; nominal 0).
* ``<joint>.rates.i``: a rotational speed [rad/s] (for a spherical joint, Go's angular
  velocity relative to Gi, in Go axes).
* ``<joint>.displacements.i``, ``<joint>.displacement_rates.i``: a slide [m], [m/s].
* ``orbit.radius`` (the semi-major axis, the radius of a circular orbit) [m],
  ``orbit.a`` [m], ``orbit.e``, ``orbit.i``, ``orbit.raan``, ``orbit.argp``,
  ``orbit.nu`` [rad]: an element of the free root's orbit in a model with a
  :class:`~kanedyn.CentralGravity` field. The nominal orbit is the osculating one of the
  root body's mass centre (:meth:`kanedyn.Orbit.from_state`); the member's root is put
  on the dispersed orbit by :meth:`kanedyn.Orbit.place` with the nominal attitude and
  rate relative to LVLH (a spacecraft held in LVLH stays held in the new LVLH). The
  other dispersions of the state apply on top.
* ``controller.<attr>``, ``<wheel>.max_torque``, ``loads.<k>.scale``,
  ``loads.<k>.values.i``: a member's inputs, the controller's gains, a reaction wheel's
  torque limit and the load magnitudes (:mod:`kanedyn.simulation.montecarlo.inputs`).

``i`` is ``x``, ``y``, ``z`` or ``0``, ``1``, ``2``. The distributions:

* ``normal`` (``sigma``): nominal + sigma · z.
* ``uniform`` (``low``, ``high``): uniform on [low, high].
* ``truncnormal`` (``sigma``, ``low``, ``high``): normal about the nominal value,
  truncated to [low, high] (inverse-CDF sampling).
* ``choice`` (``values``): one of the values, each equally likely.

With ``relative = true``, ``sigma``, ``low``, ``high`` and ``values`` are fractions of
the nominal value (``sigma · |nominal|``, ``low · nominal``, ...).

Reproducibility: the draw of member k for parameter p comes from its own generator,
``numpy.random.default_rng(SeedSequence(seed, spawn_key=(k, crc32(p))))``: it depends
only on (seed, k, p), never on how members are split into chunks or workers, nor on the
order or number of the other dispersions.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kinematics import kinematics
from kanedyn.errors import ModelError, did_you_mean
from kanedyn.model import Model, State
from kanedyn.model.modes import normal_modes
from kanedyn.model.orbit import Orbit
from kanedyn.model.plan import modal_data, params_of
from kanedyn.simulation.control import Controller
from kanedyn.simulation.montecarlo import inputs
from kanedyn.spatial.inertia import principal_axes, validate_inertia
from kanedyn.spatial.rotation import dcm_to_quat, elementary_rotation, quat_to_dcm

__all__ = [
    "DISTRIBUTIONS",
    "MODAL_KINDS",
    "ORBIT_ELEMENTS",
    "Dispersion",
    "DispersionSpec",
    "Members",
    "Target",
    "apply",
    "nominal_modes",
    "sample",
]

Array = NDArray[np.float64]

#: distribution -> its required keys (``relative`` is allowed with each)
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "normal": ("sigma",),
    "uniform": ("low", "high"),
    "truncnormal": ("sigma", "low", "high"),
    "choice": ("values",),
}
_ARGS = ("sigma", "low", "high", "values", "relative")
_AXES = {"x": 0, "y": 1, "z": 2, "0": 0, "1": 1, "2": 2}
_INERTIA = {"xx": (0, 0), "yy": (1, 1), "zz": (2, 2), "xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}
#: orbit.<name> -> the kd.Orbit element it sets ("radius" is the semi-major axis)
ORBIT_ELEMENTS = {"radius": "a", "a": "a", "e": "e", "i": "i", "raan": "raan", "argp": "argp",
                  "nu": "nu"}  # fmt: skip

#: the dispersions of a flexible body's modes (``<body>.<kind>.p``), which are also
#: :meth:`kanedyn.ModelBatch.dispersed`'s keywords
MODAL_KINDS = ("modal_frequency", "modal_damping_ratio")


def nominal_modes(model: Model, body: int, what: str) -> tuple[Array, Array | None]:
    """The nominal frequencies ω [rad/s] and damping ratios ζ of the flexible ``body``'s
    modes (:func:`kanedyn.model.modes.normal_modes`): ``ζ_p = (ΦᵀCΦ)_pp / (2 ω_p)``.
    ζ is None when the nominal damping is not modal (``ΦᵀCΦ`` not diagonal, or a mode of
    zero frequency damped); ``what`` names the parameter in errors."""
    md: Any = model.bodies[body].modes
    if md is None:
        raise ModelError(
            f"{what}: body {model.bodies[body].name!r} is not flexible (it has no modes)"
        )
    data = modal_data(params_of(model), model, body)
    w, Phi = normal_modes(data.stiffness, data.mass)
    Cm = Phi.T @ np.asarray(data.damping, dtype=float) @ Phi
    scale = max(float(np.abs(Cm).max()), 1e-300)
    c = np.diag(Cm)
    if np.any(np.abs(Cm - np.diag(c)) > 1e-9 * scale) or np.any((w == 0.0) & (c != 0.0)):
        return w, None
    return w, np.divide(c, 2.0 * w, out=np.zeros_like(c), where=w > 0.0)


@attrs.frozen(eq=False)
class _Osculating:
    """The free root of a model in a central field, its osculating orbit and its
    attitude and rate relative to that orbit's LVLH."""

    root: str
    orbit: Orbit
    R_L_B: Array
    w_BL: Array


def _osculating(model: Model, state: State, parameter: str) -> _Osculating:
    field = model.central_gravity
    roots = [j for j in model.joints
             if j.is_root and j.rot_type == "spherical" and j.trn_dof == 3]  # fmt: skip
    if field is None or field.is_symbolic or not roots:
        raise ModelError(
            f"parameter {parameter!r}: orbit elements need a free root joint "
            "(kd.Joint.free) in a numeric central field (gravity=kd.CentralGravity(...))"
        )
    k = model.joint_index(roots[0].name)
    kin = kinematics(model, state)
    r = kin.r[k] - np.asarray(field.center, dtype=float)
    try:
        orbit = Orbit.from_state(r, kin.v[k], mu=float(field.mu))
    except ModelError as exc:
        raise ModelError(f"parameter {parameter!r}: the nominal state's orbit: {exc}") from None
    R_L_B = orbit.lvlh(0.0) @ kin.R_N_B[k]
    w_BL = kin.R_N_B[k].T @ kin.omega[k] - R_L_B.T @ orbit.lvlh_rate(0.0)
    return _Osculating(roots[0].name, orbit, R_L_B, w_BL)


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ModelError(f"{what}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ModelError(f"{what}: expected a finite number, got {value!r}")
    return float(value)


@attrs.frozen(init=False)
class Dispersion:
    """One dispersed parameter: ``kd.Dispersion(parameter, distribution, **args)``.

    Parameters
    ----------
    parameter : str
        What is dispersed, e.g. ``"hub.mass"``, ``"hinge0.stiffness"``,
        ``"root.rates.z"`` (the module docstring lists the names).
    distribution : {"normal", "uniform", "truncnormal", "choice"}
    sigma, low, high : float
        As the distribution needs them (``normal``: sigma; ``uniform``: low, high;
        ``truncnormal``: sigma, low, high).
    values : sequence of float
        For ``choice``.
    relative : bool
        ``sigma``, ``low``, ``high``, ``values`` are fractions of the nominal value.

    >>> Dispersion("hub.mass", "normal", sigma=20.0)
    Dispersion(parameter='hub.mass', distribution='normal', sigma=20.0, low=None, high=None, values=None, relative=False)
    """

    parameter: str
    distribution: str
    sigma: float | None
    low: float | None
    high: float | None
    values: tuple[float, ...] | None
    relative: bool

    def __init__(self, parameter: str, distribution: str, **args: Any) -> None:
        if not isinstance(parameter, str) or not parameter:
            raise ModelError(
                f"Dispersion: parameter must be a name such as 'hub.mass', got {parameter!r}"
            )
        what = f"dispersion of {parameter!r}"
        if distribution not in DISTRIBUTIONS:
            raise ModelError(
                f"{what}: unknown distribution {distribution!r}; use one of {', '.join(DISTRIBUTIONS)}"
            )
        need = DISTRIBUTIONS[distribution]
        unknown = [k for k in args if k not in _ARGS]
        if unknown:
            raise ModelError(
                f"{what}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(_ARGS)}"
            )
        extra = [k for k in args if k not in need and k != "relative"]
        if extra:
            raise ModelError(
                f"{what}: {distribution} takes {', '.join(need)} (and relative), not {', '.join(extra)}"
            )
        missing = [k for k in need if k not in args]
        if missing:
            raise ModelError(f"{what}: {distribution} needs {', '.join(missing)}")
        relative = args.get("relative", False)
        if not isinstance(relative, bool):
            raise ModelError(f"{what}: relative must be true or false, got {relative!r}")
        sigma = low = high = None
        values: tuple[float, ...] | None = None
        if "sigma" in need:
            sigma = _finite(args["sigma"], f"{what}: sigma")
            if sigma < 0.0:
                raise ModelError(f"{what}: sigma must be >= 0, got {sigma}")
        if "low" in need:
            low = _finite(args["low"], f"{what}: low")
            high = _finite(args["high"], f"{what}: high")
            if not low < high:
                raise ModelError(f"{what}: low must be less than high, got {low} and {high}")
        if distribution == "choice":
            raw = args["values"]
            if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) or len(raw) == 0:
                raise ModelError(f"{what}: values must be a non-empty list of numbers, got {raw!r}")
            values = tuple(_finite(v, f"{what}: values[{i}]") for i, v in enumerate(raw))
        object.__setattr__(self, "parameter", parameter)
        object.__setattr__(self, "distribution", distribution)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "relative", relative)

    def draw(self, nominal: float, rng: np.random.Generator) -> float:
        """One value about ``nominal`` from ``rng`` (one draw per call)."""
        scale = abs(nominal) if self.relative else 1.0
        shift = nominal if self.relative else 1.0
        d = self.distribution
        if d == "normal":
            assert self.sigma is not None
            return nominal + self.sigma * scale * float(rng.standard_normal())
        if d == "choice":
            assert self.values is not None
            v = self.values[int(rng.integers(len(self.values)))]
            return v * shift
        assert self.low is not None and self.high is not None
        lo, hi = sorted((self.low * shift, self.high * shift))
        if d == "uniform":
            return lo + (hi - lo) * float(rng.random())
        assert self.sigma is not None
        s = self.sigma * scale
        if s == 0.0:
            return min(max(nominal, lo), hi)
        # inverse CDF of the normal (nominal, s) restricted to [lo, hi]
        from scipy.special import ndtr, ndtri  # here: import kanedyn stays light

        a, b = ndtr((lo - nominal) / s), ndtr((hi - nominal) / s)
        x = nominal + s * float(ndtri(a + (b - a) * rng.random()))
        return min(max(x, lo), hi)


@attrs.frozen
class Target:
    """Where a dispersion's value goes in a member: ``kind`` and indices, resolved once
    against a model (see :func:`Target.of`). For a member's inputs (the kinds of
    :data:`kanedyn.simulation.montecarlo.inputs.INPUT_KINDS`), ``path`` locates the
    number in the controller or the loads."""

    parameter: str
    kind: str  # mass | com | inertia | ... | q | u | attitude | orbit | INPUT_KINDS
    index: tuple[int, ...]
    body: int | None = None
    joint: int | None = None
    path: tuple[Any, ...] = ()

    @classmethod
    def of(
        cls, model: Model, parameter: str, controller: Controller | None = None,
        loads: Any = None,
    ) -> Target:  # fmt: skip
        """Resolve ``parameter`` (e.g. ``"hub.inertia.xy"``) against ``model`` (and the
        ``controller`` and ``loads`` a member is given)."""
        parts = parameter.split(".")
        name, rest = parts[0], parts[1:]
        lay = model.layout
        bad = f"parameter {parameter!r}"
        in_model = name in lay.body_index or name in lay.joint_index
        given = {"controller": controller, "loads": loads}
        if name in given and in_model and given[name] is not None:
            raise ModelError(
                f"{bad}: {name!r} is both a body or joint of the model and the {name} "
                f"given to the run; rename the {'body' if name in lay.body_index else 'joint'}"
            )
        if name == "orbit" and not in_model:
            if len(rest) != 1 or rest[0] not in ORBIT_ELEMENTS:
                raise ModelError(
                    f"{bad}: an orbit takes {', '.join('orbit.' + e for e in ORBIT_ELEMENTS)}"
                )
            return cls(parameter, "orbit", (), path=(ORBIT_ELEMENTS[rest[0]],))
        if (name in given and not in_model) or inputs.is_wheel_parameter(parameter, controller):
            kind, path = inputs.resolve(parameter, controller, loads)
            return cls(parameter, kind, (), path=path)
        body_field = rest and rest[0] in ("mass", "com", "inertia", *MODAL_KINDS)
        if name in lay.body_index and rest and (body_field or name not in lay.joint_index):
            # a name that is a body's and a joint's (a link and its joint) is the body's
            # for mass, com and inertia, the joint's otherwise
            i = lay.body_index[name]
            if rest == ["mass"]:
                return cls(parameter, "mass", (i,), body=i)
            if len(rest) == 2 and rest[0] == "com" and rest[1] in ("x", "y", "z"):
                return cls(parameter, "com", (i, _AXES[rest[1]]), body=i)
            if len(rest) == 2 and rest[0] == "inertia" and rest[1] in _INERTIA:
                return cls(parameter, "inertia", (i, *_INERTIA[rest[1]]), body=i)
            if len(rest) == 3 and rest[:2] == ["inertia", "principal"] and rest[2] in "123":
                return cls(parameter, "principal", (i, int(rest[2]) - 1), body=i)
            if len(rest) == 3 and rest[:2] == ["inertia", "rotation"] and rest[2] in _AXES:
                return cls(parameter, "principal_axes", (i, _AXES[rest[2]]), body=i)
            if len(rest) == 2 and rest[0] in MODAL_KINDS:
                md: Any = model.bodies[i].modes
                if md is None:
                    raise ModelError(f"{bad}: body {name!r} is not flexible (it has no modes)")
                names = list(md.mode_names)
                p = names.index(rest[1]) if rest[1] in names else -1
                if p < 0 and rest[1].isdigit() and 1 <= int(rest[1]) <= md.n:
                    p = int(rest[1]) - 1
                if p < 0:
                    raise ModelError(
                        f"{bad}: body {name!r} has no mode {rest[1]!r} (modes 1 to {md.n}, "
                        f"or by name {names})"
                    )
                return cls(parameter, rest[0], (i, p), body=i)
            raise ModelError(
                f"{bad}: a body takes mass, com.x|y|z, inertia.xx|yy|zz|xy|xz|yz, "
                "inertia.principal.1|2|3, inertia.rotation.x|y|z, or for a flexible body "
                "modal_frequency.p or modal_damping_ratio.p (mode p = 1, 2, ...)"
            )
        if name in lay.joint_index and rest:
            k = lay.joint_index[name]
            j = model.joints[k]
            q_idx, u_idx = lay.q_index[k], lay.u_index[k]
            nrq = j.n_rot_coordinates
            if rest[0] in ("stiffness", "damping") and len(rest) <= 2:
                if len(rest) == 1:
                    return cls(parameter, rest[0], tuple(int(r) for r in u_idx), joint=k)
                dof = _index(rest[1], len(u_idx), bad, "DOF")
                return cls(parameter, rest[0], (int(u_idx[dof]),), joint=k)
            if len(rest) == 2 and rest[0] in ("angles", "rates", "displacements",
                                              "displacement_rates"):  # fmt: skip
                what = rest[0]
                if what == "angles":
                    i = _index(rest[1], j.rot_dof, bad, "rotational coordinate")
                    if j.rot_type == "spherical":
                        return cls(parameter, "attitude", (k, i), joint=k)
                    return cls(parameter, "q", (int(q_idx[i]),), joint=k)
                if what == "rates":
                    i = _index(rest[1], j.rot_dof, bad, "rotational speed")
                    return cls(parameter, "u", (int(u_idx[i]),), joint=k)
                if what == "displacements":
                    i = _index(rest[1], j.trn_dof, bad, "slide")
                    return cls(parameter, "q", (int(q_idx[nrq + i]),), joint=k)
                i = _index(rest[1], j.trn_dof, bad, "slide")
                return cls(parameter, "u", (int(u_idx[j.rot_dof + i]),), joint=k)
            raise ModelError(
                f"{bad}: a joint takes stiffness, damping (optionally .i), angles.i, "
                "rates.i, displacements.i or displacement_rates.i"
            )
        hint = did_you_mean(name, [*lay.body_index, *lay.joint_index])
        raise ModelError(
            f"{bad}: {name!r} is not a body or joint of the model{hint} (bodies "
            f"{list(lay.body_index)}, joints {list(lay.joint_index)})"
        )

    def nominal(
        self, model: Model, state: State, controller: Controller | None = None,
        loads: Any = None,
    ) -> float:  # fmt: skip
        """The value in ``model`` and ``state`` (and ``controller`` and ``loads``)."""
        if self.kind in inputs.INPUT_KINDS:
            return inputs.nominal(self.kind, self.path, controller, loads)
        pa = params_of(model)
        if self.kind == "mass":
            return float(pa.mass[self.index[0]])
        if self.kind == "com":
            return float(pa.com[self.index])
        if self.kind == "inertia":
            i, r, c = self.index
            value = float(pa.inertia[i, r, c])
            return value if r == c else -value  # products as positive integrals
        if self.kind == "principal":
            i, j = self.index
            return float(principal_axes(pa.inertia[i])[0][j])
        if self.kind in ("stiffness", "damping"):
            arr = getattr(pa, self.kind)[list(self.index)]
            if np.any(arr != arr[0]):
                raise ModelError(
                    f"parameter {self.parameter!r}: the joint's DOFs have different "
                    f"{self.kind} values {arr.tolist()}; disperse them one at a time "
                    f"({self.parameter}.0, ...)"
                )
            return float(arr[0])
        if self.kind in MODAL_KINDS:
            i, p = self.index
            w, zeta = nominal_modes(model, i, f"parameter {self.parameter!r}")
            if self.kind == "modal_frequency":
                return float(w[p])
            if zeta is None:
                raise ModelError(
                    f"parameter {self.parameter!r}: body {model.bodies[i].name!r}'s nominal "
                    "damping is not modal (ΦᵀCΦ is not diagonal on its mass-normalised "
                    "modes), so its modes have no damping ratios to disperse about; give "
                    "the body kd.Modes(damping_ratio=...)"
                )
            return float(zeta[p])
        if self.kind == "orbit":
            return float(getattr(_osculating(model, state, self.parameter).orbit, self.path[0]))
        if self.kind == "q":
            return float(state.q[self.index[0]])
        if self.kind == "u":
            return float(state.u[self.index[0]])
        return 0.0  # attitude, principal axes: a rotation about the nominal one


def _index(text: str, n: int, bad: str, what: str) -> int:
    i = _AXES.get(text)
    if i is None or i >= n:
        valid = ", ".join(str(v) for v in range(n)) or "none"
        raise ModelError(f"{bad}: {what} {text!r} does not exist (valid: {valid})")
    return i


@attrs.frozen(eq=False)
class DispersionSpec:
    """Dispersions resolved against one model and state (and the controller and loads
    given to every member): what :func:`sample` and :func:`apply` need."""

    model: Model
    state: State
    dispersions: tuple[Dispersion, ...]
    seed: int
    controller: Controller | None = None
    loads: Any = None
    targets: tuple[Target, ...] = attrs.field(init=False)
    nominals: tuple[float, ...] = attrs.field(init=False)
    keys: tuple[int, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        seen: set[str] = set()
        for d in self.dispersions:
            if not isinstance(d, Dispersion):
                raise ModelError(
                    f"dispersions must be kd.Dispersion records, got {type(d).__name__}"
                )
            if d.parameter in seen:
                raise ModelError(f"parameter {d.parameter!r} is dispersed twice")
            seen.add(d.parameter)
        if {"orbit.radius", "orbit.a"} <= seen:
            raise ModelError("orbit.radius and orbit.a are the same element: disperse one")
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, (int, np.integer))
            or self.seed < 0
        ):
            raise ModelError(f"seed must be a non-negative integer, got {self.seed!r}")
        targets = tuple(
            Target.of(self.model, d.parameter, self.controller, self.loads)
            for d in self.dispersions
        )
        by_components = {t.body for t in targets if t.kind == "inertia"}
        for t in targets:
            if t.kind in ("principal", "principal_axes") and t.body in by_components:
                name = self.model.bodies[t.index[0]].name
                raise ModelError(
                    f"body {name!r}: disperse its inertia either by components "
                    "(inertia.xx, ...) or by principal moments and axes "
                    "(inertia.principal.i, inertia.rotation.i), not both"
                )
        nominals = tuple(
            t.nominal(self.model, self.state, self.controller, self.loads) for t in targets
        )
        for d, nom in zip(self.dispersions, nominals, strict=True):
            if d.relative and nom == 0.0:
                raise ModelError(
                    f"dispersion of {d.parameter!r}: relative = true needs a non-zero nominal value"
                )
        object.__setattr__(self, "targets", targets)
        object.__setattr__(self, "nominals", nominals)
        object.__setattr__(
            self, "keys", tuple(zlib.crc32(d.parameter.encode()) for d in self.dispersions)
        )

    @property
    def names(self) -> list[str]:
        return [d.parameter for d in self.dispersions]

    @property
    def per_member_inputs(self) -> bool:
        """Whether members have their own controller or loads (some dispersion targets
        them), so that they cannot share one batched load set."""
        return any(t.kind in inputs.INPUT_KINDS for t in self.targets)


def sample(spec: DispersionSpec, members: Sequence[int] | NDArray[np.intp]) -> Array:
    """The dispersed values of ``members`` (B,): an array (B, number of dispersions).

    Member k, parameter p is drawn from ``default_rng(SeedSequence(seed, spawn_key=(k,
    crc32(p))))`` (see the module docstring): the result for a member does not depend on
    the other members asked for.
    """
    ks = np.asarray(members, dtype=np.int64).reshape(-1)
    out = np.empty((ks.size, len(spec.dispersions)))
    for b, k in enumerate(ks):
        for c, (d, nom, key) in enumerate(
            zip(spec.dispersions, spec.nominals, spec.keys, strict=True)
        ):
            seq = np.random.SeedSequence(int(spec.seed), spawn_key=(int(k), key))
            out[b, c] = d.draw(nom, np.random.default_rng(seq))
    return out


@attrs.frozen(eq=False)
class Members:
    """Dispersed values applied to B members: parameter arrays for
    :meth:`kanedyn.ModelBatch.dispersed` (``modal_frequency`` and
    ``modal_damping_ratio`` as dicts by body name of (B, n) arrays), initial states, per member the reason it
    is invalid (``""`` when it is valid), and, when they are dispersed, each member's
    controller and loads (None otherwise: every member has the run's)."""

    arrays: dict[str, Any]
    q: Array
    u: Array
    invalid: list[str]
    controllers: list[Controller | None] | None = None
    loads: list[list[Any]] | None = None


def apply(spec: DispersionSpec, values: Array) -> Members:
    """Put ``values`` (B, number of dispersions) into parameter arrays and states, and
    validate each member as a model would be (positive masses, physical inertias: the
    triangle inequality where the body asks for it, non-negative springs and dampers,
    positive modal frequencies and non-negative modal damping ratios,
    non-negative wheel torque limits)."""
    model, state = spec.model, spec.state
    lay, pa = model.layout, params_of(model)
    B = values.shape[0]
    kinds = {t.kind for t in spec.targets}
    arrays: dict[str, Any] = {}
    for c, t in enumerate(spec.targets):
        if t.kind in MODAL_KINDS:  # the body's every mode, nominal where not dispersed
            i, p = t.index
            by_body = arrays.setdefault(t.kind, {})
            name = model.bodies[i].name
            if name not in by_body:
                w, zeta = nominal_modes(model, i, f"parameter {t.parameter!r}")
                nominal = w if t.kind == "modal_frequency" else zeta
                by_body[name] = np.tile(np.asarray(nominal, dtype=float), (B, 1))
            by_body[name][:, p] = values[:, c]
    if "mass" in kinds:
        arrays["mass"] = np.tile(np.asarray(pa.mass, dtype=float), (B, 1))
    if "com" in kinds:
        arrays["com"] = np.tile(np.asarray(pa.com, dtype=float), (B, 1, 1))
    if kinds & {"inertia", "principal", "principal_axes"}:
        arrays["inertia"] = np.tile(np.asarray(pa.inertia, dtype=float), (B, 1, 1, 1))
    for kind in ("stiffness", "damping"):
        if kind in kinds:
            arrays[kind] = np.tile(np.asarray(getattr(pa, kind), dtype=float), (B, 1))
    q = np.tile(state.q, (B, 1))
    u = np.tile(state.u, (B, 1))
    orbit_why = [""] * B
    elements = [(c, t.path[0]) for c, t in enumerate(spec.targets) if t.kind == "orbit"]
    if elements:
        osc = _osculating(model, state, spec.targets[elements[0][0]].parameter)
        for b in range(B):
            try:
                orbit = attrs.evolve(osc.orbit, **{e: values[b, c] for c, e in elements})
                placed = orbit.place(model, state, osc.root, attitude=osc.R_L_B,
                                     rates=osc.w_BL)  # fmt: skip
            except ModelError as exc:
                orbit_why[b] = " ".join(str(exc).split())
                continue
            q[b], u[b] = placed.q, placed.u
    attitude: dict[int, Array] = {}
    moments: dict[int, Array] = {}
    axes: dict[int, Array] = {}
    for c, t in enumerate(spec.targets):
        col = values[:, c]
        if t.kind == "mass":
            arrays["mass"][:, t.index[0]] = col
        elif t.kind == "com":
            arrays["com"][:, t.index[0], t.index[1]] = col
        elif t.kind == "inertia":
            i, r, s = t.index
            arrays["inertia"][:, i, r, s] = col if r == s else -col
            arrays["inertia"][:, i, s, r] = col if r == s else -col
        elif t.kind == "principal":
            i, j = t.index
            moments.setdefault(i, np.tile(principal_axes(pa.inertia[i])[0], (B, 1)))[:, j] = col
        elif t.kind == "principal_axes":  # I <- R_i(angle) I R_i(angle)ᵀ, in the order given
            i, j = t.index
            axes[i] = axes.get(i, np.eye(3)) @ elementary_rotation(j + 1, col)
        elif t.kind in ("stiffness", "damping"):
            arrays[t.kind][:, list(t.index)] = col[:, None]
        elif t.kind == "q":
            q[:, t.index[0]] = col
        elif t.kind == "u":
            u[:, t.index[0]] = col
        elif t.kind in inputs.INPUT_KINDS or t.kind in ("orbit", *MODAL_KINDS):
            continue  # inputs.member_inputs, below; the orbit and the modes, above
        else:  # attitude: R_Gi_Go <- R_Gi_Go · R_i(angle), in the order given
            k, i = t.index
            R = attitude.get(k)
            if R is None:
                R = np.tile(quat_to_dcm(state.q[lay.q_index[k][:4]]), (B, 1, 1))
            attitude[k] = R @ elementary_rotation(i + 1, col)
    for k, R in attitude.items():
        q[:, lay.q_index[k][:4]] = dcm_to_quat(R)
    for i in moments.keys() | axes.keys():
        # I = R P diag(m) Pᵀ Rᵀ: the principal moments m on the nominal principal axes P
        # (principal_axes: I = P diag(m) Pᵀ), turned by the dispersed rotation R
        m0, P = principal_axes(pa.inertia[i])
        m = moments.get(i, np.tile(m0, (B, 1)))
        RP = axes.get(i, np.eye(3)) @ P
        arrays["inertia"][:, i] = (RP * m[..., None, :]) @ np.swapaxes(RP, -1, -2)
    invalid = [orbit_why[b] or _why_invalid(spec, arrays, b) for b in range(B)]
    controllers, loads, why = inputs.member_inputs(spec.targets, values, spec.controller,
                                                   spec.loads)  # fmt: skip
    invalid = [a or b for a, b in zip(invalid, why, strict=True)]
    return Members(arrays=arrays, q=q, u=u, invalid=invalid, controllers=controllers,
                   loads=loads)  # fmt: skip


def _why_invalid(spec: DispersionSpec, arrays: dict[str, Any], b: int) -> str:
    model = spec.model
    bodies = {t.body for t in spec.targets if t.body is not None}
    for i in sorted(bodies):
        body = model.bodies[i]
        if "mass" in arrays and not arrays["mass"][b, i] > 0.0:
            return f"body {body.name!r}: mass must be positive, got {arrays['mass'][b, i]:.6g}"
        if "inertia" in arrays:
            try:
                validate_inertia(arrays["inertia"][b, i], name=f"body {body.name!r}",
                                 check_triangle=body.check_triangle)  # fmt: skip
            except ModelError as exc:
                return " ".join(str(exc).split())
    for kind in MODAL_KINDS:
        for name, arr in arrays.get(kind, {}).items():
            bad = (arr[b] <= 0.0) if kind == "modal_frequency" else (arr[b] < 0.0)
            if np.any(bad):
                p = int(np.flatnonzero(bad)[0])
                sign = "positive" if kind == "modal_frequency" else "non-negative"
                return f"body {name!r}: {kind} of mode {p + 1} must be {sign}, got {arr[b, p]:.6g}"
    for kind in ("stiffness", "damping"):
        if kind in arrays and np.any(arrays[kind][b] < 0.0):
            r = int(np.flatnonzero(arrays[kind][b] < 0.0)[0])
            k = next(k for k, idx in enumerate(model.layout.u_index) if r in idx)
            return (
                f"joint {model.joints[k].name!r}: {kind} must be non-negative, "
                f"got {arrays[kind][b, r]:.6g}"
            )
    return ""
