"""Forward dynamics of any model: ``d/dt [u | s]`` from Kane's equations of the tree
(:mod:`kanedyn.dynamics.kane`), or for a model with loops from the constrained equations
``Cᵀ(Fr + Fr*) = 0`` (:mod:`kanedyn.dynamics.loops`). It sits above both, which the
loops' equations build on the tree's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics import loops
from kanedyn.dynamics.kane import (
    flexible_system,
    forcing_at,
    kane_terms,
    mass_matrix_at,
    solve_mass_matrix,
)
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import LoadsLike, applied_loads
from kanedyn.errors import ModelError
from kanedyn.model import Model, State
from kanedyn.model.batch import ModelBatch, States, resolve

__all__ = ["forward_dynamics"]

Array = NDArray[np.float64]


def forward_dynamics(
    model: Model | ModelBatch, state: State | States, loads: LoadsLike = None, t: float = 0.0
) -> Array:
    """``d/dt [u | s]`` from ``M ν̇ = Fr + Fr*|_{ν̇=0}``, solved by Cholesky.

    Kane_NBody slide 23. With :class:`~kanedyn.States` (B states) and/or a
    :class:`~kanedyn.ModelBatch` (B parameter sets) the result is (B, n); load records
    then apply to every member. For a model with loops, the accelerations of the
    constrained equations ``Cᵀ(Fr + Fr*) = 0`` (:mod:`kanedyn.dynamics.loops`). With
    flexible bodies, ``d/dt [u | s | ξ]`` (:func:`kanedyn.dynamics.kane.flexible_system`;
    with loops too).
    """
    if isinstance(model, Model) and model.nf:  # flexible bodies (kanedyn.dynamics.flex)
        if model.loops and isinstance(state, State):  # the loop rows: ξ columns zero
            return loops.forward_dynamics(model, state, loads, t)
        return solve_mass_matrix(*flexible_system(model, state, loads, t))
    base, params, q, u = resolve(model, state)
    if base.loops:  # Kane's equations with the loops' dependent speeds eliminated
        if params is not None or q.ndim > 1:
            raise ModelError("batched forward dynamics of a model with loops is not supported")
        return loops.forward_dynamics(base, State(q, u), loads, t)
    kin = kinematics_at(base, q, u, params)
    tm = kane_terms(base, kin)
    L = applied_loads(base, state, kin, loads, t)
    return solve_mass_matrix(mass_matrix_at(base, tm), forcing_at(base, tm, L))
