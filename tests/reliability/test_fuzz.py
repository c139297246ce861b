"""Schemathesis against /openapi.json with every check, stateful phase included (SPEC §12).

The real app serves on a real socket; ``st run`` (schemathesis 4) fuzzes it with a key that
has every scope, runs the examples, coverage, fuzzing and stateful phases, and fails on any
5xx, any response outside the documented schema, status or content type, and (through
tests/reliability/st_hooks.py) any error that is not an RFC 9457 problem. Promotion and
rejection use a reviewer key, since nobody reviews their own write.

The stateful phase follows links this test adds to a copy of the document: a written item
leads to reading, reviewing (at its version) and forgetting its subject. Bounded for CI;
``GMEM_FUZZ_EXAMPLES`` and ``GMEM_FUZZ_SEED`` widen or replay a run (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.api import ALL_MEMORY_SCOPES, Api, MakeApi
from tests.support.fakes import query as search_body
from tests.support.fakes import write_body

Headers = dict[str, str]

ST = str(Path(sys.executable).parent / "st")
ROOT = Path(__file__).resolve().parents[2]

#: Operations whose rules go beyond what a schema can say (TTL policy and expiry against
#: the clock, the correction's target, an opaque cursor): a schema-valid request may still
#: be refused with 422 there, and only there. Erasing uses a key of its own (nobody erases
#: what they wrote), and may meet a memory that cannot be erased alone (409).
CONFIG = """\
hooks = "tests.reliability.st_hooks"

[[operations]]
include-path = ["/v1/memories", "/v1/memories/{{id}}"]
include-method = ["GET", "POST", "PUT"]
checks.positive_data_acceptance.expected-statuses = {accepted}

[[operations]]
include-path = "/v1/memories/{{id}}"
include-method = "DELETE"
headers = {{ Authorization = "{eraser}" }}
checks.positive_data_acceptance.expected-statuses = {accepted}

[[operations]]
include-path = "/v1/quarantine"
checks.positive_data_acceptance.expected-statuses = {accepted}

[[operations]]
include-path = ["/v1/memories/{{id}}/promote", "/v1/memories/{{id}}/reject"]
headers = {{ Authorization = "{reviewer}" }}
"""
ACCEPTED = ["2xx", "401", "403", "404", "409", "422", "429"]


def _operation_id(spec: dict[str, Any], method: str, path: str) -> str:
    operation_id: str = spec["paths"][path][method]["operationId"]
    return operation_id


def add_links(spec: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI links from a written item to what can be done with it next."""
    item = "/v1/memories/{id}"
    by_id = {"id": "$response.body#/id"}
    at_version = {"expected_version": "$response.body#/version"}
    links = {
        "GetItem": {"operationId": _operation_id(spec, "get", item), "parameters": by_id},
        "History": {
            "operationId": _operation_id(spec, "get", item + "/history"),
            "parameters": by_id,
        },
        "Promote": {
            "operationId": _operation_id(spec, "post", item + "/promote"),
            "parameters": by_id,
            "requestBody": at_version,
        },
        "Reject": {
            "operationId": _operation_id(spec, "post", item + "/reject"),
            "parameters": by_id,
            "requestBody": at_version | {"reason": "fuzzed review"},
        },
        "Forget": {
            "operationId": _operation_id(spec, "post", "/v1/subjects/{subject_id}/forget"),
            "parameters": {"subject_id": "$response.body#/subject_id"},
        },
        "Erase": {"operationId": _operation_id(spec, "delete", item), "parameters": by_id},
    }
    for method, path, status in [
        ("put", item, "201"),
        ("put", item, "200"),
        ("post", "/v1/memories", "201"),
        ("post", item + "/promote", "200"),
        ("post", item + "/reject", "200"),
    ]:
        spec["paths"][path][method]["responses"][status]["links"] = links
    return spec


