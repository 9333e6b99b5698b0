"""The expert-parallel engine on the CPU: its MoE layer (route, dispatch, local grouped experts,
combine) against a single-process reference over gloo at world 2, a rank with no tokens included;
its lockstep closed loop on a fake engine (tests/runtime/fake_ep_engine.py). Needs torch."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")

FAKE = {"device": "cpu", "engine": "tests.runtime.fake_ep_engine:FakeEPEngine", "timeout_s": 120}
HID, INTER, PER = 32, 16, 4


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _weights(world: int):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(7)
    n = PER * world
    return (torch.randn(n, HID, generator=g), torch.randn(n, 2 * INTER, HID, generator=g) / HID**0.5,
            torch.randn(n, HID, INTER, generator=g) / INTER**0.5)  # fmt: skip


def _expert(x, w13, w2):  # type: ignore[no-untyped-def]
    g, u = (x @ w13.t()).split(INTER, dim=-1)
    return (torch.nn.functional.silu(g) * u) @ w2.t()


def _moe_worker(rank: int, world: int, port: int, tokens: list[int], q) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    from runtime.engine.ep_model import ep_moe

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        gate, w13, w2 = _weights(world)
        x = torch.randn(tokens[rank], HID, generator=torch.Generator().manual_seed(rank)).to(torch.bfloat16)
        mine = slice(rank * PER, (rank + 1) * PER)

        def experts(xs, offs):  # type: ignore[no-untyped-def]
            out, start = torch.full((xs.shape[0], HID), float("nan")), 0  # rows past the last group: junk
            for e, end in enumerate(offs.tolist()):
                out[start:end] = _expert(xs[start:end].float(), w13[mine][e], w2[mine][e])
                start = end
            return out.to(torch.bfloat16)

        topk = world
        got = ep_moe(x, gate.to(torch.bfloat16), torch.zeros(PER * world), topk, experts, max(tokens))
        scores = torch.sigmoid(x.float() @ gate.to(torch.bfloat16).float().t())
        ids = scores.topk(topk, dim=-1).indices
        w = scores.gather(1, ids)
        w = w / w.sum(-1, keepdim=True)
        ref = torch.zeros(tokens[rank], HID)
        for t in range(tokens[rank]):
            for j in range(topk):
                e = int(ids[t, j])
                ref[t] += w[t, j] * _expert(x[t : t + 1].float(), w13[e], w2[e])[0].to(torch.bfloat16).float()
        err = float((got - ref).abs().max() / ref.abs().max().clamp(min=1e-6)) if tokens[rank] else 0.0
        q.put((rank, tuple(got.shape), err))
    except Exception as exc:  # report instead of leaving the parent waiting
        q.put((rank, repr(exc), None))
        raise


# spawned processes over gloo take ~7 s each on a 2-core CI machine: the uneven case runs by default, the even
# one in the long profile (`pytest -m fuzz`)
@pytest.mark.parametrize("tokens", [pytest.param([9, 5], marks=pytest.mark.fuzz), [6, 0]])
def test_ep_moe_matches_a_single_process_reference(tokens):
    """Every token's routed output equals the reference (bf16 rounding), a rank with no tokens
    still serving the other's through its experts."""
    ctx = torch.multiprocessing.get_context("spawn")
    q, port = ctx.Queue(), _port()
    procs = [ctx.Process(target=_moe_worker, args=(r, 2, port, tokens, q)) for r in range(2)]
    for p in procs:
        p.start()
    out = sorted(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    for rank, shape, err in out:
        assert shape == (tokens[rank], HID), shape
        assert err < 0.03, (rank, err)


def test_local_pairs_sort_routed_pairs_by_expert_and_unrouted_last():
    from runtime.engine.ep_model import local_pairs

    local_w = torch.tensor([[0.0, 0.5, 0.0], [0.2, 0.0, 0.3], [0.0, 0.0, 0.0]])
    row, w, offs = local_pairs(local_w, 2)
    assert offs.tolist() == [1, 2, 3]  # expert 0: row 1; expert 1: row 0; expert 2: row 1
    assert row[:3].tolist() == [1, 0, 1]
    assert w[:3].tolist() == pytest.approx([0.2, 0.5, 0.3])
    assert w[3:].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("world", [pytest.param(2, marks=pytest.mark.fuzz), 3])  # 3: the uneven split, by default
def test_lockstep_closed_loop_serves_every_request(world):
    """Every rank steps with the others (the fake fails a step the ranks disagree on) through a
    workload that leaves a rank idle (C=1) and one that splits unevenly; all requests finish."""
    from runtime.engine.ep_run import serve

    res = serve(world, [(1, 100, 5, 3), (3, 300, 4, 6)], layers=2, log=lambda *_: None, **FAKE)
    assert [(r["concurrency"], r["requests"]) for r in res] == [(1, 3), (3, 6)]
    for r in res:
        assert 0 < r["ttft_ms"] < r["e2e_ms"]
        assert r["tpot_ms"] > 0
        assert r["output_tok_s"] > 0


def test_clients_and_requests_are_shared_round_robin():
    from runtime.engine.ep import share

    assert [share(2, r, 1, 6) for r in range(2)] == [(1, 6), (0, 0)]
    assert [share(3, r, 8, 24) for r in range(3)] == [(3, 9), (3, 9), (2, 6)]


def test_requests_not_a_multiple_of_concurrency_are_refused():
    from runtime.engine.ep_run import serve

    with pytest.raises(ValueError, match="multiple of concurrency"):
        serve(2, [(4, 100, 5, 6)], layers=2, log=lambda *_: None, **FAKE)
