"""FLOPs and bytes of core attention, the indexer and the attention projections of one forward
step, as seen by one GPU of an instance (summed over the layers it holds). FLOPs = 2 x multiply-adds:
- MLA absorbed decode (DeepSeek-V2 paper, appendix; FlashMLA): per query and cached token,
  2 x heads x (kv_lora + rope) for QK plus 2 x heads x kv_lora for PV; reads (kv_lora + rope)
  KV bytes per cached token once per sequence.
- MLA prefill (non-absorbed MHA, qk 192 / v 128): 2 x heads x (qk + v) per causal pair.
- DSA (V3.2): attention over min(ctx, top-k) keys; each query token (MTP drafts included)
  gathers its own top-k KV entries (FlashMLA sparse decode: indices per query token), and a
  rank's heads are padded to the kernel's head tile where it has one (SPARSE_MLA_HEAD_TILE);
  the indexer scores every cached key with 2 x index_heads x index_dim FLOPs in FP8.
- V4 compressed attention: window + compressed keys (ratio 4: top-k of ctx/4 by the indexer;
  ratio 128: all ctx/128), 512-d latent with K = V: 4 x heads x 512 FLOPs per attended key.
- GQA: 4 x heads x head_dim per pair; KV reads 2 x kv_heads x head_dim per cached token.
"""

from __future__ import annotations

from typing import NamedTuple

from roofline.batch import StepBatch
from roofline.catalog.schema import CompressedAttention, GQAAttention, MLAAttention
from roofline.deployment import InstanceSpec
from roofline.ops import ACT, Op, gemm_op
from roofline.params import KV_BYTES, attention_layer_kinds, attention_params


def projection_gemms(inst: InstanceSpec) -> int:
    """GEMM launches per layer of the attention projections, as serving engines run them: the
    projections that read the same input are one GEMM.
    - GQA: QKV fused, then o_proj: 2 (vLLM and SGLang QKVParallelLinear, TRT-LLM Attention.qkv_proj).
    - MLA with a query LoRA: q_a and kv_a fused (`runtime.fused_mla_a_proj`: SGLang
      fused_qkv_a_proj_with_mqa, vLLM fused_qkv_a_proj, TRT-LLM kv_a_proj_with_mqa of width
      q_lora + kv_lora + rope), q_b, o_proj: 3, or 4 unfused (runtime.engine's separate q_a, kv_a);
      without a query LoRA q, kv_a, o: 3. DSA adds the indexer's wq_b, wk and weights_proj: 3.
    - V4 compressed attention: 5, the count every attention kind had before; whether engines fuse V4's
      wq_a and wkv (both read the hidden state) or its compressor and indexer projections was not read.
    The count sets each GEMM's size for the calibrated efficiency (calls per layer) and its launches."""
    a = inst.model.attention
    if isinstance(a, GQAAttention):
        return 2
    if isinstance(a, MLAAttention):
        n = 4 if a.q_lora_rank and not inst.runtime.fused_mla_a_proj else 3
        return n + (3 if a.indexer else 0)
    return 5


def _indexer_op(family: str, flops: float, data: float, n: float) -> Op:
    """The DSA / CSA lightning indexer scoring keys in FP8 (3 kernels per layer)."""
    return Op("attention.indexer", "indexer", family, "fp8", flops=flops, bytes=data, launches=3 * n)


class Shape(NamedTuple):
    """Per-GPU attention work of one layer kind: layers, heads, decode sequences, their KV sum and
    mean, queries per sequence (1 + MTP drafts), KV bytes per element, the math rate."""

    n: float
    heads: float
    seqs: float
    kv_sum: float
    kv_mean: float
    q: int
    kvb: float
    rate: str


