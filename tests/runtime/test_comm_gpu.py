"""runtime.comm's device-side EP path on GPUs over NCCL, and runtime.comm_p2p's NVLink peer writes
(one rank per GPU, up to two): each matches the host-split reference, captures in a CUDA graph,
and the replay recomputes the same sum for new inputs written into the captured buffers. GPU only
(skipped in CI)."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, path: str, q) -> None:  # type: ignore[no-untyped-def]
    import os

    import torch.distributed as dist

    from runtime import comm

    os.environ.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        gen = torch.Generator().manual_seed(rank)
        tokens, experts, hidden = 96, 16 * world, 256
        ids, w = (t.to(dev) for t in comm.route(tokens, experts, 4, 1.0, gen))
        x = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16).to(dev)

        dispatch, combine = comm.dispatch, comm.combine
        if path == "p2p":
            from runtime.comm_p2p import PeerBuffers

            pb = PeerBuffers(tokens, hidden, 4)

            def dispatch(x, ids, w, experts):  # type: ignore[no-untyped-def]
                return pb.dispatch(x, ids, w, experts, tokens)

            combine = pb.combine

        def moe(d):  # type: ignore[no-untyped-def]
            return (d.hidden_states().float() * d.local_w.sum(1, keepdim=True)).to(torch.bfloat16)

        h = comm.dispatch_host(x, ids, w, experts)
        ref = comm.combine_host(moe(h), h, tokens).float()
        d = dispatch(x, ids, w, experts)
        err = float(((combine(moe(d), d).float() - ref).abs().max() / ref.abs().max()).item())
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            dw = dispatch(x, ids, w, experts)
            combine(moe(dw), dw)
        torch.cuda.current_stream(dev).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            dg = dispatch(x, ids, w, experts)
            out = combine(moe(dg), dg)
        x.copy_(torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16).to(dev))  # new inputs, same buffers
        g.replay()
        h2 = comm.dispatch_host(x, ids, w, experts)
        ref2 = comm.combine_host(moe(h2), h2, tokens).float()
        err_graph = float(((out.float() - ref2).abs().max() / ref2.abs().max()).item())
        q.put((rank, err, err_graph))
    except Exception as exc:
        q.put((rank, repr(exc), None))
        raise
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("path", ["nccl", "p2p"])
def test_device_path_matches_the_reference_and_replays_from_a_cuda_graph(path):
    import torch.multiprocessing as mp

    world = min(2, torch.cuda.device_count())
    if path == "p2p" and world < 2:
        pytest.skip("peer-to-peer writes need two GPUs")
    ctx = mp.get_context("spawn")
    q, port = ctx.Queue(), _port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, path, q)) for r in range(world)]
    for p in procs:
        p.start()
    res = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    for rank, err, err_graph in res:
        assert not isinstance(err, str), err
        assert err < 0.02, (rank, err)
        assert err_graph < 0.02, (rank, err_graph)
