"""The simulation layer: integrating the equations of motion.

* :mod:`kanedyn.simulation.options`: the formulation, engine and method as objects.
* :mod:`kanedyn.simulation.trajectory`: ``Trajectory``, the result of a run.
* :mod:`kanedyn.simulation.integrate`: ``simulate``, events and locks.
* :mod:`kanedyn.simulation.ensemble`: ``simulate_ensemble``.
* :mod:`kanedyn.simulation.control`: controllers and reaction wheels.
"""
