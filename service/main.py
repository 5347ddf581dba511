"""The ASGI app: ``uvicorn service.main:app``."""

from __future__ import annotations

from fastapi import FastAPI

from service import admission, lifecycle
from service.api import benchmarks, calibration, catalog, health, operations, predictions, problems, recommendations
from service.api import docs as offline_docs
from service.api import openapi as truthful_openapi
from service.settings import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    operations.configure_logging(settings)
    app = FastAPI(
        title="LLM Deploy Advisor",
        version="0.1.0",
        description="Given a model, traffic and a latency budget: what to deploy, and what it costs.",
        lifespan=lifecycle.lifespan(settings),
        docs_url=None,      # served by service.api.docs, with local assets
        redoc_url=None,
    )
    offline_docs.install(app)
    problems.install(app)
    admission.install(app, settings)        # before operations: its log line and metrics cover what is shed
    operations.install(app, settings)
    app.include_router(health.router)
    app.include_router(catalog.router)
    app.include_router(predictions.router)
    app.include_router(recommendations.router)
    app.include_router(benchmarks.router)
    app.include_router(calibration.router)
    benchmarks.install(app)
    truthful_openapi.install(app, settings)
    return app


app = create_app()
