"""Exceptions raised by kanedyn.

Every error names what is wrong (the body, the joint, the field, the line) so that a
user can fix the input without reading a traceback.
"""

from __future__ import annotations

#: the message of the ModelError every engine raises when Kane's mass matrix is singular
SINGULAR_MASS_MATRIX = "mass matrix is not positive definite"


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
