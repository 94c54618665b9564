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
# # MSD versus Kane
#
# kanedyn integrates a tree in one of two formulations with the same state layout
# $x = [q \mid y]$:
#
# * **Kane** (`formulation="kane"`): $y = \nu = [u \mid s]$, the generalized speeds, and
#   $\dot y$ from Kane's equations $M\dot\nu = F_r + F^*_r|_{\dot\nu=0}$;
# * **MSD** (`formulation="msd"`): $y$ = the momentum states, Stoneking's joint momenta
#   $h_k = \Gamma_k^T H_k$ and $p_k = \Delta_k^T P_k$, which are exactly Kane's generalized
#   momenta $M\nu$. For a free-floating root the six root states are the **total** angular
#   momentum (about the system's mass centre) and linear momentum in N. Their rates are written down directly, and the
#   speeds come back from one Cholesky solve with the same $M$.
#
# Why it matters: with no external load the root's $\dot H = 0$ and $\dot P = 0$
# *exactly*, term by term. Any Runge–Kutta method preserves linear invariants, so an
# MSD run keeps the total momentum to round-off, whatever the step. A Kane run
# integrates the speeds, and the momentum computed from them drifts with the
# integration error. The derivation is on the docs page *Momentum-state dynamics*.

# %%
import matplotlib.pyplot as plt
import numpy as np

import kanedyn as kd

# %% [markdown]
# ## A torque-free spacecraft with internal springs and dampers
#
# A 500 kg hub with two hinged solar panels (springs 20 N m/rad, dampers
# 0.2 N m s/rad), tumbling, with the panels flapping. We choose the hub's translational
# velocity so that the total linear momentum is zero: the mass centre stays at rest,
# and the angular momentum about it is the invariant to watch.

# %%
model = kd.examples.hub_with_panels(stiffness=20.0, damping=0.2)
state = model.set_joint(model.initial_state(), "root", rates=(0.05, 0.4, 0.1))
state = model.set_joint(state, "hinge_left", angles=(0.3,), rates=(0.2,))
state = model.set_joint(state, "hinge_right", angles=(-0.1,), rates=(-0.4,))
P, _ = kd.momentum(model, state)
state = model.set_joint(state, "root", displacement_rates=-P / model.total_mass)
P0, H0 = kd.momentum(model, state)
print(
    f"P0 = {P0} N s,  H0 = {H0} N m s,  energy {kd.kinetic_energy(model, state) + kd.potential_energy(model, state):.4f} J"
)

# %% [markdown]
# The MSD states at this instant, and the round trip back to the speeds:

# %%
y = kd.msd.momenta(model, state)
u_back = kd.msd.speeds(model, state.q, y)
root = model.speeds("root")
print("root states: H about N's origin =", y[root[:3]], ", P =", y[root[3:]])
print("hinge states h_k =", y[model.speeds("hinge_left")], y[model.speeds("hinge_right")])
print(f"max |speeds(momenta(state)) - u| = {np.abs(u_back - state.u).max():.1e}")

# %% [markdown]
# ## Momentum drift over a long run
#
# Both formulations, classic RK4 with the same step, 2000 steps of 0.1 s:

# %%
T_FINAL, DT = 200.0, 0.1
runs = {
    f: kd.simulate(model, state, T_FINAL, DT, formulation=f, output_every=1.0, progress=False)
    for f in ("kane", "msd")
}
H_ref = np.linalg.norm(H0)
fig, axs = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
for f, tr in runs.items():
    dH = np.linalg.norm(tr.angular_momentum - H0, axis=1) / H_ref
    dP = np.linalg.norm(tr.linear_momentum - P0, axis=1)
    axs[0].semilogy(tr.t[1:], dH[1:] + 1e-18, label=f)
    axs[1].semilogy(tr.t[1:], dP[1:] + 1e-18, label=f)
    print(
        f"{f:5s}: {tr.steps} steps in {tr.wall_time:.1f} s;  max |H - H0|/|H0| = {dH.max():.1e},"
        f"  max |P - P0| = {dP.max():.1e} N s,  energy {tr.total_energy[0]:.4f} -> {tr.total_energy[-1]:.4f} J"
    )
axs[0].set(xlabel="t [s]", title="relative angular momentum drift", ylim=(1e-17, 1e-5))
axs[1].set(xlabel="t [s]", ylabel="N s", title="linear momentum drift", ylim=(1e-17, 1e-5))
for ax in axs:
    ax.legend()
plt.show()

# %% [markdown]
# The MSD run keeps both momenta at round-off; the Kane run's drift grows steadily (it
# shrinks as $\Delta t^4$ for RK4, but never reaches zero). Both lose energy through the
# dampers, and the two trajectories agree to the integration error:

