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
    row (:mod:`kanedyn.compiled.derivatives`).
``int PREFIX_rk4_step(double *x, const double *tau, double h)``
    One classic RK4 step in place, the step of :func:`kanedyn.simulate` operation for
    operation (quaternions normalized after the step and inside ``rhs``); returns 0, or
    1 when the new state is not finite.

The model's constants (masses, inertias, joint placements, springs, gravity) are folded
into the code; the header lists the sizes and the names of the state entries. Compiled
with ``-ffp-contract=off`` (GCC's default in ISO C mode, ``-std=c99``), the results are
those of the Python engine to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from kanedyn.compiled.derivatives import derivative_kernel
from kanedyn.compiled.kernels import rk4_step, supports
from kanedyn.compiled.tape import Scalar, Tape, Value
from kanedyn.errors import ModelError
from kanedyn.model import Model

__all__ = ["expression", "finite_check", "function", "to_c"]

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def call(op: str, x: str) -> str:
    """The C library call of the tape's unary operation ``op`` on the operand ``x``
    (``sign`` is ``copysign(1.0, x)``)."""
    return f"copysign(1.0, {x})" if op == "sign" else f"{op}({x})"


def _literal(x: float) -> str:
    """``x`` as an exact C99 double literal (hexadecimal floating constant)."""
    x = float(x)
    if math.isnan(x):
        return "(0.0 / 0.0)"
    if math.isinf(x):
        return "(1.0 / 0.0)" if x > 0 else "(-1.0 / 0.0)"
    return f"({x.hex()})" if x < 0 else x.hex()


def function(tape: Tape, name: str, outputs: Sequence[Scalar],
             inputs: dict[str, str]) -> str:  # fmt: skip
    """``static void name(const double *x, const double *e, double *out)``: the
    operations of ``tape`` that ``outputs`` need, one statement each, in order;
    ``inputs`` maps an input's name to its C expression (``x[3]``, ``e[0]``)."""
    lines = [f"static void {name}(const double *x, const double *e, double *out)", "{"]
    lines.append("    (void)x;")
    lines.append("    (void)e;")

    def operand(arg: tuple) -> str:
        return _literal(arg[1]) if arg[0] == "c" else f"t{arg[1]}"

    for i in tape.needed(outputs):
        op, a, b = tape.nodes[i]
        if op == "in":
            text = inputs[a]
        elif op == "neg":
            text = f"-{operand(a)}"
        elif op in _BINARY:
            text = f"{operand(a)} {_BINARY[op]} {operand(b)}"
        else:
            text = call(op, operand(a))
        lines.append(f"    const double t{i} = {text};")
    for j, x in enumerate(outputs):
        val = f"t{x.index}" if isinstance(x, Value) else _literal(float(x))
        lines.append(f"    out[{j}] = {val};")
    lines.append("}")
    return "\n".join(lines)


def expression(tape: Tape, output: Scalar, env: dict[str, str]) -> str:
    """``output`` as one C expression, with the inputs named in ``env`` (input name ->
    C expression) and every operation parenthesized in the tape's order."""
    text: dict[int, str] = {}

    def operand(arg: tuple) -> str:
        return _literal(arg[1]) if arg[0] == "c" else text[arg[1]]

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
    return text[output.index] if isinstance(output, Value) else _literal(float(output))


def finite_check(count: str) -> str:
    """C statements returning 1 when one of the first ``count`` entries of ``out`` is
    NaN or infinite (``x - x != 0``), else 0: the generated functions' result code."""
    return (
        f"    for (int i = 0; i < {count}; ++i)\n"
        "        if (!(out[i] - out[i] == 0.0)) return 1;\n"
        "    return 0;"
    )


def to_c(model: Model, out_dir: str | Path, prefix: str = "kd_model") -> tuple[Path, Path]:
    """Write ``prefix.h`` and ``prefix.c`` (see the module docstring) into ``out_dir``.

    Parameters
    ----------
    model : Model
        A model the compiled engine takes (:func:`kanedyn.compiled.supports`).
    out_dir : str or Path
        Created if missing.
    prefix : str
        A C identifier: the files' names and the prefix of every symbol.

    Returns
    -------
    (Path, Path)
        The header and the source.
    """
    if not prefix.isidentifier():
        raise ModelError(f"to_c: prefix must be a C identifier, got {prefix!r}")
    why = supports(model)
    if why is not None:
        raise ModelError(f"to_c: cannot compile this model: {why}")
    nq, n = model.nq, model.n
    nx = nq + n
    tr, n_val = derivative_kernel(model)
    inputs = {name: f"x[{i}]" for i, name in enumerate(tr.args[:nx])}
    inputs.update({name: f"e[{i}]" for i, name in enumerate(tr.args[nx:])})
    P = prefix.upper()
    rhs = function(tr.tape, f"{prefix}_kernel", tr.outputs[:n_val], inputs)
    jac = function(tr.tape, f"{prefix}_jacobian", tr.outputs, inputs)
    perm = [n + i for i in range(nq)] + list(range(n))
    step = rk4_step()  # the step's arithmetic, traced from kanedyn.dynamics.steppers

    def stage(k: str, a: str) -> str:
        return expression(step.tape, step.stage, {"x": "x[i]", "a": a, "k": f"{k}[r]"})

    update = expression(step.tape, step.update, {"x": "x[i]", "h6": "h6", "k1": "k1[r]",
                        "k2": "k2[r]", "k3": "k3[r]", "k4": "k4[r]"})  # fmt: skip
    norm = [expression(step.tape, v, {f"q{c}": f"x[j[{c}]]" for c in range(4)})
            for v in step.normalized]  # fmt: skip
    quats = [list(map(int, row)) for row in model.layout.quat_q]
    from kanedyn.model.names import coordinate_names, speed_names

    coords, names = coordinate_names(model), speed_names(model)
    header = f"""/* {prefix}.h: equations of motion of a {model.nb}-body model, generated by kanedyn.
 * State x = [q | u]: {nq} coordinates, {n} speeds. See {prefix}.c. */
#ifndef {P}_H
#define {P}_H

#define {P}_NQ {nq}
#define {P}_N {n}
#define {P}_NX {nx}
#define {P}_NOUT {n_val}
#define {P}_NJAC ({n_val} * {nx + n})

/* names of the entries of x */
extern const char *const {prefix}_state_names[{P}_NX];

/* out = [nu_dot | q_dot] ({P}_NOUT); 0, or 1 if an output is not finite */
int {prefix}_rhs(const double *x, const double *tau, double *out);

/* out = [nu_dot | q_dot] then d[nu_dot | q_dot]/d[q | u | tau] row by row
 * ({P}_NOUT + {P}_NJAC); 0, or 1 if an output is not finite */
int {prefix}_derivatives(const double *x, const double *tau, double *out);

/* one classic RK4 step of size h in place; 0, or 1 if the new state is not finite */
int {prefix}_rk4_step(double *x, const double *tau, double h);

#endif
"""
    name_list = ",\n    ".join(f'"{s}"' for s in coords + names)
    perm_c = ", ".join(map(str, perm)) or "0"
    quat_c = ", ".join("{" + ", ".join(map(str, q)) + "}" for q in quats) or "{0, 0, 0, 0}"
    source = f"""/* {prefix}.c: generated by kanedyn (kd.codegen.to_c). Standalone C99; link with -lm.
 * Compile with -ffp-contract=off (the default with -std=c99) for results equal to
 * kanedyn's to the last bit. */
#include <math.h>
#include "{prefix}.h"

const char *const {prefix}_state_names[{P}_NX] = {{
    {name_list}
}};

{rhs}

{jac}

int {prefix}_rhs(const double *x, const double *tau, double *out)
{{
    {prefix}_kernel(x, tau, out);
{finite_check(f"{P}_NOUT")}
}}

int {prefix}_derivatives(const double *x, const double *tau, double *out)
{{
    {prefix}_jacobian(x, tau, out);
{finite_check(f"{P}_NOUT + {P}_NJAC")}
}}

static const int {prefix}_rate[{max(nx, 1)}] = {{{perm_c}}}; /* output holding x[i]'s rate */
static const int {prefix}_quat[{max(len(quats), 1)}][4] = {{{quat_c}}};

int {prefix}_rk4_step(double *x, const double *tau, double h)
{{
    double k1[{P}_NOUT + 1], k2[{P}_NOUT + 1], k3[{P}_NOUT + 1], k4[{P}_NOUT + 1];
    double xs[{P}_NX + 1];
    const double half = 0.5 * h, h6 = h / 6.0;
    int i;
    {prefix}_kernel(x, tau, k1);
    for (i = 0; i < {P}_NX; ++i) {{ const int r = {prefix}_rate[i]; xs[i] = {stage("k1", "half")}; }}
    {prefix}_kernel(xs, tau, k2);
    for (i = 0; i < {P}_NX; ++i) {{ const int r = {prefix}_rate[i]; xs[i] = {stage("k2", "half")}; }}
    {prefix}_kernel(xs, tau, k3);
    for (i = 0; i < {P}_NX; ++i) {{ const int r = {prefix}_rate[i]; xs[i] = {stage("k3", "h")}; }}
    {prefix}_kernel(xs, tau, k4);
    for (i = 0; i < {P}_NX; ++i) {{
        const int r = {prefix}_rate[i];
        x[i] = {update};
    }}
    for (i = 0; i < {len(quats)}; ++i) {{
        const int *j = {prefix}_quat[i];
        const double q[4] = {{{", ".join(norm)}}};
        x[j[0]] = q[0]; x[j[1]] = q[1]; x[j[2]] = q[2]; x[j[3]] = q[3];
    }}
    for (i = 0; i < {P}_NX; ++i)
        if (!(x[i] - x[i] == 0.0)) return 1;
    return 0;
}}
"""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    h_path, c_path = out / f"{prefix}.h", out / f"{prefix}.c"
    h_path.write_text(header)
    c_path.write_text(source)
    return h_path, c_path
