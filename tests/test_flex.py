"""Flexible bodies: modal data, the beam helper, Kane's equations with modes.

Oracles: Euler–Bernoulli cantilever frequencies (closed form), sympy.physics.mechanics
KanesMethod on a body of particles whose displacements are the modes (the same
kinematics, derived independently), conservation of energy and momenta (each test
fails when a term is broken on purpose).
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics import flex
from kanedyn.model.beam import cantilever_roots
from kanedyn.spatial import modal
from tests.sympy_oracle import particle_modes

# ----------------------------------------------------------------------- Modes records


def test_modes_validation_names_the_field():
    M, K = np.eye(2), np.diag([1.0, 4.0])
    with pytest.raises(kd.ModelError, match="mass is not symmetric"):
        kd.Modes([[1.0, 0.5], [0.0, 1.0]], K)
    with pytest.raises(kd.ModelError, match="mass must be positive definite"):
        kd.Modes(np.diag([1.0, 0.0]), K)
    with pytest.raises(kd.ModelError, match="stiffness must be positive semidefinite"):
        kd.Modes(M, np.diag([1.0, -1.0]))
    with pytest.raises(kd.ModelError, match="P must have shape"):
        kd.Modes(M, K, P=np.zeros((3, 3)))
    with pytest.raises(kd.ModelError, match="not both"):
        kd.Modes(M, K, np.eye(2), damping_ratio=0.1)
    with pytest.raises(kd.ModelError, match="H has non-finite"):
        kd.Modes(M, K, H=np.full((3, 2), np.nan))
    with pytest.raises(kd.ModelError, match="geometric must have shape"):
        kd.Modes(M, K, geometric=np.zeros((11, 2, 2)))
    with pytest.raises(kd.ModelError, match="node_names"):
        kd.Modes(M, K, node_positions=np.zeros((2, 3)), node_names=("a", "a"))
    with pytest.warns(UserWarning, match="trace of N"):
        kd.Modes(M, K, N=np.ones((3, 3, 2, 2)))
    L = np.zeros((3, 3, 2))
    L[1, 0, 0] = 1.0  # ∫Ψ_y r_x: H_z = 1
    with pytest.warns(UserWarning, match="H and L disagree"):
        kd.Modes(M, K, L=L)
    H = np.zeros((3, 2))
    H[2, 0] = 1.0
    assert kd.Modes(M, K, H=H, L=L).L[1, 0, 0] == 1.0


def test_modes_damping_ratio():
    md = kd.Modes(np.diag([2.0, 3.0]), np.diag([8.0, 27.0]), damping_ratio=[0.1, 0.2])
    np.testing.assert_allclose(md.damping, np.diag([2 * 0.1 * 4.0, 2 * 0.2 * 9.0]))
    np.testing.assert_allclose(md.frequencies, [2.0, 3.0])


# ----------------------------------------------------------------------- the beam


def test_cantilever_roots():
    np.testing.assert_allclose(cantilever_roots(4), [1.875104069, 4.694091133, 7.854757438,
                                                     10.99554073], rtol=1e-9)  # fmt: skip


def test_beam_clamped_frequencies_are_euler_bernoulli():
    ell, rho, EI = 2.0, 3.0, (50.0, 80.0)
    b = kd.beam_body("beam", ell, rho, EI, n_modes=4, axis=0, directions=(1, 2))
    md = b.modes
    exact = np.sort(
        np.concatenate([cantilever_roots(4) ** 2 * np.sqrt(e / (rho * ell**4)) for e in EI])
    )
    np.testing.assert_allclose(md.frequencies, exact, rtol=1e-10)
    # integrals of the analytic modes: ∫φ_1 ds = 0.7830 ℓ (Blevins), M = ρℓ U
    np.testing.assert_allclose(md.P[1, 0], rho * 0.7830 * ell, rtol=2e-4)
    np.testing.assert_allclose(np.einsum("iipq->pq", md.N), md.mass, atol=1e-9)
    # the tip node's displacement is φ(ℓ) = 2 for every cantilever mode (sign convention)
    np.testing.assert_allclose(np.abs(md.Psi[1, 1, :4]), 2.0, rtol=1e-9)


def _linear_frequencies(model, state, h=1e-6):
    """Frequencies of the linearised flexible model by central differences of
    kd.forward_dynamics (coordinates rates = speeds for the joints used)."""
    n = state.u.size
    nq = state.q.size
    assert nq == n
    A = np.zeros((2 * n, 2 * n))
    A[:n, n:] = np.eye(n)
    for j in range(2 * n):
        dx = np.zeros(2 * n)
        dx[j] = h
        fp = kd.forward_dynamics(model, kd.State(state.q + dx[:n], state.u + dx[n:]))
        fm = kd.forward_dynamics(model, kd.State(state.q - dx[:n], state.u - dx[n:]))
        A[n:, j] = (fp - fm) / (2 * h)
    ev = np.linalg.eigvals(A)
    return np.sort(np.abs(ev.imag[ev.imag > 1e-6]))


def test_clamped_beam_linearised_dynamics_frequencies():
    ell, rho, EI = 1.5, 2.0, 40.0
    b = kd.beam_body("beam", ell, rho, EI, n_modes=3, directions=(1,), stiffening=False)
    model = kd.Model([b], [kd.Joint.weld("clamp", None, "beam")])
    exact = cantilever_roots(3) ** 2 * np.sqrt(EI / (rho * ell**4))
    w = _linear_frequencies(model, model.initial_state())
    np.testing.assert_allclose(w, exact, rtol=1e-6)
    lin = kd.linearize(model, model.initial_state())
    ev = lin.eigenvalues
    np.testing.assert_allclose(np.sort(ev.imag[ev.imag > 0]), exact, rtol=1e-6)
    assert lin.state_names == ("beam.y1", "beam.y2", "beam.y3",
                               "beam.y1_dot", "beam.y2_dot", "beam.y3_dot")  # fmt: skip


def test_linearize_free_hub_and_beam():
    """A free hub (quaternion root) with a beam: six rigid-body zero eigenvalues, the
    elastic ones in pairs ±iω; ``B`` of the root's efforts is ``M⁻¹`` (dense mass
    matrix) in its columns."""
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=False)
    model = kd.Model(
        [hub, beam],
        [kd.Joint.free("root", "hub"),
         kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0, 0))],
    )  # fmt: skip
    s = model.initial_state()
    lin = kd.linearize(model, s, inputs=["root"])
    ev = lin.eigenvalues
    assert np.sum(np.abs(ev) < 1e-5) == 12  # 6 rigid DOF: double zeros
    np.testing.assert_allclose(ev[np.abs(ev) > 1e-5].real, 0.0, atol=1e-6)
    Minv = np.linalg.inv(kd.mass_matrix(model, s))
    cols = model.speeds("root")
    np.testing.assert_allclose(lin.B[model.n + model.nf :], Minv[:, cols], rtol=1e-8, atol=1e-10)


def _first_frequency_spinning(direction, stiffening, Om):
    """First modal frequency of a cantilever (ℓ = ρ = EI = 1, along x) spinning at Ω about
    body y through its root; the hub has a huge inertia, so it turns at a constant rate."""
    b = kd.beam_body(
        "beam", 1.0, 1.0, 1.0, n_modes=4, directions=(direction,), stiffening=stiffening
    )
    hub = kd.Body("hub", 1e9, 1e9 * np.eye(3))
    model = kd.Model([hub, b], [kd.Joint.revolute("spin", None, "hub", axis=2),
                               kd.Joint.weld("w", "hub", "beam")])  # fmt: skip
    n, h = 4, 1e-6
    A = np.zeros((2 * n, 2 * n))
    A[:n, n:] = np.eye(n)
    for j in range(2 * n):
        dx = np.zeros(2 * n)
        dx[j] = h
        fp = kd.forward_dynamics(model, kd.State(np.r_[0.0, dx[:n]], np.r_[Om, dx[n:]]))
        fm = kd.forward_dynamics(model, kd.State(np.r_[0.0, -dx[:n]], np.r_[Om, -dx[n:]]))
        A[n:, j] = (fp[1:] - fm[1:]) / (2 * h)
    ev = np.linalg.eigvals(A)
    return np.sort(np.abs(ev.imag[ev.imag > 1e-6]))[0]


@pytest.mark.parametrize(
    ("direction", "stiffening", "coefficient"),
    [(1, True, 1.1933), (1, False, 0.0), (2, True, 0.1933), (2, False, -1.0)],
)
def test_spinning_beam_frequency_southwell(direction, stiffening, coefficient):
    """``ω² = ω₀² + k Ω²`` for a cantilever spinning about a transverse axis through its
    root: out of the plane of rotation (bending along the spin axis) the Southwell
    coefficient k = 1.1933 (Wright, Smith, Thresher & Wang 1982), in the plane
    k = 1.1933 - 1; the linear modal model (no stiffening) gives 0 and -1, the in-plane
    one unstable above Ω = ω₀ (Kane, Ryan & Banerjee 1987)."""
    Om = 0.3  # k is the slope of ω² at small Ω
    w = _first_frequency_spinning(direction, stiffening, Om)
    w0 = 1.875104069**2
    assert (w**2 - w0**2) / Om**2 == pytest.approx(coefficient, abs=2e-4)


# ----------------------------------------------------------------------- sympy oracle


@pytest.mark.slow
def test_hub_with_modal_body_matches_sympy_kanes_method():
    pytest.importorskip("sympy")
    from tests.sympy_oracle import modal_particle_hub

    rng = np.random.default_rng(3)
    model, oracle = modal_particle_hub(rng, n_modes=2, n_particles=4, hub_dof=3)
    for _ in range(3):
        vals = rng.uniform(-0.6, 0.6, 10)
        state = kd.State(vals[:5], vals[5:])
        Ms, fs = oracle(state.q, state.u)
        np.testing.assert_allclose(kd.mass_matrix(model, state), Ms, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(kd.forcing(model, state), fs, rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------- conservation


def _free_hub_beam(damping=0.0, stiffening=False):
    hub = kd.Body("hub", 20.0, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=stiffening,
                        damping_ratio=damping)  # fmt: skip
    root = kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3)
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    model = kd.Model([hub, beam], [root, arm])
    nq, n = model.nq, model.n
    q = np.zeros(nq + model.nf)
    q[:3] = (0.1, 0.2, 0.3)
    q[nq:] = (0.02, -0.01, 0.015, 0.01)
    u = np.zeros(n + model.nf)
    u[:3] = (0.4, -0.3, 0.8)
    u[3:6] = (0.1, 0.0, -0.2)
    u[n:] = (0.1, -0.2, 0.05, 0.1)
    return model, kd.State(q, u)


def _rk4(model, state, dt, steps, qdot=None):
    """RK4 on x = (q, u); ``qdot(q, u)`` the kinematic equations (default q̇ = u, for the
    gimbal, slides and modes of _free_hub_beam)."""
    y = np.r_[state.q, state.u]
    m = state.q.size

    def f(y):
        q, u = y[:m], y[m:]
        return np.r_[u if qdot is None else qdot(q, u), kd.forward_dynamics(model, kd.State(q, u))]

    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + 0.5 * dt * k1)
        k3 = f(y + 0.5 * dt * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return kd.State(y[:m], y[m:])


def _energy(model, s):
    return kd.kinetic_energy(model, s) + kd.potential_energy(model, s)


def _conservation_errors(model, s0):
    s1 = _rk4(model, s0, 4e-3, 75)
    E0, E1 = _energy(model, s0), _energy(model, s1)
    (P0, H0), (P1, H1) = kd.momentum(model, s0), kd.momentum(model, s1)
    return abs(E1 - E0) / abs(E0), np.abs(P1 - P0).max(), np.abs(H1 - H0).max() / np.abs(H0).max()


@pytest.mark.parametrize("stiffening", [False, True])
def test_torque_free_hub_and_beam_conserves_energy_and_momenta(stiffening):
    """Energy with strain energy, P and H (elastic motion included) conserved to RK4's
    accuracy (they fall as dt⁴: 1.6e-7 at dt = 4 ms, 5e-9 at 2 ms), with and without the
    geometric stiffness."""
    model, s0 = _free_hub_beam(stiffening=stiffening)
    dE, dP, dH = _conservation_errors(model, s0)
    assert dE < 1e-6 and dP < 1e-6 and dH < 1e-6


def test_conservation_fails_when_the_coriolis_term_is_broken(monkeypatch):
    model, s0 = _free_hub_beam()
    real = modal.modal_bias

    def broken(md, eta, xi, w, g):  # drop the Coriolis coupling 2ω × P_Ψξ of the modes
        b = real(md, eta, xi, w, g)
        b[3:6] -= 2.0 * np.cross(w, md.P @ xi)
        return b

    monkeypatch.setattr(modal, "modal_bias", broken)
    dE, dP, dH = _conservation_errors(model, s0)
    assert max(dE, dP, dH) > 1e-4


def test_conservation_fails_without_the_foreshortening_inertia(monkeypatch):
    model, s0 = _free_hub_beam(stiffening=True)
    monkeypatch.setattr(modal, "foreshortening_inertia", lambda s: np.zeros((3, 3)))
    dE, dP, dH = _conservation_errors(model, s0)
    assert max(dE, dP, dH) > 1e-4


def test_modal_damping_lowers_energy():
    model, s0 = _free_hub_beam(damping=0.05)
    s1 = _rk4(model, s0, 4e-3, 75)
    assert _energy(model, s1) < _energy(model, s0) - 1e-4


# ----------------------------------------------------------------------- rigid-chain oracle


def _chain(hub, ell, rho, EI, N, offset):
    """The cantilever as N rigid segments with revolute springs ``EI / (ℓ/N)`` at their
    inner ends (the first on the hub), run by the rigid engine."""
    ls = ell / N
    bodies = [hub]
    joints = [kd.Joint.revolute("spin", None, "hub", axis=3)]
    for k in range(N):
        ms = rho * ls
        I = ms * ls**2 / 12
        bodies.append(kd.Body(f"s{k}", ms, kd.inertia_tensor(I, I, I), com=(ls / 2, 0, 0)))
        joints.append(
            kd.Joint.revolute(
                f"j{k}", "hub" if k == 0 else f"s{k - 1}", f"s{k}", axis=3,
                inner_point=offset if k == 0 else (ls, 0, 0), stiffness=EI / ls,
            )
        )  # fmt: skip
    return kd.Model(bodies, joints)


@pytest.mark.slow
def test_hub_and_beam_against_a_chain_of_rigid_segments():
    """Hub (free to turn) with a cantilever: the coupled frequencies of the modal model
    against a chain of rigid segments with joint springs (kd.linearize of the rigid
    engine). The chain's error halves as N doubles; its Richardson extrapolation from
    N = 16, 32 meets the modal model's first two frequencies within 0.3 %."""
    ell, rho, EI, offset = 2.0, 1.5, 30.0, (0.3, 0.0, 0.0)
    hub = kd.Body("hub", 5.0, kd.inertia_tensor(0.5, 0.5, 0.5))
    beam = kd.beam_body("beam", ell, rho, EI, n_modes=4, directions=(1,), stiffening=False)
    model = kd.Model(
        [hub, beam],
        [kd.Joint.revolute("spin", None, "hub", axis=3),
         kd.Joint.weld("w", "hub", "beam", inner_point=offset)],
    )  # fmt: skip
    ev = kd.linearize(model, model.initial_state()).eigenvalues
    w_flex = np.sort(ev.imag[ev.imag > 1e-6])[:2]
    w = {}
    for N in (8, 16, 32):
        chain = _chain(hub, ell, rho, EI, N, offset)
        ev = kd.linearize(chain, chain.initial_state()).eigenvalues
        w[N] = np.sort(np.abs(ev.imag[ev.imag > 1e-6]))[:2]
    err = {N: np.abs(w[N] - w_flex) for N in w}
    assert np.all(err[32] < 0.6 * err[16]) and np.all(err[16] < 0.6 * err[8])
    np.testing.assert_allclose(2 * w[32] - w[16], w_flex, rtol=3e-3)


