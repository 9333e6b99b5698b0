"""The estimator's disaggregated steady state (planner.model.estimator calls it): a decode pool at a
mean batch b per instance feeds a prefill pool (an M/D/1 queue at the rate the decode pool completes
requests; prompts arriving during a prefill step ride the next one together, `_prefill_wait`), and the
first token comes after the prefill, its wait and the KV hand-off to decode.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import pdtr, pdtrc

from planner.model.deployment import Deployment, Pool
from planner.model.metrics import Metrics
from planner.model.queueing import md1_wait
from planner.model.steps import decode_step, decode_time, memo, memory, prefill_step, ridden, tokens_per_step
from roofline.comm import kv_transfer_time
from roofline.memory import kv_needed_tokens

ITERATIONS = 60
WAIT_TOLERANCE = 1e-4  # relative change of the mean prefill step at which `_prefill_wait` stops


def handoff(dec: Pool, transfer: float, step: float) -> float:
    """Prefill's end to the first token on the decode side, by the engine's KV hand-off
    (`RuntimeOptions.disagg_kv_handoff`; simulator.handoff runs the same). The decode scheduler acts
    between two steps: whatever reaches it mid-step waits out the rest, half a `step` on average.
    `push`: the KV lands after `transfer`, then that half step. `prealloc_push` (SGLang): the same, plus
    the half step the decode scheduler takes to pre-allocate the KV before the prefill may start.
    `decode_pull` (vLLM, TRT-LLM): the read starts at the decode step boundary after the request
    arrives (half a step) and is seen finished at a step boundary, at least one step later (the step
    in progress when it ends, half of it on average, once the read outlasts a step). Engines whose
    decode side emits the first token from a forward (vLLM, TRT-LLM) add that whole first step."""
    mode = dec.instance.runtime.disagg_kv_handoff
    if mode == "decode_pull":
        t = 0.5 * step + max(step, transfer + 0.5 * step)
    else:
        t = transfer + 0.5 * step + (0.5 * step if mode == "prealloc_push" else 0.0)
    return t + (step if dec.instance.runtime.disagg_first_token_after_step else 0.0)


def _in_flight(decode_s: Callable[[float], float], b: float, n: int) -> float:
    """The decode batch b per instance that a request rate keeps in flight: b = rate x decode time(b) /
    n (the instances), `decode_s(b)` being rate x decode time. Secant steps on b - decode_s(b) / n, from
    the batch the pool holds and its first image (a plain fixed-point iteration took 8-34 step costs
    where this takes 4-6); a secant step that would leave b <= 0 falls back to the fixed-point step."""
    prev: tuple[float, float] | None = None
    for _ in range(ITERATIONS):
        image = decode_s(b) / n
        gap = image - b
        if abs(gap) <= 1e-6 * b:
            return image
        step = image
        if prev is not None and gap != prev[1]:
            secant = b - gap * (b - prev[0]) / (gap - prev[1])
            step = secant if secant > 0 else image
        prev, b = (b, gap), step
    return b


def _prefill_wait(pre: Pool, isl: int, x: float, most: int) -> tuple[float, float]:
    """(the wait for the step in progress, the mean step a prompt rides) in seconds, at `x` prompts/s per
    prefill instance.
    Prompts arriving during a step are prefilled together in the next: k ~ Poisson(lam = x E[T]) of them
    (at least one; at most `most`), a step of k taking T(k), the busiest attention-DP rank's ceil(k / dp)
    prompts. A prompt rides a step size-biased by k, and one arriving while a step runs (chance 1 - e^-lam)
    waits out its rest, E[T^2] / 2 E[T]. Was: one prompt's step and no wait, so the default plan's 5x DP8
    prefill instances at 70 prompts/s each read 216 ms TTFT by estimate where simulation reads 507: its steps
    carry ~17 prompts (35,000 tokens) and take 193 ms (median) to 246 (mean), back to back."""
    dp = pre.parallel.dp_attention
    times = _rank_steps(pre, isl, most)
    guess = float(times[0])
    mean, rides, second = _step_moments(times, dp, x * guess, most)
    prev: tuple[float, float] | None = None  # secant steps on E[T](x m) - m (a plain iteration took ~8)
    for _ in range(ITERATIONS):
        gap = mean - guess
        if abs(gap) <= WAIT_TOLERANCE * mean:
            break
        nxt = mean
        if prev is not None and gap != prev[1]:
            secant = guess - gap * (guess - prev[0]) / (gap - prev[1])
            nxt = secant if secant > 0 else mean
        prev, guess = (guess, gap), nxt
        mean, rides, second = _step_moments(times, dp, x * guess, most)
    lam = x * guess
    busy = -math.expm1(-lam) if lam > 1e-9 else 0.0
    return busy * second / (2 * mean), rides


def _rank_steps(pre: Pool, isl: int, most: int) -> np.ndarray:
    """T(r): the prefill step whose busiest attention-DP rank holds r prompts (r = 1 .. ceil(most / dp)),
    each at most `most` prompts in all; memoized per instance (a plan prices ~30,000 waits)."""
    dp = pre.parallel.dp_attention
    top = max(1, math.ceil(most / dp))

    def make() -> np.ndarray:
        return np.array([prefill_step(pre, isl, min(r * dp, most))[0].time_s for r in range(1, top + 1)])

    return memo(pre.instance, ("rank_steps", isl, most), make)


def _step_moments(times: np.ndarray, dp: int, lam: float, most: int) -> tuple[float, float, float]:
    """(E[T], the size-biased E[T] a prompt rides, E[T^2]) of a prefill step holding k ~ Poisson(lam)
    prompts given k >= 1, at most `most` (a step takes `most`, the rest wait for the next). T depends on k
    only through the busiest rank's r = ceil(k / dp) prompts (`times[r - 1]`), so the counts are summed per r
    (Poisson CDF: P(a <= k <= b), and sum k p_k = lam P(a - 1 <= k <= b - 1)) over the r within 8 sd of lam.
    Each step's probability is its pmf terms summed (the recurrence across the window, in plain floats), the
    tails one scalar call each: a plan prices ~40,000 of these over windows of a few dozen counts, where array
    calls cost twice as much, and differences of CDF values lose a small lam's moments to cancellation (within
    3e-15 of a 50-digit sum on 1,500 random cases, lam 1e-8 to 300; CDF differences read up to 1.4e-8 off)."""
    if lam <= 1e-9:
        t = float(times[0])
        return t, t, t * t
    spread = 8 * math.sqrt(lam) + 10
    top = max(1, math.ceil(most / dp))
    r_lo = min(top, max(1, math.ceil((lam - spread) / dp)))
    r_hi = min(top, max(r_lo, math.ceil((lam + spread) / dp)))
    # k in [lo, hi] rides r's step; the tails ride the window's end steps (r_lo from k = 1, r_hi to infinity)
    k0, k_top = (0 if r_lo == 1 else (r_lo - 1) * dp - 1), r_hi * dp
    pmf, v = [], math.exp(k0 * math.log(lam) - lam - math.lgamma(k0 + 1))
    for k in range(k0, k_top + 1):  # P(K = k) across the window, by the recurrence
        pmf.append(v)
        v *= lam / (k + 1)
    below = float(pdtr(k0 - 1, lam)) if k0 > 0 else 0.0  # P(K < k0): 8 sd under lam, rides r_lo's step
    # P(K > k_top), riding r_hi's step: nil (8 sd over lam) unless the window stops at `most`
    above = float(pdtrc(k_top, lam)) if k_top < lam + spread else 0.0

    def mass(a: int, b: int) -> float:  # P(a <= K <= b) within the window, summed term by term (no cancellation)
        return sum(pmf[max(a, k0) - k0 : b - k0 + 1])

    w = mk = s1 = s2 = s3 = 0.0
    for r in range(r_lo, r_hi + 1):
        lo, hi = (1 if r == r_lo else (r - 1) * dp + 1), r * dp
        p, ks = mass(lo, hi), mass(lo - 1, hi - 1)
        if r == r_lo and k0 > 0:
            p, ks = p + max(below - math.exp(-lam), 0.0), ks + below
        if r == r_hi:
            p, ks = p + above, ks + pmf[-1] + above
        ks *= lam
        t = float(times[r - 1])
        w, mk, s1, s2, s3 = w + p, mk + ks, s1 + p * t, s2 + ks * t, s3 + p * t * t
    if w <= 0 or mk <= 0:
        last = float(times[r_hi - 1])
        return last, last, last * last
    return s1 / w, s2 / mk, s3 / w


def disaggregated(
    dep: Deployment, isl: int, osl: int, kv_len: float, b: float, seen: float = 1.0, seen_decode: float = 1.0
) -> Metrics:
    """`seen`: the share of the prefill pool's load a prompt meets from the others (`aggregated`);
    `seen_decode`: the share of a decode instance's batch a decoding request meets besides itself (`ridden`)."""
    pre, dec = dep.first("prefill"), dep.first("decode")
    assert pre is not None
    assert dec is not None
    step_pb, done = prefill_step(pre, isl)
    mu = pre.instances * done / step_pb.time_s  # prefill pool capacity, requests/s
    kv_bytes = isl * memory(dec).kv_bytes_per_token * dec.parallel.pp
    transfer = kv_transfer_time(dep.hardware, dep.same_domain, kv_bytes)

    def rides(v: float) -> float:  # the decode step a request rides at a mean batch v
        return decode_time(dec, ridden(dec, v, seen_decode, isl + osl), kv_len)

    tpot = rides(b) / tokens_per_step(dec)
    decode_s = max(osl - 1, 0) * tpot
    x = dec.instances * b / decode_s if decode_s > 0 else mu
    limit = ""
    if x >= 0.999 * mu:  # the prefill pool cannot feed this batch: it binds, and the batch is what
        x, limit = 0.999 * mu, "prefill pool at capacity"  # that rate keeps in flight
        if decode_s > 0:

            def rate_decode_s(v: float) -> float:
                return x * max(osl - 1, 0) * rides(v) / tokens_per_step(dec)

            b = _in_flight(rate_decode_s, b, dec.instances)
            tpot = rides(b) / tokens_per_step(dec)
            decode_s = max(osl - 1, 0) * tpot
    wait, steps_ridden = _prefill_wait(pre, isl, x * seen / pre.instances, done)
    ttft = steps_ridden + wait + md1_wait(x * seen / mu, 1 / mu) + handoff(dec, transfer, rides(b))
    m = Metrics("estimate", "disaggregated", dep.gpus, x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch, m.limit = x * isl, x * osl, b, limit
    # the breakdown shown is one prompt's step (a real step whose ops sum to its time); TTFT prices the steps ridden
    m.decode_step, m.prefill_step = decode_step(dec, b, kv_len), prefill_step(pre, isl, 1)[0]
    m.memory = {"prefill": memory(pre, kv_needed_tokens(pre.instance, "prefill", isl + osl)), "decode": memory(dec)}
    return m
