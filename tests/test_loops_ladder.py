"""RK4 with the loops' projection over a ladder of steps: the error against a tight
reference falls as h⁴ from one step to the next, and so does the energy error.

Oracles: scipy's DOP853 at rtol = atol = 1e-13 on the 1-DOF closed form of the IFToMM
A02 N-four-bar (a pendulum with I = (N+1) m L²/3 + N m L², V = m g L sin θ ((N+1)/2 + N));
``kd.simulate`` with DOP853 at rtol = atol = 1e-13 for the four-bar and the slider-crank
(a different integrator, with no projection inside the run); energy conservation.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate

import kanedyn as kd
from tests.test_mbs_benchmarks import n_four_bar

STEPS = (1e-2, 5e-3, 2.5e-3, 1.25e-3)
ENGINE = "dense"  # the engine whose partition and projection these runs check
FLOOR = 1e-10  # below this the error is the reference's and round-off: no order asked


def observed_orders(errors):
    """``log2(e_k / e_{k+1})`` between consecutive steps of the ladder while both are
    above :data:`FLOOR`; ``-inf`` for a pair whose second error rose above the floor
    after the first had fallen below it (a jump)."""
    out = []
    for a, b in zip(errors[:-1], errors[1:], strict=False):
        if a > FLOOR:
            out.append(np.log2(a / max(b, FLOOR / 16)))
        elif b > FLOOR:
            out.append(-np.inf)
    return out


def energy(traj):
    return traj.kinetic_energy + traj.potential_energy


def crank_driven(model, rate):
    s = model.set_joint(model.initial_state(), "crank", rates=[rate])
    return model.assemble(s, fix=["crank"])


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dense", "compiled"])
@pytest.mark.parametrize(
    ("build", "rate"),
    [
        (kd.examples.four_bar, 3.0),
        (kd.examples.slider_crank, 5.0),
        (lambda: kd.examples.slider_crank(spatial=True), 5.0),
    ],  # fmt: skip
    ids=["four_bar", "slider_crank", "slider_crank_spatial"],
)
def test_rk4_ladder_falls_as_h4(build, rate, engine):
    """On the dense engine (speed partition, projection in Python) and on the native
    one (constraint force method, the step end and its projection in the native
    step)."""
    model = build()
    s = crank_driven(model, rate)
    T = 1.0
    ref = kd.simulate(model, s, T, method="DOP853", rtol=1e-13, atol=1e-13, output_every=T,
                      engine="dense")  # fmt: skip
    e0 = energy(ref)[0]
    errors, drifts = [], []
    for h in STEPS:
        tr = kd.simulate(model, s, T, h, output_every=T, engine=engine)
        assert tr.engine == ("native" if engine == "compiled" else "dense")
        errors.append(float(np.max(np.abs(tr.q[-1] - ref.q[-1]))))
        drifts.append(float(np.max(np.abs(energy(tr) - e0)) / abs(e0)))
    assert min(observed_orders(errors)) > 3.5, errors
    assert min(observed_orders(drifts)) > 3.5, drifts


def a02(N, t_final, h, engine=ENGINE):
    """The N-four-bar run with RK4 at step ``h`` on ``engine`` and its closed-form
    reference at the outputs (every step): (trajectory, θ of every rod (nt, N + 1),
    reference θ)."""
    model = n_four_bar(N)
    s = model.assemble(model.set_joint(model.initial_state(), "p0", rates=[-1.0]), fix=["p0"])
    traj = kd.simulate(model, s, t_final, h, output_every=h, force=True, engine=engine)
    I_eff, k_g = (N + 1) / 3 + N, 9.81 * ((N + 1) / 2 + N)
    ref = scipy.integrate.solve_ivp(lambda t, x: [x[1], -k_g * np.cos(x[0]) / I_eff],
                                    (0, t_final), [np.pi / 2, -1.0], t_eval=traj.t,
                                    method="DOP853", rtol=1e-13, atol=1e-13).y[0]  # fmt: skip
    theta = np.pi / 2 + np.column_stack([traj.q[:, model.coordinates(f"p{k}")[0]]
                                         for k in range(N + 1)])  # fmt: skip
    return traj, theta, ref


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dense", "compiled"])
def test_n_four_bar_ladder_through_its_singular_configuration(engine):
    """Steps chosen so that a step of every run ends 2e-7 s (about 1e-6 rad) past the
    first singular configuration (the rods horizontal, t* from the closed form): the
    error and the energy after it must still fall as h⁴ from one step to the next, on
    the dense engine (speed partition) and on the native one (constraint force method).
    Before the singular directions were left out of ``c0`` and of the velocity
    projection, the dense run at k = 200 jumped to an error of 2.4e-4 (and its energy
    by 2.5e-4), where k = 400 was at 4.5e-11; before the native kernel left out the bias
    of nearly dependent rows (``loop_rows.SINGULAR_RCOND``), its run at k = 200 jumped
    to an error of 2.1e-3 where k = 200 was at 7.9e-5, and before its projection stopped
    Newton at a closure of 1e-13 (``loop_rows.CLOSED_TOL``), its k = 400 run ended at
    4.8e-10, no better than k = 200."""
    N = 2
    I_eff, k_g = (N + 1) / 3 + N, 9.81 * ((N + 1) / 2 + N)

    def horizontal(t, x):
        return x[0]

    horizontal.terminal = True  # type: ignore[attr-defined]
    t_star = scipy.integrate.solve_ivp(lambda t, x: [x[1], -k_g * np.cos(x[0]) / I_eff],
                                       (0, 1.0), [np.pi / 2, -1.0], events=horizontal,
                                       rtol=1e-13, atol=1e-13).t_events[0][0]  # fmt: skip
    errors, drifts = [], []
    for k in (100, 200, 400):
        h = (t_star + 2e-7) / k
        traj, theta, ref = a02(N, 2 * k * h, h, engine)
        assert traj.engine == ("native" if engine == "compiled" else "dense")
        errors.append(float(np.max(np.abs(theta - ref[:, None]))))
        E = energy(traj)
        drifts.append(float(np.max(np.abs(E - E[0])) / abs(E[0])))
    assert min(observed_orders(errors)) > 3.5, errors
    assert min(observed_orders(drifts)) > 3.5, drifts
