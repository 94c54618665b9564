"""An independent oracle: any numeric kanedyn Model rebuilt in sympy.physics.mechanics.

The model is rebuilt with sympy's own frames (``orient_axis`` chains for gimbals,
``orient_quaternion`` for spherical joints), points (``set_pos``/``v2pt_theory``-free
differentiation) and ``KanesMethod``. Nothing of kanedyn's kinematics is reused: only
the model's numbers (masses, inertias, points, rotations, axes, stiffness) are read.

The speeds are kanedyn's: gimbal angle rates, spherical relative angular velocity in Go
components, slide rates; ordered ``[all rotational | all translational]``.
"""

from __future__ import annotations

import numpy as np
import sympy as sp
from sympy.physics import mechanics as me

import kanedyn as kd


def _axis(frame: me.ReferenceFrame, digit: int) -> me.Vector:
    return (frame.x, frame.y, frame.z)[digit - 1]


def build(model: kd.Model, applied=()):
    """Return ``(rhs, q_syms, u_syms)``: ``rhs(q, u) -> (M, forcing)`` from KanesMethod.

    Springs and dampers are included for gimbal and slide DOFs, as generalized forces
    realised by equal and opposite torque (force) pairs; spherical springs are not.
    ``applied`` holds numeric ``kd.Force`` (N or body components, at a point),
    ``kd.Torque`` and ``kd.JointLoad`` (1-DOF gimbals and slides, as action-reaction
    pairs) records.
    """
    t = me.dynamicsymbols._t
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    frames: dict[str | None, me.ReferenceFrame] = {None: N}
    origins: dict[str | None, me.Point] = {None: O}
    q_rot, q_trn, u_rot, u_trn = [], [], [], []
    kd_eqs = []
    bodies, loads = [], []
    joint_axes: dict = {}
    for k, j in enumerate(model.joints):
        Bi, Pi = frames[j.inner], origins[j.inner]
        Gi = me.ReferenceFrame(f"Gi{k}")
        Gi.orient_explicit(Bi, sp.Matrix(j.inner_rotation))
        # slides along Gi axes
        pt_Gi = Pi.locatenew(
            f"Gi{k}o",
            sum(
                (float(c) * v for c, v in zip(j.inner_point, (Bi.x, Bi.y, Bi.z), strict=True)),
                me.Vector(0),
            ),
        )
        d = me.dynamicsymbols(f"d{k}_0:{j.trn_dof}") if j.trn_dof else []
        s = me.dynamicsymbols(f"s{k}_0:{j.trn_dof}") if j.trn_dof else []
        trn_axes = [int(c) for c in j.trn_seq[: j.trn_dof]]
        pt_Go = pt_Gi.locatenew(
            f"Go{k}o",
            sum((dc * _axis(Gi, a) for dc, a in zip(d, trn_axes, strict=True)), me.Vector(0)),
        )
        kd_eqs += [dc.diff(t) - sc for dc, sc in zip(d, s, strict=True)]
        # rotation
        if j.rot_type == "spherical":
            qq = me.dynamicsymbols(f"e{k}_0:4")  # scalar last, as kanedyn
            w = me.dynamicsymbols(f"w{k}_0:3")
            Go = me.ReferenceFrame(f"Go{k}")
            Go.orient_quaternion(Gi, (qq[3], qq[0], qq[1], qq[2]))
            Go.set_ang_vel(Gi, w[0] * Go.x + w[1] * Go.y + w[2] * Go.z)
            # q_dot = 1/2 q ⊗ [w, 0]
            x, y, z, s0 = qq
            rates = [
                0.5 * (s0 * w[0] - (w[1] * z - w[2] * y)),
                0.5 * (s0 * w[1] - (w[2] * x - w[0] * z)),
                0.5 * (s0 * w[2] - (w[0] * y - w[1] * x)),
                -0.5 * (w[0] * x + w[1] * y + w[2] * z),
            ]
            kd_eqs += [qc.diff(t) - r for qc, r in zip(qq, rates, strict=True)]
            q_rot += list(qq)
            u_rot += list(w)
            rot_gen = list(w)
        else:
            th = me.dynamicsymbols(f"th{k}_0:{j.rot_dof}") if j.rot_dof else []
            om = me.dynamicsymbols(f"om{k}_0:{j.rot_dof}") if j.rot_dof else []
            F = Gi
            for m, (angle, digit) in enumerate(zip(th, (int(c) for c in j.rot_seq), strict=False)):
                G = me.ReferenceFrame(f"F{k}_{m}")
                G.orient_axis(F, _axis(F, digit), angle)
                F = G
            Go = F
            kd_eqs += [a.diff(t) - b for a, b in zip(th, om, strict=True)]
            q_rot += list(th)
            u_rot += list(om)
            rot_gen = list(om)
        Bo = me.ReferenceFrame(f"B{k}")
        Bo.orient_explicit(Go, sp.Matrix(j.outer_rotation))
        Po = pt_Go.locatenew(
            f"B{k}o",
            -sum(
                (float(c) * v for c, v in zip(j.outer_point, (Bo.x, Bo.y, Bo.z), strict=True)),
                me.Vector(0),
            ),
        )
        frames[j.outer], origins[j.outer] = Bo, Po
        body = model.body(j.outer)
        cm = Po.locatenew(
            f"B{k}cm",
            sum(
                (float(c) * v for c, v in zip(body.com, (Bo.x, Bo.y, Bo.z), strict=True)),
                me.Vector(0),
            ),
        )
        I = me.inertia(
            Bo,
            *[
                float(body.inertia[a, b])
                for a, b in ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2))
            ],
        )
        bodies.append(me.RigidBody(body.name, cm, Bo, float(body.mass), (I, cm)))
        g = model.gravity
        loads.append(
            (cm, float(body.mass) * (float(g[0]) * N.x + float(g[1]) * N.y + float(g[2]) * N.z))
        )
        u_trn += list(s)
        q_trn += list(d)
        joint_axes[j.name] = (
            [(Bo, Bi, _axis(Gi, int(j.rot_seq[0])))] if j.rot_dof == 1 else []
        ) + [(pt_Go, pt_Gi, _axis(Gi, a)) for a in trn_axes]
        # springs and dampers on gimbal angles (1-DOF only) and slides, as action-reaction pairs
        stiff, damp = j.stiffness, j.damping
        if j.rot_type == "gimbal" and j.rot_dof == 1 and (stiff[0] or damp[0]):
            ax = _axis(Gi, int(j.rot_seq[0]))
            tau = -float(stiff[0]) * q_rot[-1] - float(damp[0]) * rot_gen[0]
            loads += [(Bo, tau * ax), (Bi, -tau * ax)]
        for c in range(j.trn_dof):
            kk, cc = float(stiff[j.rot_dof + c]), float(damp[j.rot_dof + c])
            if kk or cc:
                f = (-kk * d[c] - cc * s[c]) * _axis(Gi, trn_axes[c])
                loads += [(pt_Go, f), (pt_Gi, -f)]
    for rec in applied:
        loads += _applied(model, rec, frames, origins, joint_axes, N)
    for pt in [p for b in bodies for p in (b.masscenter,)]:
        pt.set_vel(N, pt.pos_from(O).dt(N))
    for pt in _load_points(loads):
        pt.set_vel(N, pt.pos_from(O).dt(N))
    q = q_rot + q_trn
    u = u_rot + u_trn
    kane = me.KanesMethod(N, q_ind=q, u_ind=u, kd_eqs=kd_eqs)
    kane.kanes_equations(bodies, loads)
    Mf = sp.lambdify((q, u), kane.mass_matrix, "numpy", cse=True)
    ff = sp.lambdify((q, u), kane.forcing, "numpy", cse=True)
    return (
        (lambda qv, uv: (np.asarray(Mf(qv, uv), float), np.asarray(ff(qv, uv), float).ravel())),
        q,
        u,
    )


