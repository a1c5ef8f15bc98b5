"""Idempotency-Key on POST /plans and POST /comparisons (issue 14, finding 9): a
retry with the same key and body gets what the first request stored, never a
second row; the same key with another body is 422."""

from __future__ import annotations

import threading

import pytest
from api_support import api_client, assert_error, count_plans, count_rows
from compare_support import BASE, SPEC
from test_api_comparisons import wait_until_finished

from api.db.models import ComparisonRecord, IdempotencyKeyRecord


@pytest.fixture
def client(db_url):
    with api_client(db_url, compare_workers=1) as c:
        yield c


def test_a_retried_plan_returns_the_stored_one(client, db_url):
    key = {"Idempotency-Key": "plan-7f3a"}
    first = client.post("/plans", json=BASE, headers=key)
    again = client.post("/plans", json=BASE, headers=key)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert count_plans(db_url) == 1
    other = client.post("/plans", json=BASE, headers={"Idempotency-Key": "plan-other"})
    unkeyed = client.post("/plans", json=BASE)
    assert len({first.json()["id"], other.json()["id"], unkeyed.json()["id"]}) == 3
    assert count_plans(db_url) == 3 and count_rows(db_url, IdempotencyKeyRecord) == 2


def test_the_same_key_with_another_body_is_422_and_stores_nothing(client, db_url):
    key = {"Idempotency-Key": "plan-7f3a"}
    first = client.post("/plans", json=BASE, headers=key).json()
    err = assert_error(
        client.post("/plans", json={**BASE, "name": "another"}, headers=key),
        422,
        "idempotency_key_reused",
    )
    assert err["issues"][0]["field"] == "Idempotency-Key"
    assert first["id"] in err["detail"] and "new key" in err["detail"]
    assert count_plans(db_url) == 1


def test_concurrent_retries_store_one_plan(client, db_url):
    key = {"Idempotency-Key": "concurrent"}
    answers: list[tuple[int, str]] = []

    def post() -> None:
        r = client.post("/plans", json=BASE, headers=key)
        answers.append((r.status_code, r.json()["id"]))

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(answers) == 4
    assert {status for status, _ in answers} == {201}
    assert len({ident for _, ident in answers}) == 1
    assert count_plans(db_url) == 1


@pytest.mark.parametrize("bad", ["", "has space", "x" * 201, "caf\u00e9"])
def test_a_malformed_key_is_422(client, db_url, bad):
    response = client.post("/plans", json=BASE, headers={"Idempotency-Key": bad.encode()})
    assert_error(response, 422)
    assert count_plans(db_url) == 0


def test_a_retried_comparison_is_the_stored_one_and_not_run_again(client, db_url):
    key = {"Idempotency-Key": "what-if-1"}
    first = client.post("/comparisons", json=SPEC, headers=key)
    assert first.status_code == 202
    ident = first.json()["id"]
    again = client.post("/comparisons", json=SPEC, headers=key)
    assert again.status_code == 202 and again.json()["id"] == ident
    assert again.headers["idempotent-replayed"] == "true"
    done = wait_until_finished(client, ident)
    assert done["status"] == "done"
    late = client.post("/comparisons?wait=true", json=SPEC, headers=key)
    assert late.status_code == 202 and late.json()["status"] == "done"
    assert count_rows(db_url, ComparisonRecord) == 1
    assert count_plans(db_url) == done["total"]
    assert_error(
        client.post("/comparisons", json={**SPEC, "name": "other"}, headers=key),
        422,
        "idempotency_key_reused",
    )
    assert count_rows(db_url, ComparisonRecord) == 1


def test_a_key_whose_plan_was_deleted_is_409(client):
    key = {"Idempotency-Key": "gone"}
    plan = client.post("/plans", json=BASE, headers=key).json()
    assert client.delete(f"/plans/{plan['id']}").status_code == 204
    err = assert_error(client.post("/plans", json=BASE, headers=key), 409, "conflict")
    assert "deleted" in err["detail"]
