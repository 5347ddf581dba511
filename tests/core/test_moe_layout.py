"""Hand-computed memory and all-to-all traffic of DeepSeek-R1 FP8 on 8 x H200 at tp 8 and at tp 1 / dp 8 / ep 8.

DeepSeek-R1 config.json (https://huggingface.co/deepseek-ai/DeepSeek-R1, the catalog's copy:
ai-dynamo/aiconfigurator model_configs/deepseek-ai--DeepSeek-R1_config.json):
  hidden_size 7168, num_hidden_layers 61, first_k_dense_replace 3 (so 58 MoE layers), intermediate_size 18432,
  moe_intermediate_size 2048, n_routed_experts 256, n_shared_experts 1, num_experts_per_tok 8,
  num_attention_heads 128, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
  v_head_dim 128, vocab_size 129280, tie_word_embeddings false; weights FP8 (quantization_config fp8), kept
  BF16: embed_tokens, lm_head, router gate and norms.
vLLM DeepseekV2MLAAttention (vllm/model_executor/models/deepseek_v2.py): q_a_proj and kv_a_proj_with_mqa are
ReplicatedLinear (whole on every TP rank); q_b_proj, kv_b_proj (column) and o_proj (row) are split by TP.

Per layer, elements:
  q_a_proj   7168 x 1536                       =  11,010,048  (replicated)
  kv_a_proj  7168 x (512 + 64)                 =   4,128,768  (replicated)
  q_b_proj   1536 x 128 x (128 + 64)           =  37,748,736
  kv_b_proj  512 x 128 x (128 + 128)           =  16,777,216
  o_proj     128 x 128 x 7168                  = 117,440,512
  norms      2 x 7168 + 1536 + 512             =      16,384
  dense MLP  3 x 7168 x 18432                  = 396,361,728  (3 layers)
  one expert 3 x 7168 x 2048                   =  44,040,192  (256 routed + 1 shared, 58 layers)
  router     7168 x 256                        =   1,835,008  (58 layers)
Model: attention replicated 15,138,816 x 61 = 923,467,776; attention split 171,966,464 x 61 = 10,489,954,304;
dense 1,189,085,184; shared 58 x 44,040,192 = 2,554,331,136; routed 58 x 256 x 44,040,192 = 653,908,770,816;
router 106,430,464; embedding = lm_head = 129280 x 7168 = 926,679,040; norms 61 x 16,384 + 7168 = 1,006,592.
Total 671,026,404,352 (the catalog's 671.03B).
"""

from __future__ import annotations

import math

import pytest

from gpu_catalog.loader import load_catalog
from gpu_catalog.schema import ModelSpec
from service.core.moe_layout import (
    Layout,
    LayoutError,
    all_to_all_bytes_per_step_per_rank,
    kv_bytes_per_sequence_per_rank,
    kv_bytes_per_token_per_rank,
    mtp_params,
    param_split,
    remote_groups_per_token,
    routed_expert_bytes_read_per_step_per_rank,
    routed_experts_touched_per_step,
    weight_bytes_per_rank,
)

FP8_BITS = 8  # dtypes.yaml fp8 bits_per_weight
H200_MEMORY_BYTES = 141e9  # gpus.yaml h200 memory_gb


@pytest.fixture(scope="module")
def models() -> dict[str, ModelSpec]:
    return {m.id: m for m in load_catalog().models}


@pytest.fixture(scope="module")
def r1(models: dict[str, ModelSpec]) -> ModelSpec:
    return models["deepseek-ai/DeepSeek-R1"]


