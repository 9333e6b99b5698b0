"""Which kernel path prices an op, per GPU architecture (the paths, their efficiency priors and sources:
`roofline.kernel_paths`).

A kernel path turns an op's FLOPs and bytes into time:
    t = launches x fixed_s + max(flops / (peak x compute_eff), bytes / (bandwidth x memory_eff))
where `peak` is the tensor-core rate of the op's precision (or of the path's own `math` where its MMAs
run at another rate than the operands' storage: FlashMLA dequantizes an FP8 KV cache to BF16, Marlin
and vLLM's SM100 MXFP4 MoE multiply BF16 activations), or the CUDA-core FP32 rate for paths without
tensor cores (the sm_120 fallbacks of seed 003). `tile_m` pads grouped-GEMM rows to the
MMA tile. `weight_reuse=False` marks slot-GEMV kernels that re-read an expert's weights for
every token routed to it.

Selection is a registry keyed by (architecture, op family, weight format); an engine's own choice on
an architecture (`engine`: `family:format` -> path, from planner/engines, e.g. SGLang's MXFP4
slot-GEMV on sm_120) comes before it, and `overrides` (op family -> path name) before both, so a
what-if can swap paths, e.g. a tensor-core sparse-MLA kernel on sm_120. `path_for` is the one
entry for an instance's op: it puts a model's own expert kernels (`MoE.kernels`: DeepSeek-V4's FP4
experts run on DeepGEMM in every engine that serves it, not on the engines' MXFP4 default) above the
engine's choice. Besides that, this module knows no model and no batch; `roofline.step` prices ops with it.
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


__all__ = ["ARCH_FAMILY", "KERNELS", "TENSOR_CORE_ALTERNATIVE", "KernelPath", "OpFamily", "select"]


def chosen_paths(inst: InstanceSpec) -> dict[str, str]:
    """The paths `inst` runs by choice rather than by the architecture's default: the engine's
    (`family:format` -> path), with the model's own expert kernels on this architecture over them."""
    moe = inst.model.moe
    own = moe.kernels.get(ARCH_FAMILY.get(inst.hardware.arch, ""), {}) if moe else {}
    return {**inst.runtime.engine_kernels, **own}


def path_for(inst: InstanceSpec, family: str, fmt: str = "*") -> KernelPath:
    """The kernel path an op of `inst` runs: the scenario's overrides, then the model's own expert
    kernels on this architecture (`MoE.kernels`), then the engine's choice, then the default."""
    return select(inst.hardware.arch, family, fmt, inst.runtime.kernel_overrides, chosen_paths(inst))
