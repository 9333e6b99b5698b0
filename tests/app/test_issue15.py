"""The dashboard leads a capacity owner to the right decision: one test per problem of the
dashboard review (numbers from one record, what-if colours and capacity, GPU budget, ranking,
empty answers, time series, side by side, downloads, memory chart, polish). Widgets are found
by their labels, as a user finds them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from roofline.catalog import hardware_ids

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=240)


def _set(at: AppTest, **values: Any) -> AppTest:
    """Set widgets by label (number inputs, selectboxes, radios), then rerun."""
    for label, value in values.items():
        w = next((x for kind in ("number_input", "selectbox", "radio") for x in at.get(kind) if x.label == label), None)
        assert w is not None, f"no widget labelled {label!r}"
        if hasattr(w, "select"):
            w.select(value)
        else:
            w.set_value(value)
        at.run()
    return at


def _open(**params: Any) -> AppTest:
    """The page opened from a shared link with these settings: one plan, not one per widget
    change (the link path itself is tested in test_settings_travel_in_the_url)."""
    at = _app()
    for key, value in params.items():
        at.query_params[key] = str(value)
    return at.run()


def _num(text: str) -> float:
    return float(text.replace(",", "").split()[0])


def _table(at: AppTest) -> Any:
    return at.dataframe[0].value


def _cell(row: Any, prefix: str) -> Any:
    """A table cell by the start of its column name (`TTFT` matches `TTFT ms`)."""
    return row[next(c for c in row.index if c.startswith(prefix))]


def _metric(at: AppTest, prefix: str) -> Any:
    return next(m for m in at.metric if m.label.startswith(prefix))


def _chart(at: AppTest, has_trace: str) -> dict[str, Any]:
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if any(has_trace in (t.get("name") or "") for t in spec["data"]):
            return spec
    raise AssertionError(f"no chart with a series named like {has_trace!r}")


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "error", "warning", "info", "title") for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


@pytest.fixture(scope="module")
def default() -> AppTest:
    at = _app().run()
    assert not at.exception
    return at


def test_1_cards_show_the_tables_figures_for_the_chosen_deployment(default):
    """One deployment, one set of numbers: the cards are the table row's figures."""
    row = _table(default).iloc[0]
    assert _num(_metric(default, "TTFT").value) == pytest.approx(_cell(row, "TTFT"), abs=0.06)
    assert _num(_metric(default, "TPOT").value) == pytest.approx(_cell(row, "TPOT"), abs=0.06)
    assert _num(_metric(default, "tok/s/GPU").value) == pytest.approx(row["tok/s/GPU"], abs=0.06)


def test_1_one_request_in_flight_is_not_planned_as_a_full_rack():
    """With concurrency 1 the table's batch and the cards agree and size for one request."""
    at = _open(traffic="concurrency", concurrency=1)
    row = _table(at).iloc[0]
    assert _cell(row, "batch") <= 1
    assert _num(_metric(at, "tok/s/GPU").value) == pytest.approx(row["tok/s/GPU"], abs=0.06)
    assert _num(next(m for m in at.metric if m.label == "GPUs").value) == row["GPUs"]


def test_2_a_what_if_that_breaks_the_slo_is_red_and_says_so(default):
    """A BF16 KV cache on the default question (twice the KV read per decode step) pushes a
    latency past its target: a red up-arrow, a failing SLO badge, and the capacity lost at the
    SLO. (FP8 experts were the example until the scheduler, serving-path and memory changes of 2026-12-01:
    they now stay within the targets.)"""
    at = _set(_app().run(), **{"KV cache": "bf16"})
    assert not at.exception
    failing = [n for n in ("TTFT", "TPOT") if f"FAIL: {n}" in _texts(at)]
    assert failing
    worse = next(m for m in at.metric if m.label.startswith(failing[0]) and m.delta)
    assert worse.proto.direction == worse.proto.MetricDirection.UP
    assert worse.proto.color == worse.proto.MetricColor.RED
    cap = next(m for m in at.metric if "at the SLO" in m.label and m.delta)
    assert cap.delta.startswith("-")
    assert cap.proto.color == cap.proto.MetricColor.RED
    assert "Why:" in _texts(at)


