"""The dynamics layer: the equations of motion of a tree, stage by stage, on float
arrays with optional batch axes.

* :mod:`kanedyn.dynamics.kinematics`: attitudes, positions, velocities (the joint chain).
* :mod:`kanedyn.dynamics.partials`: the partial angular velocities Ω_u and partial
  velocities V_u, V_s, and the remainder accelerations α_r, a_r.
* :mod:`kanedyn.dynamics.loads`: gravity, springs, dampers and the user's loads.
* :mod:`kanedyn.dynamics.kane`: the mass matrix M, Fr, Fr*, the forcing, forward and
  inverse dynamics, energies and momenta.
* :mod:`kanedyn.dynamics.recursion`: the ABA, RNEA and MSD-rate recursions, written once
  on scalars (``kd.aba``; the compiled engine traces them).
* :mod:`kanedyn.dynamics.forward`: ``kd.forward_dynamics`` (trees and loops).
* :mod:`kanedyn.dynamics.rnea`: recursive Newton–Euler (the recursion's, in N).
* :mod:`kanedyn.dynamics.msd`: momentum-state dynamics (the states p_k, h_k).
* :mod:`kanedyn.dynamics.subtree`: sums over the subtree of each joint.
* :mod:`kanedyn.dynamics.constraints`: joint reaction forces.
* :mod:`kanedyn.dynamics.steppers`: the one classic RK4 step and the step schedule, below
  the compiled engine (whose loops trace the same step) and the simulation layer.
"""


def __getattr__(name: str) -> object:
    """A submodule (``kd.dynamics.<module>``), imported on first access (PEP 562)."""
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
