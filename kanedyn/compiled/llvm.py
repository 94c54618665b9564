"""The LLVM IR emitter: a traced kernel and its fixed-step RK4 loops as one LLVM module.

The module (textual IR, compiled in-process by :mod:`kanedyn.compiled.native`) holds,
for one model, lock set and formulation:

``kernel(x, e, p, out)`` (internal)
    the tape's operations, straight-line: ``x`` the state ``[q | y]`` (nq + n), ``e``
    the effort inputs (``tau``, n, added to the joint springs and dampers; or the loads
    ``[T | F | Q]`` of :meth:`kanedyn.CompiledModel.rhs_with_loads`), ``p`` the batch's
    varying parameters, ``out`` the kernel's outputs in the Python kernel's order
    (``[ν̇ | q̇]``, or ``[ẏ | q̇ | ν]`` for MSD). A kernel with vector-mode Jacobians
    (:mod:`kanedyn.compiled.sweep`) calls the straight-line part, ``kernel.values``,
    then the sweeps' loops, ``kernel.sweep<k>.<j>`` (:func:`kernel_function`).
``i32 rhs(x, e, p, out)``
    the kernel, then 1 if an output is not finite (a zero pivot gives inf or NaN; a loop
    of vector comparisons, ``not_finite``, above :data:`LOOP_CHECK` outputs).
``i32 rhs_bound()``
    ``rhs`` on the four buffers whose addresses the caller stored once in the global
    ``bound`` (``[x, e, p, out]``): the one-state call, with no arguments to convert.
``i64 rhs_batch(X, E, P, OUT, B, e_step, p_step)``
    the kernel on B rows of ``X``; member b reads ``E + b e_step``, ``P + b p_step``;
    returns 1 + the first member with a non-finite output, or 0.
``i64 rk4(x, e, p, steps, h, first, stride, out, ldo)``
    ``steps`` classic RK4 steps of size ``h`` in place on ``x`` (the step of
    :func:`kanedyn.dynamics.steppers.rk4_step`, operation for operation: stage
    arguments ``x + (h/2) k``, update ``x + h/6 (((k1 + 2 k2) + 2 k3) + k4)``), the
    quaternions normalized after every step (and, inside the kernel, at every stage, as
    :func:`kanedyn.joints.normalize_quaternions` does), then, with a ``project``
    function, the state projected (a model with loops); after global step
    ``first + s + 1`` divisible by ``stride`` the state is written to row ``c`` of
    ``out`` (row length ``ldo``). Returns 0, or the global index of the first step whose
    state is not finite (the state is left there).
``void rk4_batch(X, E, P, OUT, B, ldo, p_step, steps, h, first, stride, status)``
    ``rk4`` for each of B members (rows of X; member b writes ``OUT + b nx``),
    ``status[b]`` its return value.

Arithmetic is plain ``fadd``/``fsub``/``fmul``/``fdiv`` with no fast-math flags, which
LLVM neither reorders nor contracts into fused multiply-adds, so the results are those of
the Python kernel (:mod:`kanedyn.compiled.python`) to the last bit; ``sin``, ``cos``,
``sqrt``, ``fabs`` and ``copysign`` are the ``llvm.*.f64`` intrinsics (the C library's, as
Python's ``math``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kanedyn.compiled.kernels import rk4_step
from kanedyn.compiled.sweep import WIDTH, Plan
from kanedyn.compiled.tape import Scalar, Tape, Value

__all__ = ["constant", "inline", "kernel_function", "module", "sweep_functions"]

_BINARY = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
_FUNCS = {"sin": "@llvm.sin.f64", "cos": "@llvm.cos.f64", "sqrt": "@llvm.sqrt.f64",
          "fabs": "@llvm.fabs.f64"}  # fmt: skip


def _call(op: str, x: str) -> str:
    """The intrinsic call of the tape's unary operation ``op`` on the operand ``x``
    (``sign`` is ``copysign(1.0, x)``)."""
    if op == "sign":
        return f"call double @llvm.copysign.f64(double 1.0, double {x})"
    return f"call double {_FUNCS[op]}(double {x})"


def constant(x: float) -> str:
    """``x`` as an exact LLVM double literal (its IEEE bits in hex)."""
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(x)))[0]:016X}"


#: the kernel's parameters (x, e, p, out), shared by its straight-line part
_KERNEL_PARAMS = (
    "ptr noalias nocapture readonly %x, ptr noalias nocapture readonly %e, "
    "ptr noalias nocapture readonly %p, ptr noalias nocapture %out"
)


def kernel_function(tape: Tape, name: str, outputs: Sequence[Scalar],
                    inputs: dict[str, tuple[str, int]], sweeps: Sequence[Plan] = (),
                    fast: bool = False) -> str:  # fmt: skip
    """``define internal void @name(ptr x, ptr e, ptr p, ptr out)``: the operations of
    ``tape`` that ``outputs`` need, in order, with ``inputs`` mapping each input's name
    to (pointer argument, index).

    With vector-mode Jacobians ``sweeps`` (:func:`sweep_functions`), ``@name`` calls
    ``@name.values``, the straight-line operations, which also store the sweeps'
    coefficients in an array (``%cf``), then runs the sweeps' loops, writing to ``out``
    where their :class:`Sweep` says. ``fast`` marks ``@name.values`` ``optnone``, so
    that LLVM compiles it with its fastest instruction selection and register allocation
    while the loops get its full code generation: for long straight-line code, whose
    compile time at level 2 grows faster than its length (:data:`native.LARGE
    <kanedyn.compiled.native.LARGE>`).

    The sweeps' scratch array and coefficients are on the stack up to
    :data:`STACK_SCRATCH` bytes, beyond from ``malloc`` (released before returning;
    without memory the kernel writes a NaN to ``out[0]``, which the caller's finiteness
    check reports): a thread's stack can be as small as 512 KiB."""
    # the sweeps' coefficients go through memory: kept in registers across the sweeps'
    # loops, thousands of long-lived values make register allocation slow
    coefficients: dict[int, int] = {}
    for c in (c for plan in sweeps for c in plan.coefficients):
        if isinstance(c, Value):
            coefficients.setdefault(c.index, len(coefficients))
    head = (
        f"define internal void @{name}{'.values' if sweeps else ''}({_KERNEL_PARAMS}"
        f"{', ptr noalias nocapture %cf' if sweeps else ''}) nounwind noinline"
        f"{' optnone' if fast and sweeps else ''} {{"
    )
    lines = [head, "entry:"]

    def operand(arg: tuple[str, object]) -> str:
        return constant(arg[1]) if arg[0] == "c" else f"%v{arg[1]}"  # type: ignore[arg-type]

    needed = [*outputs, *(Value(tape, i) for i in coefficients)]
    for i in tape.needed(needed):
        op, a, b = tape.nodes[i]
        if op == "in":
            ptr, k = inputs[a]
            lines.append(f"  %a{i} = getelementptr inbounds double, ptr %{ptr}, i64 {k}")
            lines.append(f"  %v{i} = load double, ptr %a{i}")
        elif op == "neg":
            lines.append(f"  %v{i} = fneg double {operand(a)}")
        elif op in _BINARY:
            lines.append(f"  %v{i} = {_BINARY[op]} double {operand(a)}, {operand(b)}")
        else:
            lines.append(f"  %v{i} = {_call(op, operand(a))}")
        if i in coefficients:
            lines.append(f"  %c{i} = getelementptr inbounds double, ptr %cf, i64 {coefficients[i]}")
            lines.append(f"  store double %v{i}, ptr %c{i}")
    for j, x in enumerate(outputs):
        val = f"%v{x.index}" if isinstance(x, Value) else constant(float(x))
        lines.append(f"  %o{j} = getelementptr inbounds double, ptr %out, i64 {j}")
        lines.append(f"  store double {val}, ptr %o{j}")
    lines += ["  ret void", "}"]
    if not sweeps:
        return "\n".join(lines)
    size = max(1, *(plan.size for plan in sweeps))
    n_bytes = size * sweeps[0].width * 8 + 8 * max(1, len(coefficients))
    lines += [
        "",
        f"define internal void @{name}({_KERNEL_PARAMS}) nounwind noinline {{",
        "entry:",
    ]
    heap = n_bytes > STACK_SCRATCH
    if heap:  # scratch and coefficients in one block from malloc, 64-byte aligned
        lines += [
            f"  %raw = call ptr @malloc(i64 {n_bytes + 64})",
            "  %none = icmp eq ptr %raw, null",
            "  br i1 %none, label %nomem, label %run",
            "nomem:",  # no memory: a NaN output, which the caller reports
            f"  store double {constant(float('nan'))}, ptr %out",
            "  ret void",
            "run:",
            "  %ri = ptrtoint ptr %raw to i64",
            "  %ra = add i64 %ri, 63",
            "  %rb = and i64 %ra, -64",
            "  %scr = inttoptr i64 %rb to ptr",
            f"  %cf = getelementptr inbounds <{sweeps[0].width} x double>, ptr %scr, i64 {size}",
        ]
    else:
        lines += [
            f"  %scr = alloca <{sweeps[0].width} x double>, i64 {size}, align 64",
            f"  %cf = alloca double, i64 {max(1, len(coefficients))}, align 8",
        ]
    lines.append(f"  call void @{name}.values(ptr %x, ptr %e, ptr %p, ptr %out, ptr %cf)")
    functions = []
    for uid, plan in enumerate(sweeps):
        parts = sweep_functions(plan, f"{name}.sweep{uid}", coefficients)
        lines += [f"  call void @{name}.sweep{uid}.{k}(ptr %scr, ptr %cf, ptr %out)"
                  for k in range(len(parts))]  # fmt: skip
        functions += parts
    if heap:
        lines.append("  call void @free(ptr %raw)")
    lines += ["  ret void", "}"]
    return "\n\n".join(["\n".join(lines), *functions])


