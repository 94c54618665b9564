"""The simulation layer: integrating the equations of motion.

* :mod:`kanedyn.simulation.options`: the formulation, engine and method as objects.
* :mod:`kanedyn.simulation.steppers`: the one classic RK4 step and its schedule.
* :mod:`kanedyn.simulation.integrate`: ``simulate``, events, ``Trajectory``.
* :mod:`kanedyn.simulation.ensemble`: ``simulate_ensemble``.
* :mod:`kanedyn.simulation.control`: controllers and reaction wheels.
"""
