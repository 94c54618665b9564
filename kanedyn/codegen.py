"""The tracer and its Python emitter, under their original name.

:mod:`kanedyn.compiled.tape` holds the :class:`Tape`; :mod:`kanedyn.compiled.python`
turns it into Python source (:func:`build`, :data:`SCALAR_NAMESPACE`,
:data:`ARRAY_NAMESPACE`).
"""

from kanedyn.compiled.python import ARRAY_NAMESPACE, SCALAR_NAMESPACE, build
from kanedyn.compiled.tape import TRACE, Scalar, Tape, Value, cos, sin, sqrt

__all__ = [
    "ARRAY_NAMESPACE",
    "SCALAR_NAMESPACE",
    "TRACE",
    "Scalar",
    "Tape",
    "Value",
    "build",
    "cos",
    "sin",
    "sqrt",
]
