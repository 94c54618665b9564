"""The layers hold (docs/architecture.md): no import cycle, no upward import, no private
name imported from another module.

The checks read the source (every ``import`` statement of every module under
``kanedyn/``, at module level and inside functions), so an import that runs only on some
path counts as much as one that runs at import time.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import NamedTuple

import kanedyn

PACKAGE = pathlib.Path(kanedyn.__file__).parent

#: The layers, bottom first. A module may import from its own layer and the layers below.
#: ``kanedyn`` itself (the public facade, ``__init__.py``) sits in the top layer and may
#: import anything; ``kanedyn.codegen`` is the compiled layer's facade.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "hooks"),
    ("spatial",),
    ("model",),
    ("joints",),
    ("dynamics",),
    ("compiled", "codegen"),
    ("symbolic",),
    ("simulation",),
    ("io",),
    ("", "plotting", "animation", "examples", "cli", "__main__", "coverage"),
)
LAYER = {part: level for level, parts in enumerate(LAYERS) for part in parts}

#: Upward imports that are allowed, each (importer, imported): the lazy plot and animate
#: hooks on results. ``Trajectory.plot`` and ``Trajectory.animate`` (and
#: ``MonteCarloResult.plot``, the same hook on a Monte Carlo result) import the plotting
#: and animation layers inside the method, so a numeric run never loads them (matplotlib,
#: meshcat). Every entry is checked to be function-local, and these edges are left out of
#: the cycle check. (The ``Model`` record's two calls into the dynamics go through
#: ``kanedyn.hooks``, set by the package root: no import.)
ALLOWED_UPWARD = {
    ("kanedyn.simulation.trajectory", "kanedyn.plotting"),
    ("kanedyn.simulation.trajectory", "kanedyn.animation"),
    ("kanedyn.simulation.montecarlo.result", "kanedyn.plotting"),
}


class Import(NamedTuple):
    """One imported kanedyn module (and name, for ``from m import name``) at a line;
    ``typing_only`` for an import under ``if TYPE_CHECKING:`` (annotations only)."""

    importer: str
    imported: str
    name: str | None
    line: int
    typing_only: bool

    def where(self) -> str:
        path = PACKAGE.parent / (self.importer.replace(".", "/"))
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        return f"{file.relative_to(PACKAGE.parent)}:{self.line}"


def modules() -> dict[str, pathlib.Path]:
    """Every module under kanedyn/, by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module name of a ``from ... import`` (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    package = importer.split(".")
    if MODULES[importer].name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def typing_only_nodes(tree: ast.AST) -> set[ast.AST]:
    """The statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(n for stmt in node.body for n in ast.walk(stmt))
    return out


def imports() -> Iterator[Import]:
    """Every import of a kanedyn module, module-level and function-local."""
    for importer, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = typing_only_nodes(tree)
        for node in ast.walk(tree):
            flag = node in typing_only
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "kanedyn":
                        yield Import(importer, alias.name, None, node.lineno, flag)
            elif isinstance(node, ast.ImportFrom):
                module = resolve(importer, node)
                if module.split(".")[0] != "kanedyn":
                    continue
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    if sub in MODULES:  # ``from package import submodule``
                        yield Import(importer, sub, None, node.lineno, flag)
                    else:
                        yield Import(importer, module, alias.name, node.lineno, flag)


IMPORTS = list(imports())


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYER[parts[1] if len(parts) > 1 else ""]


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if (m.split(".") + [""])[1] not in LAYER)
    assert not missing, f"modules outside the layer table (add them to LAYERS): {missing}"


def test_every_import_names_a_module_that_exists():
    """No import through a deprecated alias (``kanedyn.kinematics``, ...) or a typo."""
    bad = sorted({f"{i.where()}: {i.imported}" for i in IMPORTS if i.imported not in MODULES})
    assert not bad, "imports of modules that do not exist as files:\n" + "\n".join(bad)


def test_no_upward_import():
    bad = sorted(
        {
            f"{i.where()}: {i.importer} (layer {layer(i.importer)}) imports {i.imported} "
            f"(layer {layer(i.imported)})"
            for i in IMPORTS
            if i.imported in MODULES
            and layer(i.imported) > layer(i.importer)
            and (i.importer, i.imported) not in ALLOWED_UPWARD
        }
    )
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_allowed_upward_imports_are_lazy():
    """The allow-listed hooks import inside a function, never at module level."""
    for importer, imported in ALLOWED_UPWARD:
        tree = ast.parse(MODULES[importer].read_text(encoding="utf-8"))
        top = [
            node.lineno
            for node in tree.body
            if isinstance(node, ast.ImportFrom | ast.Import)
            and any(
                imported
                in (resolve(importer, node) if isinstance(node, ast.ImportFrom) else a.name)
                for a in node.names
            )
        ]
        assert not top, f"{importer} imports {imported} at module level (lines {top})"
        assert any(i.importer == importer and i.imported == imported for i in IMPORTS), (
            f"allow-list entry ({importer}, {imported}) matches no import: remove it"
        )


def test_no_private_name_imported_from_another_module():
    bad = [
        f"{i.where()}: {i.importer} imports {i.name} from {i.imported}"
        for i in IMPORTS
        if i.name is not None
        and i.name.startswith("_")
        and not i.name.startswith("__")
        and i.imported != i.importer
    ]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_no_private_name_read_through_another_module():
    """``module._name`` for an imported kanedyn module (``from kanedyn.dynamics import
    msd`` then ``msd._speeds``): the same rule as the imports above, for attribute reads."""
    bad = []
    for importer, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = resolve(importer, node)
                for a in node.names:
                    if f"{base}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in MODULES and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and aliases[node.value.id] != importer
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                bad.append(
                    f"{path.name}:{node.lineno}: {importer} reads {node.value.id}.{node.attr}"
                )
    assert not bad, "private names read across modules:\n" + "\n".join(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []


def test_no_import_cycle():
    """An import of a package counts as an import of its ``__init__``. Imports under
    ``if TYPE_CHECKING:`` run only for the type checker and are left out (they still
    count as upward or private imports above)."""
    edges: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], set[str]] = {}
    for i in IMPORTS:
        if i.imported == i.importer or i.typing_only or (i.importer, i.imported) in ALLOWED_UPWARD:
            continue
        edges.setdefault(i.importer, set()).add(i.imported)
        lines.setdefault((i.importer, i.imported), set()).add(i.where())
    found = cycles(edges)
    report = []
    for component in found:
        members = set(component)
        report.append(" <-> ".join(component))
        for a in component:
            for b in sorted(edges.get(a, set()) & members):
                report.append(f"    {a} -> {b} at {', '.join(sorted(lines[a, b]))}")
    assert not found, "import cycles:\n" + "\n".join(report)


def test_relative_imports_resolve_to_absolute_modules():
    """The walker reads ``from .x import y`` in a module and in a package's __init__."""

    def first(source: str) -> ast.ImportFrom:
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.ImportFrom)
        return node

    step = "kanedyn.simulation.conserving.step"
    package = "kanedyn.simulation.conserving"
    assert resolve(step, first("from .formulation import redundant")) == (
        "kanedyn.simulation.conserving.formulation"
    )
    assert resolve(step, first("from .. import output")) == "kanedyn.simulation"
    assert resolve(package, first("from .step import run")) == step
    assert resolve(step, first("from kanedyn.model import Model")) == "kanedyn.model"


