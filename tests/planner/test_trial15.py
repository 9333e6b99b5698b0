"""Findings of the fifteenth session's new-user trial (a fresh clone, ~60 CLI questions): each was a
traceback or a file that could not be used as the README says."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

import planner.search.verify as verify_mod
from planner.cli import app
from planner.inputs.question import Question, build_question
from planner.model.metrics import Metrics
from planner.report.plan_report import _figures, print_answer
from planner.search.plan import plan
from roofline.errors import PlannerError
from simulator.traces import read_trace


def test_one_user_with_long_answers_is_planned_and_simulated():
    """`planner plan --model deepseek-v3 --hardware b200 --gpus 8 --concurrency 1 --isl 2000 --osl 8000`
    ended in `ValueError: max() arg is an empty sequence`: 600 one-at-a-time requests of 8,000 tokens
    take 4.8 million forward steps, every verifying run stopped at the simulator's default 1.5 million,
    and no simulated row was left to show as the closest. The standard run's step budget now follows
    what its requests need."""
    question = ["--model", "deepseek-v3", "--hardware", "b200", "--gpus", "8", "--concurrency", "1"]
    out = CliRunner().invoke(app, ["plan", *question, "--isl", "2000", "--osl", "8000", "--json"])
    assert out.exit_code == 0, out.output
    first = json.loads(out.output)["recommendations"][0]
    assert first["simulated"] is not None
    assert first["meets_slo"] is True


def test_a_plan_whose_every_simulation_fails_says_so(monkeypatch):
    def fails(q, p):
        raise PlannerError("simulation.max_steps: stopped after 10 forward steps")

    monkeypatch.setattr(verify_mod, "verify", fails)
    a = plan(Question(model="llama-3.1-8b", hardware="h100-sxm", gpus=1), workers=1)
    assert not a.feasible
    assert all(r.simulated is None for r in a.recommendations)
    assert any("no verifying simulation completed" in n for n in a.notes), a.notes
    assert any(n.startswith("not simulated") and "max_steps" in n for n in a.notes), a.notes


@pytest.mark.parametrize("rate", ["0.001", "1e-9", "0.009"])
def test_a_rate_below_the_simulators_minimum_is_one_line(rate):
    """`planner plan --rate 0.001` was a traceback: the question took any positive rate, the
    simulator none below 0.01/s."""
    out = CliRunner().invoke(app, ["plan", "--rate", rate])
    assert out.exit_code == 2
    assert "rate" in out.output
    assert "0.01" in out.output
    assert "Traceback" not in out.output


def test_an_exported_scenario_of_a_config_json_model_reruns(tmp_path, shared_dir, monkeypatch):
    """`--scenarios` wrote `model: moonshotai-kimi-k2.5` (the derived id) for a model given as a
    config.json, and `planner simulate` of the file said 'unknown model'. The file names the config by
    its absolute path, so it reruns from any folder."""
    shutil.copy(shared_dir / "reference" / "hf_configs" / "openai--gpt-oss-120b_config.json", tmp_path / "c.json")
    monkeypatch.chdir(tmp_path)
    question = ["--model", "c.json", "--hardware", "h200-sxm", "--gpus", "1", "--rate", "2"]
    out = CliRunner().invoke(app, ["plan", *question, "--scenarios", "sc"])
    assert out.exit_code == 0, out.output
    written = yaml.safe_load((tmp_path / "sc" / "rec1_scenario.yaml").read_text())
    assert written["model"] == str(tmp_path / "c.json")
    monkeypatch.chdir(tmp_path.parent)
    rerun = CliRunner().invoke(app, ["simulate", str(tmp_path / "sc" / "rec1_scenario.yaml"), "--json"])
    assert rerun.exit_code == 0, rerun.output


@pytest.fixture(scope="module")
def default_estimates(default_scored):
    """The default question's answer, scored only (one scoring shared by the table tests)."""
    return default_scored[1]


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_a_narrow_terminal_shows_the_deployment_and_its_figures_and_says_what_it_left_out(width, default_estimates):
    """At 80-160 columns rich shrank every column of the 16-column table, the rank and deployment
    columns to nothing; columns now drop whole, least important first, and a line names them. At 80 the
    deployment column wraps narrower rather than cut the SLO verdict ('meets (simulat', sixteenth trial)."""
    a = default_estimates
    con = Console(width=width, record=True, file=io.StringIO())
    print_answer(con, a)
    text = con.export_text()
    table = text[text.index("┏") : text.index("┘")]
    for header in ("deployment", "GPUs", "TTFT ms", "TPOT ms", "tok/s/GPU", "SLO"):
        assert header in table, header
    first = a.recommendations[0].point.deployment.describe().split(" + ")[0]
    assert first in table or width < 100  # at 80 it wraps within the pool's label
    assert "meets (estimate)" in table
    assert all(len(line) <= width for line in table.splitlines())
    assert f"left out at this terminal's width ({width} columns): needs, bottleneck" in text.replace("\n", " ")


