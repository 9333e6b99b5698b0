"""Writes each MLPerf benchmark's dataset input-length facts into the MLPerf anchor files
(validation/public/mlperf-inference-v5-1.yaml, mlperf-inference-v6-0.yaml).

A LoadGen log states the output tokens per sample (the anchors' osl) but not the input lengths. Each
benchmark's dataset is fixed and public, so its input-token statistics are facts of the benchmark: this
script sets every anchor's `workload.isl` to its dataset's mean input tokens and adds
`simulation.input_len`, a lognormal with that mean and the dataset's standard deviation of ln(input
tokens), so that a simulated anchor (a Server/Interactive TTFT or TPOT at the run's Poisson rate) draws
prompts as spread as LoadGen's samples. Outputs stay at the log's mean (osl): the logs give no per-sample
output lengths. Where the dataset publishes each sample's reference output length (deepseek-r1's
tok_ref_output_len), both lengths instead resample the dataset's (input, output) rows together from a
copy of that table (validation/public/data/), outputs cut at the benchmark's max output: LoadGen draws
samples from the dataset, and the outputs' spread (cv 1.25) sets how long the sequences in flight are
(`simulator.workload.in_flight_kv`). It rewrites the files in place (yaml.safe_dump at width 120
reproduces them byte for byte) and is idempotent. It does not read any result or prediction, and it
changes nothing else.

Usage: python bench/mlperf_workload.py
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "validation/public/mlperf-inference-v5-1.yaml", ROOT / "validation/public/mlperf-inference-v6-0.yaml"]

CONF = "https://github.com/mlcommons/inference/blob/b66003e10e2db4b8c36a448b0545ec90fcc6e9e9/loadgen/mlperf.conf"
PSAP = "https://github.com/openshift-psap/performance-dashboard/blob/71007029fb5bced1d79808e7e64dc4c2af82ea55/"
REF = "https://github.com/mlcommons/inference/blob/b66003e10e2db4b8c36a448b0545ec90fcc6e9e9/language/"

# Statistics of the per-sample input token counts of each benchmark's whole dataset (the sample count
# equals mlperf.conf's performance_sample_count_override for the benchmark). The counts are the
# tokenized prompts of MLCommons' own dataset files, as dumped by openshift-psap/performance-dashboard
# (its generate_dataset_summaries.py / generate_summaries.py name the column read):
FACTS: dict[str, dict[str, Any]] = {
    "llama3.1-8b": {
        "dataset": "CNN/DailyMail validation, cnn_eval.json, 13368 samples",
        "column": "len(tok_input)",
        "url": PSAP + "mlperf-data/summaries/llama3-1-8b-datacenter.csv",
        "mean": 870.7,
        "median": 784,
        "min": 79,
        "max": 2540,
        "sigma": 0.504,
        "output": f"output capped at 128 tokens (reference {REF}llama3.1-8b/SUT_VLLM.py: max_tokens 128)",
    },
    "deepseek-r1": {
        "dataset": (
            "AIME/MATH500/GPQA/MMLU-Pro/LiveCodeBench mix, mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl, 4388 samples"
        ),
        "column": "tok_input_len",
        "url": PSAP + "mlperf-data/summaries/deepseek-r1.csv",
        "mean": 803.8,
        "median": 902,
        "min": 52,
        "max": 3140,
        "sigma": 0.868,
        "output": (
            f"reference outputs mean 3886 tokens ({REF}deepseek-r1/README.md: mean-output-tok-len "
            f"3886.2), max output 20k ({REF}deepseek-r1/utils/backend_registry.py: MAX_OSL = 20 * 1000); "
            "the table's tok_ref_output_len cut at 20000 has that mean exactly (3886.2), median 2194, "
            "cv 1.25; input lengths are bimodal (p10 124, p90 1281), correlation with output -0.34"
        ),
        # the table above, copied verbatim (4388 rows: input_length, output_length = tok_input_len, tok_ref_output_len)
        "table": "data/mlperf-deepseek-r1-lengths.csv",
        "max_output": 20000,
    },
    "gpt-oss-120b": {
        "dataset": (
            "performance set perf/perf_eval_ref.parquet (Harmony-format prompts, reasoning effort low), 6396 samples"
        ),
        "column": "num_tokens",
        "url": PSAP + "datasets/summaries/gpt-oss.csv",
        "mean": 5010.6,
        "median": 4593,
        "min": 600,
        "max": 15330,
        "sigma": 0.446,
        "output": (f"reference mean output 1278.20 tokens, max_output_len 10240 ({REF}gpt-oss-120b/README.md, TEST09)"),
    },
}

OLD_HEADER = "isl is unknown (the dataset mean is not in the result)."
OLD_NOTE = "input lengths from the MLPerf dataset (mean not stated in the result)"
LOGNORMAL_NOTE = (  # what an earlier run of this script wrote for a dataset that now has a table
    "isl {f[mean]:.0f} = mean input tokens of the deepseek-r1 dataset ({f[column]} over its 4388 samples; file "
    "header); input lengths lognormal, std of ln {f[sigma]}"
)


BLOCK = "# isl: the mean input tokens"  # first line of the header block this script writes (ends the header)


def header_lines() -> list[str]:
    paras = [
        "isl: the mean input tokens of the benchmark's dataset (a log does not state it), and simulation.input_len "
        "a lognormal with that mean and the dataset's std of ln(input tokens); written by bench/mlperf_workload.py. "
        "Where the dataset's per-sample reference output lengths are published (deepseek-r1), simulation.input_len "
        "and output_len instead resample its (input, output) rows together (a copy of the table, named in `trace`), "
        "outputs cut at the benchmark's max output; osl stays the log's mean. "
        f"Sample counts: {CONF} (performance_sample_count_override)."
    ]
    for name, f in FACTS.items():
        paras.append(
            f"{name}: {f['dataset']}; {f['column']} mean {f['mean']}, median {f['median']}, "
            f"min {f['min']}, max {f['max']}, std of ln {f['sigma']} ({f['url']}); {f['output']}."
        )
    return [
        line
        for para in paras
        for line in textwrap.wrap(
            para, 118, initial_indent="# ", subsequent_indent="# ", break_long_words=False, break_on_hyphens=False
        )
    ]


def note(name: str) -> str:
    f = FACTS[name]
    head = (
        f"isl {round(f['mean'])} = mean input tokens of the {name} dataset ({f['column']} over its "
        f"{f['dataset'].rsplit(', ', 1)[-1]}; file header); "
    )
    if "table" in f:
        return head + (
            f"input and output lengths resample the dataset's rows ({f['table']}), outputs cut at {f['max_output']}"
        )
    return head + f"input lengths lognormal, std of ln {f['sigma']}"


def lengths(f: dict[str, Any]) -> dict[str, Any]:
    """The `simulation` length fields for one benchmark's dataset facts."""
    if "table" in f:
        row = {"kind": "empirical", "trace": f["table"], "format": "lengths"}
        return {"input_len": row, "output_len": {**row, "max": f["max_output"]}}
    return {"input_len": {"kind": "lognormal", "mean": f["mean"], "sigma": f["sigma"]}}


