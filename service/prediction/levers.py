"""A deployment's levers (speculative decoding, CPU weight offload, the prefix cache) as the step model's inputs.

``check_levers`` refuses what cannot run (422 naming the field and the valid choices); ``lever_choice`` looks up
what the physics (service/core/levers.py) needs from the catalog: the acceptance rate and its source, the draft's
bytes, the host link; ``with_lever_terms`` puts them on the candidates' static terms, memory included, so that the
serving solve and the simulation time the same steps. docs/levers.md derives each term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_catalog.levers import AcceptanceAt, Levers
from gpu_catalog.schema import ModelSpec
from service.core.candidates import Candidates, Params, take_rows
from service.core.levers import expected_tokens_per_step_tok
from service.core.memory import Static, capacity
from service.core.moe_layout import mtp_params
from service.core.step_model import step_model
from service.core.tables import Tables
from service.core.types import F
from service.engines.base import LaunchSpec, SpeculativeLaunch
from service.errors import InvalidRequest
from service.schemas.predictions import Deployment, Workload
from service.units import GB_BYTES

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor


@dataclass(frozen=True)
class LeverChoice:
    """What one deployment's levers resolve to."""

    method: str | None
    num_speculative_tokens: int
    acceptance_rate: float
    acceptance_source: str | None       # None: the request's own figure
    default_acceptance: AcceptanceAt | None  # the catalog default used (None: the request's own figure)
    host_link_gb_s: float | None        # host-to-GPU bandwidth, GB/s, with offload
    offload_bytes: float
    prefix_hit_rate: float
    kv_offload_bytes: float = 0.0       # host KV tier per GPU
    prefix_working_set_tok: float = 0.0  # 0: not described


def hit_rate(dep: Deployment, wl: Workload) -> float:
    """The prefix-cache hit rate the deployment gets: the workload's, unless the request turned caching off."""
    return 0.0 if dep.engine_args.enable_prefix_caching is False else float(wl.prefix_cache_hit_rate)


def engine_version(adv: Advisor, dep: Deployment) -> str:
    return dep.engine_version or adv.engines[dep.engine].default_version


def mtp_model_types(adv: Advisor) -> set[str]:
    """Architectures (config.json model_type) that ship MTP modules: those of the models levers.yaml has an MTP
    figure for."""
    named = {r.model for r in adv.levers.defaults if r.method == "mtp"} | {
        r.model for r in adv.levers.measurements if r.method == "mtp"}
    return {adv.model_types[n] for n in named if n in adv.model_types}


def check_levers(adv: Advisor, model: ModelSpec, dep: Deployment, prefix: list[str | int]) -> None:
    """Raise InvalidRequest for a lever the engine version, the catalog, the model or the GPU cannot serve."""
    if dep.speculative is None and dep.cpu_offload_gb is None and dep.kv_offload_gb is None:
        return
    levers: Levers = adv.levers
    version = engine_version(adv, dep)
    eng = levers.engine(dep.engine, version)
    known = sorted(f"{e.engine} {e.version}" for e in levers.engine_levers)
    if eng is None:
        field = ("speculative" if dep.speculative is not None else
                 "cpu_offload_gb" if dep.cpu_offload_gb is not None else "kv_offload_gb")
        raise InvalidRequest([*prefix, field], f"no lever settings are known for {dep.engine} {version}; "
                             f"engine versions with them: {', '.join(known)}", valid=known)
    spec = dep.speculative
    if spec is not None:
        methods = eng.speculative.methods or {}
        if spec.method not in methods:
            raise InvalidRequest([*prefix, "speculative", "method"],
                                 f"{dep.engine} {version} has no speculative method '{spec.method}'",
                                 valid=sorted(methods))
        if spec.method == "mtp" and model.model_type not in (types := mtp_model_types(adv)):
            raise InvalidRequest([*prefix, "speculative", "method"],
                                 f"{model.id} ({model.model_type}) has no MTP modules; architectures with them: "
                                 f"{', '.join(sorted(types))}", valid=sorted(set(methods) - {"mtp"}))
        if spec.acceptance_rate is None and levers.default_acceptance(spec.method, None) is None:
            raise InvalidRequest([*prefix, "speculative", "acceptance_rate"],
                                 f"no sourced acceptance rate for method {spec.method}: state acceptance_rate "
                                 "(0..1) for your prompts and draft; methods with a default: "
                                 + ", ".join(m for m in ("eagle3", "mtp") if levers.default_acceptance(m, None)))
        if spec.method == "draft_model" and spec.draft_model not in adv.index["model"]:
            raise InvalidRequest([*prefix, "speculative", "draft_model"],
                                 f"unknown draft model '{spec.draft_model}' (GET /v1/models lists the catalog)")
    if dep.cpu_offload_gb is not None:
        if eng.cpu_offload is None:
            with_offload = sorted(f"{e.engine} {e.version}" for e in levers.engine_levers if e.cpu_offload)
            raise InvalidRequest([*prefix, "cpu_offload_gb"], f"{dep.engine} {version} has no weight offload to "
                                 f"host memory; engine versions with it: {', '.join(with_offload)}",
                                 valid=with_offload)
        if levers.host_link_bw_gb_s_per_direction(dep.gpu) is None:
            raise InvalidRequest([*prefix, "cpu_offload_gb"], f"the host link of {dep.gpu} is not in the catalog")
    if dep.kv_offload_gb is not None:
        if eng.kv_offload is None:
            with_kv = sorted(f"{e.engine} {e.version}" for e in levers.engine_levers if e.kv_offload)
            raise InvalidRequest([*prefix, "kv_offload_gb"], f"{dep.engine} {version} has no KV-cache offload to "
                                 f"host memory; engine versions with it: {', '.join(with_kv)}", valid=with_kv)
        if levers.host_link_bw_gb_s_per_direction(dep.gpu) is None:
            raise InvalidRequest([*prefix, "kv_offload_gb"], f"the host link of {dep.gpu} is not in the catalog")
        if dep.engine_args.enable_prefix_caching is False:
            raise InvalidRequest([*prefix, "kv_offload_gb"], "a host KV tier holds prefix-cache blocks: it needs "
                                 "prefix caching (engine_args.enable_prefix_caching is false)")


