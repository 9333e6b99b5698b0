"""The schema of an engine profile (planner/engines/*.yaml): every value with its source (`SFloat`,
`SBool`, ...), the launch templates, SGLang's memory-reserve rule and per-architecture overrides.
It only validates and holds what the YAML files say; `planner.engines` loads them and turns them
into the step model's options."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from roofline.deployment import Parallelism
from roofline.kernels import ARCH_FAMILY


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


class SPrefillTokens(_Strict):
    """An engine's default prefill token budget per rank: `value`, or the first `below_gpu_mib`
    tier ([GPU MiB limit, tokens], ascending) the GPU falls under (SGLang sizes its default chunk
    by GPU memory)."""

    value: int = Field(gt=0)
    below_gpu_mib: list[tuple[float, int]] = []
    source: str

    def on_gpu(self, mem_mib: float) -> int:
        return next((t for lim, t in sorted(self.below_gpu_mib) if mem_mib < lim), self.value)


class SOptInt(_Strict):
    value: int | None
    source: str


class SScheduler(_Strict):
    value: Literal["prefill_first", "mixed"]
    source: str


class SHandoff(_Strict):
    value: Literal["push", "decode_pull", "prealloc_push"]
    source: str


class SKVSizing(_Strict):
    value: Literal["static", "free", "with_activations"]
    source: str


class SWindowShares(_Strict):
    value: Literal["window", "equal", "ratio"]
    source: str
    # "ratio" (SGLang's hybrid-SWA pool): sliding-window layers hold this many tokens per full-layer token
    ratio: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _ratio_given(self) -> SWindowShares:
        if (self.value == "ratio") != (self.ratio is not None):
            raise ValueError("kv_window_shares: `ratio` is given with value ratio, and only then")
        return self


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

    def fraction(self, mem_mib: float, role: str, parallel: Parallelism, chunk: int) -> float:
        """mem_fraction_static for one instance of `parallel` on a GPU of `mem_mib` MiB, with
        SGLang's default chunk per instance (the profile's prefill_tokens_per_rank rule) and its
        decode graph batch limit."""
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
    fp8_mla_decode_with_fp8_kv: SBool | None = None


class EngineProfile(_Strict):
    engine: str
    version: str
    mem_fraction: SFloat
    kv_sizing: SKVSizing  # what the memory fraction sizes (roofline.deployment.RuntimeOptions.kv_sizing)
    cuda_graphs: SBool
    cuda_graph_max_batch_per_rank: SInt
    pdl: SBool
    comm_overlap_wide_ep: SFloat
    redundant_experts_wide_ep: SInt
    eplb: SBool  # the engine's own EPLB default (roofline.imbalance); redundant experts turn it on
    host_offload: SBool
    scheduler: SScheduler
    chunked_prefill: SBool
    fused_mla_a_proj: SBool
    prefill_tokens_per_rank: SPrefillTokens
    max_running_per_rank: SOptInt
    mtp_default: SInt
    request_overhead_ms: SFloat
    disagg_first_token_after_step: SBool
    disagg_kv_handoff: SHandoff
    fp8_kv_with_fp8_weights: SBool
    fp8_mla_decode_with_fp8_kv: SBool  # MLA generation attention runs FP8 math when the KV cache is FP8
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
        """The profile on `arch`: its family's entry (sm_103 runs sm_100's kernels:
        roofline.kernels.ARCH_FAMILY), then its own entry over it, field by field."""
        family = ARCH_FAMILY.get(arch, arch)
        update: dict[str, object] = {}
        for key in dict.fromkeys((family, arch)):
            over = self.arch.get(key)
            if over is not None:
                update.update({k: v for k, v in over if v is not None})
        return self.model_copy(update=update) if update else self