# %%
dq = np.abs(runs["kane"].q - runs["msd"].q).max()
du = np.abs(runs["kane"].u - runs["msd"].u).max()
E_k, E_m = runs["kane"].total_energy, runs["msd"].total_energy
print(f"max |q_kane - q_msd| = {dq:.1e}, max |u_kane - u_msd| = {du:.1e}")
print(
    f"energy strictly decreasing: kane {bool(np.all(np.diff(E_k) < 0))}, msd {bool(np.all(np.diff(E_m) < 0))}"
)

# %% [markdown]
# ## Locking a joint
#
# MSD slide 19: *"To lock the jth DOF of joint $G_k$, simply set the corresponding
# element of $u$ to zero, and eliminate the corresponding $\dot h_{kj}$ from the EOM."*
# In kanedyn a `kd.Lock(t, joint, dof)` event does this at the first step boundary at
# or after `t`, and `kd.Unlock` frees the DOF again. The locked speed is held at zero
# and the free speeds are re-solved from the generalized momenta of the free DOFs, so
# the total momentum is redistributed, not lost. The lock is a perfectly inelastic
# event: the kinetic energy of the relative motion it stops is dissipated.
#
# Lock the left panel's hinge at t = 30 s and release it at t = 70 s:

# %%
events = [kd.Lock(30.0, "hinge_left"), kd.Unlock(70.0, "hinge_left")]
lock = {
    f: kd.simulate(
        model, state, 100.0, DT, formulation=f, output_every=0.5, events=events, progress=False
    )
    for f in ("kane", "msd")
}
tr = lock["msd"]
i_hinge = model.speeds("hinge_left")[0]
fig, axs = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
axs[0].plot(tr.t, tr.u[:, i_hinge])
axs[0].set(xlabel="t [s]", ylabel="rad/s", title="left hinge rate")
axs[1].plot(tr.t, tr.kinetic_energy)
axs[1].set(xlabel="t [s]", ylabel="J", title="kinetic energy")
for f, run in lock.items():
    dH = np.linalg.norm(run.angular_momentum - H0, axis=1) / H_ref
    axs[2].semilogy(run.t[1:], dH[1:] + 1e-18, label=f)
axs[2].set(xlabel="t [s]", title="relative |H - H0|", ylim=(1e-17, 1e-5))
axs[2].legend()
for ax in axs:
    for t_ev in (30.0, 70.0):
        ax.axvline(t_ev, color="grey", lw=0.8, ls=":")
plt.show()

# %%
j30, j70 = np.searchsorted(tr.t, 30.0), np.searchsorted(tr.t, 70.0)
locked = tr.u[j30:j70, i_hinge]
print(
    f"hinge rate just before the lock {tr.u[j30 - 1, i_hinge]:+.4f} rad/s; while locked max |rate| = {np.abs(locked).max():.1e}"
)
print(
    f"kinetic energy across the lock: {tr.kinetic_energy[j30 - 1]:.4f} J -> {tr.kinetic_energy[j30]:.4f} J"
)
for f, run in lock.items():
    dH = np.linalg.norm(run.angular_momentum - H0, axis=1).max() / H_ref
    dP = np.linalg.norm(run.linear_momentum - P0, axis=1).max()
    print(f"{f:5s} with lock/unlock: max |H - H0|/|H0| = {dH:.1e}, max |P - P0| = {dP:.1e} N s")

# %% [markdown]
# ## When to choose which
#
# | | Kane (`"kane"`) | MSD (`"msd"`) |
# |---|---|---|
# | integrated states | speeds $[u \mid s]$ | generalized momenta $h_k$, $p_k$; total $H$, $P$ of a free root |
# | total momentum of a free body, no external load | drifts with the integration error | kept to round-off, with any RK method |
# | per step (dense engine) | assemble $M$ and $F_r + F^*_r$, one Cholesky solve | assemble $M$, one Cholesky solve for the speeds, momentum rates from composite $H_k$, $P_k$ |
# | per step (compiled engine, the default) | articulated-body elimination for $\dot\nu$ | the same elimination at zero speed for $\nu$, momentum rates from the subtree momenta |
# | remainder accelerations $\alpha_r$, $a_r$ | needed | not needed (replaced by $\omega\times H$ and $v\times P$ terms) |
# | locking a DOF | re-solve the speeds from the momenta at the event | drop one rate equation; the momenta carry over |
# | constraint forces, teaching view, symbolic twin | yes (`constraint_forces`, `kd.symbolic`) | use Kane for these |
#
# Choose **MSD** for long free-flying spacecraft runs where momentum bookkeeping
# matters (attitude budgets, momentum dumping, docking and deployment with locks), and
# for fast rotors kept as momentum states. Choose **Kane** when you want the
# accelerations themselves, the constraint forces, or the equations on paper. On this
# model the wall times per step were:

# %%
for f, tr in runs.items():
    print(f"{f:5s}: {1e3 * tr.wall_time / tr.steps:.2f} ms per RK4 step")
