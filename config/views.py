"""Site-wide views that belong to no app: the API docs page and the favicon."""

from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework import exceptions


class ApiDocsView(SpectacularSwaggerSplitView):
    """Swagger UI from our static files (drf-spectacular-sidecar), its start-up script a separate request
    (no inline script: CSP). GET and HEAD only: DRF's OPTIONS metadata has no HTML template here and was a
    500. Who may see it: SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]. A browser turned away gets a page that says
    why and links to the sign-in form; anything else (an API client, the start-up script) gets DRF's JSON."""

    http_method_names = ["get", "head"]

    def handle_exception(self, exc):
        refused = isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed))
        if (refused or isinstance(exc, exceptions.PermissionDenied)) and _wants_page(self.request):
            signed_in = self.request.user.is_authenticated and not refused
            sign_in = reverse("analysis:login") + "?" + urlencode({"next": self.request.get_full_path()})
            response = render(
                self.request,
                "errors/api_docs_refused.html",
                {"signed_in": signed_in, "sign_in_url": sign_in},
                status=403 if signed_in else 401,
            )
            if not signed_in:
                response["WWW-Authenticate"] = self.get_authenticate_header(self.request) or "Token"
            return response
        return super().handle_exception(exc)


def _wants_page(request) -> bool:
    """A browser opening the docs page (it asks for HTML), not the page's script nor an API client."""
    return "script" not in request.GET and "text/html" in request.headers.get("Accept", "")


def favicon(request):
    """No icon, said without a 404 (browsers ask on every site; a 404 is a console error on each page)."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "public, max-age=86400"
    return response
