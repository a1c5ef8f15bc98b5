"""The ``fleetplan`` CLI, called through ``main()``."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from api import cli
from api.db.migrate import current_revision, head_revision
from catalog.loader import load_catalog


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fleetplan: error: ")
    return lines[0]


# --------------------------------------------------------------------------- catalog


def test_catalog_list_gpus_table(capsys, catalog):
    assert cli.main(["catalog", "list", "gpus"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0]
    for column in ["id", "name", "bf16 TFLOP/s", "fp8 TFLOP/s", "mem GB", "BW TB/s", "$/h"]:
        assert column in header
    assert set(lines[1]) <= {"-", " "}
    rows = lines[2:]
    assert [row.split()[0] for row in rows] == sorted(catalog.gpus)
    h100 = catalog.gpus.get("h100-sxm5-80gb")
    if h100 is not None:
        (row,) = [r for r in rows if r.startswith("h100-sxm5-80gb ")]
        assert "989" in row and "3.35" in row and f"{h100.price.usd_per_hour:.2f}" in row


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("models", ["layers", "params (B)", "KV bytes/token"]),
        ("workloads", ["prompt mean/p90", "output mean/p90", "prefix hit", "SLO"]),
        ("links", ["kind", "GB/s", "latency us"]),
    ],
)
def test_catalog_list_other_kinds(capsys, catalog, kind, columns):
    assert cli.main(["catalog", "list", kind]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(c in lines[0] for c in columns)
    assert [row.split()[0] for row in lines[2:]] == sorted(getattr(catalog, kind))


@pytest.mark.parametrize("kind", ["gpus", "models", "workloads", "links"])
def test_catalog_list_json(capsys, catalog, kind):
    assert cli.main(["catalog", "list", kind, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    entries = getattr(catalog, kind)
    assert data == [entries[i].model_dump(mode="json") for i in sorted(entries)]


def test_catalog_show_yaml_and_json(capsys, catalog):
    link_id, link = sorted(catalog.links.items())[0]
    assert cli.main(["catalog", "show", "links", link_id]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == link.model_dump(mode="json")
    assert cli.main(["catalog", "show", "links", link_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == link.model_dump(mode="json")


def test_catalog_show_unknown_id_exits_2(capsys):
    assert cli.main(["catalog", "show", "gpus", "no-such-gpu"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("fleetplan: error: id: unknown GPU 'no-such-gpu'")


def test_catalog_list_unknown_kind_exits_2(capsys):
    assert cli.main(["catalog", "list", "tpus"]) == 2
    line = one_error_line(capsys)
    assert "catalog list:" in line and "'tpus'" in line


def test_missing_command_exits_2(capsys):
    assert cli.main([]) == 2
    assert "command:" in one_error_line(capsys)


def test_version_and_help_exit_0(capsys):
    assert cli.main(["--version"]) == 0
    assert "fleetplan" in capsys.readouterr().out
    assert cli.main(["catalog", "--help"]) == 0
    assert "list" in capsys.readouterr().out


def test_bad_setting_exits_2_naming_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("FLEETPLAN_SOLVER_GAP", "lots")
    assert cli.main(["db", "current"]) == 2
    assert "FLEETPLAN_SOLVER_GAP:" in one_error_line(capsys)


# --------------------------------------------------------------------------- db


def test_db_upgrade_current_downgrade_from_any_directory(capsys, monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", url)

    assert cli.main(["db", "upgrade"]) == 0
    assert current_revision(url) == head_revision()
    capsys.readouterr()
    assert cli.main(["db", "current"]) == 0
    assert "up to date" in capsys.readouterr().out

    assert cli.main(["db", "downgrade", "--revision", "base"]) == 0
    assert current_revision(url) is None
    assert list(elsewhere.iterdir()) == []  # nothing written to the working directory


def test_db_unreachable_exits_1_in_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", f"sqlite:///{tmp_path / 'missing' / 'x.db'}")
    assert cli.main(["db", "upgrade"]) == 1
    assert "database:" in one_error_line(capsys)


# --------------------------------------------------------------------------- extension


def test_a_new_command_group_registers_itself(capsys, monkeypatch):
    def register_hello(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser("hello", help="say hello")
        p.add_argument("--name", default="fleet")
        p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)

    monkeypatch.setattr(cli, "REGISTRARS", [*cli.REGISTRARS, register_hello])
    assert cli.main(["hello", "--name", "h100"]) == 0
    assert capsys.readouterr().out == "hello h100\n"


def test_request_files_read_exponent_numbers_as_numbers(tmp_path):
    """Requests take strict numbers; PyYAML (YAML 1.1) reads ``1e3`` as a string, so
    the CLI's loader reads YAML 1.2 / JSON floats (issue 14)."""
    from api.cli.common import read_request

    path = tmp_path / "r.json"
    path.write_text('{"traffic": {"rate_rps": 1e1, "x": 2E-5, "s": "1e3", "n": 5}}')
    assert read_request(str(path)) == {"traffic": {"rate_rps": 10.0, "x": 2e-5, "s": "1e3", "n": 5}}


def test_a_whitespace_only_api_key_stops_the_cli_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("FLEETPLAN_API_KEY", "   ")
    assert cli.main(["serve", "--port", "1"]) == 2
    line = one_error_line(capsys)
    assert "FLEETPLAN_API_KEY" in line and "whitespace only" in line
