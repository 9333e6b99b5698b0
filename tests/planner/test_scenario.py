"""Bad input gets a clear error naming the field and what is allowed."""

from __future__ import annotations

import pytest

from planner.inputs.scenario import ScenarioError, load_scenario, parse_scenario
from planner.model.defaults import resolve
from roofline.errors import CatalogError, PlannerError

BASE = {
    "model": "deepseek-v3",
    "hardware": "h200-sxm",
    "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
    "workload": {"isl": 1000, "osl": 100, "concurrency": 4},
}


def _with(**kw):
    return {**BASE, **kw}


def test_a_valid_scenario_resolves():
    res = resolve(parse_scenario(BASE))
    assert res.deployment.first("aggregated").instance.parallel.gpus == 8


def test_negative_lengths_name_the_field():
    with pytest.raises(ScenarioError, match=r"workload.isl must be positive"):
        parse_scenario(_with(workload={"isl": -5, "osl": 10}))


def test_unknown_fields_are_rejected_not_dropped():
    with pytest.raises(ScenarioError, match=r"workload.concurency"):
        parse_scenario(_with(workload={"isl": 10, "osl": 10, "concurency": 3}))


def test_unknown_model_lists_known_ones():
    with pytest.raises(CatalogError, match=r"unknown model 'gpt-5'"):
        resolve(parse_scenario(_with(model="gpt-5")))


def test_ep_larger_than_the_instance_is_an_error():
    bad = _with(deployment={"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 16}})
    with pytest.raises(ScenarioError, match=r"deployment.aggregated.*ep = 16 must divide"):
        resolve(parse_scenario(bad))


def test_parallelism_must_multiply_to_the_gpus():
    bad = _with(deployment={"aggregated": {"gpus_per_instance": 8, "tp": 4, "dp_attention": 1, "pp": 1}})
    with pytest.raises(ScenarioError, match=r"must equal gpus_per_instance = 8"):
        resolve(parse_scenario(bad))


@pytest.mark.parametrize(
    ("pool", "fixed"),
    [
        ({"gpus_per_instance": 8, "dp_attention": 8}, {"tp": 1, "dp_attention": 8, "pp": 1}),  # the one left out
        ({"gpus_per_instance": 8, "tp": 4, "pp": 1}, {"tp": 4, "dp_attention": 2, "pp": 1}),
        ({"gpus_per_instance": 1}, {"tp": 1, "dp_attention": 1, "pp": 1}),
    ],
)
def test_a_layout_field_left_out_is_what_the_others_leave(pool, fixed):
    """Trial (fifteenth session): `{gpus_per_instance: 8}` said 'tp x dp_attention x pp = 1x1x1 must
    equal gpus_per_instance = 8', though a field left out is unknown (validation/README)."""
    spec = parse_scenario(_with(deployment={"aggregated": pool})).deployment.groups("aggregated")[0]
    assert {k: getattr(spec, k) for k in fixed} == fixed


def test_a_layout_left_open_is_searched():
    from planner.search.unknowns import resolve_any

    res = resolve_any(parse_scenario(_with(deployment={"aggregated": {"gpus_per_instance": 8, "tp": 4}})))
    par = res.deployment.pools[0].parallel
    assert par.tp == 4
    assert par.dp_attention * par.pp == 2
    assert any(a.startswith("deployment: searched") for a in res.assumed)


def test_precision_values_are_checked():
    with pytest.raises(ScenarioError, match=r"precision.moe"):
        parse_scenario(_with(precision={"moe": "int3"}))


def test_aggregated_and_disaggregated_pools_are_exclusive():
    bad = _with(deployment={"aggregated": {"gpus_per_instance": 8}, "decode": {"gpus_per_instance": 8}})
    with pytest.raises(ScenarioError, match=r"not both"):
        parse_scenario(bad)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ScenarioError, match=r"file not found"):
        load_scenario(tmp_path / "none.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("model: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"not valid YAML"):
        load_scenario(p)


def test_every_user_error_is_a_planner_error():
    assert issubclass(ScenarioError, PlannerError)
    assert issubclass(CatalogError, PlannerError)


def test_a_whole_section_may_be_unknown():
    """New-user trial: `precision: unknown` was refused ('Input should be a valid dictionary') though
    the README says any field may be unknown; a section given as `unknown` is every field of it unknown."""
    whole = parse_scenario(_with(precision="unknown", runtime="unknown"))
    fields = parse_scenario(_with(precision={}, runtime={}))
    assert whole == fields
    assert resolve(whole).deployment.first("aggregated").instance.precision.moe == "fp8"  # the checkpoint's
    assert parse_scenario(_with(workload="unknown")).workload.isl == "unknown"
    with pytest.raises(ScenarioError, match="precision"):
        parse_scenario(_with(precision="fast"))


def test_unknowns_are_filled_and_reported():
    res = resolve(parse_scenario(_with(engine="trtllm", mtp="unknown", workload={"concurrency": 1})))
    assert res.isl == 1024
    assert res.osl == 1024
    assert any(a.startswith("mtp: off (TRT-LLM runs MTP only when") for a in res.assumed)
    assert res.deployment.first("aggregated").instance.mtp is None


def test_an_unknown_field_lists_the_fields_allowed_there():
    """New-user trial: `tensor_parallel:` or a question's `slo.ttft_ms` read 'unknown field' without
    saying what the field is called."""
    from planner.inputs.question import parse_question

    bad = {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "deployment": {"aggregated": {"gpus_per_instance": 1, "tensor_parallel": 1}},
        "workload": {"isl": 1000, "osl": 250},
    }
    with pytest.raises(
        ScenarioError, match=r"tensor_parallel: unknown field; allowed: instances, gpus_per_instance, tp"
    ):
        parse_scenario(bad)
    with pytest.raises(ScenarioError, match=r"slo\.ttft_ms: unknown field; allowed: ttft_p90_ms, tpot_p90_ms"):
        parse_question({"model": "deepseek-v3", "hardware": "b200", "slo": {"ttft_ms": 100}})
