"""The names of a model's coordinates and speeds, in the state's order.

``coordinate_names(model)[i]`` names ``q[i]``: ``joint.angle0`` (gimbal angles),
``joint.qx`` ... ``joint.qw`` (a spherical joint's quaternion, scalar last),
``joint.d0`` (slides). ``speed_names(model)[r]`` names ``u[r]`` of ``[u | s]``:
``joint.w0`` (rotational speeds), ``joint.s0`` (slide rates). A model with flexible
bodies has its modal coordinates after the joints' (``body.y1``, the body's
``Modes.mode_names``) and its modal speeds after the joints' (``body.y1_dot``), as in
the state ``q = [q_joints | η]``, ``u = [u | s | ξ]``. The CSV and NPZ outputs,
the generated C and the error messages use them. :func:`coordinate_units`,
:func:`speed_units` and :func:`effort_units` give their SI units (``rad``, ``1`` for a
quaternion's entries, ``m``; ``rad/s``, ``m/s``; ``N.m``, ``N`` for the generalized
effort along each speed).
"""

from __future__ import annotations

from kanedyn.model.records import Model

__all__ = [
    "coordinate_names",
    "coordinate_units",
    "effort_units",
    "modal_names",
    "speed_names",
    "speed_units",
]


def modal_names(model: Model) -> list[str]:
    """The name of each modal coordinate, (nf,) in ``η``'s order: ``body.mode`` (the
    body's ``Modes.mode_names``, ``y1``, ``y2``, ... by default); ``body.mode_dot``
    names its speed in ``ξ``."""
    return [
        f"{model.bodies[i].name}.{m}"
        for i, _ in model.modal_slices()
        for m in model.bodies[i].modes.mode_names  # type: ignore[union-attr]
    ]


def coordinate_names(model: Model) -> list[str]:
    """The name of each coordinate, (nq_total,) in ``q``'s order (the modal coordinates
    last)."""
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
    return names + modal_names(model)


def speed_names(model: Model) -> list[str]:
    """The name of each speed, (n_total,) in ``[u | s | ξ]``'s order."""
    names = [""] * model.n
    for k, j in enumerate(model.joints):
        for pos, i in enumerate(model.layout.u_index[k]):
            names[i] = f"{j.name}.w{pos}" if pos < j.rot_dof else f"{j.name}.s{pos - j.rot_dof}"
    return names + [f"{name}_dot" for name in modal_names(model)]


def coordinate_units(model: Model) -> list[str]:
    """The SI unit of each coordinate, (nq_total,): ``rad`` (angles), ``1`` (a
    quaternion's entries), ``m`` (slides), ``1`` (modal coordinates: the mode shapes
    carry the unit)."""
    units = [""] * model.nq
    for k, j in enumerate(model.joints):
        nr = j.n_rot_coordinates
        for pos, i in enumerate(model.layout.q_index[k]):
            units[i] = "m" if pos >= nr else ("1" if j.rot_type == "spherical" else "rad")
    return units + ["1"] * model.nf


def _per_speed(model: Model, rot: str, trn: str, modal: str) -> list[str]:
    units = [""] * model.n
    for k, j in enumerate(model.joints):
        for pos, i in enumerate(model.layout.u_index[k]):
            units[i] = rot if pos < j.rot_dof else trn
    return units + [modal] * model.nf


def speed_units(model: Model) -> list[str]:
    """The SI unit of each speed, (n_total,): ``rad/s`` (rotational), ``m/s`` (slides),
    ``1/s`` (modal speeds)."""
    return _per_speed(model, "rad/s", "m/s", "1/s")


def effort_units(model: Model) -> list[str]:
    """The SI unit of the generalized effort along each speed, (n,): ``N.m`` (a torque
    along a rotational speed), ``N`` (a force along a slide), ``N.m`` (along a modal
    speed: the modal force's work per unit modal coordinate)."""
    return _per_speed(model, "N.m", "N", "N.m")
