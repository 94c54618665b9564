"""Exceptions raised by kanedyn.

Every error names what is wrong (the body, the joint, the field, the line) so that a
user can fix the input without reading a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable

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
