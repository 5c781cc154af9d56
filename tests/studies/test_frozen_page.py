"""A launched study's page: its frozen fields read-only, each with an "Amend this field" link that opens that
field's amendment form; its kind shown, not offered; no "Import corpus" and no "Delete" while it is live."""

import re

import pytest
from django.urls import reverse

from studies.models import Study

from .test_design import _frozen, ready_study

pytestmark = pytest.mark.django_db


def test_a_live_study_shows_its_frozen_fields_read_only_with_their_amendment_links(staff_client):
    study = ready_study()
    _frozen(study)
    assert Study.objects.get(pk=study.pk).state == Study.State.LIVE
    page = staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    amend = reverse("admin:studies_study_amend", args=[study.pk])
    for name in ("consent_text", "items_per_participant", "quota_per_condition"):
        assert re.search(rf'<(textarea|input)[^>]*name="{name}"[^>]*disabled', page), name
        assert f'href="{amend}?field={name}"' in page, name
    assert not re.search(r'<select[^>]*name="kind"', page)  # the kind is text, not a choice
    assert "Import corpus" not in page and reverse("admin:studies_study_delete", args=[study.pk]) not in page
    assert staff_client.get(reverse("admin:studies_study_delete", args=[study.pk])).status_code == 403
    # The link opens that field's own input on the amendment form.
    form = staff_client.get(f"{amend}?field=quota_per_condition").content.decode()
    assert (
        re.search(r'<input[^>]*name="quota_per_condition"', form)
        and "disabled" not in form.split("reason")[0]
    )
