"""Tests of ``kd.codegen.to_c``: the standalone C compiled with each C compiler found
(gcc, clang; skipped, with the reason, when there is none) under the flight-software
flags ``-std=c99 -Wall -Wextra -Werror -pedantic``, and called through ctypes.

Oracles: the Python engine (``compile_model(..., backend="python")``) for the
right-hand side, ``kd.simulate`` (Python engine) for the RK4 step, the dense engine's
inverse mass matrix for ``∂ν̇/∂τ``, the native derivatives (tests/test_linearize.py
holds those to finite differences and Pinocchio), and a model rebuilt with other
numbers for the run-time parameters.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.compiled.c import runtime_parameters
from kanedyn.errors import ModelError
from tests.test_batch import random_tree
from tests.test_compiled import draw_state

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc or clang) on PATH")
#: the C compilers found, each of which the generated C must satisfy
COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)] or ([CC] if CC else [])
#: the flight-software flags: ISO C99, every warning an error
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def compile_shared(compiler: str, sources, lib) -> ctypes.CDLL:
    """``sources`` compiled with ``compiler`` and :data:`STRICT` into the library ``lib``."""
    res = subprocess.run(
        [compiler, *STRICT, "-O1", "-shared", "-fPIC", *map(str, sources), "-o", str(lib), "-lm"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(str(lib))


def params_struct(model: kd.Model) -> type[ctypes.Structure]:
    """The ctypes mirror of the generated ``prefix_params`` struct."""
    fields = [(p.field, ctypes.c_double) for p in runtime_parameters(model)]
    return type("Params", (ctypes.Structure,), {"_fields_": fields})


def small_spacecraft(panel_mass: float = 2.0, stiffness: float = 3.0) -> kd.Model:
    """A free hub (quaternion) with a hinged, sprung and damped panel and a slider, on
    polynomial springs and dampers (MuJoCo's law: ``|v|`` is the C library's ``fabs``)."""
    hub = kd.Body("hub", mass=20.0, inertia=np.diag([4.0, 5.0, 6.0]))
    panel = kd.Body("panel", mass=panel_mass, inertia=np.diag([0.5, 0.2, 0.4]), com=[0.5, 0.0, 0.0])
    mass = kd.Body("mass", mass=1.0, inertia=np.diag([0.01, 0.01, 0.01]))
    joints = [
        kd.Joint.free("free", "hub", damping_poly=(0.05, 0.01)),
        kd.Joint.revolute("hinge", "hub", "panel", axis=2, inner_point=[1.0, 0.0, 0.0],
                          stiffness=stiffness, damping=0.2, stiffness_poly=(-1.0, 4.0),
                          damping_poly=(0.3, 0.1)),
        kd.Joint.prismatic("slide", "hub", "mass", axis=1, stiffness=5.0,
                           stiffness_poly=(2.0, 8.0), damping_poly=(0.5, 0.0)),
    ]  # fmt: skip
    return kd.Model([hub, panel, mass], joints, gravity=[0.0, 0.0, -1.0])


@pytest.fixture(scope="module", params=COMPILERS or ["none"])
def built(request, tmp_path_factory):
    """The small spacecraft's C, folded (``sc``) and with run-time parameters and
    body-load inputs (``sr``, as the FMU has them), both with derivatives, compiled into
    one library by each compiler found."""
    model = small_spacecraft()
    out = tmp_path_factory.mktemp("c")
    h, c = kd.codegen.to_c(model, out, prefix="sc", derivatives=True)
    hr, cr = kd.codegen.to_c(model, out, prefix="sr", derivatives=True, parameters="runtime",
                             body_loads=True)  # fmt: skip
    assert h.name == "sc.h" and c.name == "sc.c"
    if not COMPILERS:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    lib = compile_shared(request.param, [c, cr], out / "libsc.so")
    return model, lib, h.read_text() + hr.read_text()


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
    lib.sc_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    for _ in range(10):
        assert lib.sc_step(_p(x), _p(tau), 0.01) == 0
    assert x[: model.nq].tolist() == traj.q[-1].tolist()
    assert x[model.nq :].tolist() == traj.u[-1].tolist()


@needs_cc
def test_c_body_loads_equal_the_dense_engine(built):
    """A torque and a force in body axes on each body (``loads``): the C's rates are
    kd.forward_dynamics' with kd.Torque and kd.Force records (frame="body", at the mass
    centre); the Jacobian of ``sr_derivatives`` (the residual route, loads held fixed)
    is the central difference of ``sr_rhs``."""
    model, lib, header = built
    nq, n, nb = model.nq, model.n, model.nb
    assert f"#define SR_NL {6 * nb}" in header
    assert "loads[9]   panel.force.x" in header and "loads[14]  mass.torque.z" in header
    p = params_struct(model).in_dll(lib, "sr_default_params")
    rng = np.random.default_rng(8)
    loads = rng.normal(size=6 * nb)
    records = []
    for i, body in enumerate(model.bodies):
        records += [kd.Torque(body.name, loads[6 * i : 6 * i + 3], frame="body"),
                    kd.Force(body.name, loads[6 * i + 3 : 6 * i + 6], frame="body")]  # fmt: skip
    tau = np.linspace(-1.0, 1.0, n)
    efforts = [kd.JointLoad(j.name, tau[idx]) for j, idx in
               zip(model.joints, model.layout.u_index, strict=True) if len(idx)]  # fmt: skip
    for seed in range(3):
        state = draw_state(model, seed, 1.0)
        x = np.concatenate((state.q, state.u))
        out = np.empty(n + nq)
        assert lib.sr_rhs(_p(x), _p(tau), _p(loads), ctypes.byref(p), _p(out)) == 0
        want = kd.forward_dynamics(model, state, loads=records + efforts)
        np.testing.assert_allclose(out[:n], want, rtol=1e-10, atol=1e-10)
        assert np.max(np.abs(want - kd.forward_dynamics(model, state, loads=efforts))) > 1e-2
    full = np.empty((n + nq) * (1 + nq + 2 * n))
    assert lib.sr_derivatives(_p(x), _p(tau), _p(loads), ctypes.byref(p), _p(full)) == 0
    J = full[n + nq :].reshape(n + nq, nq + 2 * n)
    z = np.concatenate((x, tau))
    eps = 1e-6
    for j in range(len(z)):
        hi, lo = z.copy(), z.copy()
        hi[j] += eps
        lo[j] -= eps
        f_hi, f_lo = np.empty(n + nq), np.empty(n + nq)
        assert lib.sr_rhs(_p(hi[: nq + n]), _p(hi[nq + n :]), _p(loads), ctypes.byref(p),
                          _p(f_hi)) == 0  # fmt: skip
        assert lib.sr_rhs(_p(lo[: nq + n]), _p(lo[nq + n :]), _p(loads), ctypes.byref(p),
                          _p(f_lo)) == 0  # fmt: skip
        np.testing.assert_allclose(J[:, j], (f_hi - f_lo) / (2 * eps), rtol=1e-6, atol=1e-6)


@needs_cc
def test_runtime_parameters_c_equals_the_engine(built):
    """With the model's values in the struct, the run-time-parameter C agrees with the
    Python engine (which folds them) to 1e-14, value and derivatives; the header
    documents every field and the state layout."""
    model, lib, header = built
    nq, n = model.nq, model.n
    assert "typedef struct {" in header and "sr_params;" in header
    assert "double panel_mass; /* panel.mass [kg] */" in header
    assert "double hinge_stiffness0; /* hinge.stiffness0 [N.m/rad] */" in header
    assert "double slide_stiffness0; /* slide.stiffness0 [N/m] */" in header
    assert "x[0]   free.qx" in header and "[rad/s]" in header
    Params = params_struct(model)
    p = Params.in_dll(lib, "sr_default_params")
    assert p.panel_mass == 2.0 and p.hinge_stiffness0 == 3.0
    cp = kd.compile_model(model, backend="python")
    for seed in range(5):
        state = draw_state(model, seed, 2.0)
        x = np.concatenate((state.q, state.u))
        out = np.empty(n + nq)
        assert lib.sr_rhs(_p(x), _p(np.zeros(n)), _p(np.zeros(6 * model.nb)), ctypes.byref(p),
                          _p(out)) == 0  # fmt: skip
        want = np.array(cp.rhs(state.q.tolist(), state.u.tolist()))
        np.testing.assert_allclose(out, want, rtol=1e-14, atol=1e-14 * np.max(np.abs(want)))
    tau = np.linspace(-1.0, 1.0, n)
    full = np.empty((n + nq) * (1 + nq + 2 * n))
    assert lib.sr_derivatives(_p(x), _p(tau), _p(np.zeros(6 * model.nb)), ctypes.byref(p),
                              _p(full)) == 0  # fmt: skip
    assert lib.sc_derivatives(_p(x), _p(tau), _p(out := np.empty_like(full))) == 0
    np.testing.assert_allclose(full, out, rtol=1e-13, atol=1e-13 * np.max(np.abs(out)))


@needs_cc
def test_changing_a_runtime_parameter_matches_a_rebuilt_model(built, monkeypatch):
    """The panel's mass and the hinge's spring changed in the struct: the C's rates and
    ten RK4 steps are those of the model built with those numbers (kd.forward_dynamics,
    kd.simulate)."""
    from kanedyn.compiled import native, tcc

    model, lib, _ = built
    Params = params_struct(model)
    p = Params.in_dll(lib, "sr_default_params")
    q = Params.from_buffer_copy(p)
    q.panel_mass, q.hinge_stiffness0 = 3.5, 7.0
    rebuilt = small_spacecraft(panel_mass=3.5, stiffness=7.0)
    state = draw_state(model, 4, 1.0)
    x = np.concatenate((state.q, state.u))
    out = np.empty(model.n + model.nq)
    no_loads = np.zeros(6 * model.nb)
    assert lib.sr_rhs(_p(x), _p(np.zeros(model.n)), _p(no_loads), ctypes.byref(q), _p(out)) == 0
    want = kd.forward_dynamics(rebuilt, state)
    np.testing.assert_allclose(out[: model.n], want, rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(want - kd.forward_dynamics(model, state))) > 1e-3  # it changed
    monkeypatch.setattr(native, "unavailable", lambda: "test")
    monkeypatch.setattr(tcc, "unavailable", lambda: "test")
    traj = kd.simulate(rebuilt, state, 0.1, 0.01, progress=False)
    lib.sr_step.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_double]
    for _ in range(10):
        assert lib.sr_step(_p(x), _p(np.zeros(model.n)), _p(no_loads), ctypes.addressof(q),
                           0.01) == 0  # fmt: skip
    np.testing.assert_allclose(x, np.concatenate((traj.q[-1], traj.u[-1])), rtol=1e-13, atol=1e-13)


@pytest.mark.slow
@needs_cc
@pytest.mark.parametrize("compiler", COMPILERS)
def test_c_on_random_trees_equals_the_engine(compiler, tmp_path):
    """Random trees with every joint type: the folded C equals the Python engine to the
    bit, the run-time-parameter C to 1e-14 (derivatives left out: the default)."""
    models, sources = [], []
    for seed in range(4):
        model = random_tree(seed)
        if kd.compiled.supports(model) is not None:
            continue
        models.append(model)
        sources += [kd.codegen.to_c(model, tmp_path, prefix=f"f{seed}")[1],
                    kd.codegen.to_c(model, tmp_path, prefix=f"r{seed}", parameters="runtime")[1]]  # fmt: skip
    assert len(models) >= 3
    lib = compile_shared(compiler, sources, tmp_path / "libtrees.so")
    assert not hasattr(lib, "f0_derivatives")
    for model, src in zip(models, sources[::2], strict=True):
        seed = src.stem[1:]
        cp = kd.compile_model(model, backend="python")
        p = params_struct(model).in_dll(lib, f"r{seed}_default_params")
        for k in range(3):
            state = draw_state(model, k, 1.0)
            x = np.concatenate((state.q, state.u))
            tau = np.linspace(-0.5, 0.5, model.n)
            want = np.array(cp.rhs(state.q.tolist(), state.u.tolist()))
            out = np.empty(model.n + model.nq)
            assert getattr(lib, f"f{seed}_rhs")(_p(x), _p(np.zeros(model.n)), _p(out)) == 0
            assert out.tolist() == want.tolist()  # to the bit
            got = np.empty_like(out)
            assert getattr(lib, f"r{seed}_rhs")(_p(x), _p(tau), ctypes.byref(p), _p(got)) == 0
            efforts = [kd.JointLoad(j.name, tau[idx]) for j, idx in
                       zip(model.joints, model.layout.u_index, strict=True) if len(idx)]  # fmt: skip
            dense = kd.forward_dynamics(model, state, loads=efforts)
            np.testing.assert_allclose(got[: model.n], dense, rtol=1e-10, atol=1e-10)
            assert getattr(lib, f"r{seed}_rhs")(_p(x), _p(np.zeros(model.n)), ctypes.byref(p),
                                                _p(got)) == 0  # fmt: skip
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14 * np.max(np.abs(want)))


@needs_cc
def test_c_in_a_central_field_with_runtime_field_parameters(tmp_path):
    """The gravity-gradient boom in Earth's field: the folded C equals the Python engine
    to the bit, the run-time C to 1e-14; the field's mu and J2 are fields of the struct,
    and changing them gives the engine's rates of the model rebuilt with that field (at
    orbital distances the dense engine's round-off, 1e-10 of the largest rate, is above
    1e-14)."""
    case = kd.examples.gravity_gradient_boom()
    model, state = case.model, case.state
    _, c = kd.codegen.to_c(model, tmp_path, prefix="gf")
    h, cr = kd.codegen.to_c(model, tmp_path, prefix="gr", parameters="runtime")
    assert "double gravity_mu; /* gravity.mu [m^3/s^2] */" in h.read_text()
    lib = compile_shared(COMPILERS[0], [c, cr], tmp_path / "libgg.so")
    u = state.u + np.linspace(-1e-3, 1e-3, model.n)
    state = kd.State(state.q, u)
    x = np.concatenate((state.q, state.u))
    zero = np.zeros(model.n)
    out, got = np.empty(model.n + model.nq), np.empty(model.n + model.nq)
    assert lib.gf_rhs(_p(x), _p(zero), _p(out)) == 0
    want = kd.compile_model(model, backend="python").rhs(state.q.tolist(), state.u.tolist())
    assert out.tolist() == want  # to the bit
    p = params_struct(model).in_dll(lib, "gr_default_params")
    assert lib.gr_rhs(_p(x), _p(zero), ctypes.byref(p), _p(got)) == 0
    np.testing.assert_allclose(got, out, rtol=1e-14, atol=1e-14 * np.max(np.abs(out)))
    q = params_struct(model).from_buffer_copy(p)
    q.gravity_mu, q.gravity_J2 = 1.1 * p.gravity_mu, 1.08e-3
    assert lib.gr_rhs(_p(x), _p(zero), ctypes.byref(q), _p(got)) == 0
    field = kd.CentralGravity(mu=q.gravity_mu, J2=1.08e-3, radius=p.gravity_radius)
    rebuilt = kd.Model(model.bodies, model.joints, gravity=field)
    want = np.array(kd.compile_model(rebuilt, backend="python").rhs(state.q.tolist(),
                                                                    state.u.tolist()))  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14 * np.max(np.abs(want)))
    assert np.max(np.abs(want - out)) > 0.5  # it changed


def test_to_c_rejects_bad_prefix_and_uncompilable_models(tmp_path):
    with pytest.raises(ModelError, match="C identifier"):
        kd.codegen.to_c(kd.examples.chain(1), tmp_path, prefix="my-model")
    import sympy

    m = sympy.Symbol("m", positive=True)
    symbolic = kd.Model([kd.Body("b", mass=m, inertia=np.eye(3))],
                        [kd.Joint.revolute("j", None, "b", axis=2)])  # fmt: skip
    with pytest.raises(ModelError, match="symbolic parameters"):
        kd.codegen.to_c(symbolic, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing written
    with pytest.raises(ModelError, match="parameters must be 'folded' or 'runtime'"):
        kd.codegen.to_c(kd.examples.chain(1), tmp_path, parameters="symbolic")


def four_bar_start(model: kd.Model) -> kd.State:
    """The four-bar tipped by its crank and spun, assembled on its loop with the crank
    held (its speeds made consistent)."""
    q = model.initial_state().q.copy()
    q[0] = 0.3
    u = np.zeros(model.n)
    u[0] = 2.0
    return model.assemble(kd.State(q, u), fix=["crank"])


@needs_cc
@pytest.mark.parametrize("compiler", COMPILERS)
def test_c_closed_loops_equal_the_native_engine(compiler, tmp_path):
    """The four-bar's C: twenty folded RK4 steps (with the projection) are those of
    kd.simulate on the native engine bit for bit, the run-time parameters' to 1e-14;
    the rates are the dense loop equations' and the Jacobian central differences'."""
    from kanedyn.dynamics.loops import loop_terms

    model = kd.examples.four_bar()
    state = four_bar_start(model)
    h, c = kd.codegen.to_c(model, tmp_path, prefix="fb", derivatives=True)
    hr, cr = kd.codegen.to_c(model, tmp_path, prefix="fr", parameters="runtime",
                             body_loads=True)  # fmt: skip
    header = h.read_text()
    assert "independent speeds are" in header and "initial state, assembled" in header
    assert "int fb_project(double *x);" in header
    assert "int fr_project(double *x, const fr_params *p);" in hr.read_text()
    lib = compile_shared(compiler, [c, cr], tmp_path / "libfb.so")
    nq, n = model.nq, model.n
    x0 = np.concatenate((state.q, state.u))
    tau = np.zeros(n)
    out = np.empty(n + nq)
    assert lib.fb_rhs(_p(x0), _p(tau), _p(out)) == 0
    np.testing.assert_allclose(out[:n], kd.forward_dynamics(model, state), rtol=1e-10,
                               atol=1e-10)  # fmt: skip
    # the Jacobian against central differences of the C rates
    full = np.empty((n + nq) * (1 + nq + 2 * n))
    assert lib.fb_derivatives(_p(x0), _p(tau), _p(full)) == 0
    J = full[n + nq :].reshape(n + nq, nq + 2 * n)
    np.testing.assert_array_equal(full[: n + nq], out)
    eps = 1e-6
    for j in range(nq + 2 * n):
        z = np.concatenate((x0, tau))
        plus, minus = np.empty(n + nq), np.empty(n + nq)
        z[j] += eps
        lib.fb_rhs(_p(z[: nq + n].copy()), _p(z[nq + n :].copy()), _p(plus))
        z[j] -= 2 * eps
        lib.fb_rhs(_p(z[: nq + n].copy()), _p(z[nq + n :].copy()), _p(minus))
        np.testing.assert_allclose(J[:, j], (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-6)
    traj = kd.simulate(model, state, 0.2, 0.01, engine="auto", progress=False)
    assert traj.engine == "native"
    Params = params_struct(model)
    p = Params.in_dll(lib, "fr_default_params")
    lib.fb_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    lib.fr_step.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_double]
    x, xr, loads = x0.copy(), x0.copy(), np.zeros(6 * model.nb)
    for k in range(1, 21):
        assert lib.fb_step(_p(x), _p(tau), 0.01) == 0
        assert lib.fr_step(_p(xr), _p(tau), _p(loads), ctypes.addressof(p), 0.01) == 0
        assert x.tolist() == [*traj.q[k], *traj.u[k]]  # to the bit
        np.testing.assert_allclose(xr, x, rtol=1e-14, atol=1e-14)
    terms = loop_terms(model, x[:nq])
    assert np.max(np.abs(terms.Phi)) < 1e-12 and np.max(np.abs(terms.A @ x[nq:])) < 1e-12
    assert abs(x[0] - x0[0]) > 0.01  # it moved
