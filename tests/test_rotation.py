"""Tests of kanedyn.spatial.rotation against independent oracles (scipy, finite differences, 42)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.transform import Rotation

from kanedyn.errors import ModelError
from kanedyn.spatial import rotation as kr

SEQS = kr.EULER_SEQUENCES
ASYMMETRIC = [s for s in SEQS if s[0] != s[2]]
SYMMETRIC = [s for s in SEQS if s[0] == s[2]]
CYCLIC = ("123", "231", "312")

finite = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)
vec3 = arrays(np.float64, 3, elements=finite)
quat = arrays(np.float64, 4, elements=st.floats(-1.0, 1.0)).filter(
    lambda q: np.linalg.norm(q) > 1e-3
)
FAST = settings(max_examples=40, deadline=None, database=None)


def scipy_letters(seq: str) -> str:
    return "".join("XYZ"[int(ch) - 1] for ch in seq)


def random_angles(rng, seq: str, n: int, margin: float = 0.2) -> np.ndarray:
    """Angles away from gimbal lock, with the middle angle in the principal range."""
    theta = rng.uniform(-np.pi, np.pi, (n, 3))
    if seq[0] == seq[2]:
        theta[:, 1] = rng.uniform(margin, np.pi - margin, n)
    else:
        theta[:, 1] = rng.uniform(-np.pi / 2 + margin, np.pi / 2 - margin, n)
    return theta


def locked_middle_angles(seq: str) -> list[float]:
    return [0.0, np.pi] if seq[0] == seq[2] else [np.pi / 2, -np.pi / 2]


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


# --------------------------------------------------------------------------- basics


@given(vec3, vec3)
@FAST
def test_skew_is_cross_product(a, b):
    np.testing.assert_allclose(kr.skew(a) @ b, np.cross(a, b), atol=1e-12)


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_elementary_rotation_matches_scipy(axis, rng):
    angle = rng.uniform(-4, 4, 7)
    unit = np.eye(3)[axis - 1]
    expected = Rotation.from_rotvec(angle[:, None] * unit).as_matrix()
    np.testing.assert_allclose(kr.elementary_rotation(axis, angle), expected, atol=1e-14)


def test_elementary_rotation_is_active():
    c, s = np.cos(0.3), np.sin(0.3)
    R1 = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    np.testing.assert_allclose(kr.elementary_rotation(1, 0.3), R1, atol=1e-15)


@pytest.mark.parametrize("axis", [0, 4, "x", True])
def test_elementary_rotation_rejects_bad_axis(axis):
    with pytest.raises(ModelError):
        kr.elementary_rotation(axis, 0.1)


# --------------------------------------------------------------------------- sequences


def test_sequence_list():
    assert len(SEQS) == 12 and len(set(SEQS)) == 12
    for seq in SEQS:
        assert kr.parse_sequence(seq) == tuple(int(ch) for ch in seq)
    assert set(SYMMETRIC) == {"121", "131", "212", "232", "313", "323"}
    assert all(kr.is_symmetric_sequence(s) for s in SYMMETRIC)
    assert not any(kr.is_symmetric_sequence(s) for s in ASYMMETRIC)


@pytest.mark.parametrize("bad", ["124", "112", "12", "abc", "1233", "122"])
def test_parse_sequence_errors_name_the_sequence(bad):
    with pytest.raises(ModelError, match=bad):
        kr.parse_sequence(bad)


# --------------------------------------------------------------------------- Euler DCM


@pytest.mark.parametrize("seq", SEQS)
def test_euler_to_dcm_matches_scipy_batch(seq, rng):
    theta = rng.uniform(-2 * np.pi, 2 * np.pi, (4, 5, 3))
    expected = Rotation.from_euler(scipy_letters(seq), theta.reshape(-1, 3)).as_matrix()
    R = kr.euler_to_dcm(seq, theta)
    assert R.shape == (4, 5, 3, 3)
    np.testing.assert_allclose(R.reshape(-1, 3, 3), expected, atol=1e-14)
    single = kr.euler_to_dcm(seq, theta[0, 0])
    np.testing.assert_allclose(single, expected[0], atol=1e-14)


@pytest.mark.parametrize("seq", SEQS)
def test_euler_to_dcm_is_product_of_elementary_rotations(seq, rng):
    t = rng.uniform(-3, 3, 3)
    i1, i2, i3 = (int(ch) for ch in seq)
    expected = (
        Rotation.from_rotvec(t[0] * np.eye(3)[i1 - 1]).as_matrix()
        @ Rotation.from_rotvec(t[1] * np.eye(3)[i2 - 1]).as_matrix()
        @ Rotation.from_rotvec(t[2] * np.eye(3)[i3 - 1]).as_matrix()
    )
    np.testing.assert_allclose(kr.euler_to_dcm(seq, t), expected, atol=1e-14)


def test_euler_to_dcm_axes_mixed_sequences(rng):
    axes = np.array([[int(ch) for ch in seq] for seq in SEQS])
    theta = rng.uniform(-3, 3, (len(SEQS), 3))
    R = kr.euler_to_dcm_axes(axes, theta)
    for k, seq in enumerate(SEQS):
        expected = Rotation.from_euler(scipy_letters(seq), theta[k]).as_matrix()
        np.testing.assert_allclose(R[k], expected, atol=1e-14)


def test_euler_axes_reject_bad_values():
    with pytest.raises(ModelError):
        kr.euler_to_dcm_axes(np.array([1, 2, 4]), np.zeros(3))


@pytest.mark.parametrize("seq", SEQS)
def test_euler_dcm_is_proper_orthonormal(seq, rng):
    R = kr.euler_to_dcm(seq, rng.uniform(-5, 5, (20, 3)))
    np.testing.assert_allclose(
        np.swapaxes(R, -1, -2) @ R, np.broadcast_to(np.eye(3), R.shape), atol=1e-14
    )
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-14)
    assert np.all(kr.is_rotation_matrix(R))


def test_is_rotation_matrix_rejects():
    assert not kr.is_rotation_matrix(np.diag([1.0, 1.0, -1.0]))
    assert not kr.is_rotation_matrix(np.diag([1.0, 1.0, 1.001]))
    assert not kr.is_rotation_matrix(np.full((3, 3), np.nan))
    assert kr.is_rotation_matrix(np.eye(3))


@pytest.mark.parametrize("seq", SEQS)
def test_dcm_to_euler_round_trip(seq, rng):
    theta = random_angles(rng, seq, 50)
    R = kr.euler_to_dcm(seq, theta)
    np.testing.assert_allclose(kr.dcm_to_euler(seq, R), theta, atol=1e-10)
    # Independent oracle: scipy's decomposition of the same matrix.
    expected = Rotation.from_matrix(R).as_euler(scipy_letters(seq))
    np.testing.assert_allclose(kr.dcm_to_euler(seq, R), expected, atol=1e-10)


@pytest.mark.parametrize("seq", SEQS)
def test_dcm_to_euler_ranges_on_random_rotations(seq):
    R = Rotation.random(200, random_state=7).as_matrix()
    theta = kr.dcm_to_euler(seq, R)
    np.testing.assert_allclose(kr.euler_to_dcm(seq, theta), R, atol=1e-12)
    lo, hi = (0.0, np.pi) if seq[0] == seq[2] else (-np.pi / 2, np.pi / 2)
    assert np.all((theta[:, 1] >= lo) & (theta[:, 1] <= hi))
    assert np.all(np.abs(theta) <= np.pi)


@pytest.mark.parametrize("seq", SEQS)
def test_dcm_to_euler_at_gimbal_lock(seq, rng):
    for t2 in locked_middle_angles(seq):
        theta = rng.uniform(-3, 3, (5, 3))
        theta[:, 1] = t2
        R = kr.euler_to_dcm(seq, theta)
        with pytest.warns(kr.GimbalLockWarning, match=seq):
            back = kr.dcm_to_euler(seq, R)
        np.testing.assert_allclose(back[:, 2], 0.0)
        np.testing.assert_allclose(kr.euler_to_dcm(seq, back), R, atol=1e-12)


# --------------------------------------------------------------------------- Gamma


def numeric_omega(seq, theta, rates, h=1e-6):
    """Go's angular velocity in Go components: [omega]x = R^T dR/dt (central differences)."""
    R = kr.euler_to_dcm(seq, theta)
    dR = (kr.euler_to_dcm(seq, theta + h * rates) - kr.euler_to_dcm(seq, theta - h * rates)) / (
        2 * h
    )
    W = R.T @ dR
    return np.array([W[2, 1], W[0, 2], W[1, 0]])


