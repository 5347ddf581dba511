"""The ``llm-deploy-advisor`` command: ask the service (``--url``) or the app in-process, print a table or
(``--json``) the service's JSON as it came. Exit status 0 on success; 1 when the service answers 4xx/5xx
or cannot be reached, the problem's detail on stderr; 2 for a usage error."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx

from service.cli import tables
from service.cli.client import ServiceError, call, connect

F = TypeVar("F", bound=Callable[..., Any])
URL_ENV = "LLM_DEPLOY_ADVISOR_URL"
KEY_ENV = "LLM_DEPLOY_ADVISOR_KEY"


def service_options(f: F) -> F:
    """--url, --api-key and --json, on every command that asks the service."""
    f = click.option("--json", "as_json", is_flag=True, help="print the service's JSON answer as it came")(f)
    f = click.option("--api-key", envvar=KEY_ENV, default=None, show_envvar=True,
                     help="Bearer key, when the service requires one for reads")(f)
    f = click.option("--url", envvar=URL_ENV, default=None, show_envvar=True, metavar="URL",
                     help="a running service (e.g. http://127.0.0.1:8000); without it, the app runs in this "
                     "process on DATABASE_URL (default: ./llm_deploy_advisor.db)")(f)
    return f


def workload_options(f: F) -> F:
    """Flags for the workload fields most requests set (each overrides the body file's field)."""
    for name, kind, text in reversed([
        ("--input-tokens", int, "prompt length, tokens"),
        ("--output-tokens", int, "generated length, tokens"),
        ("--concurrency", int, "closed loop: N clients"),
        ("--request-rate", float, "open loop: Poisson arrivals, requests/s"),
        ("--num-requests", int, "requests in the job (batch)"),
        ("--max-context-tokens", int, "longest prompt + output the deployment must accept"),
    ]):
        f = click.option(name, type=kind, default=None, help=text)(f)
    return click.option("--offline", is_flag=True, default=None, help="as many requests at once as fit")(f)


def load_body(file: str | None) -> dict[str, Any]:
    """The request body from FILE (``-``: stdin), or an empty one when no file is given."""
    if file is None:
        return {}
    text = sys.stdin.read() if file == "-" else Path(file).read_text()
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="FILE") from exc
    if not isinstance(body, dict):
        raise click.BadParameter("must hold a JSON object", param_hint="FILE")
    return body


def merge(body: dict[str, Any], section: str, **values: Any) -> None:
    """Set ``body[section][k] = v`` for each flag given (``section`` empty: at the top level)."""
    given = {k: v for k, v in values.items() if v is not None}
    if given:
        target = body.setdefault(section, {}) if section else body
        target.update(given)


def workload_flags(body: dict[str, Any], **flags: Any) -> None:
    wl = {k: v for k, v in flags.items() if v is not None}
    load_keys = {"concurrency", "request_rate", "offline"}
    if load_keys & wl.keys() and "workload" in body:
        # a load flag replaces the file's load (the service accepts exactly one)
        for k in load_keys - wl.keys():
            body["workload"].pop(k, None)
    merge(body, "workload", **wl)


