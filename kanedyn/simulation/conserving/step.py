"""The energy-momentum time step and the run that returns a Trajectory.

One step from ``(x_n, v_n)`` to ``(x_{n+1}, v_{n+1})`` (Gonzalez 1996; Betsch &
Leyendecker 2006, eq. 41; the full form with multipliers):

.. math::

    x_{n+1} - x_n = \\tfrac h2 (v_n + v_{n+1}), \\qquad
    M (v_{n+1} - v_n) = h\\,[\\,f_g - \\nabla_d V - C\\,\\tfrac{a_{n+1} - a_n}{h}
        + f_{n+\\frac12} - G_d(x_n, x_{n+1})^T \\lambda\\,], \\qquad
    c(x_{n+1}) = 0

with ``∇_dV = K (a_n + a_{n+1})/2`` (the linear springs are quadratic in the augmented
coordinates, so the midpoint gradient *is* their discrete gradient; a polynomial spring
adds ``(W(a_{n+1}) - W(a_n))/(a_{n+1} - a_n)`` of its higher-order potential ``W``,
:func:`kanedyn.joints.spring_discrete_gradient`), gravity ``f_g`` constant, the dampers
``C`` on the augmented rates (polynomial ones at the mean rate ``Δa/h``,
:func:`kanedyn.joints.damper_force`), ``f_{n+½}`` the applied loads at the
midpoint, and ``G_d`` the discrete gradient of the constraints
(:meth:`~.constraints.ConstraintSet.discrete_gradient`). Eliminating ``v_{n+1}``, the
unknowns are ``(x_{n+1}, λ)``; Newton's method runs on

.. math::

    r = \\begin{bmatrix} \\tfrac{2}{h^2} M (x_{n+1} - x_n - h v_n) + \\nabla_dV
        + \\tfrac{C}{h}(a_{n+1} - a_n) - f_g - f_{n+\\frac12} + G_d^T\\lambda \\\\
        c(x_{n+1}) \\end{bmatrix}

with its exact tangent (the geometric part from
:meth:`~.constraints.ConstraintSet.tangent`). Multiplying the first row by
``x_{n+1} - x_n`` gives the discrete energy balance

.. math:: E_{n+1} - E_n = -\\tfrac1h (\\Delta a)^T C\\, \\Delta a + f_{n+\\frac12}\\cdot\\Delta x

(conservation without dampers and loads), because ``G_d Δx = c(x_{n+1}) - c(x_n) = 0``.
Total linear and angular momentum are conserved when no load breaks the symmetry,
because every invariant is (:mod:`.constraints`).

When a body's directors' mass matrix is indefinite (principal moments that violate the
triangle inequality), the step also enforces the hidden velocity constraints at the step
points, with a second multiplier (Gonzalez 1999; :func:`hidden_terms`): the same balance
laws hold exactly. With geometric stiffening (an indefinite mass matrix on the
foreshortening vectors, :mod:`.flexible`), the nodal rates ``v_{n+1}`` are moved onto
the tangent space of the constraints with the same energy, ``P`` and ``H``
(:func:`~.formulation.tangent_rates`).
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from kanedyn import joints
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.loads import Force, JointLoad, LoadsLike, Torque
from kanedyn.dynamics.partials import partials
from kanedyn.dynamics.rotors import has_rotors
from kanedyn.dynamics.steppers import Schedule
from kanedyn.errors import ModelError, SimulationError, SimulationInterrupted
from kanedyn.model import Model, State
from kanedyn.model.plan import params_of
from kanedyn.simulation.conserving.formulation import (
    Redundant,
    joint_positions,
    redundant,
    speed_jacobian,
    tangent_rates,
    to_joint_coordinates,
    to_redundant,
)
from kanedyn.simulation.conserving.geared import with_rotor_bodies
from kanedyn.simulation.conserving.locks import LockedScheme
from kanedyn.simulation.conserving.origin import origin_of
from kanedyn.simulation.conserving.trajectory import ConservingTrajectory
from kanedyn.simulation.control import Sampler
from kanedyn.simulation.events import locked_at, n_due
from kanedyn.simulation.output import signals_deferred
from kanedyn.spatial import rotation as rot
from kanedyn.spatial.algebra import cross
from kanedyn.spatial.arithmetic import NUMPY

__all__ = [
    "JointRows",
    "NullSpaceStepper",
    "RunStopped",
    "StepResult",
    "Stepper",
    "generalized_loads",
]

#: how often a run may halve a step whose Newton iteration fails
MAX_HALVINGS = 4

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class StepResult:
    """One converged step: ``x``, ``v``, ``lam`` (the multipliers), ``iterations``, and
    the increment ``dx = x - x_n`` (exact, not differenced)."""

    x: Array
    v: Array
    lam: Array
    iterations: int
    dx: Array


def generalized_loads(red: Redundant, records: Any) -> Callable[[Array], Array]:
    """The generalized forces ``f(z)`` (nx,) of load records at a configuration ``z``.

    A force ``F`` at body point ``X`` (body axes, relative to the mass centre) does the
    work ``F·δφ + Σ_a X_a F·δd_a``; a torque ``T`` acts on the directors as
    ``f_a = ½ T × d_a`` (so that ``Σ_a d_a × f_a = T``); a :class:`~kanedyn.JointLoad`
    is the generalized force on the joint's augmented coordinates. Body-axis loads
    are turned with ``D(z)``. ``f`` is at most quadratic in ``z``.
    """
    model = red.model
    terms: list[tuple[str, Any]] = []
    for rec in records or ():
        if isinstance(rec, Force):
            i = model.body_index(rec.body)
            X = np.zeros(3) if rec.point is None else rec.point - params_of(model).com[i]
            terms.append(("force", (i, np.asarray(rec.force), X, rec.frame == "body")))
        elif isinstance(rec, Torque):
            i = model.body_index(rec.body)
            terms.append(("torque", (i, np.asarray(rec.torque), rec.frame == "body")))
        elif isinstance(rec, JointLoad):
            k = model.joint_index(rec.joint)
            idx = red.aug[k]
            if rec.values.shape != idx.shape:
                raise ModelError(
                    f"JointLoad on joint {rec.joint!r}: needs {idx.size} values (one per DOF), "
                    f"got {rec.values.size}"
                )
            if np.any(idx < 0) and np.any(rec.values[idx < 0] != 0.0):
                raise ModelError(
                    f"JointLoad on joint {rec.joint!r}: method='energy-momentum' actuates gimbal "
                    "angles and slides; apply a free root's or spherical joint's effort as "
                    "kanedyn.Force / kanedyn.Torque on its bodies"
                )
            terms.append(("joint", (idx[idx >= 0], rec.values[idx >= 0])))
        else:
            raise ModelError(
                f"unknown load {rec!r}: use kanedyn.Force, kanedyn.Torque or kanedyn.JointLoad"
            )

    def f(z: Array) -> Array:
        """The generalized forces at ``z``."""
        out = np.zeros(red.nx)
        for kind, data in terms:
            if kind == "joint":
                idx, vals = data
                out[idx] += vals
                continue
            i = data[0]
            D = red.D(z, i)
            bf = red.bodies[i]
            if kind == "force":
                _, F, X, body = data
                F = D @ F if body else F
                out += bf.pos.L.T @ F
                for a in range(3):
                    out += bf.dirs[a].L.T @ (X[a] * F)
            else:
                _, T, body = data
                T = D @ T if body else T
                for a in range(3):
                    out += bf.dirs[a].L.T @ (0.5 * cross(T, D[:, a]))
        return out

    # the coordinates f depends on: those of bodies with body-axis loads or torques
    moving = sorted({d[0] for kind, d in terms if kind == "torque" or (kind == "force" and d[3])})
    f.depends_on = np.array([c for i in moving for c in red.bodies[i].cols], dtype=np.intp)  # type: ignore[attr-defined]
    return f


class NewtonFailure(SimulationError):
    """Newton's method failed on one step (the run then halves that step)."""


