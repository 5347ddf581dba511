"""GET /v1/recommendations/{id}/pareto.svg: the stored answer's Pareto front, drawn as SVG."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.recommendation.pareto_svg import Axis, point_cost, render
from service.schemas.recommendations import RecommendationResponse

SVG = "{http://www.w3.org/2000/svg}"
CHAT_8B: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"input_tokens": 1024, "output_tokens": 256, "concurrency": 50},
    "sla": {"ttft_ms": 500, "tpot_ms": 50, "percentile": "p95"},
    "constraints": {"gpus": ["a10", "l4", "a100-80gb-sxm", "h100-sxm"], "max_gpus": 8},
}


@pytest.fixture(scope="module")
def answer(client: TestClient) -> dict[str, Any]:
    r = client.post("/v1/recommendations", json=CHAT_8B)
    assert r.status_code == 200, r.text
    return r.json()


def panels(svg_text: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg_text)
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"}


def marks(panel: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in panel.iter(f"{SVG}{tag}") if e.get("class") == cls]


def test_answer_links_its_picture(client: TestClient, answer: dict[str, Any]) -> None:
    rid = answer["id"]
    assert answer["links"] == {"self": f"/v1/recommendations/{rid}",
                               "pareto_svg": f"/v1/recommendations/{rid}/pareto.svg"}
    assert client.get(answer["links"]["self"]).json()["links"] == answer["links"]


def test_picture_has_a_mark_per_pareto_point_and_a_label_per_recommendation(
        client: TestClient, answer: dict[str, Any]) -> None:
    r = client.get(answer["links"]["pareto_svg"])
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    ps = panels(r.text)
    assert set(ps) == {"ttft", "throughput"}
    priced = [p for p in answer["pareto"] if p["usd_per_hour"]]
    assert len(priced) >= 3
    for panel in ps.values():
        assert len(marks(panel, "circle", "pareto-point")) == len(priced)
        assert len(marks(panel, "path", "recommended")) == len(answer["recommendations"])
        labels = [t.text or "" for t in marks(panel, "text", "label")]
        assert sorted(labels) == sorted(
            f"#{x['rank']} {x['deployment']['gpu_count']} x {x['deployment']['gpu']} "
            f"{x['deployment']['weight_dtype']}/{x['deployment']['kv_dtype']} {x['deployment']['engine']}"
            for x in answer["recommendations"])
    axes = {p: [t.text or "" for t in marks(g, "text", "axis-label")] for p, g in ps.items()}
    assert axes["ttft"][0].startswith("TTFT (p95), ms") and "USD per hour" in axes["ttft"][1]
    assert axes["throughput"][0].startswith("output throughput, tokens/s")


def test_cheaper_points_are_drawn_lower(client: TestClient, answer: dict[str, Any]) -> None:
    panel = panels(client.get(answer["links"]["pareto_svg"]).text)["ttft"]
    priced = [p for p in answer["pareto"] if p["usd_per_hour"]]
    ys = [float(c.get("cy", "0")) for c in marks(panel, "circle", "pareto-point")]
    # SVG y grows downwards: a higher cost is a smaller y
    pairs = sorted(zip([p["usd_per_hour"] for p in priced], ys, strict=True))
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(pairs) if a[0] < b[0])


def test_cost_per_million_tokens_axis(client: TestClient, answer: dict[str, Any]) -> None:
    r = client.get(answer["links"]["pareto_svg"], params={"cost": "usd_per_million_output_tokens"})
    assert r.status_code == 200
    panel = panels(r.text)["throughput"]
    assert "USD per million output tokens" in (marks(panel, "text", "axis-label")[1].text or "")
    r = client.get(answer["links"]["pareto_svg"], params={"cost": "usd"})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"


def test_unknown_id_is_404_problem(client: TestClient) -> None:
    r = client.get("/v1/recommendations/no-such-id/pareto.svg")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    assert "no-such-id" in r.json()["detail"]


def test_text_is_escaped(answer: dict[str, Any]) -> None:
    tricky = RecommendationResponse.model_validate({**answer, "model": 'a<b>&"c\'</svg>'})
    root = ET.fromstring(render(tricky))
    assert any(t.text == 'Pareto front: a<b>&"c\'</svg>' for t in root.iter(f"{SVG}text"))


def test_per_million_tokens_is_usd_per_hour_over_million_tokens_per_hour(answer: dict[str, Any]) -> None:
    ans = RecommendationResponse.model_validate(answer)
    p = next(p for p in ans.pareto if p.usd_per_hour)
    assert point_cost(p, "usd_per_million_output_tokens") == pytest.approx(
        p.usd_per_hour / (p.output_tok_s * 3600 / 1e6))


def test_axes_cover_their_values_with_ticks_inside() -> None:
    log = Axis.over([3.0, 700.0])
    assert log.log and log.lo == 2 and log.hi == 1000               # the nearest 1-2-5 values around
    assert log.share(2) == 0 and log.share(1000) == 1 and log.share(20) == pytest.approx(1 / (3 - math.log10(2)))
    lin = Axis.over([2.0, 3.5])
    assert not lin.log and lin.lo <= 2.0 and lin.hi >= 3.5
    assert Axis.over([97.0, 190.0]).ticks() == [100, 150, 200]       # round values, not steps from the edge
    for axis in (log, lin):
        ticks = axis.ticks()
        assert len(ticks) >= 3 and all(axis.lo <= t <= axis.hi for t in ticks)
