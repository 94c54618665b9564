"""Particles: bodies with zero inertia, and the check that their model can move.

A body with ``inertia = 0`` is a point mass at its mass centre. Kane's mass matrix
``M = Σ Ω_iᵀ I_i Ω_i + m_i V_iᵀ V_i`` (Kane_NBody slide 23) then has no rotational
term for it, and ``M`` is singular when some combination of speeds moves no mass, for
instance a spherical joint whose subtree is one particle at the joint point (the spin
about the rod) or a hinge whose axis passes through every particle it carries.

:func:`check_mass_matrix` evaluates ``M`` at a few random configurations (unit
quaternions, angles in (-π, π), slides in (-1, 1)); a structural singularity shows at
all of them, a singular configuration (a 3-DOF gimbal at its singular angle) at none.
"""

from __future__ import annotations

import numpy as np

from kanedyn.errors import ModelError
from kanedyn.model import Model, State

__all__ = ["check_mass_matrix"]

_RTOL = 1e-10


def check_mass_matrix(model: Model, samples: int = 3) -> None:
    """Raise :class:`~kanedyn.ModelError` if the mass matrix of ``model`` is singular at
    every one of ``samples`` random configurations, naming the joint(s) of the speeds in
    the null space (the joint with nothing to move).

    Skipped for models with symbolic parameters.
    """
    from kanedyn.dynamics.kane import mass_matrix  # the engine, above the model layer

    if model.is_symbolic or model.n == 0:
        return
    rng = np.random.default_rng(20)
    lay = model.layout
    null = None
    for _ in range(samples):
        q = rng.uniform(-np.pi, np.pi, model.nq)
        if lay.quat_q.size:
            quat = rng.normal(size=lay.quat_q.shape)
            q[lay.quat_q] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
        M = mass_matrix(model, State(q, np.zeros(model.n)))
        w, V = np.linalg.eigh(M)
        if w[0] > _RTOL * max(w[-1], 1.0):
            return
        null = V[:, 0]
    assert null is not None
    owner = np.empty(model.n, dtype=int)
    for k in range(len(model.joints)):
        owner[lay.u_index[k]] = k
    weight = np.zeros(len(model.joints))
    np.add.at(weight, owner, null**2)
    names = [model.joints[k].name for k in np.argsort(-weight) if weight[k] > 1e-6]
    particles = [b.name for b in model.bodies if not np.any(b.inertia)]
    raise ModelError(
        f"joint {names[0]!r} has nothing to move"
        + (f" (with joints {names[1:]})" if len(names) > 1 else "")
        + f": the mass matrix is singular in every configuration, because the particles "
        f"{particles} (bodies with zero inertia) give no inertia to some combination of "
        "its speeds (e.g. a spin about an axis through every particle it carries). "
        "Remove that DOF (a 2-DOF gimbal instead of a spherical joint, a weld instead of "
        "a hinge) or give the body an inertia."
    )
