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
# # The Whipple bicycle
#
# A bicycle without a rider's hands is a mechanism with two nonholonomic wheels: four
# rigid bodies (rear frame with the rider, front frame, rear wheel, front wheel) joined
# by three hinges, with knife-edge wheels that roll without slipping. Whipple (1899)
# wrote its linearized equations; Meijaard, Papadopoulos, Ruina and Schwab (2007)
# reviewed the many versions in the literature and published a benchmark: parameters
# (their Table 1), the coefficient matrices of the linearized roll and steer equations
#
# $$
# M\ddot q + v\,C_1\dot q + \left(g K_0 + v^2 K_2\right) q = f,
# \qquad q = \begin{bmatrix}\phi\\ \delta\end{bmatrix}
# \ (\text{roll, steer}),
# $$
#
# printed to 14 decimals (their §5), and the eigenvalues against the forward speed $v$
# with the speeds where the motion changes character (their Table 2 and their plot of
# the eigenvalues against speed).
# The bicycle is **self-stable** (it steers itself upright with no rider input) in a
# window of speeds between the *weave* and *capsize* speeds.
#
# We derive the nonlinear equations with `kanedyn.symbolic.KaneProblem`, linearize them
# about upright rolling, and reproduce every published number.

# %%
import time

import attrs
import matplotlib.pyplot as plt
import numpy as np
import scipy.optimize
import sympy as sm
from IPython.display import Markdown, display

from kanedyn.symbolic import benchmark_matrices, linearize, whipple_bicycle

# %% [markdown]
# ## The model
#
# `whipple_bicycle()` builds the model with sympy's frames and points (Moore's
# formulation, the one in sympy's own bicycle test):
#
# * **Coordinates**: yaw $q_1$, roll $q_2$, pitch $q_4$ and steer $q_5$ of the rear
#   frame and the fork. The front wheel must touch the ground: one **holonomic**
#   constraint, which makes the pitch $q_4$ a dependent coordinate.
# * **Speeds**: $u_1 \dots u_6$, the yaw, roll, rear-wheel, pitch, steer and front-wheel
#   rates. The rear contact point's velocity is zero by construction; the front
#   contact point's velocity must be zero too: three **nonholonomic** constraints,
#   which make $u_1, u_4, u_6$ dependent. The independent speeds are the roll rate
#   $u_2$, the rear-wheel rate $u_3$ and the steer rate $u_5$.
# * **Parameters**: Table 1 of the paper, converted to the model's geometry (frame
#   and fork lengths and mass-centre offsets measured along and across the steer axis).

# %%
t0 = time.perf_counter()
bike = whipple_bicycle()
t_derive = time.perf_counter() - t0
problem = bike.problem
print(f"derived in {t_derive:.1f} s")
print("independent coordinates:", list(problem.q_ind), "  dependent:", list(problem.q_dep))
print("independent speeds:     ", list(problem.u_ind), "  dependent:", list(problem.u_dep))
print(f"{len(problem.bodies)} bodies:", [b.name for b in problem.bodies])

# %% [markdown]
# The benchmark parameters (paper's axes: $x$ forward, $z$ down, origin at the rear
# contact point; SI units):

# %%
rows = [f"| `{k}` | {v:.6g} |" for k, v in attrs.asdict(bike.benchmark).items()]
display(Markdown("| parameter | value |\n|---|---|\n" + "\n".join(rows)))

# %% [markdown]
# ## Linearizing about upright rolling
#
# Upright, straight-ahead rolling at speed $v$ (all angles zero, rear-wheel rate
# $u_3 = v/r_R$) is a steady motion for every $v$; `linearize` checks this
# (`check_equilibrium=True`). It differentiates the unconstrained equations together
# with the constraints and eliminates the dependent pitch and speeds afterwards, so
# the state is $x = [q_1, q_2, q_5, u_2, u_3, u_5]$. The speed $v$ stays a symbol.

# %%
t0 = time.perf_counter()
lin = linearize(problem, bike.op_point, check_equilibrium=True)
t_lin = time.perf_counter() - t0
v = bike.speed
print(f"linearized in {t_lin:.1f} s; state x = {[str(s) for s in lin.state]}")
lat = list(bike.lateral)  # roll, steer, roll rate, steer rate
A_lat = lin.A.extract(lat, lat)
display(Markdown(f"$A_{{\\phi\\delta}}(v) = {sm.latex(A_lat.applyfunc(lambda e: e.evalf(6)))}$"))

