"""Every code block of every how-to page runs, in order, against the current API.

The how-tos (docs/howto/*.md) show code in ```` ```python ```` blocks (shown, not run by
the docs build) and ```` ```{code-cell} ```` blocks (run by myst-nb). Both kinds run
here, each page's blocks in one namespace, in a fresh folder, so a page cannot drift
from the API unnoticed.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

HOWTO = Path(__file__).parents[1] / "docs" / "howto"
PAGES = sorted(HOWTO.glob("*.md")) if HOWTO.is_dir() else []
SLOW = {"fast-runs.md", "flexible-appendages.md"}  # ensembles; flexible runs on the dense engine

FENCE = re.compile(r"^```(?:python|\{code-cell\}\s*python3?|\{code-cell\}\s*ipython3)\s*\n(.*?)^```",
                   re.S | re.M)  # fmt: skip


def code_blocks(text: str) -> list[str]:
    """The Python blocks of a page, without myst's cell options (``:key: value`` lines or
    a ``---`` YAML header)."""
    blocks = []
    for body in FENCE.findall(text):
        lines = body.splitlines()
        if lines and lines[0].strip() == "---":
            end = lines.index("---", 1)
            lines = lines[end + 1 :]
        while lines and re.match(r"^:\w[\w-]*:", lines[0]):
            lines = lines[1:]
        blocks.append("\n".join(lines))
    return blocks


def test_pages_have_code():
    assert PAGES, "no how-to pages found"
    assert all(code_blocks(p.read_text()) for p in PAGES if p.name != "index.md")


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in PAGES],
    ids=[p.name for p in PAGES],
)
def test_howto_code_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__howto__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import matplotlib

        matplotlib.use("Agg")
        for k, block in enumerate(code_blocks(page.read_text()), 1):
            try:
                exec(compile(block, f"{page.name} block {k}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{page.name}, code block {k} fails:\n{block}") from exc
