"""The C emitter: a model's equations as standalone, dependency-free C (``kd.codegen.to_c``).

:func:`to_c` writes a header and a source file (C99, the C library's ``sin``, ``cos``,
``sqrt``, ``fabs``, ``copysign`` only) for flight software, hardware-in-the-loop rigs or other simulators:

``int PREFIX_rhs(const double *x, const double *tau, double *out)``
    Kane's equations, ``out = [ν̇ | q̇]`` (``PREFIX_N + PREFIX_NQ``) at the state
    ``x = [q | u]`` with generalized efforts ``tau`` (``PREFIX_N``; added to the joint
    springs and dampers, as :class:`kanedyn.JointLoad` values are). Returns 0, or 1 when
    an output is not finite (a singular mass matrix).
``int PREFIX_derivatives(const double *x, const double *tau, double *out)``
    ``out = [ν̇ | q̇]`` followed by the Jacobian ``∂[ν̇ | q̇] / ∂[q | u | τ]``, row by
    row, by the residual route (:func:`kanedyn.compiled.derivatives.residual_kernel`:
    straight-line code for ``M⁻¹`` and ``-∂R/∂[q | u]``, then their product as a loop).
``int prefix_step(double *x, const double *tau, double h)``
    One classic RK4 step in place, the step of :func:`kanedyn.simulate` operation for
    operation (quaternions normalized after the step and inside ``rhs``); returns 0, or
    1 when the new state is not finite.
``int PREFIX_project(double *x)`` (a model with closed loops)
    The state projected in place onto the loops' constraint manifold
    (:func:`kanedyn.compiled.kernels.projection`: one Newton step on ``Φ(q) = 0``, then
    the speeds), which ``PREFIX_step`` applies after every RK4 step as the native
    engine does. With loops ``PREFIX_rhs`` is the tree closed by the loops' independent
    rows (:func:`kanedyn.dynamics.loop_rows.constrained_accelerations`), the rows chosen
    once at the model's assembled initial state
    (:func:`kanedyn.dynamics.loops.independent_rows`; redundant rows, as Bricard's, are
    chosen again at every evaluation, :func:`kanedyn.spatial.plucker.solve_pivoted`), and ``PREFIX_derivatives`` is the
    forward-mode Jacobian (:func:`kanedyn.compiled.derivatives.derivative_kernel`).

**Flexible bodies** (``Body.modes``): the state is ``x = [q_joints | η | u | ξ]``
(``PREFIX_NQ = nq + nf`` coordinates, ``PREFIX_NU = n + nf`` speeds, ``PREFIX_NF = nf``
modal coordinates named ``body.y1``, ... and modal speeds ``body.y1_dot``, ...; units
1 and 1/s), ``out = [u̇ | ξ̇ | q̇_joints | η̇ = ξ]``, and ``tau`` stays the joints'
(``PREFIX_N = n``): the traced :func:`kanedyn.dynamics.flex_recursion.flexible_run`
(each body's modes condensed into ABA), as the native engine runs it, with ``prefix_step``'s
RK4 over the full state; ``prefix_derivatives`` is then the forward-mode Jacobian. With
``parameters="runtime"`` the modal data (:class:`kanedyn.Modes`, held by
:class:`kanedyn.model.plan.Params`) are fields of ``prefix_params`` as the rigid
parameters are (:func:`kanedyn.compiled.derivatives.modal_symbols`:
``beam_modal_mass_y1_y1``, ``beam_modal_stiffness_y1_y2``, ``beam_modal_damping_...``,
``beam_modal_P_x_y1``, ``beam_modal_H_...``, the integrals ``L``, ``N`` and the geometric
stiffness when the body has them, and the position and mode shapes of every node a joint
attaches at); the modal mass is then factored at run time. A flexible body's own mass,
inertia, mass centre and joint points are fields as any body's; the fields are
independent (changing a modal integral does not change the rigid body's numbers, nor
the other way round).

With ``body_loads=True`` every function takes ``const double *loads`` after ``tau``
(per body a torque then a force at its mass centre, body axes), with
``parameters="runtime"`` a ``const PREFIX_params *p`` after those.

The model's constants (masses, inertias, joint placements, springs, gravity) are folded
into the code, or read from ``p``; the header lists the sizes and the names and units
of the entries of the state, of ``tau`` and of ``loads``. Compiled
with ``-ffp-contract=off`` (GCC's default in ISO C mode, ``-std=c99``), the results are
those of the Python engine to the last bit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from kanedyn.compiled.derivatives import (
    central_symbols,
    derivative_kernel,
    parameter_symbols,
    residual_kernel,
    rotor_symbols,
    unrolled,
)
from kanedyn.compiled.kernels import (
    Traced,
    body_load_names,
    projection,
    rk4_step,
    supports,
    traced,
)
from kanedyn.compiled.tape import Scalar, Tape, Value
from kanedyn.errors import ModelError
from kanedyn.model import Model
from kanedyn.model.plan import params_of

__all__ = [
    "PARAMETERS",
    "Parameter",
    "expression",
    "finite_check",
    "function",
    "literal",
    "refusal",
    "runtime_parameters",
    "to_c",
]

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def call(op: str, x: str) -> str:
    """The C library call of the tape's unary operation ``op`` on the operand ``x``
    (``sign`` is ``copysign(1.0, x)``)."""
    return f"copysign(1.0, {x})" if op == "sign" else f"{op}({x})"


def literal(x: float) -> str:
    """``x`` as an exact C99 double literal: its shortest decimal form when that is the
    value exactly (``0.5``, ``2.0``: read exactly by any compiler), else a hexadecimal
    floating constant (``0x1.999999999999ap-4``: exact by definition, C99 6.4.4.2)."""
    x = float(x)
    if math.isnan(x):
        return "(0.0 / 0.0)"
    if math.isinf(x):
        return "(1.0 / 0.0)" if x > 0 else "(-1.0 / 0.0)"
    text = repr(x)
    if "e" in text or "n" in text or Fraction(Decimal(text)) != Fraction(x):
        text = x.hex()
    return f"({text})" if x < 0 else text


#: an inlined expression is given a name of its own beyond this depth, so the compilers
#: see no deep nesting
_MAX_DEPTH = 12


#: operations per generated C function at most: the compilers' optimizers take time
#: that grows faster than a function's length, so a long kernel is cut into parts
CHUNK = 2000

_REF = re.compile("\x00([0-9]+)\x00")


def function(tape: Tape, name: str, outputs: Sequence[Scalar], inputs: dict[str, str],
             args: str = "const double *x, const double *e", chunk: int | None = None) -> str:  # fmt: skip
    """``static void name(<args>, double *out)``: the operations of ``tape`` that
    ``outputs`` need, in order; ``inputs`` maps an input's name to its C expression
    (``x[3]``, ``e[0]``, ``p->link0_mass``), ``args`` are the parameters before ``out``.

    Compact: an operation whose value is used once is written inside the expression
    that uses it (up to a depth of :data:`_MAX_DEPTH`), the others get a named local
    (``double t4 = ...;``). Each operation is still one IEEE operation on the same
    operands, so the results are those of the statement-per-operation form to the last
    bit (without contraction into fused multiply-adds: ``-ffp-contract=off``). Inputs
    are read first, so ``out`` may alias them.

    With ``chunk``, a kernel of more operations is cut into static functions
    ``name_0``, ``name_1``, ... of about ``chunk`` operations each, called in turn by
    ``name``; a value one part computes and a later part reads passes through a work
    array ``w`` on ``name``'s stack (the same operations in the same order).
    """
    needed = tape.needed(outputs)
    uses: dict[int, int] = {}
    for i in needed:
        op, a, b = tape.nodes[i]
        if op != "in":
            for arg in (a, b):
                if arg is not None and arg[0] == "n":
                    uses[arg[1]] = uses.get(arg[1], 0) + 1
    output_at: dict[int, list[int]] = {}
    for j, x in enumerate(outputs):
        if isinstance(x, Value):
            uses[x.index] = uses.get(x.index, 0) + 1
            output_at.setdefault(x.index, []).append(j)
    # statements in order: (node defined or -1, output index or -1, text, operations);
    # a named value is referenced as "\0<node>\0" until the parts are known
    stmts: list[tuple[int, int, str, int]] = []
    text: dict[int, str] = {}  # the C text of each node's value
    depth: dict[int, int] = {}
    ops: dict[int, int] = {}  # operations in an inlined value's text

    def operand(arg: tuple) -> tuple[str, int, int]:
        if arg[0] == "c":
            return literal(arg[1]), 0, 0
        return text[arg[1]], depth[arg[1]], ops[arg[1]]

    for i in needed:
        op, a, b = tape.nodes[i]
        if op == "in":
            expr, d, n_ops, inline = inputs[a], 0, 0, False
        else:
            ta, da, oa = operand(a)
            if op == "neg":
                expr, d, n_ops = f"(-{ta})", da + 1, oa + 1
            elif op in _BINARY:
                tb, db, ob = operand(b)
                expr, d, n_ops = f"({ta} {_BINARY[op]} {tb})", max(da, db) + 1, oa + ob + 1
            else:
                expr, d, n_ops = call(op, ta), da + 1, oa + 1
            inline = uses.get(i, 0) == 1 and d <= _MAX_DEPTH
        if inline:
            text[i], depth[i], ops[i] = expr, d, n_ops
            for j in output_at.get(i, ()):
                stmts.append((-1, j, expr, n_ops))
        else:
            stmts.append((i, -1, expr[1:-1] if expr.startswith("(") else expr, n_ops))
            text[i], depth[i], ops[i] = f"\x00{i}\x00", 0, 0
            for j in output_at.get(i, ()):
                stmts.append((-1, j, text[i], 0))
    stmts += [(-1, j, literal(float(x)), 0) for j, x in enumerate(outputs)
              if not isinstance(x, Value)]  # fmt: skip
    # the parts: consecutive statements of about `chunk` operations
    part: list[int] = []
    total = 0
    for *_, n_ops in stmts:
        part.append(total // chunk if chunk else 0)
        total += n_ops
    defined_in = {st[0]: part[k] for k, st in enumerate(stmts) if st[0] >= 0}
    slot: dict[int, int] = {}  # work-array slot of each value read by a later part
    for k, st in enumerate(stmts):
        for m in _REF.finditer(st[2]):
            node = int(m.group(1))
            if defined_in[node] != part[k] and node not in slot:
                slot[node] = len(slot)
    local = {node: f"t{k}" for k, node in enumerate(sorted(defined_in))}
    params = [a.replace("*", " ").split()[-1] for a in args.split(",")]
    n_parts = part[-1] + 1 if part else 1
    bodies: list[list[str]] = [[] for _ in range(n_parts)]
    for k, (node, j, expr, _) in enumerate(stmts):
        here = part[k]

        def ref(m: re.Match, here: int = here) -> str:
            node = int(m.group(1))
            return local[node] if defined_in[node] == here else f"w[{slot[node]}]"

        expr = _REF.sub(ref, expr)
        if node >= 0:
            bodies[here].append(f"    double {local[node]} = {expr};")
            if node in slot:
                bodies[here].append(f"    w[{slot[node]}] = {local[node]};")
        else:
            bodies[here].append(f"    out[{j}] = {expr};")
    unused = [f"    (void){v};" for v in params]
    if n_parts == 1:
        head = [f"static void {name}({args}, double *out)", "{"]
        return "\n".join(head + unused + bodies[0] + ["}"])
    parts = []
    for k, body in enumerate(bodies):
        head = [f"static void {name}_{k}({args}, double *w, double *out)", "{"]
        parts.append("\n".join(head + unused + ["    (void)w;", "    (void)out;"] + body + ["}"]))
    arguments = ", ".join(params)
    main = [f"static void {name}({args}, double *out)", "{", f"    double w[{max(len(slot), 1)}];"]
    main += [f"    {name}_{k}({arguments}, w, out);" for k in range(n_parts)]
    return "\n\n".join(parts) + "\n\n" + "\n".join(main + ["}"])


def expression(tape: Tape, output: Scalar, env: dict[str, str]) -> str:
    """``output`` as one C expression, with the inputs named in ``env`` (input name ->
    C expression) and every operation parenthesized in the tape's order."""
    text: dict[int, str] = {}

    def operand(arg: tuple) -> str:
        return literal(arg[1]) if arg[0] == "c" else text[arg[1]]

    for i in tape.needed([output]):
        op, a, b = tape.nodes[i]
        if op == "in":
            text[i] = env[a]
        elif op == "neg":
            text[i] = f"(-{operand(a)})"
        elif op in _BINARY:
            text[i] = f"({operand(a)} {_BINARY[op]} {operand(b)})"
        else:
            text[i] = call(op, operand(a))
    return text[output.index] if isinstance(output, Value) else literal(float(output))


