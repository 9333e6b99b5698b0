"""Memory per GPU: weights by format and sharding, buffers, the KV pool, and how many sequences
it holds; optional weight offload to host memory over NVLink-C2C.

Budget (SGLang's `mem_fraction_static` semantics): `mem_fraction` x capacity holds the weights,
communication buffers and the KV pool; the rest is left for activations, workspace and
CUDA-graph pools. A deployment whose weights leave no room for the KV it needs either offloads
experts to host (allowed where the host link is NVLink-C2C, or when asked) or raises
`InsufficientMemoryError` saying by how much it misses.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.catalog.schema import GQAAttention
from roofline.deployment import InstanceSpec
from roofline.errors import InsufficientMemoryError
from roofline.params import (
    attention_layer_kinds,
    attention_params,
    dense_ffn_params,
    expert_params,
    gate_params,
    kv_bytes_per_token,
    mtp_layer_params,
    shared_expert_params,
    window_bytes_per_seq,
)
from roofline.precision import BYTES_PER_PARAM

DEEPEP_BUFFER_BYTES = 2e9  # DeepEP normal + low-latency buffers per rank (SGLang large-EP recipe)
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 24  # bytes per token per hidden unit of live activations


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    capacity_bytes: float
    budget_bytes: float  # mem_fraction x capacity
    weights_bytes: float  # resident on the GPU
    offloaded_bytes: float  # streamed from host each step
    buffer_bytes: float
    kv_pool_bytes: float
    kv_bytes_per_token: float  # on this GPU, all its layers
    window_bytes_per_seq: float
    activation_bytes: float

    def max_seqs(self, context_len: float) -> int:
        """Sequences of `context_len` tokens one attention group's KV pool holds."""
        per_seq = self.kv_bytes_per_token * context_len + self.window_bytes_per_seq
        return int(self.kv_pool_bytes // per_seq) if per_seq > 0 else 0

    def breakdown_gb(self) -> dict[str, float]:
        """GB per GPU by use; what weights, buffers, KV and the step's activations leave is `unused_reserve`
        (it was counted as activations: 75.4 GB of 'activations' at mem_fraction 0.5 on an H200)."""
        other = self.capacity_bytes - self.weights_bytes - self.buffer_bytes - self.kv_pool_bytes
        act = min(self.activation_bytes, max(other, 0.0))
        return {
            "weights": self.weights_bytes / 1e9,
            "kv_pool": self.kv_pool_bytes / 1e9,
            "comm_buffers": self.buffer_bytes / 1e9,
            "activations_and_graphs": act / 1e9,
            "unused_reserve": max(other - act, 0.0) / 1e9,
            "offloaded_to_host": self.offloaded_bytes / 1e9,
        }


def embedding_bytes(inst: InstanceSpec) -> float:
    """Embedding and LM head weights per GPU (outside the layers, so a layer-group offloader keeps them)."""
    m, p = inst.model, inst.parallel
    return m.vocab_size * m.hidden_size / p.tp * (2.0 + BYTES_PER_PARAM[inst.precision.lm_head])


def weight_bytes(inst: InstanceSpec) -> tuple[float, float]:
    """(resident weights excluding routed experts, routed-expert weights) per GPU."""
    m, p, prec = inst.model, inst.parallel, inst.precision
    stage = 1.0 / p.pp
    dense_b, moe_b = BYTES_PER_PARAM[prec.dense], BYTES_PER_PARAM[prec.moe]
    base = 0.0
    for ratio, n in attention_layer_kinds(m).items():
        a = attention_params(m, ratio)
        base += n * stage * (a.replicated + (a.sharded + a.absorbed) / p.tp) * dense_b
    base += m.dense_layers * stage * dense_ffn_params(m) / p.tp * dense_b
    base += embedding_bytes(inst)
    experts = 0.0
    if m.moe:
        local = (m.moe.num_experts + inst.runtime.redundant_experts) / p.ep
        experts = m.moe_layers * stage * local * expert_params(m) / p.moe_tp * moe_b
        base += m.moe_layers * stage * (shared_expert_params(m) / p.tp * dense_b + gate_params(m) * 2)
    if inst.mtp:
        share = mtp_layer_params(m)
        if m.moe:
            routed = m.moe.num_experts * expert_params(m)
            experts += routed / p.ep / p.moe_tp * moe_b
            share -= routed
        base += share / p.tp * dense_b
    return base, experts


def _kv_layout(inst: InstanceSpec, kv_heads: int | None) -> tuple[float, float]:
    """(KV bytes per cached token, fixed bytes per sequence) on one GPU. With equal window shares
    (TRT-LLM) a GQA model with sliding layers gets half its pool per window size, whatever the window:
    the full layers' share holds as many tokens as a pool where every layer keeps full context
    (kvCacheManager.cpp `calculateMaxNumBlocks`: "allocating identical number of blocks for all
    layers"; TRTLLM_WINDOW_SIZE_SHARES overrides it, TensorRT-LLM PR #7923). The sliding layers'
    share then holds far more than their windows, so no fixed per-sequence part is left over. With
    SGLang's ratio (`swa_full_tokens_ratio`, 0.8 by default) the sliding layers' pool holds r tokens per
    full-layer token, sized from the same memory: a token costs its full layers plus r of its sliding
    layers (model_runner_kv_cache_mixin.py `set_num_tokens_hybrid_swa`); that pool outlasts the windows
    it serves (r x the full pool's tokens against a window per sequence), so it is not a separate limit."""
    m, p, fmt = inst.model, inst.parallel, inst.precision.kv_cache
    kv_tok = kv_bytes_per_token(m, fmt, kv_heads)
    win = window_bytes_per_seq(m, fmt, kv_heads)
    a = m.attention
    shares, ratio = inst.runtime.kv_window_shares, inst.runtime.swa_full_tokens_ratio
    if shares in ("equal", "ratio") and isinstance(a, GQAAttention) and 0 < a.sliding_layers < m.num_layers:
        sliding_share = 1.0 if shares == "equal" else (ratio or 0.0)
        kv_tok *= 1 + sliding_share * a.sliding_layers / (m.num_layers - a.sliding_layers)
        win = 0.0
    kv_tok /= p.pp
    if inst.mtp:
        kv_tok += kv_tok / m.num_layers * m.mtp_layers
    return kv_tok, win / p.pp


def step_tokens_per_rank(inst: InstanceSpec, max_step_tokens: int = 8192) -> float:
    """Tokens one rank processes in a step of `max_step_tokens` per instance (MTP drafts included)."""
    p = inst.parallel
    return max_step_tokens / p.dp_attention * (1 + (inst.mtp.draft_tokens if inst.mtp else 0))


def activation_bytes(inst: InstanceSpec, max_step_tokens: int = 8192) -> float:
    """Live activations of one step on one GPU: hidden states, and logits for up to 4,096 tokens."""
    m, p = inst.model, inst.parallel
    tokens = step_tokens_per_rank(inst, max_step_tokens)
    return tokens * m.hidden_size * ACTIVATION_BYTES_PER_TOKEN_HIDDEN + min(tokens, 4096) * m.vocab_size / p.tp * 4


def kv_needed_tokens(inst: InstanceSpec, role: str, seq_tokens: float) -> float:
    """The KV (tokens of one attention group) an instance must hold to serve at all: the one rule of
    the plan's fit check (planner/search/space.py), the estimate's memory plan and the simulator's
    (simulator.engine.PoolDef). A prefill instance holds the prompt tokens of two steps per rank (the
    batch in flight and the next, while the first one's KV is sent); a decode or aggregated instance
    one sequence at its full length, `seq_tokens` (prompt + output)."""
    if role == "prefill":
        return 2.0 * inst.runtime.prefill_tokens_per_rank
    return seq_tokens


def plan_memory(inst: InstanceSpec, kv_needed_tokens: float = 0.0, max_step_tokens: int = 8192) -> MemoryPlan:
    """Lay out one GPU's memory. `kv_needed_tokens` is the KV (in tokens of one attention group)
    the caller must be able to hold, e.g. the prefill batch in flight; offload is sized to free
    exactly that much when allowed."""
    hw, m, p = inst.hardware, inst.model, inst.parallel
    cap = hw.mem_bytes
    base, experts = weight_bytes(inst)
    buffers = DEEPEP_BUFFER_BYTES if p.ep > 1 and p.dp_attention > 1 else 0.0
    tokens = step_tokens_per_rank(inst, max_step_tokens)
    act = activation_bytes(inst, max_step_tokens)
    sizing = inst.runtime.kv_sizing
    if sizing == "free":  # TRT-LLM: fraction of what weights and activations leave
        budget = base + experts + buffers + inst.runtime.mem_fraction * (cap - base - experts - buffers - act)
    else:  # SGLang mem_fraction_static: weights + KV within the fraction, the rest for activations
        budget = cap * inst.runtime.mem_fraction
    kv_heads = None
    if isinstance(m.attention, GQAAttention):
        kv_heads = max(1, m.attention.num_kv_heads // p.tp)
    kv_tok, win = _kv_layout(inst, kv_heads)
    kv_needed_bytes = kv_needed_tokens * kv_tok
    inside = sizing == "with_activations"
    free = budget - base - experts - buffers - (act if inside else 0.0)  # vLLM: activations within the fraction
    offloaded = 0.0
    allow = inst.runtime.offload
    if allow is None:
        allow = hw.host_link.kind == "nvlink-c2c"
    if free < kv_needed_bytes and allow and experts > 0:
        offloaded = min(experts, kv_needed_bytes - free)
        free += offloaded
    if free < kv_needed_bytes or free <= 0:
        short = (kv_needed_bytes - free) / 1e9 if free < kv_needed_bytes else -free / 1e9
        raise InsufficientMemoryError(
            f"{m.id} on {p.gpus}x {hw.id} (tp={p.tp}, dp_attention={p.dp_attention}, ep={p.ep}, pp={p.pp}) "
            f"does not fit: weights {(base + experts) / 1e9:.1f} GB + buffers {buffers / 1e9:.1f} GB "
            f"+ KV needed {kv_needed_bytes / 1e9:.1f} GB exceed {budget / 1e9:.1f} GB "
            f"(mem_fraction {inst.runtime.mem_fraction} of {hw.memory_gb:g} GB) by {short:.1f} GB"
            + ("" if allow else "; offload is off")
        )
    if act > cap - budget and sizing == "static":
        raise InsufficientMemoryError(
            f"activations for {tokens:.0f} tokens per step need {act / 1e9:.1f} GB but only "
            f"{(cap - budget) / 1e9:.1f} GB is left outside mem_fraction {inst.runtime.mem_fraction}; "
            "lower mem_fraction or the step's token budget"
        )
    return MemoryPlan(cap, budget, base + experts - offloaded, offloaded, buffers, free, kv_tok, win, act)
