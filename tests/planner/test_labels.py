"""Labels name what differs: every view that names an operating point (Pareto fronts in the CLI
table and JSON, `planner compare`, the plotly hovers, the dashboard) uses `Deployment.label`,
with the one precision label (attention/KV/dense/experts) the recommendation table shows."""

from __future__ import annotations

import pytest

from planner.dashboard.charts import pareto_figure
from planner.dashboard.gpu_compare import summary_rows
from planner.inputs.question import SLO, Question
from planner.model.deployment import precision_label
from planner.report.plan_report import answer_dict, table_rows
from planner.search.compare import compare_dict, compare_figure, frontier
from planner.search.plan import plan

GPT_OSS = Question(
    model="gpt-oss-120b",
    hardware="h200-sxm",
    gpus=1,
    isl=1500,
    osl=500,
    rate=8,
    engine="trtllm",
    slo=SLO(ttft_p90_ms=2000, tpot_p90_ms=50),
    verify_top=1,
)


@pytest.fixture(scope="module")
def answer():
    return plan(GPT_OSS, workers=1)


def test_front_points_that_differ_read_differently(answer):
    """Repro: the aggregated front of this question listed "1x agg TP1" three times (three
    precision mixes on one GPU)."""
    front = answer.fronts["aggregated"]
    assert len(front) >= 2
    labels = [lab for _, _, lab in front]
    assert len(set(labels)) == len(labels), labels
    data = answer_dict(answer)
    assert [p["deployment"] for p in data["pareto"]["aggregated"]] == labels  # the JSON says the same


def test_the_precision_label_is_the_plan_tables(answer):
    rows = table_rows(answer)
    for r, row in zip(answer.recommendations, rows, strict=True):
        main = r.deployment.first("aggregated") or r.deployment.first("decode")
        assert row["precision"] == precision_label(main.instance.precision)
        assert row["precision"] in r.deployment.label(r.point.batch)


def test_chart_hovers_name_the_precision_of_each_recommendation(answer):
    fig = pareto_figure(answer)
    recs = next(t for t in fig.data if t.name.startswith("recommendations"))
    hovers = [c[0] for c in recs.customdata]
    assert len(set(hovers)) == len(hovers), hovers  # three rows of "1x agg TP1" differ in precision
    front = next(t for t in fig.data if t.name.startswith("aggregated"))
    assert list(front.text) == [lab for _, _, lab in answer.fronts["aggregated"]]


def test_compare_frontier_labels_are_distinct():
    """Repro: qwen3-235b-a22b 3000/800 on vLLM, B200: "4x agg TP2 EP2" twice (batch 518 and 512)."""
    f = frontier("qwen3-235b-a22b", "b200", 3000, 800, "vllm")
    labels = [lab for _, _, lab in f.points]
    assert len(set(labels)) == len(labels), labels
    data = compare_dict([f])
    assert [p["deployment"] for p in data["hardware"][0]["frontier"]] == labels
    assert list(compare_figure([f]).data[0].text) == labels
    best = summary_rows([f], {}, 0.0)[0]
    assert best["deployment"] in labels  # the dashboard's "which GPU?" page
