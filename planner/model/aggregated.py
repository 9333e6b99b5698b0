"""The steady state of an aggregated instance (prefill and decode on the same GPUs) at a mean decode
batch, as `planner.model.estimator.point` prices it, and how a saturated run's prompts arrive.

- prefill-first (SGLang): prefill batches stall decoding, so TPOT stretches by 1 / (1 - prefill
  utilisation); requests arriving during a scheduling cycle are prefilled together;
- mixed (vLLM, TRT-LLM): decodes and prefill chunks share each step within the token budget
  (planner/engines/*.yaml `scheduler`), so prefill lengthens every step instead of stalling.
Under attention DP the ranks step together, each step priced at its busiest rank; a prompt longer than a
rank's chunk holds its rank for several steps while prompts on other ranks ride the same steps, so the
prefill share is the time any rank prefills (`planner.model.queueing.any_busy`, M/M/c with a server per
rank), not the prompts' tokens over the whole instance's budget.
Prompts arrive as a Poisson stream, or in full batches when a saturated run of fixed output lengths
keeps its cohorts (`cohort_batches`; under prefill-first the whole batch in flight is one cohort,
`planner.model.prefill_first.one_cohort`). It does not choose the batch (`planner.model.estimator`).
"""

from __future__ import annotations

import math

from planner.model.deployment import Deployment, Pool
from planner.model.metrics import Metrics
from planner.model.prefill_first import RHO_MAX, one_cohort, prefill_first, ranks_stalling
from planner.model.queueing import any_busy, md1_wait, mdc_wait
from planner.model.ride import closed_loop_step, poisson_ride
from planner.model.solve import fixed_point
from planner.model.steps import (
    decode_capacity,
    decode_step,
    decode_time,
    drafts,
    memory,
    mixed_step,
    prefill_budget,
    prefill_step,
    ridden,
    tokens_per_step,
)
from simulator.config import SimConfig


def _whole_prompts(
    pool: Pool, budget: float, dec_tokens: float, b: float, c: float, isl: int, osl: int, limit: str
) -> tuple[float, float, float, str]:
    """(b, c, free, limit) of a mixed instance that takes prompts only whole (TRT-LLM without chunked
    prefill): a step holds whole prompts per rank beside its decodes, so fewer decodes run where no rank
    has room for one, or where decodes finish faster than whole prompts can follow them."""
    tps, per = tokens_per_step(pool), 1 + drafts(pool)
    dp_pp = pool.parallel.dp_attention * pool.parallel.pp
    rank_budget = budget / dp_pp
    if isl <= rank_budget and (budget - dec_tokens) / dp_pp < isl:  # no rank has room for a whole prompt
        b = (rank_budget - isl) * dp_pp / per
        c, dec_tokens, limit = b * tps * isl / max(osl - 1, 1), b * per, "whole prompt per step"
    whole = max(1, math.floor((budget - dec_tokens) / dp_pp / isl)) if isl <= rank_budget else 1
    free = float(whole * isl * dp_pp)  # prompt tokens a step takes: whole prompts per rank
    if c > free and osl > 1:  # decodes finish faster than whole prompts can follow them: fewer decodes
        b = free * (osl - 1) / (tps * isl)
        c, limit = free, "whole prompts per step"
    return b, c, free, limit


def _prompt_wait(
    budget: float, busy: float, hold: float, cycle: float, seen: float, cohorts: bool, instances: int = 1
) -> float:
    """A prompt's wait for the token budget of a mixed instance, busy with prompts `busy` of the time (`budget`
    of its tokens), each holding it `hold` seconds; `cycle`: a client's prefill and decode. Saturated cohorts
    queue full prefill steps one after another (`budget`); independent arrivals queue M/D/1 for the time the
    budget is busy (they arrive in time, not per step, and the steps that carry prompts are the long ones); a
    closed loop of N fixed-length clients staggers, so a prompt waits only where the N prompts' time outlasts
    a client's cycle (the M/D/1 wait read 2.3 s for four clients of 32,000-token prompts on vLLM where the
    simulation's staggered loop reads 1.2; review)."""
    if cohorts:
        return md1_wait(min(budget, 0.999), hold)
    if seen < 1.0:
        return max(0.0, hold / (1.0 - seen) - cycle)
    return mdc_wait(instances, min(busy, 0.999), hold)  # the router takes the least loaded instance


