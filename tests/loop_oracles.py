"""Independent oracles for closed loops: redundant (absolute) coordinates with multipliers.

Each body has absolute coordinates (its mass centre and its attitude), Newton-Euler's
equations in N, and every joint (tree joints and loop joints alike) is a revolute
constraint with a multiplier:

.. math:: M a = Q + J^T \\lambda, \\qquad J a = \\gamma

solved as an index-1 DAE (the acceleration-level constraint; Haug, *Computer-Aided
Kinematics and Dynamics of Mechanical Systems*, §6.3, §11.3). Nothing of kanedyn is
used here: the mechanisms are described by their points and axes in N at one
configuration and by their bodies' masses and inertias.
"""

from __future__ import annotations

import numpy as np
import scipy.integrate


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _perp_pair(a):
    """Two unit vectors completing the unit vector a to an orthonormal triad."""
    helper = np.eye(3)[int(np.argmin(np.abs(a)))]
    b = np.cross(a, helper)
    b /= np.linalg.norm(b)
    return b, np.cross(a, b)


class SpatialRevoluteDAE:
    """Rigid bodies (mass centre r, rotation R_N_B, velocity v, angular velocity ω, all
    in N) joined by revolute joints; body index -1 is the ground.

    ``bodies``: list of (mass, inertia about the mass centre in body axes).
    ``joints``: list of (A, B, point in N, axis in N), given at the reference
    configuration ``(r0, R0)``, from which the body-fixed joint data are taken.
    """

    def __init__(self, bodies, joints, r0, R0, gravity):
        self.m = np.array([b[0] for b in bodies], float)
        self.I_B = np.array([b[1] for b in bodies], float)
        self.g = np.asarray(gravity, float)
        self.nb = len(bodies)
        self.R0 = np.asarray(R0, float)
        self.joints = []
        for A, B, point, axis in joints:
            axis = np.asarray(axis, float) / np.linalg.norm(axis)
            b, c = _perp_pair(axis)
            ends = []
            for body in (A, B):
                if body < 0:
                    ends.append((np.asarray(point, float), axis, b, c))
                else:
                    Rt = R0[body].T
                    ends.append((Rt @ (point - r0[body]), Rt @ axis, Rt @ b, Rt @ c))
            self.joints.append((A, B, ends))

    def _pose(self, r, R, v, w, body, s):
        if body < 0:
            return s, np.zeros(3), np.zeros(3), np.zeros(3)
        return R[body] @ s, v[body], w[body], r[body]

    def kkt(self, r, R, v, w):
        """``J`` (nc, 6 nb), ``γ`` (nc,): the constraints' acceleration form."""
        n = 6 * self.nb
        rows, gam = [], []
        for A, B, ends in self.joints:
            (sA, aA, _, _), (sB, aB, bB, cB) = ends
            # point coincidence: r_A + R_A s_A = r_B + R_B s_B
            Jp = np.zeros((3, n))
            gp = np.zeros(3)
            for body, s, sign in ((A, sA, 1.0), (B, sB, -1.0)):
                if body < 0:
                    continue
                rho = R[body] @ s
                Jp[:, 6 * body : 6 * body + 3] = sign * np.eye(3)
                Jp[:, 6 * body + 3 : 6 * body + 6] = -sign * _skew(rho)
                gp -= sign * np.cross(w[body], np.cross(w[body], rho))
            rows.append(Jp)
            gam.append(gp)
            # axis alignment: (R_A a_A) · (R_B b_B) = 0 and (R_A a_A) · (R_B c_B) = 0
            alpha = aA if A < 0 else R[A] @ aA
            wA = np.zeros(3) if A < 0 else w[A]
            wB = np.zeros(3) if B < 0 else w[B]
            for e in (bB, cB):
                beta = e if B < 0 else R[B] @ e
                nvec = np.cross(alpha, beta)
                Jr = np.zeros((1, n))
                if A >= 0:
                    Jr[0, 6 * A + 3 : 6 * A + 6] = nvec
                if B >= 0:
                    Jr[0, 6 * B + 3 : 6 * B + 6] = -nvec
                ndot = np.cross(np.cross(wA, alpha), beta) + np.cross(alpha, np.cross(wB, beta))
                rows.append(Jr)
                gam.append(np.array([-(wA - wB) @ ndot]))
        return np.vstack(rows), np.concatenate(gam)

    def accelerations(self, r, R, v, w):
        """``(a, ω̇, λ)``: mass-centre and angular accelerations (nb, 3) and the
        multipliers, from ``M a = Q + Jᵀλ``, ``J a = γ`` (least squares for redundant
        joints, minimum-norm λ)."""
        nb = self.nb
        M = np.zeros((6 * nb, 6 * nb))
        Q = np.zeros(6 * nb)
        for i in range(nb):
            I_N = R[i] @ self.I_B[i] @ R[i].T
            M[6 * i : 6 * i + 3, 6 * i : 6 * i + 3] = self.m[i] * np.eye(3)
            M[6 * i + 3 : 6 * i + 6, 6 * i + 3 : 6 * i + 6] = I_N
            Q[6 * i : 6 * i + 3] = self.m[i] * self.g
            Q[6 * i + 3 : 6 * i + 6] = -np.cross(w[i], I_N @ w[i])
        J, gamma = self.kkt(r, R, v, w)
        Minv = np.linalg.inv(M)
        lam = np.linalg.lstsq(J @ Minv @ J.T, gamma - J @ Minv @ Q, rcond=1e-10)[0]
        acc = Minv @ (Q + J.T @ lam)
        acc = acc.reshape(nb, 6)
        return acc[:, :3], acc[:, 3:], lam

    def rhs(self, t, x):
        nb = self.nb
        r = x[: 3 * nb].reshape(nb, 3)
        R = x[3 * nb : 12 * nb].reshape(nb, 3, 3)
        v = x[12 * nb : 15 * nb].reshape(nb, 3)
        w = x[15 * nb :].reshape(nb, 3)
        a, wd, _ = self.accelerations(r, R, v, w)
        Rdot = np.einsum("bij,bjk->bik", np.array([_skew(wi) for wi in w]), R)
        return np.concatenate((v.ravel(), Rdot.ravel(), a.ravel(), wd.ravel()))

    def simulate(self, r, R, v, w, t_eval, rtol=1e-11, atol=1e-12):
        x0 = np.concatenate((np.ravel(r), np.ravel(R), np.ravel(v), np.ravel(w)))
        sol = scipy.integrate.solve_ivp(
            self.rhs, (t_eval[0], t_eval[-1]), x0, method="DOP853", t_eval=t_eval,
            rtol=rtol, atol=atol,
        )  # fmt: skip
        assert sol.success, sol.message
        nb = self.nb
        return sol.y[: 3 * nb].T.reshape(-1, nb, 3), sol.y[3 * nb : 12 * nb].T.reshape(-1, nb, 3, 3)
