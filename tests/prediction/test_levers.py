"""The levers through the real app: speculative decoding, CPU weight offload and the prefix cache change the
prediction as their physics says, the same in the analytic model and the simulation, and what cannot run is a
422 naming the field."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.core.levers import expected_tokens_per_step_tok
from service.core.step_kernels import decode_step_f
from service.core.step_model import smooth_max, step_model
from service.prediction.advisor import Advisor
from service.prediction.analytic import analyse
from service.prediction.validate import model_for
from service.schemas.predictions import Deployment, Speculative, Workload
from service.units import GB_BYTES

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BASE: dict[str, Any] = {"model": MODEL, "deployment": {"gpu": "h100-sxm", "engine": "vllm"},
                        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 1}}
# levers.yaml host_links: PCIe 5.0 x16, the h100-sxm's host link, one way
PCIE5_GB_S = 63.0


@pytest.fixture(scope="module")
def advisor(client: TestClient) -> Advisor:
    adv = client.app.state.app_state.current().advisor  # type: ignore[attr-defined]
    assert isinstance(adv, Advisor)
    return adv


def post(client: TestClient, dep: dict[str, Any] | None = None, wl: dict[str, Any] | None = None,
         simulate: bool = False) -> Any:
    body = copy.deepcopy(BASE)
    body["deployment"].update(dep or {})
    body["workload"].update(wl or {})
    body["simulation"] = {"enabled": simulate}
    return client.post("/v1/predictions", json=body)


def ok(client: TestClient, **kw: Any) -> dict[str, Any]:
    r = post(client, **kw)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.parametrize("simulate", [False, True])
@pytest.mark.parametrize("concurrency", [1, 64])
def test_acceptance_zero_never_helps(client: TestClient, simulate: bool, concurrency: int) -> None:
    plain = ok(client, wl={"concurrency": concurrency}, simulate=simulate)
    spec = ok(client, dep={"speculative": {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0}},
              wl={"concurrency": concurrency}, simulate=simulate)
    assert spec["predicted"]["tpot_ms"] > plain["predicted"]["tpot_ms"]


@pytest.mark.parametrize("simulate", [False, True])
def test_speculation_helps_a_lone_sequence_and_names_its_acceptance(client: TestClient, simulate: bool) -> None:
    plain = ok(client, simulate=simulate)
    spec = ok(client, dep={"speculative": {"method": "eagle3", "num_speculative_tokens": 3}}, simulate=simulate)
    # at batch 1 the verify step costs about a plain step: TPOT falls by nearly tau = 2.60 (a = 0.717, k = 3)
    speedup = plain["predicted"]["tpot_ms"] / spec["predicted"]["tpot_ms"]
    assert 1.5 < speedup < 2.6
    note = next(n for n in spec["notes"] if n.startswith("speculative decoding"))
    assert "acceptance rate 0.717" in note and "eagle3-llama-3.1-8b-mtbench-vllm-k3" in note


def test_verify_step_by_hand(advisor: Advisor) -> None:
    """The lever's decode step is (verify step over b x (k+1) tokens + k draft passes) / tau, computed here
    from the plain step model's terms."""
    model = model_for(advisor, MODEL, None)
    wl = Workload(input_tokens=1024, output_tokens=256, concurrency=8)
    plain_dep = Deployment(gpu="h100-sxm")
    spec_dep = Deployment(gpu="h100-sxm", speculative=Speculative(method="eagle3", num_speculative_tokens=3,
                                                                   acceptance_rate=0.5))
    s0, p0, _, _ = analyse(advisor, model, wl, [plain_dep]).row(0)
    s1, p1, _, _ = analyse(advisor, model, wl, [spec_dep]).row(0)
    plain, lever = step_model(s0, p0), step_model(s1, p1)
    b, k, q = np.asarray([8.0]), 3.0, 4.0
    tau = 1.875                                     # (1 - 0.5^4) / (1 - 0.5)
    assert float(expected_tokens_per_step_tok(0.5, 3)) == pytest.approx(tau)
    # per sequence: the target's KV of the mean context, and the draft head's one layer of it read by each of
    # the k draft passes (an EAGLE-3 head's KV per token is one layer of the target's)
    draft_kv_seq_s = k * float(s0.kv_tok_layer_bytes[0]) * (1024 + 256 / 2) / plain.bw_bytes_s
    assert float(s1.draft_kv_tok_bytes[0]) == float(s0.kv_tok_layer_bytes[0])
    verify = plain.pp * (smooth_max(plain.dense_s + b * (plain.seq_s + draft_kv_seq_s), q * b * plain.flop_s_seq)
                         + plain.comm_fixed_s + q * b * plain.comm_seq_s) + plain.step_fixed_s
    draft = k * float(s1.draft_pass_bytes[0]) / plain.bw_bytes_s
    assert float(s1.draft_pass_bytes[0]) > 0
    assert lever.decode_step(b)[0] == pytest.approx((verify + draft) / tau, rel=1e-12)