def _ranks_prefilling(dp: int, hold: float, step_s: float, t_d: float, done_per_step: float) -> tuple[float, float]:
    """Mean step time and queueing wait of a mixed instance whose prompts each hold their rank for
    `hold` seconds of `step_s` lockstep prefill steps: a Poisson stream at x requests/s (`done_per_step`
    requests finish per step of the mean length t) keeps some rank prefilling `any_busy(dp, x hold)` of
    the time, plain decode steps (`t_d`) fill the rest; a prompt waits for its own rank's earlier one."""

    def mean_step(t: float) -> float:
        busy = any_busy(dp, done_per_step / t * hold)
        return 1.0 / (busy / step_s + (1 - busy) / t_d)

    t = fixed_point(mean_step, t_d, max(step_s, t_d))
    x = done_per_step / t
    return t, md1_wait(min(x * hold / dp, 0.999), hold)


def _mixed(
    dep: Deployment, pool: Pool, isl: int, osl: int, kv_len: float, b: float, cohorts: bool, seen: float
) -> Metrics:
    """vLLM / TRT-LLM: every step runs the decodes and prefill chunks together within the token
    budget. At a mean decode batch b, each step emits b x (tokens per step) tokens, and every
    osl - 1 of them finish a request whose isl prompt tokens must be prefilled: c = b tps isl /
    (osl - 1) prefill tokens per step on average, whatever the step time, arriving as whole
    prompts. A new prompt gets what the decodes leave of the budget each step, so its prefill
    spans isl / (budget - decode tokens) steps. Without chunked prefill (TRT-LLM's default) a prompt
    waits for a step with room for all of it, and a step takes only whole prompts. A request meets
    `seen` of the others' prompts (`aggregated`): in its decode steps and in the queue ahead of its own."""
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
        b, c, free, limit = _whole_prompts(pool, budget, dec_tokens, b, c, isl, osl, limit)
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
    p = min(c / g, 1.0)  # the share of steps that carry a prompt
    step = mixed_step(pool, b, kv_len, dp * busiest, isl)
    steps = math.ceil(isl / free)
    hold = step.time_s * isl / free  # the budget's time one prompt takes
    share = free / dp
    t_d = decode_time(pool, ridden(pool, b, seen, isl + osl), kv_len)
    t = p * step.time_s + (1 - p) * t_d
    lanes = dp > 1 and isl > share and not cohorts
    wait = 0.0
    if seen < 1.0 and not lanes and not cohorts:
        t = closed_loop_step(step.time_s, t_d, step.time_s * isl / g, b * tps / max(osl - 1, 1), seen)
    elif not lanes and not cohorts and osl > 1:  # Poisson: a short answer rides the busy spell it starts in
        t = poisson_ride(
            b,
            max(osl - 1, 0) / tps,
            step.time_s,
            t_d,
            step.time_s * isl / g,
            pool.instances,
            decode_capacity(pool, isl + osl),
        )[1]
    if lanes:
        # A prompt longer than its rank's share holds that rank for `steps` steps, while prompts on
        # other ranks ride the same steps: the instance runs prefill steps while any rank has a prompt
        # (`any_busy` of dp servers at x requests/s, each held steps x step time), decode steps
        # otherwise; a prompt waits only for its own rank's earlier one (the ranks are taken in turn)
        steps = math.ceil(isl / share)
        done = seen * b * tps / max(osl - 1, 1)
        t, wait = _ranks_prefilling(dp, steps * step.time_s, step.time_s, t_d, done)
    tpot = t / tps
    decode_s = max(osl - 1, 0) * tpot
    x = b / decode_s if decode_s > 0 else c / isl / t  # requests/s per instance
    if not lanes:
        wait = _prompt_wait(c / free, x * hold, hold, steps * step.time_s + decode_s, seen, cohorts, pool.instances)
    ttft = seen * t / 2 + steps * step.time_s + wait  # the rest of another's step in progress
    n = pool.instances
    m = Metrics("estimate", "aggregated", dep.gpus, n * x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch, m.limit = n * x * isl, n * x * osl, b, limit
    # the step that takes most of the time: where steps with a prompt take under half of it, the plain
    # decode step, which sets TPOT there (explain analysed a 27 ms mixed step beside a 2.3 ms TPOT at
    # concurrency 1 and 1,000-token answers; trial)
    busy = b * tps / max(osl - 1, 1) / t * hold  # the instance's time with a prompt, the request's own included
    m.decode_step = step if busy >= 0.5 else decode_step(pool, b, kv_len)
    m.prefill_step = prefill_step(pool, isl, 1)[0]
    m.memory = {"aggregated": memory(pool)}
    return m


def aggregated(
    dep: Deployment, isl: int, osl: int, kv_len: float, b: float, cohorts: bool = False, seen: float = 1.0
) -> Metrics:
    """`seen`: the share of the instance's load a request meets from the others. Independent arrivals see
    it all (1); in a closed loop of N clients per instance a request never meets its own prompt, and the
    arrival theorem's Bard-Schweitzer estimate gives the others' (N - 1) / N of it (`point`)."""
    pool = dep.first("aggregated")
    assert pool is not None
    if pool.instance.runtime.scheduler == "mixed":
        return _mixed(dep, pool, isl, osl, kv_len, b, cohorts, seen)
    t_d = decode_time(pool, ridden(pool, b, seen, isl + osl), kv_len)
    dp = pool.parallel.dp_attention
    max_nb = max(1, prefill_budget(pool) * dp // max(isl, 1))
    full = prefill_step(pool, isl, max_nb) if cohorts else None  # every cohort prefill: one full batch
    # A prompt longer than a rank's chunk holds its rank for several steps; prompts on other ranks ride
    # the same (lockstep) steps, so prefill stalls decoding while any rank prefills: `any_busy`
    lanes = dp > 1 and isl > prefill_budget(pool) and full is None
    done: float
    if lanes:
        step_p, first = prefill_step(pool, isl, 1)
        done = first
        x, rho, tpot = ranks_stalling(dp, step_p.time_s, t_d / tokens_per_step(pool), b, osl, seen)
    else:
        x, rho, tpot, step_p, done = prefill_first(pool, isl, osl, t_d, b, seen, full)
    decode_s = max(osl - 1, 0) * tpot
    batch = x * decode_s if decode_s else b
    wait = t_d / 2 if b * seen > 1 else 0.0  # residual of the decode step in progress
    if lanes:  # a prompt waits only for its own rank's earlier prompt (the ranks are taken in turn)
        ttft = step_p.time_s + wait + md1_wait(x * seen * step_p.time_s / dp, step_p.time_s)
    else:
        queue = (
            md1_wait(rho * seen, step_p.time_s / done)
            if seen < 1.0
            else mdc_wait(pool.instances, rho, step_p.time_s / done)
        )  # independent arrivals: the router takes the least loaded of the instances
        ttft = step_p.time_s + wait + queue
        if full is not None:
            ttft, decode_s, tpot = one_cohort(pool, isl, osl, batch, decode_s, tpot, ttft)
    n = pool.instances
    m = Metrics("estimate", "aggregated", dep.gpus, n * x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch = n * x * isl, n * x * osl, batch
    m.limit = "prefill stalls decode" if rho >= RHO_MAX else ""
    m.decode_step, m.prefill_step = decode_step(pool, b, kv_len), step_p
    m.memory = {"aggregated": memory(pool)}
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
