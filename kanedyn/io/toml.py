"""kanedyn's own model file: TOML, read with the stdlib ``tomllib``.

The schema is documented in ``docs/toml-schema.md``. In short::

    [model]         gravity_m_s2 | central_gravity = {mu_m3_s2, J2, radius_m, center_m},
                    planar
    [[bodies]]      name, mass_kg, inertia_kg_m2 = {Ixx, Iyy, Izz, Ixy, Ixz, Iyz}
                    (or inertia_tensor_kg_m2; inertia_kg_m2 = 0 for a particle), com_m,
                    embedded_momentum_N_m_s, check_triangle
    [[particles]]   name, mass_kg, com_m (a body with zero inertia)
    [[joints]]      name, inner, outer, kind, <kind fields>, inner_point_m, outer_point_m,
                    inner_angles_deg|inner_angles_rad + inner_seq | inner_rotation_dcm,
                    the same for outer, stiffness, damping, stiffness_poly, damping_poly,
                    limits = {lower, upper, effort, velocity} (1-DOF joints)
    [[loops]]       loop joints that close cycles: the fields of [[joints]] (no springs);
                    inner or outer may be "N"
    [initial.<joint>]  angles_deg|angles_rad, rates_deg_s|rates_rad_s, quaternion,
                    displacements_m, displacement_rates_m_s
    [initial.<body>]   modal_coordinates, modal_rates (a flexible body's η and ξ = η̇)
    [[loads]]       type = "force"|"torque"|"joint", body|joint, values, frame, point_m
    [simulation]    t_final_s, dt_s, method, formulation, output_every_s, limits

Units are in the field names; angles are radians unless the name says ``_deg``.
Unknown keys are errors (they are usually typos). Every error is a
:class:`~kanedyn.FileFormatError` that names the file, the 1-based line and the key in
its table, in TOML terms, e.g.
``model.toml line 21: mass_kg in [[bodies]] #3 (name "boom"): expected a number, got "heavy"``
(the lines come from a scan of the text, ``_Source``).

:func:`write_toml` writes floats with ``repr`` precision, so ``read_toml_case`` of a
written file rebuilds the same model, state, loads and settings bit for bit.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from kanedyn.dynamics.loads import Force, JointLoad, Torque
from kanedyn.errors import FileFormatError, ModelError, did_you_mean
from kanedyn.io.modal_fields import (
    check_modal_fields,
    flexible_body,
    modes_fields,
    read_modal_npz,
    toml_array,
)
from kanedyn.model import Body, CentralGravity, Joint, JointLimits, Loop, Model, State
from kanedyn.model.records import LOOP_REMEDY
from kanedyn.spatial.inertia import inertia_tensor
from kanedyn.spatial.rotation import euler_to_dcm, quat_normalize

__all__ = ["Case", "read_toml", "read_toml_case", "write_toml"]

PathLike = str | os.PathLike[str]


@attrs.frozen(eq=False)
class Case:
    """Everything a model file describes: the model, its initial state, loads, settings.

    ``settings`` holds only the keys the file gives, named as :func:`kanedyn.simulate`'s
    arguments: ``t_final``, ``dt``, ``method``, ``formulation``, ``output_every``.
    """

    model: Model
    state: State
    loads: tuple[Force | Torque | JointLoad, ...] = attrs.field(default=(), converter=tuple)
    settings: dict[str, Any] = attrs.field(factory=dict)
    #: the modal data of each flexible body (``modes`` of its ``[[bodies]]`` table), by
    #: body name: the fields of ``kd.Modes`` (:func:`kanedyn.io.parse_modes`)
    modes: dict[str, dict[str, Any]] = attrs.field(factory=dict)


# =========================================================================== reading
_TOP_KEYS = ("model", "bodies", "particles", "joints", "loops", "initial", "loads", "simulation",
             # a Monte Carlo dispersion spec may sit in the model file (read by
             # kanedyn.io.read_dispersions)
             "seed", "outputs", "dispersion")  # fmt: skip
_MODEL_KEYS = ("gravity_m_s2", "central_gravity", "planar")
#: [model.central_gravity] keys and kd.CentralGravity's arguments
_CENTRAL_KEYS = {"mu_m3_s2": "mu", "J2": "J2", "radius_m": "radius", "center_m": "center"}
_PARTICLE_KEYS = ("name", "mass_kg", "com_m")
_BODY_KEYS = (
    "name",
    "mass_kg",
    "inertia_kg_m2",
    "inertia_tensor_kg_m2",
    "com_m",
    "embedded_momentum_N_m_s",
    "check_triangle",
    "allow_singular",
    "modes",
)
_JOINT_COMMON = (
    "name",
    "inner",
    "outer",
    "kind",
    "inner_point_m",
    "outer_point_m",
    "inner_angles_deg",
    "inner_angles_rad",
    "inner_seq",
    "inner_rotation_dcm",
    "outer_angles_deg",
    "outer_angles_rad",
    "outer_seq",
    "outer_rotation_dcm",
    "stiffness",
    "damping",
    "limits",
    "stiffness_poly",
    "damping_poly",
)
_LIMIT_KEYS = ("lower", "upper", "effort", "velocity")
_JOINT_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "free": (),
    "revolute": ("axis",),
    "prismatic": ("axis",),
    "spherical": (),
    "gimbal": ("seq", "dof"),
    "weld": (),
    "general": ("rot_type", "rot_dof", "rot_seq", "trn_dof", "trn_seq"),
}
_INITIAL_KEYS = (
    "angles_deg",
    "angles_rad",
    "rates_deg_s",
    "rates_rad_s",
    "quaternion",
    "displacements_m",
    "displacement_rates_m_s",
)
#: a flexible body's initial modal coordinates η and modal speeds ξ = η̇ (one a mode; the
#: units the modes' scaling gives: ``Psi · η`` is in m)
_MODAL_INITIAL_KEYS = ("modal_coordinates", "modal_rates")
_LOAD_KEYS = {
    "force": ("type", "body", "values", "frame", "point_m"),
    "torque": ("type", "body", "values", "frame"),
    "joint": ("type", "joint", "values"),
}
_SIM_KEYS = {  # file key -> Case.settings key
    "t_final_s": "t_final",
    "dt_s": "dt",
    "method": "method",
    "formulation": "formulation",
    "output_every_s": "output_every",
    "limits": "limits",
}
_METHODS = ("rk4", "RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")  # kanedyn.simulate's
_FORMULATIONS = ("kane", "msd")
_LIMIT_MODES = ("warn", "stop", "ignore")  # kanedyn.simulate's limits
_REQUIRED = object()


_KEY_PART = r"""[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'"""
_DOTTED = rf"(?:{_KEY_PART})(?:\s*\.\s*(?:{_KEY_PART}))*"
_ARRAY_HEADER = re.compile(rf"\s*\[\[\s*({_DOTTED})\s*\]\]")
_TABLE_HEADER = re.compile(rf"\s*\[\s*({_DOTTED})\s*\]")
_KEY_LINE = re.compile(rf"\s*({_DOTTED})\s*=")


def _key_parts(dotted: str) -> tuple[str, ...]:
    """The keys of a dotted TOML key (``a."b.c".d`` -> ``("a", "b.c", "d")``)."""
    parts = []
    for token in re.findall(_KEY_PART, dotted):
        if token[0] in "\"'":
            try:
                token = tomllib.loads(f"k = {token}")["k"]
            except tomllib.TOMLDecodeError:
                token = token[1:-1]
        parts.append(token)
    return tuple(parts)


def _indexed(name: tuple[str, ...], counts: dict[tuple[str, ...], int]) -> tuple[str | int, ...]:
    """A header's key path with the current index of each array of tables it goes
    through: ``[bodies.modes]`` after the second ``[[bodies]]`` is
    ``("bodies", 1, "modes")``."""
    path: list[str | int] = []
    for end in range(1, len(name) + 1):
        path.append(name[end - 1])
        if end < len(name) and name[:end] in counts:
            path.append(counts[name[:end]])
    return tuple(path)


class _Source:
    """A TOML file's name, text and parsed data, and the 1-based line of each key.

    tomllib gives no positions, so the lines come from a scan of the text: table
    headers (``[[bodies]]`` counted in order, ``[initial.hinge]``) and ``key =`` lines.
    A key path (``("bodies", 1, "mass_kg")``) maps to the line of its key, or of the
    nearest enclosing key or table found.
    """

    def __init__(self, fname: str, text: str, data: dict[str, Any]) -> None:
        self.fname, self.text, self.data = fname, text, data
        self.lines: dict[tuple[str | int, ...], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        table: tuple[str | int, ...] = ()
        for number, line in enumerate(text.splitlines(), 1):
            if m := _ARRAY_HEADER.match(line):
                name = _key_parts(m.group(1))
                counts[name] = counts.get(name, -1) + 1
                table = (*_indexed(name[:-1], counts), name[-1], counts[name])
            elif m := _TABLE_HEADER.match(line):
                table = _indexed(_key_parts(m.group(1)), counts)
            elif m := _KEY_LINE.match(line):
                self.lines.setdefault((*table, *_key_parts(m.group(1))), number)
                continue
            else:
                continue
            # the header names its table and, where first seen, the keys leading to it
            # (an unknown ``[[bodys]]`` is the key ``bodys`` of the top level)
            for end in range(1, len(table) + 1):
                self.lines.setdefault(table[:end], number)

    def line(self, path: tuple[str | int, ...]) -> int | None:
        """The line of ``path``'s key, or of its nearest enclosing key or table."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def describe(self, path: tuple[str | int, ...]) -> str:
        """``path`` in TOML terms: ``mass_kg in [[bodies]] #2 (name "hub")``."""
        for end in range(len(path), 0, -1):
            if isinstance(path[end - 1], int):  # an array of tables: [[bodies]] #2
                name, index = path[: end - 1], int(path[end - 1])
                table = f"[[{'.'.join(map(_toml_key, name))}]] #{index + 1}"
                entry = self.data.get(str(name[0])) if len(name) == 1 else None
                if isinstance(entry, list) and index < len(entry):
                    label = entry[index].get("name") if isinstance(entry[index], dict) else None
                    if isinstance(label, str):
                        table += f" (name {_s(label)})"
                break
        else:  # [model], [simulation], [initial.<joint>], or a top-level key
            depth = {"model": 1, "simulation": 1, "initial": 2}.get(str(path[0]), 0) if path else 0
            end = min(depth, len(path))
            table = f"[{'.'.join(_toml_key(p) for p in path[:end])}]" if end else ""
        key = ".".join(_toml_key(p) for p in path[end:])
        if key and table:
            return f"{key} in {table}"
        return key or table or "the top level"

    def error(self, path: tuple[str | int, ...], message: str, *,
              table_only: bool = False) -> FileFormatError:  # fmt: skip
        """A FileFormatError naming the file, the line of ``path`` and ``path`` itself
        (only its table with ``table_only``)."""
        line = self.line(path)
        where = f"{self.fname} line {line}" if line is not None else self.fname
        shown = path[:-1] if table_only else path
        message = message.replace("check_triangle=False", "check_triangle = false")
        return FileFormatError(f"{where}: {self.describe(shown)}: {message}")


def _toml_key(key: str | int) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else _s(text)


class _Table:
    """One TOML table being read; every error names the file, the line and the key.

    ``where`` is the table's key path in the document, e.g. ``("bodies", 1)`` for the
    second ``[[bodies]]`` table or ``("initial", "hinge")``.
    """

    def __init__(self, src: _Source, where: tuple[str | int, ...], table: Any,
                 allowed: Sequence[str]) -> None:  # fmt: skip
        self.src, self.where = src, where
        if not isinstance(table, dict):
            raise self.error(None, f"expected a table, got {_show(table)}")
        self.table = table
        unknown = [k for k in table if k not in allowed]
        if unknown:
            raise src.error(
                (*where, unknown[0]),
                f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(_show, unknown))}; "
                f"allowed keys are {', '.join(allowed)}",
                table_only=True,
            )

    def path(self, key: str | None) -> tuple[str | int, ...]:
        return self.where if key is None else (*self.where, key)

    def error(self, key: str | None, message: str) -> FileFormatError:
        return self.src.error(self.path(key), message)

    def has(self, key: str) -> bool:
        return key in self.table

    def get(self, key: str, default: Any = _REQUIRED) -> Any:
        if key not in self.table:
            if default is _REQUIRED:
                raise self.error(key, "required field is missing")
            return default
        return self.table[key]

    def number(self, key: str, default: Any = _REQUIRED) -> float:
        value = self.get(key, default)
        if value is default and key not in self.table:
            return value
        return _number(value, lambda msg: self.error(key, msg))

    def vector(self, key: str, n: int | None = 3, default: Any = _REQUIRED) -> Any:
        """A list of ``n`` numbers (any length if ``n`` is None)."""
        value = self.get(key, default)
        if key not in self.table:
            return value
        return _vector(value, n, lambda msg: self.error(key, msg))

    def matrix3(self, key: str) -> np.ndarray:
        value = self.get(key)
        fail = lambda msg: self.error(key, msg)  # noqa: E731
        if not isinstance(value, list) or len(value) != 3:
            raise fail(f"expected a 3x3 array (3 rows of 3 numbers), got {_show(value)}")
        return np.array([_vector(row, 3, fail) for row in value])

    def string(self, key: str, default: Any = _REQUIRED, choices: Sequence[str] = ()) -> Any:
        value = self.get(key, default)
        if key not in self.table:
            return value
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_show(value)}")
        if choices and value not in choices:
            raise self.error(
                key, f"expected one of {', '.join(map(_show, choices))}, got {_show(value)}"
            )
        return value

    def integer(self, key: str, default: Any = _REQUIRED, allowed: Sequence[int] = ()) -> Any:
        value = self.get(key, default)
        if key not in self.table:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {_show(value)}")
        if allowed and value not in allowed:
            raise self.error(key, f"expected one of {list(allowed)}, got {value}")
        return value

    def sequence(self, key: str, default: Any = _REQUIRED) -> Any:
        """An Euler or slide sequence: a string of 3 digits ("312"); an integer is accepted."""
        value = self.get(key, default)
        if key not in self.table:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or len(value) != 3 or any(c not in "123" for c in value):
            raise self.error(key, f'expected a sequence such as "312", got {_show(value)}')
        return value

    def boolean(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self.get(key, default)
        if key not in self.table:
            return value
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_show(value)}")
        return value


