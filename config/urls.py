from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.health import healthz
from ratings.floor import floor_write, page_ceiling

admin.site.site_header = "Empathy studies"
admin.site.site_title = "Empathy studies"
admin.site.index_title = "Studies, conditions, participants"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("bench/floor/", floor_write, name="bench-floor"),
    path("bench/page/", page_ceiling, name="bench-page"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("analysis.api_urls")),
    path("analysis/", include("analysis.urls")),
    path("recruiting/", include("recruiting.urls")),
    path("", include("ratings.urls")),
]
