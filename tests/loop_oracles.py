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
    in N) joined by constraints; body index -1 is the ground.

    ``bodies``: list of (mass, inertia about the mass centre in body axes).
    ``joints``: revolute joints (A, B, point in N, axis in N), each a point coincidence
    and two axis perpendicularities. ``extra``: more constraints, ``("point", A, B, P)``
    (the points of A and B at P coincide), ``("perp", A, a, B, b)`` (the axis a fixed in
    A stays perpendicular to b fixed in B) and ``("plane", B, P, e)`` (the point of B at
    P stays in the ground plane through P normal to e). All are given at the reference
    configuration ``(r0, R0)``, from which the body-fixed data are taken.
    """

    def __init__(self, bodies, joints, r0, R0, gravity, extra=()):
        self.m = np.array([b[0] for b in bodies], float)
        self.I_B = np.array([b[1] for b in bodies], float)
        self.g = np.asarray(gravity, float)
        self.nb = len(bodies)
        self.r0, self.R0 = np.asarray(r0, float), np.asarray(R0, float)
        self.cons = []
        for A, B, point, axis in joints:
            axis = np.asarray(axis, float) / np.linalg.norm(axis)
            b, c = _perp_pair(axis)
            self.cons += [("point", A, B, point), ("perp", A, axis, B, b),
                          ("perp", A, axis, B, c)]  # fmt: skip
        self.cons += list(extra)

    def _fixed(self, body, x, point=True):
        """Body-fixed components of the N point (or direction) x at the reference."""
        x = np.asarray(x, float)
        if body < 0:
            return x
        return self.R0[body].T @ (x - self.r0[body] if point else x)

    def kkt(self, r, R, v, w):
        """``J`` (nc, 6 nb), ``γ`` (nc,): the constraints' acceleration form."""
        n = 6 * self.nb
        rows, gam = [], []
        zero = np.zeros(3)

        def rot(body, x):
            return x if body < 0 else R[body] @ x

        def omega(body):
            return zero if body < 0 else w[body]

        for con in self.cons:
            if con[0] == "point":  # r_A + R_A s_A = r_B + R_B s_B
                _, A, B, P = con
                Jp, gp = np.zeros((3, n)), np.zeros(3)
                for body, sign in ((A, 1.0), (B, -1.0)):
                    if body < 0:
                        continue
                    rho = R[body] @ self._fixed(body, P)
                    Jp[:, 6 * body : 6 * body + 3] = sign * np.eye(3)
                    Jp[:, 6 * body + 3 : 6 * body + 6] = -sign * _skew(rho)
                    gp -= sign * np.cross(w[body], np.cross(w[body], rho))
                rows.append(Jp)
                gam.append(gp)
            elif con[0] == "perp":  # (R_A a) · (R_B b) = 0
                _, A, a, B, b = con
                alpha = rot(A, self._fixed(A, a, point=False))
                beta = rot(B, self._fixed(B, b, point=False))
                nvec = np.cross(alpha, beta)
                Jr = np.zeros((1, n))
                if A >= 0:
                    Jr[0, 6 * A + 3 : 6 * A + 6] = nvec
                if B >= 0:
                    Jr[0, 6 * B + 3 : 6 * B + 6] = -nvec
                wA, wB = omega(A), omega(B)
                ndot = np.cross(np.cross(wA, alpha), beta) + np.cross(alpha, np.cross(wB, beta))
                rows.append(Jr)
                gam.append(np.array([-(wA - wB) @ ndot]))
            else:  # "plane": e · (r_B + R_B s_B - P) = 0, e and P fixed in the ground
                _, B, P, e = con
                rho = R[B] @ self._fixed(B, P)
                Jr = np.zeros((1, n))
                Jr[0, 6 * B : 6 * B + 3] = e
                Jr[0, 6 * B + 3 : 6 * B + 6] = np.cross(rho, e)
                rows.append(Jr)
                gam.append(np.array([-np.dot(e, np.cross(w[B], np.cross(w[B], rho)))]))
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
