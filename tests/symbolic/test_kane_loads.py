"""Applied loads in kanedyn.symbolic.kane, against independent oracles.

* Lagrange (kd.symbolic.lagrange, Jacobians of the application points) with the same
  loads, through kd.symbolic.compare.
* The numeric engine (kd.forward_dynamics with kd.JointLoad, kd.Force, kd.Torque) at
  random states.
* sympy.physics.mechanics KanesMethod on the same model and loads (tests/sympy_oracle.py).
* linearize: B from the inputs against finite differences of the numeric engine.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from sympy.physics.mechanics import dynamicsymbols

import kanedyn as kd
from kanedyn.symbolic import compare, kane, lagrange, linearize
from tests.sympy_oracle import build, random_state


def arm(damping: float = 0.2, slide: bool = True) -> kd.Model:
    """A spatial 4-DOF arm: a 2-DOF shoulder gimbal, an elbow hinge and a slider (or
    without the slider and its tip, 3-DOF)."""
    upper = kd.Body("upper", mass=2.0, inertia=kd.inertia_tensor(0.1, 0.3, 0.35), com=(0.5, 0, 0))
    fore = kd.Body("fore", mass=1.5, inertia=kd.inertia_tensor(0.05, 0.2, 0.22), com=(0.4, 0.05, 0))
    tip = kd.Body("tip", mass=0.5, inertia=kd.inertia_tensor(0.01, 0.01, 0.015))
    joints = [
        kd.Joint.gimbal("shoulder", None, "upper", seq="312", dof=2, damping=damping),
        kd.Joint.revolute("elbow", "upper", "fore", axis=2, inner_point=(1.0, 0, 0), stiffness=3.0),
        kd.Joint.prismatic("slide", "fore", "tip", axis=1, inner_point=(0.8, 0, 0)),
    ]
    if not slide:
        return kd.Model([upper, fore], joints[:2], gravity=(0, 0, -9.81))
    return kd.Model([upper, fore, tip], joints, gravity=(0, 0, -9.81))


F_AT = ((0.3, -0.7, 1.1), (0.9, 0.2, -0.1))  # force (N), point in fore's axes
T_FORE = (0.4, -0.2, 0.25)


def numeric_loads(tau: np.ndarray) -> list:
    return [
        kd.JointLoad("shoulder", tau[:2]),
        kd.JointLoad("elbow", tau[2:3]),
        kd.JointLoad("slide", tau[3:]),
        kd.Force("fore", F_AT[0], point=F_AT[1]),
        kd.Torque("fore", T_FORE),
    ]


def symbolic_loads(tau) -> dict:
    return {
        "joint_torques": {"shoulder": tau[:2], "elbow": tau[2:3], "slide": tau[3:]},
        "body_forces": {"fore": F_AT},
        "body_torques": {"fore": T_FORE},
    }


T = dynamicsymbols("T1:5")


def test_kane_equals_lagrange_with_the_same_loads():
    model = arm(slide=False)
    k, fx, fz, c = sm.symbols("k f_x f_z c")
    loads = symbolic_loads(T)
    loads["joint_torques"].pop("slide")
    loads["body_forces"] = {"fore": ((fx, k, fz), (c, 0, 0))}
    eom = kane(model, **loads)
    lag = lagrange(model, **loads)
    report = compare(eom, lag, time_budget=1.0)
    assert report.equivalent, str(report)
    assert set(eom.inputs) == set(T[:3])
    assert {k, fx, fz, c} <= set(eom.parameters) and set(T[:3]) <= set(eom.parameters)
    # a load missing on one side is found, at the rows it acts on
    lag2 = lagrange(model, **{**loads, "body_torques": {"fore": (0, 0, 0)}})
    report2 = compare(eom, lag2, time_budget=0.5)
    assert not report2.equivalent
    assert {e.name for e in report2.differing if e.name.startswith("forcing")}


def test_kane_with_loads_equals_numeric_engine():
    model = arm()
    eom = kane(model, **symbolic_loads(T))
    rng = np.random.default_rng(3)
    for _ in range(4):
        st = random_state(model, rng)
        tau = rng.uniform(-2, 2, 4)
        acc = eom.rhs(st.q, st.u, dict(zip(T, tau, strict=True)))
        expected = kd.forward_dynamics(model, st, numeric_loads(tau))
        assert np.allclose(acc, expected, rtol=1e-10, atol=1e-10)


def test_loads_in_body_components_and_numbers():
    """Numbers become exact; a force given in body axes is R_N_B F (the test rotates it)."""
    model = arm()
    rng = np.random.default_rng(8)
    st = random_state(model, rng)
    R = kd.kinematics(model, st).R_N_B[1]
    F_body = np.array([0.5, 0.1, -0.4])
    eom = kane(model, body_forces={"fore": (sm.Matrix(R @ F_body), (0.2, 0.1, 0))})
    loads = [kd.Force("fore", F_body, point=(0.2, 0.1, 0), frame="body")]
    assert np.allclose(eom.rhs(st.q, st.u), kd.forward_dynamics(model, st, loads), atol=1e-10)


def test_kane_with_loads_equals_sympy_kanes_method():
    model = arm(damping=0.0)  # the oracle has dampers on 1-DOF joints only
    tau = np.array([0.3, -0.5, 0.8, 1.2])
    rec = numeric_loads(tau)
    # the oracle realizes joint efforts as torque pairs along one axis: not the 2-DOF shoulder
    rec = [r for r in rec if not (isinstance(r, kd.JointLoad) and r.joint == "shoulder")]
    rec.append(kd.Force("tip", (0.1, 0.2, 0.3), point=(0.0, 0.1, 0.0), frame="body"))
    oracle, _, _ = build(model, rec)
    loads = symbolic_loads([0, 0, *tau[2:]])
    eom = kane(model, **loads)
    f = eom.lambdify()
    rng = np.random.default_rng(5)
    for _ in range(3):
        st = random_state(model, rng)
        R_tip = kd.kinematics(model, st).R_N_B[2]
        eom_t = kane(
            model,
            **{**loads, "body_forces": {**loads["body_forces"], "tip": (
                sm.Matrix(R_tip @ np.array([0.1, 0.2, 0.3])), (0.0, 0.1, 0.0))}},
        )  # fmt: skip
        M, F = eom_t.lambdify()(st.q, st.u)
        Mo, Fo = oracle(st.q, st.u)
        assert np.allclose(M, Mo, atol=1e-10)
        assert np.allclose(F, Fo, atol=1e-10)
        assert np.allclose(f(st.q, st.u)[0], Mo, atol=1e-10)


def test_linearize_inputs_are_the_columns_of_B():
    """A and B against central differences of the numeric engine."""
    model = arm(slide=False)
    loads = symbolic_loads(T[:3])
    loads["joint_torques"].pop("slide")
    eom = kane(model, **loads)
    rng = np.random.default_rng(2)
    q0, u0 = rng.uniform(-0.5, 0.5, model.nq), rng.uniform(-0.5, 0.5, model.n)
    tau0 = rng.uniform(-1, 1, 3)
    op = {**dict(zip(eom.q, q0, strict=True)), **dict(zip(eom.u, u0, strict=True))}
    op.update(dict(zip(T[:3], tau0, strict=True)))
    lin = linearize(eom, op)
    assert lin.inputs == tuple(T[:3]) and lin.state == (*eom.q, *eom.u)
    A = np.array(lin.A.evalf(), dtype=float)
    B = np.array(lin.B.evalf(), dtype=float)

    def xdot(x, tau):
        st = kd.State(x[: model.nq], x[model.nq :])
        loads = [r for r in numeric_loads(np.r_[tau, 0.0]) if getattr(r, "joint", "") != "slide"]
        return np.r_[st.u[: model.nq], kd.forward_dynamics(model, st, loads)]

    x0, h = np.r_[q0, u0], 1e-6
    A_fd = np.column_stack(
        [(xdot(x0 + h * e, tau0) - xdot(x0 - h * e, tau0)) / (2 * h) for e in np.eye(len(x0))]
    )
    B_fd = np.column_stack(
        [(xdot(x0, tau0 + h * e) - xdot(x0, tau0 - h * e)) / (2 * h) for e in np.eye(3)]
    )
    assert np.allclose(A, A_fd, atol=1e-6)
    assert np.allclose(B, B_fd, atol=1e-6)


def test_linearize_pendulum_with_torque_closed_form():
    m, l, g = sm.symbols("m l g", positive=True)
    tau = dynamicsymbols("tau")
    bob = kd.Body("bob", mass=m, inertia=sm.zeros(3, 3) + sm.eye(3) * m * l**2 / 100, com=(l, 0, 0))
    model = kd.Model([bob], [kd.Joint.revolute("pin", None, "bob", axis=3)], gravity=(0, -g, 0))
    eom = kane(model, joint_torques={"pin": [tau]})
    q, u = eom.q[0], eom.u[0]
    lin = linearize(eom, {q: -sm.pi / 2, u: 0}, check_equilibrium=True)
    J = m * l**2 * sm.Rational(101, 100)
    assert sm.simplify(lin.A - sm.Matrix([[0, 1], [-m * g * l / J, 0]])) == sm.zeros(2, 2)
    assert sm.simplify(lin.B - sm.Matrix([0, 1 / J])) == sm.zeros(2, 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"joint_torques": {"knee": [1]}}, "joint_torques\\['knee'\\].*unknown joint"),
        ({"joint_torques": {"shoulder": [1]}}, "shoulder.*needs 2 values"),
        ({"body_forces": {"hand": (1, 2, 3)}}, "body_forces\\['hand'\\].*unknown body"),
        ({"body_forces": {"fore": ((1, 2), (0, 0, 0))}}, "fore.*force needs 3 values"),
        ({"body_torques": {"fore": (1, 2, 3, 4)}}, "torque needs 3 values"),
    ],
)
def test_bad_loads_are_named(kwargs, match):
    for fn in (kane, lagrange):
        with pytest.raises(kd.ModelError, match=match):
            fn(arm(), **kwargs)
