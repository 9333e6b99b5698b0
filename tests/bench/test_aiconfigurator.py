"""AIConfigurator side by side: how an anchor becomes AIC estimate inputs (bench/aic_inputs.py)
and how an AIC silicon row becomes anchors (bench/aiconfigurator_silicon_anchors.py). Neither
needs AIConfigurator installed."""

from __future__ import annotations

import csv
import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from planner.inputs.scenario import parse_as
from planner.search.validate import Anchor

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


aic = _load("aic_inputs")
conv = _load("aiconfigurator_silicon_anchors")

HEADER = (
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,"
    "moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,"
    "prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,"
    "prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,"
    "decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
)
AGG_ROW = (
    "r1,config_id=1; silicon_concurrency=256; wip=False,trtllm,1.2.0,deepseek-ai/DeepSeek-V3,b200_sxm,fp4,agg,"
    "1024,1024,nvfp4,nvfp4,4,1,1,64,8,8,,,,,,,,,,,,,,,906.6,21.37"
)
DISAGG_ROW = (
    "r2,config_id=2; silicon_concurrency=2048,trtllm,0.8.1,deepseek-ai/DeepSeek-R1,gb200,fp8,disagg,1024,8192,"
    "fp8,fp8,,,,,,,1,1,1,1,8,1,8,64,1,1,1,32,1,32,1877.1,24.49"
)


def _rows(*lines: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO("\n".join([HEADER, *lines]))))


def _anchor(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "x", "model": "deepseek-v3", "hardware": "h200-sxm", "engine": "sglang", "phase": "end-to-end",
        "deployment": {"aggregated": {"instances": 2, "gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8}},
        "precision": {"dense": "fp8", "moe": "nvfp4", "kv_cache": "unknown"}, "mtp": None,
        "workload": {"isl": 1000, "osl": 200, "concurrency": 32, "concurrency_scope": "total"},
        "metric": "ttft_ms", "value": 100.0,
    }  # fmt: skip
    return base | over


def test_agg_batch_is_per_attention_dp_rank_of_one_replica() -> None:
    """AIC's agg batch_size counts requests per attention-DP rank of one replica: 32 requests over
    2 instances x 8 DP ranks is batch 2; experts split over ep=8 with moe_tp = 8 / 8 = 1."""
    args = aic.aic_inputs(_anchor())
    assert args["batch_size"] == 2
    assert (args["tp_size"], args["attention_dp_size"], args["moe_ep_size"], args["moe_tp_size"]) == (1, 8, 8, 1)
    assert (args["gemm_quant_mode"], args["moe_quant_mode"]) == ("fp8_block", "nvfp4")
    assert "kvcache_quant_mode" not in args  # unknown is left for AIC to infer from the checkpoint


def test_disagg_decode_batch_and_workers() -> None:
    """A disaggregated anchor: decode batch per DP rank = total / (decode instances x dp), prefill batch 1."""
    dep = {
        "prefill": {"instances": 3, "gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8},
        "decode": {"instances": 2, "gpus_per_instance": 16, "tp": 1, "dp_attention": 16, "ep": 16},
    }
    args = aic.aic_inputs(_anchor(deployment=dep, workload={"isl": 1, "osl": 2, "concurrency": 64}))
    assert args["mode"] == "disagg"
    assert (args["prefill_num_workers"], args["decode_num_workers"], args["decode_batch_size"]) == (3, 2, 2)
    assert args["prefill_batch_size"] == 1


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"phase": "decode"}, "phase decode"),
        ({"hardware": "h800"}, "hardware h800"),
        ({"workload": {"isl": "unknown", "osl": 10, "concurrency": 4}}, "workload.isl"),
        ({"workload": {"isl": 10, "osl": 10, "concurrency": 5}}, "does not split evenly"),
        ({"metric": "max_users_at_slo"}, "max_users_at_slo"),
    ],
)
def test_unexpressible_anchors_name_the_reason(over: dict[str, Any], words: str) -> None:
    """What AIC cannot estimate faithfully is refused with a reason, never approximated."""
    with pytest.raises(aic.Unexpressible, match=words):
        aic.aic_inputs(_anchor(**over))


def test_input_throughput_from_aic_output_tokens() -> None:
    """AIC reports generated tokens/s per GPU; input tok/s per GPU is that / osl x isl."""
    assert aic.aic_metric("input_tok_s_per_gpu", {"tokens/s/gpu": 100.0}, 1000, 200) == pytest.approx(500.0)


