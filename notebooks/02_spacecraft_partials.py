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
# # Partial velocities of a spacecraft
#
# Kane's method turns Newton's and Euler's equations of every body into one scalar
# equation per generalized speed. The projection is done by the **partial angular
# velocities** and **partial velocities**: for body $i$ and speed $r$,
#
# $$
# \omega_i = \sum_r \frac{\partial \omega_i}{\partial u_r} u_r = \Omega_u[i]\,u, \qquad
# v_i = V_u[i]\,u + V_s[i]\,s ,
# $$
#
# where $u$ holds the rotational speeds of all joints and $s$ the translational
# (slide) speeds. For a tree these matrices can be written down by inspection of the
# path from each body to the inertial frame N (Kane_NBody slides 18-21): a joint $k$
# contributes a column only to the bodies outboard of it,
#
# $$
# \Omega_u[i][:, r] = R_{N G_o}\Gamma_k[:, r], \qquad
# V_u[i][:, r] = \big(R_{N G_o}\Gamma_k[:, r]\big)\times(r_i - o_k), \qquad
# V_s[i][:, c] = R_{N G_i}\Delta_k[:, c],
# $$
#
# with $\Gamma_k$ the joint partials of joint $k$ (its rotation axes, in Go), $\Delta_k$
# its slide axes (in Gi), $o_k$ the joint point and $r_i$ the mass centre of body $i$.
#
# This notebook builds a spacecraft with one joint of each kind, shows the three
# matrices body by body, and reads the mass matrix off them.

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

import kanedyn as kd

np.set_printoptions(precision=4, suppress=True, linewidth=110)

# %% [markdown]
# ## The model
#
# * **hub**: a free-floating root (three slides and a spherical rotation, 6 DOF);
# * **panel**: a solar panel on a hinge about the hub's $y$ axis (1 DOF);
# * **antenna**: a dish on a two-axis gimbal, Euler sequence 21 (azimuth about $y$,
#   then elevation about $x$) (2 DOF);
# * **boom**: a boom that slides out along the hub's $-x$ axis (1 DOF).

# %%
hub = kd.Body("hub", mass=800.0, inertia=kd.inertia_tensor(900.0, 800.0, 700.0, Ixy=12.0))
panel = kd.Body("panel", mass=30.0, inertia=kd.inertia_tensor(2.5, 10.0, 12.5), com=(1.5, 0, 0))
antenna = kd.Body("antenna", mass=15.0, inertia=kd.inertia_tensor(1.2, 0.8, 0.8), com=(0, 0, 0.4))
boom = kd.Body("boom", mass=10.0, inertia=kd.inertia_tensor(0.02, 3.4, 3.4), com=(-1.0, 0, 0))

joints = [
    kd.Joint.free("root", outer="hub"),
    kd.Joint.revolute("hinge", inner="hub", outer="panel", axis=2, inner_point=(1.0, 0, 0)),
    kd.Joint.gimbal(
        "gimbal", inner="hub", outer="antenna", seq="213", dof=2, inner_point=(0, 0, 1.2)
    ),
    kd.Joint.prismatic(
        "slide",
        inner="hub",
        outer="boom",
        axis=1,
        inner_point=(-1.0, 0, 0),
        inner_rotation=kd.euler_to_dcm("312", (np.pi, 0, 0)),
    ),
]
model = kd.Model([hub, panel, antenna, boom], joints)
print("bodies:", [b.name for b in model.bodies])
print("nq =", model.nq, " nu =", model.nu, " ns =", model.ns)
for j in model.joints:
    print(
        f"{j.name:7s} q indices {model.coordinates(j.name)}  speed indices {model.speeds(j.name)}"
    )

# %% [markdown]
# The speeds are ordered as the MSD slides order them: first every joint's rotational
# speeds (the hub's three body rates, the hinge rate, the two gimbal rates), then every
# translational speed (the hub's three velocity components along N, the boom's slide
# rate). The boom's joint frame Gi is turned 180° about $z$, so its slide axis 1 points
# along the hub's $-x$.
#
# A general configuration: the hub tumbling and drifting, the panel half deployed, the
# antenna slewing, the boom extending.

# %%
state = model.initial_state()
state = model.set_joint(
    state,
    "root",
    angles=(0.3, -0.2, 0.5),
    rates=(0.02, -0.01, 0.05),
    displacements=(1.0, 2.0, 3.0),
    displacement_rates=(0.1, 0.0, -0.05),
)
state = model.set_joint(state, "hinge", angles=(0.8,), rates=(0.1,))
state = model.set_joint(state, "gimbal", angles=(0.4, -0.3), rates=(0.05, 0.2))
state = model.set_joint(state, "slide", displacements=(0.6,), displacement_rates=(0.25,))
par = kd.partials(model, state)
print("Omega_u", par.Omega_u.shape, " V_u", par.V_u.shape, " V_s", par.V_s.shape)

# %% [markdown]
# ## Ω_u, V_u and V_s, body by body
#
# Column $r$ of each block is the partial of that body with respect to speed $r$,
# in N components. A column is zero when the joint of speed $r$ is not on the body's
# path to N.

# %%
names = [f"u{r}" for r in range(model.nu)] + [f"s{c}" for c in range(model.ns)]


def show(title, A, cols):
    header = "| | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols) + "\n"
    rows = "".join(
        f"| {axis} | " + " | ".join(f"{x:+.3f}" if abs(x) > 1e-14 else "0" for x in A[a]) + " |\n"
        for a, axis in enumerate("xyz")
    )
    display(Markdown(f"**{title}**\n\n" + header + rows))


