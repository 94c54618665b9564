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
# # Kane's method stage by stage: the 2-DOF arm and the rolling disc
#
# A student doing Kane's method by hand writes the same five stages every time:
#
# 1. the **kinematics**: each body's angular velocity $\omega_i$ and mass-centre velocity
#    $v_i$, and their rates $\alpha_i$, $a_i$;
# 2. the **partial velocities** $\partial\omega_i/\partial u_r$, $\partial v_i/\partial u_r$;
# 3. the **forces on each body**: applied $F_i$, $T_i$ and inertia
#    $F^*_i = -m_i a_i$, $T^*_i = -(I_i\alpha_i + \omega_i\times I_i\omega_i)$;
# 4. the **generalized forces** $F_r$ and $F^*_r$, row by row;
# 5. the **equations** $F_r + F^*_r = 0$.
#
# `eom.stages()` shows exactly these stages for a kanedyn model. Below, each stage of
# the 2-DOF planar arm of seed 000 (Lagrange formulation of a 2-DOF arm: two links
# hinged about $z$, gravity along $-y$) sits beside the hand result in that seed's
# notation ($\theta_i$, $H_{ij}$, $h_{ijk}$, $G_i$, $\tau_i$), a check cell proves that
# they agree, and the arm ends with the seed's $H$ and right-hand side side by side with
# `derive`'s $M$ and $f$. Then the rolling disc, the classic
# nonholonomic example, goes through the same stages with `KaneProblem`.

# %%
import sympy as sm
from IPython.display import Markdown, display

import kanedyn as kd
from kanedyn.symbolic import kane
from kanedyn.symbolic.examples import rolling_disc
from kanedyn.symbolic.stages import display as display_math


def show(text: str) -> None:
    display(Markdown(text))


def show_stage(k: int) -> None:
    """Stage k's entries, then the names it defines ("where")."""
    stage = st.stages[k]
    for lhs, value in stage.entries:
        show(f"$${display_math(lhs, value)}$$")
    for name, value in stage.where:
        show(f"$${display_math(sm.latex(name), value)}$$")


def same(a, b) -> bool:
    """a == b, as expressions or matrices (trigonometric identities allowed)."""
    d = sm.Matrix([a]) - sm.Matrix([b]) if not isinstance(a, sm.MatrixBase) else a - b
    return all(sm.expand(sm.expand_trig(x)) == 0 for x in d)


# %% [markdown]
# ## The 2-DOF arm
#
# Link 1 (mass $m_1$, mass centre at $l_{c1}$ along the link, inertia $I_1$ about $z$)
# turns by $\theta_1$ about $z$ at the origin; link 2 ($m_2$, $l_{c2}$, $I_2$) turns by
# $\theta_2$ relative to link 1 at its end, $l_1$ from joint 1. The parameters are
# sympy symbols, so every stage comes out in them. The generalized speeds are the joint
# rates, $u_r = \dot\theta_r$.

# %%
m1, m2, l1, lc1, lc2, I1, I2, g = sm.symbols("m1 m2 l1 l_c1 l_c2 I1 I2 g", positive=True)
T1, T2 = sm.symbols("tau1 tau2")
links = [
    kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(lc1, 0, 0)),
    kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(lc2, 0, 0)),
]
hinges = [
    kd.Joint.revolute("shoulder", None, "link1", axis=3),
    kd.Joint.revolute("elbow", "link1", "link2", axis=3, inner_point=(l1, 0, 0)),
]
arm = kd.Model(links, hinges, gravity=(0, -g, 0))
eom = kane(arm, joint_torques={"shoulder": [T1], "elbow": [T2]}, simplify=True)
st = eom.stages(simplify=True)
(th1, th2), (w1, w2), (a1, a2) = eom.q, eom.u, eom.u_dot

# %% [markdown]
# ### Stage 1: kinematics
#
# By hand (the notes' velocity figure): $\omega_1 = \dot\theta_1 \hat z$,
# $\omega_2 = (\dot\theta_1 + \dot\theta_2)\hat z$, and
#
# $$
# v_1 = l_{c1}\dot\theta_1 \begin{bmatrix} -s_1 \\ c_1 \\ 0 \end{bmatrix}, \qquad
# v_2 = \begin{bmatrix} -l_1 s_1 \dot\theta_1 - l_{c2} s_{12} (\dot\theta_1 + \dot\theta_2)
#   \\ l_1 c_1 \dot\theta_1 + l_{c2} c_{12} (\dot\theta_1 + \dot\theta_2) \\ 0 \end{bmatrix}.
# $$

# %%
show(st.stages[0].text)
show_stage(0)

