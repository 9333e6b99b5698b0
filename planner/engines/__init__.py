"""Engine behaviour as data: one profile per engine (`sglang.yaml`, `vllm.yaml`, `trtllm.yaml`,
`other.yaml`), each value with its source, and per-architecture overrides.

`runtime_options(engine, role, parallel, hardware, spec, note)` is the one place that turns an
engine, a pool and a GPU into the step model's `RuntimeOptions`; scenario resolution and the
planner's search both call it, so a deployment is priced and simulated with the same options.
Values a scenario states (`runtime:` section) win over the profile; every profile value used
for a field the scenario left unknown is noted with its source. Each profile's `launch:` section
is the engine's launch template (programs, pinned version, flag file, flags by role, each
sourced); planner/launch/ renders it. This module does not model the engines; it only says how
they are configured.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from planner.engines.schema import EngineProfile
from planner.engines.schema import LaunchTool as LaunchTool  # re-exported: planner/launch
from planner.engines.schema import SFloat as SFloat  # re-exported: bench/fit_host_overhead.py
from roofline.catalog.schema import HardwareSpec
from roofline.deployment import Parallelism, RuntimeOptions

DATA = Path(__file__).parent
ENGINES = ("sglang", "trtllm", "vllm", "other")


@cache
def profile(engine: str) -> EngineProfile:
    """The engine's profile (raises KeyError-free ValueError for an unknown engine)."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: allowed {', '.join(ENGINES)}")
    return EngineProfile.model_validate(yaml.safe_load((DATA / f"{engine}.yaml").read_text()))


def _mem_fraction(p: EngineProfile, role: str, parallel: Parallelism, hw: HardwareSpec) -> tuple[float, str]:
    """The engine's default memory fraction for this pool: its own rule where the profile has one."""
    if p.mem_reserve is None or parallel.dp_attention > 1:  # DP-attention recipes state their fraction
        return p.mem_fraction.value, p.mem_fraction.source
    mib = hw.mem_bytes / 2**20
    frac = p.mem_reserve.value.fraction(mib, role, parallel, p.prefill_tokens_per_rank.on_gpu(mib))
    return frac, "rule of " + p.mem_reserve.source.split(":")[0] + " (planner/engines)"


class _Tagged:
    """A note list whose `runtime.<field>: ...` lines name the pool they are for."""

    def __init__(self, notes: list[str], pool: str) -> None:
        self.notes, self.pool = notes, pool

    def append(self, line: str) -> None:
        if self.pool and line.startswith("runtime."):
            key, _, rest = line.partition(":")
            line = f"{key}{self.pool}:{rest}"
        self.notes.append(line)


def wide_ep(parallel: Parallelism) -> bool:
    """Expert parallelism with attention data parallelism (DeepEP-style dispatch/combine)."""
    return parallel.ep > 1 and parallel.dp_attention > 1


def wide_ep_replicas(engine: str, hw: HardwareSpec) -> int:
    """The engine's wide-EP recipe's redundant expert copies on `hw` (what the layout search splits evenly)."""
    return profile(engine).for_arch(hw.arch).redundant_experts_wide_ep.value


def expert_replicas(replicas: int, parallel: Parallelism, eplb: object = None) -> int:
    """The redundant expert copies an engine places: its wide-EP recipe's `replicas` where attention DP runs
    EP above 8, unless EPLB is stated off (`eplb` False). One rule for the runtime options and the search."""
    return replicas if wide_ep(parallel) and parallel.ep > 8 and eplb is not False else 0


