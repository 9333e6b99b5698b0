"""Step costs of a pool's instance for the steady-state model, memoized.

Decode steps at an integer batch, prefill steps of whole (or chunked) prompts up to the
engine's token budget, and KV capacity, all from `roofline.step.step_cost` and
`roofline.memory.plan_memory`. Caches are keyed by the instance object (kept alive alongside)
and the batch shape, so a search that prices one instance at many operating points pays once.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from planner.model.deployment import Pool
from roofline.batch import StepBatch
from roofline.deployment import InstanceSpec
from roofline.memory import MemoryPlan, plan_memory
from roofline.pipeline import pipelined
from roofline.step import OpTime, StepCost, step_cost

_CACHE: dict[tuple[Any, ...], Any] = {}
_KEEP: dict[int, InstanceSpec] = {}  # holds each keyed instance so its id() is never reused
MAX_ENTRIES = 400_000


def memo(inst: InstanceSpec, key: tuple[Any, ...], make: Any) -> Any:
    full = (id(inst), *key)
    hit = _CACHE.get(full)
    if hit is None:
        if len(_CACHE) > MAX_ENTRIES:
            _CACHE.clear()
            _KEEP.clear()
        _KEEP[id(inst)] = inst
        hit = _CACHE[full] = make()
    return hit


def drafts(pool: Pool) -> int:
    return pool.instance.mtp.draft_tokens if pool.instance.mtp else 0


def tokens_per_step(pool: Pool) -> float:
    return pool.instance.mtp.tokens_per_step if pool.instance.mtp else 1.0


def memory(pool: Pool, kv_tokens: float = 0.0) -> MemoryPlan:
    inst = pool.instance
    return memo(inst, ("mem", kv_tokens), lambda: plan_memory(inst, kv_needed_tokens=kv_tokens))


def decode_capacity(pool: Pool, ctx: float) -> int:
    """Sequences of `ctx` tokens one instance holds (all its attention-DP groups), capped by the
    engine's running-request limit per rank."""
    return _capacity(pool, ctx)[0]


def _capacity(pool: Pool, ctx: float) -> tuple[int, bool]:
    """(`decode_capacity`, whether the engine's running-request limit, not the KV pool, sets it)."""
    inst = pool.instance
    dp = inst.parallel.dp_attention
    cap = memory(pool).max_seqs(ctx) * dp
    limit = inst.runtime.max_running_per_rank
    return (limit * dp, True) if limit and limit * dp < cap else (cap, False)


def decode_limit(pool: Pool, ctx: float) -> str:
    """What `decode_capacity` stops at: the KV pool, or the engine's running-request limit (vLLM max_num_seqs,
    TRT-LLM max_batch_size, SGLang max_running_requests), a limit a plan lifts by flag, not by memory (trial,
    twenty-first session: vLLM's 1,024 read 'decode KV capacity')."""
    if _capacity(pool, ctx)[1]:
        return (
            f"the engine's running-request limit ({pool.instance.runtime.max_running_per_rank:,} per attention-DP rank)"
        )
    return "decode KV capacity"


def decode_step(pool: Pool, batch: float, kv_len: float) -> StepCost:
    """One decode step of one instance at `batch` sequences (rounded up); with pp, the batch is
    split into pp micro-batches in flight (roofline.pipeline)."""
    inst = pool.instance
    pp = inst.parallel.pp
    # rounded up, less a thousandth of a sequence: a batch solved to 4096.00013 is 4096 (explain said 4,097)
    seqs = max(1, math.ceil(batch / pp - 1e-3))
    return memo(inst, ("dec", seqs, kv_len), lambda: _decode(inst, seqs, kv_len, drafts(pool)))


def _decode(inst: InstanceSpec, seqs: int, kv_len: float, n_drafts: int) -> StepCost:
    return pipelined(inst, step_cost(inst, StepBatch.decode(seqs, kv_len, n_drafts)))


def decode_time(pool: Pool, batch: float, kv_len: float) -> float:
    """Decode step time at a fractional mean batch: linear between the integer batches around
    it (a mean batch of 7.5 alternates 7 and 8), so the steady state is continuous in the batch."""
    b = max(batch, 1.0)
    lo = math.floor(b)
    t_lo = decode_step(pool, lo, kv_len).time_s
    if b == lo:
        return t_lo
    return t_lo + (b - lo) * (decode_step(pool, lo + 1, kv_len).time_s - t_lo)


def ridden(pool: Pool, b: float, seen: float, ctx: float) -> float:
    """The mean decode batch a decoding request rides, where the instance's time-average batch is `b`: its own
    sequence and `seen` of the others' (the arrival theorem: a request of a Poisson stream meets the time-average
    batch besides itself, 1 + b; a closed loop's Bard-Schweitzer (N - 1) / N of it, so N clients all decoding
    ride N), at most the instance's capacity at `ctx` tokens. Priced at b, a 131,072-token prompt served at
    0.078 req/s on 2x TP8 H200 read TPOT 24.9 ms by estimate, where its simulation, whose lone decodes often
    ride beside another 131k-token sequence, reads 41 ms (trial, twenty-first session)."""
    return max(b, min(1.0 + seen * b, decode_capacity(pool, ctx)))


def prefill_budget(pool: Pool) -> int:
    return pool.instance.runtime.prefill_tokens_per_rank


