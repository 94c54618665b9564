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
# # Explorer 1: the energy-sink flat spin
#
# Explorer 1, the first US satellite (1958), was a long thin cylinder spun about its
# **minor** axis of inertia. Four flexible whip antennas dissipated energy. A rigid body
# with fixed angular momentum $H$ has kinetic energy $T = |H|^2 / (2 I_{\text{spin}})$,
# so losing energy at fixed $|H|$ moves the spin to the axis of **largest** inertia: the
# minor-axis spin is unstable, and within hours the satellite was tumbling end over end
# in a "flat spin". This was the first practical demonstration of the
# major-axis rule.
#
# NASA's 42 simulator ships this case as its `TumbleSat` demo: a hub with four
# antennas on damped 2-DOF gimbals. Here we read 42's own spacecraft file, simulate it,
# and watch the nutation angle (between $H$ and the hub's spin axis) grow while $|H|$
# stays fixed.

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np

import kanedyn as kd
from kanedyn.plotting import nutation_angle

# %% [markdown]
# ## Importing the 42 model
#
# `kd.io.read_42` reads a 42 `SC_*.txt` file (and the `Jnt_*.txt` files it names)
# field by field in 42's order. The file is a copy of 42's `Demo/SC_TumbleSat.txt` that
# ships with kanedyn: `kd.examples.path` finds it in the installed package.
# Everything the reader does not model is reported as a warning, never dropped silently;
# here it reports one thing worth knowing: 42's hub inertia violates the triangle
# inequality, which no real mass distribution can.

# %%
sc_file = kd.examples.path("SC_TumbleSat.txt")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model, state = kd.io.read_42(sc_file)
for w in caught:
    text = " ".join(str(w.message).replace(str(sc_file), sc_file.name).split())
    print(f"{w.category.__name__}: {text}")

print(f"\n{model.nb} bodies, {model.n} speeds (nu = {model.nu}, ns = {model.ns})")
for j in model.joints:
    kind = "spherical" if j.rot_type == "spherical" else f"{j.rot_dof}-DOF gimbal {j.rot_seq}"
    print(
        f"  {j.name}: {j.inner or 'N'} -> {j.outer}: {kind}, {j.trn_dof} slides,"
        f" stiffness {np.round(np.atleast_1d(j.stiffness), 4)}, damping {np.round(np.atleast_1d(j.damping), 3)}"
    )

# %% [markdown]
# It is the same spacecraft as the built-in `kd.examples.explorer1()`: same mass
# matrix and same accelerations at the initial state.

# %%
ref = kd.examples.explorer1()
ref_state = kd.examples.explorer1_state(ref)
dM = np.abs(kd.mass_matrix(model, state) - kd.mass_matrix(ref, ref_state)).max()
da = np.abs(kd.forward_dynamics(model, state) - kd.forward_dynamics(ref, ref_state)).max()
print(f"max |ΔM| = {dM:.1e}, max |Δ acceleration| = {da:.1e}")

m_tot, c, I_sys = kd.system_mass_properties(model, state)
P0, H0 = kd.momentum(model, state)
moments, axes = kd.principal_axes(I_sys)
print(
    f"total mass {m_tot:.2f} kg; principal moments of the whole spacecraft {np.round(moments, 1)} kg m²"
)
print(
    f"|H| = {np.linalg.norm(H0):.4f} N m s, kinetic energy {kd.kinetic_energy(model, state):.4f} J"
)

# %% [markdown]
# ## Simulation
#
# We run the 20000 s of 42's own demo. The spin and antenna motions are slow compared
# with the step, so fixed-step RK4 with $\Delta t = 1$ s is accurate enough here (the
# drift of $|H|$ printed below measures the integration error); we keep one output
# every 20 s.

# %%
T_FINAL, DT = 20000.0, 1.0
traj = kd.simulate(model, state, T_FINAL, DT, method="rk4", output_every=20.0, progress=False)
print(f"{traj.steps} RK4 steps of {DT} s, {len(traj.t)} outputs, wall time {traj.wall_time:.1f} s")

