"""KaneProblem(u_auxiliary=...) against sympy's KanesMethod and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sm
from sympy.physics.mechanics import (
    KanesMethod,
    Particle,
    Point,
    ReferenceFrame,
    RigidBody,
    dynamicsymbols,
    inertia,
)

import kanedyn as kd
from kanedyn.symbolic import KaneProblem, kane

q, u, u1, u2 = dynamicsymbols("q u ua1 ua2")
m, l, g, Ixx, Iyy, Izz, Ixz = sm.symbols("m l g I_xx I_yy I_zz I_xz", positive=True)
Rx, Ry, Tx, Ty = sm.symbols("R_x R_y T_x T_y")


def particle_pendulum():
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", (q, N.z))
    A.set_ang_vel(N, u * N.z)
    O = Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", l * A.x)
    P.set_vel(N, u * l * A.y + u1 * A.x)  # u1: leaving the circle along the rod
    return N, [Particle("bob", P, m)], [(P, m * g * N.x - Rx * A.x)]


def test_particle_pendulum_tension_closed_form():
    N, bodies, loads = particle_pendulum()
    kp = KaneProblem(N, [q], [u], [q.diff() - u], bodies=bodies, loads=loads, u_auxiliary=[u1])
    (tension,) = sm.solve(kp.auxiliary_eqs[0], Rx)
    assert sm.simplify(tension - (m * g * sm.cos(q) + m * l * u**2)) == 0
    # the auxiliary speed does not change the equations of motion
    assert sm.simplify(kp.forcing[0] / kp.mass_matrix[0] + g * sm.sin(q) / l) == 0


def rigid_pendulum():
    """A rod swinging about N.z through O, given two auxiliary speeds at O (in A.x, A.y)
    and an out-of-plane rotation speed, with the reactions R_x, R_y, T_x, T_y."""
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", (q, N.z))
    A.set_ang_vel(N, u * N.z + u2 * A.x)
    O = Point("O")
    O.set_vel(N, u1 * A.y)
    C = O.locatenew("C", l * A.x)
    C.v2pt_theory(O, N, A)
    rod = RigidBody("rod", C, A, m, (inertia(A, Ixx, Iyy, Izz, 0, 0, Ixz), C))
    loads = [(C, m * g * N.x), (O, Rx * A.x + Ry * A.y), (A, Tx * A.x + Ty * A.y)]
    return N, [rod], loads


def test_rigid_pendulum_matches_kanes_method():
    N, bodies, loads = rigid_pendulum()
    kw = {"bodies": bodies, "loads": loads, "u_auxiliary": [u1, u2]}
    kp = KaneProblem(N, [q], [u], [q.diff() - u], **kw)
    km = KanesMethod(N, [q], [u], kd_eqs=[q.diff() - u], u_auxiliary=[u1, u2])
    km.kanes_equations(bodies, loads)
    assert (kp.auxiliary_eqs - km.auxiliary_eqs).applyfunc(sm.simplify) == sm.zeros(2, 1)
    assert sm.simplify(kp.mass_matrix[0] - km.mass_matrix[0]) == 0


def test_rigid_pendulum_reaction_equals_model_reactions():
    """The same pendulum as a kanedyn model: its reaction (auxiliary speeds built in by
    kane(..., reactions=...)) solves the KaneProblem's auxiliary equations."""
    N, bodies, loads = rigid_pendulum()
    kp = KaneProblem(N, [q], [u], [q.diff() - u], bodies=bodies, loads=loads, u_auxiliary=[u1, u2])
    vals = {m: 1.3, l: 0.8, g: 9.81, Ixx: 0.1, Iyy: 0.3, Izz: 0.32, Ixz: 0.04}
    I_B = np.array([[0.1, 0, 0.04], [0, 0.3, 0], [0.04, 0, 0.32]])
    body = kd.Body("rod", mass=1.3, inertia=I_B, com=(0.8, 0, 0))
    model = kd.Model([body], [kd.Joint.revolute("pin", None, "rod", axis=3)], gravity=(9.81, 0, 0))
    f = kane(model, reactions=["pin"]).lambdify_reactions()
    for qv, uv in [(0.4, 1.1), (-1.9, -0.6)]:
        F, T = f([qv], [uv])["pin"]
        acc = kd.forward_dynamics(model, kd.State([qv], [uv]))[0]
        eqs = kp.auxiliary_eqs.xreplace({u.diff(): acc}).xreplace({q: qv, u: uv})
        eqs = eqs.xreplace({Rx: F[0], Ry: F[1], Tx: T[0], Ty: T[1]}).xreplace(vals)
        assert np.allclose(np.array(eqs.evalf(), dtype=float), 0.0, atol=1e-10)


def test_bad_auxiliary_speeds():
    N, bodies, loads = particle_pendulum()
    with pytest.raises(kd.ModelError, match="distinct"):
        KaneProblem(N, [q], [u], [q.diff() - u], bodies=bodies, u_auxiliary=[u])
    with pytest.raises(kd.ModelError, match="dynamic symbols"):
        KaneProblem(N, [q], [u], [q.diff() - u], bodies=bodies, u_auxiliary=[sm.Symbol("x")])
