"""How much of the OpenAPI document a reader can rely on: the share of schema fields with a description, and
what each operation documents.

    python benchmarks/openapi_coverage.py            # the figures
    python benchmarks/openapi_coverage.py --list     # and every field still without a description

A field is a property of a component schema (request and response bodies and everything they nest) or a
query/path parameter; it counts as described when it carries a ``description``. Built from the app's own
``/openapi.json`` (no server, no database: the document does not need either).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fastapi.testclient import TestClient

from service.main import create_app
from service.settings import Settings


def openapi() -> dict[str, Any]:
    app = create_app(Settings(database_url="sqlite://", auto_migrate=False))
    # not entered as a context manager: the lifespan (migrations, calibration) is not run
    doc: dict[str, Any] = TestClient(app).get("/openapi.json").json()
    return doc


def fields(doc: dict[str, Any]) -> list[tuple[str, bool]]:
    """(name, described) for every schema property and every operation parameter."""
    out = []
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        for prop, spec in sorted(schema.get("properties", {}).items()):
            out.append((f"{name}.{prop}", bool(spec.get("description"))))
    for path, ops in sorted(doc["paths"].items()):
        for method, op in sorted(ops.items()):
            for p in op.get("parameters", []):
                out.append((f"{method.upper()} {path} {p['in']} {p['name']}", bool(p.get("description"))))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print every field without a description")
    args = parser.parse_args()
    doc = openapi()
    found = fields(doc)
    described = sum(ok for _, ok in found)
    print(f"described fields: {described}/{len(found)} = {described / len(found):.1%}")
    ops = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    examples = sum(1 for *_, op in ops for r in op.get("responses", {}).values()
                   for media in r.get("content", {}).values() if "example" in media or "examples" in media)
    problem = sum(1 for *_, op in ops for r in op.get("responses", {}).values()
                  if "application/problem+json" in r.get("content", {}))
    secured = sorted(f"{m.upper()} {p}" for p, m, op in ops if op.get("security"))
    print(f"operations: {len(ops)}; responses with an example: {examples}; "
          f"documented application/problem+json responses: {problem}")
    print(f"operations that show a key requirement: {len(secured)} ({', '.join(secured) or 'none'})")
    if args.list:
        for name, ok in found:
            if not ok:
                print("  undescribed:", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