# ----------------------------------------------------------------------- spin-up beam


def _spin_up_tip(stiffening, t_final=20.0, dt=1e-2):
    """Kane, Ryan & Banerjee (1987): a cantilever (ℓ = 10 m, ρ = 1.2 kg/m, EI = 14000 N·m²)
    on a hub spun up about z to Ω_s = 6 rad/s in T = 15 s,
    ``θ̇ = Ω_s/T (t - T/(2π) sin(2πt/T))``; the hub is driven by the torque that gives
    a hub of huge inertia that motion. In-plane bending (along y). Returns the tip
    deflections (RK4 on kd.forward_dynamics)."""
    Om, T, J = 6.0, 15.0, 1e9
    hub = kd.Body("hub", 1e3, kd.inertia_tensor(J, J, J))
    beam = kd.beam_body("beam", 10.0, 1.2, 14000.0, n_modes=2, directions=(1,),
                        stiffening=stiffening)  # fmt: skip
    model = kd.Model([hub, beam], [kd.Joint.revolute("spin", None, "hub", axis=3),
                                   kd.Joint.weld("w", "hub", "beam")])  # fmt: skip
    tip = beam.modes.Psi[1, 1]

    def accel(t):
        return Om / T * (1 - np.cos(2 * np.pi * t / T)) if t < T else 0.0

    def f(t, y):
        s = kd.State(y[:3], y[3:])
        load = [kd.JointLoad("spin", [J * accel(t)])]
        return np.r_[y[3:], kd.forward_dynamics(model, s, load, t)]

    y, t, out = np.zeros(6), 0.0, []
    while t < t_final - 1e-12:
        k1 = f(t, y)
        k2 = f(t + dt / 2, y + dt / 2 * k1)
        k3 = f(t + dt / 2, y + dt / 2 * k2)
        k4 = f(t + dt, y + dt * k3)
        y, t = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), t + dt
        out.append(tip @ y[1:3])
        if not abs(out[-1]) < 100.0:
            break
    return np.array(out), y[3]


