"""A recommendation's Pareto front as an SVG picture: cost against TTFT and against output throughput, two
panels, the recommended deployments labelled. Plain SVG text (no plotting library); every text escaped."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

from service.schemas.recommendations import ParetoPoint, Recommendation, RecommendationResponse
from service.units import S_PER_HOUR, TOKENS_PER_MILLION

CostAxis = Literal["usd_per_hour", "usd_per_million_output_tokens"]
COST_LABELS: dict[str, str] = {"usd_per_hour": "cost, USD per hour",
                               "usd_per_million_output_tokens": "cost, USD per million output tokens"}

# Picture geometry, SVG user units (px at 100% zoom).
WIDTH_PX, HEIGHT_PX = 1100, 520
PLOT_W_PX, PLOT_H_PX = 420, 340
PANEL_X_PX = (90, 630)
PLOT_TOP_PX = 80
FONT_PX = 11
CHAR_W_PX = 6.4            # mean advance of an 11 px sans-serif character, for placing labels apart
LINE_PX = 13
# A range wider than this ratio is drawn on a log scale.
LOG_SCALE_RATIO = 8.0
# A range narrower than this share of its values is widened by it either side (a fixed request rate gives
# every deployment the same throughput).
DEGENERATE_SHARE = 0.05


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    log: bool

    @classmethod
    def over(cls, values: list[float]) -> Axis:
        lo, hi = min(values), max(values)
        log = lo > 0 and hi / lo > LOG_SCALE_RATIO
        if log:
            return cls(_one_two_five(lo, down=True), _one_two_five(hi, down=False), True)
        if hi - lo < DEGENERATE_SHARE * abs(hi):
            # (nearly) one value: centred in a range of a nice step either side
            lo, hi = lo - DEGENERATE_SHARE * abs(hi), hi + DEGENERATE_SHARE * abs(hi)
        step = _nice_step((hi - lo) or 1.0)
        return cls(math.floor(lo / step) * step if lo >= step else 0.0, math.ceil(hi / step) * step or step, False)

    def share(self, v: float) -> float:
        """Where ``v`` falls between lo (0) and hi (1)."""
        if self.log:
            return (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return (v - self.lo) / (self.hi - self.lo)

    def ticks(self) -> list[float]:
        if self.log:
            decades = range(math.floor(math.log10(self.lo)), math.floor(math.log10(self.hi)) + 1)
            steps = (1, 2, 5) if len(decades) <= 3 else (1,)
            return [m * 10.0**d for d in decades for m in steps if self.lo <= m * 10.0**d <= self.hi]
        step = _nice_step(self.hi - self.lo)
        first = math.ceil(self.lo / step - 1e-9)
        return [k * step for k in range(first, math.floor(self.hi / step + 1e-9) + 1)]


def _one_two_five(v: float, down: bool) -> float:
    """The nearest 1, 2 or 5 x 10^k at or below (``down``) or at or above ``v``."""
    mag = 10 ** math.floor(math.log10(v))
    steps = [m * mag for m in (1, 2, 5, 10)]
    return max(x for x in steps if x <= v * (1 + 1e-12)) if down else min(x for x in steps if x >= v * (1 - 1e-12))


def _nice_step(span: float) -> float:
    """A 1-2-5 step giving about five ticks over ``span``."""
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def point_cost(p: ParetoPoint, cost: CostAxis) -> float | None:
    """The point's cost on the chosen axis (per million output tokens: USD/h over Mtok/h)."""
    if p.usd_per_hour is None or p.usd_per_hour <= 0:
        return None
    if cost == "usd_per_hour":
        return p.usd_per_hour
    return p.usd_per_hour / (p.output_tok_s * S_PER_HOUR / TOKENS_PER_MILLION) if p.output_tok_s > 0 else None


def rec_label(r: Recommendation) -> str:
    d = r.deployment
    return f"#{r.rank} {d.gpu_count or 1} x {d.gpu} {d.weight_dtype}/{d.kv_dtype} {d.engine}"


def _latency_key(percentile: str) -> str:
    return "ttft_ms" if percentile == "mean" else f"ttft_{percentile}_ms"


