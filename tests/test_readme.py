"""The README's code is executed, so it cannot go stale."""

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert block == [
        'python -m pip install ".[plot,native]" && python -m kanedyn simulate',
        'python -m pip install ".[test]" && python -m pytest -n auto',
    ]
    # nothing but the title comes before them
    assert text.index("```bash") < text.index("\n", text.index("# kanedyn")) + 3


def test_readme_tour_runs():
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    traj = namespace["traj"]
    H = traj.angular_momentum
    # the tour claims MSD keeps H to round-off: check that claim
    assert abs(H - H[0]).max() < 1e-12 * abs(H[0]).max()


def _shape(line: str) -> str:
    """A summary line with its numbers and paths replaced, to compare layouts."""
    line = re.sub(r"to \S+/$", "to DIR/", line)
    return re.sub(r"[-+]?\d[\d.]*(e[-+]?\d+)?", "#", line)


def test_readme_states_what_simulate_prints_and_writes(tmp_path, capsys):
    """The summary block in the README has the lines the command prints, in order, and
    the files it names are the files the command writes."""
    from kanedyn.cli import SIMULATE_FILES, main

    text = README.read_text()
    block = re.search(r"```text\n(kanedyn simulate:.*?)```", text, re.S).group(1)
    assert main(["simulate", "--t-final", "40", "--quiet", "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert [_shape(x) for x in printed.splitlines()] == [_shape(x) for x in block.splitlines()]
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(SIMULATE_FILES)
    prose = text[text.index("and writes exactly") : text.index("The second command")]
    named = re.findall(r"`(trajectory\.\w+|summary\.json)`", prose)
    assert sorted(set(named)) == sorted(SIMULATE_FILES)
    assert "exactly four files" in prose and len(SIMULATE_FILES) == 4
