"""``fleetplan compare FILE``, ``fleetplan comparisons list|show`` and ``fleetplan report``.

``compare`` reads a comparison document (YAML or JSON, ``-`` for stdin: a base
request, named variants, sweeps; ``planner.compare``), validates every variant up
front, solves them in parallel processes (``--workers``, default one per core)
with a progress bar on stderr, and prints the table against the base. With
``--save`` it plans against the database's catalog, stores the comparison and
every variant's plan like ``POST /comparisons`` does, and prints its id.

``report ID`` writes the procurement report of a stored plan or comparison
(``--format html|md|csv|json``, ``-o FILE``; ``-o -`` for stdout). A plan's
report computes its sensitivity once (a few seconds; ~13 s for the 80/20 fleet)
and caches it in the database, as the API does.

Exit status: 0 done; 2 bad input (``fleetplan: error: <field>: <message>``);
1 the database could not be used, the comparison failed or is still running.

Storing and running go through :mod:`api.services.comparisons`, reports through
:mod:`api.services.reports`, as the routes do.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from api.cli.common import (
    EXIT_OK,
    EXIT_RUNTIME,
    CliError,
    Subparsers,
    add_paging,
    add_show,
    command_group,
    database_session,
    int_range,
    load_settings,
    print_json,
    print_page,
    progress,
    quiet_stdout,
    read_request,
    record_cells,
    show_stored,
    without_value_error_prefix,
)
from api.schemas.comparisons import ComparisonPublic
from api.services import comparisons, reports
from api.services.calibrations import resolver
from api.services.catalog import shipped_catalog
from api.services.comparison_runner import new_owner_id, run_comparison
from api.services.database import sessions_like
from api.services.errors import NotFound
from api.services.plans import solver_caps
from api.services.reports import render_comparison_text
from api.settings import Settings
from planner.errors import PlanningError

FORMATS = reports.FORMATS
COMPARISON_STATUSES = tuple(s.value for s in comparisons.ComparisonStatus)


# --------------------------------------------------------------------------- registrars


def register_compare(sub: Subparsers) -> None:
    p = sub.add_parser(
        "compare",
        help="compare a base request with variants and sweeps (what-if)",
        description="Plan the base request and every variant of the comparison in FILE, "
        "in parallel, and print the table against the base.",
        epilog="exit status: 0 compared; 2 bad input (nothing is solved or stored); "
        "1 the database could not be used or solving failed.",
    )
    p.add_argument("file", metavar="FILE", help="the comparison, YAML or JSON; '-' reads stdin")
    p.add_argument(
        "--save",
        action="store_true",
        help="store the comparison and its variants' plans in the database "
        "(FLEETPLAN_DATABASE_URL) and print its id; the custom catalog entries apply",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON: the comparison (variants, table, plans; with --save the stored "
        "comparison as GET /comparisons/{id} returns it)",
    )
    p.add_argument(
        "--workers",
        type=int_range(1, 256),
        default=None,
        help="processes solving variants (default: FLEETPLAN_COMPARE_WORKERS, else one per core)",
    )
    p.set_defaults(func=cmd_compare)


def register_comparisons(sub: Subparsers) -> None:
    csub = command_group(sub, "comparisons", "stored comparisons (FLEETPLAN_DATABASE_URL)")

    ls = csub.add_parser("list", help="stored comparisons, newest first")
    ls.add_argument("--status", choices=COMPARISON_STATUSES, help="only this status")
    add_paging(ls)
    ls.set_defaults(func=cmd_comparisons_list)
    add_show(
        csub,
        "print one comparison's table (or its progress)",
        "the comparison's id (from 'compare --save' or the list)",
        "print it as GET /comparisons/{id}",
        cmd_comparisons_show,
    )


def register_report(sub: Subparsers) -> None:
    p = sub.add_parser(
        "report",
        help="write the procurement report of a stored plan or comparison",
        description="Write the report of the stored plan or comparison ID: html (a stand-"
        "alone page with charts), md, csv (a plan's bill of materials, a comparison's "
        "table), json or xlsx (a workbook).",
    )
    p.add_argument("id", help="a plan's or a comparison's id")
    p.add_argument("--format", "-f", choices=FORMATS, default="html", help="default html")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it ('-': stdout); default plan-ID.EXT or comparison-ID.EXT",
    )
    p.add_argument(
        "--no-sensitivity",
        action="store_true",
        help="a plan's report: do not compute the sensitivity table (four re-plans) "
        "if it is not cached yet",
    )
    p.set_defaults(func=cmd_report)


class ProgressBar:
    """Variants done, on stderr: a bar redrawn in place on a terminal, otherwise a
    plain line per finished variant."""

    WIDTH = 30

    def __init__(self, label: str, stream: Any = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if done == self.last:
            return
        self.last = done
        elapsed = time.perf_counter() - self.started
        if self.tty:
            filled = int(self.WIDTH * done / total) if total else self.WIDTH
            bar = "#" * filled + "." * (self.WIDTH - filled)
            self.stream.write(f"\r{self.label} [{bar}] {done}/{total} variants {elapsed:5.1f}s")
        elif done > 0:
            self.stream.write(f"{self.label}: {done}/{total} variants done ({elapsed:.1f}s)\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.last >= 0:
            self.stream.write("\r\033[K")
            self.stream.flush()


# --------------------------------------------------------------------------- compare


def _spec(data: dict[str, Any]) -> comparisons.ComparisonSpec:
    try:
        return comparisons.parse_comparison(data)
    except PlanningError as err:
        raise without_value_error_prefix(err) from None


def cmd_compare(args: argparse.Namespace) -> int:
    settings = load_settings()
    data = read_request(args.file)
    spec = _spec(data)
    caps = solver_caps(settings)
    workers = args.workers or settings.compare_workers
    if args.save:
        return _compare_save(args, data, spec, settings, workers)

    catalog = shipped_catalog()
    prepared = comparisons.prepare_comparison(
        data, spec, catalog, resolver(None, settings.calibration_dir)
    )
    bar = ProgressBar(f"comparing {len(prepared.variants)} variants")
    try:
        with quiet_stdout():
            result = comparisons.compare(
                prepared.spec,
                catalog,
                caps,
                workers=workers,
                progress=bar,
                calibrations=prepared.calibrations,
                verify_default=settings.verify_default,
                ray_address=settings.ray_address,
            )
    except Exception as err:  # a broken process pool, a solver crash...
        if isinstance(err, CliError | ValueError):
            raise
        raise CliError("compare", f"solving failed: {err}", EXIT_RUNTIME) from None
    finally:
        bar.close()
    if args.json:
        print_json(result.model_dump(mode="json"))
    else:
        print(render_comparison_text(result.table, title=prepared.name or "comparison"), end="")
    return EXIT_OK


def _compare_save(
    args: argparse.Namespace,
    data: dict[str, Any],
    spec: comparisons.ComparisonSpec,
    settings: Settings,
    workers: int | None,
) -> int:
    with database_session(settings) as session:
        owner = new_owner_id()
        started = comparisons.start_comparison(
            session, data, spec, shipped_catalog(), settings, owner
        )
        prepared = started.prepared
        bar = ProgressBar(f"comparing {len(prepared.variants)} variants")
        try:
            with quiet_stdout():
                status = run_comparison(
                    sessions_like(session),
                    started.id,
                    prepared.variants,
                    started.catalog,
                    solver_caps(settings),
                    owner=owner,
                    lease_s=settings.comparison_lease_s,
                    workers=workers,
                    calibrations=prepared.calibrations,
                    verify_default=settings.verify_default,
                    on_progress=bar,
                    ray_address=settings.ray_address,
                )
        finally:
            bar.close()
        try:
            stored = comparisons.reread_comparison(session, started.id)
        except NotFound:
            raise CliError(
                "id", f"comparison {started.id} was deleted meanwhile", EXIT_RUNTIME
            ) from None
        public = comparisons.comparison_public(stored)
    done = status == comparisons.ComparisonStatus.DONE
    if args.json:
        print_json(public.model_dump(mode="json"))
    elif done:
        title = f"Comparison {started.id} {prepared.name or ''}".rstrip()
        print(render_comparison_text(public.table or [], title=title, plan_ids=True), end="")
        print(f"\nsaved: comparison {started.id}")
    if not done:
        raise CliError("compare", f"comparison {started.id} failed: {public.error}", EXIT_RUNTIME)
    return EXIT_OK


# --------------------------------------------------------------------------- comparisons


def cmd_comparisons_list(args: argparse.Namespace) -> int:
    settings = load_settings()
    status = comparisons.ComparisonStatus(args.status) if args.status else None
    with database_session(settings) as session:
        page = comparisons.list_comparisons(session, status=status, limit=args.limit)
    headers = ["id", "created (UTC)", "status", "done", "name"]
    return print_page(
        args.json,
        page.items,
        page.total,
        headers,
        lambda i: [*record_cells(i), f"{i.done}/{i.total}", i.name or ""],
        "comparison",
    )


def _comparison_text(public: ComparisonPublic) -> str:
    created = public.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    title = f"Comparison {public.id} {public.name or ''}".rstrip()
    if public.status.value == "done":
        table = render_comparison_text(public.table or [], title=title, plan_ids=True)
        return f"{table}\ncreated {created}\n"
    if public.status.value == "running":
        return f"{title}\nrunning: {public.done} of {public.total} variants done\n"
    return f"{title}\nfailed: {public.error}\n"


def cmd_comparisons_show(args: argparse.Namespace) -> int:
    return show_stored(
        args.json, lambda session: comparisons.get_comparison(session, args.id), _comparison_text
    )


# --------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    settings = load_settings()
    ident = args.id

    @contextmanager
    def computing() -> Iterator[None]:
        with progress("computing the sensitivity (4 re-plans)"), quiet_stdout():
            yield

    with database_session(settings) as session:
        try:
            report = reports.stored_report(
                session,
                ident,
                args.format,
                shipped_catalog(),
                settings,
                with_sensitivity=not args.no_sensitivity,
                while_computing=computing,
            )
        except reports.ComparisonNotDone as err:
            why = (
                f"still running ({err.done} of {err.total} variants done)"
                if err.status == comparisons.ComparisonStatus.RUNNING
                else f"it failed: {err.error}"
            )
            raise CliError("id", f"comparison {ident} has no report: {why}", EXIT_RUNTIME) from None
    text, stem = report.text, report.stem
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    out = args.output or f"{stem}.{args.format}"
    if out == "-":
        if isinstance(text, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    try:
        Path(out).write_bytes(data)
    except OSError as err:
        raise CliError("--output", f"{out}: {err.strerror or err}", EXIT_RUNTIME) from None
    print(f"wrote {out} ({len(data):,} bytes, {args.format})")
    return EXIT_OK
