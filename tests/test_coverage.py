"""The coverage page (docs/coverage.md) and the engines it runs.

The page is made by running every engine on every feature's probe
(:mod:`kanedyn.coverage`); the slow test checks that the page in the repository is what
a fresh run gives. The other tests pin cells that follow from the physics or from an
engine's documented scope, independently of the table's own output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn import coverage

PAGE = Path(__file__).resolve().parents[1] / "docs" / "coverage.md"
ENGINES = [name for name, _ in coverage.ENGINES]


def run(feature: str, engine: str) -> str:
    make = dict(coverage.FEATURES)[feature]
    return coverage.cell(dict(coverage.ENGINES)[engine], make())


@pytest.mark.slow
def test_the_page_is_a_fresh_run():
    assert PAGE.read_text(encoding="utf-8") == coverage.markdown(coverage.table())


def test_the_page_names_every_feature_and_engine():
    text = PAGE.read_text(encoding="utf-8")
    header = next(line for line in text.splitlines() if line.startswith("| feature |"))
    assert header == "| feature | " + " | ".join(ENGINES) + " |"
    for feature, _ in coverage.FEATURES:
        assert f"| {feature} |" in text


@pytest.mark.parametrize(
    ("feature", "engine", "expected"),
    [
        # a tree with every joint kind is what the native engine is for
        ("tree joints of every kind", "native Kane", "native"),
        ("tree joints of every kind", "native MSD", "native"),
        # a sympy mass has no number to integrate
        ("sympy parameters", "dense Kane", "refused"),
        ("sympy parameters", "symbolic Kane", "yes"),
        # the tree's momentum states, moved by the loops' constraint forces
        ("closed loops", "dense MSD", "yes"),
        ("closed loops", "native MSD", "native"),
        # a controller is a Python function of a sampled state: no symbolic input for it
        ("controllers", "symbolic Kane", "n/a"),
        # the modal momenta hold the subtrees on the nodes (tests/test_flex_nodes_msd.py)
        ("joints at nodes of flexible bodies", "dense MSD", "yes"),
        ("joints at nodes of flexible bodies", "native MSD", "native"),
    ],
)
def test_cells_that_follow_from_scope(feature, engine, expected):
    assert run(feature, engine).split(":")[0] == expected


def test_energy_momentum_runs_one_spherical_joint_with_a_spring():
    """A single spherical joint at N has no quadratic joint invariant in the director
    formulation (its constraints are all linear); the scheme used to fail building them.
    Its motion agrees with RK4 at a ten times smaller step to the scheme's second order."""
    p = coverage.probe_spherical_spring()
    em = kd.simulate(p.model, p.state, 1.0, 0.005, method="energy-momentum")
    rk = kd.simulate(p.model, p.state, 1.0, 0.0005)
    assert np.abs(em.q[-1] - rk.q[-1]).max() < 1e-4
    assert np.abs(em.u[-1] - rk.u[-1]).max() < 1e-3


def test_a_name_shared_by_a_body_and_its_joint_reaches_both():
    """In the four-bar the link "crank" hangs on the joint "crank": mass, com and inertia
    are the body's; rates are the joint's."""
    model = kd.examples.four_bar()
    assert "crank" in model.layout.body_index and "crank" in model.layout.joint_index
    from kanedyn.simulation.montecarlo.dispersion import Target

    assert Target.of(model, "crank.mass").kind == "mass"
    rate = Target.of(model, "crank.rates.0")
    assert (rate.kind, rate.index) == ("u", (int(model.speeds("crank")[0]),))