#: the largest scratch (bytes) a kernel with sweeps keeps on the stack
STACK_SCRATCH = 256 * 1024

_VEC = f"<{WIDTH} x double>"
_ZERO = "zeroinitializer"


def _vector(lanes: Sequence[float]) -> str:
    return "<" + ", ".join(f"double {constant(x)}" for x in lanes) + ">"


#: a sweep's code is cut into functions of about this many IR lines (at group
#: boundaries): LLVM's code generation time grows faster than a function's length
CHUNK = 4000


def sweep_functions(plan: Plan, name: str, coefficients: dict[int, int]) -> list[str]:
    """The IR of one vector-mode Jacobian (:mod:`kanedyn.compiled.sweep`): functions
    ``@<name>.<k>(ptr scr, ptr cf, ptr out)``, to be called in order, with ``scr`` a
    scratch array of ``plan.size`` blocks, ``cf`` the tangents' coefficients (node
    ``i``'s at ``coefficients[i]``) and ``out`` the kernel's outputs. Each segment of
    each group is one basic block of vector operations, looping over its blocks when it
    has more than one; the Jacobian's rows are then copied to ``out``."""
    functions: list[str] = []
    lines: list[str] = []
    count = 0
    width = plan.width
    vec = f"<{width} x double>"

    def close() -> None:
        nonlocal lines
        if lines:
            functions.append("\n".join([
                f"define internal void @{name}.{len(functions)}(ptr noalias nocapture %scr, "
                "ptr noalias nocapture readonly %cf, ptr noalias nocapture %out) "
                "nounwind noinline {", "entry:", *lines, "  ret void", "}",
            ]))  # fmt: skip
            lines = []

    def new(text: str) -> str:
        nonlocal count
        count += 1
        value = f"%w{count}"
        lines.append(f"  {value} = {text}")
        return value

    def address(node: int, k: int | str) -> str:
        base = plan.slot[node] - plan.blocks[node][0]
        idx = new(f"add i64 {k}, {base}") if isinstance(k, str) else str(k + base)
        return new(f"getelementptr inbounds {vec}, ptr %scr, i64 {idx}")

    def seed(node: int) -> str:
        lanes = [0.0] * width
        lanes[plan.seeds[node] % width] = 1.0
        return _vector(lanes)

    def splat(c: Value) -> str:
        # loaded where it is used: LLVM folds it into the product as a broadcast
        # operand, where values loaded once per group would be held across the loop
        where = new(f"getelementptr inbounds double, ptr %cf, i64 {coefficients[c.index]}")
        one = new(f"insertelement {vec} poison, double {new(f'load double, ptr {where}')}, i64 0")
        return new(f"shufflevector {vec} {one}, {vec} poison, <{width} x i32> {_ZERO}")

    for gi, group in enumerate(plan.groups):
        if len(lines) > CHUNK:
            close()
        for si, (s, e) in enumerate(group.segments):
            label = f"g{gi}.{si}"
            k: int | str = s
            if e - s > 1:
                lines += [f"  br label %{label}.pre", f"{label}.pre:", f"  br label %{label}",
                          f"{label}:"]  # fmt: skip
                k = f"%{label}.k"
                lines.append(f"  {k} = phi i64 [{s}, %{label}.pre], [%{label}.next, %{label}]")
            cur: dict[int, str | None] = {}
            for x in group.external:
                lo, hi = plan.blocks[x]
                if x in plan.seeds:
                    cur[x] = seed(x) if lo == s else None
                elif lo <= s and e <= hi:
                    cur[x] = new(f"load {vec}, ptr {address(x, k)}, align 32")
                else:
                    cur[x] = None
            for i in group.nodes:
                acc: str | None = None
                for j, c in plan.partials[i]:
                    t = cur[j]
                    if t is None:
                        continue
                    if c == 1.0 or c == -1.0:
                        if acc is None:
                            acc = t if c == 1.0 else new(f"fneg {vec} {t}")
                        else:
                            acc = new(f"{'fadd' if c == 1.0 else 'fsub'} {vec} {acc}, {t}")
                        continue
                    factor = splat(c) if isinstance(c, Value) else _vector([c] * width)
                    term = new(f"fmul {vec} {factor}, {t}")
                    acc = term if acc is None else new(f"fadd {vec} {acc}, {term}")
                cur[i] = acc
                if i in plan.slot:  # stored: read after this group
                    lines.append(f"  store {vec} {acc or _ZERO}, ptr {address(i, k)}, align 32")
            if e - s > 1:
                lines += [f"  %{label}.next = add i64 {k}, 1",
                          f"  %{label}.more = icmp ult i64 %{label}.next, {e}",
                          f"  br i1 %{label}.more, label %{label}, label %{label}.end",
                          f"{label}.end:"]  # fmt: skip
    sweep = plan.sweep
    n = len(sweep.wrt)
    for r, y in enumerate(sweep.outputs):
        if len(lines) > CHUNK:
            close()
        node = y.index if isinstance(y, Value) else -1
        lo, hi = plan.blocks.get(node, (0, 0))
        for blk in range(plan.n_blocks):
            if not lo <= blk < hi:
                v = _ZERO
            elif node in plan.seeds:
                v = seed(node)
            else:
                v = new(f"load {vec}, ptr {address(node, blk)}, align 32")
            at = sweep.offset + r * sweep.ld + blk * width
            if (blk + 1) * width <= n:
                ptr = new(f"getelementptr inbounds double, ptr %out, i64 {at}")
                lines.append(f"  store {vec} {v}, ptr {ptr}, align 8")
                continue
            for lane in range(n - blk * width):
                one = "0.0" if v == _ZERO else new(f"extractelement {vec} {v}, i64 {lane}")
                ptr = new(f"getelementptr inbounds double, ptr %out, i64 {at + lane}")
                lines.append(f"  store double {one}, ptr {ptr}")
    close()
    return functions


