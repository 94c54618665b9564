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
    from kanedyn.simulation.montecarlo.result import MonteCarloResult
    from kanedyn.simulation.trajectory import Trajectory

__all__ = [
    "montecarlo_figure",
    "nutation_angle",
    "plot_attitude",
    "plot_joints",
    "plot_run",
    "plot_trajectory",
    "plottable",
    "run_title",
]


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
        raise ImportError(
            "plotting needs matplotlib: kanedyn[plot] (in kanedyn's source tree: python -m pip install '.[plot]')"
        ) from exc
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


#: line styles of the x, y, z components: overlapping traces stay visible
STYLES = ("-", "--", ":")


def _roundoff(values: np.ndarray, scale: float) -> bool:
    """Whether ``values`` are round-off only: all below ``1e-9 × scale`` (or all zero)."""
    finite = np.asarray(values)[np.isfinite(values)]
    return not finite.size or float(np.max(np.abs(finite))) <= 1e-9 * max(scale, 1e-300)


def _log_drift(ax: Any, t: np.ndarray, change: np.ndarray, label: str, color: str) -> None:
    """``|change|`` on a log axis from the second sample (the first is zero); values
    that are not finite or beyond :data:`LARGEST` are left out (a gap in the line), and
    so are exact zeros among nonzero values (at 1e-308 they would stretch the axis over
    300 decades: an orbit's energy, 1e10 J, can come back to the last bit)."""
    tiny = np.finfo(float).tiny  # keeps exact zeros drawable on a log axis
    with np.errstate(all="ignore"):
        a = np.abs(change[1:])
        y = np.where((a == 0.0) & np.any(a > 0.0), np.nan, a + tiny)
        y = np.where(np.isfinite(y) & (y <= LARGEST), y, np.nan)
    ax.semilogy(t[1:], y, color=color, label=label)


#: the largest magnitude drawn: beyond it a diverged run's values are left out, so the
#: axes (and their log scales) stay computable
LARGEST = 1e100


def plottable(traj: Trajectory) -> np.ndarray:
    """Which outputs can be drawn, (nt,) bool: ``t``, ``q``, ``u`` and the energy and
    momentum histories finite and at most :data:`LARGEST` in magnitude. A diverged run's
    last outputs may not be; :func:`plot_run` leaves them out and says so in its title."""
    with np.errstate(all="ignore"):
        columns = [
            traj.t[:, None], traj.q, traj.u, traj.kinetic_energy[:, None],
            traj.potential_energy[:, None], traj.linear_momentum, traj.angular_momentum,
        ]  # fmt: skip
        values = np.abs(np.concatenate(columns, axis=1))
        keep = np.all(np.isfinite(values) & (values <= LARGEST), axis=1)
    return np.asarray(keep, dtype=bool)


def _drawable(traj: Trajectory) -> tuple[Trajectory, str]:
    """``traj`` without the outputs that cannot be drawn (:func:`plottable`), and a note
    for the title ("" when every output is drawn)."""
    import attrs

    keep = plottable(traj)
    if keep.all():
        return traj, ""
    dropped = int((~keep).sum())
    first = float(traj.t[int(np.argmax(~keep))])
    note = (
        f"{dropped} of {keep.size} outputs not drawn (not finite or beyond {LARGEST:g}), "
        f"the first at t = {first:g} s"
    )
    momenta = None if traj.momenta is None else traj.momenta[keep]
    part = attrs.evolve(traj, t=traj.t[keep], q=traj.q[keep], u=traj.u[keep], momenta=momenta)
    derived = (traj.kinetic_energy, traj.potential_energy, traj.linear_momentum,
               traj.angular_momentum)  # fmt: skip
    part.__dict__["_derived"] = tuple(d[keep] for d in derived)  # the cached histories
    return part, note


def run_title(traj: Trajectory, summary: dict[str, Any] | None = None) -> str:
    """``model — formulation, engine, method dt = ... s`` (and the status, if not completed)."""
    s = summary or {}
    model = s.get("model", f"{traj.model.nb} bodies, {traj.model.n} DOF")
    dt = s.get("dt_s")
    step = f", dt = {dt:g} s" if dt is not None and traj.method == "rk4" else ""
    engine = f", {s['engine']} engine" if "engine" in s else ""
    title = f"{model}\n{traj.formulation} formulation{engine}, {traj.method}{step}"
    if traj.status != "completed":
        t_end = float(traj.t[-1]) if traj.t.size else 0.0
        title += f" ({traj.status} at t = {t_end:g} s)"
    return title


