"""The ``Model`` record's two calls into the dynamics layer, wired by the package root.

The model layer sits below the dynamics (docs/architecture.md, "Layers"), yet two things
the :class:`~kanedyn.Model` record does need them:

- ``Model(...)`` refuses a model whose mass matrix is singular in every configuration
  (particles with nothing to move, e.g. a hinge whose axis passes through every particle
  it carries). That depends on the geometry, not on the topology alone, so it needs
  ``M``: :func:`kanedyn.dynamics.particles.check_mass_matrix`.
- ``model.assemble(state, fix=...)`` closes the loops by Newton on the loop kinematics:
  :func:`kanedyn.dynamics.loops.assemble`.

The model layer calls them through the two names below and imports nothing above itself.
The package root (``kanedyn/__init__.py``) sets them. Python runs a package's
``__init__`` before any of its submodules, so they are set before any ``Model`` can be
built, however it is imported (``kd.Model`` or ``from kanedyn.model import Model``): the
lower layer names what it needs, the top layer, which may import every layer, provides
it. Each imports its dynamics module on its first call, so ``import kanedyn`` loads no
layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["assemble", "check_mass_matrix"]

#: ``check_mass_matrix(model)``: raise :class:`~kanedyn.ModelError` when the mass matrix of
#: ``model`` is singular in every configuration (set by ``kanedyn/__init__.py`` to
#: :func:`kanedyn.dynamics.particles.check_mass_matrix`).
check_mass_matrix: Callable[[Any], None]

#: ``assemble(model, state, fix, **kw)``: ``state`` with every loop closed (set by
#: ``kanedyn/__init__.py`` to :func:`kanedyn.dynamics.loops.assemble`).
assemble: Callable[..., Any]
