"""The dense engine's right-hand side of a looped model forms the tree's mass matrix
once.

``M`` depends on the coordinates alone: under MSD the speeds' solve
(:func:`kanedyn.dynamics.msd.speeds_at`), their closure on the loops
(:func:`kanedyn.dynamics.loops.plastic_impact`) and the loop forces
(:func:`kanedyn.dynamics.loops.equations_at`) all need it at the same ``q``. Every
kanedyn module's reference to :func:`kanedyn.dynamics.kane.mass_matrix_at` is wrapped
by a counter, so a new caller anywhere in the right-hand side is counted too. (That the
results are unchanged: ``tests/test_msd_loops.py``.)
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import kane, msd
from kanedyn.simulation.options import Formulation
from kanedyn.simulation.system import System
from tests.test_loops import random_assembled


@pytest.fixture
def formations(monkeypatch):
    """A list that gets one entry per call of ``mass_matrix_at``, whichever kanedyn
    module calls it."""
    calls: list[int] = []
    original = kane.mass_matrix_at

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    patched = set()
    for name, module in list(sys.modules.items()):
        # vars(): a deprecated module alias (kanedyn.inertia, ...) warns on getattr
        if name.startswith("kanedyn") and vars(module).get("mass_matrix_at") is original:
            monkeypatch.setattr(module, "mass_matrix_at", counted)
            patched.add(name)
    # the callers on the right-hand side (msd's speeds go through
    # kane.flexible_mass_matrix_at, which calls kane's own, patched, name)
    assert {
        "kanedyn.dynamics.kane",
        "kanedyn.dynamics.loops",
        "kanedyn.simulation.system",
    } <= patched
    return calls


@pytest.mark.parametrize("formulation", [Formulation.MSD, Formulation.KANE])
@pytest.mark.parametrize("locked", [(), (1,)])
def test_one_mass_matrix_per_right_hand_side(formations, formulation, locked):
    model = kd.examples.slider_crank(spatial=True)
    s = random_assembled(model, 2)
    system = System(model, formulation, None, locked=np.array(locked, dtype=np.intp))
    x = system.initial(s)
    formations.clear()
    xdot = system(0.0, x)
    assert len(formations) == 1
    assert np.all(np.isfinite(xdot))


def test_the_count_sees_a_second_formation(formations):
    """The counter is not blind: the speeds of the momenta alone (outside a right-hand
    side) and ``msd.speeds_at`` without a shared ``M`` each form their own."""
    model = kd.examples.four_bar()
    s = random_assembled(model, 0)
    system = System(model, Formulation.MSD, None)
    y = system.initial(s)[model.nq :]
    formations.clear()
    system.speeds(s.q, y)
    kin = kd.dynamics.kinematics.kinematics_at(model, s.q, np.zeros(model.n))
    msd.speeds_at(model, kin, y, np.zeros(0, dtype=np.intp))
    assert len(formations) == 2
