"""Vector forward mode: a Jacobian's tangents for all directions at once, one lane each.

The scalar forward mode (:func:`kanedyn.compiled.derivatives.jacobian`) records a value
per (node, direction) pair: the residual route's kernel for a 50-link chain then holds
180k operations of straight-line code, which LLVM compiles at its fastest level only and
the CPU runs from outside its instruction cache. Here the tangent of a node is a vector
over the directions (the lanes), and the code that computes it is written once per node,
however many directions there are (the vector mode of Griewank and Walther, *Evaluating
Derivatives*, 2nd ed., 2008, section 3.3), by the same rules (:meth:`Tape.partials`).

Three facts keep it as sparse as the scalar mode:

* a node's tangent is nonzero only in the hull of its operands' lane ranges (a seed's
  is its own lane); on a kinematic tree numbered from the root, the tangents of a body's
  kinematics with respect to the joints' coordinates cover its ancestors' lanes, not all;
* lanes are stored in blocks of ``width`` (one machine vector:
  :func:`kanedyn.compiled.native.vector_width`); a node's tangent is the blocks of its
  range;
* consecutive nodes with the same block range form a *group*: one loop over its blocks
  computes all of them, the values used only inside the group kept in registers; the
  group's range is cut into *segments* where each tangent from an earlier group is
  either wholly present or known to be zero, so no code multiplies by a known zero.

:func:`plan` lays this out for one :class:`Sweep` (the groups, their segments, and a
slot in a scratch array for each tangent a later group or the output reads); the LLVM
emitter (:func:`kanedyn.compiled.llvm.sweep_functions`) writes each segment as a loop of
vector operations. The results equal those of the scalar mode: the same operations in
the same order, on each lane.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kanedyn.compiled.tape import Scalar, Tape, Value

__all__ = ["WIDTH", "Group", "Plan", "Sweep", "plan"]

#: lanes per block by default: one 256-bit vector of doubles
WIDTH = 4
#: nodes per group at most: a group is one loop body, and LLVM's code generation time
#: grows faster than a function's length
MAX_GROUP = 200


@attrs.frozen(eq=False)
class Sweep:
    """The Jacobian ``∂outputs[r]/∂wrt[j]`` (``fixed`` held constant), written to the
    kernel's outputs at ``out[offset + r ld + j]``."""

    outputs: tuple[Scalar, ...]
    wrt: tuple[Value, ...]
    fixed: tuple[Scalar, ...]
    offset: int
    ld: int

    @property
    def extent(self) -> int:
        """One past the last output entry written."""
        return self.offset + (len(self.outputs) - 1) * self.ld + len(self.wrt)


@attrs.frozen(eq=False)
class Group:
    """Consecutive tape nodes whose tangents cover the same blocks ``[lo, hi)``; the
    segments ``[s, e)`` cut that range where a tangent read from an earlier group (or
    a seed) starts or ends."""

    nodes: list[int]
    lo: int
    hi: int
    segments: list[tuple[int, int]]
    external: list[int]
    stored: list[int]


@attrs.frozen(eq=False)
class Plan:
    """How one :class:`Sweep` runs, in blocks of ``width`` lanes: ``blocks[i]`` the
    block range of node i's tangent, ``seeds[i]`` the lane of an input differentiated
    with respect to, ``partials[i]`` its local partials (:meth:`Tape.partials`),
    ``groups`` in order, ``slot[i]`` the first block of node i's tangent in the scratch
    array (``size`` blocks, shared between tangents whose uses do not overlap; a node
    has a slot exactly when a later group or the output reads it), ``n_blocks`` the
    lanes' blocks."""

    sweep: Sweep
    width: int
    blocks: dict[int, tuple[int, int]]
    seeds: dict[int, int]
    partials: dict[int, list[tuple[int, Scalar]]]
    groups: list[Group]
    slot: dict[int, int]
    size: int
    n_blocks: int

    @property
    def coefficients(self) -> list[Scalar]:
        """The traced values the tangents are scaled by (computed before the sweep)."""
        return [c for rules in self.partials.values() for _, c in rules]

    def lane_operations(self) -> int:
        """Vector operations of the sweep's groups (a block of a node's tangent each)."""
        return sum((e - s) * len(g.nodes) for g in self.groups for s, e in g.segments)


