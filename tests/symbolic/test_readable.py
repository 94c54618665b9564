"""Derivations a student can read: the plain-text print of every stage and of the
equations, numbers as written, no undefined name, LaTeX that compiles, and the equations
on the page equal to the numeric engine's M and f (an independent oracle)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.cli import main
from kanedyn.symbolic import kane, symbolic_parameters
from kanedyn.symbolic.plain import from_latex, readable_numbers, text


def _derived(model, simplify=False):
    sym, values = symbolic_parameters(model)
    eom = kane(sym)
    return eom, eom.stages(simplify=simplify, values=values), values


def _outside_prose(lines: list[str], starts: tuple[str, ...] = ()) -> list[str]:
    """``lines`` without each stage's sentence: the lines after an underlined title (or
    a line beginning with one of ``starts``) up to the next blank line."""
    keep, prose = [], False
    for line in lines:
        if re.fullmatch(r"-+", line) or (starts and line.startswith(starts)):
            prose = True  # the stage's sentence follows its underlined title
            continue
        if prose:
            prose = bool(line.strip())
            continue
        keep.append(line)
    return keep


def _equation_lines(out: str) -> list[str]:
    """The lines of the printed stages that are (or continue) an equation."""
    lines = out.split("\n1. Kinematics", 1)[1].split("\nParameters\n", 1)[0].splitlines()
    keep = []
    for line in _outside_prose(lines, ("Written as for",)):  # and the compact form's sentence
        if line.startswith("where") or "│" in line or "┼" in line or re.match(r"\d+\. ", line):
            continue  # a compact table, or a heading
        keep.append(line)
    return keep


def _undefined(eom, st, out: str) -> set[str]:
    """Words on the equation lines of ``out`` that are none of: a coordinate, speed,
    rate or parameter, their sines and cosines, a named quantity of the tables or the
    left side of an entry or definition."""
    known = {text(x) for x in (*eom.q, *eom.u, *eom.u_dot, *eom.parameters)}
    known |= {f"{k}_{text(x)[2:]}" for x in eom.q for k in "sc"}
    known |= {text(s) for s, _ in st.names}
    for stage in st.stages:
        known |= {from_latex(lhs) for lhs, _ in stage.entries}
        known |= {text(s) for s, _ in stage.where}
    known |= {"M", "f", "M̄", "f̄", "sin", "cos", "tan", "sqrt", "Σ"}
    left = set()
    for line in _equation_lines(out):
        line = re.sub("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻ᵀ]", " ", line)  # powers and transposes
        for name in sorted(known, key=len, reverse=True):
            if name and name in line:
                line = re.sub(rf"(?<![\ẇ]){re.escape(name)}(?![\ẇ])", " ", line)
        line = re.sub(r"(?<![\w.])\d+(\.\d*)?(e[-+]?\d+)?", " ", line)  # numbers
        left |= {w for w in re.findall(r"[^\W\d_][\ẇ̄^*]*", line)}
    return left


def _long_rationals(out: str) -> list[str]:
    return [x for x in re.findall(r"\d+/\d+", out) if max(len(p) for p in x.split("/")) > 6]


@pytest.mark.parametrize("name", ["double_pendulum", "four_bar"])
def test_terminal_print_shows_every_stage_and_the_equations(name):
    eom, st, values = _derived(getattr(kd.examples, name)(), simplify=True)
    out = str(st)
    assert out == st.text() and repr(st).startswith("Stages(")
    for k, stage in enumerate(st.stages, 1):
        assert f"\n{k}. {stage.title}\n" in out
    eqs = out.split("Equations of motion", 1)[1]
    assert re.search(r"^\[M\]_11 = ", eqs, re.M) and re.search(r"^\[f\]_1 += ", eqs, re.M)
    assert "q̇_" in eqs and "\\" not in out and "{" not in out
    assert all(f"{text(s)}" in out.split("\nParameters\n")[1] for s in values)
    assert not _long_rationals(out), _long_rationals(out)
    assert not _undefined(eom, st, out), sorted(_undefined(eom, st, out))
    if name == "four_bar":
        assert "3 of the 5 rows are identically zero (the out-of-plane rows" in " ".join(
            out.split()
        )
        assert "Φ_close,2 " in out and "Φ_close,3 " not in out
        assert "M̄" in eqs


def test_undefined_names_are_found():
    """The check above can fail: a name the table never defines is reported."""
    eom, st, _ = _derived(kd.examples.double_pendulum())
    out = str(st).replace("Ω_1 × (r_link0", "Ω_7 × (r_link0")
    assert "Ω_7" in _undefined(eom, st, out)


def test_numbers_as_written():
    """A user's decimals print as written; the exact value of a binary float (a joint
    rotation's cosine) as six significant digits; small fractions and exponents stay."""
    x = sm.Symbol("x")
    assert text(sm.Rational(3333, 10000) + sm.cos(x) / 2) == "0.5·cos(x) + 0.3333"
    assert text(sm.Rational(6607008494562121, 20000000000000000) * x) == "0.33035·x"
    assert text(sm.Rational(1, 3) * x + sm.sqrt(x)) == "sqrt(x) + x/3"
    assert readable_numbers(sm.Rational(79999999999999996815666108571949,
                                        80000000000000000000000000000000)) == 1  # fmt: skip
    assert text(sm.Rational(39271, 2)) == "19635.5"