def test_the_walker_sees_function_local_and_typing_only_imports():
    local = [i for i in IMPORTS if i.importer == "kanedyn.simulation.trajectory"]
    assert any(i.imported == "kanedyn.plotting" and not i.typing_only for i in local)
    typing = [i for i in IMPORTS if i.importer == "kanedyn.plotting" and i.typing_only]
    assert {i.imported for i in typing} >= {"kanedyn.simulation.trajectory"}


def test_the_model_hooks_are_set_however_the_model_layer_is_imported():
    """``kanedyn.hooks`` is set by the package root, which Python runs before any
    submodule: a fresh interpreter that imports only ``kanedyn.model`` still refuses a
    particle with nothing to move and closes a loop with ``Model.assemble``; and until
    then no dynamics module is loaded."""
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from kanedyn.errors import ModelError
        from kanedyn.model import Body, Joint, Model, State

        assert not [m for m in sys.modules if m.startswith("kanedyn.dynamics")]
        bob = Body("bob", mass=1.0, inertia=0, com=(0, 0, 0.5))
        try:
            Model([bob], [Joint.revolute("hinge", None, "bob", axis=3)])
        except ModelError as e:
            assert "joint 'hinge' has nothing to move" in str(e), e
        else:
            raise AssertionError("a particle on its hinge's axis was accepted")

        from kanedyn.examples import four_bar
        from kanedyn.dynamics.loops import loop_terms

        model = four_bar()
        state = State([0.3, 0.0, 0.0], [1.0, 0.0, 0.0])
        closed = model.assemble(state, fix=["crank"])
        assert closed.q[0] == 0.3
        rows = loop_terms(model, closed.q)
        assert np.max(np.abs(rows.Phi)) < 1e-10 and np.max(np.abs(rows.A @ closed.u)) < 1e-10
        print("ok")
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
