"""The web page end to end, in a real headless Chromium driven by Playwright: the
service runs in a subprocess (uvicorn, a temporary migrated SQLite database,
verification off for speed) and the browser uses only what the page does.

Scenarios: load the 80/20 example and plan it (cost and pools shown); download the
HTML and CSV reports; start a what-if with one variant and read its table; a bad
field shows the API's message next to that field.

Skipped, saying why, when the ``playwright`` package or a Chromium is missing. The
browser is the system's (``FLEETPLAN_CHROMIUM``, else ``chromium`` or
``chromium-browser`` on PATH): ``playwright install`` is never needed. Marked
``e2e``: ``pytest -m 'not e2e'`` leaves them out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from api.db.migrate import upgrade

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
#: Read at import: the suite's autouse fixture clears FLEETPLAN_* variables per test.
CHROMIUM = (
    os.environ.get("FLEETPLAN_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
STARTUP_S = 60.0
PLAN_TIMEOUT_MS = 90_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(directory: Path, **settings: str) -> Iterator[str]:
    """The service on a free port, in its own process, on a fresh database in
    ``directory``, with ``FLEETPLAN_*`` settings; its base URL."""
    db = directory / "fleetplan.db"
    url = f"sqlite:///{db}"
    upgrade(url)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETPLAN_")}
    env.update(
        FLEETPLAN_DATABASE_URL=url,
        FLEETPLAN_VERIFY_DEFAULT="off",
        FLEETPLAN_COMPARE_WORKERS="2",
        **{f"FLEETPLAN_{k.upper()}": v for k, v in settings.items()},
    )
    log_path = directory / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app"),
            *("--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"the service did not start: {log_path.read_text()}")
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service (writes open to anyone)."""
    with serving(tmp_path_factory.mktemp("web-e2e")) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless system Chromium (skips when there is none, or no playwright)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed"
    )
    if not CHROMIUM:
        pytest.skip("no Chromium: set FLEETPLAN_CHROMIUM or put chromium on PATH")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    """A fresh page at 1280 x 900; fails the test on any uncaught script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda err: errors.append(str(err)))
    yield pg
    context.close()
    assert errors == [], errors


@pytest.fixture(scope="module")
def planned(browser: Any, server: str) -> str:
    """The 80/20 example planned through the page once (its URL); the tests below
    read it."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server)
    pg = context.new_page()
    try:
        pg.goto("/")
        pg.select_option("[data-testid=load-example]", "chat-agent-80-20")
        pg.wait_for_selector("text=Class 2: agent")
        assert '"rate_rps": 300' in pg.input_value("#request-json")
        pg.click("[data-testid=submit-plan]")
        pg.wait_for_selector("[data-testid=plan-cost]", timeout=PLAN_TIMEOUT_MS)
        return str(pg.url)
    finally:
        context.close()


def test_plan_the_80_20_example_and_see_cost_and_pools(page: Any, planned: str) -> None:
    page.goto(planned)
    cost = page.inner_text("[data-testid=plan-cost]")
    assert cost.startswith("$") and int(cost.strip("$").replace(",", "")) > 100
    rows = page.locator("[data-testid=plan-pools] tbody tr")
    assert rows.count() >= 2
    pools = page.inner_text("[data-testid=plan-pools]")
    assert "chat" in pools and "agent" in pools
    assert page.locator("svg.chart rect title").count() >= rows.count()  # hover values
    assert page.locator("h1").inner_text().startswith("chat-agent 80/20")
    # the alternatives come after the plan (the service's default): the page asks for
    # them and fills the table and the classes' reasons when they are solved
    page.wait_for_selector(
        "[data-testid=plan-alternatives] >> text=aggregated only", timeout=PLAN_TIMEOUT_MS
    )
    assert page.inner_text("[data-mode-reason=chat]").startswith("disaggregated")
    # what the reports print under "Assumed" (chat is disaggregated: its TTFT caveat)
    assert "chat: disaggregated TTFT" in page.inner_text("[data-testid=plan-assumed]")


def test_start_a_what_if_and_read_its_table(page: Any, planned: str) -> None:
    page.goto(planned)
    page.click("text=What-if from this plan")
    page.fill("#rate-scale", "1.5")
    page.click(".variant-row:has(#rate-scale) button")
    page.wait_for_selector("text=traffic x1.5")
    page.click("[data-testid=start-comparison]")
    table = page.wait_for_selector("[data-testid=comparison-table]", timeout=PLAN_TIMEOUT_MS)
    text = table.inner_text()
    assert "base" in text and "traffic x1.5" in text
    assert page.locator("[data-testid=comparison-table] tbody tr").count() == 2
    assert "+" in page.locator("[data-testid=comparison-table] tbody tr").nth(1).inner_text()
    with page.expect_download() as got:
        page.click("a:has-text('CSV')")
    assert "traffic x1.5" in Path(got.value.path()).read_text(encoding="utf-8")


def test_download_the_html_and_csv_reports(page: Any, planned: str) -> None:
    page.goto(planned)
    page.wait_for_selector("[data-testid=report-csv]")
    with page.expect_download() as got:
        page.click("[data-testid=report-csv]")
    csv_path = got.value.path()
    assert got.value.suggested_filename.endswith(".csv")
    header = Path(csv_path).read_text(encoding="utf-8").splitlines()[0]
    assert "gpu" in header.lower()
    with page.context.expect_page() as popup:
        page.click("[data-testid=report-html]")
    report = popup.value
    report.wait_for_load_state()
    assert "chat-agent 80/20" in report.content()
    assert "/report?format=html" in report.url