def test_mtp_module_from_the_config(r1: ModelSpec, models: dict[str, ModelSpec]) -> None:
    """DeepSeek-R1's one MTP module (config.json num_nextn_predict_layers 1) is an MoE layer of the model's kind
    plus eh_proj and three norms (DeepSeek-V3 report, arXiv 2412.19437 section 2.2), by hand from the per-layer
    figures above:
      attention 15,138,816 + 171,966,464 = 187,105,280; layer norms 16,384; shared expert 44,040,192;
      router 1,835,008; eh_proj 2 x 7168 x 7168 = 102,760,448; enorm, hnorm, shared-head norm 3 x 7168 = 21,504
      -> dense 335,778,816; routed 256 x 44,040,192 = 11,274,289,152; total 11,610,067,968.
    The README's "14B of the Multi-Token Prediction (MTP) Module weights" also counts the checkpoint's copies of
    the embedding and output head (2 x 926,679,040): 13.46 B, which the engines share with the main model."""
    p = mtp_params(r1, 1)
    assert p.dense_params == 335_778_816
    assert p.routed_expert_params == 11_274_289_152
    assert p.total_params == 11_610_067_968
    assert mtp_params(r1, 2).total_params == 2 * 11_610_067_968
    # a dense model's module is one dense layer (Llama-3.1-8B: 4096 x (2 x 4096 + 2 x 1024) attention,
    # 3 x 4096 x 14336 MLP, 2 x 4096 layer norms; eh_proj 2 x 4096 x 4096 and 3 x 4096 norms), no experts
    llama = mtp_params(models["meta-llama/Llama-3.1-8B"], 1)
    assert llama.routed_expert_params == 0
    assert llama.dense_params == 4096 * (2 * 4096 + 2 * 1024) + 3 * 4096 * 14336 + 2 * 4096 + 2 * 4096 * 4096 + 3 * 4096


def test_parameter_split_from_the_config(r1: ModelSpec) -> None:
    s = param_split(r1)
    assert s.attn_replicated_params == 923_467_776
    assert s.attn_split_params == 10_489_954_304
    assert s.dense_mlp_params == 1_189_085_184
    assert s.shared_expert_params == 2_554_331_136
    assert s.routed_expert_params == 653_908_770_816
    assert s.router_params == 106_430_464
    assert s.embedding_params == s.lm_head_params == 926_679_040
    assert s.norm_params == 1_006_592
    assert s.other_params == 0
    assert s.moe_layers == 58
    assert s.total_params == 671_026_404_352


def test_r1_fp8_tp8_weights_per_gpu(r1: ModelSpec) -> None:
    # tp 8: everything split by 8 except the MLA down-projections, router gates and norms.
    #   attention  923,467,776 + 10,489,954,304 / 8        =  2,234,712,064 B (FP8, 1 B)
    #   dense      1,189,085,184 / 8                       =    148,635,648 B
    #   shared     2,554,331,136 / 8                       =    319,291,392 B
    #   routed     653,908,770,816 / 8                     = 81,738,596,352 B
    #   embed+head 2 x 926,679,040 x 2 B / 8               =    463,339,520 B (BF16)
    #   router+norm (106,430,464 + 1,006,592) x 2 B        =    214,874,112 B
    #   total                                              = 85,119,449,088 B (85.1 GB of the H200's 141)
    w = weight_bytes_per_rank(r1, Layout(tp=8), FP8_BITS)
    assert w.attention_bytes == 2_234_712_064
    assert w.dense_mlp_bytes == 148_635_648
    assert w.shared_expert_bytes == 319_291_392
    assert w.routed_expert_bytes == 81_738_596_352
    assert w.embedding_bytes == 463_339_520
    assert w.router_norm_bytes == 214_874_112
    assert w.total_bytes == 85_119_449_088
    # expert parallelism moves whole experts instead of slicing them: the same bytes per GPU
    assert weight_bytes_per_rank(r1, Layout(tp=8, ep=8), FP8_BITS) == w


def test_r1_fp8_dp8_ep8_weights_per_gpu(r1: ModelSpec) -> None:
    # tp 1, dp 8, ep 8: each GPU is a whole attention rank (attention, dense, shared, embeddings replicated)
    # and holds 256 / 8 = 32 whole routed experts.
    #   attention  923,467,776 + 10,489,954,304            = 11,413,422,080 B
    #   dense                                              =  1,189,085,184 B
    #   shared                                             =  2,554,331,136 B
    #   routed     653,908,770,816 / 8                     = 81,738,596,352 B
    #   embed+head 2 x 926,679,040 x 2 B                   =  3,706,716,160 B
    #   router+norm                                        =    214,874,112 B
    #   total                                              = 100,817,025,024 B (15.7 GB more than tp 8)
    w = weight_bytes_per_rank(r1, Layout(tp=1, dp=8, ep=8), FP8_BITS)
    assert w.attention_bytes == 11_413_422_080
    assert w.dense_mlp_bytes == 1_189_085_184
    assert w.shared_expert_bytes == 2_554_331_136
    assert w.routed_expert_bytes == 81_738_596_352
    assert w.embedding_bytes == 3_706_716_160
    assert w.total_bytes == 100_817_025_024
    assert w.total_bytes - weight_bytes_per_rank(r1, Layout(tp=8), FP8_BITS).total_bytes == 15_697_575_936
    assert w.total_bytes < H200_MEMORY_BYTES


