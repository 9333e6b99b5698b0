"""Which kernel path prices an op, per GPU architecture (the paths, their efficiency priors and sources:
`roofline.kernel_paths`).

A kernel path turns an op's FLOPs and bytes into time:
    t = launches x fixed_s + max(flops / (peak x compute_eff), bytes / (bandwidth x memory_eff))
where `peak` is the tensor-core rate of the op's precision (or of the path's own `math` where its MMAs
run at another rate than the operands' storage: FlashMLA dequantizes an FP8 KV cache to BF16, Marlin
and vLLM's SM100 MXFP4 MoE multiply BF16 activations), or the CUDA-core FP32 rate for paths without
tensor cores (the sm_120 fallbacks of seed 003). A grouped GEMM's FLOPs are padded to the path's tile:
`tile_m` rows per expert, or for a `token_tile` path (trtllm-gen) the power of two, 8 to `tile_m`, that
holds the op's mean tokens per touched expert (one tile per launch, as TensorRT-LLM's
calculate_tile_tokens_dim picks it). `weight_reuse=False` marks slot-GEMV kernels that re-read an
expert's weights for every token routed to it.

Selection (`select`) is a registry keyed by (architecture, op family, weight format); a choice map
(`family:format` or `family` -> path) comes before it, and `overrides` (op family -> path name, a
scenario's or a what-if's) before both. `path_for` is the one entry for an instance's op: its choice
map (`chosen_paths`) is the engine's (planner/engines, e.g. SGLang's MXFP4 slot-GEMV on sm_120) with
the model's own expert kernels over it (`MoE.kernels`: vLLM, SGLang and lmdeploy run DeepSeek-V4's FP4
experts on DeepGEMM, not on their MXFP4 default). This module knows no batch; `roofline.step` prices
ops with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from roofline.errors import MissingKernelDataError
from roofline.kernel_paths import KERNELS, KernelPath

if TYPE_CHECKING:
    from roofline.deployment import InstanceSpec

OpFamily = Literal[
    "gemm",
    "moe_gemm",
    "moe_gemv",
    "mla_decode",
    "sparse_attn",
    "sparse_prefill",
    "attn_prefill",
    "gqa_decode",
    "indexer",
    "elementwise",
]
# Families that fall back to another when an architecture has no entry of its own:
# decode-only MoE steps (`moe_gemv`) use the grouped GEMM unless a GEMV kernel is registered.
_FALLBACK_FAMILY = {"moe_gemv": "moe_gemm", "indexer_prefill": "indexer"}
ARCH_FAMILY = {"sm_90": "sm_90", "sm_100": "sm_100", "sm_103": "sm_100", "sm_120": "sm_120"}


# (arch family, op family, weight format or "*") -> path name
_DEFAULTS: dict[tuple[str, str, str], str] = {
    ("sm_90", "gemm", "bf16"): "cublas-bf16-sm90",
    ("sm_90", "gemm", "*"): "deepgemm-fp8-sm90",
    ("sm_90", "moe_gemm", "w4a16"): "marlin-w4a16-sm90",
    ("sm_90", "moe_gemm", "mxfp4"): "marlin-w4a16-sm90",
    ("sm_90", "moe_gemm", "*"): "deepgemm-grouped-fp8-sm90",
    ("sm_90", "mla_decode", "*"): "flashmla-sm90",
    ("sm_90", "sparse_attn", "*"): "flashmla-sparse-sm90",
    ("sm_90", "attn_prefill", "*"): "fa3-prefill-sm90",
    ("sm_90", "sparse_prefill", "*"): "flashmla-sparse-prefill-sm90",
    ("sm_90", "gqa_decode", "*"): "fa3-gqa-decode-sm90",
    ("sm_90", "indexer", "*"): "deepgemm-mqa-logits-sm90",
    ("sm_90", "elementwise", "*"): "elementwise-sm90",
    ("sm_100", "gemm", "*"): "cutlass-gemm-sm100",
    ("sm_100", "moe_gemm", "mxfp4"): "trtllm-gen-mxfp4-sm100",
    ("sm_100", "moe_gemm", "*"): "cute-dsl-grouped-sm100",
    ("sm_100", "mla_decode", "*"): "trtllm-gen-mla-sm100",
    ("sm_100", "sparse_attn", "*"): "dsa-sparse-sm100",
    ("sm_100", "attn_prefill", "*"): "fmha-prefill-sm100",
    ("sm_100", "sparse_prefill", "*"): "flashmla-sparse-prefill-sm100",
    ("sm_100", "gqa_decode", "*"): "gqa-decode-sm100",
    ("sm_100", "indexer", "*"): "deepgemm-mqa-logits-sm100",
    ("sm_100", "elementwise", "*"): "elementwise-sm100",
    ("sm_120", "gemm", "bf16"): "cublas-bf16-sm120",
    ("sm_120", "gemm", "nvfp4"): "cutlass-fp4-sm120",
    ("sm_120", "gemm", "*"): "triton-block-fp8-sm120",
    ("sm_120", "moe_gemm", "mxfp4"): "marlin-w4a16-sm120",
    ("sm_120", "moe_gemm", "nvfp4"): "cutlass-fp4-grouped-sm120",
    ("sm_120", "moe_gemm", "w4a16"): "cutlass-fp4-grouped-sm120",
    ("sm_120", "moe_gemm", "*"): "triton-fused-moe-sm120",
    ("sm_120", "mla_decode", "*"): "fa2-xqa-mla-sm120",
    ("sm_120", "sparse_attn", "*"): "triton-sparse-mla-sm120",
    ("sm_120", "attn_prefill", "*"): "fmha-v2-prefill-sm120",
    ("sm_120", "sparse_prefill", "*"): "triton-sparse-prefill-sm120",
    ("sm_120", "gqa_decode", "*"): "gqa-decode-sm120",
    ("sm_120", "indexer", "*"): "triton-sparse-mla-sm120",
    ("sm_120", "indexer_prefill", "*"): "triton-sparse-prefill-sm120",
    ("sm_120", "elementwise", "*"): "elementwise-sm120",
}

# What a tensor-core kernel would be for each CUDA-core fallback (used by `planner explain`).
TENSOR_CORE_ALTERNATIVE: dict[str, str] = {
    "triton-sparse-mla-sm120": "tensor-core-sparse-mla-sm120",
    "triton-mxfp4-slot-gemv-sm120": "cutlass-fp4-grouped-sm120",
}


def _named(name: str, what: str) -> KernelPath:
    if name not in KERNELS:
        raise MissingKernelDataError(f"{what}={name!r} is unknown; known: {', '.join(KERNELS)}")
    return KERNELS[name]


def select(
    arch: str,
    family: str,
    fmt: str = "*",
    overrides: dict[str, str] | None = None,
    engine: dict[str, str] | None = None,
) -> KernelPath:
    """The kernel path for an op. `overrides` (a scenario's or a what-if's) maps an op family to a
    path name and wins; `engine` maps `family:format` or `family` to the path the serving engine
    runs on this architecture (planner/engines profiles, sourced); then the architecture's default."""
    fallback = _FALLBACK_FAMILY.get(family)
    for fam_key in (family, fallback):
        if overrides and fam_key in overrides:
            return _named(overrides[fam_key], f"kernel override {family}")
    for key in (f"{family}:{fmt}", family):
        if engine and key in engine:
            return _named(engine[key], f"engine kernel {key}")
    fam = ARCH_FAMILY.get(arch)
    if fam is None:
        raise MissingKernelDataError(f"no kernel data for architecture {arch!r}")
    default: str | None = _DEFAULTS.get((fam, family, fmt)) or _DEFAULTS.get((fam, family, "*"))
    if default is None and fallback is not None:
        return select(arch, fallback, fmt, overrides, engine)
    if default is None:
        raise MissingKernelDataError(f"no kernel path for {family} ({fmt}) on {arch}")
    return KERNELS[default]


