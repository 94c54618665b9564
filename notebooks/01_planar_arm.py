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
# # Kane's method by hand and by kanedyn: the 2-DOF planar arm
#
# Two uniform links in the $x$-$y$ plane, hinged about $z$: link 1 (mass $m_1$, length
# $l_1$, mass centre at $l_{c1}$ from joint 1, central inertia $I_1$ about $z$) turns by
# $\theta_1$ from the $x$ axis; link 2 ($m_2$, $l_{c2}$, $I_2$) turns by $\theta_2$
# relative to link 1, at the end of link 1. Gravity $g$ acts along $-y$. This is the
# example of the classic robotics lecture notes that derive it with Lagrange's
# equations in the form
#
# $$
# \sum_j H_{ij}\ddot\theta_j + \sum_{j,k} h_{ijk}\dot\theta_j\dot\theta_k + G_i = \tau_i ,
# \qquad h_{ijk} = \frac{\partial H_{ij}}{\partial\theta_k} - \frac12\frac{\partial H_{jk}}{\partial\theta_i}.
# $$
#
# We derive it three ways: Kane's method by hand, Kane's method with `kanedyn.symbolic`,
# and Lagrange's equations with `kanedyn.symbolic`; then we check that all three agree.

# %%
import numpy as np
import sympy as sm
from IPython.display import Markdown, display

import kanedyn as kd
from kanedyn.symbolic.kane import kane
from kanedyn.symbolic.lagrange import lagrange

m1, m2, l1, lc1, lc2, I1, I2, g = sm.symbols("m1 m2 l1 l_c1 l_c2 I1 I2 g", positive=True)

# %% [markdown]
# ## Kane's method by hand
#
# **Generalized speeds.** $u_1 = \dot\theta_1$, $u_2 = \dot\theta_2$.
#
# **Velocities.** With $s_1 = \sin\theta_1$, $c_{12} = \cos(\theta_1+\theta_2)$ and so on,
#
# $$
# \omega_1 = u_1\,\hat z, \quad \omega_2 = (u_1 + u_2)\,\hat z, \quad
# v_1 = l_{c1} u_1 \begin{bmatrix}-s_1\\ c_1\end{bmatrix}, \quad
# v_2 = u_1\begin{bmatrix}-l_1 s_1 - l_{c2}s_{12}\\ l_1 c_1 + l_{c2}c_{12}\end{bmatrix}
#     + u_2\begin{bmatrix}-l_{c2}s_{12}\\ l_{c2}c_{12}\end{bmatrix}.
# $$
#
# **Partial velocities** are the coefficients of the speeds:
#
# | $r$ | $\partial\omega_1/\partial u_r$ | $\partial\omega_2/\partial u_r$ | $\partial v_1/\partial u_r$ | $\partial v_2/\partial u_r$ |
# |---|---|---|---|---|
# | 1 | $\hat z$ | $\hat z$ | $l_{c1}(-s_1, c_1)$ | $(-l_1 s_1 - l_{c2}s_{12},\ l_1 c_1 + l_{c2}c_{12})$ |
# | 2 | $0$ | $\hat z$ | $0$ | $l_{c2}(-s_{12}, c_{12})$ |
#
# **Generalized active forces** (gravity $-m_i g\hat y$ at each mass centre, joint
# torques $\tau_1$ on link 1 and $\tau_2$ between the links):
# $F_r = \sum_i \partial v_i/\partial u_r\cdot(-m_i g\hat y) + \tau_r$.
#
# **Generalized inertia forces**: $F^*_r = -\sum_i \partial\omega_i/\partial u_r\cdot I_i\dot\omega_i
# + \partial v_i/\partial u_r\cdot m_i a_i$, with $a_i = \dot v_i$.
#
# We let sympy do the algebra of exactly these sums:

