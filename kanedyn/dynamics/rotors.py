"""Geared rotors: a motor rotor behind a gear of ratio n on a 1-DOF joint.

Seed 004 (the gear-train chapter): a rotor of axial moment J turning n times as fast as
its joint reflects ``n² J`` onto the joint. Written out in Kane's form, with the rotor
mounted on a carrier body C (the joint's inner or outer body) and spinning about the
joint axis ``a`` (fixed in C), the rotor's angular velocity, its partial angular
velocities and its remainder acceleration are

.. math::

    \\omega_R = \\omega_C + n \\sigma a, \\qquad
    \\Omega_R = \\Omega_C + n\\, a\\, e_k^T, \\qquad
    \\alpha_{R,r} = \\alpha_{C,r} + n \\sigma\\, \\omega_C \\times a

(σ the joint's speed, e_k its unit column; ``ȧ = ω_C × a``). With the rotor inertia
``J_R = J a aᵀ + J_t (U - a aᵀ)`` (N axes; axisymmetric, so it moves with C only), its
generalized inertia force is ``F*_R = -Ω_Rᵀ (J_R α_R + ω_R × J_R ω_R)`` (Kane &
Levinson eq. 5.7.2 for one more rigid body whose mass centre moves with C), so it adds

.. math::

    M_R = \\Omega_R^T J_R \\Omega_R, \\qquad
    f_R = -\\Omega_R^T \\left(J_R \\alpha_{R,r} + \\omega_R \\times J_R \\omega_R\\right)

to ``M ν̇ = f``. Both the reflected inertia (``n² J`` on the joint's diagonal) and the
couplings (``n J a·Ω_C`` between the joint and the carrier's speeds, and the gyroscopic
terms) appear. A ``reflected_only`` rotor keeps ``n² J`` alone (MuJoCo's ``armature``).

:func:`rotor_motion` holds the rotor's own equations (its inertia, angular velocity,
momentum and velocity-product torque) once, over the arithmetic protocol
(:mod:`kanedyn.spatial.arithmetic`): the dense engine's :func:`rotor_terms` (N axes,
floats or sympy) and the tree recursions' :func:`rotor_piece` (the joint's frame Go,
floats or traced values) both call it.

**In the recursions** (:mod:`kanedyn.dynamics.recursion`) the rotor of joint k is a
massless body with the constant inertia ``J_R`` in Go_k (``a = e``, the joint's axis,
fixed in Go_k for both carriers: a hinge turns about it, a slide does not turn), moving
at ``ω_R = ω_k + m σ e`` with ``m = n - 1`` for a hinge's inner carrier (``ω_P = ω_k -
σ e``) and ``m = n`` otherwise. Its motion column is ``S_R = S + (m e, 0)``, its
acceleration at zero ``ν̇`` exceeds body k's by ``(m σ ω_k × e, ·)``, so its bias torque
is ``τ = J_R (m σ ω_k × e) + ω_R × J_R ω_R`` (:func:`rotor_motion` with ``w = ω_k``,
rate ``m σ``). It enters the articulated-body recursion as a second piece driven by
joint k (Featherstone 2008 §7.3 with two motion columns on one speed):

.. math::

    U = I^A S + I_R S_R, \\quad D = S^T I^A S + S_R^T I_R S_R, \\quad
    u = Q - S^T p^A - S_R^T p_R, \\quad I^a = I^A + I_R - U D^{-1} U^T

with ``p_R = (τ, 0)``; a reflected-only rotor adds ``n² J`` to ``D`` alone (an
armature). In the momentum-state rates it is momentum ``(J_R ω_R, 0)`` of joint k's
subtree: the extra partial ``m e`` only adds ``m (ω_k × e)·J_R ω_R = 0`` to the rate, so
the rotor's spin momentum ``m J e·ω_R`` is part of joint k's momentum state
(``y = ∂T/∂ν``) and needs no rate of its own (docs/theory/msd.md).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.plan import Params, params_of
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.algebra import cross, mv

__all__ = [
    "RotorPiece",
    "RotorSpec",
    "carrier",
    "has_rotors",
    "refuse_rotors",
    "rotor_momentum",
    "rotor_motion",
    "rotor_piece",
    "rotor_specs",
    "rotor_sums",
    "rotor_terms",
]

Array = NDArray[Any]


@attrs.frozen(eq=False)
class RotorSpec:
    """One rotor, resolved against its model: joint ``k``, speed index ``r``, carrier
    body index ``c`` (-1 for N), axis ``a_C`` in the carrier's axes, and the rotor's
    ``J``, ``J_t``, ``n``, ``reflected_only``; ``e``, the axis in the joint's frame Go,
    and ``m``, the rotor's rate relative to body k per unit joint speed (module
    docstring: ``n - 1`` on a hinge's inner body, else ``n``)."""

    k: int
    r: int
    c: int
    a_C: Array
    J: float
    J_t: float
    n: float
    reflected_only: bool
    hinge: bool
    e: Array
    m: float


