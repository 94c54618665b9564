"""Fuzzing the model readers: mutated TOML, 42 and URDF files either load or raise a
KanedynError that names a line, and never anything else.

Mutations of a valid file: truncation, a deleted or duplicated line, a number replaced by
NaN, inf, a huge, negative or zero value or text, random bytes inserted, and the text
saved in another encoding. A bounded number of examples runs by default (derandomized,
so CI is reproducible); ``-m slow`` runs many more, randomized. Cases the fuzzer found
are kept below as regression tests (``FOUND``).
"""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kanedyn as kd

DATA = Path(__file__).parent / "data"
TOML_SEED = """\
[model]
gravity_m_s2 = [0, 0, -9.81]

[[bodies]]
name = "hub"
mass_kg = 500.0
inertia_kg_m2 = { Ixx = 400.0, Iyy = 350.0, Izz = 300.0, Ixy = 1.0 }
com_m = [0.1, 0.0, 0.0]

[[bodies]]
name = "arm"
mass_kg = 20.0
inertia_kg_m2 = { Ixx = 2.0, Iyy = 10.0, Izz = 10.5 }
com_m = [1.0, 0.0, 0.0]

[[joints]]
name = "root"
inner = "N"
outer = "hub"
kind = "free"

[[joints]]
name = "hinge"
inner = "hub"
outer = "arm"
kind = "gimbal"
seq = "312"
dof = 2
inner_point_m = [0.8, 0, 0]
inner_angles_deg = [90, 0, 0]
inner_seq = "312"
stiffness = [50.0, 10.0]
damping = 0.5

[initial.root]
rates_deg_s = [1.0, 2.0, 3.0]
quaternion = [0, 0, 0, 1]

[initial.hinge]
angles_deg = [5, -3]

[[loads]]
type = "torque"
body = "hub"
values = [0.0, 0.0, 0.1]

[simulation]
t_final_s = 100.0
dt_s = 0.01
"""
SEEDS = {
    "toml": ("model.toml", TOML_SEED),
    "42": ("SC_Custom.txt", (DATA / "SC_Custom.txt").read_text()),
    "urdf": ("arm3.urdf", (DATA / "arm3.urdf").read_text()),
}
NUMBER = re.compile(r"(?<![\w.])[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?(?![\w.])")
REPLACEMENTS = ["nan", "inf", "-inf", "1e400", "-1e400", "1e308", "9" * 400, "-" + "9" * 40,
                "-1", "0", "0.0", "-0", "abc", '"x"', "", "1e-320", "[1, 2]", "true"]  # fmt: skip


@st.composite
def mutations(draw: st.DrawFn, text: str) -> bytes:
    """``text`` with one or two mutations, as the bytes of a file."""
    for _ in range(draw(st.integers(1, 2))):
        lines = text.splitlines(keepends=True)
        kind = draw(st.sampled_from(["truncate", "delete", "duplicate", "number", "number",
                                     "bytes", "swap"]))  # fmt: skip
        if kind == "truncate":
            text = text[: draw(st.integers(0, len(text)))]
        elif kind in ("delete", "duplicate", "swap") and lines:
            i = draw(st.integers(0, len(lines) - 1))
            if kind == "delete":
                del lines[i]
            elif kind == "duplicate":
                lines.insert(i, lines[i])
            else:
                j = draw(st.integers(0, len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
        elif kind == "number":
            spans = [m.span() for m in NUMBER.finditer(text)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                text = text[:a] + draw(st.sampled_from(REPLACEMENTS)) + text[b:]
        elif kind == "bytes":
            at = draw(st.integers(0, len(text)))
            junk = draw(st.binary(min_size=1, max_size=8)).decode("latin-1")
            text = text[:at] + junk + text[at:]
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["utf-16", "latin-1", "cp1252-é"]))
    if encoding == "cp1252-é":  # a non-ASCII character saved as cp1252, not UTF-8
        return ("# café\n" + text).encode("cp1252", errors="replace")
    return text.encode(encoding, errors="replace")


def load(path: Path) -> None:
    """Read ``path`` as the CLI does; the 42 reader finds its joint files beside it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kd.io.read_model(path)


def check_loads_or_names_a_line(tmp_path: Path, name: str, data: bytes) -> None:
    folder = tmp_path / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for extra in DATA.glob("Jnt_*.txt"):
        shutil.copy(extra, folder)
    path = folder / name
    path.write_bytes(data)
    try:
        load(path)
    except kd.KanedynError as exc:
        message = str(exc)
        assert str(path) in message, message
        # a line; or, for what is missing from the whole file, no line to name
        assert re.search(r"line \d+", message) or any(w in message for w in WHOLE_FILE), message
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)


#: errors about the file as a whole (nothing to point at): not a model, no bodies
WHOLE_FILE = ("cannot tell the format", "the file defines no bodies", "the file is empty")


def fuzz(fmt: str, examples: int, derandomize: bool):
    name, text = SEEDS[fmt]

    @settings(max_examples=examples, deadline=None, derandomize=derandomize,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])  # fmt: skip
    @given(data=mutations(text))
    def run(tmp_path, data):
        check_loads_or_names_a_line(tmp_path, name, data)

    return run


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_seed_files_load(tmp_path, fmt):
    name, text = SEEDS[fmt]
    check_loads_or_names_a_line(tmp_path, name, text.encode())
    load(tmp_path / "case" / name)


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_fuzz_bounded(tmp_path, fmt):
    fuzz(fmt, 60, derandomize=True)(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_fuzz_many(tmp_path, fmt):
    fuzz(fmt, 1500, derandomize=False)(tmp_path)


# cases the fuzzer found: (format, edit of the seed text) -> load or a KanedynError naming a line
FOUND = [
    ("42", "0.1  0.2  0.3         ! Location", "1e400  0.2  0.3         ! Location"),
    ("42", "1.0   -2.0   0.5              ! Ang Vel", "1e400   -2.0   0.5              ! Ang Vel"),
    ("42", "400.0  350.0  300.0        ! Moments", "1e308  350.0  300.0        ! Moments"),
    ("toml", "quaternion = [0, 0, 0, 1]", "quaternion = [1e308, 0, 0, 1]"),
    ("toml", "mass_kg = 20.0", "mass_kg = " + "9" * 400),
    ("urdf", 'ixx="0.5" ixy="0"', 'ixx="1e308" ixy="0"'),
    # a lever arm of 1e308 m overflowed the parallel-axis shift into NaN (LinAlgError)
    ("urdf", '<origin xyz="0 0 0.1"/>', '<origin xyz="1e308 0 0.1"/>'),
    # a 1e40 m lever arm makes M numerically singular: the error names the joint's line
    ("urdf", '<origin xyz="0.25 0 0"/>', '<origin xyz="-1e40 0 0"/>'),
]


@pytest.mark.parametrize(("fmt", "old", "new"), FOUND)
def test_found_cases(tmp_path, fmt, old, new):
    name, text = SEEDS[fmt]
    assert old in text
    check_loads_or_names_a_line(tmp_path, name, text.replace(old, new, 1).encode())
