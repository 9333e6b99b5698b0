"""The dashboard's other pages: "which GPU?" (renders `planner compare`) and validation against
published results (renders `planner validate`). Layout only; the figures come from those
commands' functions. The plan page lives in app.py.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from planner.dashboard import charts, exports, gpu_compare
from planner.dashboard.inputs import CHOICES, RANGES
from planner.search.compare import PRIORS, PRIORS_NOTE, Frontier, compare, parse_prices
from roofline.catalog import hardware_ids, model_ids


@st.cache_data(show_spinner="searching every system...", persist="disk", max_entries=16)
def compare_for(model: str, isl: int, osl: int, engine: str, hardware: tuple[str, ...], fp: str) -> list[Frontier]:
    return compare(model, isl, osl, engine, list(hardware))


def compare_page(fingerprint: str) -> None:
    sb = st.sidebar
    sb.header("Which GPU?")
    model = sb.selectbox("model", model_ids(), key="model")
    isl = int(sb.number_input("input tokens", *RANGES["isl"], key="isl"))
    osl = int(sb.number_input("output tokens", *RANGES["osl"], key="osl"))
    engine = sb.selectbox("engine", CHOICES["engine"], key="engine")
    hw = sb.multiselect("systems", hardware_ids(), default=hardware_ids(), key="cmp_hw")
    min_user = float(sb.number_input("at least tok/s per user", *RANGES["min_user"], key="min_user"))
    prices = parse_prices(sb.text_input("USD per GPU-hour (e.g. h200-sxm=3.5,b200=5)", key="prices"))
    st.title("Which GPU?")
    st.markdown(
        f"{model}, {isl:,} input / {osl:,} output tokens on {engine}: each system's throughput per GPU against "
        "tokens/s per user, from the planner's own search (estimates, not simulated), on the shape engines "
        "commonly run there (one node or the NVL72 domain, wider until the model fits)."
    )
    fronts = compare_for(model, isl, osl, engine, tuple(hw), fingerprint)
    st.plotly_chart(gpu_compare.figure(fronts, min_user), width="stretch")
    rows = gpu_compare.summary_rows(fronts, prices, min_user)
    st.dataframe(rows, hide_index=True, width="stretch", height=35 * (len(rows) + 1) + 3)
    if any(r["kernels"] == PRIORS for r in rows):
        st.caption(PRIORS_NOTE)


def validation_page(anchors: Path) -> None:
    st.title("Validation against published results")
    if not anchors.exists():
        st.info(f"no anchor file at {anchors}")
        return
    rows, summary = exports.validation_rows(anchors)
    st.markdown(
        f"{summary['within_tolerance']} of {summary['count']} anchors within tolerance; median |error| "
        f"{summary['median_abs_rel_error']:.1%}. Green: within the anchor's tolerance, red: outside it. "
        "Error % = (predicted - published) / published."
    )
    st.plotly_chart(charts.validation_figure(rows), width="stretch")
    st.dataframe(rows, hide_index=True, width="stretch")
