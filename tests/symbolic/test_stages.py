"""Readable derivations: exact numbers, named parameters, simplify=True without spurious
terms (closed forms), the stages of Kane's method and `kanedyn derive`."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
import sympy as sm

import kanedyn as kd
from kanedyn.cli import main
from kanedyn.symbolic import kane, symbolic_parameters
from kanedyn.symbolic.stages import Formula


def test_falling_particle_closed_form():
    """A particle free to translate: F_r = m g_r, F*_r = -m u̇_r, nothing else."""
    m, g = sm.symbols("m g", positive=True)
    bob = kd.Body("bob", mass=m, inertia=0)
    free = kd.Joint("slide", None, "bob", rot_dof=0, trn_dof=3)
    eom = kane(kd.Model([bob], [free], gravity=(0, 0, -g)), simplify=True)
    assert eom.Fr == sm.Matrix([0, 0, -m * g])
    assert eom.Fr_star == sm.Matrix([-m * x for x in eom.u_dot])


def test_double_pendulum_fr_star_closed_form():
    """F*_r of the 2-DOF arm (seed 000's example) by hand: no gravity, no cancelling terms."""
    m1, m2, l1, c1, c2, I1, I2, g = sm.symbols("m1 m2 l1 c1 c2 I1 I2 g", positive=True)
    bodies = [
        kd.Body("link1", mass=m1, inertia=sm.diag(I1, I1, I1), com=(c1, 0, 0)),
        kd.Body("link2", mass=m2, inertia=sm.diag(I2, I2, I2), com=(c2, 0, 0)),
    ]
    joints = [
        kd.Joint.revolute("j1", None, "link1", axis=3),
        kd.Joint.revolute("j2", "link1", "link2", axis=3, inner_point=(l1, 0, 0)),
    ]
    eom = kane(kd.Model(bodies, joints, gravity=(0, -g, 0)), simplify=True)
    (_, t2), (w1, w2), (a1, a2) = eom.q, eom.u, eom.u_dot
    H11 = I1 + I2 + m1 * c1**2 + m2 * (l1**2 + c2**2 + 2 * l1 * c2 * sm.cos(t2))
    H12 = I2 + m2 * (c2**2 + l1 * c2 * sm.cos(t2))
    H22 = I2 + m2 * c2**2
    h = m2 * l1 * c2 * sm.sin(t2)
    hand = sm.Matrix(
        [
            -H11 * a1 - H12 * a2 + h * (2 * w1 * w2 + w2**2),
            -H12 * a1 - H22 * a2 - h * w1**2,
        ]
    )
    for r in range(2):
        assert sm.expand(sm.expand_trig(eom.Fr_star[r] - hand[r])) == 0
        assert g not in eom.Fr_star[r].free_symbols
        assert sm.count_ops(eom.Fr_star[r]) <= sm.count_ops(sm.expand(hand[r])) + 4
    assert not eom.Fr_star.atoms(sm.Float) and not eom.Fr.atoms(sm.Float)


def test_numbers_are_exact_by_construction():
    """Rotations built from floats give exact 0 and ±1; 0.1 is 1/10."""
    a = kd.Body("a", mass=0.1, inertia=kd.inertia_tensor(0.3, 0.3, 0.5), com=(0.2, 0, 0))
    b = kd.Body("b", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.1))
    joints = [
        kd.Joint.revolute(
            "j1", None, "a", axis=3, inner_rotation=kd.euler_to_dcm("312", (np.pi / 2, 0, 0))
        ),
        kd.Joint.revolute(
            "j2",
            "a",
            "b",
            axis=2,
            inner_point=(0.5, 0, 0),
            outer_rotation=kd.euler_to_dcm("123", (np.pi, np.pi / 2, 0)),
        ),  # fmt: skip
    ]
    model = kd.Model([a, b], joints, gravity=(0, -9.81, 0))
    eom = kane(model)
    for X in (eom.mass_matrix, eom.forcing):
        assert not X.atoms(sm.Float)
    assert sm.Rational(1, 10) in eom.masses
    st = kd.State([0.3, -0.7], [0.4, 0.9])
    M, F = eom.lambdify()(st.q, st.u)
    assert np.allclose(M, kd.mass_matrix(model, st), atol=1e-12)


def test_symbolic_parameters_round_trip():
    model = kd.examples.hub_with_panels()
    sym, values = symbolic_parameters(model)
    names = {str(s) for s in values}
    body = model.bodies[0].name
    assert f"m_{body}" in names and f"I_{body}_xx" in names
    assert sym.is_symbolic and not model.is_symbolic
    eom = kane(sym)
    rng = np.random.default_rng(0)
    from tests.sympy_oracle import random_state

    st = random_state(model, rng)
    M, F = eom.lambdify()(st.q, st.u, values)
    assert np.allclose(M, kd.mass_matrix(model, st), atol=1e-10)
    assert np.allclose(np.linalg.solve(M, F), kd.forward_dynamics(model, st), atol=1e-9)


