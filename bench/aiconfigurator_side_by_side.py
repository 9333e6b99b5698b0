"""NVIDIA AIConfigurator and our planner side by side on the same anchors.

For every anchor of the given files (default: validation/public/*.yaml and
../shared/validation/seed_anchors.yaml) that AIConfigurator can express, run AIC's estimate
(`aiconfigurator.cli.api.cli_estimate`, in AIC's own virtualenv, one worker process, a timeout
per anchor) and the planner's prediction (`planner.search.validate.predict_anchor`), print both with
their errors, then the median |error| of each on the anchors BOTH predict, by metric class
(ttft, tpot, throughput, other) and by split. AIC's raw results are cached in
bench/results/aiconfigurator_predictions.json (key: anchor id + exact AIC inputs; each entry keeps
the AIC and backend-database versions), so `--cached` reruns without AIC installed; the table
is saved atomically to bench/results/aiconfigurator_side_by_side.json.

Mapping (bench/aic_inputs.py), our ids -> AIC names:
- models: deepseek-v3 -> deepseek-ai/DeepSeek-V3, deepseek-v3.2 -> deepseek-ai/DeepSeek-V3.2,
  deepseek-v4-flash/-pro -> deepseek-ai/DeepSeek-V4-Flash/-Pro, kimi-k2 -> moonshotai/Kimi-K2.5 (same
  text-model shape; AIC could not load Kimi-K2-Instruct offline),
  qwen3-235b-a22b -> Qwen/Qwen3-235B-A22B, qwen3-30b-a3b -> Qwen/Qwen3-30B-A3B, gpt-oss-120b ->
  openai/gpt-oss-120b, llama-3.1-70b/-8b -> meta-llama/Meta-Llama-3.1-70B/-8B (AIC's shipped configs).
- hardware: h100-sxm, h200-sxm -> h100_sxm, h200_sxm; b200, b300 -> b200_sxm, b300_sxm; gb200-nvl72,
  gb300-nvl72 -> gb200, gb300; rtx-pro-6000 -> rtx_pro_6000_server. engine sglang|trtllm|vllm ->
  the backend of that name, at AIC's default database version for it (`backend_version=None`).
- deployment: aggregated -> mode agg; prefill + decode pools -> mode disagg, num_workers =
  instances. tp, pp, dp_attention -> tp_size, pp_size, attention_dp_size; ep -> moe_ep_size and
  moe_tp_size = gpus_per_instance / pp / ep (MoE models only).
- concurrency (total; per_gpu x all GPUs; per_instance x instances) -> agg batch_size and
  disagg decode_batch_size per attention-DP rank (total / (instances x dp_attention));
  disagg prefill_batch_size 1, as in AIC's own silicon rows.
- precision: dense -> gemm_quant_mode, moe -> moe_quant_mode (fp8 -> fp8_block for the block-FP8
  checkpoints deepseek-v3/-v3.2 and kimi-k2, else fp8, then the other FP8 label where AIC has no
  perf data for the first: our `fp8` covers both scalings; nvfp4 -> nvfp4; mxfp4 -> w4a16_mxfp4;
  w4a16 -> int4_wo; bf16 -> bfloat16); kv_cache -> kvcache_quant_mode, attention ->
  fmha_quant_mode; `unknown` -> left to AIC, which infers it from the checkpoint.
- mtp: {draft_tokens, accepted_tokens | acceptance_length - 1} -> nextn, nextn_accepted; null or
  `unknown` -> no MTP (AIC's default). The planner instead assumes its engine default for unknown.
- metrics: ttft_ms, tpot_ms, e2e_ms (request_latency), output_tok_s, output_tok_s_per_gpu,
  output_tok_s_per_user from AIC's raw result; input/total_tok_s_per_gpu = its tokens/s/gpu / osl
  x isl (or x (isl + osl)).
Cannot be expressed (the reason is printed per anchor): phase prefill or decode alone; metrics
max_users_at_slo and decode_time_share_*; anchors with an slo (a search, not one estimate);
request_rate workloads; any deployment, isl, osl or concurrency field `unknown`; several pools
per role; concurrency that does not split evenly over attention-DP ranks; hardware h800 (no AIC
system); a model given as a config.json path; engine `other`.

Usage: python bench/aiconfigurator_side_by_side.py [FILES...] [--cached] [--refresh] [--prune] [--jobs N]
       [--aic-python /work/aic-venv/bin/python] [--timeout 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import yaml
from aic_inputs import Unexpressible, aic_inputs, aic_metric, fp8_variants

from planner.search.validate import predict_anchor

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / "results" / "aiconfigurator_predictions.json"
OUT = ROOT / "bench" / "results" / "aiconfigurator_side_by_side.json"
WORKER = r"""
import contextlib, importlib.metadata, json, numbers, signal, sys
from aiconfigurator.cli.api import cli_estimate
version, timeout = importlib.metadata.version("aiconfigurator"), int(sys.argv[1])
class Timeout(Exception): pass
def on_alarm(*_): raise Timeout
signal.signal(signal.SIGALRM, on_alarm)
def one(inputs):
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            r = cli_estimate(**inputs)
        raw = {k: float(v) for k, v in r.raw.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)}
        return {"raw": raw, "backend_version": r.backend_version, "inputs_used": inputs}
    except Timeout:
        return {"error": f"timeout after {timeout} s"}
    except Exception as e:  # reported per anchor in the table, not swallowed
        return {"error": f"{type(e).__name__}: " + (str(e).splitlines() or [""])[0][:300]}
    finally:
        signal.alarm(0)