@pytest.mark.slow
def test_spin_up_beam_bounded_with_stiffening_divergent_without():
    tip, rate = _spin_up_tip(stiffening=True)
    assert rate == pytest.approx(6.0, rel=1e-5)  # the hub reached Ω_s
    # the tip lags (about 0.57 m at mid spin-up), then settles once the spin is steady
    assert np.max(np.abs(tip)) < 1.0 and np.max(np.abs(tip[-200:])) < 0.05
    tip_lin, _ = _spin_up_tip(stiffening=False)
    assert not np.max(np.abs(tip_lin)) < 10.0  # the linear modal model diverges


def test_node_motion_is_the_rate_of_the_node_pose():
    """Node velocity = the time derivative of the node position along the motion
    (central differences, q̇ = u for gimbals, slides and modes); the node's angular
    velocity matches the attitude's rate to first order in the elastic rotation."""
    model, s0 = _free_hub_beam(stiffening=False)
    q, u = s0.q.copy(), s0.u
    q[model.nq :] *= 0.05

    def at(t):
        return flex.node_motion(model, kd.State(q + t * u, u), "beam", "tip")

    nm, h = at(0.0), 1e-6
    np.testing.assert_allclose(nm.velocity, (at(h).position - at(-h).position) / (2 * h), atol=1e-8)
    W = (at(h).R_N_node - at(-h).R_N_node) / (2 * h) @ nm.R_N_node.T
    np.testing.assert_allclose(nm.omega, [W[2, 1], W[0, 2], W[1, 0]], atol=2e-3)
    beam = model.body("beam")
    np.testing.assert_allclose(
        np.linalg.norm(nm.displacement),
        np.linalg.norm(beam.modes.Psi[1] @ q[model.nq :]),
        rtol=1e-12,
    )
    with pytest.raises(kd.ModelError, match="no node named 'tap'"):
        flex.node_motion(model, s0, "beam", "tap")
    with pytest.raises(kd.ModelError, match="not flexible"):
        flex.node_motion(model, s0, "hub", "tip")


