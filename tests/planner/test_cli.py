"""The CLI runs its default scenario and reports user errors without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_the_disaggregated_example_estimates_its_60_gpus():
    out = runner.invoke(app, ["estimate", str(EXAMPLES / "deepseek-v3-gb200-disagg.yaml"), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["mode"] == "disaggregated"
    assert data["gpus"] == 60
    assert data["output_tok_s_per_gpu"] > 0


def test_a_mixed_schedulers_decode_step_with_a_prompt_says_so(tmp_path):
    """TRT-LLM's in-flight batching prices the step that carries a prompt beside the decodes where most
    steps carry one (20-token answers at concurrency 64), and the table says so instead of calling a
    2,404-token step a decode step; at concurrency 1 most steps carry none, and the plain decode step, the
    one that sets TPOT, is shown (it showed a 27 ms mixed step beside a 2.3 ms TPOT; trial). SGLang's
    prefill-first decode step carries no prompt and keeps its plain title."""
    example = EXAMPLES / "deepseek-v32-h200-trtllm.yaml"
    busy = tmp_path / "busy.yaml"
    busy.write_text(example.read_text().replace("osl: 1600, concurrency: 1}", "osl: 20, concurrency: 64}"))
    out = runner.invoke(app, ["estimate", str(busy)], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "decode step with a prompt (mixed scheduler" in out.output
    light = runner.invoke(app, ["estimate", str(example)], terminal_width=200)
    assert "decode step: " in light.output
    assert "with a prompt" not in light.output
    plain = runner.invoke(app, ["estimate", str(EXAMPLES / "dsv4flash-rtxpro-decode-c16.yaml")], terminal_width=200)
    assert plain.exit_code == 0, plain.output
    assert "decode step: " in plain.output
    assert "with a prompt" not in plain.output


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
    p.write_text("model: deepseek-v3\nhardware: h300\ndeployment: {aggregated: {gpus_per_instance: 8, tp: 8}}\n")
    out = runner.invoke(app, ["estimate", str(p)])
    assert out.exit_code == 2
    assert "unknown hardware 'h300'" in out.output
    assert "Traceback" not in out.output


def test_catalog_lists_models_and_hardware():
    out = runner.invoke(app, ["catalog"])
    assert out.exit_code == 0
    assert "deepseek-v4-pro" in out.output
    assert "rtx-pro-6000" in out.output
    assert "b200 sources: peak_tflops:" in out.output  # where each system's figures come from
    assert "config.json" in out.output  # each model's config source


SIM_KEYS = {
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "queue_ms",
    "input_tok_s",
    "output_tok_s",
    "input_tok_s_per_gpu",
    "output_tok_s_per_gpu",
    "total_tok_s_per_gpu",
    "output_tok_s_per_user",
    "gpus",
    "requests_completed",
    "requests_preempted",
    "kv_utilization",
    "goodput",
    "sim_time_s",
    "wall_time_s",
}


def test_simulate_json_has_the_documented_keys_and_writes_records_and_timeseries(tmp_path):
    rec, ts = tmp_path / "r.csv", tmp_path / "t.csv"
    out = runner.invoke(
        app,
        [
            "simulate",
            str(EXAMPLES / "llama-8b-bursty.yaml"),
            "--json",
            "--requests",
            "400",
            "--records",
            str(rec),
            "--timeseries",
            str(ts),
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert set(data) >= SIM_KEYS
    for k in ("ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"):
        assert set(data[k]) == {"mean", "p50", "p90", "p99"}
    assert data["requests_completed"] == 400
    assert len(rec.read_text().splitlines()) == 401
    header = ts.read_text().splitlines()[0]
    assert header == "time_s,pool,instance,batch,output_tokens,input_tokens,kv_fraction,queue"
    assert not list(tmp_path.glob("*.part"))


def test_simulate_says_what_it_searched_for_an_unknown_deployment(tmp_path):
    """A scenario that leaves the deployment unknown is simulated on the searched one, and both views
    say which: the JSON's `assumed` list and the table's 'assumed:' lines (as `planner estimate`)."""
    p = tmp_path / "s.yaml"
    p.write_text(
        "model: qwen3-30b-a3b\nhardware: h100-sxm\nengine: vllm\ndeployment: unknown\n"
        "workload: {isl: 1000, osl: 100, concurrency: 8}\n"
    )
    out = runner.invoke(app, ["simulate", str(p), "--json", "--requests", "60"])
    assert out.exit_code == 0, out.output
    searched = [a for a in json.loads(out.output)["assumed"] if a.startswith("deployment: searched")]
    assert len(searched) == 1
    assert json.loads(out.output)["method"] == "simulate"  # as estimate --json says "estimate"
    text = runner.invoke(app, ["simulate", str(p), "--requests", "60"])
    assert text.exit_code == 0, text.output
    assert "assumed:" in text.output
    assert searched[0].split(": ", 1)[1][:40] in " ".join(text.output.split())


def test_simulate_every_example_with_a_simulation_section():
    for name in ("deepseek-v3-h200-trace-replay.yaml", "qwen3-235b-daily-ramp.yaml"):
        out = runner.invoke(app, ["simulate", str(EXAMPLES / name), "--json", "--requests", "300"])
        assert out.exit_code == 0, (name, out.output)


def test_a_missing_trace_is_a_clear_error(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(
        (EXAMPLES / "deepseek-v3-h200-trace-replay.yaml")
        .read_text()
        .replace("../../shared/traces/splitwise_conv.csv", "nowhere.csv")
    )
    out = runner.invoke(app, ["simulate", str(p)])
    assert out.exit_code == 2
    assert "trace file not found" in out.output


def test_mixed_instance_sizes_all_serve_requests():
    from planner.inputs.scenario import load_scenario
    from planner.model.defaults import resolve
    from planner.model.simulate import run_simulation
    from simulator import SimConfig

    res = resolve(load_scenario(EXAMPLES / "deepseek-v3-h200-trace-replay.yaml"), EXAMPLES)
    assert {p.gpus_per_instance for p in res.deployment.of("decode")} == {8, 16}
    result, _ = run_simulation(res, SimConfig(requests=400, seed=1, router="round_robin"))
    used = set(result.table.decode_instance.tolist())
    assert {result.instances[u][1] for u in used} == {1, 2}  # both decode pools took requests


@pytest.mark.parametrize("value", ["nan", "0", "-5", "inf"])
def test_estimate_refuses_a_concurrency_that_is_not_a_positive_number(value):
    """Fuzz signatures: --concurrency nan raised ValueError, 0 ZeroDivisionError, -5 was accepted."""
    out = CliRunner().invoke(app, ["estimate", "examples/deepseek-v3-gb200-disagg.yaml", "--concurrency", value])
    assert out.exit_code == 2
    assert "--concurrency" in out.output


def test_simulate_reads_each_slo_target_against_its_p90(tmp_path):
    """With an `slo:` in the scenario, the table says, for each target, the simulated p90 and whether
    it meets it, and the verdict agrees with the JSON's p90 (one loose target, one impossible one)."""
    p = tmp_path / "s.yaml"
    p.write_text(
        "model: qwen3-30b-a3b\nhardware: h100-sxm\nengine: vllm\n"
        "deployment: {aggregated: {instances: 1, gpus_per_instance: 1}}\n"
        "workload: {isl: 1000, osl: 100, concurrency: 8}\n"
        "slo: {ttft_ms: 100000, tpot_ms: 0.001}\n"
    )
    data = json.loads(runner.invoke(app, ["simulate", str(p), "--json", "--requests", "60"]).output)
    out = runner.invoke(app, ["simulate", str(p), "--requests", "60"])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("slo: "))
    assert f"TTFT p90 {data['ttft_ms']['p90']:,.1f} ms <= 100,000" in line
    assert f"TPOT p90 {data['tpot_ms']['p90']:,.1f} ms > 0.001" in line
    v = data["slo"]  # the JSON's verdict is the table's
    assert v["achieved"] == {"ttft_ms": data["ttft_ms"]["p90"], "tpot_ms": data["tpot_ms"]["p90"]}
    assert v["statistic"] == "p90"
    assert v["verdict"] == ("unverified" if data["steady"] is False else "misses")
    assert f"> 0.001: {v['verdict']}" in line