class _Block:
    """Helper for the hand-written loops: fresh SSA names and IR lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def __call__(self, text: str) -> str:
        """Append ``%t = text``; returns ``%t``."""
        self.count += 1
        name = f"%t{self.count}"
        self.lines.append(f"  {name} = {text}")
        return name

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def load(self, ptr: str, k: int | str) -> str:
        g = self(f"getelementptr inbounds double, ptr {ptr}, i64 {k}")
        return self(f"load double, ptr {g}")

    def store(self, val: str, ptr: str, k: int | str) -> None:
        g = self(f"getelementptr inbounds double, ptr {ptr}, i64 {k}")
        self.raw(f"  store double {val}, ptr {g}")

    def not_finite(self, values: Sequence[str]) -> str:
        """An i1: some value is inf or NaN (``v - v`` is NaN exactly then)."""
        acc = "0.0"
        for v in values:
            acc = self(f"fadd double {acc}, {self(f'fsub double {v}, {v}')}")
        return self(f"fcmp uno double {acc}, 0.0")


def inline(b: _Block, tape: Tape, outputs: Sequence[Scalar], env: dict[str, str]) -> list[str]:
    """The operations of ``tape`` for ``outputs`` appended to ``b``, with the inputs named
    in ``env`` (input name -> IR operand); returns the outputs' operands."""
    val: dict[int, str] = {}

    def operand(arg: tuple) -> str:
        return constant(arg[1]) if arg[0] == "c" else val[arg[1]]

    for i in tape.needed(outputs):
        op, a, c = tape.nodes[i]
        if op == "in":
            val[i] = env[a]
        elif op == "neg":
            val[i] = b(f"fneg double {operand(a)}")
        elif op in _BINARY:
            val[i] = b(f"{_BINARY[op]} double {operand(a)}, {operand(c)}")
        else:
            val[i] = b(_call(op, operand(a)))
    return [val[x.index] if isinstance(x, Value) else constant(float(x)) for x in outputs]


