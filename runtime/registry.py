"""Which kernel runs each op on each GPU architecture.

sm_90 (H100/H200) is what this project measures. The sm_100/sm_103 and sm_120 entries name
flashinfer's documented APIs for those chips (flashinfer 0.7.2: trtllm-gen and cute-dsl MLA on
SM100, xqa/fa2 on SM12x, `mm_fp4`, trtllm-gen fused MoE on SM100, Marlin/cutlass on SM120) and
are selected by the same function, but are not verified here: `verified` says so. `build` says
what `runtime.build_check` found when compiling them for that architecture on an H200 machine
(compile only, nothing run; calibration/data/blackwell_builds.json holds the run).
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.errors import MissingKernelDataError


@dataclass(frozen=True, slots=True)
class Choice:
    api: str
    backend: str = ""
    verified: bool = False
    note: str = ""
    build: str = ""  # compile-only result for an architecture not run here


BUILDS = "builds, not run here"
TORCH = "builds, not run here (prebuilt in torch 2.11 cu130, whose arch list has sm_100 and sm_120)"
CUBINS = "not built here: flashinfer downloads trtllm-gen cubins at build time, and the device has no network"
SLOW = "did not finish building within 300 s on 16-32 cores (not known to fail)"


REGISTRY: dict[str, dict[str, Choice]] = {
    "sm_90": {
        "mla_decode": Choice(
            "flashinfer.mla.BatchMLAPagedAttentionWrapper",
            "fa3",
            True,
            "fp8 KV needs BF16 queries and per-tensor KV scales",
        ),
        "attn_prefill": Choice("flashinfer.BatchPrefillWithRaggedKVCacheWrapper", "fa3", True, "qk 192 / vo 128"),
        "gemm_bf16": Choice("torch.matmul", "cublas", True),
        "gemm_fp8_decode": Choice(
            "torch._scaled_mm",
            "per-tensor scales",
            True,
            "faster than row-wise or block scales at M <= 64 (shared/DEVICE.md)",
        ),
        "gemm_fp8_prefill": Choice("torch._scaled_mm", "1x128 / 128x128 block scales", True),
        "moe_gemm_bf16": Choice("torch._grouped_mm", "", True),
        "moe_gemm_fp8": Choice(
            "torch._scaled_grouped_mm",
            "row-wise scales",
            True,
            "flashinfer cutlass_fused_moe's JIT build does not finish on the device",
        ),
    },
    "sm_100": {
        "mla_decode": Choice("flashinfer.mla.BatchMLAPagedAttentionWrapper", "trtllm-gen", build=CUBINS),
        "attn_prefill": Choice("flashinfer.BatchPrefillWithRaggedKVCacheWrapper", "cutlass", build=BUILDS),
        "gemm_bf16": Choice("torch.matmul", "cublas", build=TORCH),
        "gemm_fp8_decode": Choice("flashinfer.gemm_fp8_nt_groupwise", "cutlass", build=SLOW),
        "gemm_fp8_prefill": Choice("flashinfer.gemm_fp8_nt_groupwise", "cutlass", build=SLOW),
        "gemm_fp4": Choice("flashinfer.mm_fp4", "cutlass", build=BUILDS),
        "moe_gemm_bf16": Choice("torch._grouped_mm", "", build=TORCH),
        "moe_gemm_fp8": Choice("flashinfer.fused_moe.trtllm_fp8_block_scale_moe", "trtllm-gen", build=CUBINS),
        "moe_gemm_fp4": Choice("flashinfer.fused_moe.trtllm_fp4_block_scale_moe", "trtllm-gen", build=CUBINS),
    },
    "sm_120": {
        "mla_decode": Choice(
            "flashinfer.mla.BatchMLAPagedAttentionWrapper", "xqa", note="BF16 or FP8 Q = KV", build=BUILDS
        ),
        "attn_prefill": Choice("flashinfer.BatchPrefillWithRaggedKVCacheWrapper", "fa2", build=BUILDS),
        "gemm_bf16": Choice("torch.matmul", "cublas", build=TORCH),
        "gemm_fp8_decode": Choice("flashinfer.gemm_fp8_nt_groupwise", "cutlass", build=SLOW),
        "gemm_fp8_prefill": Choice("flashinfer.gemm_fp8_nt_groupwise", "cutlass", build=SLOW),
        "gemm_fp4": Choice("flashinfer.mm_fp4", "cutlass", build=SLOW),
        "moe_gemm_bf16": Choice("torch._grouped_mm", "", build=TORCH),
        "moe_gemm_fp4": Choice(
            "flashinfer.fused_moe.cutlass_fused_moe", "cutlass", note="no trtllm-gen on SM12x", build=SLOW
        ),
    },
}
ARCH = {(9, 0): "sm_90", (10, 0): "sm_100", (10, 3): "sm_100", (12, 0): "sm_120"}


def arch_of(major: int, minor: int) -> str:
    if (major, minor) not in ARCH:
        raise MissingKernelDataError(
            f"no kernel registry for compute capability {major}.{minor}; "
            f"known: {', '.join(f'{a}.{b}' for a, b in ARCH)}"
        )
    return ARCH[(major, minor)]


def choose(arch: str, op: str, m: int | None = None) -> Choice:
    """The kernel for `op` on `arch`; FP8 dense GEMMs pick by the token count `m`."""
    table = REGISTRY.get(arch)
    if table is None:
        raise MissingKernelDataError(f"no kernel registry for {arch}; known: {', '.join(REGISTRY)}")
    key = op
    if op == "gemm_fp8":
        key = "gemm_fp8_decode" if (m or 0) <= 128 else "gemm_fp8_prefill"
    if key not in table:
        raise MissingKernelDataError(f"{arch} has no kernel for {op}; known: {', '.join(table)}")
    return table[key]
