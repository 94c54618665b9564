"""kanedyn: Kane's method and momentum-state dynamics for multibody trees."""

from kanedyn.errors import FileFormatError, KanedynError, ModelError, SimulationError

__version__ = "0.1.0"

__all__ = ["FileFormatError", "KanedynError", "ModelError", "SimulationError", "__version__"]
