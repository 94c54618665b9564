"""Symbolic (sympy) paths: the same equations as the numeric engine, for teaching and
for cross-checks.

* :func:`kane` — Kane's equations of a :class:`~kanedyn.Model` (whose parameters may be
  sympy symbols), stage by stage under the numeric engine's names.
* :class:`KaneProblem` and :func:`linearize` — Kane's method for systems outside the
  joint model, with motion (nonholonomic) constraints and dependent speeds.
* :func:`lagrange` — Lagrange's equations of the same model (seed 000 formulation).
* :func:`compare` — a Kane–Lagrange (or any two) equivalence report.
* :meth:`KaneEquations.stages` — the teaching view, stage by stage; and
  :func:`symbolic_parameters`, a model's numbers as named symbols.
"""

from kanedyn.symbolic.compare import ComparisonReport, EntryComparison, Equations, compare
from kanedyn.symbolic.examples import (
    BenchmarkMatrices,
    BenchmarkParameters,
    RollingDisc,
    WhippleBicycle,
    benchmark_matrices,
    rolling_disc,
    whipple_bicycle,
)
from kanedyn.symbolic.kane import CompactEquations, KaneEquations, kane
from kanedyn.symbolic.lagrange import LagrangeEquations, generalized_symbols, lagrange
from kanedyn.symbolic.linearize import Linearization, linearize
from kanedyn.symbolic.parameters import symbolic_parameters
from kanedyn.symbolic.problem import (
    KaneProblem,
    Mass,
    RawEquations,
    solve_linear,
    solve_symmetric,
)
from kanedyn.symbolic.stages import Stage, Stages

__all__ = [
    "BenchmarkMatrices",
    "BenchmarkParameters",
    "CompactEquations",
    "ComparisonReport",
    "EntryComparison",
    "Equations",
    "KaneEquations",
    "KaneProblem",
    "LagrangeEquations",
    "Linearization",
    "Mass",
    "RawEquations",
    "RollingDisc",
    "WhippleBicycle",
    "benchmark_matrices",
    "compare",
    "generalized_symbols",
    "kane",
    "lagrange",
    "linearize",
    "rolling_disc",
    "solve_linear",
    "solve_symmetric",
    "Stage",
    "Stages",
    "symbolic_parameters",
    "whipple_bicycle",
]
