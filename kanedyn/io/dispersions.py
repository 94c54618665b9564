"""Monte Carlo dispersion specs in TOML: ``seed``, ``outputs`` and ``[[dispersion]]``.

The keys are those of :class:`kanedyn.Dispersion` (docs/toml-schema.md lists them).
They may sit in a model file (the model reader ignores them) or in a file of their own::

    seed = 11
    [[dispersion]]
    parameter = "hinge1.damping.1"     # 50 % to 150 % of nominal
    distribution = "uniform"
    low = 0.5
    high = 1.5
    relative = true
"""

from __future__ import annotations

import os
import re
from typing import Any

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.io.toml import read_document
from kanedyn.model import Model, State
from kanedyn.simulation.montecarlo.dispersion import Dispersion, Target

__all__ = ["read_dispersions"]


def read_dispersions(
    path: str | os.PathLike[str],
    model: Model | None = None,
    state: State | None = None,
    *,
    loads: Any = None,
) -> tuple[list[Dispersion], int | None, list[str]]:
    """Read ``seed``, ``outputs`` and the ``[[dispersion]]`` tables of a TOML file (a
    model file or a separate one).

    Returns ``(dispersions, seed, outputs)``; ``seed`` is None and ``outputs`` empty when
    the file does not give them. Given the ``model`` (and the ``state`` and ``loads`` the
    members run from), each ``parameter`` is also resolved against it
    (:meth:`kanedyn.simulation.montecarlo.dispersion.Target.of`: a body, joint, mode or
    input that exists, and a non-zero nominal value for ``relative = true``), so that a
    name the model does not have is named with its line in the file.

    Raises
    ------
    FileFormatError
        Naming the file, the 1-based line and the field.
    """
    fname = os.fspath(path)
    text, data = read_document(fname)
    lines = _Lines(text)
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise FileFormatError(
            f"{fname}: line {lines.top('seed')}: seed: expected a non-negative integer, got {seed!r}"
        )
    outputs = data.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise FileFormatError(
            f"{fname}: line {lines.top('outputs')}: outputs: expected a list of names, got {outputs!r}"
        )
    tables = data.get("dispersion", [])
    if not isinstance(tables, list):
        raise FileFormatError(
            f"{fname}: line {lines.top('dispersion')}: dispersion: expected [[dispersion]] tables"
        )
    if not tables:
        raise FileFormatError(f"{fname}: the file has no [[dispersion]] tables")
    out = []
    for i, table in enumerate(tables):
        where = f"dispersion[{i + 1}]"
        head = lines.header(i)
        for key in ("parameter", "distribution"):
            if key not in table:
                raise FileFormatError(
                    f"{fname}: line {head}: {where}.{key}: required field is missing"
                )
            if not isinstance(table[key], str):
                raise FileFormatError(
                    f"{fname}: line {lines.key(i, key)}: {where}.{key}: expected a string, got {table[key]!r}"
                )
        args = {k: v for k, v in table.items() if k not in ("parameter", "distribution")}
        try:
            out.append(Dispersion(table["parameter"], table["distribution"], **args))
        except ModelError as exc:
            # the line of the first field of this table that the message names
            text = str(exc).split("': ", 1)[-1]
            named = [(m.start(), k) for k in table if (m := re.search(rf"\b{k}\b", text))]
            line = lines.key(i, min(named)[1]) if named else head
            raise FileFormatError(f"{fname}: line {line}: {where}: {exc}") from None
        if model is not None:
            _resolve(
                out[-1], model, state, loads, f"{fname}: line {lines.key(i, 'parameter')}: {where}"
            )
    return out, seed, list(outputs)


def _resolve(d: Dispersion, model: Model, state: State | None, loads: Any, where: str) -> None:
    """Resolve ``d``'s parameter against ``model`` (its nominal value at ``state``, which
    ``relative = true`` needs non-zero), as the Monte Carlo run will; a FileFormatError
    at ``where`` (the file, the line of ``parameter``, the table) if it cannot."""
    try:
        target = Target.of(model, d.parameter, None, loads)
        if state is not None:
            nominal = target.nominal(model, state, None, loads)
            if d.relative and nominal == 0.0:
                raise ModelError(
                    f"parameter {d.parameter!r}: relative = true needs a non-zero nominal value"
                )
    except ModelError as exc:
        raise FileFormatError(f"{where}: {exc}") from None


class _Lines:
    """1-based line numbers of top-level keys and of keys in ``[[dispersion]]`` tables
    (tomllib gives none)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers = [
            n for n, s in enumerate(self.lines, 1) if re.match(r"\s*\[\[\s*dispersion\s*\]\]", s)
        ]

    def top(self, key: str) -> int:
        first_table = next(
            (n for n, s in enumerate(self.lines, 1) if s.lstrip().startswith("[")),
            len(self.lines) + 1,
        )
        for n, s in enumerate(self.lines[: first_table - 1], 1):
            if re.match(rf"\s*{re.escape(key)}\s*=", s):
                return n
        return 1

    def header(self, i: int) -> int:
        return self.headers[i] if i < len(self.headers) else 1

    def key(self, i: int, key: str) -> int:
        start = self.header(i)
        for n in range(start + 1, len(self.lines) + 1):
            s = self.lines[n - 1]
            if s.lstrip().startswith("["):
                break
            if re.match(rf"\s*{re.escape(key)}\s*=", s):
                return n
        return start
