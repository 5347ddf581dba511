from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_catalog.levers import METHODS, load_levers, mean_accepted_length_tok
from gpu_catalog.loader import DATA_DIR, CatalogError, load_catalog


def test_shipped_levers_validate_against_the_catalog() -> None:
    levers = load_levers()
    catalog = load_catalog()
    assert len(levers.measurements) >= 7
    assert all(m.source.startswith("http") and m.quote for m in levers.measurements)
    # Every GPU of the catalog has a host link; every lever row names a known engine version.
    assert {g.gpu for g in levers.gpu_host_links} == {g.id for g in catalog.gpus}
    assert {(e.engine, e.version) for e in levers.engine_levers} == {
        (e.id, v) for e in catalog.engines for v in e.versions
    }


def test_loading_twice_gives_the_same_levers() -> None:
    first, second = load_levers(), load_levers()
    assert first == second
    assert first.measurements[0] is not second.measurements[0]


def test_defaults_pick_the_model_figure_then_the_method_figure() -> None:
    levers = load_levers()
    qwen = levers.default_acceptance("eagle3", "Qwen/Qwen3-8B")
    assert qwen is not None and qwen.acceptance_rate == 0.625
    # A model without its own figure gets the method's: EAGLE-3 on Llama-3.1-8B, MT-Bench, k = 3.
    other = levers.default_acceptance("eagle3", "mistralai/Mistral-7B-Instruct-v0.3")
    assert other is not None and other.id == "eagle3-llama-3.1-8b-mtbench-vllm-k3"
    # The DeepSeek-V3 report: 85-90 % acceptance of the second token, one MTP module (k = 1).
    mtp = levers.default_acceptance("mtp", "deepseek-ai/DeepSeek-V3")
    assert mtp is not None and (mtp.acceptance_rate, mtp.num_speculative_tokens) == (0.85, 1)
    # No sourced chat figure for n-gram or draft models: the request must give one.
    assert levers.default_acceptance("ngram", None) is None
    assert levers.default_acceptance("draft_model", "meta-llama/Llama-3.1-70B") is None
    assert set(METHODS) == {d.method for d in levers.defaults}


def _types() -> dict[str, str]:
    return {m.id: m.model_type for m in load_catalog().models}


@pytest.mark.parametrize(("method", "model", "k", "want_a", "want_ids", "basis"), [
    # exact hits: the DeepSeek-V3 report (0.85, k = 1); nebius's tau 3.20 at k = 7 (0.707)
    ("mtp", "deepseek-ai/DeepSeek-V3", 1, 0.85, ["mtp-deepseek-v3-report-k1"], "measured"),
    ("mtp", "deepseek-ai/DeepSeek-V3", 7, 0.707, ["mtp-deepseek-v3-0324-original-k7"], "measured"),
    ("eagle3", "meta-llama/Llama-3.1-8B", 3, 0.717, ["eagle3-llama-3.1-8b-mtbench-vllm-k3"], "measured"),
    # R1 shares V3's MTP module: its own k = 1 row, then V3's k = 7 row; 0.85 + (3 - 1) / (7 - 1) x (0.707 - 0.85)
    ("mtp", "deepseek-ai/DeepSeek-R1", 3, 0.85 - 2 / 6 * 0.143,
     ["mtp-deepseek-r1-report-k1", "mtp-deepseek-v3-0324-original-k7"], "interpolated"),
    ("mtp", "deepseek-ai/DeepSeek-R1", 1, 0.85, ["mtp-deepseek-r1-report-k1"], "measured"),
    # the k = 7 figure of Llama-3.1-8B is of another head (yuhuili's, not the RedHatAI head the default names):
    # not mixed in, so k = 5 holds the k = 3 figure flat; a model without its own figure takes the method's row
    ("eagle3", "meta-llama/Llama-3.1-8B", 5, 0.717, ["eagle3-llama-3.1-8b-mtbench-vllm-k3"], "flat_above"),
    ("eagle3", "mistralai/Mistral-7B-Instruct-v0.3", 5, 0.717, ["eagle3-llama-3.1-8b-mtbench-vllm-k3"],
     "flat_above"),
    # outside the measured k: the nearest end, held flat
    ("eagle3", "meta-llama/Llama-3.1-8B", 2, 0.717, ["eagle3-llama-3.1-8b-mtbench-vllm-k3"], "flat_below"),
    ("eagle3", "meta-llama/Llama-3.3-70B-Instruct", 3, 0.666, ["eagle3-llama-3.3-70b-mtbench-k7-t1"], "flat_below"),
    ("mtp", "deepseek-ai/DeepSeek-R1", 10, 0.707, ["mtp-deepseek-v3-0324-original-k7"], "flat_above"),
    ("eagle3", "Qwen/Qwen3-8B", 5, 0.625, ["eagle3-qwen3-8b-mtbench-vllm-k3"], "flat_above"),
])
def test_default_acceptance_follows_k_between_the_measurements(method: str, model: str, k: int, want_a: float,
                                                               want_ids: list[str], basis: str) -> None:
    got = load_levers().default_acceptance_at(method, model, k, _types())
    assert got is not None
    assert got.acceptance_rate == pytest.approx(want_a, abs=1e-12)
    assert [m.id for m in got.measurements] == want_ids
    assert got.basis == basis


