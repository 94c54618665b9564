"""Particles (bodies with zero inertia), numeric and symbolic, against closed forms.

* The spherical pendulum (polar angle θ from the downward vertical, azimuth φ):
  ``θ̈ = sin θ cos θ φ̇² - (g/l) sin θ``, ``φ̈ = -2 θ̇ φ̇ cos θ / sin θ``.
* A particle sliding on an arm that turns about a vertical axis (arm inertia J about the
  axis, particle at distance r): ``(J + m r²) θ̈ + 2 m r ṙ θ̇ = τ``, ``m (r̈ - r θ̇²) = F``.
* A joint with nothing to move is refused when the model is built, naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.symbolic import compare, kane, lagrange


def spherical_pendulum(m=0.7, l=1.3, g=9.81) -> kd.Model:
    """R_N_B = Rz(φ) Ry(θ); the bob at (0, 0, -l) in the body hangs at polar angle θ."""
    bob = kd.Body("bob", mass=m, inertia=np.zeros((3, 3)), com=(0, 0, -l))
    pivot = kd.Joint.gimbal("pivot", None, "bob", seq="321", dof=2)
    return kd.Model([bob], [pivot], gravity=(0, 0, -g))


def pendulum_closed_form(phi, theta, dphi, dtheta, l, g):
    ddtheta = sm.sin(theta) * sm.cos(theta) * dphi**2 - g / l * sm.sin(theta)
    ddphi = -2 * dtheta * dphi * sm.cos(theta) / sm.sin(theta)
    return ddphi, ddtheta


def test_spherical_pendulum_numeric_matches_closed_form():
    l, g = 1.3, 9.81
    model = spherical_pendulum(l=l, g=g)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = rng.uniform([-np.pi, 0.2], [np.pi, 2.9])
        u = rng.uniform(-2, 2, 2)
        acc = kd.forward_dynamics(model, kd.State(q, u))
        expected = [float(x) for x in pendulum_closed_form(*q, *u, l, g)]
        assert np.allclose(acc, expected, rtol=1e-12, atol=1e-12)


def test_spherical_pendulum_every_engine():
    """The compiled engine and the momentum-state (MSD) rates agree with the closed form."""
    l, g = 1.3, 9.81
    model = spherical_pendulum(l=l, g=g)
    q, u = np.array([0.4, 1.1]), np.array([0.7, -0.3])
    expected = [float(x) for x in pendulum_closed_form(*q, *u, l, g)]
    assert np.allclose(kd.compile_model(model).forward_dynamics(kd.State(q, u)), expected)
    traj = kd.simulate(model, kd.State(q, u), t_final=0.02, dt=0.001, formulation="msd")
    rate = (traj.u[1] - traj.u[0]) / (traj.t[1] - traj.t[0])
    assert np.allclose(rate, expected, atol=0.05)


def test_spherical_pendulum_symbolic_matches_closed_form():
    m, l, g = sm.symbols("m l g", positive=True)
    bob = kd.Body("bob", mass=m, inertia=0, com=(0, 0, -l))
    model = kd.Model(
        [bob], [kd.Joint.gimbal("pivot", None, "bob", seq="321", dof=2)], gravity=(0, 0, -g)
    )
    assert bob.is_particle
    eom = kane(model, simplify=True)
    (phi, theta), (dphi, dtheta) = list(eom.q), list(eom.u)
    acc = eom.mass_matrix.LUsolve(eom.forcing)
    for a, b in zip(acc, pendulum_closed_form(phi, theta, dphi, dtheta, l, g), strict=True):
        assert sm.simplify(a - b) == 0
    assert compare(eom, lagrange(model), time_budget=2.0).equivalent


def arm_with_bead(J=0.4, m=0.3):
    arm = kd.Body("arm", mass=1.0, inertia=kd.inertia_tensor(J / 2, J / 2, J))
    bead = kd.Body("bead", mass=m, inertia=0)
    joints = [
        kd.Joint.revolute("turn", None, "arm", axis=3),
        kd.Joint.prismatic("along", "arm", "bead", axis=1),
    ]
    return kd.Model([arm, bead], joints, gravity=(0, 0, -9.81))


def test_particle_on_a_rotating_arm_matches_closed_form():
    J, m = 0.4, 0.3
    model = arm_with_bead(J, m)
    rng = np.random.default_rng(2)
    for _ in range(5):
        theta, r = rng.uniform(-np.pi, np.pi), rng.uniform(-1.5, 1.5)
        w, rdot = rng.uniform(-2, 2, 2)
        tau, F = rng.uniform(-1, 1, 2)
        state = kd.State([theta, r], [w, rdot])
        loads = [kd.JointLoad("turn", [tau]), kd.JointLoad("along", [F])]
        acc = kd.forward_dynamics(model, state, loads)
        expected = [(tau - 2 * m * r * rdot * w) / (J + m * r**2), F / m + r * w**2]
        assert np.allclose(acc, expected, rtol=1e-12, atol=1e-12)


def test_particle_on_a_rotating_arm_symbolic():
    J, m, tau, F = sm.symbols("J m tau F", positive=True)
    arm = kd.Body("arm", mass=1, inertia=sm.diag(J / 2, J / 2, J))
    bead = kd.Body("bead", mass=m, inertia=sm.zeros(3, 3))
    joints = [
        kd.Joint.revolute("turn", None, "arm", axis=3),
        kd.Joint.prismatic("along", "arm", "bead", axis=1),
    ]
    model = kd.Model([arm, bead], joints)
    eom = kane(model, joint_torques={"turn": [tau], "along": [F]}, simplify=True)
    (w, rdot), r = list(eom.u), eom.q[1]
    assert sm.simplify(eom.mass_matrix - sm.diag(J + m * r**2, m)) == sm.zeros(2, 2)
    expected = sm.Matrix([tau - 2 * m * r * rdot * w, F + m * r * w**2])
    assert sm.simplify(eom.forcing - expected) == sm.zeros(2, 1)


@pytest.mark.parametrize(
    ("joint", "com", "name"),
    [
        (kd.Joint.spherical("ball", None, "bob"), (0, 0, -1.0), "ball"),  # spin about the rod
        (kd.Joint.revolute("hinge", None, "bob", axis=3), (0, 0, 0.5), "hinge"),  # on the axis
    ],
)
def test_joint_with_nothing_to_move_is_named(joint, com, name):
    bob = kd.Body("bob", mass=1.0, inertia=0, com=com)
    with pytest.raises(kd.ModelError, match=f"joint '{name}' has nothing to move"):
        kd.Model([bob], [joint])


def test_particle_chain_is_accepted_and_rigid_inertia_rules_stay():
    """Two particles on a double pendulum: the mass matrix is positive definite."""
    a = kd.Body("a", mass=1.0, inertia=0, com=(1, 0, 0))
    b = kd.Body("b", mass=1.0, inertia=0, com=(1, 0, 0))
    joints = [
        kd.Joint.revolute("j0", None, "a", axis=3),
        kd.Joint.revolute("j1", "a", "b", axis=3, inner_point=(1, 0, 0)),
    ]
    model = kd.Model([a, b], joints)
    M = kd.mass_matrix(model, kd.State([0.2, 0.7], [0, 0]))
    c = np.cos(0.7)
    assert np.allclose(M, [[3 + 2 * c, 1 + c], [1 + c, 1]])  # m = l = 1
    with pytest.raises(kd.ModelError, match="positive definite.*particle"):
        kd.Body("rod", mass=1.0, inertia=np.diag([0.0, 1.0, 1.0]))


def test_toml_particles(tmp_path):
    text = """
