from django.urls import path

from config.lazy_views import LazyViews

api = LazyViews("analysis.api")  # imported on the first API request (config/lazy_views.py)

app_name = "api"

urlpatterns = [
    path("studies/", api.StudyList.as_view(), name="study-list"),
    path("studies/<slug:slug>/", api.StudyDetail.as_view(), name="study-detail"),
    path("studies/<slug:slug>/aggregates/", api.StudyAggregates.as_view(), name="study-aggregates"),
    path("studies/<slug:slug>/exports/<str:what>.csv", api.StudyExport.as_view(), name="study-export"),
    path("studies/<slug:slug>/tables/<str:name>.csv", api.StudyTable.as_view(), name="study-table"),
    path(
        "studies/<slug:slug>/judges/<slug:judge>/report/",
        api.StudyJudgeReport.as_view(),
        name="study-judge-report",
    ),
]