def module(kernel: str, nx: int, n_out: int, perm: Sequence[int],
           quats: Sequence[Sequence[int]], settle: str | None = None,
           uncut: str | None = None) -> str:  # fmt: skip
    """The whole module around ``kernel`` (from :func:`kernel_function`, named
    ``kernel``): ``nx`` state entries, ``n_out`` kernel outputs, ``perm[i]`` the output
    holding the rate of state entry i, ``quats`` the state indices (x, y, z, w) of each
    quaternion. ``settle`` (a :func:`kernel_function` named ``settle``, the outputs of
    :func:`kanedyn.compiled.kernels.settled`) projects the state of a model with loops
    onto the constraint manifold after every RK4 step and gives the next step's first
    rates; ``uncut`` (named ``kernel_uncut``, the kernel traced with ``cut=False``)
    takes the stages of the steps clear of a singular configuration (:func:`_rk4`)."""
    parts = [
        "declare double @llvm.sin.f64(double)",
        "declare double @llvm.cos.f64(double)",
        "declare double @llvm.sqrt.f64(double)",
        "declare double @llvm.fabs.f64(double)",
        "declare double @llvm.copysign.f64(double, double)",
        f"declare i1 @llvm.vector.reduce.or.v{WIDTH}i1(<{WIDTH} x i1>)",
        "declare noalias ptr @malloc(i64) nounwind",
        "declare void @free(ptr) nounwind",
        _NOT_FINITE,
        kernel,
        *([settle] if settle else []),
        *([uncut] if settle and uncut else []),
        _rhs(n_out),
        _RHS_BOUND,
        _rhs_batch(nx, n_out),
        _rk4(nx, n_out, perm, quats, settle is not None, bool(settle and uncut)),
        _rk4_batch(nx),
    ]
    return "\n\n".join(parts) + "\n"