def test_default_measurements_one_per_k_the_named_row_first() -> None:
    levers = load_levers()
    # V3 and R1 both have a k = 1 row (the same report figure): each model keeps the row its default names
    v3 = levers.default_measurements("mtp", "deepseek-ai/DeepSeek-V3", _types())
    r1 = levers.default_measurements("mtp", "deepseek-ai/DeepSeek-R1", _types())
    assert [(m.id, m.num_speculative_tokens) for m in v3] == [
        ("mtp-deepseek-v3-report-k1", 1), ("mtp-deepseek-v3-0324-original-k7", 7)]
    assert [m.id for m in r1] == ["mtp-deepseek-r1-report-k1", "mtp-deepseek-v3-0324-original-k7"]
    assert levers.default_acceptance_at("ngram", "meta-llama/Llama-3.1-8B", 5, _types()) is None
    assert levers.default_measurements("draft_model", None, _types()) == []


def test_host_link_bandwidth_per_direction() -> None:
    levers = load_levers()
    # PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s; NVLink-C2C: 900 GB/s both ways / 2.
    assert levers.host_link_bw_gb_s_per_direction("a100-80gb-sxm") == 31.5
    assert levers.host_link_bw_gb_s_per_direction("h100-sxm") == 63.0
    assert levers.host_link_bw_gb_s_per_direction("gh200-96gb") == 450.0
    assert levers.host_link_bw_gb_s_per_direction("no-such-gpu") is None


def test_engine_lever_flags() -> None:
    levers = load_levers()
    vllm_old, vllm_new, trt = (
        levers.engine("vllm", "0.11.0"),
        levers.engine("vllm", "0.34.0"),
        levers.engine("trtllm", "1.2"),
    )
    assert vllm_old is not None and vllm_new is not None and trt is not None
    assert vllm_old.speculative.flag == "--speculative-config"
    assert vllm_old.cpu_offload is not None and vllm_old.cpu_offload.flag == "--cpu-offload-gb"
    assert vllm_old.prefix_cache.default is True and vllm_new.prefix_cache.default is None
    assert trt.prefix_cache.key == "kv_cache_config.enable_block_reuse" and trt.prefix_cache.default is True
    assert trt.speculative.methods == {
        "eagle3": "Eagle3",
        "mtp": "MTP",
        "ngram": "NGram",
        "draft_model": "Draft_Target",
    }
    assert trt.cpu_offload is None


def test_mean_accepted_length_by_hand() -> None:
    # k = 3, a = 0.5: 1 + 0.5 + 0.25 + 0.125 = 1.875; a = 1: every draft accepted, k + 1 tokens; a = 0: 1 token.
    assert mean_accepted_length_tok(0.5, 3) == pytest.approx(1.875)
    assert mean_accepted_length_tok(1.0, 3) == 4.0
    assert mean_accepted_length_tok(0.0, 3) == 1.0


def _write_edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data, ignore=shutil.ignore_patterns("benchmarks"))
    raw = yaml.safe_load((data / "levers.yaml").read_text())
    edit(raw)
    (data / "levers.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return data


def _set(section: str, row: int, field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw[section][row][field] = value

    return edit


def _set_nested(row: int, lever: str, field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["engine_levers"][row][lever][field] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "row", "field", "message"),
    [
        # 0.80 per token at k = 3 gives 2.952 tokens per step, not the quoted 2.60.
        (_set("speculative_measurements", 0, "acceptance_rate", 0.80), 1, None, "not the quoted 2.6"),
        (
            _set("speculative_measurements", 1, "model", "Qwen/Qwen3-8B-Base"),
            2,
            "speculative_measurements.model",
            "not a catalog model id",
        ),
        (_set("speculative_defaults", 0, "measurement", "nope"), 1, "speculative_defaults.measurement", "unknown"),
        (
            _set("speculative_defaults", 0, "measurement", "mtp-deepseek-v3-report-k1"),
            1,
            "speculative_defaults.measurement",
            "measures mtp",
        ),
        (_set("gpu_host_links", 0, "gpu", "t5"), 1, "gpu_host_links.gpu", "unknown GPU 't5'"),
        # T4's 32 GB/s both ways against PCIe 5.0's 2 x 63.
        (_set("gpu_host_links", 0, "link", "pcie-gen5-x16"), 1, "gpu_host_links.link", "does not match"),
        (
            _set_nested(0, "cpu_offload", "flag", "--cpu-offload-gib"),
            1,
            "engine_levers.cpu_offload",
            "not in the vocabulary",
        ),
        (_set_nested(2, "prefix_cache", "default", False), 3, "engine_levers.prefix_cache", "differs"),
        (
            _set_nested(2, "speculative", "methods", {"eagle3": "EAGLE3"}),
            3,
            "engine_levers.speculative",
            "decoding_type_choices",
        ),
    ],
)
def test_bad_lever_data_is_named(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], row: int, field: str | None, message: str
) -> None:
    data = _write_edited(tmp_path, edit)
    with pytest.raises(CatalogError) as err:
        load_levers(data)
    assert err.value.file.endswith("levers.yaml")
    assert err.value.row == row
    if field is not None:
        assert err.value.field == field
    assert message in err.value.message


def test_a_method_without_a_default_row_is_rejected(tmp_path: Path) -> None:
    def drop_ngram(raw: dict[str, Any]) -> None:
        raw["speculative_defaults"] = [d for d in raw["speculative_defaults"] if d["method"] != "ngram"]

    with pytest.raises(CatalogError, match="no method-wide row"):
        load_levers(_write_edited(tmp_path, drop_ngram))
