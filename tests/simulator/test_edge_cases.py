"""Inputs at the edge of what a deployment can serve (issue 13): pools with one side only, requests
that can never fit, runs that would never end, trace rows that are malformed or huge. Each must
finish in bounded time with every request accounted for, or stop with an error that says why."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from planner.inputs.scenario import load_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from planner.model.steps import memory
from roofline.memory import kv_needed_tokens
from simulator import SimConfig
from simulator.engine import SimulationError
from simulator.instances import NEVER_FITS
from tests.simulator.helpers import AGG_LLAMA, DISAGG_H200, scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _sane(m: dict) -> None:
    assert m["requests_completed"] > 0
    assert m["output_tok_s"] > 0
    assert math.isfinite(m["output_tok_s"])
    ttft, e2e = m["ttft_ms"]["mean"], m["e2e_ms"]["mean"]
    assert ttft is not None or m["tpot_ms"]["mean"] is not None  # a phase has one of them at least
    if ttft is not None and e2e is not None:  # (a decode phase has neither, a prefill phase no E2E)
        assert ttft <= e2e
    assert m["measured_window_s"][1] > m["measured_window_s"][0]


def test_the_shipped_decode_only_example_simulates():
    """Issue 13: examples/dsv4flash-rtxpro-decode-c16.yaml crashed the router (decode pool only).
    Prompts arrive prefilled, as in a decode benchmark, and the notes say so."""
    path = EXAMPLES / "dsv4flash-rtxpro-decode-c16.yaml"
    res = resolve(load_scenario(path), path.parent)
    _, m = run_simulation(res, SimConfig(requests=48, seed=0))
    _sane(m)
    assert m["requests_completed"] == 48
    assert any("decode pool only" in n for n in m["notes"])


def test_a_prefill_only_pool_ends_each_request_at_its_first_token():
    base = {**DISAGG_H200, "deployment": {"prefill": DISAGG_H200["deployment"]["prefill"]}}
    res = scenario(base, {"isl": 2000, "osl": 100, "request_rate": 5.0}, {"requests": 60, "seed": 1}, phase="prefill")
    result, m = run_simulation(res)
    _sane(m)
    assert m["requests_completed"] == 60
    assert result.table.osl.tolist() == [1] * 60
    assert m["input_tok_s"] > 0


def _mooncake(tmp_path: Path, rows: list[tuple[float, int, int]]) -> str:
    p = tmp_path / "t.jsonl"
    lines = (json.dumps({"timestamp": t, "input_length": i, "output_length": o}) for t, i, o in rows)
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_a_request_whose_output_outgrows_the_kv_pool_is_dropped_at_admission_not_preempted_forever(tmp_path):
    """Issue 13 livelock: a prompt that fits the KV pool while prompt + output does not, with
    kv_reservation 0, was admitted, preempted and re-prefilled forever (2.2M preemptions)."""
    # within Llama-3.1-8B's 131,072-token window (a longer one is refused at arrival), beyond a pool of ~90,000
    trace = _mooncake(tmp_path, [(0, 1000, 10), (100, 60_000, 60_000), (200, 1000, 10)])
    sim = {"trace": {"path": trace, "format": "mooncake"}, "kv_reservation": 0.0, "requests": 3}
    res = scenario(AGG_LLAMA, {"isl": 1000, "osl": 10, "concurrency": 1}, sim, runtime={"mem_fraction": 0.35})
    _, m = run_simulation(res)
    assert m["requests_dropped_by_reason"] == {NEVER_FITS: 1}
    assert m["preemptions"] == 0
    assert m["requests_completed"] == 2
    _sane(m)


def test_a_run_that_would_not_end_stops_at_its_step_budget_with_a_message():
    res = scenario(AGG_LLAMA, {"isl": 1000, "osl": 400, "concurrency": 4}, {"requests": 40, "max_steps": 50})
    with pytest.raises(SimulationError, match=r"simulation.max_steps: stopped after 50 forward steps"):
        run_simulation(res)


def test_a_trace_with_malformed_rows_runs_the_good_ones_and_notes_the_rest(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,100,5\n0.1,x,5\n0.2,100,1e30\n0.3,100,5\n")
    sim = {"trace": {"path": str(p), "format": "splitwise"}, "requests": 10}
    res = scenario(AGG_LLAMA, {"isl": 100, "osl": 5, "concurrency": 1}, sim)
    _, m = run_simulation(res)
    assert m["requests_completed"] == 2
    assert any("skipped 2 malformed row(s)" in n for n in m["notes"])


def test_all_arrivals_at_time_zero_keep_a_positive_measured_window(tmp_path):
    """Issue 13: the measured window collapsed to [0, 0] (output_tok_s 0) when every arrival was at t=0."""
    trace = _mooncake(tmp_path, [(0, 500, 20)] * 30)
    sim = {"trace": {"path": trace, "format": "mooncake"}}
    res = scenario(AGG_LLAMA, {"isl": 500, "osl": 20, "concurrency": 1}, sim)
    _, m = run_simulation(res)
    _sane(m)


def test_a_window_of_no_length_is_an_error_not_an_infinite_rate():
    """Found by the property tests: a decode pool only with osl 1 has nothing to decode; every
    request arrives and finishes at t = 0, and the rate over that window was inf (or 1e12)."""
    base = {**DISAGG_H200, "phase": "decode", "deployment": {"decode": DISAGG_H200["deployment"]["prefill"]}}
    for warmup_by in ("arrival", "completion"):
        res = scenario(base, {"isl": 1, "osl": 1, "concurrency": 1}, {"requests": 1, "warmup_by": warmup_by})
        with pytest.raises(SimulationError, match="nothing to"):
            run_simulation(res)


@pytest.mark.parametrize(
    ("flag", "match"),
    [("--requests=10000000", "simulation.requests"), ("--requests=0", "simulation.requests"), ("--seed=-1", "seed")],
)
def test_command_line_overrides_are_validated_before_the_simulator_runs(flag, match):
    """Found by the fuzz campaign: `simulate --requests 10000000` bypassed the schema (a copy with
    updates is not validated) and ran for minutes; the simulator now checks its config itself."""
    from typer.testing import CliRunner

    from planner.cli import app

    out = CliRunner().invoke(app, ["simulate", str(EXAMPLES / "llama-8b-bursty.yaml"), flag])
    assert out.exit_code == 2
    assert match in out.output


def test_a_deployment_the_plan_finds_fitting_is_simulated_with_the_same_kv_rule():
    """The plan's fit check, the estimate and the simulator ask one thing of an aggregated pool's KV
    (roofline.memory.kv_needed_tokens): one sequence at its full length. Llama-70B bf16 on 2 H100 at
    memory fraction 0.84 leaves 1.3 GB of KV, 7,800 tokens: enough for a 3,000-token sequence, so the
    plan kept it, but the simulator asked for two 8,192-token prefill steps (2.7 GB) and refused it. (SGLang:
    vLLM's fraction also holds the step's activations, which this fraction leaves no room for.)"""
    base = {
        "model": "llama-3.1-70b",
        "hardware": "h100-sxm",
        "engine": "sglang",
        "deployment": {"aggregated": {"gpus_per_instance": 2, "tp": 2}},
        "precision": {"attention": "bf16", "kv_cache": "bf16", "dense": "bf16", "moe": "bf16"},
    }
    res = scenario(base, {"isl": 2000, "osl": 1000, "concurrency": 2}, runtime={"mem_fraction": 0.84})
    (pool,) = res.deployment.pools
    fit = memory(pool, kv_needed_tokens(pool.instance, "aggregated", 3000))
    assert fit.max_seqs(3000) >= 1  # what planner/search/space.py checks
    _, sim = run_simulation(res, SimConfig(requests=40, seed=1))
    _sane(sim)
    assert sim["requests_dropped"] == 0
