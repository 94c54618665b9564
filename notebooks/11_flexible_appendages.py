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
# # Flexible appendages: a slew with solar arrays, and the spin-up beam
#
# A flexible body is a `kd.Body` with assumed modes, `modes=kd.Modes(...)`: it deforms
# by $d(r) = \Psi(r)\,\eta$ about its undeformed shape, and its modal coordinates $\eta$
# and speeds $\xi = \dot\eta$ follow the joints' in the state,
# $q = [q_\text{joints} \mid \eta]$, $u = [u \mid s \mid \xi]$. `kd.beam_body` builds a
# uniform Euler–Bernoulli cantilever with its analytic modes, the modal integrals and
# the **geometric stiffness** (the stiffening of the beam by the inertial loads it
# carries).
#
# Two questions a rigid model cannot answer:
#
# 1. A spacecraft hub with two solar arrays slews under an attitude controller. How much
#    do the arrays' vibrations cost in pointing, and how long do they ring after the
#    slew? We run the same slew with flexible and with rigid arrays.
# 2. A beam on a hub spun up faster than its own first bending frequency (Kane, Ryan &
#    Banerjee 1987). A linear modal model of the beam (NASA 42's model) goes unstable;
#    the real beam stays bounded because the centrifugal tension stiffens it. We run
#    both.

# %%
import matplotlib.pyplot as plt
import numpy as np

import kanedyn as kd

# %% [markdown]
# ## 1. A slew with flexible solar arrays
#
# `kd.examples.flexible_spacecraft()` is a free 300 kg hub with two 5 m arrays, each a
# `kd.beam_body` cantilever clamped 0.8 m from the hub's centre, with one bending mode in
# and one out of the array plane, 0.5 % modal damping. A quaternion PD law
# (`kd.QuaternionPD`, sampled every 0.1 s, applied as a hub torque) slews the hub 20°
# about z. We make the arrays softer than the example's default (`EI = 150 N m²`) and the
# controller stiffer, so that the controller's bandwidth comes near the arrays'
# frequency. `flexible=False` gives the same spacecraft with rigid arrays: the same
# mass, mass centre and inertia, no modes.

# %%
SLEW = dict(EI=150.0, Kp=300.0, Kd=200.0)
T_FINAL, DT, EVERY = 60.0, 0.05, 0.1

flex_case = kd.examples.flexible_spacecraft(flexible=True, **SLEW)
rigid_case = kd.examples.flexible_spacecraft(flexible=False, **SLEW)
array = flex_case.model.body("array_right")
print("array modes:", array.modes.mode_names)
print("clamped array frequencies [Hz]:", np.round(array.modes.frequencies / (2 * np.pi), 4))
print(f"state: nq + nf = {flex_case.model.nq} + {flex_case.model.nf} coordinates, "
      f"n + nf = {flex_case.model.n} + {flex_case.model.nf} speeds")  # fmt: skip

# %% [markdown]
# The coupled spacecraft vibrates at higher frequencies than the clamped arrays: the hub
# recoils. `kd.linearize` about the initial state gives them (its state includes the
# modal coordinates and speeds, named `array_right.y1`, ...); the free hub's rigid
# motions are the eigenvalues at zero.

# %%
lin = kd.linearize(flex_case.model, flex_case.state)
lam = lin.eigenvalues
coupled = np.unique(np.round(np.abs(lam[np.abs(lam) > 1e-6].imag) / (2 * np.pi), 4))
print("coupled (free hub) frequencies [Hz]:", coupled)


# %%
def slew(case):
    """The run, and the hub's pointing error [deg]: the angle of the rotation from the
    target attitude to the hub's attitude."""
    traj = kd.simulate(case.model, case.state, T_FINAL, DT, controller=case.controller,
                       output_every=EVERY, progress=False)  # fmt: skip
    target_inv = kd.rotation.quat_conjugate(case.target)
    err = np.array([kd.rotation.quat_multiply(target_inv, kd.dcm_to_quat(R))
                    for R in traj.body("hub").R_N_B])  # fmt: skip
    angle = np.degrees(2 * np.arcsin(np.minimum(1.0, np.linalg.norm(err[:, :3], axis=1))))
    return traj, angle


