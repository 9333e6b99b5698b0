"""Disaggregated prefill/decode on several GPUs of one host: P prefill instances and D decode
instances of `runtime.engine` (one GPU each; GPUs 0..P-1 prefill, P..P+D-1 decode), serving
closed-loop workloads as SGLang's PD disaggregation does.

A prefill instance batches whole prompts up to its token budget (longer ones chunked), runs them
eagerly, and produces each request's first token; as soon as a prompt is done its KV pages are
packed and sent to the request's decode instance with NCCL point-to-point over NVLink (isend; the
prefill carries on). A decode instance posts the matching receive once it has pages for the whole
request, keeps replaying its CUDA-graph decode steps while the transfer runs on NCCL's stream,
and adds the request to the next step once its pages land. Requests go round-robin to instances.

Per request it records arrival, prefill start and end, KV landed (the first token is delivered
with it, as SGLang and the simulator count TTFT), end of its first decode step, and finish; the
parent reports TTFT split into prefill queue, prefill, transfer and first decode step.
What this does not do: chunked-prefill interleaving on decode, prefix caching, preemption,
transfers over RDMA, or several GPUs per instance.

Usage (on P + D GPUs): python -m runtime.engine.pd --out DIR [--prefill 1] [--decode 1] [--quick]
"""

from __future__ import annotations

import importlib
import math
import os
import queue
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.model import KV_LORA, ROPE, Model
from runtime.engine.serve import BUCKETS, PAGE, Engine, Req

clock = time.perf_counter  # CLOCK_MONOTONIC: one clock for every process of the host


@dataclass
class Handoff:
    """What a prefill instance tells a decode instance before sending a request's KV pages."""

    rid: int
    isl: int
    osl: int
    arrival: float
    prefill_start: float
    prefill_end: float
    token: int
    pages: int
    src: int


def _no_multicast() -> None:
    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")


def build_engine(cfg: dict[str, Any]) -> Engine:
    """The engine a worker serves with: the DeepSeek-V3-shaped model and its KV pool on this GPU."""
    model = Model(layers=cfg["layers"])
    free, _ = torch.cuda.mem_get_info()
    per_page = 2 * len(model.layers) * PAGE * (KV_LORA + ROPE)
    return Engine(model, pages=int(0.8 * (free - 12e9) / per_page), budget=cfg["budget"])


def _setup(rank: int, world: int, port: int, cfg: dict[str, Any]) -> Engine:
    """This rank's device, the process group, the engine (cfg["engine"]: "module:function", so the
    CPU tests can run the same workers on a fake engine over gloo); one warm-up transfer per
    prefill/decode pair so the pair communicators exist before anything is timed."""
    _no_multicast()
    dev = torch.device(cfg["device"], rank) if cfg["device"] == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(rank)
    module, name = cfg.get("engine", "runtime.engine.pd:build_engine").split(":")
    eng: Engine = getattr(importlib.import_module(module), name)(cfg)
    x = torch.zeros(1024, device=dev)
    for p in range(cfg["prefill"]):
        for d in range(cfg["prefill"], world):
            if rank == p:
                dist.send(x, d)
            elif rank == d:
                dist.recv(x, p)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return eng


def _finished(works: list[Any]) -> bool:
    """Whether every transfer in `works` is done, without blocking on NCCL (its works poll their
    CUDA events; once done, wait() orders this stream after NCCL's); gloo's point-to-point works
    only complete inside wait(), so on the CPU this waits. Call once per set of works."""
    if dist.get_backend() != "gloo" and not all(w.is_completed() for w in works):
        return False
    for w in works:
        w.wait()
    return True


def _drain(q: Any, into: deque[Any]) -> bool:
    """Move everything waiting in `q` into `into`; True once the stop sentinel (None) came."""
    stop = False
    while True:
        try:
            m = q.get_nowait()
        except queue.Empty:
            return stop
        if m is None:
            stop = True
        else:
            into.append(m)