def test_stages_in_kanes_order_and_rendered():
    sym, _ = symbolic_parameters(kd.examples.double_pendulum())
    st = kane(sym).stages(simplify=True)
    titles = [s.title for s in st.stages]
    assert titles == [
        "Kinematics",
        "Partial velocities",
        "Forces on each body",
        "Generalized active and inertia forces",
        "Equations of motion",
    ]
    md = st.markdown()
    positions = [md.index(f"## {k}. {t}") for k, t in enumerate(titles, 1)]
    assert positions == sorted(positions)
    assert "\\omega_{\\mathrm{link1}}" in md and "F^*_{2}" in md and "m_{link1}" in md
    tex = st.latex()
    assert tex.startswith("\\documentclass") and tex.rstrip().endswith("\\end{document}")
    assert tex.count("\\[") == tex.count("\\]")
    assert st._repr_markdown_() == md


def test_large_entries_are_folded_behind_names():
    """Every symbol shown is a coordinate, speed, rate, parameter or a name defined in the
    table (a named vector's component or an intermediate), whatever the fold; and every
    name unfolds to those alone."""
    sym, _ = symbolic_parameters(kd.examples.hub_with_panels())
    eom = kane(sym)
    known = set(eom.parameters) | set(eom.q) | set(eom.u) | set(eom.u_dot)
    sizes = {}
    for fold in (2, 40):
        st = eom.stages(fold=fold)
        defined = {s for s, _ in st.names}
        for stage in st.stages:
            for _s, v in stage.where:
                assert sm.sympify(v).free_symbols <= known | defined
            for _, v in stage.entries:
                v = v.value if isinstance(v, Formula) else v
                assert sm.sympify(v).free_symbols <= known | defined
        for s, _ in st.names[:: max(1, len(st.names) // 20)]:
            assert st.unfold(s).free_symbols <= known
        sizes[fold] = sum(len(stage.where) for stage in st.stages)
    assert sizes[2] > sizes[40] > 0


def test_derive_cli_symbolic_and_numeric(tmp_path, capsys):
    path = tmp_path / "arm.toml"
    kd.io.write_toml(kd.examples.double_pendulum(), path)
    assert main(["derive", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1. Kinematics" in out and "m_link0" in out and "m_link0    = 1.0" in out
    assert "e-1" not in out
    assert main(["derive", str(path), "--numeric", "--latex"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("\\documentclass") and "m_{link0}" not in out


def _random_values(symbols, rng):
    return {s: float(rng.uniform(0.3, 1.3)) for s in symbols}


def _rows_against_the_numeric_engine(model, eom, st, rng, samples):
    """The folded F_r and F*_r rows, unfolded, against the numeric engine's
    generalized active and inertia forces at random states and accelerations (an
    independent oracle: kd's numeric Kane)."""
    sym, values = symbolic_parameters(model)
    rows = dict(next(s for s in st.stages if s.title.startswith("Generalized")).entries)
    n = model.n
    exprs = [st.unfold(rows[f"F_{{{r + 1}}}"]) for r in range(n)]
    exprs += [st.unfold(rows[f"F^*_{{{r + 1}}}"]) for r in range(n)]
    args = [list(eom.q), list(eom.u), list(eom.u_dot), list(values)]
    fn = sm.lambdify(args, exprs, cse=True)
    from tests.sympy_oracle import random_state

    for _ in range(samples):
        state = random_state(model, rng)
        acc = rng.uniform(-1.0, 1.0, n)
        got = np.array(fn(state.q, state.u, acc, list(values.values())), dtype=float)
        Fr = kd.generalized_active_forces(model, state)
        Fr_star = kd.generalized_inertia_forces(model, state, acc)
        assert np.allclose(got[:n], Fr, rtol=1e-9, atol=1e-9)
        assert np.allclose(got[n:], Fr_star, rtol=1e-9, atol=1e-9)


def _page_checks(md: str, limit: int) -> None:
    """A few pages: at most ``limit`` characters of Markdown, and no source line longer
    than 400 characters (a printed line of math is ~100 characters wide; the display
    layout breaks sums at 100 estimated printed characters, and LaTeX markup about
    triples that in source)."""
    assert len(md) <= limit
    assert max(len(line) for line in md.splitlines()) <= 400


def test_stages_fit_on_a_few_pages_and_unfold_to_the_equations():
    """The 2-DOF arm (seed 000) and the four-bar (with its loop-closure stage), with named
    parameters: a few pages of Markdown, no source line longer than a page, every folded
    entry equal to the unfolded equations at random points, and the rows equal to the
    numeric engine's F_r and F*_r."""
    rng = np.random.default_rng(7)
    for model, limit in ((kd.examples.double_pendulum(), 9_600),
                         (kd.examples.four_bar(), 26_500)):  # fmt: skip
        sym, _ = symbolic_parameters(model)
        eom = kane(sym)
        st = eom.stages()
        md = st.markdown()
        _page_checks(md, limit)
        titles = [s.title for s in st.stages]
        assert ("Loop closure" in titles) == bool(model.loops)
        by_title = {s.title: s for s in st.stages}
        rows = dict(by_title["Generalized active and inertia forces"].entries)
        # written in the names, as the textbook does, not expanded
        assert "V_{\\mathrm{" in display_of(rows["F^*_{1}"])
        assert "\\cdot F^*_{" in display_of(rows["F^*_{1}"])
        pairs = []
        for r in range(eom.model.n):
            pairs += [
                (rows[f"F_{{{r + 1}}}"], eom.Fr[r]),
                (rows[f"F^*_{{{r + 1}}}"], eom.Fr_star[r]),
            ]
        kin = dict(by_title["Kinematics"].entries)
        for i, b in enumerate(eom.model.bodies):
            lab = f"_{{\\mathrm{{{b.name}}}}}"
            # ω_i = Σ_r Ω_r u_r, v_i = Σ_r V_{i,r} u_r, in the names of stage 2
            pairs += list(zip(st.unfold(kin[f"\\omega{lab}"]), eom.omega[i], strict=True))
            pairs += list(zip(st.unfold(kin[f"v{lab}"]), eom.v[i], strict=True))
        if model.loops:
            lc = eom.explicit(eom.loops.Phi)
            closure = dict(by_title["Loop closure"].entries)
            pairs += [
                (closure[f"\\Phi_{{\\mathrm{{close}},{c + 1}}}"], lc[c]) for c in range(len(lc))
            ]
        symbols = sorted(set(eom.parameters) | set(eom.q) | set(eom.u) | set(eom.u_dot), key=str)
        folded = sm.lambdify(symbols, [st.unfold(a) for a, _ in pairs])
        unfolded = sm.lambdify(symbols, [eom.explicit(b) for _, b in pairs])
        for _ in range(3):
            point = list(_random_values(symbols, rng).values())
            assert np.allclose(folded(*point), unfolded(*point), rtol=1e-10, atol=1e-10)
        if not model.loops:  # the four-bar's tree rows hold for the cut tree only
            _rows_against_the_numeric_engine(model, eom, st, rng, 3)


def display_of(value):
    from kanedyn.symbolic.stages import display

    return display("x", value)


def test_a_broken_table_fails_the_numeric_check():
    """The check above can fail: F*_r with one body's inertia torque sign flipped."""
    model = kd.examples.double_pendulum()
    sym, _ = symbolic_parameters(model)
    eom = kane(sym)
    st = eom.stages()
    k = next(k for k, s in enumerate(st.stages) if s.title.startswith("Generalized"))
    stage = st.stages[k]
    entries = []
    for lhs, v in stage.entries:
        if lhs == "F^*_{2}":
            v = Formula(v.terms, -v.value)
        entries.append((lhs, v))
    broken = attrs.evolve(st, stages=(*st.stages[:k], attrs.evolve(stage, entries=tuple(entries)),
                                      *st.stages[k + 1 :]))  # fmt: skip
    with pytest.raises(AssertionError):
        _rows_against_the_numeric_engine(model, eom, broken, np.random.default_rng(1), 2)


@pytest.mark.slow
def test_explorer1_stages_keep_to_the_page_and_unfold_to_the_equations():
    """Explorer-1 (free root and four hinged antennas): a few pages with the compact
    tables (see the CHANGELOG: 164 KB, then 49 KB, now ~15 KB), no source line longer
    than a page, and the folded F_r, F*_r rows equal to the numeric engine's."""
    model = kd.examples.explorer1()
    sym, _ = symbolic_parameters(model)
    eom = kane(sym)
    st = eom.stages()
    md = st.markdown()
    _page_checks(md, 16_000)
    assert md == st.markdown(compact=True) and len(st.markdown(compact=False)) > len(md)
    _rows_against_the_numeric_engine(model, eom, st, np.random.default_rng(3), 2)


@pytest.mark.slow
def test_stages_with_a_free_root_a_slide_and_embedded_momentum():
    """T*_i with the embedded momentum (H_i named), a slide's partials and a free root:
    the rows, unfolded, equal the numeric engine's F_r and F*_r."""
    hub = kd.Body("hub", mass=3.0, inertia=kd.inertia_tensor(1, 2, 3, 0.1, 0, 0),
                  com=(0.1, 0, 0), embedded_momentum=(0.2, 0, 0.5))  # fmt: skip
    arm = kd.Body("arm", mass=1.0, inertia=kd.inertia_tensor(0.1, 0.2, 0.3), com=(0.3, 0, 0))
    tip = kd.Body("tip", mass=0.5, inertia=kd.inertia_tensor(0.01, 0.02, 0.03))
    joints = [
        kd.Joint.free("root", "hub"),
        kd.Joint.revolute("h", "hub", "arm", axis=2, inner_point=(0.5, 0, 0)),
        kd.Joint.prismatic("s", "arm", "tip", axis=1, inner_point=(0.2, 0, 0)),
    ]
    model = kd.Model([hub, arm, tip], joints, gravity=(0, 0, -9.81))
    sym, _ = symbolic_parameters(model)
    eom = kane(sym)
    st = eom.stages()
    forces = dict(st.stages[2].entries)
    assert "H_{\\mathrm{hub}}" in forces and "H_{\\mathrm{arm}}" not in forces
    _page_checks(st.markdown(), 25_000)
    _rows_against_the_numeric_engine(model, eom, st, np.random.default_rng(5), 2)


def test_a_speed_that_turns_a_body_about_its_mass_centre_has_no_partial_velocity():
    """A wheel on an axle through its mass centre, on a slide: v_wheel is the slide term
    alone, and no V_{wheel,r} of the spin speed is named (it is the zero vector)."""
    cart = kd.Body("cart", mass=2.0, inertia=kd.inertia_tensor(0.1, 0.1, 0.1))
    wheel = kd.Body("wheel", mass=1.0, inertia=kd.inertia_tensor(0.2, 0.2, 0.4))
    joints = [
        kd.Joint.prismatic("slide", None, "cart", axis=1),
        kd.Joint.revolute("axle", "cart", "wheel", axis=3, inner_point=(0, 0, 1)),
    ]
    text = kane(kd.Model([cart, wheel], joints)).stages().markdown()
    v_wheel = next(line for line in text.splitlines() if line.startswith(r"v_{\mathrm{wheel}} ="))
    assert r"\Omega" not in v_wheel and "u_{axle" not in v_wheel
    assert r"V_{\mathrm{wheel},2}" not in text


def test_remainders_by_the_recursion_unfold_to_the_derivation():
    """alpha_{r,i} and a_{r,i} written as the textbook's recursion (alpha^rel_k, C_k, tau_k,
    v_{o,k}, R^{NB}_i = R^{NB}_{i(k)} R^{B_iG_o}_k, I_i = R I_B R^T, in named vectors):
    unfolded, equal to the derivation's explicit remainders and inertia matrices, and the
    compact table's speeds are the non-zero columns of Omega_u."""
    model = kd.examples.hub_with_panels()
    sym, _ = symbolic_parameters(model)
    eom = kane(sym)
    st = eom.stages()
    kin = dict(st.stages[0].entries)
    forces = dict(st.stages[2].entries)
    assert "\\alpha^{rel}_{" in st.markdown() and "C_{" in st.markdown()
    pairs = []
    for i, b in enumerate(eom.model.bodies):
        alpha_r = kin[f"\\alpha_{{r,\\mathrm{{{_tex(b.name)}}}}}"]
        a_r = kin[f"a_{{r,\\mathrm{{{_tex(b.name)}}}}}"]
        assert isinstance(a_r, Formula) and "\\times" in " ".join(a_r.terms)
        pairs += list(zip(st.unfold(alpha_r), eom.alpha_r[i], strict=True))
        pairs += list(zip(st.unfold(a_r), eom.a_r[i], strict=True))
        I = forces[f"I_{{\\mathrm{{{_tex(b.name)}}}}}"]
        pairs += list(zip(st.unfold(I), eom.explicit(eom._der.I_N[i]), strict=True))
    symbols = sorted(set(eom.parameters) | set(eom.q) | set(eom.u), key=str)
    folded = sm.lambdify(symbols, [a for a, _ in pairs])
    unfolded = sm.lambdify(symbols, [b for _, b in pairs])
    rng = np.random.default_rng(11)
    for _ in range(3):
        point = list(_random_values(symbols, rng).values())
        assert np.allclose(folded(*point), unfolded(*point), rtol=1e-10, atol=1e-10)
    table = st.stages[0].table
    for i, b in enumerate(eom.model.bodies):
        cols = [r + 1 for r in range(model.nu) if any(x != 0 for x in eom.Omega_u[i][:, r])]
        row = next(row for row in table if row[0] == f"$\\mathrm{{{_tex(b.name)}}}$")
        listed = []
        for part in row[2].split(", "):
            lo, _, hi = part.partition("–")
            listed += list(range(int(lo), int(hi or lo) + 1))
        assert listed == cols


def _tex(name):
    return name.replace("_", "\\_")