#: above this many outputs the finiteness check is a loop of vector operations
#: (:data:`_NOT_FINITE`), not straight-line code
LOOP_CHECK = 64

#: ``i1 @not_finite(ptr a, i64 n)``: some entry of ``a[0:n]`` is inf or NaN
#: (``v - v`` is NaN exactly then), four lanes at a time, the rest one by one
_NOT_FINITE = f"""define internal i1 @not_finite(ptr %a, i64 %n) nounwind {{
entry:
  %nv = and i64 %n, -{WIDTH}
  br label %vhead
vhead:
  %i = phi i64 [0, %entry], [%i1, %vbody]
  %acc = phi <{WIDTH} x i1> [{_ZERO}, %entry], [%acc1, %vbody]
  %vdone = icmp uge i64 %i, %nv
  br i1 %vdone, label %shead, label %vbody
vbody:
  %pv = getelementptr inbounds double, ptr %a, i64 %i
  %v = load {_VEC}, ptr %pv, align 8
  %d = fsub {_VEC} %v, %v
  %bad = fcmp uno {_VEC} %d, {_ZERO}
  %acc1 = or <{WIDTH} x i1> %acc, %bad
  %i1 = add i64 %i, {WIDTH}
  br label %vhead
shead:
  %j = phi i64 [%i, %vhead], [%j1, %sbody]
  %sacc = phi i1 [false, %vhead], [%sacc1, %sbody]
  %sdone = icmp uge i64 %j, %n
  br i1 %sdone, label %exit, label %sbody
sbody:
  %ps = getelementptr inbounds double, ptr %a, i64 %j
  %s = load double, ptr %ps
  %sd = fsub double %s, %s
  %sbad = fcmp uno double %sd, 0.0
  %sacc1 = or i1 %sacc, %sbad
  %j1 = add i64 %j, 1
  br label %shead
exit:
  %any = call i1 @llvm.vector.reduce.or.v{WIDTH}i1(<{WIDTH} x i1> %acc)
  %r = or i1 %any, %sacc
  ret i1 %r
}}"""