def lever_choice(adv: Advisor, model: ModelSpec, dep: Deployment, wl: Workload) -> LeverChoice:
    """The figures ``dep``'s levers use (``check_levers`` passed)."""
    spec = dep.speculative
    a, source, default = 0.0, None, None
    if spec is not None:
        if spec.acceptance_rate is not None:
            a = spec.acceptance_rate
        else:
            default = default_acceptance_at(adv, model, spec.method, spec.num_speculative_tokens)
            assert default is not None   # check_levers refused a method without a default
            a, source = default.acceptance_rate, acceptance_source(default)
    link = adv.levers.host_link_bw_gb_s_per_direction(dep.gpu) if dep.cpu_offload_gb or dep.kv_offload_gb else None
    return LeverChoice(
        method=spec.method if spec else None, num_speculative_tokens=spec.num_speculative_tokens if spec else 0,
        acceptance_rate=a, acceptance_source=source, default_acceptance=default, host_link_gb_s=link,
        offload_bytes=float(dep.cpu_offload_gb or 0.0) * GB_BYTES, prefix_hit_rate=hit_rate(dep, wl),
        kv_offload_bytes=float(dep.kv_offload_gb or 0.0) * GB_BYTES,
        prefix_working_set_tok=float(wl.prefix_working_set_tokens or 0))


def default_acceptance_at(adv: Advisor, model: ModelSpec, method: str, k: int) -> AcceptanceAt | None:
    """The catalog's acceptance rate for ``method`` on ``model`` at draft length ``k`` (levers.yaml, interpolated
    in k between measurements; ``Levers.default_acceptance_at``)."""
    types = adv.model_types
    return adv.levers.default_acceptance_at(method, model.id, k, types)


def acceptance_source(d: AcceptanceAt) -> str:
    """The measurement(s) a default acceptance comes from, with their sources, and how it was taken from them."""
    def one(i: int) -> str:
        m = d.measurements[i]
        return f"{m.id}: {m.acceptance_rate:g} at k={m.num_speculative_tokens}, {m.source} ({m.workload})"

    if d.basis == "measured":
        return one(0)
    if d.basis == "interpolated":
        return f"interpolated linearly in k between {one(0)} and {one(1)}"
    return f"the nearest measured k, held flat: {one(0)}"


def draft_repository(adv: Advisor, model: ModelSpec, dep: Deployment) -> str | None:
    """The draft the launch names: the request's, else for eagle3 the head the model's acceptance figure was
    measured with (levers.yaml), else None."""
    spec = dep.speculative
    if spec is None or spec.draft_model is not None:
        return spec.draft_model if spec else None
    m = adv.levers.default_acceptance(spec.method, model.id)
    return m.draft if m is not None and m.model == model.id else None


