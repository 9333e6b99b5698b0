"""What AIConfigurator's generator launches for a silicon row: the benchmark client and the engine limits
(used by bench/aiconfigurator_silicon_anchors.py; reads nothing, runs nothing).

Source: ai-dynamo/aiconfigurator @095f58a, src/aiconfigurator/generator/ (GEN below).
- Client (`config/backend_templates/benchmark/bench_run.sh.j2`): `aiperf profile --concurrency c
  --num-requests c x BENCH_MULTI_ROUND (20) --warmup-request-count 2c --isl/--osl (stddev 0) --extra-inputs
  ignore_eos:true --streaming`: the `aiperf` client preset (planner/inputs/benchmarks.py) with 20c profiled
  requests of fixed lengths.
- Engine limits: `module_bridge.py` passes the row's batch size of each pool as `max_batch_size`, which
  `config/backend_config_mapping.yaml` launches as TRT-LLM `max_batch_size`, vLLM `--max-num-seqs`, SGLang
  `--max-running-requests`, after the rule plugin of the backend rewrites it. Two rule sets exist and the
  row does not say which one ran: the default (`rule_plugin/<backend>.rule`) and `rule=benchmark`
  (`rule_plugin/benchmark/<backend>.rule`). Stated below is only what both set alike:
  - every backend: prefill max_batch_size = (max_batch_size if max_batch_size else 1), i.e. the row's
    prefill_batch_size (1 on every disaggregated row);
  - TRT-LLM: agg/decode max_batch_size = the row's batch size (both rule sets); max_num_tokens is isl + 500
    (default) or isl + 1500 (benchmark) for prefill and batch + isl + 500 / + 1500 for agg: not stated;
  - vLLM: agg/decode --max-num-seqs is 512 if batch < 512 else 2 x batch (default) or the batch (benchmark):
    not stated; --max-num-batched-tokens = isl + 1500 (prefill) and batch + isl + 1500 (agg) in both;
  - SGLang: agg/decode --max-running-requests 512 / 2 x batch (default) or the batch (benchmark): not
    stated; --max-prefill-tokens isl + 1500 in both, but SGLang admits whole prompts against it
    (PrefillAdder: the first always, the next only if its whole input fits what is left), not the
    planner's per-step chunk budget (chunked_prefill_size): not stated.
Per-rank semantics: TRT-LLM max_batch_size and vLLM max_num_seqs / max_num_batched_tokens hold per
attention-DP rank (each rank or DP engine core schedules its own batch); SGLang divides
--max-running-requests by dp_size (Scheduler `per_dp_max_running_requests = max_running_requests // dp_size`,
ModelRunner request pool likewise; read in sgl-project/sglang copies, not at the rows' tags), so 1 on a
DP-4/8 prefill worker is 0 per rank, no runnable limit: left unknown there.
Not representable, noted: TRT-LLM prefill `disable_overlap_scheduler: true` (decode false), whether an SGLang
or TRT-LLM prefill server counts requests still sending their KV against the limit.
"""

from __future__ import annotations

from typing import Any

from simulator.config import MAX_REQUESTS, MAX_STEPS

GEN = "ai-dynamo/aiconfigurator @095f58a src/aiconfigurator/generator"
STEP_CAP = 100_000_000  # SimConfig.max_steps upper bound
REQUESTS_PER_CLIENT = 20  # bench_run.sh.j2: BENCH_MULTI_ROUND default 20, --num-requests concurrency x 20


def _i(row: dict[str, str], key: str) -> int | None:
    return int(row[key]) if row.get(key) else None


def client(conc: int, osl: int) -> tuple[dict[str, Any], str]:
    """The anchor's `simulation` section for the `aiperf` client, and the note that says so. The run's
    20c requests, at most the simulator's MAX_REQUESTS (said in the note where that cuts it); a run
    longer than the default step cap gets its bound, every request one decode step at a time."""
    n = REQUESTS_PER_CLIENT * conc
    sim: dict[str, Any] = {"requests": min(n, MAX_REQUESTS)}
    if sim["requests"] * (osl + 1) > MAX_STEPS:
        sim["max_steps"] = min(sim["requests"] * (osl + 1), STEP_CAP)
    cut = f" The simulator runs the first {MAX_REQUESTS:,} of them (its MAX_REQUESTS)." if n > MAX_REQUESTS else ""
    note = (
        f"Client: AIPerf as AIConfigurator's generator runs it ({GEN}/config/backend_templates/benchmark/"
        f"bench_run.sh.j2): --concurrency {conc} --num-requests {n} --warmup-request-count "
        f"{2 * conc}, fixed isl/osl, ignore_eos, streaming; the warm-up drains before the profiled requests start "
        f"together (client preset aiperf).{cut} Mean vs median: the CSV does not say and AIConfigurator publishes no "
        "code that writes it (a dump of an internal benchmark DB); read as AIPerf's mean."
    )
    return sim, note


def runtime(row: dict[str, str], engine: str, disagg: bool, dp: dict[str, int]) -> tuple[dict[str, Any], str]:
    """The `runtime` fields both of AIConfigurator's rule sets launch alike for this row, and the note
    that lists them and what is left unknown (module docstring)."""
    out: dict[str, Any] = {}
    said: list[str] = []
    left: list[str] = []
    (_disagg if disagg else _agg)(row, engine, dp, out, said, left)
    note = (
        f"Engine limits as {GEN} launches them (rule_plugin/{engine}.rule and rule_plugin/benchmark/{engine}.rule "
        f"agree): {'; '.join(said) or 'none'}; unknown: {'; '.join(left) or 'none'}."
    )
    if engine == "trtllm" and disagg:
        note += " Not modelled: TRT-LLM prefill disable_overlap_scheduler true (decode false)."
    return out, note


def _disagg(row: dict[str, str], engine: str, dp: dict[str, int], out: dict, said: list, left: list) -> None:
    isl, pre, dec = int(row["isl"]), _i(row, "prefill_batch_size") or 1, _i(row, "decode_batch_size")
    running: dict[str, int] = {}
    if engine != "sglang" or dp["prefill"] == 1:
        running["prefill"] = pre
        said.append(f"prefill max_batch_size {pre} per rank")
    else:
        left.append(f"SGLang prefill --max-running-requests {pre} // dp {dp['prefill']} = 0 per rank")
    if engine == "trtllm" and dec:
        running["decode"] = dec
        said.append(f"decode max_batch_size {dec} per rank")
    else:
        left.append("decode batch limit (rule sets differ)")
    if running:
        out["max_running_per_rank"] = running
    if engine == "vllm":
        out["max_prefill_tokens"] = {"prefill": isl + 1500}
        said.append(f"prefill --max-num-batched-tokens {isl + 1500}")
    else:
        left.append("prefill token budget (" + ("isl+500 or +1500" if engine == "trtllm" else "SGLang rule") + ")")


def _agg(row: dict[str, str], engine: str, dp: dict[str, int], out: dict, said: list, left: list) -> None:
    isl, bs = int(row["isl"]), int(row["batch_size"])
    if engine == "trtllm":
        out["max_running_per_rank"] = bs
        said.append(f"max_batch_size {bs} per rank")
        left.append("max_num_tokens (batch+isl+500 or +1500)")
    else:
        left.append("batch limit (rule sets differ)")
    if engine == "vllm":
        out["max_prefill_tokens"] = bs + isl + 1500
        said.append(f"--max-num-batched-tokens {bs + isl + 1500} per rank")
    elif engine == "sglang":
        left.append("--max-prefill-tokens isl+1500 (whole-prompt admission, not a chunk budget)")