def plot_run(
    traj: Trajectory,
    path: str | Path | None = None,
    body: str | None = None,
    summary: dict[str, Any] | None = None,
) -> Any:
    """One figure for a run, titled with the model, formulation, engine and step.

    Panels: the energies and the relative change of the total energy (log axis; the
    absolute change when E0 = 0); the angular momentum components in N and their drift
    (relative to |H0|, or absolute when H0 = 0) with the linear momentum drift; one
    body's rates in its own axes; its attitude: for a free body, the angle between H
    and its initial spin axis (the body axis closest to H at t = 0), in a central field
    its roll, pitch and yaw relative to the osculating LVLH of the system's mass centre
    (:meth:`kanedyn.Trajectory.lvlh_attitude`, 123 Euler angles) and its angle from LVLH,
    otherwise its 321 Euler angles (yaw, pitch, roll) from N; the joint angles and
    slides; with flexible bodies, their modal coordinates (``body.y1``, ...). In a central field the angular momentum is the one about the field's centre
    (:meth:`kanedyn.Trajectory.angular_momentum_about`, conserved with free roots and no
    applied loads), without the linear momentum's drift. Panels and
    traces that carry only round-off (below 1e-9 of their scale) are left out, and so
    are the outputs that cannot be drawn (:func:`plottable`: a diverged run's last ones),
    which the title counts. The momentum drift is drawn where the momentum is conserved
    (:func:`kanedyn.simulation.diagnose.momentum_varies`; with ``summary``, unless it has
    ``momentum_drift_not_shown``).
    """
    from kanedyn.simulation.diagnose import momentum_varies
    from kanedyn.spatial.rotation import dcm_to_euler

    plt = _pyplot(path)
    title = run_title(traj, summary)  # the whole run's status and time
    traj, note = _drawable(traj)
    conserved = (
        "momentum_drift_not_shown" not in summary
        if summary is not None
        else momentum_varies(traj.model) is None
    )
    name = body or traj.model.bodies[0].name
    t = traj.t
    T, V = traj.kinetic_energy, traj.potential_energy
    E = T + V
    H, P = traj.angular_momentum, traj.linear_momentum
    central = traj.model.central_gravity is not None
    about = "the mass centre"
    if central:  # the conserved angular momentum is the one about the field's centre
        H, about = traj.angular_momentum_about(), "the field centre"
        conserved = conserved or momentum_varies(traj.model) == "gravity acts on the system"
    hist = traj.body(name)
    panels: list[Any] = []

    def energy(ax: Any) -> None:
        # the total drawn thin on top of a wide kinetic band, so neither hides the
        # other; the potential energy on its own (right) axis, in its own scale
        ax.plot(t, T, color="C0", lw=4.0, alpha=0.45, label="kinetic")
        ax.plot(t, E, color="k", lw=1.0, label="total")
        ax.set(ylabel="energy [J]", title="Energy")
        scale = float(np.nanmax(np.abs(E))) if E.size else 0.0
        if not _roundoff(V, scale):
            twin = ax.twinx()
            twin.plot(t, V, color="C1", lw=1.0, ls="--", label="potential (right axis)")
            twin.set_ylabel("potential energy [J]", color="C1")
            lines = ax.get_lines() + twin.get_lines()
            ax.legend(
                lines, [line.get_label() for line in lines], fontsize="small", loc="center left"
            )
        else:
            ax.legend(fontsize="small")

    def energy_drift(ax: Any) -> None:
        e0 = float(E[0])
        if e0 != 0.0:
            _log_drift(ax, t, (E - e0) / abs(e0), "|E - E0| / |E0|", "k")
            ax.set(ylabel="|E - E0| / |E0|", title="Energy: relative change (log)")
        else:
            _log_drift(ax, t, E - e0, "|E - E0|", "k")
            ax.set(ylabel="|E - E0| [J]", title="Energy: change (E0 = 0; log)")

    def momentum(ax: Any) -> None:
        for c, lab in enumerate("xyz"):
            ax.plot(t, H[:, c], color=f"C{c}", lw=2.6 - 0.8 * c, ls=STYLES[c], label=f"H_{lab}")
        ax.set(ylabel="H [N m s] (N axes)", title=f"Angular momentum about {about}")
        ax.legend(fontsize="small", ncol=3)

    def momentum_drift(ax: Any) -> None:
        h0 = float(np.linalg.norm(H[0]))
        dH = np.linalg.norm(H - H[0], axis=1)
        if h0 != 0.0:
            _log_drift(ax, t, dH / h0, "|H - H0| / |H0|", "C0")
            ax.set(ylabel="relative drift", title="Momentum drift (log)")
        else:
            _log_drift(ax, t, dH, "|H - H0| [N m s]", "C0")
            ax.set(ylabel="drift", title="Momentum drift (H0 = 0; log)")
        dP = np.linalg.norm(P - P[0], axis=1)
        if not central and not _roundoff(dP, max(float(np.max(np.linalg.norm(P, axis=1))), 1.0)):
            _log_drift(ax, t, dP, "|P - P0| [N s]", "C1")
        ax.legend(fontsize="small")

    def rates(ax: Any) -> None:
        w = np.degrees(hist.omega)
        for c, lab in enumerate("xyz"):
            ax.plot(t, w[:, c], color=f"C{c}", lw=1.6 - 0.4 * c, ls=STYLES[c], label=f"ω_{lab}")
        ax.set(ylabel="deg/s", title=f"Angular velocity of {name!r} (its body axes)")
        ax.legend(fontsize="small", ncol=3)

    free = _free(traj)

    def attitude(ax: Any) -> None:
        if free:
            ax.plot(t, np.degrees(nutation_angle(traj, name)), color="C3")
            ax.set(ylabel="deg", title=f"Angle between H and the initial spin axis of {name!r}")
            ax.set_ylim(0, 95)
        elif central:
            att = traj.lvlh_attitude(body=name)
            rpy = np.degrees(np.unwrap(att.angles, axis=0))
            for c, lab in enumerate(("roll", "pitch", "yaw")):
                ax.plot(t, rpy[:, c], color=f"C{c}", ls=STYLES[c], label=lab)
            ax.plot(t, np.degrees(att.angle), color="k", lw=0.8, label="angle from LVLH")
            ax.set(ylabel="deg", title=f"Attitude of {name!r} relative to LVLH: 123 Euler angles")
            ax.legend(fontsize="small", ncol=4)
        else:
            ypr = np.degrees(
                np.unwrap(np.array([dcm_to_euler("321", R) for R in hist.R_N_B]), axis=0)
            )
            for c, lab in enumerate(("yaw", "pitch", "roll")):
                ax.plot(t, ypr[:, c], color=f"C{c}", label=lab)
            ax.set(ylabel="deg", title=f"Attitude of {name!r}: 321 Euler angles from N")
            ax.legend(fontsize="small", ncol=3)

    lay = traj.model.layout
    names = traj.column_names()[1 : 1 + traj.model.nq]
    angles = [i for i in lay.angle_q if ".angle" in names[i]]
    slides = [i for i in lay.angle_q if ".angle" not in names[i]]
    angles = [i for i in angles if not _roundoff(traj.q[:, i], np.pi)]
    slides = [i for i in slides if not _roundoff(traj.q[:, i], 1.0)]

    def joint_angles(ax: Any) -> None:
        for i in angles:
            ax.plot(t, np.degrees(traj.q[:, i]), label=names[i])
        ax.set(ylabel="deg", title="Joint angles")
        ax.legend(fontsize="small", ncol=2)

    def joint_slides(ax: Any) -> None:
        for i in slides:
            ax.plot(t, traj.q[:, i], label=names[i])
        ax.set(ylabel="m", title="Joint slides")
        ax.legend(fontsize="small", ncol=2)

    panels = [energy, energy_drift, momentum, *([momentum_drift] if conserved else []), rates,
              attitude]  # fmt: skip
    if _roundoff(np.linalg.norm(H, axis=1), 1.0):  # nothing turns: no momentum panels
        panels = [energy, energy_drift, rates, attitude]
    model = traj.model
    flexible = [model.bodies[i].name for i, _ in model.modal_slices()]

    def modal(ax: Any) -> None:  # the columns body.y1, ... of the trajectory
        modal_names = traj.column_names()[1 + model.nq : 1 + model.nq_total]
        for k, label in enumerate(modal_names):
            ax.plot(t, traj.q[:, model.nq + k], label=label)
        ax.set(ylabel="η", title="Modal coordinates")
        ax.legend(fontsize="small", ncol=2)

    panels += [p for p, keep in ((joint_angles, angles), (joint_slides, slides)) if keep]
    panels += [modal] if flexible else []
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(
        rows, 2, figsize=(12, 2.9 * rows + 0.8), sharex=True, constrained_layout=True,
        squeeze=False,
    )  # fmt: skip
    for ax, panel in zip(axes.flat, panels, strict=False):
        panel(ax)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    if len(panels) % 2:
        axes[-2, 1].xaxis.set_tick_params(labelbottom=True)
        axes[-2, 1].set_xlabel("t [s]")
    fig.suptitle(title + (f"\n{note}" if note else ""))
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
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


def _free(traj: Trajectory) -> bool:
    """A free-floating model (every root joint free, no gravity) with nonzero H."""
    roots = [j for j in traj.model.joints if j.inner is None]
    free = (
        bool(roots)
        and all(j.rot_type == "spherical" and j.trn_dof == 3 for j in roots)
        and traj.model.central_gravity is None
        and not np.any(traj.model.uniform_gravity)
    )
    return free and bool(np.any(traj.angular_momentum[0]))


def plot_trajectory(
    traj: Trajectory, path: str | Path | None = None, body: str | None = None
) -> Any:
    """The run's figure (:func:`plot_run`) with a title from the trajectory alone.

    Returns the matplotlib Figure; writes it to ``path`` (PNG, ...) when given.
    """
    return plot_run(traj, path=path, body=body)
