"""The performance model of one deployment: the Deployment type, resolution of a scenario into
it, memoized step costs, the steady-state estimator, the simulation glue, one Metrics type,
explain. Imports planner.inputs and planner.engines, nothing above.
"""