# %% [markdown]
# The yaw angle and the rear-wheel rate do not feed back into roll and steer, so the
# lateral dynamics are this $4\times4$ block. Its rows are
# $\ddot q = -M^{-1}\left[(gK_0 + v^2K_2)\,q + v\,C_1\dot q\right]$.
#
# ## $M$, $C_1$, $K_0$, $K_2$ against the paper
#
# `benchmark_matrices` linearizes once more with the mass matrix kept
# ($\bar M\dot x = \bar A(v)\,x$) and reads the coefficient matrices off the roll and
# steer rows: $M$ from $\bar M$, $C_1$ from the term linear in $v$, $K_0$ from the
# term free of $v$ (divided by $g$), $K_2$ from the term in $v^2$. Beside them, the
# values printed in §5 of the paper:

# %%
bm = benchmark_matrices(bike)
printed = {
    "M": [[80.81722, 2.31941332208709], [2.31941332208709, 0.29784188199686]],
    "C1": [[0.0, 33.86641391492494], [-0.85035641456978, 1.68540397397560]],
    "K0": [[-80.95, -2.59951685249872], [-2.59951685249872, -0.80329488458618]],
    "K2": [[0.0, 76.59734589573222], [0.0, 2.65431523794604]],
}
symbol = {"M": "M", "C1": "(C_1)", "K0": "(K_0)", "K2": "(K_2)"}
lines = ["| entry | kanedyn | Meijaard et al. (2007) | difference |", "|---|---:|---:|---:|"]
worst = 0.0
for name, P in printed.items():
    ours = getattr(bm, name)
    for i in range(2):
        for j in range(2):
            d = ours[i, j] - P[i][j]
            worst = max(worst, abs(d))
            lines.append(
                f"| ${symbol[name]}_{{{i + 1}{j + 1}}}$ | {ours[i, j]:.14f} | {P[i][j]!r} | {d:.1e} |"
            )
display(Markdown("\n".join(lines)))
print(f"largest difference: {worst:.1e}")

# %% [markdown]
# The differences are at the level of the last printed digit and of double-precision
# round-off: kanedyn's derivation, with no hand algebra, reproduces the benchmark.
#
# ## Eigenvalues against speed
#
# With $x = [\phi, \delta, \dot\phi, \dot\delta]$ the eigenvalues of $A_{\phi\delta}(v)$
# are the four modes of the upright bicycle. We evaluate them from 0 to 10 m/s:

# %%
A_of_v = sm.lambdify(v, A_lat, modules="numpy")


def eigenvalues(speed: float) -> np.ndarray:
    """The four eigenvalues at ``speed``, sorted by real part then imaginary part."""
    return np.sort_complex(np.linalg.eigvals(np.asarray(A_of_v(speed), dtype=float)))


speeds = np.linspace(0.0, 10.0, 1001)
lam = np.array([eigenvalues(s) for s in speeds])

# %% [markdown]
# The speeds where the modes change character, found by root finding on the computed
# eigenvalues:
#
# * $v_d$: two real eigenvalues meet and become the complex **weave** pair. There the
#   characteristic polynomial $\det(\lambda^2 M + \lambda v C_1 + gK_0 + v^2K_2)$ has a
#   double root, so its discriminant in $\lambda$ (a polynomial in $v$) vanishes.
# * $v_w$: the weave pair crosses into the left half-plane ($\mathrm{Re}\,\lambda = 0$).
# * $v_c$: the real **capsize** root crosses zero.

# %%
lam_s, v_s = sm.symbols("lambda v_s")
# The computed matrices as exact rationals, so that the discriminant is exact.
Ms, C1s, K0s, K2s = (
    sm.Matrix(getattr(bm, n)).applyfunc(lambda x: sm.Rational(float(x)))
    for n in ("M", "C1", "K0", "K2")
)
charpoly = sm.Poly(
    (lam_s**2 * Ms + lam_s * v_s * C1s + sm.Rational(bm.g) * K0s + v_s**2 * K2s).det(), lam_s
)
discriminant = sm.Poly(sm.discriminant(charpoly), v_s)
v_d_exact = max(r for r in discriminant.real_roots() if r > 0)
v_d = float(sm.N(v_d_exact, 30))
# At v_d the double root is also a root of d/dλ of the characteristic polynomial.
p_d = sm.Poly(charpoly.as_expr().subs(v_s, sm.N(v_d_exact, 40)), lam_s)
lam_d = float(
    min(
        (r for r in p_d.diff(lam_s).nroots(n=30) if r.is_real),
        key=lambda r: abs(p_d.eval(r)),
    )
)


