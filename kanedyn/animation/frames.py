"""The frames an animation plays: decimated output times and every body's pose.

A frame holds, at one output time of a :class:`~kanedyn.Trajectory`, each body's
body-frame origin ``p`` (N) and attitude ``R_N_B`` as a scalar-last quaternion (the
order three.js uses), both straight from :func:`kanedyn.kinematics`, and the system's
angular momentum ``H`` about its mass centre ``c`` (:func:`kanedyn.momentum`).

Long runs are decimated to at most ``max_frames`` frames and to a frame-data size of
at most ``max_bytes``, keeping the first and the last output; the page says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kane import momentum
from kanedyn.dynamics.kinematics import kinematics, kinematics_at
from kanedyn.errors import KanedynError
from kanedyn.model import State
from kanedyn.spatial.rotation import dcm_to_quat

if TYPE_CHECKING:
    from kanedyn.simulation.trajectory import Trajectory

__all__ = ["BYTES_PER_NUMBER", "Frames", "decimate", "frames"]

Array = NDArray[np.float64]

#: bytes one number takes in the page's frame data (repr of a float64, a comma, a space)
BYTES_PER_NUMBER = 24


@attrs.frozen(eq=False)
class Frames:
    """Poses at the animated times.

    ``index`` (nf,) the trajectory samples kept; ``t`` (nf,) their times [s];
    ``p`` (nf, nb, 3) body-frame origins in N [m]; ``quaternion`` (nf, nb, 4) the
    scalar-last quaternion of ``R_N_B``; ``H`` (nf, 3) angular momentum about the
    system mass centre, N axes [N m s]; ``c`` (nf, 3) the system mass centre in N [m];
    ``n_samples`` the trajectory's output count before decimation.
    """

    index: NDArray[np.intp]
    t: Array
    p: Array
    quaternion: Array
    H: Array
    c: Array
    n_samples: int

    @property
    def decimated(self) -> bool:
        return len(self.index) < self.n_samples


def decimate(n_samples: int, n_bodies: int, max_frames: int, max_bytes: float) -> NDArray[np.intp]:
    """Indices of at most ``max_frames`` samples, evenly spread, first and last kept.

    The frame data costs about ``(7 n_bodies + 6)`` numbers per frame (position and
    quaternion of each body, H and the mass centre); the count is lowered further so
    that it stays under ``max_bytes``.
    """
    if n_samples < 1:
        raise KanedynError("the trajectory has no output samples to animate")
    per_frame = (7 * n_bodies + 7) * BYTES_PER_NUMBER
    by_size = int(max_bytes // per_frame)
    n = min(n_samples, int(max_frames), by_size)
    if n < min(2, n_samples):
        raise KanedynError(
            f"max_frames={max_frames} and max_bytes={max_bytes:g} leave fewer than 2 frames "
            f"(one frame of {n_bodies} bodies takes about {per_frame} bytes)"
        )
    return np.unique(np.round(np.linspace(0, n_samples - 1, n)).astype(np.intp))


def frames(traj: Trajectory, max_frames: int = 1000, max_bytes: float = 8e6) -> Frames:
    """The poses of every body at the decimated output times of ``traj``."""
    model = traj.model
    idx = decimate(len(traj.t), model.nb, max_frames, max_bytes)
    p, quat, H, c = [], [], [], []
    for i in idx:
        q, u = traj.q[i], traj.u[i]
        # a flexible model's state holds the modal state (joints at nodes ride on it)
        kin = kinematics(model, State(q, u)) if model.nf else kinematics_at(model, q, u)
        mass = kin.params.mass
        p.append(kin.p)
        quat.append(dcm_to_quat(kin.R_N_B))
        H.append(momentum(model, State(q, u))[1])
        c.append(mass @ kin.r / mass.sum() if mass.sum() > 0 else kin.r.mean(axis=0))
    Q = np.array(quat)
    # one hemisphere per body, so that the page's slerp turns the short way
    for k in range(1, len(Q)):
        flip = np.einsum("bi,bi->b", Q[k], Q[k - 1]) < 0.0
        Q[k, flip] *= -1.0
    return Frames(
        index=idx,
        t=np.asarray(traj.t, dtype=float)[idx],
        p=np.array(p),
        quaternion=Q,
        H=np.array(H),
        c=np.array(c),
        n_samples=len(traj.t),
    )


def nice_speed(duration: float, seconds: float) -> float:
    """A playback speed (simulated seconds per second) of 1, 2 or 5 × 10^k that plays
    ``duration`` in about ``seconds``; never below 1 (real time) unless asked for."""
    if not (duration > 0 and seconds > 0):
        return 1.0
    raw = duration / seconds
    if raw <= 1.0:
        return 1.0
    k = math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * 10**k >= raw:
            return m * 10**k
    return 10.0 ** (k + 1)  # pragma: no cover
