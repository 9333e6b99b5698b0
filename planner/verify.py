"""Stage 2 of the search: simulate a recommended deployment under the question's traffic and
check the SLO's p90s. Traffic: the question's concurrency (closed loop) or rate (Poisson); with
neither, Poisson arrivals at the operating point's request rate, i.e. independent users, as in
production (a closed loop of identical requests synchronises into cohorts and overstates
prefill queueing). The question's `simulation:` section (a trace, bursty arrivals) replaces
the arrival process when given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.defaults import resolve
from planner.question import Question
from planner.scenario import parse_scenario
from planner.score import Point
from planner.simulate import run_simulation
from planner.space import Candidate, Layout
from simulator import SimConfig


@dataclass(slots=True)
class Verified:
    """A recommendation's p90s as the simulator measured them."""

    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    e2e_p90_ms: float | None
    out_tok_s_per_gpu: float
    meets: bool
    requests: int


MIN_REQUESTS, MAX_REQUESTS = 600, 30_000
ROUNDS = 3  # each client (or each request slot) completes about this many requests


def _pool(lay: Layout, n: int) -> dict[str, int]:
    return {
        "instances": n,
        "gpus_per_instance": lay.gpus,
        "tp": lay.tp,
        "dp_attention": lay.dp,
        "ep": lay.ep,
        "pp": lay.pp,
    }


def scenario_dict(q: Question, c: Candidate, p: Point) -> dict[str, Any]:
    """The recommendation as a scenario file (what `planner simulate` and the launch commands use)."""
    if c.prefill is None:
        deployment = {"aggregated": _pool(c.decode, p.decode_instances)}
    else:
        deployment = {"prefill": _pool(c.prefill, p.prefill_instances), "decode": _pool(c.decode, p.decode_instances)}
    workload: dict[str, Any] = {"isl": q.isl, "osl": q.osl}
    if q.concurrency is not None:
        workload["concurrency"] = q.concurrency
    else:
        workload["request_rate"] = q.rate if q.rate is not None else p.out_tok_s / q.osl
    slo = {"ttft_ms": q.slo.ttft_p90_ms, "tpot_ms": q.slo.tpot_p90_ms, "e2e_ms": q.slo.e2e_p90_ms}
    return {
        "name": f"{q.model} on {p.gpus}x {q.hardware}",
        "model": q.model,
        "hardware": q.hardware,
        "engine": q.engine,
        "deployment": deployment,
        "precision": c.precision.model_dump(exclude={"lm_head"}),
        "mtp": {"draft_tokens": 3} if c.mtp else None,
        "workload": workload,
        "slo": {k: v for k, v in slo.items() if v is not None} or None,
        "runtime": {"mem_fraction": c.mem_fraction},
    }


def verify(q: Question, c: Candidate, p: Point) -> Verified:
    res = resolve(parse_scenario(scenario_dict(q, c, p)))
    conc = res.concurrency or (res.request_rate or 1.0) * p.e2e_s  # requests in flight, by Little's law
    n = int(min(max(ROUNDS * conc, MIN_REQUESTS), MAX_REQUESTS))
    cfg = q.simulation or SimConfig(requests=n, seed=0, warmup_fraction=0.3)
    _, m = run_simulation(res, cfg)
    got = {"ttft_p90_ms": m["ttft_ms"]["p90"], "tpot_p90_ms": m["tpot_ms"]["p90"], "e2e_p90_ms": m["e2e_ms"]["p90"]}
    meets = all(got[k] is not None and got[k] <= v for k, v in q.slo.targets().items())
    return Verified(
        got["ttft_p90_ms"],
        got["tpot_p90_ms"],
        got["e2e_p90_ms"],
        m["output_tok_s_per_gpu"],
        meets,
        m["requests_completed"],
    )
