"""The search's levers through the real app: each used only when constraints.levers allows it, and a relaxation
that names CPU offload, with its effect, when memory is the only obstacle."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

# levers.yaml host_links: PCIe 5.0 x16, the h100-sxm's host link, GB/s one way
PCIE5_GB_S = 63.0
BIG: dict[str, Any] = {"model": "meta-llama/Llama-3.1-70B-Instruct",
                       "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 1},
                       "constraints": {"gpus": ["h100-sxm"], "max_gpus": 1, "weight_dtypes": ["bf16"]}}
SMALL: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct",
                         "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 8,
                                      "prefix_cache_hit_rate": 0.5},
                         "constraints": {"gpus": ["h100-sxm"], "max_gpus": 2}, "top_k": 1}


def test_offload_is_proposed_for_a_70b_in_bf16_on_one_80gb_gpu(client: TestClient) -> None:
    answer = client.post("/v1/recommendations", json=BIG).json()
    assert answer["feasible"] is False
    relax = next(r for r in answer["explanation"]["relaxations"] if r["kind"] == "cpu_offload")
    # 70.6 B parameters x 2 bytes = 141 GB against 72 GB (0.9 x 80): at least 69 GB, less what the reserve takes
    assert 60 <= relax["value"] <= 80
    assert relax["deployment"]["cpu_offload_gb"] == relax["value"]
    assert relax["detail"].startswith(f"memory is the only obstacle: offloading {relax['value']:g} GB per GPU")
    # the figure is the deployment's prediction, at least the offloaded bytes over the host link each step
    pred = client.post("/v1/predictions", json={"model": BIG["model"], "deployment": relax["deployment"],
                                                "workload": BIG["workload"], "simulation": {"enabled": False}}).json()
    tpot = pred["predicted"]["tpot_ms"]
    assert tpot > relax["value"] / PCIE5_GB_S * 1e3
    assert f"about {tpot:.0f} ms TPOT" in relax["detail"]


def test_offload_splits_over_the_largest_tp_allowed(client: TestClient) -> None:
    # Llama-3.1-405B in BF16: about 405 B parameters x 2 bytes / 8 = 101 GB per GPU at TP8 against 80 GB, so
    # some 20-40 GB per GPU go to host memory; on one GPU it would be over 700 GB, each step far slower
    body = copy.deepcopy(BIG)
    body["model"] = "meta-llama/Llama-3.1-405B-Instruct"
    body["constraints"]["max_gpus"] = 8
    answer = client.post("/v1/recommendations", json=body).json()
    relax = next(r for r in answer["explanation"]["relaxations"] if r["kind"] == "cpu_offload")
    assert relax["deployment"]["tp"] == 8 and relax["deployment"]["gpu_count"] == 8
    assert 20 <= relax["value"] <= 40
    assert "fits it on 8 x h100-sxm (TP8)" in relax["detail"]
    pred = client.post("/v1/predictions", json={"model": body["model"], "deployment": relax["deployment"],
                                                "workload": body["workload"], "simulation": {"enabled": False}}).json()
    assert pred["fits"] is True
    assert pred["predicted"]["tpot_ms"] > relax["value"] / PCIE5_GB_S * 1e3
    # offloaded enough for the KV pool to hold one sequence of the 1280-token context
    mem = pred["memory_per_gpu_gb"]
    assert mem["kv_cache"] * 1e9 >= mem["kv_bytes_per_token"] * 1280


def test_offload_is_used_when_allowed(client: TestClient) -> None:
    body = copy.deepcopy(BIG)
    body["constraints"]["levers"] = ["cpu_offload"]
    answer = client.post("/v1/recommendations", json=body).json()
    assert answer["feasible"] is True
    assert answer["recommendations"][0]["deployment"]["cpu_offload_gb"] > 0
    assert answer["applied"]["constraints"]["levers"] == ["cpu_offload"]


def test_the_prefix_cache_counts_only_when_allowed(client: TestClient) -> None:
    with_hits = client.post("/v1/recommendations", json=SMALL).json()
    off = copy.deepcopy(SMALL)
    off["constraints"]["levers"] = []
    without = client.post("/v1/recommendations", json=off).json()
    no_hits = copy.deepcopy(SMALL)
    no_hits["workload"]["prefix_cache_hit_rate"] = 0.0
    plain = client.post("/v1/recommendations", json=no_hits).json()
    assert with_hits["recommendations"][0]["predicted"]["ttft_ms"] < plain["recommendations"][0]["predicted"]["ttft_ms"]
    assert without["recommendations"] == plain["recommendations"]
    assert "levers" not in plain["applied"]["constraints"]


def test_an_unknown_lever_is_a_422_listing_the_levers(client: TestClient) -> None:
    body = copy.deepcopy(SMALL)
    body["constraints"]["levers"] = ["medusa"]
    r = client.post("/v1/recommendations", json=body)
    assert r.status_code == 422
    assert "cpu_offload" in r.text and "prefix_cache" in r.text


FAST: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct",
                        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 1},
                        "sla": {"tpot_ms": 5, "percentile": "mean"},
                        "constraints": {"gpus": ["h100-sxm"], "max_gpus": 1, "weight_dtypes": ["bf16"]}}


def test_speculation_is_named_when_it_would_meet_a_tpot_bound(client: TestClient) -> None:
    # one h100-sxm decodes Llama-3.1-8B in bf16 at about 7 ms a token alone: 5 ms needs speculation
    answer = client.post("/v1/recommendations", json=FAST).json()
    assert answer["feasible"] is False
    relax = next(r for r in answer["explanation"]["relaxations"] if r["kind"] == "speculative")
    assert relax["value"] == {"method": "eagle3", "num_speculative_tokens": 3,
                              "draft_model": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"}
    pred = client.post("/v1/predictions", json={"model": FAST["model"], "deployment": relax["deployment"],
                                                "workload": FAST["workload"]}).json()
    assert pred["predicted"]["tpot_ms"] <= 5
    assert f"about {pred['predicted']['tpot_ms']:.1f} ms TPOT" in relax["detail"]


def test_speculation_is_used_when_allowed(client: TestClient) -> None:
    body = copy.deepcopy(FAST)
    body["constraints"]["levers"] = ["speculative"]
    answer = client.post("/v1/recommendations", json=body).json()
    assert answer["feasible"] is True
    rec = answer["recommendations"][0]
    assert rec["deployment"]["speculative"]["method"] == "eagle3"
    assert rec["predicted"]["tpot_ms"] <= 5
    assert "--speculative-config" in rec["launch"]["command"]


# ---- the host KV tier (kv_offload) ---------------------------------------------------------------------------

# 90 % of each 8192-token prompt is a reusable prefix, of a working set of 5M tokens (e.g. 610 documents of
# 8192 tokens): far beyond the free KV blocks of one H100 (a few hundred thousand tokens in BF16)
WIDE: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B-Instruct",
                        "workload": {"input_tokens": 8192, "output_tokens": 256, "concurrency": 64,
                                     "prefix_cache_hit_rate": 0.9, "prefix_working_set_tokens": 5_000_000},
                        "sla": {"ttft_ms": 300, "percentile": "p95"},
                        "constraints": {"gpus": ["h100-sxm"], "max_gpus": 1, "engines": ["vllm"]}, "top_k": 2}


def with_levers(body: dict[str, Any], levers: list[str] | None) -> dict[str, Any]:
    out = copy.deepcopy(body)
    if levers is not None:
        out["constraints"]["levers"] = levers
    return out


def test_kv_offload_is_named_as_a_relaxation_when_not_allowed(client: TestClient) -> None:
    answer = client.post("/v1/recommendations", json=WIDE).json()
    assert answer["feasible"] is False
    relax = next(r for r in answer["explanation"]["relaxations"] if r["kind"] == "kv_offload")
    dep = relax["deployment"]
    assert dep["kv_offload_gb"] == relax["value"] > 0 and dep["engine_version"] == "0.34.0"
    assert "allow it with constraints.levers including kv_offload" in relax["detail"]
    # its figure is the deployment's prediction, which meets the bound
    pred = client.post("/v1/predictions", json={"model": WIDE["model"], "deployment": dep,
                                                "workload": WIDE["workload"]}).json()
    p95 = pred["predicted"]["simulation"]["ttft_ms"]["p95"]
    assert p95 <= 300 and f"about {p95:.1f} ms p95 TTFT" in relax["detail"]
    assert any("in the host tier" in n for n in pred["notes"])


def test_kv_offload_is_used_only_when_allowed(client: TestClient) -> None:
    allowed = client.post("/v1/recommendations", json=with_levers(WIDE, ["prefix_cache", "kv_offload"])).json()
    assert allowed["feasible"] is True
    recs = allowed["recommendations"]
    assert recs and all(r["deployment"].get("kv_offload_gb") for r in recs)
    assert all("--kv-offloading-size" in r["launch"]["command"] for r in recs)
    # not allowed (the default levers), a looser bound: feasible, and no deployment has a tier
    loose = copy.deepcopy(WIDE)
    loose["sla"]["ttft_ms"] = 5000
    plain = client.post("/v1/recommendations", json=loose).json()
    assert plain["feasible"] is True
    assert not any(r["deployment"].get("kv_offload_gb") for r in plain["recommendations"])


def test_kv_offload_without_a_working_set_changes_nothing(client: TestClient) -> None:
    body = copy.deepcopy(WIDE)
    del body["workload"]["prefix_working_set_tokens"]
    body["sla"]["ttft_ms"] = 2000
    plain = client.post("/v1/recommendations", json=body).json()
    allowed = client.post("/v1/recommendations", json=with_levers(body, ["prefix_cache", "kv_offload"])).json()
    assert [r["deployment"] for r in plain["recommendations"]] == [r["deployment"] for r in allowed["recommendations"]]
    assert not any(r["deployment"].get("kv_offload_gb") for r in allowed["recommendations"])


def test_an_unknown_lever_is_a_422_naming_the_choices(client: TestClient) -> None:
    r = client.post("/v1/recommendations", json=with_levers(WIDE, ["kv_offloading"]))
    assert r.status_code == 422
    assert r.json()["field"][:2] == ["constraints", "levers"] and "kv_offload" in r.text