# %%
t = sm.symbols("t")
th1, th2 = sm.Function("theta1")(t), sm.Function("theta2")(t)
u1, u2 = th1.diff(t), th2.diff(t)
s1, c1, s12, c12 = sm.sin(th1), sm.cos(th1), sm.sin(th1 + th2), sm.cos(th1 + th2)
w = [u1, u1 + u2]  # z components
v = [
    sm.Matrix([-lc1 * s1, lc1 * c1]) * u1,
    sm.Matrix([-l1 * s1 - lc2 * s12, l1 * c1 + lc2 * c12]) * u1
    + sm.Matrix([-lc2 * s12, lc2 * c12]) * u2,
]
m, I = [m1, m2], [I1, I2]
tau = sm.symbols("tau1 tau2")
speeds = [u1, u2]
Fr, Fr_star = [], []
for r, ur in enumerate(speeds):
    dw = [wi.diff(ur) for wi in w]
    dv = [vi.diff(ur) for vi in v]
    Fr.append(sum(dv[i].dot(sm.Matrix([0, -m[i] * g])) for i in range(2)) + tau[r])
    Fr_star.append(
        -sum(dw[i] * I[i] * w[i].diff(t) + dv[i].dot(m[i] * v[i].diff(t)) for i in range(2))
    )
kane_by_hand = [sm.simplify(Fr[r] + Fr_star[r]) for r in range(2)]
for r in range(2):
    display(Markdown(f"$F_{r + 1} + F^*_{r + 1} = {sm.latex(kane_by_hand[r])} = 0$"))

# %% [markdown]
# Kane's equations $F_r + F^*_r = 0$ are linear in $\ddot\theta$: $H\ddot\theta = \tau - C - G$.
# Reading off the coefficients:

# %%
qdd = [th1.diff(t, 2), th2.diff(t, 2)]
H_hand = sm.Matrix(2, 2, lambda r, j: sm.simplify(-kane_by_hand[r].diff(qdd[j])))
rest = sm.Matrix(
    [sm.simplify(kane_by_hand[r] + sum(H_hand[r, j] * qdd[j] for j in range(2))) for r in range(2)]
)
display(Markdown(f"$H = {sm.latex(H_hand)}$"))
display(Markdown(f"$\\tau - C - G = {sm.latex(rest)}$"))

# %% [markdown]
# ## The same with `kanedyn.symbolic.kane`
#
# A kanedyn model whose parameters are sympy symbols: two bodies, a root hinge from N
# about $z$, and a hinge at $l_1$ along link 1's $x$ axis. (The links' moments about
# their own $x$ and $y$ axes do not enter a planar motion; we give them the value $I_i$
# too.)

# %%
link1 = kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(lc1, 0, 0))
link2 = kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(lc2, 0, 0))
arm = kd.Model(
    [link1, link2],
    [
        kd.Joint.revolute("joint1", None, "link1", axis=3),
        kd.Joint.revolute("joint2", "link1", "link2", axis=3, inner_point=(l1, 0, 0)),
    ],
    gravity=(0, -g, 0),
)
eom = kane(arm)
print("coordinates", list(eom.q), " speeds", list(eom.u))

# %% [markdown]
# The teaching table: for each generalized speed, the partial angular velocity and
# partial velocity of each body (N components), then $F_r$ and $F^*_r$ as derived (not
# simplified; `udot_*` are the speed derivatives).

# %%
display(Markdown(eom.table()))

# %% [markdown]
# The partials, simplified, against the hand table above:

# %%
q1s, q2s = eom.q
hand = {
    ("V_u", 0, 0): sm.Matrix([-lc1 * sm.sin(q1s), lc1 * sm.cos(q1s), 0]),
    ("V_u", 1, 0): sm.Matrix(
        [-l1 * sm.sin(q1s) - lc2 * sm.sin(q1s + q2s), l1 * sm.cos(q1s) + lc2 * sm.cos(q1s + q2s), 0]
    ),
    ("V_u", 1, 1): sm.Matrix([-lc2 * sm.sin(q1s + q2s), lc2 * sm.cos(q1s + q2s), 0]),
    ("V_u", 0, 1): sm.zeros(3, 1),
    ("Omega_u", 0, 0): sm.Matrix([0, 0, 1]),
    ("Omega_u", 0, 1): sm.zeros(3, 1),
    ("Omega_u", 1, 0): sm.Matrix([0, 0, 1]),
    ("Omega_u", 1, 1): sm.Matrix([0, 0, 1]),
}
ok = all(
    sm.simplify(getattr(eom, name)[i][:, r] - col) == sm.zeros(3, 1)
    for (name, i, r), col in hand.items()
)
print("kanedyn partials equal the hand table:", ok)