@pytest.mark.parametrize("seq", SEQS)
def test_gamma_against_dcm_finite_differences(seq, rng):
    for _ in range(5):
        theta = rng.uniform(-3, 3, 3)
        for j in range(3):
            e_j = np.eye(3)[j]
            col = numeric_omega(seq, theta, e_j)
            np.testing.assert_allclose(kr.euler_gamma(seq, theta)[:, j], col, atol=1e-8)
        rates = rng.normal(size=3)
        np.testing.assert_allclose(
            kr.omega_from_euler_rates(seq, theta, rates),
            numeric_omega(seq, theta, rates),
            atol=1e-8,
        )


def gamma_42_table(seq: str, theta) -> np.ndarray:
    """42 JointPartials table (refs/notes/42-kane-msd.md section 3.3), rows by axis digit."""
    i1, i2, i3 = (int(ch) - 1 for ch in seq)
    _, t2, t3 = theta
    s2, c2, s3, c3 = np.sin(t2), np.cos(t2), np.sin(t3), np.cos(t3)
    G = np.zeros((3, 3))
    if seq in CYCLIC:
        G[i1] = [c2 * c3, s3, 0]
        G[i2] = [-c2 * s3, c3, 0]
        G[i3] = [s2, 0, 1]
    else:
        G[i1] = [c2 * c3, -s3, 0]
        G[i2] = [c2 * s3, c3, 0]
        G[i3] = [-s2, 0, 1]
    return G


