"""The candidate space of a recommendation: the allowed layouts (GPU x engine x dtypes x TP/PP), the engine
settings and replica counts tried, and a layout-and-setting's terms that depend on neither the load nor the
replica count (``Units``), built once per request and shared by its searches.

The only pruning is exact: a layout whose weights and fixed reserve alone overflow a GPU (at the smallest
settings of the grid) cannot fit with any settings, so its settings and replicas are never expanded.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from gpu_catalog.schema import ModelSpec
from service.core.calibration import Calibration, calibration_engine, model_class
from service.core.costmodel import (
    MODES,
    Candidates,
    Params,
    ServeInputs,
    Static,
    StepModel,
    Tables,
    capacity,
    static_terms,
    step_model,
)
from service.core.levers import kv_tier_gb
from service.core.residuals import Correction, correction
from service.engines.defaults import is_current
from service.errors import InvalidRequest
from service.prediction.analytic import load_of
from service.schemas.predictions import Workload
from service.units import GB_BYTES

if TYPE_CHECKING:
    from service.prediction.advisor import Advisor

F = NDArray[np.float64]

# The engine-settings grid: each engine's own default for the GPU, plus these (deduplicated). A search
# grid, not measured values: fewer sequences per step lower TPOT at high load; a smaller token budget
# shortens each mixed step (and frees activation memory for the KV cache).
MAX_NUM_SEQS_GRID = (64, 256)
MAX_BATCHED_TOKENS_GRID = (4096,)
# Settings per layout before deduplication: the engine default and each grid value, of both settings.
N_SETTINGS = (1 + len(MAX_NUM_SEQS_GRID)) * (1 + len(MAX_BATCHED_TOKENS_GRID))
# Replica counts tried (each bounded by max_gpus, and by the concurrency: idle replicas only cost).
REPLICA_GRID = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 192, 256, 384, 512)
REPLICAS = np.asarray(REPLICA_GRID, dtype=np.float64)
# Layout tables a recommender keeps per calibration (one per model shape and set of allowed GPUs, engines,
# dtypes and GPU counts; most requests allow them all): a bound on memory, not a tuned figure.
LAYOUT_TABLES_KEPT = 64
# Tensor and pipeline sizes tried (TP within a node; PP > 1 only when multi_node is allowed).
TP_GRID = (1, 2, 4, 8, 16, 32, 64, 72)
PP_GRID_MULTI_NODE = (2, 4, 8)


def floors(params: Params, sm: StepModel) -> tuple[F, F]:
    """Latency floors no prediction goes below: TTFT, the front end and the prompt's own compute (alone, or in
    chunks carried by decode steps, which read the weights for the decodes anyway: the smaller), at any
    percentile; TPOT, one decode step of one sequence (steps only grow with the batch)."""
    carried_s = sm.s.isl * sm.c_prefill_s
    return (sm.ttft_fixed_s + np.minimum(sm.prefill_alone_s, carried_s),
            sm.decode_step(np.ones(len(sm.s.isl)))[0])


# engine, version, GPU, weight dtype, KV dtype, TP, PP, attention DP ranks (their experts split EP = TP x DP)
Layout = tuple[str, str, str, str, str, int, int, int]


class Layouts:
    """A search's layouts by index, in blocks of one engine version on one GPU (weight dtype x KV dtype x
    TP/PP pair, the last varying fastest; the order of ``Units.lay``). A layout's tuple is made when it is
    asked for: a search has tens of thousands of layouts, an answer names a few."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, str, str, list[str], list[str], list[tuple[int, int, int]]]] = []
        self.starts: list[int] = []
        self.n = 0

    def add(self, engine: str, version: str, gpu: str, wds: list[str], kvs: list[str],
            pairs: list[tuple[int, int, int]]) -> None:
        self.blocks.append((engine, version, gpu, wds, kvs, pairs))
        self.starts.append(self.n)
        self.n += len(wds) * len(kvs) * len(pairs)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Layout:
        if not 0 <= i < self.n:
            raise IndexError(i)
        b = bisect_right(self.starts, i) - 1
        e, v, g, wds, kvs, pairs = self.blocks[b]
        r = i - self.starts[b]
        tp, pp, dp = pairs[r % len(pairs)]
        return e, v, g, wds[r // (len(kvs) * len(pairs))], kvs[(r // len(pairs)) % len(kvs)], tp, pp, dp



@dataclass
class Solves:
    """Serving solves of a search's units at one load, by candidate (a unit at a replica option; flat index
    ``option x units + unit``, so that the few options a scope probes stay in few memory pages), filled as
    the search probes them: a candidate probed again (the answer's re-scoring of the bisection's verdicts,
    the account of an infeasible search) is solved once."""

    units: int
    done: NDArray[np.bool_]
    ttft_s: F                               # at the SLA's percentile (analytic tail)
    tpot_s: F
    out_tok_s: F
    overloaded: NDArray[np.bool_]

    @classmethod
    def empty(cls, units: int) -> Solves:
        """Nothing solved yet: the figures are read only where ``done`` (left unset: they run to megabytes)."""
        n = units * len(REPLICA_GRID)
        return cls(units=units, done=np.zeros(n, dtype=bool), ttft_s=np.empty(n), tpot_s=np.empty(n),
                   out_tok_s=np.empty(n), overloaded=np.empty(n, dtype=bool))

    def at(self, u: NDArray[np.int64], j: NDArray[np.int64]) -> NDArray[np.int64]:
        """Flat index of units ``u`` at options ``j``."""
        return j * self.units + u


@dataclass(frozen=True)
class LayoutTable:
    """A request's allowed layouts (``Layouts``; rows in its order) and what depends on them alone."""

    layouts: Layouts
    lay: NDArray[np.int64]                  # per layout: GPU, weight dtype, KV dtype (table indices), TP, PP, DP
    dset: F                                 # per layout: engine default max_num_seqs, max tokens, memory share, budget,
                                            # whole-sequence KV reservation (1/0)
    price: F                                # per layout: USD per GPU-hour (NaN: no public price)
    params: F                               # per layout: fitted parameters (PARAM_NAMES order)
    seg_keys: list[tuple[str, str, str, str]]  # the calibration keys of the layouts' segments
    seg_of: NDArray[np.int64]               # per layout: its segment in seg_keys


@dataclass
class Units:
    """A search's units (layout x engine settings) and what depends on neither the load nor the replica
    count: built once per request and shared by its searches (the answer, the account of an infeasible
    one, the relaxations of the load and of the budget)."""

    table: LayoutTable                      # the allowed layouts, engine defaults, prices, parameters
    fits_min: NDArray[np.bool_]             # per layout: holds the weights at the smallest settings
    li: NDArray[np.int64]                   # per unit: its layout
    seqs: F
    toks: F
    mode: int                               # the workload's mode
    inputs: ServeInputs                     # the serving solve's inputs per unit (load and replicas set per probe)
    ttft_lb_s: F                            # per unit, latency floors: one request alone
    tpot_lb_s: F
    fits: NDArray[np.bool_]
    corr: Correction | None = None          # per layout: users' measurements nearby (service/core/residuals.py)
    kv_offload_gb: F | None = None          # per layout: the host KV tier its units are searched with, GB per GPU
    solves: dict[tuple[float, float | None], Solves] = field(default_factory=dict)   # by (load, quantile)


# What the searches of one request share: their Units, by everything that decides them.
SearchMemo = dict[tuple[Any, ...], Units | None]


def candidates(lay: NDArray[np.int64], dset: F, m_idx: int, wl: Workload, li: NDArray[np.int64], seqs: F, toks: F,
               reps: F, loads: F) -> Candidates:
    """Layouts ``li`` (rows of ``lay`` and ``dset``, as in ``Units``) at the given settings, replicas and
    loads, for the workload ``wl``."""
    n = len(li)
    tp, dp = lay[li, 3].astype(np.float64), lay[li, 5].astype(np.float64)
    return Candidates(
        model=np.full(n, m_idx, dtype=np.int64), gpu=lay[li, 0], wdtype=lay[li, 1], kvdtype=lay[li, 2],
        budget=dset[li, 3].astype(np.int64), tp=tp,
        pp=lay[li, 4].astype(np.float64), ep=np.where(dp > 1, tp * dp, 1.0), replicas=reps, max_num_seqs=seqs,
        max_batched_tok=toks, mem_fraction=dset[li, 2], reserve_full=dset[li, 4],
        input_tok=np.full(n, float(wl.input_tokens)),
        output_tok=np.full(n, float(wl.output_tokens)), mode=np.full(n, MODES[wl.mode], dtype=np.int64),
        load=loads, context_tok=np.full(n, float(wl.context_tokens)),
        first_wave_share=np.full(n, wl.first_wave_share), dp=dp)


def check_list(values: list[str] | None, known: dict[str, Any], field: str) -> list[str]:
    """The ids of ``constraints.<field>`` (all known ones when not given), each checked, in order, once."""
    if values is None:
        return list(known)
    for i, v in enumerate(values):
        if v not in known:
            raise InvalidRequest(["constraints", field, i], f"unknown id '{v}'; valid: {', '.join(sorted(known))}",
                                 title="Unknown id", valid=sorted(known))
    return list(dict.fromkeys(values))


class LayoutCache:
    """The layout tables of one calibration (``layout_table``), for the requests that allow the same layouts; a
    new calibration starts afresh. Replaced whole, never changed in place but by adding an entry."""

    def __init__(self) -> None:
        self.held: tuple[Calibration | None, dict[tuple[Any, ...], LayoutTable | None]] = (None, {})

    def for_calibration(self, cal: Calibration) -> dict[tuple[Any, ...], LayoutTable | None]:
        if self.held[0] is not cal or len(self.held[1]) >= LAYOUT_TABLES_KEPT:
            self.held = (cal, {})
        return self.held[1]


def prefix_working_set(wl: Workload, n: int) -> dict[str, Any]:
    """The Static fields a described prefix working set sets on ``n`` search units: the set, and the workload's
    whole load on each unit's one replica, so that the free KV blocks beside its running batch are those of
    the fewest replicas (the least: more replicas each run fewer sequences and keep more prefixes). Nothing
    without a working set."""
    if not wl.prefix_working_set_tokens:
        return {}
    return {"prefix_working_set_tok": float(wl.prefix_working_set_tokens), "load": np.full(n, load_of(wl))}


def units(adv: Advisor, cache: LayoutCache, model: ModelSpec, tables: Tables, m_idx: int, wl: Workload,
          versions: dict[str, str], gpus: list[str], wds: list[str], kvs: list[str], max_gpus: int,
          multi_node: bool, kv_offload: bool = False) -> Units | None:
    """The search's units (every setting of the grid of each allowed layout that can hold the weights)
    and what depends on neither the load nor the replica count: static terms, fitted parameters, latency
    floors. None when no layout is allowed."""
    table = layout_table(adv, cache, model, versions, gpus, wds, kvs, max_gpus, multi_node)
    if table is None:
        return None
    lay, dset = table.lay, table.dset
    L = len(table.layouts)
    # settings grid per layout: the engine default and the grid values
    seq_opts = [dset[:, 0]] + [np.full(L, float(v)) for v in MAX_NUM_SEQS_GRID]
    tok_opts = [dset[:, 1]] + [np.full(L, float(v)) for v in MAX_BATCHED_TOKENS_GRID]
    # exact prune: at the smallest settings of the grid a layout that does not fit never fits (memory
    # does not depend on the load or the replica count: one each stands in)
    li_all = np.arange(L)
    s_min = np.minimum.reduce(seq_opts)
    t_min = np.minimum.reduce(tok_opts)
    static = static_terms(tables, candidates(lay, dset, m_idx, wl, li_all, s_min, t_min, np.ones(L), np.ones(L)))
    if wl.prefix_cache_hit_rate:    # the prefix cache's lever (step_model leaves the cached prefix's prefill out)
        static = replace(static, prefix_hit_rate=float(wl.prefix_cache_hit_rate), **prefix_working_set(wl, L))
    fits_min = static.fits
    keep = np.flatnonzero(fits_min)
    # the units, setting-major; a setting equal to one before it for the same layout (a default equal
    # to a grid value) is left out
    opts = [(so[keep], to[keep]) for so in seq_opts for to in tok_opts]
    li_parts, s_parts, t_parts = [], [], []
    for o, (so, to) in enumerate(opts):
        new = np.ones(len(keep), dtype=bool)
        for so_before, to_before in opts[:o]:
            new &= (so != so_before) | (to != to_before)
        li_parts.append(keep[new])
        s_parts.append(so[new])
        t_parts.append(to[new])
    li_s = np.concatenate(li_parts)
    seqs_s = np.concatenate(s_parts)
    toks_s = np.concatenate(t_parts)
    m = len(li_s)
    # Per layout (at the smallest settings), what no engine setting changes: the step model, the serving
    # inputs but two, and the latency floors of one request alone (as a static batch of one: its prompt's
    # prefill, then decode steps of one sequence; the same at any replica count). Per unit, what the
    # settings decide: the memory that is left for the KV cache, hence what fits and the batch it holds.
    params = Params.from_matrix(table.params)
    sm = step_model(static, params)
    tier_gb = None
    if kv_offload and wl.prefix_working_set_tokens and wl.prefix_cache_hit_rate:
        static, tier_gb = with_kv_tier(adv, table, static, sm, float(wl.prefix_working_set_tokens))
        if tier_gb.any():
            sm = step_model(static, params)
    cap = capacity(tables, candidates(lay, dset, m_idx, wl, li_s, seqs_s, toks_s, np.ones(m), np.ones(m)),
                   static.weights[li_s], static.overhead[li_s], static.runnable[li_s], static.seq_full[li_s],
                   static.seq_mean[li_s])
    inputs = ServeInputs.of(static, params, sm).expand(li_s, cap_mean=cap.cap_mean, max_batched_tok=toks_s)
    ttft_lb, tpot_lb = floors(params, sm)
    corr = correction(adv.cal.calibration.residuals(), table.seg_keys,
                      (lay[:, 3] * lay[:, 4]).astype(float), MODES[wl.mode], wl.input_tokens, wl.output_tokens,
                      float(tables.active_linear_params[m_idx]), of=table.seg_of)
    if corr is not None:    # the floors hold under the least correction a layout can get
        least = corr.floor_factors()
        ttft_lb, tpot_lb = ttft_lb * least[:, 0], tpot_lb * least[:, 1]
    return Units(table=table, fits_min=fits_min, li=li_s, seqs=seqs_s, toks=toks_s, mode=MODES[wl.mode],
                 inputs=inputs, ttft_lb_s=ttft_lb[li_s], tpot_lb_s=tpot_lb[li_s], fits=cap.fits, corr=corr,
                 kv_offload_gb=tier_gb)


def with_kv_tier(adv: Advisor, table: LayoutTable, static: Static, sm: StepModel,
                 working_set_tok: float) -> tuple[Static, F]:
    """The layouts' static terms with the host KV tier the kv_offload lever gives them, and its size per layout
    (GB per GPU, whole GB; 0: none). A layout gets one where its engine version has KV offload, its GPU a host
    link in the catalog, the working set outgrows the free KV blocks beside its running batch (``sm``'s
    ``prefix_tiers``, at the search's one replica: the fewest free blocks) and reloading a token over the link
    is faster than prefilling it (``levers.kv_tier_gb``, as the relaxation); sized to hold the rest of the
    set."""
    tiers = sm.prefix_tiers
    if tiers is None:
        return static, np.zeros(table.layouts.n)
    n = table.layouts.n
    link_gb_s = np.zeros(n)
    for (e, v, g, wds, kvs, pairs), start in zip(table.layouts.blocks, table.layouts.starts, strict=True):
        eng = adv.levers.engine(e, v)
        link = adv.levers.host_link_bw_gb_s_per_direction(g)
        if eng is not None and eng.kv_offload is not None and link is not None:
            link_gb_s[start:start + len(wds) * len(kvs) * len(pairs)] = link
    gb = kv_tier_gb(tiers, working_set_tok, link_gb_s)
    if not gb.any():
        return static, gb
    return replace(static, kv_offload_bytes=gb * GB_BYTES,
                   host_link_bytes_s=np.where(gb > 0, link_gb_s * GB_BYTES, 1.0)), gb

def tp_sizes(model: ModelSpec, limit: int) -> list[int]:
    """The TP sizes of ``TP_GRID`` up to ``limit`` that split the model's attention heads evenly (KV heads
    split evenly, or replicated across groups of GPUs)."""
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    return [t for t in TP_GRID if t <= limit and heads % t == 0 and (t <= kv_heads or t % kv_heads == 0)]


def moe_dp_layouts(model: ModelSpec, node_gpus: int) -> list[tuple[int, int, int]]:
    """A MoE model's attention-DP layouts within one node: (TP 1, PP 1, DP d) with its experts split EP = d,
    the layout both engines launch (vLLM ``--data-parallel-size d --enable-expert-parallel``, TensorRT-LLM
    ``enable_attention_dp`` with ``moe_expert_parallel_size d``), for each d of the TP grid dividing the routed
    experts. Each DP rank keeps its own KV cache (throughput at high load) but its own copy of the attention
    weights, and every MoE layer adds an all-to-all (latency at low load)."""
    if not model.num_experts:
        return []
    return [(1, 1, d) for d in TP_GRID if 1 < d <= node_gpus and model.num_experts % d == 0]


def layout_table(adv: Advisor, cache: LayoutCache, model: ModelSpec, versions: dict[str, str], gpus: list[str],
                 wds: list[str], kvs: list[str], max_gpus: int, multi_node: bool) -> LayoutTable | None:
    """Every layout the request allows, in blocks of one engine on one GPU (weight dtype x KV dtype x TP/PP
    pairs), with the engines' default settings, prices and fitted parameters: nothing of the workload. Kept
    per calibration for the requests that allow the same layouts (None: no layout is allowed)."""
    held = cache.for_calibration(adv.cal.calibration)
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    # what the layouts depend on: of the model, only what decides its TP/PP pairs and its class (overheads)
    key = (heads, kv_heads, model.num_layers, model.num_experts, model_class(model), tuple(versions.items()),
           tuple(gpus), tuple(wds), tuple(kvs), max_gpus, multi_node)
    if key in held:
        return held[key]
    idx = adv.index
    layouts = Layouts()
    # per block's weight dtype, in order: its calibration segment (engine, version, GPU, weight dtype)
    segments: list[tuple[str, str, str, str]] = []
    # per block: its GPU, its sizes (weight dtypes, KV dtypes, pairs) and where its own lists start in these
    blocks: list[tuple[int, int, int, int, int, int, int]] = []
    w_idx: list[int] = []
    k_idx: list[int] = []
    tp_pp: list[tuple[int, int, int]] = []
    block_settings: list[tuple[float, float, float, int, float]] = []   # seqs, tokens, fraction, budget, reserve
    block_price: list[float] = []
    # what an engine runs on a GPU architecture, and the TP/PP pairs of a node size: the same for many GPUs
    by_arch: dict[tuple[str, str], tuple[list[str], list[str], list[int], list[int]]] = {}
    by_node: dict[int, list[tuple[int, int, int]]] = {}
    for e, v in versions.items():
        for g in gpus:
            gpu = adv.gpus[g]
            if gpu.vendor not in adv.engines[e].vendors:
                continue
            arch = gpu.architecture
            if (e, arch) not in by_arch:
                ok_w = [w for w in wds if (e, "weight", w, arch) in adv.support]
                ok_k = [k for k in kvs if (e, "kv", k, arch) in adv.support]
                by_arch[(e, arch)] = (ok_w, ok_k, [idx["wdtype"][w] for w in ok_w],
                                      [idx["kvdtype"][k] for k in ok_k])
            ok_w, ok_k, ok_w_idx, ok_k_idx = by_arch[(e, arch)]
            per_node = gpu.max_gpus_per_node
            if per_node not in by_node:
                tps = tp_sizes(model, min(per_node, max_gpus))
                by_node[per_node] = [(t, 1, 1) for t in tps] + (
                    [(tps[-1], p, 1) for p in PP_GRID_MULTI_NODE
                     if tps[-1] * p <= max_gpus and p <= model.num_layers]
                    if multi_node and tps else []) + moe_dp_layouts(model, min(per_node, max_gpus))
            pairs = by_node[per_node]
            if not (ok_w and ok_k and pairs):
                continue
            # the block in the order weight dtype, KV dtype, TP/PP pair (the last varies fastest)
            layouts.add(e, v, g, ok_w, ok_k, pairs)
            blocks.append((idx["gpu"][g], len(ok_w), len(ok_k), len(pairs), len(w_idx), len(k_idx), len(tp_pp)))
            w_idx += ok_w_idx
            segments += [(e, v, g, w) for w in ok_w]
            k_idx += ok_k_idx
            tp_pp += pairs
            d = adv.defaults(e, v, gpu)
            block_settings.append((float(d.max_num_seqs), float(d.max_num_batched_tokens), d.mem_fraction,
                                   d.budget, 1.0 if d.reserve_full else 0.0))
            block_price.append(gpu.price_usd_per_gpu_hour or np.nan)
    L = len(layouts)
    if not L:
        held[key] = None
        return None
    # each layout's position in its block's weight dtype, KV dtype and pair lists, then the indices
    blk = np.asarray(blocks, dtype=np.int64)
    sizes = blk[:, 1] * blk[:, 2] * blk[:, 3]
    of = np.repeat(np.arange(len(blocks)), sizes)
    r = np.arange(L) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    n_k, n_pairs = blk[of, 2], blk[of, 3]
    w_at = blk[of, 4] + r // (n_k * n_pairs)
    k_at = blk[of, 5] + (r // n_pairs) % n_k
    pair_at = blk[of, 6] + r % n_pairs
    pairs_arr = np.asarray(tp_pp, dtype=np.int64)
    lay = np.stack([blk[of, 0], np.asarray(w_idx, dtype=np.int64)[w_at], np.asarray(k_idx, dtype=np.int64)[k_at],
                    pairs_arr[pair_at, 0], pairs_arr[pair_at, 1], pairs_arr[pair_at, 2]], axis=1)
    dset = np.repeat(np.asarray(block_settings, dtype=np.float64), sizes, axis=0)
    price = np.repeat(np.asarray(block_price, dtype=np.float64), sizes)
    seg_keys: list[tuple[str, str, str, str]] = [
        (calibration_engine(e, adv.gpus[g].vendor), adv.gpus[g].architecture, g, w) for e, v, g, w in segments]
    current = {ev: is_current(*ev, adv.constants) for ev in {(e, v) for e, v, _, _ in segments}}
    seg_params = adv.param_rows(seg_keys, [current[(e, v)] for e, v, _, _ in segments], model_class(model))
    table = LayoutTable(layouts=layouts, lay=lay, dset=dset, price=price, params=seg_params[w_at],
                        seg_keys=seg_keys, seg_of=w_at)
    for a in (lay, dset, price, table.params):
        a.flags.writeable = False                # shared by the requests that allow the same layouts
    held[key] = table
    return table
