"""Nothing lost, for real: a ``kanedyn simulate`` run that diverges to overflow, or is
stopped by a signal at any moment after its arguments are parsed, ends with its four
files and a truthful summary; and the API's interrupted trajectory always holds t = 0.

The diverging model is the harmonic oscillator θ'' = -(k/I) θ with k = 100 N m/rad and
I = 1 kg m²: at dt = 0.5 s RK4 multiplies its amplitude by |R(5i)| ≈ 21.5 a step
(closed form), so the run overflows after about 230 steps.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.cli import SIMULATE_FILES, main

OSCILLATOR = """\
[[bodies]]
name = "rotor"
mass_kg = 1.0
inertia_kg_m2 = { Ixx = 1.0, Iyy = 1.0, Izz = 1.0 }

[[joints]]
name = "pivot"
inner = "N"
outer = "rotor"
kind = "revolute"
axis = 3
stiffness = 100.0

[initial.pivot]
angles_rad = [0.1]
"""
GROWTH = abs(1 + 5j + (5j) ** 2 / 2 + (5j) ** 3 / 6 + (5j) ** 4 / 24)  # |R(5i)|, per step


def strict(text: str):
    """json.loads that refuses NaN and Infinity (strict JSON)."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))


def csv_rows(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


@pytest.mark.parametrize("formulation", ["kane", "msd"])
@pytest.mark.parametrize("engine", ["compiled", "dense"])
def test_a_run_diverging_to_overflow_ends_with_four_files(tmp_path, capfd, formulation, engine):
    path = tmp_path / "osc.toml"
    path.write_text(OSCILLATOR)
    out = tmp_path / "o"
    code = main(["simulate", str(path), "--t-final", "1000", "--dt", "0.5", "--output-every",
                 "0.5", "--formulation", formulation, "--engine", engine, "--force", "--quiet",
                 "--out", str(out)])  # fmt: skip
    err = capfd.readouterr().err
    assert code == 2 and "internal error" not in err
    assert "All-NaN" not in err and "RuntimeWarning" not in err
    assert sorted(p.name for p in out.iterdir()) == sorted(SIMULATE_FILES)
    assert (out / "trajectory.png").stat().st_size > 0
    s = strict((out / "summary.json").read_text())
    assert s["status"] == "diverged" and 100.0 < s["t_reached_s"] < 1000.0
    assert s["steps"] == s["t_reached_s"] / 0.5  # an output every step, the last one kept
    rows = csv_rows(out / "trajectory.csv")
    assert rows.shape[0] == s["outputs"] == np.load(out / "trajectory.npz")["t"].size
    assert rows[-1, 0] == s["t_reached_s"]
    # energy at t = 0 is ½ k θ0² = 0.5 J, whatever became of the run
    assert s["energy_initial_J"] == pytest.approx(0.5, rel=1e-12)
    # the finite rows are the oscillator's RK4 motion: amplitude 0.1 |R(5i)|^n
    finite = np.all(np.isfinite(rows[:, 1:3]), axis=1)
    n = np.nonzero(finite)[0][-1]
    amplitude = math.hypot(rows[n, 1], rows[n, 2] / 10.0)
    assert amplitude == pytest.approx(0.1 * GROWTH**n, rel=1e-6)
    # the outputs beyond 1e100 are left out of the figure and the energy, and said
    assert s["outputs_not_finite"] >= 1 and s["energy_final_t_s"] < s["t_reached_s"]
    assert "momentum is not conserved" in s["momentum_drift_not_shown"]


def test_the_figure_of_a_diverged_run_names_what_it_leaves_out():
    pytest.importorskip("matplotlib")
    from kanedyn.plotting import plot_run, plottable

    body = kd.Body("rotor", mass=1.0, inertia=np.eye(3))
    model = kd.Model([body], [kd.Joint.revolute("pivot", None, "rotor", axis=3,
                                                stiffness=100.0)])  # fmt: skip
    state = model.set_joint(model.initial_state(), "pivot", angles=[0.1])
    with pytest.warns(kd.simulation.diagnose.StepSizeWarning):
        with pytest.raises(kd.SimulationError) as info:
            kd.simulate(model, state, 1000.0, 0.5, force=True)
    traj = info.value.trajectory
    keep = plottable(traj)
    # the energy 0.5 J |R(5i)|^(2n) passes 1e100 J first: from there the outputs are out
    first_out = math.ceil(math.log(1e100 / 0.5) / (2 * math.log(GROWTH)))
    assert keep[:first_out].all() and not keep[first_out:].any()
    fig = plot_run(traj)
    assert f"{int((~keep).sum())} of {keep.size} outputs not drawn" in fig._suptitle.get_text()


@pytest.mark.parametrize("formulation", ["kane", "msd"])
def test_an_interrupt_before_the_first_step_keeps_t0(formulation):
    """Ctrl-C while the run is set up (here: while its loads are first resolved)."""
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    streamed = []

    def interrupt(t, model, state, kin):
        raise KeyboardInterrupt

    with pytest.raises(kd.SimulationInterrupted) as info:
        kd.simulate(model, state, 100.0, 1.0, formulation=formulation, loads=interrupt,
                    stream=lambda t, q, u: streamed.append((t, q, u)))  # fmt: skip
    traj = info.value.trajectory
    assert traj.status == "interrupted" and traj.steps == 0
    assert traj.t.tolist() == [0.0]
    np.testing.assert_array_equal(traj.q[0], state.q)
    np.testing.assert_array_equal(traj.u[0], state.u)
    assert traj.total_energy[0] == pytest.approx(
        kd.kinetic_energy(model, state) + kd.potential_energy(model, state), rel=1e-12
    )
    if formulation == "msd":
        np.testing.assert_allclose(traj.momenta[0], kd.msd.momenta(model, state), rtol=1e-12)
    assert len(streamed) == 1 and streamed[0][0].tolist() == [0.0]


def test_an_interrupted_run_counts_its_steps():
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)

    def stop_after_7(t, model, state, kin):
        if t > 7.0:
            raise KeyboardInterrupt
        return []

    with pytest.raises(kd.SimulationInterrupted) as info:
        kd.simulate(model, state, 100.0, 1.0, loads=stop_after_7)
    traj = info.value.trajectory
    # steps 1..7 ended at t = 1..7; step 8's stages reach t > 7
    assert traj.steps == 7 and traj.t[-1] == 7.0


