"""MJCF equality constraints as kanedyn loops.

Oracles, none of them kanedyn's importer:

* the same mechanisms written by hand with ``kd.Body``, ``kd.Joint`` and ``kd.Loop``
  (mass properties given explicitly in the MJCF ``<inertial>``, so both sides hold the
  same numbers): forward dynamics to 1e-12;
* MuJoCo's own constraint residual ``efc_pos`` (its ``mj_instantiateEquality``) at the
  states kanedyn assembles: the mapping of ``eq_data`` onto loop frames is MuJoCo's;
* MuJoCo's ``mj_forward`` with the equality made nearly hard (below);
* for the weld, the tree in which the welded body is rigidly attached to the arm: a
  weld loop must give the same hinge acceleration.

MuJoCo's equality constraints are soft. With ``solref`` negative (a direct stiffness and
damping) the reference acceleration ``-b (J v) - k r`` vanishes on the manifold at rest
(``r = 0``, ``v = 0``), and MuJoCo's constraint acceleration is ``a1 = (1 - d) a0`` (its
Computation chapter, "Soft constraints"), ``d`` the impedance of ``solimp``, at most
0.9999: the remaining constraint acceleration and the error in ``qacc`` are of order
``(1 - d) = 1e-4`` of the unconstrained acceleration ``a0``. The tests compare at rest,
to ``5e-4 · max|qacc0|`` at ``d = 0.9999``, and check that the error shrinks about tenfold
from ``d = 0.999`` (MuJoCo converges onto kanedyn's exact loop as its constraint
hardens). At rest the velocity-product term ``J̇ v``, which MuJoCo's constraint
acceleration leaves out, is zero.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.dynamics.loops import residuals
from kanedyn.io import UnsupportedFeatureWarning, read_mjcf, read_model
from kanedyn.io.mjcf import initial_state, speeds_from_mujoco

mujoco = pytest.importorskip("mujoco")

# a four-bar in the x-z plane, hinges about y: crank, coupler and rocker in a chain,
# the rocker's tip connected to the world where it is at qpos0
FOUR_BAR = """
<mujoco model="four-bar">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="crank">
      <joint name="crank" type="hinge" axis="0 1 0"/>
      <inertial pos="0.05 0.01 0.15" mass="0.7" fullinertia="0.02 0.03 0.015 0.001 -0.002 0.003"/>
      <site name="origin"/>
      <body name="coupler" pos="0.1 0 0.3">
        <joint name="coupler" type="hinge" axis="0 1 0"/>
        <inertial pos="0.4 0 0.05" mass="1.3" diaginertia="0.01 0.09 0.085"/>
        <body name="rocker" pos="0.8 0 0.1">
          <joint name="rocker" type="hinge" axis="0 1 0"/>
          <inertial pos="0.025 -0.02 -0.25" mass="0.9" diaginertia="0.03 0.031 0.004"/>
          <site name="tip" pos="0.05 0 -0.5"/>
        </body>
      </body>
    </body>
    <site name="ground_D" pos="0.95 0 -0.1"/>
  </worldbody>
  <equality>
    EQUALITY
  </equality>
</mujoco>
"""
CONNECT_BODY = '<connect name="close" body1="rocker" anchor="0.05 0 -0.5"/>'
CONNECT_SITE = '<connect name="close" site1="tip" site2="ground_D"/>'

# the same four-bar with the ground link the other way: crank and rocker hinged to the
# world, the coupler's tip connected to the rocker's (a connect between two bodies)
FOUR_BAR_2 = """
<mujoco model="four-bar, two bodies">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="crank">
      <joint name="crank" type="hinge" axis="0 1 0"/>
      <inertial pos="0.05 0.01 0.15" mass="0.7" fullinertia="0.02 0.03 0.015 0.001 -0.002 0.003"/>
      <body name="coupler" pos="0.1 0 0.3">
        <joint name="coupler" type="hinge" axis="0 1 0"/>
        <inertial pos="0.4 0 0.05" mass="1.3" diaginertia="0.01 0.09 0.085"/>
      </body>
    </body>
    <body name="rocker" pos="0.95 0 -0.1">
      <joint name="rocker" type="hinge" axis="0 1 0"/>
      <inertial pos="-0.025 -0.02 0.25" mass="0.9" diaginertia="0.03 0.031 0.004"/>
    </body>
  </worldbody>
  <equality>
    <connect name="close" body1="coupler" body2="rocker" anchor="0.8 0 0.1"/>
  </equality>
