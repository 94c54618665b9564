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
# # The rolling disc
#
# A thin uniform disc (mass $m$, radius $r$) rolls without slipping on a horizontal
# plane. It is Kane's classic example of a **nonholonomic** system: the no-slip
# condition constrains the velocities but cannot be integrated into a constraint on the
# coordinates, because the disc can reach any position and heading by rolling along
# the right path. We derive its equations with dependent speeds, linearize them about
# steady upright rolling, and find the speed above which rolling is stable: the
# classical result is
#
# $$
# \Omega^2 > \frac{g}{3r}, \qquad\text{i.e.}\qquad v = \Omega r > \sqrt{g r/3}.
# $$
#
# The tool is `kanedyn.symbolic.problem.KaneProblem`: Kane's method for a system
# described with sympy's frames and points, with dependent coordinates and speeds
# eliminated as in Kane & Levinson (1985, §6.1). The disc is one of kanedyn's built-in
# problems, `kanedyn.symbolic.examples.rolling_disc`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import scipy.integrate
import scipy.optimize
import sympy as sm
from IPython.display import Markdown, display

from kanedyn.symbolic.examples import rolling_disc
from kanedyn.symbolic.linearize import linearize

# %% [markdown]
# ## Coordinates, speeds and the constraints
#
# Frames: N's $z$ axis points **down**. A is yawed by $q_1$ about $N_z$; B is leaned by $q_2$ about
# $A_x$; the disc C spins by $q_3$ about $B_y$ (its axle). The disc centre is at
# $(q_4, q_5, q_6)$ in N, and the contact point P is $r$ along $B_z$ from it.
#
# * **Speeds**: $u_1, u_2, u_3$ are the disc's angular velocity components along B
#   (so $u_2$ is the spin rate), and $u_4, u_5, u_6$ the centre's velocity along C.
# * **Holonomic constraint**: the disc touches the plane, so the centre height $q_6$
#   follows from the lean: $q_6$ is a **dependent coordinate**.
# * **Nonholonomic constraints**: the contact point P has zero velocity,
#   $v_P = v_{C_o} + \omega\times r_{C_o\to P} = 0$. These three equations fix
#   $u_4, u_5, u_6$: **dependent speeds**.
#
# `rolling_disc("constrained")` builds exactly this with `sympy.physics.vector` and
# hands the pieces to `KaneProblem`; they are kept in `kane_args`.

# %%
disc = rolling_disc("constrained")
problem = disc.problem
q1, q2, q3, q4, q5, q6 = disc.q
u1, u2, u3, u4, u5, u6 = disc.u
r, m, g = disc.r, disc.m, disc.g
spec = disc.kane_args
for name in ("configuration_constraints", "velocity_constraints"):
    eqs = sm.Matrix([sm.simplify(e) for e in spec[name]])
    display(Markdown(f"{name.replace('_', ' ')}: ${sm.latex(eqs)} = 0$"))

# %% [markdown]
# The dependent speeds, solved from the velocity constraints: the centre velocity is
# the spin rate times the radius, along the rolling direction, and the lean rate
# swings it sideways.

# %%
for ud, expr in problem.u_dep_solution.items():
    display(Markdown(f"${sm.latex(ud)} = {sm.latex(sm.simplify(expr))}$"))

# %% [markdown]
# Kane's equations for the three independent speeds are formed with the constrained
# partial velocities $\tilde v_r = v_r + \sum_d A_{dr} v_d$ (the dependent speeds
# eliminated), $\tilde F_r + \tilde F^*_r = 0$. Here are the generalized active forces:
# only gravity contributes, and only through the lean speed $u_1$.

# %%
display(Markdown(f"$\\tilde F_r = {sm.latex(sm.simplify(problem.Fr).T)}$"))

# %% [markdown]
# ## Steady upright rolling and its stability
#
# Upright rolling in a straight line at spin rate $\Omega$ ($q_2 = 0$, $u_1 = u_3 = 0$,
# $u_2 = \Omega$) is a steady motion for every $\Omega$. `linearize` forms the linear
# model $\delta\dot x = A\,\delta x$ about it (with $x = [q_1 \dots q_5, u_1, u_2, u_3]$;
# the dependent coordinate and speeds follow from the constraints) and checks that the
# operating point is steady.

# %%
Omega = sm.Symbol("Omega")
values = {r: 0.3, g: 9.81, m: 2.0}
lin = linearize(problem, {q2: 0, u1: 0, u2: Omega, u3: 0, **values}, check_equilibrium=True)
print("state:", [str(s) for s in lin.state])
A_sym = sm.simplify(lin.A.subs(q1, 0))
display(Markdown(f"$A = {sm.latex(A_sym)}$"))

