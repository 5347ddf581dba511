"""ModelOpt, TensorRT-LLM's quantisation tool: the `hf_ptq.py` steps that export a quantised Hugging Face
checkpoint TensorRT-LLM's PyTorch backend reads."""

from __future__ import annotations

import shlex

from service.engines.base import Context
from service.engines.checkpoints import Checkpoint, output_dir
from service.engines.container import HF_CACHE_MOUNT, WORKDIR_MOUNT
from service.engines.errors import CheckpointError

# ModelOpt post-training quantisation (NVIDIA/Model-Optimizer examples/llm_ptq/hf_ptq.py @003e0fb: argparse
# --pyt_ckpt_path, --qformat, --kv_cache_qformat (default fp8_cast), --export_fmt (deprecated, default hf;
# older releases defaulted to tensorrt_llm, so it is passed explicitly), --export_path). TRT-LLM's docs
# (features/quantization.md) clone NVIDIA/Model-Optimizer and run examples/llm_ptq inside the release image.
_MODELOPT_REPO = "https://github.com/NVIDIA/Model-Optimizer.git"
_MODELOPT_QFORMAT = {"fp8": "fp8", "int4-awq": "int4_awq", "w4a8-awq": "w4a8_awq", "nvfp4": "nvfp4",
                     "int8-sq": "int8_sq"}


def plan(ctx: Context) -> Checkpoint:
    s, w = ctx.spec, ctx.weight.id
    qformat = _MODELOPT_QFORMAT.get(w)
    if qformat is None:
        raise CheckpointError(f"no ModelOpt recipe for {ctx.weight.name} (hf_ptq.py has no such --qformat): name a "
                              f"{w} checkpoint in `checkpoint`")
    ptq = ctx.vocab.raw.get("quantize", {}).get("modelopt_hf_ptq", {})
    choices = ptq.get("qformat", {}).get("choices", [])
    kv_qformat = "fp8" if ctx.kv.id == "fp8" else "none"
    kv_choices = ptq.get("kv_cache_qformat", {}).get("choices", [])
    if qformat not in choices or kv_qformat not in kv_choices:
        raise CheckpointError(f"ModelOpt hf_ptq.py in the {ctx.vocab.engine} {ctx.vocab.version} vocabulary lacks "
                              f"--qformat {qformat} / --kv_cache_qformat {kv_qformat}")
    save_dir = output_dir(s.model_id, w)
    image = ctx.vocab.image or "nvcr.io/nvidia/tensorrt-llm/release"
    container = shlex.join(["docker", "run", "--rm", "-it", "--ipc=host", "--gpus", "all", "--ulimit",
                            "memlock=-1", "--ulimit", "stack=67108864"])
    container += f" -v {HF_CACHE_MOUNT} -v {WORKDIR_MOUNT} " + shlex.join(
        ["-w", "/workspace", "-e", "HF_TOKEN", image, "bash"])
    ptq_cmd = shlex.join([
        "python", "Model-Optimizer/examples/llm_ptq/hf_ptq.py", "--pyt_ckpt_path", s.model_id,
        "--qformat", qformat, "--kv_cache_qformat", kv_qformat, "--export_fmt", "hf", "--export_path", save_dir])
    return Checkpoint(
        served=save_dir, local=True,
        steps=[
            {"what": "Open a shell in the TensorRT-LLM release image (it ships nvidia-modelopt; the exported "
                     "checkpoint lands in the current directory).", "command": container},
            {"what": "Fetch ModelOpt's PTQ example (if it needs a newer nvidia-modelopt than the image ships, "
                     "check out the Model-Optimizer tag matching `pip show nvidia-modelopt`).",
             "command": shlex.join(["git", "clone", "--depth", "1", _MODELOPT_REPO])},
            {"what": "Install the example's requirements.",
             "command": "pip install -r Model-Optimizer/examples/llm_ptq/requirements.txt"},
            {"what": f"Quantise {s.model_id} to {qformat} (KV cache: {kv_qformat}; 512 calibration samples by "
                     f"default) and export a Hugging Face checkpoint to {save_dir}.", "command": ptq_cmd},
        ],
        notes=[f"The served checkpoint {save_dir} is a ModelOpt export (hf_quant_config.json); TRT-LLM's PyTorch "
               "backend reads the quantization from it."],
    )


