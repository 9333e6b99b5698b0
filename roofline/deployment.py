"""One serving instance as the step-cost model sees it: model, GPU, parallelism, precision,
runtime options and MTP.

Parallelism follows SGLang/TRT-LLM: attention runs with `tp` ranks per data-parallel group and
`dp_attention` groups; the routed experts are split over `ep` ranks, each expert further split
over `gpus / pp / ep` ranks (expert tensor parallelism); `pp` pipeline stages split the layers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from roofline.catalog.schema import HardwareSpec, ModelSpec, StrictModel
from roofline.errors import DeploymentError, NoNetworkError
from roofline.precision import PrecisionMix, validate_mix


class Parallelism(StrictModel):
    gpus: int = Field(gt=0)
    tp: int = Field(default=1, gt=0)
    dp_attention: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _check(self) -> Parallelism:
        if self.tp * self.dp_attention * self.pp != self.gpus:
            raise ValueError(
                f"tp x dp_attention x pp = {self.tp}x{self.dp_attention}x{self.pp} must equal "
                f"gpus_per_instance = {self.gpus}"
            )
        per_stage = self.gpus // self.pp
        if self.ep > per_stage or per_stage % self.ep:
            raise ValueError(f"ep = {self.ep} must divide the GPUs of a stage ({per_stage})")
        return self

    @property
    def moe_tp(self) -> int:
        """Ranks each expert is split over."""
        return self.gpus // self.pp // self.ep


class MTPConfig(StrictModel):
    """Multi-token prediction: `draft_tokens` proposed per step, `accepted_tokens` of them kept
    on average, so a step emits 1 + accepted_tokens tokens per sequence."""

    draft_tokens: int = Field(gt=0, le=8)
    accepted_tokens: float = Field(ge=0)

    @model_validator(mode="after")
    def _check(self) -> MTPConfig:
        if self.accepted_tokens > self.draft_tokens:
            raise ValueError("mtp.accepted_tokens cannot exceed mtp.draft_tokens")
        return self

    @property
    def tokens_per_step(self) -> float:
        return 1.0 + self.accepted_tokens


# Time programmatic dependent launch (PDL) hides per kernel launch: the dependent kernel's launch and prologue
# overlap its predecessor's tail; the kernel's floor (roofline.kernel_paths, 2-8 us on Blackwell) is otherwise
# kept. Measured: ai-dynamo/aiconfigurator PR #550 (nsys, TRT-LLM, DeepSeek-V3.1 NVFP4 decode on GB200, DEP16,
# batch 32, CUDA graphs): per-layer wall time 17.84 ms against a kernel sum of 19.09 ms, 1.25 ms over the
# ~1,600-1,800 kernels of such a step (roofline.step counts 1,620): 0.7-0.8 us per launch. TensorRT-LLM tech
# blog 1 ("Pushing Latency Boundaries", Key Optimizations table) gives a lower bound on its 2025 stack:
# "Enable PDL" took DeepSeek-R1 on 8xB200 at batch 1 (MTP3, CUDA graphs on) from 168 to 173 TPS/user, 2.9% of
# the iteration, 0.49 ms over ~1,800 kernels: 0.27 us per launch. Before: half of every floor (1-4 us per
# launch), which made PDL worth 35% of that iteration (8.3 -> 5.4 ms), against the blog's 3%.
PDL_HIDDEN_US = 0.7


class RuntimeOptions(StrictModel):
    """Engine behaviour that moves step time. Defaults are SGLang's on Hopper/Blackwell."""

    cuda_graphs: bool = True
    comm_overlap: float = Field(default=0.0, ge=0, le=1)  # share of EP comm hidden under compute
    ep_imbalance: float | None = Field(default=None, ge=1)  # max/mean expert load; None: derived
    redundant_experts: int = Field(default=0, ge=0)
    # Expert-parallel load balancing (EPLB: expert placement, and replicas in redundant slots, from
    # load statistics). None: on exactly when redundant experts are configured (they need it).
    eplb: bool | None = None
    mem_fraction: float = Field(default=0.85, gt=0, le=1)
    offload: bool | None = None  # None: offload weights to host only when needed and C2C exists
    kernel_overrides: dict[str, str] = Field(default_factory=dict)
    # The serving engine's own kernel on this architecture where it differs from the architecture's
    # default: `family:format` or `family` -> path (planner/engines profiles, each sourced).
    engine_kernels: dict[str, str] = Field(default_factory=dict)
    # Largest TP all-reduce message (bytes per GPU) the engine sends through its own custom
    # all-reduce instead of NCCL (roofline.comm.CUSTOM_ALLREDUCE); 0: NCCL only.
    custom_allreduce_max_bytes: int = Field(default=0, ge=0)
    # What the memory fraction sizes (planner/engines/*.yaml `kv_sizing`, sourced there). "static"
    # (SGLang mem_fraction_static): weights + KV fit in fraction x memory, the step's activations outside.
    # "free" (TRT-LLM free_gpu_memory_fraction): KV = fraction x what weights and activations leave.
    # "with_activations" (vLLM gpu_memory_utilization): weights + activations + KV fit in fraction x memory.
    kv_sizing: Literal["static", "free", "with_activations"] = "static"
    # How the KV pool is split between a model's attention-window sizes (gpt-oss: 128-token sliding
    # layers and full layers). "window": sliding layers keep only their window, the rest holds full
    # context (vLLM's hybrid allocator). "equal": every window size gets the same
    # share of the pool (TRT-LLM's default), so full-context capacity is as if every layer were full.
    # "ratio" (SGLang): the sliding layers' pool holds `swa_full_tokens_ratio` tokens per token of the
    # full layers' pool, both sized together from the same memory (model_runner_kv_cache_mixin.py
    # set_num_tokens_hybrid_swa), so a full-context token costs its full layers plus that share of its
    # sliding layers.
    kv_window_shares: Literal["window", "equal", "ratio"] = "window"
    swa_full_tokens_ratio: float | None = Field(default=None, gt=0, le=1)
    pdl: bool = False  # programmatic dependent launch: next kernel's launch/prologue overlaps
    # Idle time between kernels of a replayed CUDA graph. Measured on the H200: the runtime engine's
    # 11,033-kernel decode step replays in 25.43 ms against 25.25 ms of kernel time, 0.02 us per kernel
    # (calibration/data/engine/engine_decode_61layers.json); small kernels' own floor is in their path.
    launch_gap_graph_us: float = Field(default=0.02, ge=0)
    # Kernels per layer outside GEMMs and attention (norms, RoPE, quantization, residuals, the FFN's
    # gated activation): fused engines (SGLang, TRT-LLM) run ~8; an unfused torch engine many more
    # (runtime.engine: ~164).
    elementwise_launches_per_layer: float = Field(default=8.0, ge=0)
    # Their activation traffic per token per layer, in bytes. None: the FFN activation at its
    # intermediate width (roofline.ops.ffn_activation_op), each other kernel about one hidden-size
    # activation (1.25 passes of hidden x 2 B). A measured engine gives its own, all kernels included
    # (runtime.engine: 4.37 MB, from its non-GEMM kernel time per prefill token).
    elementwise_bytes_per_token_layer: float | None = Field(default=None, ge=0)
    step_overhead_us: float = Field(default=0.0, ge=0)  # host time per step the GPU waits for
    # Host time per request in a step on one rank (an engine's per-request scheduling, sampling
    # and response bookkeeping each iteration); overlapped with the GPU step, so only the part
    # beyond the GPU time shows (roofline.step). Engine profiles give it (planner/engines).
    host_us_per_request: float = Field(default=0.0, ge=0)
    # The engine runtime that executes the steps, for engines with more than one (TRT-LLM: the
    # PyTorch executor or a TensorRT engine run by the C++ executor); None for single-runtime engines.
    # Informational here: planner/engines picks host_us_per_request by it.
    backend: Literal["pytorch", "tensorrt"] | None = None
    # Per-request serving path outside the GPU steps (HTTP parse, tokenization, hand-off to the
    # scheduler, first detokenization and stream write): it delays each request's first token and
    # its end, never a step (planner/engines/*.yaml `request_overhead_ms`, sourced there).
    request_overhead_s: float = Field(default=0.0, ge=0)
    # Disaggregated serving: whether a decode instance streams a request's first token only at the end
    # of the first decode step that runs it (vLLM, TRT-LLM: the token comes out of a forward on the
    # decode side) or as soon as its scheduler takes the request in (SGLang emits the token prefill sent
    # with the KV). planner/engines/*.yaml `disagg_first_token_after_step`, sourced there.
    disagg_first_token_after_step: bool = False
    # Disaggregated serving: how the KV changes hands (planner/engines/*.yaml `disagg_kv_handoff`):
    # `push` the prefill sends it when its forward ends and the decode scheduler takes the request in
    # at a step boundary; `decode_pull` (vLLM NixlConnector, TRT-LLM cache transceiver) the decode
    # scheduler takes the request in at a step boundary, allocates its KV and starts reading it, and
    # sees the read finished only at a later step boundary; `prealloc_push` (SGLang) the decode
    # scheduler pre-allocates the KV at a step boundary before the prefill may start, the prefill
    # writes it after its forward and the decode scheduler polls for it at step boundaries.
    disagg_kv_handoff: Literal["push", "decode_pull", "prealloc_push"] = "push"
    launch_gap_eager_us: float = Field(default=8.0, ge=0)  # PyTorch eager dispatch + launch per op
    # Scheduler settings (planner/engines/*.yaml): tokens one attention-DP rank prefills per step,
    # requests one rank runs at most (None: what the KV pool holds), the policy, the graph batch limit.
    prefill_tokens_per_rank: int = Field(default=16384, gt=0)
    max_running_per_rank: int | None = Field(default=None, gt=0)
    scheduler: Literal["prefill_first", "mixed"] = "prefill_first"
    # Whether a prompt may be split over steps (chunked prefill). False: a prompt is scheduled only
    # whole, and a step's prefill stops at the first waiting prompt that does not fit what is left of
    # the token budget (TRT-LLM without enable_chunked_prefill: MicroBatchScheduler's no-chunking path).
    chunked_prefill: bool = True
    # Whether MLA's q_a and kv_a projections, which read the same hidden state, run as one GEMM
    # (planner/engines/*.yaml `fused_mla_a_proj`; roofline.attention_ops.projection_gemms).
    fused_mla_a_proj: bool = True
    cuda_graph_max_batch_per_rank: int = Field(default=512, gt=0)
    # TRT-LLM attention-DP balance (attention_dp_config enable_balance; simulator/adp_balance.py): context
    # requests held until every rank has one, or for up to timeout_iters iterations; None: off
    adp_balance_timeout_iters: int | None = Field(default=None, ge=0)
    adp_balance_batching_wait_iters: int = Field(default=0, ge=0)

    @property
    def launch_gap_s(self) -> float:
        if self.pdl and self.cuda_graphs:
            return 0.0
        return (self.launch_gap_graph_us if self.cuda_graphs else self.launch_gap_eager_us) * 1e-6

    @property
    def load_balanced(self) -> bool:
        """Whether EPLB places the experts (`roofline.imbalance`): as stated, else with redundant experts."""
        return self.eplb if self.eplb is not None else self.redundant_experts > 0

    @property
    def pdl_hidden_s(self) -> float:
        """Per-kernel time programmatic dependent launch hides: the dependent kernel's launch and
        prologue overlap its predecessor's tail (`PDL_HIDDEN_US`); 0 without PDL."""
        return PDL_HIDDEN_US * 1e-6 if self.pdl else 0.0


