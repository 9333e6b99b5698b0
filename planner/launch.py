"""Launch commands that realise a recommendation: SGLang, vLLM and TensorRT-LLM, and a Dynamo
disaggregated layout. Flags set the parallelism, precision (checkpoint and KV cache), batch cap,
memory fraction and MTP. Flag names follow each engine's documented CLI (SGLang server
arguments, `vllm serve`, `trtllm-serve` with an extra-options YAML, Dynamo's graph config); a
recommendation an engine cannot express says so instead of printing a wrong command.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from planner.deployment import Deployment, Pool, layout_label
from planner.question import Question

if TYPE_CHECKING:
    from planner.plan import Recommendation

# Hugging Face checkpoints by catalog id and expert format (NVFP4 checkpoints are NVIDIA's).
CHECKPOINTS = {
    ("deepseek-v3", "fp8"): "deepseek-ai/DeepSeek-V3",
    ("deepseek-v3", "nvfp4"): "nvidia/DeepSeek-V3-0324-FP4",
    ("deepseek-v3.2", "fp8"): "deepseek-ai/DeepSeek-V3.2",
    ("deepseek-v3.2", "nvfp4"): "nvidia/DeepSeek-V3.2-NVFP4",
    ("deepseek-v4-flash", "mxfp4"): "deepseek-ai/DeepSeek-V4-Flash",
    ("deepseek-v4-flash", "nvfp4"): "nvidia/DeepSeek-V4-Flash-NVFP4",
    ("deepseek-v4-pro", "mxfp4"): "deepseek-ai/DeepSeek-V4-Pro",
    ("kimi-k2", "fp8"): "moonshotai/Kimi-K2-Instruct",
    ("qwen3-235b-a22b", "fp8"): "Qwen/Qwen3-235B-A22B-FP8",
    ("qwen3-235b-a22b", "bf16"): "Qwen/Qwen3-235B-A22B",
    ("qwen3-30b-a3b", "fp8"): "Qwen/Qwen3-30B-A3B-FP8",
    ("qwen3-30b-a3b", "bf16"): "Qwen/Qwen3-30B-A3B",
    ("gpt-oss-120b", "mxfp4"): "openai/gpt-oss-120b",
    ("llama-3.1-70b", "bf16"): "meta-llama/Llama-3.1-70B-Instruct",
    ("llama-3.1-70b", "fp8"): "nvidia/Llama-3.1-70B-Instruct-FP8",
    ("llama-3.1-8b", "bf16"): "meta-llama/Llama-3.1-8B-Instruct",
    ("llama-3.1-8b", "fp8"): "nvidia/Llama-3.1-8B-Instruct-FP8",
}


def checkpoint(q: Question, pool: Pool) -> str:
    p = pool.instance.precision
    return CHECKPOINTS.get((q.model, p.moe)) or CHECKPOINTS.get((q.model, p.dense)) or q.model


def _sglang(q: Question, pool: Pool, batch: int) -> str:
    p, lay, role = pool.instance.precision, _Lay(pool), pool.role
    frac, mtp = pool.instance.runtime.mem_fraction, pool.instance.mtp is not None
    args = [
        f"python -m sglang.launch_server --model-path {checkpoint(q, pool)} --trust-remote-code",
        f"--tp-size {lay.tp * lay.dp}",
    ]
    if lay.dp > 1:
        args.append(f"--dp-size {lay.dp} --enable-dp-attention")
    if lay.ep > 1:
        args.append(f"--ep-size {lay.ep}" + (" --moe-a2a-backend deepep" if lay.dp > 1 else ""))
        if lay.dp > 1 and lay.ep > 8:
            args.append("--enable-eplb --ep-num-redundant-experts 32")
    if lay.pp > 1:
        args.append(f"--pp-size {lay.pp}")
    if p.kv_cache == "fp8":
        args.append("--kv-cache-dtype fp8_e4m3")
    if p.moe == "nvfp4":
        args.append("--quantization modelopt_fp4")
    args.append(f"--mem-fraction-static {frac}")
    if role != "prefill":
        args.append(f"--max-running-requests {batch} --cuda-graph-max-bs {min(batch // max(lay.dp, 1) or 1, 512)}")
        if mtp:
            args.append(
                "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
                "--speculative-num-draft-tokens 4"
            )
    if role in ("prefill", "decode"):
        args.append(f"--disaggregation-mode {role} --disaggregation-transfer-backend nixl")
    return " \\\n  ".join(args)


def _vllm(q: Question, pool: Pool, batch: int) -> str:
    p, lay, role = pool.instance.precision, _Lay(pool), pool.role
    frac, mtp = pool.instance.runtime.mem_fraction, pool.instance.mtp is not None
    args = [f"vllm serve {checkpoint(q, pool)} --trust-remote-code", f"--tensor-parallel-size {lay.tp}"]
    if lay.dp > 1:
        args.append(f"--data-parallel-size {lay.dp}")
    if lay.ep > 1:
        args.append("--enable-expert-parallel")
    if lay.pp > 1:
        args.append(f"--pipeline-parallel-size {lay.pp}")
    if p.kv_cache == "fp8":
        args.append("--kv-cache-dtype fp8")
    args.append(f"--gpu-memory-utilization {frac} --max-num-seqs {batch}")
    if mtp and role != "prefill":
        args.append(
            "--speculative-config '" + json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 3}) + "'"
        )
    if role in ("prefill", "decode"):
        kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
        args.append("--kv-transfer-config '" + json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role}) + "'")
    return " \\\n  ".join(args)


def _trtllm(q: Question, pool: Pool, batch: int) -> str:
    lay, role = _Lay(pool), pool.role
    frac, mtp, p = pool.instance.runtime.mem_fraction, pool.instance.mtp is not None, pool.instance.precision
    options: dict[str, object] = {
        "tensor_parallel_size": lay.tp * lay.dp,
        "moe_expert_parallel_size": lay.ep,
        "pipeline_parallel_size": lay.pp,
        "enable_attention_dp": lay.dp > 1,
        "max_batch_size": batch,
        "kv_cache_config": {
            "dtype": "fp8" if p.kv_cache == "fp8" else "auto",
            "free_gpu_memory_fraction": frac,
        },
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": min(batch, 512)},
    }
    if lay.dp > 1 and lay.ep > 8:
        options["moe_config"] = {"backend": "WIDEEP"}
    if mtp and role != "prefill":
        options["speculative_config"] = {"decoding_type": "MTP", "num_nextn_predict_layers": 3}
    if role in ("prefill", "decode"):
        options["cache_transceiver_config"] = {"backend": "NIXL"}
    yaml_text = json.dumps(options, indent=2)
    return (
        f"cat > {role}.yaml <<'EOF'\n{yaml_text}\nEOF\n"
        f"trtllm-serve {checkpoint(q, pool)} --backend pytorch --extra_llm_api_options {role}.yaml"
    )


class _Lay:
    """The parallelism fields the engines' flags name."""

    def __init__(self, pool: Pool) -> None:
        par = pool.parallel
        self.gpus, self.tp, self.dp, self.ep, self.pp = par.gpus, par.tp, par.dp_attention, par.ep, par.pp
        self.label = layout_label(par)