def runtime_options(
    engine: str,
    role: str,
    parallel: Parallelism,
    hw: HardwareSpec,
    stated: dict[str, object] | None = None,
    note: list[str] | None = None,
    isl: int | None = None,
) -> RuntimeOptions:
    """RuntimeOptions for one pool: the engine profile for `hw.arch`, with `stated` values (a
    scenario's known `runtime:` fields, already validated) taking precedence. Profile values used
    for fields the scenario did not state are appended to `note` with their source. Given the
    longest prompt `isl` the workload sends, an engine without chunked prefill gets a token budget that
    holds it whole beside its running requests (`_whole_prompt_budget`) unless the budget is stated."""
    p = profile(engine).for_arch(hw.arch)
    stated = dict(stated or {})
    said = note if note is not None else []
    pool = f" ({role} pool)" if role in ("prefill", "decode") else ""  # disaggregated pools differ
    say = _Tagged(said, pool)
    wide = wide_ep(parallel)
    chosen: dict[str, tuple[object, str]] = {
        "cuda_graphs": (p.cuda_graphs.value, p.cuda_graphs.source),
        "mem_fraction": _mem_fraction(p, role, parallel, hw),
        "comm_overlap": (p.comm_overlap_wide_ep.value if wide else 0.0, p.comm_overlap_wide_ep.source),
        "redundant_experts": (  # the wide-EP recipe's replicas, unless EPLB is stated off
            expert_replicas(p.redundant_experts_wide_ep.value, parallel, stated.get("eplb")),
            p.redundant_experts_wide_ep.source,
        ),
        "prefill_tokens_per_rank": (
            p.prefill_tokens_per_rank.on_gpu(hw.mem_bytes / 2**20),
            p.prefill_tokens_per_rank.source,
        ),
        "max_running_per_rank": (p.max_running_per_rank.value, p.max_running_per_rank.source),
        "scheduler": (p.scheduler.value, p.scheduler.source),
        "chunked_prefill": (p.chunked_prefill.value, p.chunked_prefill.source),
        "fused_mla_a_proj": (p.fused_mla_a_proj.value, p.fused_mla_a_proj.source),
    }
    if isl is not None:
        chosen["prefill_tokens_per_rank"] = _whole_prompt_budget(chosen, stated, role, isl, engine)
    values: dict[str, object] = {}
    for key, (value, source) in chosen.items():
        if key in stated:
            values[key] = stated.pop(key)
            continue
        values[key] = value
        if _worth_noting(key, value, wide):
            say.append(f"runtime.{key}: {value} ({engine} default: {source})")
    if p.request_overhead_ms.value and role != "decode":  # the pool a request enters: its serving path
        say.append(
            f"runtime.request_overhead_ms: {p.request_overhead_ms.value:g} ({engine} default: the HTTP serving path "
            f"per request, fitted on train anchors, planner/engines/{engine}.yaml; simulate counts it in queue_ms; "
            "in-process runs, offline benchmarks and in-process harnesses, have none)"
        )
    offload = stated.pop("offload", None)
    if offload is None:  # host offload with prefetch: prefill pools of engines that implement it
        offload = None if p.host_offload.value and role == "prefill" else False
    values.update(
        offload=offload,
        kv_sizing=p.kv_sizing.value,
        pdl=p.pdl.value,
        cuda_graph_max_batch_per_rank=p.cuda_graph_max_batch_per_rank.value,
        **_backend(p, engine, stated.pop("backend", None), say),
        kv_window_shares=p.kv_window_shares.value if p.kv_window_shares else "window",
        swa_full_tokens_ratio=p.kv_window_shares.ratio if p.kv_window_shares else None,
        request_overhead_s=p.request_overhead_ms.value * 1e-3,
        disagg_first_token_after_step=p.disagg_first_token_after_step.value,
        disagg_kv_handoff=p.disagg_kv_handoff.value,
        engine_kernels=dict(p.kernels.value) if p.kernels else {},
        custom_allreduce_max_bytes=p.custom_allreduce_max_bytes.value if p.custom_allreduce_max_bytes else 0,
    )
    values.update(_adp_balance(p, stated))
    if "eplb" not in stated and parallel.ep > 1 and stated.get("ep_imbalance") is None:
        on = bool(values["redundant_experts"]) or p.eplb.value
        why = "redundant experts need it" if values["redundant_experts"] else f"{engine} default: {p.eplb.source}"
        say.append(f"runtime.eplb: {'on' if on else 'off'} ({why})")
        values["eplb"] = on
    values.update(stated)  # measured engine costs and kernel overrides a scenario states
    return RuntimeOptions.model_validate(values)


