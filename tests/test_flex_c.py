"""Flexible bodies (``Body.modes``) in ``kd.codegen.to_c`` and ``kd.codegen.to_fmu``
(issues 29 and 33): a free hub (quaternion) with a ``kd.beam_body`` cantilever,
stiffened and damped, in gravity.

Oracles: the Python engine (``compile_model(..., backend="python")``, the traced
:func:`kanedyn.dynamics.flex_recursion.flexible_run`) for the right-hand side, to the
bit; the dense engine (``kd.forward_dynamics``: CRBA and Cholesky over Kane's flexible
mass matrix, another algorithm) to round-off; ``kd.simulate`` for the RK4 step;
``CompiledModel.jacobian`` (held to finite differences of the dense engine in
tests/test_flex_compiled.py) for the derivatives; a model rebuilt with another hub
mass for the run-time parameters; fmpy (an independent FMI importer) for the FMU.
"""

from __future__ import annotations

import ctypes
import re

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.compiled.c import runtime_parameters
from kanedyn.model.names import coordinate_names, speed_names
from tests.test_to_c import COMPILERS, compile_shared, needs_cc, params_struct


def hub_and_beam(hub_mass: float = 20.0) -> kd.Model:
    """A free hub (quaternion) with a cantilever of two modes in each of two directions,
    welded off its centre and tilted, stiffened and damped, in gravity."""
    hub = kd.Body("hub", hub_mass, kd.inertia_tensor(2.0, 3.0, 4.0))
    beam = kd.beam_body("beam", 2.0, 1.5, (30.0, 45.0), n_modes=2, stiffening=True,
                        damping_ratio=0.02)  # fmt: skip
    root = kd.Joint.free("root", "hub")
    arm = kd.Joint.weld("arm", "hub", "beam", inner_point=(0.5, 0.1, 0.0),
                        inner_rotation=kd.euler_to_dcm("312", (0.3, 0.2, 0.1)))  # fmt: skip
    return kd.Model([hub, beam], [root, arm], gravity=[0.0, 0.0, -9.81])


def start(model: kd.Model) -> kd.State:
    state = model.set_joint(model.initial_state(), "root", rates=(0.4, -0.3, 0.8),
                            displacement_rates=(0.1, 0.0, -0.2))  # fmt: skip
    return model.set_modes(state, "beam", amplitudes=(0.02, -0.01, 0.015, 0.01),
                           rates=(0.1, -0.2, 0.05, 0.1))  # fmt: skip


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def python_engine(monkeypatch):
    from kanedyn.compiled import native, tcc

    monkeypatch.setattr(native, "unavailable", lambda: "test")
    monkeypatch.setattr(tcc, "unavailable", lambda: "test")


@pytest.fixture(scope="module", params=COMPILERS or ["none"])
def built(request, tmp_path_factory):
    """The model's C folded (``fc``) and with run-time parameters (``fr``), compiled
    with the strict flags by each compiler found."""
    model = hub_and_beam()
    out = tmp_path_factory.mktemp("flex_c")
    h, c = kd.codegen.to_c(model, out, prefix="fc")
    hr, cr = kd.codegen.to_c(model, out, prefix="fr", parameters="runtime")
    if not COMPILERS:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    lib = compile_shared(request.param, [c, cr], out / "libfc.so")
    return model, lib, h.read_text() + hr.read_text()


@needs_cc
def test_header_documents_the_modal_states(built):
    model, _, header = built
    nq, n, nf = model.nq_total, model.n_total, model.nf
    assert nf == 4 and f"#define FC_NQ {nq}" in header and f"#define FC_NU {n}" in header
    assert f"#define FC_N {model.n}" in header and f"#define FC_NF {nf}" in header
    assert f"#define FC_NX {nq + n}" in header
    for i, name in enumerate(coordinate_names(model) + speed_names(model)):
        assert re.search(rf"x\[{i}\]\s+{re.escape(name)}\s", header), name
    assert re.search(rf"x\[{model.nq}\]\s+beam\.y1\s+\[1\]", header)
    assert re.search(rf"x\[{nq + model.n}\]\s+beam\.y1_dot\s+\[1/s\]", header)
    assert "tau[5]" in header and f"tau[{model.n}]" not in header  # the joints' efforts
    assert "Flexible bodies" in header and "are constants of the code." in header
    assert "are fields of p (fr_params)" in header  # the run-time parameters' header
    assert re.search(r"double beam_modal_stiffness_y1_y1; /\* beam\.modal_stiffness\.y1\.y1 "
                     r"\[N\.m\] \*/", header)  # fmt: skip


