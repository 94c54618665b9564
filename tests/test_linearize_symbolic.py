"""``kd.linearize`` of symbolic problems (kanedyn.symbolic.linearize_numeric).

Oracles: the published eigenvalues of the Whipple bicycle's upright straight-ahead
rolling at the benchmark parameters, and its published mass matrix (Meijaard,
Papadopoulos, Ruina & Schwab, "Linearized dynamics equations for the balance and steer
of a bicycle: a benchmark and review", Proc. R. Soc. A 463 (2007) 1955-1982, section 5
and table 2); and, for the equations of a model tree, the compiled engine's exact
derivatives of the same model (a different derivation: a traced tape differentiated in
forward mode, against sympy's symbolic differentiation).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from sympy.physics.mechanics import dynamicsymbols

import kanedyn as kd
from kanedyn.errors import ModelError
from kanedyn.symbolic import KaneProblem, whipple_bicycle
from tests.symbolic.test_bicycle import M_PUB, TABLE2, V_CAPSIZE, V_WEAVE

# Meijaard et al. (2007), table 2 (v, capsize root, weave real and imaginary parts,
# castering root), the weave and capsize speeds, and the mass matrix of section 5, as
# typed in from the paper for the symbolic linearizer's own tests.
AT_REST = [-5.53094371765393, -3.13164324790656, 3.13164324790656, 5.53094371765393]


@pytest.fixture(scope="module")
def bike():
    return whipple_bicycle()


def upright(bike, v: float) -> dict:
    """Upright straight-ahead rolling at forward speed ``v``: numbers for every angle,
    the independent speeds (rear-wheel rate ``v / r_R``) and the parameters."""
    s = bike.symbols
    op = {s[k]: 0.0 for k in ("q1", "q2", "q4", "q5", "u2", "u5")}
    op[s["u3"]] = v / bike.benchmark.r_R
    op.update(bike.parameters)
    return op


def published(row) -> np.ndarray:
    _, capsize, weave_re, weave_im, caster = row
    weave = weave_re + 1j * weave_im
    return np.sort_complex(np.array([capsize, weave, np.conj(weave), caster]))


def lateral_eigenvalues(lin: kd.Linearization) -> np.ndarray:
    """The four eigenvalues of lean and steer: yaw and the rear-wheel speed each add a
    zero eigenvalue to the six states ``[q1, q2, q5, u2, u3, u5]``."""
    ev = lin.eigenvalues
    zero = np.abs(ev) < 1e-9
    assert zero.sum() == 2
    return np.sort_complex(ev[~zero])


def test_bicycle_record_and_eigenvalues_at_rest_and_5(bike):
    lin = kd.linearize(bike.problem, upright(bike, 0.0))
    assert isinstance(lin, kd.Linearization)
    assert lin.state_names == ("q1", "q2", "q5", "u2", "u3", "u5")
    assert lin.input_names == () and lin.B.shape == (6, 0)
    assert lin.A.shape == (6, 6) and lin.modes.shape == (6, 6)
    np.testing.assert_allclose(np.sort(lateral_eigenvalues(lin).real), AT_REST, atol=1e-10)
    # the complete operating point: the dependent pitch and speeds were solved
    assert lin.state[bike.symbols["q4"]] == 0.0 and lin.state[bike.symbols["u6"]] == 0.0

    lin = kd.linearize(bike.problem, upright(bike, 5.0))
    np.testing.assert_allclose(lateral_eigenvalues(lin), published(TABLE2[4]), atol=1e-10)
    np.testing.assert_allclose(lin.A @ lin.modes, lin.modes * lin.eigenvalues, atol=1e-9)
    assert lin.state[bike.symbols["u3"]] == pytest.approx(5.0 / 0.3, rel=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize("row", TABLE2, ids=[f"v={r[0]}" for r in TABLE2])
def test_bicycle_eigenvalues_table2(bike, row):
    lin = kd.linearize(bike.problem, upright(bike, float(row[0])))
    np.testing.assert_allclose(lateral_eigenvalues(lin), published(row), rtol=0, atol=1e-10)


@pytest.mark.slow
def test_bicycle_weave_and_capsize_speeds(bike):
    """At the published weave speed the weave pair crosses the imaginary axis (at
    ±3.43503384866144 i), at the capsize speed the capsize root crosses zero."""
    weave = lateral_eigenvalues(kd.linearize(bike.problem, upright(bike, V_WEAVE)))
    pair = weave[np.abs(weave.imag) > 1e-6]
    np.testing.assert_allclose(pair.real, 0.0, atol=1e-10)
    np.testing.assert_allclose(np.abs(pair.imag), 3.43503384866144, atol=1e-10)
    ev = kd.linearize(bike.problem, upright(bike, V_CAPSIZE)).eigenvalues
    size = np.sort(np.abs(ev))  # yaw and rear-wheel speed give 0, and now the capsize root
    assert size[2] < 1e-10 and size[3] > 0.1


def test_bicycle_steer_torque_column(bike):
    """A steer torque T between the rear frame and the fork enters the lean and steer
    rows as ``M⁻¹ [0, 1]`` (the published M), and no coordinate row."""
    T = dynamicsymbols("T")
    args = dict(bike.kane_args)
    s = bike.symbols
    fork = next(b for b in args["bodies"] if b.name == "BodyFork").frame
    frame = next(b for b in args["bodies"] if b.name == "BodyFrame").frame
    steer_axis = fork.x  # q5 turns the fork about Frame.x = Fork.x
    args["loads"] = [*args["loads"], (fork, T * steer_axis), (frame, -T * steer_axis)]
    problem = KaneProblem(**args)
    lin = kd.linearize(problem, upright(bike, 4.0), inputs=[T])
    assert lin.input_names == ("T",) and lin.B.shape == (6, 1)
    names = lin.state_names
    rows = [names.index("u2"), names.index("u5")]
    np.testing.assert_allclose(lin.B[rows, 0], np.linalg.solve(M_PUB, [0.0, 1.0]), atol=1e-11)
    np.testing.assert_allclose(lin.B[:3, 0], 0.0, atol=0)
    # the torque at its operating value 0 leaves A and the eigenvalues unchanged
    np.testing.assert_allclose(lateral_eigenvalues(lin), published(TABLE2[3]), rtol=0, atol=1e-10)
    assert s["q1"] in lin.state


def test_kane_equations_agree_with_the_model_linearization():
    """The sympy equations of a double pendulum, linearized symbolically, against the
    compiled engine's exact derivatives of the same model, away from equilibrium."""
    model = kd.examples.double_pendulum()
    shoulder = model.joints[0].name
    T = dynamicsymbols("T1")
    eom = kd.symbolic.kane(model, joint_torques={shoulder: [T]})
    q0, u0 = np.array([0.3, -0.7]), np.array([0.5, -1.1])
    op = dict(zip(eom.q, q0, strict=True)) | dict(zip(eom.u, u0, strict=True))
    got = kd.linearize(eom, op, inputs=[T])
    want = kd.linearize(model, kd.State(q0, u0), inputs=[shoulder])
    np.testing.assert_allclose(got.A, want.A, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got.B, want.B, rtol=1e-11, atol=1e-11)
    assert got.input_names == ("T1",)
    assert len(got.state_names) == 4


def test_symbolic_operating_point_errors(bike):
    op = upright(bike, 3.0)
    del op[bike.symbols["q2"]]
    with pytest.raises(ModelError, match="no value for q2"):
        kd.linearize(bike.problem, op)
    op = upright(bike, 3.0)
    del op[bike.symbols["g"]]
    with pytest.raises(ModelError, match="no value for g"):
        kd.linearize(bike.problem, op)
    with pytest.raises(ModelError, match="mapping"):
        kd.linearize(bike.problem, [0.0] * 6)
    with pytest.raises(ModelError, match="expected a kd.Model"):
        kd.linearize(object(), {})
    with pytest.raises(ModelError, match="kd.State"):
        kd.linearize(kd.examples.chain(1), {sm.Symbol("x"): 0.0})