def _show(value: Any) -> str:
    """``value`` as it would be written in TOML, shortened to 60 characters."""
    text = _toml_value(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _s(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)  # inf, -inf, nan
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
        )
    return str(value)


def _parse(fname: str) -> _Source:
    """Read and parse a TOML file; syntax errors keep tomllib's line and column."""
    try:
        raw = Path(fname).read_bytes()
    except OSError as exc:
        raise FileFormatError(f"{fname}: cannot read the file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FileFormatError(
            f"{fname} line {line}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save the file as UTF-8"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_syntax_error(fname, exc, text) from None
    return _Source(fname, text, data)


def toml_syntax_error(fname: str, exc: tomllib.TOMLDecodeError, text: str) -> FileFormatError:
    """``file line L, column C: not valid TOML: <reason>`` from tomllib's error."""
    told = str(exc)
    m = re.search(r"\(at line (\d+), column (\d+)\)", told)
    if m is None:
        m = re.search(r"\(at end of document\)", told)
        lines = len(text.splitlines()) or 1
        where = f"{fname} line {lines} (the end of the file)" if m else fname
        reason = told if m is None else told[: m.start()].strip()
        return FileFormatError(f"{where}: not valid TOML: {reason}")
    reason = told[: m.start()].strip()
    return FileFormatError(
        f"{fname} line {m.group(1)}, column {m.group(2)}: not valid TOML: {reason}"
    )


#: words of a Body or Joint error, and the TOML keys they point at (first present wins)
_BLAME = (
    ("triangle", ("inertia_kg_m2", "inertia_tensor_kg_m2")),
    ("inertia", ("inertia_kg_m2", "inertia_tensor_kg_m2")),
    ("mass", ("mass_kg",)),
    ("embedded", ("embedded_momentum_N_m_s",)),
    ("com", ("com_m",)),
    ("inner_rotation", ("inner_rotation_dcm", "inner_angles_deg", "inner_angles_rad")),
    ("outer_rotation", ("outer_rotation_dcm", "outer_angles_deg", "outer_angles_rad")),
    ("inner_point", ("inner_point_m",)),
    ("outer_point", ("outer_point_m",)),
    ("stiffness_poly", ("stiffness_poly",)),
    ("damping_poly", ("damping_poly",)),
    ("stiffness", ("stiffness",)),
    ("damping", ("damping",)),
    ("inner", ("inner",)),
    ("outer", ("outer",)),
)


def _blame(t: _Table, message: str) -> FileFormatError:
    """The error of a Body or Joint constructor, at the key its message is about."""
    for word, keys in _BLAME:
        if re.search(rf"\b{word}\b", message):
            for key in keys:
                if t.has(key):
                    return t.error(key, message)
    return t.error(None, message)


def _blame_model(src: _Source, message: str) -> tuple[str | int, ...]:
    """The key path a Model error is about: the first joint (or body) it names."""
    for kind in ("joints", "bodies"):
        entries = src.data.get(kind)
        if not isinstance(entries, list):
            continue
        for name in re.findall(r"'([^']*)'", message):
            for k, entry in enumerate(entries):
                if isinstance(entry, dict) and entry.get("name") == name:
                    key = next((w for w in ("inner", "outer") if w in message and w in entry), None)
                    return (kind, k) if key is None else (kind, k, key)
    return ()


def _number(value: Any, fail: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(f"expected a number, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise fail(f"expected a finite number, got {_show(value)}")
    return number


def _vector(value: Any, n: int | None, fail: Any) -> np.ndarray:
    what = "a list of numbers" if n is None else f"a list of {n} numbers"
    if not isinstance(value, list) or (n is not None and len(value) != n):
        raise fail(f"expected {what}, got {_show(value)}")
    return np.array([_number(x, fail) for x in value], dtype=float)


def read_toml(path: PathLike) -> Model:
    """Read a kanedyn TOML model file and return its :class:`~kanedyn.Model`.

    The whole file is validated (initial state, loads and settings included); use
    :func:`read_toml_case` to get them too.

    Raises
    ------
    FileFormatError
        Naming the file and the table and field (and the line, for TOML syntax errors).
    """
    return read_toml_case(path).model


def read_document(path: PathLike) -> tuple[str, dict[str, Any]]:
    """The text of a TOML file and its parsed tables.

    Raises
    ------
    FileFormatError
        When the file cannot be read, is not UTF-8, or is not valid TOML (naming the
        file, and the line and column of a syntax error).
    """
    src = _parse(os.fspath(path))
    return src.text, src.data


def read_toml_case(path: PathLike) -> Case:
    """Read a kanedyn TOML file: model, initial state, loads and simulation settings.

    The state is ``model.initial_state()`` with the ``[initial.<joint>]`` tables applied,
    and the ``[initial.<body>]`` tables of flexible bodies (their modal coordinates and
    speeds, :meth:`~kanedyn.Model.set_modes`); with ``[[loops]]``, it is then assembled
    (:meth:`~kanedyn.Model.assemble`) with those joints fixed.
    """
    src = _parse(os.fspath(path))
    top = _Table(src, (), src.data, _TOP_KEYS)
    modes: dict[str, dict[str, Any]] = {}
    model = _read_model(src, top, modes)
    state, fixed = _read_initial(src, top, model)
    if model.loops:  # close the loops, keeping the joints the file sets
        try:
            state = model.assemble(state, fix=fixed)
        except ModelError as exc:
            raise FileFormatError(f"{src.fname}: initial state: {exc}") from None
    loads = _read_loads(src, top, model)
    settings = _read_settings(src, top)
    return Case(model=model, state=state, loads=loads, settings=settings, modes=modes)


def _array_of_tables(top: _Table, key: str) -> list[Any]:
    value = top.get(key, [])
    if not isinstance(value, list):
        raise top.error(key, f"expected an array of tables ([[{key}]]), got {_show(value)}")
    return value


def _read_model(src: _Source, top: _Table, modes: dict[str, dict[str, Any]]) -> Model:
    gravity: Any = np.zeros(3)
    planar = False
    if top.has("model"):
        mt = _Table(src, ("model",), top.get("model"), _MODEL_KEYS)
        gravity = mt.vector("gravity_m_s2", 3, np.zeros(3))
        if mt.has("central_gravity"):
            if mt.has("gravity_m_s2"):
                raise mt.error(
                    "central_gravity",
                    "give gravity_m_s2 (a uniform field) or central_gravity, not both",
                )
            gravity = _read_central_gravity(mt)
        planar = mt.boolean("planar", False)
    raw_bodies = _array_of_tables(top, "bodies")
    raw_particles = _array_of_tables(top, "particles")
    if not raw_bodies and not raw_particles:
        raise top.error("bodies", "the file defines no bodies ([[bodies]] tables)")
    bodies = [_read_body(src, i, raw, modes) for i, raw in enumerate(raw_bodies)]
    bodies += [_read_particle(src, i, raw) for i, raw in enumerate(raw_particles)]
    joints = [_read_joint(src, k, raw) for k, raw in enumerate(_array_of_tables(top, "joints"))]
    loops = [_read_loop(src, k, raw) for k, raw in enumerate(_array_of_tables(top, "loops"))]
    try:
        return Model(bodies, joints, gravity=gravity, loops=loops, planar=planar)
    except ModelError as exc:
        message = str(exc).replace(LOOP_REMEDY, "a [[loops]] table instead of [[joints]]")
        raise src.error(_blame_model(src, message), message) from None


def _read_central_gravity(mt: _Table) -> CentralGravity:
    """``[model.central_gravity]``: kd.CentralGravity's arguments, units in the names
    (each optional, defaulting as the class does: the Earth's mu and radius, J2 = 0)."""
    ct = _Table(mt.src, mt.path("central_gravity"), mt.get("central_gravity"), list(_CENTRAL_KEYS))
    kw: dict[str, Any] = {}
    for key, arg in _CENTRAL_KEYS.items():
        if ct.has(key):
            kw[arg] = ct.vector(key, 3) if arg == "center" else ct.number(key)
    try:
        return CentralGravity(**kw)
    except ModelError as exc:  # "CentralGravity mu (...): must be positive, got ..."
        arg = str(exc).split()[1]
        key = next(k for k, a in _CENTRAL_KEYS.items() if a == arg)
        raise ct.error(key, str(exc).split(": ", 1)[1]) from None


def _name(t: _Table, key: str = "name") -> str:
    name = t.string(key)
    if not name:
        raise t.error(key, "must not be empty")
    return name


def _read_body(src: _Source, i: int, raw: Any, modes: dict[str, dict[str, Any]]) -> Body:
    t = _Table(src, ("bodies", i), raw, _BODY_KEYS)
    name = _name(t)
    if name == "N":
        raise t.error("name", "'N' is reserved for the inertial frame")
    mass = t.number("mass_kg")
    if t.has("inertia_kg_m2") == t.has("inertia_tensor_kg_m2"):
        raise t.error(
            None, "give exactly one of inertia_kg_m2 = {Ixx, ...} or inertia_tensor_kg_m2"
        )
    value = t.get("inertia_kg_m2", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != 0:
            raise t.error(
                "inertia_kg_m2",
                f"a number here must be 0 (a particle), got {value}; give a table "
                "{ Ixx = ..., Iyy = ..., Izz = ... } for a rigid body",
            )
        inertia = np.zeros((3, 3))
    elif t.has("inertia_kg_m2"):
        parts = _Table(
            src,
            t.path("inertia_kg_m2"),
            t.get("inertia_kg_m2"),
            ("Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz"),
        )
        inertia = inertia_tensor(
            parts.number("Ixx"),
            parts.number("Iyy"),
            parts.number("Izz"),
            parts.number("Ixy", 0.0),
            parts.number("Ixz", 0.0),
            parts.number("Iyz", 0.0),
        )
    else:
        inertia = t.matrix3("inertia_tensor_kg_m2")
    try:
        body = Body(
            name,
            mass=mass,
            inertia=inertia,
            com=t.vector("com_m", 3, np.zeros(3)),
            embedded_momentum=t.vector("embedded_momentum_N_m_s", 3, np.zeros(3)),
            check_triangle=t.boolean("check_triangle", True),
            allow_singular=t.boolean("allow_singular", False),
        )
    except ModelError as exc:
        raise _blame(t, str(exc)) from None
    if not t.has("modes"):
        return body
    fields = _body_modes(t)
    modes[name] = fields
    try:
        return flexible_body(body, fields)
    except ModelError as exc:
        raise t.error("modes", str(exc)) from None


def _body_modes(t: _Table) -> dict[str, Any]:
    """A body's ``modes``: a modal-data file (relative to the model file) or a table."""
    value = t.get("modes")
    if isinstance(value, str):
        path = Path(t.src.fname).parent / value
        if not path.is_file():
            raise t.error("modes", f"modal-data file {os.fspath(path)!r} not found")
        return read_modal_file(path)
    if not isinstance(value, dict):
        raise t.error("modes", f"expected a file name or a table, got {_show(value)}")
    return _modal_table(t.src, t.path("modes"), value)


def _modal_table(
    src: _Source, where: tuple[str | int, ...], table: dict[str, Any]
) -> dict[str, Any]:
    def fail(field: str, message: str) -> FileFormatError:
        return src.error((*where, field), message)

    return check_modal_fields(table, fail)


def read_modal_file(path: PathLike) -> dict[str, Any]:
    """The fields of ``kd.Modes`` in a modal-data file (docs/howto/fem-modal-data.md).

    ``.npz``: named arrays; otherwise TOML, the fields as top-level keys. See
    :func:`kanedyn.io.parse_modes`.
    """
    fname = os.fspath(path)
    if fname.lower().endswith(".npz"):
        return read_modal_npz(fname)
    src = _parse(fname)
    return _modal_table(src, (), src.data)


def _read_particle(src: _Source, i: int, raw: Any) -> Body:
    """A ``[[particles]]`` table: a body with zero inertia."""
    t = _Table(src, ("particles", i), raw, _PARTICLE_KEYS)
    name = _name(t)
    if name == "N":
        raise t.error("name", "'N' is reserved for the inertial frame")
    try:
        return Body(
            name, mass=t.number("mass_kg"), inertia=0, com=t.vector("com_m", 3, np.zeros(3))
        )
    except ModelError as exc:
        raise t.error(None, str(exc)) from None


def _rotation(t: _Table, side: str) -> np.ndarray:
    """``inner_rotation`` (R_Bi_Gi) or ``outer_rotation`` (R_Go_Bo) from angles or a DCM."""
    deg, rad, seq, dcm = (
        f"{side}_angles_deg",
        f"{side}_angles_rad",
        f"{side}_seq",
        f"{side}_rotation_dcm",
    )
    given = [k for k in (deg, rad, dcm) if t.has(k)]
    if len(given) > 1:
        raise t.error(given[1], f"give only one of {deg}, {rad}, {dcm}")
    if not given:
        if t.has(seq):
            raise t.error(seq, f"{seq} needs {deg} or {rad}")
        return np.eye(3)
    if given[0] == dcm:
        if t.has(seq):
            raise t.error(seq, f"{seq} goes with angles, not with {dcm}")
        return t.matrix3(dcm)
    angles = t.vector(given[0], 3)
    if given[0] == deg:
        angles = np.deg2rad(angles)
    sequence = t.sequence(seq)
    try:
        return euler_to_dcm(sequence, angles)
    except ModelError as exc:
        raise t.error(seq, str(exc)) from None


def _axis(t: _Table) -> int:
    return t.integer("axis", _REQUIRED, (1, 2, 3))


def _per_dof(t: _Table, key: str) -> Any:
    if isinstance(t.get(key, 0.0), list):
        return t.vector(key, None)
    return t.number(key, 0.0)


def _poly(t: _Table, key: str) -> Any:
    """``stiffness_poly`` / ``damping_poly``: one pair ``[k2, k3]`` for every DOF, or one
    pair per DOF (``[[k2, k3], ...]``); 0 when absent."""
    value = t.get(key, 0.0)
    if not isinstance(value, list) or not any(isinstance(row, list) for row in value):
        return t.vector(key, 2, 0.0)
    fail = lambda msg: t.error(key, msg)  # noqa: E731
    return np.array([_vector(row, 2, fail) for row in value]).reshape(-1, 2)


def _read_loop(src: _Source, k: int, raw: Any) -> Loop:
    loop = _read_joint(src, k, raw, Loop)
    assert isinstance(loop, Loop)
    return loop


def _read_joint(src: _Source, k: int, raw: Any, cls: type[Joint] = Joint) -> Joint:
    joint = _build_joint(src, k, raw, cls)
    if joint.limits is not None and joint.ndof != 1:
        raise src.error(
            ("joints", k, "limits"),
            f"joint {joint.name!r} has {joint.ndof} degrees of freedom: limits are a range "
            "of one coordinate, for a 1-DOF joint (a hinge or a slide)",
        )
    return joint


def _build_joint(src: _Source, k: int, raw: Any, cls: type[Joint]) -> Joint:
    where: tuple[str | int, ...] = ("loops" if cls is Loop else "joints", k)
    if not isinstance(raw, dict):
        raise src.error(where, f"expected a table, got {_show(raw)}")
    kinds = tuple(_JOINT_KIND_KEYS)
    kind = _Table(src, where, {"kind": raw.get("kind")} if "kind" in raw else {}, ("kind",))
    kind_name = kind.string("kind", _REQUIRED, kinds)
    t = _Table(src, where, raw, _JOINT_COMMON + _JOINT_KIND_KEYS[kind_name])
    name = _name(t)
    inner = t.string("inner", None)
    if inner == "N":
        inner = None
    if inner == "":
        raise t.error("inner", 'must not be empty (omit it or write "N" for a root joint)')
    outer: Any = _name(t, "outer")
    if outer == "N" and cls is Loop:
        outer = None
    kw: dict[str, Any] = dict(
        inner_point=t.vector("inner_point_m", 3, np.zeros(3)),
        outer_point=t.vector("outer_point_m", 3, np.zeros(3)),
        inner_rotation=_rotation(t, "inner"),
        outer_rotation=_rotation(t, "outer"),
        stiffness=_per_dof(t, "stiffness"),
        damping=_per_dof(t, "damping"),
        stiffness_poly=_poly(t, "stiffness_poly"),
        damping_poly=_poly(t, "damping_poly"),
    )
    if t.has("limits"):
        if cls is Loop:
            raise t.error("limits", "a loop joint has no limits (its motion follows the tree's)")
        kw["limits"] = _read_limits(t)
    try:
        if kind_name == "free":
            return cls.free(name, outer, inner=inner, **kw)
        if kind_name == "revolute":
            return cls.revolute(name, inner, outer, axis=_axis(t), **kw)
        if kind_name == "prismatic":
            return cls.prismatic(name, inner, outer, axis=_axis(t), **kw)
        if kind_name == "spherical":
            return cls.spherical(name, inner, outer, **kw)
        if kind_name == "gimbal":
            dof = t.integer("dof", _REQUIRED, (1, 2, 3))
            return cls.gimbal(name, inner, outer, seq=t.sequence("seq"), dof=dof, **kw)
        if kind_name == "weld":
            return cls.weld(name, inner, outer, **kw)
        return cls(
            name,
            inner,
            outer,
            rot_type=t.string("rot_type", "gimbal", ("gimbal", "spherical")),
            rot_dof=t.integer("rot_dof", 0, (0, 1, 2, 3)),
            rot_seq=t.sequence("rot_seq", "123"),
            trn_dof=t.integer("trn_dof", 0, (0, 1, 2, 3)),
            trn_seq=t.sequence("trn_seq", "123"),
            **kw,
        )
    except ModelError as exc:
        raise _blame(t, str(exc)) from None


def _read_initial(src: _Source, top: _Table, model: Model) -> tuple[State, list[str]]:
    """The file's initial state and the joints it sets (kept fixed when loops close).

    ``[initial.<name>]`` sets a joint (``_INITIAL_KEYS``) or a flexible body's modal state
    (``_MODAL_INITIAL_KEYS``); a joint and a flexible body of the same name share it.
    """
    state = model.initial_state()
    if not top.has("initial"):
        return state, []
    initial = top.get("initial")
    if not isinstance(initial, dict):
        raise top.error(
            "initial",
            f"expected tables [initial.<joint>] or [initial.<body>], got {_show(initial)}",
        )
    fixed: list[str] = []
    flexible = [b.name for b in model.bodies if b.modes is not None]
    for name, raw in initial.items():
        t = _Table(src, ("initial", name), raw, _INITIAL_KEYS + _MODAL_INITIAL_KEYS)
        modal = any(t.has(k) for k in _MODAL_INITIAL_KEYS)
        if modal:
            state = _initial_modes(t, model, state, name, flexible)
        if any(t.has(k) for k in _INITIAL_KEYS) or not (modal or name in flexible):
            if name not in model.layout.joint_index:
                names = list(model.layout.joint_index)
                more = f"; flexible bodies are {flexible}" if flexible else ""
                raise t.error(
                    None,
                    f"no joint named {name!r}{did_you_mean(name, names)}; joints are {names}"
                    + more,
                )
            state = _initial_joint(t, model, state, name)
            fixed.append(name)
    return state, fixed


def _initial_modes(t: _Table, model: Model, state: State, name: str, flexible: list[str]) -> State:
    """``modal_coordinates`` (η) and ``modal_rates`` (ξ = η̇) of the flexible body
    ``name``: one finite number a mode each (``Model.set_modes``)."""
    key = next(k for k in _MODAL_INITIAL_KEYS if t.has(k))
    if name not in flexible:
        where = (
            f"body {name!r} is rigid (it has no modes)"
            if name in model.layout.body_index
            else f"no body named {name!r}{did_you_mean(name, flexible)}"
        )
        others = f"flexible bodies are {flexible}" if flexible else "the model has no flexible body"
        raise t.error(key, f"{where}, so it has no modal state; {others}")
    n = len(model.modal(name))
    values = {}
    for key, arg in zip(_MODAL_INITIAL_KEYS, ("amplitudes", "rates"), strict=True):
        if t.has(key):
            raw = t.get(key)
            if not isinstance(raw, list) or len(raw) != n:
                raise t.error(
                    key,
                    f"body {name!r} has {n} mode{'s' if n > 1 else ''}: expected a list of "
                    f"{n} numbers (one a mode), got {_show(raw)}",
                )
            values[arg] = t.vector(key, n)
    return model.set_modes(state, name, **values)


def _initial_joint(t: _Table, model: Model, state: State, joint: str) -> State:
    jnt = model.joint(joint)
    for a, b in (
        ("angles_deg", "angles_rad"),
        ("rates_deg_s", "rates_rad_s"),
        ("angles_deg", "quaternion"),
        ("angles_rad", "quaternion"),
    ):
        if t.has(a) and t.has(b):
            raise t.error(b, f"give {a} or {b}, not both")

    def apply(key: str, **kw: Any) -> State:
        try:
            return model.set_joint(state, joint, **kw)
        except ModelError as exc:
            raise t.error(key, str(exc)) from None

    for key, deg in (("angles_deg", True), ("angles_rad", False)):
        if t.has(key):
            values = t.vector(key, None)
            state = apply(key, angles=np.deg2rad(values) if deg else values)
    if t.has("quaternion"):
        quat = t.vector("quaternion", 4)
        if jnt.rot_type != "spherical":
            raise t.error("quaternion", f"joint {joint!r} is a gimbal: give its angles instead")
        norm = float(np.linalg.norm(quat))
        if norm == 0.0:
            raise t.error("quaternion", "must not be zero")
        if not math.isfinite(norm):
            raise t.error("quaternion", f"is too large to normalize: {_show(quat.tolist())}")
        if abs(norm - 1.0) > 1e-12:  # a unit quaternion is kept bit for bit
            quat = quat_normalize(quat)
        q = state.q.copy()
        q[model.coordinates(joint)[:4]] = quat
        state = State(q, state.u)
    for key, deg in (("rates_deg_s", True), ("rates_rad_s", False)):
        if t.has(key):
            values = t.vector(key, None)
            state = apply(key, rates=np.deg2rad(values) if deg else values)
    if t.has("displacements_m"):
        state = apply("displacements_m", displacements=t.vector("displacements_m", None))
    if t.has("displacement_rates_m_s"):
        state = apply(
            "displacement_rates_m_s", displacement_rates=t.vector("displacement_rates_m_s", None)
        )
    return state


def _read_loads(src: _Source, top: _Table, model: Model) -> tuple[Any, ...]:
    loads: list[Any] = []
    for i, raw in enumerate(_array_of_tables(top, "loads")):
        where: tuple[str | int, ...] = ("loads", i)
        if not isinstance(raw, dict):
            raise src.error(where, f"expected a table, got {_show(raw)}")
        kind = _Table(src, where, {"type": raw.get("type")} if "type" in raw else {}, ("type",))
        type_ = kind.string("type", _REQUIRED, tuple(_LOAD_KEYS))
        t = _Table(src, where, raw, _LOAD_KEYS[type_])
        if type_ == "joint":
            joint = t.string("joint")
            if joint not in model.layout.joint_index:
                names = list(model.layout.joint_index)
                hint = did_you_mean(joint, names)
                raise t.error("joint", f"no joint named {joint!r}{hint}; joints are {names}")
            values = t.vector("values", None)
            if values.size != model.joint(joint).ndof:
                raise t.error(
                    "values",
                    f"joint {joint!r} has {model.joint(joint).ndof} DOF, got {values.size} values",
                )
            loads.append(JointLoad(joint, values))
            continue
        body = t.string("body")
        if body not in model.layout.body_index:
            names = list(model.layout.body_index)
            hint = did_you_mean(body, names)
            raise t.error("body", f"no body named {body!r}{hint}; bodies are {names}")
        values = t.vector("values", 3)
        frame = t.string("frame", "N", ("N", "body"))
        if type_ == "force":
            point = t.vector("point_m", 3, None)
            loads.append(Force(body, values, point=point, frame=frame))
        else:
            loads.append(Torque(body, values, frame=frame))
    return tuple(loads)


def _read_limits(t: _Table) -> JointLimits:
    """A joint's ``limits = {lower, upper, effort, velocity}``: range [rad or m], largest
    effort [N m or N] and speed [rad/s or m/s], each optional (open: ``inf``)."""
    lim = _Table(t.src, t.path("limits"), t.get("limits"), _LIMIT_KEYS)
    values = {}
    for key in _LIMIT_KEYS:
        if lim.has(key):
            x = lim.get(key)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x):
                raise lim.error(key, f"expected a number (or inf, -inf), got {_show(x)}")
            values[key] = float(x)
    lower, upper = values.get("lower", -math.inf), values.get("upper", math.inf)
    if lower > upper:
        raise lim.error("upper", f"the range is empty: upper {upper:g} < lower {lower:g}")
    for key in ("effort", "velocity"):
        if values.get(key, 1.0) <= 0.0:
            raise lim.error(key, f"must be positive, got {values[key]:g}")
    return JointLimits(**values)


def _read_settings(src: _Source, top: _Table) -> dict[str, Any]:
    if not top.has("simulation"):
        return {}
    t = _Table(src, ("simulation",), top.get("simulation"), tuple(_SIM_KEYS))
    out: dict[str, Any] = {}
    for key, name in _SIM_KEYS.items():
        if not t.has(key):
            continue
        if key in ("method", "formulation", "limits"):
            choices = {"formulation": _FORMULATIONS, "limits": _LIMIT_MODES}.get(key, _METHODS)
            out[name] = t.string(key, _REQUIRED, choices)
        else:
            value = t.number(key)
            if value <= 0.0:
                raise t.error(key, f"must be positive, got {_show(value)}")
            out[name] = value
    return out


# =========================================================================== writing
def write_toml(
    model: Model,
    path: PathLike,
    state: State | None = None,
    settings: dict[str, Any] | None = None,
    *,
    loads: Sequence[Force | Torque | JointLoad] | None = None,
) -> None:
    """Write ``model`` (and optionally an initial state, loads, settings) as kanedyn TOML.

    Floats are written with ``repr`` precision, so reading the file back gives the same
    numbers bit for bit. Rotations are written as DCMs (``inner_rotation_dcm``); a
    spherical joint's state as its quaternion. ``settings`` takes the keys of
    :class:`Case.settings <Case>` (``t_final``, ``dt``, ``method``, ``formulation``,
    ``output_every``).

    The TOML schema has no named frames or geared rotors yet. Frames are not in the
    equations of motion: they are left out with an
    :class:`~kanedyn.io.UnsupportedFeatureWarning`. A model with geared rotors is refused with a
    :class:`~kanedyn.ModelError` rather than written wrongly. Massless bodies and point
    masses (``Body(..., allow_singular=True)``, such as 42's wheels) are written with
    ``allow_singular = true``.

    A flexible body's modes (``Body(..., modes=kd.Modes(...))``, :func:`kanedyn.beam_body`)
    are written as its ``[bodies.modes]`` table, the fields of
    :func:`kanedyn.io.modal_fields.modes_fields` (a damping ratio as the damping matrix
    it made), so that reading the file gives the same modal data bit for bit. A full
    flexible ``state`` (``nq_total`` coordinates, ``n_total`` speeds) writes its nonzero
    modal coordinates ``η`` and modal speeds ``ξ`` as ``[initial.<body>]`` tables
    (``modal_coordinates``, ``modal_rates``), read back bit for bit.
    """
    geared = [j.name for j in model.joints if j.rotor is not None]
    if geared:
        raise ModelError(
            f"write_toml: the kanedyn TOML format cannot hold the geared rotors of joint(s) "
            f"{', '.join(map(repr, geared))} yet; keep the model in its original file"
        )
    if model.frames:
        from kanedyn.io.fortytwo import UnsupportedFeatureWarning

        warnings.warn(
            f"write_toml: {len(model.frames)} named frame(s) not written (the TOML format "
            "has none yet; they are not in the equations of motion)",
            UnsupportedFeatureWarning,
            stacklevel=2,
        )
    text = _dumps(model, state, settings, loads)
    Path(path).write_text(text, encoding="utf-8")


def _f(x: Any) -> str:
    value = float(x) + 0.0  # no "-0.0" in files
    if not math.isfinite(value):
        raise ModelError(f"cannot write the non-finite number {value!r}")
    return repr(value)


def _limit(x: float) -> str:
    """A limit: a number, or TOML's ``inf``/``-inf`` for an open side."""
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else _f(x)


def _vec(x: Any) -> str:
    return "[" + ", ".join(_f(v) for v in np.asarray(x).ravel()) + "]"


def _mat(x: Any) -> str:
    return "[" + ", ".join(_vec(row) for row in np.asarray(x)) + "]"


def _s(text: str) -> str:
    """A TOML basic string."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_CYCLIC = {"123": 1, "231": 2, "312": 3}


def joint_kind(j: Joint) -> str:
    """The TOML ``kind`` of a joint: free, revolute, prismatic, spherical, gimbal, weld or
    general (the constructor that builds it)."""
    rot_seq, trn_seq = str(j.rot_seq), str(j.trn_seq)
    if j.rot_type == "spherical":
        if rot_seq == "123" and trn_seq == "123" and j.trn_dof in (0, 3):
            return "free" if j.trn_dof == 3 else "spherical"
        return "general"
    if j.rot_dof == 0 and rot_seq == "123":
        if j.trn_dof == 0 and trn_seq == "123":
            return "weld"
        if j.trn_dof == 1 and trn_seq in _CYCLIC:
            return "prismatic"
    if j.trn_dof == 0 and trn_seq == "123" and j.rot_dof > 0:
        return "revolute" if j.rot_dof == 1 and rot_seq in _CYCLIC else "gimbal"
    return "general"


def _dumps(
    model: Model,
    state: State | None,
    settings: dict[str, Any] | None,
    loads: Sequence[Any] | None,
) -> str:
    if model.is_symbolic:
        raise ModelError("write_toml: the model has symbolic parameters; use model.subs first")
    if any(b.name == "N" for b in model.bodies):
        raise ModelError("write_toml: a body is named 'N', which the file format reserves for N")
    lines = ["# kanedyn model file (schema: docs/toml-schema.md)", ""]
    central = model.central_gravity
    if central is None:
        lines += ["[model]", f"gravity_m_s2 = {_vec(model.gravity)}"]
    else:
        lines += [
            "[model]",
            f"central_gravity = {{ mu_m3_s2 = {_f(central.mu)}, J2 = {_f(central.J2)}, "
            f"radius_m = {_f(central.radius)}, center_m = {_vec(central.center)} }}",
        ]
    lines += ["planar = true", ""] if model.planar else [""]
    for b in model.bodies:
        I = b.inertia
        lines += [
            "[[bodies]]",
            f"name = {_s(b.name)}",
            f"mass_kg = {_f(b.mass)}",
            f"inertia_kg_m2 = {{ Ixx = {_f(I[0, 0])}, Iyy = {_f(I[1, 1])}, Izz = {_f(I[2, 2])}, "
            f"Ixy = {_f(-I[0, 1])}, Ixz = {_f(-I[0, 2])}, Iyz = {_f(-I[1, 2])} }}",
            f"com_m = {_vec(b.com)}",
        ]
        if np.any(b.embedded_momentum != 0.0):
            lines.append(f"embedded_momentum_N_m_s = {_vec(b.embedded_momentum)}")
        if not b.check_triangle:
            lines.append("check_triangle = false")
        if b.allow_singular:
            lines.append("allow_singular = true")
        if b.modes is not None:  # the fields of kd.Modes, as a [bodies.modes] table
            lines += ["", "[bodies.modes]"]
            lines += [f"{k} = {toml_array(v)}" for k, v in modes_fields(b.modes).items()]
        lines.append("")
    for table, j in [("joints", j) for j in model.joints] + [("loops", j) for j in model.loops]:
        kind = joint_kind(j)
        lines += [f"[[{table}]]", f"name = {_s(j.name)}"]
        lines.append(f"inner = {_s('N' if j.inner is None else j.inner)}")
        lines += [f"outer = {_s('N' if j.outer is None else j.outer)}", f"kind = {_s(kind)}"]
        if kind in ("revolute", "prismatic"):
            seq = str(j.rot_seq) if kind == "revolute" else str(j.trn_seq)
            lines.append(f"axis = {_CYCLIC[seq]}")
        elif kind == "gimbal":
            lines += [f"seq = {_s(str(j.rot_seq))}", f"dof = {j.rot_dof}"]
        elif kind == "general":
            lines += [
                f"rot_type = {_s(j.rot_type)}",
                f"rot_dof = {j.rot_dof}",
                f"rot_seq = {_s(str(j.rot_seq))}",
                f"trn_dof = {j.trn_dof}",
                f"trn_seq = {_s(str(j.trn_seq))}",
            ]
        lines += [
            f"inner_point_m = {_vec(j.inner_point)}",
            f"outer_point_m = {_vec(j.outer_point)}",
        ]
        for side, R in (("inner", j.inner_rotation), ("outer", j.outer_rotation)):
            if not np.array_equal(R, np.eye(3)):
                lines.append(f"{side}_rotation_dcm = {_mat(R)}")
        for field in ("stiffness", "damping"):
            values = getattr(j, field)
            if np.any(values != 0.0):
                lines.append(f"{field} = {_vec(values)}")
        for field in ("stiffness_poly", "damping_poly"):
            values = getattr(j, field)
            if np.any(values != 0.0):
                lines.append(f"{field} = {_mat(values)}")
        if j.limits is not None:
            given = [(k, getattr(j.limits, k)) for k in _LIMIT_KEYS]
            given = [(k, v) for k, v in given if not (math.isinf(v) and (k == "lower") == (v < 0))]
            lines.append("limits = { " + ", ".join(f"{k} = {_limit(v)}" for k, v in given) + " }")
        lines.append("")
    if state is not None:
        lines += _dump_state(model, state)
    for rec in loads or ():
        lines += _dump_load(model, rec)
    if settings:
        names = {v: k for k, v in _SIM_KEYS.items()}
        unknown = [k for k in settings if k not in names]
        if unknown:
            raise ModelError(f"write_toml: unknown settings {unknown}; allowed are {list(names)}")
        lines.append("[simulation]")
        for name, value in settings.items():
            if name in ("method", "formulation", "limits"):
                lines.append(f"{names[name]} = {_s(str(value))}")
            else:
                lines.append(f"{names[name]} = {_f(value)}")
        lines.append("")
    return "\n".join(lines)


def _dump_state(model: Model, state: State) -> list[str]:
    """The ``[initial.<joint>]`` tables of the joints, and with a full flexible state
    (``q = [q_joints | η]``, ``u = [u | s | ξ]``) the ``[initial.<body>]`` tables of the
    flexible bodies, where they differ from ``model.initial_state()``."""
    modal: dict[str, list[str]] = {}
    if model.nf and np.shape(state.q) == (model.nq_total,):
        model.check_state(state, flexible=True)
        eta_all, xi_all = state.q[model.nq :], state.u[model.n :]
        for i, sl in model.modal_slices():
            eta, xi = eta_all[sl], xi_all[sl]
            entries: list[str] = []
            modal[model.bodies[i].name] = entries
            if np.any(eta != 0.0):
                entries.append(f"modal_coordinates = {_vec(eta)}")
            if np.any(xi != 0.0):
                entries.append(f"modal_rates = {_vec(xi)}")
        state = State(state.q[: model.nq], state.u[: model.n])
    model.check_state(state)
    tables: dict[str, list[str]] = {}
    for k, j in enumerate(model.joints):
        qi, ui = model.layout.q_index[k], model.layout.u_index[k]
        nr = j.n_rot_coordinates
        rot_q, trn_q = state.q[qi[:nr]], state.q[qi[nr:]]
        rot_u, trn_u = state.u[ui[: j.rot_dof]], state.u[ui[j.rot_dof :]]
        entries = []
        if j.rot_type == "spherical":
            if not np.array_equal(rot_q, [0.0, 0.0, 0.0, 1.0]):
                entries.append(f"quaternion = {_vec(rot_q)}")
        elif np.any(rot_q != 0.0):
            entries.append(f"angles_rad = {_vec(rot_q)}")
        if np.any(rot_u != 0.0):
            entries.append(f"rates_rad_s = {_vec(rot_u)}")
        if np.any(trn_q != 0.0):
            entries.append(f"displacements_m = {_vec(trn_q)}")
        if np.any(trn_u != 0.0):
            entries.append(f"displacement_rates_m_s = {_vec(trn_u)}")
        tables[j.name] = entries
    for name, entries in modal.items():  # a joint named like the body shares its table
        tables[name] = tables.get(name, []) + entries
    lines: list[str] = []
    for name, entries in tables.items():
        if entries:
            lines += [f"[initial.{_s(name)}]", *entries, ""]
    return lines


def _dump_load(model: Model, rec: Any) -> list[str]:
    if isinstance(rec, Force):
        lines = [
            "[[loads]]",
            'type = "force"',
            f"body = {_s(rec.body)}",
            f"values = {_vec(rec.force)}",
            f"frame = {_s(rec.frame)}",
        ]
        if rec.point is not None:
            lines.append(f"point_m = {_vec(rec.point)}")
    elif isinstance(rec, Torque):
        lines = [
            "[[loads]]",
            'type = "torque"',
            f"body = {_s(rec.body)}",
            f"values = {_vec(rec.torque)}",
            f"frame = {_s(rec.frame)}",
        ]
    elif isinstance(rec, JointLoad):
        lines = [
            "[[loads]]",
            'type = "joint"',
            f"joint = {_s(rec.joint)}",
            f"values = {_vec(rec.values)}",
        ]
    else:
        raise ModelError(
            f"write_toml: cannot write the load {rec!r}; only kanedyn Force, Torque and "
            "JointLoad records (not callables) can be stored in a file"
        )
    return [*lines, ""]
