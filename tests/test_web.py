"""The web page at ``/`` (api/routes/web.py, api/static/app) and the endpoints it adds:
``GET /examples``, ``GET /examples/{name}``, ``GET /web/config``, ``POST /plans/validate``.
The browser itself is driven in tests/test_web_e2e.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.main import create_app
from api.routes.web import APP_DIR
from api.settings import Settings
from planner.report.charts import GPU_COLORS

ROOT = Path(__file__).resolve().parent.parent
ASSETS = sorted(p for p in APP_DIR.rglob("*") if p.is_file())
#: XML namespace names are identifiers, never fetched: the only http URL a script may hold.
NAMESPACES = {"http://www.w3.org/2000/svg"}


def test_the_page_is_served_at_the_root(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/static/app/js/main.js"></script>' in r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert client.head("/").status_code == 200


def test_every_asset_the_page_names_is_local_and_served(client: TestClient) -> None:
    html = client.get("/").text
    urls = re.findall(r"""(?:src|href)=["']([^"'#]+)["']""", html)
    assert "/static/app/app.css" in urls and "/static/app/js/main.js" in urls
    for url in urls:
        assert url.startswith("/"), url
        assert client.get(url).status_code == 200, url


@pytest.mark.parametrize(
    ("path", "media_type"),
    [
        ("/static/app/js/main.js", "text/javascript"),
        ("/static/app/js/composer.js", "text/javascript"),
        ("/static/app/app.css", "text/css"),
        ("/static/app/index.html", "text/html"),
    ],
)
def test_assets_have_their_content_types(client: TestClient, path: str, media_type: str) -> None:
    r = client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].split(";")[0] == media_type
    assert r.headers["x-content-type-options"] == "nosniff"  # a wrong type would not run


def test_every_module_import_resolves_to_a_shipped_file(client: TestClient) -> None:
    """The modules import each other by relative path; a typo would only show in a
    browser, as a blank page."""
    scripts = [p for p in ASSETS if p.suffix == ".js"]
    assert len(scripts) >= 8
    for script in scripts:
        for target in re.findall(
            r"""^import .* from "(\./[\w./-]+)";$""", script.read_text(), re.M
        ):
            resolved = (script.parent / target).resolve()
            assert resolved.is_file(), f"{script.name} imports {target}"
            url = "/static/app/" + resolved.relative_to(APP_DIR).as_posix()
            assert client.get(url).status_code == 200, url


@pytest.mark.parametrize("path", ASSETS, ids=lambda p: p.name)
def test_no_asset_loads_anything_from_another_host(path: Path) -> None:
    """Offline means no CDN: no http(s) URL in any shipped file of the page, and no
    protocol-relative one (``//host/...``) in a src, href or import."""
    text = path.read_text(encoding="utf-8")
    if "vendor" in path.parts:  # a vendored library's comments cite URLs; code may not
        text = re.sub(r"/\*.*?\*/|^\s*//.*$", "", text, flags=re.S | re.M)
    urls = set(re.findall(r"https?://[^\s\"'`)]+", text))
    assert urls <= NAMESPACES, urls
    assert not re.search(r"""(?:src|href)=["']//""", text)
    assert not re.search(r"""from ["']//|import\(["'](?:https?:)?//""", text)
    assert "@import" not in text


def test_examples_are_listed_with_their_kind(client: TestClient) -> None:
    r = client.get("/examples")
    assert r.status_code == 200
    by_name = {e["name"]: e for e in r.json()}
    shipped = {p.stem for p in (ROOT / "examples").glob("*.yaml")}
    assert set(by_name) == shipped
    assert by_name["chat-agent-80-20"]["kind"] == "plan"
    assert by_name["chat-agent-80-20"]["title"] == "chat-agent 80/20"
    assert by_name["chat-agent-80-20"]["description"].startswith("The canonical 80/20")
    assert by_name["what-if-80-20"]["kind"] == "comparison"


def test_an_example_is_served_as_parsed_json(client: TestClient) -> None:
    r = client.get("/examples/chat-agent-80-20")
    assert r.status_code == 200
    body = r.json()
    expected = yaml.safe_load((ROOT / "examples" / "chat-agent-80-20.yaml").read_text())
    assert body["document"] == expected
    assert body["kind"] == "plan" and body["name"] == "chat-agent-80-20"


@pytest.mark.parametrize(
    "name", ["nope", "..%2Fpyproject", "chat-agent-80-20.yaml", "%2Fetc%2Fpasswd"]
)
def test_an_unknown_example_is_a_404_with_the_error_body(client: TestClient, name: str) -> None:
    r = client.get(f"/examples/{name}")
    assert r.status_code == 404
    body = r.json()
    assert body["error"] == "not_found"
    if "%2F" not in name:  # a slash never reaches the route: no such path at all
        assert body["issues"][0]["field"] == "name"


def test_the_config_has_the_reports_gpu_colours(client: TestClient) -> None:
    body = client.get("/web/config").json()
    gpus = {g["id"] for g in client.get("/catalog/gpus").json()}
    assert set(body["gpu_colors"]) == gpus
    for gpu, colour in GPU_COLORS.items():
        if gpu in gpus:
            assert body["gpu_colors"][gpu] == colour
    assert body["api_key_required"] is False
    assert "csv" in body["report_formats"] and "xlsx" in body["report_formats"]
    assert body["deployment_targets"] == ["dynamo", "llm-d", "compose"]


def test_the_config_says_when_writes_need_a_key(migrated_sqlite_url: str) -> None:
    settings = Settings(database_url=migrated_sqlite_url, api_key=SecretStr("s3cret"))
    with TestClient(create_app(settings)) as c:
        assert c.get("/web/config").json()["api_key_required"] is True
        assert c.get("/").status_code == 200  # the page itself needs no key


EXAMPLE = yaml.safe_load((ROOT / "examples" / "chat-agent-80-20.yaml").read_text())


def test_validate_accepts_a_good_request_and_stores_nothing(client: TestClient) -> None:
    r = client.post("/plans/validate", json=EXAMPLE)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["valid"] is True
    assert any("context" in w for w in body["warnings"])  # the agent class's long prompts
    assert client.get("/plans").json()["total"] == 0


def test_validate_names_the_field_like_post_plans(client: TestClient) -> None:
    bad = {**EXAMPLE, "traffic": {**EXAMPLE["traffic"]}}
    bad["traffic"]["classes"] = [dict(c) for c in EXAMPLE["traffic"]["classes"]]
    bad["traffic"]["classes"][1]["prefix_hit_rate"] = 60
    r = client.post("/plans/validate", json=bad)
    assert r.status_code == 422
    issue = r.json()["issues"][0]
    assert issue["field"] == "traffic.classes[1].prefix_hit_rate"
    assert "did you mean 0.6?" in issue["message"]
    assert client.post("/plans", json=bad).json()["issues"] == r.json()["issues"]


def test_validate_checks_catalog_ids(client: TestClient) -> None:
    r = client.post("/plans/validate", json={**EXAMPLE, "model": "no-such-model"})
    assert r.status_code == 422
    assert r.json()["error"] == "unknown_entry"
    assert r.json()["issues"][0]["field"] == "model"


def test_validate_refuses_what_post_plans_refuses(client: TestClient) -> None:
    r = client.post(
        "/plans/validate", content=b"name: x", headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 415
    r = client.post(
        "/plans/validate",
        content=b'{"model": "a", "model": "b"}',
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 422


def test_validate_and_the_colours_see_custom_catalog_entries(client: TestClient) -> None:
    """The page checks requests against the merged catalog, as planning does, and gives
    a custom GPU a colour of its own."""
    request = {
        **EXAMPLE,
        "traffic": {"rate_rps": 5, "classes": [{"workload": "support-bot", "share": 1}]},
    }
    r = client.post("/plans/validate", json=request)
    assert r.status_code == 422 and r.json()["issues"][0]["field"] == "traffic.classes[0].workload"
    workload = client.get("/catalog/workloads/chat").json()
    workload.pop("source")
    workload.update(id="support-bot", name="Support bot")
    assert client.post("/catalog/workloads", json=workload).status_code == 201
    gpu = client.get("/catalog/gpus/l40s").json()
    gpu.pop("source")
    gpu.update(id="our-l40s", name="L40S, our contract")
    assert client.post("/catalog/gpus", json=gpu).status_code == 201
    assert client.post("/plans/validate", json=request).status_code == 200
    colours = client.get("/web/config").json()["gpu_colors"]
    assert colours["our-l40s"].startswith("#") and colours["our-l40s"] not in GPU_COLORS.values()
