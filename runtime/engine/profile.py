"""Measure the engine's own costs that the step model needs as parameters: kernels per layer
(dense and MoE; decode and prefill) counted with torch.profiler, and the host time per step that
the GPU waits for (metadata planning, input copies, the sync that reads the next tokens)."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from runtime.engine.model import Model
from runtime.engine.serve import Engine, Req


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


def main() -> None:
    one_dense, one_moe, two_moe = counts(1, 1), counts(1, 0), counts(2, 0)
    moe = two_moe["decode"] - one_moe["decode"]
    outside = one_moe["decode"] - moe
    result = {
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
