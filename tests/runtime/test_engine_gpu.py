"""The serving engine on a 2-layer slice: a closed loop conserves requests, tokens and KV pages, and
a CUDA-graph decode step computes what the same step computes eagerly. GPU only (skipped in CI)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _engine(pages: int = 256):  # type: ignore[no-untyped-def]
    from runtime.engine.model import Model
    from runtime.engine.serve import Engine

    torch.manual_seed(0)
    return Engine(Model(layers=2, dense_layers=1), pages=pages, budget=512)


def test_closed_loop_serves_every_request_and_returns_its_pages():
    eng = _engine()
    free = len(eng.free)
    done = eng.serve(concurrency=3, isl=300, osl=6, requests=7)  # 300 > budget/2: prompts split or wait
    assert sorted(r.rid for r in done) == list(range(7))
    for r in done:
        assert r.done_prefill == 300
        assert r.generated == 6
        assert 0.0 <= r.arrival <= r.first_token <= r.finish
    assert len(eng.free) == free


def test_graph_decode_matches_eager_decode():
    from runtime.engine.serve import Req

    eng = _engine()
    reqs = [Req(i, 128, 8, 0.0, pages=[eng.free.popleft() for _ in range(3)]) for i in range(2)]
    eng.prefill_step([(r, 128) for r in reqs])
    for r in reqs:
        r.generated = 1
    eng.decode(reqs, 256)  # captures the batch-2 graph, replays it
    _, st, wrapper = eng._graph(2, 256)
    graph_next = st["next"].clone()
    eng._decode_body(st, wrapper)  # the same inputs, run eagerly
    torch.cuda.synchronize()
    assert torch.equal(st["next"], graph_next)
    assert [r.token for r in reqs] == graph_next.tolist()
