"""Modal data of flexible bodies: kanedyn's modal-data files (TOML, .npz), a body's
``modes`` in a TOML model, and 42's flex files read by the 42 importer.

The oracles: the arrays written (round trips), the numbers typed into the files by hand
(hand-written TOML), and for 42's demo flex file (``InOut/Flex_Simple.txt`` of the 42
repository) the file's own text: its elements, and the frequencies (1 Hz, 10 Hz) and
damping ratio (0.1 %) its comments state.

``data/Flex_Simple.txt`` and ``data/Nodes_Simple.txt`` are copied unchanged from 42's
``InOut/`` folder, ``data/Flex_Simple_NodeLocations.txt`` from its ``Standalone/Flex_Simple.txt``
(the older layout with "Analysis Node Locations"); NASA 42, NASA Open Source Agreement 1.3.
"""

from __future__ import annotations

import csv
import importlib.util
import shutil
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import kanedyn as kd
from kanedyn.io import UnsupportedFeatureWarning, parse_modes, read_42_case, write_modes

DATA = Path(__file__).parent / "data"
TUMBLE = ("SC_TumbleSat.txt", "Jnt_Tumble02.txt", "Jnt_Tumble13.txt")
HAS_MODES = importlib.util.find_spec("kanedyn.model.modes") is not None
NO_MODES = "kd.Modes (kanedyn.model.modes, issue 29 item 1) is not in this kanedyn"


def random_fields(rng: np.random.Generator, n: int = 3, nodes: int = 2) -> dict:
    """Consistent modal data: the integrals of random point masses and mode shapes."""
    masses = rng.uniform(0.5, 2.0, size=5)
    r = rng.normal(size=(5, 3))
    psi = rng.normal(size=(5, 3, n))  # each point's mode shapes
    M = np.einsum("k,kip,kiq->pq", masses, psi, psi)
    A = rng.normal(size=(n, n))
    return {
        "mass": M,
        "stiffness": A @ A.T + n * np.eye(n),
        "damping_ratio": rng.uniform(0.0, 0.05, size=n),
        "P": np.einsum("k,kip->ip", masses, psi),
        "H": np.einsum("k,kip->ip", masses, np.cross(r[:, :, None], psi, axis=1)),
        "L": np.einsum("k,kip,kj->ijp", masses, psi, r),
        "N": np.einsum("k,kip,kjq->ijpq", masses, psi, psi),
        "node_positions": rng.normal(size=(nodes, 3)),
        "Psi": rng.normal(size=(nodes, 3, n)),
        "Theta": rng.normal(size=(nodes, 3, n)),
        "node_names": [f"n{i}" for i in range(nodes)],
        "geometric": np.array([(lambda B: B + B.T)(rng.normal(size=(n, n))) for _ in range(12)]),
        "mode_names": [f"mode {i}" for i in range(n)],
    }


def assert_same_fields(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if key in ("node_names", "mode_names"):
            assert list(got[key]) == list(value), key
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=key)


# --------------------------------------------------------------------- modal-data files
@pytest.mark.parametrize("suffix", [".toml", ".npz"])
def test_round_trip_is_bit_for_bit(tmp_path, suffix):
    fields = random_fields(np.random.default_rng(7))
    path = tmp_path / f"array{suffix}"
    write_modes(path, fields)
    assert_same_fields(parse_modes(path), fields)


def test_hand_written_toml_file(tmp_path):
    path = tmp_path / "beam.toml"
    path.write_text(
        textwrap.dedent("""\
        # a two-mode beam: modal mass 1, frequencies 1 Hz and 10 Hz
        mass = [[1.0, 0.0], [0.0, 1.0]]
        stiffness = [[39.478, 0], [0, 3947.8]]
        damping_ratio = 0.002
        node_positions = [[2.0, 0.0, 0.0]]
        Psi = [[[0.0, 0.0], [0.5, -0.25], [0.0, 0.0]]]
        node_names = ["tip"]
        """)
    )
    got = parse_modes(path)
    np.testing.assert_array_equal(got["stiffness"], [[39.478, 0.0], [0.0, 3947.8]])
    assert got["damping_ratio"] == 0.002
    np.testing.assert_array_equal(got["Psi"][0, 1], [0.5, -0.25])
    np.testing.assert_array_equal(got["Theta"], np.zeros((1, 3, 2)))  # absent: no rotations
    assert got["node_names"] == ("tip",)
    assert "P" not in got and "damping" not in got  # absent: kd.Modes's defaults


