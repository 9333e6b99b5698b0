"""GQA decode attention on flashinfer's paged decode kernel (bf16 or fp8 KV), the op that prices
decode attention of the GQA models (Llama, Qwen3, gpt-oss; `gqa_decode` in the step model).

The wrapper runs as SGLang's flashinfer backend runs it: tensor-core decode for GQA group sizes of
4 or more and for an fp8 KV cache (sglang `should_use_tensor_core`), pages of 16 tokens (vLLM's and
TRT-LLM's block granularity), NHD layout, one query token per sequence. Shapes are a rank's heads:
(query heads, KV heads, head_dim) of the model after tensor parallelism.
"""

from __future__ import annotations

import math

import torch

from roofline.calibrated import gqa_decode_bytes
from runtime.ops import GpuOp

WORKSPACE_BYTES = 128 * 1024 * 1024
PAGE = 16


class GQADecode(GpuOp):
    def __init__(self, batch: int, ctx: int, heads: int, kv_heads: int, head_dim: int = 128, kv: str = "bf16") -> None:
        import flashinfer  # noqa: PLC0415  (runtime extra)

        kvb = 1 if kv == "fp8" else 2
        params = {"batch": batch, "ctx": ctx, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim}
        super().__init__("gqa_decode", "gqa_decode", kv, params, launches=2)
        dev = "cuda"
        pages_per = math.ceil(ctx / PAGE)
        n_pages = batch * pages_per
        kv_dtype = torch.float8_e4m3fn if kv == "fp8" else torch.bfloat16
        self.q = torch.randn(batch, heads, head_dim, dtype=torch.bfloat16, device=dev) * 0.5
        self.cache = (torch.randn(n_pages, 2, PAGE, kv_heads, head_dim, device=dev) * 0.5).to(kv_dtype)
        indptr = torch.arange(batch + 1, dtype=torch.int32, device=dev) * pages_per
        indices = torch.arange(n_pages, dtype=torch.int32, device=dev)
        last = torch.full((batch,), ctx - (pages_per - 1) * PAGE, dtype=torch.int32, device=dev)
        ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        tensor_cores = kv == "fp8" or heads // kv_heads >= 4
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            ws,
            "NHD",
            use_cuda_graph=True,
            use_tensor_cores=tensor_cores,
            paged_kv_indptr_buffer=indptr.clone(),
            paged_kv_indices_buffer=indices.clone(),
            paged_kv_last_page_len_buffer=last.clone(),
        )
        self.wrapper.plan(
            indptr,
            indices,
            last,
            heads,
            kv_heads,
            head_dim,
            PAGE,
            q_data_type=torch.bfloat16,
            kv_data_type=kv_dtype,
            o_data_type=torch.bfloat16,
        )
        self.kw = {"k_scale": 1.0, "v_scale": 1.0} if kv == "fp8" else {}
        self.out = torch.empty_like(self.q)
        self.kernel = f"flashinfer BatchDecodeWithPagedKVCacheWrapper(tensor_cores={tensor_cores})"
        self.flops = batch * ctx * heads * 4.0 * head_dim  # QK and PV, as roofline.attention_ops counts
        self.bytes = gqa_decode_bytes(batch * ctx, kv_heads, head_dim, kvb)  # the count the step model looks up
        self.batch, self.ctx, self.pages_per = batch, ctx, pages_per
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.tol = (3e-2, 3e-2) if kv == "bf16" else (6e-2, 6e-2)

    def run(self) -> torch.Tensor:
        return self.wrapper.run(self.q, self.cache, out=self.out, **self.kw)

    def reference(self) -> torch.Tensor:
        group = self.heads // self.kv_heads
        outs = []
        for b in range(min(self.batch, 2)):
            pages = self.cache[b * self.pages_per : (b + 1) * self.pages_per].float()
            k = pages[:, 0].reshape(-1, self.kv_heads, self.head_dim)[: self.ctx].repeat_interleave(group, dim=1)
            v = pages[:, 1].reshape(-1, self.kv_heads, self.head_dim)[: self.ctx].repeat_interleave(group, dim=1)
            q = self.q[b].float()  # (heads, head_dim)
            s = torch.einsum("hd,thd->ht", q, k) / math.sqrt(self.head_dim)
            outs.append(torch.einsum("ht,thd->hd", torch.softmax(s, dim=-1), v))
        return torch.stack(outs)
