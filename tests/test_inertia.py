"""Tests of kanedyn.spatial.inertia against the integral definition and hand computations.

The oracle throughout is the definition of the inertia tensor of point masses about a
point P,

    I_P = sum_k m_k (|d_k|^2 U - d_k d_k^T),   d_k = r_k - P,

evaluated with plain numpy sums in this file.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.transform import Rotation

import kanedyn as kd
from kanedyn.errors import ModelError

FAST = settings(max_examples=50, deadline=None, database=None)

masses = st.floats(0.1, 10.0, allow_nan=False, allow_infinity=False)
coords = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


@st.composite
def clouds(draw, min_size: int = 1, max_size: int = 8):
    """A cloud of point masses: masses (n,) and positions (n, 3)."""
    n = draw(st.integers(min_size, max_size))
    m = draw(arrays(np.float64, n, elements=masses))
    r = draw(arrays(np.float64, (n, 3), elements=coords))
    return m, r


def cloud_inertia(m: np.ndarray, r: np.ndarray, about: np.ndarray) -> np.ndarray:
    """Inertia of point masses about ``about``: sum_k m_k (|d_k|^2 U - d_k d_k^T)."""
    I = np.zeros((3, 3))
    for mk, rk in zip(m, r, strict=True):
        d = rk - about
        I += mk * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    return I


def cloud_mass_properties(m: np.ndarray, r: np.ndarray):
    """(mass, mass centre, inertia about the mass centre), straight from the definitions."""
    mass = float(np.sum(m))
    c = np.sum(m[:, None] * r, axis=0) / mass
    return mass, c, cloud_inertia(m, r, c)


def close(a, b, scale: float = 1.0):
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11 * max(scale, 1.0))


# --------------------------------------------------------------------------- inertia_tensor


@given(clouds())
@FAST
def test_inertia_tensor_matches_point_mass_integrals(cloud):
    m, r = cloud
    x, y, z = r.T
    # scalar definitions: moments and products as positive integrals (42 / CAD convention)
    Ixx = np.sum(m * (y**2 + z**2))
    Iyy = np.sum(m * (x**2 + z**2))
    Izz = np.sum(m * (x**2 + y**2))
    Ixy = np.sum(m * x * y)
    Ixz = np.sum(m * x * z)
    Iyz = np.sum(m * y * z)
    I = kd.inertia_tensor(Ixx, Iyy, Izz, Ixy=Ixy, Ixz=Ixz, Iyz=Iyz)
    expected = cloud_inertia(m, r, np.zeros(3))
    close(I, expected, scale=np.abs(expected).max())


def test_inertia_tensor_negates_products():
    # a single 2 kg point at (1, 3, 0): Ixy = ∫xy dm = 2*1*3 = 6, so the tensor holds -6
    I = kd.inertia_tensor(18.0, 2.0, 20.0, Ixy=6.0)
    # definition: 2 * (|r|^2 U - r r^T), |r|^2 = 10
    #   xx: 2*(10-1) = 18, yy: 2*(10-9) = 2, zz: 2*10 = 20, xy: -2*3 = -6
    expected = np.array([[18.0, -6.0, 0.0], [-6.0, 2.0, 0.0], [0.0, 0.0, 20.0]])
    np.testing.assert_array_equal(I, expected)
    assert I.dtype == np.float64
    I = kd.inertia_tensor(1.0, 2.0, 3.0, Ixy=0.1, Ixz=0.2, Iyz=0.3)
    assert (I[0, 1], I[1, 0], I[0, 2], I[2, 0], I[1, 2], I[2, 1]) == (
        -0.1,
        -0.1,
        -0.2,
        -0.2,
        -0.3,
        -0.3,
    )


# --------------------------------------------------------------------------- validate_inertia


EXPLORER1_HUB = np.diag([5174.0, 3593.0, 245.4])  # 42's TumbleSat hub: 245.4 + 3593 < 5174


def test_validate_inertia_accepts_and_returns_float_array():
    I = kd.validate_inertia([[2, 0, 0], [0, 3, 0], [0, 0, 4]])
    assert I.shape == (3, 3)
    assert I.dtype == np.float64
    np.testing.assert_array_equal(I, np.diag([2.0, 3.0, 4.0]))


def test_validate_inertia_accepts_thin_plate_on_the_triangle_boundary():
    # a thin plate in the xy plane: Izz = Ixx + Iyy exactly (1 + 2 = 3), a real body
    I = Rotation.from_euler("XYZ", [0.3, -0.7, 1.1]).as_matrix()
    plate = I @ np.diag([1.0, 2.0, 3.0]) @ I.T
    kd.validate_inertia(plate)


@pytest.mark.parametrize(
    ("I", "match"),
    [
        ([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "not symmetric"),
        (np.diag([1.0, 1.0, -0.5]), "not positive definite"),
        (np.diag([1.0, 1.0, 0.0]), "not positive definite"),  # massless direction (a rod)
        # symmetric with positive diagonal, but eigenvalues 1 - 2 = -1, 1, 1 + 2 = 3 (hand)
        ([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "not positive definite"),
        (np.diag([1.0, np.nan, 1.0]), "non-finite"),
        (np.diag([1.0, np.inf, 1.0]), "non-finite"),
        (np.eye(2), "3x3"),
        (np.ones(3), "3x3"),
        (np.ones(9), "3x3"),
        (np.diag([1.0, 1.0, 2.5]), "triangle inequality"),  # 1 + 1 < 2.5
        (EXPLORER1_HUB, "triangle inequality"),
    ],
)
def test_validate_inertia_rejects(I, match):
    with pytest.raises(ModelError, match=match):
        kd.validate_inertia(I)


def test_validate_inertia_names_the_tensor():
    with pytest.raises(ModelError, match="^panel: inertia is not positive definite"):
        kd.validate_inertia(-np.eye(3), name="panel")


def test_validate_inertia_triangle_violation_is_basis_independent():
    # the same Explorer-1 hub in rotated axes still violates the inequality
    R = Rotation.from_euler("ZYX", [0.4, 0.2, -1.0]).as_matrix()
    with pytest.raises(ModelError, match="triangle inequality"):
        kd.validate_inertia(R @ EXPLORER1_HUB @ R.T)


def test_validate_inertia_check_triangle_false():
    I = kd.validate_inertia(EXPLORER1_HUB, check_triangle=False)
    np.testing.assert_array_equal(I, EXPLORER1_HUB)
    with pytest.raises(ModelError, match="not positive definite"):
        kd.validate_inertia(np.diag([5174.0, 3593.0, -245.4]), check_triangle=False)
    with pytest.raises(ModelError, match="not symmetric"):
        kd.validate_inertia(EXPLORER1_HUB + np.triu(np.ones((3, 3)), 1), check_triangle=False)


# --------------------------------------------------------------------------- parallel_axis


@given(clouds(), arrays(np.float64, 3, elements=coords))
@FAST
def test_parallel_axis_matches_point_cloud(cloud, P):
    m, r = cloud
    mass, c, I_c = cloud_mass_properties(m, r)
    expected = cloud_inertia(m, r, P)
    scale = np.abs(expected).max()
    close(kd.parallel_axis(I_c, mass, P - c), expected, scale)
    # the shift is even in r
    close(kd.parallel_axis(I_c, mass, c - P), expected, scale)


def test_parallel_axis_hand_case():
    # 3 kg, I_c = diag(1, 2, 3), shifted by r = (0, 0, 2):
    #   m (|r|^2 U - r r^T) = 3 * diag(4, 4, 0) = diag(12, 12, 0)
    I_P = kd.parallel_axis(np.diag([1.0, 2.0, 3.0]), 3.0, (0.0, 0.0, 2.0))
    np.testing.assert_allclose(I_P, np.diag([13.0, 14.0, 3.0]), atol=1e-15)


# --------------------------------------------------------------------------- principal_axes


@given(
    arrays(np.float64, 3, elements=st.floats(0.5, 10.0)),
    arrays(np.float64, 4, elements=st.floats(-1.0, 1.0)).filter(lambda q: np.linalg.norm(q) > 1e-2),
)
@FAST
def test_principal_axes_reconstructs_tensor(moments_in, quat):
    Q = Rotation.from_quat(quat).as_matrix()
    I = Q @ np.diag(moments_in) @ Q.T
    moments, R = kd.principal_axes(I)
    np.testing.assert_allclose(moments, np.sort(moments_in), rtol=1e-10, atol=1e-10)
    assert np.all(np.diff(moments) >= 0.0)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(R @ np.diag(moments) @ R.T, I, rtol=1e-10, atol=1e-10)


def test_principal_axes_hand_case():
    # diag(1, 2, 3) turned 30 degrees about z: the principal axes are the turned x, y, z
    Q = Rotation.from_euler("Z", 30.0, degrees=True).as_matrix()
    moments, R = kd.principal_axes(Q @ np.diag([1.0, 2.0, 3.0]) @ Q.T)
    np.testing.assert_allclose(moments, [1.0, 2.0, 3.0], atol=1e-12)
    for k in range(3):
        # each column equals the turned axis up to sign
        assert abs(np.dot(R[:, k], Q[:, k])) == pytest.approx(1.0, abs=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-12)


# --------------------------------------------------------------------------- composites


def test_composite_two_boxes_by_hand():
    # box 1: 6 kg, sides 1 x 2 x 2 m, centre (0, 0, 0):
    #   I1 = 6/12 diag(2^2+2^2, 1^2+2^2, 1^2+2^2) = diag(4, 2.5, 2.5)
    # box 2: 2 kg, unit cube, centre (3, 0, 1):
    #   I2 = 2/12 diag(2, 2, 2) = diag(1/3, 1/3, 1/3)
    I1 = np.diag([4.0, 2.5, 2.5])
    I2 = np.eye(3) / 3.0
    m, c, I = kd.composite_mass_properties([(6.0, (0, 0, 0), I1), (2.0, (3.0, 0.0, 1.0), I2)])
    # m = 6 + 2 = 8;  c = (6*(0,0,0) + 2*(3,0,1)) / 8 = (0.75, 0, 0.25)
    assert m == 8.0
    np.testing.assert_allclose(c, [0.75, 0.0, 0.25], atol=1e-15)
    # d1 = c1 - c = (-0.75, 0, -0.25), |d1|^2 = 0.625:
    #   6 * [[0.0625, 0, -0.1875], [0, 0.625, 0], [-0.1875, 0, 0.5625]]
    #     = [[0.375, 0, -1.125], [0, 3.75, 0], [-1.125, 0, 3.375]]
    # d2 = c2 - c = (2.25, 0, 0.75), |d2|^2 = 5.625:
    #   2 * [[0.5625, 0, -1.6875], [0, 5.625, 0], [-1.6875, 0, 5.0625]]
    #     = [[1.125, 0, -3.375], [0, 11.25, 0], [-3.375, 0, 10.125]]
    # shifts sum to [[1.5, 0, -4.5], [0, 15, 0], [-4.5, 0, 13.5]]
    #   (check: reduced mass 6*2/8 = 1.5 times (10 U - D D^T), D = (3, 0, 1))
    # I = diag(4 + 1/3, 2.5 + 1/3, 2.5 + 1/3) + shifts
    expected = np.array(
        [
            [4.0 + 1.0 / 3.0 + 1.5, 0.0, -4.5],
            [0.0, 2.5 + 1.0 / 3.0 + 15.0, 0.0],
            [-4.5, 0.0, 2.5 + 1.0 / 3.0 + 13.5],
        ]
    )
    np.testing.assert_allclose(I, expected, rtol=1e-14, atol=1e-14)


def test_composite_single_part_is_itself():
    I1 = kd.inertia_tensor(2.0, 3.0, 4.0, Ixy=0.1)
    m, c, I = kd.composite_mass_properties([(5.0, (1.0, -2.0, 3.0), I1)])
    assert m == 5.0
    np.testing.assert_allclose(c, [1.0, -2.0, 3.0])
    np.testing.assert_allclose(I, I1, atol=1e-14)


def test_composite_accepts_an_iterator():
    parts = ((1.0, (float(k), 0.0, 0.0), np.eye(3)) for k in range(2))
    m, c, I = kd.composite_mass_properties(parts)
    # m = 2, c = (0.5, 0, 0); each unit mass at 0.5 m on x adds 0.25 to Iyy and Izz
    assert m == 2.0
    np.testing.assert_allclose(c, [0.5, 0.0, 0.0])
    np.testing.assert_allclose(I, np.diag([2.0, 2.5, 2.5]), atol=1e-15)


@given(clouds(min_size=2, max_size=10), st.data())
@FAST
def test_composite_of_split_cloud_equals_whole(cloud, data):
    m, r = cloud
    n = m.size
    in_first = data.draw(arrays(np.bool_, n).filter(lambda mask: 0 < mask.sum() < n), label="split")
    parts = [
        cloud_mass_properties(m[in_first], r[in_first]),
        cloud_mass_properties(m[~in_first], r[~in_first]),
    ]
    mass, c, I = kd.composite_mass_properties(parts)
    mass_all, c_all, I_all = cloud_mass_properties(m, r)
    assert mass == pytest.approx(mass_all, rel=1e-14)
    close(c, c_all)
    close(I, I_all, scale=np.abs(I_all).max())


def test_composite_seed_002_worked_example():
    # sumofJ1 (refs/seeds/002): positions in mm, inertias in kg m^2 about each part's centre
    m1 = 231.1
    x1 = np.array([-367.127909, 12.326682, 105.797098]) / 1000.0
    J1c = np.array(
        [
            [17.70964250037791, 18.48821290734195, 18.11118260182349],
            [18.48821290734195, 16.41579683606009, 6.83322956132983],
            [18.11118260182349, 6.83322956132983, 15.55719337462858],
        ]
    )
    m2 = 91.2
    x2 = np.array([562.339965, -23.307787, -18.991260]) / 1000.0
    J2c = np.array(
        [
            [1.008047, 0.759788, -0.643099],
            [0.759788, 6.641947, -0.059607],
            [-0.643099, -0.059607, 7.016648],
        ]
    )
    m, xc, J = kd.composite_mass_properties([(m1, x1, J1c), (m2, x2, J2c)])

    # m = 231.1 + 91.2 = 322.3
    assert m == pytest.approx(322.3, rel=1e-15)
    # xc = (m1 x1 + m2 x2) / m; in mm:
    #   m1 x1 = (-84843.2598, 2848.6962, 24449.7093), m2 x2 = (51285.4048, -2125.6702, -1732.0029)
    #   sum   = (-33557.8550, 723.0260, 22717.7064) / 322.3 = (-104.11993, 2.24333, 70.48621)
    np.testing.assert_allclose(xc * 1000.0, [-104.11993, 2.24333, 70.48621], atol=5e-5)

    # expected J by a different route: everything about the origin O, then back to xc.
    def shift(mass, d):
        return mass * (np.dot(d, d) * np.eye(3) - np.outer(d, d))

    J_O = J1c + shift(m1, x1) + J2c + shift(m2, x2)
    xc_def = (m1 * x1 + m2 * x2) / (m1 + m2)
    expected = J_O - shift(m1 + m2, xc_def)
    np.testing.assert_allclose(J, expected, rtol=1e-12, atol=1e-12)
    # and by the two-body reduced-mass form: J = J1c + J2c + mu (|D|^2 U - D D^T)
    mu = m1 * m2 / (m1 + m2)  # = 21076.32 / 322.3 = 65.39348 kg
    assert mu == pytest.approx(65.39348, abs=1e-5)
    np.testing.assert_allclose(J, J1c + J2c + shift(mu, x2 - x1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("parts", "match"),
    [
        ([], "no parts"),
        ([(0.0, (0, 0, 0), np.eye(3))], "masses must be positive"),
        ([(1.0, (0, 0, 0), np.eye(3)), (-2.0, (1, 0, 0), np.eye(3))], "masses must be positive"),
        ([(np.nan, (0, 0, 0), np.eye(3))], "masses must be positive"),
        ([(np.inf, (0, 0, 0), np.eye(3))], "masses must be positive"),
    ],
)
def test_composite_rejects_bad_input(parts, match):
    with pytest.raises(ModelError, match=match):
        kd.composite_mass_properties(parts)


def test_zero_inertia_is_a_particle():
    assert not np.any(kd.validate_inertia(np.zeros((3, 3))))
