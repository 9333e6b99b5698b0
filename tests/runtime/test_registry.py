"""Kernel choice by architecture is data, testable on the CPU."""

from __future__ import annotations

import pytest

from roofline.errors import MissingKernelDataError
from runtime.registry import REGISTRY, arch_of, choose


def test_hopper_choices_are_the_verified_ones():
    assert arch_of(9, 0) == "sm_90"
    assert choose("sm_90", "mla_decode").backend == "fa3"
    assert all(c.verified for c in REGISTRY["sm_90"].values())


def test_fp8_dense_gemm_uses_per_tensor_scales_at_decode_and_blocks_at_prefill():
    assert choose("sm_90", "gemm_fp8", m=16).backend == "per-tensor scales"
    assert "block" in choose("sm_90", "gemm_fp8", m=4096).backend


def test_blackwell_and_sm120_entries_exist_but_are_unverified():
    assert choose(arch_of(10, 0), "mla_decode").backend == "trtllm-gen"
    assert choose(arch_of(12, 0), "mla_decode").backend == "xqa"
    assert not any(c.verified for arch in ("sm_100", "sm_120") for c in REGISTRY[arch].values())


def test_unknown_architectures_and_ops_say_what_is_known():
    with pytest.raises(MissingKernelDataError, match=r"known: 9\.0"):
        arch_of(8, 0)
    with pytest.raises(MissingKernelDataError, match="has no kernel for gemm_fp4"):
        choose("sm_90", "gemm_fp4")
