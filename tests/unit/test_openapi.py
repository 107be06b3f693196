"""openapi/openapi.json is generated from the app; this fails when the two drift apart."""

from __future__ import annotations

import json
from pathlib import Path

from app.server import create_app

CHECKED_IN = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_checked_in_document_matches_the_app() -> None:
    generated = json.loads(json.dumps(create_app().openapi(), sort_keys=True))
    on_disk = json.loads(CHECKED_IN.read_text())
    assert generated == on_disk, (
        "openapi/openapi.json is stale: regenerate it with "
        "`python -m app openapi -o openapi/openapi.json`"
    )


def test_extender_bodies_are_documented_with_capitalised_schemas() -> None:
    doc = create_app().openapi()
    schemas = doc["components"]["schemas"]
    assert set(schemas["ExtenderArgs"]["properties"]) == {"Pod", "Nodes", "NodeNames"}
    assert {"NodeNameToVictims", "NodeNameToMetaVictims", "Pod"} <= set(
        schemas["ExtenderPreemptionArgs"]["properties"]
    )
    assert set(schemas["ExtenderFilterResult"]["properties"]) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert set(schemas["HostPriority"]["properties"]) == {"Host", "Score"}
    assert set(schemas["MetaPod"]["properties"]) == {"UID"}
    body = doc["paths"]["/scheduler/filter"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("/ExtenderArgs")
    preempt = doc["paths"]["/scheduler/preempt"]["post"]
    ref = preempt["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/ExtenderPreemptionArgs")


def test_invalid_requests_are_documented_as_400_not_422() -> None:
    # The error handler answers 400 {"error": ...}; FastAPI's default 422 must not be listed.
    doc = create_app().openapi()
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "422" not in responses, f"{method.upper()} {path}"
            if operation.get("parameters") or operation.get("requestBody"):
                assert "400" in responses, f"{method.upper()} {path}"
                ref = responses["400"]["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/ErrorBody", f"{method.upper()} {path}"
    assert "HTTPValidationError" not in doc["components"]["schemas"]
