"""Findings of the s4 new-user review: each test failed on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from planner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_a_decode_phase_estimate_shows_no_ttft_or_e2e_instead_of_zero():
    """`planner estimate` of the 48-GPU decode example printed `TTFT 0.0 ms` and `E2E 0 ms`: a
    decode-only phase prices no prompt, so neither latency exists; 0 read as a measured value."""
    path = str(EXAMPLES / "deepseek-v3-gb200-48gpu-decode.yaml")
    data = json.loads(runner.invoke(app, ["estimate", path, "--json"]).output)
    assert data["ttft_ms"] is None
    assert data["e2e_ms"] is None
    assert data["tpot_ms"] > 0
    table = runner.invoke(app, ["estimate", path], env={"COLUMNS": "200"}).output
    e2e_row = next(line for line in table.splitlines() if "E2E" in line)
    assert "not in a decode phase" in e2e_row
    assert " 0 ms" not in e2e_row


def _anchor(phase: str, pool: str, metric: str) -> dict:
    return {
        "id": f"{phase}-{metric}".replace("_", "-"),
        "source": "review",
        "model": "deepseek-v3",
        "hardware": "h200-sxm",
        "phase": phase,
        "deployment": {pool: {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
        "workload": {"isl": 1000, "osl": 200, "concurrency": 64, "concurrency_scope": "total"},
        "metric": metric,
        "value": 100,
    }


def test_an_anchor_metric_its_phase_does_not_price_is_an_error_row_not_a_minus_100_percent_miss():
    """A decode-phase anchor of e2e_ms (or prefill-phase tpot_ms) was predicted 0 ms (-100.0%)."""
    from planner.search.validate import predict_anchor

    for phase, pool, metric in (
        ("decode", "decode", "e2e_ms"),
        ("decode", "decode", "ttft_ms"),
        ("prefill", "prefill", "tpot_ms"),
        ("prefill", "prefill", "output_tok_s_per_gpu"),
    ):
        r = predict_anchor(_anchor(phase, pool, metric), Path("."))
        assert r.predicted is None, (metric, r.predicted)
        assert r.error is not None
        assert r.error.startswith(f"metric: {metric}")
        assert "\n" not in r.error
    ok = predict_anchor(_anchor("decode", "decode", "tpot_ms"), Path("."))
    assert ok.error is None
    assert ok.predicted
    assert ok.predicted > 0


def test_plan_refuses_a_request_longer_than_the_context_window_in_one_line():
    """`planner plan --isl 200000` ranked deployments for DeepSeek-V3, whose config.json allows
    163,840 tokens; only the dashboard checked the window."""
    out = runner.invoke(
        app,
        [
            "plan",
            "--model",
            "deepseek-v3",
            "--hardware",
            "h200-sxm",
            "--gpus",
            "8",
            "--isl",
            "200000",
            "--osl",
            "100",
            "--workers",
            "1",
        ],
    )
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1
    assert "isl + osl" in out.output
    assert "163,840" in out.output


def test_scoring_failures_are_counted_in_words_not_class_names():
    """`plan --model llama-3.1-8b --isl 500000` printed '11 InsufficientMemoryError' among the pruned
    (that request is now refused for its context window; a 70B one just inside its window fails the same way)."""
    from planner.inputs.question import Question
    from planner.search.plan import plan

    a = plan(Question(model="llama-3.1-70b", hardware="h100-sxm", gpus=8, isl=131000, osl=50, verify_top=0), workers=1)
    assert a.pruned["no memory left for this traffic's KV and activations"] > 0
    assert not any("Error" in k for k in a.pruned), dict(a.pruned)


def test_an_empty_answer_says_why_instead_of_promising_the_closest_row():
    """`plan --hardware h100-sxm --gpus 8` (DeepSeek-V3 does not fit) printed 'the closest one and its
    binding constraint are shown' above an empty table."""
    from planner.inputs.question import Question
    from planner.search.plan import plan

    a = plan(Question(model="deepseek-v3", hardware="h100-sxm", gpus=8, verify_top=0), workers=1)
    assert not a.recommendations
    assert not any("closest" in n for n in a.notes), a.notes
    assert any("weights do not fit" in n for n in a.notes), a.notes


