"""Twenty-first session's new-user trial: one-token answers served at their offered rate by estimate (the
prefill's saturated throughput is the service rate, not the throughput at the batch tried)."""

from __future__ import annotations

import itertools
import json

import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.inputs.scenario import parse_scenario
from planner.model import estimator
from planner.model.defaults import resolve

runner = CliRunner()

ONE_TOKEN = {
    "model": "qwen3-235b-a22b", "hardware": "b200", "engine": "sglang",
    "deployment": {"aggregated": {"instances": 2, "gpus_per_instance": 2, "tp": 2, "dp_attention": 1, "ep": 2}},
    "precision": {"attention": "bf16", "kv_cache": "bf16", "dense": "fp8", "moe": "nvfp4"},
    "workload": {"isl": 4000, "osl": 1, "request_rate": 20.0},
}  # fmt: skip


def test_one_token_answers_are_served_at_the_offered_rate_not_more(tmp_path) -> None:
    """The trial's 2x TP2 EP2 on B200 at 20 req/s of 4,000-token prompts read 23.7 req/s served, a decode
    batch of 155 and 5.91 tok/s/GPU (at most 5.0 is possible) by estimate."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(ONE_TOKEN))
    out = runner.invoke(app, ["estimate", str(path), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert abs(d["output_tok_s"] - 20.0) < 0.01
    assert abs(d["output_tok_s_per_gpu"] - 5.0) < 0.01
    assert d["decode_batch_per_instance"] == 0.0


def test_one_token_throughput_rises_with_load_to_the_saturated_prefill_and_no_further() -> None:
    res = resolve(parse_scenario(ONE_TOKEN))
    dep, cap = res.deployment, estimator.max_batch(res.deployment, res.isl, res.osl)
    served = [estimator.point(dep, res.isl, res.osl, res.kv_len, b).output_tok_s for b in (0.5, 2, 8, 32, 128, cap)]
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(served))  # never falls as load grows
    capacity = served[-1] / estimator.RHO_ONE_TOKEN  # the saturated prefill's req/s; it serves RHO_ONE_TOKEN of it
    assert capacity > 20.0
    above = estimator.estimate_deployment(dep, res.isl, res.osl, res.kv_len, rate=0.99 * capacity)
    assert above.saturated  # above the M/D/1's reach: saturated, not served at a step up (review)
    assert above.output_tok_s <= 0.99 * capacity


POISSON = {
    "model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm",
    "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1}},
    "workload": {"isl": 1000, "osl": 200, "request_rate": 20.0},
    "slo": {"ttft_ms": 2000.0, "tpot_ms": 50.0},
}  # fmt: skip


def test_simulate_requests_keeps_the_warm_start_and_a_stated_count_runs_from_idle(tmp_path) -> None:
    """`planner simulate --requests 200000` of a plan row had dropped the default run's warm start (2,959 tok/s/GPU
    against 5,000): the flag changes the run's length, not how it starts. A scenario's own count runs from idle, as
    a benchmark does, and LoadGen states warm_start 0 (its first sample meets an empty engine)."""
    from planner.model.simulate import default_warm_start, standard_config
    from planner.search.loadgen import LoadGenRun, config
    from simulator import SimConfig

    res = resolve(parse_scenario(POISSON))
    assert standard_config(res).warm_start > 0
    assert standard_config(res, SimConfig(requests=5000)).warm_start == 0
    cfg, _ = config(res, 20.0, LoadGenRun())
    assert cfg.warm_start == 0
    # 16 instances: the default run simulates a slice, a stated count the whole deployment, which starts with the
    # whole deployment's warm start (review: it had started with the slice's)
    many = {**POISSON, "deployment": {"aggregated": {"instances": 16, "gpus_per_instance": 1, "tp": 1}},
            "workload": {**POISSON["workload"], "request_rate": 320.0}}  # fmt: skip
    res16 = resolve(parse_scenario(many))
    whole = default_warm_start(res16)
    assert whole > standard_config(res16).warm_start  # the default run is a slice
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(many))
    out = runner.invoke(app, ["simulate", str(path), "--json", "--requests", "6000"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["requests"] == 6000
    assert d["requests_warm_start"] == whole
    assert d["slice_divisor"] == 1


def test_a_run_that_fills_and_drains_is_not_steady_and_a_drifting_miss_is_a_miss() -> None:
    from planner.report.verdicts import verdict_word

    summary = {"steady": False, "overloaded": False, "misses_as_it_settles": ["tpot_ms"]}
    assert verdict_word(False, summary) == "misses"
    assert verdict_word(False, {"steady": False, "overloaded": False, "misses_as_it_settles": []}) == "unverified"


def test_a_short_trace_run_reads_not_steady(tmp_path) -> None:
    """A trace whose arrivals span about one E2E fills and drains throughout: its row had read steady (the trial's
    DeepSeek-V3 trace run whose decode never ran in its window, 5 of 1,342 offered tok/s/GPU)."""
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{i * 0.01:.2f},1000,400" for i in range(200)]
    trace = tmp_path / "t.csv"
    trace.write_text("\n".join(rows) + "\n")
    scenario = {k: v for k, v in POISSON.items() if k != "workload"} | {
        "workload": {"isl": 1000, "osl": 400},
        "simulation": {"requests": 200, "trace": {"path": str(trace), "format": "splitwise"}},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = runner.invoke(app, ["simulate", str(path), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["warning"].startswith("a short run")
    assert d["steady"] is False


def test_the_running_request_limit_is_named_as_such_not_as_kv() -> None:
    """vLLM's max_num_seqs (1,024) capped gpt-oss-120b on one B200 and read 'decode KV capacity' (trial)."""
    scenario = {
        "model": "gpt-oss-120b", "hardware": "b200", "engine": "vllm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1}},
        "workload": {"isl": 1000, "osl": 1000, "concurrency": 1400},
    }  # fmt: skip
    res = resolve(parse_scenario(scenario))
    m = estimator.estimate_deployment(res.deployment, res.isl, res.osl, res.kv_len, concurrency=1400.0)
    assert m.limit.startswith("the engine's running-request limit (1,024")