def test_an_empty_front_is_one_line_saying_why_not_an_empty_table():
    """One GPU cannot split prefill from decode: the plan says the disaggregated front is empty."""
    args = ["plan", "--model", "llama-3.1-8b", "--hardware", "h200-sxm", "--gpus", "1", "--isl", "1000", "--osl", "100"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    said = "Pareto front, disaggregated: none (no disaggregated deployment was scored within the question's GPUs: see"
    assert said in out.output  # not 'TTFT within the SLO', where the GPU budget pruned every one (trial)
    assert "Pareto front, aggregated (estimates)" in out.output


def test_an_empty_front_with_nothing_scored_points_to_the_pruning_not_the_slo():
    """Kimi K2 does not fit on 8 H100s: the fronts are empty because nothing was scored, not because of the SLO."""
    args = ["plan", "--model", "kimi-k2", "--hardware", "h100-sxm", "--gpus", "8", "--workers", "1"]
    out = runner.invoke(app, args)
    assert out.exit_code == 1, out.output  # nothing meets: the answer is printed and the status says so
    assert "weights do not fit" in out.output
    said = "Pareto front, aggregated: none (no aggregated deployment was scored within the question's GPUs: see the"
    assert said in out.output
    assert "TTFT within the SLO)" not in out.output


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["plan", "--osl", "abc"], "--osl"),
        (["compare", "--model", "deepseek-v3", "--isl", "1024", "--osl", "x"], "--osl"),
        (["plan", "--bogus", "3"], "--bogus"),
        (["simulate"], "scenario"),
        (["plan", "--gpus", "-3"], "gpus"),
    ],
)
def test_the_planner_script_tells_a_bad_option_in_one_line(args, names):
    """The installed script (`planner.cli:main`): a value the parser refuses, an unknown flag or a
    missing argument is one `error:` line naming it, exit 2, as a PlannerError is; no boxed panel."""
    cmd = [sys.executable, "-m", "planner.cli", *args]
    run = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error:"), run.stderr
    assert names in lines[0], run.stderr
    assert "╭" not in run.stderr
    assert "Traceback" not in run.stderr


