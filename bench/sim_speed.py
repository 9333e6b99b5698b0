"""Simulator speed: CPU time per simulated request, and how it scales with the number of requests.

Scenario: DeepSeek-V3 on H200, a prefill pool of 4 instances (8 GPUs, DP8/EP8 each) and 8 decode
instances (8 GPUs, DP8/EP8 each), FP8; request lengths resampled from the Splitwise conversation
trace (mean 1,155 input / 211 output tokens); Poisson arrivals at 80% of the saturation rate the
steady-state estimator finds. Prints a table and saves bench/results/sim_speed.json.
Usage: python bench/sim_speed.py [--sizes 10000,30000,100000]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation
from simulator import SimConfig

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "splitwise_conv.csv"


def scenario(rate: float, requests: int) -> dict:
    lengths = {"kind": "empirical", "trace": str(TRACE), "format": "splitwise"}
    return {
        "name": "sim speed",
        "model": "deepseek-v3",
        "hardware": "h200-sxm",
        "deployment": {
            "prefill": {"instances": 4, "gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
            "decode": {"instances": 8, "gpus_per_instance": 8, "dp_attention": 8, "ep": 8},
        },
        "precision": {"attention": "bf16", "kv_cache": "fp8", "dense": "fp8", "moe": "fp8"},
        "workload": {"isl": 1155, "osl": 211, "request_rate": rate},
        "simulation": {"requests": requests, "seed": 0, "input_len": lengths, "output_len": lengths},
    }


def saturation_rate() -> float:
    lo, hi = 1.0, 2000.0
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        e = estimate(resolve(parse_scenario(scenario(mid, 1000))))
        lo, hi = (lo, mid) if e.limit else (mid, hi)
    return lo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,30000,100000")
    sizes = [int(s) for s in ap.parse_args().sizes.split(",")]
    sat = saturation_rate()
    rate = 0.8 * sat
    rows = []
    print(f"saturation {sat:.1f} req/s (estimator); simulating at {rate:.1f} req/s")
    print(
        "| requests | CPU s | CPU ms / request | marginal ms / request | sim time s | steps | model calls |"
        " p90 TTFT ms | p90 TPOT ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        res = resolve(parse_scenario(scenario(rate, n)))
        cfg = res.simulation or SimConfig()
        t = time.process_time()
        result, summary = run_simulation(res, cfg)
        cpu = time.process_time() - t
        rows.append(
            {
                "requests": n,
                "cpu_s": cpu,
                "cpu_ms_per_request": cpu / n * 1e3,
                "sim_time_s": summary["sim_time_s"],
                "steps": len(result.steps),
                "model_calls": summary["model_calls"],
                "ttft_p90_ms": summary["ttft_ms"]["p90"],
                "tpot_p90_ms": summary["tpot_ms"]["p90"],
            }
        )
        r = rows[-1]
        prev = rows[-2] if len(rows) > 1 else None
        marginal = (cpu - prev["cpu_s"]) / (n - prev["requests"]) * 1e3 if prev else float("nan")
        r["marginal_ms_per_request"] = marginal
        print(
            f"| {n:,} | {cpu:.2f} | {r['cpu_ms_per_request']:.4f} | {marginal:.4f} | {r['sim_time_s']:,.0f} | "
            f"{r['steps']:,} | {r['model_calls']:,} | {r['ttft_p90_ms']:,.0f} | {r['tpot_p90_ms']:,.1f} |"
        )
    out = ROOT / "bench" / "results" / "sim_speed.json"
    out.write_text(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d"),
                "machine": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "saturation_req_s": sat,
                "rate_req_s": rate,
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
