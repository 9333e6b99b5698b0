"""Translate one anchor (a raw dict in the shared anchor format) into the keyword arguments of
AIConfigurator's `aiconfigurator.cli.api.cli_estimate`, and one AIC result into the anchor's
metric. The mapping table itself is documented in bench/aiconfigurator_side_by_side.py.

This module does not import or run AIConfigurator (it lives in its own virtualenv) nor the
planner; `aic_inputs` returns either the arguments or the one-line reason the anchor cannot be
expressed.
"""

from __future__ import annotations

from typing import Any

AIC_MODELS = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "deepseek-v3.2": "deepseek-ai/DeepSeek-V3.2",
    "deepseek-v4-flash": "deepseek-ai/DeepSeek-V4-Flash",
    "deepseek-v4-pro": "deepseek-ai/DeepSeek-V4-Pro",
    # AIC 0.12.0 ships Kimi-K2-Instruct's config.json but still downloads it (fails offline); K2.5's
    # text model has the same shape (61 layers, hidden 7168, 384 experts top-8, MLA 64 heads)
    "kimi-k2": "moonshotai/Kimi-K2.5",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
}
DENSE_MODELS = {"llama-3.1-70b", "llama-3.1-8b"}
BLOCK_FP8_MODELS = {"deepseek-v3", "deepseek-v3.2", "kimi-k2"}  # checkpoints with 128x128 block-scaled FP8
AIC_SYSTEMS = {
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "gb200-nvl72": "gb200",
    "gb300-nvl72": "gb300",
    "rtx-pro-6000": "rtx_pro_6000_server",
}  # h800: AIC ships no h800 system
AIC_BACKENDS = {"sglang", "trtllm", "vllm"}
KV_FMT = {"bf16": "bfloat16", "fp8": "fp8"}
MOE_FMT = {"bf16": "bfloat16", "nvfp4": "nvfp4", "mxfp4": "w4a16_mxfp4", "w4a16": "int4_wo"}
GEMM_FMT = {"bf16": "bfloat16", "nvfp4": "nvfp4", "w4a16": "int4_wo"}
# AIC raw-result keys; tokens/s counts generated tokens (seq/s x osl), per GPU of the deployment
DIRECT = {
    "ttft_ms": "ttft",
    "tpot_ms": "tpot",
    "e2e_ms": "request_latency",
    "output_tok_s": "tokens/s",
    "output_tok_s_per_gpu": "tokens/s/gpu",
    "output_tok_s_per_user": "tokens/s/user",
}


class Unexpressible(ValueError):
    """The anchor has no faithful AIConfigurator estimate; the message says why."""


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise Unexpressible(f"{what} not stated ({v!r})")
    return v