def has_rotors(model: Model) -> bool:
    return any(j.rotor is not None for j in model.joints)


def refuse_rotors(model: Model, what: str) -> None:
    """Raise a ModelError if the model has geared rotors, which ``what`` does not model."""
    if has_rotors(model):
        names = [j.name for j in model.joints if j.rotor is not None]
        raise ModelError(
            f"{what} does not model geared rotors (joints {names}); use Kane's equations "
            "(formulation='kane', kd.forward_dynamics, kd.mass_matrix)"
        )


def rotor_specs(model: Model, params: Params | None = None) -> tuple[RotorSpec, ...]:
    """The rotors of ``model``, with their axes in their carriers' axes: resolved once per
    model (:meth:`kanedyn.Model.derived`), since every right-hand side asks for them.

    The axes come from the model's own joint rotations; ``params`` (the parameters being
    evaluated, e.g. ``kin.params``) must be those, so a :class:`~kanedyn.ModelBatch` of a
    model with rotors is refused rather than evaluated with the nominal axes.
    """
    specs: tuple[RotorSpec, ...] = model.derived("rotor_specs", _rotor_specs)
    if specs and params is not None and params is not params_of(model):
        raise ModelError(
            f"geared rotors (joints {[model.joints[s.k].name for s in specs]}) are not "
            "evaluated on a ModelBatch; evaluate each batch.member(b)"
        )
    return specs


def _rotor_specs(model: Model) -> tuple[RotorSpec, ...]:
    lay, pa = model.layout, params_of(model)
    specs = []
    for k, j in enumerate(model.joints):
        rot = j.rotor
        if rot is None:
            continue
        if j.rot_dof == 1:
            e = lay.gimbal_e[int(np.flatnonzero(lay.gimbal == k)[0]), 0]  # Gi axis = Go axis
        else:
            e = lay.Delta[k][:, 0]  # the slide's Gi axis
        if rot.body == "inner":
            c = int(lay.parent[k])
            a_C = np.asarray(pa.R_Bi_Gi[k], dtype=float) @ e
        else:
            c = k  # body k is joint k's outer body; a is fixed in Go (hinge) or Bo
            a_C = np.asarray(pa.R_Go_Bo[k], dtype=float).T @ e
        specs.append(
            RotorSpec(
                k=k,
                r=int(lay.u_index[k][0]),
                c=c,
                a_C=a_C,
                J=rot.inertia,
                J_t=rot.transverse,
                n=rot.ratio,
                reflected_only=rot.reflected_only,
                hinge=j.rot_dof == 1,
                e=np.asarray(e, dtype=float),
                m=rot.ratio - 1.0 if (rot.body == "inner" and j.rot_dof == 1) else rot.ratio,
            )
        )
    return tuple(specs)