def test_a_recommendation_the_plan_keeps_is_one_the_simulator_builds():
    """`plan --hardware rtx-pro-6000 --gpus 8` (DeepSeek-V3) aborted the whole plan with exit 2: the
    simulator sized KV for two prefill budgets (1.2 GB), which the scored TP8 FP8 point lacks; then
    that point stayed an estimate ("not simulated, 1x agg TP8 EP8 ... does not fit"). Now the fit
    check and the simulator ask the same KV (roofline.memory.kv_needed_tokens): what the plan keeps,
    the simulator builds."""
    out = runner.invoke(app, ["plan", "--hardware", "rtx-pro-6000", "--gpus", "8", "--workers", "1", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["recommendations"][0]["figures"] == "simulated p90"
    assert not any("does not fit" in n for n in data["notes"]), data["notes"]


def test_an_answer_with_scored_candidates_but_none_serving_says_so():
    from planner.inputs.question import Question
    from planner.search.plan import plan

    a = plan(Question(model="llama-3.1-8b", hardware="h100-sxm", gpus=8, rate=100000, verify_top=0), workers=1)
    assert a.scored
    assert not a.recommendations
    assert any("none has an operating point that serves this traffic" in n for n in a.notes), a.notes


def test_a_one_token_answer_is_not_held_to_a_tpot_target():
    """`plan --osl 1`: every simulated row 'misses (simulate)' with 'TPOT-100% (binds: TPOT)', since a
    one-token answer has no TPOT (the simulator reports none), while estimates priced a decode TPOT."""
    from planner.inputs.question import SLO, Question
    from planner.search.plan import plan

    q = Question(model="llama-3.1-8b", hardware="h100-sxm", gpus=2, osl=1, slo=SLO(ttft_p90_ms=2000, tpot_p90_ms=50))
    a = plan(q, workers=1)
    assert a.recommendations
    top = a.recommendations[0]
    assert top.simulated is not None
    assert top.meets, top.slack
    assert all(not k.startswith("tpot") for r in a.recommendations for k in r.slack)


def _levers(example: str) -> dict[str, dict]:
    out = runner.invoke(app, ["explain", str(EXAMPLES / example), "--json"])
    assert out.exit_code == 0, out.output
    return {lv["change"]: lv for lv in json.loads(out.output)["levers"]}


def test_explain_levers_of_a_rate_scenario_are_priced_at_the_same_concurrency():
    """At a stated request rate every lever served the same rate: 'nvfp4 experts' on the Qwen3-235B
    example read +0% (gain 1e-9) while its TPOT fell 21.3 -> 17.4 ms."""
    lv = _levers("qwen3-235b-daily-ramp.yaml")["nvfp4 experts"]
    assert lv["gain"] > 0.05


def test_explain_does_not_offer_halving_a_kv_cache_that_is_already_fp8():
    """The RTX PRO 6000 V4-Flash example (KV cache fp8) offered 'fp8 attention and KV cache: halves KV
    bytes, doubles KV capacity' at +0%; nor does it offer FP8 attention math, which a sparse-attention
    model's kernels set themselves (it priced +0% too)."""
    levers = _levers("dsv4flash-rtxpro-decode-c16.yaml")
    assert "fp8 attention and KV cache" not in levers
    assert "fp8 attention (KV cache already fp8)" not in levers


def test_an_output_path_that_cannot_be_written_is_one_line_before_the_run(tmp_path):
    """`simulate --records /nonexistent/dir/r.csv` and `plan --chart /nonexistent/c.html` ran the whole
    simulation or plan, then ended in a FileNotFoundError traceback (exit 1)."""
    example = str(EXAMPLES / "llama-8b-bursty.yaml")
    for args in (
        ["simulate", example, "--records", str(tmp_path / "no" / "r.csv")],
        ["simulate", example, "--timeseries", str(tmp_path)],
        [
            "plan",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "1",
            "--chart",
            str(tmp_path / "no/c.html"),
        ],
        ["compare", "--chart", str(tmp_path / "no" / "c.html")],
    ):
        out = runner.invoke(app, args)
        assert out.exit_code == 2, (args, out.output)
        assert "Traceback" not in out.output
        assert out.output.strip().startswith("error: --")
    assert list(tmp_path.iterdir()) == []


def test_simulate_says_which_tpot_its_tokens_per_user_divide():
    """The plan row of the default #1 read tok/s/user 22.8 (1000 / p90 TPOT 43.86 ms); `planner simulate`
    of the same exported scenario read output_tok_s_per_user 24.39 (1000 / mean TPOT 41.0 ms), unlabelled."""
    out = runner.invoke(app, ["simulate", str(EXAMPLES / "llama-8b-bursty.yaml")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "output_tok_s_per_user (1000 / mean TPOT)" in out.output


def test_a_nan_in_one_anchor_is_an_error_row_of_that_anchor_not_of_the_file(tmp_path):
    """One anchor with `value: .nan` rejected the whole file (exit 2, no rows), against the module's
    promise that a NaN is a row of its anchor."""
    from planner.search.validate import validate_file

    good = _anchor("decode", "decode", "tpot_ms")
    bad = {**good, "id": "nan-value", "value": float("nan")}
    path = tmp_path / "anchors.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "anchors": [good, bad]}))
    results, summary = validate_file(path)
    assert [r.error is None for r in results] == [True, False]
    assert results[1].error == "anchor nan-value: value: must be a finite number (got nan)"
    assert summary["predicted"] == 1
