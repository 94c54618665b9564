"""The modal data of a flexible body as plain arrays: the fields of :class:`kanedyn.Modes`.

Every modal-data reader (:func:`kanedyn.io.parse_modes` for kanedyn's TOML and ``.npz``
files, a ``[[bodies]]`` table's ``modes`` in a model file, 42's flex files) produces the
same dict: the keyword arguments of ``kd.Modes`` (docs/howto/fem-modal-data.md), checked
here so that a bad value is reported against the file, the line and the field it came
from, not later by the dynamics.

With ``n`` modes and ``Nn`` nodes (refs/notes/42-kane-msd.md §13; Kane_NBody_Flex
slides 15-17):

========================  ===============  ==============================================
field                     shape            meaning
========================  ===============  ==============================================
``mass``                  (n, n)           M_Ψ = ∫ ΨᵀΨ dm; symmetric positive definite
``stiffness``             (n, n)           K; symmetric positive semidefinite
``damping``               (n, n)           C; symmetric positive semidefinite
``damping_ratio``         () or (n,)       ζ ≥ 0 (instead of ``damping``)
``P``                     (3, n)           ∫ Ψ dm
``H``                     (3, n)           ∫ r × Ψ dm
``L``                     (3, 3, n)        L_ijp = ∫ Ψ_ip r_j dm
``N``                     (3, 3, n, n)     N_ijpq = ∫ Ψ_ip Ψ_jq dm (so N_ijpq = N_jiqp)
``node_positions``        (Nn, 3)          body axes, from the body origin, m
``Psi``, ``Theta``        (Nn, 3, n)       node translation and rotation per unit mode
``node_names``            (Nn,)            distinct strings
``geometric``             (12, n, n)       stiffness per unit preload (3 linear and 3
                                           angular accelerations; centrifugal products
                                           xx, yy, zz, xy, yz, zx); each slice symmetric
``mode_names``            (n,)             distinct strings
========================  ===============  ==============================================

Only ``mass`` and ``stiffness`` are required. ``r`` is measured from the body origin,
in body axes.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from kanedyn.errors import FileFormatError
from kanedyn.model import Body
from kanedyn.model.modes import Modes

__all__ = [
    "MODAL_FIELDS",
    "check_modal_fields",
    "flexible_body",
    "modes_fields",
    "read_modal_npz",
    "toml_array",
]

#: The fields, in the order of ``kd.Modes``'s arguments.
MODAL_FIELDS = (
    "mass",
    "stiffness",
    "damping",
    "damping_ratio",
    "P",
    "H",
    "L",
    "N",
    "node_positions",
    "Psi",
    "Theta",
    "node_names",
    "geometric",
    "mode_names",
)
_NAMES = ("node_names", "mode_names")

Fail = Callable[[str, str], Exception]  # (field, message) -> the error to raise


def _array(value: Any, field: str, fail: Fail) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise fail(field, "expected numbers in a regular (rectangular) array") from None
    if not np.all(np.isfinite(array)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise fail(field, f"expected finite numbers, got {float(array[bad])} at index {list(bad)}")
    return array


def _shape(array: np.ndarray, want: tuple[int, ...], field: str, fail: Fail, what: str) -> None:
    if array.shape != want:
        shown = "x".join(map(str, want)) or "a number"
        got = "x".join(map(str, array.shape)) or "a number"
        raise fail(field, f"expected {shown} ({what}), got {got}")


def _symmetric(a: np.ndarray, field: str, fail: Fail, what: str = "") -> None:
    scale = max(float(np.max(np.abs(a))), np.finfo(float).tiny)
    asym = float(np.max(np.abs(a - a.T)))
    if asym > 1e-9 * scale:
        i, j = np.unravel_index(int(np.argmax(np.abs(a - a.T))), a.shape)
        raise fail(
            field,
            f"{what}not symmetric: [{i}][{j}] = {float(a[i, j])!r} but "
            f"[{j}][{i}] = {float(a[j, i])!r}",
        )


def _definite(a: np.ndarray, field: str, fail: Fail, strict: bool) -> None:
    eig = np.linalg.eigvalsh(a)
    scale = max(float(np.max(np.abs(eig))), np.finfo(float).tiny)
    if strict and eig[0] <= 1e-12 * scale:
        raise fail(field, f"not positive definite (smallest eigenvalue {eig[0]:.6g})")
    if not strict and eig[0] < -1e-9 * scale:
        raise fail(field, f"not positive semidefinite (smallest eigenvalue {eig[0]:.6g})")


def _names(value: Any, count: int, field: str, fail: Fail, what: str) -> tuple[str, ...]:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise fail(field, f"expected a list of {count} strings (one per {what})")
    if len(value) != count:
        raise fail(field, f"expected {count} names (one per {what}), got {len(value)}")
    seen: set[str] = set()
    for v in value:
        if not v:
            raise fail(field, "a name must not be empty")
        if v in seen:
            raise fail(field, f"the name {v!r} appears twice")
        seen.add(v)
    return tuple(value)


def check_modal_fields(table: Mapping[str, Any], fail: Fail) -> dict[str, Any]:
    """The fields of ``kd.Modes`` from ``table``, checked; arrays become float arrays.

    ``fail(field, message)`` builds the error to raise (it names the file and line).
    Checked: no unknown field; ``mass`` and ``stiffness`` present; every array finite and
    of the shape the table of the module docstring gives for the number of modes ``n``
    (the size of ``mass``) and of nodes; ``mass`` symmetric positive definite,
    ``stiffness`` and ``damping`` symmetric positive semidefinite, ``damping_ratio``
    non-negative, not both ``damping`` and ``damping_ratio``; ``N_ijpq = N_jiqp``; each
    slice of ``geometric`` symmetric; ``Psi`` and ``Theta`` need ``node_positions`` (an
    absent one of the two is zero: a FEM model without rotations); names distinct.
    Absent optional fields are left out of the result (``kd.Modes``'s defaults apply).
    """
    unknown = [k for k in table if k not in MODAL_FIELDS]
    if unknown:
        raise fail(
            unknown[0],
            f"unknown field {unknown[0]!r}; the fields are {', '.join(MODAL_FIELDS)}",
        )
    for key in ("mass", "stiffness"):
        if key not in table:
            raise fail(key, "required field is missing")
    out: dict[str, Any] = {}
    mass = _array(table["mass"], "mass", fail)
    if mass.ndim != 2 or mass.shape[0] != mass.shape[1] or mass.shape[0] == 0:
        got = "x".join(map(str, mass.shape)) or "a number"
        raise fail("mass", f"expected a square n x n matrix (n modes, n >= 1), got {got}")
    n = mass.shape[0]
    _symmetric(mass, "mass", fail)
    _definite(mass, "mass", fail, strict=True)
    out["mass"] = mass
    for key in ("stiffness", "damping"):
        if key in table:
            a = _array(table[key], key, fail)
            _shape(a, (n, n), key, fail, f"{n} modes, from mass")
            _symmetric(a, key, fail)
            _definite(a, key, fail, strict=False)
            out[key] = a
    if "damping_ratio" in table:
        if "damping" in table:
            raise fail("damping_ratio", "give damping (a matrix) or damping_ratio, not both")
        zeta = _array(table["damping_ratio"], "damping_ratio", fail)
        if zeta.shape not in ((), (n,)):
            raise fail("damping_ratio", f"expected a number or {n} numbers (one per mode)")
        if np.any(zeta < 0.0):
            raise fail("damping_ratio", f"must be non-negative, got {zeta.tolist()}")
        out["damping_ratio"] = float(zeta) if zeta.shape == () else zeta
    for key, want, what in (
        ("P", (3, n), "3 x n: x, y, z rows, one column per mode"),
        ("H", (3, n), "3 x n: x, y, z rows, one column per mode"),
        ("L", (3, 3, n), "3 x 3 x n: L[i][j][p]"),
        ("N", (3, 3, n, n), "3 x 3 x n x n: N[i][j][p][q]"),
        ("geometric", (12, n, n), "12 x n x n: one n x n matrix per preload"),
    ):
        if key in table:
            a = _array(table[key], key, fail)
            _shape(a, want, key, fail, what)
            out[key] = a
    if "N" in out:
        swapped = out["N"].transpose(1, 0, 3, 2)
        scale = max(float(np.max(np.abs(out["N"]))), np.finfo(float).tiny)
        if np.max(np.abs(out["N"] - swapped)) > 1e-9 * scale:
            i, j, p, q = np.unravel_index(int(np.argmax(np.abs(out["N"] - swapped))), (3, 3, n, n))
            raise fail(
                "N",
                f"N[i][j][p][q] = ∫ Ψ_ip Ψ_jq dm must equal N[j][i][q][p]: N[{i}][{j}][{p}][{q}] "
                f"= {float(out['N'][i, j, p, q])!r} but N[{j}][{i}][{q}][{p}] = "
                f"{float(out['N'][j, i, q, p])!r}",
            )
    if "geometric" in out:
        for k in range(12):
            _symmetric(out["geometric"][k], "geometric", fail, f"slice {k}: ")
    shapes = [k for k in ("Psi", "Theta") if k in table]
    if "node_positions" in table:
        pos = _array(table["node_positions"], "node_positions", fail)
        if pos.size == 0:
            pos = pos.reshape(0, 3)
        if pos.ndim != 2 or pos.shape[1] != 3:
            got = "x".join(map(str, pos.shape))
            raise fail("node_positions", f"expected Nn x 3 (one x, y, z row per node), got {got}")
        nn = pos.shape[0]
        out["node_positions"] = pos
        for key in ("Psi", "Theta"):
            if key in table:
                a = _array(table[key], key, fail)
                if a.size == 0 and nn == 0:
                    a = a.reshape(0, 3, n)
                _shape(
                    a, (nn, 3, n), key, fail, f"{nn} nodes, from node_positions; 3 axes; {n} modes"
                )
            else:
                a = np.zeros((nn, 3, n))
            out[key] = a
        if "node_names" in table:
            out["node_names"] = _names(table["node_names"], nn, "node_names", fail, "node")
    elif shapes or "node_names" in table:
        key = shapes[0] if shapes else "node_names"
        raise fail(key, "needs node_positions (the nodes' positions, Nn x 3)")
    if "mode_names" in table:
        out["mode_names"] = _names(table["mode_names"], n, "mode_names", fail, "mode")
    return out


def read_modal_npz(fname: str) -> dict[str, Any]:
    """The fields of ``kd.Modes`` from a NumPy ``.npz`` file of arrays named as the fields
    (strings for ``node_names`` and ``mode_names``; no pickled objects)."""

    def fail(field: str, message: str) -> FileFormatError:
        return FileFormatError(f"{fname}: array {field!r}: {message}")

    table: dict[str, Any] = {}
    try:
        data = np.load(fname, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise FileFormatError(f"{fname}: cannot read the file as .npz ({exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise FileFormatError(f"{fname}: a single array (.npy), not named arrays (.npz)")
    with data:
        for key in data.files:
            try:
                table[key] = data[key]
            except ValueError as exc:  # an object array: needs pickle
                raise fail(key, f"cannot be read without pickle ({exc})") from None
    for key in _NAMES:
        if key in table and isinstance(table[key], np.ndarray):
            if table[key].dtype.kind != "U":
                raise fail(key, "expected an array of strings")
            table[key] = [str(v) for v in table[key].tolist()]
    return check_modal_fields(table, fail)


def flexible_body(body: Body, fields: Mapping[str, Any]) -> Body:
    """``body`` made flexible: ``Body(..., modes=Modes(**fields))``.

    The one place the readers turn modal data into a flexible body. ``Modes`` raises a
    :class:`~kanedyn.ModelError` for data it rejects.
    """
    return attrs.evolve(body, modes=Modes(**fields))


def modes_fields(modes: Modes) -> dict[str, Any]:
    """The fields of a :class:`kanedyn.Modes` record, as the readers produce them, so that
    ``Modes(**modes_fields(m))`` is ``m`` again, array for array.

    ``damping`` is the matrix (a ``damping_ratio`` was folded into it on construction);
    the optional arrays that are zero (``damping``, ``P``, ``H``, ``L``, ``N``, ``Psi``,
    ``Theta``: zero is their default) and ``geometric`` when None are left out.
    """
    out: dict[str, Any] = {"mass": np.asarray(modes.mass), "stiffness": np.asarray(modes.stiffness)}
    for key in ("damping", "P", "H", "L", "N"):
        value = getattr(modes, key)
        if value is not None and np.any(value):
            out[key] = np.asarray(value)
    if len(modes.node_names):
        out["node_positions"] = np.asarray(modes.node_positions)
        for key in ("Psi", "Theta"):
            if np.any(getattr(modes, key)):
                out[key] = np.asarray(getattr(modes, key))
        out["node_names"] = tuple(modes.node_names)
    if modes.geometric is not None:
        out["geometric"] = np.asarray(modes.geometric)
    out["mode_names"] = tuple(modes.mode_names or ())  # always set by Modes
    return out


def toml_array(value: Any, depth: int = 0) -> str:
    """A field's TOML value (``repr`` precision, so it reads back bit for bit); the rows
    of a matrix or higher array each on a line."""
    if isinstance(value, str):  # a TOML basic string: quotes, backslashes, controls escaped
        chars = (
            "\\" + ch
            if ch in '"\\'
            else f"\\u{ord(ch):04X}"
            if ord(ch) < 0x20 or ord(ch) == 0x7F
            else ch
            for ch in value
        )
        return '"' + "".join(chars) + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(toml_array(v) for v in value) + "]"
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return repr(float(array))
    if len(array) == 0:
        return "[]"
    if array.ndim == 1:
        return "[" + ", ".join(repr(float(x)) for x in array) + "]"
    pad = "  " * (depth + 1)
    rows = [pad + toml_array(row, depth + 1) for row in array]
    return "[\n" + ",\n".join(rows) + ",\n" + "  " * depth + "]"
