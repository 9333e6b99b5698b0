"""TensorRT-LLM launch commands: `trtllm-serve` (PyTorch backend) with an LLM API options YAML per
pool. With attention DP, `max_batch_size` and the CUDA-graph batch are per rank. An instance
larger than a node starts one MPI rank per GPU under Slurm (`srun ... trtllm-llmapi-launch
trtllm-serve`). Disaggregated plans run context (prefill) and generation (decode) servers with a
cache transceiver and the `trtllm-serve disaggregated` proxy over a disaggregated-serving config
YAML. Option names come from planner/engines/trtllm.yaml (`launch:`).
"""

from __future__ import annotations

import yaml

from planner.launch.common import CHECKPOINT_HOLE, PORT, ROUTER_PORT, Inst, Weights, host_var, render, tool

SRUN = "srun"  # Slurm launcher; its options are in flags/slurm-srun.json
ROLE_FILE = {"prefill": "ctx", "decode": "gen", "aggregated": "agg"}


def options(i: Inst) -> dict[str, object]:
    """LLM API options (the --extra_llm_api_options YAML) for one instance."""
    t = tool("trtllm", "serve")
    o: dict[str, object] = {
        t.f("tp"): i.tp * i.dp,
        t.f("ep"): i.ep,
        t.f("pp"): i.pp,
        t.f("dp_attention"): i.dp > 1,
        t.f("chunked_prefill"): i.prefill_tokens_per_rank,
        t.f("enable_chunked"): i.chunked_prefill,
        t.f("kv_cache"): {"dtype": "fp8" if i.kv_fp8 else "auto", "free_gpu_memory_fraction": i.mem_fraction},
    }
    if i.role != "prefill":
        o[t.f("max_running")] = i.batch_per_rank
        o[t.f("cuda_graphs")] = {"enable_padding": True, "max_batch_size": i.graph_batch_per_rank}
        if i.mtp_drafts:
            o[t.f("spec")] = {"decoding_type": "MTP", "num_nextn_predict_layers": i.mtp_drafts}
    moe: dict[str, object] = {"backend": "WIDEEP"} if i.wide_ep and i.ep > 8 else {}
    if i.eplb:  # online EPLB over experts + redundant slots (MoeLoadBalancerConfig)
        moe["load_balancer"] = {"num_slots": i.experts + i.redundant_experts, "layer_updates_per_iter": 1}
    if moe:
        o[t.f("moe")] = moe
    if i.role in ("prefill", "decode"):
        o[t.f("transceiver")] = {"backend": "NIXL"}
    return o


def usable(w: Weights) -> Weights:
    """TRT-LLM loads pre-quantized checkpoints; BF16 weights planned as FP8 need one first."""
    if not w.online_fp8:
        return w
    why = "TRT-LLM does not quantize BF16 weights at load: an FP8 (ModelOpt) checkpoint is needed"
    return Weights(CHECKPOINT_HOLE + why + "}", w.fmt, False, f"# weights: set CHECKPOINT ({why})", w.need)


def pool_commands(i: Inst, w: Weights) -> str:
    t, w = tool("trtllm", "serve"), usable(w)
    name = f"{ROLE_FILE[i.role]}.yaml"
    body = yaml.safe_dump(options(i), sort_keys=False).rstrip()
    serve = [
        (t.command, w.path),
        (t.f("backend"), "pytorch"),
        (t.f("trust_remote_code"),),
        (t.f("host"), "0.0.0.0"),
        (t.f("port"), str(PORT)),
        (t.f("options_file"), name),
    ]
    text = f"{i.head}\n{w.note}\ncat > {name} <<'EOF'\n{body}\nEOF\n"
    if i.nodes == 1:
        return text + render(serve)
    m = tool("trtllm", "mpi")
    launcher = (SRUN, m.f("nodes"), str(i.nodes), m.f("tasks_per_node"), str(i.gpus_per_node), f"{m.f('mpi')}=pmix")
    how = (
        f"# one MPI rank per GPU over the instance's {i.nodes} nodes (Slurm; with Open MPI:"
        f" mpirun -n {i.gpus} -H <hosts> {m.command} trtllm-serve ...)\n"
    )
    return text + how + render([launcher, (m.command, *serve[0]), *serve[1:]])


def disagg_proxy(pre: Inst, dec: Inst) -> str:
    """The disaggregated-serving proxy and its config: every context and generation server."""
    d = tool("trtllm", "disagg")
    cfg = {
        "hostname": "0.0.0.0",
        "port": ROUTER_PORT,
        "context_servers": {
            "num_instances": pre.instances,
            "urls": [f"{host_var('prefill', k)}:{PORT}" for k in range(pre.instances)],
        },
        "generation_servers": {
            "num_instances": dec.instances,
            "urls": [f"{host_var('decode', k)}:{PORT}" for k in range(dec.instances)],
        },
    }
    body = yaml.safe_dump(cfg, sort_keys=False, width=200).rstrip()
    return (
        "# disaggregated proxy (the OpenAI endpoint): PREFILL_k_HOST / DECODE_k_HOST = first node of each instance\n"
        f"cat > disagg.yaml <<EOF\n{body}\nEOF\n" + render([(d.command,), (d.f("config"), "disagg.yaml")])
    )
