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
