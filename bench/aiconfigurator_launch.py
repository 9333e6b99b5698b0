"""What AIConfigurator's generator launches for a silicon row: the benchmark client and the engine limits
(used by bench/aiconfigurator_silicon_anchors.py; reads nothing, runs nothing).

Source: ai-dynamo/aiconfigurator @095f58a, src/aiconfigurator/generator/ (GEN below).
- Client (`config/backend_templates/benchmark/bench_run.sh.j2`): `aiperf profile --concurrency c
  --num-requests c x BENCH_MULTI_ROUND (20) --warmup-request-count 2c --isl/--osl (stddev 0) --extra-inputs
  ignore_eos:true --streaming`: the `aiperf` client preset (planner/inputs/benchmarks.py) with 20c profiled
  requests of fixed lengths.
- Engine limits: `module_bridge.py` passes the row's batch size of each pool as `max_batch_size`, which
  `config/backend_config_mapping.yaml` launches as TRT-LLM `max_batch_size`, vLLM `--max-num-seqs`, SGLang
  `--max-running-requests`, after the rule plugin of the backend rewrites it. Two rule sets exist: the default
  (`rule_plugin/<backend>.rule`, "tuned for deployment") and `rule=benchmark` (`rule_plugin/benchmark/
  <backend>.rule`), which AIConfigurator's guide says is "designed to align generated configs with AIC sdk
  results ... stricter max batch size that follows the simulated batch size" (docs/cli_user_guide.md, Rule
  Plugin Selection; docs/generator_overview.md): the rule set for measuring a row's simulated deployment, so
  the silicon rows are read as launched with it. Its limits:
  - every backend: prefill max_batch_size = (max_batch_size if max_batch_size else 1), i.e. the row's
    prefill_batch_size (1 on every disaggregated row); agg/decode max_batch_size = the row's batch size
    (vLLM's rule sets only decode; its agg keeps the row's batch module_bridge passes);
  - TRT-LLM max_num_tokens (rounded up to the 32-token block): isl + 1500 (prefill), batch + isl + 1500 (agg);
  - vLLM --max-num-batched-tokens: isl + 1500 (prefill), batch + isl + 1500 (agg);
  - SGLang --max-prefill-tokens isl + 1500, but SGLang admits whole prompts against it (PrefillAdder: the
    first always, the next only if its whole input fits what is left), not the planner's per-step chunk
    budget (chunked_prefill_size): not stated; agg `enable_mixed_chunk = true`: decodes and a prefill chunk
    share a step (`runtime.scheduler: mixed`).
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
    """The `runtime` fields AIConfigurator's benchmark rule set launches for this row, and the note that
    lists them and what is left unknown (module docstring)."""
    out: dict[str, Any] = {}
    said: list[str] = []
    left: list[str] = []
    (_disagg if disagg else _agg)(row, engine, dp, out, said, left)
    note = (
        f"Engine limits as {GEN} launches them with its benchmark rule set (rule_plugin/benchmark/{engine}.rule, "
        f"'designed to align generated configs with AIC sdk results'): {'; '.join(said) or 'none'}; unknown: "
        f"{'; '.join(left) or 'none'}."
    )
    if engine == "trtllm" and disagg:
        note += " Not modelled: TRT-LLM prefill disable_overlap_scheduler true (decode false)."
    return out, note


def _block(n: int) -> int:
    """TRT-LLM max_num_tokens rounded up to the 32-token KV block (the benchmark rule's tokens_per_block)."""
    return -(-n // 32) * 32


def _per_rank(engine: str, n: int, dp: int) -> int | None:
    """A batch limit per attention-DP rank: TRT-LLM and vLLM apply it per rank; SGLang divides its
    --max-running-requests by dp_size, which no row's numbers say was meant: left unknown for dp > 1."""
    return n if engine != "sglang" or dp == 1 else None


def _disagg(row: dict[str, str], engine: str, dp: dict[str, int], out: dict, said: list, left: list) -> None:
    isl, pre, dec = int(row["isl"]), _i(row, "prefill_batch_size") or 1, _i(row, "decode_batch_size")
    running: dict[str, int] = {}
    for role, n in (("prefill", pre), ("decode", dec)):
        limit = _per_rank(engine, n, dp[role]) if n else None
        if limit is not None:
            running[role] = limit
            said.append(f"{role} max_batch_size {limit} per rank")
        else:
            left.append(f"{role} batch limit (SGLang --max-running-requests {n} // dp {dp[role]})")
    if running:
        out["max_running_per_rank"] = running
    if engine in ("vllm", "trtllm"):
        tokens = isl + 1500 if engine == "vllm" else _block(isl + 1500)
        out["max_prefill_tokens"] = {"prefill": tokens}
        said.append(f"prefill max_num_tokens {tokens}")
    else:
        left.append("prefill --max-prefill-tokens isl+1500 (whole-prompt admission, not a chunk budget)")


def _agg(row: dict[str, str], engine: str, dp: dict[str, int], out: dict, said: list, left: list) -> None:
    isl, bs = int(row["isl"]), int(row["batch_size"])
    limit = _per_rank(engine, bs, dp["aggregated"])
    if limit is not None:
        out["max_running_per_rank"] = limit
        said.append(f"max_batch_size {limit} per rank")
    else:
        left.append(f"batch limit (SGLang --max-running-requests {bs} // dp {dp['aggregated']})")
    if engine in ("vllm", "trtllm"):
        tokens = bs + isl + 1500 if engine == "vllm" else _block(bs + isl + 1500)
        out["max_prefill_tokens"] = tokens
        said.append(f"max_num_tokens {tokens} per rank")
    else:
        out["scheduler"] = "mixed"
        said.append("enable_mixed_chunk true (decodes and a prefill chunk share a step)")
        left.append("--max-prefill-tokens isl+1500 (whole-prompt admission, not a chunk budget)")
