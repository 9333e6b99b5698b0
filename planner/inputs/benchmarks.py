"""How common benchmark clients drive a closed loop, as simulation settings (named presets).

Two patterns, each client's taken from its source:
- burst, every request counted (`first_wave=True`): SGLang's `bench_serving`, vLLM's
  `vllm bench serve` and TRT-LLM's `trtllm-serve` benchmark start their `max_concurrency` clients
  together (every request is issued at once, a semaphore admits `concurrency` of them), send
  `num_prompts` requests and average TTFT, TPOT and throughput over every request, the first wave
  included (throughput = output tokens / benchmark duration); trtllm-bench with `--concurrency`
  keeps the same loop in process. AIPerf's concurrency mode is this loop too: its warm-up phase
  (`--warmup-request-count`) drains before the profiling phase starts, which then issues its first
  `--concurrency` requests at once and averages every profiled request (below). The first wave
  queues behind one another's prefills, which a steady-state window leaves out. Preset: all
  clients start at t = 0, no warm-up, metrics over all completed requests and their whole span
  (a drained warm-up leaves the engine idle, as at t = 0; random prompts share no prefix).
- steady state (`first_wave=False`): genai-perf (perf_analyzer) measures in windows
  (`--measurement-interval`) until consecutive windows agree within `--stability-percentage`, so
  its numbers describe the loop once the clients have desynchronised. Preset: clients start
  spread over one request's latency (the simulator's default ramp), the first 10% of arrivals
  left out, and the last 10% too (they keep the loop going while the measured requests finish,
  as the load goes on past perf_analyzer's last window).
Every preset but trtllm-bench reaches the engine through its HTTP server, so a request's latency
includes the engine profile's serving path (`request_overhead_ms`); trtllm-bench runs in process on
a pre-tokenized dataset (`serving_path=False`), as does MLPerf's in-process harness core (planner.search.loadgen).
`num_prompts` is rarely published: 10 requests per client (at least 50), the convention of
InferenceMAX's runs (num_prompts = 10 x concurrency), stands in. An anchor names its client in
`client:` where its source says which one ran; otherwise the engine's own serving benchmark is
assumed (`ENGINE_CLIENT`). How the client draws request lengths (e.g. `--random-range-ratio 0.8`:
each length uniform in [0.8 x nominal, nominal]) is the anchor's own `simulation:` section
(`input_len`, `output_len`); `client_config` keeps every field that section sets and fills the
loop (requests, start, warm-up) from the preset. Without that section the lengths are fixed at the
anchor's isl/osl, whatever the client's own default: SGLang's `bench_serving` defaults to
`--random-range-ratio 0.0` (uniform in [1, L]), but the SGLang cookbook cells that leave it unstated
read as fixed lengths (docs/accuracy_history.md, 2026-12-06). This module describes clients; it does
not simulate.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator import SimConfig
from simulator.config import window_share


@dataclass(frozen=True, slots=True)
class ClientPreset:
    first_wave: bool  # the mean includes the first wave of clients that start together
    source: str
    # the client reaches the engine through its HTTP server (the engine profile's request_overhead_ms:
    # HTTP, tokenization, detokenization, the stream); False: an in-process harness with tokenized inputs
    serving_path: bool = True


PRESETS: dict[str, ClientPreset] = {
    "sglang-bench-serving": ClientPreset(
        True,
        "sglang python/sglang/bench_serving.py: benchmark() gathers every request behind "
        "asyncio.Semaphore(max_concurrency); calculate_metrics averages over all outputs, dur_s from the "
        "start to the last completion",
    ),
    "vllm-bench-serve": ClientPreset(
        True, "vllm/benchmarks/serve.py: the same structure (semaphore over all requests, metrics over all outputs)"
    ),
    "trtllm-serve-benchmark": ClientPreset(
        True, "tensorrt_llm/serve/scripts/benchmark_serving.py: a port of vLLM's benchmark_serving (same loop)"
    ),
    "trtllm-bench": ClientPreset(
        True,
        "tensorrt_llm/bench (trtllm-bench throughput --concurrency N): the whole dataset is enqueued and N "
        "requests kept in flight; statistics over every request. In process: the LLM API on a pre-tokenized "
        "dataset (trtllm-bench prepare_dataset), no HTTP server",
        serving_path=False,
    ),
    "genai-perf": ClientPreset(
        False,
        "perf_analyzer concurrency mode: measurement windows (--measurement-interval) repeated until "
        "stable (--stability-percentage); the start-up wave is outside the stable windows",
    ),
    "aiperf": ClientPreset(
        True,
        "ai-dynamo/aiperf concurrency mode: timing/credit_issuing_strategy.py (db4f6397, 2025-10) "
        "_execute_phases waits for every warm-up credit to return before the profiling phase, and "
        "RequestRateStrategy (CONCURRENCY_BURST) drops credits as an asyncio.Semaphore(concurrency) frees, "
        "so the profiling phase opens with `concurrency` requests at once; later releases keep it "
        "(timing/config.py _build_credit_phase_config: a warm-up phase waits without limit, seamless "
        "False by default; docs/tutorials/warmup.md 'waits indefinitely for all warmup responses before "
        "starting profiling'). TTFT and ITL per request, ITL = (latency - TTFT) / (output tokens - 1) "
        "(metrics/types/inter_token_latency_metric.py), averaged over the profiled requests",
    ),
}
ENGINE_CLIENT = {
    "sglang": "sglang-bench-serving",
    "vllm": "vllm-bench-serve",
    "trtllm": "trtllm-serve-benchmark",
    "other": "genai-perf",
}
PROMPTS_PER_CLIENT = 10
MIN_PROMPTS = 50


def client_for(engine: str, client: str | None = None) -> str:
    """The client preset an anchor uses: the one it names, else its engine's serving benchmark."""
    if client is not None:
        if client not in PRESETS:
            raise ValueError(f"client {client!r}: allowed {', '.join(PRESETS)}")
        return client
    return ENGINE_CLIENT.get(engine, "genai-perf")