def rotor_motion(a: Any, J: float, J_t: float, w: Any, rate: Any) -> tuple[Any, ...]:
    """``(J_R, ω_R, H_R, τ)`` of a rotor spinning about ``a`` at ``rate`` relative to a
    body turning at ``w`` (any axes, leading batch axes, any arithmetic):

    .. math::

        J_R = J a a^T + J_t (U - a a^T), \\quad \\omega_R = w + \\rho\\, a, \\quad
        H_R = J_R \\omega_R, \\quad \\tau = J_R (\\rho\\, w \\times a) + \\omega_R \\times H_R

    ``τ`` is the rotor's inertia torque at zero ``ν̇`` beyond ``J_R α_w`` (``ȧ = w × a``:
    Euler's equation ``J_R α_R + ω_R × J_R ω_R`` with ``α_R = α_w + ρ w × a + ρ̇ a``).
    """
    aa = a[..., :, None] * a[..., None, :]
    # the arrays first: J and J_t may be scalars of a traced arithmetic
    J_R = np.eye(3) * J_t + aa * (J - J_t)
    rho = np.asarray(rate)[..., None]  # (..., 1): a 0-d object array would unwrap
    omega = w + rho * a
    H = omega * J_t + a * (J - J_t) * np.asarray(np.sum(a * omega, axis=-1))[..., None]
    tau = mv(J_R, rho * cross(w, a)) + cross(omega, H)
    return J_R, omega, H, tau


def rotor_terms(
    spec: RotorSpec,
    n_speeds: int,
    sigma: Any,
    R_N_C: Array | None = None,
    omega_C: Array | None = None,
    Omega_C: Array | None = None,
    alpha_C: Array | None = None,
) -> tuple[Array, Array]:
    """``(M_R, f_R)`` of one rotor (see the module docstring), shapes (..., n, n), (..., n).

    ``sigma`` is the joint's speed (...); the carrier's ``R_N_C`` (..., 3, 3), ``omega_C``
    (..., 3), ``Omega_C`` (..., 3, n) and remainder ``alpha_C`` (..., 3) are ``None`` for a
    carrier at rest in N (a root joint's inner body).
    """
    e_k = np.zeros(n_speeds)
    e_k[spec.r] = 1.0
    n, J = spec.n, spec.J
    if spec.reflected_only:
        M = (n * n * J) * (e_k[:, None] * e_k[None, :])
        return M + 0 * np.asarray(sigma)[..., None, None], np.zeros(n_speeds) * np.asarray(sigma)[
            ..., None
        ]
    a = spec.a_C if R_N_C is None else (R_N_C @ spec.a_C[:, None])[..., 0]
    Omega_R = (n * a)[..., :, None] * e_k
    if Omega_C is None or omega_C is None or alpha_C is None:  # the carrier at rest in N
        J_R, _, _, torque = rotor_motion(a, J, spec.J_t, np.zeros(3), n * np.asarray(sigma))
    else:
        J_R, _, _, tau = rotor_motion(a, J, spec.J_t, omega_C, n * np.asarray(sigma))
        torque = mv(J_R, alpha_C) + tau
        Omega_R = Omega_C + Omega_R
    Omega_RT = np.swapaxes(Omega_R, -1, -2)
    M = Omega_RT @ J_R @ Omega_R
    return M, -(Omega_RT @ torque[..., None])[..., 0]


def rotor_momentum(
    spec: RotorSpec, sigma: Any, R_N_C: Array | None, omega_C: Array | None
) -> tuple[Array, Array]:
    """``(ω_R, J_R ω_R)`` in N: the rotor's angular velocity and angular momentum (zero
    for a ``reflected_only`` rotor, which stands for a limit, not a body)."""
    a = spec.a_C if R_N_C is None else R_N_C @ spec.a_C
    w = np.zeros(3) if omega_C is None else omega_C
    _, omega, H, _ = rotor_motion(a, spec.J, spec.J_t, w, spec.n * np.asarray(sigma))
    return (omega, 0 * omega) if spec.reflected_only else (omega, H)


