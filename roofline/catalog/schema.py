"""Typed, strict schemas for the catalog: model architectures and GPU systems.

Every catalog entry is validated at load; unknown keys are errors. Units are in field names
(`_gb` is 1e9 bytes, `_tbps` 1e12 bytes/s, `_gbps` 1e9 bytes/s). This module only describes data;
parameter counts and KV bytes live in `roofline.params`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from roofline.kernels import ARCH_FAMILY, KERNELS


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# ----------------------------------------------------------------------------- models


class Indexer(StrictModel):
    """DSA lightning indexer (DeepSeek-V3.2, V4 CSA layers): scores every cached token, keeps top-k."""

    num_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    topk: int = Field(gt=0)


class MLAAttention(StrictModel):
    """Multi-head latent attention (DeepSeek-V3/R1/V3.2, Kimi K2). `indexer` makes it DSA."""

    kind: Literal["mla"] = "mla"
    num_heads: int = Field(gt=0)
    q_lora_rank: int = Field(ge=0)  # 0: queries are projected straight from the hidden state
    kv_lora_rank: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(ge=0)
    v_head_dim: int = Field(gt=0)
    indexer: Indexer | None = None


class CompressedAttention(StrictModel):
    """DeepSeek-V4 attention: one shared 512-d latent (K = V), a raw sliding window on every layer,
    and per-layer KV compression: ratio 0 = window only, 4 = CSA (indexer picks top-k of the
    compressed tokens), 128 = HCA (dense over the compressed tokens)."""

    kind: Literal["compressed"] = "compressed"
    num_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    rope_dim: int = Field(ge=0)
    q_lora_rank: int = Field(gt=0)
    o_lora_rank: int = Field(gt=0)
    o_groups: int = Field(gt=0)
    sliding_window: int = Field(gt=0)
    compress_ratios: tuple[int, ...]
    indexer: Indexer


class GQAAttention(StrictModel):
    """Grouped-query attention (Llama, Qwen3, gpt-oss). `sliding_layers` use `sliding_window`."""

    kind: Literal["gqa"] = "gqa"
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    sliding_window: int | None = None
    sliding_layers: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _groups(self) -> GQAAttention:
        if self.num_heads % self.num_kv_heads:  # each KV head serves a whole group of query heads
            raise ValueError(f"num_heads ({self.num_heads}) is not a multiple of num_kv_heads ({self.num_kv_heads})")
        return self


Attention = Annotated[MLAAttention | CompressedAttention | GQAAttention, Field(discriminator="kind")]


class MoE(StrictModel):
    num_experts: int = Field(gt=0)
    top_k: int = Field(gt=0)
    expert_intermediate: int = Field(gt=0)
    num_shared_experts: int = Field(ge=0)
    n_group: int = Field(default=1, gt=0)  # group-limited routing (DeepSeek: 8 groups, top 4)
    topk_group: int = Field(default=1, gt=0)
    hash_layers: int = Field(default=0, ge=0)  # V4: first layers route by token hash, no gate
    # where the engines run this model's experts on the model's own kernels whatever their default for
    # the format: architecture family -> {"family:format": kernel path} (roofline.kernels.path_for)
    kernels: dict[str, dict[str, str]] = Field(default_factory=dict)
    kernels_source: str = ""

    @model_validator(mode="after")
    def _check(self) -> MoE:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        if self.kernels and not self.kernels_source:
            raise ValueError("moe.kernels needs moe.kernels_source: where the engines' choice is stated")
        families = sorted(set(ARCH_FAMILY.values()))
        for arch, choices in self.kernels.items():
            if arch not in families:
                raise ValueError(f"moe.kernels: {arch!r} is not an architecture family ({', '.join(families)})")
            unknown = sorted(set(choices.values()) - set(KERNELS))
            if unknown:
                raise ValueError(f"moe.kernels.{arch}: unknown kernel path(s) {', '.join(unknown)}")
        return self


class Checkpoints(StrictModel):
    """Published Hugging Face checkpoints of a model by weight format of the routed experts (dense
    models: of the weights). Only repo ids seen on their Hugging Face pages or in engine docs;
    `source` says where."""

    bf16: str | None = None
    fp8: str | None = None
    nvfp4: str | None = None
    mxfp4: str | None = None
    source: str


class ModelSpec(StrictModel):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    attention: Attention
    dense_layers: int = Field(ge=0)  # leading layers with a dense FFN (first_k_dense_replace)
    dense_intermediate: int = Field(ge=0)
    moe: MoE | None = None
    mtp_layers: int = Field(default=0, ge=0)
    hyper_connections: int = Field(default=1, gt=0)  # V4 mHC residual streams (hc_mult)
    sinkhorn_iters: int = Field(default=0, ge=0)
    tie_word_embeddings: bool = False
    checkpoint_format: str = "bf16"  # published weight format, informational
    # tokens of input + output one request may hold: max_position_embeddings of the cited config.json
    context_window: int | None = Field(default=None, gt=0)
    checkpoints: Checkpoints | None = None  # HF repo ids by format, for launch commands
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.moe is None and self.dense_layers != self.num_layers:
            raise ValueError("a model without `moe` must have dense_layers == num_layers")
        if self.dense_layers > self.num_layers:
            raise ValueError("dense_layers exceeds num_layers")
        att = self.attention
        if isinstance(att, CompressedAttention) and len(att.compress_ratios) < self.num_layers:
            raise ValueError("compress_ratios must list at least one ratio per layer")
        return self

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers

    @property
    def sparse_attention(self) -> bool:
        """Top-k sparse attention (V4's compressed attention, an MLA with a DSA indexer): its kernels
        read an FP8 KV cache and set their own math."""
        att = self.attention
        return isinstance(att, CompressedAttention) or (isinstance(att, MLAAttention) and att.indexer is not None)


# ----------------------------------------------------------------------------- hardware

Arch = Literal["sm_90", "sm_100", "sm_103", "sm_120"]


class PeakRates(StrictModel):
    """Dense tensor-core peaks in TFLOP/s (sparsity excluded)."""

    bf16: float = Field(gt=0)
    fp8: float = Field(gt=0)
    fp4: float | None = Field(default=None, gt=0)


class ScaleUp(StrictModel):
    link: str
    domain_gpus: int = Field(ge=1)
    bw_gbps_unidir: float = Field(ge=0)


class HostLink(StrictModel):
    kind: Literal["pcie5", "pcie6", "nvlink-c2c"]
    bw_gbps_unidir: float = Field(gt=0)


class HardwareSpec(StrictModel):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    arch: Arch
    sm_count: int = Field(gt=0)
    peak_tflops: PeakRates
    cuda_core_fp32_tflops: float = Field(gt=0)
    memory_gb: float = Field(gt=0)
    memory_bw_tbps: float = Field(gt=0)
    l2_mb: float = Field(gt=0)
    gpus_per_node: int = Field(gt=0)
    scaleup: ScaleUp
    pcie_gbps_unidir: float = Field(default=64, gt=0)
    nic_gbps_per_gpu: float = Field(ge=0)  # Gbit/s
    host_link: HostLink
    tdp_w: float = Field(gt=0)
    sources: dict[str, str]

    @property
    def is_blackwell(self) -> bool:
        return self.arch in ("sm_100", "sm_103", "sm_120")

    @property
    def mem_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def mem_bw(self) -> float:
        return self.memory_bw_tbps * 1e12

    @property
    def nic_bytes_per_s(self) -> float:
        return self.nic_gbps_per_gpu * 1e9 / 8

    def one_node(self, gpus: int) -> bool:
        """Whether `gpus` that talk to one another may do so here: any number on a networked system, at most a
        node where the catalog gives no NIC (a PCIe-only server: no link between its nodes)."""
        return self.nic_gbps_per_gpu > 0 or gpus <= self.gpus_per_node