def test_a_bad_field_shows_the_api_message_next_to_it(page: Any, server: str) -> None:
    page.goto("/")
    page.select_option("[data-testid=load-example]", "chat-agent-80-20")
    page.wait_for_selector("text=Class 2: agent")
    field = "traffic.classes[1].prefix_hit_rate"
    page.fill(f"[data-bind='{field}']", "60")
    page.click("[data-testid=submit-plan]")
    message = page.locator(f"[data-path='{field}'] > .field-error")
    message.wait_for()
    assert "did you mean 0.6?" in message.inner_text()
    assert page.get_attribute(f"[data-bind='{field}']", "aria-invalid") == "true"
    assert page.evaluate("location.hash") in ("", "#/plan")  # nothing planned


def test_history_searches_every_stored_plan(page: Any, planned: str) -> None:
    page.goto("/#/history")
    page.fill("#f-text", "agent 80/2")
    page.wait_for_selector("text=matching")
    names = page.locator("[aria-label='Stored plans'] tbody tr").all_inner_texts()
    assert names and all("chat-agent 80/20" in n for n in names)
    page.fill("#f-text", "no such plan")
    page.wait_for_selector("text=No stored plan matches.")


def test_catalog_tabs_move_with_the_arrow_keys(page: Any, server: str) -> None:
    page.goto("/#/catalog")
    page.wait_for_selector("text=h100-sxm5-80gb")
    page.focus("#tab-gpus")
    page.keyboard.press("ArrowRight")
    assert page.get_attribute("#tab-models", "aria-selected") == "true"
    assert page.evaluate("document.activeElement.id") == "tab-models"
    page.wait_for_selector("#catalog-panel >> text=llama-3.1-70b")
    page.keyboard.press("End")
    assert page.get_attribute("#tab-calibrations", "aria-selected") == "true"
    assert page.get_attribute("#tab-gpus", "tabindex") == "-1"


def test_the_request_round_trips_through_its_yaml_view(page: Any, server: str) -> None:
    page.goto("/")
    page.select_option("[data-testid=load-example]", "chat-agent-80-20")
    page.wait_for_selector("text=Class 2: agent")
    page.check("[data-testid=format-yaml]")
    text = page.input_value("#request-json")
    assert "rate_rps: 300" in text and "workload: agent" in text and "{" not in text
    # edited as YAML, the form follows; back to JSON, the edit is there
    page.fill("#request-json", text.replace("rate_rps: 300", "rate_rps: 150"))
    assert page.input_value("[data-bind='traffic.rate_rps']") == "150"
    page.fill("#request-json", text.replace("rate_rps: 300", "rate_rps: [150"))
    assert "Not applied" in page.inner_text("#request-json-err")
    page.check("[data-testid=format-json]")
    assert '"rate_rps": 150' in page.input_value("#request-json")


API_KEY = "e2e-key"


def test_writes_take_the_api_key_kept_for_the_session(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With FLEETPLAN_API_KEY set, planning without the key names the key; once kept
    (sessionStorage) the page sends it as X-API-Key to plan and to delete."""
    with serving(tmp_path_factory.mktemp("web-e2e-key"), api_key=API_KEY) as base:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base)
        pg = context.new_page()
        pg.on("dialog", lambda dialog: dialog.accept())
        try:
            pg.goto("/")
            pg.wait_for_selector("text=(required for writes)")
            pg.select_option("[data-testid=load-example]", "code-completion-8b")
            pg.wait_for_selector("text=Class 1: code-completion")
            pg.click("[data-testid=submit-plan]")
            refused = pg.locator(".submit-status .notice.error")
            refused.wait_for()
            assert "X-API-Key" in refused.inner_text()
            pg.fill("#api-key", API_KEY)
            pg.click("#key-form button")
            assert pg.evaluate("sessionStorage.getItem('fleetplan.apiKey')") == API_KEY
            pg.click("[data-testid=submit-plan]")
            pg.wait_for_selector("[data-testid=plan-cost]", timeout=PLAN_TIMEOUT_MS)
            plan_id = pg.url.rsplit("/", 1)[1]
            pg.click("button:has-text('Delete')")
            pg.wait_for_url("**/#/history")
            with urllib.request.urlopen(f"{base}/plans") as r:
                assert plan_id not in r.read().decode()
        finally:
            context.close()


def test_the_page_helpers_in_the_browser(page: Any, server: str) -> None:
    """The modules' pure helpers, run in Chromium: field paths as the API names them,
    setting and pruning them, and the mix a class's share slider asks for."""
    page.goto("/")
    got = page.evaluate(
        """async () => {
        const state = await import('/static/app/js/state.js');
        const whatif = await import('/static/app/js/whatif.js');
        const doc = {traffic: {classes: [{workload: 'chat', share: 1}]}};
        state.setPath(doc, 'traffic.classes[0].slo.ttft_ms', 500);
        const set = JSON.stringify(doc);
        state.setPath(doc, 'traffic.classes[0].slo.ttft_ms', undefined);
        const classes = [{workload: 'chat', share: 0.6}, {workload: 'rag', share: 0.2},
                         {workload: 'agent', share: 0.2, name: 'agents'}];
        return {
          keys: state.pathKeys('traffic.classes[12].prompt_tokens.p90_tokens'),
          set, pruned: JSON.stringify(doc),
          mix: whatif.mixFor(classes, 'agents', 0.5),
        };
    }"""
    )
    assert got["keys"] == ["traffic", "classes", 12, "prompt_tokens", "p90_tokens"]
    assert (
        got["set"]
        == '{"traffic":{"classes":[{"workload":"chat","share":1,"slo":{"ttft_ms":500}}]}}'
    )
    assert got["pruned"] == '{"traffic":{"classes":[{"workload":"chat","share":1}]}}'
    assert got["mix"] == {"chat": 0.375, "rag": 0.125, "agents": 0.5}
