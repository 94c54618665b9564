"""The director formulation of a kd.Model: redundant coordinates, mass matrix, loads.

Each body i is described by its mass-centre position ``φ_i`` and three body-fixed
directors ``d_a`` (the columns of ``R_N_B``), 12 coordinates (Betsch & Steinmann 2001;
Betsch & Leyendecker 2006, §3). With the Euler tensor about the mass centre (body axes)

.. math:: E = \\int X X^T dm = \\tfrac12 \\operatorname{tr}(I)\\, U - I

the kinetic energy is ``T = ½ m |φ̇|² + ½ Σ_ab E_ab ḋ_a·ḋ_b = ½ ẋᵀ M ẋ`` with the
**constant** mass matrix ``M = diag(m U, E ⊗ U)``; for a rigid motion ``ḋ_a = ω × d_a``
it is ``½ m v² + ½ ωᵀ I ω``.

The joint variables (gimbal angles and slides, one per DOF, rotational first, as
``model.speeds(joint)``) are appended as **augmented coordinates** ``a`` (massless),
tied to the bodies by the joint constraints (:mod:`.constraints`), so that springs,
dampers and actuators act on them directly (coordinate augmentation; Betsch & Uhlar
2007, §4). A free root and the rotation of a spherical joint have none: their
coordinates are read from the directors.

Coordinates ``x = [φ_0, d_1, d_2, d_3 (body 0) | ... | a]``, ``nx = 12 nb + na``.

**Planar formulation.** When the whole mechanism moves in N's x-y plane (the model's
``planar`` flag, every tree and loop joint a hinge about z, a weld, or slides in the
plane), each body has its in-plane position ``(φ_x, φ_y)`` and two in-plane directors
``f_1, f_2`` (2 components each): 6 coordinates and 3 rigidity constraints
``½(f_a·f_b - δ_ab)`` instead of 12 and 6. The out-of-plane quantities are constants:
``φ_z``, and the third director ``f_3 = e_z``. The body-axis directors are the affine
functions ``d_a = Σ_b C_ba f_b`` with ``C = R_N_B`` at ``q = 0`` (rotations about z
keep it), so that the joint constraints, loads, energy and momenta are built from the
same affine vectors as in space; the joint rows that are then identically zero (the
out-of-plane rotation and translation rows) are dropped. Kinetic energy
``½ m |φ̇|² + ½ Σ E_ab ḋ_a·ḋ_b`` with ``ḋ_a = Σ_b C_ba ḟ_b`` (b = 1, 2) gives the constant
mass matrix ``M = diag(m U_2, (C E Cᵀ)_{1:2,1:2} ⊗ U_2)`` per body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from kanedyn.dynamics.kane import mass_matrix
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.dynamics.partials import partials, partials_at
from kanedyn.errors import ModelError
from kanedyn.joints import spring_energy
from kanedyn.model import Model, State
from kanedyn.model.plan import params_of
from kanedyn.simulation.conserving import flexible
from kanedyn.simulation.conserving.constraints import (
    ALPHA,
    Affine,
    ConstraintSet,
    HiddenConstraints,
    Invariants,
    JointRows,
    combine,
    hidden_rows,
    joint_constraints,
)
from kanedyn.simulation.conserving.field import CentralField
from kanedyn.simulation.conserving.geared import gear_rows
from kanedyn.simulation.conserving.spherical import SphericalSprings
from kanedyn.spatial.algebra import cross
from kanedyn.spatial.rotation import dcm_to_euler, dcm_to_quat, parse_sequence

__all__ = [
    "BodyFrame",
    "Redundant",
    "embedded_momentum_form",
    "indefinite_bodies",
    "planar_reference",
    "joint_positions",
    "node_partials",
    "redundant",
    "speed_jacobian",
    "tangent_rates",
    "to_joint_coordinates",
    "to_redundant",
]

Array = NDArray[np.float64]


@attrs.frozen(eq=False)
class Redundant:
    """A model in director coordinates (built once per model by :func:`redundant`).

    ``nx`` coordinates (``12 nb`` body coordinates, then ``na`` augmented joint
    coordinates); ``M`` (nx, nx) the constant mass matrix; ``constraints`` the
    :class:`~.constraints.ConstraintSet` (``nc`` rows); ``joints`` the
    :class:`~.constraints.JointRows` of each joint (model order); ``aug[k]`` the
    coordinate indices of joint k's DOFs (rotational first; empty where a DOF has no
    augmented coordinate); ``stiffness``, ``damping`` (nx,) per augmented coordinate,
    ``stiffness_poly``, ``damping_poly`` (nx, 2) their higher-order coefficients (None
    without any: :func:`kanedyn.joints.spring_damper`);
    ``f_gravity`` (nx,) the generalized gravity force ``m g`` on each ``φ``;
    ``closures`` the rows of the loop-closing joints (their augmented coordinates follow
    the tree's); ``hidden`` the velocity constraints the step enforces at the step
    points (:class:`~.constraints.HiddenConstraints`), None unless a body's directors'
    mass matrix is indefinite (:func:`indefinite_bodies`); ``gyroscopic`` the constant
    skew matrix ``L - Lᵀ`` of the bodies' embedded momenta
    (:func:`embedded_momentum_form`), None without them; ``central`` the central
    gravity field's potential and discrete gradient (:class:`~.field.CentralField`),
    None in uniform gravity; ``flex`` the flexible bodies
    (:class:`~.flexible.FlexBody`, their coordinates after the augmented ones),
    ``modal_stiffness``, ``modal_damping`` (nx, nx) their ``K_Ψ``, ``C_Ψ`` on the modal
    amplitudes (None without flexible bodies); ``nodes`` the frames of the joints at
    nodes of flexible bodies (:class:`~.flexible.NodeFrame`, their massless axes last).
    """

    model: Model
    nx: int
    M: Array
    E: Array
    constraints: ConstraintSet
    joints: tuple[JointRows, ...]
    aug: tuple[NDArray[np.intp], ...]
    stiffness: Array
    damping: Array
    f_gravity: Array
    closures: tuple[JointRows, ...] = ()
    bodies: tuple[BodyFrame, ...] = ()
    planar: bool = False
    spherical: SphericalSprings | None = None
    hidden: HiddenConstraints | None = None
    gyroscopic: Array | None = None
    stiffness_poly: Array | None = None
    damping_poly: Array | None = None
    central: CentralField | None = None
    flex: tuple[flexible.FlexBody, ...] = ()
    modal_stiffness: Array | None = None
    modal_damping: Array | None = None
    nodes: tuple[flexible.NodeFrame, ...] = ()

    @property
    def nb(self) -> int:
        return self.model.nb

    @property
    def nc(self) -> int:
        return self.constraints.nc

    @property
    def stiffened(self) -> bool:
        """Whether a flexible body has foreshortening vectors (an indefinite mass
        matrix: the step moves its nodal rates onto the tangent space,
        :func:`tangent_rates`)."""
        return any(fb.pairs for fb in self.flex)

    def D(self, x: Array, i: int) -> Array:
        """``[d_1 d_2 d_3]`` of body i (≈ R_N_B), (3, 3)."""
        return np.column_stack([d(x) for d in self.bodies[i].dirs])

    def D_rate(self, v: Array, i: int) -> Array:
        """``[ḋ_1 ḋ_2 ḋ_3]`` of body i at the coordinate rates ``v``, (3, 3)."""
        return np.column_stack([d.L @ v for d in self.bodies[i].dirs])

    def energy(self, x: Array, v: Array) -> float:
        """``½ vᵀ M v + V(x)``: gravity ``-Σ m g·φ``, springs ``Σ ½ k a² + ⅓ k₂ a³ + ¼ k₃
        a⁴`` (:func:`kanedyn.joints.spring_energy`) and the spherical joints' springs
        ``½ φᵀ K φ + ⅓ k₂ r³ + ¼ k₃ r⁴`` (:mod:`.spherical`), and a central field's
        potential (:class:`~.field.CentralField`), and the strain energy ``½ηᵀK_Ψη`` of the
        flexible bodies (:mod:`.flexible`)."""
        springs = np.sum(spring_energy(self.stiffness, self.stiffness_poly, x))
        E = float(0.5 * v @ self.M @ v - self.f_gravity @ x + springs)
        if self.modal_stiffness is not None:
            E += 0.5 * float(x @ self.modal_stiffness @ x)
        if self.central is not None:
            E += self.central.potential(x)
        return E if self.spherical is None else E + self.spherical.potential(x)

    def momentum(self, x: Array, v: Array) -> tuple[Array, Array]:
        """Total linear momentum ``P = Σ m φ̇`` and angular momentum about the system
        mass centre ``c``, ``H = Σ (φ - c) × m φ̇ + Σ_a d_a × (Σ_b E_ab ḋ_b)``, both in N;
        the flexible bodies add their modal vectors' terms
        (:func:`.flexible.momentum`)."""
        mass = params_of(self.model).mass
        phi = np.array([b.pos(x) for b in self.bodies])
        phid = np.array([b.pos.L @ v for b in self.bodies])
        F = flexible.first_moment(self.flex, x)
        c = (mass @ phi + F) / mass.sum()
        P_f, H = flexible.momentum(self.flex, x, v, c)
        P = mass @ phid + P_f
        # Σ m (φ - c) = -F exactly, so Σ (φ - c) × m φ̇ = Σ (φ - c) × m (φ̇ - V) - F × V for
        # any V. With V = P/M, the round-off of φ - c (an ulp of |φ|, for a system far
        # from N's origin) multiplies the velocities relative to V, not V itself.
        V = P / mass.sum()
        H = H + np.sum(cross(phi - c, mass[:, None] * (phid - V)), axis=0) - cross(F, V)
        for i in range(self.nb):
            D, Dd = self.D(x, i), self.D_rate(v, i)
            H += cross(D.T, (Dd @ self.E[i]).T).sum(axis=0)
            h = np.asarray(self.model.bodies[i].embedded_momentum, dtype=float)
            if np.any(h):
                H += _embedded(D, h)
        return P, H


@attrs.frozen(eq=False)
class BodyFrame:
    """One body in the redundant coordinates: its mass centre ``pos`` and its body-axis
    directors ``dirs`` (the columns of R_N_B) as :class:`~.constraints.Affine` functions
    of ``x``; ``cols`` its own coordinates (12 in space, 6 in the plane); ``pinv`` the
    pseudo-inverse of the stacked ``[pos; d_1; d_2; d_3]`` columns (12, cols), which reads
    ``x[cols]`` (and rates) back from a position and a rotation; ``offset`` (12,) the
    stacked constants; ``L`` the stacked columns themselves."""

    pos: Affine
    dirs: tuple[Affine, Affine, Affine]
    cols: NDArray[np.intp]
    pinv: Array
    offset: Array
    L: Array

    def _rhs(self, stacked: Array, rates: bool) -> Array:
        if rates:
            return stacked
        return stacked - self.offset.reshape((12,) + (1,) * (stacked.ndim - 1))  # type: ignore[no-any-return]

    def solve(self, stacked: Array, rates: bool = False) -> Array:
        """``x[cols]`` of stacked ``[φ; d_1; d_2; d_3]`` (12,) or (12, k), without the
        misfit of :meth:`coordinates`."""
        return self.pinv @ self._rhs(stacked, rates)  # type: ignore[no-any-return]

    def coordinates(self, stacked: Array, rates: bool = False) -> tuple[Array, float]:
        """``x[cols]`` of stacked ``[φ; d_1; d_2; d_3]`` (12,) or (12, k), and the misfit
        (non-zero when the pose leaves the plane of a planar formulation)."""
        rhs = self._rhs(stacked, rates)
        sol = self.pinv @ rhs
        return sol, float(np.max(np.abs(self.L @ sol - rhs), initial=0.0))


#: half the permutation symbol, ``½ ε_abc = -ALPHA`` (its zeros +0.0, like ε's)
_HALF_EPS = 0.0 - ALPHA


def _embedded_weights(h: Array) -> Array:
    """``½ Σ_a h_a ε_abc`` (b, c)."""
    return np.einsum("a,abc->bc", h, _HALF_EPS)  # type: ignore[no-any-return]


def _euler_tensor(I: Array) -> Array:
    """The Euler tensor ``E = ½ tr(I) U - I`` of an inertia tensor (the directors' mass
    matrix)."""
    return 0.5 * np.trace(I) * np.eye(3) - I  # type: ignore[no-any-return]


def _embedded(D: Array, h: Array) -> Array:
    """``Σ_b d_b × ½ Σ_ac h_a ε_abc d_c`` (= ``D h`` for orthonormal right-handed
    directors): the embedded momentum's part of the angular momentum, the form the step
    conserves exactly."""
    w = _embedded_weights(h)  # (b, c)
    return np.sum(cross(D.T, (D @ w.T).T), axis=0)  # type: ignore[no-any-return]


def embedded_momentum_form(model: Model, bodies: Sequence[BodyFrame], nx: int) -> Array | None:
    """The gyroscopic matrix ``S = L - Lᵀ`` (nx, nx) of the bodies' embedded momenta, or
    None without any.

    A rotor momentum ``h`` fixed in body axes adds the kinetic co-energy ``ω·h`` to the
    Lagrangian; with ``ω·d_a = ½ ε_abc ḋ_b·d_c`` on the manifold, it is ``ẋᵀ L x`` (plus
    a term linear in ``ẋ`` alone, which does nothing) with
    ``L = ½ Σ h_a ε_abc L_bᵀ L_c`` (``L_b`` the linear part of director ``b``). Its
    Lagrange equations add the gyroscopic force ``S ẋ`` to the balance; the step uses
    ``S Δx/h``, which does no work (``ΔxᵀSΔx = 0``), and conserves the angular
    momentum that includes ``Σ_b d_b × (L x)_b`` (= ``D h``), because ``ω·h`` is
    bilinear and invariant under a rotation of the whole system."""
    L = np.zeros((nx, nx))
    for b, bf in zip(model.bodies, bodies, strict=True):
        h = np.asarray(b.embedded_momentum, dtype=float)
        if not np.any(h):
            continue
        w = _embedded_weights(h)
        for p in range(3):
            for q in range(3):
                if w[p, q]:
                    L += w[p, q] * bf.dirs[p].L.T @ bf.dirs[q].L
    return None if not np.any(L) else L - L.T


def indefinite_bodies(model: Model) -> list[str]:
    """The bodies whose Euler tensor ``E = ½ tr(I) U - I`` (the directors' mass matrix) is
    indefinite: principal moments that violate the triangle inequality (42's
    Explorer-1 hub). The step then enforces the hidden velocity constraints
    (:class:`~.constraints.HiddenConstraints`)."""
    out = []
    for b in model.bodies:
        I = np.asarray(b.inertia, dtype=float)
        E = _euler_tensor(I)
        if np.min(np.linalg.eigvalsh(E)) < -1e-12 * max(1.0, float(np.trace(I))):
            out.append(b.name)
    return out


def _check_supported(model: Model) -> None:
    for j in model.joints:
        rot = getattr(j, "rotor", None)
        if rot is not None and not rot.reflected_only:
            raise ModelError(
                f"joint {j.name!r}: geared rotors (kanedyn.Rotor) enter the director "
                "formulation as bodies of their own (kd.simulate(..., "
                "method='energy-momentum'), kanedyn.simulation.conserving.geared)"
            )


def planar_reference(model: Model, closures: Sequence[Any] = ()) -> Array | None:
    """``R_N_B`` (nb, 3, 3) at ``q = 0`` when the mechanism qualifies for the planar
    formulation, else None: the model is ``planar``, every tree joint is a weld or a
    hinge (``rot_dof ≤ 1``, not spherical) and every joint (tree or loop) turns about
    N's z axis and slides in N's x-y plane at ``q = 0`` (rotations about z keep both
    true at every ``q``)."""
    if not model.planar or model.nf:
        return None
    if any(j.rot_type == "spherical" for j in model.joints):
        return None
    kin = kinematics_at(model, np.zeros(model.nq), np.zeros(model.n))
    R = np.asarray(kin.R_N_B, dtype=float)
    index = {b.name: i for i, b in enumerate(model.bodies)}
    for j in [*model.joints, *closures]:
        if j.rot_type == "gimbal" and j.rot_dof > 1:
            return None
        R_N_Gi = (np.eye(3) if j.inner is None else R[index[j.inner]]) @ np.asarray(
            j.inner_rotation, dtype=float
        )
        if j.rot_type == "gimbal" and j.rot_dof == 1:
            axis = R_N_Gi[:, int(parse_sequence(j.rot_seq)[0]) - 1]
            if abs(abs(axis[2]) - 1.0) > 1e-9:
                return None
        axes = np.array(parse_sequence(j.trn_seq))[: j.trn_dof] - 1
        if np.any(np.abs(R_N_Gi[2, axes]) > 1e-9):
            return None
    return R


def _body_frames(
    model: Model, nx: int, R0: Array | None
) -> tuple[list[BodyFrame], list[tuple[Affine, ...]], Array]:
    """The :class:`BodyFrame` of every body, the affine directors that carry the
    rigidity constraints (3 in space, the 2 in-plane ones in the plane), and the
    constant mass matrix (nx, nx) ``Σ m posᵀpos + Σ_ab E_ab d_aᵀ d_b`` (``.L`` parts)."""
    eye = np.eye(nx)
    ez = np.array([0.0, 0.0, 1.0])
    k = 3 if R0 is None else 2  # coordinates per vector
    frames, free, M = [], [], np.zeros((nx, nx))
    off = 0
    z0 = np.zeros((model.nb, 3))
    if R0 is not None:  # the out-of-plane height of each mass centre, constant
        z0 = np.asarray(kinematics_at(model, np.zeros(model.nq), np.zeros(model.n)).r, dtype=float)
    for i, b in enumerate(model.bodies):

        def vec(start: int) -> Affine:
            L = np.zeros((3, nx))
            L[:k] = eye[start : start + k]
            return Affine(L, np.zeros(3))

        if R0 is None:
            pos = vec(off)
            f = tuple(vec(off + 3 + 3 * a) for a in range(3))
            dirs = f
        else:
            pos = Affine(vec(off).L, np.array([0.0, 0.0, z0[i][2]]))
            f = (vec(off + 2), vec(off + 4))
            C = R0[i]  # d_a = Σ_b C_ba f_b, f_3 = e_z
            dirs = tuple(combine(f, C[:2, a]) + Affine(np.zeros((3, nx)), C[2, a] * ez)
                         for a in range(3))  # fmt: skip
        cols = np.arange(off, off + k * (k + 1))
        L = np.vstack([pos.L[:, cols], *(d.L[:, cols] for d in dirs)])
        offset = np.concatenate([pos.c, *(d.c for d in dirs)])
        frames.append(BodyFrame(pos, dirs, cols, np.linalg.pinv(L), offset, L))  # type: ignore[arg-type]
        free.append(f)
        I = np.asarray(b.inertia, dtype=float)
        E = _euler_tensor(I)
        M += b.mass * pos.L.T @ pos.L
        for a in range(3):
            for c in range(3):
                M += E[a, c] * dirs[a].L.T @ dirs[c].L
        off += k * (k + 1)
    return frames, free, M


def _build(model: Model, closures: Sequence[Any] = (), planar: bool | None = None) -> Redundant:
    if model.is_symbolic:
        raise ModelError("method='energy-momentum' needs a numeric model")
    _check_supported(model)
    flexible.check_flexible(model)
    indefinite = indefinite_bodies(model)
    if indefinite and model.nf:
        raise ModelError(
            f"body {indefinite[0]!r}: an indefinite directors' mass matrix (principal "
            "moments that violate the triangle inequality) and flexible bodies together are "
            "not held by method='energy-momentum'; use method='rk4'"
        )
    if planar and indefinite:
        raise ModelError(
            f"planar=True: body {indefinite[0]!r} has principal moments that violate the "
            "triangle inequality (an indefinite directors' mass matrix), which only the "
            "spatial formulation handles (planar=None or False)"
        )
    R0 = None if planar is False or indefinite else planar_reference(model, closures)
    if planar and R0 is None:
        raise ModelError(
            "planar=True: the planar formulation needs a model with planar=True whose joints "
            "all turn about N's z axis and slide in N's x-y plane (no spherical joints, "
            "no flexible bodies)"
        )
    lay, pa = model.layout, params_of(model)
    nb = model.nb
    per_body = 12 if R0 is None else 6
    free_root = [
        j.inner is None and j.rot_type == "spherical" and j.trn_dof == 3 for j in model.joints
    ]
    # augmented coordinates: gimbal angles, and slides of every joint but a free root
    aug, na = [], per_body * nb
    for j, free in zip(model.joints, free_root, strict=True):
        n_rot = j.rot_dof if j.rot_type == "gimbal" else 0
        n_trn = 0 if free else j.trn_dof
        aug.append((np.arange(na, na + n_rot), np.arange(na + n_rot, na + n_rot + n_trn)))
        na += n_rot + n_trn
    closure_aug = []  # closing joints (any object with kd.Joint's fields): after the tree's
    for j in closures:
        n_rot = j.rot_dof if j.rot_type == "gimbal" else 0
        closure_aug.append(
            (np.arange(na, na + n_rot), np.arange(na + n_rot, na + n_rot + j.trn_dof))
        )
        na += n_rot + j.trn_dof
    nf_start = na + flexible.flex_size(model)  # the flexible bodies' η and y_pa, then
    nx = nf_start + flexible.node_size(model)  # the node frames' axes, last
    bodies, free_dirs, M = _body_frames(model, nx, R0)
    flex = flexible.flex_bodies(model, bodies, na, nx)
    nodes = flexible.node_frames(model, bodies, flex, nf_start, nx)
    flexible.add_mass(M, flex)
    for k, i in _armatures(model, aug):  # a reflected-only rotor: ½ n²J ȧ² (its joint's)
        M[i, i] += armature(model.joints[k])

    frames: dict[str | None, Any] = {
        None: (Affine(np.zeros((3, nx)), np.zeros(3)),
               tuple(Affine(np.zeros((3, nx)), np.eye(3)[a]) for a in range(3)), np.zeros(3))
    }  # fmt: skip
    inv = Invariants(nx)
    lin: list[int] = []
    Ca: list[Array] = []
    owners: list[str] = []  # the body or joint of each row (planar: to name a bad row)
    E = np.zeros((nb, 3, 3))
    for i, b in enumerate(model.bodies):
        frames[b.name] = (bodies[i].pos, bodies[i].dirs, np.asarray(b.com, dtype=float))
        f = free_dirs[i]
        for a in range(len(f)):  # internal constraints ½(f_a·f_b - δ_ab)
            for c in range(a, len(f)):
                lin.append(inv.dot(f[a], f[c], 0.5, -0.5 * (a == c)))
                Ca.append(np.zeros(nx))
                owners.append(f"body {b.name!r}")
        I = np.asarray(b.inertia, dtype=float)
        E[i] = _euler_tensor(I)
    rows, rot = [], []
    node_of = {(nf.joint, nf.body): nf for nf in nodes}
    for k, (j, (a_rot, a_trn)) in enumerate(
        zip([*model.joints, *closures], [*aug, *closure_aug], strict=True)
    ):
        at = frames
        for side in ("inner", "outer"):  # a joint at a node rides on the node's frame
            name = getattr(j, side)
            nf = None if name is None else node_of.get((k, model.body_index(name)))
            if nf is not None:
                at = {**at, name: (nf.pos, nf.dirs, nf.com)}
        jr = joint_constraints(j, at, inv, a_rot, a_trn)
        rows.append(jr)
        if jr.trn is not None:
            for e in range(3):
                lin.append(int(jr.trn[e]))
                row = np.zeros(nx)
                row[jr.a_trn] = -jr.Delta[e]
                Ca.append(row)
                owners.append(f"joint {j.name!r}")
        if jr.rot is not None:
            rot.append(jr)
    zero = Affine(np.zeros((3, nx)), np.zeros(3))
    for psi, a_k, ratio in gear_rows(model, aug):  # geared rotors (.geared): ψ - n a_k = 0
        lin.append(inv.dot(zero, zero, 0.0))
        row = np.zeros(nx)
        row[psi], row[a_k] = 1.0, -ratio
        Ca.append(row)
        owners.append("a geared rotor's gear")
    flexible.add_constraints(inv, lin, Ca, owners, flex, model)  # y_pa·d_b = δ_ab η_p
    node_rows = flexible.add_node_constraints(inv, lin, Ca, owners, nodes, model, bodies)
    owners += [f"joint {jr.name!r}" for jr in rot for _ in range(3)]
    owners += [nr.name for nr in node_rows for _ in range(3)]
    constraints = ConstraintSet(inv, lin, Ca, rot, node_rows)
    if R0 is not None:
        constraints.keep_rows(_planar_rows(constraints, owners))
    stiffness, damping = np.zeros(nx), np.zeros(nx)
    stiffness_poly, damping_poly = np.zeros((nx, 2)), np.zeros((nx, 2))
    aug_all = []
    for k, (a_rot, a_trn) in enumerate(aug):
        speeds = lay.u_index[k]
        j = model.joints[k]
        idx = np.full(j.ndof, -1, dtype=np.intp)
        if a_rot.size:
            idx[: j.rot_dof] = a_rot
        if a_trn.size:
            idx[j.rot_dof :] = a_trn
        have = idx >= 0
        stiffness[idx[have]] = pa.stiffness[speeds[have]]
        damping[idx[have]] = pa.damping[speeds[have]]
        stiffness_poly[idx[have]] = pa.stiffness_poly[speeds[have]]
        damping_poly[idx[have]] = pa.damping_poly[speeds[have]]
        aug_all.append(idx)
    sph = []
    for k, (j, jr) in enumerate(zip(model.joints, rows, strict=False)):
        if j.rot_type == "spherical":
            speeds = lay.u_index[k][:3]
            if np.any(pa.damping_poly[speeds]):
                raise ModelError(
                    f"joint {j.name!r}: the energy-momentum integrator's spherical dampers "
                    "are linear (damping_poly must be zero on a spherical joint); use RK4"
                )
            kk, cc = pa.stiffness[speeds], pa.damping[speeds]
            kp = pa.stiffness_poly[speeds[0]]  # radial: the same pair on the three DOFs
            if np.any(kk) or np.any(kp) or np.any(cc):
                sph.append((jr, kk, kp, cc))
    spherical = SphericalSprings(sph, nx) if sph else None
    g = np.asarray(pa.gravity, dtype=float)
    f_gravity = sum((pa.mass[i] * bodies[i].pos.L.T @ g for i in range(nb)), np.zeros(nx))
    f_gravity = f_gravity + flexible.gravity(flex, g, nx)
    K_flex, C_flex = flexible.modal_matrices(model, flex, nx) if flex else (None, None)
    hidden = _hidden(model, constraints, rows, M) if indefinite else None
    return Redundant(model, nx, M, E, constraints, tuple(rows[: model.nb]), tuple(aug_all),
                     stiffness, damping, f_gravity, tuple(rows[model.nb :]), tuple(bodies),
                     R0 is not None, spherical, hidden,
                     embedded_momentum_form(model, bodies, nx),
                     stiffness_poly if pa.has_poly else None,
                     damping_poly if pa.has_poly else None,
                     None if model.central_gravity is None
                     else CentralField(model, bodies, nx), flex, K_flex, C_flex,
                     nodes)  # fmt: skip


def armature(joint: Any) -> float:
    """``n² J`` of a joint's reflected-only rotor (:class:`kanedyn.Rotor`), else 0."""
    rot = getattr(joint, "rotor", None)
    return 0.0 if rot is None or not rot.reflected_only else rot.ratio**2 * rot.inertia


def _armatures(model: Model, aug: Sequence[Any]) -> list[tuple[int, int]]:
    """(joint, augmented coordinate) of each reflected-only rotor: its inertia ``n² J``
    is the mass of its joint's coordinate (massless otherwise), so the kinetic energy
    ``½ vᵀ M v`` holds its ``½ n² J σ²`` and ``M`` stays constant."""
    out = []
    for k, j in enumerate(model.joints):
        if armature(j):
            a_rot, a_trn = aug[k]
            out.append((k, int(a_rot[0] if a_rot.size else a_trn[0])))
    return out


def _hidden(
    model: Model, cons: ConstraintSet, rows: list[JointRows], M: Array
) -> HiddenConstraints:
    """The hidden velocity constraints (:class:`~.constraints.HiddenConstraints`) with the
    inverse of the mass matrix on the body coordinates (12 per body); a
    :class:`~kanedyn.ModelError` names a body whose mass matrix is singular (zero mass, or
    an Euler tensor with a zero eigenvalue)."""
    inverse = np.zeros_like(M)
    for i, b in enumerate(model.bodies):
        cols = np.arange(12 * i, 12 * i + 12)
        block = M[np.ix_(cols, cols)]
        if np.linalg.cond(block) > 1e12:
            raise ModelError(
                f"body {b.name!r}: the step of a model with an indefinite directors' mass "
                "matrix needs every body's mass and Euler tensor E = ½ tr(I) U - I regular; "
                f"this body's are singular (mass {b.mass:g}, E eigenvalues "
                f"{np.linalg.eigvalsh(M[np.ix_(cols[3:], cols[3:])])[::3]})"
            )
        inverse[np.ix_(cols, cols)] = np.linalg.inv(block)
    return HiddenConstraints(cons.inv, hidden_rows(cons, rows), inverse)


def _planar_rows(cons: ConstraintSet, owners: list[str]) -> NDArray[np.intp]:
    """The rows of a planar formulation that are not identically zero.

    The rows are polynomials in ``x``; a row whose gradient vanishes at three random
    points is constant: dropped when that constant is zero (an out-of-plane row), a
    :class:`~kanedyn.ModelError` naming the joint otherwise (its two sides lie in
    different planes)."""
    rng = np.random.default_rng(0)
    pts = rng.standard_normal((3, cons.nx))
    grads = np.array([np.abs(cons.jacobian(p)) for p in pts]).max(axis=(0, 2))
    vals = cons(pts[0])
    constant = grads < 1e-12
    for r in np.nonzero(constant & (np.abs(vals) > 1e-9))[0]:
        raise ModelError(
            f"{owners[r]}: planar formulation, but the joint's two frames are "
            f"{abs(vals[r]):.3g} apart out of the x-y plane"
        )
    return np.nonzero(~constant)[0]


def redundant(
    model: Model, closures: Sequence[Any] | None = None, planar: bool | None = None
) -> Redundant:
    """The director formulation of ``model`` (built once, stored on the model).

    ``closures``: joints that close kinematic loops, any objects with
    :class:`kanedyn.Joint`'s fields (``inner`` None for the ground); each adds its
    constraint rows and augmented coordinates like a tree joint. Default: the model's
    own loop joints (:class:`kanedyn.Loop`). ``planar``: None (default) uses the planar
    formulation (2 + 2×2 coordinates per body) when the mechanism qualifies
    (:func:`planar_reference`), True requires it (a ModelError otherwise), False always
    uses the spatial one (3 + 3×3)."""
    closures = tuple(model.loops) if closures is None else tuple(closures)
    key = "conserving.redundant" + "".join(f"|{j.name}" for j in closures) + f"|planar={planar}"
    return model.derived(key, lambda m: _build(m, tuple(closures), planar))  # type: ignore[no-any-return]


def to_redundant(red: Redundant, state: State) -> tuple[Array, Array]:
    """``(x, v)`` of a joint-coordinate state: ``φ = r``, ``d_a = R_N_B e_a``,
    ``φ̇ = v``, ``ḋ_a = ω × d_a``, and the augmented coordinates and rates from
    ``q`` and ``u``; a flexible body's ``η``, ``ξ`` and modal vectors ``y_pa = η_p d_a``,
    ``ẏ_pa = ξ_p d_a + η_p ḋ_a`` (:func:`.flexible.lift`) from ``q = [q_joints | η]``,
    ``u = [u | s | ξ]``."""
    model = red.model
    q_all, u_all = np.asarray(state.q, float), np.asarray(state.u, float)
    eta, xi = q_all[model.nq :], u_all[model.n :]
    if xi.size < eta.size:
        xi = np.zeros(eta.size)
    if red.nodes:  # the outboard bodies ride on the nodes' elastic motion
        kin = kinematics_at(model, q_all[: model.nq], u_all[: model.n], eta=eta, xi=xi)
    else:
        kin = kinematics_at(model, q_all[: model.nq], u_all[: model.n])
    x, v = np.zeros(red.nx), np.zeros(red.nx)
    for i, bf in enumerate(red.bodies):
        R = np.asarray(kin.R_N_B[i], dtype=float)
        w = np.asarray(kin.omega[i], dtype=float)
        xs, miss = bf.coordinates(np.concatenate((kin.r[i], R.T.ravel())))
        vs, miss_v = bf.coordinates(np.concatenate((kin.v[i], cross(w, R.T).ravel())), True)
        if max(miss, miss_v) > 1e-9:
            raise ModelError(
                f"body {model.bodies[i].name!r} leaves N's x-y plane in this state "
                f"(by {max(miss, miss_v):.3g}); use planar=False"
            )
        x[bf.cols], v[bf.cols] = xs, vs
    for k, idx in enumerate(red.aug):
        have = idx >= 0
        j = model.joints[k]
        qk, uk = model.layout.q_index[k], model.layout.u_index[k]
        # gimbal angles and slides: q and u entries in DOF order (rotational first)
        qpos = np.concatenate((np.arange(j.rot_dof), j.n_rot_coordinates + np.arange(j.trn_dof)))
        x[idx[have]] = q_all[qk[qpos[have]]]
        v[idx[have]] = u_all[uk[have]]
    for fb in red.flex:
        sl = fb.modal
        flexible.lift(fb, x, v, eta[sl], xi[sl], red.D(x, fb.body), red.D_rate(v, fb.body))
    for nf in red.nodes:
        sl = nf.fb.modal
        flexible.lift_node(nf, model, x, v, eta[sl], xi[sl], red.D(x, nf.body),
                           red.D_rate(v, nf.body))  # fmt: skip
    if red.closures:
        _closure_coordinates(red, x, v)
    return x, v


def _closure_coordinates(red: Redundant, x: Array, v: Array) -> None:
    """Fill the augmented coordinates of the loop-closing joints (in place): the angles
    of the measured ``Π`` (``dcm_to_euler``) and slides ``Δᵀ R_N_Giᵀ (o_o - o_i)`` as a
    start, refined by Gauss-Newton on the constraints; their rates from the velocity
    constraints ``G v = 0`` (least squares)."""
    cols = np.concatenate([np.concatenate((j.a_rot, j.a_trn)) for j in red.closures])
    for j in red.closures:
        Gi = np.array([g(x) for g in j.Gi]).T
        if j.a_rot.size:
            Go = np.array([g(x) for g in j.Go]).T
            seq = "".join(str(int(np.argmax(e)) + 1) for e in j.axes)
            x[j.a_rot] = dcm_to_euler(seq, _orthonormal(Gi.T @ Go))[: j.a_rot.size]
        if j.a_trn.size:
            x[j.a_trn] = j.Delta.T @ Gi.T @ (j.o_o(x) - j.o_i(x))
    for _ in range(10):
        c = red.constraints(x)
        G = red.constraints.jacobian(x)[:, cols]
        x[cols] -= np.linalg.lstsq(G, c, rcond=None)[0]
    G = red.constraints.jacobian(x)
    v[cols] = 0.0
    v[cols] = -np.linalg.lstsq(G[:, cols], G @ v, rcond=None)[0]


def joint_positions(red: Redundant, x: Array, q_prev: Array | None = None) -> Array:
    """The joint coordinates ``q`` of director coordinates ``x``.

    Angles and slides are the augmented coordinates; a spherical joint's quaternion is
    that of the measured ``Π = R_Gi_Go`` (its sign continuous with ``q_prev``), a free
    root's slides ``Δᵀ R_N_Giᵀ (o_o - o_i)``; the modal amplitudes ``η`` of flexible
    bodies follow (``q = [q_joints | η]``)."""
    model = red.model
    lay = model.layout
    q = np.zeros(model.nq_total)
    for fb in red.flex:
        q[model.nq + fb.modal.start : model.nq + fb.modal.stop] = x[fb.eta]
    for k, (j, jr) in enumerate(zip(model.joints, red.joints, strict=True)):
        qk = lay.q_index[k]
        idx = red.aug[k]
        if j.rot_type == "spherical":
            Gi = np.array([g(x) for g in jr.Gi]).T
            Go = np.array([g(x) for g in jr.Go]).T
            quat = dcm_to_quat(_orthonormal(Gi.T @ Go))
            if q_prev is not None and quat @ q_prev[qk[:4]] < 0.0:
                quat = -quat
            q[qk[:4]] = quat
        else:
            q[qk[: j.rot_dof]] = x[idx[: j.rot_dof]]
        if j.trn_dof:
            nr = j.n_rot_coordinates
            if np.all(idx[j.rot_dof :] >= 0):
                q[qk[nr:]] = x[idx[j.rot_dof :]]
            else:
                Gi = np.array([g(x) for g in jr.Gi]).T
                q[qk[nr:]] = jr.Delta.T @ Gi.T @ (jr.o_o(x) - jr.o_i(x))
    return q


def to_joint_coordinates(
    red: Redundant, x: Array, v: Array, q_prev: Array | None = None
) -> tuple[Array, Array]:
    """``(q, u)`` of a director state: ``q`` by :func:`joint_positions`, and the speeds
    that carry the same generalized momenta as ``v`` (with flexible bodies,
    ``u = [u | s | ξ]`` and ``M(q) u = Jᵀ M v`` over all of them,
    :func:`speed_jacobian`):

    .. math:: M(q)\\, u = J^T \\mathbf{M}\\, v = \\textstyle\\sum_i V_i^T m_i \\dot\\varphi_i
              + \\Omega_i^T \\sum_a d_a \\times (E \\dot d)_a

    so the total linear and angular momenta of ``(q, u)`` are those of ``(x, v)``. With
    loop-closing joints, ``u`` is the same projection restricted to the speeds that keep
    the loops closed (:func:`_loop_speeds`).
    """
    model = red.model
    mass = params_of(model).mass
    q = joint_positions(red, x, q_prev)
    state = State(q[: model.nq], np.zeros(model.n))
    if red.flex:  # Kane's mass matrix with the modal terms (kanedyn.dynamics.flex)
        _, u, _, _ = _flexible_speeds(red, x, v, q)
        return q, u
    par = partials(model, state)
    p = np.zeros(model.n)
    for i in range(model.nb):
        D, Dd = red.D(x, i), red.D_rate(v, i)
        h = cross(D.T, (Dd @ red.E[i]).T).sum(axis=0)
        p += par.V[i].T @ (mass[i] * (red.bodies[i].pos.L @ v)) + par.Omega[i].T @ h
    for k, j in enumerate(model.joints):  # a reflected-only rotor's n²J σ
        if armature(j):
            p[model.layout.u_index[k][0]] += armature(j) * v[red.aug[k][0]]
    M = mass_matrix(model, state)
    if red.closures:
        return q, _loop_speeds(red, x, par, M, p)
    return q, np.asarray(np.linalg.solve(M, p), dtype=np.float64)


def _loop_speeds(red: Redundant, x: Array, par: Any, M: Array, p: Array) -> Array:
    """The speeds ``u`` closest to the director velocities in the kinetic metric that
    satisfy the loops' velocity constraints:

    .. math:: \\begin{bmatrix} M & 0 & C_u^T \\\\ 0 & 0 & C_a^T \\\\ C_u & C_a & 0
              \\end{bmatrix} \\begin{bmatrix} u \\\\ \\dot a_c \\\\ \\mu \\end{bmatrix} =
              \\begin{bmatrix} J^T \\mathbf M v \\\\ 0 \\\\ 0 \\end{bmatrix}, \\qquad
              [C_u \\; C_a] = G(x)\\,[J \\; E_c]

    with ``J = ∂x/∂u`` (``φ̇ = V u``, ``ḋ_a = (Ω u) × d_a``, the tree's augmented rates
    ``= u``) and ``E_c`` the columns of the closures' augmented coordinates (massless,
    fixed by the constraints). Least squares: the tree's own rows are satisfied by
    every ``u`` and make the system rank-deficient."""
    n = red.model.n
    J = speed_jacobian(red, x, par)
    cols = np.concatenate([np.concatenate((j.a_rot, j.a_trn)) for j in red.closures])
    G = red.constraints.jacobian(x)
    C = np.hstack((G @ J, G[:, cols]))
    nw = n + cols.size
    A = np.zeros((nw + C.shape[0], nw + C.shape[0]))
    A[:n, :n] = M
    A[:nw, nw:] = C.T
    A[nw:, :nw] = C
    rhs = np.concatenate((p, np.zeros(A.shape[0] - n)))
    w = scipy.linalg.lstsq(A, rhs, check_finite=False, lapack_driver="gelsy")[0]
    return np.asarray(w[:n], dtype=np.float64)


def _flexible_speeds(
    red: Redundant, x: Array, v: Array, q: Array | None = None
) -> tuple[Array, Array, Array, Array]:
    """``J`` (:func:`speed_jacobian`), the speeds ``u = M(q)⁻¹ Jᵀ𝐌 v`` of a model with
    flexible bodies, Kane's ``M(q)`` and ``q`` (:func:`joint_positions` unless given)."""
    model = red.model
    q = joint_positions(red, x) if q is None else q
    if red.nodes:
        par = node_partials(red, q)
    else:
        par = partials(model, State(q[: model.nq], np.zeros(model.n)))
    J = speed_jacobian(red, x, par)
    M = mass_matrix(model, State(q, np.zeros(model.n_total)))
    u = np.asarray(np.linalg.solve(M, J.T @ (red.M @ v)), dtype=np.float64)
    return J, u, M, q


def _rigid_motions(red: Redundant, x: Array) -> Array:
    """``T`` (nx, 6): the rates of the whole system's translations along N's axes and
    rotations about them through N's origin (``ẋ_I = e_b × x_I`` for every vector),
    so that ``Tᵀ𝐌v`` is its ``P`` and ``H`` about the origin (spatial formulation)."""
    T = np.zeros((red.nx, 6))
    vectors = [b.pos for b in red.bodies] + [d for b in red.bodies for d in b.dirs]
    vectors += [y for fb in red.flex for y in fb.vectors[4:]]
    vectors += [n for nf in red.nodes for n in nf.dirs]
    eye = np.eye(3)
    for b in red.bodies:
        T[:, :3] += b.pos.L.T
    for vec in vectors:
        T[:, 3:] += vec.L.T @ cross(eye, vec(x)).T
    return T


def tangent_rates(red: Redundant, x: Array, v: Array) -> Array:
    """The nodal rates ``v`` of a stiffened model moved onto the tangent space of the
    constraints at ``x``, with the same energy, ``P`` and ``H``.

    The foreshortening vectors make the mass matrix indefinite (:mod:`.flexible`), so
    the part ``e = v - J u`` of the nodal rates off the tangent space (``u`` the speeds
    of :func:`to_joint_coordinates`, ``Jᵀ𝐌e = 0``) carries the energy
    ``½ eᵀ𝐌e = ½ vᵀ𝐌v - ½ uᵀM(q)u`` of either sign, which the joint-space state does
    not have. The rates become ``J u⁺`` with

    .. math:: u^+ = u + \\alpha w, \\quad w = u - M^{-1}A^T(AM^{-1}A^T)^{+}Au, \\quad
              (1 + \\alpha)^2 = 1 + \\frac{e^T \\mathbf M e}{w^T M w}

    (``A u`` the total ``P`` and ``H`` of ``J u``, which ``u`` keeps; ``w`` the motion
    relative to them, M-orthogonal to the rigid motions, whose kinetic energy takes
    ``½ eᵀ𝐌e``): ``P``, ``H`` and the energy are those of ``v``, and the readout holds
    the scheme's energy to round-off. ``e`` is ``O(h²)``, so the step stays second
    order. When ``w`` cannot give up that much energy, ``v`` is returned unchanged."""
    J, u, M, _ = _flexible_speeds(red, x, v)
    A = _rigid_motions(red, x).T @ red.M @ J  # P and H (about N's origin) of J u
    MiAt = np.linalg.solve(M, A.T)
    w = u - MiAt @ np.linalg.lstsq(A @ MiAt, A @ u, rcond=None)[0]
    ww = float(w @ M @ w)
    gap = float(v @ red.M @ v - u @ M @ u)  # eᵀ𝐌e
    if ww <= 0.0 or 1.0 + gap / ww < 0.0:
        return v
    alpha = np.sqrt(1.0 + gap / ww) - 1.0
    return np.asarray(J @ (u + alpha * w), dtype=np.float64)


def node_partials(red: Redundant, q: Array) -> Any:
    """The partials at ``q = [q_joints | η]`` of a model with joints at nodes (their
    ``Omega_xi``, ``V_xi``: the bodies that ride on a node move with its ``ξ``)."""
    model = red.model
    kin = kinematics_at(model, q[: model.nq], np.zeros(model.n), eta=q[model.nq :],
                        xi=np.zeros(model.nf))  # fmt: skip
    return partials_at(model, kin)


def speed_jacobian(red: Redundant, x: Array, par: Any) -> Array:
    """``J = ∂ẋ/∂u`` (nx, n) of a tree at ``x`` (with ``par = kd.partials`` there):
    ``φ̇ = V u``, ``ḋ_a = (Ω u) × d_a``, and the augmented rates are their speeds. With
    flexible bodies, ``J = ∂ẋ/∂[u | s | ξ]`` (nx, n + nf), the modal rows of
    :func:`.flexible.jacobian`."""
    model = red.model
    J = np.zeros((red.nx, model.n_total))
    nodal = getattr(par, "V_xi", None) is not None  # bodies riding on nodes move with ξ
    for i, bf in enumerate(red.bodies):
        D = red.D(x, i)
        V, W = par.V[i], par.Omega[i]
        if nodal:
            V, W = np.hstack((V, par.V_xi[i])), np.hstack((W, par.Omega_xi[i]))
        rates = [V] + [-cross(D[:, a][None, :], W.T).T for a in range(3)]
        J[bf.cols, : V.shape[1]] = bf.solve(np.vstack(rates), True)
    for k, idx in enumerate(red.aug):
        have = idx >= 0
        J[idx[have], model.layout.u_index[k][have]] = 1.0
    for fb in red.flex:
        flexible.jacobian(fb, x, J, model.n)
    for nf in red.nodes:
        flexible.node_jacobian(nf, model, x, J, model.n)
    return J


def _orthonormal(A: Array) -> Array:
    """The nearest rotation to ``A`` (polar factor), for a readout at round-off level."""
    U, _, Vt = np.linalg.svd(A)
    return U @ Vt  # type: ignore[no-any-return]


def joint_like_fields() -> Sequence[str]:
    """The fields the constraint builder reads from a joint (kd.Joint, or a loop joint)."""
    return ("name", "inner", "outer", "rot_type", "rot_dof", "rot_seq", "trn_dof", "trn_seq",
            "inner_point", "outer_point", "inner_rotation", "outer_rotation")  # fmt: skip