def test_a_wide_terminal_leaves_nothing_out(default_estimates):
    a = default_estimates
    con = Console(width=320, record=True, file=io.StringIO())
    print_answer(con, a)
    assert "left out" not in con.export_text()


def test_a_replayed_trace_prices_its_own_rate_and_rows(shared_dir):
    """`plan --workload` replaying the Splitwise conversation trace at time_scale 10 (4,000 requests)
    priced its estimates at the operating point's rate (30 req/s) while the trace runs at 49, so rows
    that could not carry it read 'meets (estimate)'; its header gave the whole trace's mean lengths
    (1155/211) instead of the replayed rows' (1183/254)."""
    trace = shared_dir / "traces" / "splitwise_conv.csv"
    wl = {"requests": 4000, "trace": {"path": str(trace), "format": "splitwise", "time_scale": 10}}
    q = build_question({"model": "qwen3-30b-a3b", "hardware": "h100-sxm", "gpus": 2}, simulation=wl)
    rows = read_trace(trace, "splitwise")
    arr = np.sort(rows.arrival_s[:4000]) / 10
    assert q.rate == pytest.approx(3999 / (arr[-1] - arr[0]))
    assert q.concurrency is None
    assert (q.isl, q.osl) == (round(rows.isl[:4000].mean()), round(rows.osl[:4000].mean()))


def test_a_row_whose_trace_halves_differ_by_design_is_not_labelled_unsteady():
    """A trace's measured halves may differ (the traffic changes); its summary is `steady` and the row
    'meets (simulate)', so its figures must not say 'not steady' beside that."""
    m = Metrics("simulate", "aggregated", 2, 0.0)
    m.summary = {"converged": False, "steady": True, "overloaded": False}
    assert _figures(m) == "simulated p90"
    m.summary = {"converged": False, "steady": False, "overloaded": False}
    assert _figures(m) == "simulated p90, not steady"


def test_the_table_says_how_many_rows_it_shows(default_estimates):
    a = default_estimates
    con = Console(width=320, record=True, file=io.StringIO())
    print_answer(con, a, top=8)
    assert f"8 of {len(a.recommendations)} rows shown" in con.export_text()


SMALL = {
    "name": "x",
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1}},
    "workload": {"isl": 100, "osl": 10, "request_rate": 5},
}


def test_simulate_prints_its_notes_and_names_a_bad_field_once(tmp_path, shared_dir):
    """Skipped trace rows were said only in --json; `arrival: {kind: trace}` read 'simulation:
    simulation.arrival ...'."""
    rows = (shared_dir / "traces" / "splitwise_conv.csv").read_text().splitlines()[:50]
    (tmp_path / "t.csv").write_text("\n".join([*rows, "bad,row,x"]) + "\n")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SMALL | {"simulation": {"trace": {"path": "t.csv", "format": "splitwise"}}}))
    out = CliRunner().invoke(app, ["simulate", str(path)])
    assert out.exit_code == 0, out.output
    assert "note: trace: skipped 1 malformed row(s)" in out.output
    path.write_text(yaml.safe_dump(SMALL | {"simulation": {"arrival": {"kind": "trace"}}}))
    out = CliRunner().invoke(app, ["simulate", str(path)])
    assert out.exit_code == 2
    assert "error: simulation.arrival: kind `trace` needs simulation.trace" in out.output