def plan(tape: Tape, sweep: Sweep, width: int = WIDTH) -> Plan:
    """The groups, segments and scratch slots of ``sweep`` on ``tape``, in blocks of
    ``width`` lanes; records the tangents' coefficients on the tape (see the module
    docstring)."""
    seeds = {v.index: j for j, v in enumerate(sweep.wrt)}
    stop = {x.index for x in sweep.fixed if isinstance(x, Value)}
    blocks: dict[int, tuple[int, int]] = {}
    partials: dict[int, list[tuple[int, Scalar]]] = {}
    order: list[int] = []
    for i in tape.needed(sweep.outputs, stop):
        if i in stop:
            continue
        if tape.nodes[i][0] == "in":
            if i in seeds:
                blocks[i] = (seeds[i] // width, seeds[i] // width + 1)
            continue
        rules = [(k, c) for k, c in tape.partials(i) if k in blocks]
        if not rules:
            continue
        spans = [blocks[k] for k, _ in rules]
        blocks[i] = (min(s for s, _ in spans), max(e for _, e in spans))
        partials[i] = rules
        order.append(i)

    # groups: runs of consecutive nodes with the same block range (MAX_GROUP at most)
    runs: list[list[int]] = []
    for i in order:
        if runs and blocks[runs[-1][-1]] == blocks[i] and len(runs[-1]) < MAX_GROUP:
            runs[-1].append(i)
        else:
            runs.append([i])
    group_of = {i: g for g, run in enumerate(runs) for i in run}
    outputs = {x.index for x in sweep.outputs if isinstance(x, Value) and x.index in blocks}
    last_use: dict[int, float] = {i: float("inf") for i in outputs}
    externals: list[list[int]] = []
    for g, run in enumerate(runs):
        ext: dict[int, None] = {}
        for i in run:
            for k, _ in partials[i]:
                if group_of.get(k) != g:
                    ext[k] = None
                    if k not in seeds:
                        last_use[k] = max(last_use.get(k, -1), g)
        externals.append(list(ext))

    groups: list[Group] = []
    free: list[tuple[int, int]] = []  # (start, length), sorted
    slot: dict[int, int] = {}
    top = 0
    frees_after: dict[int, list[int]] = {}
    for i, last in last_use.items():
        if last != float("inf"):
            frees_after.setdefault(int(last), []).append(i)
    for g, run in enumerate(runs):
        lo, hi = blocks[run[0]]
        cuts = {lo, hi}
        for k in externals[g]:
            cuts.update(blocks[k])
        edges = sorted(c for c in cuts if lo <= c <= hi)
        stored = [i for i in run if i in last_use and last_use[i] > g]
        for i in stored:
            span = hi - lo
            for f, (start, length) in enumerate(free):
                if length >= span:
                    slot[i] = start
                    free[f] = (start + span, length - span)
                    break
            else:
                slot[i] = top
                top += span
        free = [(s, n) for s, n in free if n > 0]
        for i in frees_after.get(g, []):
            free = _release(free, slot[i], blocks[i][1] - blocks[i][0])
        groups.append(
            Group(run, lo, hi, list(zip(edges, edges[1:], strict=False)), externals[g], stored)
        )
    n_blocks = -(-len(sweep.wrt) // width)
    return Plan(sweep, width, blocks, seeds, partials, groups, slot, top, n_blocks)


def _release(free: Sequence[tuple[int, int]], start: int, length: int) -> list[tuple[int, int]]:
    """``free`` with ``[start, start + length)`` added, adjacent intervals merged."""
    out: list[tuple[int, int]] = []
    for s, n in sorted([*free, (start, length)]):
        if out and out[-1][0] + out[-1][1] == s:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((s, n))
    return out
