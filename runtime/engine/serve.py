"""Serve closed-loop workloads on `runtime.engine.model` and measure TTFT, TPOT, E2E and
throughput. Scheduling is SGLang's: a pending prefill batch (whole prompts up to a token budget,
longer prompts chunked) runs before the next decode step; decode runs every running sequence in
one CUDA-graph replay, padded to a batch bucket. KV lives in 64-token pages; a request is admitted
only when pages for its whole prompt and output are free (no preemption).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from runtime.engine.model import HEADS, KV_LORA, NOPE, ROPE, VD, Model

PAGE = 64
BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class Req:
    rid: int
    isl: int
    osl: int
    arrival: float
    pages: list[int] = field(default_factory=list)
    done_prefill: int = 0
    generated: int = 0
    first_token: float = math.nan
    finish: float = math.nan
    token: int = 0

    @property
    def length(self) -> int:
        return self.done_prefill + max(self.generated - 1, 0)


def take_chunks(waiting: deque[Req], free: deque[int], need: int, budget: int) -> list[tuple[Req, int]]:
    """Prompt chunks for one prefill step, first come first served within `budget` tokens: a
    request gets its `need` KV pages when it starts; a partly prefilled prompt ends the step and
    stays first in line; whole prompts leave `waiting`."""
    chunks: list[tuple[Req, int]] = []
    while waiting and budget > 0 and (waiting[0].pages or len(free) >= need):
        r = waiting[0]
        if not r.pages:
            r.pages = [free.popleft() for _ in range(need)]
        n = min(r.isl - r.done_prefill, budget)
        chunks.append((r, n))
        budget -= n
        if r.done_prefill + n < r.isl:
            break
        waiting.popleft()
    return chunks


class Engine:
    def __init__(self, model: Model, pages: int, budget: int = 8192) -> None:
        import flashinfer  # noqa: PLC0415  (runtime extra)

        self.m, self.budget, dev = model, budget, "cuda"
        n_layers = len(model.layers)
        self.ckv = torch.zeros(n_layers, pages, PAGE, KV_LORA, device=dev, dtype=torch.bfloat16)
        self.kpe = torch.zeros(n_layers, pages, PAGE, ROPE, device=dev, dtype=torch.bfloat16)
        self.free = deque(range(1, pages))  # page 0 is the dummy for padded decode rows
        ws = torch.empty(128 << 20, dtype=torch.uint8, device=dev)
        self.prefill = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", backend="fa3")
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor], object]] = {}
        self.flashinfer = flashinfer

    # ---------------------------------------------------------------- decode (CUDA graphs)
    def _decode_body(self, st: dict[str, torch.Tensor], wrapper: object) -> None:
        x = self.m.embed[st["tokens"]]
        for li, layer in enumerate(self.m.layers):
            q_nope, q_pe, latent, k_pe = layer.qkv(x, st["pos"])
            self.ckv[li, st["page"], st["slot"]] = latent
            self.kpe[li, st["page"], st["slot"]] = k_pe
            q_lat = torch.bmm(q_nope.transpose(0, 1), layer.w_uk).transpose(0, 1).contiguous()
            o_lat = wrapper.run(query=(q_lat, q_pe.contiguous()), kv_cache=(self.ckv[li], self.kpe[li]))  # type: ignore[attr-defined]
            o = torch.bmm(o_lat.transpose(0, 1), layer.w_uv.transpose(1, 2)).transpose(0, 1)
            x = layer.ffn(x + layer.attn_out(o))
        st["next"].copy_(self.m.logits_argmax(x))

    def _graph(self, b: int, max_pages: int) -> tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor], object]:
        if b in self.graphs:
            return self.graphs[b]
        dev = "cuda"
        st = {
            "tokens": torch.zeros(b, dtype=torch.long, device=dev),
            "pos": torch.zeros(b, dtype=torch.long, device=dev),
            "page": torch.zeros(b, dtype=torch.long, device=dev),
            "slot": torch.zeros(b, dtype=torch.long, device=dev),
            "next": torch.zeros(b, dtype=torch.long, device=dev),
        }
        ws = torch.empty(128 << 20, dtype=torch.uint8, device=dev)
        bufs = {
            "qo_indptr": torch.arange(b + 1, dtype=torch.int32, device=dev),
            "kv_indptr": torch.zeros(b + 1, dtype=torch.int32, device=dev),
            "kv_indices": torch.zeros(max_pages, dtype=torch.int32, device=dev),
            "kv_len_arr": torch.ones(b, dtype=torch.int32, device=dev),
        }
        wrapper = self.flashinfer.mla.BatchMLAPagedAttentionWrapper(ws, use_cuda_graph=True, **bufs)
        self._plan(wrapper, [[0]] * b, [1] * b)
        for _ in range(2):  # warm up outside the graph
            self._decode_body(st, wrapper)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._decode_body(st, wrapper)
        self.graphs[b] = (g, st, wrapper)
        return self.graphs[b]

    def _plan(self, wrapper: object, page_lists: list[list[int]], lens: list[int]) -> None:
        dev = "cuda"
        indptr = [0]
        for p in page_lists:
            indptr.append(indptr[-1] + len(p))
        wrapper.plan(  # type: ignore[attr-defined]
            qo_indptr=torch.arange(len(lens) + 1, dtype=torch.int32, device=dev),
            kv_indptr=torch.tensor(indptr, dtype=torch.int32, device=dev),
            kv_indices=torch.tensor([x for p in page_lists for x in p], dtype=torch.int32, device=dev),
            kv_len_arr=torch.tensor(lens, dtype=torch.int32, device=dev),
            num_heads=HEADS,
            head_dim_ckv=KV_LORA,
            head_dim_kpe=ROPE,
            page_size=PAGE,
            causal=False,
            sm_scale=self.m.scale,
            q_data_type=torch.bfloat16,
            kv_data_type=torch.bfloat16,
        )

    def decode(self, running: list[Req], max_pages: int, bucket: int | None = None) -> None:
        """One decode step of `running` in the graph of the smallest bucket that holds them (or of
        `bucket`, which may hold only padding: an expert-parallel rank with nothing to decode)."""
        b = bucket or next(x for x in BUCKETS if x >= len(running))
        g, st, wrapper = self._graph(b, max_pages)
        pad = b - len(running)
        pos = [r.length for r in running]  # the new token's position = current context length
        pages = [r.pages for r in running] + [[0]] * pad
        lens = [p + 1 for p in pos] + [1] * pad
        self._plan(wrapper, [pl[: math.ceil(n / PAGE)] for pl, n in zip(pages, lens, strict=True)], lens)
        dev = "cuda"
        st["tokens"].copy_(torch.tensor([r.token for r in running] + [0] * pad, device=dev))
        st["pos"].copy_(torch.tensor(pos + [0] * pad, device=dev))
        st["page"].copy_(
            torch.tensor([r.pages[p // PAGE] for r, p in zip(running, pos, strict=True)] + [0] * pad, device=dev)
        )
        st["slot"].copy_(torch.tensor([p % PAGE for p in pos] + [0] * pad, device=dev))
        g.replay()
        nxt = st["next"][: len(running)].tolist()
        for r, t in zip(running, nxt, strict=True):
            r.token = t
            r.generated += 1

    # ---------------------------------------------------------------- prefill (eager)
    def prefill_step(self, chunks: list[tuple[Req, int]]) -> None:
        """Run `chunks` of (request, new tokens) after each request's already prefilled prefix."""
        dev = "cuda"
        pos = torch.cat([torch.arange(r.done_prefill, r.done_prefill + n, device=dev) for r, n in chunks])
        tokens = torch.randint(0, self.m.embed.shape[0], (len(pos),), device=dev)
        page_of = torch.cat(
            [
                torch.tensor(r.pages, device=dev)[torch.arange(r.done_prefill, r.done_prefill + n, device=dev) // PAGE]
                for r, n in chunks
            ]
        )
        slot = pos % PAGE
        ctx = [(r.pages, r.done_prefill + n) for r, n in chunks]
        gather_page = torch.cat([torch.tensor(p, device=dev)[torch.arange(L, device=dev) // PAGE] for p, L in ctx])
        gather_slot = torch.cat([torch.arange(L, device=dev) % PAGE for _, L in ctx])
        qo = torch.tensor([0] + [n for _, n in chunks], device=dev).cumsum(0).to(torch.int32)
        kvp = torch.tensor([0] + [L for _, L in ctx], device=dev).cumsum(0).to(torch.int32)
        self.prefill.plan(
            qo,
            kvp,
            HEADS,
            HEADS,
            NOPE + ROPE,
            head_dim_vo=VD,
            causal=True,
            sm_scale=self.m.scale,
            q_data_type=torch.bfloat16,
        )
        x = self.m.embed[tokens]
        for li, layer in enumerate(self.m.layers):
            q_nope, q_pe, latent, k_pe = layer.qkv(x, pos)
            self.ckv[li, page_of, slot] = latent
            self.kpe[li, page_of, slot] = k_pe
            lat = self.ckv[li, gather_page, gather_slot]  # prefix + new latents of every chunk
            kpe = self.kpe[li, gather_page, gather_slot]
            kv = (lat @ layer.kv_b.t()).view(-1, HEADS, NOPE + VD)
            k = torch.cat([kv[:, :, :NOPE], kpe[:, None, :].expand(-1, HEADS, ROPE)], dim=-1)
            o = self.prefill.run(torch.cat([q_nope, q_pe], dim=-1), k, kv[:, :, NOPE:].contiguous())
            x = layer.ffn(x + layer.attn_out(o))
        last = qo[1:].long() - 1
        nxt = self.m.logits_argmax(x[last]).tolist()
        for (r, n), t in zip(chunks, nxt, strict=True):
            r.done_prefill += n
            r.token = t

    # ---------------------------------------------------------------- closed loop
    def serve(self, concurrency: int, isl: int, osl: int, requests: int) -> list[Req]:
        max_pages = len(self.free) + 1
        need = math.ceil((isl + osl) / PAGE)
        clock = time.perf_counter
        t0 = clock()
        waiting: deque[Req] = deque(Req(i, isl, osl, 0.0) for i in range(min(concurrency, requests)))
        issued, running, done = len(waiting), [], []
        while len(done) < requests:
            chunks = take_chunks(waiting, self.free, need, self.budget)
            if chunks:
                self.prefill_step(chunks)
                torch.cuda.synchronize()
                now = clock() - t0
                for r, _ in chunks:
                    if r.done_prefill == r.isl:
                        r.first_token, r.generated = now, 1
                        running.append(r)
            elif running:
                self.decode(running, max_pages)
                torch.cuda.synchronize()
                now = clock() - t0
            else:
                raise RuntimeError("nothing to run: the KV pool cannot hold one request")
            for r in [r for r in running if r.generated >= r.osl]:
                r.finish = now
                running.remove(r)
                self.free.extend(r.pages)
                done.append(r)
                if issued < requests:
                    waiting.append(Req(issued, isl, osl, now))
                    issued += 1
        return done
