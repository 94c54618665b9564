"""The names of a model's coordinates and speeds, in the state's order.

``coordinate_names(model)[i]`` names ``q[i]``: ``joint.angle0`` (gimbal angles),
``joint.qx`` ... ``joint.qw`` (a spherical joint's quaternion, scalar last),
``joint.d0`` (slides). ``speed_names(model)[r]`` names ``u[r]`` of ``[u | s]``:
``joint.w0`` (rotational speeds), ``joint.s0`` (slide rates). The CSV and NPZ outputs,
the generated C and the error messages use them.
"""

from __future__ import annotations

from kanedyn.model.records import Model

__all__ = ["coordinate_names", "speed_names"]


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
