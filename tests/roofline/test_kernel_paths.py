"""Kernel paths chosen per architecture and weight format."""

from __future__ import annotations

from roofline.kernels import select


def test_hopper_mxfp4_experts_run_the_triton_upcast_path():
    """Hopper has no MXFP4 MMA: gpt-oss experts run OpenAI's Triton kernels, which decode the
    weights to BF16 in the kernel, so they run no faster than a BF16 GEMM; W4A16 keeps Marlin."""
    path = select("sm_90", "moe_gemm", "mxfp4")
    assert path.name == "triton-mxfp4-moe-sm90"
    assert path.compute_eff <= select("sm_90", "gemm", "bf16").compute_eff
    assert select("sm_90", "moe_gemm", "w4a16").name == "marlin-w4a16-sm90"
