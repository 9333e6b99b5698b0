"""bench/mlperf_layout.py: an MLPerf result that states no layout takes the one its own harness config
states (aggregated, or a Dynamo disaggregated cluster whose workers' TRT-LLM ymls give each pool's size,
limits and MTP), read from a git snapshot without running anything; a config of no plain layout is left
unknown."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from bench import mlperf_configs as mc
from bench.mlperf_layout import config_path, read_layout

URL = "https://github.com/mlcommons/inference_results_v6.0/blob/main/closed/Acme/results/{}/deepseek-r1/Interactive/performance/run_1/mlperf_log_summary.txt"
HEAD = "import code.common.constants as C\nimport code.llmlib.fields as llm_fields\n"
EXPORT = "EXPORTS = {C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.99), C.PowerSetting.MaxP): cfg}\n"
AGG = (
    HEAD
    + (
        "cfg = {llm_fields.tensor_parallelism: 8, llm_fields.moe_expert_parallelism: 8,\n"
        "  llm_fields.trtllm_build_flags: {'enable_attention_dp': True},\n"
        "  llm_fields.trtllm_runtime_flags: {'speculative_decoding':\n"
        "    {'decoding_type': 'MTP', 'max_total_draft_tokens': 3}}}\n"
    )
    + EXPORT
)
DISAGG = (
    HEAD
    + (
        "cfg = {llm_fields.dynamo_cluster: {'num_prefill_workers': 2, 'num_decode_workers': 4,\n"
        "  'frontend': {'router_mode': 'kv'},\n"
        "  'prefill': {'trtllm_yml_override': '/work/configs/S4/Interactive/disagg_prefill/deepseek-r1.yml'},\n"
        "  'decode': {'trtllm_yml_override': '/work/configs/S16/Interactive/disagg_decode/deepseek-r1.yml'}}}\n"
    )
    + EXPORT
)
WORKER = (
    "tensor_parallel_size: {}\nmoe_expert_parallel_size: {}\nenable_attention_dp: true\n"
    "max_batch_size: {}\nmax_num_tokens: {}\n{}"
)
MTP = "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 3\n"


def _repo(tmp_path: Path) -> tuple[Path, str]:
    files = {
        "closed/Acme/configs/SYS8/Interactive/deepseek-r1.py": AGG,
        "closed/Acme/configs/X72/Interactive/deepseek-r1.py": DISAGG,
        "closed/Acme/configs/S4/Interactive/disagg_prefill/deepseek-r1.yml": WORKER.format(4, 4, 128, 12288, MTP),
        "closed/Acme/configs/S16/Interactive/disagg_decode/deepseek-r1.yml": WORKER.format(16, 16, 64, 6144, MTP),
        "closed/Acme/configs/CORES/Interactive/deepseek-r1.py": HEAD + "cfg = {llm_fields.precision: 'fp4'}\n" + EXPORT,
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    commit = subprocess.run([*git[:3], "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return tmp_path, commit


def test_pipeline_parallelism_is_not_folded_into_tp():
    from bench.mlperf_layout import _pool

    assert _pool(4, 2, 1, False) == {
        "instances": 1,
        "gpus_per_instance": 8,
        "tp": 4,
        "dp_attention": 1,
        "ep": 1,
        "pp": 2,
    }


def test_config_path_drops_the_trt_suffix():
    assert config_path({"url": URL.format("SYS8_TRT")}) == "closed/Acme/configs/SYS8/Interactive/deepseek-r1.py"


def test_aggregated_and_disaggregated_layouts(tmp_path):
    repo, commit = _repo(tmp_path)
    agg, said = read_layout({"url": URL.format("SYS8_TRT"), "notes": "... total GPUs 16; ..."}, repo, commit)
    assert agg["deployment"] == {  # two instances of the config's 8 GPUs on the 16-GPU system
        "aggregated": {"instances": 2, "gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8, "pp": 1}
    }
    assert read_layout({"url": URL.format("SYS8_TRT"), "notes": "total GPUs 12"}, repo, commit) is None  # 4 left over
    assert read_layout({"url": URL.format("SYS8_TRT")}, repo, commit) is None  # system size not stated
    assert agg["mtp"] == {"draft_tokens": 3}
    assert "harness config closed/Acme/configs/SYS8/Interactive/deepseek-r1.py" in "".join(said)
    dis, _ = read_layout({"url": URL.format("X72_TRT")}, repo, commit)
    assert dis["deployment"]["prefill"] == {
        "instances": 2,
        "gpus_per_instance": 4,
        "tp": 1,
        "dp_attention": 4,
        "ep": 4,
        "pp": 1,
    }
    assert dis["deployment"]["decode"]["instances"] == 4
    assert dis["deployment"]["decode"]["dp_attention"] == 16
    assert dis["runtime"]["max_prefill_tokens"] == {"prefill": 12288, "decode": 6144}
    assert dis["runtime"]["max_running_per_rank"] == {"prefill": 128, "decode": 64}
    assert dis["router"] == "kv_aware"
    assert dis["mtp"] == {"draft_tokens": 3}
    assert read_layout({"url": URL.format("CORES_TRT"), "notes": "total GPUs 8"}, repo, commit) is None
    assert read_layout({"url": URL.format("ABSENT_TRT")}, repo, commit) is None  # no config published


def test_the_v60_deepseek_interactive_anchors_state_their_configs_layout_and_mtp():
    data = yaml.safe_load(Path(mc.ROUNDS["v6-0"]["file"]).read_text())["anchors"]
    rows = [a for a in data if "deepseek-r1-interactive" in a["id"]]
    assert len(rows) == 9
    for a in rows:
        assert a["mtp"] == {"draft_tokens": 3}, a["id"]
        assert not mc._unknown(a["deployment"]), a["id"]
        assert "Deployment read from the harness config closed/" in a["notes"], a["id"]
