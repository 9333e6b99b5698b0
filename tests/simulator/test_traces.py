"""Trace readers accept the three published formats and a dataset's length table, and name the bad
line of a malformed file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator.traces import TraceError, read_trace


def test_splitwise_trace_from_shared_reads_whole(shared_dir):
    t = read_trace(shared_dir / "traces" / "splitwise_conv.csv", "splitwise")
    assert len(t) == 19366
    assert t.arrival_s[0] == 0.0
    assert np.all(np.diff(t.arrival_s) >= 0)
    assert 1000 < t.isl.mean() < 1300


def test_a_length_table_keeps_its_rows_in_order_all_at_time_zero(tmp_path):
    p = tmp_path / "lengths.csv"
    p.write_text("input_length,output_length\n1283,1427\n52,20000\nx,3\n900,1\n")
    t = read_trace(p, "lengths")
    assert t.isl.tolist() == [1283, 52, 900]
    assert t.osl.tolist() == [1427, 20000, 1]
    assert (t.arrival_s == 0).all()
    assert len(t.skipped) == 1
    assert ":4:" in t.skipped[0]
    (tmp_path / "bad.csv").write_text("input_length,out\n1,2\n")
    with pytest.raises(TraceError, match="header lacks output_length"):
        read_trace(tmp_path / "bad.csv", "lengths")


def test_azure_format_with_iso_timestamps(tmp_path):
    p = tmp_path / "azure.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.1805900,100,10\n"
    )
    t = read_trace(p, "azure")
    assert t.arrival_s.tolist() == pytest.approx([0.0, 0.5])
    assert t.isl.tolist() == [374, 100]


def test_mooncake_jsonl_keeps_hash_ids_and_converts_ms(tmp_path):
    p = tmp_path / "mc.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 1500, "input_length": 700, "output_length": 9, "hash_ids": [1, 3]},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    t = read_trace(p, "mooncake")
    assert t.arrival_s.tolist() == [0.0, 1.5]
    assert t.hash_ids == [[1, 2], [1, 3]]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,-5\n", ":2"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10\n", ":2"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\nnan,10,5\n", ":2"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,inf,5\n", ":2"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n1e400,10,5\n", ":2"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,1000000000000\n", ":2"),
    ],
)
def test_a_file_with_no_good_row_names_the_first_bad_line(tmp_path, text, line):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(TraceError, match=line):
        read_trace(p, "splitwise")


def test_a_malformed_csv_row_is_skipped_and_named_while_the_rest_runs(tmp_path):
    """Issue 13: a bad trace row is an error for that row (with its line), not for the file."""
    p = tmp_path / "mixed.csv"
    p.write_bytes(
        b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,5\n0.1,abc,5\n0.2,7,1e12\n0.3,\xff\xfe,5\n0.4,8,3\n"
    )
    t = read_trace(p, "splitwise")
    assert t.isl.tolist() == [10, 8]
    assert [s.split(": ")[0].rsplit(":", 1)[1] for s in t.skipped] == ["3", "4", "5"]


def test_malformed_mooncake_line_is_named(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1}\n[1]\n'
        '{"timestamp": 2, "input_length": 5, "output_length": 1, "hash_ids": 7}\n' + "[" * 5000 + "\n"
    )
    t = read_trace(p, "mooncake")
    assert len(t) == 1
    assert [s.split(": ")[0] for s in t.skipped] == [f"{p}:{k}" for k in (2, 3, 4, 5)]


def test_a_folder_or_a_huge_timestamp_is_a_trace_error_not_a_crash(tmp_path):
    """Issue 13 signatures: IsADirectoryError and OverflowError in simulator/traces.py."""
    with pytest.raises(TraceError, match="not a file"):
        read_trace(tmp_path, "splitwise")
    p = tmp_path / "mc.jsonl"
    p.write_text('{"timestamp": 1e400, "input_length": 5, "output_length": 1}\n')
    with pytest.raises(TraceError, match="timestamp"):
        read_trace(p, "mooncake")


def test_wrong_header_and_format_are_clear(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(TraceError, match="header lacks arrived_at"):
        read_trace(p, "splitwise")
    with pytest.raises(TraceError, match="allowed: azure, splitwise, mooncake"):
        read_trace(p, "vidur")