def run(url: str | None, api_key: str | None, method: str, path: str, body: Any = None,
        after: Callable[[httpx.AsyncClient, dict[str, Any]], Awaitable[None]] | None = None) -> dict[str, Any]:
    """One request (and ``after`` it, more on the same connection); a service error ends the command with
    status 1 and the problem on stderr."""

    async def ask() -> dict[str, Any]:
        async with connect(url, api_key) as client:
            r = await call(client, method, path, body)
            answer = r.json()
            if after is not None:
                await after(client, answer)
            return {"text": r.text, "json": answer}

    try:
        return asyncio.run(ask())
    except ServiceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def emit(result: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    click.echo(result["text"] if as_json else render(result["json"]))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llm-deploy-advisor")
def cli() -> None:
    """LLM Deploy Advisor: which GPUs, quantisation, parallelism and engine serve a model within a latency
    budget, at what cost. Each command asks the service at --url, or runs the app in this process."""


@cli.command()
@click.argument("file", required=False, metavar="[FILE.json]")
@click.option("--model", default=None, help="Hugging Face repo id (see `models`)")
@workload_options
@click.option("--ttft-ms", type=float, default=None, help="TTFT budget, ms")
@click.option("--tpot-ms", type=float, default=None, help="TPOT budget, ms")
@click.option("--min-output-tok-s", type=float, default=None, help="throughput floor, generated tokens/s")
@click.option("--deadline-hours", type=float, default=None, help="batch: the job must finish within, hours")
@click.option("--percentile", type=click.Choice(["mean", "p50", "p90", "p95", "p99"]), default=None)
@click.option("--gpus", default=None, metavar="ID,ID", help="GPU ids allowed, comma-separated (see `gpus`)")
@click.option("--max-gpus", type=int, default=None, help="GPUs in the whole deployment, at most")
@click.option("--scenario", type=click.Choice(["chat", "batch", "api"]), default=None)
@click.option("--objective", type=click.Choice(["min_cost", "max_throughput", "min_latency", "balanced"]),
              default=None)
@click.option("--top-k", type=int, default=None, help="how many deployments to list")
@click.option("--pareto", "pareto_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write the answer's Pareto front as an SVG picture to this file")
@click.option("--pareto-cost", type=click.Choice(["usd_per_hour", "usd_per_million_output_tokens"]),
              default="usd_per_hour", show_default=True, help="the picture's cost axis")
@service_options
def recommend(file: str | None, model: str | None, input_tokens: int | None, output_tokens: int | None,
              concurrency: int | None, request_rate: float | None, num_requests: int | None,
              max_context_tokens: int | None, offline: bool | None, ttft_ms: float | None, tpot_ms: float | None,
              min_output_tok_s: float | None, deadline_hours: float | None, percentile: str | None,
              gpus: str | None, max_gpus: int | None, scenario: str | None, objective: str | None,
              top_k: int | None, pareto_file: str | None, pareto_cost: str, url: str | None, api_key: str | None,
              as_json: bool) -> None:
    """Ranked deployments for a model, workload and SLA (POST /v1/recommendations).

    FILE.json is a request body ("-" reads it from stdin); the flags set or override its fields."""
    body = load_body(file)
    merge(body, "", model=model, scenario=scenario, objective=objective, top_k=top_k)
    workload_flags(body, input_tokens=input_tokens, output_tokens=output_tokens, concurrency=concurrency,
                   request_rate=request_rate, offline=offline, num_requests=num_requests,
                   max_context_tokens=max_context_tokens)
    merge(body, "sla", ttft_ms=ttft_ms, tpot_ms=tpot_ms, min_output_tok_s=min_output_tok_s,
          deadline_hours=deadline_hours, percentile=percentile)
    merge(body, "constraints", max_gpus=max_gpus,
          gpus=[g.strip() for g in gpus.split(",") if g.strip()] if gpus else None)

    async def save_picture(client: httpx.AsyncClient, answer: dict[str, Any]) -> None:
        if pareto_file is None:
            return
        link = (answer.get("links") or {}).get("pareto_svg") or f"/v1/recommendations/{answer['id']}/pareto.svg"
        svg = await call(client, "GET", link, params={"cost": pareto_cost})
        Path(pareto_file).write_text(svg.text, encoding="utf-8")
        click.echo(f"Pareto front written to {pareto_file}", err=True)

    emit(run(url, api_key, "POST", "/v1/recommendations", body, after=save_picture), as_json,
         tables.recommendations)


@cli.command()
@click.argument("file", required=False, metavar="[FILE.json]")
@click.option("--model", default=None, help="Hugging Face repo id")
@click.option("--gpu", default=None, help="GPU id")
@click.option("--tp", type=int, default=None, help="tensor-parallel size")
@click.option("--pp", type=int, default=None, help="pipeline-parallel size")
@click.option("--replicas", type=int, default=None)
@click.option("--weight-dtype", default=None)
@click.option("--kv-dtype", default=None)
@click.option("--engine", type=click.Choice(["vllm", "trtllm"]), default=None)
@workload_options
@service_options
def predict(file: str | None, model: str | None, gpu: str | None, tp: int | None, pp: int | None,
            replicas: int | None, weight_dtype: str | None, kv_dtype: str | None, engine: str | None,
            input_tokens: int | None, output_tokens: int | None, concurrency: int | None,
            request_rate: float | None, num_requests: int | None, max_context_tokens: int | None,
            offline: bool | None, url: str | None, api_key: str | None, as_json: bool) -> None:
    """What one deployment does under one workload (POST /v1/predictions).

    FILE.json is a request body ("-" reads it from stdin); the flags set or override its fields."""
    body = load_body(file)
    merge(body, "", model=model)
    merge(body, "deployment", gpu=gpu, tp=tp, pp=pp, replicas=replicas, weight_dtype=weight_dtype,
          kv_dtype=kv_dtype, engine=engine)
    workload_flags(body, input_tokens=input_tokens, output_tokens=output_tokens, concurrency=concurrency,
                   request_rate=request_rate, offline=offline, num_requests=num_requests,
                   max_context_tokens=max_context_tokens)
    emit(run(url, api_key, "POST", "/v1/predictions", body), as_json, tables.prediction)


@cli.command()
@service_options
def gpus(url: str | None, api_key: str | None, as_json: bool) -> None:
    """The GPU catalog (GET /v1/gpus)."""
    emit(run(url, api_key, "GET", "/v1/gpus"), as_json, tables.gpus)


@cli.command()
@service_options
def models(url: str | None, api_key: str | None, as_json: bool) -> None:
    """The model architectures (GET /v1/models)."""
    emit(run(url, api_key, "GET", "/v1/models"), as_json, tables.models)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--log-level", default="info", show_default=True)
def serve(host: str, port: int, workers: int, log_level: str) -> None:
    """Run the service with uvicorn (``uvicorn service.main:app``); settings from the environment."""
    import uvicorn

    uvicorn.run("service.main:app", host=host, port=port, workers=workers, log_level=log_level)


def main() -> None:
    cli()
