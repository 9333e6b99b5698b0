"""The layout and speculative decoding an MLPerf submission's own harness config states, for the
anchors whose result does not (v6.0 DeepSeek-R1 Interactive: `deployment` and `mtp` unknown). Used by
bench/mlperf_configs.py; reads configs, writes nothing.

The config is closed/<submitter>/configs/<system>/<Scenario>/<benchmark>.py, where <system> is the
result's system name without its `_TRT` suffix (the harness's own naming). Two shapes:
- one aggregated instance: `tensor_parallelism` x `pipeline_parallelism` GPUs, `moe_expert_parallelism`,
  attention DP when `trtllm_build_flags.enable_attention_dp`, and `trtllm_runtime_flags.speculative_decoding`;
- a Dynamo disaggregated cluster (`dynamo_cluster`): `num_prefill_workers` and `num_decode_workers`, each
  worker a trtllm-serve whose TRT-LLM options are the yml named by `trtllm_yml_override` (a /work/configs/...
  path inside the harness container, i.e. closed/<submitter>/configs/... here): tensor_parallel_size GPUs,
  moe_expert_parallel_size, enable_attention_dp, max_batch_size, max_num_tokens, speculative_config; the
  frontend's `router_mode` kv is the planner's kv_aware router.
A worker with attention DP runs TP 1 x DP tensor_parallel_size (TRT-LLM's enable_attention_dp); an
aggregated system holds its GPU count ('total GPUs N' in the notes) / (tp x pp) instances. MTP
(`decoding_type: MTP`) gives `mtp.draft_tokens` = num_nextn_predict_layers (the draft depth); no
submission states an acceptance rate, so it stays unknown; a config without speculative decoding gives
mtp null. The KV-cache dtype (checkpoint kv_cache_dtype, or the workers' kv_cache_config.dtype when they
agree) is returned too. Not read: memory fractions of Dynamo workers (the planner's mem_fraction is not
per pool), block reuse, moe_config backends, frontend counts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from mlperf_harness import ConfigError, git_show, read_config, setting

ROUTERS = {"kv": "kv_aware", "round-robin": "round_robin", "round_robin": "round_robin"}


def config_path(anchor: dict[str, Any]) -> str:
    """closed/<submitter>/configs/<system>/<Scenario>/<benchmark>.py of an anchor's result url."""
    tail = str(anchor["url"]).split("/closed/", 1)[1].split("/")
    submitter, system, bench, scenario = tail[0], tail[2], tail[3], tail[4]
    system = system[: -len("_TRT")] if system.endswith("_TRT") else system
    return f"closed/{submitter}/configs/{system}/{scenario}/{bench}.py"


def _pool(tp: int, pp: int, ep: int | None, adp: bool, instances: int = 1) -> dict[str, int]:
    """One pool of `instances` instances of tp x pp GPUs; with attention DP the tp ranks run DP."""
    return {
        "instances": instances,
        "gpus_per_instance": tp * pp,
        "tp": 1 if adp else tp,
        "dp_attention": tp if adp else 1,
        "ep": int(ep or 1),
        "pp": pp,
    }


def _mtp(spec: Any) -> dict[str, int] | None:
    """MTP drafts per step: the draft depth (num_nextn_predict_layers / max_draft_len; max_total_draft_tokens
    is a tree's size, the depth only at speculative top-k 1, the only top-k these configs use)."""
    if not isinstance(spec, dict) or spec.get("decoding_type") != "MTP":
        return None
    drafts = spec.get("num_nextn_predict_layers") or spec.get("max_draft_len") or spec.get("max_total_draft_tokens")
    return {"draft_tokens": int(drafts)} if drafts else None


def system_gpus(anchor: dict[str, Any]) -> int | None:
    """The result's system GPU count, as the anchor's notes quote it ('total GPUs N')."""
    m = re.search(r"total GPUs (\d+)", str(anchor.get("notes", "")))
    return int(m.group(1)) if m else None


