"""POST /v1/predictions through HTTP on the real app, with the calibration fitted on the shipped data."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

EXAMPLE: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "deployment": {"gpu": "h100-sxm", "gpu_count": 4, "tp": 4, "pp": 1, "replicas": 1,
                   "weight_dtype": "fp8", "kv_dtype": "fp8", "engine": "trtllm"},
    "workload": {"input_tokens": 2048, "output_tokens": 128, "concurrency": 64},
}


def predict(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def with_(body: dict[str, Any], section: str, **changes: Any) -> dict[str, Any]:
    return {**body, section: {**body[section], **changes}}


def test_spec_example_is_answered_consistently(client: TestClient) -> None:
    body = predict(client, EXAMPLE)
    assert body["fits"] is True and body["model"] == EXAMPLE["model"]
    assert body["resolved_model"] == "meta-llama/Llama-3.1-70B"
    p = body["predicted"]
    assert 0 < p["ttft_p50_ms"] <= p["ttft_p90_ms"] <= p["ttft_p95_ms"] <= p["ttft_p99_ms"]
    assert p["tpot_ms"] > 0 and p["prefill_ms"] > 0
    # the response's own arithmetic: e2e = TTFT + (O - 1) TPOT; throughput = requests/s x O
    assert p["e2e_ms"] == _approx(p["ttft_ms"] + 127 * p["tpot_ms"], 1e-3)
    assert p["output_tok_s"] == _approx(p["requests_per_s"] * 128, 1e-3)
    mem = body["memory_per_gpu_gb"]
    # 70.6e9 FP8 parameters (16-bit embeddings) over TP4 is ~18 GB per GPU
    assert 17.0 < mem["weights"] < 19.5
    assert mem["total"] <= mem["capacity"] == 80
    assert body["settings"]["memory_fraction_flag"] == "kv_cache_free_gpu_memory_fraction"
    conf = body["confidence"]
    assert conf["calibration_version"] >= 1 and conf["measurements"] > 0 and "h100-sxm" in conf["basis"]
    # price x 4 GPUs, and the cost per million output tokens follows from the throughput
    cost = body["cost"]
    assert cost["usd_per_million_output_tokens"] == _approx(
        cost["usd_per_hour"] / (p["output_tok_s"] * 3600) * 1e6, 1e-3)


def _approx(x: float, rel: float) -> Any:
    import pytest

    return pytest.approx(x, rel=rel)


def test_more_clients_wait_longer_and_get_more_throughput(client: TestClient) -> None:
    low = predict(client, with_(EXAMPLE, "workload", concurrency=1))["predicted"]
    high = predict(client, with_(EXAMPLE, "workload", concurrency=128))["predicted"]
    assert high["ttft_ms"] > low["ttft_ms"] and high["tpot_ms"] > low["tpot_ms"]
    assert high["output_tok_s"] > 10 * low["output_tok_s"]


def test_seed_question_7b_on_one_a10_with_50_chats(client: TestClient) -> None:
    # 7B in BF16 on a 24 GB A10: 13.5 GB of weights leave room for few 4k-token sequences; INT4 AWQ holds more
    chat = {"model": "meta-llama/Llama-2-7b-hf",
            "deployment": {"gpu": "a10", "weight_dtype": "bf16", "engine": "vllm"},
            "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50}}
    bf16 = predict(client, chat)
    awq = predict(client, with_(chat, "deployment", weight_dtype="int4-awq"))
    assert bf16["fits"] and awq["fits"]
    assert bf16["predicted"]["max_concurrency"] < 50
    assert any("exceed" in n and "queue" in n for n in bf16["notes"])
    assert awq["predicted"]["max_concurrency"] > bf16["predicted"]["max_concurrency"]
    assert awq["predicted"]["ttft_ms"] < bf16["predicted"]["ttft_ms"]


def test_70b_bf16_on_one_h100_does_not_fit_and_says_why(client: TestClient) -> None:
    body = predict(client, {"model": "meta-llama/Llama-3.1-70B",
                            "deployment": {"gpu": "h100-sxm", "weight_dtype": "bf16"},
                            "workload": {"input_tokens": 512, "output_tokens": 128, "concurrency": 1}})
    assert body["fits"] is False and body["predicted"] is None
    assert body["memory_per_gpu_gb"]["weights"] > 80
    assert "does not fit" in body["notes"][0]


def test_request_rate_beyond_capacity_is_flagged(client: TestClient) -> None:
    body = predict(client, with_(EXAMPLE, "workload", concurrency=None, request_rate=10_000))
    assert any("exceeds the capacity" in n for n in body["notes"])


def test_inline_model_is_predicted_like_its_catalog_twin(client: TestClient) -> None:
    # Llama-3.1-8B's config.json fields, given inline, must give the same memory as the catalog entry
    spec = {"num_layers": 32, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
            "num_kv_heads": 8, "vocab_size": 128256, "total_params_b": 8.03}
    base = {"deployment": {"gpu": "l4", "weight_dtype": "fp8"},
            "workload": {"input_tokens": 1000, "output_tokens": 200, "concurrency": 8}}
    twin = predict(client, {"model": "meta-llama/Llama-3.1-8B", **base})
    inline = predict(client, {"model_spec": spec, **base})
    assert inline["memory_per_gpu_gb"]["kv_bytes_per_token"] == twin["memory_per_gpu_gb"]["kv_bytes_per_token"]
    assert inline["memory_per_gpu_gb"]["weights"] == _approx(twin["memory_per_gpu_gb"]["weights"], 0.01)


def problem(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()


def test_unknown_gpu_names_the_field_and_the_choices(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", gpu="h100"))
    assert err["field"] == ["deployment", "gpu"]
    assert "h100-sxm" in err["valid"]


def test_trtllm_on_amd_is_refused(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", gpu="mi300x", weight_dtype="bf16", kv_dtype="auto"))
    assert err["field"] == ["deployment", "engine"]
    assert "vllm" in err["detail"]


def test_fp8_on_ampere_is_refused_with_what_runs(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", gpu="a100-80gb-sxm", kv_dtype="auto"))
    assert err["field"] == ["deployment", "weight_dtype"]
    assert "fp8" not in err["valid"] and err["valid"]


def test_tp_must_divide_the_heads(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", tp=3, gpu_count=3))
    assert err["field"] == ["deployment", "tp"]


def test_layout_must_multiply_to_the_gpu_count(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", gpu_count=8))
    assert err["field"] == ["deployment"]
    assert "tp x pp x dp x replicas" in err["detail"]


def test_workload_needs_exactly_one_load(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "workload", request_rate=3.0))
    assert err["field"] == ["workload"]
    assert "exactly one" in err["detail"]


def test_engine_choices_are_listed(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", engine="sglang"))
    assert err["field"] == ["deployment", "engine"]
    assert "vllm" in str(err["errors"][0].get("valid", "")) or "vllm" in err["detail"]


# --- percentiles from the scheduler simulation -----------------------------------------------------

RATE = with_(EXAMPLE, "workload", concurrency=None, request_rate=4.0)


def test_percentiles_come_from_a_reproducible_simulation(client: TestClient) -> None:
    first, again = predict(client, RATE), predict(client, RATE)
    assert first["predicted"] == again["predicted"]                  # same seed, same answer
    p = first["predicted"]
    sim = p["simulation"]
    assert "simulated: 1000 requests (seed 0)" in p["percentile_method"]
    assert sim["requests"] == 1000 and sim["seed"] == 0 and sim["warmup_requests"] > 0
    assert (p["ttft_p50_ms"], p["ttft_p95_ms"], p["ttft_p99_ms"]) == (
        sim["ttft_ms"]["p50"], sim["ttft_ms"]["p95"], sim["ttft_ms"]["p99"])
    assert p["tpot_p99_ms"] == sim["tpot_ms"]["p99"] and p["e2e_p95_ms"] == sim["e2e_ms"]["p95"]
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"):
        s = sim[name]
        assert 0 <= s["p50"] <= s["p90"] <= s["p95"] <= s["p99"], name
    # Poisson arrivals: TTFT varies; a replica at 4 req/s completes about that many
    assert sim["ttft_ms"]["p99"] > sim["ttft_ms"]["p50"]
    assert sim["replica_requests_per_s"] == _approx(4.0, 0.1)
    other = predict(client, {**RATE, "simulation": {"seed": 7, "requests": 500}})["predicted"]
    assert other["simulation"]["seed"] == 7 and other["simulation"]["requests"] == 500
    assert other["ttft_p99_ms"] != p["ttft_p99_ms"]
    # every figure from the one simulation: its means too
    assert (other["ttft_ms"], other["tpot_ms"]) == (other["simulation"]["ttft_ms"]["mean"],
                                                    other["simulation"]["tpot_ms"]["mean"])


def test_simulation_can_be_turned_off(client: TestClient) -> None:
    p = predict(client, {**RATE, "simulation": {"enabled": False}})["predicted"]
    assert p["simulation"] is None and p["percentile_method"].startswith("analytic")
    assert p["tpot_p99_ms"] == p["tpot_ms"]


def test_spread_of_output_lengths_widens_the_e2e_tail(client: TestClient) -> None:
    base = with_(RATE, "workload", request_rate=2.0, max_context_tokens=8192)
    fixed = predict(client, base)["predicted"]
    spread = predict(client, with_(base, "workload", output_distribution={"std_tokens": 128}))["predicted"]
    # 128 +- 128 tokens (lognormal): the slowest requests generate several times the mean
    assert spread["simulation"]["e2e_ms"]["p99"] > 2 * fixed["simulation"]["e2e_ms"]["p99"]
    for p in (fixed, spread):
        e2e = p["simulation"]["e2e_ms"]
        assert p["e2e_ms"] == e2e["mean"] and p["e2e_p95_ms"] == e2e["p95"]
    hist = {"histogram": [{"tokens": 1024, "weight": 3}, {"tokens": 4096, "weight": 1}]}    # mean 1792
    body = predict(client, with_(base, "workload", input_tokens=1792, input_distribution=hist))
    assert body["predicted"]["simulation"]["clipped_requests"] == 0
    assert body["predicted"]["simulation"]["ttft_ms"]["p99"] > 1.5 * body["predicted"]["simulation"]["ttft_ms"]["p50"]


def test_histogram_mean_must_match_the_stated_length(client: TestClient) -> None:
    hist = {"histogram": [{"tokens": 100, "weight": 1}, {"tokens": 300, "weight": 1}]}
    err = problem(client, with_(EXAMPLE, "workload", input_distribution=hist))
    assert err["field"][0] == "workload" and "mean 200.0" in err["detail"]
    both = {"std_tokens": 5, "histogram": hist["histogram"]}
    err = problem(client, with_(EXAMPLE, "workload", output_distribution=both))
    assert "exactly one of std_tokens or histogram" in err["detail"]


def test_lengths_beyond_max_model_len_are_cut_and_said(client: TestClient) -> None:
    body = predict(client, with_(RATE, "workload", output_distribution={"std_tokens": 256}))
    sim = body["predicted"]["simulation"]
    assert sim["clipped_requests"] > 0
    assert any("cut to max_model_len 2176" in n for n in body["notes"])


def test_more_clients_than_a_simulation_takes_stay_analytic(client: TestClient) -> None:
    body = predict(client, with_(EXAMPLE, "workload", concurrency=50_000))
    assert body["predicted"]["simulation"] is None
    assert any(n.startswith("not simulated: 50000 clients per replica") for n in body["notes"])


def test_trtllm_without_chunked_prefill_makes_long_prompts_wait(client: TestClient) -> None:
    # 8190-token prompts in the default 8192-token budget: a whole prompt fits only beside at most two
    # decodes, so with chunking off it waits for the batch to drain (measured: p50 TTFT 6.2 s against 2.6 s)
    body = with_(EXAMPLE, "workload", input_tokens=8190, concurrency=8)
    chunked = predict(client, body)["predicted"]["simulation"]
    whole = predict(client, with_(body, "deployment", engine_args={"enable_chunked_prefill": False}))
    sim = whole["predicted"]["simulation"]
    assert "whole prompts only" in sim["scheduler"] and "prompts chunked" in chunked["scheduler"]
    assert sim["ttft_ms"]["p50"] > 2 * chunked["ttft_ms"]["p50"]
    assert sim["batch_per_replica"] < chunked["batch_per_replica"]


def test_one_token_outputs_have_no_simulated_tpot(client: TestClient) -> None:
    p = predict(client, with_(RATE, "workload", output_tokens=1))["predicted"]
    sim = p["simulation"]
    assert sim["tpot_ms"] is None and sim["itl_ms"] is None and sim["ttft_ms"]["p99"] > 0
    assert p["tpot_p99_ms"] == p["tpot_ms"]                          # no gap to simulate: the analytic figure


def test_a_named_checkpoint_is_served_and_an_unknown_one_is_refused_with_the_choices(client: TestClient) -> None:
    body = {"model": "deepseek-ai/DeepSeek-R1",
            "deployment": {"gpu": "b200", "tp": 8, "weight_dtype": "nvfp4", "engine": "trtllm",
                           "checkpoint": "nvidia/DeepSeek-R1-FP4"},
            "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 16}}
    launch = predict(client, body)["launch"]
    assert launch["args"][0] == "nvidia/DeepSeek-R1-FP4" and not launch["steps"]
    bad = client.post("/v1/predictions", json=with_(body, "deployment", checkpoint="amd/DeepSeek-R1-MXFP4"))
    assert bad.status_code == 422 and bad.json()["field"] == ["deployment", "checkpoint"]
    assert "nvidia/DeepSeek-R1-FP4" in bad.json()["valid"]


R1_DP8: dict[str, Any] = {
    "model": "deepseek-ai/DeepSeek-R1",
    "deployment": {"gpu": "h200-sxm", "gpu_count": 8, "tp": 1, "dp": 8, "ep": 8, "weight_dtype": "fp8",
                   "kv_dtype": "fp8", "engine": "trtllm"},
    "workload": {"input_tokens": 1024, "output_tokens": 1024, "concurrency": 1024},
}


def test_r1_attention_dp_and_ep_on_8_h200_hold_the_experts_once_and_kv_per_rank(client: TestClient) -> None:
    dp8 = predict(client, R1_DP8)
    tp8 = predict(client, with_(R1_DP8, "deployment", gpu_count=8, tp=8, dp=1, ep=None))
    assert dp8["fits"] and tp8["fits"]
    # docs/moe_layouts.md by hand: 100,817,025,024 B of FP8 weights per GPU at tp 1 dp 8 ep 8 (attention and
    # dense parts replicated per DP rank, the routed experts split over the 8 GPUs)
    assert dp8["memory_per_gpu_gb"]["weights"] == _approx(100.817, 0.01)
    # and 85,119,449,088 B at tp 8 (the MLA down-projections whole on every GPU)
    assert tp8["memory_per_gpu_gb"]["weights"] == _approx(85.119, 0.01)
    # each GPU keeps the KV of its own rank's sequences only: several times the sequences of tp 8 (~5.7 by hand)
    assert dp8["predicted"]["max_concurrency"] > 4 * tp8["predicted"]["max_concurrency"]
    # 1024 clients: more than tp 8 holds at once, within what dp 8 holds: the DP layout serves more tokens
    assert dp8["predicted"]["output_tok_s"] > tp8["predicted"]["output_tok_s"]
    assert "enable_attention_dp: true" in dp8["launch"]["files"]["extra_llm_api_options.yaml"]


def test_layouts_that_cannot_run_are_refused_naming_the_field_and_choices(client: TestClient) -> None:
    for dep, field, valid in (({"tp": 1, "dp": 8, "ep": 3}, "ep", ["1", "2", "4", "8"]),
                              ({"tp": 2, "dp": 4, "ep": 4, "engine": "vllm"}, "ep", ["1", "8"]),
                              ({"tp": 2, "dp": 4, "ep": 8}, "tp", ["1"])):
        r = client.post("/v1/predictions", json=with_(R1_DP8, "deployment", gpu_count=None, **dep))
        assert r.status_code == 422, r.text
        assert r.json()["field"] == ["deployment", field] and r.json()["valid"] == valid
