# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A planar parallel manipulator: RK4, the energy-momentum scheme, servo torques
#
# `kd.examples.parallel_3rrr()` is a planar 3-RRR manipulator: three legs of two links
# from base pivots to a triangular platform. Leg 0 carries the platform in the tree;
# legs 1 and 2 close on it through two revolute loop joints (`kd.Loop`), leaving three
# DOF, the platform's x, y and rotation. The base joints are the actuated ones.
#
# We run it free (no gravity, no torques) with RK4 and with the energy-momentum scheme
# at the same large step and compare their energy and loop-closure residuals; then we
# prescribe the platform's motion and solve for the three base torques with servo
# constraints (see the theory page *The energy-momentum scheme*).

# %%
import matplotlib.pyplot as plt
import numpy as np

import kanedyn as kd
from kanedyn.simulation.conserving import PointOutput, inverse_dynamics

robot = kd.examples.parallel_3rrr()
print(
    f"{robot.nb} bodies, {len(robot.joints)} tree joints, loops {[lp.name for lp in robot.loops]}"
)
print(f"tree DOF {robot.n}; the loops leave 3")

# %% [markdown]
# ## A free motion at a large step
#
# We spin the first base joint at 1.5 rad/s and let `assemble` give the other joints
# the positions and speeds that keep the loops closed. RK4 needs a step of about
# 0.0073 s to be accurate to 1e-6 over 2 s on this motion (checked in the first cell
# against a run four times finer); we take ten times that, 0.073 s, for both schemes.

# %%
state = robot.assemble(robot.set_joint(robot.initial_state(), "base0", rates=[1.5]),
                       fix=["base0"])  # fmt: skip
h_rk4 = 2.0 / 275  # 0.0073 s
fine = kd.simulate(robot, state, 2.0, h_rk4 / 4, output_every=2.0, progress=False)
coarse = kd.simulate(robot, state, 2.0, h_rk4, output_every=2.0, progress=False)
print(f"RK4 at {h_rk4:.4f} s: error {np.max(np.abs(coarse.q[-1] - fine.q[-1])):.1e} rad over 2 s")

dt, T = 10 * h_rk4, 100 * 10 * h_rk4  # 100 steps
rk4 = kd.simulate(robot, state, T, dt, progress=False)
em = kd.simulate(robot, state, T, dt, method="energy-momentum", progress=False)
ref = kd.simulate(robot, state, T, dt / 8, output_every=dt, progress=False)
E0 = ref.total_energy[0]
for name, tr in (("RK4", rk4), ("energy-momentum", em)):
    print(f"{name:>16}: energy change {np.max(np.abs(tr.total_energy - E0)) / E0:.1e} "
          f"(relative), largest loop residual {tr.loop_residual[:, 0].max():.1e} m, "
          f"joint-angle error at {T:.1f} s {np.max(np.abs(tr.q[-1] - ref.q[-1])):.1e} rad")  # fmt: skip

# %% [markdown]
# The model is `planar=True` and every joint is a hinge about z, so the conserving scheme
# runs its planar formulation: each body is its in-plane position and two in-plane
# directors, 6 coordinates and 3 rigidity rows instead of 12 and 6
# (`kd.EnergyMomentum(planar=False)` would run the spatial one, to the same trajectory).

# %%
red = em.run.red
print(f"planar formulation: {red.planar}; {red.nx} coordinates, {red.nc} constraint rows, "
      f"{red.nx - red.nc} DOF")  # fmt: skip

