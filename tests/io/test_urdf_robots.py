"""Real robot URDFs, as their projects publish them, against Pinocchio's own URDF parser.

The files in ``tests/io/data/robots`` are unchanged copies from the example-robot-data
package (BSD-2-Clause, LAAS-CNRS / University of Edinburgh / INRIA; the Panda model is
Apache-2.0 from Franka Emika, see the LICENSE files beside them). Meshes are not needed
for the dynamics and are not stored.

Oracle: ``pinocchio.buildModelFromUrdf`` (which merges fixed joints and keeps every link
as a frame, as kanedyn does), with its CRBA, ABA, frame kinematics and energies. The
speed maps differ only at a free-floating root: Pinocchio's ``v = (R_N_Bᵀ ṙ, ω_B)``,
kanedyn's ``u = (ω_B | ṙ)``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, read_urdf

pin = pytest.importorskip("pinocchio")

ROBOTS = Path(__file__).parent / "data" / "robots"
FILES = ["ur5_robot.urdf", "panda.urdf", "solo12.urdf", "anymal_b.urdf", "talos_left_arm.urdf"]
TOL = 1e-10


def load(name: str, floating: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = read_urdf(ROBOTS / name, floating_base=floating)
    path = str(ROBOTS / name)
    pm = (
        pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
        if floating
        else pin.buildModelFromUrdf(path)
    )
    return model, pm


def random_pair(model, pm, rng):
    """A kanedyn State and Pinocchio (q, v, T, Tdot_u) for the same motion.

    ``T`` maps kanedyn speeds to Pinocchio's (``v = T u``); ``Tdot_u`` is ``Ṫ u``.
    """
    q_kd = model.initial_state().q.copy()
    u_kd = rng.normal(size=model.n)
    q_pin = np.zeros(pm.nq)
    T = np.zeros((pm.nv, model.n))
    Tdot_u = np.zeros(pm.nv)
    for jid in range(1, pm.njoints):
        jm, name = pm.joints[jid], pm.names[jid]
        iq, iv = jm.idx_q, jm.idx_v
        kind = jm.shortname()
        cq = model.coordinates("root" if kind == "JointModelFreeFlyer" else name)
        cu = model.speeds("root" if kind == "JointModelFreeFlyer" else name)
        if kind == "JointModelFreeFlyer":
            quat = rng.normal(size=4)
            quat /= np.linalg.norm(quat)
            r = rng.normal(size=3)
            q_kd[cq[:4]], q_kd[cq[4:]] = quat, r
            q_pin[iq : iq + 3], q_pin[iq + 3 : iq + 7] = r, quat
            R = kd.quat_to_dcm(quat)
            T[iv : iv + 3, cu[3:]] = R.T  # body-axes velocity of the origin
            T[iv + 3 : iv + 6, cu[:3]] = np.eye(3)  # body-axes angular velocity
            w_B, s = u_kd[cu[:3]], u_kd[cu[3:]]
            Tdot_u[iv : iv + 3] = -np.cross(w_B, R.T @ s)  # d/dt(Rᵀ) s = -ω_B × Rᵀ s
        else:
            assert jm.nv == 1 and len(cu) == 1, kind
            theta = rng.uniform(-2.0, 2.0)
            q_kd[cq] = theta
            if jm.nq == 2:  # unbounded (continuous) joint: (cos, sin)
                q_pin[iq : iq + 2] = np.cos(theta), np.sin(theta)
            else:
                q_pin[iq] = theta
            T[iv, cu[0]] = 1.0
    state = kd.State(q_kd, u_kd)
    return state, q_pin, T @ u_kd, T, Tdot_u


@pytest.fixture(params=[(f, fl) for f in FILES for fl in (False, True)],
                ids=[f"{f[:-5]}-{'floating' if fl else 'fixed'}" for f in FILES for fl in (False, True)])  # fmt: skip
def robot(request):
    return load(*request.param)


def test_sizes_and_mass(robot):
    model, pm = robot
    assert model.n == pm.nv
    np.testing.assert_allclose(model.total_mass, sum(Y.mass for Y in pm.inertias), rtol=1e-12)


def test_mass_matrix_dynamics_energies(robot):
    model, pm = robot
    data = pm.createData()
    rng = np.random.default_rng(18)
    for _ in range(3):
        state, q, v, T, Tdot_u = random_pair(model, pm, rng)
        M_pin = pin.crba(pm, data, q)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        M = kd.mass_matrix(model, state)
        scale = np.max(np.abs(M))
        np.testing.assert_allclose(M, T.T @ M_pin @ T, rtol=0, atol=TOL * scale)
        # forward dynamics under gravity and the joints' viscous damping
        tau = -pm.damping * v
        udot = kd.forward_dynamics(model, state)
        vdot = pin.aba(pm, data, q, v, tau)
        np.testing.assert_allclose(
            T @ udot + Tdot_u, vdot, rtol=0, atol=TOL * max(1.0, np.max(np.abs(vdot)))
        )
        T_kin = pin.computeKineticEnergy(pm, data, q, v)
        np.testing.assert_allclose(kd.kinetic_energy(model, state), T_kin, rtol=TOL)
        # Pinocchio leaves out the universe (a fixed root's mass); kanedyn keeps a fixed
        # root as a body, whose potential energy is a constant
        V_pin = pin.computePotentialEnergy(pm, data, q)
        V_root = 0.0
        if pm.joints[1].shortname() != "JointModelFreeFlyer" and model.joints[0].ndof == 0:
            b = model.bodies[0]
            V_root = -b.mass * float(model.gravity @ (model.joints[0].inner_point + b.com))
        np.testing.assert_allclose(
            kd.potential_energy(model, state), V_pin + V_root, rtol=0, atol=TOL * 100
        )


def test_link_frames(robot):
    model, pm = robot
    data = pm.createData()
    rng = np.random.default_rng(7)
    state, q, v, T, Tdot_u = random_pair(model, pm, rng)
    udot = rng.normal(size=model.n)
    a = T @ udot + Tdot_u
    pin.forwardKinematics(pm, data, q, v, a)
    pin.updateFramePlacements(pm, data)
    links = [f for f in pm.frames if f.type == pin.FrameType.BODY]
    names = {f.name for f in model.frames}
    assert {f.name for f in links} <= names
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for f in links:
        fid = pm.getFrameId(f.name, pin.FrameType.BODY)
        oMf = data.oMf[fid]
        R, x = kd.frame_placement(model, state, f.name)
        np.testing.assert_allclose(R, oMf.rotation, rtol=0, atol=TOL)
        np.testing.assert_allclose(x, oMf.translation, rtol=0, atol=TOL)
        mot = kd.frame_acceleration(model, state, f.name, udot)
        vel = pin.getFrameVelocity(pm, data, fid, world)
        acc = pin.getFrameClassicalAcceleration(pm, data, fid, world)
        np.testing.assert_allclose(mot.omega, vel.angular, rtol=0, atol=TOL)
        np.testing.assert_allclose(mot.v, vel.linear, rtol=0, atol=TOL)
        np.testing.assert_allclose(mot.alpha, acc.angular, rtol=0, atol=TOL * 10)
        np.testing.assert_allclose(mot.a, acc.linear, rtol=0, atol=TOL * 10)


def test_icub_neck_moves_no_mass():
    """iCub's head is a point mass on the neck-yaw axis: its mass matrix is singular
    (Pinocchio's too), and kanedyn names the joint."""
    pm = pin.buildModelFromUrdf(str(ROBOTS / "icub.urdf"))
    M = pin.crba(pm, pm.createData(), pin.neutral(pm))
    M = np.triu(M) + np.triu(M, 1).T
    w, V = np.linalg.eigh(M)
    assert w[0] < 1e-15 * w[-1]
    assert pm.names[1 + int(np.argmax(np.abs(V[:, 0])))] == "neck_yaw"
    with pytest.raises(
        kd.FileFormatError,
        match=r"icub.urdf line \d+: <joint name='neck_yaw'>: joint 'neck_yaw' moves no mass",
    ):
        load("icub.urdf", False)


def test_icub_frames_turn_the_right_way(monkeypatch):
    """iCub writes +z axes as ``0 6.12323e-17 1``; its link frames agree with
    Pinocchio's at random joint angles. (Its mass matrix is singular, so the check that
    refuses it for dynamics is switched off here: only the kinematics are compared.)"""
    import kanedyn.io.urdf as urdf_module

    monkeypatch.setattr(urdf_module, "check_mass_matrix", lambda model, shown, locate=None: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFeatureWarning)
        model = read_urdf(ROBOTS / "icub.urdf")
    text = (ROBOTS / "icub.urdf").read_text()
    assert '<axis xyz="0 6.12323e-17 1" />' in text  # +z up to round-off
    pm = pin.buildModelFromUrdf(str(ROBOTS / "icub.urdf"))
    data = pm.createData()
    state, q, *_ = random_pair(model, pm, np.random.default_rng(11))
    pin.framesForwardKinematics(pm, data, q)
    for f in pm.frames:
        if f.type != pin.FrameType.BODY:
            continue
        oMf = data.oMf[pm.getFrameId(f.name, pin.FrameType.BODY)]
        R, x = kd.frame_placement(model, state, f.name)
        np.testing.assert_allclose(R, oMf.rotation, rtol=0, atol=1e-12)
        np.testing.assert_allclose(x, oMf.translation, rtol=0, atol=1e-12)
