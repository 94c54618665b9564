"""Explorer-1 with Pinocchio and a fixed-step RK4 loop written in Python.

The peer the native simulation loop is measured against: ``pin.aba`` for the
accelerations, ``pin.integrate`` for the configuration (the quaternion stays on the
unit sphere), the classical RK4 stages on the speeds, the same step and output
interval as :func:`benchmarks.run.explorer_run`. This is how a Pinocchio user without
a compiled loop of their own runs a long simulation.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import kanedyn as kd
from benchmarks import peers


def explorer_rk4(t_final: float, dt: float = 0.1, output_every: float = 10.0) -> dict[str, Any]:
    """Explorer-1 for ``t_final`` s by Pinocchio in a Python RK4 loop; the model build
    is included in the time, as compilation is for kanedyn's runs. The final speeds are
    returned in kanedyn's order, so the run can be checked against kanedyn's."""
    import pinocchio as pin

    t0, c0 = time.perf_counter(), time.process_time()
    model = kd.examples.explorer1()
    state = kd.examples.explorer1_state(model)
    pm, data, q_map, v_map = peers.pinocchio_peer(model).handles
    q = np.asarray(state.q, float)[q_map].copy()
    v = np.asarray(state.u, float)[v_map].copy()
    # the hinges' springs and dampers (τ = −k θ − c θ̇ on each angle), which pin.aba
    # does not know: applied as joint torques at every stage
    lay = model.layout
    iq, iv, k_s, c_d = [], [], [], []
    for j, joint in enumerate(model.joints):
        if joint.rot_type != "gimbal":
            continue
        for c in range(joint.rot_dof):
            iq.append(int(np.flatnonzero(q_map == lay.q_index[j][c])[0]))
            iv.append(int(np.flatnonzero(v_map == lay.u_index[j][c])[0]))
            k_s.append(float(joint.stiffness[c]) if joint.stiffness is not None else 0.0)
            c_d.append(float(joint.damping[c]) if joint.damping is not None else 0.0)
    iq_a, iv_a, k_a, c_a = np.array(iq), np.array(iv), np.array(k_s), np.array(c_d)

    def load(q: np.ndarray, v: np.ndarray) -> np.ndarray:
        tau = np.zeros(model.n)
        tau[iv_a] = -k_a * q[iq_a] - c_a * v[iv_a]
        return tau

    steps = int(round(t_final / dt))
    every = max(1, int(round(output_every / dt)))
    aba, integrate = pin.aba, pin.integrate
    half = 0.5 * dt
    samples = []
    for k in range(steps):
        a1 = aba(pm, data, q, v, load(q, v)).copy()
        v2, q2 = v + half * a1, integrate(pm, q, half * v)
        a2 = aba(pm, data, q2, v2, load(q2, v2)).copy()
        v3, q3 = v + half * a2, integrate(pm, q, half * v2)
        a3 = aba(pm, data, q3, v3, load(q3, v3)).copy()
        v4, q4 = v + dt * a3, integrate(pm, q, dt * v3)
        a4 = aba(pm, data, q4, v4, load(q4, v4)).copy()
        q = integrate(pm, q, (dt / 6.0) * (v + 2.0 * v2 + 2.0 * v3 + v4))
        v = v + (dt / 6.0) * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        if (k + 1) % every == 0:
            samples.append(np.concatenate([q, v]))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    u_final = np.empty_like(v)
    u_final[v_map] = v
    return {"workload": f"Explorer-1, {t_final:g} s, dt = {dt:g}, RK4, Pinocchio "
                        f"{pin.__version__} in a Python loop",
            "t_final": t_final, "engine": "pinocchio", "formulation": "aba",
            "rhs_evaluations": 4 * steps, "wall_seconds": wall, "cpu_seconds": cpu,
            "cpu_seconds_per_rhs": cpu / (4 * steps), "samples": len(samples),
            "u_final": u_final.tolist()}  # fmt: skip
