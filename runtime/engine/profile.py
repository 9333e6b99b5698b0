"""Measure the engine's own costs that the step model needs as parameters: kernels per layer
(dense and MoE; decode and prefill) counted with torch.profiler, and the host time per step that
the GPU waits for (metadata planning, input copies, the sync that reads the next tokens); with
`--times`, GPU time per kernel family (GEMM, attention, other) of prefill steps per layer.
Decode steps of the whole engine: runtime.engine.decode_profile.

Usage (on a GPU): python -m runtime.engine.profile OUT.json [--times]"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from runtime.engine.model import Model
from runtime.engine.serve import PAGE, Engine, Req
from runtime.sweep import provenance


def kernels(fn) -> int:  # type: ignore[no-untyped-def]
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def counts(layers: int, dense: int) -> dict[str, int]:
    eng = Engine(Model(layers=layers, dense_layers=dense), pages=4096)
    reqs = [Req(i, 256, 8, 0.0) for i in range(4)]
    for r in reqs:
        r.pages = [eng.free.popleft() for _ in range(5)]
    eng.prefill_step([(r, 256) for r in reqs])
    for r in reqs:
        r.generated = 1
    _, st, wrapper = eng._graph(4, 4096)
    return {
        "decode": kernels(lambda: eng._decode_body(st, wrapper)),
        "prefill": kernels(
            lambda: eng.prefill_step([(Req(9, 128, 8, 0.0, pages=[eng.free.popleft(), eng.free.popleft()]), 128)])
        ),
    }


def host_overhead(batch: int) -> float:
    """Wall time of Engine.decode minus the graph replay's GPU time, in microseconds."""
    eng = Engine(Model(layers=2, dense_layers=0), pages=8192)
    reqs = []
    for i in range(batch):
        r = Req(i, 512, 1000, 0.0, pages=[eng.free.popleft() for _ in range(24)])
        r.done_prefill, r.generated = 512, 1
        reqs.append(r)
    eng.decode(reqs, 8192)
    g = eng.graphs[next(b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b >= batch)][0]
    walls, gpus = [], []
    for _ in range(20):
        torch.cuda.synchronize()
        t = time.perf_counter()
        eng.decode(reqs, 8192)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        gpus.append(s.elapsed_time(e) * 1e-3)
    return (statistics.median(walls) - statistics.median(gpus)) * 1e6


def _family(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("prefill", "mla", "attention", "fmha")):
        return "attention"
    if any(k in n for k in ("gemm", "nvjet", "xmma", "cutlass", "matmul", "scaled_mm")):
        return "gemm"
    return "other"


def step_times(layers: int, dense: int) -> dict[str, dict[str, float]]:
    """GPU time per kernel family (ms) and the step's wall time for prefill batches the engine
    anchors run: 16 x 512, 1 x 8192, 1 x 512 tokens (eager, as the engine runs them)."""
    eng = Engine(Model(layers=layers, dense_layers=dense), pages=4096)
    out: dict[str, dict[str, float]] = {}
    for name, n, isl in (("16x512", 16, 512), ("1x8192", 1, 8192), ("1x512", 1, 512)):

        def run(n: int = n, isl: int = isl) -> None:
            reqs = [Req(i, isl, 8, 0.0, pages=list(range(isl // PAGE + 1))) for i in range(n)]
            eng.prefill_step([(r, isl) for r in reqs])

        run()
        torch.cuda.synchronize()
        t = time.perf_counter()
        run()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t) * 1e3
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        fam: dict[str, float] = {"wall": wall, "kernels": 0.0}
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                ms = e.self_device_time_total * 1e-3
                fam[_family(e.key)] = fam.get(_family(e.key), 0.0) + ms
                fam["kernels"] += ms
                fam[e.key[:80]] = ms
        out[name] = fam
    return out


def per_layer_times() -> dict[str, object]:
    """Per MoE layer = 2 MoE layers - 1; outside layers = 1 MoE layer - per layer; dense alike."""
    one_dense, one_moe, two_moe = step_times(1, 1), step_times(1, 0), step_times(2, 0)
    res: dict[str, object] = {}
    for case in two_moe:
        keys = set(two_moe[case]) | set(one_moe[case])
        moe = {k: two_moe[case].get(k, 0.0) - one_moe[case].get(k, 0.0) for k in keys}
        outside = {k: one_moe[case].get(k, 0.0) - moe[k] for k in keys}
        dense_l = {k: one_dense[case].get(k, 0.0) - outside.get(k, 0.0) for k in set(one_dense[case]) | keys}
        top = lambda d: dict(sorted(((k, round(v, 4)) for k, v in d.items()), key=lambda kv: -kv[1])[:30])  # noqa: E731
        res[case] = {"moe_layer": top(moe), "dense_layer": top(dense_l), "outside_layers": top(outside)}
    return res


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[2] == "--times":
        result = {"prefill_ms": per_layer_times(), "provenance": provenance()}
        print(json.dumps(result, indent=1))
        Path(sys.argv[1]).write_text(json.dumps(result, indent=1))
        return
    one_dense, one_moe, two_moe = counts(1, 1), counts(1, 0), counts(2, 0)
    moe = two_moe["decode"] - one_moe["decode"]
    outside = one_moe["decode"] - moe
    result = {
        "provenance": provenance(),
        "decode_kernels_moe_layer": moe,
        "decode_kernels_dense_layer": one_dense["decode"] - outside,
        "decode_kernels_outside_layers": outside,
        "prefill_kernels_moe_layer": two_moe["prefill"] - one_moe["prefill"],
        "raw": {"1 dense": one_dense, "1 moe": one_moe, "2 moe": two_moe},
        "host_overhead_us": {b: host_overhead(b) for b in (1, 16, 64, 256)},
    }
    print(json.dumps(result, indent=1))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
