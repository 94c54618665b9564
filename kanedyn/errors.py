"""Exceptions raised by kanedyn, and the warning of a deprecated name.

Every error names what is wrong (the body, the joint, the field, the line) so that a
user can fix the input without reading a traceback. A deprecated name (an old alias of
a function, an old module path) still works and warns once per place of use with a
:class:`DeprecationWarning` naming its replacement (:func:`deprecated_attribute`,
:class:`MovedModule`).
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

#: the message of the ModelError every engine raises when Kane's mass matrix is singular
SINGULAR_MASS_MATRIX = "mass matrix is not positive definite"


def did_you_mean(name: object, choices: Iterable[object]) -> str:
    """``" (did you mean 'X'?)"`` for the choice closest to a misspelt ``name``
    (:func:`difflib.get_close_matches`), or ``""`` when none is close.

    >>> "unknown body 'hbu'" + did_you_mean("hbu", ["hub", "panel"])
    "unknown body 'hbu' (did you mean 'hub'?)"
    """
    import difflib

    match = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


class KanedynError(Exception):
    """Base class of every error kanedyn raises on purpose."""


class ModelError(KanedynError, ValueError):
    """A model (bodies, joints, loads, state) is not physical or not consistent."""


class FileFormatError(KanedynError, ValueError):
    """A model file cannot be read; the message names the file and the line or field."""


class SimulationError(KanedynError, RuntimeError):
    """A simulation cannot go on (non-finite state, singular gimbal); names the time.

    When :func:`kanedyn.simulate` raises it during a run, ``trajectory`` holds the
    outputs up to the failure (a :class:`~kanedyn.Trajectory` with
    ``status == "diverged"``); otherwise it is None.
    """

    trajectory: object = None


class SimulationInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, in the command line) during :func:`kanedyn.simulate`.

    A KeyboardInterrupt, so code that stops on Ctrl-C still stops; ``trajectory`` holds
    the outputs up to the interruption (``status == "interrupted"``).
    """

    def __init__(self, message: str, trajectory: object = None) -> None:
        super().__init__(message)
        self.trajectory = trajectory


def deprecated_attribute(module: str, name: str, aliases: Mapping[str, tuple[str, Any]]) -> Any:
    """The module ``__getattr__`` (PEP 562) of deprecated names: ``aliases[name]`` is
    ``(replacement, value)``; ``value`` is returned with a DeprecationWarning naming the
    replacement. Any other name is an AttributeError, as for a module without aliases."""
    if name not in aliases:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    replacement, value = aliases[name]
    warnings.warn(
        f"{module}.{name} is deprecated; use {replacement}", DeprecationWarning, stacklevel=3
    )
    return value


class MovedModule(types.ModuleType):
    """A module's deprecated old path (``kanedyn.integrate`` for
    ``kanedyn.simulation.integrate``): each attribute read or written warns and goes to
    the module ``target``."""

    def __init__(self, name: str, target: types.ModuleType) -> None:
        super().__init__(name, f"Deprecated: use {target.__name__}.")
        self.__dict__["target"] = target

    def _warn(self) -> types.ModuleType:
        target: types.ModuleType = self.__dict__["target"]
        warnings.warn(
            f"{self.__name__} is deprecated; use {target.__name__}",
            DeprecationWarning,
            stacklevel=3,
        )
        return target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):  # the import system's probes
            return getattr(self.__dict__["target"], name)
        return getattr(self._warn(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") and name.endswith("__"):  # the import system's own
            self.__dict__[name] = value
            return
        setattr(self._warn(), name, value)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["target"])