</mujoco>
"""

# a pendulum arm and a free plate welded to it with an explicit relpose (the plate is
# not there at qpos0: the initial state must be assembled)
HALF = np.pi / 12  # relpose turns the plate by 30 degrees about the arm's x axis
WELD = f"""
<mujoco model="weld">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <inertial pos="0.3 0 0" mass="1.1" diaginertia="0.002 0.04 0.041"/>
      <body name="plate_mount" pos="0.6 0 0"/>
    </body>
    <body name="plate" pos="0.7 0.2 0.9">
      <freejoint name="float"/>
      <inertial pos="0.02 0.01 -0.03" mass="0.5" fullinertia="0.004 0.006 0.007 0.0003 0.0002 -0.0004"/>
    </body>
  </worldbody>
  <equality>
    <weld name="glue" body1="arm" body2="plate" relpose="0.6 0 0.1 {np.cos(HALF)} {np.sin(HALF)} 0 0"
          anchor="0 0 0"/>
  </equality>
</mujoco>
"""


def compile_(xml):
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return mjm


def four_bar_by_hand(connect_to_world=True):
    """The four-bars above, written directly with kanedyn's records."""
    bodies = [
        kd.Body(
            "crank",
            mass=0.7,
            com=[0.05, 0.01, 0.15],
            inertia=[[0.02, 0.001, -0.002], [0.001, 0.03, 0.003], [-0.002, 0.003, 0.015]],
        ),
        kd.Body("coupler", mass=1.3, com=[0.4, 0, 0.05], inertia=np.diag([0.01, 0.09, 0.085])),
    ]
    rocker_com = [0.025, -0.02, -0.25] if connect_to_world else [-0.025, -0.02, 0.25]
    bodies.append(
        kd.Body("rocker", mass=0.9, com=rocker_com, inertia=np.diag([0.03, 0.031, 0.004]))
    )
    joints = [
        kd.Joint.revolute("crank", None, "crank", axis=2),
        kd.Joint.revolute("coupler", "crank", "coupler", axis=2, inner_point=[0.1, 0, 0.3]),
    ]
    if connect_to_world:
        joints.append(
            kd.Joint.revolute("rocker", "coupler", "rocker", axis=2, inner_point=[0.8, 0, 0.1])
        )
        loop = kd.Loop.spherical(
            "close", "rocker", None, inner_point=[0.05, 0, -0.5], outer_point=[0.95, 0, -0.1]
        )
    else:
        joints.append(
            kd.Joint.revolute("rocker", None, "rocker", axis=2, inner_point=[0.95, 0, -0.1])
        )
        loop = kd.Loop.spherical(
            "close", "coupler", "rocker", inner_point=[0.8, 0, 0.1], outer_point=[-0.05, 0, 0.5]
        )
    return kd.Model(bodies, joints, loops=[loop], gravity=[0, 0, -9.81])


def mujoco_qpos_qvel(model, mjm, state):
    """MuJoCo's (qpos, qvel) of a kanedyn state (the inverse of state_from_mujoco)."""
    qpos = mjm.qpos0.copy()
    for j in range(mjm.njnt):
        idx = model.coordinates(kd.io.mjcf.joint_name(mjm, j))
        a = mjm.jnt_qposadr[j]
        if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            x, y, z, w = state.q[idx[:4]]
            qpos[a : a + 3] = state.q[idx[4:]]
            qpos[a + 3 : a + 7] = [w, x, y, z]
        else:
            qpos[a] = state.q[idx[0]] + mjm.qpos0[a]
    P = np.array([speeds_from_mujoco(model, mjm, e) for e in np.eye(mjm.nv)]).T
    return qpos, P.T @ state.u, P


def equality_residual(mjm, qpos):
    d = mujoco.MjData(mjm)
    d.qpos[:] = qpos
    mujoco.mj_forward(mjm, d)
    rows = d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY
    assert rows.sum() == {0: 3, 1: 6}[int(mjm.eq_type[0])]
    return np.max(np.abs(d.efc_pos[rows]))