def launch_commands(q: Question, r: Recommendation) -> dict[str, str]:
    dep = r.deployment
    out: dict[str, str] = {}
    for engine, fn in (("sglang", _sglang), ("vllm", _vllm), ("trtllm", _trtllm)):
        parts = []
        for pool in dep.pools:
            lay = _Lay(pool)
            batch = r.point.batch if pool.role != "prefill" else max(1, 16384 * lay.dp // q.isl)
            head = f"# {pool.role}: {pool.instances} instance(s) of {lay.gpus} GPU(s), {lay.label}"
            parts.append(f"{head}\n{fn(q, pool, batch)}")
        out[engine] = "\n\n".join(parts)
    if dep.mode == "disaggregated":
        out["dynamo"] = _dynamo(q, dep, r.point.batch)
    return out


def _dynamo(q: Question, dep: Deployment, batch: int) -> str:
    pre, dec = dep.first("prefill"), dep.first("decode")
    assert pre is not None
    assert dec is not None
    graph = {
        "Frontend": {"replicas": 1, "router": "kv"},
        "PrefillWorker": {
            "replicas": pre.instances,
            "gpus": pre.gpus_per_instance,
            "engine": q.engine,
            "parallelism": layout_label(pre.parallel),
        },
        "DecodeWorker": {
            "replicas": dec.instances,
            "gpus": dec.gpus_per_instance,
            "engine": q.engine,
            "parallelism": layout_label(dec.parallel),
            "max_batch_size": batch,
        },
        "kv_transfer": "nixl",
    }
    return "# Dynamo disaggregated graph (one entry per worker kind)\n" + json.dumps(graph, indent=2)