@attrs.frozen
class RotorPiece:
    """One rotor in its joint's frame Go_k, as the tree recursions use it (module
    docstring): inertia ``J_R`` (3×3, zero for a reflected-only rotor), the extra motion
    column ``m e`` (``S_R = S + (m e, 0)``), the bias torque ``τ`` and momentum ``H_R``,
    and ``armature`` (``n² J`` for a reflected-only rotor, else 0)."""

    J_R: list
    me: list
    tau: list
    H: list
    armature: float

    def inertia_times(self, x: list) -> list:
        """``I_R x`` for a spatial motion ``x`` (a massless body: ``(J_R ω_x, 0)``)."""
        return sp.mv(self.J_R, x[:3]) + [0.0, 0.0, 0.0]

    def add_inertia(self, I: list) -> list:
        """``I + I_R`` for a 6×6 spatial inertia ``I`` (nested lists)."""
        out = [list(row) for row in I]
        for i in range(3):
            for j in range(3):
                out[i][j] = out[i][j] + self.J_R[i][j]
        return out

    def torque(self, alpha_k: list, nudot: Any) -> list:
        """The rotor's inertia wrench ``I_R (a_k + (m e ν̇, 0)) + (τ, 0)`` (Go_k), from
        body k's angular acceleration ``alpha_k`` and the joint's ``ν̇``."""
        a = sp.add(alpha_k, sp.scale(nudot, self.me))
        return sp.add(sp.mv(self.J_R, a), self.tau) + [0.0, 0.0, 0.0]


def rotor_piece(spec: RotorSpec, omega_k: list, sigma: Any, J: Any = None,
                J_t: Any = None) -> RotorPiece:  # fmt: skip
    """The :class:`RotorPiece` of ``spec`` for body k turning at ``omega_k`` (Go_k) with
    joint speed ``sigma``: :func:`rotor_motion` with ``a = e``, ``w = ω_k``, rate ``m σ``.
    ``J``, ``J_t``: the rotor's moments (default ``spec``'s), scalars of any arithmetic
    (a traced recursion's inputs)."""
    J = spec.J if J is None else J
    J_t = spec.J_t if J_t is None else J_t
    if spec.reflected_only:
        zero = [0.0, 0.0, 0.0]
        return RotorPiece([zero] * 3, zero, zero, zero, spec.n * spec.n * J)
    w = np.array(omega_k, dtype=object)
    J_R, _, H, tau = rotor_motion(spec.e, J, J_t, w, spec.m * sigma)
    me = (spec.m * spec.e).tolist()
    return RotorPiece(J_R.tolist(), me, list(tau), list(H), 0.0)


def carrier(spec: RotorSpec, kin: Any, par: Any = None) -> tuple[Any, ...]:
    """(R_N_C, ω_C, Ω_C, α_C) of the carrier at ``kin`` (``None`` for N) and σ."""
    if spec.c < 0:
        R = w = Om = al = None
        a_N = spec.a_C
    else:
        R = kin.R_N_B[..., spec.c, :, :]
        w = kin.omega[..., spec.c, :]
        Om = None if par is None else par.Omega[..., spec.c, :, :]
        al = None if par is None else par.alpha_r[..., spec.c, :]
        a_N = (R @ spec.a_C[:, None])[..., 0]
    rel = kin.omega_rel[..., spec.k, :] if spec.hinge else kin.w[..., spec.k, :]
    sigma = np.sum(a_N * rel, axis=-1)  # the joint speed: rel = σ a
    return R, w, Om, al, sigma


def rotor_sums(model: Model, kin: Any, par: Any) -> tuple[Array, Array]:
    """``Σ M_R`` (..., n, n) and ``Σ f_R`` (..., n) over the model's rotors, from the
    numeric kinematics ``kin`` and partials ``par`` (any leading batch axes)."""
    M: Any = 0.0
    f: Any = 0.0
    for spec in rotor_specs(model, kin.params):
        R, w, Om, al, sigma = carrier(spec, kin, par)
        M_r, f_r = rotor_terms(spec, model.n, sigma, R, w, Om, al)
        M, f = M + M_r, f + f_r
    return M, f
