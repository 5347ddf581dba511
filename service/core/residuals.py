"""Users' measurements count where they were taken: a residual correction on top of the physical model.

Each measurement a user stored (``source_id`` ``user:<ingest>``) is an anchor: its deployment's engine, GPU and
weight dtype, its workload (input and output lengths, load per replica), its model's size and GPUs per replica,
and the log-ratio of what it measured to what the calibrated model predicts for it (TTFT, TPOT, throughput).
A prediction on the same engine, GPU and weight dtype (and the same kind of load: closed loop, open loop or
offline) is multiplied by

    exp( sum_i w_i r_i / (PRIOR_WEIGHT + sum_i w_i) ),   w_i = exp(-d_i^2 / 2),

where d_i is the distance to anchor i in the log of each feature over its ``SCALES`` entry. At an anchor's own
deployment w = 1: the prediction moves 1 / (1 + PRIOR_WEIGHT) of the way to the measurement (in log space); the
pull fades with distance and is zero on another engine, GPU or weight dtype. Anchors are computed when a
calibration version is fitted and stored with it, so every worker corrects alike; the recommendation search and
POST /v1/predictions both call ``Residuals.factors``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core.candidates import MODES
from service.core.serve import Result
from service.core.tables import Tables
from service.core.types import F

USER_SOURCE_PREFIX = "user:"
# The model's prediction counts as this many anchors at distance 0: one measurement moves its own deployment's
# prediction 1 / 1.05 = 95% of the way (log space).
PRIOR_WEIGHT = 0.05
# One unit of distance per feature, in natural-log units: a factor of 4 in a length or the load per replica, a
# factor of 2 in GPUs per replica or in the model's active parameters.
SCALES = {"isl": math.log(4.0), "osl": math.log(4.0), "load": math.log(4.0), "gpus": math.log(2.0),
          "params": math.log(2.0)}
FEATURES = tuple(SCALES)
# kinds of load whose measurements inform each other (a static batch is a closed loop of its size)
LOAD_KIND = {MODES["concurrency"]: 0, MODES["static_batch"]: 0, MODES["request_rate"]: 1, MODES["offline"]: 2}

Group = tuple[str, str, str]        # calibration engine, GPU, weight dtype


def load_kind(mode: int) -> int:
    return LOAD_KIND[int(mode)]


def features(isl: F, osl: F, load_per_replica: F, gpus: F, active_params: F) -> F:
    """(n, len(FEATURES)) scaled log-features; an offline run's load is left out (0)."""
    load = np.where(load_per_replica > 0, np.log(np.maximum(load_per_replica, 1e-9)), 0.0)
    cols = (np.log(isl), np.log(osl), load, np.log(gpus), np.log(active_params))
    return np.stack([c / SCALES[name] for c, name in zip(cols, FEATURES, strict=True)], axis=-1)


@dataclass(frozen=True)
class Anchors:
    """The anchors of one group and load kind: features (m, k) and log residuals (m, 3); NaN = not measured."""

    x: F
    r: F


class Residuals:
    """Anchors by (group, load kind), built from their stored form (``to_json``)."""

    def __init__(self, stored: Sequence[Mapping[str, Any]] = ()) -> None:
        self.stored = [dict(a) for a in stored]
        by: dict[tuple[Group, int], tuple[list[list[float]], list[list[float]]]] = {}
        for a in self.stored:
            key = ((a["engine"], a["gpu"], a["dtype"]), int(a["load_kind"]))
            xs, rs = by.setdefault(key, ([], []))
            xs.append(list(a["x"]))
            rs.append([math.nan if v is None else float(v) for v in a["r"]])
        self.by = {k: Anchors(np.asarray(xs, dtype=np.float64), np.asarray(rs, dtype=np.float64))
                   for k, (xs, rs) in by.items()}
        self.groups = {g for g, _ in self.by}

    def __bool__(self) -> bool:
        return bool(self.by)

    def factors(self, group: Group, mode: int, x: F) -> F:
        """(n, 3) multiplicative corrections of TTFT, TPOT and throughput of ``n`` deployments of one group and
        workload mode, at scaled features ``x`` (n, k) (``features``); ones where no anchor applies."""
        out = np.ones((len(x), 3))
        anchors = self.by.get((group, load_kind(mode)))
        if anchors is None or not len(x):
            return out
        d2 = ((x[:, None, :] - anchors.x[None, :, :]) ** 2).sum(axis=2)
        w = np.exp(-0.5 * d2)                                   # (n, m)
        has = np.isfinite(anchors.r)                           # (m, 3)
        num = w @ np.where(has, anchors.r, 0.0)
        den = PRIOR_WEIGHT + w @ has.astype(np.float64)
        return np.exp(num / den)


