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
`_one_cohort`). It does not choose the batch (`planner.model.estimator`).
"""

from __future__ import annotations

import math

from planner.model.deployment import Deployment, Pool
from planner.model.metrics import Metrics
from planner.model.queueing import any_busy, md1_wait, mdc_wait
from planner.model.ride import poisson_ride
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
from roofline.step import StepCost
from simulator.config import SimConfig

RHO_MAX = 0.95  # prefill utilisation of an aggregated instance beyond which decode starves
ITERATIONS = 60


def others(busy: float, seen: float) -> float:
    """The share of a request's decode time that another request's prompt occupies, where prompts keep the
    instance `busy` of the time (all clients counted) and a request meets `seen` of the others' load (the
    arrival theorem's (N - 1) / N in a closed loop of N, 1 under independent arrivals). Its own prompt is
    never in its decode time, so the others' share is measured against the time its prompt leaves:
    busy (N - 1) / N / (1 - busy / N). (The (N - 1) / N share alone, against the whole cycle, read TPOT
    14.3 ms for two clients of 32,000-token prompts where the simulation reads 21.8; review.)"""
    if seen >= 1.0:
        return busy
    own = min(busy, 0.999) * (1.0 - seen)
    return min(busy * seen / (1.0 - own), 1.0)


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


def _closed_loop_step(step_s: float, t_d: float, hold: float, per_step: float, seen: float) -> float:
    """The mean step a decoding request of a closed loop rides on a mixed instance: the others' prompts take
    `others` of its decode time (`hold` of steps with a prompt each: isl / g of a step of g prompt tokens, at
    x = per_step / t requests/s, `per_step` finishing per step), steps of `step_s` with a prompt,
    `t_d` without; counted by time, not by the share of steps, which undercounts long prompts (two clients of
    32,000-token prompts read TPOT 15.7 ms by steps where the simulation reads 21.8; review)."""

    def mean_step(t: float) -> float:
        f = others(min(per_step / t * hold, 0.999), seen)
        return 1.0 / (f / step_s + (1 - f) / t_d)

    return fixed_point(mean_step, t_d, max(step_s, t_d))


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
        t = _closed_loop_step(step.time_s, t_d, step.time_s * isl / g, b * tps / max(osl - 1, 1), seen)
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


def _ranks_stalling(
    dp: int, hold: float, tpot_free: float, b: float, osl: int, seen: float
) -> tuple[float, float, float]:
    """Prefill-first under attention DP, prompts longer than a rank's chunk: each holds its rank for
    `hold` seconds of lockstep steps that stall every rank's decodes, so decoding stops while any rank
    prefills (`any_busy` of dp servers at x requests/s; a decoding request meets `seen` of those).
    Returns x, that share and the TPOT."""
    top = RHO_MAX * dp / hold

    def tpot_at(x: float) -> float:
        return tpot_free / (1 - others(min(any_busy(dp, x * hold), RHO_MAX), seen))

    def rate(x: float) -> float:
        return min(b / ((osl - 1) * tpot_at(x)) if osl > 1 else math.inf, top)

    x = fixed_point(rate, 0.0, top)
    return x, min(any_busy(dp, x * hold), RHO_MAX), tpot_at(x)


def _prefill_first(
    pool: Pool, isl: int, osl: int, t_d: float, b: float, seen: float, full: tuple[StepCost, int] | None
) -> tuple[float, float, float, StepCost, float]:
    """Prefill-first at a mean decode batch b: (x requests/s, prefill share rho, TPOT, the prefill step, the
    prompts it completes). Requests arriving during a scheduling cycle (a decode step, plus a prefill step
    when any are waiting) are prefilled together: Poisson with mean lam, so a prefill that happens holds
    lam / (1 - e^-lam) of them on average, and a cycle carries one with chance 1 - e^-lam; in cohorts
    (`cohort_batches`, `full`) every prefill is a full batch, lam / nb of the cycles. The rate x that the
    batch keeps is the `fixed_point` of x -> b / decode time at x's prefill share (the damped iteration it
    replaces swung without settling on most long prompts: 32,000-token prompts on DeepSeek-V3 TP8, 245 of 264
    operating points tried; twenty-second session)."""
    tps = tokens_per_step(pool)
    max_nb = max(1, prefill_budget(pool) * pool.parallel.dp_attention // max(isl, 1))

    def cycle(x: float) -> tuple[StepCost, float, float, float]:
        """(prefill step, prompts it completes, prefill share, TPOT) at x requests/s."""
        step_p, first = prefill_step(pool, isl, 1)
        done: float = first
        t_p = 0.0
        for _ in range(ITERATIONS):  # the cycle's prefill time, rising with the prompts it holds
            lam = x * (t_d + t_p)
            if full is not None:
                step_p, done = full[0], full[1]
                t_next = step_p.time_s * min(lam / done, 1.0)
            else:
                held = lam / -math.expm1(-lam) if lam > 1e-9 else 1.0  # prompts a prefill step holds
                step_p, priced = prefill_step(pool, isl, max(1, min(round(held), max_nb)))
                done = priced
                if pool.parallel.dp_attention > 1:  # priced as every rank carrying the busiest rank's prompts
                    done = min(done, max(1.0, min(held, max_nb)))  # (ranks step together); completes those that came
                t_next = step_p.time_s * (-math.expm1(-lam) if lam > 1e-9 else 0.0)
            if abs(t_next - t_p) <= 1e-9 * max(t_next, 1e-12):
                break
            t_p = t_next
        rho = min(x * step_p.time_s / done, RHO_MAX)
        tpot = t_d / tps / (1 - others(rho, seen))
        return step_p, done, rho, tpot

    def rate(x: float) -> float:
        step_p, done, _, tpot = cycle(x)
        top = RHO_MAX * done / step_p.time_s
        return min(b / ((osl - 1) * tpot), top) if osl > 1 else top

    hi = max(rate(0.0), RHO_MAX * max_nb / prefill_step(pool, isl, max_nb)[0].time_s)
    x = fixed_point(rate, 0.0, hi)
    step_p, done, rho, tpot = cycle(x)
    return x, rho, tpot, step_p, done


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
        x, rho, tpot = _ranks_stalling(dp, step_p.time_s, t_d / tokens_per_step(pool), b, osl, seen)
    else:
        x, rho, tpot, step_p, done = _prefill_first(pool, isl, osl, t_d, b, seen, full)
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
            ttft, decode_s, tpot = _one_cohort(pool, isl, osl, batch, decode_s, tpot, ttft)
    n = pool.instances
    m = Metrics("estimate", "aggregated", dep.gpus, n * x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch = n * x * isl, n * x * osl, batch
    m.limit = "prefill stalls decode" if rho >= RHO_MAX else ""
    m.decode_step, m.prefill_step = decode_step(pool, b, kv_len), step_p
    m.memory = {"aggregated": memory(pool)}
    return m


def _one_cohort(
    pool: Pool, isl: int, osl: int, k: float, cycle: float, tpot: float, streamed: float
) -> tuple[float, float, float]:
    """(mean TTFT, decode time, TPOT) of a saturated prefill-first run whose `k` requests in flight are one
    cohort, `cycle` being its osl - 1 TPOTs stretched by the prefill share. Prefill-first runs every waiting
    prompt before the next decode step, so prompts queued together all start decoding in the same step
    and, with outputs of one length, finish in the same step: their replacements arrive together at that
    step's end and are prefilled in full steps, one after another, the i-th prompt waiting for every step
    before its own. Each member lives one cycle (Little's law keeps the batch), its first token TTFT into
    it. (Priced as a cohort of one full step before, 248 ms for a Kimi-K2 TP8 offline run on H200 whose
    simulation reads 655: its 38 prompts take five steps of 230 ms; and a saturated closed loop of that
    estimate's concurrency held more requests than the KV pool.) Where the cohort's prefill outlasts its
    cycle (a prefill-bound instance: long prompts, a few output tokens, the prefill share at RHO_MAX) its
    members never decode together, and the prompts are priced as a stream (`streamed`, the TTFT before)."""
    ttft = _cohort_ttft(pool, isl, k)
    if osl <= 1:
        return ttft, cycle, tpot
    if ttft >= cycle:  # Llama-3.1-8B on one H100, 8,000/4 tokens: TPOT read 0 (the review of this change)
        return streamed, cycle, tpot
    decode_s = cycle - ttft
    return ttft, decode_s, decode_s / (osl - 1)


def _cohort_ttft(pool: Pool, isl: int, k: float) -> float:
    """Mean over `k` prompts queued together of the prefill steps up to and including each one's."""
    left = max(1, round(k))
    total, elapsed, n = 0.0, 0.0, left
    while left > 0:
        step, done = prefill_step(pool, isl, left)
        take = min(done, left)
        elapsed += step.time_s
        total += take * elapsed
        left -= take
    return total / n


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
