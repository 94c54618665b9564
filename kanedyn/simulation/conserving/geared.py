"""Geared rotors in the energy-momentum scheme: each rotor a body of its own.

A rotor (:class:`kanedyn.Rotor`: axial and transverse moments ``J``, ``J_t``, ratio
``n``) on joint k spins about the axis ``a`` fixed in its carrier C at
``ω_R = ω_C + n σ a``. Its kinetic energy ``½ ω_Rᵀ J_R ω_R`` is not a quadratic form of
the directors with a constant matrix: the cross term ``n J σ (a·ω_C)`` is cubic in
``(x, ẋ)``. The scheme therefore gives the rotor its own directors, as it does every
body: the model is extended (:func:`with_rotor_bodies`) by

* a massless body R with the inertia ``diag(J/2, J/2, J)`` about its z axis (a thin
  disc, whose Euler tensor ``diag(J/2, J/2, 0)`` is semi-definite), on a hinge about
  ``a`` from C (from N for a root joint's inner rotor); the rest of its transverse inertia,
  ``(J_t - J/2)(U - a aᵀ)``, moves with C and is added to C's inertia (both parts turn
  with C about axes normal to ``a``: ``½ ω_Rᵀ J_R ω_R`` is unchanged);
* the gear: the hinge's augmented angle ``ψ`` and the joint's coordinate ``a_k`` tied
  by the linear row ``ψ - n a_k = 0`` (:func:`gear_rows`, a row of the step's
  :class:`~.constraints.ConstraintSet`).

A reflected-only rotor (``n² J`` on the joint alone, a limit rather than a body) stays
on its joint: ``n² J`` is the mass of the joint's augmented coordinate
(:func:`~.formulation.armature`).

The gyroscopic coupling between the rotor and its carrier is then carried by the
hinge's constraint forces ``G_dᵀλ`` and the gear's multiplier: the discrete gradient of
the hinge rows makes them do no work over a step and exert no net force or torque
(:mod:`.constraints`), and the gear row is linear, so its discrete gradient is its
gradient and, relating two relative coordinates, it is invariant under a rigid motion of
the whole system. Energy and linear and angular momentum are conserved to the Newton
tolerance as for every other body. The joint speeds are read back with the
original model's generalized momenta ``Gᵀ M'(q') u'`` (``G = ∂u'/∂u``, so that
``M = Gᵀ M' G`` is the mass matrix with the rotors' terms).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.dynamics.kane import mass_matrix
from kanedyn.dynamics.rotors import rotor_specs
from kanedyn.errors import ModelError
from kanedyn.model import Body, Joint, Model, State

__all__ = ["Geared", "gear_rows", "with_rotor_bodies"]

Array = NDArray[np.float64]

#: the key of a model's gears (rotor hinge, geared joint, ratio) in ``Model.derived``
GEARS = "conserving.gears"


@attrs.frozen(eq=False)
class Geared:
    """A model with geared rotors (``original``) and its extension ``model`` with a body
    and a hinge per rotor (:func:`with_rotor_bodies`). ``G`` (n', n) maps the speeds to
    the extension's (``u' = G u``), ``q_of`` (nq) the original coordinates' places in
    ``q'``, ``Gq`` (nq', nq) the coordinates likewise (hinge angles ``n q_k``)."""

    original: Model
    model: Model
    G: Array
    Gq: Array
    q_of: NDArray[np.intp]
    u_of: NDArray[np.intp]

    def lift(self, state: State) -> State:
        """The extension's state: each rotor's hinge at ``n q_k``, turning at ``n u_k``."""
        return State(self.Gq @ np.asarray(state.q, float), self.G @ np.asarray(state.u, float))

    def lower(self, q: Array, u: Array) -> tuple[Array, Array]:
        """The original coordinates and the speeds with the same generalized momenta:
        ``M u = Gᵀ M'(q') u'`` at each row of ``q``, ``u`` (nt, nq'), (nt, n')."""
        qs = q[:, self.q_of]
        us = []
        for qk, qn, un in zip(qs, q, u, strict=True):
            p = self.G.T @ mass_matrix(self.model, State(qn, np.zeros(self.model.n))) @ un
            M = mass_matrix(self.original, State(qk, np.zeros(self.original.n)))
            us.append(np.linalg.solve(M, p))
        return qs, np.array(us)


def _carrier_axes(a: Array) -> Array:
    """A rotation whose third column is the unit vector ``a`` (Gi of the rotor's hinge)."""
    helper = np.eye(3)[int(np.argmin(np.abs(a)))]
    x = np.cross(helper, a)
    x /= np.linalg.norm(x)
    return np.column_stack((x, np.cross(a, x), a))


def with_rotor_bodies(model: Model) -> Geared:
    """``model`` with each geared rotor as a massless body on a hinge from its carrier,
    its gear recorded for :func:`gear_rows` (module docstring)."""
    specs = rotor_specs(model)
    bodies = list(model.bodies)
    joints: list[Joint] = [attrs.evolve(j, rotor=None) for j in model.joints]
    names = {b.name for b in bodies} | {j.name for j in joints}
    gears: list[tuple[str, str, float]] = []  # (rotor hinge, geared joint, ratio)
    for s in specs:
        joint = model.joints[s.k]
        name = f"{joint.name}.rotor"
        if name in names:
            raise ModelError(f"joint {joint.name!r}: the rotor's body name {name!r} is taken")
        if s.reflected_only:  # n² J on the joint's coordinate (formulation.armature)
            joints[s.k] = joint
            continue
        carrier = None if s.c < 0 else model.bodies[s.c].name
        a = s.a_C / np.linalg.norm(s.a_C)
        J = s.J
        bodies.append(Body(name, 0.0, np.diag([J / 2, J / 2, J]), allow_singular=True))
        point = np.zeros(3) if carrier is None else np.asarray(model.bodies[s.c].com, float)
        joints.append(Joint.revolute(f"{name}.spin", carrier, name, axis=3,
                                     inner_point=point, inner_rotation=_carrier_axes(a)))  # fmt: skip
        if carrier is not None and s.J_t != J / 2:
            c = s.c
            extra = (s.J_t - J / 2) * (np.eye(3) - np.outer(a, a))
            bodies[c] = attrs.evolve(bodies[c], inertia=np.asarray(bodies[c].inertia) + extra)
        gears.append((f"{name}.spin", joint.name, s.n))
    ext = attrs.evolve(model, bodies=bodies, joints=joints)  # the Model orders the tree
    at = {j.name: i for i, j in enumerate(ext.joints)}
    ext.derived(GEARS, lambda m: tuple((at[h], at[g], n) for h, g, n in gears))
    lay, lay2 = model.layout, ext.layout
    G = np.zeros((ext.n, model.n))
    Gq = np.zeros((ext.nq, model.nq))
    q_of = np.zeros(model.nq, dtype=np.intp)
    u_of = np.zeros(model.n, dtype=np.intp)
    for k, j in enumerate(model.joints):
        q_of[lay.q_index[k]] = lay2.q_index[at[j.name]]
        u_of[lay.u_index[k]] = lay2.u_index[at[j.name]]
    G[u_of, np.arange(model.n)] = 1.0
    Gq[q_of, np.arange(model.nq)] = 1.0
    k_of = {j.name: k for k, j in enumerate(model.joints)}
    for hinge, geared, n in gears:
        G[lay2.u_index[at[hinge]][0], lay.u_index[k_of[geared]][0]] = n
        Gq[lay2.q_index[at[hinge]][0], lay.q_index[k_of[geared]][0]] = n
    return Geared(model, ext, G, Gq, q_of, u_of)


def gear_rows(model: Model, aug: Any) -> list[tuple[int, int, float]]:
    """The gears of a model made by :func:`with_rotor_bodies`, as ``(ψ, a_k, n)``: the
    augmented coordinates of the rotor's hinge angle and of the joint, tied by the row
    ``x[ψ] - n x[a_k] = 0``. ``aug`` holds each joint's (rotational, translational)
    augmented coordinates. Empty for any other model."""
    gears: tuple[tuple[int, int, float], ...] = model.derived(GEARS, lambda m: ())
    out = []
    for jr, k, n in gears:
        a_rot, a_trn = aug[k]
        out.append((int(aug[jr][0][0]), int(a_rot[0] if a_rot.size else a_trn[0]), float(n)))
    return out
