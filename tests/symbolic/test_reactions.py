"""Joint reactions from auxiliary speeds (kd.symbolic.kane(..., reactions=...)).

Oracles: the numeric kd.constraint_forces (itself verified against Newton–Euler) at
random states of trees with every joint kind, and a Newton–Euler free-body balance of a
pendulum with products of inertia written out in this file.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.symbolic import kane
from tests.sympy_oracle import random_state


def tree() -> kd.Model:
    """A hub on a 2-DOF gimbal, a hinged arm, a slider on it and a ball-jointed tip,
    with a cylindrical joint (slide + hinge) and a weld."""
    I = kd.inertia_tensor
    bodies = [
        kd.Body("hub", mass=3.0, inertia=I(0.5, 0.6, 0.7, 0.02, 0.01, 0.03), com=(0.1, 0, 0.2)),
        kd.Body("arm", mass=1.2, inertia=I(0.05, 0.2, 0.22), com=(0.4, 0.05, 0)),
        kd.Body("slider", mass=0.6, inertia=I(0.01, 0.02, 0.02), com=(0.0, 0.1, 0)),
        kd.Body("tip", mass=0.4, inertia=I(0.01, 0.012, 0.015), com=(0.1, 0, 0.05)),
        kd.Body("cyl", mass=0.5, inertia=I(0.02, 0.02, 0.01), com=(0, 0, 0.1)),
        kd.Body("plate", mass=0.3, inertia=I(0.01, 0.01, 0.02), com=(0.05, 0, 0)),
    ]
    joints = [
        kd.Joint.gimbal("g", None, "hub", seq="213", dof=2, damping=0.3, stiffness=1.0),
        kd.Joint.revolute("h", "hub", "arm", axis=2, inner_point=(0.5, 0, 0), damping=0.1),
        kd.Joint.prismatic("p", "arm", "slider", axis=1, inner_point=(0.3, 0, 0), stiffness=2.0),
        kd.Joint.spherical("s", "slider", "tip", inner_point=(0, 0.2, 0), damping=0.05),
        kd.Joint(
            "c",
            "hub",
            "cyl",
            rot_dof=1,
            rot_seq="312",
            trn_dof=1,
            trn_seq="312",
            inner_point=(0, 0.3, 0.1),
            inner_rotation=kd.euler_to_dcm("123", (0.3, -0.2, 0.5)),
        ),  # fmt: skip
        kd.Joint.weld("w", "arm", "plate", inner_point=(0.6, 0, 0)),
    ]
    return kd.Model(bodies, joints, gravity=(0.3, -0.5, -9.81))


NAMES = ("g", "h", "p", "s", "c", "w")


def test_reactions_equal_numeric_constraint_forces():
    model = tree()
    F_tip, T_arm = (0.3, -0.4, 0.8), (0.1, 0.2, -0.3)
    eom = kane(
        model,
        joint_torques={"h": [0.7], "g": [0.2, -0.1], "c": [0.3, 0.4]},
        body_forces={"tip": (F_tip, (0.05, 0.1, 0))},
        body_torques={"arm": T_arm},
        reactions=list(NAMES),
    )
    loads = [
        kd.JointLoad("h", [0.7]),
        kd.JointLoad("g", [0.2, -0.1]),
        kd.JointLoad("c", [0.3, 0.4]),
        kd.Force("tip", F_tip, point=(0.05, 0.1, 0)),
        kd.Torque("arm", T_arm),
    ]
    g = eom.lambdify_reactions()
    rng = np.random.default_rng(4)
    for _ in range(3):
        st = random_state(model, rng)
        got = g(st.q, st.u)
        cf = kd.constraint_forces(model, st, loads)
        R_N_Go = kd.kinematics(model, st).R_N_Go
        for name in NAMES:
            k = model.joint_index(name)
            F, T = got[name]
            scale = 1 + np.abs(cf.force).max() + np.abs(cf.torque).max()
            assert np.allclose(R_N_Go[k] @ F, cf.constraint_force[k], atol=1e-10 * scale), name
            assert np.allclose(R_N_Go[k] @ T, cf.constraint_torque[k], atol=1e-10 * scale), name
    # the spherical joint transmits no torque beyond its damper; the reaction has none
    assert eom.compact_reactions["s"][1] == sm.zeros(3, 1)


def test_pendulum_reaction_against_a_newton_euler_balance():
    """A pendulum about N's z axis with products of inertia: the pin's force and torque
    are m a - m g and I α + ω × I ω + r × (m a - m g) (about the pin, Go = body axes)."""
    m, l, g = 1.3, 0.8, 9.81
    I_B = kd.inertia_tensor(0.1, 0.3, 0.32, 0.0, 0.04, 0.02)  # Ixz, Iyz products
    body = kd.Body("rod", mass=m, inertia=I_B, com=(l, 0, 0))
    model = kd.Model([body], [kd.Joint.revolute("pin", None, "rod", axis=3)], gravity=(0, -g, 0))
    eom = kane(model, reactions=["pin"])
    f = eom.lambdify_reactions()
    for th, w in [(0.3, 1.2), (-2.0, -0.4), (1.4, 2.5)]:
        F, T = f([th], [w])["pin"]
        c, s = np.cos(th), np.sin(th)
        R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
        I_N = R @ I_B @ R.T
        z = np.array([0, 0, 1.0])
        r = l * np.array([c, s, 0])
        gravity = np.array([0, -g, 0])
        # the z row of the balance about the pin gives the angular acceleration
        J = I_N[2, 2] + m * l**2
        wd = np.cross(r, m * gravity)[2] / J
        a = np.cross(wd * z, r) + np.cross(w * z, np.cross(w * z, r))
        F_N = m * a - m * gravity
        T_N = I_N @ (wd * z) + np.cross(w * z, I_N @ (w * z)) + np.cross(r, F_N)
        assert abs(T_N[2]) < 1e-12  # the balance closes: the pin transmits no z torque
        assert np.allclose(F, R.T @ F_N, atol=1e-12)
        assert np.allclose(T, R.T @ T_N, atol=1e-12)
    # the explicit reaction is a function of q, u and u_dot
    Fx, Ty = eom.reactions["pin"][0][0], eom.reactions["pin"][1][1]
    assert set(eom.u_dot) <= (Fx.free_symbols | Ty.free_symbols)


def test_explicit_directions():
    model = tree()
    eom = kane(model, reactions=[("h", ["Fx", "Fz", "Tx"]), ("w", "Tz")])
    F, T = eom.compact_reactions["h"]
    assert F[1] is sm.nan and T[1] is sm.nan and T[2] is sm.nan
    full = kane(model, reactions=["h", "w"]).lambdify_reactions()
    part = eom.lambdify_reactions()
    st = random_state(model, np.random.default_rng(0))
    Fh, Th = full(st.q, st.u)["h"]
    Fp, Tp = part(st.q, st.u)["h"]
    assert np.allclose(Fp[[0, 2]], Fh[[0, 2]]) and np.isclose(Tp[0], Th[0])
    assert np.isclose(part(st.q, st.u)["w"][1][2], full(st.q, st.u)["w"][1][2])


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (("h", ["Ty"]), "Ty .* not a constrained direction"),  # the hinge axis
        (("p", ["Fx"]), "Fx .* not a constrained direction"),  # the slide axis
        (("s", ["Tx"]), "not a constrained direction"),
        (("h", ["Mx"]), "unknown directions \\['Mx'\\]"),
        ("nope", "unknown joint 'nope'"),
        (("h", "Fx"), None),
    ],
)
def test_bad_reaction_requests(spec, match):
    if match is None:  # asked twice
        with pytest.raises(kd.ModelError, match="asked for twice"):
            kane(tree(), reactions=["h", spec])
        return
    with pytest.raises(kd.ModelError, match=match):
        kane(tree(), reactions=[spec])
