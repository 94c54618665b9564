"""The IFToMM / Coruña multibody benchmark library's problems, against its published
reference solutions.

Problem A02, the N-four-bar mechanism, from its specification
(http://lim.ii.udc.es/mbsbenchmark/dist/A02/A02_specification.xml): 2N + 1 links of 1 m
with a uniformly distributed mass of 1 kg, gravity 9.81 N/kg along -y, N = 40; at t = 0
the mechanism is in the figure's position (the rods vertical) and the x velocity of point
B0 (the top of the first rod) is 1 m/s; a 20 s dynamic simulation. The reference solution
is the time-history of B0's position (``tests/data/mbsbenchmark_A02_B0.csv``, the
library's ``A02_solution_data.txt``: 401 outputs every 0.05 s); the maximum allowed errors
are 1.0E-1 (low precision) and 1.0E-3 (high precision), measured with 400 output steps.
These tests ask for the high precision.

Problem A04 (Bricard's mechanism) is not here: its reference solution data were not
available (see docs/verification.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd

A02_DATA = Path(__file__).parent / "data" / "mbsbenchmark_A02_B0.csv"
A02_HIGH_PRECISION = 1.0e-3  # the specification's maximum allowed error (high precision)


def n_four_bar(N, L=1.0, m=1.0, g=9.81):
    """The N-four-bar mechanism of the IFToMM benchmark library (problem A02): N + 1
    vertical rods on ground pivots 1 m apart, joined at their tops by N horizontal rods
    (1 m, 1 kg each): N parallelograms in a row, one DOF. Coupler k hangs on rod k - 1;
    the loop "b{k}" pins it to rod k. The pivot of rod 0 ("p0") is N's origin, so point
    B0, the top of rod 0, is at ``L (cos θ, sin θ)`` with ``θ = π/2 + q_p0``."""
    up = kd.euler_to_dcm("123", (0, 0, np.pi / 2))
    I = m * L**2 / 12

    def rod(name):
        return kd.Body(name, mass=m, inertia=kd.inertia_tensor(1e-6, I, I), com=(L / 2, 0, 0))

    bodies, joints, lps = [], [], []
    for k in range(N + 1):
        bodies.append(rod(f"v{k}"))
        joints.append(kd.Joint.revolute(f"p{k}", None, f"v{k}", axis=3,
                                        inner_point=(k * L, 0, 0), inner_rotation=up))  # fmt: skip
    for k in range(1, N + 1):
        bodies.append(rod(f"h{k}"))
        joints.append(kd.Joint.revolute(f"a{k}", f"v{k - 1}", f"h{k}", axis=3,
                                        inner_point=(L, 0, 0), inner_rotation=up.T))  # fmt: skip
        lps.append(kd.Loop.revolute(f"b{k}", f"h{k}", f"v{k}", axis=3,
                                    inner_point=(L, 0, 0), outer_point=(L, 0, 0)))  # fmt: skip
    return kd.Model(bodies, joints, loops=lps, gravity=(0, -g, 0), planar=True)


def a02_reference():
    """(t, x_B0, y_B0) of the published A02 reference solution."""
    return np.loadtxt(A02_DATA, delimiter=",", comments="#").T


def a02_b0(t_final, dt, g=9.81):
    """B0's position from kanedyn at the reference's output times up to ``t_final``.

    The initial state of the specification: rods vertical (q = 0) and B0 moving at
    1 m/s along +x, i.e. rod 0 turning at -1 rad/s about z (a 1 m lever); the other
    rates follow from the loops (``assemble`` with p0 fixed)."""
    model = n_four_bar(40, g=g)
    s = model.assemble(model.set_joint(model.initial_state(), "p0", rates=[-1.0]), fix=["p0"])
    traj = kd.simulate(model, s, t_final, dt, output_every=0.05)
    theta = np.pi / 2 + traj.q[:, model.coordinates("p0")[0]]
    return traj, np.cos(theta), np.sin(theta)


def test_a02_reference_file_is_the_specified_problem():
    """The data file is what the specification describes: 401 outputs every 0.05 s over
    20 s, starting at B0 = (0, 1) (the top of a vertical 1 m rod)."""
    t, x, y = a02_reference()
    assert t.shape == (401,)
    np.testing.assert_allclose(np.diff(t), 0.05, atol=1e-12)
    assert (t[0], t[-1]) == (0.0, 20.0)
    assert (x[0], y[0]) == pytest.approx((0.0, 1.0), abs=1e-12)
    np.testing.assert_allclose(np.hypot(x, y), 1.0, atol=2e-5)  # B0 stays on its circle


def test_a02_reference_is_the_one_dof_closed_form_for_n_40():
    """The published file is the specified N = 40 problem: the parallelograms turn as one
    pendulum with I = 41 m L²/3 + 40 m L² and V = m g L sin θ (41/2 + 40) (the couplers
    translate), θ(0) = π/2, θ'(0) = -1 rad/s; integrated here by scipy, it matches all
    401 published outputs to 1e-5 (N = 39 or 41 would not, at 1e-3)."""
    import scipy.integrate

    t, x, y = a02_reference()
    for N, close in ((40, True), (39, False), (41, False)):
        I_eff, k_g = (N + 1) / 3 + N, 9.81 * ((N + 1) / 2 + N)
        th = scipy.integrate.solve_ivp(lambda _, s, c=k_g / I_eff: [s[1], -c * np.cos(s[0])],
                                       (0, 20), [np.pi / 2, -1.0], t_eval=t,
                                       rtol=1e-12, atol=1e-12).y[0]  # fmt: skip
        err = max(np.abs(np.cos(th) - x).max(), np.abs(np.sin(th) - y).max())
        assert (err < 1e-5) if close else (err > A02_HIGH_PRECISION)


def test_a02_first_second_matches_the_published_solution():
    """The first 1.2 s (through the first singular, horizontal configuration near
    0.72 s and down to B0's lowest point): every published output within the high
    precision error 1e-3."""
    t, x, y = a02_reference()
    n = int(round(1.2 / 0.05)) + 1
    traj, xb, yb = a02_b0(1.2, 0.01)
    np.testing.assert_allclose(traj.t, t[:n], atol=1e-9)
    assert y[:n].min() < -0.99  # the window reaches the bottom, through y = 0
    assert np.abs(xb - x[:n]).max() < A02_HIGH_PRECISION
    assert np.abs(yb - y[:n]).max() < A02_HIGH_PRECISION
    assert traj.loop_residual.max() < 1e-12


@pytest.mark.slow
def test_a02_twenty_seconds_match_the_published_solution():
    """The specified 20 s run, all 400 output steps within the high precision error."""
    t, x, y = a02_reference()
    traj, xb, yb = a02_b0(20.0, 0.005)
    np.testing.assert_allclose(traj.t, t, atol=1e-9)
    assert np.abs(xb - x).max() < A02_HIGH_PRECISION
    assert np.abs(yb - y).max() < A02_HIGH_PRECISION
    assert traj.loop_residual.max() < 1e-12
