"""Launch recipes load the checkpoint the plan priced: the catalog's repo for the plan's weight formats
(a MoE model's experts and, where the release carries them, its dense layers), BF16 weights quantized at
load where the engine can, else a CHECKPOINT placeholder naming what is missing (split from
test_launch.py, which holds the parsing, limits and multi-node checks)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.inputs.question import Question
from planner.launch import launch_commands, requirements
from planner.model.deployment import Deployment, make_pool
from planner.search.plan import plan
from roofline.catalog import get_hardware, get_model
from roofline.catalog.schema import Checkpoints
from roofline.deployment import Parallelism
from roofline.precision import PrecisionMix
from tests.planner.test_launch import assert_parses


def _one(model: str, hardware: str, **kw) -> tuple[Question, object]:
    q = Question(model=model, hardware=hardware, max_gpus=8, verify_top=0, **kw)
    a = plan(q, workers=1)
    assert a.recommendations
    return q, a.recommendations[0]


def test_the_checkpoint_matches_the_plans_precision():
    """An FP8 checkpoint is never told it is NVFP4; an NVFP4 plan loads an NVFP4 checkpoint; a catalog
    checkpoint is loaded only where its dense layers are in the plan's dense format too."""
    q, r = _one("qwen3-30b-a3b", "h100-sxm")
    prec = r.deployment.pools[0].instance.precision
    out = launch_commands(q, r)
    want = {"fp8": "Qwen/Qwen3-30B-A3B-FP8", "bf16": "Qwen/Qwen3-30B-A3B"}[prec.moe]
    if prec.dense == prec.moe:
        assert want in out["sglang"]
        assert "${CHECKPOINT:?" not in out["sglang"]
    else:  # the catalog's releases quantize dense layers and experts alike
        assert "${CHECKPOINT:?" in out["sglang"]
    assert "modelopt_fp4" not in out["sglang"]


def _pool_question(model: str, hw: str, dense: str, moe: str) -> tuple[Question, SimpleNamespace]:
    prec = PrecisionMix(attention="bf16", kv_cache="bf16", dense=dense, moe=moe)
    par = Parallelism(gpus=8, tp=8)
    pool = make_pool("vllm", "aggregated", 1, par, get_model(model), get_hardware(hw), prec, None)
    r = SimpleNamespace(deployment=Deployment("vllm", (pool,)), point=SimpleNamespace(batch=32))
    return Question(model=model, hardware=hw, max_gpus=8, engine="vllm"), r


@pytest.mark.parametrize(
    ("model", "dense", "moe", "repo"),
    [
        ("gpt-oss-120b", "bf16", "mxfp4", "openai/gpt-oss-120b"),  # the release: BF16 attention, MXFP4 experts
        ("gpt-oss-120b", "fp8", "mxfp4", None),  # no release has FP8 dense layers over MXFP4 experts
        ("qwen3-235b-a22b", "fp8", "fp8", "Qwen/Qwen3-235B-A22B-FP8"),  # block FP8 over every linear layer
        ("qwen3-235b-a22b", "bf16", "fp8", None),  # ... so not BF16 dense layers; nor online FP8 (it takes all)
        ("qwen3-235b-a22b", "bf16", "bf16", "Qwen/Qwen3-235B-A22B"),
        ("deepseek-v3", "fp8", "fp8", "deepseek-ai/DeepSeek-V3"),
    ],
)
def test_a_moe_checkpoint_is_loaded_only_where_its_dense_layers_match_the_plan(model, dense, moe, repo):
    """A plan that prices dense layers in another format than the catalog checkpoint of its experts'
    format carries asks for the weights it priced, in the command and in the plan's `needs`."""
    q, r = _pool_question(model, "h200-sxm", dense, moe)
    out = launch_commands(q, r)  # type: ignore[arg-type]
    assert_parses(out)
    needs = requirements(q, r.deployment)  # type: ignore[arg-type]
    if repo is not None:
        assert repo in out["vllm"]
        assert "${CHECKPOINT:?" not in out["vllm"]
        assert needs == []
    else:
        assert "${CHECKPOINT:?" in out["vllm"]
        assert "--quantization fp8" not in out["vllm"]
        assert needs == [f"weights: {dense} dense layers, {moe} experts (none in the catalog)"]


def test_nvfp4_plans_load_nvidia_checkpoints_and_say_so():
    q, r = _one("deepseek-v3", "b200")
    if r.deployment.pools[0].instance.precision.moe != "nvfp4":
        pytest.skip("the best B200 answer does not run NVFP4 experts")
    out = launch_commands(q, r)
    assert "nvidia/DeepSeek-V3-0324-FP4" in out["sglang"]
    assert "--quantization modelopt_fp4" in out["sglang"]


def test_a_format_without_a_known_checkpoint_asks_for_one():
    q, r = _one("gpt-oss-120b", "b200", modes=["aggregated"])
    out = launch_commands(q, r)
    prec = r.deployment.pools[0].instance.precision
    if (prec.moe, prec.dense) == ("mxfp4", "bf16"):  # the release's own formats
        assert "openai/gpt-oss-120b" in out["sglang"]
    else:
        assert "${CHECKPOINT:?" in out["sglang"]
        assert "modelopt_fp4" not in out["sglang"] or r.deployment.pools[0].instance.precision.moe == "nvfp4"
    given = q.model_copy(update={"checkpoint": "me/my-checkpoint"})
    assert "me/my-checkpoint" in launch_commands(given, r)["vllm"]


