"""MLPerf LoadGen's Server scenario as `planner validate` simulates it (planner/search/loadgen.py),
and the engine settings a submission states (runtime.max_running_per_rank)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from planner.inputs.scenario import ScenarioError, SLOSpec, parse_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from planner.search import loadgen
from planner.search.loadgen import LoadGenRun
from planner.search.validate import validate_file
from simulator import SimConfig
from simulator.config import MAX_REQUESTS

LLAMA = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "engine": "trtllm",
    "deployment": {"aggregated": {"instances": 2, "gpus_per_instance": 1}},
    "precision": {"dense": "fp8", "kv_cache": "fp8"},
    "workload": {"isl": 800, "osl": 64},
    "simulation": {"input_len": {"kind": "lognormal", "mean": 800.0, "sigma": 0.5}},
}
SHORT = LoadGenRun(min_duration_ms=4000, min_query_count=100)


def test_stated_running_limit_reaches_the_engine_and_is_validated():
    res = resolve(parse_scenario({**LLAMA, "runtime": {"max_running_per_rank": 6000}}))
    assert res.deployment.pools[0].instance.runtime.max_running_per_rank == 6000
    assert resolve(parse_scenario(LLAMA)).deployment.pools[0].instance.runtime.max_running_per_rank == 2048
    with pytest.raises(ScenarioError, match="max_running_per_rank"):
        parse_scenario({**LLAMA, "runtime": {"max_running_per_rank": 0}})


def test_run_length_is_loadgens_min_duration_or_min_query_count():
    run = LoadGenRun()  # mlperf.conf: 600 s; test_settings.h: 100 queries
    assert loadgen.full_run(10.0, run) == 6000
    assert loadgen.full_run(0.1, run) == 100
    assert loadgen.full_run(9.5, LoadGenRun(min_query_count=105312)) == 105312
    res = resolve(parse_scenario({**LLAMA, "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1}}}))
    cfg, notes = loadgen.config(res, 1000.0, run)  # 600,000 samples on one instance: the first MAX_REQUESTS
    assert cfg.requests == MAX_REQUESTS
    assert "first 200,000 of its 600,000 samples" in notes[0]


def test_a_long_run_is_simulated_on_fewer_instances_at_their_share_of_the_rate(monkeypatch):
    """A run past MAX_REQUESTS on k identical instances is simulated on m of them at m/k of the rate over
    its whole length: the same throughput per instance and latencies as the whole run, which a run cut to
    its first samples would not give once the system has room for all of them."""
    eight = resolve(parse_scenario({**LLAMA, "deployment": {"aggregated": {"instances": 8, "gpus_per_instance": 1}}}))
    whole, _ = loadgen.run_at(eight, 400.0, SHORT)  # 1,600 samples, under the real MAX_REQUESTS
    monkeypatch.setattr(loadgen, "MAX_REQUESTS", 500)
    part, rate, scale, notes = loadgen.sampled(eight, 400.0, SHORT)
    assert part.deployment.pools[0].instances == 2  # 8 x 500 // 1,600
    assert (rate, scale) == (100.0, 4.0)
    assert "2 of the 8 identical instances" in notes[0]
    s, _ = loadgen.run_at(eight, 400.0, SHORT)
    assert s["samples"] == 400  # 1,600 / 4, all simulated
    assert s["output_tok_s"] == pytest.approx(whole["output_tok_s"], rel=0.1)
    assert s["ttft_mean_s"] == pytest.approx(whole["ttft_mean_s"], rel=0.3)
    assert s["tpot_mean_s"] == pytest.approx(whole["tpot_mean_s"], rel=0.1)
    one = resolve(parse_scenario(LLAMA))  # two instances, 1,600 samples: one instance takes 800, still past 500
    assert loadgen.sampled(one, 400.0, SHORT)[1:3] == (200.0, 2.0)


def test_percentile_is_the_sorted_value_at_floor_n_p():
    x = np.arange(1, 201, dtype=float)[::-1]
    assert loadgen._pct(x, 0.99) == 199.0  # sorted[int(200 * 0.99)] = sorted[198]
    assert loadgen._pct(np.arange(100.0), 0.99) == 99.0


def test_a_run_measures_every_sample_from_an_idle_start():
    res = resolve(parse_scenario(LLAMA))
    s, _ = loadgen.run_at(res, 50.0, SHORT)
    assert s["samples"] == 200  # 50/s x 4 s
    cfg, _ = loadgen.config(res, 50.0, SHORT)
    assert cfg.warmup_fraction == 0.0
    assert cfg.requests == 200
    assert cfg.input_len is not None
    assert cfg.input_len.kind == "lognormal"
    assert math.isfinite(s["ttft_mean_s"])
    assert s["ttft_p99_s"] >= s["ttft_mean_s"]


def test_search_returns_the_highest_rate_meeting_the_p99_limits():
    res = resolve(parse_scenario(LLAMA))
    slo = SLOSpec(ttft_ms=300.0, tpot_ms=40.0)
    rate, s, notes = loadgen.max_rate_within(res, slo, SHORT)
    assert loadgen.meets(s, slo)
    assert s["ttft_p99_s"] * 1e3 <= 300.0
    assert s["tpot_p99_s"] * 1e3 <= 40.0
    assert not loadgen.meets(loadgen.run_at(res, rate * 1.05, SHORT)[0], slo)  # a little more fails
    assert "highest rate meeting the slo at p99" in notes[-1]


def _anchor(**kw):
    return {
        **LLAMA,
        "id": "lg",
        "metric": "output_tok_s_per_gpu",
        "value": 1000.0,
        "unit": "output tok/s per GPU",
        "slo": {"ttft_ms": 300.0, "tpot_ms": 40.0},
        "client": "mlperf-loadgen-server",
        "loadgen": {"min_duration_ms": 4000, "min_query_count": 100},
        **kw,
    }


def test_validate_routes_loadgen_anchors_and_refuses_a_loadgen_section_without_the_client(tmp_path):
    rate = {"isl": 800, "osl": 64, "request_rate": 40.0}
    anchors = [
        _anchor(),
        _anchor(id="lg-ttft", metric="ttft_ms", unit="ms", slo=None, workload=rate),
        {**_anchor(id="bad"), "client": None},
    ]
    p = tmp_path / "a.yaml"
    p.write_text(yaml.safe_dump({"version": 1, "anchors": anchors}))
    rows = {r.id: r for r in validate_file(p)[0]}
    assert rows["lg"].method == "simulate"
    assert any("LoadGen search" in n for n in rows["lg"].assumed)
    assert rows["lg-ttft"].method == "simulate"
    assert any("mean over all" in n for n in rows["lg-ttft"].assumed)
    assert rows["bad"].predicted is None
    assert "loadgen" in (rows["bad"].error or "")


def test_a_cut_run_counts_its_drain_once_over_the_full_runs_length():
    """LoadGen's tokens/s is tokens / the last completion of the whole run; a run simulated for its
    first samples keeps its token rate over the full length and its drain once."""
    res = resolve(parse_scenario({**LLAMA, "workload": {"isl": 800, "osl": 64, "request_rate": 50.0}}))
    cfg, _ = loadgen.config(res, 50.0, SHORT)
    result, _ = run_simulation(res, cfg, extend=False)
    t = result.table
    issued, done, tokens = float(t.arrival.max()), float(t.finish.max()), float(t.osl.sum())
    assert loadgen.stats(result)["output_tok_s"] == pytest.approx(tokens / done)
    cut = loadgen.stats(result, full=4 * len(t))["output_tok_s"]
    assert cut == pytest.approx(4 * tokens / (4 * issued + done - issued))
    assert cut > tokens / done  # the drain weighs less in a longer run


def test_a_loadgen_run_gets_the_step_budget_of_its_own_length_unless_one_is_stated():
    res = resolve(parse_scenario(LLAMA))
    cfg, _ = loadgen.config(res, 50.0, SHORT)
    assert cfg.max_steps == loadgen.LOADGEN_MAX_STEPS > SimConfig().max_steps
    stated = resolve(parse_scenario({**LLAMA, "simulation": {**LLAMA["simulation"], "max_steps": 12345}}))
    assert loadgen.config(stated, 50.0, SHORT)[0].max_steps == 12345


def test_a_loadgen_sample_has_the_serving_path_only_where_its_harness_posts_over_http(monkeypatch):
    """An in-process harness core (NVIDIA's TRTLLM_EXECUTOR, the default) feeds token ids to the engine:
    the run is simulated with every pool's request_overhead_s at 0 although the trtllm profile has a
    serving path; a run whose harness posts samples to trtllm-serve (TRTLLM_ENDPOINT: serving_path) keeps it."""
    res = resolve(parse_scenario({**LLAMA, "workload": {**LLAMA["workload"], "request_rate": 5.0}}))
    overhead = res.deployment.pools[0].instance.runtime.request_overhead_s
    assert overhead > 0
    seen = []

    def run_at(r, rate, run):
        seen.append(r)
        return {"ttft_mean_s": 0.1, "samples": 10}, []

    monkeypatch.setattr(loadgen, "run_at", run_at)
    loadgen.predict(res, "ttft_ms", None, SHORT)
    loadgen.predict(res, "ttft_ms", None, SHORT.model_copy(update={"serving_path": True}))
    assert [[p.instance.runtime.request_overhead_s for p in r.deployment.pools] for r in seen] == [[0.0], [overhead]]


def test_the_endpoint_harness_adds_the_serving_path_to_every_sample():
    """Simulated end to end through `predict`: the same Poisson run through the HTTP server (serving_path)
    has each sample's first token later by the engine's serving path, its TPOT unchanged (the path is
    before admission). Before loadgen.serving_path every LoadGen run was simulated in process."""
    res = resolve(parse_scenario({**LLAMA, "workload": {**LLAMA["workload"], "request_rate": 5.0}}))
    overhead = res.deployment.pools[0].instance.runtime.request_overhead_s
    http = SHORT.model_copy(update={"serving_path": True})
    ttft_in, _ = loadgen.predict(res, "ttft_ms", None, SHORT)
    ttft_http, _ = loadgen.predict(res, "ttft_ms", None, http)
    assert ttft_http == pytest.approx(ttft_in + overhead * 1e3, rel=0.02)
    assert loadgen.predict(res, "tpot_ms", None, http)[0] == pytest.approx(
        loadgen.predict(res, "tpot_ms", None, SHORT)[0], rel=0.02
    )
