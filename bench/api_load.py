"""API load: latency and throughput of the planning service under concurrency.

Run: ``.venv/bin/python bench/api_load.py`` (or ``make bench``). Options:
``--concurrency N`` (16), ``--workers W`` (service processes, 2), ``--duration S``
(per read scenario, 15), ``--plans N`` (80/20 plans posted, 16).

Starts ``uvicorn --factory api.main:create_app --workers W`` on 127.0.0.1 (a free
port) with a temporary SQLite database built by the migrations, then runs each
scenario with N concurrent clients (threads, one HTTP connection each), bounded
in count and duration, loopback only:

1. ``POST /plans`` with the 80/20 example (seconds of CPU per plan);
2. ``POST /plans`` with a small request (one 8B model, two GPU types);
3. ``GET /plans/{id}`` of the stored plans (documents of 10-100 kB);
4. ``GET /plans?limit=50`` (a page of summaries).

Prints one table: requests, errors, p50/p99/max latency (ms) and throughput
(requests/s). With few requests, p99 is close to the maximum.

Measured on the 2-core development machine, shared (load average 7-11), with
``--plans 8``, 2 workers, 16 clients (issue 14; the 80/20 plans' documents and
the small ones mixed), req/s and p99:

=====================================  ==================  ==================
                                       ``GET /plans/{id}``  ``GET /plans?limit=50``
=====================================  ==================  ==================
before (h11, asyncio)                  310, 81 ms          104, 474 ms
before, with httptools and uvloop      1,225, 33 ms        124, 429 ms
after (documents sent as stored, one   1,332-1,386,        406-630,
thread hop; summary columns; both)     39-49 ms            135-188 ms
=====================================  ==================  ==================

The C HTTP parser and event loop make most of the single-plan figure; reading
summary columns only, the list's.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from api.db.migrate import upgrade  # noqa: E402

SMALL = {
    "model": "llama-3.1-8b",
    "traffic": {"rate_rps": 5, "classes": [{"workload": "chat", "share": 1.0}]},
    "candidates": {"gpus": ["h100-sxm5-80gb", "l40s"]},
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(database_url: str, port: int, workers: int = 1) -> subprocess.Popen:
    env = {**os.environ, "FLEETPLAN_DATABASE_URL": database_url}
    env.pop("FLEETPLAN_API_KEY", None)
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "api.main:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr is not None else ""
            raise SystemExit(f"uvicorn exited: {err[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("uvicorn did not answer /health within 30 s")


@dataclass
class Result:
    name: str
    concurrency: int
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)

    def row(self) -> list[str]:
        lat = sorted(self.latencies_ms)
        n = len(lat)

        def q(p: float) -> str:
            if not lat:
                return "-"
            return f"{lat[min(n - 1, round(p * (n - 1)))]:,.1f}"

        rps = n / self.wall_s if self.wall_s > 0 else 0.0
        return [
            self.name,
            str(self.concurrency),
            str(n),
            str(self.errors),
            q(0.5),
            q(0.99),
            f"{lat[-1]:,.1f}" if lat else "-",
            f"{statistics.fmean(lat):,.1f}" if lat else "-",
            f"{rps:,.2f}",
        ]


def run_scenario(
    name: str,
    base_url: str,
    concurrency: int,
    request: Callable[[httpx.Client, int], httpx.Response],
    *,
    max_requests: int,
    max_seconds: float,
    expect: int,
) -> Result:
    """``concurrency`` threads issue ``request`` until ``max_requests`` were sent in
    total or ``max_seconds`` passed (requests in flight then finish)."""
    result = Result(name, concurrency)
    counter = itertools.count()
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    def worker() -> None:
        with httpx.Client(base_url=base_url, timeout=300) as client:
            while time.monotonic() < deadline:
                i = next(counter)
                if i >= max_requests:
                    return
                t0 = time.perf_counter()
                try:
                    response = request(client, i)
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                elapsed = (time.perf_counter() - t0) * 1000.0
                with lock:
                    result.statuses[status] = result.statuses.get(status, 0) + 1
                    if status == expect:
                        result.latencies_ms.append(elapsed)
                    else:
                        result.errors += 1

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.wall_s = time.perf_counter() - t0
    return result


def render(results: list[Result]) -> str:
    headers = ["scenario", "clients", "ok", "errors", "p50 ms", "p99 ms", "max ms", "mean ms"]
    headers.append("req/s")
    rows = [r.row() for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([fmt(headers), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="service processes")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per read scenario")
    parser.add_argument("--plans", type=int, default=16, help="80/20 plans to post")
    args = parser.parse_args(argv)

    example = yaml.safe_load((ROOT / "examples" / "chat-agent-80-20.yaml").read_text())
    with tempfile.TemporaryDirectory(prefix="fleetplan-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        upgrade(url)
        port = free_port()
        server = start_server(url, port, args.workers)
        base = f"http://127.0.0.1:{port}"
        try:
            c = args.concurrency
            results = [
                run_scenario(
                    "POST /plans (80/20 example)",
                    base,
                    c,
                    lambda cl, _i: cl.post("/plans", json=example),
                    max_requests=args.plans,
                    max_seconds=180,
                    expect=201,
                ),
                run_scenario(
                    "POST /plans (small request)",
                    base,
                    c,
                    lambda cl, _i: cl.post("/plans", json=SMALL),
                    max_requests=400,
                    max_seconds=args.duration,
                    expect=201,
                ),
            ]
            page = httpx.get(f"{base}/plans", params={"limit": 200}).json()
            ids = [item["id"] for item in page["items"]]
            results += [
                run_scenario(
                    "GET /plans/{id}",
                    base,
                    c,
                    lambda cl, i: cl.get(f"/plans/{ids[i % len(ids)]}"),
                    max_requests=20_000,
                    max_seconds=args.duration,
                    expect=200,
                ),
                run_scenario(
                    "GET /plans?limit=50",
                    base,
                    c,
                    lambda cl, _i: cl.get("/plans", params={"limit": 50}),
                    max_requests=20_000,
                    max_seconds=args.duration,
                    expect=200,
                ),
            ]
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    cpus = os.cpu_count()
    load = os.getloadavg()[0]
    print(
        f"fleetplan API load, uvicorn ({args.workers} worker processes) on 127.0.0.1, SQLite, "
        f"{cpus} CPUs (load average {load:.1f} at the end)"
    )
    print(render(results))
    bad = {r.name: r.statuses for r in results if r.errors}
    if bad:
        print(f"unexpected statuses: {bad}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
