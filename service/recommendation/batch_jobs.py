"""Batch jobs: a workload of ``num_requests`` requests, optionally due within ``sla.deadline_hours``.

The deadline is a throughput floor (the job's output tokens over the deadline), which the search already
enforces as ``sla.min_output_tok_s``; a deployment's wall time and cost follow from its predicted
throughput and price."""

from __future__ import annotations

import math

from service.errors import InvalidRequest
from service.schemas.predictions import Cost, Predicted, Workload
from service.schemas.recommendations import (
    BatchJob,
    JobEstimate,
    Relaxation,
    Sla,
)
from service.units import S_PER_HOUR


def output_tokens_total(wl: Workload) -> int:
    return int(wl.num_requests or 0) * wl.output_tokens


def with_deadline(sla: Sla, wl: Workload) -> Sla:
    """``sla`` with its throughput floor raised to what the deadline needs (a deadline needs a job size)."""
    if sla.deadline_hours is None:
        return sla
    if not wl.num_requests:
        raise InvalidRequest(["sla", "deadline_hours"], "a deadline needs the job's size: set "
                             "workload.num_requests (and output_tokens per request)", title="Invalid request")
    need = output_tokens_total(wl) / (sla.deadline_hours * S_PER_HOUR)
    return sla.model_copy(update={"min_output_tok_s": max(need, sla.min_output_tok_s or 0.0)})


def estimate(wl: Workload, output_tok_s: float, usd_per_hour: float | None,
             deadline_hours: float | None) -> JobEstimate:
    """The job on a deployment predicted to generate ``output_tok_s`` tokens/s at ``usd_per_hour``."""
    hours = output_tokens_total(wl) / output_tok_s / S_PER_HOUR if output_tok_s > 0 else math.inf
    if not math.isfinite(hours):
        return JobEstimate(hours=None, usd=None, meets_deadline=None if deadline_hours is None else False)
    return JobEstimate(hours=round(hours, 4), usd=None if usd_per_hour is None else round(hours * usd_per_hour, 2),
                       meets_deadline=None if deadline_hours is None else hours <= deadline_hours)


def of_prediction(wl: Workload, predicted: Predicted, cost: Cost, deadline_hours: float | None) -> JobEstimate:
    return estimate(wl, predicted.output_tok_s, cost.usd_per_hour, deadline_hours)


def job(wl: Workload, sla: Sla) -> BatchJob | None:
    """The job the request states (its smallest deployment filled in by the search), or None."""
    if not wl.num_requests:
        return None
    return BatchJob(num_requests=wl.num_requests, output_tokens_total=output_tokens_total(wl),
                    deadline_hours=sla.deadline_hours,
                    min_output_tok_s=None if sla.deadline_hours is None else
                    round(output_tokens_total(wl) / (sla.deadline_hours * S_PER_HOUR), 3),
                    smallest=None)


def deadline_relaxations(relaxations: list[Relaxation], wl: Workload) -> list[Relaxation]:
    """For a throughput floor the search could not reach: the shortest deadline the fastest allowed
    deployment meets (the job's output tokens over its throughput)."""
    out = []
    for r in relaxations:
        if r.kind == "min_output_tok_s" and isinstance(r.value, int | float) and r.value > 0 and wl.num_requests:
            hours = output_tokens_total(wl) / r.value / S_PER_HOUR
            out.append(Relaxation(kind="deadline_hours", value=round(hours, 2),
                                  detail=f"the shortest deadline reachable: {hours:.2f} h at {r.value:.0f} output "
                                  f"tok/s ({r.detail.split(': ', 1)[-1]})"))
    return out

