"""TensorRT-LLM: its defaults as its vocabulary states them, and the `trtllm-serve` launch of a deployment
(flags plus an `--extra_llm_api_options` YAML file).

Its defaults are the ``trtllm-serve`` option defaults in ``gpu_catalog/data/engines/trtllm-<version>.yaml``.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpu_catalog.schema import GpuSpec
from service.core.moe_layout import EngineParallelSettings, Layout, LayoutError
from service.engines import modelopt
from service.engines.base import Argv, Context, LaunchSpec, Rendered, Replicas, dtype16, expert_parallel
from service.engines.checkpoints import Checkpoint
from service.engines.errors import LaunchError
from service.engines.levers import draft_repository, method_name
from service.engines.vocabulary import Vocabulary, check_yaml
from service.units import GB_BYTES

# CUDA-graph capture cap for TRT-LLM: larger batches run without graphs. 512 is the cap NVIDIA's own
# DeepSeek-R1 trtllm-serve example uses (cuda_graph_config.max_batch_size 512 with max_batch_size 1024,
# docs examples/deepseek_r1_reasoning_parser) and vLLM's default capture cap (the `--cuda-graph-sizes` help in
# gpu_catalog/data/engines/vllm-0.11.0.yaml).
_CUDA_GRAPH_MAX_BATCH = 512
TRTLLM_EXTRA_OPTIONS_FILE = "extra_llm_api_options.yaml"

# PyYAML's libyaml emitter where it is built in (the wheels have it): the same text as safe_dump (the golden
# TRT-LLM launches check it), without the pure-Python emitter's cost on every rendered launch
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def parallel_settings(layout: Layout) -> EngineParallelSettings:
    """The `trtllm-serve` flags and extra-options YAML keys of ``layout``. ``tensor_parallel_size`` counts every
    GPU of a stage; with ``enable_attention_dp`` each of them is an attention DP rank (NVIDIA's DeepSeek-R1
    example: ``--tp_size 8 --ep_size 8`` with ``enable_attention_dp: true``), and no 1.2 YAML key sets an
    attention TP size inside a DP rank, so ``dp > 1`` needs ``tp = 1``; the experts split as
    ``moe_expert_parallel_size x moe_tensor_parallel_size`` (YAML only: one spelling per setting)."""
    if layout.dp > 1 and layout.tp > 1:
        raise LayoutError("tp", "TensorRT-LLM runs attention data parallelism with one GPU per DP rank: valid: [1]",
                          [1])
    world = layout.tp * layout.dp
    yaml_keys: dict[str, int | bool] = {
        "moe_expert_parallel_size": layout.ep,
        "moe_tensor_parallel_size": world // layout.ep,
    }
    if layout.dp > 1:
        yaml_keys["enable_attention_dp"] = True
    return EngineParallelSettings(flags={"--tp_size": world, "--pp_size": layout.pp}, yaml_keys=yaml_keys)


def _layout(ctx: Context) -> Layout:
    s = ctx.spec
    return Layout(tp=s.tp, pp=s.pp, dp=s.dp, ep=s.ep or 1)


class TrtLlm:
    id = "trtllm"
    name = "TensorRT-LLM"
    memory_fraction_setting = "kv_cache_free_gpu_memory_fraction"
    multi_node_launcher = "mpirun/Slurm (trtllm-llmapi-launch)"
    defaults_source = "option defaults"
    # NVIDIA/TensorRT-LLM quick-start-guide: "docker run --rm -it --ipc host --gpus all --ulimit memlock=-1
    # --ulimit stack=67108864 ..."; the NGC release image has no serving entrypoint
    docker_flags: tuple[str, ...] = ("--ulimit", "memlock=-1", "--ulimit", "stack=67108864")
    image_runs_server = False
    # the enable_chunked_prefill option defaults to off (trtllm-<version>.yaml yaml_keys)
    always_chunks_prefill = False
    # scheduler_config.capacity_scheduler_policy defaults to GUARANTEED_NO_EVICT (trtllm-<version>.yaml): a
    # request is admitted only when its prompt and output fit in the KV cache
    reserves_whole_sequences = True

    def batch_defaults(self, vocab: Vocabulary, gpu: GpuSpec) -> tuple[int, int]:
        return int(vocab.flag_default("--max_batch_size")), int(vocab.flag_default("--max_num_tokens"))

    def memory_fraction_default(self, vocab: Vocabulary) -> float:
        return float(vocab.flag_default("--kv_cache_free_gpu_memory_fraction"))

    def check_values(self, spec: LaunchSpec) -> None:
        return None

    def plan_quantisation(self, ctx: Context) -> Checkpoint:
        return modelopt.plan(ctx)

    def parallel_settings(self, layout: Layout) -> EngineParallelSettings:
        return parallel_settings(layout)

    def render(self, ctx: Context, ckpt: Checkpoint, notes: list[str]) -> Rendered:
        spec = ctx.spec
        replicas = Replicas("single" if spec.replicas == 1 else "separate-servers", spec.replicas)
        if spec.gpu_memory_utilization is not None:
            notes.append("gpu_memory_utilization is a vLLM setting; TRT-LLM sizes its KV cache from "
                         "kv_cache_free_gpu_memory_fraction (a fraction of memory free after weights). Ignored.")
        max_batch = spec.max_num_seqs or int(ctx.vocab.flag_default("--max_batch_size"))
        options = self._extra_options(ctx, max_batch, notes)
        files = {TRTLLM_EXTRA_OPTIONS_FILE: yaml.dump(options, Dumper=_YAML_DUMPER, sort_keys=True,
                                                      default_flow_style=False)}
        max_tokens = spec.max_num_batched_tokens or int(ctx.vocab.flag_default("--max_num_tokens"))
        if spec.max_model_len and max_tokens < spec.max_model_len and not spec.enable_chunked_prefill:
            notes.append(f"max_num_tokens {max_tokens} < max_seq_len {spec.max_model_len} without chunked prefill: "
                         "prompts longer than max_num_tokens are rejected.")

        def server_args(port: int) -> list[str]:
            return self._args(ctx, ckpt, port, [])

        return Rendered(replicas, self._args(ctx, ckpt, spec.port, notes), server_args, files)

    def separate_servers_reason(self, ctx: Context) -> str:
        return "each replica is an independent server"

    def _extra_options(self, ctx: Context, max_batch_size: int, notes: list[str]) -> dict[str, Any]:
        s, vocab = ctx.spec, ctx.vocab
        options: dict[str, Any] = {}
        dtype = dtype16(ctx)
        if dtype:
            options["dtype"] = dtype
        kv_cache: dict[str, Any] = {}
        if ctx.kv.id == "fp8":
            kv_cache["dtype"] = "fp8"
        elif ctx.kv.id in ("fp16", "bf16"):
            notes.append("TRT-LLM keeps a 16-bit KV cache in the model's activation dtype "
                         "(kv_cache_config.dtype auto).")
        if s.enable_prefix_caching is not None and s.enable_prefix_caching != vocab.yaml_default(
                "kv_cache_config.enable_block_reuse"):
            kv_cache["enable_block_reuse"] = s.enable_prefix_caching
        if s.kv_offload_gb:
            # bytes of host memory for offloaded blocks, of each rank's KV cache manager (features/kvcache.md,
            # "Enable Offloading to Host Memory"): the contract's GB per GPU
            kv_cache["host_cache_size"] = round(s.kv_offload_gb * GB_BYTES)
        if kv_cache:
            options["kv_cache_config"] = kv_cache
        if s.cpu_offload_gb:
            raise LaunchError(f"TensorRT-LLM {ctx.version} has no weight offload to host memory (levers.yaml)")
        if s.enable_chunked_prefill is not None and s.enable_chunked_prefill != vocab.yaml_default(
                "enable_chunked_prefill"):
            options["enable_chunked_prefill"] = s.enable_chunked_prefill
        if s.dp > 1 or s.ep is not None:
            options.update(parallel_settings(_layout(ctx)).yaml_keys)
            if s.dp > 1:
                notes.append(f"Attention data parallelism: {s.dp} DP ranks of one GPU each (enable_attention_dp), "
                             "each with its own batch and KV cache; the MoE layers split the experts as "
                             "moe_expert_parallel_size x moe_tensor_parallel_size.")
        graph_batch = min(max_batch_size, _CUDA_GRAPH_MAX_BATCH)
        options["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": graph_batch}
        notes.append(f"CUDA graphs are captured for padded batch sizes up to {graph_batch} "
                     f"(max_batch_size {max_batch_size}); larger batches run without graphs.")
        speculative = self._speculative_config(ctx)
        if speculative is not None:
            options["speculative_config"] = speculative
        check_yaml(vocab, options)
        if speculative is not None:
            # the discriminator is not a key of its own in the vocabulary: checked against its choices
            choices = vocab.raw.get("yaml_keys", {}).get("speculative_config", {}).get("decoding_type_choices", [])
            kind = method_name(self.id, ctx.version, ctx.spec.speculative.method)  # type: ignore[union-attr]
            if kind not in choices:
                raise LaunchError(f"TensorRT-LLM {ctx.version}: speculative_config.decoding_type {kind} is not one "
                                  f"of {', '.join(choices)}")
            speculative["decoding_type"] = kind
        return options

    def _speculative_config(self, ctx: Context) -> dict[str, Any] | None:
        """``speculative_config`` without its decoding_type: k (MTP's as num_nextn_predict_layers), the draft."""
        spec = ctx.spec.speculative
        if spec is None:
            return None
        config: dict[str, Any] = ({"num_nextn_predict_layers": spec.num_speculative_tokens} if spec.method == "mtp"
                                  else {"max_draft_len": spec.num_speculative_tokens})
        if (draft := draft_repository(ctx)) is not None:
            config["speculative_model"] = draft
        return config


    def _tp_pp_args(self, ctx: Context, argv: Argv, notes: list[str]) -> None:
        s = ctx.spec
        if s.tp > 1:
            argv.add("--tp_size", s.tp)
        if s.pp > 1:
            argv.add("--pp_size", s.pp)
        if expert_parallel(ctx):
            argv.add("--ep_size", s.tp)
            notes.append(f"Expert parallelism: EP={s.tp} over the TP group (moe_expert_parallel_size), whole experts "
                         "per GPU.")

    def _args(self, ctx: Context, ckpt: Checkpoint, port: int, notes: list[str]) -> list[str]:
        s, vocab = ctx.spec, ctx.vocab
        argv = Argv(vocab, ckpt.served)
        if vocab.flag_default("--backend") != "pytorch":
            argv.add("--backend", "pytorch")
        if s.dp > 1 or s.ep is not None:
            for flag, value in parallel_settings(_layout(ctx)).flags.items():
                if value != vocab.flag_default(flag):
                    argv.add(flag, value)
        else:
            self._tp_pp_args(ctx, argv, notes)
        if s.max_num_seqs is not None and s.max_num_seqs != vocab.flag_default("--max_batch_size"):
            argv.add("--max_batch_size", s.max_num_seqs)
        if s.max_num_batched_tokens is not None and s.max_num_batched_tokens != vocab.flag_default("--max_num_tokens"):
            argv.add("--max_num_tokens", s.max_num_batched_tokens)
        if s.max_model_len is not None and not (ctx.model and s.max_model_len == ctx.model.max_position_embeddings):
            argv.add("--max_seq_len", s.max_model_len)
        fraction = s.kv_cache_free_gpu_memory_fraction
        if fraction is not None and fraction != vocab.flag_default("--kv_cache_free_gpu_memory_fraction"):
            argv.add("--kv_cache_free_gpu_memory_fraction", fraction)
        if vocab.flag_default("--host") != "0.0.0.0":
            argv.add("--host", "0.0.0.0")
        if port != vocab.flag_default("--port"):
            argv.add("--port", port)
        argv.add("--extra_llm_api_options", TRTLLM_EXTRA_OPTIONS_FILE)
        return argv.items