def test_r1_kv_per_rank(r1: ModelSpec) -> None:
    # MLA keeps kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 elements per token and layer, whole on every
    # TP rank: 576 x 61 layers x 1 B (FP8 KV) = 35,136 B per token on each GPU that runs the sequence.
    assert kv_bytes_per_token_per_rank(r1, Layout(tp=8), 8) == 35_136
    assert kv_bytes_per_token_per_rank(r1, Layout(tp=1, dp=8, ep=8), 8) == 35_136
    assert kv_bytes_per_token_per_rank(r1, Layout(tp=8), 16) == 70_272
    # A 4096-token sequence: 35,136 x 4096 = 143,917,056 B on each of the 8 GPUs at tp 8, on 1 GPU at dp 8:
    # per token of the replica's batch the GPUs hold 8 x 35,136 = 281,088 B at tp 8 and 35,136 B at dp 8.
    seq = kv_bytes_per_sequence_per_rank(r1, Layout(tp=8), 8, 4096)
    assert seq == 143_917_056
    assert seq * Layout(tp=8).gpus == 8 * kv_bytes_per_sequence_per_rank(r1, Layout(tp=1, dp=8, ep=8), 8, 4096)


def test_r1_all_to_all_per_step(r1: ModelSpec) -> None:
    # dp 8 / ep 8, 64 decoding sequences per DP rank (= per GPU at tp 1), BF16 dispatch and combine:
    # each token goes to its 8 experts, 7/8 of them on other GPUs: 7 copies of 7168 x (2 + 2) B per MoE layer:
    # 64 x 7 x 7168 x 4 = 12,845,056 B per layer x 58 MoE layers = 745,013,248 B sent per GPU per step.
    assert remote_groups_per_token(r1, Layout(tp=1, dp=8, ep=8)) == 7
    assert all_to_all_bytes_per_step_per_rank(r1, Layout(tp=1, dp=8, ep=8), 64) == 745_013_248
    # FP8 dispatch (1 B) with BF16 combine: 64 x 7 x 7168 x 3 x 58 = 558,759,936 B
    assert all_to_all_bytes_per_step_per_rank(r1, Layout(tp=1, dp=8, ep=8), 64, dispatch_bytes_per_element=1) == (
        558_759_936
    )
    # One copy per destination GPU: 7 x (1 - C(224, 8) / C(256, 8)) = 4.633 copies instead of 7.
    expected = 7 * (1 - math.comb(224, 8) / math.comb(256, 8))
    assert remote_groups_per_token(r1, Layout(tp=1, dp=8, ep=8), "per_rank") == pytest.approx(expected)
    assert expected == pytest.approx(4.6328, abs=1e-4)
    # tp 8 without EP: experts sliced by width, no all-to-all (the MoE output is all-reduced like a dense MLP).
    assert all_to_all_bytes_per_step_per_rank(r1, Layout(tp=8), 64) == 0
    # tp 8 with EP 8: the 64 tokens of the one DP rank are split 8 per GPU before dispatch: 1/8 of the above.
    assert all_to_all_bytes_per_step_per_rank(r1, Layout(tp=8, ep=8), 64) == 745_013_248 / 8


def test_gqa_kv_heads_replicate_beyond_their_count(models: dict[str, ModelSpec]) -> None:
    # Qwen3-235B-A22B: 4 KV heads x 128 head dim x 94 layers. tp 4: 1 head per GPU, 2 x 1 x 128 x 94 x 2 B =
    # 48,128 B per token; tp 8: still 1 head per GPU (heads replicate), 48,128 B.
    q = models["Qwen/Qwen3-235B-A22B"]
    assert kv_bytes_per_token_per_rank(q, Layout(tp=4), 16) == 48_128
    assert kv_bytes_per_token_per_rank(q, Layout(tp=8), 16) == 48_128
    assert kv_bytes_per_token_per_rank(q, Layout(tp=2, dp=4, ep=8), 16) == 96_256


def test_every_moe_model_splits_close_to_its_stated_total(models: dict[str, ModelSpec]) -> None:
    for m in models.values():
        if m.num_experts:
            assert param_split(m).total_params == pytest.approx(m.total_params_b * 1e9, rel=0.01), m.id


