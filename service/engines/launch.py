"""Launch commands for a deployment: the exact `vllm serve` / `trtllm-serve` line an operator runs.

Pure Python: reads the catalog (``gpu_catalog.loader.Catalog``) and the per-version flag vocabularies in
``gpu_catalog/data/engines/<engine>-<version>.yaml`` (flags extracted from the engines' own parsers).
Every flag and YAML key a renderer emits is checked against the vocabulary of the targeted version,
with its type, range and choices, so a render either yields a command that version accepts or raises
``LaunchError``. Each engine renders its own part (``vllm.py``, ``trtllm.py``); this module checks the
deployment, plans the checkpoint, and assembles the container lines and replicas.

Rules:
- emit only what the deployment needs; nothing that restates the version's default (for vLLM's
  max_num_seqs / max_num_batched_tokens the default depends on the device class, `defaults_by_device`);
- the checkpoint: the original for FP16/BF16/dynamic FP8 (vLLM), a pre-quantised one when the model id
  names one, otherwise a quantisation step (llm-compressor for vLLM, ModelOpt `hf_ptq.py` for TensorRT-LLM)
  whose output directory is then served;
- deterministic output: fixed flag order, sorted YAML keys, `shlex` quoting.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from gpu_catalog.loader import Catalog
from service.engines.base import Context, Engine, LaunchSpec, Rendered, check_model_fit, check_values, resolve_context
from service.engines.checkpoints import plan_checkpoint
from service.engines.container import container_image, docker_line, placements
from service.engines.registry import engine_for


def render_launch(spec: LaunchSpec, catalog: Catalog, vocab_dir: Path | None = None) -> dict[str, Any]:
    """The launch of one deployment: command, argv, container line, files, preparation steps, replicas, notes.

    Returns {"engine", "engine_version", "executable", "image", "model", "command", "args", "container",
    "files", "steps", "replicas", "notes"}; `args` is the argv after `executable` (for a Kubernetes manifest:
    with the vLLM image its entrypoint is already `vllm serve`; with the TRT-LLM image set
    command: [trtllm-serve])."""
    ctx = resolve_context(spec, catalog, vocab_dir)
    engine = engine_for(ctx.engine.id)
    check_values(ctx)
    engine.check_values(spec)
    ckpt = plan_checkpoint(ctx, engine)
    check_model_fit(ctx)
    notes: list[str] = list(ckpt.notes)
    if catalog.support_levels(ctx.engine.id, ctx.gpu.architecture).get(("weight", ctx.weight.id)) == "fallback":
        notes.append(f"{ctx.weight.name} runs in fallback kernels on {ctx.gpu.architecture} (weight-only, "
                     f"{ctx.weight.fallback_compute} GEMMs): memory savings without the compute speed-up.")
    if ctx.model is None:
        notes.append(f"{spec.model_id} is not in the catalog: tp/pp divisibility, context length and weight size "
                     "were not checked, and it is treated as a dense model.")
    rendered = engine.render(ctx, ckpt, notes)
    files = {**ckpt.files, **rendered.files}
    image, image_note = container_image(ctx)
    if image_note:
        notes.append(image_note)
    replicas = rendered.replicas
    gpus_per_server = spec.tp * spec.pp * spec.dp * (replicas.count if replicas.mode == "data-parallel" else 1)
    if gpus_per_server > ctx.gpu.max_gpus_per_node:
        notes.append(f"One server spans {gpus_per_server} GPUs, more than the {ctx.gpu.max_gpus_per_node} of one "
                     f"{ctx.gpu.name} node: it needs {engine.multi_node_launcher}; the single-node container line "
                     "does not cover it.")
    replicas_out, container = _replicas(ctx, engine, rendered, image, ckpt.local or bool(files))
    executable = list(ctx.vocab.executable)
    return {
        "engine": ctx.engine.id,
        "engine_version": ctx.version,
        "executable": executable,
        "image": image,
        "model": ckpt.served,
        "command": shlex.join([*executable, *rendered.args]),
        "args": rendered.args,
        "container": container,
        "files": dict(sorted(files.items())),
        "steps": ckpt.steps,
        "replicas": replicas_out,
        "notes": notes,
    }


def _replicas(ctx: Context, engine: Engine, rendered: Rendered, image: str,
              local_files: bool) -> tuple[dict[str, Any], str]:
    """How the replicas are served (with one command and container line per server when they are separate
    servers), and the container line of the first server."""
    spec, replicas, args = ctx.spec, rendered.replicas, rendered.args
    out: dict[str, Any] = {"count": replicas.count, "mode": replicas.mode}
    if replicas.mode == "single":
        out["how"] = "One server; no load balancer needed."
        return out, docker_line(ctx, engine, image, args, None, spec.port, local_files)
    if replicas.mode == "data-parallel":
        out["how"] = (
            f"One vLLM server with --data-parallel-size {replicas.count}: {replicas.count} engine replicas of "
            f"{spec.tp * spec.pp} GPU(s) each behind vLLM's own API server, which balances requests across them; "
            "one endpoint, no external load balancer.")
        return out, docker_line(ctx, engine, image, args, None, spec.port, local_files)
    env = "HIP_VISIBLE_DEVICES" if ctx.gpu.vendor == "amd" else "CUDA_VISIBLE_DEVICES"
    executable = list(ctx.vocab.executable)
    servers: list[dict[str, Any]] = []
    per_slot: dict[int, tuple[str, str]] = {}      # a node's slots repeat on every node: rendered once each
    for i, (node, gpus, host_port) in enumerate(placements(ctx, replicas.count)):
        gpu_list = ",".join(map(str, gpus))
        if host_port not in per_slot:
            per_slot[host_port] = (
                f"{env}={gpu_list} " + shlex.join([*executable, *rendered.server_args(host_port)]),
                docker_line(ctx, engine, image, args, gpus, host_port, local_files))
        command, container_line = per_slot[host_port]
        servers.append({"replica": i, "node": node, "gpus": gpu_list, "host_port": host_port,
                        "command": command, "container": container_line})
    out["how"] = (
        f"{replicas.count} separate servers of {spec.tp * spec.pp * spec.dp} GPU(s) each "
        f"({engine.separate_servers_reason(ctx)}), behind an HTTP load "
        "balancer (nginx/Envoy, or a Kubernetes Service over a Deployment with replicas: "
        f"{replicas.count}, each pod requesting {spec.tp * spec.pp * spec.dp} GPU(s) and running `args`). "
        "`servers` lists a packing onto nodes: one command and container line per replica.")
    out["servers"] = servers
    return out, servers[0]["container"]
