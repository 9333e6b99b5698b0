"""The engine limits `trtllm-bench throughput` launches when its command gives no `--max_batch_size`
and `--max_num_tokens`: its own tuning heuristic, as the benchmark computes it (NVIDIA/TensorRT-LLM
tensorrt_llm/bench/benchmark/utils/general.py `get_settings` -> bench/build/build.py
`get_benchmark_engine_settings` -> bench/build/tuning.py `calc_engine_setting`, `finetune_setting`):

- KV bytes per token: 2 x layers x max(tp, HF num_key_value_heads) x head_size x KV bytes per element
  (head_size = HF head_dim, else hidden / heads; MLA checkpoints declare num_key_value_heads = heads, so
  DeepSeek-V3 counts 128 heads of 56, not its latent), per GiB.
- Engine size: the checkpoint's safetensors element count x bytes per element of its quantization
  (NVFP4 0.5, FP8 1, unquantized 2). An NVFP4 ModelOpt checkpoint stores two weights per uint8 plus one
  FP8 scale per 16, so a quantized weight counts 0.5625 elements; HF checkpoints include MTP layers.
- KV requests = (tp x pp x the GPU's NVML total memory in GiB - engine size) x kv fraction / (KV bytes per
  token x (isl + osl)); raw batch = min(that, 4096) / pp; raw tokens = min(raw batch x (1 + isl/osl), 32768).
- max_batch_size: raw batch rounded up to 32 (at least 64) below 256, to 128 below 1024, else to 256;
  max_num_tokens: raw tokens rounded up to 256 (at least 2048) below 4096, to 512 below 8192, else to 1024;
  without chunked prefill at least isl + max_batch_size (a prompt fits whole beside the running batch).
- Quantizations outside NVFP4 / FP8 / unquantized (e.g. MXFP4) keep BuildConfig's defaults, 2048 and 8192.
This is the PyTorch path (`--backend pytorch`, trtllm-bench's default since TensorRT-LLM 1.0); a TensorRT
engine runs the limits its `trtllm-bench build` computed with that release's heuristic, not read here.

A command that passes one of the two keeps it; the other comes from the heuristic. The LLM API applies
both per attention-DP rank. This module computes settings; it runs nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypeVar

from planner.inputs.scenario import Scenario
from roofline.catalog.schema import GQAAttention, HardwareSpec, MLAAttention, ModelSpec
from roofline.params import embedding_params, expert_params, total_params

SOURCE = "NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py calc_engine_setting + finetune_setting"
BYTES_PER_ELEM = {"nvfp4": 0.5, "fp8": 1.0, "bf16": 2.0}  # tuning.py BYTES_PER_ELEM by quant algo
ELEMENTS_PER_WEIGHT = {"nvfp4": 0.5 + 1 / 16, "fp8": 1.0, "bf16": 1.0}  # safetensors elements per weight
DEFAULTS = (2048, 8192)  # BuildConfig max_batch_size, max_num_tokens (quantizations it does not tune)


def _kv_heads_and_size(m: ModelSpec) -> tuple[int, int] | None:
    a = m.attention
    if isinstance(a, GQAAttention):
        return a.num_kv_heads, a.head_dim
    if isinstance(a, MLAAttention):  # HF configs of MLA models: num_key_value_heads = heads, no head_dim
        return a.num_heads, m.hidden_size // a.num_heads
    return None


def _checkpoint_elements(m: ModelSpec, dense: str, moe: str) -> float:
    """The checkpoint's safetensors element count (MTP layers included, as HF checkpoints ship them):
    routed experts in the MoE format, the embedding and head unquantized, every other weight in the
    dense format."""
    moe_w = (m.moe_layers + m.mtp_layers) * m.moe.num_experts * expert_params(m) if m.moe else 0.0
    emb = embedding_params(m)
    dense_w = total_params(m, include_mtp=True) - moe_w - emb
    return dense_w * ELEMENTS_PER_WEIGHT[dense] + moe_w * ELEMENTS_PER_WEIGHT[moe] + emb


def settings(
    m: ModelSpec,
    hw: HardwareSpec,
    world: int,
    pp: int,
    dense: str,
    moe: str,
    kv_cache: str,
    isl: int,
    osl: int,
    kv_fraction: float,
    floor: bool = True,
) -> tuple[int, int] | None:
    """(max_batch_size, max_num_tokens) trtllm-bench launches for `world` = tp x pp GPUs, or None where
    its heuristic has no input (an attention kind it does not describe). `floor`: max_num_tokens >= isl +
    max_batch_size, which get_settings applies without chunked prefill."""
    quant = moe if m.moe else dense
    if quant not in BYTES_PER_ELEM or dense not in ELEMENTS_PER_WEIGHT or moe not in ELEMENTS_PER_WEIGHT:
        bs, tokens = DEFAULTS
        return bs, max(tokens, isl + bs) if floor else tokens
    heads = _kv_heads_and_size(m)
    if heads is None:
        return None
    kv_heads, head_size = heads
    gib = 1024**3
    per_token = 2 * m.num_layers * max(world // pp, kv_heads) * head_size * BYTES_PER_ELEM.get(kv_cache, 2.0) / gib
    engine = _checkpoint_elements(m, dense, moe) * BYTES_PER_ELEM[quant] / gib
    cache = (world * hw.mem_bytes / gib - engine) * kv_fraction
    requests = cache / (per_token * (isl + osl))
    if requests < 1:
        return None
    raw_bs = min(requests, 4096) / pp
    raw_tokens = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return bs, max(tokens, isl + bs) if floor else tokens


S = TypeVar("S", bound=Scenario)


def for_anchor(a: S, base_dir: Path | None) -> tuple[S, list[str]]:
    """An anchor measured with `client: trtllm-bench` on the PyTorch backend and a stated aggregated
    deployment runs the limits trtllm-bench computes (module docstring) for each one it does not state
    (trtllm-bench fills each missing one from its heuristic). A TensorRT engine (`trtllm-bench build`)
    runs the limits its build computed, with a version of the heuristic this module does not read, so
    it keeps the engine profile's; unknown lengths or layout, or a model the heuristic does not describe,
    leave the anchor as it is too."""
    rt, w = a.runtime, a.workload
    unstated = [k for k in ("max_running_per_rank", "max_prefill_tokens") if getattr(rt, k) == "unknown"]
    if a.engine != "trtllm" or not unstated or not isinstance(w.isl, int) or not isinstance(w.osl, int):
        return a, []
    if not a.deployment.known or a.deployment.groups("prefill") or a.deployment.groups("decode"):
        return a, []
    from planner.model.defaults import resolve  # noqa: PLC0415 (the model layer imports the inputs)

    inst = resolve(a, base_dir).deployment.pools[0].instance
    if inst.runtime.backend != "pytorch":
        return a, []
    p, prec = inst.parallel, inst.precision
    frac = inst.runtime.mem_fraction  # the run's --kv_cache_free_gpu_mem_fraction (get_settings passes it)
    floor = rt.chunked_prefill is not True
    got = settings(inst.model, inst.hardware, p.gpus, p.pp, prec.dense, prec.moe, prec.kv_cache, w.isl, w.osl,
                   frac, floor)  # fmt: skip
    if got is None:
        return a, []
    bs, tokens = got
    # max_batch_size bounds one micro-batch; with pp stages the capacity scheduler admits pp x max_batch_size
    # (tensorrt_llm/_torch/pyexecutor/_util.py: BindCapacityScheduler(max_batch_size, num_micro_batches =
    # pp_size)), which is what the planner's per-rank running limit counts
    filled = {"max_running_per_rank": bs * p.pp, "max_prefill_tokens": tokens}
    update: dict[str, object] = {k: filled[k] for k in unstated}
    note = (
        f"{', '.join(f'runtime.{k}: {update[k]}' for k in unstated)} (trtllm-bench's own max_batch_size {bs} and "
        f"max_num_tokens {tokens} for isl {w.isl} / osl {w.osl} on {p.gpus} GPUs, kv fraction {frac:g}: {SOURCE})"
    )
    return a.model_copy(update={"runtime": rt.model_copy(update=update)}), [note]
