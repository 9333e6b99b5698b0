"""Weight and KV formats: bytes per parameter, the tensor-core rate each runs at, and which
combinations an architecture can run.

Bytes include the scale factors: FP8 block-128x128 (one fp32 per 16,384 weights), NVFP4 (one
e4m3 scale per 16 values, NVIDIA NVFP4 format), MXFP4 (one e8m0 per 32, OCP MX spec), W4A16
(one bf16 scale per group of 128, Marlin/GPTQ layout).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from roofline.catalog.schema import HardwareSpec, StrictModel
from roofline.errors import PrecisionError

WeightFormat = Literal["bf16", "fp8", "nvfp4", "mxfp4", "w4a16"]
KVFormat = Literal["bf16", "fp8"]
RateKey = Literal["bf16", "fp8", "fp4"]

BYTES_PER_PARAM: dict[str, float] = {
    "bf16": 2.0,
    "fp8": 1.0 + 4.0 / (128 * 128),
    "nvfp4": 0.5 + 1.0 / 16,
    "mxfp4": 0.5 + 1.0 / 32,
    "w4a16": 0.5 + 2.0 / 128,
}

# Bytes per activation element moved by EP dispatch for each expert format: NVFP4 experts
# take NVFP4-quantized tokens (DeepEP fused NVFP4 dispatch, seed 000), FP8 experts FP8 tokens
# (DeepEP FP8 dispatch), the rest BF16. Combine always returns BF16.
DISPATCH_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp8": 1.0 + 4.0 / 128,
    "nvfp4": 0.5 + 1.0 / 16,
    "mxfp4": 2.0,
    "w4a16": 2.0,
}


class PrecisionMix(StrictModel):
    """Formats of one deployment. `attention` is the arithmetic of the attention kernel
    (fp8 attention reads an fp8 KV cache and runs FP8 tensor-core MMAs); `dense` covers the
    attention projections, dense FFN layers, shared experts; `moe` the routed experts."""

    attention: KVFormat = "bf16"
    kv_cache: KVFormat = "bf16"
    dense: WeightFormat = "fp8"
    moe: WeightFormat = "fp8"
    lm_head: WeightFormat = Field(default="bf16")


def gemm_rate_key(fmt: str, hw: HardwareSpec, field: str) -> RateKey:
    """The tensor-core rate a GEMM with weights in `fmt` runs at on `hw`, or a PrecisionError."""
    if fmt == "bf16":
        return "bf16"
    if fmt == "fp8":
        return "fp8"
    if fmt == "nvfp4":
        if not hw.is_blackwell or hw.peak_tflops.fp4 is None:
            raise PrecisionError(
                f"{field}: nvfp4 needs FP4 tensor cores, native only on Blackwell "
                f"(sm_100/sm_103/sm_120); {hw.id} is {hw.arch}. Allowed here: bf16, fp8, mxfp4, w4a16"
            )
        return "fp4"
    if fmt == "mxfp4":
        # Hopper has no FP4 MMA: MXFP4 weights are dequantized to BF16 (Triton / Marlin path). On
        # Blackwell the engines multiply them with MXFP8 activations (TensorRT-LLM gpt-oss MoE support
        # matrix, NVIDIA/TensorRT-LLM #6908: "mxfp8 (Blackwell)"; SGLang's flashinfer_mxfp4 runner), an
        # f8f6f4 MMA at the FP8 rate: no engine quantizes activations to FP4 for an MXFP4 checkpoint
        return "fp8" if hw.is_blackwell and hw.peak_tflops.fp8 else "bf16"
    if fmt == "w4a16":
        return "bf16"
    raise PrecisionError(f"{field}: unknown format {fmt!r}; allowed: bf16, fp8, nvfp4, mxfp4, w4a16")


def peak_flops(hw: HardwareSpec, key: RateKey) -> float:
    """Dense tensor-core peak in FLOP/s."""
    value = getattr(hw.peak_tflops, key)
    if value is None:
        raise PrecisionError(f"{hw.id} has no {key} tensor-core rate")
    return float(value) * 1e12


def validate_mix(mix: PrecisionMix, hw: HardwareSpec) -> None:
    """Raise PrecisionError for any field the hardware cannot run."""
    gemm_rate_key(mix.dense, hw, "precision.dense")
    gemm_rate_key(mix.moe, hw, "precision.moe")
    gemm_rate_key(mix.lm_head, hw, "precision.lm_head")
    if mix.attention == "fp8" and mix.kv_cache != "fp8":
        raise PrecisionError("precision.attention: fp8 attention reads an fp8 KV cache; set kv_cache: fp8")