def read_layout(anchor: dict[str, Any], repo: Path, commit: str) -> tuple[dict[str, Any], list[str]] | None:
    """{deployment, mtp, runtime, router} the config states and the quoted settings, or None when the
    submission publishes no config for the scenario or the config names no plain layout (no
    tensor_parallelism and no Dynamo cluster). A config this reader cannot follow is a ConfigError."""
    path = config_path(anchor)
    text = git_show(repo, commit, path)
    if text is None:
        return None
    cfg = read_config(text, path)
    cluster = cfg.get("dynamo_cluster")
    if isinstance(cluster, dict):
        return _disaggregated(cluster, repo, commit, path)
    tp, pp = setting(cfg, "tensor_parallelism"), setting(cfg, "pipeline_parallelism") or 1
    total = system_gpus(anchor)
    if not isinstance(tp, int) or not isinstance(pp, int) or total is None or total % (tp * pp):
        return None  # not one plain layout (e.g. a config of several cores, or GPUs left over): left unknown
    adp = bool(setting(cfg, "trtllm_build_flags", "enable_attention_dp"))
    pool = _pool(tp, pp, setting(cfg, "moe_expert_parallelism"), adp, total // (tp * pp))
    mtp = _mtp(setting(cfg, "trtllm_runtime_flags", "speculative_decoding"))
    said = [
        f"tensor_parallelism {tp}",
        f"pipeline_parallelism {pp}",
        f"moe_expert_parallelism {pool['ep']}",
        f"enable_attention_dp {adp}",
        f"{pool['instances']} instance(s) = {total} system GPUs / {tp * pp}",
        f"speculative_decoding MTP {mtp['draft_tokens']} draft tokens" if mtp else "no speculative decoding (mtp null)",
    ]
    kv = setting(cfg, "trtllm_checkpoint_flags", "kv_cache_dtype")
    head = f"Deployment read from the harness config {path}: "
    found = {"deployment": {"aggregated": pool}, "mtp": mtp, "kv_cache": kv}
    return found, [head, "; ".join(said + ([f"kv_cache_dtype {kv}"] if kv else []))]


def _disaggregated(cluster: dict[str, Any], repo: Path, commit: str, path: str) -> tuple[dict[str, Any], list[str]]:
    submitter = path.split("/")[1]
    deployment: dict[str, Any] = {}
    tokens: dict[str, int] = {}
    running: dict[str, int] = {}
    mtps: list[dict[str, int] | None] = []
    kvs: list[Any] = []
    said: list[str] = []
    for role in ("prefill", "decode"):
        yml = str(setting(cluster, role, "trtllm_yml_override") or "")
        rel = f"closed/{submitter}/configs/" + yml.split("/configs/", 1)[-1]
        text = git_show(repo, commit, rel)
        if not yml or text is None:
            raise ConfigError(f"{path}: {role} worker yml {yml!r} not found as {rel}")
        w = yaml.safe_load(text)
        n = int(cluster[f"num_{role}_workers"])
        tp, pp = int(w["tensor_parallel_size"]), int(w.get("pipeline_parallel_size") or 1)
        deployment[role] = _pool(tp, pp, w.get("moe_expert_parallel_size"), bool(w.get("enable_attention_dp")), n)
        kvs.append((w.get("kv_cache_config") or {}).get("dtype"))
        tokens[role], running[role] = int(w["max_num_tokens"]), int(w["max_batch_size"])
        mtps.append(_mtp(w.get("speculative_config")))
        said.append(
            f"{n} {role} workers ({rel}: tensor_parallel_size {w['tensor_parallel_size']}, moe_expert_parallel_size "
            f"{w.get('moe_expert_parallel_size')}, enable_attention_dp {w.get('enable_attention_dp')}, max_batch_size "
            f"{w['max_batch_size']}, max_num_tokens {w['max_num_tokens']}, speculative_config "
            f"{(w.get('speculative_config') or {}).get('decoding_type')})"
        )
    router = ROUTERS.get(str(setting(cluster, "frontend", "router_mode")))
    layout = {
        "deployment": deployment,
        "mtp": mtps[-1],  # decode runs the drafts
        "runtime": {"max_prefill_tokens": tokens, "max_running_per_rank": running, "backend": "pytorch"},
        "router": router,
        "kv_cache": kvs[-1] if len(set(kvs)) == 1 else None,  # one KV dtype for the deployment
    }
    said.append(f"frontend router_mode {setting(cluster, 'frontend', 'router_mode')}")
    return layout, [f"Deployment read from the harness config {path} (Dynamo disaggregated cluster): ", "; ".join(said)]
