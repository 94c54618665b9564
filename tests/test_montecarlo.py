"""Monte Carlo dispersions: the spec (Python and TOML), the sampler against the
requested distributions, member validation, and the in-process runner against
independent single runs (kd.simulate of a model built by hand) and numpy statistics."""

from __future__ import annotations

import sys

import attrs
import numpy as np
import pytest
import scipy.stats

import kanedyn as kd
from kanedyn.io import read_dispersions
from kanedyn.simulation.montecarlo.dispersion import DispersionSpec, apply, sample

pd = pytest.importorskip("pandas")

N_DRAWS = 4000


def _draws(model, state, disp, n=N_DRAWS, seed=11):
    spec = DispersionSpec(model, state, (disp,), seed)
    return sample(spec, range(n))[:, 0]


@pytest.fixture(scope="module")
def explorer():
    m = kd.examples.explorer1()
    return m, kd.examples.explorer1_state(m)


# ----------------------------------------------------------------------------- sampler
def test_normal_moments_about_nominal(explorer):
    m, s = explorer
    x = _draws(m, s, kd.Dispersion("hub.mass", "normal", sigma=20.0))
    se = 20.0 / np.sqrt(N_DRAWS)
    assert abs(x.mean() - 1963.5) < 4 * se
    assert abs(x.std(ddof=1) / 20.0 - 1.0) < 0.06
    assert scipy.stats.kstest((x - 1963.5) / 20.0, "norm").pvalue > 1e-3


def test_relative_normal_scales_with_nominal(explorer):
    m, s = explorer
    x = _draws(m, s, kd.Dispersion("antenna2.mass", "normal", sigma=0.05, relative=True))
    assert abs(x.std(ddof=1) / (0.05 * 94.25) - 1.0) < 0.06
    assert abs(x.mean() - 94.25) < 4 * 0.05 * 94.25 / np.sqrt(N_DRAWS)


def test_uniform_bounds_and_moments(explorer):
    m, s = explorer
    x = _draws(m, s, kd.Dispersion("root.rates.z", "uniform", low=0.08, high=0.09))
    assert x.min() >= 0.08 and x.max() <= 0.09
    assert abs(x.mean() - 0.085) < 4 * 0.01 / np.sqrt(12 * N_DRAWS)
    assert abs(x.var(ddof=1) / (0.01**2 / 12) - 1.0) < 0.08
    assert scipy.stats.kstest(x, "uniform", args=(0.08, 0.01)).pvalue > 1e-3


def test_truncnormal_against_scipy(explorer):
    m, s = explorer
    # hub inertia zz: nominal 245.4, sigma 30, truncated to [230, 300] (asymmetric)
    d = kd.Dispersion("hub.inertia.zz", "truncnormal", sigma=30.0, low=230.0, high=300.0)
    x = _draws(m, s, d)
    a, b = (230.0 - 245.4) / 30.0, (300.0 - 245.4) / 30.0
    ref = scipy.stats.truncnorm(a, b, loc=245.4, scale=30.0)
    assert x.min() >= 230.0 and x.max() <= 300.0
    assert abs(x.mean() - ref.mean()) < 4 * ref.std() / np.sqrt(N_DRAWS)
    assert abs(x.std(ddof=1) / ref.std() - 1.0) < 0.06
    assert scipy.stats.kstest(x, ref.cdf).pvalue > 1e-3


def test_relative_uniform_and_choice(explorer):
    m, s = explorer
    x = _draws(m, s, kd.Dispersion("hub.mass", "uniform", low=0.9, high=1.1, relative=True))
    assert x.min() >= 0.9 * 1963.5 and x.max() <= 1.1 * 1963.5
    y = _draws(m, s, kd.Dispersion("hinge1.stiffness.1", "choice", values=[0.0, 1.0, 2.0],
                                   relative=True))  # fmt: skip
    levels, counts = np.unique(y, return_counts=True)
    assert np.allclose(levels, [0.0, 9.8e-3, 2 * 9.8e-3])
    assert scipy.stats.chisquare(counts).pvalue > 1e-3