def test_one_token_answers_are_estimated_at_the_stated_rate(tmp_path):
    """`planner estimate` of one-token answers at 5 req/s read the saturated point (hundreds in flight,
    seconds of TTFT) where its simulation reads ~100 ms: with no decode batch to set the load, the rate
    was ignored. Now the prefill queue holds x (T0 + Wq) requests (`_one_token`)."""
    scenario = SMALL | {"model": "qwen3-30b-a3b", "workload": {"isl": 2000, "osl": 1, "request_rate": 5}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    est = CliRunner().invoke(app, ["estimate", str(path), "--json"])
    assert est.exit_code == 0, est.output
    e = json.loads(est.output)
    assert e["input_tok_s_per_gpu"] == pytest.approx(5 * 2000, rel=1e-3)
    sim = CliRunner().invoke(app, ["simulate", str(path), "--json"])
    s = json.loads(sim.output)
    assert e["ttft_ms"] == pytest.approx(s["ttft_ms"]["mean"], rel=0.25)


def test_a_disaggregated_estimate_prices_the_prefill_steps_prompts_ride(tmp_path):
    """Trial: plan rows showed estimated TTFT far below simulated (the default plan's #1: 216 ms by
    estimate, 507 simulated): the estimate priced one prompt's prefill step and no wait, while at 70
    prompts/s per DP8 prefill instance steps carry ~17 prompts back to back. Now both read ~500 ms."""
    scenario = {
        "name": "default #1",
        "model": "deepseek-v3",
        "hardware": "gb200-nvl72",
        "engine": "sglang",
        "deployment": {
            "prefill": {"instances": 5, "gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8, "pp": 1},
            "decode": {"instances": 4, "gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8, "pp": 1},
        },
        "precision": {"attention": "fp8", "kv_cache": "fp8", "dense": "fp8", "moe": "nvfp4"},
        "workload": {"isl": 2000, "osl": 1000, "request_rate": 351.34},
        "runtime": {"mem_fraction": 0.85},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    est = json.loads(CliRunner().invoke(app, ["estimate", str(path), "--json"]).output)
    sim = json.loads(CliRunner().invoke(app, ["simulate", str(path), "--json"]).output)
    assert est["ttft_ms"] == pytest.approx(sim["ttft_ms"]["mean"], rel=0.15)
    assert est["tpot_ms"] == pytest.approx(sim["tpot_ms"]["mean"], rel=0.05)


def test_explain_at_a_stated_rate_says_what_a_change_does_at_that_rate(tmp_path):
    """Trial: explain of a row at 4 req/s showed '+20%' out tok/s/GPU for a change, though the rate fixes
    the throughput. The levers keep their capacity reading at the requests in flight the rate holds, and
    say the TPOT each gives at the rate itself."""
    scenario = {
        "name": "q235 at 4 req/s",
        "model": "qwen3-235b-a22b",
        "hardware": "h200-sxm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
        "workload": {"isl": 2000, "osl": 1000, "request_rate": 4},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = CliRunner().invoke(app, ["explain", str(path), "--json"])
    assert out.exit_code == 0, out.output
    x = json.loads(out.output)
    assert x["levers_priced_at"]["request_rate"] == 4
    fp8 = next(lv for lv in x["levers"] if lv["change"].startswith("fp8 attention"))
    assert fp8["tpot_ms_at_rate"] < x["estimate"]["tpot_ms"]
    text = CliRunner().invoke(app, ["explain", str(path)]).output
    assert "TPOT ms at the rate" in text


def test_a_moe_share_of_a_dense_model_is_one_error_line(tmp_path):
    """A Llama anchor with `decode_time_share_moe` was predicted 0 (-100%) instead of saying the model has
    no MoE layers."""
    anchor = {
        "id": "llama-moe-share",
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "engine": "sglang",
        "phase": "decode",
        "deployment": {"decode": {"instances": 1, "gpus_per_instance": 1, "tp": 1}},
        "workload": {"isl": 1000, "osl": 100, "concurrency": 8},
        "metric": "decode_time_share_moe",
        "value": 0.3,
        "tolerance": 0.2,
    }
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "anchors": [anchor]}))
    out = CliRunner().invoke(app, ["validate", str(path)], terminal_width=200)
    assert out.exit_code == 2
    assert "decode_time_share_moe needs MoE layers; llama-3.1-8b has none" in out.output
