"""vLLM launch commands: `vllm serve` per instance. Limits are per engine core (one per
data-parallel rank): `--max-num-seqs` is the instance's batch split over its DP ranks. An instance
larger than a node runs data-parallel ranks on every node (`--data-parallel-size-local`,
`--data-parallel-address`, `--data-parallel-rpc-port`; `--headless` with
`--data-parallel-start-rank` on the other nodes) or, without DP, one TP/PP group over nodes with
the multiprocessing executor (`--nnodes`, `--node-rank`, `--master-addr`). Disaggregated pools
get the NIXL KV connector (`--kv-transfer-config`); vLLM ships no router of its own, so the
front door of a disaggregated plan is the Dynamo deployment.
"""

from __future__ import annotations

import json

from planner.launch.common import HEAD_IP, PORT, Inst, Weights, node_rank, render, tool

DP_RPC_PORT = 13345


def mtp_method(mla: bool) -> str:
    """vLLM SpeculativeConfig.method: DeepSeek's MTP layers on MLA models, generic MTP otherwise."""
    return "deepseek_mtp" if mla else "mtp"


def engine_args(i: Inst, w: Weights, mla: bool) -> list[tuple[str, ...]]:
    """Engine flags for one instance (no command, no model), shared with the Dynamo worker."""
    t = tool("vllm", "serve")
    a: list[tuple[str, ...]] = [(t.f("trust_remote_code"),), (t.f("tp"), str(i.tp))]
    if i.dp > 1:
        a.append((t.f("dp"), str(i.dp)))
    if i.ep > 1:
        a.append((t.f("ep"),))
        if i.eplb:
            a.append((t.f("eplb"),))
            if i.redundant_experts:  # the copies the plan priced (vLLM's EPLBConfig places none by default)
                a.append((t.f("eplb_config"), json.dumps({"num_redundant_experts": i.redundant_experts})))
    if i.pp > 1:
        a.append((t.f("pp"), str(i.pp)))
    if i.kv_fp8:
        a.append((t.f("kv_dtype"), "fp8"))
    if w.online_fp8:
        a.append((t.f("quantization"), "fp8"))
    a.append((t.f("mem_fraction"), f"{i.mem_fraction:g}"))
    if i.offload_groups is not None:  # the V2 prefetch offloader, as priced
        g, k = i.offload_groups
        a += [(t.f("offload_backend"), "prefetch"), (t.f("offload_group_size"), str(g))]
        a += [(t.f("offload_num_in_group"), str(k)), (t.f("offload_prefetch_step"), "1")]
    a.append((t.f("chunked_prefill"), str(i.prefill_tokens_per_rank)))
    if i.role != "prefill":
        a.append((t.f("max_running"), str(i.batch_per_rank)))
        if i.mtp_drafts:
            spec = {"method": mtp_method(mla), "num_speculative_tokens": i.mtp_drafts}
            a.append((t.f("spec_config"), json.dumps(spec)))
    if i.role in ("prefill", "decode"):
        kv_role = "kv_producer" if i.role == "prefill" else "kv_consumer"
        a.append((t.f("kv_transfer"), json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role})))
    return a


def pool_commands(i: Inst, w: Weights, mla: bool) -> str:
    t = tool("vllm", "serve")
    base = [(t.command, w.path), *engine_args(i, w, mla), (t.f("port"), str(PORT))]
    if i.nodes == 1:
        return f"{i.head}\n{w.note}\n{render(base)}"
    if i.dp > 1 and i.gpus_per_node % (i.tp * i.pp) == 0 and i.gpus % i.gpus_per_node == 0:
        local = i.gpus_per_node // (i.tp * i.pp)
        dp = [(t.f("dp_local"), str(local)), (t.f("dp_address"), HEAD_IP), (t.f("dp_rpc_port"), str(DP_RPC_PORT))]
        start = "$((" + node_rank(i.nodes) + f" * {local}))"
        others = [*base, *dp, (t.f("headless"),), (t.f("dp_start_rank"), start)]
        return (
            f"{i.head}\n{w.note}\n# first node of the instance (HEAD_NODE_IP): API server and DP ranks 0..{local - 1}\n"
            f"{render([*base, *dp])}\n"
            f"# each other node (NODE_RANK = 1..{i.nodes - 1}): {local} more DP ranks, no API server\n"
            f"{render(others)}"
        )
    if i.dp == 1:
        mp = [(t.f("nnodes"), str(i.nodes)), (t.f("node_rank"), node_rank(i.nodes)), (t.f("master_addr"), HEAD_IP)]
        return (
            f"{i.head}\n{w.note}\n# first node (HEAD_NODE_IP, NODE_RANK=0) serves the API\n{render([*base, *mp])}\n"
            f"# each other node (NODE_RANK = 1..{i.nodes - 1})\n{render([*base, *mp, (t.f('headless'),)])}"
        )
    why = f"DP ranks of TP x PP = {i.tp * i.pp} GPUs do not tile {i.gpus_per_node}-GPU nodes"
    return f"{i.head}\n# vLLM: {why}; not printed"


def proxy_note() -> str:
    return (
        "# vLLM has no prefill/decode router of its own: route with the Dynamo deployment below "
        "(or any proxy that sends each request to a prefill server, then to a decode server)"
    )
