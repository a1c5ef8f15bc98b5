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

:mod:`api.cli` imports this module for its registrars, so this module imports
:mod:`api.cli` only inside functions.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from api.cli import Subparsers

FORMATS = ("html", "md", "csv", "json")
COMPARISON_STATUSES = ("running", "done", "failed")


# --------------------------------------------------------------------------- registrars


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 256:
        raise argparse.ArgumentTypeError(f"must be between 1 and 256, got {value}")
    return value


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
        type=_workers,
        default=None,
        help="processes solving variants (default: FLEETPLAN_COMPARE_WORKERS, else one per core)",
    )
    p.set_defaults(func=cmd_compare)


def register_comparisons(sub: Subparsers) -> None:
    p = sub.add_parser("comparisons", help="stored comparisons (FLEETPLAN_DATABASE_URL)")
    csub = p.add_subparsers(dest="comparisons_command", metavar="{list,show}")
    csub.required = True

    ls = csub.add_parser("list", help="stored comparisons, newest first")
    ls.add_argument("--status", choices=COMPARISON_STATUSES, help="only this status")
    ls.add_argument("--limit", type=_limit, default=20, help="at most this many (1-200, 20)")
    ls.add_argument("--json", action="store_true", help="print JSON (items and total)")
    ls.set_defaults(func=cmd_comparisons_list)

    show = csub.add_parser("show", help="print one comparison's table (or its progress)")
    show.add_argument("id", help="the comparison's id (from 'compare --save' or the list)")
    show.add_argument("--json", action="store_true", help="print it as GET /comparisons/{id}")
    show.set_defaults(func=cmd_comparisons_show)