def _check(b: _Block, ptr: str, n_out: int) -> str:
    """An i1: some of the ``n_out`` doubles at ``ptr`` is not finite."""
    if n_out > LOOP_CHECK:
        return b(f"call i1 @not_finite(ptr {ptr}, i64 {n_out})")
    return b.not_finite([b.load(ptr, j) for j in range(n_out)])


def _rhs(n_out: int) -> str:
    b = _Block()
    b.raw("  call void @kernel(ptr %x, ptr %e, ptr %p, ptr %out)")
    bad = _check(b, "%out", n_out)
    r = b(f"zext i1 {bad} to i32")
    return "\n".join(
        ["define i32 @rhs(ptr %x, ptr %e, ptr %p, ptr %out) nounwind {", "entry:", *b.lines,
         f"  ret i32 {r}", "}"]
    )  # fmt: skip


#: ``rhs`` on the four buffers whose addresses the caller stores once in ``@bound``
#: (x, e, p, out): a call with no arguments, for the one-state path, where converting
#: four pointer arguments costs the caller (ctypes) more than a small kernel
_RHS_BOUND = """@bound = global [4 x ptr] zeroinitializer

define i32 @rhs_bound() nounwind {
entry:
  %x = load ptr, ptr @bound
  %ae = getelementptr inbounds [4 x ptr], ptr @bound, i64 0, i64 1
  %e = load ptr, ptr %ae
  %ap = getelementptr inbounds [4 x ptr], ptr @bound, i64 0, i64 2
  %p = load ptr, ptr %ap
  %aout = getelementptr inbounds [4 x ptr], ptr @bound, i64 0, i64 3
  %out = load ptr, ptr %aout
  %r = call i32 @rhs(ptr %x, ptr %e, ptr %p, ptr %out)
  ret i32 %r
}"""


def _rhs_batch(nx: int, n_out: int) -> str:
    b = _Block()
    xb = b(f"getelementptr inbounds double, ptr %X, i64 {b('mul i64 %i, ' + str(nx))}")
    ob = b(f"getelementptr inbounds double, ptr %OUT, i64 {b('mul i64 %i, ' + str(n_out))}")
    eb = b(f"getelementptr inbounds double, ptr %E, i64 {b('mul i64 %i, %estep')}")
    pb = b(f"getelementptr inbounds double, ptr %P, i64 {b('mul i64 %i, %pstep')}")
    b.raw(f"  call void @kernel(ptr {xb}, ptr {eb}, ptr {pb}, ptr {ob})")
    bad = _check(b, ob, n_out)
    first = b("icmp eq i64 %res, 0")
    take = b(f"and i1 {bad}, {first}")
    i1 = b("add i64 %i, 1")
    res1 = b(f"select i1 {take}, i64 {i1}, i64 %res")
    return "\n".join(
        [
            "define i64 @rhs_batch(ptr %X, ptr %E, ptr %P, ptr %OUT, i64 %B, i64 %estep, "
            "i64 %pstep) nounwind {",
            "entry:",
            "  br label %head",
            "head:",
            f"  %i = phi i64 [0, %entry], [{i1}, %body]",
            f"  %res = phi i64 [0, %entry], [{res1}, %body]",
            "  %done = icmp sge i64 %i, %B",
            "  br i1 %done, label %exit, label %body",
            "body:",
            *b.lines,
            "  br label %head",
            "exit:",
            "  ret i64 %res",
            "}",
        ]
    )


