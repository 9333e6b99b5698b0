"""Launch commands that realise a recommendation: SGLang, vLLM and TensorRT-LLM, and a Dynamo
disaggregated layout. Flags set the parallelism, precision (checkpoint and KV cache), batch cap,
memory fraction and MTP. Flag names follow each engine's documented CLI (SGLang server
arguments, `vllm serve`, `trtllm-serve` with an extra-options YAML, Dynamo's graph config); a
recommendation an engine cannot express says so instead of printing a wrong command.
"""

from __future__ import annotations

import json

from planner.question import Question
from planner.score import Point
from planner.space import Candidate, Layout

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


def checkpoint(q: Question, c: Candidate) -> str:
    return CHECKPOINTS.get((q.model, c.precision.moe)) or CHECKPOINTS.get((q.model, c.precision.dense)) or q.model


def _sglang(q: Question, c: Candidate, lay: Layout, batch: int, role: str) -> str:
    p = c.precision
    args = [
        f"python -m sglang.launch_server --model-path {checkpoint(q, c)} --trust-remote-code",
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
    args.append(f"--mem-fraction-static {c.mem_fraction}")
    if role != "prefill":
        args.append(f"--max-running-requests {batch} --cuda-graph-max-bs {min(batch // max(lay.dp, 1) or 1, 512)}")
        if c.mtp:
            args.append(
                "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
                "--speculative-num-draft-tokens 4"
            )
    if role in ("prefill", "decode"):
        args.append(f"--disaggregation-mode {role} --disaggregation-transfer-backend nixl")
    return " \\\n  ".join(args)


def _vllm(q: Question, c: Candidate, lay: Layout, batch: int, role: str) -> str:
    p = c.precision
    args = [f"vllm serve {checkpoint(q, c)} --trust-remote-code", f"--tensor-parallel-size {lay.tp}"]
    if lay.dp > 1:
        args.append(f"--data-parallel-size {lay.dp}")
    if lay.ep > 1:
        args.append("--enable-expert-parallel")
    if lay.pp > 1:
        args.append(f"--pipeline-parallel-size {lay.pp}")
    if p.kv_cache == "fp8":
        args.append("--kv-cache-dtype fp8")
    args.append(f"--gpu-memory-utilization {c.mem_fraction} --max-num-seqs {batch}")
    if c.mtp and role != "prefill":
        args.append(
            "--speculative-config '" + json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 3}) + "'"
        )
    if role in ("prefill", "decode"):
        kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
        args.append("--kv-transfer-config '" + json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role}) + "'")
    return " \\\n  ".join(args)


def _trtllm(q: Question, c: Candidate, lay: Layout, batch: int, role: str) -> str:
    options: dict[str, object] = {
        "tensor_parallel_size": lay.tp * lay.dp,
        "moe_expert_parallel_size": lay.ep,
        "pipeline_parallel_size": lay.pp,
        "enable_attention_dp": lay.dp > 1,
        "max_batch_size": batch,
        "kv_cache_config": {
            "dtype": "fp8" if c.precision.kv_cache == "fp8" else "auto",
            "free_gpu_memory_fraction": c.mem_fraction,
        },
        "cuda_graph_config": {"enable_padding": True, "max_batch_size": min(batch, 512)},
    }
    if lay.dp > 1 and lay.ep > 8:
        options["moe_config"] = {"backend": "WIDEEP"}
    if c.mtp and role != "prefill":
        options["speculative_config"] = {"decoding_type": "MTP", "num_nextn_predict_layers": 3}
    if role in ("prefill", "decode"):
        options["cache_transceiver_config"] = {"backend": "NIXL"}
    yaml_text = json.dumps(options, indent=2)
    return (
        f"cat > {role}.yaml <<'EOF'\n{yaml_text}\nEOF\n"
        f"trtllm-serve {checkpoint(q, c)} --backend pytorch --extra_llm_api_options {role}.yaml"
    )


def launch_commands(q: Question, c: Candidate, p: Point) -> dict[str, str]:
    out: dict[str, str] = {}
    pools = (
        [("aggregated", c.decode, p.decode_instances)]
        if c.prefill is None
        else [("prefill", c.prefill, p.prefill_instances), ("decode", c.decode, p.decode_instances)]
    )
    for engine, fn in (("sglang", _sglang), ("vllm", _vllm), ("trtllm", _trtllm)):
        parts = []
        for role, lay, n in pools:
            batch = p.batch if role != "prefill" else max(1, 16384 * lay.dp // q.isl)
            parts.append(f"# {role}: {n} instance(s) of {lay.gpus} GPU(s), {lay.label}\n{fn(q, c, lay, batch, role)}")
        out[engine] = "\n\n".join(parts)
    if c.prefill is not None:
        out["dynamo"] = _dynamo(q, c, p)
    return out


def _dynamo(q: Question, c: Candidate, p: Point) -> str:
    assert c.prefill is not None
    graph = {
        "Frontend": {"replicas": 1, "router": "kv"},
        "PrefillWorker": {
            "replicas": p.prefill_instances,
            "gpus": c.prefill.gpus,
            "engine": q.engine,
            "parallelism": c.prefill.label,
        },
        "DecodeWorker": {
            "replicas": p.decode_instances,
            "gpus": c.decode.gpus,
            "engine": q.engine,
            "parallelism": c.decode.label,
            "max_batch_size": p.batch,
        },
        "kv_transfer": "nixl",
    }
    return "# Dynamo disaggregated graph (one entry per worker kind)\n" + json.dumps(graph, indent=2)