def _prompts_per_rank(pool: Pool, isl: int) -> int:
    """Whole prompts one attention-DP rank prefills in a step: as many as its token budget holds
    (at least one; a prompt over the budget is chunked, one per rank)."""
    budget = prefill_budget(pool)
    return max(1, budget // isl) if isl <= budget else 1


def _prefill_kv_tokens(pool: Pool, isl: int, per_rank: int) -> int:
    """The KV a prefill step of `per_rank` whole `isl`-token prompts per rank is priced to hold: two such
    steps' prompts (the batch in flight and the next), or two prompts when one is chunked over steps (it
    holds its whole KV by the end)."""
    return 2 * (per_rank if isl <= prefill_budget(pool) else 1) * isl


def step_memory(pool: Pool, isl: int) -> MemoryPlan:
    """The memory plan the pool's steps are priced with, whose `offloaded_bytes` are the weight bytes
    per GPU streamed from host memory each step (roofline.memory's offload, e.g. an SGLang prefill
    pool on NVLink-C2C): a prefill pool's at the KV of two of its fullest steps of `isl`-token prompts
    (two whole prompts' KV per rank-step, or two prompts' when one is chunked over steps: it holds its
    whole KV by the end), as `prefill_step` prices it; any other pool's at no KV, as the decode and
    mixed steps price it. The fit check and the estimate's memory figures use roofline.memory's
    kv_needed_tokens (two token budgets per rank), which differs from this where a prompt is longer
    than the budget or the budget holds no whole number of prompts."""
    if pool.role != "prefill":
        return memory(pool)
    return memory(pool, _prefill_kv_tokens(pool, isl, _prompts_per_rank(pool, isl)))


def prefill_step(pool: Pool, isl: int, n_requests: int | None = None) -> tuple[StepCost, int]:
    """A prefill step of whole requests, up to the token budget per attention-DP rank; returns the
    step and the number of requests it completes. Prompts longer than the budget are chunked."""
    dp = pool.instance.parallel.dp_attention
    budget = prefill_budget(pool)
    per_rank = _prompts_per_rank(pool, isl)
    if n_requests is not None:
        per_rank = max(1, min(per_rank, math.ceil(n_requests / dp)))
    inst = pool.instance
    return memo(inst, ("pre", isl, per_rank), lambda: _prefill(pool, isl, per_rank, budget))


def _prefill(pool: Pool, isl: int, per_rank: int, budget: int) -> tuple[StepCost, int]:
    inst = pool.instance
    dp = inst.parallel.dp_attention
    off = memory(pool, _prefill_kv_tokens(pool, isl, per_rank)).offloaded_bytes
    # the ranks step together: the step's tokens count every rank's (explain read '1,024,000 tokens' for one
    # 128k prompt on 8 ranks, unsaid)
    lockstep = (
        (
            f"{dp} attention-DP ranks step together: priced as each prefilling {per_rank if isl <= budget else 1} "
            f"prompt(s) of {isl:,} tokens",
        )
        if dp > 1
        else ()
    )
    if isl <= budget:
        sc = step_cost(inst, StepBatch.prefill([(isl, 0)] * (per_rank * dp)), off)
        return replace(sc, notes=sc.notes + lockstep), per_rank * dp
    total, hidden, prefix, last = 0.0, 0.0, 0, None
    ops: dict[tuple[str, str, str, str, str], OpTime] = {}  # each op summed over the chunks
    while prefix < isl:
        n = min(budget, isl - prefix)
        last = step_cost(inst, StepBatch.prefill([(n, prefix)] * dp), off)
        total, hidden, prefix = total + last.time_s, hidden + last.hidden_comm_s, prefix + n
        for o in last.ops:
            key = (o.name, o.category, o.kernel, o.bound, o.source)
            got = ops.get(key)
            ops[key] = (
                o
                if got is None
                else replace(got, time_s=got.time_s + o.time_s, flops=got.flops + o.flops, bytes=got.bytes + o.bytes)
            )
    assert last is not None
    return StepCost(total, total, tuple(ops.values()), isl * dp, hidden, last.notes + lockstep), dp


MIXED_CHUNK_QUANTUM = 32  # prefill tokens of a mixed step are priced on a 32-token grid (memo hits)


def mixed_step(pool: Pool, batch: float, kv_len: float, chunk_tokens: float, isl: int) -> StepCost:
    """A vLLM/TRT-LLM step: `batch` decodes (rounded up) and `chunk_tokens` of prefill together,
    the chunk priced as whole prompts of `isl` tokens plus a remainder (see `_mixed`). With pp
    stages the decodes and the chunk are split into pp micro-batches, as in `decode_step`."""
    inst = pool.instance
    pp = inst.parallel.pp
    seqs = max(0, math.ceil(batch / pp - 1e-9))
    c = round(chunk_tokens / pp / MIXED_CHUNK_QUANTUM) * MIXED_CHUNK_QUANTUM
    return memo(inst, ("mix", seqs, kv_len, c, isl), lambda: _mixed(pool, seqs, kv_len, c, isl))


def _mixed(pool: Pool, seqs: int, kv_len: float, c: int, isl: int) -> StepCost:
    """The remainder of the chunk is a piece of a prompt prefilled over several steps: each piece
    attends to the prompt's tokens before it, so over the prompt its tokens see isl / 2 keys on
    average (the whole prompt's causal work, however it is cut); priced as one piece of `rest`
    tokens behind a prefix of (isl - rest) / 2, which carries that average."""
    whole, rest = divmod(c, max(isl, 1))
    chunks = [(isl, 0)] * whole + ([(rest, (isl - rest) // 2)] if rest else [])
    b = StepBatch(
        decode_seqs=seqs,
        decode_kv_sum=seqs * kv_len,
        prefill_chunks=tuple(chunks),
        draft_tokens=drafts(pool) if seqs else 0,
    )
    return pipelined(pool.instance, step_cost(pool.instance, b, memory(pool).offloaded_bytes))
