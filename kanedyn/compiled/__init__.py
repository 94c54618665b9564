"""The compiled engine: one model's equations of motion as generated straight-line code.

The pipeline, one module per stage::

    tape         the tracer: scalar arithmetic recorded as straight-line operations
                 (constants folded, common subexpressions shared)
    kernels      the traced equations: ABA (Kane) and the MSD rates, run on the tape
    derivatives  forward-mode derivatives on the tape; the residual route's kernel
    sweep        vector-mode derivatives: a Jacobian's tangents as loops over lanes
    linearize    kd.linearize of a Model (of a KaneProblem: symbolic.linearize_numeric)
    python       emitter: the tape as one Python function (floats or NumPy arrays)
    llvm         emitter: LLVM IR (kernels, sweeps, RK4 loops); native compiles it
    c            emitter: standalone C (kd.codegen.to_c); tcc compiles it in memory
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


def __getattr__(name: str) -> object:
    """A submodule (``kd.compiled.<module>``), imported on first access (PEP 562)."""
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