def client_config(
    concurrency: float,
    num_prompts: int | None = None,
    seed: int = 0,
    client: str = "sglang-bench-serving",
    given: SimConfig | None = None,
) -> SimConfig:
    """A benchmark client's closed loop at `concurrency` (`PRESETS[client]`). `given` (an anchor's
    `simulation:` section) keeps every field it sets, e.g. the lengths its client draws; a section
    with its own traffic (an arrival process or a trace) is returned as it is."""
    n = num_prompts or max(MIN_PROMPTS, int(PROMPTS_PER_CLIENT * concurrency))
    loop: dict[str, object] = {
        "requests": n,
        "seed": seed,
        "warmup_fraction": 0.1,
        "cooldown_fraction": 0.1,  # windows measured while the load goes on: the last 10% of arrivals keep it on
        "warmup_by": "arrival",
    }
    if PRESETS[client].first_wave:  # every request measured, the drain after the last issue included
        loop = {**loop, "closed_loop_ramp_s": 0.0, "warmup_fraction": 0.0, "cooldown_fraction": 0.0}
        loop["warmup_by"] = "completion"
    if given is None:
        return SimConfig.model_validate(loop)
    if given.arrival is not None or given.trace is not None:
        return given
    kept = {k: v for k, v in loop.items() if k not in given.model_fields_set}
    if "cooldown_fraction" in kept:  # a stated warm-up leaves room for some cool-down ...
        warmup = float(kept.get("warmup_fraction", given.warmup_fraction))  # type: ignore[arg-type]
        kept["cooldown_fraction"] = window_share(float(kept["cooldown_fraction"]), warmup)  # type: ignore[arg-type]
        if kept.get("warmup_by", given.warmup_by) == "completion":  # ... and a window by completion none
            kept["cooldown_fraction"] = 0.0
    return given.model_copy(update=kept)
