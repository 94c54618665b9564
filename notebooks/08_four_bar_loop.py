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
# # A closed loop by hand and by kanedyn: the four-bar linkage
#
# The mechatronics course notes model a four-bar with the **closed-loop vector method**:
# each link is a vector $\mathbf R_k$ of length $r_k$ at angle $\theta_k$ from the $x$
# axis, and the loop closes,
#
# $$
# \mathbf R_2 + \mathbf R_3 = \mathbf R_1 + \mathbf R_4 .
# $$
#
# $\mathbf R_1$ is the ground (from the crank pivot to the rocker pivot, $\theta_1 = 0$),
# $\mathbf R_2$ the crank (the driving link), $\mathbf R_3$ the coupler and $\mathbf R_4$
# the rocker (the passive links). Projected on $x$ and $y$:
#
# $$
# r_2\cos\theta_2 + r_3\cos\theta_3 = r_1 + r_4\cos\theta_4, \qquad
# r_2\sin\theta_2 + r_3\sin\theta_3 = r_4\sin\theta_4 .
# $$
#
# Differentiating once gives the **velocity equations** of the passive links, twice the
# **acceleration equations**. We solve them by hand, add the dynamics (one degree of
# freedom, under gravity), and compare each step with kanedyn's model of the same
# mechanism: `kd.examples.four_bar()`, a tree (crank, coupler, rocker) closed by a loop
# joint (`kd.Loop`).

# %%
import numpy as np
import sympy as sm

import kanedyn as kd

model = kd.examples.four_bar()
r1, r2, r4 = 2.0, 0.5, 1.2
r3 = float(np.hypot(r1, r4 - r2))  # the example's coupler length
print([j.name for j in model.joints], "closed by the loop", model.loops[0].name)
print(kd.dynamics.loops.loop_summary(model))

# %% [markdown]
# ## Position: solve the loop equations for $\theta_3$, $\theta_4$
#
# Given the crank angle $\theta_2$, the two projections are two equations in
# $\theta_3$, $\theta_4$. We solve them with Newton's method from a guess on the open
# branch (crank and rocker on the same side).

# %%
th2 = np.deg2rad(110.0)


def closure(th):
    th3, th4 = th
    return np.array([r2 * np.cos(th2) + r3 * np.cos(th3) - r1 - r4 * np.cos(th4),
                     r2 * np.sin(th2) + r3 * np.sin(th3) - r4 * np.sin(th4)])  # fmt: skip


def closure_jacobian(th):
    th3, th4 = th
    return np.array([[-r3 * np.sin(th3), r4 * np.sin(th4)],
                     [r3 * np.cos(th3), -r4 * np.cos(th4)]])  # fmt: skip


th = np.array([0.3, 1.5])
for _ in range(20):
    th = th - np.linalg.solve(closure_jacobian(th), closure(th))
th3, th4 = th
print(f"by hand: theta3 = {np.rad2deg(th3):.9f} deg, theta4 = {np.rad2deg(th4):.9f} deg")

# %% [markdown]
# kanedyn's crank angle is measured from the crank's position at $q = 0$ (pointing up,
# $\theta_2 = 90°$). `model.assemble` keeps the crank fixed and solves the loop by Newton
# for the other joints; the links' absolute angles come from the kinematics.

# %%
state = model.set_joint(model.initial_state(), "crank", angles=[th2 - np.pi / 2])
state = model.assemble(state, fix=["crank"])


def absolute_angles(state):
    R = kd.kinematics(model, state).R_N_B
    return {b.name: np.arctan2(R[i][1, 0], R[i][0, 0]) for i, b in enumerate(model.bodies)}


ang = absolute_angles(state)
print(f"kanedyn: theta3 = {np.rad2deg(ang['coupler']):.9f} deg, "
      f"theta4 = {np.rad2deg(ang['rocker']):.9f} deg")  # fmt: skip
assert abs(ang["coupler"] - th3) < 1e-10 and abs(ang["rocker"] - th4) < 1e-10

