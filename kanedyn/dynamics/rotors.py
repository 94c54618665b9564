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

:func:`rotor_terms` is written over array operations (``@``, ``*``, ``+``, indexing)
that NumPy floats and NumPy object arrays of sympy expressions both support: the dense
engine (:mod:`kanedyn.dynamics.kane`) and symbolic Kane (:mod:`kanedyn.symbolic.kane`)
call it.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.plan import Params, params_of
from kanedyn.spatial.algebra import cross

__all__ = [
    "RotorSpec",
    "carrier",
    "has_rotors",
    "refuse_rotors",
    "rotor_momentum",
    "rotor_specs",
    "rotor_sums",
    "rotor_terms",
]

Array = NDArray[Any]


@attrs.frozen(eq=False)
class RotorSpec:
    """One rotor, resolved against its model: joint ``k``, speed index ``r``, carrier
    body index ``c`` (-1 for N), axis ``a_C`` in the carrier's axes, and the rotor's
    ``J``, ``J_t``, ``n``, ``reflected_only``."""

    k: int
    r: int
    c: int
    a_C: Array
    J: float
    J_t: float
    n: float
    reflected_only: bool
    hinge: bool


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
            )
        )
    return tuple(specs)


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
    aa = a[..., :, None] * a[..., None, :]
    J_R = spec.J_t * np.eye(3) + (J - spec.J_t) * aa
    Omega_R = (n * a)[..., :, None] * e_k
    sig = np.asarray(sigma)[..., None]  # (..., 1): a 0-d object array would unwrap
    omega_R = n * sig * a
    alpha_R = 0 * omega_R
    if Omega_C is not None and omega_C is not None and alpha_C is not None:
        Omega_R = Omega_C + Omega_R
        omega_R = omega_C + omega_R
        alpha_R = alpha_C + n * sig * cross(omega_C, a)
    Omega_RT = np.swapaxes(Omega_R, -1, -2)
    M = Omega_RT @ J_R @ Omega_R
    H_R = (J_R @ omega_R[..., None])[..., 0]
    f = -(Omega_RT @ ((J_R @ alpha_R[..., None])[..., 0] + cross(omega_R, H_R))[..., None])[..., 0]
    return M, f


def rotor_momentum(
    spec: RotorSpec, sigma: Any, R_N_C: Array | None, omega_C: Array | None
) -> tuple[Array, Array]:
    """``(ω_R, J_R ω_R)`` in N: the rotor's angular velocity and angular momentum (zero
    for a ``reflected_only`` rotor, which stands for a limit, not a body)."""
    a = spec.a_C if R_N_C is None else R_N_C @ spec.a_C
    n_sigma = spec.n * np.asarray(sigma)[..., None]  # (..., 1): states may be batched
    w = n_sigma * a if omega_C is None else omega_C + n_sigma * a
    if spec.reflected_only:
        return w, 0 * w
    # J_R ω = J_t ω + (J - J_t) a (a·ω): the rotor's inertia, axisymmetric about a
    return w, spec.J_t * w + (spec.J - spec.J_t) * a * np.sum(a * w, axis=-1)[..., None]


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
