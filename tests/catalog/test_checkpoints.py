from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_catalog.checkpoints import CHECKPOINTS_FILE, PartBits, load_checkpoints
from gpu_catalog.loader import DATA_DIR, CatalogError, load_catalog


def test_every_entry_validates_against_the_catalog() -> None:
    cat = load_catalog()
    ckpts = load_checkpoints(catalog=cat)
    model_ids = {m.id for m in cat.models}
    dtype_ids = {d.id for d in cat.weight_dtypes}
    assert len(ckpts.native) >= 5
    assert len(ckpts.checkpoints) >= 20
    for entry in (*ckpts.native, *ckpts.checkpoints):
        assert entry.model in model_ids
        assert "https://" in entry.source
    assert {c.weight_dtype for c in ckpts.checkpoints} <= dtype_ids
    # a release format with no catalog dtype is named in its notes
    assert all(n.weight_dtype in dtype_ids or (n.weight_dtype is None and n.notes) for n in ckpts.native)
    repo_ids = [c.repo_id.lower() for c in ckpts.checkpoints]
    assert len(repo_ids) == len(set(repo_ids))


def test_releases_that_ship_quantised_weights() -> None:
    ckpts = load_checkpoints()
    assert ckpts.native_weight_dtype("deepseek-ai/DeepSeek-V3") == "fp8"
    assert ckpts.native_weight_dtype("deepseek-ai/DeepSeek-R1") == "fp8"
    assert ckpts.native_weight_dtype("openai/gpt-oss-120b") == "mxfp4"
    assert ckpts.native_weight_dtype("meta-llama/Llama-3.1-8B") is None
    # R1 is served as published at FP8, or from NVIDIA's NVFP4 and AMD's MXFP4 checkpoints; never as a 16-bit
    # release.
    assert ckpts.published_dtypes("deepseek-ai/DeepSeek-R1") == {"fp8", "nvfp4", "mxfp4"}
    assert "nvidia/DeepSeek-R1-FP4" in {c.repo_id for c in ckpts.for_model("deepseek-ai/DeepSeek-R1", "nvfp4")}
    assert ckpts.published_dtypes("huggyllama/llama-7b") == {"bf16", "fp16"}
    # Kimi-K2.5 ships INT4 weight-only routed experts (group-32 scales); beside that release, NVFP4 and MXFP4
    # checkpoints are published, and no 16-bit release.
    assert not ckpts.ships_16bit("moonshotai/Kimi-K2.5")
    assert ckpts.native_weight_dtype("moonshotai/Kimi-K2.5") == "int4-wo"
    assert ckpts.published_dtypes("moonshotai/Kimi-K2.5") == {"int4-wo", "nvfp4", "mxfp4"}
    found = ckpts.by_repo_id("QWEN/qwen3-235b-a22b-fp8")
    assert found is not None and (found.model, found.weight_dtype) == ("Qwen/Qwen3-235B-A22B", "fp8")


def test_loading_twice_changes_nothing() -> None:
    path = DATA_DIR / CHECKPOINTS_FILE
    before = path.read_bytes()
    first, second = load_checkpoints(), load_checkpoints()
    assert first == second
    assert path.read_bytes() == before


def _copy_with(tmp_path: Path, edit: Any) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst, ignore=shutil.ignore_patterns("benchmarks"))
    raw = yaml.safe_load((dst / CHECKPOINTS_FILE).read_text())
    edit(raw)
    (dst / CHECKPOINTS_FILE).write_text(yaml.safe_dump(raw))
    return dst


def _set(section: str, index: int, key: str, value: Any) -> Any:
    def edit(raw: dict[str, Any]) -> None:
        raw[section][index][key] = value

    return edit


@pytest.mark.parametrize(
    ("section", "index", "key", "value", "field", "words"),
    [
        ("checkpoints", 2, "weight_dtype", "fp6", "checkpoints.weight_dtype", "unknown weight dtype 'fp6'"),
        (
            "checkpoints",
            0,
            "model",
            "deepseek-ai/DeepSeek-R1-0528",
            "checkpoints.model",
            "alias of 'deepseek-ai/DeepSeek-R1'",
        ),
        ("native", 1, "model", "acme/NoSuchModel", "native.model", "unknown model"),
        ("native", 0, "weight_dtype", "bf16", "native.weight_dtype", "16-bit releases are the default"),
        ("checkpoints", 3, "repo_id", "not a repo id", "repo_id", "owner/name"),
        ("checkpoints", 1, "source", "a card somewhere", "source", "https://"),
        ("native", 4, "unquantised_dtype", "fp6", "native.unquantised_dtype", "unknown weight dtype 'fp6'"),
        ("native", 4, "bits_per_weight", 0, "bits_per_weight", "greater than 0"),
        ("native", 4, "quantised_parts", ["experts"], "quantised_parts.0", "routed_experts"),
    ],
)
def test_bad_entry_is_named_with_row_and_field(
    tmp_path: Path, section: str, index: int, key: str, value: Any, field: str | None, words: str
) -> None:
    data = _copy_with(tmp_path, _set(section, index, key, value))
    with pytest.raises(CatalogError) as err:
        load_checkpoints(data)
    assert err.value.file.endswith(CHECKPOINTS_FILE)
    assert err.value.row == index + 1
    assert err.value.field == field
    assert words in err.value.message


def test_release_format_without_dtype_needs_notes(tmp_path: Path) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["native"][0].update(weight_dtype=None, notes="")

    with pytest.raises(CatalogError, match="needs `notes` naming the format"):
        load_checkpoints(_copy_with(tmp_path, edit))


def test_parts_a_checkpoint_quantises() -> None:
    cat = load_catalog()
    ckpts = load_checkpoints(catalog=cat)
    bits = {d.id: d.bits_per_weight for d in cat.weight_dtypes}
    # gpt-oss ships MXFP4 routed experts beside BF16 attention (modules_to_not_convert)
    oss = ckpts.part_bits("openai/gpt-oss-120b", "mxfp4", bits)
    assert (oss.routed_experts, oss.attention) == (bits["mxfp4"], bits["bf16"])
    # Kimi-K2.5's release: INT4 routed experts at 4 + 16/32 bits, everything else BF16
    kimi = ckpts.part_bits("moonshotai/Kimi-K2.5", "int4-wo", bits)
    assert kimi == PartBits(attention=16.0, dense_mlp=16.0, shared_experts=16.0, routed_experts=4.5)
    # AMD's MXFP4 Kimi keeps attention in FP8
    assert ckpts.part_bits("moonshotai/Kimi-K2.5", "mxfp4", bits).attention == bits["fp8"]
    # no entry: an engine's quantisation step quantises every linear weight
    llama = ckpts.part_bits("meta-llama/Llama-3.1-8B", "int4-awq", bits)
    assert {llama.attention, llama.dense_mlp, llama.shared_experts, llama.routed_experts} == {bits["int4-awq"]}


def test_duplicate_repository_is_rejected(tmp_path: Path) -> None:
    def dup(raw: dict[str, Any]) -> None:
        raw["checkpoints"].append(dict(raw["checkpoints"][0], repo_id=raw["checkpoints"][0]["repo_id"].upper()))

    data = _copy_with(tmp_path, dup)
    with pytest.raises(CatalogError, match=r"duplicate checkpoints\.repo_id"):
        load_checkpoints(data)