def weave_real(speed: float) -> float:
    e = eigenvalues(speed)
    return e[np.abs(e.imag) > 1e-9].real.max()


def capsize_root(speed: float) -> float:
    e = eigenvalues(speed)
    return e[np.abs(e.imag) <= 1e-9].real.max()


v_w = scipy.optimize.brentq(weave_real, 3.0, 5.0, xtol=1e-15, rtol=1e-15)
v_c = scipy.optimize.brentq(capsize_root, 5.5, 6.5, xtol=1e-15, rtol=1e-15)
omega_w = np.abs(eigenvalues(v_w).imag).max()

table2 = {  # Meijaard et al. (2007), Table 2
    "v_d [m/s]": (v_d, 0.68428307889246),
    "double root at v_d [1/s]": (lam_d, 3.78290405129320),
    "v_w, weave speed [m/s]": (v_w, 4.29238253634111),
    "weave frequency at v_w [rad/s]": (omega_w, 3.43503384866144),
    "v_c, capsize speed [m/s]": (v_c, 6.02426201538837),
}
lines = ["| quantity | kanedyn | Table 2 | difference |", "|---|---:|---:|---:|"]
for name, (ours, paper) in table2.items():
    lines.append(f"| {name} | {ours:.14f} | {paper:.14f} | {ours - paper:.1e} |")
display(Markdown("\n".join(lines)))

# %% [markdown]
# (The double root comes from the characteristic polynomial rather than from the
# eigenvalue solver: near a double root, round-off of size $\varepsilon$ in the matrix
# splits the eigenvalues by about $\sqrt{\varepsilon}$.)
#
# A plot like the paper's: the real parts (blue) and imaginary parts (orange, shown as
# $|\mathrm{Im}\,\lambda|$) of the eigenvalues against speed, with the self-stable
# window shaded.

# %%
fig, ax = plt.subplots(figsize=(8, 5))
re, im = lam.real, np.abs(lam.imag)
for k in range(4):
    ax.plot(speeds, re[:, k], ".", color="C0", ms=2.5)
    complex_ = im[:, k] > 1e-9
    ax.plot(speeds[complex_], im[complex_, k], ".", color="C1", ms=1.5, alpha=0.6)
ax.axhline(0.0, color="k", lw=0.6)
ax.axvspan(v_w, v_c, color="C2", alpha=0.15, label=f"self-stable: {v_w:.3f} < v < {v_c:.3f} m/s")
for x, name in ((v_d, "$v_d$"), (v_w, "$v_w$"), (v_c, "$v_c$")):
    ax.axvline(x, color="k", ls=":", lw=0.8)
    ax.text(x, 9.3, name, ha="center", va="bottom", backgroundcolor="w")
ax.plot([], [], ".", color="C0", label="Re λ")
ax.plot([], [], ".", color="C1", label="|Im λ| (weave pair)")
ax.text(1.5, 4.0, "weave", color="C0")
ax.text(7.5, 1.0, "capsize", color="C0")
ax.text(0.2, -8.8, "castering", color="C0")
ax.set(xlim=(0, 10), ylim=(-10, 10), xlabel="forward speed v [m/s]", ylabel="λ [1/s]")
ax.set_title("Benchmark bicycle: eigenvalues of the linearized roll and steer equations")
ax.legend(loc="lower right")
plt.show()

# %% [markdown]
# ## The eigenvalue table
#
# Table 2 of the paper lists the eigenvalues at whole speeds. Computed and printed:

# %%
published = {  # v: capsize, weave real part, weave imaginary part, castering
    1: (-3.13423125066578, 3.52696170990070, 0.80774027519930, -7.11008014637442),
    2: (-3.07158645641514, 2.68234517512745, 1.68066296590675, -8.67387984831735),
    3: (-2.63366137253667, 1.70675605663975, 2.31582447384325, -10.35101467245920),
    4: (-1.42944427361326, 0.41325331521125, 3.07910818603206, -12.15861426576450),
    5: (-0.32286642900409, -0.77534188219585, 4.46486771378823, -14.07838969279820),
    6: (-0.00406690076970, -1.52644486584142, 5.87673060598709, -16.08537123098030),
    7: (0.10268170574766, -2.13875644258362, 7.19525913329805, -18.15788466125262),
    8: (0.14327879765713, -2.69348683581097, 8.46037971396931, -20.27940894394569),
    9: (0.15790184030917, -3.21675402252485, 9.69377351531791, -22.43788559040858),
    10: (0.16105338653172, -3.72016840437287, 10.90681139476287, -24.62459635017404),
}
lines = [
    "| v | capsize | weave | castering | max difference |",
    "|---:|---:|---:|---:|---:|",
]
worst = 0.0
for speed, (cap, w_re, w_im, cas) in published.items():
    e = eigenvalues(float(speed))
    real = e[np.abs(e.imag) <= 1e-9].real
    weave = e[e.imag > 1e-9][0]
    expected = np.sort_complex(np.array([cap, w_re + 1j * w_im, w_re - 1j * w_im, cas]))
    d = np.abs(e - expected).max()
    worst = max(worst, d)
    lines.append(
        f"| {speed} | {real.max():.14f} | {weave.real:.14f} ± {weave.imag:.14f} i "
        f"| {real.min():.14f} | {d:.1e} |"
    )
