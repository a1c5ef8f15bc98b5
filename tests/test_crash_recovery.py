"""kill -9 while a comparison runs: a restarted service finishes it, and no solver
process outlives the service (issue 14, reliability finding 4).

Real processes: ``fleetplan serve`` on a temporary SQLite file, a comparison of
nine variants verified by simulation (seven short, two long: :data:`SLOW_SPEC`),
solved in two pool processes, SIGKILL once the short ones are stored.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from compare_support import BASE
from sqlalchemy import select
from sqlalchemy.pool import NullPool

from api.db.migrate import upgrade
from api.db.models import ComparisonRecord
from api.db.session import make_engine

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the server's children"
)

FLEETPLAN = str(Path(sys.executable).with_name("fleetplan"))
#: The base and six variants simulate 1,000 requests (a fraction of a second each),
#: the last two 200,000 (about 9 s each): once seven are stored, both pool processes
#: are in the middle of a long simulation when the service is killed. Without
#: ``planner.lifetime.die_with_parent`` they would outlive it by seconds (and until
#: their next task on a busy pool); with it they go at once (ORPHAN_GRACE_S allows
#: for a loaded machine).
SLOW_SPEC = {
    "name": "crash test",
    "base": {**BASE, "verify": {"enabled": True, "requests": 1000}},
    "sweeps": [
        {
            "name": "simulated",
            "path": "verify.requests",
            "values": [1001, 1002, 1003, 1004, 1005, 1006, 200_000, 199_999],
        }
    ],
}
FAST = 7
ORPHAN_GRACE_S = 4.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            children.setdefault(st[1], []).append(int(entry))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    return {p for p in pids if (st := _stat(p)) is not None and st[0] != "Z"}


class Server:
    def __init__(self, url: str, port: int, *extra: str, lease_s: float = 2.0):
        env = {
            **os.environ,
            "FLEETPLAN_DATABASE_URL": url,
            "FLEETPLAN_COMPARE_WORKERS": "2",
            "FLEETPLAN_COMPARISON_LEASE_S": str(lease_s),
        }
        cmd = [FLEETPLAN, "serve", "--port", str(port), "--log-level", "warning", *extra]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the server exited"
            try:
                if httpx.get(f"{self.base}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("the server did not answer /health within 60 s")

    def get(self, path: str) -> dict:
        response = httpx.get(self.base + path, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def database(tmp_path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    upgrade(url)
    yield url


def owner_of(url: str, comparison_id: str) -> str | None:
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            stmt = select(ComparisonRecord.owner).where(ComparisonRecord.id == comparison_id)
            return conn.execute(stmt).scalar_one()
    finally:
        engine.dispose()


def wait_for(server: Server, comparison_id: str, predicate, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = server.get(f"/comparisons/{comparison_id}")
        if predicate(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"comparison {comparison_id}: still {body['status']} {body['done']}")


def stored_plan_ids(body: dict) -> dict[str, str]:
    return {v["name"]: v["plan_id"] for v in body["variants"] if v["plan_id"]}


def test_kill_9_mid_comparison_then_restart_finishes_it_with_no_orphans(database):
    port = free_port()
    server = Server(database, port)
    try:
        posted = httpx.post(f"{server.base}/comparisons", json=SLOW_SPEC, timeout=60)
        assert posted.status_code == 202, posted.text
        ident = posted.json()["id"]
        total = posted.json()["total"]
        running = wait_for(server, ident, lambda b: b["done"] >= FAST, 120)
        assert running["status"] == "running" and running["done"] < total
        children = descendants(server.proc.pid)
        assert children, "the comparison should run in pool processes"
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while alive(children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(children), f"orphaned processes: {sorted(alive(children))}"
    finally:
        server.stop()

    restarted = Server(database, port)
    try:
        stalled = restarted.get(f"/comparisons/{ident}")
        kept = stored_plan_ids(stalled)
        assert len(kept) >= FAST  # stored before the kill
        done = wait_for(restarted, ident, lambda b: b["status"] != "running", 180)
        assert done["status"] == "done", done["error"]
        assert done["done"] == done["total"] == total
        assert all(v["plan_id"] for v in done["variants"])
        for name, plan_id in kept.items():  # not solved again
            assert stored_plan_ids(done)[name] == plan_id
        assert restarted.get("/plans?limit=1")["total"] == total
    finally:
        restarted.stop()
    assert not alive(descendants(restarted.proc.pid))


def test_with_two_workers_a_killed_worker_s_comparison_is_resumed_by_the_others(database):
    """``serve --workers 2``: kill -9 the worker process running the comparison; its
    solver processes die with it, another worker resumes the comparison, and
    stopping the service leaves no process behind."""
    port = free_port()
    server = Server(database, port, "--workers", "2")
    try:
        posted = httpx.post(f"{server.base}/comparisons", json=SLOW_SPEC, timeout=60)
        assert posted.status_code == 202, posted.text
        ident = posted.json()["id"]
        wait_for(server, ident, lambda b: b["done"] >= FAST, 120)
        owner = owner_of(database, ident)
        assert owner is not None
        worker = int(owner.split(":")[1])
        assert worker in descendants(server.proc.pid)
        solvers = descendants(worker)
        assert solvers
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while alive(solvers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(solvers), f"orphaned processes: {sorted(alive(solvers))}"
        done = wait_for(server, ident, lambda b: b["status"] != "running", 240)
        assert done["status"] == "done", done["error"]
        assert owner_of(database, ident) != owner
        everything = descendants(server.proc.pid)
    finally:
        server.stop()
    deadline = time.monotonic() + 15
    while alive(everything) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(everything)
