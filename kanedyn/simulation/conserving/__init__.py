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
* :mod:`.spherical`: springs and dampers of spherical joints (discrete gradient in the
  joint's invariants);
* :mod:`.servo`: servo constraints (inverse dynamics).

``kd.simulate(model, state, t_final, dt, method="energy-momentum")`` runs it (or
``method=kd.EnergyMomentum(tol=...)``).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

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
from kanedyn.simulation.integrate import Trajectory

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


@attrs.frozen(eq=False, slots=False)
class ConservingTrajectory(Trajectory):
    """A :class:`~kanedyn.Trajectory` of the energy-momentum scheme, with the director
    histories of the run in ``run`` (:class:`~.step.Run`: constraint residuals, Newton
    iterations, the cumulated damper dissipation).

    ``q`` are the joint coordinates of the director state (exact). The energies and
    momenta are those of the director state ``(x, v)``, the quantities the scheme
    conserves: ``½ vᵀ M v``, gravity and springs, ``Σ m φ̇`` and the angular momentum
    about the system mass centre. ``u`` are the joint speeds with the same generalized
    momenta (:func:`~.formulation.to_joint_coordinates`): the scheme's nodal velocities
    satisfy the velocity constraints only to O(h²) (exactly when a body's Euler tensor is
    indefinite and the step enforces the hidden constraints), so ``kd.kinetic_energy(model,
    traj.state(i))`` is below ``kinetic_energy[i]`` by ``½ |v - J u|²_M``, an O(h²)
    that does not grow.
    """

    run: Run | None = None

    @property
    def _run(self) -> Run:
        assert self.run is not None
        return self.run

    @cached_property
    def _derived(self) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]]:
        """Kinetic energy ``½ vᵀ M v``, gravity and spring energy, P and H of the director
        state at each output: what :class:`~kanedyn.Trajectory`'s ``kinetic_energy``,
        ``potential_energy``, ``linear_momentum`` and ``angular_momentum`` read."""
        M = self._run.red.M
        T = np.einsum("ti,ij,tj->t", self._run.v, M, self._run.v) * 0.5
        return T, self._run.energy - T, self._run.linear_momentum, self._run.angular_momentum