def test_conservation_without_the_second_order_integral_N():
    """With N = 0 (the default: 42 without its second-order terms) the equations are
    still those of a kinetic energy: energy and momenta are conserved."""
    import attrs

    model, s0 = _free_hub_beam()
    beam = model.body("beam")
    light = attrs.evolve(beam, modes=attrs.evolve(beam.modes, N=None))
    model = kd.Model([model.body("hub"), light], list(model.joints))
    assert not np.any(model.body("beam").modes.N)
    dE, dP, dH = _conservation_errors(model, s0)
    assert dE < 1e-6 and dP < 1e-6 and dH < 1e-6


def test_damping_ratio_of_coupled_modes_is_the_ratio_of_each_normal_mode():
    """With coupled K and M, each normal mode of the damped system decays with its own ζ:
    the eigenvalues of the first-order system are -ζω ± iω√(1-ζ²) (independent check
    on the state matrix, not on the formula for C)."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(3, 3))
    M = A @ A.T + 3 * np.eye(3)
    B = rng.normal(size=(3, 3))
    K = B @ B.T + np.eye(3)
    zeta = np.array([0.01, 0.05, 0.2])
    C = kd.Modes(M, K, damping_ratio=zeta).damping
    w = np.sqrt(np.sort(np.linalg.eigvals(np.linalg.solve(M, K)).real))
    S = np.block([[np.zeros((3, 3)), np.eye(3)], [-np.linalg.solve(M, K), -np.linalg.solve(M, C)]])
    lam = np.linalg.eigvals(S)
    lam = lam[lam.imag > 0]
    lam = lam[np.argsort(np.abs(lam))]
    np.testing.assert_allclose(np.abs(lam), w, rtol=1e-10)
    np.testing.assert_allclose(-lam.real / np.abs(lam), zeta, rtol=1e-10)


def test_the_symbolic_derivations_take_flexible_bodies():
    """Formerly refused: symbolic Kane and Lagrange now carry the modal coordinates and
    speeds (tests/symbolic/test_flex_symbolic.py checks their equations)."""
    hub = kd.Body("hub", mass=2.0, inertia=np.eye(3))
    beam = kd.beam_body("beam", 1.0, 1.0, 10.0, n_modes=1)
    model = kd.Model([hub, beam], [kd.Joint.revolute("h", None, "hub", axis=3),
                                   kd.Joint.weld("w", "hub", "beam")])  # fmt: skip
    for derive in (kd.symbolic.kane, kd.symbolic.lagrange):
        eom = derive(model)
        assert [str(x) for x in eom.q] == ["q_h_0", "eta_beam_0", "eta_beam_1"]
        assert [str(x) for x in eom.u] == ["u_h_0", "xi_beam_0", "xi_beam_1"]
        assert eom.mass_matrix.shape == (3, 3)


# ----------------------------------------------------------------------- central field


def _particle_body(seed=5, nk=6):
    """A flexible body of nk particles with two random modes (exact modal integrals),
    its particles as nodes; returns the body, the masses and the stiffness."""
    rng = np.random.default_rng(seed)
    r = rng.uniform(-1, 1, (nk, 3))
    m = rng.uniform(0.5, 1.5, nk)
    Psi = rng.uniform(-1, 1, (nk, 3, 2))
    Mpsi, P, H, L, N = particle_modes(r, m, Psi)
    K = np.diag([30.0, 50.0])
    mass = m.sum()
    com = m @ r / mass
    d = r - com
    I = np.einsum("k,kj,kj->", m, d, d) * np.eye(3) - np.einsum("k,ki,kj->ij", m, d, d)
    modes = kd.Modes(Mpsi, K, P=P, H=H, L=L, N=N, node_positions=r, Psi=Psi)
    return kd.Body("flex", mass, I, com=com, modes=modes), m, K


def _field_forces_against_particles(body, m, K, R0):
    """Kane's generalized active forces of a central field (μ = R0³: unit orbital rate)
    on a free flexible body, at zero speeds, and the same from Newton's law on each
    particle, ``Σ_k f_k · ∂x_k/∂q_r`` (central differences of the particles' deflected
    positions; q̇ = u for the gimbal, the slides and the modes)."""
    mu = R0**3
    center = np.array([-R0, 0.3 * R0, 0.2 * R0])
    root = kd.Joint("root", None, "flex", rot_type="gimbal", rot_dof=3, rot_seq="123", trn_dof=3)
    model = kd.Model([body], [root], gravity=kd.CentralGravity(mu=mu, center=center))
    assert model.nq == model.n == 6
    q = np.array([0.3, -0.2, 0.5, 0.1, 0.2, -0.1, 0.3, -0.2])
    u = np.zeros(8)
    f = kd.forcing(model, kd.State(q, u))
    f[6:] += K @ q[6:]  # leave the field's forces alone

    def positions(q):
        s = kd.State(q, u)
        return np.array([flex.node_motion(model, s, "flex", k).position
                         for k in body.modes.node_names])  # fmt: skip

    x = positions(q) - center
    fk = -mu * m[:, None] * x / np.linalg.norm(x, axis=1)[:, None] ** 3
    Q = np.zeros(8)
    h = 1e-5
    for j in range(8):
        e = np.zeros(8)
        e[j] = h
        Q[j] = np.sum(fk * (positions(q + e) - positions(q - e))) / (2 * h)
    return f, Q


def test_central_field_on_a_flexible_body_against_newton_on_its_particles():
    """The field's generalized forces on a body of particles whose displacements are the
    modes, against the exact inverse-square force on every particle. The model keeps
    the field to second order in the body's size (MacCullagh's order), so the
    difference is the third-order term: it halves as the distance doubles at a fixed
    gravity gradient (μ = R0³), while the second-order terms it keeps are O(1) (the
    first-order-only model is 0.99 off at R0 = 200)."""
    body, m, K = _particle_body()
    errors = []
    for R0 in (200.0, 400.0):
        f, Q = _field_forces_against_particles(body, m, K, R0)
        errors.append(np.abs(f - Q).max())
    assert errors[0] < 0.05
    assert 0.4 < errors[1] / errors[0] < 0.6


def test_central_field_without_the_gravity_gradient_on_the_modes_fails(monkeypatch):
    """Keep only the first-order terms (the displaced mass in the field at the mass
    centre): the difference from the particles is then O(1), not the third-order term."""
    body, m, K = _particle_body()

    def first_order(ar, md, eta, mu, com, r):
        g0 = -mu * r / np.linalg.norm(r) ** 3
        cf = modal.first_moment(md, eta)
        return np.concatenate([np.cross(cf, g0), np.zeros(3), md.P.T @ g0])

    monkeypatch.setattr(flex, "modal_central_forces", first_order)
    f, Q = _field_forces_against_particles(body, m, K, 200.0)
    assert np.abs(f - Q).max() > 0.5


def _orbiting_hub_beam(R0=50.0):
    """_free_hub_beam's hub and beam on a circular orbit of radius R0 in a field of unit
    orbital rate (μ = R0³), the field's centre at N's origin."""
    model, s = _free_hub_beam()
    model = kd.Model(model.bodies, model.joints, gravity=kd.CentralGravity(mu=R0**3))
    q, u = s.q.copy(), s.u.copy()
    q[3:6] += (R0, 0.0, 0.0)
    u[3:6] += (0.0, R0, 0.0)  # v = √(μ/R0)
    return model, kd.State(q, u)


def test_torque_free_flexible_body_in_a_central_field_conserves_energy_and_momentum():
    """With the field on the elastic motion, energy (strain energy and the field's
    potential of the displaced mass included) and the angular momentum about the field's
    centre are conserved to RK4's accuracy; the gravity gradient (n² = 1 s⁻²) is
    comparable to the beam's stiffness here. (With only the first-order terms the
    energy drifts by 2e-5 over the same run.)"""
    model, s0 = _orbiting_hub_beam()
    s1 = _rk4(model, s0, 4e-3, 75)
    E0, E1 = _energy(model, s0), _energy(model, s1)

    def H_about_centre(s):  # H_c + c × P, c the deformed system's mass centre
        P, Hc = kd.momentum(model, s)
        kin = kd.kinematics(model, s)
        cf = kin.R_N_B[1] @ modal.first_moment(model.bodies[1].modes, s.q[model.nq :])
        c = (kin.params.mass @ kin.r + cf) / kin.params.mass.sum()
        return Hc + np.cross(c, P)

    H0, H1 = H_about_centre(s0), H_about_centre(s1)
    assert abs(E1 - E0) / abs(E0) < 1e-8
    assert np.abs(H1 - H0).max() / np.abs(H0).max() < 1e-8
