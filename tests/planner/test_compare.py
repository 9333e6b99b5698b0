"""`planner compare` gives each system's searched frontier, or says why a system cannot hold the model."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from planner.cli import app
from planner.search.compare import compare, parse_prices


def test_every_system_that_holds_the_model_gets_a_non_dominated_frontier():
    fronts = compare("qwen3-30b-a3b", 1024, 1024, "sglang", ["h100-sxm", "b200"])
    for f in fronts:
        assert f.points, f.reason
        users = [u for u, _, _ in f.points]
        gpus = [g for _, g, _ in f.points]
        assert users == sorted(users)
        assert gpus == sorted(gpus, reverse=True)  # more per user costs throughput per GPU


def test_cli_compare_json_with_prices():
    out = CliRunner().invoke(
        app,
        ["compare", "--model", "llama-3.1-8b", "--hardware", "h100-sxm,h200-sxm", "--price", "h100-sxm=2", "--json"],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    h100, h200 = data["hardware"]
    assert h100["frontier"][0]["usd_per_million_output_tokens"] > 0
    assert h200["frontier"][0]["usd_per_million_output_tokens"] is None


def test_bad_price_is_one_line_naming_the_option():
    out = CliRunner().invoke(app, ["compare", "--price", "h100-sxm=cheap"])
    assert out.exit_code == 2
    assert "--price" in out.output
    assert parse_prices("b200=5") == {"b200": 5.0}


def test_a_repeated_price_adds_up():
    """New-user trial: `--price h200-sxm=3.5 --price b200=6` kept only the last value, silently."""
    args = ["compare", "--model", "llama-3.1-8b", "--hardware", "h100-sxm,h200-sxm", "--json"]
    out = CliRunner().invoke(app, [*args, "--price", "h100-sxm=2", "--price", "h200-sxm=3.5"])
    assert out.exit_code == 0, out.output
    h100, h200 = json.loads(out.output)["hardware"]
    assert h100["frontier"][0]["usd_per_million_output_tokens"] > 0
    assert h200["frontier"][0]["usd_per_million_output_tokens"] > 0


def test_a_hardware_priced_twice_is_one_line_naming_it():
    """New-user trial: `--price h100-sxm=2 --price h100-sxm=3` kept the last value while the help said the
    values add up."""
    out = CliRunner().invoke(app, ["compare", "--price", "h100-sxm=2", "--price", "h100-sxm=3"])
    assert out.exit_code == 2
    assert "'h100-sxm' is given twice" in out.output


def test_a_pool_that_streams_weights_from_host_says_so_in_its_label():
    """New-user trial: the DeepSeek-V3 GB200 frontier listed 'prefill DP2 EP2' pools whose memory plan
    offloads experts to host memory (`planner estimate`: hundreds of GB, most of the prefill time); the
    label now marks them, from the point's own memory plans."""
    from planner.search.compare import frontier

    f = frontier("deepseek-v3", "gb200-nvl72", 1024, 1024, "sglang")
    offloading = [lab for _, _, lab in f.points if "host-offload" in lab]
    assert offloading
    assert all("prefill" in lab.split("host-offload")[0] for lab in offloading)
