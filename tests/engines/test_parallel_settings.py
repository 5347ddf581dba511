"""Each engine's spelling of a parallel layout (tp, pp, dp, ep): the flags and YAML keys it emits exist in its
vocabularies, DeepSeek-R1's tp 1 / dp 8 / ep 8 on each engine, and the layouts an engine cannot express."""

from __future__ import annotations

import pytest

from gpu_catalog.loader import DATA_DIR, parse_yaml
from service.core.moe_layout import Layout, LayoutError
from service.engines.registry import engine_for


def _vocabulary(name: str) -> tuple[set[str], set[str]]:
    raw = parse_yaml((DATA_DIR / "engines" / f"{name}.yaml").read_text(encoding="utf-8"))
    flags = {s for f, spec in raw["flags"].items() for s in (f, *(spec or {}).get("aliases", []))}
    return flags, set(raw.get("yaml_keys", {}))


@pytest.mark.parametrize(
    ("vocabulary", "engine"),
    [
        ("vllm-0.11.0", "vllm"),
        ("vllm-0.34.0", "vllm"),
        ("trtllm-1.2", "trtllm"),
    ],
)
def test_layout_settings_exist_in_the_engine_vocabularies(vocabulary: str, engine: str) -> None:
    flags, yaml_keys = _vocabulary(vocabulary)
    for layout in (Layout(tp=8), Layout(tp=8, ep=8), Layout(tp=1, dp=8, ep=8), Layout(tp=4, pp=2)):
        s = engine_for(engine).parallel_settings(layout)
        assert set(s.flags) <= flags, vocabulary
        assert set(s.yaml_keys) <= yaml_keys, vocabulary


def test_r1_dp8_ep8_on_each_engine() -> None:
    layout = Layout(tp=1, dp=8, ep=8)
    vllm = engine_for("vllm").parallel_settings(layout)
    assert vllm.flags == {
        "--tensor-parallel-size": 1,
        "--pipeline-parallel-size": 1,
        "--data-parallel-size": 8,
        "--enable-expert-parallel": True,
    }
    trt = engine_for("trtllm").parallel_settings(layout)
    assert trt.flags == {"--tp_size": 8, "--pp_size": 1}
    assert trt.yaml_keys == {"moe_expert_parallel_size": 8, "moe_tensor_parallel_size": 1, "enable_attention_dp": True}
    # tp 8 without EP: vLLM slices the experts (no flag), TensorRT-LLM states moe_tensor_parallel_size 8.
    assert engine_for("vllm").parallel_settings(Layout(tp=8)).flags == {
        "--tensor-parallel-size": 8,
        "--pipeline-parallel-size": 1,
    }
    assert engine_for("trtllm").parallel_settings(Layout(tp=8)).yaml_keys == {
        "moe_expert_parallel_size": 1,
        "moe_tensor_parallel_size": 8,
    }


@pytest.mark.parametrize(
    ("engine", "layout", "field", "words"),
    [
        ("vllm", Layout(tp=2, dp=4, ep=4), "ep", "valid: [1, 8]"),
        ("trtllm", Layout(tp=2, dp=4, ep=8), "tp", "valid: [1]"),
    ],
)
def test_layouts_an_engine_cannot_express(engine: str, layout: Layout, field: str, words: str) -> None:
    with pytest.raises(LayoutError) as err:
        engine_for(engine).parallel_settings(layout)
    assert err.value.field == field
    assert words in str(err.value)