def benchmark(anchor: dict[str, Any]) -> str:
    """The MLPerf benchmark directory named in the anchor's log url (.../results/<system>/<benchmark>/...)."""
    return str(anchor["url"]).split("/results/", 1)[1].split("/")[1]


def apply(anchor: dict[str, Any]) -> dict[str, Any]:
    name = benchmark(anchor)
    f = FACTS[name]
    anchor["workload"]["isl"] = round(f["mean"])
    notes = str(anchor["notes"]).replace(OLD_NOTE, note(name))
    anchor["notes"] = notes.replace(LOGNORMAL_NOTE.format(f=f), note(name)) if "table" in f else notes
    sim = {**(anchor.get("simulation") or {}), **lengths(f)}
    out: dict[str, Any] = {}
    for k, v in anchor.items():
        if k != "simulation":
            out[k] = v
        if k == "workload":
            out["simulation"] = sim
    return out


def rewrite(path: Path) -> None:
    text = path.read_text()
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(("version:", BLOCK)))
    head = [line.replace(" " + OLD_HEADER, "") for line in lines[:start]]
    data = yaml.safe_load(text)
    data["anchors"] = [apply(a) for a in data["anchors"]]
    body = yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)
    path.write_text("\n".join(head + header_lines()) + "\n" + body)


if __name__ == "__main__":
    for p in FILES:
        rewrite(p)
        print(f"wrote {p.relative_to(ROOT)}")