class _Labels:
    """Places label boxes in one panel so that they do not overlap: each goes right of its mark, moved down
    (then up) a line at a time until it is clear of the labels already placed."""

    def __init__(self, left: float, top: float, right: float, bottom: float) -> None:
        self.bounds = (left, top, right, bottom)
        self.boxes: list[tuple[float, float, float, float]] = []

    def avoid(self, x: float, y: float, radius: float) -> None:
        """A mark labels keep clear of."""
        self.boxes.append((x - radius, y - radius, x + radius, y + radius))

    def place(self, x: float, y: float, text: str) -> tuple[float, float, str]:
        w = len(text) * CHAR_W_PX
        _, top, right, bottom = self.bounds
        anchor = "start" if x + 8 + w <= right + 80 else "end"
        bx = x + 8 if anchor == "start" else x - 8 - w
        for k in range(40):
            dy = (k + 1) // 2 * LINE_PX * (1 if k % 2 else -1)
            by = y + 4 + dy
            box = (bx, by - FONT_PX, bx + w, by + 2)
            if top <= box[1] and box[3] <= bottom + 40 and not any(_overlap(box, b) for b in self.boxes):
                break
        self.boxes.append(box)
        return (bx if anchor == "start" else bx + w), by, anchor


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def render(ans: RecommendationResponse, cost: CostAxis = "usd_per_hour") -> str:
    """The SVG document: a panel of cost against TTFT and one of cost against output tokens/s; each Pareto
    point with a price one circle (class ``pareto-point``) in each; each recommendation one diamond (class
    ``recommended``) at its predicted figures and one label (class ``label``) in each."""
    pct = str((ans.applied.get("sla") or {}).get("percentile") or "mean")
    priced = [(p, c) for p in ans.pareto if (c := point_cost(p, cost)) is not None]
    recs = [(r, c) for r in ans.recommendations
            if (c := (r.cost.usd_per_hour if cost == "usd_per_hour" else r.cost.usd_per_million_output_tokens))]
    lat_key = _latency_key(pct)
    rec_ttft = {r.rank: float(getattr(r.predicted, lat_key)) for r, _ in recs}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{HEIGHT_PX}" '
           f'viewBox="0 0 {WIDTH_PX} {HEIGHT_PX}" font-family="sans-serif" font-size="{FONT_PX}">',
           f'<rect width="{WIDTH_PX}" height="{HEIGHT_PX}" fill="white"/>',
           f'<text x="20" y="28" font-size="16" font-weight="bold">{escape(f"Pareto front: {ans.model}")}</text>',
           f'<text x="20" y="48">{escape(_subtitle(ans, len(priced), pct))}</text>']
    if not priced and not recs:
        out.append(f'<text x="20" y="90">{escape("nothing to draw: no feasible deployment with a price")}</text>')
        return "\n".join([*out, "</svg>"])
    costs = [c for _, c in priced] + [c for _, c in recs]
    y_axis = Axis.over(costs)
    panels = [("ttft", f"TTFT ({pct}), ms", [p.ttft_ms for p, _ in priced], rec_ttft),
              ("throughput", "output throughput, tokens/s (whole deployment)",
               [p.output_tok_s for p, _ in priced], {r.rank: r.predicted.output_tok_s for r, _ in recs})]
    for (name, x_label, xs, rec_x), left in zip(panels, PANEL_X_PX, strict=True):
        x_axis = Axis.over([v for v in [*xs, *rec_x.values()] if v > 0] or [1.0])
        out.append(_panel(name, x_label, COST_LABELS[cost], left, x_axis, y_axis, priced, xs, recs, rec_x))
    for k, line in enumerate(_legend(cost)):
        out.append(f'<text x="20" y="{HEIGHT_PX - 26 + k * LINE_PX}" fill="#555">{escape(line)}</text>')
    return "\n".join([*out, "</svg>"])


def _subtitle(ans: RecommendationResponse, drawn: int, pct: str) -> str:
    unpriced = len(ans.pareto) - drawn
    return (f"{len(ans.pareto)} Pareto-optimal deployments (cost, TTFT, TPOT, throughput; latencies at {pct}), "
            f"{len(ans.recommendations)} recommended" + (f"; {unpriced} without a public price not drawn"
                                                         if unpriced else "") + f"; answer {ans.id}")


def _legend(cost: CostAxis) -> list[str]:
    other = "usd_per_million_output_tokens" if cost == "usd_per_hour" else "usd_per_hour"
    return ["circles: the Pareto front at its predicted figures (ringed: recommended); diamonds: the "
            "recommendations at their predicted figures,",
            f"labelled #rank GPUs x GPU weight/KV dtype engine. ?cost={other} draws the other cost."]


