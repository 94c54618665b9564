"""Central gravity (kd.CentralGravity): the record, the body term against finite
differences of its potential, every engine against the dense one, energy and angular
momentum about the centre, and the round-off at orbital distances.

Oracles: central differences of the potential (force and torque), the power balance
``Fr · u = -dV/dt`` along the motion, the dense Kane sums (CRBA) against the recursion
(ABA, compiled) and the dense MSD rates against the compiled ones, and the same field
seen from a shifted ``center`` (the same physics with small coordinates).
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn import joints
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import applied_loads
from kanedyn.dynamics.msd import rates as msd_rates
from kanedyn.errors import ModelError
from kanedyn.model.plan import params_of
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.arithmetic import NUMPY
from tests.strategies import random_state, tree

# a small field (lengths of tens of metres) where the gradient terms are of order one
SMALL = kd.CentralGravity(mu=2.0e4, J2=0.05, radius=5.0, center=(-14.0, 9.0, -6.0))


def _small_tree(seed: int, springs: bool = True) -> kd.Model:
    model = tree([0, 1, 0], ["free", "gimbal3", "slider2", "hinge"], ["123", "313", "123", "231"],
                 seed=seed, springs=springs)  # fmt: skip
    return attrs.evolve(model, gravity=SMALL)


# --------------------------------------------------------------------------- record
def test_record_defaults_and_earth_constants():
    g = kd.CentralGravity()
    assert (g.mu, g.J2, g.radius) == (3.986004418e14, 0.0, 6378137.0)
    assert kd.EARTH_MU == 3.986004418e14 and kd.EARTH_RADIUS == 6378137.0
    assert np.array_equal(g.center, np.zeros(3))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mu": -1.0}, "mu .* must be positive"),
        ({"mu": float("inf")}, "mu .* must be finite"),
        ({"radius": 0.0}, "radius .* must be positive"),
        ({"J2": float("nan")}, "J2: must be finite"),
        ({"center": (0.0, 1.0)}, "center: expected 3 numbers"),
        ({"mu": "earth"}, "mu .* expected a number"),
    ],
)
def test_record_rejects_bad_values(kwargs, message):
    with pytest.raises(ModelError, match=message):
        kd.CentralGravity(**kwargs)


def test_model_params_and_batch_carry_the_field():
    model = _small_tree(1)
    assert model.central_gravity is SMALL and not np.any(model.uniform_gravity)
    pa = params_of(model)
    assert (float(pa.mu), float(pa.J2), float(pa.radius)) == (2.0e4, 0.05, 5.0)
    assert np.array_equal(pa.gravity, np.zeros(3))
    batch = kd.ModelBatch.dispersed(model, mu=[2.0e4, 3.0e4])
    assert batch.member(1).central_gravity.mu == 3.0e4
    with pytest.raises(ModelError, match="central field"):
        kd.ModelBatch.dispersed(tree([], ["free"], ["123"], seed=1), mu=[1.0])
    with pytest.raises(ModelError, match="mu: must be positive"):
        kd.ModelBatch.dispersed(model, mu=[-1.0])
    assert "CentralGravity(mu=20000" in str(model)


# --------------------------------------------------------------------------- body term
def _body(seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(3, 3))
    I = A @ A.T + 2.0 * np.eye(3)
    r = rng.normal(size=3)
    r *= 7.0e6 / np.linalg.norm(r)
    return rng.uniform(10.0, 500.0), I, r


@pytest.mark.parametrize("seed", range(4))
def test_force_is_minus_the_gradient_of_the_potential(seed):
    m, I, r = _body(seed)
    pole = [0.0, 0.0, 1.0]

    def V(x):
        return sp.central_gravity_potential(NUMPY, kd.EARTH_MU, 1.08e-3, kd.EARTH_RADIUS, m,
                                            I.tolist(), list(x), pole)  # fmt: skip

    F, _ = sp.central_gravity(NUMPY, kd.EARTH_MU, 1.08e-3, kd.EARTH_RADIUS, m, I.tolist(),
                              list(r), pole)  # fmt: skip
    h = 10.0
    fd = [-(V(r + h * e) - V(r - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(F, fd, rtol=1e-7)
    # the point mass dominates: -mu m r/|r|^3 to a few parts in 1e-3 (J2)
    point = -kd.EARTH_MU * m * r / np.linalg.norm(r) ** 3
    assert np.linalg.norm(F - point) < 1e-2 * np.linalg.norm(point)


@pytest.mark.parametrize("seed", range(4))
def test_torque_is_minus_the_rotation_gradient_of_the_potential(seed):
    """T = -∂V/∂θ for a small rotation θ of the body (I -> R I Rᵀ), by central
    differences; the body's mass is left out so the point-mass term's size does not hide
    the gradient term in round-off (it does not depend on the attitude)."""
    _, I, r = _body(seed)
    pole = [0.0, 0.0, 1.0]

    def V(J):
        return sp.central_gravity_potential(NUMPY, kd.EARTH_MU, 0.0, kd.EARTH_RADIUS, 0.0,
                                            J.tolist(), list(r), pole)  # fmt: skip

    _, T = sp.central_gravity(NUMPY, kd.EARTH_MU, 0.0, kd.EARTH_RADIUS, 1.0, I.tolist(),
                              list(r), pole)  # fmt: skip
    eps = 1e-4
    fd = []
    for e in np.eye(3):
        Rp, Rm = (Rotation.from_rotvec(s * eps * e).as_matrix() for s in (1, -1))
        fd.append(-(V(Rp @ I @ Rp.T) - V(Rm @ I @ Rm.T)) / (2 * eps))
    np.testing.assert_allclose(T, fd, rtol=1e-6, atol=1e-12 * np.abs(T).max())
    assert np.abs(T).max() > 1e-7  # a real torque at this attitude


# --------------------------------------------------------------------------- engines
@pytest.mark.parametrize("seed", range(3))
def test_every_engine_gives_the_dense_accelerations(seed):
    model = _small_tree(seed + 3)
    cm = kd.compile_model(model)
    for s in range(3):
        state = random_state(model, np.random.default_rng(100 * seed + s))
        a = kd.forward_dynamics(model, state)
        np.testing.assert_allclose(kd.aba(model, state), a, atol=1e-10)
        np.testing.assert_allclose(cm.forward_dynamics(state), a, atol=1e-10)


@pytest.mark.parametrize("seed", range(2))
def test_compiled_msd_rates_match_the_dense_msd_rates(seed):
    model = _small_tree(seed + 11)
    cm = kd.compile_model(model, formulation="msd")
    state = random_state(model, np.random.default_rng(seed))
    kin = kinematics_at(model, state.q, state.u)
    dense = msd_rates(model, kin, applied_loads(model, state, kin))
    y = kd.msd.momenta(model, state)
    out = np.asarray(cm.rhs(state.q.tolist(), y.tolist()))
    np.testing.assert_allclose(out[: model.n], dense, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_generalized_forces_are_the_potential_rate(seed):
    """``Fr · u = -dV/dt`` along ``q̇(q, u)`` (no springs): the engines' forces and the
    energy readout's potential are one field."""
    model = _small_tree(seed + 21, springs=False)
    state = random_state(model, np.random.default_rng(seed))
    Fr = kd.generalized_active_forces(model, state)
    qd = joints.qdot(model.layout, state.q, state.u)
    h = 1e-5

    def V(t):
        return kd.potential_energy(model, kd.State(state.q + t * qd, state.u))

    dVdt = (V(-2 * h) - 8 * V(-h) + 8 * V(h) - V(2 * h)) / (12 * h)
    assert abs(Fr @ state.u + dVdt) < 1e-7 * (1.0 + abs(dVdt))
    assert abs(dVdt) > 1e-2


