"""The time series of a deployment under the plan's own traffic: the question's rate or
concurrency (or the recommendation's operating rate), or the uploaded trace, with as many
requests as the planner's verification simulates (`planner.search.verify`: about three rounds of the
requests in flight), so the batch and KV use reach the planned operating point.
This module simulates and bins; it draws nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation
from planner.search.verify import MAX_REQUESTS, MIN_REQUESTS, ROUNDS
from simulator import SimConfig

BINS = 120


def sim_config(scn: dict[str, Any], simulation: dict[str, Any] | None) -> SimConfig:
    """The question's simulation section (a trace) where given, else the verification's size."""
    if simulation:
        return SimConfig.model_validate(simulation)
    res = resolve(parse_scenario(scn))
    conc = res.concurrency or (res.request_rate or 1.0) * estimate(res).e2e_s  # Little's law
    n = int(min(max(ROUNDS * conc, MIN_REQUESTS), MAX_REQUESTS))
    return SimConfig(requests=n, seed=0, warmup_fraction=0.3)


def timeseries(scn: dict[str, Any], simulation: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-interval queue length, decode batch, KV use and latencies; `source` says what drove
    the arrivals."""
    res = resolve(parse_scenario(scn))
    cfg = sim_config(scn, simulation)
    result, summary = run_simulation(res, cfg, extend=False)
    steps, t = result.steps, result.table
    source = (
        f"trace {cfg.trace.path.rsplit('/', 1)[-1]}"
        if cfg.trace
        else f"{res.concurrency:,.0f} requests in flight"
        if res.concurrency
        else f"Poisson arrivals at {res.request_rate:,.1f} requests/s"
    )
    out: dict[str, Any] = {"time_s": [], "requests": cfg.requests, "source": source}
    if not len(steps):
        return out
    end = float(np.nanmax(t.finish))
    bins = np.linspace(0.0, end, BINS + 1)
    idx = np.digitize(steps[:, 0], bins)

    width = float(bins[1] - bins[0]) or 1.0

    def per_bin(col: int, agg: str) -> list[float]:
        vals = []
        for k in range(1, len(bins)):
            v = steps[idx == k, col]
            vals.append(float({"max": v.max, "sum": v.sum}[agg]()) if len(v) else 0.0)
        return vals

    fin = np.digitize(t.finish, bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        ttft_all = (t.first_token - t.arrival) * 1e3
        tpot_all = (t.finish - t.first_token) / np.maximum(t.osl - 1, 1) * 1e3

    def mean_by_finish(v: np.ndarray) -> list[float | None]:
        ok = np.isfinite(v)
        return [float(v[(fin == k) & ok].mean()) if ((fin == k) & ok).any() else None for k in range(1, len(bins))]

    out.update(
        time_s=bins[1:].tolist(),
        queue=per_bin(6, "max"),
        batch=per_bin(2, "max"),
        kv_fraction=per_bin(5, "max"),
        output_tok_s=[v / width for v in per_bin(3, "sum")],
        ttft_ms=mean_by_finish(ttft_all),
        tpot_ms=mean_by_finish(tpot_all),
        converged=summary.get("converged"),
    )
    return out