def _pool(dep: dict[str, Any], role: str) -> dict[str, int]:
    p = dep.get(role)
    if not isinstance(p, dict):
        raise Unexpressible(f"deployment.{role} not stated as one pool ({type(p).__name__})")
    out = {k: _int(p.get(k, 1), f"deployment.{role}.{k}") for k in ("instances", "tp", "dp_attention", "ep", "pp")}
    out["gpus"] = _int(p.get("gpus_per_instance"), f"deployment.{role}.gpus_per_instance")
    if out["tp"] * out["dp_attention"] * out["pp"] != out["gpus"] or (out["gpus"] // out["pp"]) % out["ep"]:
        raise Unexpressible(f"deployment.{role}: tp x dp_attention x pp != gpus_per_instance, or ep does not divide")
    return out


def _parallel(p: dict[str, int], model: str, prefix: str) -> dict[str, int]:
    out = {f"{prefix}tp_size": p["tp"], f"{prefix}pp_size": p["pp"], f"{prefix}attention_dp_size": p["dp_attention"]}
    if model not in DENSE_MODELS:
        out[f"{prefix}moe_ep_size"] = p["ep"]
        out[f"{prefix}moe_tp_size"] = p["gpus"] // p["pp"] // p["ep"]
    return out


def _quant(a: dict[str, Any], model: str) -> dict[str, str]:
    prec = a.get("precision") or {}
    out: dict[str, str] = {}
    fp8 = "fp8_block" if model in BLOCK_FP8_MODELS else "fp8"
    for field, key, table in (
        ("dense", "gemm_quant_mode", {**GEMM_FMT, "fp8": fp8}),
        ("moe", "moe_quant_mode", {**MOE_FMT, "fp8": fp8}),
        ("kv_cache", "kvcache_quant_mode", KV_FMT),
        ("attention", "fmha_quant_mode", KV_FMT),
    ):
        v = prec.get(field, "unknown")
        if v == "unknown":
            continue  # AIC infers it from the checkpoint, as it does for its own CLI
        if v not in table:
            raise Unexpressible(f"precision.{field} {v} has no AIC quant mode")
        out[key] = table[v]
    if model in DENSE_MODELS:
        out.pop("moe_quant_mode", None)
    return out


def _mtp(a: dict[str, Any]) -> dict[str, Any]:
    m = a.get("mtp", "unknown")
    if m is None or m == "unknown":
        return {}  # AIC's default: no speculative decoding (stated off, or not stated)
    if not isinstance(m, dict):
        raise Unexpressible(f"mtp {m!r} not understood")
    acc = m.get("accepted_tokens", "unknown")
    if acc == "unknown" and m.get("acceptance_length") is not None:
        acc = float(m["acceptance_length"]) - 1.0
    if not isinstance(acc, int | float):
        raise Unexpressible("mtp acceptance not stated")
    return {"nextn": _int(m.get("draft_tokens"), "mtp.draft_tokens"), "nextn_accepted": float(acc)}


def _total_concurrency(w: dict[str, Any], pools: dict[str, dict[str, int]]) -> int:
    if w.get("request_rate") is not None:
        raise Unexpressible("open-loop request_rate (AIC estimate takes a fixed concurrency)")
    conc = _int(w.get("concurrency"), "workload.concurrency")
    scope = w.get("concurrency_scope", "total")
    if scope == "total":
        return conc
    if scope == "per_gpu":
        return conc * sum(p["instances"] * p["gpus"] for p in pools.values())
    if len(pools) != 1:
        raise Unexpressible("per_instance concurrency of a disaggregated deployment is ambiguous")
    return conc * next(iter(pools.values()))["instances"]


def _per_rank(total: int, p: dict[str, int], what: str) -> int:
    ranks = p["instances"] * p["dp_attention"]
    if total % ranks:
        raise Unexpressible(f"concurrency {total} does not split evenly over {ranks} {what} attention-DP ranks")
    return total // ranks


def aic_inputs(a: dict[str, Any]) -> dict[str, Any]:
    """cli_estimate keyword arguments for anchor `a`, or Unexpressible."""
    if a.get("phase") != "end-to-end":
        raise Unexpressible(f"phase {a.get('phase')} alone (AIC estimates whole agg/disagg deployments)")
    metric = a.get("metric")
    if metric not in DIRECT and metric not in ("input_tok_s_per_gpu", "total_tok_s_per_gpu"):
        raise Unexpressible(f"metric {metric} has no AIC estimate output")
    if a.get("slo"):
        raise Unexpressible("throughput at an SLO needs a search, not one estimate")
    model, hw, engine = a.get("model"), a.get("hardware"), a.get("engine")
    if model not in AIC_MODELS:
        raise Unexpressible(f"model {model} has no AIC model config")
    if hw not in AIC_SYSTEMS:
        raise Unexpressible(f"hardware {hw} has no AIC system")
    if engine not in AIC_BACKENDS:
        raise Unexpressible(f"engine {engine} is not an AIC backend")
    w = a.get("workload") or {}
    args: dict[str, Any] = {
        "model_path": AIC_MODELS[model],
        "system_name": AIC_SYSTEMS[hw],
        "backend_name": engine,
        "isl": _int(w.get("isl"), "workload.isl"),
        "osl": _int(w.get("osl"), "workload.osl"),
    }
    dep = a.get("deployment") or {}
    if "aggregated" in dep:
        agg = _pool(dep, "aggregated")
        total = _total_concurrency(w, {"aggregated": agg})
        args |= {"mode": "agg", "batch_size": _per_rank(total, agg, "aggregated"), **_parallel(agg, model, "")}
    else:
        pre, dec = _pool(dep, "prefill"), _pool(dep, "decode")
        total = _total_concurrency(w, {"prefill": pre, "decode": dec})
        args |= {
            "mode": "disagg",
            "prefill_batch_size": 1,  # as in AIC's own silicon rows; prefill runs one request per step
            "prefill_num_workers": pre["instances"],
            "decode_batch_size": _per_rank(total, dec, "decode"),
            "decode_num_workers": dec["instances"],
            **_parallel(pre, model, "prefill_"),
            **_parallel(dec, model, "decode_"),
        }
    return args | _quant(a, model) | _mtp(a)


def fp8_variants(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """`inputs` first, then the same with each FP8 GEMM/MoE mode swapped between AIC's two FP8
    labels (per-tensor `fp8`, block-scaled `fp8_block`). Our anchors say only `fp8` (either
    scaling), and AIC holds perf data for one label or the other depending on the backend (its
    own silicon rows use fp8_block MoE for SGLang and fp8 for TRT-LLM DeepSeek), so the first
    variant AIC has data for is used; the cache records which."""
    swap = {"fp8": "fp8_block", "fp8_block": "fp8"}
    out = [inputs]
    for key in ("gemm_quant_mode", "moe_quant_mode"):
        if inputs.get(key) in swap:
            out += [v | {key: swap[v[key]]} for v in out]
    return out


def aic_metric(metric: str, raw: dict[str, float], isl: int, osl: int) -> float:
    """The anchor's metric from AIC's raw result; input and total tokens follow from its
    generated tokens/s per GPU (= requests/s per GPU x osl)."""
    if metric in DIRECT:
        return float(raw[DIRECT[metric]])
    per_req = float(raw["tokens/s/gpu"]) / osl
    return per_req * (isl if metric == "input_tok_s_per_gpu" else isl + osl)
