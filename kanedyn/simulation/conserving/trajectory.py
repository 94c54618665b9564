"""The result of an energy-momentum run: :class:`ConservingTrajectory`, a
:class:`~kanedyn.Trajectory` whose energies and momenta are those of the director state."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.simulation.trajectory import Trajectory

if TYPE_CHECKING:
    from kanedyn.simulation.conserving.step import Run

__all__ = ["ConservingTrajectory"]


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
