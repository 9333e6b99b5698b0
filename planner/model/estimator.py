"""The one steady-state model: TTFT, TPOT, E2E and throughput of a deployment, without simulating.

A deployment's operating point is parametrised by its mean decode batch per decode (or
aggregated) instance; `point` gives every figure at that batch:
- disaggregated: decode step -> TPOT (step / tokens per step, 1 + accepted MTP drafts); the
  decode pool's completion rate n b / ((osl - 1) TPOT) loads the prefill pool (M/D/1 wait at
  that load) and TTFT = one request's prefill + wait + the KV hand-off (`_handoff`: the transfer over
  the link and the decode steps the engine's hand-off waits for);
- aggregated (`planner.model.aggregated`): prefill-first (SGLang), prefill batches stall decoding;
  mixed (vLLM, TRT-LLM), decodes and prefill chunks share each step within the token budget. A
  saturated run of fixed output lengths prefills in full batches (`cohort_batches`).
Under Poisson arrivals (`point(poisson=True)`: a request rate, or a plan row verified at its rate)
requests also wait for a decode slot (`planner.model.queueing.slot_wait`, Erlang C); at the KV
capacity itself that wait has no steady state and the point is saturated.
`estimate` finds the batch the traffic implies: a closed loop of C requests in flight
(C = X (TTFT + decode time), Little's law), an open loop at a request rate, or, with neither, a
saturated run (as many requests in flight as the KV pool and the engine's running limit allow).
The planner's search calls `point` for the batches it sweeps and `estimate` for the traffic a
question gives; `planner estimate` calls `estimate`. It reports means; percentiles under real
arrivals come from the simulator.
"""

from __future__ import annotations

import math

from planner.model.aggregated import aggregated, cohort_batches
from planner.model.defaults import Resolved
from planner.model.deployment import Deployment, Pool
from planner.model.disaggregated import disaggregated
from planner.model.metrics import Metrics, add_request_overhead
from planner.model.queueing import md1_wait, slot_wait
from planner.model.solve import first_crossing
from planner.model.steps import (
    decode_capacity,
    decode_limit,
    decode_step,
    memory,
    prefill_step,
    tokens_per_step,
)
from roofline.errors import KVCacheCapacityError, PlannerError
from roofline.memory import kv_needed_tokens


def _decode_pool(dep: Deployment) -> Pool:
    pool = dep.first("decode") or dep.first("aggregated")
    if pool is None:
        raise PlannerError("deployment: an end-to-end estimate needs a decode or aggregated pool")
    return pool


RHO_ONE_TOKEN = 0.98  # the highest prefill utilization a one-token open loop is priced at below saturation


def max_batch(dep: Deployment, isl: int, osl: int) -> int:
    """Sequences one decode (or aggregated) instance can hold at full length."""
    return max(decode_capacity(_decode_pool(dep), isl + osl), 0)


def point(
    dep: Deployment,
    isl: int,
    osl: int,
    kv_len: float,
    batch: float,
    cohorts: bool = False,
    poisson: bool = False,
    clients: float | None = None,
) -> Metrics:
    """Every figure at a mean decode batch per instance (clipped to the KV capacity); `cohorts`:
    an aggregated instance's prompts come in full batches (`cohort_batches`), not Poisson.
    `poisson`: requests arrive independently (an open loop), so they also wait for a decode slot
    (`add_slot_wait`); a closed loop's clients never do while its requests fit. `clients`: a closed
    loop's requests in flight per instance (of the pool prompts enter): a request meets only the
    others' prompts, in the queue and in its decode steps, (clients - 1) / clients of the load by the
    arrival theorem's Bard-Schweitzer estimate (one client meets none: a 100,000-token prompt at
    concurrency 1 read TPOT 80 ms by estimate, each decode step priced as carrying another prompt,
    where the simulation, which has none to carry, read 25.5 ms; trial, eighteenth session)."""
    cap = max_batch(dep, isl, osl)
    if clients is not None and dep.first("aggregated") and clients > cap:
        clients = None  # more clients than KV slots: a queue refills each slot as it frees, as in a saturated run
    seen = 1.0 if clients is None else max(0.0, 1.0 - 1.0 / max(clients, 1.0))
    if cap < 1:
        raise KVCacheCapacityError(f"the KV pool holds no {isl + osl}-token sequence")
    b = min(max(batch, 1e-6), cap)

    dec = _decode_pool(dep)
    entry = dep.first("prefill") or dec
    # a decode instance's share of the closed loop's clients: those its request meets besides itself (`ridden`)
    seen_decode = seen if clients is None else max(0.0, 1.0 - dec.instances / max(clients * entry.instances, 1.0))

    def at(v: float) -> Metrics:
        if dep.first("aggregated"):
            return aggregated(dep, isl, osl, kv_len, v, cohorts, seen)
        return disaggregated(dep, isl, osl, kv_len, v, seen, seen_decode)

    m = at(b)
    if osl <= 1 and not cohorts:
        _one_token(dep, m, isl, b, at(cap).output_tok_s)
    add_request_overhead(m, request_overhead_s(dep), osl)
    m.one_token = osl <= 1
    if poisson:
        add_slot_wait(m, dec.instances, cap, b, osl)
    if (b >= cap or m.saturated) and not m.limit:  # what the slots are: the KV pool or the running-request limit
        m.limit = decode_limit(dec, isl + osl)
    return m


