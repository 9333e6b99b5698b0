"""The standard simulation of many identical instances runs a slice of them, and Poisson traffic starts
warm (planner.model.sim_slice: `slice_divisor`; `SimConfig.warm_start`).

New-user trial (fifteenth session): `planner plan --model llama-3.1-8b --hardware gb300-nvl72 --gpus 72`
took 67 s and verified nothing: its three simulated rows (72 instances, 27 + 45, 26 + 23) were all 'not
steady'. Row 2 (72x agg TP1 at 1,242 req/s, the estimate's batch 512 per instance) grew its batch from
empty for 200 s of simulated time and 41,000 requests without settling: near capacity each E2E closes only
a small part of the gap to the steady batch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.inputs.scenario import load_scenario
from planner.model.defaults import resolve
from planner.model.sim_slice import slice_divisor
from planner.model.simulate import run_simulation
from simulator import SimConfig
from simulator.metrics import measured_mask

ROW2 = {
    "name": "llama-3.1-8b on 72x gb300-nvl72",
    "model": "llama-3.1-8b",
    "hardware": "gb300-nvl72",
    "engine": "sglang",
    "deployment": {"aggregated": {"instances": 72, "gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1}},
    "precision": {"attention": "fp8", "kv_cache": "fp8", "dense": "fp8", "moe": "bf16"},
    "workload": {"isl": 2000, "osl": 1000, "request_rate": 1242.4824889610893},
    "slo": {"ttft_ms": 2000.0, "tpot_ms": 50.0},
    "runtime": {"mem_fraction": 0.85},
}


def _simulate(tmp_path, scenario: dict) -> dict:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = CliRunner().invoke(app, ["simulate", str(path), "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def _resolved(tmp_path, scenario: dict):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return resolve(load_scenario(path))


def test_the_trial_row_settles_warm_and_not_cold(tmp_path):
    warm = _simulate(tmp_path, ROW2)
    assert warm["converged"], warm.get("warning")
    assert warm["steady"]
    assert warm["slice"].startswith("simulated as 1/9 of the deployment (8 of 72 aggregated")
    assert warm["gpus"] == 72
    assert warm["output_tok_s"] == pytest.approx(72 * warm["output_tok_s_per_gpu"], rel=1e-3)
    assert warm["output_tok_s"] == pytest.approx(warm["offered_output_tok_s"], rel=0.03)  # serves its load
    res = _resolved(tmp_path, ROW2)
    _, cold = run_simulation(res, SimConfig(warm_start=0), extend=False)  # as many requests, from empty
    assert cold["requests"] == warm["requests"]
    assert not cold["converged"]  # still growing (41,000 requests did not settle either)
    assert cold["tpot_ms"]["mean"] < 0.9 * warm["tpot_ms"]["mean"]


def test_a_slice_reads_what_the_whole_deployment_reads(tmp_path):
    """16 Llama-3.1-8B instances on H100 at half load: the standard run simulates 8 of them at half the
    rate; the whole deployment, run cold at a fixed request count (no slice, no warm start), agrees."""
    scenario = ROW2 | {
        "hardware": "h100-sxm",
        "deployment": {"aggregated": {"instances": 16, "gpus_per_instance": 1, "tp": 1}},
        "workload": {"isl": 2000, "osl": 200, "request_rate": 40.0},
    }
    res = _resolved(tmp_path, scenario)
    _, part = run_simulation(res)
    _, whole = run_simulation(res, SimConfig(requests=12_000))
    assert "slice" in part
    assert "slice" not in whole
    assert part["gpus"] == whole["gpus"] == 16
    assert part["output_tok_s_per_gpu"] == pytest.approx(whole["output_tok_s_per_gpu"], rel=0.03)
    for key in ("ttft_ms", "tpot_ms"):
        assert part[key]["p90"] == pytest.approx(whole[key]["p90"], rel=0.05), key


@pytest.mark.parametrize(
    ("instances", "traffic", "config", "divisor"),
    [
        ((72,), {"request_rate": 10.0}, {}, 9),
        ((27, 45), {"request_rate": 10.0}, {}, 3),  # 9 + 15 instances: each pool keeps at least 8
        ((26, 23), {"request_rate": 10.0}, {}, 1),  # no common divisor
        ((72,), {"concurrency": 100}, {}, 4),  # a closed loop's clients divide too
        ((72,), {"concurrency": 101}, {}, 1),
        ((72,), {"request_rate": 10.0}, {"requests": 5000}, 1),  # a stated request count runs whole
        ((72,), {"request_rate": 10.0}, {"arrival": {"kind": "gamma", "rate": 10.0, "cv": 4}}, 1),
        ((7,), {"request_rate": 10.0}, {}, 1),
    ],
)
def test_slice_divisor(tmp_path, instances, traffic, config, divisor):
    if len(instances) == 1:
        dep = {"aggregated": {"instances": instances[0], "gpus_per_instance": 1, "tp": 1}}
    else:
        dep = {
            "prefill": {"instances": instances[0], "gpus_per_instance": 1, "tp": 1},
            "decode": {"instances": instances[1], "gpus_per_instance": 1, "tp": 1},
        }
    res = _resolved(tmp_path, ROW2 | {"deployment": dep, "workload": {"isl": 2000, "osl": 1000, **traffic}})
    cfg = SimConfig(**config)
    assert slice_divisor(res, cfg, "requests" in config) == divisor


def test_a_warm_start_is_in_flight_at_zero_never_measured_and_conserved(tmp_path):
    scenario = ROW2 | {"deployment": {"aggregated": {"instances": 2, "gpus_per_instance": 1, "tp": 1}}}
    scenario["workload"] = {"isl": 1000, "osl": 100, "request_rate": 20.0}
    res = _resolved(tmp_path, scenario)
    result, summary = run_simulation(res, SimConfig(requests=1000, warm_start=60))
    t = result.table
    assert len(t) == 1060
    assert result.extra["warm_start"] == 60
    assert (t.arrival[:60] == 0).all()
    assert not measured_mask(result)[:60].any()
    assert (t.cached[:60] == t.isl[:60] - 1).all()  # their prompts' KV was there before 0 s
    assert (t.osl[:60] >= 1).all()
    assert (t.osl[:60] <= 100).all()
    assert (t.isl[:60] + t.osl[:60] <= 1100).all()
    assert (t.isl[:60] >= 1000).all()
    done = ~np.isnan(t.finish)
    assert int(done.sum()) + summary["requests_dropped"] == len(t)


def test_the_dashboards_time_series_shows_the_whole_deployments_output():
    """The time series is drawn from a slice's steps: its output tok/s is scaled back to the deployment's
    and its source says what ran; a warm start's requests (in flight before 0 s) are not in its latencies."""
    from planner.dashboard.simview import timeseries

    scn = ROW2 | {
        "hardware": "h100-sxm",
        "deployment": {"aggregated": {"instances": 16, "gpus_per_instance": 1, "tp": 1}},
        "workload": {"isl": 2000, "osl": 200, "request_rate": 40.0},
    }
    ts = timeseries(scn)
    assert "simulated as 1/2 of the deployment" in ts["source"]
    n = len(ts["output_tok_s"])
    middle = ts["output_tok_s"][n // 10 : 8 * n // 10]  # the run's bins but the drain (~0.4 s each, noisy)
    assert float(np.mean(middle)) == pytest.approx(40.0 * 200, rel=0.1)
