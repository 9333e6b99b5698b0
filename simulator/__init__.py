"""Discrete-event simulator of a serving deployment (SimPy).

Not built yet: it arrives with the simulator issue and will call `roofline.step.step_cost` for
every step. Nothing here today.
"""