def test_draft_memory_is_in_the_prediction(client: TestClient) -> None:
    # Llama-3.1-8B config.json: 32 layers, 8 KV heads of 128 dims; BF16 KV: 2 x 8 x 128 x 2 = 4096 bytes per
    # token and layer, 131072 over 32 layers. An EAGLE-3 head adds one layer's KV (4096), and each sequence
    # holds k = 3 slots more: (1024 + 256 + 3) x 135168 bytes over the 1280-token context
    dep = {"gpu": "h100-sxm", "engine": "vllm", "weight_dtype": "bf16", "kv_dtype": "auto"}
    wl = {"input_tokens": 1024, "output_tokens": 256, "concurrency": 1}
    body = {"model": MODEL, "deployment": dep, "workload": wl, "simulation": {"enabled": False}}
    plain = client.post("/v1/predictions", json=body).json()
    body["deployment"] = {**dep, "speculative": {"method": "eagle3", "num_speculative_tokens": 3}}
    spec = client.post("/v1/predictions", json=body).json()
    assert plain["memory_per_gpu_gb"]["kv_bytes_per_token"] == 131072.0
    assert spec["memory_per_gpu_gb"]["kv_bytes_per_token"] == pytest.approx(1283 * 135168 / 1280, abs=0.1)
    # the head's weights: one decoder layer (4096 x (2 x 4096 + 2 x 1024) attention + 3 x 4096 x 14336 MLP) and
    # the 128256 x 4096 LM head, in BF16: 1.487 GB
    head_gb = (4096 * (2 * 4096 + 2 * 1024) + 3 * 4096 * 14336 + 128256 * 4096) * 2 / 1e9
    assert spec["memory_per_gpu_gb"]["weights"] - plain["memory_per_gpu_gb"]["weights"] == pytest.approx(
        head_gb, abs=0.01)
    assert spec["memory_per_gpu_gb"]["kv_cache"] < plain["memory_per_gpu_gb"]["kv_cache"]
    assert any("k slots for the draft tokens" in n for n in spec["notes"])


# DeepSeek-R1's MTP module by hand from its config.json (tests/core/test_moe_layout.py): 335,778,816 elements of
# attention, shared expert, router, eh_proj and norms, and 256 routed experts of 3 x 7168 x 2048 = 11,274,289,152
MTP_DENSE_PARAMS, MTP_ROUTED_PARAMS = 335_778_816, 11_274_289_152
R1_DEP: dict[str, Any] = {"gpu": "h200-sxm", "tp": 8, "weight_dtype": "fp8", "kv_dtype": "auto", "engine": "trtllm"}


def test_mtp_module_memory_is_a_whole_moe_layer(client: TestClient) -> None:
    wl = {"input_tokens": 1024, "output_tokens": 256, "concurrency": 1}
    body = {"model": "deepseek-ai/DeepSeek-R1", "deployment": R1_DEP, "workload": wl, "simulation": {"enabled": False}}
    plain = client.post("/v1/predictions", json=body).json()
    body["deployment"] = {**R1_DEP, "speculative": {"method": "mtp", "num_speculative_tokens": 3}}
    spec = client.post("/v1/predictions", json=body).json()
    # FP8 (dtypes.yaml: 8 bits per weight) over 8 GPUs; the embedding and output head are the main model's
    mtp_gb = (MTP_DENSE_PARAMS + MTP_ROUTED_PARAMS) * 1 / 8 / 1e9
    assert spec["memory_per_gpu_gb"]["weights"] - plain["memory_per_gpu_gb"]["weights"] == pytest.approx(
        mtp_gb, abs=0.01)
    # its KV: one MLA layer more than the target's 61, over the context and the k draft slots
    assert spec["memory_per_gpu_gb"]["kv_bytes_per_token"] == pytest.approx(
        plain["memory_per_gpu_gb"]["kv_bytes_per_token"] * 62 / 61 * 1283 / 1280, rel=1e-9)


