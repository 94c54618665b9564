"""The ``kanedyn`` command line: ``simulate``, ``check``, ``derive``.

Every error the user can cause (a :class:`~kanedyn.KanedynError`, or an ``OSError`` on a
file) is reported on one line on stderr with exit code 2, and no traceback. Any other
exception is a bug in kanedyn: it gets a short "internal error" line and exit code 1, and
``--debug`` (before or after the subcommand) shows its traceback instead. Output files are
written to a temporary folder and moved into place only when the run succeeded, so a failed
run leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import kanedyn as kd
from kanedyn.errors import KanedynError

EXPLORER1_T_FINAL = 20000.0
EXPLORER1_DT = 1.0
DEBUG_HELP = (
    "show the full traceback of an error instead of a one-line message "
    "(for bug reports; may be given before or after the subcommand)"
)


def _load(path: str | None) -> tuple[kd.Model, kd.State, dict[str, Any], str]:
    """Model, initial state, settings (with ``loads``) from the file, and a label."""
    if path is None:
        model = kd.examples.explorer1()
        settings = {"t_final": EXPLORER1_T_FINAL, "dt": EXPLORER1_DT, "output_every": 20.0}
        return (
            model,
            kd.examples.explorer1_state(model),
            settings,
            "built-in Explorer-1 (42 TumbleSat)",
        )
    p = Path(path)
    if not p.is_file():
        raise kd.FileFormatError(f"{path}: no such file")
    if kd.io.detect_format(p) == "toml":
        case = kd.io.read_toml_case(p)
        case_settings: dict[str, Any] = dict(case.settings)
        case_settings["loads"] = list(case.loads)
        return case.model, case.state, case_settings, str(p)
    model, state = kd.io.read_model(p)
    return model, state, {}, str(p)


def _summary(traj: kd.Trajectory, label: str) -> dict[str, Any]:
    from kanedyn.plotting import nutation_angle

    E = traj.total_energy
    H, P = traj.angular_momentum, traj.linear_momentum
    h0 = float(np.linalg.norm(H[0]))
    nut = nutation_angle(traj)
    return {
        "model": label,
        "bodies": traj.model.nb,
        "dof": traj.model.n,
        "formulation": traj.formulation,
        "method": traj.method,
        "t_final_s": float(traj.t[-1]),
        "steps": int(traj.steps),
        "wall_time_s": round(traj.wall_time, 3),
        "energy_initial_J": float(E[0]),
        "energy_final_J": float(E[-1]),
        "energy_relative_change": float((E[-1] - E[0]) / abs(E[0])) if E[0] else 0.0,
        "angular_momentum_relative_drift": float(np.max(np.linalg.norm(H - H[0], axis=1)) / h0)
        if h0
        else 0.0,
        "linear_momentum_drift_N_s": float(np.max(np.linalg.norm(P - P[0], axis=1))),
        "nutation_initial_deg": float(np.degrees(nut[0])),
        "nutation_final_deg": float(np.degrees(nut[-1])),
    }


def _cmd_simulate(args: argparse.Namespace) -> int:
    model, state, settings, label = _load(args.model)
    t_final = args.t_final if args.t_final is not None else settings.get("t_final", 10.0)
    dt = args.dt if args.dt is not None else settings.get("dt", 0.01)
    method = args.method or settings.get("method", "rk4")
    formulation = args.formulation or settings.get("formulation", "kane")
    every = settings.get("output_every")
    # simulate reports a bad dt (zero, negative, NaN); only a usable one sets the grid here
    usable_dt = isinstance(dt, (int, float)) and 0.0 < dt < np.inf
    if every is not None and method == "rk4" and usable_dt:
        if abs(every / dt - round(every / dt)) > 1e-9:
            every = None
    if every is not None and every > t_final:
        every = None
    traj = kd.simulate(
        model, state, t_final, dt, method=method, formulation=formulation,
        output_every=every, progress=not args.quiet, loads=settings.get("loads") or None,
        engine=args.engine,
    )  # fmt: skip
    summary = _summary(traj, label)
    out = Path(args.out)
    with tempfile.TemporaryDirectory(
        prefix=".kanedyn-", dir=out.parent if out.parent.exists() else None
    ) as tmp:
        tmpdir = Path(tmp)
        traj.to_csv(tmpdir / "trajectory.csv")
        traj.to_npz(tmpdir / "trajectory.npz")
        (tmpdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        plotted = False
        try:
            import matplotlib  # noqa: F401

            from kanedyn.plotting import plot_attitude, plot_joints

            traj.plot(tmpdir / "trajectory.png")
            plot_attitude(traj, tmpdir / "attitude.png")
            plot_joints(traj, tmpdir / "joints.png")
            plotted = True
        except ImportError:
            pass
        out.mkdir(parents=True, exist_ok=True)
        for f in tmpdir.iterdir():
            shutil.move(str(f), out / f.name)
    _print_summary(summary, out, plotted)
    return 0


def _print_summary(s: dict[str, Any], out: Path, plotted: bool) -> None:
    print(f"kanedyn simulate: {s['model']}")
    print(
        f"  bodies {s['bodies']}, degrees of freedom {s['dof']}, formulation {s['formulation']}, method {s['method']}"
    )
    print(f"  {s['steps']} steps to t = {s['t_final_s']:g} s in {s['wall_time_s']:.2f} s wall time")
    print(
        f"  energy {s['energy_initial_J']:.6g} J -> {s['energy_final_J']:.6g} J (relative change {s['energy_relative_change']:+.3e})"
    )
    print(
        f"  angular momentum relative drift {s['angular_momentum_relative_drift']:.3e}, linear momentum drift {s['linear_momentum_drift_N_s']:.3e} N s"
    )
    print(
        f"  nutation angle {s['nutation_initial_deg']:.2f} deg -> {s['nutation_final_deg']:.2f} deg"
    )
    files = ["trajectory.csv", "trajectory.npz", "summary.json"] + (
        ["trajectory.png", "attitude.png", "joints.png"] if plotted else []
    )
    print(
        f"  wrote {', '.join(files)} to {out}/"
        + ("" if plotted else "  (install 'kanedyn[plot]' for the plot)")
    )


def _cmd_check(args: argparse.Namespace) -> int:
    model, state, _, label = _load(args.model)
    m, c, I = kd.system_mass_properties(model, state)
    print(f"{label}: OK")
    print(
        f"  bodies {model.nb}, joints {len(model.joints)}, coordinates nq = {model.nq}, speeds nu = {model.nu} + ns = {model.ns}"
    )
    for k, j in enumerate(model.joints):
        kind = "spherical" if j.rot_type == "spherical" else f"gimbal {j.rot_dof}-DOF {j.rot_seq}"
        print(
            f"  joint {j.name!r}: {j.inner or 'N'} -> {j.outer}, {kind}, {j.trn_dof} slide(s); speeds {model.layout.u_index[k].tolist()}"
        )
    print(f"  total mass {m:.6g} kg, mass centre {np.array2string(c, precision=6)} m (N)")
    print(f"  inertia about the mass centre (N axes):\n{np.array2string(I, precision=6)}")
    print(f"  kinetic energy {kd.kinetic_energy(model, state):.6g} J")
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


def _cmd_derive(args: argparse.Namespace) -> int:
    model, _, _, label = _load(args.model)
    from kanedyn import symbolic

    values: dict = {}
    if not args.numeric:
        model, values = symbolic.symbolic_parameters(model)
    eom = symbolic.kane(model)
    if args.table:
        print(eom.table(fmt="latex" if args.latex else "markdown"))
        return 0
    text = eom.stages().latex() if args.latex else eom.stages().markdown()
    if values:
        rows = [f"| `{s}` | {v!r} |" for s, v in values.items()]
        table = "\n".join(["| parameter | value |", "|---|---|", *rows])
        if args.latex:
            from sympy import latex

            rows = [f"${latex(s)}$ & {v!r} \\\\" for s, v in values.items()]
            table = "\n".join(
                ["\\subsection*{Parameters}", "\\begin{tabular}{ll}", *rows, "\\end{tabular}"]
            )
            text = text.replace("\\end{document}", table + "\n\\end{document}")
        else:
            text += "\n## Parameters\n\n" + table + "\n"
    print(text)
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
    p.add_argument("model", nargs="?", help="model file (TOML, NASA 42 SC_*.txt, or URDF)")
    p.add_argument("--t-final", type=float, help="final time [s]")
    p.add_argument("--dt", type=float, help="time step [s]")
    p.add_argument("--method", help="rk4 (default) or a scipy solve_ivp method such as DOP853")
    p.add_argument("--formulation", choices=("kane", "msd"), help="Kane speeds or momentum states")
    p.add_argument("--engine", choices=("auto", "compiled", "dense"), default="auto",
                   help="right-hand side: generated code (compiled), the NumPy engine (dense), "
                        "or compiled when possible (auto, default)")  # fmt: skip
    p.add_argument("--out", default="kanedyn-out", help="output folder (default ./kanedyn-out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_simulate)
    p = sub.add_parser(
        "check", parents=[common], help="validate a model and print its DOF and mass properties"
    )
    p.add_argument("model", nargs="?", help="model file (default: the built-in Explorer-1)")
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser(
        "derive",
        parents=[common],
        help="derive Kane's equations symbolically, stage by stage (Markdown or LaTeX)",
    )
    p.add_argument("model", nargs="?", help="model file (default: the built-in Explorer-1)")
    p.add_argument("--latex", action="store_true", help="a LaTeX document instead of Markdown")
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
    return parser


def _show_warning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    print(f"kanedyn: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
