"""Sweep of the communication ops (`runtime.comm`) over message sizes and world sizes, one process
per GPU, writing a profile with provenance (`planner calibrate --ops comm`).

Each point is the median over repetitions of the slowest rank's time (a collective finishes when
its last rank does), after warm-up. Every op is timed eagerly and as CUDA-graph replays (as a
graph-decode engine runs it; `ms` is the replay where capture works, `ms_eager` the eager call,
whose host launch and sync costs are the harness's, not the link's); EP dispatch/combine use
runtime.comm's fixed-capacity path, beside the host-split reference (ep_*_host, eager).
NCCL on GPUs with NVLink multicast off (NCCL_NVLS_ENABLE=0);
gloo on the CPU, which only checks the harness: its times say nothing about GPUs.

Usage: python -m runtime.comm_sweep --out FILE [--worlds 2,4,8] [--backend nccl|gloo] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from collections.abc import Callable
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from runtime import comm

HIDDEN, EXPERTS, TOPK, SKEW = 7168, 256, 8, 0.5  # DeepSeek-V3 routing; SKEW gives max/mean ~1.5-2
FULL = {
    "all_reduce_bytes": [2**k for k in range(16, 29, 2)],  # 64 KB .. 256 MB
    "all_gather_bytes": [2**k for k in range(16, 27, 2)],  # per rank, 64 KB .. 64 MB
    "kv_bytes": [2**k for k in range(20, 29, 2)],  # 1 MB .. 256 MB
    "ep_tokens": [16, 64, 128, 256, 512, 1024, 2048, 4096],  # per rank
    "warmup": 3,
    "reps": 10,
}
QUICK = {
    "all_reduce_bytes": [2**16],
    "all_gather_bytes": [2**16],
    "kv_bytes": [2**16],
    "ep_tokens": [16],
    "warmup": 1,
    "reps": 2,
}


def _time(fn: Callable[[], object], dev: torch.device, warmup: int, reps: int) -> float:
    """Median over reps of the slowest rank's wall time for one call, in ms."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        dist.barrier()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t = time.perf_counter()
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        mine = torch.tensor([time.perf_counter() - t], dtype=torch.float64, device=dev)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        samples.append(float(mine) * 1e3)
    return statistics.median(samples)


def _graphed(fn: Callable[[], object], dev: torch.device) -> Callable[[], object] | None:
    """`fn` captured in a CUDA graph (as a graph-decode engine runs it), or None on the CPU."""
    if dev.type != "cuda":
        return None
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream(dev).wait_stream(side)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            fn()
    except RuntimeError as exc:  # a collective that cannot be captured is timed eagerly, and says so
        print(f"rank {dist.get_rank()}: graph capture failed ({exc}); eager timing only", flush=True)
        torch.cuda.synchronize(dev)
        return None
    return g.replay


