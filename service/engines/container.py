"""The container a launch runs in: the image, the `docker run` line of one server, and the packing of
servers onto nodes."""

from __future__ import annotations

import shlex

from service.engines.base import Context, Engine
from service.engines.errors import LaunchError

# Containers. NVIDIA flags for TRT-LLM: NVIDIA/TensorRT-LLM quick-start-guide ("docker run --rm -it --ipc host
# --gpus all --ulimit memlock=-1 --ulimit stack=67108864 -p 8000:8000 nvcr.io/nvidia/tensorrt-llm/release:...").
# vLLM: docs/deployment/docker.md ("--gpus all -v ~/.cache/huggingface:/root/.cache/huggingface
# --env HF_TOKEN -p 8000:8000 --ipc=host vllm/vllm-openai:<tag>"; the image's ENTRYPOINT is `vllm serve`).
# ROCm: the vocabularies name no ROCm image. vLLM publishes `vllm/vllm-openai-rocm` (tags v0.14.0, v0.19.0,
# v0.23.0 and `nightly` seen in public deployment scripts, entrypoint `vllm serve`); the v<version> tag for the
# versions here was not seen. Device flags from AMD's ROCm vLLM docs (rocm.docs.amd.com ... inference/vllm).
_VLLM_ROCM_IMAGE = "vllm/vllm-openai-rocm:v{version}"
_ROCM_DOCKER_FLAGS = ("--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
                      "--security-opt", "seccomp=unconfined")
HF_CACHE_MOUNT = '"$HOME/.cache/huggingface":/root/.cache/huggingface'
WORKDIR_MOUNT = '"$PWD":/workspace'


def container_image(ctx: Context) -> tuple[str, str | None]:
    """The container image and, when it is not verified, why."""
    if ctx.gpu.vendor == "amd":
        return (_VLLM_ROCM_IMAGE.format(version=ctx.version),
                f"ROCm image vllm/vllm-openai-rocm:v{ctx.version} is unverified: the tag pattern is seen for "
                "v0.14.0-v0.23.0 in public scripts; AMD also publishes rocm/vllm:<rocm>_vllm_<version>_<date> tags.")
    image = ctx.vocab.image
    if image is None:
        raise LaunchError(f"the {ctx.engine.id} {ctx.version} vocabulary names no container image")
    if not ctx.vocab.image_verified:
        return image, f"Image tag {image} follows NVIDIA's naming pattern but was not seen in a source."
    return image, None


def docker_line(ctx: Context, engine: Engine, image: str, args: list[str], gpus: list[int] | None,
                host_port: int, local_files: bool) -> str:
    """`docker run` for one server. gpus None = all GPUs of the host."""
    s = ctx.spec
    parts: list[str] = [shlex.join(["docker", "run", "-d", "--ipc=host"])]
    if ctx.gpu.vendor == "amd":
        parts.append(shlex.join(_ROCM_DOCKER_FLAGS))
        if gpus is not None:
            parts.append(shlex.join(["-e", "HIP_VISIBLE_DEVICES=" + ",".join(map(str, gpus))]))
    else:
        parts.append(shlex.join(["--gpus", "all" if gpus is None else '"device=' + ",".join(map(str, gpus)) + '"']))
    if engine.docker_flags:
        parts.append(shlex.join(engine.docker_flags))
    parts.append(shlex.join(["-p", f"{host_port}:{s.port}", "-e", "HF_TOKEN"]))
    parts.append(f"-v {HF_CACHE_MOUNT}")
    if local_files:
        parts.append(f"-v {WORKDIR_MOUNT} -w /workspace")
    parts.append(shlex.quote(image))
    if not engine.image_runs_server:
        parts.append(shlex.join(ctx.vocab.executable))
    parts.append(shlex.join(args))
    return " ".join(parts)


def placements(ctx: Context, count: int) -> list[tuple[int, list[int], int]]:
    """(node, GPU indices, host port) of each of `count` servers of tp*pp GPUs packed onto nodes."""
    per_server = ctx.spec.tp * ctx.spec.pp * ctx.spec.dp
    per_node = max(ctx.gpu.max_gpus_per_node // per_server, 1)
    out = []
    for i in range(count):
        local = i % per_node
        first = local * per_server
        out.append((i // per_node, list(range(first, first + per_server)), ctx.spec.port + local))
    return out


