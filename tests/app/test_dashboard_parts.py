"""Parts of the dashboard that the page tests cannot reach (AppTest cannot upload a file) or
that are rules on their own: an uploaded trace drives the time series; what-if deltas know that
lower latency is better; a new EP scale keeps the pool's GPUs; settings survive a URL."""

from __future__ import annotations

import json

import pytest

from planner.dashboard import exports, simview, urlstate
from planner.dashboard.whatif import WhatIf, apply_what_if, ep_scales, gpu_budget_problem, gpus_of
from planner.dashboard.whatif_view import Delta

SCENARIO = {
    "name": "small",
    "model": "qwen3-30b-a3b",
    "hardware": "h200-sxm",
    "engine": "sglang",
    "phase": "end-to-end",
    "deployment": {"aggregated": {"instances": 2, "gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1}},
    "precision": {"attention": "bf16", "kv_cache": "fp8", "dense": "bf16", "moe": "bf16"},
    "workload": {"isl": 500, "osl": 50, "request_rate": 4.0},
    "slo": {"ttft_ms": 2000.0, "tpot_ms": 50.0},
}


def test_an_uploaded_trace_drives_the_time_series():
    """After an upload the time series replays the trace (its arrivals, its request count)."""
    rows = "".join(f"{0.5 * i:.1f},{400 + i},{40 + i % 7}\n" for i in range(60))
    trace = exports.trace_from_upload(b"arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows.encode(), "t.csv")
    ts = simview.timeseries(SCENARIO, {"requests": 60, "trace": trace.model_dump()})
    assert ts["source"] == "trace t.csv"
    assert ts["requests"] == 60
    assert ts["time_s"][-1] >= 29.5  # the trace's last arrival is at 29.5 s
    plain = simview.timeseries(SCENARIO)
    assert plain["source"].startswith("Poisson arrivals at 4.0")


def test_a_bad_upload_is_a_message_naming_the_field():
    with pytest.raises(Exception, match=r"^trace: x.csv is not"):
        exports.trace_from_upload(b"a,b\n1,2\n", "x.csv")


@pytest.mark.parametrize(
    ("value", "base", "lower_is_better", "color", "better"),
    [
        (2351.0, 213.0, True, "inverse", False),  # latency up: worse (red up-arrow)
        (100.0, 213.0, True, "inverse", True),  # latency down: better (green down-arrow)
        (309.0, 385.0, False, "normal", False),  # capacity down: worse
        (70.0, 70.0, True, "off", None),  # unchanged: no verdict
    ],
)
def test_delta_colours_know_the_direction_of_better(value, base, lower_is_better, color, better):
    d = Delta("x", value, base, lower_is_better)
    assert d.color == color
    assert d.better is better


def test_a_new_ep_scale_keeps_the_pools_gpus_and_reports_a_budget_breach():
    scn = {**SCENARIO, "deployment": {"prefill": {"instances": 20, "gpus_per_instance": 2},
                                      "decode": {"instances": 1, "gpus_per_instance": 32}}}  # fmt: skip
    changed = apply_what_if(scn, WhatIf(ep=16))
    assert changed["deployment"]["decode"]["instances"] == 2
    assert gpus_of(changed) == 72
    assert gpu_budget_problem(changed, 72) is None
    wide = apply_what_if(scn, WhatIf(ep=72))
    assert gpus_of(wide) == 112
    assert "112 GPUs" in (gpu_budget_problem(wide, 72) or "")


def test_the_ep_scales_offered_split_the_models_experts_evenly():
    # SGLang places 32 wide-EP replicas above EP 8: Qwen3-235B's 128 experts make 160 copies, DeepSeek-V3's 288
    qwen = ep_scales("qwen3-235b-a22b", "gb200-nvl72", "sglang", 72)
    assert not {48, 72} & set(qwen)
    assert {8, 16, 32, 40} <= set(qwen)
    assert all((128 + (32 if ep > 8 else 0)) % ep == 0 for ep in qwen)
    assert {48, 72} <= set(ep_scales("deepseek-v3", "gb200-nvl72", "sglang", 72))
    assert max(ep_scales("deepseek-v3", "gb200-nvl72", "sglang", 16)) == 16  # within the GPU budget
    assert ep_scales("llama-3.1-70b", "h200-sxm", "vllm", 8) == []  # no experts: no EP what-if


def test_settings_round_trip_through_query_parameters_and_bad_ones_are_ignored():
    defaults = {"moe": "as planned", "tpot": 50.0, "ep": 0}
    params = urlstate.to_params({"moe": "fp8", "tpot": 60.0, "ep": 0}, defaults)
    assert params == {"moe": "fp8", "tpot": "60.0"}
    assert urlstate.from_params({**params, "ep": "wide"}) == {"moe": "fp8", "tpot": 60.0}


def test_a_what_if_whose_queue_grows_shows_its_ttft_as_a_floor_not_a_gain():
    """Qwen3-30B on 3 H100 at memory fraction 0.5: the card read 166.1 ms, -46.7 (-22%) in green beside
    'the changed deployment cannot keep up with that load' (the CLI prints TTFT >= 166.1 ms)."""
    worse = Delta("TTFT", 166.1, 212.8, True, floor=True)
    assert (worse.text, worse.change, worse.better) == (">= 166.1", "queue grows (was 212.8)", False)
    assert worse.color == "inverse"  # an up arrow in red
    better = Delta("TTFT", 180.0, 900.0, True, base_floor=True)
    assert (better.change, better.better) == ("-720.0 (was a growing queue)", True)
    assert Delta("TTFT", 1.0, 2.0, True, floor=True, base_floor=True).change == "queue grows in both"
    finite = Delta("TTFT", 300.0, 166.1, True, base_floor=True)  # above the old floor, yet no queue: better
    assert (finite.change, finite.better, finite.color) == ("+133.9 (was a growing queue)", True, "normal")
    assert Delta("x", 70.0, 70.0, True).change == "unchanged"


def test_a_what_if_memory_fraction_above_what_the_engine_runs_is_said():
    """The what-if priced a 0.99 fraction silently (the CLI notes it); its range now reaches 0.99."""
    from planner.dashboard.whatif import breakdown

    scn = {
        "model": "qwen3-235b-a22b",
        "hardware": "b200",
        "engine": "sglang",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
        "precision": {"dense": "fp8", "moe": "fp8"},
        "runtime": {"mem_fraction": 0.99},
        "workload": {"isl": 2000, "osl": 400, "concurrency": 64},
    }
    assert any("0.99 is above the highest 0.970" in n for n in breakdown(scn).notes)


def test_an_uploaded_config_json_is_the_questions_model(tmp_path):
    """The dashboard offered catalog ids only, where `planner plan --model PATH` takes a config.json (trial)."""
    from planner.dashboard.exports import config_from_upload
    from roofline.catalog import get_model
    from roofline.errors import PlannerError

    cfg = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
    }
    path = config_from_upload(json.dumps(cfg).encode(), "config.json")
    assert path == config_from_upload(json.dumps(cfg).encode(), "config.json")  # reruns find the same file
    assert get_model(path).moe is not None
    with pytest.raises(PlannerError, match="num_experts_per_tok"):
        config_from_upload(json.dumps({**cfg, "num_experts_per_tok": "two"}).encode(), "bad.json")