def anchors_of(tables: Tables, cand: Any, y: F, pred: F, keys: Sequence[tuple[str, str, str, str]],
               sources: Sequence[str], row_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The stored anchors of the users' measurements among scored rows (``cand``; measured ``y`` and predicted
    ``pred``, (n, 3) throughput, TTFT, TPOT as calibration.METRICS; aligned): those whose source is a user's."""
    rows = [i for i, s in enumerate(sources) if s.startswith(USER_SOURCE_PREFIX)]
    if not rows:
        return []
    idx = np.asarray(rows)
    reps = np.maximum(cand.replicas[idx], 1.0)
    x = features(cand.input_tok[idx], cand.output_tok[idx],
                 np.where(cand.mode[idx] == MODES["offline"], 0.0, cand.load[idx] / reps),
                 cand.tp[idx] * cand.pp[idx], tables.active_linear_params[cand.model[idx]])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.log(y[idx] / pred[idx])[:, [1, 2, 0]]      # (throughput, TTFT, TPOT) -> TTFT, TPOT, throughput
    out = []
    for j, i in enumerate(rows):
        engine, _, gpu, dtype = keys[i]
        out.append({"row_id": row_ids[i], "engine": engine, "gpu": gpu, "dtype": dtype,
                    "load_kind": load_kind(int(cand.mode[i])), "x": [float(v) for v in x[j]],
                    "r": [float(v) if np.isfinite(v) else None for v in r[j]]})
    return out


def corrected(res: Result, factors: F, osl: F) -> Result:
    """``res`` (costmodel.serve's figures) with TTFT, TPOT and the throughputs multiplied by ``factors`` (n, 3)
    and the end-to-end latency made of them again."""
    ttft, tpot, thr = res.ttft_s * factors[:, 0], res.tpot_s * factors[:, 1], factors[:, 2]
    return replace(res, ttft_s=ttft, tpot_s=tpot, e2e_s=ttft + (np.maximum(osl, 1.0) - 1.0) * tpot,
                   output_tok_s=res.output_tok_s * thr, total_tok_s=res.total_tok_s * thr,
                   requests_s=res.requests_s * thr, correction=factors)


@dataclass
class Correction:
    """The residual correction of one request's candidates (one model and workload, many deployments): what the
    search keeps per layout and POST /v1/predictions per deployment, and ``factors``, which both call."""

    residuals: Residuals
    groups: list[Group]
    group_of: NDArray[np.int64]         # per deployment (or layout): index into ``groups``, -1 = no anchor
    gpus_of: F                          # per deployment (or layout): GPUs per replica
    mode: int
    isl: float
    osl: float
    active_params: float

    def floor_factors(self) -> F:
        """(deployments, 3) the smallest correction each can get at any load: exp(min(0, least residual)) of its
        group's anchors (a correction is a weighted mean of residuals and the model's 0)."""
        least = np.zeros((len(self.groups), 3))
        for gi, g in enumerate(self.groups):
            for (grp, kind), anchors in self.residuals.by.items():
                if grp == g and kind == load_kind(self.mode):
                    least[gi] = np.minimum(least[gi], np.nanmin(np.where(np.isfinite(anchors.r), anchors.r, 0.0),
                                                                axis=0))
        return np.where(self.group_of[:, None] >= 0, np.exp(least[np.maximum(self.group_of, 0)]), 1.0)

    def factors(self, at: NDArray[np.int64], load_per_replica: F) -> F:
        """(len(at), 3) corrections of deployments ``at`` (indices into ``group_of``) at their load per replica."""
        out = np.ones((len(at), 3))
        g = self.group_of[at]
        for gi in np.unique(g[g >= 0]):
            sel = np.flatnonzero(g == gi)
            n = len(sel)
            load = np.zeros(n) if self.mode == MODES["offline"] else load_per_replica[sel]
            x = features(np.full(n, self.isl), np.full(n, self.osl), load, self.gpus_of[at[sel]],
                         np.full(n, self.active_params))
            out[sel] = self.residuals.factors(self.groups[int(gi)], self.mode, x)
        return out


def correction(residuals: Residuals, keys: Sequence[tuple[str, str, str, str]], gpus: F, mode: int, isl: float,
               osl: float, active_params: float, of: NDArray[np.int64] | None = None) -> Correction | None:
    """The correction of deployments whose calibration keys are ``keys`` (or ``keys[of]``: many deployments
    share a key), with ``gpus`` per replica each; None when no anchor shares their engine, GPU and dtype."""
    if not residuals:
        return None
    groups: list[Group] = []
    key_group = np.full(len(keys), -1, dtype=np.int64)
    for i, k in enumerate(keys):
        g = (k[0], k[2], k[3])
        if g in residuals.groups:
            if g not in groups:
                groups.append(g)
            key_group[i] = groups.index(g)
    if not groups:
        return None
    return Correction(residuals=residuals, groups=groups, group_of=key_group if of is None else key_group[of],
                      gpus_of=np.asarray(gpus, dtype=float), mode=int(mode), isl=float(isl), osl=float(osl),
                      active_params=float(active_params))