__all__ = [
    "ARCH_FAMILY",
    "KERNELS",
    "TENSOR_CORE_ALTERNATIVE",
    "KernelPath",
    "OpFamily",
    "chosen_paths",
    "path_for",
    "select",
    "tensor_core_alternatives",
]


def chosen_paths(inst: InstanceSpec) -> dict[str, str]:
    """The paths `inst` runs by choice rather than by the architecture's default: the engine's
    (`family:format` -> path), with the model's own expert kernels on this architecture over them. A
    model's entry also covers the families that fall back to its family (`moe_gemv` to `moe_gemm`), so
    an engine's decode-only choice cannot win over it."""
    moe = inst.model.moe
    own = dict(moe.kernels.get(ARCH_FAMILY.get(inst.hardware.arch, ""), {})) if moe else {}
    if not own:
        return inst.runtime.engine_kernels
    for key, path in list(own.items()):
        fam, sep, fmt = key.partition(":")
        for child, parent in _FALLBACK_FAMILY.items():
            if parent == fam:
                own.setdefault(f"{child}{sep}{fmt}", path)
    return {**inst.runtime.engine_kernels, **own}


def path_for(inst: InstanceSpec, family: str, fmt: str = "*") -> KernelPath:
    """The kernel path an op of `inst` runs: the scenario's overrides, then the model's own expert
    kernels on this architecture (`MoE.kernels`), then the engine's choice, then the default."""
    return select(inst.hardware.arch, family, fmt, inst.runtime.kernel_overrides, chosen_paths(inst))


def tensor_core_alternatives(inst: InstanceSpec) -> dict[str, str]:
    """Op family -> the tensor-core path that would replace each CUDA-core fallback `inst` runs (sparse
    attention, the DSA indexer, decode-only MoE): the what-if `planner explain` and the dashboard offer."""
    m = inst.model
    families = [("sparse_attn", "*"), ("indexer", "*")] if m.sparse_attention else []
    if m.moe is not None:
        families.append(("moe_gemv", inst.precision.moe))
    out = {}
    for family, fmt in families:  # only the ops the model runs (a GQA model has no indexer to replace)
        name = path_for(inst, family, fmt).name
        if name in TENSOR_CORE_ALTERNATIVE:
            out[family] = TENSOR_CORE_ALTERNATIVE[name]
    return out