def _panel(name: str, x_label: str, y_label: str, left: int, x_axis: Axis, y_axis: Axis,
           priced: list[tuple[ParetoPoint, float]], xs: list[float], recs: list[tuple[Recommendation, float]],
           rec_x: dict[int, float]) -> str:
    top, w, h = PLOT_TOP_PX, PLOT_W_PX, PLOT_H_PX

    def px(v: float) -> float:
        return round(left + w * x_axis.share(v), 1)

    def py(v: float) -> float:
        return round(top + h * (1 - y_axis.share(v)), 1)

    g = [f'<g class="panel" id={quoteattr(name)}>',
         f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#888"/>']
    for t in x_axis.ticks():
        x = px(t)
        g.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{top + h}" stroke="#eee"/>'
                 f'<text x="{x}" y="{top + h + 16}" text-anchor="middle">{escape(_fmt(t))}</text>')
    for t in y_axis.ticks():
        y = py(t)
        g.append(f'<line x1="{left}" y1="{y}" x2="{left + w}" y2="{y}" stroke="#eee"/>'
                 f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{escape(_fmt(t))}</text>')
    scale = " (log scale)" if x_axis.log else ""
    g.append(f'<text class="axis-label" x="{left + w / 2}" y="{top + h + 36}" text-anchor="middle">'
             f'{escape(x_label + scale)}</text>')
    yscale = " (log scale)" if y_axis.log else ""
    g.append(f'<text class="axis-label" transform="translate({left - 58},{top + h / 2}) rotate(-90)" '
             f'text-anchor="middle">{escape(y_label + yscale)}</text>')
    for (p, c), x in zip(priced, xs, strict=True):
        tip = (f"{p.deployment}: ${p.usd_per_hour}/h, TTFT {p.ttft_ms} ms, TPOT {p.tpot_ms} ms, "
               f"{p.output_tok_s} tok/s" + (f", rank {p.rank}" if p.rank else ""))
        ring = ' stroke="#e45756" stroke-width="1.5"' if p.rank else ""
        g.append(f'<circle class="pareto-point" cx="{px(x)}" cy="{py(c)}" r="4" fill="#4c78a8" fill-opacity="0.75"'
                 f'{ring}><title>{escape(tip)}</title></circle>')
    # a recommendation's point of the front joined to its diamond where they differ: in answers stored when the
    # front's figures were the search's analytic ones (now both are the prediction's)
    rec_cost = {r.rank: c for r, c in recs}
    for (p, c), x in zip(priced, xs, strict=True):
        if p.rank in rec_cost and (px(x), py(c)) != (px(rec_x[p.rank]), py(rec_cost[p.rank])):
            g.append(f'<line class="same-deployment" x1="{px(x)}" y1="{py(c)}" x2="{px(rec_x[p.rank])}" '
                     f'y2="{py(rec_cost[p.rank])}" stroke="#e45756" stroke-dasharray="3 2" stroke-width="0.8"/>')
    for r, c in recs:
        x, y = px(rec_x[r.rank]), py(c)
        g.append(f'<path class="recommended" d="M{x} {y - 6} L{x + 6} {y} L{x} {y + 6} L{x - 6} {y} Z" '
                 f'fill="#e45756" stroke="black" stroke-width="0.6"><title>{escape(r.why)}</title></path>')
    labels = _Labels(left, top, left + w, top + h)        # over every mark, clear of them where it can
    for (_, c), x in zip(priced, xs, strict=True):
        labels.avoid(px(x), py(c), 4)
    for r, c in recs:
        labels.avoid(px(rec_x[r.rank]), py(c), 6)
    for r, c in sorted(recs, key=lambda rc: -rc[1]):
        x, y = px(rec_x[r.rank]), py(c)
        text = rec_label(r)
        lx, ly, anchor = labels.place(x, y, text)
        if abs(ly - (y + 4)) > 1:
            g.append(f'<line x1="{x}" y1="{y}" x2="{lx}" y2="{ly - 4}" stroke="#999" stroke-width="0.6"/>')
        g.append(f'<text class="label" x="{round(lx, 1)}" y="{round(ly, 1)}" text-anchor="{anchor}" '
                 f'stroke="white" stroke-width="3" paint-order="stroke">{escape(text)}</text>')
    g.append("</g>")
    return "\n".join(g)