def with_launch_levers(adv: Advisor, spec: LaunchSpec, dep: Deployment, wl: Workload | None,
                       model: ModelSpec | None) -> LaunchSpec:
    """``spec`` with ``dep``'s levers, and prefix caching asked for where the workload has hits and the request
    left it to the engine (rendered only where the engine's default is not known to be on)."""
    s = dep.speculative
    draft = draft_repository(adv, model, dep) if s is not None and model is not None else (s.draft_model if s else None)
    prefix = spec.enable_prefix_caching
    if prefix is None and wl is not None and hit_rate(dep, wl):
        prefix = True
    if dep.kv_offload_gb:    # the host tier holds prefix-cache blocks
        prefix = True
    return replace(spec, enable_prefix_caching=prefix, cpu_offload_gb=dep.cpu_offload_gb,
                   kv_offload_gb=dep.kv_offload_gb,
                   speculative=SpeculativeLaunch(s.method, s.num_speculative_tokens, draft) if s else None)


@dataclass(frozen=True)
class DraftSizes:
    """Bytes per GPU of a draft (arrays, one per candidate): what memory holds, what every draft pass reads
    whatever the batch, and the routed experts of an MoE draft, of which a pass reads the share its tokens
    route to (``with_levers``)."""

    weights_bytes: F
    pass_bytes: F
    expert_bytes: F


def mtp_modules(adv: Advisor, model: ModelSpec) -> int:
    """MTP modules ``model``'s checkpoint ships (levers.yaml mtp_modules, by model or architecture); an MTP
    checkpoint has at least one."""
    types = adv.model_types
    return adv.levers.mtp_modules_of(model.id, model.model_type, types) or 1


def draft_sizes(t: Tables, c: Candidates, model: ModelSpec, model_idx: int, draft_idx: int | None,
                method: str | None, modules: int) -> DraftSizes:
    """The draft of candidates ``c`` (one model, one method):

    - MTP: ``modules`` modules of the model's own kind (``moe_layout.mtp_params``; DeepSeek-V3: an MoE layer
      with every routed expert, 11.61 B parameters), stored as the checkpoint stores the model's own layers
      (``Tables.nonrouted_w_bytes``, ``routed_w_bytes``) and placed as they are (the routed experts over the
      stage's tp x dp GPUs, the rest split by TP); the embedding and LM head are the
      main model's, so memory adds none, but each pass reads the LM head (its logits), and one module;
    - EAGLE-3 head: one decoder layer of the target's dense weights plus its own LM head (head sizes are not in
      the catalog);
    - draft model: its whole weights in the target's dtype; n-gram lookup: nothing."""
    tp = c.tp
    zero = np.zeros(len(tp))
    m = model_idx
    if method == "mtp":
        p = mtp_params(model, modules)
        dp = c.dp_ranks
        dense = p.dense_params * t.nonrouted_w_bytes[m, c.wdtype] / tp
        experts = p.routed_expert_params * t.routed_w_bytes[m, c.wdtype] / np.maximum(tp * dp, c.ep)
        head_read = float(t.lm_head_params[m]) * t.act_bytes / tp
        return DraftSizes(weights_bytes=dense + experts, pass_bytes=dense / modules + head_read,
                          expert_bytes=experts / modules)
    if method == "eagle3":
        layer_params = float(t.linear_params[m] - t.expert_params[m]) / max(float(t.layers[m]), 1.0)
        layer = layer_params * t.nonrouted_w_bytes[m, c.wdtype]
        head = (layer + float(t.lm_head_params[m]) * t.act_bytes) / tp
        return DraftSizes(weights_bytes=head, pass_bytes=head, expert_bytes=zero)
    if method == "draft_model" and draft_idx is not None:
        d, w_bytes = draft_idx, t.w_bits[c.wdtype] / 8.0
        whole = (float(t.linear_params[d]) * w_bytes + float(t.embedding_params[d]) * t.act_bytes) / tp
        return DraftSizes(weights_bytes=whole, pass_bytes=whole, expert_bytes=zero)
    return DraftSizes(weights_bytes=zero, pass_bytes=zero, expert_bytes=zero)


def draft_kv_tok_bytes(t: Tables, c: Candidates, s: Static, method: str | None, draft_idx: int | None) -> F:
    """KV bytes per GPU the draft keeps per token of a sequence: an EAGLE-3 head or MTP module is one attention
    layer of the target's shape (its own KV cache, in the engine's pool); a draft model all of its layers; n-gram
    lookup nothing."""
    if method in ("eagle3", "mtp"):
        return np.asarray(s.kv_tok_layer_bytes, dtype=np.float64)
    if method == "draft_model" and draft_idx is not None:
        d = draft_idx
        heads_gpu = np.ceil(t.kv_heads[d] / c.tp)
        elems = np.where(t.is_mla[d], t.kv_elems_per_layer[d], t.kv_elems_per_layer[d] * heads_gpu / t.kv_heads[d])
        return np.asarray(t.kv_bits[c.kvdtype] / 8.0 * elems * t.layers[d], dtype=np.float64)
    return np.zeros(len(c.tp))


