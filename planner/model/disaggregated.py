"""The estimator's disaggregated steady state (planner.model.estimator calls it): a decode pool at a
mean batch b per instance feeds a prefill pool (an M/D/1 queue at the rate the decode pool completes
requests), and the first token comes after the prefill, its wait and the KV hand-off to decode.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.model.deployment import Deployment, Pool
from planner.model.metrics import Metrics
from planner.model.queueing import md1_wait
from planner.model.steps import decode_step, decode_time, memory, prefill_step, tokens_per_step
from roofline.comm import kv_transfer_time
from roofline.memory import kv_needed_tokens

ITERATIONS = 60


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


def disaggregated(dep: Deployment, isl: int, osl: int, kv_len: float, b: float) -> Metrics:
    pre, dec = dep.first("prefill"), dep.first("decode")
    assert pre is not None
    assert dec is not None
    step_p1, _ = prefill_step(pre, isl, 1)
    step_pb, done = prefill_step(pre, isl)
    mu = pre.instances * done / step_pb.time_s  # prefill pool capacity, requests/s
    kv_bytes = isl * memory(dec).kv_bytes_per_token * dec.parallel.pp
    transfer = kv_transfer_time(dep.hardware, dep.same_domain, kv_bytes)
    tpot = decode_time(dec, b, kv_len) / tokens_per_step(dec)
    decode_s = max(osl - 1, 0) * tpot
    x = dec.instances * b / decode_s if decode_s > 0 else mu
    limit = ""
    if x >= 0.999 * mu:  # the prefill pool cannot feed this batch: it binds, and the batch is what
        x, limit = 0.999 * mu, "prefill pool at capacity"  # that rate keeps in flight
        if decode_s > 0:

            def rate_decode_s(v: float) -> float:
                return x * max(osl - 1, 0) * decode_time(dec, v, kv_len) / tokens_per_step(dec)

            b = _in_flight(rate_decode_s, b, dec.instances)
            tpot = decode_time(dec, b, kv_len) / tokens_per_step(dec)
            decode_s = max(osl - 1, 0) * tpot
    ttft = step_p1.time_s + md1_wait(x / mu, 1 / mu) + handoff(dec, transfer, decode_time(dec, b, kv_len))
    m = Metrics("estimate", "disaggregated", dep.gpus, x * (ttft + decode_s), ttft, tpot, ttft + decode_s)
    m.input_tok_s, m.output_tok_s, m.decode_batch, m.limit = x * isl, x * osl, b, limit
    m.decode_step, m.prefill_step = decode_step(dec, b, kv_len), step_p1
    m.memory = {"prefill": memory(pre, kv_needed_tokens(pre.instance, "prefill", isl + osl)), "decode": memory(dec)}
    return m
