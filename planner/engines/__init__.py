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
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from roofline.catalog.schema import HardwareSpec
from roofline.deployment import Parallelism, RuntimeOptions

DATA = Path(__file__).parent
ENGINES = ("sglang", "trtllm", "vllm", "other")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SBool(_Strict):
    value: bool
    source: str


class SFloat(_Strict):
    value: float
    source: str


class SInt(_Strict):
    value: int
    source: str


class SOptInt(_Strict):
    value: int | None
    source: str


class SScheduler(_Strict):
    value: Literal["prefill_first", "mixed"]
    source: str


class SHandoff(_Strict):
    value: Literal["push", "decode_pull", "prealloc_push"]
    source: str


class SWindowShares(_Strict):
    value: Literal["window", "equal"]
    source: str


class ADPBalanceDefaults(_Strict):
    enabled: bool
    timeout_iters: int
    batching_wait_iters: int


class SADPBalance(_Strict):
    value: ADPBalanceDefaults
    source: str


class SBackend(_Strict):
    value: Literal["pytorch", "tensorrt"]
    source: str


class Backends(_Strict):
    """An engine with more than one runtime (TRT-LLM: the PyTorch executor, or a TensorRT engine
    run by the C++ executor): the runtime a deployment that does not state one gets (the engine
    version's default), and the host time per request per step of each runtime."""

    default: SBackend
    host_us_per_request: dict[Literal["pytorch", "tensorrt"], SFloat]


class SFlag(_Strict):
    """One command-line flag or config key of a launch template, with where it is defined."""

    flag: str
    source: str


class LaunchTool(_Strict):
    """One program of an engine's launch recipe (server, router, disaggregation proxy, Dynamo
    worker): its command, the version its flags were checked against (`flags_file` in
    planner/engines/flags/, dumped from or extracted from that version's argument parser) and
    the flags the planner prints, by role."""

    command: str
    version: str
    flags_file: str
    source: str
    flags: dict[str, SFlag] = {}

    def f(self, key: str) -> str:
        """The flag for a role (KeyError names the tool's known roles)."""
        if key not in self.flags:
            raise KeyError(f"launch flag {key!r} not in template ({', '.join(sorted(self.flags))})")
        return self.flags[key].flag


class MemReserve(_Strict):
    """SGLang's rule for mem_fraction_static (MiB reserved outside weights + KV); see sglang.yaml."""

    base_mb: float
    mb_per_chunk_token: float
    min_chunk_tokens: int
    chunk_tokens: int
    chunk_tokens_large: int
    large_gpu_mb: float
    graph_bs_small_tp: int
    graph_bs: int
    mb_per_8_ranks: float
    decode_graph_mb_per_bs: float
    floor_mb: float
    floor_above_mb: float
    post_capture_reserve_mb: float

    def _slack_mb(self, parallel: Parallelism) -> float:
        """Per-rank slack that grows with the ranks of one model copy (NCCL and friends)."""
        return parallel.tp * parallel.pp / 8 * self.mb_per_8_ranks

    def _graph_mb(self, mem_mib: float, role: str, parallel: Parallelism) -> float:
        """Decode CUDA graphs (a prefill-only server captures none)."""
        large = mem_mib >= self.large_gpu_mb
        max_bs = self.graph_bs if large or parallel.tp >= 4 else self.graph_bs_small_tp
        return self.decode_graph_mb_per_bs * max_bs if role != "prefill" else 0.0

    def fraction(self, mem_mib: float, role: str, parallel: Parallelism) -> float:
        """mem_fraction_static for one instance of `parallel` on a GPU of `mem_mib` MiB, with
        SGLang's defaults for the chunk (per instance) and the decode graph batch limit."""
        chunk = self.chunk_tokens_large if mem_mib >= self.large_gpu_mb else self.chunk_tokens
        mb = self.base_mb + self.mb_per_chunk_token * max(chunk, self.min_chunk_tokens)
        mb += self._slack_mb(parallel)
        mb += self._graph_mb(mem_mib, role, parallel)
        if mem_mib > self.floor_above_mb:
            mb = max(mb, self.floor_mb)
        return round(max(0.05, (mem_mib - mb) / mem_mib), 3)

    def outside_mb(self, mem_mib: float, role: str, parallel: Parallelism, activation_mb: float) -> dict[str, float]:
        """What the engine needs outside its static pool at the least, in MiB, by part: its own
        reserve with the parallel slack (post-capture sizing), decode CUDA graphs, activations."""
        return {
            "engine reserve and NCCL": self.post_capture_reserve_mb + self._slack_mb(parallel),
            "decode CUDA graphs": self._graph_mb(mem_mib, role, parallel),
            "activations": activation_mb,
        }


class SReserve(_Strict):
    value: MemReserve
    source: str


class SKernels(_Strict):
    value: dict[str, str]  # `family:format` or `family` -> roofline.kernels path name
    source: str


class ArchOverride(_Strict):
    kernels: SKernels | None = None
    cuda_graphs: SBool | None = None
    pdl: SBool | None = None
    mem_fraction: SFloat | None = None