def test_numeric_derivation_keeps_the_users_decimals(tmp_path, capsys):
    model = kd.examples.double_pendulum(length=0.3333, mass=1.25)
    path = tmp_path / "arm.toml"
    kd.io.write_toml(model, path)
    assert main(["derive", str(path), "--numeric"]) == 0
    out = capsys.readouterr().out
    assert "0.3333" in out and "3333/10000" not in out and not _long_rationals(out)


@pytest.mark.parametrize("name", ["double_pendulum", "four_bar"])
def test_equations_on_the_page_equal_the_numeric_engine(name):
    """Stage 5's M and f, unfolded, against the numeric engine's mass matrix and
    Fr + Fr* at zero acceleration at random states (folded and simplified forms)."""
    from tests.sympy_oracle import random_state

    model = getattr(kd.examples, name)()
    rng = np.random.default_rng(2)
    for simplify in (False, True):
        eom, st, values = _derived(model, simplify=simplify)
        entries = dict(st.stages[-1].entries)
        args = [list(eom.q), list(eom.u), list(values)]
        fn = sm.lambdify(args, [st.unfold(entries["M"]), st.unfold(entries["f"])])
        for _ in range(2):
            state = random_state(model, rng)
            M, f = fn(state.q, state.u, list(values.values()))
            M_num = kd.mass_matrix(model, state)
            f_num = kd.generalized_active_forces(model, state) + kd.generalized_inertia_forces(
                model, state, np.zeros(model.n)
            )
            assert np.allclose(np.array(M, float), M_num, atol=1e-9)
            assert np.allclose(np.array(f, float).ravel(), f_num, atol=1e-9)


