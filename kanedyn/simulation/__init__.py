"""The simulation layer: integrating the equations of motion.

* :mod:`kanedyn.simulation.options`: the formulation, engine and method as objects.
* :mod:`kanedyn.simulation.trajectory`: ``Trajectory``, the result of a run.
* :mod:`kanedyn.simulation.integrate`: ``simulate``, events and locks.
* :mod:`kanedyn.simulation.ensemble`: ``simulate_ensemble``.
* :mod:`kanedyn.simulation.control`: controllers and reaction wheels.
"""


def __getattr__(name: str) -> object:
    """A submodule (``kd.simulation.<module>``), imported on first access (PEP 562)."""
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