def test_member_draws_depend_only_on_seed_and_member(explorer):
    m, s = explorer
    d1 = kd.Dispersion("hub.mass", "normal", sigma=20.0)
    d2 = kd.Dispersion("root.rates.z", "uniform", low=0.08, high=0.09)
    spec = DispersionSpec(m, s, (d1, d2), 7)
    full = sample(spec, range(100))
    assert np.array_equal(full[37:50], sample(spec, range(37, 50)))
    assert np.array_equal(full[[90, 3]], sample(spec, [90, 3]))
    # one parameter's draws do not depend on the other dispersions, nor on their order
    alone = sample(DispersionSpec(m, s, (d2,), 7), range(100))
    assert np.array_equal(full[:, 1], alone[:, 0])
    other_seed = sample(DispersionSpec(m, s, (d1, d2), 8), range(100))
    assert not np.any(full == other_seed)


# ----------------------------------------------------------------------------- spec
def test_dispersion_arguments_are_checked():
    with pytest.raises(kd.ModelError, match="unknown distribution 'gauss'"):
        kd.Dispersion("hub.mass", "gauss", sigma=1.0)
    with pytest.raises(kd.ModelError, match="normal needs sigma"):
        kd.Dispersion("hub.mass", "normal")
    with pytest.raises(kd.ModelError, match="normal takes sigma .* not low"):
        kd.Dispersion("hub.mass", "normal", sigma=1.0, low=0.0)
    with pytest.raises(kd.ModelError, match="low must be less than high"):
        kd.Dispersion("hub.mass", "uniform", low=2.0, high=1.0)
    with pytest.raises(kd.ModelError, match="sigma must be >= 0"):
        kd.Dispersion("hub.mass", "normal", sigma=-1.0)
    with pytest.raises(kd.ModelError, match="values must be a non-empty list"):
        kd.Dispersion("hub.mass", "choice", values=[])


def test_parameters_are_resolved_against_the_model(explorer):
    m, s = explorer
    bad = [
        ("hub.mas", "a body takes mass"),
        ("rotor.mass", "'rotor' is not a body or joint"),
        ("hinge0.angles.2", r"rotational coordinate '2' does not exist \(valid: 0, 1\)"),
        ("hinge1.stiffness", "different stiffness values"),
        ("root.displacements.w", "slide 'w' does not exist"),
    ]
    for parameter, message in bad:
        with pytest.raises(kd.ModelError, match=message):
            DispersionSpec(m, s, (kd.Dispersion(parameter, "normal", sigma=1.0),), 0)
    with pytest.raises(kd.ModelError, match="needs a non-zero nominal"):
        DispersionSpec(m, s, (kd.Dispersion("hub.com.x", "normal", sigma=0.1, relative=True),), 0)
    with pytest.raises(kd.ModelError, match="dispersed twice"):
        d = kd.Dispersion("hub.mass", "normal", sigma=1.0)
        DispersionSpec(m, s, (d, d), 0)


def test_applied_values_land_in_the_member_model():
    """The members' parameter arrays equal models built from the drawn values by hand."""
    hub = kd.Body("hub", mass=10.0, inertia=kd.inertia_tensor(3.0, 4.0, 5.0, Ixy=0.5))
    arm = kd.Body("arm", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.1), com=(0.5, 0, 0))
    joints = [kd.Joint.free("root", outer="hub"),
              kd.Joint.revolute("hinge", "hub", "arm", axis=3, stiffness=2.0, damping=0.1)]  # fmt: skip
    m = kd.Model([hub, arm], joints)
    s = m.set_joint(m.initial_state(), "hinge", angles=[0.3], rates=[0.1])
    ds = (
        kd.Dispersion("hub.inertia.xy", "normal", sigma=0.1),
        kd.Dispersion("arm.com.x", "uniform", low=0.4, high=0.6),
        kd.Dispersion("hinge.stiffness", "normal", sigma=0.2),
        kd.Dispersion("hinge.angles.0", "normal", sigma=0.05),
        kd.Dispersion("root.rates.y", "normal", sigma=0.01),
        kd.Dispersion("root.angles.z", "normal", sigma=0.1),
    )
    spec = DispersionSpec(m, s, ds, 3)
    assert spec.nominals[0] == 0.5  # the product as a positive integral
    values = sample(spec, range(4))
    mem = apply(spec, values)
    batch = kd.ModelBatch.dispersed(m, **mem.arrays)
    for b in range(4):
        Ixy, cx, k, angle, wy, rz = values[b]
        by_hand = kd.Model(
            [attrs.evolve(hub, inertia=kd.inertia_tensor(3.0, 4.0, 5.0, Ixy=Ixy)),
             attrs.evolve(arm, com=(cx, 0, 0))],
            [joints[0], attrs.evolve(joints[1], stiffness=k)],
        )  # fmt: skip
        member = batch.member(b)
        for i in range(2):
            assert np.array_equal(member.bodies[i].inertia, by_hand.bodies[i].inertia)
            assert np.array_equal(member.bodies[i].com, by_hand.bodies[i].com)
        assert np.array_equal(member.joints[1].stiffness, by_hand.joints[1].stiffness)
        q = m.set_joint(s, "hinge", angles=[angle], rates=[0.1])
        quat = kd.dcm_to_quat(kd.euler_to_dcm("123", (0.0, 0.0, rz)))
        q = m.set_joint(q, "root", quaternion=quat, rates=[0.0, wy, 0.0])
        assert np.allclose(mem.q[b], q.q, atol=1e-15)
        assert np.array_equal(mem.u[b], q.u)


