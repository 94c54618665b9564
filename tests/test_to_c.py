"""Tests of ``kd.codegen.to_c``: the standalone C compiled with the system C compiler
(skipped, with the reason, when there is none) and called through ctypes.

Oracles: the Python engine (``compile_model(..., backend="python")``) for the
right-hand side, ``kd.simulate`` (Python engine) for the RK4 step, the dense engine's
inverse mass matrix for ``∂ν̇/∂τ``, and the native derivatives (tests/test_linearize.py
holds those to finite differences and Pinocchio).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.errors import ModelError
from tests.test_compiled import draw_state

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc or clang) on PATH")


def small_spacecraft() -> kd.Model:
    """A free hub (quaternion) with a hinged, sprung and damped panel and a slider, on
    polynomial springs and dampers (MuJoCo's law: ``|v|`` is the C library's ``fabs``)."""
    hub = kd.Body("hub", mass=20.0, inertia=np.diag([4.0, 5.0, 6.0]))
    panel = kd.Body("panel", mass=2.0, inertia=np.diag([0.5, 0.2, 0.4]), com=[0.5, 0.0, 0.0])
    mass = kd.Body("mass", mass=1.0, inertia=np.diag([0.01, 0.01, 0.01]))
    joints = [
        kd.Joint.free("free", "hub", damping_poly=(0.05, 0.01)),
        kd.Joint.revolute("hinge", "hub", "panel", axis=2, inner_point=[1.0, 0.0, 0.0],
                          stiffness=3.0, damping=0.2, stiffness_poly=(-1.0, 4.0),
                          damping_poly=(0.3, 0.1)),
        kd.Joint.prismatic("slide", "hub", "mass", axis=1, stiffness=5.0,
                           stiffness_poly=(2.0, 8.0), damping_poly=(0.5, 0.0)),
    ]  # fmt: skip
    return kd.Model([hub, panel, mass], joints, gravity=[0.0, 0.0, -1.0])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    model = small_spacecraft()
    out = tmp_path_factory.mktemp("c")
    h, c = kd.codegen.to_c(model, out, prefix="sc")
    assert h.name == "sc.h" and c.name == "sc.c"
    if CC is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    lib = out / "libsc.so"
    res = subprocess.run(
        [CC, "-std=c99", "-O1", "-Wall", "-Wextra", "-pedantic", "-Werror", "-shared", "-fPIC",
         str(c), "-o", str(lib), "-lm"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return model, ctypes.CDLL(str(lib)), h.read_text()


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


@needs_cc
def test_c_rhs_equals_the_python_engine(built):
    model, lib, header = built
    nq, n = model.nq, model.n
    assert f"#define SC_NQ {nq}" in header and f"#define SC_N {n}" in header
    cp = kd.compile_model(model, backend="python")
    for seed in range(5):
        state = draw_state(model, seed, 2.0)
        x = np.concatenate((state.q, state.u))
        tau = np.zeros(n)
        out = np.empty(n + nq)
        assert lib.sc_rhs(_p(x), _p(tau), _p(out)) == 0
        assert out.tolist() == cp.rhs(state.q.tolist(), state.u.tolist())  # to the bit
        want = kd.forward_dynamics(model, state)
        np.testing.assert_allclose(out[:n], want, rtol=1e-10, atol=1e-10)


@needs_cc
def test_c_derivatives_equal_native_derivatives(built):
    model, lib, _ = built
    nq, n = model.nq, model.n
    state = draw_state(model, 11, 1.0)
    tau = np.linspace(-1.0, 1.0, n)
    x = np.concatenate((state.q, state.u))
    out = np.empty((n + nq) * (1 + nq + 2 * n))
    assert lib.sc_derivatives(_p(x), _p(tau), _p(out)) == 0
    rates, J = kd.compile_model(model).jacobian(state.q, state.u, tau)
    np.testing.assert_allclose(out[: n + nq], rates, rtol=1e-12, atol=1e-12)
    J_c = out[n + nq :].reshape(n + nq, nq + 2 * n)
    np.testing.assert_allclose(J_c, J, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(J_c[:n, nq + n :], np.linalg.inv(kd.mass_matrix(model, state)),
                               rtol=1e-9, atol=1e-12)  # fmt: skip


@needs_cc
def test_c_rk4_steps_equal_kd_simulate(built, monkeypatch):
    """Ten C steps reproduce ten steps of kd.simulate on the Python engine, bit for bit."""
    from kanedyn.compiled import native, tcc

    model, lib, _ = built
    state = draw_state(model, 3, 1.0)
    monkeypatch.setattr(native, "unavailable", lambda: "test")
    monkeypatch.setattr(tcc, "unavailable", lambda: "test")
    traj = kd.simulate(model, state, 0.1, 0.01, progress=False)
    x = np.concatenate((state.q, state.u))
    tau = np.zeros(model.n)
    lib.sc_rk4_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    for _ in range(10):
        assert lib.sc_rk4_step(_p(x), _p(tau), 0.01) == 0
    assert x[: model.nq].tolist() == traj.q[-1].tolist()
    assert x[model.nq :].tolist() == traj.u[-1].tolist()


def test_to_c_rejects_bad_prefix_and_uncompilable_models(tmp_path):
    with pytest.raises(ModelError, match="C identifier"):
        kd.codegen.to_c(kd.examples.chain(1), tmp_path, prefix="my-model")
    body = kd.Body("b", mass=1.0, inertia=np.eye(3))
    sprung = kd.Model([body], [kd.Joint.spherical("s", None, "b", stiffness=1.0)])
    with pytest.raises(ModelError, match="spherical joint has a spring"):
        kd.codegen.to_c(sprung, tmp_path)
