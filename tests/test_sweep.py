"""Tests of the vector-mode derivatives (kanedyn.compiled.sweep) and the native kernels'
loop finiteness check.

Oracles: the scalar forward mode (:func:`kanedyn.compiled.derivatives.jacobian`, sparse
dictionaries of traced values, one per direction: a different implementation of the
same rules, which must give the same numbers to the bit); forward mode on the whole ABA
(:func:`~kanedyn.compiled.derivatives.derivative_kernel`, a different algorithm);
Pinocchio's ``computeABADerivatives`` on a 50-link chain; ``numpy.isfinite``.
"""

from __future__ import annotations

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.compiled import kernels, native, python, runtime
from kanedyn.compiled.derivatives import derivative_kernel, residual_kernel, unrolled
from kanedyn.compiled.llvm import _NOT_FINITE, WIDTH
from kanedyn.compiled.sweep import plan
from tests.test_batch import random_tree
from tests.test_compiled import draw_state
from tests.test_linearize import revolute_chain

pytestmark = pytest.mark.skipif(native.unavailable() is not None,
                                reason=f"native code: {native.unavailable()}")  # fmt: skip


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KANEDYN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def forests() -> list[tuple[int, kd.Model]]:
    """Random trees with several roots possible, every joint kind, joints listed in
    random order: more than one block of lanes, seeds in the middle of a block,
    tangents whose range starts after lane 0 and hulls with holes."""
    out = []
    for seed in range(60):
        model = random_tree(seed)
        if kernels.supports(model) is None and model.n > WIDTH:
            out.append((seed, model))
    return out[:12]


def native_and_python(model: kd.Model, locked: frozenset[int], x: np.ndarray, tau: np.ndarray):
    """The residual kernel's outputs: native (vector sweeps) and generated Python
    (the sweeps unrolled to scalar forward mode)."""
    tr = residual_kernel(model, locked)
    quats = model.layout.quat_q.tolist()
    nc = native.build(tr, model.nq, model.n, model.n, quats)
    assert nc.rhs_into(x, tau)
    flat = unrolled(tr)
    fn = python.build(python.source(flat.tape, "f", flat.args, flat.outputs), "f",
                      python.SCALAR_NAMESPACE)  # fmt: skip
    return nc.out.copy(), np.array(fn(*x, *tau), dtype=float)


@pytest.mark.parametrize(
    "seed, model", forests(), ids=lambda v: str(v) if isinstance(v, int) else ""
)
def test_vector_sweeps_equal_scalar_forward_mode_to_the_bit(seed, model):
    rng = np.random.default_rng(seed)
    locked = frozenset(int(r) for r in rng.choice(model.n, size=model.n // 4, replace=False))
    state = draw_state(model, seed, 1.0)
    x, tau = np.concatenate([state.q, state.u]), rng.normal(size=model.n)
    got, want = native_and_python(model, locked, x, tau)
    assert got.shape == want.shape
    assert np.array_equal(got, want), np.max(np.abs(got - want))


def test_scratch_from_the_heap(monkeypatch):
    """Above ``STACK_SCRATCH`` bytes the sweeps' scratch comes from malloc (a thread's
    stack may be 512 KiB): the same bits as the scalar mode, on every call."""
    from kanedyn.compiled import llvm

    monkeypatch.setattr(llvm, "STACK_SCRATCH", 0)
    seed, model = forests()[1]
    tr = residual_kernel(model)
    nc = native.build(tr, model.nq, model.n, model.n, model.layout.quat_q.tolist())
    assert "@malloc" in nc.ir and "call void @free" in nc.ir
    rng = np.random.default_rng(seed)
    flat = unrolled(tr)
    fn = python.build(python.source(flat.tape, "f", flat.args, flat.outputs), "f",
                      python.SCALAR_NAMESPACE)  # fmt: skip
    for _ in range(3):
        state = draw_state(model, int(rng.integers(1 << 30)), 1.0)
        x, tau = np.concatenate([state.q, state.u]), rng.normal(size=model.n)
        assert nc.rhs_into(x, tau)
        assert np.array_equal(nc.out, np.array(fn(*x, *tau), dtype=float))


@pytest.mark.parametrize(
    "seed, model", forests()[:6], ids=lambda v: str(v) if isinstance(v, int) else ""
)
def test_residual_route_equals_forward_mode_on_the_aba(seed, model):
    """The Jacobian assembled from the sweeps (``M⁻¹ (-∂R/∂x)``, ``M⁻¹``) against
    forward mode on the ABA, the other algorithm."""
    state = draw_state(model, seed + 1, 1.0)
    x = np.concatenate([state.q, state.u])
    tau = np.random.default_rng(seed).normal(size=model.n)
    tr = residual_kernel(model, frozenset())
    nc = native.build(tr, model.nq, model.n, model.n, model.layout.quat_q.tolist())

    def kernel(x_, tau_):
        nc.rhs_into(x_, tau_)
        return nc.out.copy()

    got = runtime._assembled(kernel, model.nq, model.n)(x, tau)
    ref, m = derivative_kernel(model, frozenset())
    fn = python.build(
        python.source(ref.tape, "f", ref.args, ref.outputs), "f", python.SCALAR_NAMESPACE
    )
    want = np.array(fn(*x, *tau), dtype=float)
    scale = max(1.0, float(np.max(np.abs(want))))
    cond = float(np.linalg.cond(kd.mass_matrix(model, state)))
    np.testing.assert_allclose(got, want, atol=1e-13 * max(1.0, cond) * scale)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(kd.examples.chain(50), id="planar", marks=pytest.mark.slow),
        pytest.param(revolute_chain(50, 50), id="random", marks=pytest.mark.slow),
    ],
)
def test_fifty_link_chain_against_pinocchio(model):
    """n = 50, the size the sweeps are for: ``cm.jacobian`` against Pinocchio's
    ``computeABADerivatives`` (``∂ν̇/∂q``, ``∂ν̇/∂u``, ``M⁻¹``), on the benchmarks'
    planar pendulum and on a chain of random axes, offsets, inertias, sliders and
    gravity."""
    pytest.importorskip("pinocchio", reason="pinocchio is not installed")
    from benchmarks.peers import pinocchio_peer

    assert model.n > runtime.RESIDUAL_ROUTE
    rng = np.random.default_rng(50)
    q, u, tau = rng.uniform(-1, 1, model.nq), rng.normal(size=model.n), rng.normal(size=model.n)
    rates, J = kd.compile_model(model).jacobian(q, u, tau)
    peer = pinocchio_peer(model)
    dq, du, Minv = peer.derivatives(q, u, tau)
    n = model.n
    np.testing.assert_allclose(rates[:n], peer.accelerations(q, u, tau), rtol=1e-9, atol=1e-9)
    scale = max(1.0, float(np.max(np.abs(dq))))
    np.testing.assert_allclose(J[:n, :n], dq, atol=1e-9 * scale)
    np.testing.assert_allclose(J[:n, n : 2 * n], du, atol=1e-9 * scale)
    np.testing.assert_allclose(J[:n, 2 * n :], Minv, atol=1e-9 * float(np.max(np.abs(Minv))))


