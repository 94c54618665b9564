"""Correctness pre-checks: every peer's accelerations equal kanedyn's before timing."""

from __future__ import annotations

import numpy as np

import kanedyn as kd
from benchmarks.models import random_state
from benchmarks.peers import Peer
from kanedyn.dynamics.loads import joint_spring_forces

#: condition number of M up to which the 1e-10 tolerance applies unscaled
COND_REFERENCE = 1e5


def relative_error(model: kd.Model, peer: Peer, n_states: int = 3, seed: int = 0) -> float:
    """Largest ``|u̇_peer - u̇_kanedyn| / max(1, |u̇_kanedyn|) / max(1, κ(M) / 1e5)``
    over random states.

    Any two correct engines differ by about ``κ(M) ε`` in the accelerations (κ the
    condition number of the mass matrix, ε the machine epsilon): long chains reach
    κ ≈ 1e7, where Pinocchio and MuJoCo differ from each other by 4e-11. The error is
    therefore scaled down by ``κ / 1e5`` when κ exceeds 1e5, so that the 1e-10 test
    stays meaningful for well-conditioned models and fair for ill-conditioned ones.
    Springs and dampers enter the peers as the generalized forces ``Q`` (zero for the
    benchmark models).
    """
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(n_states):
        state = random_state(model, rng)
        acc = kd.forward_dynamics(model, state)
        tau = joint_spring_forces(model, state.q, state.u)
        other = peer.accelerations(state.q, state.u, tau)
        err = float(np.max(np.abs(other - acc)) / max(1.0, np.max(np.abs(acc))))
        kappa = np.linalg.cond(kd.mass_matrix(model, state))
        worst = max(worst, err / max(1.0, kappa / COND_REFERENCE))
    return worst
