"""Discrete-event simulator of a serving deployment (SimPy).

`simulate(pools, workload, cfg)` runs requests through prefill, decode or aggregated instances,
one event per forward step per instance (or per run of quiet decode steps, with the same figures),
with step times from `roofline.step.step_cost`
(memoized, never re-implemented). It models continuous batching, KV-pool admission, preemption
by recompute, chunked prefill, KV transfer, routing, MTP acceptance and per-step EP imbalance.
It does not model network contention between requests' KV transfers or multi-node failures.
"""

from simulator.config import ArrivalSpec, LengthDist, SimConfig, TraceSpec
from simulator.engine import PoolDef, SimResult, simulate
from simulator.metrics import summarize
from simulator.workload import Workload, build_workload

__all__ = [
    "ArrivalSpec",
    "LengthDist",
    "PoolDef",
    "SimConfig",
    "SimResult",
    "TraceSpec",
    "Workload",
    "build_workload",
    "simulate",
    "summarize",
]
