"""GET /docs (Swagger UI) and GET /redoc with every asset served by the service itself.

FastAPI's own pages load Swagger UI and ReDoc from a CDN and ReDoc's fonts from a font host, so they are blank
on a network with no route out. The scripts, the stylesheet and the favicon here come from the fastapi-offline
package (its ``static`` folder ships swagger-ui-dist and redoc's standalone bundle) and are served under
``ASSETS_URL``; the pages name no other host.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"
ASSETS_DIR = files("fastapi_offline") / "static"
# Swagger UI shows a badge fetched from validator.swagger.io unless validatorUrl is null.
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}
# The browser may load nothing from another origin: ReDoc's footer has a logo from cdn.redoc.ly (it falls back to
# none when the image does not load). Inline script and style: both pages start from an inline script, and ReDoc
# styles itself inline; ReDoc's search runs in a worker made from a blob: URL.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
                           "connect-src 'self'; base-uri 'self'; form-action 'self'")


def install(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve the two pages and their assets; the app must be made with ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(ASSETS_DIR)), name="docs-assets")
    title = app.title

    def urls(request: Request) -> tuple[str, str]:
        root = request.scope.get("root_path", "").rstrip("/")
        return f"{root}{app.openapi_url}", f"{root}{ASSETS_URL}"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        openapi_url, assets = urls(request)
        return _same_origin_only(get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{title} - Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js", swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png", swagger_ui_parameters=SWAGGER_UI_PARAMETERS))

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        openapi_url, assets = urls(request)
        return _same_origin_only(get_redoc_html(
            openapi_url=openapi_url, title=f"{title} - ReDoc", redoc_js_url=f"{assets}/redoc.standalone.js",
            redoc_favicon_url=f"{assets}/favicon.png", with_google_fonts=False))


def _same_origin_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return page
