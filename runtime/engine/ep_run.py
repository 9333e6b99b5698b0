"""Run `runtime.engine.ep` (DP-attention + EP over `world` GPUs) on closed-loop workloads and write
anchors (shared/validation format) for the same deployment, so `planner validate` compares the
simulator with it. Workers are built and their decode graphs captured once, then run one workload
after another; the parent gathers every rank's finished requests and measures them together.

Usage (on `world` GPUs): python -m runtime.engine.ep_run --out DIR [--world 2] [--quick]
"""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
import yaml

from runtime.engine.anchors import RUNTIME
from runtime.engine.ep import worker
from runtime.engine.ep_anchors import write_ep
from runtime.engine.pd_run import WORKLOADS  # the PD engine's workloads, the same for EP
from runtime.engine.run import measure
from runtime.engine.serve import Req


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(report: Any, timeout: float) -> tuple[str, int, Any]:
    kind, rank, body = report.get(timeout=timeout)
    if kind == "error":
        raise RuntimeError(f"rank {rank}: {body}")
    return kind, rank, body


def serve(world: int, workloads: list[tuple[int, int, int, int]], layers: int, log: Any = print,
          **cfg_extra: Any) -> list[dict[str, Any]]:  # fmt: skip
    """Run the workloads on `world` EP workers; `cfg_extra` (device, engine, timeout_s) lets the
    CPU tests swap in gloo and a fake engine."""
    bad = [w for w in workloads if w[3] % w[0]]
    if bad:
        raise ValueError(f"workloads {bad}: requests must be a multiple of concurrency")
    budget = yaml.safe_load(RUNTIME.read_text())["max_prefill_tokens"]
    cfg = {"world": world, "layers": layers, "budget": budget, "workloads": workloads, "device": "cuda"}
    cfg |= {"max_batch": bucket_max(workloads, world), **cfg_extra}
    if cfg["device"] == "cuda" and torch.cuda.device_count() < world:
        raise RuntimeError(f"EP engine needs {world} GPUs; this machine has {torch.cuda.device_count()}")
    ctx = mp.get_context("spawn")
    port, report = _port(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, port, cfg, report)) for r in range(world)]
    for p in procs:
        p.start()
    t, timeout = time.perf_counter(), cfg.get("timeout_s", 900)
    try:
        for _ in procs:
            _get(report, timeout)
        log(f"{world} EP workers ready in {time.perf_counter() - t:.0f} s")
        results = []
        for c, isl, osl, n in workloads:
            t, done = time.perf_counter(), []
            for _ in procs:
                done += [Req(-1, isl, o, a, first_token=f, finish=e) for a, f, e, o in _get(report, timeout)[2]]
            m = measure(done)
            results.append({"concurrency": c, "isl": isl, "osl": osl, "requests": n, **m})
            took = time.perf_counter() - t
            log(f"C={c} isl={isl} osl={osl}: TTFT {m['ttft_ms']:.1f} ms TPOT {m['tpot_ms']:.2f} ms "
                f"E2E {m['e2e_ms']:.0f} ms {m['output_tok_s']:.0f} tok/s ({took:.0f} s)")  # fmt: skip
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    return results


def bucket_max(workloads: list[tuple[int, int, int, int]], world: int) -> int:
    """The largest decode batch any rank runs: its share of the largest concurrency."""
    return max(-(-c // world) for c, *_ in workloads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--quick", action="store_true", help="first two workloads only")
    ap.add_argument(
        "--dispatch", choices=("nccl", "p2p"), default="nccl", help="EP transport (runtime.comm or comm_p2p)"
    )
    ap.add_argument("--workloads", type=int, default=len(WORKLOADS), help="run the first N workloads")
    a = ap.parse_args()
    for field in ("world", "layers", "workloads"):
        if getattr(a, field) < 1:
            ap.error(f"--{field} must be at least 1")  # one line, exit 2
    from runtime.sweep import provenance  # noqa: PLC0415

    prov = provenance()
    work = WORKLOADS[: 2 if a.quick else a.workloads]
    results = serve(a.world, work, a.layers, lambda s: print(s, flush=True), dispatch=a.dispatch)
    prov |= {"gpus": a.world, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "dispatch": a.dispatch}
    write_ep(a.out, results, prov, a.world)


if __name__ == "__main__":
    main()
