"""Expert-parallel serving on `world` GPUs of one host, as SGLang's DP-attention + EP runs: one
process per GPU, each an instance of `runtime.engine.serve.Engine` on `runtime.engine.ep_model`
(attention data-parallel: every rank has its own requests, KV pages and scheduler; routed experts
split over the ranks, with a dispatch and a combine in every MoE layer).

The ranks step in lockstep, since every MoE layer is a collective: before each step they agree
(one max-all-reduce of three integers on a CPU gloo group) on what to run. If any rank has a
prefill chunk, all run a prefill step with the largest token count as the dispatch capacity (a
rank with none serves the others' tokens through its experts: `EPModel.idle`); otherwise all run
a CUDA-graph decode step in the bucket of the largest running batch (a rank with no running
request replays it on padding). Prefill goes first, as in the single-GPU engine. Each rank serves
its share of the closed-loop clients (client j on rank j mod world; requests split evenly).
What this does not do: mixed prefill/decode steps, overlapping dispatch with compute, expert load
balancing, or several nodes.
"""

from __future__ import annotations

import importlib
import math
import time
from collections import deque
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.model import KV_LORA, ROPE
from runtime.engine.serve import BUCKETS, PAGE, Engine, Req, take_chunks

clock = time.perf_counter  # CLOCK_MONOTONIC: one clock for every process of the host


class EPEngine(Engine):
    """Engine whose model is an `EPModel`: prefill and decode steps with an agreed capacity."""

    def _graph(self, b: int, max_pages: int) -> tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor], object]:
        self.m.step["cap"] = b  # type: ignore[attr-defined]  # baked into the captured dispatch
        return super()._graph(b, max_pages)

    def capture(self, max_batch: int, max_pages: int) -> None:
        """Capture every bucket's decode graph, in the same order on every rank (the warm-up
        replays before each capture run collectives)."""
        for b in BUCKETS:
            if b <= bucket(max_batch):  # the bucket a batch of max_batch rounds up to included
                self._graph(b, max_pages)

    def prefill_ep(self, chunks: list[tuple[Req, int]], cap: int) -> None:
        self.m.step["cap"] = cap  # type: ignore[attr-defined]
        if chunks:
            self.prefill_step(chunks)
        else:
            self.m.idle(cap)  # type: ignore[attr-defined]
            torch.cuda.synchronize()


def build_engine(cfg: dict[str, Any]) -> EPEngine:
    """This rank's engine: the EP model (32 local routed experts of 32 x world) and its KV pool."""
    from runtime.engine.ep_model import EPModel  # noqa: PLC0415

    model = EPModel(cfg["world"], layers=cfg["layers"])
    if cfg.get("dispatch") == "p2p":
        from runtime.comm_p2p import PeerBuffers  # noqa: PLC0415

        model.step["peers"] = PeerBuffers(cfg["budget"], model.layers[-1].gate.shape[1], cfg["world"])
    free, _ = torch.cuda.mem_get_info()
    per_page = 2 * len(model.layers) * PAGE * (KV_LORA + ROPE)
    return EPEngine(model, pages=int(0.8 * (free - 12e9) / per_page), budget=cfg["budget"])


def bucket(n: int) -> int:
    return next(b for b in BUCKETS if b >= n)


def serve_rank(eng: Any, group: Any, clients: int, isl: int, osl: int, requests: int, t0: float) -> list[Req]:
    """This rank's closed loop (`clients` clients, `requests` in all), stepping in lockstep with
    the other ranks; times are seconds after `t0`."""
    max_pages = len(eng.free) + 1 if not hasattr(eng, "max_pages") else eng.max_pages
    need = math.ceil((isl + osl) / PAGE)
    waiting: deque[Req] = deque(Req(i, isl, osl, 0.0) for i in range(min(clients, requests)))
    issued, running, done = len(waiting), [], []
    while True:
        chunks = take_chunks(waiting, eng.free, need, eng.budget)
        vote = torch.tensor([sum(n for _, n in chunks), len(running), requests - len(done)])
        dist.all_reduce(vote, op=dist.ReduceOp.MAX, group=group)
        tokens, decoding, left = vote.tolist()
        if not left:
            return done
        if tokens:
            eng.prefill_ep(chunks, tokens)
            now = clock() - t0
            for r, _ in chunks:
                if r.done_prefill == r.isl:
                    r.first_token, r.generated = now, 1
                    running.append(r)
        elif decoding:
            eng.decode(running, max_pages, bucket(decoding))
            now = clock() - t0
        else:
            raise RuntimeError("nothing to run on any rank: a KV pool cannot hold one request")
        for r in [r for r in running if r.generated >= r.osl]:
            r.finish = now
            running.remove(r)
            eng.free.extend(r.pages)
            done.append(r)
            if issued < requests:
                waiting.append(Req(issued, isl, osl, now))
                issued += 1


def share(world: int, rank: int, concurrency: int, requests: int) -> tuple[int, int]:
    """(clients, requests) of `rank`: client j lives on rank j mod world, each issues requests /
    concurrency requests (the workloads keep requests a multiple of concurrency)."""
    clients = concurrency // world + (rank < concurrency % world)
    return clients, clients * requests // concurrency


def worker(rank: int, world: int, port: int, cfg: dict[str, Any], report: Any) -> None:
    """One rank: build the engine (cfg["engine"]: "module:function", so the CPU tests run the same
    loop on a fake engine over gloo), capture the graphs, then serve cfg["workloads"] in turn and
    report each one's finished requests (absolute clock times)."""
    import os  # noqa: PLC0415

    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    try:
        cuda = cfg["device"] == "cuda"
        if cuda:
            torch.cuda.set_device(rank)
        backend = "nccl" if cuda else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        group = dist.new_group(backend="gloo") if cuda else None
        torch.manual_seed(0)  # identical attention replicas; experts differ only by rank in real EP
        module, name = cfg.get("engine", "runtime.engine.ep:build_engine").split(":")
        eng = getattr(importlib.import_module(module), name)(cfg)
        max_pages = len(eng.free) + 1
        eng.max_pages = max_pages
        eng.capture(cfg["max_batch"], max_pages)
        report.put(("ready", rank, None))
        for c, isl, osl, n in cfg["workloads"]:
            clients, reqs = share(world, rank, c, n)
            dist.barrier(group=group)
            t0 = clock()
            done = serve_rank(eng, group, clients, isl, osl, reqs, t0)
            report.put(("done", rank, [(r.arrival + t0, r.first_token + t0, r.finish + t0, r.osl) for r in done]))
        dist.destroy_process_group()
    except Exception as exc:  # tell the parent instead of leaving it waiting
        report.put(("error", rank, repr(exc)))
        raise
