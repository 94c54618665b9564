"""The frames an animation plays: decimated output times and every body's pose.

A frame holds, at one output time of a :class:`~kanedyn.Trajectory`, each body's
body-frame origin ``p`` (N) and attitude ``R_N_B`` as a scalar-last quaternion (the
order three.js uses), both straight from :func:`kanedyn.kinematics`, and the system's
angular momentum ``H`` about its mass centre ``c`` (:func:`kanedyn.momentum`).

A flexible body (``Body(..., modes=kd.Modes)``) also has, at each frame, its modal
coordinates ``η`` (:meth:`kanedyn.Trajectory.modal`) and the deflected positions of its
nodes, ``p + R_N_B (r_n + Ψ_n η)`` (N), and the shape drawn through them
(:class:`FlexFrames`, :func:`deflected_path`).

Long runs are decimated to at most ``max_frames`` frames and to a frame-data size of
at most ``max_bytes``, keeping the first and the last output; the page says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kane import momentum
from kanedyn.dynamics.kinematics import kinematics, kinematics_at
from kanedyn.errors import KanedynError
from kanedyn.model import Model, State
from kanedyn.spatial.rotation import dcm_to_quat

if TYPE_CHECKING:
    from kanedyn.simulation.trajectory import Trajectory

__all__ = [
    "BYTES_PER_NUMBER",
    "FlexFrames",
    "Frames",
    "decimate",
    "deflected_path",
    "flex_numbers",
    "segment_count",
    "frames",
]

Array = NDArray[np.float64]

#: bytes one number takes in the page's frame data (repr of a float64, a comma, a space)
BYTES_PER_NUMBER = 24
#: points drawn per segment between two nodes of a flexible body (cubic Hermite)
SUBDIVISIONS = 8


@attrs.frozen(eq=False)
class FlexFrames:
    """A flexible body at the animated frames.

    ``node_names`` its nodes; ``eta`` (nf, modes) the modal coordinates;
    ``nodes`` (nf, Nn, 3) the deflected node positions in N, ``p + R_N_B (r_n + Ψ_n η)``
    [m] (true size); ``scale`` the factor the drawn deflection is magnified by;
    ``path`` (nf, P, 3) the drawn shape in the body frame, ``r + scale · d`` along the
    nodes in order (:func:`deflected_path`); ``drawn_nodes`` (nf, Nn, 3) the drawn node
    positions in the body frame, ``r_n + scale · Ψ_n η``.
    """

    node_names: tuple[str, ...]
    eta: Array
    nodes: Array
    scale: float
    path: Array
    drawn_nodes: Array


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
    flex: dict[str, FlexFrames] = attrs.field(factory=dict)

    @property
    def decimated(self) -> bool:
        return len(self.index) < self.n_samples


def decimate(
    n_samples: int, n_bodies: int, max_frames: int, max_bytes: float, extra: int = 0
) -> NDArray[np.intp]:
    """Indices of at most ``max_frames`` samples, evenly spread, first and last kept.

    The frame data costs about ``(7 n_bodies + 7 + extra)`` numbers per frame (position
    and quaternion of each body, H, the mass centre and the arrow's scale, and ``extra``
    for the flexible bodies, :func:`flex_numbers`); the count is lowered further so that
    it stays under ``max_bytes``.
    """
    if n_samples < 1:
        raise KanedynError("the trajectory has no output samples to animate")
    per_frame = (7 * n_bodies + 7 + extra) * BYTES_PER_NUMBER
    by_size = int(max_bytes // per_frame)
    n = min(n_samples, int(max_frames), by_size)
    if n < min(2, n_samples):
        raise KanedynError(
            f"max_frames={max_frames} and max_bytes={max_bytes:g} leave fewer than 2 frames "
            f"(one frame of {n_bodies} bodies takes about {per_frame} bytes)"
        )
    return np.unique(np.round(np.linspace(0, n_samples - 1, n)).astype(np.intp))


def segment_count(modes: Any) -> int:
    """Segments drawn along a flexible body's nodes (none with fewer than 2 nodes)."""
    return max(len(modes.node_names) - 1, 0) * SUBDIVISIONS


def flex_numbers(model: Model) -> int:
    """Numbers per frame the flexible bodies add to the page's frame data: per body
    ``η``, the true and the drawn node positions, and each drawn segment's position,
    quaternion and scale (:mod:`kanedyn.animation.scene`)."""
    total = 0
    for b in model.bodies:
        if b.modes is not None:
            total += b.modes.n + 6 * len(b.modes.node_names) + 10 * segment_count(b.modes)
    return total


