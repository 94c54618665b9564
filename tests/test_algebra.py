"""Tables of terms read off a definition (kanedyn.spatial.algebra): ``Bilinear.of_function``
and ``Trilinear.of_quadratic`` against polynomials written out by hand, and the dense
engine's bias-force table against :func:`kanedyn.spatial.plucker.bias_force` itself."""

from __future__ import annotations

import numpy as np
import pytest

from kanedyn.dynamics.kane import BIAS_TABLE_BODIES, bias_forms, kane_terms
from kanedyn.dynamics.kinematics import kinematics_at
from kanedyn.errors import ModelError
from kanedyn.spatial import plucker as sp
from kanedyn.spatial.algebra import FORCE_CROSS, Bilinear, Trilinear, bilinear, trilinear
from tests.strategies import random_state, tree


def test_of_function_reads_the_cross_product():
    """The table of ``plucker.cross`` gives NumPy's cross product, with its six terms."""
    form = Bilinear.of_function(sp.cross, 3, 3, 3)
    a, b = np.random.default_rng(0).normal(size=(2, 4, 3))
    assert len(form.I) == 6
    np.testing.assert_allclose(bilinear(a, b, form), np.cross(a, b), rtol=1e-15, atol=1e-15)


def test_of_quadratic_reads_a_polynomial_term_by_term():
    """``z = (x0 y0 y1 - 3 x1 y2², 2 x0 y1² + x1 y0 y2)``: four terms, each found with its
    coefficient, and the table's value is the polynomial's at random points."""

    def fn(x, y):
        return [
            x[0] * y[0] * y[1] - 3 * x[1] * y[2] * y[2],
            2 * x[0] * y[1] * y[1] + x[1] * y[0] * y[2],
        ]

    form = Trilinear.of_quadratic(fn, 2, 3, 2)
    terms = {(int(i), int(j), int(k), int(o), float(form.K[r, o]))
             for r, (i, j, k) in enumerate(zip(form.I, form.J, form.L, strict=True))
             for o in range(2) if form.K[r, o]}  # fmt: skip
    assert terms == {(0, 0, 1, 0, 1.0), (1, 2, 2, 0, -3.0), (0, 1, 1, 1, 2.0), (1, 0, 2, 1, 1.0)}
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(5, 3))
    want = np.array([fn(xi, yi) for xi, yi in zip(x, y, strict=True)])
    np.testing.assert_allclose(trilinear(x, y, y, form), want, rtol=1e-14, atol=1e-14)


def test_a_table_refuses_a_coefficient_that_is_not_an_integer():
    with pytest.raises(ModelError, match="integers"):
        Trilinear.of_quadratic(lambda x, y: [0.5 * x[0] * y[0] * y[0]], 1, 1, 1)


@pytest.mark.parametrize("states", [1, 3, 60])
def test_the_bias_forces_are_plucker_bias_force(states):
    """The dense engine's bias forces (``KaneTerms.bias``) equal ``plucker.bias_force``
    run body by body on floats, embedded momentum included: for one state and a batch of
    3 (the table of terms), and for 60 states of 4 bodies (above
    ``kane.BIAS_TABLE_BODIES``: the definition with arrays as its scalars)."""
    model = tree([0, 1, 0], ["free", "gimbal3", "spherical", "gimbal_slider"],
                 ["123", "321", "123", "212"], seed=0, embedded=True)  # fmt: skip
    rng = np.random.default_rng(2)
    batch = [random_state(model, rng) for _ in range(states)]
    q = np.array([s.q for s in batch]) if states > 1 else batch[0].q
    u = np.array([s.u for s in batch]) if states > 1 else batch[0].u
    assert (states * model.nb > BIAS_TABLE_BODIES) == (states == 60)
    kin = kinematics_at(model, q, u)
    tm = kane_terms(model, kin)
    pa = kin.params
    assert pa.has_h
    h = (kin.R_N_B @ pa.h_embedded[..., None])[..., 0]
    I_O, V = tm.I_O.reshape(-1, 6, 6), kin.V.reshape(-1, 6)
    hs = np.broadcast_to(h, kin.V.shape[:-1] + (3,)).reshape(-1, 3)
    want = np.array([sp.bias_force(I.tolist(), v.tolist(), hh.tolist())
                     for I, v, hh in zip(I_O, V, hs, strict=True)])  # fmt: skip
    got = tm.bias.reshape(-1, 6)
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * scale)


def test_the_bias_table_has_no_v_cross_m_v():
    """A body at its own mass centre moving at orbital speed with no rotation has zero bias
    force, exactly: the table holds the definition's monomials, and ``v × m v`` (zero, with
    a round-off of ``m |v|² ε``) is not one of them."""
    in_v, _ = bias_forms()
    I = np.zeros((6, 6))
    I[:3, :3] = np.diag([2.0, 3.0, 4.0])
    I[3:, 3:] = 500.0 / 3.0 * np.eye(3)
    v = np.array([0.0, 0.0, 0.0, 7.5e3 + 0.1, -1.3e3 / 3.0, 2.1e2 / 7.0])
    assert np.all(trilinear(I.reshape(36), v, v, in_v) == 0.0)
    assert np.any(bilinear(v, I @ v, FORCE_CROSS) != 0.0)  # with v × m v: its round-off
    lower_right = {21, 28, 35}  # the m entries of the flattened spatial inertia
    assert not any(i in lower_right and j >= 3 and k >= 3
                   for i, j, k in zip(in_v.I, in_v.J, in_v.L, strict=True))  # fmt: skip
