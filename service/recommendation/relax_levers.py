"""The levers in an answer that offers nothing: used when the request allows them, else named as a relaxation
with their effect, each predicted as POST /v1/predictions predicts it.

- CPU offload when no allowed deployment holds the model in memory: the smallest whole number of GB per GPU
  that fits it, on the allowed GPU, dtype and TP (1, or the largest within a node and max_gpus) where it is
  fastest.
- Speculative decoding when the deployments closest to the bounds miss them: each with the method the catalog
  has the model's own acceptance figure and draft for (an EAGLE-3 head, or MTP), at that figure's k.
- A host KV tier (KV offload) when the workload's prefix working set outgrows a deployment's free KV blocks
  and reloading a token over the host link is faster than prefilling it: sized to hold the rest of the set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from gpu_catalog.schema import ModelSpec
from service.core.levers import kv_tier_gb
from service.core.step_model import step_model
from service.engines.checkpoints import offered_weight_dtypes
from service.errors import InvalidRequest
from service.prediction.analytic import analyse
from service.prediction.launch_settings import settings_for
from service.prediction.levers import engine_version, hit_rate
from service.recommendation import verify
from service.recommendation.offer import predicted_against
from service.recommendation.scenarios import Applied
from service.recommendation.space import tp_sizes
from service.schemas.predictions import Deployment, EngineArgs, Speculative, Workload
from service.schemas.recommendations import DEFAULT_MAX_GPUS, Recommendation, RecommendationRequest, Relaxation
from service.units import GB_BYTES, MS_PER_S

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

# the engine the offload lever runs on (levers.yaml engine_levers: only vLLM has --cpu-offload-gb)
OFFLOAD_ENGINE: Literal["vllm"] = "vllm"
# dtypes tried when the request does not name any: the checkpoint's own 16 bits first
DEFAULT_OFFLOAD_DTYPES = ("bf16", "fp16")


def offload_tps(adv: Advisor, model: ModelSpec, ap: Applied, gpu: str) -> list[int]:
    """The tensor-parallel sizes offload is tried at on ``gpu``: 1, and the largest of the search's TP grid within
    one node and max_gpus that the model's heads divide (split over more GPUs, each offloads less and streams
    less over its own host link every step)."""
    limit = min(adv.gpus[gpu].max_gpus_per_node, int(ap.constraints.max_gpus or DEFAULT_MAX_GPUS))
    tps = tp_sizes(model, limit)
    return sorted({1, tps[-1]}) if tps else [1]


def with_offload(adv: Advisor, model: ModelSpec, req: RecommendationRequest, dep: Deployment, need_bytes: float,
                 weights_bytes: float) -> Deployment | None:
    """``dep`` with the smallest whole number of GB per GPU offloaded that covers ``need_bytes`` (its settings
    explicit, as the search's deployments state them); None when it fits without offload, when that would be
    all of its ``weights_bytes``, or when the offload cannot run."""
    if need_bytes <= 0:
        return None
    gb = float(math.ceil(need_bytes / GB_BYTES))
    if gb * GB_BYTES >= weights_bytes:
        return None
    settings = settings_for(adv, dep, adv.gpus[dep.gpu], req.workload)[0]
    args = EngineArgs(max_num_seqs=settings.max_num_seqs, max_num_batched_tokens=settings.max_num_batched_tokens,
                      gpu_memory_utilization=settings.memory_fraction, max_model_len=settings.max_model_len)
    return runnable(adv, model, req.workload, dep.model_copy(update={
        "cpu_offload_gb": gb, "engine_version": settings.engine_version, "engine_args": args}))


def offload_dtypes(adv: Advisor, model: ModelSpec, named: list[str] | None) -> list[str]:
    """The weight dtypes offload trials use: those the request names, else the checkpoint's own (16 bits, or
    the published dtypes of a release that is not 16-bit); only dtypes the model can be offered in."""
    offered = offered_weight_dtypes(adv.catalog.resolve_model(model.id))
    if offered is None:
        return list(named or DEFAULT_OFFLOAD_DTYPES)
    return [d for d in (named or sorted(offered)) if d in offered]


def offload_trials(adv: Advisor, model: ModelSpec, req: RecommendationRequest,
                   ap: Applied) -> list[tuple[Deployment, float]]:
    """On each allowed GPU with a host link, offered dtype and TP of ``offload_tps``: the deployment with the
    smallest whole number of GB per GPU offloaded that holds one sequence of the workload's context, and its
    TPOT in seconds as POST /v1/predictions predicts it without simulation (both analysed for all at once)."""
    cons = ap.constraints
    wl = req.workload
    gpus = [g for g in (cons.gpus or sorted(adv.gpus)) if adv.levers.host_link_bw_gb_s_per_direction(g) is not None]
    version = (cons.engine_versions or {}).get(OFFLOAD_ENGINE)
    plain: list[Deployment] = []
    for g in gpus:
        for d in offload_dtypes(adv, model, cons.weight_dtypes):
            for tp in offload_tps(adv, model, ap, g):
                dep = runnable(adv, model, wl, Deployment(gpu=g, weight_dtype=d, engine=OFFLOAD_ENGINE, tp=tp,
                                                          gpu_count=tp, engine_version=version))
                if dep is not None:
                    plain.append(dep)
    if not plain:
        return []
    s = analyse(adv, model, wl, plain).static
    offloaded: list[Deployment] = []
    for i, dep in enumerate(plain):
        capacity_bytes = adv.gpus[dep.gpu].memory_gb * GB_BYTES
        frac = settings_for(adv, dep, adv.gpus[dep.gpu], wl)[0].memory_fraction
        # vLLM's budget is a share of the whole memory: weights, activations, reserve and one sequence within it
        need = float(s.weights[i] + s.activations[i] + s.overhead[i] + s.seq_full[i]) - frac * capacity_bytes
        if (off := with_offload(adv, model, req, dep, need, float(s.weights[i]))) is not None:
            offloaded.append(off)
    if not offloaded:
        return []
    res = analyse(adv, model, wl, offloaded).res
    return [(dep, float(res.tpot_s[i])) for i, dep in enumerate(offloaded) if bool(res.fits[i])]


def offload_offer(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied) -> Recommendation | None:
    """With cpu_offload allowed and nothing else fitting: the fastest of ``offload_trials`` as the
    answer's recommendation, predicted as POST /v1/predictions predicts it, when it meets every bound."""
    trials = offload_trials(adv, model, req, ap)
    if not trials:
        return None
    rec, over = predicted_against(adv, model, req, ap, min(trials, key=lambda t: t[1])[0], {})
    return None if over else rec