def deflected_path(modes: Any, eta: Array, scale: float = 1.0) -> tuple[Array, Array]:
    """The drawn shape of a flexible body, body frame: ``(path, nodes)``.

    ``nodes`` (..., Nn, 3) are ``r_n + s Ψ_n η`` (``s`` the ``scale``; ``Ψ_n η`` the
    node's elastic displacement, :class:`kanedyn.Modes`). ``path`` (..., P, 3) runs
    through the nodes in their order, :data:`SUBDIVISIONS` segments between two nodes
    ``a``, ``b``: the cubic Hermite curve with the nodes' displacements ``d = s Ψ η`` and
    slopes ``ℓ (θ × t)`` (``θ = s Θ η`` the node's elastic rotation, ``t`` the unit chord
    ``(r_b - r_a) / ℓ``, ``ℓ = |r_b - r_a|``; small rotations turn the tangent by
    ``θ × t``), added to the straight chord:

    .. math::

        x(τ) = r_a + τ (r_b - r_a) + h_{00} d_a + h_{10} ℓ θ_a × t + h_{01} d_b
            + h_{11} ℓ θ_b × t

    with ``h00 = 2τ³ - 3τ² + 1``, ``h10 = τ³ - 2τ² + τ``, ``h01 = 3τ² - 2τ³``,
    ``h11 = τ³ - τ²``: exact when the deflection along the chord is a cubic (a beam
    element's shape functions).
    """
    eta = np.asarray(eta, dtype=float)
    r = np.asarray(modes.node_positions, dtype=float)  # (Nn, 3)
    d = scale * np.einsum("nip,...p->...ni", modes.Psi, eta)  # (..., Nn, 3)
    th = scale * np.einsum("nip,...p->...ni", modes.Theta, eta)
    nodes = r + d
    if len(r) < 2:
        return nodes, nodes
    tau = np.linspace(0.0, 1.0, SUBDIVISIONS + 1)[:-1]
    h00, h10 = 2 * tau**3 - 3 * tau**2 + 1, tau**3 - 2 * tau**2 + tau
    h01, h11 = 3 * tau**2 - 2 * tau**3, tau**3 - tau**2
    pieces = []
    for a in range(len(r) - 1):
        chord = r[a + 1] - r[a]
        slope_a = np.cross(th[..., a, :], chord)  # ℓ θ × t = θ × (r_b - r_a)
        slope_b = np.cross(th[..., a + 1, :], chord)
        pieces.append(
            r[a] + tau[:, None] * chord
            + h00[:, None] * d[..., a, None, :] + h10[:, None] * slope_a[..., None, :]
            + h01[:, None] * d[..., a + 1, None, :] + h11[:, None] * slope_b[..., None, :]
        )  # fmt: skip
    pieces.append(nodes[..., -1:, :])
    return np.concatenate(pieces, axis=-2), nodes


def frames(
    traj: Trajectory, max_frames: int = 1000, max_bytes: float = 8e6, deflection_scale: float = 1.0
) -> Frames:
    """The poses of every body at the decimated output times of ``traj``; for a flexible
    body also its modal coordinates, deflected nodes and drawn shape (:class:`FlexFrames`,
    the drawn deflection magnified ``deflection_scale`` times)."""
    model = traj.model
    scale = float(deflection_scale)
    if not (np.isfinite(scale) and scale >= 0.0):
        raise KanedynError(
            f"deflection_scale must be a finite number >= 0, got {deflection_scale!r}"
        )
    idx = decimate(len(traj.t), model.nb, max_frames, max_bytes, flex_numbers(model))
    p, quat, H, c, R_all = [], [], [], [], []
    for i in idx:
        q, u = traj.q[i], traj.u[i]
        # a flexible model's state holds the modal state (joints at nodes ride on it)
        kin = kinematics(model, State(q, u)) if model.nf else kinematics_at(model, q, u)
        mass = kin.params.mass
        p.append(kin.p)
        quat.append(dcm_to_quat(kin.R_N_B))
        H.append(momentum(model, State(q, u))[1])
        c.append(mass @ kin.r / mass.sum() if mass.sum() > 0 else kin.r.mean(axis=0))
        R_all.append(kin.R_N_B)
    P_all, R_stack = np.array(p), np.array(R_all)
    flex: dict[str, FlexFrames] = {}
    for k, _ in model.modal_slices():
        body = model.bodies[k]
        md: Any = body.modes
        eta = traj.modal(body.name)[0][idx]
        local = np.asarray(md.node_positions) + np.einsum("nip,fp->fni", md.Psi, eta)
        path, drawn = deflected_path(md, eta, scale)
        flex[body.name] = FlexFrames(
            node_names=tuple(md.node_names),
            eta=eta,
            nodes=P_all[:, k, None, :] + np.einsum("fij,fnj->fni", R_stack[:, k], local),
            scale=scale,
            path=path,
            drawn_nodes=drawn,
        )
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
        flex=flex,
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