class InstanceSpec(StrictModel):
    model: ModelSpec
    hardware: HardwareSpec
    parallel: Parallelism
    precision: PrecisionMix = PrecisionMix()
    runtime: RuntimeOptions = RuntimeOptions()
    mtp: MTPConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> InstanceSpec:
        validate_mix(self.precision, self.hardware)
        m, p = self.model, self.parallel
        if m.moe is None and p.ep > 1:
            raise DeploymentError(f"{m.id} has no experts; ep must be 1 (got {p.ep})")
        copies = m.moe.num_experts + self.runtime.redundant_experts if m.moe else 0
        if m.moe and copies < p.ep:
            raise DeploymentError(f"ep = {p.ep} exceeds the number of experts of {m.id}")
        if m.moe and self.runtime.redundant_experts and copies % p.ep:  # EPLB's placement (SGLang asserts it)
            raise DeploymentError(
                f"ep = {p.ep} does not divide the {copies} expert copies of {m.id} ({m.moe.num_experts} experts + "
                f"{self.runtime.redundant_experts} redundant): EPLB places the same number on every rank; "
                "state runtime.redundant_experts so that they divide, or runtime.eplb: false"
            )
        if p.pp > m.num_layers:
            raise DeploymentError(f"pp = {p.pp} exceeds the {m.num_layers} layers of {m.id}")
        hw = self.hardware
        if not hw.one_node(p.gpus):
            raise NoNetworkError(
                f"an instance of {p.gpus} GPUs spans nodes of {hw.id}, which has no network between its "
                f"{hw.gpus_per_node}-GPU nodes (catalog nic_gbps_per_gpu: 0): at most {hw.gpus_per_node} GPUs "
                "per instance"
            )
        if self.mtp and m.mtp_layers == 0:
            raise DeploymentError(f"{m.id} has no MTP layers; set mtp: null")
        return self

    @property
    def heads_per_rank(self) -> float:
        return self.model.attention.num_heads / self.parallel.tp
