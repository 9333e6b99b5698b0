"""Run `runtime.engine.pd` (P prefill + D decode GPUs) on closed-loop workloads, report TTFT split
into prefill queue, prefill, transfer and first decode step, and write anchors (shared/validation
format) for the same PD deployment, so `planner validate` compares the simulator with it.

The parent process is the clients: it issues the first `concurrency` requests at t=0 and a new one
whenever a request finishes; workers run on their GPUs, one process each, through one workload
after another (the model is built and the decode graphs captured once).

Usage (on P + D GPUs): python -m runtime.engine.pd_run --out DIR [--prefill 1] [--decode 1] [--quick]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
import yaml

from runtime.engine.anchors import RUNTIME, WARMUP, pd_deployment, write
from runtime.engine.pd import clock, decode_worker, prefill_worker

# (concurrency, input tokens, output tokens, requests): concurrency 1..256, inputs 512..8k
WORKLOADS = [
    (1, 512, 128, 6),
    (8, 2048, 128, 24),
    (4, 8192, 128, 12),
    (32, 1024, 128, 64),
    (64, 512, 128, 128),
    (256, 512, 64, 512),
]
Record = tuple[int, int, int, float, float, float, float, float, float]  # see pd.decode_worker's report


def measure(done: list[Record], warmup: float = WARMUP) -> dict[str, float]:
    """Means over requests after the first `warmup` share of completions (ramp-up left out)."""
    recs = sorted(done, key=lambda r: r[8])[int(len(done) * warmup) :]
    mean = statistics.mean
    span = recs[-1][8] - min(r[3] for r in recs)
    return {
        "ttft_ms": 1e3 * mean(r[6] - r[3] for r in recs),
        "tpot_ms": 1e3 * mean((r[8] - r[6]) / (r[2] - 1) for r in recs),
        "e2e_ms": 1e3 * mean(r[8] - r[3] for r in recs),
        "output_tok_s": sum(r[2] for r in recs) / span,
        "ttft_queue_ms": 1e3 * mean(r[4] - r[3] for r in recs),
        "ttft_prefill_ms": 1e3 * mean(r[5] - r[4] for r in recs),
        "ttft_transfer_ms": 1e3 * mean(r[6] - r[5] for r in recs),
        "first_decode_step_ms": 1e3 * mean(r[7] - r[6] for r in recs),
    }


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(
    prefill: int,
    decode: int,
    workloads: list[tuple[int, int, int, int]],
    layers: int,
    log: Any = print,
    **cfg_extra: Any,
) -> list[dict[str, Any]]:
    """Run the workloads one after another on P + D workers; `cfg_extra` (device, engine) lets the
    CPU tests swap in gloo and a fake engine."""
    world = prefill + decode
    budget = yaml.safe_load(RUNTIME.read_text())["max_prefill_tokens"]
    cfg = {"layers": layers, "budget": budget, "prefill": prefill, "max_batch": max(w[0] for w in workloads)}
    cfg |= {"device": "cuda", **cfg_extra}
    if cfg["device"] == "cuda" and torch.cuda.device_count() < world:
        raise RuntimeError(f"PD engine needs {world} GPUs; this machine has {torch.cuda.device_count()}")
    ctx = mp.get_context("spawn")
    port, report = _port(), ctx.Queue()
    inboxes, ctrls = [ctx.Queue() for _ in range(prefill)], [ctx.Queue() for _ in range(decode)]
    procs = [ctx.Process(target=prefill_worker, args=(r, world, port, cfg, inboxes[r], ctrls, report))
             for r in range(prefill)]  # fmt: skip
    procs += [ctx.Process(target=decode_worker, args=(prefill + j, world, port, cfg, ctrls[j], report))
              for j in range(decode)]  # fmt: skip
    for p in procs:
        p.start()
    t = time.perf_counter()
    for _ in procs:
        kind, _rank = report.get(timeout=cfg.get("timeout_s", 900))
        assert kind == "ready", kind
    log(f"{world} workers ready in {time.perf_counter() - t:.0f} s")
    rid, results = 0, []
    for c, isl, osl, n in workloads:
        t, done, issued = time.perf_counter(), [], 0
        t0 = clock()
        for _ in range(min(c, n)):
            inboxes[rid % prefill].put((rid, isl, osl, t0, prefill + rid % decode))
            rid, issued = rid + 1, issued + 1
        while len(done) < n:
            kind, rec = report.get(timeout=cfg.get("timeout_s", 600))
            assert kind == "done", kind
            done.append(rec)
            if issued < n:  # a client sends its next request as soon as the last one finishes
                inboxes[rid % prefill].put((rid, isl, osl, rec[8], prefill + rid % decode))
                rid, issued = rid + 1, issued + 1
        m = measure(done)
        results.append({"concurrency": c, "isl": isl, "osl": osl, "requests": n, **m})
        log(f"C={c} isl={isl} osl={osl}: TTFT {m['ttft_ms']:.1f} ms (queue {m['ttft_queue_ms']:.1f}, prefill "
            f"{m['ttft_prefill_ms']:.1f}, transfer {m['ttft_transfer_ms']:.2f}; first decode step "
            f"{m['first_decode_step_ms']:.1f}) TPOT {m['tpot_ms']:.2f} ms E2E {m['e2e_ms']:.0f} ms "
            f"{m['output_tok_s']:.0f} tok/s ({time.perf_counter() - t:.0f} s)")  # fmt: skip
    for q in inboxes + ctrls:
        q.put(None)
    for p in procs:
        p.join(timeout=120)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--prefill", type=int, default=1)
    ap.add_argument("--decode", type=int, default=1)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--quick", action="store_true", help="first two workloads only")
    ap.add_argument("--workloads", type=int, default=len(WORKLOADS), help="run the first N workloads")
    a = ap.parse_args()
    for field in ("prefill", "decode", "layers", "workloads"):
        if getattr(a, field) < 1:
            ap.error(f"--{field} must be at least 1")  # one line, exit 2
    from runtime.sweep import provenance  # noqa: PLC0415

    prov = provenance()
    results = serve(
        a.prefill, a.decode, WORKLOADS[: 2 if a.quick else a.workloads], a.layers, lambda s: print(s, flush=True)
    )
    prov["gpus"] = a.prefill + a.decode
    prov["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    tag = f"engine-pd-{a.prefill}p{a.decode}d-h200"
    write(a.out, results, prov, name="engine_pd", deployment=pd_deployment(a.prefill, a.decode), tag=tag)


if __name__ == "__main__":
    main()
