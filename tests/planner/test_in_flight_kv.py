"""The estimates price the mean context of the sequences in flight: with spread output lengths
(`simulation.output_len`) long outputs stay in flight longer, so that mean is above isl + osl/2; the
stated deployment and the searched one (unknown fields) use the same figure, and a table named by a
relative path is found next to the scenario, wherever the run starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.inputs.edge import ScenarioError
from planner.inputs.scenario import Scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.search.unknowns import _probe, _question, search_deployment

POOL = {"instances": 1, "gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8, "pp": 1}


def _scenario(tmp_path: Path, deployment: dict[str, Any]) -> Scenario:
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    rows = [(100, 50), (900, 8000), (1200, 300), (600, 2000)]
    (tmp_path / "data" / "t.csv").write_text("input_length,output_length\n" + "".join(f"{i},{o}\n" for i, o in rows))
    row = {"kind": "empirical", "trace": "data/t.csv", "format": "lengths"}
    return Scenario.model_validate(
        {
            "model": "deepseek-v3",
            "hardware": "b200",
            "engine": "trtllm",
            "deployment": {"aggregated": deployment},
            "precision": {"moe": "nvfp4", "kv_cache": "fp8"},
            "workload": {"isl": 700, "osl": 2588},
            "simulation": {"input_len": row, "output_len": row},
        }
    )


def test_spread_outputs_raise_the_context_in_flight_and_lower_offline_throughput(tmp_path, monkeypatch):
    s = _scenario(tmp_path, POOL)
    monkeypatch.chdir("/")  # the table is found next to the scenario, not the working folder
    res = resolve(s, tmp_path)
    # sum L (I + L/2) / sum L over the four rows, drawn at random: within the draws' noise
    exact = (50 * 125 + 8000 * 4900 + 300 * 1350 + 2000 * 1600) / 10350
    assert res.kv_len == pytest.approx(exact, rel=0.02)
    assert res.kv_len > 700 + 2588 / 2
    assert res.simulation is not None
    assert Path(str(res.simulation.input_len.trace)).is_absolute()
    fixed = resolve(s.model_copy(update={"simulation": None}), tmp_path)
    assert fixed.kv_len == 700 + 2588 / 2
    assert estimate(res).output_tok_s_per_gpu < estimate(fixed).output_tok_s_per_gpu


def test_the_search_for_unknown_fields_prices_the_same_context(tmp_path):
    unknown = {k: "unknown" for k in POOL} | {"gpus_per_instance": 8, "instances": 1}
    s = _scenario(tmp_path, unknown)
    probe, facts = _probe(s, tmp_path)
    q = _question(s, facts, "output_tok_s_per_gpu", tmp_path)
    stated = resolve(_scenario(tmp_path / "b", POOL), tmp_path / "b")
    assert q.in_flight_kv() == probe.kv_len == pytest.approx(stated.kv_len)
    assert q.in_flight_kv() > 700 + 2588 / 2
    dep, _, point = search_deployment(s, "output_tok_s_per_gpu", tmp_path)
    assert point is not None
    assert dep.gpus == 8


def test_a_question_prices_the_context_of_its_own_simulation_lengths():
    from planner.inputs.question import build_question
    from planner.search.plan import plan

    eos = {"output_len": {"kind": "eos", "mean": 1000, "max": 8000}}
    fields = {"model": "qwen3-30b-a3b", "hardware": "h200-sxm", "gpus": 1, "isl": 1000, "osl": 1000, "verify_top": 0}
    spread = build_question(fields, simulation=eos)
    fixed = build_question(fields)
    assert fixed.kv_len is None
    assert fixed.in_flight_kv() == 1500
    # geometric outputs of mean 1000: sum L(I + L/2) / sum L = I + E[L^2]/(2 E[L]) ~ I + L (the cap trims a little)
    assert 1900 < spread.in_flight_kv() < 2000
    note = [n for n in plan(spread, workers=None).notes if "context in flight" in n]
    assert len(note) == 1
    assert "fixed lengths would give 1,500" in note[0]
    assert not [n for n in plan(fixed, workers=None).notes if "context in flight" in n]


def test_a_workload_sets_the_traffic_not_typed_and_a_rows_scenario_replays_it(tmp_path):
    """New-user trial: `plan --workload` priced its estimates at the default 2000/1000 tokens and the
    capacity's rate while its simulations replayed the workload, and `--scenarios` wrote no
    `simulation:` section, so `planner simulate rec1_scenario.yaml` did not reproduce row 1."""
    import yaml

    from planner.inputs.question import build_question
    from planner.inputs.scenario import load_scenario
    from planner.report.plan_report import scenario_of, write_scenarios
    from planner.search.plan import plan

    wl = {
        "arrival": {"kind": "gamma", "rate": 3, "cv": 3},
        "input_len": {"kind": "uniform", "min": 1000, "max": 3000},
        "output_len": {"kind": "uniform", "min": 200, "max": 600},
    }
    fields = {"model": "qwen3-30b-a3b", "hardware": "h100-sxm", "gpus": 2, "verify_top": 0}
    q = build_question(fields, simulation=wl)
    assert abs(q.isl - 2000) < 60  # the draws' means
    assert abs(q.osl - 400) < 15
    assert q.rate == 3
    assert q.concurrency is None
    typed = build_question({**fields, "isl": 500, "rate": 3}, simulation=wl)
    assert (typed.isl, typed.concurrency, typed.rate) == (500, None, 3)  # what is typed stays
    # a typed load the workload's arrivals contradict is an error (trial, fifteenth session: a row priced
    # 4 users by estimate and simulated 32 clients)
    with pytest.raises(ScenarioError, match=r"concurrency 4 contradicts the workload's simulation\.arrival"):
        build_question({**fields, "concurrency": 4}, simulation=wl)
    ans = plan(q, workers=None)
    scn = scenario_of(q, ans.recommendations[0])
    assert scn["workload"]["request_rate"] == 3
    assert scn["simulation"]["arrival"] == {"kind": "gamma", "rate": 3.0, "cv": 3.0}
    path = write_scenarios(ans, tmp_path)[0]
    assert load_scenario(path).simulation == q.simulation
    assert yaml.safe_load(path.read_text())["simulation"]["input_len"]["max"] == 3000