def prefill_worker(
    rank: int, world: int, port: int, cfg: dict[str, Any], inbox: Any, ctrl: list[Any], report: Any
) -> None:
    eng = _setup(rank, world, port, cfg)
    warm = Req(-1, 2 * PAGE, 1, 0.0, pages=[eng.free.popleft() for _ in range(2)])
    eng.prefill_step([(warm, 2 * PAGE)])  # builds the prefill kernels (JIT) before anything is timed
    eng.free.extend(warm.pages)
    report.put(("ready", rank))
    waiting: deque[Req] = deque()
    pending: list[tuple[list[Any], list[int], torch.Tensor, torch.Tensor]] = []
    stop = False
    while not (stop and not waiting and not pending):
        new: deque[tuple[int, int, int, float, int]] = deque()
        stop |= _drain(inbox, new)
        for rid, isl, osl, arrival, dst in new:
            r = Req(rid, isl, osl, arrival)
            r.dst, r.start = dst, math.nan  # type: ignore[attr-defined]
            waiting.append(r)
        chunks, budget = [], eng.budget
        while waiting and budget > 0:
            r = waiting[0]
            if not r.pages:
                need = math.ceil(r.isl / PAGE)
                if len(eng.free) < need:
                    break
                r.pages = [eng.free.popleft() for _ in range(need)]
                r.start = clock()  # type: ignore[attr-defined]
            n = min(r.isl - r.done_prefill, budget)
            chunks.append((r, n))
            budget -= n
            if r.done_prefill + n < r.isl:
                break
            waiting.popleft()
        if chunks:
            eng.prefill_step(chunks)  # reads the first tokens back: the step has finished
            now = clock()
            for r, _ in chunks:
                if r.done_prefill == r.isl:
                    idx = torch.tensor(r.pages, device=eng.ckv.device)
                    ckv, kpe = eng.ckv[:, idx].contiguous(), eng.kpe[:, idx].contiguous()
                    dst = r.dst  # type: ignore[attr-defined]
                    ctrl[dst - cfg["prefill"]].put(
                        Handoff(r.rid, r.isl, r.osl, r.arrival, r.start, now, r.token, len(r.pages), rank)  # type: ignore[attr-defined]
                    )
                    pending.append(([dist.isend(ckv, dst), dist.isend(kpe, dst)], r.pages, ckv, kpe))
        sent = [p for p in pending if _finished(p[0])]
        for p in sent:
            pending.remove(p)
            eng.free.extend(p[1])
        if not chunks and not sent:
            time.sleep(2e-4)
    dist.destroy_process_group()


def decode_worker(rank: int, world: int, port: int, cfg: dict[str, Any], ctrl: Any, report: Any) -> None:
    eng = _setup(rank, world, port, cfg)
    max_pages = len(eng.free) + 1
    for b in BUCKETS:  # capture every batch size first, so no capture lands inside a timed run
        if b <= cfg["max_batch"]:
            eng._graph(b, max_pages)
    report.put(("ready", rank))
    layers = len(eng.m.layers)
    backlog: deque[Handoff] = deque()
    inflight: list[tuple[Handoff, list[int], torch.Tensor, torch.Tensor, list[Any]]] = []
    running: list[Req] = []
    stop, steps, last = False, [0, 0.0, 0.0], math.nan  # decode steps, time in Engine.decode, loop time
    while not (stop and not backlog and not inflight and not running):
        stop |= _drain(ctrl, backlog)
        while backlog and len(eng.free) >= math.ceil((backlog[0].isl + backlog[0].osl) / PAGE):
            h = backlog.popleft()  # receives are posted in handoff order, which is each sender's send order
            pages = [eng.free.popleft() for _ in range(math.ceil((h.isl + h.osl) / PAGE))]
            ckv = eng.ckv.new_empty(layers, h.pages, PAGE, KV_LORA)
            kpe = eng.kpe.new_empty(layers, h.pages, PAGE, ROPE)
            inflight.append((h, pages, ckv, kpe, [dist.irecv(ckv, h.src), dist.irecv(kpe, h.src)]))
        for item in [x for x in inflight if _finished(x[4])]:
            inflight.remove(item)
            h, pages, ckv, kpe, _ = item
            idx = torch.tensor(pages[: h.pages], device=eng.ckv.device)
            eng.ckv[:, idx] = ckv
            eng.kpe[:, idx] = kpe
            r = Req(h.rid, h.isl, h.osl, h.arrival, pages=pages, done_prefill=h.isl, generated=1, token=h.token)
            r.first_token = clock()  # the first token reaches the client with its KV
            r.handoff, r.first_step = h, math.nan  # type: ignore[attr-defined]
            running.append(r)
        if not running:
            if steps[0] >= 50:  # a burst ended: where its decode steps' time went (stdout, for the log)
                n, dec, loop = steps
                print(f"decode rank {rank}: {n} steps, {1e3 * dec / n:.2f} ms in Engine.decode, "
                      f"{1e3 * loop / n:.3f} ms loop between steps", flush=True)  # fmt: skip
                steps = [0, 0.0, 0.0]
            time.sleep(2e-4)
            last = math.nan
            continue
        t_dec = clock()
        eng.decode(running, max_pages)  # reads the next tokens back: the step has finished
        now = clock()
        steps = [steps[0] + 1, steps[1] + now - t_dec, steps[2] + (0.0 if math.isnan(last) else t_dec - last)]
        last = now
        for r in list(running):
            if math.isnan(r.first_step):  # type: ignore[attr-defined]
                r.first_step = now  # type: ignore[attr-defined]
            if r.generated >= r.osl:
                running.remove(r)
                eng.free.extend(r.pages)
                h = r.handoff  # type: ignore[attr-defined]
                report.put(("done", (h.rid, h.isl, h.osl, h.arrival, h.prefill_start, h.prefill_end,
                                     r.first_token, r.first_step, now)))  # fmt: skip
    dist.destroy_process_group()