flex, err_flex = slew(flex_case)
rigid, err_rigid = slew(rigid_case)
print(f"flexible run: {flex.steps} RK4 steps on the {flex.engine} engine")


def settling_time(t, err, tol):
    """The first time after which the error stays below tol."""
    above = np.flatnonzero(err > tol)
    if len(above) == 0:
        return t[0]
    return t[above[-1] + 1] if above[-1] + 1 < len(t) else np.inf


for tol in (0.1, 0.01):
    print(f"settled to {tol}°: flexible at t = {settling_time(flex.t, err_flex, tol):.1f} s, "
          f"rigid at t = {settling_time(rigid.t, err_rigid, tol):.1f} s")  # fmt: skip
for t in (20.0, 40.0):
    i = int(np.argmin(np.abs(flex.t - t)))
    print(f"pointing error at t = {flex.t[i]:g} s: flexible {err_flex[i]:.2e}°, "
          f"rigid {err_rigid[i]:.2e}°")  # fmt: skip

# %% [markdown]
# The residual vibration: the arrays' tip deflection, `traj.node(body, "tip")`
# (the elastic displacement $R\Psi_\text{tip}\eta$, N axes), and the hub's rate left
# after the slew. The rigid model has neither.

# %%
tip = flex.node("array_right", "tip").displacement
late = flex.t >= 30.0
rate_flex = np.linalg.norm(flex.body("hub").omega, axis=1)
rate_rigid = np.linalg.norm(rigid.body("hub").omega, axis=1)
print(f"largest tip deflection during the slew: {np.linalg.norm(tip, axis=1).max():.3f} m")
print(
    f"largest tip deflection after t = 30 s: {np.linalg.norm(tip[late], axis=1).max() * 1e3:.2f} mm"
)
print(f"largest hub rate after t = 30 s: flexible {np.degrees(rate_flex[late].max()):.2e} deg/s, "
      f"rigid {np.degrees(rate_rigid[late].max()):.2e} deg/s")  # fmt: skip
E = flex.total_energy  # kinetic energy with the elastic motion, and strain energy
print(f"energy at the end: {E[-1]:.4g} J (the controller and the modal damping take it out)")

# %%
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, constrained_layout=True)
ax1.semilogy(flex.t, err_flex, label="flexible arrays")
ax1.semilogy(rigid.t, err_rigid, "--", label="rigid arrays")
ax1.set(ylabel="pointing error [deg]", ylim=(1e-6, 30), title="20° slew, quaternion PD")
ax1.legend()
R_hub = flex.body("array_right").R_N_B
tip_body = np.einsum("tji,tj->ti", R_hub, tip)  # in the array's own axes
ax2.plot(flex.t, 1e3 * tip_body[:, 1], label="in the array plane (array y)")
ax2.plot(flex.t, 1e3 * tip_body[:, 2], label="out of the plane (array z)")
ax2.set(xlabel="t [s]", ylabel="tip deflection [mm]", title="Right array tip")
ax2.legend()
plt.show()

# %% [markdown]
# The arrays lag the hub while it accelerates and swing ahead as it brakes. The
# controller sees the hub only, so the arrays' ringing couples back into the hub's
# attitude: with flexible arrays the pointing error settles later and stays above the
# rigid model's long after the slew, as the numbers above say. The slew stays in the
# array plane, so the out-of-plane mode is not excited.
#
# `flex.animate("slew.html", deflection_scale=20)` writes a 3D page of the run with the
# arrays drawn bent, their deflection magnified 20 times (see *Watch a run in 3D*).

