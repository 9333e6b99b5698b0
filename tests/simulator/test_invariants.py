"""Properties that hold for every simulation: conservation, capacity, causality, determinism."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.model.simulate import run_simulation
from simulator.metrics import little
from tests.simulator.helpers import AGG_LLAMA, AGG_QWEN, DISAGG_GB200, DISAGG_H200, scenario

BASES = [AGG_LLAMA, AGG_QWEN, DISAGG_H200, DISAGG_GB200]


@st.composite
def runs(draw):
    base = draw(st.sampled_from(BASES))
    if "aggregated" in base["deployment"]:  # each engine's scheduler: prefill-first or mixed
        base = {**base, "engine": draw(st.sampled_from(["sglang", "vllm", "trtllm"]))}
    arrival = draw(st.sampled_from(["closed", "poisson", "gamma"]))
    lengths = {
        "input_len": {"kind": "lognormal", "mean": draw(st.integers(50, 3000)), "sigma": 0.7},
        "output_len": {"kind": "uniform", "min": 1, "max": draw(st.integers(1, 300))},
    }
    sim = {
        "requests": draw(st.integers(20, 150)),
        "seed": draw(st.integers(0, 10_000)),
        "kv_reservation": draw(st.sampled_from([0.0, 0.3, 1.0])),
        "max_running_requests": draw(st.sampled_from([None, 4, 64])),
        "router": draw(st.sampled_from(["round_robin", "least_loaded", "kv_aware"])),
        "prefix_cache_hit_rate": draw(st.sampled_from([0.0, 0.5])),
        **lengths,
    }
    if arrival == "closed":
        sim["arrival"] = {"kind": "closed", "concurrency": draw(st.integers(1, 64))}
    else:
        sim["arrival"] = {"kind": arrival, "rate": draw(st.floats(0.5, 200)), "cv": 2.0}
    mem = draw(st.sampled_from([0.85, 0.3])) if base is AGG_LLAMA else 0.85
    return scenario(base, {"isl": 100, "osl": 10, "concurrency": 1}, sim, runtime={"mem_fraction": mem})


@settings(max_examples=30, deadline=None)
@given(runs())
def test_requests_tokens_and_kv_are_conserved(res):
    result, summary = run_simulation(res)
    t = result.table
    done = ~np.isnan(t.finish) & ~t.dropped
    assert (done | t.dropped).all(), "every admitted request completes or is reported dropped"
    assert (t.generated[done] == t.osl[done]).all()
    produced = result.extra["out_tokens"][:, 1].sum() + (~np.isnan(t.first_token)).sum()
    assert abs(produced - t.osl[done].sum()) <= 1 + t.preemptions.sum(), "output tokens are conserved"
    kv = result.steps[:, 5] if len(result.steps) else np.zeros(0)
    assert (kv <= 1 + 1e-9).all(), "KV never exceeds capacity"
    d = done
    assert (t.arrival[d] <= t.prefill_start[d]).all()
    assert (t.first_token[d] - t.arrival[d] <= t.finish[d] - t.arrival[d] + 1e-12).all(), "TTFT <= E2E"
    assert summary["requests_completed"] + summary["requests_dropped"] == len(t)


@settings(max_examples=8, deadline=None)
@given(runs())
def test_the_same_seed_gives_identical_output(res):
    a, sa = run_simulation(res)
    b, sb = run_simulation(res)
    for name in ("arrival", "first_token", "finish", "preemptions"):
        assert np.array_equal(getattr(a.table, name), getattr(b.table, name), equal_nan=True)
    sa.pop("wall_time_s")
    sb.pop("wall_time_s")
    assert sa == sb


def test_littles_law_holds_on_the_measured_window():
    res = scenario(
        DISAGG_H200,
        {"isl": 800, "osl": 150, "request_rate": 20.0},
        {"requests": 6000, "seed": 11, "output_len": {"kind": "uniform", "min": 50, "max": 250}},
    )
    result, _ = run_simulation(res)
    in_system, lam_w = little(result)
    assert in_system == np.float64(in_system)
    assert abs(in_system / lam_w - 1) < 0.05
