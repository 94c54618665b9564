"""Derivation cost of kanedyn.symbolic.kane against sympy.physics.mechanics.KanesMethod.

For planar n-link pendulums (``kd.examples.chain(n)``, n = 2, 5, 10, 20, 30) and a 3D
chain of 4 spherical joints, this prints the time to derive the equations of motion and
the operation count (``sympy.count_ops``) of the common-subexpression-eliminated mass
matrix and forcing, for kanedyn and for sympy's KanesMethod on the same pendulum, and the
ratios. KanesMethod is skipped above n = 10: its derivation time grows far faster than
kanedyn's (about 20 CPU seconds at n = 10 against 0.2 s).

Times are CPU seconds of this process (``time.process_time``), which are less sensitive
to other load on the machine than wall-clock seconds; wall-clock seconds are printed too.
kanedyn's count is that of its named intermediates plus the mass-matrix upper triangle
and forcing written in them (:meth:`CompactEquations.count_ops`), which is its
common-subexpression form; KanesMethod's is that of ``sympy.cse`` of its mass matrix
(upper triangle) and forcing.

Run: ``python benchmarks/bench_symbolic.py [--max-kanes N] [--quick]``.
Targets: n = 10 planar at least 50x faster than KanesMethod, n = 30 under 10 s, 4
spherical joints under 1 s, operation count growing polynomially (about n^3).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import sympy as sm
from sympy.physics import mechanics as me

import kanedyn as kd
from kanedyn.symbolic.kane import kane


def spherical_chain(n: int) -> kd.Model:
    """n uniform rods (1 m, 1 kg) on spherical joints, hanging along -z."""
    bodies, joints, inner = [], [], None
    for i in range(n):
        bodies.append(
            kd.Body(f"link{i}", mass=1.0, inertia=kd.inertia_tensor(0.01, 1 / 12, 1 / 12),
                    com=(0.5, 0.0, 0.0))
        )  # fmt: skip
        point = (0.0, 0.0, 0.0) if inner is None else (1.0, 0.0, 0.0)
        joints.append(kd.Joint.spherical(f"ball{i}", inner, f"link{i}", inner_point=point))
        inner = f"link{i}"
    return kd.Model(bodies, joints, gravity=(0.0, 0.0, -9.81))


def kanes_method_pendulum(n: int):
    """The same planar chain of uniform rods, built directly in sympy.physics.mechanics.

    Returns ``(mass_matrix, forcing)`` of KanesMethod; the rods have kd.examples.chain's
    mass properties (mass 1, length 1, radius length/20), hinges about N.z.
    """
    q = me.dynamicsymbols(f"q:{n}")
    u = me.dynamicsymbols(f"u:{n}")
    N = me.ReferenceFrame("N")
    O = me.Point("O")
    O.set_vel(N, 0)
    radius = 1.0 / 20
    I_axial, I_trans = 0.5 * radius**2, (3 * radius**2 + 1.0) / 12
    bodies, loads, kd_eqs = [], [], []
    frame, joint = N, O
    for i in range(n):
        B = me.ReferenceFrame(f"B{i}")
        # kd chain: the root's Gi is N turned by -pi/2 about z, so the rods hang along -y
        B.orient_axis(frame, frame.z, q[i] - sm.pi / 2 if i == 0 else q[i])
        B.set_ang_vel(frame, u[i] * frame.z)
        cm = joint.locatenew(f"cm{i}", 0.5 * B.x)
        cm.v2pt_theory(joint, N, B)
        tip = joint.locatenew(f"tip{i}", 1.0 * B.x)
        tip.v2pt_theory(joint, N, B)
        inertia = me.inertia(B, I_axial, I_trans, I_trans)
        bodies.append(me.RigidBody(f"link{i}", cm, B, 1.0, (inertia, cm)))
        loads.append((cm, -9.81 * N.y))
        kd_eqs.append(q[i].diff() - u[i])
        frame, joint = B, tip
    km = me.KanesMethod(N, q_ind=q, u_ind=u, kd_eqs=kd_eqs)
    km.kanes_equations(bodies, loads)
    return km.mass_matrix, km.forcing, q, u


def cse_ops(M: sm.MatrixBase, f: sm.MatrixBase) -> int:
    exprs = [M[r, c] for r in range(M.rows) for c in range(r, M.cols)] + list(f)
    repl, red = sm.cse(exprs)
    return int(sum(sm.count_ops(e) for _, e in repl) + sum(sm.count_ops(e) for e in red))


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - t0


def max_difference(model: kd.Model, eom, M_km=None, f_km=None, q_km=None, u_km=None) -> float:
    """Largest relative difference of M and forcing between kanedyn and the numeric engine
    (and KanesMethod when given) at a random state."""
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, model.nq)
    u = rng.uniform(-1, 1, model.n)
    M, F = eom.lambdify()(q, u)
    refs = [kd.mass_matrix(model, kd.State(q, u))]
    if M_km is not None:
        fn = sm.lambdify([q_km, u_km], [M_km, f_km], cse=True)
        M2, F2 = fn(q, u)
        refs.append(np.asarray(M2, float))
        err_f = np.abs(F - np.ravel(F2)).max() / max(1.0, np.abs(F).max())
    else:
        err_f = 0.0
    err_M = max(np.abs(M - R).max() / np.abs(M).max() for R in refs)
    return float(max(err_M, err_f))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-kanes", type=int, default=10, help="largest n for KanesMethod")
    ap.add_argument("--quick", action="store_true", help="n = 2, 5, 10 only")
    args = ap.parse_args()
    sizes = [2, 5, 10] if args.quick else [2, 5, 10, 20, 30]

    head = (
        f"{'model':<22}{'kd cpu s':>10}{'kd wall s':>10}{'kd ops':>9}"
        f"{'KM cpu s':>10}{'KM ops':>9}{'time ratio':>12}{'ops ratio':>11}"
    )
    print(head)
    print("-" * len(head))
    ops_by_n = {}
    for n in sizes:
        model = kd.examples.chain(n)
        eom, cpu, wall = timed(lambda model=model: kane(model))
        ops = eom.compact.count_ops()
        ops_by_n[n] = ops
        if n <= args.max_kanes:
            (M_km, f_km, q_km, u_km), km_cpu, _ = timed(lambda n=n: kanes_method_pendulum(n))
            km_ops = cse_ops(M_km, f_km)
            if n <= 5:  # the two derivations agree (a check of what was timed)
                assert max_difference(model, eom, M_km, f_km, q_km, u_km) < 1e-12
            extra = f"{km_cpu:>10.2f}{km_ops:>9d}{km_cpu / cpu:>11.0f}x{km_ops / ops:>10.1f}x"
        else:
            extra = f"{'skipped':>10}{'':>9}{'':>12}{'':>11}"
        assert max_difference(model, eom) < 1e-12
        print(f"{'planar n=' + str(n):<22}{cpu:>10.2f}{wall:>10.2f}{ops:>9d}" + extra)
    model = spherical_chain(4)
    eom, cpu, wall = timed(lambda: kane(model))
    ops = eom.compact.count_ops()
    print(f"{'4 spherical joints':<22}{cpu:>10.2f}{wall:>10.2f}{ops:>9d}")
    print()
    print("growth of the kanedyn operation count (cubic gives ratio (n2/n1)^3 at large n):")
    ns = sorted(ops_by_n)
    for a, b in zip(ns, ns[1:], strict=False):
        k = np.log(ops_by_n[b] / ops_by_n[a]) / np.log(b / a)
        print(
            f"  n={a:>2} -> n={b:>2}: ops x{ops_by_n[b] / ops_by_n[a]:.2f}, local exponent {k:.2f}"
        )
    print(
        f"\nKanesMethod skipped above n = {args.max_kanes} (its derivation time grows far "
        "faster; use --max-kanes to change)."
    )


if __name__ == "__main__":
    main()
