"""50 concurrent POST /plans all succeed and are listed; a restarted service (a new
app on the same database) still serves every one of them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from api_support import api_client, count_plans, small

N = 50


def test_fifty_concurrent_posts_then_a_restart(db_url):
    bodies = [small(name=f"concurrent {i}") for i in range(N)]
    with api_client(db_url) as client, ThreadPoolExecutor(max_workers=N) as pool:
        responses = list(pool.map(lambda body: client.post("/plans", json=body), bodies))
        assert [r.status_code for r in responses] == [201] * N, [
            r.text for r in responses if r.status_code != 201
        ][:3]
        created = {r.json()["id"]: r.json() for r in responses}
        assert len(created) == N
        assert {r["name"] for r in created.values()} == {b["name"] for b in bodies}

        page = client.get("/plans", params={"limit": 200}).json()
        assert page["total"] == N
        assert {i["id"] for i in page["items"]} == set(created)
        stamps = [i["created_at"] for i in page["items"]]
        assert stamps == sorted(stamps, reverse=True)  # newest first
    assert count_plans(db_url) == N

    with api_client(db_url) as restarted:  # a new app, engine and pool
        for plan_id, record in created.items():
            response = restarted.get(f"/plans/{plan_id}")
            assert response.status_code == 200
            assert response.json() == record
        # paging by cursor visits each plan once
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": 7} | ({"cursor": cursor} if cursor else {})
            page = restarted.get("/plans", params=params).json()
            seen += [i["id"] for i in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(created) and len(seen) == N
