"""Central gravity: a point-mass field (with the optional J2 zonal term) as a model's gravity.

``kd.Model(bodies, joints, gravity=kd.CentralGravity(mu=kd.EARTH_MU))`` puts the model
in the field of a central body at ``center`` (N components; N is inertial). Every body
feels the field through one potential (:func:`kanedyn.spatial.plucker.central_gravity`):
the point mass, MacCullagh's second-order term (the gravity-gradient torque) and, with
``J2``, the Earth's oblateness on the mass centre, its pole along N's z axis. A flexible
body's displaced mass feels it to the same (second) order in the body's size
(:func:`kanedyn.spatial.modal.modal_central_forces`).

The Earth's constants are those of WGS-84 (NIMA TR8350.2, 3rd ed., 2000, Table 3.1 and
§3.2.2; the same GM as EGM2008): ``GM = 3.986004418e14 m³/s²`` (the value with the
atmosphere included), equatorial radius ``a = 6378137.0 m``. ``EARTH_J2`` is EGM2008's
``J2 = -√5 C̄₂₀ = 1.08262668e-3`` (Pavlis et al. 2012; ``C̄₂₀ = -4.84165143790815e-4``),
for users who want it; ``CentralGravity`` defaults to ``J2 = 0``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from kanedyn.errors import ModelError

__all__ = ["EARTH_J2", "EARTH_MU", "EARTH_RADIUS", "CentralGravity"]

#: the Earth's gravitational parameter GM (m³/s²), WGS-84 (NIMA TR8350.2, Table 3.1)
EARTH_MU = 3.986004418e14
#: the Earth's equatorial radius (m), WGS-84 semi-major axis (NIMA TR8350.2, Table 3.1)
EARTH_RADIUS = 6378137.0
#: the Earth's J2 (dimensionless), EGM2008: -√5 C̄₂₀ with C̄₂₀ = -4.84165143790815e-4
EARTH_J2 = 1.08262668e-3


def _is_sympy(value: Any) -> bool:
    return "sympy" in sys.modules and isinstance(value, sys.modules["sympy"].Basic)


def _number(value: Any, what: str, positive: bool) -> Any:
    """A finite float (positive when asked), or a sympy expression kept as it is."""
    if _is_sympy(value) and value.free_symbols:
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelError(f"CentralGravity {what}: expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ModelError(f"CentralGravity {what}: must be finite, got {x}")
    if positive and x <= 0.0:
        raise ModelError(f"CentralGravity {what}: must be positive, got {x}")
    return x


def _mu(value: Any) -> Any:
    return _number(value, "mu (gravitational parameter, m^3/s^2)", True)


def _J2(value: Any) -> Any:
    return _number(value, "J2", False)


def _radius(value: Any) -> Any:
    return _number(value, "radius (reference radius of J2, m)", True)


def _center(value: Any) -> NDArray[np.float64]:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"CentralGravity center: expected 3 numbers, got {value!r}") from None
    if arr.shape != (3,):
        raise ModelError(f"CentralGravity center: expected 3 numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ModelError("CentralGravity center: has non-finite entries")
    arr.setflags(write=False)
    return arr


@attrs.frozen(eq=False)
class CentralGravity:
    """The field of a central body of gravitational parameter ``mu`` at ``center``.

    Each body of mass ``m`` and inertia ``I`` (about its mass centre), its mass centre at
    ``r`` from ``center``, has the potential (MacCullagh's formula; Hughes, *Spacecraft
    Attitude Dynamics*, 1986, ch. 8; :func:`kanedyn.spatial.plucker.central_gravity`):

    .. math:: V = -\\frac{\\mu m}{|r|} - \\frac{\\mu}{2|r|^3}\\left(\\operatorname{tr} I
        - 3 \\hat r^\\top I \\hat r\\right)
        + \\frac{\\mu m J_2 R^2}{2 |r|^3}\\left(3 \\frac{z^2}{|r|^2} - 1\\right)

    Parameters
    ----------
    mu : float
        ``GM`` of the central body (m³/s², positive; default the Earth's, WGS-84). A
        sympy expression is accepted for a symbolic model.
    J2 : float
        The second zonal harmonic (default 0: a point mass), about N's z axis.
    radius : float
        The reference (equatorial) radius of ``J2`` (m, positive; default the Earth's).
    center : 3 floats
        The central body's centre in N (m).

    Examples
    --------
    >>> import kanedyn as kd
    >>> kd.CentralGravity().mu == kd.EARTH_MU
    True
    """

    mu: Any = attrs.field(default=EARTH_MU, converter=_mu)
    J2: Any = attrs.field(default=0.0, converter=_J2)
    radius: Any = attrs.field(default=EARTH_RADIUS, converter=_radius)
    center: NDArray[np.float64] = attrs.field(default=(0.0, 0.0, 0.0), converter=_center)

    @property
    def is_symbolic(self) -> bool:
        """True when a parameter is a sympy expression."""
        return any(_is_sympy(x) for x in (self.mu, self.J2, self.radius))

    def __repr__(self) -> str:
        c = ", ".join(f"{x:g}" for x in self.center)
        return (
            f"CentralGravity(mu={self.mu!r}, J2={self.J2!r}, radius={self.radius!r}, center=({c}))"
        )
