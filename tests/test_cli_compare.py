"""``fleetplan compare FILE``, ``fleetplan comparisons list|show`` and ``fleetplan report``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from api_support import count_plans, count_rows
from compare_support import NAMES, SPEC, spec

from api import cli
from api.cli.compare import ProgressBar
from api.db.models import ComparisonRecord


def write(tmp_path: Path, body: object, name: str = "compare.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return str(path)


@pytest.fixture
def db(monkeypatch, migrated_sqlite_url) -> str:
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", migrated_sqlite_url)
    return migrated_sqlite_url


def table_lines(out: str) -> list[str]:
    """The table's data rows (after the dashes line, up to the first blank line)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("-----"))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line)
    return rows


def test_compare_prints_the_table_against_the_base(capfd, tmp_path):
    assert cli.main(["compare", write(tmp_path, SPEC), "--workers", "1"]) == 0
    out, err = capfd.readouterr()
    assert out.startswith("small what-if: 7 variants, base $")
    header = out.splitlines()[2]
    for column in [
        "variant",
        "status",
        "$/h",
        "Δ $/h",
        "Δ %",
        "$/Mtok",
        "GPUs",
        "by type",
        "P:D",
        "chat mode",
        "chat TTFT/TPOT ms",
        "agent mode",
        "agent TTFT/TPOT ms",
    ]:
        assert column in header, column
    rows = table_lines(out)
    assert [r.split("  ")[0].strip() for r in rows] == NAMES
    x2 = next(r for r in rows if r.startswith("traffic x2"))
    assert "+$" in x2 and "%" in x2 and "h100-sxm5-80gb" in x2
    assert "infeasible" in next(r for r in rows if r.startswith("TTFT 1 ms"))
    assert "Not planned:\n  TTFT 1 ms: infeasible: " in out
    assert "HiGHS" not in out
    # not a terminal: a plain progress line per finished variant
    assert err.splitlines()[-1].startswith("comparing 7 variants: 7/7 variants done")


def test_compare_json_is_the_whole_comparison(capfd, tmp_path):
    assert cli.main(["compare", write(tmp_path, SPEC), "--json", "--workers", "1"]) == 0
    out, _ = capfd.readouterr()
    doc = json.loads(out)
    assert [r["variant"] for r in doc["table"]] == NAMES
    assert len(doc["plans"]) == 7 and doc["plans"][0]["status"] == "optimal"
    assert doc["variants"][1]["request"]["traffic"]["rate_rps"] == 20


