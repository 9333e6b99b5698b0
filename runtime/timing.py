"""Timing of GPU ops: warm-up, CUDA-graph replay (as a serving engine runs decode), a cold L2
before each sample, CUDA events, every sample in milliseconds and the median.

Follows flashinfer.testing.bench_gpu_time_with_cuda_event: the op is captured once in a CUDA
graph and replayed; a buffer larger than L2 is overwritten before each sample so weights and KV
come from HBM, as they do in a real step.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # > 60 MB L2 of the H200, > 126 MB of Blackwell


@dataclass(frozen=True, slots=True)
class Timing:
    samples_ms: tuple[float, ...]
    graph: bool

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)


_flush: torch.Tensor | None = None


def _flush_l2() -> None:
    global _flush  # noqa: PLW0603  (one lazily allocated scratch buffer per process)
    if _flush is None:
        _flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    _flush.zero_()


def time_op(
    fn: Callable[[], object], reps: int = 20, warmup: int = 3, graph: bool = True, cold_l2: bool = True
) -> Timing:
    """Median-ready samples of `fn` (no arguments; it must be re-runnable on the same inputs)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    run: Callable[[], object] = fn
    if graph:
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                fn()
            run = g.replay
        except RuntimeError:  # an op that cannot be captured is timed eagerly, and says so
            graph = False
            torch.cuda.synchronize()
    samples = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        if cold_l2:
            _flush_l2()
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return Timing(tuple(samples), graph)