for i, b in enumerate(model.bodies):
    display(Markdown(f"### {b.name}"))
    show("Ω_u", par.Omega_u[i], names[: model.nu])
    show("V_u", par.V_u[i], names[: model.nu])
    show("V_s", par.V_s[i], names[model.nu :])

# %% [markdown]
# Reading the blocks:
#
# * Every body has the hub's three rate columns $u_0..u_2$ in $\Omega_u$: a rotation of
#   the hub turns everything. In $V_u$ those columns are $\tilde{\beta}$-like levers: the
#   hub's rate moves each mass centre by $\omega\times(r_i - o_0)$.
# * The hinge column $u_3$ is non-zero only for the panel, the gimbal columns $u_4, u_5$
#   only for the antenna.
# * $V_s$ has the identity in the hub's translational columns $s_0..s_2$ for every body,
#   and the boom's slide axis (the hub's $-x$ in N) in $s_3$ for the boom only.
#   $\Omega_s = 0$: slides do not rotate anything.
#
# The partials depend on the configuration $q$ only, never on the speeds. Two checks:
# the velocities are the partials times the speeds, and changing the speeds leaves the
# partials unchanged.

# %%
kin = kd.kinematics(model, state)
u, s = state.u[: model.nu], state.u[model.nu :]
err_w = np.abs(par.Omega_u @ u - kin.omega).max()
err_v = np.abs(par.V_u @ u + par.V_s @ s - kin.v).max()
other = kd.State(state.q, np.random.default_rng(1).normal(size=model.n))
par2 = kd.partials(model, other)
same = max(np.abs(par2.Omega_u - par.Omega_u).max(), np.abs(par2.V_u - par.V_u).max())
print(f"max |Ω_u u - ω| = {err_w:.1e},  max |V_u u + V_s s - v| = {err_v:.1e}")
print(f"partials at other speeds differ by {same:.1e}")

# %% [markdown]
# ## Reading the mass matrix off the partials
#
# With $\Omega = [\Omega_u \mid 0]$ and $V = [V_u \mid V_s]$ over all speeds
# $\nu = [u \mid s]$, the kinetic energy is
# $K = \tfrac12 \sum_i \omega_i^T I_i \omega_i + m_i v_i^T v_i = \tfrac12 \nu^T M \nu$ with
#
# $$
# M = \sum_i \Omega_i^T I_i \Omega_i + m_i V_i^T V_i
# $$
#
# (Kane_NBody slide 23, 42's `COEF`), where $I_i = R_{NB_i} I_i^{B} R_{NB_i}^T$ is the
# inertia about the mass centre in N axes. We form this sum by hand and compare it with
# `kd.mass_matrix`.

# %%
M_hand = np.zeros((model.n, model.n))
for i, b in enumerate(model.bodies):
    R = kin.R_N_B[i]
    I_N = R @ b.inertia @ R.T
    Om = np.hstack([par.Omega_u[i], np.zeros((3, model.ns))])
    V = np.hstack([par.V_u[i], par.V_s[i]])
    M_hand += Om.T @ I_N @ Om + b.mass * V.T @ V

M = kd.mass_matrix(model, state)
print(
    f"max |M_hand - kd.mass_matrix| = {np.abs(M_hand - M).max():.1e}  (max |M| = {np.abs(M).max():.1f})"
)
print("eigenvalues of M:", np.linalg.eigvalsh(M))
K = kd.kinetic_energy(model, state)
print(f"½ νᵀMν = {0.5 * state.u @ M @ state.u:.10f} J,  kd.kinetic_energy = {K:.10f} J")

# %% [markdown]
# The structure of $M$ mirrors the path tables: entry $(r, r')$ is non-zero only when
# some body lies outboard of both joints. The panel, antenna and boom speeds never
# couple directly (no body is outboard of two of them); each couples to the hub's six
# speeds. The hub's translational block is the total mass times the identity.

# %%
fig, ax = plt.subplots(figsize=(6, 5))
im = ax.imshow(np.log10(np.abs(M) + 1e-16), cmap="viridis", vmin=-4)
ax.set_xticks(range(model.n), names, rotation=90)
ax.set_yticks(range(model.n), names)
ax.set_title("log10 |M|: the mass matrix of the spacecraft")
fig.colorbar(im, ax=ax)
plt.show()
print(
    "translational block of the hub = total mass × U:",
    np.allclose(M[model.nu : model.nu + 3, model.nu : model.nu + 3], model.total_mass * np.eye(3)),
    f"(total mass {model.total_mass:.0f} kg)",
)
print("panel-antenna coupling M[u3, u4] =", M[3, 4], "; panel-boom M[u3, s3] =", M[3, model.nu + 3])

# %% [markdown]
# ## What the partials are for
#
# The same matrices project the applied forces and the inertia forces:
# $F_r = \sum_i \Omega_i^T T_i + V_i^T F_i$ and
# $F^*_r = -\sum_i \Omega_i^T[I_i\dot\omega_i + \omega_i\times H_i] + m_i V_i^T a_i$, and
# Kane's equations $F_r + F^*_r = 0$ are solved for the accelerations. A check at this
# state, with a thruster force on the boom tip:

# %%
loads = [kd.Force("boom", (0.0, 5.0, 0.0), point=(-2.0, 0, 0), frame="body")]
acc = kd.forward_dynamics(model, state, loads)
Fr = kd.generalized_active_forces(model, state, loads)
Fr_star = kd.generalized_inertia_forces(model, state, acc)
print("Fr      =", Fr)
print("Fr*     =", Fr_star)
print(f"max |Fr + Fr*| = {np.abs(Fr + Fr_star).max():.1e}")
