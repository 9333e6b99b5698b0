"""The kernel-path table: each path's tensor-core use, compute and memory efficiency priors, fixed
cost per launch, the rate its MMAs run at and how a grouped GEMM pads its rows (`tile_m`, `token_tile`,
`weight_reuse`), with the source of every number. `roofline.kernels` selects a path for an op
(architecture, family, format; the engine's and the model's own choices; what-if overrides); this
module holds only the data and its Blackwell derating (SM100_DEPLOYED_COMPUTE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class KernelPath:
    name: str
    tensor_cores: bool
    compute_eff: float
    memory_eff: float
    fixed_s: float
    source: str
    tile_m: int = 0
    token_tile: bool = False  # tile_m is the largest token tile; a launch's is the power of two its rows fit
    weight_reuse: bool = True
    math: Literal["bf16", "fp8", "fp4"] | None = None  # the MMA rate, where not the op's


def _k(name: str, tc: bool, ce: float, me: float, fixed_us: float, src: str, **kw: object) -> KernelPath:
    return KernelPath(name, tc, ce, me, fixed_us * 1e-6, src, **kw)  # type: ignore[arg-type]


_DEV = "shared/DEVICE.md (measured on the project's H200)"

# Share of the isolated-kernel compute efficiency that SGLang's 2025 Blackwell stack reached in
# serving. Fitted: the four GB200 anchors of seed 000 (prefill and decode, BF16/FP8 and
# FP8/NVFP4) each need the same ~0.7x on throughput; one factor for the architecture, not per
# anchor. Consistent with FlashMLA's "not optimized" 16% on B200 and FlashInfer #3400.
SM100_DEPLOYED_COMPUTE = 0.6


def _bw(name: str, ce: float, me: float, fixed_us: float, src: str, **kw: object) -> KernelPath:
    """A Blackwell datacenter tensor-core path, its compute efficiency derated as above."""
    return _k(
        name,
        True,
        ce * SM100_DEPLOYED_COMPUTE,
        me,
        fixed_us,
        f"{src}; compute x{SM100_DEPLOYED_COMPUTE} (SM100_DEPLOYED_COMPUTE)",
        **kw,
    )


KERNELS: dict[str, KernelPath] = {
    p.name: p
    for p in [
        # --- Hopper (sm_90)
        _k("cublas-bf16-sm90", True, 0.72, 0.70, 3, f"{_DEV}: 717 TF bf16 8192^3; decode GEMMs 1.5-3.5 TB/s"),
        _k(
            "deepgemm-fp8-sm90",
            True,
            0.65,
            0.65,
            3,
            "DeepGEMM README (dense FP8 up to 1550 of 1979 TF; decode shapes 45-80% of bandwidth)",
        ),
        _k(
            "deepgemm-grouped-fp8-sm90",
            True,
            0.60,
            0.58,
            6,
            f"DeepGEMM grouped 1214-1346 TF (61-68%); {_DEV}: fp8 grouped 2.7 TB/s of weights",
            tile_m=64,
        ),
        _k(
            "marlin-w4a16-sm90",
            True,
            0.45,
            0.55,
            6,
            "Marlin W4A16 MoE (dequantize to BF16 MMA); rows padded to 16: vLLM fused_marlin_moe picks "
            "block_size_m from 8/16/32/48/64 by tokens per expert (MMA m16)",
            tile_m=16,
            math="bf16",
        ),
        _k(
            "flashmla-sm90",
            True,
            0.67,
            0.85,
            9,
            f"FlashMLA README H800: 3000 GB/s memory-bound, 660 TF compute-bound; {_DEV}: 19 us at B=1",
        ),
        _k(
            "flashmla-sparse-sm90",
            True,
            0.41,
            0.75,
            9,
            "FlashMLA README: sparse FP8 decode 410 TF on H800 (FP8 KV dequantized to BF16 for the MMAs: "
            "FlashMLA docs/20250929-hopper-fp8-sparse-deep-dive.md)",
            math="bf16",
        ),
        _k("flashmla-sparse-prefill-sm90", True, 0.65, 0.80, 15, "FlashMLA README: sparse MLA prefill 640 TF on H800"),
        _k("fa3-prefill-sm90", True, 0.60, 0.80, 20, f"{_DEV}: flashinfer fa3 ragged prefill ~600 TF"),
        _k("fa3-gqa-decode-sm90", True, 0.50, 0.80, 10, "FlashAttention-3 decode, memory-bound"),
        _k("deepgemm-mqa-logits-sm90", True, 0.50, 0.70, 4, "DeepGEMM fp8 MQA logits (DSA indexer)"),
        _k(
            "elementwise-sm90",
            False,
            1.0,
            0.70,
            1.6,
            f"{_DEV}: device copy 4.3 TB/s read+write (~90%); 1.6 us per small kernel: the 61-layer "
            "runtime engine's ~9,800 non-GEMM kernels take 16.0 ms of a batch-1 decode step "
            "(calibration/data/engine/engine_decode_61layers.json)",
        ),
        # --- Blackwell datacenter (sm_100, sm_103)
        _bw(
            "cutlass-gemm-sm100",
            0.70,
            0.75,
            3,
            "DeepGEMM/CUTLASS on B200 (similar utilisation to Hopper; FlashMLA README MHA 65% of peak)",
        ),
        _bw(
            "cute-dsl-grouped-sm100",
            0.58,
            0.65,
            6,
            "FlashInfer CuTe-DSL masked grouped GEMM (seed 000); DeepEP/DeepGEMM B200 results",
            tile_m=128,
        ),
        _bw(
            "trtllm-gen-mla-sm100",
            0.50,
            0.80,
            8,
            "FlashInfer trtllm-gen MLA; FlashInfer #3400: several times faster than fa2 (<300 TF) on B200",
        ),
        _bw(
            "dsa-sparse-sm100",
            0.30,
            0.75,
            8,
            "FlashMLA README: sparse FP8 decode 350 TF on B200 (FP8 KV dequantized to BF16 MMAs)",
            math="bf16",
        ),
        _bw(
            "trtllm-sparse-mla-fp8-sm100",
            0.30,
            0.75,
            8,
            "TensorRT-LLM sparse MLA (tech blog 15: TMALDG.Gather4 kernel, 'KV cache: Per-tensor FP8, Math: "
            "Per-tensor FP8'): FP8 MMAs whatever the attention precision says; efficiency of dsa-sparse-sm100",
            math="fp8",
        ),
        _bw(
            "flashinfer-mxfp4-bf16-grouped-sm100",
            0.58,
            0.65,
            6,
            "vLLM on SM100 runs MXFP4 MoE as FlashInfer MXFP4 x BF16 by default (vllm-project/vllm #23008, "
            "#23696: MXFP8 activations only with VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1); efficiency of "
            "cute-dsl-grouped-sm100; token tiles as trtllm-gen-mxfp4-sm100 (the same FlashInfer "
            "trtllm_fp4_block_scale_moe kernels)",
            tile_m=128,
            token_tile=True,
            math="bf16",
        ),
        _bw(
            "trtllm-gen-mxfp4-sm100",
            0.58,
            0.65,
            6,
            "TensorRT-LLM's TRTLLM MoE backend, its default for MXFP4 weights with MXFP8 activations on "
            "B200/GB200/B300/GB300 (gpt-oss deployment guide, MoE backend support matrix), and SGLang's "
            "flashinfer_mxfp4 runner on sm_100 (the same FlashInfer trtllm-gen kernels): batched GEMMs with "
            "the tokens on the MMA's N side, each expert's token tile the next power of two of its tokens, 8 "
            "to 128 (TensorRT-LLM trtllm_gen_custom_ops.calculate_tile_tokens_dim); efficiency of "
            "cute-dsl-grouped-sm100",
            tile_m=128,
            token_tile=True,
        ),
        _bw(
            "deepgemm-fp8-fp4-grouped-sm100",
            0.58,
            0.65,
            6,
            "DeepGEMM m-grouped FP8 x FP4 GEMMs on SM100 (contiguous, masked, Mega MoE: "
            "m_grouped_fp8_fp4_gemm_nt_contiguous), FP8 activations, each expert's rows aligned to the "
            "128-row M tile (get_mk_alignment_for_contiguous_layout); efficiency of cute-dsl-grouped-sm100",
            tile_m=128,
        ),
        _bw("flashmla-sparse-prefill-sm100", 0.64, 0.80, 15, "FlashMLA README: sparse MLA prefill 1450 TF on B200"),
        _bw("fmha-prefill-sm100", 0.65, 0.80, 15, "FlashMLA README: MHA prefill 1460 TF on B200"),
        _bw("gqa-decode-sm100", 0.50, 0.80, 8, "trtllm-gen decode attention, memory-bound"),
        _bw("deepgemm-mqa-logits-sm100", 0.50, 0.75, 4, "DeepGEMM fp8 MQA logits on SM100"),
        _k("elementwise-sm100", False, 1.0, 0.70, 2, "memory-bound elementwise, as on Hopper"),
        # --- RTX PRO 6000 Blackwell Server (sm_120): no tcgen05, no TMEM, no fused DeepSeek kernels
        _k(
            "cublas-bf16-sm120",
            True,
            0.80,
            0.70,
            5,
            "zzc0721/torch-performance-test-data #162: 417 TF bf16 on RTX PRO 6000 Server",
        ),
        _k(
            "triton-block-fp8-sm120",
            True,
            0.50,
            0.30,
            6,
            "SGLang #39872: generic block-FP8 Triton GEMMs underfill sm_120 at decode",
        ),
        _k("cutlass-fp4-sm120", True, 0.55, 0.60, 6, "FlashInfer mm_fp4 cutlass on sm_120"),
        _k(
            "cutlass-fp4-grouped-sm120",
            True,
            0.45,
            0.55,
            8,
            "native cutlass FP4 grouped GEMM on sm_120 (seed 003: NVFP4 moved MoE onto tensor cores)",
            tile_m=128,
        ),
        _k("triton-fused-moe-sm120", True, 0.40, 0.50, 8, "Triton fused_moe on sm_120", tile_m=64),
        _k(
            "triton-mxfp4-slot-gemv-sm120",
            False,
            1.0,
            0.0404,
            8,
            "seed 003 profile: MXFP4 MoE slot-GEMV runs on CUDA cores, 38% of a 510 ms step at C=16 "
            "(TP4); memory efficiency fitted to that profile by calibration/seed003.py",
            weight_reuse=False,
        ),
        _k(
            "triton-sparse-mla-sm120",
            False,
            0.000292,
            0.60,
            10,
            "seed 003 profile: sparse-MLA attention runs as a Triton CUDA-core fallback, 39% of a 510 ms "
            "step at C=16 (TP4); efficiency vs CUDA-core FP32 peak fitted to that profile by "
            "calibration/seed003.py (latency-bound: ~0.03% of peak)",
        ),
        _k(
            "triton-sparse-prefill-sm120",
            False,
            0.05,
            0.50,
            15,
            "SGLang #30272: FlashMLA sparse prefill covers SM90a/SM100f only; sm_120 prefill runs a Triton "
            "CUDA-core kernel; 5% of FP32 peak assumed (many queries per launch, unlike decode)",
        ),
        _k(
            "marlin-w4a16-sm120",
            True,
            0.40,
            0.50,
            8,
            "vLLM #30135/#40153: MXFP4 MoE falls back to Marlin W4A16 on SM120 (prefill batches); rows "
            "padded to 16 (fused_marlin_moe block_size_m, MMA m16)",
            tile_m=16,
            math="bf16",
        ),
        _k(
            "tensor-core-sparse-mla-sm120",
            True,
            0.40,
            0.60,
            10,
            "hypothetical split-K tensor-core sparse-MLA kernel for sm_120 (seed 003 Part VI); "
            "efficiency assumed equal to FA2-class kernels on this chip",
        ),
        _k("fa2-xqa-mla-sm120", True, 0.40, 0.60, 10, "FlashInfer MLA fa2/xqa on SM12x (HMMA)"),
        _k(
            "fmha-v2-prefill-sm120",
            True,
            0.80,
            0.70,
            15,
            "FlashInfer/TRT-LLM fmha_v2 (HMMA, sm_mma=80) on SM120; compute_eff fitted (bench/fit_sm120_attention.py, "
            "2026-12-05; prior 0.5, a guess) with gqa-decode-sm120's memory_eff on the 27 train RTX PRO 6000 anchors "
            "of validation/public/trtllm-perf-overview.yaml: 14 -> 22 within 15%, median |error| 14.5% -> 5.2%",
        ),
        _k(
            "gqa-decode-sm120",
            True,
            0.45,
            0.90,
            8,
            "FlashInfer fa2/xqa decode on SM12x; memory_eff fitted with fmha-v2-prefill-sm120 (bench/"
            "fit_sm120_attention.py; prior 0.7, a guess): the error on those anchors grew with the context in "
            "flight (Qwen3-30B-A3B on one GPU -7% at 1000/1000, -20% at 1024/8192)",
        ),
        _k("elementwise-sm120", False, 1.0, 0.60, 3, "memory-bound elementwise on GDDR7"),
    ]
}
