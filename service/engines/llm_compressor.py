"""llm-compressor, vLLM's quantisation tool: the recipe per weight dtype, the script it runs, and the steps
that produce a compressed-tensors checkpoint vLLM reads without a --quantization flag."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from service.engines.base import Context
from service.engines.checkpoints import CHECKPOINT_SUFFIX, Checkpoint, output_dir
from service.engines.errors import CheckpointError


# llm-compressor recipes. API as in vllm-project/llm-compressor (search index):
#   examples/awq/llama_example.py @b6a4803 (AWQModifier(ignore=["lm_head"], scheme="W4A16_ASYM", targets=["Linear"]),
#     256 samples x 512 tokens), examples/awq/qwen3_moe_example.py @b6a4803 (MoE: scheme="W4A16" because vLLM
#     has no asymmetric MoE kernels; ignore "re:.*mlp.gate$", "re:.*mlp.shared_expert_gate$"),
#   examples/quantization_w4a16/llama3_example.py @feab612 (GPTQModifier(targets="Linear", scheme="W4A16")),
#   examples/quantization_w8a8_int8/llama3_example.py @6c081a6 (SmoothQuantModifier(smoothing_strength=0.8) +
#     GPTQModifier(scheme="W8A8")), examples/quantization_w4a4_fp4/llama3_example.py @6c081a6
#     (QuantizationModifier(targets="Linear", scheme="NVFP4")); all call `from llmcompressor import oneshot`
#   and save with model.save_pretrained(SAVE_DIR, save_compressed=True) (compressed-tensors, read by vLLM).
@dataclass(frozen=True)
class LlmCompressorRecipe:
    imports: tuple[str, ...]
    modifiers: tuple[str, ...]        # Python expressions; IGNORE is the ignore list
    samples: int
    seq_len: int
    what: str


def recipe_for(weight_dtype: str, moe: bool) -> LlmCompressorRecipe | None:
    if weight_dtype == "int4-awq":
        scheme = "W4A16" if moe else "W4A16_ASYM"
        return LlmCompressorRecipe(
            ("from llmcompressor.modifiers.awq import AWQModifier",),
            (f'AWQModifier(ignore=IGNORE, scheme="{scheme}", targets=["Linear"])',), 256, 512,
            f"AWQ 4-bit weights, group 128 ({scheme})")
    if weight_dtype == "int4-gptq":
        return LlmCompressorRecipe(
            ("from llmcompressor.modifiers.quantization import GPTQModifier",),
            ('GPTQModifier(targets="Linear", scheme="W4A16", ignore=IGNORE)',), 512, 2048,
            "GPTQ 4-bit weights, group 128 (W4A16)")
    if weight_dtype == "int8-sq":
        return LlmCompressorRecipe(
            ("from llmcompressor.modifiers.quantization import GPTQModifier",
             "from llmcompressor.modifiers.smoothquant import SmoothQuantModifier"),
            ("SmoothQuantModifier(smoothing_strength=0.8)",
             'GPTQModifier(targets="Linear", scheme="W8A8", ignore=IGNORE)'), 512, 2048,
            "SmoothQuant + GPTQ INT8 weights and dynamic per-token INT8 activations (W8A8)")
    if weight_dtype == "nvfp4":
        return LlmCompressorRecipe(
            ("from llmcompressor.modifiers.quantization import QuantizationModifier",),
            ('QuantizationModifier(targets="Linear", scheme="NVFP4", ignore=IGNORE)',), 512, 2048,
            "NVFP4 weights and activations (FP4, group 16)")
    return None


def script_text(model_id: str, save_dir: str, recipe: LlmCompressorRecipe, moe: bool) -> str:
    ignore = ["lm_head"]
    if moe:  # router gates stay in 16 bit; patterns that match nothing are harmless (qwen3_moe_example)
        ignore += ["re:.*mlp.gate$", "re:.*mlp.shared_expert_gate$", "re:.*block_sparse_moe.gate$",
                   "re:.*router$"]
    modifiers = "".join(f"    {m},\n" for m in recipe.modifiers)
    return (
        f'"""Quantise {model_id} with llm-compressor: {recipe.what}. Output: {save_dir} (compressed-tensors)."""\n'
        "from datasets import load_dataset\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "\n"
        "from llmcompressor import oneshot\n"
        + "".join(f"{line}\n" for line in recipe.imports)
        + "\n"
        f"MODEL_ID = {json.dumps(model_id)}\n"
        f"SAVE_DIR = {json.dumps(save_dir)}\n"
        f"NUM_CALIBRATION_SAMPLES = {recipe.samples}\n"
        f"MAX_SEQUENCE_LENGTH = {recipe.seq_len}\n"
        f"IGNORE = {json.dumps(ignore)}\n"
        "\n"
        'model = AutoModelForCausalLM.from_pretrained(MODEL_ID, torch_dtype="auto")\n'
        "tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)\n"
        "\n"
        'ds = load_dataset("HuggingFaceH4/ultrachat_200k", split=f"train_sft[:{NUM_CALIBRATION_SAMPLES}]")\n'
        "ds = ds.shuffle(seed=42)\n"
        "\n"
        "\n"
        "def to_text(example):\n"
        "    if tokenizer.chat_template:\n"
        '        return {"text": tokenizer.apply_chat_template(example["messages"], tokenize=False)}\n'
        '    return {"text": "\\n".join(m["content"] for m in example["messages"])}\n'
        "\n"
        "\n"
        "def tokenize(sample):\n"
        '    return tokenizer(sample["text"], padding=False, max_length=MAX_SEQUENCE_LENGTH, truncation=True,\n'
        "                     add_special_tokens=False)\n"
        "\n"
        "\n"
        "ds = ds.map(to_text)\n"
        "ds = ds.map(tokenize, remove_columns=ds.column_names)\n"
        "\n"
        "recipe = [\n"
        f"{modifiers}"
        "]\n"
        "oneshot(model=model, dataset=ds, recipe=recipe, max_seq_length=MAX_SEQUENCE_LENGTH,\n"
        "        num_calibration_samples=NUM_CALIBRATION_SAMPLES)\n"
        "\n"
        "model.save_pretrained(SAVE_DIR, save_compressed=True)\n"
        "tokenizer.save_pretrained(SAVE_DIR)\n"
    )


def plan(ctx: Context) -> Checkpoint:
    """The llm-compressor steps that quantise the 16-bit checkpoint to ``ctx.weight``."""
    s, w = ctx.spec, ctx.weight.id
    moe = bool(ctx.model and ctx.model.num_experts)
    recipe = recipe_for(w, moe)
    if recipe is None:
        raise CheckpointError(f"no quantisation recipe for {ctx.weight.name} with vLLM: name a {w} checkpoint "
                              "in `checkpoint`")
    save_dir = output_dir(s.model_id, w)
    script = f"quantize_{CHECKPOINT_SUFFIX[w].replace('-', '_')}.py"
    return Checkpoint(
        served=save_dir, local=True,
        steps=[
            {"what": "Install llm-compressor (any Python environment with a GPU and the model's disk space).",
             "command": "pip install llmcompressor"},
            {"what": f"Quantise {s.model_id} ({recipe.what}; {recipe.samples} calibration samples of "
                     f"HuggingFaceH4/ultrachat_200k) into {save_dir}.",
             "command": shlex.join(["python", script])},
        ],
        files={script: script_text(s.model_id, save_dir, recipe, moe)},
        notes=[f"The served checkpoint {save_dir} is produced by the quantisation step (compressed-tensors "
               "format: vLLM reads its quantization config, so no --quantization flag)."],
    )


