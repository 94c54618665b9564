"""The simulation layer: integrating the equations of motion.

* :mod:`kanedyn.simulation.options`: the formulation, engine and method as objects.
* :mod:`kanedyn.simulation.trajectory`: ``Trajectory``, the result of a run.
* :mod:`kanedyn.simulation.integrate`: ``simulate``, a run stage by stage:
  :mod:`~kanedyn.simulation.run_options` (options checked once) →
  :mod:`~kanedyn.simulation.run_plan` (the plan) → :mod:`~kanedyn.simulation.run_state`
  (the workspace, on the right-hand side of :mod:`~kanedyn.simulation.system`) →
  :mod:`~kanedyn.simulation.run_loops` (one loop per engine kind) →
  :mod:`~kanedyn.simulation.run_result` (the Trajectory).
* :mod:`kanedyn.simulation.events`: ``Lock`` and ``Unlock``;
  :mod:`kanedyn.simulation.stops`: joint limits as stops.
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