@pytest.mark.parametrize(
    ("model_id", "layout", "field", "words"),
    [
        ("deepseek-ai/DeepSeek-R1", Layout(tp=2, dp=2, ep=3), "ep", "must divide tp x dp = 4; valid: [1, 2, 4]"),
        ("meta-llama/Llama-3.1-8B", Layout(tp=2, ep=2), "ep", "dense"),
        ("mistralai/Mixtral-8x7B-v0.1", Layout(tp=16, ep=16), "ep", "must divide the 8 routed experts"),
        ("deepseek-ai/DeepSeek-R1", Layout(tp=8, dp=0), "dp", "positive"),
        ("deepseek-ai/DeepSeek-R1", Layout(pp=62), "pp", "at most num_layers = 61"),
    ],
)
def test_impossible_layouts_name_the_field(
    models: dict[str, ModelSpec], model_id: str, layout: Layout, field: str, words: str
) -> None:
    with pytest.raises(LayoutError) as err:
        weight_bytes_per_rank(models[model_id], layout, FP8_BITS)
    assert err.value.field == field
    assert words in str(err.value)


def test_parameters_the_config_cannot_place_count_as_split_linear_weights(r1: ModelSpec) -> None:
    # A stated total of 681.026404B is 9,999,999,648 above the config-derived 671,026,404,352 (more than 1%):
    # the rest counts as TP-split linear weights, 9,999,999,648 / 8 GPUs x 1 B per GPU at tp 8. 0.07B (0.01%)
    # above is rounding of the stated figure and adds nothing.
    bigger = r1.model_copy(update={"total_params_b": 681.026404})
    s = param_split(bigger)
    assert s.other_params == pytest.approx(9_999_999_648)
    assert weight_bytes_per_rank(bigger, Layout(tp=8), FP8_BITS).other_bytes == pytest.approx(9_999_999_648 / 8)
    assert param_split(r1.model_copy(update={"total_params_b": 671.1})).other_params == 0


def test_one_gpu_holds_the_whole_model_and_experts_are_never_lost(models: dict[str, ModelSpec]) -> None:
    for m in models.values():
        if not m.num_experts:
            continue
        s = param_split(m)
        whole = weight_bytes_per_rank(m, Layout(), FP8_BITS)
        unquantised = s.embedding_params + s.lm_head_params + s.router_params + s.norm_params
        assert whole.total_bytes == pytest.approx(s.total_params - unquantised + 2 * unquantised), m.id
        for layout in (Layout(tp=2, dp=2, ep=4), Layout(tp=1, dp=8, ep=8), Layout(tp=4, dp=2, ep=2)):
            if m.num_experts % layout.ep:
                continue
            per_gpu = weight_bytes_per_rank(m, layout, FP8_BITS).routed_expert_bytes
            assert per_gpu * layout.gpus == pytest.approx(s.routed_expert_params), (m.id, layout)


def test_r1_routed_expert_bytes_read_per_step(r1: ModelSpec) -> None:
    # dp 8 / ep 8, 1 decoding token per DP rank: 8 tokens x 8 experts each over 256 experts touch
    # 256 x (1 - (1 - 8/256)^8) = 256 x (1 - 0.77570) = 57.42 experts per MoE layer, 7.18 per GPU:
    # 57.42 / 8 x 44,040,192 x 1 B x 58 layers = 18,333,976,991 B read per GPU per step.
    layout = Layout(tp=1, dp=8, ep=8)
    assert routed_experts_touched_per_step(r1, layout, 1) == pytest.approx(57.4208, abs=1e-4)
    assert routed_expert_bytes_read_per_step_per_rank(r1, layout, 1, FP8_BITS) == pytest.approx(
        18_333_976_991, rel=1e-9
    )
    # 64 tokens per DP rank (512 in the MoE layers) touch all 256: every routed weight a GPU holds is read.
    assert routed_expert_bytes_read_per_step_per_rank(r1, layout, 64, FP8_BITS) == pytest.approx(
        weight_bytes_per_rank(r1, layout, FP8_BITS).routed_expert_bytes, rel=1e-6
    )
    # tp 8 (one DP rank): 8 tokens touch the same 57.42 experts, each split in width over the 8 GPUs.
    assert routed_expert_bytes_read_per_step_per_rank(r1, Layout(tp=8), 8, FP8_BITS) == pytest.approx(
        18_333_976_991, rel=1e-9
    )
    assert routed_expert_bytes_read_per_step_per_rank(r1, Layout(tp=8), 0, FP8_BITS) == 0
