"""Stage 1 of the search: score every candidate with the step-cost model, fast.

For each candidate the decode batch per instance is swept over powers of two up to the KV
capacity. Disaggregated: the decode step gives TPOT and the request rate one decode instance
sustains; the prefill instance's capacity (a full token-budget step) sets how many prefill
instances each decode instance needs at 80% utilisation, and TTFT is one request's prefill,
its M/D/1 wait and the KV transfer. Aggregated: the same fixed point as the estimator (prefill
batches stall decode). Each operating point is then sized to the GPU budget in whole instances.
Step costs are memoized per (instance, batch), so candidates that share a pool share its work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

from planner.question import Question
from planner.space import Candidate, Layout, instance
from roofline.batch import StepBatch
from roofline.catalog import get_hardware, get_model
from roofline.comm import kv_transfer_time
from roofline.deployment import InstanceSpec
from roofline.memory import plan_memory
from roofline.precision import PrecisionMix
from roofline.step import CATEGORIES, step_cost

PREFILL_UTILISATION = 0.8  # target load of the prefill pool (keeps the M/D/1 wait about 2x service)
PREFILL_TOKENS_PER_RANK = 16384


@dataclass(slots=True)
class Point:
    """One operating point of a candidate, sized to whole instances within the budget."""

    batch: int  # decode sequences per decode (or aggregated) instance
    ttft_s: float
    tpot_s: float
    e2e_s: float
    out_tok_s_per_gpu: float
    out_tok_s_per_user: float
    gpus: int
    decode_instances: int
    prefill_instances: int
    out_tok_s: float
    bottleneck: str
    meets: bool = False
    slack: dict[str, float] = field(default_factory=dict)  # target / predicted per SLO (>= 1 meets)


@dataclass(slots=True)
class Scored:
    cand: Candidate
    points: list[Point]
    best: Point | None = None


def _inst(q: Question, lay: Layout, prec: PrecisionMix, mtp: bool, frac: float, role: str) -> InstanceSpec:
    return _inst_cached(q.model, q.hardware, q.engine, lay, prec, mtp, frac, role)


@cache
def _inst_cached(
    model: str, hw: str, engine: str, lay: Layout, prec: PrecisionMix, mtp: bool, frac: float, role: str
) -> InstanceSpec:
    return instance(engine, get_model(model), get_hardware(hw), lay, prec, mtp, frac, role)


# Step caches keyed by the instance's identity: `_inst_cached` keeps every instance alive, and an
# InstanceSpec (which holds the hardware's source notes) is not hashable itself.
_DECODE: dict[tuple[int, int, float], tuple[float, str]] = {}
_PREFILL: dict[tuple[int, int, int], float] = {}
_CAPACITY: dict[tuple[int, int], int] = {}


def _decode(inst: InstanceSpec, batch: int, kv_len: float) -> tuple[float, str]:
    key = (id(inst), batch, kv_len)
    if key not in _DECODE:
        drafts = inst.mtp.draft_tokens if inst.mtp else 0
        c = step_cost(inst, StepBatch.decode(batch, kv_len, drafts))
        cats = c.by_category()
        _DECODE[key] = (c.time_s, max(CATEGORIES, key=lambda k: cats[k]))
    return _DECODE[key]


def _prefill(inst: InstanceSpec, isl: int, per_rank: int) -> float:
    key = (id(inst), isl, per_rank)
    if key not in _PREFILL:
        _PREFILL[key] = _prefill_time(inst, isl, per_rank)
    return _PREFILL[key]


def _prefill_time(inst: InstanceSpec, isl: int, per_rank: int) -> float:
    dp = inst.parallel.dp_attention
    plan = plan_memory(inst, kv_needed_tokens=2 * per_rank * isl)
    if isl <= PREFILL_TOKENS_PER_RANK:
        return step_cost(inst, StepBatch.prefill([(isl, 0)] * per_rank * dp), plan.offloaded_bytes).time_s
    chunks = [(min(PREFILL_TOKENS_PER_RANK, isl - s), s) for s in range(0, isl, PREFILL_TOKENS_PER_RANK)]
    return sum(step_cost(inst, StepBatch.prefill([c] * dp), plan.offloaded_bytes).time_s for c in chunks)


def _capacity(inst: InstanceSpec, ctx: int) -> int:
    key = (id(inst), ctx)
    if key not in _CAPACITY:
        _CAPACITY[key] = plan_memory(inst).max_seqs(ctx) * inst.parallel.dp_attention
    return _CAPACITY[key]


def _slack(q: Question, ttft: float, tpot: float, e2e: float) -> dict[str, float]:
    got = {"ttft_p90_ms": ttft * 1e3, "tpot_p90_ms": tpot * 1e3, "e2e_p90_ms": e2e * 1e3}
    return {k: v / got[k] for k, v in q.slo.targets().items()}


@dataclass(slots=True)
class Unit:
    """One decode (or aggregated) instance with its share of prefill instances."""

    ttft_s: float
    tpot_s: float
    rate: float  # requests/s the unit completes
    gpus_per_decode: int
    prefill_per_decode: float  # prefill instances per decode instance (0 for aggregated)
    gpus_per_prefill: int
    bottleneck: str


def _disagg_unit(q: Question, c: Candidate, batch: int) -> Unit:
    assert c.prefill is not None
    dec = _inst(q, c.decode, c.precision, c.mtp, c.mem_fraction, "decode")
    pre = _inst(q, c.prefill, c.precision, False, c.mem_fraction, "prefill")
    t_d, neck = _decode(dec, batch, q.isl + q.osl / 2)
    tpot = t_d / (dec.mtp.tokens_per_step if dec.mtp else 1.0)
    x_dec = batch / max((q.osl - 1) * tpot, 1e-9)  # requests/s one decode instance finishes
    per_rank = max(1, PREFILL_TOKENS_PER_RANK // q.isl)
    mu = per_rank * pre.parallel.dp_attention / _prefill(pre, q.isl, per_rank)  # one prefill instance
    kv_bytes = q.isl * plan_memory(dec).kv_bytes_per_token * dec.parallel.pp
    hw = dec.hardware
    transfer = kv_transfer_time(hw, c.decode.gpus + c.prefill.gpus <= hw.scaleup.domain_gpus, kv_bytes)
    rho = PREFILL_UTILISATION
    ttft = _prefill(pre, q.isl, 1) + rho / (2 * mu * (1 - rho)) + transfer  # M/D/1 wait at target load
    return Unit(ttft, tpot, x_dec, c.decode.gpus, x_dec / (mu * rho), c.prefill.gpus, neck)


def _agg_unit(q: Question, c: Candidate, batch: int) -> Unit:
    inst = _inst(q, c.decode, c.precision, c.mtp, c.mem_fraction, "aggregated")
    tps = inst.mtp.tokens_per_step if inst.mtp else 1.0
    t_d, neck = _decode(inst, batch, q.isl + q.osl / 2)
    max_nb = max(1, PREFILL_TOKENS_PER_RANK * inst.parallel.dp_attention // q.isl)
    x, t_p, ttft, tpot, rho = 0.0, 0.0, 0.0, t_d / tps, 0.0
    for _ in range(30):  # the fixed point of planner.estimator.estimate_aggregated
        lam = x * (t_d + t_p)
        nb = max(1, min(round(lam / -math.expm1(-lam)) if lam > 1e-9 else 1, max_nb))
        t_step = _prefill(inst, q.isl, max(1, math.ceil(nb / inst.parallel.dp_attention)))
        t_p = t_step * (-math.expm1(-lam) if lam > 1e-9 else 0.0)
        rho = min(x * t_step / nb, 0.95)
        tpot = t_d / tps / (1 - rho)
        ttft = t_step + (t_d / 2 if batch > 1 else 0.0)
        x = batch / (ttft + (q.osl - 1) * tpot)
    return Unit(ttft, tpot, x, c.decode.gpus, 0.0, 0, "prefill" if rho >= 0.5 else neck)


def size(q: Question, u: Unit, batch: int) -> Point | None:
    """Whole instances for the question: fill the budget, or the fewest that serve its traffic."""

    def gpus(n_d: int) -> tuple[int, int]:
        n_p = math.ceil(n_d * u.prefill_per_decode - 1e-9) if u.prefill_per_decode else 0
        return n_d * u.gpus_per_decode + n_p * u.gpus_per_prefill, n_p

    if q.rate is not None:
        n_d = max(1, math.ceil(q.rate / u.rate - 1e-9))
    elif q.concurrency is not None:
        n_d = max(1, math.ceil(q.concurrency / batch))
    else:
        n_d = max(1, int(q.budget / (u.gpus_per_decode + u.gpus_per_prefill * u.prefill_per_decode)))
        while n_d > 1 and gpus(n_d)[0] > q.budget:
            n_d -= 1
    total, n_p = gpus(n_d)
    if total > q.budget:
        return None
    served = q.rate if q.rate is not None else n_d * u.rate  # requests/s
    out = served * q.osl
    e2e = u.ttft_s + (q.osl - 1) * u.tpot_s
    return Point(batch, u.ttft_s, u.tpot_s, e2e, out / total, 1 / u.tpot_s, total, n_d, n_p, out, u.bottleneck)


def score(q: Question, c: Candidate) -> Scored:
    """Every operating point of one candidate; `best` is the highest tok/s/GPU meeting the SLO."""
    role = "aggregated" if c.mode == "aggregated" else "decode"
    cap = _capacity(_inst(q, c.decode, c.precision, c.mtp, c.mem_fraction, role), q.isl + q.osl)
    batches = sorted({min(2**k, cap) for k in range(0, 15) if 2 ** (k - 1) < cap})
    points = []
    for b in batches:
        p = size(q, _disagg_unit(q, c, b) if c.prefill else _agg_unit(q, c, b), b)
        if p is None:
            continue
        p.slack = _slack(q, p.ttft_s, p.tpot_s, p.e2e_s)
        p.meets = all(v >= 1 for v in p.slack.values())
        points.append(p)
    s = Scored(c, points)
    ok = [p for p in points if p.meets]
    if ok:
        s.best = max(ok, key=lambda p: p.out_tok_s_per_gpu)
    return s


def score_many(q: Question, cands: list[Candidate]) -> list[Scored]:
    return [score(q, c) for c in cands]
