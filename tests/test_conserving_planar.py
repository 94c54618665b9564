"""The planar formulation of the energy-momentum scheme: position and two in-plane
directors per body (kanedyn.simulation.conserving.formulation).

Oracles: Kane's energy and momenta of the same state (kd.kinetic_energy, kd.momentum),
the DOF count of the loops module (kanedyn.dynamics.loops), the spatial formulation of
the same model (12 coordinates per body, an independent set of constraint rows), and
RK4 runs of Kane's constrained equations at small steps.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import loops as loops_
from kanedyn.simulation.conserving import redundant, to_joint_coordinates, to_redundant

CASES = [
    (kd.examples.four_bar, "crank"),
    (kd.examples.parallel_3rrr, "base0"),
    (kd.examples.slider_crank, "crank"),
]


def _assembled(make, driver, rate=1.5):
    model = make()
    state = model.set_joint(model.initial_state(), driver, rates=[rate])
    return model, model.assemble(state, fix=[driver])


def _rel_spread(a):
    a = np.asarray(a)
    return np.max(np.abs(a - a[0])) / np.max(np.abs(a[0]))


@pytest.mark.parametrize(("make", "driver"), CASES)
def test_planar_formulation_has_six_coordinates_per_body_and_kanes_state(make, driver):
    """6 coordinates and 3 rigidity rows per body; the augmented joint coordinates are
    the spatial formulation's; nx - nc is the mechanism's DOF (n minus the loops'
    independent planar rows). The director state carries Kane's energy and momenta
    and reads back to the same joint state."""
    model, state = _assembled(make, driver)
    red, spatial = redundant(model), redundant(model, planar=False)
    assert red.planar and not spatial.planar
    n_aug = spatial.nx - 12 * model.nb
    assert red.nx == 6 * model.nb + n_aug
    assert red.nx - red.nc == model.n - loops_.loop_plan(model).m
    assert red.nc < spatial.nc
    x, v = to_redundant(red, state)
    assert np.max(np.abs(red.constraints(x))) < 1e-12
    assert np.max(np.abs(red.constraints.jacobian(x) @ v)) < 1e-12
    E = kd.kinetic_energy(model, state) + kd.potential_energy(model, state)
    assert red.energy(x, v) == pytest.approx(E, rel=1e-13)
    P, H = red.momentum(x, v)
    P_kane, H_kane = kd.momentum(model, state)
    np.testing.assert_allclose(P, P_kane, atol=1e-12)
    np.testing.assert_allclose(H, H_kane, atol=1e-12)
    q, u = to_joint_coordinates(red, x, v)
    np.testing.assert_allclose(q, state.q, atol=1e-12)
    np.testing.assert_allclose(u, state.u, atol=1e-10)


@pytest.mark.parametrize(
    ("make", "driver"),
    [CASES[0], pytest.param(*CASES[1], marks=pytest.mark.slow), CASES[2]],
)
def test_planar_and_spatial_formulations_give_the_same_trajectory(make, driver):
    """Both formulations solve the same discrete balance on the same manifold: the
    trajectories agree to the Newton tolerance, and both conserve energy. (The spatial
    3-RRR, with its dependent out-of-plane rows solved by least squares, is slow.)"""
    model, state = _assembled(make, driver)
    T, h = 0.2, 0.01
    planar = kd.simulate(model, state, T, h, method="energy-momentum", progress=False)
    spatial = kd.simulate(
        model, state, T, h, method=kd.EnergyMomentum(planar=False), progress=False
    )
    assert planar.run.red.planar and not spatial.run.red.planar
    np.testing.assert_allclose(planar.q, spatial.q, atol=1e-9)
    np.testing.assert_allclose(planar.total_energy, spatial.total_energy, atol=1e-9)
    assert _rel_spread(planar.total_energy) < 1e-10
    assert np.max(planar.run.constraint_residual) < 1e-10
    assert np.max(planar.loop_residual) < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize(("make", "driver"), CASES[:2])
def test_planar_formulation_converges_to_rk4_at_second_order(make, driver):
    """(The default suite compares the planar runs with RK4 at a coarser tolerance in
    tests/test_conserving.py, test_closed_loops_conserve_energy_stay_closed_and_match_rk4.)"""
    model, state = _assembled(make, driver)
    T = 0.5
    ref = kd.simulate(model, state, T, 2.5e-4, output_every=T, progress=False).q[-1]
    err = []
    for h in (0.02, 0.01):
        tr = kd.simulate(model, state, T, h, method="energy-momentum", output_every=T,
                         progress=False)  # fmt: skip
        assert tr.run.red.planar
        err.append(np.max(np.abs(tr.q[-1] - ref)))
    assert err[1] < 1e-3
    assert 3.3 < err[0] / err[1] < 4.7


def test_planar_formulation_is_refused_where_it_does_not_apply():
    # the spatial slider-crank (spherical joint, lifted slider) is not planar
    m = kd.examples.slider_crank(spatial=True)
    assert not redundant(m).planar
    with pytest.raises(kd.ModelError, match="planar=True"):
        redundant(m, planar=True)
    # a planar model whose loop joint lies out of its inner body's plane
    m = kd.examples.four_bar()
    loop = attrs.evolve(m.loops[0], inner_point=np.asarray(m.loops[0].inner_point) + [0, 0, 0.1])
    bad = kd.Model(m.bodies, m.joints, gravity=m.gravity, loops=[loop], planar=True)
    with pytest.raises(kd.ModelError, match=f"joint {loop.name!r}.*out of the x-y plane"):
        redundant(bad)
