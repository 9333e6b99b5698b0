"""SLO targets at p99 as well as p90 (MLPerf's Server constraints, most written SLAs): one percentile per
question, checked at that percentile by the verifying simulation, carried into the exported scenario and
`planner simulate`'s verdict, and refused where no path reads it (an anchor's slo)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from planner.cli import app
from planner.inputs.edge import ScenarioError
from planner.inputs.question import SLO, Question, build_question, parse_question
from planner.inputs.scenario import SLOSpec
from planner.model.metrics import Metrics
from planner.report.report import print_simulation
from planner.report.verdicts import slo_verdict
from planner.search.validate import predict_anchor
from planner.search.verify import meets_slo

runner = CliRunner()


def _sim(p90: float, p99: float) -> Metrics:
    """A simulated record whose TPOT percentiles are `p90` and `p99` ms (TTFT well within any target)."""
    m = Metrics("simulate", "aggregated", 1, 8.0, ttft_s=0.1, tpot_s=0.01, e2e_s=2.0, output_tok_s=1000.0)
    m.summary = {
        "ttft_ms": {"mean": 100.0, "p50": 90.0, "p90": 150.0, "p99": 180.0},
        "tpot_ms": {"mean": 10.0, "p50": 9.0, "p90": p90, "p99": p99},
        "e2e_ms": {"mean": 2000.0, "p50": 1900.0, "p90": 2500.0, "p99": 3000.0},
        "steady": True,
        "overloaded": False,
    }
    return m


def test_targets_at_two_percentiles_are_one_error_naming_the_slo() -> None:
    with pytest.raises(ValueError, match="one percentile only"):
        SLO(ttft_p90_ms=2000, tpot_p99_ms=80)
    with pytest.raises(ScenarioError, match=r"slo.*one percentile only") as err:
        parse_question({"model": "llama-3.1-8b", "hardware": "h100-sxm", "gpus": 1,
                        "slo": {"ttft_p90_ms": 2000, "tpot_p99_ms": 80}})  # fmt: skip
    assert "\n" not in str(err.value)


def test_p99_targets_replace_the_default_p90_ones_and_p90_targets_merge() -> None:
    q = build_question({}, {"tpot_p99_ms": 80})
    assert q.slo.targets() == {"tpot_p99_ms": 80}
    assert (q.slo.statistic, q.slo.target("tpot"), q.slo.target("ttft")) == ("p99", 80, None)
    q = build_question({}, {"tpot_p90_ms": 30})
    assert q.slo.targets() == {"ttft_p90_ms": 2000, "tpot_p90_ms": 30}
    assert q.slo.statistic == "p90"


def test_the_targets_a_percentile_replaces_are_named() -> None:
    from planner.inputs.question import DEFAULT_QUESTION, replaced_targets

    assert replaced_targets(DEFAULT_QUESTION, {"tpot_p99_ms": 80}) == {"ttft_p90_ms": 2000, "tpot_p90_ms": 50}
    assert replaced_targets(DEFAULT_QUESTION, {"tpot_p90_ms": 30, "ttft_p99_ms": None}) == {}
    out = runner.invoke(
        app, ["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--gpus", "1", "--isl", "1000", "--osl",
              "200", "--tpot-p99", "60", "--json"],
    )  # fmt: skip
    assert "slo: the targets typed at p99 replace the question's TTFT p90 <= 2000 ms, TPOT p90 <= 50 ms" in out.stderr
    assert json.loads(out.stdout)["question"]["slo"]["statistic"] == "p99"


def test_the_verdict_reads_the_targets_percentile() -> None:
    """p90 TPOT 40 ms and p99 TPOT 90 ms: within 50 ms at p90, over it at p99."""
    base = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "gpus": 1}
    m = _sim(40.0, 90.0)
    ok90, slack90 = meets_slo(Question(**base, slo=SLO(tpot_p90_ms=50)), m)
    ok99, slack99 = meets_slo(Question(**base, slo=SLO(tpot_p99_ms=50)), m)
    assert ok90
    assert slack90 == {"tpot_p90_ms": pytest.approx(50 / 40)}
    assert not ok99
    assert slack99 == {"tpot_p99_ms": pytest.approx(50 / 90)}


def test_planner_simulate_says_the_scenarios_percentile() -> None:
    m = _sim(40.0, 90.0).summary
    assert m is not None
    m["queue_ms"] = {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    m["kv_utilization"] = {"mean": 0.5, "max": 0.9}
    for stat, said in ((None, "slo: TPOT p90 40.0 ms <= 50: meets"), ("p99", "slo: TPOT p99 90.0 ms > 50: misses")):
        con = Console(width=200, record=True)
        print_simulation(con, "t", m, SLOSpec(tpot_ms=50, statistic=stat))  # type: ignore[arg-type]
        assert said in con.export_text()
    # a run whose halves disagree neither verifies nor refutes (the plan's 'unverified'); one over capacity misses
    assert slo_verdict({**m, "steady": False}, SLOSpec(tpot_ms=50))["verdict"] == "unverified"  # type: ignore[index]
    assert slo_verdict({**m, "overloaded": True}, SLOSpec(tpot_ms=50))["verdict"] == "misses"  # type: ignore[index]
    assert slo_verdict(m, SLOSpec(statistic="p99")) is None  # no target: no verdict
    few = slo_verdict({**m, "requests_measured": 16}, SLOSpec(tpot_ms=50, statistic="p99"))
    assert few is not None
    assert (few["verdict"], few["why"]) == ("misses", "the p99 of 16 measured requests rests on the top 0.2 of them: "
                                                      "more requests steady it")  # fmt: skip
    enough = slo_verdict({**m, "requests_measured": 5000}, SLOSpec(tpot_ms=50, statistic="p99"))
    assert enough is not None
    assert enough["why"] == ""


def test_a_p99_plan_verifies_at_p99_and_exports_it(tmp_path) -> None:
    out = runner.invoke(
        app,
        ["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--gpus", "1", "--isl", "1000", "--osl", "200",
         "--rate", "2", "--ttft-p99", "2000", "--tpot-p99", "60", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)  # stderr says which default targets the p99 ones replace
    sims = [r for r in data["recommendations"] if r["simulated"] is not None]
    assert sims, "no row was simulated"
    top = sims[0]
    assert top["figures"].startswith("simulated p99")
    assert top["tpot_ms"] == top["simulated"]["tpot_p99_ms"]
    assert set(top["headroom"]) == {"TTFT", "TPOT"}
    assert top["headroom"]["TPOT"] == pytest.approx(60 / top["simulated"]["tpot_p99_ms"] - 1, abs=1e-4)
    assert top["scenario"]["slo"] == {"ttft_ms": 2000.0, "tpot_ms": 60.0, "statistic": "p99"}
    assert top["simulated"]["requests_measured"] * 0.01 >= 10  # the run was long enough for its p99 (review)
    assert top["simulated"]["tpot_p99_ms"] > top["simulated"]["tpot_mean_ms"]
    # `planner simulate` of the row's own scenario reads the same p99 and verdict (one truth)
    import yaml

    path = tmp_path / "rec1.yaml"
    path.write_text(yaml.safe_dump(top["scenario"]))
    sim = json.loads(runner.invoke(app, ["simulate", str(path), "--json"]).stdout)
    assert sim["tpot_ms"]["p99"] == pytest.approx(top["simulated"]["tpot_p99_ms"], rel=1e-9)
    assert top["meets_slo"] is True
    assert sim["slo"]["verdict"] == "meets"


def test_an_anchor_stating_a_statistic_is_an_error_for_that_anchor_only(tmp_path) -> None:
    anchor = {
        "id": "x", "source": "s", "model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm",
        "phase": "end-to-end",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1,
                                      "pp": 1}},
        "precision": {"dense": "bf16", "kv_cache": "bf16"}, "mtp": None,
        "workload": {"isl": 1000, "osl": 200}, "slo": {"tpot_ms": 50, "statistic": "p99"},
        "metric": "output_tok_s_per_gpu", "value": 1000.0, "unit": "output tok/s per GPU", "tolerance": 0.15,
    }  # fmt: skip
    r = predict_anchor(anchor, tmp_path)
    assert r.predicted is None
    assert r.error is not None
    assert "slo.statistic" in r.error
    assert "\n" not in r.error
    r = predict_anchor({**anchor, "slo": {"tpot_ms": 50}}, tmp_path)
    assert r.error is None
    assert r.predicted is not None


def test_a_plans_json_question_loads_back_and_a_contradicting_statistic_is_one_error(tmp_path) -> None:
    """Review: the JSON's `question` states `slo.statistic`, which `--question` refused as an unknown field."""
    import yaml

    out = runner.invoke(
        app, ["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--gpus", "1", "--isl", "1000", "--osl",
              "200", "--rate", "2", "--tpot-p99", "60", "--json"],
    )  # fmt: skip
    question = json.loads(out.stdout)["question"]
    assert question["slo"]["statistic"] == "p99"
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(question))
    again = runner.invoke(app, ["plan", "--question", str(path), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["question"] == question
    path.write_text(yaml.safe_dump({**question, "slo": {**question["slo"], "statistic": "p90"}}))
    bad = runner.invoke(app, ["plan", "--question", str(path)])
    assert bad.exit_code == 2
    assert "slo.statistic: 'p90' contradicts the targets' percentile (p99)" in bad.output