def gamma_dot_sigma_42_table(seq: str, theta, r) -> np.ndarray:
    """42's Gds = Gammadot * sigma table (section 3.3), rows by axis digit."""
    i1, i2, i3 = (int(ch) - 1 for ch in seq)
    _, t2, t3 = theta
    r1, r2, r3 = r
    s2, c2, s3, c3 = np.sin(t2), np.cos(t2), np.sin(t3), np.cos(t3)
    g = np.zeros(3)
    if seq in CYCLIC:
        g[i1] = -r1 * (r2 * s2 * c3 + r3 * c2 * s3) + r2 * r3 * c3
        g[i2] = r1 * (r2 * s2 * s3 - r3 * c2 * c3) - r2 * r3 * s3
        g[i3] = r1 * r2 * c2
    else:
        g[i1] = -r1 * (r2 * s2 * c3 + r3 * c2 * s3) - r2 * r3 * c3
        g[i2] = r1 * (-r2 * s2 * s3 + r3 * c2 * c3) - r2 * r3 * s3
        g[i3] = -r1 * r2 * c2
    return g


@pytest.mark.parametrize("seq", ASYMMETRIC)
def test_gamma_matches_42_table(seq, rng):
    for _ in range(10):
        theta = rng.uniform(-3, 3, 3)
        np.testing.assert_allclose(
            kr.euler_gamma(seq, theta), gamma_42_table(seq, theta), atol=1e-14
        )
        rates = rng.normal(size=3)
        np.testing.assert_allclose(
            kr.euler_gamma_dot(seq, theta, rates) @ rates,
            gamma_dot_sigma_42_table(seq, theta, rates),
            atol=1e-13,
        )


@pytest.mark.parametrize("seq", SEQS)
def test_gamma_dot_against_finite_differences(seq, rng):
    h = 1e-6
    for _ in range(5):
        theta0, rates = rng.uniform(-3, 3, 3), rng.normal(size=3)
        fd = (kr.euler_gamma(seq, theta0 + h * rates) - kr.euler_gamma(seq, theta0 - h * rates)) / (
            2 * h
        )
        np.testing.assert_allclose(kr.euler_gamma_dot(seq, theta0, rates), fd, atol=1e-8)


def test_gamma_axes_batch_mixed_sequences(rng):
    axes = np.array([[int(ch) for ch in seq] for seq in SEQS])
    theta = rng.uniform(-3, 3, (len(SEQS), 3))
    rates = rng.normal(size=(len(SEQS), 3))
    G = kr.euler_gamma_axes(axes, theta)
    Gd = kr.euler_gamma_dot_axes(axes, theta, rates)
    for k, seq in enumerate(SEQS):
        np.testing.assert_allclose(G[k], kr.euler_gamma(seq, theta[k]), atol=1e-15)
        np.testing.assert_allclose(Gd[k], kr.euler_gamma_dot(seq, theta[k], rates[k]), atol=1e-15)


