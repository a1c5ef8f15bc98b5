"""``GET /plans/{id}/deployment?target=...`` and ``fleetplan deploy PLAN --target ...``:
the stored plan's artifacts (validated in tests/test_deploy.py), the errors naming
their field (target 422, unknown plan 404, a fleet larger than one host for compose
422 with the reason, an infeasible plan 409), and plan files from ``plan --json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from api_support import EXAMPLES, assert_error, example, small

from api import cli

DISAGG = Path(__file__).parent / "data" / "deploy" / "disaggregated-8b-one-host.yaml"


def post_plan(client, body) -> dict:
    response = client.post("/plans", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_every_target_of_a_stored_plan(client):
    stored = post_plan(client, yaml.safe_load(DISAGG.read_text()))
    pool_ids = [p["id"] for p in stored["plan"]["pools"]]
    for target, kind in (("dynamo", "DynamoGraphDeployment"), ("llm-d", None), ("compose", None)):
        response = client.get(f"/plans/{stored['id']}/deployment", params={"target": target})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/yaml")
        assert "attachment" in response.headers["content-disposition"]
        doc = yaml.safe_load(response.text)
        if kind:
            assert doc["kind"] == kind
            assert doc["metadata"]["name"] == f"fleetplan-{stored['id'][:8]}"
        for pool_id in pool_ids:
            assert pool_id in response.text, (target, pool_id)
    sglang = client.get(
        f"/plans/{stored['id']}/deployment", params={"target": "compose", "engine": "sglang"}
    )
    assert sglang.status_code == 200 and "sglang.launch_server" in sglang.text


def test_bad_or_missing_target_is_422_naming_target(client):
    stored = post_plan(client, small())
    url = f"/plans/{stored['id']}/deployment"
    for params in ({"target": "helm"}, {}):
        body = assert_error(client.get(url, params=params), 422)
        assert [i["field"] for i in body["issues"]] == ["query.target"]
    body = assert_error(client.get(url, params={"target": "llm-d", "engine": "sglang"}), 422)
    assert body["issues"][0]["field"] == "engine"


def test_unknown_plan_is_404(client):
    for plan_id in ("00000000-0000-4000-8000-000000000000", "nope"):
        body = assert_error(
            client.get(f"/plans/{plan_id}/deployment", params={"target": "dynamo"}), 404
        )
        assert body["issues"][0]["field"] == "id"


def test_compose_for_a_fleet_larger_than_one_host_is_422_with_the_reason(client):
    stored = post_plan(client, example("llama-405b-bf16-h100-pp.yaml"))
    assert stored["plan"]["gpus_total"] > 8
    url = f"/plans/{stored['id']}/deployment"
    body = assert_error(client.get(url, params={"target": "compose"}), 422)
    (issue,) = body["issues"]
    assert issue["field"] == "target"
    assert "one host" in issue["message"] and "holds 8" in issue["message"]
    assert "target=dynamo" in issue["message"]
    assert client.get(url, params={"target": "dynamo"}).status_code == 200


def test_an_infeasible_plan_has_no_deployment(client):
    stored = post_plan(client, small(constraints={"budget_usd_per_hour": 0.01}))
    assert stored["status"] == "infeasible"
    body = assert_error(
        client.get(f"/plans/{stored['id']}/deployment", params={"target": "dynamo"}), 409
    )
    assert "no fleet to deploy" in body["detail"]


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def db(monkeypatch, migrated_sqlite_url) -> str:
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", migrated_sqlite_url)
    return migrated_sqlite_url


def test_cli_deploys_a_plan_file_and_a_stored_plan(capfd, tmp_path, db):
    assert cli.main(["plan", str(DISAGG), "--json"]) == 0
    plan = json.loads(capfd.readouterr().out)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert cli.main(["deploy", str(path), "--target", "dynamo"]) == 0
    doc = yaml.safe_load(capfd.readouterr().out)
    assert doc["kind"] == "DynamoGraphDeployment"
    assert len(doc["spec"]["services"]) == 1 + len(plan["pools"])

    assert cli.main(["plan", str(DISAGG), "--save", "--json"]) == 0
    stored = json.loads(capfd.readouterr().out)
    out_file = tmp_path / "compose.yml"
    assert cli.main(["deploy", stored["id"], "-t", "compose", "-o", str(out_file)]) == 0
    assert capfd.readouterr().out == ""
    compose = yaml.safe_load(out_file.read_text())
    for pool in stored["plan"]["pools"]:
        assert pool["id"] in out_file.read_text()
    assert any(name.startswith("router-") for name in compose["services"])
    # a stored record's JSON (plans show --json) is a plan file too
    path.write_text(json.dumps(stored))
    assert cli.main(["deploy", str(path), "--target", "llm-d"]) == 0
    assert "llm-d-modelservice" in capfd.readouterr().out


def test_cli_errors_are_one_line_naming_the_field(capfd, tmp_path, db):
    assert cli.main(["deploy", "nope", "--target", "dynamo"]) == 2
    assert capfd.readouterr().err.startswith("fleetplan: error: id: no plan with id 'nope'")
    assert cli.main(["deploy", "nope", "--target", "helm"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("fleetplan: error: deploy: argument --target/-t: invalid choice")
    assert cli.main(["deploy", str(tmp_path / "missing.json"), "--target", "dynamo"]) == 2
    assert capfd.readouterr().err.startswith("fleetplan: error: FILE: ")
    path = tmp_path / "request.json"
    path.write_text(json.dumps(small()))  # a request, not a plan
    assert cli.main(["deploy", str(path), "--target", "dynamo"]) == 2
    assert capfd.readouterr().err.startswith("fleetplan: error: FILE: not a plan")
    plan_path = tmp_path / "plan.json"
    assert cli.main(["plan", str(EXAMPLES / "llama-405b-bf16-h100-pp.yaml"), "--json"]) == 0
    plan_path.write_text(capfd.readouterr().out)
    assert cli.main(["deploy", str(plan_path), "--target", "compose"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("fleetplan: error: target: compose deploys one host")
    assert len(err.strip().splitlines()) == 1
