"""bench/mlperf_configs.py and bench/mlperf_harness.py: a harness config is read without running it,
every Server/Interactive MLPerf anchor is simulated as LoadGen ran it, and the stated engine settings
are in the anchors (the files are what the script writes, where the results snapshots are at hand)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench import mlperf_configs as mc
from bench.mlperf_harness import ConfigError, Unread, read_config, read_log_params, setting

CONFIG = """
import code.common.constants as C
import code.llmlib.fields as llm_fields
import code.fields.models as model_fields
import os
os.environ['X'] = '1'
base = {
    llm_fields.trtllm_runtime_flags: {
        'max_num_tokens': 4638 * 3,
        'kvcache_free_gpu_mem_frac': 0.9,
        'cuda_graph_batch_sizes': [1, 2, *[128 * (x + 1) for x in range(4)]],
    },
    model_fields.gpu_batch_size: {'deepseek-r1': 512},
    llm_fields.tensor_parallelism: 8,
}
other = {**base, llm_fields.tensor_parallelism: 4}
EXPORTS = {
    C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.999), C.PowerSetting.MaxP): other,
    C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.99), C.PowerSetting.MaxP): base,
}
"""


def test_a_config_is_read_not_run_and_an_unread_value_is_refused():
    cfg = read_config(CONFIG, "x.py")
    assert cfg["tensor_parallelism"] == 8  # the 99% / MaxP export, not the 99.9% one
    assert setting(cfg, "trtllm_runtime_flags", "max_num_tokens") == 13914
    assert setting(cfg, "gpu_batch_size", "deepseek-r1") == 512
    assert isinstance(cfg["trtllm_runtime_flags"]["cuda_graph_batch_sizes"], Unread)
    with pytest.raises(ConfigError, match="not read"):
        setting(cfg, "trtllm_runtime_flags", "cuda_graph_batch_sizes")
    with pytest.raises(ConfigError, match="does not follow"):
        read_config("base = open('f')\nEXPORTS = {}", "y.py")


def test_log_parameters():
    text = "target_qps : 9.5\nttft_latency (ns): 2000000000\nmin_duration (ms): 600000\nmin_query_count : 26328\n"
    assert read_log_params(text) == {
        "target_qps": 9.5,
        "ttft_latency_ns": 2e9,
        "min_duration_ms": 600000.0,
        "min_query_count": 26328.0,
    }


def _anchors():
    for r in mc.ROUNDS.values():
        yield from yaml.safe_load(Path(r["file"]).read_text())["anchors"]


def test_server_anchors_name_loadgen_and_config_anchors_carry_the_engine_settings():
    n_lg = n_rt = 0
    for a in _anchors():
        _, scenario = mc.benchmark(a)
        if scenario.lower() in ("server", "interactive"):
            assert a["client"] == mc.CLIENT, a["id"]
            assert a["loadgen"]["min_duration_ms"] >= 600000, a["id"]
            n_lg += 1
        else:
            assert "client" not in a, a["id"]
            assert "loadgen" not in a, a["id"]
        if "harness config closed/" in a["notes"]:
            assert {"max_prefill_tokens", "max_running_per_rank", "backend"} <= set(a["runtime"]), a["id"]
            assert "Harness config settings:" in a["notes"]
            n_rt += 1
    assert n_lg > 200
    assert n_rt > 250


@pytest.mark.skipif(
    not all(Path(r["repo"]).is_dir() for r in mc.ROUNDS.values()), reason="results snapshots not on this machine"
)
def test_rewriting_the_files_changes_nothing(tmp_path, monkeypatch):
    before = {}
    for key, r in mc.ROUNDS.items():
        copy = tmp_path / Path(r["file"]).name
        copy.write_text(Path(r["file"]).read_text())
        before[key] = copy.read_text()
        monkeypatch.setitem(mc.ROUNDS[key], "file", copy)
        mc.rewrite(mc.ROUNDS[key])
        assert copy.read_text() == before[key], key


def test_a_layout_still_unknown_keeps_the_system_gpu_count():
    """The notes quote the result's 'total GPUs N', the count its per-GPU value divides by: an unknown
    layout gets `deployment.gpus` N (the search stays within it); a stated layout is left as it is."""
    unknown = {"aggregated": {f: "unknown" for f in ("instances", "gpus_per_instance", "tp")}}
    a = mc.with_system_gpus({"notes": "4 x RTX PRO 6000 (1 node(s)); total GPUs 4; Software", "deployment": unknown})
    assert a["deployment"]["gpus"] == 4
    assert a["deployment"]["aggregated"] == unknown["aggregated"]
    assert mc.with_system_gpus(a) == a  # idempotent
    stated = {"aggregated": {"instances": 8, "gpus_per_instance": 1, "tp": 1}}
    assert mc.with_system_gpus({"notes": "total GPUs 8", "deployment": stated})["deployment"] == stated
