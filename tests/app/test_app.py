"""The dashboard renders, reacts to its widgets, and reports impossible questions as outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _run(**settings: float | str) -> AppTest:
    """The page opened from a link with these settings (`tpot`, `ttft`: planner.dashboard.urlstate): one plan,
    not the default's and then the changed one's."""
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in settings.items():
        at.query_params[key] = str(value)
    return at.run()


def test_default_page_renders_recommendations_and_the_pareto_front():
    at = _run()
    assert not at.exception
    assert not at.error
    assert at.dataframe  # recommendations table
    assert any(m.label.startswith("tok/s/GPU") for m in at.metric)
    assert "candidates scored" in at.caption[0].value


def test_changing_the_slo_changes_the_answer():
    loose = _run()
    tight = _run(tpot=20.0)
    assert not tight.exception
    first = lambda at: at.dataframe[0].value.iloc[0]["deployment"]  # noqa: E731
    batch = lambda at: at.dataframe[0].value.iloc[0]["batch"]  # noqa: E731
    assert (first(loose), batch(loose)) != (first(tight), batch(tight))


def test_a_p99_slo_is_checked_and_shown_at_p99():
    """The question panel's percentile (p90 or p99): the cards and the table say which percentile they show."""
    at = _run(pct="p99")
    assert not at.exception
    assert not at.error
    labels = [m.label for m in at.metric]
    assert any("simulated p99" in label for label in labels), labels
    assert not any("simulated p90" in label for label in labels)
    assert set(at.dataframe[0].value["figures"]) <= {"simulated p99", "simulated p99, not steady", "estimate (mean)",
                                                     "simulated p99, over capacity"}  # fmt: skip


def test_an_impossible_slo_shows_the_closest_configuration_and_the_binding_constraint():
    at = _run(tpot=0.05)
    assert not at.exception
    text = " ".join(w.value for w in at.warning)
    assert "Closest configuration" in text
    assert "binding constraint is TPOT" in text


def test_a_what_if_changes_the_metrics_against_the_plan():
    at = _run()
    at.selectbox(key="kv").select("bf16").run()
    assert not at.exception
    deltas = {m.label: m.delta for m in at.metric}
    assert not deltas["TPOT ms (what-if, estimate)"].startswith("+0.0 ")


def test_an_impossible_what_if_is_a_message_not_a_traceback():
    at = AppTest.from_file(APP, default_timeout=180).run()
    next(s for s in at.selectbox if s.label == "hardware").select("h200-sxm").run()
    at.selectbox(key="moe").select("nvfp4").run()
    assert not at.exception
    assert any("nvfp4" in e.value for e in at.error)