def finite_check(count: str) -> str:
    """C statements returning 1 when one of the first ``count`` entries of ``out`` is
    NaN or infinite (``x - x != 0``), else 0: the generated functions' result code."""
    return (
        f"    for (int i = 0; i < {count}; ++i)\n"
        "        if (!(out[i] - out[i] == 0.0)) return 1;\n"
        "    return 0;"
    )


#: the SI unit of each field of Params, as the generated C documents it
_PARAM_UNITS = {"mass": "kg", "inertia": "kg.m^2", "com": "m", "h_embedded": "kg.m^2/s",
                "inner_point": "m", "outer_point": "m", "gravity": "m/s^2",
                "mu": "m^3/s^2", "J2": "1", "radius": "m", "center": "m",
                "rotor_inertia": "kg.m^2", "rotor_transverse": "kg.m^2",
                # the modal data: η has unit 1, the mode shapes carry the length
                "modal_mass": "kg.m^2", "modal_stiffness": "N.m", "modal_damping": "N.m.s",
                "modal_P": "kg.m", "modal_H": "kg.m^2", "modal_L": "kg.m^2",
                "modal_N": "kg.m^2", "node_positions": "m", "node_Psi": "m",
                "node_Theta": "1"}  # fmt: skip
#: the geometric stiffness per row of Modes.geometric: per unit acceleration (rows 0-2),
#: per unit angular acceleration or product of rates (rows 3-11)
_GEOMETRIC_UNITS = ["kg.m"] * 3 + ["kg.m^2"] * 9
PARAMETERS = ("folded", "runtime")