class RunStopped(Exception):
    """A run stopped before ``t_final``: ``run`` the :class:`Run` of the outputs so far,
    ``cause`` the KeyboardInterrupt (Ctrl-C) or SimulationError (a step that failed at
    every halving) that stopped it."""

    def __init__(self, run: Run, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.run, self.cause = run, cause


def balance(
    red: Redundant,
    x0: Array,
    v0: Array,
    dx: Array,
    h: float,
    f: Callable[[Array], Array],
    spherical: Array | None = None,
    central: Array | None = None,
) -> Array:
    """The balance of momentum without the constraint forces, ``r_x - G_dᵀλ`` (nx,):
    ``(2/h²) M (Δx - h v0) + K z + C Δx/h - f_g - f(z)``, ``z = x0 + Δx/2`` (with the
    polynomial springs' and dampers' higher-order terms, :func:`_polynomial_tangent`). It takes the
    increment ``Δx = x1 - x0`` itself, so that no round-off of far-travelled positions
    enters the momenta. ``spherical``: the spherical springs' and dampers' force at
    ``(x0, x0 + Δx, h)`` when already computed (:func:`_spherical_terms`); ``central``
    the central field's discrete gradient ``∇̄V`` when already computed
    (:meth:`.field.CentralField.discrete_gradient`). Flexible bodies add the strain
    energy's midpoint gradient ``K_Ψ η̄`` and the modal damping ``C_Ψ Δη/h``
    (:mod:`.flexible`)."""
    z = x0 + 0.5 * dx
    r = (
        (2.0 / h**2) * (red.M @ (dx - h * v0))
        + red.stiffness * z
        + red.damping * dx / h
        - red.f_gravity
        - f(z)
    )
    if red.stiffness_poly is not None:  # the polynomial springs' and dampers' higher terms
        zero = np.zeros(red.nx)
        r = r + joints.spring_discrete_gradient(zero, red.stiffness_poly, x0, x0 + dx)[0]
        r = r + joints.damper_force(zero, red.damping_poly, dx / h)
    if red.spherical is not None:
        if spherical is None:
            spherical = red.spherical.force(x0, x0 + dx, h)[0]
        r = r + spherical
    if red.gyroscopic is not None:  # embedded momenta: S Δx/h, no work
        r = r + red.gyroscopic @ dx / h
    if red.central is not None:  # the central field's discrete gradient
        r = r + (red.central.discrete_gradient(x0, dx)[0] if central is None else central)
    if red.modal_stiffness is not None:  # flexible bodies: K_Ψ η̄ + C_Ψ Δη/h (.flexible)
        assert red.modal_damping is not None
        r = r + red.modal_stiffness @ z + red.modal_damping @ dx / h
    return r  # type: ignore[no-any-return]


def _constant_tangent(red: Redundant, h: float) -> Array:
    """The constant part of Newton's matrix of :func:`balance` in ``x₁``:
    ``(2/h²) M + ½ K + C/h`` (the augmented springs and dampers, and the flexible bodies'
    ``K_Ψ``, ``C_Ψ``), plus ``S/h`` of the embedded momenta."""
    K0 = (2.0 / h**2) * red.M + np.diag(0.5 * red.stiffness + red.damping / h)
    if red.gyroscopic is not None:
        K0 = K0 + red.gyroscopic / h
    if red.modal_stiffness is not None:
        assert red.modal_damping is not None
        K0 = K0 + 0.5 * red.modal_stiffness + red.modal_damping / h
    return K0  # type: ignore[no-any-return]


def _polynomial_tangent(red: Redundant, x0: Array, dx: Array, h: float) -> Array | float:
    """The derivative in ``x₁ = x0 + Δx`` of the polynomial springs' and dampers'
    higher-order terms of :func:`balance` (diagonal, (nx, nx)), the scalar 0 without
    them: ``∂∇̄W/∂x₁`` (:func:`kanedyn.joints.spring_discrete_gradient`) and
    ``f'(Δx/h)/h`` (:func:`kanedyn.joints.damper_rate`) without the linear parts, which
    the constant part of Newton's matrix holds."""
    if red.stiffness_poly is None:
        return 0.0
    zero = np.zeros(red.nx)
    d = joints.spring_discrete_gradient(zero, red.stiffness_poly, x0, x0 + dx)[1]
    d = d + joints.damper_rate(zero, red.damping_poly, dx / h) / h
    return np.diag(d)


def _spherical_terms(
    red: Redundant, x0: Array, dx: Array, h: float
) -> tuple[Array | None, Array | float]:
    """The spherical springs' and dampers' discrete force at ``(x0, x0 + Δx)`` and its
    exact derivative in ``x₁`` (:meth:`.spherical.SphericalSprings.force_and_jacobian`);
    None and the scalar 0 without them."""
    if red.spherical is None:
        return None, 0.0
    force, _, jac = red.spherical.force_and_jacobian(x0, x0 + dx, h)
    assert jac is not None
    return force, jac


def _central_terms(red: Redundant, x0: Array, dx: Array) -> tuple[Array | None, Array | float]:
    """The central field's discrete gradient at ``(x0, x0 + Δx)`` and Newton's tangent
    for it (:meth:`.field.CentralField.discrete_gradient`); None and the scalar 0 in
    uniform gravity."""
    if red.central is None:
        return None, 0.0
    return red.central.discrete_gradient(x0, dx)


def _hidden_midpoint(
    red: Redundant, x0: Array, dx: Array, mu: Array, h: float
) -> tuple[Array, Array, Array]:
    """``H(x̄)``, ``M⁻¹H(x̄)ᵀ`` and the midpoint rates ``v̄ = Δx/h - M⁻¹H(x̄)ᵀμ`` of the
    hidden constraints' kinematic relation (:func:`hidden_terms`)."""
    hid = red.hidden
    assert hid is not None
    Gbar = hid.jacobian(x0 + 0.5 * dx)
    WGt = hid.inverse_mass @ Gbar.T
    return Gbar, WGt, dx / h - WGt @ mu


def hidden_rates(red: Redundant, x0: Array, v0: Array, dx: Array, mu: Array, h: float) -> Array:
    """The nodal rates ``v_{n+1} = 2 v̄ - v_n`` of a converged step with hidden
    constraints (:func:`hidden_terms` without its residuals and tangent)."""
    return 2.0 * _hidden_midpoint(red, x0, dx, mu, h)[2] - v0  # type: ignore[no-any-return]


@attrs.frozen(eq=False)
class HiddenTerms:
    """The hidden velocity constraints' part of one Newton iteration
    (:func:`hidden_terms`): ``r_x`` (nx,) added to the balance, ``r_h`` (nh,) the
    residual ``H(x_1) v_1``, the tangent blocks ``A_xx`` (nx, nx), ``A_xm`` (nx, nh),
    ``A_hx`` (nh, nx), ``A_hm`` (nh, nh)."""

    r_x: Array
    r_h: Array
    A_xx: Array
    A_xm: Array
    A_hx: Array
    A_hm: Array


def hidden_terms(
    red: Redundant, x0: Array, v0: Array, dx: Array, mu: Array, h: float
) -> HiddenTerms:
    """The hidden velocity constraints (:class:`~.constraints.HiddenConstraints`) in one
    step, with their multipliers ``μ`` (the theory page, "Indefinite Euler tensors"):

    .. math::

        \\Delta x = h\\,\\bar v + h\\,\\mathbf M^{-1} H(\\bar x)^T\\mu, \\qquad
        \\mathbf M\\,\\Delta v = h\\,[\\dots - B(\\bar v)^T\\mu], \\qquad
        H(x_{n+1})\\, v_{n+1} = 0

    (``M⁻¹`` on the body coordinates). Eliminating ``v_{n+1} = 2Δx/h - 2M⁻¹Hᵀ(x̄)μ - v_n``,
    the balance gains ``(B(v̄)ᵀ - (2/h) H(x̄)ᵀ) μ``. The tangent is exact:
    ``Bᵀμ = H_μ v̄`` and ``H(x̄)ᵀμ`` has the derivative ``½ H_μ`` in ``Δx``, with
    ``H_μ = Σ μ_r ∇²η_r``."""
    hid = red.hidden
    assert hid is not None
    W = hid.inverse_mass
    Gbar, WGt, vbar = _hidden_midpoint(red, x0, dx, mu, h)
    Hmu = hid.hessian(mu)
    v1 = 2.0 * vbar - v0
    G1 = hid.jacobian(x0 + dx)
    B = hid.rate_gradient(vbar)
    return HiddenTerms(
        r_x=(B.T - (2.0 / h) * Gbar.T) @ mu,
        r_h=G1 @ v1,
        A_xx=-0.5 * Hmu @ W @ Hmu,
        A_xm=B.T - Hmu @ WGt - (2.0 / h) * Gbar.T,
        A_hx=hid.rate_gradient(v1) + G1 @ ((2.0 / h) * np.eye(red.nx) - W @ Hmu),
        A_hm=-2.0 * G1 @ WGt,
    )


def _equilibrated_solve(A: Array, b: Array) -> Array:
    """``A⁻¹ b`` after scaling the rows, then the columns, of ``A`` to unit largest
    entry. The balance rows carry masses and inertias (10³ kg m² on a spacecraft hub)
    and the constraint rows unit directors: unscaled, LAPACK reports condition numbers
    up to 1e22 on Explorer-1 at some steps, which scaling removes. With the hidden
    constraints, moreover, the forces of ``λ`` and ``μ`` in the balance,
    ``G_dᵀλ`` and ``(Bᵀ - (2/h) H(x̄)ᵀ)μ``, are nearly parallel (the hidden rows'
    equations tell them apart at a much smaller scale): unscaled, LAPACK reports a
    condition number near 1e16; scaled, about 1e5 on Explorer-1."""
    rows = 1.0 / np.maximum(np.max(np.abs(A), axis=1), 1e-300)
    As = A * rows[:, None]
    cols = 1.0 / np.maximum(np.max(np.abs(As), axis=0), 1e-300)
    y = scipy.linalg.solve(As * cols[None, :], b * rows, check_finite=False)
    return y * cols  # type: ignore[no-any-return]


def _augmented_rates(red: Redundant, x1: Array, v1: Array) -> Array:
    """``v1`` with the augmented coordinates' rates from the velocity constraints
    ``G(x1) v1 = 0`` (least squares; exact when the body rates satisfy the hidden
    constraints). They do not enter the step (massless), only the readout."""
    ny = 12 * red.nb
    G = red.constraints.jacobian(x1)
    out = v1.copy()
    if red.nx > ny:
        out[ny:] = scipy.linalg.lstsq(G[:, ny:], -G[:, :ny] @ v1[:ny], check_finite=False)[0]
    return out


class Stepper:
    """The energy-momentum step of a model (see the module docstring).

    ``tol``: Newton stops after an update smaller than ``tol`` (relative to the largest
    coordinate, at least 1) taken from a point whose constraint residual was below
    ``tol``; Newton's quadratic convergence leaves an error far below ``tol``.
    ``max_iter``: iterations before a :class:`NewtonFailure` (a
    :class:`~kanedyn.SimulationError`; :func:`run` then halves the step).
    ``closures``: loop-closing joints (:func:`~kanedyn.simulation.conserving.formulation.redundant`).
    """

    def __init__(
        self,
        model: Model,
        tol: float = 1e-10,
        max_iter: int = 15,
        closures: Any = None,
        planar: bool | None = None,
    ):
        self.red = redundant(model, closures, planar)
        self.tol, self.max_iter = tol, max_iter
        self.redundant_rows: bool | None = None  # decided at the first step

    def step(
        self,
        x0: Array,
        v0: Array,
        h: float,
        lam: Array | None = None,
        f: Callable[[Array], Array] | None = None,
        t: float = 0.0,
        servo: Any = None,
        guess: Array | None = None,
        locks: Any = None,
    ) -> StepResult:
        """One step of size ``h``; ``f`` the generalized loads at the midpoint,
        ``servo`` (optional) prescribed outputs with their actuators
        (:class:`~.servo.Servo`): then ``lam`` also holds the actuator efforts.
        ``locks`` (optional): the locked augmented coordinates
        (:class:`~.locks.LockRows`), rows ``a_{n+1} - ā = 0`` with their multipliers
        ``ρ`` after the servo efforts in ``lam`` (:mod:`.locks`).
        ``guess``: Newton's start for ``x_{n+1}`` (default ``x_n + h v_n``; the run
        passes ``x_n + h v_{n-½}``, because the nodal rates of the massless augmented
        coordinates carry the alternating mode of ``v_{n+1} = 2Δx/h - v_n``)."""
        red = self.red
        nx, nc = red.nx, red.nc
        ns = 0 if servo is None else servo.n
        nl = 0 if locks is None else locks.n
        nh = 0 if red.hidden is None else red.hidden.nh
        f = f if f is not None else (lambda z: np.zeros(nx))
        dx = h * v0 if guess is None else guess - x0
        lam = np.zeros(nc + ns + nl + nh) if lam is None else lam.copy()
        cons = red.constraints
        if self.redundant_rows is None:
            # rows that depend on each other (a planar loop closed by a spatial hinge): the
            # Newton system is then singular in λ alone, and solved by least squares
            self.redundant_rows = bool(np.linalg.matrix_rank(cons.jacobian(x0)) < nc) or bool(
                nh and np.linalg.matrix_rank(red.hidden.jacobian(x0)) < nh  # type: ignore[union-attr]
            )
        K0 = _constant_tangent(red, h)
        for it in range(1, self.max_iter + 1):
            x1 = x0 + dx
            z = x0 + 0.5 * dx
            r_c, G, G_d, K = cons.linearize(x0, x1, lam[:nc])
            sph_f, sph_J = _spherical_terms(red, x0, dx, h)
            cg_f, cg_J = _central_terms(red, x0, dx)
            r_x = balance(red, x0, v0, dx, h, f, sph_f, cg_f) + G_d.T @ lam[:nc]
            A = np.zeros((nx + nc + ns + nl + nh, nx + nc + ns + nl + nh))
            A[:nx, :nx] = K0 + K - 0.5 * _load_jacobian(f, z) + sph_J + cg_J
            A[:nx, :nx] += _polynomial_tangent(red, x0, dx, h)
            A[:nx, nx : nx + nc] = G_d.T
            A[nx : nx + nc, :nx] = G
            rows = [r_c]
            if servo is not None:
                r_x = r_x - servo.B @ lam[nc : nc + ns]
                A[:nx, nx + nc : nx + nc + ns] = -servo.B
                A[nx + nc : nx + nc + ns, :nx] = servo.Y
                rows.append(servo.Y @ x1 - servo.target(t + h))
            if nl:  # the locks: + e_aᵀ ρ in the balance, a_{n+1} - ā = 0
                assert locks is not None
                r_x = r_x.copy()
                r_x[locks.idx] += lam[nc + ns : nc + ns + nl]
                cols = nx + nc + ns + np.arange(nl)
                A[locks.idx, cols] = 1.0
                A[cols, locks.idx] = 1.0
                rows.append(x1[locks.idx] - locks.target)
            rhs = np.concatenate((r_x, *rows))
            if nh:
                ht = hidden_terms(red, x0, v0, dx, lam[nc + ns + nl :], h)
                rhs[:nx] += ht.r_x
                rhs = np.concatenate((rhs, ht.r_h))
                A[:nx, :nx] += ht.A_xx
                A[:nx, -nh:] = ht.A_xm
                A[-nh:, :nx] = ht.A_hx
                A[-nh:, -nh:] = ht.A_hm
            try:
                # scipy's LAPACK: numpy's threaded solve stalls on a busy machine
                if self.redundant_rows:
                    delta = scipy.linalg.lstsq(A, -rhs, check_finite=False, lapack_driver="gelsy")[
                        0
                    ]
                else:
                    delta = _equilibrated_solve(A, -rhs)
            except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
                raise NewtonFailure(
                    f"t = {t + h:.6g}: the Newton matrix of the energy-momentum step is "
                    "singular (redundant constraints, or a massless body free to rotate?)"
                ) from None
            dx = dx + delta[:nx]
            x1 = x0 + dx
            lam = lam + delta[nx:]
            if not np.all(np.isfinite(dx)):
                raise NewtonFailure(f"t = {t + h:.6g}: the state became non-finite")
            small = np.max(np.abs(delta[:nx])) <= self.tol * max(1.0, np.max(np.abs(x1)))
            if small and np.max(np.abs(rhs[nx:])) <= self.tol * max(1.0, np.max(np.abs(x1))):
                if nh:
                    v1 = hidden_rates(red, x0, v0, dx, lam[nc + ns + nl :], h)
                    return StepResult(x1, _augmented_rates(red, x1, v1), lam, it, dx)
                v1 = 2.0 * dx / h - v0
                if red.stiffened:  # an indefinite mass matrix: tangent rates, same E, P, H
                    v1 = tangent_rates(red, x1, v1)
                return StepResult(x1, v1, lam, it, dx)
        raise NewtonFailure(
            f"t = {t + h:.6g}: Newton did not converge in {self.max_iter} iterations "
            f"(tol {self.tol:g}); try a smaller dt"
        )


class NullSpaceStepper(Stepper):
    """The same step reduced by the discrete null-space method (Betsch & Leyendecker
    2006, §5), for trees.

    The unknowns are ``n`` joint increments ``μ`` (angles and slides add, quaternions
    turn by ``exp(μ)`` on the right): the **nodal reparametrization**
    ``x_{n+1} = X(q_n ⊞ μ)`` satisfies every constraint by construction. The balance is
    premultiplied by a basis ``P_d`` of the null space of ``G_d(x_n, x_{n+1})``, which
    eliminates the multipliers: ``P_dᵀ r_x(μ) = 0``, ``n`` equations. Newton's matrix
    ``P_dᵀ (∂r_x/∂x + ∂(G_dᵀλ)/∂x) J`` has the minimal size ``n`` (``J = ∂x/∂μ``; ``λ``
    from the least-squares fit ``G_dᵀλ ≈ -r_x``, exact at the solution). It solves the
    same discrete equations as :class:`Stepper`, so it conserves the same quantities.
    """

    def __init__(self, model: Model, tol: float = 1e-10, max_iter: int = 15, **kwargs: Any):
        """Arguments as :class:`Stepper` (``closures`` must be empty: a tree)."""
        closures = kwargs.pop("closures", None)
        if closures or (closures is None and model.loops):
            raise ModelError(
                "the null-space reduction reparametrizes a tree; closed loops need reduction='full'"
            )
        if model.nf:
            raise ModelError(
                "the null-space reduction reparametrizes the joints; flexible bodies need "
                "reduction='full'"
            )
        super().__init__(model, tol, max_iter, closures=(), **kwargs)

    def step(
        self,
        x0: Array,
        v0: Array,
        h: float,
        lam: Array | None = None,
        f: Callable[[Array], Array] | None = None,
        t: float = 0.0,
        servo: Any = None,
        guess: Array | None = None,
        locks: Any = None,
    ) -> StepResult:
        """One step (arguments as :meth:`Stepper.step`; no servo constraints, no locks)."""
        if servo is not None:
            raise ModelError("servo constraints need reduction='full'")
        if locks is not None and locks.n:
            raise ModelError("locked joints (events, stops) need reduction='full'")
        red = self.red
        model = red.model
        f = f if f is not None else (lambda z: np.zeros(red.nx))
        q0 = joint_positions(red, x0)
        mu = (
            np.zeros(model.n)
            if guess is None
            else _increment(model, q0, joint_positions(red, guess, q0))
        )
        cons = red.constraints
        nh = 0 if red.hidden is None else red.hidden.nh
        nu = np.zeros(nh) if lam is None or lam.size != red.nc + nh else lam[red.nc :].copy()
        K0 = _constant_tangent(red, h)
        for it in range(1, self.max_iter + 1):
            q1 = _advance(model, q0, mu)
            x1 = to_redundant(red, State(q1, np.zeros(model.n)))[0]
            dx = x1 - x0
            _, _, G_d, _ = cons.linearize(x0, x1, np.zeros(red.nc))
            sph_f, sph_J = _spherical_terms(red, x0, dx, h)
            cg_f, cg_J = _central_terms(red, x0, dx)
            r = balance(red, x0, v0, dx, h, f, sph_f, cg_f)
            ht = hidden_terms(red, x0, v0, dx, nu, h) if nh else None
            if ht is not None:
                r = r + ht.r_x
            J = speed_jacobian(red, x1, partials(model, State(q1, np.zeros(model.n))))
            lay = model.layout
            for cols in lay.quat_u:  # ∂ω/∂μ of a quaternion turned by exp(μ): J_r(μ)
                J[:, cols] = J[:, cols] @ rot.rotvec_rate_matrix(mu[cols])
            # λ = argmin |r + G_dᵀλ|, and P_d = (U - G_dᵀ(G_d G_dᵀ)⁻¹G_d) J spans null(G_d)
            GGt = G_d @ G_d.T
            sol = scipy.linalg.solve(GGt, G_d @ np.column_stack((r, J)), assume_a="pos")
            lam = -sol[:, 0]
            K = cons.linearize(x0, x1, lam)[3]
            P_d = J - G_d.T @ sol[:, 1:]
            F = P_d.T @ r
            A_xx = K0 + K - 0.5 * _load_jacobian(f, x0 + 0.5 * dx) + sph_J + cg_J
            A_xx = A_xx + _polynomial_tangent(red, x0, dx, h)
            if ht is not None:  # unknowns (μ, ν): the hidden constraints' rows and columns
                A = np.block([[P_d.T @ (A_xx + ht.A_xx) @ J, P_d.T @ ht.A_xm],
                              [ht.A_hx @ J, ht.A_hm]])  # fmt: skip
                F_all = np.concatenate((F, ht.r_h))
            else:
                A, F_all = P_d.T @ A_xx @ J, F
            try:
                delta = (
                    _equilibrated_solve(A, -F_all)
                    if ht is not None
                    else scipy.linalg.solve(A, -F_all, check_finite=False)
                )
            except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
                raise NewtonFailure(
                    f"t = {t + h:.6g}: the reduced Newton matrix is singular"
                ) from None
            mu = mu + delta[: model.n]
            nu = nu + delta[model.n :]
            if not np.all(np.isfinite(mu)):
                raise NewtonFailure(f"t = {t + h:.6g}: the state became non-finite")
            small_h = ht is None or np.max(np.abs(ht.r_h)) <= self.tol * max(
                1.0, np.max(np.abs(v0))
            )
            if (
                np.max(np.abs(delta)) <= self.tol * max(1.0, np.max(np.abs(mu)))
                and np.max(np.abs(F)) <= self.tol * max(1.0, np.max(np.abs(r)))
                and small_h
            ):
                q1 = _advance(model, q0, mu)
                x1 = to_redundant(red, State(q1, np.zeros(model.n)))[0]
                dx = x1 - x0
                if ht is not None:
                    v1 = hidden_rates(red, x0, v0, dx, nu, h)
                    lam_all = np.concatenate((lam, nu))
                    return StepResult(x1, _augmented_rates(red, x1, v1), lam_all, it, dx)
                return StepResult(x1, 2.0 * dx / h - v0, lam, it, dx)
        raise NewtonFailure(
            f"t = {t + h:.6g}: Newton did not converge in {self.max_iter} iterations "
            f"(tol {self.tol:g}); try a smaller dt"
        )


def _advance(model: Model, q0: Array, mu: Array) -> Array:
    """``q0 ⊞ μ``: angles and slides plus their increments; each quaternion turned on the
    right by the rotation vector of its three increments (Go components)."""
    lay = model.layout
    q = q0.copy()
    q[lay.angle_q] += mu[lay.angle_u]
    if lay.quat_q.size:
        q[lay.quat_q] = rot.quat_multiply(q0[lay.quat_q], rot.rotvec_to_quat(mu[lay.quat_u]))
    return q


def _increment(model: Model, q0: Array, q1: Array) -> Array:
    """The ``μ`` with ``q0 ⊞ μ = q1`` (:func:`_advance` inverted)."""
    lay = model.layout
    mu = np.zeros(model.n)
    mu[lay.angle_u] = q1[lay.angle_q] - q0[lay.angle_q]
    if lay.quat_q.size:
        turn = rot.quat_multiply(rot.quat_conjugate(q0[lay.quat_q]), q1[lay.quat_q])
        mu[lay.quat_u] = rot.quat_to_rotvec(turn)
    return mu


def _unit_quaternions(model: Model, q: Array) -> Array:
    return joints.normalize_quaternions(NUMPY, model.layout, q)


def _load_jacobian(f: Callable[[Array], Array], z: Array) -> Array:
    """∂f/∂z by central differences with unit step over the coordinates ``f`` depends
    on (``f.depends_on``, from :func:`generalized_loads`): exact, because those loads are
    at most quadratic in ``z``."""
    n = z.size
    J = np.zeros((n, n))
    for j in getattr(f, "depends_on", ()):
        e = np.zeros(n)
        e[j] = 1.0
        J[:, j] = 0.5 * (f(z + e) - f(z - e))
    return J


# --------------------------------------------------------------------------- the run
@attrs.frozen(eq=False)
class Run:
    """The director histories of a run: ``t`` (nt,), ``x``, ``v`` (nt, nx), the scheme's
    ``energy`` (nt,) (kinetic + gravity + springs, :meth:`Redundant.energy`),
    ``linear_momentum``, ``angular_momentum`` (nt, 3; about the system mass centre,
    :meth:`Redundant.momentum`; ``Trajectory.angular_momentum_about`` moves it to a point,
    the field's centre by default),
    ``constraint_residual`` (nt,) ``max |c(x)|``, ``dissipated`` (nt,) the cumulated damper
    work, ``work`` (nt,) the cumulated discrete work ``Σ f(z_n)·Δx_n`` of the applied loads
    and controller commands (so that ``energy - energy[0] = work - dissipated``),
    ``iterations`` (number of steps,) Newton iterations per step (summed over the
    halves of a step that was split because Newton failed on it)."""

    t: Array
    x: Array
    v: Array
    energy: Array
    linear_momentum: Array
    angular_momentum: Array
    constraint_residual: Array
    dissipated: Array
    iterations: Array
    red: Redundant
    work: Array
    efforts: Array | None = None


def run(
    model: Model,
    state: State,
    t_final: float,
    dt: float,
    *,
    loads: LoadsLike = None,
    output_every: float | None = None,
    tol: float = 1e-10,
    max_iter: int = 15,
    servo: Any = None,
    closures: Any = None,
    reduction: str = "full",
    planar: bool | None = None,
    controller: Any = None,
    events: Any = (),
    stops: Any = None,
    on_output: Callable[[Redundant, float, Array, Array], None] | None = None,
) -> Run:
    """Integrate with the energy-momentum step and return the director histories.

    ``closures``: loop-closing joints (:func:`~.formulation.redundant`); ``state`` must
    then satisfy the loops (assembled). ``reduction``: ``"full"`` (Newton on the system
    with multipliers, :class:`Stepper`) or ``"null-space"`` (the discrete null-space
    method, :class:`NullSpaceStepper`; trees only): the same discrete solution.
    ``planar``: the planar formulation when the mechanism qualifies (None, default),
    always (True) or never (False); see :func:`~.formulation.redundant`.
    ``controller``: a :class:`~kanedyn.Controller`, sampled at the start of the step on
    or after each of its sample times (at ``t = 0`` first; the joint state is that of the
    director state, :func:`~.formulation.to_joint_coordinates`), its load records held
    (zero-order hold) and applied with ``loads`` at each step's midpoint: a held
    :class:`~kanedyn.JointLoad` is a constant generalized force over the step, whose
    work ``τ·Δa`` the energy balance accounts exactly.

    ``events``: lock events, checked (:func:`kanedyn.simulation.events.lock_indices`),
    applied at the first step boundary at or after their time (those at ``t = 0``
    before the first output); ``stops``: a :class:`~kanedyn.simulation.stops.Stops`
    (``limits="stop"``), applied after every step. ``on_output`` (optional):
    called as ``on_output(red, t, x, v)`` at every output (``t = 0`` first), with the
    state in N (:class:`JointRows` converts them to joint coordinates). A lock is a constraint of the step
    and its impact a plastic one (:mod:`.locks`); ``reduction="full"`` only."""
    model.check_state(state, flexible=True)
    if model.nf and (servo is not None or closures or events or stops is not None):
        raise ModelError(
            "method='energy-momentum' with flexible bodies: servo constraints, closures, "
            "lock events and stops do not have the modal terms yet"
        )
    if reduction not in ("full", "null-space"):
        raise ModelError(f"reduction must be 'full' or 'null-space', got {reduction!r}")
    cls = Stepper if reduction == "full" else NullSpaceStepper
    stepper = cls(model, tol, max_iter, closures=closures, planar=planar)
    red = stepper.red
    every = dt if output_every is None else float(output_every)
    schedule = Schedule.of(t_final, dt, every)
    x, v = to_redundant(red, state)
    resid0 = np.max(np.abs(red.constraints(x)), initial=0.0)
    if resid0 > 1e-8:
        raise ModelError(f"the initial state violates the joint constraints by {resid0:.3g}")
    events = list(events or ())
    scheme = LockedScheme(red)
    if events or stops is not None:
        if reduction != "full":
            raise ModelError("locked joints (events, stops) need reduction='full'")
        scheme.check([r for _, _, r in events])
        if stops is not None:
            scheme.check(stops.lim.u_index)
    applied = n_due(events, 0.0)
    if applied:
        v = scheme.relock(x, v, locked_at(events, applied))
    f_static = None if callable(loads) else generalized_loads(red, loads)
    held: list[Any] = []
    sampler = Sampler(controller, model)
    lam: Array | None = None
    v_mid: Array | None = None
    locks = scheme.rows

    def advance(
        x: Array, v: Array, lam: Array | None, t: float, h: float, f: Any,
        guess: Array | None, v_mid: Array | None, depth: int,
    ) -> list[tuple[Array, float, StepResult]]:  # fmt: skip
        """One step, or (when Newton fails, up to ``MAX_HALVINGS`` times) two half steps:
        each is an energy-momentum step, so the balance laws hold across the split."""
        try:
            return [(x, h, stepper.step(x, v, h, lam, f, t, servo, guess, locks))]
        except NewtonFailure:
            if depth >= MAX_HALVINGS or servo is not None:
                raise
        first = advance(x, v, lam, t, h / 2, f, predict(x, v_mid, h / 2), v_mid, depth + 1)
        r1 = first[-1][2]
        v1 = np.sum([p.dx for _, _, p in first], axis=0) / (h / 2)
        second = advance(r1.x, r1.v, r1.lam, t + h / 2, h / 2, f,
                         predict(r1.x, v1, h / 2), v1, depth + 1)  # fmt: skip
        return first + second

    def predict(x: Array, v_mid: Array | None, h: float) -> Array | None:
        """Newton's start: ``x + h v_{n-½}`` read as joint coordinates and mapped back to
        directors, so that it lies on the constraint manifold (a nodal
        reparametrization of the predictor; Betsch & Leyendecker 2006, §5)."""
        if v_mid is None:
            return None
        q1 = joint_positions(red, x + h * v_mid, joint_positions(red, x))
        q1 = _unit_quaternions(model, q1)
        return to_redundant(red, State(q1, np.zeros(model.n_total)))[0]

    # a free system drifting from N's origin: its state held relative to a moving origin
    # (.origin), the absolute state formed for the outputs, the controller and the loads
    origin = None if servo is not None or events or stops is not None else origin_of(red, x)
    absolute = (lambda z: z) if origin is None else origin.absolute

    f: Callable[[Array], Array] | None
    ts, xs, vs, dis, its, eff, wk = [0.0], [x], [v], [0.0], [], [], [0.0]
    PH = [red.momentum(x, v)]
    dissipated = work = 0.0
    stopped: BaseException | None = None
    try:
        if on_output is not None:
            on_output(red, 0.0, x, v)
        for _, t, h, t_next, output in schedule:
            qu = None  # the joint coordinates of (x, v), computed once per step
            if sampler.due(t):
                qu = to_joint_coordinates(red, absolute(x), v)
                held = list(controller.law(t, model, State(*qu)))
                sampler.advance(t)
            if callable(loads):
                q, u = to_joint_coordinates(red, absolute(x), v) if qu is None else qu
                st = State(q, u)
                recs = loads(
                    t + 0.5 * h, model, st, kinematics_at(model, q[: model.nq], u[: model.n])
                )
                f = generalized_loads(red, [*(recs or ()), *held])
            elif held:
                f = generalized_loads(red, [*(loads or ()), *held])  # type: ignore[misc]
            else:
                f = f_static
            parts = advance(x, v, lam, t, h, f, predict(x, v_mid, h), v_mid, 0)
            for x_start, hh, part in parts:
                rate = part.dx / hh  # the dampers' work: Δa · f(Δa/h)
                dissipated += float(
                    part.dx @ joints.damper_force(red.damping, red.damping_poly, rate)
                )
                if red.spherical is not None:
                    dissipated += red.spherical.force(x_start, part.x, hh)[1]
                if red.modal_damping is not None:  # the modal damping's Δηᵀ C_Ψ Δη / h
                    dissipated += float(part.dx @ red.modal_damping @ rate)
                if f is not None:
                    work += float(f(x_start + 0.5 * part.dx) @ part.dx)
            res = parts[-1][2]
            v_mid = np.sum([p.dx for _, _, p in parts], axis=0) / h
            x, v, lam = res.x, res.v, res.lam
            if origin is not None:
                x = origin.follow(x)
            its.append(sum(p.iterations for _, _, p in parts))
            if servo is not None:
                eff.append(lam[red.nc : red.nc + servo.n].copy())
            if scheme.locked.size or stops is not None or applied < len(events):
                scheme.multipliers(lam, red.nc + (0 if servo is None else servo.n))
                changed = False
                if stops is not None:  # after the step, as the RK4 runs (Stops.after_step)
                    xq = np.concatenate(to_joint_coordinates(red, x, v))
                    if stops.after_step(scheme, t_next, xq) is not xq:
                        x, v, changed = scheme.x, scheme.v, True
                due = n_due(events, t_next)
                if due != applied:
                    applied = due
                    held_by_stops = () if stops is None else stops.speeds()
                    v = scheme.relock(x, v, np.union1d(locked_at(events, applied), held_by_stops))
                    changed = True
                if changed:
                    lam = v_mid = None  # new multipliers; the predictor's rates are stale
                locks = scheme.rows
            if output:
                ts.append(t_next)
                xs.append(absolute(x))
                vs.append(v)
                PH.append(red.momentum(x, v))  # about the mass centre: the relative state's
                dis.append(dissipated)
                wk.append(work)
                if on_output is not None:
                    on_output(red, t_next, xs[-1], v)
    except (KeyboardInterrupt, SimulationError) as exc:  # the outputs so far are kept
        stopped = exc
    n = min(len(ts), len(xs), len(vs), len(PH), len(dis), len(wk))  # a stop mid-append
    ts, xs, vs, PH, dis, wk = ts[:n], xs[:n], vs[:n], PH[:n], dis[:n], wk[:n]
    X, V = np.array(xs), np.array(vs)
    result = Run(
        t=np.array(ts),
        x=X,
        v=V,
        energy=np.array([red.energy(a, b) for a, b in zip(X, V, strict=True)]),
        linear_momentum=np.array([p for p, _ in PH]),
        angular_momentum=np.array([hh for _, hh in PH]),
        constraint_residual=np.array([np.max(np.abs(red.constraints(a)), initial=0.0) for a in X]),
        dissipated=np.array(dis),
        iterations=np.array(its),
        efforts=np.array(eff) if servo is not None else None,
        red=red,
        work=np.array(wk),
    )
    if stopped is not None:
        raise RunStopped(result, stopped)
    return result


@attrs.define(eq=False)
class JointRows:
    """The joint coordinates and speeds of a run's outputs, each converted once, as the
    run reaches it (:func:`~.formulation.to_joint_coordinates`, quaternion signs
    continuous), lowered from the rotor bodies by ``geared``
    (:func:`~.geared.with_rotor_bodies`) when there are any, and ``state`` itself at
    ``t = 0`` when given. With a ``stream``, the rows go to it as ``(t (k,), q (k, nq),
    u (k, n))`` in blocks of ``block`` while the run goes, each block whole (signals
    held); the rows of an unfinished block are the caller's to write."""

    state: State | None = None
    geared: Any = None
    stream: Callable[[Array, Array, Array], None] | None = None
    block: int = 50
    t: list[float] = attrs.field(factory=list, init=False)
    q: list[Array] = attrs.field(factory=list, init=False)
    u: list[Array] = attrs.field(factory=list, init=False)
    sent: int = attrs.field(default=0, init=False)  # rows streamed so far
    _q_prev: Array | None = attrs.field(default=None, init=False)

    def __call__(self, red: Redundant, t: float, x: Array, v: Array) -> None:
        """The row of the output ``(t, x, v)`` (the ``on_output`` of :func:`run`)."""
        self._add(red, t, x, v)
        if self.stream is not None and len(self.t) - self.sent >= self.block:
            with signals_deferred():
                a = self.sent
                self.stream(np.array(self.t[a:]), np.array(self.q[a:]), np.array(self.u[a:]))
                self.sent = len(self.t)

    def _add(self, red: Redundant, t: float, x: Array, v: Array) -> None:
        q, u = to_joint_coordinates(red, x, v, self._q_prev)
        self._q_prev = q
        if self.geared is not None:
            q, u = (a[0] for a in self.geared.lower(q[None], u[None]))
        if not self.t and self.state is not None:
            q, u = self.state.q, self.state.u
        self.t.append(t)
        self.q.append(q)
        self.u.append(u)

    def histories(self, red: Redundant, r: Run) -> tuple[Array, Array]:
        """``q`` (nt, nq) and ``u`` (nt, n) of every output of ``r``; the outputs a stop
        left without their row are converted here, and not streamed."""
        for i in range(len(self.t), r.t.size):
            self._add(red, r.t[i], r.x[i], r.v[i])
        return np.array(self.q), np.array(self.u)


def joint_histories(red: Redundant, r: Run) -> tuple[Array, Array]:
    """The joint coordinates and speeds (nt, nq), (nt, n) of a run's director histories
    (:class:`JointRows` of the whole run)."""
    return JointRows().histories(red, r)


def simulate_energy_momentum(
    model: Model, state: State, t_final: float, dt: float, **options: Any
) -> Any:
    """:func:`kanedyn.simulate` with ``method="energy-momentum"``: a
    :class:`~kanedyn.simulation.conserving.ConservingTrajectory` in joint coordinates.
    ``options`` are those of :func:`run` (``loads``, ``output_every``, ``tol``,
    ``max_iter``, ``reduction``, ``planar``, ``controller``, ``events``, ``stops``)."""
    start = _time.perf_counter()
    geared = None
    if has_rotors(model) and model.nf:
        raise ModelError(
            "method='energy-momentum': geared rotors and flexible bodies together are not "
            "held yet; use method='rk4'"
        )
    if has_rotors(model):  # each geared rotor a body of its own (.geared)
        refused = [k for k in ("controller", "events", "stops", "servo") if options.get(k)]
        if callable(options.get("loads")) or refused:
            what = "callable loads" if callable(options.get("loads")) else refused[0]
            raise ModelError(
                f"method='energy-momentum' with geared rotors takes constant loads only, "
                f"not {what} (the rotors are bodies of the scheme's model, which those "
                "would see); use method='rk4'"
            )
        geared = with_rotor_bodies(model)
    rows = JointRows(state, geared, options.pop("stream", None))
    options["on_output"] = rows
    stopped: BaseException | None = None
    # the model's loop joints included; with rotors, the model with a body per rotor
    stepped, start_state = (model, state) if geared is None else (geared.model, geared.lift(state))
    try:
        r = run(stepped, start_state, t_final, dt, **options)
    except RunStopped as exc:
        r, stopped = exc.run, exc.cause
    wall = _time.perf_counter() - start
    q, u = rows.histories(r.red, r)
    status = "completed"
    if stopped is not None:
        status = "interrupted" if isinstance(stopped, KeyboardInterrupt) else "diverged"
    traj = ConservingTrajectory(
        model=model, t=r.t, q=q, u=u, formulation="directors", method="energy-momentum",
        engine="dense", wall_time=wall, steps=len(r.iterations), run=r, status=status,
    )  # fmt: skip
    if stopped is None:
        return traj
    if isinstance(stopped, KeyboardInterrupt):
        raise SimulationInterrupted(f"interrupted at t = {traj.t[-1]:.6g} s", traj) from None
    error = SimulationError(f"{stopped} (outputs kept to t = {traj.t[-1]:.6g} s)")
    error.trajectory = traj
    raise error from None
