"""Writes what each MLPerf submission states about its own run into the MLPerf anchor files
(validation/public/mlperf-inference-v5-1.yaml, mlperf-inference-v6-0.yaml):

1. LoadGen's run (every Server and Interactive anchor): `client: mlperf-loadgen-server` (the anchor is
   simulated as LoadGen ran it: planner/search/loadgen.py) and `loadgen:` min_duration_ms and
   min_query_count, read from the 'Test Parameters Used' of the anchor's own mlperf_log_summary.txt;
   `serving_path: true` for a TensorRT-LLM result of a benchmark NVIDIA's harness runs in its TRTLLM_ENDPOINT
   core (the samples reach trtllm-serve or a Dynamo frontend over HTTP), whether or not its notes name the
   harness config.
2. The layout and MTP of results that state none (v6.0 DeepSeek-R1 Interactive), read from the
   submission's own harness config by bench/mlperf_layout.py; a layout still unknown gets the system's
   GPU count (`deployment.gpus`, the notes' 'total GPUs N') (aggregated, or a Dynamo disaggregated
   cluster whose workers' TRT-LLM ymls give per-pool max_num_tokens / max_batch_size and whose
   frontend router_mode kv is `simulation.router: kv_aware`).
3. The engine settings of the submission's harness config (anchors whose notes name the config their
   layout was read from): `runtime.max_prefill_tokens` = TRT-LLM max_num_tokens (tokens per iteration
   and rank), `runtime.max_running_per_rank` = gpu_batch_size (the harness makes it TRT-LLM's
   max_batch_size, per attention-DP rank: code/common/gbs.py, llmlib/config.py TrtllmHarnessConfig),
   `runtime.mem_fraction` = kvcache_free_gpu_mem_frac (TRT-LLM KvCacheConfig.free_gpu_memory_fraction),
   `runtime.chunked_prefill` = enable_chunked_context where the config sets it,
   `runtime.backend` = the benchmark's harness core (llmlib cores: TRTLLM_EXECUTOR runs a TensorRT engine
   in the C++ executor; TRTLLM_ENDPOINT runs trtllm-serve with `trtllm_backend`, default pytorch).
   The notes quote the settings read and the ones the planner has nowhere to put (scheduler policy,
   the harness's per-core concurrency cap, its traffic distribution).

It reads the results repositories' stored snapshots with git (paths below; commits pinned), never a
result value, and changes nothing else. Idempotent: it replaces what it wrote before.

Usage: python bench/mlperf_configs.py [--v51 GITDIR] [--v60 GITDIR]
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlperf_harness import ConfigError, git_show, read_config, read_log_params, setting
from mlperf_layout import read_layout, system_gpus

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = {
    "v5-1": {
        "file": ROOT / "validation/public/mlperf-inference-v5-1.yaml",
        "repo": "/work/.mirror/mlcommons+inference_results_v5.1/repo",
        "commit": "965182b03376a00fcae415c54e560e1c83937932",
        "name": "mlcommons/inference_results_v5.1",
    },
    "v6-0": {
        "file": ROOT / "validation/public/mlperf-inference-v6-0.yaml",
        "repo": "/work/.mirror/gbeezybez+inference_results_v6.0/repo",
        "commit": "ab33b2144a9f822f69d24f78569f993d195ee7e5",  # MLCommons' 'Publishing Results'
        "name": "mlcommons/inference_results_v6.0",
    },
}
CLIENT = "mlperf-loadgen-server"
MARK = " Harness config settings:"  # the notes sentence this script writes starts here
HEADER = "# Engine settings and LoadGen run"  # first line of the header block this script writes
WORKLOAD = "# isl: the mean input tokens"  # the block bench/mlperf_workload.py writes
# the harness core each benchmark runs by default (closed/NVIDIA/code/<benchmark>/tensorrt/__init__.py
# DEFAULT_CORE_TYPE, both rounds): TRTLLM_EXECUTOR = TensorRT engine + C++ executor, TRTLLM_ENDPOINT =
# trtllm-serve (llmlib/config.py TrtllmExtraYAMLConfig: 'trtllm_backend' default 'pytorch')
CORE = {"llama3_1-8b": "executor", "deepseek-r1": "endpoint", "gpt-oss-120b": "endpoint"}


def header(r: dict[str, Any]) -> list[str]:
    text = (
        "Engine settings and LoadGen run: written by bench/mlperf_configs.py from "
        f"github.com/{r['name']} at commit {r['commit']}. Every Server and Interactive anchor has client "
        "mlperf-loadgen-server (simulated as LoadGen runs it: planner/search/loadgen.py) and `loadgen` = the "
        "min_duration and min_query_count of its log's 'Test Parameters Used'. Where the notes name the harness "
        "config the layout was read from, runtime holds its engine settings: max_prefill_tokens = max_num_tokens, "
        "max_running_per_rank = gpu_batch_size (the harness's TRT-LLM max_batch_size, per attention-DP rank), "
        "mem_fraction = kvcache_free_gpu_mem_frac, backend = tensorrt for the TRTLLM_EXECUTOR core (llama3.1-8b) "
        "and the config's trtllm_backend (default pytorch) for the TRTLLM_ENDPOINT core (deepseek-r1, "
        "gpt-oss-120b); the notes quote them and the settings the planner has no field for. loadgen.serving_path "
        "is true for a TensorRT-LLM result of a benchmark that core runs (TRTLLM_ENDPOINT: the harness posts "
        "samples to trtllm-serve or a Dynamo frontend over HTTP)."
    )
    return textwrap.wrap(
        text, 118, initial_indent="# ", subsequent_indent="# ", break_long_words=False, break_on_hyphens=False
    )


def benchmark(anchor: dict[str, Any]) -> tuple[str, str]:
    """(benchmark, scenario) from the log url .../results/<system>/<benchmark>/<scenario>/..."""
    parts = str(anchor["url"]).split("/results/", 1)[1].split("/")
    return parts[1], parts[2]


def log_path(anchor: dict[str, Any]) -> str:
    return "closed/" + str(anchor["url"]).split("/closed/", 1)[1]


def engine_settings(cfg: dict[str, Any], bench: str) -> tuple[dict[str, Any], list[str]]:
    """(runtime fields, the settings quoted in notes) of one harness config."""
    rt = cfg.get("trtllm_runtime_flags") or {}
    name = bench.replace(".", "_")
    tokens = setting(cfg, "trtllm_runtime_flags", "max_num_tokens") or setting(
        cfg, "trtllm_build_flags", "max_num_tokens"
    )
    batch = setting(cfg, "trtllm_runtime_flags", "max_batch_size") or setting(cfg, "gpu_batch_size", name)
    frac = setting(cfg, "trtllm_runtime_flags", "kvcache_free_gpu_mem_frac")
    core = CORE[name]
    stated_backend = setting(cfg, "trtllm_runtime_flags", "trtllm_backend")
    backend = "tensorrt" if core == "executor" else (stated_backend or "pytorch")
    runtime: dict[str, Any] = {}
    said: list[str] = []
    if tokens:
        runtime["max_prefill_tokens"] = int(tokens)
        said.append(f"max_num_tokens {int(tokens)}")
    if batch:
        runtime["max_running_per_rank"] = int(batch)
        said.append(f"gpu_batch_size {int(batch)}")
    if frac:
        runtime["mem_fraction"] = float(frac)
        said.append(f"kvcache_free_gpu_mem_frac {frac}")
    runtime["backend"] = backend
    said.append(f"core {core.upper()} -> backend {backend}")
    adp = adp_balance(cfg, core)
    if adp:
        runtime.update(adp)
        said.append(
            f"attention_dp_config enable_balance (adp_balancing_enable, harness default True), "
            f"timeout_iters {adp['adp_balance_timeout_iters']}, "
            f"batching_wait_iters {adp['adp_balance_batching_wait_iters']}"
        )
    chunked = setting(cfg, "trtllm_runtime_flags", "enable_chunked_context") if "enable_chunked_context" in rt else None
    if chunked is not None:
        runtime["chunked_prefill"] = bool(chunked)
        said.append(f"enable_chunked_context {chunked}")
    keys = ("batch_scheduler_policy",) + (("max_concurrency",) if core == "endpoint" else ())
    other = [f"{k} {setting(cfg, 'trtllm_runtime_flags', k)}" for k in keys if k in rt]
    if setting(cfg, "trtllm_build_flags", "enable_attention_dp") is not None:
        other.append(f"enable_attention_dp {setting(cfg, 'trtllm_build_flags', 'enable_attention_dp')}")
    if cfg.get("traffic_distribution_policy"):
        other.append(f"traffic_distribution_policy {cfg['traffic_distribution_policy']}")
    return runtime, said + other


# The endpoint core's attention-DP balance defaults (llmlib/config.py TrtllmExtraYAMLConfig DEFAULT_RUNTIME_FLAGS,
# both rounds): 'adp_balancing_enable': True, 'adp_balancing_batching_wait_iters': 10,
# 'adp_balancing_timeout_iters': 500; _generate_extra_config_yaml writes attention_dp_config {enable_balance,
# batching_wait_iters, timeout_iters} when enable_attention_dp and adp_balancing_enable.
ADP_DEFAULTS = {
    "adp_balancing_enable": True,
    "adp_balancing_batching_wait_iters": 10,
    "adp_balancing_timeout_iters": 500,
}


def adp_balance(cfg: dict[str, Any], core: str) -> dict[str, int] | None:
    """TRT-LLM attention_dp_config the endpoint core writes for trtllm-serve, or None (off)."""
    if core != "endpoint" or not setting(cfg, "trtllm_build_flags", "enable_attention_dp"):
        return None
    flags = {
        k: (
            setting(cfg, "trtllm_runtime_flags", k) if (cfg.get("trtllm_runtime_flags") or {}).get(k) is not None else d
        )
        for k, d in ADP_DEFAULTS.items()
    }
    if not flags["adp_balancing_enable"]:
        return None
    return {
        "adp_balance_timeout_iters": int(flags["adp_balancing_timeout_iters"]),
        "adp_balance_batching_wait_iters": int(flags["adp_balancing_batching_wait_iters"]),
    }


def harness_cap(
    cfg: dict[str, Any], bench: str, runtime: dict[str, Any], anchor: dict[str, Any]
) -> tuple[int, str] | None:
    """The endpoint core's client-side cap (runtime max_concurrency: requests in flight per core, i.e. per
    instance; llmlib/cores/http_async_client.py holds the rest in the harness) where it is below the
    engine's own (max_batch_size x attention-DP ranks): the requests one instance runs at most."""
    if CORE[bench.replace(".", "_")] != "endpoint":
        return None
    mc = setting(cfg, "trtllm_runtime_flags", "max_concurrency")
    pool = anchor["deployment"].get("aggregated") or {}
    dp = pool.get("dp_attention")
    per_rank = runtime.get("max_running_per_rank")
    if not isinstance(mc, int) or mc <= 0 or not isinstance(dp, int) or not per_rank or mc >= per_rank * dp:
        return None
    why = (
        f" simulation.max_running_requests {mc} = the harness's max_concurrency per core (one instance), below "
        f"the engine's {per_rank} x {dp} ranks."
    )
    return mc, why