# %% [markdown]
# ## Watching it tumble
#
# `traj.animate("explorer1.html")` writes the run as one self-contained HTML page (the
# `animate` extra, meshcat's viewer): play it, drag to turn the view, and open
# `explorer1.html#t=15000` to start paused at 15000 s. Each body is drawn as the uniform
# box with its mass and principal moments (42's hub inertia violates the triangle
# inequality, so no box has it: the hub comes out flat), the yellow arrow is the angular
# momentum. Called without a file name, as here, it writes nothing and shows the page
# in the notebook. Press play: the spin axis leaves $H$ and the hub ends up turning end
# over end.

# %%
traj.animate(title="Explorer 1: the energy-sink flat spin", max_frames=400)

# %%
t_h = traj.t / 3600.0
nut = np.degrees(nutation_angle(traj))
E = traj.total_energy
H = traj.angular_momentum
Hn = np.linalg.norm(H, axis=1)
w = traj.body(model.bodies[0].name).omega

fig, axs = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
axs[0, 0].plot(t_h, nut)
axs[0, 0].set(xlabel="t [h]", ylabel="deg", title="Nutation angle: H to the hub's spin axis")
axs[0, 1].plot(t_h, E)
axs[0, 1].set(xlabel="t [h]", ylabel="J", title="Energy (kinetic + joint springs)")
axs[1, 0].semilogy(t_h[1:], np.abs(Hn[1:] - Hn[0]) / Hn[0] + 1e-17)
axs[1, 0].set(xlabel="t [h]", ylabel="relative", title="| |H| - |H(0)| | / |H(0)|")
for k, lab in enumerate("xyz"):
    axs[1, 1].plot(t_h, np.degrees(w[:, k]), label=f"ω_{lab}")
axs[1, 1].set(xlabel="t [h]", ylabel="deg/s", title="Hub angular velocity (hub axes)")
axs[1, 1].legend()
plt.show()

# %%
i90 = int(np.argmax(nut > 45.0))
print(
    f"nutation angle: {nut[0]:.3f} deg at t = 0, {nut[-1]:.1f} deg at t = {traj.t[-1]:.0f} s "
    f"(max {nut.max():.1f} deg); it first exceeds 45 deg at t = {traj.t[i90]:.0f} s"
)
print(f"energy: {E[0]:.4f} J -> {E[-1]:.4f} J ({100 * (1 - E[-1] / E[0]):.1f} % dissipated)")
turn = np.arctan2(np.linalg.norm(np.cross(H, H[0]), axis=1), H @ H[0])
print(
    f"|H|: max relative change {np.abs(Hn - Hn[0]).max() / Hn[0]:.1e}; "
    f"direction of H changed by at most {np.degrees(turn).max():.1e} deg"
)

# %% [markdown]
# ## The energy bounds
#
# For a (nearly) rigid body with fixed $|H|$, $T = |H|^2/(2 I)$ about the current spin
# axis. The spacecraft starts spinning about its minor axis and heads for the state of
# least energy, a spin about its major axis:

# %%
Hmag = Hn[0]
T_minor = Hmag**2 / (2 * moments[0])
T_major = Hmag**2 / (2 * moments[-1])
print(f"|H|²/(2 I_min) = {T_minor:.4f} J   (initial energy {E[0]:.4f} J)")
print(f"|H|²/(2 I_max) = {T_major:.4f} J   (final energy {E[-1]:.4f} J, still draining)")

# %% [markdown]
# The initial energy is the minor-axis value; at the end of the run the energy has
# fallen most of the way to the major-axis value, and the nutation angle approaches
# 90°: a flat spin, with the angular momentum unchanged throughout. The antennas'
# dampers are the only dissipation in the model: the joint springs store energy but
# return it.
#
# The same run is `kanedyn simulate` with no arguments.
