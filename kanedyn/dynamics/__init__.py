"""The dynamics layer: the equations of motion of a tree, stage by stage, on float
arrays with optional batch axes.

* :mod:`kanedyn.dynamics.kinematics`: attitudes, positions, velocities (the joint chain).
* :mod:`kanedyn.dynamics.partials`: the partial angular velocities Ω_u and partial
  velocities V_u, V_s, and the remainder accelerations α_r, a_r.
* :mod:`kanedyn.dynamics.loads`: gravity, springs, dampers and the user's loads.
* :mod:`kanedyn.dynamics.kane`: the mass matrix M, Fr, Fr*, the forcing, forward and
  inverse dynamics, energies and momenta.
* :mod:`kanedyn.dynamics.rnea`: recursive Newton–Euler.
* :mod:`kanedyn.dynamics.msd`: momentum-state dynamics (the states p_k, h_k).
* :mod:`kanedyn.dynamics.subtree`: sums over the subtree of each joint.
* :mod:`kanedyn.dynamics.constraints`: joint reaction forces.
* :mod:`kanedyn.dynamics.steppers`: the one classic RK4 step and the step schedule, below
  the compiled engine (whose loops trace the same step) and the simulation layer.
"""