def attention_ops(inst: InstanceSpec, b: StepBatch, layer_scale: float) -> list[Op]:
    """Core attention, the indexer, and the attention projections (per GPU)."""
    m, p, prec = inst.model, inst.parallel, inst.precision
    a = m.attention
    dp, tp = p.dp_attention, p.tp
    heads = a.num_heads / tp
    q_per_seq = 1 + b.draft_tokens
    seqs, kv_sum = b.decode_seqs / dp, b.decode_kv_sum / dp
    kv_mean = b.decode_kv_mean
    t_dec, t_pre = b.decode_tokens / dp, b.prefill_tokens / dp
    kvb = KV_BYTES[prec.kv_cache]
    rate = "fp8" if prec.attention == "fp8" else "bf16"
    ops: list[Op] = []
    for ratio, n_layers in attention_layer_kinds(m).items():
        n = n_layers * layer_scale
        proj = attention_params(m, ratio)
        w = proj.replicated + proj.sharded / tp
        tokens = t_dec + t_pre
        if tokens:
            gemms = projection_gemms(inst)
            ops.append(gemm_op(inst, "attention.proj", "dense_gemm", tokens, w, inst.precision.dense, n, gemms))
        if isinstance(a, MLAAttention):
            ops += _mla_ops(inst, b, Shape(n, heads, seqs, kv_sum, kv_mean, q_per_seq, kvb, rate))
            if proj.absorbed:  # W_UK / W_UV as BF16 batched GEMMs (decode) or kv_b (prefill)
                ab = proj.absorbed / tp
                if t_dec:
                    ops.append(gemm_op(inst, "attention.absorb_bmm", "dense_gemm", t_dec, ab, "bf16", n, 2))
                if t_pre:
                    up = t_pre + b.prefix_sum() / dp
                    ops.append(gemm_op(inst, "attention.kv_b_proj", "dense_gemm", up, ab, prec.dense, n))
        elif isinstance(a, CompressedAttention):
            ops += _compressed_ops(inst, b, n, ratio, heads, seqs, kv_mean, q_per_seq, kvb, rate)
        else:
            assert isinstance(a, GQAAttention)
            ops += _gqa_ops(inst, b, Shape(n, heads, seqs, kv_sum, kv_mean, q_per_seq, kvb, rate))
    return ops


# Query heads per tile of the sparse-MLA decode kernel, where it pads a rank's heads up to it:
# FlashMLA's sparse kernels (TRT-LLM's default sparse MLA on Hopper, TensorRT-LLM PR #9141) take
# 64 or 128 query heads, so a TP8 rank's 16 heads run as 64 (sglang PR #22372 "FlashMLA requires
# q heads to be 64 or 128 ... DeepSeek V3.2's 128 heads / TP8 = 16 heads"; vllm-project/recipes
# PR #234: "TP=8 yields only 16 heads (128/8) per rank but is padded to 64 heads").
SPARSE_MLA_HEAD_TILE = {"sm_90": 64}