@attrs.frozen
class Parameter:
    """One field of the generated ``prefix_params`` struct: its C ``field`` name, the
    parameter's ``name`` (of :func:`kanedyn.compiled.derivatives.parameter_symbols`),
    its SI ``unit``, the model's ``value`` and the Params entries it sets (``keys``)."""

    field: str
    name: str
    unit: str
    value: float
    keys: tuple[tuple[str, int], ...]


def runtime_parameters(model: Model) -> list[Parameter]:
    """The model's parameters as the fields of ``prefix_params``, in the order of
    :func:`kanedyn.compiled.derivatives.parameter_symbols`, then a central field's
    (:func:`~kanedyn.compiled.derivatives.central_symbols`), then the geared rotors'
    moments (:func:`~kanedyn.compiled.derivatives.rotor_symbols`:
    ``joint.rotor.inertia``, ``joint.rotor.transverse``): the name with every
    character that cannot be in a C identifier made ``_`` (``link0.mass`` ->
    ``link0_mass``; a clash gets ``_2``, ``_3``, ...)."""
    from kanedyn.model.names import effort_units

    values = params_of(model)
    torque = effort_units(model)
    out: list[Parameter] = []
    taken: set[str] = set()
    for name, keys in parameter_symbols(model) + central_symbols(model) + rotor_symbols(model):
        field, index = keys[0]
        base = re.sub(r"[^0-9A-Za-z_]", "_", name)
        base = base if not base[0].isdigit() else f"p_{base}"
        c_name, k = base, 1
        while c_name in taken:
            k += 1
            c_name = f"{base}_{k}"
        taken.add(c_name)
        if field in ("stiffness", "damping"):
            per = "rad" if torque[index] == "N.m" else "m"
            unit = f"{torque[index]}/{per}" if field == "stiffness" else f"{torque[index]}.s/{per}"
        elif field == "modal_geometric":
            unit = _GEOMETRIC_UNITS[int(name.split(".")[-3])]  # body.geometric.k.a.b
        else:
            unit = _PARAM_UNITS[field]
        if field.startswith("rotor_"):  # a rotor's moment: not a Params field
            rotor: Any = model.joints[index].rotor
            value = float(rotor.inertia if field == "rotor_inertia" else rotor.transverse)
        else:
            value = float(np.ravel(getattr(values, field))[index])
        out.append(Parameter(c_name, name, unit, value, tuple(keys)))
    return out