def model_speculative(adv: Advisor, model: ModelSpec) -> Speculative | None:
    """The speculation the catalog has the model's own figure for (EAGLE-3 with a named head first, then MTP),
    at the k it was measured with; None without one."""
    for method in ("eagle3", "mtp"):
        m = adv.levers.default_acceptance(method, model.id)
        if m is not None and m.model == model.id and (method == "mtp" or m.draft):
            return Speculative(method=method, num_speculative_tokens=m.num_speculative_tokens,
                               draft_model=m.draft if method == "eagle3" else None)
    return None


def runnable(adv: Advisor, model: ModelSpec, wl: Workload, dep: Deployment) -> Deployment | None:
    """``dep`` if the engine can run it for ``wl`` (``Advisor.check_runnable``), else None."""
    try:
        adv.check_runnable(model, dep, wl, ["deployment"])
    except InvalidRequest:
        return None
    return dep


def first_meeting(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                  trials: Iterable[Deployment | None]) -> Recommendation | None:
    """The prediction of the first of ``trials`` (None: skipped) that meets every bound of ``ap``; trials after it
    are not predicted."""
    for trial in trials:
        if trial is None:
            continue
        rec, over = predicted_against(adv, model, req, ap, trial, {})
        if not over:
            return rec
    return None


def speculative_trial(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                      near: list[Deployment]) -> Recommendation | None:
    """The first of ``near`` that meets every bound of ``ap`` with the model's speculation (``model_speculative``)."""
    spec = model_speculative(adv, model)
    if spec is None:
        return None
    return first_meeting(adv, model, req, ap, (runnable(adv, model, req.workload,
                                                        dep.model_copy(update={"speculative": spec}))
                                               for dep in near))


def speculative_offer(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                      near: list[Deployment]) -> Recommendation | None:
    """With speculative allowed: the first deployment closest to the bounds that meets them with speculation."""
    return speculative_trial(adv, model, req, ap, near) if "speculative" in ap.constraints.allowed_levers else None


def kv_offload_size_gb(adv: Advisor, model: ModelSpec, wl: Workload, dep: Deployment) -> float | None:
    """The host KV tier worth giving ``dep`` (GB per GPU, whole GB): the part of the workload's prefix working set
    the GPU's free KV blocks do not hold, when loading a token over the host link is faster than prefilling it.
    None without a working set or hits, when the GPU pool holds the set, when loading is not faster, or when the
    engine version or the GPU's host link cannot serve a tier (``dep`` already having one: None too)."""
    if not wl.prefix_working_set_tokens or not hit_rate(dep, wl) or dep.kv_offload_gb:
        return None
    eng = adv.levers.engine(dep.engine, engine_version(adv, dep))
    link_gb_s = adv.levers.host_link_bw_gb_s_per_direction(dep.gpu)
    if eng is None or eng.kv_offload is None or link_gb_s is None:
        return None
    an = analyse(adv, model, wl, [dep])
    tiers = step_model(an.static, an.params).prefix_tiers
    if tiers is None or not bool(an.res.fits[0]):
        return None
    gb = float(kv_tier_gb(tiers, float(wl.prefix_working_set_tokens), link_gb_s)[0])
    return gb if gb > 0 else None


def with_kv_offload(adv: Advisor, model: ModelSpec, req: RecommendationRequest, dep: Deployment) -> Deployment | None:
    """``dep`` with the host KV tier ``kv_offload_size_gb`` gives it (None: none worth giving, or it cannot run)."""
    gb = kv_offload_size_gb(adv, model, req.workload, dep)
    if gb is None:
        return None
    return runnable(adv, model, req.workload,
                    dep.model_copy(update={"kv_offload_gb": gb, "engine_version": engine_version(adv, dep)}))