# %% [markdown]
# Only the lean, lean rate and heading rate couple. The characteristic polynomial has
# six zero roots (the positions, heading and spin are neutral) and a pair
# $\lambda^2 = c(\Omega)$:

# %%
lam = sm.Symbol("lambda")
charpoly = sm.factor(A_sym.charpoly(lam).as_expr())
display(Markdown(f"$\\det(\\lambda I - A) = {sm.latex(charpoly)}$"))
c_of_Omega = sm.simplify(
    sm.solve(sm.cancel(charpoly / lam**6).subs(lam**2, sm.Symbol("L")), sm.Symbol("L"))[0]
)
Omega_crit = sm.solve(sm.Eq(c_of_Omega, 0), Omega)
display(Markdown(f"$\\lambda^2 = {sm.latex(sm.nsimplify(c_of_Omega, rational=False))}$"))
print("lambda^2 = 0 at Omega =", Omega_crit)
print(f"4 g / (5 r) = {4 * values[g] / (5 * values[r]):.4f} 1/s², 12/5 = {12 / 5}")
print(f"sqrt(g/(3 r)) = {np.sqrt(values[g] / (3 * values[r])):.6f} rad/s")

# %% [markdown]
# That is $\lambda^2 = \tfrac{4g}{5r} - \tfrac{12}{5}\Omega^2$, zero at $\Omega^2 = g/(3r)$.
# Below the critical spin rate $\lambda^2 > 0$: a real pair, one root unstable, and the
# disc falls over. Above it $\lambda^2 < 0$: an imaginary pair, a wobble that neither
# grows nor decays (the linear model has no dissipation). The eigenvalues against the
# rolling speed $v = \Omega r$:

# %%
v_grid = np.linspace(0.05, 2.5, 200)
eig = np.array([lin.eigenvalues({Omega: v / values[r], q1: 0.0}) for v in v_grid])
v_crit = np.sqrt(values[g] * values[r] / 3)


def real_minus_imag(v):
    e = lin.eigenvalues({Omega: v / values[r], q1: 0.0})
    return np.abs(e.real).max() - np.abs(e.imag).max()


v_found = scipy.optimize.brentq(real_minus_imag, 0.5, 1.5, xtol=1e-12)
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(v_grid, eig.real, "b.", ms=2)
ax.plot(v_grid, np.abs(eig.imag), "r.", ms=2)
ax.axvline(v_crit, color="k", ls=":", label=f"√(g r/3) = {v_crit:.4f} m/s")
ax.plot([], [], "b.", label="Re λ")
ax.plot([], [], "r.", label="|Im λ|")
ax.set(xlabel="rolling speed v = Ω r [m/s]", ylabel="1/s", title="Upright rolling disc, r = 0.3 m")
ax.legend()
plt.show()
print(
    f"stability boundary from the eigenvalues: v = {v_found:.10f} m/s;  sqrt(g r / 3) = {v_crit:.10f} m/s"
)

# %% [markdown]
# ## The nonlinear motion on either side
#
# `problem.rhs` evaluates the full nonlinear equations (kinematic equations, the
# dependent-speed solve and Kane's equations). Starting upright with a small lean of
# 0.05 rad, below and above the critical speed:

# %%
params = [values[p] for p in problem.parameters]


def simulate(v, t_final=4.0, lean=0.05):
    q0 = [0.0, lean, 0.0, 0.0, 0.0, -values[r] * np.cos(lean)]
    u0 = [0.0, v / values[r], 0.0]

    def f(t, x):
        return problem.rhs(x[:6], x[6:], params)

    return scipy.integrate.solve_ivp(
        f, (0, t_final), q0 + u0, rtol=1e-9, atol=1e-12, dense_output=True
    )


fig, ax = plt.subplots(figsize=(7, 3.5))
t = np.linspace(0, 4, 400)
for v in (0.8 * v_crit, 1.5 * v_crit):
    sol = simulate(v)
    lean = sol.sol(t)[1]
    ax.plot(t, np.degrees(lean), label=f"v = {v:.2f} m/s ({v / v_crit:.1f} × critical)")
    print(
        f"v = {v:.3f} m/s: lean {np.degrees(lean[0]):.2f} deg -> max |lean| {np.degrees(np.abs(lean).max()):.1f} deg over {t[-1]:.0f} s"
    )
ax.set(xlabel="t [s]", ylabel="lean q2 [deg]")
ax.legend()
plt.show()
