"""The CLI runs its default scenario and reports user errors without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_plan_without_arguments_runs_the_default_scenario():
    out = runner.invoke(app, ["plan", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["mode"] == "disaggregated"
    assert data["gpus"] == 60
    assert data["output_tok_s_per_gpu"] > 0


def test_every_example_estimates_and_explains():
    for path in sorted(EXAMPLES.glob("*.yaml")):
        est = runner.invoke(app, ["estimate", str(path), "--json"])
        assert est.exit_code == 0, (path.name, est.output)
        exp = runner.invoke(app, ["explain", str(path), "--json"])
        assert exp.exit_code == 0, (path.name, exp.output)


def test_explain_on_seed_003_shows_attention_and_moe_and_the_tensor_core_ceiling():
    out = runner.invoke(app, ["explain", str(EXAMPLES / "dsv4flash-rtxpro-decode-c16.yaml"), "--json"])
    data = json.loads(out.output)
    cats = data["by_category_ms"]
    top_two = sorted(cats, key=cats.get, reverse=True)[:2]
    assert set(top_two) == {"attention", "moe"}
    assert "triton-sparse-mla-sm120" in data["fallback_kernels"]
    best = data["levers"][0]
    assert best["change"].startswith("tensor-core kernels")
    assert best["gain"] > 2


def test_a_bad_scenario_is_one_line_and_exit_status_2(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("model: deepseek-v3\nhardware: h300\ndeployment: {aggregated: {gpus_per_instance: 8}}\n")
    out = runner.invoke(app, ["estimate", str(p)])
    assert out.exit_code == 2
    assert "unknown hardware 'h300'" in out.output
    assert "Traceback" not in out.output


def test_catalog_lists_models_and_hardware():
    out = runner.invoke(app, ["catalog"])
    assert out.exit_code == 0
    assert "deepseek-v4-pro" in out.output
    assert "rtx-pro-6000" in out.output
