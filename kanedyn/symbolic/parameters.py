"""A model's numbers as named symbols, for readable derivations.

:func:`symbolic_parameters` replaces every non-zero number of a model that a textbook
would write as a letter by a sympy symbol named after its body or joint:

* mass: ``m_<body>`` (``m_B1``);
* inertia tensor entry: ``I_<body>_<ab>``, ab = xx, xy, ..., zz (``I_B1_xx``);
* mass centre: ``c_<body>_<x|y|z>`` (``c_B1_x``);
* embedded momentum: ``h_<body>_<x|y|z>``;
* joint inner and outer points: ``p_<joint>_<x|y|z>``, ``po_<joint>_<x|y|z>``;
* stiffness and damping per DOF: ``k_<joint>_<dof>``, ``b_<joint>_<dof>``;
* gravity: ``g`` (its magnitude, along its axis when it has one), else ``g_x, g_y, g_z``;
  a central field's gravitational parameter: ``mu``.

Zeros stay exact zeros, a joint's or loop's point drops its round-off (a component
within 8 ulp of the point's size, such as ``0.5·cos(π/2)``, is a zero) and the joint
rotations stay numbers (made exact by :func:`kanedyn.symbolic.arithmetic.exact_rotation`). The inertia entries are the tensor's
(``I_B1_xy`` is the tensor element, ``-∫xy dm``); the symmetric pair shares one symbol.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import sympy as sm

from kanedyn.model import Model

__all__ = ["symbolic_parameters"]

_XYZ = "xyz"


def symbolic_parameters(model: Model) -> tuple[Model, dict[sm.Symbol, float]]:
    """``model`` with named symbols for its non-zero numbers, and their values.

    Returns
    -------
    symbolic : Model
        Same topology and rotations; ``symbolic.subs(values)`` is ``model`` again (up
        to the points' round-off).
    values : dict
        Symbol -> number.

    Examples
    --------
    >>> import kanedyn as kd
    >>> sym, values = symbolic_parameters(kd.examples.double_pendulum())
    >>> sym.bodies[0].mass, values[sym.bodies[0].mass]
    (m_link0, 1.0)
    """
    if model.is_symbolic:
        return model, {}
    values: dict[sm.Symbol, float] = {}

    def name(label: str, x: float, positive: bool = False) -> Any:
        if x == 0:
            return 0
        s = sm.Symbol(label, real=True, positive=positive or None)
        values[s] = float(x)
        return s

    def vec(label: str, v: Any) -> np.ndarray:
        return np.array([name(f"{label}_{c}", x) for c, x in zip(_XYZ, v, strict=True)], object)

    def point(label: str, v: Any) -> np.ndarray:
        # a joint's or loop's point often comes from a rotated geometry (0.5·cos(π/2)):
        # drop round-off (8 ulp of the point's size) so that an exact zero stays a zero
        # rather than a parameter
        v = np.asarray(v, dtype=float)
        tol = 8 * np.finfo(float).eps * max(1.0, float(np.abs(v).max()))
        return vec(label, np.where(np.abs(v) <= tol, 0.0, v))

    bodies = []
    for b in model.bodies:
        inertia = np.zeros((3, 3), dtype=object)
        for a in range(3):
            for c in range(a, 3):
                s = name(f"I_{b.name}_{_XYZ[a]}{_XYZ[c]}", b.inertia[a, c], positive=a == c)
                inertia[a, c] = inertia[c, a] = s
        if b.is_particle:
            inertia = np.zeros((3, 3))
        bodies.append(
            attrs.evolve(
                b,
                mass=name(f"m_{b.name}", b.mass, positive=True),
                inertia=inertia,
                com=vec(f"c_{b.name}", b.com),
                embedded_momentum=vec(f"h_{b.name}", b.embedded_momentum),
            )
        )
    joints = []
    for j in model.joints:
        dofs = j.rot_dof + j.trn_dof
        ks = [name(f"k_{j.name}_{d}", x) for d, x in enumerate(j.stiffness[:dofs])]
        bs = [name(f"b_{j.name}_{d}", x) for d, x in enumerate(j.damping[:dofs])]
        joints.append(
            attrs.evolve(
                j,
                inner_point=point(f"p_{j.name}", j.inner_point),
                outer_point=point(f"po_{j.name}", j.outer_point),
                stiffness=np.array(ks, dtype=object) if dofs else j.stiffness,
                damping=np.array(bs, dtype=object) if dofs else j.damping,
            )
        )
    loops = []
    for lp in model.loops:
        loops.append(
            attrs.evolve(
                lp,
                inner_point=point(f"p_{lp.name}", lp.inner_point),
                outer_point=point(f"po_{lp.name}", lp.outer_point),
            )
        )
    central = model.central_gravity
    if central is not None:  # mu a symbol; J2, radius and center stay numbers
        mu = sm.Symbol("mu", positive=True)
        values[mu] = float(central.mu)
        field = attrs.evolve(central, mu=mu)
        return Model(bodies, joints, gravity=field, loops=loops, planar=model.planar), values
    gravity = np.asarray(model.gravity, dtype=float)
    nonzero = np.flatnonzero(gravity)
    if nonzero.size == 1:
        a = int(nonzero[0])
        g = sm.Symbol("g", positive=True)
        values[g] = abs(float(gravity[a]))
        grav = np.zeros(3, dtype=object)
        grav[a] = g if gravity[a] > 0 else -g
    else:
        grav = vec("g", gravity)
    return Model(bodies, joints, gravity=grav, loops=loops, planar=model.planar), values
