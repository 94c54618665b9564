"""The documentation covers the public API: every name in ``kanedyn.__all__`` is
documented on the API reference page (docs/reference/api.md), every tutorial
notebook is listed on the tutorials page, and every ```` ```python ```` block outside the
how-tos (which tests/test_howto.py runs) runs on its own: no page shows a fragment."""

import re
import warnings
from pathlib import Path

import pytest

import kanedyn

DOCS = Path(__file__).parents[1] / "docs"
NOTEBOOKS = Path(__file__).parents[1] / "notebooks"

pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="no docs/ folder (installed package)")


def test_every_public_name_is_in_the_api_reference():
    text = (DOCS / "reference" / "api.md").read_text()
    documented = set(re.findall(r"^\.\. auto\w+::\s+kanedyn\.(\w+)", text, flags=re.M))
    modules = {"msd", "io", "rotation", "examples", "symbolic"}
    missing = [
        name
        for name in kanedyn.__all__
        if name not in documented and not (name in modules and f"kanedyn.{name}" in text)
    ]
    assert not missing, f"add these public names to docs/reference/api.md: {missing}"


def test_every_notebook_is_a_tutorial():
    listed = (DOCS / "tutorials" / "index.md").read_text()
    for nb in sorted(NOTEBOOKS.glob("*.py")):
        assert re.search(rf"^{re.escape(nb.stem)}$", listed, flags=re.M), (
            f"{nb.name}: list it in docs/tutorials/index.md"
        )
        link = DOCS / "tutorials" / nb.name
        assert link.exists() and link.resolve() == nb.resolve(), (
            f"docs/tutorials/{nb.name} must link to notebooks/{nb.name}"
        )


PAGES = sorted(p for p in DOCS.rglob("*.md") if "howto" not in p.parts and "_build" not in p.parts)
PYTHON_BLOCKS = [
    (page, k, block)
    for page in PAGES
    for k, block in enumerate(
        re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M), 1
    )
]


def test_the_pages_outside_the_howtos_show_python():
    assert {p.name for p, _, _ in PYTHON_BLOCKS} >= {"index.md", "toml-schema.md", "api.md"}


@pytest.mark.parametrize(
    ("page", "k", "block"), PYTHON_BLOCKS, ids=[f"{p.name}-{k}" for p, k, _ in PYTHON_BLOCKS]
)
def test_every_python_block_outside_the_howtos_runs_whole(page, k, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(block, f"{page.name} block {k}", "exec"), {"__name__": "__docs__"})
