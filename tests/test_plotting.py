"""The run's figure (kanedyn.plotting.plot_run): its title, its panels, what it hides."""

import math

import numpy as np
import pytest

import kanedyn as kd

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from kanedyn.plotting import plot_run  # noqa: E402


def titles(fig):
    return [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]


def test_explorer1_figure_has_the_run_in_its_title_and_the_free_body_panels():
    model = kd.examples.explorer1()
    traj = kd.simulate(model, kd.examples.explorer1_state(model), 200.0, 1.0, output_every=2.0)
    summary = {"model": "built-in Explorer-1", "engine": "compiled", "dt_s": 1.0}
    fig = plot_run(traj, summary=summary)
    head = fig._suptitle.get_text()
    assert "built-in Explorer-1" in head and "kane formulation" in head
    assert "compiled engine" in head and "rk4, dt = 1 s" in head
    shown = titles(fig)
    assert shown[:4] == ["Energy", "Energy: relative change (log)",
                         "Angular momentum about the mass centre", "Momentum drift (log)"]  # fmt: skip
    assert "Angular velocity of 'hub' (its body axes)" in shown
    assert "Angle between H and the initial spin axis of 'hub'" in shown
    assert "Joint angles" in shown
    # the free root's translation is round-off (~1e-14 m): no slide panel
    assert "Joint slides" not in shown
    log_axes = [ax for ax in fig.axes if ax.get_visible() and "(log)" in ax.get_title()]
    assert log_axes and all(ax.get_yscale() == "log" for ax in log_axes)


def test_fixed_base_pendulum_shows_euler_angles_and_absolute_drift():
    """A pendulum on a hinge about z, released at rest: E0 = 0, H0 = 0; its attitude is
    a yaw equal to the hinge angle (321 Euler angles of a rotation about z)."""
    bob = kd.Body("bob", mass=2.0, inertia=np.diag([0.1, 0.1, 0.1]), com=(1.0, 0.0, 0.0))
    model = kd.Model([bob], [kd.Joint.revolute("pivot", None, "bob", axis=3)],
                     gravity=(0.0, -9.81, 0.0))  # fmt: skip
    traj = kd.simulate(model, model.initial_state(), 2.0, 0.01, output_every=0.05)
    fig = plot_run(traj)
    shown = titles(fig)
    assert "Energy: change (E0 = 0; log)" in shown
    # grounded: the pivot's reactions change the momentum, so no drift is drawn
    assert not any("Momentum drift" in t for t in shown)
    ax = next(a for a in fig.axes if a.get_title().startswith("Attitude of 'bob'"))
    yaw = next(line for line in ax.get_lines() if line.get_label() == "yaw")
    np.testing.assert_allclose(yaw.get_ydata(), np.degrees(traj.q[:, 0]), atol=1e-9)
    assert not any("initial spin axis" in t for t in shown)


def test_a_real_slide_gets_its_panel():
    hub = kd.Body("hub", 10.0, np.eye(3))
    slider = kd.Body("slider", 1.0, 0.1 * np.eye(3))
    model = kd.Model([hub, slider], [kd.Joint.weld("fix", None, "hub"),
                     kd.Joint.prismatic("rail", "hub", "slider", axis=1, stiffness=4.0)])  # fmt: skip
    state = model.set_joint(model.initial_state(), "rail", displacements=[0.2])
    traj = kd.simulate(model, state, 2 * math.pi, 0.01, output_every=0.1)
    fig = plot_run(traj)
    ax = next(a for a in fig.axes if a.get_title() == "Joint slides")
    line = ax.get_lines()[0]
    # x = 0.2 cos(2 t): the slider on a spring k = 4 N/m, m = 1 kg
    np.testing.assert_allclose(line.get_ydata(), 0.2 * np.cos(2.0 * traj.t), atol=1e-6)


def test_a_spacecraft_in_orbit_shows_its_attitude_relative_to_lvlh():
    """In a central field the attitude panel is roll, pitch and yaw relative to LVLH
    (the pitch of a body pitched by 0.2 rad in LVLH starts at 0.2 rad) and the angular
    momentum is the one about the field's centre, with its drift."""
    body = kd.Body("sat", mass=500.0, inertia=kd.inertia_tensor(100.0, 120.0, 40.0))
    model = kd.Model([body], [kd.Joint.free("root", "sat")], gravity=kd.CentralGravity())
    orbit = kd.Orbit.circular(7.0e6, i=0.4)
    state = orbit.place(model, model.initial_state(), "root", angles=(0.0, 0.2, 0.0))
    traj = kd.simulate(model, state, 600.0, 2.0, output_every=20.0, progress=False)
    fig = plot_run(traj)
    shown = titles(fig)
    assert "Angular momentum about the field centre" in shown
    assert "Momentum drift (log)" in shown
    ax = next(a for a in fig.axes if a.get_title().startswith("Attitude of 'sat'"))
    assert "relative to LVLH" in ax.get_title()
    pitch = next(line for line in ax.get_lines() if line.get_label() == "pitch")
    np.testing.assert_allclose(pitch.get_ydata()[0], np.degrees(0.2), atol=1e-9)
    drift = next(a for a in fig.axes if a.get_title() == "Momentum drift (log)")
    assert [line.get_label() for line in drift.get_lines()] == ["|H - H0| / |H0|"]
