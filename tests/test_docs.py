"""The documentation covers the public API: every name in ``kanedyn.__all__`` is
documented on the API reference page (docs/reference/api.md), and every tutorial
notebook is listed on the tutorials page."""

import re
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
