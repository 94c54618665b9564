"""Joint limits in ensembles and Monte Carlo runs (``limits=`` of
:func:`kanedyn.simulate_ensemble` and :func:`kanedyn.monte_carlo`).

Oracles: a slider on a vertical slide under gravity, from height ``d0`` with upward
speed ``v0``, is at ``d(t) = d0 + v0 t - ½ g t²``: it reaches a bound ``b`` at the first
root of ``d(t) = b``. Under stops it then rests at the bound (a plastic stop, gravity
pressing it there).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.simulation.limits import JointLimitWarning

G = 9.81
LOWER, UPPER = -0.5, 0.5
DT = 1e-3
T_FINAL = 0.5
#: (d0 [m], v0 [m/s]) of each member: two fall to the lower bound from different heights,
#: one is thrown through the upper bound, one stays inside both for T_FINAL.
STARTS = [(0.0, 0.0), (0.3, 0.0), (0.0, 4.0), (0.2, 1.5)]


def slider():
    body = kd.Body("block", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.1))
    joint = kd.Joint.prismatic("lift", None, "block", axis=3,
                               limits=kd.JointLimits(lower=LOWER, upper=UPPER))  # fmt: skip
    return kd.Model([body], [joint], gravity=(0.0, 0.0, -G))


def first_time(d0, v0, bound):
    """The first t > 0 with d0 + v0 t - g t²/2 = bound (None if never)."""
    roots = np.roots([-0.5 * G, v0, d0 - bound])
    roots = sorted(r.real for r in roots if abs(r.imag) < 1e-12 and r.real > 0)
    return roots[0] if roots else None


def states():
    d0, v0 = np.array(STARTS).T
    return kd.States(d0[:, None], v0[:, None])


def expected(d0, v0, t_final=T_FINAL):
    """(bound, time) of each bound's first crossing within the run, in time order."""
    out = []
    for bound, value in (("lower", LOWER), ("upper", UPPER)):
        t = first_time(d0, v0, value)
        if t is not None and t <= t_final:
            out.append((bound, t))
    return sorted(out, key=lambda e: e[1])


def test_ensemble_warns_with_each_members_crossings():
    model = slider()
    with pytest.warns(JointLimitWarning, match=r"crossed by 3 of 4 members"):
        ens = kd.simulate_ensemble(model, states(), T_FINAL, DT)
    assert ens.limits == "warn"
    for b, (d0, v0) in enumerate(STARTS):
        want = expected(d0, v0)
        got = [(c.bound, c.t) for c in ens.limit_crossings[b]]
        assert [g[0] for g in got] == [w[0] for w in want], b
        # linear interpolation of the parabola between outputs 1 ms apart
        assert [g[1] for g in got] == pytest.approx([w[1] for w in want], abs=1e-5)
        # member(b) carries them, as kd.simulate's trajectory would
        assert ens.member(b).limit_crossings == ens.limit_crossings[b]
    # member 3 stays inside: its apex is d0 + v0²/(2g) < UPPER, and it has not yet fallen
    assert ens.limit_crossings[3] == ()
    assert 0.2 + 1.5**2 / (2 * G) < UPPER and first_time(0.2, 1.5, LOWER) > T_FINAL


def test_ensemble_ignore_checks_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error", JointLimitWarning)
        ens = kd.simulate_ensemble(slider(), states(), T_FINAL, DT, limits="ignore")
    assert ens.limits == "ignore" and ens.limit_crossings == ()
    # not enforced: member 0 falls freely
    assert ens.q[-1, 0, 0] == pytest.approx(-0.5 * G * T_FINAL**2, rel=1e-9)


def test_ensemble_stops_hold_each_member_at_its_own_time():
    model = slider()
    t_final = 0.8
    ens = kd.simulate_ensemble(model, states(), t_final, DT, limits="stop")
    assert ens.limits == "stop"
    for b, (d0, v0) in enumerate(STARTS):
        q = ens.q[:, b, 0]
        assert np.all(q >= LOWER - 1e-12) and np.all(q <= UPPER + 1e-12), b
        # the first stop is reached at the free-flight time of its bound, to one step
        bound, t_hit = expected(d0, v0, t_final)[0]
        held = ens.limit_crossings[b]
        assert held[0].bound == bound
        assert held[0].t == pytest.approx(t_hit, abs=DT)
        # every member ends resting on the lower stop
        assert ens.q[-1, b, 0] == pytest.approx(LOWER, abs=1e-12)
        assert ens.u[-1, b, 0] == pytest.approx(0.0, abs=1e-12)
    # member 2 hits the upper stop, is held until gravity pulls it down (at once: it
    # arrives with its upward speed taken away), and falls 1 m onto the lower stop
    assert [c.bound for c in ens.limit_crossings[2]] == ["upper", "lower"]
    t_up = first_time(0.0, 4.0, UPPER)
    assert ens.limit_crossings[2][1].t == pytest.approx(t_up + np.sqrt(2.0 / G), abs=3 * DT)


def test_ensemble_stops_with_a_load_callable_are_refused():
    def loads(t, model, states, kin):
        return []

    with pytest.raises(kd.ModelError, match="load callables take one state"):
        kd.simulate_ensemble(slider(), states(), T_FINAL, DT, limits="stop", loads=loads)
    with pytest.raises(kd.ModelError, match="limits"):
        kd.simulate_ensemble(slider(), states(), T_FINAL, DT, limits="enforce")


@pytest.mark.parametrize("mode", ["warn", "stop"])
def test_monte_carlo_reports_each_members_crossings(mode):
    pytest.importorskip("pandas")
    model = slider()
    state = model.initial_state()
    disp = kd.Dispersion("lift.displacement_rates.0", "uniform", low=-1.0, high=4.0)
    ctx = pytest.warns(JointLimitWarning) if mode == "warn" else warnings.catch_warnings()
    with ctx:
        res = kd.monte_carlo(model, state, [disp], 12, 0.5, DT, seed=3, limits=mode,
                             outputs=["lift.displacements.0"])  # fmt: skip
    assert res.settings["limits"] == mode
    v0 = res.members["lift.displacement_rates.0"].to_numpy()
    text = res.members["limit_crossings"].tolist()
    for speed, line in zip(v0, text, strict=True):
        want = expected(0.0, speed, 0.5)
        if not want:
            assert line == ""
            continue
        bound, t = want[0]
        assert line.startswith(f"'lift' past its {bound} limit"), line
        got = float(line.split("t = ")[1].split(" s")[0])
        assert got == pytest.approx(t, abs=1e-5 if mode == "warn" else DT)
    assert any(text) and not all(text)
