"""EP dispatch/combine, TP all-reduce/all-gather and KV transfer against single-process references,
on the CPU with the gloo backend (2 and 4 ranks). Needs torch; skipped without it."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, fp8: bool, q) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    from runtime import comm

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        experts, topk, tokens, hidden = 8 * world, 4, 37 + rank, 64
        gen = torch.Generator().manual_seed(rank)
        x = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16)
        ids, w = comm.route(tokens, experts, topk, skew=1.0, gen=gen)
        per = experts // world
        # expert e multiplies by (e + 1): the received rows' weighted output over this rank's experts
        scale = (torch.arange(per) + rank * per + 1).float()
        ref = (x.float() * (w * (ids + 1).float()).sum(dim=1, keepdim=True)).to(torch.bfloat16)

        def expert_out(d) -> torch.Tensor:  # type: ignore[no-untyped-def]
            return (d.hidden_states().float() * (d.local_w * scale).sum(dim=1, keepdim=True)).to(torch.bfloat16)

        def rel(out: torch.Tensor) -> float:
            return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()

        h = comm.dispatch_host(x, ids, w, experts, fp8=fp8)
        err_host = rel(comm.combine_host(expert_out(h), h, tokens))
        d = comm.dispatch(x, ids, w, experts, fp8=fp8, capacity=37 + world)  # same on every rank
        err = rel(comm.combine(expert_out(d), d))
        # the device path received the same rows as the reference (its valid rows, in send order)
        same_rows = torch.equal(d.hidden_states()[d.valid].float(), h.x.float()) and torch.allclose(
            d.local_w[d.valid], h.local_w
        )
        # a capacity of 4 rows per destination drops the rest: those tokens lose that rank's experts
        small = comm.dispatch(x, ids, w, experts, fp8=fp8, capacity=4)
        dropped = rel(comm.combine(expert_out(small), small))
        ar = comm.all_reduce(torch.full((5,), float(rank + 1)))
        ag = comm.all_gather(torch.full((2, 3), float(rank)))
        kv = torch.full((4, 8), float(rank))
        comm.kv_transfer(kv, 0, 1)
        kept = int(small.sent.sum())
        q.put((rank, err, err_host, same_rows, dropped, kept, ar.tolist(), ag[:, 0].tolist(), kv.unique().tolist()))
    except Exception as exc:  # report instead of leaving the parent waiting
        q.put((rank, repr(exc), None, None, None, None, None, None, None))
        raise
    finally:
        dist.destroy_process_group()


def _run(world: int, fp8: bool) -> list:  # type: ignore[type-arg]
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, fp8, q)) for r in range(world)]
    for p in procs:
        p.start()
    res = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return sorted(res)


# four ranks over gloo take ~16 s of a 2-core CI machine: in the long profile (`pytest -m fuzz`)
@pytest.mark.parametrize(
    ("world", "fp8", "tol"), [(2, False, 0.02), pytest.param(4, False, 0.02, marks=pytest.mark.fuzz), (2, True, 0.08)]
)
def test_dispatch_combine_all_reduce_all_gather_and_kv_transfer_match_references(world, fp8, tol):
    """The fixed-capacity device path and the host-split reference both reproduce the single-process
    MoE sum and receive the same rows; a capacity below the load drops tokens and the sum shows it."""
    res = _run(world, fp8)
    total = sum(range(1, world + 1))
    for rank, err, err_host, same_rows, dropped, kept, ar, ag, kv in res:
        assert not isinstance(err, str), err
        assert err < tol, (rank, err)
        assert err_host < tol, (rank, err_host)
        assert same_rows, rank
        assert kept <= 4 * world, (rank, kept)
        assert dropped > 0.1, (rank, dropped)
        assert ar == [float(total)] * 5
        assert ag == [float(r) for r in range(world) for _ in range(2)]
        assert kv == ([0.0] if rank in (0, 1) else [float(rank)])


def test_skewed_routing_is_imbalanced_and_uniform_routing_is_not():
    from runtime.comm import load_imbalance, route

    gen = torch.Generator().manual_seed(0)
    flat, _ = route(4096, 256, 8, skew=0.0, gen=gen)
    hot, _ = route(4096, 256, 8, skew=1.0, gen=gen)
    assert load_imbalance(flat, 256) < 1.4 < load_imbalance(hot, 256)
    assert all(len(set(row)) == 8 for row in hot.tolist()[:100])  # no expert twice for a token


def test_comm_sweep_writes_a_profile_with_provenance_for_every_op(tmp_path):
    from runtime.comm_sweep import run_comm_sweep

    out = tmp_path / "comm.json"
    prof = run_comm_sweep(out, worlds=(2,), backend="gloo", quick=True, log=lambda *_: None)
    import json

    assert json.loads(out.read_text()) == prof
    ops = {p["op"] for p in prof["points"]}
    assert ops == {"all_reduce", "all_gather", "kv_transfer", "ep_dispatch", "ep_combine", "ep_dispatch_host",
                   "ep_combine_host"}  # fmt: skip
    ep = [p for p in prof["points"] if p["op"] == "ep_dispatch"]
    assert all(0 < p["max_remote_rows"] <= p["capacity"] and p["padded_wire_bytes"] > 0 for p in ep)
    assert all(p["ms"] > 0 and p["world"] == 2 for p in prof["points"])
    assert {p["payload"] for p in prof["points"] if p["op"] == "ep_dispatch"} == {"bf16", "fp8"}
    assert prof["provenance"]["backend"] == "gloo"
    assert prof["provenance"]["worlds"] == [2]
    from calibration.comm_fit import fit

    fitted = fit(prof, 450e9)  # the sweep's points are what the fit reads
    assert set(fitted) == {"allreduce", "a2a", "kv"}
    assert all(0 < f["efficiency"] <= 1 for kind in fitted.values() for f in kind.values())


def test_comm_sweep_refuses_nccl_without_two_gpus(tmp_path):
    from runtime.comm_sweep import run_comm_sweep

    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has the GPUs")
    with pytest.raises(RuntimeError, match="at least 2 GPUs"):
        run_comm_sweep(tmp_path / "x.json", worlds=(2,), backend="nccl")
    assert not (tmp_path / "x.json").exists()


def test_default_worlds_cover_any_gpu_count():
    from runtime.comm_sweep import default_worlds

    assert default_worlds(1) == ()
    assert default_worlds(2) == (2,)
    assert default_worlds(3) == (2, 3)
    assert default_worlds(8) == (2, 4, 8)
    assert default_worlds(12) == (2, 4, 8, 12)