def _about_centre(traj, model):
    """Energy and the angular momentum about the field's centre, (nt,) and (nt, 3)."""
    P = traj.linear_momentum
    m = model.total_mass
    H = []
    for i in range(traj.t.size):
        _, com, _ = kd.system_mass_properties(model, traj.state(i))
        H.append(traj.angular_momentum[i] + np.cross(com - model.central_gravity.center, P[i]))
    return traj.kinetic_energy + traj.potential_energy, np.array(H), m


def _spring_chain():
    """A hub on a free root with a hinged and a ball-jointed appendage (springs, no
    damping) in the small field, off the centre and tumbling."""
    model = tree([0, 1], ["free", "hinge", "gimbal3"], ["123", "231", "123"], seed=5)
    undamped = [attrs.evolve(j, damping=0.0) for j in model.joints]
    model = kd.Model(model.bodies, undamped)
    state = random_state(model, np.random.default_rng(3), speed=0.5)
    _, com, _ = kd.system_mass_properties(model, state)
    # the centre 20 m from the mass centre, which moves at about the circular speed
    field = attrs.evolve(SMALL, J2=0.0, center=com - (20.0, 0.0, 0.0))
    model = attrs.evolve(model, gravity=field)
    par = kd.partials(model, state)
    slides = model.speeds(model.joints[0].name)[3:]
    m = np.array([b.mass for b in model.bodies])
    V_s = np.einsum("i,ijk->jk", m, par.V_s) / m.sum()  # the mass centre's partials
    v_now = V_s @ state.u[model.nu :]
    v_want = np.array([0.0, 1.0, 0.3]) * np.sqrt(SMALL.mu / 20.0) / 1.05
    u = state.u.copy()
    u[slides] += np.linalg.solve(V_s[:, slides - model.nu], v_want - v_now)
    return model, kd.State(state.q, u)


