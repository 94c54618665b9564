"""An energy-momentum conserving integrator on director coordinates (seed 001).

Betsch's rotationless formulation: every body is its mass-centre position and three
body-fixed directors (constant mass matrix, quadratic rigidity constraints), every joint
is a set of constraints between two bodies, and the joint variables are augmented
coordinates so that they can be read out, sprung, damped and actuated (a planar
mechanism uses two in-plane directors per body). The step is the
midpoint rule with Gonzalez's discrete gradient of the constraints, so that energy,
linear and angular momentum are conserved to the Newton tolerance.

* :mod:`.constraints`: invariants, joint constraints, discrete gradients;
* :mod:`.formulation`: a kd.Model in director coordinates, and the maps to and from
  joint coordinates;
* :mod:`.step`: the time step (Newton on the full system with multipliers) and the run;
* :mod:`.origin`: a drifting free system's state held near the origin that follows it;
* :mod:`.spherical`: springs and dampers of spherical joints (discrete gradient in the
  joint's invariants);
* :mod:`.flexible`: flexible bodies (modal vectors as coordinates) and the frames of
  joints at their nodes;
* :mod:`.servo`: servo constraints (inverse dynamics);
* :mod:`.trajectory`: ``ConservingTrajectory``, the run's result.

``kd.simulate(model, state, t_final, dt, method="energy-momentum")`` runs it (or
``method=kd.EnergyMomentum(tol=...)``).
"""

from __future__ import annotations

from kanedyn.simulation.conserving.formulation import (
    Redundant,
    redundant,
    to_joint_coordinates,
    to_redundant,
)
from kanedyn.simulation.conserving.servo import (
    JointOutput,
    PointOutput,
    ServoResult,
    inverse_dynamics,
)
from kanedyn.simulation.conserving.step import Run, Stepper, run, simulate_energy_momentum
from kanedyn.simulation.conserving.trajectory import ConservingTrajectory

__all__ = [
    "ConservingTrajectory",
    "JointOutput",
    "PointOutput",
    "ServoResult",
    "inverse_dynamics",
    "Redundant",
    "Run",
    "Stepper",
    "redundant",
    "run",
    "simulate_energy_momentum",
    "to_joint_coordinates",
    "to_redundant",
]
