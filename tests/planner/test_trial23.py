"""Ninth new-user trial (twenty-third session): a stated concurrency larger than the budget's KV slots is
planned as a closed loop that queues for slots, not refused."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from planner.cli import app


def test_more_clients_than_slots_queue_for_them_and_the_closest_row_is_shown():
    """48 clients of Qwen3-235B 2,000/2,000 on 2 H200 (vLLM): 40 slots. It read 'none has an operating point
    that serves this traffic' with no row; 40 clients were planned."""
    args = ["plan", "--model", "qwen3-235b-a22b", "--hardware", "h200-sxm", "--gpus", "2", "--isl", "2000"]
    args += ["--osl", "2000", "--concurrency", "48", "--engine", "vllm", "--tpot-p90", "70", "--ttft-p90", "3000"]
    out = CliRunner().invoke(app, [*args, "--json"])
    data = json.loads(out.output)
    assert out.exit_code == (0 if data["feasible"] else 1)
    top = data["recommendations"][0]
    assert top["gpus"] == 2
    est = top["estimate"]
    # the 8 beyond the slots wait a generation: TTFT grows by about (48 - slots) / served requests/s
    assert est["ttft_ms"] > 10_000
    assert est["decode_batch_mean"] < 48  # the slots run full; the rest queue


def test_the_simulate_table_says_how_many_requests_its_latencies_count():
    """The text showed requests_completed 1,139 and requests_warm_start 139 (suggesting 1,000 measured) where the
    JSON's requests_measured was 600: the table now shows the count its percentiles are over."""
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[2] / "examples" / "llama-8b-bursty.yaml")
    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["simulate", path, "--json", "--requests", "400"]).output)
    text = runner.invoke(app, ["simulate", path, "--requests", "400"], env={"COLUMNS": "160"}).output
    line = next(x for x in text.splitlines() if "requests_measured" in x)
    assert f"{data['requests_measured']:,}" in line
