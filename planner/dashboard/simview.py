"""The time series of a deployment under the plan's own traffic: the question's rate or
concurrency (or the recommendation's operating rate), or the uploaded trace, simulated with the
one configuration of a deployment and its traffic (`planner.model.simulate.standard_config`, as the
planner's verification runs it: about three rounds of the requests in flight, extended until the
window converges), so the batch and KV use reach the planned operating point.
This module simulates and bins; it draws nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from simulator import SimConfig

BINS = 120


def timeseries(scn: dict[str, Any], simulation: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-interval queue length, decode batch, KV use and latencies; `source` says what drove
    the arrivals."""
    res = resolve(parse_scenario(scn))
    cfg = SimConfig.model_validate(simulation) if simulation else None
    result, summary = run_simulation(res, cfg)
    steps, t = result.steps, result.table
    source = (
        f"trace {cfg.trace.path.rsplit('/', 1)[-1]}"
        if cfg and cfg.trace
        else f"{res.concurrency:,.0f} requests in flight"
        if res.concurrency
        else f"Poisson arrivals at {res.request_rate:,.1f} requests/s"
        if res.request_rate
        else "saturated: a closed loop holding the decode pool full"
    )
    out: dict[str, Any] = {"time_s": [], "requests": summary["requests"], "source": source}
    if summary.get("slice"):
        out["source"] = f"{source}; {summary['slice']}"
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
    warm = result.extra.get("warm_start", 0)  # a warm start's requests were in flight before 0 s: not shown
    ttft_all[:warm] = tpot_all[:warm] = np.nan
    whole = summary.get("slice_divisor", 1)  # a slice's steps: the deployment's output is d times theirs

    def mean_by_finish(v: np.ndarray) -> list[float | None]:
        ok = np.isfinite(v)
        return [float(v[(fin == k) & ok].mean()) if ((fin == k) & ok).any() else None for k in range(1, len(bins))]

    out.update(
        time_s=bins[1:].tolist(),
        queue=per_bin(6, "max"),
        batch=per_bin(2, "max"),
        kv_fraction=per_bin(5, "max"),
        output_tok_s=[whole * v / width for v in per_bin(3, "sum")],
        ttft_ms=mean_by_finish(ttft_all),
        tpot_ms=mean_by_finish(tpot_all),
        converged=summary.get("converged"),
    )
    return out