display(Markdown("\n".join(lines)))
print(f"largest difference from Table 2 over v = 1..10 m/s: {worst:.1e}")
at_rest = np.sort(eigenvalues(0.0).real)
print("at v = 0 (all real):", np.array2string(at_rest, precision=14))

# %% [markdown]
# At rest the bicycle is an inverted pendulum in roll with a steer that falls with it:
# two unstable real roots. With speed the two largest real roots merge at $v_d$ into
# the oscillating weave, whose real part decreases with speed; the castering root
# (the front wheel trailing behind the steer axis) stays fast and stable; the capsize
# root (a slow fall to the side while turning) rises through zero at $v_c$.
#
# ## The self-stable range
#
# The upright bicycle is asymptotically stable where every eigenvalue has a negative
# real part. On the grid of speeds:

# %%
stable = lam.real.max(axis=1) < 0
lo, hi = speeds[stable].min(), speeds[stable].max()
print(f"stable grid speeds: {lo:.2f} ... {hi:.2f} m/s (grid step {speeds[1] - speeds[0]:.2f} m/s)")
print(f"root finding:       v_w = {v_w:.10f} m/s < v < v_c = {v_c:.10f} m/s")
print(
    "every stable grid speed lies in (v_w, v_c) and every grid speed in it is stable:",
    bool(np.all(stable == ((speeds > v_w) & (speeds < v_c)))),
)
for speed in (3.0, 5.0, 7.0):
    print(f"v = {speed:.0f} m/s: max Re λ = {eigenvalues(speed).real.max():+.6f} 1/s")

# %% [markdown]
# Below $v_w$ the weave oscillation grows; above $v_c$ the bicycle slowly capsizes. In
# between, a bicycle with these parameters balances itself.
#
# ## The nonlinear model agrees with the linear one
#
# The linearization came from symbolic differentiation; as an independent check,
# difference the full nonlinear right-hand side (`problem.rhs`, which solves for the
# dependent speeds numerically at each state) about upright rolling at 5 m/s. The
# pitch $q_4$ is found from the holonomic constraint at each perturbed state.

# %%
raw = problem.raw
pvals = [float(bike.parameters[p]) for p in problem.parameters]
to_value = {k: float(bike.parameters[p]) for k, p in raw.public.items() if p in bike.parameters}
f_c = sm.lambdify([raw.q], raw.f_c.xreplace(to_value)[0], modules="numpy")
speed = 5.0
r_R = bike.benchmark.r_R


def f(x: np.ndarray) -> np.ndarray:
    """[q1', q2', q5', u2', u3', u5'] at x = [q1, q2, q5, u2, u3, u5]."""
    q_i, u_i = x[:3], x[3:]
    q4 = scipy.optimize.brentq(lambda q4: f_c([*q_i, q4]), -0.5, 0.5, xtol=1e-15)
    return problem.rhs([*q_i, q4], u_i, pvals)[[0, 1, 2, 4, 5, 6]]


x0 = np.array([0.0, 0.0, 0.0, 0.0, speed / r_R, 0.0])
eps = 1e-6
J = np.column_stack([(f(x0 + eps * e) - f(x0 - eps * e)) / (2 * eps) for e in np.eye(6)])
A5 = np.array(lin.A.subs(v, speed), dtype=float)
print(f"|rhs| at upright rolling: {np.abs(f(x0)).max():.1e}")
print(f"max |finite differences - A(5 m/s)|: {np.abs(J - A5).max():.1e}")

# %% [markdown]
# The central differences agree with the symbolic Jacobian to their own truncation
# and round-off error.
#
# To study another bicycle, change the parameters and pass them in:
# `whipple_bicycle(attrs.evolve(bike.benchmark, m_B=70.0))`.
