"""bench/latency_split.py: which anchor pairs form one closed-loop run, and the end-to-end latency derived
from their published and predicted means."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import latency_split  # noqa: E402


def _anchor(aid: str, metric: str, **workload: object) -> dict[str, object]:
    w = {"isl": 1024, "osl": 101, "concurrency": 8, **workload}
    return {"id": aid, "metric": metric, "workload": w, "deployment": {"aggregated": {"instances": 1}}}


def _file(tmp_path: Path, anchors: list[dict[str, object]]) -> Path:
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump({"version": 1, "anchors": anchors}))
    return p


def test_a_run_needs_both_metrics_a_total_concurrency_and_one_output_length(tmp_path: Path) -> None:
    eos = {**_anchor("b-ttft", "ttft_ms"), "simulation": {"output_len": {"kind": "eos", "mean": 90, "max": 101}}}
    per_gpu = _anchor("c-ttft-ms", "ttft_ms", concurrency_scope="per_gpu")
    rate = _anchor("d-ttft", "ttft_ms", concurrency=None, request_rate=2.0)
    anchors = [
        _anchor("a-ttft", "ttft_ms"),
        _anchor("a-tpot", "tpot_ms"),
        eos,
        _anchor("b-tpot", "tpot_ms"),
        per_gpu,
        _anchor("c-tpot-ms", "tpot_ms"),
        rate,
        _anchor("d-tpot", "tpot_ms"),
        _anchor("e-ttft", "ttft_ms"),  # no TPOT partner
    ]
    runs = latency_split.closed_loop_runs([_file(tmp_path, anchors)])
    assert set(runs) == {"a-ttft"}
    assert runs["a-ttft"]["tpot_id"] == "a-tpot"
    assert runs["a-ttft"]["mode"] == "agg"


def test_e2e_is_ttft_plus_the_remaining_tokens_at_tpot() -> None:
    runs = {"a-ttft": {"file": "x.yaml", "tpot_id": "a-tpot", "osl": 101, "concurrency": 8, "mode": "agg"}}
    results = {
        "rows": [
            {"id": "a-ttft", "split": "test", "published": 200.0, "predicted": 100.0, "rel_error": -0.5},
            {"id": "a-tpot", "split": "test", "published": 10.0, "predicted": 11.0, "rel_error": 0.1},
        ]
    }
    (row,) = latency_split.pairs(results, runs)
    assert row["e2e_published_ms"] == pytest.approx(200 + 100 * 10)
    assert row["e2e_predicted_ms"] == pytest.approx(100 + 100 * 11)
    assert row["e2e"] == pytest.approx(1200 / 1200 - 1)  # the TTFT miss and the TPOT miss cancel here
    assert row["band"] == "c<=8"
    lines = latency_split.table([row])
    assert lines[0]["e2e"]["within"] == 1
    assert lines[0]["ttft"]["within"] == 0
