"""Problems a newcomer's trial of the CLI found (2026-12-04), each held by a test."""

from __future__ import annotations

import math

import pytest

from planner.inputs.question import build_question
from planner.inputs.scenario import Scenario, ScenarioError
from planner.launch import launch_commands
from planner.model.context import context_window
from planner.model.defaults import resolve
from planner.model.steps import decode_capacity
from planner.search.compare import parse_prices
from planner.search.plan import plan
from planner.search.unknowns import resolve_any
from roofline.errors import PlannerError

RATE_Q = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "gpus": 2, "isl": 1000, "osl": 200, "rate": 4.0}


@pytest.fixture(scope="module")
def rate_plan():
    q = build_question(RATE_Q, {"ttft_p90_ms": 2000, "tpot_p90_ms": 50})
    return q, plan(q)


def test_a_rate_plan_launches_what_it_priced_not_the_sizing_batch(rate_plan):
    """Under a stated rate the figures come from the deployment at that traffic, uncapped: the row's
    batch is the mean that traffic keeps in flight and the launch admits the pool's own limit (the
    engine's, else the KV pool's), as the estimate and the simulation ran; before, it capped the engine
    at the sweep's batch, which had only sized the instance count (Qwen3-235B on 8 H100 at 3 req/s:
    capped at 64, its simulated p90 TTFT was 582 ms against the plan's 261)."""
    q, a = rate_plan
    r = a.recommendations[0]
    pool = r.deployment.first("decode") or r.deployment.first("aggregated")
    assert r.point.batch == max(1, round(r.point.metrics.decode_batch))
    cap = decode_capacity(pool, q.in_flight_kv())
    assert cap > r.point.batch
    per_rank = math.ceil(cap / pool.parallel.dp_attention)
    assert f"--max-num-seqs {per_rank}" in launch_commands(q, r)["vllm"]


def test_disaggregated_runtime_notes_name_their_pool():
    s = Scenario.model_validate({
        "model": "deepseek-v3", "hardware": "gb200-nvl72", "engine": "sglang",
        "deployment": {"prefill": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
                       "decode": {"gpus_per_instance": 16, "dp_attention": 16, "ep": 16}},
        "workload": {"isl": 2000, "osl": 1000, "concurrency": 64},
    })  # fmt: skip
    notes = [n for n in resolve(s).assumed if n.startswith("runtime.eplb")]
    assert notes
    assert all(n.startswith(("runtime.eplb (prefill pool):", "runtime.eplb (decode pool):")) for n in notes)


def test_a_searched_layout_lists_only_its_own_runtime_defaults():
    """The probe resolution's runtime notes (another layout's memory fraction) are not kept."""
    s = Scenario.model_validate({
        "model": "deepseek-v3", "hardware": "h200-sxm", "engine": "sglang", "deployment": {"gpus": 16},
        "workload": {"isl": 4000, "osl": 1000, "concurrency": 256}, "slo": {"ttft_ms": 3000, "tpot_ms": 60},
    })  # fmt: skip
    res = resolve_any(s)
    fractions = [n for n in res.assumed if n.startswith("runtime.mem_fraction")]
    pools = res.deployment.pools
    assert len(fractions) == len(pools), fractions  # one note per pool of the layout chosen, none of another
    for pool in pools:
        scope = f" ({pool.role} pool)" if len(pools) > 1 else ""
        said = f"runtime.mem_fraction{scope}: {pool.instance.runtime.mem_fraction:g}"
        assert any(n.startswith(said) for n in fractions)


def test_estimate_refuses_a_request_longer_than_the_context_window():
    s = Scenario.model_validate({
        "model": "deepseek-v3", "hardware": "h200-sxm",
        "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
        "workload": {"isl": 200000, "osl": 100, "concurrency": 1},
    })  # fmt: skip
    assert context_window("deepseek-v3") == 163840
    with pytest.raises(ScenarioError, match="context window"):
        resolve(s)


def test_a_price_for_a_hardware_id_not_in_the_catalog_is_an_error():
    assert parse_prices("h100-sxm=2.5") == {"h100-sxm": 2.5}
    with pytest.raises(PlannerError, match="'h100' is not a catalog hardware id"):
        parse_prices("h100=2.5")


def test_an_unknown_pool_beside_a_stated_one_gets_gpus_of_its_own():
    """`prefill: unknown` beside a stated 8-GPU decode pool: the search has room for the prefill pool
    (before, the budget was the decode pool's 8 GPUs and no deployment could 'meet the slo')."""
    s = Scenario.model_validate({
        "model": "qwen3-235b-a22b", "hardware": "b200", "engine": "vllm",
        "deployment": {"prefill": "unknown", "decode": {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
        "workload": {"isl": 8000, "osl": 1000, "request_rate": 4}, "slo": {"ttft_ms": 1500, "tpot_ms": 30},
    })  # fmt: skip
    res = resolve_any(s)
    pre, dec = res.deployment.first("prefill"), res.deployment.first("decode")
    assert pre is not None
    assert dec is not None
    assert dec.gpus == 8
    assert res.deployment.gpus > 8
