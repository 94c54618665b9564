"""kanedyn's modal-data files: a flexible body's modes, integrals and nodes.

Two forms hold the same fields, the arguments of :class:`kanedyn.Modes` (the table in
:mod:`kanedyn.io.modal_fields`; docs/howto/fem-modal-data.md shows how a FEM modal
result becomes them):

* **TOML** (``*.toml``): the fields as top-level keys, arrays as nested lists
  (``Psi[node][axis][mode]``), names as lists of strings. Every error names the file,
  the line and the field.
* **NumPy** (``*.npz``): one array per field, for large FEM models. Every error names
  the file and the array.

>>> fields = kd.io.parse_modes("array.toml")      # doctest: +SKIP
>>> modes = kd.io.read_modes("array.npz")         # doctest: +SKIP
>>> kd.io.write_modes("array.npz", fields)        # doctest: +SKIP

A model file's ``[[bodies]]`` table names a modal-data file (``modes = "array.toml"``)
or holds the fields itself (``[bodies.modes]``), see docs/toml-schema.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.io.modal_fields import MODAL_FIELDS, check_modal_fields, toml_array
from kanedyn.io.toml import read_modal_file
from kanedyn.model.modes import Modes

__all__ = ["parse_modes", "read_modes", "write_modes"]

PathLike = str | os.PathLike[str]


def parse_modes(path: PathLike) -> dict[str, Any]:
    """The fields of ``kd.Modes`` in a modal-data file, checked, as a dict of arrays.

    ``.npz``: named arrays; any other name: TOML. Checked as
    :func:`kanedyn.io.modal_fields.check_modal_fields` says (sizes, symmetry,
    definiteness, finite values, distinct names); absent optional fields are left out.

    Raises
    ------
    FileFormatError
        Naming the file, the line (TOML) and the field.
    """
    return read_modal_file(path)


def read_modes(path: PathLike) -> Any:
    """A :class:`kanedyn.Modes` from a modal-data file: ``Modes(**parse_modes(path))``.

    Raises
    ------
    FileFormatError
        As :func:`parse_modes`, and for data ``Modes`` rejects (naming the file).
    """
    fields = parse_modes(path)
    try:
        return Modes(**fields)
    except ModelError as exc:
        raise FileFormatError(f"{os.fspath(path)}: {exc}") from None


def write_modes(path: PathLike, fields: Mapping[str, Any]) -> None:
    """Write the fields of ``kd.Modes`` to a modal-data file (``.npz`` or TOML).

    The fields are checked first (as :func:`parse_modes` would); floats are written with
    ``repr`` precision, so :func:`parse_modes` reads back the same values bit for bit.
    """
    fname = os.fspath(path)

    def fail(field: str, message: str) -> ModelError:
        return ModelError(f"modal data {field}: {message}")

    checked = check_modal_fields(fields, fail)
    if fname.lower().endswith(".npz"):
        arrays = {k: np.asarray(v) for k, v in checked.items()}
        with open(fname, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]
        return
    lines = []
    for key in MODAL_FIELDS:
        if key in checked:
            lines.append(f"{key} = {toml_array(checked[key])}")
    Path(fname).write_text("\n".join(lines) + "\n", encoding="utf-8")
