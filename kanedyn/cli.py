"""The ``kanedyn`` command line: ``simulate``, ``check``, ``derive``, ``convert``,
``montecarlo``, ``export-fmu``.

Every error the user can cause (a :class:`~kanedyn.KanedynError`, or an ``OSError`` on a
file) is reported on one line on stderr with exit code 2, and no traceback. Any other
exception is a bug in kanedyn: it gets a short "internal error" line and exit code 1, and
``--debug`` (before or after the subcommand) shows its traceback instead.

``simulate`` checks its options before it reads the model, streams the trajectory CSV
while the run goes, and when the run diverges or is interrupted (Ctrl-C, SIGTERM) still
writes every file for the part that was computed, with ``"status"`` in ``summary.json``
saying how the run ended. The other files are written to a hidden ``.part`` file and
renamed into place, so each is either absent or complete. Each subcommand imports only
what it needs (matplotlib only to plot).
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import kanedyn as kd
from kanedyn.errors import KanedynError
from kanedyn.simulation.diagnose import DEFAULT_DT, DEFAULT_T_FINAL

EXPLORER1_T_FINAL = 20000.0
EXPLORER1_DT = 1.0
GRAVITY_HELP = (
    "uniform gravity in N axes, m/s^2, e.g. 0,0,-9.81 (default: a TOML file's own, "
    "(0, 0, -9.81) for URDF, MJCF's <option gravity>, none for 42)"
)
DEBUG_HELP = (
    "show the full traceback of an error instead of a one-line message "
    "(for bug reports; may be given before or after the subcommand)"
)
#: the files ``kanedyn simulate`` writes (the PNG only with matplotlib)
SIMULATE_FILES = ("trajectory.csv", "trajectory.npz", "summary.json", "trajectory.png")


#: where each format's gravity comes from when ``--gravity`` is not given
GRAVITY_SOURCE = {
    "toml": "from the file",
    "42": "42 default: none",
    "urdf": "URDF default",
    "mjcf": "from the file (MuJoCo default)",
    None: "none",
}


def parse_gravity(text: str) -> tuple[float, float, float]:
    """``"GX,GY,GZ"`` (m/s², N axes) as three finite floats."""
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or not all(np.isfinite(values)):
        raise kd.ModelError(f"--gravity: expected three numbers GX,GY,GZ in m/s², got {text!r}")
    return values  # type: ignore[return-value]


def _load_with_gravity(args: argparse.Namespace) -> tuple[kd.Model, kd.State, dict[str, Any], str]:
    """:func:`_load`, then ``--gravity`` if given; ``settings["gravity_source"]`` says which."""
    import attrs

    model, state, settings, label = _load(args.model)
    text = getattr(args, "gravity", None)
    fmt = kd.io.detect_format(args.model) if args.model is not None else None
    settings["gravity_source"] = GRAVITY_SOURCE.get(fmt, "from the file")
    if text is not None:
        model = attrs.evolve(model, gravity=parse_gravity(text))
        settings["gravity_source"] = "--gravity"
    return model, state, settings, label


def _load(path: str | None) -> tuple[kd.Model, kd.State, dict[str, Any], str]:
    """Model, initial state, settings (with ``loads``) from the file, and a label."""
    if path is None:
        model = kd.examples.explorer1()
        settings = {"t_final": EXPLORER1_T_FINAL, "dt": EXPLORER1_DT}
        return (
            model,
            kd.examples.explorer1_state(model),
            settings,
            "built-in Explorer-1 (42 TumbleSat)",
        )
    p = Path(path)
    if p.is_dir():
        found = sorted(
            f.name for pattern in ("*.toml", "SC_*.txt", "*.urdf", "*.xml") for f in p.glob(pattern)
        )
        hint = f" (it holds {', '.join(found[:3])})" if found else ""
        raise kd.FileFormatError(
            f"{path}: is a folder, not a model file; give a model file in it{hint}: "
            "TOML, NASA 42 SC_*.txt, URDF or MJCF"
        )
    if not p.is_file():
        raise kd.FileFormatError(f"{path}: no such file")
    if kd.io.detect_format(p) == "toml":
        case = kd.io.read_toml_case(p)
        case_settings: dict[str, Any] = dict(case.settings)
        case_settings["loads"] = list(case.loads)
        return case.model, case.state, case_settings, str(p)
    model, state = kd.io.read_model(p)
    return model, state, {}, str(p)


def _run_options(args: argparse.Namespace, settings: dict[str, Any]) -> dict[str, Any]:
    """t_final, dt, output_every, method, formulation from the command line, else the
    file, else None (``_cmd_simulate`` resolves them from the model's time scales); t_final,
    dt and output_every checked as simulate checks them."""
    from kanedyn.simulation.run_options import check_times

    t_final = args.t_final if args.t_final is not None else settings.get("t_final")
    dt = args.dt if args.dt is not None else settings.get("dt")
    checked = check_times(
        DEFAULT_T_FINAL if t_final is None else t_final, DEFAULT_DT if dt is None else dt
    )
    t_final = None if t_final is None else checked[0]
    dt = None if dt is None else checked[1]
    every = args.output_every if args.output_every is not None else settings.get("output_every")
    if every is not None and not (math.isfinite(every) and every > 0.0):
        raise kd.ModelError(f"output_every must be positive, got {every}")
    return {
        "t_final": t_final,
        "dt": dt,
        "output_every": every,
        "method": args.method or settings.get("method", "rk4"),
        "formulation": args.formulation or settings.get("formulation", "kane"),
    }


def _check_run_options_early(args: argparse.Namespace) -> None:
    """Options given on the command line are checked before the model is read."""
    from kanedyn.simulation.run_options import check_times

    check_times(
        DEFAULT_T_FINAL if args.t_final is None else args.t_final,
        DEFAULT_DT if args.dt is None else args.dt,
    )
    if args.output_every is not None and not (
        math.isfinite(args.output_every) and args.output_every > 0.0
    ):
        raise kd.ModelError(f"--output-every must be positive, got {args.output_every}")
    scale = getattr(args, "deflection_scale", 1.0)
    if not (math.isfinite(scale) and scale >= 0.0):
        raise kd.ModelError(f"--deflection-scale must be a finite number >= 0, got {scale}")


def _summary(
    traj: kd.Trajectory,
    label: str,
    options: dict[str, Any],
    engine: str,
    loads: Any,
    timing: dict[str, float],
    error: str | None,
    gravity_source: str = "none",
) -> dict[str, Any]:
    """The run summary (strict JSON once written: no NaN or inf). Energy and momentum
    are read at the outputs that can be drawn (:func:`kanedyn.plotting.plottable`: a
    diverged run's last outputs may not be); the momentum drift and the nutation only
    where the momentum is conserved (:func:`kanedyn.simulation.diagnose.momentum_varies`)."""
    from kanedyn.plotting import plottable
    from kanedyn.simulation.diagnose import momentum_varies

    keep = plottable(traj)
    t = traj.t[keep]
    E = traj.total_energy[keep]
    H, P = traj.angular_momentum[keep], traj.linear_momentum[keep]
    s: dict[str, Any] = {
        "model": label,
        "status": traj.status,
        "bodies": traj.model.nb,
        "dof": traj.model.n,
        "gravity_m_s2": [float(g) for g in traj.model.uniform_gravity],
        "gravity_source": gravity_source,
        "formulation": traj.formulation,
        "method": traj.method,
        "engine": engine,
        "dt_s": options["dt"],
        "output_every_s": options["output_every"],
        "t_final_s": options["t_final"],
        "t_reached_s": float(traj.t[-1]) if traj.t.size else 0.0,
        "outputs": int(traj.t.size),
        "steps": int(traj.steps),
        "wall_time_s": round(traj.wall_time, 3),
        "timing_s": {k: round(v, 3) for k, v in timing.items()},
    }
    if error is not None:
        s["error"] = error
    if not keep.all():
        s["outputs_not_finite"] = int((~keep).sum())
        s["outputs_not_finite_from_t_s"] = float(traj.t[int(np.argmax(~keep))])
    if not t.size:
        return s
    s["energy_initial_J"] = float(E[0])
    s["energy_final_J"] = float(E[-1])
    if t[-1] != traj.t[-1]:  # the last outputs are not finite: the last that is
        s["energy_final_t_s"] = float(t[-1])
    # relative only where the reference is not zero: otherwise the absolute change
    if E[0] != 0.0:
        s["energy_relative_change"] = float((E[-1] - E[0]) / abs(E[0]))
    else:
        s["energy_change_J"] = float(E[-1] - E[0])
    why = momentum_varies(traj.model, loads)
    no_loads = loads is None or (not callable(loads) and not len(loads))
    if why == "gravity acts on the system" and traj.model.central_gravity is not None and no_loads:
        # a central field conserves the angular momentum about its centre
        Ho = traj.angular_momentum_about()[keep]
        s["angular_momentum_about_center_relative_drift"] = float(
            np.max(np.linalg.norm(Ho - Ho[0], axis=1)) / np.linalg.norm(Ho[0])
        )
    if why is not None:
        s["momentum_drift_not_shown"] = f"momentum is not conserved: {why}"
    else:
        dH = float(np.max(np.linalg.norm(H - H[0], axis=1)))
        h0 = float(np.linalg.norm(H[0]))
        if h0 != 0.0:
            s["angular_momentum_relative_drift"] = dH / h0
        else:
            s["angular_momentum_drift_N_m_s"] = dH
        s["linear_momentum_drift_N_s"] = float(np.max(np.linalg.norm(P - P[0], axis=1)))
        if h0 != 0.0:
            from kanedyn.plotting import nutation_angle

            nut = nutation_angle(traj)[keep]
            s["nutation_initial_deg"] = float(np.degrees(nut[0]))
            s["nutation_final_deg"] = float(np.degrees(nut[-1]))
    s.update(_loop_summary(traj))
    from kanedyn.simulation.limits import summary as limit_summary

    s.update(limit_summary(traj))
    return s


def _loop_summary(traj: kd.Trajectory) -> dict[str, Any]:
    """Loops: the DOF after their constraints and the residuals (the engine is the
    run's, in the summary's ``engine``)."""
    if not traj.model.loops:
        return {}
    from kanedyn.dynamics.loops import loop_summary

    return {
        "dof_after_loops": loop_summary(traj.model, traj.state(0)).dof,
        "loop_drift_before_projection": traj.loop_drift,
        "loop_residual_max": float(traj.loop_residual.max()),
    }


def _cmd_simulate(args: argparse.Namespace) -> int:
    from kanedyn.dynamics.steppers import Schedule
    from kanedyn.simulation import diagnose, output
    from kanedyn.simulation.options import Engine, Method
    from kanedyn.simulation.system import linear_modes, resolve_engine
    from kanedyn.simulation.trajectory import csv_header

    _check_run_options_early(args)
    if args.animate:  # the 'animate' extra is checked before any work or file
        from kanedyn.animation.scene import meshcat_modules

        meshcat_modules()
    out = Path(args.out)
    _check_out(out)
    signals = args.signals  # held (by main) until the run can be stopped with its files
    clock = time.perf_counter()
    model, state, settings, label = _load_with_gravity(args)
    options = _run_options(args, settings)
    loads = settings.get("loads") or None
    method = Method.parse(options["method"])
    if None in (options["t_final"], options["dt"], options["output_every"]):
        # unset: from the model's time scales at the initial state (diagnose.run_defaults);
        # signals are still held here, so a stop leaves complete options
        modes = linear_modes(model, state, formulation=options["formulation"],
                             loads=loads, engine=args.engine)  # fmt: skip
        keys = ("t_final", "dt", "output_every")
        rates = diagnose.motion_rates(model, state, loads)
        defaults = diagnose.run_defaults(modes, rates, **{k: options[k] for k in keys})
        options.update(zip(keys, defaults, strict=True))
    timing = {"load": time.perf_counter() - clock}
    header = csv_header(model)
    created = not out.exists()
    stream = _open_stream(out, model, header)
    error: str | None = None
    compiled = False
    try:
        signals.release()  # a signal held so far stops the run here, at t = 0
        clock = time.perf_counter()
        compiled = method.compiles and resolve_engine(model, Engine.parse(args.engine))
        if compiled:  # held: a signal inside llvmlite's callbacks would be lost
            signals.hold()
            kd.compile_model(model, (), options["formulation"])
            signals.release()
        timing["compile"] = time.perf_counter() - clock
        every, t_final = options["output_every"], options["t_final"]
        if not method.adaptive:  # the API's check of the output grid, before any work
            Schedule.of(t_final, options["dt"], every)
        n_out = math.floor(t_final / every) + 2
        output.check_output_size(model, n_out, out, plot=True)
        traj = kd.simulate(
            model, state, t_final, options["dt"], method=method,
            formulation=options["formulation"], output_every=every,
            progress=not args.quiet, loads=loads, engine=args.engine, stream=stream,
            force=args.force, limits=args.limits or settings.get("limits", "warn"),
        )  # fmt: skip
    except kd.SimulationError as exc:
        if exc.trajectory is None:
            _discard(stream, out, created)
            raise
        traj, error = exc.trajectory, _one_line(exc)  # type: ignore[assignment]
    except kd.SimulationInterrupted as exc:
        traj = exc.trajectory  # type: ignore[assignment]
    except KeyboardInterrupt:  # in the setup above: the run stops at t = 0
        traj = kd.Trajectory.initial(
            model, state, formulation=options["formulation"], method=method.name
        )
    except BaseException:  # refused before the run (bad loads, ...): leave no files
        _discard(stream, out, created)
        raise
    signals.hold()  # from here every file is written, whatever arrives
    # the stream's CSV rows are output work done during the run: count them as writing
    timing["integrate"] = max(traj.wall_time - stream.seconds, 0.0)
    clock = time.perf_counter() - stream.seconds
    with np.errstate(all="ignore"):
        if stream.rows < traj.t.size:  # outputs the run did not stream (a stop at t = 0)
            a = stream.rows
            stream(traj.t[a:], traj.q[a:], traj.u[a:])
        stream.close()
        output.seed_histories(traj, stream.derived)
        summary = _summary(traj, label, options,
                           traj.engine or ("compiled" if compiled else "dense"),
                           loads, timing, error, settings["gravity_source"])  # fmt: skip
        _write_atomic(out / "trajectory.npz", traj.to_npz)
        try:
            plotted = _plot(traj, out / "trajectory.png", summary)
        except Exception as exc:  # a bug in drawing: the other files are still written
            plotted = False
            summary["plot_error"] = f"{type(exc).__name__}: {_one_line(exc)}"
        if args.animate:  # needs the 'animate' extra; a KanedynError names it
            urdf = args.model if args.model and kd.io.detect_format(args.model) == "urdf" else None
            traj.animate(out / "animation.html", urdf=urdf, title=label,
                         deflection_scale=args.deflection_scale)  # fmt: skip
        timing["write"] = time.perf_counter() - clock
        summary["timing_s"]["write"] = round(timing["write"], 3)
        _write_atomic(out / "summary.json", lambda p: p.write_text(output.strict_json(summary)))
    _print_summary(summary, out, plotted)
    if args.animate:
        print(
            f"  wrote animation.html to {out}/ (open it in a browser; #t=SECONDS opens at a time)"
        )
    if error is not None:
        print(f"kanedyn simulate: error: {error}", file=sys.stderr)
        return 2
    if traj.status == "interrupted" or signals.received:
        print(f"kanedyn: interrupted at t = {summary['t_reached_s']:g} s", file=sys.stderr)
        return 130
    return 0


def _check_out(out: Path) -> None:
    """``--out`` names a folder that exists or can be made, or a one-line KanedynError."""
    if out.exists() and not out.is_dir():
        raise KanedynError(
            f"--out {out}: exists and is not a folder; give the name of a folder (it is "
            "created when missing)"
        )
    parent = out.absolute()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise KanedynError(f"--out {out}: {parent} is a file, not a folder; choose another --out")


def _open_stream(out: Path, model: kd.Model, header: list[str]) -> Any:
    """Make the output folder and open its CSV stream; an OSError (no permission, a full
    or read-only disk) as a one-line KanedynError naming ``--out``."""
    from kanedyn.simulation import output

    try:
        out.mkdir(parents=True, exist_ok=True)
        return output.CsvStream(out / "trajectory.csv", model, header)
    except OSError as exc:
        raise KanedynError(
            f"--out {out}: cannot write there ({exc.strerror or exc}); choose another --out"
        ) from None


class _Signals:
    """SIGINT and SIGTERM for the command line: each is recorded (``received``). While
    released (:meth:`release`) the first raises KeyboardInterrupt, so that ``simulate``
    ends as an interrupted run with its files written. While held (from the start, while
    ``simulate`` reads its model, compiles it and writes its files) a signal is only
    recorded, and :meth:`release` raises it then. The handlers in force before are
    restored on exit (in the main thread; elsewhere nothing is installed)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.raising = False
        self.old: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            self.old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signum)
        if self.raising and len(self.received) == 1:
            self.raising = False  # one KeyboardInterrupt: the rest only recorded
            raise KeyboardInterrupt

    def release(self) -> None:
        """From now on a signal raises KeyboardInterrupt; one already received does, now."""
        if self.received:
            raise KeyboardInterrupt
        self.raising = True

    def hold(self) -> None:
        """From now on a signal is only recorded."""
        self.raising = False

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self.old.items():
            signal.signal(s, handler)


def _discard(stream: Any, out: Path, created: bool) -> None:
    """Remove the CSV of a run refused before it started (and its folder, if new)."""
    stream.close()
    Path(stream.fh.name).unlink(missing_ok=True)
    if created and not any(out.iterdir()):
        out.rmdir()


def _plot(traj: kd.Trajectory, path: Path, summary: dict[str, Any]) -> bool:
    """The run's figure, or False when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    from kanedyn.plotting import plot_run

    _write_atomic(path, lambda p: plot_run(traj, p, summary=summary))
    return True


def _write_atomic(path: Path, write: Any) -> None:
    """``write(tmp)`` to a hidden file beside ``path``, then rename it into place, so
    ``path`` is either the old file or the complete new one."""
    tmp = path.with_name(f".{path.stem}.part{path.suffix}")
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _print_summary(s: dict[str, Any], out: Path, plotted: bool) -> None:
    """The summary on stdout: model, run, status, energy, momentum, nutation, files."""
    print(f"kanedyn simulate: {s['model']}")
    print(
        f"  bodies {s['bodies']}, degrees of freedom {s['dof']}, formulation "
        f"{s['formulation']}, method {s['method']}, engine {s['engine']}"
    )
    g = s["gravity_m_s2"]
    print(f"  gravity ({g[0]:g}, {g[1]:g}, {g[2]:g}) m/s^2 ({s['gravity_source']})")
    every = s["output_every_s"]
    print(
        f"  {s['status']}: {s['steps']} steps to t = {s['t_reached_s']:g} s of "
        f"{s['t_final_s']:g} s, {s['outputs']} outputs"
        + ("" if every is None else f" every {every:g} s")
    )
    t = s["timing_s"]
    print(
        "  time: "
        + ", ".join(
            f"{k} {t[k]:.2f} s" for k in ("load", "compile", "integrate", "write") if k in t
        )
    )
    if "energy_initial_J" in s:
        change = (
            f"relative change {s['energy_relative_change']:+.3e}"
            if "energy_relative_change" in s
            else f"change {s['energy_change_J']:+.3e} J"
        )
        at = f" at t = {s['energy_final_t_s']:g} s" if "energy_final_t_s" in s else ""
        print(
            f"  energy {s['energy_initial_J']:.6g} J -> {s['energy_final_J']:.6g} J{at} ({change})"
        )
        if "momentum_drift_not_shown" in s:
            print(f"  momentum drift not shown: {s['momentum_drift_not_shown']}")
        else:
            drift = (
                f"angular momentum relative drift {s['angular_momentum_relative_drift']:.3e}"
                if "angular_momentum_relative_drift" in s
                else f"angular momentum drift {s['angular_momentum_drift_N_m_s']:.3e} N m s"
            )
            print(f"  {drift}, linear momentum drift {s['linear_momentum_drift_N_s']:.3e} N s")
    if "outputs_not_finite" in s:
        print(
            f"  {s['outputs_not_finite']} output(s) not finite (or beyond 1e100) from t = "
            f"{s['outputs_not_finite_from_t_s']:g} s: left out of the figure and the energy"
        )
    if "nutation_initial_deg" in s:
        print(
            f"  nutation angle {s['nutation_initial_deg']:.2f} deg -> "
            f"{s['nutation_final_deg']:.2f} deg"
        )
    if "dof_after_loops" in s:
        drift = s["loop_drift_before_projection"]
        print(
            f"  loops: {s['dof_after_loops']} DOF after the constraints; largest residual "
            f"{s['loop_residual_max']:.1e}"
            + ("" if drift is None else f" ({drift:.1e} before projection)")
            + f"; engine {s['engine']}"
        )
    from kanedyn.simulation.limits import summary_line as limit_summary_line

    limits_line = limit_summary_line(s)
    if limits_line is not None:
        print(limits_line)
    files = [f for f in SIMULATE_FILES if plotted or not f.endswith(".png")]
    why = (
        f"  (the figure failed, please report it: {s['plot_error']})"
        if "plot_error" in s
        else "  (install 'kanedyn[plot]' for the plot)"
    )
    print(f"  wrote {', '.join(files)} to {out}/" + ("" if plotted else why))


def _joint_label(j: kd.Joint) -> str:
    """``revolute about axis 3``, ``weld``, ``spherical``, ``free``, ``gimbal 2-DOF 231``..."""
    kind = kd.io.toml.joint_kind(j)
    if kind == "revolute":
        return f"revolute about axis {str(j.rot_seq)[0]}"
    if kind == "prismatic":
        return f"prismatic along axis {str(j.trn_seq)[0]}"
    if kind == "gimbal":
        return f"gimbal {j.rot_dof}-DOF, sequence {j.rot_seq}"
    if kind == "general":
        return (
            f"general: {j.rot_type} {j.rot_dof} rotation(s) {j.rot_seq}, "
            f"{j.trn_dof} slide(s) {j.trn_seq}"
        )
    return kind


def _cmd_check(args: argparse.Namespace) -> int:
    from kanedyn.dynamics.kane import potential_energy
    from kanedyn.simulation.diagnose import check_initial_energy
    from kanedyn.spatial import rotation as rot

    model, state, settings, label = _load_with_gravity(args)
    check_initial_energy(model, state)
    T = kd.kinetic_energy(model, state)
    V = potential_energy(model, state)
    m, c, I = kd.system_mass_properties(model, state)
    lay = model.layout
    for g in lay.gimbal3:  # det Γ of each 3-DOF gimbal, 0 at its singular angle
        theta = np.append(state.q, 0.0)[lay.gimbal_q[g]]
        det = float(np.linalg.det(rot.euler_gamma_axes(lay.gimbal_axes[g], theta)))
        if abs(det) < 0.2:
            j = model.joints[lay.gimbal[g]]
            warnings.warn(
                f"joint {j.name!r} (3-DOF gimbal, sequence {j.rot_seq}) starts "
                f"{'at' if abs(det) < 1e-9 else 'near'} its singular angle (angles "
                f"{np.round(theta, 6).tolist()} rad, |det Γ| = {abs(det):.3g}): a run will stop "
                "at gimbal lock; model it as a spherical joint",
                stacklevel=1,
            )
    print(f"{label}: OK")
    if model.central_gravity is not None:
        print(f"  gravity {model.central_gravity!r}")
    else:
        g = model.uniform_gravity
        print(f"  gravity ({g[0]:g}, {g[1]:g}, {g[2]:g}) m/s^2 ({settings['gravity_source']})")
    print(
        f"  bodies {model.nb}, joints {len(model.joints)}, coordinates nq = {model.nq}, speeds nu = {model.nu} + ns = {model.ns}"
    )
    for k, j in enumerate(model.joints):
        print(
            f"  joint {j.name!r}: {j.inner or 'N'} -> {j.outer}, {_joint_label(j)}; "
            f"speeds {model.layout.u_index[k].tolist()}"
        )
    from kanedyn.simulation.limits import describe as describe_limits

    for line in describe_limits(model):
        print(f"  {line}")
    if model.loops:
        from kanedyn.dynamics.loops import loop_summary

        for lp in model.loops:
            kind = (
                "spherical"
                if lp.rot_type == "spherical"
                else f"gimbal {lp.rot_dof}-DOF {lp.rot_seq}"
            )
            print(
                f"  loop {lp.name!r}: {lp.inner or 'N'} -> {lp.outer or 'N'}, {kind}, {lp.trn_dof} slide(s)"
                + (" (planar constraints)" if model.planar else "")
            )
        summary = loop_summary(model, state)
        print(f"  {summary}")
        print(f"  dependent speeds: {', '.join(summary.dependent) or '(none)'}")
        reason = kd.compiled.supports(model)
        print(f"  engine: {'compiled' if reason is None else f'dense ({reason})'}")
    print(f"  total mass {m:.6g} kg, mass centre {np.array2string(c, precision=6)} m (N)")
    print(f"  inertia about the mass centre (N axes):\n{np.array2string(I, precision=6)}")
    print(f"  energy: kinetic T = {T:.6g} J, potential V = {V:.6g} J, total E = {T + V:.6g} J")
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    src, dst = Path(args.input), Path(args.output)
    if dst.suffix.lower() != ".toml":
        raise kd.FileFormatError(f"{dst}: kanedyn writes TOML model files only (give a .toml name)")
    model, state, settings, _ = _load(str(src))
    settings = {k: v for k, v in settings.items() if k != "loads"}
    loads = _load(str(src))[2].get("loads") or None
    tmp = dst.with_name(f".{dst.name}.part")
    try:
        kd.io.write_toml(model, tmp, state=state, settings=settings or None, loads=loads)
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)
    print(f"kanedyn convert: wrote {dst} ({model.nb} bodies, {model.n} DOF)")
    return 0


def _cmd_export_fmu(args: argparse.Namespace) -> int:
    import re

    dst = Path(args.output)
    if dst.suffix.lower() != ".fmu":
        raise kd.FileFormatError(f"{dst}: an FMU file name ends in .fmu")
    name = args.name or re.sub(r"[^0-9A-Za-z_]", "_", dst.stem)
    if name[:1].isdigit():
        name = f"m_{name}"
    if not (args.step > 0.0 and math.isfinite(args.step)):
        raise kd.ModelError(f"--step must be a positive number of seconds, got {args.step}")
    model, state, _, label = _load_with_gravity(args)
    tmp = dst.with_name(f".{dst.name}.part")
    try:
        kd.codegen.to_fmu(model, tmp, step=args.step, name=name, state=state)
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)
    print(f"kanedyn export-fmu: wrote {dst} (FMI 2.0 co-simulation, model identifier {name}, "
          f"{model.nq + model.n} outputs, {model.n} inputs, RK4 step {args.step:g} s; from {label})")  # fmt: skip
    return 0


#: ``kanedyn derive`` simplifies the equations of models with at most this many speeds
#: unless told otherwise (--simplify / --no-simplify).
DERIVE_SIMPLIFY_UP_TO = 3


def _cmd_derive(args: argparse.Namespace) -> int:
    model, _, _, label = _load(args.model)
    from kanedyn import symbolic

    if args.fragment and not args.latex:
        raise kd.ModelError("derive: --fragment goes with --latex")
    values: dict = {}
    if not args.numeric:
        model, values = symbolic.symbolic_parameters(model)
    eom = symbolic.kane(model)
    if args.table:
        print(eom.table(fmt="latex" if args.latex else "markdown"))
        return 0
    simplify = args.simplify if args.simplify is not None else model.n <= DERIVE_SIMPLIFY_UP_TO
    st = eom.stages(simplify=simplify, values=values)
    if args.latex:
        print(st.latex(fragment=args.fragment), end="")
    elif args.markdown:
        print(st.markdown())
    else:
        print(st.text(), end="")
    return 0


def _cmd_montecarlo(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    model, state, settings, label = _load(args.model)
    dispersions, file_seed, file_outputs = kd.io.read_dispersions(
        args.dispersions, model, state, loads=settings.get("loads") or None
    )
    seed = args.seed if args.seed is not None else (file_seed or 0)
    outputs = args.output or file_outputs or None
    t_final = args.t_final if args.t_final is not None else settings.get("t_final", 10.0)
    dt = args.dt if args.dt is not None else settings.get("dt", 0.01)
    every = settings.get("output_every")
    if every is not None and (abs(every / dt - round(every / dt)) > 1e-9 or every > t_final):
        every = None
    if args.n < 1:
        raise kd.ModelError(f"--n must be a positive integer, got {args.n}")
    out = Path(args.out)
    res = kd.monte_carlo(
        model, state, dispersions, args.n, t_final, dt, seed=seed, outputs=outputs,
        output_every=every, loads=settings.get("loads") or None, chunk_size=args.chunk_size,
        scheduler=args.scheduler, store=out / "chunks", progress=not args.quiet,
        limits=args.limits or settings.get("limits", "warn"),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix=".kanedyn-", dir=out) as tmp:
        files = res.write(tmp)
        for name in files:
            shutil.move(str(Path(tmp) / name), out / name)
    counts = res.summary()["counts"]
    print(f"kanedyn montecarlo: {label}")
    print(
        f"  {args.n} members, seed {seed}, t = {res.settings['t_final']:g} s, "
        f"dt = {res.settings['dt']:g} s, {res.settings['chunks']} chunks "
        f"({res.settings['chunks_resumed']} resumed) on {res.settings['scheduler']}, "
        f"{res.settings['wall_time_s']:.2f} s wall time"
    )
    print(f"  ok {counts['ok']}, invalid {counts['invalid']}, failed {counts['failed']}")
    if res.metrics:
        print("  metric percentiles over the ok members:")
        print("    " + res.percentiles().to_string(float_format=lambda x: f"{x:.6g}").replace(
            "\n", "\n    "))  # fmt: skip
    plotted = "montecarlo.png" in files
    print(
        f"  wrote {', '.join(files)} to {out}/"
        + ("" if plotted else "  (install 'kanedyn[plot]' for the figure)")
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kanedyn", description="Kane's method and momentum-state dynamics for multibody trees."
    )
    parser.add_argument("--version", action="version", version=f"kanedyn {kd.__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # the subcommands accept --debug too; SUPPRESS keeps one given before them
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "simulate",
        parents=[common],
        help="simulate a model (default: the built-in Explorer-1 flat spin)",
    )
    p.add_argument(
        "model", nargs="?",
        help="model file (TOML, NASA 42 SC_*.txt, or URDF); default: the built-in Explorer-1",
    )  # fmt: skip
    p.add_argument("--t-final", type=float, metavar="T",
                   help="final time [s] (default: the file's t_final_s, else 10 periods of "
                        f"the model's fastest mode, at least {DEFAULT_T_FINAL:g}; "
                        f"Explorer-1: {EXPLORER1_T_FINAL:g})")  # fmt: skip
    p.add_argument("--dt", type=float,
                   help="time step [s] (default: the file's dt_s, else 100 steps per period "
                        f"of the fastest mode, or {DEFAULT_DT:g}; Explorer-1: {EXPLORER1_DT:g})")  # fmt: skip
    p.add_argument("--output-every", type=float, metavar="DT_OUT",
                   help="output interval [s], a multiple of dt for rk4 (default: the file's "
                        "output_every_s, else about 20 outputs per period of the model's "
                        "fastest mode and at least 20 per run)")  # fmt: skip
    p.add_argument("--method",
                   help="rk4 or a scipy solve_ivp method such as DOP853 "
                        "(default: the file's method, else rk4)")  # fmt: skip
    p.add_argument("--formulation", choices=("kane", "msd"),
                   help="Kane speeds or momentum states (default: the file's, else kane)")  # fmt: skip
    p.add_argument("--engine", choices=("auto", "compiled", "dense"), default="auto",
                   help="right-hand side: generated code (compiled), the NumPy engine (dense), "
                        "or compiled when possible (default: auto)")  # fmt: skip
    p.add_argument("--out", default="kanedyn-out", help="output folder (default: kanedyn-out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: shown)")
    p.add_argument("--animate", action="store_true",
                   help="also write animation.html, a self-contained 3D view of the run "
                        "(needs kanedyn[animate]; default: not written)")  # fmt: skip
    p.add_argument("--deflection-scale", type=float, default=1.0, metavar="S",
                   help="with --animate: draw the elastic deflections of flexible bodies S "
                        "times true size (default: 1)")  # fmt: skip
    p.add_argument("--gravity", metavar="GX,GY,GZ", help=GRAVITY_HELP)
    p.add_argument("--force", action="store_true",
                   help="run a step that is refused otherwise (longer than the run, or "
                        "unstable for RK4 on the model's fastest mode), with a warning "
                        "(default: refused)")  # fmt: skip
    p.add_argument("--limits", choices=("warn", "stop", "ignore"),
                   help="joint limits from the model file (URDF <limit>, MJCF range, TOML "
                        "limits): warn when crossed, make each a one-sided stop, or ignore "
                        "them (default: the file's [simulation] limits, else warn)")  # fmt: skip
    p.set_defaults(func=_cmd_simulate)
    p = sub.add_parser(
        "check", parents=[common], help="validate a model and print its DOF and mass properties"
    )
    p.add_argument("model", nargs="?", help="model file (default: the built-in Explorer-1)")
    p.add_argument("--gravity", metavar="GX,GY,GZ", help=GRAVITY_HELP)
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser(
        "derive",
        parents=[common],
        help="derive Kane's equations symbolically, stage by stage (text, Markdown or LaTeX)",
    )
    p.add_argument("model", nargs="?", help="model file (default: the built-in Explorer-1)")
    p.add_argument(
        "--latex",
        action="store_true",
        help="a LaTeX document instead of plain text (compiles with pdflatex)",
    )
    p.add_argument(
        "--fragment",
        action="store_true",
        help="with --latex: the body only, to \\input in a document with amsmath",
    )
    p.add_argument(
        "--markdown", action="store_true", help="Markdown with LaTeX math instead of plain text"
    )
    p.add_argument(
        "--simplify",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="simplify the mass matrix and right-hand side (default: on for "
        f"models with at most {DERIVE_SIMPLIFY_UP_TO} speeds, off above)",
    )
    p.add_argument(
        "--numeric",
        action="store_true",
        help="the model's numbers instead of named parameters (m_B1, I_B1_xx, ...)",
    )
    p.add_argument("--table", action="store_true",
                   help="the partial-velocity table instead of the stages of Kane's method")  # fmt: skip
    p.set_defaults(func=_cmd_derive)
    p = sub.add_parser(
        "convert", parents=[common], help="convert a model file (TOML, 42, URDF) to kanedyn TOML"
    )
    p.add_argument("input", help="model file to read")
    p.add_argument("output", help="TOML file to write")
    p.set_defaults(func=_cmd_convert)
    p = sub.add_parser(
        "export-fmu",
        parents=[common],
        help="write a model as an FMI 2.0 co-simulation FMU (needs a C compiler)",
    )
    p.add_argument("model", help="model file to read (TOML, 42, URDF, MJCF)")
    p.add_argument("output", help="the .fmu file to write")
    p.add_argument("--step", type=float, default=0.01, metavar="SECONDS",
                   help="the largest RK4 step inside a communication step (default 0.01)")  # fmt: skip
    p.add_argument("--name", metavar="ID",
                   help="the model identifier, a C identifier (default: from the file name)")  # fmt: skip
    p.add_argument("--gravity", metavar="GX,GY,GZ", help=GRAVITY_HELP)
    p.set_defaults(func=_cmd_export_fmu)
    p = sub.add_parser(
        "montecarlo",
        parents=[common],
        help="Monte Carlo dispersion analysis: members.csv, summary.json and a figure",
    )
    p.add_argument("model", nargs="?",
                   help="model file (TOML, NASA 42 SC_*.txt, or URDF; default: the built-in "
                        "Explorer-1)")  # fmt: skip
    p.add_argument("--dispersions", required=True,
                   help="TOML file with seed, outputs and [[dispersion]] tables")  # fmt: skip
    p.add_argument("--n", type=int, required=True, help="number of members")
    p.add_argument("--t-final", type=float, help="final time [s] (default: the model file's)")
    p.add_argument("--dt", type=float, help="time step [s] (default: the model file's)")
    p.add_argument("--seed", type=int, help="seed of the draws (default: the dispersion file's)")
    p.add_argument("--output", action="append",
                   help="an output to measure, e.g. hinge0.angles.0 (repeatable; default: "
                        "the dispersion file's outputs, else the first joint's rates)")  # fmt: skip
    p.add_argument("--scheduler",
                   help="'processes' (a local Dask cluster) or a Dask scheduler address "
                        "(tcp://host:8786); default: in this process")  # fmt: skip
    p.add_argument("--chunk-size", type=int, help="members per chunk")
    p.add_argument("--limits", choices=("warn", "stop", "ignore"),
                   help="joint limits: each member's crossings (warn) or stops in the "
                        "limit_crossings column of members.csv, or not checked (default: "
                        "the file's [simulation] limits, else warn)")  # fmt: skip
    p.add_argument("--out", default="kanedyn-mc",
                   help="output folder (default ./kanedyn-mc); finished chunks are kept in "
                        "OUT/chunks, and the same command resumes from them")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_montecarlo)
    return parser


def _show_warning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    print(f"kanedyn: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0, 1 a bug, 2 bad input, 130 a
    signal). SIGINT and SIGTERM are held from the start (:class:`_Signals`): ``simulate``
    lets them stop the run once its model is read, so a run stopped at any moment after
    its arguments are parsed ends with its files; other commands let them stop at once."""
    with _Signals() as signals:
        try:
            return _main(argv, signals)
        except KeyboardInterrupt:  # before a subcommand started, or one without files
            print("kanedyn: interrupted", file=sys.stderr)
            return 130


def _main(argv: list[str] | None, signals: _Signals) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.signals = signals
    if args.command != "simulate":
        signals.release()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args))
        except BrokenPipeError:
            return 0
        except KeyboardInterrupt:
            print("kanedyn: interrupted", file=sys.stderr)
            return 130
        except (KanedynError, OSError) as exc:  # bad input: one line, exit code 2
            if args.debug:
                raise
            print(f"kanedyn {args.command}: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        except Exception as exc:  # a bug in kanedyn, not bad input
            if args.debug:
                raise
            print(
                f"kanedyn {args.command}: internal error: {type(exc).__name__}: "
                f"{_one_line(exc)}; run again with --debug for the traceback, "
                "and please report it",
                file=sys.stderr,
            )
            return 1


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
