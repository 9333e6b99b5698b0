"""Properties every simulation of a valid scenario must keep, on random valid scenarios
(hypothesis, derandomized): requests and tokens are conserved, KV use never exceeds the pool,
TTFT <= E2E for every request, and the same seed gives bit-identical JSON.

The quick profile (a few dozen scenarios) runs with the normal suite; the long profile
(`pytest -m fuzz`) checks 1,000.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner.inputs.edge import json_text
from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from roofline.errors import PlannerError

DEPLOYMENTS: dict[str, dict[str, Any]] = {
    "llama-agg": {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "deployment": {"aggregated": {"gpus_per_instance": 1}},
    },
    "llama-agg2": {
        "model": "llama-3.1-8b",
        "hardware": "h200-sxm",
        "deployment": {"aggregated": {"instances": 2, "gpus_per_instance": 2, "tp": 2}},
    },
    "qwen-agg": {
        "model": "qwen3-30b-a3b",
        "hardware": "h100-sxm",
        "deployment": {"aggregated": {"gpus_per_instance": 2, "tp": 2, "ep": 2}},
    },
    "dsv3-disagg": {
        "model": "deepseek-v3",
        "hardware": "h200-sxm",
        "deployment": {
            "prefill": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
            "decode": {"instances": 2, "gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
        },
        "precision": {"kv_cache": "fp8"},
    },
    "dsv3-decode-only": {
        "model": "deepseek-v3",
        "hardware": "h200-sxm",
        "phase": "decode",
        "deployment": {"decode": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8}},
    },
}


@st.composite
def valid_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    base = dict(DEPLOYMENTS[draw(st.sampled_from(sorted(DEPLOYMENTS)))])
    isl, osl = draw(st.integers(1, 6000)), draw(st.integers(1, 400))
    if draw(st.booleans()):
        workload = {"isl": isl, "osl": osl, "concurrency": draw(st.integers(1, 200))}
    else:
        workload = {"isl": isl, "osl": osl, "request_rate": draw(st.floats(0.05, 40))}
    sim: dict[str, Any] = {
        "requests": draw(st.integers(1, 120)),
        "seed": draw(st.integers(0, 2**31)),
        "router": draw(st.sampled_from(["round_robin", "least_loaded", "kv_aware"])),
        "kv_reservation": draw(st.sampled_from([0.0, 0.5, 1.0])),
        "warmup_fraction": draw(st.sampled_from([0.0, 0.1, 0.5])),
        "warmup_by": draw(st.sampled_from(["arrival", "completion"])),
        "prefix_cache_hit_rate": draw(st.sampled_from([0.0, 0.5])),
    }
    if draw(st.booleans()):
        sim["max_running_requests"] = draw(st.integers(1, 64))
    if draw(st.booleans()):
        sim["input_len"] = {"kind": "lognormal", "mean": isl, "sigma": draw(st.floats(0.1, 1.5))}
    if "request_rate" in workload and draw(st.booleans()):
        sim["arrival"] = {"kind": "gamma", "rate": workload["request_rate"], "cv": draw(st.floats(0.2, 4))}
    runtime = {"mem_fraction": draw(st.sampled_from([0.5, 0.7, 0.85]))}
    return {**base, "workload": workload, "simulation": sim, "runtime": runtime}


def simulate(data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    s = parse_scenario(data)  # a strategy that draws an invalid scenario is a bug in the test
    try:
        return run_simulation(resolve(s), s.simulation)
    except PlannerError:  # a deployment that does not fit, a run where nothing could complete
        assume(False)
        raise


def check_properties(data: dict[str, Any]) -> None:
    result, m = simulate(data)
    t = result.table
    n = len(t)
    kept = ~t.dropped
    # requests: every one finished or dropped with a reason
    assert not np.isnan(t.finish).any()
    assert m["requests_completed"] + m["requests_dropped"] == n
    assert len(t.drop_reason) == int(t.dropped.sum())
    # per request: arrival <= first token <= finish (TTFT <= E2E), all its tokens generated
    assert (t.first_token[kept] >= t.arrival[kept]).all()
    assert (t.finish[kept] >= t.first_token[kept]).all()
    assert (t.generated[kept] == t.osl[kept]).all()
    # tokens: decode steps emit each kept request's osl - 1 tokens once, more only if recomputed
    emitted = result.extra["out_tokens"][:, 1].sum()
    owed = float((t.osl[kept] - 1).sum())
    if not t.preemptions.any():
        assert emitted == pytest.approx(owed, abs=1e-6 * max(owed, 1))
    else:
        assert emitted >= owed - 1e-6
    # prompt tokens: prefill steps read each prompt once (minus cached) when nothing is recomputed
    if not t.preemptions.any() and not t.dropped.any() and data.get("phase") != "decode":
        assert result.steps[:, 4].sum() == float((t.isl - t.cached).sum())
    # KV never exceeds the pool
    if len(result.steps):
        assert result.steps[:, 5].max() <= 1.0 + 1e-9
    # summary: finite, positive throughput, TTFT <= E2E where the phase has both (a decode phase has neither)
    assert math.isfinite(m["output_tok_s"])
    assert m["output_tok_s"] > 0
    if data.get("phase") == "decode":
        assert m["ttft_ms"]["mean"] is None
        assert m["e2e_ms"]["mean"] is None
    elif data.get("phase") != "prefill":  # (a prefill phase has no E2E)
        assert m["ttft_ms"]["mean"] <= m["e2e_ms"]["mean"] + 1e-9
    # same seed, same JSON (wall time aside)
    _, again = simulate(data)
    m.pop("wall_time_s")
    again.pop("wall_time_s")
    assert json_text(again) == json_text(m)


QUICK = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
LONG = settings(
    max_examples=1000,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@QUICK
@given(valid_scenarios())
def test_simulations_of_valid_scenarios_conserve_requests_tokens_and_kv(data):
    check_properties(data)


@pytest.mark.fuzz
@LONG
@given(valid_scenarios())
def test_simulations_of_1000_valid_scenarios_conserve_requests_tokens_and_kv(data):
    check_properties(data)
