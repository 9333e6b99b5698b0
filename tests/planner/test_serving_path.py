"""The per-request serving path and the benchmark clients' patterns: where TTFT comes from besides
the GPU steps."""

from __future__ import annotations

import pytest

from planner import engines
from planner.inputs.benchmarks import PRESETS, client_config, client_for
from planner.inputs.scenario import parse_as, parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation
from planner.search.unknowns import resolve_any
from planner.search.validate import Anchor, predict_anchor
from simulator import SimConfig

SMALL = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "engine": "sglang",
    "deployment": {"aggregated": {"gpus_per_instance": 1, "tp": 1}},
    "workload": {"isl": 1000, "osl": 64, "concurrency": 1},
}


def _without_overhead(monkeypatch):
    real = engines.profile

    def zero(engine):
        p = real(engine)
        return p.model_copy(update={"request_overhead_ms": p.request_overhead_ms.model_copy(update={"value": 0.0})})

    monkeypatch.setattr(engines, "profile", zero)


def test_request_overhead_lengthens_ttft_and_e2e_by_the_same_constant_in_estimate_and_simulation(monkeypatch):
    """The serving path is one constant per request, applied in one place for each model: the
    estimate and the simulation at concurrency 1 both move TTFT and E2E by that constant (the
    estimate within 5%: the one request in flight spends that time outside the engine, so the mean
    decode batch it solves for is a little smaller), and TPOT not at all."""
    overhead_s = engines.profile("sglang").request_overhead_ms.value * 1e-3
    assert overhead_s > 0
    res = resolve(parse_scenario(SMALL))
    assert res.deployment.pools[0].instance.runtime.request_overhead_s == pytest.approx(overhead_s)
    est = estimate(res)
    _, sim = run_simulation(res, client_config(1, num_prompts=20))
    _without_overhead(monkeypatch)
    res0 = resolve(parse_scenario(SMALL))
    est0 = estimate(res0)
    _, sim0 = run_simulation(res0, client_config(1, num_prompts=20))
    assert est.ttft_s - est0.ttft_s == pytest.approx(overhead_s, rel=0.05)
    assert est.e2e_s - est0.e2e_s == pytest.approx(overhead_s, rel=0.05)
    assert est.tpot_s == pytest.approx(est0.tpot_s, rel=0.05)
    assert (sim["ttft_ms"]["mean"] - sim0["ttft_ms"]["mean"]) * 1e-3 == pytest.approx(overhead_s, rel=1e-3)
    assert sim["tpot_ms"]["mean"] == pytest.approx(sim0["tpot_ms"]["mean"], rel=1e-6)


def test_closed_loop_counts_requests_in_the_serving_path_as_in_flight():
    """Little's law with the serving path: C = X (TTFT + decode) still holds."""
    e = estimate(resolve(parse_scenario({**SMALL, "workload": {"isl": 1000, "osl": 64, "concurrency": 16}})))
    assert e.output_tok_s / 64 * e.e2e_s == pytest.approx(e.concurrency, rel=0.02)


def test_steady_state_clients_leave_the_first_wave_out_of_ttft():
    """All clients starting together queue their prefills behind one another: a burst client
    (sglang bench_serving) averages that wave in, a steady-state client (genai-perf) does not."""
    res = resolve(parse_scenario({**SMALL, "workload": {"isl": 4000, "osl": 64, "concurrency": 32}}))
    _, burst = run_simulation(res, client_config(32, client="sglang-bench-serving"), extend=False)
    _, steady = run_simulation(res, client_config(32, client="genai-perf"), extend=False)
    assert steady["ttft_ms"]["mean"] < burst["ttft_ms"]["mean"]


def test_each_engine_has_a_client_and_an_unknown_client_is_refused():
    assert {client_for(e) for e in engines.ENGINES} <= set(PRESETS)
    assert client_for("sglang", "aiperf") == "aiperf"
    with pytest.raises(ValueError, match="client 'locust'"):
        client_for("sglang", "locust")


def test_an_anchor_naming_an_unknown_client_is_one_error_naming_the_field():
    anchor = {
        "id": "x",
        **SMALL,
        "phase": "end-to-end",
        "metric": "ttft_ms",
        "value": 50.0,
        "client": "locust",
    }
    r = predict_anchor(anchor, None)
    assert r.predicted is None
    assert "client" in (r.error or "")


def test_a_client_loop_keeps_the_lengths_an_anchor_section_draws():
    """InferenceX runs its client with --random-range-ratio 0.8: the anchor's `simulation:` section
    states the lengths, the client preset still decides the loop (burst, 10 prompts per client)."""
    given = SimConfig.model_validate({"output_len": {"kind": "uniform", "min": 51, "max": 64}})
    cfg = client_config(8, client="vllm-bench-serve", given=given)
    assert cfg.output_len == given.output_len
    assert (cfg.requests, cfg.closed_loop_ramp_s, cfg.warmup_by) == (80, 0.0, "completion")
    own = SimConfig.model_validate({"arrival": {"kind": "poisson", "rate": 2.0}})
    assert client_config(8, given=own) is own  # a section with its own traffic runs as it is


UNIFORM = {"output_len": {"kind": "uniform", "min": 16, "max": 64}}
BURST = {**SMALL, "workload": {"isl": 1000, "osl": 40, "concurrency": 8}, "simulation": UNIFORM}


