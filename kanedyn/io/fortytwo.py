"""NASA 42 spacecraft description files (``SC_*.txt``) and their joint files (``Jnt_*.txt``).

42 reads these files positionally: every field is the first token(s) of its line, the
rest of the line (after ``!``) is a comment, and blank lines are skipped. This reader
does the same, field by field in 42's order, and every error names the file, the line
and the field it expected there.

Mapping to kanedyn (refs/notes/42-kane-msd.md §2-§4; ``Source/42init.c``
``InitSpacecraft``):

* Body ``i`` becomes ``Body("B<i>")`` with the mass, the moments and the products of
  inertia (42 gives the products as positive integrals, as :func:`kanedyn.inertia_tensor`
  takes them), the mass centre (body axes, from the body origin) and the constant
  embedded momentum.
* Joint ``k`` becomes ``Joint("G<k>")`` from ``B<Bin>`` to ``B<Bout>``: ``RotDOF``,
  ``RotSeq``, ``GIMBAL``/``SPHERICAL``, ``TrnDOF``, ``TrnSeq``;
  ``inner_rotation = euler_to_dcm(seq, Bi->Gi angles)`` (42's ``C_GiBi = A2C(seq, ...)``
  transposed) and ``outer_rotation = euler_to_dcm(seq, Go->Bo angles)`` (42's
  ``C_BoGo`` transposed); the joint positions relative to the body origins pass through
  unchanged (42's ``REFPT_CM`` subtracts the mass centres internally; kanedyn keeps
  origin-relative points and the mass centre separately). Passive spring and damper
  coefficients come from the joint's parameter file (the first ``RotDOF`` rotational
  and ``TrnDOF`` translational entries).
* Body 0 gets a free root joint ``"root"`` whose joint point is body 0's mass centre, so
  the translational coordinates are the position of B0's mass centre in N (initially
  zero). Its attitude and rate come from the "Initial Attitude" block.
* Initial joint angles (deg), rates (deg/s), displacements (m) and their rates (m/s) give
  the initial state. A spherical joint's angles are a 123 sequence turned into a
  quaternion and its rates are Go's angular velocity relative to Gi in Go, as in 42.

* Wheel ``w`` becomes a :class:`~kanedyn.ReactionWheel` ``"W<w>"`` on its body: a
  massless rotor with axial inertia ``J`` only (42's wheel is a momentum ``h_w`` along
  its axis, the rest of it part of the host) on a hinge ``"W<w>_spin"`` about the axis;
  its initial hinge rate is ``h_w/J - a·ω_host``. Max torque saturates
  :func:`kanedyn.wheel_loads`; the max momentum is recorded.
* Thruster ``t`` becomes a :class:`~kanedyn.Thruster` ``"T<t>"`` (force along its axis
  at the body origin, 42's node 0) driven by a throttle command
  (:func:`kanedyn.thruster_loads`).
* Locked joint DOF become :class:`~kanedyn.Lock` events at t = 0.
* With "Flex Active", a body's flex file (42's ``InitFlexModes``, refs/notes/42-kane-msd.md
  §13) gives its modal data, the arguments of ``kd.Modes``
  (:mod:`kanedyn.io.modal_fields`): ``mass`` = Mf, ``stiffness`` = Kf, ``damping`` =
  Cf, ``P`` = Pf, ``H`` = Hf, ``L``, ``N`` (the sparse elements, 0-based indices as in
  the file), and one node per joint of the body (``"G<k>"``, at the joint's position on
  this body, with the joint node mode shapes PSI and THETA), then the analysis nodes of
  its node file (``"node<i>"``; one at the mass centre without one, as 42's
  ``InitNodes``). ``REFPT_CM`` sets Pf and Hf to zero, as 42 does. The initial modal
  states (x, u) are ``case.flex[body].amplitudes`` and ``.rates``
  (:class:`FortyTwoFlex`). 42 leaves out the terms built from L and N without "Include
  2nd Order Flex Terms"; kanedyn keeps them (a warning says so). The body becomes
  ``Body(..., modes=Modes(**fields))`` (:func:`kanedyn.io.modal_fields.flexible_body`);
  a joint on it attaches at its joint node (``Joint.inner_node`` or ``outer_node``: the
  joint rides on the node's flexible displacement and rotation, 42's
  ``Θ_ik ξ_i - Θ_ok ξ_o``).

Wheels are in the model that :func:`read_42` returns; thrusters and locks are not part of
a model, so :func:`read_42_case` returns them with it (``case.thrusters``,
``case.events``, to pass to :func:`kanedyn.simulate` as loads and events), and the flex
files as read (``case.flex``).

The orbit (``Source/42init.c`` ``InitOrbit`` and the orbit part of ``InitSpacecraft``):
the SC file does not name its orbit; ``read_42(sc, orbit="Orb_LEO.txt")`` gives it, and
:func:`read_42_sim` finds it through ``Inp_Sim.txt`` (the spacecraft's ``RefOrb``).

* A ``CENTRAL`` orbit file (:func:`read_42_orbit`: Keplerian elements ``KEP``, with
  periapsis and apoapsis altitudes or minimum altitude and eccentricity, or position
  and velocity ``RV``) gives the model a :class:`~kanedyn.CentralGravity` with 42's
  ``mu`` and radius of the world (J2 = 0: 42's field without "Gravity Perturbation
  Forces") and the reference :class:`~kanedyn.Orbit` (``case.orbit``). The
  spacecraft's mass centre is put on it by :meth:`kanedyn.Orbit.place`, offset by the
  SC file's "Pos/Vel wrt Formation" as 42 does (Euler-Hill coordinates when the
  formation frame is fixed in L). Every "Orbit Prop" mode (``FIXED``, ``EULER_HILL``,
  ``ENCKE``, ``COWELL``) is the free root's translation in the field, integrated with
  the attitude and the joints.
* The initial attitude relative to N, L (LVLH, 42's ``FindCLN``: z nadir, y the
  negative orbit normal) or F (the formation frame) and the rate relative to N or L:
  ``C_BN = C_BL C_LN``, ``ω_B/N = ω_B/L + C_BN ω_L/N``.
* A ``ZERO`` orbit has no gravity and L is N, as in 42 (and as without an orbit file).
  ``FLIGHT`` and ``THREE_BODY`` orbits, element files (``FILE``), J2 drift and the
  environment's forces other than the point mass and its gravity-gradient torque
  (third bodies, drag, solar pressure, ...) are not modelled.

What kanedyn does not model is reported with :class:`UnsupportedFeatureWarning`, never
dropped silently: the orbit without its orbit file (other than ``FIXED``), flight software other than
``PASSIVE_FSW``, unread flex files, rigid bodies' node files, shakers, magnetic dipoles, actuated
joints, wheel drag and jitter, wheel and thruster nodes other than 0, magnetic torquers
(no magnetic field model) and sensors. ``NONE`` file names and
zero counts do not warn. Graphics-only fields (label, sprite, geometry files) and the
drag coefficient (used by 42's environment models, which kanedyn does not have) are read
and ignored.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import numpy as np

from kanedyn.dynamics.kinematics import kinematics
from kanedyn.errors import FileFormatError, ModelError
from kanedyn.io.modal_fields import check_modal_fields, flexible_body
from kanedyn.model import Body, CentralGravity, Joint, Model, State
from kanedyn.model.orbit import Orbit
from kanedyn.simulation.control import ReactionWheel, Thruster
from kanedyn.simulation.events import Lock
from kanedyn.spatial.inertia import inertia_tensor, validate_inertia
from kanedyn.spatial.rotation import (
    dcm_to_quat,
    euler_to_dcm,
    parse_sequence,
    quat_normalize,
    quat_to_dcm,
)

__all__ = [
    "FortyTwoCase",
    "FortyTwoFlex",
    "FortyTwoOrbit",
    "UnsupportedFeatureWarning",
    "read_42",
    "read_42_case",
    "read_42_orbit",
    "read_42_sim",
]


class UnsupportedFeatureWarning(UserWarning):
    """A feature of an input file that kanedyn reads but does not model."""


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_JOINT_TYPES = ("PASSIVE", "ACTUATED", "AD_HOC")


class _Line:
    def __init__(self, number: int, text: str) -> None:
        self.number = number
        content, _, comment = text.partition("!")
        self.content = content.strip()
        self.comment = comment.strip()
        self.tokens = self.content.split()


_Note = Callable[["_Line", str], None]  # records an UnsupportedFeatureWarning


class _Lines:
    """The non-blank lines of a 42 input file, read in order, one field per line."""

    def __init__(self, path: Path, shown: str) -> None:
        self.name = shown
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise FileFormatError(f"{shown}: cannot read the file ({exc.strerror})") from None
        self.lines = [_Line(n, t) for n, t in enumerate(text.splitlines(), 1) if t.strip()]
        self.pos = 0
        self.last = self.lines[-1].number if self.lines else 0

    def error(self, line: _Line, message: str) -> FileFormatError:
        return FileFormatError(f"{self.name} line {line.number}: {message}")

    def line(self, label: str) -> _Line:
        if self.pos >= len(self.lines):
            where = f"after line {self.last}" if self.last else "(the file is empty)"
            raise FileFormatError(f"{self.name}: the file ends {where}; expected {label!r}")
        line = self.lines[self.pos]
        self.pos += 1
        return line

    def skip(self, n: int = 1) -> None:
        for _ in range(n):
            self.line("a header line")

    def expected(self, line: _Line, label: str, what: str) -> FileFormatError:
        return self.error(line, f"expected {label!r} as {what}, got {line.content!r}")

    def numbers(self, label: str, n: int) -> tuple[np.ndarray, _Line]:
        line = self.line(label)
        what = "a number" if n == 1 else f"{n} numbers"
        toks = line.tokens[:n]
        if len(toks) < n or not all(_NUMBER.fullmatch(t) for t in toks):
            raise self.expected(line, label, what)
        values = np.array([float(t) for t in toks])
        if not np.all(np.isfinite(values)):
            raise self.error(line, f"{label}: {line.content!r} is too large (not a finite number)")
        return values, line

    def number(self, label: str) -> tuple[float, _Line]:
        values, line = self.numbers(label, 1)
        return float(values[0]), line

    def integer(self, label: str) -> tuple[int, _Line]:
        line = self.line(label)
        if not line.tokens or not _INTEGER.fullmatch(line.tokens[0]):
            raise self.expected(line, label, "an integer")
        return int(line.tokens[0]), line

    def words(
        self, label: str, n: int = 1, choices: tuple[str, ...] = ()
    ) -> tuple[list[str], _Line]:
        line = self.line(label)
        toks = line.tokens[:n]
        what = "a word" if n == 1 else f"{n} words"
        if choices:
            what += f" from {', '.join(choices)}"
        if len(toks) < n or (choices and any(t.upper() not in choices for t in toks)):
            raise self.expected(line, label, what)
        return toks, line

    def angles_and_seq(self, label: str) -> tuple[np.ndarray, str, _Line]:
        """Three angles in degrees and an Euler sequence (42's ``A2C`` input)."""
        line = self.line(label)
        toks = line.tokens[:4]
        if len(toks) < 4 or not all(_NUMBER.fullmatch(t) for t in toks[:3]):
            raise self.expected(line, label, "3 numbers and a sequence")
        try:
            parse_sequence(toks[3])
        except ModelError as exc:
            raise self.error(line, f"{label}: {exc}") from None
        angles = np.array([float(t) for t in toks[:3]])
        if not np.all(np.isfinite(angles)):
            raise self.error(line, f"{label}: {line.content!r} is too large (not a finite number)")
        return np.deg2rad(angles), toks[3], line


def _flag(lines: _Lines, label: str) -> tuple[bool, _Line]:
    (word,), line = lines.words(label, 1, ("TRUE", "FALSE"))
    return word.upper() == "TRUE", line


def _is_none(name: str) -> bool:
    return name.upper() == "NONE"


@attrs.frozen(eq=False)
class FortyTwoCase:
    """A 42 spacecraft as :func:`read_42_case` reads it.

    ``model`` and ``state`` (wheels included), ``wheels`` (:class:`~kanedyn.ReactionWheel`,
    for :func:`kanedyn.wheel_loads`), ``thrusters`` (:class:`~kanedyn.Thruster`, for
    :func:`kanedyn.thruster_loads`) and ``events`` (a :class:`~kanedyn.Lock` at t = 0 for
    every locked DOF, for ``kanedyn.simulate(..., events=case.events)``), ``orbit``
    (the reference :class:`~kanedyn.Orbit` of a ``CENTRAL`` orbit file, for
    ``traj.lvlh_attitude(case.orbit)``; None without one) and ``flex`` (the modal data
    of each body whose flex file is read, :class:`FortyTwoFlex`).
    """

    model: Model
    state: State
    wheels: tuple[ReactionWheel, ...]
    thrusters: tuple[Thruster, ...]
    events: tuple[Lock, ...]
    orbit: Orbit | None = None
    #: the flex file of each flexible body, by body name (:class:`FortyTwoFlex`)
    flex: dict[str, FortyTwoFlex] = attrs.field(factory=dict)


def read_42_case(
    path: str | os.PathLike[str], orbit: str | os.PathLike[str] | None = None
) -> FortyTwoCase:
    """Read a 42 spacecraft file with its wheels, thrusters and locked joints.

    As :func:`read_42`, and also returns the thrusters, the lock events and the
    reference orbit; see :class:`FortyTwoCase`.
    """
    shown = os.fspath(path)
    notes: list[tuple[str, type[Warning]]] = []
    orb = None if orbit is None else _read_orbit(Path(os.fspath(orbit)), os.fspath(orbit), notes)
    case = _read_sc(Path(shown), shown, notes, orb)
    for message, category in notes:
        warnings.warn(message, category, stacklevel=2)
    return case


def read_42(
    path: str | os.PathLike[str], orbit: str | os.PathLike[str] | None = None
) -> tuple[Model, State]:
    """Read a 42 spacecraft description file and the joint files it names.

    Joint parameter files are resolved relative to the SC file's folder. ``orbit``, a
    42 orbit file (``Orb_*.txt``), is the spacecraft's reference orbit: a ``CENTRAL``
    orbit gives the model a :class:`~kanedyn.CentralGravity` field and puts the
    spacecraft on the orbit, its attitude relative to LVLH where the file says so (see
    :func:`read_42_orbit`); :func:`read_42_sim` finds it through ``Inp_Sim.txt``.

    Returns
    -------
    model : Model
        Bodies ``"B0"``, ``"B1"``, ...; joints ``"root"`` (free, at B0's mass centre)
        and ``"G0"``, ``"G1"``, ... in 42's joint order.
    state : State
        42's initial attitude, rates, joint angles and displacements.

    Raises
    ------
    FileFormatError
        Naming the file, the line and the field expected there.

    Warns
    -----
    UnsupportedFeatureWarning
        For every part of the file kanedyn does not model (see the module docstring).
    UserWarning
        For a body whose principal moments violate the triangle inequality (42 accepts
        them, and so does this reader, as in the Explorer-1 demo).
    """
    shown = os.fspath(path)
    notes: list[tuple[str, type[Warning]]] = []
    orb = None if orbit is None else _read_orbit(Path(os.fspath(orbit)), os.fspath(orbit), notes)
    case = _read_sc(Path(shown), shown, notes, orb)
    if case.thrusters or case.events:
        notes.append(
            (
                f"{shown}: {len(case.thrusters)} thruster(s) and {len(case.events)} locked "
                "DOF are not part of the model: kanedyn.io.read_42_case returns them "
                "(case.thrusters, case.events)",
                UnsupportedFeatureWarning,
            )
        )
    for message, category in notes:
        warnings.warn(message, category, stacklevel=2)
    return case.model, case.state


def _read_sc(
    path: Path,
    shown: str,
    notes: list[tuple[str, type[Warning]]],
    orbit: FortyTwoOrbit | None = None,
) -> FortyTwoCase:
    L = _Lines(path, shown)

    def note(line: _Line, message: str) -> None:
        notes.append((f"{shown} line {line.number}: {message}", UnsupportedFeatureWarning))

    # -- header -----------------------------------------------------------------------
    L.skip(4)  # title, description, label, sprite file
    (fsw,), line = L.words("Flight Software Identifier")
    if fsw.upper() != "PASSIVE_FSW":
        note(line, f"flight software {fsw} is not modelled (kanedyn runs it as PASSIVE_FSW)")
    L.number("FSW Sample Time, sec")
    # -- orbit ------------------------------------------------------------------------
    L.skip()
    (prop,), line = L.words(
        "Orbit Prop FIXED, EULER_HILL, ENCKE, or COWELL",
        1,
        ("FIXED", "EULER_HILL", "ENCKE", "COWELL"),
    )
    if prop.upper() != "FIXED" and orbit is None:
        note(
            line,
            f"orbit propagation ({prop}) needs the reference orbit file (read_42(..., "
            "orbit=...) or read_42_sim): the spacecraft floats free, without gravity",
        )
    (use_cm,), _ = L.words("Pos of CM or ORIGIN, wrt F", 1, ("CM", "ORIGIN"))
    pos_f, _ = L.numbers("Pos wrt Formation (m), expressed in F", 3)
    vel_f, _ = L.numbers("Vel wrt Formation (m/s), expressed in F", 3)
    # -- initial attitude ---------------------------------------------------------------
    L.skip()
    (code,), code_line = L.words("Ang Vel wrt [NL], Att [QA] wrt [NLF]")
    code = code.upper()
    if len(code) != 3 or code[0] not in "NL" or code[1] not in "QA" or code[2] not in "NLF":
        raise L.expected(code_line, "Ang Vel wrt [NL], Att [QA] wrt [NLF]", "3 letters such as NAN")
    w0, w_line = L.numbers("Ang Vel (deg/sec)", 3)
    if code[1] == "Q":
        q0, qline = L.numbers("Quaternion", 4)
        if not np.any(q0):
            raise L.error(qline, "the initial quaternion is zero")
        L.skip()
    else:
        L.skip()
        angles0, seq0, qline = L.angles_and_seq("Angles (deg) & Euler Sequence")
        q0 = dcm_to_quat(euler_to_dcm(seq0, angles0))  # 42: C_BN = A2C, so R_N_B = its transpose
    if orbit is None and (code[0] == "L" or code[2] in "LF"):
        note(
            code_line,
            f"attitude code {code}: rates and attitudes relative to the L (LVLH) or F "
            "(formation) frame need the reference orbit file (read_42(..., orbit=...) or "
            "read_42_sim); taken relative to N",
        )
    # -- dynamics flags -----------------------------------------------------------------
    L.skip()
    L.words("Solve Dynamics by GAUSS_ELIM or ORDER_N", 1, ("GAUSS_ELIM", "ORDER_N"))
    constraints, line = _flag(L, "Compute Constraint Forces and Torques")
    if constraints:
        note(
            line,
            "constraint forces are not computed on import "
            "(kanedyn.constraint_forces gives them for any state)",
        )
    (refpt,), line = L.words(
        "Mass Props referenced to REFPT_CM or REFPT_JOINT", 1, ("REFPT_CM", "REFPT_JOINT")
    )
    if refpt.upper() == "REFPT_JOINT":
        note(
            line,
            "REFPT_JOINT: kanedyn always uses the true mass centres (rigid 42 models with "
            "REFPT_JOINT behave as if each mass centre were at its body origin)",
        )
    flex_active, _ = _flag(L, "Flex Active")
    second_order, second_line = _flag(L, "Include 2nd Order Flex Terms")
    (shaker,), line = L.words("Shaker File Name")
    if not _is_none(shaker):
        note(line, f"shaker file {shaker} is not used")
    L.number("Drag Coefficient")
    # -- bodies -------------------------------------------------------------------------
    L.skip(3)
    nb, nb_line = L.integer("Number of Bodies")
    if nb < 1:
        raise L.error(nb_line, f"expected at least 1 body, got {nb}")
    read = [_read_body(L, i, note, notes) for i in range(nb)]
    bodies, files = [b for b, _ in read], tuple(f for _, f in read)
    # -- joints -------------------------------------------------------------------------
    L.skip(4)
    joints = [Joint.free("root", outer="B0", outer_point=bodies[0].com)]
    initial: list[tuple[str, dict[str, np.ndarray], _Line]] = []
    inbound: dict[int, int] = {}
    events: list[Lock] = []
    for k in range(nb - 1):
        joint, init, locked, init_line = _read_joint(L, path.parent, k, nb, inbound, note)
        joints.append(joint)
        initial.append((joint.name, init, init_line))
        events += [Lock(0.0, joint.name, dof) for dof in locked]
    # -- flexible bodies: their flex and node files (42's InitFlexModes, InitNodes) ------
    flex_opts = _FlexOptions(flex_active, refpt.upper() == "REFPT_CM", second_order, second_line)
    bodies, flex = _read_flex_bodies(L, path.parent, bodies, joints, files, flex_opts, note)
    # -- after the joints: wheels, MTBs, thrusters, then sensors ------------------------
    wheels, h0 = _read_wheels(L, nb, note)
    if _section(L, "MTB Parameters"):
        n_mtb, line = L.integer("Number of MTBs")
        if n_mtb > 0:
            note(
                line,
                f"{n_mtb} magnetic torquer(s): not modelled (kanedyn has no magnetic field model)",
            )
        _skip_to_banner(L)
    thrusters = _read_thrusters(L, nb, note)
    _scan_equipment(L, note)
    try:
        model = Model(
            [*bodies, *(w.rotor() for w in wheels)],
            [*joints, *(w.joint() for w in wheels)],
            gravity=np.zeros(3) if orbit is None or orbit.gravity is None else orbit.gravity,
        )
    except ModelError as exc:
        raise L.error(nb_line, f"{exc}") from None
    try:
        if orbit is not None:  # 42's Initial Attitude relative to N, L or F (InitSpacecraft)
            q0, w0 = orbit.attitude(code, quat_to_dcm(quat_normalize(q0)), w0)
        state = model.set_joint(model.initial_state(), "root", quaternion=q0, rates=np.deg2rad(w0))
    except ModelError as exc:
        raise L.error(
            w_line if "rates" in str(exc) else qline, f"initial attitude: {exc}"
        ) from None
    for name, init, init_line in initial:
        try:
            state = model.set_joint(state, name, **init)
        except ModelError as exc:
            raise L.error(init_line, str(exc)) from None
    for name, record in flex.items():  # 42's initial modal states (x, u of the flex file)
        if model.body(name).modes is not None:
            try:
                state = model.set_modes(
                    state, name, amplitudes=record.amplitudes, rates=record.rates
                )
            except ModelError as exc:
                raise FileFormatError(f"{record.file}: initial modal states: {exc}") from None
    if wheels:
        kin = kinematics(model, state)
        for w, h in zip(wheels, h0, strict=True):
            i = model.body_index(w.body)
            w_host = kin.R_N_B[i].T @ kin.omega[i]  # host body axes
            state = model.set_joint(
                state, f"{w.name}_spin", rates=[h / w.inertia - float(w.axis @ w_host)]
            )
    if orbit is not None:
        state = orbit.place(model, state, use_cm.upper() == "CM", pos_f, vel_f)
    return FortyTwoCase(
        model,
        state,
        tuple(wheels),
        tuple(thrusters),
        tuple(events),
        None if orbit is None else orbit.orbit,
        flex=flex,
    )


def _section(L: _Lines, title: str) -> bool:
    """Consume the banner line of section ``title`` if it is next."""
    if L.pos < len(L.lines):
        line = L.lines[L.pos]
        if line.content.startswith("*") and title.lower() in line.content.lower():
            L.pos += 1
            return True
    return False


def _skip_to_banner(L: _Lines) -> None:
    """Skip the rest of a section (42 files keep a template item after a zero count)."""
    while L.pos < len(L.lines) and not L.lines[L.pos].content.startswith("*"):
        L.pos += 1


def _host(L: _Lines, line: _Line, what: str, b: int, nb: int) -> str:
    if not 0 <= b < nb:
        raise L.error(line, f"{what}: body index {b} is out of range 0..{nb - 1}")
    return f"B{b}"


def _read_wheels(L: _Lines, nb: int, note: _Note) -> tuple[list[ReactionWheel], list[float]]:
    """42's wheel section: each wheel a massless axial rotor (see the module docstring)."""
    if not _section(L, "Wheel Parameters"):
        return [], []
    drag, line = _flag(L, "Wheel Drag Active")
    if drag:
        note(line, "wheel drag is not modelled (give the wheel a friction instead)")
    jitter, line = _flag(L, "Wheel Jitter Active")
    if jitter:
        note(line, "wheel jitter (imbalance) is not modelled")
    nw, nw_line = L.integer("Number of wheels")
    if nw < 0:
        raise L.error(nw_line, f"expected a non-negative number of wheels, got {nw}")
    wheels, h0 = [], []
    for w in range(nw):
        name = f"W{w}"
        L.skip()  # "=== Wheel w ==="
        h, _ = L.number("Initial Momentum, N-m-sec")
        axis, a_line = L.numbers("Wheel Axis Components, [X, Y, Z]", 3)
        (max_trq, max_h), _ = L.numbers("Max Torque (N-m), Momentum (N-m-sec)", 2)
        J, J_line = L.number("Wheel Rotor Inertia, kg-m^2")
        b, b_line = L.integer("Body")
        node, node_line = L.integer("Node")
        if node != 0:
            note(
                node_line,
                f"wheel {name}: node {node} is not used (a wheel's position does not matter)",
            )
        L.words("Jitter Input File Name")
        if J <= 0.0:
            raise L.error(J_line, f"wheel {name}: rotor inertia must be positive, got {J!r}")
        if not np.any(axis):
            raise L.error(a_line, f"wheel {name}: the axis must not be zero")
        wheels.append(
            ReactionWheel(
                name,
                _host(L, b_line, f"wheel {name}", b, nb),
                axis=axis,
                inertia=J,
                mass=0.0,
                transverse=0.0,
                max_torque=float(max_trq),
                max_momentum=float(max_h),
            )
        )
        h0.append(h)
    _skip_to_banner(L)
    return wheels, h0


def _read_thrusters(L: _Lines, nb: int, note: _Note) -> list[Thruster]:
    if not _section(L, "Thruster Parameters"):
        return []
    n, n_line = L.integer("Number of Thrusters")
    if n < 0:
        raise L.error(n_line, f"expected a non-negative number of thrusters, got {n}")
    thrusters = []
    for t in range(n):
        name = f"T{t}"
        L.skip()  # "=== Thr t ==="
        (mode,), _ = L.words("Mode (PULSED or PROPORTIONAL)", 1, ("PULSED", "PROPORTIONAL"))
        force, f_line = L.number("Thrust Force (N)")
        axis, a_line = L.numbers("Thrust Axis", 3)
        b, b_line = L.integer("Body")
        node, node_line = L.integer("Node")
        if node != 0:
            note(
                node_line,
                f"thruster {name}: node {node} needs a node file, which kanedyn does not "
                "read; the thrust acts at the body origin",
            )
        if force < 0.0:
            raise L.error(f_line, f"thruster {name}: thrust must be non-negative, got {force!r}")
        if not np.any(axis):
            raise L.error(a_line, f"thruster {name}: the axis must not be zero")
        thrusters.append(
            Thruster(
                name,
                _host(L, b_line, f"thruster {name}", b, nb),
                axis=axis,
                force=force,
                mode=mode.upper(),
            )
        )
    _skip_to_banner(L)
    return thrusters


def _read_body(
    L: _Lines, i: int, note: _Note, notes: list[tuple[str, type[Warning]]]
) -> tuple[Body, _BodyFiles]:
    name = f"B{i}"
    L.skip()
    mass, mass_line = L.number("Mass")
    if mass <= 0.0:
        raise L.error(mass_line, f"body {name}: mass must be positive, got {mass!r}")
    moments, I_line = L.numbers("Moments of Inertia (kg-m^2)", 3)
    products, _ = L.numbers("Products of Inertia (xy,xz,yz)", 3)
    com, com_line = L.numbers("Location of mass center, m", 3)
    h_emb, h_line = L.numbers("Constant Embedded Momentum (Nms)", 3)
    dipole, line = L.numbers("Constant Embedded Magnetic Dipole (A-m^2)", 3)
    if np.any(dipole):
        note(line, f"body {name}: the magnetic dipole is not modelled (no magnetic field)")
    L.words("Geometry Input File Name")
    (node_file,), node_line = L.words("Node File Name")
    (flex_file,), flex_line = L.words("Flex File Name")
    files = _BodyFiles(node_file, node_line, flex_file, flex_line)
    inertia = inertia_tensor(*moments, *products)
    try:
        validate_inertia(inertia, name=f"body {name}", check_triangle=False)
    except ModelError as exc:
        raise L.error(I_line, f"{exc} (moments on this line, products on the next)") from None
    try:
        validate_inertia(inertia, name=f"body {name}")
        triangle = True
    except ModelError as exc:
        notes.append((f"{L.name} line {I_line.number}: {exc}; kept, as 42 accepts it", UserWarning))
        triangle = False
    try:
        body = Body(
            name, mass=mass, inertia=inertia, com=com, embedded_momentum=h_emb,
            check_triangle=triangle,
        )  # fmt: skip
    except ModelError as exc:
        message = str(exc)
        line = next(
            (ln for word, ln in (("com", com_line), ("embedded", h_line), ("mass", mass_line))
             if word in message),
            I_line,
        )  # fmt: skip
        raise L.error(line, message) from None
    return body, files


class _BodyFiles(NamedTuple):
    node: str
    node_line: _Line
    flex: str
    flex_line: _Line


class _FlexOptions(NamedTuple):
    active: bool  # Flex Active
    refpt_cm: bool  # REFPT_CM: 42 zeroes Pf and Hf
    second_order: bool  # Include 2nd Order Flex Terms
    second_line: _Line


@attrs.frozen(eq=False)
class FortyTwoFlex:
    """A body's 42 flex file (``Flex File Name``), as :func:`read_42_case` reads it.

    ``fields`` are the arguments of ``kd.Modes`` (:mod:`kanedyn.io.modal_fields`):
    ``mass`` (42's Mf), ``stiffness`` (Kf), ``damping`` (Cf), ``P`` (Pf), ``H`` (Hf),
    ``L``, ``N``, and the nodes: first one per joint of the body, named after the joint
    (``"G<k>"``, at the joint's position on this body, with the joint node mode shapes),
    then the analysis nodes of the body's node file (``"node<i>"``, 42's node ``i``; one
    node at the mass centre without a node file). ``amplitudes`` and ``rates`` are the
    initial modal states (42's ``x`` and ``u``: η and ξ = η̇).
    """

    file: str
    fields: dict[str, Any]
    amplitudes: np.ndarray
    rates: np.ndarray


def _read_flex_bodies(
    L: _Lines,
    folder: Path,
    bodies: list[Body],
    joints: list[Joint],
    files: tuple[_BodyFiles, ...],
    opts: _FlexOptions,
    note: _Note,
) -> tuple[list[Body], dict[str, FortyTwoFlex]]:
    """Read the flex files of a spacecraft (when Flex Active) and make those bodies
    flexible; ``joints`` (``[root, G0, G1, ...]``) is updated in place to attach at the
    joint nodes of flexible bodies."""
    flex: dict[str, FortyTwoFlex] = {}
    for i, (body, f) in enumerate(zip(bodies, files, strict=True)):
        name = body.name
        if _is_none(f.flex) or not opts.active:
            if not _is_none(f.flex):
                note(
                    f.flex_line,
                    f"body {name}: flex file {f.flex} is not read: Flex Active is FALSE, "
                    "so the body is rigid (as in 42)",
                )
            if not _is_none(f.node):
                note(
                    f.node_line,
                    f"body {name}: node file {f.node} is not used "
                    "(kanedyn uses nodes on flexible bodies only)",
                )
            continue
        flex_path = folder / f.flex
        if not flex_path.is_file():
            raise L.error(f.flex_line, f"body {name}: flex file {os.fspath(flex_path)!r} not found")
        if _is_none(f.node):
            analysis = [("node0", body.com)]  # 42's InitNodes: one node at the mass centre
        else:
            analysis = _read_nodes(folder / f.node, L, f.node_line)
        mine = [(k, j) for k, j in enumerate(joints[1:]) if name in (j.inner, j.outer)]
        joint_nodes = [
            (j.name, j.inner_point if j.inner == name else j.outer_point, k) for k, j in mine
        ]
        read = _read_flex(flex_path, name, i, joints[1:], joint_nodes, analysis)
        if read is None:
            note(f.flex_line, f"body {name}: flex file {f.flex} has no modes: the body is rigid")
            continue
        record, lines = read
        fields = record.fields
        if opts.refpt_cm and (np.any(fields["P"]) or np.any(fields["H"])):
            note(
                lines["P"],
                f"body {name}: REFPT_CM: Pf and Hf are set to zero, as 42 does",
            )
        if opts.refpt_cm:
            fields["P"] = np.zeros_like(fields["P"])
            fields["H"] = np.zeros_like(fields["H"])
        if not opts.second_order and (np.any(fields["L"]) or np.any(fields["N"])):
            note(
                opts.second_line,
                f"body {name}: Include 2nd Order Flex Terms is FALSE: 42 leaves out the "
                "terms built from L and N; kanedyn keeps them (zero L and N in the flex "
                "file to leave them out)",
            )
        flex[name] = record
        try:
            bodies[i] = flexible_body(body, fields)
        except ModelError as exc:
            raise L.error(f.flex_line, f"body {name}: flex file {f.flex}: {exc}") from None
        for k, j in mine:  # at the joint node (42's Θ_ik ξ_i - Θ_ok ξ_o)
            if j.inner == name:
                joints[1 + k] = attrs.evolve(joints[1 + k], inner_node=j.name)
            else:
                joints[1 + k] = attrs.evolve(joints[1 + k], outer_node=j.name)
    return bodies, flex


def _read_nodes(path: Path, sc: _Lines, line: _Line) -> list[tuple[str, np.ndarray]]:
    """A 42 node file (42's ``InitNodes``): 2 header lines, the number of nodes, a
    banner, then one ``x y z "comment"`` line per node (body axes, from the origin, m)."""
    if not path.is_file():
        raise sc.error(line, f"node file {os.fspath(path)!r} not found")
    F = _Lines(path, os.fspath(path))
    F.skip(2)
    count, count_line = F.integer("Number of Nodes")
    if count < 0:
        raise F.error(count_line, f"expected a non-negative number of nodes, got {count}")
    F.skip()
    return [(f"node{n}", F.numbers(f"Node {n} location, m", 3)[0]) for n in range(count)]


def _banner(F: _Lines, title: str) -> _Line:
    """A section banner line (its text is not checked, as in 42, unless it is data)."""
    line = F.line(title)
    if line.tokens and _NUMBER.fullmatch(line.tokens[0]):
        raise F.expected(line, title, "a section banner (a line of *), not numbers")
    return line


def _sparse(F: _Lines, label: str, nidx: int) -> tuple[list[tuple[list[int], float, _Line]], _Line]:
    """A count of non-zero elements, then that many ``i j ... value`` lines."""
    count, count_line = F.integer(f"{label}: Number of non-zero elements")
    if count < 0:
        raise F.error(count_line, f"{label}: expected a non-negative count, got {count}")
    entries = []
    for _ in range(count):
        line = F.line(f"{label}: {nidx} indices and a value")
        toks = line.tokens[: nidx + 1]
        if len(toks) < nidx + 1 or not (
            all(_INTEGER.fullmatch(t) for t in toks[:nidx]) and _NUMBER.fullmatch(toks[nidx])
        ):
            raise F.expected(line, f"{label} element", f"{nidx} integer indices and a number")
        value = float(toks[nidx])
        if not np.isfinite(value):
            raise F.error(line, f"{label}: {toks[nidx]!r} is too large (not a finite number)")
        entries.append(([int(t) for t in toks[:nidx]], value, line))
    return entries, count_line


def _index(F: _Lines, line: _Line, label: str, what: str, value: int, size: int) -> int:
    if not 0 <= value < size:
        raise F.error(line, f"{label}: {what} {value} is out of range 0..{size - 1}")
    return value


def _read_flex(
    path: Path,
    body: str,
    b: int,
    joints: list[Joint],
    joint_nodes: list[tuple[str, np.ndarray, int]],
    analysis: list[tuple[str, np.ndarray]],
) -> tuple[FortyTwoFlex, dict[str, _Line]] | None:
    """A 42 flex file, section by section as 42's ``InitFlexModes`` reads it.

    Also reads the older layout with an "Analysis Node Locations" section after the
    initial modal states (``ID x y z`` lines), whose nodes then replace the node file's.
    Returns the record and the line of each field's section (for later errors), or None
    for a file with 0 modes (42 keeps that body rigid).
    """
    F = _Lines(path, os.fspath(path))
    F.skip(2)  # title, description
    nf, nf_line = F.integer("Number of Flex Modes")
    if nf < 0:
        raise F.error(nf_line, f"body {body}: expected a non-negative number of modes, got {nf}")
    if nf == 0:
        return None
    _banner(F, "Initial Modal States x, u")
    eta, xi = np.zeros(nf), np.zeros(nf)
    for m in range(nf):
        (eta[m], xi[m]), _ = F.numbers(f"Mode {m} x, u", 2)
    if _section(F, "Analysis Node Locations"):
        count, count_line = F.integer("Number of Analysis Nodes")
        if count < 0:
            raise F.error(count_line, f"expected a non-negative number of nodes, got {count}")
        analysis = []
        for n in range(count):
            line = F.line(f"Node {n}: Node ID, location, m")
            toks = line.tokens[:4]
            if len(toks) < 4 or not all(_NUMBER.fullmatch(t) for t in toks[1:]):
                raise F.expected(line, "Node ID, location, m", "an ID and 3 numbers")
            analysis.append((toks[0], np.array([float(t) for t in toks[1:]])))
    nodes = [(n, np.asarray(p, dtype=float)) for n, p, _ in joint_nodes] + analysis
    if len({n for n, _ in nodes}) != len(nodes):
        raise F.error(nf_line, f"body {body}: node names repeat: {[n for n, _ in nodes]}")
    slot = {k: s for s, (_, _, k) in enumerate(joint_nodes)}
    shapes = {"Psi": np.zeros((len(nodes), 3, nf)), "Theta": np.zeros((len(nodes), 3, nf))}
    lines: dict[str, _Line] = {}
    for kind, first in (("joint", 0), ("analysis", len(joint_nodes))):
        _banner(F, f"{kind.title()} Node Mode Shapes")
        for key, symbol in (("Psi", "PSI"), ("Theta", "THETA")):
            label = f"{kind} node {symbol}"
            lines.setdefault(key, _banner(F, f"Non-zero {symbol} Elements"))
            entries, _ = _sparse(F, label, 3)
            for (m, node, axis), value, line in entries:
                _index(F, line, label, "flex mode", m, nf)
                _index(F, line, label, "axis", axis, 3)
                if kind == "joint":
                    _index(F, line, label, "joint", node, len(joints))
                    if node not in slot:
                        j = joints[node]
                        raise F.error(
                            line,
                            f"{label}: body {body} is not connected to joint {j.name} "
                            f"({j.inner} to {j.outer})",
                        )
                    shapes[key][first + slot[node], axis, m] = value
                else:
                    _index(F, line, label, "node", node, len(analysis))
                    shapes[key][first + node, axis, m] = value
    matrices = {}
    for key, title in (("mass", "Mass"), ("stiffness", "Stiffness"), ("damping", "Damping")):
        lines[key] = _banner(F, f"Non-zero {title} Matrix Elements")
        a = np.zeros((nf, nf))
        entries, _ = _sparse(F, f"{title.lower()} matrix", 2)
        for (row, col), value, line in entries:
            _index(F, line, f"{title.lower()} matrix", "row", row, nf)
            _index(F, line, f"{title.lower()} matrix", "column", col, nf)
            a[row, col] = value
        matrices[key] = a
    for key, title in (("P", "Linear Momentum Modal Integral, Pf"),
                       ("H", "Angular Momentum Modal Integral, Hf")):  # fmt: skip
        lines[key] = _banner(F, title)
        a = np.zeros((3, nf))
        for m in range(nf):
            a[:, m], _ = F.numbers(f"{key}f: Mode {m}, [x y z]", 3)
        matrices[key] = a
    lines["L"] = _banner(F, "Linear Modal Integral, L, 3 x 3 x Nf")
    L3 = np.zeros((3, 3, nf))
    entries, _ = _sparse(F, "L", 3)
    for (i1, i2, m), value, line in entries:
        for what, v, size in (("i", i1, 3), ("j", i2, 3), ("mode", m, nf)):
            _index(F, line, "L", what, v, size)
        L3[i1, i2, m] = value
    lines["N"] = _banner(F, "Angular Modal Integral, N, 3 x 3 x Nf x Nf")
    N4 = np.zeros((3, 3, nf, nf))
    entries, _ = _sparse(F, "N", 4)
    for (i1, i2, m, n), value, line in entries:
        for what, v, size in (("i", i1, 3), ("j", i2, 3), ("mode p", m, nf), ("mode q", n, nf)):
            _index(F, line, "N", what, v, size)
        N4[i1, i2, m, n] = value
    table: dict[str, Any] = {**matrices, "L": L3, "N": N4}
    table["node_positions"] = np.array([p for _, p in nodes]).reshape(len(nodes), 3)
    table["Psi"], table["Theta"] = shapes["Psi"], shapes["Theta"]
    table["node_names"] = [n for n, _ in nodes]
    lines["node_positions"] = lines["node_names"] = nf_line

    def fail(field: str, message: str) -> FileFormatError:
        return F.error(lines.get(field, nf_line), f"body {body}: {field}: {message}")

    fields = check_modal_fields(table, fail)
    return FortyTwoFlex(os.fspath(path), fields, eta, xi), lines


def _read_joint(
    L: _Lines, folder: Path, k: int, nb: int, inbound: dict[int, int], note: _Note
) -> tuple[Joint, dict[str, np.ndarray], list[int], _Line]:
    name = f"G{k}"
    L.skip()
    (jtype,), type_line = L.words("Type of joint (PASSIVE, ACTUATED, others)", 1, _JOINT_TYPES)
    jtype = jtype.upper()
    line = L.line("Inner, outer body indices")
    toks = line.tokens[:2]
    if len(toks) < 2 or not all(_INTEGER.fullmatch(t) for t in toks):
        raise L.expected(line, "Inner, outer body indices", "2 integers")
    b_in, b_out = int(toks[0]), int(toks[1])
    for which, b in (("inner", b_in), ("outer", b_out)):
        if not 0 <= b < nb:
            raise L.error(line, f"joint {name}: {which} body index {b} is out of range 0..{nb - 1}")
    if b_in >= b_out:
        raise L.error(
            line, f"joint {name}: inner body index ({b_in}) must be less than the outer ({b_out})"
        )
    if b_out in inbound:
        raise L.error(
            line, f"joint {name}: body {b_out} already has inbound joint G{inbound[b_out]}"
        )
    inbound[b_out] = k
    # rotational DOF, sequence, GIMBAL or SPHERICAL
    label = "RotDOF, Seq, GIMBAL or SPHERICAL"
    line = L.line(label)
    toks = line.tokens[:3]
    if (
        len(toks) < 3
        or not _INTEGER.fullmatch(toks[0])
        or not _INTEGER.fullmatch(toks[1])
        or toks[2].upper() not in ("GIMBAL", "SPHERICAL")
    ):
        raise L.expected(line, label, "an integer, a sequence and GIMBAL or SPHERICAL")
    rot_dof, rot_seq, spherical = int(toks[0]), toks[1], toks[2].upper() == "SPHERICAL"
    if not 0 <= rot_dof <= 3:
        raise L.error(line, f"joint {name}: RotDOF must be 0..3, got {rot_dof}")
    if spherical and rot_dof != 3:
        raise L.error(line, f"joint {name}: a SPHERICAL joint needs RotDOF = 3, got {rot_dof}")
    _check_seq(L, line, name, "RotSeq", rot_seq)
    label = "TrnDOF, Seq"
    line = L.line(label)
    toks = line.tokens[:2]
    if len(toks) < 2 or not all(_INTEGER.fullmatch(t) for t in toks):
        raise L.expected(line, label, "an integer and a sequence")
    trn_dof, trn_seq = int(toks[0]), toks[1]
    if not 0 <= trn_dof <= 3:
        raise L.error(line, f"joint {name}: TrnDOF must be 0..3, got {trn_dof}")
    _check_seq(L, line, name, "TrnSeq", trn_seq)
    locked: list[int] = []
    for label, ndof, offset in (("RotDOF Locked", rot_dof, 0), ("TrnDOF Locked", trn_dof, rot_dof)):
        words, line = L.words(label, 3, ("TRUE", "FALSE"))
        flags = [w.upper() == "TRUE" for w in words]
        if any(flags[ndof:]):
            note(line, f"joint {name}: a lock on a DOF beyond {label[:6]} = {ndof} is ignored")
        locked += [offset + i for i in range(ndof) if flags[i]]
    angles, angles_line = L.numbers("Initial Angles [deg]", 3)
    rates, _ = L.numbers("Initial Rates, deg/sec", 3)
    disp, _ = L.numbers("Initial Displacements [m]", 3)
    disp_rates, _ = L.numbers("Initial Displacement Rates, m/sec", 3)
    a_in, seq_in, _ = L.angles_and_seq("Bi to Gi Static Angles [deg] & Seq")
    a_out, seq_out, _ = L.angles_and_seq("Go to Bo Static Angles [deg] & Seq")
    p_in, _ = L.numbers("Position wrt inner body origin, m", 3)
    p_out, _ = L.numbers("Position wrt outer body origin, m", 3)
    (parm_file,), parm_line = L.words("Parameter File Name")
    k_rot = c_rot = k_trn = c_trn = np.zeros(3)
    if jtype == "PASSIVE":
        if not _is_none(parm_file):
            k_rot, c_rot, k_trn, c_trn = _read_jnt(folder / parm_file, L, parm_line)
    else:
        what = (
            "42's actuator rate loop is not modelled"
            if jtype == "ACTUATED"
            else "42's ad-hoc joint torques are not modelled"
        )
        extra = "" if _is_none(parm_file) else f"; parameter file {parm_file} not read"
        note(
            type_line,
            f"joint {name} is {jtype}: {what}; the joint is unactuated "
            f"(apply kanedyn.JointLoad records for its efforts){extra}",
        )
    try:
        joint = Joint(
            name,
            f"B{b_in}",
            f"B{b_out}",
            rot_type="spherical" if spherical else "gimbal",
            rot_dof=rot_dof,
            rot_seq="123" if spherical else rot_seq,
            trn_dof=trn_dof,
            trn_seq=trn_seq,
            inner_point=p_in,
            outer_point=p_out,
            inner_rotation=euler_to_dcm(seq_in, a_in),  # R_Bi_Gi = C_GiBi^T
            outer_rotation=euler_to_dcm(seq_out, a_out),  # R_Go_Bo = C_BoGo^T
            stiffness=np.r_[k_rot[:rot_dof], k_trn[:trn_dof]],
            damping=np.r_[c_rot[:rot_dof], c_trn[:trn_dof]],
        )
    except ModelError as exc:
        raise L.error(parm_line, f"joint {name}: {exc}") from None
    init: dict[str, np.ndarray] = {}
    if rot_dof:
        init["angles"] = np.deg2rad(angles[:rot_dof])
        init["rates"] = np.deg2rad(rates[:rot_dof])
    if trn_dof:
        init["displacements"] = disp[:trn_dof]
        init["displacement_rates"] = disp_rates[:trn_dof]
    return joint, init, locked, angles_line


def _check_seq(L: _Lines, line: _Line, joint: str, field: str, seq: str) -> None:
    if len(seq) != 3 or set(seq) != {"1", "2", "3"}:
        raise L.error(
            line, f"joint {joint}: {field} {seq!r} must name the three axes 1, 2, 3 once each"
        )


def _read_jnt(path: Path, sc: _Lines, line: _Line) -> tuple[np.ndarray, ...]:
    """Spring and damper coefficients from a 42 passive joint parameter file."""
    if not path.is_file():
        raise sc.error(line, f"joint parameter file {os.fspath(path)!r} not found")
    J = _Lines(path, os.fspath(path))
    J.skip(3)
    coefs = []
    for label in (
        "Rot Passive Spring Coefficients (Nm/rad)",
        "Rot Passive Damping Coefficients (Nms/rad)",
        "Trn Passive Spring Coefficients (N/m)",
        "Trn Passive Damping Coefficients (Ns/m)",
    ):
        values, vline = J.numbers(label, 3)
        if np.any(values < 0.0):
            raise J.error(vline, f"{label} must be non-negative, got {values.tolist()}")
        coefs.append(values)
    return tuple(coefs)


def _scan_equipment(L: _Lines, note: _Note) -> None:
    """Warn for every equipment section (wheels, MTBs, thrusters, sensors) with items.

    The sections after the joints differ between 42 versions, so each is found by its
    banner (a line of ``*``); its count is the first integer line after the banner.
    """
    title, want_count = "", False
    for line in L.lines[L.pos :]:
        if line.content.startswith("*"):
            title, want_count = line.content.strip("* ").strip(), True
            continue
        if want_count and line.tokens and _INTEGER.fullmatch(line.tokens[0]):
            want_count = False
            count = int(line.tokens[0])
            if count > 0:
                what = line.comment or title
                note(line, f"{what} = {count} ({title}): not modelled by kanedyn; ignored")
    L.pos = len(L.lines)


# --------------------------------------------------------------------------- orbits
# 42's worlds (Source/42init.c, LoadPlanets and LoadMoonOfEarth): gravitational
# parameter (m^3/s^2), equatorial radius (m), J2.
_WORLDS: dict[str, tuple[float, float, float]] = {
    "SOL": (1.32715e20, 6.98e8, 0.0),
    "SUN": (1.32715e20, 6.98e8, 0.0),
    "MERCURY": (2.18e13, 2.42e6, 0.0),
    "VENUS": (3.2485e14, 6.1e6, 0.0),
    "EARTH": (3.986004e14, 6.378145e6, 1.08263e-3),
    "MARS": (4.293e13, 3.41e6, 1.96045e-3),
    "JUPITER": (1.2761e17, 7.14e7, 0.0),
    "SATURN": (3.792e16, 6.04e7, 0.0),
    "URANUS": (5.788e15, 2.35e7, 0.0),
    "NEPTUNE": (6.8e15, 2.23e7, 0.0),
    "PLUTO": (3.2e14, 7.0e6, 0.0),
    "LUNA": (4.902801e12, 1.738e6, 2.027e-4),
}
_REGIMES = ("ZERO", "FLIGHT", "CENTRAL", "THREE_BODY")


def _eh_to_relative(
    radius: float, rate: float, R_L_N: np.ndarray, re: np.ndarray, ve: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """42's ``EHRV2RelRV`` (Kit/Source/orbkit.c): Euler-Hill (curvilinear) position
    ``re`` and velocity ``ve`` about a circular reference orbit of ``radius`` and
    ``rate`` (L components) to the position and velocity relative to the reference point
    (N components). With ``α = re_x/R``, ``β = re_y/R``, ``ρ = R - re_z`` and the frame
    ``C_BN = C_BL(α, β) C_LN`` of the point's own vertical,

    .. math:: r_{rel} = R\\,\\hat z_L - ρ\\,\\hat z_B, \\quad
        v_{rel} = C_{BN}^T (ve_x + nρ,\\, ve_y,\\, ve_z) - R n\\,\\hat x_L
    """
    alpha, beta, rho = re[0] / radius, re[1] / radius, radius - re[2]
    c1, s1, c2, s2 = math.cos(alpha), -math.sin(alpha), math.cos(beta), math.sin(beta)
    C_BL = np.array([[c1, 0.0, -s1], [s1 * s2, c2, c1 * s2], [s1 * c2, -s2, c1 * c2]])
    C_BN = C_BL @ R_L_N
    r_rel = radius * R_L_N[2] - rho * C_BN[2]
    v_rel = C_BN.T @ np.array([ve[0] + rate * rho, ve[1], ve[2]]) - radius * rate * R_L_N[0]
    return r_rel, v_rel


@attrs.frozen(eq=False)
class FortyTwoOrbit:
    """A 42 reference orbit file (``Orb_*.txt``) as :func:`read_42_orbit` reads it.

    ``regime`` is the file's orbit type: ``"CENTRAL"`` (``orbit``, the Keplerian
    :class:`~kanedyn.Orbit` at t = 0, and ``gravity``, the
    :class:`~kanedyn.CentralGravity` of ``world`` with 42's ``mu`` and radius and
    J2 = 0, 42's field without "Gravity Perturbation Forces") or ``"ZERO"`` (no orbit
    and no gravity, the LVLH frame is N, as in 42; ``FLIGHT`` and ``THREE_BODY`` files
    are read as ZERO with a warning). ``formation_frame`` (``"N"`` or ``"L"``) is the
    frame the formation frame F is fixed in, ``R_X_F`` its axes in that frame
    (``euler_to_dcm`` of the file's angles, 42's ``C_FX`` transposed) and
    ``formation_origin`` (m, N components) its origin relative to the reference orbit.
    """

    regime: str
    world: str
    orbit: Orbit | None
    gravity: CentralGravity | None
    formation_frame: str
    R_X_F: np.ndarray
    formation_origin: np.ndarray

    @property
    def R_N_L(self) -> np.ndarray:
        """LVLH's axes in N at t = 0 (the identity without an orbit, as 42's ZERO)."""
        return np.eye(3) if self.orbit is None else self.orbit.lvlh(0.0).T

    @property
    def R_N_F(self) -> np.ndarray:
        """The formation frame's axes in N at t = 0."""
        return self.R_N_L @ self.R_X_F if self.formation_frame == "L" else self.R_X_F

    def attitude(
        self, code: str, R_X_B: np.ndarray, w_deg: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """42's Initial Attitude (``InitSpacecraft``): the quaternion of ``R_N_B`` and
        ``ω_B/N`` (deg/s, B components) from the attitude ``R_X_B`` relative to
        ``X = code[2]`` (N, L or F) and the rate ``w_deg`` relative to ``code[0]``
        (N or L): ``R_N_B = R_N_X R_X_B``, ``ω_B/N = ω_B/X + R_N_B^T ω_L/N``."""
        R_N_X = {"N": np.eye(3), "L": self.R_N_L, "F": self.R_N_F}[code[2]]
        R_N_B = R_N_X @ R_X_B
        w = np.asarray(w_deg, dtype=float)
        if code[0] == "L" and self.orbit is not None:
            w_LN = self.R_N_L @ self.orbit.lvlh_rate(0.0)  # N components
            w = w + np.rad2deg(R_N_B.T @ w_LN)
        return dcm_to_quat(R_N_B), w

    def place(
        self, model: Model, state: State, use_cm: bool, pos_f: np.ndarray, vel_f: np.ndarray
    ) -> State:
        """Put the spacecraft on the reference orbit as 42's ``InitSpacecraft`` does.

        The spacecraft's mass centre gets the reference orbit's position and velocity
        plus 42's ``PosR``, ``VelR`` from the "Pos/Vel wrt Formation" fields (``CM``: of
        the mass centre; ``ORIGIN``: of body 0's origin, the mass centre's offset
        ``p_cm`` and velocity ``ω × p_cm`` added rigidly, as 42 does); a formation
        fixed in L takes them as Euler-Hill coordinates (:func:`_eh_to_relative`). The
        root is put on the orbit by :meth:`kanedyn.Orbit.place` with the attitude and
        rate it has, then the whole spacecraft is moved so that its mass centre is there.
        """
        k0 = model.joint_index("root")
        q, u = model.coordinates("root"), model.speeds("root")
        if self.orbit is not None:
            kin = kinematics(model, state)
            R_N_B = kin.R_N_B[0]
            R_L_N = self.orbit.lvlh(0.0)
            R_L_B = R_L_N @ R_N_B
            w_BL = R_N_B.T @ kin.omega[0] - R_L_B.T @ self.orbit.lvlh_rate(0.0)
            state = self.orbit.place(model, state, "root", attitude=R_L_B, rates=w_BL)
        kin = kinematics(model, state)
        m = np.array([b.mass for b in model.bodies])
        c = m @ kin.r / m.sum()
        v_c = m @ kin.v / m.sum()
        p_cm = c - kin.p[0]  # body 0's origin to the mass centre, N
        w_x_p = np.cross(kin.omega[0], p_cm)
        R_N_L = self.R_N_L
        R_F = self.R_X_F
        if self.formation_frame == "L":
            if use_cm:
                pos_eh, vel_eh = R_F @ pos_f, R_F @ vel_f
            else:
                pos_eh = R_N_L.T @ (p_cm + self.formation_origin) + R_F @ pos_f
                vel_eh = R_N_L.T @ w_x_p + R_F @ vel_f
            if self.orbit is None:
                pos_r, vel_r = pos_eh, vel_eh
            else:
                rate = (
                    self.orbit.mean_motion
                    if use_cm
                    else float(np.linalg.norm(self.orbit.lvlh_rate(0.0)))
                )
                pos_r, vel_r = _eh_to_relative(self.orbit.a, rate, R_N_L.T, pos_eh, vel_eh)
        elif use_cm:
            pos_r, vel_r = R_F @ pos_f, R_F @ vel_f
        else:
            pos_r = p_cm + R_F @ pos_f + self.formation_origin
            vel_r = w_x_p + R_F @ vel_f
        r0 = v0 = np.zeros(3)
        if self.orbit is not None:
            r0, v0 = self.orbit.state(0.0)
            r0 = r0 + np.asarray(model.central_gravity.center, dtype=float)  # type: ignore[union-attr]
        jnt = model.joints[k0]
        Delta = jnt.inner_rotation @ np.eye(3)[:, [int(ch) - 1 for ch in jnt.trn_seq]]
        qq, uu = state.q.copy(), state.u.copy()
        qq[q[-3:]] += Delta.T @ (r0 + pos_r - c)
        uu[u[-3:]] += Delta.T @ (v0 + vel_r - v_c)
        return State(qq, uu)


def read_42_orbit(path: str | os.PathLike[str]) -> FortyTwoOrbit:
    """Read a 42 orbit file (``Orb_*.txt``), as 42's ``InitOrbit`` (Source/42init.c).

    ``CENTRAL`` orbits about 42's worlds (SOL, the planets, LUNA) with Keplerian
    elements (``KEP``: periapsis and apoapsis altitudes ``PA`` or minimum altitude and
    eccentricity ``AE``, inclination, RAAN, argument of periapsis, true anomaly; in km
    and deg) or position and velocity (``RV``, km and km/s) become an
    :class:`~kanedyn.Orbit`; 42's ``a = R + (h_p + h_a)/2``, ``e = |h_a - h_p| / 2a``
    (``PA``) and ``r_p = R + h_min``, ``a = r_p / (1 - e)`` (``AE``). ``ZERO`` has no
    orbit. Then the formation frame (fixed in N or L, its Euler angles, its origin).

    Raises
    ------
    FileFormatError
        Naming the file and the line: a malformed field, an unknown world, element
        files (``FILE``: TLE, TRV or SPLINE), apoapsis below periapsis, or an orbit
        that is not an ellipse.

    Warns
    -----
    UnsupportedFeatureWarning
        ``FLIGHT`` and ``THREE_BODY`` orbits (read as ZERO), secular J2 drift and
        polyhedron gravity.
    """
    shown = os.fspath(path)
    notes: list[tuple[str, type[Warning]]] = []
    orbit = _read_orbit(Path(shown), shown, notes)
    for message, category in notes:
        warnings.warn(message, category, stacklevel=2)
    return orbit


def _read_orbit(path: Path, shown: str, notes: list[tuple[str, type[Warning]]]) -> FortyTwoOrbit:
    L = _Lines(path, shown)

    def note(line: _Line, message: str) -> None:
        notes.append((f"{shown} line {line.number}: {message}", UnsupportedFeatureWarning))

    L.skip(2)  # title, description
    (regime,), regime_line = L.words("Orbit Type (ZERO, FLIGHT, CENTRAL, THREE_BODY)", 1, _REGIMES)
    regime = regime.upper()
    # ZERO and FLIGHT sections: a header, the world or region, polyhedron gravity
    L.skip()
    (world,), _ = L.words("World")
    poly, poly_line = _flag(L, "Use Polyhedron Gravity")
    if poly and regime == "ZERO":
        note(poly_line, "polyhedron gravity is not modelled")
    L.skip(3)
    orbit: Orbit | None = None
    gravity: CentralGravity | None = None
    if regime in ("FLIGHT", "THREE_BODY"):
        note(
            regime_line,
            f"{regime} orbits are not modelled: the spacecraft floats free, without "
            "gravity, and L is taken as N",
        )
        regime = "ZERO"
    # CENTRAL section
    L.skip()
    (center, world_line) = L.words("Orbit Center")
    drift, drift_line = _flag(L, "Secular Orbit Drift Due to J2")
    (kind,), kind_line = L.words(
        "Use Keplerian elements (KEP) or (RV) or FILE", 1, ("KEP", "RV", "FILE")
    )
    (pa,), _ = L.words("Use Peri/Apoapsis (PA) or min alt/ecc (AE)", 1, ("PA", "AE"))
    alts, alt_line = L.numbers("Periapsis & Apoapsis Altitude, km", 2)
    (alt_min, ecc), ae_line = L.numbers("Min Altitude (km), Eccentricity", 2)
    inc, _ = L.number("Inclination (deg)")
    raan, _ = L.number("Right Ascension of Ascending Node (deg)")
    argp, _ = L.number("Argument of Periapsis (deg)")
    nu, _ = L.number("True Anomaly (deg)")
    r_km, r_line = L.numbers("RV Initial Position (km)", 3)
    v_km, _ = L.numbers("RV Initial Velocity (km/sec)", 3)
    L.skip(3)  # element file format, name, label
    if regime == "CENTRAL":
        name = center[0].upper()
        if name not in _WORLDS:
            raise L.error(
                world_line,
                f"orbit center {center[0]!r}: kanedyn knows 42's worlds "
                f"{', '.join(_WORLDS)} (not 42's other moons and minor bodies)",
            )
        world = name
        mu, radius, _j2 = _WORLDS[name]
        if drift:
            note(drift_line, "the secular J2 drift of the reference orbit is not modelled")
        where = kind_line
        try:
            if kind.upper() == "KEP":
                if pa.upper() == "PA":
                    if alts[1] < alts[0]:
                        raise L.error(
                            alt_line, f"apoapsis ({alts[1]} km) below periapsis ({alts[0]} km)"
                        )
                    a = radius + 0.5e3 * (alts[0] + alts[1])
                    e = 1.0e3 * abs(alts[0] - alts[1]) / (2.0 * a)
                    where = alt_line
                else:
                    if not ecc < 1.0:
                        raise L.error(ae_line, f"eccentricity {ecc} is not an ellipse's (< 1)")
                    a = (radius + 1.0e3 * alt_min) / (1.0 - ecc)
                    e, where = ecc, ae_line
                i, om, w, f = (math.radians(x) for x in (inc, raan, argp, nu))
                orbit = Orbit.from_elements(a, e, i, om, w, f, mu=mu)
            elif kind.upper() == "RV":
                where = r_line
                orbit = Orbit.from_state(1.0e3 * r_km, 1.0e3 * v_km, mu=mu)
            else:
                raise L.error(
                    kind_line,
                    "orbit elements from a file (FILE: TLE, TRV or SPLINE) are not read "
                    "by kanedyn; give KEP or RV",
                )
        except ModelError as exc:
            raise L.error(where, f"orbit: {exc}") from None
        gravity = CentralGravity(mu=mu, radius=radius, J2=0.0)
    # THREE_BODY section
    L.skip(17)
    # formation frame
    L.skip()
    (fixed,), _ = L.words("Formation Frame Fixed in [NL]", 1, ("N", "L"))
    angles, seq, _ = L.angles_and_seq("Euler Angles (deg) and Sequence")
    (expressed,), _ = L.words("Formation Origin expressed in [NL]", 1, ("N", "L"))
    origin, _ = L.numbers("Formation Origin wrt Ref Orbit (m)", 3)
    R_N_L = np.eye(3) if orbit is None else orbit.lvlh(0.0).T
    if expressed.upper() == "L":
        origin = R_N_L @ origin
    return FortyTwoOrbit(
        regime, world.upper(), orbit, gravity, fixed.upper(), euler_to_dcm(seq, angles), origin
    )


# Inp_Sim.txt's environment flags that name forces kanedyn does not model
_ENVIRONMENT = (
    ("aerodynamic forces", "aerodynamic drag"),
    ("solar pressure", "solar radiation pressure"),
    ("residual magnetic", "residual magnetic moment torques (no magnetic field model)"),
    ("gravity perturbation", "gravity perturbation forces (kanedyn's field is the point mass "
     "with its gravity-gradient torque; kd.CentralGravity(J2=...) adds J2)"),
    ("thruster plume", "thruster plume forces"),
    ("contact forces", "contact forces"),
    ("slosh", "CFD slosh"),
)  # fmt: skip


def read_42_sim(path: str | os.PathLike[str], spacecraft: int = 0) -> FortyTwoCase:
    """Read spacecraft ``spacecraft`` of a 42 simulation file (``Inp_Sim.txt``) with its
    reference orbit: :func:`read_42_case` of the SC file it names, with the orbit file
    of its ``RefOrb`` (both relative to ``Inp_Sim.txt``'s folder).

    The environment flags of ``Inp_Sim.txt`` that turn on forces kanedyn does not model
    (aerodynamics, solar pressure, residual magnetic moments, gravity perturbations,
    thruster plumes, contact, slosh) are reported, and so is a ``FALSE`` "Gravity
    Gradient Torques" (kanedyn's central field always has them: they come from the same
    potential as the orbit's force). Third-body gravity of 42's other worlds is not
    modelled.

    Raises
    ------
    FileFormatError
        Naming the file and the line (``Inp_Sim.txt``, the SC or the orbit file).
    """
    shown = os.fspath(path)
    p = Path(shown)
    L = _Lines(p, shown)
    notes: list[tuple[str, type[Warning]]] = []

    def note(line: _Line, message: str) -> None:
        notes.append((f"{shown} line {line.number}: {message}", UnsupportedFeatureWarning))

    L.skip(8)  # title, simulation control (time mode .. command script)
    L.skip()  # Reference Orbits banner
    n_orb, n_orb_line = L.integer("Number of Reference Orbits")
    orbits: list[tuple[bool, str, _Line]] = []
    for j in range(n_orb):
        line = L.line(f"Input file name for Orb {j}")
        if len(line.tokens) < 2 or line.tokens[0].upper() not in ("TRUE", "FALSE"):
            raise L.expected(line, f"Input file name for Orb {j}", "TRUE or FALSE and a file name")
        orbits.append((line.tokens[0].upper() == "TRUE", line.tokens[1], line))
    L.skip()  # Spacecraft banner
    n_sc, n_sc_line = L.integer("Number of Spacecraft")
    if not 0 <= spacecraft < n_sc:
        raise L.error(n_sc_line, f"spacecraft {spacecraft} is out of range 0..{n_sc - 1}")
    sc: tuple[int, str, _Line] | None = None
    for j in range(n_sc):
        line = L.line(f"Existence, RefOrb, Input file for SC {j}")
        toks = line.tokens
        if (
            len(toks) < 3
            or toks[0].upper() not in ("TRUE", "FALSE")
            or not _INTEGER.fullmatch(toks[1])
        ):
            raise L.expected(
                line,
                f"Existence, RefOrb, Input file for SC {j}",
                "TRUE or FALSE, an integer and a file name",
            )
        if j == spacecraft:
            sc = (int(toks[1]), toks[2], line)
    assert sc is not None
    ref, sc_file, sc_line = sc
    if not 0 <= ref < n_orb:
        raise L.error(
            sc_line, f"spacecraft {spacecraft}: RefOrb {ref} is out of range 0..{n_orb - 1}"
        )
    exists, orb_file, orb_line = orbits[ref]
    if not exists:
        raise L.error(
            orb_line, f"orbit {ref} (spacecraft {spacecraft}'s RefOrb) does not exist (FALSE)"
        )
    # environment flags: found by their labels (the section differs between 42 versions)
    in_env = False
    for line in L.lines[L.pos :]:
        if line.content.startswith("*"):
            if in_env:
                break
            in_env = "environment" in line.content.lower()
            continue
        if not in_env:
            continue
        label = line.comment.lower()
        first = line.tokens[0].upper() if line.tokens else ""
        if "gravity gradient" in label and first == "FALSE":
            note(line, "gravity-gradient torques are off in 42; kanedyn's central field has them")
        for key, what in _ENVIRONMENT:
            if key in label and "TRUE" in (t.upper() for t in line.tokens[:2]):
                note(line, f"{what}: not modelled by kanedyn")
    if n_orb:
        note(n_orb_line, "third-body gravity of 42's other worlds is not modelled")
    for name, line in ((orb_file, orb_line), (sc_file, sc_line)):
        if not (p.parent / name).is_file():
            raise L.error(line, f"file {os.fspath(p.parent / name)!r} not found")
    orbit = _read_orbit(p.parent / orb_file, os.fspath(p.parent / orb_file), notes)
    case = _read_sc(p.parent / sc_file, os.fspath(p.parent / sc_file), notes, orbit)
    for message, category in notes:
        warnings.warn(message, category, stacklevel=2)
    return case