def _vector(frame: me.ReferenceFrame, values) -> me.Vector:
    return sum(
        (float(c) * v for c, v in zip(values, (frame.x, frame.y, frame.z), strict=True)),
        me.Vector(0),
    )


def _applied(model, rec, frames, origins, joint_axes, N):
    """One numeric load record as sympy loads."""
    if isinstance(rec, kd.JointLoad):
        out = []
        for value, (on, against, axis) in zip(rec.values, joint_axes[rec.joint], strict=True):
            out += [(on, float(value) * axis), (against, -float(value) * axis)]
        return out
    B = frames[rec.body]
    if isinstance(rec, kd.Torque):
        return [(B, _vector(N if rec.frame == "N" else B, rec.torque))]
    body = model.body(rec.body)
    point = body.com if rec.point is None else rec.point
    P = origins[rec.body].locatenew(f"P_{rec.body}_{id(rec)}", _vector(B, point))
    return [(P, _vector(N if rec.frame == "N" else B, rec.force))]


def _load_points(loads):
    return [p for p, _ in loads if isinstance(p, me.Point)]


def random_state(model: kd.Model, rng: np.random.Generator) -> kd.State:
    """Random coordinates (unit quaternions) and speeds."""
    q = rng.uniform(-1.0, 1.0, model.nq)
    lay = model.layout
    if lay.quat_q.size:
        quats = rng.normal(size=lay.quat_q.shape)
        q[lay.quat_q] = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    return kd.State(q, rng.uniform(-1.0, 1.0, model.n))


def particle_modes(r, m, Psi):
    """Exact modal integrals of particles at r (k, 3) with masses m and shapes Psi (k, 3, n)."""
    M = np.einsum("k,kip,kiq->pq", m, Psi, Psi)
    P = np.einsum("k,kip->ip", m, Psi)
    H = np.einsum("k,kip->ip", m, np.cross(r[:, :, None], Psi, axisa=1, axisb=1, axisc=1))
    L = np.einsum("k,kip,kj->ijp", m, Psi, r)
    N = np.einsum("k,kip,kjq->ijpq", m, Psi, Psi)
    return M, P, H, L, N


