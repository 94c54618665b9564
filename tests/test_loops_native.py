"""Closed loops on the native engine.

The native kernel closes the tree by the constraint force method on its ABA
(:func:`kanedyn.dynamics.loop_rows.constrained_accelerations`: ``u̇ = u̇₀ + M⁻¹A_rᵀλ``),
the dense engine by eliminating dependent speeds (``(CᵀMC) u̇_i = Cᵀ(f - M c₀)``, a
CRBA mass matrix and a QR partition): two algorithms, each the other's oracle. The
accelerations are also held against the absolute-coordinate Newton-Euler DAE with
multipliers (tests/loop_oracles.py), and a run against the dense run, against energy
conservation and against the loop residuals.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import kanedyn as kd
from kanedyn.compiled import native
from kanedyn.dynamics import loops
from tests.test_loops import dae_state, four_bar_dae, random_assembled, spatial_slider_crank_dae
from tests.test_mbs_benchmarks import n_four_bar

pytestmark = pytest.mark.skipif(native.unavailable() is not None, reason="needs llvmlite")

MODELS = {
    "four_bar": kd.examples.four_bar,
    "four_bar_spatial_hinge": lambda: kd.examples.four_bar(planar=False),
    "slider_crank": kd.examples.slider_crank,
    "slider_crank_spatial": lambda: kd.examples.slider_crank(spatial=True),
    "n_four_bar": lambda: n_four_bar(3),
    "parallel_3rrr": kd.examples.parallel_3rrr,
    "bricard": kd.examples.bricard,
}


@pytest.mark.parametrize("name", MODELS)
def test_native_accelerations_match_the_dense_engine(name):
    """The kernel, and the kernel without the bias cut that the native RK4 loop's later
    stages take clear of a singular configuration (kernels.traced(cut=False))."""
    from kanedyn.compiled import kernels

    model = MODELS[name]()
    cm = kd.compile_model(model)
    assert cm.backend == "native"
    uncut = kernels.traced(model, frozenset(), False, False, efforts=True, cut=False)
    for seed in range(4):
        s = random_assembled(model, seed)
        dense = kd.forward_dynamics(model, s)
        tol = 1e-12 * max(1.0, np.abs(dense).max())
        np.testing.assert_allclose(cm.forward_dynamics(s), dense, rtol=0, atol=tol)
        np.testing.assert_allclose(_evaluate(uncut, model, s.q, s.u)[: model.n], dense, rtol=0,
                                   atol=tol)  # fmt: skip


@pytest.mark.parametrize(("name", "dae"), [("four_bar", four_bar_dae),
                                           ("slider_crank_spatial", spatial_slider_crank_dae)])  # fmt: skip
def test_native_accelerations_match_the_absolute_coordinate_dae(name, dae):
    model = MODELS[name]()
    oracle = dae(model)
    cm = kd.compile_model(model)
    for seed in range(2):
        s = random_assembled(model, seed)
        r, R, v, w = dae_state(model, s, oracle)
        a_ref, wd_ref, _ = oracle.accelerations(r, R, v, w)
        acc = cm.forward_dynamics(s)
        par = kd.partials(model, s)
        np.testing.assert_allclose(par.Omega_u @ acc[: model.nu] + par.alpha_r, wd_ref,
                                   atol=1e-9)  # fmt: skip
        np.testing.assert_allclose(par.V @ acc + par.a_r, a_ref, atol=1e-9)


@pytest.fixture(scope="module")
def four_bar_runs():
    model = kd.examples.four_bar()
    s = random_assembled(model, 5)
    kw = dict(t_final=0.05, dt=1e-3, output_every=0.01)
    return (
        model,
        kd.simulate(model, s, engine="compiled", **kw),
        kd.simulate(model, s, engine="dense", **kw),
    )


def test_native_run_matches_the_dense_run(four_bar_runs):
    model, nat, den = four_bar_runs
    assert nat.engine == "native" and den.engine != "native"
    np.testing.assert_allclose(nat.q, den.q, atol=1e-11)
    np.testing.assert_allclose(nat.u, den.u, atol=1e-10)
    assert nat.loop_residual.max() < 1e-12


def test_native_run_conserves_energy_and_stays_closed():
    """An undamped four-bar under gravity for 5 s: RK4 at 1 ms with the projection keeps
    the total energy to 1e-9 (relative) and the loops closed to round-off."""
    model = kd.examples.four_bar()
    s = random_assembled(model, 2)
    traj = kd.simulate(model, s, 5.0, 1e-3, engine="compiled", output_every=0.05)
    E = traj.total_energy
    assert np.abs(E - E[0]).max() / np.abs(E).max() < 1e-9
    for q, u in zip(traj.q, traj.u, strict=True):
        phi, vel = loops.residuals(model, q, u)
        assert phi < 1e-12 and vel < 1e-11


def test_ensemble_of_a_looped_model_runs_natively():
    model = kd.examples.slider_crank()
    members = [random_assembled(model, seed) for seed in range(3)]
    states = kd.States(np.array([m.q for m in members]), np.array([m.u for m in members]))
    ens = kd.simulate_ensemble(model, states, 0.03, 1e-3, output_every=0.01)
    for b, s in enumerate(members):
        one = kd.simulate(model, s, 0.03, 1e-3, engine="dense", output_every=0.01)
        np.testing.assert_allclose(ens.q[:, b], one.q, atol=1e-12)
    bad = kd.States(states.q + 0.1, states.u)
    with pytest.raises(kd.ModelError, match="member 0: the initial state does not close"):
        kd.simulate_ensemble(model, bad, 0.2, 1e-3)


def test_monte_carlo_disperses_a_looped_model():
    model = kd.examples.four_bar()
    s = random_assembled(model, 1)
    res = kd.monte_carlo(
        model, s, [kd.Dispersion("coupler.mass", "uniform", low=0.9, high=1.1, relative=True)],
        n=4, t_final=0.1, dt=1e-3,
    )  # fmt: skip
    assert res.ok.shape == (4,) and res.ok.all()


def test_baumgarte_runs_on_the_dense_engine_and_compiled_refuses_it():
    model = kd.examples.four_bar()
    s = random_assembled(model, 1)
    traj = kd.simulate(model, s, 0.01, 1e-3, stabilization="baumgarte")
    assert traj.engine != "native"
    with pytest.raises(kd.ModelError, match="stabilization='projection'"):
        kd.simulate(model, s, 0.01, 1e-3, stabilization="baumgarte", engine="compiled")


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "parallel_3rrr"])
def test_linearize_on_the_independent_speeds_matches_finite_differences(name):
    """``kd.linearize`` about an assembled (moving) state, on the independent speeds,
    against central differences of the dense engine's accelerations at states assembled
    with the independent coordinates and rates perturbed."""
    model = MODELS[name]()
    s = random_assembled(model, 3)
    lin = kd.linearize(model, s)
    k = len(lin.state_names) // 2
    joints = [x.split(".")[0] for x in lin.state_names[:k]]
    assert model.n - loops.loop_summary(model, s).rank == k
    speeds = [int(model.speeds(j)[0]) for j in joints]
    coords = [int(model.coordinates(j)[0]) for j in joints]
    np.testing.assert_allclose(lin.A[:k], np.hstack((np.zeros((k, k)), np.eye(k))), atol=1e-12)

    def acc(i, dq, du):
        q, u = s.q.copy(), s.u.copy()
        q[coords[i]] += dq
        u[speeds[i]] += du
        st = model.assemble(kd.State(q, u), fix=joints)
        return kd.forward_dynamics(model, st)[speeds]

    h = 1e-5
    for i in range(k):
        np.testing.assert_allclose(lin.A[k:, i], (acc(i, h, 0) - acc(i, -h, 0)) / (2 * h),
                                   rtol=1e-6, atol=1e-6)  # fmt: skip
        np.testing.assert_allclose(lin.A[k:, k + i], (acc(i, 0, h) - acc(i, 0, -h)) / (2 * h),
                                   rtol=1e-6, atol=1e-6)  # fmt: skip


# --------------------------------------------------------------------------- row choice
def test_pivoted_solve_chooses_independent_rows():
    """``plucker.solve_pivoted`` on ``G = A Aᵀ`` whose first rows are dependent (an
    unpivoted LDLᵀ meets a zero pivot there) solves every row, on ``rank`` rows, as the
    least-squares solution of numpy does."""
    from kanedyn.spatial import plucker
    from kanedyn.spatial.arithmetic import NUMPY

    rng = np.random.default_rng(4)
    B = rng.normal(size=(3, 7))
    A = np.vstack((B[0], 2.0 * B[0], B[1], B[1] - 0.5 * B[2], B[2]))  # rank 3 of 5
    G = A @ A.T
    b = A @ rng.normal(size=7)
    with pytest.raises(ZeroDivisionError):
        plucker.solve_spd([[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0]])  # exact zero pivot
    lam = np.array(plucker.solve_pivoted(NUMPY, G.tolist(), [b.tolist()], 3)[0], dtype=float)
    np.testing.assert_allclose(G @ lam, b, atol=1e-12)
    assert np.count_nonzero(lam) == 3
    lsq = np.linalg.lstsq(G, b, rcond=None)[0]
    np.testing.assert_allclose(A.T @ lam, A.T @ lsq, atol=1e-12)  # the same constraint force


@pytest.fixture(scope="module")
def a04_degenerate():
    """Bricard's A04 from rest (five rows, rank four): the state at 1.2 s, and the state
    where the rows chosen at assembly (:func:`loops.independent_rows`) become dependent
    (the redundant row's weight in the left null vector of A crosses zero near 1.248 s,
    found by the secant method on native RK4 runs from 1.2 s)."""
    model = kd.examples.bricard(spec="iftomm")
    s12 = kd.simulate(model, model.initial_state(), 1.2, 0.005, output_every=1.2).state(-1)
    rows0 = list(loops.independent_rows(model))
    (dropped,) = set(range(loops.loop_plan(model).m)) - set(rows0)

    def at(tau):
        return kd.simulate(model, s12, tau, tau / 20, output_every=tau).state(-1)

    def weight(s):
        w = np.linalg.svd(loops.loop_terms(model, s.q).A.T)[2][-1]  # wᵀA = 0
        return w[dropped] / w[np.argmax(np.abs(w))]  # the sign of SVD's w fixed

    (a, fa), (b, fb) = (0.03, weight(at(0.03))), (0.06, weight(at(0.06)))
    assert fa * fb < 0
    for _ in range(8):
        if fb == fa:
            break
        a, fa, b = b, fb, b - fb * (b - a) / (fb - fa)
        fb = weight(at(b))
    return model, s12, at(b), rows0


def test_native_kernel_chooses_the_rows_again_where_the_assembly_rows_degrade(a04_degenerate):
    """At the state where the rows chosen at assembly are dependent (their condition
    number above 1e8), the constraint force method on those rows (the native kernel's
    former fixed choice) is off by order one, while the native kernel, which chooses the
    rows at every evaluation, agrees with the dense engine's partition (chosen again by
    its pivoted QR) to round-off."""
    from kanedyn.dynamics import loop_rows
    from kanedyn.dynamics.recursion import Recursion

    model, _, s, rows0 = a04_degenerate
    assert np.linalg.cond(loops.loop_terms(model, s.q).A[rows0]) > 1e8
    dense = kd.forward_dynamics(model, s)
    scale = np.abs(dense).max()
    cm = kd.compile_model(model)
    np.testing.assert_allclose(cm.forward_dynamics(s), dense, rtol=0, atol=1e-12 * scale)
    rec = Recursion(model, s.q.tolist(), s.u.tolist())
    fixed = loop_rows.constrained_accelerations(rec, loops.loop_plan(model), rows0)[0]
    assert np.abs(np.array(fixed, dtype=float) - dense).max() > 1e-3 * scale


def test_adaptive_native_run_through_the_degenerate_rows(a04_degenerate):
    """DOP853 with ``engine="compiled"`` runs the A04 mechanism natively through the
    state where the assembly's rows are dependent (with the rows fixed, its steps
    collapsed there), and matches the dense engine's DOP853 at rtol 1e-12 to 1e-11, the
    loops closed to 1e-13. ``engine="auto"`` runs adaptive methods with loops natively."""
    model, s12, _, _ = a04_degenerate
    kw = dict(method="DOP853", output_every=0.01)
    run = kd.simulate(model, s12, 0.06, rtol=1e-10, atol=1e-12, engine="compiled", **kw)
    assert run.engine == "native"
    auto = kd.simulate(model, s12, 0.01, rtol=1e-6, atol=1e-8, **kw)
    assert auto.engine == "native"
    ref = kd.simulate(model, s12, 0.06, rtol=1e-12, atol=1e-14, engine="dense", **kw)
    np.testing.assert_allclose(run.q, ref.q, atol=1e-11)
    np.testing.assert_allclose(run.u, ref.u, atol=1e-11)
    assert run.loop_residual.max() < 1e-13


@pytest.mark.slow
def test_rk4_run_through_the_degenerate_rows_matches_the_dense_run(a04_degenerate):
    """RK4 at 2 ms from 1.2 s through the degenerate row set: the native run equals the
    dense run to 1e-12 and both the dense DOP853 run at rtol 1e-12 to 1e-11."""
    model, s12, _, _ = a04_degenerate
    nat = kd.simulate(model, s12, 0.1, 0.002, output_every=0.01)
    den = kd.simulate(model, s12, 0.1, 0.002, output_every=0.01, engine="dense")
    ref = kd.simulate(model, s12, 0.1, method="DOP853", rtol=1e-12, atol=1e-14,
                      output_every=0.01, engine="dense")  # fmt: skip
    assert nat.engine == "native"
    np.testing.assert_allclose(nat.q, den.q, atol=1e-12)
    np.testing.assert_allclose(nat.u, den.u, atol=1e-12)
    np.testing.assert_allclose(nat.q, ref.q, atol=1e-11)
    assert nat.loop_residual.max() < 1e-13


# --------------------------------------------------------------------------- singular
@pytest.mark.parametrize(
    ("case", "kept"),
    [("dependent 1e-3", [0, 1, 2, 3]), ("dependent 1e-5", [0, 1, 2]),
     ("small first row", [1, 2, 3]), ("small middle row 2e-4", [0, 1, 2, 3])],
)  # fmt: skip
def test_truncated_solve_keeps_the_rows_the_gram_schmidt_keeps(case, kept):
    """``plucker.solve_spd_truncated`` on ``D = A Aᵀ`` of four rows, one of them nearly
    dependent on the rows before it or itself short: the rows kept are those whose part
    independent of the rows before them (``|R_jj|`` of numpy's unpivoted QR of ``Aᵀ``)
    is at least ``SINGULAR_RCOND`` (1e-4) of the longest row, and ``Aᵀx`` is the
    minimum-norm solution of the kept rows (``numpy.linalg.lstsq`` on them). Through
    ``loop_rows.cut_bias`` the bias of a kept row is unchanged and a row left out takes
    the bias the kept rows imply, ``A x``."""
    from kanedyn.dynamics import loop_rows
    from kanedyn.dynamics.recursion import Recursion
    from kanedyn.spatial import plucker
    from kanedyn.spatial.arithmetic import NUMPY

    rng = np.random.default_rng(7)
    B = np.linalg.qr(rng.normal(size=(6, 4)))[0].T  # orthonormal rows
    A = {
        "dependent 1e-3": np.vstack((B[0], B[1], B[2], 0.8 * B[0] + 0.6 * B[1] + 1e-3 * B[3])),
        "dependent 1e-5": np.vstack((B[0], B[1], B[2], 0.8 * B[0] + 0.6 * B[1] + 1e-5 * B[3])),
        "small first row": np.vstack((1e-5 * (B[0] + B[1]), 2 * B[1], B[2], B[3])),
        "small middle row 2e-4": np.vstack((B[0], 2e-4 * (B[1] + B[2]), B[2], B[3] + B[0])),
    }[case]
    b = rng.normal(size=4)
    R = np.linalg.qr(A.T, mode="r")
    longest = np.linalg.norm(A, axis=1).max()
    assert list(np.nonzero(np.abs(np.diag(R)) >= 1e-4 * longest)[0]) == kept
    mu = plucker.solve_spd_truncated(NUMPY, (A @ A.T).tolist(), b.tolist(), 1e-4)
    x = A.T @ np.array(mu, dtype=float)
    ref = np.linalg.lstsq(A[kept], b[kept], rcond=None)[0]
    cond = np.linalg.cond(A[kept] @ A[kept].T)  # the normal equations' round-off
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-14 * cond * np.abs(ref).max())
    rec = Recursion(kd.examples.four_bar(), [0.0] * 3, [0.0] * 3)  # its arithmetic only
    cut = np.array(loop_rows.cut_bias(rec, A.tolist(), b.tolist()), dtype=float)
    tol = 1e-14 * cond * np.abs(b).max()
    np.testing.assert_allclose(cut[kept], b[kept], rtol=0, atol=tol)
    left = [i for i in range(4) if i not in kept]
    np.testing.assert_allclose(cut[left], (A @ ref)[left], rtol=0, atol=tol)
    if left:
        assert np.abs(cut[left] - b[left]).max() > 0.1  # the bias of those rows was cut


@pytest.fixture(scope="module")
def n_four_bar_near_singular():
    """The 3-parallelogram N-four-bar (A02) started at -1 rad/s from its rods vertical,
    run to 5 ms before its rods are horizontal (the singular configuration, where three
    of the loop rows shrink to zero, at ``t*`` of the 1-DOF closed form: a pendulum with
    ``I = (N+1)/3 + N``, ``V ∝ ((N+1)/2 + N) g sin θ``): (model, state, ``t*`` - t0,
    the closed form's right-hand side)."""
    N = 3
    model = n_four_bar(N)
    I_eff, k_g = (N + 1) / 3 + N, 9.81 * ((N + 1) / 2 + N)

    def pendulum(t, x):
        return [x[1], -k_g * np.cos(x[0]) / I_eff]

    def horizontal(t, x):
        return x[0]

    horizontal.terminal = True  # type: ignore[attr-defined]
    sol = scipy.integrate.solve_ivp(pendulum, (0, 2), [np.pi / 2, -1.0], events=horizontal,
                                    method="DOP853", rtol=1e-13, atol=1e-13)  # fmt: skip
    t_star = float(sol.t_events[0][0])
    s0 = model.assemble(model.set_joint(model.initial_state(), "p0", rates=[-1.0]), fix=["p0"])
    t0 = t_star - 0.005
    pre = kd.simulate(model, s0, t0, method="DOP853", rtol=1e-12, atol=1e-12, output_every=t0,
                      engine="dense")  # fmt: skip
    return model, kd.State(pre.q[-1], pre.u[-1]), t_star - t0, pendulum


@pytest.mark.slow
def test_native_accelerations_match_the_dense_engine_at_the_singular_configuration(
    n_four_bar_near_singular,
):
    """At states ever closer to the N-four-bar's singular configuration (the smallest
    singular value of A from 1e-3 to 1e-9 of the largest, before and after it: on both
    sides of the cut that leaves out the bias of rows nearly dependent or short,
    ``loop_rows.cut_bias``), the native kernel's accelerations equal the dense engine's
    (its speed partition and truncated SVD) to 1e-10 of the largest, and 3 ms away the
    rods' angular acceleration is the closed form's pendulum, ``θ̈ = -k_g cos θ / I``.
    Without the cut, at 2e-5 the native kernel was 1e-3 from the dense one, and 1e1 at
    2e-9."""
    model, s, dt_star, pendulum = n_four_bar_near_singular
    cm = kd.compile_model(model)
    assert cm.backend == "native"
    p0, w0 = model.coordinates("p0")[0], model.speeds("p0")[0]
    ratios = []
    for before in (3e-3, 3e-4, 3e-5, 3e-6, 3e-7, 3e-8, 3e-9, -3e-9, -3e-6, -3e-4):
        run = kd.simulate(model, s, dt_star - before, method="DOP853", rtol=1e-13, atol=1e-13,
                          output_every=dt_star - before, engine="dense")  # fmt: skip
        st = kd.State(run.q[-1], run.u[-1])
        sv = np.linalg.svd(loops.loop_terms(model, st.q).A, compute_uv=False)
        ratios.append(sv[-1] / sv[0])
        dense = kd.forward_dynamics(model, st)
        np.testing.assert_allclose(cm.forward_dynamics(st), dense, rtol=0,
                                   atol=1e-10 * np.abs(dense).max())  # fmt: skip
        if ratios[-1] > 1e-3:  # nearer, the state's round-off off the branch is amplified
            theta = np.pi / 2 + st.q[p0]
            assert dense[w0] == pytest.approx(pendulum(0, [theta, st.u[w0]])[1], abs=1e-7)
    assert min(ratios) < 1e-8 < 1e-3 < max(ratios)  # both sides of the cut were visited


def test_adaptive_run_through_the_singular_configuration_is_native(n_four_bar_near_singular):
    """DOP853 at rtol = atol = 1e-12 from 5 ms before the N-four-bar's rods are horizontal
    to 5 ms after: ``engine="auto"`` runs it natively, it completes, its rod angle is within 1e-10 rad of the closed form's, the
    loops stay closed to 1e-12, and it equals the dense engine's run to 1e-10 in q (past
    t* the rods' angles spread by about 5e-11 in either engine: the round-off of the
    state at the bifurcation, amplified by 1/σ). (Without the native kernel's cut, this
    run's steps collapsed near t*.)"""
    model, s, dt_star, pendulum = n_four_bar_near_singular
    T = 2 * dt_star
    # no output at t* itself: a state there is the bifurcation, where the round-off of
    # the state (of either engine) is amplified by 1/σ
    kw = dict(method="DOP853", rtol=1e-12, atol=1e-12, output_every=T / 7)
    nat = kd.simulate(model, s, T, **kw)
    den = kd.simulate(model, s, T, engine="dense", **kw)
    assert nat.engine == "native" and den.engine == "dense"
    assert nat.status == den.status == "completed"
    np.testing.assert_allclose(nat.q, den.q, rtol=0, atol=1e-10)
    p0, w0 = model.coordinates("p0")[0], model.speeds("p0")[0]
    x0 = [np.pi / 2 + s.q[p0], s.u[w0]]
    ref = scipy.integrate.solve_ivp(pendulum, (0, T), x0, t_eval=nat.t, method="DOP853",
                                    rtol=1e-13, atol=1e-13).y[0]  # fmt: skip
    for tr in (nat, den):
        np.testing.assert_allclose(np.pi / 2 + tr.q[:, p0], ref, rtol=0, atol=1e-10)
        assert tr.loop_residual.max() < 1e-12


def _evaluate(tr, model, q, u):
    """A traced kernel of :mod:`kanedyn.compiled.kernels` on one state (its Python
    form; efforts zero)."""
    from kanedyn.compiled import python

    fn = python.build(python.source(tr.tape, "f", tr.args, tr.outputs), "f",
                      python.SCALAR_NAMESPACE)  # fmt: skip
    return np.array(fn(*q, *u, *np.zeros(len(tr.args) - q.size - u.size)), dtype=float)


@pytest.mark.parametrize("name", ["four_bar", "slider_crank_spatial", "parallel_3rrr", "bricard"])
@pytest.mark.parametrize("drift", [0.0, 1e-6])
def test_step_end_kernel_is_the_dense_projection_then_the_accelerations(name, drift):
    """The native RK4 loop's step end (kernels.settled), on a state with speeds off the
    manifold and coordinates closed or open by about ``drift``: the dense engine's
    projection (its Newton iteration to 1e-13, where the kernel takes one step: the same
    coordinates to Newton's quadratic convergence; Bricard's redundant rows, of which
    each engine solves its own independent ones, close at another point of the
    manifold) and then the dense engine's accelerations at the projected state; and
    ``clear`` is 1.0 at these states, away from a singular configuration."""
    from kanedyn.compiled import kernels

    model = MODELS[name]()
    tr = kernels.settled(model, frozenset())
    nq, n = model.nq, model.n
    rng = np.random.default_rng(3)
    for seed in range(2):
        s = random_assembled(model, seed)
        q = s.q + drift * rng.normal(size=nq)
        u = s.u + 1e-3 * rng.normal(size=n)  # off the velocity constraint
        out = _evaluate(tr, model, q, u)
        clear, q1, u1, rates = out[0], out[1 : 1 + nq], out[1 + nq : 1 + nq + n], out[1 + nq + n :]
        assert clear == 1.0
        q_dense = loops.project(model, q, u)[0]
        if name == "bricard" and drift:
            assert loops.residuals(model, q1, np.zeros(n))[0] < 1e-10
        else:
            np.testing.assert_allclose(q1, q_dense, rtol=0, atol=1e-10 if drift else 1e-15)
        tol = 1e-10 if drift else 1e-12  # one Newton step against the dense iteration
        _, up, _ = loops.project(model, q1, u)
        np.testing.assert_allclose(u1, up, rtol=0, atol=tol)
        dense = kd.forward_dynamics(model, kd.State(q1, u1))
        np.testing.assert_allclose(rates[:n], dense, rtol=0,
                                   atol=tol * max(1.0, np.abs(dense).max()))  # fmt: skip


def test_step_into_a_singular_configuration_is_taken_again_with_the_cut(
    n_four_bar_near_singular,
):
    """The native RK4 loop takes a step's later stages without the cut of the bias
    (``kernel_uncut``) where the step starts clear of a singular configuration
    (loop_rows.CUT_MARGIN), and takes the step again with the cut where it ends within
    the margin. Two steps of 6 ms, the second from 6 ms before the rods are horizontal
    (clear: its rows' Gram-Schmidt lengths, from numpy's QR, are all above 1e-2 of the
    longest) to just past it (within the cut): they must be those of a loop that cuts at
    every stage, to the bit."""
    from kanedyn.compiled import kernels
    from kanedyn.dynamics import loop_rows

    model, s, t_left, _ = n_four_bar_near_singular
    keep = list(loops.independent_rows(model))

    def independent_lengths(q):
        Ar = loops.loop_terms(model, q).A[keep]
        r = np.abs(np.diag(np.linalg.qr(Ar.T, mode="r")))
        return r / np.linalg.norm(Ar, axis=1).max()

    h = 6e-3
    back = 2 * h - 2e-7 - t_left  # the mechanism is conservative: run back in time by
    rev = kd.simulate(model, kd.State(s.q, -s.u), back, method="DOP853", rtol=1e-12,
                      atol=1e-12, output_every=back, engine="dense")  # fmt: skip
    x = np.concatenate([rev.q[-1], -rev.u[-1]])  # 2h - 2e-7 before the rods are horizontal

    tr = kernels.traced(model, frozenset(), False, False, efforts=True)
    settle = kernels.settled(model, frozenset())
    uncut = kernels.traced(model, frozenset(), False, False, efforts=True, cut=False)
    quats = model.layout.quat_q.tolist()
    ends = []
    for extra in ((), (uncut,)):
        code = native.build(tr, model.nq, model.n, model.n, quats, None, settle, *extra)
        y, out = x.copy(), np.empty((3, x.size))
        assert code.rk4(y, 2, h, 0, 1, out) == 0
        ends.append(out[:2])
    middle, end = ends[0]
    margin = loop_rows.CUT_MARGIN * loop_rows.SINGULAR_RCOND
    assert independent_lengths(middle[: model.nq]).min() > margin
    assert independent_lengths(end[: model.nq]).min() < loop_rows.SINGULAR_RCOND
    np.testing.assert_array_equal(ends[1], ends[0])
