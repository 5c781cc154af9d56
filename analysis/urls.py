from django.contrib.auth import views as auth_views
from django.urls import path

from config.lazy_views import LazyViews
from studies.kinds import registered_kinds, resolved

# The views are imported on their first request (config/lazy_views.py): they load pandas, SciPy, statsmodels and
# matplotlib, which no command and no other page should pay for.
views = LazyViews("analysis.views")
judge_views = LazyViews("analysis.judge_views")
bundle_views = LazyViews("analysis.bundle_views")

app_name = "analysis"

urlpatterns = [
    path("", views.index, name="index"),
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="analysis/login.html", redirect_authenticated_user=False),
        name="login",
    ),
    # The study's analysts' page: its kind's view answers here, or it redirects to its kind's own page.
    path("<slug:slug>/", views.study_page, name="dashboard"),
    path("<slug:slug>/bundle.zip", bundle_views.bundle_download, name="bundle"),
    path("<slug:slug>/exports/<str:what>.csv", views.export, name="export"),
    path("<slug:slug>/exports/<str:what>/", views.export_file, name="export_file"),
    path("<slug:slug>/export-files/<int:pk>.csv", views.export_file_download, name="export_file_download"),
    path("<slug:slug>/judges/<slug:name>/", judge_views.judge_report_page, name="judge_report"),
    path("<slug:slug>/judges/<slug:name>/status.json", judge_views.judge_status, name="judge_status"),
    path("<slug:slug>/judges/<slug:name>/report.json", judge_views.judge_json, name="judge_json"),
    path(
        "<slug:slug>/judges/<slug:name>/tables/<str:table>.csv", judge_views.judge_table, name="judge_table"
    ),
]

# Each kind's own analysis pages (`StudyKind.analysis_urls`), under the same namespace: "analysis:pairwise".
for kind in registered_kinds():
    if kind.analysis_urls is not None:
        urlpatterns += resolved(kind.analysis_urls)