for line in sys.stdin:
    for inputs in json.loads(line):  # variants in order; the next only when AIC has no perf data
        out = one(inputs)
        if "PerfDataNotAvailable" not in out.get("error", ""):
            break
    print(json.dumps({"aic_version": version, **out}), flush=True)
"""


def load_anchors(files: list[Path]) -> list[tuple[str, Path, dict[str, Any]]]:
    out = []
    for f in files:
        try:
            doc = yaml.safe_load(f.read_text())
        except (OSError, yaml.YAMLError) as exc:
            print(f"{f}: cannot read anchors: {str(exc).splitlines()[0]}", file=sys.stderr)
            raise SystemExit(2) from exc
        if not isinstance(doc, dict):
            print(f"{f}: expected `version: 1` and an `anchors:` list", file=sys.stderr)
            raise SystemExit(2)
        split = ((doc.get("source") or {}).get("split")) or ("seed" if "seed" in f.name else "unknown")
        out += [(split, f, a) for a in doc.get("anchors") or [] if isinstance(a, dict)]
    return out


def cache_key(anchor_id: str, inputs: dict[str, Any]) -> str:
    return f"{anchor_id}|{json.dumps(inputs, sort_keys=True)}"


class AICWorker:
    """One AIC process in its venv; estimates are memoized by inputs (ttft and tpot anchors of
    one measurement share one estimate)."""

    def __init__(self, python: str, timeout_s: int) -> None:
        self.proc = subprocess.Popen(
            [python, "-c", WORKER, str(timeout_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.memo: dict[str, dict[str, Any]] = {}

    def estimate(self, inputs: dict[str, Any]) -> dict[str, Any]:
        key = json.dumps(inputs, sort_keys=True)
        if key not in self.memo:
            assert self.proc.stdin is not None
            assert self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(fp8_variants(inputs)) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"AIC worker exited (rc {self.proc.poll()}); is AIC installed in that python?")
            self.memo[key] = json.loads(line)
        return self.memo[key]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def write_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1)
    os.chmod(tmp, 0o644)  # mkstemp makes it owner-only
    os.replace(tmp, path)


def aic_value(entry: dict[str, Any], a: dict[str, Any], inputs: dict[str, Any]) -> tuple[float | None, str | None]:
    if "error" in entry:
        return None, entry["error"]
    try:
        return aic_metric(a["metric"], entry["raw"], inputs["isl"], inputs["osl"]), None
    except KeyError as exc:
        return None, f"AIC result has no {exc}"


def metric_class(metric: str) -> str:
    if metric in ("ttft_ms", "tpot_ms"):
        return metric.removesuffix("_ms")
    return "throughput" if "tok_s" in metric else "other"


def rel(pred: float | None, pub: float) -> float | None:
    return None if pred is None or not pub else (pred - pub) / pub


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    both = [r for r in rows if r["planner_err"] is not None and r["aic_err"] is not None]
    groups: dict[str, list[dict[str, Any]]] = {"all": both}
    for r in both:
        groups.setdefault(f"metric:{metric_class(r['metric'])}", []).append(r)
        groups.setdefault(f"split:{r['split']}", []).append(r)
    out = {}
    for name, g in sorted(groups.items()):
        out[name] = {
            "n": len(g),
            "planner_median_abs_err": round(statistics.median(abs(r["planner_err"]) for r in g), 4),
            "aic_median_abs_err": round(statistics.median(abs(r["aic_err"]) for r in g), 4),
            "planner_within_tol": sum(abs(r["planner_err"]) <= r["tolerance"] for r in g),
            "aic_within_tol": sum(abs(r["aic_err"]) <= r["tolerance"] for r in g),
        }
    return out


def fmt(v: float | None, err: float | None) -> str:
    return "-" if v is None else f"{v:.4g} ({err:+.0%})" if err is not None else f"{v:.4g}"


def _planner(task: tuple[dict[str, Any], str]) -> tuple[float | None, str | None]:
    """The planner's prediction of one anchor (a worker process's job)."""
    res = predict_anchor(task[0], Path(task[1]))
    return res.predicted, res.error


def run(args: argparse.Namespace) -> None:
    cache = json.loads(CACHE.read_text()) if CACHE.exists() and not args.refresh else {"entries": {}}
    entries: dict[str, Any] = cache["entries"]
    worker = None if args.cached else AICWorker(args.aic_python, args.timeout)
    rows, skipped, used = [], [], set()
    expressed: list[tuple[str, Path, dict[str, Any], dict[str, Any]]] = []
    for split, f, a in load_anchors(args.files):
        try:
            expressed.append((split, f, a, aic_inputs(a)))
        except Unexpressible as exc:
            skipped.append({"id": str(a.get("id")), "file": f.name, "reason": str(exc)})
    tasks = [(a, str(f.parent)) for _, f, a, _ in expressed]
    with Pool(max(1, args.jobs)) as pool:  # the planner's side: independent anchors, in parallel
        planned = pool.map(_planner, tasks, chunksize=1)
    for (split, f, a, inputs), (predicted, perror) in zip(expressed, planned, strict=True):
        aid = str(a.get("id"))
        key = cache_key(aid, inputs)
        used.add(key)
        if key not in entries and worker is not None:
            entries[key] = {"anchor_id": aid, "inputs": inputs, **worker.estimate(inputs)}
            if len(worker.memo) % 25 == 0:  # keep what was computed if the run is interrupted
                write_atomic(CACHE, {"entries": entries})
        entry = entries.get(key, {"error": "not in the cache (run without --cached)"})
        aic_pred, aic_error = aic_value(entry, a, inputs)
        pub = float(a["value"])
        rows.append(
            {"id": aid, "file": f.name, "split": split, "metric": a["metric"], "published": pub,
             "tolerance": float(a.get("tolerance", 0.15)),
             "planner": predicted, "planner_err": rel(predicted, pub), "planner_error": perror,
             "aic": aic_pred, "aic_err": rel(aic_pred, pub), "aic_error": aic_error,
             "aic_version": entry.get("aic_version"), "aic_backend_version": entry.get("backend_version")}
        )  # fmt: skip
        print(f"{aid} {a['metric']} {pub:.4g} planner {fmt(predicted, rows[-1]['planner_err'])} "
              f"aic {fmt(aic_pred, rows[-1]['aic_err'])} {aic_error or ''}", flush=True)  # fmt: skip
    if worker is not None:
        worker.close()
    if args.prune:
        entries = {k: v for k, v in entries.items() if k in used}
    if worker is not None or args.prune:
        write_atomic(CACHE, {"entries": entries})
    summary = summarize(rows)
    print("\n| group | n both | planner median abs err | AIC median abs err | planner in tol | AIC in tol |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, s in summary.items():
        print(f"| {name} | {s['n']} | {s['planner_median_abs_err']:.1%} | {s['aic_median_abs_err']:.1%} | "
              f"{s['planner_within_tol']} | {s['aic_within_tol']} |")  # fmt: skip
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    print(f"\n{len(rows)} anchors expressed, {len(skipped)} not; reasons:")
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4d}  {reason}")
    files = [str(f.resolve().relative_to(ROOT.parent)) for f in args.files]
    write_atomic(OUT, {"files": files, "summary": summary, "rows": rows, "not_expressible": skipped})


def main() -> None:
    default_files = [*sorted((ROOT / "validation" / "public").glob("*.yaml")),
                     ROOT.parent / "shared" / "validation" / "seed_anchors.yaml"]  # fmt: skip
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, default=default_files)
    ap.add_argument("--cached", action="store_true", help="use only cached AIC results; do not run AIC")
    ap.add_argument("--refresh", action="store_true", help="ignore the cache and rerun AIC on every anchor")
    ap.add_argument("--prune", action="store_true", help="drop cached results of anchors not in these files")
    ap.add_argument("--aic-python", default="/work/aic-venv/bin/python")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per AIC estimate")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for the planner's predictions")
    args = ap.parse_args()
    if args.cached and args.refresh:
        sys.exit("--cached and --refresh exclude each other")
    run(args)


if __name__ == "__main__":
    main()
