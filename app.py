"""Streamlit what-if dashboard: `streamlit run app.py`.

Thin by design: the question panel and what-if controls call `planner.dashboard`, which uses the
same API as the `planner` CLI. Results are cached, so what-if changes re-run in well under a
second; bad input shows as a message on the page.
"""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st

from planner import dashboard as dash
from planner.plan import plan
from planner.question import DEFAULT_QUESTION, build_question
from roofline.catalog import hardware_ids, model_ids
from roofline.errors import PlannerError

ANCHORS = Path(__file__).resolve().parent.parent / "shared" / "validation" / "seed_anchors.yaml"

st.set_page_config(page_title="MoE capacity planner", layout="wide")


@st.cache_resource
def code_fingerprint() -> str:
    return dash.code_fingerprint()


# Persisted across restarts (the first render after the first run is instant); the key includes a
# fingerprint of the planner's code and calibration data, so an upgrade never serves a stale answer.
@st.cache_data(show_spinner="planning...", persist="disk", max_entries=32)
def answer_for(question_json: str, fingerprint: str):  # type: ignore[no-untyped-def]
    return plan(build_question(json.loads(question_json)), workers=1)


@st.cache_data(max_entries=256)
def breakdown_for(scn_json: str) -> dash.Breakdown:
    return dash.breakdown(json.loads(scn_json))


@st.cache_data(show_spinner="simulating...", max_entries=32)
def timeseries_for(scn_json: str, requests: int) -> dict[str, list[float]]:
    return dash.timeseries(json.loads(scn_json), requests)


def question_panel() -> dict:
    d = DEFAULT_QUESTION
    sb = st.sidebar
    sb.header("Question")
    q = {
        "model": sb.selectbox("model", model_ids(), index=model_ids().index(d.model)),
        "hardware": sb.selectbox("hardware", hardware_ids(), index=hardware_ids().index(d.hardware)),
        "max_gpus": int(sb.number_input("GPUs (at most)", 1, 1152, d.max_gpus or 72)),
        "isl": int(sb.number_input("input tokens", 1, 1_000_000, d.isl)),
        "osl": int(sb.number_input("output tokens", 1, 100_000, d.osl)),
        "engine": sb.selectbox("engine", ["sglang", "trtllm", "vllm"]),
        "price_per_gpu_hour": float(sb.number_input("price per GPU-hour (USD)", 0.01, 100.0, d.price_per_gpu_hour)),
        "verify_top": 2,
    }
    traffic = sb.radio("traffic", ["best operating point", "request rate", "concurrency"], horizontal=False)
    if traffic == "request rate":
        q["rate"] = float(sb.number_input("requests/s", 0.01, 1e5, 10.0))
    elif traffic == "concurrency":
        q["concurrency"] = int(sb.number_input("requests in flight", 1, 1_000_000, 256))
    sb.subheader("SLO (p90)")
    q["slo"] = {
        "ttft_p90_ms": float(sb.number_input("TTFT ms", 1.0, 1e6, d.slo.ttft_p90_ms or 2000.0)),
        "tpot_p90_ms": float(sb.number_input("TPOT ms", 0.01, 1e5, d.slo.tpot_p90_ms or 50.0)),
    }
    upload = sb.file_uploader("trace (Azure/Splitwise CSV, Mooncake JSONL)", type=["csv", "jsonl"])
    if upload is not None:
        q["simulation"] = {
            "requests": 2000,
            "trace": dash.trace_from_upload(upload.getvalue(), upload.name).model_dump(),
        }
    return q


def what_if_panel(key: str) -> dash.WhatIf:
    c = st.columns(4)
    kv = c[0].selectbox("KV cache", ["as planned", "bf16", "fp8"], key=f"kv{key}")
    moe = c[1].selectbox("experts", ["as planned", "fp8", "nvfp4", "mxfp4", "w4a16"], key=f"moe{key}")
    ep = c[2].selectbox(
        "decode EP", [0, 8, 16, 32, 48, 72], format_func=lambda v: str(v) if v else "as planned", key=f"ep{key}"
    )
    batch = c[3].number_input("batch cap / instance (0: as planned)", 0, 100_000, 0, key=f"b{key}")
    c2 = st.columns(4)
    mtp = c2[0].slider("MTP accepted of 3 drafts (0: off)", 0.0, 3.0, 0.0, 0.05, key=f"mtp{key}")
    overlap = c2[1].slider("comm overlap", 0.0, 1.0, 0.5, 0.05, key=f"ov{key}")
    frac = c2[2].slider("KV memory fraction", 0.5, 0.95, 0.85, 0.01, key=f"fr{key}")
    tc = c2[3].toggle("tensor-core kernels for fallbacks", key=f"tc{key}")
    return dash.WhatIf(
        kv_cache=None if kv == "as planned" else kv,
        moe=None if moe == "as planned" else moe,
        ep=ep or None,
        batch=int(batch) or None,
        mtp_accepted=mtp or None,
        comm_overlap=overlap,
        mem_fraction=frac,
        tensor_core_kernels=tc,
    )


