"""Findings of the eighteenth session's new-user trial: a closed loop's request meets only the others'
prompts in the estimate (one client, none), and an over-capacity simulation starts from what the pools
hold, not from rate x E2E requests with their prompts computed."""

from __future__ import annotations

import pytest

from planner.inputs.question import build_question
from planner.inputs.scenario import parse_scenario
from planner.launch import launch_commands
from planner.launch.check import problems
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation
from planner.search.plan import plan
from simulator.config import SimConfig

LONG_PROMPT = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1}},
    "workload": {"isl": 32000, "osl": 100, "concurrency": 1},
}


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "sglang"])
def test_one_client_with_a_long_prompt_decodes_in_plain_steps(engine: str) -> None:
    """The estimate priced a share of the one request's decode steps as carrying a prompt (its own,
    already in its TTFT), and queued its prompt behind itself: Llama-3.1-70B at 100,000/200 tokens read
    TPOT 80 ms where its simulation reads 25.5."""
    res = resolve(parse_scenario({**LONG_PROMPT, "engine": engine}))
    est = estimate(res)
    _, sim = run_simulation(res, SimConfig(requests=6, seed=1))
    assert est.tpot_s * 1e3 == pytest.approx(sim["tpot_ms"]["mean"], rel=0.05)
    assert est.ttft_s * 1e3 == pytest.approx(sim["ttft_ms"]["mean"], rel=0.05)
    assert est.output_tok_s_per_gpu == pytest.approx(sim["output_tok_s_per_gpu"], rel=0.05)


def test_more_clients_still_meet_each_others_prompts() -> None:
    """The arrival theorem's share: 8 clients meet 7/8 of the load, so TPOT stays above the plain step."""
    one = estimate(resolve(parse_scenario({**LONG_PROMPT, "engine": "vllm"})))
    eight = estimate(
        resolve(
            parse_scenario({**LONG_PROMPT, "engine": "vllm", "workload": {**LONG_PROMPT["workload"], "concurrency": 8}})
        )
    )
    assert eight.tpot_s > 2 * one.tpot_s
    assert eight.ttft_s > one.ttft_s


def test_an_over_capacity_rate_reads_what_the_deployment_sustains() -> None:
    scn = {
        "model": "qwen3-30b-a3b",
        "hardware": "h100-sxm",
        "engine": "vllm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1}},
        "workload": {"isl": 2000, "osl": 300, "request_rate": 100},
    }
    res = resolve(parse_scenario(scn))
    est = estimate(res)
    assert est.saturated
    _, sim = run_simulation(res)
    assert sim["overloaded"]
    assert sim["requests_warm_start"] <= round(est.decode_batch) + 1  # what the pool holds, not rate x E2E
    assert sim["output_tok_s"] == pytest.approx(est.output_tok_s, rel=0.10)
    assert sim["input_tok_s"] == pytest.approx(est.input_tok_s, rel=0.10)


def test_vllm_launches_the_redundant_experts_the_plan_priced() -> None:
    """SGLang got --ep-num-redundant-experts 32 and TRT-LLM 416 slots; vLLM only --enable-eplb, which places
    none (EPLBConfig.num_redundant_experts defaults to 0)."""
    q = build_question(
        {"model": "kimi-k2", "hardware": "h200-sxm", "gpus": 32, "isl": 50, "osl": 4000, "rate": 4, "verify_top": 0}
    )
    rows = [r for r in plan(q, workers=1).recommendations if r.deployment.pools[-1].instance.runtime.redundant_experts]
    assert rows, "a wide-EP row with redundant experts"
    copies = rows[0].deployment.pools[-1].instance.runtime.redundant_experts
    out = launch_commands(q, rows[0])
    assert f"--eplb-config '{{\"num_redundant_experts\": {copies}}}'" in out["vllm"]
    assert f"--ep-num-redundant-experts {copies}" in out["sglang"]
    assert not problems(out["vllm"])


def test_a_rejected_question_leaves_no_scenarios_folder(tmp_path) -> None:
    from typer.testing import CliRunner

    from planner.cli import app

    folder = tmp_path / "new" / "rows"
    out = CliRunner().invoke(app, ["plan", "--engine", "tensorrt", "--scenarios", str(folder)])
    assert out.exit_code == 2
    assert "engine" in out.output
    assert not (tmp_path / "new").exists()


