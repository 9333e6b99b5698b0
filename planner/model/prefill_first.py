"""SGLang's prefill-first scheduling of an aggregated instance at a mean decode batch, as
`planner.model.aggregated` prices it: a pending prefill batch runs before the next decode step, so prefill stalls
decoding and TPOT stretches by 1 / (1 - the prefill share others meet); requests arriving during a scheduling cycle
are prefilled together (`prefill_first`); under attention DP a prompt longer than a rank's chunk holds its rank
while the others' prompts ride the same lockstep steps (`ranks_stalling`); a saturated run of fixed lengths is one
cohort (`one_cohort`). Numeric solves only: the steps are `planner.model.steps`'."""

from __future__ import annotations

import math

from planner.model.deployment import Pool
from planner.model.queueing import any_busy
from planner.model.ride import others
from planner.model.solve import fixed_point
from planner.model.steps import prefill_budget, prefill_step, tokens_per_step
from roofline.step import StepCost

RHO_MAX = 0.95  # prefill utilisation of an aggregated instance beyond which decode starves
ITERATIONS = 60


def ranks_stalling(
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


def prefill_first(
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


def one_cohort(
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
    ttft = cohort_ttft(pool, isl, k)
    if osl <= 1:
        return ttft, cycle, tpot
    if ttft >= cycle:  # Llama-3.1-8B on one H100, 8,000/4 tokens: TPOT read 0 (the review of this change)
        return streamed, cycle, tpot
    decode_s = cycle - ttft
    return ttft, decode_s, decode_s / (osl - 1)


def cohort_ttft(pool: Pool, isl: int, k: float) -> float:
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