@pytest.mark.parametrize("seq", SEQS)
def test_euler_rates_from_omega_inverts_gamma(seq, rng):
    theta = random_angles(rng, seq, 30)
    omega = rng.normal(size=(30, 3))
    rates = kr.euler_rates_from_omega(seq, theta, omega)
    np.testing.assert_allclose(
        np.linalg.solve(kr.euler_gamma(seq, theta), omega[..., None])[..., 0], rates, atol=1e-10
    )
    np.testing.assert_allclose(kr.omega_from_euler_rates(seq, theta, rates), omega, atol=1e-10)
    assert not np.any(kr.gimbal_lock(seq, theta))


@pytest.mark.parametrize("seq", SEQS)
def test_gimbal_lock_detected_and_raises(seq):
    for t2 in locked_middle_angles(seq):
        theta = np.array([0.4, t2, -0.7])
        assert kr.gimbal_lock(seq, theta)
        assert abs(np.linalg.det(kr.euler_gamma(seq, theta))) < 1e-12
        with pytest.raises(kr.GimbalLockError, match=seq) as info:
            kr.euler_rates_from_omega(seq, theta, [0.1, 0.2, 0.3])
        assert isinstance(info.value, ModelError)
        assert repr(float(t2))[:6] in str(info.value)


# --------------------------------------------------------------------------- quaternions


@given(quat)
@FAST
def test_quat_to_dcm_matches_scipy(q):
    np.testing.assert_allclose(kr.quat_to_dcm(q), Rotation.from_quat(q).as_matrix(), atol=1e-12)


def test_quat_round_trip_canonical_against_scipy():
    rot = Rotation.random(500, random_state=3)
    q = kr.dcm_to_quat(rot.as_matrix())
    np.testing.assert_allclose(q, rot.as_quat(canonical=True), atol=1e-14)
    assert np.all(q[:, 3] >= 0)


@pytest.mark.parametrize(
    "rotvec",
    [
        [np.pi, 0, 0],
        [0, np.pi, 0],
        [0, 0, np.pi],
        np.pi * np.array([1.0, 1.0, 0]) / np.sqrt(2),
        (np.pi - 1e-9) * np.array([0.2, -0.3, 0.9]) / np.linalg.norm([0.2, -0.3, 0.9]),
        [1e-12, 0, 0],
        [0, 0, 0],
    ],
)
def test_dcm_to_quat_robust_cases(rotvec):
    rot = Rotation.from_rotvec(rotvec)
    q = kr.dcm_to_quat(rot.as_matrix())
    np.testing.assert_allclose(q, rot.as_quat(canonical=True), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(q), 1.0, atol=1e-15)


@given(quat, quat)
@FAST
def test_quat_multiply_matches_scipy_composition(p, q):
    p, q = p / np.linalg.norm(p), q / np.linalg.norm(q)
    pq = kr.quat_multiply(p, q)
    expected = (Rotation.from_quat(p) * Rotation.from_quat(q)).as_quat()
    assert np.allclose(pq, expected, atol=1e-12) or np.allclose(pq, -expected, atol=1e-12)
    np.testing.assert_allclose(
        kr.quat_to_dcm(pq), kr.quat_to_dcm(p) @ kr.quat_to_dcm(q), atol=1e-12
    )


def test_quat_conjugate_and_normalize():
    rot = Rotation.random(10, random_state=5)
    q = rot.as_quat()
    np.testing.assert_allclose(
        kr.quat_to_dcm(kr.quat_conjugate(q)), rot.inv().as_matrix(), atol=1e-14
    )
    np.testing.assert_allclose(kr.quat_normalize(3.0 * q), q, atol=1e-15)
    for bad in ([0.0, 0.0, 0.0, 0.0], [np.nan, 0.0, 0.0, 1.0], [np.inf, 0.0, 0.0, 1.0]):
        with pytest.raises(ModelError):
            kr.quat_normalize(bad)


def test_quat_rate_against_finite_differences(rng):
    h = 1e-6
    for _ in range(10):
        q = Rotation.random(random_state=rng.integers(1 << 30)).as_quat()
        omega = rng.normal(size=3)
        q_dot = kr.quat_rate(q, omega)
        # R(q + h q_dot) differs from R(q) expm(h [omega]x) by O(h^2); use central differences.
        dR = (kr.quat_to_dcm(q + h * q_dot) - kr.quat_to_dcm(q - h * q_dot)) / (2 * h)
        R = Rotation.from_quat(q).as_matrix()
        np.testing.assert_allclose(dR, R @ kr.skew(omega), atol=1e-8)
        # 42 QW2QDOT (Kane 1.13), typed in.
        qv, q4 = q[:3], q[3]
        expected = np.r_[0.5 * (q4 * omega - np.cross(omega, qv)), -0.5 * omega @ qv]
        np.testing.assert_allclose(q_dot, expected, atol=1e-15)