@needs_cc
def test_c_rhs_and_steps_equal_the_engine(built, monkeypatch):
    """To the bit: the rates against the Python engine's traced flexible ABA, ten RK4
    steps against kd.simulate on it; to round-off against the dense engine."""
    model, lib, _ = built
    nq, n = model.nq_total, model.n_total
    cp = kd.compile_model(model, backend="python")
    rng = np.random.default_rng(0)
    state = start(model)
    for _ in range(3):
        q = state.q + np.concatenate((np.zeros(model.nq), 0.01 * rng.normal(size=model.nf)))
        u = state.u + 0.2 * rng.normal(size=n)
        x = np.concatenate((q, u))
        out = np.empty(n + nq)
        assert lib.fc_rhs(_p(x), _p(np.zeros(model.n)), _p(out)) == 0
        assert out.tolist() == list(cp.rhs(q.tolist(), u.tolist()))  # to the bit
        tau = rng.normal(size=model.n)
        assert lib.fc_rhs(_p(x), _p(tau), _p(out)) == 0
        loads = [kd.JointLoad("root", tau)]
        dense = kd.forward_dynamics(model, kd.State(q, u), loads=loads)
        np.testing.assert_allclose(out[:n], dense, rtol=0, atol=1e-11 * np.max(np.abs(dense)))
    python_engine(monkeypatch)
    traj = kd.simulate(model, state, 0.1, 0.01, progress=False)
    assert traj.engine.startswith("python")
    x = np.concatenate((state.q, state.u))
    lib.fc_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    for _ in range(10):
        assert lib.fc_step(_p(x), _p(np.zeros(model.n)), 0.01) == 0
    assert x[:nq].tolist() == traj.q[-1].tolist()
    assert x[nq:].tolist() == traj.u[-1].tolist()
    assert np.max(np.abs(x[model.nq : nq] - state.q[model.nq :])) > 1e-3  # the modes moved


@needs_cc
def test_c_steps_equal_the_native_engine(built):
    """The native engine's RK4 loop (kd.simulate, engine="auto") to the bit."""
    pytest.importorskip("llvmlite")
    model, lib, _ = built
    state = start(model)
    traj = kd.simulate(model, state, 0.1, 0.01, engine="auto", progress=False)
    assert traj.engine == "native"
    x = np.concatenate((state.q, state.u))
    lib.fc_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    for _ in range(10):
        assert lib.fc_step(_p(x), _p(np.zeros(model.n)), 0.01) == 0
    assert x.tolist() == np.concatenate((traj.q[-1], traj.u[-1])).tolist()


@pytest.mark.slow
@needs_cc
def test_c_derivatives_of_a_flexible_model(tmp_path):
    """``fd_derivatives`` (the forward-mode Jacobian, columns ``[x | tau]``) against
    the tape's Jacobian of the compiled engine."""
    model = hub_and_beam()
    h, c = kd.codegen.to_c(model, tmp_path, prefix="fd", derivatives=True)
    assert f"#define FD_NJAC ({model.n_total + model.nq_total} * " in h.read_text()
    lib = compile_shared(COMPILERS[0], [c], tmp_path / "libfd.so")
    nq, n, ne = model.nq_total, model.n_total, model.n
    state = start(model)
    tau = np.linspace(-1.0, 1.0, ne)
    x = np.concatenate((state.q, state.u))
    out = np.empty((n + nq) * (1 + nq + n + ne))
    assert lib.fd_derivatives(_p(x), _p(tau), _p(out)) == 0
    rates, J = kd.compile_model(model).jacobian(state.q, state.u, tau)
    np.testing.assert_allclose(out[: n + nq], rates, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[n + nq :].reshape(n + nq, nq + n + ne), J, rtol=1e-11,
                               atol=1e-11)  # fmt: skip


