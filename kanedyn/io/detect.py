"""Tell a model file's format from its content, and read any of them.

* **42**: a NASA 42 spacecraft description file. Its first line is 42's
  ``"42: Spacecraft Description File"`` banner, or it has 42's body and joint fields
  (``Number of Bodies``, ``Inner, outer body indices``).
* **urdf**: XML whose root element is ``<robot>``.
* **mjcf**: XML whose root element is ``<mujoco>`` (read through MuJoCo).
* **toml**: anything that parses as TOML and has a ``[[bodies]]`` array.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Literal

from kanedyn.errors import FileFormatError, ModelError
from kanedyn.model import Model, State

__all__ = ["detect_format", "read_model"]

Format = Literal["toml", "42", "urdf", "mjcf"]

_XML_ROOT = re.compile(r"<(?![?!])\s*([A-Za-z_][\w.:-]*)")
_BODIES_HEADER = re.compile(r"^\s*\[\[\s*bodies\s*\]\]", re.M)


def detect_format(path: str | os.PathLike[str]) -> Format:
    """``"toml"``, ``"42"``, ``"urdf"`` or ``"mjcf"``, judged from the file's content (not its name).

    Raises
    ------
    FileFormatError
        If the file cannot be read or is none of the three. A file that has a
        ``[[bodies]]`` table (or a ``.toml`` name) but is not valid TOML gets the TOML
        syntax error, with its line and column.
    """
    shown = os.fspath(path)
    try:
        text = Path(shown).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise FileFormatError(f"{shown}: cannot read the file ({exc.strerror})") from None
    stripped = text.lstrip("\ufeff \t\r\n")
    first = stripped.splitlines()[0] if stripped else ""
    if "Spacecraft Description File" in first or (
        "Number of Bodies" in text and "Inner, outer body indices" in text
    ):
        return "42"
    if stripped.startswith("<"):
        body = re.sub(r"<!--.*?-->", "", stripped, flags=re.S)
        match = _XML_ROOT.search(body)
        if match and match.group(1) == "robot":
            return "urdf"
        if match and match.group(1) == "mujoco":
            return "mjcf"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # a kanedyn TOML file with a syntax error: say where, as read_toml does
        if _BODIES_HEADER.search(text) or Path(shown).suffix.lower() == ".toml":
            from kanedyn.io.toml import toml_syntax_error

            raise toml_syntax_error(shown, exc, text) from None
        data = None
    if isinstance(data, dict) and "bodies" in data:
        return "toml"
    raise FileFormatError(
        f"{shown}: cannot tell the format: not a kanedyn TOML model (no [[bodies]]), "
        "not a 42 spacecraft file, not a URDF <robot>, not an MJCF <mujoco>"
    )


def read_model(path: str | os.PathLike[str]) -> tuple[Model, State]:
    """Read a model file of any supported format and return ``(model, initial state)``.

    TOML gives its ``[initial]`` state, 42 its initial attitude and joint state, URDF
    ``model.initial_state()``, and MJCF MuJoCo's initial ``qpos0`` (zero speeds),
    assembled when its equalities made loops (:func:`kanedyn.io.mjcf.initial_state`).
    """
    from kanedyn.io.fortytwo import read_42
    from kanedyn.io.toml import read_toml_case
    from kanedyn.io.urdf import read_urdf

    fmt = detect_format(path)
    if fmt == "42":
        return read_42(path)
    if fmt == "urdf":
        model = read_urdf(path)
        return model, model.initial_state()
    if fmt == "mjcf":
        from kanedyn.io.mjcf import initial_state, mujoco_module, read_mjcf

        mjm = mujoco_module().MjModel.from_xml_path(os.fspath(path))
        model = read_mjcf(path, mj_model=mjm)
        try:
            return model, initial_state(model, mjm)
        except ModelError as exc:
            raise FileFormatError(f"{os.fspath(path)}: initial state: {exc}") from None
    case = read_toml_case(path)
    return case.model, case.state
