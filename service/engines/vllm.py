"""vLLM: its defaults as its vocabulary states them, and the `vllm serve` launch of a deployment.

``defaults_by_device`` in ``gpu_catalog/data/engines/vllm-<version>.yaml`` (from ``EngineArgs.get_batch_defaults``)
gives ``max_num_seqs`` and ``max_num_batched_tokens`` per device class; ``gpu_memory_utilization_default`` in the
same file gives the memory fraction. Both the prediction and the rendered command read them here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpu_catalog.schema import GpuSpec
from service.core.moe_layout import EngineParallelSettings, Layout, LayoutError
from service.engines import llm_compressor
from service.engines.base import Argv, Context, LaunchSpec, Rendered, Replicas, dtype16, expert_parallel, name_tokens
from service.engines.checkpoints import Checkpoint
from service.engines.errors import LaunchError
from service.engines.levers import draft_repository, method_name
from service.engines.vocabulary import Vocabulary
from service.units import GB_BYTES, GIB_BYTES

# vLLM leaves --enable-chunked-prefill / --enable-prefix-caching at None and decides at start-up; for
# generate models both resolve to True (vllm-0.11.0.yaml defaults_by_device.adjustments).
_CHUNKED_PREFILL_DEFAULT = True
_PREFIX_CACHING_DEFAULT = True

# Catalog kv dtype id -> `vllm serve --kv-cache-dtype` value (config/cache.py CacheDType).
_KV_DTYPE = {"fp8": "fp8", "fp16": "float16", "bf16": "bfloat16"}

_CLASS_MEM_RE = re.compile(r"device_memory >= (\d+) GiB")


def parallel_settings(layout: Layout) -> EngineParallelSettings:
    """The `vllm serve` flags of ``layout``. Each DP rank runs ``--tensor-parallel-size`` GPUs; its MoE layers form
    one group of ``dp x tp`` GPUs, expert-parallel with ``--enable-expert-parallel`` (vLLM docs,
    serving/data_parallel_deployment.md), so ``ep`` is 1 or ``tp x dp``."""
    if layout.ep not in (1, layout.tp * layout.dp):
        world = layout.tp * layout.dp
        raise LayoutError("ep", f"vLLM splits experts over all tp x dp GPUs or none: valid: [1, {world}]", [1, world])
    flags: dict[str, int | bool] = {"--tensor-parallel-size": layout.tp, "--pipeline-parallel-size": layout.pp}
    if layout.dp > 1:
        flags["--data-parallel-size"] = layout.dp
    if layout.ep > 1:
        flags["--enable-expert-parallel"] = True
    return EngineParallelSettings(flags=flags, yaml_keys={})


def _ints(values: dict[str, Any]) -> tuple[int, int]:
    return int(values["max_num_seqs"]), int(values["max_num_batched_tokens"])


class Vllm:
    id = "vllm"
    name = "vLLM"
    memory_fraction_setting = "gpu_memory_utilization"
    multi_node_launcher = "a Ray cluster (vLLM multi-node)"
    defaults_source = "defaults_by_device"
    # vllm/vllm-openai's ENTRYPOINT is `vllm serve` (vLLM docs/deployment/docker.md): no extra docker flags
    docker_flags: tuple[str, ...] = ()
    image_runs_server = True
    # vLLM V1 always chunks prompts (vllm-<version>.yaml defaults_by_device.adjustments)
    always_chunks_prefill = True
    # KV blocks are allocated as tokens are computed; the newest request is preempted when the cache runs out
    reserves_whole_sequences = False

    def batch_defaults(self, vocab: Vocabulary, gpu: GpuSpec) -> tuple[int, int]:
        """The `vllm serve` (max_num_seqs, max_num_batched_tokens) defaults of the GPU's device class.

        The classes in `defaults_by_device` are tested in order: 'device_memory >= N GiB', optionally
        "'a100' not in device name"; 'other GPUs' matches all; the CPU and TPU classes are not GPUs. Catalog
        memory is the datasheet figure (GB), converted to GiB; no catalog GPU lies near a class boundary."""
        memory_gib = gpu.memory_gb * GB_BYTES / GIB_BYTES
        by_device = vocab.raw.get("defaults_by_device", {})
        for cls in by_device.get("classes", []):
            label = str(cls.get("class", ""))
            if label.startswith(("CPU", "TPU")):
                continue
            threshold = _CLASS_MEM_RE.search(label)
            if threshold and memory_gib < float(threshold.group(1)):
                continue
            if "'a100' not in device name" in label and ("a100" in gpu.id or "a100" in gpu.name.lower()):
                continue
            if threshold or label.startswith("other"):
                return _ints(cls.get("vllm_serve", {}))
        return _ints(by_device.get("fallback", {}))

    def memory_fraction_default(self, vocab: Vocabulary) -> float:
        entry = vocab.raw.get("gpu_memory_utilization_default", {})
        if entry.get("value") is not None:
            return float(entry["value"])
        # None resolves to 1.0 with the extensible KV cache, on by default on CUDA/ROCm (vllm-0.34.0.yaml
        # gpu_memory_utilization_default.resolved)
        resolved = entry.get("resolved", {}).get("extensible_kv_cache")
        return float(resolved if resolved is not None else vocab.flag_default("--gpu-memory-utilization"))

    def check_values(self, spec: LaunchSpec) -> None:
        s = spec
        if (s.max_num_seqs is not None and s.max_num_batched_tokens is not None
                and s.max_num_batched_tokens < s.max_num_seqs):
            raise LaunchError(f"max_num_batched_tokens ({s.max_num_batched_tokens}) must be >= max_num_seqs "
                              f"({s.max_num_seqs}): vLLM's scheduler config rejects it")

    def plan_quantisation(self, ctx: Context) -> Checkpoint:
        s, w = ctx.spec, ctx.weight.id
        if w == "fp8":
            notes = ["Dynamic FP8: vLLM quantises the 16-bit checkpoint at load time (--quantization fp8, per-tensor "
                     "scales); no calibration step."]
            if ctx.model is not None:
                fp8_aliases = [a for a in ctx.model.aliases if "fp8" in name_tokens(a)]
                if fp8_aliases:
                    notes.append(f"A pre-quantised FP8 checkpoint of the same architecture exists: {fp8_aliases[0]} "
                                 "(pass it as `checkpoint` to skip online quantisation).")
            return Checkpoint(served=s.model_id, local=False, dynamic_fp8=True, notes=notes)
        return llm_compressor.plan(ctx)

    def parallel_settings(self, layout: Layout) -> EngineParallelSettings:
        return parallel_settings(layout)

    def render(self, ctx: Context, ckpt: Checkpoint, notes: list[str]) -> Rendered:
        replicas = self._replicas(ctx)
        if ctx.spec.kv_cache_free_gpu_memory_fraction is not None:
            notes.append("kv_cache_free_gpu_memory_fraction is a TRT-LLM setting; vLLM sizes its KV cache from "
                         "gpu_memory_utilization (a fraction of total memory) instead. Ignored.")

        def server_args(port: int) -> list[str]:
            return self._args(ctx, ckpt, replicas, port, [])

        return Rendered(replicas, self._args(ctx, ckpt, replicas, ctx.spec.port, notes), server_args)

    def separate_servers_reason(self, ctx: Context) -> str:
        if ctx.model and ctx.model.num_experts:
            return ("MoE expert layers of vLLM data-parallel ranks synchronise every step, so they are not "
                    "independent replicas")
        return "each replica is an independent server"

    def _replicas(self, ctx: Context) -> Replicas:
        s = ctx.spec
        if s.replicas == 1:
            return Replicas("single", 1)
        dense = not (ctx.model and ctx.model.num_experts)
        if s.dp > 1:        # --data-parallel-size is the replica's attention DP: replicas are servers of their own
            return Replicas("separate-servers", s.replicas)
        fits_one_node = s.tp * s.pp * s.replicas <= ctx.gpu.max_gpus_per_node
        if dense and s.pp == 1 and fits_one_node and ctx.vocab.flag("--data-parallel-size"):
            return Replicas("data-parallel", s.replicas)
        return Replicas("separate-servers", s.replicas)

    def _tp_pp_args(self, ctx: Context, argv: Argv, replicas: Replicas, notes: list[str]) -> None:
        s = ctx.spec
        if s.tp > 1:
            argv.add("--tensor-parallel-size", s.tp)
        if s.pp > 1:
            argv.add("--pipeline-parallel-size", s.pp)
        if replicas.mode == "data-parallel":
            argv.add("--data-parallel-size", replicas.count)
        if expert_parallel(ctx):
            argv.switch("--enable-expert-parallel", True)
            notes.append(f"Expert parallelism: the {ctx.model.num_experts if ctx.model else 0} experts are spread "
                         f"whole over the {s.tp} GPUs (EP={s.tp}) instead of slicing every expert by TP.")

    def _layout_args(self, ctx: Context, argv: Argv, notes: list[str]) -> None:
        """The flags of a layout with attention data parallelism or an explicit expert-parallel size."""
        s = ctx.spec
        layout = Layout(tp=s.tp, pp=s.pp, dp=s.dp, ep=s.ep or 1)
        for flag, value in parallel_settings(layout).flags.items():
            if value is True:
                argv.switch(flag, True)
            elif value != ctx.vocab.flag_default(flag):
                argv.add(flag, value)
        if s.dp > 1:
            notes.append(f"Attention data parallelism: {s.dp} DP ranks of {s.tp * s.pp} GPU(s), each with its own "
                         "batch and KV cache, behind vLLM's own API server; the ranks step together through the "
                         "MoE layers (an idle rank runs a dummy pass).")
        if layout.ep > 1:
            notes.append(f"Expert parallelism: the routed experts are spread whole over the {layout.ep} GPUs of "
                         "the tp x dp group (EP), exchanged by an all-to-all in every MoE layer.")

    def _args(self, ctx: Context, ckpt: Checkpoint, replicas: Replicas, port: int, notes: list[str]) -> list[str]:
        s, vocab = ctx.spec, ctx.vocab
        argv = Argv(vocab, ckpt.served)
        if ckpt.served != s.model_id:
            argv.add("--served-model-name", s.model_id)
        dtype = dtype16(ctx)
        if dtype:
            argv.add("--dtype", dtype)
        if ckpt.dynamic_fp8:
            argv.add("--quantization", "fp8")
        kv = _KV_DTYPE.get(ctx.kv.id) if ctx.kv.id != "auto" else None
        if ctx.kv.id not in ("auto", *_KV_DTYPE):
            raise LaunchError(f"vLLM has no KV-cache dtype for '{ctx.kv.id}'")
        kv_is_model_dtype = ((kv == "float16" and dtype in ("float16", "half"))
                             or (kv == "bfloat16" and dtype == "bfloat16"))
        if kv and not kv_is_model_dtype:
            argv.add("--kv-cache-dtype", kv)
        if s.dp > 1 or s.ep is not None:
            self._layout_args(ctx, argv, notes)
        else:
            self._tp_pp_args(ctx, argv, replicas, notes)
        if s.max_model_len is not None and not (ctx.model and s.max_model_len == ctx.model.max_position_embeddings):
            argv.add("--max-model-len", s.max_model_len)
        chunked = _CHUNKED_PREFILL_DEFAULT if s.enable_chunked_prefill is None else s.enable_chunked_prefill
        seqs_default, tokens_default = self.batch_defaults(vocab, ctx.gpu)
        if s.max_num_seqs is not None and s.max_num_seqs != seqs_default:
            argv.add("--max-num-seqs", s.max_num_seqs)
        # Without chunked prefill vLLM raises the token budget to >= max_model_len, so the device default no
        # longer applies and an explicit value is kept.
        if s.max_num_batched_tokens is not None and (
                not chunked or s.max_num_batched_tokens != tokens_default):
            argv.add("--max-num-batched-tokens", s.max_num_batched_tokens)
        if not chunked and s.max_num_batched_tokens is not None and s.max_model_len is not None \
                and s.max_num_batched_tokens < s.max_model_len:
            raise LaunchError(f"with chunked prefill off, max_num_batched_tokens ({s.max_num_batched_tokens}) must be "
                              f">= max_model_len ({s.max_model_len})")
        if s.gpu_memory_utilization is not None and s.gpu_memory_utilization != self.memory_fraction_default(vocab):
            argv.add("--gpu-memory-utilization", s.gpu_memory_utilization)
        if s.enable_chunked_prefill is not None and s.enable_chunked_prefill != _CHUNKED_PREFILL_DEFAULT:
            argv.switch("--enable-chunked-prefill", s.enable_chunked_prefill)
        if s.enable_prefix_caching is not None and s.enable_prefix_caching != _PREFIX_CACHING_DEFAULT:
            argv.switch("--enable-prefix-caching", s.enable_prefix_caching)
        if s.speculative is not None:
            argv.add("--speculative-config", json.dumps(self._speculative_config(ctx), sort_keys=True))
        if s.cpu_offload_gb:
            # the flag is in GiB ("The space in GiB to offload to CPU, per GPU"); the contract's field in GB
            argv.add("--cpu-offload-gb", round(s.cpu_offload_gb * GB_BYTES / GIB_BYTES, 3))
        if s.kv_offload_gb:
            # "Size of the KV cache offloading buffer in GiB. When TP > 1, this is the total buffer size summed
            # across all TP ranks" (vLLM CacheConfig; the lmcache backend splits it over tp x pp ranks): the
            # contract's field is GB per GPU, so the instance's total over its tp x pp GPUs, in GiB
            ranks = s.tp * s.pp
            argv.add("--kv-offloading-size", round(s.kv_offload_gb * ranks * GB_BYTES / GIB_BYTES, 3))
            argv.add("--kv-offloading-backend", "native")
        if port != vocab.flag_default("--port"):
            argv.add("--port", port)
        return argv.items

    def _speculative_config(self, ctx: Context) -> dict[str, Any]:
        """`--speculative-config`'s JSON: the method's vLLM name, k, and the draft's repository where it has one."""
        spec = ctx.spec.speculative
        assert spec is not None
        config: dict[str, Any] = {"method": method_name(self.id, ctx.version, spec.method),
                                  "num_speculative_tokens": spec.num_speculative_tokens}
        if (draft := draft_repository(ctx)) is not None:
            config["model"] = draft
        return config


