"""The open-science bundle downloaded in headless Chromium from the study's admin page (phone 390×844 and desktop
1280×800) and from its analysts' page: axe-core finds no serious or critical violation on the pages that offer
it, the archive holds the bundle with a manifest that checks, and its pre-registration has the OSF sections."""

from __future__ import annotations

import hashlib
import zipfile

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from kinds.rating.demo import PUBLISHED_SLUG
from studies.demo.seed import demo_seed
from studies.models import Study
from studies.prereg import OSF_SECTIONS
from tests.a11y import axe_violations
from tests.browser_login import sign_in
from tests.screenshots import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-test-password"


def signed_in(page, live_server):
    return sign_in(page, live_server.url, "researcher", PASSWORD)


def downloaded(page, link_name: str, path) -> dict[str, bytes]:
    with page.expect_download() as download:
        page.get_by_role("link", name=link_name).first.click()
    download.value.save_as(path)
    with zipfile.ZipFile(path) as archive:
        return {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}


def test_the_bundle_downloads_from_the_studys_pages(settings, tmp_path, live_server, page_at):
    settings.VAR_DIR = tmp_path
    demo_seed(base_url=live_server.url)
    get_user_model().objects.create_superuser(username="researcher", email="", password=PASSWORD)
    study = Study.objects.get(slug=PUBLISHED_SLUG)
    archives = []
    for viewport in ("phone", "desktop"):
        page = signed_in(page_at(viewport), live_server)
        for url in (
            reverse("admin:studies_study_change", args=[study.pk]),
            reverse("admin:studies_study_prereg", args=[study.pk]),
            reverse("analysis:dashboard", args=[study.slug]),
        ):
            page.goto(live_server.url + url)
            assert axe_violations(page) == [], url
            screenshot(page, f"bundle-{viewport}-{url.strip('/').replace('/', '-')}")
        page.goto(live_server.url + reverse("admin:studies_study_change", args=[study.pk]))
        archives.append(downloaded(page, "Open-science bundle (zip)", tmp_path / f"{viewport}.zip"))

    page.goto(live_server.url + reverse("analysis:dashboard", args=[study.slug]))
    archives.append(downloaded(page, "Open-science bundle (zip)", tmp_path / "analysis.zip"))

    files = archives[0]
    assert all(archive == files for archive in archives)  # the same state, the same bundle, from every page
    manifest = dict(line.split("  ")[::-1] for line in files["MANIFEST.sha256"].decode().splitlines())
    assert set(manifest) == set(files) - {"MANIFEST.sha256"}
    assert all(hashlib.sha256(files[name]).hexdigest() == digest for name, digest in manifest.items())
    prereg = files["documentation/preregistration.md"].decode()
    for section in OSF_SECTIONS:
        assert f"\n## {section}\n" in prereg
    assert {"dataset_description.json", "datapackage.json", "croissant.json", "analysis/reproduce.py"} <= set(
        files
    )