def test_2_a_what_if_to_a_format_without_a_checkpoint_still_exports():
    """W4A16 experts on DeepSeek-V3 (no such checkpoint in the catalog): the page renders and the
    launch export asks for the checkpoint instead of failing."""
    at = _set(_app().run(), experts="w4a16")
    assert not at.exception


def test_3_a_what_if_beyond_the_gpu_budget_is_flagged():
    """Decode EP 72 on a deployment whose other pools already use GPUs exceeds the 72-GPU budget."""
    at = _app().run()
    box = next(s for s in at.selectbox if s.label == "deployment")
    box.select_index(next(i for i, o in enumerate(box.options) if "decode" in str(o)))  # a disaggregated one
    at.run()
    at = _set(at, **{"decode EP": 72})
    assert not at.exception
    assert "budget" in " ".join(e.value for e in at.error)


def test_4_chart_and_table_agree_and_the_ranking_is_explained():
    """gpt-oss-120b on <= 16 GB200 GPUs, 8000/300 tokens: the chart marks each recommendation at
    the figures the table shows, and the page says how rows are ranked."""
    at = _open(model="gpt-oss-120b", max_gpus=16, isl=8000, osl=300)
    assert not at.exception
    spec = _chart(at, "recommendations")
    recs = next(t for t in spec["data"] if t["name"].startswith("recommendations"))
    assert recs["y"] == pytest.approx(list(_table(at)["tok/s/GPU"]))
    assert "Ranked:" in _texts(at)
    assert any(t["name"].startswith("chosen") for t in spec["data"])


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"hardware": "h200-sxm", "max_gpus": 1}, "weights do not fit"),
        ({"traffic": "request rate", "rate": 100_000.0}, "none has an operating point"),
        ({"ttft": 10.0}, "Pareto front empty"),
        ({"isl": 1_000_000}, "context window"),
    ],
)
def test_5_an_empty_answer_says_why(values, reason):
    at = _open(**values)
    assert not at.exception
    assert reason in _texts(at)


def test_6_the_time_series_simulates_the_plans_traffic_with_units_and_slo(default):
    """The batch reaches the planned operating point, and the chart has a legend, SLO lines and units."""
    at = _app().run()
    next(t for t in at.toggle if t.label.startswith("simulate this deployment")).set_value(True)
    at.run()
    assert not at.exception
    spec = _chart(at, "batch")
    batch = next(t for t in spec["data"] if t["name"].startswith("batch"))
    planned = _cell(_table(default).iloc[0], "batch")
    assert max(batch["y"]) >= 0.5 * planned
    assert spec["layout"].get("showlegend") is True
    assert any("TTFT SLO" in t["name"] for t in spec["data"])
    assert any("TPOT SLO" in t["name"] for t in spec["data"])
    titles = [
        spec["layout"][k].get("title", {}).get("text") for k in spec["layout"] if k.startswith(("xaxis", "yaxis"))
    ]
    assert len(titles) == 12
    assert sum(bool(t) for t in titles) >= 9  # every y axis; the x axes of the bottom row


def test_7_side_by_side_keeps_both_sides_when_they_are_the_same_deployment():
    """#2 against #2 with a what-if: the what-if's figures and the plan's both show."""
    at = _app().run()
    next(s for s in at.selectbox if s.label == "deployment").select_index(1)
    at.run()
    at = _set(at, **{"KV cache": "bf16"})  # a what-if that fits any plan's pools
    what_if = _metric(at, "TTFT ms (what-if").value
    planned = next(m for m in at.metric if m.label.startswith("TTFT") and not m.delta).value
    sides = " ".join(df.value.to_string() for df in at.dataframe[1:])
    assert what_if in sides
    assert planned in sides


def test_8_downloads_carry_the_what_if_and_name_the_question():
    at = _set(_app().run(), experts="fp8")
    labels = [b.proto.label for b in at.get("download_button")]
    assert all("deepseek-v3" in lab for lab in labels), labels
    assert any("what-if" in lab for lab in labels)
    assert "moe: fp8" in " ".join(c.value for c in at.code)


