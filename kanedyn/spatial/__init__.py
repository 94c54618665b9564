"""The bottom layer: the arithmetic every equation is written over, vector algebra and
rotation charts.

* :mod:`kanedyn.spatial.arithmetic`: the arithmetic protocol (``+ - * /``, ``@``,
  ``sin``, ``cos``, ``sqrt``) and its three implementations: NumPy floats, the code
  tracer, sympy expressions.
* :mod:`kanedyn.spatial.algebra`: cross products and other constant bilinear maps.
* :mod:`kanedyn.spatial.charts`: Euler sequences and quaternions: ``R``, ``Γ``, ``Γ̇``,
  ``q̇``, normalization.

Everything here is written once, on arrays with leading batch axes, and runs unchanged
on every arithmetic; the joint model (:mod:`kanedyn.joints`) and every engine call it.
"""