def _compiles(tex: str, tmp_path, name: str) -> None:
    engine = shutil.which("pdflatex") or shutil.which("latex")
    (tmp_path / f"{name}.tex").write_text(tex)
    run = subprocess.run(
        [engine, "-interaction=nonstopmode", "-halt-on-error", f"{name}.tex"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]


needs_tex = pytest.mark.skipif(
    not (shutil.which("pdflatex") or shutil.which("latex")),
    reason="no TeX engine (pdflatex/latex): install texlive-latex-base and "
    "texlive-latex-recommended to run the LaTeX compile tests",
)


@needs_tex
@pytest.mark.parametrize("name", ["double_pendulum", "four_bar", "explorer1"])
def test_latex_compiles(name, tmp_path):
    _, st, _ = _derived(getattr(kd.examples, name)(), simplify=name != "explorer1")
    _compiles(st.latex(), tmp_path, name)
    body = st.latex(fragment=True)
    assert "\\documentclass" not in body and "\\end{document}" not in body
    _compiles("\\documentclass{article}\n\\usepackage{amsmath}\n\\allowdisplaybreaks\n"
              "\\begin{document}\n" + body + "\\end{document}\n", tmp_path, f"{name}-part")  # fmt: skip


@needs_tex
def test_latex_fails_to_compile_when_broken(tmp_path):
    """The compile check can fail: an unbalanced brace."""
    _, st, _ = _derived(kd.examples.double_pendulum())
    with pytest.raises(AssertionError):
        _compiles(st.latex().replace("\\section*{", "\\section*{{", 1), tmp_path, "broken")


def test_derive_cli_text_simplify_and_fragment(tmp_path, capsys):
    path = tmp_path / "arm.toml"
    kd.io.write_toml(kd.examples.double_pendulum(), path)
    assert main(["derive", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1. Kinematics" in out and "[M]_22 = I_link1_zz + c_link1_x²·m_link1" in out
    assert main(["derive", str(path), "--no-simplify"]) == 0
    assert "[M]_22 = I_link1_zz + c_link1_x²·m_link1" not in capsys.readouterr().out
    assert main(["derive", str(path), "--latex", "--fragment"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("\\section*") and "\\documentclass" not in out
    assert main(["derive", str(path), "--fragment"]) == 2
    assert "--fragment goes with --latex" in capsys.readouterr().err


def test_short_str_of_model_and_trajectory():
    model = kd.examples.explorer1()
    s = str(model)
    assert len(s) < 600 and "5 bodies, 14 DOF" in s and "hinge0 (gimbal 2: hub -> antenna0)" in s
    assert len(repr(model)) > 5 * len(s)
    arm = kd.examples.double_pendulum()
    traj = kd.simulate(arm, arm.initial_state(), t_final=0.5, dt=0.01, progress=False)
    s = str(traj)
    assert "51 samples, t = 0 .. 0.5 s" in s and "'completed'" in s and len(s) < 400
    assert "array(" in repr(traj)


@pytest.mark.slow
def test_explorer1_print_has_every_stage_no_long_rational_and_no_undefined_name():
    eom, st, _ = _derived(kd.examples.explorer1())
    out = str(st)
    for k, stage in enumerate(st.stages, 1):
        assert f"\n{k}. {stage.title}\n" in out
    assert "The 14 equations are the rows of M" in out and "[M]_11 = " not in out
    # the compact stage 5: M's nonzero pattern, against the numeric engine's M
    from tests.sympy_oracle import random_state

    def columns(ranges: str) -> set[int]:
        out = set()
        for part in ranges.split(", "):
            a, _, b = part.partition("–")
            out |= set(range(int(a), int(b or a) + 1))
        return out

    # generic parameters (1 % apart from Explorer-1's, whose antennas' equal transverse
    # inertias make some entries vanish by coincidence, not by structure)
    rng = np.random.default_rng(4)
    sym, values = symbolic_parameters(kd.examples.explorer1())
    model = sym.subs({s: v * rng.uniform(0.99, 1.01) for s, v in values.items()})
    M = kd.mass_matrix(model, random_state(model, rng))
    rows = st.stages[-1].table[1:]
    assert [columns(row[2]) for row in rows] == [
        {int(c) + 1 for c in np.flatnonzero(np.abs(m) > 1e-12)} for m in M
    ]
    assert "│ 1–3, 6, 12–14" in out and "q̇_hinge0_0" not in out and "q̇_root_w" in out
    assert not _long_rationals(out)
    assert not _undefined(eom, st, out), sorted(_undefined(eom, st, out))


def test_welded_base_in_one_line_revolute_rates_as_scalars_velocities_shown():
    """A welded base's zero quantities on one line (the rows still equal the numeric
    engine's), a revolute rate as a scalar about its axis rather than through an axis
    selection matrix, and the coupler's joint-point velocity written out, not folded
    into "written as for joint k"."""
    from tests.symbolic.test_stages import _rows_against_the_numeric_engine

    base = kd.Body("base", mass=5.0, inertia=kd.inertia_tensor(1, 1, 1))
    arm = kd.Body("arm", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.2, 0.3), com=(0.5, 0, 0))
    joints = [
        kd.Joint.weld("fix", None, "base"),
        kd.Joint.revolute("hinge", "base", "arm", axis=3, inner_point=(0, 0, 1)),
    ]
    model = kd.Model([base, arm], joints, gravity=(0, -9.81, 0))
    eom, st, _ = _derived(model)
    out = str(st)
    line = "o_fix = r_base = ω_base = v_base = α_r,base = α_base = a_r,base = a_base = 0"
    assert line in out.splitlines() and not re.search(r"^ω_base +=", out, re.M)
    assert "a_{r,\\mathrm{base}} = a_{\\mathrm{base}} = 0\n" in st.markdown()
    _rows_against_the_numeric_engine(model, eom, st, np.random.default_rng(6), 2)

    _, st, _ = _derived(kd.examples.double_pendulum())
    out = str(st)
    assert "ω^rel_joint1      = u_joint1_0 R^NB_link1 [0; 0; 1]" in out
    assert "[0, 1, 0; 0, 0, 1; 1, 0, 0]" not in out

    _, st, _ = _derived(kd.examples.four_bar())
    out = str(st)
    assert re.search(r"^  v_o,coupler +=", out, re.M) and re.search(r"^  v_o,rocker +=", out, re.M)
    assert not re.search(r"not repeated:[^.]*v_o,k", " ".join(out.split()))


def test_rolling_disc_stages_print_and_give_kane_and_levinsons_equations():
    """Kane's rolling disc (a KaneProblem): every stage printed as plain text, and its
    equations against Kane & Levinson's (1985, §6.x; an analytic oracle): the mass matrix
    diag(5/4, 3/2, 1/4) m r², and the forcing at rest, g m r sin(q2)."""
    from kanedyn.symbolic.examples import rolling_disc

    disc = rolling_disc()
    st = disc.problem.stages()
    out = str(st)
    for k, stage in enumerate(st.stages, 1):
        assert f"\n{k}. {stage.title}\n" in out
    assert "q̇_1 = u_3/cos(q_2)" in out and "\\" not in out and "{" not in out
    assert "0  = -1.5·u̇_2·m·r² - m·r²·u_1·u_3" in out
    entries = dict(st.stages[-1].entries)
    r, m, g = (sm.Symbol(x, positive=True) for x in "rmg")
    M = entries["\\tilde M"].subs({disc.r: r, disc.m: m})
    assert sm.simplify(M - sm.diag(5, 6, 1) * m * r**2 / 4) == sm.zeros(3, 3)
    rest = {sm.Symbol(f"u{k}"): 0 for k in (1, 2, 3)}
    f = entries["f"].subs(rest).subs({disc.r: r, disc.m: m, disc.g: g})
    assert sm.simplify(f - sm.Matrix([g * m * r * sm.sin(sm.Symbol("q2")), 0, 0])) == sm.zeros(3, 1)
    assert not _long_rationals(out)
    words = set(re.findall(r"[^\W\d_]+", out.split("\n1. ", 1)[1]))
    assert {"u", "q", "m", "r", "g", "sin", "cos", "tan"} <= words


@needs_tex
def test_rolling_disc_latex_compiles(tmp_path):
    from kanedyn.symbolic.examples import rolling_disc

    _compiles(rolling_disc().problem.stages().latex(), tmp_path, "disc")


def _disc_undefined(out: str, problem) -> set[str]:
    """Names on the equation lines of the disc's print (lines with ``=`` or a matrix
    bracket, past stage 1's title, not the sentence under each stage's title) that are none of its coordinates, speeds and their
    rates, parameters, the functions, or the named quantities of its stages."""
    import unicodedata

    def plain(s: str) -> str:  # accents (dots, tildes) off: q̇ is q, ṽ is v
        return "".join(
            c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn"
        )

    known = {re.match(r"[^\W\d_]+", text(x)).group() for x in (*problem.q, *problem.u)}
    known |= {plain(text(p)) for p in problem.parameters}
    known |= {"sin", "cos", "tan", "M", "f", "F", "v", "ω", "disc"}
    left = set()
    for line in _outside_prose(out.split("\n1. ", 1)[1].splitlines()):
        if "=" not in line and not re.match(r"\s*[⎡⎢⎣]", line):
            continue
        line = re.sub("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻ᵀ]", " ", plain(line))  # powers and transposes
        left |= set(re.findall(r"[^\W\d_]+", line)) - known
    return left


def test_rolling_disc_print_defines_every_name_it_uses():
    """The disc's equation lines use only its coordinates, speeds, parameters and the
    quantities its stages name; the check finds a name that is not one of them."""
    from kanedyn.symbolic.examples import rolling_disc

    problem = rolling_disc().problem
    out = str(problem.stages())
    assert not _disc_undefined(out, problem), sorted(_disc_undefined(out, problem))
    assert _disc_undefined(out.replace("g·m·r·sin(q_2)", "g·m·R·sin(q_2)"), problem) == {"R"}