GOOD = textwrap.dedent("""\
    mass = [[2.0, 0.5], [0.5, 1.0]]
    stiffness = [[10.0, 0.0], [0.0, 40.0]]
    node_positions = [[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]
    Psi = [[[0.1, 0.0], [0.0, 0.0], [0.0, 0.0]], [[0.2, 0.0], [0.0, 0.0], [0.0, 0.0]]]
    node_names = ["mid", "tip"]
    """)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("[[2.0, 0.5], [0.5, 1.0]]", "[[2.0, 0.5], [0.4, 1.0]]",
         "line 1: mass: not symmetric: [0][1] = 0.5 but [1][0] = 0.4"),
        ("[[2.0, 0.5], [0.5, 1.0]]", "[[1.0, 2.0], [2.0, 1.0]]",
         "line 1: mass: not positive definite"),
        ("[[2.0, 0.5], [0.5, 1.0]]", "[2.0, 1.0]", "line 1: mass: expected a square n x n"),
        ("[[10.0, 0.0], [0.0, 40.0]]", "[[10.0, 0.0], [0.0, -40.0]]",
         "line 2: stiffness: not positive semidefinite"),
        ("[[10.0, 0.0], [0.0, 40.0]]", "[[10.0, 0.0, 0.0], [0.0, 40.0, 0.0]]",
         "line 2: stiffness: expected 2x2 (2 modes, from mass), got 2x3"),
        ("[[10.0, 0.0], [0.0, 40.0]]", "[[10.0, nan], [0.0, 40.0]]",
         "line 2: stiffness: expected finite numbers, got nan at index [0, 1]"),
        ("[[10.0, 0.0], [0.0, 40.0]]", '[[10.0, "x"], [0.0, 40.0]]',
         "line 2: stiffness: expected numbers"),
        ('["mid", "tip"]', '["tip", "tip"]', "line 5: node_names: the name 'tip' appears twice"),
        ('["mid", "tip"]', '["tip"]', "line 5: node_names: expected 2 names (one per node), got 1"),
        ("[[0.2, 0.0], [0.0, 0.0], [0.0, 0.0]]]", "[[0.2, 0.0], [0.0, 0.0]]]",
         "line 4: Psi: expected numbers in a regular"),
        ("[[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]", "[[1.0, 0.0, 0.0]]",
         "line 4: Psi: expected 1x3x2 (1 nodes, from node_positions; 3 axes; 2 modes), got 2x3x2"),
    ],
)  # fmt: skip
def test_bad_modal_file_names_file_line_and_field(tmp_path, old, new, expected):
    assert old in GOOD
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(kd.FileFormatError) as info:
        parse_modes(path)
    assert f"{path} {expected}" in str(info.value)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("damping_ratio = -0.1", "line 6: damping_ratio: must be non-negative"),
        ("damping_ratio = 0.1\ndamping = [[0.0, 0.0], [0.0, 0.0]]",
         "line 6: damping_ratio: give damping (a matrix) or damping_ratio, not both"),
        ("stifness = 3", "line 6: stifness: unknown field 'stifness'"),
        ("mode_names = [1, 2]", "line 6: mode_names: expected a list of 2 strings"),
        ("P = [[0.0, 0.0], [0.0, 0.0]]", "line 6: P: expected 3x2 (3 x n"),
        ("N = " + repr(np.eye(9).reshape(3, 3, 3, 3)[:, :, :2, :2].tolist()).replace("'", ""),
         None),
    ],
)  # fmt: skip
def test_bad_optional_fields(tmp_path, extra, expected):
    path = tmp_path / "bad.toml"
    path.write_text(GOOD + extra + "\n")
    if expected is None:  # N_ijpq = N_jiqp holds: accepted
        parse_modes(path)
        return
    with pytest.raises(kd.FileFormatError) as info:
        parse_modes(path)
    assert f"{path} {expected}" in str(info.value)


def test_N_must_be_a_symmetric_integral(tmp_path):
    N = np.zeros((3, 3, 2, 2))
    N[0, 1, 0, 1] = 0.5  # N[1][0][1][0] stays 0
    path = tmp_path / "bad.toml"
    path.write_text(GOOD + f"N = {N.tolist()}\n")
    with pytest.raises(kd.FileFormatError, match=r"line 6: N: .* N\[0\]\[1\]\[0\]\[1\] = 0.5"):
        parse_modes(path)


def test_bad_npz_names_file_and_array(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, mass=np.eye(2), stiffness=np.diag([1.0, np.inf]))
    with pytest.raises(kd.FileFormatError) as info:
        parse_modes(path)
    assert f"{path}: array 'stiffness': expected finite numbers" in str(info.value)
    np.savez(path, mass=np.eye(2))
    with pytest.raises(kd.FileFormatError, match="array 'stiffness': required field is missing"):
        parse_modes(path)
    path.write_text("not a zip file")
    with pytest.raises(kd.FileFormatError, match=r"bad.npz: cannot read the file as .npz"):
        parse_modes(path)


def test_write_refuses_bad_data(tmp_path):
    with pytest.raises(kd.ModelError, match="mass: not symmetric"):
        write_modes(tmp_path / "x.toml", {"mass": [[1.0, 0.1], [0.0, 1.0]], "stiffness": np.eye(2)})


@pytest.mark.skipif(not HAS_MODES, reason=NO_MODES)
@pytest.mark.parametrize("suffix", [".toml", ".npz"])
def test_read_modes_builds_kd_modes(tmp_path, suffix):
    fields = random_fields(np.random.default_rng(3))
    path = tmp_path / f"array{suffix}"
    write_modes(path, fields)
    modes = kd.io.read_modes(path)
    assert isinstance(modes, kd.Modes)
    skip = ("node_names", "mode_names", "damping_ratio")  # a ratio is stored as damping
    compared = [k for k in fields if hasattr(modes, k) and k not in skip]
    assert "mass" in compared
    for key in compared:
        np.testing.assert_array_equal(np.asarray(getattr(modes, key)), fields[key], err_msg=key)


# --------------------------------------------------------------------- TOML model files
MODEL = textwrap.dedent("""\
    [[bodies]]
    name = "hub"
    mass_kg = 100.0
    inertia_kg_m2 = { Ixx = 10.0, Iyy = 10.0, Izz = 10.0 }

    [[bodies]]
    name = "panel"
    mass_kg = 5.0
    inertia_kg_m2 = { Ixx = 1.0, Iyy = 1.0, Izz = 1.0 }
    {modes}

    [[joints]]
    name = "root"
    outer = "hub"
    kind = "free"

    [[joints]]
    name = "hinge"
    inner = "hub"
    outer = "panel"
    kind = "revolute"
    axis = 3
    """)


