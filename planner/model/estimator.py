"""The one steady-state model: TTFT, TPOT, E2E and throughput of a deployment, without simulating.

A deployment's operating point is parametrised by its mean decode batch per decode (or
aggregated) instance; `point` gives every figure at that batch:
- disaggregated: decode step -> TPOT (step / tokens per step, 1 + accepted MTP drafts); the
  decode pool's completion rate n b / ((osl - 1) TPOT) loads the prefill pool (M/D/1 wait at
  that load) and TTFT = one request's prefill + wait + the KV hand-off (`_handoff`: the transfer over
  the link and the decode steps the engine's hand-off waits for);
- aggregated, prefill-first (SGLang): prefill batches stall decoding, so TPOT stretches by
  1 / (1 - prefill utilisation); requests arriving during a scheduling cycle are prefilled together;
- aggregated, mixed (vLLM, TRT-LLM): decodes and prefill chunks share each step within the token
  budget (planner/engines/*.yaml `scheduler`), so prefill lengthens every step instead of stalling.
`estimate` finds the batch the traffic implies: a closed loop of C requests in flight
(C = X (TTFT + decode time), Little's law), an open loop at a request rate, or, with neither, a
saturated run (as many requests in flight as the KV pool and the engine's running limit allow).
The planner's search calls `point` for the batches it sweeps and `estimate` for the traffic a
question gives; `planner estimate` calls `estimate`. It reports means; percentiles under real
arrivals come from the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from planner.model.defaults import Resolved
from planner.model.deployment import Deployment, Pool
from planner.model.disaggregated import disaggregated, md1_wait
from planner.model.metrics import Metrics, add_request_overhead
from planner.model.steps import (
    decode_capacity,
    decode_step,
    decode_time,
    drafts,
    memory,
    mixed_step,
    prefill_budget,
    prefill_step,
    tokens_per_step,
)
from roofline.errors import KVCacheCapacityError, PlannerError
from roofline.memory import kv_needed_tokens
from simulator.config import SimConfig

RHO_MAX = 0.95  # prefill utilisation of an aggregated instance beyond which decode starves
ITERATIONS = 60


def _mixed(dep: Deployment, pool: Pool, isl: int, osl: int, kv_len: float, b: float, cohorts: bool) -> Metrics:
    """vLLM / TRT-LLM: every step runs the decodes and prefill chunks together within the token
    budget. At a mean decode batch b, each step emits b x (tokens per step) tokens, and every
    osl - 1 of them finish a request whose isl prompt tokens must be prefilled: c = b tps isl /
    (osl - 1) prefill tokens per step on average, whatever the step time, arriving as whole
    prompts. A new prompt gets what the decodes leave of the budget each step, so its prefill
    spans isl / (budget - decode tokens) steps. Without chunked prefill (TRT-LLM's default) a prompt
    waits for a step with room for all of it, and a step takes only whole prompts."""
    tps = tokens_per_step(pool)
    dec_tokens = b * (1 + drafts(pool))
    # each of the pp micro-batches in flight is scheduled with the whole token budget (roofline.pipeline)
    budget = prefill_budget(pool) * pool.parallel.dp_attention * pool.parallel.pp
    c = b * tps * isl / (osl - 1) if osl > 1 else float(budget)
    limit = ""
    if c + dec_tokens > budget:  # the budget cannot prefill as fast as decodes finish: fewer decodes
        b = budget / (tps * isl / max(osl - 1, 1) + 1 + drafts(pool))
        c, dec_tokens, limit = budget - b * (1 + drafts(pool)), b * (1 + drafts(pool)), "token budget per step"
    free = max(budget - dec_tokens, 1.0)  # tokens a new prompt may take per step
    if not pool.instance.runtime.chunked_prefill:  # whole prompts only (TRT-LLM's default)
        dp_pp = pool.parallel.dp_attention * pool.parallel.pp
        rank_budget = budget / dp_pp
        if isl <= rank_budget and free / dp_pp < isl:  # no rank has room for a whole prompt: fewer decodes
            b = (rank_budget - isl) * dp_pp / (1 + drafts(pool))
            c, dec_tokens, limit = b * tps * isl / max(osl - 1, 1), b * (1 + drafts(pool)), "whole prompt per step"
        whole = max(1, math.floor((budget - dec_tokens) / dp_pp / isl)) if isl <= rank_budget else 1
        free = float(whole * isl * dp_pp)  # prompt tokens a step takes: whole prompts per rank
        if c > free and osl > 1:  # decodes finish faster than whole prompts can follow them: fewer decodes
            b = free * (osl - 1) / (tps * isl)
            c, dec_tokens, limit = free, b * (1 + drafts(pool)), "whole prompts per step"
    # Prompts come whole: those that arrived during one step (Poisson, c / isl per step) are
    # prefilled together in the next, as far as the free budget goes; in cohorts (a saturated run
    # of fixed lengths, `cohort_batches`) every prefill step is full. A share p of the steps
    # carries g prefill tokens; the others are plain decode steps.
    lam = c / max(isl, 1)
    g = free if cohorts else min(free, (lam / -math.expm1(-lam) if lam > 1e-9 else 1.0) * isl)
    # Attention-DP ranks step together at the busiest one's share: a prompt sits on one rank and
    # takes at most that rank's free budget, so few prompts are priced as one chunk on every rank
    dp = pool.parallel.dp_attention
    busiest = min(free / dp, max(g / dp, min(isl, g)))
    p = min(c / g, 1.0)
    step = mixed_step(pool, b, kv_len, dp * busiest, isl)
    t = p * step.time_s + (1 - p) * decode_time(pool, b, kv_len)
    tpot = t / tps
    decode_s = max(osl - 1, 0) * tpot
    x = b / decode_s if decode_s > 0 else c / isl / t  # requests/s per instance
    rho = min(c / free, 0.999)
    steps = math.ceil(isl / free)
    ttft = t / 2 + steps * step.time_s + md1_wait(rho, step.time_s * isl / free)
    n = pool.instances
    m = Metrics("estimate", "aggregated", dep.gpus, n * x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch, m.limit = n * x * isl, n * x * osl, b, limit
    m.decode_step, m.prefill_step = step, prefill_step(pool, isl, 1)[0]
    m.memory = {"aggregated": memory(pool)}
    return m


def _aggregated(dep: Deployment, isl: int, osl: int, kv_len: float, b: float, cohorts: bool = False) -> Metrics:
    pool = dep.first("aggregated")
    assert pool is not None
    if pool.instance.runtime.scheduler == "mixed":
        return _mixed(dep, pool, isl, osl, kv_len, b, cohorts)
    t_d = decode_time(pool, b, kv_len)
    max_nb = max(1, prefill_budget(pool) * pool.parallel.dp_attention // max(isl, 1))
    x, t_p, rho, tpot = 0.0, 0.0, 0.0, t_d / tokens_per_step(pool)
    step_p, done = prefill_step(pool, isl, 1)
    for _ in range(ITERATIONS):
        # Requests arriving during a scheduling cycle (a decode step, plus a prefill step when any
        # are waiting) are prefilled together: Poisson with mean lam, so a prefill that happens
        # holds lam / (1 - e^-lam) of them on average, and a cycle carries one with chance
        # 1 - e^-lam; in cohorts (`cohort_batches`) every prefill is a full batch, lam / nb of the cycles.
        lam = x * (t_d + t_p)
        if cohorts:
            nb = max_nb
            step_p, done = prefill_step(pool, isl, nb)
            t_p = step_p.time_s * min(lam / done, 1.0)
        else:
            nb = max(1, min(round(lam / -math.expm1(-lam)) if lam > 1e-9 else 1, max_nb))
            step_p, done = prefill_step(pool, isl, nb)
            t_p = step_p.time_s * (-math.expm1(-lam) if lam > 1e-9 else 0.0)
        rho = min(x * step_p.time_s / done, RHO_MAX)
        tpot = t_d / tokens_per_step(pool) / (1 - rho)
        decode_s = (osl - 1) * tpot
        x_new = b / decode_s if decode_s > 0 else RHO_MAX * done / step_p.time_s
        x_new = min(x_new, RHO_MAX * done / step_p.time_s)
        if abs(x_new - x) <= 1e-7 * x_new:
            break
        x = 0.5 * x + 0.5 * x_new
    decode_s = max(osl - 1, 0) * tpot
    wait = t_d / 2 if b > 1 else 0.0  # residual of the decode step in progress
    ttft = step_p.time_s + wait + md1_wait(rho, step_p.time_s / done)
    n = pool.instances
    m = Metrics("estimate", "aggregated", dep.gpus, n * x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch = n * x * isl, n * x * osl, x * decode_s if decode_s else b
    m.limit = "prefill stalls decode" if rho >= RHO_MAX else ""
    m.decode_step, m.prefill_step = decode_step(pool, b, kv_len), step_p
    m.memory = {"aggregated": memory(pool)}
    return m


def _decode_pool(dep: Deployment) -> Pool:
    pool = dep.first("decode") or dep.first("aggregated")
    if pool is None:
        raise PlannerError("deployment: an end-to-end estimate needs a decode or aggregated pool")
    return pool


def max_batch(dep: Deployment, isl: int, osl: int) -> int:
    """Sequences one decode (or aggregated) instance can hold at full length."""
    return max(decode_capacity(_decode_pool(dep), isl + osl), 0)


def point(dep: Deployment, isl: int, osl: int, kv_len: float, batch: float, cohorts: bool = False) -> Metrics:
    """Every figure at a mean decode batch per instance (clipped to the KV capacity); `cohorts`:
    an aggregated instance's prompts come in full batches (`cohort_batches`), not Poisson."""
    cap = max_batch(dep, isl, osl)
    if cap < 1:
        raise KVCacheCapacityError(f"the KV pool holds no {isl + osl}-token sequence")
    b = min(max(batch, 1e-6), cap)
    if dep.first("aggregated"):
        m = _aggregated(dep, isl, osl, kv_len, b, cohorts)
    else:
        m = disaggregated(dep, isl, osl, kv_len, b)
    add_request_overhead(m, request_overhead_s(dep), osl)
    if b >= cap and not m.limit:
        m.limit = "decode KV capacity"
    return m


def request_overhead_s(dep: Deployment) -> float:
    """The serving path of the pool a request enters first (prefill, else aggregated); a
    decode-only deployment takes prompts already prefilled, past the serving path."""
    pool = dep.first("prefill") or dep.first("aggregated")
    return pool.instance.runtime.request_overhead_s if pool else 0.0


def _solve(f: Callable[[float], float], target: float, hi: float) -> float | None:
    """Smallest b in (0, hi] with f(b) >= target for increasing f; None if f(hi) < target."""
    if f(hi) < target:
        return None
    lo = 1e-6
    for _ in range(48):
        mid = 0.5 * (lo + hi)
        if f(mid) >= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-7 * hi:
            break
    return hi


def estimate_deployment(
    dep: Deployment,
    isl: int,
    osl: int,
    kv_len: float,
    concurrency: float | None = None,
    rate: float | None = None,
    cohorts: bool = True,
) -> Metrics:
    """The steady state under a closed loop (total `concurrency`), an open loop (`rate`
    requests/s) or, with neither, saturation (the decode pool full; `cohorts`: prompts in full
    batches, `cohort_batches`)."""
    cap = max_batch(dep, isl, osl)
    if cap < 1:
        raise KVCacheCapacityError(f"the KV pool holds no {isl + osl}-token sequence")
    if concurrency is None and rate is None:  # offline benchmarks run in process: no serving path
        m = point(dep.without_serving_path(), isl, osl, kv_len, cap, cohorts)
        m.assumed.append(f"traffic: saturated ({cap} sequences per instance: the KV pool or the running limit)")
        return m
    if rate is not None:
        b = _solve(lambda v: point(dep, isl, osl, kv_len, v).output_tok_s / osl, rate, cap)
        m = point(dep, isl, osl, kv_len, cap if b is None else b)
        if b is None or (m.limit and m.output_tok_s / osl < rate * 0.999):
            m.saturated = True
            m.limit = m.limit or "decode KV capacity"
        return m
    assert concurrency is not None
    b = _solve(lambda v: point(dep, isl, osl, kv_len, v).concurrency, concurrency, cap)
    m = point(dep, isl, osl, kv_len, cap if b is None else b)
    if b is None or m.concurrency < concurrency * 0.999:  # the excess waits for a KV slot or for prefill
        served = m.output_tok_s / osl
        decode_s = m.e2e_s - m.ttft_s
        m.ttft_s = max(m.ttft_s, concurrency / served - decode_s)
        m.e2e_s = m.ttft_s + decode_s
        m.concurrency = concurrency
    return m


def cohort_batches(cfg: SimConfig | None) -> bool:
    """Whether a saturated (offline) run of this `simulation` section prefills its prompts in full
    batches. An offline benchmark (trtllm-bench, `vllm bench throughput`, SGLang's offline engine)
    queues every request at once: the first steps fill the token budget with whole prompts, and the
    requests of one step decode in lockstep, so with outputs of one length they finish in the same
    step and the prompts that replace them fill one step again. The cohorts last the whole run: every
    prefill step is full, and under attention DP every rank prefills in the same steps (a rank's
    prompt stalls the others once per cohort, not once per prompt). Outputs of spread lengths (a
    distribution or a trace) finish at spread steps, and their replacements come as a stream, priced
    as Poisson. The simulator's saturated closed loop, started at once, shows the same
    (`planner.model.simulate`)."""
    if cfg is None:
        return True
    if cfg.trace is not None:
        return False
    d = cfg.output_len
    if d is None or d.kind == "fixed":
        return True
    return (d.kind == "normal" and d.std == 0) or (d.kind == "uniform" and d.min == d.max)


def estimate_prefill(res: Resolved) -> Metrics:
    pool = res.pool("prefill", "aggregated")
    step, n = prefill_step(pool, res.isl)
    rate = pool.instances * n / step.time_s
    m = Metrics("estimate", "prefill", pool.gpus, float(n * pool.instances), ttft_s=step.time_s)
    m.input_tok_s, m.prefill_step, m.assumed = rate * res.isl, step, list(res.assumed)
    m.memory["prefill"] = memory(pool, kv_needed_tokens(pool.instance, "prefill", res.isl))
    return m


def estimate_decode(res: Resolved, concurrency: float | None = None) -> Metrics:
    pool = res.pool("decode", "aggregated")
    conc = concurrency if concurrency is not None else res.concurrency
    cap = decode_capacity(pool, res.kv_len)
    assumed = list(res.assumed)
    if conc is None:
        conc = float(cap * pool.instances)
        assumed.append(f"decode batch: {cap} per instance (fills the KV pool at {res.kv_len:.0f} tokens)")
    batch = conc / pool.instances
    if batch > cap:
        raise KVCacheCapacityError(
            f"decode batch {batch:.0f} per instance exceeds KV capacity {cap} at {res.kv_len:.0f} tokens"
        )
    step = decode_step(pool, batch, res.kv_len)
    tpot = step.time_s / tokens_per_step(pool)
    m = Metrics("estimate", "decode", pool.gpus, conc, tpot_s=tpot, output_tok_s=conc / tpot, decode_batch=batch)
    m.decode_step, m.assumed = step, assumed
    m.memory["decode"] = memory(pool)
    return m


def estimate(res: Resolved, concurrency: float | None = None) -> Metrics:
    """The estimate the scenario's phase and deployment call for."""
    phase = res.phase
    if phase == "prefill":
        return estimate_prefill(res)
    if phase == "decode":
        return estimate_decode(res, concurrency)
    conc = concurrency if concurrency is not None else res.concurrency
    rate = None if concurrency is not None else res.request_rate
    m = estimate_deployment(res.deployment, res.isl, res.osl, res.kv_len, conc, rate, cohort_batches(res.simulation))
    m.assumed = list(res.assumed) + m.assumed
    return m


def max_users_at_slo(
    res: Resolved, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None, limit: int = 4096
) -> tuple[int, Metrics | None]:
    """Largest total concurrency whose mean TTFT/TPOT/E2E meet the targets (0 if none does)."""

    def ok(c: int) -> tuple[bool, Metrics]:
        e = estimate(res, float(c))
        good = not e.saturated and "KV" not in e.limit
        good &= ttft_ms is None or e.ttft_s * 1e3 <= ttft_ms
        good &= tpot_ms is None or e.tpot_s * 1e3 <= tpot_ms
        good &= e2e_ms is None or e.e2e_s * 1e3 <= e2e_ms
        return good, e

    good, best = ok(1)
    if not good:
        return 0, best
    lo, hi = 1, 2
    while hi <= limit and ok(hi)[0]:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo, ok(lo)[1]
