"""The names of a model's coordinates and speeds, in the state's order.

``coordinate_names(model)[i]`` names ``q[i]``: ``joint.angle0`` (gimbal angles),
``joint.qx`` ... ``joint.qw`` (a spherical joint's quaternion, scalar last),
``joint.d0`` (slides). ``speed_names(model)[r]`` names ``u[r]`` of ``[u | s]``:
``joint.w0`` (rotational speeds), ``joint.s0`` (slide rates). The CSV and NPZ outputs,
the generated C and the error messages use them. :func:`coordinate_units`,
:func:`speed_units` and :func:`effort_units` give their SI units (``rad``, ``1`` for a
quaternion's entries, ``m``; ``rad/s``, ``m/s``; ``N.m``, ``N`` for the generalized
effort along each speed).
"""

from __future__ import annotations

from kanedyn.model.records import Model

__all__ = ["coordinate_names", "coordinate_units", "effort_units", "speed_names", "speed_units"]


def coordinate_names(model: Model) -> list[str]:
    """The name of each coordinate, (nq,) in ``q``'s order."""
    names = [""] * model.nq
    for k, j in enumerate(model.joints):
        idx = model.layout.q_index[k]
        nr = j.n_rot_coordinates
        rot_names = (
            ["qx", "qy", "qz", "qw"]
            if j.rot_type == "spherical"
            else [f"angle{i}" for i in range(nr)]
        )
        for pos, i in enumerate(idx):
            names[i] = f"{j.name}.{rot_names[pos]}" if pos < nr else f"{j.name}.d{pos - nr}"
    return names


def speed_names(model: Model) -> list[str]:
    """The name of each speed, (n,) in ``[u | s]``'s order."""
    names = [""] * model.n
    for k, j in enumerate(model.joints):
        for pos, i in enumerate(model.layout.u_index[k]):
            names[i] = f"{j.name}.w{pos}" if pos < j.rot_dof else f"{j.name}.s{pos - j.rot_dof}"
    return names


def coordinate_units(model: Model) -> list[str]:
    """The SI unit of each coordinate, (nq,): ``rad`` (angles), ``1`` (a quaternion's
    entries), ``m`` (slides)."""
    units = [""] * model.nq
    for k, j in enumerate(model.joints):
        nr = j.n_rot_coordinates
        for pos, i in enumerate(model.layout.q_index[k]):
            units[i] = "m" if pos >= nr else ("1" if j.rot_type == "spherical" else "rad")
    return units


def _per_speed(model: Model, rot: str, trn: str) -> list[str]:
    units = [""] * model.n
    for k, j in enumerate(model.joints):
        for pos, i in enumerate(model.layout.u_index[k]):
            units[i] = rot if pos < j.rot_dof else trn
    return units


def speed_units(model: Model) -> list[str]:
    """The SI unit of each speed, (n,): ``rad/s`` (rotational), ``m/s`` (slides)."""
    return _per_speed(model, "rad/s", "m/s")


def effort_units(model: Model) -> list[str]:
    """The SI unit of the generalized effort along each speed, (n,): ``N.m`` (a torque
    along a rotational speed), ``N`` (a force along a slide)."""
    return _per_speed(model, "N.m", "N")
