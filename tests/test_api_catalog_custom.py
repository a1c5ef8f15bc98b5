"""Custom catalog entries: POST/PUT/DELETE /catalog/{kind}, merged reads, plans on them."""

from __future__ import annotations

import pytest
from api_support import (
    api_client,
    assert_error,
    count_custom_entries,
    count_plans,
    small,
)

from catalog.loader import load_catalog

SHIPPED = load_catalog()


@pytest.fixture
def client(db_url):
    with api_client(db_url) as c:
        yield c


def shipped(kind: str, entry_id: str, **changes) -> dict:
    """A shipped entry as JSON, with changes (a new id, a new price...)."""
    entry = getattr(SHIPPED, kind)[entry_id].model_dump(mode="json")
    entry.update(changes)
    return entry


def private_l40s(price: float = 0.5, **changes) -> dict:
    price_block = shipped("gpus", "l40s")["price"] | {"usd_per_hour": price}
    return shipped("gpus", "l40s", id="our-l40s", name="L40S (our rack)", price=price_block) | (
        changes
    )


def test_post_a_custom_gpu_then_read_it_back_merged(client, db_url):
    response = client.post("/catalog/gpus", json=private_l40s())
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/catalog/gpus/our-l40s"
    assert response.json()["source"] == "custom"
    assert response.json()["price"]["usd_per_hour"] == 0.5

    listed = client.get("/catalog/gpus").json()
    assert [g["id"] for g in listed] == sorted([*SHIPPED.gpus, "our-l40s"])
    sources = {g["id"]: g["source"] for g in listed}
    assert sources["our-l40s"] == "custom" and sources["l40s"] == "shipped"
    assert [g["id"] for g in client.get("/catalog/gpus?source=custom").json()] == ["our-l40s"]
    assert client.get("/catalog/gpus/our-l40s").json()["source"] == "custom"

    summary = client.get("/catalog").json()
    assert summary["counts"]["gpus"] == len(SHIPPED.gpus) + 1
    assert summary["custom_counts"] == {"gpus": 1, "models": 0, "workloads": 0, "links": 0}
    assert summary["shipped_catalog_hash"] == SHIPPED.content_hash
    assert summary["catalog_hash"] != SHIPPED.content_hash
    assert count_custom_entries(db_url) == 1


def test_plans_use_the_merged_catalog_and_record_its_hash(client):
    client.post("/catalog/gpus", json=private_l40s(price=0.5))
    merged_hash = client.get("/catalog").json()["catalog_hash"]
    record = client.post("/plans", json=small(candidates={"gpus": ["our-l40s"]})).json()
    assert record["status"] == "optimal"
    assert record["catalog_hash"] == merged_hash
    assert set(record["plan"]["gpus_by_type"]) == {"our-l40s"}
    gpus = record["plan"]["gpus_total"]
    assert record["cost_usd_per_hour"] == pytest.approx(0.5 * gpus)

    # a new price changes the catalog hash of the next plan, not of the stored one
    assert client.put("/catalog/gpus/our-l40s", json=private_l40s(price=0.4)).status_code == 200
    again = client.post("/plans", json=small(candidates={"gpus": ["our-l40s"]})).json()
    assert again["catalog_hash"] not in (merged_hash, SHIPPED.content_hash)
    assert again["cost_usd_per_hour"] == pytest.approx(0.4 * again["plan"]["gpus_total"])
    assert client.get(f"/plans/{record['id']}").json()["catalog_hash"] == merged_hash


def test_a_fine_tuned_model_and_an_in_house_workload(client):
    model = shipped("models", "llama-3.1-8b", id="acme-8b-ft", name="Llama 3.1 8B, fine-tuned")
    assert client.post("/catalog/models", json=model).status_code == 201
    workload = shipped("workloads", "chat", id="support-bot", prefix_hit_rate=0.5)
    assert client.post("/catalog/workloads", json=workload).status_code == 201
    record = client.post(
        "/plans",
        json=small(
            model="acme-8b-ft",
            traffic={"rate_rps": 5, "classes": [{"workload": "support-bot", "share": 1}]},
        ),
    ).json()
    assert record["status"] == "optimal", record
    assert record["model"] == "acme-8b-ft"
    assert record["plan"]["classes"][0]["workload"] == "support-bot"
    listed = client.get("/plans", params={"model": "acme-8b-ft"}).json()
    assert listed["total"] == 1


def test_shipped_ids_are_read_only(client, db_url):
    body = assert_error(client.post("/catalog/gpus", json=shipped("gpus", "l40s")), 409, "conflict")
    assert "read-only" in body["detail"]
    body = assert_error(
        client.put("/catalog/gpus/l40s", json=shipped("gpus", "l40s")), 409, "conflict"
    )
    assert "shipped entries are read-only; post a new id" in body["detail"]
    assert_error(client.delete("/catalog/gpus/l40s"), 409, "conflict")
    assert count_custom_entries(db_url) == 0
    assert client.get("/catalog/gpus/l40s").json()["source"] == "shipped"