class EngineProfile(_Strict):
    engine: str
    version: str
    mem_fraction: SFloat
    kv_from_free_memory: SBool
    cuda_graphs: SBool
    cuda_graph_max_batch_per_rank: SInt
    pdl: SBool
    comm_overlap_wide_ep: SFloat
    redundant_experts_wide_ep: SInt
    host_offload: SBool
    scheduler: SScheduler
    prefill_tokens_per_rank: SInt
    max_running_per_rank: SOptInt
    mtp_default: SInt
    request_overhead_ms: SFloat
    disagg_first_token_after_step: SBool
    disagg_kv_handoff: SHandoff
    fp8_kv_with_fp8_weights: SBool
    host_us_per_request: SFloat | None = None  # None: no per-request host cost known for the engine
    backends: Backends | None = None  # None: one runtime; else host time per runtime (overrides the above)
    kv_window_shares: SWindowShares | None = None  # None: sliding layers keep only their window
    mem_reserve: SReserve | None = None  # None: the flat mem_fraction; else the engine's own rule
    kernels: SKernels | None = None  # None: the architecture's default kernels (set per arch below)
    custom_allreduce_max_bytes: SInt | None = None  # None: TP all-reduces go through NCCL
    adp_balance: SADPBalance | None = None  # None: the engine has no attention-DP balance
    arch: dict[str, ArchOverride] = {}
    launch: dict[str, LaunchTool] | None = None  # None: the engine has no launch recipe of its own

    def for_arch(self, arch: str) -> EngineProfile:
        over = self.arch.get(arch)
        if over is None:
            return self
        return self.model_copy(update={k: v for k, v in over if v is not None})


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
    frac = p.mem_reserve.value.fraction(hw.mem_bytes / 2**20, role, parallel)
    return frac, "rule of " + p.mem_reserve.source.split(":")[0] + " (planner/engines)"


def wide_ep(parallel: Parallelism) -> bool:
    """Expert parallelism with attention data parallelism (DeepEP-style dispatch/combine)."""
    return parallel.ep > 1 and parallel.dp_attention > 1


def runtime_options(
    engine: str,
    role: str,
    parallel: Parallelism,
    hw: HardwareSpec,
    stated: dict[str, object] | None = None,
    note: list[str] | None = None,
) -> RuntimeOptions:
    """RuntimeOptions for one pool: the engine profile for `hw.arch`, with `stated` values (a
    scenario's known `runtime:` fields, already validated) taking precedence. Profile values used
    for fields the scenario did not state are appended to `note` with their source."""
    p = profile(engine).for_arch(hw.arch)
    stated = dict(stated or {})
    say = note if note is not None else []
    wide = wide_ep(parallel)
    chosen: dict[str, tuple[object, str]] = {
        "cuda_graphs": (p.cuda_graphs.value, p.cuda_graphs.source),
        "mem_fraction": _mem_fraction(p, role, parallel, hw),
        "comm_overlap": (p.comm_overlap_wide_ep.value if wide else 0.0, p.comm_overlap_wide_ep.source),
        "redundant_experts": (
            p.redundant_experts_wide_ep.value if wide and parallel.ep > 8 else 0,
            p.redundant_experts_wide_ep.source,
        ),
        "prefill_tokens_per_rank": (p.prefill_tokens_per_rank.value, p.prefill_tokens_per_rank.source),
        "max_running_per_rank": (p.max_running_per_rank.value, p.max_running_per_rank.source),
        "scheduler": (p.scheduler.value, p.scheduler.source),
    }
    values: dict[str, object] = {}
    for key, (value, source) in chosen.items():
        if key in stated:
            values[key] = stated.pop(key)
            continue
        values[key] = value
        if _worth_noting(key, value, wide):
            say.append(f"runtime.{key}: {value} ({engine} default: {source})")
    offload = stated.pop("offload", None)
    if offload is None:  # host offload with prefetch: prefill pools of engines that implement it
        offload = None if p.host_offload.value and role == "prefill" else False
    values.update(
        offload=offload,
        kv_from_free_memory=p.kv_from_free_memory.value,
        pdl=p.pdl.value,
        cuda_graph_max_batch_per_rank=p.cuda_graph_max_batch_per_rank.value,
        **_backend(p, engine, stated.pop("backend", None), say),
        kv_window_shares=p.kv_window_shares.value if p.kv_window_shares else "window",
        request_overhead_s=p.request_overhead_ms.value * 1e-3,
        disagg_first_token_after_step=p.disagg_first_token_after_step.value,
        disagg_kv_handoff=p.disagg_kv_handoff.value,
        engine_kernels=dict(p.kernels.value) if p.kernels else {},
        custom_allreduce_max_bytes=p.custom_allreduce_max_bytes.value if p.custom_allreduce_max_bytes else 0,
    )
    values.update(_adp_balance(p, stated))
    values.update(stated)  # measured engine costs and kernel overrides a scenario states
    return RuntimeOptions.model_validate(values)


def _backend(p: EngineProfile, engine: str, stated: object, say: list[str]) -> dict[str, object]:
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
    return key in ("cuda_graphs", "mem_fraction", "prefill_tokens_per_rank", "scheduler") and (
        key != "cuda_graphs" or not value
    )


def fp8_kv_default(engine: str) -> tuple[bool, str]:
    """Whether the engine runs an FP8 KV cache when the weights are FP8 and the KV dtype is not set."""
    p = profile(engine).fp8_kv_with_fp8_weights
    return p.value, p.source


def mtp_default_drafts(engine: str) -> tuple[int, str]:
    p = profile(engine).mtp_default
    return p.value, p.source
