"""How `planner validate` simulates an anchor: the value of a metric at the anchor's traffic, and the most
users a deployment serves within an slo on the same simulation. It does not parse anchors or compare
with published values (`planner.search.validate`)."""

from __future__ import annotations

from dataclasses import replace

from planner.inputs.benchmarks import PRESETS, client_config
from planner.inputs.scenario import SLOSpec
from planner.model.defaults import Resolved
from planner.model.estimator import max_batch
from planner.model.simulate import run_simulation
from roofline.errors import PlannerError

SIMULATED = {
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "output_tok_s",
    "output_tok_s_per_gpu",
    "input_tok_s_per_gpu",
    "total_tok_s_per_gpu",
    "output_tok_s_per_user",
}


def driven_by(res: Resolved, client: str) -> Resolved:
    """The deployment as the benchmark client reaches it: an in-process harness (`serving_path`
    False, e.g. trtllm-bench) skips the engine's HTTP serving path (request_overhead_ms)."""
    return res if PRESETS[client].serving_path else res.in_process()


def simulated_value(metric: str, res: Resolved, client: str = "sglang-bench-serving", statistic: str = "mean") -> float:
    """Simulation at the anchor's traffic: at a stated concurrency, the closed loop of a benchmark
    client (`planner.inputs.benchmarks` preset `client`: a burst with every request counted, or a
    steady state after a warm-up), keeping what the anchor's own `simulation` section sets (e.g. the
    lengths its client draws; a section with its own arrival process or trace runs as it is); at a
    rate, Poisson arrivals with the one simulation configuration of a deployment and its traffic
    (`planner.model.simulate.standard_config`, as `planner plan` and `planner simulate` run it).
    Latencies are the `statistic` (mean or median) over the measured requests."""
    res = driven_by(res, client)
    cfg = None  # the anchor's own section, else the standard configuration
    if res.concurrency:  # the benchmark client's own pattern (requests fixed)
        cfg = client_config(res.concurrency, client=client, given=res.simulation)
    _, m = run_simulation(res, cfg)
    stat = "p50" if statistic == "median" else "mean"
    if metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        v = m[metric][stat]
    elif metric == "output_tok_s_per_user":
        v = 1000.0 / m["tpot_ms"][stat] if m["tpot_ms"][stat] else None
    else:
        v = m[metric]
    if v is None:
        raise PlannerError(f"simulation produced no {metric}")
    return float(v)


OFFLINE_CLIENTS = ("trtllm-bench",)  # clients whose run without a concurrency enqueues the whole dataset at once


def offline_requests(res: Resolved, client: str | None) -> int | None:
    """The dataset size of an offline benchmark run, when the anchor states one: no concurrency or
    rate, an offline client (`trtllm-bench throughput` without `--concurrency`), and the run's
    request count in its `simulation` section. None: the run is read as a steady state."""
    sim = res.simulation
    if res.concurrency or res.request_rate or client not in OFFLINE_CLIENTS or sim is None:
        return None
    return sim.requests if "requests" in sim.model_fields_set else None


def simulated_offline(metric: str, res: Resolved, client: str, requests: int) -> float:
    """An offline benchmark run as the client runs it: the whole dataset of `requests` enqueued at
    once (a closed loop of that many clients started together, so the engine's own limits, its KV
    pool and running-request limit, admit what they can and the rest wait), in process, every
    request counted and the throughput over the run's whole span, from the first enqueue to the
    last completion (trtllm-bench's reporting: output tokens / total latency, so the ramp-up and
    the drain of a run of a few thousand requests are in it)."""
    res = replace(driven_by(res, client), concurrency=float(requests), request_rate=None)
    cfg = client_config(requests, num_prompts=requests, client=client, given=res.simulation)
    _, m = run_simulation(res, cfg, extend=False)
    v = m.get(metric)
    if not isinstance(v, int | float):
        raise PlannerError(f"offline run: the simulation produced no {metric}")
    return float(v)


def simulated_max_users(res: Resolved, slo: SLOSpec, start: int, client: str, limit: int = 4096) -> int:
    """The largest total concurrency whose simulated mean TTFT/TPOT/E2E meet `slo` (the anchor's
    `simulation` settings, else the benchmark client's closed loop: what `simulated_value` runs
    for the latency metrics) within what the KV pool holds; 0 if one user does not meet it.
    The estimator's answer `start` brackets the search (the two agree within a few percent), so
    a handful of runs settle it. Latency is taken to grow with concurrency, as in the estimator's
    search (`max_users_at_slo`)."""
    res = driven_by(res, client)
    pool = res.pool("decode", "aggregated")
    cap = max_batch(res.deployment, res.isl, res.osl) * pool.instances
    targets = {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "e2e_ms": slo.e2e_ms}

    def ok(c: int) -> bool:
        if c > cap:
            return False
        run = replace(res, concurrency=float(c), request_rate=None)
        _, m = run_simulation(run, client_config(c, client=client, given=res.simulation), extend=False)
        return all(t is None or (m[k]["mean"] is not None and m[k]["mean"] <= t) for k, t in targets.items())

    lo, hi, step = 0, max(start, 1), 1
    if ok(hi):  # step up, doubling, until a concurrency fails
        lo = hi
        while True:
            hi = lo + step
            if hi > limit:
                return lo
            if not ok(hi):
                break
            lo, step = hi, 2 * step
    else:  # step down, doubling, until one passes (or none does)
        while hi > 1:
            c = max(hi - step, 1)
            if ok(c):
                lo = c
                break
            hi, step = c, 2 * step
    while hi - lo > 1:  # lo passes (or is 0), hi fails
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
