"""Flexible bodies in the energy-momentum scheme (kanedyn.simulation.conserving.flexible).

Oracles: the dense Kane code of the flexible bodies (kanedyn.dynamics.flex: kd.mass_matrix,
kd.kinetic_energy, kd.potential_energy, kd.momentum, and kd.simulate on the dense engine),
which writes the same kinetic energy in the speeds (ω, v₀, ξ) instead of the director
coordinates; and the balance laws themselves.
"""

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.errors import ModelError
from kanedyn.simulation.conserving import flexible
from kanedyn.simulation.conserving import step as step_module
from kanedyn.simulation.conserving.formulation import (
    redundant,
    speed_jacobian,
    to_joint_coordinates,
    to_redundant,
)


def _hub_and_beam(damping=0.0, gravity=(0.0, 0.0, 0.0), stiffening=False, EI=(30.0, 45.0)):
    """A free hub (spherical joint and three slides) with a cantilever of two modes in
    each of two directions, welded off its centre and tilted."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, EI, n_modes=2, stiffening=stiffening,
                        damping_ratio=damping)  # fmt: skip
    root = kd.Joint("root", None, "hub", rot_type="spherical", rot_dof=3, trn_dof=3)
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    model = kd.Model([hub, beam], [root, arm], gravity=gravity)
    s = model.set_joint(model.initial_state(), "root", rates=(0.4, -0.3, 0.8),
                        displacement_rates=(0.1, 0.0, -0.2))  # fmt: skip
    s = model.set_modes(s, "beam", amplitudes=(0.05, -0.03, 0.04, 0.02),
                        rates=(0.3, -0.4, 0.2, 0.3))  # fmt: skip
    return model, s


def _random_state(model, rng):
    q = np.zeros(model.nq_total)
    q[:4] = rng.standard_normal(4)
    q[:4] /= np.linalg.norm(q[:4])
    q[4:7] = rng.standard_normal(3)
    q[model.nq :] = 0.1 * rng.standard_normal(model.nf)
    return kd.State(q, rng.standard_normal(model.n_total))


@pytest.mark.parametrize("stiffening", [False, True])
def test_director_energy_momenta_and_mass_matrix_are_kanes(stiffening):
    """The constant director mass matrix of the flexible body, built from P, L and N
    (and the foreshortening's moments from the geometric stiffness), carries Kane's
    kinetic energy, mass matrix (``JᵀMJ``), momenta and, with gravity, potential energy
    (strain and the displaced mass) at random states; the readout returns the state."""
    model, _ = _hub_and_beam(gravity=(0.3, -9.81, 1.2), stiffening=stiffening)
    red = redundant(model)
    rng = np.random.default_rng(3)
    for _ in range(3):
        s = _random_state(model, rng)
        x, v = to_redundant(red, s)
        assert np.abs(red.constraints(x)).max() < 1e-14
        assert 0.5 * v @ red.M @ v == pytest.approx(kd.kinetic_energy(model, s), rel=1e-12)
        E = kd.kinetic_energy(model, s) + kd.potential_energy(model, s)
        assert red.energy(x, v) == pytest.approx(E, rel=1e-12, abs=1e-12)
        P, H = red.momentum(x, v)
        P_k, H_k = kd.momentum(model, s)
        np.testing.assert_allclose(P, P_k, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(H, H_k, rtol=1e-12, atol=1e-12)
        q1 = s.q[: model.nq]
        J = speed_jacobian(red, x, kd.partials(model, kd.State(q1, np.zeros(model.n))))
        M = kd.mass_matrix(model, s)
        np.testing.assert_allclose(J.T @ red.M @ J, M, rtol=1e-11, atol=1e-11 * np.abs(M).max())
        q, u = to_joint_coordinates(red, x, v, s.q)  # the quaternion sign of s
        np.testing.assert_allclose(q, s.q, atol=1e-13)
        np.testing.assert_allclose(u, s.u, atol=1e-11)


def test_dropping_the_foreshortening_breaks_the_identity_with_kane(monkeypatch):
    """The check above fails when the foreshortening's moments are dropped: a stiffened
    body's geometric stiffness is its foreshortening vectors' coupling to the rigid field."""
    real = flexible.foreshortening_moments
    monkeypatch.setattr(flexible, "foreshortening_moments", lambda G: tuple(0 * a for a in real(G)))
    model, _ = _hub_and_beam(stiffening=True)
    red = redundant(model)
    s = _random_state(model, np.random.default_rng(3))
    x, v = to_redundant(red, s)
    J = speed_jacobian(red, x, kd.partials(model, kd.State(s.q[: model.nq], np.zeros(model.n))))
    M = kd.mass_matrix(model, s)
    assert np.abs(J.T @ red.M @ J - M).max() > 1e-3 * np.abs(M).max()
    assert abs(0.5 * v @ red.M @ v - kd.kinetic_energy(model, s)) > 1e-4


def _kane_energy(model, traj):
    return np.array(
        [
            kd.kinetic_energy(model, traj.state(i)) + kd.potential_energy(model, traj.state(i))
            for i in range(len(traj.t))
        ]
    )


def _conservation(model, s, dt=0.1, steps=40):
    """The drifts of a torque-free run: the scheme's energy (relative), P and H
    (relative to their size), and the energy of the returned joint states measured by
    the dense Kane code (relative; its readout error is O(h²) and does not accumulate)."""
    tr = kd.simulate(model, s, dt * steps, dt, method=kd.EnergyMomentum(tol=1e-12))
    r = tr.run
    E, P, H = r.energy, r.linear_momentum, r.angular_momentum
    E_k = _kane_energy(model, tr)
    return (
        np.abs(E - E[0]).max() / abs(E[0]),
        np.abs(P - P[0]).max() / np.abs(P[0]).max(),
        np.abs(H - H[0]).max() / np.abs(H[0]).max(),
        np.abs(E_k - E_k[0]).max() / abs(E_k[0]),
        tr,
    )


@pytest.mark.parametrize(("stiffening", "readout"), [(False, 5e-3), (True, 1e-12)])
def test_torque_free_hub_and_beam_conserves_energy_and_momenta(stiffening, readout):
    """A large step (h = 0.1 s, 3× the period of the fastest mode over 2π): energy with
    the strain energy, P and H conserved to the Newton tolerance over 40 steps, while
    the strain energy changes by a good part of the total (the modes exchange energy
    with the rigid motion); the energy of the returned joint states, measured by Kane's
    equations, stays within the readout's O(h²) error (1.3e-3 here), and with the
    stiffening, whose nodal rates the step keeps on the tangent space with their energy
    (formulation.tangent_rates), is the scheme's to round-off."""
    model, s = _hub_and_beam(stiffening=stiffening)
    dE, dP, dH, dE_kane, tr = _conservation(model, s)
    assert dE < 1e-10 and dP < 1e-10 and dH < 1e-10
    assert dE_kane < readout
    K = model.bodies[1].modes.stiffness
    eta = tr.q[:, model.nq :]
    strain = 0.5 * np.einsum("ti,ij,tj->t", eta, K, eta)
    assert strain.max() - strain.min() > 0.1 * tr.run.energy[0]
    assert np.max(tr.run.constraint_residual) < 1e-10


def test_dropping_the_rotation_mode_coupling_breaks_conservation(monkeypatch):
    """The same check fails when the physics is broken on purpose: without the coupling
    ``∫X_aΨ_bp dm`` of the directors and the modal vectors (the rotation-mode coupling,
    L and H of Modes) the scheme still conserves its own (wrong) energy, but the motion it
    returns is not that of the flexible body: its energy as Kane's equations measure it
    drifts."""
    real = flexible._weights

    def broken(body, md):
        W = real(body, md)
        W[1:4, 4:] = W[4:, 1:4] = 0.0
        return W

    monkeypatch.setattr(flexible, "_weights", broken)
    model, s = _hub_and_beam()  # a new model: the director formulation is stored on it
    dE, dP, dH, dE_kane, _ = _conservation(model, s)
    assert dE < 1e-10  # the scheme conserves what it was given...
    assert dE_kane > 5e-2  # ...which is not the flexible body's energy


def _readout_energy_error(model, s, dt, steps):
    """The largest distance of the energy of the returned joint states, measured by
    Kane's equations, from the scheme's energy (relative), and the largest ``|G(x)v|``
    of the nodal rates."""
    tr = kd.simulate(model, s, dt * steps, dt, method=kd.EnergyMomentum(tol=1e-12))
    r = tr.run
    E_k = _kane_energy(model, tr)
    G = [np.abs(r.red.constraints.jacobian(x) @ v).max() for x, v in zip(r.x, r.v, strict=True)]
    return np.abs(E_k - r.energy).max() / abs(r.energy[0]), max(G)


def test_stiffened_readout_holds_the_schemes_energy(monkeypatch):
    """With the stiffening (an indefinite mass matrix on the foreshortening vectors) the
    nodal rates satisfy the velocity constraints after every step, so the joint state
    read out of them carries the scheme's energy, measured by Kane's equations, to
    round-off over 12 steps of 0.1 s (the scheme's E, P and H stay conserved, above).
    Without the projection (break test) the rates leave the tangent space by O(0.1) at
    this step and the readout's energy is off by 2 %, which the same check finds."""
    model, s = _hub_and_beam(stiffening=True)
    err, G = _readout_energy_error(model, s, 0.1, 12)
    assert err < 1e-12 and G < 1e-10
    monkeypatch.setattr(step_module, "tangent_rates", lambda red, x, v: v)
    model, s = _hub_and_beam(stiffening=True)
    err, G = _readout_energy_error(model, s, 0.1, 12)
    assert err > 1e-2 and G > 0.1


def test_modal_damping_lowers_the_energy_at_every_step():
    """With modal damping the energy falls at every step, by the damping's discrete work
    ``ΔηᵀC_ΨΔη/h`` exactly, while P and H stay conserved (internal forces)."""
    model, s = _hub_and_beam(damping=0.05)
    tr = kd.simulate(model, s, 2.0, 0.1, method=kd.EnergyMomentum(tol=1e-12))
    r = tr.run
    assert np.all(np.diff(r.energy) < 0.0)
    assert r.energy[0] - r.energy[-1] > 1e-3 * r.energy[0]
    np.testing.assert_allclose(r.energy - r.energy[0], -r.dissipated, atol=1e-10 * r.energy[0])
    for p in (r.linear_momentum, r.angular_momentum):
        assert np.abs(p - p[0]).max() < 1e-10 * np.abs(p[0]).max()


@pytest.mark.slow
@pytest.mark.parametrize("stiffening", [False, True])
def test_converges_to_the_dense_kane_run_at_second_order(stiffening):
    """As h halves, the distance to the dense engine's Kane run (RK4 at a far smaller
    step) at t = 0.4 s falls by 4: the midpoint scheme is second order in the modal
    amplitudes and rates as in the rigid motion, with and without the geometric
    stiffening (a softer beam, whose fastest mode, 9.5 rad/s, the steps resolve)."""
    model, s = _hub_and_beam(EI=(3.0, 4.5), stiffening=stiffening)
    T = 0.4
    ref = kd.simulate(model, s, T, 1e-3, engine="dense")
    ref_y = np.r_[ref.q[-1], ref.u[-1]]
    errs = []
    for h in (0.04, 0.02, 0.01):
        tr = kd.simulate(model, s, T, h, method=kd.EnergyMomentum(tol=1e-12))
        assert tr.t[-1] == pytest.approx(T)
        errs.append(np.abs(np.r_[tr.q[-1], tr.u[-1]] - ref_y).max())
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(rates - 2.0) < 0.1), (errs, rates)  # 1.97, 1.99
    assert errs[-1] < 2e-3