# %% [markdown]
# Kane's equations in kanedyn's form $M\dot\nu = \text{forcing}$, simplified:

# %%
M_kane = sm.simplify(eom.mass_matrix)
f_kane = sm.simplify(eom.forcing)
display(Markdown(f"$M = {sm.latex(M_kane)}$"))
display(Markdown(f"$\\text{{forcing}} = {sm.latex(f_kane)}$"))
subs_hand = {th1: q1s, th2: q2s}
d_hand_M = sm.simplify(H_hand.subs({u1: eom.u[0], u2: eom.u[1]}).subs(subs_hand) - M_kane)
rest_free = rest.subs({tau[0]: 0, tau[1]: 0}).subs({u1: eom.u[0], u2: eom.u[1]}).subs(subs_hand)
d_hand_f = sm.simplify(rest_free - f_kane)
print("by hand == kanedyn:", d_hand_M == sm.zeros(2, 2), d_hand_f == sm.zeros(2, 1))

# %% [markdown]
# ## Lagrange's equations with `kanedyn.symbolic.lagrange`
#
# `lagrange(model)` builds the attitudes and mass-centre positions itself, takes the
# link Jacobians by differentiation, and forms $H$, the $h_{ijk}$ and $G$ from the
# energies: no partial velocities, no inertia forces. The lecture notes print
#
# $$
# H = \begin{bmatrix}
# m_1 l_{c1}^2 + I_1 + m_2(l_1^2 + l_{c2}^2 + 2 l_1 l_{c2}\cos\theta_2) + I_2 &
# m_2(l_{c2}^2 + l_1 l_{c2}\cos\theta_2) + I_2 \\
# m_2(l_{c2}^2 + l_1 l_{c2}\cos\theta_2) + I_2 & m_2 l_{c2}^2 + I_2
# \end{bmatrix},
# $$
#
# $h_{112} + h_{121} = -2 m_2 l_1 l_{c2}\sin\theta_2$, $h_{122} = -m_2 l_1 l_{c2}\sin\theta_2$,
# $h_{211} = m_2 l_1 l_{c2}\sin\theta_2$, $h_{111} = h_{222} = h_{212} + h_{221} = 0$, and
#
# $$
# G_1 = (m_1 l_{c1} + m_2 l_1) g\cos\theta_1 + m_2 l_{c2} g\cos(\theta_1+\theta_2), \qquad
# G_2 = m_2 l_{c2} g\cos(\theta_1+\theta_2).
# $$

# %%
lag = lagrange(arm)
# Both paths create the same symbols (q_<joint>_<i>, u_<joint>_<i>, real=True).
print("same coordinates and speeds:", list(lag.q) == list(eom.q) and list(lag.u) == list(eom.u))
H_lag, h_lag, G_lag = lag.H, lag.christoffel, lag.G
c2 = sm.cos(q2s)
H_notes = sm.Matrix(
    [
        [
            m1 * lc1**2 + I1 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2) + I2,
            m2 * (lc2**2 + l1 * lc2 * c2) + I2,
        ],
        [m2 * (lc2**2 + l1 * lc2 * c2) + I2, m2 * lc2**2 + I2],
    ]
)
h = m2 * l1 * lc2 * sm.sin(q2s)
h_ = lambda i, j, k: sm.simplify(h_lag[i - 1, j - 1, k - 1])  # noqa: E731
G_notes = sm.Matrix(
    [
        (m1 * lc1 + m2 * l1) * g * sm.cos(q1s) + m2 * lc2 * g * sm.cos(q1s + q2s),
        m2 * lc2 * g * sm.cos(q1s + q2s),
    ]
)
checks = {
    "H": sm.simplify(H_lag - H_notes) == sm.zeros(2, 2),
    "h112 + h121": sm.simplify(h_(1, 1, 2) + h_(1, 2, 1) + 2 * h) == 0,
    "h122": sm.simplify(h_(1, 2, 2) + h) == 0,
    "h211": sm.simplify(h_(2, 1, 1) - h) == 0,
    "h111, h222, h212 + h221": [h_(1, 1, 1), h_(2, 2, 2), sm.simplify(h_(2, 1, 2) + h_(2, 2, 1))]
    == [0, 0, 0],
    "G": sm.simplify(G_lag - G_notes) == sm.zeros(2, 1),
}
for name, result in checks.items():
    print(f"{name:24s} matches the notes: {result}")