@needs_cc
def test_runtime_parameters_of_a_flexible_model(built, monkeypatch):
    """The default parameters give the folded rates to 1e-14; the hub's mass changed in
    the struct gives the rates and ten steps of the model rebuilt with that mass."""
    model, lib, _ = built
    nq, n = model.nq_total, model.n_total
    Params = params_struct(model)
    p = Params.in_dll(lib, "fr_default_params")
    state = start(model)
    x = np.concatenate((state.q, state.u))
    tau = np.zeros(model.n)
    folded, out = np.empty(n + nq), np.empty(n + nq)
    assert lib.fc_rhs(_p(x), _p(tau), _p(folded)) == 0
    assert lib.fr_rhs(_p(x), _p(tau), ctypes.byref(p), _p(out)) == 0
    np.testing.assert_allclose(out, folded, rtol=1e-14, atol=1e-14 * np.max(np.abs(folded)))
    q = Params.from_buffer_copy(p)
    q.hub_mass = 35.0
    rebuilt = hub_and_beam(hub_mass=35.0)
    assert lib.fr_rhs(_p(x), _p(tau), ctypes.byref(q), _p(out)) == 0
    want = kd.forward_dynamics(rebuilt, state)
    np.testing.assert_allclose(out[:n], want, rtol=0, atol=1e-12 * np.max(np.abs(want)))
    assert np.max(np.abs(want - kd.forward_dynamics(model, state))) > 1e-3  # it changed
    python_engine(monkeypatch)
    traj = kd.simulate(rebuilt, state, 0.1, 0.01, progress=False)
    lib.fr_step.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double]
    for _ in range(10):
        assert lib.fr_step(_p(x), _p(tau), ctypes.addressof(q), 0.01) == 0
    np.testing.assert_allclose(x, np.concatenate((traj.q[-1], traj.u[-1])), rtol=1e-13,
                               atol=1e-13)  # fmt: skip


def with_modes(model: kd.Model, body: str, **changes) -> kd.Model:
    """``model`` rebuilt with ``body``'s modes changed (``attrs.evolve`` of kd.Modes)."""
    bodies = [
        attrs.evolve(b, modes=attrs.evolve(b.modes, **changes)) if b.name == body else b
        for b in model.bodies
    ]
    return kd.Model(bodies, model.joints, gravity=model.gravity)


@needs_cc
@pytest.mark.filterwarnings("ignore:modes. the trace of N")  # the coupled mass, N kept
def test_runtime_modal_parameters_equal_a_rebuilt_model(built):
    """A modal frequency (the stiffness of mode y1), a modal damping and an off-diagonal
    modal mass changed in the struct give the native engine's rates of the model rebuilt
    with those modes to 1e-14, and its RK4 steps."""
    model, lib, _ = built
    nq, n = model.nq_total, model.n_total
    md = model.body("beam").modes
    y1, z1 = md.mode_names.index("y1"), md.mode_names.index("z1")
    K, C, M = md.stiffness.copy(), md.damping.copy(), md.mass.copy()
    K[y1, y1] *= 1.7  # the frequency of y1 up by √1.7
    C[z1, z1] += 0.05
    M[y1, z1] = M[z1, y1] = 0.02 * M[y1, y1]
    rebuilt = with_modes(model, "beam", stiffness=K, damping=C, mass=M)
    Params = params_struct(model)
    p = Params.from_buffer_copy(Params.in_dll(lib, "fr_default_params"))
    p.beam_modal_stiffness_y1_y1 = K[y1, y1]
    p.beam_modal_damping_z1_z1 = C[z1, z1]
    p.beam_modal_mass_y1_z1 = M[y1, z1]
    assert [getattr(p, f.field) for f in runtime_parameters(model)] == [
        f.value for f in runtime_parameters(rebuilt)
    ]  # the fields are the rebuilt model's numbers
    cm = kd.compile_model(rebuilt)
    tau = np.zeros(model.n)
    rng = np.random.default_rng(1)
    state = start(model)
    out = np.empty(n + nq)
    for _ in range(3):
        q = state.q + np.concatenate((np.zeros(model.nq), 0.01 * rng.normal(size=model.nf)))
        u = state.u + 0.2 * rng.normal(size=n)
        x = np.concatenate((q, u))
        assert lib.fr_rhs(_p(x), _p(tau), ctypes.byref(p), _p(out)) == 0
        want = cm.forward_dynamics(q, u)
        np.testing.assert_allclose(out[:n], want, rtol=0, atol=1e-14 * np.max(np.abs(want)))
        old = kd.compile_model(model).forward_dynamics(q, u)
        assert np.max(np.abs(want - old)) > 1e-3 * np.max(np.abs(want))  # it changed
    traj = kd.simulate(rebuilt, state, 0.1, 0.01, progress=False)
    x = np.concatenate((state.q, state.u))
    lib.fr_step.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double]
    for _ in range(10):
        assert lib.fr_step(_p(x), _p(tau), ctypes.addressof(p), 0.01) == 0
    np.testing.assert_allclose(x, np.concatenate((traj.q[-1], traj.u[-1])), rtol=0,
                               atol=1e-13)  # fmt: skip