def test_silicon_row_becomes_two_valid_anchors_with_the_measured_values() -> None:
    """Each consistent row gives a ttft and a tpot anchor that parse as anchors and carry the cells."""
    rows = _rows(AGG_ROW, DISAGG_ROW)
    assert len(conv.eligible(rows)) == 2
    made = conv.anchors_for(rows[0], AGG_ROW, "https://example")
    assert [a["value"] for a in made] == [906.6, 21.37]
    agg = made[0]["deployment"]["aggregated"]
    assert (agg["gpus_per_instance"], agg["dp_attention"], agg["ep"]) == (64, 64, 8)
    dec = conv.anchors_for(rows[1], DISAGG_ROW, "u")[1]["deployment"]["decode"]
    assert (dec["gpus_per_instance"], dec["ep"]) == (32, 32)
    for a in made:
        parse_as(Anchor, a, a["id"], "anchor")


def test_silicon_anchors_carry_the_aiperf_client_and_the_benchmark_rule_limits() -> None:
    """AIConfigurator's bench_run.sh runs AIPerf with 20 x concurrency profiled requests; its benchmark rule
    set launches the row's batch sizes (TRT-LLM max_batch_size per pool: prefill 1, decode the decode batch)
    and max_num_tokens isl + 1500 (prefill) or batch + isl + 1500 (agg), rounded up to the 32-token block."""
    rows = _rows(AGG_ROW, DISAGG_ROW)
    agg = conv.anchors_for(rows[0], AGG_ROW, "u")[0]
    assert (agg["client"], agg["simulation"]) == ("aiperf", {"requests": 20 * 256, "max_steps": 20 * 256 * 1025})
    assert agg["runtime"] == {"max_running_per_rank": 4, "max_prefill_tokens": 2528}  # 4 + 1024 + 1500 -> 32 x 79
    dis = conv.anchors_for(rows[1], DISAGG_ROW, "u")[0]
    isl = dis["workload"]["isl"]
    want = {
        "max_running_per_rank": {"prefill": 1, "decode": 64},
        "max_prefill_tokens": {"prefill": -(-(isl + 1500) // 32) * 32},
    }
    assert dis["runtime"] == want
    assert "benchmark rule set" in dis["notes"]
    assert dis["simulation"] == {"requests": 20 * 2048, "max_steps": 100_000_000}  # 8,192 steps each, capped

    for a in (agg, dis):
        parse_as(Anchor, a, a["id"], "anchor")


def test_silicon_limits_left_unknown_where_the_launched_value_is_uncertain() -> None:
    """SGLang divides --max-running-requests by dp_size, so a limit is stated only at DP 1; SGLang's
    whole-prompt --max-prefill-tokens is no chunk budget; its agg rows mix a prefill chunk into decode
    steps (enable_mixed_chunk); vLLM's and TRT-LLM's token budgets are stated."""
    launch = _load("aiconfigurator_launch")
    row = {"isl": "1024", "prefill_batch_size": "1", "decode_batch_size": "32", "batch_size": "8"}
    rt, note = launch.runtime(row, "sglang", True, {"prefill": 4, "decode": 8})
    assert rt == {}
    assert "// dp 4" in note
    rt, _ = launch.runtime(row, "sglang", True, {"prefill": 1, "decode": 1})
    assert rt == {"max_running_per_rank": {"prefill": 1, "decode": 32}}
    rt, _ = launch.runtime(row, "sglang", False, {"aggregated": 1})
    assert rt == {"max_running_per_rank": 8, "scheduler": "mixed"}
    rt, _ = launch.runtime(row, "vllm", True, {"prefill": 1, "decode": 1})
    assert rt == {"max_running_per_rank": {"prefill": 1, "decode": 32}, "max_prefill_tokens": {"prefill": 2524}}
    rt, _ = launch.runtime(row, "vllm", False, {"aggregated": 1})
    assert rt == {"max_running_per_rank": 8, "max_prefill_tokens": 8 + 1024 + 1500}
    sim, note = launch.client(12288, 1024)  # 245,760 requests ran; the simulator takes 200,000
    assert sim["requests"] == 200_000
    assert "first 200,000" in note


def test_inconsistent_rows_are_not_used() -> None:
    """A row whose agg batch x attention-DP is not its concurrency is left out, as is a wip row."""
    bad_batch = AGG_ROW.replace("fp4,agg,1024,1024,nvfp4,nvfp4,4,", "fp4,agg,1024,1024,nvfp4,nvfp4,3,")
    wip = AGG_ROW.replace("wip=False", "wip=True")
    assert conv.eligible(_rows(bad_batch, wip)) == []


def test_fp8_tries_the_other_aic_fp8_label_second() -> None:
    """Our `fp8` is per-tensor or block-scaled; AIC's label it has data for comes after the primary."""
    variants = aic.fp8_variants({"gemm_quant_mode": "fp8_block", "moe_quant_mode": "nvfp4"})
    assert variants == [
        {"gemm_quant_mode": "fp8_block", "moe_quant_mode": "nvfp4"},
        {"gemm_quant_mode": "fp8", "moe_quant_mode": "nvfp4"},
    ]
