"""Communication profiles fit into link efficiencies and latencies that replace the priors."""

from __future__ import annotations

import pytest

from calibration import comm_fit
from calibration.comm_fit import fit, wire_bytes
from roofline import comm
from roofline.catalog import get_hardware

LINK = 450e9  # H200 NVLink per direction


def _profile(eff: float, lat: float) -> dict:
    pts = []
    for world in (2, 8):
        for b in (2**16, 2**20, 2**24, 2**28):
            p = {"op": "all_reduce", "world": world, "bytes": b}
            p["ms"] = (lat + wire_bytes(p) / (LINK * eff)) * 1e3
            pts.append(p)
        for rows in (100, 1000, 10000):
            p = {"op": "ep_dispatch", "world": world, "max_rows_received": rows, "hidden": 7168, "payload": "fp8"}
            p["ms"] = (2 * lat + wire_bytes(p) / (LINK * eff * 0.9)) * 1e3
            pts.append(p)
    return {"provenance": {}, "points": pts}


def test_fit_recovers_efficiency_and_latency_of_a_known_link():
    res = fit(_profile(0.7, 10e-6), LINK)
    ar = res["allreduce"]["8"]
    assert ar["efficiency"] == pytest.approx(0.7, rel=1e-3)
    assert ar["latency_s"] == pytest.approx(10e-6, rel=1e-3)
    assert res["a2a"]["2"]["efficiency"] == pytest.approx(0.63, rel=1e-3)
    assert ar["median_abs_error"] < 1e-6


def test_wire_bytes_per_op():
    assert wire_bytes({"op": "all_reduce", "world": 4, "bytes": 100}) == 150
    assert wire_bytes({"op": "all_gather", "world": 4, "bytes": 100}) == 300
    a2a = {"op": "ep_combine", "world": 8, "max_rows_received": 10, "hidden": 7168, "payload": "bf16"}
    assert wire_bytes(a2a) == 10 * 7168 * 2
    assert wire_bytes({**a2a, "payload": "fp8"}) == 10 * 7168 * 2  # combine returns bf16 after an fp8 dispatch
    assert wire_bytes({**a2a, "op": "ep_dispatch", "payload": "fp8"}) == 10 * 7168


def test_a_measured_profile_replaces_the_nvlink_prior_on_its_architecture(monkeypatch):
    h200, h100, gb200 = get_hardware("h200-sxm"), get_hardware("h100-sxm"), get_hardware("gb200-nvl72")
    prior = comm.allreduce_time(h200, 8, 64e6)
    fitted = fit(_profile(0.5, 20e-6), LINK)
    monkeypatch.setattr(comm, "_fitted", lambda hw: fitted if hw == "h200-sxm" else {})
    wire = 2 * 7 / 8 * 64e6
    assert comm.allreduce_time(h200, 8, 64e6) == pytest.approx(20e-6 + wire / (LINK * 0.5), rel=1e-3)
    assert comm.allreduce_time(h200, 8, 64e6) > prior  # 0.5 measured < 0.73 prior
    assert "transferred to h100-sxm" in comm.link(h100, "allreduce", 4, comm.ALLREDUCE_NVLINK["sm_90"]).source
    assert comm.link(h200, "allreduce", 2, comm.ALLREDUCE_NVLINK["sm_90"]).source == "measured on h200-sxm at world 2"
    assert comm.link(h200, "allreduce", 4, comm.ALLREDUCE_NVLINK["sm_90"]).source.endswith(
        "at world 2, transferred to world 4"
    )
    gb = comm.link(gb200, "allreduce", 8, comm.ALLREDUCE_NVLINK["sm_100"])
    assert gb == comm.ALLREDUCE_NVLINK["sm_100"]  # Blackwell keeps its prior


def test_a_fitted_profile_reaches_the_step_model_under_the_catalog_id(tmp_path, monkeypatch):
    """End to end on the CPU: a synthetic world-2 profile -> comm_fit writes <hardware id>-comm.json
    -> roofline.comm reads that same file and the EP all-to-all time follows the fit."""
    prof = _profile(0.5, 20e-6)
    prof["points"] = [p for p in prof["points"] if p["world"] == 2]
    monkeypatch.setattr(comm_fit, "OUT_DIR", tmp_path)
    monkeypatch.setattr(comm, "CALIBRATED", tmp_path)
    comm._fitted.cache_clear()
    try:
        path = comm_fit.write(prof, "h200-sxm")
        assert path.name == "h200-sxm-comm.json"
        h200 = get_hardware("h200-sxm")
        nv = 64e6
        assert comm.alltoall_time(h200, 2, nv, 0.0) == pytest.approx(40e-6 + nv / (LINK * 0.45), rel=1e-3)
        assert comm.link(h200, "a2a", 8, comm.A2A_NVLINK["sm_90"]).source.endswith("transferred to world 8")
    finally:
        comm._fitted.cache_clear()


def test_fit_skips_the_host_split_reference_points():
    p = {"op": "ep_dispatch_host", "world": 2, "max_remote_rows": 10, "hidden": 7168, "payload": "bf16", "ms": 3.0}
    assert fit({"provenance": {}, "points": [p]}, LINK) == {}


def test_normal_mode_dispatch_sends_a_token_once_per_remote_rank():
    """DeepEP normal kernels (and runtime.comm) dedup per rank: at EP2 with top-8, about one copy
    per token, not four; low-latency kernels send one copy per remote expert."""
    h200 = get_hardware("h200-sxm")
    assert comm.ep_copies(h200, 2, 8, 8, normal_mode=True)[0] == pytest.approx(1 - 0.5**8)
    assert comm.ep_copies(h200, 2, 8, 8, normal_mode=False)[0] == pytest.approx(4.0)
    assert comm.ep_copies(h200, 8, 8, 8, normal_mode=True)[0] == pytest.approx(7 * (1 - (7 / 8) ** 8))


def test_a_kind_left_out_of_the_fit_keeps_its_prior():
    assert set(fit(_profile(0.7, 10e-6), LINK, kinds=("allreduce",))) == {"allreduce"}


def test_ep_path_picks_which_dispatch_points_are_the_all_to_all():
    """Two EP paths in one profile, one twice as fast: --ep-path p2p fits the peer-to-peer points,
    the default the NCCL ones; a p2p point that failed (no time) is skipped."""
    pts = []
    for rows in (100, 1000, 10000):
        base = {"world": 2, "max_remote_rows": rows, "hidden": 7168, "payload": "bf16"}
        for op, eff in (("ep_dispatch", 0.3), ("ep_dispatch_p2p", 0.6)):
            p = {"op": op, **base}
            p["ms"] = (10e-6 + wire_bytes(p) / (LINK * eff)) * 1e3
            pts.append(p)
    pts.append({"op": "ep_combine_p2p", "world": 2, "max_remote_rows": 5, "hidden": 7168, "payload": "bf16",
                "error": "no symmetric memory"})  # fmt: skip
    prof = {"provenance": {}, "points": pts}
    assert fit(prof, LINK)["a2a"]["2"]["efficiency"] == pytest.approx(0.3, rel=1e-3)
    p2p = fit(prof, LINK, ep_path="p2p")["a2a"]["2"]
    assert p2p["efficiency"] == pytest.approx(0.6, rel=1e-3)
    assert p2p["points"] == 3