def speculative_seq_bytes(s: Static, spec_tokens: F, draft_kv_tok: F) -> tuple[F, F]:
    """KV bytes per GPU of one sequence with speculation, at the full context and at the workload's mean: the
    engine reserves ``k`` slots per running sequence for the draft tokens a verify step writes (vLLM's lookahead
    slots), and the draft's own KV covers the same tokens. ``spec_tokens`` 0 with no draft KV: ``s``'s own."""
    full_tok = s.context_tok + spec_tokens
    mean_tok = s.isl + s.osl / 2.0 + spec_tokens
    return (s.kv_seq_bytes(full_tok) + draft_kv_tok * full_tok, s.kv_seq_bytes(mean_tok) + draft_kv_tok * mean_tok)


def with_lever_terms(adv: Advisor, t: Tables, c: Candidates, s: Static, deps: list[Deployment],
                     wl: Workload, model: ModelSpec) -> Static:
    """``s`` with each deployment's levers: the step model's lever inputs, and memory with the draft's weights
    added and the offloaded weights removed (the KV pool and what fits follow). ``s`` itself when no deployment
    has a lever and the workload no prefix-cache hits."""
    if not any(d.speculative or d.cpu_offload_gb for d in deps) and not any(hit_rate(d, wl) for d in deps):
        return s
    choices = [lever_choice(adv, model, d, wl) for d in deps]
    modules = mtp_modules(adv, model) if any(ch.method == "mtp" for ch in choices) else 1
    sizes = [draft_sizes(t, take_rows(c, np.asarray([i])), model, int(c.model[i]),
                         adv.index["model"].get(d.speculative.draft_model or "") if d.speculative else None,
                         ch.method, modules)
             for i, (d, ch) in enumerate(zip(deps, choices, strict=True))]
    draft_weights = np.concatenate([z.weights_bytes for z in sizes])
    offload = np.asarray([ch.offload_bytes for ch in choices])
    for i, (d, off) in enumerate(zip(deps, offload, strict=True)):
        if off > float(s.weights[i]):
            raise InvalidRequest(["deployment", "cpu_offload_gb"],
                                 f"cpu_offload_gb {d.cpu_offload_gb} exceeds the {float(s.weights[i]) / GB_BYTES:.1f} "
                                 "GB of weights on each GPU")
    weights = s.weights + draft_weights - offload
    spec_tokens = np.asarray([float(ch.num_speculative_tokens) for ch in choices])
    draft_kv = np.zeros(len(deps))
    for i, (d, ch) in enumerate(zip(deps, choices, strict=True)):
        if ch.method is not None:
            one = take_rows(c, np.asarray([i]))
            draft_kv[i] = draft_kv_tok_bytes(t, one, take_rows(s, np.asarray([i])), ch.method,
                                             adv.index["model"].get(d.speculative.draft_model or "")
                                             if d.speculative else None)[0]
    seq_full, seq_mean = speculative_seq_bytes(s, spec_tokens, draft_kv)
    cap = capacity(t, c, weights, s.overhead, s.runnable, seq_full, seq_mean)
    return replace(
        s, weights=weights, activations=cap.activations, kv_pool=cap.kv_pool, fits=cap.fits,
        max_conc_replica=cap.max_conc, cap_mean=cap.cap_mean, seq_full=seq_full, seq_mean=seq_mean,
        spec_tokens=spec_tokens, draft_kv_tok_bytes=draft_kv,
        spec_acceptance=np.asarray([ch.acceptance_rate for ch in choices]),
        draft_pass_bytes=np.concatenate([z.pass_bytes for z in sizes]),
        draft_expert_bytes=np.concatenate([z.expert_bytes for z in sizes]),
        prefix_hit_rate=np.asarray([ch.prefix_hit_rate for ch in choices]), offload_bytes=offload,
        kv_offload_bytes=np.asarray([ch.kv_offload_bytes for ch in choices]),
        prefix_working_set_tok=np.asarray([ch.prefix_working_set_tok for ch in choices]),
        host_link_bytes_s=np.asarray([(ch.host_link_gb_s or 1.0) * GB_BYTES for ch in choices]))