# --------------------------------------------------------------------------- rotation vectors


def rotvec_cases(rng):
    axis = rng.normal(size=(6, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angles = np.array(
        [0.0, 1e-12, 1e-7, 1e-3, 0.1, 0.24, 0.26, 1.0, 2.5, np.pi - 1e-6, np.pi - 1e-10]
    )
    return (angles[:, None, None] * axis[None]).reshape(-1, 3)


def test_rotvec_to_dcm_and_quat_match_scipy(rng):
    phi = rotvec_cases(rng)
    rot = Rotation.from_rotvec(phi)
    np.testing.assert_allclose(kr.rotvec_to_dcm(phi), rot.as_matrix(), atol=1e-14)
    q = kr.rotvec_to_quat(phi)
    np.testing.assert_allclose(q, rot.as_quat(canonical=True), atol=1e-15)


def test_rotvec_inverse_maps_match_scipy(rng):
    phi = rotvec_cases(rng)
    expected = Rotation.from_rotvec(phi).as_rotvec()
    np.testing.assert_allclose(
        kr.dcm_to_rotvec(Rotation.from_rotvec(phi).as_matrix()), expected, atol=1e-9
    )
    np.testing.assert_allclose(
        kr.quat_to_rotvec(Rotation.from_rotvec(phi).as_quat()), expected, rtol=1e-12, atol=1e-15
    )
    # Negative scalar part and non-unit quaternions give the same [0, pi] rotation vector.
    q = -2.0 * Rotation.from_rotvec(phi).as_quat()
    np.testing.assert_allclose(kr.quat_to_rotvec(q), expected, rtol=1e-12, atol=1e-15)
    assert np.all(
        np.linalg.norm(kr.dcm_to_rotvec(Rotation.random(50, random_state=1).as_matrix()), axis=1)
        <= np.pi
    )


def test_rotvec_at_pi_axis_up_to_sign():
    phi = np.pi * np.array([0.6, 0.0, 0.8])
    back = kr.dcm_to_rotvec(Rotation.from_rotvec(phi).as_matrix())
    assert np.allclose(back, phi, atol=1e-12) or np.allclose(back, -phi, atol=1e-12)


def test_small_angles_have_no_nan():
    phi = np.array([[0.0, 0.0, 0.0], [1e-300, 0.0, 0.0], [1e-17, -1e-17, 0.0]])
    for fn in (
        kr.rotvec_to_dcm,
        kr.rotvec_to_quat,
        kr.rotvec_rate_matrix,
        kr.rotvec_rate_matrix_inv,
    ):
        assert np.all(np.isfinite(fn(phi)))
    np.testing.assert_allclose(kr.rotvec_rate_matrix(phi[0]), np.eye(3), atol=0)
    assert np.all(np.isfinite(kr.quat_to_rotvec([0.0, 0.0, 0.0, 1.0])))


def test_rotvec_rate_matrix_against_finite_differences(rng):
    h = 1e-6
    for phi in rotvec_cases(rng)[::3]:
        phi_dot = rng.normal(size=3)
        R = kr.rotvec_to_dcm(phi)
        dR = (
            Rotation.from_rotvec(phi + h * phi_dot).as_matrix()
            - Rotation.from_rotvec(phi - h * phi_dot).as_matrix()
        ) / (2 * h)
        W = R.T @ dR
        omega = np.array([W[2, 1], W[0, 2], W[1, 0]])
        np.testing.assert_allclose(kr.rotvec_rate_matrix(phi) @ phi_dot, omega, atol=1e-8)


def test_rotvec_rate_matrix_inv_against_numpy(rng):
    phi = np.concatenate([rotvec_cases(rng), rng.normal(size=(20, 3)) * 1.5])
    phi = phi[np.linalg.norm(phi, axis=1) < 1.9 * np.pi]
    np.testing.assert_allclose(
        kr.rotvec_rate_matrix_inv(phi),
        np.linalg.inv(kr.rotvec_rate_matrix(phi)),
        rtol=1e-11,
        atol=1e-12,
    )