def test_non_physical_members_are_invalid_not_raised():
    m = kd.examples.chain(2)
    s = m.initial_state()
    d = kd.Dispersion("link1.inertia.xx", "uniform", low=-0.01, high=0.01)
    spec = DispersionSpec(m, s, (d,), 0)
    values = sample(spec, range(20))
    mem = apply(spec, values)
    for v, why in zip(values[:, 0], mem.invalid, strict=True):
        if v <= 0.0:
            assert "body 'link1'" in why and "positive definite" in why
    assert any(mem.invalid) and not all(mem.invalid)
    d = kd.Dispersion("joint0.damping", "uniform", low=-1.0, high=1.0)
    mem = apply(DispersionSpec(m, s, (d,), 0), np.array([[-0.5], [0.5]]))
    assert mem.invalid[0].startswith("joint 'joint0': damping must be non-negative")
    assert mem.invalid[1] == ""


# ----------------------------------------------------------------------------- TOML
SPEC_TOML = """\
seed = 7
outputs = ["root.rates.z"]

[[dispersion]]
parameter = "hub.mass"
distribution = "normal"
sigma = 20.0

[[dispersion]]
parameter = "root.rates.z"
distribution = "uniform"
low = 0.08
high = 0.09

[[dispersion]]
parameter = "hinge0.stiffness"
distribution = "truncnormal"
sigma = 0.1
low = 0.5
high = 1.5
relative = true

[[dispersion]]
parameter = "hub.com.z"
distribution = "choice"
values = [2.4, 2.5, 2.6]
"""


def test_toml_spec_equals_python_spec(tmp_path):
    path = tmp_path / "disp.toml"
    path.write_text(SPEC_TOML)
    dispersions, seed, outputs = read_dispersions(path)
    assert seed == 7 and outputs == ["root.rates.z"]
    assert dispersions == [
        kd.Dispersion("hub.mass", "normal", sigma=20.0),
        kd.Dispersion("root.rates.z", "uniform", low=0.08, high=0.09),
        kd.Dispersion(
            "hinge0.stiffness", "truncnormal", sigma=0.1, low=0.5, high=1.5, relative=True
        ),  # fmt: skip
        kd.Dispersion("hub.com.z", "choice", values=[2.4, 2.5, 2.6]),
    ]


def test_toml_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "bad.toml"
    cases = [
        (SPEC_TOML.replace('distribution = "uniform"', 'distribution = "flat"'),
         r"bad.toml: line 11: dispersion\[2\]: .*unknown distribution 'flat'"),
        (SPEC_TOML.replace("sigma = 20.0\n", ""),
         r"bad.toml: line 4: dispersion\[1\]: .*normal needs sigma"),
        (SPEC_TOML.replace("high = 1.5", "high = 0.4"),
         r"bad.toml: line 19: dispersion\[3\]: .*low must be less than high"),
        (SPEC_TOML.replace('values = [2.4, 2.5, 2.6]', 'values = [2.4, "x"]'),
         r"bad.toml: line 26: dispersion\[4\]: .*values\[1\]: expected a number"),
        (SPEC_TOML.replace("seed = 7", "seed = -1"), r"bad.toml: line 1: seed"),
        (SPEC_TOML.replace('parameter = "hub.mass"\n', ""),
         r"bad.toml: line 4: dispersion\[1\].parameter: required field is missing"),
        ("seed = 3\n", "no \\[\\[dispersion\\]\\] tables"),
        ("seed = [", "not valid TOML"),
    ]  # fmt: skip
    for text, message in cases:
        path.write_text(text)
        with pytest.raises(kd.FileFormatError, match=message):
            read_dispersions(path)