# %% [markdown]
# ## Equivalence of Kane and Lagrange
#
# Both give $\text{mass matrix}\cdot\dot u = \text{forcing}$ in the same coordinates and
# speeds. `kd.symbolic.compare` decides whether they are the same equations: entry by
# entry it simplifies the differences (cheapest canonical forms first, within a time
# budget), and, as a check that does not rely on simplification, it evaluates both at
# random states and parameter values and compares the accelerations
# $M^{-1}\,\text{forcing}$.

# %%
report = kd.symbolic.compare(eom, lag)
print(report)
print("equivalent:", report.equivalent, "  proven:", report.proven)
print(f"max numeric error of the accelerations: {report.max_numeric_error:.1e}")

# %% [markdown]
# Kane's method reached the equations with no energy function and no differentiation
# of $H$: the partial velocities were read off the velocities, and the $h_{ijk}$ terms
# came out of the inertia forces $m_i a_i$ directly.
#
# ## And numerically
#
# The numeric engine evaluates the same equations. With values for the parameters
# (`Model.subs`), its mass matrix and accelerations match the symbolic ones:

# %%
args = [*eom.q, *eom.u, m1, m2, l1, lc1, lc2, I1, I2, g]
fk = sm.lambdify(args, [eom.mass_matrix, eom.forcing])
values = {m1: 2.0, m2: 1.5, l1: 1.0, lc1: 0.5, lc2: 0.6, I1: 0.17, I2: 0.12, g: 9.81}
num = arm.subs(values)
state = num.set_joint(num.initial_state(), "joint1", angles=(0.3,), rates=(0.5,))
state = num.set_joint(state, "joint2", angles=(-0.7,), rates=(-1.2,))
M_num = kd.mass_matrix(num, state)
x = [*state.q, *state.u, *(values[s] for s in (m1, m2, l1, lc1, lc2, I1, I2, g))]
M_sym, f_sym = (np.array(a, float) for a in fk(*x))
acc_sym = np.linalg.solve(M_sym, f_sym.ravel())
print("M (numeric engine):\n", M_num)
print(f"max |M_numeric - M_symbolic| = {np.abs(M_num - M_sym).max():.1e}")
print(
    f"max |acc_numeric - acc_symbolic| = {np.abs(kd.forward_dynamics(num, state) - acc_sym).max():.1e}"
)

# %% [markdown]
# ## Watching it move
#
# A few seconds of the numeric arm from that state, free under gravity, as a 3D page
# (`arm_traj.animate("arm.html")` would write it to a file; without a name it is shown
# here). The links' inertias are spheres (we gave each the same moment about every
# axis), so their inertia-equivalent boxes would be cubes: `shape="rod"` draws the
# chain as rods between the joints instead, with a ball at each mass centre, and
# `joint_axes=True` adds the hinge axes.

# %%
arm_traj = kd.simulate(num, state, 4.0, 0.005, output_every=0.02, progress=False)
arm_traj.animate(shape="rod", joint_axes=True, title="2-DOF arm under gravity")
