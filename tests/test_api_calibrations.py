"""``POST/GET /calibrations``, ``POST /analyses/capacity`` and plans naming a calibration."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from sqlalchemy.pool import NullPool

from api.db.migrate import downgrade
from api.db.session import make_engine

H100 = "h100-sxm5-80gb"


def point(rate: float, out: float, ttft: float, tpot: float, **extra) -> dict:
    return {
        "model": "llama-3.1-8b",
        "gpu": H100,
        "tp": 1,
        "dtype": "bf16",
        "isl": 467,
        "osl": 256,
        "request_rate_rps": rate,
        "output_tok_s": out,
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        **extra,
    }


POINTS = [
    point(2, 504, 23, 8),
    point(4, 929, 24, 9),
    point(8, 1959, 26, 9),
    point(16, 3765, 30, 11),
]
CAPACITY = {"model": "llama-3.1-8b", "gpu": H100, "prompt_tokens": 1000, "output_tokens": 200}


@pytest.fixture(autouse=True)
def _empty_yaml_store(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETPLAN_CALIBRATION_DIR", str(tmp_path / "calibrations"))


def test_create_list_get(client):
    r = client.post("/calibrations", json={"name": "lab", "measurements": POINTS})
    assert r.status_code == 201, r.text
    assert r.headers["location"] == "/calibrations/lab"
    body = r.json()
    (group,) = body["factors"]
    assert (group["gpu"], group["dtype"], group["points"]) == (H100, "bf16", 4)
    assert len(body["residuals"]) == 12
    assert {"predicted_before", "predicted_after", "ape_after"} <= set(body["residuals"][0])
    assert client.get("/calibrations").json() == [
        {
            "name": "lab",
            "created_at": body["created_at"],
            "groups": [{"gpu": H100, "dtype": "bf16", "engine": None, "points": 4}],
        }
    ]
    assert client.get("/calibrations/lab").json() == body
    missing = client.get("/calibrations/nope")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_a_name_is_stored_once(client):
    assert client.post("/calibrations", json={"name": "lab", "measurements": POINTS[:2]}).is_success
    r = client.post("/calibrations", json={"name": "lab", "measurements": POINTS[:2]})
    assert r.status_code == 409 and r.json()["issues"][0]["field"] == "name"


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        (point(2, 504, -23, 8), "measurements[1].ttft_ms", "greater than 0"),
        ({**point(2, 504, 23, 8), "gpu": "tpu-v9"}, "measurements.1", "unknown gpu"),
        ({**point(2, 504, 23, 8), "model": "gpt-2"}, "measurements.1", "unknown model"),
        (
            {k: v for k, v in point(2, 504, 23, 8).items() if k != "osl"},
            "measurements[1]",
            "isl and osl",
        ),
    ],
)
def test_bad_measurements_are_refused_and_nothing_is_stored(client, bad, field, words):
    r = client.post("/calibrations", json={"name": "bad", "measurements": [POINTS[0], bad]})
    assert r.status_code == 422
    issue = r.json()["issues"][0]
    assert issue["field"] == field and words in issue["message"]
    assert client.get("/calibrations").json() == []


def test_capacity(client):
    r = client.post("/analyses/capacity", json={**CAPACITY, "concurrency": 16})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["result"]["mode"] == "concurrency" and data["replica"]["gpu"] == H100
    assert data["result"]["output_tokens_per_s"] > 0


def test_capacity_errors_are_422_naming_the_field(client):
    r = client.post("/analyses/capacity", json={**CAPACITY, "gpu": "nope"})
    assert r.status_code == 422 and r.json()["issues"][0]["field"] == "gpu"
    r = client.post("/analyses/capacity", json={**CAPACITY, "tpot_ms": 1})
    assert r.status_code == 422 and r.json()["issues"][0]["field"] == "tpot_ms"
    r = client.post("/analyses/capacity", json={**CAPACITY, "calibration": "nope"})
    assert r.status_code == 422 and r.json()["issues"][0]["field"] == "calibration"
    r = client.post("/analyses/capacity", json={**CAPACITY, "engine": "tgi"})
    assert r.status_code == 422 and r.json()["issues"][0]["field"] == "engine"


def test_capacity_names_its_engine(client):
    """The engine prices the replica. Two shapes of the same mean context (128 + 2,048 and
    1,151 + 2 tokens: P + G/2 = 1,152): vLLM holds as many of either, TensorRT-LLM, which
    reserves each request's whole output, about half as many of the decode-heavy one."""
    base = {**CAPACITY, "model": "llama-3.1-70b", "dtype": "fp8"}
    long_out = {**base, "prompt_tokens": 128, "output_tokens": 2048}
    short_out = {**base, "prompt_tokens": 1151, "output_tokens": 2}
    held = {}
    for engine in ("vllm", "trtllm"):
        for name, shape in (("long", long_out), ("short", short_out)):
            r = client.post("/analyses/capacity", json={**shape, "engine": engine})
            assert r.status_code == 200, r.text
            assert r.json()["replica"]["engine"] == engine
            held[engine, name] = r.json()["result"]["max_resident_sequences"]
    assert held["vllm", "long"] == held["vllm", "short"]
    assert held["trtllm", "long"] < 0.6 * held["trtllm", "short"]
    default = client.post("/analyses/capacity", json=long_out).json()
    assert default["replica"]["engine"] == "vllm"


def test_capacity_and_plans_use_a_stored_calibration(client):
    created = client.post("/calibrations", json={"name": "lab", "measurements": POINTS}).json()
    mbu = created["factors"][0]["decode_mbu"]
    r = client.post("/analyses/capacity", json={**CAPACITY, "calibration": "lab"})
    assert r.json()["replica"]["mbu"] == mbu and r.json()["calibration"] == "lab"
    request = {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 4, "classes": [{"workload": "chat", "share": 1}]},
        "candidates": {"gpus": [H100], "dtypes": ["bf16"]},
        "calibration": "lab",
        "verify": {"enabled": False},
    }
    r = client.post("/plans", json=request)
    assert r.status_code == 201, r.text
    plan = r.json()["plan"]
    assert plan["assumptions"]["calibration"] == "lab"
    assert plan["assumptions"]["gpus"][H100]["decode_mbu"] == mbu
    r = client.post("/plans", json={**request, "calibration": "nope"})
    assert r.status_code == 422 and r.json()["issues"][0]["field"] == "calibration"


def test_the_migration_adds_and_removes_the_table(migrated_sqlite_url):
    engine = make_engine(migrated_sqlite_url, poolclass=NullPool)
    try:
        insp = inspect(engine)
        assert "calibrations" in insp.get_table_names()
        uniques = insp.get_unique_constraints("calibrations")
        assert [(u["name"], u["column_names"]) for u in uniques] == [
            ("uq_calibrations_name", ["name"])
        ]
    finally:
        engine.dispose()
    downgrade(migrated_sqlite_url, "0001")
    engine = make_engine(migrated_sqlite_url, poolclass=NullPool)
    try:
        assert "calibrations" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
