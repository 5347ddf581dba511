"""A recommendation's ``why``: its deployment, cost, throughput and binding bound in one sentence."""

from __future__ import annotations

from service.schemas.predictions import Cost, Deployment, Predicted


def why(objective: str, dep: Deployment, p: Predicted, cost: Cost, binding: str | None, headroom: dict[str, float],
        rank: int) -> str:
    """One sentence on a recommendation: what it is, what it costs, its throughput and its tightest bound."""
    layout = (f"{dep.replicas} x " if dep.replicas > 1 else "") + (
        f"TP{dep.tp} " if dep.tp > 1 else "") + (f"DP{dep.dp} EP{dep.ep or 1} " if dep.dp > 1 else "") + (
        f"{dep.gpu} {dep.weight_dtype} on {dep.engine}")
    if dep.dp > 1:
        layout += (" (attention data parallelism: each GPU keeps only its own rank's sequences, so the replica "
                   "holds more at once; each rank holds its own attention weights and every MoE layer adds an "
                   "all-to-all, which costs latency at low load)")
    money = (f"${cost.usd_per_hour:.2f}/h, ${cost.usd_per_million_output_tokens:.3f} per million output tokens"
             if cost.usd_per_hour and cost.usd_per_million_output_tokens else "no public price")
    goal = {"min_cost": "cheapest", "min_cost_per_token": "cheapest per output token",
            "max_throughput": "highest-throughput", "min_latency": "fastest",
            "balanced": "best cost-latency balance"}[objective]
    lead = f"{'The ' + goal if rank == 1 else 'Rank ' + str(rank) + ' by ' + objective}: {layout} ({money})"
    if binding:
        return (f"{lead}; {p.output_tok_s:.0f} output tok/s; tightest bound {binding} with "
                f"{headroom[binding] * 100:.0f}% headroom.")
    return f"{lead}; {p.output_tok_s:.0f} output tok/s; no latency bound applies."