def test_what_the_scheme_refuses_of_a_flexible_body_it_names():
    model, s = _hub_and_beam()
    beam = model.bodies[1]
    no_N = attrs.evolve(beam, modes=attrs.evolve(beam.modes, N=None, geometric=None))
    bare = kd.Model([model.bodies[0], no_N], list(model.joints))
    with pytest.raises(ModelError, match=r"body 'beam': .*Modes\.N"):
        kd.simulate(bare, s, 0.1, 0.05, method="energy-momentum")
    with pytest.warns(UserWarning, match="H and L disagree"):  # as 42's REFPT_CM data
        bad_H = attrs.evolve(beam, modes=attrs.evolve(beam.modes, H=np.zeros((3, 4))))
    bad = kd.Model([model.bodies[0], bad_H], list(model.joints))
    with pytest.raises(ModelError, match="body 'beam': .*H differs from the antisymmetric"):
        kd.simulate(bad, s, 0.1, 0.05, method="energy-momentum")
    with pytest.raises(ModelError, match="flexible bodies need reduction='full'"):
        kd.simulate(model, s, 0.1, 0.05,
                    method=kd.EnergyMomentum(reduction="null-space"))  # fmt: skip


def test_hinged_beam_in_gravity_with_a_controller_balances_energy_and_work():
    """A hub on a hinge (an augmented angle) with a beam bending in and out of the plane,
    in gravity (on the displaced mass too): the energy with strain and gravity energy is
    conserved without a controller, and changes by exactly the discrete work of a held
    damping torque with one."""
    hub = kd.Body("hub", 5.0, kd.inertia_tensor(0.5, 0.6, 0.7))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, axis=1, directions=(0, 2),
                        stiffening=False)  # fmt: skip
    model = kd.Model([hub, beam], [kd.Joint.revolute("pin", None, "hub", axis=1),
                                   kd.Joint.weld("arm", "hub", "beam", inner_point=(0.0, 0.2, 0.0))],
                     gravity=(0.0, 0.0, -9.81))  # fmt: skip
    s = model.set_joint(model.initial_state(), "pin", angles=(0.3,), rates=(1.0,))
    s = model.set_modes(s, "beam", amplitudes=(0.02, -0.01, 0.01, 0.0))
    em = kd.EnergyMomentum(tol=1e-12)
    r = kd.simulate(model, s, 1.0, 0.05, method=em).run
    assert np.abs(r.energy - r.energy[0]).max() < 1e-10 * np.abs(r.energy).max()
    ctl = kd.Controller(0.05, lambda t, m, st: [kd.JointLoad("pin", [-2.0 * st.u[0]])])
    r = kd.simulate(model, s, 1.0, 0.05, method=em, controller=ctl).run
    assert r.work[-1] < -1.0
    np.testing.assert_allclose(r.energy - r.energy[0], r.work, atol=1e-10 * r.energy[0])