def lever_notes(ch: LeverChoice, pp: int) -> list[str]:
    """What the answer says about the levers it used: the acceptance rate and its source, the offload floor,
    the prefix-cache assumption."""
    notes: list[str] = []
    if ch.method is not None:
        k, a = ch.num_speculative_tokens, ch.acceptance_rate
        tau = float(expected_tokens_per_step_tok(a, k))
        src = (f"the catalog's default for {ch.method}, {ch.acceptance_source}" if ch.acceptance_source
               else "the request's figure")
        notes.append(f"speculative decoding ({ch.method}, k={k}): acceptance rate {a:g} ({src}) gives "
                     f"{tau:.2f} tokens per sequence per verify step; each step verifies k+1 tokens per sequence "
                     "and runs k draft passes; memory counts the draft's weights (in weights) and, per sequence, k "
                     "slots for the draft tokens and the draft's own KV cache (in kv_bytes_per_token)")
        d = ch.default_acceptance
        if d is not None and d.basis == "flat_above":
            notes.append(f"the default acceptance rate was measured at k={d.measured_tokens[0]} at most, not k={k}: "
                         "it is held flat beyond, which is optimistic for a longer k (measured rates fall with the "
                         "draft position)")
        elif d is not None and d.basis == "flat_below":
            notes.append(f"the default acceptance rate was measured at k={d.measured_tokens[0]} at least, not "
                         f"k={k}: it is held flat below, which is likely conservative for a shorter k (measured "
                         "rates fall with the draft position)")
    if ch.offload_bytes:
        floor_ms = ch.offload_bytes / ((ch.host_link_gb_s or math.inf) * GB_BYTES) * pp * 1e3
        notes.append(f"CPU offload: {ch.offload_bytes / GB_BYTES:g} GB of weights per GPU stream over the "
                     f"{ch.host_link_gb_s:g} GB/s host link every forward pass: at least {floor_ms:.1f} ms per "
                     "step, added to the step (no prefetch overlap)")
    if ch.prefix_hit_rate:
        notes.append(f"prefix cache: {ch.prefix_hit_rate:.0%} of each prompt's tokens are served from the cache "
                     "and skip prefill compute (the uncached suffix still attends over the whole prompt); "
                     "assumed multi-turn history, whose KV blocks belong to one conversation: compute is saved, "
                     "KV memory is not shared (a shared system prompt would also save memory); "
                     + ("cached blocks are assumed not evicted (workload.prefix_working_set_tokens not given)"
                        if not ch.prefix_working_set_tok else
                        "evicted blocks are recomputed or reloaded as the prefix working-set note says"))
    if ch.kv_offload_bytes and (not ch.prefix_hit_rate or not ch.prefix_working_set_tok):
        why = ("the workload has no prefix-cache hits" if not ch.prefix_hit_rate else
               "without workload.prefix_working_set_tokens every hit is taken as served from GPU blocks")
        notes.append(f"KV offload ({ch.kv_offload_bytes / GB_BYTES:g} GB per GPU of host memory): no modelled "
                     f"gain: {why}")
    return notes


def prefix_tier_note(s: Static, params: Params) -> str | None:
    """What the answer says about a described working set of reusable prefixes (one candidate): where its hits
    are served from, and the host tier's load against recomputing. None without a working set or hits."""
    if not np.any(s.prefix_working_set_tok) or not np.any(s.prefix_hit_rate):
        return None
    tiers = step_model(s, params).prefix_tiers
    if tiers is None:
        return None

    def v(x: Any) -> float:
        return float(np.ravel(x)[0])

    w = v(s.prefix_working_set_tok)
    gpu, host = v(tiers.gpu_share), v(tiers.host_share)
    text = (f"prefix working set: {w:,.0f} tokens of reusable prefixes against {v(tiers.free_tok):,.0f} tokens the "
            f"KV pool keeps beside the {v(tiers.running_seqs):.1f} running sequences per replica; assumed LRU "
            f"eviction with every prefix equally likely to be reused: {gpu:.0%} of the hits are found in GPU blocks")
    if v(s.kv_offload_bytes):
        text += (f", {host:.0%} in the host tier ({v(tiers.host_tok):,.0f} tokens), loaded over the "
                 f"{v(s.host_link_bytes_s) / GB_BYTES:g} GB/s host link in {v(tiers.host_load_s) * 1e3:.2f} ms per "
                 f"request (added to TTFT; recomputing them would take about {v(tiers.recompute_s) * 1e3:.2f} ms of "
                 "prefill)")
    rest = max(1.0 - gpu - host, 0.0)
    text += f"; {rest:.0%} are recomputed" if rest > 0 else "; none is recomputed"
    if rest > 0 and not v(s.kv_offload_bytes):
        text += " (a host KV tier, deployment.kv_offload_gb, would hold them)"
    return text
