"""Dispersed inputs: controller gains, reaction-wheel limits and load magnitudes.

A member's *inputs* are what it is given beside its model and initial state: the
sampled controller of :func:`kanedyn.simulate` and the load records. Their numbers are
dispersed with these parameter names (extending the names of
:mod:`kanedyn.simulation.montecarlo.dispersion`):

* ``controller.<attr>``: a numeric attribute of the controller's law, such as
  ``controller.Kp`` and ``controller.Kd`` of :class:`~kanedyn.QuaternionPD`. The
  member's law is ``attrs.evolve(law, <attr>=value)``, so the law must be an attrs
  record (a plain function has no attributes to set). The sample period is not
  dispersed.
* ``<wheel>.max_torque``: the motor saturation [N m] of reaction wheel ``<wheel>`` of
  the law (a :class:`~kanedyn.ReactionWheel` held by an attribute of the law, alone or
  in a tuple, as ``QuaternionPD.wheels``). The wheel's other numbers are the model's:
  its viscous friction is the damping of its hinge, ``<wheel>_spin.damping``, and its
  rotor is the body ``<wheel>`` (``<wheel>.mass``, ``<wheel>.inertia.zz``, ...).
* ``loads.<k>.scale``: a factor on load record k (0-based position in the ``loads``
  list, the order of the ``[[loads]]`` tables of a model file; nominal 1): the record's
  vector times the factor.
* ``loads.<k>.values.i``: component i of load record k's vector, the ``values`` of a
  ``[[loads]]`` table: the force of a :class:`~kanedyn.Force`, the torque of a
  :class:`~kanedyn.Torque` (``i`` = ``x``, ``y``, ``z`` or ``0``, ``1``, ``2``), or
  the generalized force on DOF i of a :class:`~kanedyn.JointLoad` (``i`` = ``0``,
  ``1``, ...). With ``scale`` on the same record, the components are set first and
  the factor multiplies the result.

Resolving a name (:func:`resolve`) gives a
:class:`~kanedyn.simulation.montecarlo.dispersion.Target` whose ``path`` locates the
number; :func:`member_inputs` builds each member's controller and loads from the
drawn values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.loads import Force, JointLoad, Torque
from kanedyn.errors import ModelError
from kanedyn.simulation.control import Controller, ReactionWheel

__all__ = [
    "INPUT_KINDS",
    "WHEEL_PARAMETERS",
    "is_wheel_parameter",
    "member_inputs",
    "nominal",
    "resolve",
    "wheels_of",
]

Array = NDArray[np.float64]

#: Target kinds of this module
INPUT_KINDS = ("controller", "wheel", "load_scale", "load")
#: the wheel numbers a dispersion may name (the rest are the model's: see the docstring)
WHEEL_PARAMETERS = ("max_torque",)
_WHEEL_MODEL = {
    "friction": "its viscous friction is the damping of its hinge: disperse '{w}_spin.damping'",
    "inertia": "its rotor is the body '{w}': disperse '{w}.inertia.zz' (axial), "
    "'{w}.inertia.xx' and '{w}.inertia.yy' (transverse)",
    "transverse": "its rotor is the body '{w}': disperse '{w}.inertia.xx' and '{w}.inertia.yy'",
}
_AXES = {"x": 0, "y": 1, "z": 2, "0": 0, "1": 1, "2": 2}
_VECTOR = {Force: "force", Torque: "torque", JointLoad: "values"}  # a record's vector field


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


def wheels_of(law: Any) -> dict[str, tuple[str, int | None]]:
    """The reaction wheels held by ``law``'s attributes: ``name -> (attribute, position
    in it or None)``."""
    found: dict[str, tuple[str, int | None]] = {}
    if not attrs.has(type(law)):
        return found
    for f in attrs.fields(type(law)):
        value = getattr(law, f.name)
        if isinstance(value, ReactionWheel):
            found.setdefault(value.name, (f.name, None))
        elif isinstance(value, (tuple, list)):
            for pos, w in enumerate(value):
                if isinstance(w, ReactionWheel):
                    found.setdefault(w.name, (f.name, pos))
    return found


def is_wheel_parameter(parameter: str, controller: Controller | None) -> bool:
    """Whether ``parameter`` names a wheel number (``<wheel>.max_torque``, or a wheel of
    the controller with one of its model-level numbers, which :func:`resolve` redirects)."""
    name, _, rest = parameter.partition(".")
    if rest in WHEEL_PARAMETERS:
        return True
    law = None if controller is None else controller.law
    return rest in _WHEEL_MODEL and name in wheels_of(law)


def resolve(
    parameter: str, controller: Controller | None, loads: Any
) -> tuple[str, tuple[Any, ...]]:
    """``(kind, path)`` of an input parameter (``controller.*``, ``<wheel>.*``,
    ``loads.*``); a ModelError saying what is wrong otherwise."""
    bad = f"parameter {parameter!r}"
    parts = parameter.split(".")
    if parts[0] == "controller":
        return "controller", (_law_attribute(bad, parts[1:], controller),)
    if parts[0] == "loads":
        return _load_path(bad, parts[1:], loads)
    name, rest = parts[0], ".".join(parts[1:])
    if controller is None:
        raise ModelError(
            f"{bad}: {rest} is a reaction-wheel parameter of a controller, and no "
            "controller was given (pass controller=kd.Controller(period, law) to "
            "kd.monte_carlo; controllers cannot be described in a model file, so "
            "controller and wheel dispersions are Python-only)"
        )
    wheels = wheels_of(controller.law)
    if name not in wheels:
        raise ModelError(
            f"{bad}: the controller's law has no reaction wheel {name!r} "
            f"(its wheels: {list(wheels) or 'none'})"
        )
    if rest in _WHEEL_MODEL:
        raise ModelError(f"{bad}: a wheel's {rest} is part of the model: "
                         + _WHEEL_MODEL[rest].format(w=name))  # fmt: skip
    field, pos = wheels[name]
    return "wheel", (field, pos, rest)


def _law_attribute(bad: str, rest: list[str], controller: Controller | None) -> str:
    if controller is None:
        raise ModelError(
            f"{bad}: no controller was given (pass controller=kd.Controller(period, law) "
            "to kd.monte_carlo; controllers cannot be described in a model file, so "
            "controller dispersions are Python-only)"
        )
    law: Any = controller.law
    kind = type(law).__name__
    if not attrs.has(type(law)):
        raise ModelError(
            f"{bad}: the controller's law ({kind}) is not an attrs record, so it has no "
            "attributes to disperse; write the law as an attrs class (as kd.QuaternionPD)"
        )
    numeric = [f.name for f in attrs.fields(type(law)) if _is_number(getattr(law, f.name))]
    if len(rest) != 1 or rest[0] not in {f.name for f in attrs.fields(type(law))}:
        what = ".".join(rest) or "(nothing)"
        raise ModelError(
            f"{bad}: the controller's law {kind} has no attribute {what!r}; its numeric "
            f"attributes: {', '.join(numeric) or 'none'}"
        )
    if rest[0] not in numeric:
        value = getattr(law, rest[0])
        raise ModelError(
            f"{bad}: {kind}.{rest[0]} is not a number ({type(value).__name__}); its numeric "
            f"attributes: {', '.join(numeric) or 'none'}"
        )
    return rest[0]


def _load_path(bad: str, rest: list[str], loads: Any) -> tuple[str, tuple[Any, ...]]:
    grammar = "use loads.<k>.scale or loads.<k>.values.i (k 0-based in the loads list)"
    if loads is None or (isinstance(loads, Sequence) and len(loads) == 0):
        raise ModelError(
            f"{bad}: no loads were given (pass loads=[...] to kd.monte_carlo, or give "
            "[[loads]] tables in the model file)"
        )
    if callable(loads) or not isinstance(loads, Sequence):
        raise ModelError(
            f"{bad}: loads is {type(loads).__name__}; dispersing loads needs a list of "
            "load records (kd.Force, kd.Torque, kd.JointLoad)"
        )
    if not rest or not rest[0].isdigit():
        raise ModelError(f"{bad}: {grammar}")
    k = int(rest[0])
    if k >= len(loads):
        raise ModelError(f"{bad}: there is no load {k} (valid: 0 to {len(loads) - 1})")
    rec = loads[k]
    if type(rec) not in _VECTOR:
        raise ModelError(
            f"{bad}: load {k} is {rec!r}, not a kd.Force, kd.Torque or kd.JointLoad record"
        )
    if rest[1:] == ["scale"]:
        return "load_scale", (k,)
    if len(rest) == 3 and rest[1] == "values":
        vec = getattr(rec, _VECTOR[type(rec)])
        i = _AXES.get(rest[2]) if type(rec) is not JointLoad else (
            int(rest[2]) if rest[2].isdigit() else None)  # fmt: skip
        if i is None or i >= vec.size:
            valid = "x, y, z (or 0, 1, 2)" if type(rec) is not JointLoad else (
                ", ".join(str(v) for v in range(vec.size)))  # fmt: skip
            raise ModelError(
                f"{bad}: load {k} ({type(rec).__name__}) has no component {rest[2]!r} "
                f"(valid: {valid})"
            )
        return "load", (k, i)
    raise ModelError(f"{bad}: {grammar}")


def nominal(kind: str, path: tuple[Any, ...], controller: Controller | None, loads: Any) -> float:
    """The nominal value of an input parameter resolved to ``(kind, path)``."""
    if kind == "controller":
        assert controller is not None
        return float(getattr(controller.law, path[0]))
    if kind == "wheel":
        assert controller is not None
        return float(getattr(_wheel(controller.law, path[0], path[1]), path[2]))
    if kind == "load_scale":
        return 1.0
    rec = loads[path[0]]
    return float(getattr(rec, _VECTOR[type(rec)])[path[1]])


def _wheel(law: Any, field: str, pos: int | None) -> ReactionWheel:
    value = getattr(law, field)
    return value if pos is None else value[pos]


def member_inputs(
    targets: Sequence[Any], values: Array, controller: Controller | None, loads: Any
) -> tuple[list[Controller | None] | None, list[list[Any]] | None, list[str]]:
    """Each member's controller and loads with its drawn ``values`` (B, number of
    dispersions) put in, and per member the reason it is invalid (``""`` if valid).

    Returns ``(controllers, loads, invalid)``; ``controllers`` (``loads``) is None when
    no dispersion targets the controller (the loads).
    """
    B = values.shape[0]
    cols = [(c, t) for c, t in enumerate(targets) if t.kind in INPUT_KINDS]
    ctrl_cols = [(c, t) for c, t in cols if t.kind in ("controller", "wheel")]
    load_cols = [(c, t) for c, t in cols if t.kind in ("load_scale", "load")]
    invalid = [""] * B
    controllers: list[Controller | None] | None = None
    if ctrl_cols:
        assert controller is not None
        controllers = []
        for b in range(B):
            try:
                controllers.append(_member_controller(controller, ctrl_cols, values[b]))
            except (ModelError, ValueError, TypeError) as exc:
                invalid[b] = " ".join(str(exc).split())
                controllers.append(None)
    member_loads: list[list[Any]] | None = None
    if load_cols:
        member_loads = []
        for b in range(B):
            try:
                member_loads.append(_member_loads(loads, load_cols, values[b]))
            except ModelError as exc:
                invalid[b] = invalid[b] or " ".join(str(exc).split())
                member_loads.append([])
    return controllers, member_loads, invalid


def _member_controller(
    controller: Controller, cols: list[tuple[int, Any]], row: Array
) -> Controller:
    """``controller`` with the law's attributes and wheels set from ``row``."""
    law: Any = controller.law
    changes: dict[str, Any] = {}
    for c, t in cols:
        if t.kind == "controller":
            changes[t.path[0]] = float(row[c])
            continue
        field, pos, attr = t.path
        value = float(row[c])
        if attr == "max_torque" and not value >= 0.0:
            raise ModelError(f"wheel {t.parameter.split('.')[0]!r}: max_torque must be "
                             f"non-negative, got {value:.6g}")  # fmt: skip
        held = changes.get(field, getattr(law, field))
        if pos is None:
            changes[field] = attrs.evolve(held, **{attr: value})
        else:
            seq = list(held)
            seq[pos] = attrs.evolve(seq[pos], **{attr: value})
            changes[field] = type(held)(seq)
    return attrs.evolve(controller, law=attrs.evolve(law, **changes))


def _member_loads(loads: Sequence[Any], cols: list[tuple[int, Any]], row: Array) -> list[Any]:
    """``loads`` with the records' components and scale factors set from ``row``."""
    out = list(loads)
    vectors: dict[int, Array] = {}
    scales: dict[int, float] = {}
    for c, t in cols:
        k = t.path[0]
        if t.kind == "load_scale":
            scales[k] = float(row[c])
        else:
            rec = loads[k]
            vec = vectors.setdefault(k, np.array(getattr(rec, _VECTOR[type(rec)]), dtype=float))
            vec[t.path[1]] = row[c]
    for k in vectors.keys() | scales.keys():
        rec = loads[k]
        field = _VECTOR[type(rec)]
        vec = vectors.get(k, np.asarray(getattr(rec, field), dtype=float))
        out[k] = attrs.evolve(rec, **{field: scales.get(k, 1.0) * vec})
    return out