def refusal(model: Model) -> str | None:
    """Why :func:`to_c` cannot write ``model``, naming the loops or joints at fault and
    what is missing, or None.

    The C is the compiled engine's traced equations (:func:`kanedyn.compiled.supports`
    says which models it traces), an RK4 step and, with closed loops, the projection
    onto their constraints after each step (:func:`kanedyn.compiled.kernels.projection`).
    Flexible bodies (``Body.modes``) are written with their modal states
    (:func:`kanedyn.dynamics.flex_recursion.flexible_run`; with closed loops
    :func:`kanedyn.dynamics.loop_rows.flexible_accelerations`), except with a loop that
    closes on a flexible body (:func:`supports`)."""
    return supports(model, flexible=True)


def to_c(model: Model, out_dir: str | Path, prefix: str = "kd_model", *,
         derivatives: bool = False, parameters: str = "folded",
         body_loads: bool = False) -> tuple[Path, Path]:  # fmt: skip
    """Write ``prefix.h`` and ``prefix.c`` (see the module docstring) into ``out_dir``.

    Parameters
    ----------
    model : Model
        A model the compiled engine takes (:func:`refusal`), flexible bodies included.
    out_dir : str or Path
        Created if missing.
    prefix : str
        A C identifier: the files' names and the prefix of every symbol.
    derivatives : bool
        Also write ``prefix_derivatives`` (the Jacobian, many times the size of the
        rest; default False).
    parameters : {"folded", "runtime"}
        ``"folded"``: the model's numbers are constants of the code (the smallest and
        fastest code; the results are the engine's to the last bit). ``"runtime"``:
        they are the fields of a ``prefix_params`` struct (:func:`runtime_parameters`:
        the geared rotors' moments and the flexible bodies' modal data included), an
        argument of every function, and ``prefix_default_params`` holds the model's
        values.
    body_loads : bool
        Every function also takes ``loads`` (``PREFIX_NL = 6 nb``, after ``tau``): per
        body, a torque then a force at its mass centre, in its body axes (N.m, N), added
        to the model's loads (as :class:`kanedyn.Torque` and :class:`kanedyn.Force` with
        ``frame="body"``; default False).

    Returns
    -------
    (Path, Path)
        The header and the source.
    """
    if not (prefix.isidentifier() and prefix.isascii()):
        raise ModelError(f"to_c: prefix must be a C identifier, got {prefix!r}")
    if parameters not in PARAMETERS:
        raise ModelError(f"to_c: parameters must be 'folded' or 'runtime', got {parameters!r}")
    why = refusal(model)
    if why is not None:
        raise ModelError(f"to_c: cannot write C for this model: {why}")
    runtime = parameters == "runtime"
    params = runtime_parameters(model) if runtime else []
    symbols = [list(par.keys) for par in params]
    tr = traced(model, frozenset(), False, False, None, efforts=True, symbols=symbols,
                body_loads=body_loads)  # fmt: skip
    res: Traced | None = None
    proj: Traced | None = None
    if model.loops:
        proj = projection(model, frozenset(), None, efforts=True, symbols=symbols)
    if model.loops or model.nf:  # the forward-mode Jacobian (the residual route: rigid trees)
        if derivatives:
            res = derivative_kernel(model, symbols=symbols, body_loads=body_loads)[0]
    elif derivatives:
        res = unrolled(residual_kernel(model, symbols=symbols, body_loads=body_loads))
    header, source = _sources(model, prefix, tr, res, params, body_loads, proj)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    h_path, c_path = out / f"{prefix}.h", out / f"{prefix}.c"
    h_path.write_text(header)
    c_path.write_text(source)
    return h_path, c_path


