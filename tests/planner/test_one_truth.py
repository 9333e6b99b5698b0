"""One truth per deployment: the search, the estimator, the simulator, exports and the dashboard
see the same Deployment with the same runtime options, and report the same figures where they
claim the same method."""

from __future__ import annotations

import random
import socket
import time

import pytest

from planner.dashboard import breakdown, recommendations_table, scenario_of
from planner.engines import runtime_options
from planner.inputs.question import SLO, Question, build_question
from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.simulate import pool_defs, run_simulation, simulated_metrics
from planner.model.write_scenario import to_scenario
from planner.report.plan_report import record
from planner.search.plan import plan
from planner.search.score import score
from planner.search.space import candidates
from planner.search.verify import as_resolved
from roofline.catalog import get_hardware, get_model
from roofline.errors import PlannerError
from simulator import SimConfig

QUESTIONS = [
    Question(model="deepseek-v3", hardware="gb200-nvl72", max_gpus=72, engine="sglang", verify_top=0),
    Question(model="deepseek-v3", hardware="h200-sxm", max_gpus=32, engine="vllm", verify_top=0),
    Question(model="qwen3-235b-a22b", hardware="b200", max_gpus=16, engine="trtllm", verify_top=0),
    Question(model="deepseek-v4-flash", hardware="rtx-pro-6000", max_gpus=8, verify_top=0),
]


def _runtime(pool):
    return pool.instance.runtime.model_dump()


def test_200_random_candidates_are_scored_and_simulated_with_identical_runtime_options():
    """What stage 1 prices is what stage 2 simulates and what an exported scenario resolves to."""
    rng = random.Random(0)
    checked = 0
    for q in QUESTIONS:
        cands, _ = candidates(q, get_model(q.model), get_hardware(q.hardware))
        for c in rng.sample(cands, min(50, len(cands))):
            s = score(q, c)
            for p in s.points[-1:]:
                res = as_resolved(q, p)
                sim_pools = pool_defs(res)
                assert [d.inst for d in sim_pools] == [pl.instance for pl in p.deployment.pools]
                again = resolve(parse_scenario(to_scenario(res)))
                assert [_runtime(a) for a in again.deployment.pools] == [_runtime(b) for b in p.deployment.pools]
                for pool in p.deployment.pools:  # and the one function decides them
                    expect = runtime_options(q.engine, pool.role, pool.parallel, pool.instance.hardware)
                    assert _runtime(pool) == {**expect.model_dump(), "mem_fraction": c.mem_fraction}
                checked += 1
    assert checked >= 150


SMALL = Question(
    model="qwen3-30b-a3b", hardware="h100-sxm", max_gpus=8, isl=1000, osl=300, slo=SLO(ttft_p90_ms=1500, tpot_p90_ms=40)
)


def test_estimate_plan_row_dashboard_and_simulate_agree_where_they_claim_the_same_method():
    a = plan(SMALL.model_copy(update={"verify_top": 1}), workers=1)
    top = a.recommendations[0]
    rec = record(a, top, 1)
    res = as_resolved(a.question, top.point)
    est = estimate(res)  # `planner estimate` of the same deployment and traffic
    assert est.ttft_s * 1e3 == pytest.approx(rec["estimate"]["ttft_ms"], rel=5e-3)
    assert est.tpot_s * 1e3 == pytest.approx(rec["estimate"]["tpot_ms"], rel=5e-3)
    assert est.output_tok_s_per_gpu == pytest.approx(rec["estimate"]["output_tok_s_per_gpu"], rel=5e-3)
    cards = breakdown(scenario_of(a, 0)).metrics  # the dashboard's cards are estimates, and say so
    assert cards["TPOT ms (estimate, mean)"] == pytest.approx(rec["estimate"]["tpot_ms"], rel=5e-3)
    row = recommendations_table(a)[0]  # the dashboard's table is the record
    assert row["figures"] == rec["figures"] == "simulated p90"
    assert row["TPOT ms"] == pytest.approx(rec["tpot_ms"], abs=0.01)
    # `planner simulate` of the exported scenario (the one standard configuration) gives the plan's p90s
    _, summary = run_simulation(res)
    sim = simulated_metrics(res, summary)
    assert sim.latency_ms("tpot") == pytest.approx(rec["tpot_ms"], rel=1e-9)
    assert sim.latency_ms("ttft") == pytest.approx(rec["ttft_ms"], rel=1e-9)


