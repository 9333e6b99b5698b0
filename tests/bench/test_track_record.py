"""The track record the planner prints beside its figures (planner.report.track_record) is the committed
public-anchor reading grouped by bench/track_record.py: the packaged file agrees with the results file,
a deployment gets the most specific class with enough anchors (held-out first), and every view says it."""

from __future__ import annotations

import json
from pathlib import Path

from bench import track_record as bench_track
from planner.inputs.question import build_question
from planner.model.deployment import Deployment
from planner.report import track_record
from planner.search.plan import plan

ROOT = Path(__file__).resolve().parents[2]


def test_the_packaged_track_record_is_the_committed_reading_grouped():
    data = json.loads(bench_track.RESULTS.read_text())
    assert track_record.record()["classes"] == bench_track.groups(data)


def _deployment(model: str, hardware: str, engine: str, gpus: int, isl: int = 2000) -> Deployment:
    a = plan(build_question({"model": model, "hardware": hardware, "engine": engine, "gpus": gpus, "isl": isl}))
    return a.recommendations[0].deployment


def test_a_class_with_enough_held_out_anchors_speaks_for_the_deployment():
    classes = track_record.record()["classes"]
    c = track_record.lookup("ttft", "disaggregated", "sglang", "Blackwell")
    assert c is not None
    assert (c["split"], c["mode"], c["engine"], c["generation"]) == ("test", "disaggregated", "sglang", "Blackwell")
    assert c["count"] >= track_record.MIN_COUNT
    # too few held-out vLLM disaggregated runs on Hopper: the engine is dropped, the generation kept
    small = [x for x in classes if (x["split"], x["kind"], x["mode"], x["engine"], x["generation"])
             == ("test", "ttft", "disaggregated", "vllm", "Hopper")]  # fmt: skip
    assert not small or small[0]["count"] < track_record.MIN_COUNT
    wider = track_record.lookup("ttft", "disaggregated", "vllm", "Hopper")
    assert wider is not None
    assert (wider["engine"], wider["generation"]) == (None, "Hopper")


def test_the_note_quotes_the_class_medians_and_skips_a_phase_the_pool_does_not_run():
    dep = _deployment("llama-3.1-8b", "h200-sxm", "vllm", 1)
    text = track_record.note(dep)
    assert text is not None
    assert text.startswith(f"track record ({dep.mode})")
    c = track_record.lookup("tpot", dep.mode, "vllm", "Hopper")
    assert c is not None
    assert f"TPOT {100 * c['median_abs_rel_error']:.0f}%" in text
    assert f"of {c['count']} held-out" in text
    assert "predicted high" in text or "predicted low" in text


def test_plan_notes_carry_the_track_record_of_each_mode_shown():
    from planner.report.plan_report import answer_dict

    a = plan(build_question({"model": "llama-3.1-8b", "hardware": "h100-sxm", "gpus": 2, "engine": "vllm"}))
    notes = [n for n in answer_dict(a)["notes"] if n.startswith("track record")]
    modes = dict.fromkeys(r.deployment.mode for r in a.recommendations[:8])
    assert [n.split(")")[0] for n in notes] == [f"track record ({m}" for m in modes]


def test_a_one_phase_scenario_quotes_its_phase_and_leaves_out_the_other_figure():
    dep = _deployment("llama-3.1-8b", "h200-sxm", "vllm", 1)
    text = track_record.note(dep, "decode")
    assert text is not None
    assert text.startswith("track record (decode)")
    assert "TTFT" not in text
    assert "TPOT" in text
    if "of every mode" not in text:  # a decode class of its own where 10 anchors share it
        assert "decode" in text.split("TPOT")[1]
