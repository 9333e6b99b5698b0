"""bench/public_anchors.py: its tables count what predict_anchor returns, by split and group, and a bad
anchor is an error row in the not-predicted table, never a crash."""

from __future__ import annotations

import json

import yaml

from bench import public_anchors as pa

DECODE = {
    "id": "tiny-h200-decode",
    "source": "synthetic",
    "model": "deepseek-v3",
    "hardware": "h200-sxm",
    "engine": "sglang",
    "phase": "decode",
    "deployment": {"decode": {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
    "precision": {"attention": "bf16", "kv_cache": "bf16", "dense": "fp8", "moe": "fp8"},
    "mtp": None,
    "workload": {"isl": 1000, "osl": 100, "concurrency": 32, "concurrency_scope": "total"},
    "metric": "output_tok_s_per_gpu",
    "value": 500,
    "unit": "output tok/s per GPU",
    "tolerance": 10,  # 1000%: any sane prediction is within, so the count must be exactly 1
}
TPOT = {**DECODE, "id": "tiny-h200-tpot", "metric": "tpot_ms", "value": 40, "unit": "ms", "tolerance": 1e-9}
BAD = {**DECODE, "id": "tiny-bad-model", "model": "no-such-model"}


def _write(path, split, anchors):
    path.write_text(yaml.safe_dump({"version": 1, "source": {"name": "tiny", "split": split}, "anchors": anchors}))
    return path


def test_tables_count_predictions_by_split_group_and_error_class(tmp_path):
    test_file = _write(tmp_path / "tiny-test.yaml", "test", [DECODE, TPOT, BAD])
    train_file = _write(tmp_path / "tiny-train.yaml", "train", [{**DECODE, "id": "tiny-train-decode"}])
    rows, tabs = pa.run([test_file, train_file], "all", jobs=1)
    assert len(rows) == 4
    t = tabs["test"]
    assert t["all"]["count"] == 3
    assert t["all"]["predicted"] == 2
    assert t["all"]["within_tolerance"] == 1
    assert t["by"]["metric"]["output_tok_s_per_gpu"]["count"] == 2
    assert t["by"]["metric"]["tpot_ms"]["predicted"] == 1
    assert t["by"]["model"]["no-such-model"]["predicted"] == 0
    assert t["by"]["method"]["none"]["count"] == 1
    assert sum(t["not_predicted"].values()) == 1
    assert tabs["train"]["all"] == {**tabs["train"]["all"], "count": 1, "predicted": 1}
    errs = [abs(r["rel_error"]) for r in rows if r["split"] == "test" and r["rel_error"] is not None]
    assert len(errs) == 2
    assert t["all"]["median_abs_rel_error"] == round((errs[0] + errs[1]) / 2, 4)
    (cls,) = t["not_predicted"]
    assert "no-such-model" in cls


def test_split_filter_and_a_file_that_does_not_load(tmp_path):
    test_file = _write(tmp_path / "tiny-test.yaml", "test", [DECODE])
    train_file = _write(tmp_path / "tiny-train.yaml", "train", [DECODE])
    broken = tmp_path / "broken.yaml"
    broken.write_text("anchors: [unclosed")
    rows, tabs = pa.run([test_file, train_file, broken], "train", jobs=1)
    assert {r["split"] for r in rows if r["predicted"] is not None} == {"train"}
    assert tabs["unknown"]["all"] == {**tabs["unknown"]["all"], "count": 1, "predicted": 0}
    assert "test" not in tabs


def test_main_saves_rows_and_tables_atomically(tmp_path):
    test_file = _write(tmp_path / "tiny-test.yaml", "test", [DECODE, BAD])
    out = tmp_path / "out" / "public_anchors.json"
    assert pa.main([str(test_file), str(test_file), "--no-public", "--out", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["tables"]["test"]["all"]["count"] == 2  # the file named twice is read once
    assert len(saved["rows"]) == 2
    assert not out.with_name(out.name + ".part").exists()
    assert pa.main(["--jobs", "0", "--no-public", "--out", str(out)]) == 2


def test_refresh_repredicts_only_the_named_files_and_keeps_the_other_rows(tmp_path):
    a = _write(tmp_path / "tiny-a.yaml", "test", [DECODE])
    b = _write(tmp_path / "tiny-b.yaml", "test", [TPOT])
    out = tmp_path / "public_anchors.json"
    assert pa.main([str(a), str(b), "--no-public", "--out", str(out)]) == 0
    saved = json.loads(out.read_text())
    kept = next(r for r in saved["rows"] if r["file"] == "tiny-b.yaml")
    kept["predicted"], kept["note"] = 123.0, "left as saved"  # a refresh of tiny-a must not touch it
    out.write_text(json.dumps(saved))
    _write(a, "test", [{**DECODE, "value": 1000}])  # the refreshed file changed
    assert pa.main(["--refresh", str(a), "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    by_file = {r["file"]: r for r in again["rows"]}
    assert by_file["tiny-b.yaml"]["note"] == "left as saved"
    assert by_file["tiny-a.yaml"]["published"] == 1000
    assert again["tables"]["test"]["all"]["count"] == 2
    assert "tiny-a.yaml" in again["provenance"]
    assert "--refresh" in again["provenance"]
    assert pa.main(["--refresh", str(tmp_path / "nope.yaml"), "--out", str(out)]) == 2
    other = _write(tmp_path / "tiny-c.yaml", "test", [DECODE])
    assert pa.main(["--refresh", str(other), "--out", str(out)]) == 2  # not a file of the saved run


def test_refresh_adds_a_corpus_file_new_since_the_saved_run(tmp_path, monkeypatch):
    corpus = tmp_path / "public"
    corpus.mkdir()
    a = _write(corpus / "tiny-a.yaml", "test", [DECODE])
    out = tmp_path / "public_anchors.json"
    assert pa.main([str(a), "--no-public", "--out", str(out)]) == 0
    new = _write(corpus / "tiny-new.yaml", "train", [TPOT])
    outside = _write(tmp_path / "tiny-outside.yaml", "train", [TPOT])
    monkeypatch.setattr(pa, "PUBLIC", corpus)
    assert pa.main(["--refresh", str(outside), "--out", str(out)]) == 2  # outside the corpus: still refused
    assert pa.main(["--refresh", str(new), "--out", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert sorted(r["file"] for r in saved["rows"]) == ["tiny-a.yaml", "tiny-new.yaml"]
    assert any(f.endswith("tiny-new.yaml") for f in saved["files"])
    assert "new to the corpus" in saved["provenance"]
    assert saved["tables"]["train"]["all"]["count"] == 1


def test_refresh_with_match_repredicts_only_the_matching_anchors_of_the_file(tmp_path):
    a = _write(tmp_path / "tiny-a.yaml", "test", [DECODE, TPOT])
    out = tmp_path / "public_anchors.json"
    assert pa.main([str(a), "--no-public", "--out", str(out)]) == 0
    saved = json.loads(out.read_text())
    for r in saved["rows"]:
        r["note"] = "left as saved"
    out.write_text(json.dumps(saved))
    _write(a, "test", [{**DECODE, "value": 1000}, {**TPOT, "value": 80}])
    assert pa.main(["--refresh", str(a), "--match", "tpot", "--out", str(out)]) == 0
    again = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert again["tiny-h200-tpot"]["published"] == 80
    assert "note" not in again["tiny-h200-tpot"]
    assert again["tiny-h200-decode"]["note"] == "left as saved"  # not matched: kept as saved
    assert again["tiny-h200-decode"]["published"] == 500
    assert "whose id matches 'tpot'" in json.loads(out.read_text())["provenance"]


def test_latency_table_splits_ttft_and_tpot_by_the_traffic_an_anchor_states(tmp_path):
    """Issue 11 and 12 read TTFT/TPOT by how the traffic is stated: a closed loop's concurrency, an open loop's
    request rate, or neither; the table must put each latency anchor in the row its workload names."""
    assert pa.traffic_kind(DECODE) == "concurrency"
    assert pa.traffic_kind({"workload": {"concurrency": "unknown", "request_rate": 2.0}}) == "request_rate"
    assert pa.traffic_kind({"workload": {"concurrency": "unknown"}}) == "none"
    assert pa.traffic_kind("not a mapping") == "none"
    rows, tabs = pa.run([_write(tmp_path / "tiny-test.yaml", "test", [DECODE, TPOT, BAD])], "all", jobs=1)
    lat = tabs["test"]["latency_by_traffic"]
    assert set(lat) == {"tpot_ms"}  # throughput metrics are not in this table, and no TTFT anchor was given
    assert lat["tpot_ms"] == {"concurrency": tabs["test"]["by"]["metric"]["tpot_ms"]}
    fake = [
        {**r, "metric": "ttft_ms", "traffic": kind, "rel_error": err, "predicted": 1.0}
        for r, kind, err in zip(rows, ("request_rate", "request_rate", "none"), (-0.5, 0.3, 0.1), strict=True)
    ]
    ttft = pa.tables(fake)["test"]["latency_by_traffic"]["ttft_ms"]
    assert ttft["request_rate"]["count"] == 2
    assert ttft["request_rate"]["median_abs_rel_error"] == 0.4
    assert ttft["request_rate"]["median_rel_error"] == -0.1
    assert ttft["none"]["count"] == 1
    assert "ttft_ms | request_rate | 2 |" in pa.render(pa.tables(fake))


def test_readme_tables_print_the_saved_counts_and_medians() -> None:
    from bench.readme_tables import tables

    r = {"count": 3, "predicted": 2, "within_tolerance": 1, "median_abs_rel_error": 0.25, "median_rel_error": -0.1}
    data = {
        "tables": {
            "test": {"all": r, "by": {"metric": {"ttft_ms": r}}, "latency_by_traffic": {"ttft_ms": {"concurrency": r}}}
        }
    }
    text = tables(data)
    assert "| test | 3 | 2 | 1 | 25.0% |" in text
    assert "| test, ttft_ms | 3 | 2 | 1 | 25.0% | -10.0% |" in text
    assert "| test, ttft_ms, concurrency | 3 | 2 | 1 | 25.0% | -10.0% |" in text
