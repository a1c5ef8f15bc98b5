"""Hostile documents found by an attack on the running service (issue 14, findings 5, 7
and 9): each was a 500 or was silently accepted; each is now a 4xx naming the field,
and none of them stores anything."""

from __future__ import annotations

import copy
import re

import pytest
from api_support import api_client, assert_error, count_plans, count_rows, small

from api.db.models import ComparisonRecord

BASE = small()


def fields_of(error: dict) -> list[str]:
    """The issues' fields with list indices dotted (``a[0].b`` -> ``a.0.b``)."""
    return [re.sub(r"\[(\d+)\]", r".\1", i["field"]) for i in error["issues"]]


def deep_list(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


# (name, body, field the first issue must name)
COMPARISONS = [
    (
        "base without traffic, rate_scale variant (KeyError)",
        {"base": {"model": "llama-3.1-8b"}, "variants": [{"name": "x2", "rate_scale": 2}]},
        "base.traffic",
    ),
    (
        "rate_rps a string in the base, rate_scale variant (TypeError)",
        {
            "base": {"model": "llama-3.1-8b", "traffic": {"rate_rps": "abc", "classes": []}},
            "variants": [{"name": "x2", "rate_scale": 2}],
        },
        "base.traffic.rate_rps",
    ),
    (
        "classes as strings, class_overrides (AttributeError)",
        {
            "base": {**BASE, "traffic": {"rate_rps": 5, "classes": ["chat"]}},
            "variants": [{"name": "v", "class_overrides": {"chat": {"share": 1}}}],
        },
        "base.traffic.classes.0",
    ),
    (
        "an extra key nested 900 arrays deep (RecursionError)",
        {"base": {**BASE, "extra": deep_list(900)}, "variants": [{"name": "v", "rate_scale": 2}]},
        "base",
    ),
    (
        "an override nested 900 arrays deep",
        {"base": BASE, "variants": [{"name": "v", "override": {"x": deep_list(900)}}]},
        "variants.0.override",
    ),
    (
        "override replaces traffic by a number, then a mix",
        {
            "base": BASE,
            "variants": [{"name": "v", "override": {"traffic": 1}, "mix": {"chat": 1}}],
        },
        "variants.0.override.traffic",
    ),
    (
        "override replaces classes by strings, then class_overrides",
        {
            "base": BASE,
            "variants": [
                {
                    "name": "v",
                    "override": {"traffic": {"classes": ["chat"]}},
                    "class_overrides": {"chat": {"share": 1}},
                }
            ],
        },
        "variants.0.override.traffic.classes",
    ),
    (
        "override makes the rate a string, then rate_scale",
        {
            "base": BASE,
            "variants": [
                {"name": "v", "override": {"traffic": {"rate_rps": "5"}}, "rate_scale": 2}
            ],
        },
        "variants.0.override.traffic.rate_rps",
    ),
    (
        "a NUL in the comparison's name",
        {"name": "c\u0000", "base": BASE, "variants": [{"name": "v", "rate_scale": 2}]},
        "name",
    ),
    (
        "a NUL in a variant's name",
        {"base": BASE, "variants": [{"name": "a\u0000b", "rate_scale": 2}]},
        "variants.0.name",
    ),
    (
        "a newline at the end of a variant's name",
        {"base": BASE, "variants": [{"name": "a\n", "rate_scale": 2}]},
        "variants.0.name",
    ),
    (
        "rate_scale true",
        {"base": BASE, "variants": [{"name": "v", "rate_scale": True}]},
        "variants.0.rate_scale",
    ),
    (
        "a share sweep value true",
        {"base": BASE, "sweeps": [{"name": "s", "share_of": "chat", "values": [True]}]},
        "sweeps.0",
    ),
    (
        "a variant whose rate becomes a boolean",
        {"base": BASE, "variants": [{"name": "v", "override": {"traffic": {"rate_rps": True}}}]},
        "variants[v].traffic.rate_rps",
    ),
]


@pytest.mark.parametrize(("name", "body", "field"), COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_malformed_comparisons_are_422_naming_the_field(db_url, name, body, field):
    """On SQLite and PostgreSQL (where a NUL in a name was a 500, or an SQL error in
    the comparison's ``error``)."""
    with api_client(db_url, compare_workers=1) as client:
        response = client.post("/comparisons", json=body)
        error = assert_error(response, 422)
        fields = fields_of(error)
        assert any(f == field or f.startswith(field + ".") for f in fields), (fields, error)
    assert count_rows(db_url, ComparisonRecord) == 0


SCENARIO = {"name": "a", "mix": {"chat": 1}}

PLANS = [
    (
        "a scenario overriding traffic by a number, with a mix (AttributeError)",
        small(scenarios=[{"name": "a", "override": {"traffic": 1}, "mix": {"chat": 1}}]),
        "scenarios.0.override.traffic",
    ),
    (
        "a scenario overriding traffic by a number, with a rate scale",
        small(scenarios=[{"name": "a", "override": {"traffic": 1}, "rate_scale": 2}]),
        "scenarios.0.override.traffic",
    ),
    (
        "a scenario overriding the rate by a string",
        small(scenarios=[{"name": "a", "override": {"traffic": {"rate_rps": "x"}}}]),
        "scenarios.0.traffic.rate_rps",
    ),
    (
        "a scenario nesting scenarios",
        small(scenarios=[{"name": "a", "override": {"scenarios": [SCENARIO]}}]),
        "scenarios.0.override",
    ),
    (
        "a scenario override nested 900 arrays deep",
        {**small(), "scenarios": [{"name": "a", "override": {"x": deep_list(900)}}]},
        "scenarios.0.override",
    ),
    (
        "output lengths of 1e-300 tokens (IndexError in the solver)",
        small(
            traffic={
                "rate_rps": 5,
                "classes": [
                    {
                        "workload": "chat",
                        "share": 1,
                        "output_tokens": {"mean_tokens": 1e-300, "p90_tokens": 2e-300},
                    }
                ],
            }
        ),
        "traffic.classes.0.output_tokens.mean_tokens",
    ),
    (
        "rate_rps true",
        small(traffic={"rate_rps": True, "classes": [{"workload": "chat", "share": 1}]}),
        "traffic.rate_rps",
    ),
    (
        "rate_rps '5'",
        small(traffic={"rate_rps": "5", "classes": [{"workload": "chat", "share": 1}]}),
        "traffic.rate_rps",
    ),
    (
        "share '1'",
        small(traffic={"rate_rps": 5, "classes": [{"workload": "chat", "share": "1"}]}),
        "traffic.classes.0.share",
    ),
    ("verify.enabled 'false'", small(verify={"enabled": "false"}), "verify.enabled"),
    (
        "min_replicas 1.0",
        small(constraints={"min_replicas_per_pool": 1.5}),
        "constraints.min_replicas_per_pool",
    ),
    ("a NUL in the plan's name", small(name="p\u0000"), "name"),
    ("a trailing newline in the plan's name", small(name="plan\n"), "name"),
    (
        "an escape in a class name",
        small(
            traffic={
                "rate_rps": 5,
                "classes": [{"workload": "chat", "share": 1, "name": "c\u001b[31m"}],
            }
        ),
        "traffic.classes.0.name",
    ),
    (
        "a NUL in a scenario name",
        small(scenarios=[{"name": "s\u0000", "mix": {"chat": 1}}]),
        "scenarios.0.name",
    ),
    ("a NUL in a GPU id", small(candidates={"gpus": ["l40s\u0000"]}), "candidates.gpus.0"),
    (
        "17 chunk budgets",
        small(candidates={"chunk_budgets": list(range(16, 16 + 17))}),
        "candidates.chunk_budgets",
    ),
    (
        "13 scenarios",
        small(scenarios=[{"name": f"s{i}", "mix": {"chat": 1}} for i in range(13)]),
        "scenarios",
    ),
    ("tp 2**20", small(candidates={"tp": [2**20]}), "candidates.tp.0"),
    ("pp as a string", small(candidates={"pp": ["2"]}), "candidates.pp.0"),
    ("five pp degrees", small(candidates={"pp": [1, 2, 4, 8, 8]}), "candidates.pp"),
    (
        "session turns as a string",
        small(
            traffic={
                "rate_rps": 5,
                "classes": [{"workload": "chat", "share": 1, "sessions": {"turns": "3"}}],
            }
        ),
        "traffic.classes.0.sessions.turns",
    ),
]


@pytest.mark.parametrize(("name", "body", "field"), PLANS, ids=[c[0] for c in PLANS])
def test_malformed_plans_are_422_naming_the_field(db_url, name, body, field):
    with api_client(db_url) as client:
        response = client.post("/plans", json=body)
        error = assert_error(response, 422)
        fields = fields_of(error)
        assert any(f == field or f.startswith(field + ".") for f in fields), (fields, error)
    assert count_plans(db_url) == 0


def test_caps_say_the_limit_and_why(migrated_sqlite_url):
    with api_client(migrated_sqlite_url) as client:
        body = small(candidates={"chunk_budgets": list(range(16, 16 + 17))})
        error = assert_error(client.post("/plans", json=body), 422)
        assert "16" in error["issues"][0]["message"], error


def test_a_5000_digit_integer_is_a_field_level_422(migrated_sqlite_url):
    text = '{"model": "llama-3.1-8b", "traffic": {"rate_rps": ' + "9" * 5000
    text += ', "classes": [{"workload": "chat", "share": 1}]}, "verify": {"enabled": false}}'
    with api_client(migrated_sqlite_url) as client:
        response = client.post(
            "/plans", content=text.encode(), headers={"content-type": "application/json"}
        )
        error = assert_error(response, 422)
        assert error["issues"][0]["field"] == "traffic.rate_rps", error
    assert count_plans(migrated_sqlite_url) == 0


def test_numbers_and_names_that_are_fine_still_plan(migrated_sqlite_url):
    """Integers where numbers are expected, and names with unicode letters, are valid."""
    body = copy.deepcopy(small(name="Plan é 1 — ok"))
    body["traffic"]["rate_rps"] = 5  # an int for a float field
    with api_client(migrated_sqlite_url) as client:
        response = client.post("/plans", json=body)
        assert response.status_code == 201, response.text


@pytest.mark.parametrize("name", ["cal\n", "cal\x00", "cal\r\n"])
def test_calibration_names_refuse_a_trailing_newline(name, tmp_path):
    """Python's ``re.match`` let ``$`` match before a trailing newline: "cal\\n" passed
    the name check and became a file name (and the CLI then crashed)."""
    from planner.calibration.store import check_name, list_calibration_names
    from planner.errors import PlanningError

    with pytest.raises(PlanningError):
        check_name(name)
    (tmp_path / "cal\n.yaml").write_text("x")
    assert list_calibration_names(tmp_path) == []


def test_plan_requests_refuse_a_calibration_name_with_a_trailing_newline(migrated_sqlite_url):
    with api_client(migrated_sqlite_url) as client:
        error = assert_error(client.post("/plans", json=small(calibration="cal\n")), 422)
        assert fields_of(error) == ["calibration"]


CAPACITY = {"model": "llama-3.1-8b", "gpu": "l40s", "prompt_tokens": 1000, "output_tokens": 200}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_batch": 10**9}, "max_batch"),
        ({"prompt_tokens": 10**12}, "prompt_tokens"),
        ({"prompt_tokens": True}, "prompt_tokens"),
        ({"request_rate_rps": "5"}, "request_rate_rps"),
        ({"gpu": "l40s\n"}, "gpu"),
    ],
)
def test_capacity_analyses_are_bounded_and_strict(migrated_sqlite_url, change, field):
    with api_client(migrated_sqlite_url) as client:
        response = client.post("/analyses/capacity", json={**CAPACITY, **change})
        assert fields_of(assert_error(response, 422)) == [field]


def test_a_capacity_analysis_still_answers(migrated_sqlite_url):
    with api_client(migrated_sqlite_url) as client:
        response = client.post("/analyses/capacity", json=CAPACITY)
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("options", [{"requests": "5000"}, {"seed": True}, {"burst_cv": "1"}])
def test_simulation_options_are_strict_numbers(migrated_sqlite_url, options):
    with api_client(migrated_sqlite_url) as client:
        created = client.post("/plans", json=small())
        assert created.status_code == 201, created.text
        response = client.post(f"/plans/{created.json()['id']}/simulations", json=options)
        assert fields_of(assert_error(response, 422)) == list(options)
