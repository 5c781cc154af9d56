from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from config.health import healthz
from config.views import ApiDocsView, favicon

urlpatterns = [path("healthz", healthz, name="healthz"), path("favicon.ico", favicon)]
if settings.BENCH_FLOOR_ENABLED:
    # The benchmark targets (/bench/floor/, /bench/page/): wired by name only, never imported, and absent
    # from production, which does not install the app (config/settings.py).
    urlpatterns.append(path("", include("bench.targets.urls")))
urlpatterns += [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("analysis.api_urls")),
    path("analysis/", include("analysis.urls")),
    path("recruiting/", include("recruiting.urls")),
    path("", include("ratings.urls")),
]