def _rk4(nx: int, n_out: int, perm: Sequence[int], quats: Sequence[Sequence[int]],
         settle: bool = False, uncut: bool = False) -> str:  # fmt: skip
    """``@rk4``: ``steps`` RK4 steps on ``x``. With ``settle`` (a model with loops,
    ``@settle`` in the module), each step ends with the state projected onto the
    constraint manifold by ``@settle``, whose rates at the projected state are the next
    step's first (the kernel's, before the first step):
    :func:`kanedyn.compiled.kernels.settled`. With ``uncut`` the stages after the
    first take ``@kernel_uncut`` (no cut of the bias near a singular configuration)
    where ``@settle`` found the step's start clear of one
    (:data:`kanedyn.dynamics.loop_rows.CUT_MARGIN`), and a step whose end it finds not
    clear is taken again from its start with ``@kernel``."""
    step = rk4_step()  # the step's arithmetic, traced from kanedyn.dynamics.steppers
    b = _Block()
    fn, fast = "@kernel", "false"  # the stages' kernel; whether it is the uncut one
    if uncut:  # the stages' kernel, from the last step end; k1 kept for a retake
        fast = b(f"fcmp ogt double {b.load('%clearp', 0)}, 0.5")
        fn = b(f"select i1 {fast}, ptr @kernel_uncut, ptr @kernel")
        for j in range(n_out):
            b.store(b.load("%k1", j), "%k1s", j)
    x0 = [b.load("%x", i) for i in range(nx)]

    def stage(k: str, a: str) -> None:
        for i in range(nx):
            env = {"x": x0[i], "a": a, "k": b.load(k, perm[i])}
            b.store(inline(b, step.tape, [step.stage], env)[0], "%xs", i)

    if not settle:  # with @settle, k1 is the last step's (or the first, in entry)
        b.raw("  call void @kernel(ptr %x, ptr %e, ptr %p, ptr %k1)")
    stage("%k1", "%half")
    b.raw(f"  call void {fn}(ptr %xs, ptr %e, ptr %p, ptr %k2)")
    stage("%k2", "%half")
    b.raw(f"  call void {fn}(ptr %xs, ptr %e, ptr %p, ptr %k3)")
    stage("%k3", "%h")
    b.raw(f"  call void {fn}(ptr %xs, ptr %e, ptr %p, ptr %k4)")
    new = []
    for i in range(nx):
        env = {"x": x0[i], "h6": "%h6"}
        env.update({f"k{j}": b.load(f"%k{j}", perm[i]) for j in range(1, 5)})
        new.append(inline(b, step.tape, [step.update], env)[0])
    for quat in quats:
        env = {f"q{j}": new[i] for j, i in enumerate(quat)}
        for i, v in zip(quat, inline(b, step.tape, step.normalized, env), strict=True):
            new[i] = v
    for i in range(nx):
        b.store(new[i], "%x", i)
    if settle:  # the state projected after the step, in place; the next k1
        b.raw("  call void @settle(ptr %x, ptr %e, ptr %p, ptr %sb)")
        for i in range(nx):
            b.store(b.load("%sb", 1 + i), "%x", i)
        for j in range(n_out):
            b.store(b.load("%sb", 1 + nx + j), "%k1", j)
        if uncut:  # the next step's stages; this one again if its end is not clear
            clear = b.load("%sb", 0)
            b.store(clear, "%clearp", 0)
            ended = b(f"fcmp ogt double {clear}, 0.5")
            retake = b(f"and i1 {fast}, {b(f'xor i1 {ended}, true')}")
            b.raw(f"  br i1 {retake}, label %retake, label %taken")
            b.raw("retake:")
            for i in range(nx):
                b.store(x0[i], "%x", i)
            for j in range(n_out):
                b.store(b.load("%k1s", j), "%k1", j)
            b.store("0.0", "%clearp", 0)
            b.raw("  br label %body")
            b.raw("taken:")
        new = [b.load("%x", i) for i in range(nx)]
    bad = b.not_finite(new)
    body = b.lines
    w = _Block()
    w.count = b.count
    off = w("mul i64 %c, %ldo")
    for i in range(nx):
        w.store(new[i], "%out", w(f"add i64 {off}, {i}"))
    return "\n".join(
        [
            "define i64 @rk4(ptr %x, ptr %e, ptr %p, i64 %steps, double %h, i64 %first, "
            "i64 %stride, ptr %out, i64 %ldo) nounwind {",
            "entry:",
            f"  %k1 = alloca [{max(n_out, 1)} x double]",
            f"  %k2 = alloca [{max(n_out, 1)} x double]",
            f"  %k3 = alloca [{max(n_out, 1)} x double]",
            f"  %k4 = alloca [{max(n_out, 1)} x double]",
            f"  %xs = alloca [{max(nx, 1)} x double]",
            *(
                [
                    f"  %sb = alloca [{1 + nx + n_out} x double]",
                    "  call void @kernel(ptr %x, ptr %e, ptr %p, ptr %k1)",
                ]
                if settle
                else []
            ),  # fmt: skip
            *(
                [
                    f"  %k1s = alloca [{max(n_out, 1)} x double]",
                    "  %clearp = alloca [1 x double]",
                    "  store double 0.0, ptr %clearp",
                ]
                if uncut
                else []
            ),  # fmt: skip
            f"  %half = fmul double {constant(0.5)}, %h",
            f"  %h6 = fdiv double %h, {constant(6.0)}",
            "  br label %head",
            "head:",
            "  %s = phi i64 [0, %entry], [%s1, %cont]",
            "  %c = phi i64 [0, %entry], [%c1, %cont]",
            "  %done = icmp sge i64 %s, %steps",
            "  br i1 %done, label %exit, label %body",
            "body:",
            *body,
            "  %step0 = add i64 %first, %s",
            "  %step = add i64 %step0, 1",
            f"  br i1 {bad}, label %fail, label %ok",
            "ok:",
            "  %rem = urem i64 %step, %stride",
            "  %isout = icmp eq i64 %rem, 0",
            "  br i1 %isout, label %write, label %cont",
            "write:",
            *w.lines,
            "  %cn = add i64 %c, 1",
            "  br label %cont",
            "cont:",
            "  %c1 = phi i64 [%c, %ok], [%cn, %write]",
            "  %s1 = add i64 %s, 1",
            "  br label %head",
            "fail:",
            "  ret i64 %step",
            "exit:",
            "  ret i64 0",
            "}",
        ]
    )