def test_a_concurrency_question_ranks_by_the_figures_at_that_concurrency():
    """Repro: --concurrency 64 ranked #1 by its figures at batch 1,136 (2,012 tok/s/GPU); 64 in
    flight gives a tenth of that."""
    q = build_question({"hardware": "h200-sxm", "max_gpus": 64, "concurrency": 64, "verify_top": 1})
    a = plan(q, workers=1)
    top = a.recommendations[0]
    assert top.point.metrics.concurrency == pytest.approx(64, rel=1e-3)
    assert top.point.metrics.decode_batch <= 64
    assert top.simulated is not None
    assert top.meets
    simulated = [r.simulated.output_tok_s_per_gpu for r in a.recommendations if r.meets]
    assert top.simulated.output_tok_s_per_gpu == max(simulated)  # ranked by what the simulation saw


def test_h100_plans_prune_what_does_not_fit_instead_of_failing():
    a = plan(build_question({"hardware": "h100-sxm", "max_gpus": 32, "verify_top": 0}), workers=1)
    assert a.scored > 0
    assert a.recommendations


def test_a_feasible_answer_has_a_simulated_first_recommendation_that_meets():
    """Repro: seed 004's H200 question said feasible with an unsimulated #1 while every simulated
    candidate missed."""
    q = Question(
        model="deepseek-v3.2",
        hardware="h200-sxm",
        gpus=8,
        isl=2400,
        osl=1600,
        engine="trtllm",
        slo=SLO(e2e_p90_ms=15000),
        verify_top=1,
    )
    a = plan(q, workers=1)
    top = a.recommendations[0]
    if a.feasible:
        assert top.simulated is not None
        assert top.meets
    else:
        assert top.binding
        assert "no deployment meets" in a.notes[0]


def test_cli_fields_keep_the_documented_default_slo():
    q = build_question({"model": "qwen3-235b-a22b", "hardware": "h200-sxm", "gpus": 16})
    assert q.slo.ttft_p90_ms == 2000
    assert q.slo.tpot_p90_ms == 50
    assert q.max_gpus is None
    q2 = build_question({}, {"tpot_p90_ms": 30})
    assert (q2.slo.ttft_p90_ms, q2.slo.tpot_p90_ms) == (2000, 30)


def test_simulate_extends_an_unconverged_run_or_warns():
    res = resolve(
        parse_scenario(
            {
                "model": "deepseek-v3",
                "hardware": "gb200-nvl72",
                "deployment": {
                    "prefill": {"instances": 2, "gpus_per_instance": 4, "dp_attention": 4, "ep": 4},
                    "decode": {"gpus_per_instance": 16, "dp_attention": 16, "ep": 16},
                },
                "precision": {"attention": "fp8", "kv_cache": "fp8", "moe": "nvfp4"},
                "workload": {"isl": 2000, "osl": 500, "concurrency": 1024},
            }
        )
    )
    _, s = run_simulation(res, SimConfig(requests=800))  # explicit count: never extended
    assert s["requests"] == 800
    assert s["converged"] or "steady state" in s["warning"]
    _, s2 = run_simulation(res, SimConfig(requests=800), extend=True)
    assert s2["converged"] or s2["requests"] > 800


def test_ray_to_an_address_with_no_cluster_fails_fast():
    pytest.importorskip("ray")
    from planner.search.ray_pool import score_on_ray

    with socket.socket() as sock:  # a free port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(PlannerError, match="no Ray cluster"):
        score_on_ray(SMALL, [[]], f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 10