def test_dispersions_may_sit_in_the_model_file(tmp_path):
    m = kd.examples.chain(2)
    path = tmp_path / "model.toml"
    kd.io.write_toml(m, path)
    text = path.read_text()
    path.write_text("seed = 5\n" + text + '\n[[dispersion]]\nparameter = "link0.mass"\n'
                    'distribution = "normal"\nsigma = 0.1\n')  # fmt: skip
    case = kd.io.read_toml_case(path)
    assert case.model.nb == 2
    dispersions, seed, _ = read_dispersions(path)
    assert seed == 5 and dispersions == [kd.Dispersion("link0.mass", "normal", sigma=0.1)]


# ----------------------------------------------------------------------------- runner
def pendulum_problem():
    """A damped double pendulum with dispersed masses, inertia, damping and initial
    rates; some members have non-physical inertia, some diverge (a huge rate).
    Returns ``(model, state, dispersions, keywords of kd.monte_carlo)``."""
    m = kd.examples.chain(2)
    m = kd.Model(m.bodies, [attrs.evolve(j, damping=0.05) for j in m.joints], gravity=m.gravity)
    s = m.set_joint(m.initial_state(), "joint0", angles=[0.4])
    ds = [
        kd.Dispersion("link0.mass", "normal", sigma=0.1, relative=True),
        kd.Dispersion("link1.inertia.xx", "normal", sigma=0.002),
        kd.Dispersion("joint1.damping", "uniform", low=0.0, high=0.2),
        kd.Dispersion("joint0.rates.0", "choice", values=[0.0, 0.5, 1.0, 1.5, 2.0, 1e7]),
    ]
    kw = dict(seed=4, t_final=1.0, dt=0.01, output_every=0.05,
              outputs=["joint0.angles.0", "joint1.rates.0"],
              metrics={"energy_final": lambda tr: float(tr.total_energy[-1])})  # fmt: skip
    return m, s, ds, kw


@pytest.fixture(scope="module")
def pendulum_run():
    m, s, ds, kw = pendulum_problem()
    res = kd.monte_carlo(m, s, ds, 24, chunk_size=5, **kw)
    return m, s, ds, kw, res


def test_members_table_and_statuses(pendulum_run):
    m, s, ds, kw, res = pendulum_run
    t = res.members
    assert list(t.columns) == [
        "member", "link0.mass", "link1.inertia.xx", "joint1.damping", "joint0.rates.0",
        "joint0.angles.0.final", "joint0.angles.0.min", "joint0.angles.0.max",
        "joint1.rates.0.final", "joint1.rates.0.min", "joint1.rates.0.max",
        "energy_final", "status", "error",
    ]  # fmt: skip
    assert list(t["member"]) == list(range(24))
    counts = t["status"].value_counts()
    assert counts["ok"] > 0 and counts["invalid"] > 0 and counts["failed"] > 0
    invalid = t[t["status"] == "invalid"]
    assert (invalid["link1.inertia.xx"] <= 0).all() or invalid["error"].str.contains("link1").all()
    failed = t[t["status"] == "failed"]
    assert (failed["joint0.rates.0"] == 1e7).all()
    assert failed["error"].str.startswith("SimulationError: t = ").all()
    assert t.loc[t["status"] != "ok", "energy_final"].isna().all()
    assert (t.loc[t["status"] == "ok", "error"] == "").all()


