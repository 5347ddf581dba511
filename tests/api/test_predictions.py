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
    assert body["fits"] is True and body["model"] == "meta-llama/Llama-3.1-70B"
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
    assert "tp x pp x replicas" in err["detail"]


def test_workload_needs_exactly_one_load(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "workload", request_rate=3.0))
    assert err["field"] == ["workload"]
    assert "exactly one" in err["detail"]


def test_engine_choices_are_listed(client: TestClient) -> None:
    err = problem(client, with_(EXAMPLE, "deployment", engine="sglang"))
    assert err["field"] == ["deployment", "engine"]
    assert "vllm" in str(err["errors"][0].get("valid", "")) or "vllm" in err["detail"]
