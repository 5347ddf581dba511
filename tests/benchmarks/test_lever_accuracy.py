"""benchmarks/lever_accuracy.py predicts every published lever pair (none is skipped) with the row's own settings."""

from __future__ import annotations

from fastapi.testclient import TestClient

from gpu_catalog.levers import load_lever_measurements
from tests.benchmarks.scripts import load_script


def test_every_published_pair_is_predicted_with_its_own_k_and_acceptance(client: TestClient) -> None:
    script = load_script("lever_accuracy")
    for row in load_lever_measurements():
        plain = client.post("/v1/predictions", json=script.lever_body(row, False, False))
        spec = client.post("/v1/predictions", json=script.lever_body(row, True, False))
        assert plain.status_code == 200 and spec.status_code == 200, (row.row_id, plain.text, spec.text)
        assert plain.json()["fits"] and spec.json()["fits"], row.row_id
        notes = " ".join(str(n) for n in spec.json().get("notes", []))
        assert f"({row.method}, k={row.num_speculative_tokens})" in notes, (row.row_id, notes)
        if row.acceptance_rate is not None:
            assert f"acceptance rate {row.acceptance_rate:g} (the request's figure)" in notes, (row.row_id, notes)
        else:
            assert "the catalog's default" in notes, (row.row_id, notes)
