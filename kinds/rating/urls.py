"""The rating kind's analysis pages beside its dashboard (`StudyKind.analysis_urls`), served under analysis/urls.py's
names; the dashboard itself answers at /analysis/<slug>/ (`StudyKind.analysis_view`)."""

from django.urls import path

from config.lazy_views import LazyViews

# Imported on their first request (config/lazy_views.py): they load pandas, SciPy, statsmodels and matplotlib.
views = LazyViews("kinds.rating.views")

urlpatterns = [
    path("<slug:slug>/status.json", views.dashboard_status, name="dashboard_status"),
    path("<slug:slug>/report.html", views.report, name="report"),
    path("<slug:slug>/figures/<str:name>.<str:fmt>", views.figure, name="figure"),
    path("<slug:slug>/tables/<str:name>.csv", views.table, name="table"),
]