def _one_token(dep: Deployment, m: Metrics, isl: int, b: float, saturated_req_s: float) -> None:
    """One-token answers at `b` requests in flight per instance: the request lives only through its
    prefill, so there is no decode batch to set the load. A prompt alone takes its prefill's steps, T0;
    under load an M/D/1 queue with service 1 / x_max: x (T0 + Wq(x / x_max)) = b (Little's law), solved
    for x. A `planner estimate` at 5 req/s of 2,000-token prompts read 506 in flight and 12 s of TTFT
    (the saturated point) where its simulation reads 50 ms (trial, fifteenth session). x_max is the
    pool's saturated prefill throughput (`saturated_req_s`, at its full KV pool: prompts batched to the
    token budget), not the throughput at `b`, which grows with the batch: 20 req/s on two instances of
    11.8 req/s each had read 23.7 req/s served at 155 in flight (trial, twenty-first session). Beyond
    the M/D/1's reach (RHO_ONE_TOKEN) the prefill serves that much and the rest queue (Little's law: TTFT =
    b / x, continuous with the M/D/1 branch, so a rate above it is saturated, not served: review). `b` is per
    instance of the pool that holds the requests (a disaggregated deployment's decode pool), spread over the
    prefill instances here."""
    pool = dep.first("prefill") or dep.first("aggregated")
    n = pool.instances if pool is not None else 1
    x_max = saturated_req_s / max(n, 1)  # one output token per request
    if pool is None or x_max <= 0:
        return
    b = b * _decode_pool(dep).instances / max(n, 1)  # in flight per prefill instance
    t0 = prefill_step(pool, isl, 1)[0].time_s

    def held(x: float) -> float:
        return x * (t0 + md1_wait(x / x_max, 1 / x_max))

    top = RHO_ONE_TOKEN * x_max
    limit = ""
    if held(top) <= b:  # as loaded as the prefill can be: the rest queue
        x, ttft, limit = top, b / top, "prefill pool at capacity"
    else:
        lo, hi = 0.0, top
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if held(mid) < b else (lo, mid)
        x = hi
        ttft = held(x) / x if x > 0 else t0
    m.ttft_s = m.e2e_s = ttft
    m.concurrency = n * x * ttft
    m.input_tok_s, m.output_tok_s = n * x * isl, n * x
    m.decode_batch = 0.0
    m.limit = limit


def add_slot_wait(m: Metrics, instances: int, slots: int, busy: float, osl: int) -> None:
    """The wait of a Poisson arrival for a decode slot (`planner.model.queueing.slot_wait`): an instance
    holds at most `slots` sequences (`max_batch`), `busy` of them on average, each for busy / (the
    requests/s it completes) (Little's law). It lengthens TTFT and E2E and counts the waiting
    requests as in flight. At `busy` = `slots` the queue has no steady state: the point is saturated."""
    per_instance = m.output_tok_s / max(osl, 1) / max(instances, 1)
    if per_instance <= 0:
        return
    wait = slot_wait(slots, busy, busy / per_instance)
    if math.isinf(wait):
        m.saturated = True  # (`point` names the limit: `decode_limit`)
        return
    m.ttft_s += wait
    m.e2e_s += wait
    m.concurrency += wait * per_instance * instances


def request_overhead_s(dep: Deployment) -> float:
    """The serving path of the pool a request enters first (prefill, else aggregated); a
    decode-only deployment takes prompts already prefilled, past the serving path."""
    pool = dep.first("prefill") or dep.first("aggregated")
    return pool.instance.runtime.request_overhead_s if pool else 0.0


FLAT = 0.05  # throughput within this share above a rate: the batch there carries the rate about as well
PLATEAU_STEP = 1.25  # the batches past the first that carries a rate, a quarter apart, scanned for a flat throughput
PLATEAU = 1.5  # a batch half again as large carrying the rate within FLAT: the batch is not pinned by the rate


