"""An unknown MTP is the engine's default, except where the quantity asked says what a tuned
deployment runs (planner.search.mtp_choice)."""

from __future__ import annotations

from pathlib import Path

from planner.engines import mtp_default_drafts
from planner.inputs.scenario import parse_as
from planner.search.mtp_choice import for_latency_at_one, settings
from planner.search.validate import Anchor, predict_anchor


def _anchor(**over: object) -> dict:
    a = {
        "id": "mtp-choice",
        "source": "test",
        "model": "deepseek-v3",
        "hardware": "b200",
        "engine": "trtllm",
        "phase": "end-to-end",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
        "precision": {"dense": "nvfp4", "moe": "nvfp4"},
        "mtp": "unknown",
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 16},
        "metric": "tpot_ms",
        "value": 10.0,
        "unit": "ms",
        "tolerance": 0.2,
    }
    a.update(over)
    return a


def test_trtllm_runs_no_mtp_unless_configured() -> None:
    drafts, source = mtp_default_drafts("trtllm")
    assert drafts == 0
    assert "speculative_config" in source


def test_a_latency_at_one_request_turns_an_unknown_mtp_on() -> None:
    a = parse_as(Anchor, _anchor(workload={"isl": 1024, "osl": 1024, "concurrency": 1}), "a", "anchor")
    on, notes = for_latency_at_one(a, "tpot_ms", None)
    assert on.mtp != "unknown"
    assert on.mtp is not None
    assert notes
    busy = parse_as(Anchor, _anchor(), "a", "anchor")
    assert for_latency_at_one(busy, "tpot_ms", None)[0].mtp == "unknown"  # C=16: the engine default
    assert settings(busy, None) == [False, True]
    assert settings(parse_as(Anchor, _anchor(mtp=None), "a", "anchor"), None) is None


def test_tpot_at_stated_concurrency_prices_the_engine_default(tmp_path: Path) -> None:
    off = predict_anchor(_anchor(), tmp_path)
    on = predict_anchor(_anchor(mtp={"draft_tokens": 3}), tmp_path)
    assert off.error is None
    assert on.error is None
    assert off.predicted > on.predicted * 1.3  # MTP 3 drafts emits ~2.65 tokens per step
    assert any("mtp: off" in n for n in off.assumed)
