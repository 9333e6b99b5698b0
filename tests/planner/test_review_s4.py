"""Findings of the s4 new-user review: each test failed on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_a_decode_phase_estimate_shows_no_ttft_or_e2e_instead_of_zero():
    """`planner estimate` of the 48-GPU decode example printed `TTFT 0.0 ms` and `E2E 0 ms`: a
    decode-only phase prices no prompt, so neither latency exists; 0 read as a measured value."""
    path = str(EXAMPLES / "deepseek-v3-gb200-48gpu-decode.yaml")
    data = json.loads(runner.invoke(app, ["estimate", path, "--json"]).output)
    assert data["ttft_ms"] is None and data["e2e_ms"] is None
    assert data["tpot_ms"] > 0
    table = runner.invoke(app, ["estimate", path], env={"COLUMNS": "200"}).output
    e2e_row = next(line for line in table.splitlines() if "E2E" in line)
    assert "not in a decode phase" in e2e_row and " 0 ms" not in e2e_row
