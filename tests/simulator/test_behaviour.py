"""Queueing behaviour users fight with: saturation, tail growth, preemption, caching, routing, MTP."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import yaml

from planner.model.defaults import Resolved
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation
from simulator import SimConfig
from simulator.engine import SimulationError
from tests.simulator.helpers import AGG_LLAMA, DISAGG_H200, scenario


def _sat_rate(base, isl, osl):
    lo, hi = 0.1, 5000.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        e = estimate(scenario(base, {"isl": isl, "osl": osl, "request_rate": mid}))
        lo, hi = (lo, mid) if e.limit else (mid, hi)
    return lo


def test_ttft_stays_flat_below_saturation_and_grows_without_bound_above():
    sat = _sat_rate(DISAGG_H200, 1000, 100)

    runs = {}

    def p50_ttft(frac, n):
        res = scenario(DISAGG_H200, {"isl": 1000, "osl": 100, "request_rate": frac * sat})
        _, m = run_simulation(res, SimConfig(requests=n, seed=2))
        runs[frac, n] = m
        return m["ttft_ms"]["p50"]

    below_short, below_long = p50_ttft(0.6, 1500), p50_ttft(0.6, 4500)
    above_short, above_long = p50_ttft(1.4, 1500), p50_ttft(1.4, 4500)
    assert below_long == pytest.approx(below_short, rel=0.25)
    assert above_long > 2 * above_short  # the queue keeps growing with the run's length
    assert above_short > 5 * below_short
    # the summary says which runs are over capacity, and those are no steady state
    for (frac, _), m in runs.items():
        assert m["overloaded"] is (frac > 1)
        assert m["steady"] is (m["converged"] and not m["overloaded"])
        if frac > 1:
            assert m["steady"] is False
            assert m["output_tok_s"] < 0.9 * m["offered_output_tok_s"]
            assert "over capacity" in m["warning"]
        else:
            assert m["output_tok_s"] == pytest.approx(m["offered_output_tok_s"], rel=0.05)


def test_a_closed_loop_is_never_over_capacity():
    """Its arrivals follow its completions: a saturated offline run keeps its queue bounded by design."""
    res = scenario(AGG_LLAMA, {"isl": 1000, "osl": 200, "concurrency": 512})
    _, m = run_simulation(res, SimConfig(requests=2048, seed=1))
    assert m["overloaded"] is False
    assert m["offered_output_tok_s"] == m["output_tok_s"]


def test_seed_003_pd_deployment_queues_at_concurrency_16(shared_dir):
    """Seed 003: TTFT went from 0.9 s at C=1 to 8.8 s at C=16. A benchmark client sends its first
    C prompts at once; on sm_120 the prefill server works through that burst slowly."""
    anchors = yaml.safe_load((shared_dir / "validation" / "seed_anchors.yaml").read_text())["anchors"]
    raw = next(a for a in anchors if a["id"] == "seed-dsv4flash-rtxpro-pd-c16-tpot")
    from planner.model.defaults import resolve
    from planner.search.validate import Anchor

    def ttft(conc):
        a = Anchor.model_validate({**raw, "workload": {**raw["workload"], "concurrency": conc}})
        cfg = SimConfig(requests=2 * conc, seed=1, closed_loop_ramp_s=0.0, warmup_fraction=0.0)
        _, m = run_simulation(resolve(a), cfg)
        return m["ttft_ms"]["mean"]

    assert ttft(16) > 5 * ttft(1)


def test_preemption_by_recompute_is_counted_and_every_request_still_finishes():
    res = scenario(
        AGG_LLAMA,
        {"isl": 2000, "osl": 800, "concurrency": 512},
        {"requests": 900, "seed": 4, "kv_reservation": 0.0},
        runtime={"mem_fraction": 0.4},
    )
    result, m = run_simulation(res)
    assert m["requests_preempted"] > 0
    assert m["requests_completed"] == 900
    assert (result.table.generated == result.table.osl).all()


def test_full_reservation_never_preempts():
    res = scenario(
        AGG_LLAMA,
        {"isl": 2000, "osl": 800, "concurrency": 512},
        {"requests": 900, "seed": 4, "kv_reservation": 1.0},
        runtime={"mem_fraction": 0.4},
    )
    _, m = run_simulation(res)
    assert m["requests_preempted"] == 0


def test_a_prompt_larger_than_the_kv_pool_is_dropped_not_hung():
    """When every request is dropped there is nothing to measure: an error naming why, not zeros. (A prompt
    within the model's 131k window, on a KV pool a 30% memory fraction leaves too small for it.)"""
    res = scenario(
        AGG_LLAMA,
        {"isl": 130_000, "osl": 5, "concurrency": 2},
        {"requests": 4, "seed": 0},
        runtime={"mem_fraction": 0.3},
    )
    with pytest.raises(SimulationError, match=r"all 4 were dropped \(prompt \+ output exceed the KV pool"):
        run_simulation(res)


def test_prefix_cache_hits_skip_prefill_compute():
    cold = scenario(AGG_LLAMA, {"isl": 4000, "osl": 20, "request_rate": 2.0}, {"requests": 300, "seed": 1})
    warm = scenario(
        AGG_LLAMA,
        {"isl": 4000, "osl": 20, "request_rate": 2.0},
        {"requests": 300, "seed": 1, "prefix_cache_hit_rate": 0.75},
    )
    (rc, mc), (rw, mw) = run_simulation(cold), run_simulation(warm)
    assert rw.table.cached.mean() == pytest.approx(3000)
    assert rw.steps[:, 4].sum() == pytest.approx(rc.steps[:, 4].sum() / 4, rel=0.01)
    assert mw["ttft_ms"]["p50"] < mc["ttft_ms"]["p50"]


def test_mooncake_hash_ids_give_real_prefix_reuse_and_kv_aware_routing_follows_them(tmp_path):
    rows = [
        {
            "timestamp": 100 * i,
            "input_length": 1024,
            "output_length": 4,
            "hash_ids": [7, 8] if i % 2 else [1000 + 2 * i, 1001 + 2 * i],
        }
        for i in range(40)
    ]
    p = tmp_path / "mc.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    base = {
        **DISAGG_H200,
        "deployment": {
            "prefill": {"instances": 3, "gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
            "decode": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
        },
    }
    res = scenario(
        base,
        {"isl": 100, "osl": 10},
        {"requests": 40, "seed": 0, "router": "kv_aware", "trace": {"path": str(p), "format": "mooncake"}},
    )
    result, _ = run_simulation(res)
    odd = result.table.cached[1::2]
    assert (odd[1:] == 1023).all()  # both 512-token blocks hit, capped one short of the prompt
    assert (result.table.cached[0::2] == 0).all()


def test_round_robin_spreads_requests_evenly():
    base = {
        **DISAGG_H200,
        "deployment": {
            "prefill": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
            "decode": {"instances": 4, "gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
        },
    }
    res = scenario(
        base, {"isl": 500, "osl": 50, "request_rate": 5.0}, {"requests": 400, "seed": 0, "router": "round_robin"}
    )
    result, _ = run_simulation(res)
    assert np.bincount(result.table.decode_instance - 1).tolist() == [100] * 4


def test_mtp_cuts_tpot_at_low_concurrency():
    plain = scenario(DISAGG_H200, {"isl": 500, "osl": 300, "concurrency": 1}, {"requests": 20, "seed": 0})
    mtp = scenario(
        DISAGG_H200,
        {"isl": 500, "osl": 300, "concurrency": 1},
        {"requests": 20, "seed": 0},
        mtp={"draft_tokens": 3, "accepted_tokens": 1.65},
    )
    _, a = run_simulation(plain)
    r, b = run_simulation(mtp)
    assert b["tpot_ms"]["mean"] < 0.7 * a["tpot_ms"]["mean"]
    assert (r.table.generated == r.table.osl).all()


def test_disaggregated_first_token_streams_when_the_decode_instance_takes_the_request():
    """The prefill pool computes the first token, but the decode instance streams it once its scheduler
    takes the request in (SGLang's prebuilt batch from its waiting queue). With one running request per
    decode instance, requests waiting for a decode slot have no first token yet: at any moment at most
    one request per decode instance is between its first token and its finish."""
    res = scenario(DISAGG_H200, {"isl": 500, "osl": 50, "concurrency": 8})
    result, _ = run_simulation(res, SimConfig(requests=40, seed=3, max_running_requests=1))
    t = result.table
    done = ~np.isnan(t.finish)
    first, finish = t.first_token[done], t.finish[done]
    assert done.sum() == 40
    streaming = [int(((first <= x) & (finish > x)).sum()) for x in first]
    assert max(streaming) <= 2  # two decode instances, one slot each
    assert float(np.mean(first - t.arrival[done])) > float(np.mean(finish - first))  # the slot wait is TTFT


def test_attention_dp_prefill_chunks_a_prompt_at_its_rank_share_of_the_token_budget():
    """Under attention DP each rank's scheduler prefills at most its share of the instance's token budget
    (SGLang divides chunked_prefill_size by dp_size), and a prompt sits on one rank: a prompt twice a rank's
    share takes two steps of one share each, never one step of the whole prompt."""
    res = scenario({**DISAGG_H200, "runtime": {"max_prefill_tokens": 2048}}, {"isl": 4096, "osl": 4, "concurrency": 1})
    pre = res.deployment.first("prefill")
    assert pre is not None
    assert pre.parallel.dp_attention == 8
    result, _ = run_simulation(res, SimConfig(requests=3, seed=1))
    steps = result.steps
    prefill_rows = steps[steps[:, 4] > 0]
    assert len(prefill_rows) == 6  # three prompts, two chunks each
    assert set(prefill_rows[:, 4]) == {2048.0}


def _with_first_token_after_step(res: Resolved, after: bool) -> Resolved:
    """`res` with its decode pool's `disagg_first_token_after_step` set to `after` (all else equal)."""
    pools = []
    for p in res.deployment.pools:
        if p.role != "decode":
            pools.append(p)
            continue
        rt = p.instance.runtime.model_copy(update={"disagg_first_token_after_step": after})
        pools.append(replace(p, instance=p.instance.model_copy(update={"runtime": rt})))
    return replace(res, deployment=replace(res.deployment, pools=tuple(pools)))


def test_disaggregated_first_token_waits_for_the_first_decode_step_where_the_engine_computes_it():
    """vLLM and TRT-LLM stream a disaggregated request's first token out of a decode-side forward (vLLM
    recomputes token 1 once the KV has landed, PR #51919; planner/engines `disagg_first_token_after_step`),
    SGLang as soon as its decode scheduler takes the request in. At one request in flight nothing else
    moves, so each first token comes exactly one decode step later, and only the first token moves."""
    res = scenario({**DISAGG_H200, "engine": "trtllm"}, {"isl": 500, "osl": 20, "concurrency": 1})
    dec = res.deployment.first("decode")
    assert dec is not None
    assert dec.instance.runtime.disagg_first_token_after_step  # TRT-LLM's profile
    cfg = SimConfig(requests=6, seed=2, closed_loop_ramp_s=0.0)
    late, _ = run_simulation(res, cfg)
    early, _ = run_simulation(_with_first_token_after_step(res, False), cfg)
    starts = np.sort(late.steps[late.steps[:, 4] == 0][:, 0])  # decode steps, back to back while one runs
    t0 = early.table.first_token  # admission: the start of the request's first decode step
    assert np.isin(t0, starts).all()
    np.testing.assert_array_equal(late.table.first_token, starts[np.searchsorted(starts, t0) + 1])
    np.testing.assert_allclose(late.table.finish, early.table.finish)
    est_late, est_early = estimate(res), estimate(_with_first_token_after_step(res, False))
    assert est_late.ttft_s - est_early.ttft_s == pytest.approx(est_late.decode_step.time_s, rel=0.02)
