"""Dispersed modal frequencies and damping ratios (issue 29): the ``modal_frequency`` and
``modal_damping_ratio`` keywords of ``ModelBatch.dispersed`` and the Monte Carlo
parameters ``<body>.modal_frequency.p``, ``<body>.modal_damping_ratio.p`` (Python and
file form).

Oracles: the dense engine on models rebuilt by hand with ``kd.Modes`` of the stiffness
``k = ω² m`` and damping ``c = 2ζωm`` written out in the test; for a coupled modal mass,
the generalized eigenproblem of the member's matrices; for a clamped beam, the
oscillation period measured from the zero crossings of its run against ``2π/ω`` of the
sampled frequency, whose nominal value is the Euler-Bernoulli cantilever's
``(1.8751)² √(EI / ρℓ⁴)``.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
import scipy.linalg

import kanedyn as kd
from kanedyn.simulation.montecarlo.dispersion import DispersionSpec, apply, sample
from tests.test_flex_c import hub_and_beam, start


@pytest.fixture(scope="module")
def hub():
    model = hub_and_beam()
    return model, start(model)


def _with_modes(model: kd.Model, name: str, **modes) -> kd.Model:
    bodies = [attrs.evolve(b, modes=attrs.evolve(b.modes, **modes)) if b.name == name else b
              for b in model.bodies]  # fmt: skip
    return kd.Model(bodies, model.joints, gravity=model.gravity)


def test_dispersed_frequencies_and_damping_ratios_give_the_models_built_by_hand(hub):
    """Member b's rates (dense engine) are those of the model whose beam has
    K = diag(ω_b² m), C = diag(2 ζ_b ω_b m) (a diagonal modal mass); with frequencies
    only, the nominal damping matrix is kept."""
    model, state = hub
    md = model.body("beam").modes
    m = np.diag(md.mass)
    w0 = np.sqrt(np.diag(md.stiffness) / m)  # the beam's modes are uncoupled
    w = w0 * np.array([[1.0, 1.0, 1.0, 1.0], [0.9, 1.1, 1.05, 0.95], [1.2, 0.8, 1.0, 1.1]])
    zeta = np.array([[0.02] * 4, [0.0, 0.05, 0.1, 0.01], [0.3, 0.0, 0.02, 0.2]])
    batch = kd.ModelBatch.dispersed(model, modal_frequency={"beam": w},
                                    modal_damping_ratio={"beam": zeta})  # fmt: skip
    only_w = kd.ModelBatch.dispersed(model, modal_frequency={"beam": w})
    for b in range(3):
        by_hand = _with_modes(model, "beam", stiffness=np.diag(w[b] ** 2 * m),
                              damping=np.diag(2.0 * zeta[b] * w[b] * m))  # fmt: skip
        want = kd.forward_dynamics(by_hand, state)
        got = kd.forward_dynamics(batch.member(b), state)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.max(np.abs(want)))
        kept = _with_modes(model, "beam", stiffness=np.diag(w[b] ** 2 * m))
        want = kd.forward_dynamics(kept, state)
        got = kd.forward_dynamics(only_w.member(b), state)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.max(np.abs(want)))
    # member 0 is the nominal model (its ratios are the beam's 0.02)
    nominal = kd.forward_dynamics(model, state)
    np.testing.assert_allclose(kd.forward_dynamics(batch.member(0), state), nominal,
                               rtol=0, atol=1e-11 * np.max(np.abs(nominal)))  # fmt: skip
    assert np.max(np.abs(kd.forward_dynamics(batch.member(1), state) - nominal)) > 1e-3


def test_a_coupled_modal_mass_is_dispersed_on_its_normal_modes():
    """Non-diagonal M and K: the member's (K, M) has the dispersed frequencies and the
    nominal mode shapes, and its damping is 2ζω on those modes (K φ = ω² M φ solved
    here for the member's own matrices)."""
    M = np.array([[2.0, 0.3], [0.3, 1.0]])
    K = np.array([[50.0, -10.0], [-10.0, 40.0]])
    beam = kd.Body("plate", 3.0, kd.inertia_tensor(1.0, 1.0, 1.0),
                   modes=kd.Modes(M, K, node_positions=[[1.0, 0.0, 0.0]]))  # fmt: skip
    model = kd.Model([beam], [kd.Joint.weld("clamp", None, "plate")])
    lam0, V0 = scipy.linalg.eigh(K, M)
    w = np.sqrt(lam0) * np.array([[1.1, 0.95]])
    zeta = np.array([[0.03, 0.07]])
    got = kd.ModelBatch.dispersed(model, modal_frequency={"plate": w},
                                  modal_damping_ratio={"plate": zeta}).member(0)  # fmt: skip
    md = got.body("plate").modes
    lam, V = scipy.linalg.eigh(md.stiffness, md.mass)
    np.testing.assert_allclose(np.sqrt(lam), w[0], rtol=1e-12)
    np.testing.assert_allclose(np.abs(V), np.abs(V0), rtol=0, atol=1e-12)  # same shapes
    np.testing.assert_allclose(md.mass, M, rtol=0, atol=0)
    np.testing.assert_allclose(V.T @ md.damping @ V, np.diag(2.0 * zeta[0] * w[0]),
                               rtol=0, atol=1e-12)  # fmt: skip


def test_bad_modal_dispersions_are_refused(hub):
    model, state = hub
    w = np.ones((2, 4))
    cases = [
        ({"modal_frequency": {"hub": w}}, "body 'hub' is not flexible"),
        ({"modal_frequency": {"beem": w}}, "'beem' is not a body of the model"),
        ({"modal_frequency": {"beam": np.ones((2, 3))}}, r"expected shape \(B, 4\)"),
        ({"modal_frequency": w}, "expected a dict of flexible body name"),
        ({"modal_frequency": {"beam": [[1, 1, 1, 1], [1, 1, -2, 1]]}},
         r"member 1, mode 3 \('z1'\) of body 'beam': must be positive"),
        ({"modal_damping_ratio": {"beam": [[0, 0, 0, -0.1], [0, 0, 0, 0]]}},
         r"member 0, mode 4 \('z2'\) of body 'beam': must be non-negative"),
        ({"modal_frequency": {"beam": w}, "mass": np.ones((3, 2))}, "batch size 3 differs"),
    ]  # fmt: skip
    for kwargs, message in cases:
        with pytest.raises(kd.ModelError, match=message):
            kd.ModelBatch.dispersed(model, **kwargs)
    for parameter, message in [
        ("hub.modal_frequency.1", "body 'hub' is not flexible"),
        ("beam.modal_frequency.5", "body 'beam' has no mode '5' \\(modes 1 to 4"),
        ("beam.modal_frequency.0", "has no mode '0'"),
        ("beam.modal_stiffness.1", "modal_frequency.p or modal_damping_ratio.p"),
    ]:
        with pytest.raises(kd.ModelError, match=message):
            DispersionSpec(model, state, (kd.Dispersion(parameter, "normal", sigma=0.1),), 1)
    # a damping that is not modal has no nominal ratios
    coupled = _with_modes(model, "beam", damping=0.1 * np.ones((4, 4)) + 0.1 * np.eye(4))
    with pytest.raises(kd.ModelError, match="nominal damping is not modal"):
        DispersionSpec(coupled, state,
                       (kd.Dispersion("beam.modal_damping_ratio.2", "normal", sigma=0.1),), 1)  # fmt: skip


def test_sampled_modes_become_the_members_arrays(hub):
    """apply: a body's undispersed modes keep their nominal values (the beam's damping
    ratio 0.02, k/m for the frequency), a drawn non-positive frequency makes the member
    invalid with the body and mode named; mode names select modes as numbers do."""
    model, state = hub
    md = model.body("beam").modes
    w0 = np.sqrt(np.diag(md.stiffness) / np.diag(md.mass))
    ds = (kd.Dispersion("beam.modal_frequency.2", "normal", sigma=3.0 * w0[1]),
          kd.Dispersion("beam.modal_damping_ratio.z1", "uniform", low=0.0, high=0.1))  # fmt: skip
    spec = DispersionSpec(model, state, ds, 5)
    assert spec.nominals == pytest.approx((w0[1], 0.02), rel=1e-12)
    values = sample(spec, range(40))
    members = apply(spec, values)
    w, zeta = (
        members.arrays["modal_frequency"]["beam"],
        members.arrays["modal_damping_ratio"]["beam"],
    )
    np.testing.assert_allclose(w[:, [0, 2, 3]], np.tile(w0[[0, 2, 3]], (40, 1)), rtol=1e-12)
    np.testing.assert_array_equal(w[:, 1], values[:, 0])
    np.testing.assert_allclose(zeta[:, [0, 1, 3]], 0.02, rtol=1e-12)
    np.testing.assert_array_equal(zeta[:, 2], values[:, 1])
    negative = values[:, 0] <= 0.0
    assert negative.any() and (~negative).any()
    for b in range(40):
        if negative[b]:
            assert "body 'beam': modal_frequency of mode 2 must be positive" in members.invalid[b]
        else:
            assert members.invalid[b] == ""


def _crossings(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Times where x changes sign (linear interpolation between outputs)."""
    i = np.flatnonzero(np.sign(x[:-1]) * np.sign(x[1:]) < 0)
    return t[i] - x[i] * (t[i + 1] - t[i]) / (x[i + 1] - x[i])


def test_monte_carlo_of_a_clamped_beam_oscillates_at_the_sampled_frequency(tmp_path):
    """A cantilever clamped to the ground, one bending mode, undamped, released from a
    deflection; its first frequency dispersed ±10 % (file form): each member's period
    from the zero crossings of its modal coordinate is 2π/ω of its sampled ω, and the
    nominal ω is the Euler-Bernoulli cantilever's."""
    pytest.importorskip("pandas")
    ell, rho, EI = 1.0, 1.0, 1.0
    beam = kd.beam_body("beam", ell, rho, EI, n_modes=1, directions=(1,), stiffening=False)
    model = kd.Model([beam], [kd.Joint.weld("clamp", None, "beam")])
    state = model.set_modes(model.initial_state(), "beam", amplitudes=(0.01,))
    w_eb = 1.87510407**2 * math.sqrt(EI / (rho * ell**4))
    path = tmp_path / "modes.toml"
    path.write_text(
        'seed = 4\n[[dispersion]]\nparameter = "beam.modal_frequency.1"\n'
        'distribution = "uniform"\nlow = 0.9\nhigh = 1.1\nrelative = true\n'
    )
    ds, seed, _ = kd.io.read_dispersions(path)
    spec = DispersionSpec(model, state, tuple(ds), seed)
    assert spec.nominals[0] == pytest.approx(w_eb, rel=1e-6)
    res = kd.monte_carlo(model, state, ds, 4, 4.0, 0.005, seed=seed,
                         outputs={"eta": lambda tr: tr.modal("beam")[0][:, 0]})  # fmt: skip
    assert (res.members["status"] == "ok").all()
    t = np.arange(res.outputs["eta"].shape[0]) * 0.005
    sampled = res.members["beam.modal_frequency.1"].to_numpy()
    assert np.all((sampled > 0.9 * w_eb) & (sampled < 1.1 * w_eb))
    assert np.ptp(sampled) > 0.02 * w_eb
    for k in range(4):
        zeros = _crossings(t, res.outputs["eta"][:, k])
        assert zeros.size >= 3
        period = 2.0 * np.mean(np.diff(zeros))
        assert period == pytest.approx(2.0 * math.pi / sampled[k], rel=1e-4)
