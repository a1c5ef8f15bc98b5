"""Malformed and hostile POST /plans requests: each gets its status, its code and the
offending field, and none of them changes the database."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pytest
from api_support import api_client, assert_error, count_plans, small

MAX_BODY = 20_000  # the tests' FLEETPLAN_MAX_BODY_BYTES


@dataclass(frozen=True)
class Bad:
    name: str
    status: int
    field: str | None  # the first issue's field (None: no issue expected)
    body: Any = None  # sent as JSON ...
    raw: bytes | None = None  # ... or these bytes
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    code: str | None = None

    def send(self, client):
        if self.raw is not None:
            headers = {"content-type": "application/json", **self.headers}
            return client.post("/plans", content=self.raw, headers=headers)
        if self.headers:
            return client.post("/plans", content=json.dumps(self.body), headers=self.headers)
        return client.post("/plans", json=self.body)


def traffic(*classes: dict, rate: Any = 5) -> dict:
    return {"traffic": {"rate_rps": rate, "classes": list(classes)}}


CHAT = {"workload": "chat", "share": 1.0}
SMALL_JSON = json.dumps(small())

CASES = [
    Bad(
        "shares sum to 0.9",
        422,
        "traffic",
        small(**traffic({"workload": "chat", "share": 0.5}, {"workload": "rag", "share": 0.4})),
    ),
    Bad("negative rate", 422, "traffic.rate_rps", small(**traffic(CHAT, rate=-1))),
    Bad("zero rate", 422, "traffic.rate_rps", small(**traffic(CHAT, rate=0))),
    Bad("absurd rate 1e12", 422, "traffic.rate_rps", small(**traffic(CHAT, rate=1e12))),
    Bad("overflowing rate 1e308", 422, "traffic.rate_rps", small(**traffic(CHAT, rate=1e308))),
    Bad("rate as the string NaN", 422, "traffic.rate_rps", small(**traffic(CHAT, rate="NaN"))),
    Bad(
        "NaN literal (Python's json accepts it)",
        422,
        "(body)",
        raw=SMALL_JSON.replace('"rate_rps": 5', '"rate_rps": NaN').encode(),
    ),
    Bad(
        "Infinity literal",
        422,
        "(body)",
        raw=SMALL_JSON.replace('"rate_rps": 5', '"rate_rps": Infinity').encode(),
    ),
    Bad(
        "-Infinity in an SLO",
        422,
        "(body)",
        raw=SMALL_JSON.replace("{", '{"slo": {"ttft_ms": -Infinity}, ', 1).encode(),
    ),
    Bad("unknown model", 422, "model", small(model="gpt-17"), code="unknown_entry"),
    Bad(
        "unknown GPU in candidates",
        422,
        "candidates.gpus[1]",
        small(candidates={"gpus": ["h100-sxm5-80gb", "tpu-v9"]}),
        code="unknown_entry",
    ),
    Bad(
        "unknown GPU in stock limits",
        422,
        "constraints.max_gpus.tpu-v9",
        small(constraints={"max_gpus": {"tpu-v9": 4}}),
        code="unknown_entry",
    ),
    Bad(
        "unknown workload",
        422,
        "traffic.classes[0].workload",
        small(**traffic({"workload": "poetry", "share": 1.0})),
        code="unknown_entry",
    ),
    Bad("unknown top-level field", 422, "colour", small(colour="blue")),
    Bad(
        "unknown nested field", 422, "traffic.classes[0].rps", small(**traffic({**CHAT, "rps": 3}))
    ),
    Bad("tp 3", 422, "candidates.tp", small(candidates={"gpus": ["l40s"], "tp": [3]})),
    Bad("percentile 120", 422, "slo.percentile", small(slo={"percentile": 120})),
    Bad("empty classes", 422, "traffic.classes", small(**traffic())),
    Bad("missing traffic", 422, "traffic", {"model": "llama-3.1-8b"}),
    Bad("share above 1", 422, "traffic.classes[0].share", small(**traffic({**CHAT, "share": 1.5}))),
    Bad(
        "duplicated class names",
        422,
        "traffic",
        small(**traffic({"workload": "chat", "share": 0.5}, {"workload": "chat", "share": 0.5})),
    ),
    Bad(
        "negative stock",
        422,
        "constraints.max_gpus.l40s",
        small(constraints={"max_gpus": {"l40s": -1}}),
    ),
    Bad(
        "zero budget",
        422,
        "constraints.budget_usd_per_hour",
        small(constraints={"budget_usd_per_hour": 0}),
    ),
    Bad("max_goodput without a budget", 422, "(body)", small(objective="max_goodput")),
    Bad("unknown objective", 422, "objective", small(objective="max_vibes")),
    Bad("unknown mode", 422, "candidates.modes[0]", small(candidates={"modes": ["turbo"]})),
    Bad(
        "chunk budget too small",
        422,
        "candidates.chunk_budgets[0]",
        small(candidates={"chunk_budgets": [8]}),
    ),
    Bad("negative solver time", 422, "solver.time_limit_s", small(solver={"time_limit_s": -1})),
    Bad(
        "SQL injection in the model name",
        422,
        "model",
        small(model="llama'); DROP TABLE plans; --"),
        code="unknown_entry",
    ),
    Bad("10k-character model name", 422, "model", small(model="x" * 10_000)),
    Bad("10k-character plan name", 422, "name", small(name="n" * 10_000)),
    Bad("model is a number", 422, "model", small(model=70)),
    Bad("JSON array body", 422, "(body)", [small()]),
    Bad("JSON string body", 422, "(body)", "plan me a fleet"),
    Bad("null body", 422, "(body)", raw=b"null"),
    Bad("empty body", 422, "(body)", raw=b""),
    Bad("truncated JSON", 422, "(body)", raw=SMALL_JSON[:-5].encode()),
    Bad(
        "duplicate keys",
        422,
        "(body)",
        raw=SMALL_JSON.replace("{", '{"model": "qwen3-32b", ', 1).encode(),
    ),
    Bad("not UTF-8", 422, "(body)", raw=b'{"model": "\xff\xfe"}'),
    Bad("nested 9,000 deep", 422, "(body)", raw=b"[" * 9_000 + b"]" * 9_000),
    Bad(
        "huge body",
        413,
        None,
        raw=json.dumps(small(name="x" * (MAX_BODY + 10))).encode(),
        code="body_too_large",
    ),
    Bad(
        "YAML content type",
        415,
        "Content-Type",
        small(),
        headers={"content-type": "application/yaml"},
        code="unsupported_media_type",
    ),
    Bad(
        "form content type",
        415,
        "Content-Type",
        small(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        code="unsupported_media_type",
    ),
]


@pytest.fixture
def client(db_url):
    with api_client(db_url, max_body_bytes=MAX_BODY) as c:
        yield c


def test_there_are_at_least_twenty_cases():
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_request_is_refused_and_changes_nothing(client, db_url, case):
    before = count_plans(db_url)
    response = case.send(client)
    body = assert_error(response, case.status, case.code)
    if case.field is not None:
        assert body["issues"], body
        assert body["issues"][0]["field"] == case.field, body
    if case.status == 422 and case.code is None:
        assert body["error"] == "invalid_input", body
    assert count_plans(db_url) == before
    # and the service is still fine
    assert client.get("/health").status_code == 200


def test_a_good_request_after_bad_ones_is_stored(client, db_url):
    for case in CASES[:5]:
        case.send(client)
    assert client.post("/plans", json=small()).status_code == 201
    assert count_plans(db_url) == 1
