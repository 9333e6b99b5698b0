"""Step-cost model: per-op FLOPs and bytes of one forward step, turned into time on a GPU.

`roofline.step.step_cost` is the single place where the time of a step is computed; the
steady-state estimator and the simulator both call it. `roofline.memory` sizes weights and the
KV pool per rank. `roofline.catalog` holds the model and hardware data. Nothing here queues,
schedules or simulates: that is `simulator/` and `planner/`.
"""