def _rk4_batch(nx: int) -> str:
    return "\n".join(
        [
            "define void @rk4_batch(ptr %X, ptr %E, ptr %P, ptr %OUT, i64 %B, i64 %ldo, "
            "i64 %pstep, i64 %steps, double %h, i64 %first, i64 %stride, ptr %status) "
            "nounwind {",
            "entry:",
            "  br label %head",
            "head:",
            "  %i = phi i64 [0, %entry], [%i1, %body]",
            "  %done = icmp sge i64 %i, %B",
            "  br i1 %done, label %exit, label %body",
            "body:",
            f"  %xo = mul i64 %i, {nx}",
            "  %xb = getelementptr inbounds double, ptr %X, i64 %xo",
            "  %ob = getelementptr inbounds double, ptr %OUT, i64 %xo",
            "  %po = mul i64 %i, %pstep",
            "  %pb = getelementptr inbounds double, ptr %P, i64 %po",
            "  %r = call i64 @rk4(ptr %xb, ptr %E, ptr %pb, i64 %steps, double %h, "
            "i64 %first, i64 %stride, ptr %ob, i64 %ldo)",
            "  %sb = getelementptr inbounds i64, ptr %status, i64 %i",
            "  store i64 %r, ptr %sb",
            "  %i1 = add i64 %i, 1",
            "  br label %head",
            "exit:",
            "  ret void",
            "}",
        ]
    )
