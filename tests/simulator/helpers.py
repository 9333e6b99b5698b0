"""Small scenario builders shared by the simulator tests."""

from __future__ import annotations

from typing import Any

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import Resolved, resolve

DISAGG_GB200 = {
    "model": "deepseek-v3",
    "hardware": "gb200-nvl72",
    "deployment": {
        "prefill": {"instances": 2, "gpus_per_instance": 4, "dp_attention": 4, "ep": 4},
        "decode": {"gpus_per_instance": 16, "dp_attention": 16, "ep": 16},
    },
    "precision": {"attention": "fp8", "kv_cache": "fp8", "moe": "nvfp4"},
}
DISAGG_H200 = {
    "model": "deepseek-v3",
    "hardware": "h200-sxm",
    "deployment": {
        "prefill": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
        "decode": {"instances": 2, "gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
    },
    "precision": {"kv_cache": "fp8"},
}
AGG_QWEN = {
    "model": "qwen3-30b-a3b",
    "hardware": "h100-sxm",
    "deployment": {"aggregated": {"gpus_per_instance": 2, "tp": 2, "ep": 2}},
}
AGG_LLAMA = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "deployment": {"aggregated": {"gpus_per_instance": 1}}}


def scenario(
    base: dict[str, Any], workload: dict[str, Any], simulation: dict[str, Any] | None = None, **extra: Any
) -> Resolved:
    data = {**base, "workload": workload, **extra}
    if simulation is not None:
        data["simulation"] = simulation
    return resolve(parse_scenario(data))
