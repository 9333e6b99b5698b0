"""Calibrated kernel efficiencies measured on real GPUs (written by `calibration.fit`).

A table per hardware gives log efficiency (ideal roofline time / measured time) on a grid of
log2 FLOPs, log2 bytes and log2 rows per kernel call, per op family and format; lookups are
trilinear and clamp to the measured range. Tables apply to the hardware they were measured on
and transfer to other GPUs of the same architecture (efficiency is a fraction of each GPU's own
peaks), which the returned label says. Only families whose measured kernel is what serving
engines run on that architecture are used: on sm_90, MLA decode with an FP8 KV cache keeps its
FlashMLA prior (flashinfer's FP8 MLA path, the one measured, is ~6x slower than BF16 there, and
SGLang uses FlashMLA for FP8 KV on Hopper), GQA decode with an FP8 KV cache keeps its prior (see SKIP);
elementwise ops keep their prior too.

A table is indexed by bytes per call, so the measured side (runtime.ops, calibration.fit) and the
looking-up side (roofline.attention_ops) must count attention bytes alike: the functions below are
that one count (KV reads for MLA and GQA decode; Q/K/V of new and cached tokens for prefill, without the query
and output traffic of the decode kernel), and tests hold both sides to them.
"""

from __future__ import annotations

import bisect
import json
import math
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: runtime.ops imports the byte counts on GPU machines without pydantic
    from roofline.catalog.schema import HardwareSpec

MEASURED = {"sm_90": "h200-sxm"}  # architecture -> hardware whose profile it uses
FAMILY = {
    "gemm": "gemm",
    "moe_gemm": "moe_gemm",
    "moe_gemv": "moe_gemm",
    "mla_decode": "mla_decode",
    "attn_prefill": "attn_prefill",
    "gqa_decode": "gqa_decode",
    "elementwise": "elementwise",
}
# Measured but not what engines run: flashinfer's FP8-KV MLA (SGLang uses FlashMLA on Hopper),
# flashinfer's FP8-KV GQA decode (2.3-2.7 TB/s at large batch x context, 0.48-0.56 of bandwidth, against
# 3.6-3.9 TB/s with a BF16 cache; priced at it, TensorRT-LLM's Llama-3.1-8B FP8 throughput on H100/H200
# falls 15-36% below the performance overview at 1k-20k contexts: its XQA kernel reads FP8 KV natively)
# and a plain-torch RMSNorm (several kernels; engines run one fused kernel).
SKIP = {"mla_decode/fp8", "gqa_decode/fp8", "elementwise/bf16"}


def mla_decode_bytes(kv_tokens: float, kv_lora: int, rope: int, kv_bytes: float) -> float:
    """Bytes an absorbed MLA decode call is counted as moving: every attended cached token's latent
    and rope key, once (FlashMLA reads the KV once per sequence)."""
    return kv_tokens * (kv_lora + rope) * kv_bytes


def gqa_decode_bytes(kv_tokens: float, kv_heads: float, head_dim: int, kv_bytes: float) -> float:
    """Bytes a GQA decode call is counted as moving: the K and V of every attended cached token of
    the rank's KV heads, once (the query heads of a group share one read)."""
    return kv_tokens * kv_heads * 2 * head_dim * kv_bytes


def mla_prefill_bytes(new_tokens: float, prefix_tokens: float, heads: float, qk: int, v: int) -> float:
    """Bytes a non-absorbed MLA prefill call is counted as moving: Q, K and V (bf16) of the new and
    the cached-prefix tokens."""
    return (new_tokens + prefix_tokens) * heads * (2 * qk + v) * 2.0


class Table:
    def __init__(self, fam: dict[str, object]) -> None:
        self.f: list[float] = list(fam["log2_flops"])  # type: ignore[call-overload]
        self.b: list[float] = list(fam["log2_bytes"])  # type: ignore[call-overload]
        self.r: list[float] = list(fam["log2_rows"])  # type: ignore[call-overload]
        self.g: list[list[list[float]]] = fam["log_eta"]  # type: ignore[assignment]

    @staticmethod
    def _pos(axis: list[float], v: float) -> tuple[int, float]:
        if len(axis) == 1:
            return 0, 0.0
        v = min(max(v, axis[0]), axis[-1])
        i = min(max(bisect.bisect_right(axis, v) - 1, 0), len(axis) - 2)
        return i, (v - axis[i]) / (axis[i + 1] - axis[i])

    def eta(self, flops: float, nbytes: float, rows: float) -> float:
        (i, x), (j, y), (k, z) = (
            self._pos(self.f, math.log2(max(flops, 1.0))),
            self._pos(self.b, math.log2(max(nbytes, 1.0))),
            self._pos(self.r, math.log2(max(rows, 1.0))),
        )
        g = self.g
        k1 = min(k + 1, len(self.r) - 1)
        acc = 0.0
        for di, wi in ((0, 1 - x), (1, x)):
            for dj, wj in ((0, 1 - y), (1, y)):
                row = g[min(i + di, len(self.f) - 1)][min(j + dj, len(self.b) - 1)]
                acc += wi * wj * ((1 - z) * row[k] + z * row[k1])
        return math.exp(acc)


@cache
def _tables(hardware: str) -> dict[str, Table]:
    path = resources.files("roofline") / "calibrated" / f"{hardware}.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {k: Table(v) for k, v in data["families"].items() if k not in SKIP}


def lookup(hw: HardwareSpec, family: str, fmt: str) -> tuple[Table, str] | None:
    """The calibrated table for an op on `hw`, and a label naming where it was measured."""
    source = MEASURED.get(hw.arch)
    fam = FAMILY.get(family)
    if source is None or fam is None:
        return None
    table = _tables(source).get(f"{fam}/{fmt}")
    if table is None:
        return None
    return table, f"measured on {source}" + ("" if hw.id == source else f", transferred to {hw.id}")
