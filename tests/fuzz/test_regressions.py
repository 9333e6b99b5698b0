"""One regression test per crash signature of issue 13 whose cause is in the input edge, the
simulator, the trace reader, the HF importer or `planner validate`. Each input once raised an
uncaught exception (or hung, or gave nonsense); now it is a one-line error naming the field, or
a sane result."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.inputs.scenario import ScenarioError, load_scenario, load_yaml, parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.search.validate import validate_file
from roofline.catalog.hf_import import model_from_hf_file
from roofline.errors import CatalogError
from simulator.router import Router

runner = CliRunner()
BASE = {
    "model": "deepseek-v3",
    "hardware": "h200-sxm",
    "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
    "workload": {"isl": 1000, "osl": 100, "concurrency": 8},
}
HF = Path("/work/shared/reference/hf_configs/deepseek-ai--DeepSeek-V3_config.json")


def _with(**kw):
    return {**BASE, **kw}


@pytest.mark.parametrize("depth", [40, 5000, 50_000])
def test_deeply_nested_yaml_is_an_error_not_a_recursion_error(tmp_path, depth):
    """141x RecursionError in planner/inputs/scenario.py load_yaml."""
    p = tmp_path / "deep.yaml"
    p.write_text("name: " + "[" * depth + "1" + "]" * depth + "\n")
    with pytest.raises(ScenarioError, match="nested deeper than 32 levels"):
        load_yaml(p)


def test_a_non_utf8_scenario_is_an_error_naming_the_byte(tmp_path):
    """77x UnicodeDecodeError in planner/inputs/scenario.py load_yaml."""
    p = tmp_path / "s.yaml"
    p.write_bytes(b"model: deepseek-v3\nname: caf\xe9\n")
    with pytest.raises(ScenarioError, match=r"not UTF-8 text \(byte 28 is 0xe9\)"):
        load_scenario(p)


def test_a_folder_or_an_alias_bomb_is_an_error(tmp_path):
    with pytest.raises(ScenarioError, match="is a folder"):
        load_yaml(tmp_path)
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 10)}]" for i in range(1, 9)]
    (tmp_path / "b.yaml").write_text("\n".join(bomb) + "\n")
    with pytest.raises(ScenarioError, match="more than 200,000 values"):
        load_yaml(tmp_path / "b.yaml")


def test_a_router_without_a_front_pool_does_not_assert():
    """84x AssertionError in simulator/router.py Router.__init__ (a decode pool only)."""
    r = Router("least_loaded", {"prefill": [], "aggregated": [], "decode": []})
    assert r.front == []


@pytest.mark.parametrize(
    ("phase", "deployment"),
    [
        ("end-to-end", {"decode": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8}}),
        ("prefill", {"decode": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8}}),
        ("decode", {"prefill": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8}}),
    ],
)
def test_a_phase_without_its_pools_is_refused_at_the_edge(phase, deployment):
    """35x KeyError in estimate_disaggregated and 12+8x KeyError in estimate_prefill/decode:
    the estimator looked up a pool the deployment does not have."""
    with pytest.raises(ScenarioError, match=f"phase: {phase} needs"):
        parse_scenario(_with(phase=phase, deployment=deployment))


def test_a_nan_mtp_acceptance_is_refused_by_the_schema():
    """23x pydantic ValidationError in planner/model/defaults.py _mtp: NaN passed `accepted <= draft`."""
    with pytest.raises(ScenarioError, match=r"mtp.accepted_tokens: must be a finite number"):
        parse_scenario(_with(mtp={"draft_tokens": 2, "accepted_tokens": float("nan")}))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("runtime", {"max_prefill_tokens": 0}, "runtime.max_prefill_tokens: must be greater than or equal to 16"),
        ("runtime", {"ep_imbalance": 1e300}, "runtime.ep_imbalance: 1e.300 is beyond any physical value"),
        ("workload", {"isl": 1000, "osl": 100, "request_rate": 1e-300}, "request_rate must be at least 0.01"),
        ("workload", {"isl": 10**30, "osl": 100, "concurrency": 8}, "workload.isl: 1e.30 is beyond"),
        ("workload", {"isl": 1000, "osl": 100, "concurrency": 10**17, "concurrency_scope": "per_gpu"}, "concurrency"),
        ("workload", {"isl": 1000, "osl": 100, "request_rate": float("inf")}, "request_rate: must be a finite"),
    ],
)
def test_zero_division_and_overflow_inputs_are_refused_with_the_field(field, value, match):
    """12+7x ZeroDivisionError in estimate_aggregated/disaggregated, 6x OverflowError in
    planner/model/defaults.py resolve, and infinite throughput from `request_rate: .inf`."""
    with pytest.raises(ScenarioError, match=match):
        parse_scenario(_with(**{field: value}))


def test_a_tiny_prefill_budget_is_refused_before_it_takes_minutes():
    """`max_prefill_tokens: 1` took 23 s in estimate; a budget splitting the prompt into more than
    128 chunks is refused, and the largest one allowed still estimates in seconds."""
    with pytest.raises(ScenarioError, match=r"runtime.max_prefill_tokens: 16 splits isl 4096 into more than 128"):
        parse_scenario(_with(runtime={"max_prefill_tokens": 16}, workload={"isl": 4096, "osl": 10, "concurrency": 4}))
    est = estimate(
        resolve(
            parse_scenario(
                _with(runtime={"max_prefill_tokens": 32}, workload={"isl": 4096, "osl": 10, "concurrency": 4})
            )
        )
    )
    assert est.output_tok_s > 0


def test_a_non_utf8_hf_config_is_a_catalog_error(tmp_path):
    """22x UnicodeDecodeError in roofline/catalog/hf_import.py model_from_hf_file."""
    p = tmp_path / "bad_config.json"
    p.write_bytes(HF.read_bytes().replace(b'"deepseek_v3"', b'"deepseek\xff"'))
    with pytest.raises(CatalogError, match="not readable UTF-8 JSON"):
        model_from_hf_file(p)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("quantization_config", "fp8", "`quantization_config` must be a mapping"),
        ("hidden_size", "7168", "`hidden_size` must be an integer"),
        ("num_hidden_layers", [61], "`num_hidden_layers` must be an integer"),
        ("kv_lora_rank", 1e300, "`kv_lora_rank` must be a whole number"),
        ("n_routed_experts", 2.5, "`n_routed_experts` must be a whole number"),
    ],
)
def test_hf_config_fields_of_the_wrong_type_name_the_key(tmp_path, key, value, match):
    """21+15x AttributeError in roofline/catalog/hf_import.py (config fields of the wrong type)."""
    cfg = json.loads(HF.read_text())
    cfg[key] = value
    p = tmp_path / "m_config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(CatalogError, match=match):
        model_from_hf_file(p)


def test_anchor_values_of_odd_types_are_error_rows_and_print(tmp_path):
    """13+2x ValueError/TypeError in planner/report/report.py print_validation, 18 nonsense results
    (`value: .nan` gave a NaN median), and one bad anchor ending the whole run."""
    anchors = [
        {
            "id": "ok-one",
            "model": "deepseek-v3",
            "hardware": "h200-sxm",
            "phase": "decode",
            "deployment": {"decode": {"gpus_per_instance": 8, "dp_attention": 8, "ep": 8}},
            "workload": {"isl": 1000, "osl": 100, "concurrency": 64},
            "metric": "tpot_ms",
            "value": 50,
        },
        {"id": ["x"], "metric": {"a": 1}, "value": "abc", "tolerance": "wide"},
        {
            "id": "nan-value",
            "model": "deepseek-v3",
            "hardware": "h200-sxm",
            "metric": "tpot_ms",
            "value": float("nan"),
            "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
        },
        {
            "id": "bad-mtp",
            "model": "deepseek-v3",
            "hardware": "h200-sxm",
            "metric": "tpot_ms",
            "value": 10,
            "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
            "mtp": {"draft_tokens": 2, "accepted_tokens": 3},
        },
    ]
    p = tmp_path / "a.yaml"
    p.write_text(json.dumps({"version": 1, "anchors": anchors}))
    results, summary = validate_file(p)
    assert [r.error is None for r in results] == [True, False, False, False]
    assert math.isfinite(summary["median_abs_rel_error"])
    assert [r.input_error for r in results] == [False, True, True, True]
    out = runner.invoke(app, ["validate", str(p)])  # every row printed, then exit 2 for the invalid ones
    assert out.exit_code == 2, out.output
    assert "ok-one" in out.stdout
    assert out.stderr.strip().splitlines() == [
        "error: 3 of 4 anchors are invalid input (see their rows): ['x'], nan-value, bad-mtp"
    ]
    out = runner.invoke(app, ["validate", str(p), "--json"])
    assert out.exit_code == 2
    assert json.loads(out.stdout)["summary"]["count"] == 4


def test_markup_in_a_name_is_refused_and_errors_never_wrap(tmp_path):
    """`name: "[/bold]"` crashed rich output; 34% of exit-2 messages spanned several lines."""
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps(_with(name="[/bold]", hardware="h300-" + "x" * 300)))
    out = runner.invoke(app, ["estimate", str(p)])
    assert out.exit_code == 2
    assert out.output.count("\n") == 1
    assert "name: free text without square brackets" in out.output