# %% [markdown]
# ## 2. The spin-up beam: geometric stiffening
#
# A 10 m beam (1.2 kg/m, `EI = 14000 N m²`, two in-plane modes) is clamped to a hub of
# huge inertia that is driven from rest to $\Omega_s = 6$ rad/s in 15 s by the smooth
# profile $\dot\Omega = (\Omega_s/T)(1 - \cos 2\pi t/T)$ (Kane, Ryan & Banerjee 1987), as
# a torque on the hub's revolute joint. `stiffening=True` (the default) carries the
# geometric stiffness; `stiffening=False` is the linear modal model.

# %%
OMEGA, T_UP, J_HUB = 6.0, 15.0, 1e9


def spin_up(stiffening, t_final=20.0):
    hub = kd.Body("hub", 1e3, kd.inertia_tensor(J_HUB, J_HUB, J_HUB))
    beam = kd.beam_body("beam", 10.0, 1.2, 14000.0, n_modes=2, directions=(1,),
                        stiffening=stiffening)  # fmt: skip
    model = kd.Model([hub, beam], [kd.Joint.revolute("spin", None, "hub", axis=3),
                                   kd.Joint.weld("w", "hub", "beam")])  # fmt: skip

    def drive(t, model, state, kin):
        accel = OMEGA / T_UP * (1 - np.cos(2 * np.pi * t / T_UP)) if t < T_UP else 0.0
        return [kd.JointLoad("spin", [J_HUB * accel])]

    try:
        traj = kd.simulate(model, model.initial_state(), t_final, 0.02, loads=drive,
                           output_every=0.1, progress=False)  # fmt: skip
    except kd.SimulationError as exc:  # the run diverged: keep what it computed
        traj = exc.trajectory
    tip = traj.node("beam", "tip").displacement
    in_plane = np.einsum("tji,tj->ti", traj.body("beam").R_N_B, tip)[:, 1]  # beam axes
    return beam, traj, in_plane


beam, stiff, tip_s = spin_up(True)
_, linear, tip_l = spin_up(False)
w1 = beam.modes.frequencies[0]
print(f"beam's first clamped frequency: {w1:.3f} rad/s; final spin: {OMEGA} rad/s")
spin_rate = stiff.u[:, 0]
print(f"the spin passes the first frequency at t = {stiff.t[np.argmax(spin_rate > w1)]:.1f} s")
print(f"with stiffening: largest tip deflection {np.abs(tip_s).max():.3f} m, "
      f"after the spin-up (t > {T_UP:g} s) {np.abs(tip_s[stiff.t > T_UP]).max():.3f} m")  # fmt: skip
print(f"without stiffening: the run {linear.status} at t = {linear.t[-1]:.1f} s; "
      f"tip deflection {np.abs(tip_l).max():.3g} m")  # fmt: skip

# %%
fig, ax = plt.subplots(figsize=(8, 4), constrained_layout=True)
ax.plot(stiff.t, tip_s, label="stiffening=True")
ax.plot(linear.t, tip_l, "--", label="stiffening=False (linear modal model)")
ax.axvline(stiff.t[np.argmax(spin_rate > w1)], color="gray", lw=0.8)
ax.text(stiff.t[np.argmax(spin_rate > w1)] + 0.2, -1.8, "spin = first frequency", color="gray")
ax.set(xlabel="t [s]", ylabel="in-plane tip deflection [m]", ylim=(-2, 2),
       title="Spin-up of a hub-beam system (Kane, Ryan & Banerjee 1987)")  # fmt: skip
ax.legend(loc="upper left")
plt.show()

# %% [markdown]
# With stiffening, the tip lags while the hub accelerates and settles once the spin is
# steady. Without it, the spin only softens the beam in its plane of rotation (the
# $\Omega^2$ terms of the modal equations, not balanced by the centrifugal tension): the
# linear model's in-plane stiffness is $\omega_1^2 - \Omega^2$, which falls to zero as
# the spin reaches the first bending frequency (the gray line), and the deflection
# grows without bound. `tests/test_flex.py` checks both, and the Southwell coefficients of a
# spinning cantilever against their known values.