def _padded_heads(inst: InstanceSpec, heads: float) -> float:
    """A rank's query heads as the sparse-MLA decode kernel runs them (SPARSE_MLA_HEAD_TILE)."""
    tile = SPARSE_MLA_HEAD_TILE.get(inst.hardware.arch)
    if not tile:
        return heads
    return -(-heads // tile) * tile


def _mla_ops(inst: InstanceSpec, b: StepBatch, sh: Shape) -> list[Op]:
    n, heads, seqs, kv_sum, kv_mean, q, kvb, rate = sh
    a = inst.model.attention
    assert isinstance(a, MLAAttention)
    dp = inst.parallel.dp_attention
    lat, rope = a.kv_lora_rank, a.qk_rope_head_dim
    ops: list[Op] = []
    topk = a.indexer.topk if a.indexer else None
    fam = "sparse_attn" if a.indexer else "mla_decode"
    if seqs:
        attended = seqs * min(kv_mean, topk) if topk else kv_sum
        gathers = q if topk else 1  # sparse: every query token gathers its own top-k keys
        h_eff = _padded_heads(inst, heads) if topk else heads
        ops.append(
            Op(
                "attention.decode",
                "attention",
                fam,
                rate,
                flops=attended * q * h_eff * 2 * (lat + rope + lat) * n,
                bytes=attended * gathers * (lat + rope) * kvb * n,
                launches=2 * n,
                fmt=inst.precision.kv_cache,
                calls=n,
                rows=seqs,
            )
        )
    if b.prefill_chunks:
        qk, v = a.qk_nope_head_dim + rope, a.v_head_dim
        pairs = b.causal_pairs(topk) / dp
        toks = b.prefill_tokens / dp
        ops.append(
            Op(
                "attention.prefill",
                "attention",
                "sparse_prefill" if topk else "attn_prefill",
                "bf16",
                flops=pairs * heads * 2 * (qk + v) * n,
                bytes=(toks + b.prefix_sum() / dp) * heads * (2 * qk + v) * ACT * n,
                launches=2 * n,
                fmt="bf16",
                calls=n,
                rows=toks,
            )
        )
    if a.indexer:
        ix = a.indexer
        key_bytes = ix.head_dim * (1 + 4 / 128)
        per_pair = ix.num_heads * ix.head_dim * 2 * n  # FLOPs per (query, key) scored
        if seqs:
            ops.append(_indexer_op("indexer", kv_sum * q * per_pair, kv_sum * key_bytes * n, n))
        if b.prefill_chunks:
            keys = (b.prefill_tokens + b.prefix_sum()) / dp
            ops.append(_indexer_op("indexer_prefill", b.causal_pairs() / dp * per_pair, keys * key_bytes * n, n))
    return ops


def _v4_attended(kv: float, ratio: int, window: int, topk: int) -> float:
    compressed = 0.0 if ratio == 0 else kv / ratio
    if ratio == 4:
        compressed = min(compressed, topk)
    return min(kv, window) + compressed


def _compressed_ops(
    inst: InstanceSpec,
    b: StepBatch,
    n: float,
    ratio: int,
    heads: float,
    seqs: float,
    kv_mean: float,
    q: int,
    kvb: float,
    rate: str,
) -> list[Op]:
    a = inst.model.attention
    assert isinstance(a, CompressedAttention)
    dp, d = inst.parallel.dp_attention, a.head_dim
    ix = a.indexer
    ops: list[Op] = []
    if seqs:
        att = seqs * _v4_attended(kv_mean, ratio, a.sliding_window, ix.topk)
        ops.append(
            Op(
                "attention.decode",
                "attention",
                "sparse_attn",
                rate,
                flops=att * q * heads * 4 * d * n,
                bytes=att * d * kvb * n,
                launches=2 * n,
            )
        )
    if b.prefill_chunks:
        pairs = b.causal_pairs(a.sliding_window)
        if ratio == 4:
            pairs += b.causal_pairs(4 * ix.topk) / 4
        elif ratio:
            pairs += b.causal_pairs() / ratio
        ops.append(
            Op(
                "attention.prefill",
                "attention",
                "sparse_prefill",
                "bf16",
                flops=pairs / dp * heads * 4 * d * n,
                bytes=b.prefill_tokens / dp * (heads + 1) * d * ACT * n,
                launches=2 * n,
            )
        )
    if ratio == 4:
        per_pair = ix.num_heads * ix.head_dim * 2 * n
        if seqs:
            ops.append(
                _indexer_op("indexer", seqs * q * kv_mean / 4 * per_pair, seqs * kv_mean / 4 * ix.head_dim * kvb * n, n)
            )
        if b.prefill_chunks:
            ops.append(
                _indexer_op(
                    "indexer_prefill",
                    b.causal_pairs() / 4 / dp * per_pair,
                    b.prefill_tokens / dp / 4 * ix.head_dim * kvb * n,
                    n,
                )
            )
    return ops


def _gqa_ops(inst: InstanceSpec, b: StepBatch, sh: Shape) -> list[Op]:
    n, heads, seqs, kv_sum, kv_mean, q, kvb, rate = sh
    a = inst.model.attention
    assert isinstance(a, GQAAttention)
    dp, hd = inst.parallel.dp_attention, a.head_dim
    kv_heads = max(1.0, a.num_kv_heads / inst.parallel.tp)
    sliding = a.sliding_layers / inst.model.num_layers if a.sliding_window else 0.0
    ops: list[Op] = []
    if seqs:
        win = a.sliding_window or kv_mean
        kv_eff = (1 - sliding) * kv_sum + sliding * seqs * min(kv_mean, win)
        ops.append(
            Op(
                "attention.decode",
                "attention",
                "gqa_decode",
                rate,
                flops=kv_eff * q * heads * 4 * hd * n,
                bytes=kv_eff * kv_heads * 2 * hd * kvb * n,
                launches=2 * n,
                fmt=inst.precision.kv_cache,
                calls=n,
                rows=seqs,
            )
        )
    if b.prefill_chunks:
        pairs = (1 - sliding) * b.causal_pairs() + sliding * b.causal_pairs(a.sliding_window)
        toks = (b.prefill_tokens + b.prefix_sum()) / dp
        ops.append(
            Op(
                "attention.prefill",
                "attention",
                "attn_prefill",
                "bf16",
                flops=pairs / dp * heads * 4 * hd * n,
                bytes=toks * (heads + 2 * kv_heads) * hd * ACT * n,
                launches=n,
            )
        )
    return ops
