from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from config.health import healthz
from config.views import ApiDocsView, favicon
from ratings.floor import floor_write, page_ceiling

admin.site.site_header = "Empathy studies"
admin.site.site_title = "Empathy studies"
admin.site.index_title = "Studies, conditions, participants"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon),
    path("bench/floor/", floor_write, name="bench-floor"),
    path("bench/page/", page_ceiling, name="bench-page"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("analysis.api_urls")),
    path("analysis/", include("analysis.urls")),
    path("", include("ratings.urls")),
]
