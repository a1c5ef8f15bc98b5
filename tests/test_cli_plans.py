"""``fleetplan plan FILE [--save] [--json]`` and ``fleetplan plans list|show``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from api_support import EXAMPLES, SMALL, count_plans, small

from api import cli

# The plain planning examples (other examples exercise other commands and options).
EXAMPLE_FILES = [
    EXAMPLES / name
    for name in [
        "chat-agent-80-20.yaml",
        "chat-budget-stock.yaml",
        "agent-heavy-no-prefix-cache.yaml",
        "code-completion-8b.yaml",
    ]
]


def write(tmp_path: Path, body: object, name: str = "request.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(body) if name.endswith(".yaml") else json.dumps(body))
    return str(path)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fleetplan: error: ")
    return lines[0]


@pytest.fixture
def db(monkeypatch, migrated_sqlite_url) -> str:
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", migrated_sqlite_url)
    return migrated_sqlite_url


# --------------------------------------------------------------------------- plan


def test_plan_prints_a_readable_plan(capfd, tmp_path):
    path = write(tmp_path, small(name="tiny chat"))
    assert cli.main(["plan", path]) == 0
    out, err = capfd.readouterr()
    assert out.startswith('Plan "tiny chat"\nstatus          optimal\n')
    for needle in [
        "cost            $",
        "/month",
        "per million tokens",
        "GPUs            ",
        "power",
        "prefill:decode",
        "\nPools\n",
        "chunk  max batch  rate r/s  load  TTFT ms  TPOT ms",
        "\nClasses (predicted latencies at the SLO percentile)\n",
        "meets SLO",
        "\nBinding constraints\n",
        "\nAlternatives (next-cheapest fleets)\n",
        "\nSolver: highs optimal",
        "Candidates: ",
        "\nLaunch (vLLM, one command per replica)\n",
        "    vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size=",
    ]:
        assert needle in out, needle
    assert "HiGHS" not in out and "HiGHS" not in err  # the C banner is silenced
    assert err == ""  # no progress line when stderr is not a terminal


def test_plan_json_is_the_plan_and_nothing_else_on_stdout(capfd, tmp_path):
    path = write(tmp_path, small(), "request.json")
    assert cli.main(["plan", path, "--json"]) == 0
    out, _ = capfd.readouterr()
    plan = json.loads(out)
    assert plan["status"] == "optimal"
    assert plan["model"] == "llama-3.1-8b"
    assert plan["pools"] and plan["classes"][0]["meets_slo"] is True


def test_plan_json_carries_the_lines_the_reports_print_under_assumed(capfd, tmp_path):
    """``assumed_notes`` is part of every plan document (planner.plan.notes): the CLI's
    --json has the same lines the text report prints under "Assumed" and the HTML and
    Markdown reports list under their "Assumed" heading, and the reports read them from
    the plan (one source)."""
    import html

    from catalog.loader import load_catalog
    from planner.report.render import render_plan_report

    ngram = {"method": "ngram", "draft_tokens": 4, "acceptance_length": 1.5}
    body = small(
        traffic={
            "rate_rps": 5,
            "classes": [
                {"workload": "chat", "share": 0.5, "speculative": ngram},
                {"workload": "rag", "share": 0.5},
            ],
        },
        candidates={"gpus": ["h100-sxm5-80gb", "l40s"], "modes": ["disaggregated"]},
    )
    path = write(tmp_path, body)
    assert cli.main(["plan", path, "--json"]) == 0
    plan = json.loads(capfd.readouterr().out)
    notes = plan["assumed_notes"]
    assert [n.split(":")[0] for n in notes] == ["chat", "rag", "chat"]
    assert "disaggregated TTFT" in notes[0] and "speculative ngram" in notes[2]

    assert cli.main(["plan", path]) == 0
    text = capfd.readouterr().out
    block = text.split("\n  Assumed:\n", 1)[1].split("\n\n", 1)[0]
    assert block.splitlines() == [f"    {n}" for n in notes]

    record = {"id": "p", "created_at": "2026-12-01T00:00:00Z", "request": body, "plan": plan}
    md, _ = render_plan_report(record, "md", load_catalog())
    listed = md.split("### Assumed\n", 1)[1].split("\n#", 1)[0]
    assert [ln[2:] for ln in listed.splitlines() if ln.startswith("- ")] == notes
    page, _ = render_plan_report(record, "html", load_catalog())
    assert all(html.escape(n, quote=False) in page for n in notes)
    # one source: the reports print the plan's lines, not lines of their own
    mine = {**plan, "assumed_notes": ["chat: assumed by this test"]}
    md, _ = render_plan_report({**record, "plan": mine}, "md", load_catalog())
    assert "- chat: assumed by this test" in md and notes[0] not in md


def test_plan_reads_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(SMALL)))
    assert cli.main(["plan", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "optimal"


def test_an_infeasible_plan_is_printed_with_its_reasons_and_exits_3(capsys, tmp_path):
    path = write(tmp_path, small(slo={"ttft_ms": 1}))
    assert cli.main(["plan", path]) == 3
    out = capsys.readouterr().out
    assert "status          infeasible" in out
    assert "Why no fleet meets this request" in out
    assert "TTFT" in out


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_every_example_plans(capsys, example):
    assert cli.main(["plan", str(example)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert out.splitlines()[1] in ("status          optimal", "status          feasible")
    assert "meets SLO" in out and " NO" not in out


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            small(traffic={"rate_rps": 5, "classes": [{"workload": "chat", "share": 0.9}]}),
            "fleetplan: error: traffic: class shares must sum to 1, got 0.9",
        ),
        (small(model="gpt-17"), "fleetplan: error: model: unknown model 'gpt-17'"),
        (small(colour="red"), "fleetplan: error: colour: unknown field 'colour'; expected one of"),
        ([1, 2], "fleetplan: error: FILE: "),
        ("just text", "fleetplan: error: FILE: "),
    ],
)
def test_bad_requests_exit_2_in_one_line(capsys, tmp_path, body, expected):
    path = write(tmp_path, body)
    assert cli.main(["plan", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert one_error_line(captured.err).startswith(expected)


def test_unreadable_files_exit_2(capsys, tmp_path):
    assert cli.main(["plan", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in one_error_line(capsys.readouterr().err)
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    assert cli.main(["plan", str(bad)]) == 2
    assert "not valid YAML or JSON" in one_error_line(capsys.readouterr().err)


# --------------------------------------------------------------------------- --save, plans


def test_save_list_and_show(capsys, tmp_path, db):
    path = write(tmp_path, small(name="saved chat"))
    assert cli.main(["plan", path, "--save"]) == 0
    out = capsys.readouterr().out
    plan_id = out.strip().splitlines()[-1].removeprefix("saved: plan ")
    assert out.startswith(f'Plan {plan_id} "saved chat"\n')
    assert count_plans(db) == 1

    assert cli.main(["plan", path, "--save", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["name"] == "saved chat" and record["status"] == "optimal"
    assert record["request"] == small(name="saved chat")
    assert record["plan"]["pools"]
    assert count_plans(db) == 2

    assert cli.main(["plans", "list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["id", "created", "(UTC)", "status"]
    assert [line.split()[0] for line in lines[2:4]] == [record["id"], plan_id]
    assert "saved chat" in lines[2] and lines[-1] == "2 of 2 plan(s)"

    assert cli.main(["plans", "list", "--status", "infeasible", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"items": [], "total": 0}
    assert cli.main(["plans", "list", "--model", "llama-3.1-8b", "--limit", "1", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["total"] == 2 and [i["id"] for i in listed["items"]] == [record["id"]]

    assert cli.main(["plans", "show", plan_id]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'Plan {plan_id} "saved chat", created ')
    assert "\nPools\n" in out
    assert cli.main(["plans", "show", record["id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == record


def test_the_api_serves_a_plan_saved_by_the_cli(capsys, tmp_path, db):
    from api_support import api_client

    assert cli.main(["plan", write(tmp_path, small()), "--save", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    with api_client(db) as client:
        assert client.get(f"/plans/{record['id']}").json() == record


def test_infeasible_plans_are_saved_too(capsys, tmp_path, db):
    assert cli.main(["plan", write(tmp_path, small(slo={"ttft_ms": 1})), "--save"]) == 3
    assert "saved: plan " in capsys.readouterr().out
    assert cli.main(["plans", "list", "--status", "infeasible", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 1


def test_show_unknown_id_exits_2(capsys, db):
    assert cli.main(["plans", "show", "no-such-plan"]) == 2
    assert "id: no plan with id 'no-such-plan'" in one_error_line(capsys.readouterr().err)


def test_bad_list_options_exit_2(capsys, db):
    assert cli.main(["plans", "list", "--limit", "0"]) == 2
    one_error_line(capsys.readouterr().err)
    assert cli.main(["plans", "list", "--status", "great"]) == 2
    one_error_line(capsys.readouterr().err)


def test_save_without_a_database_exits_1_and_creates_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", "sqlite:///./nope.db")
    path = write(tmp_path, small())
    assert cli.main(["plan", path, "--save"]) == 1
    assert "fleetplan db upgrade" in one_error_line(capsys.readouterr().err)
    assert cli.main(["plans", "list"]) == 1
    one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "nope.db").exists()


def test_save_to_an_unmigrated_database_exits_1(capsys, tmp_path, monkeypatch, sqlite_url):
    from sqlalchemy import create_engine, text

    engine = create_engine(sqlite_url)
    with engine.begin() as conn:  # the file exists, with no tables
        conn.execute(text("CREATE TABLE unrelated (x INTEGER)"))
    engine.dispose()
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", sqlite_url)
    assert cli.main(["plan", write(tmp_path, small()), "--save"]) == 1
    assert "run 'fleetplan db upgrade'" in one_error_line(capsys.readouterr().err)
