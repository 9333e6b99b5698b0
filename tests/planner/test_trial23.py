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