def _unknown(deployment: Any) -> bool:
    """A deployment the result leaves unstated: absent, `unknown`, or pools whose every field is unknown."""
    if deployment in (None, "unknown"):
        return True
    pools = [p for k, p in deployment.items() if k != "gpus"] if isinstance(deployment, dict) else []
    return bool(pools) and all(p == "unknown" or all(v == "unknown" for v in p.values()) for p in pools)


def with_system_gpus(anchor: dict[str, Any]) -> dict[str, Any]:
    """A layout still unknown keeps the system's GPU count, as the notes quote the result ('total GPUs N',
    the count its per-GPU value divides by): `deployment.gpus`, so the planner's search stays within it
    rather than the node or NVL72 domain it assumes for an unstated count."""
    gpus, dep = system_gpus(anchor), anchor.get("deployment")
    if gpus is None or not _unknown(dep) or not isinstance(dep, dict):
        return anchor
    return {**anchor, "deployment": {"gpus": gpus, **{k: v for k, v in dep.items() if k != "gpus"}}}


def settings(
    anchor: dict[str, Any], notes: str, r: dict[str, Any], cache: dict[str, Any]
) -> tuple[dict[str, Any], str, dict[str, Any], list[str]]:
    """(anchor, notes, runtime, notes to append) from the submission's harness config: the layout where the
    result states none (bench/mlperf_layout.py), then the engine settings of the config the notes name."""
    bench = benchmark(anchor)[0]
    found = None  # the config's layout, read once (bench/mlperf_layout.py)
    if _unknown(anchor.get("deployment")):
        found = read_layout(anchor, Path(r["repo"]), r["commit"])
        if found is not None:
            prec = dict(anchor.get("precision") or {})
            if found[0].get("kv_cache") and prec.get("kv_cache", "unknown") == "unknown":
                prec["kv_cache"] = found[0]["kv_cache"]
            anchor = {**anchor, "deployment": found[0]["deployment"], "mtp": found[0]["mtp"], "precision": prec}
            notes = notes.rstrip() + " " + "".join(found[1]) + "."
    anchor = with_system_gpus(anchor)
    m = re.search(r"harness config (closed/\S+\.py)", notes)
    if not m:
        return anchor, notes, {}, []
    path = m.group(1)
    if path not in cache:
        text = git_show(Path(r["repo"]), r["commit"], path)
        if text is None:
            raise ConfigError(f"{path}: not in {r['name']} at {r['commit']}")
        cache[path] = read_config(text, path)
    if "dynamo_cluster" not in cache[path]:
        runtime, said = engine_settings(cache[path], bench)
    else:  # per-pool settings from the workers' ymls (bench/mlperf_layout.py)
        found = found or read_layout(anchor, Path(r["repo"]), r["commit"])
        if found is None:
            raise ConfigError(f"{path}: names a Dynamo cluster but its layout could not be read")
        runtime = found[0]["runtime"]
        said = [
            f"per-pool max_prefill_tokens {runtime['max_prefill_tokens']}, max_running_per_rank "
            f"{runtime['max_running_per_rank']} from the workers' max_num_tokens and max_batch_size; backend pytorch"
        ]
        if found[0]["router"]:
            anchor = {**anchor, "simulation": {**(anchor.get("simulation") or {}), "router": found[0]["router"]}}
    extra = [f"{MARK} {path} at {r['commit'][:7]}: " + "; ".join(said) + "."]
    cap = harness_cap(cache[path], bench, runtime, anchor)
    if cap is not None:
        anchor = {**anchor, "simulation": {**(anchor.get("simulation") or {}), "max_running_requests": cap[0]}}
        extra.append(cap[1])
    return anchor, notes, runtime, extra