# %%
s1, c1 = sm.sin(th1), sm.cos(th1)
s12, c12 = sm.sin(th1 + th2), sm.cos(th1 + th2)
hand_v1 = lc1 * w1 * sm.Matrix([-s1, c1, 0])
hand_v2 = sm.Matrix(
    [-l1 * s1 * w1 - lc2 * s12 * (w1 + w2), l1 * c1 * w1 + lc2 * c12 * (w1 + w2), 0]
)
assert same(eom.v[0], hand_v1) and same(eom.v[1], hand_v2)
assert same(eom.omega[1], sm.Matrix([0, 0, w1 + w2]))
print("stage 1 agrees with the hand result")

# %% [markdown]
# ### Stage 2: partial velocities
#
# By hand, the coefficients of $u_1 = \dot\theta_1$ and $u_2 = \dot\theta_2$ in the
# velocities above: these are the columns of the notes' Jacobians $J_L^{(i)}$ and
# $J_A^{(i)}$ (eq. 2-3).

# %%
show_stage(1)
for i, hand in enumerate((hand_v1, hand_v2)):
    J_L = hand.jacobian([w1, w2])
    assert same(eom.V_u[i], J_L)
print("stage 2 agrees: V_u[i] is the linear Jacobian J_L of the notes")

# %% [markdown]
# ### Stage 3: forces on each body
#
# Gravity $-m_i g\,\hat y$ at each mass centre; the inertia forces
# $F^*_i = -m_i a_i$ and torques $T^*_i = -I_i\,\alpha_i$ (planar, so
# $\omega_i\times I_i\omega_i = 0$).

# %%
show_stage(2)

# %% [markdown]
# ### Stage 4: generalized active and inertia forces
#
# By hand, with the notes' inertia matrix (eq. 2-7 for this arm)
#
# $$
# H = \begin{bmatrix}
#   I_1 + I_2 + m_1 l_{c1}^2 + m_2(l_1^2 + l_{c2}^2 + 2 l_1 l_{c2} c_2) &
#   I_2 + m_2(l_{c2}^2 + l_1 l_{c2} c_2) \\
#   I_2 + m_2(l_{c2}^2 + l_1 l_{c2} c_2) & I_2 + m_2 l_{c2}^2
# \end{bmatrix}, \qquad h = m_2 l_1 l_{c2} s_2,
# $$
#
# $F^*_r = -\sum_s H_{rs}\dot u_s + [\,h(2 u_1 u_2 + u_2^2),\; -h u_1^2\,]_r$ and
# $F_r = \tau_r - G_r$ with $G_1 = (m_1 l_{c1} + m_2 l_1) g c_1 + m_2 l_{c2} g c_{12}$,
# $G_2 = m_2 l_{c2} g c_{12}$ (eq. 2-9).

# %%
show_stage(3)

# %%
c2, s2 = sm.cos(th2), sm.sin(th2)
H = sm.Matrix(
    [
        [I1 + I2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2),
         I2 + m2 * (lc2**2 + l1 * lc2 * c2)],
        [I2 + m2 * (lc2**2 + l1 * lc2 * c2), I2 + m2 * lc2**2],
    ]
)  # fmt: skip
h = m2 * l1 * lc2 * s2
G = sm.Matrix([(m1 * lc1 + m2 * l1) * g * c1 + m2 * lc2 * g * c12, m2 * lc2 * g * c12])
hand_Fr = sm.Matrix([T1, T2]) - G
hand_Fr_star = -H * sm.Matrix([a1, a2]) + sm.Matrix([h * (2 * w1 * w2 + w2**2), -h * w1**2])
assert same(eom.Fr, hand_Fr) and same(eom.Fr_star, hand_Fr_star)
assert same(eom.mass_matrix, H)
print("stage 4 agrees: Kane's M is the notes' H, and Fr* holds no gravity terms")

# %% [markdown]
# ### Stage 5: the equations
#
# $F_r + F^*_r = 0$ is the notes' eq. 2-11, $H\ddot\theta + h\dot\theta\dot\theta + G = \tau$:

# %%
show(st.stages[4].text)
for r in range(2):
    show(f"$${sm.latex(eom.Fr[r] + eom.Fr_star[r])} = 0$$")

# %% [markdown]
# Stage 5 also writes out the mass matrix $M$ (simplified, symmetric, the upper
# triangle once), the right-hand side $f = F_r + F^*_r|_{\dot u = 0}$ and, for up to three
# speeds, the equations row by row. `print(st)` shows the whole derivation as plain text
# (what `kanedyn derive MODEL` prints, with the model's numbers named `m_link1`,
# `I_link1_zz`, ...); here is its last stage:

# %%
print(str(st).split("5. Equations of motion")[1])

# %% [markdown]
# The whole derivation is also a LaTeX document, `st.latex()` (`kanedyn derive MODEL
# --latex`, which pdflatex compiles; `fragment=True` / `--fragment` for the body only),
# and a Markdown page, `st.markdown()` (`--markdown`).

# %%
print(st.latex()[:400], "...")

