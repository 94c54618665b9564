"""Textbook and benchmark problems built with :class:`~kanedyn.symbolic.problem.KaneProblem`.

* :func:`whipple_bicycle` — the Whipple bicycle of the Meijaard et al. (2007) benchmark:
  four rigid bodies, one holonomic and three nonholonomic constraints, with the
  Table-1 parameters and the upright-rolling operating point;
  :func:`benchmark_matrices` reads the paper's :math:`M, C_1, K_0, K_2` off its
  linearization.
* :func:`rolling_disc` — Kane's rolling disc (Kane & Levinson 1985), in its minimal
  form (contact constraint built into the velocities) and in two forms with
  dependent coordinates and speeds.

Each builder returns a small frozen record holding the problem, the keyword
arguments it was built from (frames, bodies, constraints: enough to hand the same
model to another tool, such as sympy's ``KanesMethod``) and the symbols by name.

References
----------
J. P. Meijaard, J. M. Papadopoulos, A. Ruina and A. L. Schwab, "Linearized dynamics
equations for the balance and steer of a bicycle: a benchmark and review",
*Proc. R. Soc. A* 463 (2007) 1955-1982, doi:10.1098/rspa.2007.1857.
T. R. Kane and D. A. Levinson, *Dynamics: Theory and Applications*, McGraw-Hill, 1985.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import sympy as sm
from sympy.physics.mechanics import (
    Point,
    ReferenceFrame,
    RigidBody,
    cross,
    dot,
    dynamicsymbols,
    inertia,
)

from kanedyn.errors import ModelError
from kanedyn.symbolic.linearize import linearize
from kanedyn.symbolic.problem import KaneProblem

__all__ = [
    "BenchmarkMatrices",
    "BenchmarkParameters",
    "RollingDisc",
    "WhippleBicycle",
    "benchmark_matrices",
    "rolling_disc",
    "whipple_bicycle",
]


def _frozen_map(x: Mapping) -> Mapping:
    return types.MappingProxyType(dict(x))


def _read_only(a: Any) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


_positive = attrs.validators.gt(0.0)


# ---------------------------------------------------------------------------
# The Whipple bicycle (Meijaard et al. 2007)
# ---------------------------------------------------------------------------


@attrs.frozen
class BenchmarkParameters:
    """The benchmark bicycle's parameters, in the paper's axes and names (Table 1).

    Axes: x forward, z down, origin at the rear contact point (so the mass-centre
    heights ``z_B``, ``z_H`` are negative). Wheels are axisymmetric (``I_zz = I_xx``).
    The defaults are the Table-1 values; change one with ``attrs.evolve``. SI units.

    Attributes
    ----------
    w, c, lam, g : float
        Wheelbase (m), trail (m), steer-axis tilt from the vertical (rad), gravity (N/kg).
    r_R, m_R, I_Rxx, I_Ryy : float
        Rear wheel R: radius, mass, diametral and axial moments of inertia.
    x_B, z_B, m_B, I_Bxx, I_Byy, I_Bzz, I_Bxz : float
        Rear body and rider B: mass centre, mass, central inertia.
    x_H, z_H, m_H, I_Hxx, I_Hyy, I_Hzz, I_Hxz : float
        Front frame H (fork and handlebar): mass centre, mass, central inertia.
    r_F, m_F, I_Fxx, I_Fyy : float
        Front wheel F: radius, mass, diametral and axial moments of inertia.
    """

    w: float = attrs.field(default=1.02, validator=_positive)
    c: float = 0.08
    lam: float = np.pi / 10
    g: float = attrs.field(default=9.81, validator=_positive)
    r_R: float = attrs.field(default=0.3, validator=_positive)
    m_R: float = attrs.field(default=2.0, validator=_positive)
    I_Rxx: float = attrs.field(default=0.0603, validator=_positive)
    I_Ryy: float = attrs.field(default=0.12, validator=_positive)
    x_B: float = 0.3
    z_B: float = -0.9
    m_B: float = attrs.field(default=85.0, validator=_positive)
    I_Bxx: float = 9.2
    I_Byy: float = 11.0
    I_Bzz: float = 2.8
    I_Bxz: float = 2.4
    x_H: float = 0.9
    z_H: float = -0.7
    m_H: float = attrs.field(default=4.0, validator=_positive)
    I_Hxx: float = 0.05892
    I_Hyy: float = 0.06
    I_Hzz: float = 0.00708
    I_Hxz: float = -0.00756
    r_F: float = attrs.field(default=0.35, validator=_positive)
    m_F: float = attrs.field(default=3.0, validator=_positive)
    I_Fxx: float = attrs.field(default=0.1405, validator=_positive)
    I_Fyy: float = attrs.field(default=0.28, validator=_positive)

    def __attrs_post_init__(self) -> None:
        for body in "BH":
            xx, yy, zz, xz = (getattr(self, f"I_{body}{a}") for a in ("xx", "yy", "zz", "xz"))
            I = np.array([[xx, 0.0, xz], [0.0, yy, 0.0], [xz, 0.0, zz]])
            lam = np.linalg.eigvalsh(I)
            if lam[0] <= 0 or 2 * lam.max() > lam.sum() * (1 + 1e-12):
                raise ModelError(
                    f"BenchmarkParameters: the inertia of {body} is not that of a rigid "
                    f"body (principal moments {lam}: positive, triangle inequality)"
                )


@attrs.frozen(eq=False)
class WhippleBicycle:
    """The Whipple bicycle as a :class:`KaneProblem`, with what its linearization needs.

    Attributes
    ----------
    problem : KaneProblem
        Coordinates ``q_ind = [q1 yaw, q2 roll, q5 steer]``, ``q_dep = [q4 pitch]``;
        speeds ``u_ind = [u2 roll rate, u3 rear-wheel rate, u5 steer rate]``,
        ``u_dep = [u1, u4, u6]`` (yaw rate, pitch rate, front-wheel rate).
    kane_args : mapping
        The keyword arguments ``problem`` was built from (``frame``, ``q_ind``,
        ``u_ind``, ``kd_eqs``, ``q_dep``, ``configuration_constraints``, ``u_dep``,
        ``velocity_constraints``, ``bodies`` as sympy ``RigidBody``, ``loads``).
    symbols : mapping
        Coordinates, speeds and model parameters by name (``"q2"``, ``"WRrad"``, ...).
    parameters : mapping
        Values of the model parameters (symbol -> Float), converted from ``benchmark``.
    speed : sympy.Symbol
        The forward speed ``v`` (m/s) left symbolic in ``op_point``.
    op_point : mapping
        Upright straight-ahead rolling at speed ``v``: all angles and the roll and
        steer rates zero, rear-wheel rate ``u3 = v / r_R``; with ``parameters``.
    lateral : tuple of int, (4,)
        Positions of [roll q2, steer q5, roll rate u2, steer rate u5] in the state
        ``x = [q1, q2, q5, u2, u3, u5]`` of :func:`~kanedyn.symbolic.linearize.linearize`.
    benchmark : BenchmarkParameters
        The parameters in the paper's form.
    """

    problem: KaneProblem
    kane_args: Mapping[str, Any] = attrs.field(converter=_frozen_map)
    symbols: Mapping[str, Any] = attrs.field(converter=_frozen_map)
    parameters: Mapping[Any, Any] = attrs.field(converter=_frozen_map)
    speed: sm.Symbol
    op_point: Mapping[Any, Any] = attrs.field(converter=_frozen_map)
    lateral: tuple[int, ...]
    benchmark: BenchmarkParameters


def _whipple_kane_args() -> tuple[dict, dict]:
    """Frames, points, bodies and constraints of the Whipple bicycle (Moore's formulation).

    The rear frame is yawed (q1 about N.z), rolled (q2 about Y.x) and pitched
    (q4 + htangle about R.y); the fork is steered by q5 about the steer axis
    Frame.x. The front contact point is found from the front-wheel centre along
    the wheel plane's downward direction, ``WFrad (Fork.y (Fork.y . Y.z) - Y.z)``
    normalized. Returns the KaneProblem keyword arguments and the symbols by name.
    """
    q1, q2, q4, q5 = dynamicsymbols("q1 q2 q4 q5")
    u1, u2, u3, u4, u5, u6 = dynamicsymbols("u1:7")
    WFrad, WRrad, htangle, forkoffset = sm.symbols("WFrad WRrad htangle forkoffset")
    forklength, framelength, forkcg1 = sm.symbols("forklength framelength forkcg1")
    forkcg3, framecg1, framecg3, Iwr11 = sm.symbols("forkcg3 framecg1 framecg3 Iwr11")
    Iwr22, Iwf11, Iwf22, Iframe11 = sm.symbols("Iwr22 Iwf11 Iwf22 Iframe11")
    Iframe22, Iframe33, Iframe31, Ifork11 = sm.symbols("Iframe22 Iframe33 Iframe31 Ifork11")
    Ifork22, Ifork33, Ifork31, g = sm.symbols("Ifork22 Ifork33 Ifork31 g")
    mframe, mfork, mwf, mwr = sm.symbols("mframe mfork mwf mwr")

    N = ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", [q1, N.z])
    R = Y.orientnew("R", "Axis", [q2, Y.x])
    Frame = R.orientnew("Frame", "Axis", [q4 + htangle, R.y])
    WR = ReferenceFrame("WR")
    TempFrame = Frame.orientnew("TempFrame", "Axis", [-htangle, Frame.y])
    Fork = Frame.orientnew("Fork", "Axis", [q5, Frame.x])
    TempFork = Fork.orientnew("TempFork", "Axis", [-htangle, Fork.y])
    WF = ReferenceFrame("WF")

    WR_cont = Point("WR_cont")
    WR_mc = WR_cont.locatenew("WR_mc", WRrad * R.z)
    Steer = WR_mc.locatenew("Steer", framelength * Frame.z)
    Frame_mc = WR_mc.locatenew("Frame_mc", -framecg1 * Frame.x + framecg3 * Frame.z)
    Fork_mc = Steer.locatenew("Fork_mc", -forkcg1 * Fork.x + forkcg3 * Fork.z)
    WF_mc = Steer.locatenew("WF_mc", forklength * Fork.x + forkoffset * Fork.z)
    WF_cont = WF_mc.locatenew("WF_cont", WFrad * (dot(Fork.y, Y.z) * Fork.y - Y.z).normalize())

    Y.set_ang_vel(N, u1 * Y.z)
    R.set_ang_vel(Y, u2 * R.x)
    WR.set_ang_vel(Frame, u3 * Frame.y)
    Frame.set_ang_vel(R, u4 * Frame.y)
    Fork.set_ang_vel(Frame, u5 * Fork.x)
    WF.set_ang_vel(Fork, u6 * Fork.y)

    WR_cont.set_vel(N, 0)
    WR_mc.v2pt_theory(WR_cont, N, WR)
    Steer.v2pt_theory(WR_mc, N, Frame)
    Frame_mc.v2pt_theory(WR_mc, N, Frame)
    Fork_mc.v2pt_theory(Steer, N, Fork)
    WF_mc.v2pt_theory(Steer, N, Fork)
    WF_cont.v2pt_theory(WF_mc, N, WF)

    Frame_I = (inertia(TempFrame, Iframe11, Iframe22, Iframe33, 0, 0, Iframe31), Frame_mc)
    Fork_I = (inertia(TempFork, Ifork11, Ifork22, Ifork33, 0, 0, Ifork31), Fork_mc)
    WR_I = (inertia(Frame, Iwr11, Iwr22, Iwr11), WR_mc)
    WF_I = (inertia(Fork, Iwf11, Iwf22, Iwf11), WF_mc)
    bodies = [
        RigidBody("BodyFrame", Frame_mc, Frame, mframe, Frame_I),
        RigidBody("BodyFork", Fork_mc, Fork, mfork, Fork_I),
        RigidBody("BodyWR", WR_mc, WR, mwr, WR_I),
        RigidBody("BodyWF", WF_mc, WF, mwf, WF_I),
    ]
    kd = [q1.diff() - u1, q2.diff() - u2, q4.diff() - u4, q5.diff() - u5]
    v_front = WF_cont.vel(N)
    loads = [
        (Frame_mc, -mframe * g * Y.z),
        (Fork_mc, -mfork * g * Y.z),
        (WF_mc, -mwf * g * Y.z),
        (WR_mc, -mwr * g * Y.z),
    ]
    kane_args = dict(
        frame=N,
        q_ind=[q1, q2, q5],
        u_ind=[u2, u3, u5],
        kd_eqs=kd,
        q_dep=[q4],
        configuration_constraints=[WF_cont.pos_from(WR_cont) & Y.z],
        u_dep=[u1, u4, u6],
        velocity_constraints=[v_front & Y.x, v_front & Y.y, v_front & Y.z],
        bodies=bodies,
        loads=loads,
    )
    symbols = {x.func.__name__: x for x in (q1, q2, q4, q5, u1, u2, u3, u4, u5, u6)}
    parameters = [WFrad, WRrad, htangle, forkoffset, forklength, framelength, forkcg1, forkcg3]
    parameters += [framecg1, framecg3, Iwr11, Iwr22, Iwf11, Iwf22, Iframe11, Iframe22]
    parameters += [Iframe33, Iframe31, Ifork11, Ifork22, Ifork33, Ifork31, g]
    parameters += [mframe, mfork, mwf, mwr]
    symbols.update({x.name: x for x in parameters})
    return kane_args, symbols


def _model_values(p: BenchmarkParameters) -> dict[str, float]:
    """Table-1 parameters converted to the model's geometry, by parameter name.

    The steer axis makes the angle ``htangle = pi/2 - lam`` with the ground; the
    model measures the frame and fork mass centres along and normal to it, and its
    z axes point up, so the heights change sign and so do the xz products of inertia.
    """
    hta = np.pi / 2 - p.lam
    zB, zH = -p.z_B, -p.z_H  # heights above the ground
    rake = -(p.c * np.sin(hta) - p.r_F * np.cos(hta))
    frame_length = p.w * np.sin(hta) - (rake - (p.r_F - p.r_R) * np.cos(hta))
    s, c = np.sin(hta), np.cos(hta)
    frame_cg_norm = (zB - p.r_R - (p.x_B / s) * c) * s
    frame_cg_par = p.x_B / s + (zB - p.r_R - p.x_B / s * c) * c
    ta, tb = zH - p.r_F, p.w - p.x_H
    tc = np.hypot(ta, tb)
    fork_length = p.w * np.cos(hta) - (p.r_F - p.r_R) * np.sin(hta)
    fork_cg_norm = rake + tc * np.sin(np.pi / 2 - hta - np.arccos(ta / tc))
    fork_cg_par = tc * np.cos((np.pi / 2 - hta) - np.arccos(ta / tc)) - fork_length
    return {
        "WFrad": p.r_F, "WRrad": p.r_R, "htangle": hta, "forkoffset": rake,
        "forklength": fork_length, "framelength": frame_length,
        "forkcg1": fork_cg_par, "forkcg3": fork_cg_norm,
        "framecg1": frame_cg_norm, "framecg3": frame_cg_par,
        "Iwr11": p.I_Rxx, "Iwr22": p.I_Ryy, "Iwf11": p.I_Fxx, "Iwf22": p.I_Fyy,
        "Ifork11": p.I_Hxx, "Ifork22": p.I_Hyy, "Ifork33": p.I_Hzz, "Ifork31": -p.I_Hxz,
        "Iframe11": p.I_Bxx, "Iframe22": p.I_Byy, "Iframe33": p.I_Bzz, "Iframe31": -p.I_Bxz,
        "mfork": p.m_H, "mframe": p.m_B, "mwf": p.m_F, "mwr": p.m_R, "g": p.g,
    }  # fmt: skip


def whipple_bicycle(benchmark: BenchmarkParameters | None = None) -> WhippleBicycle:
    """The Whipple bicycle of the Meijaard et al. (2007) benchmark, ready to linearize.

    Four rigid bodies (rear frame with rider, front frame, two knife-edge wheels)
    rolling without slip on flat ground: 4 coordinates with one holonomic
    constraint (the front wheel touches the ground, fixing the pitch q4) and
    6 speeds with three nonholonomic constraints (the front contact point has zero
    velocity; the rear one is built into the velocities). Linearized about upright
    rolling at forward speed :math:`v`, its roll and steer obey (Meijaard et al. 2007,
    eq. 2.1 and §5)

    .. math::

        M \\ddot q + v\\, C_1 \\dot q + (g K_0 + v^2 K_2)\\, q = f,
        \\qquad q = [\\phi, \\delta] \\text{ (roll, steer)}.

    The formulation is Moore's, as in sympy's ``test_kane3.py::test_bicycle``.

    Parameters
    ----------
    benchmark : BenchmarkParameters, optional
        The paper's parameters; default Table 1.

    Returns
    -------
    WhippleBicycle
        The problem, its symbols, the parameter values and the operating point
        (symbolic speed ``v``).

    Examples
    --------
    >>> from kanedyn.symbolic.linearize import linearize
    >>> bike = whipple_bicycle()
    >>> lin = linearize(bike.problem, bike.op_point)
    >>> [str(lin.state[i]) for i in bike.lateral]
    ['q2(t)', 'q5(t)', 'u2(t)', 'u5(t)']
    """
    benchmark = BenchmarkParameters() if benchmark is None else benchmark
    kane_args, symbols = _whipple_kane_args()
    problem = KaneProblem(**kane_args)
    values = {symbols[k]: sm.Float(x, 17) for k, x in _model_values(benchmark).items()}
    v = sm.Symbol("v")
    s = symbols
    op = {s["q1"]: 0, s["q2"]: 0, s["q4"]: 0, s["q5"]: 0, s["u2"]: 0, s["u5"]: 0}
    op[s["u3"]] = v / benchmark.r_R
    op.update(values)
    state = [*problem.q_ind, *problem.u_ind]
    lateral = tuple(state.index(s[k]) for k in ("q2", "q5", "u2", "u5"))
    return WhippleBicycle(
        problem=problem,
        kane_args=kane_args,
        symbols=symbols,
        parameters=values,
        speed=v,
        op_point=op,
        lateral=lateral,
        benchmark=benchmark,
    )


@attrs.frozen(eq=False)
class BenchmarkMatrices:
    """The coefficient matrices of the linearized bicycle (Meijaard et al. 2007, eq. 2.1).

    .. math::

        M \\ddot q + v\\, C_1 \\dot q + (g K_0 + v^2 K_2)\\, q = f, \\qquad q = [\\phi, \\delta].

    Attributes
    ----------
    M, C1, K0, K2 : ndarray, (2, 2)
        Read-only; rows and columns in the order roll, steer.
    g : float
        Gravity (N/kg), the factor of ``K0``.
    """

    M: np.ndarray = attrs.field(converter=_read_only)
    C1: np.ndarray = attrs.field(converter=_read_only)
    K0: np.ndarray = attrs.field(converter=_read_only)
    K2: np.ndarray = attrs.field(converter=_read_only)
    g: float = 9.81

    def state_matrix(self, v: float) -> np.ndarray:
        """:math:`A(v)` of :math:`\\dot x = A x`, :math:`x = [\\phi, \\delta, \\dot\\phi, \\dot\\delta]`, shape (4, 4).

        .. math::

            A(v) = \\begin{bmatrix} 0 & I \\\\
                -M^{-1}(g K_0 + v^2 K_2) & -v\\, M^{-1} C_1 \\end{bmatrix}.
        """
        K = self.g * self.K0 + v**2 * self.K2
        lower = -np.linalg.solve(self.M, np.hstack([K, v * self.C1]))
        return np.vstack([np.hstack([np.zeros((2, 2)), np.eye(2)]), lower])


def benchmark_matrices(bike: WhippleBicycle | None = None) -> BenchmarkMatrices:
    """:math:`M, C_1, K_0, K_2` read off the linearization of the Whipple bicycle.

    The problem is linearized about upright rolling at symbolic speed :math:`v` with
    the mass matrix kept, :math:`\\bar M \\dot x = \\bar A(v)\\, x`
    (:func:`~kanedyn.symbolic.linearize.linearize` with ``A_and_B=False``). The
    roll and steer rows give, with :math:`q = [\\phi, \\delta]` and :math:`\\dot q`
    the roll and steer rates,

    .. math::

        M = \\bar M_{\\dot q \\dot q}, \\quad
        C_1 = -\\frac{\\partial \\bar A_{\\dot q \\dot q}}{\\partial v}, \\quad
        K_0 = -\\frac{1}{g}\\bar A_{\\dot q q}\\big|_{v=0}, \\quad
        K_2 = -\\frac12\\frac{\\partial^2 \\bar A_{\\dot q q}}{\\partial v^2}.

    With the Table-1 parameters these are the matrices printed in §5 of
    Meijaard et al. (2007).

    Parameters
    ----------
    bike : WhippleBicycle, optional
        Default :func:`whipple_bicycle` with the Table-1 parameters.

    Returns
    -------
    BenchmarkMatrices
    """
    bike = whipple_bicycle() if bike is None else bike
    v = bike.speed
    lin = linearize(bike.problem, bike.op_point, A_and_B=False)
    angles, rates = list(bike.lateral[:2]), list(bike.lateral[2:])
    A_qd_q = lin.A.extract(rates, angles)
    A_qd_qd = lin.A.extract(rates, rates)
    g = float(bike.benchmark.g)

    def num(X: sm.Matrix) -> np.ndarray:
        return np.array(X.evalf(), dtype=float)

    return BenchmarkMatrices(
        M=num(lin.M.extract(rates, rates)),
        C1=num(-A_qd_qd.diff(v)),
        K0=num(-A_qd_q.subs(v, 0)) / g,
        K2=num(-A_qd_q.diff(v, 2) / 2),
        g=g,
    )


# ---------------------------------------------------------------------------
# Kane's rolling disc
# ---------------------------------------------------------------------------


@attrs.frozen(eq=False)
class RollingDisc:
    """Kane's rolling disc as a :class:`KaneProblem`.

    Attributes
    ----------
    problem : KaneProblem
    kane_args : mapping
        The keyword arguments ``problem`` was built from.
    q, u : tuple of dynamic symbols
        All coordinates and all speeds (independent first).
    r, m, g : sympy.Symbol
        Radius, mass and gravity (positive).
    contact : Point
        The contact point (on the ground, under the disc centre).
    form : str
        ``"minimal"``, ``"contact"`` or ``"constrained"`` (see :func:`rolling_disc`).
    """

    problem: KaneProblem
    kane_args: Mapping[str, Any] = attrs.field(converter=_frozen_map)
    q: tuple
    u: tuple
    r: sm.Symbol
    m: sm.Symbol
    g: sm.Symbol
    contact: Point
    form: str


def _minimal_disc(r, m, g) -> tuple[dict, tuple, tuple, Point]:
    q1, q2, q3, u1, u2, u3 = dynamicsymbols("q1 q2 q3 u1 u2 u3")
    N = ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", [q1, N.z])
    L = Y.orientnew("L", "Axis", [q2, Y.x])
    R = L.orientnew("R", "Axis", [q3, L.y])
    w_qd = R.ang_vel_in(N)
    R.set_ang_vel(N, u1 * L.x + u2 * L.y + u3 * L.z)
    C = Point("C")
    C.set_vel(N, 0)
    Dmc = C.locatenew("Dmc", r * L.z)
    Dmc.v2pt_theory(C, N, R)
    I = inertia(L, m / 4 * r**2, m / 2 * r**2, m / 4 * r**2)
    kane_args = dict(
        frame=N,
        q_ind=[q1, q2, q3],
        u_ind=[u1, u2, u3],
        kd_eqs=[dot(R.ang_vel_in(N) - w_qd, e) for e in L],
        bodies=[RigidBody("disc", Dmc, R, m, (I, Dmc))],
        loads=[(Dmc, -m * g * Y.z)],
    )
    return kane_args, (q1, q2, q3), (u1, u2, u3), C


def _contact_disc(r, m, g) -> tuple[dict, tuple, tuple, Point]:
    q1, q2, q3, q4, q5 = q = dynamicsymbols("q1:6")
    u1, u2, u3, u4, u5 = u = dynamicsymbols("u1:6")
    N = ReferenceFrame("N")
    disc = ReferenceFrame("disc")
    mid = ReferenceFrame("mid")
    mid.orient_body_fixed(N, (q1, q2, 0), "zxy")
    disc.orient_axis(mid, mid.y, q3)
    w_qd = disc.ang_vel_in(N)
    disc.set_ang_vel(N, u1 * disc.x + u2 * disc.y + u3 * disc.z)
    O = Point("O")
    O.set_vel(N, 0)
    cp = O.locatenew("contact", q4 * N.x + q5 * N.y)
    cp.set_vel(N, u4 * N.x + u5 * N.y)
    centre = cp.locatenew("centre", r * mid.z)
    centre.set_vel(N, cross(disc.ang_vel_in(N), centre.pos_from(cp)))
    kd = [dot(w_qd, e) - ui for e, ui in zip((disc.x, disc.y, disc.z), u, strict=False)]
    kd += [q4.diff() - u4, q5.diff() - u5]
    # Velocity of the disc's material point at the contact: zero (no slip).
    v0 = cp.vel(N) + cross(disc.ang_vel_in(mid), cp.pos_from(centre))
    body = RigidBody("disc", centre, disc, m, (m * r**2 / 4 * inertia(disc, 1, 2, 1), centre))
    kane_args = dict(
        frame=N,
        q_ind=list(q),
        u_ind=[u1, u2, u3],
        kd_eqs=kd,
        u_dep=[u4, u5],
        velocity_constraints=[v0 & N.x, v0 & N.y],
        bodies=[body],
        loads=[(centre, -m * g * N.z)],
    )
    return kane_args, tuple(q), tuple(u), cp


def _constrained_disc(r, m, g) -> tuple[dict, tuple, tuple, Point]:
    q1, q2, q3, q4, q5, q6 = q = dynamicsymbols("q1:7")
    u1, u2, u3, u4, u5, u6 = u = dynamicsymbols("u1:7")
    N = ReferenceFrame("N")
    NO = Point("NO")
    NO.set_vel(N, 0)
    A = N.orientnew("A", "Axis", [q1, N.z])
    B = A.orientnew("B", "Axis", [q2, A.x])
    C = B.orientnew("C", "Axis", [q3, B.y])
    CO = NO.locatenew("CO", q4 * N.x + q5 * N.y + q6 * N.z)
    w_c_qd = C.ang_vel_in(N)
    C.set_ang_vel(N, u1 * B.x + u2 * B.y + u3 * B.z)
    v_co_qd = CO.pos_from(NO).dt(N)
    CO.set_vel(N, u4 * C.x + u5 * C.y + u6 * C.z)
    P = CO.locatenew("P", r * B.z)
    P.v2pt_theory(CO, N, C)
    kd = [dot(w_c_qd - C.ang_vel_in(N), e) for e in B]
    kd += [dot(v_co_qd - CO.vel(N), e) for e in N]
    I_C = inertia(C, m * r**2 / 4, m * r**2 / 2, m * r**2 / 4)
    kane_args = dict(
        frame=N,
        q_ind=[q1, q2, q3, q4, q5],
        u_ind=[u1, u2, u3],
        kd_eqs=kd,
        q_dep=[q6],
        configuration_constraints=[q6 - dot(CO.pos_from(P), N.z)],
        u_dep=[u4, u5, u6],
        velocity_constraints=[dot(P.vel(N), e) for e in C],
        bodies=[RigidBody("disc", CO, C, m, (I_C, CO))],
        loads=[(CO, m * g * A.z)],  # N.z = A.z points down
    )
    return kane_args, tuple(q), tuple(u), P


_DISC_FORMS = {"minimal": _minimal_disc, "contact": _contact_disc, "constrained": _constrained_disc}


def rolling_disc(form: str = "minimal") -> RollingDisc:
    """Kane's rolling disc: a thin uniform disc rolling without slip on a horizontal plane.

    Mass :math:`m`, radius :math:`r`, central inertia :math:`m r^2/4` about a diameter
    and :math:`m r^2/2` about the axle; gravity :math:`g`. Upright rolling at spin
    rate :math:`\\Omega` is stable iff :math:`\\Omega^2 > g/(3r)` (Kane & Levinson 1985).

    Parameters
    ----------
    form : {"minimal", "contact", "constrained"}
        * ``"minimal"``: yaw q1 (about the vertical), lean q2, spin q3 (about the axle);
          speeds u1..u3 are the disc's angular velocity in the lean frame. The contact
          point is taken at rest, so the no-slip constraint is built into the mass
          centre's velocity and there are no dependent speeds. Its equations are
          :math:`\\dot u_1 = (6 r u_2 u_3 - r u_3^2 \\tan q_2 + 4 g \\sin q_2)/(5r)`,
          :math:`\\dot u_2 = -2 u_1 u_3/3`, :math:`\\dot u_3 = u_1(-2u_2 + u_3\\tan q_2)`.
        * ``"contact"``: body-fixed z-x-y angles (q1, q2) and spin q3, contact point
          at (q4, q5) on the ground with q4' = u4, q5' = u5 the two dependent speeds
          (two no-slip constraints); u1..u3 are the angular velocity in the disc frame.
        * ``"constrained"``: yaw q1, lean q2, spin q3, disc centre (q4, q5, q6) in N
          (z down) with q6 dependent (the disc touches the plane); u1..u3 are the
          angular velocity in the lean frame, u4..u6 the centre's velocity in the disc
          frame, dependent through three no-slip constraints.

    Returns
    -------
    RollingDisc

    Raises
    ------
    ModelError
        For an unknown ``form``.

    Examples
    --------
    >>> disc = rolling_disc("constrained")
    >>> disc.problem.mass_matrix.shape, len(disc.problem.u_dep)
    ((3, 3), 3)
    """
    try:
        build = _DISC_FORMS[form]
    except KeyError:
        raise ModelError(
            f"rolling_disc: form must be one of {sorted(_DISC_FORMS)}, got {form!r}"
        ) from None
    r, m, g = sm.symbols("r m g", positive=True)
    kane_args, q, u, contact = build(r, m, g)
    return RollingDisc(
        problem=KaneProblem(**kane_args),
        kane_args=kane_args,
        q=q,
        u=u,
        r=r,
        m=m,
        g=g,
        contact=contact,
        form=form,
    )