def test_plan_groups_tangents_and_shares_scratch():
    """On a 50-link chain: far fewer groups (loops) than tangents, tangents stored only
    when read outside their group, and scratch slots shared between tangents whose uses
    do not overlap."""
    model = kd.examples.chain(50, spatial=True)
    tr = residual_kernel(model)
    sweeps = [plan(tr.tape, s) for s in tr.sweeps]
    for p in sweeps:
        nodes = sum(len(g.nodes) for g in p.groups)
        stored = [i for g in p.groups for i in g.stored]
        assert len(p.groups) < nodes / 3
        assert len(stored) < nodes
        need = sum(p.blocks[i][1] - p.blocks[i][0] for i in stored)
        assert p.size < need / 2
        # each segment lies in its group's range, and they tile it
        for g in p.groups:
            assert g.segments[0][0] == g.lo and g.segments[-1][1] == g.hi
            assert all(a[1] == b[0] for a, b in zip(g.segments, g.segments[1:], strict=False))


def _not_finite():
    import ctypes

    ir = "\n\n".join([
        f"declare i1 @llvm.vector.reduce.or.v{WIDTH}i1(<{WIDTH} x i1>)",
        _NOT_FINITE,
        "define i32 @check(ptr %a, i64 %n) {\n"
        "  %r = call i1 @not_finite(ptr %a, i64 %n)\n"
        "  %z = zext i1 %r to i32\n"
        "  ret i32 %z\n}",
    ])  # fmt: skip
    engine, _ = native._compile(ir)
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("check")
    )
    return engine, fn


def test_loop_finiteness_check_against_numpy():
    """The vector loop of large kernels' finiteness check: every position (vector part
    and tail), inf, -inf and NaN; finite extremes (max, subnormal, -0) pass."""
    engine, check = _not_finite()
    finite = [np.finfo(float).max, -np.finfo(float).max, 5e-324, -0.0, 1.0]
    for size in (0, 1, 3, 4, 5, 8, 67, 70):
        a = np.array([finite[i % len(finite)] for i in range(size)], dtype=float)
        assert check(a.ctypes.data, size) == int(not np.all(np.isfinite(a))) == 0
        for pos in range(size):
            for bad in (np.inf, -np.inf, np.nan):
                b = a.copy()
                b[pos] = bad
                assert check(b.ctypes.data, size) == 1, (size, pos, bad)
        # entries past n are not read
        c = np.append(a, np.nan)
        assert check(c.ctypes.data, size) == 0
    del engine


def test_jacobian_reports_a_singular_state():
    """The residual route at a state with an infinite speed: an error, not NaNs."""
    model = kd.examples.chain(12, spatial=True)
    cm = kd.compile_model(model)
    q = np.zeros(model.nq)
    u = np.zeros(model.n)
    u[3] = np.inf
    with pytest.raises(kd.ModelError):
        cm.jacobian(q, u)