def test_c_refuses_a_loop_closing_on_a_flexible_body(tmp_path):
    """A flexible model with loops on rigid bodies is written
    (tests/test_flex_loops_compiled.py); a loop closing on the beam is refused, by
    name, as the loop equations refuse it."""
    from kanedyn.compiled.c import refusal
    from tests.test_flex_events import _four_bar_with_beam

    assert refusal(hub_and_beam()) is None
    model, _ = _four_bar_with_beam()
    assert refusal(model) is None
    loop = attrs.evolve(model.loops[0], name="tip", inner="beam")
    bent = kd.Model(model.bodies, model.joints, loops=[loop], gravity=(0.0, 0.0, 0.0))
    with pytest.raises(kd.ModelError, match="loop 'tip' closes on flexible body 'beam'"):
        kd.codegen.to_c(bent, tmp_path)


def test_fmu_of_a_flexible_model_equals_kd_simulate(tmp_path, monkeypatch):
    """fmpy's run of the FMU (outputs the modal coordinates and speeds too) with an
    effort on the hub equals kd.simulate at the same step to 1e-12."""
    fmpy = pytest.importorskip("fmpy", reason="fmpy (the fmu extra) is not installed")
    from fmpy.validation import validate_fmu

    if not COMPILERS:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    model = hub_and_beam()
    state = start(model)
    path = kd.codegen.to_fmu(model, tmp_path / "fx.fmu", step=0.01, name="fx", state=state)
    assert validate_fmu(str(path)) == []
    md = fmpy.read_model_description(str(path))
    kinds = {v.name: v.causality for v in md.modelVariables}
    assert kinds["beam.y1"] == kinds["beam.z2_dot"] == "output"
    assert sum(c == "output" for c in kinds.values()) == model.nq_total + model.n_total
    assert sum(c == "input" for c in kinds.values()) == model.n + 6 * model.nb
    assert "tau.beam.y1_dot" not in kinds
    tau = [0.3, -0.2, 0.1, 0.0, 0.5, 0.0]
    start_values = {f"tau.{s}": v for s, v in zip(speed_names(model), tau, strict=False)}
    res = fmpy.simulate_fmu(str(path), stop_time=0.3, step_size=0.01, output_interval=0.01,
                            start_values=start_values)  # fmt: skip
    python_engine(monkeypatch)
    traj = kd.simulate(model, state, 0.3, 0.01, loads=[kd.JointLoad("root", tau)],
                       progress=False)  # fmt: skip
    assert len(res) == len(traj.t)
    for i, nm in enumerate(coordinate_names(model)):
        np.testing.assert_allclose(res[nm], traj.q[:, i], rtol=0, atol=1e-12)
    for i, nm in enumerate(speed_names(model)):
        np.testing.assert_allclose(res[nm], traj.u[:, i], rtol=0, atol=1e-12)
    assert np.ptp(res["beam.y1"]) > 1e-3  # the modes moved