def _table(rows: list[tuple[str, str, str]], lead: str) -> str:
    """Rows ``(index, name, unit)`` as aligned lines of a C comment."""
    w0 = max((len(r[0]) for r in rows), default=0)
    w1 = max((len(r[1]) for r in rows), default=0)
    return "\n".join(f"{lead}{a:<{w0}}  {b:<{w1}}  [{c}]" for a, b, c in rows)


def _sources(model: Model, prefix: str, tr: Traced, res: Traced | None,
             params: list[Parameter], body_loads: bool,
             proj: Traced | None = None) -> tuple[str, str]:  # fmt: skip
    """The header and the source of :func:`to_c`: ``tr`` the kernel of ``prefix_rhs``,
    ``res`` (unrolled) that of ``prefix_derivatives`` or None (with ``proj``, the
    projection of a model with loops, ``res`` is the whole forward-mode Jacobian)."""
    from kanedyn.model.names import (
        coordinate_names,
        coordinate_units,
        effort_units,
        speed_names,
        speed_units,
    )

    # the state x = [q_joints | η | u | ξ] (nq, n: with the modal states); the efforts
    # are the joints' (ne)
    nq, n, ne, nf = model.nq_total, model.n_total, model.n, model.nf
    nx = nq + n
    P = prefix.upper()
    runtime = bool(params)
    inputs = {name: f"x[{i}]" for i, name in enumerate(tr.args[:nx])}
    inputs.update({name: f"e[{i}]" for i, name in enumerate(tr.args[nx : nx + ne])})
    inputs.update({f"d{i}": f"p->{par.field}" for i, par in enumerate(params)})
    nb = model.nb
    # the body loads: per body, the torque then the force
    inputs.update({name: f"loads[{6 * ((k // 3) % nb) + 3 * (k // (3 * nb)) + k % 3}]"
                   for k, name in enumerate(body_load_names(nb))})  # fmt: skip
    ptype = f"{prefix}_params"
    ldecl = ", const double *loads" if body_loads else ""  # the body loads argument
    larg = ", loads" if body_loads else ""
    pdecl = f"{ldecl}, const {ptype} *p" if runtime else ldecl  # the arguments after tau
    parg = f"{larg}, p" if runtime else larg  # and passed on
    kargs = f"const double *x, const double *e{pdecl}"
    derivatives = res is not None
    n_val = len(tr.outputs)
    rhs = function(tr.tape, f"{prefix}_kernel", tr.outputs, inputs, kargs, CHUNK)
    # the residual route's parts: [ν̇ | q̇], ∂q̇/∂[q | u], M⁻¹, -∂R/∂[q | u], row by row
    jac = (
        function(res.tape, f"{prefix}_jacobian", res.outputs, inputs, kargs, CHUNK)
        if res is not None
        else ""
    )
    n_parts = len(res.outputs) if res is not None else 0
    loops = proj is not None
    pp_decl = f", const {prefix}_params *p" if runtime else ""  # the projection's arguments
    pp_arg = ", p" if runtime else ""
    project = (
        function(proj.tape, f"{prefix}_projection", proj.outputs, inputs,
                 f"const double *x{pp_decl}", CHUNK)
        if proj is not None
        else ""
    )  # fmt: skip
    perm = [n + i for i in range(nq)] + list(range(n))
    step = rk4_step()  # the step's arithmetic, traced from kanedyn.dynamics.steppers

    def stage(k: str, a: str) -> str:
        return expression(step.tape, step.stage, {"x": "x[i]", "a": a, "k": f"{k}[r]"})

    update = expression(step.tape, step.update, {"x": "x[i]", "h6": "h6", "k1": "k1[r]",
                        "k2": "k2[r]", "k3": "k3[r]", "k4": "k4[r]"})  # fmt: skip
    norm = [expression(step.tape, v, {f"q{c}": f"x[j[{c}]]" for c in range(4)})
            for v in step.normalized]  # fmt: skip
    quats = [list(map(int, row)) for row in model.layout.quat_q]
    coords, speeds = coordinate_names(model), speed_names(model)
    state_rows = [(f"x[{i}]", s, u) for i, (s, u) in
                  enumerate(zip(coords + speeds, coordinate_units(model) + speed_units(model),
                                strict=True))]  # fmt: skip
    tau_rows = [(f"tau[{r}]", s, u) for r, (s, u) in enumerate(zip(speeds[:ne], effort_units(model)[:ne],
                                                                   strict=True))]  # fmt: skip
    loads_doc = nl = ""
    if body_loads:
        rows = [(f"loads[{6 * i + 3 * v + c}]", f"{body.name}.{what}.{'xyz'[c]}", unit)
                for i, body in enumerate(model.bodies)
                for v, (what, unit) in enumerate((("torque", "N.m"), ("force", "N")))
                for c in range(3)]  # fmt: skip
        loads_doc = f"""
 *
 * Body loads ({P}_NL), added to the model's: per body a torque and a force at its mass
 * centre, components in the body's axes:
{_table(rows, " *   ")}"""
        nl = f"#define {P}_NL {6 * nb}\n"
    if runtime:
        fields = "\n".join(
            f"    double {par.field}; /* {par.name} [{par.unit}] */" for par in params
        )
        params_h = f"""
/* The model's parameters (masses, inertias about the mass centres in body axes, mass
 * centres, embedded momenta, joint points, springs and dampers per speed, gravity in N,
 * a central field's mu, J2, radius and centre in N, the geared rotors' axial and
 * transverse moments, the flexible bodies' modal data: modal mass, stiffness and
 * damping per pair of modes, the modal integrals P, H, L, N and the geometric stiffness
 * in body axes, the position and mode shapes of each node a joint attaches at), read at
 * run time; {prefix}_default_params holds the model's values. An off-diagonal inertia
 * entry sets both mirrored entries of the tensor, as does an off-diagonal entry of a
 * modal matrix (and N_ijab sets N_jiba). */
typedef struct {{
{fields}
}} {ptype};

#define {P}_NP {len(params)}
extern const {ptype} {prefix}_default_params;
"""
        values = ",\n    ".join(f"{literal(par.value)} /* {par.field} */" for par in params)
        params_c = f"\nconst {ptype} {prefix}_default_params = {{\n    {values}\n}};\n"
        pdoc = ", with the parameters p"
    else:
        params_h = params_c = pdoc = ""
    loops_doc = project_h = ""
    step_doc = ",\n * then the state projected onto the loops);" if loops else ");"
    if proj is not None:
        from kanedyn.dynamics.loops import loop_plan as loop_rows_of
        from kanedyn.dynamics.loops import row_partition

        part = row_partition(model)
        names = ", ".join(repr(loop.name) for loop in model.loops)
        independent = ", ".join(speeds[int(r)] for r in part.independent)
        m = len(loop_rows_of(model).rot)
        chosen = (
            f"{len(part.rows)} independent\n * loop rows (rows {', '.join(map(str, part.rows))} "
            "of the loops' constraint rows), chosen once at\n * the model's initial state, "
            "assembled"
            if len(part.rows) == m
            else f"{len(part.rows)} of its {m}\n * loop rows (redundant rows: chosen again at "
            "every evaluation by a pivoted LDL^T);\n * at the model's initial state, assembled"
        )
        loops_doc = f"""
 *
 * Closed loops ({names}): {prefix}_rhs is the tree closed by {chosen}; there the
 * independent speeds are {independent} (the others follow from the loop constraints).
 * {prefix}_step projects the state onto the constraint manifold after every step
 * ({prefix}_project). Start from an assembled state (kd.Model.assemble)."""
        project_h = f"""
/* x projected in place onto the loops' constraint manifold (one Newton step on the
 * closure residual, then the speeds), as {prefix}_step does after every step; 0, or 1
 * if the new state is not finite */
int {prefix}_project(double *x{pp_decl});
"""
    jac_h = (f"""
/* out = [nu_dot | q_dot] then d[nu_dot | q_dot]/d[q | u | tau] row by row
 * ({P}_NOUT + {P}_NJAC); 0, or 1 if an output is not finite */
int {prefix}_derivatives(const double *x, const double *tau{pdecl}, double *out);
""" if derivatives else "")  # fmt: skip
    njac = f"#define {P}_NJAC ({n_val} * {nx + ne})\n" if derivatives else ""
    flex_doc = ""
    layout = "[q_joints | eta | u | xi]" if nf else "[q | u]"
    if nf:
        from kanedyn.model.names import modal_names

        bodies = ", ".join(
            f"{model.bodies[i].name} ({sl.stop - sl.start})" for i, sl in model.modal_slices()
        )
        flex_doc = f"""
 * Flexible bodies, modes each: {bodies}. Their modal coordinates eta
 * (x[{model.nq}] ... x[{nq - 1}], named body.mode: {modal_names(model)[0]}, ...) follow the joints'
 * coordinates and their modal speeds xi = d(eta)/dt (x[{nq + ne}] ... x[{nx - 1}], body.mode_dot)
 * follow the joints' speeds; unit 1 and 1/s (the mode shapes carry the length). The
 * modal data (modal mass, stiffness, damping, the integrals, the geometric stiffness)
 * are {"fields of p (" + prefix + "_params)" if runtime else "constants of the code"}."""
    header = f"""/* {prefix}.h: equations of motion of a {model.nb}-body model, generated by kanedyn
 * (kd.codegen.to_c). C99; no dynamic memory, no recursion, no global mutable state:
 * every function is reentrant. See {prefix}.c.
 *
 * State x = {layout} ({P}_NX = {nq} coordinates ({P}_NQ) + {n} speeds ({P}_NU)):
{_table(state_rows, " *   ")}
 * A spherical joint's quaternion is (qx, qy, qz, qw), scalar last; its speeds are the
 * body's angular velocity in body axes.
 *
 * Generalized efforts tau ({P}_N, one per joint speed), added to the joint springs and
 * dampers:
{_table(tau_rows, " *   ")}{flex_doc}{loads_doc}{loops_doc}
 */
#ifndef {P}_H
#define {P}_H

#define {P}_NQ {nq}
#define {P}_N {ne}
#define {P}_NU {n}
#define {P}_NF {nf}
#define {P}_NX {nx}
#define {P}_NOUT {n_val}
{nl}{njac}{params_h}
/* names of the entries of x */
extern const char *const {prefix}_state_names[{P}_NX];

/* out = [nu_dot | q_dot] ({P}_NOUT) at x{pdoc}; 0, or 1 if an output is not finite */
int {prefix}_rhs(const double *x, const double *tau{pdecl}, double *out);
{jac_h}{project_h}
/* one classic RK4 step of size h in place (kd.simulate's step, quaternions normalized{step_doc}
 * 0, or 1 if the new state is not finite */
int {prefix}_step(double *x, const double *tau{pdecl}, double h);

#endif
"""
    name_list = ",\n    ".join(f'"{s}"' for s in coords + speeds)
    perm_c = ", ".join(map(str, perm)) or "0"
    quat_c = ", ".join("{" + ", ".join(map(str, q)) + "}" for q in quats) or "{0, 0, 0, 0}"
    jac_c = (f"""
{jac}

int {prefix}_derivatives(const double *x, const double *tau{pdecl}, double *out)
{{
    {prefix}_jacobian(x, tau{parg}, out);
{finite_check(f"{P}_NOUT + {P}_NJAC")}
}}
""" if derivatives and (loops or nf) else f"""
{jac}

int {prefix}_derivatives(const double *x, const double *tau{pdecl}, double *out)
{{
    /* w: [nu_dot | q_dot], d(q_dot)/d[q | u], M^-1 and -dR/d[q | u], row by row */
    double w[{n_parts}];
    const double *dqd = w + {P}_NOUT, *Minv = dqd + {P}_NQ * {P}_NX, *dR = Minv + {P}_N * {P}_N;
    double *J = out + {P}_NOUT;
    int i, j, k;
    {prefix}_jacobian(x, tau{parg}, w);
    for (i = 0; i < {P}_NOUT; ++i) out[i] = w[i];
    for (i = 0; i < {P}_N; ++i) {{ /* d(nu_dot)/d[q | u | tau] = [M^-1 (-dR/d[q | u]) | M^-1] */
        double *row = J + i * ({P}_NX + {P}_N);
        for (j = 0; j < {P}_NX; ++j) {{
            double s = 0.0;
            for (k = 0; k < {P}_N; ++k) s += Minv[i * {P}_N + k] * dR[k * {P}_NX + j];
            row[j] = s;
        }}
        for (j = 0; j < {P}_N; ++j) row[{P}_NX + j] = Minv[i * {P}_N + j];
    }}
    for (i = 0; i < {P}_NQ; ++i) {{ /* d(q_dot)/d[q | u | tau] = [d(q_dot)/d[q | u] | 0] */
        double *row = J + ({P}_N + i) * ({P}_NX + {P}_N);
        for (j = 0; j < {P}_NX; ++j) row[j] = dqd[i * {P}_NX + j];
        for (j = 0; j < {P}_N; ++j) row[{P}_NX + j] = 0.0;
    }}
{finite_check(f"{P}_NOUT + {P}_NJAC")}
}}
""" if derivatives else "")  # fmt: skip
    norm_c = ("" if not quats else f"""
    for (i = 0; i < {len(quats)}; ++i) {{
        const int *j = {prefix}_quat[i];
        const double q[4] = {{{", ".join(norm)}}};
        x[j[0]] = q[0]; x[j[1]] = q[1]; x[j[2]] = q[2]; x[j[3]] = q[3];
    }}""")  # fmt: skip
    quat_table = (f"static const int {prefix}_quat[{len(quats)}][4] = {{{quat_c}}};\n"
                  if quats else "")  # fmt: skip
    project_c = (f"""
{project}

int {prefix}_project(double *x{pp_decl})
{{
    double out[{P}_NX];
    int i;
    {prefix}_projection(x{pp_arg}, out);
    for (i = 0; i < {P}_NX; ++i) x[i] = out[i];
{finite_check(f"{P}_NX")}
}}
""" if loops else "")  # fmt: skip
    project_step = (f"""
    {prefix}_projection(x{pp_arg}, xs); /* onto the loops' constraint manifold */
    for (i = 0; i < {P}_NX; ++i) x[i] = xs[i];""" if loops else "")  # fmt: skip
    source = f"""/* {prefix}.c: generated by kanedyn (kd.codegen.to_c). Standalone C99; link with -lm.
 * Compile with -ffp-contract=off (the default with -std=c99) for results equal to
 * kanedyn's to the last bit. */
#include <math.h>
#include "{prefix}.h"

const char *const {prefix}_state_names[{P}_NX] = {{
    {name_list}
}};
{params_c}
{rhs}

int {prefix}_rhs(const double *x, const double *tau{pdecl}, double *out)
{{
    {prefix}_kernel(x, tau{parg}, out);
{finite_check(f"{P}_NOUT")}
}}
{jac_c}{project_c}
static const int {prefix}_rate[{max(nx, 1)}] = {{{perm_c}}}; /* output holding x[i]'s rate */
{quat_table}
int {prefix}_step(double *x, const double *tau{pdecl}, double h)
{{
    double k1[{P}_NOUT], k2[{P}_NOUT], k3[{P}_NOUT], k4[{P}_NOUT];
    double xs[{P}_NX];
    const double half = 0.5 * h, h6 = h / 6.0;
    int i;
    {prefix}_kernel(x, tau{parg}, k1);
    for (i = 0; i < {P}_NX; ++i) {{ const int r = {prefix}_rate[i]; xs[i] = {stage("k1", "half")}; }}
    {prefix}_kernel(xs, tau{parg}, k2);
    for (i = 0; i < {P}_NX; ++i) {{ const int r = {prefix}_rate[i]; xs[i] = {stage("k2", "half")}; }}
    {prefix}_kernel(xs, tau{parg}, k3);
    for (i = 0; i < {P}_NX; ++i) {{ const int r = {prefix}_rate[i]; xs[i] = {stage("k3", "h")}; }}
    {prefix}_kernel(xs, tau{parg}, k4);
    for (i = 0; i < {P}_NX; ++i) {{
        const int r = {prefix}_rate[i];
        x[i] = {update};
    }}{norm_c}{project_step}
    for (i = 0; i < {P}_NX; ++i)
        if (!(x[i] - x[i] == 0.0)) return 1;
    return 0;
}}
"""
    return header, source