def test_compare_in_parallel_processes_gives_the_same_table(capfd, tmp_path):
    path = write(tmp_path, spec(variants=[{"name": "traffic x2", "rate_scale": 2.0}], sweeps=[]))
    assert cli.main(["compare", path, "--json", "--workers", "1"]) == 0
    serial = json.loads(capfd.readouterr()[0])["table"]
    assert cli.main(["compare", path, "--json", "--workers", "2"]) == 0
    parallel = json.loads(capfd.readouterr()[0])["table"]
    assert [r["cost_usd_per_hour"] for r in parallel] == [r["cost_usd_per_hour"] for r in serial]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            spec(variants=[{"name": "no GPU", "override": {"candidates": {"gpus": ["nope"]}}}]),
            "fleetplan: error: variants[no GPU].candidates.gpus[0]: unknown GPU 'nope'",
        ),
        (
            spec(variants=[{"name": "x", "rate_scale": 0}]),
            "fleetplan: error: variants.0.rate_scale: Input should be greater than 0",
        ),
        ({"variants": []}, "fleetplan: error: base: Field required"),
    ],
)
def test_compare_bad_input_is_one_line_and_exit_2(capfd, tmp_path, db, body, expected):
    assert cli.main(["compare", write(tmp_path, body), "--save"]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert err.startswith(expected), err
    assert len(err.strip().splitlines()) == 1
    assert count_rows(db, ComparisonRecord) == 0 and count_plans(db) == 0


def test_compare_missing_file_and_bad_workers(capfd, tmp_path):
    assert cli.main(["compare", str(tmp_path / "none.yaml")]) == 2
    assert "FILE: " in capfd.readouterr()[1]
    assert cli.main(["compare", write(tmp_path, SPEC), "--workers", "0"]) == 2
    assert "must be between 1 and 256" in capfd.readouterr()[1]


def test_compare_save_list_show_and_reports(capfd, tmp_path, db, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compare", write(tmp_path, SPEC), "--save", "--workers", "1"]) == 0
    out, _ = capfd.readouterr()
    saved = out.strip().splitlines()[-1]
    assert saved.startswith("saved: comparison ")
    cid = saved.removeprefix("saved: comparison ")
    assert "plan" in out.splitlines()[2]  # the plan id column
    assert count_rows(db, ComparisonRecord) == 1 and count_plans(db) == 7

    assert cli.main(["comparisons", "list"]) == 0
    out, _ = capfd.readouterr()
    assert cid in out and "done" in out and "7/7" in out and "small what-if" in out
    assert out.strip().endswith("1 of 1 comparison(s)")

    assert cli.main(["comparisons", "show", cid]) == 0
    out, _ = capfd.readouterr()
    assert [r.split("  ")[0].strip() for r in table_lines(out)] == NAMES

    # the variants' plans share the request's name: the list tells them apart
    assert cli.main(["plans", "list", "--limit", "50"]) == 0
    listed = capfd.readouterr()[0]
    for variant in NAMES:
        assert f"[variant {variant}]" in listed, variant

    assert cli.main(["comparisons", "show", cid, "--json"]) == 0
    shown = json.loads(capfd.readouterr()[0])
    assert shown["status"] == "done" and shown["done"] == shown["total"] == 7
    plan_id = shown["variants"][0]["plan_id"]

    # the comparison's report, to a default-named file and to stdout
    assert cli.main(["report", cid]) == 0
    assert capfd.readouterr()[0].startswith(f"wrote comparison-{cid}.html (")
    html = (tmp_path / f"comparison-{cid}.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "traffic x2" in html
    assert cli.main(["report", cid, "--format", "csv", "-o", "-"]) == 0
    csv_out = capfd.readouterr()[0]
    assert csv_out.startswith("variant,axis,status,usd_per_hour,")

    # a variant's plan report: sensitivity computed once, then cached
    target = tmp_path / "plan.json"
    assert cli.main(["report", plan_id, "-f", "json", "-o", str(target)]) == 0
    capfd.readouterr()
    doc = json.loads(target.read_text())
    assert doc["kind"] == "plan_report" and len(doc["sensitivity"]["rows"]) == 4
    from api.services import reports as report_records

    monkeypatch.setattr(report_records, "sensitivity", lambda *a, **k: pytest.fail("cached"))
    assert cli.main(["report", plan_id, "-f", "md", "-o", "-"]) == 0
    md = capfd.readouterr()[0]
    assert md.startswith("# small 70/30") and "Sensitivity" in md


def test_compare_json_with_save_is_the_stored_comparison(capfd, tmp_path, db):
    path = write(tmp_path, spec(variants=[], sweeps=[]))
    assert cli.main(["compare", path, "--save", "--json", "--workers", "1"]) == 0
    doc = json.loads(capfd.readouterr()[0])
    assert doc["status"] == "done" and doc["location"] == f"/comparisons/{doc['id']}"


def test_report_errors(capfd, db):
    assert cli.main(["report", "nope"]) == 2
    assert capfd.readouterr()[1].startswith("fleetplan: error: id: no plan or comparison")
    assert cli.main(["comparisons", "show", "nope"]) == 2
    assert "no comparison with id 'nope'" in capfd.readouterr()[1]
    assert cli.main(["report", "x", "--format", "pdf"]) == 2
    assert "--format" in capfd.readouterr()[1]


def test_report_of_a_running_comparison_is_refused(capfd, db):
    from api.db.models import ComparisonStatus
    from api.db.session import make_engine, make_sessionmaker

    engine = make_engine(db)
    with make_sessionmaker(engine)() as session:
        record = ComparisonRecord(
            name="stuck", status=ComparisonStatus.RUNNING, spec=SPEC, variants=[], done=3, total=7
        )
        session.add(record)
        session.commit()
        cid = record.id
    engine.dispose()
    assert cli.main(["report", cid]) == 1
    assert "still running (3 of 7 variants done)" in capfd.readouterr()[1]
    assert cli.main(["comparisons", "show", cid]) == 0
    assert "running: 3 of 7 variants done" in capfd.readouterr()[0]


def test_compare_save_needs_a_migrated_database(capfd, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", f"sqlite:///{tmp_path / 'none.db'}")
    assert cli.main(["compare", write(tmp_path, SPEC), "--save"]) == 1
    assert "fleetplan db upgrade" in capfd.readouterr()[1]


def test_progress_bar_on_a_terminal_redraws_one_line():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = ProgressBar("comparing 4 variants", stream)
    for done in range(5):
        bar(done, 4)
    bar.close()
    text = stream.getvalue()
    assert "\n" not in text
    assert text.count("\r") == 6  # five redraws and the erase
    assert "[" + "#" * 30 + "] 4/4 variants" in text
    assert text.endswith("\r\033[K")


def test_the_what_if_example_is_a_valid_comparison():
    from catalog.loader import load_catalog
    from planner.compare import check_variants, expand, parse_comparison

    doc = yaml.safe_load((Path(__file__).parent.parent / "examples/what-if-80-20.yaml").read_text())
    variants = expand(parse_comparison(doc))
    assert len(variants) == 20
    check_variants(variants, load_catalog())
