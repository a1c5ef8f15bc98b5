"""Property-based fuzzing of the OpenAPI schema (schemathesis): no 5xx, and every
response conforms to the schema (status documented, body valid, content type).

Every operation gets ``MAX_EXAMPLES`` generated requests against an app on a
migrated SQLite database. Generated plan requests almost never name a catalog
model, so ``POST /plans`` cases fail validation fast; ``test_invalid_plan_bodies``
fuzzes ``POST /plans`` separately with hypothesis-made invalid bodies around a
valid one.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from api_support import api_client, assert_error, count_plans, small
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks as oa_checks

from api.main import create_app
from api.settings import Settings

#: Generated requests per operation: over the 37 operations, at least 1,000 in all
#: (issue 14: every operation, >= 1,000 cases, no 5xx); about a minute on 2 cores.
MAX_EXAMPLES = 28
MIN_CASES = 1_000

# Checks that assume what this API does not promise: schema-valid bodies are not
# always accepted (an unknown model id is valid JSON Schema, a 422 here), and the
# negative-data check cannot know the validators the schema cannot express.
EXCLUDED = [
    oa_checks.positive_data_acceptance,
    oa_checks.negative_data_rejection,
    oa_checks.missing_required_header,
    oa_checks.unsupported_method,
    oa_checks.ignored_auth,
]


def load_schema(database_url: str):
    app = create_app(Settings(database_url=database_url))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


# The operations, read from the schema of an app that is never started.
OPERATIONS = sorted(
    (op.ok().path, op.ok().method.upper()) for op in load_schema("sqlite://").get_all_operations()
)


def test_the_fuzzing_covers_every_operation_with_enough_cases():
    assert len(OPERATIONS) >= 37  # every route of the schema, read from it above
    assert len(OPERATIONS) * MAX_EXAMPLES >= MIN_CASES


@pytest.mark.parametrize(("path", "method"), OPERATIONS, ids=[f"{m} {p}" for p, m in OPERATIONS])
def test_openapi_fuzz(migrated_sqlite_url, path, method):
    """Schema-valid and schema-invalid requests to one operation: no 5xx, and each
    response is one the schema documents."""
    operation = load_schema(migrated_sqlite_url)[path][method]
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case):
        case.call_and_validate(excluded_checks=EXCLUDED)

    run()


# --------------------------------------------------------------------------- POST /plans

VALID = small()

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
PATHS = [
    ("model",),
    ("traffic",),
    ("traffic", "rate_rps"),
    ("traffic", "classes"),
    ("traffic", "classes", 0),
    ("traffic", "classes", 0, "share"),
    ("traffic", "classes", 0, "workload"),
    ("candidates",),
    ("candidates", "gpus"),
    ("slo",),
    ("constraints",),
    ("solver",),
    ("objective",),
]


def _set(body: dict, path: tuple, value: object) -> dict:
    body = json.loads(json.dumps(body))
    cur = body
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return body


@st.composite
def invalid_bodies(draw) -> object:
    """A valid small request with one part replaced by something that is not valid
    there (a wrong type, a value out of range, garbage), or random JSON."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_value)
    path = draw(st.sampled_from(PATHS))
    value = draw(json_value)
    body = _set(VALID, path, value)
    if body == VALID:
        body["unexpected"] = value
    return body


def test_invalid_plan_bodies_are_4xx_and_store_nothing(migrated_sqlite_url):
    with api_client(migrated_sqlite_url) as client:

        @given(body=invalid_bodies())
        @settings(
            max_examples=150,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        )
        def run(body):
            response = client.post("/plans", json=body)
            assert response.status_code < 500, (body, response.text)
            if response.status_code == 201:  # the change happened to keep it valid
                assert response.json()["status"] in ("optimal", "feasible", "infeasible")
                client.delete(f"/plans/{response.json()['id']}")
            else:
                assert_error(response, response.status_code)

        run()
    assert count_plans(migrated_sqlite_url) == 0