# %% [markdown]
# ## Velocity: $C\,[\omega_3, \omega_4]^T = D$
#
# $$
# \begin{bmatrix} -r_3\sin\theta_3 & r_4\sin\theta_4 \\ r_3\cos\theta_3 & -r_4\cos\theta_4
# \end{bmatrix}
# \begin{bmatrix}\omega_3\\ \omega_4\end{bmatrix}
# = \begin{bmatrix} r_2\sin\theta_2\\ -r_2\cos\theta_2\end{bmatrix}\omega_2 .
# $$
#
# The matrix is the Jacobian of the closure; kanedyn's loop constraint $A\nu = 0$ is
# the same equation in its own speeds (the joint rates, so the coupler's absolute rate
# is $\omega_2 + \dot q_{coupler}$).

# %%
w2 = 3.0
Cm = closure_jacobian(th)
D = np.array([r2 * np.sin(th2), -r2 * np.cos(th2)]) * w2
w3, w4 = np.linalg.solve(Cm, D)
state = model.assemble(model.set_joint(state, "crank", rates=[w2]), fix=["crank"])
omega = kd.kinematics(model, state).omega[:, 2]
w_kd = {b.name: omega[i] for i, b in enumerate(model.bodies)}
print(f"by hand: omega3 = {w3:.12f}, omega4 = {w4:.12f} rad/s")
print(f"kanedyn: omega3 = {w_kd['coupler']:.12f}, omega4 = {w_kd['rocker']:.12f} rad/s")
assert abs(w_kd["coupler"] - w3) < 1e-12 and abs(w_kd["rocker"] - w4) < 1e-12

# %% [markdown]
# ## Acceleration: $C\,[\alpha_3, \alpha_4]^T = B$
#
# Differentiating the velocity equations,
#
# $$
# C \begin{bmatrix}\alpha_3\\ \alpha_4\end{bmatrix} =
# \begin{bmatrix} r_2\sin\theta_2\,\alpha_2 + r_2\cos\theta_2\,\omega_2^2
#   + r_3\cos\theta_3\,\omega_3^2 - r_4\cos\theta_4\,\omega_4^2 \\
#   -r_2\cos\theta_2\,\alpha_2 + r_2\sin\theta_2\,\omega_2^2
#   + r_3\sin\theta_3\,\omega_3^2 - r_4\sin\theta_4\,\omega_4^2 \end{bmatrix}.
# $$
#
# kanedyn writes the same condition as $A\dot\nu + b = 0$, and
# `kd.loop_equations(..., independent=["crank"])` returns $\dot\nu = C\dot\nu_i + c_0$
# for a given crank acceleration.

# %%
a2 = -1.5
B = np.array([
    r2 * np.sin(th2) * a2 + r2 * np.cos(th2) * w2**2 + r3 * np.cos(th3) * w3**2
    - r4 * np.cos(th4) * w4**2,
    -r2 * np.cos(th2) * a2 + r2 * np.sin(th2) * w2**2 + r3 * np.sin(th3) * w3**2
    - r4 * np.sin(th4) * w4**2,
])  # fmt: skip
a3, a4 = np.linalg.solve(Cm, B)
eq = kd.loop_equations(model, state, independent=["crank"])
nu_dot = eq.C @ np.array([a2]) + eq.c0
i_cr, i_co, i_ro = (model.speeds(n)[0] for n in ("crank", "coupler", "rocker"))
print(f"by hand: alpha3 = {a3:.12f}, alpha4 = {a4:.12f} rad/s^2")
print(f"kanedyn: alpha3 = {nu_dot[i_cr] + nu_dot[i_co]:.12f}, alpha4 = {nu_dot[i_ro]:.12f}")
assert abs(nu_dot[i_cr] + nu_dot[i_co] - a3) < 1e-11 and abs(nu_dot[i_ro] - a4) < 1e-11

# %% [markdown]
# ## Dynamics: one generalized speed
#
# With the crank rate $u = \omega_2$ as the independent speed, every velocity is a
# multiple of it: $\omega_3 = k_3 u$, $\omega_4 = k_4 u$ with $k = C^{-1}D/\omega_2$, and
# the mass centres' velocities follow. Kane's equation for the one speed is
#
# $$
# F + F^* = 0, \qquad I_{\text{eff}}(\theta_2)\,\dot u + \tfrac12 I'_{\text{eff}}(\theta_2)\,u^2
#   = Q(\theta_2),
# $$
#
# with $I_{\text{eff}} = \sum_i m_i |\partial v_i/\partial u|^2 + I_i (\partial\omega_i/\partial u)^2$
# (twice the kinetic energy at $u = 1$) and $Q$ the generalized force of gravity. We let
# sympy do the algebra, treating $\theta_3$, $\theta_4$ as functions of $\theta_2$
# (implicit differentiation of the closure).