def test_ok_members_equal_independent_single_runs(pendulum_run):
    """Each ok member's outputs equal kd.simulate of a model built by hand from its row."""
    m, s, ds, kw, res = pendulum_run
    t = res.members
    for _, row in t[t["status"] == "ok"].head(4).iterrows():
        b0, b1 = m.bodies
        inertia = b1.inertia.copy()
        inertia[0, 0] = row["link1.inertia.xx"]
        model = kd.Model(
            [attrs.evolve(b0, mass=row["link0.mass"]), attrs.evolve(b1, inertia=inertia)],
            [m.joints[0], attrs.evolve(m.joints[1], damping=row["joint1.damping"])],
            gravity=m.gravity,
        )
        state = model.set_joint(s, "joint0", rates=[row["joint0.rates.0"]])
        traj = kd.simulate(model, state, 1.0, 0.01, output_every=0.05)
        k = int(row["member"])
        assert np.allclose(res.t, traj.t, rtol=0, atol=1e-12)
        assert np.allclose(
            res.outputs["joint0.angles.0"][:, k], traj.q[:, 0], rtol=1e-9, atol=1e-12
        )
        assert np.allclose(res.outputs["joint1.rates.0"][:, k], traj.u[:, 1], rtol=1e-9, atol=1e-12)
        assert row["joint1.rates.0.final"] == pytest.approx(traj.u[-1, 1], rel=1e-9, abs=1e-12)
        assert row["joint0.angles.0.max"] == pytest.approx(traj.q[:, 0].max(), rel=1e-9)
        assert row["energy_final"] == pytest.approx(traj.total_energy[-1], rel=1e-9)


def test_same_seed_same_members_whatever_the_chunks(pendulum_run):
    m, s, ds, kw, res = pendulum_run
    for chunk_size in (1, 24):
        other = kd.monte_carlo(m, s, ds, 24, chunk_size=chunk_size, **kw)
        pd.testing.assert_frame_equal(res.members, other.members, check_exact=True)
        for name in res.outputs:
            assert np.array_equal(res.outputs[name], other.outputs[name], equal_nan=True)
    # the first members of a larger run are the members of a smaller one
    more = kd.monte_carlo(m, s, ds, 30, chunk_size=8, **kw)
    pd.testing.assert_frame_equal(res.members, more.members.iloc[:24], check_exact=True)


def test_statistics_against_numpy(pendulum_run):
    m, s, ds, kw, res = pendulum_run
    ok = (res.members["status"] == "ok").to_numpy()
    table = res.percentiles()
    for name in res.metrics:
        x = res.members.loc[ok, name].to_numpy(dtype=float)
        expected = [
            *np.percentile(x, [1, 5, 50, 95, 99]),
            x.mean(),
            x.std(ddof=1),
            x.min(),
            x.max(),
        ]
        assert np.allclose(table.loc[name].to_numpy(dtype=float), expected, rtol=1e-14, atol=0)
    for name, hist in res.outputs.items():
        env = res.envelope(name, [5, 50, 95])
        assert np.allclose(env, np.percentile(hist[:, ok], [5, 50, 95], axis=1), rtol=1e-14)
        assert np.isnan(hist[:, ~ok]).all()
    summary = res.summary()
    assert summary["counts"] == res.members["status"].value_counts().reindex(
        ["ok", "invalid", "failed"], fill_value=0).to_dict()  # fmt: skip
    assert summary["metrics"]["energy_final"]["p50"] == pytest.approx(
        np.median(res.members.loc[ok, "energy_final"]), rel=1e-14)  # fmt: skip
    assert [f["member"] for f in summary["not_ok"]] == list(np.flatnonzero(~ok))