def test_bf16_checkpoints_planned_as_fp8_are_quantized_at_load_or_ask():
    q, r = _one("llama-3.1-70b", "h100-sxm")
    prec = r.deployment.pools[0].instance.precision
    out = launch_commands(q, r)
    assert_parses(out)
    if prec.dense == "fp8":
        assert "nvidia/Llama-3.1-70B-Instruct-FP8" in out["sglang"]
    else:
        assert "meta-llama/Llama-3.1-70B-Instruct" in out["sglang"]


def test_a_bf16_checkpoint_planned_as_fp8_is_quantized_at_load_where_the_engine_can():
    """SGLang and vLLM quantize BF16 weights to FP8 at load; TRT-LLM needs an FP8 checkpoint."""
    m = get_model("llama-3.1-8b")
    m = m.model_copy(update={"checkpoints": Checkpoints(bf16="meta-llama/Llama-3.1-8B-Instruct", source="test")})
    prec = PrecisionMix(attention="bf16", kv_cache="bf16", dense="fp8", moe="fp8")
    pool = make_pool("sglang", "aggregated", 1, Parallelism(gpus=1), m, get_hardware("h100-sxm"), prec, None)
    r = SimpleNamespace(deployment=Deployment("sglang", (pool,)), point=SimpleNamespace(batch=64))
    q = Question(model="llama-3.1-8b", hardware="h100-sxm", max_gpus=1)
    out = launch_commands(q, r)  # type: ignore[arg-type]
    assert_parses(out)
    assert "--quantization fp8" in out["sglang"]
    assert "--quantization fp8" in out["vllm"]
    assert "${CHECKPOINT:?TRT-LLM does not quantize" in out["trtllm"]
    assert "meta-llama/Llama-3.1-8B-Instruct" not in out["trtllm"].split("EOF")[-1]


def test_a_config_json_model_asks_for_checkpoint(tmp_path):
    """A model given as a HF config.json has no catalog checkpoint: the command names the field."""
    cfg = {  # Qwen3-30B-A3B's shape (catalog qwen3-30b-a3b.yaml)
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
        "intermediate_size": 6144,
        "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    q = Question(model=str(path), hardware="h100-sxm", max_gpus=8, verify_top=0)
    a = plan(q, workers=1)
    out = launch_commands(q, a.recommendations[0])
    assert "--checkpoint" in out["sglang"]
    assert str(path) not in out["sglang"]  # the config file is never passed as the model
    assert_parses(out)


def test_cli_plan_takes_a_checkpoint():
    res = CliRunner().invoke(
        app,
        [
            "plan",
            "--json",
            "--max-gpus",
            "8",
            "--model",
            "qwen3-30b-a3b",
            "--hardware",
            "h100-sxm",
            "--checkpoint",
            "me/ckpt",
        ],
    )
    assert res.exit_code == 0, res.output
    launch = json.loads(res.output)["recommendations"][0]["launch"]
    assert "me/ckpt" in launch["sglang"]


def test_a_first_row_without_a_checkpoint_names_the_first_row_that_loads_one():
    """New-user trial: gpt-oss-120b on 2 H100 ranked first a BF16-attention / FP8-dense / MXFP4-expert mix no
    catalog checkpoint holds, its launch stopping at ${CHECKPOINT:?}, while #2 (a catalog checkpoint) served
    the same tok/s/GPU; nothing said so outside the `needs` column."""
    args = ["plan", "--model", "gpt-oss-120b", "--hardware", "h100-sxm", "--gpus", "2", "--engine", "vllm"]
    args += ["--isl", "4000", "--osl", "300", "--rate", "3", "--ttft-p90", "1000", "--tpot-p90", "40", "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    recs = data["recommendations"]
    assert any("(none in the catalog)" in n for n in recs[0]["needs"])
    ready = next(r for r in recs if not r["needs"])
    said = [n for n in data["notes"] if n.startswith("#1 needs weights no catalog checkpoint holds")]
    assert len(said) == 1
    assert f"#{ready['rank']} is the first that loads one" in said[0]


def test_a_config_json_checkpoint_holds_only_the_configs_own_formats(tmp_path):
    """`--checkpoint` of a config.json model is its own release: a row in other formats needs weights it does not
    hold (trial, twenty-first session: Qwen3-30B-A3B-shaped BF16 config, an NVFP4-expert row read 'needs' nothing),
    while a BF16 release serves FP8 rows by quantizing at load."""
    from planner.launch import requirements
    from planner.launch.common import weights

    cfg = {
        "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "num_experts": 128,
        "num_experts_per_tok": 8, "moe_intermediate_size": 768, "intermediate_size": 6144, "torch_dtype": "bfloat16",
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    q = Question(model=str(path), hardware="b200", max_gpus=2, verify_top=0, checkpoint="me/qwen-moe")
    a = plan(q, workers=1)
    seen = set()
    for r in a.recommendations:
        pool = r.deployment.pools[0]
        prec = pool.instance.precision
        w = weights(q, pool)
        needs = requirements(q, r.deployment)
        if (prec.dense, prec.moe) == ("bf16", "bf16"):
            assert w.path == "me/qwen-moe"
            assert not needs
        elif (prec.dense, prec.moe) == ("fp8", "fp8"):
            assert w.path == "me/qwen-moe"
            assert w.online_fp8
            assert not needs
        else:
            assert w.missing, prec
            assert needs, prec
        seen.add((prec.dense, prec.moe))
    assert any(p not in {("bf16", "bf16"), ("fp8", "fp8")} for p in seen), seen
