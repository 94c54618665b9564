"""Sphinx configuration for the kanedyn documentation.

Build (warnings are errors)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

The tutorials are the jupytext percent-format notebooks in ``notebooks/`` (linked into
``docs/tutorials/``); myst-nb reads them through jupytext and executes them during the
build, as it does the code cells of the explanation pages.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # this checkout's kanedyn, installed or not

import kanedyn  # noqa: E402

project = "kanedyn"
author = "kanedyn developers"
copyright = "kanedyn developers, BSD-3-Clause"
release = version = kanedyn.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]
try:  # the CLI page uses sphinx-argparse when it is installed, else --help output
    import sphinxarg.ext  # noqa: F401

    extensions.append("sphinxarg.ext")
    HAVE_ARGPARSE = True
except ImportError:
    HAVE_ARGPARSE = False

exclude_patterns = ["_build", "conf.py", "scripts", "**/.ipynb_checkpoints", "README.md"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".py": "myst-nb"}

# --- MyST and myst-nb ---------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_custom_formats = {".py": ["jupytext.reads", {"fmt": "py:percent"}]}
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# --- autodoc (numpydoc docstrings through napoleon) ---------------------------
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": False}
autosummary_generate = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

html_theme = "alabaster"
html_title = f"kanedyn {release}"
html_theme_options = {
    "description": "Kane's method and momentum-state dynamics for multibody trees",
    "fixed_sidebar": True,
}


# --- generated content (no generated files are written into the source tree) ---
def _api_fallback(text: str) -> str:
    """Append every name of ``kanedyn.__all__`` that the API page does not document."""
    documented = set(re.findall(r"^\.\. auto\w+::\s+kanedyn\.(\w+)", text, flags=re.M))
    documented |= set(re.findall(r"^```\{auto\w+\}\s+kanedyn\.(\w+)", text, flags=re.M))
    missing = [n for n in kanedyn.__all__ if n not in documented and not n.startswith("__")]
    if not missing:
        return text
    lines = ["", "## Other public names", "", "```{eval-rst}", ".. currentmodule:: kanedyn", ""]
    for name in missing:
        obj = getattr(kanedyn, name)
        kind = "autoclass" if isinstance(obj, type) else "autofunction"
        if type(obj).__name__ == "module":
            lines.append(f"* :mod:`kanedyn.{name}`")
            continue
        lines += [f".. {kind}:: kanedyn.{name}", ""]
    lines += ["```", ""]
    return text + "\n".join(lines)


def _cli_help() -> str:
    """The CLI reference: sphinx-argparse, or the ``--help`` text of every command."""
    if HAVE_ARGPARSE:
        return "```{eval-rst}\n.. argparse::\n   :module: kanedyn.cli\n   :func: build_parser\n   :prog: kanedyn\n```\n"
    from kanedyn.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    out = ["```text", parser.format_help().rstrip(), "```", ""]
    for name, p in sub.choices.items():
        out += [f"## `kanedyn {name}`", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _source_read(app, docname: str, source: list[str]) -> None:
    if docname == "reference/api":
        source[0] = _api_fallback(source[0])
    elif docname == "reference/cli":
        source[0] = source[0].replace("<!-- cli-help -->", _cli_help())


def setup(app):
    app.connect("source-read", _source_read)
    return {"parallel_read_safe": True}
