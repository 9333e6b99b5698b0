"""Simulator speed side by side with Vidur (microsoft/vidur) on Vidur's own workload, in one run.

Vidur (set up per ../shared/reference/vidur_side_by_side.md): Llama-2-70B, A100, TP2, one replica,
16,384 requests, Poisson arrivals at qps 1 (gaps truncated at 3/qps), Splitwise conversation lengths
(clipped to 4,096 tokens, shuffled), Sarathi with chunk 512 and at most 128 in a batch. The requests
it generates are dumped to bench/data/vidur_requests_splitwise_conv_16384.csv and replayed by our
simulator as a Splitwise trace: both simulate the exact same arrivals and lengths.
Ours: one aggregated TP2 instance on h100-sxm (no A100 in the catalog; the GPU changes modelled step
times, and a busy open-loop instance takes about span / step-time steps, so the step count too),
engine vllm, prefill budget 512 tokens per step, at most 128 running requests, two models:
llama-3.1-70b, the catalog's closest shape (80 layers, hidden 8192, 64 query / 8 KV heads, FFN 28672)
but with a 128,256-token vocabulary that leaves ~8.8k KV tokens on 2x80 GB, so it queues at qps 1
(reported, not tuned away); llama-2-70b, bench/data/vidur_llama2_70b_config.json with the fields of
meta-llama/Llama-2-70b-hf's config.json (vocabulary 32,000; Vidur's model config pads to 32,768).
Both run as child processes, alternating, `--reps` times: whole-process CPU (user + sys) from the
OS, event-loop CPU from a timer around the loop only (Vidur: `Simulator.run()`; ours:
`run_simulation`, trace reading and summary included). Steps are batches executed (Vidur: `Batch`
ids issued; ours: rows of the step log). Medians are reported; `--cached` reruns only our side with
Vidur's numbers from bench/results/vidur_side_by_side.json. Vidur is not installed by this script.
Usage: python bench/vidur_side_by_side.py [--reps 3] [--cached] [--vidur-src DIR] [--vidur-python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from roofline.memory import plan_memory

ROOT = Path(__file__).resolve().parents[1]
REQUESTS_CSV = ROOT / "bench" / "data" / "vidur_requests_splitwise_conv_16384.csv"
OUT = ROOT / "bench" / "results" / "vidur_side_by_side.json"
N_REQUESTS = 16384

VIDUR_ARGS = [
    "--replica_config_device", "a100", "--replica_config_network_device", "a100_dgx",
    "--replica_config_model_name", "meta-llama/Llama-2-70b-hf", "--cluster_config_num_replicas", "1",
    "--replica_config_tensor_parallel_size", "2", "--replica_config_num_pipeline_stages", "1",
    "--request_generator_config_type", "synthetic",
    "--synthetic_request_generator_config_num_requests", str(N_REQUESTS),
    "--length_generator_config_type", "trace", "--trace_request_length_generator_config_max_tokens", "4096",
    "--trace_request_length_generator_config_trace_file", "./data/processed_traces/splitwise_conv.csv",
    "--interval_generator_config_type", "poisson", "--poisson_request_interval_generator_config_qps", "1.0",
    "--replica_scheduler_config_type", "sarathi", "--sarathi_scheduler_config_batch_size_cap", "128",
    "--sarathi_scheduler_config_chunk_size", "512", "--no-metrics_config_store_plots",
    "--no-metrics_config_enable_chrome_trace",
    "--random_forrest_execution_time_predictor_config_num_estimators", "100",
    "--random_forrest_execution_time_predictor_config_max_depth", "16",
    "--random_forrest_execution_time_predictor_config_k_fold_cv_splits", "2",
]  # fmt: skip

# Runs inside Vidur's environment (cwd: its checkout): build the simulator as vidur.main does,
# write its generated requests to VIDUR_DUMP, time Simulator.run() alone, print one JSON line.
VIDUR_DRIVER = """
import csv, json, os, sys, time
from vidur.config import SimulationConfig
from vidur.entities import Batch
from vidur.events import BaseEvent
from vidur.simulator import Simulator
from vidur.utils.random import set_seeds
config = SimulationConfig.create_from_cli_args()
set_seeds(config.seed)
sim = Simulator(config)
reqs = sorted((e._request for _, e in sim._event_queue), key=lambda r: r.arrived_at)
with open(os.environ["VIDUR_DUMP"], "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["arrived_at", "num_prefill_tokens", "num_decode_tokens"])
    w.writerows([repr(float(r.arrived_at)), r.num_prefill_tokens, r.num_decode_tokens] for r in reqs)
b0, e0 = Batch._id, BaseEvent._id
c0, w0 = time.process_time(), time.perf_counter()
sim.run()
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
rs = sim._scheduler.get_replica_scheduler(0)
print("VIDUR_RESULT " + json.dumps({"kv_tokens": int(rs._config.num_blocks * rs._config.block_size),
      "requests": len(reqs), "steps": Batch._id - b0, "events": BaseEvent._id - e0,
      "loop_cpu_s": cpu, "loop_wall_s": wall, "sim_time_s": float(sim._time)}))
sys.stdout.flush()
"""


MODELS = {"llama-3.1-70b": "llama-3.1-70b", "llama-2-70b": "bench/data/vidur_llama2_70b_config.json"}


def scenario(model: str) -> dict[str, Any]:
    ref = MODELS[model]
    return {
        "name": "vidur side by side",
        "model": ref if ref in ("llama-3.1-70b",) else str(ROOT / ref),
        "hardware": "h100-sxm",
        "engine": "vllm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 2, "tp": 2}},
        "precision": {"attention": "bf16", "kv_cache": "bf16", "dense": "bf16", "moe": "bf16"},
        "workload": {"isl": 1155, "osl": 211, "request_rate": 1.0},
        "runtime": {"max_prefill_tokens": 512},
        "simulation": {
            "requests": N_REQUESTS,
            "seed": 0,
            "max_running_requests": 128,
            "trace": {"path": str(REQUESTS_CSV), "format": "splitwise"},
        },
    }


def scenario_relative(model: str) -> dict[str, Any]:
    """The scenario as saved: paths relative to the repository root."""
    s = scenario(model)
    s["model"] = MODELS[model]
    s["simulation"]["trace"]["path"] = str(REQUESTS_CSV.relative_to(ROOT))
    return s


def bad_input(msg: str) -> None:
    """One line naming the field, exit 2."""
    print(msg, file=sys.stderr)
    sys.exit(2)


def kv_tokens(res: Any) -> int:
    """KV-cache tokens the instance holds (the simulator's capacity, `roofline.memory.plan_memory`)."""
    inst = res.deployment.pools[0].instance
    plan = plan_memory(inst, kv_needed_tokens=2 * inst.runtime.prefill_tokens_per_rank)
    return int(plan.kv_pool_bytes / plan.kv_bytes_per_token)


def ours_child(model: str) -> None:
    """Run our simulator once (in this process) and print its loop numbers as one JSON line."""
    res = resolve(parse_scenario(scenario(model)))
    c0, w0 = time.process_time(), time.perf_counter()
    result, summary = run_simulation(res, res.simulation)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    row = {
        "requests": int(summary["requests"]),
        "steps": len(result.steps),
        "prefill_only_steps": int((result.steps[:, 3] == 0).sum()),  # column 3: output tokens of the step
        "loop_cpu_s": cpu,
        "loop_wall_s": wall,
        "sim_time_s": summary["sim_time_s"],
        "model_calls": summary["model_calls"],
        "scheduler": [a for a in res.assumed if a.startswith("runtime.scheduler")],
        "ttft_p50_ms": summary["ttft_ms"]["p50"],
        "tpot_p50_ms": summary["tpot_ms"]["p50"],
        "kv_tokens": kv_tokens(res),
    }
    print("OURS_RESULT " + json.dumps(row))


def child(cmd: list[str], tag: str, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run one child process; its whole-process CPU (user + sys) and its JSON result line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(tag + " ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"{tag}: child failed (rc {proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}")
    row: dict[str, Any] = json.loads(lines[-1][len(tag) + 1 :])
    row["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row["process_wall_s"] = wall
    return row


def run_vidur(src: Path, python: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "requests.csv"
        env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(src), "VIDUR_DUMP": str(dump)}
        row = child([python, "-c", VIDUR_DRIVER, *VIDUR_ARGS], "VIDUR_RESULT", src, env)
        fresh = dump.read_text()
    if not REQUESTS_CSV.exists():
        REQUESTS_CSV.parent.mkdir(parents=True, exist_ok=True)
        REQUESTS_CSV.write_text(fresh)
    elif REQUESTS_CSV.read_text() != fresh:
        sys.exit(f"Vidur generated requests that differ from {REQUESTS_CSV.relative_to(ROOT)}; delete it to regenerate")
    return row


def run_ours(model: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return child([sys.executable, str(Path(__file__).resolve()), "--ours-child", model], "OURS_RESULT", ROOT, env)


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the timing fields over repetitions; the simulated counts must not vary."""
    out = dict(rows[0])
    for key in ("steps", "requests"):
        if len({r[key] for r in rows}) != 1:
            sys.exit(f"{key} differ between repetitions: {[r[key] for r in rows]}")
    for key in ("loop_cpu_s", "loop_wall_s", "process_cpu_s", "process_wall_s"):
        out[key] = statistics.median(r[key] for r in rows)
        out[key + "_all"] = [round(r[key], 3) for r in rows]
    out["steps_per_request"] = out["steps"] / out["requests"]
    out["us_per_step"] = out["loop_cpu_s"] / out["steps"] * 1e6
    out["ms_per_request"] = out["loop_cpu_s"] / out["requests"] * 1e3
    out["process_ms_per_request"] = out["process_cpu_s"] / out["requests"] * 1e3
    out["reps"] = len(rows)
    return out


def table(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| simulator | requests | steps | steps / request | loop CPU s | us / step | ms / request |"
        " process CPU s | process ms / request | KV tokens | simulated s | simulated ms / step | TTFT p50 s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        ttft = f"{r['ttft_p50_ms'] / 1e3:,.1f}" if "ttft_p50_ms" in r else "-"
        lines.append(
            f"| {name} | {r['requests']:,} | {r['steps']:,} | {r['steps_per_request']:.2f} | {r['loop_cpu_s']:.2f} |"
            f" {r['us_per_step']:.1f} | {r['ms_per_request']:.3f} | {r['process_cpu_s']:.1f} |"
            f" {r['process_ms_per_request']:.3f} | {r['kv_tokens']:,} | {r['sim_time_s']:,.0f} |"
            f" {r['sim_time_s'] / r['steps'] * 1e3:.1f} | {ttft} |"
        )
    return "\n".join(lines)


def ratios(vidur: dict[str, Any], ours: dict[str, Any]) -> dict[str, float]:
    return {
        "loop_per_request": vidur["ms_per_request"] / ours["ms_per_request"],
        "process_per_request": vidur["process_ms_per_request"] / ours["process_ms_per_request"],
        "per_step": vidur["us_per_step"] / ours["us_per_step"],
        "steps": ours["steps"] / vidur["steps"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cached", action="store_true", help="take Vidur's numbers from the saved JSON")
    ap.add_argument("--vidur-src", default=str(ROOT.parent / "vidur-src"))
    ap.add_argument("--vidur-python", default=str(ROOT.parent / "vidur-venv" / "bin" / "python"))
    ap.add_argument("--ours-child", choices=sorted(MODELS), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ours_child:
        ours_child(a.ours_child)
        return
    if a.reps < 1:
        bad_input("--reps: must be at least 1")
    if a.cached:
        if not OUT.exists():
            bad_input(f"--cached: {OUT.relative_to(ROOT)} does not exist; run once with Vidur")
        vidur = json.loads(OUT.read_text())["vidur"]
    elif not Path(a.vidur_python).exists() or not (Path(a.vidur_src) / "vidur").is_dir():
        bad_input(f"--vidur-src/--vidur-python: no Vidur at {a.vidur_src} with {a.vidur_python} (or use --cached)")
    vidur_rows: list[dict[str, Any]] = []
    ours_rows: dict[str, list[dict[str, Any]]] = {m: [] for m in MODELS}
    for i in range(a.reps):  # alternate the tools
        if not a.cached:
            vidur_rows.append(run_vidur(Path(a.vidur_src), a.vidur_python))
            print(f"rep {i + 1}: Vidur loop {vidur_rows[-1]['loop_cpu_s']:.2f} s CPU", file=sys.stderr)
        for m in MODELS:
            ours_rows[m].append(run_ours(m))
            print(f"rep {i + 1}: planner {m} loop {ours_rows[m][-1]['loop_cpu_s']:.2f} s CPU", file=sys.stderr)
    if not a.cached:
        vidur = median_row(vidur_rows)
    ours = {m: median_row(rows) for m, rows in ours_rows.items()}
    names = {"Vidur: Llama-2-70B, A100, Sarathi": vidur}
    names |= {f"planner: {m}, H100, vllm": ours[m] for m in MODELS}
    print(table(names))
    rat = {m: ratios(vidur, ours[m]) for m in MODELS}
    for m, r in rat.items():
        print(
            f"{m}: Vidur / planner loop CPU per request {r['loop_per_request']:.1f}x, whole process"
            f" {r['process_per_request']:.1f}x, per step {r['per_step']:.1f}x;"
            f" planner steps / Vidur steps {r['steps']:.2f}"
        )
    n_csv = len(REQUESTS_CSV.read_text().splitlines()) - 1
    data = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "requests_csv": str(REQUESTS_CSV.relative_to(ROOT)),
        "requests_in_csv": n_csv,
        "vidur_args": VIDUR_ARGS,
        "ours_scenarios": {m: scenario_relative(m) for m in MODELS},
        "vidur": vidur,
        "ours": ours,
        "ratios": rat,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_name(OUT.name + ".part")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(OUT)
    print(f"saved {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