def _slowest(v: float, dev: torch.device) -> float:
    t = torch.tensor([v], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _timed(fn: Callable[[], object], dev: torch.device, w: int, r: int) -> dict[str, Any]:
    """`ms`: CUDA-graph replay where the op captures (what a graph-launched step pays), else eager;
    `ms_eager`: the eager call, host launch and synchronisation included."""
    eager = _time(fn, dev, w, r)
    replay = _graphed(fn, dev)
    ms = _time(replay, dev, w, r) if replay else eager
    return {"ms": ms, "ms_eager": eager, "timing": "cuda-graph" if replay else "eager"}


def _ep_points(
    x: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, fp8: bool, dev: torch.device, w: int, r: int
) -> list[dict[str, Any]]:
    """Device-side dispatch/combine, eager and as CUDA-graph replays, and the host-split reference
    (bf16 only), with the rows and bytes that crossed the links."""
    tokens, rank, world = x.shape[0], dist.get_rank(), dist.get_world_size()
    d = comm.dispatch(x, ids, wts, EXPERTS, fp8=fp8)
    y = d.hidden_states().contiguous()
    disp, comb = partial(comm.dispatch, x, ids, wts, EXPERTS, fp8=fp8), partial(comm.combine, y, d)
    per_src = d.valid.view(world, d.capacity + 1).sum(1)
    rb = comm._sections(HIDDEN, TOPK, fp8)[-1]
    common = {
        "tokens_per_rank": tokens,
        "hidden": HIDDEN,
        "topk": TOPK,
        "payload": "fp8" if fp8 else "bf16",
        "capacity": d.capacity,
        "row_bytes": rb,
        "max_remote_rows": int(_slowest(float(per_src.sum() - per_src[rank]), dev)),
        "padded_wire_bytes": (world - 1) * (d.capacity + 1) * rb,
        "imbalance": comm.load_imbalance(ids, EXPERTS),
    }
    pts = []
    dev_ops: tuple[tuple[str, Callable[[], object]], ...] = (("ep_dispatch", disp), ("ep_combine", comb))
    for op, fn in dev_ops:
        pts.append({"op": op, **common, **_timed(fn, dev, w, r)})
    if not fp8:
        h = comm.dispatch_host(x, ids, wts, EXPERTS)
        # check: both paths give the same MoE sum (each expert the identity) on this GPU
        got = comm.combine((d.hidden_states() * d.local_w.sum(1, keepdim=True)).to(x.dtype), d).float()
        ref = comm.combine_host((h.x * h.local_w.sum(1, keepdim=True)).to(x.dtype), h, tokens).float()
        err = float(((got - ref).abs().max() / ref.abs().max().clamp(min=1e-6)).item())
        for p in pts:
            p["max_rel_diff_vs_host_split"] = _slowest(err, dev)
        if dev.type == "cuda":
            pts += _p2p_points(x, ids, wts, ref, common, dev, w, r)
        hd = partial(comm.dispatch_host, x, ids, wts, EXPERTS)
        hc = partial(comm.combine_host, h.x, h, tokens)
        host: tuple[tuple[str, Callable[[], object]], ...] = (("ep_dispatch_host", hd), ("ep_combine_host", hc))
        for op, fn in host:
            pts.append({"op": op, **common, "ms": _time(fn, dev, w, r), "timing": "eager (host-split reference)"})
    return pts


_PEERS: dict[int, Any] = {}


def _p2p_points(x: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, ref: torch.Tensor, common: dict[str, Any],
                dev: torch.device, w: int, r: int) -> list[dict[str, Any]]:  # fmt: skip
    """The peer-to-peer path (runtime.comm_p2p, bf16), checked against the host-split reference's
    MoE sum; a failure (no symmetric memory here, a capture that fails) is recorded, not raised."""
    from runtime.comm_p2p import PeerBuffers  # noqa: PLC0415

    tokens = x.shape[0]
    try:
        if not _PEERS:  # one rendezvous per worker, sized for the largest point (collective: every rank here)
            _PEERS[0] = PeerBuffers(max(map(int, FULL["ep_tokens"])), HIDDEN, TOPK)  # type: ignore[call-overload]
        pb = _PEERS[0]
        d = pb.dispatch(x, ids, wts, EXPERTS, tokens)
        got = pb.combine((d.hidden_states() * d.local_w.sum(1, keepdim=True)).to(x.dtype), d).float()
        err = _slowest(float(((got - ref).abs().max() / ref.abs().max().clamp(min=1e-6)).item()), dev)
        y = d.hidden_states().contiguous()  # a copy: the receive buffer is rewritten by each dispatch
        ops = (("ep_dispatch_p2p", partial(pb.dispatch, x, ids, wts, EXPERTS, tokens)),
               ("ep_combine_p2p", partial(pb.combine, y, d)))  # fmt: skip
        return [{"op": op, **common, **_timed(fn, dev, w, r), "max_rel_diff_vs_host_split": err} for op, fn in ops]
    except Exception as exc:  # recorded in the profile; the NCCL path still runs
        return [{"op": "ep_dispatch_p2p", **common, "error": repr(exc)[:300]}]


def _points(world: int, dev: torch.device, grid: dict[str, Any]) -> list[dict[str, Any]]:
    w, r = grid["warmup"], grid["reps"]
    dt = torch.bfloat16
    pts: list[dict[str, Any]] = []
    for b in grid["all_reduce_bytes"]:
        x = torch.ones(b // 2, dtype=dt, device=dev)
        pts.append({"op": "all_reduce", "bytes": b, **_timed(partial(comm.all_reduce, x), dev, w, r)})
    for b in grid["all_gather_bytes"]:
        x = torch.ones(b // 2, dtype=dt, device=dev)
        pts.append({"op": "all_gather", "bytes": b, **_timed(partial(comm.all_gather, x), dev, w, r)})
    for b in grid["kv_bytes"]:
        kv = torch.ones(b // 2, dtype=dt, device=dev)
        pts.append({"op": "kv_transfer", "bytes": b, **_timed(partial(comm.kv_transfer, kv, 0, 1), dev, w, r)})
    gen = torch.Generator().manual_seed(dist.get_rank())
    for tokens in grid["ep_tokens"]:
        ids, wts = comm.route(tokens, EXPERTS, TOPK, SKEW, gen)
        ids, wts = ids.to(dev), wts.to(dev)  # routing lives on the GPU, as an engine's router output does
        x = torch.randn(tokens, HIDDEN, generator=gen).to(dt).to(dev)
        for fp8 in (False, True):
            pts += _ep_points(x, ids, wts, fp8, dev, w, r)
    for p in pts:
        p["world"] = world
    return pts


def _worker(rank: int, world: int, port: int, backend: str, grid: dict[str, Any], q: Any) -> None:
    for var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        os.environ[var] = "0" if var == "NCCL_NVLS_ENABLE" else "1"  # no NVLink multicast, ever
    dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        pts = _points(world, dev, grid)
        if rank == 0:
            q.put(pts)
    except Exception as exc:
        q.put(f"rank {rank}: {exc!r}")
        raise
    finally:
        dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def provenance(backend: str) -> dict[str, Any]:
    if backend == "nccl":
        from runtime.sweep import provenance as gpu_provenance  # noqa: PLC0415

        prov = gpu_provenance()
        prov["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        prov["gpus"] = torch.cuda.device_count()
        prov["nvls"] = "off (NCCL_NVLS_ENABLE=0)"
        return prov
    return {
        "device": "cpu (gloo: checks the harness only)",
        "torch": torch.__version__,
        "date": date.today().isoformat(),
    }


def default_worlds(gpus: int) -> tuple[int, ...]:
    """Powers of two from 2 up to the GPUs here, and all of them: 2, 4, 8 on an 8-GPU box, 2 and 3
    on a 3-GPU one."""
    pows = [2**k for k in range(1, max(gpus, 2).bit_length()) if 2**k <= gpus]
    return tuple(sorted({*pows, gpus})) if gpus >= 2 else ()


def run_comm_sweep(
    out: Path, worlds: tuple[int, ...] | None = None, backend: str = "nccl", quick: bool = False, log: Any = print
) -> dict[str, Any]:
    """Run every world size that fits the GPUs here (all of them on gloo) and write the profile;
    without `worlds`, `default_worlds` of this machine's GPU count."""
    if worlds is None:
        worlds = default_worlds(torch.cuda.device_count()) if backend == "nccl" else (2,)
    have = torch.cuda.device_count() if backend == "nccl" else max(worlds, default=0)
    runnable = [w for w in worlds if 2 <= w <= have]
    if not runnable:
        raise RuntimeError(f"comm sweep needs at least 2 GPUs for NCCL; this machine has {have}")
    grid = QUICK if quick else FULL
    ctx = mp.get_context("spawn")
    points: list[dict[str, Any]] = []
    for world in runnable:
        t = time.perf_counter()
        q = ctx.Queue()
        port = _port()
        procs = [ctx.Process(target=_worker, args=(r, world, port, backend, grid, q)) for r in range(world)]
        for p in procs:
            p.start()
        got = q.get(timeout=900)
        for p in procs:
            p.join(timeout=120)
        if isinstance(got, str) or any(p.exitcode != 0 for p in procs):
            raise RuntimeError(
                f"comm sweep at world {world} failed: {got if isinstance(got, str) else 'a rank exited'}"
            )
        points += got
        log(f"world {world}: {len(got)} points in {time.perf_counter() - t:.0f} s")
    profile = {"provenance": {**provenance(backend), "backend": backend, "worlds": runnable}, "points": points}
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(profile, indent=1))
    tmp.replace(out)  # never a half-written profile
    return profile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--worlds", default="", help="comma-separated; default: 2, 4, 8, ... up to the GPUs here")
    ap.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    worlds = tuple(int(w) for w in a.worlds.split(",")) if a.worlds else None
    run_comm_sweep(a.out, worlds, a.backend, a.quick)


if __name__ == "__main__":
    main()
