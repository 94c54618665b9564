"""Code generation: the tracer and its emitters, under their original name.

:mod:`kanedyn.compiled.tape` holds the :class:`Tape`; :mod:`kanedyn.compiled.python`
turns it into Python source (:func:`source`, :func:`build`, :data:`SCALAR_NAMESPACE`,
:data:`ARRAY_NAMESPACE`); :func:`to_c` (:mod:`kanedyn.compiled.c`) writes a model's
equations, their derivatives and an RK4 step as standalone C; :func:`to_fmu`
(:mod:`kanedyn.compiled.fmu`) packs them as an FMI 2.0 co-simulation FMU.
"""

from kanedyn.compiled.c import to_c
from kanedyn.compiled.fmu import to_fmu
from kanedyn.compiled.python import ARRAY_NAMESPACE, SCALAR_NAMESPACE, build, source
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
    "source",
    "sqrt",
    "to_c",
    "to_fmu",
]
