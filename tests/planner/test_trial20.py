"""Twentieth session's new-user trial: explain's levers follow the model's parts (no 'nvfp4 experts' for a dense
model; FP8 dense weights offered where the checkpoint runs BF16), and `planner simulate --json` carries the SLO
verdict its table prints."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.model.deployment import pairs_in_nodes
from roofline.catalog import get_hardware

runner = CliRunner()


def _explain(tmp_path, model: str, hardware: str, precision: dict[str, str]) -> list[str]:
    path = tmp_path / "s.yaml"
    scenario = {
        "model": model, "hardware": hardware, "engine": "vllm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1}},
        "precision": precision, "workload": {"isl": 1000, "osl": 200, "concurrency": 32},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(scenario))
    out = runner.invoke(app, ["explain", str(path), "--json"])
    assert out.exit_code == 0, out.output
    return [lv["change"] for lv in json.loads(out.output)["levers"]]


def test_a_dense_model_on_blackwell_is_offered_its_own_weights_in_fp8_and_fp4_not_experts(tmp_path) -> None:
    names = _explain(tmp_path, "llama-3.1-8b", "b200", {"attention": "bf16", "kv_cache": "bf16", "dense": "bf16"})
    assert "nvfp4 experts" not in names  # the trial read '+0%' for experts Llama does not have
    assert {"fp8 dense weights", "nvfp4 dense weights"} <= set(names)
    names = _explain(tmp_path, "llama-3.1-8b", "h100-sxm", {"attention": "bf16", "kv_cache": "bf16", "dense": "fp8"})
    assert not any("dense weights" in n or "experts" in n for n in names)  # already FP8; no FP4 on Hopper


def test_a_moe_model_keeps_the_experts_lever_and_gets_fp8_dense_from_bf16(tmp_path) -> None:
    prec = {"attention": "bf16", "kv_cache": "bf16", "dense": "bf16", "moe": "bf16"}
    names = _explain(tmp_path, "qwen3-30b-a3b", "b200", prec)
    assert {"nvfp4 experts", "fp8 dense weights"} <= set(names)
    assert "nvfp4 dense weights" not in names  # a MoE model's FP4 lever is its experts'


def test_a_system_with_no_network_keeps_instances_and_kv_hand_offs_inside_a_node(tmp_path) -> None:
    """RTX PRO 6000 servers have no NIC in the catalog: the trial's 16-GPU plan recommended 1x prefill DP8 +
    1x decode DP8 (the KV crossing nodes) and compare searched DP16 across two nodes, priced over PCIe."""

    def estimate(pools: dict[str, dict[str, int]]) -> str:
        path = tmp_path / "s.yaml"
        scenario = {
            "model": "qwen3-30b-a3b", "hardware": "rtx-pro-6000", "engine": "trtllm",
            "deployment": {role: {"instances": 1, "tp": 1, "pp": 1, **p} for role, p in pools.items()},
            "workload": {"isl": 1000, "osl": 200, "concurrency": 32},
        }  # fmt: skip
        path.write_text(yaml.safe_dump(scenario))
        out = runner.invoke(app, ["estimate", str(path)])
        assert out.exit_code == 2, out.output
        assert "Traceback" not in out.output
        return out.output

    dep8 = {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8}
    assert "has no network between its nodes" in estimate({"prefill": dep8, "decode": dep8})
    said = estimate({"aggregated": {"gpus_per_instance": 16, "dp_attention": 16, "ep": 16}})
    assert "an instance of 16 GPUs spans nodes of rtx-pro-6000" in said
    args = ["plan", "--model", "qwen3-30b-a3b", "--hardware", "rtx-pro-6000", "--gpus", "16", "--isl", "1000"]
    data = json.loads(runner.invoke(app, [*args, "--osl", "200", "--json"]).stdout)
    assert data["candidates"]["pruned"].get("spans nodes with no network between them", 0) > 0
    hw = get_hardware("rtx-pro-6000")
    for r in data["recommendations"]:
        pools = r["scenario"]["deployment"]
        assert all(p["gpus_per_instance"] <= 8 for p in pools.values())
        if r["mode"] == "disaggregated":  # every node with a prefill instance holds a decode one, and the reverse
            pre, dec = pools["prefill"], pools["decode"]
            args = (pre["instances"], pre["gpus_per_instance"], dec["instances"], dec["gpus_per_instance"])
            assert pairs_in_nodes(hw, *args), r["deployment"]
    # review: 5 prefill instances of 1 GPU beside one decode instance of 4 leave a prefill GPU alone in a second
    # node (the pair rule alone let it through); 4 + 12 single-GPU instances pack as 2 + 6 in each of two nodes
    assert not pairs_in_nodes(hw, 5, 1, 1, 4)
    assert pairs_in_nodes(hw, 4, 1, 12, 1)
    assert pairs_in_nodes(hw, 3, 1, 2, 4)
    assert not pairs_in_nodes(hw, 1, 8, 1, 8)
    assert pairs_in_nodes(get_hardware("h200-sxm"), 1, 8, 1, 8)  # a networked system: the NIC carries the KV
    said = estimate({"prefill": {"instances": 5, "gpus_per_instance": 1}, "decode": {"gpus_per_instance": 4,
                     "dp_attention": 4, "ep": 4}})  # fmt: skip
    assert "cannot share rtx-pro-6000's 8-GPU nodes so that each node holds both" in said


def test_a_fixed_budget_plan_names_the_row_that_serves_the_most_from_it() -> None:
    """DeepSeek-V3 on 12 GB200 GPUs at 256 users: #1 runs on 6 (6 idle) while a 12-GPU row serves more from the
    budget; the notes said #1's per-GPU-given figure only (trial)."""
    args = ["plan", "--model", "deepseek-v3", "--hardware", "gb200-nvl72", "--gpus", "12", "--concurrency", "256"]
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    recs, notes = data["recommendations"], data["notes"]
    first = recs[0]
    assert first["gpus"] < 12
    best = max(recs, key=lambda d: d["output_tok_s_per_gpu"] * d["gpus"] if d["slo_verdict"] == "meets" else 0)
    said = next(n for n in notes if "serves the most from the 12 GPUs given" in n)
    assert said.startswith(f"#{best['rank']} serves the most")
    assert f"{best['output_tok_s_per_gpu'] * best['gpus'] / 12:,.1f} tok/s per GPU given" in said


