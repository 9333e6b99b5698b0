"""TP all-reduces of small messages take the engine's custom all-reduce (roofline.comm), not NCCL."""

from __future__ import annotations

import pytest

from planner.engines import runtime_options
from roofline.catalog import get_hardware
from roofline.comm import CUSTOM_ALLREDUCE, allreduce_time
from roofline.deployment import Parallelism

MB = 2**20


def test_small_messages_take_the_custom_all_reduce_within_its_limit() -> None:
    hw = get_hardware("h200-sxm")
    nccl = allreduce_time(hw, 8, 0.5 * MB)
    custom = allreduce_time(hw, 8, 0.5 * MB, custom_max_bytes=8 * MB)
    wire = 2 * 7 / 8 * 0.5 * MB
    assert custom == pytest.approx(CUSTOM_ALLREDUCE.latency_s + wire / (450e9 * CUSTOM_ALLREDUCE.efficiency))
    assert custom < nccl / 2  # measured NCCL at world 2: ~43 us latency per call
    # above the engine's limit, or at a world size the custom kernel does not support: NCCL
    assert allreduce_time(hw, 8, 16 * MB, custom_max_bytes=8 * MB) == allreduce_time(hw, 8, 16 * MB)
    assert allreduce_time(hw, 3, 0.5 * MB, custom_max_bytes=8 * MB) == allreduce_time(hw, 3, 0.5 * MB)


def test_large_messages_keep_nccl_when_it_is_faster() -> None:
    hw = get_hardware("h200-sxm")
    assert allreduce_time(hw, 8, 8 * MB, custom_max_bytes=8 * MB) == allreduce_time(hw, 8, 8 * MB)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_engine_profile_states_its_custom_all_reduce_limit(engine: str) -> None:
    rt = runtime_options(engine, "aggregated", Parallelism(gpus=8, tp=8), get_hardware("h200-sxm"))
    assert rt.custom_allreduce_max_bytes == 8 * MB


def test_an_all_reduce_across_nodes_uses_every_nic_of_a_node():
    """TP16 over two HGX nodes: NCCL runs a channel per NIC, so the ring's inter-node traffic spreads over
    the node's eight NICs (bus bandwidth ~320 GB/s, NVIDIA/nccl #2409: 216-470 GB/s measured/expected),
    not one GPU's NIC (~40 GB/s, which priced a 16k-token prefill's all-reduces at ~9 ms each)."""
    hw = get_hardware("h100-sxm")
    big = 235e6  # 16k tokens x 7168 x 2 bytes
    wire = 2 * 15 / 16 * big
    cross = allreduce_time(hw, 16, big)
    assert cross >= 40e-6 + wire / (8 * hw.nic_bytes_per_s * 0.80) * (1 - 1e-9)  # at most the node's NICs
    assert cross < 40e-6 + wire / (hw.nic_bytes_per_s * 0.80) / 4  # far above one NIC
    assert cross < 1.5 * allreduce_time(hw, 8, big)  # about one node's NVLink ring, not 8x slower
    wire12 = 2 * 11 / 12 * big  # 8 + 4 GPUs, filled in order: the 4-GPU node's NICs bind (review)
    assert allreduce_time(hw, 12, big) >= 40e-6 + wire12 / (4 * hw.nic_bytes_per_s * 0.80) * (1 - 1e-9)
