"""MLA attention: absorbed decode on flashinfer's paged MLA kernel (bf16 or fp8 KV) and
non-absorbed prefill (qk 192 / vo 128, causal, with a cached prefix) on its ragged prefill.

Shapes are DeepSeek-V3's: 128 heads (divide by TP for a rank), kv_lora 512, rope 64, page 64.
"""

from __future__ import annotations

import math

import torch

from roofline.calibrated import mla_decode_bytes, mla_prefill_bytes
from runtime.ops import GpuOp

WORKSPACE_BYTES = 128 * 1024 * 1024
CKV, KPE, QK_NOPE, V_HEAD, PAGE = 512, 64, 128, 128, 64


class MLADecode(GpuOp):
    def __init__(self, batch: int, ctx: int, heads: int = 128, kv: str = "bf16", backend: str = "auto") -> None:
        import flashinfer  # noqa: PLC0415  (runtime extra)

        super().__init__("mla_decode", "mla_decode", kv, {"batch": batch, "ctx": ctx, "heads": heads}, launches=2)
        dev, kvb = "cuda", 1 if kv == "fp8" else 2
        pages_per = math.ceil(ctx / PAGE)
        n_pages = batch * pages_per
        kv_dtype = torch.float8_e4m3fn if kv == "fp8" else torch.bfloat16
        self.q_nope = torch.randn(batch, heads, CKV, dtype=torch.bfloat16, device=dev) * 0.5
        self.q_pe = torch.randn(batch, heads, KPE, dtype=torch.bfloat16, device=dev) * 0.5
        self.ckv = (torch.randn(n_pages, PAGE, CKV, device=dev) * 0.5).to(kv_dtype)
        self.kpe = (torch.randn(n_pages, PAGE, KPE, device=dev) * 0.5).to(kv_dtype)
        qo = torch.arange(batch + 1, dtype=torch.int32, device=dev)
        kv_indptr = torch.arange(batch + 1, dtype=torch.int32, device=dev) * pages_per
        kv_indices = torch.arange(n_pages, dtype=torch.int32, device=dev)
        kv_len = torch.full((batch,), ctx, dtype=torch.int32, device=dev)
        ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        self.wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(
            ws,
            use_cuda_graph=True,
            qo_indptr=qo.clone(),
            kv_indptr=kv_indptr.clone(),
            kv_indices=kv_indices.clone(),
            kv_len_arr=kv_len.clone(),
            backend=backend,
        )
        self.scale = 1.0 / math.sqrt(QK_NOPE + KPE)
        extra = {"scale_mode": "kv-per-tensor"} if kv == "fp8" else {}
        self.wrapper.plan(
            qo_indptr=qo,
            kv_indptr=kv_indptr,
            kv_indices=kv_indices,
            kv_len_arr=kv_len,
            num_heads=heads,
            head_dim_ckv=CKV,
            head_dim_kpe=KPE,
            page_size=PAGE,
            causal=False,
            sm_scale=self.scale,
            q_data_type=torch.bfloat16,
            kv_data_type=kv_dtype,
            **extra,
        )
        self.kw = {"ckv_scale": 1.0, "kpe_scale": 1.0} if kv == "fp8" else {}
        self.out = torch.empty_like(self.q_nope)
        self.kernel = f"flashinfer BatchMLAPagedAttentionWrapper({backend})"
        self.flops = batch * ctx * heads * 2.0 * (CKV + KPE + CKV)
        self.bytes = mla_decode_bytes(batch * ctx, CKV, KPE, kvb)  # the count the step model looks up
        self.batch, self.ctx, self.pages_per = batch, ctx, pages_per
        self.tol = (3e-2, 3e-2) if kv == "bf16" else (6e-2, 6e-2)

    def run(self) -> torch.Tensor:
        return self.wrapper.run(query=(self.q_nope, self.q_pe), kv_cache=(self.ckv, self.kpe), out=self.out, **self.kw)

    def reference(self) -> torch.Tensor:
        outs = []
        for b in range(min(self.batch, 2)):
            pages = slice(b * self.pages_per, (b + 1) * self.pages_per)
            ckv = self.ckv[pages].float().reshape(-1, CKV)[: self.ctx]
            kpe = self.kpe[pages].float().reshape(-1, KPE)[: self.ctx]
            s = (self.q_nope[b].float() @ ckv.T + self.q_pe[b].float() @ kpe.T) * self.scale
            outs.append(torch.softmax(s, dim=-1) @ ckv)
        return torch.stack(outs)


class MLAPrefill(GpuOp):
    """`batch` requests of `new` tokens after `prefix` cached ones (kv = prefix + new), causal."""

    def __init__(self, batch: int, new: int, prefix: int = 0, heads: int = 128) -> None:
        import flashinfer  # noqa: PLC0415

        super().__init__(
            "mla_prefill", "attn_prefill", "bf16", {"batch": batch, "new": new, "prefix": prefix, "heads": heads}
        )
        dev, qk = "cuda", QK_NOPE + KPE
        kv = prefix + new
        self.q = torch.randn(batch * new, heads, qk, dtype=torch.bfloat16, device=dev)
        self.k = torch.randn(batch * kv, heads, qk, dtype=torch.bfloat16, device=dev)
        self.v = torch.randn(batch * kv, heads, V_HEAD, dtype=torch.bfloat16, device=dev)
        qo = torch.arange(batch + 1, dtype=torch.int32, device=dev) * new
        kvp = torch.arange(batch + 1, dtype=torch.int32, device=dev) * kv
        ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        self.wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", backend="fa3")
        self.scale = 1.0 / math.sqrt(qk)
        self.wrapper.plan(
            qo, kvp, heads, heads, qk, head_dim_vo=V_HEAD, causal=True, sm_scale=self.scale, q_data_type=torch.bfloat16
        )
        self.kernel = "flashinfer BatchPrefillWithRaggedKVCacheWrapper(fa3)"
        pairs = batch * (new * prefix + new * (new + 1) / 2)
        self.flops = pairs * heads * 2.0 * (qk + V_HEAD)
        self.bytes = mla_prefill_bytes(batch * new, batch * prefix, heads, qk, V_HEAD)  # as the step model counts
        self.new, self.prefix, self.kv = new, prefix, kv

    def run(self) -> torch.Tensor:
        return self.wrapper.run(self.q, self.k, self.v)

    def reference(self) -> torch.Tensor:
        q = self.q[: self.new].float().transpose(0, 1)
        k = self.k[: self.kv].float().transpose(0, 1)
        v = self.v[: self.kv].float().transpose(0, 1)
        rows = torch.arange(self.new, device=q.device)[:, None] + self.prefix
        mask = torch.arange(self.kv, device=q.device)[None, :] <= rows
        s = (q @ k.transpose(1, 2)) * self.scale
        s = s.masked_fill(~mask, float("-inf"))
        return (torch.softmax(s, dim=-1) @ v).transpose(0, 1)