def test_planner_estimate_says_when_its_batch_sits_at_the_edge_of_its_kv_slots(tmp_path) -> None:
    """The trial's plan row read 504 ms TTFT by `planner estimate` and 1,526 ms simulated: batch 7,544 of 7,720
    slots. The plan's note on such rows (near_slots) now comes with `planner estimate` too."""
    from planner.inputs.scenario import Scenario
    from planner.model.estimator import estimate, max_batch
    from planner.model.queueing import near_slots
    from planner.report.verdicts import slot_caveat
    from planner.search.unknowns import resolve_any

    assert near_slots(7544, 7720)
    assert not near_slots(7000, 7720)  # 720 > 3 x sqrt(7000) = 251
    scenario = {
        "model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1}},
        "workload": {"isl": 1000, "osl": 1000, "request_rate": 1.0},
    }  # fmt: skip
    res = resolve_any(Scenario.model_validate(scenario), None)
    res = res[0] if isinstance(res, tuple) else res
    e = estimate(res)
    assert slot_caveat(res, e) is None  # one request a second: far from the slots
    slots = max_batch(res.deployment, res.isl, res.osl)
    e.decode_batch = slots - 10
    said = slot_caveat(res, e)
    assert said is not None
    assert said.startswith(f"decode batch {slots - 10:,} of {slots:,} KV slots per instance")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert json.loads(runner.invoke(app, ["estimate", str(path), "--json"]).stdout)["caveat"] is None


def test_the_first_row_whose_weights_exist_is_shown_with_its_launch_even_past_the_rows_shown() -> None:
    """gpt-oss-120b on 72 GB200: #11 was the first row a published checkpoint loads, but the table showed 8 rows and
    printed #1's launch, which asks for a checkpoint nobody publishes (trial). Here #3 on one B200 (#8 before the
    twenty-second session's estimate changes reordered the rows), shown 2 rows."""
    from rich.console import Console

    from planner.inputs.question import build_question
    from planner.report.plan_report import print_answer
    from planner.search.plan import plan

    fields = {"model": "gpt-oss-120b", "hardware": "b200", "gpus": 1, "rate": 5, "engine": "vllm"}
    a = plan(build_question(fields, {"ttft_p99_ms": 500}))
    con = Console(width=320, record=True)
    print_answer(con, a, top=2)
    text = con.export_text()
    first = next(line for line in text.splitlines() if "rows shown (the first 2, and #" in line)
    assert "the first whose weights exist" in first
    rank = int(first.split("and #")[1].split(",")[0])
    assert rank > 2
    assert f"#{rank} is the first that loads one" in text  # the note and the table agree
    assert f"launch commands for #{rank}, the first row a published checkpoint loads" in text
    assert f"vllm launch for #{rank}:" in text