def modal_particle_hub(rng: np.random.Generator, n_modes: int = 2, n_particles: int = 4,
                       hub_dof: int = 3):  # fmt: skip
    """A hub on a ``hub_dof`` gimbal (sequence 123) with a flexible body welded to it
    (offset and turned), whose mass is ``n_particles`` particles displaced by random mode
    shapes ``ρ_k = r_k + Ψ_k η``: the kanedyn model (``kd.Modes`` from the particles'
    exact modal integrals), and the same system built from the particles in
    sympy.physics.mechanics (``KanesMethod``: its own frames, positions by
    differentiation, gravity on every particle). Returns ``(model, oracle)`` with
    ``oracle(q, u) -> (M, forcing)`` over ``[q_hub | η]``, ``[u_hub | ξ]``; the modal
    stiffness and damping ``-K η - C ξ`` are added to the forcing's modal rows (the
    generalized forces of the modal coordinates, by definition)."""
    nk, nm = n_particles, n_modes
    r = rng.uniform(-1, 1, (nk, 3))
    m = rng.uniform(0.5, 1.5, nk)
    Psi = rng.uniform(-1, 1, (nk, 3, nm))
    Mpsi, P, H, L, N = particle_modes(r, m, Psi)
    K = np.diag(np.linspace(30.0, 50.0, nm))
    C = 0.1 * np.eye(nm) + 0.05
    mass = m.sum()
    com = m @ r / mass
    d = r - com
    inertia = np.einsum("k,kj,kj->", m, d, d) * np.eye(3) - np.einsum("k,ki,kj->ij", m, d, d)
    modes = kd.Modes(Mpsi, K, C, P=P, H=H, L=L, N=N)
    flexb = kd.Body("flex", mass, inertia, com=com, modes=modes)
    hub = kd.Body("hub", 3.0, kd.inertia_tensor(1.0, 1.5, 2.0))
    offset = np.array([0.4, -0.2, 0.3])
    Rw = kd.euler_to_dcm("123", (0.3, -0.4, 0.5))
    g = np.array([0.5, -9.81, 1.0])
    model = kd.Model(
        [hub, flexb],
        [kd.Joint("root", None, "hub", rot_type="gimbal", rot_dof=hub_dof, rot_seq="123"),
         kd.Joint.weld("w", "hub", "flex", inner_point=offset, inner_rotation=Rw)],
        gravity=g,
    )  # fmt: skip

    q = list(me.dynamicsymbols(f"q1:{hub_dof + 1}"))
    e = list(me.dynamicsymbols(f"e1:{nm + 1}"))
    u = list(me.dynamicsymbols(f"u1:{hub_dof + 1}"))
    x = list(me.dynamicsymbols(f"x1:{nm + 1}"))
    Nf = me.ReferenceFrame("N")
    A = me.ReferenceFrame("A")
    A.orient_body_fixed(Nf, [*q, *[0] * (3 - hub_dof)], "123")
    B = me.ReferenceFrame("B")
    B.orient_explicit(A, sp.Matrix(Rw))  # A.dcm(B) = R_A_B = the weld's inner_rotation
    O = me.Point("O")
    O.set_vel(Nf, 0)
    Ah = me.RigidBody("hub", O, A, 3.0, (me.inertia(A, 1.0, 1.5, 2.0), O))
    Bo = O.locatenew("Bo", sum(float(offset[i]) * [A.x, A.y, A.z][i] for i in range(3)))
    gN = sum(float(g[i]) * [Nf.x, Nf.y, Nf.z][i] for i in range(3))
    loads = [(Ah.masscenter, 3.0 * gN)]
    bodies = [Ah]
    Bv = [B.x, B.y, B.z]
    for k in range(nk):
        pos = sum((float(r[k, i]) + sum(float(Psi[k, i, p]) * e[p] for p in range(nm))) * Bv[i]
                  for i in range(3))  # fmt: skip
        pk = Bo.locatenew(f"p{k}", pos)
        pk.set_vel(Nf, pk.pos_from(O).dt(Nf))
        bodies.append(me.Particle(f"m{k}", pk, float(m[k])))
        loads.append((pk, float(m[k]) * gN))
    kdes = [a.diff() - b for a, b in zip([*q, *e], [*u, *x], strict=True)]
    km = me.KanesMethod(Nf, q_ind=[*q, *e], u_ind=[*u, *x], kd_eqs=kdes)
    km.kanes_equations(bodies, loads)
    syms = [*q, *e, *u, *x]
    Mf = sp.lambdify(syms, km.mass_matrix, "numpy")
    ff = sp.lambdify(syms, km.forcing, "numpy")

    def oracle(qv, uv):
        vals = [*np.asarray(qv, dtype=float), *np.asarray(uv, dtype=float)]
        Ms = np.array(Mf(*vals), dtype=float)
        fs = np.array(ff(*vals), dtype=float).ravel()
        fs[hub_dof:] -= K @ np.asarray(qv)[hub_dof:] + C @ np.asarray(uv)[hub_dof:]
        return Ms, fs

    return model, oracle