def _whole_prompt_budget(
    chosen: dict[str, tuple[object, str]], stated: dict[str, object], role: str, isl: int, engine: str
) -> tuple[object, str]:
    """Without chunked prefill a prompt is scheduled only whole, beside the running requests' decode
    tokens, and TRT-LLM refuses a prompt longer than max_num_tokens outright (tensorrt_llm/llmapi/llm.py
    BaseLLM._check_arguments on the pytorch backend: 'The sum of prompt length ... should not exceed
    max_num_tokens'), so an engine launched for prompts of up to `isl` tokens (the workload's longest)
    needs a budget of at least isl plus its running limit (a prefill server: isl): trtllm-bench forces
    max_num_tokens to the dataset's max_isl + max_batch_size when chunking is off
    (tensorrt_llm/bench/benchmark/utils/general.py get_settings), as recipes do for long prompts
    (TRT-LLM tech blog 15: max_num_tokens 8576 for 8K prompts at batch 256; AIConfigurator's benchmark
    rule isl + batch + 1500). A stated budget is kept as stated."""
    budget = chosen["prefill_tokens_per_rank"]
    chunked = stated.get("chunked_prefill", chosen["chunked_prefill"][0])
    if chunked or "prefill_tokens_per_rank" in stated:
        return budget
    running = stated.get("max_running_per_rank", chosen["max_running_per_rank"][0])
    need = isl + (running if role != "prefill" and isinstance(running, int) else 0)
    if need <= int(budget[0]):  # type: ignore[call-overload]
        return budget
    why = f"{engine} without chunked prefill needs room for a whole prompt beside its running requests"
    return need, f"{why}: longest prompt {isl} + running limit, as trtllm-bench sizes it (max_isl + max_batch_size)"


def _backend(p: EngineProfile, engine: str, stated: object, say: _Tagged) -> dict[str, object]:
    """The runtime backend and its host time per request: the stated backend, else the engine
    version's default (noted as assumed); single-runtime engines have no backend."""
    if p.backends is None:
        if stated is not None:
            raise ValueError(f"runtime.backend: {engine} has one runtime (only trtllm has pytorch | tensorrt)")
        return {"backend": None, "host_us_per_request": p.host_us_per_request.value if p.host_us_per_request else 0.0}
    if stated is None:
        stated = p.backends.default.value
        say.append(f"runtime.backend: {stated} ({engine} default: {p.backends.default.source})")
    host = p.backends.host_us_per_request[stated]  # type: ignore[index]
    return {"backend": stated, "host_us_per_request": host.value}


def _adp_balance(p: EngineProfile, stated: dict[str, object]) -> dict[str, object]:
    """TRT-LLM's attention-DP balance: on where a scenario states either count (the other from the
    engine's defaults) or the profile turns it on; off (timeout None) otherwise."""
    timeout, wait = stated.pop("adp_balance_timeout_iters", None), stated.pop("adp_balance_batching_wait_iters", None)
    d = p.adp_balance.value if p.adp_balance else None
    if d is None or (timeout is None and wait is None and not d.enabled):
        return {"adp_balance_timeout_iters": None, "adp_balance_batching_wait_iters": 0}
    return {
        "adp_balance_timeout_iters": d.timeout_iters if timeout is None else timeout,
        "adp_balance_batching_wait_iters": d.batching_wait_iters if wait is None else wait,
    }


def _worth_noting(key: str, value: object, wide: bool) -> bool:
    """Notes for the defaults that move numbers; zero overlap and redundancy outside wide EP are
    not choices."""
    if key in ("comm_overlap", "redundant_experts"):
        return wide and bool(value)
    if key == "chunked_prefill":
        return not value
    return key in ("cuda_graphs", "mem_fraction", "prefill_tokens_per_rank", "scheduler") and (
        key != "cuda_graphs" or not value
    )


def fp8_kv_default(engine: str) -> tuple[bool, str]:
    """Whether the engine runs an FP8 KV cache when the weights are FP8 and the KV dtype is not set."""
    p = profile(engine).fp8_kv_with_fp8_weights
    return p.value, p.source


def fp8_mla_decode_default(engine: str, arch: str) -> tuple[bool, str]:
    """Whether the engine's MLA generation (decode) attention runs FP8 arithmetic (FP8 Q against the
    FP8 latent KV) on `arch` when the KV cache is FP8 and the attention precision is not set."""
    p = profile(engine).for_arch(arch).fp8_mla_decode_with_fp8_kv
    return p.value, p.source


def mtp_default_drafts(engine: str) -> tuple[int, str]:
    p = profile(engine).mtp_default
    return p.value, p.source