def read_case(path: Path) -> tuple[kd.io.Case, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case = kd.io.read_toml_case(path)
    return case, [str(w.message) for w in caught if w.category is UnsupportedFeatureWarning]


def check_flexible(case: kd.io.Case, notes: list[str], want: dict, line: int) -> None:
    assert_same_fields(case.modes["panel"], want)
    panel = case.model.body("panel")
    if HAS_MODES and hasattr(panel, "modes"):
        assert panel.modes is not None
        assert not notes
    else:
        assert len(notes) == 1
        assert f"line {line}: body 'panel': flexible-body dynamics are not modelled" in notes[0]


@pytest.mark.parametrize("suffix", [".toml", ".npz"])
def test_body_names_a_modal_file(tmp_path, suffix):
    fields = random_fields(np.random.default_rng(5))
    write_modes(tmp_path / f"panel{suffix}", fields)
    path = tmp_path / "model.toml"
    path.write_text(MODEL.replace("{modes}", f'modes = "panel{suffix}"'))
    case, notes = read_case(path)
    check_flexible(case, notes, fields, 10)


def test_inline_modes_table(tmp_path):
    modes = "\n[bodies.modes]\n" + GOOD
    path = tmp_path / "model.toml"
    path.write_text(MODEL.replace("{modes}", modes))
    case, notes = read_case(path)
    check_flexible(case, notes, parse_modes(_write(tmp_path / "good.toml", GOOD)), 11)
    # an error in the inline table names the model file, its line and the body
    path.write_text(MODEL.replace("{modes}", modes.replace("[0.5, 1.0]", "[0.4, 1.0]")))
    with pytest.raises(kd.FileFormatError) as info:
        read_case(path)
    assert f'{path} line 12: modes.mass in [[bodies]] #2 (name "panel"): not symmetric' in str(
        info.value
    )


def test_bad_modes_key(tmp_path):
    path = tmp_path / "model.toml"
    path.write_text(MODEL.replace("{modes}", 'modes = "missing.toml"'))
    with pytest.raises(kd.FileFormatError) as info:
        read_case(path)
    assert f'{path} line 10: modes in [[bodies]] #2 (name "panel"): modal-data file' in str(
        info.value
    )
    path.write_text(MODEL.replace("{modes}", "modes = 3"))
    with pytest.raises(kd.FileFormatError, match="line 10: modes in .*expected a file name or a"):
        read_case(path)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --------------------------------------------------------------------- 42's flex files
def flex_copy(tmp_path: Path, edit=None, flex: str = "Flex_Simple.txt", body: int = 1) -> Path:
    """TumbleSat with Flex Active and body ``body`` naming ``flex`` and Nodes_Simple.txt."""
    for name in (*TUMBLE, "Flex_Simple.txt", "Flex_Simple_NodeLocations.txt", "Nodes_Simple.txt"):
        shutil.copy(DATA / name, tmp_path / name)
    sc = tmp_path / "SC_TumbleSat.txt"
    lines = sc.read_text().splitlines()
    lines[20] = "TRUE                          ! Flex Active"
    lines[36 + 10 * body] = "Nodes_Simple.txt           ! Node File Name"
    lines[37 + 10 * body] = f"{flex}            ! Flex File Name"
    if edit is not None:
        edit(lines)
    sc.write_text("\n".join(lines) + "\n")
    return sc


def read_flex(sc: Path) -> tuple[kd.io.FortyTwoCase, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case = read_42_case(sc)
    return case, [str(w.message) for w in caught if w.category is UnsupportedFeatureWarning]


def test_42_demo_flex_file_values(tmp_path):
    sc = flex_copy(tmp_path)
    case, notes = read_flex(sc)
    flex = case.flex["B1"]
    f = flex.fields
    np.testing.assert_array_equal(flex.amplitudes, [1.0e-6, 1.0e-6])  # "Mode 0  x, u"
    np.testing.assert_array_equal(flex.rates, [0.0, 0.0])
    m = case.model
    np.testing.assert_array_equal(case.state.q[m.nq + m.modal("B1")], [1.0e-6, 1.0e-6])
    np.testing.assert_array_equal(f["mass"], np.eye(2))
    np.testing.assert_array_equal(f["stiffness"], np.diag([39.478, 3947.8]))
    np.testing.assert_array_equal(f["damping"], np.diag([0.012566, 0.12566]))
    # the file's comments: 1 Hz and 10 Hz, 0.1 % damping
    w = np.sqrt(np.diag(f["stiffness"]) / np.diag(f["mass"]))
    np.testing.assert_allclose(w / (2 * np.pi), [1.0, 10.0], rtol=1e-4)
    np.testing.assert_allclose(np.diag(f["damping"]) / (2 * w), [0.001, 0.001], rtol=1e-4)
    # nodes: the joint node of G0 (B1 is its outer body), then Nodes_Simple.txt's four
    assert f["node_names"] == ("G0", "node0", "node1", "node2", "node3")
    np.testing.assert_array_equal(
        f["node_positions"],
        [[0.0, 0.0, 0.0], [-1.0, 0.0, 2.5], [1.0, -1.0, 1.5], [0.0, 0.0, 1.0], [0.0, 0.0, -1.0]],
    )
    psi = np.zeros((5, 3, 2))
    psi[1, :, 0], psi[2, :, 0] = 0.1, -0.1  # "0 0 a 0.1", "0 1 a -0.1"
    psi[1, :, 1], psi[2, :, 1] = 0.1, 0.1
    np.testing.assert_array_equal(f["Psi"], psi)
    theta = np.zeros((5, 3, 2))
    theta[1, :, 0] = theta[1, :, 1] = theta[2, :, 1] = [0.1, 0.0707, 0.057735]
    theta[2, :, 0] = [-0.1, -0.0707, -0.057735]
    np.testing.assert_array_equal(f["Theta"], theta)
    for key, shape in (("P", (3, 2)), ("H", (3, 2)), ("L", (3, 3, 2)), ("N", (3, 3, 2, 2))):
        np.testing.assert_array_equal(f[key], np.zeros(shape))
    flagged = [n for n in notes if "Flex_Simple.txt" in n]
    body = case.model.body("B1")
    if HAS_MODES and hasattr(body, "modes"):
        assert body.modes is not None and not flagged
    else:
        assert len(flagged) == 1
        assert f"{sc} line 48: body B1: flex file Flex_Simple.txt read (2 modes" in flagged[0]
    assert not [n for n in notes if "node file" in n]  # the flexible body uses its nodes


def test_42_flexible_case_on_an_orbit(tmp_path):
    """A flexible 42 spacecraft on 42's LEO orbit: the model has the central field and
    the modes (a flexible body in a central field was refused before), and the native
    engine, which runs the field on the elastic motion in the recursion, agrees with the
    dense one."""
    sc = flex_copy(tmp_path)
    shutil.copy(DATA / "Orb_LEO.txt", tmp_path / "Orb_LEO.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TumbleSat's inertia, 42 features left out
        case = read_42_case(sc, orbit=tmp_path / "Orb_LEO.txt")
    model = case.model
    assert model.central_gravity is not None and model.nf == 2
    ref = kd.forward_dynamics(model, case.state)
    got = kd.compile_model(model).forward_dynamics(case.state)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * max(1.0, np.linalg.norm(ref)))


def test_42_older_layout_with_node_locations(tmp_path):
    case, _ = read_flex(flex_copy(tmp_path, flex="Flex_Simple_NodeLocations.txt"))
    f = case.flex["B1"].fields
    assert f["node_names"] == ("G0", "500001", "500002")
    np.testing.assert_array_equal(f["node_positions"][1:], [[1.0, -1.0, 1.5], [-1.0, 0.0, 2.5]])
    np.testing.assert_array_equal(f["Psi"][2, :, 0], [-0.1, -0.1, -0.1])


HUB_FLEX = textwrap.dedent("""\
    <<<<<<<<<<<<<<  Flexible Body Inputs for 42  >>>>>>>>>>>>>>>>>>>
    Hub Flex Model                       ! Description
    1                                    ! Number of Flex Modes
    ****************** Initial Modal States x, u  ******************
    0.002  -0.01                         ! Mode 0  x, u
    ****************** Joint Node Mode Shapes *********************
    *******  Non-zero Translation Mode Shape (PSI) Elements ********
    2                                  ! Number of non-zero elements
      0  2  1  0.3                     ! [Mode] [Joint] [Axis] Value
      0  0  2  -0.2                    ! [Mode] [Joint] [Axis] Value
    *******  Non-zero Rotation Mode Shape (THETA) Elements ********
    1                                  ! Number of non-zero elements
      0  3  0  0.05                    ! [Mode] [Joint] [Axis] Value
    **************** Analysis Node Mode Shapes *********************
    *******  Non-zero Translation Mode Shape (PSI) Elements ********
    1                                  ! Number of non-zero elements
      0  0  2  0.4                     ! [Mode] [Node] [Axis] Value
    *******  Non-zero Rotation Mode Shape (THETA) Elements ********
    0                                  ! Number of non-zero elements
    ****************  Non-zero Mass Matrix Elements ******************
    1                                  ! Number of non-zero elements
    0 0    2.0                         ! [Row] [Col] Value
    *************  Non-zero Stiffness Matrix Elements ****************
    1                                  ! Number of non-zero elements
    0 0    50.0                        ! [Row] [Col] Value
    *************  Non-zero Damping Matrix Elements ****************
    0                                  ! Number of non-zero elements
    *********  Linear Momentum Modal Integral, Pf, 3 x Nf  *********
    0.1 0.2 0.3                        ! Mode 0, [x y z]
    ********  Angular Momentum Modal Integral, Hf, 3 x Nf  *********
    0.4 0.5 0.6                        ! Mode 0, [x y z]
    **********  Linear Modal Integral, L, 3 x 3 x Nf  **************
    1                                  ! Number of non-zero elements
    0 1 0  0.7                         ! [i] [j] [Mode] Value
    *********  Angular Modal Integral, N, 3 x 3 x Nf x Nf  *********
    2                                  ! Number of non-zero elements
    1 2 0 0  0.8                       ! [i] [j] [Mode] [Mode] Value
    2 1 0 0  0.8                       ! [i] [j] [Mode] [Mode] Value
    """)


def hub_copy(tmp_path: Path, text: str = HUB_FLEX, edit=None) -> Path:
    def both(lines):
        lines[36] = "NONE                ! Node File Name"  # one node, at the mass centre
        if edit is not None:
            edit(lines)

    sc = flex_copy(tmp_path, both, flex="Flex_Hub.txt", body=0)
    (tmp_path / "Flex_Hub.txt").write_text(text)
    return sc


def test_42_joint_nodes_of_a_hub(tmp_path):
    """B0 is the inner body of G0..G3: a joint node at each joint's inner point."""
    case, notes = read_flex(hub_copy(tmp_path))
    f = case.flex["B0"].fields
    assert f["node_names"] == ("G0", "G1", "G2", "G3", "node0")
    np.testing.assert_array_equal(
        f["node_positions"],  # SC_TumbleSat.txt: the joints' "Position wrt inner body origin"
        [[0.5, 0.0, 2.5], [0.0, 0.5, 2.5], [-0.5, 0.0, 2.5], [0.0, -0.5, 2.5],
         case.model.body("B0").com],
    )  # fmt: skip
    psi, theta = np.zeros((5, 3, 1)), np.zeros((5, 3, 1))
    psi[2, 1, 0], psi[0, 2, 0], theta[3, 0, 0], psi[4, 2, 0] = 0.3, -0.2, 0.05, 0.4
    np.testing.assert_array_equal(f["Psi"], psi)
    np.testing.assert_array_equal(f["Theta"], theta)
    np.testing.assert_array_equal(f["mass"], [[2.0]])
    np.testing.assert_array_equal(f["damping"], [[0.0]])
    np.testing.assert_array_equal(case.flex["B0"].amplitudes, [0.002])
    np.testing.assert_array_equal(case.flex["B0"].rates, [-0.01])
    # 42's initial modal states (x, u) are the state's modal coordinates and speeds
    m = case.model
    np.testing.assert_array_equal(case.state.q[m.nq + m.modal("B0")], [0.002])
    np.testing.assert_array_equal(case.state.u[m.n + m.modal("B0")], [-0.01])
    # TumbleSat is REFPT_CM: 42 sets Pf and Hf to zero, and says so here
    np.testing.assert_array_equal(f["P"], np.zeros((3, 1)))
    np.testing.assert_array_equal(f["H"], np.zeros((3, 1)))
    assert any("line 28: body B0: REFPT_CM: Pf and Hf are set to zero" in n for n in notes)
    L = np.zeros((3, 3, 1))
    L[0, 1, 0] = 0.7
    np.testing.assert_array_equal(f["L"], L)
    assert f["N"][1, 2, 0, 0] == f["N"][2, 1, 0, 0] == 0.8
    # 2nd order terms off in the SC file, L and N non-zero: kanedyn keeps them, and says so
    assert any("line 22: body B0: Include 2nd Order Flex Terms is FALSE" in n for n in notes)


def test_42_refpt_joint_keeps_Pf_and_Hf(tmp_path):
    case, notes = read_flex(
        hub_copy(tmp_path, edit=lambda lines: lines.__setitem__(19, "REFPT_JOINT"))
    )
    f = case.flex["B0"].fields
    np.testing.assert_array_equal(f["P"], [[0.1], [0.2], [0.3]])
    np.testing.assert_array_equal(f["H"], [[0.4], [0.5], [0.6]])
    assert not any("Pf and Hf" in n for n in notes)


def test_42_flex_file_without_modes_keeps_the_body_rigid(tmp_path):
    case, notes = read_flex(
        hub_copy(tmp_path, replace_line(HUB_FLEX, 3, "0  ! Number of Flex Modes"))
    )
    assert case.flex == {}
    assert any("line 38: body B0: flex file Flex_Hub.txt has no modes: the body is rigid" in n
               for n in notes)  # fmt: skip


def test_42_flex_inactive_keeps_the_body_rigid(tmp_path):
    sc = flex_copy(tmp_path, lambda lines: lines.__setitem__(20, "FALSE  ! Flex Active"))
    case, notes = read_flex(sc)
    assert case.flex == {}
    assert any("line 48: body B1: flex file Flex_Simple.txt is not read: Flex Active is FALSE"
               in n for n in notes)  # fmt: skip
    assert any("line 47: body B1: node file Nodes_Simple.txt is not used" in n for n in notes)


def replace_line(text: str, n: int, new: str) -> str:
    lines = text.splitlines()
    lines[n - 1] = new
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("n", "new", "expected"),
    [
        (3, "one    ! Number of Flex Modes", "line 3: expected 'Number of Flex Modes' as an integer"),
        (3, "-1     ! Number of Flex Modes", "line 3: body B0: expected a non-negative number of modes, got -1"),
        (5, "0.002  ! Mode 0 x, u", "line 5: expected 'Mode 0 x, u' as 2 numbers"),
        (9, "  1  2  1  0.3", "line 9: joint node PSI: flex mode 1 is out of range 0..0"),
        (9, "  0  4  1  0.3", "line 9: joint node PSI: joint 4 is out of range 0..3"),
        (13, "  0  3  3  0.05", "line 13: joint node THETA: axis 3 is out of range 0..2"),
        (17, "  0  1  2  0.4", "line 17: analysis node PSI: node 1 is out of range 0..0"),
        (17, "  0  0  2", "line 17: expected 'analysis node PSI element' as 3 integer indices and a number"),
        (8, "3     ! Number of non-zero elements", "line 11: expected 'joint node PSI element' as 3 integer"),
        (6, "0.1 0.2 0.3", "line 6: expected 'Joint Node Mode Shapes' as a section banner"),
        (22, "0 1    2.0", "line 22: mass matrix: column 1 is out of range 0..0"),
        (22, "0 0    -2.0", "line 20: body B0: mass: not positive definite"),
        (25, "0 0    -50.0", "line 23: body B0: stiffness: not positive semidefinite"),
        (29, "0.1 0.2", "line 29: expected 'Pf: Mode 0, [x y z]' as 3 numbers"),
        (34, "0 3 0  0.7", "line 34: L: j 3 is out of range 0..2"),
        (37, "1 2 0 0  0.9", "line 35: body B0: N: N[i][j][p][q] = ∫ Ψ_ip Ψ_jq dm must equal"),
    ],
)  # fmt: skip
def test_bad_42_flex_file(tmp_path, n, new, expected):
    sc = hub_copy(tmp_path, replace_line(HUB_FLEX, n, new))
    with pytest.raises(kd.FileFormatError) as info:
        read_flex(sc)
    assert f"{tmp_path / 'Flex_Hub.txt'} {expected}" in str(info.value)


def test_42_flex_file_of_an_unconnected_joint(tmp_path):
    # B1 is on G0 only: a joint-node entry for G2 (B0 to B3) is an error, as in 42
    text = HUB_FLEX.replace("  0  2  1  0.3", "  0  0  1  0.3").replace(
        "  0  3  0  0.05", "  0  2  0  0.05"
    )
    sc = flex_copy(tmp_path, flex="Flex_Hub.txt")
    (tmp_path / "Flex_Hub.txt").write_text(text)
    with pytest.raises(kd.FileFormatError) as info:
        read_flex(sc)
    assert (
        "Flex_Hub.txt line 13: joint node THETA: body B1 is not connected to joint G2 (B0 to B3)"
        in str(info.value)
    )


def test_42_missing_and_truncated_files(tmp_path):
    sc = flex_copy(tmp_path, flex="Flex_Missing.txt")
    with pytest.raises(
        kd.FileFormatError,
        match=r"SC_TumbleSat.txt line 48: body B1: flex file .*Flex_Missing.txt' not found",
    ):
        read_flex(sc)
    sc = flex_copy(tmp_path, lambda lines: lines.__setitem__(46, "Nodes_Missing.txt"))
    with pytest.raises(
        kd.FileFormatError,
        match=r"SC_TumbleSat.txt line 47: node file .*Nodes_Missing.txt' not found",
    ):
        read_flex(sc)
    sc = hub_copy(tmp_path, "\n".join(HUB_FLEX.splitlines()[:30]) + "\n")
    with pytest.raises(
        kd.FileFormatError,
        match=r"Flex_Hub.txt: the file ends after line 30; expected 'Hf: Mode 0, \[x y z\]'",
    ):
        read_flex(sc)


def test_schema_document_modal_example_reads(tmp_path):
    """The modal-data example in docs/toml-schema.md: 1 Hz and 10 Hz, as its comment says."""
    text = (Path(__file__).parents[2] / "docs" / "toml-schema.md").read_text()
    start = text.index("```toml\n", text.index("## Modal-data files")) + len("```toml\n")
    path = _write(tmp_path / "array.toml", text[start : text.index("```", start)])
    f = parse_modes(path)
    w = np.sqrt(np.diag(f["stiffness"]) / np.diag(f["mass"]))
    np.testing.assert_allclose(w / (2 * np.pi), [1.0, 10.0], rtol=1e-4)
    assert f["node_names"] == ("tip",) and f["damping_ratio"] == 0.005


# --------------------------------------------------------------------- write_toml
@pytest.mark.skipif(not HAS_MODES, reason=NO_MODES)
def test_write_toml_round_trips_a_flexible_model(tmp_path):
    """read → write → read: the same modal data bit for bit, and the same mass matrix and
    forcing at a random flexible state, for a kd.beam_body cantilever (stiffened, damped)
    and a body with random modal data (coupled modes, nodes, geometric stiffness)."""
    rng = np.random.default_rng(11)
    hub = kd.Body("hub", 100.0, kd.inertia_tensor(10.0, 12.0, 9.0))
    beam = kd.beam_body("beam", 3.0, 1.5, 250.0, n_modes=2, damping_ratio=0.01)
    panel = kd.Body("panel", 5.0, kd.inertia_tensor(1.0, 1.2, 0.8), com=(0.3, 0.0, 0.1),
                    modes=kd.Modes(**random_fields(rng)))  # fmt: skip
    model = kd.Model(
        [hub, beam, panel],
        [kd.Joint.free("root", outer="hub"),
         kd.Joint.weld("mount", "hub", "beam", inner_point=(0.5, 0.0, 0.0)),
         kd.Joint.revolute("hinge", "hub", "panel", axis=3, inner_point=(-0.5, 0.0, 0.0),
                           stiffness=3.0)],
        gravity=(0.0, 0.0, -9.81),
    )  # fmt: skip
    first = tmp_path / "first.toml"
    kd.io.write_toml(model, first)
    read = kd.io.read_toml(first)
    second = tmp_path / "second.toml"
    kd.io.write_toml(read, second)
    again = kd.io.read_toml(second)
    assert second.read_text() == first.read_text()
    for m in (read, again):
        assert [b.name for b in m.bodies] == ["hub", "beam", "panel"] and m.nf == model.nf
        for b in model.bodies[1:]:
            got, want = m.body(b.name).modes, b.modes
            for key in ("mass", "stiffness", "damping", "P", "H", "L", "N", "node_positions",
                        "Psi", "Theta", "geometric"):  # fmt: skip
                np.testing.assert_array_equal(getattr(got, key), getattr(want, key), err_msg=key)
            assert got.node_names == want.node_names and got.mode_names == want.mode_names
    q = model.initial_state().q[: model.nq].copy()
    q[:4] = rng.normal(size=4)
    q[:4] /= np.linalg.norm(q[:4])
    q[4:7] = rng.normal(size=3)
    q[7] = rng.normal()
    state = kd.State(np.concatenate([q, 0.05 * rng.normal(size=model.nf)]),
                     rng.normal(size=model.n_total))  # fmt: skip
    for m in (read, again):
        np.testing.assert_array_equal(kd.mass_matrix(m, state), kd.mass_matrix(model, state))
        np.testing.assert_array_equal(kd.forcing(m, state), kd.forcing(model, state))
    # a state with modal parts: the [initial.<body>] tables hold them, bit for bit
    kd.io.write_toml(model, tmp_path / "x.toml", state)
    case = kd.io.read_toml_case(tmp_path / "x.toml")
    np.testing.assert_array_equal(case.state.q, state.q)
    np.testing.assert_array_equal(case.state.u, state.u)
    kd.io.write_toml(case.model, tmp_path / "y.toml", case.state)
    assert (tmp_path / "y.toml").read_text() == (tmp_path / "x.toml").read_text()
    rest = kd.State(np.concatenate([q, np.zeros(model.nf)]), np.zeros(model.n_total))
    kd.io.write_toml(model, tmp_path / "rest.toml", rest)
    case = kd.io.read_toml_case(tmp_path / "rest.toml")
    np.testing.assert_array_equal(case.state.q, rest.q)


def clamped_beam(tmp_path, initial=""):
    """A cantilever (kd.beam_body, 2 modes bending along y: L = 2 m, ρ = 1.5 kg/m,
    EI = 250 N m²) welded to N, written by write_toml, with ``initial`` appended."""
    beam = kd.beam_body("beam", 2.0, 1.5, 250.0, n_modes=2, directions=(1,))
    model = kd.Model([beam], [kd.Joint.weld("clamp", None, "beam")])
    path = tmp_path / "beam.toml"
    kd.io.write_toml(model, path)
    path.write_text(path.read_text() + textwrap.dedent(initial))
    return path


def test_initial_modal_state_is_read_and_shares_a_table_with_a_joint(tmp_path):
    """[initial.<body>] sets η and ξ as written; a joint named like its body shares the
    table (joint keys and modal keys), and the joint's entry still fixes it on loops."""
    path = clamped_beam(tmp_path, """
        [initial.beam]
        modal_coordinates = [0.005, -1e-3]
        modal_rates = [0.25, 0]
        """)  # fmt: skip
    case = kd.io.read_toml_case(path)
    m = case.model
    np.testing.assert_array_equal(case.state.q[m.nq + m.modal("beam")], [0.005, -1e-3])
    np.testing.assert_array_equal(case.state.u[m.n + m.modal("beam")], [0.25, 0.0])
    beam = m.body("beam")
    shared = kd.Model([beam], [kd.Joint.revolute("beam", None, "beam", axis=3)])
    state = shared.set_joint(shared.initial_state(), "beam", angles=[0.3], rates=[-2.0])
    state = shared.set_modes(state, "beam", amplitudes=[1e-3, 2e-4], rates=[0.1, -0.2])
    kd.io.write_toml(shared, tmp_path / "shared.toml", state)
    text = (tmp_path / "shared.toml").read_text()
    assert text.count("[initial.") == 1 and "modal_rates" in text and "angles_rad" in text
    back = kd.io.read_toml_case(tmp_path / "shared.toml").state
    np.testing.assert_array_equal(back.q, state.q)
    np.testing.assert_array_equal(back.u, state.u)


def test_schema_document_initial_modes_example_reads(tmp_path):
    """The [initial.<body>] example in docs/toml-schema.md: 1 cm at the beam's tip (its
    node "tip" deflected by Ψ_tip η), at rest."""
    text = (Path(__file__).parents[2] / "docs" / "toml-schema.md").read_text()
    start = text.index("```toml\n", text.index("## `[initial.<body>]`")) + len("```toml\n")
    case = kd.io.read_toml_case(clamped_beam(tmp_path, text[start : text.index("```", start)]))
    m, s = case.model, case.state
    eta = s.q[m.nq + m.modal("beam")]
    psi, _ = m.body("beam").modes.shapes(["tip"])
    np.testing.assert_allclose(psi[0] @ eta, [0.0, 0.01, 0.0], rtol=1e-12, atol=1e-15)
    assert not np.any(s.u)


@pytest.mark.parametrize(
    ("initial", "key", "expected"),
    [
        (
            "[initial.beam]\nmodal_coordinates = [0.01]\n",
            "modal_coordinates",
            "modal_coordinates in [initial.beam]: body 'beam' has 2 modes: expected a list of 2 "
            "numbers (one a mode), got [0.01]",
        ),
        (
            "[initial.beam]\nmodal_rates = [0.0, nan]\n",
            "modal_rates",
            "modal_rates in [initial.beam]: expected a finite number, got nan",
        ),
        (
            '[initial.beam]\nmodal_rates = [0.0, "fast"]\n',
            "modal_rates",
            'modal_rates in [initial.beam]: expected a number, got "fast"',
        ),
        (
            "[initial.bem]\nmodal_coordinates = [0.01, 0]\n",
            "modal_coordinates",
            "modal_coordinates in [initial.bem]: no body named 'bem' (did you mean 'beam'?), so it "
            "has no modal state; flexible bodies are ['beam']",
        ),
        (
            "[initial.clamp]\nmodal_coordinates = [0.01, 0]\n",
            "modal_coordinates",
            "modal_coordinates in [initial.clamp]: no body named 'clamp'",
        ),
        (
            "[initial.beam]\nmodal_coordinate = [0.01, 0]\n",
            "modal_coordinate",
            '[initial.beam]: unknown key "modal_coordinate"; allowed keys are angles_deg',
        ),
        (
            "[initial.beam]\nangles_rad = [0.1]\n",
            None,
            "[initial.beam]: no joint named 'beam'; joints are ['clamp']; flexible bodies are "
            "['beam']",
        ),
    ],
)
def test_bad_initial_modal_state_names_file_line_and_field(tmp_path, initial, key, expected):
    path = clamped_beam(tmp_path, initial)
    # the line of the key, or of the table's header for a table that names no joint
    at = "[initial.beam]" if key is None else next(ln for ln in initial.splitlines()
                                                   if ln.startswith(key))  # fmt: skip
    line = path.read_text().splitlines().index(at) + 1
    with pytest.raises(kd.FileFormatError) as err:
        kd.io.read_toml_case(path)
    assert f"beam.toml line {line}: {expected}" in str(err.value)


def test_initial_modal_state_of_a_rigid_body_is_refused(tmp_path):
    path = tmp_path / "rigid.toml"
    model = kd.Model([kd.Body("hub", 2.0, kd.inertia_tensor(1.0, 1.0, 1.0))],
                     [kd.Joint.revolute("pin", None, "hub", axis=3)])  # fmt: skip
    kd.io.write_toml(model, path)
    path.write_text(path.read_text() + "[initial.hub]\nmodal_rates = [1.0]\n")
    line = len(path.read_text().splitlines())
    with pytest.raises(
        kd.FileFormatError,
        match=rf"rigid.toml line {line}: modal_rates in \[initial.hub\]: body 'hub' is rigid "
        r"\(it has no modes\), so it has no modal state; the model has no flexible body",
    ):
        kd.io.read_toml_case(path)


@pytest.mark.slow
def test_cli_run_from_an_initial_deflection_rings_at_the_first_bending_frequency(tmp_path):
    """``kanedyn simulate`` of a clamped beam released from a deflection in its first
    mode (tip deflection Ψ_tip η = 2 × 5 mm): η₁ oscillates at the Euler–Bernoulli
    cantilever frequency ω₁ = 1.875104² √(EI / (ρ L⁴)) (the textbook root of
    1 + cos βL cosh βL = 0), from the file's value, and mode 2 stays at rest."""
    from kanedyn.cli import main

    path = clamped_beam(tmp_path, "[initial.beam]\nmodal_coordinates = [0.005, 0.0]\n")
    out = tmp_path / "o"
    assert main(["simulate", str(path), "--t-final", "2", "--dt", "0.001",
                 "--output-every", "0.005", "--quiet", "--out", str(out)]) == 0  # fmt: skip
    rows = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    header = next(csv.reader(open(out / "trajectory.csv")))
    t, eta = rows[:, 0], rows[:, header.index("beam.y1 [1]")]
    assert eta[0] == 0.005 and np.all(rows[:, header.index("beam.y2 [1]")] == 0.0)
    i = np.nonzero(np.sign(eta[:-1]) != np.sign(eta[1:]))[0]
    zeros = t[i] - eta[i] * (t[i + 1] - t[i]) / (eta[i + 1] - eta[i])
    assert len(zeros) >= 6
    omega = np.pi / np.mean(np.diff(zeros))
    np.testing.assert_allclose(omega, 1.875104**2 * np.sqrt(250.0 / (1.5 * 2.0**4)), rtol=1e-5)
    np.testing.assert_allclose(np.abs(eta).max(), 0.005, rtol=1e-6)


def test_42_joints_on_a_flexible_inner_body_ride_on_their_nodes(tmp_path):
    """B0 is flexible and the inner body of G0..G3: each joint attaches at its joint node
    (Joint.inner_node), without a warning; B1 (outer of G0) moves with the node's
    displacement Ψ_G0 η (the flex file's G0 entry: PSI z = -0.2, no THETA)."""
    case, notes = read_flex(hub_copy(tmp_path))
    m = case.model
    assert [m.joint(f"G{k}").inner_node for k in range(4)] == ["G0", "G1", "G2", "G3"]
    assert not any("attached rigidly" in n for n in notes)
    s = case.state
    eta = s.q[m.nq + m.modal("B0")]
    rest = m.set_modes(s, "B0", amplitudes=[0.0])
    k, k0 = kd.kinematics(m, s), kd.kinematics(m, rest)
    i0, i1 = m.body_index("B0"), m.body_index("B1")
    np.testing.assert_allclose(k.p[i1] - k0.p[i1], k.R_N_B[i0] @ [0.0, 0.0, -0.2 * eta[0]],
                               atol=1e-15)  # fmt: skip


def test_42_joint_with_a_flexible_outer_body_rides_on_its_node(tmp_path):
    """B1 is flexible and the outer body of G0: G0's Go is on B1's joint node G0
    (Joint.outer_node), without a warning."""
    case, notes = read_flex(flex_copy(tmp_path))
    assert case.model.joint("G0").outer_node == "G0"
    assert case.model.joint("G0").inner_node is None
    assert not any("attached rigidly" in n for n in notes)