def kv_offload_trial(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                     near: list[Deployment]) -> Recommendation | None:
    """The first of ``near`` that meets every bound of ``ap`` with a host KV tier (``with_kv_offload``)."""
    return first_meeting(adv, model, req, ap, (with_kv_offload(adv, model, req, dep) for dep in near))


def kv_offload_offer(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                     near: list[Deployment]) -> Recommendation | None:
    """With kv_offload allowed: the first deployment closest to the bounds that meets them with a host KV tier."""
    return kv_offload_trial(adv, model, req, ap, near) if "kv_offload" in ap.constraints.allowed_levers else None


def with_kv_offload_recs(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                         recs: list[Recommendation]) -> list[Recommendation]:
    """With kv_offload allowed and a prefix working set beyond a recommendation's free KV blocks: the
    recommendation with a host KV tier instead, when its prediction meets every bound with a lower TTFT at the
    answer's percentile (the tier takes host memory, not GPUs: the price is the same). Its replica count is the
    one found without the tier."""
    if "kv_offload" not in ap.constraints.allowed_levers or not req.workload.prefix_working_set_tokens:
        return recs
    out = []
    for rec in recs:
        trial = with_kv_offload(adv, model, req, rec.deployment) if rec.predicted is not None else None
        if trial is not None and rec.predicted is not None:
            new, over = predicted_against(adv, model, req, ap, trial, {})
            before = verify.sla_values(rec.predicted, ap.percentile)["ttft_ms"]
            if not over and new.predicted is not None and \
                    verify.sla_values(new.predicted, ap.percentile)["ttft_ms"] < before:
                rec = new.model_copy(update={"rank": rec.rank})
        out.append(rec)
    return out


def relax_levers(adv: Advisor, model: ModelSpec, req: RecommendationRequest, ap: Applied,
                 nothing_fits: bool, near: list[Deployment] | None = None) -> list[Relaxation]:
    """The levers the request did not allow, where one would make the answer feasible: CPU offload when
    nothing allowed fits, speculative decoding on the deployments closest to the bounds."""
    cons = ap.constraints
    out: list[Relaxation] = []
    if near and "speculative" not in cons.allowed_levers:
        rec = speculative_trial(adv, model, req, ap, near)
        if rec is not None and rec.deployment.speculative is not None and rec.predicted is not None:
            sp = rec.deployment.speculative
            out.append(Relaxation(kind="speculative", value=sp.model_dump(exclude_none=True),
                                  deployment=rec.deployment, detail=(
                f"speculative decoding ({sp.method}, k={sp.num_speculative_tokens}) on {rec.deployment.replicas} x "
                f"TP{rec.deployment.tp} {rec.deployment.gpu} meets every bound at about "
                f"{rec.predicted.tpot_ms:.1f} ms TPOT; allow it with constraints.levers including speculative")))
    if near and "kv_offload" not in cons.allowed_levers and req.workload.prefix_working_set_tokens:
        rec = kv_offload_trial(adv, model, req, ap, near)
        if rec is not None and rec.deployment.kv_offload_gb and rec.predicted is not None:
            d = rec.deployment
            ttft_ms = verify.sla_values(rec.predicted, ap.percentile)["ttft_ms"]
            at = "" if ap.percentile == "mean" else f"{ap.percentile} "
            out.append(Relaxation(kind="kv_offload", value=d.kv_offload_gb, deployment=d, detail=(
                f"the prefix working set ({req.workload.prefix_working_set_tokens:,} tokens) outgrows the GPU's free "
                f"KV blocks, so most prefix-cache hits are recomputed: a host KV tier of {d.kv_offload_gb:g} GB per "
                f"GPU on {d.replicas} x TP{d.tp} {d.gpu} ({d.engine} {d.engine_version}) reloads them over the host "
                f"link instead and meets every bound at about {ttft_ms:.1f} ms {at}TTFT (host memory is "
                "not in the catalog: each node must have it); allow it with constraints.levers including "
                "kv_offload")))
    engines: list[str] = list(cons.engines or [OFFLOAD_ENGINE])
    if not nothing_fits or "cpu_offload" in cons.allowed_levers or OFFLOAD_ENGINE not in engines:
        return out
    trials = offload_trials(adv, model, req, ap)
    if not trials:
        return out
    dep, tpot_s = min(trials, key=lambda t: t[1])
    gb = dep.cpu_offload_gb or 0.0
    return [*out, Relaxation(kind="cpu_offload", value=gb, deployment=dep, detail=(
        f"memory is the only obstacle: offloading {gb:g} GB per GPU to host memory fits it on "
        f"{'one' if dep.tp == 1 else f'{dep.tp} x'} {dep.gpu}{'' if dep.tp == 1 else f' (TP{dep.tp})'} "
        f"({dep.weight_dtype}, {dep.engine}) at about {tpot_s * MS_PER_S:.0f} ms TPOT (the weights cross the host "
        "link every step); allow it with constraints.levers including cpu_offload"))]