def test_rows_meeting_on_estimates_alone_are_flagged_when_the_simulated_rows_missed() -> None:
    from planner.report.plan_notes import _optimistic

    def rec(rank: int, simulated: bool, verdict: str) -> dict:
        return {"rank": rank, "simulated": {} if simulated else None, "estimate": {}, "slo_verdict": verdict}

    recs = [rec(1, True, "misses"), rec(2, False, "meets"), rec(3, False, "meets"), rec(4, True, "misses")]
    (note,) = _optimistic(recs)
    assert "2 of the 2 simulated rows missed" in note
    assert "#2, #3" in note
    assert _optimistic([rec(1, True, "meets"), rec(2, False, "meets")]) == []


def test_an_estimate_at_a_flat_throughput_says_its_batch_is_not_pinned(tmp_path) -> None:
    """Llama-3.1-8B on one H100 at 50 req/s of 500/300 tokens: batch 492 and TPOT 33 ms by estimate, while batch 768
    carries the rate within 5% (simulated, the batch settled near 1,210 at 80 ms). At 30 req/s the throughput still
    rises with the batch: no caveat. (Since the prefill-first rate is solved to its fixed point, twenty-second
    session, the flat span lies at 48-49.5 req/s: 49 req/s is carried by batches 316 to 618.)"""
    base = {
        "model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "sglang",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1}},
        "precision": {"attention": "fp8", "kv_cache": "fp8", "dense": "fp8"},
        "workload": {"isl": 500, "osl": 300, "request_rate": 50.0},
    }  # fmt: skip
    caveats = {}
    for rate in (30.0, 49.0):
        path = tmp_path / f"s{rate:.0f}.yaml"
        path.write_text(yaml.safe_dump({**base, "workload": {**base["workload"], "request_rate": rate}}))
        out = runner.invoke(app, ["estimate", str(path), "--json"])
        assert out.exit_code == 0, out.output
        caveats[rate] = json.loads(out.output)["caveat"]
    assert caveats[30.0] is None
    assert "carries the load" in caveats[49.0]
    assert "not pinned" in caveats[49.0]


def test_an_unsettled_run_whose_halves_both_miss_is_a_miss() -> None:
    """The trial's Llama-3.1-8B on 20 H100 at 1,000 req/s of 500/300 tokens: its batch still grows, TPOT p90 82 ms
    against a 50 ms target in both halves; it read 'unverified' and ranked above rows that met the SLO."""
    from planner.model.simulate import run_simulation
    from planner.report.verdicts import slo_verdict

    scenario = {
        "model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "sglang",
        "deployment": {"aggregated": {"instances": 20, "gpus_per_instance": 1, "tp": 1}},
        "precision": {"attention": "fp8", "kv_cache": "fp8", "dense": "fp8"},
        "workload": {"isl": 500, "osl": 300, "request_rate": 1000.0},
        "slo": {"ttft_ms": 2000.0, "tpot_ms": 50.0}, "runtime": {"mem_fraction": 0.85},
        "simulation": {"warm_start": 0},  # from idle: its batch grows through the run (warm, it settles at 82 ms)
    }  # fmt: skip
    res = resolve(parse_scenario(scenario))
    _, summary = run_simulation(res)
    assert summary["steady"] is False
    assert summary["misses_as_it_settles"] == ["tpot_ms"]
    verdict = slo_verdict(summary, res.slo)
    assert verdict is not None
    assert verdict["verdict"] == "misses"
