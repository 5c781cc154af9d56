"""The open-science bundle of a study as a download (analysis/bundle.py): the same files `manage.py
export_bundle` writes, as one zip, for staff and analysts, linked from the study's admin page, its
pre-registration page and its analysts' page."""

from __future__ import annotations

import tempfile

from django.http import FileResponse, Http404, HttpRequest
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from analysis.bundle import bundle_zip
from analysis.permissions import analyst_required
from studies.kinds import kind_of
from studies.models import Study


@require_GET
@analyst_required
def bundle_download(request: HttpRequest, slug: str) -> FileResponse:
    study = get_object_or_404(Study, slug=slug)
    if kind_of(study).bundle is None:
        raise Http404("Studies of this kind have no bundle.")
    archive = tempfile.TemporaryFile()  # removed when the response closes it
    try:
        bundle_zip(study, archive)
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return FileResponse(archive, as_attachment=True, filename=f"{study.slug}-bundle.zip")