def stiff_qacc(mjm, qpos, d_imp):
    """MuJoCo's qacc at rest with the equalities nearly hard (impedance d_imp)."""
    mjm.eq_solref[:] = [-1e6, -1e3]  # direct stiffness and damping: aref = 0 at rest on Φ = 0
    mjm.eq_solimp[:] = [d_imp, d_imp, 0.001, 0.5, 2.0]
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    mjm.opt.tolerance = 1e-15
    mjm.opt.iterations = 1000
    d = mujoco.MjData(mjm)
    d.qpos[:] = qpos
    mujoco.mj_forward(mjm, d)
    qacc0 = np.linalg.solve(_full_m(mjm, d), d.qfrc_smooth)  # the unconstrained acceleration
    return d.qacc.copy(), qacc0


def _full_m(mjm, d):
    M = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, d, M)
    return M


def check_stiff_mujoco(model, mjm, state, qpos, P):
    """kanedyn's accelerations at rest against MuJoCo's with the equality nearly hard:
    within ``5e-4 max|qacc0|`` at d = 0.9999, the error ten times smaller than at 0.999."""
    udot = kd.forward_dynamics(model, kd.State(state.q, np.zeros(model.n)))
    errors = []
    for d_imp in (0.999, 0.9999):
        qacc, qacc0 = stiff_qacc(mjm, qpos, d_imp)
        errors.append(np.max(np.abs(P @ qacc - udot)))
    assert errors[1] < 5e-4 * np.max(np.abs(qacc0))
    assert errors[1] < 0.2 * errors[0]


@pytest.mark.parametrize(
    "xml, to_world",
    [
        (FOUR_BAR.replace("EQUALITY", CONNECT_BODY), True),
        (FOUR_BAR.replace("EQUALITY", CONNECT_SITE), True),
        (FOUR_BAR_2, False),
    ],
    ids=["connect-to-world", "connect-sites", "connect-two-bodies"],
)
def test_four_bar_connect(xml, to_world):
    mjm = compile_(xml)
    model = read_mjcf("four_bar.xml", mj_model=mjm)
    hand = four_bar_by_hand(to_world)
    assert [lp.name for lp in model.loops] == ["close"]
    assert model.loops[0].rot_type == "spherical"
    rng = np.random.default_rng(18)
    for k in range(4):
        start = model.initial_state()
        q = start.q.copy()
        q[model.coordinates("crank")] = rng.uniform(-0.4, 0.4)
        u = rng.normal(size=model.n)
        state = model.assemble(kd.State(q, u), fix=["crank"])
        # (1) the loop closes, by kanedyn's residual and by MuJoCo's own equation
        phi, vel = residuals(model, state.q, state.u)
        assert phi < 1e-12 and vel < 1e-12
        qpos, qvel, P = mujoco_qpos_qvel(model, mjm, state)
        assert equality_residual(mjm, qpos) < 1e-12
        # (1) forward dynamics equal the hand-written model's
        udot = kd.forward_dynamics(model, state)
        np.testing.assert_allclose(udot, kd.forward_dynamics(hand, state), rtol=0, atol=1e-12)
        if k == 0:  # (2) MuJoCo at rest, the equality nearly hard
            check_stiff_mujoco(model, mjm, state, qpos, P)


def test_four_bar_sites_meet_after_assembly():
    """Sites that do not meet at qpos0: the initial state is assembled onto the loop."""
    xml = FOUR_BAR.replace("EQUALITY", CONNECT_SITE).replace(
        'name="ground_D" pos="0.95 0 -0.1"', 'name="ground_D" pos="0.93 0 -0.08"'
    )
    mjm = compile_(xml)
    model = read_mjcf("moved.xml", mj_model=mjm)
    state = initial_state(model, mjm)
    assert max(residuals(model, state.q, state.u)) < 1e-12
    assert equality_residual(mjm, mujoco_qpos_qvel(model, mjm, state)[0]) < 1e-12
    kept = initial_state(model, mjm, fix=["crank"])
    assert kept.q[model.coordinates("crank")[0]] == 0.0
    assert equality_residual(mjm, mujoco_qpos_qvel(model, mjm, kept)[0]) < 1e-12


