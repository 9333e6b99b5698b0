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


def test_every_blackwell_kernel_records_what_its_compile_only_build_did():
    """The registry's `build` notes agree with the committed build check (runtime.build_check on the
    H200 machine): a module that built says so, a trtllm-gen module that needs downloaded cubins
    says why it was not built, a module still compiling at the deadline says that."""
    import json
    from pathlib import Path

    from runtime.registry import BUILDS, CUBINS, SLOW, TORCH

    run = json.loads((Path(__file__).resolve().parents[2] / "calibration/data/blackwell_builds.json").read_text())
    expect = {}
    for m in run["modules"]:
        note = BUILDS if m["status"].startswith("builds") else SLOW if "did not finish" in m["status"] else None
        if note is None:
            assert "checksums.txt" in m["log_tail"], m  # the only failure seen: no network for cubins
            note = CUBINS
        for op in (m["op"], *run["aliases"].get(m["op"], ())):
            if op in REGISTRY[m["arch"]]:
                expect[(m["arch"], op)] = note
    for arch in ("sm_100", "sm_120"):
        assert run["torch"][arch].startswith("builds")
        for op in ("gemm_bf16", "moe_gemm_bf16"):
            expect[(arch, op)] = TORCH
    got = {(arch, op): c.build for arch in ("sm_100", "sm_120") for op, c in REGISTRY[arch].items()}
    assert got == expect