def test_an_anchor_with_drawn_lengths_is_still_measured_by_its_client():
    """Before, a `simulation:` section replaced the client's loop with the standard one (clients spread
    over one E2E), so the burst's first wave left TTFT."""
    anchor = {**BURST, "id": "x", "phase": "end-to-end", "metric": "ttft_ms", "value": 50.0}
    anchor["client"] = "vllm-bench-serve"
    res = resolve(parse_scenario(BURST))
    assert res.simulation is not None
    _, burst = run_simulation(res, client_config(8, client="vllm-bench-serve", given=res.simulation))
    assert predict_anchor(anchor, None).predicted == pytest.approx(burst["ttft_ms"]["mean"])


@pytest.mark.parametrize("metric", ["tpot_ms", "output_tok_s_per_user"])
def test_a_median_anchor_reads_the_median_request(metric):
    """InferenceX publishes median TPOT and tok/s/user = 1000 / median TPOT (`statistic: median`)."""
    res = resolve(parse_scenario(BURST))
    assert res.simulation is not None
    _, m = run_simulation(res, client_config(8, client="vllm-bench-serve", given=res.simulation))
    assert m["tpot_ms"]["p50"] != pytest.approx(m["tpot_ms"]["mean"], rel=1e-3)
    want = m["tpot_ms"]["p50"] if metric == "tpot_ms" else 1000.0 / m["tpot_ms"]["p50"]
    anchor = {"id": "x", **BURST, "phase": "end-to-end", "metric": metric, "value": 10.0, "client": "vllm-bench-serve"}
    assert predict_anchor({**anchor, "statistic": "median"}, None).predicted == pytest.approx(want)
    bad = predict_anchor({**anchor, "statistic": "p90"}, None)
    assert bad.predicted is None
    assert "statistic" in (bad.error or "")


def test_a_searched_deployment_keeps_the_simulation_section_as_written():
    """The search re-reads the scenario; a section that sets only lengths must not come back with every
    field set (requests 2000 and no burst: InferenceX rows at concurrency 16,130 ran 2,000 requests)."""
    anchor = {**BURST, "id": "x", "phase": "end-to-end", "metric": "ttft_ms", "value": 50.0}
    anchor["deployment"] = {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": "unknown"}}
    a = parse_as(Anchor, anchor, "x", "anchor")
    assert not a.deployment.known
    res = resolve_any(a, None, a.metric)
    assert res.simulation is not None
    assert res.simulation.model_fields_set == {"output_len"}


def test_a_latency_row_of_the_highest_throughput_configuration_searches_for_throughput():
    """InferenceX tables show 'the highest-throughput configuration' per GPU, and its TPOT: the TPOT
    anchor's unstated deployment is the throughput pick, not the lowest-latency one."""
    anchor = {**BURST, "id": "x", "phase": "end-to-end", "metric": "tpot_ms", "value": 10.0}
    anchor["deployment"] = {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": "unknown"}}
    assumed = predict_anchor(anchor, None).assumed
    assert any("deployment: searched (lowest latency" in n for n in assumed)
    chosen = predict_anchor({**anchor, "deployment_chosen_for": "throughput"}, None)
    assert chosen.predicted is not None
    assert any("deployment: searched (highest throughput per GPU" in n for n in chosen.assumed)


def test_aiperf_profiles_from_a_burst_after_its_warm_up_drains():
    """AIPerf's warm-up phase drains before the profiling phase issues `concurrency` requests at
    once, every profiled request averaged (aiperf timing/credit_issuing_strategy.py): a burst, not a
    steady state."""
    assert PRESETS["aiperf"].first_wave
    cfg = client_config(16, client="aiperf")
    assert (cfg.closed_loop_ramp_s, cfg.warmup_fraction) == (0.0, 0.0)


def test_an_in_process_harness_skips_the_serving_path():
    """trtllm-bench drives the engine in process on tokenized inputs, so its TTFT has no HTTP serving
    path: the same anchor's TTFT through trtllm-serve's benchmark is longer by the profile's constant."""
    from planner.search.anchor_sim import driven_by, simulated_value

    assert PRESETS["trtllm-serve-benchmark"].serving_path
    assert not PRESETS["trtllm-bench"].serving_path
    overhead_ms = engines.profile("trtllm").request_overhead_ms.value
    assert overhead_ms > 0
    res = resolve(parse_scenario({**SMALL, "engine": "trtllm"}))
    assert driven_by(res, "trtllm-bench").deployment.pools[0].instance.runtime.request_overhead_s == 0.0
    assert driven_by(res, "trtllm-serve-benchmark") is res
    served = simulated_value("ttft_ms", res, "trtllm-serve-benchmark")
    in_process = simulated_value("ttft_ms", res, "trtllm-bench")
    assert served - in_process == pytest.approx(overhead_ms, rel=1e-3)


def test_the_serving_path_fit_reads_only_clients_through_the_http_server():
    from bench import fit_request_overhead as fit

    low = {
        "metric": "ttft_ms",
        "phase": "end-to-end",
        "engine": "trtllm",
        "workload": {"isl": 500, "osl": 50, "concurrency": 1},
    }
    assert fit.selected(low)  # trtllm's own serving benchmark (trtllm-serve)
    assert fit.selected({**low, "client": "genai-perf"})
    assert not fit.selected({**low, "client": "trtllm-bench"})
    assert not fit.selected({**low, "client": "mlperf-loadgen-server"})