# the timer starts when the command line's arguments are parsed
SIGNALLED = """\
import os, signal, sys, threading
from kanedyn import cli
delay, sig = float(sys.argv[1]), getattr(signal, sys.argv[2])
build = cli.build_parser

def build_parser():
    parser = build()
    parse = parser.parse_args

    def parse_args(argv=None):
        args = parse(argv)
        threading.Timer(delay, lambda: os.kill(os.getpid(), sig)).start()
        return args

    parser.parse_args = parse_args
    return parser

cli.build_parser = build_parser
sys.exit(cli.main(["simulate", "--t-final", "1e6", "--output-every", "10", "--quiet",
                   "--out", "o", *sys.argv[3:]]))
"""


def _signalled_run(tmp_path: Path, delay: float, sig: str, *args: str):
    return subprocess.run([sys.executable, "-c", SIGNALLED, f"{delay}", sig, *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip


def _check_interrupted(tmp_path: Path, res: subprocess.CompletedProcess) -> None:
    assert res.returncode == 130, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("kanedyn: interrupted at t = ")
    out = tmp_path / "o"
    assert sorted(p.name for p in out.iterdir()) == sorted(SIMULATE_FILES)
    s = strict((out / "summary.json").read_text())
    assert s["status"] == "interrupted" and 0.0 <= s["t_reached_s"] < 1e6
    rows = csv_rows(out / "trajectory.csv")
    assert rows.shape[0] == s["outputs"] == np.load(out / "trajectory.npz")["t"].size >= 1
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    assert rows[0, 0] == 0.0  # t = 0 first, the initial state
    np.testing.assert_array_equal(rows[0, 1 : 1 + model.nq], state.q)
    assert rows[-1, 0] == s["t_reached_s"]
    # the last output ended a step; the steps after it did not reach the next output
    stride = 1 if s["output_every_s"] is None else s["output_every_s"] / s["dt_s"]
    assert s["t_reached_s"] / s["dt_s"] <= s["steps"] < s["t_reached_s"] / s["dt_s"] + stride


def _moments(n: int, seed: int) -> list[tuple[float, str, str]]:
    rng = random.Random(seed)
    return [(rng.uniform(0.0, 2.5), rng.choice(["SIGINT", "SIGTERM"]),
             rng.choice(["kane", "msd"])) for _ in range(n)]  # fmt: skip


@pytest.mark.parametrize(("delay", "sig", "formulation"), _moments(4, seed=31))
def test_a_signal_at_a_random_moment_ends_with_four_files(tmp_path, delay, sig, formulation):
    """The signal lands at a random moment after the arguments are parsed: while the model
    loads, compiles, is linearized, or runs; every time the four files are written."""
    res = _signalled_run(tmp_path, delay, sig, "--formulation", formulation)
    _check_interrupted(tmp_path, res)


@pytest.mark.slow
@pytest.mark.parametrize(("delay", "sig", "formulation"), _moments(16, seed=131))
def test_signals_at_many_random_moments_end_with_four_files(tmp_path, delay, sig, formulation):
    res = _signalled_run(tmp_path, delay, sig, "--formulation", formulation, "--engine",
                         random.Random(delay).choice(["auto", "dense"]))  # fmt: skip
    _check_interrupted(tmp_path, res)


def test_a_signal_at_once_stops_at_t0_with_four_files(tmp_path):
    res = _signalled_run(tmp_path, 0.0, "SIGTERM")
    _check_interrupted(tmp_path, res)


EARLY = """\
import os, signal, sys
from kanedyn import cli
build = cli.build_parser

def build_parser():  # SIGTERM while the parser is built, before any argument is read
    os.kill(os.getpid(), signal.SIGTERM)
    return build()

cli.build_parser = build_parser
sys.exit(cli.main(["simulate", "--quiet", "--out", "o"]))
"""


def test_a_signal_while_the_arguments_are_parsed_stops_the_run_at_t0(tmp_path):
    """Signals are held from the start of the command line: one that arrives before the
    arguments are read stops the run at t = 0, with its four files."""
    res = subprocess.run([sys.executable, "-c", EARLY], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    _check_interrupted(tmp_path, res)
    s = strict((tmp_path / "o" / "summary.json").read_text())
    assert s["t_reached_s"] == 0.0 and s["outputs"] == 1 and s["steps"] == 0


def test_a_signal_stops_another_command_at_once(tmp_path):
    code = EARLY.replace('["simulate", "--quiet", "--out", "o"]', '["check"]')
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert res.returncode == 130 and res.stderr.strip() == "kanedyn: interrupted"
    assert res.stdout == ""
