"""Steady-state estimator: TTFT, TPOT, E2E and throughput of a deployment, without simulating.

Closed loop (fixed concurrency) and open loop (request rate) are solved as fixed points of
Little's law over the step-cost model:
- prefill pool: whole requests batched up to the token budget per attention-DP rank;
- decode pool: continuous batching; TPOT = step time / tokens per step (1 + accepted MTP drafts);
- aggregated: SGLang-style separate prefill batches stall decoding, so TPOT stretches by
  1 / (1 - prefill utilisation);
- disaggregated: prefill queueing (M/D/1 wait) + KV transfer over the link -> TTFT, decode
  batch -> TPOT.
It reports means; percentiles under real arrivals come from the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.defaults import Pool, Resolved
from roofline.batch import StepBatch
from roofline.comm import kv_transfer_time
from roofline.errors import KVCacheCapacityError
from roofline.memory import MemoryPlan, plan_memory
from roofline.step import StepCost, step_cost


@dataclass(slots=True)
class Estimate:
    mode: str
    gpus: int
    concurrency: float
    ttft_s: float = 0.0
    tpot_s: float = 0.0
    e2e_s: float = 0.0
    input_tok_s: float = 0.0
    output_tok_s: float = 0.0
    decode_batch: float = 0.0  # sequences per decode (or aggregated) instance
    decode_step: StepCost | None = None
    prefill_step: StepCost | None = None
    memory: dict[str, MemoryPlan] = field(default_factory=dict)
    saturated: bool = False  # open loop: the offered rate exceeds what the deployment serves
    limit: str = ""  # the resource that binds, if any (e.g. "prefill pool at capacity")
    assumed: list[str] = field(default_factory=list)

    @property
    def output_tok_s_per_gpu(self) -> float:
        return self.output_tok_s / self.gpus

    @property
    def input_tok_s_per_gpu(self) -> float:
        return self.input_tok_s / self.gpus

    @property
    def total_tok_s_per_gpu(self) -> float:
        return (self.input_tok_s + self.output_tok_s) / self.gpus

    @property
    def output_tok_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s else 0.0


def _tps(pool: Pool) -> float:
    return pool.instance.mtp.tokens_per_step if pool.instance.mtp else 1.0


def _drafts(pool: Pool) -> int:
    return pool.instance.mtp.draft_tokens if pool.instance.mtp else 0


def decode_memory(pool: Pool) -> MemoryPlan:
    return plan_memory(pool.instance)


def decode_capacity(pool: Pool, ctx: float) -> int:
    """Sequences of `ctx` tokens one instance holds (all its attention-DP groups)."""
    return decode_memory(pool).max_seqs(ctx) * pool.instance.parallel.dp_attention


def decode_step(pool: Pool, batch: float, kv_len: float) -> StepCost:
    """One decode step of one instance at `batch` sequences; with pp, the batch is split into
    pp micro-batches and the step is the pipeline latency of one of them x pp stages."""
    inst = pool.instance
    pp = inst.parallel.pp
    seqs = max(1, math.ceil(batch / pp))
    cost = step_cost(inst, StepBatch.decode(seqs, kv_len, _drafts(pool)))
    if pp == 1:
        return cost
    return StepCost(
        cost.stage_time_s * pp + (cost.time_s - cost.stage_time_s * pp) / pp,
        cost.stage_time_s,
        cost.ops,
        cost.tokens * pp,
        cost.hidden_comm_s,
        cost.notes,
    )


def prefill_step(pool: Pool, isl: int, budget: int, n_requests: int | None = None) -> tuple[StepCost, int]:
    """A prefill step of whole requests, up to `budget` tokens per attention-DP rank; returns the
    step and the number of requests it completes. Requests longer than the budget are chunked."""
    dp = pool.instance.parallel.dp_attention
    per_rank = max(1, budget // isl) if isl <= budget else 1
    if n_requests is not None:
        per_rank = max(1, min(per_rank, math.ceil(n_requests / dp)))
    if isl <= budget:
        chunks = [(isl, 0)] * (per_rank * dp)
        mem = plan_memory(pool.instance, kv_needed_tokens=2 * per_rank * isl)
        off = mem.offloaded_bytes
        return step_cost(pool.instance, StepBatch.prefill(chunks), off), per_rank * dp
    mem = plan_memory(pool.instance, kv_needed_tokens=2 * isl)
    total, parts, prefix = 0.0, [], 0
    while prefix < isl:
        n = min(budget, isl - prefix)
        c = step_cost(pool.instance, StepBatch.prefill([(n, prefix)] * dp), mem.offloaded_bytes)
        total += c.time_s
        parts.append(c)
        prefix += n
    last = parts[-1]
    return StepCost(total, total, last.ops, isl * dp, last.hidden_comm_s, last.notes), dp


def estimate_prefill(res: Resolved) -> Estimate:
    pool = res.pools.get("prefill") or res.pools["aggregated"]
    step, n = prefill_step(pool, res.isl, res.max_prefill_tokens)
    rate = pool.spec.instances * n / step.time_s
    est = Estimate(
        "prefill",
        pool.spec.gpus,
        float(n * pool.spec.instances),
        ttft_s=step.time_s,
        input_tok_s=rate * res.isl,
        prefill_step=step,
        assumed=list(res.assumed),
    )
    est.memory["prefill"] = plan_memory(pool.instance, kv_needed_tokens=2 * res.max_prefill_tokens)
    return est


def estimate_decode(res: Resolved, concurrency: float | None = None) -> Estimate:
    pool = res.pools.get("decode") or res.pools["aggregated"]
    conc = concurrency if concurrency is not None else res.concurrency
    cap = decode_capacity(pool, res.kv_len)
    assumed = list(res.assumed)
    if conc is None:
        conc = float(cap * pool.spec.instances)
        assumed.append(f"decode batch: {cap} per instance (fills the KV pool at {res.kv_len:.0f} tokens)")
    batch = conc / pool.spec.instances
    if batch > cap:
        raise KVCacheCapacityError(
            f"decode batch {batch:.0f} per instance exceeds KV capacity {cap} at {res.kv_len:.0f} tokens"
        )
    step = decode_step(pool, batch, res.kv_len)
    tpot = step.time_s / _tps(pool)
    est = Estimate(
        "decode",
        pool.spec.gpus,
        conc,
        tpot_s=tpot,
        output_tok_s=conc / tpot,
        decode_batch=batch,
        decode_step=step,
        assumed=assumed,
    )
    est.memory["decode"] = decode_memory(pool)
    return est


def _mdl_wait(rho: float, service_s: float) -> float:
    """Mean M/D/1 queueing delay."""
    return math.inf if rho >= 1 else rho * service_s / (2 * (1 - rho))


def estimate_aggregated(res: Resolved, concurrency: float | None = None) -> Estimate:
    pool = res.pools["aggregated"]
    inst_n = pool.spec.instances
    conc = concurrency if concurrency is not None else res.concurrency
    if conc is None and res.request_rate is None:
        conc = 1.0
    c = (conc or 0.0) / inst_n
    budget = res.max_prefill_tokens
    cap = decode_capacity(pool, res.isl + res.osl)
    x = (res.request_rate / inst_n) if res.request_rate else 0.0
    b_dec, ttft, tpot, rho, step_d = max(c, 1.0), 0.0, 0.0, 0.0, None
    step_p: StepCost | None = None
    t_d = t_p = 0.0
    max_nb = max(1, budget // max(res.isl, 1))
    for _ in range(80):
        # Requests arriving during a scheduling cycle (a decode step, plus a prefill step when any
        # are waiting) are prefilled together: Poisson with mean lam, so a prefill that happens
        # holds lam / (1 - e^-lam) of them on average.
        lam = x * (t_d + t_p)
        nb_mean = lam / -math.expm1(-lam) if lam > 1e-9 else 1.0
        nb = max(1, min(round(nb_mean), max_nb))
        step_p, done = prefill_step(pool, res.isl, budget, nb)
        t_p = step_p.time_s * -math.expm1(-lam) if lam > 1e-9 else 0.0  # prefill time per cycle
        per_req = step_p.time_s / done
        step_d = decode_step(pool, max(min(b_dec, cap), 1.0), res.kv_len)
        t_d = step_d.time_s
        rho = min(x * per_req, 0.95) if x else 0.0
        wait = t_d / 2 if c > 1 or res.request_rate else 0.0  # residual of the step in progress
        ttft_min = step_p.time_s + wait + (_mdl_wait(rho, per_req) if res.request_rate else 0.0)
        tpot = t_d / _tps(pool) / (1 - rho)
        decode_s = (res.osl - 1) * tpot
        if res.request_rate:
            ttft = ttft_min
            b_dec = 0.5 * b_dec + 0.5 * max(min(x * decode_s, cap), 1.0)
        else:  # Little's law over the loop; beyond KV capacity the excess waits for admission
            x_new = min(c / (ttft_min + decode_s), cap / decode_s) if decode_s > 0 else c / ttft_min
            x = 0.5 * x + 0.5 * x_new if x else x_new
            ttft = max(ttft_min, c / x - decode_s)
            b_dec = max(min(x * decode_s, cap), 1.0)
    assert step_d is not None
    e2e = ttft + (res.osl - 1) * tpot
    total_x = x * inst_n
    limit = "decode KV capacity" if b_dec >= 0.99 * cap else ("prefill stalls decode" if rho >= 0.95 else "")
    est = Estimate(
        "aggregated",
        pool.spec.gpus,
        conc or total_x * e2e,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        input_tok_s=total_x * res.isl,
        output_tok_s=total_x * res.osl,
        decode_batch=b_dec,
        decode_step=step_d,
        prefill_step=step_p,
        assumed=list(res.assumed),
        saturated=bool(limit) and res.request_rate is not None,
        limit=limit,
    )
    est.memory["aggregated"] = decode_memory(pool)
    return est


def estimate_disaggregated(res: Resolved, concurrency: float | None = None) -> Estimate:
    pre, dec = res.pools["prefill"], res.pools["decode"]
    conc = concurrency if concurrency is not None else res.concurrency
    budget = res.max_prefill_tokens
    step_p1, _ = prefill_step(pre, res.isl, budget, 1)
    step_pb, done = prefill_step(pre, res.isl, budget)
    mu = pre.spec.instances * done / step_pb.time_s  # prefill pool capacity, requests/s
    kv_bytes = res.isl * plan_memory(dec.instance).kv_bytes_per_token
    same = res.gpus <= res.hardware.scaleup.domain_gpus
    transfer = kv_transfer_time(res.hardware, same, kv_bytes)
    cap = decode_capacity(dec, res.isl + res.osl) * dec.spec.instances
    n_dec = dec.spec.instances
    closed = res.request_rate is None
    c = conc if conc is not None else 1.0
    x = res.request_rate or min(mu, c / (step_p1.time_s + res.osl * 0.01))
    b_tot, tpot, ttft, step_d = max(c, 1.0), 0.0, 0.0, None
    for _ in range(80):
        step_d = decode_step(dec, max(min(b_tot, cap) / n_dec, 1.0), res.kv_len)
        tpot = step_d.time_s / _tps(dec)
        decode_s = (res.osl - 1) * tpot
        rho = min(x / mu, 0.999)
        ttft_min = step_p1.time_s + _mdl_wait(rho, 1 / mu) + transfer
        if closed:  # Little's law over the whole loop: C = X (TTFT + decode time)
            x_new = min(c / (ttft_min + decode_s), mu)
            x = 0.5 * x + 0.5 * x_new
            ttft = max(ttft_min, c / x - decode_s)
        else:
            ttft = ttft_min
        b_tot = 0.5 * b_tot + 0.5 * max(x * decode_s, 1.0)
    assert step_d is not None
    e2e = ttft + (res.osl - 1) * tpot
    limit = ""
    if x >= 0.98 * mu:
        limit = "prefill pool at capacity" if closed else "request rate exceeds prefill capacity"
    elif b_tot >= cap:
        limit = "decode KV capacity"
    est = Estimate(
        "disaggregated",
        res.gpus,
        c if closed else x * e2e,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        input_tok_s=x * res.isl,
        output_tok_s=x * res.osl,
        decode_batch=b_tot / n_dec,
        decode_step=step_d,
        prefill_step=step_p1,
        assumed=list(res.assumed),
        saturated=bool(limit) and not closed,
        limit=limit,
    )
    est.memory["prefill"] = plan_memory(pre.instance, kv_needed_tokens=2 * budget)
    est.memory["decode"] = decode_memory(dec)
    return est


def estimate(res: Resolved, concurrency: float | None = None) -> Estimate:
    """The estimate the scenario's phase and deployment call for."""
    s = res.scenario
    if s.phase == "prefill":
        return estimate_prefill(res)
    if s.phase == "decode":
        return estimate_decode(res, concurrency)
    if "aggregated" in res.pools:
        return estimate_aggregated(res, concurrency)
    return estimate_disaggregated(res, concurrency)


def max_users_at_slo(
    res: Resolved, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None, limit: int = 4096
) -> tuple[int, Estimate | None]:
    """Largest total concurrency whose mean TTFT/TPOT/E2E meet the targets (0 if none does)."""

    def ok(c: int) -> tuple[bool, Estimate]:
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
