"""Parameter counts and KV-cache bytes per token, from a `ModelSpec`.

Counts are exact products of the config's dimensions (norms and biases are ignored: <0.1%).
Formulas follow the reference implementations: DeepSeek-V3 `inference/model.py` (MLA, MoE),
DeepSeek-V3.2 (indexer: wq_b, wk, weights_proj), DeepSeek-V4 (grouped low-rank output
projection wo_a/wo_b, per-layer compressor), HF Llama/Qwen3/gpt-oss (GQA).
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.catalog.schema import CompressedAttention, GQAAttention, MLAAttention, ModelSpec


@dataclass(frozen=True, slots=True)
class AttentionParams:
    """Attention weights of one layer, split by how they shard under tensor parallelism."""

    replicated: float  # q_a, kv_a, indexer keys/weights: every TP rank holds them
    sharded: float  # per-head projections: split over TP ranks
    absorbed: float  # MLA W_UK / W_UV, applied as batched GEMMs in absorbed decode


def attention_params(m: ModelSpec, compress_ratio: int = 0) -> AttentionParams:
    a, h = m.attention, m.hidden_size
    if isinstance(a, MLAAttention):
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q_a = h * a.q_lora_rank if a.q_lora_rank else 0
        q_b = (a.q_lora_rank or h) * a.num_heads * qk
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv_b = a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        o = a.num_heads * a.v_head_dim * h
        idx = 0
        if a.indexer:
            ix = a.indexer
            idx = (a.q_lora_rank or h) * ix.num_heads * ix.head_dim + h * ix.head_dim
            idx += h * ix.num_heads
        return AttentionParams(replicated=q_a + kv_a + idx, sharded=q_b + o, absorbed=kv_b)
    if isinstance(a, CompressedAttention):
        q_a = h * a.q_lora_rank
        q_b = a.q_lora_rank * a.num_heads * a.head_dim
        kv = h * a.head_dim
        wo_a = a.num_heads * a.head_dim * a.o_lora_rank  # o_groups blocks of (H*d/g) x o_lora
        wo_b = a.o_groups * a.o_lora_rank * h
        comp = 0
        if compress_ratio:
            overlap = 2 if compress_ratio == 4 else 1  # CSA pools overlapping 2x4-token groups
            comp = 2 * h * a.head_dim * overlap  # wkv + wgate of the compressor
            if compress_ratio == 4:
                ix = a.indexer
                comp += a.q_lora_rank * ix.num_heads * ix.head_dim + h * ix.num_heads
                comp += 2 * h * ix.head_dim * 2  # indexer's own compressor
        return AttentionParams(replicated=q_a + kv + comp, sharded=q_b + wo_a + wo_b, absorbed=0)
    assert isinstance(a, GQAAttention)
    q = h * a.num_heads * a.head_dim
    kv = 2 * h * a.num_kv_heads * a.head_dim
    o = a.num_heads * a.head_dim * h
    return AttentionParams(replicated=0, sharded=q + kv + o, absorbed=0)


def attention_layer_kinds(m: ModelSpec) -> dict[int, int]:
    """Compress ratio -> number of layers (non-V4 models: {0: num_layers})."""
    a = m.attention
    if not isinstance(a, CompressedAttention):
        return {0: m.num_layers}
    out: dict[int, int] = {}
    for r in a.compress_ratios[: m.num_layers]:
        out[r] = out.get(r, 0) + 1
    return out


def expert_params(m: ModelSpec) -> float:
    """One routed expert (gate, up, down)."""
    assert m.moe is not None
    return 3.0 * m.hidden_size * m.moe.expert_intermediate


def shared_expert_params(m: ModelSpec) -> float:
    if m.moe is None:
        return 0.0
    return m.moe.num_shared_experts * expert_params(m)


def dense_ffn_params(m: ModelSpec) -> float:
    return 3.0 * m.hidden_size * m.dense_intermediate


def gate_params(m: ModelSpec) -> float:
    return float(m.hidden_size * m.moe.num_experts) if m.moe else 0.0


def embedding_params(m: ModelSpec) -> float:
    """Input embedding plus LM head (once if tied)."""
    return m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)


def total_attention_params(m: ModelSpec) -> float:
    total = 0.0
    for ratio, n in attention_layer_kinds(m).items():
        p = attention_params(m, ratio)
        total += n * (p.replicated + p.sharded + p.absorbed)
    return total


def total_params(m: ModelSpec, include_mtp: bool = False) -> float:
    n = total_attention_params(m) + m.dense_layers * dense_ffn_params(m) + embedding_params(m)
    if m.moe:
        per_layer = m.moe.num_experts * expert_params(m) + shared_expert_params(m)
        n += m.moe_layers * (per_layer + gate_params(m))
    if include_mtp and m.mtp_layers:
        n += m.mtp_layers * mtp_layer_params(m)
    return n


def active_params(m: ModelSpec) -> float:
    """Parameters touched per token (one copy of the embedding table counted, as in the papers)."""
    n = total_attention_params(m) + m.dense_layers * dense_ffn_params(m) + embedding_params(m)
    if m.moe:
        per_tok = m.moe.top_k * expert_params(m) + shared_expert_params(m) + gate_params(m)
        n += m.moe_layers * per_tok
    return n


def mtp_layer_params(m: ModelSpec) -> float:
    """One MTP module: a full decoder layer plus the 2h -> h projection (shares embedding/head)."""
    p = attention_params(m, 0)
    ffn = (
        m.moe.num_experts * expert_params(m) + shared_expert_params(m) + gate_params(m)
        if m.moe
        else dense_ffn_params(m)
    )
    return p.replicated + p.sharded + p.absorbed + ffn + 2.0 * m.hidden_size * m.hidden_size


KV_BYTES = {"bf16": 2.0, "fp8": 1.0}


def _indexer_key_bytes(head_dim: int, kv_format: str) -> float:
    # FP8 indexer keys carry one fp32 scale per 128 values (TRT-LLM blockwise FP8 indexer cache)
    return head_dim * KV_BYTES[kv_format] + (4.0 * head_dim / 128 if kv_format == "fp8" else 0.0)


def kv_bytes_per_token(m: ModelSpec, kv_format: str, kv_heads_per_rank: int | None = None) -> float:
    """KV bytes one rank stores per cached token, summed over layers, excluding sliding windows.

    MLA: (kv_lora + rope) per layer, the same on every TP rank. DSA adds the indexer keys.
    V4: the latent (and CSA indexer keys) divided by the layer's compression ratio.
    GQA: 2 x kv_heads x head_dim on the rank's share of KV heads; sliding layers are capped by
    `window_bytes_per_seq` instead.
    """
    a, b = m.attention, KV_BYTES[kv_format]
    if isinstance(a, MLAAttention):
        per_layer = (a.kv_lora_rank + a.qk_rope_head_dim) * b
        if a.indexer:
            per_layer += _indexer_key_bytes(a.indexer.head_dim, kv_format)
        return per_layer * m.num_layers
    if isinstance(a, CompressedAttention):
        total = 0.0
        for ratio, n in attention_layer_kinds(m).items():
            if ratio == 0:
                continue
            per = a.head_dim * b
            if ratio == 4:
                per += _indexer_key_bytes(a.indexer.head_dim, kv_format)
            total += n * per / ratio
        return total
    assert isinstance(a, GQAAttention)
    heads = kv_heads_per_rank if kv_heads_per_rank is not None else a.num_kv_heads
    full_layers = m.num_layers - a.sliding_layers
    return 2.0 * heads * a.head_dim * b * full_layers


def window_bytes_per_seq(m: ModelSpec, kv_format: str, kv_heads_per_rank: int | None = None) -> float:
    """Fixed per-sequence KV of sliding-window layers (V4 raw window, gpt-oss sliding layers)."""
    a, b = m.attention, KV_BYTES[kv_format]
    if isinstance(a, CompressedAttention):
        return float(m.num_layers * a.sliding_window * a.head_dim * b)
    if isinstance(a, GQAAttention) and a.sliding_window:
        heads = kv_heads_per_rank if kv_heads_per_rank is not None else a.num_kv_heads
        return 2.0 * heads * a.head_dim * b * a.sliding_layers * a.sliding_window
    return 0.0
