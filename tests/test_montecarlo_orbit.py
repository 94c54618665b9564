"""Orbit elements as Monte Carlo dispersion parameters (``orbit.radius``, ``orbit.e``,
...): each member's initial state against the vis-viva speed and the circular-orbit
geometry written out here, and a short run against a single kd.simulate of the member
built by hand."""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.simulation.montecarlo.dispersion import DispersionSpec, apply, sample

pytest.importorskip("pandas")


def _held_in_lvlh(pitch: float = 0.1):
    body = kd.Body("sat", mass=500.0, inertia=kd.inertia_tensor(100.0, 120.0, 40.0),
                   com=(0.1, 0.0, 0.2))  # fmt: skip
    model = kd.Model([body], [kd.Joint.free("root", "sat", outer_point=(0.1, 0.0, 0.2))],
                     gravity=kd.CentralGravity())  # fmt: skip
    orbit = kd.Orbit.circular(7.0e6, i=0.4, raan=0.2, nu=0.3)
    return model, orbit.place(model, model.initial_state(), "root", angles=(0.0, pitch, 0.0))


def test_orbit_radius_puts_each_member_on_a_circular_orbit_held_in_its_lvlh():
    """Each member's mass centre is at the drawn radius r on the nominal orbit plane,
    at the circular speed sqrt(mu/r) at right angles to r (vis-viva with a = r), with
    the nominal pitch relative to its own LVLH (z nadir, y the negative orbit normal)
    and LVLH's rate (body rate -sqrt(mu/r³) about y_L)."""
    model, state = _held_in_lvlh()
    spec = DispersionSpec(model, state, (kd.Dispersion("orbit.radius", "uniform",
                                                       low=6.9e6, high=7.4e6),), 3)  # fmt: skip
    assert spec.nominals[0] == pytest.approx(7.0e6, rel=1e-14)
    values = sample(spec, range(6))
    members = apply(spec, values)
    assert members.invalid == [""] * 6
    h0 = None
    for b, radius in enumerate(values[:, 0]):
        kin = kd.kinematics(model, kd.State(members.q[b], members.u[b]))
        r, v = kin.r[0], kin.v[0]
        assert np.linalg.norm(r) == pytest.approx(radius, rel=1e-13)
        assert np.linalg.norm(v) == pytest.approx(np.sqrt(kd.EARTH_MU / radius), rel=1e-13)
        assert abs(r @ v) < 1e-9 * np.linalg.norm(r) * np.linalg.norm(v)
        h = np.cross(r, v) / np.linalg.norm(np.cross(r, v))
        h0 = h if h0 is None else h0
        np.testing.assert_allclose(h, h0, atol=1e-14)  # one orbit plane
        z, y = -r / np.linalg.norm(r), -h
        R_L_N = np.array([np.cross(y, z), y, z])
        R_L_B = R_L_N @ kin.R_N_B[0]
        c, s = np.cos(0.1), np.sin(0.1)
        np.testing.assert_allclose(R_L_B, [[c, 0, s], [0, 1, 0], [-s, 0, c]], atol=1e-14)
        w_B = kin.R_N_B[0].T @ kin.omega[0]
        n = np.sqrt(kd.EARTH_MU / radius**3)
        np.testing.assert_allclose(w_B, R_L_B.T @ [0.0, -n, 0.0], atol=1e-17)


def test_orbit_eccentricity_out_of_range_makes_the_member_invalid():
    model, state = _held_in_lvlh()
    spec = DispersionSpec(model, state, (kd.Dispersion("orbit.e", "choice",
                                                       values=[0.1, 1.2]),), 0)  # fmt: skip
    values = np.array([[0.1], [1.2]])
    members = apply(spec, values)
    assert members.invalid[0] == ""
    assert "eccentricity" in members.invalid[1]


@pytest.mark.parametrize(
    ("model_kind", "parameter", "message"),
    [
        ("uniform", "orbit.radius", "central field"),
        ("central", "orbit.height", "an orbit takes orbit.radius"),
    ],
)
def test_orbit_parameters_are_refused_where_they_mean_nothing(model_kind, parameter, message):
    model, state = _held_in_lvlh()
    if model_kind == "uniform":
        model = kd.Model(model.bodies, model.joints)
    with pytest.raises(kd.ModelError, match=message):
        DispersionSpec(model, state, (kd.Dispersion(parameter, "normal", sigma=1.0),), 0)
    with pytest.raises(kd.ModelError, match="same element"):
        DispersionSpec(
            model,
            state,
            (
                kd.Dispersion("orbit.a", "normal", sigma=1.0),
                kd.Dispersion("orbit.radius", "normal", sigma=1.0),
            ),
            0,
        )


def test_a_monte_carlo_run_of_orbit_radius_matches_single_runs(tmp_path):
    """Two members over 200 s: each member's trajectory against kd.simulate of the
    same spacecraft placed by hand on a circular orbit of the member's radius."""
    model, state = _held_in_lvlh()
    disp = kd.Dispersion("orbit.radius", "normal", sigma=2.0e4)
    result = kd.monte_carlo(model, state, [disp], 2, 200.0, 1.0, seed=5, output_every=50.0,
                            keep_trajectories=True, store=tmp_path)  # fmt: skip
    radii = sample(DispersionSpec(model, state, (disp,), 5), range(2))[:, 0]
    for b, radius in enumerate(radii):
        orbit = kd.Orbit.circular(radius, i=0.4, raan=0.2, nu=0.3)
        own = orbit.place(model, model.initial_state(), "root", angles=(0.0, 0.1, 0.0))
        traj = kd.simulate(model, own, t_final=200.0, dt=1.0, output_every=50.0,
                           progress=False)  # fmt: skip
        t, q, u = result.trajectory(b)
        np.testing.assert_allclose(q, traj.q, rtol=0, atol=1e-6)
        np.testing.assert_allclose(u, traj.u, rtol=0, atol=1e-9)