def plan_page(q: dict) -> None:
    a = answer_for(json.dumps(q, sort_keys=True), code_fingerprint())
    st.caption(f"{a.scored} candidates scored, {sum(a.pruned.values())} pruned, {a.simulated} simulated")
    msg = dash.closest_message(a)
    if msg:
        st.warning(msg)
    st.subheader("Recommendations" if a.feasible else "Closest configuration")
    st.dataframe(dash.recommendations_table(a), hide_index=True, width="stretch")
    st.subheader("Pareto front")
    st.plotly_chart(dash.pareto_figure(a), width="stretch")
    if not a.recommendations:
        return
    labels = [f"#{i + 1} {r['deployment']}" for i, r in enumerate(dash.recommendations_table(a))]
    st.subheader("Deployment")
    left, right = st.columns(2)
    i = labels.index(left.selectbox("deployment", labels))
    j = labels.index(right.selectbox("compare with", labels, index=min(1, len(labels) - 1)))
    base = dash.scenario_of(a, i)
    w = what_if_panel("a")
    changed = dash.apply_what_if(base, w)
    other = dash.scenario_of(a, j)
    b0, b2 = (breakdown_for(json.dumps(s, sort_keys=True)) for s in (base, other))
    try:
        b1 = breakdown_for(json.dumps(changed, sort_keys=True))
    except PlannerError as exc:  # an impossible what-if (e.g. NVFP4 on Hopper) is a message, the rest stays
        st.error(f"what-if: {exc}")
        b1, changed = b0, base
    cols = st.columns(len(b0.metrics))
    for col, (name, v) in zip(cols, b1.metrics.items(), strict=True):
        col.metric(name, f"{v:,.1f}", f"{v - b0.metrics[name]:+,.1f} vs plan")
    st.plotly_chart(dash.breakdown_figure([("plan", b0), ("what-if", b1), (f"#{j + 1}", b2)]), width="stretch")
    m1, m2 = st.columns(2)
    m1.caption("memory per GPU (what-if)")
    m1.plotly_chart(dash.memory_figure(b1), width="stretch")
    m2.caption(f"side by side: #{i + 1} (what-if) vs #{j + 1}")
    m2.dataframe(
        [{"metric": k, f"#{i + 1}": round(b1.metrics[k], 2), f"#{j + 1}": round(b2.metrics[k], 2)} for k in b1.metrics],
        hide_index=True,
    )
    if st.toggle("simulate this deployment (time series)"):
        st.plotly_chart(
            dash.timeseries_figure(timeseries_for(json.dumps(changed, sort_keys=True), 1200)), width="stretch"
        )
    files = dash.downloads(a, i)
    dl = st.columns(len(files))
    for col, (name, text) in zip(dl, files.items(), strict=True):
        col.download_button(name, text, file_name=name)


def validation_page() -> None:
    if not ANCHORS.exists():
        st.info(f"no anchor file at {ANCHORS}")
        return
    rows, summary, fig = dash.validation(ANCHORS)
    st.caption(
        f"{summary['within_tolerance']} of {summary['count']} within tolerance; median |error| "
        f"{summary['median_abs_rel_error']:.1%}"
    )
    st.plotly_chart(fig, width="stretch")
    st.dataframe(rows, hide_index=True, width="stretch")


page = st.sidebar.radio("page", ["Plan", "Validation"])
try:
    question = question_panel()
    build_question(question)  # bad input becomes a message, not a traceback
    plan_page(question) if page == "Plan" else validation_page()
except PlannerError as exc:
    st.error(str(exc))
