"""Plots of a Trajectory (needs the ``plot`` extra: matplotlib).

matplotlib is imported on the first plot, and this module does not import
:mod:`kanedyn.simulation.integrate` (``Trajectory`` is only a type hint here), so the two do not
form an import cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kanedyn.spatial.rotation import dcm_to_quat

if TYPE_CHECKING:
    from kanedyn.simulation.integrate import Trajectory
    from kanedyn.simulation.montecarlo.result import MonteCarloResult

__all__ = ["montecarlo_figure", "nutation_angle", "plot_attitude", "plot_joints", "plot_trajectory"]


def nutation_angle(
    traj: Trajectory, body: str | None = None, axis: int | None = None
) -> np.ndarray:
    """Angle (rad) between the angular momentum H and a body axis, over time.

    ``axis`` defaults to the body axis closest to H at t = 0 (the initial spin axis);
    ``body`` defaults to the first (root) body. A minor-axis spinner going flat has this
    angle growing from ~0 to π/2.
    """
    name = body or traj.model.bodies[0].name
    hist = traj.body(name)
    H_B = np.einsum("tji,tj->ti", hist.R_N_B, traj.angular_momentum)
    norm = np.linalg.norm(H_B, axis=1)
    if axis is None:
        axis = int(np.argmax(np.abs(H_B[0])))
    with np.errstate(invalid="ignore", divide="ignore"):
        cosang = np.abs(H_B[:, axis]) / np.where(norm > 0, norm, np.nan)
    return np.arccos(np.clip(cosang, 0.0, 1.0))


def _pyplot(path: str | Path | None) -> Any:
    try:
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'kanedyn[plot]'") from exc
    return plt


def plot_attitude(traj: Trajectory, path: str | Path | None = None, body: str | None = None) -> Any:
    """Attitude (quaternion of ``R_N_B``) and angular velocity (body axes) of one body."""
    plt = _pyplot(path)
    name = body or traj.model.bodies[0].name
    hist = traj.body(name)
    quat = dcm_to_quat(hist.R_N_B)
    # keep the quaternion continuous in time (q and -q are the same attitude)
    for i in range(1, len(quat)):
        if np.dot(quat[i], quat[i - 1]) < 0.0:
            quat[i:] *= -1.0
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True, constrained_layout=True)
    for c, lab in enumerate(("x", "y", "z", "w")):
        axes[0].plot(traj.t, quat[:, c], label=f"q_{lab}")
    axes[0].set(ylabel="quaternion of R_N_B", title=f"Attitude of {name!r}")
    axes[0].legend(ncol=4)
    for c, lab in enumerate("xyz"):
        axes[1].plot(traj.t, np.degrees(hist.omega[:, c]), label=f"ω_{lab}")
    axes[1].set(xlabel="t [s]", ylabel="deg/s (body axes)")
    axes[1].legend(ncol=3)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_joints(traj: Trajectory, path: str | Path | None = None) -> Any:
    """Every gimbal angle and slide displacement against time."""
    plt = _pyplot(path)
    lay = traj.model.layout
    names = traj.column_names()[1 : 1 + traj.model.nq]  # after "t": the coordinate names
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True, constrained_layout=True)
    n_rot = n_trn = 0
    for qi in lay.angle_q:
        label = names[qi]
        if ".angle" in label:
            axes[0].plot(traj.t, np.degrees(traj.q[:, qi]), label=label)
            n_rot += 1
        else:
            axes[1].plot(traj.t, traj.q[:, qi], label=label)
            n_trn += 1
    axes[0].set(ylabel="deg", title="Joint angles")
    axes[1].set(xlabel="t [s]", ylabel="m", title="Slide displacements")
    for ax, n in ((axes[0], n_rot), (axes[1], n_trn)):
        if n:
            ax.legend(fontsize="small", ncol=2)
        else:
            ax.text(0.5, 0.5, "none", transform=ax.transAxes, ha="center")
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_trajectory(
    traj: Trajectory, path: str | Path | None = None, body: str | None = None
) -> Any:
    """Four panels: energies, momentum drift, one body's rates (body axes), nutation.

    Returns the matplotlib Figure; writes it to ``path`` (PNG, ...) when given.
    """
    plt = _pyplot(path)
    name = body or traj.model.bodies[0].name
    t = traj.t
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    ax = axes[0, 0]
    ax.plot(t, traj.kinetic_energy, label="kinetic")
    ax.plot(t, traj.potential_energy, label="potential")
    ax.plot(t, traj.total_energy, "k--", label="total")
    ax.set(xlabel="t [s]", ylabel="energy [J]", title="Energy")
    ax.legend()

    ax = axes[0, 1]
    H, P = traj.angular_momentum, traj.linear_momentum
    h0 = max(float(np.linalg.norm(H[0])), np.finfo(float).tiny)
    tiny = np.finfo(float).tiny  # keeps exact zeros drawable on a log axis
    ax.semilogy(t[1:], np.linalg.norm(H - H[0], axis=1)[1:] / h0 + tiny, color="C0")
    ax.set(xlabel="t [s]", title=f"Momentum drift ({traj.formulation})")
    ax.set_ylabel("|H - H0| / |H0|", color="C0")
    twin = ax.twinx()
    twin.semilogy(t[1:], np.linalg.norm(P - P[0], axis=1)[1:] + tiny, color="C1")
    twin.set_ylabel("|P - P0| [N s]", color="C1")

    ax = axes[1, 0]
    w = traj.body(name).omega
    for c, lab in enumerate("xyz"):
        ax.plot(t, np.degrees(w[:, c]), label=f"ω_{lab}")
    ax.set(xlabel="t [s]", ylabel="deg/s", title=f"Angular velocity of {name!r} (body axes)")
    ax.legend()

    ax = axes[1, 1]
    ax.plot(t, np.degrees(nutation_angle(traj, name)))
    ax.set(xlabel="t [s]", ylabel="deg", title=f"Nutation: H to the initial spin axis of {name!r}")
    ax.set_ylim(0, 95)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def montecarlo_figure(result: MonteCarloResult, path: str | Path | None = None) -> Any:
    """Percentile envelopes of a Monte Carlo run's outputs (1-99 % and 5-95 % bands, the
    median) and histograms of its metrics, over the members whose status is ``ok``."""
    plt = _pyplot(path)
    outputs = list(result.outputs)
    # the user's metrics and each output's final value; min/max are in the table
    metrics = [m for m in result.metrics if not m.endswith((".min", ".max"))]
    cols = max(len(outputs), len(metrics), 1)
    cols = min(cols, 4)
    rows_out = -(-len(outputs) // cols)
    rows_met = -(-len(metrics) // cols)
    fig, axes = plt.subplots(rows_out + rows_met, cols, figsize=(3.6 * cols, 2.8 * (rows_out + rows_met)),
                             squeeze=False)  # fmt: skip
    for ax in axes.flat:
        ax.set_visible(False)
    ok = int(result.ok.sum())
    for o, name in enumerate(outputs):
        ax = axes[o // cols, o % cols]
        ax.set_visible(True)
        p = result.envelope(name, (1.0, 5.0, 50.0, 95.0, 99.0))
        ax.fill_between(result.t, p[0], p[4], color="C0", alpha=0.2, lw=0, label="1-99 %")
        ax.fill_between(result.t, p[1], p[3], color="C0", alpha=0.4, lw=0, label="5-95 %")
        ax.plot(result.t, p[2], color="C0", lw=1.2, label="median")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("t [s]", fontsize=8)
        ax.tick_params(labelsize=7)
        if o == 0:
            ax.legend(fontsize=7)
    for m, name in enumerate(metrics):
        ax = axes[rows_out + m // cols, m % cols]
        ax.set_visible(True)
        x = np.asarray(result.members.loc[result.ok, name], dtype=float)
        ax.hist(x[np.isfinite(x)], bins=min(50, max(5, int(np.sqrt(max(ok, 1))))), color="C1")
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("members", fontsize=8)
        ax.tick_params(labelsize=7)
    n = len(result.members)
    fig.suptitle(f"Monte Carlo: {n} members, {ok} ok", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
