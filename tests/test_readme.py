"""The README's code is executed, so it cannot go stale."""

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert block == [
        'python -m pip install ".[plot,native]" && python -m kanedyn simulate',
        'python -m pip install ".[test]" && python -m pytest',
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
