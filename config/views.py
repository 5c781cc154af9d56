"""Site-wide views that belong to no app: the API docs page and the favicon."""

from django.http import HttpResponse
from drf_spectacular.views import SpectacularSwaggerSplitView


class ApiDocsView(SpectacularSwaggerSplitView):
    """Swagger UI from our static files (drf-spectacular-sidecar), its start-up script a separate request
    (no inline script: CSP). GET and HEAD only: DRF's OPTIONS metadata has no HTML template here and was a
    500. Who may see it: SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]."""

    http_method_names = ["get", "head"]


def favicon(request):
    """No icon, said without a 404 (browsers ask on every site; a 404 is a console error on each page)."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "public, max-age=86400"
    return response
