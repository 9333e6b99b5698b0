"""SGLang launch commands: one `sglang.launch_server` per instance (per node when an instance spans
nodes: `--nnodes`, `--node-rank`, `--dist-init-addr`), and for disaggregated plans prefill and
decode servers with their transfer backend and bootstrap port behind the PD router
(`sglang_router.launch_router --pd-disaggregation`). Flag names come from the `launch:` section
of planner/engines/sglang.yaml; this module decides only which flags a pool needs.
"""

from __future__ import annotations

from planner.launch.common import HEAD_IP, PORT, ROUTER_PORT, Inst, Weights, host_var, node_rank, render, tool

BOOTSTRAP_PORT = 8998  # SGLang's default disaggregation bootstrap port
DIST_PORT = 20000  # torch.distributed rendezvous port on the instance's first node


def server_args(i: Inst, w: Weights) -> list[tuple[str, ...]]:
    """Server flags for one instance (no command word), shared with the Dynamo worker. MTP runs as
    SGLang's EAGLE speculative decoding over the model's own MTP layers."""
    t = tool("sglang", "serve")
    a: list[tuple[str, ...]] = [(t.f("model"), w.path), (t.f("trust_remote_code"),), (t.f("tp"), str(i.tp * i.dp))]
    if i.dp > 1:
        a.append((t.f("dp"), str(i.dp)))
    a += _expert_args(i)
    if i.pp > 1:
        a.append((t.f("pp"), str(i.pp)))
    if i.kv_fp8:
        a.append((t.f("kv_dtype"), "fp8_e4m3"))
    if w.online_fp8:
        a.append((t.f("quantization"), "fp8"))
    elif w.fmt == "nvfp4":
        a.append((t.f("quantization"), "modelopt_fp4"))
    a.append((t.f("mem_fraction"), f"{i.mem_fraction:g}"))
    if i.offload_groups is not None:  # the prefetch offloader (srt/offloader.py), as priced
        g, k = i.offload_groups
        a += [(t.f("offload_group_size"), str(g)), (t.f("offload_num_in_group"), str(k))]
        a.append((t.f("offload_prefetch_step"), "1"))
    a.append((t.f("chunked_prefill"), str(i.prefill_tokens_per_rank * i.dp)))
    if i.role != "prefill":
        a.append((t.f("max_running"), str(i.batch)))
        a.append((t.f("cuda_graph_max_bs"), str(i.graph_batch_per_rank)))
        if i.mtp_drafts:
            n = i.mtp_drafts
            a += [(t.f("spec_algo"), "EAGLE"), (t.f("spec_steps"), str(n))]
            a += [(t.f("spec_topk"), "1"), (t.f("spec_draft"), str(n + 1))]
    if i.role in ("prefill", "decode"):
        a += [(t.f("disagg_mode"), i.role), (t.f("disagg_backend"), "nixl")]
        if i.role == "prefill":
            a.append((t.f("bootstrap_port"), str(BOOTSTRAP_PORT)))
    return a


def _expert_args(i: Inst) -> list[tuple[str, ...]]:
    """Expert parallelism: EP size, DeepEP all-to-all with attention DP, EPLB as priced."""
    if i.ep <= 1:
        return []
    t = tool("sglang", "serve")
    a: list[tuple[str, ...]] = [(t.f("ep"), str(i.ep))]
    if i.wide_ep:
        a.append((t.f("a2a"), "deepep"))
    if i.eplb:
        a.append((t.f("eplb"),))
        if i.redundant_experts:
            a.append((t.f("redundant"), str(i.redundant_experts)))
    return a


def pool_commands(i: Inst, w: Weights) -> str:
    t = tool("sglang", "serve")
    a = [(t.command,), *server_args(i, w), (t.f("host"), "0.0.0.0"), (t.f("port"), str(PORT))]
    if i.nodes > 1:
        a += [(t.f("nnodes"), str(i.nodes)), (t.f("node_rank"), node_rank(i.nodes))]
        a.append((t.f("dist_init_addr"), f"{HEAD_IP}:{DIST_PORT}"))
        how = (
            f"# run on each of the instance's {i.nodes} nodes, with HEAD_NODE_IP = its first node and"
            f" NODE_RANK = 0..{i.nodes - 1}\n"
        )
        return f"{i.head}\n{w.note}\n{how}{render(a)}"
    return f"{i.head}\n{w.note}\n{render(a)}"


def router(pre: Inst, dec: Inst) -> str:
    """The PD router: every prefill instance with its bootstrap port, every decode instance."""
    t = tool("sglang", "router")
    a: list[tuple[str, ...]] = [(t.command,), (t.f("pd"),)]
    a += [(t.f("prefill"), _url("prefill", k), str(BOOTSTRAP_PORT)) for k in range(pre.instances)]
    a += [(t.f("decode"), _url("decode", k)) for k in range(dec.instances)]
    a += [(t.f("host"), "0.0.0.0"), (t.f("port"), str(ROUTER_PORT))]
    how = "# PD router (the OpenAI endpoint): PREFILL_k_HOST / DECODE_k_HOST = first node of each instance\n"
    return how + render(a)


def _url(role: str, k: int) -> str:
    return f"http://{host_var(role, k)}:{PORT}"
