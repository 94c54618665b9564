"""The compiled engine: one model's equations of motion as generated straight-line code.

The pipeline, one module per stage::

    tape         the tracer: scalar arithmetic recorded as straight-line operations
                 (constants folded, common subexpressions shared)
    kernels      the traced equations: ABA (Kane) and the MSD rates, run on the tape
    python       emitter: the tape as one Python function (floats or NumPy arrays)
    runtime      compile_model and CompiledModel: cache, checks, the Python back end

``compile_model(model)`` traces the kernels once per model, lock set and formulation
and returns a :class:`CompiledModel`.
"""

from kanedyn.compiled import kernels, python, runtime, tape
from kanedyn.compiled.kernels import supports
from kanedyn.compiled.runtime import CompiledModel, check_finite, compile_model

__all__ = [
    "CompiledModel",
    "check_finite",
    "compile_model",
    "kernels",
    "python",
    "runtime",
    "supports",
    "tape",
]