def test_printed_launch_commands_are_the_first_loadable_rows() -> None:
    """#1 (BF16 dense layers beside FP8 experts: no published checkpoint) got the only printed commands, each
    stopping on ${CHECKPOINT:?}; #2 loads Qwen3-30B-A3B-FP8 at -0.3% and got none."""
    from rich.console import Console

    from planner.report.plan_report import print_answer, records

    q = build_question(
        {
            "model": "qwen3-30b-a3b",
            "hardware": "h100-sxm",
            "gpus": 4,
            "isl": 50,
            "osl": 4000,
            "engine": "vllm",
            "verify_top": 0,
        },
        {"ttft_p90_ms": 500, "tpot_p90_ms": 30},
    )
    a = plan(q, workers=1)
    recs = records(a)
    first = next(k for k, d in enumerate(recs) if not any("none in the catalog" in n for n in d["needs"]))
    con = Console(record=True, width=400)
    print_answer(con, a)
    text = con.export_text()
    assert first >= 1
    assert f"vllm launch for #{first + 1}:" in text
    assert "${CHECKPOINT" not in text.split(f"vllm launch for #{first + 1}:")[1]


def test_small_throughputs_keep_their_digits_and_length_errors_name_their_flag(tmp_path) -> None:
    from typer.testing import CliRunner

    from planner.cli import app
    from planner.report.report import _num

    assert _num(3.96) == "3.96"  # read '4'
    assert _num(8104.7) == "8,105"
    out = CliRunner().invoke(app, ["compare", "--model", "llama-3.1-8b", "--isl", "100", "--osl", "0"])
    assert out.exit_code == 2
    assert "--osl" in out.output
    assert "--isl and" not in out.output


def test_each_compare_point_carries_the_scenario_that_reruns_it() -> None:
    """`compare --json` had no per-point scenario, so a frontier point could not be rerun."""
    from planner.search.compare import compare, compare_dict

    front = compare_dict(compare("llama-3.1-8b", 1000, 200, hardware=["h100-sxm"]))["hardware"][0]["frontier"]
    assert front
    for pt in front[:3]:
        est = estimate(resolve(parse_scenario(pt["scenario"])))
        assert est.output_tok_s_per_gpu == pytest.approx(pt["output_tok_s_per_gpu"], rel=1e-6)


@pytest.mark.parametrize("clients", [2, 8])
def test_a_few_clients_of_long_prompts_meet_each_others_prompts_in_their_decode_time(clients: int) -> None:
    """Review: the (N - 1) / N share alone, spread over the whole cycle, read two clients of 32,000-token
    prompts at TPOT 14.3 ms (simulated 21.8) and more tok/s than the prefill leaves; and an M/D/1 wait read
    2.3 s of TTFT for four where the staggered loop waits almost none. Both within 12% of the simulation now."""
    res = resolve(
        parse_scenario(
            {**LONG_PROMPT, "engine": "vllm", "workload": {**LONG_PROMPT["workload"], "concurrency": clients}}
        )
    )
    est = estimate(res)
    _, sim = run_simulation(res)
    assert est.tpot_s * 1e3 == pytest.approx(sim["tpot_ms"]["mean"], rel=0.12)
    assert est.ttft_s * 1e3 == pytest.approx(sim["ttft_ms"]["mean"], rel=0.12)
    assert est.output_tok_s_per_gpu == pytest.approx(sim["output_tok_s_per_gpu"], rel=0.12)


def test_an_unknown_model_leaves_no_scenarios_folder(tmp_path) -> None:
    from typer.testing import CliRunner

    from planner.cli import app

    out = CliRunner().invoke(app, ["plan", "--model", "nosuch", "--scenarios", str(tmp_path / "new")])
    assert out.exit_code == 2
    assert not (tmp_path / "new").exists()


@pytest.mark.fuzz  # the long profile: about 35 s of simulation (pytest -m fuzz)
def test_a_prefill_bound_run_over_capacity_gets_the_steps_its_decode_batch_takes() -> None:
    """Review: 58,247 requests (rate x E2E) stopped at 1,500,000 steps, the budget priced as if 11,648 decoded
    together where the decode pool holds 7."""
    scn = {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "engine": "sglang",
        "deployment": {
            "prefill": {"instances": 1, "gpus_per_instance": 1},
            "decode": {"instances": 1, "gpus_per_instance": 1},
        },
        "workload": {"isl": 16000, "osl": 250, "request_rate": 50},
    }
    res = resolve(parse_scenario(scn))
    est = estimate(res)
    _, sim = run_simulation(res)
    assert sim["overloaded"]
    assert sim["output_tok_s"] == pytest.approx(est.output_tok_s, rel=0.10)