# %%
t2, t3, t4 = sm.symbols("theta2:5")
C_s = sm.Matrix([[-r3 * sm.sin(t3), r4 * sm.sin(t4)], [r3 * sm.cos(t3), -r4 * sm.cos(t4)]])
k3, k4 = C_s.LUsolve(sm.Matrix([r2 * sm.sin(t2), -r2 * sm.cos(t2)]))  # dθ3/dθ2, dθ4/dθ2
e = lambda a: sm.Matrix([sm.cos(a), sm.sin(a)])  # noqa: E731
de = lambda a: sm.Matrix([-sm.sin(a), sm.cos(a)])  # noqa: E731
masses = {n: model.body(n).mass for n in ("crank", "coupler", "rocker")}
I_z = {n: model.body(n).inertia[2, 2] for n in masses}
# partial velocities of the mass centres (at the rods' midpoints) and partial angular velocities
dv = {"crank": r2 / 2 * de(t2), "coupler": r2 * de(t2) + r3 / 2 * de(t3) * k3,
      "rocker": r4 / 2 * de(t4) * k4}  # fmt: skip
dw = {"crank": 1, "coupler": k3, "rocker": k4}
g = 9.81
I_eff = sum(masses[n] * dv[n].dot(dv[n]) + I_z[n] * dw[n] ** 2 for n in masses)
Q = sum(dv[n].dot(sm.Matrix([0, -masses[n] * g])) for n in masses)
dI_eff = I_eff.diff(t2) + I_eff.diff(t3) * k3 + I_eff.diff(t4) * k4  # total d/dθ2
hand = sm.lambdify((t2, t3, t4), (I_eff, Q - sm.Rational(1, 2) * dI_eff * w2**2))
I_hand, f_hand = hand(th2, th3, th4)
print(f"by hand: I_eff = {I_hand:.12f} kg m^2, forcing = {f_hand:.12f} N m")
print(f"kanedyn: C^T M C = {eq.mass_matrix[0, 0]:.12f}, C^T f = {eq.forcing[0]:.12f}")
assert abs(eq.mass_matrix[0, 0] - I_hand) < 1e-10 and abs(eq.forcing[0] - f_hand) < 1e-10

# %% [markdown]
# kanedyn's reduced mass matrix $C^TMC$ and forcing $C^T(f - Mc_0)$ are the hand
# derivation's $I_{\text{eff}}$ and $Q - \tfrac12 I'_{\text{eff}}u^2$: the same equation.
#
# ## Simulation
#
# The mechanism swings under gravity. `kd.simulate` keeps it closed by projecting the
# state back onto the loop constraints after every step (on the native engine, inside
# its compiled step); the energy is conserved to the integrator's accuracy and the loop
# residual stays at round-off.

# %%
traj = kd.simulate(model, state, t_final=4.0, dt=0.002, output_every=0.02)
E = traj.total_energy
print(f"energy variation {np.ptp(E):.2e} J (of {np.abs(E).max():.3f} J)")
print(f"{traj.engine} engine: largest loop residual {traj.loop_residual.max():.1e}")
assert np.ptp(E) < 1e-6 and traj.loop_residual.max() < 1e-12

# %% [markdown]
# And at every stored state, the hand-solved closure holds for kanedyn's angles:

# %%
worst = 0.0
for k in range(len(traj.t)):
    ang = absolute_angles(traj.state(k))
    th2 = ang["crank"]  # closure() reads the crank angle th2
    worst = max(worst, np.abs(closure([ang["coupler"], ang["rocker"]])).max())
print(f"largest closure error along the run: {worst:.1e} m")
assert worst < 1e-12

# %% [markdown]
# ## Watching it move
#
# The same run as a 3D page (`traj.animate("four_bar.html")` would write it to a file;
# without a name it is shown here). `shape="rod"` draws each link as rods between its
# joint points, and `joint_axes=True` adds the hinge axes, the loop's included.

# %%
traj.animate(shape="rod", joint_axes=True, title="four-bar under gravity")