# %% [markdown]
# RK4 is integrated in minimal joint speeds with the loops projected back after each
# step, so its loop residual stays small, but its energy drifts with the step. The
# conserving scheme keeps the energy to the Newton tolerance and its constraints (the
# rigidity of every body, the tree joints and the loop joints) hold at every step
# point. Neither is accurate in phase at this step (the conserving scheme is
# second-order): what the large step keeps is the structure of the motion, its energy
# and its closed loops.

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
ax[0].plot(rk4.t, (rk4.total_energy - E0) / E0, label="RK4")
ax[0].plot(em.t, (em.total_energy - E0) / E0, label="energy-momentum")
ax[0].set(xlabel="t [s]", ylabel="(E - E0) / E0", title=f"energy, step {dt:.3f} s")
ax[1].semilogy(rk4.t, np.maximum(rk4.loop_residual[:, 0], 1e-17), label="RK4 (projected)")
ax[1].semilogy(em.t, np.maximum(em.run.constraint_residual, 1e-17),
               label="energy-momentum (all constraints)")  # fmt: skip
ax[1].set(xlabel="t [s]", ylabel="max |constraint| [m]", title="constraint residuals")
for a in ax:
    a.legend()
fig.tight_layout()

# %% [markdown]
# ## Servo constraints: the base torques for a prescribed platform motion
#
# The platform's centre follows a circle of 5 cm radius while the platform rocks by
# ±0.1 rad. The outputs must be linear in the director coordinates: the centre's x and
# y, and the y of a marker 1 m out on the platform's x axis (`y_c + sin φ`). The servo
# step adds them as constraints and the three base torques as unknowns.


# %%
def pose(q):
    """The platform's centre and rotation angle, from Kane's kinematics."""
    P = robot.body_index("platform")
    kin = kd.kinematics(robot, kd.State(q, np.zeros(robot.n)))
    return np.array([kin.p[P][0], kin.p[P][1], np.arctan2(kin.R_N_B[P][1, 0], kin.R_N_B[P][0, 0])])


r, W, A = 0.05, 2.0, 0.1


def centre(t):
    return np.array([r * (np.cos(W * t) - 1.0), r * np.sin(W * t)])


def prescribed(t):
    return np.r_[centre(t), A * np.sin(W * t)]


# start on the prescribed velocity: leg 0 carries the platform, legs 1 and 2 follow
leg = ["base0", "elbow0", "wrist0"]
s = robot.initial_state()
J = np.column_stack([(pose(s.q + e) - pose(s.q - e)) / 2e-7
                     for e in 1e-7 * np.eye(robot.nq)[[robot.coordinates(j)[0] for j in leg]]])  # fmt: skip
for name, w in zip(leg, np.linalg.solve(J, [0.0, r * W, A * W]), strict=True):
    s = robot.set_joint(s, name, rates=[w])
s = robot.assemble(s, fix=leg)

outputs = [
    PointOutput("platform", (0.0, 0.0, 0.0), centre, axes=(0, 1)),
    PointOutput("platform", (1.0, 0.0, 0.0), lambda t: centre(t)[1] + np.sin(A * np.sin(W * t)),
                axes=(1,)),
]  # fmt: skip
h = np.pi / 100  # one revolution of the circle in 100 steps
res = inverse_dynamics(robot, s, np.pi, h, outputs, ["base0", "base1", "base2"])
fw = kd.simulate(robot, s, np.pi, h / 4, loads=res.loads(), output_every=h, progress=False)
miss = max(np.max(np.abs(pose(q) - prescribed(t))) for t, q in zip(fw.t, fw.q, strict=True))
print(f"RK4 driven by the computed torques stays within {miss:.1e} of the prescribed pose")

# %% [markdown]
# `res.nodal_efforts` are the torques at the step points (second-order accurate);
# `res.loads()` turns them into a `loads` callable of `JointLoad`s for any simulator.

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
for k in range(3):
    ax[0].plot(res.t, res.nodal_efforts[:, k], label=f"base{k}")
ax[0].set(xlabel="t [s]", ylabel="torque [N m]", title="base torques")
ax[0].legend()
path = np.array([pose(q) for q in fw.q])
ax[1].plot(*np.array([centre(t) for t in fw.t]).T, "k--", label="prescribed")
ax[1].plot(path[:, 0], path[:, 1], label="RK4 with the torques")
ax[1].set(xlabel="x [m]", ylabel="y [m]", title="platform centre", aspect="equal")
ax[1].legend()
fig.tight_layout()
