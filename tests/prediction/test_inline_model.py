"""An inline architecture: parameter counts from its shapes, and the shapes that cannot be are refused."""

from __future__ import annotations

import pytest

from service.errors import InvalidRequest
from service.prediction.inline_model import inline_model_spec
from service.schemas.predictions import InlineModel

# Llama-3.1-8B's config.json shapes (8.03 B parameters, tied embeddings off)
LLAMA_8B = {"name": "my-8b", "num_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_kv_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072}


def test_dense_parameter_count_from_the_shapes() -> None:
    spec = inline_model_spec(InlineModel(**LLAMA_8B))
    assert spec.head_dim == 128 and spec.model_type == "inline"
    assert 7.9 < spec.total_params_b < 8.1 and spec.active_params_b == spec.total_params_b


def test_kv_heads_must_divide_the_heads() -> None:
    with pytest.raises(InvalidRequest) as err:
        inline_model_spec(InlineModel(**{**LLAMA_8B, "num_kv_heads": 5}))
    assert err.value.field == ["model_spec", "num_kv_heads"]


def test_experts_come_with_experts_per_token() -> None:
    with pytest.raises(InvalidRequest) as err:
        inline_model_spec(InlineModel(**{**LLAMA_8B, "num_experts": 8}))
    assert err.value.field == ["model_spec", "experts_per_token"]