def test_fuzzing_the_openapi_document_finds_no_defect(make_api: MakeApi, tmp_path: Path) -> None:
    """Every check, every phase: no 5xx, no schema violation, every error a problem."""
    api = make_api(rate_limit_requests=10**9)
    admin = api.key(ALL_MEMORY_SCOPES)
    reviewer = api.key("memory:review,memory:read", trust="untrusted")
    eraser = api.key("subject:forget,memory:read", trust="untrusted")
    spec = add_links(api.client.get("/openapi.json").json())
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(spec))
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        CONFIG.format(
            accepted=json.dumps(ACCEPTED),
            reviewer=reviewer["Authorization"],
            eraser=eraser["Authorization"],
        )
    )
    examples = os.environ.get("GMEM_FUZZ_EXAMPLES", "40")
    seed = os.environ.get("GMEM_FUZZ_SEED", "20261202")
    done = subprocess.run(
        [
            *(ST, "--config-file", str(config), "run", str(schema)),
            *("--url", str(api.client.base_url), "--checks", "all"),
            *("--header", f"Authorization: {admin['Authorization']}"),
            *("--max-examples", examples, "--seed", seed, "--workers", "1"),
            *("--report", "junit", "--report-dir", str(tmp_path / "report")),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,  # st keeps a cache in .schemathesis/ of its working directory
        env=os.environ | {"PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Stateful" in done.stdout
    assert api.service.verify_replay().ok  # whatever the fuzzer did, the log explains it


# -- what the fuzzer found, kept fixed ------------------------------------------------------


def test_an_integer_written_with_a_zero_fraction_is_an_integer(api: Api, admin: Headers) -> None:
    """JSON (and JSON Schema) call ``5.0`` an integer: accepted; ``5.5``, ``"5"``, true are not."""
    found = api.client.post("/v1/search", json=search_body(limit=5.0), headers=admin)
    assert found.status_code == 200, found.text
    created = api.client.post("/v1/memories", json=write_body(expected_version=0.0), headers=admin)
    assert created.status_code == 201, created.text
    for bad in [5.5, "5", True]:
        refused = api.client.post("/v1/search", json=search_body(limit=bad), headers=admin)
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["field"] == "limit"


def test_integers_stop_at_2_53_minus_1_exactly(api: Api, admin: Headers) -> None:
    """The bound is one every JSON parser reads exactly; one above it is 422, not 2**63."""
    top = 2**53 - 1
    stale = api.client.post(
        "/v1/memories/nothing/promote", json={"expected_version": top}, headers=admin
    )
    assert stale.status_code == 404  # accepted by the schema, then simply not found
    for above in [2**53, 2**63 + 191, 10**30]:
        refused = api.client.post(
            "/v1/memories/nothing/promote", json={"expected_version": above}, headers=admin
        )
        assert refused.status_code == 422
    spec = api.client.get("/openapi.json").json()
    version = spec["components"]["schemas"]["PromoteBody"]["properties"]["expected_version"]
    assert (version["minimum"], version["maximum"]) == (0, top)  # exact, even as a double


def test_a_wrong_method_lists_every_method_of_the_path_in_allow(api: Api) -> None:
    """``/v1/memories/{id}`` serves DELETE, GET and PUT: a 405 there says all three, not
    just the first."""
    response = api.client.request("OPTIONS", "/v1/memories/m-1")
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["Allow"] == "DELETE, GET, PUT"
    assert api.client.delete("/v1/search").headers["Allow"] == "POST"


def test_the_openapi_document_states_the_rules_the_fuzzer_tripped_on(api: Api) -> None:
    """NUL-free text, expires_at xor ttl_seconds, and forget's 400 and 409 are documented."""
    spec = api.client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    write = schemas["WriteBody"]
    assert write["not"]["required"] == ["expires_at", "ttl_seconds"]
    assert "\\x00" in write["properties"]["content"]["pattern"]
    assert "\\x00" in schemas["ProvenanceIn"]["properties"]["ref"]["pattern"]
    assert "\\x00" in schemas["SearchBody"]["properties"]["query"]["pattern"]
    forget = spec["paths"]["/v1/subjects/{subject_id}/forget"]["post"]["responses"]
    assert {"400", "409"} <= set(forget)