def rot_x(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def test_weld_relpose(tmp_path):
    path = tmp_path / "weld.xml"
    path.write_text(WELD)
    mjm = compile_(WELD)
    model, state0 = read_model(path)
    (glue,) = model.loops
    assert glue.ndof == 0
    # read_model assembled the plate onto the arm (it is elsewhere at qpos0)
    qpos0, _, _ = mujoco_qpos_qvel(model, mjm, state0)
    assert equality_residual(mjm, mjm.qpos0) > 0.1
    assert equality_residual(mjm, qpos0) < 1e-12

    plate_inertia = [[0.004, 0.0003, 0.0002], [0.0003, 0.006, -0.0004], [0.0002, -0.0004, 0.007]]
    arm = kd.Body("arm", mass=1.1, com=[0.3, 0, 0], inertia=np.diag([0.002, 0.04, 0.041]))
    plate = kd.Body("plate", mass=0.5, com=[0.02, 0.01, -0.03], inertia=plate_inertia)
    hinge = kd.Joint.revolute("hinge", None, "arm", axis=2, inner_point=[0, 0, 1])
    # by hand: the same weld as a loop (plate free) ...
    hand = kd.Model(
        [arm, plate],
        [hinge, kd.Joint.free("float", "plate")],
        loops=[
            kd.Loop.weld(
                "glue", "arm", "plate", inner_point=[0.6, 0, 0.1], inner_rotation=rot_x(2 * HALF)
            )
        ],
        gravity=[0, 0, -9.81],
    )
    # ... and as a tree: the plate fixed to the arm at the relative pose
    tree = kd.Model(
        [arm, plate],
        [
            hinge,
            kd.Joint.weld(
                "fixed", "arm", "plate", inner_point=[0.6, 0, 0.1], inner_rotation=rot_x(2 * HALF)
            ),
        ],
        gravity=[0, 0, -9.81],
    )
    i_hinge = model.speeds("hinge")
    rng = np.random.default_rng(7)
    for k in range(3):
        q = state0.q.copy()
        q[model.coordinates("hinge")] = rng.uniform(-1.0, 1.0)
        u = np.zeros(model.n)
        u[i_hinge] = rng.normal()
        state = model.assemble(kd.State(q, u), fix=["hinge"])
        qpos, qvel, P = mujoco_qpos_qvel(model, mjm, state)
        assert equality_residual(mjm, qpos) < 1e-12
        udot = kd.forward_dynamics(model, state)
        np.testing.assert_allclose(udot, kd.forward_dynamics(hand, state), rtol=0, atol=1e-12)
        tree_state = kd.State(state.q[model.coordinates("hinge")], state.u[i_hinge])
        np.testing.assert_allclose(
            udot[i_hinge], kd.forward_dynamics(tree, tree_state), rtol=0, atol=1e-12
        )
        if k == 0:
            check_stiff_mujoco(model, mjm, state, qpos, P)


def test_unsupported_and_inactive_equalities_are_reported(tmp_path):
    xml = FOUR_BAR.replace(
        "EQUALITY",
        CONNECT_BODY
        + '<connect name="off" body1="coupler" anchor="0 0 0" active="false"/>'
        + '<joint name="couple" joint1="crank" joint2="rocker" polycoef="0 1 0 0 0"/>'
        + '<weld name="loose" site1="tip" site2="ground_D" torquescale="0"/>'
        + '<tendon tendon1="t"/>',
    ).replace(
        "</worldbody>",
        '</worldbody><tendon><fixed name="t"><joint joint="crank" coef="1"/></fixed></tendon>',
    )
    path = tmp_path / "many.xml"
    path.write_text(xml)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = read_mjcf(path)
    messages = [str(w.message) for w in caught if w.category is UnsupportedFeatureWarning]
    text = "\n".join(messages)
    assert "equality 'off' (connect) is inactive" in text
    assert "equality 'couple' (joint) not imported: a polynomial coupling" in text
    assert "equality 'equality4' (tendon) not imported" in text
    assert "equality 'loose' (weld): torquescale=\"0\"" in text
    assert [lp.name for lp in model.loops] == ["close", "loose"]
    assert [lp.rot_type for lp in model.loops] == ["spherical", "spherical"]


def test_a_loop_that_cannot_close_is_a_file_error(tmp_path):
    xml = FOUR_BAR.replace("EQUALITY", CONNECT_SITE).replace(
        'name="ground_D" pos="0.95 0 -0.1"', 'name="ground_D" pos="5 0 0"'
    )
    path = tmp_path / "far.xml"
    path.write_text(xml)
    with pytest.raises(
        kd.FileFormatError, match=r"far.xml: initial state: loop 'close' cannot close"
    ):
        read_model(path)
