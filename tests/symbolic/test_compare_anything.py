"""compare() with derivations in the user's own symbols: sympy KanesMethod and
LagrangesMethod objects, hand results as tuples, a `symbols` mapping or structural
pairing, and a change of speeds."""

from __future__ import annotations

import pytest
import sympy as sm
from sympy.physics.mechanics import (
    KanesMethod,
    LagrangesMethod,
    Lagrangian,
    Point,
    ReferenceFrame,
    RigidBody,
    dynamicsymbols,
    inertia,
)

import kanedyn as kd
from kanedyn.symbolic import compare, kane

m1, m2, l1, lc1, lc2, I1, I2, g = sm.symbols("m1 m2 l1 lc1 lc2 I1 I2 g", positive=True)


@pytest.fixture(scope="module")
def eom():
    b1 = kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(lc1, 0, 0))
    b2 = kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(lc2, 0, 0))
    j1 = kd.Joint.revolute("j1", None, "link1", axis=3)
    j2 = kd.Joint.revolute("j2", "link1", "link2", axis=3, inner_point=(l1, 0, 0))
    return kane(kd.Model([b1, b2], [j1, j2], gravity=(0, -g, 0)))


# the user's own names
th1, th2, w1, w2 = sm.symbols("theta1 theta2 omega1 omega2")
mA, mB, L, a, b, JA, JB, grav = sm.symbols("m_A m_B L a b J_A J_B g_0", positive=True)


def by_hand(flip: bool = False):
    """The seed's 2-DOF arm (eqs. 2-7 to 2-11) typed by hand, in the user's names."""
    H11 = JA + JB + mA * a**2 + mB * (L**2 + b**2 + 2 * L * b * sm.cos(th2))
    H12 = JB + mB * (b**2 + L * b * sm.cos(th2))
    H22 = JB + mB * b**2
    h = mB * L * b * sm.sin(th2)
    G1 = (mA * a + mB * L) * grav * sm.cos(th1) + mB * b * grav * sm.cos(th1 + th2)
    G2 = mB * b * grav * sm.cos(th1 + th2)
    f = sm.Matrix([h * (2 * w1 * w2 + w2**2) - G1, (1 if flip else -1) * h * w1**2 - G2])
    return sm.Matrix([[H11, H12], [H12, H22]]), f, [th1, th2], [w1, w2]


def mapping(eom):
    (q1, q2), (u1, u2) = eom.q, eom.u
    return {th1: q1, th2: q2, w1: u1, w2: u2, mA: m1, mB: m2, L: l1, a: lc1, b: lc2,
            JA: I1, JB: I2, grav: g}  # fmt: skip


def test_correct_hand_result_in_other_symbols_is_equivalent(eom):
    report = compare(eom, by_hand(), symbols=mapping(eom))
    assert report.equivalent and report.proven, str(report)


def test_flipped_sign_is_reported_at_its_entry(eom):
    report = compare(eom, by_hand(flip=True), symbols=mapping(eom))
    assert not report.equivalent
    assert [e.name for e in report.differing] == ["forcing[1]"]
    (bad,) = report.differing
    q2, u1 = eom.q[1], eom.u[0]
    # ours - theirs = (-h u1²) - (h u1²), in our symbols
    assert sm.simplify(bad.difference + 2 * m2 * l1 * lc2 * sm.sin(q2) * u1**2) == 0
    assert bad.numeric_error > 1e-3


def test_structural_pairing_of_names(eom):
    """Coordinates and speeds by position; three renamed parameters by structure."""
    M, f, q, u = by_hand()
    rename = {JA: I1, JB: I2, L: l1, a: lc1, b: lc2}
    report = compare(eom, (M.xreplace(rename), f.xreplace(rename), q, u))
    assert report.equivalent, str(report)
    text = " ".join(report.notes)
    assert "paired by position" in text and "m_A = m1" in text and "g_0 = g" in text
    x, y = sm.symbols("x y", positive=True)
    with pytest.raises(kd.ModelError, match="unambiguously"):
        compare(
            ([[x + y]], [0], [th1], [w1]),
            ([[a + b]], [0], [th1], [w1]),
        )


ORIGIN = Point("O")


def sympy_arm(absolute_speed: bool, rates: bool = False):
    """The same arm with sympy.physics.mechanics, in the user's dynamic symbols; with
    ``absolute_speed`` the second speed is link 2's absolute rate (a change of speeds);
    with ``rates`` the frames keep their angular velocities in q' (for Lagrange)."""
    q1, q2, u1, u2 = dynamicsymbols("phi1 phi2 s1 s2")
    N = ReferenceFrame("N")
    A = N.orientnew("A", "Axis", (q1, N.z))
    B = A.orientnew("B", "Axis", (q2, A.z))
    O = ORIGIN
    O.set_vel(N, 0)
    if rates:
        kd_eqs = [q1.diff() - u1, q2.diff() - u2]
    elif absolute_speed:
        A.set_ang_vel(N, u1 * N.z)
        B.set_ang_vel(N, u2 * N.z)
        kd_eqs = [q1.diff() - u1, q2.diff() - (u2 - u1)]
    else:
        A.set_ang_vel(N, u1 * N.z)
        B.set_ang_vel(A, u2 * N.z)
        kd_eqs = [q1.diff() - u1, q2.diff() - u2]
    P = O.locatenew("P", l1 * A.x)
    P.v2pt_theory(O, N, A)
    C1 = O.locatenew("C1", lc1 * A.x)
    C1.v2pt_theory(O, N, A)
    C2 = P.locatenew("C2", lc2 * B.x)
    C2.v2pt_theory(P, N, B)
    bodies = [
        RigidBody("r1", C1, A, m1, (inertia(A, I1, I1, I1), C1)),
        RigidBody("r2", C2, B, m2, (inertia(B, I2, I2, I2), C2)),
    ]
    loads = [(C1, -m1 * g * N.y), (C2, -m2 * g * N.y)]
    km = KanesMethod(N, [q1, q2], [u1, u2], kd_eqs=kd_eqs)
    km.kanes_equations(bodies, loads)
    return km, (q1, q2), bodies, loads


def test_kanes_method_and_lagranges_method_in_their_symbols(eom):
    km, (q1, q2), bodies, _ = sympy_arm(absolute_speed=False)
    (a1, a2) = eom.q
    report = compare(eom, km, symbols={q1: a1, q2: a2})
    assert report.equivalent and report.proven, str(report)
    km, (q1, q2), bodies, _ = sympy_arm(absolute_speed=False, rates=True)
    N = km._inertial
    for body in bodies:
        body.potential_energy = body.mass * g * body.masscenter.pos_from(ORIGIN).dot(N.y)
    lm = LagrangesMethod(Lagrangian(N, *bodies), [q1, q2])
    lm.form_lagranges_equations()
    report = compare(eom, lm, symbols={q1: a1, q2: a2})
    assert report.equivalent and report.proven, str(report)


def test_change_of_speeds_is_detected(eom):
    km, (q1, q2), _, _ = sympy_arm(absolute_speed=True)
    (a1, a2) = eom.q
    report = compare(eom, km, symbols={q1: a1, q2: a2})
    assert report.equivalent, str(report)
    assert any("speeds differ" in n and "W = [[1, 0], [1, 1]]" in n for n in report.notes)
    assert "speeds differ" in str(report)