def test_9_memory_chart_shows_offload_and_capacity_in_plain_words(default):
    spec = _chart(default, "offloaded")
    names = [t["name"] for t in spec["data"]]
    assert not any(n in ("kv_pool", "activations_and_graphs", "unused_reserve") for n in names)
    assert spec["layout"].get("shapes")  # the GPU's capacity line
    # a deployment whose prefill streams experts from host (seed 000's GB200 DP2 EP2 prefill)
    from planner.dashboard.charts import breakdown_figure, memory_figure
    from planner.dashboard.whatif import breakdown

    scn = {
        "model": "deepseek-v3",
        "hardware": "gb200-nvl72",
        "deployment": {
            "prefill": {"instances": 4, "gpus_per_instance": 2, "dp_attention": 2, "ep": 2},
            "decode": {"gpus_per_instance": 16, "dp_attention": 16, "ep": 16},
        },
        "precision": {"attention": "fp8", "kv_cache": "fp8", "moe": "nvfp4"},
        "workload": {"isl": 2000, "osl": 1000, "request_rate": 5.0},
    }
    b = breakdown(scn)
    mem = json.loads(memory_figure(b).to_json())
    assert max(next(t for t in mem["data"] if "offloaded" in t["name"])["y"]) > 0
    steps = json.loads(breakdown_figure([("plan", b)]).to_json())
    assert max(next(t for t in steps["data"] if t["name"] == "weight offload")["y"]) > 0


def test_10_the_page_has_a_title_and_no_stray_output(default):
    assert not any(m.value.strip() == "None" for m in default.markdown)
    assert default.title
    assert "MoE capacity planner" in default.title[0].value
    assert "DeepSeek-V3" in _texts(default)
    assert not any(t.label.startswith("tensor-core") for t in default.toggle)  # GB200 runs no fallbacks
    columns = default.dataframe[0].proto.columns  # tooltips on the columns an owner asks about
    assert "target / achieved" in columns
    assert "price per GPU-hour" in columns


def test_10_the_validation_page_has_no_question_panel_and_shows_percent():
    at = _app().run()
    next(r for r in at.radio if r.label == "page").set_value("Validation").run()
    assert not at.exception
    assert not any(s.label == "model" for s in at.selectbox)
    if at.dataframe:
        assert "error %" in at.dataframe[0].value.columns


def test_settings_travel_in_the_url():
    """A shared link opens the same question and what-if."""
    at = _app()
    at.query_params["moe"] = "fp8"
    at.query_params["tpot"] = "60"
    at.run()
    assert next(s for s in at.selectbox if s.label == "experts").value == "fp8"
    assert next(n for n in at.number_input if n.label == "TPOT ms").value == 60.0
    assert at.query_params["moe"] in ("fp8", ["fp8"])


def test_the_which_gpu_page_compares_every_system_from_the_compare_search():
    """The page renders `planner compare`: one frontier per system that holds the model, the
    best throughput per GPU per system, labelled as estimates. Llama-3.1-8B: every system holds it, and
    its search over all of them takes ~6 s (DeepSeek-V3's ~24 s; `bench/compare_speed.py` times that)."""
    at = _app()
    at.query_params["page"] = "Which GPU?"
    at.query_params["model"] = "llama-3.1-8b"
    at.run()
    assert not at.exception
    rows = at.dataframe[0].value
    systems = next(m for m in at.multiselect if m.label == "systems").value
    assert sorted(rows["hardware"]) == sorted(systems)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert (
        len([t for t in spec["data"] if t.get("mode") == "lines+markers"])
        == rows["best tok/s/GPU (estimate)"].notna().sum()
    )
    assert "estimates" in _texts(at)
    assert "llama-3.1-8b" in _texts(at)
    assert len(rows["hardware"]) == len(hardware_ids())  # every system holds an 8B model


def test_a_stale_or_bad_link_opens_the_default_page():
    at = _app()
    for k, v in {"model": "no-such-model", "isl": "0", "mtp": "7", "rec": "99"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert next(s for s in at.selectbox if s.label == "model").value == "deepseek-v3"
    assert next(n for n in at.number_input if n.label == "input tokens").value == 2000


def test_the_default_page_simulates_as_many_rows_as_the_cli(default):
    """New-user trial (sixteenth session): the dashboard asked `verify_top: 2` where `planner plan` asks the
    question's default (3), so the default's row 3 read 424.9 ms / 29.94 ms by estimate on the page and
    527.4 / 36.98 simulated in the terminal."""
    from planner.inputs.question import DEFAULT_QUESTION

    figures = list(_table(default)["figures"])
    assert [str(f).startswith("simulated") for f in figures[: DEFAULT_QUESTION.verify_top]] == [True] * 3