def batches_carrying(dep: Deployment, isl: int, osl: int, kv_len: float, rate: float) -> tuple[float, float] | None:
    """(the first decode batch per instance that carries `rate` (req/s, the deployment's), the last batch past it
    whose throughput stays within FLAT of the rate, scanned a quarter apart up to the KV cap). Where the two differ
    by half or more (PLATEAU, `unpinned`) the instance's throughput is flat there (a prefill-first
    step or a token budget fixes its tokens/s whatever the batch): an open loop's batch is not pinned by the rate
    but wanders over that range, and TPOT with it (trial, twenty-first session: Llama-3.1-8B on H100 at 50 req/s of
    500/300 tokens, batch 492 and TPOT 33 ms by estimate, 768 carries 51.8 req/s; simulated, the batch settled near
    1,210 at 80 ms). None at a rate the instance does not carry."""
    cap = max_batch(dep, isl, osl)
    served = lambda v: point(dep, isl, osl, kv_len, v).output_tok_s / max(osl, 1)  # noqa: E731
    first = first_crossing(served, rate, cap)
    if first is None:
        return None
    last, g = first, first * PLATEAU_STEP
    while g < cap:
        if served(g) > rate * (1 + FLAT):
            return first, last
        last, g = g, g * PLATEAU_STEP
    return first, float(cap) if served(cap) <= rate * (1 + FLAT) else last


def unpinned(dep: Deployment, isl: int, osl: int, kv_len: float, rate: float) -> tuple[float, float] | None:
    """`batches_carrying` where the batch is not pinned by the rate (the last at least PLATEAU x the first), else
    None: the one rule `planner estimate`'s caveat and the plan's note on estimate rows read."""
    span = batches_carrying(dep, isl, osl, kv_len, rate)
    return span if span is not None and span[1] >= PLATEAU * span[0] else None


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
        b = first_crossing(lambda v: point(dep, isl, osl, kv_len, v).output_tok_s / osl, rate, cap)
        m = point(dep, isl, osl, kv_len, cap if b is None else b, poisson=True)
        if b is None or (m.limit and m.output_tok_s / osl < rate * 0.999):
            m.saturated = True
            m.limit = m.limit or decode_limit(_decode_pool(dep), isl + osl)
        return m
    assert concurrency is not None
    entry = dep.first("prefill") or dep.first("aggregated")  # the pool whose queue a prompt joins
    clients = concurrency / entry.instances if entry is not None else None
    b = first_crossing(lambda v: point(dep, isl, osl, kv_len, v, clients=clients).concurrency, concurrency, cap)
    m = point(dep, isl, osl, kv_len, cap if b is None else b, clients=clients)
    if b is None or m.concurrency < concurrency * 0.999:  # the excess waits for a KV slot or for prefill
        served = m.output_tok_s / osl
        decode_s = m.e2e_s - m.ttft_s
        m.ttft_s = max(m.ttft_s, concurrency / served - decode_s)
        m.e2e_s = m.ttft_s + decode_s
        m.concurrency = concurrency
    return m


def estimate_prefill(res: Resolved) -> Metrics:
    pool = res.pool("prefill", "aggregated")
    step, n = prefill_step(pool, res.isl)
    rate = pool.instances * n / step.time_s
    m = Metrics("estimate", "prefill", pool.gpus, float(n * pool.instances), ttft_s=step.time_s)
    m.input_tok_s, m.prefill_step, m.assumed = rate * res.isl, step, list(res.assumed) + _one_phase(pool, "prefill")
    m.memory["prefill"] = memory(pool, kv_needed_tokens(pool.instance, "prefill", res.isl))
    return m


def _one_phase(pool: Pool, phase: str) -> list[str]:
    """The note a one-phase estimate of an aggregated pool carries: its steps priced alone."""
    if pool.role != "aggregated":
        return []
    other = "decodes" if phase == "prefill" else "prefill chunks"
    return [f"phase: {phase} of an aggregated pool prices its {phase} steps alone (no {other} share them)"]


def estimate_decode(res: Resolved, concurrency: float | None = None) -> Metrics:
    pool = res.pool("decode", "aggregated")
    conc = concurrency if concurrency is not None else res.concurrency
    # each request's whole length, reserved at admission as the simulator does (at least the stated mean context:
    # DeepSeek's day-6 decode states 4,989 tokens in flight beside shorter stated lengths)
    full = max(res.isl + res.osl, math.ceil(res.kv_len))
    cap = decode_capacity(pool, full)
    assumed = list(res.assumed) + _one_phase(pool, "decode")
    if conc is None:
        conc = float(cap * pool.instances)
        assumed.append(f"decode batch: {cap:,} per instance (fills the KV pool at {full:,} tokens a request)")
    batch = conc / pool.instances
    if batch > (held := decode_capacity(pool, res.kv_len)):
        raise KVCacheCapacityError(
            f"decode batch {batch:.0f} per instance exceeds KV capacity {held} at {res.kv_len:.0f} tokens"
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
