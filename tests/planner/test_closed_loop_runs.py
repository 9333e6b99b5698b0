"""Closed-loop benchmark runs as their sources state them: the request count and length spread of the
client (a fixed-length loop keeps its clients bunched), and the engine's running-request limit."""

from __future__ import annotations

from pathlib import Path

from planner.inputs.scenario import load_yaml
from planner.search.validate import predict_anchor

PUBLIC = Path(__file__).resolve().parents[2] / "validation" / "public"


def _anchors(name: str, prefix: str) -> list[dict]:
    return [a for a in load_yaml(PUBLIC / name)["anchors"] if a["id"].startswith(prefix)]


def test_the_vllm_blog_load_run_keeps_its_150_requests_and_15_percent_lengths():
    """'150 requests at concurrency 8, each with ~20k input tokens and ~2k output tokens (±15% variance)',
    'Median TTFT', 'Median ITL': without the spread the simulated clients stay bunched and every arrival
    waits behind another's chunked prefill (TTFT +25%)."""
    rows = _anchors("vllm-blog.yaml", "vllm-fp8kv-llama8b-h100-c8-")
    assert len(rows) == 6
    for a in rows:
        sim, w = a["simulation"], a["workload"]
        assert sim["requests"] == 150
        for key, n in (("input_len", w["isl"]), ("output_len", w["osl"])):
            assert (sim[key]["min"], sim[key]["max"]) == (round(0.85 * n), round(1.15 * n))
        assert a.get("statistic") == ("median" if a["metric"] in ("ttft_ms", "tpot_ms") else None)
    for a in rows:
        if a["metric"] == "ttft_ms":
            r = predict_anchor(a, PUBLIC)
            assert r.within_tolerance, (r.id, r.rel_error)


def test_a_running_request_limit_below_the_concurrency_makes_ttft_a_queue_wait():
    """SGLang's --max-running-requests 128 (the H200 Flash FP8 balanced cell's launch flags): at 256
    clients half the requests wait for a running one to finish; without the limit the simulated TTFT was
    2.1 s against the published 46.6 s."""
    (c256,) = _anchors("sglang-cookbook-dsv4.yaml", "sglang-cookbook-dsv4-h200-flash-fp8-balanced-c256-ttft")
    assert c256["simulation"]["max_running_requests"] == 128
    r = predict_anchor(c256, PUBLIC)
    assert r.within_tolerance, r.rel_error
    free = {k: v for k, v in c256.items() if k != "simulation"}
    assert predict_anchor(free, PUBLIC).predicted < r.predicted / 5  # no queue: all 256 run at once
