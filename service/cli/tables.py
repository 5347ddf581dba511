"""Plain-text tables of the service's answers, for people (``--json`` prints the answers themselves)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The memory_per_gpu_gb fields in GB (the object also carries per-token figures in other units).
MEMORY_GB_FIELDS = ("weights", "kv_cache", "activations", "overhead", "total", "capacity")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned; None as '-'."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[k]) for r in cells)]) for k, h in enumerate(headers)]
    numeric = [all(isinstance(row[k], int | float) or row[k] is None for row in rows) and bool(rows)
               for k in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))

    return "\n".join([line(headers).rstrip(), line(["-" * w for w in widths]).rstrip(),
                      *(line(r).rstrip() for r in cells)])


def _num(v: float | None, digits: int = 1) -> float | int | None:
    if v is None:
        return None
    return round(v) if digits == 0 else round(v, digits)


def layout(d: dict[str, Any]) -> str:
    """``2 x TP4 h100-sxm`` style: replicas x parallel layout x GPU."""
    par = "".join(f" {k.upper()}{d[k]}" for k in ("tp", "pp") if (d.get(k) or 1) > 1)
    return f"{d.get('replicas', 1)} x{par} {d['gpu']}"


def recommendations(ans: dict[str, Any]) -> str:
    pct = (ans.get("applied") or {}).get("sla", {}).get("percentile") or "mean"
    suffix = "" if pct == "mean" else f"_{pct}"
    out = [f"model {ans['model']}: " + ("feasible" if ans["feasible"] else "nothing fits") +
           f" ({ans['search']['candidates']} candidates, {ans['search']['feasible']} feasible, "
           f"{ans['search']['elapsed_ms']:.0f} ms); id {ans['id']}"]
    recs = ans["recommendations"]
    if recs:
        rows = []
        for r in recs:
            d, p, c = r["deployment"], r["predicted"], r["cost"]
            job = r.get("job") or {}
            rows.append([r["rank"], d["gpu_count"], layout(d), f"{d['weight_dtype']}/{d['kv_dtype']}", d["engine"],
                         _num(p.get(f"ttft{suffix}_ms")), _num(p.get(f"tpot{suffix}_ms"), 2),
                         _num(p["output_tok_s"], 0), _num(c.get("usd_per_hour"), 2),
                         _num(c.get("usd_per_million_output_tokens"), 3),
                         *([_num(job.get("hours"), 2), _num(job.get("usd"), 2)] if ans.get("batch_job") else []),
                         r.get("binding_constraint")])
        headers = ["rank", "gpus", "layout", "dtype w/kv", "engine", f"ttft{suffix} ms", f"tpot{suffix} ms",
                   "out tok/s", "$/h", "$/Mtok", *(["job h", "job $"] if ans.get("batch_job") else []), "binding"]
        out += ["", table(headers, rows)]
        out += ["", f"#1 launch: {recs[0]['launch'].get('command') or recs[0]['launch'].get('error')}"]
    job = ans.get("batch_job")
    if job:
        out += ["", batch_job(job)]
    ex = ans.get("explanation")
    if ex:
        out += ["", ex["summary"], f"main obstacle: {ex['main_obstacle']}"]
        out += [f"  relax {x['kind']}: {x['detail']}" for x in ex.get("relaxations", [])]
    out += [f"note: {n}" for n in ans.get("notes", [])]
    return "\n".join(out)


def batch_job(job: dict[str, Any]) -> str:
    lines = [f"batch job: {job['num_requests']:,} requests, {job['output_tokens_total']:,} output tokens"
             + (f", deadline {job['deadline_hours']} h (at least {job['min_output_tok_s']:,.0f} output tok/s)"
                if job.get("deadline_hours") else "")]
    s = job.get("smallest")
    if s:
        d, j = s["deployment"], s["job"]
        where = f"rank {s['rank']}" if s.get("rank") else "not in the ranking above"
        money = "no public price" if j.get("usd") is None else f"${j['usd']:,.2f}"
        lines.append(f"smallest deployment meeting the deadline: {s['gpu_count']} GPU(s), {layout(d)} "
                     f"{d['weight_dtype']}/{d['kv_dtype']} {d['engine']} ({where}): {j['hours']:.2f} h, {money}")
    return "\n".join(lines)


def prediction(ans: dict[str, Any]) -> str:
    out = [f"fits: {ans['fits']}"]
    p = ans.get("predicted")
    if p:
        rows = [[k, _num(p.get(k), 2)] for k in ("ttft_ms", "ttft_p95_ms", "tpot_ms", "tpot_p95_ms", "e2e_ms",
                                                  "output_tok_s", "requests_per_s", "max_concurrency")]
        c = ans.get("cost") or {}
        rows += [["usd_per_hour", c.get("usd_per_hour")],
                 ["usd_per_million_output_tokens", c.get("usd_per_million_output_tokens")]]
        out += ["", table(["figure", "value"], rows)]
    m = ans.get("memory_per_gpu_gb")
    if m:
        out += ["", "memory per GPU, GB: " + ", ".join(f"{k} {m[k]}" for k in MEMORY_GB_FIELDS if k in m)]
    launch = ans.get("launch") or {}
    if launch.get("command"):
        out += ["", f"launch: {launch['command']}"]
    out += [f"note: {n}" for n in ans.get("notes", [])]
    return "\n".join(out)


def gpus(ans: dict[str, Any]) -> str:
    rows = [[g["id"], g["name"], g["memory_gb"], g["memory_bw_gb_s"], (g.get("dense_tflops") or {}).get("fp16"),
             g["interconnect"], g["max_gpus_per_node"], g.get("price_usd_per_gpu_hour")] for g in ans["items"]]
    return table(["id", "name", "memory GB", "bandwidth GB/s", "fp16 TFLOPS", "link", "per node", "$/GPU-h"], rows)


def models(ans: dict[str, Any]) -> str:
    rows = [[m["id"], m["total_params_b"], m["active_params_b"], m["num_layers"], m["max_position_embeddings"],
             m["kv_bytes_per_token_bf16"]] for m in ans["items"]]
    return table(["id", "params B", "active B", "layers", "context tok", "KV bytes/tok bf16"], rows)
