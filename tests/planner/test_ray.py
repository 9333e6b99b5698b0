"""The Ray scale-out path scores the same candidates as the local pool (on a local Ray instance)."""

from __future__ import annotations

import pytest

from planner.inputs.question import SLO, Question
from planner.search.plan import plan

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_ray_scoring_matches_local_scoring():
    q = Question(
        model="llama-3.1-8b",
        hardware="h100-sxm",
        max_gpus=4,
        isl=500,
        osl=100,
        slo=SLO(tpot_p90_ms=30),
        verify_top=0,
        modes=["aggregated"],
    )
    local = plan(q, workers=1)
    remote = plan(q, workers=2, ray_address="local")
    assert [r.point.out_tok_s_per_gpu for r in remote.recommendations] == [
        r.point.out_tok_s_per_gpu for r in local.recommendations
    ]
