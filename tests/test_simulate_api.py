"""POST /plans/{id}/simulations and ``fleetplan simulate PLAN_ID|FILE``."""

from __future__ import annotations

import json

import pytest
from api_support import EXAMPLES, api_client, assert_error, small

from api.cli import main


@pytest.fixture
def client(migrated_sqlite_url):
    with api_client(migrated_sqlite_url) as c:
        yield c


def stored(client, body=None) -> str:
    response = client.post("/plans", json=body or small())
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_simulate_a_stored_plan(client):
    plan_id = stored(client)
    r = client.post(f"/plans/{plan_id}/simulations", json={"requests": 4000, "seed": 5})
    assert r.status_code == 200, r.text
    sim = r.json()
    assert sim["seed"] == 5 and sim["requests"] == pytest.approx(4000, rel=0.1)
    assert [c["name"] for c in sim["classes"]] == ["chat"]
    chat = sim["classes"][0]
    assert 0 <= chat["attainment"] <= 1 and chat["ttft_ms"]["p90"] > 0
    assert {p["class"] for p in sim["pools"]} == {"chat"}
    again = client.post(f"/plans/{plan_id}/simulations", json={"requests": 4000, "seed": 5})
    sim.pop("wall_time_s")
    assert {k: v for k, v in again.json().items() if k != "wall_time_s"} == sim
    bad = client.post(f"/plans/{plan_id}/simulations", json={"requests": 0})
    assert_error(bad, 422)
    extra = client.post(f"/plans/{plan_id}/simulations", json={"requests": 1000, "x": 1})
    assert_error(extra, 422)


def test_simulation_errors(client):
    assert_error(client.post("/plans/nope/simulations", json={}), 404, "not_found")
    infeasible = stored(client, small(constraints={"budget_usd_per_hour": 0.01}))
    body = assert_error(client.post(f"/plans/{infeasible}/simulations", json={}), 409)
    assert "no fleet" in body["detail"]


def test_cli_simulates_a_request_file(capsys):
    path = str(EXAMPLES / "code-completion-8b.yaml")
    assert main(["simulate", path, "--requests", "5000", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "code-completion" in out and "meets" in out and "attainment" in out
    assert main(["simulate", path, "--requests", "5000", "--seed", "2", "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["seed"] == 2 and sim["meets_slo"] is True


def test_cli_simulates_a_stored_plan(client, migrated_sqlite_url, monkeypatch, capsys):
    plan_id = stored(client)
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", migrated_sqlite_url)
    code = main(["simulate", plan_id, "--requests", "3000", "--json"])
    sim = json.loads(capsys.readouterr().out)
    assert code == (0 if sim["meets_slo"] else 3)
    assert sim["classes"][0]["name"] == "chat"
    assert main(["simulate", "0e6b7c1e-0000-4000-8000-000000000000"]) == 2
    assert "no plan with id" in capsys.readouterr().err
    assert main(["simulate", plan_id, "--burst-cv", "50"]) == 2
