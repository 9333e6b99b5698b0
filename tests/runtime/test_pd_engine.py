"""The disaggregated engine's workers (runtime.engine.pd) on the CPU: real scheduling, page pools,
handoffs and KV transfers over gloo, with a fake model (tests/runtime/fake_engine.py) that checks
every request's KV reached its decode pages intact. Needs torch; skipped without it."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

FAKE = {"device": "cpu", "engine": "tests.runtime.fake_engine:FakeEngine", "timeout_s": 120}


# two prefill ranks (the routed case) by default; one prefill rank in the long profile (`pytest -m fuzz`)
@pytest.mark.parametrize(("prefill", "decode"), [pytest.param(1, 1, marks=pytest.mark.fuzz), (2, 1)])
def test_closed_loop_pd_serves_every_request_and_splits_ttft(prefill, decode):
    """Every request of each closed-loop workload finishes (prompts longer than the budget are
    chunked); TTFT is the sum of its queue, prefill and transfer parts; the first decode step follows."""
    from runtime.engine.pd_run import serve

    res = serve(prefill, decode, [(2, 100, 5, 6), (4, 300, 4, 8)], layers=2, log=lambda *_: None, **FAKE)
    assert [(r["concurrency"], r["requests"]) for r in res] == [(2, 6), (4, 8)]
    for r in res:
        parts = r["ttft_queue_ms"] + r["ttft_prefill_ms"] + r["ttft_transfer_ms"]
        assert r["ttft_ms"] == pytest.approx(parts)
        assert min(r["ttft_prefill_ms"], r["ttft_transfer_ms"], r["first_decode_step_ms"], r["tpot_ms"]) > 0
        assert r["e2e_ms"] > r["ttft_ms"]
        assert r["output_tok_s"] > 0


def test_measure_drops_the_ramp_up_and_averages_the_rest():
    from runtime.engine.pd_run import measure

    # rid, isl, osl, arrival, prefill start, prefill end, first token, first step end, finish
    recs = [(i, 10, 11, 0.0, 1.0, 2.0, 3.0, 3.5, 3.0 + i) for i in range(1, 5)]
    m = measure(recs, warmup=0.25)  # the first completion (finish 4.0) is dropped
    assert m["ttft_ms"] == pytest.approx(3000)
    assert m["tpot_ms"] == pytest.approx(1e3 * (2 + 3 + 4) / 3 / 10)
    assert m["ttft_transfer_ms"] == pytest.approx(1000)
    assert m["output_tok_s"] == pytest.approx(33 / 7)