[model]
gravity_m_s2 = [0, 0, -9.81]

[[bodies]]
name = "arm"
mass_kg = 1.0
inertia_kg_m2 = { Ixx = 0.2, Iyy = 0.2, Izz = 0.4 }

[[bodies]]
name = "tip"
mass_kg = 0.2
inertia_kg_m2 = 0
com_m = [0.5, 0, 0]

[[particles]]
name = "bead"
mass_kg = 0.3

[[joints]]
name = "turn"
inner = "N"
outer = "arm"
kind = "revolute"
axis = 3

[[joints]]
name = "fix"
inner = "arm"
outer = "tip"
kind = "weld"

[[joints]]
name = "along"
inner = "arm"
outer = "bead"
kind = "prismatic"
axis = 1
"""
    path = tmp_path / "bead.toml"
    path.write_text(text)
    model = kd.io.read_toml(path)
    assert [b.is_particle for b in model.bodies] == [False, True, True]
    again = tmp_path / "again.toml"
    kd.io.write_toml(model, again)
    model2 = kd.io.read_toml(again)
    assert [b.is_particle for b in model2.bodies] == [False, True, True]
    state = kd.State([0.3, 0.4], [1.0, 0.5])
    assert np.allclose(kd.forward_dynamics(model, state), kd.forward_dynamics(model2, state))
    path.write_text(text.replace("inertia_kg_m2 = 0", "inertia_kg_m2 = 2"))
    with pytest.raises(
        kd.FileFormatError, match=r"line \d+: inertia_kg_m2 in \[\[bodies\]\] #2 .*must be 0"
    ):
        kd.io.read_toml(path)


URDF = """<robot name="r">
  <link name="world"/>
  <link name="arm"><inertial><mass value="1.0"/>
    <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="bob"><inertial><origin xyz="0.5 0 0"/><mass value="0.3"/>
    <inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j0" type="revolute"><parent link="world"/><child link="arm"/>
    <axis xyz="0 0 1"/></joint>
  <joint name="j1" type="revolute"><parent link="arm"/><child link="bob"/>
    <origin xyz="1 0 0"/><axis xyz="0 0 1"/></joint>
</robot>
"""


def test_urdf_link_with_zero_inertia_is_a_particle(tmp_path):
    path = tmp_path / "bob.urdf"
    path.write_text(URDF)
    model = kd.io.read_urdf(path)
    assert [b.is_particle for b in model.bodies] == [False, True]
    # the bob's mass matrix entry about the elbow is m r² (no rotational inertia)
    M = kd.mass_matrix(model, kd.State([0.2, 0.9], [0.0, 0.0]))
    assert np.isclose(M[1, 1], 0.3 * 0.5**2)