def test_energy_and_angular_momentum_about_the_centre_are_conserved():
    model, state = _spring_chain()
    traj = kd.simulate(model, state, t_final=4.0, dt=2e-4, method="rk4", progress=False,
                       output_every=0.05)  # fmt: skip
    E, H, _ = _about_centre(traj, model)
    assert np.abs(E - E[0]).max() < 1e-7 * np.abs(E[0])
    assert np.abs(H - H[0]).max() < 1e-8 * np.linalg.norm(H[0])


def test_conservation_fails_when_the_gradient_torque_is_broken(monkeypatch):
    """The check above can fail: with the gravity-gradient torque scaled by 0.9 the
    angular momentum about the centre drifts."""
    central = sp.central_gravity

    def broken(*args):
        F, T = central(*args)
        return F, sp.scale(0.9, T)

    monkeypatch.setattr(sp, "central_gravity", broken)
    model, state = _spring_chain()
    traj = kd.simulate(model, state, t_final=1.0, dt=1e-3, method="rk4", progress=False,
                       output_every=0.05, engine="dense")  # fmt: skip
    _, H, _ = _about_centre(traj, model)
    assert np.abs(H - H[0]).max() > 1e-6 * np.linalg.norm(H[0])  # 100 times the tolerance above


# --------------------------------------------------------------------------- round-off
def _orbit_body(center):
    hub = kd.Body("hub", mass=500.0, inertia=kd.inertia_tensor(300.0, 200.0, 120.0),
                  com=(0.1, -0.05, 0.2))  # fmt: skip
    arm = kd.Body("arm", mass=20.0, inertia=kd.inertia_tensor(20.0, 20.0, 0.5), com=(0.0, 0.0, 2.0))
    js = [kd.Joint.free("root", outer="hub"),
          kd.Joint.revolute("hinge", inner="hub", outer="arm", axis=1, inner_point=(0, 0, 0.5),
                            stiffness=3.0)]  # fmt: skip
    return kd.Model([hub, arm], js, gravity=kd.CentralGravity(center=center))


def test_round_off_at_orbital_distance():
    """The same spacecraft 7000 km from the Earth's centre, in coordinates where it is at
    7e6 m (centre at 0) and where it is at the origin (centre at -r): the recursion (ABA,
    compiled) and the dense engine keep the attitude accelerations to a part in 1e-9 of
    the gravity-gradient ones (measured 2e-13 and 0). (With its spatial vectors about
    N's origin, the dense engine was off by 1e-3 of them; they are about the free
    root's joint point: docs/howto/central-gravity.md.)"""
    r = np.array([7.0e6, 0.0, 0.0])
    far, near = _orbit_body((0.0, 0.0, 0.0)), _orbit_body(-r)
    v = np.array([0.0, 7546.0, 0.0])
    s_far = far.set_joint(far.initial_state(), "root", displacements=r, displacement_rates=v,
                          angles=(0.1, 0.2, 0.3), rates=(1e-3, -1e-3, 2e-3))  # fmt: skip
    s_near = near.set_joint(s_far, "root", displacements=(0.0, 0.0, 0.0))
    s_near = near.set_joint(s_near, "hinge", angles=(0.2,), rates=(0.01,))
    s_far = far.set_joint(s_far, "hinge", angles=(0.2,), rates=(0.01,))
    ref = kd.forward_dynamics(near, s_near)
    rot = far.speeds("root")[:3].tolist() + far.speeds("hinge").tolist()
    scale = np.abs(ref[rot]).max()
    assert scale > 1e-6
    runs = (kd.aba(far, s_far), kd.compile_model(far).forward_dynamics(s_far),
            kd.forward_dynamics(far, s_far))  # fmt: skip
    for a in runs:
        assert np.abs(a[rot] - ref[rot]).max() < 1e-9 * scale + 1e-15
