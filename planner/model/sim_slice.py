"""A simulation of many identical instances as a slice of them, and the step budget of a standard run.

Identical instances behind a least-loaded router each see the same load, so a deployment whose pools'
instance counts (and a closed loop's clients) share a divisor d runs as 1/d of itself: its instance counts
and traffic divided by d, each pool keeping at least `SLICE_MIN_INSTANCES` (the router's choice among them),
its per-GPU figures and latencies read as they are and its totals (tok/s, GPUs) scaled back by d. 72
Llama-3.1-8B instances on GB300 at 600 req/s against 8 of them at 66.7: p90 TTFT 94.0 vs 95.6 ms, TPOT 4.61
vs 4.57 ms, 8,429 vs 8,387 tok/s/GPU, in 10.2 vs 1.0 s. A trace, a stated arrival process or request count,
or a closed loop whose concurrency the divisor does not divide runs whole. It does not run anything.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil, gcd
from typing import Any

from planner.model.defaults import Resolved
from planner.model.steps import prefill_budget
from simulator import SimConfig
from simulator.config import MAX_STEPS

SLICE_MIN_INSTANCES = 8  # instances each pool keeps in a simulated slice (the router's choice among them)
STEP_CEILING = 100_000_000  # SimConfig.max_steps' own limit


def slice_divisor(res: Resolved, cfg: SimConfig, fixed: bool) -> int:
    """The largest common divisor of the pools' instance counts (and of a closed loop's concurrency)
    that leaves each pool at least `SLICE_MIN_INSTANCES` instances; 1 (the whole deployment) for a
    trace, a stated arrival process or a fixed request count."""
    if fixed or cfg.trace is not None or cfg.arrival is not None:
        return 1
    counts = [p.instances for p in res.deployment.pools]
    common = gcd(*counts)
    if res.request_rate is None:
        held = res.concurrency or 0.0
        if held != int(held):
            return 1
        common = gcd(common, int(held))
    most = min(counts) // SLICE_MIN_INSTANCES
    return max((d for d in range(1, min(common, most) + 1) if common % d == 0), default=1)


def sliced(res: Resolved, d: int) -> Resolved:
    """The deployment's 1/d: every pool's instances and the traffic divided by d."""
    if d == 1:
        return res
    dep = res.deployment
    pools = tuple(replace(p, instances=p.instances // d) for p in dep.pools)
    return replace(
        res,
        deployment=type(dep)(dep.engine, pools),
        concurrency=None if res.concurrency is None else res.concurrency / d,
        request_rate=None if res.request_rate is None else res.request_rate / d,
    )


def slice_text(res: Resolved, d: int) -> str:
    run = sliced(res, d)
    whole = res.deployment.pools
    pools = " + ".join(
        f"{p.instances} of {q.instances} {p.role}" for p, q in zip(run.deployment.pools, whole, strict=True)
    )
    rate, held = run.request_rate, run.concurrency
    load = f"{rate:,.4g} req/s" if rate is not None else f"{held:,.0f} requests in flight"
    return (
        f"simulated as 1/{d} of the deployment ({pools} instances at {load}): identical instances behind a "
        "least-loaded router each see the same load; totals scaled back"
    )


def whole(stats: dict[str, Any], d: int) -> dict[str, Any]:
    """A slice's summary as the whole deployment's: totals x d (per-GPU figures and latencies hold)."""
    if d > 1:
        for key in ("input_tok_s", "output_tok_s", "offered_output_tok_s"):
            stats[key] = round(stats[key] * d, 3)
        stats["gpus"] *= d
    return stats


def step_budget(run: Resolved, n: int, held: float) -> int:
    """Twice the forward steps `n` requests take when each decode instance runs its share of the `held`
    in flight (at least one) and each prompt fills its own chunks: one user's 8,000-token answers, 600 of
    them, take 4.8 million steps (3.7 s in decode runs), past the simulator's default `max_steps`."""
    decoding = sum(p.instances for p in run.deployment.pools if p.role != "prefill")
    chunk = min(prefill_budget(p) * p.parallel.dp_attention for p in run.deployment.pools)
    per_request = run.osl / max(1.0, held / max(decoding, 1)) + ceil(run.isl / max(chunk, 1))
    return int(min(max(MAX_STEPS, 2 * n * per_request), STEP_CEILING))
