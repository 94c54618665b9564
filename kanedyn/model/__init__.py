"""The model layer: what a multibody system is, independent of any engine.

* :mod:`kanedyn.model.records`: the frozen ``Body``, ``Joint`` and ``State`` records and
  ``Model``, with its topology (parents, index arrays, the path matrix) built once.
* :mod:`kanedyn.model.plan`: the evaluation plan of a model (pointer-jumping schedule,
  masks) and ``Params``, the one store of the numbers a batch may vary.
* :mod:`kanedyn.model.gravity`: ``CentralGravity`` (a central field as a model's gravity)
  and the Earth's constants.
* :mod:`kanedyn.model.batch`: ``ModelBatch`` (a model with stacked parameters) and
  ``States``.
* :mod:`kanedyn.model.orbit`: ``Orbit`` (a Keplerian reference orbit: a free root's
  initial state, the LVLH frame) and ``LvlhAttitude``.
"""

from kanedyn.model.gravity import EARTH_J2, EARTH_MU, EARTH_RADIUS, CentralGravity
from kanedyn.model.modes import Modes
from kanedyn.model.records import Body, Frame, Joint, JointLimits, Loop, Model, Rotor, State

__all__ = [
    "EARTH_J2",
    "EARTH_MU",
    "EARTH_RADIUS",
    "Body",
    "CentralGravity",
    "Frame",
    "Joint",
    "JointLimits",
    "Loop",
    "Model",
    "Modes",
    "Rotor",
    "State",
]