def test_write_files_strict_json(pendulum_run, tmp_path):
    import json

    res = pendulum_run[-1]
    files = res.write(tmp_path, plot=False)
    assert files == ["members.csv", "summary.json"]
    back = pd.read_csv(tmp_path / "members.csv", keep_default_na=False, na_values=[""])
    assert list(back.columns) == list(res.members.columns)
    assert np.allclose(back["energy_final"], res.members["energy_final"], equal_nan=True)
    text = (tmp_path / "summary.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


def test_resume_after_interruption_equals_uninterrupted(pendulum_run, tmp_path):
    m, s, ds, kw, res = pendulum_run
    seen = []

    def stop_after_two(done, total):
        seen.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kd.monte_carlo(m, s, ds, 24, chunk_size=5, store=tmp_path, progress=stop_after_two, **kw)
    assert len(list(tmp_path.glob("chunk-*.npz"))) == 2
    resumed = kd.monte_carlo(m, s, ds, 24, chunk_size=5, store=tmp_path, **kw)
    assert resumed.settings["chunks_resumed"] == 2
    pd.testing.assert_frame_equal(res.members, resumed.members, check_exact=True)
    for name in res.outputs:
        assert np.array_equal(res.outputs[name], resumed.outputs[name], equal_nan=True)
    # a different run refuses the folder instead of mixing chunks
    with pytest.raises(kd.ModelError, match="holds chunks of a different run"):
        kd.monte_carlo(m, s, ds, 24, chunk_size=5, store=tmp_path, **{**kw, "seed": 5})


def test_bad_arguments_fail_before_any_member():
    m = kd.examples.chain(2)
    s = m.initial_state()
    d = [kd.Dispersion("link0.mass", "normal", sigma=0.1)]
    with pytest.raises(kd.ModelError, match="n must be a positive integer"):
        kd.monte_carlo(m, s, d, 0, 1.0, 0.1)
    with pytest.raises(kd.ModelError, match="not a coordinate or speed"):
        kd.monte_carlo(m, s, d, 2, 1.0, 0.1, outputs=["link0.mass"])
    with pytest.raises(kd.ModelError, match="scheduler must be"):
        kd.monte_carlo(m, s, d, 2, 1.0, 0.1, scheduler=3)
    with pytest.raises(kd.ModelError, match="multiple of dt"):
        kd.monte_carlo(m, s, d, 2, 1.0, 0.1, output_every=0.15)
    with pytest.raises(kd.ModelError, match="needs a store"):
        kd.monte_carlo(m, s, d, 2, 1.0, 0.1, keep_trajectories=True)


def test_missing_extras_are_named(monkeypatch):
    m = kd.examples.chain(1)
    d = [kd.Dispersion("link0.mass", "normal", sigma=0.1)]
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(
        kd.KanedynError, match=r"kanedyn\[dask\] .*python -m pip install '\.\[dask\]'"
    ):
        kd.monte_carlo(m, m.initial_state(), d, 2, 0.1, 0.1, scheduler="processes")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(
        kd.KanedynError, match=r"need pandas: kanedyn\[dask\] .*pip install '\.\[dask\]'"
    ):
        kd.monte_carlo(m, m.initial_state(), d, 2, 0.1, 0.1)


def test_kept_trajectories_are_read_back_from_the_store(pendulum_run, tmp_path):
    m, s, ds, kw, res = pendulum_run
    kept = kd.monte_carlo(m, s, ds, 24, chunk_size=5, store=tmp_path, keep_trajectories=True,
                          **kw)  # fmt: skip
    pd.testing.assert_frame_equal(res.members, kept.members, check_exact=True)
    for k in (0, 7, 23):
        t, q, u = kept.trajectory(k)
        assert np.array_equal(t, res.t)
        assert np.array_equal(q[:, 0], res.outputs["joint0.angles.0"][:, k], equal_nan=True)
        assert np.array_equal(u[:, 1], res.outputs["joint1.rates.0"][:, k], equal_nan=True)
    with pytest.raises(kd.ModelError, match="keep_trajectories=True"):
        res.trajectory(0)


def test_principal_moments_and_axes():
    """Principal-moment draws are the member's eigenvalues; an axis rotation turns the
    tensor as scipy's rotation does (I' = R I Rᵀ)."""
    from scipy.spatial.transform import Rotation

    m = kd.examples.explorer1()
    s = kd.examples.explorer1_state(m)
    ds = (
        kd.Dispersion("antenna0.inertia.principal.1", "normal", sigma=0.01),
        kd.Dispersion("antenna0.inertia.rotation.z", "normal", sigma=0.1),
        kd.Dispersion("antenna0.inertia.rotation.x", "normal", sigma=0.1),
    )
    spec = DispersionSpec(m, s, ds, 2)
    assert spec.nominals[0] == pytest.approx(0.47)
    values = sample(spec, range(5))
    inertia = apply(spec, values).arrays["inertia"][:, 1]
    I0 = m.bodies[1].inertia
    for b in range(5):
        moments = np.linalg.eigvalsh(inertia[b])
        assert np.allclose(moments, sorted([values[b, 0], 8.09, 8.09]), rtol=1e-12)
        R = Rotation.from_euler("ZX", values[b, 1:]).as_matrix()  # intrinsic z then x
        I_rot = R @ np.diag([values[b, 0], 8.09, 8.09]) @ R.T
        assert np.allclose(inertia[b], I_rot, rtol=0, atol=1e-12)
        assert not np.allclose(inertia[b], I0)
    with pytest.raises(kd.ModelError, match="either by components .* or by principal"):
        DispersionSpec(m, s, (ds[0], kd.Dispersion("antenna0.inertia.xy", "normal", sigma=0.1)), 0)
