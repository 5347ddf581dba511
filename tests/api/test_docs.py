"""The documentation pages work without a network: every asset they reference is served by the app itself."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

# src="..." / href="..." attributes, and the quoted OpenAPI URL the page's script loads (url: '/openapi.json'
# in Swagger UI's options, spec-url='/openapi.json' on ReDoc's element)
_REFERENCES = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']|\burl['"]?\s*:\s*['"]([^'"]+)['"]""")
_MEDIA = {".js": "javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}


def references(html: str) -> list[str]:
    return [a or b for a, b in _REFERENCES.findall(html)]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_every_asset_a_docs_page_references_is_served_by_the_app(client: TestClient, page: str) -> None:
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    refs = references(r.text)
    # a script, the favicon and the OpenAPI document at least (Swagger UI: its stylesheet too)
    assert len(refs) >= (4 if page == "/docs" else 3), refs
    assert "/openapi.json" in refs
    for ref in refs:
        url = urlsplit(urljoin(f"http://testserver{page}", ref))
        assert url.netloc == "testserver", f"{page} loads {ref} from another host"
        asset = client.get(url.path)
        assert asset.status_code == 200, (ref, asset.status_code)
        assert asset.content, ref
        suffix = url.path[url.path.rfind("."):]
        if suffix in _MEDIA:
            assert _MEDIA[suffix] in asset.headers["content-type"], (ref, asset.headers["content-type"])


def test_docs_pages_name_no_other_host(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        r = client.get(page)
        html = r.text
        # and the browser is told to load nothing from elsewhere (ReDoc's bundle has a logo on cdn.redoc.ly)
        policy = r.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "img-src 'self' data:" in policy
        assert not re.search(r"https?:|\*", policy), policy
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", html, re.IGNORECASE), page
        assert "fonts.googleapis" not in html and "cdn.jsdelivr" not in html


def test_swagger_ui_asks_no_outside_validator(client: TestClient) -> None:
    # without validatorUrl: null, Swagger UI loads a badge image from validator.swagger.io
    assert '"validatorUrl": null' in client.get("/docs").text