def apply(anchor: dict[str, Any], r: dict[str, Any], cache: dict[str, Any]) -> dict[str, Any]:
    scenario = benchmark(anchor)[1]
    notes = str(anchor["notes"]).split(MARK, 1)[0]
    sim = {k: v for k, v in (anchor.get("simulation") or {}).items() if k != "max_running_requests"}
    anchor, notes, runtime, extra = settings({**anchor, "simulation": sim or None}, notes, r, cache)
    m = bool(extra)
    loadgen = None
    if scenario.lower() in ("server", "interactive"):
        text = git_show(Path(r["repo"]), r["commit"], log_path(anchor))
        if text is None:
            raise ConfigError(f"{log_path(anchor)}: not in {r['name']} at {r['commit']}")
        p = read_log_params(text)
        loadgen = {"min_duration_ms": int(p["min_duration_ms"]), "min_query_count": int(p["min_query_count"])}
        extra.append(
            f"{'' if m else MARK} LoadGen run (log's Test Parameters Used): min_duration {loadgen['min_duration_ms']} "
            f"ms, min_query_count {loadgen['min_query_count']}, target_qps {p.get('target_qps', 0):g}."
        )
        if anchor.get("engine") == "trtllm" and CORE[benchmark(anchor)[0].replace(".", "_")] == "endpoint":
            loadgen["serving_path"] = True
            extra.append(
                " The harness's TRTLLM_ENDPOINT core posts each sample to the engine's HTTP server (OpenAI chat "
                "completions with prompt_token_ids: llmlib/cores/openai_client_utils.py), so loadgen.serving_path."
            )
    ordered: dict[str, Any] = {}
    for k, v in anchor.items():
        if k in ("runtime", "client", "loadgen"):
            continue
        ordered[k] = v
        if k == "slo" and runtime:
            ordered["runtime"] = runtime
        if k == "tolerance" and loadgen:
            ordered["client"] = CLIENT
            ordered["loadgen"] = loadgen
    ordered["notes"] = notes + "".join(extra)
    return ordered


def rewrite(r: dict[str, Any]) -> None:
    path: Path = r["file"]
    lines = path.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("version:"))
    head = lines[:start]
    cut = next((i for i, line in enumerate(head) if line.startswith(HEADER)), None)
    wl = next(i for i, line in enumerate(head) if line.startswith(WORKLOAD))
    pre = head[: cut if cut is not None else wl]
    data = yaml.safe_load("\n".join(lines))
    cache: dict[str, Any] = {}
    data["anchors"] = [apply(a, r, cache) for a in data["anchors"]]
    body = yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)
    path.write_text("\n".join(pre + header(r) + head[wl:]) + "\n" + body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--v51", help="git dir of inference_results_v5.1", default=ROUNDS["v5-1"]["repo"])
    ap.add_argument("--v60", help="git dir of (a fork of) inference_results_v6.0", default=ROUNDS["v6-0"]["repo"])
    args = ap.parse_args()
    ROUNDS["v5-1"]["repo"], ROUNDS["v6-0"]["repo"] = args.v51, args.v60
    for r in ROUNDS.values():
        rewrite(r)
        print(f"wrote {Path(r['file']).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