def test_the_planner_script_runs_without_click_where_typer_vendors_it():
    """typer 0.2x parses with its own copy of click and does not install click: the script (its error
    path included) must not import click itself (a fresh `pip install .` had no click)."""
    pytest.importorskip("typer._click")
    code = (
        "import sys; sys.modules['click'] = None; sys.argv = ['planner', 'plan', '--osl', 'abc']\n"
        "from planner.cli import main; main()"
    )
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: planner plan: Invalid value for '--osl'"), run.stderr


def test_bare_planner_prints_its_help_once():
    cmd = [sys.executable, "-m", "planner.cli"]
    run = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("Usage:") == 1, run.stdout
    assert "compare" in run.stdout


def test_a_decode_phase_has_no_ttft_or_e2e_in_either_view():
    """Estimate and simulation of one decode-only deployment show the same quantities: TPOT, and no
    TTFT or E2E (the simulation showed 0.0 ms TTFT and a 522 s E2E beside the estimate's '-')."""
    path = str(EXAMPLES / "dsv4flash-rtxpro-decode-c16.yaml")
    est = json.loads(runner.invoke(app, ["estimate", path, "--json"]).output)
    sim = json.loads(runner.invoke(app, ["simulate", path, "--json", "--requests", "60"]).output)
    for key in ("ttft_ms", "e2e_ms"):
        assert est[key] is None
        assert set(sim[key].values()) == {None}
    assert est["tpot_ms"] > 0
    assert sim["tpot_ms"]["mean"] > 0
    out = runner.invoke(app, ["simulate", path, "--requests", "60"]).output
    assert next(x for x in out.splitlines() if "ttft_ms" in x).count("-") == 4


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", str(EXAMPLES / "llama-8b-bursty.yaml"), "--json"],
        ["estimate", str(EXAMPLES / "llama-8b-bursty.yaml")],
        ["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--gpus", "1", "--scenarios", "SC"],
    ],
    ids=["json", "table", "plan-files"],
)
def test_a_reader_that_goes_away_is_no_error(args, tmp_path):
    """`planner ... | head`: stdout closed before the command prints. It exits 0 with nothing on stderr
    and still writes its files (rich had exited 1 before --scenarios were written; a JSON print read
    'error: [Errno 32] Broken pipe', exit 2)."""
    args = [str(tmp_path / "sc") if a == "SC" else a for a in args]
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, stderr
    assert "error" not in stderr, stderr
    assert "Traceback" not in stderr, stderr
    if "--scenarios" in args:
        assert (tmp_path / "sc" / "rec1_scenario.yaml").is_file()