# %% [markdown]
# ### Side by side: seed 000 by hand and `derive`
#
# Seed 000 writes the arm's equations (its eq. 2-11) as
# $\sum_j H_{ij}\ddot\theta_j + \sum_{j,k} h_{ijk}\dot\theta_j\dot\theta_k + G_i = \tau_i$,
# with $h_{112} + h_{121} = -2 m_2 l_1 l_{c2} s_2$, $h_{122} = -m_2 l_1 l_{c2} s_2$,
# $h_{211} = m_2 l_1 l_{c2} s_2$ and the others zero. So Kane's $M \dot u = f$ must have
# $M = H$ and $f_i = \tau_i - \sum_{j,k} h_{ijk}\dot\theta_j\dot\theta_k - G_i$, with
# $u_i = \dot\theta_i$. The table puts the hand entries beside stage 5's $M$ and $f$ (as
# `kanedyn derive` prints them), and the check cell proves each pair equal.

# %%
h_112_121, h_122, h_211 = -2 * h, -h, h
seed_rhs = sm.Matrix([T1 - h_112_121 * w1 * w2 - h_122 * w2**2 - G[0], T2 - h_211 * w1**2 - G[1]])
stage5 = dict(st.stages[-1].entries)
M_derive, f_derive = st.unfold(stage5["M"]), st.unfold(stage5["f"])
rows = ["| entry | seed 000 (by hand) | `derive` (stage 5) |", "|---|---|---|"]
for (a, b), name in (((0, 0), "H_{11}"), ((0, 1), "H_{12}"), ((1, 1), "H_{22}")):
    rows.append(f"| ${name}$ | ${sm.latex(H[a, b])}$ | ${sm.latex(M_derive[a, b])}$ |")
for i in range(2):
    rows.append(f"| $f_{i + 1}$ | ${sm.latex(seed_rhs[i])}$ | ${sm.latex(f_derive[i])}$ |")
show("\n".join(rows))
assert same(M_derive, H) and same(f_derive, seed_rhs)
print("derive's M and f are seed 000's H and right-hand side")

# %% [markdown]
# ## The rolling disc
#
# A thin disc (mass $m$, radius $r$) rolls without slipping on a horizontal plane:
# yaw $q_1$, lean $q_2$, spin $q_3$, and speeds $u_1, u_2, u_3$, the disc's angular
# velocity along the lean frame B (axle along $B_y$). With the contact point at rest,
# the no-slip constraint is built into the velocity of the centre
# (`rolling_disc("minimal")`; Kane & Levinson 1985). Its stages, from `KaneProblem`:

# %%
disc = rolling_disc("minimal")
kp = disc.problem
r, m, g_ = disc.r, disc.m, disc.g
u1, u2, u3 = disc.u[:3]
q2 = disc.q[1]
print(kp.table())

# %% [markdown]
# **Stage 1-2 by hand.** The centre C is $r$ above the contact point along $-B_z$, so
# $v_C = \omega \times r\,(-\hat b_z)$ with $\omega = u_1 \hat b_x + u_2 \hat b_y + u_3 \hat b_z$:
# $v_C = r u_2 \hat b_x - r u_1 \hat b_y$ (signs as the frames are set up), whose
# coefficients are the partial velocities: $\partial v_C/\partial u_1 = -r\hat b_y$,
# $\partial v_C/\partial u_2 = r\hat b_x$, $\partial v_C/\partial u_3 = 0$.

# %%
for name, vecs in kp.partial_velocities.items():
    for k, v in enumerate(vecs, 1):
        show(f"$\\partial v_{{{name}}}/\\partial u_{k} = {sm.latex(v.simplify())}$")

# %% [markdown]
# **Stages 4-5.** Only gravity acts (through the lean), and the equations solved for the
# rates are the textbook's:
#
# $$
# \dot u_1 = \frac{6 r u_2 u_3 - r u_3^2 \tan q_2 + 4 g \sin q_2}{5 r}, \qquad
# \dot u_2 = -\tfrac23 u_1 u_3, \qquad \dot u_3 = u_1(-2 u_2 + u_3 \tan q_2).
# $$

# %%
show(f"$F_r = {sm.latex(sm.simplify(kp.Fr).T)}$")
rates = kp.mass_matrix.LUsolve(kp.forcing)
hand = [
    (6 * r * u2 * u3 - r * u3**2 * sm.tan(q2) + 4 * g_ * sm.sin(q2)) / (5 * r),
    -sm.Rational(2, 3) * u1 * u3,
    u1 * (-2 * u2 + u3 * sm.tan(q2)),
]
for k, (a, b) in enumerate(zip(rates, hand, strict=True), 1):
    assert sm.simplify(a - b) == 0
    show(f"$\\dot u_{k} = {sm.latex(sm.simplify(a))}$")
print("the rolling disc's equations agree with the hand result")

# %% [markdown]
# The disc's derivation stage by stage as plain text (`kp.stages()`, also `.latex()`
# and `.markdown()` as for a model):

# %%
print(kp.stages())