def test_post_of_an_existing_custom_id_is_409_put_replaces_it(client, db_url):
    assert client.post("/catalog/gpus", json=private_l40s()).status_code == 201
    body = assert_error(client.post("/catalog/gpus", json=private_l40s()), 409, "conflict")
    assert "PUT /catalog/gpus/our-l40s" in body["detail"]
    replaced = client.put("/catalog/gpus/our-l40s", json=private_l40s(price=0.7))
    assert replaced.status_code == 200
    assert client.get("/catalog/gpus/our-l40s").json()["price"]["usd_per_hour"] == 0.7
    created = client.put("/catalog/gpus/our-l40s-2", json=private_l40s(id="our-l40s-2"))
    assert created.status_code == 201
    assert count_custom_entries(db_url) == 2


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("gpus", {"id": "x"}, "name"),
        ("gpus", private_l40s(memory_gb=-1), "memory_gb"),
        ("gpus", private_l40s(id="Not An Id"), "id"),
        ("gpus", private_l40s(colour="red"), "colour"),
        ("gpus", private_l40s(network_link="carrier-pigeon"), "gpus.our-l40s.network_link"),
        ("gpus", private_l40s(pcie_link="nvlink4"), "gpus.our-l40s.pcie_link"),
        ("models", shipped("models", "llama-3.1-8b", id="m", num_layers=0), "num_layers"),
        ("workloads", shipped("workloads", "chat", id="w", prefix_hit_rate=1.5), "prefix_hit_rate"),
        (
            "links",
            shipped("links", "eth-100g", id="l", bandwidth_gb_per_s=-3),
            "bandwidth_gb_per_s",
        ),
    ],
)
def test_invalid_custom_entries_are_422_and_not_stored(client, db_url, kind, body, field):
    response = client.post(f"/catalog/{kind}", json=body)
    error = assert_error(response, 422)
    assert error["issues"][0]["field"] == field, error
    assert count_custom_entries(db_url) == 0


def test_put_id_must_match_the_path(client, db_url):
    error = assert_error(client.put("/catalog/gpus/other", json=private_l40s()), 422)
    assert error["issues"][0]["field"] == "id"
    assert_error(client.put("/catalog/gpus/BAD ID", json=private_l40s()), 422)
    assert count_custom_entries(db_url) == 0


def test_custom_gpu_may_use_a_custom_link_which_then_cannot_be_deleted(client, db_url):
    link = shipped("links", "eth-100g", id="our-fabric", name="our 800G fabric")
    link["bandwidth_gb_per_s"] = 100.0
    assert client.post("/catalog/links", json=link).status_code == 201
    gpu = private_l40s(network_link="our-fabric")
    assert client.post("/catalog/gpus", json=gpu).status_code == 201
    body = assert_error(client.delete("/catalog/links/our-fabric"), 409, "conflict")
    assert "referenced" in body["detail"]
    assert client.delete("/catalog/gpus/our-l40s").status_code == 204
    assert client.delete("/catalog/links/our-fabric").status_code == 204
    assert_error(client.delete("/catalog/links/our-fabric"), 404, "not_found")
    assert count_custom_entries(db_url) == 0


def test_catalog_writes_need_the_api_key_when_set(migrated_sqlite_url):
    with api_client(migrated_sqlite_url, api_key="k") as client:
        assert_error(client.post("/catalog/gpus", json=private_l40s()), 401, "unauthorized")
        assert_error(client.put("/catalog/gpus/our-l40s", json=private_l40s()), 401)
        ok = client.post("/catalog/gpus", json=private_l40s(), headers={"X-API-Key": "k"})
        assert ok.status_code == 201
        assert_error(client.delete("/catalog/gpus/our-l40s"), 401)
    assert count_custom_entries(migrated_sqlite_url) == 1
    assert count_plans(migrated_sqlite_url) == 0


def test_unknown_kind_writes_are_404(client):
    assert_error(client.post("/catalog/tpus", json={}), 404, "not_found")
    assert_error(client.put("/catalog/tpus/v5e", json={}), 404, "not_found")
    assert_error(client.delete("/catalog/tpus/v5e"), 404, "not_found")


def test_the_gpu_ranking_counts_custom_gpus(client):
    """``POST /analyses/gpu-ranking`` prices the merged catalog: a custom copy of the L40S
    ranks beside the shipped one, at the same predicted throughput."""
    assert client.post("/catalog/gpus", json=private_l40s()).status_code == 201
    r = client.post("/analyses/gpu-ranking", json={"model": "llama-3.1-8b"})
    assert r.status_code == 200, r.text
    by_gpu = {g["gpu"]: g for g in r.json()["gpus"]}
    ours, theirs = by_gpu["our-l40s"], by_gpu["l40s"]
    assert ours["output_tokens_per_s_per_gpu"] == pytest.approx(
        theirs["output_tokens_per_s_per_gpu"]
    )
    assert (ours["tp"], ours["dtype"]) == (theirs["tp"], theirs["dtype"])