def mtp_note(client: TestClient, k: int) -> tuple[str, list[str]]:
    body = {"model": "deepseek-ai/DeepSeek-R1", "deployment": {**R1_DEP, "speculative": {
        "method": "mtp", "num_speculative_tokens": k}},
        "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 1}, "simulation": {"enabled": False}}
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 200, r.text
    notes: list[str] = r.json()["notes"]
    return next(n for n in notes if n.startswith("speculative decoding")), notes


def test_default_acceptance_is_interpolated_in_k_and_names_both_sources(client: TestClient) -> None:
    # levers.yaml: R1's own 0.85 at k = 1 (DeepSeek-V3 report) and V3-0324's 0.707 at k = 7 (nebius, tau 3.20,
    # the same MTP module): at k = 3, 0.85 + (3 - 1) / (7 - 1) x (0.707 - 0.85) = 0.802333...
    a = 0.85 + 2 / 6 * (0.707 - 0.85)
    note, notes = mtp_note(client, 3)
    tau = (1 - a ** 4) / (1 - a)
    assert f"acceptance rate {a:g} " in note and f"gives {tau:.2f} tokens" in note
    assert "interpolated linearly in k between mtp-deepseek-r1-report-k1: 0.85 at k=1" in note
    assert "and mtp-deepseek-v3-0324-original-k7: 0.707 at k=7" in note
    assert "arxiv.org/pdf/2412.19437" in note and "huggingface.co/nebius/MTP-DeepSeek-V3-0324" in note
    assert not any("held flat" in n for n in notes)


def test_default_acceptance_at_a_measured_k_is_that_figure(client: TestClient) -> None:
    note, _ = mtp_note(client, 7)
    assert ("acceptance rate 0.707 (the catalog's default for mtp, mtp-deepseek-v3-0324-original-k7: 0.707 "
            "at k=7") in note
    assert "mtp-deepseek-r1-report-k1" not in note and "interpolated" not in note
    note, _ = mtp_note(client, 1)
    assert "acceptance rate 0.85 (the catalog's default for mtp, mtp-deepseek-r1-report-k1: 0.85 at k=1" in note


def test_default_acceptance_beyond_the_measured_k_is_flat_and_says_so(client: TestClient) -> None:
    note, notes = mtp_note(client, 10)
    assert "acceptance rate 0.707 (the catalog's default for mtp, the nearest measured k, held flat: " \
           "mtp-deepseek-v3-0324-original-k7: 0.707 at k=7" in note
    flat = next(n for n in notes if "held flat beyond" in n)
    assert "measured at k=7 at most, not k=10" in flat and "optimistic" in flat
    # below the smallest measured k (EAGLE-3 on Llama-3.1-8B: k = 3 and 7), the k = 3 figure, said to be flat
    spec = ok(client, dep={"speculative": {"method": "eagle3", "num_speculative_tokens": 2}})
    note = next(n for n in spec["notes"] if n.startswith("speculative decoding"))
    assert "acceptance rate 0.717 " in note and "held flat: eagle3-llama-3.1-8b-mtbench-vllm-k3" in note
    assert any("measured at k=3 at least, not k=2" in n for n in spec["notes"])


def test_mtp_draft_reads_the_experts_its_tokens_route_to(advisor: Advisor) -> None:
    """Each of the k draft passes over b sequences reads the MTP layer's routed experts those b tokens route to,
    (1 - (1 - 8/256)^b) of its 256 experts, beside its fixed reads; the compiled step (serving solve and
    simulation) agrees with the step model."""
    model = model_for(advisor, "deepseek-ai/DeepSeek-R1", None)
    wl = Workload(input_tokens=1024, output_tokens=256, concurrency=8)
    dep = Deployment(**R1_DEP, speculative=Speculative(method="mtp", num_speculative_tokens=3, acceptance_rate=0.5))
    s1, p1, _, _ = analyse(advisor, model, wl, [dep]).row(0)
    lever = step_model(s1, p1)
    without = step_model(replace(s1, draft_expert_bytes=0.0), p1)
    k, tau = 3.0, 1.875                              # (1 - 0.5^4) / (1 - 0.5)
    experts_gpu_bytes = MTP_ROUTED_PARAMS * 1 / 8    # FP8, spread over the 8 GPUs
    assert float(s1.draft_expert_bytes[0]) == pytest.approx(experts_gpu_bytes)
    for b in (1.0, 4.0, 64.0):
        share = 1.0 - (1.0 - 8 / 256) ** b
        want = k * experts_gpu_bytes * share / float(lever.bw_bytes_s[0]) / tau
        got = lever.decode_step(np.asarray([b]))[0] - without.decode_step(np.asarray([b]))[0]
        assert float(got[0]) == pytest.approx(want, rel=1e-9)
        compiled = decode_step_f(b, *(float(np.ravel(getattr(lever, f))[0]) for f in (
            "pp", "dense_s", "expert_s", "log_miss")), bool(np.ravel(lever.moe)[0]),
            *(float(np.ravel(getattr(lever, f))[0]) for f in (
                "seq_s", "flop_s_seq", "comm_fixed_s", "comm_seq_s", "step_fixed_s", "draft_expert_s",
                "draft_log_miss")))
        assert compiled[0] == pytest.approx(float(lever.decode_step(np.asarray([b]))[0][0]), rel=1e-12)
    # at one sequence a pass reads 8 of the 256 experts: 1/32 of the layer's experts
    one = lever.decode_step(np.asarray([1.0]))[0] - without.decode_step(np.asarray([1.0]))[0]
    assert float(one[0]) == pytest.approx(k * experts_gpu_bytes / 32 / float(lever.bw_bytes_s[0]) / tau)


def test_hit_rate_zero_changes_nothing(client: TestClient) -> None:
    for simulate in (False, True):
        assert ok(client, simulate=simulate) == ok(client, wl={"prefix_cache_hit_rate": 0.0}, simulate=simulate)


@pytest.mark.parametrize("simulate", [False, True])
def test_prefix_hits_cut_prefill_and_ttft(client: TestClient, simulate: bool) -> None:
    plain = ok(client, simulate=simulate)["predicted"]
    half = ok(client, wl={"prefix_cache_hit_rate": 0.5}, simulate=simulate)
    assert half["predicted"]["prefill_ms"] < plain["prefill_ms"]
    assert half["predicted"]["ttft_ms"] < plain["ttft_ms"]
    assert any("prefix cache: 50%" in n and "multi-turn" in n for n in half["notes"])


def test_prefix_cache_turned_off_gets_no_hits(client: TestClient) -> None:
    off = {"engine_args": {"enable_prefix_caching": False}}
    assert ok(client, dep=off) == ok(client, dep=off, wl={"prefix_cache_hit_rate": 0.5})


def test_offload_adds_its_transfer_to_every_step_by_hand(client: TestClient) -> None:
    plain = ok(client)
    off = ok(client, dep={"cpu_offload_gb": 5})
    floor_ms = 5e9 / (PCIE5_GB_S * GB_BYTES) * 1e3          # 79.37 ms: 5 GB over PCIe 5.0 x16
    # one client: batch 1 and no prompts carried by decode steps, so TPOT is the step plus the transfer
    assert off["predicted"]["tpot_ms"] - plain["predicted"]["tpot_ms"] == pytest.approx(floor_ms, abs=0.01)
    assert plain["memory_per_gpu_gb"]["weights"] - off["memory_per_gpu_gb"]["weights"] == pytest.approx(5.0, abs=0.01)


@pytest.mark.parametrize("simulate", [False, True])
@pytest.mark.parametrize("gb", [0.5, 4.0])
def test_offload_never_lowers_tpot(client: TestClient, simulate: bool, gb: float) -> None:
    for conc in (1, 32):
        plain = ok(client, wl={"concurrency": conc}, simulate=simulate)["predicted"]
        off = ok(client, dep={"cpu_offload_gb": gb}, wl={"concurrency": conc}, simulate=simulate)["predicted"]
        assert off["tpot_ms"] >= plain["tpot_ms"] + gb * 1e9 / (PCIE5_GB_S * GB_BYTES) * 1e3 * 0.99


def test_offload_fits_a_model_that_does_not_fit(client: TestClient) -> None:
    big = {"model": "meta-llama/Llama-3.1-70B-Instruct"}
    body = copy.deepcopy(BASE) | big
    r = client.post("/v1/predictions", json=body | {"simulation": {"enabled": False}})
    assert r.json()["fits"] is False
    body["deployment"]["cpu_offload_gb"] = 75
    r = client.post("/v1/predictions", json=body | {"simulation": {"enabled": False}})
    assert r.json()["fits"] is True
    # at least 75 GB over 63 GB/s per step: 1.19 s
    assert r.json()["predicted"]["tpot_ms"] > 75e9 / (PCIE5_GB_S * GB_BYTES) * 1e3


@pytest.mark.parametrize(("dep", "field", "valid"), [
    ({"speculative": {"method": "ngram", "num_speculative_tokens": 3}},
     ["deployment", "speculative", "acceptance_rate"], None),
    ({"cpu_offload_gb": 5, "engine": "trtllm"}, ["deployment", "cpu_offload_gb"], ["vllm 0.11.0", "vllm 0.34.0"]),
    ({"cpu_offload_gb": 50}, ["deployment", "cpu_offload_gb"], None),
    ({"speculative": {"method": "draft_model", "num_speculative_tokens": 3, "acceptance_rate": 0.6,
                      "draft_model": "no/such-model"}}, ["deployment", "speculative", "draft_model"], None),
])
def test_what_cannot_run_is_a_422_naming_the_field(client: TestClient, dep: dict[str, Any], field: list[str],
                                                    valid: list[str] | None) -> None:
    r = post(client, dep=dep)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert r.json().get("valid") == valid


def test_mtp_needs_a_model_with_mtp_modules(client: TestClient) -> None:
    r = post(client, dep={"speculative": {"method": "mtp", "num_speculative_tokens": 1}})
    assert r.status_code == 422
    assert r.json()["field"] == ["deployment", "speculative", "method"]
    assert "mtp" not in r.json()["valid"] and "eagle3" in r.json()["valid"]


def test_an_unknown_method_lists_the_methods(client: TestClient) -> None:
    r = post(client, dep={"speculative": {"method": "medusa", "num_speculative_tokens": 3}})
    assert r.status_code == 422
    assert "eagle3" in r.text and "draft_model" in r.text


def test_draft_model_needs_its_model(client: TestClient) -> None:
    r = post(client, dep={"speculative": {"method": "draft_model", "num_speculative_tokens": 3,
                                          "acceptance_rate": 0.6}})
    assert r.status_code == 422 and "draft_model" in r.text


def test_a_draft_model_costs_more_than_an_eagle_head(client: TestClient) -> None:
    common = {"num_speculative_tokens": 3, "acceptance_rate": 0.7}
    head = ok(client, dep={"speculative": {"method": "eagle3", **common}})["predicted"]["tpot_ms"]
    draft = ok(client, dep={"speculative": {"method": "draft_model", "draft_model": "meta-llama/Llama-3.2-1B",
                                            **common}})["predicted"]["tpot_ms"]
    assert draft > head
    assert math.isfinite(draft)


# ---- the prefix working set and the host KV tier -------------------------------------------------------------

# Llama-3.1-8B, BF16 KV on one GPU: 131072 bytes per token (see test_draft_memory_is_in_the_prediction)
KV_TOK_BYTES = 131072.0
LONG = {"input_tokens": 4096, "output_tokens": 256, "concurrency": 32, "prefix_cache_hit_rate": 0.75}


def test_working_set_tiers_by_hand(advisor: Advisor) -> None:
    """The shares of the hits and the host load, computed here from the deployment's pool: the step model's hit
    rate is the workload's times the held share, and each request waits for its host share to load."""
    model = model_for(advisor, MODEL, None)
    w_tok = 2_000_000
    dep = Deployment(gpu="h100-sxm", weight_dtype="bf16", kv_dtype="auto", kv_offload_gb=100)
    without = Workload(**LONG)
    wl = Workload(**LONG, prefix_working_set_tokens=w_tok)
    s0, p0, _, _ = analyse(advisor, model, without, [dep]).row(0)
    s1, p1, _, _ = analyse(advisor, model, wl, [dep]).row(0)
    assert float(s1.seq_mean[0]) / (4096 + 256 / 2) == KV_TOK_BYTES
    # 32 clients on one replica, all held at once; the rest of the pool holds prefixes
    free_tok = (float(s1.kv_pool[0]) - 32 * float(s1.seq_mean[0])) / KV_TOK_BYTES
    host_tok = 100e9 / KV_TOK_BYTES                        # 762,939.5 tokens in 100 GB
    gpu = min(1.0, free_tok / w_tok)
    host = min(1.0, (free_tok + host_tok) / w_tok) - gpu
    assert 0 < gpu < 1 and 0 < host < 1 - gpu
    plain, lever = step_model(s0, p0), step_model(s1, p1)
    assert float(np.ravel(lever.prefix_hit_rate)[0]) == pytest.approx(0.75 * (gpu + host), rel=1e-12)
    # 3072 cached tokens (0.75 x 4096), the host share of them over PCIe 5.0 x16 (63 GB/s)
    load_s = 3072 * host * KV_TOK_BYTES / (PCIE5_GB_S * GB_BYTES)
    assert float(np.ravel(lever.ttft_fixed_s - plain.ttft_fixed_s)[0]) == pytest.approx(load_s, rel=1e-9)
    tiers = lever.prefix_tiers
    assert tiers is not None and float(tiers.free_tok[0]) == pytest.approx(free_tok)


@pytest.mark.parametrize("simulate", [False, True])
def test_a_working_set_beyond_the_pool_recomputes_and_a_host_tier_reloads(client: TestClient,
                                                                          simulate: bool) -> None:
    dep = {"engine_version": "0.34.0"}
    assumed = ok(client, dep=dep, wl=LONG, simulate=simulate)
    wide = {**LONG, "prefix_working_set_tokens": 5_000_000}
    evicted = ok(client, dep=dep, wl=wide, simulate=simulate)
    # 700 GB hold 700e9 / 131072 = 5.34M tokens: the whole set
    tier = ok(client, dep={**dep, "kv_offload_gb": 700}, wl=wide, simulate=simulate)
    # the hits the pool cannot hold are recomputed: slower than the assumption that every hit is cached;
    # a tier that holds the set reloads them over the host link, faster than recomputing
    assert evicted["predicted"]["prefill_ms"] > assumed["predicted"]["prefill_ms"]
    assert evicted["predicted"]["ttft_ms"] > tier["predicted"]["ttft_ms"] > assumed["predicted"]["ttft_ms"]
    note = next(n for n in tier["notes"] if n.startswith("prefix working set"))
    assert "in the host tier" in note and "none is recomputed" in note
    assert any("would hold them" in n for n in evicted["notes"])


@pytest.mark.parametrize("simulate", [False, True])
def test_a_working_set_within_the_pool_and_a_tier_without_one_change_nothing(client: TestClient,
                                                                            simulate: bool) -> None:
    dep = {"engine_version": "0.34.0"}
    assumed = ok(client, dep=dep, wl=LONG, simulate=simulate)
    small = ok(client, dep=dep, wl={**LONG, "prefix_working_set_tokens": 1000}, simulate=simulate)
    assert small["predicted"] == assumed["predicted"]
    # a tier without a working set (or without hits) has no modelled gain, and the answer says so
    tier = ok(client, dep={**dep, "kv_offload_gb": 100}, wl=LONG, simulate=simulate)
    assert tier["predicted"] == assumed["predicted"]
    assert any(n.startswith("KV offload") and "no modelled gain" in n for n in tier["notes"])


@pytest.mark.parametrize(("dep", "wl", "field"), [
    ({"kv_offload_gb": 10, "engine_version": "0.11.0"}, {}, ["deployment", "kv_offload_gb"]),
    ({"kv_offload_gb": -1}, {}, ["deployment", "kv_offload_gb"]),
    ({"kv_offload_gb": 10, "engine_args": {"enable_prefix_caching": False}}, {}, ["deployment", "kv_offload_gb"]),
    ({}, {"prefix_working_set_tokens": 0}, ["workload", "prefix_working_set_tokens"]),
    ({}, {"prefix_working_set_tokens": -5}, ["workload", "prefix_working_set_tokens"]),
])
def test_kv_offload_that_cannot_run_is_a_422(client: TestClient, dep: dict[str, Any], wl: dict[str, Any],
                                             field: list[str]) -> None:
    r = post(client, dep=dep, wl=wl)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_kv_offload_on_vllm_0_11_names_the_versions_with_it(client: TestClient) -> None:
    r = post(client, dep={"kv_offload_gb": 10, "engine_version": "0.11.0"})
    assert r.json()["valid"] == ["trtllm 1.2", "vllm 0.34.0"]