def register_report(sub: Subparsers) -> None:
    p = sub.add_parser(
        "report",
        help="write the procurement report of a stored plan or comparison",
        description="Write the report of the stored plan or comparison ID: html (a stand-"
        "alone page with charts), md, csv (the bill of materials) or json.",
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


def _limit(text: str) -> int:
    from api.cli_plans import _limit as limit

    return limit(text)


# --------------------------------------------------------------------------- progress


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


def _spec(data: dict[str, Any]) -> Any:
    from api.cli_plans import _clean
    from planner.compare import parse_comparison
    from planner.errors import PlanningError

    try:
        return parse_comparison(data)
    except PlanningError as err:
        issues = [(f, _clean(m)) for f, m in err.issues]
        raise type(err)(_clean(err.message), issues) from None


def _yaml_calibration(name: str) -> Any:
    from planner.calibration import load_calibration

    return load_calibration(name)


def cmd_compare(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, EXIT_RUNTIME, CliError, load_settings, print_json
    from api.cli_plans import quiet_stdout, read_request
    from api.comparison_records import prepare_comparison
    from api.plan_records import solver_caps
    from catalog.loader import load_catalog
    from planner.compare import compare
    from planner.report.comparison_text import render_comparison_text

    settings = load_settings()
    data = read_request(args.file)
    spec = _spec(data)
    caps = solver_caps(settings)
    workers = args.workers or settings.compare_workers
    if args.save:
        return _compare_save(args, data, spec, settings, workers)

    catalog = load_catalog()
    prepared = prepare_comparison(data, spec, catalog, _yaml_calibration)
    bar = ProgressBar(f"comparing {len(prepared.variants)} variants")
    try:
        with quiet_stdout():
            result = compare(
                prepared.spec,
                catalog,
                caps,
                workers=workers,
                progress=bar,
                calibrations=prepared.calibrations,
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
    args: argparse.Namespace, data: dict[str, Any], spec: Any, settings: Any, workers: int | None
) -> int:
    from sqlalchemy.orm import sessionmaker

    from api.cli import EXIT_OK, EXIT_RUNTIME, CliError, print_json
    from api.cli_plans import database_session, quiet_stdout
    from api.comparison_records import (
        comparison_public,
        get_comparison,
        new_comparison_record,
        prepare_comparison,
    )
    from api.comparison_runner import run_comparison
    from api.custom_catalog import merged_catalog
    from api.db.models import ComparisonStatus
    from api.plan_records import solver_caps
    from api.routes.calibrations import find_calibration
    from catalog.loader import load_catalog
    from planner.report.comparison_text import render_comparison_text

    with database_session(settings) as session:
        catalog = merged_catalog(session, load_catalog())
        prepared = prepare_comparison(
            data, spec, catalog, lambda name: find_calibration(session, name)
        )
        record = new_comparison_record(prepared)
        session.add(record)
        session.commit()
        comparison_id = record.id
        sessions = sessionmaker(bind=session.get_bind(), expire_on_commit=False)
        bar = ProgressBar(f"comparing {len(prepared.variants)} variants")
        try:
            with quiet_stdout():
                status = run_comparison(
                    sessions,
                    comparison_id,
                    prepared.variants,
                    catalog,
                    solver_caps(settings),
                    workers=workers,
                    calibrations=prepared.calibrations,
                    on_progress=bar,
                )
        finally:
            bar.close()
        session.expire_all()
        stored = get_comparison(session, comparison_id)
        if stored is None:
            raise CliError("id", f"comparison {comparison_id} was deleted meanwhile", EXIT_RUNTIME)
        public = comparison_public(stored)
    if args.json:
        print_json(public.model_dump(mode="json"))
    elif status == ComparisonStatus.DONE:
        title = f"Comparison {comparison_id} {prepared.name or ''}".rstrip()
        print(render_comparison_text(public.table or [], title=title, plan_ids=True), end="")
        print(f"\nsaved: comparison {comparison_id}")
    if status != ComparisonStatus.DONE:
        raise CliError(
            "compare", f"comparison {comparison_id} failed: {public.error}", EXIT_RUNTIME
        )
    return EXIT_OK


# --------------------------------------------------------------------------- comparisons


def _comparison_or_error(session: Any, comparison_id: str) -> Any:
    from api.cli import CliError
    from api.comparison_records import get_comparison

    record = get_comparison(session, comparison_id) if len(comparison_id) <= 36 else None
    if record is None:
        raise CliError("id", f"no comparison with id {comparison_id[:80]!r}")
    return record


def cmd_comparisons_list(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, load_settings, print_json
    from api.cli_plans import database_session
    from api.comparison_records import comparison_summary, list_comparisons
    from api.db.models import ComparisonStatus
    from planner.report.text import render_table

    settings = load_settings()
    status = ComparisonStatus(args.status) if args.status else None
    with database_session(settings) as session:
        records, total = list_comparisons(session, status=status, limit=args.limit)
        items = [comparison_summary(r) for r in records]
    if args.json:
        print_json({"items": [i.model_dump(mode="json") for i in items], "total": total})
        return EXIT_OK
    headers = ["id", "created (UTC)", "status", "done", "name"]
    rows = [
        [
            i.id,
            i.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            i.status.value,
            f"{i.done}/{i.total}",
            i.name or "",
        ]
        for i in items
    ]
    print(render_table(headers, rows))
    print(f"{len(items)} of {total} comparison(s)")
    return EXIT_OK


def cmd_comparisons_show(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, load_settings, print_json
    from api.cli_plans import database_session
    from api.comparison_records import comparison_public
    from planner.report.comparison_text import render_comparison_text

    settings = load_settings()
    with database_session(settings) as session:
        public = comparison_public(_comparison_or_error(session, args.id))
    if args.json:
        print_json(public.model_dump(mode="json"))
        return EXIT_OK
    created = public.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    title = f"Comparison {public.id} {public.name or ''}".rstrip()
    if public.status.value == "done":
        print(render_comparison_text(public.table or [], title=title, plan_ids=True), end="")
        print(f"\ncreated {created}")
    elif public.status.value == "running":
        print(f"{title}\nrunning: {public.done} of {public.total} variants done")
    else:
        print(f"{title}\nfailed: {public.error}")
    return EXIT_OK


# --------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, EXIT_RUNTIME, CliError, load_settings
    from api.cli_plans import database_session, progress, quiet_stdout
    from api.comparison_records import comparison_report_input, get_comparison
    from api.custom_catalog import merged_catalog
    from api.db import repository as repo
    from api.db.models import ComparisonStatus
    from api.plan_records import solver_caps
    from api.report_records import (
        cached_sensitivity,
        compute_sensitivity,
        has_fleet,
        plan_report_input,
    )
    from catalog.loader import load_catalog
    from planner.report.render import render_comparison_report, render_plan_report

    settings = load_settings()
    ident = args.id
    with database_session(settings) as session:
        plan = repo.get_plan(session, ident) if len(ident) <= 36 else None
        comparison = None if plan is not None or len(ident) > 36 else get_comparison(session, ident)
        if plan is None and comparison is None:
            raise CliError("id", f"no plan or comparison with id {ident[:80]!r}")
        catalog = merged_catalog(session, load_catalog())
        render: Callable[[], tuple[str, str]]
        if plan is not None:
            stem = f"plan-{plan.id}"
            sens = cached_sensitivity(plan)
            wanted = not args.no_sensitivity and args.format != "csv"
            if wanted and sens is None and has_fleet(plan):
                label = "computing the sensitivity (4 re-plans)"
                with progress(label), quiet_stdout():
                    sens = compute_sensitivity(
                        session, plan, catalog, solver_caps(settings), settings.compare_workers
                    )
                session.commit()
            doc = plan_report_input(plan, sens)

            def render() -> tuple[str, str]:
                return render_plan_report(doc, args.format, catalog)
        else:
            assert comparison is not None
            if comparison.status != ComparisonStatus.DONE:
                why = (
                    f"still running ({comparison.done} of {comparison.total} variants done)"
                    if comparison.status == ComparisonStatus.RUNNING
                    else f"it failed: {comparison.error}"
                )
                raise CliError("id", f"comparison {ident} has no report: {why}", EXIT_RUNTIME)
            stem = f"comparison-{comparison.id}"
            cdoc = comparison_report_input(session, comparison)

            def render() -> tuple[str, str]:
                return render_comparison_report(cdoc, args.format, catalog)

        text, _media = render()
    out = args.output or f"{stem}.{args.format}"
    if out == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as err:
        raise CliError("--output", f"{out}: {err.strerror or err}", EXIT_RUNTIME) from None
    print(f"wrote {out} ({len(text.encode()):,} bytes, {args.format})")
    return EXIT_OK
