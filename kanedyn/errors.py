"""Exceptions raised by kanedyn.

Every error names what is wrong (the body, the joint, the field, the line) so that a
user can fix the input without reading a traceback.
"""

from __future__ import annotations

#: the message of the ModelError every engine raises when Kane's mass matrix is singular
SINGULAR_MASS_MATRIX = (
    "mass matrix is not positive definite (a 3-DOF gimbal at its singular angle?)"
)


class KanedynError(Exception):
    """Base class of every error kanedyn raises on purpose."""


class ModelError(KanedynError, ValueError):
    """A model (bodies, joints, loads, state) is not physical or not consistent."""


class FileFormatError(KanedynError, ValueError):
    """A model file cannot be read; the message names the file and the line or field."""


class SimulationError(KanedynError, RuntimeError):
    """A simulation cannot go on (non-finite state, singular gimbal); names the time."""
