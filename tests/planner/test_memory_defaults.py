"""Memory the engines size from: the catalog's capacity is what nvidia-smi reports (MiB), and
SGLang's default mem_fraction_static follows its own rule (sglang.yaml `mem_reserve`)."""

from __future__ import annotations

import pytest

from planner.engines import runtime_options
from roofline.catalog import get_hardware
from roofline.deployment import Parallelism

MIB = 2**20


@pytest.mark.parametrize(
    ("hw", "mib"),
    [("h100-sxm", 81559), ("h200-sxm", 143771), ("b200", 183359), ("gb200-nvl72", 189471), ("rtx-pro-6000", 97887)],
)
def test_capacity_is_what_nvidia_smi_reports(hw: str, mib: int) -> None:
    assert get_hardware(hw).mem_bytes == pytest.approx(mib * MIB, rel=1e-4)


def _sglang(hw: str, role: str, **par: int) -> float:
    return runtime_options("sglang", role, Parallelism(**par), get_hardware(hw)).mem_fraction


def test_sglang_rule_by_hand() -> None:
    # H200, TP8, aggregated: 512 + 1.5 x 8192 + 8/8 x 1024 + 2 x 512 = 14848 MiB reserved
    assert _sglang("h200-sxm", "aggregated", gpus=8, tp=8) == round((143771 - 14848) / 143771, 3)
    # B200, TP4: chunk 16384 above 160 GiB -> 512 + 24576 + 512 + 1024 = 26624 MiB
    assert _sglang("b200", "aggregated", gpus=4, tp=4) == round((183359 - 26624) / 183359, 3)
    # attention DP: the recipes' stated fraction (the flat profile value), not the rule
    assert _sglang("h200-sxm", "decode", gpus=8, dp_attention=8, ep=8) == 0.85
    # a prefill-only server captures no decode graphs; the 10 GiB floor holds on large GPUs
    assert _sglang("h200-sxm", "prefill", gpus=1) == round((143771 - 12928) / 143771, 3)


def test_stated_fraction_wins_and_other_engines_keep_theirs() -> None:
    hw = get_hardware("h200-sxm")
    par = Parallelism(gpus=8, tp=8)
    assert runtime_options("sglang", "aggregated", par, hw, stated={"mem_fraction": 0.7}).mem_fraction == 0.7
    assert runtime_options("vllm", "aggregated", par, hw).mem_fraction == pytest.approx(0.9)


def test_trtllm_splits_the_kv_pool_equally_between_window_sizes() -> None:
    """TRT-LLM's KV cache manager gives every attention-window size the same share by default;
    SGLang sizes its sliding-window pool at 0.8 tokens per full-layer token (swa_full_tokens_ratio);
    vLLM keeps only the window on sliding layers."""
    hw, par = get_hardware("h200-sxm"), Parallelism(gpus=1)
    assert runtime_options("trtllm", "aggregated", par, hw).kv_window_shares == "equal"
    sglang = runtime_options("sglang", "aggregated", par, hw)
    assert (sglang.kv_window_shares, sglang.swa_full_tokens_ratio) == ("ratio", 0.8)
    assert runtime_options("vllm", "aggregated", par, hw).kv_window_shares == "window"


@pytest.mark.parametrize(
    ("hw", "chunk"), [("h100-sxm", 8192), ("h200-sxm", 8192), ("b200", 16384), ("gb200-nvl72", 16384)]
)
def test_sglang_default_chunk_follows_gpu_memory_and_prices_the_same_rule_as_its_memory(hw: str, chunk: int) -> None:
    """chunked_prefill_size 8192 below 160 GiB, 16384 above (SGLang server_args.py); attention-DP
    ranks keep a full chunk each, as the published DP-attention launches set it."""
    for par in (Parallelism(gpus=8, tp=8), Parallelism(gpus=8, dp_attention=8, ep=8)):
        assert runtime_options("sglang", "aggregated", par, get_hardware(hw)).prefill_tokens_per_rank == chunk
