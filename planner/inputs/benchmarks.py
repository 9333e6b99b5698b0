"""How common benchmark clients drive a closed loop, as simulation settings.

SGLang's `bench_serving`, vLLM's `vllm bench serve`, genai-perf/aiperf and TRT-LLM's serving
benchmark all start their `max_concurrency` clients together (every request is issued at once,
a semaphore admits `concurrency` of them), send `num_prompts` requests and average TTFT, TPOT and
throughput over every request, the first wave included (throughput = output tokens / benchmark
duration). So the first wave queues behind one another's prefills, which a steady-state window
leaves out. `client_config` gives that pattern: all clients start at t = 0, no warm-up, metrics
over all completed requests and their whole span. Sources: sglang python/sglang/bench_serving.py
(`benchmark`: asyncio.gather over all requests behind a semaphore; `calculate_metrics` over all
outputs, `dur_s` from start to the last completion); vllm/benchmarks/serve.py (same structure);
genai-perf concurrency mode. `num_prompts` is rarely published: 10 requests per client (at least
50), the convention of InferenceMAX's runs (num_prompts = 10 x concurrency), stands in.
"""

from __future__ import annotations

from simulator import SimConfig

CLIENTS = {
    "sglang": "sglang bench_serving",
    "vllm": "vllm bench serve",
    "trtllm": "genai-perf / trtllm-serve benchmark",
    "other": "genai-perf",
}
PROMPTS_PER_CLIENT = 10
MIN_PROMPTS = 50


def client_config(concurrency: float, num_prompts: int | None = None, seed: int = 0) -> SimConfig:
    """A benchmark client's closed loop at `concurrency` (all start together, every request counted)."""
    n = num_prompts or max(MIN_PROMPTS, int(PROMPTS_PER_CLIENT * concurrency))
    return SimConfig(requests=n, seed=seed, closed_loop_ramp_s=0.0, warmup_fraction=0.0, warmup_by="completion")
