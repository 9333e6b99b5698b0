"""bench/anchor_steps.py: the step summary of a simulated anchor agrees with the prediction it prints."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import anchor_steps  # noqa: E402

NIM = ROOT / "validation" / "public" / "nim-benchmarking.yaml"


def test_a_simulated_anchor_prints_its_prediction_and_the_window_steps(capsys: pytest.CaptureFixture[str]) -> None:
    rc = anchor_steps.main(["nim-llama33-70b-h100-tp2-5000-500-c5-ttft", "--files", str(NIM)])
    out = capsys.readouterr().out
    assert rc == 0
    predicted = float(re.search(r"predicted ([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    measured = float(re.search(r"ttft_ms mean ([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    assert measured == pytest.approx(predicted, rel=1e-3)  # the summary is the run the prediction came from
    assert "decode-only" in out
    assert "with prefill" in out
    # a 5000-token prompt per prefill step at concurrency 5: the mean prefill tokens of a step is a whole prompt
    tokens = float(re.search(r"([0-9]+) prefill tokens", out).group(1))  # type: ignore[union-attr]
    assert tokens == pytest.approx(5000, rel=0.05)


def test_no_matching_anchor_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert anchor_steps.main(["no-such-anchor", "--files", str(NIM)]) == 2
    assert "no anchor matches" in capsys.readouterr().err
