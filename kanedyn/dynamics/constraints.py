"""Joint reaction (constraint) forces and torques, with no extra solve.

Kane Constraints slides 8-10 (42 ``KaneNBodyConstraints``): with the constraint partials
``Ω_c``, ``V_c`` built from the **unused** columns of Γ (rotational constraint axes, in
Go) and Δ (translational constraint axes, Gi axes not free), the generalized constraint
forces are

.. math::

    c = \\Omega_c^T T_c + V_c^T F_c
      = -\\Omega_c^T [T_a - I(\\Omega\\dot\\nu + \\alpha_r) - \\omega \\times H]
        - V_c^T [F_a - m(V\\dot\\nu + a_r)]

Because every outboard body of joint k shares the columns of joint k, ``Ω_cᵀ T + V_cᵀ F``
summed over the subtree is the projection of the subtree's resultant wrench about the
joint point. So this module forms, per joint k, the wrench that Bi (or N) exerts on the
subtree through the joint (force in N, torque about ``o_k`` in N),

.. math::

    F_k = \\sum_{i \\in k} m_i a_i - F_i, \\qquad
    T_k = \\sum_{i \\in k} I_i\\dot\\omega_i + \\omega_i\\times H_i - T_i
          + (r_i - o_k) \\times (m_i a_i - F_i)

and removes the joint's own applied effort (springs, dampers, actuators: the
minimum-norm torque ``G (GᵀG)⁻¹ Q`` along the free Γ columns ``G``, and the force
``D Q`` along the free slide axes ``D``). Unlike 42's ``Constraint.42`` output, the
remainder inertia terms are counted once (refs/notes/42-kane-msd.md §12, defect 1).

In a model with loops, the accelerations are those of the constrained equations and the
loop forces (:func:`kanedyn.loop_forces`) act on their two bodies like applied loads.
"""

from __future__ import annotations

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics import loops
from kanedyn.dynamics.kane import forcing_at, kane_terms, mass_matrix_at, solve_mass_matrix
from kanedyn.dynamics.kinematics import cross, kinematics_at, mv
from kanedyn.dynamics.loads import LoadsLike, applied_loads
from kanedyn.dynamics.rotors import refuse_rotors
from kanedyn.dynamics.subtree import subtree_wrench
from kanedyn.model import Model, State

__all__ = ["ConstraintForces", "constraint_forces"]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class ConstraintForces:
    """Per joint k (model order), all in N components.

    ``force`` / ``torque`` (nj, 3): the total wrench Bi exerts on Bo's subtree through
    the joint (torque about the joint point). ``constraint_force`` /
    ``constraint_torque`` (nj, 3): its reaction part (the applied joint effort removed).
    ``generalized``: per joint, the generalized constraint forces ``c`` along the
    constraint axes, rotational axes first (unused Γ columns), then translational
    (Gi axes that are not free). ``axes``: those axes as unit columns in N, (3, nc).
    """

    joint_names: tuple[str, ...]
    force: Array
    torque: Array
    constraint_force: Array
    constraint_torque: Array
    generalized: tuple[Array, ...]
    axes: tuple[Array, ...]

    def of(self, joint: str) -> dict[str, Array]:
        """The entries of one joint, by name."""
        k = self.joint_names.index(joint)
        return {
            "force": self.force[k],
            "torque": self.torque[k],
            "constraint_force": self.constraint_force[k],
            "constraint_torque": self.constraint_torque[k],
            "generalized": self.generalized[k],
            "axes": self.axes[k],
        }


def constraint_forces(
    model: Model, state: State, loads: LoadsLike = None, t: float = 0.0
) -> ConstraintForces:
    """Joint reaction forces and torques at ``state`` (see the module docstring)."""
    model.check_state(state)
    refuse_rotors(model, "constraint_forces")
    lay = model.layout
    kin = kinematics_at(model, state.q, state.u)
    tm = kane_terms(model, kin)
    L = applied_loads(model, state, kin, loads, t)
    F_loop, T_loop = np.zeros((model.nb, 3)), np.zeros((model.nb, 3))
    if model.loops:  # the loop forces act on their bodies like applied loads
        acc = loops.forward_dynamics(model, state, loads, t)
        F_loop, T_loop = loops.loop_wrenches(model, kin, loops.loop_forces(model, state, loads, t))
    else:
        acc = solve_mass_matrix(mass_matrix_at(model, tm), forcing_at(model, tm, L))
    alpha = tm.Omega @ acc + tm.par.alpha_r
    a = tm.V @ acc + tm.par.a_r
    F_net = tm.params.mass[:, None] * a - L.F - F_loop  # what the joints must supply, per body
    T_net = mv(tm.I_N, alpha) + cross(kin.omega, tm.H) - L.T - T_loop
    F_k, T_k = subtree_wrench(model, F_net, T_net, kin.r_rel, kin.o_rel)

    F_c, T_c = F_k.copy(), T_k.copy()
    generalized, axes = [], []
    for k, j in enumerate(model.joints):
        idx = lay.u_index[k]
        G = kin.R_N_Go[k] @ kin.Gamma[k]
        D = kin.R_N_Gi[k] @ np.eye(3)[[int(c) - 1 for c in j.trn_seq]].T  # all three Gi slide axes
        Gf, Df = G[:, : j.rot_dof], D[:, : j.trn_dof]
        if j.rot_dof:
            T_c[k] -= Gf @ np.linalg.solve(Gf.T @ Gf, L.Q[idx[: j.rot_dof]])
        if j.trn_dof:
            F_c[k] -= Df @ L.Q[idx[j.rot_dof :]]
        if j.rot_type == "spherical":
            rot_axes = np.zeros((3, 0))
        elif j.rot_dof == 0:  # no rotation: the three Go axes are constrained
            rot_axes = kin.R_N_Go[k]
        else:  # the unused columns of Γ (angles beyond rot_dof are zero)
            rot_axes = G[:, j.rot_dof :]
        trn_axes = D[:, j.trn_dof :]
        A = np.concatenate((rot_axes, trn_axes), axis=1)
        axes.append(A)
        generalized.append(np.concatenate((rot_axes.T @ T_c[k], trn_axes.T @ F_c[k])))
    return ConstraintForces(
        joint_names=tuple(j.name for j in model.joints),
        force=F_k,
        torque=T_k,
        constraint_force=F_c,
        constraint_torque=T_c,
        generalized=tuple(generalized),
        axes=tuple(axes),
    )
