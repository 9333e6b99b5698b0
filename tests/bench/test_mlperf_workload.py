"""bench/mlperf_workload.py: every MLPerf anchor carries its benchmark dataset's input lengths, and the
files are what the script writes (so a hand edit or a stale file shows)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from bench import mlperf_workload as mw
from planner.search.validate import Anchor
from simulator.traces import read_trace


def _anchors():
    for path in mw.FILES:
        yield from yaml.safe_load(path.read_text())["anchors"]


def test_every_mlperf_anchor_has_its_dataset_mean_isl_and_length_spread():
    """A LoadGen log gives no input lengths; the dataset is fixed per benchmark, so isl is never
    `unknown` (the 1k default) and the simulated lengths follow that dataset's mean and spread."""
    seen = set()
    for raw in _anchors():
        name = mw.benchmark(raw)
        seen.add(name)
        facts = mw.FACTS[name]
        assert raw["workload"]["isl"] == round(facts["mean"]), raw["id"]
        assert {k: raw["simulation"].get(k) for k in ("input_len", "output_len")} == {
            "output_len": None,
            **mw.lengths(facts),
        }, raw["id"]
        if "table" in facts:  # the copied table: its input mean is the dataset's, its output cut at max
            t = read_trace(mw.FILES[0].parent / facts["table"], "lengths")
            assert t.isl.mean() == pytest.approx(facts["mean"], abs=0.05)
            assert np.minimum(t.osl, facts["max_output"]).mean() == pytest.approx(3886.2, abs=0.05)
        assert f"isl {round(facts['mean'])} = mean input tokens" in raw["notes"], raw["id"]
        Anchor.model_validate(raw)  # the planner reads the section
    assert seen == set(mw.FACTS)


def test_rewriting_the_files_changes_nothing(tmp_path):
    """The committed files are the script's output: rewriting copies of them is a no-op."""
    copies = []
    for path in mw.FILES:
        copy = tmp_path / path.name
        copy.write_text(path.read_text())
        copies.append(copy)
    for copy in copies:
        mw.rewrite(copy)
    for path, copy in zip(mw.FILES, copies, strict=True):
        assert copy.read_text() == path.read_text()
